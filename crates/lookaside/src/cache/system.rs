//! The memory system behind translation, and its MCPI: Chen's DECstation 5000/200 model in
//! general form.
//!
//! Per reference, after the TLBs: the physical address (the page mapping of [`crate::vm`] for
//! mapped pages; `vaddr & unmapped_mask` for unmapped ones), then the caches and the write
//! buffer, timed on a CPU clock that advances one cycle per instruction plus every stall.
//!
//! Accounting (Chen, sections 4.2–4.3):
//! * **Instructions** are instruction fetches; each costs one cycle. There is no pipeline.
//! * **Stall cycles** by mode (user/system) × component: `icache` and `dcache` (read misses,
//!   and write-allocate fills of lines wider than the write, each the level's `miss_cycles`,
//!   plus the second level's on a miss there), `wbuffer` (writes to a full write buffer, and
//!   memory reads waiting for a write already issued), `uncached` (uncached reads).
//! * **MCPI** = stall cycles / non-idle instructions; **S-MCPI** = system stall cycles /
//!   system instructions. Instructions and stalls between the idle markers are counted
//!   apart and left out.
//! * **Translation work** — TLB miss handlers' instruction fetches and PTE loads, a page-table
//!   walker's table reads — reaches the caches as kernel references through one door,
//!   [`MemorySystem::machinery`] (the machine synthesises the handlers of `[memory.handler]`,
//!   the software-refill model reports its handlers' work, the walker its table reads; see
//!   [`crate::machine`]). It is system work in every total (instructions, stall components,
//!   MCPI, S-MCPI); while it runs its instructions and stalls are also counted apart, under
//!   `utlb`, `ktlb` or `walk` ([`Activity`]).
//!
//! Write-through writes go to the write buffer (none configured: they cost nothing); a
//! write-back cache's dirty victims go there too as full writes, at their own addresses. The
//! model does not check a read against the writes waiting in the buffer.

use super::wbuf::{WriteBuffer, WriteBufferParams};
use super::{Cache, CacheParams, WritePolicy};
use crate::config::{CacheConfig, MemoryConfig, Private, Ways};
use crate::error::{Error, Result};
use crate::event::{Event, Kind, IDLE_MARKERS, NO_PADDR};
use crate::vm::PageMapper;
use serde_json::{json, Value};

/// The space the kernel's shared pages are mapped under: the kernel half of a 64-bit address
/// space ([`mapping_space`]) and, in the MIPS software-refill model, kseg2.
pub const KERNEL_SPACE: u32 = u32::MAX;

/// The space a mapped page of address space `asid` holding `addr` takes its frame under.
/// The kernel half of a 64-bit address space — the top bit set: x86-64's upper half, MIPS's
/// sign-extended kernel segments — is one set of pages every address space shares, one
/// physical copy each; every other page is its address space's own.
#[inline(always)]
pub fn mapping_space(asid: u32, addr: u64) -> u32 {
    if addr >> 63 != 0 {
        KERNEL_SPACE
    } else {
        asid
    }
}

/// Stall components, in report order.
pub const COMPONENTS: [&str; 4] = ["icache", "dcache", "wbuffer", "uncached"];
const ICACHE: usize = 0;
const DCACHE: usize = 1;
const WBUFFER: usize = 2;
const UNCACHED: usize = 3;

/// What the references being simulated belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    Program = 0,
    /// The user-TLB-miss handler.
    Utlb = 1,
    /// A kernel-TLB-miss handler.
    Ktlb = 2,
    /// A page-table walk (the walker's table references).
    Walk = 3,
}

/// Where a reference of the translation machinery lies (see [`MemorySystem::machinery`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// A mapped virtual address: its frame comes from the page mapping, under address space
    /// `space` (a kernel page shared by every address space is mapped under one space).
    Mapped { addr: u64, space: u32 },
    /// An unmapped virtual address: physically `addr & unmapped_mask`.
    Unmapped(u64),
    /// A physical address (a page-table entry the table organisation placed).
    Physical(u64),
}

/// What one reference cost (see [`MemorySystem::machinery`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// It missed the first-level cache (or was uncached).
    pub missed: bool,
    /// Stall cycles it took, of every component.
    pub stalls: u64,
}

/// Where a reference's first byte is, for the lines of the rest of it: its physical address
/// and how its other pages are found (mapped in `space`, else contiguous).
#[derive(Clone, Copy, Debug)]
struct Span {
    paddr: u64,
    mapped: bool,
    space: u32,
}

/// One cache and its miss cost.
#[derive(Clone, Debug)]
struct Level {
    name: String,
    cache: Cache,
    miss_cycles: u32,
    /// Whether a write-allocate fill needs a memory read (the line is wider than a word).
    fill_reads: bool,
    /// Line accesses beyond the first of references whose bytes span several lines: one for
    /// a reference spanning two lines (two line accesses), one per further line for longer
    /// ones.
    straddles: u64,
    /// References spanning lines of which every line missed (simulators that count a
    /// straddling reference as one access, such as cachegrind, count one miss for them).
    straddle_double_misses: u64,
    /// Dirty lines written back by the copy-back at the end (see [`MemorySystem::json`]).
    flushed: u64,
}

/// The caches one mode (or everyone) uses: indices into `levels`.
#[derive(Clone, Copy, Debug)]
struct Side {
    i: Option<usize>,
    d: Option<usize>,
    l2: Option<usize>,
}

const NO_SIDE: Side = Side {
    i: None,
    d: None,
    l2: None,
};

/// Counts for one mode.
#[derive(Clone, Copy, Debug, Default)]
struct Account {
    instructions: u64,
    stalls: [u64; 4],
}

impl Account {
    /// Count references that are `instructions` instruction fetches (or none), and their
    /// stalls.
    #[inline(always)]
    fn add(&mut self, instructions: u64, stalls: &[u64; 4]) {
        self.instructions += instructions;
        for (a, s) in self.stalls.iter_mut().zip(stalls) {
            *a += s;
        }
    }

    /// Add `now - base`.
    fn add_since(&mut self, now: &Account, base: &Account) {
        self.instructions += now.instructions - base.instructions;
        for ((a, n), b) in self.stalls.iter_mut().zip(now.stalls).zip(base.stalls) {
            *a += n - b;
        }
    }
}

/// The memory system (see the module documentation).
#[derive(Debug)]
pub struct MemorySystem {
    mapper: PageMapper,
    frames_base: u64,
    unmapped_mask: u64,
    levels: Vec<Level>,
    /// One side; two (user, kernel) when caches are private per mode; one per address space
    /// (made at its first reference from `template`) when private per address space.
    sides: Vec<Side>,
    private: Private,
    /// Private per address space: the levels of one side in their initial state, and that
    /// side's indices into them.
    template: Option<(Vec<Level>, Side)>,
    /// Private per address space: (asid, side) of each space seen, and the running one.
    space_sides: Vec<(u32, usize)>,
    cur_side: (u32, usize),
    wbuf: Option<WriteBuffer>,
    uncached: Vec<(u64, u64)>,
    uncached_cycles: u32,
    idle_markers: [u64; 2],
    idle: bool,
    /// CPU cycle.
    now: u64,
    /// `[mode]`.
    acct: [Account; 2],
    idle_acct: Account,
    /// `[activity]`: instructions and stall cycles of handler work (index 0 unused).
    handler: [Account; 4],
    /// Handler code runs `(I-cache, code, instructions)` all present in their I-cache when
    /// its [`Cache::removals`] was the number beside them ([`MemorySystem::handler_fetches`]).
    resident_code: [((usize, u64, u64), u64); 4],
    /// The next of `resident_code` to replace.
    resident_next: usize,
    handler_runs: [u64; 4],
    /// The machine has a page-table walker (the report gains `tlb_handlers.walk`).
    walker: bool,
    /// Per address space (in order of first reference), for per-context attribution; `cur`
    /// indexes the running one.
    spaces: Vec<(u32, Account)>,
    cur: usize,
    /// The non-idle accounts when the running space started.
    space_base: Account,
    activity: Activity,
    uncached_refs: u64,
    /// `machine.straddle = "first"`: a reference reaches only the line of its first byte.
    first_only: bool,
    /// A write-back first level's dirty victims go into the second level (else to memory).
    writebacks_to_l2: bool,
}

impl MemorySystem {
    /// Build from `[memory]`; `memory` is the machine's physical memory in bytes
    /// ([`MemoryConfig::memory_bytes`]), `page_shift` its base page size, `seed` its seed.
    pub fn build(
        c: &MemoryConfig,
        memory: u64,
        page_shift: u32,
        seed: u64,
        straddle: crate::config::Straddle,
        source_name: &str,
    ) -> Result<MemorySystem> {
        let err = |k: &str, m: String| Error::config(source_name, format!("memory.{k}"), m);
        let mapping = c.mapping;
        let mut levels = Vec::new();
        let level = |name: &str, cc: &CacheConfig, levels: &mut Vec<Level>| {
            let p = cache_params(cc, seed ^ levels.len() as u64)
                .map_err(|(f, m)| err(&format!("{name}.{f}"), m))?;
            let cache =
                Cache::new(&p).map_err(|e| err(&format!("{name}.{}", e.field), e.message))?;
            levels.push(Level {
                name: name.to_string(),
                cache,
                miss_cycles: cc.miss_cycles,
                fill_reads: cc.line > 4,
                straddles: 0,
                straddle_double_misses: 0,
                flushed: 0,
            });
            Ok::<usize, Error>(levels.len() - 1)
        };
        let private = c.private;
        if c.cache.is_some() && (c.icache.is_some() || c.dcache.is_some()) {
            return Err(err(
                "cache",
                "give either a unified `cache` or split `icache`/`dcache`, not both".into(),
            ));
        }
        let mut sides = Vec::new();
        for side in 0..(1 + (private == Private::Mode) as usize) {
            let prefix = |n: &str| {
                if private == Private::Mode {
                    format!("{n}[{}]", ["user", "kernel"][side])
                } else {
                    n.to_string()
                }
            };
            let (i, d) = match &c.cache {
                Some(u) => {
                    let x = level(&prefix("cache"), u, &mut levels)?;
                    (Some(x), Some(x))
                }
                None => (
                    c.icache
                        .as_ref()
                        .map(|x| level(&prefix("icache"), x, &mut levels))
                        .transpose()?,
                    c.dcache
                        .as_ref()
                        .map(|x| level(&prefix("dcache"), x, &mut levels))
                        .transpose()?,
                ),
            };
            let l2 =
                c.l2.as_ref()
                    .map(|x| level(&prefix("l2"), x, &mut levels))
                    .transpose()?;
            sides.push(Side { i, d, l2 });
        }
        // Page colours spread over the largest way of any physically indexed cache.
        let span = levels
            .iter()
            .map(|l| l.cache.way_bytes())
            .max()
            .unwrap_or(1 << page_shift);
        let mapper = PageMapper::new(mapping, page_shift, memory, span, seed)
            .map_err(|e| err(e.field, e.message))?;
        let template = (private == Private::AddressSpace)
            .then(|| (std::mem::take(&mut levels), sides.pop().unwrap_or(NO_SIDE)));
        if c.frames_base & ((span.max(1 << page_shift)) - 1) != 0 {
            return Err(err(
                "frames_base",
                format!(
                    "{:#x} is not aligned to the colour span ({span} bytes)",
                    c.frames_base
                ),
            ));
        }
        let wbuf = match &c.write_buffer {
            None => None,
            Some(w) => {
                if !w.dram_page.0.is_power_of_two() {
                    return Err(err(
                        "write_buffer.dram_page",
                        format!("{} is not a power of two", w.dram_page.0),
                    ));
                }
                let p = WriteBufferParams {
                    entries: w.entries,
                    write_cycles: w.write_cycles,
                    page_mode_cycles: w.page_mode_cycles,
                    dram_page_shift: w.dram_page.0.trailing_zeros(),
                    partial_cycles: w.partial_cycles,
                };
                Some(WriteBuffer::new(&p).map_err(|m| err("write_buffer", m))?)
            }
        };
        for (i, r) in c.uncached.iter().enumerate() {
            if r.end <= r.start {
                return Err(err(
                    &format!("uncached[{i}].end"),
                    "end must be above start".into(),
                ));
            }
        }
        Ok(MemorySystem {
            mapper,
            frames_base: c.frames_base,
            unmapped_mask: c.unmapped_mask,
            levels,
            sides,
            private,
            template,
            space_sides: Vec::new(),
            cur_side: (u32::MAX, 0),
            wbuf,
            uncached: c.uncached.iter().map(|r| (r.start, r.end)).collect(),
            uncached_cycles: c.uncached_cycles,
            idle_markers: c.idle_markers.unwrap_or(IDLE_MARKERS),
            idle: false,
            now: 0,
            acct: [Account::default(); 2],
            idle_acct: Account::default(),
            handler: [Account::default(); 4],
            resident_code: [((usize::MAX, 0, 0), 0); 4],
            resident_next: 0,
            handler_runs: [0; 4],
            walker: false,
            spaces: Vec::new(),
            cur: usize::MAX,
            space_base: Account::default(),
            activity: Activity::Program,
            uncached_refs: 0,
            first_only: straddle == crate::config::Straddle::First,
            writebacks_to_l2: c.writebacks == crate::config::WritebackTarget::NextLevel,
        })
    }

    /// A TLB miss handler starts: the references that follow are its own, until
    /// [`MemorySystem::leave`] with the activity this returns (handlers nest: a UTLB
    /// handler's PTE load can take a KTLB miss).
    pub fn enter(&mut self, a: Activity) -> Activity {
        self.handler_runs[a as usize] += 1;
        std::mem::replace(&mut self.activity, a)
    }

    /// The frame (of `2^shift` bytes, the walker's base page) the page holding `vaddr` of
    /// address space `space` has in this memory — the one the program's references to it
    /// will reach — chosen now if the page is new; `traced` as for
    /// [`PageMapper::translate`]. A machine with a memory system has one physical memory: its
    /// page-table walker maps a faulting page to this frame.
    pub fn frame_of(&mut self, space: u32, vaddr: u64, traced: u64, shift: u32) -> u64 {
        let space = mapping_space(space, vaddr);
        self.mapper.translate(space, vaddr, traced) >> shift
    }

    /// [`MemorySystem::frame_of`] for a page of no traced program (a page table's preloaded
    /// background pages, base pages whatever `[pages]` says): not counted among the pages a
    /// trace left without a physical address.
    pub fn background_frame(&mut self, space: u32, vaddr: u64, shift: u32) -> u64 {
        let (page, untraced) = (self.mapper.page_shift(), self.mapper.untraced());
        let f = self
            .mapper
            .base_frame(mapping_space(space, vaddr), vaddr >> page);
        self.mapper.set_untraced(untraced);
        ((f << page) | (vaddr & ((1 << page) - 1))) >> shift
    }

    /// The pages of more than one size this memory maps (`[pages]`), when it does: a large
    /// page then takes an aligned run of frames (memory must hold one of each size).
    pub(crate) fn set_page_sizes(&mut self, sizes: crate::vm::PageSizes) {
        self.mapper.set_page_sizes(sizes);
    }

    /// The frame (of `2^shift` bytes) a page of `space` holding `vaddr` was given, if any
    /// (a lookup).
    pub fn frame_given(&self, space: u32, vaddr: u64, shift: u32) -> Option<u64> {
        let page = self.mapper.page_shift();
        let off = vaddr & ((1 << page) - 1);
        self.mapper
            .frame_given(mapping_space(space, vaddr), vaddr >> page)
            .map(|f| ((f << page) | off) >> shift)
    }

    /// The bytes of physical memory the page mapping hands out (`memory`).
    pub fn memory_bytes(&self) -> u64 {
        self.mapper.frames() << self.mapper.page_shift()
    }

    /// The machine's page-table walker sends its table references here
    /// ([`MemorySystem::machinery`] under [`Activity::Walk`]): report them.
    pub fn set_walker(&mut self) {
        self.walker = true;
    }

    /// A reference the translation machinery makes — a miss handler's instruction fetch or
    /// PTE load, a walker's table read: kernel mode, in address space `asid` (the running one,
    /// whose account it joins), `kind` of `size` bytes at `at`. Counted as system work and
    /// under the running [`Activity`]. The one way translation work reaches the caches.
    pub fn machinery(&mut self, asid: u32, kind: Kind, at: At, size: u16) -> Cost {
        let (addr, mapped, space, physical) = match at {
            At::Mapped { addr, space } => (addr, true, space, NO_PADDR),
            At::Unmapped(addr) => (addr, false, asid, NO_PADDR),
            At::Physical(p) => (p, false, asid, p),
        };
        let e = Event {
            addr,
            paddr: NO_PADDR,
            asid,
            size,
            kind,
            mode: crate::event::Mode::Kernel,
        };
        self.access(&e, mapped, space, physical)
    }

    /// [`MemorySystem::reference`] of a reference whose mapped page belongs to address space
    /// `space` rather than to `e.asid` (a kernel page every address space shares).
    pub fn reference_in(&mut self, e: &Event, mapped: bool, space: u32) {
        self.access(e, mapped, space, NO_PADDR);
    }

    /// Whose references are being simulated.
    pub fn activity(&self) -> Activity {
        self.activity
    }

    /// The handler entered last returns to `previous`.
    pub fn leave(&mut self, previous: Activity) {
        self.activity = previous;
    }

    /// A marker event: opens or closes the idle loop.
    pub fn marker(&mut self, payload: u64) {
        let [open, close] = self.idle_markers;
        if payload == open {
            self.idle = true;
        } else if payload == close {
            self.idle = false;
        }
    }

    /// Start loading what the frame of the mapped page of reference `e` will be looked up in
    /// ([`PageMapper::prefetch`]): for a reference whose translation missed, before its miss
    /// handler runs. Changes nothing.
    #[inline]
    pub fn prefetch_frame(&self, e: &Event) {
        let space = mapping_space(e.asid, e.addr);
        self.mapper
            .prefetch(space, e.addr >> self.mapper.page_shift());
    }

    /// Simulate reference `e`; `mapped` says whether its address was translated (else it lies
    /// in an unmapped region).
    #[inline(never)]
    pub fn reference(&mut self, e: &Event, mapped: bool) {
        self.reference_inline(e, mapped);
    }

    /// [`MemorySystem::reference`], inlined into the caller: for a loop that simulates every
    /// reference of a batch through the memory system, where a call per reference (saving
    /// and restoring registers, the event passed through memory) costs a tenth of the work.
    #[inline(always)]
    pub fn reference_inline(&mut self, e: &Event, mapped: bool) {
        self.access(e, mapped, mapping_space(e.asid, e.addr), NO_PADDR);
    }

    /// Simulate reference `e`: a mapped one at the frame of its page in address space
    /// `space`, an unmapped one at `addr & unmapped_mask`; `physical` (unless [`NO_PADDR`]):
    /// at that physical address. Returns what it cost.
    #[inline(always)]
    fn access(&mut self, e: &Event, mapped: bool, space: u32, physical: u64) -> Cost {
        self.running(e.asid);
        let paddr = if physical != NO_PADDR {
            physical
        } else if mapped {
            self.frames_base + self.mapper.translate(space, e.addr, e.paddr)
        } else {
            e.addr & self.unmapped_mask
        };
        let mut hit = true;
        let mode = e.mode as usize & 1;
        let mut stalls = [0u64; 4];
        if e.kind == Kind::Fetch {
            self.now += 1;
        }
        // The uncached ranges are virtual: a physical reference is cached.
        let uncached = !self.uncached.is_empty()
            && physical == NO_PADDR
            && self
                .uncached
                .iter()
                .any(|&(s, x)| e.addr >= s && e.addr < x);
        if uncached {
            hit = false;
            self.uncached_refs += 1;
            if e.kind == Kind::Store {
                stalls[WBUFFER] += self.write_memory(paddr, e.size);
            } else {
                stalls[WBUFFER] += self.read_memory(self.uncached_cycles);
                stalls[UNCACHED] += self.uncached_cycles as u64;
            }
        } else {
            let side = self.side(e.asid, mode);
            let (l1, comp) = if e.kind == Kind::Fetch {
                (side.i, ICACHE)
            } else {
                (side.d, DCACHE)
            };
            if let Some(l1) = l1 {
                let shift = self.levels[l1].cache.line_shift();
                // An access past 2^64 ends at the top of the address space.
                let last = e.addr.saturating_add(e.size.max(1) as u64 - 1);
                // The last byte's line, when it is another one (physically: the next page's
                // frame when the reference crosses a page too), and whether lines lie between.
                let second = (!self.first_only && last >> shift != e.addr >> shift).then(|| {
                    let p2 = if mapped && (last ^ e.addr) >> self.mapper.page_shift() != 0 {
                        self.frames_base + self.mapper.translate(space, last, NO_PADDR)
                    } else {
                        paddr.wrapping_add(last - e.addr)
                    };
                    (p2, (last >> shift) - (e.addr >> shift) > 1)
                });
                let at = Span {
                    paddr,
                    mapped,
                    space,
                };
                hit = self.cached(l1, side.l2, comp, at, second, e, &mut stalls);
            } else if e.kind == Kind::Store {
                stalls[WBUFFER] += self.write_memory(paddr, e.size);
            }
        }
        let total: u64 = stalls.iter().sum();
        self.now += total;
        self.account(mode, (e.kind == Kind::Fetch) as u64, &stalls);
        Cost {
            missed: !hit,
            stalls: total,
        }
    }

    /// The caches a reference of address space `asid` in `mode` (0 user, 1 kernel) goes
    /// through.
    #[inline(always)]
    fn side(&mut self, asid: u32, mode: usize) -> Side {
        match self.private {
            Private::None => self.sides[0],
            Private::Mode => self.sides[mode],
            Private::AddressSpace => {
                let i = self.side_of_space(asid);
                self.sides[i]
            }
        }
    }

    /// `n` instruction fetches of 4 bytes from `code` on, in unmapped memory, in kernel mode
    /// in address space `asid`: a miss handler's code, run from its vector. The same as `n`
    /// [`MemorySystem::machinery`] fetches at [`At::Unmapped`], for less: each line of the
    /// I-cache is accessed once, and the fetches after the first in a line, which hit the
    /// line just read and change nothing but counts and the clock, are counted at once.
    pub fn handler_fetches(&mut self, asid: u32, code: u64, n: u64) {
        if n == 0 {
            return;
        }
        let fetch = |addr| Event {
            addr,
            paddr: NO_PADDR,
            asid,
            size: 4,
            kind: Kind::Fetch,
            mode: crate::event::Mode::Kernel,
        };
        let end = code.checked_add(n.saturating_mul(4)).filter(|&end| {
            code.is_multiple_of(4) && !self.uncached.iter().any(|&(s, x)| code < x && s < end)
        });
        // (Cached fetches: the first one takes this side, as the run does.)
        let l1 = end.and_then(|_| self.side(asid, 1).i);
        let shift = l1.map_or(0, |l| self.levels[l].cache.line_shift());
        let line_mask = (1u64 << shift) - 1;
        let by_line = shift >= 2 && self.unmapped_mask & line_mask == line_mask;
        let (Some(end), Some(l1), true) = (end, l1, by_line) else {
            for i in 0..n {
                self.access(&fetch(code.wrapping_add(4 * i)), false, asid, NO_PADDR);
            }
            return;
        };
        let key = (l1, code, n);
        let cache = &self.levels[l1].cache;
        let (removals, keeps) = (cache.removals(), cache.hits_keep_order());
        if keeps && self.resident_code.contains(&(key, removals)) {
            // Every line is where the last run of this code left it: all hits.
            self.running(asid);
            self.levels[l1]
                .cache
                .read_present((end - 4) & self.unmapped_mask, n);
            self.count_hits(n);
            return;
        }
        let mut addr = code;
        while addr < end {
            self.access(&fetch(addr), false, asid, NO_PADDR);
            let stop = (addr | line_mask).saturating_add(1).min(end);
            let more = (stop - addr) / 4 - 1;
            if more > 0 {
                let paddr = addr & self.unmapped_mask;
                if self.levels[l1].cache.read_again(paddr, more) {
                    self.count_hits(more);
                } else {
                    for a in (addr + 4..stop).step_by(4) {
                        self.access(&fetch(a), false, asid, NO_PADDR);
                    }
                }
            }
            addr = stop;
        }
        // No line left the cache while the code ran: all of it is there now.
        if keeps && self.levels[l1].cache.removals() == removals {
            let slot = self.resident_next % self.resident_code.len();
            self.resident_code[slot] = (key, removals);
            self.resident_next += 1;
        }
    }

    /// `n` kernel instruction fetches that hit the I-cache: a cycle each, no stalls.
    #[inline]
    fn count_hits(&mut self, n: u64) {
        self.now += n;
        self.account(1, n, &[0; 4]);
    }

    /// References in `mode` (0 user, 1 kernel), `instructions` of them fetches, and their
    /// stalls: into the idle account or the mode's, and the running handler's.
    #[inline(always)]
    fn account(&mut self, mode: usize, instructions: u64, stalls: &[u64; 4]) {
        let acct = if self.idle {
            &mut self.idle_acct
        } else {
            &mut self.acct[mode]
        };
        acct.add(instructions, stalls);
        if self.activity != Activity::Program {
            self.handler[self.activity as usize].add(instructions, stalls);
        }
    }

    /// Address space `asid` makes the next reference: if it is not the running one, it
    /// starts running ([`MemorySystem::switch_space`]).
    #[inline(always)]
    fn running(&mut self, asid: u32) {
        if self.spaces.get(self.cur).is_none_or(|s| s.0 != asid) {
            self.switch_space(asid);
        }
    }

    /// The side of address space `asid`, made from the template at its first reference.
    #[inline]
    fn side_of_space(&mut self, asid: u32) -> usize {
        if self.cur_side.0 == asid {
            return self.cur_side.1;
        }
        let side = match self.space_sides.iter().find(|s| s.0 == asid) {
            Some(&(_, side)) => side,
            None => {
                let Some((levels, t)) = &self.template else {
                    return 0;
                };
                let base = self.levels.len();
                self.levels.extend(levels.iter().cloned().map(|mut l| {
                    l.name = format!("{}[asid {asid}]", l.name);
                    l
                }));
                let shift = |x: Option<usize>| x.map(|i| i + base);
                self.sides.push(Side {
                    i: shift(t.i),
                    d: shift(t.d),
                    l2: shift(t.l2),
                });
                self.space_sides.push((asid, self.sides.len() - 1));
                self.sides.len() - 1
            }
        };
        self.cur_side = (asid, side);
        side
    }

    /// Address space `asid` starts running: what the running one gathered since it started
    /// (the growth of the non-idle accounts) becomes its own. Per-space counts so cost
    /// nothing per reference.
    #[inline(never)]
    fn switch_space(&mut self, asid: u32) {
        let now = self.non_idle();
        if let Some((_, a)) = self.spaces.get_mut(self.cur) {
            a.add_since(&now, &self.space_base);
        }
        self.space_base = now;
        self.cur = match self.spaces.iter().position(|s| s.0 == asid) {
            Some(i) => i,
            None => {
                self.spaces.push((asid, Account::default()));
                self.spaces.len() - 1
            }
        };
    }

    /// The user and system accounts together.
    fn non_idle(&self) -> Account {
        let mut a = self.acct[0];
        a.add_since(&self.acct[1], &Account::default());
        a
    }

    /// A reference through first-level cache `l1` (and `l2`): the line of `at.paddr`, and of
    /// `second` when the reference's last byte lies in another line (two accesses, as the
    /// hardware makes; counted in `straddles`), and of every line between when `second` says
    /// there are more (see [`MemorySystem::middle_lines`]). Stalls into `stalls`; returns whether every
    /// line hit.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn cached(
        &mut self,
        l1: usize,
        l2: Option<usize>,
        comp: usize,
        at: Span,
        second: Option<(u64, bool)>,
        e: &Event,
        stalls: &mut [u64; 4],
    ) -> bool {
        let paddr = at.paddr;
        let write = e.kind == Kind::Store;
        let hit = self.line(l1, l2, comp, paddr, write, stalls);
        let mut both = hit;
        if let Some((p2, more)) = second {
            let (mut all_hit, mut all_missed) = (hit, !hit);
            if more {
                let middle;
                (all_hit, all_missed, middle) = self.middle_lines(l1, l2, comp, at, e);
                for (s, m) in stalls.iter_mut().zip(middle) {
                    *s += m;
                }
                all_hit &= hit;
                all_missed &= !hit;
            }
            let hit2 = self.line(l1, l2, comp, p2, write, stalls);
            let lv = &mut self.levels[l1];
            lv.straddles += 1;
            lv.straddle_double_misses += (all_missed && !hit2) as u64;
            both = all_hit && hit2;
        }
        if write && self.levels[l1].cache.write_policy() == WritePolicy::Through {
            stalls[WBUFFER] += self.write_memory(paddr, e.size);
        }
        both
    }

    /// The lines strictly between the first and the last of a reference spanning more than
    /// two lines of `l1` (a block move, a 64 KiB valgrind access), in order, each counted in
    /// `straddles`; a line in another page than the first byte is at its own frame. Returns
    /// whether they all hit, whether they all missed, and their stalls (returned rather than
    /// added through a reference, so that the caller's stalls never leave its registers).
    #[cold]
    #[inline(never)]
    fn middle_lines(
        &mut self,
        l1: usize,
        l2: Option<usize>,
        comp: usize,
        at: Span,
        e: &Event,
    ) -> (bool, bool, [u64; 4]) {
        let mut stalls = [0u64; 4];
        let write = e.kind == Kind::Store;
        let shift = self.levels[l1].cache.line_shift();
        let page = self.mapper.page_shift();
        let last = e.addr.saturating_add(e.size as u64 - 1);
        let (mut all_hit, mut all_missed) = (true, true);
        for line in (e.addr >> shift) + 1..last >> shift {
            let v = line << shift;
            let p = if at.mapped && (v ^ e.addr) >> page != 0 {
                self.frames_base + self.mapper.translate(at.space, v, NO_PADDR)
            } else {
                at.paddr.wrapping_add(v - e.addr)
            };
            let hit = self.line(l1, l2, comp, p, write, &mut stalls);
            self.levels[l1].straddles += 1;
            all_hit &= hit;
            all_missed &= !hit;
        }
        (all_hit, all_missed, stalls)
    }

    /// One line access through `l1` (and `l2`); returns whether it hit. `comp` is
    /// [`ICACHE`] or [`DCACHE`], and `stalls` is indexed by constants only (the miss's
    /// component chosen by a branch), with nothing out of line writing through it: the
    /// reference's stalls then live in registers, and summing them never waits on stores to
    /// the stack that a wider load would straddle.
    #[inline(always)]
    fn line(
        &mut self,
        l1: usize,
        l2: Option<usize>,
        comp: usize,
        paddr: u64,
        write: bool,
        stalls: &mut [u64; 4],
    ) -> bool {
        let lv = &mut self.levels[l1];
        let o = lv.cache.access(paddr, write);
        let fill_reads = !write || lv.fill_reads;
        let miss_cycles = lv.miss_cycles;
        let into_l2 = l2.filter(|_| self.writebacks_to_l2);
        if into_l2.is_none() {
            for i in 0..o.writebacks as usize {
                // The dirty victim's own line goes to memory (its DRAM page decides page mode).
                let victim = self.levels[l1].cache.victim(i);
                stalls[WBUFFER] += self.write_memory(victim, 4);
            }
        }
        if o.fills > 0 && fill_reads {
            let mut cycles = miss_cycles;
            if let Some(l2) = l2 {
                let lv2 = &mut self.levels[l2];
                let o2 = lv2.cache.access(paddr, false);
                if !o2.hit {
                    cycles += lv2.miss_cycles;
                }
                // The second level holds dirty lines only when write-backs go into it.
                for j in 0..o2.writebacks as usize {
                    let victim = self.levels[l2].cache.victim(j);
                    stalls[WBUFFER] += self.write_memory(victim, 4);
                }
            }
            stalls[WBUFFER] += self.read_memory(cycles);
            debug_assert!(comp == ICACHE || comp == DCACHE);
            if comp == ICACHE {
                stalls[ICACHE] += cycles as u64;
            } else {
                stalls[DCACHE] += cycles as u64;
            }
        }
        if let (Some(l2), true) = (into_l2, o.writebacks > 0) {
            stalls[WBUFFER] += self.write_back_into(l1, l2, o.writebacks);
        }
        o.hit
    }

    /// The `n` dirty victims the last access to `l1` evicted go into `l2` as writes, after
    /// the fill (DineroIV's order). Buffered: the CPU waits only for what `l2` sends on to
    /// memory (its own dirty victims, or the writes when it is write-through). Returns the
    /// write buffer's stalls.
    #[inline(never)]
    fn write_back_into(&mut self, l1: usize, l2: usize, n: u32) -> u64 {
        let mut stalls = 0;
        for i in 0..n as usize {
            let victim = self.levels[l1].cache.victim(i);
            let lv2 = &mut self.levels[l2];
            let o2 = lv2.cache.access(victim, true);
            let through = lv2.cache.write_policy() == WritePolicy::Through;
            for j in 0..o2.writebacks as usize {
                let v2 = self.levels[l2].cache.victim(j);
                stalls += self.write_memory(v2, 4);
            }
            if through {
                stalls += self.write_memory(victim, 4);
            }
        }
        stalls
    }

    /// The levels after the copy-back at the end (DineroIV's at exit), made on a copy: each
    /// first level's dirty lines written back in address order (into the second level when
    /// write-backs go there, as writes), then the second level's. Counted in each level's
    /// `flushed`; no time passes.
    fn flushed_levels(&self) -> Vec<Level> {
        let mut levels = self.levels.clone();
        for side in &self.sides {
            let mut firsts = vec![side.d, side.i];
            firsts.dedup();
            for l1 in firsts.into_iter().flatten() {
                let mut dirty = levels[l1].cache.take_dirty();
                dirty.sort_unstable();
                levels[l1].flushed += dirty.len() as u64;
                if let Some(l2) = side.l2.filter(|_| self.writebacks_to_l2) {
                    for a in dirty {
                        levels[l2].cache.access(a, true);
                    }
                }
            }
            if let Some(l2) = side.l2 {
                let n = levels[l2].cache.take_dirty().len() as u64;
                levels[l2].flushed += n;
            }
        }
        levels
    }

    /// Stall cycles of a write to memory through the write buffer.
    #[inline]
    fn write_memory(&mut self, paddr: u64, size: u16) -> u64 {
        match &mut self.wbuf {
            Some(w) => w.write(self.now, paddr, size < 4),
            None => 0,
        }
    }

    /// Cycles a memory read of `cycles` first waits for an issued write.
    #[inline]
    fn read_memory(&mut self, cycles: u32) -> u64 {
        match &mut self.wbuf {
            Some(w) => w.read(self.now, cycles),
            None => 0,
        }
    }

    /// The `memory` section of a result.
    pub fn json(&self) -> Value {
        let mode_json = |a: &Account| {
            let stall: u64 = a.stalls.iter().sum();
            let mut comps = serde_json::Map::new();
            for (n, s) in COMPONENTS.iter().zip(a.stalls) {
                comps.insert(n.to_string(), json!(s));
            }
            json!({
                "instructions": a.instructions,
                "stall_cycles": stall,
                "stalls": comps,
                "cycles_per_instruction": ratio(stall, a.instructions),
            })
        };
        let (u, k) = (&self.acct[0], &self.acct[1]);
        let instructions = u.instructions + k.instructions;
        let mut mcpi = serde_json::Map::new();
        for (i, n) in COMPONENTS.iter().enumerate() {
            mcpi.insert(
                n.to_string(),
                json!({
                    "user": ratio(u.stalls[i], instructions),
                    "system": ratio(k.stalls[i], instructions),
                }),
            );
        }
        let total_stall: u64 = u.stalls.iter().chain(&k.stalls).sum();
        let handler = |a: Activity| {
            let h = &self.handler[a as usize];
            let stall: u64 = h.stalls.iter().sum();
            json!({
                "misses": self.handler_runs[a as usize],
                "instructions": h.instructions,
                "stall_cycles": stall,
                "mcpi": ratio(h.instructions + stall, instructions),
            })
        };
        let caches: Vec<Value> = self
            .flushed_levels()
            .iter()
            .map(|l| {
                let s = l.cache.stats();
                json!({
                    "name": l.name,
                    "reads": s.reads, "read_misses": s.read_misses,
                    "writes": s.writes, "write_misses": s.write_misses,
                    "fills": s.fills, "writebacks": s.writebacks + l.flushed,
                    "flushed": l.flushed,
                    "miss_cycles": l.miss_cycles,
                    "straddles": l.straddles,
                    "straddle_double_misses": l.straddle_double_misses,
                })
            })
            .collect();
        json!({
            "cycles": self.now,
            "instructions": instructions,
            "stall_cycles": total_stall,
            "mcpi": ratio(total_stall, instructions),
            "s_mcpi": ratio(k.stalls.iter().sum(), k.instructions),
            "by_component": mcpi,
            "user": mode_json(u),
            "system": mode_json(k),
            "idle": mode_json(&self.idle_acct),
            "by_address_space": self
                .spaces
                .iter()
                .enumerate()
                .map(|(i, (asid, a))| {
                    // The running space's account has not been settled yet.
                    let mut a = *a;
                    if i == self.cur {
                        a.add_since(&self.non_idle(), &self.space_base);
                    }
                    (asid.to_string(), mode_json(&a))
                })
                .collect::<serde_json::Map<String, Value>>(),
            "tlb_handlers": if self.walker {
                json!({ "utlb": handler(Activity::Utlb), "ktlb": handler(Activity::Ktlb),
                        "walk": handler(Activity::Walk) })
            } else {
                json!({ "utlb": handler(Activity::Utlb), "ktlb": handler(Activity::Ktlb) })
            },
            "caches": caches,
            "write_buffer": self.wbuf.as_ref().map(|w| json!({
                "writes": w.writes, "page_mode_writes": w.page_mode_writes,
            })),
            "uncached_references": self.uncached_refs,
            "mapping": {
                "policy": self.mapper.policy().name(),
                "colours": self.mapper.colours(),
                "pages": self.mapper.pages(),
                "frames_reused": self.mapper.reused(),
                "untraced_pages": self.mapper.untraced(),
            },
        })
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The cache parameters a `[memory.*]` cache table describes; errors name the field.
fn cache_params(c: &CacheConfig, seed: u64) -> std::result::Result<CacheParams, (&str, String)> {
    let policy = c.policy;
    let write = c.write;
    Ok(CacheParams {
        size: c.size.0,
        line: c.line,
        ways: match c.ways {
            Ways::Full => 0,
            Ways::N(0) => return Err(("ways", "must be at least 1 (or \"full\")".into())),
            Ways::N(n) => n,
        },
        policy,
        write,
        write_allocate: c.write_allocate,
        fetch: c.fetch.unwrap_or(c.line),
        seed,
    })
}

/// A readable table of a result's `memory` section (as made by [`MemorySystem::json`]).
pub fn table(m: &Value) -> String {
    let f = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let u = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let mut out = format!(
        "memory system: MCPI {:.3} (S-MCPI {:.3}) over {} non-idle instructions, {} cycles\n",
        f(m, "mcpi"),
        f(m, "s_mcpi"),
        u(m, "instructions"),
        u(m, "cycles")
    );
    out.push_str(&format!("{:<10} {:>9} {:>9}\n", "MCPI", "user", "system"));
    for c in COMPONENTS {
        let v = &m["by_component"][c];
        out.push_str(&format!(
            "{:<10} {:>9.4} {:>9.4}\n",
            c,
            f(v, "user"),
            f(v, "system")
        ));
    }
    for h in ["utlb", "ktlb", "walk"] {
        let v = &m["tlb_handlers"][h];
        if v.is_null() {
            continue;
        }
        out.push_str(&format!(
            "{:<10} {:>9.4}  ({} misses, {} handler instructions)\n",
            h,
            f(v, "mcpi"),
            u(v, "misses"),
            u(v, "instructions")
        ));
    }
    if let Some(cs) = m["caches"].as_array() {
        for c in cs {
            let reads = u(c, "reads");
            out.push_str(&format!(
                "{:<10} {:>12} reads {:>10} read misses ({:.3}%) {:>10} writes {:>10} write misses\n",
                c["name"].as_str().unwrap_or(""),
                reads,
                u(c, "read_misses"),
                100.0 * u(c, "read_misses") as f64 / reads.max(1) as f64,
                u(c, "writes"),
                u(c, "write_misses")
            ));
        }
    }
    out
}

impl crate::vm::PhysicalMemory for MemorySystem {
    fn frame_for(&mut self, asid: u32, addr: u64, paddr: u64, shift: u32) -> Option<u64> {
        Some(self.frame_of(asid, addr, paddr, shift))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::MachineConfig;
    use crate::event::{Event, Kind, Mode};
    use crate::machine::Machine;

    /// The test machine's D-cache: Chen's, 4-byte lines written through, 16-byte fetches.
    const DCACHE: &str =
        "size = \"1KiB\"\nline = 4\nwrite = \"through\"\nfetch = 16\nmiss_cycles = 15";

    /// The test machine; `top` goes in `[memory]`, `extra` after its tables.
    fn machine_with(top: &str, extra: &str) -> Machine {
        machine_with_dcache(top, DCACHE, extra)
    }

    /// A page of the kernel half touched from several address spaces is one physical page:
    /// one frame, one line in the caches; a user page at the same offset is each address
    /// space's own.
    #[test]
    fn the_kernel_half_is_one_set_of_pages() {
        let text = "[[tlb]]\nname = \"tlb\"\nentries = 4\n[memory]\nmapping = \"deterministic\"\n[memory.dcache]\nsize = \"64KiB\"\nline = 16\nmiss_cycles = 15\n";
        let mut m =
            Machine::build(MachineConfig::from_toml(text, "t.toml").unwrap(), "t.toml").unwrap();
        let kernel = 0xffff_c900_0000_1000u64;
        let user = 0x7f00_0000_1800u64; // another line of the cache than the kernel page's
        let mut evs = Vec::new();
        for asid in 1..=3 {
            evs.push(Event::control(Kind::ContextSwitch, 0, asid));
            for addr in [kernel, user] {
                evs.push(
                    Event::reference(Kind::Load, addr, 8)
                        .with_asid(asid)
                        .with_mode(Mode::Kernel),
                );
            }
        }
        m.run_batch(&evs);
        let j = m.memory().unwrap().json();
        assert_eq!(
            j["mapping"]["pages"],
            1 + 3,
            "one kernel page, three user pages"
        );
        // The kernel page's line missed once, the user pages' once each.
        assert_eq!(j["caches"][0]["read_misses"], 1 + 3);
        let mem = m.memory().unwrap();
        let frames: Vec<_> = (1..=3).map(|a| mem.frame_given(a, kernel, 12)).collect();
        assert!(
            frames[0].is_some() && frames.iter().all(|&f| f == frames[0]),
            "{frames:?}"
        );
    }

    /// [`machine_with`] with `dcache` as the body of `[memory.dcache]`.
    fn machine_with_dcache(top: &str, dcache: &str, extra: &str) -> Machine {
        let text = format!(
            r#"
[pages]
size = "4k"
regions = [ {{ start = "0xffffffff80000000", end = "0xffffffffc0000000", size = "unmapped" }} ]
[[tlb]]
name = "tlb"
entries = 4
ways = "full"
serves = "unified"
[memory]
mapping = "identity"
{top}
[memory.icache]
size = "1KiB"
line = 16
miss_cycles = 15
[memory.dcache]
{dcache}
{extra}
"#
        );
        Machine::build(MachineConfig::from_toml(&text, "t.toml").unwrap(), "t.toml").unwrap()
    }

    fn machine(extra: &str) -> Machine {
        machine_with("", extra)
    }

    fn ev(kind: Kind, addr: u64, mode: Mode) -> Event {
        Event {
            mode,
            ..Event::reference(kind, addr, 4)
        }
    }

    /// Hand-computed: one I-miss, one D read miss (fetching a 16-byte block), a write that
    /// allocates a 4-byte line without reading memory, hits elsewhere.
    #[test]
    fn stalls_by_mode_and_component_by_hand() {
        let mut m = machine("");
        m.run_batch(&[
            ev(Kind::Fetch, 0x1000, Mode::User),
            ev(Kind::Fetch, 0x1004, Mode::User),
            ev(Kind::Load, 0x2000, Mode::User),
            ev(Kind::Load, 0x200c, Mode::User),
            ev(Kind::Store, 0x3000, Mode::User),
            ev(Kind::Load, 0x3000, Mode::User),
            ev(Kind::Fetch, 0x1008, Mode::Kernel),
            ev(Kind::Load, 0x2010, Mode::Kernel),
        ]);
        let j = m.memory().unwrap().json();
        assert_eq!(j["instructions"], 3);
        assert_eq!(j["user"]["stalls"]["icache"], 15);
        assert_eq!(j["user"]["stalls"]["dcache"], 15);
        assert_eq!(j["system"]["stalls"]["icache"], 0);
        assert_eq!(j["system"]["stalls"]["dcache"], 15);
        assert_eq!(j["stall_cycles"], 45);
        assert_eq!(j["cycles"], 3 + 45);
        assert_eq!(j["mcpi"], 15.0);
        assert_eq!(j["s_mcpi"], 15.0);
    }

    /// A write-back D-cache's dirty victims go to the write buffer at their own addresses:
    /// two victims of one DRAM page are a page-mode pair, whatever the references that
    /// evicted them.
    #[test]
    fn write_backs_go_to_memory_at_the_victims_address() {
        let mut m = machine_with_dcache(
            "",
            "size = \"1KiB\"\nline = 16\nwrite = \"back\"\nmiss_cycles = 15",
            "[memory.write_buffer]\nentries = 4",
        );
        m.run_batch(&[
            ev(Kind::Store, 0x1_0000, Mode::User), // A: set 0, dirty
            ev(Kind::Store, 0x1_0010, Mode::User), // C: set 1, dirty, A's DRAM page
            ev(Kind::Load, 0x2_0010, Mode::User),  // evicts C: written back at C
            ev(Kind::Load, 0x3_0000, Mode::User),  // evicts A: at A, C's page: page mode
        ]);
        let j = m.memory().unwrap().json();
        assert_eq!(j["caches"][1]["writebacks"], 2);
        assert_eq!(j["write_buffer"]["writes"], 2);
        assert_eq!(j["write_buffer"]["page_mode_writes"], 1);
    }

    /// A write-back first level's dirty victims go into the second level as writes (by
    /// default, as DineroIV sends them), or past it to memory (`writebacks = "memory"`, the
    /// behaviour before); the lines left dirty at the end are copied back (counted in
    /// `writebacks` and `flushed`), into the second level too.
    #[test]
    fn write_backs_go_into_the_second_level_and_dirty_lines_are_flushed_at_the_end() {
        let run = |top: &str| {
            let mut m = machine_with_dcache(
                top,
                "size = \"1KiB\"\nline = 16\nwrite = \"back\"\nmiss_cycles = 15",
                "[memory.l2]\nsize = \"64KiB\"\nline = 16\nmiss_cycles = 50\n[memory.write_buffer]\nentries = 4",
            );
            m.run_batch(&[
                ev(Kind::Store, 0x1_0000, Mode::User), // set 0, dirty
                ev(Kind::Store, 0x1_0010, Mode::User), // set 1, dirty
                ev(Kind::Load, 0x1_0410, Mode::User),  // evicts the line of set 1
                ev(Kind::Store, 0x3_0020, Mode::User), // set 2, dirty, left at the end
            ]);
            m.memory().unwrap().json()
        };
        let into = run("");
        let (d, l2) = (&into["caches"][1], &into["caches"][2]);
        assert_eq!(
            (d["writebacks"].as_u64(), d["flushed"].as_u64()),
            (Some(3), Some(2))
        );
        // The second level read the four fills and took the three write-backs as writes
        // (two of them in the copy-back), which hit the lines it filled.
        assert_eq!(
            (l2["reads"].as_u64(), l2["writes"].as_u64()),
            (Some(4), Some(3))
        );
        assert_eq!(l2["write_misses"], 0);
        assert_eq!(l2["flushed"], 3, "its own dirty lines, copied back in turn");
        assert_eq!(
            into["write_buffer"]["writes"], 0,
            "nothing reached memory during the run"
        );
        let past = run("writebacks = \"memory\"");
        let (d, l2) = (&past["caches"][1], &past["caches"][2]);
        assert_eq!(
            (d["writebacks"].as_u64(), d["flushed"].as_u64()),
            (Some(3), Some(2))
        );
        assert_eq!(
            (l2["writes"].as_u64(), l2["flushed"].as_u64()),
            (Some(0), Some(0))
        );
        assert_eq!(
            past["write_buffer"]["writes"], 1,
            "the victim went to memory"
        );
    }

    /// With `machine.straddle = "first"` a reference reaches only the line of its first
    /// byte, as the TLBs translate only its first page.
    #[test]
    fn straddle_first_reaches_only_the_first_line() {
        let reads = |straddle: &str| {
            let text = format!(
                "[machine]\nstraddle = \"{straddle}\"\n[[tlb]]\nname = \"t\"\nentries = 4\n[memory]\nmapping = \"identity\"\n[memory.dcache]\nsize = \"1KiB\"\nline = 16\nmiss_cycles = 15\n"
            );
            let mut m =
                Machine::build(MachineConfig::from_toml(&text, "t.toml").unwrap(), "t.toml")
                    .unwrap();
            m.run_batch(&[Event::reference(Kind::Load, 0x100c, 8)]);
            m.memory().unwrap().json()["caches"][0]["reads"].as_u64()
        };
        assert_eq!((reads("split"), reads("first")), (Some(2), Some(1)));
    }

    /// A machine whose walks synthesise the MIPS handlers' work, laid out for 64-bit traces.
    fn handler_machine() -> Machine {
        machine(
            r#"[memory.handler]
code = "0xffffffff80000000"
page_table = "0xffffc00000000000"
root_table = "0xffffffff80100000"
"#,
        )
    }

    /// Every walk runs the UTLB handler: its 9 instructions and PTE load are kernel
    /// references; the PTE's own page misses the TLB once (a KTLB miss) per page-table page.
    #[test]
    fn handler_work_is_synthesised_per_walk() {
        let mut m = handler_machine();
        // Three user pages: three walks. Their PTEs share one page-table page.
        m.run_batch(&[
            ev(Kind::Load, 0x10_000, Mode::User),
            ev(Kind::Load, 0x11_000, Mode::User),
            ev(Kind::Load, 0x12_000, Mode::User),
        ]);
        let j = m.memory().unwrap().json();
        let h = &j["tlb_handlers"];
        assert_eq!(h["utlb"]["misses"], 3);
        assert_eq!(
            h["utlb"]["instructions"], 27,
            "the nested KTLB counts apart"
        );
        assert_eq!(h["ktlb"]["misses"], 1);
        assert_eq!(h["ktlb"]["instructions"], 250);
        assert_eq!(j["system"]["instructions"], 27 + 250);
        assert_eq!(j["user"]["instructions"], 0);
    }

    /// The handler is chosen by the address that missed, not the mode: the kernel touching a
    /// user buffer (copyin/copyout) takes the 9-instruction UTLB handler, as on the R3000; a
    /// kernel address takes the KTLB one.
    #[test]
    fn kernel_misses_on_user_addresses_take_the_utlb_handler() {
        let mut m = handler_machine();
        m.run_batch(&[
            ev(Kind::Load, 0x10_000, Mode::Kernel),
            ev(Kind::Store, 0x7fff_0000_0000, Mode::Kernel),
            ev(Kind::Load, 0xffff_8880_0000_0000, Mode::Kernel),
        ]);
        let h = &m.memory().unwrap().json()["tlb_handlers"];
        // Two user-space misses; their PTE loads miss twice more (two page-table pages), and
        // the kernel address once: three KTLB misses.
        assert_eq!(h["utlb"]["misses"], 2);
        assert_eq!(h["utlb"]["instructions"], 18);
        assert_eq!(h["ktlb"]["misses"], 3);
    }

    /// Instructions and stalls between the idle markers are counted apart and left out of
    /// MCPI; stalls are attributed to the address space that took them.
    #[test]
    fn idle_loop_and_address_spaces() {
        let mut m = machine_with("idle_markers = [7, 8]", "");
        let marker = |p| Event::control(Kind::Marker, p, 0);
        m.run_batch(&[
            ev(Kind::Fetch, 0x1000, Mode::User),
            marker(7),
            ev(Kind::Fetch, 0x2000, Mode::Kernel),
            ev(Kind::Fetch, 0x2004, Mode::Kernel),
            marker(8),
            ev(Kind::Fetch, 0x3000, Mode::User).with_asid(5),
        ]);
        let j = m.memory().unwrap().json();
        assert_eq!(j["instructions"], 2);
        assert_eq!(j["idle"]["instructions"], 2);
        assert_eq!(j["idle"]["stalls"]["icache"], 15);
        assert_eq!(j["mcpi"], 15.0);
        assert_eq!(j["by_address_space"]["0"]["stall_cycles"], 15);
        assert_eq!(j["by_address_space"]["5"]["instructions"], 1);
    }

    /// Caches private per address space: each space misses on its own first touch of a line
    /// another space already brought in, and shared caches hit there instead.
    #[test]
    fn private_caches_per_address_space() {
        let run = |private: &str| {
            let mut m = machine_with(&format!("private = \"{private}\""), "");
            m.run_batch(&[
                ev(Kind::Load, 0x2000, Mode::User),
                ev(Kind::Load, 0x2000, Mode::User).with_asid(1),
                ev(Kind::Load, 0x2000, Mode::User),
            ]);
            m.memory().unwrap().json()
        };
        let shared = run("none");
        let private = run("address-space");
        assert_eq!(shared["user"]["stalls"]["dcache"], 15);
        assert_eq!(private["user"]["stalls"]["dcache"], 30);
        let names: Vec<_> = private["caches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "icache[asid 0]",
                "dcache[asid 0]",
                "icache[asid 1]",
                "dcache[asid 1]"
            ]
        );
    }

    #[test]
    fn bad_memory_config_names_the_key() {
        let bad = |extra: &str, key: &str| {
            let text = format!("[[tlb]]\nname = \"t\"\nentries = 4\n[memory]\n{extra}\n");
            // Closed choices are refused as the text is read, the rest as the machine is built.
            let e = match MachineConfig::from_toml(&text, "t.toml") {
                Err(e) => e,
                Ok(c) => match Machine::build(c, "t.toml") {
                    Err(e) => e,
                    Ok(_) => panic!("{extra} was accepted"),
                },
            };
            let e = e.to_string();
            assert!(e.contains(key), "{e} should name {key}");
        };
        bad("mapping = \"nope\"", "memory.mapping");
        bad(
            "[memory.dcache]\nsize = 1001\nline = 4\nmiss_cycles = 1",
            "memory.dcache.size",
        );
        bad(
            "[memory.icache]\nsize = 1024\nline = 16\nfetch = 8\nmiss_cycles = 1",
            "memory.icache.fetch",
        );
        bad("private = \"asid\"", "memory.private");
        bad("memory = 100", "memory.memory");
    }

    /// A reference spanning many lines accesses each line once (not only its first and last),
    /// across pages too: a 100-byte load at 4-byte lines reads 26 lines (with its unaligned
    /// start), and a second time they all hit.
    #[test]
    fn a_reference_spanning_many_lines_accesses_every_line() {
        let mut m = machine("");
        let block = Event::reference(Kind::Load, 0x1ffe, 100);
        m.run_batch(&[block]);
        let j = m.memory().unwrap().json();
        let d = &j["caches"][1];
        assert_eq!(d["name"], "dcache");
        // 16-byte fetches: the 26 lines from 0x1ffc to 0x2060 come in 8 blocks.
        assert_eq!(
            (d["reads"].as_u64(), d["straddles"].as_u64()),
            (Some(26), Some(25))
        );
        assert_eq!(d["read_misses"], 8);
        assert_eq!(d["straddle_double_misses"], 0);
        m.run_batch(&[block]);
        let d = &m.memory().unwrap().json()["caches"][1];
        assert_eq!(
            (d["reads"].as_u64(), d["read_misses"].as_u64()),
            (Some(52), Some(8))
        );
        // Past the top of the address space: the lines up to it.
        let mut m = machine("");
        m.run_batch(&[Event::reference(Kind::Load, u64::MAX - 11, 40).with_mode(Mode::Kernel)]);
        let d = &m.memory().unwrap().json()["caches"][1];
        assert_eq!(d["reads"], 3);
    }

    /// One step of [`handler_fetches_are_fetches_one_by_one`]'s streams.
    #[derive(Clone, Debug)]
    enum Step {
        /// A program reference: kind 0 fetch, 1 load, 2 store; kernel mode; address space.
        Program(u8, u64, bool, u32),
        /// A handler's code: vector, instructions, address space.
        Code(u64, u64, u32),
        /// A handler starts (UTLB, KTLB) or the last one returns.
        Enter(bool),
        Leave,
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        let code = proptest::sample::select(vec![
            0x8000_0000u64,
            0x8000_0080,
            0x8000_0102,
            0x8000_0400,
            0x9fff_ff00,
        ]);
        prop_oneof![
            6 => (0u8..3, 0u64..0x800, any::<bool>(), 1u32..3)
                .prop_map(|(k, a, kernel, s)| Step::Program(k, 0x8000_0000 + a * 4, kernel, s)),
            // A few lengths, so that the same code runs again (the all-present path).
            3 => (code, proptest::sample::select(vec![0u64, 1, 3, 9, 33, 250]), 1u32..3)
                .prop_map(|(c, n, s)| Step::Code(c, n, s)),
            1 => any::<bool>().prop_map(Step::Enter),
            1 => Just(Step::Leave),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]

        /// A handler's code run at once ([`super::MemorySystem::handler_fetches`]: a line at
        /// a time, or all present) leaves every count, stall and line as its fetches made one
        /// by one do, whatever the I-cache (direct-mapped or not, any line, fetch block and
        /// policy, small enough for the code to evict itself), the sides, the uncached
        /// ranges and what the program does between.
        #[test]
        fn handler_fetches_are_fetches_one_by_one(
            ways in proptest::sample::select(vec![1u32, 2, 4]),
            policy in proptest::sample::select(vec!["lru", "fifo", "random"]),
            line in proptest::sample::select(vec![2u32, 4, 8, 16, 32]),
            fetch_lines in proptest::sample::select(vec![1u32, 2]),
            size in proptest::sample::select(vec![256u32, 1024, 4096]),
            private in proptest::sample::select(vec!["none", "mode", "address-space"]),
            l2 in proptest::prelude::any::<bool>(),
            uncached in proptest::prelude::any::<bool>(),
            steps in proptest::collection::vec(step(), 1..120),
        ) {
            use super::{Activity, At, MemorySystem};
            let text = format!(
                r#"
[[tlb]]
name = "tlb"
entries = 4
[memory]
mapping = "deterministic"
memory = "1MiB"
unmapped_mask = "0x1fffffff"
private = "{private}"
{uncached}
[memory.icache]
size = {size}
line = {line}
ways = {ways}
policy = "{policy}"
fetch = {fetch}
miss_cycles = 15
[memory.dcache]
size = "1KiB"
line = 4
write = "through"
fetch = 16
miss_cycles = 15
[memory.write_buffer]
entries = 2
write_cycles = 5
{l2}
"#,
                uncached = if uncached { "uncached = [ { start = \"0x80000100\", end = \"0x80000200\" } ]" } else { "" },
                fetch = line * fetch_lines,
                l2 = if l2 { "[memory.l2]\nsize = \"8KiB\"\nline = 32\nmiss_cycles = 40" } else { "" },
            );
            let c = MachineConfig::from_toml(&text, "t.toml").unwrap();
            let mc = c.memory.as_ref().unwrap();
            let build = || MemorySystem::build(mc, mc.memory_bytes(None), 12, 1, c.machine.straddle, "t.toml").unwrap();
            let (mut fast, mut slow) = (build(), build());
            let (mut fast_prev, mut slow_prev) = (Vec::new(), Vec::new());
            for s in &steps {
                match *s {
                    Step::Program(k, addr, kernel, space) => {
                        let kind = [Kind::Fetch, Kind::Load, Kind::Store][k as usize];
                        let e = Event {
                            asid: space,
                            mode: if kernel { Mode::Kernel } else { Mode::User },
                            ..Event::reference(kind, addr, 4)
                        };
                        fast.reference(&e, false);
                        slow.reference(&e, false);
                    }
                    Step::Code(code, n, space) => {
                        fast.handler_fetches(space, code, n);
                        for i in 0..n {
                            slow.machinery(space, Kind::Fetch, At::Unmapped(code + 4 * i), 4);
                        }
                    }
                    Step::Enter(utlb) => {
                        let a = if utlb { Activity::Utlb } else { Activity::Ktlb };
                        fast_prev.push(fast.enter(a));
                        slow_prev.push(slow.enter(a));
                    }
                    Step::Leave => {
                        if let (Some(f), Some(s)) = (fast_prev.pop(), slow_prev.pop()) {
                            fast.leave(f);
                            slow.leave(s);
                        }
                    }
                }
                proptest::prop_assert_eq!(fast.json(), slow.json(), "after {:?}", s);
            }
            for (f, s) in fast.levels.iter().zip(&slow.levels) {
                proptest::prop_assert_eq!(f.cache.blocks(), s.cache.blocks());
            }
        }
    }
}
