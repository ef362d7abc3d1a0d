//! `[prefetch]`: Bala's IPC-path prefetching on a machine whose TLB misses are walked.

use super::*;

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
