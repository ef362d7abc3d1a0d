//! `[vac]`: a virtually indexed, physically tagged cache and its OS's consistency policy.

use super::*;

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

pub(super) fn default_vac_size() -> Bytes {
    Bytes(128 << 10)
}
pub(super) fn default_vac_ways() -> usize {
    2
}
pub(super) fn default_vac_line() -> Bytes {
    Bytes(32)
}
pub(super) fn default_vac_page() -> Bytes {
    Bytes(2 << 10)
}
pub(super) fn default_vac_policy() -> String {
    "pseudo-aliasing".into()
}
pub(super) fn default_vac_timing() -> String {
    "hp9000-834".into()
}
