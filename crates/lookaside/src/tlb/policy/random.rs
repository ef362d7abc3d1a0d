//! Random replacement and the deterministic PRNG behind it.
//!
//! Simulations must be reproducible, so randomness comes from a seeded [`SplitMix64`] owned by
//! the TLB (one stream shared by both partitions), never from the OS. Exactly one number is
//! drawn per victim choice and none when an invalid way is filled, so the sequence of victims
//! depends only on the seed and the sequence of full-partition misses.

use super::{AccessInfo, Replacement};

/// SplitMix64 (Steele, Lea & Flood 2014): tiny, fast, and good enough to pick victims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`) from one draw: the high half of `next_u64() * n`
    /// (Lemire's multiply-shift; the bias is below `n / 2^64`, far below anything measurable).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// Random replacement: no per-way state at all.
#[derive(Clone)]
pub(crate) struct Random {
    ways: usize,
}

impl Replacement for Random {
    fn new(_sets: usize, ways: usize) -> Result<Self, String> {
        Ok(Random { ways })
    }

    #[inline(always)]
    fn on_hit(&mut self, _set: usize, _way: usize, _at: AccessInfo) {}

    #[inline(always)]
    fn on_fill(&mut self, _set: usize, _way: usize, _at: AccessInfo) {}

    #[inline(always)]
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}

    #[inline]
    fn victim(&mut self, _set: usize, rng: &mut SplitMix64, _at: AccessInfo) -> usize {
        rng.below(self.ways)
    }
}
