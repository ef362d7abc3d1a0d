//! True LRU: the victim is the valid way whose last hit or fill is the oldest.
//!
//! Kept as a recency list per set ([`super::list::Lists`]): a hit or a fill moves the way to the
//! back, an invalidation takes it out, the victim is the front. Everything is O(1), which
//! matters for large fully associative TLBs where timestamps would need a scan per miss.

use super::list::Lists;
use super::{Replacement, SplitMix64};

#[derive(Clone)]
pub(crate) struct Lru {
    order: Lists,
}

impl Replacement for Lru {
    fn new(sets: usize, ways: usize) -> Self {
        Lru {
            order: Lists::new(sets, ways),
        }
    }

    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize) {
        self.order.move_to_back(set, way);
    }

    #[inline(always)]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.order.move_to_back(set, way);
    }

    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.order.unlink(set, way);
    }

    #[inline]
    fn victim(&mut self, set: usize, _rng: &mut SplitMix64) -> usize {
        // Only asked when every way is valid, so the list holds every way.
        self.order.front(set).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_reorder_and_invalidation_removes() {
        let mut l = Lru::new(2, 4);
        for w in 0..4 {
            l.on_fill(1, w);
        }
        l.on_hit(1, 0);
        assert_eq!(l.order.order(1), vec![1, 2, 3, 0]);
        l.on_invalidate(1, 2);
        assert_eq!(l.order.order(1), vec![1, 3, 0]);
        l.on_fill(1, 2);
        assert_eq!(l.victim(1, &mut SplitMix64::new(0)), 1);
        assert!(l.order.order(0).is_empty());
    }
}
