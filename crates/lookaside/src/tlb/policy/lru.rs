//! True LRU: the victim is the valid way whose last hit or fill is the oldest.
//!
//! Two exact representations of the same order, chosen by associativity (two replacement
//! states, [`Stamps`] and [`List`], so that the choice is made once, by the state's variant):
//!
//! * up to [`STAMP_MAX_WAYS`] (16) ways, a timestamp per way. A hit or fill advances a counter
//!   and stores it, with the way number in the low 6 bits, as the way's stamp — one store,
//!   because hits are by far the most frequent event. The victim is the smallest stamp of the
//!   set, found by one branch-free pass (its low bits say which way it is).
//! * above that, a recency list per set ([`super::list::Lists`]): a hit or fill moves the way
//!   to the back, an invalidation takes it out, the victim is the front. Everything is O(1),
//!   so a 1024-way set costs no more than a 64-way one.
//!
//! Invalidated ways need no stamp handling: the TLB refills invalid ways before asking for a
//! victim, and a fill stamps the way. When the counter passes 2^62, the next fill replaces
//! every set's stamps by their ranks (same order); hits alone could only overflow it after
//! 2^58 of them without a single fill.

use super::list::Lists;
use super::{AccessInfo, Replacement, SplitMix64};
use crate::tlb::filled;

/// Largest associativity kept as timestamps rather than a list; the way number must fit in
/// the stamp's low [`WAY_BITS`] bits. A stamp makes a hit one store but a victim a scan of
/// the set; a list makes both O(1) at a few more stores per hit. Measured with callgrind on
/// a 64-entry fully associative TLB: the list takes 20% fewer instructions on a miss-heavy
/// stream (`workload:segments`, half the references miss) and 2.6% more on the
/// hit-dominated demo trace, so sets above 16 ways, where a scan costs more than relinking,
/// use the list.
pub(crate) const STAMP_MAX_WAYS: usize = 16;
const WAY_BITS: u32 = 6;
const RENUMBER_AT: u64 = 1 << 62;

/// LRU as a timestamp per way (sets of at most [`STAMP_MAX_WAYS`] ways).
#[derive(Clone)]
pub(crate) struct Stamps {
    stamp: Vec<u64>,
    now: u64,
    ways: usize,
}

impl Replacement for Stamps {
    fn new(sets: usize, ways: usize) -> Result<Self, String> {
        Ok(Stamps {
            stamp: filled(sets * ways, 0)?,
            now: 0,
            ways,
        })
    }

    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.now += 1 << WAY_BITS;
        self.stamp[set * self.ways + way] = self.now | way as u64;
    }

    #[inline(always)]
    fn on_fill(&mut self, set: usize, way: usize, _at: AccessInfo) {
        if self.now >= RENUMBER_AT {
            self.now = renumber(&mut self.stamp, self.ways);
        }
        self.on_hit(set, way, _at);
    }

    #[inline]
    fn on_invalidate(&mut self, _set: usize, _way: usize) {}

    #[inline(always)]
    fn victim(&mut self, set: usize, _rng: &mut SplitMix64, _at: AccessInfo) -> usize {
        oldest(&self.stamp[set * self.ways..(set + 1) * self.ways])
    }
}

/// LRU as a recency list per set (sets of more than [`STAMP_MAX_WAYS`] ways).
#[derive(Clone)]
pub(crate) struct List {
    order: Lists,
}

impl List {
    #[cfg(test)]
    pub(crate) fn order(&self, set: usize) -> Vec<usize> {
        self.order.order(set)
    }
}

impl Replacement for List {
    fn new(sets: usize, ways: usize) -> Result<Self, String> {
        Ok(List {
            order: Lists::new(sets, ways)?,
        })
    }

    #[inline(always)]
    fn on_hit(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.order.move_to_back(set, way);
    }

    #[inline(always)]
    fn on_fill(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.order.move_to_back(set, way);
    }

    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.order.unlink(set, way);
    }

    #[inline(always)]
    fn victim(&mut self, set: usize, _rng: &mut SplitMix64, _at: AccessInfo) -> usize {
        // Only asked when every way is valid, so the list holds every way.
        self.order.front(set).unwrap_or(0)
    }
}

/// The way whose stamp is smallest (stamps are unique: they end in the way number). One
/// branch-free pass, unrolled for the usual associativities.
#[inline(always)]
fn oldest(s: &[u64]) -> usize {
    #[inline(always)]
    fn min_of<const N: usize>(s: &[u64]) -> u64 {
        let a: &[u64; N] = s.try_into().expect("N stamps");
        a.iter().fold(u64::MAX, |m, &t| m.min(t))
    }
    let min = match s.len() {
        2 => min_of::<2>(s),
        4 => min_of::<4>(s),
        8 => min_of::<8>(s),
        16 => min_of::<16>(s),
        _ => s.iter().fold(u64::MAX, |m, &t| m.min(t)),
    };
    (min & ((1 << WAY_BITS) - 1)) as usize
}

/// Replace every set's stamps by their ranks (1 = oldest), keeping each set's order, and
/// return the counter to continue from (above every rank).
#[cold]
fn renumber(stamp: &mut [u64], ways: usize) -> u64 {
    let mut order: Vec<usize> = Vec::with_capacity(ways);
    for set in stamp.chunks_mut(ways) {
        order.clear();
        order.extend(0..ways);
        order.sort_unstable_by_key(|&w| set[w]);
        for (rank, &w) in order.iter().enumerate() {
            set[w] = ((rank as u64 + 1) << WAY_BITS) | w as u64;
        }
    }
    (ways as u64) << WAY_BITS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlb::policy::ANY;

    /// The same calls on both representations, with the list's whole order checked.
    fn check_agree<P: Replacement>(ways: usize, list: impl Fn(&P, usize) -> Option<Vec<usize>>) {
        let mut rng = SplitMix64::new(0);
        let mut l = P::new(2, ways).unwrap();
        for w in 0..ways {
            l.on_fill(1, w, ANY);
        }
        l.on_hit(1, 0, ANY);
        l.on_hit(1, 2, ANY);
        assert_eq!(l.victim(1, &mut rng, ANY), 1);
        l.on_invalidate(1, 1);
        l.on_fill(1, 1, ANY);
        assert_eq!(l.victim(1, &mut rng, ANY), 3);
        if let Some(order) = list(&l, 1) {
            let mut expect: Vec<usize> = (3..ways).collect();
            expect.extend([0, 2, 1]);
            assert_eq!(order, expect);
            assert!(list(&l, 0).unwrap().is_empty());
        }
    }

    #[test]
    fn both_representations_agree() {
        for ways in [4, 17, STAMP_MAX_WAYS, STAMP_MAX_WAYS + 1, 200] {
            check_agree::<Stamps>(ways, |_, _| None);
            check_agree::<List>(ways, |l, set| Some(l.order(set)));
        }
    }

    #[test]
    fn renumbering_keeps_the_order() {
        let mut rng = SplitMix64::new(0);
        let mut l = Stamps::new(3, 20).unwrap();
        for set in 0..3 {
            for w in (0..20).rev() {
                l.on_fill(set, w, ANY);
            }
        }
        for w in [7, 3, 11] {
            l.on_hit(2, w, ANY);
        }
        l.now = RENUMBER_AT;
        // Set 2's order: 19 18 .. 0 (without 7 3 11), then 7 3 11; the fill renumbers first.
        l.on_fill(1, 5, ANY);
        assert!(l.now < 1 << 20);
        assert_eq!(l.victim(2, &mut rng, ANY), 19);
        assert_eq!(l.victim(1, &mut rng, ANY), 19);
        for w in (12..20).rev().chain([10, 9, 8, 6, 5, 4, 2, 1, 0]) {
            l.on_hit(2, w, ANY);
        }
        assert_eq!(l.victim(2, &mut rng, ANY), 7);
        l.on_hit(2, 7, ANY);
        assert_eq!(l.victim(2, &mut rng, ANY), 3);
        l.on_hit(2, 3, ANY);
        assert_eq!(l.victim(2, &mut rng, ANY), 11);
    }

    #[test]
    fn oldest_reads_the_way_from_the_minimum() {
        let stamped = |ts: &[u64]| -> Vec<u64> {
            ts.iter()
                .enumerate()
                .map(|(w, &t)| (t << WAY_BITS) | w as u64)
                .collect()
        };
        assert_eq!(oldest(&stamped(&[5, 3, 9])), 1);
        assert_eq!(oldest(&stamped(&[7])), 0);
        assert_eq!(
            oldest(&stamped(&(0..40).map(|i| 100 - i).collect::<Vec<u64>>())),
            39
        );
        let perm: Vec<u64> = (0..64).map(|i| (i * 37 + 5) % 64 + 1).collect();
        assert_eq!(oldest(&stamped(&perm)), 31);
    }
}
