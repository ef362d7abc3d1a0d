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

/// Loads, stores, maps (to a few frames the workload names) and unmaps (some destroying the
/// page) of three address spaces over twelve pages, and switches; events the VAC's OS would
/// refuse (an unmap of a page not mapped, a destroyed frame still mapped elsewhere) are left
/// out, so the stream is one a workload could give (with VAC pages of `2^page` bytes).
fn events(page: u32) -> impl Strategy<Value = Vec<Event>> {
    let one = (0u8..12, 1u32..4, 0u64..12, 0u64..512, 0u64..6).prop_map(
        |(what, asid, page, word, frame)| {
            let addr = 0x40_0000 + (page << 12);
            let mut e = match what {
                0 => Event::control(Kind::ContextSwitch, 0, asid),
                1 => Event::control(Kind::Map, addr, asid).with_paddr(0x8_0000 + (frame << 12)),
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
        },
    );
    proptest::collection::vec(one, 1..300).prop_map(move |events| {
        let mut os = machine("hashed", "any", (true, false), page, "")
            .vac()
            .unwrap()
            .clone();
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
    })
}

/// Every page of the run the walker maps is in the frame the VAC's OS has it in (the
/// background pages preloaded before the run have ids from 0xF000_0000).
fn one_memory(m: &Machine) -> std::result::Result<(), String> {
    let os = m.vac().unwrap().vm();
    let shift = m.walker().unwrap().base_shift();
    for ((space, vpn), frame) in m.walker().unwrap().pages() {
        if space >= 0xF000_0000 {
            continue;
        }
        let vac = os.frame_at(space, vpn << shift).map(|f| f >> shift);
        if vac != Some(frame) {
            return Err(format!(
                "page {vpn:#x} of space {space}: walker frame {frame}, VAC {vac:?}"
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
        prop_assert!(both.refused().is_none(), "{:?}", both.refused());
        prop_assert_eq!(both.vac().unwrap().json(), vac.vac().unwrap().json());
        prop_assert_eq!(both.ledger().total(0, |_, _, _| true), table.ledger().total(0, |_, _, _| true));
        let (a, b) = (both.walker().unwrap().stats(), table.walker().unwrap().stats());
        prop_assert_eq!((a.walks, a.faults, a.unmappable), (b.walks, b.faults, b.unmappable));
        prop_assert_eq!(&a.level_refs, &b.level_refs);
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
