//! Caches: one physically indexed, set-associative cache of lines, nothing more.
//!
//! A [`Cache`] keeps its lines (`paddr >> log2(line)`) in the caches' tag store
//! ([`tags::CacheTags`]), with a dirty bit per slot beside the tags: any ways dividing the
//! lines, LRU/FIFO/random/PLRU/NRU, with the TLB engine's exact replacement (see
//! [`crate::tlb`]).
//!
//! # Semantics
//!
//! * **Reads** (loads and instruction fetches). A hit updates replacement. A miss fetches the
//!   aligned block of [`CacheParams::fetch`] bytes: the block's other lines that are absent
//!   are filled first, in address order, then the line read (so it ends most recently used);
//!   each filled line counts in [`Outcome::fills`]. Chen's DECstation D-cache (4-byte lines, a
//!   read miss fetches 16 aligned bytes) is `line = 4, fetch = 16`.
//! * **Writes.** A hit updates replacement and, write-back, sets the line dirty. A miss with
//!   `write_allocate` fills the line alone (one fill; the fetch block applies to reads) and,
//!   write-back, sets it dirty; without it the cache is unchanged. Write-through writes always
//!   go on to memory — the caller (the write buffer) sees every write; a write-back cache
//!   sends memory only the dirty lines it evicts ([`Outcome::writebacks`]).
//! * Whether a write-allocate fill costs a memory read (it does not when the line is no wider
//!   than the write, as in Chen's D-cache) is the memory system's business, not the cache's.

pub use crate::error::ParamError;
use crate::tlb::Policy;
use tags::CacheTags;

pub mod hier;
pub mod system;
pub mod tags;
#[cfg(test)]
mod tests;
pub mod vac;
pub mod wbuf;

/// What a cache does with a write that it holds (or allocates); `write = "back" | "through"`
/// in a configuration.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum WritePolicy {
    /// Writes update the line and mark it dirty; the next level (or memory) sees dirty lines
    /// when they are evicted or flushed.
    #[default]
    Back,
    /// Every write goes on to the next level (or memory); lines are never dirty.
    Through,
}

/// The shape and behaviour of one cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheParams {
    /// Capacity in bytes, a multiple of `line * ways`.
    pub size: u64,
    /// Line size in bytes, a power of two.
    pub line: u32,
    /// Associativity; 0 means fully associative.
    pub ways: usize,
    pub policy: Policy,
    pub write: WritePolicy,
    /// Whether a write miss allocates the line.
    pub write_allocate: bool,
    /// Bytes fetched on a read miss: the aligned block holding the line read, a power of two
    /// no smaller than `line` and no larger than `size`.
    pub fetch: u32,
    /// Seed of the random policy.
    pub seed: u64,
}

impl CacheParams {
    /// A write-back, write-allocate cache fetching one line per miss, seed 0.
    pub fn new(size: u64, line: u32, ways: usize, policy: Policy) -> CacheParams {
        CacheParams {
            size,
            line,
            ways,
            policy,
            write: WritePolicy::Back,
            write_allocate: true,
            fetch: line,
            seed: 0,
        }
    }

    /// Number of lines.
    pub fn lines(&self) -> u64 {
        self.size / self.line.max(1) as u64
    }

    /// Ways per set (`ways`, or every line when fully associative).
    fn set_ways(&self) -> usize {
        if self.ways == 0 {
            self.lines() as usize
        } else {
            self.ways
        }
    }

    /// Whether these parameters describe a cache [`Cache::new`] can build.
    pub fn check(&self) -> Result<(), ParamError> {
        let err = |field, message: String| Err(ParamError { field, message });
        if self.line == 0 || !self.line.is_power_of_two() {
            return err("line", format!("{} is not a power of two", self.line));
        }
        if self.size == 0 || !self.size.is_multiple_of(self.line as u64) {
            return err(
                "size",
                format!("{} is not a positive multiple of the line", self.size),
            );
        }
        let lines = self.lines();
        if lines > crate::tlb::MAX_ENTRIES as u64 {
            return err(
                "size",
                format!(
                    "{lines} lines is more than the maximum {}",
                    crate::tlb::MAX_ENTRIES
                ),
            );
        }
        if self.ways != 0 && !lines.is_multiple_of(self.ways as u64) {
            return err(
                "ways",
                format!("{} does not divide the {lines} lines", self.ways),
            );
        }
        if !self.fetch.is_power_of_two() || self.fetch < self.line || self.fetch as u64 > self.size
        {
            return err(
                "fetch",
                format!(
                    "{} is not a power of two between the line ({}) and the size ({})",
                    self.fetch, self.line, self.size
                ),
            );
        }
        Ok(())
    }
}

/// What one access did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub hit: bool,
    /// Lines brought in.
    pub fills: u32,
    /// Dirty lines evicted (write-back only).
    pub writebacks: u32,
}

/// Counts over a cache's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub reads: u64,
    pub read_misses: u64,
    pub writes: u64,
    pub write_misses: u64,
    pub fills: u64,
    pub writebacks: u64,
}

/// A physically indexed cache (see the module documentation).
#[derive(Clone, Debug)]
pub struct Cache {
    tags: CacheTags,
    /// Per slot of `tags`, whether the line there is dirty (write-back only).
    dirty: Vec<bool>,
    line_shift: u32,
    /// Lines per fetch block, a power of two.
    fetch_lines: u64,
    write_back: bool,
    write_allocate: bool,
    stats: CacheStats,
    /// The physical addresses of the dirty lines the last access evicted (its
    /// [`Outcome::writebacks`] of them, in order): where their write-backs go, for a write
    /// buffer whose timing depends on the address (page-mode writes).
    victims: Vec<u64>,
    /// Lines removed so far (evicted, invalidated, flushed): a line present when this was
    /// `n` is present still while it is `n`.
    removals: u64,
    /// The tags are direct-mapped in a power-of-two number of sets
    /// ([`CacheTags::direct_masked`]): a miss fills through
    /// [`CacheTags::access_direct_masked`], one mask and one compare a line (Chen's D-cache
    /// fills four lines a read miss).
    direct: bool,
}

impl Cache {
    pub fn new(p: &CacheParams) -> Result<Cache, ParamError> {
        p.check()?;
        let tags = CacheTags::new(p.lines() as usize, p.set_ways(), p.policy, p.seed).map_err(
            |message| ParamError {
                field: "ways",
                message,
            },
        )?;
        let write_back = p.write == WritePolicy::Back;
        Ok(Cache {
            dirty: if write_back {
                vec![false; tags.entries()]
            } else {
                Vec::new()
            },
            direct: tags.direct_masked(),
            tags,
            line_shift: p.line.trailing_zeros(),
            fetch_lines: (p.fetch / p.line) as u64,
            write_back,
            write_allocate: p.write_allocate,
            stats: CacheStats::default(),
            victims: Vec::new(),
            removals: 0,
        })
    }

    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// The physical address of the `i`-th dirty line the last access evicted (`i` below its
    /// [`Outcome::writebacks`]).
    pub fn victim(&self, i: usize) -> u64 {
        self.victims[i]
    }

    /// Bytes of one way (size / ways): the span over which physical pages conflict, so
    /// the span page colours must cover.
    pub fn way_bytes(&self) -> u64 {
        (self.tags.sets() as u64) << self.line_shift
    }

    pub fn write_policy(&self) -> WritePolicy {
        if self.write_back {
            WritePolicy::Back
        } else {
            WritePolicy::Through
        }
    }

    /// Line size in bytes.
    pub fn line(&self) -> u32 {
        1 << self.line_shift
    }

    /// log2 of the line size.
    #[inline(always)]
    pub fn line_shift(&self) -> u32 {
        self.line_shift
    }

    /// Read (`write == false`) or write the byte at `paddr`.
    #[inline(always)]
    pub fn access(&mut self, paddr: u64, write: bool) -> Outcome {
        if write {
            self.write(paddr)
        } else {
            self.read_line(paddr >> self.line_shift)
        }
    }

    /// `n` more reads of the line the last access read, at `paddr`, counted at once: such a
    /// read hits and changes nothing but the count ([`CacheTags::lookup`]'s repeat). Returns
    /// false, counting nothing, when `paddr`'s line was not the last one touched.
    #[inline]
    pub fn read_again(&mut self, paddr: u64, n: u64) -> bool {
        let again = self.tags.is_last(paddr >> self.line_shift);
        if again {
            self.stats.reads += n;
        }
        again
    }

    /// Lines removed so far (evicted, invalidated or flushed): while it is unchanged, every
    /// line present before is present still.
    pub fn removals(&self) -> u64 {
        self.removals
    }

    /// `n` reads of lines all present, the last of them at `last`, counted at once; for a
    /// cache whose hits change no replacement state ([`Cache::hits_keep_order`]), the same
    /// as making them one by one.
    pub fn read_present(&mut self, last: u64, n: u64) {
        debug_assert!(self.tags.hits_keep_order());
        self.stats.reads += n;
        let hit = self.tags.lookup(last >> self.line_shift);
        debug_assert!(hit.is_some(), "read_present of an absent line");
    }

    /// The lines present, by slot.
    #[cfg(test)]
    pub fn blocks(&self) -> Vec<(usize, u64)> {
        self.tags.blocks().collect()
    }

    /// Whether a hit changes no replacement state (see [`Cache::read_present`]).
    pub fn hits_keep_order(&self) -> bool {
        self.tags.hits_keep_order()
    }

    /// Read the byte at `paddr`; returns whether it hit.
    #[inline]
    pub fn read(&mut self, paddr: u64) -> bool {
        self.read_line(paddr >> self.line_shift).hit
    }

    /// A read of line `key`. The hit, by far the most common case, is inlined into the
    /// caller; the miss (fills, fetch block) is a call.
    #[inline(always)]
    fn read_line(&mut self, key: u64) -> Outcome {
        self.stats.reads += 1;
        if self.tags.lookup(key).is_some() {
            return Outcome {
                hit: true,
                ..Outcome::default()
            };
        }
        self.read_miss(key)
    }

    /// [`Cache::read_line`] of a line that is absent.
    #[inline(never)]
    fn read_miss(&mut self, key: u64) -> Outcome {
        self.stats.read_misses += 1;
        self.victims.clear();
        let mut o = Outcome::default();
        if self.direct {
            // The same fills in the same order as below, without the policy's dispatch.
            let first = key & !(self.fetch_lines - 1);
            for other in first..first + self.fetch_lines {
                if other != key {
                    let t = self.tags.access_direct_masked(other);
                    if !t.hit {
                        self.filled(t.slot, t.evicted, false, &mut o);
                    }
                }
            }
            let t = self.tags.access_direct_masked(key);
            debug_assert!(!t.hit, "read_miss of a present line");
            self.filled(t.slot, t.evicted, false, &mut o);
            return o;
        }
        if self.fetch_lines > 1 {
            let first = key & !(self.fetch_lines - 1);
            for other in first..first + self.fetch_lines {
                if other != key {
                    if let Some((slot, evicted)) = self.tags.fill_if_absent(other) {
                        self.filled(slot, evicted, false, &mut o);
                    }
                }
            }
        }
        self.fill(key, false, &mut o);
        o
    }

    /// A write of the byte at `paddr`. A write-through hit (nothing to mark) is inlined into
    /// the caller; everything else is a call.
    #[inline(always)]
    fn write(&mut self, paddr: u64) -> Outcome {
        let key = paddr >> self.line_shift;
        if !self.write_back && self.tags.lookup(key).is_some() {
            self.stats.writes += 1;
            return Outcome {
                hit: true,
                ..Outcome::default()
            };
        }
        self.write_slow(key)
    }

    /// [`Cache::write`] of line `key` other than a write-through hit.
    #[inline(never)]
    fn write_slow(&mut self, key: u64) -> Outcome {
        self.stats.writes += 1;
        self.victims.clear();
        let hit = if self.write_back {
            match self.tags.lookup(key) {
                Some(slot) => {
                    self.dirty[slot] = true;
                    true
                }
                None => false,
            }
        } else {
            // The lookup of `write` missed, and changed nothing.
            false
        };
        let mut o = Outcome {
            hit,
            ..Outcome::default()
        };
        if !hit {
            self.stats.write_misses += 1;
            if self.write_allocate {
                self.fill(key, self.write_back, &mut o);
            }
        }
        o
    }

    /// Put the absent line `key` in, counting the fill and any dirty line it evicts.
    fn fill(&mut self, key: u64, dirty: bool, o: &mut Outcome) {
        let (slot, evicted) = if self.direct {
            let t = self.tags.access_direct_masked(key);
            (t.slot, t.evicted)
        } else {
            self.tags.fill(key)
        };
        self.filled(slot, evicted, dirty, o);
    }

    /// Count the fill of `slot`, which evicted the valid line `evicted` if any: a write-back
    /// of it if it was dirty; the slot's line is now `dirty` or clean.
    #[inline(always)]
    fn filled(&mut self, slot: usize, evicted: Option<u64>, dirty: bool, o: &mut Outcome) {
        self.removals += evicted.is_some() as u64;
        o.fills += 1;
        self.stats.fills += 1;
        if self.write_back {
            if let Some(old) = evicted.filter(|_| self.dirty[slot]) {
                o.writebacks += 1;
                self.stats.writebacks += 1;
                self.victims.push(old << self.line_shift);
            }
            self.dirty[slot] = dirty;
        }
    }

    /// Whether the line holding `paddr` is present (changes nothing).
    pub fn contains(&self, paddr: u64) -> bool {
        self.tags.probe(paddr >> self.line_shift).is_some()
    }

    /// Remove every line of `[start, end)`; returns (lines present, of which dirty). A
    /// *purge* drops dirty data; a *flush* is the same call with the dirty count written
    /// back by the caller.
    pub fn invalidate_range(&mut self, start: u64, end: u64) -> (u64, u64) {
        let (mut present, mut dirty) = (0, 0);
        if end <= start {
            return (0, 0);
        }
        let (first, last) = (start >> self.line_shift, (end - 1) >> self.line_shift);
        for key in first..=last {
            if let Some(slot) = self.tags.invalidate(key) {
                present += 1;
                self.removals += 1;
                if self.write_back && self.dirty[slot] {
                    dirty += 1;
                    self.dirty[slot] = false;
                }
            }
        }
        (present, dirty)
    }

    /// The physical addresses of the dirty lines, in (set, way) order, which are clean
    /// from now on (a copy-back: the lines stay).
    pub fn take_dirty(&mut self) -> Vec<u64> {
        let mut out = Vec::new();
        if self.write_back {
            for (slot, key) in self.tags.blocks() {
                if self.dirty[slot] {
                    out.push(key << self.line_shift);
                    self.dirty[slot] = false;
                }
            }
        }
        out
    }

    /// Empty the cache; returns the number of dirty lines it held.
    pub fn flush_all(&mut self) -> u64 {
        let mut dirty = 0;
        if self.write_back {
            for (slot, _) in self.tags.blocks() {
                dirty += self.dirty[slot] as u64;
            }
            self.dirty.fill(false);
        }
        self.tags.flush_all();
        self.removals += 1;
        dirty
    }
}
