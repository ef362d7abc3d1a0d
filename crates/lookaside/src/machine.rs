//! A machine: the structures one config describes, wired together, consuming event batches.
//!
//! [`Machine::build`] is the second phase of configuration: it validates the raw
//! [`MachineConfig`] (naming the offending key) and derives what the hot path needs — the
//! first-level structure per reference kind, each structure's `next` level, page shifts,
//! context tags. [`Machine::run_batch`] is the hot path: per reference one page-map lookup
//! (a constant when there are no regions) and one probe per level until a hit.
//!
//! Semantics, in one place:
//! - A reference of kind K enters a root structure serving K (a structure no other one names
//!   as `next`). A miss goes to `next`; a miss in the last level is a *walk*. Every level
//!   probed fills on a miss (levels are neither inclusive nor exclusive by force).
//! - Several structures serving K at one point — roots, or the structures one `next` list
//!   names — are siblings: they hold different page sizes, and a reference goes to the one
//!   holding the largest size not larger than the page backing it (its size, or fragments of
//!   it: see [`Route`]). [`Machine::build`] refuses siblings holding one size, and a page size
//!   in use that reaches a point where no sibling holds it or a smaller size.
//! - An access whose last byte lies in another page touches both pages when
//!   `machine.straddle = "split"` (two translations, counted as two accesses).
//! - Entries are tagged by address space unless `asid = false`; an untagged structure loses its
//!   non-global entries whenever the running address space changes (explicitly by a
//!   context-switch event, or implicitly by a reference of another address space).
//!   Pages at or above `machine.global_above` get global entries that match every address space
//!   and survive those flushes.
//! - `TlbFlush` with `FLUSH_ALL` empties every structure; with an address it invalidates that
//!   page in every structure, as do `Unmap` and `Protect` (a shootdown); `Unmap` also takes
//!   the page out of the `[pagetable]`, so that its next walk faults.
//! - With a memory system (`[memory]`), the translation machinery's own references reach its
//!   caches as kernel references, through [`MemorySystem::machinery`]: the handlers that
//!   `[memory.handler]` synthesises, the software-refill model's handlers (`[refill]`: their
//!   instruction fetches and PTE loads, see [`crate::mmu::HandlerStep`]), or the page-table
//!   walker's table reads (`[pagetable]`, instead of its private data cache). They come
//!   before the reference that caused them.

use crate::cache::hier::{AnyStore, FirstStore, Hierarchy, Ordered, Stores};
use crate::cache::system::{Activity, At, MemorySystem};
use crate::cache::vac::drive::VacDriver;
use crate::config::{
    HandlerConfig, MachineConfig, Origin, PageSize, Placement, Serves, Straddle, TlbConfig, Ways,
};
use crate::error::{Error, Result};
use crate::event::{Event, EventSink, Kind, Mode, FLUSH_ALL};
use crate::ledger::Ledger;
use crate::mmu::addresses::Place;
use crate::mmu::layout::{self, Segment};
use crate::mmu::{HandlerStep, SoftwareManagedTlb, Trap, Walker};
use crate::threec::Shadow;
use crate::tlb::{Engine, HillClimber, Part, Partition, Policy, Tlb, TlbParams, NO_CTX};
use crate::trace::kernel::{KernelClass, KernelLayout, LayoutSource};
use crate::trace::native::NativeReader;
use crate::trace::Metadata;

mod alone;
mod climb;
mod prefetch;
use alone::CacheFeed;
use climb::Climb;
use prefetch::{Prefetcher, Recent};

/// Context-tag bit of a global entry.
const GLOBAL: u64 = 1 << 40;

/// The address space whose page mapping places the pages of MIPS kseg2 on a machine with
/// `[refill]` and `[memory]`: kseg2 is global, so its pages have one frame whoever runs.
pub const KSEG2_SPACE: u32 = crate::cache::system::KERNEL_SPACE;

/// A structure and how it is wired.
#[derive(Debug)]
struct Unit {
    tlb: Engine,
    /// Page shifts held, largest first.
    shifts: Vec<u32>,
    tagged: bool,
    placement: Placement,
    /// Context tags of an entry for the default page size under the running address space,
    /// non-global and global (kept current by [`Machine::switch_to`] for the fast path).
    ctx_now: u64,
    ctx_global: u64,
    /// With `3c`: the shadow that classifies its misses ([`crate::threec`]).
    shadow: Option<Box<Shadow>>,
    /// With `partition.dynamic`: Uhlig's dynamic partitioning of this structure.
    climb: Option<Box<Climb>>,
}

impl Unit {
    /// The partition a new entry goes to, by the mode of the reference that missed.
    #[inline(always)]
    fn part(&self, mode: Mode) -> Part {
        match self.placement {
            Placement::KernelLower if mode == Mode::Kernel => Part::Lower,
            _ => Part::Upper,
        }
    }

    /// The page shift an entry for a page of `backing` shift has here: the largest size held
    /// that is not larger than the page (a larger page is cached as fragments).
    #[inline(always)]
    fn shift_for(&self, backing: u32) -> u32 {
        for &s in &self.shifts {
            if s <= backing {
                return s;
            }
        }
        // Unreachable after validation: a reference reaches only a structure holding its page
        // size or a smaller one (see [`Route`]).
        self.shifts[self.shifts.len() - 1]
    }

    #[inline(always)]
    fn ctx(&self, asid: u32, shift: u32, global: bool) -> u64 {
        let base = (shift as u64) << 32;
        if global {
            base | GLOBAL
        } else if self.tagged {
            base | asid as u64
        } else {
            base
        }
    }
}

/// No structure, in a [`Route`].
const NOWHERE: u8 = u8::MAX;

/// Where a reference goes at one point of the hierarchy — the first level, or the structures
/// a structure's `next` names — by its kind and the shift of the page backing it: to the
/// structure there that holds the largest page size not larger than the page (the one holding
/// its size, or the one caching it as fragments; the structures at one point serving one kind
/// hold different sizes, so there is one), or nowhere. A table lookup, indexed with masks so
/// that it needs no bounds check: no search per reference.
#[derive(Clone)]
struct Route([[u8; 64]; 4]);

impl std::fmt::Debug for Route {
    /// Per kind, the runs of shifts going to one structure: `[fetch 12..=20: 1, 21..=63: 2]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut runs = Vec::new();
        for kind in Kind::REFS {
            let r = &self.0[kind as usize];
            let mut s = 0;
            while s < 64 {
                let e = (s..64).take_while(|&x| r[x] == r[s]).last().unwrap_or(s);
                if r[s] != NOWHERE {
                    runs.push(format!("{} {s}..={e}: {}", kind.name(), r[s]));
                }
                s = e + 1;
            }
        }
        write!(f, "[{}]", runs.join(", "))
    }
}

impl Route {
    /// The route among `members` (structures, by index), whose held shifts are `shifts`.
    fn among(members: &[usize], serves: &[Serves], shifts: &[Vec<u32>]) -> Route {
        let mut r = [[NOWHERE; 64]; 4];
        for kind in Kind::REFS {
            for (backing, to) in r[kind as usize].iter_mut().enumerate() {
                let mut best: Option<(u32, usize)> = None;
                for &i in members.iter().filter(|&&i| serves[i].serves(kind)) {
                    for &s in &shifts[i] {
                        if s as usize <= backing && best.is_none_or(|(b, _)| s > b) {
                            best = Some((s, i));
                        }
                    }
                }
                if let Some((_, i)) = best {
                    *to = i as u8;
                }
            }
        }
        Route(r)
    }

    /// The structure a reference of `kind` to a page of `shift` goes to.
    #[inline(always)]
    fn at(&self, kind: Kind, shift: u32) -> Option<usize> {
        let u = self.0[kind as usize & 3][shift as usize & 63];
        (u != NOWHERE).then_some(u as usize)
    }
}

/// Which page size backs each address.
#[derive(Clone, Debug)]
struct PageMap {
    default: Option<u32>,
    /// (start, end, asid filter, shift or None = unmapped), first match wins.
    regions: Vec<(u64, u64, Option<u32>, Option<u32>)>,
    /// Every region is unmapped (a hole in the default page size, like MIPS kseg0): the fast
    /// path still applies outside the holes.
    has_holes: bool,
}

impl PageMap {
    #[inline(always)]
    fn backing(&self, addr: u64, asid: u32) -> Option<u32> {
        if self.regions.is_empty() {
            return self.default;
        }
        for &(start, end, a, shift) in &self.regions {
            if addr >= start && addr < end && a.is_none_or(|a| a == asid) {
                return shift;
            }
        }
        self.default
    }

    /// The addresses around `addr` backed as it is (for `asid`): `[lo, hi]`, inclusive.
    fn span(&self, addr: u64, asid: u32) -> (u64, u64) {
        let (mut lo, mut hi) = (0, u64::MAX);
        for &(start, end, a, _) in &self.regions {
            if a.is_some_and(|a| a != asid) {
                continue;
            }
            if addr >= start && addr < end {
                return (lo.max(start), hi.min(end - 1));
            }
            if end <= addr {
                lo = lo.max(end);
            } else {
                hi = hi.min(start - 1);
            }
        }
        (lo, hi)
    }

    /// Whether some address of `[start, end)` is translated (backed by pages) in an address
    /// space no region singles out.
    fn translates_any(&self, start: u64, end: u64) -> bool {
        let mut a = start;
        while a < end {
            if self.backing(a, u32::MAX).is_some() {
                return true;
            }
            match self.span(a, u32::MAX).1.checked_add(1) {
                Some(next) => a = next,
                None => return false,
            }
        }
        false
    }

    /// Every shift some address can be backed by.
    fn shifts(&self) -> impl Iterator<Item = u32> + '_ {
        self.default
            .into_iter()
            .chain(self.regions.iter().filter_map(|r| r.3))
    }
}

/// The share of a run's references left unsimulated above which its result warns (and a
/// MIPS machine refuses a trace whose user references are out of kuseg): 1 %. A few stray
/// references — a 64-bit program's vsyscall page, a kernel reference into x86-64's direct
/// map — move no miss ratio in its second digit; above 1 % the numbers describe another
/// stream than the trace, and whoever reads them must be told.
pub const DROPPED_WARN_SHARE: f64 = 0.01;

/// `dropped` of `all` translations, as a share (0 of none).
pub fn dropped_share(dropped: u64, all: u64) -> f64 {
    match all {
        0 => 0.0,
        _ => dropped as f64 / all as f64,
    }
}

/// What a result must say about translations left unsimulated, one sentence each: none
/// unless more than [`DROPPED_WARN_SHARE`] of `all` were `dropped` (see
/// [`Machine::dropped`]). One message for every engine.
pub fn unsimulated_warnings(dropped: u64, all: u64) -> Vec<String> {
    if dropped_share(dropped, all) <= DROPPED_WARN_SHARE {
        return Vec::new();
    }
    vec![format!(
        "{:.1} % of the translations were not simulated ({dropped} of {all}): address errors of the MIPS software-refill model (user references above kuseg, 2 GB, that are not folded; any reference at or above 4 GB: traps.address_errors) or accesses past 2^64 (trace.wrapped)",
        100.0 * dropped_share(dropped, all)
    )]
}

/// A simulated machine.
#[derive(Debug)]
pub struct Machine {
    config: MachineConfig,
    units: Vec<Unit>,
    /// The first-level structure of each reference, by its kind and page size.
    roots: Route,
    /// Per reference kind (fetch, load, store), whether some structure translates it.
    translated: [bool; 3],
    /// Per structure, where its misses go, by kind and page size (nowhere: a walk).
    next: Vec<Route>,
    pages: PageMap,
    split: bool,
    global_above: u64,
    cur_asid: u32,
    /// Per structure and reference kind, a page whose next reference of that kind is a hit
    /// that changes nothing (see [`Feed`]), when every address is backed by the default page
    /// size (else always [`NO_PAGE`]); four kinds so that a masked kind needs no bounds check.
    last_page: Vec<[u64; 4]>,
    /// Per structure, whether its hits change no replacement state at all (see
    /// [`TlbParams::hits_change_nothing`]).
    free_hits: Vec<bool>,
    /// Per structure, its page shift for the default page size.
    default_shift: Vec<u32>,
    /// Every address is backed by the default page size, or by none (a hole): the fast
    /// path's last pages are page numbers; else [`entry_key`]s, with [`Machine::memo`].
    uniform: bool,
    /// Per reference kind, the last first-level entry, when not `uniform`.
    memo: [Memo; 4],
    /// Per reference kind, what the fast path does (derived from `roots` and the page map).
    fast: [Fast; 3],
    /// Per reference kind with [`Fast::Root`]: its first-level structure has no next level at
    /// the default page size, so a miss there goes straight to the walk, which the fast path
    /// then only counts ([`Tally::walks`]; plain references never have a walker).
    alone: [bool; 3],
    ledger: Ledger,
    /// The software-refill model, when the config has `[refill]`: it owns the (one) TLB and
    /// takes every batch instead of the hierarchy below.
    refill: Option<Box<SoftwareManagedTlb>>,
    /// The memory system, when the config has `[memory]`: every event then takes
    /// [`Machine::memory_event`] (translation, then caches), not the fast path.
    memory: Option<Box<MemorySystem>>,
    /// The TLB miss handlers whose work [`Machine::memory_event`] synthesises.
    handler: Option<HandlerConfig>,
    /// The page-table walker, when the config has `[pagetable]`: every walk (a miss in the
    /// last level) searches its table.
    walker: Option<Box<Walker>>,
    /// The physical address of the reference being translated, for the walker (a page
    /// naming a physical page shares its frame with the other pages naming it).
    walk_paddr: u64,
    /// The virtually addressed cache, when the config has `[vac]`: it sees every event of
    /// [`Machine::run_batch`] before the TLBs do (a machine with one is never fed one event
    /// at a time, see [`Machine::fed_in_batches`]).
    vac: Option<Box<VacDriver>>,
    /// With `[refill]` and `[memory]`: the refill model's handler work of the last event.
    steps: Vec<HandlerStep>,
    /// The `[[cache]]` hierarchy, when the config has caches: every reference goes to it
    /// after translation (by its virtual address).
    caches: Option<Box<Hierarchy>>,
    /// The kernel classes of `[pages]` as resolved for the trace (see
    /// [`Machine::bind_trace`]).
    kernel: KernelBinding,
    /// References the synthesised miss handlers made (all kernel-mode, in the ledger beside
    /// the trace's own).
    handler_refs: u64,
    /// Bala's IPC-path prefetcher, when the config has `[prefetch]`.
    prefetch: Option<Box<Prefetcher>>,
    /// The structure whose miss the translation under way last took (what a walk fills, for
    /// the prefetcher).
    last_missed: usize,
}

/// No page: `addr >> shift` with `shift >= 1` never reaches it, nor does an [`entry_key`].
const NO_PAGE: u64 = u64::MAX;

/// The key of the entry for the page of `addr` at `shift` (at least 1), unique among all
/// pages of all sizes: the page's first address with its low `shift - 1` bits set (the lowest
/// clear bit says the size).
#[inline(always)]
fn entry_key(addr: u64, shift: u32) -> u64 {
    ((addr >> shift) << shift) | ((1u64 << (shift - 1)) - 1)
}

/// The fast path of a page map with regions, per reference kind: the addresses mapped by the
/// first-level entry the last reference of the kind went to (`len` of them from `lo`, all of
/// one backing page size), the structure and the entry's [`entry_key`]. A reference within
/// them, while `last_page[root][kind]` is still `key`, repeats that access: a hit that
/// changes nothing (see [`Feed`]). Forgetting the last pages forgets these too.
#[derive(Clone, Copy, Debug)]
struct Memo {
    lo: u64,
    len: u64,
    root: usize,
    key: u64,
}

/// A memo no address matches.
const NO_MEMO: Memo = Memo {
    lo: 0,
    len: 0,
    root: 0,
    key: NO_PAGE,
};

/// Simulates events one at a time on a machine (see [`Machine::feed`]).
///
/// The fast path: a reference to the page its first-level structure was last accessed with
/// is a hit that changes no replacement state (repeating the last access is idempotent for
/// every policy, see [`crate::tlb`]), so it is only counted — in a [`Tally`] of locals,
/// settled into the ledger before anything that changes the running address space and when
/// the feed ends. `last_page` holds page numbers while the page map is uniform, else entry
/// keys (page and size) that a [`Memo`] per kind compares, after one call, without looking
/// up the page map; it is forgotten whenever entries can change otherwise (flushes,
/// shootdowns, switches).
///
/// A structure whose hits change no replacement state at all (FIFO, random, direct-mapped)
/// keeps a last page per reference kind instead: until its next fill, every page it hit or
/// filled since the last one is still there, and hitting it again changes nothing. A unified
/// TLB that fetches alternate with data references in another page (most of them) then
/// still takes the fast path for both.
pub struct Feed<'m> {
    m: &'m mut Machine,
    tally: Tally,
    /// The machine refills by software: every event goes to its model instead.
    refilled: bool,
    /// ... and has a memory system, which then sees the event after the model.
    refilled_memory: bool,
    /// The machine has a memory system: every event takes the full path.
    memory: bool,
    /// The walker's data cache sees the program's loads and stores: every reference takes
    /// the full path.
    data: bool,
    /// The machine has a `[[cache]]` hierarchy: every reference takes the full path.
    cached: bool,
    /// None of the three above, and no page-table walker (which needs each reference's
    /// physical address): a reference in the running address space needs nothing but
    /// translation (one flag to test per event instead of four).
    plain: bool,
    /// The running address space when `plain`, else [`NOT_PLAIN`] (which no `u32` address
    /// space equals): one compare tells a plain reference.
    plain_asid: u64,
    /// The machine has caches and nothing else: no TLB, walker, memory system, software
    /// refill or virtually addressed cache.
    caches_only: bool,
    /// The running address space when `caches_only`, else [`NOT_PLAIN`]: a reference in it
    /// goes straight to the caches ([`Feed::cache_reference`]).
    cache_asid: u64,
}

/// [`Feed::plain_asid`] of a machine whose references are never plain.
const NOT_PLAIN: u64 = u64::MAX;

impl EventSink for Feed<'_> {
    /// Simulate the next event of the stream.
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        self.simulate::<false>(e);
    }
}

/// A [`Feed`] for a machine with a memory system, whose loop gets the memory system's
/// per-reference work inlined (see [`Machine::run_memory_batch`]).
struct MemoryFeed<'m>(Feed<'m>);

impl EventSink for MemoryFeed<'_> {
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        self.0.simulate::<true>(e);
    }
}

impl Feed<'_> {
    /// Simulate the next event of the stream. `INLINE_MEMORY`: the memory system's work is
    /// inlined here rather than called — only in loops made for machines with one
    /// ([`MemoryFeed`]), so that the loops of the others stay small.
    ///
    /// Inlined into a decoder's loop, this is all the loop holds of the machine: the
    /// references that need no translation or repeat the last page of their structure are
    /// only counted, everything else is a call. Small, the loop keeps the decoder's state in
    /// registers; and the calls take the event's fields as scalars, so that the event itself
    /// is never stored to memory on the way.
    #[inline(always)]
    fn simulate<const INLINE_MEMORY: bool>(&mut self, e: &Event) {
        if e.kind.is_ref() && e.asid as u64 == self.plain_asid {
            let cell = Tally::cell(e.mode, e.kind);
            self.tally.refs[cell] += 1;
            match self.step(e, cell) {
                Step::Done => {}
                Step::Root(r, page) => self.translate_root(r, page, e.addr, e.kind, e.mode),
                Step::Full => self.translate_plain(e.addr, e.paddr, e.size, e.kind, e.mode),
            }
            return;
        }
        if INLINE_MEMORY {
            // A machine with a memory system has no plain references: `plain_asid` stays.
            self.simulate_full::<true>(e);
        } else if e.kind.is_ref() && e.asid as u64 == self.cache_asid {
            self.cache_reference(e.addr, e.size, e.kind, e.mode);
        } else {
            self.simulate_cold(e.addr, e.paddr, e.asid, e.size, e.kind, e.mode);
        }
    }

    /// A reference of the running address space on a machine of caches alone: counted, then
    /// through the hierarchy — what [`Feed::simulate_full`] does for it, without its tests.
    #[inline(never)]
    fn cache_reference(&mut self, addr: u64, size: u16, kind: Kind, mode: Mode) {
        self.tally.refs[Tally::cell(mode, kind)] += 1;
        let m = &mut *self.m;
        if let Some(h) = m.caches.as_deref_mut() {
            h.reference_parts(addr, size, kind, mode, &mut m.ledger);
        }
    }

    /// What a plain reference `e` (counted in `cell`) still needs: nothing if its kind is not
    /// translated or it repeats the last page of its first-level structure (a hit that
    /// changes nothing, see [`Feed`], counted here); else a probe of that structure, or
    /// (regions in the page map, a split straddle) the full translation.
    #[inline(always)]
    fn step(&mut self, e: &Event, cell: usize) -> Step {
        let m = &*self.m;
        match m.fast[e.kind as usize] {
            Fast::Untranslated => Step::Done,
            Fast::Root(r, shift) if !m.pages.has_holes => {
                let page = e.addr >> shift;
                // A straddling access translates two pages when split.
                let last = e.addr.wrapping_add(e.size.saturating_sub(1) as u64) >> shift;
                if m.split && last != page {
                    return Step::Full;
                }
                if page != m.last_page[r][e.kind as usize & 3] {
                    return Step::Root(r, page);
                }
                self.tally.hits[cell] += 1;
                Step::Done
            }
            _ => Step::Full,
        }
    }

    /// Probe first-level structure `r` for `page`, the page of a plain reference at `addr`
    /// (already counted as a reference); the next levels on a miss.
    #[inline(never)]
    fn translate_root(&mut self, r: usize, page: u64, addr: u64, kind: Kind, mode: Mode) {
        let m = &mut *self.m;
        let u = &mut m.units[r];
        let ctx = if addr >= m.global_above {
            u.ctx_global
        } else {
            u.ctx_now
        };
        let hit = u.tlb.access(page, ctx, u.part(mode));
        if u.shadow.is_some() {
            m.classify(r, page, ctx, hit, mode, kind);
        }
        m.touched(r, kind, page, !hit);
        if hit {
            self.tally.hits[Tally::cell(mode, kind)] += 1;
        } else if m.alone[kind as usize & 3] {
            self.tally.walks[Tally::cell(mode, kind)] += 1;
        } else {
            m.root_missed(addr, kind, mode, r);
        }
    }

    /// Translate a plain reference (of the running address space) in full, as
    /// [`Feed::step`] says, already counted as a reference.
    #[inline(never)]
    fn translate_plain(&mut self, addr: u64, paddr: u64, size: u16, kind: Kind, mode: Mode) {
        let e = Event {
            addr,
            paddr,
            asid: self.m.cur_asid,
            size,
            kind,
            mode,
        };
        let _ = self.translate::<false>(&e, Tally::cell(mode, kind));
    }

    /// [`Feed::simulate_full`] out of line, for events that are not plain references.
    #[inline(never)]
    fn simulate_cold(
        &mut self,
        addr: u64,
        paddr: u64,
        asid: u32,
        size: u16,
        kind: Kind,
        mode: Mode,
    ) {
        let e = Event {
            addr,
            paddr,
            asid,
            size,
            kind,
            mode,
        };
        self.simulate_full::<false>(&e);
        self.plain_asid = self.plain_asid();
        self.cache_asid = self.cache_asid();
    }

    /// What [`Feed::cache_asid`] should be now.
    fn cache_asid(&self) -> u64 {
        if self.caches_only {
            self.m.cur_asid as u64
        } else {
            NOT_PLAIN
        }
    }

    /// What [`Feed::plain_asid`] should be now.
    fn plain_asid(&self) -> u64 {
        if self.plain {
            self.m.cur_asid as u64
        } else {
            NOT_PLAIN
        }
    }

    /// Simulate an event that is not a plain reference of the running address space (or
    /// any event, on a machine with a memory system).
    #[inline(always)]
    fn simulate_full<const INLINE_MEMORY: bool>(&mut self, e: &Event) {
        let m = &mut *self.m;
        if self.refilled {
            let copy = *e;
            if self.refilled_memory {
                m.refill_memory_event(copy);
            } else if let Some(r) = m.refill.as_deref_mut() {
                r.run_batch(std::slice::from_ref(&copy), &mut m.ledger);
            }
            return;
        }
        if !e.kind.is_ref() {
            m.settle(&mut self.tally);
            m.ledger.control(e.kind);
            m.control(*e);
            return;
        }
        if e.asid != m.cur_asid {
            m.settle(&mut self.tally);
            m.switch_to(e.asid);
        }
        let cell = Tally::cell(e.mode, e.kind);
        self.tally.refs[cell] += 1;
        m.walk_paddr = e.paddr;
        if self.memory {
            let (mapped, walked) = self.translate::<true>(e, cell);
            let m = &mut *self.m;
            if walked {
                m.run_handler(*e);
            }
            if let Some(mem) = m.memory.as_deref_mut() {
                let copy = *e;
                if INLINE_MEMORY {
                    mem.reference_inline(&copy, mapped);
                } else {
                    mem.reference(&copy, mapped);
                }
            }
        } else {
            let _ = self.translate::<false>(e, cell);
            if self.cached {
                let m = &mut *self.m;
                if let Some(h) = m.caches.as_deref_mut() {
                    h.reference(e, &mut m.ledger);
                }
                return;
            }
            // The walker's data cache sees the program's loads and stores.
            if self.data
                && e.kind != Kind::Fetch
                && !matches!(self.m.fast[e.kind as usize], Fast::Untranslated)
            {
                if let Some(w) = self.m.walker.as_deref_mut() {
                    w.data_ref(e.asid, e.addr, e.kind == Kind::Store);
                }
            }
        }
    }
}

impl Feed<'_> {
    /// Translate reference `e` (counted in `cell`), through the fast path when it applies;
    /// returns whether its address is mapped and whether a translation walked. `MAPPED`:
    /// whether the caller needs the first answer for untranslated kinds (computing it costs a
    /// page-map lookup the TLB-only path does without).
    #[inline(always)]
    fn translate<const MAPPED: bool>(&mut self, e: &Event, cell: usize) -> (bool, bool) {
        let m = &mut *self.m;
        match m.fast[e.kind as usize] {
            Fast::Untranslated => {
                return (!MAPPED || m.pages.backing(e.addr, e.asid).is_some(), false);
            }
            Fast::Root(r, shift) => {
                // With only holes besides the default size, unbacked means in a hole.
                if m.pages.has_holes && m.pages.backing(e.addr, e.asid).is_none() {
                    m.ledger.unmapped += 1;
                    return (false, false);
                }
                let page = e.addr >> shift;
                let last = e.addr.wrapping_add(e.size.saturating_sub(1) as u64) >> shift;
                if last == page || !m.split {
                    if page == m.last_page[r][e.kind as usize & 3] {
                        self.tally.hits[cell] += 1;
                        return (true, false);
                    }
                    // The first level, inline: most references hit it.
                    let u = &mut m.units[r];
                    let ctx = if e.addr >= m.global_above {
                        u.ctx_global
                    } else {
                        u.ctx_now
                    };
                    let hit = u.tlb.access(page, ctx, u.part(e.mode));
                    if u.shadow.is_some() {
                        m.classify(r, page, ctx, hit, e.mode, e.kind);
                    }
                    m.touched(r, e.kind, page, !hit);
                    if hit {
                        self.tally.hits[cell] += 1;
                        return (true, false);
                    }
                    return (true, m.root_missed(e.addr, e.kind, e.mode, r));
                }
            }
            Fast::Slow => {
                // A repeat of the last first-level entry of its kind: a hit that changes
                // nothing, as on the uniform path.
                if let Some(r) = m.memo_hit(e.addr, e.size, e.kind) {
                    m.ledger.add_hits(r, e.mode, e.kind, 1);
                    return (true, false);
                }
            }
        }
        m.reference(*e)
    }
}

impl Drop for Feed<'_> {
    fn drop(&mut self) {
        self.m.settle(&mut self.tally);
    }
}

/// What a plain reference needs after the inline part of [`Feed::simulate`].
enum Step {
    Done,
    /// A probe of first-level structure `.0` for page `.1`.
    Root(usize, u64),
    Full,
}

/// Whether the page map is uniform, and per reference kind what the fast path does and
/// whether its root stands alone (see [`Machine::uniform`], [`Machine::fast`] and
/// [`Machine::alone`]): all derived from the page map and the wiring, and from the
/// structures that climb (whose every access is counted, so they take no fast path).
fn fast_paths(
    pages: &PageMap,
    roots: &Route,
    translated: [bool; 3],
    next: &[Route],
    default_shift: &[u32],
    units: &[Unit],
) -> (bool, [Fast; 3], [bool; 3]) {
    // Uniform apart from unmapped holes: the fast path checks the holes first.
    let uniform = (pages.regions.is_empty() || pages.has_holes) && pages.default.is_some();
    let fast = Kind::REFS.map(|kind| match pages.default.and_then(|d| roots.at(kind, d)) {
        _ if !translated[kind as usize] => Fast::Untranslated,
        Some(r) if uniform && units[r].climb.is_none() => Fast::Root(r, default_shift[r]),
        _ => Fast::Slow,
    });
    let alone = Kind::REFS.map(|kind| match (fast[kind as usize], pages.default) {
        (Fast::Root(r, _), Some(d)) => next[r].at(kind, d).is_none(),
        _ => false,
    });
    (uniform, fast, alone)
}

/// What the fast path of [`EventSink::event`] does with a reference of one kind.
#[derive(Clone, Copy, Debug)]
enum Fast {
    /// No structure translates it: only count it.
    Untranslated,
    /// Compare its page (at this shift) with the last page of this root structure.
    Root(usize, u32),
    /// The page map has regions: always take the full path.
    Slow,
}

/// Counts of one batch's fast path, per mode × reference kind (see [`Tally::cell`]): kept in
/// locals so that the common case touches no ledger memory.
#[derive(Default)]
struct Tally {
    refs: [u64; 8],
    hits: [u64; 8],
    /// Misses of a first-level structure with nothing below it ([`Machine::alone`]): each
    /// one access and miss of that structure and of the walk.
    walks: [u64; 8],
}

impl Tally {
    /// The cell of `(mode, kind)`; masked so that indexing needs no bounds check.
    #[inline(always)]
    fn cell(mode: Mode, kind: Kind) -> usize {
        (mode as usize * 3 + kind as usize) & 7
    }
}

fn key(t: &TlbConfig, field: &str) -> String {
    format!("tlb.{}.{}", t.name, field)
}

impl Machine {
    /// Validate `config` and build the machine; `source_name` names the config in errors.
    /// The machine may take up to [`MemoryLimit::default_for_host`].
    pub fn build(config: MachineConfig, source_name: &str) -> Result<Machine> {
        Machine::build_within(config, source_name, MemoryLimit::default_for_host())
    }

    /// [`Machine::build`], refusing a machine whose [`memory_estimate`] is over `limit`.
    pub fn build_within(
        config: MachineConfig,
        source_name: &str,
        limit: MemoryLimit,
    ) -> Result<Machine> {
        let err = |k: String, m: String| Error::config(source_name, k, m);
        if config.tlbs.is_empty() && config.caches.is_empty() {
            return Err(err(
                "tlb".into(),
                "the machine has no TLB and no cache (add a [[tlb]] or [[cache]] table, --tlb or --cache)".into(),
            ));
        }
        if !config.caches.is_empty() {
            let other = [
                ("memory", config.memory.is_some()),
                ("refill", config.refill.is_some()),
                ("pagetable", config.pagetable.is_some()),
                ("vac", config.vac.is_some()),
            ];
            if let Some((section, _)) = other.iter().find(|o| o.1) {
                return Err(Error::NotYet(format!(
                    "{source_name}: cache: [[cache]] together with [{section}] (the [[cache]] hierarchy sees the program's references by virtual address, without timing; give a timed memory system's caches as [memory.icache], [memory.dcache] and [memory.l2])"
                )));
            }
        }
        if config.vac.is_some() {
            let other = [
                ("memory", config.memory.is_some()),
                ("pagetable", config.pagetable.is_some()),
            ];
            if let Some((section, _)) = other.iter().find(|o| o.1) {
                return Err(Error::NotYet(format!(
                    "{source_name}: vac: [vac] together with [{section}] (the virtually addressed cache gives pages frames of its own; one physical memory for both is not built)"
                )));
            }
        }
        let (pages, kernel_classes) = page_map(&config, source_name, None)?;
        // Everything is checked before anything big is allocated: the structures' parameters
        // and page sizes first, then how they are wired and the sections' cross-checks, then
        // the machine's memory against the limit; only then are the structures built.
        let mut planned = Vec::with_capacity(config.tlbs.len());
        for (i, t) in config.tlbs.iter().enumerate() {
            if t.name.is_empty()
                || !t
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(err(
                    format!("tlb[{i}].name"),
                    format!("'{}' is not a name (letters, digits, _ and -)", t.name),
                ));
            }
            if config.tlbs[..i].iter().any(|o| o.name == t.name) {
                return Err(err(key(t, "name"), "two TLBs have this name".into()));
            }
            let policy = t.policy;
            let ways = match t.ways {
                Ways::Full => t.entries,
                Ways::N(n) => n,
            };
            let partition = t.partition.as_ref().map(|p| Partition {
                lower_ways: p.lower,
                lower_policy: p.lower_policy,
                upper_policy: p.upper_policy,
            });
            if t.placement != Placement::Upper && partition.is_none() {
                return Err(err(
                    key(t, "placement"),
                    "a placement other than 'upper' needs a partition".into(),
                ));
            }
            let params = TlbParams {
                entries: t.entries,
                ways,
                policy,
                partition,
                seed: config.machine.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            };
            params.check().map_err(|e| {
                // The config calls the lower partition's size `partition.lower`.
                let field = if e.field == "partition.lower_ways" {
                    "partition.lower"
                } else {
                    e.field
                };
                err(key(t, field), e.message)
            })?;
            let mut shifts = Vec::new();
            let held = if t.page.is_empty() {
                vec![config.pages.size]
            } else {
                t.page.clone()
            };
            for p in held {
                match p.shift() {
                    Some(s) => shifts.push(s),
                    None => {
                        return Err(err(
                            key(t, "page"),
                            "a TLB cannot hold 'unmapped' pages".into(),
                        ))
                    }
                }
            }
            shifts.sort_unstable_by(|a, b| b.cmp(a));
            shifts.dedup();
            planned.push((params, shifts));
        }
        // Wire `next` and find the roots.
        let held: Vec<Vec<u32>> = planned.iter().map(|p| p.1.clone()).collect();
        let (roots, next, translated) = wire(&config, &held, &pages, source_name)?;
        if let (Some(g), Some(d)) = (config.machine.global_above, pages.default) {
            if g & ((1u64 << d) - 1) != 0 {
                return Err(err(
                    "machine.global_above".into(),
                    format!(
                        "{g:#x} is not aligned to the page size ({})",
                        config.pages.size.label()
                    ),
                ));
            }
        }
        let handler = config.memory.as_ref().and_then(|m| m.handler.clone());
        if handler.is_some() && config.refill.is_some() {
            return Err(err(
                "memory.handler".into(),
                "with [refill] the software-refill model runs the miss handlers (their instructions and PTE loads reach the caches); leave out [memory.handler]".into(),
            ));
        }
        if handler.is_some() && config.pagetable.is_some() {
            return Err(Error::NotYet(format!(
                "{source_name}: memory.handler: [memory.handler] together with [pagetable] (a software walker's instruction fetches; its table references reach the caches without it)"
            )));
        }
        if config.memory.is_some() && config.pagetable.as_ref().is_some_and(|p| p.data_refs) {
            return Err(err(
                "pagetable.data_refs".into(),
                "with [memory] the program's loads and stores already go through the memory system's data cache, as do the walker's table references; leave data_refs out".into(),
            ));
        }
        if config.memory.is_some()
            && config
                .pagetable
                .as_ref()
                .is_some_and(|p| p.cache != crate::config::WalkCacheConfig::default())
        {
            return Err(err(
                "pagetable.cache".into(),
                "with [memory] the walker's table references take the memory system's data cache; leave [pagetable.cache] out".into(),
            ));
        }
        if config.refill.is_some() && config.tlbs.iter().any(|t| t.three_c) {
            return Err(Error::NotYet(format!(
                "{source_name}: tlb.{}.3c: classifying the misses of a software-refilled TLB ([refill])",
                config.tlbs[0].name
            )));
        }
        if let Some(p) = &config.prefetch {
            let refuse = |key: &str, why: &str| Err(err(key.into(), why.into()));
            if config.refill.is_some() {
                return refuse("prefetch", "with [refill] the IPC-path prefetcher is [refill.prefetch] (its classes are the MIPS page-table levels)");
            }
            if config.vac.is_some() {
                return Err(Error::NotYet(format!(
                    "{source_name}: prefetch: IPC-path prefetching with a virtually addressed cache ([vac])"
                )));
            }
            if let Some(t) = config.tlbs.iter().find(|t| t.three_c) {
                return Err(Error::NotYet(format!(
                    "{source_name}: tlb.{}.3c: classifying misses with IPC-path prefetching ([prefetch]), whose fills the shadow does not see",
                    t.name
                )));
            }
            for (n, key) in [
                (p.user_entries, "user_entries"),
                (p.kernel_entries, "kernel_entries"),
            ] {
                if n > prefetch::MAX_ENTRIES {
                    return refuse(
                        &format!("prefetch.{key}"),
                        &format!("{n} is more than {}", prefetch::MAX_ENTRIES),
                    );
                }
            }
            if p.user_entries + p.kernel_entries == 0 {
                return refuse(
                    "prefetch",
                    "nothing is prefetched: set user_entries or kernel_entries (1 to 8)",
                );
            }
            if config.tlbs.is_empty() {
                return refuse("prefetch", "the machine has no TLB to prefetch into");
            }
        }
        if config.refill.is_some() && config.pagetable.is_some() {
            return Err(err(
                "pagetable".into(),
                "a machine refills either by the MIPS software model ([refill]) or from a page table ([pagetable]), not both".into(),
            ));
        }
        let need = memory_estimate(&config);
        if need > limit.bytes {
            return Err(err(
                "machine".into(),
                format!(
                    "the machine needs ~{}, over the {} limit ({}): make its structures smaller or raise the limit",
                    human_bytes(need),
                    human_bytes(limit.bytes),
                    limit.option
                ),
            ));
        }
        let mut units = Vec::with_capacity(planned.len());
        for ((params, shifts), t) in planned.into_iter().zip(&config.tlbs) {
            let tlb = Engine::new(&params).map_err(|m| err(key(t, "geometry"), m))?;
            let shadow = if t.three_c {
                let policy = params.partition.map_or(params.policy, |p| p.upper_policy);
                let s = Shadow::<Tlb>::new(params.entries, policy, params.seed ^ 0x3c, true)
                    .map_err(|m| err(key(t, "3c"), m))?;
                Some(Box::new(s))
            } else {
                None
            };
            // Under [refill] the refill model climbs the TLB it refills.
            let dynamic = t.partition.as_ref().and_then(|p| p.dynamic.as_ref());
            let climb = match (dynamic, params.partition, config.refill.is_some()) {
                (Some(d), Some(q), false) => {
                    let climber =
                        HillClimber::new(d.into(), params.ways, q.lower_ways).map_err(|m| {
                            let (f, m) = m.split_once(": ").unwrap_or(("", &m));
                            err(key(t, &format!("partition.dynamic.{f}")), m.to_string())
                        })?;
                    Some(Box::new(Climb {
                        climber,
                        accesses: 0,
                        misses: 0,
                    }))
                }
                _ => None,
            };
            units.push(Unit {
                tlb,
                shifts,
                tagged: t.asid,
                placement: t.placement,
                ctx_now: NO_CTX,
                ctx_global: NO_CTX,
                shadow,
                climb,
            });
        }
        let caches = Hierarchy::build(&config, config.tlbs.len(), source_name)?.map(Box::new);
        let mut names: Vec<String> = config.tlbs.iter().map(|t| t.name.clone()).collect();
        if let Some(h) = &caches {
            names.extend(h.names().map(str::to_string));
        }
        let mut ledger = Ledger::new(names);
        if units.iter().any(|u| u.shadow.is_some())
            || caches.as_ref().is_some_and(|h| h.classifies())
        {
            ledger.classify_misses();
        }
        let default_shift: Vec<u32> = match pages.default {
            Some(d) => units.iter().map(|u| u.shift_for(d)).collect(),
            None => vec![0; units.len()],
        };
        for (u, &s) in units.iter_mut().zip(&default_shift) {
            u.ctx_now = u.ctx(0, s, false);
            u.ctx_global = u.ctx(0, s, true);
        }
        let (uniform, fast, alone) =
            fast_paths(&pages, &roots, translated, &next, &default_shift, &units);
        let mut memory = match &config.memory {
            Some(mc) => Some(Box::new(MemorySystem::build(
                mc,
                mc.memory_bytes(config.pagetable.as_ref()),
                pages.shifts().min().unwrap_or(12),
                config.machine.seed,
                config.machine.straddle,
                source_name,
            )?)),
            None => None,
        };
        if let Some(h) = &handler {
            // The handlers run from unmapped memory: a handler whose code or root table
            // could miss the TLB would recurse.
            for (field, a) in [("code", h.code), ("root_table", h.root_table)] {
                if pages.backing(a, 0).is_some() {
                    return Err(err(
                        format!("memory.handler.{field}"),
                        format!("{a:#x} must lie in an unmapped region of [pages] (pages.regions with size = \"unmapped\")"),
                    ));
                }
            }
        }
        let refill = match &config.refill {
            Some(_) => {
                let tlbs: Vec<_> = units.iter().map(|u| u.tlb.params().clone()).collect();
                let mut r = Box::new(SoftwareManagedTlb::from_config(
                    &config,
                    &tlbs,
                    source_name,
                )?);
                // The memory system sees the handlers' work.
                r.record_handler_refs(memory.is_some());
                Some(r)
            }
            None => None,
        };
        let walker = match &config.pagetable {
            Some(p) => {
                let w = Box::new(match memory.as_deref_mut() {
                    // One physical memory: the walker maps pages where the caches see them.
                    Some(m) => {
                        if config.memory.as_ref().map(|c| c.mapping)
                            == Some(crate::vm::Mapping::Identity)
                        {
                            return Err(err(
                                "memory.mapping".into(),
                                "'identity' makes a page's frame its virtual page number, which no page table ([pagetable]) of a physical memory maps; choose another mapping".into(),
                            ));
                        }
                        Walker::with_memory(p, source_name, m)?
                    }
                    None => Walker::from_config(p, source_name)?,
                });
                // Pages the table cannot hold would never be walked: refuse them here.
                let holds = w.table().page_shifts();
                let sizes = std::iter::once(("pages.size".to_string(), pages.default)).chain(
                    pages
                        .regions
                        .iter()
                        .enumerate()
                        .map(|(i, r)| (format!("pages.regions[{i}].size"), r.3)),
                );
                for (key, shift) in sizes {
                    let Some(shift) = shift.filter(|s| !holds.contains(s)) else {
                        continue;
                    };
                    return Err(err(
                        key,
                        format!(
                            "{} pages with [pagetable]: {}",
                            PageSize::Size(1 << shift).label(),
                            w.table().page_sizes_held()
                        ),
                    ));
                }
                if let Some(m) = memory.as_deref_mut() {
                    // The table references go through the memory system's caches.
                    m.set_walker();
                }
                Some(w)
            }
            None => None,
        };
        // A classified structure's shadow is fully associative: only a repeat of the very
        // last access is sure to change nothing there.
        let free_hits = units
            .iter()
            .map(|u| u.tlb.params().hits_change_nothing() && u.shadow.is_none())
            .collect();
        let vac = match &config.vac {
            Some(c) => Some(Box::new(VacDriver::from_config(c, source_name)?)),
            None => None,
        };
        let prefetch = config
            .prefetch
            .as_ref()
            .map(|p| Box::new(Prefetcher::new(p.user_entries, p.kernel_entries)));
        // With the prefetcher every walk goes through `translate_from`, which remembers it.
        let alone = if prefetch.is_some() {
            [false; 3]
        } else {
            alone
        };
        Ok(Machine {
            vac,
            fast,
            alone,
            prefetch,
            last_missed: 0,
            refill,
            memory,
            handler,
            walker,
            walk_paddr: crate::event::NO_PADDR,
            split: config.machine.straddle == Straddle::Split,
            global_above: config.machine.global_above.unwrap_or(u64::MAX),
            units,
            roots,
            translated,
            next,
            pages,
            cur_asid: 0,
            last_page: vec![[NO_PAGE; 4]; default_shift.len()],
            uniform,
            memo: [NO_MEMO; 4],
            free_hits,
            default_shift,
            ledger,
            config,
            steps: Vec::new(),
            caches,
            kernel: KernelBinding {
                classes: kernel_classes,
                ..KernelBinding::default()
            },
            handler_refs: 0,
        })
    }

    /// Assemble a config from its sources (see [`MachineConfig::assemble`]) and build it.
    pub fn assemble(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        overrides: &[String],
    ) -> Result<Machine> {
        Machine::assemble_within(
            text,
            source_name,
            tlb_flags,
            overrides,
            MemoryLimit::default_for_host(),
        )
    }

    /// [`Machine::assemble`] within a memory limit (see [`Machine::build_within`]).
    pub fn assemble_within(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        overrides: &[String],
        limit: MemoryLimit,
    ) -> Result<Machine> {
        Machine::assemble_all_within(text, source_name, tlb_flags, &[], overrides, limit)
    }

    /// Assemble a config from all its sources, `--cache` flags too (see
    /// [`MachineConfig::assemble_all`]), and build it.
    pub fn assemble_all(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        cache_flags: &[String],
        overrides: &[String],
    ) -> Result<Machine> {
        Machine::assemble_all_within(
            text,
            source_name,
            tlb_flags,
            cache_flags,
            overrides,
            MemoryLimit::default_for_host(),
        )
    }

    /// [`Machine::assemble_all`] within a memory limit (see [`Machine::build_within`]).
    pub fn assemble_all_within(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        cache_flags: &[String],
        overrides: &[String],
        limit: MemoryLimit,
    ) -> Result<Machine> {
        let config =
            MachineConfig::assemble_all(text, source_name, tlb_flags, cache_flags, overrides)?;
        // A bad key is blamed on the source it came from, at its line in the text.
        let origin = Origin::with_caches(text, source_name, tlb_flags, cache_flags, overrides)?;
        Machine::build_within(config, source_name, limit).map_err(|e| origin.locate(e))
    }

    /// The configuration this machine was built from.
    pub fn config(&self) -> &MachineConfig {
        &self.config
    }

    /// The counts so far.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// The software-refill model, when the machine has one (its trap counts and costs).
    pub fn refill(&self) -> Option<&SoftwareManagedTlb> {
        self.refill.as_deref()
    }

    /// The memory system, when the machine has one (caches, write buffer, MCPI).
    pub fn memory(&self) -> Option<&MemorySystem> {
        self.memory.as_deref()
    }

    /// The virtually addressed cache and its OS, when the machine has one (`[vac]`).
    pub fn vac(&self) -> Option<&VacDriver> {
        self.vac.as_deref()
    }

    /// The page-table walker, when the machine has one.
    pub fn walker(&self) -> Option<&Walker> {
        self.walker.as_deref()
    }

    /// The `prefetch` section of the result (with `[prefetch]`): the entries per switch, the
    /// probes made and the entries inserted, per class.
    pub fn prefetch_json(&self) -> Option<serde_json::Value> {
        self.prefetch.as_deref().map(Prefetcher::json)
    }

    /// The `[[cache]]` hierarchy, when the machine has caches.
    pub fn caches(&self) -> Option<&Hierarchy> {
        self.caches.as_deref()
    }

    /// The counts a result reports: the ledger, and the cache hierarchy after DineroIV's
    /// copy-back of every dirty block at the end (made on copies, see
    /// [`Hierarchy::flushed`]: the machine can go on simulating).
    pub fn finished(&self) -> (std::borrow::Cow<'_, Ledger>, Option<Hierarchy>) {
        match self.caches.as_deref() {
            Some(h) => {
                let (h, l) = h.flushed(&self.ledger);
                (std::borrow::Cow::Owned(l), Some(h))
            }
            None => (std::borrow::Cow::Borrowed(&self.ledger), None),
        }
    }

    /// (sets, ways) of each structure, in config order.
    pub fn geometry(&self) -> Vec<(usize, usize)> {
        self.units
            .iter()
            .map(|u| (u.tlb.sets(), u.tlb.ways()))
            .collect()
    }

    /// Simulate a batch of events, in order.
    pub fn run_batch(&mut self, events: &[Event]) {
        if let Some(v) = self.vac.as_deref_mut() {
            v.run_batch(events);
        }
        if self.refill.is_some() && self.memory.is_some() {
            for e in events {
                self.refill_memory_event(*e);
            }
            return;
        }
        if let Some(r) = self.refill.as_deref_mut() {
            return r.run_batch(events, &mut self.ledger);
        }
        if self.memory.is_some() {
            return self.run_memory_batch(events);
        }
        if self.caches_alone() {
            return self.run_cache_batch(events);
        }
        let mut feed = self.feed();
        for e in events {
            feed.event(e);
        }
    }

    /// [`Machine::run_batch`] of a machine of caches alone: its own loop ([`CacheFeed`]),
    /// made for its first levels' stores.
    fn run_cache_batch(&mut self, events: &[Event]) {
        match self.caches.as_deref().map(Hierarchy::first_stores) {
            Some(Stores::Lru) => self.run_cache_loop::<Ordered<true>>(events),
            Some(Stores::Fifo) => self.run_cache_loop::<Ordered<false>>(events),
            _ => self.run_cache_loop::<AnyStore>(events),
        }
    }

    /// [`Machine::run_cache_batch`] through `S`.
    #[inline(never)]
    fn run_cache_loop<S: FirstStore>(&mut self, events: &[Event]) {
        let mut feed = CacheFeed::<S>::new(self);
        for e in events {
            feed.event(e);
        }
    }

    /// Decode up to `max` events of native trace `source` straight into the machine (each
    /// event from the decoder's registers, never through a batch in memory); returns how
    /// many. A machine of caches alone gets a loop of its own ([`CacheFeed`]), every other
    /// machine one through [`Machine::feed`]. Not for a machine fed in batches
    /// ([`Machine::fed_in_batches`]).
    pub fn decode_native(&mut self, source: &mut NativeReader, max: usize) -> Result<usize> {
        if self.caches_alone() {
            return match self.caches.as_deref().map(Hierarchy::first_stores) {
                Some(Stores::Lru) => {
                    source.decode_with(max, &mut CacheFeed::<Ordered<true>>::new(self))
                }
                Some(Stores::Fifo) => {
                    source.decode_with(max, &mut CacheFeed::<Ordered<false>>::new(self))
                }
                _ => source.decode_with(max, &mut CacheFeed::<AnyStore>::new(self)),
            };
        }
        source.decode_with(max, &mut self.feed())
    }

    /// Whether the machine has caches and nothing else: no TLB, walker, memory system,
    /// software refill or virtually addressed cache (every reference of the running address
    /// space goes to the hierarchy and nowhere else).
    fn caches_alone(&self) -> bool {
        self.caches.is_some()
            && self.refill.is_none()
            && self.memory.is_none()
            && self.walker.is_none()
            && self.vac.is_none()
            && self.fast.iter().all(|f| matches!(f, Fast::Untranslated))
    }

    /// [`Machine::run_batch`] of a machine with a memory system: its own loop, with the
    /// memory system's work inlined ([`MemoryFeed`]). (A native trace decoded straight into
    /// the machine calls the memory system instead: a second loop inlined beside the
    /// decoder's costs the TLB-only one more than the call costs this one.)
    #[inline(never)]
    fn run_memory_batch(&mut self, events: &[Event]) {
        let mut feed = MemoryFeed(self.feed());
        for e in events {
            feed.event(e);
        }
    }

    /// Translations the machine should have made but could not, so that their references
    /// were not simulated at all: the address errors of the software-refill model (user
    /// references outside kuseg that are not folded, any reference at or above 4 GB), which
    /// reach neither the TLB nor the caches; and one per reference whose last byte would lie
    /// past 2^64 (`trace.wrapped`: the pages past the top are not simulated).
    ///
    /// Not counted, because the config or the trace says so: references to `unmapped`
    /// regions of `[pages]` (untranslated on purpose, like MIPS kseg0; they still reach the
    /// caches: `trace.unmapped`), reference kinds no structure serves (a data-only TLB's
    /// fetches), the second page of a straddle under `straddle = "first"`, and records a
    /// reader skips because they are no reference of the program (lackey's `SB` lines,
    /// din's label-3 escape records: `lookaside info` counts them). A virtually addressed
    /// cache refuses what it cannot follow with an error instead ([`Machine::refused`]).
    pub fn dropped(&self) -> u64 {
        self.refill.as_deref().map_or(0, |r| r.address_errors()) + self.ledger.wrapped
    }

    /// The translations the machine attempted: one per reference, one more per straddle.
    fn translations(&self) -> u64 {
        let l = &self.ledger;
        Kind::REFS.iter().map(|&k| l.refs_of_kind(k)).sum::<u64>() + l.straddles
    }

    /// The share of the translations attempted that were [`Machine::dropped`] (0 when none
    /// were attempted).
    pub fn dropped_share(&self) -> f64 {
        dropped_share(self.dropped(), self.translations())
    }

    /// What a result must say about references the machine did not simulate (see
    /// [`unsimulated_warnings`]).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = unsimulated_warnings(self.dropped(), self.translations());
        w.extend(self.kernel_warnings());
        if let Some(n) = self
            .walker
            .as_deref()
            .map(|k| k.stats().unmappable)
            .filter(|&n| n > 0)
        {
            w.push(format!(
                "pagetable: {n} walks found a page the table cannot map (beyond the addresses, page sizes or physical memory it covers: pagetable.unmappable); those walks were not priced"
            ));
        }
        w
    }

    /// Resolves the kernel classes of `[pages]` (`{ kernel = "direct_map", size =
    /// "unmapped" }`) against the kernel layout of the trace this machine is about to run,
    /// given its metadata (see [`KernelLayout::of_trace`]), and notes whether the machine,
    /// which models a kernel that runs (partly) unmapped, would translate what the trace
    /// calls its direct map or kernel text. Called once a trace file is open, before its
    /// first event; a metadata `kernel_layout` that does not parse is an error naming
    /// `trace`. A machine never bound (a generated workload, whose kernel addresses are the
    /// model's own MIPS segments) warns about neither.
    pub fn bind_trace(&mut self, meta: Option<&Metadata>, trace: &str) -> Result<()> {
        let (layout, source) = KernelLayout::of_trace(meta)
            .map_err(|m| Error::trace(trace, crate::error::Location::Whole, "metadata", m))?;
        if !self.kernel.classes.is_empty() {
            let name = self.config.machine.name.clone();
            let (pages, classes) = page_map(&self.config, &name, layout.as_ref())?;
            (self.uniform, self.fast, self.alone) = fast_paths(
                &pages,
                &self.roots,
                self.translated,
                &self.next,
                &self.default_shift,
                &self.units,
            );
            self.pages = pages;
            self.kernel.classes = classes;
        }
        self.kernel.source = Some(source);
        // An x86-64 trace on the MIPS refill model: the classes [pages] declares unmapped are
        // kseg0, every other class of the layout is mapped kernel data in kseg2.
        let x86_64 = self.refill.as_deref().is_some_and(|r| r.maps_x86_64());
        if let (Some(r), true) = (self.refill.as_deref_mut(), x86_64) {
            let unmapped: Vec<(u64, u64)> =
                self.kernel.classes.iter().filter_map(|c| c.1).collect();
            let mapped: Vec<(u64, u64)> = layout
                .iter()
                .flat_map(|l| l.0.iter())
                .filter(|(c, _)| !self.kernel.classes.iter().any(|k| k.0 == **c))
                .map(|(_, &range)| range)
                .collect();
            r.bind_kernel_classes(&unmapped, &mapped);
        }
        let unmapped_kernel = x86_64
            || self.refill.is_none()
                && (self.handler.is_some()
                    || self
                        .config
                        .pages
                        .regions
                        .iter()
                        .any(|r| r.size == PageSize::Unmapped));
        self.kernel.mispriced = match &layout {
            Some(l) if unmapped_kernel => [KernelClass::DirectMap, KernelClass::Text]
                .into_iter()
                .filter_map(|c| l.range(c).map(|(s, e)| (c, s, e)))
                .filter(|&(_, s, e)| self.pages.translates_any(s, e))
                .collect(),
            _ => Vec::new(),
        };
        Ok(())
    }

    /// References the trace made in kernel mode (the ledger's, less the synthesised
    /// handlers').
    fn kernel_references(&self) -> u64 {
        let l = &self.ledger;
        let all: u64 = (0..l.asids().len())
            .flat_map(|a| Kind::REFS.map(|k| l.refs(a, Mode::Kernel, k)))
            .sum();
        all.saturating_sub(self.handler_refs)
    }

    /// What a result must say about the kernel classes and the pricing of the trace's
    /// kernel (see [`Machine::bind_trace`]): nothing for a trace without kernel references.
    fn kernel_warnings(&self) -> Vec<String> {
        let k = &self.kernel;
        let Some(source) = k.source else {
            return Vec::new();
        };
        if self.kernel_references() == 0 {
            return Vec::new();
        }
        let named = |classes: &mut dyn Iterator<Item = KernelClass>| {
            classes.map(|c| c.name()).collect::<Vec<_>>().join(", ")
        };
        let mut w = Vec::new();
        let unresolved = named(&mut k.classes.iter().filter(|c| c.1.is_none()).map(|c| c.0));
        if !k.classes.is_empty() && source == LayoutSource::X86_64Nokaslr {
            w.push(format!(
                "the trace records no kernel layout (kernel_layout metadata: traces captured before it was recorded); as its metadata names a capture of x86-64 Linux by lookaside trace --system, which boots with nokaslr, the kernel classes of pages.regions ({}) take the documented x86-64 nokaslr layout",
                named(&mut k.classes.iter().map(|c| c.0))
            ));
        }
        if !unresolved.is_empty() {
            w.push(format!(
                "pages.regions names kernel classes ({unresolved}) that the trace's kernel layout does not give ({}): they resolve to no addresses, and its kernel references there are translated as mapped memory",
                match source {
                    LayoutSource::Unknown => "the trace records no kernel_layout metadata, and its metadata does not name a capture of x86-64 Linux booted with nokaslr by lookaside trace --system",
                    _ => "absent from its kernel_layout",
                }
            ));
        }
        if !k.mispriced.is_empty() {
            let ranges = k
                .mispriced
                .iter()
                .map(|(c, s, e)| format!("{} {s:#x}-{e:#x}", c.name()))
                .collect::<Vec<_>>()
                .join(", ");
            w.push(format!(
                "this machine models a kernel that runs unmapped ({}) but translates what the trace calls its {ranges}{}: its kernel references there are priced as mapped memory (TLB misses{}), which a kernel segment like MIPS kseg0 never takes; declare them unmapped in [pages]: regions = [{{ kernel = \"direct_map\", size = \"unmapped\" }}, {{ kernel = \"text\", size = \"unmapped\" }}]",
                if self.refill.is_some() {
                    "MIPS kseg0: refill.addresses = \"x86-64\" maps every kernel class [pages] does not declare unmapped into kseg2"
                } else if self.handler.is_some() {
                    "unmapped regions in [pages], synthesised TLB miss handlers"
                } else {
                    "unmapped regions in [pages]"
                },
                if source == LayoutSource::X86_64Nokaslr {
                    " (the documented x86-64 nokaslr layout: the trace records none)"
                } else {
                    ""
                },
                if self.handler.is_some() { " and handler work" } else { "" },
            ));
        }
        w
    }

    /// The kernel classes of `[pages]` as resolved for the trace, for the result (none:
    /// the machine names no kernel class).
    pub fn kernel_regions_json(&self) -> Option<serde_json::Value> {
        let k = &self.kernel;
        if k.classes.is_empty() {
            return None;
        }
        Some(serde_json::json!({
            "layout": k.source,
            "regions": k.classes.iter().map(|(c, r)| serde_json::json!({
                "kernel": c.name(),
                "start": r.map(|r| format!("{:#x}", r.0)),
                "end": r.map(|r| format!("{:#x}", r.1)),
            })).collect::<Vec<_>>(),
        }))
    }

    /// The error when this machine cannot follow the trace `name` at all: a MIPS
    /// software-refill machine whose user references lie above kuseg (a 64-bit trace) for
    /// more than [`DROPPED_WARN_SHARE`] of them, while `refill.fold_user_addresses` is off —
    /// its result would count nothing but address errors. The fix is named rather than
    /// applied: folding changes the addresses (pages above 2 GB alias those below).
    pub fn cannot_follow(&self, name: &str) -> Option<Error> {
        let r = self.refill.as_deref()?;
        if let Some(why) = r.unplaceable() {
            return Some(Error::trace(
                name,
                crate::error::Location::Whole,
                "refill.addresses",
                why,
            ));
        }
        if r.maps_x86_64() && self.kernel.source.is_none() {
            return Some(Error::config(
                name,
                "refill.addresses",
                "\"x86-64\" maps the addresses of a 64-bit trace file onto the MIPS segments; a generated workload's addresses are MIPS addresses already (leave it out)",
            ));
        }
        if r.params().fold_user_addresses || r.maps_x86_64() {
            return None;
        }
        let l = &self.ledger;
        let user: u64 = (0..l.asids().len())
            .flat_map(|a| Kind::REFS.map(|k| (a, k)))
            .map(|(a, k)| l.refs(a, Mode::User, k))
            .sum();
        let errors = r.user_address_errors();
        if user == 0 || (errors as f64) <= DROPPED_WARN_SHARE * user as f64 {
            return None;
        }
        let share = (100.0 * errors as f64 / user as f64).min(100.0);
        Some(Error::config(
            name,
            "refill.fold_user_addresses",
            format!(
                "{share:.1} % of the user references lie above MIPS kuseg (2 GB; a 64-bit trace?) and would be address errors, not simulated ({errors} address errors in the translations of {user} user references); fold them into kuseg with --set refill.fold_user_addresses=true (by 4 MB blocks, never aliasing two pages), or map a whole x86-64 system trace, its kernel too, with --set 'refill.addresses=\"x86-64\"'"
            ),
        ))
    }

    /// Whether events must reach this machine in batches ([`Machine::run_batch`]) rather than
    /// one at a time ([`Machine::feed`]): true when it has a virtually addressed cache.
    pub fn fed_in_batches(&self) -> bool {
        self.vac.is_some()
    }

    /// The first event the machine refused, with its 1-based position in the stream: only a
    /// virtually addressed cache refuses events (an unmap of a page that is not mapped, …).
    pub fn refused(&self) -> Option<&(u64, String)> {
        self.vac.as_deref().and_then(VacDriver::error)
    }

    /// A handle that simulates events handed to it one at a time ([`EventSink::event`]), with the
    /// same results as [`Machine::run_batch`] over the same events; for decoders that can
    /// hand each event over while it is still in registers. Counts reach the ledger when the
    /// handle is dropped.
    pub fn feed(&mut self) -> Feed<'_> {
        let refilled = self.refill.is_some();
        let memory = self.memory.is_some();
        let data = self.walker.as_ref().is_some_and(|w| w.sees_data());
        let cached = self.caches.is_some();
        let plain = !(refilled || memory || cached || self.walker.is_some());
        let caches_only = self.caches_alone();
        Feed {
            caches_only,
            cache_asid: if caches_only {
                self.cur_asid as u64
            } else {
                NOT_PLAIN
            },
            refilled,
            refilled_memory: refilled && memory,
            memory,
            data,
            cached,
            plain,
            plain_asid: if plain {
                self.cur_asid as u64
            } else {
                NOT_PLAIN
            },
            m: self,
            tally: Tally::default(),
        }
    }

    /// Move the counts of `tally` into the ledger (under the running address space).
    fn settle(&mut self, tally: &mut Tally) {
        for mode in [Mode::User, Mode::Kernel] {
            for kind in Kind::REFS {
                let cell = Tally::cell(mode, kind);
                self.ledger.add_references(mode, kind, tally.refs[cell]);
                if let Fast::Root(r, _) = self.fast[kind as usize] {
                    self.ledger.add_hits(r, mode, kind, tally.hits[cell]);
                    let walks = tally.walks[cell];
                    self.ledger.add_misses(r, mode, kind, walks);
                    let w = self.ledger.walk_index();
                    self.ledger.add_misses(w, mode, kind, walks);
                }
            }
        }
        *tally = Tally::default();
    }

    /// Translate reference `e` (both pages when it straddles and `straddle = "split"`);
    /// returns whether its address is mapped and whether a translation walked.
    #[inline(never)]
    fn reference(&mut self, e: Event) -> (bool, bool) {
        let Some(shift) = self.pages.backing(e.addr, e.asid) else {
            self.ledger.unmapped += 1;
            return (false, false);
        };
        self.walk_paddr = e.paddr;
        let mut walked = self.translate(e.addr, e.kind, e.mode, shift);
        let last = e.addr.wrapping_add(e.size.max(1) as u64 - 1);
        if self.split && (last ^ e.addr) >> shift != 0 {
            walked |= self.translate_rest(e, shift);
        }
        (true, walked)
    }

    /// The pages after the first that reference `e` (whose first page is backed by pages of
    /// `shift`) touches, each translated once (`machine.straddle = "split"`) and counted in
    /// `straddles`: one more page for an access crossing a boundary, up to 17 for 64 KiB at
    /// 4 KiB pages, each at the last byte the access touches in it. Pages in an unmapped
    /// region are skipped, as a reference starting there would be. An access whose last byte would lie past 2^64 ends at the top of the
    /// address space and is counted in `wrapped` (no machine has memory past it; the record
    /// is most likely corrupt). Returns whether a translation walked.
    #[inline(never)]
    fn translate_rest(&mut self, e: Event, shift: u32) -> bool {
        let last = match e.addr.checked_add(e.size as u64 - 1) {
            Some(l) => l,
            None => {
                self.ledger.wrapped += 1;
                u64::MAX
            }
        };
        let mut walked = false;
        // The last byte of the page translated last.
        let mut end = e.addr | ((1u64 << shift) - 1);
        while end < last {
            let at = end + 1;
            match self.pages.backing(at, e.asid) {
                Some(s) => {
                    end = at | ((1u64 << s) - 1);
                    // At the last byte the access touches in the page (as a straddle
                    // always was): the fragment a structure holding smaller pages caches;
                    // short of u64::MAX, which stands for no `global_above` (same page).
                    let addr = end.min(last).min(u64::MAX - 1);
                    self.ledger.straddles += 1;
                    // With a memory system, the walker maps the page where the caches find
                    // it: they know no physical address past a reference's first page.
                    if e.paddr != crate::event::NO_PADDR {
                        self.walk_paddr = match self.memory {
                            Some(_) => crate::event::NO_PADDR,
                            None => e.paddr.wrapping_add(addr - e.addr),
                        };
                    }
                    walked |= self.translate(addr, e.kind, e.mode, s);
                }
                // An unmapped region: on past its end.
                None => end = self.pages.span(at, e.asid).1,
            }
        }
        walked
    }

    /// A reference the miss handler makes (in the running address space), on a machine with a
    /// memory system: translation through the TLBs (the handler of a walk it takes in turn),
    /// then the caches. Counted in the ledger directly: handler work is rare beside the
    /// program's references, which take [`Feed`]'s path.
    fn memory_event(&mut self, e: &Event) {
        self.ledger.add_references(e.mode, e.kind, 1);
        self.handler_refs += 1;
        let (mapped, walked) = if self.translated.get(e.kind as usize) == Some(&true) {
            self.reference(*e)
        } else {
            (self.pages.backing(e.addr, e.asid).is_some(), false)
        };
        if walked {
            self.run_handler(*e);
        }
        if let Some(m) = self.memory.as_deref_mut() {
            m.reference(e, mapped);
        }
    }

    /// One event on a machine with `[refill]` and `[memory]`: the refill model translates (and
    /// counts) it, then the memory system sees what its handlers did — each trap's instruction
    /// fetches from its vector, each PTE load at its virtual address (kseg0: unmapped; kseg2:
    /// the frame of its page under [`KSEG2_SPACE`]), counted under `utlb` (L1U traps) or
    /// `ktlb` (L1K, L2, L3 traps) — and then the reference itself, unless it was an address
    /// error.
    #[inline(never)]
    fn refill_memory_event(&mut self, e: Event) {
        let (Some(r), Some(mem)) = (self.refill.as_deref_mut(), self.memory.as_deref_mut()) else {
            return;
        };
        r.run_batch(std::slice::from_ref(&e), &mut self.ledger);
        r.take_handler_refs(&mut self.steps);
        // The activities the running handlers interrupted (traps nest three deep at most).
        let mut interrupted = [Activity::Program; 4];
        let mut depth = 0;
        for s in &self.steps {
            match *s {
                HandlerStep::Enter {
                    trap,
                    code,
                    instructions,
                } => {
                    let a = if trap == Trap::L1U {
                        Activity::Utlb
                    } else {
                        Activity::Ktlb
                    };
                    interrupted[depth & 3] = mem.enter(a);
                    depth += 1;
                    for i in 0..instructions as u64 {
                        mem.machinery(e.asid, Kind::Fetch, At::Unmapped(code + 4 * i), 4);
                    }
                }
                HandlerStep::Load(l) => {
                    let at = match layout::segment(l.addr) {
                        Segment::Unmapped => At::Unmapped(l.addr),
                        _ => At::Mapped {
                            addr: l.addr,
                            space: KSEG2_SPACE,
                        },
                    };
                    mem.machinery(l.asid, l.kind, at, l.size);
                }
                HandlerStep::Leave => {
                    depth = depth.saturating_sub(1);
                    mem.leave(interrupted[depth & 3]);
                }
            }
        }
        if !e.kind.is_ref() {
            if e.kind == Kind::Marker {
                mem.marker(e.addr);
            }
            return;
        }
        // Where the reference lies, as the refill model translated it (a 64-bit trace's
        // mapped pages at their MIPS addresses).
        let (e, mapped, space) = match r.place(e.addr, e.mode, e.asid) {
            Place::User(addr) => (Event { addr, ..e }, true, e.asid),
            Place::Unmapped => (e, false, e.asid),
            Place::Kernel(addr) => (Event { addr, ..e }, true, KSEG2_SPACE),
            // An address error: no memory reference.
            Place::Error => return,
        };
        mem.reference_in(&e, mapped, space);
    }

    /// Synthesise the work of the software miss handler for `e`, which walked (MIPS R3000,
    /// Chen): a miss on a user-space address takes the UTLB handler (its instructions, then a
    /// load of the PTE from the linear page table in mapped kernel memory, which can itself
    /// miss); a miss on a mapped kernel address takes a KTLB handler (its instructions, then
    /// a load of the root PTE from unmapped memory). The R3000 picks the vector by the
    /// address, not the mode: the kernel copying to or from a user buffer takes the UTLB
    /// handler ([`layout::user_space`]).
    fn run_handler(&mut self, e: Event) {
        let Some(h) = &self.handler else { return };
        let (code, table, root, pte) = (h.code, h.page_table, h.root_table, h.pte_bytes as u64);
        let shift = self.pages.default.unwrap_or(12);
        let kernel = |kind, addr, size| Event {
            addr,
            paddr: crate::event::NO_PADDR,
            asid: e.asid,
            size,
            kind,
            mode: Mode::Kernel,
        };
        let (activity, count, base, load) = if layout::user_space(e.addr) {
            let vpn = e.addr >> shift;
            let load = table.wrapping_add(vpn.wrapping_mul(pte));
            (Activity::Utlb, h.utlb_instructions, code, load)
        } else {
            let vpn = e.addr.wrapping_sub(table) >> shift;
            let load = root.wrapping_add(vpn.wrapping_mul(pte));
            (Activity::Ktlb, h.ktlb_instructions, code + 0x80, load)
        };
        let previous = match self.memory.as_deref_mut() {
            // A miss inside the KTLB handler (its PTE load) is not handled again.
            Some(m) if m.activity() != Activity::Ktlb => m.enter(activity),
            _ => return,
        };
        for i in 0..count as u64 {
            self.memory_event(&kernel(Kind::Fetch, base + 4 * i, 4));
        }
        self.memory_event(&kernel(Kind::Load, load, pte as u16));
        if let Some(m) = self.memory.as_deref_mut() {
            m.leave(previous);
        }
    }

    /// The fast path's first-level structure `r` missed (and was filled) on `e`: count the
    /// miss and go on to the next levels.
    #[inline(never)]
    fn root_missed(&mut self, addr: u64, kind: Kind, mode: Mode, r: usize) -> bool {
        self.ledger.access(r, mode, kind, true);
        self.last_missed = r;
        match self.pages.default {
            Some(backing) => {
                let next = self.next[r].at(kind, backing);
                self.translate_from(next, addr, kind, mode, backing)
            }
            None => false,
        }
    }

    /// One translation of the page of `addr` (backed by pages of `shift`) through the
    /// hierarchy; returns whether it walked.
    #[inline(always)]
    fn translate(&mut self, addr: u64, kind: Kind, mode: Mode, shift: u32) -> bool {
        let root = self.roots.at(kind, shift);
        let walked = self.translate_from(root, addr, kind, mode, shift);
        // (A structure that climbs counts every access: no repeat is skipped.)
        if let (Some(r), false) = (root, self.uniform) {
            if self.units[r].climb.is_none() {
                self.remember(r, addr, kind, shift);
            }
        }
        walked
    }

    /// First-level structure `r` was just accessed for the page of `addr` (backed by pages
    /// of `shift`) by a reference of `kind`: remember the addresses its entry maps, in which
    /// the backing page size is the same (see [`Memo`]).
    #[inline(never)]
    fn remember(&mut self, r: usize, addr: u64, kind: Kind, shift: u32) {
        let s = self.units[r].shift_for(shift);
        let (lo, hi) = self.pages.span(addr, self.cur_asid);
        let start = (addr >> s) << s;
        let end = start.saturating_add((1u64 << s) - 1);
        let first = start.max(lo);
        self.memo[kind as usize & 3] = Memo {
            lo: first,
            len: end.min(hi).wrapping_sub(first).wrapping_add(1),
            root: r,
            key: entry_key(addr, s),
        };
    }

    /// The first-level structure whose entry a reference of `kind` to `size` bytes at `addr`
    /// repeats, when that is a hit that changes nothing (page maps with regions: see [`Memo`]).
    #[inline(always)]
    fn memo_hit(&self, addr: u64, size: u16, kind: Kind) -> Option<usize> {
        let m = &self.memo[kind as usize & 3];
        let last = addr.wrapping_add(size.saturating_sub(1) as u64);
        (addr.wrapping_sub(m.lo) < m.len
            && last.wrapping_sub(m.lo) < m.len
            && self.last_page[m.root][kind as usize & 3] == m.key)
            .then_some(m.root)
    }

    /// [`Machine::translate`] from structure `level` down.
    #[inline(always)]
    fn translate_from(
        &mut self,
        mut level: Option<usize>,
        addr: u64,
        kind: Kind,
        mode: Mode,
        shift: u32,
    ) -> bool {
        let global = addr >= self.global_above;
        while let Some(i) = level {
            let u = &mut self.units[i];
            let s = if Some(shift) == self.pages.default {
                self.default_shift[i]
            } else {
                u.shift_for(shift)
            };
            let ctx = u.ctx(self.cur_asid, s, global);
            let hit = u.tlb.access(addr >> s, ctx, u.part(mode));
            if u.shadow.is_some() {
                self.classify(i, addr >> s, ctx, hit, mode, kind);
            }
            // The fast path's key of the entry: its page while the page map is uniform (then
            // s is the default shift); else its page and size.
            let key = if self.uniform {
                addr >> s
            } else {
                entry_key(addr, s)
            };
            self.touched(i, kind, key, !hit);
            self.ledger.access(i, mode, kind, !hit);
            self.count_climb(i, !hit);
            if hit {
                return false;
            }
            self.last_missed = i;
            level = self.next[i].at(kind, shift);
        }
        let w = self.ledger.walk_index();
        self.ledger.access(w, mode, kind, true);
        if self.prefetch.is_some() {
            self.remember_walk(addr, shift, global, mode);
        }
        if let Some(w) = self.walker.as_deref_mut() {
            w.miss(
                self.cur_asid,
                addr,
                self.walk_paddr,
                shift,
                self.memory.as_deref_mut(),
            );
        }
        true
    }

    /// A walk of the page of `addr` (backed by pages of `shift`) fills the entry of the
    /// structure that missed last: the prefetcher remembers it for the running address space.
    #[cold]
    fn remember_walk(&mut self, addr: u64, shift: u32, global: bool, mode: Mode) {
        let i = self.last_missed;
        let s = self.units[i].shift_for(shift);
        if let Some(p) = self.prefetch.as_deref_mut() {
            let r = Recent {
                unit: i as u16,
                shift: s as u8,
                global,
                vpn: addr >> s,
            };
            p.note(r, mode == Mode::Kernel);
        }
    }

    /// Bala's IPC-path prefetch on a switch from address space `from` to the running one:
    /// each entry the prefetcher remembers for it is probed for in its structure and inserted
    /// where absent (see [`prefetch`]).
    fn prefetch_into(&mut self, from: u32) {
        let Some(p) = self.prefetch.as_deref_mut() else {
            return;
        };
        let todo = p.switch(from, self.cur_asid);
        for (class, r) in todo {
            let u = &mut self.units[r.unit as usize];
            let ctx = u.ctx(self.cur_asid, r.shift as u32, r.global);
            let p = self.prefetch.as_deref_mut().expect("a prefetcher");
            p.probes += 1;
            if !u.tlb.holds(r.vpn, ctx) {
                let mode = [Mode::User, Mode::Kernel][class];
                u.tlb.access(r.vpn, ctx, u.part(mode));
                p.inserted[class] += 1;
            }
        }
    }

    /// The running address space becomes `asid`: untagged structures lose non-global entries.
    fn switch_to(&mut self, asid: u32) {
        if asid == self.cur_asid {
            return;
        }
        let from = self.cur_asid;
        self.cur_asid = asid;
        self.ledger.set_asid(asid);
        self.forget_pages();
        for (u, &s) in self.units.iter_mut().zip(&self.default_shift) {
            u.ctx_now = u.ctx(asid, s, false);
            if !u.tagged {
                u.tlb.flush_if(|_, ctx| ctx & GLOBAL == 0);
                if let Some(sh) = u.shadow.as_deref_mut() {
                    sh.flush_if(|_, ctx| ctx & GLOBAL == 0);
                }
            }
        }
        if self.prefetch.is_some() {
            self.prefetch_into(from);
        }
    }

    /// Structure `i` classifies its misses: its access to `(vpn, ctx)` for a reference of
    /// `kind` in `mode` goes to its shadow too, and a miss (`!hit`) is counted by class.
    #[inline(never)]
    fn classify(&mut self, i: usize, vpn: u64, ctx: u64, hit: bool, mode: Mode, kind: Kind) {
        if let Some(s) = self.units[i].shadow.as_deref_mut() {
            if let Some(c) = s.tlb_access(vpn, ctx, !hit) {
                self.ledger.classify(i, mode, kind, c);
            }
        }
    }

    /// Structure `i` was just accessed on `page` by a reference of `kind`, and filled it if
    /// it `missed`: keep the fast path's last pages (see [`Feed`]).
    #[inline(always)]
    fn touched(&mut self, i: usize, kind: Kind, page: u64, missed: bool) {
        let last = &mut self.last_page[i];
        if !self.free_hits[i] {
            // Only a repeat of this very access changes nothing.
            *last = [page; 4];
            return;
        }
        if missed {
            // The fill may have evicted the other kinds' pages.
            *last = [NO_PAGE; 4];
        }
        last[kind as usize & 3] = page;
    }

    /// Forget the last pages of the fast path (entries or the running context changed).
    fn forget_pages(&mut self) {
        self.last_page.fill([NO_PAGE; 4]);
    }

    fn control(&mut self, e: Event) {
        if matches!(e.kind, Kind::TlbFlush | Kind::Unmap | Kind::Protect) {
            self.forget_pages();
        }
        if e.kind == Kind::Marker {
            if let Some(m) = self.memory.as_deref_mut() {
                m.marker(e.addr);
            }
        }
        match e.kind {
            Kind::ContextSwitch => self.switch_to(e.asid),
            Kind::TlbFlush if e.addr == FLUSH_ALL => {
                for u in &mut self.units {
                    u.tlb.flush_all();
                    if let Some(sh) = u.shadow.as_deref_mut() {
                        sh.flush_all();
                    }
                }
            }
            Kind::TlbFlush | Kind::Unmap | Kind::Protect => {
                if e.kind == Kind::Unmap {
                    if let Some(w) = self.walker.as_deref_mut() {
                        w.unmap(e.asid, e.addr);
                    }
                    if let Some(p) = self.prefetch.as_deref_mut() {
                        p.forget(e.asid, e.addr, e.addr >= self.global_above, self.cur_asid);
                    }
                }
                let global = e.addr >= self.global_above;
                for u in &mut self.units {
                    for i in 0..u.shifts.len() {
                        let s = u.shifts[i];
                        let ctx = u.ctx(e.asid, s, global);
                        u.tlb.invalidate(e.addr >> s, ctx);
                        if let Some(sh) = u.shadow.as_deref_mut() {
                            sh.invalidate(e.addr >> s, ctx);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// A bound on the memory one machine may take, and the option that sets it (for the message
/// that refuses a machine over it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    pub option: &'static str,
}

/// The limit when none is given and `/proc/meminfo` cannot be read.
const FALLBACK_LIMIT: u64 = 8 << 30;

impl MemoryLimit {
    /// The option that sets the limit, named in the refusal.
    pub const OPTION: &'static str = "--max-memory";

    /// `bytes`, set by `--max-memory` (or the Python API's `max_memory`).
    pub fn of(bytes: u64) -> MemoryLimit {
        MemoryLimit {
            bytes,
            option: Self::OPTION,
        }
    }

    /// Parse a size (`12G`, `512MiB`, `1000000`) for `--max-memory`.
    pub fn parse(text: &str) -> Result<MemoryLimit> {
        crate::config::parse_bytes(text.trim())
            .filter(|&b| b > 0)
            .map(MemoryLimit::of)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{}: '{text}' is not a size (e.g. 4G, 512M)",
                    Self::OPTION
                ))
            })
    }

    /// The default: half of the physical memory (`MemTotal` in `/proc/meminfo`), so that a
    /// machine several times too large is refused with a message instead of taking the host
    /// into swap or the out-of-memory killer; 8 GiB where the size is unknown.
    pub fn default_for_host() -> MemoryLimit {
        static HOST: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let bytes = *HOST.get_or_init(|| {
            std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("MemTotal:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                })
                .map_or(FALLBACK_LIMIT, |kib| kib.saturating_mul(1024) / 2)
        });
        MemoryLimit::of(bytes)
    }
}

/// `n` bytes for a message: `4.9 GiB`, `512.0 MiB`, `96 bytes`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if n >= 1u64 << shift {
            return format!("{:.1} {unit}", n as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{n} bytes")
}

/// The memory a machine of `config` takes once built, estimated from the config alone (so
/// that [`Machine::build`] can refuse it before allocating anything): every structure's
/// arrays ([`TlbParams::heap_bytes`]), the caches' tag stores (twice with private user and
/// kernel caches) and dirty bits, the refill model's copy of its TLB and its software TLB,
/// and the fixed parts of the page tables and the frame allocators — a few words per
/// physical frame. What grows with the trace (pages touched, address spaces) is not in it.
pub fn memory_estimate(config: &MachineConfig) -> u64 {
    let tlb = |entries: usize, ways: usize| {
        TlbParams {
            entries,
            ways: ways.clamp(1, entries.max(1)),
            policy: Policy::Lru,
            partition: None,
            seed: 0,
        }
        .heap_bytes()
    };
    let of_ways = |w: Ways, entries: usize| match w {
        Ways::Full => entries,
        Ways::N(n) => n,
    };
    let cache = |size: u64, line: u64, ways: usize| {
        let lines = size.checked_div(line).unwrap_or(0);
        let lines = usize::try_from(lines).unwrap_or(usize::MAX);
        let ways = if ways == 0 { lines } else { ways };
        crate::cache::tags::CacheTags::heap_bytes(lines, ways).saturating_add(lines as u64)
    };
    /// Bytes per 4 KiB frame of a simulated physical memory (frame tables, page tables'
    /// anchors and buckets, allocation bitmaps): an upper bound.
    const PER_FRAME: u64 = 64;
    let frames = |memory: u64| (memory >> 12).saturating_mul(PER_FRAME);
    let mut total = 0u64;
    let mut add = |n: u64| total = total.saturating_add(n);
    for t in &config.tlbs {
        add(tlb(t.entries, of_ways(t.ways, t.entries)));
    }
    if let Some(m) = &config.memory {
        // Private per address space: one set per space, made as spaces appear (counted as
        // one here: how many there will be is the trace's).
        let sides = if m.private == crate::config::Private::Mode {
            2
        } else {
            1
        };
        for c in [&m.icache, &m.dcache, &m.cache, &m.l2]
            .into_iter()
            .flatten()
        {
            let per = cache(c.size.0, c.line as u64, of_ways(c.ways, 0));
            add(per.saturating_mul(sides));
        }
        add(frames(m.memory_bytes(config.pagetable.as_ref())));
    }
    if let Some(r) = &config.refill {
        if let Some(t) = config.tlbs.first() {
            add(tlb(t.entries, of_ways(t.ways, t.entries)));
        }
        if let Some(s) = &r.stlb {
            add(tlb(s.entries, s.ways));
        }
    }
    if let Some(p) = &config.pagetable {
        // With [memory], its memory is the table's too (the walker's frame table and table
        // are sized for it).
        add(frames(match &config.memory {
            Some(m) => m.memory_bytes(Some(p)),
            None => p
                .memory
                .map_or(crate::config::DEFAULT_PAGETABLE_MEMORY, |b| b.0),
        }));
        add(cache(p.cache.size.0, p.cache.line as u64, p.cache.ways));
        if let Some(e) = p.entries {
            add(tlb(e, 1));
        }
    }
    if let Some(v) = &config.vac {
        add(cache(v.size.0, v.line.0, v.ways));
    }
    for t in config.tlbs.iter().filter(|t| t.three_c) {
        add(<crate::threec::Shadow>::heap_bytes(t.entries));
    }
    add(Hierarchy::memory_estimate(config));
    total
}

/// Wire the structures: the route of each reference to its first-level structure, and of each
/// structure's misses to its next level; and which kinds some structure translates. Checks
/// that every `next` names structures that serve what it passes on, with no cycle; that the
/// structures at one point serving one kind (the siblings) hold different page sizes; and that
/// a reference to a page of every size in use finds, at every level it reaches, a sibling that
/// holds that size or a smaller one (to cache it as fragments).
#[allow(clippy::type_complexity)]
fn wire(
    config: &MachineConfig,
    shifts: &[Vec<u32>],
    pages: &PageMap,
    source_name: &str,
) -> Result<(Route, Vec<Route>, [bool; 3])> {
    let err = |k: String, m: String| Error::config(source_name, k, m);
    let tlbs = &config.tlbs;
    let n = tlbs.len();
    if n >= NOWHERE as usize {
        return Err(err(
            "tlb".into(),
            format!("{n} TLBs: a machine has at most {}", NOWHERE - 1),
        ));
    }
    let serves: Vec<Serves> = tlbs.iter().map(|t| t.serves).collect();
    // The structures of `members` that serve references of `kind`.
    let serving = |members: &[usize], kind: Kind| -> Vec<usize> {
        members
            .iter()
            .copied()
            .filter(|&i| serves[i].serves(kind))
            .collect()
    };
    let size = |s: u32| PageSize::Size(1 << s).label();
    // What the structures `members` hold, for messages: 'a' holds 2M, 'b' holds 4K+1G.
    let holding = |members: &[usize]| {
        members
            .iter()
            .map(|&i| {
                let held: Vec<String> = shifts[i].iter().rev().map(|&s| size(s)).collect();
                format!("'{}' holds {}", tlbs[i].name, held.join("+"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut nexts: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut is_next = vec![false; n];
    for (i, t) in tlbs.iter().enumerate() {
        for name in &t.next {
            let j = tlbs
                .iter()
                .position(|o| &o.name == name)
                .ok_or_else(|| err(key(t, "next"), format!("no TLB named '{name}'")))?;
            if j == i {
                return Err(err(
                    key(t, "next"),
                    "a TLB cannot be its own next level".into(),
                ));
            }
            if nexts[i].contains(&j) {
                return Err(err(key(t, "next"), format!("names '{name}' twice")));
            }
            nexts[i].push(j);
            is_next[j] = true;
        }
        for kind in Kind::REFS {
            if nexts[i].is_empty()
                || !t.serves.serves(kind)
                || nexts[i].iter().any(|&j| serves[j].serves(kind))
            {
                continue;
            }
            let which = match nexts[i].as_slice() {
                [j] => format!("'{}' does not", tlbs[*j].name),
                several => format!(
                    "none of {} does",
                    several
                        .iter()
                        .map(|&j| format!("'{}'", tlbs[j].name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(err(
                key(t, "next"),
                format!(
                    "{which} serve the {} references that '{}' passes on",
                    kind.name(),
                    t.name
                ),
            ));
        }
    }
    for start in 0..n {
        let mut seen = vec![false; n];
        let mut stack = nexts[start].clone();
        while let Some(j) = stack.pop() {
            if j == start {
                return Err(err(
                    key(&tlbs[start], "next"),
                    "the next-level links form a cycle".into(),
                ));
            }
            if !seen[j] {
                seen[j] = true;
                stack.extend_from_slice(&nexts[j]);
            }
        }
    }
    // Siblings: the first-level structures, and the next levels of each structure.
    let firsts: Vec<usize> = (0..n).filter(|&i| !is_next[i]).collect();
    for (parent, members) in
        std::iter::once((None, &firsts)).chain(nexts.iter().enumerate().map(|(i, m)| (Some(i), m)))
    {
        for kind in Kind::REFS {
            if parent.is_some_and(|p| !serves[p].serves(kind)) {
                continue;
            }
            let m = serving(members, kind);
            for (x, &a) in m.iter().enumerate() {
                for &b in &m[x + 1..] {
                    let Some(&common) = shifts[b].iter().find(|s| shifts[a].contains(s)) else {
                        continue;
                    };
                    let (ta, tb) = (&tlbs[a].name, &tlbs[b].name);
                    return Err(match parent {
                        None => err(
                            key(&tlbs[b], "page"),
                            format!(
                                "'{ta}' and '{tb}' both hold {} pages and both take {} references first: structures at one level hold different page sizes (or is one the other's next level?)",
                                size(common),
                                kind.name()
                            ),
                        ),
                        Some(p) => err(
                            key(&tlbs[p], "next"),
                            format!(
                                "'{ta}' and '{tb}' both hold {} pages and both take the {} references that '{}' passes on: structures at one level hold different page sizes",
                                size(common),
                                kind.name(),
                                tlbs[p].name
                            ),
                        ),
                    });
                }
            }
        }
    }
    let roots = Route::among(&firsts, &serves, shifts);
    let next: Vec<Route> = nexts
        .iter()
        .map(|m| Route::among(m, &serves, shifts))
        .collect();
    let translated = Kind::REFS.map(|k| firsts.iter().any(|&i| serves[i].serves(k)));
    // Every page size in use, along every path a reference of it takes.
    let mut in_use: Vec<u32> = pages.shifts().collect();
    in_use.sort_unstable();
    in_use.dedup();
    for kind in Kind::REFS.into_iter().filter(|k| translated[*k as usize]) {
        for &b in &in_use {
            let Some(mut at) = roots.at(kind, b) else {
                let m = serving(&firsts, kind);
                // The machine's own page size: name the setting that changes it.
                let hint = match m.iter().filter_map(|&i| shifts[i].last()).min() {
                    Some(&s) if Some(b) == pages.default => format!(
                        "; the machine's pages are {} (pages.size): for pages of {} set --set pages.size={}, or let '{}' hold {} too",
                        size(b),
                        size(s),
                        size(s),
                        tlbs[m[0]].name,
                        size(b)
                    ),
                    _ => String::new(),
                };
                return Err(err(
                    key(&tlbs[m[0]], "page"),
                    format!(
                        "{} pages: no first-level TLB for {} references holds that size or a smaller one (to cache them as fragments): {}{hint}",
                        size(b),
                        kind.name(),
                        holding(&m)
                    ),
                ));
            };
            while !nexts[at].is_empty() {
                match next[at].at(kind, b) {
                    Some(j) => at = j,
                    None => {
                        let m = serving(&nexts[at], kind);
                        return Err(err(
                            key(&tlbs[at], "next"),
                            format!(
                                "{} pages: no next level of '{}' for {} references holds that size or a smaller one (to cache them as fragments): {}",
                                size(b),
                                tlbs[at].name,
                                kind.name(),
                                holding(&m)
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok((roots, next, translated))
}

/// A kernel-class region of `[pages]`: its class and the range it resolved to (none: the
/// trace's layout does not give it).
type ResolvedClass = (KernelClass, Option<(u64, u64)>);

/// The page map of `config`'s `[pages]`, with the regions that name a kernel class
/// ([`KernelClass`]) resolved in `layout` (a class the layout lacks, or no layout: no
/// region). Returns the map and, per kernel-class region, its class and the range it got.
fn page_map(
    config: &MachineConfig,
    source_name: &str,
    layout: Option<&KernelLayout>,
) -> Result<(PageMap, Vec<ResolvedClass>)> {
    let err = |k: String, m: &str| Error::config(source_name, k, m);
    let mut regions = Vec::new();
    let mut classes = Vec::new();
    for (i, r) in config.pages.regions.iter().enumerate() {
        let (start, end) = match (r.kernel, r.start, r.end) {
            (Some(class), None, None) => {
                if r.size != PageSize::Unmapped {
                    return Err(err(
                        format!("pages.regions[{i}].size"),
                        "a kernel class can only be declared unmapped (size = \"unmapped\"): its range comes from the trace, and may not be aligned to any page size",
                    ));
                }
                let range = layout.and_then(|l| l.range(class));
                classes.push((class, range));
                match range {
                    Some(range) => range,
                    None => continue,
                }
            }
            (Some(_), _, _) => {
                return Err(err(
                    format!("pages.regions[{i}]"),
                    "give start and end, or kernel (a class of the trace's kernel layout), not both",
                ))
            }
            (None, Some(start), Some(end)) => (start, end),
            (None, _, _) => {
                return Err(Error::config(
                    source_name,
                    format!("pages.regions[{i}]"),
                    format!(
                        "give start and end, or kernel = one of the trace's kernel address classes ({})",
                        crate::trace::kernel::class_names()
                    ),
                ))
            }
        };
        if end <= start {
            return Err(err(
                format!("pages.regions[{i}].end"),
                "end must be above start",
            ));
        }
        if let Some(s) = r.size.shift() {
            let mask = (1u64 << s) - 1;
            if start & mask != 0 || (end & mask != 0 && end != u64::MAX) {
                return Err(Error::config(
                    source_name,
                    format!("pages.regions[{i}]"),
                    format!(
                        "start and end must be aligned to the region's page size ({})",
                        r.size.label()
                    ),
                ));
            }
        }
        regions.push((start, end, r.asid, r.size.shift()));
    }
    Ok((
        PageMap {
            default: config.pages.size.shift(),
            has_holes: !regions.is_empty() && regions.iter().all(|r| r.3.is_none()),
            regions,
        },
        classes,
    ))
}

/// How a machine that names kernel classes in `[pages]` resolved them for the trace it runs,
/// and what it must say about pricing that trace's kernel (see [`Machine::bind_trace`]).
#[derive(Clone, Debug, Default)]
struct KernelBinding {
    /// Where the trace's layout came from (none: the source is not a trace file).
    source: Option<LayoutSource>,
    /// Each kernel-class region of `[pages]`.
    classes: Vec<ResolvedClass>,
    /// The trace's direct map and kernel text ranges this machine translates although it
    /// models an unmapped kernel: its result prices them as mapped memory.
    mispriced: Vec<(KernelClass, u64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Mode;

    fn build(toml: &str) -> Result<Machine> {
        Machine::assemble(Some(toml), "m.toml", &[], &[])
    }

    fn misses(m: &Machine, s: usize) -> (u64, u64) {
        let c = m.ledger().total(s, |_, _, _| true);
        (c.accesses, c.misses)
    }

    fn load(addr: u64) -> Event {
        Event::reference(Kind::Load, addr, 8)
    }

    /// Metadata of a whole-system trace: its `kernel_layout`, or (none) an x86-64 Linux
    /// capture booted with nokaslr that recorded none.
    fn system_meta(layout: Option<&str>) -> Metadata {
        let mut m = Metadata::default();
        let mut set = |k: &str, v: &str| m.extra.insert(k.into(), v.into());
        set("capture", "qemu-system plugin");
        set(
            "machine",
            "qemu-system-x86_64 -cpu qemu64 -smp 1 -m 512M (TCG)",
        );
        set("kernel_command_line", "console=ttyS0 nokaslr pti=off");
        if let Some(l) = layout {
            set("kernel_layout", l);
        }
        m
    }

    const TLB: &str = "[[tlb]]\nname='t'\nentries=8\nways='full'\nserves='unified'\n";
    const CLASSES: &str = "[pages]\nregions = [{ kernel = 'direct_map', size = 'unmapped' },\n  { kernel = 'text', size = 'unmapped' }]\n";
    /// A layout unlike x86-64's, so that a resolution from it is told from the fallback.
    const LAYOUT: &str =
        "direct_map 0x100000-0x200000; text 0x300000-0x301000; vmalloc 0x400000-0x500000";

    fn kload(addr: u64) -> Event {
        load(addr).with_mode(Mode::Kernel)
    }

    #[test]
    fn kernel_class_regions_resolve_against_the_trace_layout() {
        let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
        // Before a trace is bound, a class is no region at all.
        assert_eq!(m.pages.backing(0x100000, 0), Some(12));
        m.bind_trace(Some(&system_meta(Some(LAYOUT))), "sys.lks")
            .unwrap();
        // Direct map and text unmapped; vmalloc and the rest translated.
        m.run_batch(&[
            kload(0x100008),
            kload(0x1ff000),
            kload(0x300000),
            kload(0x400000),
            load(0x1000),
        ]);
        assert_eq!(m.ledger().unmapped, 3);
        assert_eq!(misses(&m, 0), (2, 2));
        assert!(m.warnings().is_empty(), "{:?}", m.warnings());
        let j = m.kernel_regions_json().unwrap();
        assert_eq!(j["layout"], "trace");
        assert_eq!(
            j["regions"][0],
            serde_json::json!({"kernel": "direct_map", "start": "0x100000", "end": "0x200000"})
        );
        // Regions keep their order, numbered ones and classes alike: the first match wins.
        let mixed = "[pages]\nregions = [{ start = 0x100000, end = 0x180000, size = '512k' },\n  { kernel = 'direct_map', size = 'unmapped' }]\n";
        let mut m = build(&format!(
            "{mixed}[[tlb]]\nname='t'\nentries=8\npage=['4k','512k']\n"
        ))
        .unwrap();
        m.bind_trace(Some(&system_meta(Some(LAYOUT))), "sys.lks")
            .unwrap();
        assert_eq!(m.pages.backing(0x100000, 0), Some(19));
        assert_eq!(m.pages.backing(0x180000, 0), None);
    }

    #[test]
    fn kernel_classes_fall_back_only_for_x86_64_nokaslr_captures() {
        let direct = 0xffff_8880_0000_1000;
        // An old capture of x86-64 Linux with nokaslr: the documented layout, said so.
        let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
        m.bind_trace(Some(&system_meta(None)), "old.lks").unwrap();
        m.run_batch(&[kload(direct), kload(0xffff_ffff_8100_0000)]);
        assert_eq!(m.ledger().unmapped, 2);
        let w = m.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("take the documented x86-64 nokaslr layout"),
            "{w:?}"
        );
        assert_eq!(m.kernel_regions_json().unwrap()["layout"], "x86_64_nokaslr");
        // Anything else: the classes resolve to nothing, and a trace with kernel references
        // is told so.
        let mut kaslr = system_meta(None);
        kaslr
            .extra
            .insert("kernel_command_line".into(), "console=ttyS0".into());
        for meta in [Some(kaslr), None] {
            let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
            m.bind_trace(meta.as_ref(), "t.lks").unwrap();
            m.run_batch(&[kload(direct)]);
            assert_eq!(m.ledger().unmapped, 0);
            let w = m.warnings();
            // No layout either to resolve the classes or to check the pricing against.
            assert!(w.len() == 1 && w[0].contains("pages.regions names kernel classes (direct_map, text) that the trace's kernel layout does not give (the trace records no kernel_layout metadata"), "{w:?}");
        }
        // A user-level trace: nothing to say.
        let mut m = build(&format!("{CLASSES}{TLB}")).unwrap();
        m.bind_trace(None, "user.lks").unwrap();
        m.run_batch(&[load(0x1000)]);
        assert!(m.warnings().is_empty());
        // A bad kernel_layout is an error naming the trace.
        let e = build(&format!("{CLASSES}{TLB}"))
            .unwrap()
            .bind_trace(Some(&system_meta(Some("heap 0x1-0x2"))), "bad.lks")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bad.lks")
                && e.contains("metadata kernel_layout: 'heap' is not a kernel address class"),
            "{e}"
        );
    }

    #[test]
    fn kernel_class_regions_are_checked() {
        let err = |regions: &str| {
            build(&format!("[pages]\nregions = [{regions}]\n{TLB}"))
                .unwrap_err()
                .to_string()
        };
        assert!(err("{ kernel = 'text', size = '4k' }")
            .contains("pages.regions[0].size: a kernel class can only be declared unmapped"));
        assert!(err("{ kernel = 'text', start = 0, end = 4096, size = 'unmapped' }").contains("pages.regions[0]: give start and end, or kernel (a class of the trace's kernel layout), not both"));
        assert!(err("{ start = 0, size = 'unmapped' }").contains("pages.regions[0]: give start and end, or kernel = one of the trace's kernel address classes (direct_map, text, modules, vmalloc, vmemmap, fixmap, cpu_entry_area)"));
        let e = err("{ kernel = 'heap', size = 'unmapped' }");
        assert!(e.contains("line 2, column 23: pages.regions[0].kernel: 'heap' is not one of: direct_map, text,"), "{e}");
    }

    #[test]
    fn an_unmapped_kernel_model_warns_when_it_would_translate_the_direct_map() {
        // Chen's DECstation as it was: MIPS kseg0 and x86-64's kernel text unmapped by
        // number, the direct map translated, handlers synthesised for its misses.
        let old = "[pages]\nregions = [{ start = 0x80000000, end = 0xc0000000, size = 'unmapped' },\n  { start = '0xffffffff80000000', end = '0xffffffffc0000000', size = 'unmapped' }]\n";
        let fixed = format!("{old}  \n").replace("size = 'unmapped' }]", "size = 'unmapped' },\n  { kernel = 'direct_map', size = 'unmapped' }, { kernel = 'text', size = 'unmapped' }]");
        let meta = system_meta(Some(
            &crate::trace::kernel::KernelLayout::of(&crate::trace::kernel::X86_64_NOKASLR)
                .describe(),
        ));
        let refs = [
            kload(0xffff_8880_0000_1000),
            kload(0xffff_ffff_8100_0000),
            load(0x1000),
        ];
        let mut m = build(&format!("{old}{TLB}")).unwrap();
        m.bind_trace(Some(&meta), "pipe.lks").unwrap();
        m.run_batch(&refs);
        let w = m.warnings();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("translates what the trace calls its direct_map 0xffff888000000000-0xffffc88000000000: its kernel references there are priced as mapped memory"), "{w:?}");
        assert!(
            !w[0].contains("text 0x"),
            "the text is unmapped by number: {w:?}"
        );
        let mut m = build(&format!("{fixed}{TLB}")).unwrap();
        m.bind_trace(Some(&meta), "pipe.lks").unwrap();
        m.run_batch(&refs);
        assert!(m.warnings().is_empty(), "{:?}", m.warnings());
        assert_eq!(m.ledger().unmapped, 2);
        // No unmapped kernel at all (a modern x86 TLB): the direct map is mapped there too.
        let mut m = build(TLB).unwrap();
        m.bind_trace(Some(&meta), "pipe.lks").unwrap();
        m.run_batch(&refs);
        assert!(m.warnings().is_empty());
        // Without kernel references, nothing to say.
        let mut m = build(&format!("{old}{TLB}")).unwrap();
        m.bind_trace(Some(&meta), "pipe.lks").unwrap();
        m.run_batch(&[load(0x1000)]);
        assert!(m.warnings().is_empty());
    }

    #[test]
    fn page_size_map_backs_regions_with_large_pages() {
        let pages = "[pages]\nregions = [{ start = 0x200000, end = 0x600000, size = '2M' },\n  { start = 0x80000000, end = 0xc0000000, size = 'unmapped' }]\n";
        let both = build(&format!(
            "{pages}[[tlb]]\nname='d'\nentries=8\npage=['4k','2M']\nserves='unified'\n"
        ))
        .unwrap();
        let small = build(&format!(
            "{pages}[[tlb]]\nname='d'\nentries=8\npage='4k'\nserves='unified'\n"
        ))
        .unwrap();
        let trace = [
            load(0x200000),
            load(0x3ff000),
            load(0x201000),
            load(0x8000_1000),
            load(0x1000),
        ];
        for (mut m, expect) in [(both, (4, 2)), (small, (4, 4))] {
            m.run_batch(&trace);
            // A 2 MiB page is one entry where it can be held, and 4 KiB fragments otherwise.
            assert_eq!(misses(&m, 0), expect);
            assert_eq!(m.ledger().unmapped, 1);
        }
    }

    #[test]
    fn kernel_fills_go_to_the_lower_partition() {
        let mut m = build(
            "[[tlb]]\nname='t'\nentries=4\npolicy='lru'\nplacement='kernel-lower'\npartition={lower=1, lower_policy='fifo', upper_policy='lru'}\n",
        )
        .unwrap();
        let k = |a| load(a).with_mode(Mode::Kernel);
        // Two kernel pages share the one lower slot; the user page keeps its upper slot.
        m.run_batch(&[load(0x9000), k(0x1000), k(0x2000), k(0x1000), load(0x9000)]);
        assert_eq!(misses(&m, 0), (5, 4));
    }

    #[test]
    fn global_pages_are_shared_by_address_spaces() {
        let mut m = build(
            "[machine]\nglobal_above = 0x80000000\n[[tlb]]\nname='t'\nentries=8\nasid=false\n",
        )
        .unwrap();
        m.run_batch(&[
            load(0x8000_0000),
            load(0x1000),
            load(0x8000_0000).with_asid(1),
            load(0x1000).with_asid(1),
        ]);
        // The switch flushed the untagged user entry but kept the global one.
        assert_eq!(misses(&m, 0), (4, 3));
    }

    #[test]
    fn bad_machines_name_the_key() {
        let e = |t: &str| build(t).unwrap_err().to_string();
        assert!(e("").contains("no TLB"));
        assert!(
            e("[machine]\nglobal_above = 0x1234\n[[tlb]]\nname='t'\nentries=4\n")
                .contains("machine.global_above")
        );
        assert!(e(
            "[[tlb]]\nname='a'\nentries=4\nnext='b'\n[[tlb]]\nname='b'\nentries=4\nnext='a'\n"
        )
        .contains("cycle"));
        assert!(
            e("[[tlb]]\nname='a'\nentries=4\n[[tlb]]\nname='b'\nentries=4\n").contains(
                "tlb.b.page: 'a' and 'b' both hold 4K pages and both take fetch references first"
            )
        );
        assert!(e(
            "[[tlb]]\nname='a'\nentries=4\nnext='b'\n[[tlb]]\nname='b'\nentries=4\nserves='data'\n"
        )
        .contains("tlb.a.next"));
        assert!(e("[[tlb]]\nname='a'\nentries=4\nnext='x'\n").contains("no TLB named 'x'"));
        assert!(
            e("[[tlb]]\nname='a'\nentries=4\nplacement='kernel-lower'\n")
                .contains("tlb.a.placement")
        );
        assert!(e("[[tlb]]\nname='a'\nentries=4\npartition={lower=4}\n")
            .contains("tlb.a.partition.lower"));
        assert!(e("[[tlb]]\nname='a b'\nentries=4\n").contains("tlb[0].name"));
    }

    /// x86's first level: 4 KiB pages in one structure, 2 MiB pages in another beside it,
    /// one second level for both; regions of 2 MiB, 1 GiB and 64 KiB pages.
    const SIBLINGS: &str = "[pages]\nregions = [{ start = 0x200000, end = 0x600000, size = '2M' },\n  { start = 0x40000000, end = 0x80000000, size = '1G' },\n  { start = 0x10000, end = 0x30000, size = '64k' }]\n[[tlb]]\nname='d'\nentries=4\nserves='data'\nnext='s'\n[[tlb]]\nname='d2m'\nentries=2\npage='2M'\nserves='data'\nnext='s'\n[[tlb]]\nname='s'\nentries=16\npage=['4k','2M']\n";

    #[test]
    fn siblings_take_the_pages_of_their_sizes() {
        let mut m = build(SIBLINGS).unwrap();
        m.run_batch(&[
            load(0x1000),      // 4K: d
            load(0x20_1000),   // 2M page 1: d2m
            load(0x3f_f000),   // 2M page 1 again: a hit in d2m
            load(0x40_0000),   // 2M page 2: d2m
            load(0x4000_0000), // 1G: d2m, as a 2M fragment
            load(0x4000_1000), // the same fragment: a hit
            load(0x4020_0000), // the next fragment
            load(0x1_0000),    // 64K: d, as 4K fragments
            load(0x1_1000),
            load(0x1_0008), // a hit
        ]);
        assert_eq!(misses(&m, 0), (4, 3));
        assert_eq!(misses(&m, 1), (6, 4));
        // Behind both: every miss, at the entry size of the page (2M fragments of the 1G one).
        assert_eq!(misses(&m, 2), (7, 7));
        assert_eq!(m.ledger().total(3, |_, _, _| true).misses, 7);
        // Instruction fetches have no first level here: untranslated.
        m.run_batch(&[Event::reference(Kind::Fetch, 0x1000, 4)]);
        assert_eq!(misses(&m, 2), (7, 7));
    }

    #[test]
    fn a_next_level_can_be_siblings() {
        // One first level for everything; its misses go to a 4K+2M STLB or a 1G one.
        let mut m = build(
            "[pages]\nregions = [{ start = 0x40000000, end = 0x80000000, size = '1G' }]\n[[tlb]]\nname='d'\nentries=4\nnext=['s', 's1g']\nserves='unified'\n[[tlb]]\nname='s'\nentries=16\npage=['4k','2M']\n[[tlb]]\nname='s1g'\nentries=2\npage='1G'\n",
        )
        .unwrap();
        m.run_batch(&[
            load(0x1000),
            load(0x4000_0000),
            load(0x5000_0000), // another 4K fragment of the same 1G page: a hit in s1g
            load(0x1000),
        ]);
        assert_eq!(misses(&m, 0), (4, 3));
        assert_eq!(misses(&m, 1), (1, 1));
        assert_eq!(misses(&m, 2), (2, 1));
        let j = crate::report::result_json(&m, &Default::default());
        assert_eq!(
            j["structures"]["d"]["geometry"]["next"],
            serde_json::json!(["s", "s1g"])
        );
    }

    #[test]
    fn the_documented_x86_machine_with_large_page_siblings_builds() {
        let readme = include_str!("../../../docs/machines.md");
        let at = readme.find("**Structures for large pages.**").unwrap();
        let toml = readme[at..].split("```toml\n").nth(1).unwrap();
        let toml = toml.split("```").next().unwrap();
        let mut m = build(toml).unwrap();
        // A 1G data page: dtlb1g then stlb1g; a 1G code page: 4K fragments in the ITLB, 2M
        // ones in the STLB.
        let g = 0x7f40_0000_0000;
        m.run_batch(&[
            load(g),
            load(g + (5 << 20)),
            Event::reference(Kind::Fetch, g, 4),
        ]);
        let names = ["itlb", "dtlb", "dtlb2m", "dtlb1g", "stlb", "stlb1g"];
        let got: Vec<(u64, u64)> = (0..names.len()).map(|i| misses(&m, i)).collect();
        assert_eq!(got, [(1, 1), (0, 0), (0, 0), (2, 1), (1, 1), (1, 1)]);
    }

    #[test]
    fn ambiguous_or_incomplete_siblings_are_errors() {
        let e = |t: &str| build(t).unwrap_err().to_string();
        // Two first-level structures for data holding 2M.
        assert_eq!(
            e(&SIBLINGS.replace("page='2M'", "page=['4k', '2M']")),
            "m.toml: line 13, column 1: tlb.d2m.page: 'd' and 'd2m' both hold 4K pages and both take load references first: structures at one level hold different page sizes (or is one the other's next level?)"
        );
        // Only large pages where 4K pages are in use (another structure holds 4K only, so
        // the pages stay 4K): the message names the setting that changes them.
        assert_eq!(
            e("[[tlb]]\nname='d'\nentries=4\npage='2M'\nserves='data'\n[[tlb]]\nname='i'\nentries=4\npage='4k'\nserves='instruction'\n"),
            "m.toml: line 4, column 1: tlb.d.page: 4K pages: no first-level TLB for load references holds that size or a smaller one (to cache them as fragments): 'd' holds 2M; the machine's pages are 4K (pages.size): for pages of 2M set --set pages.size=2M, or let 'd' hold 4K too"
        );
        // A structure that alone says it holds 2M pages makes them the machine's pages.
        let mut m = build("[[tlb]]\nname='d'\nentries=4\npage='2M'\nserves='unified'\n").unwrap();
        m.run_batch(&[load(0x1000), load(0x1f_f000), load(0x20_0000)]);
        assert_eq!(misses(&m, 0), (3, 2));
        assert_eq!(m.config().pages.size, PageSize::Size(2 << 20));
        let s2m = e(&SIBLINGS.replace("page=['4k','2M']", "page='2M'"));
        assert!(s2m.starts_with(
            "m.toml: line 9, column 1: tlb.d.next: 4K pages: no next level of 'd' for load references holds that size or a smaller one (to cache them as fragments): 's' holds 2M"
        ), "{s2m}");
        let next = |list: &str, a: &str, b: &str| {
            e(&format!("[[tlb]]\nname='d'\nentries=4\nnext={list}\nserves='unified'\n[[tlb]]\nname='s'\nentries=8\n{a}[[tlb]]\nname='t'\nentries=8\n{b}"))
        };
        assert!(next("['s', 't']", "", "").ends_with(
            "tlb.d.next: 's' and 't' both hold 4K pages and both take the fetch references that 'd' passes on: structures at one level hold different page sizes"
        ));
        build("[[tlb]]\nname='d'\nentries=4\nnext=['s', 't']\nserves='unified'\n[[tlb]]\nname='s'\nentries=8\n[[tlb]]\nname='t'\nentries=8\npage='2M'\n").unwrap();
        assert!(next("['s', 's']", "", "").ends_with("tlb.d.next: names 's' twice"));
        assert!(next(
            "['s', 't']",
            "serves='data'\n",
            "serves='data'\npage='2M'\n"
        )
        .ends_with(
            "tlb.d.next: none of 's', 't' does serve the fetch references that 'd' passes on"
        ));
        // Siblings for different kinds may hold the same sizes.
        build("[[tlb]]\nname='d'\nentries=4\nnext=['s', 't']\nserves='unified'\n[[tlb]]\nname='s'\nentries=8\nserves='data'\n[[tlb]]\nname='t'\nentries=8\nserves='instruction'\n").unwrap();
    }

    /// Sixteen chained structures of 2^24 entries each: the largest each may be, several GiB
    /// together.
    fn sixteen_huge() -> String {
        (0..16)
            .map(|i| {
                let next = if i < 15 {
                    format!("next='t{}'\n", i + 1)
                } else {
                    String::new()
                };
                format!("[[tlb]]\nname='t{i}'\nentries=16777216\nways='full'\n{next}")
            })
            .collect()
    }

    #[test]
    fn a_machine_over_the_memory_limit_is_refused_before_anything_is_allocated() {
        let need = memory_estimate(&MachineConfig::from_toml(&sixteen_huge(), "m.toml").unwrap());
        assert!(need > 4 << 30, "{need}");
        // Within a limit of 1 GiB the refusal names the estimate, the limit and the option;
        // had the structures been built first, this would take gigabytes and seconds.
        let e = Machine::assemble_within(
            Some(&sixteen_huge()),
            "m.toml",
            &[],
            &[],
            MemoryLimit::of(1 << 30),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("m.toml: machine: the machine needs ~")
                && e.contains(&human_bytes(need))
                && e.contains("over the 1.0 GiB limit (--max-memory)"),
            "{e}"
        );
        // An invalid machine is refused for what is wrong with it, before the estimate (a
        // wiring error after sixteen huge structures).
        let bad = format!(
            "{}[[tlb]]\nname='x'\nentries=4\nnext='nowhere'\n",
            sixteen_huge()
        );
        let e = Machine::assemble_within(Some(&bad), "m.toml", &[], &[], MemoryLimit::of(1 << 30))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tlb.x.next: no TLB named 'nowhere'"), "{e}");
        // A machine within the limit builds; the estimate follows the geometry.
        let small = "[[tlb]]\nname='t'\nentries=64\nways=4\n";
        let m = Machine::assemble_within(Some(small), "m.toml", &[], &[], MemoryLimit::of(1 << 20));
        assert!(m.is_ok());
        let one = memory_estimate(&MachineConfig::from_toml(small, "m.toml").unwrap());
        assert!((64 * 16..64 * 64).contains(&one), "{one}");
        assert!(MemoryLimit::default_for_host().bytes > 0);
        assert_eq!(MemoryLimit::parse("12G").unwrap().bytes, 12 << 30);
        assert!(MemoryLimit::parse("lots").is_err());
    }

    /// The estimate covers the memory system, the refill model and the page table too: a
    /// 1 GiB physical memory or a cache of 2^24 lines is not free.
    #[test]
    fn the_memory_estimate_counts_every_section() {
        let est = |t: &str| memory_estimate(&MachineConfig::from_toml(t, "m.toml").unwrap());
        let tlb = "[[tlb]]\nname='t'\nentries=64\n";
        let base = est(tlb);
        let cache = est(&format!("{tlb}[memory]\nmemory='64MiB'\n[memory.dcache]\nsize='64MiB'\nline=4\nmiss_cycles=15\n"));
        assert!(cache > base + (16 << 20) * 16, "{cache}");
        let table = est(&format!(
            "{tlb}[pagetable]\norganisation='hashed'\nmemory='1GiB'\n"
        ));
        assert!(table > base + ((1 << 30) >> 12) * 16, "{table}");
        let refill = est(&format!("{tlb}[refill]\n"));
        assert_eq!(refill, 2 * base);
    }

    /// The DECstation 3100 under Mach 3.0, as shipped.
    const MACH3: &str = include_str!("../../../python/lookaside/presets/decstation3100-mach3.toml");

    #[test]
    fn a_mips_machine_refuses_user_references_above_kuseg_naming_the_fix() {
        let x86 = |m: &mut Machine| {
            let evs: Vec<Event> = (0..200)
                .map(|i| load(0x7ffd_0000_0000 + 64 * i))
                .chain([load(0x60_1000)])
                .collect();
            m.run_batch(&evs);
        };
        let mut m = Machine::assemble(Some(MACH3), "mach3", &[], &[]).unwrap();
        x86(&mut m);
        assert_eq!(m.dropped(), 200);
        let e = m.cannot_follow("t.lackey").unwrap().to_string();
        assert!(
            e.starts_with("t.lackey: refill.fold_user_addresses: 99.5 % of the user references lie above MIPS kuseg")
                && e.contains("--set refill.fold_user_addresses=true"),
            "{e}"
        );
        assert_eq!(m.warnings().len(), 1);
        // Folded, everything is simulated.
        let fold = ["refill.fold_user_addresses=true".to_string()];
        let mut f = Machine::assemble(Some(MACH3), "mach3", &[], &fold).unwrap();
        x86(&mut f);
        assert!(f.cannot_follow("t").is_none() && f.warnings().is_empty());
        assert_eq!((f.dropped(), f.dropped_share()), (0, 0.0));
        // One stray reference in a hundred and more is no reason to refuse or warn.
        let mut few = Machine::assemble(Some(MACH3), "mach3", &[], &[]).unwrap();
        let mut evs: Vec<Event> = (0..200).map(|i| load(0x40_0000 + 64 * i)).collect();
        evs.push(load(0x7ffd_0000_0000));
        few.run_batch(&evs);
        assert_eq!(few.dropped(), 1);
        assert!(few.cannot_follow("t").is_none() && few.warnings().is_empty());
    }

    /// An x86-64 layout for the MIPS model's tests: direct map, text and vmalloc only.
    const X86_LAYOUT: &str = "direct_map 0xffff888000000000-0xffffc88000000000; text 0xffffffff80000000-0xffffffffc0000000; vmalloc 0xffffc90000000000-0xffffe90000000000";

    #[test]
    fn an_x86_64_system_trace_lands_on_the_mips_segments_by_its_kernel_layout() {
        let classes = "[pages]\nsize = \"4k\"\nregions = [{ kernel = 'direct_map', size = 'unmapped' }, { kernel = 'text', size = 'unmapped' }]\n";
        let text = MACH3.replace("[pages]\nsize = \"4k\"\n", classes);
        assert_ne!(text, MACH3);
        let x86 = ["refill.addresses=\"x86-64\"".to_string()];
        let evs = [
            load(0x40_1000),
            load(0x7ffd_0000_1000),
            kload(0xffff_8880_0000_1000),
            kload(0xffff_ffff_8100_0000),
            kload(0xffff_c900_0000_1000),
            // vmemmap: not in this layout, so no class: an address error.
            kload(0xffff_ea00_0000_0000),
        ];
        let mut m = Machine::assemble(Some(&text), "mach3", &[], &x86).unwrap();
        m.bind_trace(Some(&system_meta(Some(X86_LAYOUT))), "sys.lks")
            .unwrap();
        m.run_batch(&evs);
        let t = m.refill().unwrap().counts().totals();
        assert_eq!((t[0], t[1]), (2, 1), "{t:?}");
        assert_eq!((m.ledger().unmapped, m.dropped()), (2, 1));
        assert!(m.cannot_follow("sys.lks").is_none());
        let w = m.warnings();
        assert!(w.len() == 1 && w[0].contains("(1 of 6)"), "{w:?}");
        // The direct map and text not declared unmapped: mapped kernel data, and said so.
        let mut bare = Machine::assemble(Some(MACH3), "mach3", &[], &x86).unwrap();
        bare.bind_trace(Some(&system_meta(Some(X86_LAYOUT))), "sys.lks")
            .unwrap();
        bare.run_batch(&evs);
        assert_eq!(bare.refill().unwrap().counts().totals()[1], 3);
        let w = bare.warnings();
        assert!(
            w.iter().any(|w| w.contains("MIPS kseg0: refill.addresses")
                && w.contains("direct_map 0xffff888000000000-0xffffc88000000000")),
            "{w:?}"
        );
        // A generated workload's addresses are MIPS ones: refused.
        let mut gen = Machine::assemble(Some(MACH3), "mach3", &[], &x86).unwrap();
        gen.run_batch(&[load(0x40_0000)]);
        let e = gen.cannot_follow("workload:os").unwrap().to_string();
        assert!(
            e.starts_with("workload:os: refill.addresses: \"x86-64\" maps"),
            "{e}"
        );
        // More 4 MB blocks in one address space than kuseg holds: refused, naming the page.
        let mut big = Machine::assemble(Some(MACH3), "mach3", &[], &x86).unwrap();
        big.bind_trace(Some(&system_meta(Some(X86_LAYOUT))), "big.lks")
            .unwrap();
        let many: Vec<Event> = (0..=512u64).map(|b| load(b << 33 | 0x123)).collect();
        big.run_batch(&many);
        let e = big.cannot_follow("big.lks").unwrap().to_string();
        assert!(
            e.starts_with("big.lks: refill.addresses: address space 0 touches more than 512")
                && e.contains("page at 0x40000000000"),
            "{e}"
        );
    }

    #[test]
    fn kernel_references_the_mips_model_cannot_translate_are_a_warning() {
        // A Linux trace's kernel references above 4 GB (x86-64's direct map): address errors
        // on the MIPS model, whatever folding says; warned about, not refused.
        let fold = ["refill.fold_user_addresses=true".to_string()];
        let mut m = Machine::assemble(Some(MACH3), "mach3", &[], &fold).unwrap();
        let mut evs: Vec<Event> = (0..90).map(|i| load(0x40_0000 + 4096 * i)).collect();
        evs.extend((0..10).map(|i| load(0xffff_8880_0000_0000 + 4096 * i).with_mode(Mode::Kernel)));
        m.run_batch(&evs);
        assert_eq!(m.dropped(), 10);
        assert!(m.cannot_follow("t").is_none());
        let w = m.warnings();
        assert!(
            w.len() == 1
                && w[0].starts_with("10.0 % of the translations were not simulated (10 of 100)"),
            "{w:?}"
        );
        let j = crate::report::result_json(&m, &Default::default());
        assert_eq!(j["warnings"], serde_json::json!(w));
        assert_eq!(j["trace"]["dropped"], 10);
        assert!(crate::report::table(&j).contains("\nwarning: 10.0 % of the translations"));
    }

    #[test]
    fn an_access_over_many_pages_translates_each_page_once() {
        // 65535 bytes from 0x10ff8: pages 0x10..=0x20, 17 translations (16 straddles), on
        // every path (the fast path, regions, the refill model).
        let big = Event::reference(Kind::Load, 0x10ff8, u16::MAX);
        let regions = "[pages]\nregions = [{ start = 0x200000, end = 0x400000, size = '2M' }]\n";
        for text in [
            "[[tlb]]\nname='t'\nentries=64\nways='full'\n".to_string(),
            format!("{regions}[[tlb]]\nname='t'\nentries=64\nways='full'\npage=['4k','2M']\n"),
        ] {
            let mut m = build(&text).unwrap();
            m.run_batch(&[big]);
            assert_eq!(
                (misses(&m, 0), m.ledger().straddles),
                ((17, 17), 16),
                "{text}"
            );
            // The same pages again, one small access each: all hit.
            let again: Vec<Event> = (0x10..=0x20).map(|p| load(p << 12)).collect();
            m.run_batch(&again);
            assert_eq!(misses(&m, 0), (34, 17));
        }
        let fold = ["refill.fold_user_addresses=true".to_string()];
        let mut r = Machine::assemble(Some(MACH3), "mach3", &[], &fold).unwrap();
        r.run_batch(&[big]);
        assert_eq!((misses(&r, 0).0, r.ledger().straddles), (17, 16));
        // From a 4 KiB page into a 2 MiB one: the large page is one translation.
        let mut m = build(&format!(
            "{regions}[[tlb]]\nname='t'\nentries=64\nways='full'\npage=['4k','2M']\n"
        ))
        .unwrap();
        m.run_batch(&[Event::reference(Kind::Load, 0x1f_f000, 40000)]);
        assert_eq!(misses(&m, 0), (2, 2));
    }

    #[test]
    fn an_access_past_the_top_of_the_address_space_is_clamped_and_counted() {
        let mut m = build("[[tlb]]\nname='t'\nentries=64\nways='full'\n").unwrap();
        // From the last page but one, 8 KiB: two pages, then past 2^64.
        m.run_batch(&[Event::reference(
            Kind::Store,
            0u64.wrapping_sub(0x1800),
            0x2000,
        )]);
        assert_eq!((misses(&m, 0), m.ledger().straddles), ((2, 2), 1));
        assert_eq!((m.ledger().wrapped, m.dropped()), (1, 1));
        assert_eq!(m.warnings().len(), 1);
        // Straddling the top within one page after the clamp: one page, still counted.
        let mut m = build("[[tlb]]\nname='t'\nentries=64\nways='full'\n").unwrap();
        m.run_batch(&[Event::reference(Kind::Load, u64::MAX - 3, 8)]);
        assert_eq!((misses(&m, 0), m.ledger().wrapped), ((1, 1), 1));
    }
}

#[cfg(test)]
mod three_c_tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// One LRU structure by brute force: per set its keys, least recent first.
    struct Lru {
        sets: Vec<Vec<(u32, u64)>>,
        ways: usize,
    }

    impl Lru {
        fn new(entries: usize, ways: usize) -> Lru {
            Lru {
                sets: vec![Vec::new(); entries / ways],
                ways,
            }
        }

        /// Access `(asid, page)`; returns whether it hit.
        fn access(&mut self, key: (u32, u64)) -> bool {
            let n = self.sets.len() as u64;
            let set = &mut self.sets[(key.1 % n) as usize];
            let hit = match set.iter().position(|&k| k == key) {
                Some(i) => {
                    set.remove(i);
                    true
                }
                None => {
                    if set.len() == self.ways {
                        set.remove(0);
                    }
                    false
                }
            };
            set.push(key);
            hit
        }
    }

    /// A structure and its brute-force classifier: the structure, a fully associative LRU
    /// shadow of its size, the pages ever touched; counts per (kind, mode, asid) of
    /// accesses, misses and each class.
    struct Classifier {
        real: Lru,
        full: Lru,
        seen: HashSet<(u32, u64)>,
        counts: std::collections::BTreeMap<(usize, usize, u32), [u64; 5]>,
    }

    impl Classifier {
        fn new(entries: usize, ways: usize) -> Classifier {
            Classifier {
                real: Lru::new(entries, ways),
                full: Lru::new(entries, entries),
                seen: HashSet::new(),
                counts: Default::default(),
            }
        }

        /// Returns whether it missed.
        fn access(&mut self, kind: usize, mode: usize, key: (u32, u64)) -> bool {
            let hit = self.real.access(key);
            let full_hit = self.full.access(key);
            let first = self.seen.insert(key);
            let c = self.counts.entry((kind, mode, key.0)).or_default();
            c[0] += 1;
            if !hit {
                c[1] += 1;
                c[2 + if full_hit {
                    2
                } else if first {
                    0
                } else {
                    1
                }] += 1;
            }
            !hit
        }

        /// Sum of the counts `keep` accepts: accesses, misses, compulsory, capacity,
        /// conflict.
        fn total(&self, keep: impl Fn(usize, usize, u32) -> bool) -> [u64; 5] {
            let mut t = [0; 5];
            for (&(k, m, a), c) in &self.counts {
                if keep(k, m, a) {
                    for (x, y) in t.iter_mut().zip(c) {
                        *x += y;
                    }
                }
            }
            t
        }
    }

    fn fields(j: &serde_json::Value) -> [u64; 5] {
        ["accesses", "misses", "compulsory", "capacity", "conflict"]
            .map(|f| j[f].as_u64().unwrap_or(0))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

        /// The classes of a two-level TLB's misses, per reference, equal a brute-force
        /// per-reference classifier (compulsory: the first touch of a page of an address
        /// space; capacity: a fully associative LRU structure of the same size misses too;
        /// conflict otherwise), in total and by kind, mode and address space; and
        /// classifying changes no hit or miss.
        #[test]
        fn tlb_misses_are_classified_per_reference(
            d_log in 0u32..5,
            d_ways_log in 0u32..3,
            s_log in 2u32..6,
            pages in 1u64..40,
            refs in prop::collection::vec((0u8..3, 0u64..48, 0u32..3, any::<bool>()), 1..500),
        ) {
            // Few pages, so that structures fill and kinds interleave on the same pages.
            let refs: Vec<(u8, u64, u32, bool)> =
                refs.iter().map(|&(k, p, a, m)| (k, p % pages, a % 2, m)).collect();
            let d_entries = 1usize << d_log;
            let d_ways = 1usize << d_ways_log.min(d_log);
            let s_entries = 1usize << s_log;
            let flags = |three_c: &str| {
                vec![
                    format!("dtlb:entries={d_entries},ways={d_ways},serves=unified,next=stlb{three_c}"),
                    format!("stlb:entries={s_entries},ways=2{three_c}"),
                ]
            };
            let events: Vec<Event> = refs
                .iter()
                .map(|&(k, page, asid, kernel)| {
                    let kind = [Kind::Fetch, Kind::Load, Kind::Store][k as usize];
                    let mode = if kernel { Mode::Kernel } else { Mode::User };
                    Event::reference(kind, (page << 12) | 8, 4).with_asid(asid).with_mode(mode)
                })
                .collect();
            let run = |f: Vec<String>| {
                let mut m = Machine::assemble(None, "t", &f, &[]).unwrap();
                m.run_batch(&events);
                crate::report::result_json(&m, &Default::default())
            };
            let with = run(flags(",3c=yes"));
            let without = run(flags(""));
            let mut d = Classifier::new(d_entries, d_ways);
            let mut s = Classifier::new(s_entries, 2);
            for (&(k, page, asid, kernel), _) in refs.iter().zip(&events) {
                if d.access(k as usize, kernel as usize, (asid, page)) {
                    s.access(k as usize, kernel as usize, (asid, page));
                }
            }
            for (name, c) in [("dtlb", &d), ("stlb", &s)] {
                let j = &with["structures"][name];
                prop_assert_eq!(fields(j), c.total(|_, _, _| true), "{}", name);
                prop_assert_eq!(&j["misses"], &without["structures"][name]["misses"]);
                prop_assert_eq!(&j["accesses"], &without["structures"][name]["accesses"]);
                for (k, kind) in Kind::REFS.iter().enumerate() {
                    let want = c.total(|kk, _, _| kk == k);
                    if want[0] > 0 {
                        prop_assert_eq!(fields(&j["by_kind"][kind.name()]), want);
                    }
                }
                for (m, mode) in ["user", "kernel"].iter().enumerate() {
                    let want = c.total(|_, mm, _| mm == m);
                    if want[0] > 0 {
                        prop_assert_eq!(fields(&j["by_mode"][*mode]), want);
                    }
                }
                for asid in 0..2u32 {
                    let want = c.total(|_, _, a| a == asid);
                    if want[0] > 0 {
                        prop_assert_eq!(fields(&j["by_asid"][asid.to_string()]), want);
                    }
                }
            }
            // Compulsory misses are the distinct pages (of an address space) touched.
            let distinct = refs.iter().map(|r| (r.2, r.1)).collect::<HashSet<_>>().len() as u64;
            prop_assert_eq!(with["structures"]["dtlb"]["compulsory"].as_u64(), Some(distinct));
        }
    }
}
