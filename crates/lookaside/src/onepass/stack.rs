//! LRU stack distance (Mattson et al., 1970): one pass gives the misses of a fully
//! associative LRU structure of every size at once.
//!
//! The LRU stack orders the pages by last use. A reference to the page at depth `d` (0 = the
//! page last used) hits in every LRU structure of more than `d` entries and misses in the
//! others, so a histogram of depths answers all sizes: `misses(N) = cold + #{d >= N}`.
//!
//! # Representation
//!
//! * The top [`FRONT`] positions of the stack are kept explicitly in small arrays (the
//!   *front*). Almost every reference of a real program lands there (the page of the
//!   instruction stream, of the stack, of the data being walked), and then costs no hashing
//!   and no tree: the page is found by one vectorised compare of 32-bit fingerprints (then
//!   checked in full), and its depth is its slot's *rank*. Pages do not move between slots;
//!   moving a page to the top is one vector operation on the 16 one-byte ranks (every rank
//!   below the page's goes up by one, the page's becomes 0).
//! * Deeper positions are timestamps: a page leaving the front gets the next value of a
//!   counter, so deeper pages are ordered by timestamp, and the depth of a page with time `t`
//!   is `FRONT + #{elements with time > t}`: a prefix count over the set of times in use, a
//!   bitmap with a Fenwick tree over its words ([`BitSet`]) — O(log n) for a reference, plus
//!   O(log n) to remove the page's old time and to add the time of the page that left the
//!   front. The bitmap keeps it small (a bit per time, a count per 64) and so in cache. A
//!   hash map ([`PageMap`], one multiply per probe) gives each page's time. Timestamps
//!   advance only on references deeper than the front.
//! * Compaction keeps memory bounded by the live pages, not the trace length: when the
//!   counter reaches the set's length, live elements are renumbered `1..=live` in order, the
//!   set is rebuilt at four times their number (so the next compaction is at least `3 ×
//!   live` deep references away: amortised O(1) per reference), and dropped pages leave the
//!   map.
//!
//! # Invalidation and flushes
//!
//! Invalidating one page (a TLB shootdown) breaks the plain stack's inclusion property: an
//! LRU structure that held the page now has a free entry, one that did not is unchanged. The
//! stack stays exact if the page's position becomes a *hole* instead of closing up (a hole is
//! a free entry in every structure large enough to contain its position). A reference to a
//! page at depth `d` (∞ when not in the stack) with the topmost hole at `h`:
//! * `h < d`: structures of more than `h` entries fill the free entry instead of evicting, so
//!   positions `0..h` shift down by one onto the hole, the page goes to the top, and the
//!   page's old position (if any) becomes the hole — exactly the contents of every structure
//!   afterwards (structures of `h < N <= d` entries miss and fill their free entry;
//!   structures of `N > d` entries hit, keeping their free entry);
//! * otherwise the ordinary move to front.
//!
//! Holes in the front are marked in place; deeper ones are timestamps kept in a second
//! [`BitSet`], which finds the topmost one (the largest time) in O(log n). Without
//! invalidations none of this runs. Flushing everything empties the stack: an empty stack
//! behaves as one made of holes, and the next references are cold (the sets keep the
//! old times, below a *floor* that no live page is under, until the next compaction).

use super::fenwick::BitSet;
use super::map::PageMap;
use super::{mask, rank_mask, Engine};
use crate::tlb::NO_CTX;
use serde::Serialize;

/// Positions of the stack kept explicitly.
pub const FRONT: usize = 16;

/// Default largest distance tracked exactly (the largest fully associative size answered).
pub const DEFAULT_MAX_DISTANCE: usize = 16384;

/// Map value of a page not in the stack.
const ABSENT: u32 = 0;
/// Map value of a page in the front.
const IN_FRONT: u32 = u32::MAX;
/// Smallest length of the sets of times.
const MIN_TREE: usize = 1 << 12;

/// A 32-bit fingerprint of a page key, compared before the key itself.
#[inline(always)]
fn fingerprint(vpn: u64, ctx: u64) -> u32 {
    (vpn ^ (vpn >> 32) ^ ctx.rotate_left(16)) as u32
}

/// The stack-distance engine (see the module documentation).
#[derive(Clone, Debug)]
pub struct StackDistance {
    max: usize,
    /// The front, in no order: page numbers, contexts (`NO_CTX` = a hole), fingerprints, each
    /// page's slot in `map` (valid for map generation `map_gen`), and each slot's position in
    /// the stack (a permutation of `0..FRONT`; holes have positions too).
    fv: [u64; FRONT],
    fc: [u64; FRONT],
    ftag: [u32; FRONT],
    fslot: [u32; FRONT],
    rank: [u8; FRONT],
    /// The slot of rank 0.
    top: usize,
    /// Holes in the front (unused slots included).
    front_free: u32,
    map_gen: u32,
    /// Whether the front may hold a hole above a page (an invalidation hit it since the last
    /// flush); otherwise its holes are only the unused positions at the end.
    front_mid_holes: bool,
    /// Page → time (`ABSENT`, `IN_FRONT`, or a time in the trees).
    map: PageMap,
    /// Stack elements (pages and holes) deeper than the front, by time.
    count: BitSet,
    /// The holes among them.
    holes: BitSet,
    /// Elements in `count` and in `holes`, including those below `floor`.
    count_total: u32,
    holes_total: u32,
    /// Holes at or above `floor`.
    holes_live: u32,
    /// Next time; the trees hold times `1..count.len()`.
    now: u32,
    /// Times below this are dead (they were in the stack before a flush).
    floor: u32,
    hist: Vec<u64>,
    beyond: u64,
    cold: u64,
    accesses: u64,
}

/// What a stack-distance pass found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StackResult {
    /// Translations looked up (references, plus the second page of straddling ones).
    pub accesses: u64,
    /// Accesses to a page not in the stack: its first use, or its first since it was
    /// invalidated or everything was flushed. They miss at every size.
    pub cold: u64,
    /// `histogram[d]`: accesses at stack distance `d` (`0 <= d < max_distance`).
    pub histogram: Vec<u64>,
    /// Accesses at a distance of `max_distance` or more.
    pub beyond: u64,
    pub max_distance: usize,
}

impl StackResult {
    /// Misses of a fully associative LRU structure of `entries` entries, if
    /// `entries <= max_distance` (beyond that the histogram does not say).
    pub fn misses(&self, entries: usize) -> Option<u64> {
        if entries > self.max_distance {
            return None;
        }
        if entries == 0 {
            return Some(self.accesses);
        }
        Some(self.cold + self.beyond + self.histogram[entries..].iter().sum::<u64>())
    }

    /// `curve[i]` = misses with `i + 1` entries, for every size `1..=max_distance`.
    pub fn miss_curve(&self) -> Vec<u64> {
        let mut curve = vec![0; self.max_distance];
        let mut acc = self.cold + self.beyond;
        for n in (1..=self.max_distance).rev() {
            if n < self.max_distance {
                acc += self.histogram[n];
            }
            curve[n - 1] = acc;
        }
        curve
    }

    /// The result as JSON: the counts, and `misses` = the miss curve (`misses[i]` for
    /// `i + 1` entries).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("misses".into(), self.miss_curve().into());
        }
        v
    }
}

impl Default for StackDistance {
    fn default() -> StackDistance {
        StackDistance::new(DEFAULT_MAX_DISTANCE)
    }
}

impl StackDistance {
    /// An empty stack tracking distances below `max_distance` exactly (at least 1).
    pub fn new(max_distance: usize) -> StackDistance {
        let max = max_distance.max(1);
        StackDistance {
            max,
            fv: [0; FRONT],
            fc: [NO_CTX; FRONT],
            ftag: [0; FRONT],
            fslot: [0; FRONT],
            rank: std::array::from_fn(|i| i as u8),
            top: 0,
            front_free: FRONT as u32,
            map_gen: 0,
            front_mid_holes: false,
            map: PageMap::new(),
            count: BitSet::new(MIN_TREE),
            holes: BitSet::new(MIN_TREE),
            count_total: 0,
            holes_total: 0,
            holes_live: 0,
            now: 1,
            floor: 1,
            hist: vec![0; max],
            beyond: 0,
            cold: 0,
            accesses: 0,
        }
    }

    /// The counts so far.
    pub fn result(&self) -> StackResult {
        StackResult {
            accesses: self.accesses,
            cold: self.cold,
            histogram: self.hist.clone(),
            beyond: self.beyond,
            max_distance: self.max,
        }
    }

    /// Pages currently in the stack (the footprint since the last flush, minus
    /// invalidated pages).
    pub fn pages(&self) -> usize {
        let front = self.fc.iter().filter(|&&c| c != NO_CTX).count();
        front + (self.count_total - self.holes_total) as usize
            - self.dead_below_floor_pages() as usize
    }

    /// (length of the sets of times, pages in the map): memory follows the footprint.
    #[cfg(test)]
    pub(crate) fn footprint(&self) -> (usize, usize) {
        (self.count.len(), self.map.len())
    }

    /// Pages counted in the trees below the floor (dead); only for [`Self::pages`].
    fn dead_below_floor_pages(&self) -> u32 {
        let below = self.count.prefix(self.floor as usize - 1);
        let holes_below = self.holes.prefix(self.floor as usize - 1);
        below - holes_below
    }

    #[inline(always)]
    fn record(&mut self, d: usize) {
        if d < self.max {
            self.hist[d] += 1;
        } else {
            self.beyond += 1;
        }
    }

    /// The front slot holding `(vpn, ctx)`.
    #[inline(always)]
    fn front_find(&self, vpn: u64, ctx: u64) -> Option<usize> {
        let mut m = mask(&self.ftag, fingerprint(vpn, ctx));
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            if self.fv[i] == vpn && self.fc[i] == ctx {
                return Some(i);
            }
            m &= m - 1;
        }
        None
    }

    /// The hole slot of smallest rank, if its rank is below `below`.
    #[inline]
    fn top_hole(&self, below: u8) -> Option<usize> {
        let mut best: Option<usize> = None;
        for i in 0..FRONT {
            if self.fc[i] == NO_CTX
                && self.rank[i] < below
                && best.is_none_or(|b| self.rank[i] < self.rank[b])
            {
                best = Some(i);
            }
        }
        best
    }

    /// Put the page in `slot`, whose rank is `j`, at the top: ranks below `j` go down one.
    #[inline(always)]
    fn promote(&mut self, slot: usize, j: u8) {
        for r in self.rank.iter_mut() {
            *r += (*r < j) as u8;
        }
        self.rank[slot] = 0;
        self.top = slot;
    }

    /// Store a page in front slot `i`.
    #[inline(always)]
    fn put(&mut self, i: usize, vpn: u64, ctx: u64, slot: u32) {
        self.fv[i] = vpn;
        self.fc[i] = ctx;
        self.ftag[i] = fingerprint(vpn, ctx);
        self.fslot[i] = slot;
    }

    /// Front slots refer to map slots; refresh them after the map moved its entries.
    fn refresh_slots(&mut self) {
        for i in 0..FRONT {
            if self.fc[i] != NO_CTX {
                self.fslot[i] = self.map.find(self.fv[i], self.fc[i]).unwrap_or(0) as u32;
            }
        }
        self.map_gen = self.map.generation();
    }

    /// A reference to the page in front slot `i`.
    #[inline(always)]
    fn hit_front(&mut self, i: usize) {
        let d = self.rank[i];
        let hole = if self.front_mid_holes {
            self.top_hole(d)
        } else {
            None
        };
        match hole {
            Some(h) => {
                // The hole above takes the page; the page's slot becomes the hole.
                let j = self.rank[h];
                self.put(h, self.fv[i], self.fc[i], self.fslot[i]);
                self.fc[i] = NO_CTX;
                self.fv[i] = 0;
                self.promote(h, j);
            }
            None => self.promote(i, d),
        }
        self.record(d as usize);
    }

    /// A reference to a page deeper than the front, or not in the stack.
    fn deep(&mut self, vpn: u64, ctx: u64) {
        if self.now as usize >= self.count.len() {
            self.compact();
        }
        let (s, _) = self.map.entry(vpn, ctx, ABSENT);
        if self.map.generation() != self.map_gen {
            self.refresh_slots();
        }
        let t = self.map.get(s);
        debug_assert!(t != IN_FRONT);
        let live = t != ABSENT && t >= self.floor;
        if live {
            let above = self.count_total - self.count.prefix(t as usize);
            self.record(FRONT + above as usize);
        } else {
            self.cold += 1;
        }
        let hole = if self.front_free > 0 {
            self.top_hole(FRONT as u8)
        } else {
            None
        };
        if let Some(h) = hole {
            self.front_free -= 1;
            // The topmost hole is in the front: it takes the page's place at the top, and
            // the page's old place (if any) becomes a hole.
            if live {
                self.add_hole(t);
            }
            let j = self.rank[h];
            self.put(h, vpn, ctx, s as u32);
            self.promote(h, j);
        } else {
            let mut consumed = false;
            if self.holes_live > 0 {
                let th = self.holes.kth(self.holes_total) as u32;
                debug_assert!(th >= self.floor);
                if !live || th > t {
                    self.count.remove(th as usize);
                    self.count_total -= 1;
                    self.holes.remove(th as usize);
                    self.holes_total -= 1;
                    self.holes_live -= 1;
                    if live {
                        self.add_hole(t);
                    }
                    consumed = true;
                }
            }
            if live && !consumed {
                self.count.remove(t as usize);
                self.count_total -= 1;
            }
            // The last front page moves into the trees, newer than everything there.
            let n = self.now;
            self.now += 1;
            self.count.insert(n as usize);
            self.count_total += 1;
            let last = rank_mask(&self.rank, FRONT as u8 - 1).trailing_zeros() as usize % FRONT;
            self.map.set(self.fslot[last] as usize, n);
            self.put(last, vpn, ctx, s as u32);
            self.promote(last, FRONT as u8 - 1);
        }
        self.map.set(s, IN_FRONT);
    }

    /// The element at time `t` (counted in `count`) becomes a hole.
    #[inline]
    fn add_hole(&mut self, t: u32) {
        self.holes.insert(t as usize);
        self.holes_total += 1;
        self.holes_live += 1;
    }

    /// Renumber the live elements `1..=live` in order, resize the trees to them and drop dead
    /// pages from the map.
    fn compact(&mut self) {
        let (floor, now) = (self.floor as usize, self.now as usize);
        let live = (floor..now).filter(|&t| self.count.contains(t)).count() as u32;
        let size = (4 * (live as usize + 1)).next_power_of_two().max(MIN_TREE);
        // rank[t]: the new time of the live element at old time t.
        let mut rank = vec![0u32; now];
        let mut c = vec![0u64; size / 64];
        let mut h = vec![0u64; size / 64];
        let (mut r, mut nholes) = (0u32, 0u32);
        for (t, rt) in rank.iter_mut().enumerate().take(now).skip(floor) {
            if self.count.contains(t) {
                r += 1;
                *rt = r;
                let i = r as usize;
                c[i >> 6] |= 1 << (i & 63);
                if self.holes.contains(t) {
                    h[i >> 6] |= 1 << (i & 63);
                    nholes += 1;
                }
            }
        }
        self.count = BitSet::from_bits(c);
        self.holes = BitSet::from_bits(h);
        self.count_total = live;
        self.holes_total = nholes;
        self.holes_live = nholes;
        self.now = live + 1;
        self.floor = 1;
        let fl = floor as u32;
        self.map.retain(|v| match v {
            IN_FRONT => Some(IN_FRONT),
            ABSENT => None,
            t if t < fl => None,
            t => Some(rank[t as usize]),
        });
        self.refresh_slots();
    }
}

impl Engine for StackDistance {
    #[inline]
    fn access(&mut self, vpn: u64, ctx: u64) {
        debug_assert!(ctx != NO_CTX);
        self.accesses += 1;
        if self.fv[self.top] == vpn && self.fc[self.top] == ctx {
            self.hist[0] += 1;
            return;
        }
        match self.front_find(vpn, ctx) {
            Some(i) => self.hit_front(i),
            None => self.deep(vpn, ctx),
        }
    }

    #[inline(always)]
    fn prefetch(&self, vpn: u64, ctx: u64) {
        self.map.prefetch(vpn, ctx);
    }

    fn invalidate(&mut self, vpn: u64, ctx: u64) {
        if let Some(i) = self.front_find(vpn, ctx) {
            self.map.set(self.fslot[i] as usize, ABSENT);
            self.fc[i] = NO_CTX;
            self.fv[i] = 0;
            self.front_mid_holes = true;
            self.front_free += 1;
            return;
        }
        if let Some(s) = self.map.find(vpn, ctx) {
            let t = self.map.get(s);
            if t != ABSENT && t >= self.floor {
                self.add_hole(t);
                self.map.set(s, ABSENT);
            }
        }
    }

    fn flush_ctx(&mut self, ctx: u64) {
        for vpn in self.map.pages_of(ctx) {
            self.invalidate(vpn, ctx);
        }
    }

    fn flush(&mut self) {
        for i in 0..FRONT {
            if self.fc[i] != NO_CTX {
                self.map.set(self.fslot[i] as usize, ABSENT);
            }
        }
        self.fc = [NO_CTX; FRONT];
        self.fv = [0; FRONT];
        self.floor = self.now;
        self.holes_live = 0;
        self.front_mid_holes = false;
        self.front_free = FRONT as u32;
    }
}
