//! The ledger: what happened, as counts. Costs are never accumulated here — a report multiplies
//! counts by a cost table afterwards, so the table can be swapped after the run.
//!
//! Counts are kept per address space, per structure, per mode and per reference kind, in one
//! flat array so the hot path is a single indexed add. Address spaces get dense indices in
//! order of first appearance; the map from asid to index is consulted only when the running
//! address space changes, never per reference.

use std::collections::HashMap;

use crate::event::{Kind, Mode, ALL_KINDS, REF_KINDS};

/// Accesses and misses of one cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counter {
    pub accesses: u64,
    pub misses: u64,
}

impl Counter {
    pub fn hits(&self) -> u64 {
        self.accesses - self.misses
    }

    pub fn add(&mut self, o: &Counter) {
        self.accesses += o.accesses;
        self.misses += o.misses;
    }
}

const MODES: usize = 2;

/// Counts of one run.
#[derive(Clone, Debug)]
pub struct Ledger {
    /// Structure names; index `structures.len()` is the pseudo-structure `walk` (misses that
    /// left the whole hierarchy and went to the page table).
    structures: Vec<String>,
    /// Dense address-space index → asid.
    asids: Vec<u32>,
    asid_index: HashMap<u32, usize>,
    cur: usize,
    /// `cur * stride` and `cur * MODES * REF_KINDS`: offsets of the running address space.
    cell_base: usize,
    ref_base: usize,
    /// Cells per address space: (structures + 1) × modes × kinds.
    stride: usize,
    /// Translation counters, `asids.len() * stride` cells.
    cells: Vec<Counter>,
    /// References per address space × mode × kind (`accesses` only).
    refs: Vec<u64>,
    /// Control events by kind (references are counted in `refs`).
    pub control: [u64; ALL_KINDS.len()],
    /// Translations beyond the first page of a reference (`straddle = "split"`): one for a
    /// reference crossing into a second page, one per page after the first for an access
    /// spanning several.
    pub straddles: u64,
    /// References whose last byte would lie past 2^64: simulated up to the top of the
    /// address space only.
    pub wrapped: u64,
    /// References to addresses the page map marks `unmapped` (not translated).
    pub unmapped: u64,
    /// Per cell of `cells`, its misses by class ([`crate::threec::CLASSES`]): allocated only
    /// when some structure classifies its misses ([`Ledger::classify_misses`]).
    classes: Vec<[u64; 3]>,
}

impl Ledger {
    pub fn new(structures: Vec<String>) -> Ledger {
        let stride = (structures.len() + 1) * MODES * REF_KINDS;
        let mut l = Ledger {
            structures,
            asids: Vec::new(),
            asid_index: HashMap::new(),
            cur: 0,
            cell_base: 0,
            ref_base: 0,
            stride,
            cells: Vec::new(),
            refs: Vec::new(),
            control: [0; ALL_KINDS.len()],
            straddles: 0,
            wrapped: 0,
            unmapped: 0,
            classes: Vec::new(),
        };
        l.set_asid(0);
        l
    }

    /// Make `asid` the address space that following counts belong to.
    #[inline]
    pub fn set_asid(&mut self, asid: u32) {
        let i = match self.asid_index.get(&asid) {
            Some(&i) => i,
            None => {
                let i = self.asids.len();
                self.asids.push(asid);
                self.asid_index.insert(asid, i);
                self.cells
                    .resize(self.cells.len() + self.stride, Counter::default());
                self.refs.resize(self.refs.len() + MODES * REF_KINDS, 0);
                if !self.classes.is_empty() {
                    self.classes.resize(self.cells.len(), [0; 3]);
                }
                i
            }
        };
        self.cur = i;
        self.cell_base = i * self.stride;
        self.ref_base = i * MODES * REF_KINDS;
    }

    /// Where the cell of structure `s`, `mode` and `kind` lies within an address space's.
    #[inline(always)]
    fn offset(s: usize, mode: Mode, kind: Kind) -> usize {
        (s * MODES + mode as usize) * REF_KINDS + kind as usize
    }

    /// The index of that cell under the running address space.
    #[inline(always)]
    fn here(&self, s: usize, mode: Mode, kind: Kind) -> usize {
        self.cell_base + Self::offset(s, mode, kind)
    }

    /// Count `n` references of the stream at once.
    #[inline]
    pub fn add_references(&mut self, mode: Mode, kind: Kind, n: u64) {
        self.refs[self.ref_base + mode as usize * REF_KINDS + kind as usize] += n;
    }

    /// Count `n` hits in structure `s` at once.
    #[inline]
    pub fn add_hits(&mut self, s: usize, mode: Mode, kind: Kind, n: u64) {
        let i = self.here(s, mode, kind);
        self.cells[i].accesses += n;
    }

    /// Count `n` misses (accesses that missed) in structure `s`, or the walk, at once.
    #[inline]
    pub fn add_misses(&mut self, s: usize, mode: Mode, kind: Kind, n: u64) {
        let i = self.here(s, mode, kind);
        let c = &mut self.cells[i];
        c.accesses += n;
        c.misses += n;
    }

    /// Events counted so far, references and control events: two events of the stream are
    /// neighbours when this grew by one between them.
    pub fn events(&self) -> u64 {
        self.refs.iter().sum::<u64>() + self.control.iter().sum::<u64>()
    }

    /// Count one control event.
    #[inline]
    pub fn control(&mut self, kind: Kind) {
        self.control[kind as usize] += 1;
    }

    /// The counts of structure `s` under the running address space, `mode` and `kind`.
    #[inline]
    pub fn current(&self, s: usize, mode: Mode, kind: Kind) -> Counter {
        self.cells[self.here(s, mode, kind)]
    }

    /// Count one access to structure `s` (or the walk, `s == structures.len()`).
    #[inline(always)]
    pub fn access(&mut self, s: usize, mode: Mode, kind: Kind, miss: bool) {
        let i = self.here(s, mode, kind);
        let c = &mut self.cells[i];
        c.accesses += 1;
        c.misses += miss as u64;
    }

    /// Keep the classes of misses ([`Ledger::classify`]) from now on.
    pub fn classify_misses(&mut self) {
        if self.classes.is_empty() {
            self.classes = vec![[0; 3]; self.cells.len()];
        }
    }

    /// Whether the ledger keeps classes of misses.
    pub fn classifies(&self) -> bool {
        !self.classes.is_empty()
    }

    /// Count a miss of structure `s` as of `class` (after [`Ledger::classify_misses`]).
    #[inline]
    pub fn classify(&mut self, s: usize, mode: Mode, kind: Kind, class: crate::threec::Class) {
        let i = self.here(s, mode, kind);
        if let Some(c) = self.classes.get_mut(i) {
            c[class as usize] += 1;
        }
    }

    /// Count `n[c]` misses of structure `s` as of class `c` (after
    /// [`Ledger::classify_misses`]; nothing without, where every `n` is zero).
    pub fn add_classes(&mut self, s: usize, mode: Mode, kind: Kind, n: [u64; 3]) {
        let i = self.here(s, mode, kind);
        if let Some(c) = self.classes.get_mut(i) {
            for (x, y) in c.iter_mut().zip(n) {
                *x += y;
            }
        }
    }

    /// Sum of a structure's classes of misses over everything `keep` accepts (zeros when
    /// the ledger keeps none).
    pub fn class_total(
        &self,
        s: usize,
        mut keep: impl FnMut(usize, Mode, Kind) -> bool,
    ) -> [u64; 3] {
        let mut t = [0; 3];
        if self.classes.is_empty() {
            return t;
        }
        for a in 0..self.asids.len() {
            for mode in [Mode::User, Mode::Kernel] {
                for kind in Kind::REFS {
                    if keep(a, mode, kind) {
                        let c = self.class_cell(a, s, mode, kind);
                        for (x, y) in t.iter_mut().zip(c) {
                            *x += y;
                        }
                    }
                }
            }
        }
        t
    }

    /// The classes of misses of one cell.
    pub fn class_cell(&self, asid_idx: usize, s: usize, mode: Mode, kind: Kind) -> [u64; 3] {
        self.classes
            .get(asid_idx * self.stride + Self::offset(s, mode, kind))
            .copied()
            .unwrap_or_default()
    }

    /// References of `kind` over every address space and mode.
    pub fn refs_of_kind(&self, kind: Kind) -> u64 {
        (0..self.asids.len())
            .flat_map(|a| [Mode::User, Mode::Kernel].map(|m| (a, m)))
            .map(|(a, m)| self.refs(a, m, kind))
            .sum()
    }

    /// Index of the `walk` pseudo-structure.
    #[inline(always)]
    pub fn walk_index(&self) -> usize {
        self.structures.len()
    }

    pub fn structures(&self) -> &[String] {
        &self.structures
    }

    /// Address spaces seen, in order of first appearance.
    pub fn asids(&self) -> &[u32] {
        &self.asids
    }

    /// The counter of one cell.
    pub fn cell(&self, asid_idx: usize, s: usize, mode: Mode, kind: Kind) -> Counter {
        self.cells[asid_idx * self.stride + Self::offset(s, mode, kind)]
    }

    /// References of address space `asid_idx` in `mode` of `kind`.
    pub fn refs(&self, asid_idx: usize, mode: Mode, kind: Kind) -> u64 {
        self.refs[asid_idx * MODES * REF_KINDS + mode as usize * REF_KINDS + kind as usize]
    }

    /// Sum of a structure's cells over everything `keep` accepts.
    pub fn total(&self, s: usize, mut keep: impl FnMut(usize, Mode, Kind) -> bool) -> Counter {
        let mut t = Counter::default();
        for a in 0..self.asids.len() {
            for mode in [Mode::User, Mode::Kernel] {
                for kind in Kind::REFS {
                    if keep(a, mode, kind) {
                        t.add(&self.cell(a, s, mode, kind));
                    }
                }
            }
        }
        t
    }

    /// Does any address space beyond the initial one hold counts? (Used to drop an idle asid 0.)
    pub fn asid_used(&self, asid_idx: usize) -> bool {
        let r = &self.refs[asid_idx * MODES * REF_KINDS..(asid_idx + 1) * MODES * REF_KINDS];
        r.iter().any(|&n| n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_in_their_cells() {
        let mut l = Ledger::new(vec!["a".into(), "b".into()]);
        l.access(0, Mode::User, Kind::Load, true);
        l.access(0, Mode::User, Kind::Load, false);
        l.set_asid(7);
        l.access(1, Mode::Kernel, Kind::Fetch, true);
        l.access(l.walk_index(), Mode::Kernel, Kind::Fetch, true);
        l.set_asid(0);
        l.access(0, Mode::User, Kind::Store, false);
        assert_eq!(l.asids(), &[0, 7]);
        assert_eq!(
            l.cell(0, 0, Mode::User, Kind::Load),
            Counter {
                accesses: 2,
                misses: 1
            }
        );
        assert_eq!(
            l.cell(1, 1, Mode::Kernel, Kind::Fetch),
            Counter {
                accesses: 1,
                misses: 1
            }
        );
        assert_eq!(
            l.total(0, |_, _, _| true),
            Counter {
                accesses: 3,
                misses: 1
            }
        );
        assert_eq!(l.total(2, |a, _, _| a == 1).misses, 1);
    }
}
