//! A TLB-hostile data stream, for measuring the miss path: 8-byte data references over a
//! large region, in segments of on average `segment` references, each segment either
//! sequential with an 8-byte stride from a random start or uniformly random over the region
//! (the `random` share of segments), a `stores` share of them stores. With the defaults (64
//! MiB, segments of 64, half random, 30% stores) about half the references miss a 64-entry
//! TLB of 4 KiB pages, where a program-like stream ([`super::Synthetic`]) misses almost
//! never: speed measured only on the latter says nothing of the references translation
//! studies are about. Seeded, generated in batches at constant memory.

use crate::error::Result;
use crate::event::{Event, Kind, BATCH};
use crate::tlb::SplitMix64;
use crate::trace::TraceSource;

/// Parameters of [`Segments`] (the `workload:segments` keys).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SegmentsParams {
    /// References in all.
    pub refs: u64,
    /// Bytes of the region (rounded up to a power of two, at least a page).
    #[serde(deserialize_with = "crate::config::byte_count")]
    pub region: u64,
    /// Mean references per segment (lengths uniform in 1 ..= 2 × mean - 1).
    pub segment: u64,
    /// Percent of segments that are random rather than sequential.
    pub random: u64,
    /// Percent of references that are stores.
    pub stores: u64,
    pub seed: u64,
}

impl Default for SegmentsParams {
    fn default() -> Self {
        SegmentsParams {
            refs: 20_000_000,
            region: 64 << 20,
            segment: 64,
            random: 50,
            stores: 30,
            seed: 1,
        }
    }
}

/// Where the region starts: page-aligned, away from address 0.
const BASE: u64 = 0x1000_0000;

/// The stream of [`SegmentsParams`].
#[derive(Clone, Debug)]
pub struct Segments {
    p: SegmentsParams,
    mask: u64,
    made: u64,
    rng: SplitMix64,
    /// References left in the current segment, whether it is random, and its next offset.
    left: u64,
    random: bool,
    at: u64,
}

impl Segments {
    pub fn new(p: SegmentsParams) -> Segments {
        let mask = p.region.max(4096).next_power_of_two() - 1;
        let rng = SplitMix64::new(p.seed);
        Segments {
            p,
            mask,
            made: 0,
            rng,
            left: 0,
            random: false,
            at: 0,
        }
    }
}

impl TraceSource for Segments {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        let mean = self.p.segment.max(1);
        while out.len() < BATCH && self.made < self.p.refs {
            if self.left == 0 {
                let r = self.rng.next_u64();
                self.left = 1 + r % (2 * mean - 1);
                self.random = (r >> 32) % 100 < self.p.random;
                self.at = self.rng.next_u64() & self.mask & !7;
            }
            let r = self.rng.next_u64();
            let offset = if self.random {
                r & self.mask & !7
            } else {
                let o = self.at;
                self.at = (self.at + 8) & self.mask;
                o
            };
            let kind = if (r >> 40) % 100 < self.p.stores {
                Kind::Store
            } else {
                Kind::Load
            };
            out.push(Event::reference(kind, BASE + offset, 8));
            self.left -= 1;
            self.made += 1;
        }
        Ok(!out.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: SegmentsParams) -> Vec<Event> {
        let mut s = Segments::new(p);
        let (mut out, mut batch) = (Vec::new(), Vec::new());
        while s.next_batch(&mut batch).unwrap() {
            out.extend_from_slice(&batch);
        }
        out
    }

    #[test]
    fn makes_exactly_refs_in_the_region_and_is_deterministic() {
        let p = SegmentsParams {
            refs: 50_001,
            region: 1 << 20,
            ..SegmentsParams::default()
        };
        let a = all(p.clone());
        assert_eq!(a, all(p.clone()));
        assert_eq!(a.len(), 50_001);
        assert!(a
            .iter()
            .all(|e| e.addr >= BASE && e.addr + 8 <= BASE + (1 << 20) && e.addr % 8 == 0));
        let stores = a.iter().filter(|e| e.kind == Kind::Store).count() as f64;
        assert!((stores / a.len() as f64 - 0.30).abs() < 0.02, "{stores}");
        let other = all(SegmentsParams { seed: 2, ..p });
        assert_ne!(a, other);
    }

    #[test]
    fn about_half_miss_a_64_entry_tlb_and_sequential_segments_are_strided() {
        let p = SegmentsParams {
            refs: 400_000,
            ..SegmentsParams::default()
        };
        let mut m = crate::machine::Machine::assemble(
            None,
            "t",
            &["dtlb:entries=64,ways=full,policy=lru,page=4k".into()],
            &[],
        )
        .unwrap();
        let mut s = Segments::new(p.clone());
        let n = crate::run::run(&mut s, &mut m, &mut |_| true)
            .unwrap()
            .events;
        assert_eq!(n, 400_000);
        let j = crate::report::result_json(&m, &Default::default());
        let ratio = j["structures"]["dtlb"]["miss_ratio"].as_f64().unwrap();
        assert!((0.40..0.60).contains(&ratio), "miss ratio {ratio}");
        // Consecutive references 8 bytes apart: the sequential half of the segments.
        let a = all(p);
        let strided = a.windows(2).filter(|w| w[1].addr == w[0].addr + 8).count();
        assert!(strided as f64 > 0.4 * a.len() as f64, "{strided}");
    }
}
