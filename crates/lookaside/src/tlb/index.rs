//! A per-set hash index from (vpn, ctx) to way, for highly associative TLBs.
//!
//! Scanning the ways of a set costs O(ways) per lookup; beyond a few tens of ways (a 1024-entry
//! fully associative TLB) that dominates the simulator. This index makes every operation O(1):
//! each set has a table of chain heads, a power of two at least [`LOAD`] times the way count,
//! and each way a link to the next way of its chain (way numbers within the set, `u32`). A
//! key's bucket is the top bits of its Fibonacci hash. A lookup walks one chain (on average
//! less than `1 / LOAD` other ways long) comparing the TLB's tags, which the caller passes in;
//! an insertion pushes the way on the front of its chain and records the chain; a removal
//! unlinks it from the chain recorded (no hash of the key it held). There are
//! no tombstones and nothing ever moves, whatever the mix of fills and invalidations — on a
//! miss-heavy stream every fill removes its victim, and with open addressing that removal's
//! backward shift was the most expensive step of a miss.
//!
//! The index holds exactly the valid ways of each set, and the TLB guarantees keys are unique
//! within a set.

/// Table size is the next power of two `>= LOAD * ways`: most misses find an empty chain.
pub(crate) const LOAD: usize = 4;

/// The end of a chain. No way is `u32::MAX` (at most [`super::MAX_ENTRIES`] ways).
pub(crate) const NIL: u32 = u32::MAX;

/// Take `item` out of the chain that starts at `head`, whose items are numbered by their
/// place in `items` and linked through `link(items[i])` ([`NIL`] ends a chain). The chain
/// must hold `item`: the walk to the item before it then ends.
#[inline(always)]
pub(crate) fn unlink<T>(
    head: &mut u32,
    items: &mut [T],
    item: usize,
    link: fn(&mut T) -> &mut u32,
) {
    let after = *link(&mut items[item]);
    let mut w = *head;
    if w == item as u32 {
        *head = after;
        return;
    }
    loop {
        debug_assert!(w != NIL, "removing an item that is not chained");
        let x = link(&mut items[w as usize]);
        if *x == item as u32 {
            *x = after;
            return;
        }
        w = *x;
    }
}

#[derive(Clone)]
pub(crate) struct WayIndex {
    /// Per set, `size` chain heads (a way number or [`NIL`]).
    head: Vec<u32>,
    /// Per way (`set * ways + way`), the next way of its chain, or [`NIL`].
    next: Vec<u32>,
    /// Per indexed way, its chain (position in `head`).
    chain_of: Vec<u32>,
    ways: usize,
    /// Heads per set, a power of two.
    size: usize,
    /// `64 - log2(size)`: a hash's top `log2(size)` bits are its bucket.
    shift: u32,
}

impl WayIndex {
    /// An empty index for `sets` sets of `ways` ways.
    pub(crate) fn new(sets: usize, ways: usize) -> Result<WayIndex, String> {
        let size = (LOAD * ways).next_power_of_two().max(2);
        Ok(WayIndex {
            head: super::filled(sets * size, NIL)?,
            next: super::filled(sets * ways, NIL)?,
            chain_of: super::filled(sets * ways, 0)?,
            ways,
            size,
            shift: 64 - size.trailing_zeros(),
        })
    }

    /// The heap bytes of an index of `sets` sets of `ways` ways (see [`WayIndex::new`]).
    pub(crate) fn heap_bytes(sets: u64, ways: u64) -> u64 {
        let size = (LOAD as u64 * ways).next_power_of_two().max(2);
        sets * (size + 2 * ways) * 4
    }

    /// The position in `head` of the chain of (vpn, ctx) in `set`: the context rotated out of
    /// the way of typical page numbers, then a Fibonacci hash.
    #[inline(always)]
    pub(crate) fn chain(&self, set: usize, vpn: u64, ctx: u64) -> usize {
        let h = (vpn ^ ctx.rotate_left(44)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift;
        set * self.size + h as usize
    }

    /// The way of `set` holding (vpn, ctx); `vpns`/`ctxs` are the set's tag arrays.
    #[inline(always)]
    pub(crate) fn find(
        &self,
        set: usize,
        vpn: u64,
        ctx: u64,
        vpns: &[u64],
        ctxs: &[u64],
    ) -> Option<usize> {
        self.find_in(self.chain(set, vpn, ctx), set, vpn, ctx, vpns, ctxs)
    }

    /// [`WayIndex::find`] with the chain already computed.
    #[inline(always)]
    pub(crate) fn find_in(
        &self,
        chain: usize,
        set: usize,
        vpn: u64,
        ctx: u64,
        vpns: &[u64],
        ctxs: &[u64],
    ) -> Option<usize> {
        self.find_by(chain, set, |i| vpns[i] == vpn && ctxs[i] == ctx)
    }

    /// The first way of `chain` (of `set`) for which `holds(way)` is true: the caller's own
    /// tag check, for tags kept in any layout.
    #[inline(always)]
    pub(crate) fn find_by(
        &self,
        chain: usize,
        set: usize,
        holds: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let base = set * self.ways;
        let mut w = self.head[chain];
        while w != NIL {
            let i = w as usize;
            if holds(i) {
                return Some(i);
            }
            w = self.next[base + i];
        }
        None
    }

    /// Record that `way` of `set` now holds (vpn, ctx), a key not already in the set.
    #[inline(always)]
    pub(crate) fn insert(&mut self, set: usize, way: usize, vpn: u64, ctx: u64) {
        let chain = self.chain(set, vpn, ctx);
        self.insert_in(chain, set, way);
    }

    /// [`WayIndex::insert`] with the chain already computed.
    #[inline(always)]
    pub(crate) fn insert_in(&mut self, chain: usize, set: usize, way: usize) {
        self.next[set * self.ways + way] = self.head[chain];
        self.chain_of[set * self.ways + way] = chain as u32;
        self.head[chain] = way as u32;
    }

    /// Forget `way` of `set`, which is indexed.
    #[inline(always)]
    pub(crate) fn remove(&mut self, set: usize, way: usize) {
        let base = set * self.ways;
        let chain = self.chain_of[base + way] as usize;
        let next = &mut self.next[base..base + self.ways];
        unlink(&mut self.head[chain], next, way, |n| n);
    }

    /// Forget every way of `set`.
    pub(crate) fn clear_set(&mut self, set: usize) {
        self.head[set * self.size..(set + 1) * self.size].fill(NIL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_with_collisions() {
        // 8 ways, 32 chains; keys chosen so that many share a chain.
        let ways = 8;
        let mut ix = WayIndex::new(2, ways).unwrap();
        let mut vpns = vec![0u64; ways];
        let ctxs = vec![5u64; ways];
        let home0 = ix.chain(1, 0, 5);
        let mut k = 0u64;
        let mut w = 0;
        while w < ways {
            if ix.chain(1, k, 5) == home0 || w >= 5 {
                vpns[w] = k;
                ix.insert(1, w, k, 5);
                w += 1;
            }
            k += 1;
        }
        for (w, &v) in vpns.iter().enumerate() {
            assert_eq!(ix.find(1, v, 5, &vpns, &ctxs), Some(w));
            assert_eq!(ix.find(0, v, 5, &vpns, &ctxs), None);
        }
        // The middle, the front, the back of the shared chain, then one alone.
        for gone in [2, 4, 0, 6, 1] {
            ix.remove(1, gone);
            assert_eq!(ix.find(1, vpns[gone], 5, &vpns, &ctxs), None);
        }
        for (w, &v) in vpns.iter().enumerate() {
            let expect = if [2, 4, 0, 6, 1].contains(&w) {
                None
            } else {
                Some(w)
            };
            assert_eq!(ix.find(1, v, 5, &vpns, &ctxs), expect);
        }
        ix.clear_set(1);
        assert_eq!(ix.find(1, vpns[3], 5, &vpns, &ctxs), None);
    }
}
