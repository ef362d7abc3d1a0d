//! A small direct-mapped cache of where recently used entries are, checked before the set is
//! searched.
//!
//! Reference streams keep coming back to a handful of pages — the code page, the stack page,
//! a few data pages — interleaved, so remembering only the last entry used misses most of
//! them, and a scan or hash probe per reference would cost several times the rest of a hit.
//! This table remembers, for [`HINTS`] page-number buckets, the set and way where the
//! entry of that page was last found or filled, so a hit costs one bucket check and one tag
//! check. The policy is still told about every hit; only the search is skipped.
//!
//! A hint `(vpn, ctx, query, set, way)` claims: way `way` of `set` holds `(vpn, ctx)`, and a
//! query with context `query` hits that entry — because `query == ctx`, or because it was hit
//! through the global context while no `(vpn, query)` entry existed.
//!
//! * The first claim is checked against the tags on every use, so evictions, invalidations
//!   and flushes never need to touch the hints.
//! * The second can only be broken by filling `(vpn, query)`; all hints of `vpn` live in
//!   bucket `bucket(vpn)`, and every fill overwrites that bucket with a hint of the new entry.
//!
//! Buckets are chosen by a Fibonacci hash of the page number: code, heap and stack regions
//! start at aligned addresses, so plain low bits would put page `k` of each in one bucket.

use super::NO_CTX;

/// Number of buckets (a power of two).
pub(crate) const HINTS: usize = 256;

/// The bucket of `vpn`.
#[inline(always)]
fn bucket(vpn: u64) -> usize {
    (vpn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - HINTS.trailing_zeros())) as usize
}

#[derive(Clone, Copy)]
pub(crate) struct Hint {
    pub(crate) vpn: u64,
    /// `NO_CTX` for an empty bucket (which then matches no query: queries reaching the
    /// hints have `ctx != NO_CTX`, and `query` is `NO_CTX` too).
    pub(crate) ctx: u64,
    pub(crate) query: u64,
    /// `set * ways + way`: where the tags are.
    pub(crate) slot: u32,
    pub(crate) set: u32,
    /// The way within its partition, and the partition (0 lower or only, 1 upper).
    pub(crate) way: u32,
    pub(crate) part: u32,
}

impl Hint {
    /// Whether a query `(vpn, ctx, gctx)` with `ctx != NO_CTX` (`gctx` may be `NO_CTX`) hits
    /// this hint's entry, provided the entry is still where the hint says. Branch-free.
    #[inline(always)]
    pub(crate) fn matches(&self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        (self.vpn == vpn) & ((ctx == self.ctx) | ((gctx == self.ctx) & (ctx == self.query)))
    }
}

#[derive(Clone)]
pub(crate) struct Hints {
    buckets: Box<[Hint; HINTS]>,
}

impl Hints {
    pub(crate) fn new() -> Hints {
        let empty = Hint {
            vpn: 0,
            ctx: NO_CTX,
            query: NO_CTX,
            slot: 0,
            set: 0,
            way: 0,
            part: 0,
        };
        Hints {
            buckets: Box::new([empty; HINTS]),
        }
    }

    /// The bucket of `vpn`.
    #[inline(always)]
    pub(crate) fn get(&self, vpn: u64) -> &Hint {
        &self.buckets[bucket(vpn)]
    }

    /// Remember `hint` in the bucket of its vpn.
    #[inline(always)]
    pub(crate) fn record(&mut self, hint: Hint) {
        self.buckets[bucket(hint.vpn)] = hint;
    }
}
