//! Three-C classification of misses (Hill's compulsory, capacity and conflict), exactly as
//! DineroIV classifies them (`-ccc`), for any TLB or cache.
//!
//! Every reference to a structure with classification on also goes to a [`Shadow`]: a fully
//! associative structure of the same number of entries (blocks) and the same replacement
//! policy, updated exactly when the structure is (DineroIV's extra "set"), and the set of
//! (sub-)blocks ever brought in (DineroIV's infinite cache). A reference that misses the
//! structure is
//!
//! * a **conflict** miss if it hits the shadow;
//! * else a **compulsory** miss if some (sub-)block it touches was never referenced before;
//! * else a **capacity** miss.
//!
//! For a structure without sub-blocks (every TLB) compulsory misses are exactly the distinct
//! blocks touched. As in DineroIV the infinite cache is only consulted (and filled) on a
//! reference that misses both the structure and the shadow: a (sub-)block's first reference
//! always does, so "ever referenced" is what it records. A cache's *block* misses (a miss
//! that found no part of the block) get their own class: conflict if the shadow held the
//! block, compulsory if no part of it was ever referenced, capacity otherwise.
//!
//! Invalidations (TLB flushes, shootdowns, the flush of an untagged TLB at a switch) reach
//! the shadow too: it is the same structure, only fully associative. A miss on an entry a
//! flush removed is then a capacity miss (the shadow lost it as well).
//!
//! Memory: the shadow's tags (as large as the structure's) and, per group of neighbouring
//! blocks any of which was touched, a bitmap of them (a bit per block, or a 32-bit sub-block
//! mask); the hash look-up of the infinite cache is paid only on misses of the shadow.
//!
//! An LRU or FIFO shadow of at least [`INDEX_MIN_WAYS`] entries is the exact TLB engine
//! ([`ExactTlb`]: O(1) look-ups and fills through a hash chain and a recency list, the last
//! key a compare); any other is the structure's own kind of store — a TLB's a [`Tlb`]
//! (blocks are pages with a context), a cache's the caches' tag store ([`CacheTags`]: blocks
//! alone).

use crate::cache::tags::CacheTags;
use crate::tlb::{ExactTlb, Policy, Tlb, TlbParams, INDEX_MIN_WAYS, NO_CTX};

/// The classes, in report order.
pub const CLASSES: [&str; 3] = ["compulsory", "capacity", "conflict"];

/// The class of a miss (its index into [`CLASSES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Compulsory = 0,
    Capacity = 1,
    Conflict = 2,
}

/// What DineroIV's infinite cache says of a reference's (sub-)blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Every sub-block it touches was referenced before.
    All,
    /// Some sub-block of its block was, but not all it touches.
    Part,
    /// No sub-block of its block ever was.
    Never,
}

/// Words of bits in each group of [`Known`].
const GROUP_WORDS: usize = 64;

/// DineroIV's infinite cache: per group of neighbouring blocks and context, the (sub-)blocks
/// ever referenced — a bit per block without sub-blocks (4096 blocks to a group), the 32-bit
/// sub-block mask per block with them (128 blocks to a group). A stream over a region keeps
/// its blocks in a bitmap about as dense as one bit (mask) per block, which the host's caches
/// hold (with an entry per block, or per 64 blocks, a miss-heavy stream over 64 MiB waited on
/// the host's memory at most misses of the shadow). An open-addressing table of groups
/// (linear probing, at most half full, doubled when it would be more), never removed: a
/// look-up is one hash and usually one slot.
#[derive(Clone, Debug, Default)]
struct Known {
    slots: Vec<Group>,
    len: usize,
    /// `64 - log2(slots.len())`: a hash's top bits are its home slot.
    shift: u32,
}

/// One group of [`Known`]; a free slot has the context [`NO_CTX`], which no structure
/// stores.
#[derive(Clone, Copy, Debug)]
struct Group {
    key: u64,
    ctx: u64,
    bits: [u64; GROUP_WORDS],
}

const FREE: Group = Group {
    key: 0,
    ctx: NO_CTX,
    bits: [0; GROUP_WORDS],
};

impl Known {
    /// The home slot of `(key, ctx)` in a table of `64 - shift` bits.
    #[inline(always)]
    fn home(key: u64, ctx: u64, shift: u32) -> usize {
        ((key ^ ctx.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
    }

    /// The bits of group `(key, ctx)`, added (all clear) if it was not there.
    #[inline]
    fn group(&mut self, key: u64, ctx: u64) -> &mut [u64; GROUP_WORDS] {
        debug_assert_ne!(ctx, NO_CTX, "NO_CTX marks a free slot");
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = Known::home(key, ctx, self.shift);
        loop {
            let g = &self.slots[i];
            if g.ctx == NO_CTX {
                self.len += 1;
                self.slots[i] = Group {
                    key,
                    ctx,
                    bits: [0; GROUP_WORDS],
                };
                return &mut self.slots[i].bits;
            }
            if g.key == key && g.ctx == ctx {
                return &mut self.slots[i].bits;
            }
            i = (i + 1) & mask;
        }
    }

    /// Double the table (or make the first one).
    #[cold]
    fn grow(&mut self) {
        let size = (2 * self.slots.len()).max(64);
        let old = std::mem::replace(&mut self.slots, vec![FREE; size]);
        self.shift = 64 - size.trailing_zeros();
        for g in old.into_iter().filter(|g| g.ctx != NO_CTX) {
            let mut i = Known::home(g.key, g.ctx, self.shift);
            while self.slots[i].ctx != NO_CTX {
                i = (i + 1) & (size - 1);
            }
            self.slots[i] = g;
        }
    }
}

/// The fully associative tag store of a [`Shadow`]: the structure's own kind of store, with
/// its exact replacement.
pub trait ShadowTags: Clone {
    /// An empty fully associative store of `entries` entries replaced by `policy`.
    fn fully_associative(entries: usize, policy: Policy, seed: u64) -> Result<Self, String>;
    /// The heap bytes of [`ShadowTags::fully_associative`]'s store of `entries` entries.
    fn heap_bytes(entries: usize) -> u64;
    /// Look `(key, ctx)` up and fill it when absent: its slot, and whether it was present.
    fn touch(&mut self, key: u64, ctx: u64) -> (usize, bool);
    /// The slot of `(key, ctx)` if present, the hit updating replacement; a miss changes
    /// nothing.
    fn lookup_slot(&mut self, key: u64, ctx: u64) -> Option<usize>;
}

impl ShadowTags for Tlb {
    fn fully_associative(entries: usize, policy: Policy, seed: u64) -> Result<Self, String> {
        let mut p = TlbParams::new(entries, entries, policy);
        p.seed = seed;
        Tlb::new(&p)
    }

    fn heap_bytes(entries: usize) -> u64 {
        TlbParams::new(entries, entries, Policy::Lru).heap_bytes()
    }

    #[inline]
    fn touch(&mut self, key: u64, ctx: u64) -> (usize, bool) {
        let t = self.access_slot(key, ctx);
        (t.slot, t.hit)
    }

    #[inline]
    fn lookup_slot(&mut self, key: u64, ctx: u64) -> Option<usize> {
        let (set, way) = self.probe(key, ctx, NO_CTX)?;
        self.lookup(key, ctx, NO_CTX);
        Some(set * self.ways() + way)
    }
}

/// A cache's blocks carry no context: `ctx` is always 0.
impl ShadowTags for CacheTags {
    fn fully_associative(entries: usize, policy: Policy, seed: u64) -> Result<Self, String> {
        CacheTags::new(entries, entries, policy, seed)
    }

    fn heap_bytes(entries: usize) -> u64 {
        CacheTags::heap_bytes(entries, entries)
    }

    #[inline(always)]
    fn touch(&mut self, key: u64, _ctx: u64) -> (usize, bool) {
        let t = self.access(key);
        (t.slot, t.hit)
    }

    #[inline(always)]
    fn lookup_slot(&mut self, key: u64, _ctx: u64) -> Option<usize> {
        self.lookup(key)
    }
}

/// The fully associative store of a [`Shadow`]. LRU and FIFO — the policies whose every
/// operation the exact TLB engine makes O(1): a hash chain finds a key, the front of the
/// recency (or fill) list is the victim, nothing is scanned — take that engine ([`Exact`]);
/// every other policy, and a store too small for the engine's hash index, the structure's
/// own kind of store (`T`).
#[derive(Clone)]
enum Store<T> {
    Lru(Exact<true>),
    Fifo(Exact<false>),
    General(T),
}

/// No key was accessed last (a context no structure stores).
const NO_LAST: (u64, u64) = (0, NO_CTX);

/// A fully associative LRU (`LRU`) or FIFO store: the exact TLB engine with one set of as
/// many ways as the structure has entries, and the key accessed last with its slot. A
/// reference repeating that key (a structure's hits mostly do) is a hit that changes
/// nothing — the key is already the most recent (LRU), and hits leave FIFO's order — so it
/// costs a compare instead of a hash, a chain and a move in the list. Invalidations forget
/// it.
#[derive(Clone)]
struct Exact<const LRU: bool> {
    tlb: ExactTlb<LRU, true>,
    last: (u64, u64),
    last_slot: usize,
}

impl<const LRU: bool> Exact<LRU> {
    fn new(entries: usize, policy: Policy) -> Result<Exact<LRU>, String> {
        Ok(Exact {
            tlb: ExactTlb::new(&TlbParams::new(entries, entries, policy))?,
            last: NO_LAST,
            last_slot: 0,
        })
    }

    /// [`ShadowTags::touch`].
    #[inline(always)]
    fn touch(&mut self, key: u64, ctx: u64) -> (usize, bool) {
        if (key, ctx) == self.last {
            return (self.last_slot, true);
        }
        let (slot, hit) = self.tlb.touch(key, ctx);
        self.last = (key, ctx);
        self.last_slot = slot;
        (slot, hit)
    }

    /// [`Exact::touch`] of a reference the structure hit, which the shadow mostly does too:
    /// the fill out of line.
    #[inline(always)]
    fn touch_mostly_hit(&mut self, key: u64, ctx: u64) {
        if (key, ctx) == self.last {
            return;
        }
        self.last_slot = self.tlb.touch_mostly_hit(key, ctx).0;
        self.last = (key, ctx);
    }

    /// [`ShadowTags::lookup_slot`].
    #[inline(always)]
    fn lookup_slot(&mut self, key: u64, ctx: u64) -> Option<usize> {
        if (key, ctx) == self.last {
            return Some(self.last_slot);
        }
        let slot = self.tlb.lookup(key, ctx)?;
        self.last = (key, ctx);
        self.last_slot = slot;
        Some(slot)
    }

    fn invalidate(&mut self, key: u64, ctx: u64) {
        self.last = NO_LAST;
        self.tlb.invalidate(key, ctx);
    }

    fn flush_if(&mut self, pred: impl FnMut(u64, u64) -> bool) {
        self.last = NO_LAST;
        self.tlb.flush_if(pred);
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Lru(_) => f.write_str("Store::Lru"),
            Store::Fifo(_) => f.write_str("Store::Fifo"),
            Store::General(t) => f.debug_tuple("Store::General").field(t).finish(),
        }
    }
}

impl<T: ShadowTags> Store<T> {
    fn new(entries: usize, policy: Policy, seed: u64) -> Result<Store<T>, String> {
        Ok(match policy {
            Policy::Lru if entries >= INDEX_MIN_WAYS => Store::Lru(Exact::new(entries, policy)?),
            Policy::Fifo if entries >= INDEX_MIN_WAYS => Store::Fifo(Exact::new(entries, policy)?),
            _ => Store::General(T::fully_associative(entries, policy, seed)?),
        })
    }

    /// The heap bytes of the largest store of `entries` entries [`Store::new`] may make.
    fn heap_bytes(entries: usize) -> u64 {
        let exact = TlbParams::new(entries, entries, Policy::Lru).heap_bytes();
        T::heap_bytes(entries).max(exact)
    }

    /// [`ShadowTags::touch`].
    #[inline(always)]
    fn touch(&mut self, key: u64, ctx: u64) -> (usize, bool) {
        match self {
            Store::Lru(t) => t.touch(key, ctx),
            Store::Fifo(t) => t.touch(key, ctx),
            Store::General(t) => t.touch(key, ctx),
        }
    }

    /// [`Store::touch`] of a reference the structure hit (see [`Exact::touch_mostly_hit`]).
    #[inline(always)]
    fn touch_mostly_hit(&mut self, key: u64, ctx: u64) {
        match self {
            Store::Lru(t) => t.touch_mostly_hit(key, ctx),
            Store::Fifo(t) => t.touch_mostly_hit(key, ctx),
            Store::General(t) => _ = t.touch(key, ctx),
        }
    }

    /// [`ShadowTags::lookup_slot`].
    #[inline(always)]
    fn lookup_slot(&mut self, key: u64, ctx: u64) -> Option<usize> {
        match self {
            Store::Lru(t) => t.lookup_slot(key, ctx),
            Store::Fifo(t) => t.lookup_slot(key, ctx),
            Store::General(t) => t.lookup_slot(key, ctx),
        }
    }
}

/// The fully associative shadow and the infinite cache of one structure, whose tags are a
/// `T` (a TLB's: [`Tlb`]; a cache's: [`CacheTags`]).
#[derive(Clone, Debug)]
pub struct Shadow<T = Tlb> {
    fa: Store<T>,
    /// Per slot of `fa`, its valid sub-blocks (none kept without sub-blocks: a present
    /// block's only sub-block is valid).
    valid: Vec<u32>,
    /// DineroIV's infinite cache (see [`Known`]).
    seen: Known,
    whole: bool,
}

impl<T: ShadowTags> Shadow<T> {
    /// The shadow of a structure of `entries` entries (blocks) replaced by `policy`;
    /// `whole_blocks`: the structure has no sub-blocks (every reference touches the mask 1).
    pub fn new(
        entries: usize,
        policy: Policy,
        seed: u64,
        whole_blocks: bool,
    ) -> Result<Shadow<T>, String> {
        Ok(Shadow {
            valid: if whole_blocks {
                Vec::new()
            } else {
                vec![0; entries]
            },
            fa: Store::new(entries, policy, seed)?,
            seen: Known::default(),
            whole: whole_blocks,
        })
    }

    /// Bytes a shadow of `entries` entries takes, before anything is referenced.
    pub fn heap_bytes(entries: usize) -> u64 {
        Store::<T>::heap_bytes(entries.max(1)).saturating_add(4 * entries as u64)
    }

    /// A reference to sub-blocks `subs` (a mask; 1 for a structure without sub-blocks) of
    /// block `key` in context `ctx`; `allocate`: whether the structure brings an absent block
    /// in (false for a write miss of a cache that does not allocate on writes). Updates the
    /// shadow as the structure is updated and returns whether it missed the block and
    /// whether it missed the sub-blocks.
    #[inline(always)]
    fn access(&mut self, key: u64, ctx: u64, subs: u32, allocate: bool) -> (bool, bool) {
        if self.whole {
            // Every present block has its one sub-block valid: a miss is a block miss.
            let hit = if allocate {
                self.fa.touch(key, ctx).1
            } else {
                self.fa.lookup_slot(key, ctx).is_some()
            };
            return (!hit, !hit);
        }
        if !allocate {
            return match self.fa.lookup_slot(key, ctx) {
                Some(slot) => {
                    let miss = self.valid[slot] & subs != subs;
                    self.valid[slot] |= subs;
                    (false, miss)
                }
                None => (true, true),
            };
        }
        let (slot, hit) = self.fa.touch(key, ctx);
        let block_miss = !hit;
        if block_miss {
            self.valid[slot] = 0;
        }
        let miss = block_miss || self.valid[slot] & subs != subs;
        self.valid[slot] |= subs;
        (block_miss, miss)
    }

    /// DineroIV's infinite cache: what it knew of the sub-blocks `subs` of `(key, ctx)`;
    /// they are known from now on.
    #[inline(always)]
    fn seen(&mut self, key: u64, ctx: u64, subs: u32) -> Seen {
        if self.whole {
            debug_assert_eq!(
                subs, 1,
                "a structure of whole blocks touches sub-block 0 only"
            );
            let words = self.seen.group(key >> 12, ctx);
            let (word, bit) = ((key >> 6) as usize & 63, 1u64 << (key & 63));
            let seen = if words[word] & bit != 0 {
                Seen::All
            } else {
                Seen::Never
            };
            words[word] |= bit;
            return seen;
        }
        // Two blocks to a word, 32 bits each.
        let words = self.seen.group(key >> 7, ctx);
        let (word, shift) = ((key >> 1) as usize & 63, 32 * (key & 1));
        let known = words[word] >> shift & 0xFFFF_FFFF;
        let subs = subs as u64;
        let seen = if known & subs == subs {
            Seen::All
        } else if known == 0 {
            Seen::Never
        } else {
            Seen::Part
        };
        words[word] |= subs << shift;
        seen
    }

    /// [`Shadow::classify`] of a reference that hit the structure, of a whole block (sub-block
    /// 0 of a structure without sub-blocks) that the structure allocates: the shadow sees it,
    /// there is nothing to classify.
    #[inline(always)]
    pub fn hit(&mut self, key: u64, ctx: u64) {
        if self.whole {
            self.fa.touch_mostly_hit(key, ctx);
        } else {
            self.classify(key, ctx, 1, true, false, false);
        }
    }

    /// The reference of [`Shadow::access`]'s arguments went to the structure, which missed
    /// (`missed`) and found no part of the block (`block_missed`) or not: update the shadow,
    /// and classify the miss and the block miss.
    #[inline(always)]
    pub fn classify(
        &mut self,
        key: u64,
        ctx: u64,
        subs: u32,
        allocate: bool,
        missed: bool,
        block_missed: bool,
    ) -> (Option<Class>, Option<Class>) {
        let (full_block_miss, full_miss) = self.access(key, ctx, subs, allocate);
        if !missed {
            return (None, None);
        }
        let (class, seen) = if !full_miss {
            (Class::Conflict, Seen::All)
        } else {
            match self.seen(key, ctx, subs) {
                Seen::All => (Class::Capacity, Seen::All),
                s => (Class::Compulsory, s),
            }
        };
        let block = block_missed.then_some(if !full_block_miss {
            Class::Conflict
        } else if seen == Seen::Never {
            Class::Compulsory
        } else {
            Class::Capacity
        });
        (Some(class), block)
    }
}

impl Shadow<Tlb> {
    /// A TLB's access to `(vpn, ctx)`, which always fills: the class of its miss, if it
    /// `missed`.
    #[inline]
    pub fn tlb_access(&mut self, vpn: u64, ctx: u64, missed: bool) -> Option<Class> {
        if !missed {
            self.hit(vpn, ctx);
            return None;
        }
        self.classify(vpn, ctx, 1, true, true, true).0
    }

    /// The kind and mode of the reference the next accesses serve, for a policy that reads
    /// them ([`Tlb::set_reference`]; the exact stores' LRU and FIFO do not).
    #[inline(always)]
    pub fn set_reference(&mut self, kind: crate::event::Kind, mode: crate::event::Mode) {
        if let Store::General(t) = &mut self.fa {
            t.set_reference(kind, mode);
        }
    }

    /// The structure was filled with `(vpn, ctx)` without a reference (a prefetch): so is
    /// the shadow, and the entry counts as referenced, as DineroIV's shadow and infinite
    /// cache see its prefetches. Nothing is classified: the classes are of demand misses.
    pub fn prefetched(&mut self, vpn: u64, ctx: u64) {
        self.fa.touch(vpn, ctx);
        self.seen(vpn, ctx, 1);
    }

    /// The structure lost the entry `(vpn, ctx)`: so does the shadow.
    pub fn invalidate(&mut self, vpn: u64, ctx: u64) {
        match &mut self.fa {
            Store::Lru(t) => t.invalidate(vpn, ctx),
            Store::Fifo(t) => t.invalidate(vpn, ctx),
            Store::General(t) => _ = t.invalidate(vpn, ctx, NO_CTX),
        }
    }

    /// The structure was emptied: so is the shadow.
    pub fn flush_all(&mut self) {
        match &mut self.fa {
            Store::Lru(t) => t.flush_if(|_, _| true),
            Store::Fifo(t) => t.flush_if(|_, _| true),
            Store::General(t) => t.flush_all(),
        }
    }

    /// The structure lost every entry `pred(vpn, ctx)` accepts: so does the shadow.
    pub fn flush_if(&mut self, pred: impl FnMut(u64, u64) -> bool) {
        match &mut self.fa {
            Store::Lru(t) => t.flush_if(pred),
            Store::Fifo(t) => t.flush_if(pred),
            Store::General(t) => _ = t.flush_if(pred),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tlb::Part;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    /// Brute force: a set-associative LRU structure and a fully associative LRU one as
    /// recency lists, and the set of pages ever touched.
    fn brute(entries: usize, ways: usize, stream: &[u64]) -> [u64; 4] {
        let sets = entries / ways;
        let mut real: Vec<Vec<u64>> = vec![Vec::new(); sets];
        let mut full: Vec<u64> = Vec::new();
        let mut seen = HashSet::new();
        let mut out = [0u64; 4];
        for &p in stream {
            let set = &mut real[(p % sets as u64) as usize];
            let hit = set.iter().position(|&x| x == p);
            match hit {
                Some(i) => {
                    set.remove(i);
                }
                None if set.len() == ways => {
                    set.remove(0);
                }
                None => {}
            }
            set.push(p);
            let full_hit = full.iter().position(|&x| x == p);
            match full_hit {
                Some(i) => {
                    full.remove(i);
                }
                None if full.len() == entries => {
                    full.remove(0);
                }
                None => {}
            }
            full.push(p);
            let first = seen.insert(p);
            if hit.is_none() {
                out[3] += 1;
                if full_hit.is_some() {
                    out[2] += 1;
                } else if first {
                    out[0] += 1;
                } else {
                    out[1] += 1;
                }
            }
        }
        out
    }

    fn classified(entries: usize, ways: usize, stream: &[u64]) -> [u64; 4] {
        let mut tlb = Tlb::new(&TlbParams::new(entries, ways, Policy::Lru)).unwrap();
        let mut shadow: Shadow = Shadow::new(entries, Policy::Lru, 0, true).unwrap();
        let mut out = [0u64; 4];
        for &p in stream {
            let hit = tlb.access(p, 0, NO_CTX, Part::Upper);
            if let Some(c) = shadow.tlb_access(p, 0, !hit) {
                out[c as usize] += 1;
            }
            out[3] += !hit as u64;
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Every miss of an LRU structure is classified as the brute-force definitions say,
        /// on random streams and on cyclic ones (one page more than the structure holds, the
        /// adversary of LRU).
        #[test]
        fn classes_match_the_definitions(
            ways_log in 0u32..4,
            sets_log in 0u32..4,
            pages in 1u64..64,
            stream in prop::collection::vec(0u64..64, 1..400),
            cyclic in any::<bool>(),
        ) {
            let ways = 1usize << ways_log;
            let entries = ways << sets_log;
            let stream: Vec<u64> = if cyclic {
                (0..stream.len() as u64).map(|i| i % (entries as u64 + 1)).collect()
            } else {
                stream.iter().map(|p| p % pages).collect()
            };
            let want = brute(entries, ways, &stream);
            prop_assert_eq!(classified(entries, ways, &stream), want);
            // Compulsory misses are the distinct pages touched.
            let distinct = stream.iter().collect::<HashSet<_>>().len() as u64;
            prop_assert_eq!(want[0], distinct);
        }

        /// The infinite cache answers as a map from (block, context) to the sub-blocks ever
        /// referenced, with and without sub-blocks, over blocks near and far apart (several
        /// per group, groups by the thousand, so that the table grows many times) and
        /// several contexts.
        #[test]
        fn the_infinite_cache_is_a_map_of_blocks(
            whole in any::<bool>(),
            refs in prop::collection::vec((0u64..1 << 20, 0u64..3, 0u32..32, 0u32..32), 1..3000),
            spread in 0u32..40,
        ) {
            let mut s: Shadow = Shadow::new(4, Policy::Lru, 0, whole).unwrap();
            let mut model: HashMap<(u64, u64), u32> = HashMap::new();
            for &(b, ctx, lo, n) in &refs {
                let key = b << spread;
                let subs = if whole { 1 } else { sub_bits(lo, n) };
                let known = model.entry((key, ctx)).or_insert(0);
                let want = if *known & subs == subs {
                    Seen::All
                } else if *known == 0 {
                    Seen::Never
                } else {
                    Seen::Part
                };
                *known |= subs;
                prop_assert_eq!(s.seen(key, ctx, subs), want, "block {:#x} ctx {}", key, ctx);
            }
        }
    }

    /// What a step of [`the_exact_store_is_a_recency_list`] does.
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Touch,
        Hit,
        Lookup,
        Invalidate,
        FlushCtx,
        FlushAll,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            12 => Just(Op::Touch),
            4 => Just(Op::Hit),
            3 => Just(Op::Lookup),
            2 => Just(Op::Invalidate),
            1 => Just(Op::FlushCtx),
            1 => Just(Op::FlushAll),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// The exact engine's store of a shadow (LRU or FIFO, large enough for its hash index)
        /// is a fully associative recency (fill) list of `entries` keys, as is the general
        /// store beside it: every touch and look-up hits exactly when the list holds the key,
        /// a present key keeps its slot and no two share one — on random streams, cyclic
        /// sweeps one key longer than the store, runs of one key repeated (the last key's
        /// shortcut), with invalidations and flushes between.
        #[test]
        fn the_exact_store_is_a_recency_list(
            lru in any::<bool>(),
            extra in 0usize..40,
            shape in 0u8..3,
            steps in prop::collection::vec((op(), 0u64..200, 0u64..3, 1usize..4), 1..600),
        ) {
            let entries = INDEX_MIN_WAYS + extra;
            let policy = if lru { Policy::Lru } else { Policy::Fifo };
            let mut exact: Store<Tlb> = Store::new(entries, policy, 0).unwrap();
            prop_assert!(matches!(exact, Store::Lru(_) | Store::Fifo(_)));
            let mut general: Tlb = ShadowTags::fully_associative(entries, policy, 0).unwrap();
            // Oldest first.
            let mut list: Vec<(u64, u64)> = Vec::new();
            let mut slots: HashMap<(u64, u64), usize> = HashMap::new();
            let mut i = 0u64;
            for &(op, r, ctx, repeat) in &steps {
                for _ in 0..repeat {
                    let key = match shape {
                        0 => r % (2 * entries as u64),
                        // A sweep of entries + 1 keys: every touch of LRU or FIFO misses.
                        1 => i % (entries as u64 + 1),
                        _ => r % 8,
                    };
                    let ctx = if shape == 1 { 0 } else { ctx };
                    i += 1;
                    let at = list.iter().position(|&k| k == (key, ctx));
                    match op {
                        Op::Touch | Op::Hit => {
                            let hit = at.is_some();
                            match at {
                                Some(p) if lru => {
                                    list.remove(p);
                                    list.push((key, ctx));
                                }
                                Some(_) => {}
                                None => {
                                    if list.len() == entries {
                                        let gone = list.remove(0);
                                        slots.remove(&gone);
                                    }
                                    list.push((key, ctx));
                                }
                            }
                            let slot = if let Op::Touch = op {
                                let (slot, h) = exact.touch(key, ctx);
                                prop_assert_eq!(h, hit, "touch {:?}", (key, ctx));
                                Some(slot)
                            } else {
                                exact.touch_mostly_hit(key, ctx);
                                None
                            };
                            prop_assert_eq!(general.touch(key, ctx).1, hit);
                            if let Some(slot) = slot {
                                if hit {
                                    prop_assert_eq!(slots.get(&(key, ctx)), Some(&slot));
                                } else {
                                    prop_assert!(!slots.values().any(|&s| s == slot));
                                    prop_assert!(slot < entries);
                                }
                                slots.insert((key, ctx), slot);
                            } else if !hit {
                                // Its slot is learnt from the next access that returns one.
                                slots.remove(&(key, ctx));
                                let slot = exact.lookup_slot(key, ctx).unwrap();
                                prop_assert!(!slots.values().any(|&s| s == slot));
                                slots.insert((key, ctx), slot);
                                prop_assert!(general.lookup_slot(key, ctx).is_some());
                            }
                        }
                        Op::Lookup => {
                            if let Some(p) = at {
                                if lru {
                                    list.remove(p);
                                    list.push((key, ctx));
                                }
                            }
                            let got = exact.lookup_slot(key, ctx);
                            prop_assert_eq!(got.is_some(), at.is_some(), "lookup {:?}", (key, ctx));
                            if let Some(slot) = got {
                                if let Some(&s) = slots.get(&(key, ctx)) {
                                    prop_assert_eq!(s, slot);
                                }
                                slots.insert((key, ctx), slot);
                            }
                            prop_assert_eq!(general.lookup_slot(key, ctx).is_some(), at.is_some());
                        }
                        Op::Invalidate => {
                            if let Some(p) = at {
                                list.remove(p);
                            }
                            slots.remove(&(key, ctx));
                            match &mut exact {
                                Store::Lru(t) => t.invalidate(key, ctx),
                                Store::Fifo(t) => t.invalidate(key, ctx),
                                Store::General(_) => unreachable!(),
                            }
                            general.invalidate(key, ctx, NO_CTX);
                        }
                        Op::FlushCtx | Op::FlushAll => {
                            let all = matches!(op, Op::FlushAll);
                            let gone = |_: u64, c: u64| all || c == ctx;
                            list.retain(|&(k, c)| !gone(k, c));
                            slots.retain(|&(k, c), _| !gone(k, c));
                            match &mut exact {
                                Store::Lru(t) => t.flush_if(gone),
                                Store::Fifo(t) => t.flush_if(gone),
                                Store::General(_) => unreachable!(),
                            }
                            general.flush_if(gone);
                        }
                    }
                }
            }
        }
    }

    /// Sub-blocks `lo..lo + n` (at least one) of 32, wrapped.
    fn sub_bits(lo: u32, n: u32) -> u32 {
        (0..=n % 8).fold(0, |m, i| m | 1 << ((lo + i) % 32))
    }
}
