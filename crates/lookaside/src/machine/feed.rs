//! The per-event loop of a machine ([`Feed`]): the fast path of a reference of the running
//! address space (its first-level structure's last page, counted in a [`Tally`] of locals),
//! and the dispatch of every other event to the machine's full path.

use super::*;

/// No page: `addr >> shift` with `shift >= 1` never reaches it, nor does an [`entry_key`].
pub(super) const NO_PAGE: u64 = u64::MAX;

/// The key of the entry for the page of `addr` at `shift` (at least 1), unique among all
/// pages of all sizes: the page's first address with its low `shift - 1` bits set (the lowest
/// clear bit says the size).
#[inline(always)]
pub(super) fn entry_key(addr: u64, shift: u32) -> u64 {
    ((addr >> shift) << shift) | ((1u64 << (shift - 1)) - 1)
}

/// The fast path of a page map with regions, per reference kind: the addresses mapped by the
/// first-level entry the last reference of the kind went to (`len` of them from `lo`, all of
/// one backing page size), the structure and the entry's [`entry_key`]. A reference within
/// them, while `last_page[root][kind]` is still `key`, repeats that access: a hit that
/// changes nothing (see [`Feed`]). Forgetting the last pages forgets these too.
#[derive(Clone, Copy, Debug)]
pub(super) struct Memo {
    pub(super) lo: u64,
    pub(super) len: u64,
    pub(super) root: usize,
    pub(super) key: u64,
}

/// A memo no address matches.
pub(super) const NO_MEMO: Memo = Memo {
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
    /// The `[[cache]]` hierarchy is physically addressed at the page-table walker's frames
    /// ([`Machine::physical_cache_reference`]).
    physical: bool,
    /// None of the four above: a reference in the running address space needs nothing but
    /// translation (one flag to test per event instead of four); a page-table walker gets the
    /// reference's physical address before a first-level miss ([`Machine::walk_paddr`]).
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
pub(super) const NOT_PLAIN: u64 = u64::MAX;

impl EventSink for Feed<'_> {
    /// Simulate the next event of the stream.
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        self.simulate::<false>(e);
    }
}

/// A [`Feed`] for a machine with a memory system, whose loop gets the memory system's
/// per-reference work inlined (see [`Machine::run_memory_batch`]).
pub(super) struct MemoryFeed<'m>(pub(super) Feed<'m>);

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
    pub(super) fn simulate<const INLINE_MEMORY: bool>(&mut self, e: &Event) {
        if e.kind.is_ref() && e.asid as u64 == self.plain_asid {
            let cell = Tally::cell(e.mode, e.kind);
            self.tally.refs[cell] += 1;
            match self.step(e, cell) {
                Step::Done => {}
                Step::Root(r, page) => {
                    self.translate_root(r, page, e.addr, e.paddr, e.kind, e.mode)
                }
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
    pub(super) fn cache_reference(&mut self, addr: u64, size: u16, kind: Kind, mode: Mode) {
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
    pub(super) fn step(&mut self, e: &Event, cell: usize) -> Step {
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
    /// (physically `paddr`, for a walker; already counted as a reference); the next levels
    /// on a miss.
    #[inline(never)]
    pub(super) fn translate_root(
        &mut self,
        r: usize,
        page: u64,
        addr: u64,
        paddr: u64,
        kind: Kind,
        mode: Mode,
    ) {
        let m = &mut *self.m;
        let global = m.is_global(addr);
        let u = &mut m.units[r];
        let ctx = u.running_ctx(global);
        debug_assert!(!u.reads_reference, "no fast path tells the reference");
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
            m.walk_paddr = paddr;
            m.root_missed(addr, kind, mode, r);
        }
    }

    /// Translate a plain reference (of the running address space) in full, as
    /// [`Feed::step`] says, already counted as a reference.
    #[inline(never)]
    pub(super) fn translate_plain(
        &mut self,
        addr: u64,
        paddr: u64,
        size: u16,
        kind: Kind,
        mode: Mode,
    ) {
        let e = Event {
            addr,
            paddr,
            asid: self.m.cur_asid,
            size,
            kind,
            mode,
        };
        self.m.walk_paddr = paddr;
        let _ = self.translate::<false>(&e, Tally::cell(mode, kind));
    }

    /// [`Feed::simulate_full`] out of line, for events that are not plain references.
    #[inline(never)]
    pub(super) fn simulate_cold(
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
    pub(super) fn cache_asid(&self) -> u64 {
        if self.caches_only {
            self.m.cur_asid as u64
        } else {
            NOT_PLAIN
        }
    }

    /// What [`Feed::plain_asid`] should be now.
    pub(super) fn plain_asid(&self) -> u64 {
        if self.plain {
            self.m.cur_asid as u64
        } else {
            NOT_PLAIN
        }
    }

    /// Simulate an event that is not a plain reference of the running address space (or
    /// any event, on a machine with a memory system).
    #[inline(always)]
    pub(super) fn simulate_full<const INLINE_MEMORY: bool>(&mut self, e: &Event) {
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
                if let Some(mem) = m.memory.as_deref() {
                    mem.prefetch_frame(e);
                }
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
        } else if self.cached {
            if self.physical {
                return self.physical_reference(e, cell);
            }
            let _ = self.translate::<false>(e, cell);
            let m = &mut *self.m;
            if let Some(h) = m.caches.as_deref_mut() {
                h.reference(e, &mut m.ledger);
            }
        } else {
            let _ = self.translate::<false>(e, cell);
            // The walker's data cache sees the program's loads and stores.
            if self.data
                && e.kind != Kind::Fetch
                && !matches!(self.m.fast[e.kind as usize], Fast::Untranslated)
            {
                self.m.walker_data_ref(e);
            }
        }
    }
}

impl Feed<'_> {
    /// Event `e`, after the machine's virtually addressed cache has taken it
    /// ([`Machine::run_vac_walker_batch`]).
    pub(super) fn after_vac(&mut self, e: &Event) {
        if let Some(v) = self.m.vac.as_deref_mut() {
            v.run_batch(std::slice::from_ref(e));
        }
        self.event(e);
    }
}

impl Feed<'_> {
    /// Reference `e` (counted in `cell`) on a machine whose caches are physically
    /// addressed: translated, then to the caches at its frames. Out of line, so that the
    /// other machines' path keeps one copy of [`Feed::translate`].
    #[inline(never)]
    fn physical_reference(&mut self, e: &Event, cell: usize) {
        let (mapped, _) = self.translate::<true>(e, cell);
        self.m.physical_cache_reference(e, mapped);
    }

    /// Translate reference `e` (counted in `cell`), through the fast path when it applies;
    /// returns whether its address is mapped and whether a translation walked. `MAPPED`:
    /// whether the caller needs the first answer for untranslated kinds (computing it costs a
    /// page-map lookup the TLB-only path does without).
    #[inline(always)]
    pub(super) fn translate<const MAPPED: bool>(&mut self, e: &Event, cell: usize) -> (bool, bool) {
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
                    let global = m.is_global(e.addr);
                    let u = &mut m.units[r];
                    let ctx = u.running_ctx(global);
                    debug_assert!(!u.reads_reference, "no fast path tells the reference");
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
pub(super) enum Step {
    Done,
    /// A probe of first-level structure `.0` for page `.1`.
    Root(usize, u64),
    Full,
}

/// [`Machine::alone`] of a machine whose walks need more than a count: with a prefetcher,
/// which remembers every walk in `translate_from`, a page-table walker, which makes it, or
/// several CPUs, whose misses are looked at for the shootdowns that caused them
/// ([`Machine::root_missed`]), no root stands alone.
pub(super) fn alone_unless_walks(
    alone: [bool; 3],
    prefetch: bool,
    walker: bool,
    several_cpus: bool,
) -> [bool; 3] {
    if prefetch || walker || several_cpus {
        [false; 3]
    } else {
        alone
    }
}

/// Whether the page map is uniform, and per reference kind what the fast path does and
/// whether its root stands alone (see [`Machine::uniform`], [`Machine::fast`] and
/// [`Machine::alone`]): all derived from the page map and the wiring, and from the
/// structures that take no fast path (`slow`, see [`slow_structures`]).
pub(super) fn fast_paths(
    pages: &PageSizes,
    roots: &Route,
    translated: [bool; 3],
    next: &[Route],
    default_shift: &[u32],
    slow: &[bool],
) -> (bool, [Fast; 3], [bool; 3]) {
    // Uniform apart from unmapped holes: the fast path checks the holes first.
    let uniform = (pages.regions.is_empty() || pages.has_holes) && pages.default.is_some();
    let fast = Kind::REFS.map(|kind| match pages.default.and_then(|d| roots.at(kind, d)) {
        _ if !translated[kind as usize] => Fast::Untranslated,
        Some(r) if uniform && !slow[r] => Fast::Root(r, default_shift[r]),
        _ => Fast::Slow,
    });
    let alone = Kind::REFS.map(|kind| match (fast[kind as usize], pages.default) {
        (Fast::Root(r, _), Some(d)) => next[r].at(kind, d).is_none(),
        _ => false,
    });
    (uniform, fast, alone)
}

/// Per structure, whether it takes no fast path: it climbs (its every access is counted), or
/// its policy reads the reference's kind and mode (which the full path tells it, see
/// [`Unit::access`]; the fast path's inline probe tells nothing, so that the others pay
/// nothing for it).
pub(super) fn slow_structures(units: &[Unit], climbs: &[Option<Box<Climb>>]) -> Vec<bool> {
    (0..units.len())
        .map(|i| climb::climbs(climbs, i) || units[i].reads_reference)
        .collect()
}

/// What the fast path of [`EventSink::event`] does with a reference of one kind.
#[derive(Clone, Copy, Debug)]
pub(super) enum Fast {
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
pub(super) struct Tally {
    pub(super) refs: [u64; 8],
    pub(super) hits: [u64; 8],
    /// Misses of a first-level structure with nothing below it ([`Machine::alone`]): each
    /// one access and miss of that structure and of the walk.
    pub(super) walks: [u64; 8],
}

impl Tally {
    /// The cell of `(mode, kind)`; masked so that indexing needs no bounds check.
    #[inline(always)]
    pub(super) fn cell(mode: Mode, kind: Kind) -> usize {
        (mode as usize * 3 + kind as usize) & 7
    }
}

impl Machine {
    /// A handle that simulates events handed to it one at a time ([`EventSink::event`]), with the
    /// same results as [`Machine::run_batch`] over the same events; for decoders that can
    /// hand each event over while it is still in registers. Counts reach the ledger when the
    /// handle is dropped.
    pub fn feed(&mut self) -> Feed<'_> {
        let refilled = self.refill.is_some();
        let memory = self.memory.is_some();
        let data = self.walker.as_ref().is_some_and(|w| w.sees_data());
        let cached = self.caches.is_some();
        let physical = cached && self.walker.is_some();
        let plain = !(refilled || memory || cached || data);
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
            physical,
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
}
