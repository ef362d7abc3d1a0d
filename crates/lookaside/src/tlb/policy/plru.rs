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
//!
//! The bits are stored in 6-level blocks (see [`Plru`]), so that a touch is one and-or per
//! six levels and a 1024-way tree costs little more than a 64-way one.

use super::{AccessInfo, Replacement, SplitMix64};
use crate::tlb::filled;

/// Levels of the tree held in one word (a 6-level subtree has 63 nodes).
const BLOCK_LEVELS: u32 = 6;

/// The tree's bits are stored in *blocks*: the tree's `D = log2 P` levels are cut, from the
/// top, into a first band of `D - 6 * (bands - 1)` levels and then bands of 6 levels; each
/// subtree of a band is one `u64` holding its nodes in heap order (bit `i` is the subtree's
/// node `i`). A touch is then one and-or per band with a precomputed path mask — one for up
/// to 64 ways, two for up to 4096 — and a victim walk reads one word per band.
#[derive(Clone)]
pub(crate) struct Plru {
    bits: Vec<u64>,
    /// Words per set.
    words: usize,
    ways: usize,
    /// `D`.
    depth: u32,
    bands: [Band; MAX_BANDS],
    nbands: usize,
    /// Path masks of the first band's subtree and of a 6-level subtree: `[leaf] = (nodes on
    /// the path to the leaf, the values a touch of it gives them)`; only the first
    /// `2^levels` entries of `top` are used.
    top: Box<[(u64, u64); 64]>,
    full: Box<[(u64, u64); 64]>,
}

/// Bands of a tree of at most 2^24 leaves (the TLB's entry limit).
const MAX_BANDS: usize = 4;

#[derive(Clone, Copy, Default)]
struct Band {
    levels: u32,
    /// `D` minus the depth of the band's bottom: shifting a way number right by this leaves
    /// the path down to the band's bottom.
    below: u32,
    /// Index (within a set's words) of the band's first block.
    first: usize,
}

/// For a subtree of `d <= 6` levels (`2^d` leaves), the nodes on the path to each leaf and the
/// values a touch of that leaf gives them (padded to 64 entries).
fn paths(d: u32) -> Box<[(u64, u64); 64]> {
    let leaves = 1usize << d;
    let mut out = Box::new([(0, 0); 64]);
    for (leaf, slot) in out.iter_mut().enumerate().take(leaves) {
        let (mut mask, mut val) = (0u64, 0u64);
        let mut node = leaves + leaf;
        while node > 1 {
            let parent = node >> 1;
            mask |= 1 << parent;
            // Came from the left child (even) -> point right (1); else left (0).
            val |= ((node & 1 == 0) as u64) << parent;
            node = parent;
        }
        *slot = (mask, val);
    }
    out
}

impl Replacement for Plru {
    fn new(sets: usize, ways: usize) -> Result<Self, String> {
        let depth = ways.next_power_of_two().trailing_zeros();
        let nbands = depth.div_ceil(BLOCK_LEVELS).max(1) as usize;
        assert!(nbands <= MAX_BANDS, "too many ways for PLRU");
        let mut bands = [Band::default(); MAX_BANDS];
        let (mut top_depth, mut first) = (0, 0);
        for (b, band) in bands.iter_mut().enumerate().take(nbands) {
            let levels = if b == 0 {
                depth - BLOCK_LEVELS * (nbands as u32 - 1)
            } else {
                BLOCK_LEVELS
            };
            *band = Band {
                levels,
                below: depth - top_depth - levels,
                first,
            };
            first += 1 << top_depth; // one block per subtree rooted at the band's top
            top_depth += levels;
        }
        Ok(Plru {
            bits: filled(sets * first, 0)?,
            words: first,
            ways,
            depth,
            bands,
            nbands,
            top: paths(bands[0].levels),
            full: paths(BLOCK_LEVELS),
        })
    }

    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize, _at: AccessInfo) {
        if self.words == 1 {
            // One band, one block: one and-or.
            let (mask, val) = self.top[way & 63];
            let word = &mut self.bits[set];
            *word = (*word & !mask) | val;
            return;
        }
        self.touch_bands(set, way);
    }

    #[inline]
    fn on_fill(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.on_hit(set, way, _at);
    }

    #[inline(always)]
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}

    fn victim(&mut self, set: usize, _rng: &mut SplitMix64, _at: AccessInfo) -> usize {
        let bits = &self.bits[set * self.words..(set + 1) * self.words];
        let mut lo = 0;
        let mut half = (1usize << self.depth) / 2;
        for band in &self.bands[..self.nbands] {
            // The block of the subtree whose leftmost leaf is `lo`.
            let word = bits[band.first + (lo >> (band.below + band.levels))];
            let mut node = 1;
            for _ in 0..band.levels {
                // The left subtree always holds way `lo` (< ways); the right may be empty.
                let right = (word >> node & 1) as usize & (lo + half < self.ways) as usize;
                node = 2 * node + right;
                lo += half * right;
                half /= 2;
            }
        }
        lo
    }
}

impl Plru {
    /// A touch of a tree of more than one band (more than 64 ways).
    fn touch_bands(&mut self, set: usize, way: usize) {
        let bits = &mut self.bits[set * self.words..(set + 1) * self.words];
        // The first band is one block, the root's.
        let (mask, val) = self.top[(way >> self.bands[0].below) & 63];
        bits[0] = (bits[0] & !mask) | val;
        for band in &self.bands[1..self.nbands] {
            let block = band.first + (way >> (band.below + BLOCK_LEVELS));
            let (mask, val) = self.full[(way >> band.below) & 63];
            bits[block] = (bits[block] & !mask) | val;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlb::policy::ANY;

    fn victim(p: &mut Plru) -> usize {
        p.victim(0, &mut SplitMix64::new(0), ANY)
    }

    #[test]
    fn four_way_textbook_example() {
        let mut p = Plru::new(1, 4).unwrap();
        for w in [0, 1, 2, 3] {
            p.on_fill(0, w, ANY);
        }
        // After 0 1 2 3 the root points left (3 was last, on the right), node 2 points at 0.
        assert_eq!(victim(&mut p), 0);
        p.on_hit(0, 0, ANY);
        // Root now points right; node 3 points away from 3, at 2.
        assert_eq!(victim(&mut p), 2);
        p.on_hit(0, 2, ANY);
        // Root left; node 2 points away from 0, at 1.
        assert_eq!(victim(&mut p), 1);
    }

    #[test]
    fn three_ways_never_pick_the_missing_leaf() {
        let mut p = Plru::new(1, 3).unwrap();
        for w in [0, 1, 2] {
            p.on_fill(0, w, ANY);
        }
        // Touching 2 points node 3 at the missing leaf 3 and the root left: victim in {0, 1}.
        assert_eq!(victim(&mut p), 0);
        p.on_hit(0, 0, ANY);
        p.on_hit(0, 1, ANY);
        // Root points right (away from 1); node 3 points at missing leaf 3 -> take way 2.
        assert_eq!(victim(&mut p), 2);
        for _ in 0..10 {
            let v = victim(&mut p);
            assert!(v < 3);
            p.on_hit(0, v, ANY);
        }
    }

    /// The same tree kept naively: a heap-ordered `Vec<bool>`, one bit per node.
    struct Naive {
        bits: Vec<bool>,
        leaves: usize,
        ways: usize,
    }

    impl Naive {
        fn touch(&mut self, way: usize) {
            let mut node = self.leaves + way;
            while node > 1 {
                self.bits[node / 2] = node.is_multiple_of(2);
                node /= 2;
            }
        }

        fn victim(&self) -> usize {
            let (mut node, mut lo, mut size) = (1, 0, self.leaves);
            while size > 1 {
                if self.bits[node] && lo + size / 2 < self.ways {
                    node = 2 * node + 1;
                    lo += size / 2;
                } else {
                    node *= 2;
                }
                size /= 2;
            }
            lo
        }
    }

    #[test]
    fn blocked_layout_matches_a_naive_tree() {
        let mut rng = SplitMix64::new(5);
        for ways in [
            1usize, 2, 3, 63, 64, 65, 100, 128, 1000, 1024, 4096, 5000, 300_000,
        ] {
            let leaves = ways.next_power_of_two();
            let mut naive = Naive {
                bits: vec![false; leaves],
                leaves,
                ways,
            };
            let mut p = Plru::new(2, ways).unwrap();
            for i in 0..2000 {
                let way = if i % 3 == 0 {
                    naive.victim()
                } else {
                    rng.below(ways)
                };
                naive.touch(way);
                p.on_hit(1, way, ANY);
                assert_eq!(
                    p.victim(1, &mut rng, ANY),
                    naive.victim(),
                    "{ways} ways, step {i}"
                );
            }
            assert_eq!(p.victim(0, &mut rng, ANY), 0);
        }
    }

    #[test]
    fn one_way_and_many_sets() {
        let mut p = Plru::new(3, 1).unwrap();
        p.on_fill(2, 0, ANY);
        assert_eq!(p.victim(2, &mut SplitMix64::new(0), ANY), 0);
        let mut q = Plru::new(2, 128).unwrap();
        q.on_fill(1, 0, ANY);
        assert_eq!(q.victim(1, &mut SplitMix64::new(0), ANY), 64);
        assert_eq!(q.victim(0, &mut SplitMix64::new(0), ANY), 0);
    }
}
