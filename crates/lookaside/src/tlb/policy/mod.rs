//! Replacement policies, one file each, behind one small trait with static dispatch.
//!
//! A policy owns the replacement state of every set of one partition (the whole set when the
//! TLB is not partitioned); ways are numbered from 0 within the partition. The [`super::Tlb`]
//! tells it what happened — a hit, a fill, an invalidation — and asks it for a victim only when
//! every way of the partition is valid (invalid ways are always filled first, lowest first).
//!
//! The per-access calls go through [`State`], an enum with one variant per policy (two for
//! LRU) and a `match` in each hook, so there is no dynamic dispatch in the hot path. Adding a
//! policy takes one new file implementing [`Replacement`], its `mod` line below, one line in
//! the `policies!` invocation (which generates the [`Policy`] variant and its names), and its
//! [`State`] variant (in the enum, `State::new` and `each_state!`).

mod fifo;
pub(crate) mod list;
mod lru;
mod nru;
mod plru;
mod random;
mod user_first;

pub use random::SplitMix64;

use std::fmt;
use std::str::FromStr;

use crate::event::{Kind, Mode};

/// What a replacement policy knows of the access a hook serves: the page (or block) number
/// and the context tag the structure keys its entry by (for a TLB, the address space and page
/// size; see [`super::Tlb`]), and the kind and mode of the reference. A policy that uses any
/// of it — a mode-aware insertion, a signature of the page — is one file like the others
/// ([`user_first`] is one); the hooks are inlined, so a policy that ignores it costs nothing.
///
/// The kind and mode are those the structure was last told ([`super::Tlb::set_reference`]);
/// a structure that is never told (a cache) refuses a policy that reads them
/// ([`Policy::reads_reference`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessInfo {
    pub key: u64,
    pub ctx: u64,
    pub kind: Kind,
    pub mode: Mode,
}

impl AccessInfo {
    /// An access nothing is known of but its key and context: a user-mode load.
    pub const fn of(key: u64, ctx: u64) -> AccessInfo {
        AccessInfo {
            key,
            ctx,
            kind: Kind::Load,
            mode: Mode::User,
        }
    }
}

/// An access the unit tests of a policy know nothing of (a user-mode load of page 0).
#[cfg(test)]
pub(crate) const ANY: AccessInfo = AccessInfo::of(0, 0);

/// What a replacement policy must do. `set` is the set number, `way` the way number within the
/// partition (`0..ways` of the `ways` given to [`Replacement::new`]); `at` the access a hook
/// serves ([`AccessInfo`]).
pub(crate) trait Replacement: Clone {
    /// State for `sets` sets of `ways` ways each, all of them invalid; an error (never an
    /// abort) when its arrays cannot be allocated.
    fn new(sets: usize, ways: usize) -> Result<Self, String>;
    /// A lookup hit `way`.
    fn on_hit(&mut self, set: usize, way: usize, at: AccessInfo);
    /// `way` now holds a new entry: it was invalid, or it is the victim just returned.
    fn on_fill(&mut self, set: usize, way: usize, at: AccessInfo);
    /// The entry in `way` was removed; the way is invalid until its next `on_fill`.
    fn on_invalidate(&mut self, set: usize, way: usize);
    /// The way to replace for the access `at`. Only called when every way of the set is
    /// valid. A policy that needs randomness draws from `rng`, exactly once per call.
    fn victim(&mut self, set: usize, rng: &mut SplitMix64, at: AccessInfo) -> usize;
    /// The mode of the reference that filled the valid `way`, for a policy that keeps it:
    /// a move of the partition point refills every entry in it. Others keep none: user.
    fn filled_mode(&self, _set: usize, _way: usize) -> Mode {
        Mode::User
    }
}

/// Code to run with the concrete type of a [`State`]'s policy ([`State::visit`]): a whole
/// miss path monomorphised per policy, its hooks inlined, for one `match` per call.
pub(crate) trait Visit {
    type Out;
    fn visit<P: Replacement>(self, pol: &mut P) -> Self::Out;
}

/// Generates [`Policy`] (names, parsing) from one list.
macro_rules! policies {
    ($( $(#[$doc:meta])* $variant:ident = [$name:literal $(, $alias:literal)*], )+) => {
        /// A replacement policy. Parses from its [`Policy::name`] or an alias
        /// (case-insensitive): `lru`, `fifo`, `random`, `plru`, `nru` (or `clock`), `user-first`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Policy {
            $( $(#[$doc])* $variant, )+
        }

        impl Policy {
            /// Every policy, in declaration order.
            pub const ALL: &'static [Policy] = &[$(Policy::$variant),+];

            /// The canonical lower-case name (used in reports and configs).
            pub fn name(self) -> &'static str {
                match self {
                    $(Policy::$variant => $name,)+
                }
            }

            /// Every spelling [`FromStr`] accepts for this policy, canonical name first.
            pub fn names(self) -> &'static [&'static str] {
                match self {
                    $(Policy::$variant => &[$name $(, $alias)*],)+
                }
            }
        }

    };
}

policies! {
    /// True least-recently-used: the victim is the valid way hit or filled longest ago.
    Lru = ["lru"],
    /// First-in first-out: the victim is the valid way filled longest ago; hits change nothing.
    Fifo = ["fifo"],
    /// The victim is drawn uniformly among the partition's ways from the TLB's seeded PRNG.
    Random = ["random"],
    /// Tree pseudo-LRU (one bit per internal node of a binary tree over the ways).
    Plru = ["plru"],
    /// Not-recently-used with a clock hand (second chance): one reference bit per way.
    Nru = ["nru", "clock"],
    /// LRU among the set's user-mode entries; the kernel's (filled by a kernel-mode
    /// reference) only when there is no user entry ([`user_first`]).
    UserFirst = ["user-first"],
}

/// Runs `$e` with `$s` bound to the concrete policy of state `$state`.
macro_rules! each_state {
    ($state:expr, $s:ident => $e:expr) => {
        match $state {
            State::LruStamps($s) => $e,
            State::LruList($s) => $e,
            State::Fifo($s) => $e,
            State::Random($s) => $e,
            State::Plru($s) => $e,
            State::Nru($s) => $e,
            State::UserFirst($s) => $e,
        }
    };
}

/// The replacement state of one partition: one variant per policy, LRU's two representations
/// apart (see [`lru`]), so that the one `match` of a dispatch reaches concrete code with no
/// further choice inside. (An explicit tag byte makes the per-hit dispatch a plain jump-table
/// load.)
#[derive(Clone)]
#[repr(u8)]
pub(crate) enum State {
    LruStamps(lru::Stamps),
    LruList(lru::List),
    Fifo(fifo::Fifo),
    Random(random::Random),
    Plru(plru::Plru),
    Nru(nru::Nru),
    UserFirst(user_first::UserFirst),
}

impl State {
    pub(crate) fn new(policy: Policy, sets: usize, ways: usize) -> Result<State, String> {
        Ok(match policy {
            Policy::Lru if ways <= lru::STAMP_MAX_WAYS => {
                State::LruStamps(lru::Stamps::new(sets, ways)?)
            }
            Policy::Lru => State::LruList(lru::List::new(sets, ways)?),
            Policy::Fifo => State::Fifo(fifo::Fifo::new(sets, ways)?),
            Policy::Random => State::Random(random::Random::new(sets, ways)?),
            Policy::Plru => State::Plru(plru::Plru::new(sets, ways)?),
            Policy::Nru => State::Nru(nru::Nru::new(sets, ways)?),
            Policy::UserFirst => State::UserFirst(user_first::UserFirst::new(sets, ways)?),
        })
    }

    /// Run `v` with this state's concrete policy.
    #[inline(always)]
    pub(crate) fn visit<V: Visit>(&mut self, v: V) -> V::Out {
        each_state!(self, s => v.visit(s))
    }

    #[inline(always)]
    pub(crate) fn on_hit(&mut self, set: usize, way: usize, at: AccessInfo) {
        each_state!(self, s => s.on_hit(set, way, at))
    }

    #[inline(always)]
    pub(crate) fn on_fill(&mut self, set: usize, way: usize, at: AccessInfo) {
        each_state!(self, s => s.on_fill(set, way, at))
    }

    #[inline]
    pub(crate) fn on_invalidate(&mut self, set: usize, way: usize) {
        each_state!(self, s => s.on_invalidate(set, way))
    }

    pub(crate) fn filled_mode(&self, set: usize, way: usize) -> Mode {
        each_state!(self, s => s.filled_mode(set, way))
    }
}

impl Policy {
    /// Whether the policy reads the reference's kind or mode ([`AccessInfo`]): only a
    /// structure told them ([`super::Tlb::set_reference`]) may use it.
    pub fn reads_reference(self) -> bool {
        matches!(self, Policy::UserFirst)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> Result<Policy, String> {
        let t = s.trim();
        for &p in Policy::ALL {
            if p.names().iter().any(|n| n.eq_ignore_ascii_case(t)) {
                return Ok(p);
            }
        }
        let all: Vec<&str> = Policy::ALL
            .iter()
            .flat_map(|p| p.names().iter().copied())
            .collect();
        Err(format!(
            "unknown replacement policy {s:?} (expected one of: {})",
            all.join(", ")
        ))
    }
}

// In a configuration a policy is its name (any case); written back as its first name, so
// `"clock"` reads as `nru`.
serde_by_name!(
    Policy,
    Policy::ALL.iter().flat_map(|p| p.names().iter().copied())
);
