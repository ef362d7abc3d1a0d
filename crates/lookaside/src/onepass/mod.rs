//! One-pass engines: a whole sweep of LRU structures answered by one pass over the events.
//!
//! * [`StackDistance`] — LRU stack distances: the misses of a fully associative LRU
//!   structure of every size `1..=max_distance` (default 16384).
//! * [`AllAssoc`] — all-associativity simulation: the misses of set-associative LRU
//!   structures of every set count `1, 2, 4, …, max_sets` (default 1024) and every
//!   associativity `1..=16` (176 configurations by default).
//!
//! Both give exactly the counts a [`Machine`](crate::machine::Machine) with one LRU TLB of
//! that geometry gives for the same events ([`Options`] says which machine), and both consume
//! the same event batches ([`Feeder::feed`], [`run`]). The tests compare every count with per-config
//! simulation on random, adversarial and real traces.
//!
//! # Which machine
//!
//! One TLB, LRU, entries of one page size ([`Options::page_shift`]) with no regions or global
//! pages, serving the reference kinds in [`Options::kinds`]; the engines see the page number
//! and the context tag of every translation that TLB would look up:
//! * an access whose last byte lies in another page looks up both pages when
//!   [`Options::split`] (the machine's `straddle = "split"`), only the first otherwise;
//! * the context is the address space when [`Options::tagged`] (the TLB's `asid = true`),
//!   else 0, and then a change of the running address space (a context-switch event, or a
//!   reference of another address space, whatever its kind) empties the structure, as the
//!   machine flushes an untagged TLB;
//! * `TlbFlush` with [`FLUSH_ALL`] empties it, with [`FLUSH_SPACE`] frees the entries of its
//!   address space (all of them when untagged and that space runs); `TlbFlush` of one page,
//!   `Unmap` and `Protect` invalidate that page (of the event's address space when tagged), leaving a free entry —
//!   the engines model the free entry exactly (see [`StackDistance`]);
//! * map events and markers change nothing.
//!
//! # Speed
//!
//! `cargo run --release --example onepass -- [TRACE]` measures both engines, alone and
//! together, on a synthetic stream and on TRACE; `lookaside bench` reports them too. The
//! cost of a reference depends on how far down the stack it lands: the common case (a page
//! among the 16 most recent) needs no hashing and no tree, see each engine's documentation.

mod allassoc;
mod family;
mod fenwick;
pub(crate) mod map;
mod stack;

#[cfg(test)]
mod tests;

pub use allassoc::{AllAssoc, AllAssocResult, DEFAULT_MAX_SETS, WAYS};
pub use family::{answer_path, FamilyAnswer, Geometry, Method, MAX_SETS};
pub use stack::{StackDistance, StackResult, DEFAULT_MAX_DISTANCE, FRONT};

use crate::error::{Error, Result};
use crate::event::{Event, Kind, BATCH, FLUSH_ALL, FLUSH_SPACE, REF_KINDS};
use crate::trace::TraceSource;
use serde::Serialize;

/// Bit `i` set where `slots[i] == x`.
///
/// On x86-64 with SSE2 (every x86-64 processor): four compares, two packs and a `movemask`.
/// Compilers turn the portable loop below into about three times as many instructions, and
/// this runs once per set count for most references.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn mask(slots: &[u32; 16], x: u32) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86-64 baseline; the four unaligned 16-byte loads read
    // exactly the 64 bytes of `slots`.
    unsafe {
        let p = slots.as_ptr() as *const __m128i;
        let k = _mm_set1_epi32(x as i32);
        let a = _mm_cmpeq_epi32(_mm_loadu_si128(p), k);
        let b = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(1)), k);
        let c = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(2)), k);
        let d = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(3)), k);
        let bytes = _mm_packs_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
        _mm_movemask_epi8(bytes) as u32
    }
}

/// Bit `i` set where `slots[i] == x`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn mask(slots: &[u32; 16], x: u32) -> u32 {
    let mut m = 0u32;
    for (i, &s) in slots.iter().enumerate() {
        m |= ((s == x) as u32) << i;
    }
    m
}

/// Bit `i` set where `ranks[i] == r` (one compare and a `movemask` on x86-64).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn rank_mask(ranks: &[u8; 16], r: u8) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86-64 baseline; the unaligned load reads exactly the 16
    // bytes of `ranks`.
    unsafe {
        let v = _mm_loadu_si128(ranks.as_ptr() as *const __m128i);
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(r as i8))) as u32
    }
}

/// Bit `i` set where `ranks[i] == r`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn rank_mask(ranks: &[u8; 16], r: u8) -> u32 {
    let mut m = 0u32;
    for (i, &x) in ranks.iter().enumerate() {
        m |= ((x == r) as u32) << i;
    }
    m
}

/// A one-pass engine: what it needs to know of the translations of one structure.
pub trait Engine {
    /// A lookup of page `vpn` with context tag `ctx` (never [`crate::tlb::NO_CTX`]).
    fn access(&mut self, vpn: u64, ctx: u64);
    /// The entry of `(vpn, ctx)`, if held, becomes free.
    fn invalidate(&mut self, vpn: u64, ctx: u64);
    /// Every entry becomes free.
    fn flush(&mut self);
    /// Every entry of context `ctx` becomes free (a flush of one address space: rare, so a
    /// walk over the pages the engine knows).
    fn flush_ctx(&mut self, ctx: u64);
    /// A hint that `(vpn, ctx)` will be accessed soon (the driver calls it a few references
    /// ahead); never changes results.
    #[inline(always)]
    fn prefetch(&self, _vpn: u64, _ctx: u64) {}
}

/// An engine lent to a driver (both engines over one stream, each kept by its owner).
impl<E: Engine + ?Sized> Engine for &mut E {
    #[inline(always)]
    fn access(&mut self, vpn: u64, ctx: u64) {
        (**self).access(vpn, ctx);
    }
    fn invalidate(&mut self, vpn: u64, ctx: u64) {
        (**self).invalidate(vpn, ctx);
    }
    fn flush(&mut self) {
        (**self).flush();
    }
    fn flush_ctx(&mut self, ctx: u64) {
        (**self).flush_ctx(ctx);
    }
    #[inline(always)]
    fn prefetch(&self, vpn: u64, ctx: u64) {
        (**self).prefetch(vpn, ctx);
    }
}

/// Both engines over one stream.
impl<A: Engine, B: Engine> Engine for (A, B) {
    #[inline]
    fn access(&mut self, vpn: u64, ctx: u64) {
        self.0.access(vpn, ctx);
        self.1.access(vpn, ctx);
    }
    fn invalidate(&mut self, vpn: u64, ctx: u64) {
        self.0.invalidate(vpn, ctx);
        self.1.invalidate(vpn, ctx);
    }
    fn flush(&mut self) {
        self.0.flush();
        self.1.flush();
    }
    fn flush_ctx(&mut self, ctx: u64) {
        self.0.flush_ctx(ctx);
        self.1.flush_ctx(ctx);
    }
    #[inline(always)]
    fn prefetch(&self, vpn: u64, ctx: u64) {
        self.0.prefetch(vpn, ctx);
        self.1.prefetch(vpn, ctx);
    }
}

/// The structure the engines answer for (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Options {
    /// log2 of the page size (12 for 4 KiB).
    pub page_shift: u32,
    /// Reference kinds translated, indexed by `Kind as usize` (fetch, load, store).
    pub kinds: [bool; REF_KINDS],
    /// Entries tagged by address space.
    pub tagged: bool,
    /// Straddling accesses look up both pages.
    pub split: bool,
}

impl Default for Options {
    /// 4 KiB pages, every reference kind, tagged, straddles split: the machine's defaults.
    fn default() -> Options {
        Options {
            page_shift: 12,
            kinds: [true; REF_KINDS],
            tagged: true,
            split: true,
        }
    }
}

/// How many events ahead of the one being simulated the driver prefetches.
const AHEAD: usize = 8;

impl Options {
    /// A usage error naming the field if these options describe no structure.
    pub fn check(&self) -> Result<()> {
        if !(1..64).contains(&self.page_shift) {
            return Err(Error::Usage(format!(
                "page_shift: {} is not between 1 and 63",
                self.page_shift
            )));
        }
        if !self.kinds.iter().any(|&k| k) {
            return Err(Error::Usage(
                "kinds: no reference kind is translated".into(),
            ));
        }
        Ok(())
    }
}

/// Translates events into engine calls; keeps the running address space between batches.
#[derive(Clone, Debug)]
pub struct Feeder {
    opts: Options,
    asid: u32,
    /// References seen (of every kind).
    pub references: u64,
    /// Translations past the first page of a reference (as the machine's `straddles`).
    pub straddles: u64,
    /// References whose last byte would lie past 2^64 (as the machine's `wrapped`).
    pub wrapped: u64,
    /// The highest CPU the trace's CPU markers name (0: none other than CPU 0): the TLB is
    /// one CPU's, as a machine of one CPU's is, and says so
    /// ([`crate::machine::one_cpu_warning`]).
    pub other_cpu: u32,
}

impl Feeder {
    /// A feeder for `opts`; the running address space starts as 0, as in the machine.
    ///
    /// # Panics
    /// If `opts.page_shift` is not below 64.
    pub fn new(opts: Options) -> Feeder {
        assert!(opts.page_shift < 64, "page_shift must be below 64");
        Feeder {
            opts,
            asid: 0,
            references: 0,
            straddles: 0,
            wrapped: 0,
            other_cpu: 0,
        }
    }

    #[inline(always)]
    fn ctx(&self, asid: u32) -> u64 {
        if self.opts.tagged {
            asid as u64
        } else {
            0
        }
    }

    #[inline]
    fn switch<E: Engine>(&mut self, engine: &mut E, asid: u32) {
        if asid != self.asid {
            self.asid = asid;
            if !self.opts.tagged {
                engine.flush();
            }
        }
    }

    /// Every page after the first that `e` touches, as the machine translates them (see
    /// `Machine::translate_rest`): one access each, an access past 2^64 ending at the top.
    #[inline(never)]
    fn rest<E: Engine>(&mut self, engine: &mut E, e: &Event, ctx: u64) {
        let shift = self.opts.page_shift;
        let last = e.addr.checked_add(e.size as u64 - 1).unwrap_or_else(|| {
            self.wrapped += 1;
            u64::MAX
        });
        for page in (e.addr >> shift) + 1..=last >> shift {
            self.straddles += 1;
            engine.access(page, ctx);
        }
    }

    /// Feed one batch of events, in order.
    pub fn feed<E: Engine>(&mut self, engine: &mut E, events: &[Event]) {
        let shift = self.opts.page_shift;
        for (i, e) in events.iter().enumerate() {
            if let Some(n) = events.get(i + AHEAD) {
                if n.kind.is_ref() {
                    engine.prefetch(n.addr >> shift, self.ctx(n.asid));
                }
            }
            if !e.kind.is_ref() {
                match e.kind {
                    Kind::ContextSwitch => self.switch(engine, e.asid),
                    Kind::TlbFlush if e.addr == FLUSH_ALL => engine.flush(),
                    // A space's entries (no page is global here): those of its context
                    // when tagged, else all if it runs (an untagged TLB holds no other).
                    Kind::TlbFlush if e.addr == FLUSH_SPACE => {
                        if self.opts.tagged {
                            engine.flush_ctx(self.ctx(e.asid));
                        } else if e.asid == self.asid {
                            engine.flush();
                        }
                    }
                    Kind::TlbFlush | Kind::Unmap | Kind::Protect => {
                        engine.invalidate(e.addr >> shift, self.ctx(e.asid))
                    }
                    Kind::Marker => {
                        if let Some(cpu) = e.cpu_marked() {
                            self.other_cpu = self.other_cpu.max(cpu);
                        }
                    }
                    _ => {}
                }
                continue;
            }
            self.references += 1;
            if e.asid != self.asid {
                self.switch(engine, e.asid);
            }
            if !self.opts.kinds[e.kind as usize] {
                continue;
            }
            let ctx = self.ctx(e.asid);
            let page = e.addr >> shift;
            engine.access(page, ctx);
            if self.opts.split && e.size > 1 {
                let last = e.addr.wrapping_add(e.size as u64 - 1);
                if last >> shift != page {
                    self.rest(engine, e, ctx);
                }
            }
        }
    }
}

/// Feed every event of `source` to `engine`; returns the number of events read.
pub fn run<E: Engine>(source: &mut dyn TraceSource, opts: &Options, engine: &mut E) -> Result<u64> {
    opts.check()?;
    let mut feeder = Feeder::new(opts.clone());
    let mut batch = Vec::with_capacity(BATCH);
    let mut n = 0;
    while source.next_batch(&mut batch)? {
        feeder.feed(engine, &batch);
        n += batch.len() as u64;
    }
    Ok(n)
}

/// Largest `max_distance` [`run_stack`] accepts (its histogram is `8 × max_distance` bytes).
pub const MAX_DISTANCE_LIMIT: usize = 1 << 26;

/// Stack distances of every access of `source` (distances below `max_distance` exact); a
/// usage error for `max_distance` outside `1..=MAX_DISTANCE_LIMIT`.
pub fn run_stack(
    source: &mut dyn TraceSource,
    opts: &Options,
    max_distance: usize,
) -> Result<StackResult> {
    if max_distance == 0 || max_distance > MAX_DISTANCE_LIMIT {
        return Err(Error::Usage(format!(
            "max_distance: {max_distance} is not between 1 and {MAX_DISTANCE_LIMIT}"
        )));
    }
    let mut sd = StackDistance::new(max_distance);
    run(source, opts, &mut sd)?;
    Ok(sd.result())
}

/// All-associativity misses of `source` for set counts `1..=max_sets` (powers of two) and
/// `1..=WAYS` ways; a usage error unless `max_sets` is a power of two up to 2^20.
pub fn run_all_assoc(
    source: &mut dyn TraceSource,
    opts: &Options,
    max_sets: usize,
) -> Result<AllAssocResult> {
    if !max_sets.is_power_of_two() || max_sets > 1 << 20 {
        return Err(Error::Usage(format!(
            "max_sets: {max_sets} is not a power of two between 1 and {}",
            1 << 20
        )));
    }
    let mut aa = AllAssoc::new(max_sets);
    run(source, opts, &mut aa)?;
    Ok(aa.result())
}
