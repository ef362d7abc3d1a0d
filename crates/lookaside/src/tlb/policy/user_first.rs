//! User entries first: LRU among the set's user-mode entries; the kernel's are replaced only
//! when the set holds no user entry. An entry is the kernel's when the reference that filled
//! it was in kernel mode (a later hit, of either mode, does not change it).
//!
//! The question it asks is Uhlig's (a kernel's few, costly-to-refill entries evicted by a
//! user stream), answered by the policy instead of by a partition: nothing is reserved, and
//! a set the kernel does not use is all the user's. It is the example of a policy that reads
//! the reference ([`super::AccessInfo`]): one file, its state and four hooks.
//!
//! A timestamp per way (a hit or fill stores the next count) and the filling mode; the
//! victim is one pass over the set. A hit on the entry last hit or filled changes nothing
//! (it already has the newest stamp), as the TLB's fast paths assume.

use super::{AccessInfo, Replacement, SplitMix64};
use crate::event::Mode;
use crate::tlb::filled;

#[derive(Clone)]
pub(crate) struct UserFirst {
    stamp: Vec<u64>,
    kernel: Vec<bool>,
    now: u64,
    ways: usize,
}

impl Replacement for UserFirst {
    fn new(sets: usize, ways: usize) -> Result<Self, String> {
        Ok(UserFirst {
            stamp: filled(sets * ways, 0)?,
            kernel: filled(sets * ways, false)?,
            now: 0,
            ways,
        })
    }

    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.now += 1;
        self.stamp[set * self.ways + way] = self.now;
    }

    #[inline(always)]
    fn on_fill(&mut self, set: usize, way: usize, at: AccessInfo) {
        self.on_hit(set, way, at);
        self.kernel[set * self.ways + way] = at.mode == Mode::Kernel;
    }

    #[inline]
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}

    fn filled_mode(&self, set: usize, way: usize) -> Mode {
        [Mode::User, Mode::Kernel][self.kernel[set * self.ways + way] as usize]
    }

    #[inline]
    fn victim(&mut self, set: usize, _rng: &mut SplitMix64, _at: AccessInfo) -> usize {
        let base = set * self.ways;
        let oldest = |user_only: bool| {
            (0..self.ways)
                .filter(|&w| !(user_only && self.kernel[base + w]))
                .min_by_key(|&w| self.stamp[base + w])
        };
        oldest(true).or_else(|| oldest(false)).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Kind;

    fn by(mode: Mode) -> AccessInfo {
        AccessInfo {
            key: 0,
            ctx: 0,
            kind: Kind::Load,
            mode,
        }
    }

    #[test]
    fn user_entries_go_first_then_lru() {
        let mut rng = SplitMix64::new(0);
        let mut p = UserFirst::new(1, 3).unwrap();
        p.on_fill(0, 0, by(Mode::Kernel));
        p.on_fill(0, 1, by(Mode::User));
        p.on_fill(0, 2, by(Mode::User));
        // The oldest user entry, though the kernel's is older.
        assert_eq!(p.victim(0, &mut rng, by(Mode::User)), 1);
        p.on_hit(0, 1, by(Mode::Kernel));
        assert_eq!(p.victim(0, &mut rng, by(Mode::User)), 2);
        // A set of kernel entries only: plain LRU.
        for w in 0..3 {
            p.on_fill(0, w, by(Mode::Kernel));
        }
        p.on_hit(0, 0, by(Mode::User));
        assert_eq!(p.victim(0, &mut rng, by(Mode::User)), 1);
    }
}
