//! Tests of the TLB engine: hand-worked examples of every documented behaviour, parameter
//! validation, and differential property tests against the brute-force [`super::reference`]
//! model over random and adversarial streams, every policy, partitions, global contexts and
//! geometries from 1 entry to 1536 entries 12-way and 1024 entries fully associative — with
//! both lookup structures (scan and hash index), so each is checked on every geometry.

use super::reference::RefTlb;
use super::*;
use proptest::prelude::*;
use proptest::sample::select;

const A: u64 = 0xA;
const B: u64 = 0xB;
const C: u64 = 0xC;
const D: u64 = 0xD;
const E: u64 = 0xE;
const F: u64 = 0xF;
const G: u64 = 0x77; // a "global" context tag

fn fa(entries: usize, policy: Policy) -> Tlb {
    Tlb::new(&TlbParams::new(entries, entries, policy)).unwrap()
}

/// Access each page in ASID 1 (no globals); returns the hits.
fn run(t: &mut Tlb, pages: &[u64]) -> Vec<bool> {
    pages
        .iter()
        .map(|&p| t.access(p, 1, NO_CTX, Part::Lower))
        .collect()
}

fn pages(t: &Tlb) -> Vec<u64> {
    t.entries_iter().map(|e| e.2).collect()
}

// ----- hand-worked policy examples ---------------------------------------------------------

#[test]
fn lru_a_b_c_d_a_e_evicts_b() {
    for lookup in [Lookup::Scan, Lookup::Index] {
        let mut t = Tlb::with_lookup(&TlbParams::new(4, 4, Policy::Lru), lookup).unwrap();
        assert_eq!(
            run(&mut t, &[A, B, C, D, A]),
            [false, false, false, false, true]
        );
        assert_eq!(t.fill(E, 1, Part::Lower), Some((B, 1)));
        assert_eq!(pages(&t), [A, E, C, D]);
        // Now LRU order is C D A E.
        assert_eq!(t.fill(F, 1, Part::Lower), Some((C, 1)));
    }
}

#[test]
fn fifo_a_b_c_d_a_e_evicts_a() {
    let mut t = fa(4, Policy::Fifo);
    assert_eq!(
        run(&mut t, &[A, B, C, D, A]),
        [false, false, false, false, true]
    );
    assert_eq!(t.fill(E, 1, Part::Lower), Some((A, 1)));
    assert_eq!(t.fill(F, 1, Part::Lower), Some((B, 1)));
    assert_eq!(pages(&t), [E, F, C, D]);
}

#[test]
fn clock_example() {
    let mut t = fa(4, Policy::Nru);
    run(&mut t, &[A, B, C, D]);
    // Every bit is set: the hand sweeps round clearing them and takes way 0; hand -> 1.
    assert_eq!(t.fill(E, 1, Part::Lower), Some((A, 1)));
    // B (way 1) gets its bit back; from the hand, B is spared (bit cleared) and C taken.
    assert!(t.lookup(B, 1, NO_CTX));
    assert_eq!(t.fill(F, 1, Part::Lower), Some((C, 1)));
    // Hand is at 3: D's bit was cleared by the first sweep, so D goes.
    assert_eq!(t.fill(A, 1, Part::Lower), Some((D, 1)));
    // Hand wraps to 0: E (filled, bit set) is spared, B (bit cleared earlier) goes.
    assert_eq!(t.fill(C, 1, Part::Lower), Some((B, 1)));
    assert_eq!(pages(&t), [E, C, F, A]);
}

#[test]
fn plru_example() {
    let mut t = fa(4, Policy::Plru);
    run(&mut t, &[A, B, C, D, A]);
    // Bits: root -> right (away from A), node(2,3) -> 2 (away from D): C goes.
    assert_eq!(t.fill(E, 1, Part::Lower), Some((C, 1)));
    // Filling way 2 points the root left, node(0,1) points at 1 (away from A): B goes.
    assert_eq!(t.fill(F, 1, Part::Lower), Some((B, 1)));
}

#[test]
fn plru_three_ways_uses_the_documented_rule() {
    let mut t = fa(3, Policy::Plru);
    run(&mut t, &[A, B, C, A, B]);
    // Root points right (away from B, in the left half); the right half's node points at the
    // missing leaf 3 (away from C), so the walk takes way 2.
    assert_eq!(t.fill(D, 1, Part::Lower), Some((C, 1)));
    // Now the root points left, node(0,1) at way 0 (away from B).
    assert_eq!(t.fill(E, 1, Part::Lower), Some((A, 1)));
}

#[test]
fn random_victims_follow_the_seeded_stream() {
    let p = TlbParams {
        seed: 42,
        ..TlbParams::new(8, 8, Policy::Random)
    };
    let mut t = Tlb::new(&p).unwrap();
    let mut rng = SplitMix64::new(42);
    for v in 0..8 {
        assert_eq!(t.fill(v, 1, Part::Lower), None); // invalid ways: no draw
    }
    for v in 8..100 {
        let way = rng.below(8);
        let old = t.get(0, way).unwrap();
        assert_eq!(t.fill(v, 1, Part::Lower), Some(old));
        assert_eq!(t.get(0, way), Some((v, 1)));
        assert!(t.lookup(v, 1, NO_CTX));
    }
}

#[test]
fn invalid_ways_are_filled_first_lowest_first() {
    for &pol in Policy::ALL {
        let mut t = fa(4, pol);
        run(&mut t, &[A, B, C, D]);
        assert!(t.invalidate(C, 1, NO_CTX));
        assert!(t.invalidate(A, 1, NO_CTX));
        assert!(!t.invalidate(A, 1, NO_CTX));
        assert_eq!(t.valid_entries(), 2);
        assert_eq!(t.fill(E, 1, Part::Lower), None);
        assert_eq!(t.fill(F, 1, Part::Lower), None);
        assert_eq!(pages(&t), [E, B, F, D], "{pol}");
    }
}

#[test]
fn lru_forgets_invalidated_ways() {
    let mut t = fa(4, Policy::Lru);
    run(&mut t, &[A, B, C, D]);
    t.invalidate(A, 1, NO_CTX);
    run(&mut t, &[E]); // refills way 0, now MRU
                       // LRU order: B C D E.
    assert_eq!(t.fill(F, 1, Part::Lower), Some((B, 1)));
}

#[test]
fn set_index_is_vpn_mod_sets() {
    // 48 entries, 16-way: 3 sets (not a power of two).
    let mut t = Tlb::new(&TlbParams::new(48, 16, Policy::Lru)).unwrap();
    assert_eq!((t.sets(), t.ways()), (3, 16));
    for v in [0u64, 1, 2, 3, 100, u64::MAX] {
        t.fill(v, 1, Part::Lower);
        assert_eq!(t.probe(v, 1, NO_CTX).unwrap().0, (v % 3) as usize);
    }
    let t = Tlb::new(&TlbParams::new(1536, 12, Policy::Lru)).unwrap();
    assert_eq!((t.sets(), t.set_of(1000)), (128, 1000 % 128));
    let t = Tlb::new(&TlbParams::new(1, 1, Policy::Lru)).unwrap();
    assert_eq!((t.sets(), t.ways(), t.set_of(u64::MAX)), (1, 1, 0));
}

#[test]
fn direct_mapped_conflicts() {
    let mut t = Tlb::new(&TlbParams::new(4, 1, Policy::Lru)).unwrap();
    assert!(!t.access(1, 1, NO_CTX, Part::Lower));
    assert!(!t.access(5, 1, NO_CTX, Part::Lower));
    assert!(!t.access(1, 1, NO_CTX, Part::Lower));
    assert!(!t.access(2, 1, NO_CTX, Part::Lower));
    assert!(t.access(1, 1, NO_CTX, Part::Lower));
    assert_eq!(t.fill(9, 1, Part::Upper), Some((1, 1)));
}

// ----- contexts, globals, the MRU fast path --------------------------------------------------

#[test]
fn contexts_and_global_matches() {
    let mut t = fa(8, Policy::Lru);
    t.fill(A, 1, Part::Lower);
    t.fill(B, G, Part::Lower);
    assert!(t.lookup(A, 1, NO_CTX));
    assert!(!t.lookup(A, 2, NO_CTX));
    assert!(!t.lookup(A, 2, G));
    assert!(t.lookup(B, 2, G));
    assert!(t.lookup(B, 3, G));
    assert!(!t.lookup(B, 3, NO_CTX));
    assert!(t.lookup(B, NO_CTX, G)); // ctx NO_CTX: only globals
    assert!(!t.lookup(A, NO_CTX, NO_CTX));
    // A fill of a present key refreshes it: no duplicate.
    assert_eq!(t.fill(A, 1, Part::Lower), None);
    assert_eq!(t.valid_entries(), 2);
    // The exact context wins over a global match, for lookups and invalidations.
    t.fill(B, 2, Part::Lower);
    assert_eq!(t.probe(B, 2, G), Some((0, 2)));
    assert!(t.invalidate(B, 2, G));
    assert_eq!(t.probe(B, 2, G), Some((0, 1)));
    assert!(t.invalidate(B, 2, G));
    assert!(!t.lookup(B, 2, G));
    // flush_if: everything not global.
    t.fill(C, G, Part::Lower);
    t.fill(D, 3, Part::Lower);
    assert_eq!(t.flush_if(|_, c| c != G), 2);
    assert_eq!(pages(&t), [C]);
    t.flush_all();
    assert_eq!(t.valid_entries(), 0);
    assert!(!t.lookup(C, 1, G));
}

#[test]
fn mru_fast_path_respects_exact_over_global() {
    for lookup in [Lookup::Scan, Lookup::Index] {
        let mut t = Tlb::with_lookup(&TlbParams::new(4, 4, Policy::Lru), lookup).unwrap();
        t.fill(A, G, Part::Lower); // way 0
        assert!(t.lookup(A, 1, G)); // hit through the global context
        t.fill(A, 1, Part::Lower); // way 1: an exact entry for ctx 1 now exists
        assert!(t.lookup(A, 2, G)); // global hit, MRU = (A, G) for ctx 2
        assert_eq!(t.probe(A, 1, G), Some((0, 1)));
        // Must not be served by the MRU entry (A, G): (A, 1) is the hit, and it becomes MRU.
        assert!(t.lookup(A, 1, G));
        t.fill(B, 1, Part::Lower);
        t.fill(C, 1, Part::Lower);
        // LRU order now: (A,G) (A,1) B C -> (A,G) is the victim, proving (A,1) was touched last.
        assert_eq!(t.fill(D, 1, Part::Lower), Some((A, G)));
    }
}

#[test]
fn a_fill_retires_hints_it_shadows() {
    for lookup in [Lookup::Scan, Lookup::Index] {
        let mut t = Tlb::with_lookup(&TlbParams::new(4, 4, Policy::Lru), lookup).unwrap();
        t.fill(A, G, Part::Lower); // way 0
        assert!(t.lookup(A, 1, G)); // through the global context: no (A, 1) yet
        t.fill(A, 1, Part::Lower); // way 1 now shadows (A, G) for ctx 1
        t.fill(B, 1, Part::Lower);
        t.fill(C, 1, Part::Lower);
        // This must touch (A, 1), not (A, G): LRU order becomes (A,G) B C (A,1).
        assert!(t.lookup(A, 1, G));
        assert_eq!(t.fill(D, 1, Part::Lower), Some((A, G)));
        assert_eq!(t.fill(E, 1, Part::Lower), Some((B, 1)));
    }
}

#[test]
#[should_panic(expected = "NO_CTX")]
fn filling_no_ctx_panics() {
    fa(4, Policy::Lru).fill(A, NO_CTX, Part::Lower);
}

#[test]
fn accessors_and_lookup_structure() {
    let t = Tlb::new(&TlbParams::new(1536, 12, Policy::Lru)).unwrap();
    assert_eq!(
        (t.entries(), t.sets(), t.ways(), t.is_indexed()),
        (1536, 128, 12, false)
    );
    let t = Tlb::new(&TlbParams::new(64, INDEX_MIN_WAYS, Policy::Lru)).unwrap();
    assert!(t.is_indexed());
    assert_eq!(t.params(), &TlbParams::new(64, INDEX_MIN_WAYS, Policy::Lru));
    let t = Tlb::with_lookup(&TlbParams::new(8, 8, Policy::Lru), Lookup::Index).unwrap();
    assert!(t.is_indexed());
    assert!(format!("{t:?}").contains("indexed: true"));
}

#[test]
fn clones_evolve_identically() {
    let p = TlbParams {
        seed: 3,
        ..TlbParams::new(64, 64, Policy::Random)
    };
    let mut a = Tlb::new(&p).unwrap();
    let mut rng = SplitMix64::new(9);
    let step = |t: &mut Tlb, r: u64| t.access(r % 200, r % 2, NO_CTX, Part::Lower);
    for _ in 0..1000 {
        step(&mut a, rng.next_u64());
    }
    let mut b = a.clone();
    for _ in 0..5000 {
        let r = rng.next_u64();
        assert_eq!(step(&mut a, r), step(&mut b, r));
    }
    assert!(a.entries_iter().eq(b.entries_iter()));
}

// ----- partitions ------------------------------------------------------------------------------

#[test]
fn partitions_fill_and_replace_separately() {
    // MIPS R2000 style: 64 entries fully associative, 8 wired lower ways, random upper.
    let part = Partition {
        lower_ways: 8,
        lower_policy: Policy::Fifo,
        upper_policy: Policy::Random,
    };
    let p = TlbParams {
        partition: Some(part),
        seed: 7,
        ..TlbParams::new(64, 64, Policy::Lru)
    };
    let mut t = Tlb::new(&p).unwrap();
    for v in 0..8 {
        assert_eq!(t.fill(v, 1, Part::Lower), None);
    }
    for v in 100..200 {
        let ev = t.fill(v, 1, Part::Upper);
        assert!(
            ev.is_none_or(|(e, _)| e >= 100),
            "upper fill evicted a wired entry"
        );
    }
    for v in 0..8 {
        assert!(t.lookup(v, 1, NO_CTX));
    }
    assert!(t.entries_iter().all(|(_, w, v, _)| (w < 8) == (v < 8)));
    // Lower is FIFO: the next lower fill evicts page 0 (way 0).
    assert_eq!(t.fill(8, 1, Part::Lower), Some((0, 1)));
    assert_eq!(t.get(0, 0), Some((8, 1)));
    // Without a partition, `part` is ignored.
    let mut u = fa(2, Policy::Lru);
    assert_eq!(u.fill(1, 1, Part::Upper), None);
    assert_eq!(u.fill(2, 1, Part::Lower), None);
    assert_eq!(u.fill(3, 1, Part::Upper), Some((1, 1)));
}

// ----- validation ------------------------------------------------------------------------------

#[test]
fn validation_errors_name_the_field() {
    let bad = |p: TlbParams| Tlb::new(&p).unwrap_err();
    assert_eq!(
        bad(TlbParams::new(0, 1, Policy::Lru)),
        "entries: must be at least 1"
    );
    assert_eq!(
        bad(TlbParams::new(8, 0, Policy::Lru)),
        "ways: must be at least 1"
    );
    assert_eq!(
        bad(TlbParams::new(64, 3, Policy::Lru)),
        "ways: 3 does not divide 64 entries"
    );
    assert_eq!(
        bad(TlbParams::new(4, 8, Policy::Lru)),
        "ways: 8 does not divide 4 entries"
    );
    assert!(bad(TlbParams::new(MAX_ENTRIES + 1, 1, Policy::Lru)).starts_with("entries: "));
    let part = |lower_ways| TlbParams {
        partition: Some(Partition {
            lower_ways,
            lower_policy: Policy::Lru,
            upper_policy: Policy::Random,
        }),
        ..TlbParams::new(64, 64, Policy::Lru)
    };
    for l in [0, 64, 65] {
        let e = bad(part(l));
        assert!(e.starts_with("partition.lower_ways: "), "{e}");
    }
    assert!(Tlb::new(&part(63)).is_ok() && Tlb::new(&part(1)).is_ok());
    let e = part(0).check().unwrap_err();
    assert_eq!(e.field, "partition.lower_ways");
}

#[test]
fn policy_names_round_trip() {
    for &p in Policy::ALL {
        assert_eq!(p.name().parse::<Policy>(), Ok(p));
        assert_eq!(p.to_string(), p.name());
    }
    assert_eq!("clock".parse::<Policy>(), Ok(Policy::Nru));
    assert_eq!(" PLRU ".parse::<Policy>(), Ok(Policy::Plru));
    let e = "mru".parse::<Policy>().unwrap_err();
    assert!(
        e.contains("\"mru\"") && e.contains("lru, fifo, random, plru, nru, clock"),
        "{e}"
    );
}

// ----- differential property tests against the reference model ----------------------------

/// (entries, ways) geometries: 1 entry, direct-mapped, 2/3/4/6/8/12/16-way, fully associative
/// up to 1024 with non-powers of two, power-of-two and other set counts.
const GEOMETRIES: &[(usize, usize)] = &[
    (1, 1),
    (4, 1),
    (12, 1),
    (2, 2),
    (8, 2),
    (6, 3),
    (48, 3),
    (16, 4),
    (20, 4),
    (6, 6),
    (24, 6),
    (48, 6),
    (64, 8),
    (36, 12),
    (1536, 12),
    (48, 16),
    (256, 16),
    (3, 3),
    (5, 5),
    (7, 7),
    (17, 17),
    (33, 33),
    (48, 48),
    (64, 64),
    (100, 100),
    (128, 128),
    (1024, 1024),
];

const CTXS: [u64; 4] = [0, 1, 0xFFFF_FFFF_FFFF_FFFE, G];
const GCTXS: [u64; 4] = [NO_CTX, G, G, 0];

#[derive(Clone, Debug)]
enum Op {
    Lookup(u64, u64, u64),
    Fill(u64, u64, Part),
    Access(u64, u64, u64, Part),
    Invalidate(u64, u64, u64),
    Retag(u64, u64, u64),
    Repartition(usize),
    FlushCtx(u64),
    FlushNonGlobal,
    FlushVpnMod3(u64),
    FlushAll,
    /// The accesses that follow serve references of this mode ([`Tlb::set_reference`]).
    Mode(Mode),
}

/// A raw operation, interpreted against the geometry by [`expand`] (so that proptest can
/// generate and shrink it independently of the geometry).
type Raw = (u8, u32, u32, u8);

fn params() -> impl Strategy<Value = (TlbParams, Lookup)> {
    (
        select(GEOMETRIES),
        select(Policy::ALL),
        any::<u64>(),
        prop::option::weighted(
            0.3,
            (any::<u16>(), select(Policy::ALL), select(Policy::ALL)),
        ),
        select(&[Lookup::Auto, Lookup::Scan, Lookup::Index][..]),
    )
        .prop_map(|((entries, ways), policy, seed, part, lookup)| {
            let partition = match part {
                Some((l, lower_policy, upper_policy)) if ways >= 2 => Some(Partition {
                    lower_ways: 1 + l as usize % (ways - 1),
                    lower_policy,
                    upper_policy,
                }),
                _ => None,
            };
            (
                TlbParams {
                    entries,
                    ways,
                    policy,
                    partition,
                    seed,
                },
                lookup,
            )
        })
}

fn expand(raw: &[Raw], p: &TlbParams) -> Vec<Op> {
    let sets = (p.entries / p.ways) as u64;
    let ways = p.ways as u64;
    let entries = p.entries as u64;
    let mut ops: Vec<Op> = Vec::new();
    for &(kind, x, y, z) in raw {
        let (x, y) = (x as u64, y as u64);
        let vpn = match y % 4 {
            // Conflicts: many pages of set 0 or 1.
            0 => (x % (ways + 2)) * sets + (y / 4) % sets.min(2),
            1 => x % (2 * entries + 3),
            2 => x % (ways + 1),
            _ => u64::MAX - x % (2 * ways + 2),
        };
        let ctx = CTXS[z as usize % 4];
        let gctx = GCTXS[(z as usize >> 2) % 4];
        let part = if z & 0x10 != 0 {
            Part::Upper
        } else {
            Part::Lower
        };
        match kind {
            0..=5 => ops.push(Op::Access(vpn, ctx, gctx, part)),
            6 => ops.push(Op::Lookup(vpn, ctx, gctx)),
            7 => ops.push(Op::Fill(vpn, ctx, part)),
            8 => ops.push(Op::Invalidate(vpn, ctx, gctx)),
            9 => ops.push(Op::Lookup(vpn, NO_CTX, gctx)),
            10 => ops.push(Op::FlushCtx(ctx)),
            11 => ops.push(Op::FlushVpnMod3(y % 3)),
            12 if x % 4 == 0 => ops.push(Op::FlushAll),
            12 => ops.push(Op::FlushNonGlobal),
            16 => ops.push(Op::Retag(vpn, ctx, CTXS[(z as usize >> 4) % 4])),
            17 => ops.push(Op::Repartition(x as usize % (p.ways + 1))),
            14 => ops.push(Op::Mode(if z & 1 == 1 { Mode::Kernel } else { Mode::User })),
            13 => {
                // Cyclic sweep of ways+1 (or +2) pages of one set, 1-3 rounds.
                let set = x % sets;
                let n = ways + 1 + y % 2;
                let rounds = if ways > 64 { 1 } else { 1 + z as u64 % 3 };
                for _ in 0..rounds {
                    for i in 0..n {
                        ops.push(Op::Access(set + i * sets, ctx, gctx, part));
                    }
                }
            }
            _ => {
                // Repeat the last operation (exercises the MRU fast path).
                if let Some(last) = ops.last().cloned() {
                    for _ in 0..1 + x % 4 {
                        ops.push(last.clone());
                    }
                }
            }
        }
    }
    ops
}

fn differential(p: &TlbParams, lookup: Lookup, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut t = Tlb::with_lookup(p, lookup).unwrap();
    let mut r = RefTlb::new(p);
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Lookup(v, c, g) => {
                prop_assert_eq!(t.lookup(v, c, g), r.lookup(v, c, g), "#{} {:?}", i, op)
            }
            Op::Fill(v, c, part) => {
                prop_assert_eq!(t.fill(v, c, part), r.fill(v, c, part), "#{} {:?}", i, op)
            }
            Op::Access(v, c, g, part) => {
                prop_assert_eq!(
                    t.access(v, c, g, part),
                    r.access(v, c, g, part),
                    "#{} {:?}",
                    i,
                    op
                )
            }
            Op::Invalidate(v, c, g) => {
                prop_assert_eq!(
                    t.invalidate(v, c, g),
                    r.invalidate(v, c, g),
                    "#{} {:?}",
                    i,
                    op
                )
            }
            Op::Repartition(l) => {
                prop_assert_eq!(
                    t.repartition(l).is_ok(),
                    r.repartition(l),
                    "#{} {:?}",
                    i,
                    op
                )
            }
            Op::Retag(v, c, n) => {
                prop_assert_eq!(t.retag(v, c, n), r.retag(v, c, n), "#{} {:?}", i, op)
            }
            Op::FlushCtx(k) => {
                prop_assert_eq!(t.flush_if(|_, c| c == k), r.flush_if(|_, c| c == k))
            }
            Op::FlushNonGlobal => {
                prop_assert_eq!(t.flush_if(|_, c| c != G), r.flush_if(|_, c| c != G))
            }
            Op::FlushVpnMod3(m) => {
                prop_assert_eq!(t.flush_if(|v, _| v % 3 == m), r.flush_if(|v, _| v % 3 == m))
            }
            Op::FlushAll => {
                t.flush_all();
                r.flush_all();
            }
            Op::Mode(m) => {
                t.set_reference(Kind::Load, m);
                r.set_mode(m);
            }
        }
        prop_assert_eq!(t.valid_entries(), r.valid_entries(), "#{} {:?}", i, op);
    }
    prop_assert_eq!(t.entries_iter().collect::<Vec<_>>(), r.contents());
    Ok(())
}

fn raw_ops(max: usize) -> impl Strategy<Value = Vec<Raw>> {
    prop::collection::vec((0u8..18, any::<u32>(), any::<u32>(), any::<u8>()), 1..max)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every geometry, policy, partition and lookup structure on mixed random and adversarial
    /// streams with invalidations, flushes and global contexts.
    #[test]
    fn matches_reference((p, lookup) in params(), raw in raw_ops(300)) {
        differential(&p, lookup, &expand(&raw, &p))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Long streams on the large fully associative and 12-way geometries, where the hash index
    /// and the amortised victim choices get exercised hardest.
    #[test]
    fn matches_reference_large(
        geom in select(&[(1024usize, 1024usize), (1536, 12), (100, 100), (64, 64)][..]),
        policy in select(Policy::ALL),
        seed in any::<u64>(),
        lookup in select(&[Lookup::Scan, Lookup::Index][..]),
        raw in raw_ops(3000),
    ) {
        let p = TlbParams { seed, ..TlbParams::new(geom.0, geom.1, policy) };
        differential(&p, lookup, &expand(&raw, &p))?;
    }
}

#[test]
fn deterministic_and_independent_of_lookup_structure() {
    let mut rng = SplitMix64::new(1);
    let stream: Vec<(u64, u64, u64)> = (0..200_000)
        .map(|_| {
            let r = rng.next_u64();
            let vpn = if r.is_multiple_of(8) {
                r >> 40
            } else {
                (r >> 20) % 1500
            };
            let gctx = if r.is_multiple_of(5) { G } else { NO_CTX };
            (vpn, (r >> 8) % 3, gctx)
        })
        .collect();
    for &policy in Policy::ALL {
        let p = TlbParams {
            seed: 99,
            ..TlbParams::new(1024, 1024, policy)
        };
        let mut outcomes = Vec::new();
        for lookup in [Lookup::Scan, Lookup::Index, Lookup::Index] {
            let mut t = Tlb::with_lookup(&p, lookup).unwrap();
            let hits: Vec<bool> = stream
                .iter()
                .enumerate()
                .map(|(i, &(v, c, g))| {
                    if i % 5000 == 4999 {
                        t.flush_if(|_, c| c == 1);
                    }
                    t.access(v, c, g, Part::Lower)
                })
                .collect();
            outcomes.push((hits, t.entries_iter().collect::<Vec<_>>()));
        }
        assert!(outcomes.windows(2).all(|w| w[0] == w[1]), "{policy}");
    }
}

/// Apply `op`, returning what it answered (for comparing two TLBs).
fn apply(t: &mut Tlb, op: &Op) -> String {
    match *op {
        Op::Lookup(v, c, g) => format!("{:?}", t.lookup(v, c, g)),
        Op::Fill(v, c, part) => format!("{:?}", t.fill(v, c, part)),
        Op::Access(v, c, g, part) => format!("{:?}", t.access(v, c, g, part)),
        Op::Invalidate(v, c, g) => format!("{:?}", t.invalidate(v, c, g)),
        Op::Repartition(l) => format!("{:?}", t.repartition(l).is_ok()),
        Op::Retag(v, c, n) => format!("{:?}", t.retag(v, c, n)),
        Op::FlushCtx(k) => format!("{:?}", t.flush_if(|_, c| c == k)),
        Op::FlushNonGlobal => format!("{:?}", t.flush_if(|_, c| c != G)),
        Op::FlushVpnMod3(m) => format!("{:?}", t.flush_if(|v, _| v % 3 == m)),
        Op::FlushAll => {
            t.flush_all();
            String::new()
        }
        Op::Mode(m) => {
            t.set_reference(Kind::Load, m);
            String::new()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// What the machine's per-kind fast path relies on: when
    /// [`TlbParams::hits_change_nothing`], extra lookups of earlier keys (hits or misses)
    /// anywhere in a stream change no answer and no final content.
    #[test]
    fn free_hits_change_nothing((p, lookup) in params(), raw in raw_ops(300), every in 1usize..4) {
        prop_assume!(p.hits_change_nothing());
        let ops = expand(&raw, &p);
        let mut plain = Tlb::with_lookup(&p, lookup).unwrap();
        let mut probed = Tlb::with_lookup(&p, lookup).unwrap();
        let mut keys = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            if i % every == 0 && !keys.is_empty() {
                let (v, c, g) = keys[(i * 7) % keys.len()];
                probed.lookup(v, c, g);
            }
            if let Op::Lookup(v, c, g) | Op::Access(v, c, g, _) = *op {
                keys.push((v, c, g));
            }
            prop_assert_eq!(apply(&mut plain, op), apply(&mut probed, op), "#{} {:?}", i, op);
        }
        prop_assert_eq!(
            plain.entries_iter().collect::<Vec<_>>(),
            probed.entries_iter().collect::<Vec<_>>()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A cache's per-reference path, [`Tlb::access_slot`], is [`Tlb::fill_slot`] into the
    /// upper (or only) partition, with its hit said: the same slots, victims and answers to
    /// every later operation, for every geometry, policy, partition and lookup structure,
    /// with lookups, fills, invalidations and flushes in between.
    #[test]
    fn access_slot_is_fill_slot((p, lookup) in params(), raw in raw_ops(300)) {
        let ops = expand(&raw, &p);
        let mut fast = Tlb::with_lookup(&p, lookup).unwrap();
        let mut slow = Tlb::with_lookup(&p, lookup).unwrap();
        for (i, op) in ops.iter().enumerate() {
            if let Op::Access(v, c, _, _) | Op::Fill(v, c, _) = *op {
                if c != NO_CTX {
                    let before = slow.valid_entries();
                    let (slot, evicted) = slow.fill_slot(v, c, Part::Upper);
                    let hit = evicted.is_none() && slow.valid_entries() == before;
                    let t = fast.access_slot(v, c);
                    prop_assert_eq!((t.slot, t.evicted, t.hit), (slot, evicted, hit), "#{} {:?}", i, op);
                    continue;
                }
            }
            prop_assert_eq!(apply(&mut fast, op), apply(&mut slow, op), "#{} {:?}", i, op);
        }
        prop_assert_eq!(
            fast.entries_iter().collect::<Vec<_>>(),
            slow.entries_iter().collect::<Vec<_>>()
        );
    }
}

// ----- the exact-context engine of the machine --------------------------------------------

/// [`Engine`] on the operations a machine makes (accesses with one exact context,
/// invalidations, flushes by predicate and of everything) against the reference model driven
/// with `gctx = NO_CTX`: the same hits, the same count of valid entries after every
/// operation, the same contents in the same ways at the end. Lookups, retags and
/// repartitions, which the machine never makes, are left out of the stream.
fn engine_differential(p: &TlbParams, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut e = Engine::new(p).unwrap();
    let exact = p.partition.is_none() && matches!(p.policy, Policy::Lru | Policy::Fifo);
    prop_assert_eq!(!matches!(e, Engine::General(_)), exact);
    let mut r = RefTlb::new(p);
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Access(v, c, _, part) | Op::Fill(v, c, part) => {
                prop_assert_eq!(
                    e.access(v, c, part),
                    r.access(v, c, NO_CTX, part),
                    "#{} {:?}",
                    i,
                    op
                )
            }
            Op::Invalidate(v, c, _) => {
                prop_assert_eq!(
                    e.invalidate(v, c),
                    r.invalidate(v, c, NO_CTX),
                    "#{} {:?}",
                    i,
                    op
                )
            }
            Op::FlushCtx(k) => {
                prop_assert_eq!(e.flush_if(|_, c| c == k), r.flush_if(|_, c| c == k))
            }
            Op::FlushNonGlobal => {
                prop_assert_eq!(e.flush_if(|_, c| c != G), r.flush_if(|_, c| c != G))
            }
            Op::FlushVpnMod3(m) => {
                prop_assert_eq!(e.flush_if(|v, _| v % 3 == m), r.flush_if(|v, _| v % 3 == m))
            }
            Op::FlushAll => {
                e.flush_all();
                r.flush_all();
            }
            Op::Mode(m) => {
                e.set_reference(Kind::Load, m);
                r.set_mode(m);
            }
            Op::Lookup(..) | Op::Retag(..) | Op::Repartition(_) => continue,
        }
        prop_assert_eq!(e.valid_entries(), r.valid_entries(), "#{} {:?}", i, op);
    }
    prop_assert_eq!(e.entries(), r.contents());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every geometry, LRU and FIFO (the exact engine) and the other policies (the general
    /// one), on random and adversarial streams: one set thrashed by a cyclic sweep one or two
    /// pages longer than its ways, repeats, invalidations, flushes of one context, of all but
    /// the global tag, by page and of everything.
    #[test]
    fn engine_matches_reference((p, _) in params(), raw in raw_ops(300)) {
        engine_differential(&p, &expand(&raw, &p))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Long streams on the large geometries, where the exact engine's hash chains and
    /// lists get exercised hardest.
    #[test]
    fn engine_matches_reference_large(
        geom in select(&[(1024usize, 1024usize), (1536, 12), (100, 100), (64, 64), (2048, 8)][..]),
        policy in select(&[Policy::Lru, Policy::Fifo][..]),
        raw in raw_ops(3000),
    ) {
        let p = TlbParams::new(geom.0, geom.1, policy);
        engine_differential(&p, &expand(&raw, &p))?;
    }
}

/// A move of the partition point keeps the mode that filled each entry: user-first still
/// replaces a user entry before the kernel's after the move.
#[test]
fn repartition_keeps_the_filling_mode() {
    let mut t = Tlb::new(&TlbParams {
        partition: Some(Partition {
            lower_ways: 1,
            lower_policy: Policy::UserFirst,
            upper_policy: Policy::UserFirst,
        }),
        ..TlbParams::new(4, 4, Policy::UserFirst)
    })
    .unwrap();
    // Kernel pages 1 and 2, then user page 3, all in the upper partition (3 ways).
    t.set_reference(Kind::Load, Mode::Kernel);
    t.fill(1, 0, Part::Upper);
    t.fill(2, 0, Part::Upper);
    t.set_reference(Kind::Load, Mode::User);
    t.fill(3, 0, Part::Upper);
    t.repartition(2).unwrap();
    // Now the upper partition is 2 ways, holding two of the three pages (the lowest way
    // went to the lower partition); a user fill replaces the user page, not a kernel one.
    let held = |t: &Tlb| {
        (1..=4)
            .filter(|&v| t.probe(v, 0, NO_CTX).is_some())
            .collect::<Vec<u64>>()
    };
    let before = held(&t);
    assert!(before.contains(&3), "{before:?}");
    t.fill(4, 0, Part::Upper);
    let after = held(&t);
    assert!(
        !after.contains(&3) && after.contains(&4),
        "{before:?} -> {after:?}"
    );
    assert_eq!(after.len(), before.len());
}
