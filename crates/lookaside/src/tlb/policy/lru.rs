//! True LRU: the victim is the valid way whose last hit or fill is the oldest.
//!
//! Two exact representations of the same order, chosen by associativity:
//!
//! * up to [`STAMP_MAX_WAYS`] ways, a timestamp per way (a hit or fill stores the next value
//!   of a counter; the victim is the way with the smallest stamp). Hits — by far the most
//!   frequent event — cost one store; a victim choice is a branch-free, vectorisable scan of
//!   the set's stamps.
//! * above that, a recency list per set ([`super::list::Lists`]): a hit or fill moves the way
//!   to the back, an invalidation takes it out, the victim is the front. Everything is O(1),
//!   so a 1024-way set costs no more than a 64-way one.
//!
//! Invalidated ways need no stamp handling: the TLB refills invalid ways before asking for a
//! victim, and a fill stamps the way. Stamps are `u64`: the counter cannot wrap. (`u32`
//! stamps, renumbered on wrap-around, were measured slower: without SSE4.1 the scan does not
//! vectorise any better, and the wrap check costs every hit.)

use super::list::Lists;
use super::{Replacement, SplitMix64};

/// Largest associativity kept as timestamps rather than a list (see `tlb/bench.rs`).
pub(crate) const STAMP_MAX_WAYS: usize = 64;

#[derive(Clone)]
pub(crate) enum Lru {
    Stamps {
        stamp: Vec<u64>,
        now: u64,
        ways: usize,
    },
    List(Lists),
}

impl Replacement for Lru {
    fn new(sets: usize, ways: usize) -> Self {
        if ways <= STAMP_MAX_WAYS {
            Lru::Stamps {
                stamp: vec![0; sets * ways],
                now: 0,
                ways,
            }
        } else {
            Lru::List(Lists::new(sets, ways))
        }
    }

    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize) {
        match self {
            Lru::Stamps { stamp, now, ways } => {
                *now += 1;
                stamp[set * *ways + way] = *now;
            }
            Lru::List(order) => order.move_to_back(set, way),
        }
    }

    #[inline(always)]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way);
    }

    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        if let Lru::List(order) = self {
            order.unlink(set, way);
        }
    }

    #[inline]
    fn victim(&mut self, set: usize, _rng: &mut SplitMix64) -> usize {
        match self {
            Lru::Stamps { stamp, ways, .. } => oldest(&stamp[set * *ways..(set + 1) * *ways]),
            // Only asked when every way is valid, so the list holds every way.
            Lru::List(order) => order.front(set).unwrap_or(0),
        }
    }
}

/// The position of the smallest stamp (stamps of valid ways are unique): the minimum with
/// four independent branch-free accumulators, then its position.
fn oldest(s: &[u64]) -> usize {
    let mut m = [u64::MAX; 4];
    let chunks = s.chunks_exact(4);
    let tail = chunks.remainder().iter().fold(u64::MAX, |a, &t| a.min(t));
    for c in chunks {
        for i in 0..4 {
            m[i] = m[i].min(c[i]);
        }
    }
    let min = m[0].min(m[1]).min(m[2].min(m[3])).min(tail);
    s.iter().position(|&t| t == min).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_representations_agree() {
        let mut rng = SplitMix64::new(0);
        for ways in [4, 17, STAMP_MAX_WAYS, STAMP_MAX_WAYS + 1, 200] {
            let mut l = Lru::new(2, ways);
            assert_eq!(matches!(l, Lru::Stamps { .. }), ways <= STAMP_MAX_WAYS);
            for w in 0..ways {
                l.on_fill(1, w);
            }
            l.on_hit(1, 0);
            l.on_hit(1, 2);
            assert_eq!(l.victim(1, &mut rng), 1);
            l.on_invalidate(1, 1);
            l.on_fill(1, 1);
            assert_eq!(l.victim(1, &mut rng), 3);
            if let Lru::List(order) = &l {
                let mut expect: Vec<usize> = (3..ways).collect();
                expect.extend([0, 2, 1]);
                assert_eq!(order.order(1), expect);
                assert!(order.order(0).is_empty());
            }
        }
    }

    #[test]
    fn oldest_finds_the_smallest_stamp() {
        assert_eq!(oldest(&[5, 3, 9]), 1);
        assert_eq!(oldest(&[7]), 0);
        assert_eq!(oldest(&(0..40).map(|i| 100 - i).collect::<Vec<u64>>()), 39);
        assert_eq!(
            oldest(&(0..64).map(|i| (i * 37 + 5) % 64 + 1).collect::<Vec<u64>>()),
            31
        );
    }
}
