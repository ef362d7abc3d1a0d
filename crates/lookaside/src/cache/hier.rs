//! The cache hierarchy of `[[cache]]` tables: DineroIV's cache model (Edler and Hill, Dinero
//! IV 7), reference for reference, so that its counts can be compared with DineroIV's to the
//! unit.
//!
//! Caches are addressed by the references' virtual addresses (an identity mapping, as
//! DineroIV's): no TLB is needed, and TLBs, when the machine has some, translate the same
//! references independently. On a machine with a page table they are physically addressed
//! instead, at the walker's frames, and see its table references too (the machine's
//! `physical` module). Each cache keeps its blocks in the caches' tag store
//! ([`CacheTags`]: any geometry, and the TLB engine's policies with their exact semantics)
//! with, per slot, masks of its valid, dirty and referenced sub-blocks.
//!
//! # One reference to one cache (DineroIV's `d4ref`)
//!
//! 1. **Split.** A reference whose bytes cross into the next block is cut at the boundary; the
//!    rest is a reference of its own to the same cache, made after this one is done (counted
//!    in `multi_block`). At the first level, `machine.straddle = "first"` instead keeps only
//!    the part in the block of the first byte (DineroIV's `din` input: every reference is 4
//!    aligned bytes, so it never crosses a block). What a cache sends on is split again by
//!    the next one when its blocks are smaller.
//! 2. **Look-up.** The *block* misses when it is absent; the reference *misses* when the
//!    block is absent or a sub-block it touches is not valid.
//! 3. **Prefetch** (demand reads and instruction fetches only, by the fetch policy): the
//!    sub-block `prefetch_distance` sub-blocks past the address (`load-forward`: none if that
//!    is in another block; `sub-block`: wrapped into this block), a reference of its own to
//!    this cache, made after this one's transfers.
//! 4. **Update**, unless a write misses the block and does not allocate: replacement (a hit
//!    refreshes it; a block miss fills, evicting the victim, whose dirty sub-blocks are
//!    written back to the next level, one write per contiguous run), the sub-blocks touched
//!    become valid (and referenced, unless a prefetch touched them), and a write to a
//!    write-back cache makes them dirty.
//! 5. **Transfers to the next level**, in this order: the block's fetch (on a miss: the
//!    sub-blocks touched, as a read — an instruction fetch stays one —, unless the
//!    reference is a write that does not allocate, or covers whole sub-blocks), then a
//!    write-through write (a write not kept dirty: write-through, or a write miss that did
//!    not allocate), then the victim's write-backs (last run first), then the prefetch, then
//!    the rest of a split reference. Each transfer is done completely (through every level
//!    below) before the next. (DineroIV keeps one stack of pending references per cache;
//!    this is the order it pops them.)
//! 6. **Counts:** one demand fetch (or prefetch) of its kind, a miss and a block miss.
//!
//! Writes of write-allocate caches with `allocate = "no-fetch"` allocate only when they
//! cover whole sub-blocks. (DineroIV's `nofetch` write-back policy is not offered: it tests
//! the sub-blocks' validity after marking them valid, so it always writes back.)
//!
//! # Copy-back at the end
//!
//! A result is reported as DineroIV reports at exit, after copying every dirty block back:
//! the data cache's dirty blocks are written to its next level (which then copies back its
//! own, down to memory) — sets in decreasing order, each set's blocks from least to most
//! recently used (the order DineroIV's stack pops them), each block's runs last first. These
//! write-backs count in `writebacks` and in `flushed`. The copy is made on a clone at report
//! time, so the simulation can go on afterwards.
//!
//! # Differences from DineroIV
//!
//! `random` replacement draws from Lookaside's generator, not the C library's; the
//! `misc` access type and DineroIV's prefetch abort percentage do not exist; plru and nru
//! are Lookaside's own. Everything else is DineroIV's, and the tests compare with a
//! brute-force transcription of its reference handling.

use serde_json::{json, Map, Value};

use crate::cache::tags::{CacheTags, Touch};
use crate::config::{Allocate, CacheSpec, FetchPolicy, MachineConfig, Straddle, Ways};
use crate::error::{Error, Result};
use crate::event::{Event, Kind, Mode};
use crate::ledger::Ledger;
use crate::threec::Shadow;

/// The context of every block in the classification's infinite cache (blocks have none).
const CTX: u64 = 0;

/// Most sub-blocks per block (DineroIV: the bits of an `unsigned int`).
pub const MAX_SUB_BLOCKS: u64 = 32;

/// One reference to a cache: `size` bytes from `addr` (never past the top of the address
/// space), of `kind` (an instruction fetch, a read, a write), a prefetch or a demand one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ref {
    addr: u64,
    size: u64,
    kind: Kind,
    prefetch: bool,
}

/// A reference waiting on a cache's stack: for the cache itself (a prefetch or the rest of a
/// split reference) or for the next level.
#[derive(Clone, Copy, Debug)]
struct Pending {
    r: Ref,
    own: bool,
}

/// Counts of one cache beside the ledger's (demand accesses and misses by address space,
/// mode and kind, and their classes): each by kind. Reported by [`Hierarchy::fields`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tallies {
    /// Prefetch references, and those that missed, missed the block.
    prefetches: [u64; 3],
    prefetch_misses: [u64; 3],
    prefetch_block_misses: [u64; 3],
    /// Demand references that missed the block.
    block_misses: [u64; 3],
    /// Classes ([`crate::threec::CLASSES`]) of prefetch misses, of demand block misses and
    /// of prefetch block misses.
    prefetch_classes: [[u64; 3]; 3],
    block_classes: [[u64; 3]; 3],
    prefetch_block_classes: [[u64; 3]; 3],
    /// References split at a block boundary.
    multi_block: u64,
    /// Bytes read from the next level (fetches) and written to it (write-throughs and
    /// write-backs): DineroIV's "bytes from/to memory".
    bytes_read: u64,
    bytes_written: u64,
    /// Write-backs (one per contiguous run of dirty sub-blocks), and those of the copy-back
    /// at the end.
    writebacks: u64,
    flushed: u64,
}

/// One cache.
#[derive(Clone, Debug)]
struct Level {
    tags: CacheTags,
    /// Per slot of `tags`: valid, dirty and referenced sub-blocks.
    valid: Vec<u32>,
    dirty: Vec<u32>,
    referenced: Vec<u32>,
    block_shift: u32,
    /// Block size less one.
    block_mask: u64,
    sub_shift: u32,
    /// Sub-blocks per block, less one (sub-block numbers within a block are masked by it).
    sub_mask: u64,
    write_back: bool,
    allocate: Allocate,
    fetch: FetchPolicy,
    /// Prefetch distance in bytes.
    distance: u64,
    next: Option<usize>,
    /// Sub-blocks are blocks and fetches are on demand: a reference within one block (a
    /// write only when writes allocate) takes [`Hierarchy::access`]'s plain path, with its
    /// transfers made at once rather than through the stack.
    plain: bool,
    /// `allocate = "yes"`.
    write_allocate: bool,
    /// The next level is plain, allocates on writes and keeps them (write-back), classifies
    /// nothing and sends its misses to memory: what this cache sends it takes
    /// [`Hierarchy::transfer_quick`].
    next_quick: bool,
    shadow: Option<Box<Shadow<CacheTags>>>,
    t: Tallies,
}

/// The hierarchy (see the module documentation).
#[derive(Clone, Debug)]
pub struct Hierarchy {
    levels: Vec<Level>,
    specs: Vec<CacheSpec>,
    /// Per reference kind, its first-level cache (none: that kind is not cached).
    roots: [Option<usize>; 3],
    /// Ledger index of the first cache (the TLBs come before).
    base: usize,
    /// `machine.straddle = "first"`.
    first_only: bool,
    /// Per cache, its stack of pending references (reused: no allocation per reference).
    pending: Vec<Vec<Pending>>,
    /// The mode the counts of the reference being simulated go to.
    mode: Mode,
    /// Per reference kind (and a fourth, unused, so that the kind's two bits index it), the
    /// short path of its references (see [`Short`]).
    short: [Short; 4],
}

/// The *short path* of one kind of reference: its first level, when that level is plain
/// (see [`Level::plain`]) and (for writes) allocates and keeps writes dirty. A reference of
/// that kind within one block then takes it: a hit is a tag look-up and a count (a write
/// marks the block dirty), a miss fills and makes its transfers at once; with classification
/// the shadow sees each reference too.
#[derive(Clone, Copy, Debug)]
struct Short {
    /// The level, or [`NO_LEVEL`].
    level: usize,
    /// The level classifies its misses.
    classify: bool,
    /// The level has no next level: its misses transfer to memory only, and the
    /// caches-alone loop counts them in its tally ([`ShortTally`]), their classes too.
    quick: bool,
    /// A reference of `size` bytes from `addr` takes the path when `addr`'s offset in its
    /// block plus `size` is at most this: the block size, or with `machine.straddle =
    /// "first"` (references cut at their first block) any offset and size.
    limit: u64,
    /// The level's block shift and block size less one (beside the rest, so that the path
    /// reads one record before its tag store).
    block_shift: u32,
    block_mask: u64,
}

/// No level (in [`Short`]).
const NO_LEVEL: usize = usize::MAX;

/// The block mask of sub-blocks `lo..=hi`.
#[inline(always)]
fn sub_bits(lo: u64, hi: u64) -> u32 {
    ((u64::MAX >> (63 - hi)) & (u64::MAX << lo)) as u32
}

impl Hierarchy {
    /// The hierarchy of `config`'s `[[cache]]` tables, its caches counted in the ledger from
    /// index `base`; none when it has none. Errors name the key (`cache.l1d.ways`).
    pub fn build(config: &MachineConfig, base: usize, source_name: &str) -> Result<Option<Self>> {
        let specs = &config.caches;
        if specs.is_empty() {
            return Ok(None);
        }
        let err = |c: &CacheSpec, field: &str, m: String| {
            Error::config(source_name, format!("cache.{}.{field}", c.name), m)
        };
        let n = specs.len();
        let mut levels = Vec::with_capacity(n);
        for (i, c) in specs.iter().enumerate() {
            check_name(c, i, specs, config, source_name)?;
            let line = c.line.0;
            if line == 0 || !line.is_power_of_two() {
                return Err(err(c, "line", format!("{line} is not a power of two")));
            }
            let sub = c.sub_block.map_or(line, |s| s.0);
            if sub == 0 || !sub.is_power_of_two() || sub > line {
                return Err(err(
                    c,
                    "sub_block",
                    format!("{sub} is not a power of two no larger than the line ({line})"),
                ));
            }
            if line / sub > MAX_SUB_BLOCKS {
                return Err(err(
                    c,
                    "sub_block",
                    format!(
                        "{} sub-blocks per line: at most {MAX_SUB_BLOCKS}",
                        line / sub
                    ),
                ));
            }
            let size = c.size.0;
            if size == 0 || !size.is_multiple_of(line) {
                return Err(err(
                    c,
                    "size",
                    format!("{size} is not a positive multiple of the line ({line})"),
                ));
            }
            let lines = size / line;
            if lines > crate::tlb::MAX_ENTRIES as u64 {
                return Err(err(
                    c,
                    "size",
                    format!(
                        "{lines} lines is more than the maximum {}",
                        crate::tlb::MAX_ENTRIES
                    ),
                ));
            }
            let lines = lines as usize;
            let ways = match c.ways {
                Ways::Full => lines,
                Ways::N(0) => {
                    return Err(err(c, "ways", "must be at least 1 (or \"full\")".into()))
                }
                Ways::N(w) => w,
            };
            if !lines.is_multiple_of(ways) {
                return Err(err(
                    c,
                    "ways",
                    format!("{ways} does not divide the {lines} lines"),
                ));
            }
            let policy = c.policy;
            let seed = config.machine.seed ^ (0x5bd1_e995u64 << 8).wrapping_mul(i as u64 + 1);
            let tags = CacheTags::new(lines, ways, policy, seed).map_err(|m| err(c, "ways", m))?;
            let subs = line / sub;
            let distance = match (c.fetch, c.prefetch_distance) {
                (FetchPolicy::Demand, Some(_)) => {
                    return Err(err(
                        c,
                        "prefetch_distance",
                        "a demand-fetch cache does not prefetch (set fetch too)".into(),
                    ))
                }
                (_, Some(0)) => {
                    return Err(err(c, "prefetch_distance", "must be at least 1".into()))
                }
                (FetchPolicy::LoadForward | FetchPolicy::SubBlock, Some(d)) if d as u64 > subs => {
                    return Err(err(
                        c,
                        "prefetch_distance",
                        format!("{d} sub-blocks is more than the {subs} of a line"),
                    ))
                }
                (_, d) => d.unwrap_or(1) as u64 * sub,
            };
            let shadow = if c.three_c {
                Some(Box::new(
                    Shadow::new(lines, policy, seed ^ 0x3c, subs == 1)
                        .map_err(|m| err(c, "3c", m))?,
                ))
            } else {
                None
            };
            let slots = tags.entries();
            let plain = subs == 1 && c.fetch == FetchPolicy::Demand;
            levels.push(Level {
                // A plain cache's one sub-block is valid whenever its block is: set from
                // the start, its valid bits need no store when a block is filled.
                valid: vec![plain as u32; slots],
                dirty: vec![0; slots],
                referenced: if c.fetch == FetchPolicy::Tagged {
                    vec![0; slots]
                } else {
                    Vec::new()
                },
                tags,
                block_shift: line.trailing_zeros(),
                block_mask: line - 1,
                sub_shift: sub.trailing_zeros(),
                sub_mask: subs - 1,
                write_back: c.write == super::WritePolicy::Back,
                allocate: c.allocate,
                fetch: c.fetch,
                distance,
                next: None,
                plain,
                next_quick: false,
                write_allocate: c.allocate == Allocate::Yes,
                shadow,
                t: Tallies::default(),
            });
        }
        // Wiring: each cache's next, no cycle, the next serving what is passed on; one first
        // level per kind.
        let mut is_next = vec![false; n];
        for (i, c) in specs.iter().enumerate() {
            let Some(name) = &c.next else { continue };
            let j = specs
                .iter()
                .position(|o| &o.name == name)
                .ok_or_else(|| err(c, "next", format!("no cache named '{name}'")))?;
            if j == i {
                return Err(err(
                    c,
                    "next",
                    "a cache cannot be its own next level".into(),
                ));
            }
            for kind in Kind::REFS {
                if c.serves.serves(kind) && !specs[j].serves.serves(kind) {
                    return Err(err(
                        c,
                        "next",
                        format!(
                            "'{name}' does not serve the {} references that '{}' passes on",
                            kind.name(),
                            c.name
                        ),
                    ));
                }
            }
            levels[i].next = Some(j);
            is_next[j] = true;
        }
        for (start, c) in specs.iter().enumerate() {
            let mut at = levels[start].next;
            let mut steps = 0;
            while let Some(j) = at {
                steps += 1;
                if j == start || steps > n {
                    return Err(err(c, "next", "the next-level links form a cycle".into()));
                }
                at = levels[j].next;
            }
        }
        for i in 0..n {
            if let Some(j) = levels[i].next {
                let c = &levels[j];
                levels[i].next_quick = c.plain
                    && c.write_allocate
                    && c.write_back
                    && c.shadow.is_none()
                    && c.next.is_none();
            }
        }
        let mut roots = [None; 3];
        for kind in Kind::REFS {
            for (i, c) in specs.iter().enumerate() {
                if is_next[i] || !c.serves.serves(kind) {
                    continue;
                }
                if let Some(r) = roots[kind as usize] {
                    let first: &CacheSpec = &specs[r];
                    return Err(err(
                        c,
                        "serves",
                        format!(
                            "'{}' and '{}' both take {} references first (or is one the other's next level?)",
                            first.name,
                            c.name,
                            kind.name()
                        ),
                    ));
                }
                roots[kind as usize] = Some(i);
            }
        }
        let first_only = config.machine.straddle == Straddle::First;
        let mut short = [Short {
            level: NO_LEVEL,
            classify: false,
            quick: false,
            limit: 0,
            block_shift: 0,
            block_mask: 0,
        }; 4];
        for kind in Kind::REFS {
            if let Some(r) = roots[kind as usize & 3] {
                let c: &Level = &levels[r];
                let writes_kept = c.write_allocate && c.write_back;
                if c.plain && (kind != Kind::Store || writes_kept) {
                    short[kind as usize & 3] = Short {
                        level: r,
                        classify: c.shadow.is_some(),
                        quick: c.next.is_none(),
                        // A size is at most 2^16 - 1 and an offset below 2^63: no overflow.
                        limit: if first_only {
                            u64::MAX
                        } else {
                            c.block_mask + 1
                        },
                        block_shift: c.block_shift,
                        block_mask: c.block_mask,
                    };
                }
            }
        }
        Ok(Some(Hierarchy {
            short,
            pending: vec![Vec::new(); n],
            levels,
            specs: specs.clone(),
            roots,
            base,
            first_only,
            mode: Mode::User,
        }))
    }

    /// The caches' names, in config order (their ledger indices follow `base`).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.iter().map(|c| c.name.as_str())
    }

    /// Whether some cache classifies its misses.
    pub fn classifies(&self) -> bool {
        self.levels.iter().any(|l| l.shadow.is_some())
    }

    /// Simulate reference `e` (counted in `ledger`, under its running address space).
    #[inline]
    pub fn reference(&mut self, e: &Event, ledger: &mut Ledger) {
        self.reference_parts(e.addr, e.size, e.kind, e.mode, ledger);
    }

    /// A reference the translation machinery makes (a page-table walker's table read or
    /// write, at its physical address), in kernel mode; returns whether it missed the first
    /// level.
    pub fn machinery(&mut self, addr: u64, size: u16, kind: Kind, ledger: &mut Ledger) -> bool {
        let Some(root) = self.roots[kind as usize & 3] else {
            return false;
        };
        let at = self.base + root;
        let before = ledger.current(at, Mode::Kernel, kind).misses;
        self.reference_parts(addr, size, kind, Mode::Kernel, ledger);
        ledger.current(at, Mode::Kernel, kind).misses != before
    }

    /// [`Hierarchy::reference`] of a reference given by its fields.
    #[inline(always)]
    pub fn reference_parts(
        &mut self,
        addr: u64,
        size: u16,
        kind: Kind,
        mode: Mode,
        ledger: &mut Ledger,
    ) {
        // The short path (see [`Hierarchy::short`]): a hit is one tag look-up and a count.
        let short = self.short[kind as usize & 3];
        if short.level != NO_LEVEL {
            self.mode = mode;
            let lv = short.level;
            let c = &mut self.levels[lv];
            if (addr & c.block_mask) + size as u64 <= short.limit {
                let block = addr >> c.block_shift;
                if let Some(slot) = c.tags.lookup(block) {
                    if kind == Kind::Store {
                        c.dirty[slot] = 1;
                    }
                    if short.classify {
                        return self.short_hit_classified(lv, kind, block, ledger);
                    }
                    ledger.access(self.base + lv, mode, kind, false);
                    return;
                }
                return self.short_miss(lv, addr, size, kind, ledger);
            }
        }
        self.reference_full(addr, size, kind, mode, ledger);
    }

    /// [`Hierarchy::reference_parts`] of a reference that does not take the short path.
    #[inline(never)]
    fn reference_full(
        &mut self,
        addr: u64,
        size: u16,
        kind: Kind,
        mode: Mode,
        ledger: &mut Ledger,
    ) {
        let Some(root) = self.roots[kind as usize & 3] else {
            return;
        };
        self.mode = mode;
        let r = self.first_ref(root, addr, size, kind);
        self.run(root, r, ledger);
    }

    /// A hit on the short path of a level that classifies its misses: the shadow sees it too.
    #[inline(never)]
    fn short_hit_classified(&mut self, lv: usize, kind: Kind, block: u64, ledger: &mut Ledger) {
        if let Some(s) = &mut self.levels[lv].shadow {
            s.hit(block, CTX);
        }
        ledger.access(self.base + lv, self.mode, kind, false);
    }

    /// A miss on the short path: what [`Hierarchy::plain_miss`] does for it (a plain first
    /// level, where a write is kept dirty), a transfer to memory only counted.
    #[inline(never)]
    fn short_miss(&mut self, lv: usize, addr: u64, size: u16, kind: Kind, ledger: &mut Ledger) {
        let c = &mut self.levels[lv];
        let block = addr >> c.block_shift;
        let (slot, evicted) = c.tags.fill(block);
        ledger.access(self.base + lv, self.mode, kind, true);
        self.short_filled(lv, addr, size, kind, slot, evicted, ledger);
    }

    /// A miss on the short path of cache `lv` past its fill (the block of `addr` now in
    /// `slot`, `evicted` the victim) and its count as an access that missed: the slot's
    /// state, the shadow, the fetch and the victim's write-back.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn short_filled(
        &mut self,
        lv: usize,
        addr: u64,
        size: u16,
        kind: Kind,
        slot: usize,
        evicted: Option<u64>,
        ledger: &mut Ledger,
    ) {
        let write = kind == Kind::Store;
        let c = &mut self.levels[lv];
        let block = addr >> c.block_shift;
        let block_bytes = c.block_mask + 1;
        let mut writeback = None;
        if let Some(v) = evicted {
            if c.valid[slot] & c.dirty[slot] != 0 {
                writeback = Some(v << c.block_shift);
                c.t.writebacks += 1;
            }
        }
        c.valid[slot] = 1;
        c.dirty[slot] = write as u32;
        c.t.block_misses[kind as usize & 3] += 1;
        if let Some(s) = &mut c.shadow {
            let (class, block_class) = s.classify(block, CTX, 1, true, true, true);
            if let Some(k) = class {
                ledger.classify(self.base + lv, self.mode, kind, k);
            }
            if let Some(k) = block_class {
                c.t.block_classes[k as usize][kind as usize & 3] += 1;
            }
        }
        let fetch = Ref {
            addr: block << c.block_shift,
            size: block_bytes,
            kind: if write { Kind::Load } else { kind },
            prefetch: false,
        };
        // A write that covers its whole block fetches nothing.
        if !write || self.first_ref(lv, addr, size, kind).size != block_bytes {
            self.send(lv, fetch, ledger);
        }
        self.write_back(lv, writeback, block_bytes, ledger);
    }

    /// The victim block a miss of cache `lv` wrote back (if it had a dirty one), stored
    /// whole to the next level.
    #[inline(always)]
    fn write_back(
        &mut self,
        lv: usize,
        victim: Option<u64>,
        block_bytes: u64,
        ledger: &mut Ledger,
    ) {
        if let Some(addr) = victim {
            let r = Ref {
                addr,
                size: block_bytes,
                kind: Kind::Store,
                prefetch: false,
            };
            self.send(lv, r, ledger);
        }
    }

    /// [`Hierarchy::transfer`], counted at once when cache `lv` is the last level.
    #[inline(always)]
    fn send(&mut self, lv: usize, r: Ref, ledger: &mut Ledger) {
        let c = &mut self.levels[lv];
        if let Some(next) = c.next {
            if c.next_quick {
                return self.transfer_quick(lv, next, r, ledger);
            }
            return self.transfer(lv, r, ledger);
        }
        if r.kind == Kind::Store {
            c.t.bytes_written += r.size;
        } else {
            c.t.bytes_read += r.size;
        }
    }

    /// The reference a first level `root` sees of `size` bytes from `addr`: ending at the top
    /// of the address space at most, and with `machine.straddle = "first"` at the end of the
    /// block of its first byte.
    #[inline(always)]
    fn first_ref(&self, root: usize, addr: u64, size: u16, kind: Kind) -> Ref {
        // An access past 2^64 ends at the top of the address space.
        let size = (size.max(1) as u64).min((u64::MAX - addr).saturating_add(1));
        let mut r = Ref {
            addr,
            size,
            kind,
            prefetch: false,
        };
        if self.first_only {
            let shift = self.levels[root].block_shift;
            let to_end = (!addr & ((1u64 << shift) - 1)) + 1;
            r.size = r.size.min(to_end);
        }
        r
    }

    /// Reference `r` to cache `lv`, then everything it left pending there.
    #[inline(always)]
    fn run(&mut self, lv: usize, r: Ref, ledger: &mut Ledger) {
        self.access(lv, r, ledger);
        if !self.pending[lv].is_empty() {
            self.drain(lv, ledger);
        }
    }

    /// Process cache `lv`'s pending references, last pushed first, until none is left.
    #[inline(never)]
    fn drain(&mut self, lv: usize, ledger: &mut Ledger) {
        while let Some(p) = self.pending[lv].pop() {
            if p.own {
                self.access(lv, p.r, ledger);
            } else {
                self.transfer(lv, p.r, ledger);
            }
        }
    }

    /// One reference to cache `lv` (DineroIV's `d4ref`); what it leaves for later goes on
    /// the cache's stack. A reference within one block of a plain cache (see
    /// [`Level::plain`]) takes the plain path: one tag access, a count, and on a miss
    /// [`Hierarchy::plain_miss`]. (A first level's plain path is [`Short`]'s.)
    #[inline(always)]
    fn access(&mut self, lv: usize, m: Ref, ledger: &mut Ledger) {
        let c = &mut self.levels[lv];
        let write = m.kind == Kind::Store;
        if c.plain && (!write || c.write_allocate) {
            let block = m.addr >> c.block_shift;
            if (m.addr + (m.size - 1)) >> c.block_shift == block {
                let t = c.tags.access(block);
                if t.hit && c.shadow.is_none() && (!write || c.write_back) {
                    ledger.access(self.base + lv, self.mode, m.kind, false);
                    if write {
                        c.dirty[t.slot] = 1;
                    }
                    return;
                }
                return self.plain_touched(lv, m, block, t, ledger);
            }
        }
        self.access_slow(lv, m, ledger);
    }

    /// The plain path past its tag access, other than a hit that is only counted (a miss, a
    /// write-through write, and with classification every reference): a write-through hit is
    /// counted and sent on; the rest is [`Hierarchy::plain_miss`].
    #[inline(never)]
    fn plain_touched(&mut self, lv: usize, m: Ref, block: u64, t: Touch, ledger: &mut Ledger) {
        let c = &self.levels[lv];
        if t.hit && c.shadow.is_none() {
            ledger.access(self.base + lv, self.mode, m.kind, false);
            return self.transfer(lv, m, ledger);
        }
        self.plain_miss(lv, m, block, t, ledger)
    }

    /// The plain path's miss (and, with classification, every reference): what
    /// [`Hierarchy::access_slow`] does for a reference within one block of a plain cache,
    /// its transfers made at once in the order the stack would pop them (the fetch, a
    /// write-through, the victim's write-back), each through every level below before the
    /// next. Nothing else can come between: what a reference pushes is popped before
    /// anything older.
    #[inline(always)]
    fn plain_miss(&mut self, lv: usize, m: Ref, block: u64, t: Touch, ledger: &mut Ledger) {
        let c = &mut self.levels[lv];
        let write = m.kind == Kind::Store;
        let kind = m.kind as usize & 3;
        let miss = !t.hit;
        let block_bytes = 1u64 << c.block_shift;
        let mut writeback = None;
        if miss {
            if let Some(v) = t.evicted {
                if c.valid[t.slot] & c.dirty[t.slot] != 0 {
                    writeback = Some(v << c.block_shift);
                    c.t.writebacks += 1;
                }
            }
            c.valid[t.slot] = 1;
            c.dirty[t.slot] = 0;
            c.t.block_misses[kind] += 1;
        }
        let wback = write && c.write_back;
        if wback {
            c.dirty[t.slot] = 1;
        }
        if let Some(s) = &mut c.shadow {
            let (class, block_class) = s.classify(block, CTX, 1, true, miss, miss);
            if let Some(k) = class {
                ledger.classify(self.base + lv, self.mode, m.kind, k);
            }
            if let Some(k) = block_class {
                c.t.block_classes[k as usize][kind] += 1;
            }
        }
        ledger.access(self.base + lv, self.mode, m.kind, miss);
        // A write that covers its whole block fetches nothing.
        if miss && (!write || m.size != block_bytes) {
            let fetch = Ref {
                addr: block << c.block_shift,
                size: block_bytes,
                kind: if write { Kind::Load } else { m.kind },
                prefetch: false,
            };
            self.send(lv, fetch, ledger);
        }
        if write && !wback {
            self.send(lv, m, ledger);
        }
        self.write_back(lv, writeback, block_bytes, ledger);
    }

    /// Reference `r` from cache `lv` to its next level (or memory): counted in its bytes,
    /// then made there completely.
    #[inline(never)]
    fn transfer(&mut self, lv: usize, r: Ref, ledger: &mut Ledger) {
        let t = &mut self.levels[lv].t;
        if r.kind == Kind::Store {
            t.bytes_written += r.size;
        } else {
            t.bytes_read += r.size;
        }
        if let Some(next) = self.levels[lv].next {
            self.run(next, r, ledger);
        }
    }

    /// [`Hierarchy::transfer`] from cache `lv` to its next level `next`, which is quick (see
    /// [`Level::next_quick`]): a reference within one of its blocks is what the plain path
    /// ([`Hierarchy::access`], [`Hierarchy::plain_miss`]) makes of it there — one tag
    /// access, a count, and on a miss the slot's dirty bit and the transfers to memory,
    /// only counted — with nothing left pending.
    #[inline(never)]
    fn transfer_quick(&mut self, lv: usize, next: usize, r: Ref, ledger: &mut Ledger) {
        let write = r.kind == Kind::Store;
        let t = &mut self.levels[lv].t;
        if write {
            t.bytes_written += r.size;
        } else {
            t.bytes_read += r.size;
        }
        let c = &mut self.levels[next];
        let block = r.addr >> c.block_shift;
        if (r.addr + (r.size - 1)) >> c.block_shift != block {
            return self.run(next, r, ledger);
        }
        let t = c.tags.access(block);
        ledger.access(self.base + next, self.mode, r.kind, !t.hit);
        let dirty = &mut c.dirty[t.slot];
        if t.hit {
            if write {
                *dirty = 1;
            }
            return;
        }
        // A plain cache's valid bit is always set; a write is kept dirty.
        let block_bytes = c.block_mask + 1;
        if t.evicted.is_some() && *dirty != 0 {
            c.t.writebacks += 1;
            c.t.bytes_written += block_bytes;
        }
        *dirty = write as u32;
        c.t.block_misses[r.kind as usize & 3] += 1;
        // A write that covers its whole block fetches nothing.
        if !write || r.size != block_bytes {
            c.t.bytes_read += block_bytes;
        }
    }

    /// [`Hierarchy::access`] in full.
    #[inline(never)]
    fn access_slow(&mut self, lv: usize, mut m: Ref, ledger: &mut Ledger) {
        let stack = &mut self.pending[lv];
        let c = &mut self.levels[lv];
        let block_shift = c.block_shift;
        let block = m.addr >> block_shift;
        // 1. Split at the block boundary: the rest is referenced after this part.
        if (m.addr + (m.size - 1)) >> block_shift != block {
            let next = (block + 1) << block_shift;
            stack.push(Pending {
                r: Ref {
                    addr: next,
                    size: m.size - (next - m.addr),
                    ..m
                },
                own: true,
            });
            c.t.multi_block += 1;
            m.size = next - m.addr;
        }
        let sub_shift = c.sub_shift;
        let lo = (m.addr >> sub_shift) & c.sub_mask;
        let hi = ((m.addr + (m.size - 1)) >> sub_shift) & c.sub_mask;
        let subs = sub_bits(lo, hi);
        let covered = m.size == (hi - lo + 1) << sub_shift;
        let write = m.kind == Kind::Store;
        let walloc = write
            && match c.allocate {
                Allocate::Yes => true,
                Allocate::No => false,
                Allocate::NoFetch => covered,
            };
        // 2. Look up (and, unless a write that does not allocate misses, bring the block in:
        // the slot then holds the victim's state until it is reset below).
        let (slot, block_miss, victim) = if write && !walloc {
            match c.tags.lookup(block) {
                Some(slot) => (slot, false, None),
                None => (usize::MAX, true, None),
            }
        } else {
            let t = c.tags.access(block);
            (t.slot, !t.hit, t.evicted)
        };
        let valid_before = if block_miss { 0 } else { c.valid[slot] };
        let miss = block_miss || valid_before & subs != subs;
        // 3. Prefetch (demand reads and fetches), decided on the state before this reference.
        if !m.prefetch && !write && c.fetch != FetchPolicy::Demand {
            let target = m.addr.wrapping_add(c.distance);
            let wanted = match c.fetch {
                FetchPolicy::Demand => None,
                FetchPolicy::Always => Some(target),
                FetchPolicy::Miss => miss.then_some(target),
                FetchPolicy::Tagged => (miss || c.referenced[slot] & subs == 0).then_some(target),
                FetchPolicy::LoadForward => (target >> block_shift == block).then_some(target),
                FetchPolicy::SubBlock => Some(if target >> block_shift != block {
                    target.wrapping_sub(1 << block_shift)
                } else {
                    target
                }),
            };
            if let Some(a) = wanted {
                stack.push(Pending {
                    r: Ref {
                        addr: (a >> sub_shift) << sub_shift,
                        size: 1 << sub_shift,
                        kind: m.kind,
                        prefetch: true,
                    },
                    own: true,
                });
            }
        }
        // 4. Update.
        let mut wback = false;
        if !(write && block_miss && !walloc) {
            if block_miss {
                if let Some(v) = victim {
                    let dirty = c.valid[slot] & c.dirty[slot];
                    if dirty != 0 {
                        push_writebacks(stack, &mut c.t, v << block_shift, dirty, sub_shift);
                    }
                }
                c.valid[slot] = 0;
                c.dirty[slot] = 0;
                if let Some(r) = c.referenced.get_mut(slot) {
                    *r = 0;
                }
            }
            c.valid[slot] |= subs;
            if !m.prefetch {
                if let Some(r) = c.referenced.get_mut(slot) {
                    *r |= subs;
                }
            }
            wback = write && c.write_back;
            if wback {
                c.dirty[slot] |= subs;
            }
        }
        // 5. Transfers to the next level (popped in the reverse order).
        if write && !wback {
            stack.push(Pending { r: m, own: false });
        }
        if miss && (!write || (walloc && !covered)) {
            stack.push(Pending {
                r: Ref {
                    addr: (m.addr >> sub_shift) << sub_shift,
                    size: (hi - lo + 1) << sub_shift,
                    kind: if write { Kind::Load } else { m.kind },
                    prefetch: false,
                },
                own: false,
            });
        }
        // Classes.
        let kind = m.kind as usize & 3;
        let (class, block_class) = match &mut c.shadow {
            Some(s) => s.classify(block, CTX, subs, !write || walloc, miss, block_miss),
            None => (None, None),
        };
        // 6. Counts.
        let t = &mut c.t;
        if m.prefetch {
            t.prefetches[kind] += 1;
            t.prefetch_misses[kind] += miss as u64;
            t.prefetch_block_misses[kind] += block_miss as u64;
            if let Some(k) = class {
                t.prefetch_classes[k as usize][kind] += 1;
            }
            if let Some(k) = block_class {
                t.prefetch_block_classes[k as usize][kind] += 1;
            }
        } else {
            ledger.access(self.base + lv, self.mode, m.kind, miss);
            t.block_misses[kind] += block_miss as u64;
            if let Some(k) = class {
                ledger.classify(self.base + lv, self.mode, m.kind, k);
            }
            if let Some(k) = block_class {
                t.block_classes[k as usize][kind] += 1;
            }
        }
    }

    /// A copy of this hierarchy and of `ledger` after DineroIV's copy-back at the end (see
    /// the module documentation): what a result reports.
    pub fn flushed(&self, ledger: &Ledger) -> (Hierarchy, Ledger) {
        let mut h = self.clone();
        let mut l = ledger.clone();
        // DineroIV copies back its data cache, and each cache the next below it; then (a
        // unified first level is the same cache) any other first level with dirty data.
        let mut done = Vec::new();
        for kind in [Kind::Load, Kind::Store, Kind::Fetch] {
            if let Some(r) = h.roots[kind as usize] {
                if !done.contains(&r) {
                    done.push(r);
                    h.copy_back(r, &mut l);
                }
            }
        }
        (h, l)
    }

    /// Write every dirty block of cache `lv` back to its next level, in the order DineroIV
    /// does, then copy back the next level.
    fn copy_back(&mut self, lv: usize, ledger: &mut Ledger) {
        let c = &mut self.levels[lv];
        if c.write_back {
            let order = c.tags.eviction_order();
            let ways = c.tags.ways();
            // DineroIV pushes sets in increasing order, each from its most recently used
            // block; the stack pops them the other way round.
            let mut writes: Vec<Pending> = Vec::new();
            for (set, blocks) in order.iter().enumerate() {
                for &(way, block) in blocks.iter().rev() {
                    let slot = set * ways + way;
                    let dirty = c.valid[slot] & c.dirty[slot];
                    if dirty != 0 {
                        let before = c.t.writebacks;
                        push_writebacks(
                            &mut writes,
                            &mut c.t,
                            block << c.block_shift,
                            dirty,
                            c.sub_shift,
                        );
                        c.t.flushed += c.t.writebacks - before;
                        c.dirty[slot] = 0;
                    }
                }
            }
            self.pending[lv].extend(writes);
            self.drain(lv, ledger);
        }
        if let Some(next) = self.levels[lv].next {
            self.copy_back(next, ledger);
        }
    }

    /// The fields of cache `i` in its `structures` entry beyond those every structure has
    /// (the ledger's counts and breakdowns): its geometry, `type`, `block_misses`,
    /// `writebacks`, `flushed`, `multi_block`, `bytes_read`, `bytes_written`, `prefetches`
    /// (`accesses`, `misses`, `block_misses`, by kind, and with classification their
    /// classes), and with sub-blocks or classification `block_miss_breakdown` (block misses
    /// by kind and their classes).
    pub fn fields(&self, i: usize) -> Map<String, Value> {
        let (c, lv) = (&self.specs[i], &self.levels[i]);
        let t = &lv.t;
        let classes = lv.shadow.is_some();
        let sum = |a: &[u64; 3]| a.iter().sum::<u64>();
        let by_kind = |a: &[u64; 3]| -> Value {
            Value::Object(
                Kind::REFS
                    .iter()
                    .map(|k| (k.name().to_string(), json!(a[*k as usize])))
                    .collect(),
            )
        };
        let mut m = Map::new();
        m.insert("type".into(), json!("cache"));
        m.insert("block_misses".into(), json!(sum(&t.block_misses)));
        m.insert("writebacks".into(), json!(t.writebacks));
        m.insert("flushed".into(), json!(t.flushed));
        m.insert("multi_block".into(), json!(t.multi_block));
        m.insert("bytes_read".into(), json!(t.bytes_read));
        m.insert("bytes_written".into(), json!(t.bytes_written));
        {
            let mut p = Map::new();
            p.insert("accesses".into(), json!(sum(&t.prefetches)));
            p.insert("misses".into(), json!(sum(&t.prefetch_misses)));
            p.insert("block_misses".into(), json!(sum(&t.prefetch_block_misses)));
            let mut kinds = Map::new();
            for kind in Kind::REFS {
                let k = kind as usize;
                let mut e = Map::new();
                e.insert("accesses".into(), json!(t.prefetches[k]));
                e.insert("misses".into(), json!(t.prefetch_misses[k]));
                e.insert("block_misses".into(), json!(t.prefetch_block_misses[k]));
                if classes {
                    for (ci, name) in crate::threec::CLASSES.iter().enumerate() {
                        e.insert((*name).into(), json!(t.prefetch_classes[ci][k]));
                    }
                }
                kinds.insert(kind.name().into(), Value::Object(e));
            }
            if classes {
                for (ci, name) in crate::threec::CLASSES.iter().enumerate() {
                    p.insert((*name).into(), json!(sum(&t.prefetch_classes[ci])));
                }
                let mut b = Map::new();
                for (ci, name) in crate::threec::CLASSES.iter().enumerate() {
                    b.insert((*name).into(), by_kind(&t.prefetch_block_classes[ci]));
                }
                p.insert("block_classes".into(), Value::Object(b));
            }
            p.insert("by_kind".into(), Value::Object(kinds));
            m.insert("prefetches".into(), Value::Object(p));
        }
        if lv.sub_mask != 0 || classes {
            let mut b = Map::new();
            b.insert("by_kind".into(), by_kind(&t.block_misses));
            if classes {
                for (ci, name) in crate::threec::CLASSES.iter().enumerate() {
                    b.insert((*name).into(), by_kind(&t.block_classes[ci]));
                }
            }
            m.insert("block_miss_breakdown".into(), Value::Object(b));
        }
        let mut g = Map::new();
        g.insert("size".into(), json!(c.size.0));
        g.insert("line".into(), json!(1u64 << lv.block_shift));
        g.insert("sub_block".into(), json!(1u64 << lv.sub_shift));
        g.insert("sets".into(), json!(lv.tags.sets()));
        g.insert("ways".into(), json!(lv.tags.ways()));
        g.insert("policy".into(), json!(c.policy));
        g.insert(
            "serves".into(),
            serde_json::to_value(c.serves).unwrap_or(Value::Null),
        );
        g.insert(
            "next".into(),
            json!(c.next.clone().unwrap_or_else(|| "memory".into())),
        );
        g.insert(
            "write".into(),
            serde_json::to_value(c.write).unwrap_or_default(),
        );
        g.insert(
            "allocate".into(),
            serde_json::to_value(c.allocate).unwrap_or_default(),
        );
        g.insert("fetch".into(), json!(c.fetch.name()));
        if c.fetch != FetchPolicy::Demand {
            g.insert(
                "prefetch_distance".into(),
                json!(lv.distance >> lv.sub_shift),
            );
        }
        g.insert("level".into(), json!(self.level_of(i)));
        m.insert("geometry".into(), Value::Object(g));
        m
    }

    /// The level of cache `i`: 1 for a first level, else one more than the deepest cache
    /// naming it as `next` (DineroIV's `l1`, `l2`, …).
    pub fn level_of(&self, i: usize) -> usize {
        (0..self.levels.len())
            .filter(|&j| self.levels[j].next == Some(i))
            .map(|j| self.level_of(j) + 1)
            .max()
            .unwrap_or(1)
    }

    /// Bytes the caches of `config` take once built (tags, sub-block masks, shadows).
    pub fn memory_estimate(config: &MachineConfig) -> u64 {
        let mut total = 0u64;
        for c in &config.caches {
            let lines = c.size.0.checked_div(c.line.0).unwrap_or(0);
            let lines = usize::try_from(lines).unwrap_or(usize::MAX).max(1);
            let ways = match c.ways {
                Ways::Full => lines,
                Ways::N(n) => n.clamp(1, lines),
            };
            let tags = CacheTags::heap_bytes(lines, ways);
            total = total
                .saturating_add(tags)
                .saturating_add(12u64.saturating_mul(lines as u64));
            if c.three_c {
                total = total.saturating_add(Shadow::<CacheTags>::heap_bytes(lines));
            }
        }
        total
    }
}

/// Push the write-backs of the dirty sub-blocks `dirty` of the block at `block_addr`: one
/// write per contiguous run, in increasing address order (so the stack pops the last first).
fn push_writebacks(
    stack: &mut Vec<Pending>,
    t: &mut Tallies,
    block_addr: u64,
    dirty: u32,
    sub_shift: u32,
) {
    let mut bits = dirty;
    while bits != 0 {
        let lo = bits.trailing_zeros();
        let run = (bits >> lo).trailing_ones();
        stack.push(Pending {
            r: Ref {
                addr: block_addr + ((lo as u64) << sub_shift),
                size: (run as u64) << sub_shift,
                kind: Kind::Store,
                prefetch: false,
            },
            own: false,
        });
        t.writebacks += 1;
        bits &= !(((1u64 << run) - 1) << lo) as u32;
    }
}

/// A cache's name must be a name, unique among caches and TLBs.
fn check_name(
    c: &CacheSpec,
    i: usize,
    specs: &[CacheSpec],
    config: &MachineConfig,
    source_name: &str,
) -> Result<()> {
    if c.name.is_empty()
        || !c
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
    {
        return Err(Error::config(
            source_name,
            format!("cache[{i}].name"),
            format!("'{}' is not a name (letters, digits, _ and -)", c.name),
        ));
    }
    if specs[..i].iter().any(|o| o.name == c.name) {
        return Err(Error::config(
            source_name,
            format!("cache.{}.name", c.name),
            "two caches have this name",
        ));
    }
    if c.name == "walk" || config.tlbs.iter().any(|t| t.name == c.name) {
        return Err(Error::config(
            source_name,
            format!("cache.{}.name", c.name),
            "a TLB (or the walk) has this name: structures are reported by name",
        ));
    }
    Ok(())
}

mod alone;
mod summary;
pub(crate) use alone::{AnyStore, FirstStore, Ordered, ShortTally, Stores};
pub use summary::dinero_summary;

#[cfg(test)]
mod dinero;
#[cfg(test)]
mod tests;
