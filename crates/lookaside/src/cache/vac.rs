//! A virtually indexed, physically tagged, write-back data cache: the PA-RISC 1.0 D-cache of
//! Inouye, Konuru, Walpole and Sears, *The effects of virtually addressed caches on virtual
//! memory design and performance* (OGI CS/E 92-010, 1992), and the operating-system side that
//! keeps it consistent.
//!
//! * [`Vac`] (this file) — the cache itself: the set comes from the *virtual* address (or from
//!   the physical one, for accesses made with translation off), the tag is the *physical*
//!   page number. Two virtual addresses of one physical line (*aliases*, synonyms) therefore
//!   find each other when they fall in the same set — they are *cache aligned*, or
//!   *equivalently mapped*, which happens exactly when their *page colours* (the index bits
//!   above the page offset) agree — and occupy different lines when they do not. Nothing in
//!   the hardware keeps those lines consistent; that is software's job.
//! * [`alias`] — that software: address spaces' mappings of physical frames, the consistency
//!   policies (*pseudo-aliasing* with its *pseudo page faults*, flush or *purge* on unmap,
//!   read-only aliasing, equivalent mapping by page colour) and the VM primitives (map,
//!   unmap, remap, protect, copy page, zero page) priced from the lines each one actually
//!   finds in the cache.
//! * [`drive`] — the model fed by an event stream: a machine's `[vac]` section, or a whole
//!   source fed phase by phase ([`drive::feed`]).
//! * [`timing`] — what the primitives cost in microseconds: presets calibrated to the
//!   HP 9000/834 (Tables 1 and 2 of the paper), shipped as data files.
//!
//! The paper's measurements re-run on the model (Tables 1–3, IPC by copy, move and pure copy,
//! Mach's copy-on-write cases 1–3) are not the engine's: they live in the `lookaside-papers`
//! crate (`lookaside_papers::inouye92`), which drives this model through its public API.
//!
//! # The tag store
//!
//! The lines live in the caches' tag store ([`CacheTags`]) with one key per line:
//! `key = pline << set_bits | vindex`, where `vindex` is the line's set (the index bits of
//! the address the cache is indexed with) and `pline` the physical line number. The store's
//! set of that key is `key mod sets = vindex`, so the set comes from the index address, and
//! within a set a match is exactly a physical tag match (the hardware's tag is the physical
//! page number; the line-in-page bits it leaves out are equal within a set whenever a way
//! spans a page, and `pline` keeps them when it does not). A per-entry array next to the tag
//! store holds each line's clean/dirty state. Physical addresses must stay below
//! [`MAX_PADDR`] so that the key fits in 64 bits.

pub mod alias;
pub mod drive;
pub mod timing;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::tags::CacheTags;
use crate::tlb::Policy;

/// Physical addresses must be below this (2^48 bytes, 256 TB), so that a line's key fits.
pub const MAX_PADDR: u64 = 1 << 48;

/// How a [`Vac`] picks a line's set.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Indexing {
    /// From the virtual address of the access (physical accesses use their physical address,
    /// as on PA-RISC with translation off): aliases of different colours occupy different
    /// lines.
    #[default]
    Virtual,
    /// Always from the physical address: a physically addressed cache, where aliases cannot
    /// arise (Mach's case 1).
    Physical,
}

/// The shape of a [`Vac`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct VacParams {
    /// Total capacity in bytes.
    pub size: u64,
    /// Associativity.
    pub ways: usize,
    /// Line size in bytes (a power of two).
    pub line: u64,
    /// Page size in bytes (a power of two, at least one line).
    pub page: u64,
    /// Replacement policy within a set.
    pub policy: Policy,
    pub indexing: Indexing,
}

impl VacParams {
    /// The HP 9000/834's D-cache: 128 KB, 2-way, 32-byte lines, 2 KB pages, virtually indexed
    /// (Inouye et al. §2). The paper does not say how a set picks its victim; LRU here.
    pub fn hp9000_834() -> VacParams {
        VacParams {
            size: 128 << 10,
            ways: 2,
            line: 32,
            page: 2 << 10,
            policy: Policy::Lru,
            indexing: Indexing::Virtual,
        }
    }

    /// Whether these parameters describe a cache [`Vac::new`] can build; the error names the
    /// field.
    pub fn check(&self) -> Result<(), String> {
        let pow2 = |field: &str, v: u64| {
            if v == 0 || !v.is_power_of_two() {
                Err(format!("{field}: {v} is not a power of two"))
            } else {
                Ok(())
            }
        };
        pow2("line", self.line)?;
        pow2("page", self.page)?;
        if self.page < self.line {
            return Err(format!(
                "page: {} bytes is smaller than a {}-byte line",
                self.page, self.line
            ));
        }
        if self.ways == 0 {
            return Err("ways: must be at least 1".into());
        }
        let lines = self.size / self.line;
        if lines == 0 || !self.size.is_multiple_of(self.line * self.ways as u64) {
            return Err(format!(
                "size: {} bytes is not a whole number of {}-way sets of {}-byte lines",
                self.size, self.ways, self.line
            ));
        }
        pow2(
            "size / (line * ways) (the number of sets)",
            lines / self.ways as u64,
        )?;
        if lines > crate::tlb::MAX_ENTRIES as u64 {
            return Err(format!("size: {} lines is too many", lines));
        }
        Ok(())
    }
}

/// What one access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineAccess {
    /// The line was present (under this index: an alias in another set does not count).
    pub hit: bool,
    /// Where the line now is: `set * ways + way`.
    pub slot: usize,
    /// On a miss that replaced a valid line: that line's physical line number and index, and
    /// whether it was dirty (written back to memory).
    pub victim: Option<Victim>,
}

/// A line pushed out by a fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Victim {
    /// Physical line number (physical address / line size).
    pub pline: u64,
    /// Its set.
    pub set: usize,
    pub dirty: bool,
}

/// Lines of one page (under one index) touched by a flush or a purge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Lines {
    /// Line addresses the operation visited (a page's worth: the hardware loop visits every
    /// line whether or not it is cached).
    pub visited: u64,
    /// Of those, lines present in the cache (and now invalid).
    pub present: u64,
    /// Of those, dirty lines (written back by a flush, discarded by a purge).
    pub dirty: u64,
}

impl std::ops::AddAssign for Lines {
    fn add_assign(&mut self, o: Lines) {
        self.visited += o.visited;
        self.present += o.present;
        self.dirty += o.dirty;
    }
}

/// Running counts of a [`Vac`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VacCounts {
    pub hits: u64,
    pub misses: u64,
    /// Valid lines replaced by fills.
    pub evictions: u64,
    /// Dirty victims written back by fills.
    pub writebacks: u64,
    /// Lines written back by flushes.
    pub flushed_dirty: u64,
    /// Dirty lines discarded by purges.
    pub purged_dirty: u64,
}

/// A virtually indexed, physically tagged, write-back, write-allocate cache (see the module
/// documentation).
#[derive(Clone, Debug)]
pub struct Vac {
    params: VacParams,
    /// Lines carry no address-space tag (homonyms are avoided above the cache, by a global
    /// address space or process tags).
    tags: CacheTags,
    /// Clean (false) or dirty (true), per `set * ways + way`; false for invalid ways.
    dirty: Vec<bool>,
    line_shift: u32,
    page_shift: u32,
    set_bits: u32,
    set_mask: u64,
    colours: u64,
    counts: VacCounts,
    /// With [`Vac::track_data`]: the content of each line (`set * ways + way`) and of memory
    /// (by physical line; absent = 0), as opaque version numbers.
    data: Option<Data>,
}

#[derive(Clone, Debug, Default)]
struct Data {
    lines: Vec<u64>,
    memory: HashMap<u64, u64>,
}

impl Vac {
    /// An empty cache; the error names the parameter that is wrong.
    pub fn new(params: &VacParams) -> Result<Vac, String> {
        params.check()?;
        let lines = (params.size / params.line) as usize;
        let tags = CacheTags::new(lines, params.ways, params.policy, 0)?;
        let sets = (lines / params.ways) as u64;
        let set_bits = sets.trailing_zeros();
        let line_shift = params.line.trailing_zeros();
        let page_shift = params.page.trailing_zeros();
        // Index bits above the page offset choose the colour; none when a way fits in a page.
        let colour_bits = (set_bits + line_shift).saturating_sub(page_shift);
        Ok(Vac {
            params: params.clone(),
            tags,
            dirty: vec![false; lines],
            line_shift,
            page_shift,
            set_bits,
            set_mask: sets - 1,
            colours: 1 << colour_bits,
            counts: VacCounts::default(),
            data: None,
        })
    }

    /// Carry data from now on: every line and memory line holds a value (a version number,
    /// 0 at first), fills copy memory into the line, write-backs copy the line into memory,
    /// purges drop it. This is what lets a test see *stale* data — a read through one alias
    /// that misses a newer value written through another — rather than only tag traffic.
    pub fn track_data(&mut self) {
        let n = self.dirty.len();
        self.data.get_or_insert_with(|| Data {
            lines: vec![0; n],
            memory: HashMap::new(),
        });
    }

    /// The value memory holds for physical line `pline` (0 when never written back), with
    /// [`Vac::track_data`].
    pub fn memory_value(&self, pline: u64) -> Option<u64> {
        let d = self.data.as_ref()?;
        Some(d.memory.get(&pline).copied().unwrap_or(0))
    }

    pub fn params(&self) -> &VacParams {
        &self.params
    }

    pub fn counts(&self) -> VacCounts {
        self.counts
    }

    /// Number of page colours: addresses whose page numbers agree modulo this are cache
    /// aligned. 1 when the cache is no bigger than page × ways (aliases always aligned) or is
    /// physically indexed.
    pub fn colours(&self) -> u64 {
        match self.params.indexing {
            Indexing::Virtual => self.colours,
            Indexing::Physical => 1,
        }
    }

    /// The page colour of `addr` (virtual or physical).
    pub fn colour(&self, addr: u64) -> u64 {
        (addr >> self.page_shift) & (self.colours - 1)
    }

    pub fn lines_per_page(&self) -> u64 {
        self.params.page >> self.line_shift
    }

    pub fn sets(&self) -> usize {
        self.tags.sets()
    }

    /// Page number of a byte address.
    pub fn page_of(&self, addr: u64) -> u64 {
        addr >> self.page_shift
    }

    /// The tag-store key of the line at physical address `paddr` indexed by `index_addr`.
    #[inline]
    fn key(&self, index_addr: u64, paddr: u64) -> u64 {
        let index_addr = match self.params.indexing {
            Indexing::Virtual => index_addr,
            Indexing::Physical => paddr,
        };
        let vindex = (index_addr >> self.line_shift) & self.set_mask;
        ((paddr >> self.line_shift) << self.set_bits) | vindex
    }

    /// Where the line of `paddr` indexed by `index_addr` is cached, with its dirty bit.
    /// `index_addr` and `paddr` must agree in their page offset.
    pub fn resident(&self, index_addr: u64, paddr: u64) -> Option<(usize, bool)> {
        let slot = self.tags.probe(self.key(index_addr, paddr))?;
        Some((slot, self.dirty[slot]))
    }

    /// Read (`write == false`) or write the line of `paddr`, indexed by `index_addr`: a
    /// virtual address, or `paddr` itself for an access with translation off. On a miss the
    /// line is filled (writes allocate), possibly replacing a victim that is written back if
    /// dirty.
    pub fn access(&mut self, index_addr: u64, paddr: u64, write: bool) -> LineAccess {
        self.access_value(index_addr, paddr, write, None).0
    }

    /// [`Vac::access`] carrying data: a store of `Some(value)` (a write) or a load (`None`);
    /// returns the value the line holds afterwards (what a load reads; 0 without
    /// [`Vac::track_data`]).
    pub fn access_data(
        &mut self,
        index_addr: u64,
        paddr: u64,
        store: Option<u64>,
    ) -> (LineAccess, u64) {
        self.access_value(index_addr, paddr, store.is_some(), store)
    }

    fn access_value(
        &mut self,
        index_addr: u64,
        paddr: u64,
        write: bool,
        store: Option<u64>,
    ) -> (LineAccess, u64) {
        debug_assert_eq!(
            (index_addr ^ paddr) & (self.params.page - 1),
            0,
            "index and physical address disagree in the page offset"
        );
        debug_assert!(paddr < MAX_PADDR, "physical address beyond MAX_PADDR");
        let key = self.key(index_addr, paddr);
        let ways = self.tags.ways();
        if let Some(slot) = self.tags.lookup(key) {
            self.dirty[slot] |= write;
            self.counts.hits += 1;
            let value = self.data_at(slot, store);
            let a = LineAccess {
                hit: true,
                slot,
                victim: None,
            };
            return (a, value);
        }
        self.counts.misses += 1;
        let (slot, evicted) = self.tags.fill(key);
        let set = slot / ways;
        // A fill replaces in the way it takes: an evicted entry was in this very slot.
        let victim = evicted.map(|k| {
            let dirty = self.dirty[slot];
            self.counts.evictions += 1;
            self.counts.writebacks += dirty as u64;
            Victim {
                pline: k >> self.set_bits,
                set,
                dirty,
            }
        });
        self.dirty[slot] = write;
        if let Some(d) = &mut self.data {
            if let Some(v) = victim.filter(|v| v.dirty) {
                d.memory.insert(v.pline, d.lines[slot]);
            }
            d.lines[slot] = d
                .memory
                .get(&(paddr >> self.line_shift))
                .copied()
                .unwrap_or(0);
        }
        let value = self.data_at(slot, store);
        let a = LineAccess {
            hit: false,
            slot,
            victim,
        };
        (a, value)
    }

    /// Store `store` (if any) into the line in `slot` and return its value.
    #[inline]
    fn data_at(&mut self, slot: usize, store: Option<u64>) -> u64 {
        match &mut self.data {
            None => 0,
            Some(d) => {
                if let Some(v) = store {
                    d.lines[slot] = v;
                }
                d.lines[slot]
            }
        }
    }

    /// Write back (if dirty) and invalidate the lines of the page at physical address
    /// `ppage` as indexed from the page at `index_page` (a virtual page address, or `ppage`
    /// for the physical alias): what PA-RISC's `fdc` loop does to one alias of a page.
    pub fn flush_page(&mut self, index_page: u64, ppage: u64) -> Lines {
        self.clear_page(index_page, ppage, true)
    }

    /// Invalidate the lines of one alias of a page without writing anything back (`pdc`):
    /// dirty data is lost, so only for pages whose content no longer matters.
    pub fn purge_page(&mut self, index_page: u64, ppage: u64) -> Lines {
        self.clear_page(index_page, ppage, false)
    }

    fn clear_page(&mut self, index_page: u64, ppage: u64, write_back: bool) -> Lines {
        let mask = !(self.params.page - 1);
        self.clear_lines(
            index_page & mask,
            ppage & mask,
            self.lines_per_page(),
            write_back,
        )
    }

    /// Flush `lines` lines from the line of `paddr` indexed by `index_addr` (which agree in
    /// their page offset; the run stays within one page).
    pub fn flush_lines(&mut self, index_addr: u64, paddr: u64, lines: u64) -> Lines {
        let mask = !(self.params.line - 1);
        self.clear_lines(index_addr & mask, paddr & mask, lines, true)
    }

    fn clear_lines(&mut self, vbase: u64, pbase: u64, lines: u64, write_back: bool) -> Lines {
        let mut n = Lines::default();
        for i in 0..lines {
            let off = i << self.line_shift;
            n.visited += 1;
            if let Some((slot, dirty)) = self.resident(vbase + off, pbase + off) {
                self.tags.invalidate(self.key(vbase + off, pbase + off));
                self.dirty[slot] = false;
                if let (Some(d), true) = (&mut self.data, write_back && dirty) {
                    d.memory
                        .insert((pbase + off) >> self.line_shift, d.lines[slot]);
                }
                n.present += 1;
                n.dirty += dirty as u64;
            }
        }
        if write_back {
            self.counts.flushed_dirty += n.dirty;
        } else {
            self.counts.purged_dirty += n.dirty;
        }
        n
    }

    /// Write back every dirty line and empty the cache (the "Empty" state of Table 1 starts
    /// from this). Returns the lines that were present and dirty.
    pub fn flush_all(&mut self) -> Lines {
        let mut n = Lines {
            visited: self.tags.entries() as u64,
            ..Lines::default()
        };
        for (slot, k) in self.tags.blocks() {
            n.present += 1;
            n.dirty += self.dirty[slot] as u64;
            if let (Some(d), true) = (&mut self.data, self.dirty[slot]) {
                d.memory.insert(k >> self.set_bits, d.lines[slot]);
            }
        }
        self.tags.flush_all();
        self.dirty.fill(false);
        self.counts.flushed_dirty += n.dirty;
        n
    }

    /// Number of valid lines.
    pub fn occupancy(&self) -> usize {
        self.tags.held()
    }

    /// The valid lines as `(slot, physical line number, set, dirty)`, in slot order.
    pub fn lines(&self) -> impl Iterator<Item = (usize, u64, usize, bool)> + '_ {
        let ways = self.tags.ways();
        self.tags
            .blocks()
            .map(move |(slot, k)| (slot, k >> self.set_bits, slot / ways, self.dirty[slot]))
    }
}
