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
//! - `TlbFlush` with `FLUSH_ALL` empties every structure; with `FLUSH_SPACE` it removes the
//!   entries of its address space but the global ones; with an address it invalidates that
//!   page in every structure, as do `Unmap` and `Protect` (a shootdown); `Unmap` also takes
//!   the page out of the `[pagetable]`, so that its next walk faults. A `Map` of a page the
//!   `[pagetable]` holds rewrites its entry: the page leaves the table and every structure
//!   as on an unmap, and its next walk maps it where the OS now has it.
//! - With a virtually addressed cache (`[vac]`) and a `[pagetable]`, the machine has one
//!   physical memory, the VAC's OS's: each event reaches the VAC first, and a page the
//!   walker faults on takes the frame that OS gave it ([`crate::vm::PhysicalMemory`]).
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
use crate::event::{Event, EventSink, Kind, Mode, FLUSH_ALL, FLUSH_SPACE};
use crate::ledger::Ledger;
use crate::mmu::addresses::Place;
use crate::mmu::layout::{self, Segment};
use crate::mmu::{HandlerStep, SoftwareManagedTlb, Trap, Walker};
use crate::threec::Shadow;
use crate::tlb::{Engine, HillClimber, Part, Partition, Policy, Tlb, TlbParams, NO_CTX};
use crate::trace::kernel::{KernelClass, KernelLayout, LayoutSource};
use crate::trace::native::NativeReader;
use crate::trace::Metadata;
use crate::vm::PageSizes;

mod alone;
mod build;
mod climb;
mod cpus;
mod feed;
mod handler;
mod one_root;
mod physical;
mod prefetch;
mod translate;
use alone::CacheFeed;
pub use build::{human_bytes, memory_estimate, MemoryLimit};
use build::{page_map, ResolvedClass};
use climb::Climb;
pub use feed::Feed;
use feed::{
    alone_unless_walks, entry_key, fast_paths, slow_structures, Fast, Memo, MemoryFeed, Tally,
    NO_MEMO, NO_PAGE,
};
use one_root::{one_root, RootFeed};
use prefetch::Prefetcher;

/// Context-tag bit of a global entry.
const GLOBAL: u64 = 1 << 40;

/// The address space whose page mapping places the pages of MIPS kseg2 on a machine with
/// `[refill]` and `[memory]`: kseg2 is global, so its pages have one frame whoever runs.
pub const KSEG2_SPACE: u32 = crate::cache::system::KERNEL_SPACE;

/// A structure and how it is wired.
#[derive(Clone, Debug)]
struct Unit {
    tlb: Engine,
    /// Page shifts held, largest first.
    shifts: Vec<u32>,
    tagged: bool,
    placement: Placement,
    /// Its replacement policy reads the reference's kind and mode ([`Policy::reads_reference`]):
    /// each access tells it them first.
    reads_reference: bool,
    /// Context tags of an entry for the default page size under the running address space,
    /// non-global and global (kept current by [`Machine::switch_to`] for the fast path).
    ctx_now: u64,
    ctx_global: u64,
    /// With `3c`: the shadow that classifies its misses ([`crate::threec`]).
    shadow: Option<Box<Shadow>>,
    /// On a machine of several CPUs, a structure of one CPU: the entries (page, context) a
    /// shootdown removed and no miss has refilled since ([`Machine::shot_miss`]). Boxed, so
    /// that the units the hot paths walk stay one word larger, not six.
    #[allow(clippy::box_collection)]
    shot: Option<Box<std::collections::HashSet<(u64, u64)>>>,
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

    /// Look `(vpn, ctx)` up for a reference of `kind` in `mode`, filling it on a miss (into
    /// the partition the mode's placement says); whether it hit.
    #[inline(always)]
    fn access(&mut self, vpn: u64, ctx: u64, kind: Kind, mode: Mode) -> bool {
        if self.reads_reference {
            self.tlb.set_reference(kind, mode);
        }
        self.tlb.access(vpn, ctx, self.part(mode))
    }

    /// Invalidate the entries of the page holding `addr` in address space `asid` (`global`:
    /// every address space's page), for each page size held, telling `entry` each (page,
    /// context) and whether it was there.
    fn invalidate_page(
        &mut self,
        addr: u64,
        asid: u32,
        global: bool,
        mut entry: impl FnMut(u64, u64, bool),
    ) {
        for i in 0..self.shifts.len() {
            let s = self.shifts[i];
            let ctx = self.ctx(asid, s, global);
            entry(addr >> s, ctx, self.tlb.invalidate(addr >> s, ctx));
            if let Some(sh) = self.shadow.as_deref_mut() {
                sh.invalidate(addr >> s, ctx);
            }
        }
    }

    /// Invalidate every entry of address space `asid` but the global ones ([`FLUSH_SPACE`]),
    /// `running` the address space its CPU runs (an untagged structure holds that one's
    /// entries alone: it is emptied at every switch); `entry` is told each entry removed.
    /// How many it removed.
    fn invalidate_space(
        &mut self,
        asid: u32,
        running: u32,
        mut entry: impl FnMut(u64, u64),
    ) -> u64 {
        let of = Self::of_space(self.tagged, asid, running);
        let n = self.tlb.flush_if(|vpn, ctx| {
            let m = of(ctx);
            if m {
                entry(vpn, ctx);
            }
            m
        });
        if let Some(sh) = self.shadow.as_deref_mut() {
            sh.flush_if(|_, ctx| of(ctx));
        }
        n as u64
    }

    /// Whether an entry's context is one of address space `asid` and not global, in a
    /// structure (`tagged` or not) whose CPU runs `running`.
    fn of_space(tagged: bool, asid: u32, running: u32) -> impl Fn(u64) -> bool {
        move |ctx| {
            ctx & GLOBAL == 0
                && if tagged {
                    ctx as u32 == asid
                } else {
                    asid == running
                }
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

    /// The context of the running address space's entries of the default page size (`global`:
    /// the global region's), as the fast paths keep it.
    #[inline(always)]
    fn running_ctx(&self, global: bool) -> u64 {
        if global {
            self.ctx_global
        } else {
            self.ctx_now
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

/// What a result of a machine of one CPU must say when the trace's CPU markers name others
/// (the highest, `other_cpu`; 0: none did). One message for every engine.
pub fn one_cpu_warning(other_cpu: u32) -> Option<String> {
    (other_cpu > 0).then(|| format!(
        "cpus: the trace's events were made by several CPUs (its CPU markers name CPU {other_cpu} and more), and this machine has one: they all ran on it; give machine.cpus to simulate each CPU's TLBs"
    ))
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
    pages: PageSizes,
    split: bool,
    /// `machine.global_above`, or u64::MAX for none (see [`Machine::is_global`]).
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
    /// then only counts ([`Tally::walks`]; never with a prefetcher or a page-table walker:
    /// [`alone_unless_walks`]).
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
    /// Per structure, Uhlig's dynamic partitioning of it (`partition.dynamic`); empty when
    /// none climbs. Kept beside the units rather than in them, so that the hot path's units
    /// stay as small as before.
    climbs: Vec<Option<Box<Climb>>>,
    /// The CPUs, on a machine of several (`machine.cpus`): the parked TLB trees of those not
    /// running, and what each counted.
    cpus: Option<Box<cpus::CpuSet>>,
    /// On a machine of one CPU: the highest CPU the trace's CPU markers named (0: none
    /// other than CPU 0), for the warning that every CPU's events ran on the one.
    other_cpu: u32,
}

/// Whether `addr` lies at or above `global_above` ([`Machine::is_global`]).
#[inline(always)]
fn global_at(addr: u64, global_above: u64) -> bool {
    addr.min(u64::MAX - 1) >= global_above
}

impl Machine {
    /// Whether `addr` lies in the global region (`machine.global_above`: kernel pages shared
    /// by every address space, entries tagged as no one's). Without one `global_above` is
    /// u64::MAX, which the byte at u64::MAX must not reach: its page starts below it, and is
    /// as global as that start (a global region is page-aligned).
    #[inline(always)]
    fn is_global(&self, addr: u64) -> bool {
        global_at(addr, self.global_above)
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
        if self.vac.is_some() && self.walker.is_some() {
            return self.run_vac_walker_batch(events);
        }
        if let Some(v) = self.vac.as_deref_mut() {
            v.run_batch(events);
        }
        if self.refill.is_some() || self.memory.is_some() || self.caches_alone() {
            self.note_cpus(events);
        }
        if self.refill.is_some() && self.memory.is_some() {
            for e in events {
                self.refill_memory_event(*e);
            }
            return;
        }
        if self.refill.is_some() && self.caches.is_some() {
            for e in events {
                self.refill_cache_event(*e);
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
        if let Some((r, lru, indexed)) = one_root(self) {
            return match (lru, indexed) {
                (true, false) => self.run_root_loop::<true, false>(events, r),
                (true, true) => self.run_root_loop::<true, true>(events, r),
                (false, false) => self.run_root_loop::<false, false>(events, r),
                (false, true) => self.run_root_loop::<false, true>(events, r),
            };
        }
        let mut feed = self.feed();
        for e in events {
            feed.event(e);
        }
    }

    /// The CPUs a batch's markers name, for a machine of one CPU whose events do not go
    /// through [`Machine::control`] (software refill, a memory system, caches alone): its
    /// result must still say that the trace was made by several (see [`Machine::warnings`]).
    fn note_cpus(&mut self, events: &[Event]) {
        for e in events {
            if let Some(cpu) = e.cpu_marked() {
                self.other_cpu = self.other_cpu.max(cpu);
            }
        }
    }

    /// [`Machine::run_batch`] of a machine with a virtually addressed cache and a page table:
    /// one physical memory, the VAC's OS's, so each event reaches the VAC before the
    /// walker can fault on its page and ask the OS for the page's frame (the frame of that
    /// moment: a later event may remap the page).
    fn run_vac_walker_batch(&mut self, events: &[Event]) {
        let mut feed = self.feed();
        for e in events {
            feed.after_vac(e);
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

    /// [`Machine::run_batch`] of a machine whose references enter one TLB, through its own
    /// loop ([`RootFeed`]).
    #[inline(never)]
    fn run_root_loop<const LRU: bool, const INDEXED: bool>(&mut self, events: &[Event], r: usize) {
        let mut feed = RootFeed::<LRU, INDEXED>::new(self, r);
        for e in events {
            feed.event(e);
        }
    }

    /// Decode up to `max` events of native trace `source` straight into the machine (each
    /// event from the decoder's registers, never through a batch in memory); returns how
    /// many. A machine of caches alone gets a loop of its own ([`CacheFeed`]), as do a
    /// machine with a memory system and no software refill ([`MemoryFeed`]: every event
    /// reaches the memory system, whose work is inlined there, in a loop of its own so that
    /// the other machines' loops stay as small) and a machine whose references enter one TLB
    /// ([`RootFeed`]); every other machine one through [`Machine::feed`]. Not for a machine
    /// fed in batches ([`Machine::fed_in_batches`]).
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
        if self.memory.is_some() && self.refill.is_none() {
            return source.decode_with(max, &mut MemoryFeed(self.feed()));
        }
        if let Some((r, lru, indexed)) = one_root(self) {
            return match (lru, indexed) {
                (true, false) => {
                    source.decode_with(max, &mut RootFeed::<true, false>::new(self, r))
                }
                (true, true) => source.decode_with(max, &mut RootFeed::<true, true>::new(self, r)),
                (false, false) => {
                    source.decode_with(max, &mut RootFeed::<false, false>::new(self, r))
                }
                (false, true) => {
                    source.decode_with(max, &mut RootFeed::<false, true>::new(self, r))
                }
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
    /// memory system's work inlined ([`MemoryFeed`]), as in the decoder's loop made for such
    /// a machine ([`Machine::decode_native`]).
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
        if self.kernel.flushes_unrecorded && !self.units.is_empty() {
            w.push(
                "the trace is a whole-system capture made before captures recorded the kernel's own TLB flushes (its metadata has no tlb_flushes): the TLBs keep translations its kernel invalidated after a fork, munmap or exec, so a TLB tagged by address space misses less than it should (on the ring workload a 1536-entry STLB missed a third less); capture it again".to_string(),
            );
        }
        w.extend(self.kernel_warnings());
        w.extend(one_cpu_warning(self.other_cpu));
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
            let alone;
            (self.uniform, self.fast, alone) = fast_paths(
                &pages,
                &self.roots,
                self.translated,
                &self.next,
                &self.default_shift,
                &slow_structures(&self.units, &self.climbs),
            );
            self.alone = alone_unless_walks(
                alone,
                self.prefetch.is_some(),
                self.walker.is_some(),
                self.cpus.is_some(),
            );
            if let (Some(m), true) = (self.memory.as_deref_mut(), pages.mixed()) {
                m.set_page_sizes(pages.clone());
            }
            self.pages = pages;
            self.kernel.classes = classes;
        }
        self.kernel.source = Some(source);
        self.kernel.flushes_unrecorded = meta.is_some_and(|m| {
            m.extra.get("capture").map(String::as_str) == Some(crate::trace::kernel::SYSTEM_CAPTURE)
                && !m.extra.contains_key("tlb_flushes")
        });
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
    /// applied: folding changes the addresses (pages above 2 GB alias those below). Or a
    /// machine that keeps the kernel's pages under an address-space id of its own, given a
    /// trace whose references run under that id.
    pub fn cannot_follow(&self, name: &str) -> Option<Error> {
        // The id the walker, the memory system and the refill model keep the kernel's shared
        // pages under is no process's own: a process running under it would have its pages
        // taken for the kernel's.
        if let Some(e) = self.cpu_beyond(name) {
            return Some(e);
        }
        let spaces_matter = self.walker.is_some() || self.memory.is_some() || self.refill.is_some();
        let kernel = crate::cache::system::KERNEL_SPACE;
        if spaces_matter && self.ledger.asids().contains(&kernel) {
            return Some(Error::trace(
                name,
                crate::error::Location::Whole,
                "asid",
                format!("references run in address space {kernel}, the id this machine keeps the kernel's shared pages under (a page table, a memory system or software refill): renumber the trace's address spaces"),
            ));
        }
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
    /// The trace is a whole-system capture made before captures recorded the kernel's own
    /// TLB flushes (its metadata has no `tlb_flushes`).
    flushes_unrecorded: bool,
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod cpu_tests;

#[cfg(test)]
mod three_c_tests;

#[cfg(test)]
mod vac_tests;
