//! The TLB structure engine: one set-associative translation structure, nothing more.
//!
//! A [`Tlb`] knows nothing of address spaces, page sizes or privilege modes. The caller (the
//! machine) reduces every reference to three numbers:
//!
//! * `vpn` — the virtual page number at the entry's page size (any `u64`);
//! * `ctx` — an opaque context tag (the machine packs the ASID, a page-size code, a global bit…);
//! * `gctx` — a second tag that also matches, for "global" entries; [`NO_CTX`] when there is
//!   none. [`NO_CTX`] is never stored, so it never matches anything.
//!
//! It is kept this small so that the hot path — one call per simulated reference — is a few
//! loads and compares, with no allocation and no dynamic dispatch (see *Speed* below).
//!
//! # Semantics
//!
//! * **Matching.** An entry matches `(vpn, ctx, gctx)` iff `entry.vpn == vpn` and
//!   `entry.ctx == ctx || entry.ctx == gctx`. The TLB never holds two entries with the same
//!   `(vpn, ctx)` (a [`Tlb::fill`] of a present key refreshes it instead), but an entry
//!   `(vpn, ctx)` and an entry `(vpn, gctx)` can both be present; then the exact one,
//!   `(vpn, ctx)`, is the one that hits (or is invalidated). `ctx == NO_CTX` in a lookup means
//!   "no context": only `gctx` can match.
//! * **Sets.** The set of `vpn` is `vpn % sets` (a mask when `sets` is a power of two), with
//!   `sets = entries / ways`. Any `ways` dividing `entries` works, powers of two or not
//!   (1536 entries 12-way, 48 entries 3-way, 6 entries 6-way, 1 entry…).
//! * **Partitions.** Without a [`Partition`] every set is one partition, replaced by
//!   [`TlbParams::policy`], and the `part` argument of fills is ignored. With one, ways
//!   `0..lower_ways` of every set form the lower (e.g. MIPS "wired") partition, replaced by
//!   `lower_policy`, and ways `lower_ways..ways` the upper one, replaced by `upper_policy`
//!   (`TlbParams::policy` is then unused). The caller decides which partition a miss fills
//!   ([`Part`]); a hit in either partition updates that partition's replacement state.
//! * **Fills.** A fill takes the lowest-numbered invalid way of its partition; only when every
//!   way of the partition is valid does the partition's policy choose a victim, whose entry
//!   [`Tlb::fill`] returns.
//! * **Invalidation** ([`Tlb::invalidate`], [`Tlb::flush_if`], [`Tlb::flush_all`]) makes the
//!   way invalid, so it is the first reused, and tells the policy (LRU and FIFO drop the way
//!   from their order, NRU clears its reference bit, PLRU and Random change nothing).
//!   `flush_all` is exactly `flush_if(|_, _| true)`; `flush_if` visits valid entries in
//!   (set, way) order.
//! * **Policies** (state per set per partition, ways numbered within the partition):
//!   - `lru`: the victim is the valid way whose last hit or fill is oldest.
//!   - `fifo`: the victim is the valid way filled longest ago; hits change nothing.
//!   - `random`: the victim is uniform among the partition's ways, from one draw of the TLB's
//!     [`SplitMix64`] seeded with [`TlbParams::seed`] (`below(n)` = high half of `x * n`). One
//!     draw per victim choice, none when an invalid way is filled; both partitions share the
//!     stream.
//!   - `plru`: tree-PLRU over `P` = the next power of two `>= ways` leaves; a hit or fill sets
//!     the bits on its path to point away from it; the victim follows the bits from the root,
//!     except that a bit pointing at a subtree with no existing way (only possible when `ways`
//!     is not a power of two, and only for a right subtree) is overridden: the walk goes left.
//!     All bits start at 0 ("left").
//!   - `nru` / `clock`: a reference bit per way, set by hits and fills, cleared by
//!     invalidation; a hand per set, starting at way 0. The victim is the first way from the
//!     hand (going round in way order) whose bit is 0, clearing the set bits it passes; the
//!     hand then points just past the victim. Fills of invalid ways do not move the hand.
//! * **Determinism.** The same parameters, seed and call sequence give the same results,
//!   whatever the lookup structure ([`Lookup`]) in use.
//!
//! # Speed
//!
//! Tags live in two flat arrays (`vpn`, `ctx`, struct of arrays); an invalid way has
//! `ctx == NO_CTX`. A lookup goes through up to three levels, each exact:
//!
//! 1. The *MRU entry* — the entry of the last hit or fill, with the context of the query that
//!    hit it. Another hit on it changes no policy state (LRU: the MRU stays MRU; FIFO and
//!    Random: hits change nothing; PLRU: the same bits would be set again; NRU: its bit is
//!    already set, and only victim choices, which come with fills, clear bits), so it returns
//!    at once. Forgotten on every invalidation and flush; every fill makes the new entry MRU.
//! 2. A small direct-mapped table of *hints* (`hint.rs`, 256 buckets by a hash of the vpn)
//!    saying in which set and way the entry of a page was last found or filled. If the bucket
//!    names an entry the query hits and the tags there still hold it, the hit costs a bucket
//!    check, a tag check and the policy's hit hook. Real streams interleave a few pages (code,
//!    stack, data), which the MRU entry alone would miss. Hints need no maintenance on
//!    eviction, invalidation or flush: the tag check catches them.
//! 3. A scan of the set, or for `ways >= INDEX_MIN_WAYS` a per-set hash index (`index.rs`).
//!
//! Replacement state is updated through an enum over the policies (`policy/`), matched once
//! per call; the search-and-fill path of an unpartitioned TLB is one function per policy
//! (`Access`, through `State::visit`), so that a miss costs one match and its hooks inline. Hit, fill and invalidate hooks are O(1) (PLRU: one and-or per six tree levels);
//! victim choice is O(1) for FIFO, Random and LRU above 16 ways (a recency list), a
//! branch-free pass over at most 16 timestamps for smaller LRU sets, O(log ways) for PLRU and
//! amortised O(1) for NRU — so a 1024-entry fully associative TLB costs about what a 64-entry
//! one does (`bench.rs`).
//!
//! The machine's TLBs, looked up with one exact context each, go through [`Engine`]: an
//! unpartitioned LRU or FIFO TLB there is an [`ExactTlb`] (`exact.rs`), the same semantics on
//! a short path without the MRU entry, hints, second context or partitions, which a miss
//! would otherwise pay for; every other TLB is a [`Tlb`].

mod climb;
mod exact;
mod hint;
mod index;
pub(crate) mod policy;

#[cfg(test)]
mod bench;
#[cfg(test)]
pub(crate) mod reference;
/// A move of the partition point of a TLB that has none.
pub(crate) fn no_partition() -> ParamError {
    ParamError {
        field: "partition.lower_ways",
        message: "the TLB has no partition to move".into(),
    }
}

#[cfg(test)]
mod tests;

pub use climb::{DynamicParams, DynamicWork, HillClimber};
pub use exact::{Engine, ExactTlb};
pub use policy::{AccessInfo, Policy, SplitMix64};

use crate::event::{Kind, Mode};
use hint::{Hint, Hints};
use index::WayIndex;
use policy::{Replacement, State, Visit};
use std::fmt;

/// The context no entry has: pass it as `gctx` when global entries are not in use.
pub const NO_CTX: u64 = u64::MAX;

/// With [`Lookup::Auto`], sets of at least this many ways are looked up through a hash index
/// instead of a scan. Measured crossover (`bench.rs`, fully associative LRU on the realistic
/// stream): equal at 24 ways, the index ahead from 32.
pub const INDEX_MIN_WAYS: usize = 32;

/// Largest `entries` (and so `ways`) accepted: far beyond any real TLB, small enough that the
/// arrays always fit in memory and way numbers in `u32`.
pub const MAX_ENTRIES: usize = 1 << 24;

/// Which partition of its set a fill goes to (ignored when the TLB is not partitioned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// Ways `0..lower_ways`.
    Lower,
    /// Ways `lower_ways..ways`.
    Upper,
}

/// A split of every set into a lower and an upper partition with their own policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Partition {
    /// Ways in the lower partition, `1..ways`.
    pub lower_ways: usize,
    pub lower_policy: Policy,
    pub upper_policy: Policy,
}

/// The shape and replacement of one TLB.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TlbParams {
    /// Total entries, a multiple of `ways`.
    pub entries: usize,
    /// Associativity; `ways == entries` is fully associative.
    pub ways: usize,
    /// Replacement policy of every set (unused when `partition` is set).
    pub policy: Policy,
    pub partition: Option<Partition>,
    /// Seed of the PRNG used by the random policy.
    pub seed: u64,
}

pub use crate::error::ParamError;

/// Which set a key (a page number, a block number) falls in: its low bits when the number of
/// sets is a power of two, else the key modulo it. The one set-index function of the TLBs'
/// and the caches' tag stores.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SetIndex {
    sets: u64,
    mask: u64,
    pow2: bool,
}

impl SetIndex {
    pub(crate) fn new(sets: usize) -> SetIndex {
        SetIndex {
            sets: sets as u64,
            mask: (sets as u64).wrapping_sub(1),
            pow2: sets.is_power_of_two(),
        }
    }

    /// The set of `key`.
    #[inline(always)]
    pub(crate) fn of(self, key: u64) -> usize {
        if self.pow2 {
            (key & self.mask) as usize
        } else {
            (key % self.sets) as usize
        }
    }

    /// Whether the number of sets is a power of two (then [`SetIndex::masked`] applies).
    pub(crate) fn pow2(self) -> bool {
        self.pow2
    }

    /// [`SetIndex::of`] for a caller that knows the number of sets is a power of two.
    #[inline(always)]
    pub(crate) fn masked(self, key: u64) -> usize {
        (key & self.mask) as usize
    }
}

impl TlbParams {
    /// Whether its replacement (either partition's, if partitioned) reads the reference's
    /// kind or mode ([`Policy::reads_reference`]): whoever drives it must tell it.
    pub fn reads_reference(&self) -> bool {
        self.partition.map_or(self.policy.reads_reference(), |q| {
            q.lower_policy.reads_reference() || q.upper_policy.reads_reference()
        })
    }

    /// `entries` entries, `ways`-way, one policy, no partition, seed 0.
    pub fn new(entries: usize, ways: usize, policy: Policy) -> TlbParams {
        TlbParams {
            entries,
            ways,
            policy,
            partition: None,
            seed: 0,
        }
    }

    /// Whether a hit never changes the replacement state: FIFO and random ignore hits, and
    /// the one way of a direct-mapped set is its only victim whatever its state. Then a hit
    /// can be skipped altogether (only counted) as long as nothing was filled or removed
    /// since the entry was last seen — however many other entries were hit in between.
    pub fn hits_change_nothing(&self) -> bool {
        let free = |p: Policy| matches!(p, Policy::Fifo | Policy::Random);
        self.ways == 1
            || match &self.partition {
                None => free(self.policy),
                Some(q) => free(q.lower_policy) && free(q.upper_policy),
            }
    }

    /// The heap memory a [`Tlb`] of these (checked) parameters takes, in bytes, from the
    /// geometry alone, so that a machine can be refused before anything is allocated: the
    /// tags (a page and a context per entry), the valid bits and counts per set, the way
    /// index of wide sets, and the replacement state (at most a link pair per way and a
    /// sentinel per set, whichever policy: an upper bound). Kept beside [`Tlb::with_lookup`],
    /// whose allocations it follows; the machine's [`Engine`] may build an [`ExactTlb`]
    /// instead (a 32-byte record per way and per set, chain heads of wide sets), so the
    /// bound is the larger of the two.
    pub fn heap_bytes(&self) -> u64 {
        let entries = self.entries as u64;
        let ways = self.ways.max(1) as u64;
        let sets = entries / ways;
        let tags = entries * 16;
        let valid = sets * ways.div_ceil(64) * 8 + sets * 8;
        let index = if self.ways >= INDEX_MIN_WAYS {
            WayIndex::heap_bytes(sets, ways)
        } else {
            0
        };
        let policy = (entries + 2 * sets) * 8;
        let general = tags + valid + index + policy;
        let exact = (entries + sets) * 32 + valid + index;
        general.max(exact)
    }

    /// Whether these parameters describe a TLB [`Tlb::new`] can build.
    pub fn check(&self) -> Result<(), ParamError> {
        let err = |field, message: String| Err(ParamError { field, message });
        if self.entries == 0 {
            return err("entries", "must be at least 1".into());
        }
        if self.entries > MAX_ENTRIES {
            return err(
                "entries",
                format!("{} is more than the maximum {MAX_ENTRIES}", self.entries),
            );
        }
        if self.ways == 0 {
            return err("ways", "must be at least 1".into());
        }
        if !self.entries.is_multiple_of(self.ways) {
            return err(
                "ways",
                format!("{} does not divide {} entries", self.ways, self.entries),
            );
        }
        if let Some(p) = &self.partition {
            if p.lower_ways == 0 || p.lower_ways >= self.ways {
                return err(
                    "partition.lower_ways",
                    format!(
                        "{} is not between 1 and {} (ways - 1): both partitions need a way",
                        p.lower_ways,
                        self.ways as isize - 1
                    ),
                );
            }
        }
        Ok(())
    }
}

/// How a [`Tlb`] finds the way holding a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lookup {
    /// A hash index when `ways >= INDEX_MIN_WAYS`, else a scan.
    Auto,
    /// Always scan the set's ways.
    Scan,
    /// Always use the hash index.
    Index,
}

/// The effective (ctx, gctx) of a query, `None` if nothing can match. After this neither is
/// `NO_CTX`, and `g == c` when there is no second context.
#[inline(always)]
fn contexts(ctx: u64, gctx: u64) -> Option<(u64, u64)> {
    if ctx != NO_CTX {
        Some((ctx, if gctx == NO_CTX { ctx } else { gctx }))
    } else if gctx != NO_CTX {
        Some((gctx, gctx))
    } else {
        None
    }
}

/// The way of the set (tags `vs`, `cs`) matching `vpn` with context `c`, else with `g`.
#[inline(always)]
fn scan(vs: &[u64], cs: &[u64], vpn: u64, c: u64, g: u64) -> Option<usize> {
    let mut alt = None;
    for (w, (&v, &e)) in vs.iter().zip(cs).enumerate() {
        if v == vpn {
            if e == c {
                return Some(w);
            }
            if e == g {
                alt = Some(w);
            }
        }
    }
    alt
}

/// `n` copies of `v`, allocated fallibly: a structure too large for the host is an error
/// naming its size, never an abort.
pub(crate) fn filled<T: Clone>(n: usize, v: T) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| {
        format!(
            "cannot allocate {} for {n} entries",
            crate::machine::human_bytes((n as u64).saturating_mul(std::mem::size_of::<T>() as u64))
        )
    })?;
    out.resize(n, v);
    Ok(out)
}

/// One set-associative TLB (see the module documentation for the exact semantics).
#[derive(Clone)]
pub struct Tlb {
    t: Tags,
    /// Replacement state of the lower (or only) and the upper partition. Unpartitioned TLBs
    /// never use the second (it is a stateless placeholder); an array, not a `Vec`, saves the
    /// hot path a pointer load and a bounds check.
    pols: [State; 2],
    rng: SplitMix64,
    params: TlbParams,
    /// The kind and mode of the reference the next accesses serve ([`Tlb::set_reference`]),
    /// for a policy that reads them.
    reference: (Kind, Mode),
}

/// Everything of a [`Tlb`] but its replacement state: the tags, valid bits, lookup structures
/// and geometry. Kept apart so that the miss path can borrow it beside one partition's
/// concrete policy (see [`Access`]).
#[derive(Clone)]
struct Tags {
    /// The MRU entry: the entry last hit or filled, `(mru_vpn, mru_ctx)`, and the query
    /// context `mru_query` known to hit it (see [`Hint`]). `mru_ctx == mru_query == NO_CTX`
    /// when there is none.
    mru_vpn: u64,
    mru_ctx: u64,
    mru_query: u64,
    /// `set * ways + way` of the MRU entry (meaningless when there is none).
    mru_slot: usize,
    hints: Hints,
    vpn: Vec<u64>,
    /// `NO_CTX` marks an invalid way.
    ctx: Vec<u64>,
    sets: usize,
    ways: usize,
    set_index: SetIndex,
    /// First way of the upper partition; `ways` when not partitioned.
    split: usize,
    /// Valid bit per way, `words` words per set (finds the lowest invalid way fast).
    valid_bits: Vec<u64>,
    words: usize,
    /// Valid ways per set per partition (`2 * set + part`).
    part_valid: Vec<u32>,
    valid: usize,
    index: Option<WayIndex>,
}

impl fmt::Debug for Tlb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tlb")
            .field("params", &self.params)
            .field("sets", &self.t.sets)
            .field("indexed", &self.t.index.is_some())
            .field("valid", &self.t.valid)
            .finish_non_exhaustive()
    }
}

/// The miss path of an unpartitioned TLB — search the set, then hit or fill — run with its
/// policy's concrete type ([`State::visit`]): one dispatch per access that got past the MRU
/// entry and the hints, and every policy hook of it inlined.
struct Access<'a> {
    t: &'a mut Tags,
    rng: &'a mut SplitMix64,
    vpn: u64,
    ctx: u64,
    gctx: u64,
    reference: (Kind, Mode),
}

impl Visit for Access<'_> {
    type Out = bool;

    #[inline(always)]
    fn visit<P: Replacement>(self, pol: &mut P) -> bool {
        let Access {
            t,
            rng,
            vpn,
            ctx,
            gctx,
            reference,
        } = self;
        let set = t.set_of(vpn);
        let mut chain = None;
        if let Some((c, g)) = contexts(ctx, gctx) {
            let (found, ch) = t.find_chained(set, vpn, c, g);
            if let Some(way) = found {
                let slot = set * t.ways + way;
                pol.on_hit(set, way, info(vpn, t.ctx[slot], reference));
                t.hint(t.vpn[slot], t.ctx[slot], c, set, way);
                return true;
            }
            // With `ctx != NO_CTX` (asserted below), `c == ctx`: the chain of the new key.
            chain = ch;
        }
        assert!(
            ctx != NO_CTX,
            "Tlb::access: NO_CTX is not a storable context"
        );
        // The search missed (vpn, ctx), so the key is new.
        let at = info(vpn, ctx, reference);
        t.insert_in(pol, rng, set, Span::whole(t.ways), at, chain);
        false
    }
}

/// What a policy is told of an access to `(vpn, ctx)` by a reference of `(kind, mode)`.
#[inline(always)]
fn info(vpn: u64, ctx: u64, (kind, mode): (Kind, Mode)) -> AccessInfo {
    AccessInfo {
        key: vpn,
        ctx,
        kind,
        mode,
    }
}

/// [`Tlb::access_slot`] past the MRU entry and the hints, with the policy's concrete type.
struct AccessSlot<'a> {
    t: &'a mut Tags,
    rng: &'a mut SplitMix64,
    vpn: u64,
    ctx: u64,
    reference: (Kind, Mode),
}

impl Visit for AccessSlot<'_> {
    type Out = Touch;

    #[inline(always)]
    fn visit<P: Replacement>(self, pol: &mut P) -> Touch {
        let AccessSlot {
            t,
            rng,
            vpn,
            ctx,
            reference,
        } = self;
        let set = t.set_of(vpn);
        let at = info(vpn, ctx, reference);
        if let Some(way) = t.find(set, vpn, ctx, ctx) {
            pol.on_hit(set, way, at);
            t.hint(vpn, ctx, ctx, set, way);
            return Touch {
                slot: set * t.ways + way,
                hit: true,
                evicted: None,
            };
        }
        let (way, evicted) = t.insert_in(pol, rng, set, Span::whole(t.ways), at, None);
        Touch {
            slot: set * t.ways + way,
            hit: false,
            evicted,
        }
    }
}

/// What [`Tlb::access_slot`] did: where the key now lives (`set * ways + way`), whether it
/// was there already, and the entry its fill evicted, if a valid one was replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    pub slot: usize,
    pub hit: bool,
    pub evicted: Option<(u64, u64)>,
}

/// A new key for one partition of one set, placed with the partition's concrete policy.
struct Insert<'a> {
    t: &'a mut Tags,
    rng: &'a mut SplitMix64,
    set: usize,
    span: Span,
    at: AccessInfo,
    chain: Option<usize>,
}

impl Visit for Insert<'_> {
    type Out = (usize, Option<(u64, u64)>);

    #[inline(always)]
    fn visit<P: Replacement>(self, pol: &mut P) -> Self::Out {
        let Insert {
            t,
            rng,
            set,
            span,
            at,
            chain,
        } = self;
        t.insert_in(pol, rng, set, span, at, chain)
    }
}

/// The ways of one partition: its number (0 lower or only, 1 upper), first way and size.
#[derive(Clone, Copy)]
struct Span {
    part: usize,
    lo: usize,
    n: usize,
}

impl Span {
    /// Every way of an unpartitioned set.
    #[inline(always)]
    fn whole(ways: usize) -> Span {
        Span {
            part: 0,
            lo: 0,
            n: ways,
        }
    }
}

impl Tags {
    /// The set `vpn` maps to.
    #[inline(always)]
    fn set_of(&self, vpn: u64) -> usize {
        self.set_index.of(vpn)
    }

    /// Partition number (0 lower or only, 1 upper) and first way of the partition of `way`.
    #[inline(always)]
    fn part_of(&self, way: usize) -> (usize, usize) {
        if way < self.split {
            (0, 0)
        } else {
            (1, self.split)
        }
    }

    /// Remember that a query with context `query` hits `way` of `set`, which holds
    /// `(vpn, ctx)` and was just touched: make it the MRU entry and its bucket's hint.
    #[inline]
    fn hint(&mut self, vpn: u64, ctx: u64, query: u64, set: usize, way: usize) {
        self.mru_vpn = vpn;
        self.mru_ctx = ctx;
        self.mru_query = query;
        self.mru_slot = set * self.ways + way;
        let (p, lo) = self.part_of(way);
        self.hints.record(Hint {
            vpn,
            ctx,
            query,
            slot: (set * self.ways + way) as u32,
            set: set as u32,
            way: (way - lo) as u32,
            part: p as u32,
        });
    }

    /// The way of `set` that `(vpn, c, g)` hits (exact context first), without side effects.
    #[inline(always)]
    fn find(&self, set: usize, vpn: u64, c: u64, g: u64) -> Option<usize> {
        let base = set * self.ways;
        let vs = &self.vpn[base..base + self.ways];
        let cs = &self.ctx[base..base + self.ways];
        match &self.index {
            None => scan(vs, cs, vpn, c, g),
            Some(ix) => match ix.find(set, vpn, c, vs, cs) {
                Some(w) => Some(w),
                None if g != c => ix.find(set, vpn, g, vs, cs),
                None => None,
            },
        }
    }

    /// [`Tags::find`], and with a hash index the chain of `(vpn, c)` in it (where a new key
    /// `(vpn, c)` goes: computed once for the search and the fill).
    #[inline(always)]
    fn find_chained(&self, set: usize, vpn: u64, c: u64, g: u64) -> (Option<usize>, Option<usize>) {
        let base = set * self.ways;
        let vs = &self.vpn[base..base + self.ways];
        let cs = &self.ctx[base..base + self.ways];
        match &self.index {
            None => (scan(vs, cs, vpn, c, g), None),
            Some(ix) => {
                let chain = ix.chain(set, vpn, c);
                let found = match ix.find_in(chain, set, vpn, c, vs, cs) {
                    Some(w) => Some(w),
                    None if g != c => ix.find(set, vpn, g, vs, cs),
                    None => None,
                };
                (found, Some(chain))
            }
        }
    }

    /// The lowest invalid way of `set` at or after `lo` (the caller knows there is one in
    /// the partition starting at `lo`).
    #[inline]
    fn first_invalid(&self, set: usize, lo: usize) -> usize {
        let bits = &self.valid_bits[set * self.words..(set + 1) * self.words];
        let mut wi = lo / 64;
        let mut free = !bits[wi] & (!0u64 << (lo % 64));
        while free == 0 {
            wi += 1;
            free = !bits[wi];
        }
        wi * 64 + free.trailing_zeros() as usize
    }

    /// Forget the MRU entry (its policy state may be about to change other than by a touch).
    #[inline]
    fn forget_mru(&mut self) {
        self.mru_ctx = NO_CTX;
        self.mru_query = NO_CTX;
    }

    /// Put the new key of `at`, `(at.key, at.ctx)`, into partition `span` of `set`, replaced
    /// by `pol` (see the module documentation for the choice of way); returns its way and the
    /// evicted entry, if a valid one was replaced. `chain`: the new key's chain in the hash
    /// index, if known.
    #[inline(always)]
    fn insert_in<P: Replacement>(
        &mut self,
        pol: &mut P,
        rng: &mut SplitMix64,
        set: usize,
        span: Span,
        at: AccessInfo,
        chain: Option<usize>,
    ) -> (usize, Option<(u64, u64)>) {
        let (vpn, ctx) = (at.key, at.ctx);
        let base = set * self.ways;
        let pv = 2 * set + span.part;
        let (way, evicted) = if (self.part_valid[pv] as usize) < span.n {
            let w = self.first_invalid(set, span.lo);
            self.valid_bits[set * self.words + w / 64] |= 1 << (w % 64);
            self.part_valid[pv] += 1;
            self.valid += 1;
            (w, None)
        } else {
            let w = span.lo + pol.victim(set, rng, at);
            let old = (self.vpn[base + w], self.ctx[base + w]);
            if let Some(ix) = &mut self.index {
                ix.remove(set, w);
            }
            (w, Some(old))
        };
        self.vpn[base + way] = vpn;
        self.ctx[base + way] = ctx;
        if let Some(ix) = &mut self.index {
            let chain = chain.unwrap_or_else(|| ix.chain(set, vpn, ctx));
            ix.insert_in(chain, set, way);
        }
        pol.on_fill(set, way - span.lo, at);
        // Overwrites the bucket of `vpn`, dropping any hint a global hit left there that the
        // new key would now shadow.
        self.hint(vpn, ctx, ctx, set, way);
        (way, evicted)
    }
}

impl Tlb {
    /// An empty TLB; the error names the bad field (`entries: must be at least 1`).
    pub fn new(p: &TlbParams) -> Result<Tlb, String> {
        Tlb::with_lookup(p, Lookup::Auto)
    }

    /// An empty TLB with a chosen lookup structure (results never depend on it; speed does).
    pub fn with_lookup(p: &TlbParams, lookup: Lookup) -> Result<Tlb, String> {
        p.check().map_err(|e| e.to_string())?;
        let ways = p.ways;
        let sets = p.entries / ways;
        let (split, pols) = match &p.partition {
            None => (
                ways,
                [
                    State::new(p.policy, sets, ways)?,
                    State::new(Policy::Random, 0, 1)?,
                ],
            ),
            Some(q) => (
                q.lower_ways,
                [
                    State::new(q.lower_policy, sets, q.lower_ways)?,
                    State::new(q.upper_policy, sets, ways - q.lower_ways)?,
                ],
            ),
        };
        let indexed = match lookup {
            Lookup::Auto => ways >= INDEX_MIN_WAYS,
            Lookup::Scan => false,
            Lookup::Index => true,
        };
        let words = ways.div_ceil(64);
        let index = match indexed {
            true => Some(WayIndex::new(sets, ways)?),
            false => None,
        };
        Ok(Tlb {
            t: Tags {
                mru_vpn: 0,
                mru_ctx: NO_CTX,
                mru_query: NO_CTX,
                mru_slot: 0,
                hints: Hints::new(),
                vpn: filled(p.entries, 0)?,
                ctx: filled(p.entries, NO_CTX)?,
                sets,
                ways,
                set_index: SetIndex::new(sets),
                split,
                valid_bits: vec![0; sets * words],
                words,
                part_valid: vec![0; 2 * sets],
                valid: 0,
                index,
            },
            pols,
            rng: SplitMix64::new(p.seed),
            params: p.clone(),
            reference: (Kind::Load, Mode::User),
        })
    }

    /// The kind and mode of the reference the next accesses serve, for a replacement policy
    /// that reads them ([`Policy::reads_reference`]); until told, a user-mode load. A
    /// structure that never tells refuses such a policy instead.
    #[inline(always)]
    pub fn set_reference(&mut self, kind: Kind, mode: Mode) {
        self.reference = (kind, mode);
    }

    /// Number of sets.
    pub fn sets(&self) -> usize {
        self.t.sets
    }

    /// Ways per set.
    pub fn ways(&self) -> usize {
        self.t.ways
    }

    /// Total entries (`sets * ways`).
    pub fn entries(&self) -> usize {
        self.t.vpn.len()
    }

    /// The parameters this TLB was built from.
    pub fn params(&self) -> &TlbParams {
        &self.params
    }

    /// The set `vpn` maps to.
    #[inline(always)]
    pub fn set_of(&self, vpn: u64) -> usize {
        self.t.set_of(vpn)
    }

    /// Whether lookups go through the hash index (rather than a scan of the set).
    pub fn is_indexed(&self) -> bool {
        self.t.index.is_some()
    }

    /// The hot path, for `ctx != NO_CTX`: a hit on the MRU entry (nothing to update), or on
    /// the entry the hint of `vpn` names if it is still in place (tell its policy).
    #[inline(always)]
    fn fast_hit(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        // With `ctx != NO_CTX` and `mru_query == NO_CTX` whenever `mru_ctx` is, a forgotten
        // MRU entry never matches, even when `gctx == NO_CTX`.
        if vpn == self.t.mru_vpn
            && (ctx == self.t.mru_ctx || (gctx == self.t.mru_ctx && ctx == self.t.mru_query))
        {
            return true;
        }
        let h = *self.t.hints.get(vpn);
        let slot = h.slot as usize;
        if h.matches(vpn, ctx, gctx) && self.t.vpn[slot] == vpn && self.t.ctx[slot] == h.ctx {
            let at = info(vpn, h.ctx, self.reference);
            self.pols[h.part as usize & 1].on_hit(h.set as usize, h.way as usize, at);
            self.t.mru_vpn = vpn;
            self.t.mru_ctx = h.ctx;
            self.t.mru_query = h.query;
            self.t.mru_slot = slot;
            return true;
        }
        false
    }

    /// Record a hit, found by a search, on `way` of `set` by a query with effective context
    /// `c`.
    fn hit(&mut self, set: usize, way: usize, c: u64) {
        let (p, lo) = self.t.part_of(way);
        let slot = set * self.t.ways + way;
        let at = info(self.t.vpn[slot], self.t.ctx[slot], self.reference);
        self.pols[p].on_hit(set, way - lo, at);
        self.t.hint(self.t.vpn[slot], self.t.ctx[slot], c, set, way);
    }

    /// Probe; on a hit update the replacement state and return true. On a miss change nothing
    /// and return false.
    #[inline(always)]
    pub fn lookup(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        if self.t.ways == 1 {
            // Direct-mapped: one compare. A hit changes no replacement state (the only way is
            // the only victim), and the MRU entry stays valid (fills and invalidations keep it).
            let set = self.t.set_of(vpn);
            let c = self.t.ctx[set];
            return self.t.vpn[set] == vpn
                && ((ctx != NO_CTX && c == ctx) || (gctx != NO_CTX && c == gctx));
        }
        self.lookup_assoc(vpn, ctx, gctx)
    }

    /// [`Tlb::lookup`] of a set-associative structure.
    #[inline]
    fn lookup_assoc(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        if ctx != NO_CTX && self.fast_hit(vpn, ctx, gctx) {
            return true;
        }
        self.lookup_slow(vpn, ctx, gctx)
    }

    fn lookup_slow(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        let Some((c, g)) = contexts(ctx, gctx) else {
            return false;
        };
        let set = self.t.set_of(vpn);
        match self.t.find(set, vpn, c, g) {
            Some(way) => {
                self.hit(set, way, c);
                true
            }
            None => false,
        }
    }

    /// The (set, way) that `lookup(vpn, ctx, gctx)` would hit, changing nothing.
    pub fn probe(&self, vpn: u64, ctx: u64, gctx: u64) -> Option<(usize, usize)> {
        let (c, g) = contexts(ctx, gctx)?;
        let set = self.t.set_of(vpn);
        self.t.find(set, vpn, c, g).map(|w| (set, w))
    }

    /// Insert `(vpn, ctx)` after a miss into partition `part` of its set (see the module
    /// documentation for the choice of way); returns the evicted `(vpn, ctx)` if a valid entry
    /// was replaced. If `(vpn, ctx)` is already present it is refreshed as by a hit instead
    /// (and `None` is returned), so keys stay unique.
    ///
    /// # Panics
    /// If `ctx == NO_CTX`, which is never stored.
    pub fn fill(&mut self, vpn: u64, ctx: u64, part: Part) -> Option<(u64, u64)> {
        assert!(ctx != NO_CTX, "Tlb::fill: NO_CTX is not a storable context");
        let set = self.t.set_of(vpn);
        let (found, chain) = self.t.find_chained(set, vpn, ctx, ctx);
        if let Some(way) = found {
            self.hit(set, way, ctx);
            return None;
        }
        self.insert(set, vpn, ctx, part, chain).1
    }

    /// [`Tlb::fill`] that also says where `(vpn, ctx)` now lives, as the slot
    /// `set * ways + way`: for structures that keep per-entry state beside the tags (a
    /// cache's dirty bits). Entries never move between slots, so the state of the evicted
    /// entry, if any, is the state the slot held.
    ///
    /// # Panics
    /// If `ctx == NO_CTX`, which is never stored.
    pub fn fill_slot(&mut self, vpn: u64, ctx: u64, part: Part) -> (usize, Option<(u64, u64)>) {
        assert!(
            ctx != NO_CTX,
            "Tlb::fill_slot: NO_CTX is not a storable context"
        );
        let set = self.t.set_of(vpn);
        let (found, chain) = self.t.find_chained(set, vpn, ctx, ctx);
        if let Some(way) = found {
            self.hit(set, way, ctx);
            return (set * self.t.ways + way, None);
        }
        let (way, evicted) = self.insert(set, vpn, ctx, part, chain);
        (set * self.t.ways + way, evicted)
    }

    /// [`Tlb::fill_slot`] into the upper (or only) partition, saying whether the key was
    /// present: the same replacement, the same slots and victims, through the MRU entry and
    /// the hints first and then one search-and-fill path per policy, monomorphised (the
    /// per-reference path of a cache, which keeps dirty and valid bits per slot).
    ///
    /// # Panics
    /// If `ctx == NO_CTX`, which is never stored.
    #[inline(always)]
    pub fn access_slot(&mut self, vpn: u64, ctx: u64) -> Touch {
        if vpn == self.t.mru_vpn && ctx == self.t.mru_ctx {
            // A hit on the MRU entry changes no replacement state (see the module
            // documentation).
            return Touch {
                slot: self.t.mru_slot,
                hit: true,
                evicted: None,
            };
        }
        let h = *self.t.hints.get(vpn);
        let slot = h.slot as usize;
        if h.matches(vpn, ctx, NO_CTX) && self.t.vpn[slot] == vpn && self.t.ctx[slot] == h.ctx {
            let at = info(vpn, h.ctx, self.reference);
            self.pols[h.part as usize & 1].on_hit(h.set as usize, h.way as usize, at);
            self.t.mru_vpn = vpn;
            self.t.mru_ctx = h.ctx;
            self.t.mru_query = h.query;
            self.t.mru_slot = slot;
            return Touch {
                slot,
                hit: true,
                evicted: None,
            };
        }
        self.access_slot_slow(vpn, ctx)
    }

    #[inline(never)]
    fn access_slot_slow(&mut self, vpn: u64, ctx: u64) -> Touch {
        assert!(
            ctx != NO_CTX,
            "Tlb::access_slot: NO_CTX is not a storable context"
        );
        if self.t.split != self.t.ways {
            let before = self.t.valid;
            let (slot, evicted) = self.fill_slot(vpn, ctx, Part::Upper);
            return Touch {
                slot,
                hit: evicted.is_none() && self.t.valid == before,
                evicted,
            };
        }
        let Tlb {
            t,
            pols,
            rng,
            reference,
            ..
        } = self;
        let reference = *reference;
        pols[0].visit(AccessSlot {
            t,
            rng,
            vpn,
            ctx,
            reference,
        })
    }

    /// [`Tlb::lookup`], and on a miss [`Tlb::fill`] `(vpn, ctx)` into `part`; returns hit.
    ///
    /// # Panics
    /// On a miss with `ctx == NO_CTX`.
    #[inline(always)]
    pub fn access(&mut self, vpn: u64, ctx: u64, gctx: u64, part: Part) -> bool {
        if ctx != NO_CTX && self.fast_hit(vpn, ctx, gctx) {
            return true;
        }
        self.access_slow(vpn, ctx, gctx, part)
    }

    /// [`Tlb::access`] past the MRU entry and the hints. Unpartitioned TLBs (all but the
    /// MIPS wired/Random split) take one path per policy, monomorphised ([`Access`]).
    #[inline(never)]
    fn access_slow(&mut self, vpn: u64, ctx: u64, gctx: u64, part: Part) -> bool {
        if self.t.split == self.t.ways {
            let Tlb {
                t,
                pols,
                rng,
                reference,
                ..
            } = self;
            return pols[0].visit(Access {
                t,
                rng,
                vpn,
                ctx,
                gctx,
                reference: *reference,
            });
        }
        let set = self.t.set_of(vpn);
        if let Some((c, g)) = contexts(ctx, gctx) {
            if let Some(way) = self.t.find(set, vpn, c, g) {
                self.hit(set, way, c);
                return true;
            }
        }
        assert!(
            ctx != NO_CTX,
            "Tlb::access: NO_CTX is not a storable context"
        );
        // The lookup probed (vpn, ctx) and missed, so the key is new.
        self.insert(set, vpn, ctx, part, None);
        false
    }

    /// Put the new key `(vpn, ctx)` into `part` of `set`; returns its way and the evicted
    /// entry, if a valid one was replaced. `chain`: the key's chain in the hash index, if
    /// the caller's search computed it.
    fn insert(
        &mut self,
        set: usize,
        vpn: u64,
        ctx: u64,
        part: Part,
        chain: Option<usize>,
    ) -> (usize, Option<(u64, u64)>) {
        let (split, ways) = (self.t.split, self.t.ways);
        let span = if split < ways && part == Part::Upper {
            Span {
                part: 1,
                lo: split,
                n: ways - split,
            }
        } else {
            Span {
                part: 0,
                lo: 0,
                n: split,
            }
        };
        let at = info(vpn, ctx, self.reference);
        let Tlb { t, pols, rng, .. } = self;
        pols[span.part].visit(Insert {
            t,
            rng,
            set,
            span,
            at,
            chain,
        })
    }

    /// Remove the entry that `lookup(vpn, ctx, gctx)` would hit; returns whether there was one.
    /// Replacement state is not touched except to forget the way.
    pub fn invalidate(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        let Some((c, g)) = contexts(ctx, gctx) else {
            return false;
        };
        let set = self.t.set_of(vpn);
        match self.t.find(set, vpn, c, g) {
            Some(way) => {
                self.remove(set, way);
                true
            }
            None => false,
        }
    }

    /// Change the context tag of the entry `(vpn, ctx)` to `new_ctx` in place, as a MIPS
    /// `tlbwi` rewrites a slot after the OS changed bits of its PTE (the Modify handler
    /// setting the dirty bit): same set and way, replacement state untouched. Returns whether
    /// the entry was present. If `(vpn, new_ctx)` is present too, the entry `(vpn, ctx)` is
    /// removed instead, so keys stay unique.
    ///
    /// # Panics
    /// If `new_ctx == NO_CTX`, which is never stored.
    pub fn retag(&mut self, vpn: u64, ctx: u64, new_ctx: u64) -> bool {
        assert!(
            new_ctx != NO_CTX,
            "Tlb::retag: NO_CTX is not a storable context"
        );
        if ctx == NO_CTX {
            return false;
        }
        let set = self.t.set_of(vpn);
        let Some(way) = self.t.find(set, vpn, ctx, ctx) else {
            return false;
        };
        if ctx == new_ctx {
            return true;
        }
        if self.t.find(set, vpn, new_ctx, new_ctx).is_some() {
            self.remove(set, way);
            return true;
        }
        self.t.forget_mru();
        let base = set * self.t.ways;
        if let Some(ix) = &mut self.t.index {
            ix.remove(set, way);
            ix.insert(set, way, vpn, new_ctx);
        }
        // Hints naming this slot die by themselves: its context tag no longer matches them.
        self.t.ctx[base + way] = new_ctx;
        true
    }

    /// Move the partition point to `lower_ways` (as the OS rewrites the R2000's wired/Random
    /// boundary): every entry stays in its way, and ways now on the other side of the point
    /// belong to the other partition. Each partition's replacement state is rebuilt as if
    /// its valid ways had been filled in way order (so FIFO and LRU victims come lowest way
    /// first). The error names `partition.lower_ways` when there is no partition or the point
    /// is out of `1..ways`.
    pub fn repartition(&mut self, lower_ways: usize) -> Result<(), ParamError> {
        let mut p = self.params.clone();
        let Some(q) = &mut p.partition else {
            return Err(no_partition());
        };
        q.lower_ways = lower_ways;
        p.check()?;
        let q = p.partition.expect("checked");
        // The mode that filled each valid entry, where the old state kept it.
        let ways = self.t.ways;
        let modes: Vec<Mode> = (0..self.t.sets * ways)
            .map(|slot| {
                let (pi, lo) = self.t.part_of(slot % ways);
                self.pols[pi].filled_mode(slot / ways, slot % ways - lo)
            })
            .collect();
        let state = |policy, ways| {
            State::new(policy, self.t.sets, ways).map_err(|message| ParamError {
                field: "partition.lower_ways",
                message,
            })
        };
        let pols = [
            state(q.lower_policy, lower_ways)?,
            state(q.upper_policy, self.t.ways - lower_ways)?,
        ];
        self.params = p;
        self.t.split = lower_ways;
        self.pols = pols;
        self.t.part_valid.fill(0);
        for set in 0..self.t.sets {
            for way in 0..self.t.ways {
                if self.t.ctx[set * self.t.ways + way] != NO_CTX {
                    let (pi, lo) = self.t.part_of(way);
                    let slot = set * self.t.ways + way;
                    let at = AccessInfo {
                        mode: modes[slot],
                        ..AccessInfo::of(self.t.vpn[slot], self.t.ctx[slot])
                    };
                    self.pols[pi].on_fill(set, way - lo, at);
                    self.t.part_valid[2 * set + pi] += 1;
                }
            }
        }
        // Hints name partitions and ways within them: start afresh.
        self.t.hints = Hints::new();
        self.t.forget_mru();
        Ok(())
    }

    /// Make the valid `way` of `set` invalid. (Hints of it die by themselves: its tags no
    /// longer match.)
    fn remove(&mut self, set: usize, way: usize) {
        self.t.forget_mru();
        let base = set * self.t.ways;
        let slot = base + way;
        if let Some(ix) = &mut self.t.index {
            ix.remove(set, way);
        }
        self.t.vpn[slot] = 0;
        self.t.ctx[slot] = NO_CTX;
        self.t.valid_bits[set * self.t.words + way / 64] &= !(1 << (way % 64));
        let (p, lo) = self.t.part_of(way);
        self.t.part_valid[2 * set + p] -= 1;
        self.t.valid -= 1;
        self.pols[p].on_invalidate(set, way - lo);
    }

    /// Remove every entry.
    pub fn flush_all(&mut self) {
        self.t.forget_mru();
        if self.t.valid == 0 {
            return;
        }
        for set in 0..self.t.sets {
            if self.t.part_valid[2 * set] + self.t.part_valid[2 * set + 1] == 0 {
                continue;
            }
            let base = set * self.t.ways;
            for way in 0..self.t.ways {
                if self.t.ctx[base + way] != NO_CTX {
                    self.t.vpn[base + way] = 0;
                    self.t.ctx[base + way] = NO_CTX;
                    let (p, lo) = self.t.part_of(way);
                    self.pols[p].on_invalidate(set, way - lo);
                }
            }
            self.t.valid_bits[set * self.t.words..(set + 1) * self.t.words].fill(0);
            self.t.part_valid[2 * set] = 0;
            self.t.part_valid[2 * set + 1] = 0;
            if let Some(ix) = &mut self.t.index {
                ix.clear_set(set);
            }
        }
        self.t.valid = 0;
    }

    /// Remove every entry for which `pred(vpn, ctx)` is true (e.g. one ASID, or everything not
    /// global); `pred` sees the valid entries in (set, way) order. Returns how many went.
    pub fn flush_if(&mut self, mut pred: impl FnMut(u64, u64) -> bool) -> usize {
        let mut n = 0;
        for set in 0..self.t.sets {
            if self.t.part_valid[2 * set] + self.t.part_valid[2 * set + 1] == 0 {
                continue;
            }
            let base = set * self.t.ways;
            for way in 0..self.t.ways {
                let (v, c) = (self.t.vpn[base + way], self.t.ctx[base + way]);
                if c != NO_CTX && pred(v, c) {
                    self.remove(set, way);
                    n += 1;
                }
            }
        }
        n
    }

    /// Number of valid entries.
    pub fn valid_entries(&self) -> usize {
        self.t.valid
    }

    /// The valid entries as `(set, way, vpn, ctx)`, in (set, way) order.
    pub fn entries_iter(&self) -> impl Iterator<Item = (usize, usize, u64, u64)> + '_ {
        let ways = self.t.ways;
        self.t
            .vpn
            .iter()
            .zip(&self.t.ctx)
            .enumerate()
            .filter(|&(_, (_, &c))| c != NO_CTX)
            .map(move |(i, (&v, &c))| (i / ways, i % ways, v, c))
    }

    /// The entry in `way` of `set`, if valid.
    pub fn get(&self, set: usize, way: usize) -> Option<(u64, u64)> {
        let slot = set * self.t.ways + way;
        (self.t.ctx[slot] != NO_CTX).then(|| (self.t.vpn[slot], self.t.ctx[slot]))
    }
}
