//! What the VM primitives cost on a machine with a virtually addressed cache, in
//! microseconds, as a function of the lines the simulated cache actually holds.
//!
//! The shipped presets are TOML files in the crate's `data/vac-timing/` (the HP 9000/834 of
//! Inouye et al., calibrated so that their Tables 1 and 2 come out within a few per cent),
//! compiled into the engine. A cost is never a constant per primitive: a flush is priced
//! from the lines it visited and the dirty lines it wrote back, a copy from the misses and
//! dirty victims its accesses met, so the same primitive costs what the cache state makes it
//! cost.

use serde::{Deserialize, Serialize};

use super::Lines;

/// One pdcache()-style flush call over a range.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FlushCost {
    pub base_us: f64,
    /// Per line address visited, cached or not.
    pub line_us: f64,
    /// Extra per line found in the cache.
    pub present_line_us: f64,
    /// Per dirty line written back, beyond the first `overlap_lines` of the call.
    pub writeback_us: f64,
    pub overlap_lines: u64,
}

/// A fixed cost plus one per line.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LinearCost {
    pub base_us: f64,
    pub line_us: f64,
}

/// Misses.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryCost {
    /// Per line filled on a miss.
    pub fill_us: f64,
    /// Per dirty victim written back by a fill.
    pub writeback_us: f64,
}

/// Page-table and fault work that does not depend on the cache.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VmCost {
    pub map_us: f64,
    pub unmap_us: f64,
    pub protect_us: f64,
    pub tlb_purge_us: f64,
    pub pseudo_fault_us: f64,
    pub page_alloc_us: f64,
}

/// Message passing.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IpcCost {
    /// A message with no data.
    pub null_us: f64,
    /// Per page of data, common to every IPC design.
    pub page_us: f64,
}

/// A timing preset.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    pub name: String,
    pub description: String,
    pub flush: FlushCost,
    pub purge: LinearCost,
    pub copy: LinearCost,
    pub zero: LinearCost,
    pub memory: MemoryCost,
    pub vm: VmCost,
    pub ipc: IpcCost,
}

impl Timing {
    /// The shipped presets: (name, TOML text).
    pub const PRESETS: &'static [(&'static str, &'static str)] = &[(
        "hp9000-834",
        include_str!("../../../data/vac-timing/hp9000-834.toml"),
    )];

    pub fn preset_names() -> Vec<&'static str> {
        Self::PRESETS.iter().map(|p| p.0).collect()
    }

    /// A shipped preset by name; the error lists the names there are.
    pub fn preset(name: &str) -> Result<Timing, String> {
        let (_, text) = Self::PRESETS.iter().find(|p| p.0 == name).ok_or_else(|| {
            format!(
                "no VAC timing preset named '{name}' (have: {})",
                Self::preset_names().join(", ")
            )
        })?;
        Self::from_toml(text).map_err(|e| format!("VAC timing '{name}': {e}"))
    }

    /// A preset from TOML text; the error names the field.
    pub fn from_toml(text: &str) -> Result<Timing, String> {
        let t: Timing = toml::from_str(text).map_err(|e| e.to_string())?;
        t.check()?;
        Ok(t)
    }

    /// Every cost must be a finite, non-negative number.
    pub fn check(&self) -> Result<(), String> {
        let fields = [
            ("flush.base_us", self.flush.base_us),
            ("flush.line_us", self.flush.line_us),
            ("flush.present_line_us", self.flush.present_line_us),
            ("flush.writeback_us", self.flush.writeback_us),
            ("purge.base_us", self.purge.base_us),
            ("purge.line_us", self.purge.line_us),
            ("copy.base_us", self.copy.base_us),
            ("copy.line_us", self.copy.line_us),
            ("zero.base_us", self.zero.base_us),
            ("zero.line_us", self.zero.line_us),
            ("memory.fill_us", self.memory.fill_us),
            ("memory.writeback_us", self.memory.writeback_us),
            ("vm.map_us", self.vm.map_us),
            ("vm.unmap_us", self.vm.unmap_us),
            ("vm.protect_us", self.vm.protect_us),
            ("vm.tlb_purge_us", self.vm.tlb_purge_us),
            ("vm.pseudo_fault_us", self.vm.pseudo_fault_us),
            ("vm.page_alloc_us", self.vm.page_alloc_us),
            ("ipc.null_us", self.ipc.null_us),
            ("ipc.page_us", self.ipc.page_us),
        ];
        for (name, v) in fields {
            if !(v.is_finite() && v >= 0.0) {
                return Err(format!("{name}: {v} is not a non-negative number"));
            }
        }
        Ok(())
    }

    /// One flush call that visited, found and wrote back `l`.
    pub fn flush_us(&self, l: Lines) -> f64 {
        let f = &self.flush;
        f.base_us
            + f.line_us * l.visited as f64
            + f.present_line_us * l.present as f64
            + f.writeback_us * l.dirty.saturating_sub(f.overlap_lines) as f64
    }

    /// One purge call: the lines visited only (purging does not depend on the cache state).
    pub fn purge_us(&self, l: Lines) -> f64 {
        self.purge.base_us + self.purge.line_us * l.visited as f64
    }

    /// What `misses` fills and `writebacks` dirty victims add to whatever caused them.
    pub fn miss_us(&self, misses: u64, writebacks: u64) -> f64 {
        self.memory.fill_us * misses as f64 + self.memory.writeback_us * writebacks as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_presets_parse() {
        for name in Timing::preset_names() {
            Timing::preset(name).unwrap();
        }
        assert!(Timing::preset("nope").unwrap_err().contains("hp9000-834"));
    }

    #[test]
    fn errors_name_the_field() {
        let text = Timing::PRESETS[0]
            .1
            .replace("fill_us = 0.407", "fill_us = -1.0");
        let e = Timing::from_toml(&text).unwrap_err();
        assert!(e.contains("memory.fill_us"), "{e}");
        let text = Timing::PRESETS[0].1.replace("fill_us", "fil_us");
        let e = Timing::from_toml(&text).unwrap_err();
        assert!(e.contains("fil_us"), "{e}");
    }
}
