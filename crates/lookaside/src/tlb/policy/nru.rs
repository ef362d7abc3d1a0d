//! NRU / clock (second chance): one reference bit per way and one clock hand per set.
//!
//! * A hit or a fill sets the way's reference bit; an invalidation clears it.
//! * The victim is the first way, starting at the hand and going round in way order, whose bit
//!   is 0; every set bit passed on the way is cleared (its second chance). The hand then points
//!   just past the victim. If all bits are set the sweep clears them all and comes back to the
//!   way under the hand.
//! * Filling an invalid way does not move the hand. Hands start at way 0; flushes do not move
//!   them.
//!
//! The bits are kept in `u64` words so a sweep tests 64 ways at a time; each bit cleared by a
//! sweep was set by an earlier hit or fill, so victim choice is amortised O(1).

use super::{AccessInfo, Replacement, SplitMix64};
use crate::tlb::filled;

#[derive(Clone)]
pub(crate) struct Nru {
    refs: Vec<u64>,
    words: usize,
    hand: Vec<u32>,
    ways: usize,
}

impl Nru {
    /// The bits of word `wi` that are real ways.
    #[inline(always)]
    fn live(&self, wi: usize) -> u64 {
        let left = self.ways - wi * 64;
        if left >= 64 {
            !0
        } else {
            (1u64 << left) - 1
        }
    }

    #[cfg(test)]
    pub(crate) fn referenced(&self, set: usize, way: usize) -> bool {
        self.refs[set * self.words + way / 64] >> (way % 64) & 1 != 0
    }

    #[cfg(test)]
    pub(crate) fn hand(&self, set: usize) -> usize {
        self.hand[set] as usize
    }
}

impl Replacement for Nru {
    fn new(sets: usize, ways: usize) -> Result<Self, String> {
        let words = ways.div_ceil(64);
        Ok(Nru {
            refs: filled(sets * words, 0)?,
            words,
            hand: filled(sets, 0)?,
            ways,
        })
    }

    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.refs[set * self.words + way / 64] |= 1 << (way % 64);
    }

    #[inline(always)]
    fn on_fill(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.on_hit(set, way, _at);
    }

    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.refs[set * self.words + way / 64] &= !(1 << (way % 64));
    }

    fn victim(&mut self, set: usize, _rng: &mut SplitMix64, _at: AccessInfo) -> usize {
        let base = set * self.words;
        let mut h = self.hand[set] as usize;
        loop {
            let wi = h / 64;
            let from = !0u64 << (h % 64);
            let span = from & self.live(wi);
            let word = self.refs[base + wi];
            let zeros = !word & span;
            if zeros != 0 {
                let pos = zeros.trailing_zeros() as usize;
                // Clear the set bits passed between the hand and the victim.
                let passed = span & ((1u64 << pos) - 1);
                self.refs[base + wi] = word & !passed;
                let v = wi * 64 + pos;
                self.hand[set] = if v + 1 == self.ways {
                    0
                } else {
                    (v + 1) as u32
                };
                return v;
            }
            self.refs[base + wi] = word & !span;
            h = (wi + 1) * 64;
            if h >= self.ways {
                h = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlb::policy::ANY;

    #[test]
    fn clock_example() {
        let mut rng = SplitMix64::new(0);
        let mut c = Nru::new(1, 4).unwrap();
        for w in 0..4 {
            c.on_fill(0, w, ANY);
        }
        // All referenced: the sweep clears 0..3 and comes back to 0.
        assert_eq!(c.victim(0, &mut rng, ANY), 0);
        assert_eq!(c.hand(0), 1);
        assert!((0..4).all(|w| !c.referenced(0, w)));
        c.on_fill(0, 0, ANY);
        c.on_hit(0, 2, ANY);
        // From hand 1: way 1 is unreferenced.
        assert_eq!(c.victim(0, &mut rng, ANY), 1);
        c.on_fill(0, 1, ANY);
        // From hand 2: way 2 referenced (cleared), way 3 not -> 3; hand wraps to 0.
        assert_eq!(c.victim(0, &mut rng, ANY), 3);
        assert_eq!(c.hand(0), 0);
        assert!(!c.referenced(0, 2) && c.referenced(0, 0) && c.referenced(0, 1));
    }

    #[test]
    fn sweeps_across_words() {
        let mut rng = SplitMix64::new(0);
        let mut c = Nru::new(2, 130).unwrap();
        for w in 0..130 {
            c.on_fill(1, w, ANY);
        }
        c.on_invalidate(1, 100);
        assert_eq!(c.victim(1, &mut rng, ANY), 100);
        assert_eq!(c.hand(1), 101);
        for w in 0..130 {
            assert_eq!(c.referenced(1, w), w > 100);
        }
        // From 101: 101..=129 are referenced (cleared), wrap to way 0, which is not.
        assert_eq!(c.victim(1, &mut rng, ANY), 0);
        assert_eq!(c.hand(1), 1);
        assert!((0..130).all(|w| !c.referenced(1, w)));
        c.on_hit(1, 1, ANY);
        assert_eq!(c.victim(1, &mut rng, ANY), 2);
        assert!(!c.referenced(1, 1));
    }
}
