//! Trap types, their counts, and the cost model that turns counts into cycles and seconds.
//!
//! Costs are never accumulated during a run: the simulation counts traps by type (and by
//! nesting depth), and a [`CostTable`] is applied to the counts afterwards, so that one run can
//! be priced under any table — Uhlig's Table VII is exactly Table V's counts re-priced with
//! cheaper L1K and L2 handlers. Every trap is charged its own cost, nested ones included
//! (the additive convention Table VI is built with).
//!
//! The shipped tables are TOML files in the crate's `data/refill-costs/` (Table III's
//! columns for Ultrix, OSF/1 and Mach 3.0 at 60 ns per cycle, and the Mach 3.0 variants
//! with the extra miss vectors Uhlig proposes), compiled into the engine.

use serde::Deserialize;

use crate::config::TrapCycles;

/// A TLB trap type, in the row order of Uhlig et al.'s Table III.
#[repr(usize)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Trap {
    /// A miss on a level-1 user PTE (a kuseg page), taken at the uTLB vector.
    L1U = 0,
    /// A miss on a level-1 kernel PTE (a page of mapped kernel data).
    L1K = 1,
    /// A miss on a level-2 PTE (a page of a task's L1 page table); after an L1U miss, when
    /// the uTLB handler's PTE load misses.
    L2 = 2,
    /// A miss on a level-3 PTE (a page of the kernel page table); after an L2 or L1K miss.
    L3 = 3,
    /// A store to a page whose TLB entry is clean (first write, copy-on-write).
    Modify = 4,
    /// A reference to a page whose PTE is invalid (a page fault).
    Invalid = 5,
}

/// Number of trap types.
pub const TRAPS: usize = 6;
/// Every trap type, in Table III order.
pub const ALL_TRAPS: [Trap; TRAPS] = [
    Trap::L1U,
    Trap::L1K,
    Trap::L2,
    Trap::L3,
    Trap::Modify,
    Trap::Invalid,
];
/// Nesting depths counted: 0 = taken by the referencing instruction, 1 = inside a miss
/// handler, 2 = inside a handler that is itself nested (L1U → L2 → L3 is the deepest cascade).
pub const DEPTHS: usize = 3;

impl Trap {
    /// The name used in the paper, configs and reports (`L1U`, …, `Modify`, `Invalid`).
    pub fn name(self) -> &'static str {
        match self {
            Trap::L1U => "L1U",
            Trap::L1K => "L1K",
            Trap::L2 => "L2",
            Trap::L3 => "L3",
            Trap::Modify => "Modify",
            Trap::Invalid => "Invalid",
        }
    }
}

/// Traps counted by type and nesting depth.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrapCounts {
    /// `by_depth[d][t]`: traps of type `t` taken at depth `d`.
    pub by_depth: [[u64; TRAPS]; DEPTHS],
    /// Of those, traps served by the software TLB's fast path, by type.
    pub fast: [u64; TRAPS],
}

impl TrapCounts {
    /// Count one trap.
    #[inline]
    pub fn add(&mut self, t: Trap, depth: usize) {
        self.by_depth[depth.min(DEPTHS - 1)][t as usize] += 1;
    }

    /// Traps of type `t` at every depth.
    pub fn of(&self, t: Trap) -> u64 {
        self.by_depth.iter().map(|d| d[t as usize]).sum()
    }

    /// Traps of type `t` taken inside another trap's handler.
    pub fn nested(&self, t: Trap) -> u64 {
        self.by_depth[1..].iter().map(|d| d[t as usize]).sum()
    }

    /// Totals per type, in Table III order.
    pub fn totals(&self) -> [u64; TRAPS] {
        ALL_TRAPS.map(|t| self.of(t))
    }

    /// Every trap.
    pub fn all(&self) -> u64 {
        self.totals().iter().sum()
    }
}

/// Cycles per trap type and the cycle time: a cost model.
#[derive(Clone, Debug, PartialEq)]
pub struct CostTable {
    pub name: String,
    pub description: String,
    /// Nanoseconds per cycle.
    pub cycle_ns: f64,
    /// Cycles per trap, in Table III order; `None` where the table has no cost (Ultrix L3).
    pub cycles: [Option<u32>; TRAPS],
    /// A kernel miss served by the software TLB's fast path (Bala et al. assume about
    /// 20-40 cycles; default 40, like Uhlig's dedicated L2 vector).
    pub stlb_hit: u32,
    /// Lookup-and-fill overhead added to a kernel miss the software TLB did not hold
    /// (default 10).
    pub stlb_miss: u32,
    /// One IPC-path prefetch: a probe, and for an absent entry a PTE load and a write
    /// (default 10).
    pub prefetch: u32,
    /// Counting one L1U miss for dynamic partitioning (Uhlig: 4-10 cycles for a counter in
    /// memory; default 6).
    pub l1u_count: u32,
    /// A micro-TLB miss the TLB behind serves without a trap (Chen: 3).
    pub micro: u32,
}

/// Default cycles of the Bala extensions, when a table does not give them.
pub const DEFAULT_STLB_HIT: u32 = 40;
pub const DEFAULT_STLB_MISS: u32 = 10;
pub const DEFAULT_PREFETCH: u32 = 10;
pub const DEFAULT_L1U_COUNT: u32 = 6;
/// Default cycles of a micro-TLB refill from the TLB (Chen's thesis, Section 7.1).
pub const DEFAULT_MICRO: u32 = 3;

/// Everything a run did that the cost model prices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Traps by type (Table III order).
    pub traps: [u64; TRAPS],
    /// Of those, traps served by the software TLB's fast path.
    pub stlb_hits: [u64; TRAPS],
    /// Kernel misses the software TLB did not hold.
    pub stlb_misses: u64,
    /// IPC-path prefetch probes.
    pub prefetches: u64,
    /// L1U misses counted for dynamic partitioning.
    pub l1u_counted: u64,
    /// Micro-TLB misses the TLB served without a trap.
    pub micro_refills: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CostFile {
    name: String,
    description: String,
    cycle_ns: f64,
    cycles: TrapCycles,
}

/// The costs (cycles, seconds) of a set of counts under a table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Service {
    /// Cycles per type; `None` where the table has no cost for a type that was counted.
    pub cycles: [Option<u64>; TRAPS],
    /// Software-TLB misses × `stlb_miss`.
    pub stlb_cycles: u64,
    /// Prefetch probes × `prefetch`.
    pub prefetch_cycles: u64,
    /// Counted L1U misses × `l1u_count`.
    pub count_cycles: u64,
    /// Micro-TLB refills × `micro`.
    pub micro_cycles: u64,
    /// Sum of the priced types, the software-TLB overhead, the prefetches, the counting and
    /// the micro-TLB refills.
    pub total_cycles: u64,
    pub cycle_ns: f64,
}

impl Service {
    /// Seconds per type.
    pub fn seconds(&self) -> [Option<f64>; TRAPS] {
        self.cycles
            .map(|c| c.map(|c| c as f64 * self.cycle_ns * 1e-9))
    }

    pub fn total_seconds(&self) -> f64 {
        self.total_cycles as f64 * self.cycle_ns * 1e-9
    }
}

impl CostTable {
    /// The shipped tables: (name, TOML text).
    pub const PRESETS: &'static [(&'static str, &'static str)] = &[
        (
            "ultrix",
            include_str!("../../data/refill-costs/ultrix.toml"),
        ),
        ("osf1", include_str!("../../data/refill-costs/osf1.toml")),
        ("mach3", include_str!("../../data/refill-costs/mach3.toml")),
        (
            "mach3-l1k-utlb",
            include_str!("../../data/refill-costs/mach3-l1k-utlb.toml"),
        ),
        (
            "mach3-l2-vector",
            include_str!("../../data/refill-costs/mach3-l2-vector.toml"),
        ),
        (
            "mach3-new-vectors",
            include_str!("../../data/refill-costs/mach3-new-vectors.toml"),
        ),
    ];

    /// Names of the shipped tables.
    pub fn preset_names() -> Vec<&'static str> {
        Self::PRESETS.iter().map(|p| p.0).collect()
    }

    /// A shipped table by name; the error lists the names there are.
    pub fn preset(name: &str) -> Result<CostTable, String> {
        let (_, text) = Self::PRESETS.iter().find(|p| p.0 == name).ok_or_else(|| {
            format!(
                "no cost table named '{name}' (have: {})",
                Self::preset_names().join(", ")
            )
        })?;
        Self::from_toml(text).map_err(|e| format!("cost table '{name}': {e}"))
    }

    /// A table from TOML text (`name`, `description`, `cycle_ns`, `[cycles]` with `L1U` …
    /// `Invalid`).
    pub fn from_toml(text: &str) -> Result<CostTable, String> {
        let f: CostFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if !(f.cycle_ns.is_finite() && f.cycle_ns > 0.0) {
            return Err("cycle_ns: must be a positive number".into());
        }
        Ok(CostTable {
            name: f.name,
            description: f.description,
            cycle_ns: f.cycle_ns,
            cycles: f.cycles.to_array(),
            stlb_hit: f.cycles.stlb_hit.unwrap_or(DEFAULT_STLB_HIT),
            stlb_miss: f.cycles.stlb_miss.unwrap_or(DEFAULT_STLB_MISS),
            prefetch: f.cycles.prefetch.unwrap_or(DEFAULT_PREFETCH),
            l1u_count: f.cycles.l1u_count.unwrap_or(DEFAULT_L1U_COUNT),
            micro: f.cycles.micro.unwrap_or(DEFAULT_MICRO),
        })
    }

    /// This table with the costs `overrides` gives replacing its own.
    pub fn with_overrides(mut self, overrides: &TrapCycles) -> CostTable {
        for (c, o) in self.cycles.iter_mut().zip(overrides.to_array()) {
            if o.is_some() {
                *c = o;
            }
        }
        self.stlb_hit = overrides.stlb_hit.unwrap_or(self.stlb_hit);
        self.stlb_miss = overrides.stlb_miss.unwrap_or(self.stlb_miss);
        self.prefetch = overrides.prefetch.unwrap_or(self.prefetch);
        self.l1u_count = overrides.l1u_count.unwrap_or(self.l1u_count);
        self.micro = overrides.micro.unwrap_or(self.micro);
        self
    }

    /// Cycles of trap type `t`, if the table has them.
    pub fn cycles_of(&self, t: Trap) -> Option<u32> {
        self.cycles[t as usize]
    }

    /// Price per-type counts (Table III order). A type with a count but no cost is `None`
    /// and left out of the total; a type with no count costs 0.
    pub fn apply(&self, counts: &[u64; TRAPS]) -> Service {
        self.price(&Work {
            traps: *counts,
            ..Work::default()
        })
    }

    /// Price a run's work: each trap at its type's cost, except those the software TLB
    /// served (at `stlb_hit`); plus the software-TLB misses, the prefetches, the counting for
    /// dynamic partitioning and the micro-TLB refills.
    pub fn price(&self, w: &Work) -> Service {
        let cycles: [Option<u64>; TRAPS] = std::array::from_fn(|i| {
            let fast = w.stlb_hits[i].min(w.traps[i]);
            let slow = w.traps[i] - fast;
            match (slow, self.cycles[i]) {
                (0, _) => Some(0),
                (n, Some(c)) => Some(n * c as u64),
                (_, None) => None,
            }
            .map(|c| c + fast * self.stlb_hit as u64)
        });
        let total: u64 = cycles.iter().flatten().sum();
        let stlb_cycles = w.stlb_misses * self.stlb_miss as u64;
        let prefetch_cycles = w.prefetches * self.prefetch as u64;
        let count_cycles = w.l1u_counted * self.l1u_count as u64;
        let micro_cycles = w.micro_refills * self.micro as u64;
        Service {
            cycles,
            stlb_cycles,
            prefetch_cycles,
            count_cycles,
            micro_cycles,
            total_cycles: total + stlb_cycles + prefetch_cycles + count_cycles + micro_cycles,
            cycle_ns: self.cycle_ns,
        }
    }

    /// Picoseconds per cycle, as an integer (for exact arithmetic on published tables).
    pub fn cycle_ps(&self) -> u64 {
        (self.cycle_ns * 1000.0).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_tables_parse_and_carry_table_iii() {
        for name in CostTable::preset_names() {
            let t = CostTable::preset(name).unwrap();
            assert_eq!(t.name, name);
            assert_eq!(t.cycle_ns, 60.0);
        }
        let m = CostTable::preset("mach3").unwrap();
        assert_eq!(
            m.cycles,
            [
                Some(20),
                Some(294),
                Some(407),
                Some(286),
                Some(499),
                Some(267)
            ]
        );
        assert_eq!(
            CostTable::preset("ultrix").unwrap().cycles_of(Trap::L3),
            None
        );
        let fast = CostTable::preset("mach3-new-vectors").unwrap();
        assert_eq!(
            (fast.cycles_of(Trap::L1K), fast.cycles_of(Trap::L2)),
            (Some(20), Some(40))
        );
        assert!(CostTable::preset("vax")
            .unwrap_err()
            .contains("have: ultrix, osf1, mach3"));
    }

    #[test]
    fn costs_apply_after_the_run() {
        let mut c = TrapCounts::default();
        c.add(Trap::L1U, 0);
        c.add(Trap::L2, 1);
        c.add(Trap::L3, 2);
        c.add(Trap::L3, 7);
        assert_eq!(c.totals(), [1, 0, 1, 2, 0, 0]);
        assert_eq!(
            (c.nested(Trap::L3), c.nested(Trap::L1U), c.all()),
            (2, 0, 4)
        );
        let s = CostTable::preset("mach3").unwrap().apply(&c.totals());
        assert_eq!(s.total_cycles, 20 + 407 + 2 * 286);
        assert!((s.total_seconds() - 999.0 * 60e-9).abs() < 1e-15);
        // Ultrix has no L3 cost: the cell is unpriced, not zero.
        let u = CostTable::preset("ultrix").unwrap().apply(&c.totals());
        assert_eq!(u.cycles[Trap::L3 as usize], None);
        assert_eq!(u.total_cycles, 16 + 494);
        let over = CostTable::preset("mach3")
            .unwrap()
            .with_overrides(&TrapCycles {
                l2: Some(40),
                stlb_hit: Some(30),
                ..TrapCycles::default()
            });
        assert_eq!((over.stlb_hit, over.stlb_miss, over.prefetch), (30, 10, 10));
        // Two L1K traps, one served by the software TLB, one missing in it; three prefetches.
        let w = Work {
            traps: [0, 2, 0, 0, 0, 0],
            stlb_hits: [0, 1, 0, 0, 0, 0],
            stlb_misses: 1,
            prefetches: 3,
            l1u_counted: 0,
            micro_refills: 2,
        };
        let s = over.price(&w);
        assert_eq!(s.cycles[1], Some(294 + 30));
        assert_eq!(
            (s.stlb_cycles, s.prefetch_cycles, s.micro_cycles),
            (10, 30, 6)
        );
        assert_eq!(s.total_cycles, 294 + 30 + 10 + 30 + 6);
        assert_eq!(over.cycles_of(Trap::L2), Some(40));
        assert_eq!(over.cycles_of(Trap::L1K), Some(294));
    }
}
