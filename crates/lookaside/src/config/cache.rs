//! `[[cache]]`: one cache of the DineroIV-style hierarchy.

use super::*;

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
