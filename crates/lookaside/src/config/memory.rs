//! `[memory]`: the memory system behind translation (caches, write buffer, uncached
//! addresses, the miss handlers' own work).

use super::*;

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
pub(super) fn default_unmapped_mask() -> u64 {
    0x1fff_ffff
}
pub(super) fn default_uncached_cycles() -> u32 {
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

pub(super) fn direct_mapped() -> Ways {
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

pub(super) fn wb_entries() -> usize {
    6
}
pub(super) fn wb_write_cycles() -> u32 {
    5
}
pub(super) fn wb_page_mode_cycles() -> u32 {
    1
}
pub(super) fn wb_dram_page() -> Bytes {
    Bytes(4096)
}
pub(super) fn wb_partial_cycles() -> u32 {
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

pub(super) fn utlb_instructions() -> u32 {
    9
}
pub(super) fn ktlb_instructions() -> u32 {
    250
}
pub(super) fn pte_bytes() -> u32 {
    4
}
