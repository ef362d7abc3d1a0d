//! The virtually addressed cache against a brute-force reference, and the alias policies
//! against a consistency oracle: a model of what every physical line *should* hold, checked
//! on every read of random map/unmap/remap/protect/copy/access sequences.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::alias::{AliasPolicy, At, Consistency, VacVm, VmCounts};
use super::reference::RefVac;
use super::timing::Timing;
use super::{Indexing, Lines, Vac, VacParams};
use crate::tlb::Policy;

fn params(size: u64, ways: usize, line: u64, page: u64) -> VacParams {
    VacParams {
        size,
        ways,
        line,
        page,
        policy: Policy::Lru,
        indexing: Indexing::Virtual,
    }
}

#[test]
fn hp_cache_has_32_colours_of_64_lines() {
    let v = Vac::new(&VacParams::hp9000_834()).unwrap();
    assert_eq!(v.sets(), 2048);
    assert_eq!(v.lines_per_page(), 64);
    assert_eq!(v.colours(), 32);
    assert_eq!(v.colour(0x1_0800), 1);
    assert_eq!(v.colour(0x2_0800), 1); // 128 KB / 2 ways = 64 KB per way: colours wrap
}

#[test]
fn params_errors_name_the_field() {
    let cases = [
        (params(4096, 2, 24, 512), "line"),
        (params(4096, 2, 32, 500), "page"),
        (params(4096, 2, 64, 32), "page"),
        (params(4096, 0, 32, 512), "ways"),
        (params(4000, 2, 32, 512), "size"),
        (params(3 * 1024, 1, 32, 512), "number of sets"),
    ];
    for (p, field) in cases {
        let e = Vac::new(&p).unwrap_err();
        assert!(e.contains(field), "{p:?}: {e}");
    }
}

#[test]
fn aligned_aliases_share_a_line_unaligned_ones_do_not() {
    let mut v = Vac::new(&VacParams::hp9000_834()).unwrap();
    let pa = 0x40_0000 + 0x40;
    let va = 0x10_0000 + 0x40; // colour 0, like pa
    assert_eq!(v.colour(va), v.colour(pa));
    assert!(!v.access(va, pa, true).hit);
    // Another virtual address of the same colour (64 KB further): the same line.
    assert!(v.access(va + 0x1_0000, pa, false).hit);
    // The physical alias is aligned too.
    assert!(v.access(pa, pa, false).hit);
    // A different colour: a second copy of the line, in another set.
    let other = va + 0x800;
    assert!(!v.access(other, pa, false).hit);
    assert_eq!(v.occupancy(), 2);
    // Flushing one alias leaves the other.
    let l = v.flush_page(va & !0x7ff, pa & !0x7ff);
    assert_eq!(
        l,
        Lines {
            visited: 64,
            present: 1,
            dirty: 1
        }
    );
    assert!(v.resident(other, pa).is_some());
    assert_eq!(v.purge_page(other & !0x7ff, pa & !0x7ff).present, 1);
    assert_eq!(v.occupancy(), 0);
}

#[test]
fn physically_indexed_cache_has_no_unaligned_aliases() {
    let mut p = VacParams::hp9000_834();
    p.indexing = Indexing::Physical;
    let mut v = Vac::new(&p).unwrap();
    assert_eq!(v.colours(), 1);
    v.access(0x10_0800, 0x40_0000, true);
    assert!(v.access(0x20_1000, 0x40_0000, false).hit);
}

#[test]
fn data_moves_with_fills_write_backs_and_purges() {
    let mut v = Vac::new(&params(1024, 1, 32, 256)).unwrap();
    v.track_data();
    v.access_data(0, 0, Some(7));
    assert_eq!(v.memory_value(0), Some(0));
    // A conflicting line (same set: 1 KB further) evicts and writes back.
    v.access_data(1024, 1024, None);
    assert_eq!(v.memory_value(0), Some(7));
    v.access_data(0, 0, Some(8));
    v.purge_page(0, 0);
    assert_eq!(
        v.access_data(0, 0, None).1,
        7,
        "a purge discards the dirty 8"
    );
    v.access_data(0, 0, Some(9));
    v.flush_page(0, 0);
    assert_eq!(v.memory_value(0), Some(9));
}

/// One step against both caches: kind (0 read, 1 write, 2 flush, 3 purge, 4 physical read,
/// 5 physical write), virtual page, physical page, line in page.
fn cache_step() -> impl Strategy<Value = (u8, u64, u64, u64)> {
    (0u8..6, 0u64..12, 0u64..6, 0u64..16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The cache and the brute-force one agree on every hit, victim, flush and
    /// purge count and on their final content, for caches whose ways are smaller than, equal
    /// to and larger than a page.
    #[test]
    fn vac_matches_the_brute_force_reference(
        shape in prop_oneof![
            Just((4096u64, 2usize, 32u64, 512u64)),
            Just((2048, 4, 16, 128)),
            Just((1024, 2, 32, 1024)),
            Just((512, 1, 16, 1024)),
            Just((4096, 8, 32, 256)),
        ],
        steps in prop::collection::vec(cache_step(), 1..400),
    ) {
        let (size, ways, line, page) = shape;
        let mut v = Vac::new(&params(size, ways, line, page)).unwrap();
        let mut r = RefVac::new(size, ways, line, page);
        let lpp = page / line;
        for (kind, vp, pp, li) in steps {
            let off = (li % lpp) * line;
            let (va, pa) = (vp * page + off, pp * page + off);
            match kind {
                0 | 1 | 4 | 5 => {
                    let write = kind % 2 == 1;
                    let idx = if kind >= 4 { pa } else { va };
                    let a = v.access(idx, pa, write);
                    let (hit, victim) = r.access(idx, pa, write);
                    prop_assert_eq!(a.hit, hit);
                    prop_assert_eq!(a.victim.map(|x| (x.pline, x.dirty)), victim);
                }
                _ => {
                    let l = if kind == 2 {
                        v.flush_page(vp * page, pp * page)
                    } else {
                        v.purge_page(vp * page, pp * page)
                    };
                    prop_assert_eq!(l, r.clear_page(vp * page, pp * page));
                }
            }
        }
        let mut mine: Vec<_> = v.lines().map(|(_, pl, s, d)| (s, pl, d)).collect();
        mine.sort();
        prop_assert_eq!(mine, r.content());
    }
}

// ---------------------------------------------------------------------------------------
// The consistency oracle.

/// A small machine for the oracle: 4 KB, 2-way, 32-byte lines, 512-byte pages: 64 sets, 16
/// lines per page, 4 page colours.
fn small() -> VacParams {
    params(4096, 2, 32, 512)
}

/// A timing whose prices are linear in the counts (no overlapped write-backs), so that the
/// cost of every step can be recomputed from what it counted.
fn linear_timing() -> Timing {
    let mut t = Timing::preset("hp9000-834").unwrap();
    t.flush.overlap_lines = 0;
    t.flush.present_line_us = 0.25;
    t
}

/// What the counts say a run should have cost.
fn priced(t: &Timing, c: &VmCounts, lpp: u64) -> f64 {
    let f = &t.flush;
    f.base_us * c.flush_calls as f64
        + f.line_us * c.flushed.visited as f64
        + f.present_line_us * c.flushed.present as f64
        + f.writeback_us * c.flushed.dirty as f64
        + t.purge.base_us * c.purge_calls as f64
        + t.purge.line_us * c.purged.visited as f64
        + (t.copy.base_us + t.copy.line_us * lpp as f64) * c.copies as f64
        + (t.zero.base_us + t.zero.line_us * lpp as f64) * c.zeros as f64
        + t.memory.fill_us * c.misses as f64
        + t.memory.writeback_us * c.writebacks as f64
        + t.vm.map_us * (c.maps + c.remaps) as f64
        + t.vm.unmap_us * c.unmaps as f64
        + t.vm.protect_us * c.protects as f64
        + t.vm.tlb_purge_us * c.tlb_purges as f64
        + t.vm.pseudo_fault_us * c.pseudo_faults as f64
        + t.vm.page_alloc_us * c.page_allocs as f64
}

/// One random step: (kind, address space, virtual page, frame, line, flag).
type Step = (u8, u32, u64, u64, u64, bool);

fn step() -> impl Strategy<Value = Step> {
    (0u8..12, 0u32..3, 0u64..6, 0u64..5, 0u64..16, any::<bool>())
}

/// What went wrong in a run, if anything.
#[derive(Debug)]
struct Stale {
    step: usize,
    what: String,
}

/// Drive `vm` with `steps`, keeping the truth of every physical line; stop at the first stale
/// read, broken invariant or cost that does not match the counts.
fn oracle(vm: &mut VacVm, steps: &[Step], check_costs: bool) -> Result<(), Stale> {
    const PAGE: u64 = 512;
    const LINE: u64 = 32;
    let lpp = PAGE / LINE;
    vm.vac_mut().track_data();
    // What each physical line holds; None once its content is dead.
    let mut truth: HashMap<u64, Option<u64>> = HashMap::new();
    let mut version = 0u64;
    let t = vm.timing().clone();
    let fail = |i: usize, what: String| Stale { step: i, what };
    for (i, &(kind, asid, vp, fr, li, flag)) in steps.iter().enumerate() {
        let (va, frame) = (vp * PAGE, fr * PAGE);
        let at = At::Virt(asid, va + li * LINE);
        let before = (
            vm.counts(),
            vm.cache_counts(),
            vm.vac().occupancy(),
            vm.elapsed_us(),
        );
        let r: Result<(), String> = match kind {
            0 => vm
                .map(asid, va, frame, flag || asid == 0, li % 2 == 0)
                .map(|_| ()),
            1 => {
                // Unmap; dead only when no other address space maps the frame.
                let dead = flag && sole_mapping(vm, asid, va);
                let f = frame_of(vm, asid, va);
                let r = vm.unmap(asid, va, dead).map(|_| ());
                if r.is_ok() && dead {
                    let f = f.expect("mapped");
                    for l in 0..lpp {
                        truth.insert(f / LINE + l, None);
                    }
                }
                r
            }
            2 => vm.remap(asid, va, frame).map(|_| ()),
            3 => vm.protect(asid, va, flag).map(|_| ()),
            4 | 5 => {
                // Load, virtual or physical.
                let at = if kind == 5 {
                    At::Phys(frame + li * LINE)
                } else {
                    at
                };
                let pa = phys(vm, at);
                match vm.load(at) {
                    Ok((_, touch)) => {
                        let pl = pa.expect("loaded") / LINE;
                        if let Some(Some(want)) = truth.get(&pl).copied().or(Some(Some(0))) {
                            if touch.value != want {
                                return Err(fail(
                                    i,
                                    format!(
                                        "stale read at {at:?}: line {pl:#x} holds {} but {want} \
                                         was written last",
                                        touch.value
                                    ),
                                ));
                            }
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
            6 | 7 => {
                let at = if kind == 7 {
                    At::Phys(frame + li * LINE)
                } else {
                    at
                };
                version += 1;
                let pa = phys(vm, at);
                let r = vm.store(at, version).map(|_| ());
                if r.is_ok() {
                    truth.insert(pa.expect("stored") / LINE, Some(version));
                }
                r
            }
            8 => {
                // Copy a page: from this address space's page to another's, or physically.
                let src = if flag {
                    At::Phys(frame)
                } else {
                    At::Virt(asid, va)
                };
                let dst = At::Virt((asid + 1) % 3, ((vp + li) % 6) * PAGE);
                let (ps, pd) = (phys(vm, src), phys(vm, dst));
                let r = vm.copy_page(src, dst).map(|_| ());
                if r.is_ok() {
                    let (ps, pd) = (ps.expect("src") / LINE, pd.expect("dst") / LINE);
                    let vals: Vec<_> = (0..lpp)
                        .map(|l| truth.get(&(ps + l)).copied().unwrap_or(Some(0)))
                        .collect();
                    for (l, v) in vals.into_iter().enumerate() {
                        truth.insert(pd + l as u64, v);
                    }
                }
                r
            }
            9 => {
                let dst = if flag {
                    At::Phys(frame)
                } else {
                    At::Virt(asid, va)
                };
                let pd = phys(vm, dst);
                let r = vm.zero_page(dst).map(|_| ());
                if r.is_ok() {
                    for l in 0..lpp {
                        truth.insert(pd.expect("dst") / LINE + l, Some(0));
                    }
                }
                r
            }
            10 => vm
                .unload(if flag {
                    At::Phys(frame)
                } else {
                    At::Virt(asid, va)
                })
                .map(|_| ()),
            _ => {
                // Several reads of one page through every address space mapping it.
                for a in 0..3 {
                    let at = At::Virt(a, va + li * LINE);
                    let pa = phys(vm, at);
                    if let Ok((_, touch)) = vm.load(at) {
                        let pl = pa.expect("loaded") / LINE;
                        if let Some(want) = truth.get(&pl).copied().unwrap_or(Some(0)) {
                            if touch.value != want {
                                return Err(fail(
                                    i,
                                    format!("stale read at {at:?}: {} not {want}", touch.value),
                                ));
                            }
                        }
                    }
                }
                Ok(())
            }
        };
        let _ = r; // Refused steps (already mapped, read-only, unmapped…) change nothing.
        vm.check_invariants().map_err(|e| fail(i, e))?;
        // Conservation: lines only arrive by misses and leave by evictions, flushes, purges.
        let (c0, k0, occ0, us0) = before;
        let (c1, k1) = (vm.counts(), vm.cache_counts());
        let left = (c1.flushed.present - c0.flushed.present)
            + (c1.purged.present - c0.purged.present)
            + (k1.evictions - k0.evictions);
        let occ1 = vm.vac().occupancy();
        if occ0 as u64 + (k1.misses - k0.misses) - left != occ1 as u64 {
            return Err(fail(
                i,
                format!("occupancy {occ0} → {occ1} does not add up"),
            ));
        }
        if c1.writebacks - c0.writebacks != k1.writebacks - k0.writebacks {
            return Err(fail(i, "write-backs counted twice or not at all".into()));
        }
        if check_costs {
            let want = priced(&t, &c1, lpp) - priced(&t, &c0, lpp);
            let got = vm.elapsed_us() - us0;
            if (want - got).abs() > 1e-6 * want.abs().max(1.0) {
                return Err(fail(i, format!("charged {got} µs, the counts say {want}")));
            }
        }
    }
    Ok(())
}

/// The physical address `at` reaches now, if mapped.
fn phys(vm: &VacVm, at: At) -> Option<u64> {
    match at {
        At::Phys(p) => Some(p),
        At::Virt(asid, va) => frame_of(vm, asid, va).map(|f| f | (va % 512)),
    }
}

fn frame_of(vm: &VacVm, asid: u32, va: u64) -> Option<u64> {
    vm.frame_at(asid, va)
}

fn sole_mapping(vm: &VacVm, asid: u32, va: u64) -> bool {
    match frame_of(vm, asid, va) {
        None => true,
        Some(f) => vm
            .aliases_of(f)
            .iter()
            .all(|&(a, v)| (a, v) == (asid, va & !511) || a == u32::MAX),
    }
}

fn all_policies() -> Vec<AliasPolicy> {
    let mut v = Vec::new();
    for bits in 0..8u8 {
        v.push(AliasPolicy {
            consistency: Consistency::PseudoAliasing,
            purge_dead: bits & 1 != 0,
            read_only_aliasing: bits & 2 != 0,
            equivalent_mapping: bits & 4 != 0,
        });
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Under every pseudo-aliasing variant no read is ever stale, the invariants hold after
    /// every step, and every step costs exactly what its counted lines say.
    #[test]
    fn pseudo_aliasing_never_reads_stale_data(steps in prop::collection::vec(step(), 1..250)) {
        for policy in all_policies() {
            let mut vm = VacVm::new(&small(), policy, linear_timing()).unwrap();
            if let Err(s) = oracle(&mut vm, &steps, true) {
                prop_assert!(false, "{}: step {} ({:?}): {}", policy.name(), s.step,
                             steps[s.step], s.what);
            }
        }
    }

    /// A physically indexed cache needs no consistency software at all.
    #[test]
    fn physically_indexed_cache_never_reads_stale_data(
        steps in prop::collection::vec(step(), 1..250),
    ) {
        let mut p = small();
        p.indexing = Indexing::Physical;
        let mut vm = VacVm::new(&p, AliasPolicy::none(), linear_timing()).unwrap();
        if let Err(s) = oracle(&mut vm, &steps, true) {
            prop_assert!(false, "step {}: {}", s.step, s.what);
        }
    }
}

/// The oracle is not blind: without consistency software, an unaligned alias reads stale
/// data, and random streams find it too.
#[test]
fn without_consistency_the_oracle_finds_stale_reads() {
    // Frame 0 mapped writable at page 0 of space 0 and at page 1 of space 1 (another colour).
    let steps: Vec<Step> = vec![
        (0, 0, 0, 0, 0, true),  // map (0, page 0) → frame 0, eager
        (0, 1, 1, 0, 0, true),  // map (1, page 1) → frame 0
        (4, 1, 1, 0, 3, false), // read line 3 through space 1: caches version 0
        (6, 0, 0, 0, 3, false), // write line 3 through space 0: version 1, in another set
        (4, 1, 1, 0, 3, false), // read through space 1 again: stale 0
    ];
    let mut vm = VacVm::new(&small(), AliasPolicy::none(), linear_timing()).unwrap();
    let e = oracle(&mut vm, &steps, false).unwrap_err();
    assert_eq!(e.step, 4, "{e:?}");
    assert!(e.what.contains("stale read"), "{e:?}");
    // The same steps are safe under pseudo-aliasing: the second read takes a pseudo page
    // fault that flushes space 0's dirty line first.
    let mut vm = VacVm::new(&small(), AliasPolicy::chorus(), linear_timing()).unwrap();
    oracle(&mut vm, &steps, true).unwrap();
    assert_eq!(vm.counts().pseudo_faults, 2);
    assert_eq!(vm.counts().flushed.dirty, 1);

    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let found = (0..200).any(|_| {
        let steps = prop::collection::vec(step(), 200)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let mut vm = VacVm::new(&small(), AliasPolicy::none(), linear_timing()).unwrap();
        oracle(&mut vm, &steps, false).is_err()
    });
    assert!(
        found,
        "random streams never caught a stale read without consistency"
    );
}

#[test]
fn policy_names_round_trip() {
    for p in all_policies().into_iter().chain([AliasPolicy::none()]) {
        assert_eq!(AliasPolicy::parse(&p.name()).unwrap(), p);
    }
    assert!(AliasPolicy::parse("pseudo-aliasing+fast")
        .unwrap_err()
        .contains("'fast'"));
    assert!(AliasPolicy::parse("none+purge").is_err());
}

#[test]
fn pseudo_aliasing_walks_through_the_papers_protocol() {
    let mut vm = VacVm::new(
        &VacParams::hp9000_834(),
        AliasPolicy::chorus(),
        Timing::preset("hp9000-834").unwrap(),
    )
    .unwrap();
    let f = vm.alloc_frame(Some(0)).unwrap();
    // Initial mapping of a cold page: nothing to flush.
    vm.map(1, 0x10_0000, f, true, true).unwrap();
    assert_eq!(vm.counts().flush_calls, 0);
    for l in 0..64 {
        vm.store(At::Virt(1, 0x10_0000 + 32 * l), l).unwrap();
    }
    // A second mapping at another colour, eager: the first is invalidated, its TLB entry
    // purged and its 64 dirty lines flushed.
    vm.map(2, 0x20_0800, f, true, true).unwrap();
    let c = vm.counts();
    assert_eq!((c.flush_calls, c.flushed.dirty, c.tlb_purges), (1, 64, 1));
    assert_eq!(vm.mapped(1, 0x10_0000), Some(false));
    // The old address raises a pseudo page fault, which flushes the other (clean) alias.
    let (_, t) = vm.load(At::Virt(1, 0x10_0000)).unwrap();
    assert!(t.pseudo_fault && !t.hit);
    assert_eq!(t.value, 0, "no data tracked");
    assert_eq!(vm.counts().flush_calls, 2);
    // Unmapping the live alias flushes; with a purging policy, a dead page is purged.
    vm.unmap(1, 0x10_0000, false).unwrap();
    assert_eq!(vm.counts().flush_calls, 3);
}

#[test]
fn read_only_aliases_coexist_and_are_purged_when_one_becomes_writable() {
    let policy = AliasPolicy::parse("pseudo-aliasing+read-only").unwrap();
    let mut vm = VacVm::new(&small(), policy, linear_timing()).unwrap();
    vm.map(0, 0, 0, false, true).unwrap();
    vm.map(1, 512, 0, false, true).unwrap();
    vm.load(At::Virt(0, 0)).unwrap();
    vm.load(At::Virt(1, 512)).unwrap();
    assert_eq!(vm.counts().pseudo_faults, 0);
    assert_eq!(vm.vac().occupancy(), 2);
    vm.protect(1, 512, true).unwrap();
    let c = vm.counts();
    assert_eq!((c.purge_calls, c.purged.present, c.flush_calls), (1, 1, 0));
    assert_eq!(vm.mapped(0, 0), Some(false));
}

#[test]
fn equivalent_mapping_needs_no_flush_between_aligned_aliases() {
    let policy = AliasPolicy::parse("pseudo-aliasing+equivalent").unwrap();
    let mut vm = VacVm::new(&small(), policy, linear_timing()).unwrap();
    // 4 colours of 512 bytes: pages 0 and 4 have the same colour.
    vm.map(0, 0, 0, true, true).unwrap();
    vm.store(At::Virt(0, 0), 1).unwrap();
    vm.map(1, 4 * 512, 0, true, true).unwrap();
    let (_, t) = vm.load(At::Virt(1, 4 * 512)).unwrap();
    assert!(t.hit && !t.pseudo_fault);
    assert_eq!(vm.counts().flush_calls, 0);
    // Without the policy, the same aligned alias is flushed anyway.
    let mut vm = VacVm::new(&small(), AliasPolicy::chorus(), linear_timing()).unwrap();
    vm.map(0, 0, 0, true, true).unwrap();
    vm.store(At::Virt(0, 0), 1).unwrap();
    vm.map(1, 4 * 512, 0, true, true).unwrap();
    assert_eq!(vm.counts().flushed.dirty, 1);
}

#[test]
fn primitives_refuse_bad_fields_by_name() {
    let mut vm = VacVm::new(&small(), AliasPolicy::chorus(), linear_timing()).unwrap();
    assert!(vm.map(0, 3, 0, true, false).unwrap_err().starts_with("va:"));
    assert!(vm
        .map(0, 0, 5, true, false)
        .unwrap_err()
        .starts_with("frame:"));
    vm.map(0, 0, 0, true, false).unwrap();
    assert!(vm
        .map(0, 0, 512, true, false)
        .unwrap_err()
        .contains("already mapped"));
    assert!(vm.unmap(1, 0, false).unwrap_err().contains("not mapped"));
    vm.map(1, 0, 0, false, false).unwrap();
    assert!(vm.unmap(0, 0, true).unwrap_err().starts_with("dead:"));
    assert!(vm
        .store(At::Virt(1, 0), 1)
        .unwrap_err()
        .starts_with("protection:"));
    assert!(vm
        .copy(At::Virt(0, 4), At::Virt(1, 0), 32)
        .unwrap_err()
        .starts_with("src:"));
    assert!(vm.alloc_frame(Some(9)).unwrap_err().starts_with("colour:"));
    assert!(vm.free_frame(1536).unwrap_err().contains("not allocated"));
    assert!(vm.remap(0, 0, 1 << 48).unwrap_err().starts_with("frame:"));
    assert_eq!(
        vm.frame_at(0, 0),
        Some(0),
        "a refused remap keeps the mapping"
    );
    assert!(vm.free_frame(0).unwrap_err().contains("still mapped"));
}

#[test]
fn engine_events_drive_the_primitives() {
    use super::alias::Op;
    use crate::event::{Event, Kind};
    let events = [
        Event::control(Kind::Map, 0, 1).with_paddr(512),
        Event::reference(Kind::Store, 0x40, 4).with_asid(1),
        Event::control(Kind::Map, 512, 2).with_paddr(512),
        Event::reference(Kind::Load, 512 + 0x40, 4).with_asid(2),
        Event::control(Kind::Unmap, 0, 1),
        Event::control(Kind::Marker, 7, 0),
    ];
    let mut vm = VacVm::new(&small(), AliasPolicy::chorus(), linear_timing()).unwrap();
    let mut applied = 0;
    for e in &events {
        if let Some(op) = Op::from_event(e).unwrap() {
            vm.apply(&op).unwrap();
            applied += 1;
        }
    }
    assert_eq!(applied, 5);
    let c = vm.counts();
    // Both lazy mappings fault once; the second flushes the first's dirty line.
    assert_eq!(
        (c.maps, c.unmaps, c.pseudo_faults, c.flushed.dirty),
        (2, 1, 2, 1)
    );
    let no_frame = Event::control(Kind::Map, 0, 1);
    assert!(Op::from_event(&no_frame).unwrap_err().contains("paddr"));
}

#[test]
fn one_line_can_be_cached_three_times() {
    // Inouye et al.'s Figure 1: two virtual aliases of different colours and the physical
    // address, each indexing a different set, hold three copies of one line.
    let mut v = Vac::new(&VacParams::hp9000_834()).unwrap();
    let pa = 0x40_1000 + 0x20; // colour 2
    for index in [0x10_0000 + 0x20, 0x10_0800 + 0x20, pa] {
        assert!(!v.access(index, pa, false).hit);
    }
    assert_eq!(v.occupancy(), 3);
    let plines: Vec<u64> = v.lines().map(|l| l.1).collect();
    assert_eq!(plines, vec![pa / 32; 3]);
}

/// Adversarial: one frame mapped at every colour in every address space and physically,
/// written and read in turn through each alias, with protections flipped between rounds —
/// the most flushing and faulting a small machine allows.
#[test]
fn every_alias_of_one_frame_in_turn_never_reads_stale_data() {
    let mut steps: Vec<Step> = Vec::new();
    for asid in 0..3 {
        for vp in 0..4 {
            steps.push((0, asid, vp, 1, 0, true)); // map writable, eager
        }
    }
    for round in 0..6u64 {
        for asid in 0..3 {
            for vp in 0..4 {
                let line = (round * 5 + vp + asid as u64) % 16;
                steps.push((6, asid, vp, 1, line, false)); // store
                steps.push((11, asid, vp, 1, line, false)); // read through every space
                steps.push((5, asid, vp, 1, line, false)); // physical read
                steps.push((7, asid, vp, 1, (line + 1) % 16, false)); // physical store
                steps.push((4, asid, vp, 1, (line + 1) % 16, false));
            }
            steps.push((3, asid, round % 4, 1, 0, round % 2 == 0)); // protect
        }
        steps.push((8, round as u32 % 3, round % 4, 1, 1, round % 2 == 1)); // copy
        steps.push((2, 1, round % 4, 1 + round % 2, 0, false)); // remap
    }
    for policy in all_policies() {
        let mut vm = VacVm::new(&small(), policy, linear_timing()).unwrap();
        if let Err(s) = oracle(&mut vm, &steps, true) {
            panic!(
                "{}: step {} ({:?}): {}",
                policy.name(),
                s.step,
                steps[s.step],
                s.what
            );
        }
        assert!(
            vm.counts().pseudo_faults > 20,
            "{}: {:?}",
            policy.name(),
            vm.counts()
        );
    }
    let mut vm = VacVm::new(&small(), AliasPolicy::none(), linear_timing()).unwrap();
    assert!(oracle(&mut vm, &steps, false).is_err());
}

/// The frame pool against a plain reference: a set of taken frames, and an allocation that
/// tries every frame from 0 for the lowest one starting a free run of the size, aligned to it,
/// of the colour asked. Random allocations of runs of 1 to 8 frames (of any colour, or one,
/// some with no aligned run of it, some beyond the cache's colours),
/// claims and frees of runs (`small`: 4 colours of 512-byte pages) give the same frames,
/// refusals and counts.
#[test]
fn the_frame_pool_hands_out_the_lowest_aligned_run() {
    #[derive(Clone, Debug)]
    enum Step {
        Alloc(u64, Option<u64>),
        Claim(u64, u64),
        Free(u64, u64),
    }
    let step = (0u8..3, 0u32..4, 0u64..48, 0u64..6).prop_map(|(what, order, frame, colour)| {
        let n = 1u64 << order;
        match what {
            0 => Step::Alloc(n, colour.checked_sub(1)),
            1 => Step::Claim(frame, n),
            _ => Step::Free(frame & !(n - 1), n),
        }
    });
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
    runner
        .run(&proptest::collection::vec(step, 1..80), |steps| {
            let page = small().page;
            let mut vm = VacVm::new(&small(), AliasPolicy::chorus(), linear_timing()).unwrap();
            let colours = vm.vac().colours();
            let mut taken = std::collections::BTreeSet::new();
            let (mut allocs, mut frees) = (0u64, 0u64);
            for s in steps {
                match s {
                    Step::Alloc(n, colour) => {
                        let fits = |f: u64| {
                            f.is_multiple_of(n)
                                && colour.is_none_or(|c| f % colours == c)
                                && (f..f + n).all(|g| !taken.contains(&g))
                        };
                        // (Fewer than 48 + 80 × 8 frames are ever taken.)
                        let want = (0..4096).find(|&f| fits(f));
                        let got = vm.alloc_run(n, colour);
                        prop_assert_eq!(
                            got.as_ref().ok().copied(),
                            want.map(|f| f * page),
                            "{:?}",
                            got
                        );
                        if let Some(f) = want {
                            taken.extend(f..f + n);
                            allocs += 1;
                        }
                    }
                    Step::Claim(f, n) => {
                        vm.claim_run(f * page, n);
                        taken.extend(f..f + n);
                    }
                    Step::Free(f, n) => {
                        let ok = (f..f + n).all(|g| taken.contains(&g));
                        prop_assert_eq!(vm.free_run(f * page, n).is_ok(), ok);
                        if ok {
                            (f..f + n).for_each(|g| {
                                taken.remove(&g);
                            });
                            frees += 1;
                        }
                    }
                }
            }
            let c = vm.counts();
            prop_assert_eq!((c.page_allocs, c.page_frees), (allocs, frees));
            Ok(())
        })
        .unwrap();
}
