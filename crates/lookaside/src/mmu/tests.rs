//! Hand-computed trap counts on tiny scenarios, and the model against the brute-force
//! reference (`reference.rs`) on random streams.
//!
//! Addresses used below (asid 1 gets page-table slot 1, asid 0 slot 0, in order of first
//! appearance; slots are 2 MB, so one kernel-page-table page — one L3 PTE — maps the L1
//! tables of two tasks):
//!
//! | what | address | its page's PTE | that PTE's page |
//! |---|---|---|---|
//! | user 0x0040_0000 of asid 1 | L1U PTE at 0xC820_1000 | L2 PTE at 0xFFF2_0804 | L3 PTE in the root |
//! | user 0x0040_1000 of asid 1 | L1U PTE at 0xC820_1004 (same page) | | |
//! | user 0x1000_0000 of asid 1 | L1U PTE at 0xC824_0000 (another page) | L2 PTE at 0xFFF2_0900 (same page) | |
//! | user 0x0040_0000 of asid 0 | L1U PTE at 0xC800_1000 | L2 PTE at 0xFFF2_0004 (same page) | |
//! | user 0x0040_0000 of asid 2 | L1U PTE at 0xC840_1000 | L2 PTE at 0xFFF2_1004 (another page) | |
//! | kernel data 0xC000_0000 | L1K PTE at 0xFFF0_0000 | L3 PTE in the root | |

use proptest::prelude::*;

use super::layout::{self, KSEG0};
use super::reference::RefModel;
use super::*;
use crate::config::{FirstTouch, PlacementPolicy, ReadFaultMaps};
use crate::event::{Event, Kind, Mode, FLUSH_ALL, FLUSH_SPACE};
use crate::ledger::Ledger;
use crate::machine::Machine;
use crate::tlb::{DynamicParams, Part, Partition, Policy, TlbParams};

fn model(levels: u8, first_touch: FirstTouch) -> (SoftwareManagedTlb, Ledger) {
    let mut p = RefillParams::r2000_mach3();
    p.levels = levels;
    p.first_touch = first_touch;
    if levels == 2 {
        p.costs = CostTable::preset("ultrix").unwrap();
    }
    (
        SoftwareManagedTlb::new(p).unwrap(),
        Ledger::new(vec!["tlb".into()]),
    )
}

fn load(addr: u64, asid: u32) -> Event {
    Event::reference(Kind::Load, addr, 4).with_asid(asid)
}

fn store(addr: u64, asid: u32) -> Event {
    Event::reference(Kind::Store, addr, 4).with_asid(asid)
}

fn kernel_load(addr: u64, asid: u32) -> Event {
    Event::reference(Kind::Load, addr, 4)
        .with_mode(Mode::Kernel)
        .with_asid(asid)
}

fn kload(addr: u64) -> Event {
    Event::reference(Kind::Load, addr, 4)
        .with_mode(Mode::Kernel)
        .with_asid(1)
}

/// Traps as [L1U, L1K, L2, L3, Modify, Invalid] after running `events` on `m` (cumulative).
fn run(m: &mut SoftwareManagedTlb, l: &mut Ledger, events: &[Event]) -> [u64; TRAPS] {
    m.run_batch(events, l);
    m.counts().totals()
}

#[test]
fn a_cold_user_reference_cascades_l1u_l2_l3() {
    let (mut m, mut l) = model(3, FirstTouch::None);
    // The uTLB handler's PTE load misses (L2), whose PTE load misses (L3).
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0000, 1)]),
        [1, 0, 1, 1, 0, 0]
    );
    let c = m.counts();
    assert_eq!(c.by_depth[0][Trap::L1U as usize], 1);
    assert_eq!(c.by_depth[1][Trap::L2 as usize], 1);
    assert_eq!(c.by_depth[2][Trap::L3 as usize], 1);
    assert_eq!(
        (c.nested(Trap::L2), c.nested(Trap::L3), c.nested(Trap::L1U)),
        (1, 1, 0)
    );
    // Loads: the L1U PTE, the L2 PTE, the L1U PTE again (by the L2 handler); the L3 PTE
    // unmapped. Writes: L3, L2, L1U.
    let h = m.handler();
    assert_eq!((h.pte_loads_mapped, h.pte_loads_unmapped), (3, 1));
    assert_eq!(h.fills, [1, 0, 1, 1]);
    assert_eq!(h.fills_lower, 1);
    // The trace reference missed once; it is the only TLB access the ledger counts.
    let t = l.total(0, |_, _, _| true);
    assert_eq!((t.accesses, t.misses), (1, 1));
    // Costs: 20 + 407 + 286 cycles under Mach 3.0.
    assert_eq!(m.service().total_cycles, 713);
    // Policy A: the L2 PTE (page 0xC8201) sits in the lower partition (slots 0-7), the others
    // in the upper.
    for (_, way, vpn, _) in m.tlb().entries_iter() {
        assert_eq!(way < 8, vpn == 0xC8201, "vpn {vpn:#x} in way {way}");
    }
}

#[test]
fn first_touch_is_an_invalid_trap_and_repeats_are_free() {
    let (mut m, mut l) = model(3, FirstTouch::User);
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0000, 1)]),
        [1, 0, 1, 1, 0, 1]
    );
    assert_eq!(m.counts().by_depth[0][Trap::Invalid as usize], 1);
    // Same page again: a TLB hit, no trap.
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0abc, 1)]),
        [1, 0, 1, 1, 0, 1]
    );
    // Another page of the same L1 page-table page: only L1U (and its first-touch fault).
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_1000, 1)]),
        [2, 0, 1, 1, 0, 2]
    );
    // Another 4 MB region: a new L1 page-table page (L2), whose L2 PTE shares the
    // kernel-page-table page already mapped (no L3).
    assert_eq!(
        run(&mut m, &mut l, &[load(0x1000_0000, 1)]),
        [3, 0, 2, 1, 0, 3]
    );
}

#[test]
fn read_then_write_is_a_modify_trap() {
    let (mut m, mut l) = model(3, FirstTouch::User);
    run(&mut m, &mut l, &[load(0x40_0000, 1)]);
    // The read fault mapped the page clean: the first store hits a clean entry.
    assert_eq!(
        run(&mut m, &mut l, &[store(0x40_0004, 1)]),
        [1, 0, 1, 1, 1, 1]
    );
    assert_eq!(
        run(&mut m, &mut l, &[store(0x40_0008, 1)]),
        [1, 0, 1, 1, 1, 1]
    );
    // A store that faults maps its page dirty: no Modify.
    assert_eq!(
        run(&mut m, &mut l, &[store(0x40_1000, 1)]),
        [2, 0, 1, 1, 1, 2]
    );
    // With read faults mapping pages dirty there is no Modify either.
    let mut p = RefillParams::r2000_mach3();
    p.read_fault_maps = ReadFaultMaps::Dirty;
    let mut d = SoftwareManagedTlb::new(p).unwrap();
    run(&mut d, &mut l, &[load(0x40_0000, 1), store(0x40_0000, 1)]);
    assert_eq!(d.counts().of(Trap::Modify), 0);
}

#[test]
fn copy_on_write_protect_and_unmap() {
    let (mut m, mut l) = model(3, FirstTouch::User);
    run(&mut m, &mut l, &[store(0x40_0000, 1)]);
    assert_eq!(m.counts().totals(), [1, 0, 1, 1, 0, 1]);
    // Write-protected for copy-on-write: the entry is shot down; the next store refills it
    // (L1U, its L2 entry still cached) clean and takes a Modify trap.
    let protect = Event::control(Kind::Protect, 0x40_0000, 1);
    assert_eq!(
        run(&mut m, &mut l, &[protect, store(0x40_0000, 1)]),
        [2, 0, 1, 1, 1, 1]
    );
    // Unmapped: the next touch faults again.
    let unmap = Event::control(Kind::Unmap, 0x40_0000, 1);
    assert_eq!(
        run(&mut m, &mut l, &[unmap, load(0x40_0000, 1)]),
        [3, 0, 1, 1, 1, 2]
    );
    // Mapped by the OS: present without a fault, and writable.
    let map = Event::control(Kind::Map, 0x40_5000, 1);
    assert_eq!(
        run(&mut m, &mut l, &[map, store(0x40_5000, 1)]),
        [4, 0, 1, 1, 1, 2]
    );
}

#[test]
fn kernel_data_misses_nest_an_l3() {
    let (mut m, mut l) = model(3, FirstTouch::User);
    assert_eq!(
        run(&mut m, &mut l, &[kload(0xC000_0000)]),
        [0, 1, 0, 1, 0, 0]
    );
    assert_eq!(m.counts().by_depth[1][Trap::L3 as usize], 1);
    // The next kernel page's L1K PTE is in the same kernel-page-table page.
    assert_eq!(
        run(&mut m, &mut l, &[kload(0xC000_1000)]),
        [0, 2, 0, 1, 0, 0]
    );
    // Unmapped kseg0 and kseg1: no TLB, no trap.
    run(&mut m, &mut l, &[kload(KSEG0 + 0x1234), kload(0xA000_0000)]);
    assert_eq!(m.counts().all(), 3);
    assert_eq!(l.unmapped, 2);
    // The kernel touching a task's page table directly: an L2 miss (placed in the lower
    // partition), and the kernel page table itself: an L3.
    let pt = layout::ptebase(5) + 0x1000;
    assert_eq!(run(&mut m, &mut l, &[kload(pt)]), [0, 2, 1, 2, 0, 0]);
    assert_eq!(
        run(&mut m, &mut l, &[kload(0xFFC0_0000)]),
        [0, 2, 1, 3, 0, 0]
    );
    // Kernel data faults on first touch only when asked.
    let (mut a, mut la) = model(3, FirstTouch::All);
    assert_eq!(
        run(&mut a, &mut la, &[kload(0xC000_0000), kload(0xC000_0000)]),
        [0, 1, 0, 1, 0, 1]
    );
}

#[test]
fn address_spaces_share_kernel_page_table_pages_in_pairs() {
    let (mut m, mut l) = model(3, FirstTouch::None);
    run(&mut m, &mut l, &[load(0x40_0000, 1)]);
    // asid 0's table (slot 0) shares the kernel-page-table page of asid 1's (slot 1): no L3.
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0000, 0)]),
        [2, 0, 2, 1, 0, 0]
    );
    // asid 2 (slot 2) needs another one.
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0000, 2)]),
        [3, 0, 3, 2, 0, 0]
    );
    // Tagged entries survive switches: back to asid 1, no trap.
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0000, 1)]),
        [3, 0, 3, 2, 0, 0]
    );
    assert_eq!(l.asids(), &[0, 1, 2]);
}

#[test]
fn ultrix_has_two_levels_and_no_l3() {
    let (mut m, mut l) = model(2, FirstTouch::None);
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0000, 1)]),
        [1, 0, 1, 0, 0, 0]
    );
    assert_eq!(
        run(&mut m, &mut l, &[kload(0xC000_0000)]),
        [1, 1, 1, 0, 0, 0]
    );
    // The L2 and L1K PTEs come from unmapped memory.
    let h = m.handler();
    assert_eq!((h.pte_loads_mapped, h.pte_loads_unmapped), (2, 2));
}

#[test]
fn placement_policies_choose_partitions() {
    assert_eq!(
        placement_parts(PlacementPolicy::B),
        [Part::Upper, Part::Upper, Part::Lower, Part::Lower]
    );
    for (policy, lower) in [
        (PlacementPolicy::A, vec![0xC8201]),
        (PlacementPolicy::B, vec![0xC8201, 0xFFF00, 0xFFF20]),
        (PlacementPolicy::C, vec![0xC0000, 0xC8201, 0xFFF00, 0xFFF20]),
    ] {
        let mut p = RefillParams::r2000_mach3();
        p.placement = policy;
        p.first_touch = FirstTouch::None;
        let mut m = SoftwareManagedTlb::new(p).unwrap();
        let mut l = Ledger::new(vec!["tlb".into()]);
        run(&mut m, &mut l, &[load(0x40_0000, 1), kload(0xC000_0000)]);
        let mut got: Vec<u64> = m
            .tlb()
            .entries_iter()
            .filter(|e| e.1 < 8)
            .map(|e| e.2)
            .collect();
        got.sort_unstable();
        assert_eq!(got, lower, "{policy:?}");
    }
    // D: no partition at all, every slot replaced at random.
    let mut p = RefillParams::r2000_mach3();
    p.placement = PlacementPolicy::D;
    let m = SoftwareManagedTlb::new(p).unwrap();
    assert_eq!(m.tlb().params().partition, None);
    assert_eq!(m.tlb().params().policy, Policy::Random);
    assert_eq!(m.lower_slots(), 0);
    // A-C need a partition.
    let mut p = RefillParams::r2000_mach3();
    p.tlb.partition = None;
    assert!(SoftwareManagedTlb::new(p)
        .unwrap_err()
        .starts_with("placement:"));
}

#[test]
fn l2_entries_thrash_a_small_lower_partition() {
    // Touch one page in each of 9 different 4 MB regions, round robin. With 8 FIFO lower
    // slots the 9 L2 PTEs evict each other every round; with 9 slots they all fit.
    let pages: Vec<Event> = (0..9u64).map(|i| load(0x40_0000 + (i << 22), 1)).collect();
    let mut l2 = Vec::new();
    for lower in [8, 9] {
        let mut p = RefillParams::r2000_mach3();
        p.first_touch = FirstTouch::None;
        p.tlb.partition = Some(Partition {
            lower_ways: lower,
            lower_policy: Policy::Fifo,
            upper_policy: Policy::Random,
        });
        let mut m = SoftwareManagedTlb::new(p).unwrap();
        let mut l = Ledger::new(vec!["tlb".into()]);
        for _ in 0..10 {
            // A flush of the one user page each time forces the uTLB handler to run.
            for e in &pages {
                let flush = Event::control(Kind::TlbFlush, e.addr, 1);
                m.run_batch(&[flush, *e], &mut l);
            }
        }
        assert_eq!(m.counts().of(Trap::L1U), 90);
        l2.push(m.counts().of(Trap::L2));
    }
    // FIFO over 8 slots with 9 keys cycling: every L2 PTE load misses.
    assert_eq!(l2, vec![90, 9]);
}

#[test]
fn handler_references_are_recorded_in_order() {
    let (mut m, mut l) = model(3, FirstTouch::None);
    m.record_handler_refs(true);
    run(&mut m, &mut l, &[load(0x40_0000, 1)]);
    let mut steps = Vec::new();
    m.take_handler_refs(&mut steps);
    let enter = |trap, code, instructions| HandlerStep::Enter {
        trap,
        code,
        instructions,
    };
    let ld = |addr: u64, paddr| {
        HandlerStep::Load(
            Event::reference(Kind::Load, addr, 4)
                .with_mode(Mode::Kernel)
                .with_asid(1)
                .with_paddr(paddr),
        )
    };
    let root = layout::l3_pte_addr(0xFFF2_0804);
    // L1U → L2 → L3, each running its Mach 3.0 cycles as instructions from its vector; the
    // loads that missed the TLB reach memory once each, after the handler they nested.
    assert_eq!(
        steps,
        [
            enter(Trap::L1U, layout::UTLB_VECTOR, 20),
            enter(Trap::L2, layout::GENERAL_VECTOR, 407),
            enter(Trap::L3, layout::GENERAL_VECTOR, 286),
            ld(root, root - KSEG0),
            HandlerStep::Leave,
            ld(0xFFF2_0804, crate::event::NO_PADDR),
            HandlerStep::Leave,
            ld(0xC820_1000, crate::event::NO_PADDR),
            HandlerStep::Leave,
        ]
    );
    // Counted: the L1U PTE load twice (trapped, then made by the L2 handler), the L2 PTE
    // load once, the root once.
    assert_eq!(
        (m.handler().pte_loads_mapped, m.handler().pte_loads_unmapped),
        (3, 1)
    );
    m.take_handler_refs(&mut steps);
    assert!(steps.is_empty());
}

#[test]
fn untagged_tlb_loses_user_entries_on_a_switch_and_flushes_work() {
    let mut p = RefillParams::r2000_mach3();
    p.tagged = false;
    p.first_touch = FirstTouch::None;
    let mut m = SoftwareManagedTlb::new(p).unwrap();
    let mut l = Ledger::new(vec!["tlb".into()]);
    run(
        &mut m,
        &mut l,
        &[
            load(0x40_0000, 1),
            Event::control(Kind::ContextSwitch, 0, 2),
        ],
    );
    // The user entry went; the global L2 entry of asid 1's table stayed.
    assert_eq!(
        run(&mut m, &mut l, &[load(0x40_0000, 1)]),
        [2, 0, 1, 1, 0, 0]
    );
    run(
        &mut m,
        &mut l,
        &[Event::control(Kind::TlbFlush, FLUSH_ALL, 1)],
    );
    assert_eq!(m.tlb().valid_entries(), 0);
}

#[test]
fn addresses_outside_the_mips_space() {
    let (mut m, mut l) = model(3, FirstTouch::None);
    // A user reference to kseg2 and a reference above 4 GB are address errors.
    run(
        &mut m,
        &mut l,
        &[load(0xC000_0000, 1), load(0x7fff_0000_0000, 1)],
    );
    assert_eq!((m.address_errors(), m.counts().all()), (2, 0));
    // Folded, a 64-bit user address lands in kuseg.
    let mut p = RefillParams::r2000_mach3();
    p.fold_user_addresses = true;
    let mut f = SoftwareManagedTlb::new(p).unwrap();
    run(&mut f, &mut l, &[load(0x7fff_0040_0000, 1)]);
    assert_eq!((f.address_errors(), f.counts().of(Trap::L1U)), (0, 1));
    // A page whose low 31 bits are the same is another page, not an alias: it misses too,
    // then both hit.
    run(&mut f, &mut l, &[load(0x40_0000, 1)]);
    run(
        &mut f,
        &mut l,
        &[load(0x7fff_0040_0000, 1), load(0x40_0000, 1)],
    );
    assert_eq!(f.counts().of(Trap::L1U), 2);
}

#[test]
fn a_straddling_access_translates_both_pages() {
    let (mut m, mut l) = model(3, FirstTouch::None);
    let e = Event::reference(Kind::Load, 0x40_0ffc, 8).with_asid(1);
    run(&mut m, &mut l, &[e]);
    assert_eq!(m.counts().of(Trap::L1U), 2);
    assert_eq!(l.straddles, 1);
}

// ----- the machine with a [refill] section -------------------------------------------------

const R2000: &str = "[[tlb]]\nname = 'tlb'\nentries = 64\nways = 'full'\npolicy = 'random'\npartition = { lower = 8, lower_policy = 'fifo', upper_policy = 'random' }\n";

fn machine(extra: &str) -> crate::Result<Machine> {
    Machine::assemble(Some(&format!("{R2000}{extra}")), "m.toml", &[], &[])
}

#[test]
fn the_machine_delegates_to_the_refill_model() {
    let mut m = machine("[refill]\ninvalid_on_first_touch = 'none'\n").unwrap();
    m.run_batch(&[load(0x40_0000, 1), load(0x40_0000, 1)]);
    let r = m.refill().unwrap();
    assert_eq!(r.counts().totals(), [1, 0, 1, 1, 0, 0]);
    let j = crate::report::result_json(&m, &crate::report::TraceInfo::default());
    assert_eq!(j["traps"]["counts"]["L3"], 1);
    assert_eq!(j["traps"]["nested"]["L2"], 1);
    assert_eq!(j["traps"]["cycles"]["total"], 713);
    assert_eq!(j["traps"]["model"]["placement"], "A");
    assert_eq!(j["traps"]["model"]["lower_slots"], 8);
    assert_eq!(j["structures"]["tlb"]["misses"], 1);
    assert_eq!(j["walk"]["count"], 1);
    let text = crate::report::table(&j);
    assert!(
        text.contains("traps (3-level page table, placement A, 8 lower + 56 upper"),
        "{text}"
    );
    assert!(text.contains("total"), "{text}");
    // Costs re-applied to the stored counts: Table VII's vectors.
    let fast = CostTable::preset("mach3-new-vectors").unwrap();
    assert_eq!(fast.apply(&r.counts().totals()).total_cycles, 20 + 40 + 286);
    // The config round-trips with its [refill] section.
    let text = m.config().to_toml();
    assert!(text.contains("[refill]"), "{text}");
    assert!(machine("").unwrap().refill().is_none());
}

#[test]
fn refill_config_errors_name_the_key() {
    let e = |extra: &str| machine(extra).unwrap_err().to_string();
    assert!(e("[refill]\ncosts = 'vax'\n").contains("refill.costs: no cost table named 'vax'"));
    assert!(e("[refill]\nlevels = 4\n").contains("refill.levels"));
    assert!(e("[refill]\ncosts = 'ultrix'\n").contains("refill.cycles.L3"));
    assert!(e("[refill]\ncycle_ns = 0\n").contains("refill.cycle_ns"));
    assert!(e("[refill]\nplacement = 'E'\n").contains("placement"));
    assert!(e("[refill]\ncycles = { L4 = 3 }\n").contains("L4"));
    assert!(
        e("[pages]\nregions = [{ start = 0, end = 4096, size = 'unmapped' }]\n[refill]\n")
            .contains("pages.regions")
    );
    assert!(e("[machine]\nglobal_above = 0x1000\n[refill]\n").contains("machine.global_above"));
    // A 64-bit trace's kernel classes: only with refill.addresses = "x86-64", and only
    // declared unmapped.
    let class = "[pages]\nregions = [{ kernel = 'direct_map', size = 'unmapped' }]\n";
    let mips = e(&format!("{class}[refill]\n"));
    assert!(
        mips.contains("pages.regions[0]") && mips.contains("refill.addresses = \"x86-64\""),
        "{mips}"
    );
    machine(&format!("{class}[refill]\naddresses = 'x86-64'\n")).unwrap();
    let range = e("[pages]\nregions = [{ start = 0, end = 4096, size = 'unmapped' }]\n[refill]\naddresses = 'x86-64'\n");
    assert!(
        range.contains("pages.regions[0]") && range.contains("only declare a class"),
        "{range}"
    );
    let mapped = e("[pages]\nregions = [{ kernel = 'vmalloc', size = '4k' }]\n[refill]\naddresses = 'x86-64'\n");
    assert!(mapped.contains("pages.regions[0].size"), "{mapped}");
    let bad = e("[refill]\naddresses = 'x86'\n");
    assert!(
        bad.contains("refill.addresses") && bad.contains("x86-64"),
        "{bad}"
    );
    // A second TLB stands in front of the refilled one only as a micro-TLB for fetches.
    let data = e("[[tlb]]\nname = 'b'\nentries = 8\nnext = 'tlb'\n[refill]\n");
    assert!(data.contains(": tlb.b.serves: a micro-TLB"), "{data}");
    let beside = e("[[tlb]]\nname = 'b'\nentries = 8\nserves = 'instruction'\n[refill]\n");
    assert!(beside.contains("next level"), "{beside}");
    let three = e("[[tlb]]\nname = 'a'\nentries = 2\nnext = 'tlb'\nserves = 'instruction'\n[[tlb]]\nname = 'b'\nentries = 2\nnext = 'tlb'\nserves = 'data'\n[refill]\n");
    assert!(three.contains("has 3 TLBs"), "{three}");
    let micro = machine(
        "[[tlb]]\nname = 'utlb'\nentries = 2\nnext = 'tlb'\nserves = 'instruction'\n[refill]\n",
    );
    assert!(micro.is_ok(), "{:?}", micro.err());
    let nopart = Machine::assemble(
        Some("[[tlb]]\nname = 't'\nentries = 64\n[refill]\n"),
        "m.toml",
        &[],
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(nopart.contains("refill.placement"), "{nopart}");
    // Ultrix: two levels and its own costs are fine; so is policy D without a partition.
    machine("[refill]\nlevels = 2\ncosts = 'ultrix'\n").unwrap();
    Machine::assemble(
        Some("[[tlb]]\nname = 't'\nentries = 64\n[refill]\nplacement = 'D'\n"),
        "m.toml",
        &[],
        &[],
    )
    .unwrap();
    // Overrides of single costs.
    let m = machine("[refill]\ncycles = { L1K = 20 }\ncycle_ns = 30\n").unwrap();
    let c = &m.refill().unwrap().params().costs;
    assert_eq!((c.cycles_of(Trap::L1K), c.cycle_ns), (Some(20), 30.0));
}

// ----- differential: the model against the brute-force reference ---------------------------

/// A user page of one of a few 4 MB regions, a kernel page, a page-table page, kseg0.
fn address(sel: u8, x: u16) -> (u64, Mode) {
    let x = x as u64;
    match sel % 8 {
        0..=3 => ((x % 12) << 22 | (x / 12 % 6) << 12 | (x & 0xff), Mode::User),
        4 => (layout::KSEG2 + ((x % 10) << 12), Mode::Kernel),
        5 => (((x % 5) << 22) | ((x / 5 % 3) << 12), Mode::Kernel),
        6 => (layout::ptebase(x % 4) + ((x / 4 % 3) << 12), Mode::Kernel),
        _ => (KSEG0 + (x << 4), Mode::Kernel),
    }
}

fn events(raw: &[(u8, u8, u16, u8)]) -> Vec<Event> {
    events_at(raw, address)
}

/// An x86-64 trace's addresses, adversarial for the fold: user blocks that collide in their
/// low bits (and so in kuseg), the top of the lower half, the ends of the kernel classes of
/// [`X86_CLASSES`] and outside them, mapped kernel blocks that collide modulo kseg2's 32.
fn x86_address(sel: u8, x: u16) -> (u64, Mode) {
    let x = x as u64;
    let mode = if x & 1 == 0 { Mode::User } else { Mode::Kernel };
    let page = (x / 2 % 3) << 12;
    match sel % 8 {
        0..=2 => (
            (x % 3) << 22 | (x / 3 % 4) << 31 | (x / 12 % 2) << 45 | page,
            mode,
        ),
        3 => ((1 << 47) - 0x2000 + (x % 3) * 0x1000, mode),
        4 => (
            0xffff_c900_0000_0000 + (x % 3) * (32 << 22) + page,
            Mode::Kernel,
        ),
        5 => (0xffff_8880_0000_0000 + (x << 12), Mode::Kernel),
        6 => (0xffff_ffff_c000_0000 - 0x2000 + (x % 4) * 0x1000, mode),
        _ => (
            [1u64 << 63, 0xffff_c880_0000_0000, u64::MAX - 0xfff][x as usize % 3],
            mode,
        ),
    }
}

/// `[start, end)` ranges of kernel classes.
type Ranges = [(u64, u64); 2];

/// Kernel classes of an x86-64 layout: (kseg0, kseg2) ranges.
const X86_CLASSES: (Ranges, Ranges) = (
    [
        (0xffff_8880_0000_0000, 0xffff_c880_0000_0000),
        (0xffff_ffff_8000_0000, 0xffff_ffff_c000_0000),
    ],
    [
        (0xffff_c900_0000_0000, 0xffff_e900_0000_0000),
        (0xffff_ffff_c000_0000, 0xffff_ffff_ff00_0000),
    ],
);

fn events_at(raw: &[(u8, u8, u16, u8)], address: fn(u8, u16) -> (u64, Mode)) -> Vec<Event> {
    raw.iter()
        .map(|&(op, sel, x, asid)| {
            let asid = asid as u32 % 4;
            let (addr, mode) = address(sel, x);
            match op % 16 {
                // Some loads span several pages (up to 9), a few run past 2^64.
                0..=5 if x % 5 == 0 => Event::reference(Kind::Load, addr, 4 + (x % 9) * 4096)
                    .with_mode(mode)
                    .with_asid(asid),
                0..=5 if x % 97 == 1 => {
                    Event::reference(Kind::Load, 0u64.wrapping_sub(4096 + (x as u64 % 3)), 8200)
                        .with_mode(mode)
                        .with_asid(asid)
                }
                0..=5 => Event::reference(Kind::Load, addr, 4)
                    .with_mode(mode)
                    .with_asid(asid),
                6..=9 => Event::reference(Kind::Store, addr, 4)
                    .with_mode(mode)
                    .with_asid(asid),
                10 => Event::reference(Kind::Fetch, addr | 0xffe, 4)
                    .with_mode(mode)
                    .with_asid(asid),
                11 => Event::control(Kind::ContextSwitch, 0, asid),
                12 => Event::control(Kind::Protect, addr, asid),
                13 => Event::control(Kind::Unmap, addr, asid),
                14 if x % 8 == 0 => Event::control(Kind::TlbFlush, FLUSH_ALL, asid),
                14 if x % 8 == 1 => Event::control(Kind::TlbFlush, FLUSH_SPACE, asid),
                14 => Event::control(Kind::TlbFlush, addr, asid),
                _ => Event::control(Kind::Map, addr, asid),
            }
        })
        .collect()
}

fn params_strategy() -> impl Strategy<Value = RefillParams> {
    (
        prop::sample::select(&[(4usize, 4usize), (8, 8), (16, 16), (16, 4), (64, 64)][..]),
        any::<u16>(),
        prop::sample::select(&[Policy::Fifo, Policy::Random, Policy::Lru, Policy::UserFirst][..]),
        prop::sample::select(&[Policy::Fifo, Policy::Random, Policy::Lru, Policy::UserFirst][..]),
        prop::sample::select(
            &[
                PlacementPolicy::A,
                PlacementPolicy::B,
                PlacementPolicy::C,
                PlacementPolicy::D,
            ][..],
        ),
        (
            any::<bool>(),
            any::<bool>(),
            0u8..3,
            any::<bool>(),
            any::<u64>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(geom, lower, lp, up, placement, (tagged, two, ft, dirty, seed, three_c))| {
                let mut p = RefillParams::r2000_mach3();
                p.tlb = TlbParams {
                    entries: geom.0,
                    ways: geom.1,
                    policy: up,
                    partition: Some(Partition {
                        lower_ways: 1 + lower as usize % (geom.1 - 1),
                        lower_policy: lp,
                        upper_policy: up,
                    }),
                    seed,
                };
                p.placement = placement;
                p.tagged = tagged;
                if two {
                    p.levels = 2;
                    p.costs = CostTable::preset("ultrix").unwrap();
                }
                p.first_touch = [FirstTouch::User, FirstTouch::All, FirstTouch::None][ft as usize];
                if dirty {
                    p.read_fault_maps = ReadFaultMaps::Dirty;
                }
                p.three_c = three_c;
                p
            },
        )
}

/// The model and the reference over the same events, the model in batches of uneven sizes
/// (to cross batch boundaries anywhere): the same traps, handler work, address errors,
/// accesses and misses, unmapped references and TLB contents.
fn agrees(
    m: &mut SoftwareManagedTlb,
    r: &mut RefModel,
    evs: &[Event],
) -> Result<(), TestCaseError> {
    let mut l = Ledger::new(vec!["tlb".into()]);
    if m.params().three_c {
        l.classify_misses();
    }
    for chunk in evs.chunks(37) {
        m.run_batch(chunk, &mut l);
    }
    for e in evs {
        r.event(e);
    }
    prop_assert_eq!(m.counts().by_depth, r.traps);
    prop_assert_eq!(*m.handler(), r.handler);
    prop_assert_eq!(m.address_errors(), r.address_errors);
    let t = l.total(0, |_, _, _| true);
    prop_assert_eq!((t.accesses, t.misses), (r.accesses, r.misses));
    prop_assert_eq!(l.unmapped, r.unmapped);
    prop_assert_eq!(m.tlb().entries_iter().collect::<Vec<_>>(), r.tlb.contents());
    if let Some(c) = &r.classes {
        // Every miss classified, as the brute-force classes count them (an LRU or FIFO
        // shadow: a random one draws from its own generator).
        prop_assert_eq!(l.class_total(0, |_, _, _| true), c.counts);
        prop_assert_eq!(c.counts.iter().sum::<u64>(), t.misses);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Trap counts per type and depth, handler work, ledger counts and the final TLB
    /// contents agree with the brute-force model on random streams over a small footprint.
    #[test]
    fn matches_the_reference_model(
        p in params_strategy(),
        raw in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>()), 1..400),
    ) {
        let evs = events(&raw);
        let mut m = SoftwareManagedTlb::new(p.clone()).unwrap();
        let mut r = RefModel::new(&p);
        agrees(&mut m, &mut r, &evs)?;
    }

    /// The same with a 64-bit trace mapped onto the MIPS segments: as x86-64 (its kernel
    /// classes bound) or with folded user addresses, against the reference's placement read
    /// as written.
    #[test]
    fn a_mapped_64_bit_trace_matches_the_reference_model(
        p in params_strategy(),
        x86 in any::<bool>(),
        raw in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>()), 1..400),
    ) {
        let mut p = p;
        if x86 {
            p.addresses = crate::config::RefillAddresses::X86_64;
        } else {
            p.fold_user_addresses = true;
        }
        let evs = events_at(&raw, x86_address);
        let mut m = SoftwareManagedTlb::new(p.clone()).unwrap();
        let mut r = RefModel::new(&p);
        m.bind_kernel_classes(&X86_CLASSES.0, &X86_CLASSES.1);
        if x86 {
            r.bind(&X86_CLASSES.0, &X86_CLASSES.1);
        }
        agrees(&mut m, &mut r, &evs)?;
        prop_assert!(m.unplaceable().is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// With a micro-TLB for fetches in front of the TLB: the micro-TLB's and the TLB's
    /// accesses and misses, the refills, the traps and both structures' contents agree with
    /// the reference, whose micro-TLB keeps inclusion by brute force (dropping, after every
    /// change to the TLB, each copy the TLB no longer holds).
    #[test]
    fn a_micro_tlb_matches_the_reference_model(
        p in params_strategy(),
        micro in (1usize..=4, prop::sample::select(&[Policy::Lru, Policy::Fifo, Policy::Random, Policy::UserFirst][..]), any::<bool>(), any::<bool>(), any::<bool>()),
        raw in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>()), 1..400),
    ) {
        let (entries, policy, tagged, first, micro_3c) = micro;
        let mut p = p;
        p.index = first as usize;
        p.micro = Some(MicroParams {
            tlb: TlbParams { entries, ways: entries, policy, partition: None, seed: 7 },
            tagged,
            index: 1 - first as usize,
            three_c: micro_3c,
        });
        // Half the loads become fetches, so that the micro-TLB sees many.
        let evs: Vec<Event> = events(&raw)
            .into_iter()
            .enumerate()
            .map(|(i, e)| if e.kind == Kind::Load && i % 2 == 0 { Event { kind: Kind::Fetch, ..e } } else { e })
            .collect();
        let mut m = SoftwareManagedTlb::new(p.clone()).unwrap();
        let mut r = RefModel::new(&p);
        let mut names = vec!["tlb".to_string(), "utlb".to_string()];
        if first {
            names.reverse();
        }
        let mut l = Ledger::new(names);
        if p.three_c || micro_3c {
            l.classify_misses();
        }
        for chunk in evs.chunks(37) {
            m.run_batch(chunk, &mut l);
        }
        for e in &evs {
            r.event(e);
        }
        prop_assert_eq!(m.counts().by_depth, r.traps);
        prop_assert_eq!(*m.handler(), r.handler);
        let (ti, ui) = (p.index, 1 - p.index);
        let t = l.total(ti, |_, _, _| true);
        prop_assert_eq!((t.accesses, t.misses), (r.accesses, r.misses));
        let u = l.total(ui, |_, _, _| true);
        prop_assert_eq!([u.accesses, u.misses, m.micro_refills().unwrap()], r.micro_counts);
        prop_assert_eq!(m.tlb().entries_iter().collect::<Vec<_>>(), r.tlb.contents());
        prop_assert_eq!(m.micro_entries(), r.micro.as_ref().unwrap().0.contents());
        if let Some(c) = &r.classes {
            prop_assert_eq!(l.class_total(ti, |_, _, _| true), c.counts);
        }
        if let Some(c) = &r.micro_classes {
            prop_assert_eq!(l.class_total(ui, |_, _, _| true), c.counts);
            prop_assert_eq!(c.counts.iter().sum::<u64>(), u.misses);
        }
    }
}

/// A 2-entry micro-TLB for fetches in front of the R2000's TLB, structure 1 of the ledger.
fn with_micro(tagged: bool) -> (SoftwareManagedTlb, Ledger) {
    let mut p = RefillParams::r2000_mach3();
    p.micro = Some(MicroParams {
        tlb: TlbParams::new(2, 2, Policy::Lru),
        tagged,
        index: 1,
        three_c: false,
    });
    (
        SoftwareManagedTlb::new(p).unwrap(),
        Ledger::new(vec!["tlb".into(), "utlb".into()]),
    )
}

#[test]
fn the_micro_tlb_holds_only_what_the_tlb_holds() {
    let fetch = |addr, asid| Event::reference(Kind::Fetch, addr, 4).with_asid(asid);
    let (mut m, mut l) = with_micro(true);
    let micro = |l: &Ledger| {
        let t = l.total(1, |_, _, _| true);
        (t.accesses, t.misses)
    };
    // The first fetch traps (L1U → L2 → L3, then Invalid: mapped clean); the second hits
    // the micro-TLB and never reaches the TLB.
    run(&mut m, &mut l, &[fetch(0x40_0000, 1), fetch(0x40_0004, 1)]);
    assert_eq!(
        (micro(&l), l.total(0, |_, _, _| true).accesses),
        ((2, 1), 1)
    );
    assert_eq!(m.micro_refills(), Some(0));
    // A store rewrites the TLB's entry dirty (Modify): the clean copy goes, so the next
    // fetch misses the micro-TLB and is refilled from the TLB without a trap.
    run(&mut m, &mut l, &[store(0x40_0008, 1), fetch(0x40_000c, 1)]);
    assert_eq!(micro(&l), (3, 2));
    assert_eq!(
        (m.micro_refills(), m.counts().of(Trap::Modify)),
        (Some(1), 1)
    );
    assert_eq!(m.service().micro_cycles, 3);
    // Tagged, it keeps asid 1's entry across a switch; untagged, it does not.
    run(&mut m, &mut l, &[fetch(0x40_0000, 2), fetch(0x40_0000, 1)]);
    assert_eq!(micro(&l), (5, 3));
    let (mut u, mut lu) = with_micro(false);
    run(
        &mut u,
        &mut lu,
        &[
            fetch(0x40_0000, 1),
            fetch(0x40_0000, 2),
            fetch(0x40_0000, 1),
        ],
    );
    assert_eq!(micro(&lu), (3, 3));
    assert_eq!(u.micro_refills(), Some(1));
}

#[test]
fn an_x86_64_trace_lands_on_the_mips_segments() {
    let mut p = RefillParams::r2000_mach3();
    p.first_touch = FirstTouch::None;
    p.addresses = crate::config::RefillAddresses::X86_64;
    let mut m = SoftwareManagedTlb::new(p).unwrap();
    m.bind_kernel_classes(&X86_CLASSES.0, &X86_CLASSES.1);
    let mut l = Ledger::new(vec!["tlb".into()]);
    // A user page and one whose block collides with it in kuseg: two pages, two L1U traps,
    // on two L1 page-table pages (two L2 traps); the second hits after.
    let (a, b) = (0x40_0000, 0x7f00_0040_0000);
    assert_eq!(
        run(
            &mut m,
            &mut l,
            &[load(a, 1), load(b, 1), load(a, 1), load(b, 1)]
        ),
        [2, 0, 2, 1, 0, 0]
    );
    // The kernel reaches user space through the TLB with the running ASID: a hit.
    run(&mut m, &mut l, &[kernel_load(a, 1)]);
    assert_eq!(m.counts().all(), 5);
    // The direct map and the kernel text are unmapped; vmalloc and modules are mapped kernel
    // data: L1K traps, each nesting an L3 for the kernel-page-table page of its PTE (modules'
    // block collides with vmalloc's modulo 32, so it takes the next kseg2 block, whose PTEs
    // are on the next page).
    run(
        &mut m,
        &mut l,
        &[
            kernel_load(0xffff_8880_1234_5000, 1),
            kernel_load(0xffff_ffff_8100_0000, 1),
        ],
    );
    assert_eq!((m.counts().all(), l.unmapped), (5, 2));
    assert_eq!(
        run(&mut m, &mut l, &[kernel_load(0xffff_c900_0000_4000, 1)]),
        [2, 1, 2, 2, 0, 0]
    );
    assert_eq!(
        run(&mut m, &mut l, &[kernel_load(0xffff_ffff_c000_1000, 2)]),
        [2, 2, 2, 3, 0, 0]
    );
    // Outside every class, non-canonical, or a user-mode reference to the direct map:
    // address errors.
    run(
        &mut m,
        &mut l,
        &[
            kernel_load(0xffff_c880_0000_0000, 1),
            kernel_load(1 << 63, 1),
            load(0xffff_8880_1234_5000, 1),
        ],
    );
    assert_eq!((m.address_errors(), m.user_address_errors()), (3, 1));
    assert!(m.unplaceable().is_none());
    // Unmapping the second user page shoots down its entry at its kuseg address only.
    run(&mut m, &mut l, &[Event::control(Kind::Unmap, b, 1)]);
    assert_eq!(
        run(&mut m, &mut l, &[load(a, 1), load(b, 1)]),
        [3, 2, 2, 3, 0, 1]
    );
}

#[test]
fn an_address_space_too_large_for_kuseg_is_refused() {
    let mut p = RefillParams::r2000_mach3();
    p.addresses = crate::config::RefillAddresses::X86_64;
    let mut m = SoftwareManagedTlb::new(p).unwrap();
    let mut l = Ledger::new(vec!["tlb".into()]);
    let evs: Vec<Event> = (0..=512u64).map(|b| load(b << 33, 1)).collect();
    m.run_batch(&evs, &mut l);
    assert_eq!(m.address_errors(), 1);
    let e = m.unplaceable().unwrap();
    assert!(
        e.contains("address space 1") && e.contains("page at 0x40000000000"),
        "{e}"
    );
}

/// The shipped machine presets (in the Python package) that use the model build, and run it.
#[test]
fn the_decstation_presets_build_with_software_refill() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/lookaside/presets");
    for (name, levels, costs) in [
        ("decstation3100-mach3", 3, "mach3"),
        ("decstation3100-osf1", 3, "osf1"),
        ("decstation3100-ultrix", 2, "ultrix"),
    ] {
        let text = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
        let mut m = Machine::assemble(Some(&text), name, &[], &[]).unwrap();
        let r = m.refill().expect("software refill");
        assert_eq!(
            (r.params().levels, r.params().costs.name.as_str()),
            (levels, costs)
        );
        assert_eq!(r.lower_slots(), 8);
        m.run_batch(&[load(0x40_0000, 1)]);
        let t = m.refill().unwrap().counts().totals();
        assert_eq!(t, [1, 0, 1, (levels == 3) as u64, 0, 1], "{name}");
    }
}

// ----- Bala: the software TLB and IPC-path prefetching -------------------------------------

fn with_stlb() -> SoftwareManagedTlb {
    let mut p = RefillParams::r2000_mach3();
    p.first_touch = FirstTouch::None;
    p.stlb = Some(StlbParams {
        entries: 1024,
        ways: 1,
        classes: [false, true, true, true],
        hashed: false,
    });
    SoftwareManagedTlb::new(p).unwrap()
}

#[test]
fn the_stlb_serves_kernel_misses_without_nesting() {
    let mut m = with_stlb();
    let mut l = Ledger::new(vec!["tlb".into()]);
    let flush = Event::control(Kind::TlbFlush, FLUSH_ALL, 1);
    // Cold: L1K misses in the STLB, runs the slow path, whose L3 misses in it too.
    assert_eq!(
        run(&mut m, &mut l, &[kload(0xC000_0000)]),
        [0, 1, 0, 1, 0, 0]
    );
    assert_eq!(m.stlb_counts(), Some(([0; 6], 2)));
    // The TLB loses everything; the STLB keeps the translation: a fast L1K, no nested L3.
    assert_eq!(
        run(&mut m, &mut l, &[flush, kload(0xC000_0000)]),
        [0, 2, 0, 1, 0, 0]
    );
    assert_eq!(m.stlb_counts(), Some(([0, 1, 0, 0, 0, 0], 2)));
    // Priced: one slow L1K (294), one fast (40), the L3 (286), two STLB misses (10 each).
    let s = m.service();
    assert_eq!((s.total_cycles, s.stlb_cycles), (294 + 40 + 286 + 20, 20));
    // A user miss: the nested L2 is served fast after the first time, and its L3 vanishes.
    run(&mut m, &mut l, &[load(0x40_0000, 1)]);
    assert_eq!(m.counts().totals(), [1, 2, 1, 2, 0, 0]);
    assert_eq!(
        run(&mut m, &mut l, &[flush, load(0x40_0000, 1)]),
        [2, 2, 2, 2, 0, 0]
    );
    assert_eq!(m.counts().fast, [0, 1, 1, 0, 0, 0]);
    // Unmapping a kernel page drops it from the STLB too.
    let unmap = Event::control(Kind::Unmap, 0xC000_0000, 1);
    run(&mut m, &mut l, &[unmap, kload(0xC000_0000)]);
    assert_eq!(m.counts().fast[Trap::L1K as usize], 1);
    let j = crate::mmu::report::traps_json(&m);
    assert_eq!(j["stlb"]["hits"]["L2"], 1);
    assert_eq!(j["cycles_per_trap"]["stlb_hit"], 40);
}

#[test]
fn ipc_prefetch_brings_back_the_receivers_l2_ptes() {
    let seq = [
        load(0x40_0000, 1),
        load(0x40_0000, 2),
        Event::control(Kind::TlbFlush, 0x40_0000, 1),
        load(0x40_0000, 1),
    ];
    let mut got = Vec::new();
    for prefetch in [0, 3] {
        let mut p = RefillParams::r2000_mach3();
        p.first_touch = FirstTouch::None;
        p.prefetch = PrefetchParams::l2(prefetch);
        // One lower slot: the two tasks' L2 PTEs evict each other.
        p.tlb.partition = Some(Partition {
            lower_ways: 1,
            lower_policy: Policy::Fifo,
            upper_policy: Policy::Random,
        });
        let mut m = SoftwareManagedTlb::new(p).unwrap();
        let mut l = Ledger::new(vec!["tlb".into()]);
        got.push((run(&mut m, &mut l, &seq), *m.prefetch_work()));
    }
    assert_eq!(got[0].0, [3, 0, 3, 2, 0, 0]);
    // Back in task 1, its L2 PTE was prefetched (evicting task 2's): no L2 trap.
    assert_eq!(got[1].0, [3, 0, 2, 2, 0, 0]);
    assert_eq!(
        got[1].1,
        PrefetchWork {
            probes: 1,
            evicted: 1,
            inserted_by_class: [1, 0, 0],
        }
    );
    assert_eq!(got[1].1.inserted(), 1);
}

#[test]
fn ipc_prefetch_of_user_and_kernel_pages() {
    // Task 1 reads a user page and a page of mapped kernel data; task 2 runs and the TLB is
    // flushed; back in task 1, the prefetcher brings back what task 1 had missed on: its
    // user page (clean: it was only read) and its kernel-data page.
    let kdata = layout::KSEG2 + 0x10_0000;
    let task1 = [load(0x40_0000, 1), kernel_load(kdata, 1)];
    let mut seq = task1.to_vec();
    seq.push(load(0x40_0000, 2));
    seq.push(Event::control(Kind::TlbFlush, FLUSH_ALL, 2));
    seq.extend(task1);
    let mut got = Vec::new();
    for entries in [[0, 0, 0], [0, 1, 1]] {
        let mut p = RefillParams::r2000_mach3();
        p.first_touch = FirstTouch::None;
        p.prefetch = PrefetchParams { entries };
        let mut m = SoftwareManagedTlb::new(p).unwrap();
        let mut l = Ledger::new(vec!["tlb".into()]);
        got.push((run(&mut m, &mut l, &seq), *m.prefetch_work()));
    }
    // [L1U, L1K, L2, L3, Modify, Invalid]. Without prefetching, task 1's return repeats its
    // cold misses: L1U → L2 → L3 and L1K → L3. With it, the two entries are back before
    // its first reference (read through unmapped memory, so nothing nests).
    assert_eq!(got[0].0, [3, 2, 3, 5, 0, 0]);
    assert_eq!(got[1].0, [2, 1, 2, 3, 0, 0]);
    // Switches 1 → 2 (task 2 had missed on nothing yet) and 2 → 1 (two entries).
    assert_eq!(
        got[1].1,
        PrefetchWork {
            probes: 2,
            evicted: 0,
            inserted_by_class: [0, 1, 1],
        }
    );
    assert_eq!(got[1].1.inserted(), 2);
}

#[test]
fn bala_config_and_errors() {
    let m = machine(
        "[refill.stlb]\nentries = 2048\nways = 2\nclasses = ['L1K', 'L2']\n[refill.prefetch]\n",
    )
    .unwrap();
    let p = m.refill().unwrap().params();
    assert_eq!(
        p.stlb,
        Some(StlbParams {
            entries: 2048,
            ways: 2,
            classes: [false, true, true, false],
            hashed: false,
        })
    );
    assert_eq!(p.prefetch, PrefetchParams::l2(3));
    let e = |extra: &str| machine(extra).unwrap_err().to_string();
    assert!(e("[refill.stlb]\nways = 4\n").contains("refill.stlb.ways"));
    assert!(e("[refill.stlb]\nentries = 0\n").contains("refill.stlb.entries"));
    assert!(e("[refill.stlb]\nclasses = ['L1U']\n").contains("refill.stlb.classes"));
    assert!(e("[refill.stlb]\nindex = 'mid'\n").contains("refill.stlb.index"));
    assert!(e("[refill.prefetch]\nl2_entries = 9\n").contains("refill.prefetch.l2_entries"));
    assert!(e("[refill.prefetch]\nl1u_entries = 9\n").contains("refill.prefetch.l1u_entries"));
    assert!(e("[refill.prefetch]\nl1k_entries = 9\n").contains("refill.prefetch.l1k_entries"));
}

// ----- dynamic partitioning ----------------------------------------------------------------

#[test]
fn hill_climbing_moves_the_partition_point() {
    let mut p = RefillParams::r2000_mach3();
    p.first_touch = FirstTouch::None;
    p.dynamic = Some(DynamicParams {
        period: 4,
        threshold: 0.05,
        step: 2,
        min_lower: 4,
        max_lower: Some(12),
    });
    let mut m = SoftwareManagedTlb::new(p).unwrap();
    let mut l = Ledger::new(vec!["tlb".into()]);
    // 4 traps (L1U, L2, L3, then L1U): the first decision probes upwards by 2.
    run(&mut m, &mut l, &[load(0x40_0000, 1), load(0x40_1000, 1)]);
    assert_eq!(m.current_lower_slots(), 10);
    let w = *m.dynamic_work().unwrap();
    assert_eq!((w.decisions, w.moves_up, w.max_seen), (1, 1, 10));
    // The L1U misses were counted (6 cycles each) for the climber.
    assert_eq!(m.service().count_cycles, 2 * 6);
    let j = crate::mmu::report::traps_json(&m);
    assert_eq!(j["dynamic"]["final_lower"], 10);
    // Bad bounds and policy D are refused.
    let mut bad = RefillParams::r2000_mach3();
    bad.dynamic = Some(DynamicParams {
        period: 4,
        threshold: 0.05,
        step: 1,
        min_lower: 9,
        max_lower: None,
    });
    assert!(SoftwareManagedTlb::new(bad.clone())
        .unwrap_err()
        .starts_with("dynamic.min_lower"));
    bad.placement = PlacementPolicy::D;
    assert!(SoftwareManagedTlb::new(bad)
        .unwrap_err()
        .starts_with("dynamic"));
    // Configured on the partitioned TLB; errors name the key there.
    let partitioned = |dynamic: &str| {
        let toml = R2000.replace(
            "upper_policy = 'random' }",
            &format!("upper_policy = 'random', dynamic = {{ {dynamic} }} }}"),
        );
        Machine::assemble(Some(&format!("{toml}[refill]\n")), "m.toml", &[], &[])
    };
    let m = partitioned("period = 4, step = 2").unwrap();
    assert_eq!(m.refill().unwrap().params().dynamic.unwrap().step, 2);
    let e = partitioned("period = 0").unwrap_err().to_string();
    assert!(e.contains("tlb.tlb.partition.dynamic.period"), "{e}");
    // Its old place says where it went.
    let e = machine("[refill.dynamic]\nperiod = 10\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("refill.dynamic") && e.contains("tlb.tlb.partition.dynamic"),
        "{e}"
    );
}

// ----- the machine with [refill] and [memory]: handler references reach the caches ---------

/// Cold 64 KiB direct-mapped caches (16-byte I lines; 4-byte D lines fetching 16 bytes), 15
/// cycles a miss, physical = virtual for mapped pages, kseg0 at `vaddr & 0x1fffffff`.
const CACHES: &str = "[memory]\nmapping = 'identity'\n[memory.icache]\nsize = '64KiB'\nline = 16\nmiss_cycles = 15\n[memory.dcache]\nsize = '64KiB'\nline = 4\nwrite = 'through'\nfetch = 16\nmiss_cycles = 15\n";

#[test]
fn handler_fetches_and_pte_loads_reach_the_caches() {
    let mut m = machine(&format!(
        "[refill]\ninvalid_on_first_touch = 'none'\n{CACHES}"
    ))
    .unwrap();
    // A cold user load: L1U (20 instructions from 0x80000000), L2 nested in it (407 from
    // 0x80000080), L3 nested in that (286 from 0x80000080, every line already fetched by L2).
    m.run_batch(&[load(0x40_0000, 1)]);
    assert_eq!(m.refill().unwrap().counts().totals(), [1, 0, 1, 1, 0, 0]);
    let j = m.memory().unwrap().json();
    assert_eq!(j["system"]["instructions"], 20 + 407 + 286);
    assert_eq!(j["user"]["instructions"], 0);
    // I-misses: L1U's 80 bytes are 5 lines; L2's 1,628 bytes from 0x80 are lines 8..=109.
    let icache = &j["caches"][0];
    assert_eq!(icache["reads"], 713);
    assert_eq!(icache["read_misses"], 5 + 102);
    // D: the three PTE loads that reach memory (root, L2 PTE, L1U PTE; the L1U PTE load
    // that trapped does not), all cold, in four distinct lines with the user load.
    let dcache = &j["caches"][1];
    assert_eq!(
        (dcache["reads"].clone(), dcache["read_misses"].clone()),
        (4.into(), 4.into())
    );
    assert_eq!(j["system"]["stalls"]["icache"], 107 * 15);
    assert_eq!(j["system"]["stalls"]["dcache"], 3 * 15);
    assert_eq!(j["user"]["stalls"]["dcache"], 15);
    // The UTLB handler: its 20 instructions, 5 I-misses and the L1U PTE load made for it;
    // the nested L2 and L3 handlers count under KTLB.
    let h = &j["tlb_handlers"];
    assert_eq!(
        (
            h["utlb"]["misses"].clone(),
            h["utlb"]["instructions"].clone()
        ),
        (1.into(), 20.into())
    );
    assert_eq!(h["utlb"]["stall_cycles"], 6 * 15);
    assert_eq!(
        (
            h["ktlb"]["misses"].clone(),
            h["ktlb"]["instructions"].clone()
        ),
        (2.into(), 693.into())
    );
    assert_eq!(h["ktlb"]["stall_cycles"], (102 + 2) * 15);
    assert_eq!(j["mcpi"], (107 + 4) as f64 * 15.0 / 713.0);
    // The next page of the same 4 MB: one L1U trap, whose code and PTE (in the 16 bytes the
    // first PTE load fetched) hit; only the user load misses.
    m.run_batch(&[load(0x40_1000, 1)]);
    let j = m.memory().unwrap().json();
    assert_eq!(j["tlb_handlers"]["utlb"]["stall_cycles"], 6 * 15);
    assert_eq!(j["system"]["instructions"], 713 + 20);
    assert_eq!(j["caches"][1]["read_misses"], 5);
    // Both sections are in the result.
    let r = crate::report::result_json(&m, &crate::report::TraceInfo::default());
    assert_eq!(r["traps"]["counts"]["L1U"], 2);
    assert_eq!(r["memory"]["tlb_handlers"]["utlb"]["misses"], 2);
}

#[test]
fn refill_with_memory_config_errors_name_the_key() {
    let e = machine(&format!(
        "[refill]\n{CACHES}[memory.handler]\ncode = 0x80000000\npage_table = 0xc8000000\nroot_table = 0x80100000\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("memory.handler"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The caches change no translation result: traps by type and depth, handler work, the
    /// ledger and the TLB's contents are those of the machine without [memory]; and the
    /// handlers the memory system saw are the traps taken, running the instructions priced.
    #[test]
    fn memory_changes_no_trap_count(
        raw in prop::collection::vec((any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>()), 1..300),
        levels in 2u8..4,
        stlb in any::<bool>(),
        prefetch in any::<bool>(),
    ) {
        let evs = events(&raw);
        let costs = if levels == 2 { "ultrix" } else { "mach3" };
        let mut extra = format!("[refill]\nlevels = {levels}\ncosts = '{costs}'\n");
        if stlb {
            extra.push_str("[refill.stlb]\nentries = 16\n");
        }
        if prefetch {
            extra.push_str("[refill.prefetch]\nl2_entries = 2\n");
        }
        let mut plain = machine(&extra).unwrap();
        // Caches private per mode: the handlers' references take the kernel's.
        let caches = CACHES.replace("[memory]\n", "[memory]\nprivate = 'mode'\n");
        let mut cached = machine(&format!("{extra}{caches}")).unwrap();
        for chunk in evs.chunks(29) {
            plain.run_batch(chunk);
        }
        // Half through the feed a decoder uses.
        let (a, b) = evs.split_at(evs.len() / 2);
        cached.run_batch(a);
        {
            let mut f = cached.feed();
            for e in b {
                crate::event::EventSink::event(&mut f, e);
            }
        }
        let (p, c) = (plain.refill().unwrap(), cached.refill().unwrap());
        prop_assert_eq!(p.counts(), c.counts());
        prop_assert_eq!(p.handler(), c.handler());
        prop_assert_eq!(p.address_errors(), c.address_errors());
        prop_assert_eq!(p.tlb().entries_iter().collect::<Vec<_>>(), c.tlb().entries_iter().collect::<Vec<_>>());
        let (lp, lc) = (plain.ledger().total(0, |_, _, _| true), cached.ledger().total(0, |_, _, _| true));
        prop_assert_eq!((lp.accesses, lp.misses), (lc.accesses, lc.misses));
        let t = c.counts().totals();
        let j = cached.memory().unwrap().json();
        let h = &j["tlb_handlers"];
        prop_assert_eq!(h["utlb"]["misses"].as_u64(), Some(t[Trap::L1U as usize]));
        prop_assert_eq!(
            h["ktlb"]["misses"].as_u64(),
            Some(t[Trap::L1K as usize] + t[Trap::L2 as usize] + t[Trap::L3 as usize])
        );
        let s = c.service();
        let priced: u64 = [Trap::L1U, Trap::L1K, Trap::L2, Trap::L3]
            .iter()
            .map(|&t| s.cycles[t as usize].unwrap_or(0))
            .sum::<u64>()
            + s.stlb_cycles;
        prop_assert_eq!(
            h["utlb"]["instructions"].as_u64().unwrap() + h["ktlb"]["instructions"].as_u64().unwrap(),
            priced
        );
        // The kernel's D-cache sees the kernel's loads and the handlers' loads that reach
        // memory: the counted PTE loads less the L2 traps nested in a uTLB handler (whose
        // trapped load it does not see), plus the software TLB's probes (8-byte entries: two
        // accesses of 4-byte lines each).
        let hw = c.handler();
        let probes = c.stlb_counts().map_or(0, |(fast, misses)| fast.iter().sum::<u64>() + misses);
        // Each kernel load below 4 GB (above: an address error) reads every 4-byte line it
        // spans.
        let kernel_loads: u64 = evs
            .iter()
            .filter(|e| e.kind == Kind::Load && e.mode == Mode::Kernel && e.addr < 1 << 32)
            .map(|e| (e.addr.saturating_add(e.size as u64 - 1) >> 2) - (e.addr >> 2) + 1)
            .sum();
        let kd = j["caches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["name"] == "dcache[kernel]")
            .unwrap();
        prop_assert_eq!(
            kd["reads"].as_u64().unwrap(),
            kernel_loads + hw.pte_loads_mapped + hw.pte_loads_unmapped
                - c.counts().by_depth[1][Trap::L2 as usize]
                + 2 * probes
        );
        prop_assert_eq!(j["system"]["instructions"].as_u64().unwrap() + j["user"]["instructions"].as_u64().unwrap() + j["idle"]["instructions"].as_u64().unwrap(),
            priced + evs.iter().filter(|e| e.kind == Kind::Fetch).count() as u64);
    }
}
