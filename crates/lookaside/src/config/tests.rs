use super::*;

#[test]
fn page_sizes_parse() {
    assert_eq!(PageSize::parse("4k"), Ok(PageSize::Size(4096)));
    assert_eq!(PageSize::parse("4KiB"), Ok(PageSize::Size(4096)));
    assert_eq!(PageSize::parse("2M"), Ok(PageSize::Size(2 << 20)));
    assert_eq!(PageSize::parse("1G"), Ok(PageSize::Size(1 << 30)));
    assert_eq!(PageSize::parse("8192"), Ok(PageSize::Size(8192)));
    assert_eq!(PageSize::parse("unmapped"), Ok(PageSize::Unmapped));
    assert!(PageSize::parse("3k").is_err());
    assert!(PageSize::parse("big").is_err());
    assert_eq!(PageSize::Size(2 << 20).label(), "2M");
}

#[test]
fn reads_a_full_machine() {
    let m = MachineConfig::from_toml(
        r#"
        [machine]
        name = "x"
        global_above = "0xffff800000000000"
        [pages]
        size = "4k"
        regions = [{ start = "0x80000000", end = 0xc0000000, size = "unmapped" }]
        [[tlb]]
        name = "dtlb"
        entries = 64
        ways = 4
        page = ["4k", "2M"]
        serves = "data"
        next = "stlb"
        [[tlb]]
        name = "stlb"
        entries = 1536
        ways = 12
        partition = { lower = 2, upper_policy = "random" }
        "#,
        "m.toml",
    )
    .unwrap();
    assert_eq!(m.machine.global_above, Some(0xffff_8000_0000_0000));
    assert_eq!(m.pages.regions[0].end, Some(0xc000_0000));
    assert_eq!(m.tlbs[0].ways, Ways::N(4));
    assert_eq!(m.tlbs[1].ways, Ways::N(12));
    assert_eq!(
        m.tlbs[0].page,
        vec![PageSize::Size(4096), PageSize::Size(2 << 20)]
    );
    assert_eq!(
        m.tlbs[1].partition.as_ref().unwrap().lower_policy,
        Policy::Lru
    );
    // Round trip through TOML keeps the machine.
    assert_eq!(MachineConfig::from_toml(&m.to_toml(), "again").unwrap(), m);
}

#[test]
fn next_is_a_name_or_a_list() {
    let text = "[[tlb]]\nname='d'\nentries=4\nnext=['s', 't']\n[[tlb]]\nname='s'\nentries=8\nnext='t'\n[[tlb]]\nname='t'\nentries=8\npage='2M'\n";
    let m = MachineConfig::from_toml(text, "m.toml").unwrap();
    assert_eq!(m.tlbs[0].next, ["s", "t"]);
    assert_eq!(m.tlbs[1].next, ["t"]);
    assert!(m.tlbs[2].next.is_empty());
    let again = m.to_toml();
    assert!(again.contains("next = \"t\"\n"), "{again}");
    assert_eq!(MachineConfig::from_toml(&again, "again").unwrap(), m);
    let t = tlb_from_flag("d:entries=4,next=s+t").unwrap();
    assert_eq!(t["next"].as_array().map(Vec::len), Some(2));
}

#[test]
fn unknown_keys_are_named() {
    let e = MachineConfig::from_toml("[[tlb]]\nname='d'\nentires=64\n", "m.toml").unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("m.toml: "), "{s}");
    assert!(s.contains("entires") && s.contains("line"), "{s}");
}

/// The error of assembling a machine, which must be one line.
fn error(text: Option<&str>, flags: &[&str], sets: &[&str]) -> String {
    let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let e = crate::machine::Machine::assemble(text, "m.toml", &flags, &sets)
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n'), "{e}");
    e
}

#[test]
fn errors_are_one_line_naming_file_line_and_key() {
    let known = "(expected one of: name, entries, ways, policy, page, serves, next, asid, partition, placement, 3c, shared)";
    let d = "[[tlb]]\nname = 'd'\nentries = 64\n";
    assert_eq!(
        error(Some("[[tlb]]\nname = 'd'\nentries = = 3\n"), &[], &[]),
        "m.toml: line 3, column 11: syntax: extra `=`, expected nothing"
    );
    assert_eq!(
        error(Some(&format!("{d}entires = 64\n")), &[], &[]),
        format!("m.toml: line 4, column 1: tlb.d.entires: unknown key {known}")
    );
    // An element of an array of tables without a name is named by its index.
    assert_eq!(
        error(
            Some(&format!("{d}[[tlb]]\nentries = 8\nfoo = 1\n")),
            &[],
            &[]
        ),
        format!("m.toml: line 6, column 1: tlb[1].foo: unknown key {known}")
    );
    assert_eq!(
        error(Some("[[tlb]]\nname = 'd'\n"), &[], &[]),
        "m.toml: line 1, column 1: tlb.d.entries: missing (this key is required)"
    );
    assert_eq!(
        error(Some(&format!("{d}page = ['4k', '3k']\n")), &[], &[]),
        "m.toml: line 4, column 8: tlb.d.page: '3k' is not a page size (e.g. 4k, 2M, 1G)"
    );
    assert_eq!(
        error(Some(&format!("{d}serves = 'both'\n")), &[], &[]),
        "m.toml: line 4, column 10: tlb.d.serves: 'both' is not one of: instruction, data, unified"
    );
    assert_eq!(
        error(Some(&format!("{d}ways = true\n")), &[], &[]),
        "m.toml: line 4, column 8: tlb.d.ways: invalid type: boolean `true`, expected an integer or a string"
    );
    assert_eq!(
        error(Some("[pages]\nregions = [{ start = 0, end = 8192, size = 3 }]\n"), &[], &[]),
        "m.toml: line 2, column 44: pages.regions[0].size: 3 is not a page size (a power of two of at least 2 bytes, e.g. 4096)"
    );
    assert_eq!(
        error(Some("[refill]\ncycles = { L9 = 3 }\n[[tlb]]\nname='u'\nentries=64\n"), &[], &[]),
        "m.toml: line 2, column 12: refill.cycles.L9: unknown key (expected one of: L1U, L1K, L2, L3, Modify, Invalid, stlb_hit, stlb_miss, prefetch, l1u_count, micro)"
    );
    // Errors of the second phase (the machine's validation) get the line of their key.
    assert_eq!(
        error(Some(&format!("{d}ways = 3\n")), &[], &[]),
        "m.toml: line 4, column 1: tlb.d.ways: 3 does not divide 64 entries"
    );
    // A key from --tlb or --set is blamed on the flag, with the key it names.
    assert_eq!(
        error(None, &["d:foo=1"], &[]),
        format!("--tlb: tlb.d.foo: unknown key {known}")
    );
    assert_eq!(
        error(Some(d), &["dtlb:page=3k"], &[]),
        "--tlb: tlb.dtlb.page: '3k' is not a page size (e.g. 4k, 2M, 1G)"
    );
    assert_eq!(
        error(Some(d), &["e:entries=8,policy=mru"], &[])
            .split(" (")
            .next(),
        Some("--tlb: tlb.e.policy: unknown replacement policy \"mru\"")
    );
    assert_eq!(
        error(Some(d), &[], &["tlb.d.bogus=1"]),
        format!("--set: tlb.d.bogus: unknown key {known}")
    );
    assert_eq!(
        error(Some(d), &[], &["tlb.d.ways=5"]),
        "--set: tlb.d.ways: 5 does not divide 64 entries"
    );
    assert_eq!(
        error(Some(d), &[], &["machine.sed=5"]),
        "--set: machine.sed: unknown key (expected one of: name, description, seed, straddle, global_above, cpus, shootdown, shootdown_cycles)"
    );
    // ... and a bad key of the file stays the file's, at its line, whatever the flags.
    assert_eq!(
        error(
            Some(&format!("{d}ways = 3\n")),
            &["i:entries=8"],
            &["machine.seed=2"]
        ),
        "m.toml: line 4, column 1: tlb.d.ways: 3 does not divide 64 entries"
    );
    assert_eq!(
        error(
            Some(&format!("{d}entires = 64\n")),
            &[],
            &["machine.seed=2"]
        ),
        format!("m.toml: line 4, column 1: tlb.d.entires: unknown key {known}")
    );
}

#[test]
fn overrides_address_tlbs_by_name() {
    let mut t: toml::Table =
        toml::from_str("[[tlb]]\nname='dtlb'\nentries=64\n[[tlb]]\nname='itlb'\nentries=32\n")
            .unwrap();
    apply_overrides(
        &mut t,
        &[
            "tlb.itlb.entries=128".into(),
            "tlb.dtlb.policy=fifo".into(),
            "machine.seed=7".into(),
        ],
    )
    .unwrap();
    let m = MachineConfig::from_table(t.clone(), "x").unwrap();
    assert_eq!(m.tlbs[1].entries, 128);
    assert_eq!(m.tlbs[0].policy, Policy::Fifo);
    assert_eq!(m.machine.seed, 7);
    let e = apply_overrides(&mut t, &["tlb.l2.entries=1".into()]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--set: tlb.l2.entries: no TLB named 'l2' (have: dtlb, itlb)"
    );
    assert!(apply_overrides(&mut t, &["machine.seed".into()]).is_err());
}

#[test]
fn quick_flags_become_tlb_tables() {
    let t = tlb_from_flag("dtlb:entries=64,ways=full,policy=lru,page=4k").unwrap();
    let mut root = toml::Table::new();
    root.insert(
        "tlb".into(),
        toml::Value::Array(vec![toml::Value::Table(t)]),
    );
    let m = MachineConfig::from_table(root, "--tlb").unwrap();
    let d = &m.tlbs[0];
    assert_eq!(
        (d.entries, d.ways, d.serves),
        (64, Ways::Full, Serves::Data)
    );
    let t = tlb_from_flag("utlb:entries=8,page=4k+2M,partition=2/fifo/random").unwrap();
    assert_eq!(t["partition"]["lower"].as_integer(), Some(2));
    assert!(tlb_from_flag(":entries=3").is_err());
    assert!(tlb_from_flag("d:entries").is_err());
}

/// `--cache` flags become `[[cache]]` tables of the one schema; a bad key is blamed on
/// the flag, a bad `--set cache.NAME.KEY` on `--set`; the normalised text reads back.
#[test]
fn quick_cache_flags_become_cache_tables() {
    let flags = [
        "dl1:size=32k,line=64,ways=8,policy=lru,next=l2,write=through,allocate=no".to_string(),
        "l2:size=1M,line=64,ways=full,3c=yes,fetch=load-forward,prefetch_distance=2".into(),
    ];
    let m = MachineConfig::assemble_all(
        None,
        "--cache",
        &[],
        &flags,
        &["cache.l2.sub_block=16".into()],
    )
    .unwrap();
    let (d, l2) = (&m.caches[0], &m.caches[1]);
    assert_eq!(
        (d.size, d.line, d.ways),
        (Bytes(32 << 10), Bytes(64), Ways::N(8))
    );
    assert_eq!((d.serves, d.next.as_deref()), (Serves::Data, Some("l2")));
    assert_eq!(
        (d.write, d.allocate, d.three_c),
        (WritePolicy::Through, Allocate::No, false)
    );
    assert_eq!(
        (l2.serves, l2.ways, l2.three_c),
        (Serves::Unified, Ways::Full, true)
    );
    assert_eq!(
        (l2.fetch, l2.prefetch_distance, l2.sub_block),
        (FetchPolicy::LoadForward, Some(2), Some(Bytes(16)))
    );
    assert!(m.tlbs.is_empty());
    assert_eq!(MachineConfig::from_toml(&m.to_toml(), "again").unwrap(), m);
    let known = "(expected one of: name, size, line, ways, policy, serves, next, write, allocate, fetch, prefetch_distance, sub_block, 3c)";
    let cache_error = |flags: &[&str], sets: &[&str]| {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        crate::machine::Machine::assemble_all(None, "--cache", &[], &flags, &sets)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        cache_error(&["c:size=1k,line=64,foo=1"], &[]),
        format!("--cache: cache.c.foo: unknown key {known}")
    );
    assert_eq!(
        cache_error(&["c:size=1k,line=64,allocate=maybe"], &[]),
        "--cache: cache.c.allocate: 'maybe' is not one of: yes, no, no-fetch"
    );
    assert_eq!(
        cache_error(&["c:size=1k,line=64,3c=perhaps"], &[]),
        "--cache: cache.c.3c: 'perhaps' is not yes or no"
    );
    assert_eq!(
        cache_error(&["c:size=1k,line=48"], &[]),
        "--cache: cache.c.line: 48 is not a power of two"
    );
    assert_eq!(
        cache_error(&["c:size=1k,line=64"], &["cache.x.ways=2"]),
        "--set: cache.x.ways: no cache named 'x' (have: c)"
    );
    assert_eq!(
        cache_error(&["c:size=1k,line=64"], &["cache.c.ways=3"]),
        "--set: cache.c.ways: 3 does not divide the 16 lines"
    );
    assert!(cache_from_flag(":size=1k").is_err());
    assert!(cache_from_flag("c:size").is_err());
}

/// A name means one thing however the machine is written: `dtlb` without `serves` is a
/// data TLB in a `[[tlb]]` table as with `--tlb`, `itlb` an instruction TLB, anything
/// else unified; a `serves` written (in the text, the flag or by `--set`) wins.
#[test]
fn serves_defaults_from_the_name_in_every_source() {
    let text = "[[tlb]]\nname='dtlb'\nentries=64\n[[tlb]]\nname='itlb'\nentries=32\n\
                [[tlb]]\nname='stlb'\nentries=512\n[[tlb]]\nname='d2'\nentries=8\nserves='unified'\n";
    let serves = |m: &MachineConfig| m.tlbs.iter().map(|t| t.serves).collect::<Vec<_>>();
    let want = vec![
        Serves::Data,
        Serves::Instruction,
        Serves::Unified,
        Serves::Unified,
    ];
    assert_eq!(
        serves(&MachineConfig::from_toml(text, "m.toml").unwrap()),
        want
    );
    // Through the table path (a flag and an override) too.
    let m = MachineConfig::assemble(
        Some(text),
        "m.toml",
        &["dx:entries=4".into(), "iy:entries=4,serves=unified".into()],
        &["tlb.stlb.entries=256".into()],
    )
    .unwrap();
    let mut all = want.clone();
    all.extend([Serves::Data, Serves::Unified]);
    assert_eq!(serves(&m), all);
    let m = MachineConfig::assemble(
        Some(text),
        "m.toml",
        &[],
        &["tlb.dtlb.serves=unified".into()],
    )
    .unwrap();
    assert_eq!(m.tlbs[0].serves, Serves::Unified);
    // The normalised text says what each structure serves, and reads back the same.
    let m = MachineConfig::from_toml(text, "m.toml").unwrap();
    let again = m.to_toml();
    assert!(again.contains("serves = \"data\"") && again.contains("serves = \"instruction\""));
    assert_eq!(MachineConfig::from_toml(&again, "again").unwrap(), m);
}
