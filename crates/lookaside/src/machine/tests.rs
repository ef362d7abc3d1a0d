use super::*;
use crate::event::Mode;

fn build(toml: &str) -> Result<Machine> {
    Machine::assemble(Some(toml), "m.toml", &[], &[])
}

fn misses(m: &Machine, s: usize) -> (u64, u64) {
    let c = m.ledger().total(s, |_, _, _| true);
    (c.accesses, c.misses)
}

fn load(addr: u64) -> Event {
    Event::reference(Kind::Load, addr, 8)
}

/// Metadata of a whole-system trace: its `kernel_layout`, or (none) an x86-64 Linux
/// capture booted with nokaslr that recorded none.
fn system_meta(layout: Option<&str>) -> Metadata {
    let mut m = Metadata::default();
    let mut set = |k: &str, v: &str| m.extra.insert(k.into(), v.into());
    set("capture", "qemu-system plugin");
    set(
        "machine",
        "qemu-system-x86_64 -cpu qemu64 -smp 1 -m 512M (TCG)",
    );
    set("kernel_command_line", "console=ttyS0 nokaslr pti=off");
    set("tlb_flushes", "recorded");
    if let Some(l) = layout {
        set("kernel_layout", l);
    }
    m
}

/// A whole-system capture made before captures recorded the kernel's own TLB flushes is said
/// to undercount, by any machine with a TLB; one that records them, or another trace, is not.
#[test]
fn a_system_capture_without_the_kernels_flushes_is_said_to_undercount() {
    let mut old = system_meta(None);
    old.extra.remove("tlb_flushes");
    let mut m = build(TLB).unwrap();
    m.bind_trace(Some(&old), "old.lks").unwrap();
    let w = m.warnings().join("\n");
    assert!(
        w.contains("tlb_flushes") && w.contains("capture it again"),
        "{w}"
    );
    for meta in [Some(system_meta(None)), Some(Metadata::default()), None] {
        let mut m = build(TLB).unwrap();
        m.bind_trace(meta.as_ref(), "t.lks").unwrap();
        assert!(!m.warnings().iter().any(|w| w.contains("tlb_flushes")));
    }
}

const TLB: &str = "[[tlb]]\nname='t'\nentries=8\nways='full'\nserves='unified'\n";
const CLASSES: &str = "[pages]\nregions = [{ kernel = 'direct_map', size = 'unmapped' },\n  { kernel = 'text', size = 'unmapped' }]\n";
/// A layout unlike x86-64's, so that a resolution from it is told from the fallback.
const LAYOUT: &str =
    "direct_map 0x100000-0x200000; text 0x300000-0x301000; vmalloc 0x400000-0x500000";

fn kload(addr: u64) -> Event {
    load(addr).with_mode(Mode::Kernel)
}

#[test]
fn kernel_class_regions_resolve_against_the_trace_layout() {
    let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
    // Before a trace is bound, a class is no region at all.
    assert_eq!(m.pages.backing(0x100000, 0), Some(12));
    m.bind_trace(Some(&system_meta(Some(LAYOUT))), "sys.lks")
        .unwrap();
    // Direct map and text unmapped; vmalloc and the rest translated.
    m.run_batch(&[
        kload(0x100008),
        kload(0x1ff000),
        kload(0x300000),
        kload(0x400000),
        load(0x1000),
    ]);
    assert_eq!(m.ledger().unmapped, 3);
    assert_eq!(misses(&m, 0), (2, 2));
    assert!(m.warnings().is_empty(), "{:?}", m.warnings());
    let j = m.kernel_regions_json().unwrap();
    assert_eq!(j["layout"], "trace");
    assert_eq!(
        j["regions"][0],
        serde_json::json!({"kernel": "direct_map", "start": "0x100000", "end": "0x200000"})
    );
    // Regions keep their order, numbered ones and classes alike: the first match wins.
    let mixed = "[pages]\nregions = [{ start = 0x100000, end = 0x180000, size = '512k' },\n  { kernel = 'direct_map', size = 'unmapped' }]\n";
    let mut m = build(&format!(
        "{mixed}[[tlb]]\nname='t'\nentries=8\npage=['4k','512k']\n"
    ))
    .unwrap();
    m.bind_trace(Some(&system_meta(Some(LAYOUT))), "sys.lks")
        .unwrap();
    assert_eq!(m.pages.backing(0x100000, 0), Some(19));
    assert_eq!(m.pages.backing(0x180000, 0), None);
}

#[test]
fn kernel_classes_fall_back_only_for_x86_64_nokaslr_captures() {
    let direct = 0xffff_8880_0000_1000;
    // An old capture of x86-64 Linux with nokaslr: the documented layout, said so.
    let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
    m.bind_trace(Some(&system_meta(None)), "old.lks").unwrap();
    m.run_batch(&[kload(direct), kload(0xffff_ffff_8100_0000)]);
    assert_eq!(m.ledger().unmapped, 2);
    let w = m.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("take the documented x86-64 nokaslr layout"),
        "{w:?}"
    );
    assert_eq!(m.kernel_regions_json().unwrap()["layout"], "x86_64_nokaslr");
    // Anything else: the classes resolve to nothing, and a trace with kernel references
    // is told so.
    let mut kaslr = system_meta(None);
    kaslr
        .extra
        .insert("kernel_command_line".into(), "console=ttyS0".into());
    for meta in [Some(kaslr), None] {
        let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
        m.bind_trace(meta.as_ref(), "t.lks").unwrap();
        m.run_batch(&[kload(direct)]);
        assert_eq!(m.ledger().unmapped, 0);
        let w = m.warnings();
        // No layout either to resolve the classes or to check the pricing against.
        assert!(w.len() == 1 && w[0].contains("pages.regions names kernel classes (direct_map, text) that the trace's kernel layout does not give (the trace records no kernel_layout metadata"), "{w:?}");
    }
    // A user-level trace: nothing to say.
    let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
    m.bind_trace(None, "user.lks").unwrap();
    m.run_batch(&[load(0x1000)]);
    assert!(m.warnings().is_empty());
    // A bad kernel_layout is an error naming the trace.
    let e = build(&format!("{CLASSES}{TLB}"))
        .unwrap()
        .bind_trace(Some(&system_meta(Some("heap 0x1-0x2"))), "bad.lks")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.lks")
            && e.contains("metadata kernel_layout: 'heap' is not a kernel address class"),
        "{e}"
    );
}

#[test]
fn kernel_class_regions_are_checked() {
    let err = |regions: &str| {
        build(&format!("[pages]\nregions = [{regions}]\n{TLB}"))
            .unwrap_err()
            .to_string()
    };
    assert!(err("{ kernel = 'text', size = '4k' }")
        .contains("pages.regions[0].size: a kernel class can only be declared unmapped"));
    assert!(err("{ kernel = 'text', start = 0, end = 4096, size = 'unmapped' }").contains("pages.regions[0]: give start and end, or kernel (a class of the trace's kernel layout), not both"));
    assert!(err("{ start = 0, size = 'unmapped' }").contains("pages.regions[0]: give start and end, or kernel = one of the trace's kernel address classes (direct_map, text, modules, vmalloc, vmemmap, fixmap, cpu_entry_area)"));
    let e = err("{ kernel = 'heap', size = 'unmapped' }");
    assert!(
        e.contains(
            "line 2, column 23: pages.regions[0].kernel: 'heap' is not one of: direct_map, text,"
        ),
        "{e}"
    );
}

#[test]
fn an_unmapped_kernel_model_warns_when_it_would_translate_the_direct_map() {
    // Chen's DECstation as it was: MIPS kseg0 and x86-64's kernel text unmapped by
    // number, the direct map translated, handlers synthesised for its misses.
    let old = "[pages]\nregions = [{ start = 0x80000000, end = 0xc0000000, size = 'unmapped' },\n  { start = '0xffffffff80000000', end = '0xffffffffc0000000', size = 'unmapped' }]\n";
    let fixed = format!("{old}  \n").replace("size = 'unmapped' }]", "size = 'unmapped' },\n  { kernel = 'direct_map', size = 'unmapped' }, { kernel = 'text', size = 'unmapped' }]");
    let meta = system_meta(Some(
        &crate::trace::kernel::KernelLayout::of(&crate::trace::kernel::X86_64_NOKASLR).describe(),
    ));
    let refs = [
        kload(0xffff_8880_0000_1000),
        kload(0xffff_ffff_8100_0000),
        load(0x1000),
    ];
    let mut m = build(&format!("{old}{TLB}")).unwrap();
    m.bind_trace(Some(&meta), "pipe.lks").unwrap();
    m.run_batch(&refs);
    let w = m.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("translates what the trace calls its direct_map 0xffff888000000000-0xffffc88000000000: its kernel references there are priced as mapped memory"), "{w:?}");
    assert!(
        !w[0].contains("text 0x"),
        "the text is unmapped by number: {w:?}"
    );
    let mut m = build(&format!("{fixed}{TLB}")).unwrap();
    m.bind_trace(Some(&meta), "pipe.lks").unwrap();
    m.run_batch(&refs);
    assert!(m.warnings().is_empty(), "{:?}", m.warnings());
    assert_eq!(m.ledger().unmapped, 2);
    // No unmapped kernel at all (a modern x86 TLB): the direct map is mapped there too.
    let mut m = build(TLB).unwrap();
    m.bind_trace(Some(&meta), "pipe.lks").unwrap();
    m.run_batch(&refs);
    assert!(m.warnings().is_empty());
    // Without kernel references, nothing to say.
    let mut m = build(&format!("{old}{TLB}")).unwrap();
    m.bind_trace(Some(&meta), "pipe.lks").unwrap();
    m.run_batch(&[load(0x1000)]);
    assert!(m.warnings().is_empty());
}

#[test]
fn page_size_map_backs_regions_with_large_pages() {
    let pages = "[pages]\nregions = [{ start = 0x200000, end = 0x600000, size = '2M' },\n  { start = 0x80000000, end = 0xc0000000, size = 'unmapped' }]\n";
    let both = build(&format!(
        "{pages}[[tlb]]\nname='d'\nentries=8\npage=['4k','2M']\nserves='unified'\n"
    ))
    .unwrap();
    let small = build(&format!(
        "{pages}[[tlb]]\nname='d'\nentries=8\npage='4k'\nserves='unified'\n"
    ))
    .unwrap();
    let trace = [
        load(0x200000),
        load(0x3ff000),
        load(0x201000),
        load(0x8000_1000),
        load(0x1000),
    ];
    for (mut m, expect) in [(both, (4, 2)), (small, (4, 4))] {
        m.run_batch(&trace);
        // A 2 MiB page is one entry where it can be held, and 4 KiB fragments otherwise.
        assert_eq!(misses(&m, 0), expect);
        assert_eq!(m.ledger().unmapped, 1);
    }
}

#[test]
fn kernel_fills_go_to_the_lower_partition() {
    let mut m = build(
        "[[tlb]]\nname='t'\nentries=4\npolicy='lru'\nplacement='kernel-lower'\npartition={lower=1, lower_policy='fifo', upper_policy='lru'}\n",
    )
    .unwrap();
    let k = |a| load(a).with_mode(Mode::Kernel);
    // Two kernel pages share the one lower slot; the user page keeps its upper slot.
    m.run_batch(&[load(0x9000), k(0x1000), k(0x2000), k(0x1000), load(0x9000)]);
    assert_eq!(misses(&m, 0), (5, 4));
}

#[test]
fn global_pages_are_shared_by_address_spaces() {
    let mut m =
        build("[machine]\nglobal_above = 0x80000000\n[[tlb]]\nname='t'\nentries=8\nasid=false\n")
            .unwrap();
    m.run_batch(&[
        load(0x8000_0000),
        load(0x1000),
        load(0x8000_0000).with_asid(1),
        load(0x1000).with_asid(1),
    ]);
    // The switch flushed the untagged user entry but kept the global one.
    assert_eq!(misses(&m, 0), (4, 3));
}

#[test]
fn the_last_byte_of_the_address_space_is_in_its_page_without_a_global_region() {
    // No global region is u64::MAX: the byte there is in the top page, tagged by its address
    // space as the rest of that page (it once read as global, and missed).
    for split in ["first", "split"] {
        let mut m = build(&format!(
            "[machine]\nstraddle = '{split}'\n[[tlb]]\nname='t'\nentries=8\nserves='data'\n"
        ))
        .unwrap();
        m.run_batch(&[
            load(0xffff_ffff_ffff_f3d3),
            load(0x2392a),
            load(u64::MAX).with_mode(Mode::Kernel),
            load(0x2392a),
            load(u64::MAX - 3),
        ]);
        assert_eq!(misses(&m, 0), (5, 2), "straddle = {split}");
    }
}

#[test]
fn bad_machines_name_the_key() {
    let e = |t: &str| build(t).unwrap_err().to_string();
    assert!(e("").contains("no TLB"));
    assert!(
        e("[machine]\nglobal_above = 0x1234\n[[tlb]]\nname='t'\nentries=4\n")
            .contains("machine.global_above")
    );
    assert!(
        e("[[tlb]]\nname='a'\nentries=4\nnext='b'\n[[tlb]]\nname='b'\nentries=4\nnext='a'\n")
            .contains("cycle")
    );
    assert!(
        e("[[tlb]]\nname='a'\nentries=4\n[[tlb]]\nname='b'\nentries=4\n").contains(
            "tlb.b.page: 'a' and 'b' both hold 4K pages and both take fetch references first"
        )
    );
    assert!(e(
        "[[tlb]]\nname='a'\nentries=4\nnext='b'\n[[tlb]]\nname='b'\nentries=4\nserves='data'\n"
    )
    .contains("tlb.a.next"));
    assert!(e("[[tlb]]\nname='a'\nentries=4\nnext='x'\n").contains("no TLB named 'x'"));
    assert!(
        e("[[tlb]]\nname='a'\nentries=4\nplacement='kernel-lower'\n").contains("tlb.a.placement")
    );
    assert!(
        e("[[tlb]]\nname='a'\nentries=4\npartition={lower=4}\n").contains("tlb.a.partition.lower")
    );
    assert!(e("[[tlb]]\nname='a b'\nentries=4\n").contains("tlb[0].name"));
}

/// x86's first level: 4 KiB pages in one structure, 2 MiB pages in another beside it,
/// one second level for both; regions of 2 MiB, 1 GiB and 64 KiB pages.
const SIBLINGS: &str = "[pages]\nregions = [{ start = 0x200000, end = 0x600000, size = '2M' },\n  { start = 0x40000000, end = 0x80000000, size = '1G' },\n  { start = 0x10000, end = 0x30000, size = '64k' }]\n[[tlb]]\nname='d'\nentries=4\nserves='data'\nnext='s'\n[[tlb]]\nname='d2m'\nentries=2\npage='2M'\nserves='data'\nnext='s'\n[[tlb]]\nname='s'\nentries=16\npage=['4k','2M']\n";

#[test]
fn siblings_take_the_pages_of_their_sizes() {
    let mut m = build(SIBLINGS).unwrap();
    m.run_batch(&[
        load(0x1000),      // 4K: d
        load(0x20_1000),   // 2M page 1: d2m
        load(0x3f_f000),   // 2M page 1 again: a hit in d2m
        load(0x40_0000),   // 2M page 2: d2m
        load(0x4000_0000), // 1G: d2m, as a 2M fragment
        load(0x4000_1000), // the same fragment: a hit
        load(0x4020_0000), // the next fragment
        load(0x1_0000),    // 64K: d, as 4K fragments
        load(0x1_1000),
        load(0x1_0008), // a hit
    ]);
    assert_eq!(misses(&m, 0), (4, 3));
    assert_eq!(misses(&m, 1), (6, 4));
    // Behind both: every miss, at the entry size of the page (2M fragments of the 1G one).
    assert_eq!(misses(&m, 2), (7, 7));
    assert_eq!(m.ledger().total(3, |_, _, _| true).misses, 7);
    // Instruction fetches have no first level here: untranslated.
    m.run_batch(&[Event::reference(Kind::Fetch, 0x1000, 4)]);
    assert_eq!(misses(&m, 2), (7, 7));
}

#[test]
fn a_next_level_can_be_siblings() {
    // One first level for everything; its misses go to a 4K+2M STLB or a 1G one.
    let mut m = build(
        "[pages]\nregions = [{ start = 0x40000000, end = 0x80000000, size = '1G' }]\n[[tlb]]\nname='d'\nentries=4\nnext=['s', 's1g']\nserves='unified'\n[[tlb]]\nname='s'\nentries=16\npage=['4k','2M']\n[[tlb]]\nname='s1g'\nentries=2\npage='1G'\n",
    )
    .unwrap();
    m.run_batch(&[
        load(0x1000),
        load(0x4000_0000),
        load(0x5000_0000), // another 4K fragment of the same 1G page: a hit in s1g
        load(0x1000),
    ]);
    assert_eq!(misses(&m, 0), (4, 3));
    assert_eq!(misses(&m, 1), (1, 1));
    assert_eq!(misses(&m, 2), (2, 1));
    let j = crate::report::result_json(&m, &Default::default());
    assert_eq!(
        j["structures"]["d"]["geometry"]["next"],
        serde_json::json!(["s", "s1g"])
    );
}

#[test]
fn the_documented_x86_machine_with_large_page_siblings_builds() {
    let readme = include_str!("../../../../docs/machines.md");
    let at = readme.find("**Structures for large pages.**").unwrap();
    let toml = readme[at..].split("```toml\n").nth(1).unwrap();
    let toml = toml.split("```").next().unwrap();
    let mut m = build(toml).unwrap();
    // A 1G data page: dtlb1g then stlb1g; a 1G code page: 4K fragments in the ITLB, 2M
    // ones in the STLB.
    let g = 0x7f40_0000_0000;
    m.run_batch(&[
        load(g),
        load(g + (5 << 20)),
        Event::reference(Kind::Fetch, g, 4),
    ]);
    let names = ["itlb", "dtlb", "dtlb2m", "dtlb1g", "stlb", "stlb1g"];
    let got: Vec<(u64, u64)> = (0..names.len()).map(|i| misses(&m, i)).collect();
    assert_eq!(got, [(1, 1), (0, 0), (0, 0), (2, 1), (1, 1), (1, 1)]);
}

#[test]
fn ambiguous_or_incomplete_siblings_are_errors() {
    let e = |t: &str| build(t).unwrap_err().to_string();
    // Two first-level structures for data holding 2M.
    assert_eq!(
        e(&SIBLINGS.replace("page='2M'", "page=['4k', '2M']")),
        "m.toml: line 13, column 1: tlb.d2m.page: 'd' and 'd2m' both hold 4K pages and both take load references first: structures at one level hold different page sizes (or is one the other's next level?)"
    );
    // Only large pages where 4K pages are in use (another structure holds 4K only, so
    // the pages stay 4K): the message names the setting that changes them.
    assert_eq!(
        e("[[tlb]]\nname='d'\nentries=4\npage='2M'\nserves='data'\n[[tlb]]\nname='i'\nentries=4\npage='4k'\nserves='instruction'\n"),
        "m.toml: line 4, column 1: tlb.d.page: 4K pages: no first-level TLB for load references holds that size or a smaller one (to cache them as fragments): 'd' holds 2M; the machine's pages are 4K (pages.size): for pages of 2M set --set pages.size=2M, or let 'd' hold 4K too"
    );
    // A structure that alone says it holds 2M pages makes them the machine's pages.
    let mut m = build("[[tlb]]\nname='d'\nentries=4\npage='2M'\nserves='unified'\n").unwrap();
    m.run_batch(&[load(0x1000), load(0x1f_f000), load(0x20_0000)]);
    assert_eq!(misses(&m, 0), (3, 2));
    assert_eq!(m.config().pages.size, PageSize::Size(2 << 20));
    let s2m = e(&SIBLINGS.replace("page=['4k','2M']", "page='2M'"));
    assert!(s2m.starts_with(
        "m.toml: line 9, column 1: tlb.d.next: 4K pages: no next level of 'd' for load references holds that size or a smaller one (to cache them as fragments): 's' holds 2M"
    ), "{s2m}");
    let next = |list: &str, a: &str, b: &str| {
        e(&format!("[[tlb]]\nname='d'\nentries=4\nnext={list}\nserves='unified'\n[[tlb]]\nname='s'\nentries=8\n{a}[[tlb]]\nname='t'\nentries=8\n{b}"))
    };
    assert!(next("['s', 't']", "", "").ends_with(
        "tlb.d.next: 's' and 't' both hold 4K pages and both take the fetch references that 'd' passes on: structures at one level hold different page sizes"
    ));
    build("[[tlb]]\nname='d'\nentries=4\nnext=['s', 't']\nserves='unified'\n[[tlb]]\nname='s'\nentries=8\n[[tlb]]\nname='t'\nentries=8\npage='2M'\n").unwrap();
    assert!(next("['s', 's']", "", "").ends_with("tlb.d.next: names 's' twice"));
    assert!(next(
        "['s', 't']",
        "serves='data'\n",
        "serves='data'\npage='2M'\n"
    )
    .ends_with("tlb.d.next: none of 's', 't' does serve the fetch references that 'd' passes on"));
    // Siblings for different kinds may hold the same sizes.
    build("[[tlb]]\nname='d'\nentries=4\nnext=['s', 't']\nserves='unified'\n[[tlb]]\nname='s'\nentries=8\nserves='data'\n[[tlb]]\nname='t'\nentries=8\nserves='instruction'\n").unwrap();
}

/// Sixteen chained structures of 2^24 entries each: the largest each may be, several GiB
/// together.
fn sixteen_huge() -> String {
    (0..16)
        .map(|i| {
            let next = if i < 15 {
                format!("next='t{}'\n", i + 1)
            } else {
                String::new()
            };
            format!("[[tlb]]\nname='t{i}'\nentries=16777216\nways='full'\n{next}")
        })
        .collect()
}

#[test]
fn a_machine_over_the_memory_limit_is_refused_before_anything_is_allocated() {
    let need = memory_estimate(&MachineConfig::from_toml(&sixteen_huge(), "m.toml").unwrap());
    assert!(need > 4 << 30, "{need}");
    // Within a limit of 1 GiB the refusal names the estimate, the limit and the option;
    // had the structures been built first, this would take gigabytes and seconds.
    let e = Machine::assemble_within(
        Some(&sixteen_huge()),
        "m.toml",
        &[],
        &[],
        MemoryLimit::of(1 << 30),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("m.toml: machine: the machine needs ~")
            && e.contains(&human_bytes(need))
            && e.contains("over the 1.0 GiB limit (--max-memory)"),
        "{e}"
    );
    // An invalid machine is refused for what is wrong with it, before the estimate (a
    // wiring error after sixteen huge structures).
    let bad = format!(
        "{}[[tlb]]\nname='x'\nentries=4\nnext='nowhere'\n",
        sixteen_huge()
    );
    let e = Machine::assemble_within(Some(&bad), "m.toml", &[], &[], MemoryLimit::of(1 << 30))
        .unwrap_err()
        .to_string();
    assert!(e.contains("tlb.x.next: no TLB named 'nowhere'"), "{e}");
    // A machine within the limit builds; the estimate follows the geometry.
    let small = "[[tlb]]\nname='t'\nentries=64\nways=4\n";
    let m = Machine::assemble_within(Some(small), "m.toml", &[], &[], MemoryLimit::of(1 << 20));
    assert!(m.is_ok());
    let one = memory_estimate(&MachineConfig::from_toml(small, "m.toml").unwrap());
    assert!((64 * 16..64 * 64).contains(&one), "{one}");
    assert!(MemoryLimit::default_for_host().bytes > 0);
    assert_eq!(MemoryLimit::parse("12G").unwrap().bytes, 12 << 30);
    assert!(MemoryLimit::parse("lots").is_err());
}

/// The estimate covers the memory system, the refill model and the page table too: a
/// 1 GiB physical memory or a cache of 2^24 lines is not free.
#[test]
fn the_memory_estimate_counts_every_section() {
    let est = |t: &str| memory_estimate(&MachineConfig::from_toml(t, "m.toml").unwrap());
    let tlb = "[[tlb]]\nname='t'\nentries=64\n";
    let base = est(tlb);
    let cache = est(&format!(
        "{tlb}[memory]\nmemory='64MiB'\n[memory.dcache]\nsize='64MiB'\nline=4\nmiss_cycles=15\n"
    ));
    assert!(cache > base + (16 << 20) * 16, "{cache}");
    let table = est(&format!(
        "{tlb}[pagetable]\norganisation='hashed'\nmemory='1GiB'\n"
    ));
    assert!(table > base + ((1 << 30) >> 12) * 16, "{table}");
    let refill = est(&format!("{tlb}[refill]\n"));
    assert_eq!(refill, 2 * base);
    // Four CPUs: four copies of a TLB of their own and the spare; one of a shared one.
    let cpus = format!("[machine]\ncpus=4\n{tlb}");
    assert_eq!(est(&cpus), 5 * base);
    assert_eq!(est(&format!("{cpus}shared=true\n")), base);
}

/// The DECstation 3100 under Mach 3.0, as shipped.
pub(super) const MACH3: &str =
    include_str!("../../../../python/lookaside/presets/decstation3100-mach3.toml");

#[test]
fn every_machine_of_one_cpu_says_when_the_trace_was_made_by_several() {
    // Software refill, a memory system, caches alone and a TLB tree: each takes the events
    // its own way, and each warns.
    let memory = include_str!("../../../../python/lookaside/presets/decstation5000-200.toml");
    let caches = "[[cache]]\nname='l1'\nsize='4K'\nline=64\nways=2\nserves='unified'\n";
    let tlb = "[[tlb]]\nname='t'\nentries=8\n";
    for (name, text) in [
        ("mach3", MACH3),
        ("memory", memory),
        ("caches", caches),
        ("tlb", tlb),
    ] {
        let mut m = Machine::assemble(Some(text), name, &[], &[]).unwrap();
        m.run_batch(&[
            load(0x1000),
            Event::on_cpu(2),
            load(0x2000),
            Event::on_cpu(0),
        ]);
        assert!(
            m.warnings()
                .iter()
                .any(|w| w.starts_with("cpus:") && w.contains("CPU 2")),
            "{name}: {:?}",
            m.warnings()
        );
        let mut m = Machine::assemble(Some(text), name, &[], &[]).unwrap();
        m.run_batch(&[load(0x1000), Event::on_cpu(0), load(0x2000)]);
        assert!(
            !m.warnings().iter().any(|w| w.starts_with("cpus:")),
            "{name}"
        );
    }
}

#[test]
fn a_mips_machine_refuses_user_references_above_kuseg_naming_the_fix() {
    let x86 = |m: &mut Machine| {
        let evs: Vec<Event> = (0..200)
            .map(|i| load(0x7ffd_0000_0000 + 64 * i))
            .chain([load(0x60_1000)])
            .collect();
        m.run_batch(&evs);
    };
    let mut m = Machine::assemble(Some(MACH3), "mach3", &[], &[]).unwrap();
    x86(&mut m);
    assert_eq!(m.dropped(), 200);
    let e = m.cannot_follow("t.lackey").unwrap().to_string();
    assert!(
        e.starts_with("t.lackey: refill.fold_user_addresses: 99.5 % of the user references lie above MIPS kuseg")
            && e.contains("--set refill.fold_user_addresses=true"),
        "{e}"
    );
    assert_eq!(m.warnings().len(), 1);
    // Folded, everything is simulated.
    let fold = ["refill.fold_user_addresses=true".to_string()];
    let mut f = Machine::assemble(Some(MACH3), "mach3", &[], &fold).unwrap();
    x86(&mut f);
    assert!(f.cannot_follow("t").is_none() && f.warnings().is_empty());
    assert_eq!((f.dropped(), f.dropped_share()), (0, 0.0));
    // One stray reference in a hundred and more is no reason to refuse or warn.
    let mut few = Machine::assemble(Some(MACH3), "mach3", &[], &[]).unwrap();
    let mut evs: Vec<Event> = (0..200).map(|i| load(0x40_0000 + 64 * i)).collect();
    evs.push(load(0x7ffd_0000_0000));
    few.run_batch(&evs);
    assert_eq!(few.dropped(), 1);
    assert!(few.cannot_follow("t").is_none() && few.warnings().is_empty());
}

/// An x86-64 layout for the MIPS model's tests: direct map, text and vmalloc only.
const X86_LAYOUT: &str = "direct_map 0xffff888000000000-0xffffc88000000000; text 0xffffffff80000000-0xffffffffc0000000; vmalloc 0xffffc90000000000-0xffffe90000000000";

#[test]
fn an_x86_64_system_trace_lands_on_the_mips_segments_by_its_kernel_layout() {
    let classes = "[pages]\nsize = \"4k\"\nregions = [{ kernel = 'direct_map', size = 'unmapped' }, { kernel = 'text', size = 'unmapped' }]\n";
    let text = MACH3.replace("[pages]\nsize = \"4k\"\n", classes);
    assert_ne!(text, MACH3);
    let x86 = ["refill.addresses=\"x86-64\"".to_string()];
    let evs = [
        load(0x40_1000),
        load(0x7ffd_0000_1000),
        kload(0xffff_8880_0000_1000),
        kload(0xffff_ffff_8100_0000),
        kload(0xffff_c900_0000_1000),
        // vmemmap: not in this layout, so no class: an address error.
        kload(0xffff_ea00_0000_0000),
    ];
    let mut m = Machine::assemble(Some(&text), "mach3", &[], &x86).unwrap();
    m.bind_trace(Some(&system_meta(Some(X86_LAYOUT))), "sys.lks")
        .unwrap();
    m.run_batch(&evs);
    let t = m.refill().unwrap().counts().totals();
    assert_eq!((t[0], t[1]), (2, 1), "{t:?}");
    assert_eq!((m.ledger().unmapped, m.dropped()), (2, 1));
    assert!(m.cannot_follow("sys.lks").is_none());
    let w = m.warnings();
    assert!(w.len() == 1 && w[0].contains("(1 of 6)"), "{w:?}");
    // The direct map and text not declared unmapped: mapped kernel data, and said so.
    let mut bare = Machine::assemble(Some(MACH3), "mach3", &[], &x86).unwrap();
    bare.bind_trace(Some(&system_meta(Some(X86_LAYOUT))), "sys.lks")
        .unwrap();
    bare.run_batch(&evs);
    assert_eq!(bare.refill().unwrap().counts().totals()[1], 3);
    let w = bare.warnings();
    assert!(
        w.iter().any(|w| w.contains("MIPS kseg0: refill.addresses")
            && w.contains("direct_map 0xffff888000000000-0xffffc88000000000")),
        "{w:?}"
    );
    // A generated workload's addresses are MIPS ones: refused.
    let mut gen = Machine::assemble(Some(MACH3), "mach3", &[], &x86).unwrap();
    gen.run_batch(&[load(0x40_0000)]);
    let e = gen.cannot_follow("workload:os").unwrap().to_string();
    assert!(
        e.starts_with("workload:os: refill.addresses: \"x86-64\" maps"),
        "{e}"
    );
    // More 4 MB blocks in one address space than kuseg holds: refused, naming the page.
    let mut big = Machine::assemble(Some(MACH3), "mach3", &[], &x86).unwrap();
    big.bind_trace(Some(&system_meta(Some(X86_LAYOUT))), "big.lks")
        .unwrap();
    let many: Vec<Event> = (0..=512u64).map(|b| load(b << 33 | 0x123)).collect();
    big.run_batch(&many);
    let e = big.cannot_follow("big.lks").unwrap().to_string();
    assert!(
        e.starts_with("big.lks: refill.addresses: address space 0 touches more than 512")
            && e.contains("page at 0x40000000000"),
        "{e}"
    );
}

#[test]
fn kernel_references_the_mips_model_cannot_translate_are_a_warning() {
    // A Linux trace's kernel references above 4 GB (x86-64's direct map): address errors
    // on the MIPS model, whatever folding says; warned about, not refused.
    let fold = ["refill.fold_user_addresses=true".to_string()];
    let mut m = Machine::assemble(Some(MACH3), "mach3", &[], &fold).unwrap();
    let mut evs: Vec<Event> = (0..90).map(|i| load(0x40_0000 + 4096 * i)).collect();
    evs.extend((0..10).map(|i| load(0xffff_8880_0000_0000 + 4096 * i).with_mode(Mode::Kernel)));
    m.run_batch(&evs);
    assert_eq!(m.dropped(), 10);
    assert!(m.cannot_follow("t").is_none());
    let w = m.warnings();
    assert!(
        w.len() == 1
            && w[0].starts_with("10.0 % of the translations were not simulated (10 of 100)"),
        "{w:?}"
    );
    let j = crate::report::result_json(&m, &Default::default());
    assert_eq!(j["warnings"], serde_json::json!(w));
    assert_eq!(j["trace"]["dropped"], 10);
    assert!(crate::report::table(&j).contains("\nwarning: 10.0 % of the translations"));
}

#[test]
fn an_access_over_many_pages_translates_each_page_once() {
    // 65535 bytes from 0x10ff8: pages 0x10..=0x20, 17 translations (16 straddles), on
    // every path (the fast path, regions, the refill model).
    let big = Event::reference(Kind::Load, 0x10ff8, u16::MAX);
    let regions = "[pages]\nregions = [{ start = 0x200000, end = 0x400000, size = '2M' }]\n";
    for text in [
        "[[tlb]]\nname='t'\nentries=64\nways='full'\n".to_string(),
        format!("{regions}[[tlb]]\nname='t'\nentries=64\nways='full'\npage=['4k','2M']\n"),
    ] {
        let mut m = build(&text).unwrap();
        m.run_batch(&[big]);
        assert_eq!(
            (misses(&m, 0), m.ledger().straddles),
            ((17, 17), 16),
            "{text}"
        );
        // The same pages again, one small access each: all hit.
        let again: Vec<Event> = (0x10..=0x20).map(|p| load(p << 12)).collect();
        m.run_batch(&again);
        assert_eq!(misses(&m, 0), (34, 17));
    }
    let fold = ["refill.fold_user_addresses=true".to_string()];
    let mut r = Machine::assemble(Some(MACH3), "mach3", &[], &fold).unwrap();
    r.run_batch(&[big]);
    assert_eq!((misses(&r, 0).0, r.ledger().straddles), (17, 16));
    // From a 4 KiB page into a 2 MiB one: the large page is one translation.
    let mut m = build(&format!(
        "{regions}[[tlb]]\nname='t'\nentries=64\nways='full'\npage=['4k','2M']\n"
    ))
    .unwrap();
    m.run_batch(&[Event::reference(Kind::Load, 0x1f_f000, 40000)]);
    assert_eq!(misses(&m, 0), (2, 2));
}

#[test]
fn an_access_past_the_top_of_the_address_space_is_clamped_and_counted() {
    let mut m = build("[[tlb]]\nname='t'\nentries=64\nways='full'\n").unwrap();
    // From the last page but one, 8 KiB: two pages, then past 2^64.
    m.run_batch(&[Event::reference(
        Kind::Store,
        0u64.wrapping_sub(0x1800),
        0x2000,
    )]);
    assert_eq!((misses(&m, 0), m.ledger().straddles), ((2, 2), 1));
    assert_eq!((m.ledger().wrapped, m.dropped()), (1, 1));
    assert_eq!(m.warnings().len(), 1);
    // Straddling the top within one page after the clamp: one page, still counted.
    let mut m = build("[[tlb]]\nname='t'\nentries=64\nways='full'\n").unwrap();
    m.run_batch(&[Event::reference(Kind::Load, u64::MAX - 3, 8)]);
    assert_eq!((misses(&m, 0), m.ledger().wrapped), ((1, 1), 1));
}

/// A policy that reads the reference's mode is told it on every path — the fast path's
/// first level, a next level, a 3C shadow — and keeps the kernel's entries through a user
/// stream that LRU lets flush them; where nothing tells it, it is refused.
#[test]
fn user_first_keeps_the_kernels_entries() {
    let machine = |policy: &str, three_c: bool| {
        format!(
            "[[tlb]]\nname='d'\nentries=2\nways='full'\nserves='unified'\nnext='s'\n\
             [[tlb]]\nname='s'\nentries=4\nways='full'\npolicy='{policy}'\n{}",
            if three_c { "3c=true\n" } else { "" }
        )
    };
    // Two kernel pages, then a user stream through 6 pages, then the kernel pages again.
    let mut events: Vec<Event> = (0..2).map(|p| kload(0x10_0000 + p * 4096)).collect();
    for round in 0..3 {
        events.extend((0..6).map(|p| load((round + p) * 4096 + 0x1000)));
        events.extend((0..2).map(|p| kload(0x10_0000 + p * 4096)));
    }
    let run = |policy: &str, three_c: bool| {
        let mut m = build(&machine(policy, three_c)).unwrap();
        m.run_batch(&events);
        let kernel = m.ledger().total(1, |_, mode, _| mode == Mode::Kernel);
        (kernel.accesses, kernel.misses)
    };
    // LRU: each user stream flushes the kernel's pages, which miss every round.
    assert_eq!(run("lru", false), (8, 8));
    // User first: only their first references miss.
    assert_eq!(run("user-first", false), (8, 2));
    assert_eq!(run("user-first", true), (8, 2));
    // Under the MIPS software refill, too: the kernel's kseg2 pages (and the page-table page
    // the user misses' handler loads PTEs from) stay through a user stream.
    let mips = |policy: &str| {
        let text = format!("[[tlb]]\nname='tlb'\nentries=8\nways='full'\npolicy='{policy}'\n[refill]\nplacement='D'\n");
        let kseg2 = |p: u64| kload(0xC000_0000 + p * 4096);
        let mut events: Vec<Event> = (0..2).map(kseg2).collect();
        for round in 0..3 {
            events.extend((0..10).map(|p| load((round + p) * 4096 + 0x40_0000)));
            events.extend((0..2).map(kseg2));
        }
        let mut m = build(&text).unwrap();
        m.run_batch(&events);
        let kernel = m.ledger().total(0, |_, mode, _| mode == Mode::Kernel);
        (kernel.accesses, kernel.misses)
    };
    assert_eq!(mips("lru"), (8, 8));
    assert_eq!(mips("user-first"), (8, 2));
    let cache = "[[cache]]\nname='l1'\nsize='1k'\nline=64\nways=2\npolicy='user-first'\n";
    let e = build(cache).unwrap_err().to_string();
    assert!(e.contains("user-first") && e.contains("cache"), "{e}");
}

/// IPC-path prefetching beside a virtually addressed cache: the two see the same events and
/// share nothing, so each counts exactly what it counts alone — the TLB and the prefetcher
/// as without `[vac]`, the VAC as without `[prefetch]` — on Uhlig's token ring (IPCs
/// between three address spaces and the kernel).
#[test]
fn prefetch_and_a_vac_count_as_each_alone() {
    let tlb = "[[tlb]]\nname='dtlb'\nentries=8\nways='full'\nserves='unified'\n";
    let prefetch = "[prefetch]\nuser_entries=4\nkernel_entries=2\n";
    let vac = "[vac]\n";
    let run = |toml: String| {
        let mut m = build(&toml).unwrap();
        let mut src = crate::workload::from_spec("workload:multiserver,servers=2,hops=300")
            .unwrap()
            .unwrap();
        let mut batch = Vec::new();
        while src.next_batch(&mut batch).unwrap() {
            m.run_batch(&batch);
        }
        assert!(m.refused().is_none(), "{:?}", m.refused());
        crate::report::result_json(&m, &Default::default())
    };
    let both = run(format!("{tlb}{prefetch}{vac}"));
    let tlb_alone = run(format!("{tlb}{prefetch}"));
    let vac_alone = run(format!("{tlb}{vac}"));
    assert_eq!(both["structures"], tlb_alone["structures"]);
    assert_eq!(both["prefetch"], tlb_alone["prefetch"]);
    assert!(
        both["prefetch"]["probes"].as_u64() > Some(0),
        "{}",
        both["prefetch"]
    );
    assert_eq!(both["vac"], vac_alone["vac"]);
    assert!(
        both["vac"]["lines"]["misses"].as_u64() > Some(0),
        "{}",
        both["vac"]
    );
}

/// A trace whose references run in address space u32::MAX — the id the walker and the
/// memory system keep the kernel's shared pages under — cannot be followed by a machine
/// that keeps them so: its result would give that process's pages the kernel's frames and
/// translations. A plain TLB machine, for which the id is only a tag, follows it.
#[test]
fn the_kernels_space_id_is_no_process() {
    let events = [
        load(0x1000).with_asid(u32::MAX),
        load(0x2000).with_asid(u32::MAX),
    ];
    let walked = format!("{TLB}[pagetable]\norganisation = 'radix'\n");
    for (toml, refused) in [(walked, true), (TLB.to_string(), false)] {
        let mut m = build(&toml).unwrap();
        m.run_batch(&events);
        let e = m.cannot_follow("t.lks").map(|e| e.to_string());
        assert_eq!(e.is_some(), refused, "{toml}: {e:?}");
        if let Some(e) = e {
            assert!(
                e.contains("t.lks") && e.contains("asid") && e.contains("4294967295"),
                "{e}"
            );
        }
        let mut fine = build(&toml).unwrap();
        fine.run_batch(&[load(0x1000).with_asid(7)]);
        assert!(fine.cannot_follow("t.lks").is_none());
    }
}

/// Run the `workload:` spec `spec` on `m`; its result JSON.
pub(super) fn run_spec(m: &mut Machine, spec: &str) -> serde_json::Value {
    let mut src = crate::workload::from_spec(spec).unwrap().unwrap();
    let mut batch = Vec::new();
    while src.next_batch(&mut batch).unwrap() {
        m.run_batch(&batch);
    }
    crate::report::result_json(m, &Default::default())
}

/// The DECstation 3100 under Mach 3.0 with a `[[cache]]`: the cache sees every program
/// reference (in its mode) and, in kernel mode, every instruction fetch and load of the TLB
/// miss handlers — as many as the refill model's handler steps hold, counted here by driving
/// a second model directly, and the same instructions a memory system sees — and the TLB
/// counts exactly what it counts without the cache.
#[test]
fn a_cache_sees_the_refill_handlers() {
    let spec = "workload:os,structure=microkernel,syscalls=500,seed=3";
    let run = |m: &mut Machine| run_spec(m, spec);
    let cache = ["u1:size=8k,line=16,serves=unified".to_string()];
    let mut cached = Machine::assemble_all(Some(MACH3), "p", &[], &cache, &[]).unwrap();
    let with = run(&mut cached);
    let without = run(&mut Machine::assemble(Some(MACH3), "p", &[], &[]).unwrap());
    assert_eq!(with["structures"]["tlb"], without["structures"]["tlb"]);
    assert_eq!(with["traps"], without["traps"]);
    // The handlers' steps, from a model driven event by event.
    let mut steps_of =
        Machine::assemble(Some(MACH3), "p", &[], &["memory.memory=\"16M\"".into()]).unwrap();
    let (mut fetches, mut loads) = (0u64, 0u64);
    let mut src = crate::workload::from_spec(spec).unwrap().unwrap();
    let mut batch = Vec::new();
    while src.next_batch(&mut batch).unwrap() {
        for e in &batch {
            let r = steps_of.refill.as_deref_mut().unwrap();
            r.run_batch(std::slice::from_ref(e), &mut steps_of.ledger);
            r.take_handler_refs(&mut steps_of.steps);
            for s in &steps_of.steps {
                match *s {
                    HandlerStep::Enter { instructions, .. } => fetches += instructions as u64,
                    HandlerStep::Load(_) => loads += 1,
                    HandlerStep::Leave => {}
                }
            }
        }
    }
    assert!(fetches > 0 && loads > 0);
    let u1 = &with["structures"]["u1"]["by_mode"];
    let trace = &with["trace"]["by_mode"];
    let count = |j: &serde_json::Value| j.as_u64().unwrap();
    assert_eq!(count(&u1["user"]["accesses"]), count(&trace["user"]));
    assert_eq!(
        count(&u1["kernel"]["accesses"]),
        count(&trace["kernel"]) + fetches + loads
    );
    // A memory system sees the same instructions.
    let mut memory =
        Machine::assemble(Some(MACH3), "p", &[], &["memory.memory=\"16M\"".into()]).unwrap();
    let h = &run(&mut memory)["memory"]["tlb_handlers"];
    assert_eq!(
        count(&h["utlb"]["instructions"]) + count(&h["ktlb"]["instructions"]),
        fetches
    );
}
