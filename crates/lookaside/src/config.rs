//! The machine description: the single source of truth for what a simulated machine is.
//!
//! Configuration is two-phase (as in ripgrep's low/high args): this module only *reads* raw
//! values — from TOML text, `--set key=value` overrides and DineroIV-style `--tlb` flags, all
//! funnelled through one TOML table so they share one schema and one set of messages — and
//! [`crate::machine::Machine::build`] validates them and derives everything the hot path
//! needs. Nothing here runs per reference.
//!
//! ```toml
//! [machine]
//! name = "modern-x86"
//! seed = 1                 # seeds random replacement
//! straddle = "split"       # an access crossing a page touches both pages ("first": only the first)
//! global_above = "0xffff800000000000"   # pages at/above are global (shared by all address spaces)
//!
//! [pages]
//! size = "4k"              # the page size that backs every address unless a region says otherwise
//! regions = [ { start = "0x7f0000000000", end = "0x7f0040000000", size = "2M" },
//!             { start = "0x80000000", end = "0xc0000000", size = "unmapped" },
//!             { kernel = "direct_map", size = "unmapped" } ]   # a class of the trace's
//!                          # kernel layout (direct_map, text, modules, vmalloc, vmemmap,
//!                          # fixmap, cpu_entry_area): see crate::trace::kernel
//!
//! [[tlb]]
//! name = "dtlb"
//! entries = 64
//! ways = 4                 # or "full"
//! policy = "lru"           # lru | fifo | random | plru | nru
//! page = ["4k", "2M"]      # sizes this structure holds (default: [pages.size])
//! serves = "data"          # instruction | data | unified (default: from the name's first
//!                          # letter, i: instruction, d: data, else unified)
//! next = "stlb"            # consulted on a miss; absent = the miss goes to the page-table walk;
//!                          # a list names siblings holding different page sizes
//! asid = true              # entries tagged by address space; false = flushed on every switch
//! partition = { lower = 8, lower_policy = "fifo", upper_policy = "random" }
//! placement = "upper"      # which partition a fill goes to: upper | kernel-lower
//!                          # partition.dynamic = { period = 1000, threshold = 0.05,
//!                          #   step = 1, min_lower = 1, max_lower = ways - 1 }: Uhlig's
//!                          # dynamic partitioning, moving the point every `period` events
//!                          # (traps with [refill], else misses of this structure) by the
//!                          # cost (trap cycles; walk cycles; or those misses)
//!
//! [refill]                 # present: software refill of the one TLB (MIPS R2000 model)
//! levels = 3               # 3: Mach 3.0 / OSF/1 (mapped L2 tables, unmapped L3 root); 2: Ultrix
//! placement = "A"          # PTE placement policy (Uhlig Table VIII): A | B | C | D
//! costs = "mach3"          # a shipped cost table (Table III column or a vector variant)
//! cycles = { L1K = 20 }    # per-trap overrides of the cost table, in cycles
//! # cycle_ns = 60          # override the table's cycle time
//! invalid_on_first_touch = "user"   # user | all | none: which pages fault when first touched
//! read_fault_maps = "clean"         # clean | dirty: a page first read is mapped clean, so its
//!                                   # first write raises a Modify trap
//! fold_user_addresses = false       # fold user addresses above kuseg into it (64-bit traces)
//! addresses = "mips"       # what the trace's addresses are: "mips" (the MIPS segments) or
//!                          # "x86-64": a 64-bit whole-system trace mapped onto them (user
//!                          # pages fold into kuseg; the kernel classes [pages] declares
//!                          # unmapped are kseg0, every other class of the trace's
//!                          # kernel_layout is mapped kernel data in kseg2: crate::mmu::addresses)
//! [refill.stlb]            # Bala's software TLB of kernel translations (unmapped memory)
//! entries = 1024
//! ways = 1                 # 1 or 2
//! index = "low"            # low page-number bits, or "hash"
//! classes = ["L1K", "L2", "L3"]
//! [refill.prefetch]        # Bala's IPC-path prefetch, at every switch of address space
//! l2_entries = 3           # the receiver's most recent L1 page-table pages (at most 8)
//! l1u_entries = 0          # its most recently missed user pages (at most 8)
//! l1k_entries = 0          # the kernel data pages it most recently missed on (at most 8)
//!
//! [prefetch]               # Bala's IPC-path prefetch on a walked machine (not [refill]):
//! user_entries = 4         # at each switch, the receiver's most recently walked user and
//! kernel_entries = 0       # kernel entries (at most 8 each), inserted where absent
//!
//! [pagetable]              # present: TLB misses walk a page table (Huck & Hays; x86-64)
//! organisation = "hashed"  # radix | inverted | hashed | hybrid | swtlb
//! memory = "32M"           # physical memory: one frame per 4 KiB (FIFO reuse when full)
//! refill = "hardware"      # hardware | software
//! addresses = "per-process" # per-process: (address space, address); global: the upper 32
//!                          # address bits are the space id (one TLB entry serves all sharers)
//! space_ids = "random"     # random | asid: how the OS numbers per-process spaces
//! ratio = 2                # hashed: head buckets per frame; inverted: HAT anchors per frame
//! ways = 1                 # hashed, hybrid: entries per head bucket (1 or 2); swtlb: ways
//!                          # of its sets (1 or 2, default 2)
//! compare = "serial"       # 2-way: serial (+2 cycles for the second way) | parallel
//! chaining = "free"        # hashed: free (unused table entries) | overflow (separate area)
//! move_to_head = false     # hashed: a page found down the chain moves to the head bucket
//! levels = 2               # radix (and behind a hybrid): 2 = 2 × 10 bits, 4-byte entries
//!                          # (32-bit spaces); 4 or 5 = x86-64, 9 bits, 8-byte entries
//! bits = [10, 10]          # radix: explicit bits per level, root first, with
//!                          # entry_bytes (required: 4, 8 or 16 bytes)
//! psc = [{ level = 0, entries = 4, ways = 4 }]  # radix: paging-structure caches
//! entries = 8192           # hybrid: HPT-cache entries; swtlb: software-TLB entries
//! behind = "inverted"      # hybrid, swtlb: the table behind (radix | inverted | hashed;
//!                          # default radix for a hybrid, inverted for a swtlb)
//! costs = "huck93"         # handler cycle costs (crate data/walk-costs)
//! cycles = { hw_hpt = 9 }  # overrides of the cost table
//! data_refs = false        # the program's loads and stores also go through the data cache
//! preload = 0.0            # fraction of memory mapped at the start to other processes' pages
//! [pagetable.cache]        # the data cache every table reference goes through
//! size = "256K"            # 0: none (every reference hits)
//! line = 32
//! ways = 1                 # 0: fully associative
//! policy = "lru"
//! ```

use schemars::JsonSchema;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use crate::cache::vac::{drive::FirstTouch as VacFirstTouch, Indexing};
use crate::cache::WritePolicy;
use crate::error::{Error, Result};
use crate::tlb::Policy;
use crate::trace::kernel::KernelClass;
use crate::vm::Mapping;

/// A whole machine.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    #[serde(default)]
    pub machine: MachineSection,
    #[serde(default)]
    pub pages: PageSection,
    #[serde(default, rename = "tlb")]
    pub tlbs: Vec<TlbConfig>,
    /// The cache hierarchy of `[[cache]]` tables: DineroIV's model of caches, addressed by
    /// the references' virtual addresses ([`crate::cache::hier`]).
    #[serde(default, rename = "cache", skip_serializing_if = "Vec::is_empty")]
    pub caches: Vec<CacheSpec>,
    /// Present: the TLB is refilled by software miss handlers over the MIPS/Mach page table
    /// (the software-managed-TLB model of [`crate::mmu`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refill: Option<RefillConfig>,
    /// Present: the memory system behind translation — caches, write buffer, page mapping and
    /// MCPI accounting ([`crate::cache::system`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryConfig>,
    /// Present: the last-level TLB's misses walk this page table (see [`crate::pagetable`]
    /// and [`crate::mmu::Walker`]), each walk's references going through a data cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pagetable: Option<PageTableConfig>,
    /// Present: a virtually addressed data cache under an OS that keeps it consistent
    /// (Inouye et al.; [`crate::cache::vac::drive`]), fed the data references and the VM
    /// events of the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vac: Option<VacConfig>,
    /// Present: Bala's IPC-path prefetching on a machine whose misses are walked
    /// ([`crate::machine`]'s prefetcher; with `[refill]` it is `[refill.prefetch]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<SwitchPrefetchConfig>,
}

/// Bala's IPC-path prefetching on a machine whose TLB misses are walked: at every switch of
/// address space, the receiver's most recently walked entries are probed for in the
/// structures that missed them and inserted where absent.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchPrefetchConfig {
    /// Entries of pages the receiver walked to in user mode, per switch (at most 8).
    #[serde(default)]
    pub user_entries: usize,
    /// Entries of pages it walked to in kernel mode, per switch (at most 8).
    #[serde(default)]
    pub kernel_entries: usize,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MachineSection {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default)]
    pub straddle: Straddle,
    /// Pages at or above this virtual address get global entries.
    #[serde(
        default,
        deserialize_with = "opt_addr",
        serialize_with = "ser_opt_addr",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "schema::address")]
    pub global_above: Option<u64>,
}

fn default_seed() -> u64 {
    1
}

impl Default for MachineSection {
    fn default() -> Self {
        MachineSection {
            name: String::new(),
            description: String::new(),
            seed: default_seed(),
            straddle: Straddle::default(),
            global_above: None,
        }
    }
}

/// What an access that crosses a page boundary does.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Straddle {
    /// Translate both pages (two TLB accesses), as hardware does.
    #[default]
    Split,
    /// Translate only the page of the first byte.
    First,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageSection {
    #[serde(default = "default_page")]
    pub size: PageSize,
    #[serde(default)]
    pub regions: Vec<Region>,
}

fn default_page() -> PageSize {
    PageSize::Size(4096)
}

impl Default for PageSection {
    fn default() -> Self {
        PageSection {
            size: default_page(),
            regions: Vec::new(),
        }
    }
}

/// A virtual-address range `[start, end)` backed by pages of `size` (or not translated); or,
/// instead of `start` and `end`, a class of the traced kernel's addresses (`kernel =
/// "direct_map"`, see [`KernelClass`]), whose range the trace's `kernel_layout` metadata
/// gives when the machine runs it (`size = "unmapped"` only: a machine like the MIPS
/// R3000, whose kernel reaches kseg0 outside the TLB, says which x86-64 kernel ranges play
/// that part, whatever numbers the trace's kernel gave them).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Region {
    #[serde(
        default,
        deserialize_with = "opt_addr",
        serialize_with = "ser_opt_addr",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "schema::address")]
    pub start: Option<u64>,
    #[serde(
        default,
        deserialize_with = "opt_addr",
        serialize_with = "ser_opt_addr",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "schema::address")]
    pub end: Option<u64>,
    /// A class of kernel addresses, in place of `start` and `end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelClass>,
    pub size: PageSize,
    /// Only this address space (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asid: Option<u32>,
}

/// A page size in bytes (a power of two), or `unmapped` (the address bypasses translation,
/// like MIPS kseg0/kseg1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageSize {
    Size(u64),
    Unmapped,
}

impl PageSize {
    /// Parse `4k`, `4K`, `4KiB`, `2M`, `1G`, `8192` or `unmapped` (sizes are powers of two of at
    /// least 2 bytes).
    pub fn parse(s: &str) -> std::result::Result<PageSize, String> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("unmapped") {
            return Ok(PageSize::Unmapped);
        }
        match parse_bytes(t) {
            Some(n) if n >= 2 && n.is_power_of_two() => Ok(PageSize::Size(n)),
            _ => Err(format!("'{s}' is not a page size (e.g. 4k, 2M, 1G)")),
        }
    }

    /// A page size given as a number of bytes.
    fn from_int(n: i64) -> std::result::Result<PageSize, String> {
        match u64::try_from(n) {
            Ok(n) if n >= 2 && n.is_power_of_two() => Ok(PageSize::Size(n)),
            _ => Err(format!(
                "{n} is not a page size (a power of two of at least 2 bytes, e.g. 4096)"
            )),
        }
    }

    /// log2 of the size; `None` when unmapped.
    pub fn shift(self) -> Option<u32> {
        match self {
            PageSize::Size(n) => Some(n.trailing_zeros()),
            PageSize::Unmapped => None,
        }
    }

    /// Human form: `4K`, `2M`, `1G`, `512` or `unmapped`.
    pub fn label(self) -> String {
        match self {
            PageSize::Unmapped => "unmapped".into(),
            PageSize::Size(n) if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{}G", n >> 30),
            PageSize::Size(n) if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
            PageSize::Size(n) if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
            PageSize::Size(n) => n.to_string(),
        }
    }
}

impl Serialize for PageSize {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.label())
    }
}

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Str(s) => PageSize::parse(&s).map_err(de::Error::custom),
            StrOrInt::Int(n) => PageSize::from_int(n).map_err(de::Error::custom),
        }
    }
}

/// An integer or a string (sizes, associativities, addresses), with a clear message for
/// anything else.
enum StrOrInt {
    Int(i64),
    Str(String),
}

impl<'de> Deserialize<'de> for StrOrInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = StrOrInt;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer or a string")
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<StrOrInt, E> {
                Ok(StrOrInt::Int(n))
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<StrOrInt, E> {
                i64::try_from(n)
                    .map(StrOrInt::Int)
                    .map_err(|_| E::custom(format!("{n} is too large")))
            }

            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<StrOrInt, E> {
                Ok(StrOrInt::Str(s.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Parse a byte count: `64k`, `64K`, `64KiB`, `64KB`, `2M`, `1G`, `8192` (binary units).
/// `None` when it is not one (or overflows).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let lower = s.trim().to_ascii_lowercase();
    let body = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, mult) = match body.chars().last() {
        Some('k') => (&body[..body.len() - 1], 1u64 << 10),
        Some('m') => (&body[..body.len() - 1], 1 << 20),
        Some('g') => (&body[..body.len() - 1], 1 << 30),
        _ => (body, 1),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// A byte count, written as a TOML integer or a string such as `"64KiB"` (see
/// [`parse_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let n = self.0;
        let text = if n >= 1 << 30 && n.is_multiple_of(1 << 30) {
            format!("{}GiB", n >> 30)
        } else if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
            format!("{}MiB", n >> 20)
        } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
            format!("{}KiB", n >> 10)
        } else {
            return s.serialize_u64(n);
        };
        s.serialize_str(&text)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Int(n) => u64::try_from(n)
                .map(Bytes)
                .map_err(|_| de::Error::custom("a size must not be negative")),
            StrOrInt::Str(s) => parse_bytes(&s).map(Bytes).ok_or_else(|| {
                de::Error::custom(format!("'{s}' is not a size (e.g. 64KiB, 16, 2M)"))
            }),
        }
    }
}

/// A virtually indexed, physically tagged, write-back data cache and the consistency
/// policy of its OS. Every default is the HP 9000/834 of Inouye et al. Validated in
/// [`crate::cache::vac::drive::VacDriver::from_config`], whose errors name the key.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VacConfig {
    #[serde(default = "default_vac_size")]
    pub size: Bytes,
    #[serde(default = "default_vac_ways")]
    pub ways: usize,
    #[serde(default = "default_vac_line")]
    pub line: Bytes,
    /// The VM page (2 KiB on the HP 9000/834): the unit of mapping, copy and zero.
    #[serde(default = "default_vac_page")]
    pub page: Bytes,
    /// Replacement within a set.
    #[serde(default = "default_policy")]
    pub replacement: Policy,
    /// virtual | physical.
    #[serde(default)]
    pub indexing: Indexing,
    /// The alias policy: `none`, or `pseudo-aliasing` with any of `+purge`, `+read-only`,
    /// `+equivalent` (a string: its options combine, checked by
    /// [`crate::cache::vac::AliasPolicy::parse`]).
    #[serde(default = "default_vac_policy")]
    pub policy: String,
    /// The timing preset pricing the primitives (a name of
    /// [`crate::cache::vac::Timing::preset`]).
    #[serde(default = "default_vac_timing")]
    pub timing: String,
    /// The frame a page gets on its first touch: trace | any | colour.
    #[serde(default)]
    pub mapping: VacFirstTouch,
}

fn default_vac_size() -> Bytes {
    Bytes(128 << 10)
}
fn default_vac_ways() -> usize {
    2
}
fn default_vac_line() -> Bytes {
    Bytes(32)
}
fn default_vac_page() -> Bytes {
    Bytes(2 << 10)
}
fn default_vac_policy() -> String {
    "pseudo-aliasing".into()
}
fn default_vac_timing() -> String {
    "hp9000-834".into()
}

/// The memory system behind translation (Chen's DECstation 5000/200 model is the shipped
/// example): physical page mapping, caches, write buffer, uncached addresses, the TLB miss
/// handlers' own work, and MCPI accounting. Validated in [`crate::cache::system`].
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// Page-mapping policy ([`crate::vm::Mapping`]): deterministic | random | bin-hopping |
    /// sequential | identity | trace.
    #[serde(default)]
    pub mapping: Mapping,
    /// Physical memory the mapping hands out (64 MiB unless this or `pagetable.memory` says:
    /// a machine has one physical memory, which its page table maps too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Bytes>,
    /// Physical address of the first frame handed out (below it: the unmapped kernel).
    #[serde(default, deserialize_with = "addr", serialize_with = "ser_addr")]
    #[schemars(schema_with = "schema::address")]
    pub frames_base: u64,
    /// Physical address of an unmapped reference (a `pages.regions` entry of size
    /// "unmapped"): its virtual address with this mask (MIPS kseg0/kseg1: 0x1fffffff).
    #[serde(
        default = "default_unmapped_mask",
        deserialize_with = "addr",
        serialize_with = "ser_addr"
    )]
    #[schemars(schema_with = "schema::address")]
    pub unmapped_mask: u64,
    /// Which references share one set of caches (`none`: all of them).
    #[serde(default)]
    pub private: Private,
    /// Split first-level caches...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icache: Option<CacheConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dcache: Option<CacheConfig>,
    /// ...or one unified first-level cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheConfig>,
    /// A unified second level behind the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<CacheConfig>,
    /// Where a write-back first level's dirty victims go when there is a second level.
    #[serde(default, skip_serializing_if = "WritebackTarget::is_default")]
    pub writebacks: WritebackTarget,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_buffer: Option<WriteBufferConfig>,
    /// Virtual address ranges that bypass the caches (device registers, MIPS kseg1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncached: Vec<AddrRange>,
    /// Cycles of an uncached read.
    #[serde(default = "default_uncached_cycles")]
    pub uncached_cycles: u32,
    /// Synthesise the TLB miss handlers' instructions and references (Chen: "their cost
    /// appears as additional instructions and data references").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<HandlerConfig>,
    /// Marker payloads that open and close the idle loop, whose instructions and stalls are
    /// left out of MCPI (default: the whole-system capture's, [`crate::event::IDLE_MARKERS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_markers: Option<[u64; 2]>,
}

/// Which references of a memory system share one set of caches.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Private {
    /// Everyone.
    #[default]
    None,
    /// Each mode (user, kernel) has its own: Chen's competition is the difference.
    Mode,
    /// Each address space has its own.
    AddressSpace,
}

/// Where the memory system's first-level write-backs go (see [`MemoryConfig::writebacks`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WritebackTarget {
    /// Into the second level, as writes (DineroIV's behaviour, and a real hierarchy's): the
    /// second level's own dirty victims then go to memory.
    #[default]
    NextLevel,
    /// Past the second level, straight to memory (the write buffer): the second level only
    /// ever sees the first level's fills.
    Memory,
}

impl WritebackTarget {
    fn is_default(&self) -> bool {
        *self == WritebackTarget::default()
    }
}

/// A memory system's physical memory when neither `[memory]` nor `[pagetable]` gives one.
pub const DEFAULT_MEMORY: u64 = 64 << 20;

impl MemoryConfig {
    /// The machine's physical memory: this section's `memory`, else the page table's
    /// (`pagetable`, when the machine has one), else [`DEFAULT_MEMORY`].
    pub fn memory_bytes(&self, pagetable: Option<&PageTableConfig>) -> u64 {
        self.memory
            .or(pagetable.and_then(|p| p.memory))
            .map_or(DEFAULT_MEMORY, |b| b.0)
    }
}
fn default_unmapped_mask() -> u64 {
    0x1fff_ffff
}
fn default_uncached_cycles() -> u32 {
    15
}

/// A virtual address range `[start, end)`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddrRange {
    #[serde(deserialize_with = "addr", serialize_with = "ser_addr")]
    #[schemars(schema_with = "schema::address")]
    pub start: u64,
    #[serde(deserialize_with = "addr", serialize_with = "ser_addr")]
    #[schemars(schema_with = "schema::address")]
    pub end: u64,
}

/// One cache of the memory system.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    pub size: Bytes,
    pub line: u32,
    /// Ways, or "full"; default 1 (direct-mapped).
    #[serde(default = "direct_mapped")]
    pub ways: Ways,
    #[serde(default = "default_policy")]
    pub policy: Policy,
    #[serde(default)]
    pub write: WritePolicy,
    #[serde(default = "yes")]
    pub write_allocate: bool,
    /// Bytes fetched on a read miss (default: the line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch: Option<u32>,
    /// Cycles the CPU stalls on a miss served by the next level.
    pub miss_cycles: u32,
}

fn direct_mapped() -> Ways {
    Ways::N(1)
}

/// The write buffer of a write-through cache ([`crate::cache::wbuf`]).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteBufferConfig {
    #[serde(default = "wb_entries")]
    pub entries: usize,
    #[serde(default = "wb_write_cycles")]
    pub write_cycles: u32,
    #[serde(default = "wb_page_mode_cycles")]
    pub page_mode_cycles: u32,
    #[serde(default = "wb_dram_page")]
    pub dram_page: Bytes,
    #[serde(default = "wb_partial_cycles")]
    pub partial_cycles: u32,
}

fn wb_entries() -> usize {
    6
}
fn wb_write_cycles() -> u32 {
    5
}
fn wb_page_mode_cycles() -> u32 {
    1
}
fn wb_dram_page() -> Bytes {
    Bytes(4096)
}
fn wb_partial_cycles() -> u32 {
    11
}

/// The software TLB miss handlers' work, synthesised as kernel references (MIPS R3000).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandlerConfig {
    /// Instructions of the user-TLB-miss (UTLB) handler; it loads one PTE.
    #[serde(default = "utlb_instructions")]
    pub utlb_instructions: u32,
    /// Instructions of a kernel-TLB-miss (KTLB) handler, taken through the general
    /// exception path ("several hundred"); it loads one root PTE.
    #[serde(default = "ktlb_instructions")]
    pub ktlb_instructions: u32,
    /// Virtual address of the handlers' code (unmapped kernel text).
    #[serde(deserialize_with = "addr", serialize_with = "ser_addr")]
    #[schemars(schema_with = "schema::address")]
    pub code: u64,
    /// Virtual base of each address space's linear page table (mapped kernel memory): the PTE
    /// of page `vpn` is at `page_table + vpn * pte_bytes`.
    #[serde(deserialize_with = "addr", serialize_with = "ser_addr")]
    #[schemars(schema_with = "schema::address")]
    pub page_table: u64,
    /// Virtual base of the root table mapping the page tables (unmapped kernel memory).
    #[serde(deserialize_with = "addr", serialize_with = "ser_addr")]
    #[schemars(schema_with = "schema::address")]
    pub root_table: u64,
    #[serde(default = "pte_bytes")]
    pub pte_bytes: u32,
}

fn utlb_instructions() -> u32 {
    9
}
fn ktlb_instructions() -> u32 {
    250
}
fn pte_bytes() -> u32 {
    4
}

/// Parse an address given as a TOML integer or as a string (`"0xffff800000000000"`, decimal).
pub fn parse_addr(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim().replace('_', "");
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    };
    r.map_err(|_| format!("'{s}' is not an address (use an integer or a \"0x…\" string)"))
}

fn addr<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    match StrOrInt::deserialize(d)? {
        StrOrInt::Int(n) => u64::try_from(n).map_err(|_| de::Error::custom("negative address")),
        StrOrInt::Str(s) => parse_addr(&s).map_err(de::Error::custom),
    }
}

// Addresses are written as hex strings: TOML integers stop at i64::MAX.
fn ser_addr<S: serde::Serializer>(a: &u64, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{a:#x}"))
}

fn ser_opt_addr<S: serde::Serializer>(
    a: &Option<u64>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match a {
        Some(a) => ser_addr(a, s),
        None => s.serialize_none(),
    }
}

fn opt_addr<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    addr(d).map(Some)
}

/// One TLB structure.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlbConfig {
    pub name: String,
    pub entries: usize,
    #[serde(default)]
    pub ways: Ways,
    #[serde(default = "default_policy")]
    pub policy: Policy,
    /// Page sizes held; empty means `[pages.size]`.
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "schema::page_sizes")]
    pub page: Vec<PageSize>,
    #[serde(default)]
    pub serves: Serves,
    /// Consulted on a miss: one structure, or several that hold different page sizes (each
    /// miss goes to the one for its page size); none: a miss is a page-table walk.
    #[serde(
        default,
        deserialize_with = "names",
        serialize_with = "ser_names",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(schema_with = "schema::names")]
    pub next: Vec<String>,
    #[serde(default = "yes")]
    pub asid: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionConfig>,
    #[serde(default)]
    pub placement: Placement,
    /// Classify every miss as compulsory, capacity or conflict ([`crate::threec`]).
    #[serde(
        default,
        rename = "3c",
        deserialize_with = "yes_no",
        skip_serializing_if = "is_false"
    )]
    #[schemars(schema_with = "schema::switch")]
    pub three_c: bool,
}

fn default_policy() -> Policy {
    Policy::Lru
}

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A switch written `true`/`false` or, as in a flag, `yes`/`no`.
fn yes_no<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    struct V;
    impl de::Visitor<'_> for V {
        type Value = bool;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("yes or no (or true, false)")
        }

        fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<bool, E> {
            Ok(b)
        }

        fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<bool, E> {
            match s.trim().to_ascii_lowercase().as_str() {
                "yes" | "true" | "on" => Ok(true),
                "no" | "false" | "off" => Ok(false),
                _ => Err(E::custom(format!("'{s}' is not yes or no"))),
            }
        }
    }
    d.deserialize_any(V)
}

/// One cache of the `[[cache]]` hierarchy: DineroIV's cache, key for key (see
/// [`crate::cache::hier`] for the exact semantics). A reference of a kind enters the cache
/// serving it that no other cache names as `next`; what a cache sends on (the blocks it
/// fetches, write-throughs, write-backs) goes to its `next`, or to memory.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheSpec {
    pub name: String,
    /// Capacity in bytes: `32k`, `1M`, `65536`.
    pub size: Bytes,
    /// Block (line) size in bytes, a power of two.
    pub line: Bytes,
    /// Ways of each set, or "full"; default 1 (direct-mapped, as DineroIV's).
    #[serde(default = "direct_mapped")]
    pub ways: Ways,
    #[serde(default = "default_policy")]
    pub policy: Policy,
    /// Default: from the name, as for a TLB (`i…` instruction, `d…` data, else unified).
    #[serde(default)]
    pub serves: Serves,
    /// The cache its misses and writes go to; absent: memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    #[serde(default)]
    pub write: WritePolicy,
    #[serde(default)]
    pub allocate: Allocate,
    /// When a read brings in more than it asked for (DineroIV's fetch policies).
    #[serde(default)]
    pub fetch: FetchPolicy,
    /// Sub-blocks ahead a prefetch reaches (default 1); not with `fetch = "demand"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch_distance: Option<u32>,
    /// Sub-block size in bytes (default: the line): the unit of valid and dirty bits and of
    /// transfers to and from the next level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_block: Option<Bytes>,
    /// Classify every miss as compulsory, capacity or conflict ([`crate::threec`]).
    #[serde(
        default,
        rename = "3c",
        deserialize_with = "yes_no",
        skip_serializing_if = "is_false"
    )]
    #[schemars(schema_with = "schema::switch")]
    pub three_c: bool,
}

/// Whether a write miss brings the block in.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Allocate {
    /// Always (the block is fetched unless the write covers whole sub-blocks).
    #[default]
    Yes,
    /// Never: the write goes on to the next level.
    No,
    /// Only when no fetch is needed: the write covers whole sub-blocks (DineroIV's `f`).
    NoFetch,
}

impl<'de> Deserialize<'de> for Allocate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Allocate;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("yes, no or no-fetch")
            }

            fn visit_bool<E: de::Error>(self, b: bool) -> std::result::Result<Allocate, E> {
                Ok(if b { Allocate::Yes } else { Allocate::No })
            }

            fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Allocate, E> {
                match s.trim().to_ascii_lowercase().as_str() {
                    "yes" | "true" | "always" => Ok(Allocate::Yes),
                    "no" | "false" | "never" => Ok(Allocate::No),
                    "no-fetch" | "nofetch" => Ok(Allocate::NoFetch),
                    _ => Err(E::custom(format!("'{s}' is not one of: yes, no, no-fetch"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// DineroIV's fetch policies: what a demand read or instruction fetch prefetches (writes and
/// prefetches never do). A prefetch reads the sub-block `prefetch_distance` sub-blocks past
/// the one referenced.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FetchPolicy {
    /// Nothing: only what is referenced is fetched.
    #[default]
    Demand,
    /// On every read.
    Always,
    /// On every read that misses.
    Miss,
    /// On a miss, and on the first demand reference to a sub-block a prefetch brought in.
    Tagged,
    /// Like `always`, but never into the next block.
    LoadForward,
    /// Like `always`, wrapping around within the block instead of going into the next.
    SubBlock,
}

impl FetchPolicy {
    pub fn name(self) -> &'static str {
        match self {
            FetchPolicy::Demand => "demand",
            FetchPolicy::Always => "always",
            FetchPolicy::Miss => "miss",
            FetchPolicy::Tagged => "tagged",
            FetchPolicy::LoadForward => "load-forward",
            FetchPolicy::SubBlock => "sub-block",
        }
    }
}

fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<PageSize>, D::Error> {
    one_or_list(
        d,
        "a page size or a list of them (e.g. \"4k\" or [\"4k\", \"2M\"])",
    )
}

/// A name or a list of names.
fn names<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    one_or_list(d, "a TLB's name or a list of them")
}

/// One `T` (a string or an integer) or a list of them; `what` says what is expected. Each
/// item is read by `T`'s own deserializer, so its messages are `T`'s.
fn one_or_list<'de, D, T>(d: D, what: &'static str) -> std::result::Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    use de::IntoDeserializer;
    struct OneOrList<T>(&'static str, std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> de::Visitor<'de> for OneOrList<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.0)
        }

        fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Self::Value, E> {
            T::deserialize(s.into_deserializer()).map(|t| vec![t])
        }

        fn visit_i64<E: de::Error>(self, n: i64) -> std::result::Result<Self::Value, E> {
            T::deserialize(n.into_deserializer()).map(|t| vec![t])
        }

        fn visit_u64<E: de::Error>(self, n: u64) -> std::result::Result<Self::Value, E> {
            T::deserialize(n.into_deserializer()).map(|t| vec![t])
        }

        fn visit_seq<A: de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(t) = seq.next_element::<T>()? {
                v.push(t);
            }
            Ok(v)
        }
    }
    d.deserialize_any(OneOrList(what, std::marker::PhantomData))
}

/// One name as a string, several as a list.
fn ser_names<S: serde::Serializer>(v: &[String], s: S) -> std::result::Result<S::Ok, S::Error> {
    match v {
        [one] => s.serialize_str(one),
        _ => v.serialize(s),
    }
}

/// Associativity: a number of ways, or `"full"` (ways = entries).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ways {
    #[default]
    Full,
    N(usize),
}

impl Serialize for Ways {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Ways::Full => s.serialize_str("full"),
            Ways::N(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for Ways {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        match StrOrInt::deserialize(d)? {
            StrOrInt::Str(s) if s.eq_ignore_ascii_case("full") || s.eq_ignore_ascii_case("fa") => {
                Ok(Ways::Full)
            }
            StrOrInt::Str(s) => match s.parse::<usize>() {
                Ok(n) => Ok(Ways::N(n)),
                Err(_) => Err(de::Error::custom(format!(
                    "'{s}' is not an associativity (a number of ways, or \"full\")"
                ))),
            },
            StrOrInt::Int(n) => usize::try_from(n)
                .map(Ways::N)
                .map_err(|_| de::Error::custom("ways must be positive")),
        }
    }
}

/// Which references a structure translates.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Serves {
    Instruction,
    Data,
    #[default]
    Unified,
}

impl Serves {
    /// What a structure named `name` serves when its config does not say: a name starting
    /// with `i` serves instructions (`itlb`), with `d` data (`dtlb`), anything else is unified
    /// (`tlb`, `stlb`). The one rule for every way a machine is written (a `[[tlb]]` table,
    /// `--tlb`, `--set`), so that `dtlb` means a data TLB everywhere.
    pub fn for_name(name: &str) -> Serves {
        match name.chars().next() {
            Some('i') | Some('I') => Serves::Instruction,
            Some('d') | Some('D') => Serves::Data,
            _ => Serves::Unified,
        }
    }

    /// Does this structure translate references of `kind` (fetch, load or store)?
    pub fn serves(self, kind: crate::event::Kind) -> bool {
        match self {
            Serves::Unified => true,
            Serves::Instruction => kind == crate::event::Kind::Fetch,
            Serves::Data => kind != crate::event::Kind::Fetch,
        }
    }
}

/// Lower (wired) and upper partitions of each set, each with its own replacement policy.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PartitionConfig {
    /// Ways of each set (slots of a fully associative TLB) in the lower partition.
    pub lower: usize,
    #[serde(default = "default_policy")]
    pub lower_policy: Policy,
    #[serde(default = "default_policy")]
    pub upper_policy: Policy,
    /// Move the point while the program runs (Uhlig's dynamic partitioning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic: Option<DynamicConfig>,
}

/// Which partition a miss fills. The software-managed-TLB study adds its policies A–D here.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every fill goes to the upper partition (the lower one holds only what is wired).
    #[default]
    Upper,
    /// Kernel-mode references fill the lower partition, user-mode ones the upper.
    KernelLower,
}

/// The software refill of a MIPS R2000-style TLB (see [`crate::mmu`]): page-table structure,
/// PTE placement policy, cost model and the OS behaviour that raises Invalid and Modify traps.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefillConfig {
    /// Page-table levels: 3 (Mach 3.0, OSF/1: L1 and L2 tables mapped, L3 root unmapped) or 2
    /// (Ultrix: the kernel page table is unmapped, so no L3 traps).
    #[serde(default = "default_levels")]
    pub levels: u8,
    /// Which partition each PTE class is placed in (Uhlig et al., Table VIII).
    #[serde(default)]
    pub placement: PlacementPolicy,
    /// Name of a shipped cost table (`lookaside::mmu::CostTable::PRESETS`).
    #[serde(default = "default_costs")]
    pub costs: String,
    /// Per-trap cycle counts that replace the table's.
    #[serde(default, skip_serializing_if = "TrapCycles::is_empty")]
    pub cycles: TrapCycles,
    /// Nanoseconds per cycle, replacing the table's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cycle_ns: Option<f64>,
    #[serde(default)]
    pub invalid_on_first_touch: FirstTouch,
    #[serde(default)]
    pub read_fault_maps: ReadFaultMaps,
    /// Fold every user-mode reference, and every reference below 2 GB, into kuseg by 4 MB
    /// blocks, each trace block of an address space on a kuseg block of its own (never
    /// aliasing: [`crate::mmu::addresses`]), so that a 64-bit user trace can drive the 32-bit
    /// model; kernel references keep the MIPS segments. Without it, user references outside
    /// kuseg are counted as address errors and not translated. `addresses = "x86-64"`
    /// folds the user half this way too.
    #[serde(default)]
    pub fold_user_addresses: bool,
    /// What the trace's addresses are: the MIPS segments themselves, or a 64-bit x86-64
    /// whole-system trace to map onto them ([`RefillAddresses`]).
    #[serde(default)]
    pub addresses: RefillAddresses,
    /// A software TLB of kernel translations in unmapped memory (Bala et al. 1994).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stlb: Option<StlbConfig>,
    /// Prefetching on the IPC path (Bala et al. 1994).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<PrefetchConfig>,
    /// No longer here: dynamic partitioning belongs to the partitioned TLB
    /// (`[[tlb]] partition.dynamic`); kept only to say so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub dynamic: Option<DynamicConfig>,
}

/// How a page table is organised (Huck & Hays 1993; see [`crate::pagetable`]).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Organisation {
    /// Forward-mapped: a tree of tables indexed by the page number's bit fields.
    Radix,
    /// One entry per frame, found through a hash anchor table (HAT).
    Inverted,
    /// A hashed page table (HPT): buckets of entries by a hash of the page number.
    Hashed,
    /// An HPT cache in front of a forward-mapped table.
    Hybrid,
    /// PA-RISC's software TLB in front of another organisation.
    Swtlb,
}

impl Organisation {
    /// The name a config gives it.
    pub fn name(self) -> &'static str {
        match self {
            Organisation::Radix => "radix",
            Organisation::Inverted => "inverted",
            Organisation::Hashed => "hashed",
            Organisation::Hybrid => "hybrid",
            Organisation::Swtlb => "swtlb",
        }
    }
}

/// Who refills the TLB from the page table.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RefillBy {
    #[default]
    Hardware,
    Software,
}

/// How addresses name pages in a page table.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Addresses {
    /// (address space, address): sharing by aliases, one entry per alias.
    #[default]
    PerProcess,
    /// The upper 32 bits are the space id: one address per shared page.
    Global,
}

/// How an address space's number becomes its space id.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SpaceIds {
    /// Scrambled, as HP-UX allocates space ids (pseudo-randomly).
    #[default]
    Random,
    /// The number itself.
    Asid,
}

/// How a hashed bucket's second way is compared.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Compare {
    /// After the first (costing `second_way` cycles when it is needed).
    #[default]
    Serial,
    /// With the first.
    Parallel,
}

/// A page table and the walker that refills the TLBs from it (see [`crate::mmu::Walker`]).
/// Validated by [`crate::mmu::Walker::from_config`], whose errors name the key.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageTableConfig {
    pub organisation: Organisation,
    /// Physical memory in bytes (`"32M"`, the default): one frame per 4 KiB page. A machine
    /// with a memory system (`[memory]`) has one physical memory, the memory system's: leave
    /// this out there (or give the same size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Bytes>,
    #[serde(default)]
    pub refill: RefillBy,
    #[serde(default)]
    pub addresses: Addresses,
    #[serde(default)]
    pub space_ids: SpaceIds,
    /// Hashed: head buckets per frame; inverted: HAT anchors per frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// Hashed, hybrid: entries per head bucket (default 1); swtlb: ways (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ways: Option<usize>,
    #[serde(default)]
    pub compare: Compare,
    #[serde(default)]
    pub chaining: crate::pagetable::Chaining,
    #[serde(default)]
    pub move_to_head: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<usize>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bits: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub psc: Vec<PscConfig>,
    /// Hybrid: HPT-cache entries; swtlb: software-TLB entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<usize>,
    /// Hybrid, swtlb: the organisation behind it (radix, inverted or hashed; default radix
    /// and inverted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behind: Option<Organisation>,
    #[serde(default = "default_walk_costs")]
    pub costs: String,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub cycles: std::collections::BTreeMap<String, u32>,
    #[serde(default)]
    pub data_refs: bool,
    /// Fraction of memory mapped before the run to pages of other processes (0 to 1).
    #[serde(default)]
    pub preload: f64,
    #[serde(default)]
    pub cache: WalkCacheConfig,
}

/// One paging-structure cache: the entries of radix level `level` (0 = root).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PscConfig {
    pub level: usize,
    pub entries: usize,
    #[serde(default = "one")]
    pub ways: usize,
}

/// The data cache a walker's references go through (Huck & Hays: 256 KB direct-mapped).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WalkCacheConfig {
    #[serde(default = "default_walk_cache")]
    pub size: Bytes,
    #[serde(default = "default_walk_line")]
    pub line: u32,
    #[serde(default = "one")]
    pub ways: usize,
    #[serde(default = "default_policy")]
    pub policy: Policy,
}

impl Default for WalkCacheConfig {
    fn default() -> Self {
        WalkCacheConfig {
            size: default_walk_cache(),
            line: default_walk_line(),
            ways: 1,
            policy: default_policy(),
        }
    }
}

/// A page table's physical memory when neither `[pagetable]` nor `[memory]` gives one.
pub const DEFAULT_PAGETABLE_MEMORY: u64 = 32 << 20;

fn default_walk_cache() -> Bytes {
    Bytes(256 << 10)
}
fn default_walk_line() -> u32 {
    32
}
fn default_walk_costs() -> String {
    "huck93".into()
}

/// Uhlig's dynamic partitioning of a partitioned TLB ([`crate::tlb::HillClimber`]): every
/// `period` events, compare the cost of the last interval with the one before; a
/// significant fall keeps the partition point moving the same way, a significant rise
/// reverses it, anything else leaves it. Under `[refill]` the events are traps and the cost
/// their handling cycles (as in the paper); on a walked machine the events are misses of the
/// partitioned structure and the cost the walker's cycles (`[pagetable]`), or those misses
/// where nothing prices a walk. The paper gives no values for these parameters.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DynamicConfig {
    /// Events (traps, or misses of the structure) between decisions.
    #[serde(default = "default_period")]
    pub period: u64,
    /// Relative change of the interval's cost that counts as significant.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Slots the partition point moves per decision.
    #[serde(default = "one")]
    pub step: usize,
    /// Bounds of the lower partition (default 1 and ways - 1).
    #[serde(default = "one")]
    pub min_lower: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lower: Option<usize>,
}

fn default_period() -> u64 {
    1000
}

fn default_threshold() -> f64 {
    0.05
}

/// Bala's software TLB: kernel translations cached in unmapped memory, looked up at the start
/// of the generic miss handler (hit: a fast path with no nested traps; miss: the normal
/// handler, then a fill).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StlbConfig {
    /// Entries in all (indexed by the low bits of the page number).
    #[serde(default = "default_stlb_entries")]
    pub entries: usize,
    /// 1 (direct-mapped) or 2.
    #[serde(default = "one")]
    pub ways: usize,
    /// PTE classes it caches, of L1K, L2, L3.
    #[serde(default = "default_stlb_classes")]
    pub classes: Vec<KernelPte>,
    /// How a page number picks its set.
    #[serde(default)]
    pub index: StlbIndex,
}

/// A class of kernel PTE that a software TLB can hold (Bala's, Uhlig's names): the PTEs of
/// kernel data pages (L1K), of the user page tables (L2), of the kernel's page tables (L3).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
pub enum KernelPte {
    L1K,
    L2,
    L3,
}

/// How a page number picks its set of a software TLB.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StlbIndex {
    /// Its low bits.
    #[default]
    Low,
    /// A hash of all its bits.
    Hash,
}

fn default_stlb_entries() -> usize {
    1024
}

fn one() -> usize {
    1
}

fn default_stlb_classes() -> Vec<KernelPte> {
    vec![KernelPte::L1K, KernelPte::L2, KernelPte::L3]
}

/// Bala's IPC-path prefetching: when the running address space changes (the IPC hand-off),
/// probe the TLB for the receiver's most recently missed entries and insert those that are
/// absent: by default the L2 PTEs of its L1 page-table pages; optionally its user pages
/// (L1U) and the kernel data pages (L1K) it missed on.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrefetchConfig {
    /// L2 PTEs prefetched per switch (the receiver's text, data and stack: 3), at most 8.
    #[serde(default = "three_entries")]
    pub l2_entries: usize,
    /// The receiver's most recently missed user pages (L1U) prefetched per switch, at most 8.
    #[serde(default)]
    pub l1u_entries: usize,
    /// Kernel data pages (L1K) the receiver most recently missed on, per switch, at most 8.
    #[serde(default)]
    pub l1k_entries: usize,
}

fn three_entries() -> usize {
    3
}

fn default_levels() -> u8 {
    3
}

fn default_costs() -> String {
    "mach3".into()
}

impl Default for RefillConfig {
    fn default() -> Self {
        RefillConfig {
            levels: default_levels(),
            placement: PlacementPolicy::default(),
            costs: default_costs(),
            cycles: TrapCycles::default(),
            cycle_ns: None,
            invalid_on_first_touch: FirstTouch::default(),
            read_fault_maps: ReadFaultMaps::default(),
            fold_user_addresses: false,
            addresses: RefillAddresses::default(),
            stlb: None,
            prefetch: None,
            dynamic: None,
        }
    }
}

/// PTE placement policies of Uhlig et al., Table VIII: which partition each PTE class fills.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, Hash, JsonSchema)]
pub enum PlacementPolicy {
    /// L2 PTEs in the lower partition, all others in the upper (the baseline).
    #[default]
    A,
    /// L2 and L3 PTEs in the lower partition; L1U and L1K in the upper.
    B,
    /// Every class in the lower partition except L1U.
    C,
    /// No partitioning at all: one pool of slots.
    D,
}

/// Which pages raise an Invalid trap (a page fault) on their first reference.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FirstTouch {
    /// User pages (demand paging); mapped kernel data is mapped when allocated.
    #[default]
    User,
    /// User pages and mapped kernel data.
    All,
    /// None: every page is mapped before the trace starts.
    None,
}

/// What a trace's addresses are to the software-refill model (see
/// [`crate::mmu::addresses`], where the mapping lives).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
pub enum RefillAddresses {
    /// MIPS addresses: kuseg below 2 GB, kseg0/kseg1 unmapped, kseg2 mapped; anything at or
    /// above 4 GB (and a user reference outside kuseg, unless `fold_user_addresses`) is an
    /// address error.
    #[default]
    #[serde(rename = "mips")]
    Mips,
    /// A 64-bit x86-64 trace with its kernel: the lower half (user space, of the running
    /// address space whatever the mode) folds into kuseg by 4 MB blocks without aliasing;
    /// the kernel classes `[pages]` declares unmapped (`{ kernel = "direct_map", size =
    /// "unmapped" }`) are kseg0; every other class of the trace's `kernel_layout` is mapped
    /// kernel data, folded into kseg2's 128 MB the same way; any other address is an
    /// address error.
    #[serde(rename = "x86-64")]
    X86_64,
}

impl RefillAddresses {
    /// The name a config gives it.
    pub fn name(self) -> &'static str {
        match self {
            RefillAddresses::Mips => "mips",
            RefillAddresses::X86_64 => "x86-64",
        }
    }
}

/// How a page is mapped by a fault taken on a read (a write fault always maps it dirty).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadFaultMaps {
    /// Clean (dirty bit off): the first write to the page raises a Modify trap.
    #[default]
    Clean,
    /// Dirty (writable): no Modify trap until the page is write-protected again.
    Dirty,
}

/// Cycles per trap type, each optional (absent: not given).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrapCycles {
    #[serde(rename = "L1U", default, skip_serializing_if = "Option::is_none")]
    pub l1u: Option<u32>,
    #[serde(rename = "L1K", default, skip_serializing_if = "Option::is_none")]
    pub l1k: Option<u32>,
    #[serde(rename = "L2", default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<u32>,
    #[serde(rename = "L3", default, skip_serializing_if = "Option::is_none")]
    pub l3: Option<u32>,
    #[serde(rename = "Modify", default, skip_serializing_if = "Option::is_none")]
    pub modify: Option<u32>,
    #[serde(rename = "Invalid", default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<u32>,
    /// A kernel miss served by the software TLB's fast path (instead of its type's cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stlb_hit: Option<u32>,
    /// Added to a kernel miss that looked in the software TLB in vain (lookup and fill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stlb_miss: Option<u32>,
    /// One IPC-path prefetch: probe the TLB for an entry and, if absent, load and insert it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<u32>,
    /// Counting one L1U miss for dynamic partitioning (a memory-resident counter: 4-10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1u_count: Option<u32>,
    /// A micro-TLB miss the TLB serves without a trap (default 3, Chen's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub micro: Option<u32>,
}

impl TrapCycles {
    /// In Table III row order: L1U, L1K, L2, L3, Modify, Invalid.
    pub fn to_array(&self) -> [Option<u32>; 6] {
        [
            self.l1u,
            self.l1k,
            self.l2,
            self.l3,
            self.modify,
            self.invalid,
        ]
    }

    pub fn is_empty(&self) -> bool {
        *self == TrapCycles::default()
    }
}

impl MachineConfig {
    /// Read a machine from TOML text; `source_name` names it in errors (a path or `preset X`).
    pub fn from_toml(text: &str, source_name: &str) -> Result<MachineConfig> {
        Self::assemble(Some(text), source_name, &[], &[])
    }

    /// [`MachineConfig::assemble_all`] without `--cache` flags.
    pub fn assemble(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        overrides: &[String],
    ) -> Result<MachineConfig> {
        Self::assemble_all(text, source_name, tlb_flags, &[], overrides)
    }

    /// Assemble a machine from its four sources, in order: TOML text (a preset or a file;
    /// none means an empty machine), DineroIV-style `--tlb` and `--cache` flags (each adds a
    /// `[[tlb]]` or a `[[cache]]`), and `--set key=value` overrides.
    ///
    /// Errors are one line naming the source a bad key came from (the file, `--tlb`,
    /// `--cache` or `--set`), its line and column in the file, and the key (`tlb.dtlb.page`).
    pub fn assemble_all(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        cache_flags: &[String],
        overrides: &[String],
    ) -> Result<MachineConfig> {
        let origin = Origin::with_caches(text, source_name, tlb_flags, cache_flags, overrides)?;
        let mut table = origin.table.clone();
        for (key, flags, parse) in [
            (
                "tlb",
                tlb_flags,
                tlb_from_flag as fn(&str) -> Result<toml::Table>,
            ),
            ("cache", cache_flags, cache_from_flag),
        ] {
            if flags.is_empty() {
                continue;
            }
            let list = table
                .entry(key)
                .or_insert_with(|| toml::Value::Array(Vec::new()))
                .as_array_mut()
                .ok_or_else(|| {
                    origin.error(key, format!("must be an array of tables ([[{key}]])"))
                })?;
            for f in flags {
                list.push(toml::Value::Table(parse(f)?));
            }
        }
        apply_overrides(&mut table, overrides)?;
        if tlb_flags.is_empty() && cache_flags.is_empty() && overrides.is_empty() {
            // Straight from the text, so that the error's position is the offending value's.
            if let Some(text) = text {
                let mut config: MachineConfig = toml::from_str(text).map_err(|e| {
                    let (key, message, _) = describe(&table, &e);
                    let offset = e.span().map(|s| s.start).or_else(|| key_offset(text, &key));
                    located(source_name, offset.map(|o| (text, o)), &key, message)
                })?;
                config.resolve_defaults(&table);
                return Ok(config);
            }
        }
        let mut config =
            MachineConfig::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
                let (key, message, tlb) = describe(&table, &e);
                origin.error_in(&key, message, tlb)
            })?;
        config.resolve_defaults(&table);
        Ok(config)
    }

    /// Read a machine from a parsed TOML table (after overrides were applied to it).
    pub fn from_table(table: toml::Table, source_name: &str) -> Result<MachineConfig> {
        let mut config =
            MachineConfig::deserialize(toml::Value::Table(table.clone())).map_err(|e| {
                let (key, message, _) = describe(&table, &e);
                Error::config(source_name, key, message)
            })?;
        config.resolve_defaults(&table);
        Ok(config)
    }

    /// Fill in the defaults that depend on other keys, which serde's per-field defaults
    /// cannot see; `table` is what the config was read from (to tell an absent key from one
    /// set to its default value). One place for every source (TOML text, `--tlb`, `--set`,
    /// the Python API), so that a name means one thing however the machine was written.
    fn resolve_defaults(&mut self, table: &toml::Table) {
        // Whether element `i` of the array of tables `key` says `field`.
        let said = |key: &str, i: usize, field: &str| {
            table
                .get(key)
                .and_then(|v| v.as_array())
                .and_then(|a| a.get(i))
                .and_then(|v| v.as_table())
                .is_some_and(|w| w.contains_key(field))
        };
        for (i, t) in self.tlbs.iter_mut().enumerate() {
            if !said("tlb", i, "serves") {
                t.serves = Serves::for_name(&t.name);
            }
        }
        for (i, c) in self.caches.iter_mut().enumerate() {
            if !said("cache", i, "serves") {
                c.serves = Serves::for_name(&c.name);
            }
        }
        let size_said = table
            .get("pages")
            .and_then(|p| p.as_table())
            .is_some_and(|p| p.contains_key("size"));
        if !size_said {
            if let Some(size) = self.page_size_the_tlbs_agree_on() {
                self.pages.size = size;
            }
        }
    }

    /// The page size the machine's TLBs imply when `pages.size` is not given: when every
    /// structure says which sizes it holds, they all hold a size in common, and none of them
    /// holds the default (4 KiB), the smallest size they all hold — so that
    /// `--tlb dtlb:…,page=2m` alone simulates 2 MiB pages. None when they disagree, or when
    /// a structure holds the default size by default (the machine then keeps 4 KiB pages,
    /// and its wiring error names `--set pages.size`), and for machines whose other
    /// sections fix the page size (`[refill]`, `[pagetable]`, `[vac]`).
    fn page_size_the_tlbs_agree_on(&self) -> Option<PageSize> {
        if self.refill.is_some() || self.pagetable.is_some() || self.vac.is_some() {
            return None;
        }
        if self.tlbs.iter().any(|t| t.page.is_empty()) {
            return None;
        }
        let mut common: Option<Vec<PageSize>> = None;
        for t in &self.tlbs {
            common = Some(match common {
                None => t.page.clone(),
                Some(c) => c.into_iter().filter(|p| t.page.contains(p)).collect(),
            });
        }
        let common = common?;
        if common.contains(&self.pages.size) {
            return None;
        }
        common
            .into_iter()
            .filter(|p| p.shift().is_some())
            .min_by_key(|p| p.shift())
    }

    /// The machine as TOML text (normalised: defaults filled in).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }
}

/// Where the keys of an assembled machine came from — its TOML text (a file or a preset),
/// `--tlb` flags or `--set` overrides — so that an error about a key names its source, and
/// its line and column when the key is in the text.
#[derive(Clone, Debug)]
pub struct Origin {
    text: Option<String>,
    name: String,
    /// The text as a table.
    table: toml::Table,
    /// Names of the structures the text defines.
    text_tlbs: Vec<String>,
    /// Names of the structures `--tlb` adds (after the text's).
    flag_tlbs: Vec<String>,
    /// Names of the caches the text defines, and those `--cache` adds.
    text_caches: Vec<String>,
    flag_caches: Vec<String>,
    /// The keys `--set` overrides, in order.
    set_keys: Vec<String>,
}

impl Origin {
    /// The sources of a machine (see [`MachineConfig::assemble`]); fails when the text is not
    /// TOML.
    pub fn new(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        overrides: &[String],
    ) -> Result<Origin> {
        Origin::with_caches(text, source_name, tlb_flags, &[], overrides)
    }

    /// [`Origin::new`] with `--cache` flags too.
    pub fn with_caches(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        cache_flags: &[String],
        overrides: &[String],
    ) -> Result<Origin> {
        let table: toml::Table = match text {
            None => toml::Table::new(),
            Some(t) => toml::from_str(t).map_err(|e| {
                let at = e.span().map(|s| (t, s.start));
                located(source_name, at, "syntax", one_line(e.message()))
            })?,
        };
        let names = |v: Option<&toml::Value>| -> Vec<String> {
            v.and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .map(|t| {
                            t.get("name")
                                .and_then(|n| n.as_str())
                                .unwrap_or_default()
                                .to_string()
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let flag_names = |flags: &[String]| -> Vec<String> {
            flags
                .iter()
                .map(|f| {
                    f.split_once(':')
                        .map_or(f.as_str(), |s| s.0)
                        .trim()
                        .to_string()
                })
                .collect()
        };
        Ok(Origin {
            text_tlbs: names(table.get("tlb")),
            text_caches: names(table.get("cache")),
            text: text.map(str::to_string),
            name: source_name.to_string(),
            table,
            flag_tlbs: flag_names(tlb_flags),
            flag_caches: flag_names(cache_flags),
            set_keys: overrides
                .iter()
                .map(|o| {
                    o.split_once('=')
                        .map_or(o.as_str(), |s| s.0)
                        .trim()
                        .to_string()
                })
                .collect(),
        })
    }

    /// A config error about `key`, named by the source it came from.
    pub fn error(&self, key: &str, message: impl Into<String>) -> Error {
        self.error_in(key, message, None)
    }

    /// [`Origin::error`] about a key of the `tlb` element `tlb` (index in the assembled
    /// machine), when known: the text's structures come first, then those of `--tlb`.
    fn error_in(&self, key: &str, message: impl Into<String>, tlb: Option<usize>) -> Error {
        let parts: Vec<&str> = key.split('.').collect();
        // The last override wins, so it is the one to blame.
        let set = self.set_keys.iter().rev().any(|s| {
            let s: Vec<&str> = s.split('.').collect();
            let n = s.len().min(parts.len());
            n > 0 && s[..n] == parts[..n]
        });
        if set {
            return Error::config("--set", key, message);
        }
        for (array, text_names, flag_names, flag_source) in [
            ("tlb", &self.text_tlbs, &self.flag_tlbs, "--tlb"),
            ("cache", &self.text_caches, &self.flag_caches, "--cache"),
        ] {
            let Some(rest) = key.strip_prefix(array) else {
                continue;
            };
            if !(rest.starts_with('.') || rest.starts_with('[')) {
                continue;
            }
            let flag = if let Some(i) = tlb.filter(|_| array == "tlb") {
                i >= text_names.len()
            } else if let Some(i) = rest.strip_prefix('[') {
                let i: usize = i
                    .split(']')
                    .next()
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(0);
                i >= text_names.len()
            } else {
                let name = parts.get(1).copied().unwrap_or_default();
                flag_names.iter().any(|f| f == name) && !text_names.iter().any(|t| t == name)
            };
            if flag {
                return Error::config(flag_source, key, message);
            }
        }
        let at = self
            .text
            .as_deref()
            .and_then(|t| key_offset(t, key).map(|o| (t, o)));
        located(&self.name, at, key, message)
    }

    /// `e` again, naming the source of its key when it is a config error of this machine
    /// without a position (as [`crate::machine::Machine::build`]'s are).
    pub fn locate(&self, e: Error) -> Error {
        match e {
            Error::Config {
                source_name,
                position: None,
                key,
                message,
            } if source_name == self.name => self.error(&key, message),
            e => e,
        }
    }
}

/// A config error about `key` of `source_name`, at byte offset `at.1` of its text `at.0`
/// (as a line and column) when known.
fn located(
    source_name: &str,
    at: Option<(&str, usize)>,
    key: &str,
    message: impl Into<String>,
) -> Error {
    match at {
        Some((text, offset)) => {
            let (line, column) = line_column(text, offset);
            Error::config_at(source_name, line, column, key, message)
        }
        None => Error::config(source_name, key, message),
    }
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_column(text: &str, offset: usize) -> (u64, u64) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let column = String::from_utf8_lossy(&before[start..]).chars().count() as u64 + 1;
    (line, column)
}

/// Byte offset in `text` of the config key `key` (`tlb.dtlb.ways`, `tlb[0].name`,
/// `pages.regions[1].end`: an element of an array of tables is named by its `name` or its
/// index), or of the deepest part of it that is there (the `[[tlb]]` of a missing key).
fn key_offset(text: &str, key: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut at: &DeValue = &DeValue::Table(doc.get_ref().clone());
    let mut found = None;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        let (name, index) = match part.split_once('[') {
            Some((n, i)) => (n, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let DeValue::Table(t) = at else { break };
        let Some((k, v)) = t.iter().find(|(k, _)| k.get_ref() == name) else {
            break;
        };
        found = Some(k.span().start);
        at = v.get_ref();
        if let DeValue::Array(a) = at {
            // An element: by index, or by the name the next part gives.
            let element = match index {
                Some(i) => a.get(i),
                None => match parts.peek() {
                    Some(n) => {
                        let hit = a.iter().find(|e| {
                            e.get_ref().get("name").and_then(|v| v.get_ref().as_str()) == Some(*n)
                        });
                        if hit.is_some() {
                            parts.next();
                        }
                        hit
                    }
                    None => None,
                },
            };
            let Some(e) = element else { break };
            found = Some(e.span().start);
            at = e.get_ref();
        }
    }
    found
}

/// The config key and a one-line message of a toml error from reading `table` as a machine
/// (and the index of the `[[tlb]]` it is in, if it is): the key names the element of an array
/// of tables (by its `name`, else its index) and the unknown or missing field.
fn describe(table: &toml::Table, e: &toml::de::Error) -> (String, String, Option<usize>) {
    let keys = error_keys(e);
    let (field, message) = tidy(e.message());
    let root = toml::Value::Table(table.clone());
    let mut path: Vec<Step> = Vec::new();
    let mut key = String::new();
    for k in &keys {
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(k);
        path.push(Step::Key(k.clone()));
        let Some(toml::Value::Array(a)) = step_to(&root, &path) else {
            continue;
        };
        if a.is_empty() || !a.iter().all(toml::Value::is_table) {
            continue;
        }
        // Which element: the first whose prefix of the array fails the same way.
        let Some(i) = (0..a.len()).find(|&i| {
            let mut t = root.clone();
            if let Some(toml::Value::Array(a)) = step_to_mut(&mut t, &path) {
                a.truncate(i + 1);
            }
            MachineConfig::deserialize(t)
                .err()
                .is_some_and(|f| f.message() == e.message() && error_keys(&f) == keys)
        }) else {
            break;
        };
        match a[i].get("name").and_then(|n| n.as_str()) {
            Some(n) if !n.is_empty() && !n.contains('.') => {
                key.push('.');
                key.push_str(n);
            }
            _ => key.push_str(&format!("[{i}]")),
        }
        path.push(Step::Index(i));
    }
    if let Some(f) = field {
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(&f);
    }
    if key.is_empty() {
        key.push_str("toml");
    }
    let tlb = match path.as_slice() {
        [Step::Key(k), Step::Index(i), ..] if k == "tlb" => Some(*i),
        _ => None,
    };
    (key, message, tlb)
}

/// A step into a TOML value.
enum Step {
    Key(String),
    Index(usize),
}

fn step_to<'v>(v: &'v toml::Value, path: &[Step]) -> Option<&'v toml::Value> {
    path.iter().try_fold(v, |v, s| match s {
        Step::Key(k) => v.get(k.as_str()),
        Step::Index(i) => v.get(*i),
    })
}

fn step_to_mut<'v>(v: &'v mut toml::Value, path: &[Step]) -> Option<&'v mut toml::Value> {
    path.iter().try_fold(v, |v, s| match s {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

/// The keys a toml error says it is in (`in `tlb.page``), outermost first.
fn error_keys(e: &toml::de::Error) -> Vec<String> {
    let mut bare = e.clone();
    // Without its input the error prints its keys instead of a snippet.
    bare.set_input(None);
    let text = bare.to_string();
    text.trim_end()
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("in `"))
        .and_then(|l| l.strip_suffix('`'))
        .map(|k| k.split('.').map(str::to_string).collect())
        .unwrap_or_default()
}

/// serde's message in our words, one line: the field it names when it names one (an unknown
/// or missing field), and the message.
fn tidy(message: &str) -> (Option<String>, String) {
    let message = one_line(message);
    let quoted = |s: &str| s.replace('`', "");
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((field, expected)) = rest.split_once('`') {
            let why = match expected.trim_start_matches(", ") {
                "there are no fields" => "unknown key (this table takes none)".to_string(),
                e => match e.strip_prefix("expected one of ") {
                    Some(list) => format!("unknown key (expected one of: {})", quoted(list)),
                    None => format!("unknown key ({})", quoted(e)),
                },
            };
            return (Some(field.to_string()), why);
        }
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        if let Some((field, _)) = rest.split_once('`') {
            return (
                Some(field.to_string()),
                "missing (this key is required)".into(),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        if let Some((value, expected)) = rest.split_once('`') {
            let list = expected
                .trim_start_matches(", ")
                .trim_start_matches("expected one of ")
                .trim_start_matches("expected ");
            return (None, format!("'{value}' is not one of: {}", quoted(list)));
        }
    }
    (None, message)
}

/// `message` on one line.
fn one_line(message: &str) -> String {
    message
        .trim()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Apply `key=value` overrides to a TOML table before it is read as a machine.
///
/// Keys are dotted paths; a `tlb` element is addressed by its name (`tlb.dtlb.entries=128`).
/// Values are TOML literals (`128`, `"full"`, `true`, `["4k","2M"]`); a bare word that is not
/// a TOML literal is taken as a string (`tlb.dtlb.policy=fifo`).
pub fn apply_overrides(table: &mut toml::Table, overrides: &[String]) -> Result<()> {
    for ov in overrides {
        let (key, raw) = ov
            .split_once('=')
            .ok_or_else(|| Error::config("--set", ov, "expected key=value"))?;
        let key = key.trim();
        let value = parse_value(raw.trim());
        set_path(table, key, value).map_err(|m| Error::config("--set", key, m))?;
    }
    Ok(())
}

/// A TOML literal, or a plain string when `raw` is not one.
fn parse_value(raw: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.into()),
    }
}

fn set_path(
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> std::result::Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err("empty component in key".into());
    }
    if parts[0] == "tlb" || parts[0] == "cache" {
        let (what, array) = if parts[0] == "tlb" {
            ("TLB", "tlb")
        } else {
            ("cache", "cache")
        };
        if parts.len() < 3 {
            return Err(format!("address a {what} field as {array}.<name>.<field>"));
        }
        let list = table
            .get_mut(array)
            .and_then(|v| v.as_array_mut())
            .ok_or_else(|| format!("the machine has no [[{array}]] structures"))?;
        let names: Vec<String> = list
            .iter()
            .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
            .collect();
        let t = list
            .iter_mut()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(parts[1]))
            .and_then(|t| t.as_table_mut())
            .ok_or_else(|| {
                format!(
                    "no {what} named '{}' (have: {})",
                    parts[1],
                    names.join(", ")
                )
            })?;
        return set_in(t, &parts[2..], value);
    }
    set_in(table, &parts, value)
}

fn set_in(
    table: &mut toml::Table,
    parts: &[&str],
    value: toml::Value,
) -> std::result::Result<(), String> {
    let (last, path) = parts.split_last().ok_or("empty key")?;
    let mut t = table;
    for p in path {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry
            .as_table_mut()
            .ok_or_else(|| format!("'{p}' is not a table"))?;
    }
    t.insert(last.to_string(), value);
    Ok(())
}

/// Turn a DineroIV-style flag `NAME:key=value,key=value` into a `[[tlb]]` table.
///
/// `serves` defaults from the name when absent, as in TOML (see [`Serves::for_name`]): so
/// `--tlb dtlb:entries=64` is a data TLB.
pub fn tlb_from_flag(flag: &str) -> Result<toml::Table> {
    let err = |m: String| Error::config("--tlb", flag, m);
    let (name, rest) = flag.split_once(':').unwrap_or((flag, ""));
    let name = name.trim();
    if name.is_empty() {
        return Err(err(
            "expected NAME:key=value,… (e.g. dtlb:entries=64,ways=full)".into(),
        ));
    }
    let mut t = toml::Table::new();
    t.insert("name".into(), toml::Value::String(name.into()));
    for kv in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| err(format!("'{kv}' is not key=value")))?;
        let k = k.trim();
        let v = v.trim();
        let value = match k {
            // Lists inside a comma-separated flag use '+': page=4k+2M, next=stlb+stlb1g.
            "page" | "next" => toml::Value::Array(
                v.split('+')
                    .map(|p| toml::Value::String(p.trim().into()))
                    .collect(),
            ),
            "partition" => {
                // partition=8/fifo/random : lower ways / lower policy / upper policy
                let f: Vec<&str> = v.split('/').collect();
                let mut p = toml::Table::new();
                p.insert("lower".into(), parse_value(f[0]));
                if let Some(lp) = f.get(1) {
                    p.insert("lower_policy".into(), toml::Value::String(lp.to_string()));
                }
                if let Some(up) = f.get(2) {
                    p.insert("upper_policy".into(), toml::Value::String(up.to_string()));
                }
                toml::Value::Table(p)
            }
            _ => parse_value(v),
        };
        t.insert(k.into(), value);
    }
    Ok(t)
}

/// Turn a DineroIV-style flag `NAME:key=value,key=value` into a `[[cache]]` table (the keys
/// of [`CacheSpec`]: `--cache l1d:size=32k,line=64,ways=8,policy=lru,serves=data,next=l2`).
/// `serves` defaults from the name when absent, as in TOML.
pub fn cache_from_flag(flag: &str) -> Result<toml::Table> {
    let err = |m: String| Error::config("--cache", flag, m);
    let (name, rest) = flag.split_once(':').unwrap_or((flag, ""));
    let name = name.trim();
    if name.is_empty() {
        return Err(err(
            "expected NAME:key=value,… (e.g. l1d:size=32k,line=64,ways=8,serves=data)".into(),
        ));
    }
    let mut t = toml::Table::new();
    t.insert("name".into(), toml::Value::String(name.into()));
    for kv in rest.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| err(format!("'{kv}' is not key=value")))?;
        t.insert(k.trim().into(), parse_value(v.trim()));
    }
    Ok(t)
}

/// The machine description's JSON Schema (draft 2020-12): every section, key, default and
/// closed choice, generated from the types that read it, so that editors, the Python layer
/// and the docs check a machine against what the engine accepts, not against a copy.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(MachineConfig)).expect("a schema is JSON")
}

/// Schemas of the values written more than one way (sizes as `32k` or 32768, addresses as
/// `"0x…"` or integers, switches as `yes`/`true`): what [`json_schema`] says of them.
mod schema {
    use schemars::{json_schema, Schema, SchemaGenerator};

    /// A byte count: an integer, or digits with `k`, `M`, `G` (binary; `KiB`, `KB` too).
    pub fn size() -> Schema {
        json_schema!({
            "description": "bytes: an integer or a string such as \"32k\", \"64KiB\", \"2M\"",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^\\s*[0-9]+\\s*([kKmMgG]([iI]?[bB])?|[bB])?\\s*$" }
            ]
        })
    }

    /// A page size: a power of two of bytes (as [`size`]), or `unmapped`.
    pub fn page_size() -> Schema {
        json_schema!({
            "description": "a page size: a power of two of bytes (4096, \"4k\", \"2M\", \"1G\"), or \"unmapped\"",
            "anyOf": [
                { "type": "integer", "minimum": 2 },
                { "type": "string" }
            ]
        })
    }

    /// An address: an integer or a decimal or `0x…` string (`_` allowed).
    pub fn address(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "an address: an integer or a \"0x…\" string",
            "anyOf": [
                { "type": "integer", "minimum": 0 },
                { "type": "string", "pattern": "^\\s*(0[xX][0-9a-fA-F_]+|[0-9_]+)\\s*$" }
            ]
        })
    }

    /// A switch: `true`/`false` or, as in a flag, `yes`/`no`.
    pub fn switch(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "boolean" },
                { "type": "string", "enum": ["yes", "no", "true", "false"] }
            ]
        })
    }

    /// One page size or a list of them.
    pub fn page_sizes(_: &mut SchemaGenerator) -> Schema {
        let one = page_size();
        json_schema!({ "anyOf": [one.clone(), { "type": "array", "items": one }] })
    }

    /// One name or a list of them.
    pub fn names(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": "string" } }
            ]
        })
    }
}

/// Implements [`schemars::JsonSchema`] for a type read by hand, from a function of
/// [`schema`].
macro_rules! schema_from {
    ($t:ty, $f:expr) => {
        impl JsonSchema for $t {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $f
            }
        }
    };
}

schema_from!(Bytes, schema::size());
schema_from!(PageSize, schema::page_size());
schema_from!(
    Ways,
    schemars::json_schema!({
        "description": "a number of ways, or \"full\" (ways = entries)",
        "anyOf": [
            { "type": "integer", "minimum": 1 },
            { "type": "string", "enum": ["full", "fa"] }
        ]
    })
);
schema_from!(
    Allocate,
    schemars::json_schema!({
        "anyOf": [
            { "type": "boolean" },
            { "type": "string", "enum": ["yes", "no", "no-fetch", "true", "false", "always", "never", "nofetch"] }
        ]
    })
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_parse() {
        assert_eq!(PageSize::parse("4k"), Ok(PageSize::Size(4096)));
        assert_eq!(PageSize::parse("4KiB"), Ok(PageSize::Size(4096)));
        assert_eq!(PageSize::parse("2M"), Ok(PageSize::Size(2 << 20)));
        assert_eq!(PageSize::parse("1G"), Ok(PageSize::Size(1 << 30)));
        assert_eq!(PageSize::parse("8192"), Ok(PageSize::Size(8192)));
        assert_eq!(PageSize::parse("unmapped"), Ok(PageSize::Unmapped));
        assert!(PageSize::parse("3k").is_err());
        assert!(PageSize::parse("big").is_err());
        assert_eq!(PageSize::Size(2 << 20).label(), "2M");
    }

    #[test]
    fn reads_a_full_machine() {
        let m = MachineConfig::from_toml(
            r#"
            [machine]
            name = "x"
            global_above = "0xffff800000000000"
            [pages]
            size = "4k"
            regions = [{ start = "0x80000000", end = 0xc0000000, size = "unmapped" }]
            [[tlb]]
            name = "dtlb"
            entries = 64
            ways = 4
            page = ["4k", "2M"]
            serves = "data"
            next = "stlb"
            [[tlb]]
            name = "stlb"
            entries = 1536
            ways = 12
            partition = { lower = 2, upper_policy = "random" }
            "#,
            "m.toml",
        )
        .unwrap();
        assert_eq!(m.machine.global_above, Some(0xffff_8000_0000_0000));
        assert_eq!(m.pages.regions[0].end, Some(0xc000_0000));
        assert_eq!(m.tlbs[0].ways, Ways::N(4));
        assert_eq!(m.tlbs[1].ways, Ways::N(12));
        assert_eq!(
            m.tlbs[0].page,
            vec![PageSize::Size(4096), PageSize::Size(2 << 20)]
        );
        assert_eq!(
            m.tlbs[1].partition.as_ref().unwrap().lower_policy,
            Policy::Lru
        );
        // Round trip through TOML keeps the machine.
        assert_eq!(MachineConfig::from_toml(&m.to_toml(), "again").unwrap(), m);
    }

    #[test]
    fn next_is_a_name_or_a_list() {
        let text = "[[tlb]]\nname='d'\nentries=4\nnext=['s', 't']\n[[tlb]]\nname='s'\nentries=8\nnext='t'\n[[tlb]]\nname='t'\nentries=8\npage='2M'\n";
        let m = MachineConfig::from_toml(text, "m.toml").unwrap();
        assert_eq!(m.tlbs[0].next, ["s", "t"]);
        assert_eq!(m.tlbs[1].next, ["t"]);
        assert!(m.tlbs[2].next.is_empty());
        let again = m.to_toml();
        assert!(again.contains("next = \"t\"\n"), "{again}");
        assert_eq!(MachineConfig::from_toml(&again, "again").unwrap(), m);
        let t = tlb_from_flag("d:entries=4,next=s+t").unwrap();
        assert_eq!(t["next"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = MachineConfig::from_toml("[[tlb]]\nname='d'\nentires=64\n", "m.toml").unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("m.toml: "), "{s}");
        assert!(s.contains("entires") && s.contains("line"), "{s}");
    }

    /// The error of assembling a machine, which must be one line.
    fn error(text: Option<&str>, flags: &[&str], sets: &[&str]) -> String {
        let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let e = crate::machine::Machine::assemble(text, "m.toml", &flags, &sets)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn errors_are_one_line_naming_file_line_and_key() {
        let known = "(expected one of: name, entries, ways, policy, page, serves, next, asid, partition, placement, 3c)";
        let d = "[[tlb]]\nname = 'd'\nentries = 64\n";
        assert_eq!(
            error(Some("[[tlb]]\nname = 'd'\nentries = = 3\n"), &[], &[]),
            "m.toml: line 3, column 11: syntax: extra `=`, expected nothing"
        );
        assert_eq!(
            error(Some(&format!("{d}entires = 64\n")), &[], &[]),
            format!("m.toml: line 4, column 1: tlb.d.entires: unknown key {known}")
        );
        // An element of an array of tables without a name is named by its index.
        assert_eq!(
            error(
                Some(&format!("{d}[[tlb]]\nentries = 8\nfoo = 1\n")),
                &[],
                &[]
            ),
            format!("m.toml: line 6, column 1: tlb[1].foo: unknown key {known}")
        );
        assert_eq!(
            error(Some("[[tlb]]\nname = 'd'\n"), &[], &[]),
            "m.toml: line 1, column 1: tlb.d.entries: missing (this key is required)"
        );
        assert_eq!(
            error(Some(&format!("{d}page = ['4k', '3k']\n")), &[], &[]),
            "m.toml: line 4, column 8: tlb.d.page: '3k' is not a page size (e.g. 4k, 2M, 1G)"
        );
        assert_eq!(
            error(Some(&format!("{d}serves = 'both'\n")), &[], &[]),
            "m.toml: line 4, column 10: tlb.d.serves: 'both' is not one of: instruction, data, unified"
        );
        assert_eq!(
            error(Some(&format!("{d}ways = true\n")), &[], &[]),
            "m.toml: line 4, column 8: tlb.d.ways: invalid type: boolean `true`, expected an integer or a string"
        );
        assert_eq!(
            error(Some("[pages]\nregions = [{ start = 0, end = 8192, size = 3 }]\n"), &[], &[]),
            "m.toml: line 2, column 44: pages.regions[0].size: 3 is not a page size (a power of two of at least 2 bytes, e.g. 4096)"
        );
        assert_eq!(
            error(Some("[refill]\ncycles = { L9 = 3 }\n[[tlb]]\nname='u'\nentries=64\n"), &[], &[]),
            "m.toml: line 2, column 12: refill.cycles.L9: unknown key (expected one of: L1U, L1K, L2, L3, Modify, Invalid, stlb_hit, stlb_miss, prefetch, l1u_count, micro)"
        );
        // Errors of the second phase (the machine's validation) get the line of their key.
        assert_eq!(
            error(Some(&format!("{d}ways = 3\n")), &[], &[]),
            "m.toml: line 4, column 1: tlb.d.ways: 3 does not divide 64 entries"
        );
        // A key from --tlb or --set is blamed on the flag, with the key it names.
        assert_eq!(
            error(None, &["d:foo=1"], &[]),
            format!("--tlb: tlb.d.foo: unknown key {known}")
        );
        assert_eq!(
            error(Some(d), &["dtlb:page=3k"], &[]),
            "--tlb: tlb.dtlb.page: '3k' is not a page size (e.g. 4k, 2M, 1G)"
        );
        assert_eq!(
            error(Some(d), &["e:entries=8,policy=mru"], &[])
                .split(" (")
                .next(),
            Some("--tlb: tlb.e.policy: unknown replacement policy \"mru\"")
        );
        assert_eq!(
            error(Some(d), &[], &["tlb.d.bogus=1"]),
            format!("--set: tlb.d.bogus: unknown key {known}")
        );
        assert_eq!(
            error(Some(d), &[], &["tlb.d.ways=5"]),
            "--set: tlb.d.ways: 5 does not divide 64 entries"
        );
        assert_eq!(
            error(Some(d), &[], &["machine.sed=5"]),
            "--set: machine.sed: unknown key (expected one of: name, description, seed, straddle, global_above)"
        );
        // ... and a bad key of the file stays the file's, at its line, whatever the flags.
        assert_eq!(
            error(
                Some(&format!("{d}ways = 3\n")),
                &["i:entries=8"],
                &["machine.seed=2"]
            ),
            "m.toml: line 4, column 1: tlb.d.ways: 3 does not divide 64 entries"
        );
        assert_eq!(
            error(
                Some(&format!("{d}entires = 64\n")),
                &[],
                &["machine.seed=2"]
            ),
            format!("m.toml: line 4, column 1: tlb.d.entires: unknown key {known}")
        );
    }

    #[test]
    fn overrides_address_tlbs_by_name() {
        let mut t: toml::Table =
            toml::from_str("[[tlb]]\nname='dtlb'\nentries=64\n[[tlb]]\nname='itlb'\nentries=32\n")
                .unwrap();
        apply_overrides(
            &mut t,
            &[
                "tlb.itlb.entries=128".into(),
                "tlb.dtlb.policy=fifo".into(),
                "machine.seed=7".into(),
            ],
        )
        .unwrap();
        let m = MachineConfig::from_table(t.clone(), "x").unwrap();
        assert_eq!(m.tlbs[1].entries, 128);
        assert_eq!(m.tlbs[0].policy, Policy::Fifo);
        assert_eq!(m.machine.seed, 7);
        let e = apply_overrides(&mut t, &["tlb.l2.entries=1".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--set: tlb.l2.entries: no TLB named 'l2' (have: dtlb, itlb)"
        );
        assert!(apply_overrides(&mut t, &["machine.seed".into()]).is_err());
    }

    #[test]
    fn quick_flags_become_tlb_tables() {
        let t = tlb_from_flag("dtlb:entries=64,ways=full,policy=lru,page=4k").unwrap();
        let mut root = toml::Table::new();
        root.insert(
            "tlb".into(),
            toml::Value::Array(vec![toml::Value::Table(t)]),
        );
        let m = MachineConfig::from_table(root, "--tlb").unwrap();
        let d = &m.tlbs[0];
        assert_eq!(
            (d.entries, d.ways, d.serves),
            (64, Ways::Full, Serves::Data)
        );
        let t = tlb_from_flag("utlb:entries=8,page=4k+2M,partition=2/fifo/random").unwrap();
        assert_eq!(t["partition"]["lower"].as_integer(), Some(2));
        assert!(tlb_from_flag(":entries=3").is_err());
        assert!(tlb_from_flag("d:entries").is_err());
    }

    /// `--cache` flags become `[[cache]]` tables of the one schema; a bad key is blamed on
    /// the flag, a bad `--set cache.NAME.KEY` on `--set`; the normalised text reads back.
    #[test]
    fn quick_cache_flags_become_cache_tables() {
        let flags = [
            "dl1:size=32k,line=64,ways=8,policy=lru,next=l2,write=through,allocate=no".to_string(),
            "l2:size=1M,line=64,ways=full,3c=yes,fetch=load-forward,prefetch_distance=2".into(),
        ];
        let m = MachineConfig::assemble_all(
            None,
            "--cache",
            &[],
            &flags,
            &["cache.l2.sub_block=16".into()],
        )
        .unwrap();
        let (d, l2) = (&m.caches[0], &m.caches[1]);
        assert_eq!(
            (d.size, d.line, d.ways),
            (Bytes(32 << 10), Bytes(64), Ways::N(8))
        );
        assert_eq!((d.serves, d.next.as_deref()), (Serves::Data, Some("l2")));
        assert_eq!(
            (d.write, d.allocate, d.three_c),
            (WritePolicy::Through, Allocate::No, false)
        );
        assert_eq!(
            (l2.serves, l2.ways, l2.three_c),
            (Serves::Unified, Ways::Full, true)
        );
        assert_eq!(
            (l2.fetch, l2.prefetch_distance, l2.sub_block),
            (FetchPolicy::LoadForward, Some(2), Some(Bytes(16)))
        );
        assert!(m.tlbs.is_empty());
        assert_eq!(MachineConfig::from_toml(&m.to_toml(), "again").unwrap(), m);
        let known = "(expected one of: name, size, line, ways, policy, serves, next, write, allocate, fetch, prefetch_distance, sub_block, 3c)";
        let cache_error = |flags: &[&str], sets: &[&str]| {
            let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            crate::machine::Machine::assemble_all(None, "--cache", &[], &flags, &sets)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            cache_error(&["c:size=1k,line=64,foo=1"], &[]),
            format!("--cache: cache.c.foo: unknown key {known}")
        );
        assert_eq!(
            cache_error(&["c:size=1k,line=64,allocate=maybe"], &[]),
            "--cache: cache.c.allocate: 'maybe' is not one of: yes, no, no-fetch"
        );
        assert_eq!(
            cache_error(&["c:size=1k,line=64,3c=perhaps"], &[]),
            "--cache: cache.c.3c: 'perhaps' is not yes or no"
        );
        assert_eq!(
            cache_error(&["c:size=1k,line=48"], &[]),
            "--cache: cache.c.line: 48 is not a power of two"
        );
        assert_eq!(
            cache_error(&["c:size=1k,line=64"], &["cache.x.ways=2"]),
            "--set: cache.x.ways: no cache named 'x' (have: c)"
        );
        assert_eq!(
            cache_error(&["c:size=1k,line=64"], &["cache.c.ways=3"]),
            "--set: cache.c.ways: 3 does not divide the 16 lines"
        );
        assert!(cache_from_flag(":size=1k").is_err());
        assert!(cache_from_flag("c:size").is_err());
    }

    /// A name means one thing however the machine is written: `dtlb` without `serves` is a
    /// data TLB in a `[[tlb]]` table as with `--tlb`, `itlb` an instruction TLB, anything
    /// else unified; a `serves` written (in the text, the flag or by `--set`) wins.
    #[test]
    fn serves_defaults_from_the_name_in_every_source() {
        let text = "[[tlb]]\nname='dtlb'\nentries=64\n[[tlb]]\nname='itlb'\nentries=32\n\
                    [[tlb]]\nname='stlb'\nentries=512\n[[tlb]]\nname='d2'\nentries=8\nserves='unified'\n";
        let serves = |m: &MachineConfig| m.tlbs.iter().map(|t| t.serves).collect::<Vec<_>>();
        let want = vec![
            Serves::Data,
            Serves::Instruction,
            Serves::Unified,
            Serves::Unified,
        ];
        assert_eq!(
            serves(&MachineConfig::from_toml(text, "m.toml").unwrap()),
            want
        );
        // Through the table path (a flag and an override) too.
        let m = MachineConfig::assemble(
            Some(text),
            "m.toml",
            &["dx:entries=4".into(), "iy:entries=4,serves=unified".into()],
            &["tlb.stlb.entries=256".into()],
        )
        .unwrap();
        let mut all = want.clone();
        all.extend([Serves::Data, Serves::Unified]);
        assert_eq!(serves(&m), all);
        let m = MachineConfig::assemble(
            Some(text),
            "m.toml",
            &[],
            &["tlb.dtlb.serves=unified".into()],
        )
        .unwrap();
        assert_eq!(m.tlbs[0].serves, Serves::Unified);
        // The normalised text says what each structure serves, and reads back the same.
        let m = MachineConfig::from_toml(text, "m.toml").unwrap();
        let again = m.to_toml();
        assert!(again.contains("serves = \"data\"") && again.contains("serves = \"instruction\""));
        assert_eq!(MachineConfig::from_toml(&again, "again").unwrap(), m);
    }
}
