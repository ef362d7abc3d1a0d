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
//! policy = "lru"           # lru | fifo | random | plru | nru | user-first
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

mod cache;
mod flags;
mod memory;
mod origin;
mod pagetable;
mod prefetch;
mod refill;
mod schema;
mod tlb;
mod vac;
mod values;

pub use cache::*;
pub use flags::*;
pub use memory::*;
pub use origin::*;
pub use pagetable::*;
pub use prefetch::*;
pub use refill::*;
pub use schema::json_schema;
pub use tlb::*;
pub use vac::*;
pub use values::*;

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
    /// CPUs, each with its own TLBs (but those marked `shared`); the trace's CPU markers say
    /// which runs each event ([`crate::event::CPU_MARK`]). At most 64.
    #[serde(default = "one_cpu", skip_serializing_if = "is_one_cpu")]
    pub cpus: u32,
    /// Which CPUs' TLBs an unmap, protect or remap reaches (the shootdown the OS sends):
    /// `ran` (those that ran the address space), `all`, or `local` (the running CPU's only:
    /// the trace's own shootdown events, TLB flushes naming their CPUs, do the rest).
    #[serde(default, skip_serializing_if = "Shootdown::is_default")]
    pub shootdown: Shootdown,
    /// What a shootdown costs, in cycles (none by default: see [`ShootdownCycles`]).
    #[serde(default, skip_serializing_if = "ShootdownCycles::is_none")]
    pub shootdown_cycles: ShootdownCycles,
}

/// What a TLB shootdown costs on a machine of several CPUs, in cycles, by the side that pays:
/// the sender of a request (sending its interrupts and waiting for the last acknowledgement)
/// and each other CPU it reaches (taking the interrupt, running the handler, invalidating).
/// A CPU's invalidation of its own TLBs is not a shootdown's cost (a machine of one CPU makes
/// it too). Every figure is 0 unless given: the cost depends on the processor, the interrupt
/// controller and the kernel, and no source this project can cite gives a table, so the
/// user states the machine's own (measured, or assumed and said so).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShootdownCycles {
    /// The sender, per request that reaches another CPU.
    #[serde(default)]
    pub send: u64,
    /// The sender, per other CPU a request reaches (an interrupt sent and acknowledged).
    #[serde(default)]
    pub per_target: u64,
    /// Each other CPU a request reaches: the interrupt and its handler.
    #[serde(default)]
    pub receive: u64,
    /// Each other CPU a request reaches, per page it invalidates there.
    #[serde(default)]
    pub page: u64,
    /// Each other CPU a request reaches, per flush of its whole TLB or of one address space.
    #[serde(default)]
    pub flush_all: u64,
}

impl ShootdownCycles {
    fn is_none(&self) -> bool {
        *self == ShootdownCycles::default()
    }
}

fn one_cpu() -> u32 {
    1
}

fn is_one_cpu(n: &u32) -> bool {
    *n == 1
}

/// Which CPUs' TLBs an invalidation of the OS reaches on a machine of several CPUs (see
/// [`MachineSection::shootdown`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Shootdown {
    /// The CPUs that have run the address space since their TLBs were last flushed whole
    /// (Linux's `mm_cpumask`); every CPU for a global page.
    #[default]
    Ran,
    /// Every CPU.
    All,
    /// The running CPU only.
    Local,
}

impl Shootdown {
    fn is_default(&self) -> bool {
        *self == Shootdown::default()
    }
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
            cpus: 1,
            shootdown: Shootdown::default(),
            shootdown_cycles: ShootdownCycles::default(),
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

impl PageSection {
    /// Every page size the section names, with the key that names it (`pages.size`,
    /// `pages.regions[i].size`), for checks that refuse a size.
    pub fn sizes(&self) -> impl Iterator<Item = (String, PageSize)> + '_ {
        std::iter::once(("pages.size".to_string(), self.size)).chain(
            self.regions
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("pages.regions[{i}].size"), r.size)),
        )
    }
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

#[cfg(test)]
mod tests;
