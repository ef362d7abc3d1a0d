//! `[refill]`: the software refill of a MIPS R2000-style TLB, with Bala's software TLB
//! (`[refill.stlb]`) and IPC-path prefetch (`[refill.prefetch]`), and its cost overrides.

use super::*;

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

pub(super) fn default_stlb_entries() -> usize {
    1024
}

pub(super) fn one() -> usize {
    1
}

pub(super) fn default_stlb_classes() -> Vec<KernelPte> {
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

pub(super) fn three_entries() -> usize {
    3
}

pub(super) fn default_levels() -> u8 {
    3
}

pub(super) fn default_costs() -> String {
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
