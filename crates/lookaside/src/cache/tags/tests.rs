//! The cache tag store against two models, step by step: the brute-force reference TLB
//! (`tlb::reference`, obviously right: sets as vectors, LRU and FIFO as explicit lists, the
//! PRNG written out again) and the TLB engine itself, the store caches used before, with one
//! context — every slot, hit and victim must be the same.

use super::*;
use crate::tlb::reference::RefTlb;
use crate::tlb::{Part, Tlb, TlbParams, NO_CTX};
use proptest::prelude::*;
use proptest::sample::select;

#[derive(Clone, Copy, Debug)]
enum Op {
    Access(u64),
    Lookup(u64),
    Probe(u64),
    /// A fill, made only when the block is absent.
    Fill(u64),
    Invalidate(u64),
    Flush,
}

/// The slot of `block` in the reference model.
fn slot_of(r: &RefTlb, ways: usize, block: u64) -> Option<usize> {
    r.contents()
        .iter()
        .find(|e| e.2 == block)
        .map(|e| e.0 * ways + e.1)
}

/// The eviction order as the caches read it from the TLB engine before: each set's valid
/// blocks by way, replaced for LRU and FIFO by the victims of filling a copy with `ways`
/// entries of other contexts.
fn ref_order(r: &RefTlb, sets: usize, ways: usize, policy: Policy) -> Vec<Vec<(usize, u64)>> {
    let mut out: Vec<Vec<(usize, u64)>> = vec![Vec::new(); sets];
    for (set, way, block, _) in r.contents() {
        out[set].push((way, block));
    }
    if !matches!(policy, Policy::Lru | Policy::Fifo) {
        return out;
    }
    let mut copy = r.clone();
    for (set, blocks) in out.iter_mut().enumerate() {
        if blocks.is_empty() {
            continue;
        }
        let mut order = Vec::new();
        for k in 0..ways as u64 {
            if let Some((block, 0)) = copy.fill(set as u64, 1 + k, Part::Upper) {
                let way = blocks.iter().find(|e| e.1 == block).unwrap().0;
                order.push((way, block));
            }
        }
        if order.len() == blocks.len() {
            *blocks = order;
        }
    }
    out
}

/// Run `ops` on the store, the reference model and the TLB engine; every answer must agree.
fn run(
    blocks: usize,
    ways: usize,
    policy: Policy,
    seed: u64,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut t = CacheTags::new(blocks, ways, policy, seed).unwrap();
    let mut p = TlbParams::new(blocks, ways, policy);
    p.seed = seed;
    let mut r = RefTlb::new(&p);
    let mut e = Tlb::new(&p).unwrap();
    let sets = blocks / ways;
    for (i, &op) in ops.iter().enumerate() {
        match op {
            Op::Access(b) => {
                // Every other access of a store of order words takes its own path.
                let got = match t.ordered() {
                    Some(true) if i % 2 == 1 => t.access_ordered::<true>(b),
                    Some(false) if i % 2 == 1 => t.access_ordered::<false>(b),
                    _ => t.access(b),
                };
                let hit = r.lookup(b, 0, NO_CTX);
                let evicted = if hit {
                    None
                } else {
                    r.fill(b, 0, Part::Upper).map(|(v, _)| v)
                };
                let want = Touch {
                    slot: slot_of(&r, ways, b).unwrap(),
                    hit,
                    evicted,
                };
                prop_assert_eq!(got, want, "op {} {:?}", i, op);
                let old = e.access_slot(b, 0);
                prop_assert_eq!(
                    (old.slot, old.hit, old.evicted.map(|(v, _)| v)),
                    (got.slot, got.hit, got.evicted),
                    "engine, op {} {:?}",
                    i,
                    op
                );
            }
            Op::Lookup(b) => {
                let got = t.lookup(b);
                let hit = r.lookup(b, 0, NO_CTX);
                prop_assert_eq!(got, hit.then(|| slot_of(&r, ways, b).unwrap()));
                prop_assert_eq!(e.lookup(b, 0, NO_CTX), hit);
            }
            Op::Probe(b) => {
                prop_assert_eq!(t.probe(b), slot_of(&r, ways, b), "op {} {:?}", i, op);
            }
            Op::Fill(b) => {
                if slot_of(&r, ways, b).is_none() {
                    let (slot, evicted) = t.fill(b);
                    let want = r.fill(b, 0, Part::Upper).map(|(v, _)| v);
                    prop_assert_eq!(
                        (slot, evicted),
                        (slot_of(&r, ways, b).unwrap(), want),
                        "op {} {:?}",
                        i,
                        op
                    );
                    let (old_slot, old) = e.fill_slot(b, 0, Part::Upper);
                    prop_assert_eq!((old_slot, old.map(|(v, _)| v)), (slot, evicted));
                }
            }
            Op::Invalidate(b) => {
                let at = slot_of(&r, ways, b);
                prop_assert_eq!(t.invalidate(b), at, "op {} {:?}", i, op);
                prop_assert_eq!(r.invalidate(b, 0, NO_CTX), at.is_some());
                prop_assert_eq!(e.invalidate(b, 0, NO_CTX), at.is_some());
            }
            Op::Flush => {
                t.flush_all();
                r.flush_all();
                e.flush_all();
            }
        }
        prop_assert_eq!(t.held(), r.valid_entries(), "op {} {:?}", i, op);
    }
    let held: Vec<(usize, u64)> = t.blocks().collect();
    let want: Vec<(usize, u64)> = r
        .contents()
        .iter()
        .map(|&(s, w, b, _)| (s * ways + w, b))
        .collect();
    prop_assert_eq!(held, want);
    prop_assert_eq!(t.eviction_order(), ref_order(&r, sets, ways, policy));
    Ok(())
}

/// A geometry: ways (order words up to 16, masks below 32, the hash index from 32, several
/// valid words above 64) and sets (powers of two or not).
fn geometry() -> impl Strategy<Value = (usize, usize)> {
    (
        select(vec![
            1usize, 2, 3, 4, 5, 7, 8, 12, 16, 17, 24, 32, 40, 64, 65, 130,
        ]),
        select(vec![1usize, 2, 3, 4, 8]),
    )
        .prop_map(|(ways, sets)| (ways * sets, ways))
}

/// Block streams of several shapes over a store of `blocks` blocks in `sets` sets.
fn blocks_of(shape: u8, seeds: &[u64], blocks: usize, sets: usize, ways: usize) -> Vec<u64> {
    let (b, s, w) = (blocks as u64, sets as u64, ways as u64);
    seeds
        .iter()
        .enumerate()
        .map(|(i, &x)| match shape {
            // Random over three times the store.
            0 => x % (3 * b + 1),
            // One set thrashed by one more block than it has ways (LRU's adversary).
            1 => (i as u64 % (w + 1)) * s + x % 2,
            // Every way of every set full, then touched again in random order.
            2 => x % b,
            // Power-of-two strides.
            3 => (x % 64) << (x >> 60),
            // Blocks at the top of the number space (a cache of 1-byte lines).
            _ => u64::MAX - x % (2 * b + 1),
        })
        .collect()
}

fn ops_of(kinds: &[u8], stream: &[u64]) -> Vec<Op> {
    stream
        .iter()
        .zip(kinds)
        .map(|(&b, &k)| match k {
            0..=69 => Op::Access(b),
            70..=79 => Op::Lookup(b),
            80..=87 => Op::Probe(b),
            88..=93 => Op::Fill(b),
            94..=98 => Op::Invalidate(b),
            _ => Op::Flush,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    /// Every answer of the store — slot, hit, victim, held blocks and the eviction order —
    /// is the reference model's and the TLB engine's, for every policy and geometry, on
    /// random, same-set thrashing, all-ways-full, power-of-two-stride and top-of-range
    /// streams mixing accesses, look-ups, probes, fills, invalidations and flushes.
    #[test]
    fn the_store_is_the_reference_and_the_engine(
        (blocks, ways) in geometry(),
        // Every policy a cache takes (not one that reads the reference's mode).
        policy in select(Policy::ALL.iter().copied().filter(|p| !p.reads_reference()).collect::<Vec<_>>()),
        seed in any::<u64>(),
        shape in 0u8..5,
        seeds in prop::collection::vec(any::<u64>(), 1..600),
        kinds in prop::collection::vec(0u8..100, 600),
        accesses_only in any::<bool>(),
    ) {
        let stream = blocks_of(shape, &seeds, blocks, blocks / ways, ways);
        let ops = if accesses_only {
            stream.iter().map(|&b| Op::Access(b)).collect()
        } else {
            ops_of(&kinds, &stream)
        };
        run(blocks, ways, policy, seed, &ops)?;
    }
}

/// Moving any way of a full order word to the front keeps the others in order.
#[test]
fn to_front_moves_one_way() {
    for ways in [1usize, 2, 3, 8, 15, 16] {
        // Ways in position order 0..ways, reversed: way `ways - 1 - i` at position `i`.
        let o = (0..ways as u64).fold(0u64, |o, i| o | (ways as u64 - 1 - i) << (4 * i));
        for way in 0..ways {
            let moved = to_front(o, way);
            let got: Vec<u64> = (0..ways).map(|i| moved >> (4 * i) & 15).collect();
            let mut want: Vec<u64> = (0..ways as u64)
                .rev()
                .filter(|&w| w != way as u64)
                .collect();
            want.insert(0, way as u64);
            assert_eq!(got, want, "{ways} ways, way {way}");
            if ways < 16 {
                assert_eq!(moved >> (4 * ways), 0, "unused nibbles stay 0");
            }
        }
    }
}

/// A 16-way LRU set: the victim is the way touched longest ago, through every rotation.
#[test]
fn sixteen_ways_evict_in_recency_order() {
    let mut t = CacheTags::new(16, 16, Policy::Lru, 0).unwrap();
    for b in 0..16 {
        assert_eq!(t.access(b).slot, b as usize);
    }
    t.access(0);
    t.access(5);
    let mut victims = Vec::new();
    for b in 100..116 {
        victims.push(t.access(b).evicted.unwrap());
    }
    let mut want: Vec<u64> = (1..16).filter(|&b| b != 5).collect();
    want.extend([0, 5]);
    assert_eq!(victims, want);
}

/// Bad geometries are refused with a reason.
#[test]
fn bad_geometries_say_why() {
    assert!(CacheTags::new(0, 1, Policy::Lru, 0).is_err());
    assert!(CacheTags::new(12, 5, Policy::Lru, 0)
        .unwrap_err()
        .contains("do not divide"));
    assert!(CacheTags::new(MAX_ENTRIES + 1, 1, Policy::Lru, 0).is_err());
}
