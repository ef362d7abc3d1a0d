//! The cache against an obviously-right model: the reference TLB as tag store plus a map of
//! dirty lines, doing each step of the module documentation literally.

use super::*;
use crate::tlb::reference::RefTlb;
use crate::tlb::{Part, TlbParams, NO_CTX};
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::HashMap;

struct RefCache {
    p: CacheParams,
    tags: RefTlb,
    dirty: HashMap<u64, bool>,
    /// Addresses of the dirty lines the last access evicted.
    victims: Vec<u64>,
}

impl RefCache {
    fn new(p: &CacheParams) -> RefCache {
        RefCache {
            p: p.clone(),
            tags: RefTlb::new(&{
                let mut t = TlbParams::new(p.lines() as usize, p.set_ways(), p.policy);
                t.seed = p.seed;
                t
            }),
            dirty: HashMap::new(),
            victims: Vec::new(),
        }
    }

    fn present(&self, line: u64) -> bool {
        self.tags.contents().iter().any(|e| e.2 == line)
    }

    fn put(&mut self, line: u64, dirty: bool, o: &mut Outcome) {
        o.fills += 1;
        if let Some((old, _)) = self.tags.fill(line, 0, Part::Upper) {
            if self.dirty.remove(&old) == Some(true) {
                o.writebacks += 1;
                self.victims.push(old * self.p.line as u64);
            }
        }
        self.dirty.insert(line, dirty);
    }

    fn access(&mut self, paddr: u64, write: bool) -> Outcome {
        let line = paddr / self.p.line as u64;
        let wb = self.p.write == WritePolicy::Back;
        let mut o = Outcome::default();
        self.victims.clear();
        if self.present(line) {
            self.tags.lookup(line, 0, NO_CTX);
            o.hit = true;
            if write && wb {
                self.dirty.insert(line, true);
            }
            return o;
        }
        if write {
            if self.p.write_allocate {
                self.put(line, wb, &mut o);
            }
            return o;
        }
        let per = (self.p.fetch / self.p.line) as u64;
        let first = line / per * per;
        for other in first..first + per {
            if other != line && !self.present(other) {
                self.put(other, false, &mut o);
            }
        }
        self.put(line, false, &mut o);
        o
    }
}

fn geometry() -> impl Strategy<Value = CacheParams> {
    (
        select(vec![1usize, 2, 3, 4, 8]),
        select(vec![1u64, 2, 3, 4, 16]),
        select(vec![4u32, 16, 64]),
        select(vec![1u32, 2, 4]),
        select(vec![
            Policy::Lru,
            Policy::Fifo,
            Policy::Random,
            Policy::Plru,
        ]),
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(|(ways, sets, line, per, policy, back, alloc, seed)| {
            let mut p = CacheParams::new(sets * ways as u64 * line as u64, line, ways, policy);
            p.fetch = if ((line * per) as u64) <= p.size {
                line * per
            } else {
                line
            };
            p.write = if back {
                WritePolicy::Back
            } else {
                WritePolicy::Through
            };
            p.write_allocate = alloc;
            p.seed = seed;
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Every access's outcome, and the counters, equal the reference model's, on streams
    /// over a footprint a few times the cache (so there are hits, conflicts and evictions).
    #[test]
    fn cache_matches_reference(
        p in geometry(),
        ops in prop::collection::vec((0u64..2048, any::<bool>()), 1..400),
    ) {
        let mut c = Cache::new(&p).unwrap();
        let mut r = RefCache::new(&p);
        let span = (p.size * 3).max(64);
        let mut stats = CacheStats::default();
        for (i, &(a, w)) in ops.iter().enumerate() {
            let addr = a * 7 % span;
            let got = c.access(addr, w);
            let want = r.access(addr, w);
            prop_assert_eq!(got, want, "access {} of {:#x} (write {})", i, addr, w);
            let victims: Vec<u64> = (0..got.writebacks as usize).map(|k| c.victim(k)).collect();
            prop_assert_eq!(&victims, &r.victims, "write-backs of access {}", i);
            if w { stats.writes += 1; stats.write_misses += !want.hit as u64; }
            else { stats.reads += 1; stats.read_misses += !want.hit as u64; }
            stats.fills += want.fills as u64;
            stats.writebacks += want.writebacks as u64;
        }
        prop_assert_eq!(*c.stats(), stats);
        let dirty_left = r.dirty.values().filter(|&&d| d).count() as u64;
        prop_assert_eq!(c.flush_all(), dirty_left);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// The fills of a direct-mapped cache of 2^k sets ([`Cache::direct`]: a read miss's
    /// fetch block and a write's allocation through [`CacheTags::access_direct_masked`])
    /// leave every outcome, write-back, count, removal, line and last line as the general
    /// path (the tag store's policy dispatch) does, whatever the policy named, line, fetch
    /// block and write policy, in a cache small enough for the blocks to evict each other.
    #[test]
    fn direct_fills_are_the_general_path(
        sets in select(vec![1u64, 2, 4, 16, 64]),
        line in select(vec![4u32, 16]),
        per in select(vec![1u32, 2, 4, 8]),
        policy in select(vec![Policy::Lru, Policy::Fifo, Policy::Random, Policy::Plru]),
        back in any::<bool>(),
        alloc in any::<bool>(),
        ops in prop::collection::vec((0u64..4096, any::<bool>()), 1..400),
    ) {
        let mut p = CacheParams::new(sets * line as u64, line, 1, policy);
        p.fetch = if (line * per) as u64 <= p.size { line * per } else { line };
        p.write = if back { WritePolicy::Back } else { WritePolicy::Through };
        p.write_allocate = alloc;
        let mut fast = Cache::new(&p).unwrap();
        prop_assert!(fast.direct, "a direct-mapped cache of 2^k sets takes the direct fills");
        let mut general = Cache::new(&p).unwrap();
        general.direct = false;
        let span = p.size * 4;
        for (i, &(a, w)) in ops.iter().enumerate() {
            let addr = a * 5 % span;
            let got = fast.access(addr, w);
            prop_assert_eq!(got, general.access(addr, w), "access {} of {:#x} (write {})", i, addr, w);
            for k in 0..got.writebacks as usize {
                prop_assert_eq!(fast.victim(k), general.victim(k), "write-back {} of access {}", k, i);
            }
            prop_assert_eq!(fast.stats(), general.stats());
            prop_assert_eq!(fast.removals(), general.removals());
            prop_assert_eq!(fast.blocks(), general.blocks(), "lines after access {}", i);
            // The last line touched: a repeat of it is counted without a lookup.
            prop_assert_eq!(fast.read_again(addr, 1), general.read_again(addr, 1));
        }
        prop_assert_eq!(fast.flush_all(), general.flush_all());
    }
}

/// Chen's DECstation 5000/200 D-cache: 4-byte lines, write-through with write allocate, a read
/// miss fetches 16 aligned bytes.
fn decstation_dcache() -> Cache {
    let mut p = CacheParams::new(64 << 10, 4, 1, Policy::Lru);
    p.write = WritePolicy::Through;
    p.fetch = 16;
    Cache::new(&p).unwrap()
}

#[test]
fn a_read_miss_fetches_the_aligned_block() {
    let mut c = decstation_dcache();
    let o = c.access(0x1008, false);
    assert_eq!((o.hit, o.fills, o.writebacks), (false, 4, 0));
    for a in [0x1000, 0x1004, 0x100c, 0x100f] {
        assert!(c.access(a, false).hit, "{a:#x} came with the block");
    }
    assert!(!c.access(0x1010, false).hit, "the next block did not");
}

#[test]
fn a_write_miss_allocates_one_line_and_write_through_never_dirties() {
    let mut c = decstation_dcache();
    let o = c.access(0x2000, true);
    assert_eq!((o.hit, o.fills), (false, 1));
    assert!(c.access(0x2000, false).hit);
    assert!(!c.access(0x2004, false).hit);
    // A conflicting line (64 KiB apart) evicts it, with nothing to write back.
    let o = c.access(0x2000 + (64 << 10), true);
    assert_eq!(o.writebacks, 0);
    assert_eq!(c.flush_all(), 0);
}

#[test]
fn write_back_writes_back_dirty_victims_only() {
    let p = CacheParams::new(1024, 32, 1, Policy::Lru);
    let mut c = Cache::new(&p).unwrap();
    c.access(0, true); // dirty
    c.access(32, false); // clean
    assert_eq!(c.access(1024, false).writebacks, 1, "dirty line 0 evicted");
    assert_eq!(
        c.access(1024 + 32, false).writebacks,
        0,
        "clean line 32 evicted"
    );
    assert_eq!(c.invalidate_range(1024, 1024 + 64), (2, 0));
    c.access(64, true);
    assert_eq!(c.invalidate_range(0, 4096), (1, 1));
}

#[test]
fn no_write_allocate_leaves_the_cache_alone() {
    let mut p = CacheParams::new(1024, 32, 2, Policy::Lru);
    p.write_allocate = false;
    let mut c = Cache::new(&p).unwrap();
    assert_eq!(c.access(0, true), Outcome::default());
    assert!(!c.contains(0));
}

#[test]
fn bad_parameters_name_the_field() {
    let bad = |f: fn(&mut CacheParams)| {
        let mut p = CacheParams::new(1024, 32, 2, Policy::Lru);
        f(&mut p);
        Cache::new(&p).unwrap_err().field
    };
    assert_eq!(bad(|p| p.line = 24), "line");
    assert_eq!(bad(|p| p.size = 1000), "size");
    assert_eq!(bad(|p| p.ways = 3), "ways");
    assert_eq!(bad(|p| p.fetch = 16), "fetch");
    assert_eq!(bad(|p| p.fetch = 4096), "fetch");
}
