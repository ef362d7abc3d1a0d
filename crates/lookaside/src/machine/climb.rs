//! Uhlig et al.'s dynamic partitioning (1994, section 5.3) on any partitioned structure of a
//! walked machine (`[[tlb]] partition.dynamic`; under `[refill]` the refill model climbs the
//! TLB it refills, pricing intervals by trap cycles). The rule is [`HillClimber`]'s; this
//! stage says what an interval and its cost are here, and moves the structure's point.

use super::Machine;
use crate::tlb::HillClimber;

/// Dynamic partitioning of one structure (`partition.dynamic`, [`HillClimber`]). Its events
/// are the structure's accesses, so that intervals are equal stretches of its reference
/// stream (counting its misses instead would make every interval cost the same), and an
/// interval's cost is the walker's cycles in it (basic and cache penalty) with
/// `[pagetable]`, else the structure's misses in it (nothing else prices them). A decision
/// is taken at the access that ends an interval (before its walk, if it misses). A first
/// level that climbs takes no fast path, so that each of its accesses is counted.
#[derive(Debug)]
pub(super) struct Climb {
    pub climber: HillClimber,
    pub accesses: u64,
    pub misses: u64,
}

/// Whether structure `i` climbs (`climbs` as [`Machine`] keeps them): then it takes no fast
/// path and no repeat of its accesses is skipped, so that each is counted.
pub(super) fn climbs(climbs: &[Option<Box<Climb>>], i: usize) -> bool {
    climbs.get(i).is_some_and(Option::is_some)
}

impl Machine {
    /// Structure `i` was accessed (`missed`: and whether it missed): with dynamic partitioning, count it and, at
    /// the end of an interval, let the climber move its partition point.
    #[inline(always)]
    pub(super) fn count_climb(&mut self, i: usize, missed: bool) {
        if let Some(Some(c)) = self.climbs.get_mut(i) {
            c.accesses += 1;
            c.misses += missed as u64;
            if c.climber.due(c.accesses) {
                self.climb(i);
            }
        }
    }

    /// An interval of structure `i`'s climber ended: price it, decide, and move the point
    /// (forgetting the fast path's last pages, whose recency the move rebuilt).
    #[cold]
    fn climb(&mut self, i: usize) {
        let walked = self.walker.as_deref().map(|w| {
            let s = w.stats();
            s.basic_cycles + s.penalty_cycles
        });
        let Some(Some(c)) = self.climbs.get_mut(i) else {
            return;
        };
        let cost = walked.unwrap_or(c.misses);
        if let Some(lower) = c.climber.decide(c.accesses, cost) {
            self.units[i]
                .tlb
                .repartition(lower)
                .expect("a climber's structure is partitioned, its bounds validated");
            self.forget_pages();
        }
    }

    /// What dynamic partitioning did on structure `i` (as reported), if it has it.
    pub fn dynamic_json(&self, i: usize) -> Option<serde_json::Value> {
        let c = self.climbs.get(i)?.as_deref()?;
        let cost = if self.walker.is_some() {
            "walk cycles"
        } else {
            "misses"
        };
        Some(c.climber.json(cost))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, Kind, Mode};
    use crate::tlb::reference::RefTlb;
    use crate::tlb::{Part, TlbParams, NO_CTX};
    use proptest::prelude::*;

    /// The rule again, plainly: every `period` accesses compare the interval's cost with
    /// the last interval's; a fall beyond the threshold keeps going, a rise turns, else
    /// stay; a move past a bound turns round instead.
    struct PlainClimber {
        period: u64,
        threshold: f64,
        step: i64,
        bounds: (i64, i64),
        dir: i64,
        lower: i64,
        prev: Option<u64>,
        /// Accesses in the interval, and the running cost at its start.
        since: (u64, u64),
        decisions: u64,
    }

    impl PlainClimber {
        /// Count an access, the running cost being `now`; the new lower size when the point
        /// moves.
        fn access(&mut self, now: u64) -> Option<usize> {
            self.since.0 += 1;
            if self.since.0 < self.period {
                return None;
            }
            let cost = now - self.since.1;
            self.since = (0, now);
            self.decisions += 1;
            let go = match self.prev {
                None => true,
                Some(p) if (cost as f64) < p as f64 * (1.0 - self.threshold) => true,
                Some(p) if (cost as f64) > p as f64 * (1.0 + self.threshold) => {
                    self.dir = -self.dir;
                    true
                }
                _ => false,
            };
            self.prev = Some(cost);
            if !go {
                return None;
            }
            let to = (self.lower + self.dir * self.step).clamp(self.bounds.0, self.bounds.1);
            if to == self.lower {
                self.dir = -self.dir;
                return None;
            }
            self.lower = to;
            Some(to as usize)
        }
    }

    /// A machine of one plain first level (`front`) before, or none, and the climbing
    /// structure; each reference of (page, asid, kernel mode). With `walker`, a radix table
    /// walked by hardware, whose walks all cost the same (no paging-structure caches, no
    /// cache penalty), so the model prices an interval by its walks.
    fn run_both(
        (walker, front): (bool, bool),
        ways: usize,
        lower: usize,
        upper: &str,
        kernel_lower: bool,
        (period, threshold, step): (u64, f64, usize),
        refs: &[(u64, u32, bool)],
    ) -> Result<(), TestCaseError> {
        let entries = 16;
        let placement = if kernel_lower {
            "kernel-lower"
        } else {
            "upper"
        };
        let table = "[pagetable]\norganisation='radix'\nrefill='hardware'\ncycles={cache_miss=0}\n";
        let toml = format!(
            "{}{}[[tlb]]\nname='p'\nentries={entries}\nways={ways}\nplacement='{placement}'\npartition={{lower={lower}, lower_policy='fifo', upper_policy='{upper}', dynamic={{period={period}, threshold={threshold}, step={step}}}}}\n",
            if walker { table } else { "" },
            if front { "[[tlb]]\nname='f'\nentries=4\nways='full'\nnext='p'\n" } else { "" },
        );
        // The one price of a walk, from the same machine without a climber.
        let per_walk = if walker {
            let plain = toml.replace(
                &format!(", dynamic={{period={period}, threshold={threshold}, step={step}}}"),
                "",
            );
            let mut m = Machine::assemble(Some(&plain), "plain.toml", &[], &[]).unwrap();
            m.run_batch(&events(refs));
            let s = m.walker().unwrap().stats();
            prop_assert_eq!(s.penalty_cycles, 0);
            prop_assert_eq!(s.basic_cycles % s.walks, 0);
            s.basic_cycles / s.walks
        } else {
            0
        };
        let mut m = Machine::assemble(Some(&toml), "dyn.toml", &[], &[]).unwrap();
        let p = m.units.len() - 1;
        let params: Vec<TlbParams> = m.units.iter().map(|u| u.tlb.params().clone()).collect();
        let mut model: Vec<RefTlb> = params.iter().map(RefTlb::new).collect();
        let mut climber = PlainClimber {
            period,
            threshold,
            step: step as i64,
            bounds: (1, ways as i64 - 1),
            dir: 1,
            lower: lower as i64,
            prev: None,
            since: (0, 0),
            decisions: 0,
        };
        let mut counts = vec![(0u64, 0u64); model.len()];
        let mut walks = 0;
        for &(page, asid, kernel) in refs {
            let part = if kernel && kernel_lower {
                Part::Lower
            } else {
                Part::Upper
            };
            for (s, t) in model.iter_mut().enumerate() {
                let part = if s == p { part } else { Part::Upper };
                let hit = t.access(page, asid as u64 + 1, NO_CTX, part);
                counts[s].0 += 1;
                counts[s].1 += !hit as u64;
                if s == p {
                    // Decided before this access's walk.
                    let now = if walker {
                        walks * per_walk
                    } else {
                        counts[s].1
                    };
                    if let Some(l) = climber.access(now) {
                        prop_assert!(t.repartition(l));
                    }
                    walks += !hit as u64;
                }
                if hit {
                    break;
                }
            }
        }
        for chunk in events(refs).chunks(7) {
            m.run_batch(chunk);
        }
        for (s, &c) in counts.iter().enumerate() {
            let l = m.ledger().total(s, |_, _, _| true);
            prop_assert_eq!((l.accesses, l.misses), c, "structure {}", s);
        }
        let j = m.dynamic_json(p).unwrap();
        prop_assert_eq!(j["decisions"].as_u64(), Some(climber.decisions));
        prop_assert_eq!(j["final_lower"].as_u64(), Some(climber.lower as u64));
        let cost = if walker { "walk cycles" } else { "misses" };
        prop_assert_eq!(j["cost"].as_str(), Some(cost));
        prop_assert_eq!(
            m.units[p].tlb.params().partition.unwrap().lower_ways,
            climber.lower as usize
        );
        Ok(())
    }

    fn events(refs: &[(u64, u32, bool)]) -> Vec<Event> {
        refs.iter()
            .map(|&(page, asid, kernel)| {
                let mode = if kernel { Mode::Kernel } else { Mode::User };
                Event::reference(Kind::Load, page << 12, 4)
                    .with_asid(asid)
                    .with_mode(mode)
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Any partitioned structure, first level or behind one, priced by its misses or by
        /// walk cycles, climbs as the plain model does: the same accesses and misses of
        /// every structure, decisions and final point.
        #[test]
        fn a_walked_structure_climbs_as_the_plain_model(
            walker in any::<bool>(),
            front in any::<bool>(),
            ways in prop::sample::select(vec![4usize, 8, 16]),
            lower_pick in 0usize..16,
            upper in prop::sample::select(vec!["lru", "fifo", "random"]),
            kernel_lower in any::<bool>(),
            period in 1u64..40,
            threshold in prop::sample::select(vec![0.0, 0.05, 0.3]),
            step in 1usize..4,
            refs in prop::collection::vec((0u64..40, 0u32..3, any::<bool>()), 1..600),
        ) {
            let lower = 1 + lower_pick % (ways - 1);
            run_both((walker, front), ways, lower, upper, kernel_lower, (period, threshold, step), &refs)?;
        }
    }
}
