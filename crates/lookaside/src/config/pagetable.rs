//! `[pagetable]`: a page table's organisation and the walker that refills the TLBs from it.

use super::*;

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

pub(super) fn default_walk_cache() -> Bytes {
    Bytes(256 << 10)
}
pub(super) fn default_walk_line() -> u32 {
    32
}
pub(super) fn default_walk_costs() -> String {
    "huck93".into()
}
