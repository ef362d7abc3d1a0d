//! The tag store of caches: per set, the blocks it holds, which of its ways are valid, and
//! its replacement state — nothing else.
//!
//! Caches once kept their blocks in the TLB engine ([`crate::tlb`]), whose sets also carry
//! what translation needs and caches do not: a context tag per entry beside the page (and
//! global matching), partitions with their own policies and counts, and the hint table and
//! MRU bookkeeping that make a TLB's hits cheap. A cache is indexed and tagged by its block
//! number alone, and on a miss-heavy stream that machinery was most of a reference's cost.
//! This store keeps the engine's exact semantics for one context and no partition, so that
//! every count stays what it was.
//!
//! # Semantics
//!
//! * The set of `block` is `block % sets` (any `ways` dividing the blocks, powers of two or
//!   not). Blocks are unique: [`CacheTags::fill`] is only given absent blocks.
//! * A fill takes the lowest-numbered invalid way of its set; only when every way is valid
//!   does the policy choose a victim.
//! * Policies, with the TLB engine's definitions (see [`crate::tlb`]): `lru` (the valid way
//!   hit or filled longest ago), `fifo` (filled longest ago; hits change nothing), `random`
//!   (one draw of a [`SplitMix64`] seeded with the store's seed per victim choice, none when
//!   an invalid way is filled), `plru` (tree pseudo-LRU) and `nru` (clock).
//! * An invalidation makes the way invalid, so that it is the first refilled, and tells the
//!   policy.
//!
//! # Representation
//!
//! * The blocks are one flat array, slot `set * ways + way`; slots never move, so a cache keeps
//!   per-slot state (dirty bits, sub-block masks) beside the store. Everything else of a set
//!   of at most 64 ways — its valid ways as a bit mask, its fingerprints, its order word — is
//!   one 32-byte record, so that an access touches two places: the record and one tag.
//!   Wider sets keep their valid bits in words of their own, with a count.
//! * **Finding a block.** Sets of at most 16 ways keep a 7-bit *fingerprint* of each block (a
//!   multiplicative hash), a byte per way, 8 ways to a word; an invalid way's byte is `0x80`,
//!   which no fingerprint equals. A look-up compares the set's bytes with the block's all at
//!   once (the zero-byte test of `fingerprints ^ block's byte × 0x0101…`) and reads the tag of
//!   a matching way only: a miss usually reads no tag at all, a hit one. Wider sets (fully
//!   associative caches, the classification's shadow) go through a per-set chained hash index
//!   of their valid ways: per bucket the first way, per way the next, at most one way per two
//!   buckets (a look-up follows one or two links; an insertion is two stores; a removal
//!   unlinks the way from its short chain).
//! * **Recency of LRU and FIFO sets of at most [`ORDER_MAX_WAYS`] ways** is one word per set:
//!   its way numbers, 4 bits each, most recent first (the *order word*). A fill, and with LRU a
//!   hit, moves its way to the front: a zero-nibble search finds where the way is and two
//!   masks and a shift move it; the victim is the last nibble, and replacing it rotates the
//!   word by one nibble. Invalidations leave the word alone: an invalid way is always refilled
//!   (and so moved to the front) before the set is full again, which is the only time a
//!   victim is asked, so the valid ways' order is their recency, as the engine's. A look-up
//!   tries the way at the front first (with LRU the set's most recently used, which a hit
//!   leaves in place), then the fingerprints.
//! * **Wider LRU and FIFO sets** keep a recency (or insertion-order) list per set, the TLB
//!   engine's ([`Lists`]: every operation O(1)).
//! * **Every other policy** keeps the TLB engine's replacement state ([`State`]: one home for
//!   PLRU, NRU and random), its hooks inlined into one access path per policy.
//! * **Direct-mapped stores**, whatever their policy (the one way is the only victim, and the
//!   random policy's draws, the only state a victim choice changes, serve this store alone),
//!   keep nothing but the tags and a valid bit per set: a large direct-mapped cache (Chen's
//!   64 KiB of 4-byte lines) then takes 8 bytes and a bit per set of the host's caches.
//! * **The last block.** The block of the last access and its slot: an access repeating it is
//!   a hit that changes no replacement state (LRU: it is already the most recent of its set;
//!   FIFO and random: hits change nothing; PLRU: the same bits would be set again; NRU: its bit
//!   is still set, since only fills clear bits and any fill is an access of its own). Forgotten
//!   by invalidations.
//!
//! No access allocates or dispatches dynamically, and sets of at most 16 ways hash nothing
//! but the fingerprint: the policy is one `match` per access that does not repeat the last
//! block.

use crate::tlb::policy::list::Lists;
use crate::tlb::policy::{AccessInfo, Replacement, State, Visit};
use crate::tlb::{filled, Policy, SetIndex, SplitMix64, MAX_ENTRIES};

/// Largest associativity of LRU and FIFO sets whose recency is an order word (16 way numbers
/// of 4 bits).
pub const ORDER_MAX_WAYS: usize = 16;

/// Sets of at most this many ways find their blocks by fingerprint.
const FP_MAX_WAYS: usize = 16;

/// A nibble of 1 in every position of a word.
const NIBBLES: u64 = 0x1111_1111_1111_1111;

/// A byte of 1 in every byte of a word, and its high bits.
const BYTES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = BYTES << 7;

/// The fingerprint byte of an invalid way: it has the high bit, which no fingerprint has.
const NO_FP: u64 = 0x80;

/// Slots past the last set's, so that the fingerprint search of a set reads 16 tags whatever
/// its associativity (past its ways, fingerprints are [`NO_FP`]: never read).
const PAD: usize = 16;

/// The end of a chain of [`Chains`].
const NIL: u32 = u32::MAX;

/// `last_slot` when there is no last block.
const NONE: usize = usize::MAX;

/// The fingerprint of `block`: the top 7 bits of its Fibonacci hash.
#[inline(always)]
fn fingerprint(block: u64) -> u64 {
    block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57
}

/// What [`CacheTags::access`] did: where the block now lives (`set * ways + way`), whether it
/// was there already, and the valid block its fill evicted, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    pub slot: usize,
    pub hit: bool,
    pub evicted: Option<u64>,
}

impl Touch {
    /// The block was in `slot`.
    #[inline(always)]
    fn hit(slot: usize) -> Touch {
        Touch {
            slot,
            hit: true,
            evicted: None,
        }
    }

    /// The block was placed in `slot`, evicting `evicted`.
    #[inline(always)]
    fn filled((slot, evicted): (usize, Option<u64>)) -> Touch {
        Touch {
            slot,
            hit: false,
            evicted,
        }
    }
}

/// How a store's sets are replaced. (An explicit tag byte makes the per-access `match` one
/// compare.)
#[derive(Clone)]
#[repr(u8)]
enum Repl {
    /// LRU, sets of at most [`ORDER_MAX_WAYS`] ways: the order words.
    Lru,
    /// FIFO, sets of at most [`ORDER_MAX_WAYS`] ways: the order words (hits leave them).
    Fifo,
    /// LRU, wider sets: ways least recently used first.
    WideLru(Lists),
    /// FIFO, wider sets: ways in fill order.
    WideFifo(Lists),
    /// Random, PLRU and NRU, any associativity: the TLB engine's state.
    Policy(State),
    /// One way per set, whatever the policy: no state (see [`Slots::access_direct`]).
    Direct,
}

/// The chained hash index of sets of more than [`FP_MAX_WAYS`] ways (see the module
/// documentation): it holds exactly the valid ways.
#[derive(Clone)]
struct Chains {
    /// Per set, `buckets` chain heads (a way, or [`NIL`]).
    head: Vec<u32>,
    /// Per slot, the next way of its chain.
    next: Vec<u32>,
    buckets: usize,
    /// `64 - log2(buckets)`: a block's hash's top bits are its bucket.
    shift: u32,
}

impl Chains {
    fn new(sets: usize, ways: usize) -> Result<Chains, String> {
        let buckets = (2 * ways).next_power_of_two();
        Ok(Chains {
            head: filled(sets * buckets, NIL)?,
            next: filled(sets * ways, NIL)?,
            buckets,
            shift: 64 - buckets.trailing_zeros(),
        })
    }

    /// The heap bytes of the index of `sets` sets of `ways` ways.
    fn heap_bytes(sets: u64, ways: u64) -> u64 {
        let buckets = (2 * ways).next_power_of_two();
        sets.saturating_mul(buckets.saturating_add(ways).saturating_mul(4))
    }

    /// The head of the chain of `block` in `set`.
    #[inline(always)]
    fn bucket(&self, set: usize, block: u64) -> usize {
        set * self.buckets + (block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The way of `set` (whose tags are `tags`) holding `block`.
    #[inline(always)]
    fn find(&self, set: usize, block: u64, tags: &[u64], ways: usize) -> Option<usize> {
        let base = set * ways;
        let mut w = self.head[self.bucket(set, block)];
        while w != NIL {
            if tags[base + w as usize] == block {
                return Some(w as usize);
            }
            w = self.next[base + w as usize];
        }
        None
    }

    /// `way` of `set` now holds `block`.
    #[inline(always)]
    fn insert(&mut self, set: usize, way: usize, block: u64, ways: usize) {
        let b = self.bucket(set, block);
        self.next[set * ways + way] = self.head[b];
        self.head[b] = way as u32;
    }

    /// `way` of `set`, which holds `block`, no longer does.
    #[inline(always)]
    fn remove(&mut self, set: usize, way: usize, block: u64, ways: usize) {
        let base = set * ways;
        let b = self.bucket(set, block);
        let after = self.next[base + way];
        if self.head[b] == way as u32 {
            self.head[b] = after;
            return;
        }
        let mut w = self.head[b] as usize;
        while self.next[base + w] != way as u32 {
            w = self.next[base + w] as usize;
        }
        self.next[base + w] = after;
    }

    /// Forget every way of `set`.
    fn clear_set(&mut self, set: usize) {
        self.head[set * self.buckets..(set + 1) * self.buckets].fill(NIL);
    }
}

/// Everything of one set but its tags (see the module documentation).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Meta {
    /// The fingerprint bytes of ways 0–7 and 8–15 (sets of at most [`FP_MAX_WAYS`] ways).
    fp: [u64; 2],
    /// The order word (LRU and FIFO sets of at most [`ORDER_MAX_WAYS`] ways).
    order: u64,
    /// The valid ways (sets of at most 64 ways).
    valid: u64,
}

impl Meta {
    /// Set the fingerprint byte of `way` (of at most [`FP_MAX_WAYS`]).
    #[inline(always)]
    fn set_fp(&mut self, way: usize, byte: u64) {
        let word = &mut self.fp[(way / 8) & 1];
        let at = 8 * (way % 8);
        *word = (*word & !(0xFF << at)) | byte << at;
    }
}

/// Everything of a [`CacheTags`] but its replacement state, so that an access can borrow it
/// beside the policy's concrete type.
#[derive(Clone)]
struct Slots {
    /// Per slot, the block it holds (meaningless where the way is invalid), then [`PAD`] slots
    /// that are never valid.
    tags: Vec<u64>,
    /// `sets * ways`.
    slots: usize,
    meta: Vec<Meta>,
    /// Sets of more than 64 ways: their valid bits, `words` words per set, and their counts
    /// of valid ways.
    wide: Vec<u64>,
    count: Vec<u32>,
    words: usize,
    /// Fingerprint words per set: 1 (at most 8 ways), 2 (at most 16), or 0 (none: the set
    /// has `chains`).
    fp_words: usize,
    chains: Option<Chains>,
    sets: usize,
    ways: usize,
    set_index: SetIndex,
    /// The valid mask of a full set (sets of at most 64 ways).
    full: u64,
    /// The used nibbles of an order word.
    order_mask: u64,
    /// Valid ways in all.
    held: usize,
    /// The block of the last access and its slot (`NONE`: none, or forgotten).
    last_block: u64,
    last_slot: usize,
}

/// A set-associative store of block numbers (see the module documentation).
#[derive(Clone)]
pub struct CacheTags {
    s: Slots,
    repl: Repl,
    rng: SplitMix64,
    policy: Policy,
    /// [`CacheTags::ordered`] is `Some(true)`: an access goes straight to
    /// [`CacheTags::access_ordered`].
    lru_ordered: bool,
}

impl std::fmt::Debug for CacheTags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheTags")
            .field("sets", &self.s.sets)
            .field("ways", &self.s.ways)
            .field("policy", &self.policy)
            .field("held", &self.s.held)
            .finish_non_exhaustive()
    }
}

/// Order word `o` with `way` moved to the front (the low nibble), the ways before it moved one
/// place back. `way` must be in the word (each way is, exactly once).
#[inline(always)]
fn to_front(o: u64, way: usize) -> u64 {
    let x = o ^ (way as u64).wrapping_mul(NIBBLES);
    // The high bit of the lowest zero nibble of `x` (exact: borrows only run upwards from a
    // zero nibble), which is where `way` is.
    let zero = x.wrapping_sub(NIBBLES) & !x & (NIBBLES << 3);
    let at = zero.trailing_zeros() & !3;
    let before = o & ((1u64 << at) - 1);
    let after = o & !((1u64 << at) << 4).wrapping_sub(1);
    after | before << 4 | way as u64
}

/// The first way among 8 whose fingerprint byte in `fps` is the one repeated in `q` and
/// whose tag (`tags[way]`) is `block`.
#[inline(always)]
fn find_in_word(fps: u64, q: u64, tags: &[u64; 8], block: u64) -> Option<usize> {
    let x = fps ^ q;
    // The high bit of every zero byte of `x` (and maybe of bytes above one: borrows run
    // upwards), so every way whose fingerprint is the block's is a candidate.
    let mut z = x.wrapping_sub(BYTES) & !x & HIGHS;
    while z != 0 {
        let way = (z.trailing_zeros() / 8) as usize;
        if tags[way] == block {
            return Some(way);
        }
        z &= z - 1;
    }
    None
}

/// The way of a set of at most [`FP_MAX_WAYS`] ways (its record `m`, `fp_words` fingerprint
/// words, its 16 tags from its first) holding `block`: the ways whose fingerprint is the
/// block's, lowest first, until one holds it.
#[inline(always)]
fn find_fp_in(m: &Meta, fp_words: usize, tags: &[u64; 16], block: u64) -> Option<usize> {
    let q = fingerprint(block).wrapping_mul(BYTES);
    let (low, high) = tags.split_at(8);
    if let Some(way) = find_in_word(m.fp[0], q, low.try_into().expect("8 tags"), block) {
        return Some(way);
    }
    if fp_words > 1 {
        let high: &[u64; 8] = high.try_into().expect("8 tags");
        return find_in_word(m.fp[1], q, high, block).map(|way| way + 8);
    }
    None
}

impl Slots {
    #[inline(always)]
    fn set_of(&self, block: u64) -> usize {
        self.set_index.of(block)
    }

    /// The way of `set` holding `block`.
    #[inline(always)]
    fn find(&self, set: usize, block: u64) -> Option<usize> {
        match &self.chains {
            None if self.fp_words == 0 => self.find_direct(set, block).then_some(0),
            None => self.find_fp(set, block),
            Some(c) => c.find(set, block, &self.tags, self.ways),
        }
    }

    /// Whether the one way of `set` (direct-mapped) holds `block`.
    #[inline(always)]
    fn find_direct(&self, set: usize, block: u64) -> bool {
        self.tags[set] == block && self.wide[set / 64] >> (set % 64) & 1 != 0
    }

    /// [`Slots::find`] in a set of at most [`FP_MAX_WAYS`] ways: the ways whose fingerprint is
    /// the block's, lowest first, until one holds the block.
    #[inline(always)]
    fn find_fp(&self, set: usize, block: u64) -> Option<usize> {
        let base = set * self.ways;
        // Past the last set's ways come the set's padding or the next set's tags: their
        // fingerprints are NO_FP, never candidates.
        let tags: &[u64; 16] = self.tags[base..base + 16].try_into().expect("16 tags");
        find_fp_in(&self.meta[set], self.fp_words, tags, block)
    }

    /// Set the fingerprint byte of `way` of `set` (of at most [`FP_MAX_WAYS`] ways).
    #[inline(always)]
    fn set_fp(&mut self, set: usize, way: usize, byte: u64) {
        self.meta[set].set_fp(way, byte);
    }

    /// Index `block`, now in `way` of `set`.
    #[inline(always)]
    fn index(&mut self, set: usize, way: usize, block: u64) {
        match &mut self.chains {
            None if self.fp_words == 0 => {}
            None => self.set_fp(set, way, fingerprint(block)),
            Some(c) => c.insert(set, way, block, self.ways),
        }
    }

    /// Stop indexing `way` of `set`, which holds `block`.
    #[inline(always)]
    fn unindex(&mut self, set: usize, way: usize, block: u64) {
        match &mut self.chains {
            None if self.fp_words == 0 => {}
            None => self.set_fp(set, way, NO_FP),
            Some(c) => c.remove(set, way, block, self.ways),
        }
    }

    /// Whether `way` of `set` is valid.
    #[inline]
    fn is_valid(&self, set: usize, way: usize) -> bool {
        match self.words {
            0 => self.wide[set / 64] >> (set % 64) & 1 != 0,
            1 => self.meta[set].valid >> way & 1 != 0,
            _ => self.wide[set * self.words + way / 64] >> (way % 64) & 1 != 0,
        }
    }

    /// Whether every way of `set` is valid.
    #[inline(always)]
    fn is_full(&self, set: usize) -> bool {
        match self.words {
            0 => self.is_valid(set, 0),
            1 => self.meta[set].valid == self.full,
            _ => self.count[set] as usize == self.ways,
        }
    }

    /// Make the lowest invalid way of `set` (which has one) valid; returns it.
    #[inline(always)]
    fn take_invalid(&mut self, set: usize) -> usize {
        self.held += 1;
        if self.words == 0 {
            self.wide[set / 64] |= 1 << (set % 64);
            return 0;
        }
        if self.words == 1 {
            let v = &mut self.meta[set].valid;
            let way = (!*v).trailing_zeros() as usize;
            *v |= 1 << way;
            return way;
        }
        let bits = &mut self.wide[set * self.words..(set + 1) * self.words];
        let wi = bits.iter().position(|&b| b != !0).expect("an invalid way");
        let bit = (!bits[wi]).trailing_zeros() as usize;
        bits[wi] |= 1 << bit;
        self.count[set] += 1;
        wi * 64 + bit
    }

    /// Make the valid `way` of `set` invalid.
    #[inline]
    fn clear_valid(&mut self, set: usize, way: usize) {
        self.held -= 1;
        if self.words == 0 {
            self.wide[set / 64] &= !(1 << (set % 64));
        } else if self.words == 1 {
            self.meta[set].valid &= !(1 << way);
        } else {
            self.wide[set * self.words + way / 64] &= !(1 << (way % 64));
            self.count[set] -= 1;
        }
    }

    /// [`CacheTags::access`] of `block` in `set` of a direct-mapped store (any policy: the
    /// one way is the only victim, and no policy's state changes what it chooses).
    #[inline(always)]
    fn access_direct(&mut self, set: usize, block: u64) -> Touch {
        let valid = self.wide[set / 64] >> (set % 64) & 1 != 0;
        let old = self.tags[set];
        self.remember(block, set);
        if valid && old == block {
            return Touch::hit(set);
        }
        if !valid {
            self.wide[set / 64] |= 1 << (set % 64);
            self.held += 1;
        }
        self.tags[set] = block;
        Touch::filled((set, valid.then_some(old)))
    }

    /// `block`, just touched, lives in `slot`.
    #[inline(always)]
    fn remember(&mut self, block: u64, slot: usize) {
        self.last_block = block;
        self.last_slot = slot;
    }

    /// The way of `set` of an order-word store holding `block`, the hit refreshing the order
    /// (`LRU`: it moves to the front; else FIFO, unchanged).
    #[inline(always)]
    fn hit_ordered<const LRU: bool>(&mut self, set: usize, block: u64) -> Option<usize> {
        let base = set * self.ways;
        // The set's ways and what follows them (see `PAD`): way numbers masked to 4 bits
        // index them without further bounds checks.
        let tags: &[u64; 16] = self.tags[base..base + 16].try_into().expect("16 tags");
        let m = &mut self.meta[set];
        // The way at the front of the order word first (LRU: the set's most recently used,
        // whose order a hit leaves as it is; FIFO: its last fill).
        let front = (m.order & 15) as usize;
        let way = if tags[front] == block && m.valid >> front & 1 != 0 {
            front
        } else {
            let way = find_fp_in(m, self.fp_words, tags, block)?;
            if LRU {
                m.order = to_front(m.order, way);
            }
            way
        };
        self.remember(block, base + way);
        Some(way)
    }

    /// Put the absent `block` into `set` of an order-word store: the lowest invalid way, else
    /// the last of the order word. Returns the slot and the block evicted.
    #[inline(always)]
    fn place_ordered(&mut self, set: usize, block: u64) -> (usize, Option<u64>) {
        let base = set * self.ways;
        let tags: &mut [u64; 16] = (&mut self.tags[base..base + 16])
            .try_into()
            .expect("16 tags");
        let m = &mut self.meta[set];
        let (way, evicted) = if m.valid != self.full {
            let way = (!m.valid).trailing_zeros() as usize & 15;
            m.valid |= 1 << way;
            m.order = to_front(m.order, way);
            self.held += 1;
            (way, None)
        } else {
            let back = 4 * (self.ways as u32 - 1);
            let way = (m.order >> back & 15) as usize;
            // The victim goes from the back to the front: a rotation of the used nibbles.
            m.order = (m.order << 4 | way as u64) & self.order_mask;
            (way, Some(tags[way]))
        };
        m.set_fp(way, fingerprint(block));
        tags[way] = block;
        self.remember(block, base + way);
        (base + way, evicted)
    }

    /// [`CacheTags::access`] of `block` in `set` of a wide LRU (`LRU`) or FIFO store,
    /// replaced by `order`.
    #[inline(always)]
    fn access_wide<const LRU: bool>(&mut self, order: &mut Lists, set: usize, block: u64) -> Touch {
        if let Some(way) = self.find(set, block) {
            if LRU {
                order.move_to_back(set, way);
            }
            let slot = set * self.ways + way;
            self.remember(block, slot);
            return Touch::hit(slot);
        }
        Touch::filled(self.place_wide(order, set, block))
    }

    /// Put the absent `block` into `set` of a wide LRU or FIFO store: the lowest invalid way,
    /// else the front of `order`. Returns the slot and the block evicted.
    #[inline(never)]
    fn place_wide(&mut self, order: &mut Lists, set: usize, block: u64) -> (usize, Option<u64>) {
        let base = set * self.ways;
        let (way, evicted) = if !self.is_full(set) {
            (self.take_invalid(set), None)
        } else {
            // A full set's list holds every way.
            let w = order.front(set).unwrap_or(0);
            let old = self.tags[base + w];
            self.unindex(set, w, old);
            (w, Some(old))
        };
        self.tags[base + way] = block;
        self.index(set, way, block);
        order.move_to_back(set, way);
        self.remember(block, base + way);
        (base + way, evicted)
    }

    /// Put the absent `block` into `set`, replaced by `pol`. Returns the slot and the block
    /// evicted.
    #[inline(always)]
    fn place<P: Replacement>(
        &mut self,
        pol: &mut P,
        rng: &mut SplitMix64,
        set: usize,
        block: u64,
    ) -> (usize, Option<u64>) {
        let base = set * self.ways;
        let (way, evicted) = if !self.is_full(set) {
            (self.take_invalid(set), None)
        } else {
            let w = pol.victim(set, rng, AccessInfo::of(block, 0));
            let old = self.tags[base + w];
            self.unindex(set, w, old);
            (w, Some(old))
        };
        self.tags[base + way] = block;
        self.index(set, way, block);
        pol.on_fill(set, way, AccessInfo::of(block, 0));
        self.remember(block, base + way);
        (base + way, evicted)
    }
}

/// [`CacheTags::access`] of a store replaced by the engine's state, with the policy's
/// concrete type.
struct Access<'a> {
    s: &'a mut Slots,
    rng: &'a mut SplitMix64,
    set: usize,
    block: u64,
}

impl Visit for Access<'_> {
    type Out = Touch;

    #[inline(always)]
    fn visit<P: Replacement>(self, pol: &mut P) -> Touch {
        let Access { s, rng, set, block } = self;
        if let Some(way) = s.find(set, block) {
            pol.on_hit(set, way, AccessInfo::of(block, 0));
            let slot = set * s.ways + way;
            s.remember(block, slot);
            return Touch::hit(slot);
        }
        Touch::filled(s.place(pol, rng, set, block))
    }
}

/// [`CacheTags::fill`] of a store replaced by the engine's state.
struct Place<'a> {
    s: &'a mut Slots,
    rng: &'a mut SplitMix64,
    set: usize,
    block: u64,
}

impl Visit for Place<'_> {
    type Out = (usize, Option<u64>);

    #[inline(always)]
    fn visit<P: Replacement>(self, pol: &mut P) -> Self::Out {
        let Place { s, rng, set, block } = self;
        s.place(pol, rng, set, block)
    }
}

impl CacheTags {
    /// An empty store of `blocks` blocks in sets of `ways` ways (`ways` dividing `blocks`),
    /// replaced by `policy`, `seed` seeding the random policy. The error says what is wrong
    /// (no blocks, too many, ways not dividing them, or memory the host cannot give).
    pub fn new(blocks: usize, ways: usize, policy: Policy, seed: u64) -> Result<CacheTags, String> {
        if blocks == 0 {
            return Err("must hold at least 1 block".into());
        }
        if blocks > MAX_ENTRIES {
            return Err(format!(
                "{blocks} blocks is more than the maximum {MAX_ENTRIES}"
            ));
        }
        if ways == 0 || !blocks.is_multiple_of(ways) {
            return Err(format!("{ways} ways do not divide {blocks} blocks"));
        }
        let sets = blocks / ways;
        let direct = ways == 1;
        // Valid bits: a bit per set when direct-mapped (`words == 0`), else a word per 64
        // ways, in the set's record up to 64 ways.
        let words = if direct { 0 } else { ways.div_ceil(64) };
        let ordered = ways <= ORDER_MAX_WAYS;
        let repl = match policy {
            _ if policy.reads_reference() => {
                return Err(format!(
                "'{policy}' reads the reference's mode, which a cache is not told (a TLB's policy)"
            ))
            }
            _ if direct => Repl::Direct,
            Policy::Lru if ordered => Repl::Lru,
            Policy::Fifo if ordered => Repl::Fifo,
            Policy::Lru => Repl::WideLru(Lists::new(sets, ways)?),
            Policy::Fifo => Repl::WideFifo(Lists::new(sets, ways)?),
            _ => Repl::Policy(State::new(policy, sets, ways)?),
        };
        // Way `w` at position `w`: any order does, since every way is filled (and moved to
        // the front) before its set is first full.
        let identity = (0..ways.min(ORDER_MAX_WAYS) as u64).fold(0, |o, w| o | w << (4 * w));
        let meta = Meta {
            fp: [NO_FP * BYTES; 2],
            order: identity,
            valid: 0,
        };
        Ok(CacheTags {
            s: Slots {
                tags: filled(blocks + PAD, 0)?,
                slots: blocks,
                meta: if direct {
                    Vec::new()
                } else {
                    filled(sets, meta)?
                },
                wide: match words {
                    0 => filled(sets.div_ceil(64), 0)?,
                    1 => Vec::new(),
                    _ => filled(sets * words, 0)?,
                },
                count: if words > 1 {
                    filled(sets, 0)?
                } else {
                    Vec::new()
                },
                words,
                fp_words: if ways <= FP_MAX_WAYS && !direct {
                    ways.div_ceil(8)
                } else {
                    0
                },
                chains: if ways > FP_MAX_WAYS {
                    Some(Chains::new(sets, ways)?)
                } else {
                    None
                },
                sets,
                ways,
                set_index: SetIndex::new(sets),
                full: if ways >= 64 { !0 } else { (1 << ways) - 1 },
                order_mask: u64::MAX >> (64 - 4 * ways.min(ORDER_MAX_WAYS)),
                held: 0,
                last_block: 0,
                last_slot: NONE,
            },
            lru_ordered: matches!(repl, Repl::Lru) && sets.is_power_of_two(),
            repl,
            rng: SplitMix64::new(seed),
            policy,
        })
    }

    /// The heap bytes a store of `blocks` blocks in sets of `ways` ways takes at most,
    /// whatever its policy, from the geometry alone (so that a machine can be refused before
    /// anything is allocated): the tags, the records of the sets, the valid bits of wide sets,
    /// the engine's replacement state (at most a link pair per way and a sentinel per set) and
    /// the way index of wide sets.
    pub fn heap_bytes(blocks: usize, ways: usize) -> u64 {
        let blocks = blocks.max(1) as u64;
        let ways = (ways.max(1) as u64).min(blocks);
        let sets = blocks / ways;
        let index = if ways > FP_MAX_WAYS as u64 {
            Chains::heap_bytes(sets, ways)
        } else {
            0
        };
        // Per block: its tag, its valid bit (a word per 64), its share of the replacement
        // state; per set: its record, count and sentinel.
        (blocks + PAD as u64)
            .saturating_mul(8 + 8 + 8)
            .saturating_add(sets.saturating_mul(32 + 4 + 16))
            .saturating_add(index)
    }

    pub fn sets(&self) -> usize {
        self.s.sets
    }

    pub fn ways(&self) -> usize {
        self.s.ways
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Slots in all (`sets * ways`).
    pub fn entries(&self) -> usize {
        self.s.slots
    }

    /// Valid blocks.
    pub fn held(&self) -> usize {
        self.s.held
    }

    /// The set `block` maps to.
    #[inline(always)]
    pub fn set_of(&self, block: u64) -> usize {
        self.s.set_of(block)
    }

    /// Look `block` up and, when absent, fill it: a hit updates the replacement state, a miss
    /// places the block (evicting the policy's victim when its set is full).
    #[inline(always)]
    pub fn access(&mut self, block: u64) -> Touch {
        if self.lru_ordered {
            return self.access_ordered::<true>(block);
        }
        let s = &mut self.s;
        if block == s.last_block && s.last_slot != NONE {
            return Touch::hit(s.last_slot);
        }
        let set = s.set_of(block);
        let way = match &mut self.repl {
            Repl::Lru => s.hit_ordered::<true>(set, block),
            Repl::Fifo => s.hit_ordered::<false>(set, block),
            Repl::WideLru(order) => return s.access_wide::<true>(order, set, block),
            Repl::WideFifo(order) => return s.access_wide::<false>(order, set, block),
            Repl::Policy(_) => return self.access_policy(set, block),
            Repl::Direct => return s.access_direct(set, block),
        };
        if let Some(way) = way {
            return Touch::hit(set * s.ways + way);
        }
        Touch::filled(s.place_ordered(set, block))
    }

    /// Whether [`CacheTags::access_ordered`] serves this store: `Some(true)` for LRU sets of
    /// order words (at most [`ORDER_MAX_WAYS`] ways, more than one) in a power-of-two number
    /// of sets, `Some(false)` for FIFO ones, else `None`.
    pub fn ordered(&self) -> Option<bool> {
        match self.repl {
            _ if !self.s.set_index.pow2() => None,
            Repl::Lru => Some(true),
            Repl::Fifo => Some(false),
            _ => None,
        }
    }

    /// [`CacheTags::access`] of a store of order words in a power-of-two number of sets
    /// ([`CacheTags::ordered`] is `Some(LRU)`), for a caller that has chosen its path once
    /// for all its accesses: no test of the policy or the number of sets, and no test of the
    /// last block (for these stores the front of the set's order word, or a hit that changes
    /// nothing) — the last block is still remembered for the other paths.
    #[inline(always)]
    pub fn access_ordered<const LRU: bool>(&mut self, block: u64) -> Touch {
        debug_assert_eq!(self.ordered(), Some(LRU), "a store of order words");
        let s = &mut self.s;
        let set = s.set_index.masked(block);
        if let Some(way) = s.hit_ordered::<LRU>(set, block) {
            return Touch::hit(set * s.ways + way);
        }
        Touch::filled(s.place_ordered(set, block))
    }

    /// [`CacheTags::access`] of `block` in `set`, replaced by the engine's state: one path
    /// per policy, out of line (the order words are the common case).
    #[inline(never)]
    fn access_policy(&mut self, set: usize, block: u64) -> Touch {
        let Repl::Policy(state) = &mut self.repl else {
            unreachable!("a store of LRU or FIFO")
        };
        state.visit(Access {
            s: &mut self.s,
            rng: &mut self.rng,
            set,
            block,
        })
    }

    /// The slot of `block` if present, the hit updating the replacement state; a miss changes
    /// nothing.
    #[inline(always)]
    pub fn lookup(&mut self, block: u64) -> Option<usize> {
        let s = &mut self.s;
        if block == s.last_block && s.last_slot != NONE {
            return Some(s.last_slot);
        }
        let set = s.set_of(block);
        let way = match self.repl {
            Repl::Lru => s.hit_ordered::<true>(set, block),
            Repl::Fifo => s.hit_ordered::<false>(set, block),
            Repl::Direct => {
                if !s.find_direct(set, block) {
                    return None;
                }
                s.remember(block, set);
                return Some(set);
            }
            Repl::WideLru(_) | Repl::WideFifo(_) | Repl::Policy(_) => {
                return self.lookup_policy(set, block)
            }
        }?;
        Some(set * s.ways + way)
    }

    /// [`CacheTags::lookup`] of `block` in `set` of a store other than of order words.
    #[inline(never)]
    fn lookup_policy(&mut self, set: usize, block: u64) -> Option<usize> {
        let way = self.s.find(set, block)?;
        match &mut self.repl {
            Repl::WideLru(order) => order.move_to_back(set, way),
            Repl::Policy(state) => state.on_hit(set, way, AccessInfo::of(block, 0)),
            Repl::Lru | Repl::Fifo | Repl::WideFifo(_) | Repl::Direct => {}
        }
        let slot = set * self.s.ways + way;
        self.s.remember(block, slot);
        Some(slot)
    }

    /// Whether the store is direct-mapped in a power-of-two number of sets: then
    /// [`CacheTags::access_direct_masked`] serves every access.
    pub fn direct_masked(&self) -> bool {
        matches!(self.repl, Repl::Direct) && self.s.set_index.pow2()
    }

    /// [`CacheTags::access`] of a store that is [`CacheTags::direct_masked`], for a caller
    /// that has checked so once: the set by a mask and the one way compared, with no test of
    /// the policy, the number of sets or the last block (a repeat of the last block is a hit
    /// here too, and remembers the same). Also what [`CacheTags::fill`] and
    /// [`CacheTags::fill_if_absent`] do in such a store (the fill of an absent block, or a
    /// hit that changes nothing but the last block).
    #[inline(always)]
    pub fn access_direct_masked(&mut self, block: u64) -> Touch {
        debug_assert!(self.direct_masked(), "a direct-mapped store of 2^k sets");
        let set = self.s.set_index.masked(block);
        self.s.access_direct(set, block)
    }

    /// Whether a hit changes no replacement state (direct-mapped and FIFO stores): a run of
    /// hits of present blocks is then the same as their count.
    pub fn hits_keep_order(&self) -> bool {
        matches!(self.repl, Repl::Direct | Repl::Fifo | Repl::WideFifo(_))
    }

    /// Whether `block` was the last one touched and is still present: a lookup of it now
    /// would hit and change nothing (see [`CacheTags::lookup`]).
    #[inline]
    pub fn is_last(&self, block: u64) -> bool {
        block == self.s.last_block && self.s.last_slot != NONE
    }

    /// The slot of `block` if present, changing nothing.
    #[inline]
    pub fn probe(&self, block: u64) -> Option<usize> {
        let set = self.s.set_of(block);
        self.s.find(set, block).map(|way| set * self.s.ways + way)
    }

    /// Put the absent `block` in; returns its slot and the valid block it evicted, if any.
    #[inline(always)]
    pub fn fill(&mut self, block: u64) -> (usize, Option<u64>) {
        debug_assert!(self.probe(block).is_none(), "fill of a present block");
        let set = self.s.set_of(block);
        match &mut self.repl {
            Repl::Lru | Repl::Fifo => self.s.place_ordered(set, block),
            Repl::WideLru(order) | Repl::WideFifo(order) => self.s.place_wide(order, set, block),
            Repl::Policy(_) => self.fill_policy(set, block),
            Repl::Direct => {
                let t = self.s.access_direct(set, block);
                (t.slot, t.evicted)
            }
        }
    }

    /// Put `block` in if it is absent, as [`CacheTags::probe`] then [`CacheTags::fill`]
    /// do: its slot and the valid block it evicted, or `None` if it was present (then
    /// nothing changes but the last block touched, which only a lookup reads). A
    /// direct-mapped store does both with one compare: the lines of a fetch block other
    /// than the one that missed.
    #[inline(always)]
    pub fn fill_if_absent(&mut self, block: u64) -> Option<(usize, Option<u64>)> {
        if let Repl::Direct = self.repl {
            let set = self.s.set_of(block);
            let t = self.s.access_direct(set, block);
            return (!t.hit).then_some((t.slot, t.evicted));
        }
        match self.probe(block) {
            Some(_) => None,
            None => Some(self.fill(block)),
        }
    }

    /// [`CacheTags::fill`] of `block` into `set`, replaced by the engine's state.
    #[inline(never)]
    fn fill_policy(&mut self, set: usize, block: u64) -> (usize, Option<u64>) {
        let Repl::Policy(state) = &mut self.repl else {
            unreachable!("a store of LRU or FIFO")
        };
        state.visit(Place {
            s: &mut self.s,
            rng: &mut self.rng,
            set,
            block,
        })
    }

    /// Remove `block`; returns the slot it held, if it was present.
    pub fn invalidate(&mut self, block: u64) -> Option<usize> {
        let set = self.s.set_of(block);
        let way = self.s.find(set, block)?;
        let s = &mut self.s;
        s.last_slot = NONE;
        s.clear_valid(set, way);
        s.unindex(set, way, block);
        match &mut self.repl {
            Repl::WideLru(order) | Repl::WideFifo(order) => order.unlink(set, way),
            Repl::Policy(state) => state.on_invalidate(set, way),
            Repl::Lru | Repl::Fifo | Repl::Direct => {}
        }
        Some(set * s.ways + way)
    }

    /// Remove every block.
    pub fn flush_all(&mut self) {
        self.s.last_slot = NONE;
        if self.s.held == 0 {
            return;
        }
        for set in 0..self.s.sets {
            for way in 0..self.s.ways {
                if self.s.is_valid(set, way) {
                    match &mut self.repl {
                        Repl::WideLru(order) | Repl::WideFifo(order) => order.unlink(set, way),
                        Repl::Policy(state) => state.on_invalidate(set, way),
                        Repl::Lru | Repl::Fifo | Repl::Direct => {}
                    }
                }
            }
            if let Some(m) = self.s.meta.get_mut(set) {
                m.valid = 0;
                m.fp = [NO_FP * BYTES; 2];
            }
            if let Some(c) = &mut self.s.chains {
                c.clear_set(set);
            }
        }
        self.s.wide.fill(0);
        self.s.count.fill(0);
        self.s.held = 0;
    }

    /// The valid blocks as `(slot, block)`, in slot order (sets in order, each by way).
    pub fn blocks(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        let s = &self.s;
        (0..s.slots)
            .filter(move |&slot| s.is_valid(slot / s.ways, slot % s.ways))
            .map(move |slot| (slot, s.tags[slot]))
    }

    /// Each set's valid blocks as `(way, block)` in the order the policy would evict them,
    /// first victim first (LRU: least recently used first; FIFO: oldest fill first), read
    /// from a copy of the store by filling each set with as many absent blocks as it has
    /// ways. For the other policies, the blocks in way order.
    pub fn eviction_order(&self) -> Vec<Vec<(usize, u64)>> {
        let (sets, ways) = (self.s.sets, self.s.ways);
        let mut out: Vec<Vec<(usize, u64)>> = vec![Vec::new(); sets];
        for (slot, block) in self.blocks() {
            out[slot / ways].push((slot % ways, block));
        }
        if self.s.held == 0 || !matches!(self.policy, Policy::Lru | Policy::Fifo) {
            return out;
        }
        let mut copy = self.clone();
        for (set, blocks) in out.iter_mut().enumerate() {
            if blocks.is_empty() {
                continue;
            }
            // The set's invalid ways take the first fills; then, with LRU and FIFO, each fill
            // evicts the oldest of the set's blocks, never one of the new ones.
            let mut order = Vec::with_capacity(blocks.len());
            let mut fresh = (0u64..).map(|k| set as u64 + k * sets as u64);
            for _ in 0..ways {
                let b = fresh
                    .by_ref()
                    .find(|&b| copy.probe(b).is_none())
                    .expect("some block of the set is absent");
                let (slot, evicted) = copy.fill(b);
                if let Some(v) = evicted {
                    order.push((slot % ways, v));
                }
            }
            if order.len() == blocks.len() {
                *blocks = order;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
