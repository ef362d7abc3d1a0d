//! FIFO: the victim is the valid way filled longest ago; hits do not change the order.
//!
//! An insertion-order list per set ([`super::list::Lists`]), so that invalidating an entry
//! simply drops it from the order — a round-robin pointer would be cheaper but would stop
//! matching "oldest insertion first" as soon as entries are invalidated.

use super::list::Lists;
use super::{AccessInfo, Replacement, SplitMix64};

#[derive(Clone)]
pub(crate) struct Fifo {
    order: Lists,
}

impl Replacement for Fifo {
    fn new(sets: usize, ways: usize) -> Result<Self, String> {
        Ok(Fifo {
            order: Lists::new(sets, ways)?,
        })
    }

    #[inline(always)]
    fn on_hit(&mut self, _set: usize, _way: usize, _at: AccessInfo) {}

    #[inline(always)]
    fn on_fill(&mut self, set: usize, way: usize, _at: AccessInfo) {
        self.order.move_to_back(set, way);
    }

    #[inline]
    fn on_invalidate(&mut self, set: usize, way: usize) {
        self.order.unlink(set, way);
    }

    #[inline]
    fn victim(&mut self, set: usize, _rng: &mut SplitMix64, _at: AccessInfo) -> usize {
        self.order.front(set).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlb::policy::ANY;

    #[test]
    fn hits_do_not_reorder() {
        let mut f = Fifo::new(1, 3).unwrap();
        for w in 0..3 {
            f.on_fill(0, w, ANY);
        }
        f.on_hit(0, 0, ANY);
        assert_eq!(f.order.order(0), vec![0, 1, 2]);
        assert_eq!(f.victim(0, &mut SplitMix64::new(0), ANY), 0);
    }
}
