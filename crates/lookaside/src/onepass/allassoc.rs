//! All-associativity simulation (Mattson et al. 1970; Hill & Smith 1989): one pass gives the
//! misses of set-associative LRU structures of every set count `1, 2, 4, …, max_sets` and
//! every associativity `1..=WAYS`.
//!
//! # Why this way
//!
//! With the set chosen by the low bits of the page number (`vpn mod sets`, exactly
//! [`crate::tlb::Tlb::set_of`] for a power-of-two set count), each set of an `S`-set LRU
//! structure is a small LRU stack, and a reference at depth `d` of its set's stack hits in
//! every `S`-set structure of more than `d` ways. So one stack per set, per set count,
//! truncated at [`WAYS`] (deeper positions never matter for `WAYS` ways or fewer), gives
//! every associativity at once; the set counts are `log2(max_sets) + 1` such passes over the
//! same reference, fused into one loop. Hill & Smith's forest shares the stacks of different
//! set counts, but a truncated stack here is one cache line of `u32` page ids, in no order,
//! found with one vectorised compare, plus 16 one-byte ranks (positions in the stack) updated
//! with one vector operation — so the simple layout is the fast one.
//!
//! Shortcuts, all exact:
//! * Stacks hold dense `u32` page ids (from a [`PageMap`], prefetched a few references
//!   ahead), so a set is one cache line and one vectorised compare finds a page.
//! * Depth 0 is inherited: a page on top of its set's stack for `S` sets was the last one used
//!   among the pages of its set, so it is on top for every larger set count (whose sets are
//!   subsets); the loop stops there and counts depth 0 for the remaining set counts at once.
//! * Repeating the last page (depth 0 everywhere) touches no stack. Returning to the page
//!   used just before the last one (code and data pages alternate) is at depth 1 for the set
//!   counts where both share a set (`S <= 2^tz(vpn ^ last)`) and 0 elsewhere, and only those
//!   sets swap their top two entries.
//!
//! Invalidation leaves a hole in every stack that held the page, and a reference fills the
//! topmost hole above it instead of evicting (see [`super::StackDistance`] for why this is
//! exact); flushing empties every stack.

use super::map::PageMap;
use super::Engine;
use super::{mask, rank_mask};
use crate::tlb::NO_CTX;
use serde::Serialize;

/// Associativities answered: `1..=WAYS`.
pub const WAYS: usize = 16;

/// Default largest set count (set counts `1, 2, 4, …, 1024`: 11 × 16 = 176 configurations).
pub const DEFAULT_MAX_SETS: usize = 1024;

/// A hole (free entry) in a set's stack.
const HOLE: u32 = u32::MAX;

/// No page (for the last-two-pages shortcut).
const NONE: (u64, u64) = (0, NO_CTX);

/// The all-associativity engine (see the module documentation).
#[derive(Clone, Debug)]
pub struct AllAssoc {
    levels: usize,
    /// Set `i` of level `l` (`2^l` sets) is set number `2^l - 1 + i` overall; its ids are
    /// `ids[WAYS * n..WAYS * (n + 1)]`, in no order, and `ranks[n]` gives each one's position
    /// in the set's stack (a permutation of `0..WAYS`; holes have positions too).
    ids: Vec<u32>,
    ranks: Vec<[u8; WAYS]>,
    map: PageMap,
    next_id: u32,
    /// Whether a stack may hold a hole above a page (an invalidation since the last flush);
    /// otherwise holes are only unused positions at the end of a stack, and a reference can
    /// ignore them (shifting onto the last position drops a hole as well as filling one).
    mid_holes: bool,
    /// `hist[l][d]`: accesses at depth `d` at level `l` found by a search; `WAYS` = deeper
    /// or absent.
    hist: Vec<[u64; WAYS + 1]>,
    /// `zero_from[l]`: accesses at depth 0 for every level `>= l` not counted in `hist`.
    zero_from: Vec<u64>,
    /// The last page accessed and the one before it (different pages), while no stack has
    /// changed otherwise.
    last: (u64, u64),
    before: (u64, u64),
    accesses: u64,
}

/// What an all-associativity pass found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AllAssocResult {
    /// Translations looked up (references, plus the second page of straddling ones).
    pub accesses: u64,
    /// The set counts, `1, 2, 4, …`.
    pub sets: Vec<usize>,
    /// Associativities `1..=ways`.
    pub ways: usize,
    /// `misses[i][w - 1]`: misses with `sets[i]` sets of `w` ways.
    pub misses: Vec<Vec<u64>>,
}

impl AllAssocResult {
    /// Misses of the structure with `sets` sets of `ways` ways, if it was simulated.
    pub fn misses(&self, sets: usize, ways: usize) -> Option<u64> {
        let i = self.sets.iter().position(|&s| s == sets)?;
        (1..=self.ways)
            .contains(&ways)
            .then(|| self.misses[i][ways - 1])
    }

    /// The result as JSON: the counts, and `configs` = one `{sets, ways, entries, misses}`
    /// per configuration.
    pub fn to_json(&self) -> serde_json::Value {
        let mut configs = Vec::new();
        for (i, &s) in self.sets.iter().enumerate() {
            for w in 1..=self.ways {
                configs.push(serde_json::json!({
                    "sets": s, "ways": w, "entries": s * w, "misses": self.misses[i][w - 1]
                }));
            }
        }
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("configs".into(), configs.into());
        }
        v
    }
}

impl Default for AllAssoc {
    fn default() -> AllAssoc {
        AllAssoc::new(DEFAULT_MAX_SETS)
    }
}

/// Move the entry of rank `j` to the top: every rank below `j` goes down one, `slot`'s (which
/// was `j`) becomes 0. One vector operation on 16 bytes; the ids do not move.
#[inline(always)]
fn promote(ranks: &mut [u8; WAYS], slot: usize, j: u8) {
    for r in ranks.iter_mut() {
        *r += (*r < j) as u8;
    }
    ranks[slot] = 0;
}

/// The hole-filling case of [`reference`]: if a hole lies above depth `d`, the topmost one
/// takes the page, the page's slot (when `d < WAYS`) becomes the hole, and the answer is
/// true. Kept out of line: it runs only after invalidations, and inlined, the compiler
/// would load the whole set into registers on every reference for it.
#[cold]
#[inline(never)]
fn fill_hole(
    ids: &mut [u32; WAYS],
    ranks: &mut [u8; WAYS],
    id: u32,
    slot: usize,
    d: usize,
) -> bool {
    let mut hole: Option<usize> = None;
    for k in 0..WAYS {
        if ids[k] == HOLE && (ranks[k] as usize) < d && hole.is_none_or(|h| ranks[k] < ranks[h]) {
            hole = Some(k);
        }
    }
    let Some(h) = hole else {
        return false;
    };
    let j = ranks[h];
    ids[h] = id;
    if d < WAYS {
        ids[slot] = HOLE;
    }
    promote(ranks, h, j);
    true
}

/// One reference to page `id` in a set (`ids`, `ranks`) at depth `d` (`WAYS` = absent)
/// found in `slot` (meaningless when absent), updating the stack. With `mid_holes`, the
/// topmost hole above the page takes it and the page's slot becomes the hole.
#[inline(always)]
fn reference(
    ids: &mut [u32; WAYS],
    ranks: &mut [u8; WAYS],
    id: u32,
    slot: usize,
    d: usize,
    mid_holes: bool,
) {
    if mid_holes && fill_hole(ids, ranks, id, slot, d) {
        return;
    }
    if d < WAYS {
        promote(ranks, slot, d as u8);
    } else {
        // The last position leaves the stack (a page, or an unused position).
        let last = rank_mask(ranks, WAYS as u8 - 1).trailing_zeros() as usize % WAYS;
        ids[last] = id;
        promote(ranks, last, WAYS as u8 - 1);
    }
}

impl AllAssoc {
    /// Every set count `1, 2, 4, …, max_sets` (a power of two, at most 2^20) and every
    /// associativity `1..=WAYS`.
    ///
    /// # Panics
    /// If `max_sets` is not a power of two or above 2^20.
    pub fn new(max_sets: usize) -> AllAssoc {
        assert!(
            max_sets.is_power_of_two() && max_sets <= 1 << 20,
            "AllAssoc: max_sets must be a power of two up to 2^20"
        );
        let levels = max_sets.trailing_zeros() as usize + 1;
        AllAssoc {
            levels,
            ids: vec![HOLE; (2 * max_sets - 1) * WAYS],
            ranks: vec![std::array::from_fn(|i| i as u8); 2 * max_sets - 1],
            map: PageMap::new(),
            next_id: 0,
            mid_holes: false,
            hist: vec![[0; WAYS + 1]; levels],
            zero_from: vec![0; levels + 1],
            last: NONE,
            before: NONE,
            accesses: 0,
        }
    }

    /// The counts so far.
    pub fn result(&self) -> AllAssocResult {
        let mut misses = Vec::with_capacity(self.levels);
        let mut zeros = 0;
        for l in 0..self.levels {
            zeros += self.zero_from[l];
            let mut hits = zeros;
            let mut row = Vec::with_capacity(WAYS);
            for w in 1..=WAYS {
                hits += self.hist[l][w - 1];
                row.push(self.accesses - hits);
            }
            misses.push(row);
        }
        AllAssocResult {
            accesses: self.accesses,
            sets: (0..self.levels).map(|l| 1 << l).collect(),
            ways: WAYS,
            misses,
        }
    }

    /// The number of `vpn`'s set at level `l` (`2^l` sets) among all sets.
    #[inline(always)]
    fn set_of(l: usize, vpn: u64) -> usize {
        let sets = 1usize << l;
        sets - 1 + (vpn as usize & (sets - 1))
    }

    /// The ids and ranks of set number `n`.
    #[inline(always)]
    fn set_mut<'a>(
        ids: &'a mut [u32],
        ranks: &'a mut [[u8; WAYS]],
        n: usize,
    ) -> (&'a mut [u32; WAYS], &'a mut [u8; WAYS]) {
        let base = n * WAYS;
        (
            (&mut ids[base..base + WAYS]).try_into().unwrap(),
            &mut ranks[n],
        )
    }

    /// Forget the last-two-pages shortcut (a stack changed other than by an access).
    fn forget_last(&mut self) {
        self.last = NONE;
        self.before = NONE;
    }

    /// The general path: the page's id, then every level from one set up.
    fn search(&mut self, vpn: u64, ctx: u64) {
        let (s, new) = self.map.entry(vpn, ctx, self.next_id);
        if new {
            self.next_id += 1;
        }
        let id = self.map.get(s);
        for l in 0..self.levels {
            let n = Self::set_of(l, vpn);
            let (ids, ranks) = Self::set_mut(&mut self.ids, &mut self.ranks, n);
            let m = mask(ids, id);
            let slot = m.trailing_zeros() as usize % WAYS;
            let d = if m != 0 { ranks[slot] as usize } else { WAYS };
            if d == 0 {
                self.zero_from[l] += 1;
                return;
            }
            reference(ids, ranks, id, slot, d, self.mid_holes);
            self.hist[l][d] += 1;
        }
    }

    /// Back to the page used just before the last one: depth 1 where both share a set, 0
    /// elsewhere.
    #[inline(always)]
    fn back(&mut self, vpn: u64) {
        let shared = ((vpn ^ self.last.0).trailing_zeros() as usize + 1).min(self.levels);
        for l in 0..shared {
            // Ranks 0 and 1 trade places.
            for r in self.ranks[Self::set_of(l, vpn)].iter_mut() {
                *r ^= (*r < 2) as u8;
            }
            self.hist[l][1] += 1;
        }
        self.zero_from[shared] += 1;
    }
}

impl Engine for AllAssoc {
    #[inline]
    fn access(&mut self, vpn: u64, ctx: u64) {
        debug_assert!(ctx != NO_CTX);
        self.accesses += 1;
        if (vpn, ctx) == self.last {
            self.zero_from[0] += 1;
            return;
        }
        if (vpn, ctx) == self.before {
            self.back(vpn);
        } else {
            self.search(vpn, ctx);
        }
        self.before = self.last;
        self.last = (vpn, ctx);
    }

    #[inline(always)]
    fn prefetch(&self, vpn: u64, ctx: u64) {
        self.map.prefetch(vpn, ctx);
    }

    fn invalidate(&mut self, vpn: u64, ctx: u64) {
        self.forget_last();
        let Some(s) = self.map.find(vpn, ctx) else {
            return;
        };
        let id = self.map.get(s);
        for l in 0..self.levels {
            let n = Self::set_of(l, vpn);
            let (ids, _) = Self::set_mut(&mut self.ids, &mut self.ranks, n);
            let m = mask(ids, id);
            if m != 0 {
                ids[m.trailing_zeros() as usize] = HOLE;
                self.mid_holes = true;
            }
        }
    }

    fn flush_ctx(&mut self, ctx: u64) {
        for vpn in self.map.pages_of(ctx) {
            self.invalidate(vpn, ctx);
        }
    }

    fn flush(&mut self) {
        self.forget_last();
        self.mid_holes = false;
        self.ids.fill(HOLE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_have_a_bit_per_way() {
        for bits in [0u32, 1, 0x8000, 0xffff, 0x1234, 0xa5a5, 0x8001] {
            let ids: [u32; WAYS] = std::array::from_fn(|i| if bits >> i & 1 == 1 { 7 } else { 3 });
            assert_eq!(mask(&ids, 7), bits);
            let ranks: [u8; WAYS] = std::array::from_fn(|i| if bits >> i & 1 == 1 { 9 } else { 2 });
            assert_eq!(rank_mask(&ranks, 9), bits);
        }
    }
}
