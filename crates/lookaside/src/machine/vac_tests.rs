//! A virtually addressed cache beside a page table: one physical memory, the VAC's OS's.

use super::*;
use crate::event::flags;
use proptest::prelude::*;

/// A 4-entry data TLB and pages of `2^page` bytes, then `[pagetable]` of organisation `org`
/// over 1 MiB (ids = address space numbers, nothing preloaded unless `extra` says so) and
/// `[vac]` of pages of that size mapping first touches by `mapping`; `vac` false leaves the
/// VAC out, `table` false the page table.
fn machine(
    org: &str,
    mapping: &str,
    (vac, table): (bool, bool),
    page: u32,
    extra: &str,
) -> Machine {
    let mut text = format!(
        "[[tlb]]\nname='t'\nentries=4\nways='full'\nserves='data'\n[pages]\nsize={}\n",
        1u64 << page
    );
    if table {
        text += &format!(
            "[pagetable]\norganisation='{org}'\nrefill='software'\nspace_ids='asid'\nmemory='1M'\n{extra}\n"
        );
    }
    if vac {
        text += &format!(
            "[vac]\nsize='16KiB'\nways=2\npage={}\nmapping='{mapping}'\n",
            1u64 << page
        );
    }
    Machine::assemble(Some(&text), "m.toml", &[], &[]).unwrap()
}

/// A machine with both `[vac]` and `[pagetable]` that ran a stream agrees with each alone on
/// it: its VAC's counts are `vac` (the VAC alone's), its TLBs' and walker's are `table`'s.
fn agrees(both: &Machine, vac: serde_json::Value, table: &Machine) -> Result<(), TestCaseError> {
    prop_assert!(both.refused().is_none(), "{:?}", both.refused());
    prop_assert_eq!(both.vac().unwrap().json(), vac);
    let all = |m: &Machine| m.ledger().total(0, |_, _, _| true);
    prop_assert_eq!(all(both), all(table));
    let (a, b) = (
        both.walker().unwrap().stats(),
        table.walker().unwrap().stats(),
    );
    prop_assert_eq!(
        (a.walks, a.faults, a.unmappable),
        (b.walks, b.faults, b.unmappable)
    );
    prop_assert_eq!(&a.level_refs, &b.level_refs);
    Ok(())
}

/// The events of `events` the VAC's OS `os` accepts, each after those kept before it (an
/// unmap of a page never mapped, say, is dropped).
fn accepted(mut os: VacDriver, events: Vec<Event>) -> Vec<Event> {
    events
        .into_iter()
        .filter(|e| {
            let mut trial = os.clone();
            trial.run_batch(std::slice::from_ref(e));
            let ok = trial.error().is_none();
            if ok {
                os = trial;
            }
            ok
        })
        .collect()
}

/// Event `what` of the VM streams below, in address space `asid` at `addr`: a switch, a map
/// (to `paddr`), an unmap, a destroying unmap, or a load or store of word `word` of the page.
fn vm_event(what: u8, asid: u32, addr: u64, paddr: u64, word: u64) -> Event {
    let mut e = match what {
        0 => Event::control(Kind::ContextSwitch, 0, asid),
        1 => Event::control(Kind::Map, addr, asid).with_paddr(paddr),
        2 => Event::control(Kind::Unmap, addr, asid),
        3 => Event::control(Kind::Unmap, addr, asid).with_flags(flags::UNMAP_DEAD),
        w => Event::reference(
            [Kind::Load, Kind::Store][w as usize % 2],
            addr + word * 8,
            8,
        ),
    };
    e.asid = asid;
    e
}

/// Loads, stores, maps (to a few frames the workload names) and unmaps (some destroying the
/// page) of three address spaces over twelve pages, and switches; events the VAC's OS would
/// refuse (an unmap of a page not mapped, a destroyed frame still mapped elsewhere) are left
/// out, so the stream is one a workload could give (with VAC pages of `2^page` bytes).
fn events(page: u32) -> impl Strategy<Value = Vec<Event>> {
    let one = (0u8..12, 1u32..4, 0u64..12, 0u64..512, 0u64..6).prop_map(
        |(what, asid, page, word, frame)| {
            let addr = 0x40_0000 + (page << 12);
            vm_event(what, asid, addr, 0x8_0000 + (frame << 12), word)
        },
    );
    proptest::collection::vec(one, 1..300).prop_map(move |events| {
        let os = machine("hashed", "any", (true, false), page, "");
        accepted(os.vac().unwrap().clone(), events)
    })
}

/// Every page of the run the walker maps is in the frame the VAC's OS has it in (the
/// background pages preloaded before the run have ids from 0xF000_0000); a page larger than
/// the VAC's is the OS's run of frames from there, and every VAC page the OS maps in it is at
/// its place in that run (so the walker and the VAC agree on every byte's frame).
fn one_memory(m: &Machine) -> std::result::Result<(), String> {
    let os = m.vac().unwrap();
    let shift = m.walker().unwrap().base_shift();
    let vac_page = os.vm().vac().params().page;
    // The page larger than the VAC's holding `va`: its first address and size.
    let large = |space: u32, va: u64| {
        let size = 1u64 << m.pages.backing(va, space)?;
        (size > vac_page).then_some((va & !(size - 1), size))
    };
    for ((space, vpn), frame) in m.walker().unwrap().pages() {
        if space >= 0xF000_0000 {
            continue;
        }
        let addr = vpn << shift;
        let vac = match large(space, addr) {
            Some((start, _)) => os.run_of(space, start).map(|run| run + (addr - start)),
            None => os
                .vm()
                .frame_at(space, addr)
                .map(|f| f | (addr & (vac_page - 1))),
        };
        if vac != Some(frame << shift) {
            return Err(format!(
                "page {vpn:#x} of space {space}: walker frame {frame}, VAC {vac:?}"
            ));
        }
    }
    for ((space, va), frame) in os.vm().mappings() {
        let Some((start, size)) = large(space, va) else {
            continue;
        };
        let run = os.run_of(space, start);
        if run.is_none_or(|r| r % size != 0 || r + (va - start) != frame) {
            return Err(format!(
                "VAC page {va:#x} of space {space} in frame {frame:#x}, its large page's run {run:?}"
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With both, the VAC is the VAC alone, the TLB and the walks are the page table's
    /// alone, and at every step each page the walker maps is where the VAC's OS put it: with
    /// 4 KiB pages, and with the HP 9000/834's 2 KiB (a hashed table's base page).
    #[test]
    fn the_walker_maps_pages_where_the_vac_os_has_them(
        (page, events) in proptest::sample::select(&[11u32, 12][..]).prop_flat_map(|p| (Just(p), events(p))),
        org in proptest::sample::select(&["radix", "hashed"][..]),
        mapping in proptest::sample::select(&["any", "colour"][..]),
    ) {
        let org = if page < 12 { "hashed" } else { org };
        let mut both = machine(org, mapping, (true, true), page, "");
        let mut vac = machine(org, mapping, (true, false), page, "");
        let mut table = machine(org, mapping, (false, true), page, "");
        prop_assert_eq!(both.walker().unwrap().base_shift(), page);
        for e in &events {
            both.run_batch(std::slice::from_ref(e));
            prop_assert_eq!(one_memory(&both), Ok(()));
        }
        vac.run_batch(&events);
        table.run_batch(&events);
        agrees(&both, vac.vac().unwrap().json(), &table)?;
    }
}

/// A page only fetched, which the VAC (a data cache) never sees, is mapped by its OS when the
/// walker faults on it; the background pages' frames stay out of the OS's free pool; a map
/// that moves a page the table holds makes its next touch walk again, to the new frame.
#[test]
fn fetches_background_pages_and_remaps() {
    let text = "[[tlb]]\nname='t'\nentries=4\n[pagetable]\norganisation='inverted'\nrefill='software'\nspace_ids='asid'\nmemory='64K'\npreload=0.25\n[vac]\nsize='16KiB'\npage='4KiB'\n";
    let mut m = Machine::assemble(Some(text), "m.toml", &[], &[]).unwrap();
    let background: Vec<u64> = m.walker().unwrap().frames_held().collect();
    assert_eq!(background.len(), 4);
    let mut fetch = Event::reference(Kind::Fetch, 0x40_0000, 4);
    fetch.asid = 1;
    let mut load = Event::reference(Kind::Load, 0x50_0000, 8);
    load.asid = 1;
    m.run_batch(&[fetch, load]);
    let os = m.vac().unwrap();
    assert_eq!(os.json()["counts"]["first_touch_maps"], 2);
    for va in [0x40_0000, 0x50_0000] {
        let f = os.vm().frame_at(1, va).unwrap() >> 12;
        assert!(!background.contains(&f), "{va:#x} in background frame {f}");
    }
    one_memory(&m).unwrap();
    let walks = m.walker().unwrap().stats().walks;
    m.run_batch(&[
        Event::control(Kind::Map, 0x50_0000, 1).with_paddr(0xA000),
        load,
    ]);
    assert_eq!(m.walker().unwrap().stats().walks, walks + 1);
    assert_eq!(m.vac().unwrap().vm().frame_at(1, 0x50_0000), Some(0xA000));
    one_memory(&m).unwrap();
}

/// A VAC whose OS refuses a first touch (mapping = "trace", a reference with no physical
/// address) refuses the run, naming the event, whichever model saw the page first.
#[test]
fn the_vac_os_refusing_a_page_refuses_the_run() {
    let text = "[[tlb]]\nname='t'\nentries=4\n[pagetable]\norganisation='radix'\n[vac]\nsize='16KiB'\npage='4KiB'\nmapping='trace'\n";
    let mut m = Machine::assemble(Some(text), "m.toml", &[], &[]).unwrap();
    let mut fetch = Event::reference(Kind::Fetch, 0x40_0000, 4);
    fetch.asid = 1;
    m.run_batch(&[Event::control(Kind::ContextSwitch, 0, 1), fetch]);
    let (at, why) = m.refused().unwrap();
    assert_eq!(*at, 2);
    assert!(why.contains("paddr"), "{why}");
}

/// A 4-entry TLB of 4 KiB and 2 MiB pages, 2 MiB pages over `[0x60_0000, 0xA0_0000)` and
/// 4 KiB ones elsewhere, a 4-level radix table over 256 MiB (nothing preloaded, and room for every run) and a VAC of
/// 4 KiB pages (16 KiB, 2-way: 2 colours) mapping first touches by `mapping`; `vac` false
/// leaves the VAC out, `table` false the table.
fn large_machine(mapping: &str, (vac, table): (bool, bool)) -> Machine {
    let mut text = String::from(
        "[[tlb]]\nname='t'\nentries=4\nways='full'\npage=['4K', '2M']\n[pages]\nregions=[{start=0x600000, end=0xA00000, size='2M'}]\n",
    );
    if table {
        text += "[pagetable]\norganisation='radix'\nlevels=4\nspace_ids='asid'\nmemory='256M'\npreload=0\n";
    }
    if vac {
        text += &format!("[vac]\nsize='16KiB'\nways=2\npage='4KiB'\nmapping='{mapping}'\n");
    }
    Machine::assemble(Some(&text), "m.toml", &[], &[]).unwrap()
}

/// Loads, stores, maps, unmaps (some destroying the page) and switches of three address
/// spaces over four 4 KiB pages and four parts of each of two 2 MiB pages. A map event of a
/// 4 KiB page names one of a few frames; of a part of a 2 MiB page, its place in one of two
/// aligned runs, or (one time in eight) a frame one page past it, which no aligned run
/// explains. Events the VAC's OS of the machine with the table refuses are left out.
fn large_events(mapping: &'static str) -> impl Strategy<Value = Vec<Event>> {
    let one = (0u8..12, 1u32..4, 0u64..6, 0usize..4, 0u64..512, 0u64..8).prop_map(
        |(what, asid, page, part, word, frame)| {
            let addr = match page {
                0..4 => 0x40_0000 + (page << 12),
                _ => 0x60_0000 + ((page - 4) << 21) + ([0u64, 1, 5, 511][part] << 12),
            };
            let paddr = match page {
                0..4 => 0x8_0000 + (frame << 12),
                _ => {
                    [0x40_0000, 0x60_0000][frame as usize % 2]
                        + (addr & 0x1F_FFFF)
                        + (frame / 7) * 0x1000
                }
            };
            vm_event(what, asid, addr, paddr, word)
        },
    );
    proptest::collection::vec(one, 1..300).prop_map(move |events| {
        accepted(
            large_machine(mapping, (true, true)).vac().unwrap().clone(),
            events,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// With 2 MiB pages beside the table's 4 KiB ones, each large page is an aligned run of
    /// the VAC's OS's frames, its parts at their places, and the walker maps it at the run:
    /// at every step the walker and the VAC agree on every page's frame and the OS's alias
    /// invariants hold; the VAC is its OS alone (fed the same events), and the TLB and the
    /// walks are the table's alone.
    #[test]
    fn the_walker_maps_large_pages_where_the_vac_os_has_their_runs(
        (mapping, events) in proptest::sample::select(&["any", "colour"][..])
            .prop_flat_map(|m| (Just(m), large_events(m))),
    ) {
        let mut both = large_machine(mapping, (true, true));
        let mut alone = both.vac().unwrap().clone();
        let mut table = large_machine(mapping, (false, true));
        for e in &events {
            both.run_batch(std::slice::from_ref(e));
            prop_assert_eq!(one_memory(&both), Ok(()));
            prop_assert_eq!(both.vac().unwrap().vm().check_invariants(), Ok(()));
        }
        alone.run_batch(&events);
        table.run_batch(&events);
        agrees(&both, alone.json(), &table)?;
    }
}

/// A 2 MiB page only fetched (the VAC, a data cache, never sees it) takes its run when the
/// walker faults on it, with no part mapped; a load of one of its parts then maps that part
/// at its place in the run, where the walker has it, without a walk. Destroying the page
/// returns the run, which the page takes again. Memory too small for a large page is refused.
#[test]
fn a_large_page_only_fetched_takes_its_run_from_the_walker() {
    let mut m = large_machine("any", (true, true));
    let fetch = Event::reference(Kind::Fetch, 0x60_0040, 4).with_asid(1);
    let load = |a| Event::reference(Kind::Load, a, 8).with_asid(1);
    m.run_batch(&[load(0x1000), fetch]);
    let os = m.vac().unwrap();
    // Frame 0 is the 4 KiB page's: the lowest aligned free run is the second, frame 512.
    assert_eq!(os.run_of(1, 0x60_0000), Some(0x20_0000));
    assert_eq!(os.json()["counts"]["first_touch_maps"], 1);
    assert!(m.walker().unwrap().pages().contains(&((1, 0x600), 512)));
    let walks = m.walker().unwrap().stats().walks;
    m.run_batch(&[load(0x60_3008)]);
    assert_eq!(m.walker().unwrap().stats().walks, walks);
    assert_eq!(
        m.vac().unwrap().vm().frame_at(1, 0x60_3000),
        Some(0x20_3000)
    );
    one_memory(&m).unwrap();
    m.run_batch(&[
        Event::control(Kind::Unmap, 0x60_3000, 1).with_flags(flags::UNMAP_DEAD),
        load(0x5000),
        load(0x60_3008),
    ]);
    assert!(m.refused().is_none(), "{:?}", m.refused());
    let os = m.vac().unwrap();
    assert_eq!(os.vm().counts().page_frees, 1);
    assert_eq!(os.vm().frame_at(1, 0x5000), Some(0x1000));
    assert_eq!(os.run_of(1, 0x60_0000), Some(0x20_0000));
    assert!(m.walker().unwrap().pages().contains(&((1, 0x600), 512)));
    one_memory(&m).unwrap();
    let small = "[[tlb]]\nname='t'\nentries=4\npage=['4K', '2M']\n[pages]\nregions=[{start=0x600000, end=0xA00000, size='2M'}]\n[pagetable]\norganisation='radix'\nlevels=4\nmemory='1M'\n[vac]\npage='4KiB'\n";
    let e = Machine::assemble(Some(small), "m.toml", &[], &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains(
            "pages.regions[0].size: 2M pages in 1.0 MiB of memory (pagetable.memory), with [vac]"
        ),
        "{e}"
    );
}

/// A large page no larger than the VAC's page needs no run: it lies in the VAC's frame of its
/// page (2 MiB pages of the machine in a VAC of 2 MiB pages beside the table's 4 KiB ones).
/// A run ending past the table's memory is a page it cannot map (`unmappable`), as a frame
/// past it is: with 3 MiB, the 2 MiB page's run after a 4 KiB page's frame ends at 4 MiB.
#[test]
fn large_pages_within_a_vac_page_and_past_memory() {
    let text = |memory: &str, vac_page: &str| {
        format!(
            "[[tlb]]\nname='t'\nentries=4\npage=['4K', '2M']\n[pages]\nregions=[{{start=0x600000, end=0xA00000, size='2M'}}]\n[pagetable]\norganisation='radix'\nlevels=4\nspace_ids='asid'\nmemory='{memory}'\npreload=0\n[vac]\nsize='4MiB'\nways=2\npage='{vac_page}'\n"
        )
    };
    let load = |a| Event::reference(Kind::Load, a, 8).with_asid(1);
    let mut m = Machine::assemble(Some(&text("16M", "2MiB")), "m.toml", &[], &[]).unwrap();
    m.run_batch(&[load(0x1000), load(0x60_3008), load(0x80_0010)]);
    assert!(m.refused().is_none(), "{:?}", m.refused());
    assert_eq!(m.walker().unwrap().stats().faults, 3);
    one_memory(&m).unwrap();
    let mut m = Machine::assemble(Some(&text("3M", "4KiB")), "m.toml", &[], &[]).unwrap();
    m.run_batch(&[load(0x1000), load(0x60_3008)]);
    assert_eq!(m.vac().unwrap().run_of(1, 0x60_0000), Some(0x20_0000));
    let s = m.walker().unwrap().stats();
    assert_eq!((s.faults, s.unmappable), (1, 1));
}
