//! `[[tlb]]`: one TLB structure, its partition and placement, and Uhlig's dynamic
//! partitioning of it.

use super::*;

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
    /// On a machine of several CPUs (`machine.cpus`), one structure every CPU uses (a shared
    /// last-level TLB), rather than one per CPU.
    #[serde(default, deserialize_with = "yes_no", skip_serializing_if = "is_false")]
    #[schemars(schema_with = "schema::switch")]
    pub shared: bool,
}

pub(super) fn default_policy() -> Policy {
    Policy::Lru
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

pub(super) fn default_period() -> u64 {
    1000
}

pub(super) fn default_threshold() -> f64 {
    0.05
}
