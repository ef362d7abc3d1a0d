//! Refill from a page table, by hardware or software, priced in cycles (Huck & Hays 1993).
//!
//! A [`Walker`] owns a [`PageTable`], the OS model's physical memory ([`Frames`]) and the
//! data cache its references go through ([`Cache`]). Every miss of the last-level TLB is one
//! walk: the table is searched (a miss that finds nothing is a page fault: the page gets the
//! next frame and is mapped, and the walk is repeated — only the repeated walk is counted,
//! as the paper's traces exclude page faults), each table word read goes through the data
//! cache, and the walk is priced as
//!
//! * **basic** cycles — the handler's instructions, by organisation and by who refills
//!   ([`WalkCosts`], preset `huck93`: hardware HPT 9, +2 for a serially compared second way,
//!   software HPT 27, +9 per chain element, software FMPT 28, +8 to refill the HPT cache,
//!   IPT = software HPT + 6), and
//! * **cache-penalty** cycles — `cache_miss` (30) per table reference that misses the data
//!   cache (256 KiB direct-mapped by default). The IPT's HAT line is one such reference.
//!
//! Formulas (k = chain elements examined beyond the head bucket, s = second way compared):
//!
//! | organisation | hardware | software |
//! |---|---|---|
//! | hashed | `hw_hpt + s·second_way` on a head hit, `+ overflow + k·chain` after a head miss | `sw_hpt + s·second_way + k·chain` |
//! | inverted | — | `sw_hpt + ipt_extra + k·chain` |
//! | radix (n entries read) | `hw_fmpt + (n−2)⁺·hw_fmpt_level` | `sw_fmpt + (n−2)⁺·sw_fmpt_level` |
//! | hybrid | `hw_hpt (+s)`; miss: `+` the software cost behind it (radix: `sw_fmpt (+levels)`) `+ hpt_refill` | the same with `sw_hpt` |
//! | swtlb | as the hybrid | `swtlb`; miss: `+` the software cost behind it `+ hpt_refill` |
//!
//! On a machine with a memory system (`[memory]`), the table references are loads (and the
//! front tables' refills stores) through its data cache instead, at the physical addresses
//! the organisation gives them, in kernel mode and counted as walk work
//! ([`MemorySystem::machinery`]); their cache-penalty cycles are the stall cycles the memory
//! system charges them, and the private cache is not used. The memory system is then the
//! machine's one physical memory: a faulting page is mapped to the frame its page mapping
//! gives the page ([`MemorySystem::frame_of`]), where the caches see its data, and the
//! [`Frames`] only keep which pages map each frame (nothing is reclaimed).
//!
//! How hardware and software add up after a native HPT's head-bucket miss is not stated by
//! the paper; `overflow` (default: the software HPT's 27) is that parameter.
//!
//! Space ids: with `addresses = "per-process"` a page is (address space, page number), the
//! space id being the address-space number scrambled as HP-UX allocates space ids
//! (pseudo-randomly, `space_ids = "random"`) or the number itself. With `"global"` the upper
//! 32 address bits are the space id and the lower 32 the offset (PA-RISC's global virtual
//! addresses): sharers of a segment use one address, so one TLB entry and one table entry
//! serve them all (make the TLB entries global too: `machine.global_above = 0`).
//!
//! Frames: a reference carrying a physical address names the physical page it reaches, and
//! every page naming the same one is mapped to one frame. Per-process aliases of a shared
//! page (`workload:multiuser,addresses=per-process`, `workload:rewrite,…,to=per-process`,
//! which carry the page's global address there) therefore each have a translation of their
//! own — a TLB entry and a table entry per alias, the cost of the ASM — and share one copy of
//! the data, as with global addresses. An inverted table describes a frame by one virtual
//! address: mapping a second alias takes the frame's entry from the first.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::cache::hier::Hierarchy;
use crate::cache::system::{mapping_space, Activity, At, MemorySystem, KERNEL_SPACE};
use crate::cache::{Cache, CacheParams, WritePolicy};
use crate::config::{Compare, Organisation, PageTableConfig, SpaceIds};
use crate::error::{Error, Result};
use crate::event::{Kind, NO_PADDR};
use crate::ledger::Ledger;
use crate::onepass::map::PageMap;
use crate::pagetable::{
    scramble_space, Frames, Front, FrontKind, FrontParams, Hashed, HashedParams, InsertError,
    Inverted, InvertedParams, PageTable, Radix, RadixParams, Refs, TableRef, Usage, Walk,
    PAGE_SHIFT, TABLE_BASE,
};
use crate::vm::PhysicalMemory;

/// Cycle costs of the refill handlers (see the module documentation for how they combine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkCosts {
    pub hw_hpt: u32,
    pub second_way: u32,
    pub sw_hpt: u32,
    pub chain: u32,
    pub sw_fmpt: u32,
    pub hpt_refill: u32,
    pub ipt_extra: u32,
    pub overflow: u32,
    pub hw_fmpt: u32,
    pub hw_fmpt_level: u32,
    pub sw_fmpt_level: u32,
    pub swtlb: u32,
    pub cache_miss: u32,
}

/// Names of the cost fields, in order.
pub const COST_NAMES: [&str; 13] = [
    "hw_hpt",
    "second_way",
    "sw_hpt",
    "chain",
    "sw_fmpt",
    "hpt_refill",
    "ipt_extra",
    "overflow",
    "hw_fmpt",
    "hw_fmpt_level",
    "sw_fmpt_level",
    "swtlb",
    "cache_miss",
];

impl WalkCosts {
    /// Shipped cost tables: (name, TOML text).
    pub const PRESETS: &'static [(&'static str, &'static str)] =
        &[("huck93", include_str!("../../data/walk-costs/huck93.toml"))];

    fn field(&mut self, name: &str) -> Option<&mut u32> {
        Some(match name {
            "hw_hpt" => &mut self.hw_hpt,
            "second_way" => &mut self.second_way,
            "sw_hpt" => &mut self.sw_hpt,
            "chain" => &mut self.chain,
            "sw_fmpt" => &mut self.sw_fmpt,
            "hpt_refill" => &mut self.hpt_refill,
            "ipt_extra" => &mut self.ipt_extra,
            "overflow" => &mut self.overflow,
            "hw_fmpt" => &mut self.hw_fmpt,
            "hw_fmpt_level" => &mut self.hw_fmpt_level,
            "sw_fmpt_level" => &mut self.sw_fmpt_level,
            "swtlb" => &mut self.swtlb,
            "cache_miss" => &mut self.cache_miss,
            _ => return None,
        })
    }

    /// Set one cost by name; the error lists the names.
    pub fn set(&mut self, name: &str, cycles: u32) -> std::result::Result<(), String> {
        *self
            .field(name)
            .ok_or_else(|| format!("'{name}' is not a walk cost ({})", COST_NAMES.join(", ")))? =
            cycles;
        Ok(())
    }

    /// The cost by name.
    pub fn get(&self, name: &str) -> Option<u32> {
        let mut c = *self;
        c.field(name).map(|v| *v)
    }

    /// A shipped table by name.
    pub fn preset(name: &str) -> std::result::Result<WalkCosts, String> {
        #[derive(Deserialize)]
        struct File {
            cycles: HashMap<String, u32>,
        }
        let (_, text) = Self::PRESETS.iter().find(|p| p.0 == name).ok_or_else(|| {
            let names: Vec<&str> = Self::PRESETS.iter().map(|p| p.0).collect();
            format!("no walk-cost table '{name}' (have: {})", names.join(", "))
        })?;
        let f: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut c = WalkCosts {
            hw_hpt: 0,
            second_way: 0,
            sw_hpt: 0,
            chain: 0,
            sw_fmpt: 0,
            hpt_refill: 0,
            ipt_extra: 0,
            overflow: 0,
            hw_fmpt: 0,
            hw_fmpt_level: 0,
            sw_fmpt_level: 0,
            swtlb: 0,
            cache_miss: 0,
        };
        for n in COST_NAMES {
            let v = f
                .cycles
                .get(n)
                .ok_or_else(|| format!("walk-cost table '{name}' lacks {n}"))?;
            c.set(n, *v)?;
        }
        Ok(c)
    }
}

pub use crate::config::{Addresses, RefillBy};

/// Longest chain length counted on its own in the histogram (longer ones share the last bin).
pub const CHAIN_BINS: usize = 16;

/// What the walker counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    pub walks: u64,
    /// Walks that found no translation, so the page was mapped (then walked again).
    pub faults: u64,
    /// Faults whose physical page was in a frame already (an alias of a shared page): the
    /// page was mapped to that frame. (The other faults took a frame of their own.)
    pub shared_faults: u64,
    /// Pages the table cannot map (page number beyond its levels, page size it cannot hold).
    pub unmappable: u64,
    pub basic_cycles: u64,
    pub penalty_cycles: u64,
    /// `chain_hist[n]`: walks that examined n entries (levels for radix); the last bin is
    /// `CHAIN_BINS` or more.
    pub chain_hist: [u64; CHAIN_BINS + 1],
    pub chain_sum: u64,
    /// Walks resolved by the head bucket (hashed), first entry (inverted), front table.
    pub head_hits: u64,
    /// Walks that compared a second way.
    pub second_way: u64,
    /// Radix levels skipped thanks to paging-structure caches.
    pub psc_skipped: u64,
    /// Per table level: references and data-cache misses.
    pub level_refs: Vec<u64>,
    pub level_misses: Vec<u64>,
    /// The program's own loads and stores sent through the data cache (`data_refs`).
    pub data_refs: u64,
    pub data_misses: u64,
}

/// What each CPU of a machine of several has of its own of a walker: its data cache and the
/// radix table's paging-structure caches. The page table, the OS's frames and the costs are
/// the machine's, one for every CPU (the table lives in memory every CPU walks). The
/// running CPU's parts are the walker's own; a CPU switch swaps them
/// ([`Walker::swap_cpu_parts`]), as the machine does its TLBs.
#[derive(Clone, Debug)]
pub struct CpuParts {
    cache: Option<Cache>,
    psc: Vec<Option<crate::tlb::Tlb>>,
}

/// A page table, the OS's frames, a data cache and a cost model (see the module docs).
#[derive(Debug)]
pub struct Walker {
    table: PageTable,
    frames: Frames,
    cache: Option<Cache>,
    costs: WalkCosts,
    refill: RefillBy,
    serial: bool,
    addresses: Addresses,
    random_ids: bool,
    /// The organisation behind a software TLB (for its cost).
    behind: &'static str,
    refs: Refs,
    /// Pages losing their frame on a fault (reused from fault to fault).
    evicted: Vec<(u32, u64)>,
    stats: WalkStats,
    names: Vec<String>,
    data_refs: bool,
    /// With `data_refs` or physically addressed caches ([`Walker::serve_caches`]): the
    /// frame of every resident page.
    resident: Option<Resident>,
    /// The table's base page (as a shift): the unit of page numbers and frames.
    base: u32,
    /// The page shifts above the base the table holds (none: every page is a base page).
    large: Vec<u32>,
    /// The machine's largest page (as a shift): the slot of the pool of large pages, when
    /// the walker gives physical addresses ([`LargePool`]).
    largest: u32,
    config: PageTableConfig,
    /// Where the table references go: the private cache, the machine's memory system (see
    /// [`Walker::miss`]) or its `[[cache]]` hierarchy (see [`Walker::miss_through`]).
    through: Through,
}

/// Where a walker's table references go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Through {
    Private,
    Memory,
    Caches,
}

/// Entries of [`Resident`]'s cache of recent pages (a power of two).
const RECENT: usize = 16;

/// No frame: a page that was resident and lost its frame ([`PageMap`] never deletes).
const GONE: u32 = u32::MAX;

/// The key of a page of `2^shift` bytes holding base page `vpn` (of `2^base` bytes) in
/// [`Resident`]: its own number for a base page; a large page's number, tagged with its size
/// above every page number (only radix tables, of 4 KiB base pages, hold large pages: a
/// 64-bit address has 52 bits of page number), so every base part of a large page finds it.
#[inline(always)]
fn page_key(vpn: u64, shift: u32, base: u32) -> u64 {
    if shift == base {
        vpn
    } else {
        (vpn >> (shift - base)) | ((shift as u64) << 56)
    }
}

/// The first base page (of `2^base` bytes) of the page of `2^shift` bytes holding base page
/// `vpn`: what a large page is known by in the frames and the resident map.
#[inline(always)]
fn first_part(vpn: u64, shift: u32, base: u32) -> u64 {
    vpn & !((1u64 << (shift - base)) - 1)
}

/// Where large pages' data lies in physical memory: the OS's huge-page pool, apart from the
/// base pages' frames, from 2^60 (above every 4 KiB frame, 2^28 of them, and every table,
/// from [`TABLE_BASE`], 2^40). Each frame of the table's memory has a slot there of the
/// machine's largest page, so large pages of two sizes never overlap (at `frame << shift` a
/// 2 MiB page in frame 512 would be the 1 GiB page in frame 1) and each is aligned to its
/// size. (The table's memory counts a large page as one frame, as it always has.) The slot is
/// chosen once, when the machine is built: a memory with more frames than the pool has slots
/// below 2^64 is refused ([`LargePool::new`]), so no address ever wraps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LargePool {
    /// The pool's first byte.
    start: u64,
    /// Each frame's slot (as a shift).
    slot: u32,
}

/// Where the pool of large pages starts ([`LargePool`]), unless its slots are larger.
const LARGE_POOL: u64 = 1 << 60;

/// The smallest slot of the pool of large pages (as a shift): 32 GiB, the one slot it had
/// while pages were at most that large, so that those machines' addresses stay what they were.
const SMALLEST_SLOT: u32 = 35;

impl LargePool {
    /// The pool of a machine whose largest page is `2^largest` bytes (a shift below 64) and
    /// whose table's memory has `frames` frames of `2^base` bytes; the error says why they do
    /// not fit (a slot is aligned to its size, so slots above 2^60 start at their own size).
    fn new(largest: u32, (frames, base): (u64, u32)) -> std::result::Result<LargePool, String> {
        let slot = largest.max(SMALLEST_SLOT);
        let start = LARGE_POOL.max(1 << slot);
        // (2^64 - start) >> slot, without 2^64.
        let slots = ((u64::MAX - start) >> slot) + 1;
        if frames > slots {
            let size = |s: u32| crate::config::PageSize::Size(1 << s).label();
            return Err(format!(
                "{frames} frames of {}: with pages of {}, a physically addressed machine has room for {slots} (a large page's data lies in its frame's slot of the largest page's size, in a pool from {start:#x} up to 2^64); make memory at most {} bytes, or the largest page smaller",
                size(base),
                size(largest),
                slots.saturating_mul(1 << base)
            ));
        }
        Ok(LargePool { start, slot })
    }

    /// The first byte of the data of a large page in `frame` (below the pool's slots: see
    /// [`LargePool::new`]).
    #[inline(always)]
    fn slot(self, frame: u64) -> u64 {
        debug_assert!(frame <= (u64::MAX - self.start) >> self.slot);
        self.start + (frame << self.slot)
    }
}

/// The frame (of `2^base` bytes) `memory` gives the page of `2^shift` bytes holding `addr`
/// (of `asid`, at physical address `paddr` if the trace says): its first base page's — a
/// large page's parts lie in consecutive frames from there.
#[inline(always)]
fn page_frame<P: PhysicalMemory>(
    memory: &mut P,
    (asid, addr, paddr): (u32, u64, u64),
    shift: u32,
    base: u32,
) -> Option<u64> {
    if shift == base {
        return memory.frame_for(asid, addr, paddr, base);
    }
    let start = addr & !((1u64 << shift) - 1);
    let paddr = match paddr {
        NO_PADDR => NO_PADDR,
        p => p.wrapping_sub(addr - start),
    };
    memory.frame_for(asid, start, paddr, base)
}

/// The physical address of `addr` (base page `vpn` of `space`, of `2^base` bytes, in a page
/// of `2^shift` bytes) if its page is resident: in its frame for a base page (the short
/// path), in its frame's slot of the pool of large pages for a large page ([`LargePool`]).
#[inline(always)]
fn resident_address(
    r: &mut Resident,
    (space, vpn, addr): (u32, u64, u64),
    shift: u32,
    base: u32,
) -> Option<u64> {
    if shift == base {
        r.get(space, vpn)
            .map(|f| (f << base) | (addr & ((1 << base) - 1)))
    } else {
        r.get(space, page_key(vpn, shift, base))
            .map(|f| r.pool.slot(f) | (addr & ((1 << shift) - 1)))
    }
}

/// Forget resident page `(space, vpn)` (a base page of `2^base` bytes, or a large page by its
/// first base page) whatever its size: every size the table holds.
fn forget(r: &mut Resident, (large, base): (&[u32], u32), space: u32, vpn: u64) {
    r.remove(space, vpn);
    for &s in large {
        r.remove(space, page_key(vpn, s, base));
    }
}

/// The frame of every resident page `(space, key)` ([`page_key`]), looked up for each program reference
/// that reaches a cache at its physical address: an open-addressing map (one multiply per
/// look-up, not SipHash) behind a direct-mapped cache of recent pages, as instruction and
/// data references alternate between a few pages. Frames stay below 2^28. With it, where
/// the large pages' data lies.
#[derive(Clone, Debug)]
struct Resident {
    map: PageMap,
    recent: [(u64, u32, u32); RECENT],
    pool: LargePool,
}

impl Resident {
    fn new(pool: LargePool) -> Resident {
        Resident {
            map: PageMap::new(),
            recent: [(u64::MAX, 0, GONE); RECENT],
            pool,
        }
    }

    #[inline(always)]
    fn get(&mut self, space: u32, vpn: u64) -> Option<u64> {
        let r = (vpn as usize ^ space as usize) & (RECENT - 1);
        let (v, s, f) = self.recent[r];
        if v == vpn && s == space {
            return Some(f as u64);
        }
        let f = self.map.get(self.map.find(vpn, space as u64)?);
        if f == GONE {
            return None;
        }
        self.recent[r] = (vpn, space, f);
        Some(f as u64)
    }

    fn insert(&mut self, space: u32, vpn: u64, frame: u64) {
        let (slot, _) = self.map.entry(vpn, space as u64, frame as u32);
        self.map.set(slot, frame as u32);
        let r = (vpn as usize ^ space as usize) & (RECENT - 1);
        self.recent[r] = (vpn, space, frame as u32);
    }

    fn remove(&mut self, space: u32, vpn: u64) {
        if let Some(slot) = self.map.find(vpn, space as u64) {
            self.map.set(slot, GONE);
        }
        let r = (vpn as usize ^ space as usize) & (RECENT - 1);
        if self.recent[r].0 == vpn && self.recent[r].1 == space {
            self.recent[r] = (u64::MAX, 0, GONE);
        }
    }
}

/// The organisation a front table (hybrid, swTLB) of config `c` fronts.
fn behind(c: &PageTableConfig, org: Organisation) -> Organisation {
    match org {
        Organisation::Hybrid => c.behind.unwrap_or(Organisation::Radix),
        _ => c.behind.unwrap_or(Organisation::Inverted),
    }
}

/// The base page (as a shift) of the table `c` builds on a machine whose smallest mapped page
/// is `2^smallest` bytes: a radix table's leaves are 4 KiB, as its levels are laid out for
/// them (a larger page is a leaf higher up), and so are a front table's over one; a hashed
/// or inverted table maps pages of the machine's size (PA-RISC 1.0's 2 KiB), one size only.
pub fn table_page_shift(c: &PageTableConfig, smallest: u32) -> u32 {
    let org = match c.organisation {
        o @ (Organisation::Hybrid | Organisation::Swtlb) => behind(c, o),
        o => o,
    };
    match org {
        Organisation::Radix => PAGE_SHIFT,
        _ => smallest,
    }
}

/// Build a table of organisation `org` from the config (`behind` for a swTLB's inner), of
/// `frames` frames of `2^page_shift` bytes (a radix table's pages are 4 KiB whatever this
/// says: see [`table_page_shift`]).
fn build_table(
    c: &PageTableConfig,
    org: Organisation,
    (frames, page_shift): (u64, u32),
    base: u64,
    src: &str,
) -> Result<PageTable> {
    let err = |k: &str, m: String| Error::config(src, format!("pagetable.{k}"), m);
    let ratio_size = |default: f64| -> Result<usize> {
        let r = c.ratio.unwrap_or(default);
        let n = r * frames as f64;
        if r.is_nan() || r <= 0.0 || n < 1.0 || n.fract() != 0.0 || !(n as u64).is_power_of_two() {
            return Err(err(
                "ratio",
                format!("{r} × {frames} frames = {n} is not a power of two"),
            ));
        }
        Ok(n as usize)
    };
    Ok(match org {
        Organisation::Radix => {
            let mut p = match (c.bits.is_empty(), c.levels) {
                (false, _) => RadixParams {
                    bits: c.bits.clone(),
                    entry_bytes: c.entry_bytes.ok_or_else(|| {
                        err(
                            "entry_bytes",
                            "missing: with bits, give the entry size (4 for a 32-bit table's \
                             PTEs, 8 for x86-64's)"
                                .into(),
                        )
                    })?,
                    psc: Vec::new(),
                    base,
                    canonical: false,
                },
                (true, None | Some(2)) => RadixParams::two_level_32(),
                (true, Some(n @ (4 | 5))) => RadixParams::x86_64(n),
                (true, Some(n)) => {
                    return Err(err(
                        "levels",
                        format!("{n}: 2 (32-bit, 10 + 10 bits) or 4, 5 (x86-64); or give bits"),
                    ))
                }
            };
            if let Some(e) = c.entry_bytes {
                p.entry_bytes = e;
            }
            p.base = base;
            for (i, q) in c.psc.iter().enumerate() {
                if q.level + 1 >= p.bits.len() {
                    return Err(err(
                        &format!("psc[{i}].level"),
                        format!(
                            "{}: only levels 0 to {} point at tables",
                            q.level,
                            p.bits.len() - 2
                        ),
                    ));
                }
                if p.psc.len() <= q.level {
                    p.psc.resize(q.level + 1, None);
                }
                p.psc[q.level] = Some((q.entries, q.ways));
            }
            PageTable::Radix(
                Radix::new(p)
                    .map_err(|m| err(if c.bits.is_empty() { "psc" } else { "bits" }, m))?,
            )
        }
        Organisation::Inverted => PageTable::Inverted(
            Inverted::new(InvertedParams {
                frames,
                hat: ratio_size(2.0)?,
                base,
                page_shift,
            })
            .map_err(|m| err("ratio", m))?,
        ),
        Organisation::Hashed => PageTable::Hashed(
            Hashed::new(HashedParams {
                buckets: ratio_size(2.0)?,
                ways: c.ways.unwrap_or(1),
                chaining: c.chaining,
                move_to_head: c.move_to_head,
                base,
                page_shift,
            })
            .map_err(|m| err("ways", m))?,
        ),
        Organisation::Hybrid | Organisation::Swtlb => {
            // Huck & Hays' hybrid fronts a forward-mapped table, PA-RISC's swTLB an IPT; either
            // may front any table that is not a front itself.
            let (kind, default_entries) = if org == Organisation::Hybrid {
                (FrontKind::Hybrid, 8192)
            } else {
                (FrontKind::SwTlb, 2048)
            };
            let inner_org = behind(c, org);
            if matches!(inner_org, Organisation::Hybrid | Organisation::Swtlb) {
                return Err(err(
                    "behind",
                    format!("'{}' is not radix, inverted or hashed", inner_org.name()),
                ));
            }
            let entries = c.entries.unwrap_or(default_entries);
            // The PA-RISC swTLB is 2-way; the hybrid's HPT cache 1-way unless asked.
            let ways = c
                .ways
                .unwrap_or(if kind == FrontKind::SwTlb { 2 } else { 1 });
            if ways == 0 || !entries.is_multiple_of(ways) {
                return Err(err(
                    "entries",
                    format!("{entries} is not a multiple of {ways} ways"),
                ));
            }
            let p = FrontParams {
                kind,
                sets: entries / ways,
                ways,
                base,
            };
            let front_bytes = (entries as u64 * 16).next_multiple_of(1 << PAGE_SHIFT);
            // `ways` is the front table's: a hashed table behind a swTLB has 1-way buckets.
            let behind = PageTableConfig {
                ways: None,
                ..c.clone()
            };
            let inner = build_table(
                &behind,
                inner_org,
                (frames, page_shift),
                base + front_bytes,
                src,
            )?;
            PageTable::Front(Box::new(
                Front::new(p, inner).map_err(|m| err("entries", m))?,
            ))
        }
    })
}

/// Bytes of one table reference through a memory system's data cache (a word of the entry:
/// the cache works in lines, so only a reference's first line matters).
const TABLE_WORD: u16 = 4;

/// Space ids of the preloaded pages: above every per-process and global id in use.
const BACKGROUND: u32 = 0xF000_0000;

/// Map `n` frames to pages of other processes before the run, as a running system's memory
/// is full: 256 background spaces, random 32-bit offsets (deterministic). The table then
/// holds as many entries as memory has pages, which sets the load factor (α) of hashed and
/// inverted tables; the run's own faults take their frames first-in first-out.
/// With a memory system, the background pages take the frames its page mapping gives them.
/// Pages and frames are the table's base pages.
fn preload(
    table: &mut PageTable,
    frames: &mut Frames,
    n: u64,
    mut memory: Option<&mut MemorySystem>,
) {
    let base = table.base_shift();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut refs = Refs::new();
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let space = BACKGROUND | (x as u32 & 0xFF);
        let vpn = (x >> 12) & 0xF_FFFF;
        refs.clear();
        if table.lookup(space, vpn, &mut refs).frame.is_some() {
            continue;
        }
        let f = match memory.as_deref_mut() {
            Some(m) => {
                let f = m.background_frame(space, vpn << base, base);
                if f >= frames.capacity() {
                    continue;
                }
                if frames.place(space, vpn, f).shared && table.one_entry_per_frame() {
                    let others: Vec<_> = frames.owners(f).filter(|&p| p != (space, vpn)).collect();
                    for (os, ov) in others {
                        frames.unmap(f, os, ov);
                        table.remove(os, ov);
                    }
                }
                f
            }
            None => {
                let (f, old) = frames.alloc(space, vpn);
                if let Some((os, ov)) = old {
                    table.remove(os, ov);
                }
                f
            }
        };
        let _ = table.insert(space, vpn, base, f);
    }
}

impl Walker {
    /// Validate `[pagetable]` and build the walker, with physical memory of its own, on a
    /// machine whose smallest and largest mapped pages are `2^pages.0` and `2^pages.1` bytes
    /// (the smallest sets the table's base page: see [`table_page_shift`]; the largest where
    /// large pages' data lies: see [`LargePool`]); errors name the key.
    pub fn from_config(c: &PageTableConfig, src: &str, pages: (u32, u32)) -> Result<Walker> {
        Walker::build(c, src, None, pages)
    }

    /// Validate `[pagetable]` and build the walker of a machine with a memory system
    /// (`[memory]`), which is the machine's one physical memory: a faulting page is mapped
    /// to the frame the memory system's page mapping gives it (the frame the caches see its
    /// data in), the table is sized for that memory, and the table references go through its
    /// caches ([`Walker::miss`] is handed it).
    pub fn with_memory(
        c: &PageTableConfig,
        src: &str,
        memory: &mut MemorySystem,
        pages: (u32, u32),
    ) -> Result<Walker> {
        Walker::build(c, src, Some(memory), pages)
    }

    fn build(
        c: &PageTableConfig,
        src: &str,
        memory: Option<&mut MemorySystem>,
        (smallest, largest): (u32, u32),
    ) -> Result<Walker> {
        let err = |k: &str, m: String| Error::config(src, format!("pagetable.{k}"), m);
        let (bytes, key) = match (&memory, c.memory) {
            (Some(m), None) => (m.memory_bytes(), "memory.memory"),
            (Some(m), Some(b)) if b.0 != m.memory_bytes() => {
                return Err(err(
                    "memory",
                    format!(
                        "{} bytes, but memory.memory is {} bytes: a machine has one physical memory, which its page table maps (give the size once, in either section)",
                        b.0,
                        m.memory_bytes()
                    ),
                ))
            }
            (_, b) => (
                b.map_or(crate::config::DEFAULT_PAGETABLE_MEMORY, |b| b.0),
                "pagetable.memory",
            ),
        };
        let base = table_page_shift(c, smallest);
        let frames = bytes >> base;
        if frames == 0 || frames > 1 << 28 {
            let page = crate::config::PageSize::Size(1 << base).label();
            return Err(Error::config(
                src,
                key,
                format!("{bytes} bytes: a page table maps between one frame and 2^28 frames (of {page}, its page)"),
            ));
        }
        let (refill, addresses) = (c.refill, c.addresses);
        let random_ids = c.space_ids == SpaceIds::Random;
        let serial = c.compare == Compare::Serial;
        let org = c.organisation;
        if refill == RefillBy::Hardware && org == Organisation::Inverted {
            return Err(err(
                "refill",
                format!(
                    "the {} table is searched by software only (refill = \"software\")",
                    org.name()
                ),
            ));
        }
        let ways_apply = matches!(
            org,
            Organisation::Hashed | Organisation::Hybrid | Organisation::Swtlb
        );
        if !ways_apply && c.ways.is_some_and(|w| w != 1) {
            return Err(err(
                "ways",
                format!(
                    "only hashed, hybrid and swtlb tables have ways, not {}",
                    org.name()
                ),
            ));
        }
        let table = build_table(c, org, (frames, base), TABLE_BASE, src)?;
        // The program's data reaches the private cache at its physical addresses.
        let resident = match c.data_refs {
            true => Some(Resident::new(
                LargePool::new(largest, (frames, base)).map_err(|m| Error::config(src, key, m))?,
            )),
            false => None,
        };
        let mut costs = WalkCosts::preset(&c.costs).map_err(|m| err("costs", m))?;
        for (k, v) in &c.cycles {
            costs
                .set(k, *v)
                .map_err(|m| err(&format!("cycles.{k}"), m))?;
        }
        let cache = if c.cache.size.0 == 0 {
            None
        } else {
            let policy = c.cache.policy;
            let p = CacheParams {
                size: c.cache.size.0,
                line: c.cache.line,
                ways: c.cache.ways,
                policy,
                write: WritePolicy::Back,
                write_allocate: true,
                fetch: c.cache.line,
                seed: 0,
            };
            Some(Cache::new(&p).map_err(|e| err(&format!("cache.{}", e.field), e.message))?)
        };
        if !(0.0..=1.0).contains(&c.preload) {
            return Err(err(
                "preload",
                format!("{} is not a fraction between 0 and 1", c.preload),
            ));
        }
        let names = table.level_names();
        let large = table
            .page_shifts()
            .into_iter()
            .filter(|&s| s != base)
            .collect();
        let mut table = table;
        let through_memory = memory.is_some();
        let mut own = Frames::new(frames);
        preload(
            &mut table,
            &mut own,
            (c.preload * frames as f64) as u64,
            memory,
        );
        Ok(Walker {
            behind: match &table {
                PageTable::Front(f) => f.inner().kind(),
                _ => "",
            },
            stats: WalkStats {
                level_refs: vec![0; names.len()],
                level_misses: vec![0; names.len()],
                ..WalkStats::default()
            },
            names,
            table,
            frames: own,
            cache,
            costs,
            refill,
            serial,
            addresses,
            random_ids,
            refs: Refs::with_capacity(64),
            evicted: Vec::new(),
            data_refs: c.data_refs,
            resident,
            base,
            large,
            largest,
            config: c.clone(),
            through: if through_memory {
                Through::Memory
            } else {
                Through::Private
            },
        })
    }

    /// A copy of the parts each CPU has of its own ([`CpuParts`]), as they are now: before
    /// a run, a CPU's that has walked nothing.
    pub fn cpu_parts(&mut self) -> CpuParts {
        CpuParts {
            cache: self.cache.clone(),
            psc: self.table.psc_mut().map(|p| p.clone()).unwrap_or_default(),
        }
    }

    /// The running CPU's parts become `parts`, and `parts` the walker's were.
    pub fn swap_cpu_parts(&mut self, parts: &mut CpuParts) {
        std::mem::swap(&mut self.cache, &mut parts.cache);
        if let Some(p) = self.table.psc_mut() {
            std::mem::swap(p, &mut parts.psc);
        }
    }

    /// Whether the program's loads and stores go through the data cache too.
    #[inline(always)]
    pub fn sees_data(&self) -> bool {
        self.data_refs
    }

    /// The machine's `[[cache]]` hierarchy is physically addressed at this walker's frames:
    /// the table references go through it ([`Walker::miss_through`]) instead of the private
    /// cache, and the program's references reach it at [`Walker::physical`]. The error: the
    /// machine's large pages do not fit its memory's frames in the pool of large pages
    /// ([`LargePool::new`]; the key is `pagetable.memory`).
    pub fn serve_caches(&mut self) -> std::result::Result<(), String> {
        if self.resident.is_none() {
            let pool = LargePool::new(self.largest, (self.frames.capacity(), self.base))?;
            self.resident = Some(Resident::new(pool));
        }
        self.through = Through::Caches;
        Ok(())
    }

    /// The physical address that `addr` of address space `asid`, in a page of `2^shift`
    /// bytes, reaches: its page's frame ([`resident_address`]), for a physically addressed
    /// cache. A page with no frame yet is mapped now (a fault, without a walk), as the OS
    /// maps a page on its first touch: a reference no TLB translates never walks. `paddr` as
    /// for [`Walker::miss`]. `None` if the table cannot hold the page (counted in
    /// `unmappable`).
    #[inline]
    pub fn physical(&mut self, asid: u32, addr: u64, paddr: u64, shift: u32) -> Option<u64> {
        if shift == self.base {
            return self.physical_base(asid, addr, paddr);
        }
        self.physical_large(asid, addr, paddr, shift)
    }

    /// [`Walker::physical`] of a base page: the program's references' path.
    #[inline(always)]
    fn physical_base(&mut self, asid: u32, addr: u64, paddr: u64) -> Option<u64> {
        self.physical_sized(asid, addr, paddr, self.base)
    }

    /// [`Walker::physical`] of a large page.
    #[inline(never)]
    fn physical_large(&mut self, asid: u32, addr: u64, paddr: u64, shift: u32) -> Option<u64> {
        self.physical_sized(asid, addr, paddr, shift)
    }

    /// [`Walker::physical`] in a page of `2^shift` bytes.
    #[inline(always)]
    fn physical_sized(&mut self, asid: u32, addr: u64, paddr: u64, shift: u32) -> Option<u64> {
        let (space, vpn) = self.page(asid, addr);
        let base = self.base;
        if let Some(p) = resident_address(self.resident.as_mut()?, (space, vpn, addr), shift, base)
        {
            return Some(p);
        }
        self.map_on_touch(space, vpn, addr, paddr, shift)
    }

    /// [`Walker::physical`] of a page with no frame: map it, and return the address.
    #[inline(never)]
    fn map_on_touch(
        &mut self,
        space: u32,
        vpn: u64,
        addr: u64,
        paddr: u64,
        shift: u32,
    ) -> Option<u64> {
        if !self.fault(space, vpn, paddr, shift, None) {
            self.stats.unmappable += 1;
            return None;
        }
        let base = self.base;
        resident_address(self.resident.as_mut()?, (space, vpn, addr), shift, base)
    }

    /// The space id of address space `asid`'s own pages (its root, for a radix table).
    #[inline(always)]
    fn space_id(&self, asid: u32) -> u32 {
        if self.random_ids {
            scramble_space(asid)
        } else {
            asid
        }
    }

    /// The (space id, page number) of `addr` in address space `asid`. Per process, the
    /// kernel half of a 64-bit space (the top bit set) is one set of pages every address
    /// space shares, under [`KERNEL_SPACE`] — one translation, one fault and one frame per
    /// kernel page, as the memory system maps it ([`mapping_space`]) — not a copy per process.
    #[inline(always)]
    fn page(&self, asid: u32, addr: u64) -> (u32, u64) {
        match self.addresses {
            Addresses::PerProcess => (
                match mapping_space(asid, addr) {
                    KERNEL_SPACE => KERNEL_SPACE,
                    _ => self.space_id(asid),
                },
                addr >> self.base,
            ),
            Addresses::Global => ((addr >> 32) as u32, (addr & 0xffff_ffff) >> self.base),
        }
    }

    /// The last-level TLB missed on `addr` (a page of `2^shift` bytes) in address space
    /// `asid`: walk, map on a fault, price the walk. `paddr` (unless [`NO_PADDR`]) names the
    /// physical page the reference reaches: every page naming the same one shares its frame
    /// (the aliases of a shared page). With `memory`, the table references go through its
    /// caches rather than the private one.
    pub fn miss(
        &mut self,
        asid: u32,
        addr: u64,
        paddr: u64,
        shift: u32,
        mut memory: Option<&mut MemorySystem>,
    ) {
        let Some(w) = self.walk(asid, addr, paddr, shift, memory.as_deref_mut()) else {
            return;
        };
        self.count(&w);
        match memory {
            Some(m) => self.table_refs_through_memory(asid, m),
            None => self.table_refs_through_private(),
        }
    }

    /// [`Walker::miss`] on a machine whose one physical memory is another model's — the OS
    /// of its virtually addressed cache: a faulting page is mapped to the frame `memory`
    /// gives it; the table references go through the private cache.
    pub fn miss_placed(
        &mut self,
        asid: u32,
        addr: u64,
        paddr: u64,
        shift: u32,
        memory: &mut impl PhysicalMemory,
    ) {
        let Some(w) = self.walk(asid, addr, paddr, shift, Some(memory)) else {
            return;
        };
        self.count(&w);
        self.table_refs_through_private();
    }

    /// [`Walker::miss`] on a machine whose `[[cache]]` hierarchy is physically addressed
    /// ([`Walker::serve_caches`]): the table references go through `caches` as kernel-mode
    /// loads and stores of a word at their physical addresses, counted in `ledger` with
    /// the program's references; each that misses the first level costs `cache_miss`.
    pub fn miss_through(
        &mut self,
        asid: u32,
        addr: u64,
        paddr: u64,
        shift: u32,
        caches: &mut Hierarchy,
        ledger: &mut Ledger,
    ) {
        let Some(w) = self.walk(asid, addr, paddr, shift, None::<&mut MemorySystem>) else {
            return;
        };
        self.count(&w);
        let s = &mut self.stats;
        let mut misses = 0u64;
        for r in &self.refs {
            let kind = if r.write { Kind::Store } else { Kind::Load };
            let missed = caches.machinery(r.addr, TABLE_WORD, kind, ledger);
            s.level_refs[r.level as usize] += 1;
            s.level_misses[r.level as usize] += missed as u64;
            misses += missed as u64;
        }
        s.penalty_cycles += misses * self.costs.cache_miss as u64;
    }

    /// The walk of [`Walker::miss`], its table references in `self.refs`; `None` if the
    /// page faulted and the table cannot hold it (counted in `unmappable`).
    #[inline(always)]
    fn walk<P: PhysicalMemory>(
        &mut self,
        asid: u32,
        addr: u64,
        paddr: u64,
        shift: u32,
        memory: Option<&mut P>,
    ) -> Option<Walk> {
        let (space, vpn) = self.page(asid, addr);
        // The walk starts at the running space's root (global addresses: the page's space).
        let root = match self.addresses {
            Addresses::PerProcess => self.space_id(asid),
            Addresses::Global => space,
        };
        self.refs.clear();
        let mut w = self.table.lookup_from(root, space, vpn, &mut self.refs);
        if w.frame.is_none() {
            // One physical memory: the frame the data path will see the page's data in.
            let base = self.base;
            let placed = match memory.map(|m| page_frame(m, (asid, addr, paddr), shift, base)) {
                Some(None) => {
                    // The memory's model refused the page (and keeps the error).
                    self.stats.unmappable += 1;
                    return None;
                }
                placed => placed.flatten(),
            };
            if !self.fault(space, vpn, paddr, shift, placed) {
                self.stats.unmappable += 1;
                return None;
            }
            self.refs.clear();
            w = self.table.lookup_from(root, space, vpn, &mut self.refs);
        }
        Some(w)
    }

    /// Page fault on `(space, vpn)`: give it a frame — `placed`, the memory system's choice
    /// (for the page's first base page), on a machine with one; else the one holding its
    /// physical page, if `paddr` names one already in memory, or the next — and map it; false
    /// if the table cannot hold it.
    fn fault(&mut self, space: u32, vpn: u64, paddr: u64, shift: u32, placed: Option<u64>) -> bool {
        // A large page is known by its first base page, whichever of its parts faulted.
        let vpn = first_part(vpn, shift, self.base);
        let mut evicted = std::mem::take(&mut self.evicted);
        evicted.clear();
        let m = match placed {
            // A frame past the table's memory (a traced physical address beyond it), or a
            // large page's run ending past it.
            Some(f) if f + (1 << (shift - self.base)) > self.frames.capacity() => {
                self.evicted = evicted;
                return false;
            }
            Some(f) => self.frames.place(space, vpn, f),
            None => {
                let object = (paddr != NO_PADDR).then(|| paddr & !((1u64 << shift) - 1));
                self.frames.map(space, vpn, object, &mut evicted)
            }
        };
        if m.shared && self.table.one_entry_per_frame() {
            // An inverted table describes a frame by one virtual address: the alias mapping
            // the frame now loses its translation (and faults on its next walk).
            evicted.extend(self.frames.owners(m.frame).filter(|&p| p != (space, vpn)));
            for &(os, ov) in &evicted {
                self.frames.unmap(m.frame, os, ov);
            }
        }
        for &(os, ov) in &evicted {
            self.table.remove(os, ov);
            if let Some(r) = &mut self.resident {
                forget(r, (&self.large, self.base), os, ov);
            }
        }
        self.evicted = evicted;
        match self.table.insert(space, vpn, shift, m.frame) {
            Ok(()) => {}
            Err(InsertError::OutOfRange | InsertError::PageSize(_) | InsertError::Frame(_)) => {
                self.frames.unmap(m.frame, space, vpn);
                return false;
            }
        }
        if let Some(r) = &mut self.resident {
            r.insert(space, page_key(vpn, shift, self.base), m.frame);
        }
        self.stats.faults += 1;
        if m.shared {
            self.stats.shared_faults += 1;
        }
        true
    }

    /// Count walk `w` and its basic cycles (its table references are counted where they go).
    #[inline(always)]
    fn count(&mut self, w: &Walk) {
        let basic = self.basic(w);
        let s = &mut self.stats;
        s.walks += 1;
        s.chain_sum += w.chain as u64;
        s.chain_hist[(w.chain as usize).min(CHAIN_BINS)] += 1;
        s.head_hits += w.head as u64;
        s.second_way += w.second_way as u64;
        s.psc_skipped += w.skipped as u64;
        s.basic_cycles += basic;
    }

    /// The last walk's table references through the memory system `m`: their penalty is the
    /// stall cycles it charges them.
    fn table_refs_through_memory(&mut self, asid: u32, m: &mut MemorySystem) {
        let s = &mut self.stats;
        let previous = m.enter(Activity::Walk);
        for r in &self.refs {
            let kind = if r.write { Kind::Store } else { Kind::Load };
            let c = m.machinery(asid, kind, At::Physical(r.addr), TABLE_WORD);
            s.level_refs[r.level as usize] += 1;
            s.level_misses[r.level as usize] += c.missed as u64;
            s.penalty_cycles += c.stalls;
        }
        m.leave(previous);
    }

    /// The last walk's table references through the private data cache (none: all hit).
    #[inline(always)]
    fn table_refs_through_private(&mut self) {
        let s = &mut self.stats;
        let mut misses = 0u64;
        for r in &self.refs {
            let hit = match &mut self.cache {
                Some(c) => c.access(r.addr, r.write).hit,
                None => true,
            };
            s.level_refs[r.level as usize] += 1;
            if !hit {
                s.level_misses[r.level as usize] += 1;
                misses += 1;
            }
        }
        s.penalty_cycles += misses * self.costs.cache_miss as u64;
    }

    /// The basic (instruction) cycles of a walk (see the module documentation).
    fn basic(&self, w: &Walk) -> u64 {
        let c = &self.costs;
        let second = if self.serial && w.second_way {
            c.second_way as u64
        } else {
            0
        };
        let beyond = w.chain.saturating_sub(1) as u64 * c.chain as u64;
        let deeper = |per: u32| w.chain.saturating_sub(2) as u64 * per as u64;
        let software = |kind: &str| -> u64 {
            match kind {
                "radix" => c.sw_fmpt as u64 + deeper(c.sw_fmpt_level),
                "inverted" => (c.sw_hpt + c.ipt_extra) as u64 + beyond,
                _ => c.sw_hpt as u64 + beyond,
            }
        };
        match (self.table.kind(), self.refill) {
            ("radix", RefillBy::Hardware) => c.hw_fmpt as u64 + deeper(c.hw_fmpt_level),
            ("hashed", RefillBy::Hardware) => {
                let head = c.hw_hpt as u64 + second;
                if w.head {
                    head
                } else {
                    head + c.overflow as u64 + beyond
                }
            }
            ("hashed", RefillBy::Software) => c.sw_hpt as u64 + second + beyond,
            (front @ ("hybrid" | "swtlb"), r) => {
                // The probe (by hardware as an HPT's head bucket), then on a miss the software
                // search of the table behind and the refill.
                let probe = match (front, r) {
                    (_, RefillBy::Hardware) => c.hw_hpt as u64 + second,
                    ("hybrid", _) => c.sw_hpt as u64 + second,
                    _ => c.swtlb as u64,
                };
                if w.front_miss {
                    probe + software(self.behind) + c.hpt_refill as u64
                } else {
                    probe
                }
            }
            (kind, _) => software(kind),
        }
    }

    /// The OS unmapped the page of `addr` (an `Unmap` event), or rewrote its entry (a `Map`
    /// event: the next walk faults and maps it where the OS now has it): its translation
    /// leaves the table and its frame is free. Whether the table had it.
    pub fn unmap(&mut self, asid: u32, addr: u64) -> bool {
        let (space, vpn) = self.page(asid, addr);
        let Some(f) = self.table.remove(space, vpn) else {
            return false;
        };
        // The frame's page is the one the leaf mapped: a large page by its first base page.
        self.frames.unmap(f, space, vpn);
        for &s in &self.large {
            self.frames.unmap(f, space, first_part(vpn, s, self.base));
        }
        if let Some(r) = &mut self.resident {
            forget(r, (&self.large, self.base), space, vpn);
        }
        true
    }

    /// The frames holding a page (the preloaded background pages' before the run): for
    /// an OS that owns the machine's memory to keep out of its free pool.
    pub fn frames_held(&self) -> impl Iterator<Item = u64> + '_ {
        self.frames.held()
    }

    /// Every page the table maps, with its frame.
    #[cfg(test)]
    pub(crate) fn pages(&self) -> Vec<((u32, u64), u64)> {
        self.frames.pages()
    }

    /// Whether the table holds pages over its base page.
    #[inline(always)]
    pub fn holds_large_pages(&self) -> bool {
        !self.large.is_empty()
    }

    /// The table's base page (as a shift): the size of its frames.
    #[inline(always)]
    pub fn base_shift(&self) -> u32 {
        self.base
    }

    /// A program load or store (with `data_refs`) in a page of `2^shift` bytes: through the
    /// data cache at its frame.
    #[inline]
    pub fn data_ref(&mut self, asid: u32, addr: u64, write: bool, shift: u32) {
        let (space, vpn) = self.page(asid, addr);
        let base = self.base;
        let Some(paddr) = self
            .resident
            .as_mut()
            .and_then(|r| resident_address(r, (space, vpn, addr), shift, base))
        else {
            return;
        };
        if let Some(c) = &mut self.cache {
            self.stats.data_refs += 1;
            if !c.access(paddr, write).hit {
                self.stats.data_misses += 1;
            }
        }
    }

    /// The table references of the last walk, in the order it made them (physical
    /// addresses; a walk that faulted: those of the walk repeated after the fault).
    pub fn last_walk(&self) -> &[TableRef] {
        &self.refs
    }

    pub fn stats(&self) -> &WalkStats {
        &self.stats
    }

    pub fn table(&self) -> &PageTable {
        &self.table
    }

    pub fn costs(&self) -> &WalkCosts {
        &self.costs
    }

    pub fn usage(&self) -> Usage {
        self.table.usage()
    }

    /// The `pagetable` section of the result JSON.
    pub fn json(&self) -> Value {
        let s = &self.stats;
        let per = |x: u64| {
            if s.walks == 0 {
                Value::Null
            } else {
                json!(x as f64 / s.walks as f64)
            }
        };
        let rate = |n: u64, d: u64| {
            if d == 0 {
                Value::Null
            } else {
                json!(n as f64 / d as f64)
            }
        };
        let u = self.usage();
        let memory = self.frames.capacity() << self.base;
        let levels: Vec<Value> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                json!({"name": n, "refs": s.level_refs[i], "misses": s.level_misses[i],
                       "miss_rate": rate(s.level_misses[i], s.level_refs[i])})
            })
            .collect();
        let costs: serde_json::Map<String, Value> = COST_NAMES
            .iter()
            .map(|n| (n.to_string(), json!(self.costs.get(n))))
            .collect();
        let mut v = json!({
            "organisation": self.table.kind(),
            "refill": match self.refill { RefillBy::Hardware => "hardware", RefillBy::Software => "software" },
            "addresses": self.config.addresses,
            "costs": costs,
            "cache": match self.through {
                Through::Memory => "memory",
                Through::Caches => "caches",
                Through::Private if self.cache.is_some() => "private",
                Through::Private => "none",
            },
            "walks": s.walks,
            "faults": s.faults,
            "unmappable": s.unmappable,
            "frames_reclaimed": self.frames.reclaimed,
            "frames_allocated": s.faults - s.shared_faults,
            "shared_faults": s.shared_faults,
            "cycles": {"basic": s.basic_cycles, "cache_penalty": s.penalty_cycles,
                       "total": s.basic_cycles + s.penalty_cycles},
            "cycles_per_miss": {"basic": per(s.basic_cycles), "cache_penalty": per(s.penalty_cycles),
                                "total": per(s.basic_cycles + s.penalty_cycles)},
            "chain": {"mean": per(s.chain_sum), "histogram": s.chain_hist.to_vec()},
            "head_hits": s.head_hits,
            "head_hit_rate": rate(s.head_hits, s.walks),
            "second_way": s.second_way,
            "psc_skipped": s.psc_skipped,
            "levels": levels,
            "table": {"bytes": u.table_bytes, "pages": u.pages, "mapped_bytes": u.mapped_bytes,
                      "bytes_per_mapped": rate(u.table_bytes, u.mapped_bytes),
                      "memory": memory, "of_memory": rate(u.table_bytes, memory)},
        });
        if self.data_refs {
            v["data"] = json!({"refs": s.data_refs, "misses": s.data_misses,
                               "miss_rate": rate(s.data_misses, s.data_refs)});
        }
        if let PageTable::Hashed(h) = &self.table {
            v["relocations"] = json!(h.relocations);
        }
        if let PageTable::Front(f) = &self.table {
            let p = f.params();
            v["front_entries"] = json!(p.sets * p.ways);
            v["front_ways"] = json!(p.ways);
            v["front_refills"] = json!(f.refills);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use crate::event::{Event, Kind};
    use crate::machine::Machine;

    fn machine(pt: &str) -> crate::Result<Machine> {
        let text = format!("[[tlb]]\nname='t'\nentries=4\npolicy='lru'\n[pagetable]\n{pt}\n");
        Machine::assemble(Some(&text), "m.toml", &[], &[])
    }

    /// `pages` distinct pages of space 1, each touched twice in a loop bigger than the TLB:
    /// every reference misses the 4-entry TLB.
    fn run(m: &mut Machine, pages: u64, rounds: u64) -> serde_json::Value {
        let mut ev = Vec::new();
        for _ in 0..rounds {
            for p in 0..pages {
                ev.push(Event::reference(Kind::Load, p << 12, 8).with_asid(1));
            }
        }
        m.run_batch(&ev);
        m.walker().unwrap().json()
    }

    #[test]
    fn basic_costs_follow_huck_and_hays() {
        let nocache = "[pagetable.cache]\nsize = 0";
        // Hardware HPT, every page alone in its bucket: 9 cycles a walk.
        let mut m = machine(&format!(
            "organisation='hashed'\nspace_ids='asid'\n{nocache}"
        ))
        .unwrap();
        let j = run(&mut m, 16, 3);
        assert_eq!(j["walks"], 48);
        assert_eq!(j["cycles_per_miss"]["basic"], 9.0);
        assert_eq!(j["cycles_per_miss"]["cache_penalty"], 0.0);
        assert_eq!(j["head_hit_rate"], 1.0);
        // Software: 27; the IPT: 27 + 6.
        let mut m = machine(&format!(
            "organisation='hashed'\nrefill='software'\nspace_ids='asid'\n{nocache}"
        ))
        .unwrap();
        assert_eq!(run(&mut m, 16, 3)["cycles_per_miss"]["basic"], 27.0);
        let mut m = machine(&format!(
            "organisation='inverted'\nrefill='software'\nspace_ids='asid'\n{nocache}"
        ))
        .unwrap();
        assert_eq!(run(&mut m, 16, 3)["cycles_per_miss"]["basic"], 33.0);
        // Software 2-level FMPT: 28; hardware: 9.
        let mut m = machine(&format!(
            "organisation='radix'\nrefill='software'\n{nocache}"
        ))
        .unwrap();
        assert_eq!(run(&mut m, 16, 3)["cycles_per_miss"]["basic"], 28.0);
        let mut m = machine(&format!("organisation='radix'\n{nocache}")).unwrap();
        assert_eq!(run(&mut m, 16, 3)["cycles_per_miss"]["basic"], 9.0);
        // Hybrid: the first walk of each page misses the HPT cache (9 + 28 + 8), later ones
        // hit its head (9).
        let mut m = machine(&format!("organisation='hybrid'\nentries=64\n{nocache}")).unwrap();
        let j = run(&mut m, 16, 3);
        assert_eq!(j["cycles"]["basic"], 16 * (9 + 28 + 8) + 32 * 9);
        assert_eq!(j["head_hits"], 32);
    }

    #[test]
    fn the_kernel_half_is_mapped_once_for_every_address_space() {
        // Three address spaces touch the same two kernel pages and a user page each, through
        // a TLB of 4 per-ASID entries that they keep evicting: the kernel pages fault once,
        // and a 4-level table holds one kernel subtree (3 table pages below the roots, the
        // kernel's own root as swapper_pg_dir is).
        for org in ["organisation='radix'\nlevels=4", "organisation='hashed'"] {
            let mut m = machine(&format!("{org}\n[pagetable.cache]\nsize=0")).unwrap();
            let mut ev = Vec::new();
            for round in 0..3u64 {
                for asid in 1..=3u32 {
                    for a in [0xffff_8880_0000_0000u64, 0xffff_8880_0000_1000, 0x40_0000] {
                        let a = a + (round % 2) * 0x2000 * (a >> 63);
                        ev.push(Event::reference(Kind::Load, a, 8).with_asid(asid));
                    }
                }
            }
            m.run_batch(&ev);
            let j = m.walker().unwrap().json();
            assert_eq!(j["faults"], 4 + 3, "{org}: 4 kernel pages, 3 user pages");
            if org.contains("radix") {
                // 3 roots; 3 user subtrees of 3 pages; the kernel's root and 3 pages.
                assert_eq!(j["table"]["bytes"], (3 + 3 * 3 + 1 + 3) * 4096, "{org}");
            }
        }
    }

    #[test]
    fn chain_elements_cost_nine_and_cache_misses_thirty() {
        // 16 KiB of memory = 4 frames; ratio 1 = 4 buckets; pages 0, 4 and 8 → bucket 0.
        // FIFO frame reuse keeps at most 4 pages mapped; with 3 colliding pages the chain is
        // 3 long: walks examine 1, 2 and 3 entries (software: 27, 36, 45).
        let mut m = machine("organisation='hashed'\nrefill='software'\nspace_ids='asid'\nmemory=16384\nratio=1\nchaining='overflow'\n[pagetable.cache]\nsize=0").unwrap();
        let mut ev = Vec::new();
        for _ in 0..4 {
            for p in [0u64, 4, 8, 1, 2, 3, 5] {
                ev.push(Event::reference(Kind::Load, p << 12, 8).with_asid(1));
            }
        }
        m.run_batch(&ev);
        let j = m.walker().unwrap().json();
        let walks = j["walks"].as_u64().unwrap();
        let chain_sum: u64 = j["chain"]["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, n)| i as u64 * n.as_u64().unwrap())
            .sum();
        assert_eq!(
            j["cycles"]["basic"].as_u64().unwrap(),
            27 * walks + 9 * (chain_sum - walks)
        );
        // With the default cache, the first reference to each table line misses: 30 each.
        let mut m = machine("organisation='radix'").unwrap();
        let j = run(&mut m, 8, 2);
        // Root entry line (one) and the leaf's line(s): 8 leaf entries × 4 B = one 32 B line.
        assert_eq!(j["cycles"]["cache_penalty"], 2 * 30);
        assert_eq!(j["levels"][0]["misses"], 1);
    }

    #[test]
    fn data_references_change_no_count_but_the_cache() {
        // The program's loads and stores through the walker's data cache take the full path
        // of the machine: TLB and walk counts must not change, only the cache penalties.
        let spec = "workload:multiuser,users=4,slices=60,quantum=1500";
        let run = |data: bool| {
            let text = format!(
                "[machine]\nglobal_above = 0\n[[tlb]]\nname='t'\nentries=32\n[pagetable]\norganisation='hashed'\naddresses='global'\ndata_refs={data}\n"
            );
            let mut m = Machine::assemble(Some(&text), "m.toml", &[], &[]).unwrap();
            let mut src = crate::workload::from_spec(spec).unwrap().unwrap();
            let mut v = Vec::new();
            while src.next_batch(&mut v).unwrap() {
                m.run_batch(&v);
            }
            let t = m.ledger().total(0, |_, _, _| true);
            (t.accesses, t.misses, m.walker().unwrap().json())
        };
        let (a, b) = (run(false), run(true));
        assert_eq!((a.0, a.1), (b.0, b.1));
        assert_eq!(a.2["walks"], b.2["walks"]);
        assert_eq!(a.2["chain"], b.2["chain"]);
        assert!(b.2["data"]["refs"].as_u64().unwrap() > 0);
        assert!(b.2["cycles"]["cache_penalty"].as_u64() > a.2["cycles"]["cache_penalty"].as_u64());
    }

    #[test]
    fn global_addresses_share_entries_that_aliases_repeat() {
        // Two processes touch one shared page: one global address (one table entry, one TLB
        // entry when global) or two aliases (two of each).
        let ev = |addr: u64| {
            vec![
                Event::reference(Kind::Load, addr, 4).with_asid(1),
                Event::reference(Kind::Load, addr, 4).with_asid(2),
            ]
        };
        let mut g = Machine::assemble(
            Some("[machine]\nglobal_above = 0\n[[tlb]]\nname='t'\nentries=4\n[pagetable]\norganisation='hashed'\naddresses='global'\n"),
            "m.toml", &[], &[]).unwrap();
        g.run_batch(&ev((0x1234u64 << 32) | 0x8000_0000));
        let mut a = machine("organisation='hashed'").unwrap();
        a.run_batch(&ev(0x8000_0000));
        let j = |m: &Machine| m.walker().unwrap().json();
        assert_eq!(
            (j(&g)["walks"].clone(), j(&g)["table"]["pages"].clone()),
            (1.into(), 1.into())
        );
        assert_eq!(
            (j(&a)["walks"].clone(), j(&a)["table"]["pages"].clone()),
            (2.into(), 2.into())
        );
    }

    /// Run workload `spec` on a 32-entry TLB and a `[pagetable]` of `pt`; the walker's JSON.
    fn on_workload(spec: &str, pt: &str) -> serde_json::Value {
        let mut src = crate::workload::from_spec(spec).unwrap().unwrap();
        on_source(&mut *src, pt)
    }

    /// [`on_workload`] of any source.
    fn on_source(src: &mut dyn crate::trace::TraceSource, pt: &str) -> serde_json::Value {
        let global = pt.contains("'global'");
        let text = format!(
            "{}[[tlb]]\nname='t'\nentries=32\n[pagetable]\n{pt}\ndata_refs=true\n",
            if global {
                "[machine]\nglobal_above = 0\n"
            } else {
                ""
            }
        );
        let mut m = Machine::assemble(Some(&text), "m.toml", &[], &[]).unwrap();
        crate::run::run(src, &mut m, &mut |_| true).unwrap();
        m.walker().unwrap().json()
    }

    #[test]
    fn aliases_of_a_shared_page_share_its_frame() {
        // Twelve users sharing text and a buffer pool: as aliases, each shared page has one
        // table entry per sharer but one frame, exactly as with global addresses.
        let w = "workload:multiuser,users=12,slices=120,quantum=1500";
        let g = on_workload(w, "organisation='hashed'\naddresses='global'");
        for (org, rewrite) in [("radix", false), ("hybrid", false), ("hashed", true)] {
            let pt = format!("organisation='{org}'");
            let a = if rewrite {
                // The global stream rewritten to aliases (as a saved trace would be).
                rewritten(w, &pt)
            } else {
                on_workload(&format!("{w},addresses=per-process"), &pt)
            };
            assert_eq!(a["frames_allocated"], g["frames_allocated"], "{org}");
            assert_eq!(g["shared_faults"], 0);
            let (faults, shared) = (
                a["faults"].as_u64().unwrap(),
                a["shared_faults"].as_u64().unwrap(),
            );
            assert!(shared > faults / 2, "{org}: {shared} of {faults}");
            assert_eq!(a["table"]["pages"].as_u64(), Some(faults), "{org}");
            assert_eq!(a["frames_reclaimed"], 0);
            // The program's data reaches one copy of each shared page: no more data-cache
            // misses than with global addresses beyond what the table's own lines evict.
            let miss = |j: &serde_json::Value| j["data"]["miss_rate"].as_f64().unwrap();
            assert!(
                miss(&a) < 1.2 * miss(&g),
                "{org}: {} vs {}",
                miss(&a),
                miss(&g)
            );
        }
    }

    /// [`on_workload`] of the multi-user spec `w` rewritten to per-process aliases.
    fn rewritten(w: &str, pt: &str) -> serde_json::Value {
        use crate::workload::{AddressModel, Rewrite};
        let inner = crate::workload::from_spec(w).unwrap().unwrap();
        on_source(&mut Rewrite::new(inner, AddressModel::PerProcess), pt)
    }

    #[test]
    fn an_inverted_table_maps_one_alias_of_a_frame_at_a_time() {
        // Two processes take turns on one shared page, as aliases: the IPT describes the
        // frame by one virtual address, so each turn faults and takes it from the other.
        let alias = |asid: u32| {
            Event::reference(Kind::Load, 0x8000_0000, 4)
                .with_asid(asid)
                .with_paddr(0x1234_8000_0000)
        };
        let flush = Event::control(Kind::TlbFlush, crate::event::FLUSH_ALL, 0);
        let mut ev = Vec::new();
        for _ in 0..3 {
            ev.extend([alias(1), flush, alias(2), flush]);
        }
        let mut m = machine("organisation='inverted'\nrefill='software'").unwrap();
        m.run_batch(&ev);
        let j = m.walker().unwrap().json();
        assert_eq!(
            (j["walks"].as_u64(), j["faults"].as_u64()),
            (Some(6), Some(6))
        );
        assert_eq!(j["frames_allocated"], 1);
        assert_eq!(j["table"]["pages"], 1);
        // A hashed table holds both aliases: two faults, then hits.
        let mut m = machine("organisation='hashed'").unwrap();
        m.run_batch(&ev);
        let j = m.walker().unwrap().json();
        assert_eq!(j["walks"], 6);
        assert_eq!(
            (j["faults"].as_u64(), j["shared_faults"].as_u64()),
            (Some(2), Some(1))
        );
        assert_eq!(j["table"]["pages"], 2);
    }

    #[test]
    fn the_software_tlb_is_two_way_unless_told() {
        let mut m = machine("organisation='swtlb'\nrefill='software'").unwrap();
        let j = run(&mut m, 16, 3);
        assert_eq!(
            (j["front_entries"].as_u64(), j["front_ways"].as_u64()),
            (Some(2048), Some(2))
        );
        // Its first walk of each page misses both ways; later ones hit.
        assert_eq!(j["second_way"], 16);
        assert_eq!(j["head_hits"], 32);
        let mut m = machine("organisation='swtlb'\nrefill='software'\nways=1").unwrap();
        assert_eq!(run(&mut m, 16, 3)["front_ways"], 1);
        // The hybrid's HPT cache is 1-way by default, and a hashed table behind a swTLB too.
        let mut m = machine("organisation='hybrid'").unwrap();
        assert_eq!(run(&mut m, 16, 3)["front_ways"], 1);
        let mut m =
            machine("organisation='swtlb'\nrefill='software'\nbehind='hashed'\nways=2").unwrap();
        let j = run(&mut m, 16, 3);
        assert_eq!(j["levels"][1]["name"], "head");
        assert_eq!(j["table"]["bytes"], 2048 * 16 + 8192 * 2 * 16);
    }

    #[test]
    fn a_software_tlb_fronts_any_table_probed_by_either() {
        // One idea (a software TLB in memory before the walk), any table behind, probed by
        // hardware (as an HPT's head bucket, 9 cycles) or software: the first walk of each
        // page misses the front (probe + the software search behind + 8 to refill), later
        // ones hit it (the probe).
        let nocache = "[pagetable.cache]\nsize = 0";
        for (pt, probe, behind) in [
            ("organisation='swtlb'\nways=1", 9, 33), // hardware, IPT behind: 27 + 6
            ("organisation='swtlb'\nrefill='software'\nways=1", 27, 33),
            ("organisation='hybrid'\nbehind='hashed'", 9, 27),
            ("organisation='hybrid'\nbehind='inverted'", 9, 33),
            ("organisation='hybrid'", 9, 28), // Huck & Hays' hybrid: a 2-level FMPT
        ] {
            let mut m = machine(&format!("{pt}\nspace_ids='asid'\n{nocache}")).unwrap();
            let j = run(&mut m, 16, 3);
            assert_eq!(
                j["cycles"]["basic"],
                16 * (probe + behind + 8) + 32 * probe,
                "{pt}"
            );
            assert_eq!(j["head_hits"], 32, "{pt}");
        }
    }

    #[test]
    fn an_unmapped_page_faults_again() {
        for org in ["hashed", "radix", "hybrid"] {
            let mut m = machine(&format!("organisation='{org}'")).unwrap();
            let load = Event::reference(Kind::Load, 0x5000, 4).with_asid(1);
            m.run_batch(&[load, Event::control(Kind::Unmap, 0x5000, 1), load]);
            let j = m.walker().unwrap().json();
            assert_eq!(
                (j["walks"].as_u64(), j["faults"].as_u64()),
                (Some(2), Some(2)),
                "{org}"
            );
        }
    }

    /// A small memory system: 1 KiB fully associative LRU D-cache of 16-byte lines (no
    /// conflicts), 15 cycles a miss, pages given frames in the order they are touched.
    const MEMORY: &str = "[memory]\nmapping = 'sequential'\n[memory.dcache]\nsize = '1KiB'\nline = 16\nways = 'full'\nmiss_cycles = 15\n";

    #[test]
    fn table_references_go_through_the_memory_systems_data_cache() {
        let mut m = Machine::assemble(
            Some(&format!(
                "[[tlb]]\nname='t'\nentries=4\n[pagetable]\norganisation='radix'\nlevels=4\n{MEMORY}"
            )),
            "m.toml",
            &[],
            &[],
        )
        .unwrap();
        // One walk of the 4-level table: 4 loads (L4 … L1), all cold misses in the D-cache.
        m.run_batch(&[Event::reference(Kind::Load, 0x2000, 8).with_asid(1)]);
        let w = m.walker().unwrap().json();
        let per_level = |j: &serde_json::Value, k: &str| -> Vec<u64> {
            j["levels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l[k].as_u64().unwrap())
                .collect()
        };
        assert_eq!(w["cache"], "memory");
        assert_eq!(per_level(&w, "refs"), [1, 1, 1, 1]);
        assert_eq!(per_level(&w, "misses"), [1, 1, 1, 1]);
        assert_eq!(w["cycles"]["cache_penalty"], 4 * 15);
        let j = m.memory().unwrap().json();
        assert_eq!(j["caches"][0]["reads"], 4 + 1);
        assert_eq!(j["caches"][0]["read_misses"], 4 + 1);
        assert_eq!(j["system"]["stalls"]["dcache"], 4 * 15);
        assert_eq!(j["user"]["stalls"]["dcache"], 15);
        let walk = &j["tlb_handlers"]["walk"];
        assert_eq!(
            (walk["misses"].clone(), walk["stall_cycles"].clone()),
            (1.into(), 60.into())
        );
        // The next page: its leaf entry (8 bytes on, at 24) shares the first one's 16-byte
        // line, the upper entries are the same: 4 loads, all hits.
        m.run_batch(&[Event::reference(Kind::Load, 0x3000, 8).with_asid(1)]);
        let w = m.walker().unwrap().json();
        assert_eq!(per_level(&w, "refs"), [2, 2, 2, 2]);
        assert_eq!(per_level(&w, "misses"), [1, 1, 1, 1]);
        assert_eq!(w["cycles"]["cache_penalty"], 60);
        let j = m.memory().unwrap().json();
        assert_eq!(j["tlb_handlers"]["walk"]["misses"], 2);
        assert_eq!(j["system"]["stalls"]["dcache"], 60);
        // Both sections in the result.
        let r = crate::report::result_json(&m, &crate::report::TraceInfo::default());
        assert_eq!(r["pagetable"]["walks"], 2);
        assert_eq!(r["memory"]["tlb_handlers"]["walk"]["misses"], 2);
        let text = crate::report::table(&r);
        assert!(
            text.contains("walk") && text.contains("(2 misses"),
            "{text}"
        );
    }

    #[test]
    fn pages_a_table_cannot_hold_are_refused() {
        let build = |pages: &str, pt: &str| {
            Machine::assemble(
                Some(&format!(
                    "{pages}\n[[tlb]]\nname='t'\nentries=4\npage=['4K', '2M']\n[pagetable]\n{pt}\n"
                )),
                "m.toml",
                &[],
                &[],
            )
        };
        let big = "[pages]\nsize = '2M'";
        let region = "[pages]\n[[pages.regions]]\nstart=0\nend=0x40000000\nsize='2M'";
        for (pt, holder) in [
            ("organisation='hashed'", "a hashed page table holds"),
            (
                "organisation='inverted'\nrefill='software'",
                "an inverted page table holds",
            ),
            (
                "organisation='swtlb'\nrefill='software'",
                "a software TLB holds",
            ),
        ] {
            // A table of one page size maps the machine's pages when they are all 2 MiB...
            let mut m = build(big, pt).unwrap();
            m.run_batch(&[Event::reference(Kind::Load, 0x20_0000, 8).with_asid(1)]);
            let w = m.walker().unwrap();
            assert_eq!(w.base_shift(), 21);
            assert_eq!(w.json()["table"]["mapped_bytes"], 2 << 20, "{pt}");
            // ...but not 2 MiB pages beside 4 KiB ones.
            let e = build(region, pt).unwrap_err().to_string();
            assert!(
                e.contains("pages.regions[0].size: 2M pages with [pagetable]: ")
                    && e.contains(&format!("{holder} pages of one size, 4K on this machine"))
                    && !e.contains('\n'),
                "{e}"
            );
        }
        // A hybrid fronts a radix table of 4 KiB leaves, which maps 2 MiB at a level of its
        // own (x86-64's), not a 2-level table's (4 MiB at its root).
        let e = build(big, "organisation='hybrid'").unwrap_err().to_string();
        assert!(
            e.contains("a hybrid's HPT cache holds pages of one size, 4K"),
            "{e}"
        );
        assert!(build(big, "organisation='radix'\nlevels=4").is_ok());
        let e = build(big, "organisation='radix'").unwrap_err().to_string();
        assert!(e.contains("levels map 4K, 4M pages"), "{e}");
    }

    /// A machine has one physical memory: its size is given once, in `[memory]` or
    /// `[pagetable]`, and the other section takes it; two sizes, an identity mapping (frames
    /// that are page numbers), a VAC beside a memory system (two data paths) and VAC pages
    /// smaller than the table's are refused, each saying why.
    #[test]
    fn a_machine_has_one_physical_memory() {
        let machine = |pagetable: &str, memory: &str| {
            Machine::assemble(
                Some(&format!(
                    "[[tlb]]\nname='t'\nentries=4\n[pagetable]\norganisation='inverted'\nrefill='software'\n{pagetable}\n[memory]\n{memory}\n[memory.dcache]\nsize='1KiB'\nline=16\nmiss_cycles=15\n"
                )),
                "m.toml",
                &[],
                &[],
            )
        };
        for (pagetable, memory) in [
            ("memory='1MiB'", ""),
            ("", "memory='1MiB'"),
            ("memory='1MiB'", "memory='1MiB'"),
        ] {
            let m = machine(pagetable, memory).unwrap();
            assert_eq!(
                m.walker().unwrap().json()["table"]["memory"],
                1 << 20,
                "{pagetable} {memory}"
            );
            assert_eq!(
                m.memory().unwrap().memory_bytes(),
                1 << 20,
                "{pagetable} {memory}"
            );
        }
        let both = machine("memory='1MiB'", "memory='2MiB'")
            .unwrap_err()
            .to_string();
        assert!(
            both.contains("pagetable.memory") && both.contains("one physical memory"),
            "{both}"
        );
        let identity = machine("", "mapping='identity'").unwrap_err().to_string();
        assert!(identity.contains("memory.mapping"), "{identity}");
        // A VAC is a data path of its own; its pages must hold the table's. (`pages`: the
        // machine's page size, `org` its table's organisation, `extra` after the VAC.)
        let with_vac = |pages: &str, org: &str, extra: &str| {
            Machine::assemble(
                Some(&format!("[[tlb]]\nname='t'\nentries=4\n[pages]\nsize='{pages}'\n[pagetable]\norganisation='{org}'\n[vac]\nsize='16KiB'\n{extra}")),
                "m.toml",
                &[],
                &[],
            )
            .map_err(|e| e.to_string())
        };
        let vac = |extra: &str| with_vac("4KiB", "radix", extra);
        let small = vac("").unwrap_err();
        assert!(
            small.contains("vac.page: 2048-byte VAC pages, but the page table's pages are 4K")
                && small.contains("pages.size = \"2K\"")
                && !small.contains("not yet"),
            "{small}"
        );
        assert!(vac("page='4KiB'\n").is_ok());
        // The HP 9000/834: 2 KiB pages, the VAC's and a hashed table's.
        let hp = |pages: &str| with_vac(pages, "hashed", "");
        assert_eq!(hp("2KiB").unwrap().walker().unwrap().base_shift(), 11);
        // Pages larger than the VAC's would span two of its frames.
        let large = hp("4KiB").unwrap_err();
        assert!(large.contains("vac.page: 2048-byte"), "{large}");
        let two =
            vac("page='4KiB'\n[memory]\n[memory.dcache]\nsize='1KiB'\nline=16\nmiss_cycles=15\n")
                .unwrap_err();
        assert!(
            two.contains("memory") && two.contains("[memory] together with [vac]"),
            "{two}"
        );
    }

    #[test]
    fn page_tables_with_memory_name_what_is_refused() {
        let e = |extra: &str| {
            Machine::assemble(
                Some(&format!(
                    "[[tlb]]\nname='t'\nentries=4\n[pagetable]\norganisation='hashed'\n{extra}\n{MEMORY}{}",
                    if extra.is_empty() { "[memory.handler]\ncode = 0x80000000\npage_table = 0xc0000000\nroot_table = 0x80100000\n" } else { "" }
                )),
                "m.toml",
                &[],
                &[],
            )
            .unwrap_err()
            .to_string()
        };
        let d = e("data_refs = true");
        assert!(d.contains("pagetable.data_refs"), "{d}");
        let c = e("[pagetable.cache]\nsize = \"64K\"");
        assert!(c.contains("pagetable.cache: with [memory]"), "{c}");
        let h = e("");
        assert!(
            h.contains("memory.handler: with [pagetable]") && !h.contains("not yet"),
            "{h}"
        );
    }

    /// Pages of two sizes on one memory system: a 2 MiB page's parts are consecutive frames,
    /// so a direct-mapped cache of 64 KiB holds 16 of its parts at one offset without a
    /// conflict, whatever the mapping (scattered 4 KiB frames would collide); memory too
    /// small for a large page, and a kernel-half region for one address space, are refused.
    #[test]
    fn a_memory_system_maps_large_pages_as_runs() {
        let build = |memory: &str, regions: &str| {
            Machine::assemble(
                Some(&format!(
                    "[[tlb]]\nname='t'\nentries=64\npage=['4K', '2M']\n[pagetable]\norganisation='radix'\nlevels=4\n[pages]\nregions=[{regions}]\n[memory]\nmapping='random'\nmemory='{memory}'\n[memory.dcache]\nsize='64KiB'\nline=16\nmiss_cycles=15\n"
                )),
                "m.toml",
                &[],
                &[],
            )
        };
        let large = "{start=0x40000000, end=0x40400000, size='2M'}";
        let mut m = build("64MiB", large).unwrap();
        let parts: Vec<Event> = (0..16u64)
            .map(|k| Event::reference(Kind::Load, 0x4020_0000 + 0x3_0000 + (k << 12) + 0x40, 8))
            .collect();
        m.run_batch(&parts);
        m.run_batch(&parts);
        let j = m.memory().unwrap().json();
        let user = j["caches"][0]["read_misses"].as_u64().unwrap();
        let walks = m.walker().unwrap().stats().walks;
        // 16 cold misses of the program, and the walk's table references (which may take
        // a line of their own).
        assert!((16..=16 + 4 * walks).contains(&user), "{j}");
        let memory = m.memory().unwrap();
        let first = memory.frame_given(0, 0x4020_0000, 12).unwrap();
        assert_eq!(first % 512, 0);
        for k in 0..512 {
            assert_eq!(
                memory.frame_given(0, 0x4020_0000 + (k << 12), 12),
                Some(first + k)
            );
        }
        let e = build("1MiB", large).unwrap_err().to_string();
        assert!(
            e.contains("pages.regions[0].size: 2M pages in 1.0 MiB of memory"),
            "{e}"
        );
        let e = build(
            "64MiB",
            "{start='0xffff800000000000', end='0xffff800000400000', size='2M', asid=3}",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("pages.regions[0].asid") && e.contains("kernel half"),
            "{e}"
        );
    }

    /// A random stream of unmaps, switches, stores and loads: `(op, page, address space)`.
    fn events(raw: &[(u8, u16, u8)]) -> Vec<Event> {
        raw.iter()
            .map(|&(op, page, asid)| match op {
                0 => Event::control(Kind::Unmap, (page as u64) << 12, asid as u32),
                1 => Event::control(Kind::ContextSwitch, 0, asid as u32),
                2 => Event::reference(Kind::Store, (page as u64) << 12, 8).with_asid(asid as u32),
                _ => Event::reference(Kind::Load, ((page as u64) << 12) | 0x10, 8)
                    .with_asid(asid as u32),
            })
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// One physical memory: on a machine with a memory system, every page the walker's
        /// table maps is in the frame the memory system gives it — the frame its data reaches
        /// the caches in — whatever the page mapping, the organisation, unmaps, and a memory
        /// small enough to hand frames out again (16 to 64 frames for up to 192 pages). Hashed
        /// and inverted tables map the machine's pages (2, 4 or 8 KiB); radix tables, and the
        /// hybrid over one, 4 KiB.
        #[test]
        fn the_walker_maps_pages_where_the_caches_see_them(
            raw in proptest::collection::vec((0u8..8, 0u16..64, 0u8..3), 1..300),
            org in proptest::sample::select(&["radix", "hashed", "inverted", "hybrid", "swtlb"][..]),
            mapping in proptest::sample::select(&["deterministic", "random", "bin-hopping", "sequential"][..]),
            preload in proptest::sample::select(&[0.0, 0.5][..]),
            page in proptest::sample::select(&[11u32, 12, 13][..]),
        ) {
            let page = if matches!(org, "radix" | "hybrid") { 12 } else { page };
            let evs = events(&raw);
            let text = format!(
                "[[tlb]]\nname='t'\nentries=8\npolicy='lru'\n[pages]\nsize={}\n[pagetable]\norganisation='{org}'\nrefill='software'\nspace_ids='asid'\nratio=1\npreload={preload}\n[memory]\nmapping='{mapping}'\nmemory=65536\n[memory.dcache]\nsize='1KiB'\nline=16\nmiss_cycles=15\n",
                1u64 << page
            );
            let mut m = Machine::assemble(Some(&text), "m.toml", &[], &[]).unwrap();
            m.run_batch(&evs);
            let (walker, memory) = (m.walker().unwrap(), m.memory().unwrap());
            proptest::prop_assert_eq!(walker.base_shift(), page);
            for ((space, vpn), frame) in walker.frames.pages() {
                proptest::prop_assert_eq!(Some(frame), memory.frame_given(space, vpn << page, page), "page {:#x} of space {:#x}", vpn, space);
            }
            proptest::prop_assert_eq!(walker.stats().unmappable, 0);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// One physical memory with pages of two sizes: a 2 MiB page is an aligned run of the
        /// memory system's frames, and the walker maps it at the run's first frame, so every
        /// page of either size is where its data reaches the caches — with each page mapping,
        /// unmaps, and a memory small enough that runs run out (4 MiB: two runs).
        #[test]
        fn large_pages_are_runs_of_the_memorys_frames(
            raw in proptest::collection::vec((0u8..8, 0u16..64, 0u8..3), 1..300),
            mapping in proptest::sample::select(&["deterministic", "random", "bin-hopping", "sequential"][..]),
            memory in proptest::sample::select(&["4MiB", "64MiB"][..]),
            preload in proptest::sample::select(&[0.0, 0.25][..]),
        ) {
            // Pages 64 KiB apart over 4 MiB: the first 2 MiB in 4 KiB pages, the next two
            // 2 MiB pages.
            let evs: Vec<Event> = events(&raw)
                .into_iter()
                .map(|mut e| {
                    e.addr = (e.addr >> 12) << 16 | (e.addr & 0xfff);
                    e
                })
                .collect();
            let text = format!(
                "[[tlb]]\nname='t'\nentries=8\npage=['4K', '2M']\n[pagetable]\norganisation='radix'\nlevels=4\nspace_ids='asid'\npreload={preload}\n[pages]\nregions=[{{start=0x200000, end=0x600000, size='2M'}}]\n[memory]\nmapping='{mapping}'\nmemory='{memory}'\n[memory.dcache]\nsize='64KiB'\nline=16\nmiss_cycles=15\n"
            );
            let mut m = Machine::assemble(Some(&text), "m.toml", &[], &[]).unwrap();
            m.run_batch(&evs);
            let (walker, memory) = (m.walker().unwrap(), m.memory().unwrap());
            // (The preloaded pages of spaces no trace names are base pages wherever they lie.)
            for ((space, vpn), frame) in walker.frames.pages().into_iter().filter(|p| p.0 .0 < super::BACKGROUND) {
                let addr = vpn << 12;
                proptest::prop_assert_eq!(Some(frame), memory.frame_given(space, addr, 12), "page {:#x} of space {:#x}", vpn, space);
                if (0x20_0000..0x60_0000).contains(&addr) {
                    proptest::prop_assert_eq!(frame % 512, 0, "2 MiB page {:#x} at frame {:#x}", addr, frame);
                    // Its every part is the run's next frame.
                    for part in [1u64, 17, 511] {
                        proptest::prop_assert_eq!(memory.frame_given(space, addr + (part << 12), 12), Some(frame + part));
                    }
                }
            }
            proptest::prop_assert_eq!(walker.stats().unmappable, 0);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// Per process, a user page is its address space's own and a kernel-half page is one
        /// page of every space: with memory to spare and nothing unmapped, each organisation
        /// faults exactly once per distinct (space, page), a kernel page counting once
        /// whoever touches it (brute force: a set of `mapping_space` keys).
        #[test]
        fn a_page_faults_once_per_space_that_owns_it(
            raw in proptest::collection::vec((0u8..8, 0u16..64, 0u8..4), 1..300),
            org in proptest::sample::select(&[
                "organisation='radix'\nlevels=4",
                "organisation='hashed'",
                "organisation='inverted'\nrefill='software'",
                "organisation='hybrid'\nlevels=4\nentries=16",
                "organisation='swtlb'\nbehind='hashed'\nentries=16",
            ][..]),
        ) {
            let addr = |page: u16| if page < 32 {
                (page as u64) << 12
            } else {
                0xffff_8880_0000_0000 + ((page as u64) << 12)
            };
            let evs: Vec<Event> = raw.iter().map(|&(op, page, asid)| match op {
                0 => Event::control(Kind::ContextSwitch, 0, asid as u32),
                1 => Event::reference(Kind::Store, addr(page), 8).with_asid(asid as u32),
                _ => Event::reference(Kind::Load, addr(page) | 0x10, 8).with_asid(asid as u32),
            }).collect();
            let text = format!(
                "[[tlb]]\nname='t'\nentries=8\npolicy='lru'\n[pagetable]\n{org}\nmemory='4MiB'\n"
            );
            let mut m = Machine::assemble(Some(&text), "m.toml", &[], &[]).unwrap();
            m.run_batch(&evs);
            let owned: std::collections::HashSet<(u32, u64)> = evs
                .iter()
                .filter(|e| e.kind.is_ref())
                .map(|e| (crate::cache::system::mapping_space(e.asid, e.addr), e.addr >> 12))
                .collect();
            let j = m.walker().unwrap().json();
            proptest::prop_assert_eq!(j["unmappable"].as_u64(), Some(0));
            proptest::prop_assert_eq!(j["faults"].as_u64(), Some(owned.len() as u64));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

        /// The memory system changes no translation result: TLB and walk counts and faults
        /// are those of the machine without it, with as much memory, and so are the chains
        /// of the organisations whose walks do not depend on which frame holds a page (an
        /// inverted table's do); the walks it saw are the walks taken, and every table
        /// reference reached its data cache.
        #[test]
        fn memory_changes_no_walk_count(
            raw in proptest::collection::vec((0u8..8, 0u16..64, 0u8..3), 1..300),
            org in proptest::sample::select(&["radix", "hashed", "inverted", "hybrid", "swtlb"][..]),
        ) {
            let evs = events(&raw);
            // 1024 frames: more than the faults, so that neither memory hands a frame out
            // twice; 16 head buckets or anchors, so that chains form.
            let text = |memory: &str| format!(
                "[[tlb]]\nname='t'\nentries=8\npolicy='lru'\n[pagetable]\norganisation='{org}'\nrefill='software'\nratio=0.015625\n{memory}"
            );
            let mut plain = Machine::assemble(Some(&text("memory='4MiB'")), "m.toml", &[], &[]).unwrap();
            let mut cached = Machine::assemble(Some(&text(&MEMORY.replace("[memory]\n", "[memory]\nmemory = '4MiB'\n"))), "m.toml", &[], &[]).unwrap();
            plain.run_batch(&evs);
            cached.run_batch(&evs);
            let (a, b) = (plain.walker().unwrap().json(), cached.walker().unwrap().json());
            for k in ["walks", "faults", "unmappable"] {
                proptest::prop_assert_eq!(&a[k], &b[k], "{}", k);
            }
            if !matches!(org, "inverted" | "swtlb") {
                for k in ["chain", "head_hits", "second_way"] {
                    proptest::prop_assert_eq!(&a[k], &b[k], "{}", k);
                }
            }
            proptest::prop_assert_eq!(&a["cycles"]["basic"], &b["cycles"]["basic"]);
            let refs = |j: &serde_json::Value| -> u64 {
                j["levels"].as_array().unwrap().iter().map(|l| l["refs"].as_u64().unwrap()).sum()
            };
            proptest::prop_assert_eq!(refs(&a), refs(&b));
            let (ta, tb) = (plain.ledger().total(0, |_, _, _| true), cached.ledger().total(0, |_, _, _| true));
            proptest::prop_assert_eq!((ta.accesses, ta.misses), (tb.accesses, tb.misses));
            let j = cached.memory().unwrap().json();
            proptest::prop_assert_eq!(&j["tlb_handlers"]["walk"]["misses"], &b["walks"]);
            let program = evs.iter().filter(|e| e.kind.is_ref()).count() as u64;
            let d = &j["caches"][0];
            proptest::prop_assert_eq!(
                d["reads"].as_u64().unwrap() + d["writes"].as_u64().unwrap(),
                program + refs(&b)
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 16, ..Default::default() })]

        /// Whatever the sharing, the aliased model takes exactly the frames of the global one
        /// (memory large enough that nothing is reclaimed): one per page of the program, not
        /// one per alias.
        #[test]
        fn both_sharing_models_take_the_same_frames(
            users in 1u32..8,
            shared in 0u32..100,
            shm in 1u32..64,
            text in 1u32..32,
            seed in 0u64..1000,
            org in proptest::sample::select(&["radix", "hybrid", "hashed"][..]),
        ) {
            let w = format!(
                "workload:multiuser,users={users},shared={shared},shm_pages={shm},text_pages={text},slices=24,quantum=500,seed={seed}"
            );
            let g = on_workload(&w, "organisation='hashed'\naddresses='global'");
            let a = on_workload(&format!("{w},addresses=per-process"), &format!("organisation='{org}'"));
            proptest::prop_assert_eq!(&a["frames_allocated"], &g["frames_allocated"]);
            proptest::prop_assert_eq!(&a["frames_reclaimed"], &serde_json::json!(0));
            proptest::prop_assert_eq!(&g["faults"], &g["frames_allocated"]);
        }
    }

    /// Machines whose pages are at most 32 GiB keep the pool they always had: a large page in
    /// frame f lies at 2^60 + f × 2^35, whatever its size.
    #[test]
    fn the_pool_of_large_pages_keeps_its_32_gib_slots() {
        for largest in [12, 21, 30, 35] {
            let pool = super::LargePool::new(largest, (1 << 28, 12)).unwrap();
            for f in [0u64, 1, 511, (1 << 28) - 1] {
                assert_eq!(
                    pool.slot(f),
                    (1 << 60) + (f << 35),
                    "2^{largest}, frame {f}"
                );
            }
        }
    }

    proptest::proptest! {
        /// The pool of large pages against its definition, computed in 128 bits: slots of
        /// the largest page (at least 32 GiB) from the first multiple of a slot at or above
        /// 2^60, one per frame. A memory is refused exactly when its last slot would end past
        /// 2^64; otherwise every frame's slot is aligned to the largest page, above 2^60 (every
        /// frame and table), apart from the next frame's, and ends by 2^64.
        #[test]
        fn the_pool_of_large_pages_fits_below_2_64(
            largest in 12u32..64,
            frames in proptest::prop_oneof![1u64..64, 1u64..=1 << 28],
            pick in 0.0f64..1.0,
        ) {
            let slot = largest.max(35);
            let start = (1u128 << 60).max(1u128 << slot);
            let fits = start + ((frames as u128) << slot) <= 1u128 << 64;
            let pool = super::LargePool::new(largest, (frames, 12));
            proptest::prop_assert_eq!(pool.is_ok(), fits, "{:?}", pool);
            let Ok(pool) = pool else { return Ok(()) };
            let f = ((frames - 1) as f64 * pick) as u64;
            for f in [0, f, frames - 1] {
                let at = pool.slot(f) as u128;
                proptest::prop_assert_eq!(at, start + ((f as u128) << slot));
                proptest::prop_assert_eq!(at % (1u128 << largest), 0);
                proptest::prop_assert!(at >= 1 << 60);
                proptest::prop_assert!(at + (1u128 << largest) <= 1u128 << 64);
                if f + 1 < frames {
                    proptest::prop_assert!(pool.slot(f + 1) as u128 >= at + (1u128 << largest));
                }
            }
        }
    }

    #[test]
    fn bad_page_tables_name_the_key() {
        for (pt, key) in [
            ("organisation='tree'", "pagetable.organisation"),
            ("organisation='hashed'\nratio=3", "pagetable.ratio"),
            ("organisation='inverted'", "pagetable.refill"),
            ("organisation='hashed'\nways=3", "pagetable.ways"),
            ("organisation='radix'\nlevels=3", "pagetable.levels"),
            ("organisation='radix'\nways=2", "pagetable.ways"),
            (
                "organisation='hashed'\ncycles={hw_hbt=1}",
                "pagetable.cycles.hw_hbt",
            ),
            ("organisation='hashed'\ncosts='vax'", "pagetable.costs"),
            (
                "organisation='hashed'\nchaining='open'",
                "pagetable.chaining",
            ),
            ("organisation='hashed'\ncompare='both'", "pagetable.compare"),
            ("organisation='hashed'\nmemory='lots'", "memory"),
            (
                "organisation='radix'\nlevels=4\npsc=[{level=3,entries=4}]",
                "pagetable.psc[0].level",
            ),
            (
                "organisation='swtlb'\nrefill='software'\nbehind='swtlb'",
                "pagetable.behind",
            ),
            (
                "organisation='hashed'\n[pagetable.cache]\nline=24",
                "pagetable.cache.line",
            ),
            (
                "organisation='hashed'\naddresses='flat'",
                "pagetable.addresses",
            ),
            (
                "organisation='radix'\nbits=[7, 7, 6]",
                "pagetable.entry_bytes",
            ),
        ] {
            let e = machine(pt).unwrap_err().to_string();
            assert!(e.contains(key), "{pt}: {e}");
        }
    }
}
