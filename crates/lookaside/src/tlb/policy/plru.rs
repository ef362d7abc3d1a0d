//! Tree pseudo-LRU: one bit per internal node of a binary tree whose leaves are the ways.
//!
//! The tree is a complete binary tree over `P` leaves, `P` the smallest power of two `>= ways`,
//! heap-numbered: the root is node 1, node `i` has children `2i` (left) and `2i + 1` (right),
//! and leaf `P + w` is way `w`. Each internal node has one bit: 0 means "the victim is on the
//! left", 1 "on the right".
//!
//! * A hit or a fill of way `w` walks from its leaf to the root and sets every bit on the path
//!   to point *away* from `w`.
//! * The victim is found by walking down from the root following the bits — except that when a
//!   bit points at a subtree holding no existing way (all its leaves `>= ways`, which can only
//!   happen for a right subtree when `ways` is not a power of two) the walk takes the other
//!   branch. With a power-of-two way count this is the textbook tree-PLRU.
//! * Invalidation changes no bit (the TLB refills invalid ways first, lowest first, whatever
//!   the tree says).
//! * All bits start at 0; flushes do not reset them.

use super::{Replacement, SplitMix64};

#[derive(Clone)]
pub(crate) struct Plru {
    /// `words` words per set; bit `i` of a set's bit string is node `i` (bit 0 unused).
    bits: Vec<u64>,
    words: usize,
    /// `P`: the number of leaves.
    leaves: usize,
    ways: usize,
    /// When the whole tree fits in one word (`P <= 64`): for each way, the mask of the nodes
    /// on its path and the values a touch gives them, so a touch is one and-or.
    path: Vec<(u64, u64)>,
}

impl Plru {
    #[inline(always)]
    fn bit(&self, set: usize, node: usize) -> usize {
        (self.bits[set * self.words + node / 64] >> (node % 64) & 1) as usize
    }
}

impl Replacement for Plru {
    fn new(sets: usize, ways: usize) -> Self {
        let leaves = ways.next_power_of_two();
        let words = leaves.div_ceil(64);
        let mut path = Vec::new();
        if leaves <= 64 {
            for w in 0..ways {
                let (mut mask, mut val) = (0u64, 0u64);
                let mut node = leaves + w;
                while node > 1 {
                    let parent = node >> 1;
                    mask |= 1 << parent;
                    // Came from the left child (even) -> point right (1); else left (0).
                    val |= ((node & 1 == 0) as u64) << parent;
                    node = parent;
                }
                path.push((mask, val));
            }
        }
        Plru {
            bits: vec![0; sets * words],
            words,
            leaves,
            ways,
            path,
        }
    }

    #[inline]
    fn on_hit(&mut self, set: usize, way: usize) {
        if let Some(&(mask, val)) = self.path.get(way) {
            let word = &mut self.bits[set];
            *word = (*word & !mask) | val;
            return;
        }
        let base = set * self.words;
        let mut node = self.leaves + way;
        while node > 1 {
            let parent = node >> 1;
            let word = &mut self.bits[base + parent / 64];
            let sh = parent % 64;
            // Came from the left child (even) -> point right (1); from the right -> left (0).
            *word = (*word & !(1 << sh)) | (((node & 1) ^ 1) as u64) << sh;
            node = parent;
        }
    }

    #[inline]
    fn on_fill(&mut self, set: usize, way: usize) {
        self.on_hit(set, way);
    }

    #[inline(always)]
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}

    fn victim(&mut self, set: usize, _rng: &mut SplitMix64) -> usize {
        let mut node = 1;
        let mut lo = 0;
        let mut half = self.leaves / 2;
        while half > 0 {
            // The left subtree always holds way `lo` (< ways); the right one may be empty.
            let right = self.bit(set, node) & (lo + half < self.ways) as usize;
            node = 2 * node + right;
            lo += half * right;
            half /= 2;
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn victim(p: &mut Plru) -> usize {
        p.victim(0, &mut SplitMix64::new(0))
    }

    #[test]
    fn four_way_textbook_example() {
        let mut p = Plru::new(1, 4);
        for w in [0, 1, 2, 3] {
            p.on_fill(0, w);
        }
        // After 0 1 2 3 the root points left (3 was last, on the right), node 2 points at 0.
        assert_eq!(victim(&mut p), 0);
        p.on_hit(0, 0);
        // Root now points right; node 3 points away from 3, at 2.
        assert_eq!(victim(&mut p), 2);
        p.on_hit(0, 2);
        // Root left; node 2 points away from 0, at 1.
        assert_eq!(victim(&mut p), 1);
    }

    #[test]
    fn three_ways_never_pick_the_missing_leaf() {
        let mut p = Plru::new(1, 3);
        for w in [0, 1, 2] {
            p.on_fill(0, w);
        }
        // Touching 2 points node 3 at the missing leaf 3 and the root left: victim in {0, 1}.
        assert_eq!(victim(&mut p), 0);
        p.on_hit(0, 0);
        p.on_hit(0, 1);
        // Root points right (away from 1); node 3 points at missing leaf 3 -> take way 2.
        assert_eq!(victim(&mut p), 2);
        for _ in 0..10 {
            let v = victim(&mut p);
            assert!(v < 3);
            p.on_hit(0, v);
        }
    }

    #[test]
    fn one_way_and_many_sets() {
        let mut p = Plru::new(3, 1);
        p.on_fill(2, 0);
        assert_eq!(p.victim(2, &mut SplitMix64::new(0)), 0);
        let mut q = Plru::new(2, 128);
        q.on_fill(1, 0);
        assert_eq!(q.victim(1, &mut SplitMix64::new(0)), 64);
        assert_eq!(q.victim(0, &mut SplitMix64::new(0)), 0);
    }
}
