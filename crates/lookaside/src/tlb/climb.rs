//! Uhlig et al.'s dynamic partitioning (1994, section 5.3): a hill climber that moves a
//! partitioned TLB's lower/upper point while the program runs.
//!
//! The climber knows nothing of what it optimises: its owner counts *events* (the refill
//! model: traps; a walked machine: misses of the partitioned structure) and a running *cost*
//! (trap cycles; walk cycles, or misses where nothing prices a walk), and asks
//! [`HillClimber::due`] at each event. When an interval of `period` events has passed,
//! [`HillClimber::decide`] compares its cost with the interval before: a fall by more than
//! `threshold` (relative) keeps the point moving the same way, a rise reverses it, anything
//! else leaves it; at a bound it turns round for next time. The owner then moves its TLB's
//! point with [`super::Tlb::repartition`]. One home for the rule, so the software-refilled
//! R2000 of the paper and any partitioned structure of a hardware-walked hierarchy climb
//! alike.

use serde_json::{json, Value};

/// The climber's parameters (see [`crate::config::DynamicConfig`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DynamicParams {
    /// Events between decisions.
    pub period: u64,
    /// Relative change of an interval's cost that counts as significant.
    pub threshold: f64,
    pub step: usize,
    pub min_lower: usize,
    /// `None`: ways - 1.
    pub max_lower: Option<usize>,
}

impl From<&crate::config::DynamicConfig> for DynamicParams {
    fn from(d: &crate::config::DynamicConfig) -> Self {
        DynamicParams {
            period: d.period,
            threshold: d.threshold,
            step: d.step,
            min_lower: d.min_lower,
            max_lower: d.max_lower,
        }
    }
}

/// What dynamic partitioning did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DynamicWork {
    pub decisions: u64,
    pub moves_up: u64,
    pub moves_down: u64,
    /// Lowest and highest lower-partition sizes used.
    pub min_seen: usize,
    pub max_seen: usize,
}

/// The hill climber's state.
#[derive(Clone, Debug)]
pub struct HillClimber {
    p: DynamicParams,
    max: usize,
    /// +1 (grow the lower partition) or -1.
    dir: i64,
    /// Event count at which the next decision is due.
    next: u64,
    /// The running cost at the start of the interval, and the last interval's cost.
    start_cost: u64,
    prev_cost: Option<u64>,
    lower: usize,
    work: DynamicWork,
}

impl HillClimber {
    /// A climber for a TLB of `ways` ways (slots per set) whose lower partition starts at
    /// `lower` ways. The error is `field: message`, the field relative to the climber's
    /// config section (`period`, `threshold`, `min_lower`).
    pub fn new(p: DynamicParams, ways: usize, lower: usize) -> Result<HillClimber, String> {
        let max = p.max_lower.unwrap_or(ways.saturating_sub(1));
        if p.period == 0 || p.step == 0 {
            return Err("period: period and step must be at least 1".into());
        }
        if !(p.threshold.is_finite() && p.threshold >= 0.0) {
            return Err("threshold: must be a number >= 0".into());
        }
        if p.min_lower == 0 || p.min_lower > max || max >= ways {
            return Err(format!(
                "min_lower: the bounds {}..={max} must lie in 1..={}",
                p.min_lower,
                ways.saturating_sub(1)
            ));
        }
        if lower < p.min_lower || lower > max {
            return Err(format!(
                "min_lower: the starting lower partition ({lower}) is outside {}..={max}",
                p.min_lower
            ));
        }
        Ok(HillClimber {
            p,
            max,
            dir: 1,
            next: p.period,
            start_cost: 0,
            prev_cost: None,
            lower,
            work: DynamicWork {
                min_seen: lower,
                max_seen: lower,
                ..DynamicWork::default()
            },
        })
    }

    /// Whether `events` (counted from the start) end an interval.
    #[inline(always)]
    pub fn due(&self, events: u64) -> bool {
        events >= self.next
    }

    /// An interval ended at `events` with the running cost at `cost`: decide, and return the
    /// lower partition's new size if the point moves.
    #[cold]
    pub fn decide(&mut self, events: u64, cost: u64) -> Option<usize> {
        let interval = cost - self.start_cost;
        let th = self.p.threshold;
        let move_dir = match self.prev_cost {
            // The first interval: probe in the starting direction.
            None => Some(self.dir),
            Some(prev) if (interval as f64) < prev as f64 * (1.0 - th) => Some(self.dir),
            Some(prev) if interval as f64 > prev as f64 * (1.0 + th) => {
                self.dir = -self.dir;
                Some(self.dir)
            }
            Some(_) => None,
        };
        self.prev_cost = Some(interval);
        self.start_cost = cost;
        self.next = events + self.p.period;
        self.work.decisions += 1;
        let d = move_dir?;
        let lower = self.lower;
        let target = (lower as i64 + d * self.p.step as i64)
            .clamp(self.p.min_lower as i64, self.max as i64) as usize;
        if target == lower {
            // At a bound: turn round for next time.
            self.dir = -self.dir;
            return None;
        }
        if target > lower {
            self.work.moves_up += 1;
        } else {
            self.work.moves_down += 1;
        }
        self.work.min_seen = self.work.min_seen.min(target);
        self.work.max_seen = self.work.max_seen.max(target);
        self.lower = target;
        Some(target)
    }

    /// What it did.
    pub fn work(&self) -> &DynamicWork {
        &self.work
    }

    /// The lower partition's size now.
    pub fn lower(&self) -> usize {
        self.lower
    }

    /// The parameters and what was done, as reported (`cost` says what an interval's cost
    /// counts, e.g. "trap cycles").
    pub fn json(&self, cost: &str) -> Value {
        let w = &self.work;
        json!({
            "period": self.p.period,
            "threshold": self.p.threshold,
            "step": self.p.step,
            "cost": cost,
            "decisions": w.decisions,
            "moves_up": w.moves_up,
            "moves_down": w.moves_down,
            "min_lower": w.min_seen,
            "max_lower": w.max_seen,
            "final_lower": self.lower,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(period: u64, step: usize, min: usize, max: Option<usize>) -> DynamicParams {
        DynamicParams {
            period,
            threshold: 0.1,
            step,
            min_lower: min,
            max_lower: max,
        }
    }

    /// The rule, interval by interval: probe up, keep going while the cost falls, reverse on
    /// a rise, stay on a change within the threshold, turn round at a bound.
    #[test]
    fn the_point_follows_the_cost_downhill() {
        let mut c = HillClimber::new(params(10, 2, 2, Some(8)), 16, 4).unwrap();
        assert!(!c.due(9) && c.due(10));
        // First interval (cost 100): probe up.
        assert_eq!(c.decide(10, 100), Some(6));
        // 80 < 90: keep going up.
        assert_eq!(c.decide(20, 180), Some(8));
        // 85 is within 10 % of 80: stay.
        assert_eq!(c.decide(30, 265), None);
        // 100 > 93.5: reverse, down.
        assert_eq!(c.decide(40, 365), Some(6));
        // 50 < 90: keep going down, to 4, 2, then the bound turns it round.
        assert_eq!(c.decide(50, 415), Some(4));
        assert_eq!(c.decide(60, 440), Some(2));
        assert_eq!(c.decide(70, 450), None);
        // Turned round at the bound: the next fall moves it up.
        assert_eq!(c.decide(80, 451), Some(4));
        let w = *c.work();
        assert_eq!((w.decisions, w.moves_up, w.moves_down), (8, 3, 3));
        assert_eq!((w.min_seen, w.max_seen, c.lower()), (2, 8, 4));
        assert!(!c.due(89) && c.due(90));
    }

    #[test]
    fn bad_bounds_are_refused_by_field() {
        let e = |p, lower| HillClimber::new(p, 8, lower).unwrap_err();
        assert!(e(params(0, 1, 1, None), 4).starts_with("period"));
        assert!(e(params(1, 0, 1, None), 4).starts_with("period"));
        assert!(e(params(1, 1, 0, None), 4).starts_with("min_lower"));
        assert!(e(params(1, 1, 1, Some(8)), 4).starts_with("min_lower"));
        assert!(e(params(1, 1, 5, None), 4).starts_with("min_lower: the starting"));
        let mut p = params(1, 1, 1, None);
        p.threshold = f64::NAN;
        assert!(e(p, 4).starts_with("threshold"));
    }
}
