//! A per-set hash index from (vpn, ctx) to way, for highly associative TLBs.
//!
//! Scanning the ways of a set costs O(ways) per lookup; beyond a few tens of ways (a 1024-entry
//! fully associative TLB) that dominates the simulator. This index makes a lookup O(1): each
//! set has an open-addressing table of `u32` way numbers (`EMPTY` for a free slot), a power of
//! two at least [`LOAD`] times the way count, so it is never more than `1 / LOAD` full. Keys
//! are not stored: a slot is compared through the TLB's own tag arrays, which the caller
//! passes in. Collisions are resolved by linear probing; deletion uses backward shifting, so
//! there are no tombstones and probe lengths never degrade, whatever the mix of fills and
//! invalidations.
//!
//! The index holds exactly the valid ways of each set, and the TLB guarantees keys are unique
//! within a set.

/// Table size is the next power of two `>= LOAD * ways`. 4 rather than 2 halves the
/// mispredicted probe-loop exits (measured with `tlb/bench.rs` under callgrind) for 4 bytes
/// more per way.
pub(crate) const LOAD: usize = 4;

const EMPTY: u32 = u32::MAX;

#[derive(Clone)]
pub(crate) struct WayIndex {
    table: Vec<u32>,
    /// Slots per set, a power of two.
    size: usize,
    /// `64 - log2(size)`: the Fibonacci hash keeps the top `log2(size)` bits.
    shift: u32,
}

/// Fibonacci hash of the key; the context is rotated out of the way of typical page numbers.
#[inline(always)]
fn hash(vpn: u64, ctx: u64) -> u64 {
    (vpn ^ ctx.rotate_left(44)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl WayIndex {
    /// An empty index for `sets` sets of `ways` ways.
    pub(crate) fn new(sets: usize, ways: usize) -> Result<WayIndex, String> {
        let size = (LOAD * ways).next_power_of_two().max(2);
        Ok(WayIndex {
            table: super::filled(sets * size, EMPTY)?,
            size,
            shift: 64 - size.trailing_zeros(),
        })
    }

    #[inline(always)]
    fn home(&self, vpn: u64, ctx: u64) -> usize {
        (hash(vpn, ctx) >> self.shift) as usize
    }

    /// The way of `set` holding (vpn, ctx); `vpns`/`ctxs` are the set's tag arrays.
    #[inline]
    pub(crate) fn find(
        &self,
        set: usize,
        vpn: u64,
        ctx: u64,
        vpns: &[u64],
        ctxs: &[u64],
    ) -> Option<usize> {
        let t = &self.table[set * self.size..(set + 1) * self.size];
        let mask = self.size - 1;
        let mut i = self.home(vpn, ctx);
        loop {
            let w = t[i];
            if w == EMPTY {
                return None;
            }
            let w = w as usize;
            if vpns[w] == vpn && ctxs[w] == ctx {
                return Some(w);
            }
            i = (i + 1) & mask;
        }
    }

    /// Record that `way` of `set` now holds (vpn, ctx), a key not already in the set.
    #[inline]
    pub(crate) fn insert(&mut self, set: usize, way: usize, vpn: u64, ctx: u64) {
        let mask = self.size - 1;
        let mut i = self.home(vpn, ctx);
        let t = &mut self.table[set * self.size..(set + 1) * self.size];
        while t[i] != EMPTY {
            i = (i + 1) & mask;
        }
        t[i] = way as u32;
    }

    /// Forget `way` of `set`, which holds (vpn, ctx). The tags of every other way in the table
    /// must still be in `vpns`/`ctxs` (they are rehashed to decide what to shift back).
    pub(crate) fn remove(
        &mut self,
        set: usize,
        way: usize,
        vpn: u64,
        ctx: u64,
        vpns: &[u64],
        ctxs: &[u64],
    ) {
        let mask = self.size - 1;
        let mut i = self.home(vpn, ctx);
        let shift = self.shift;
        let t = &mut self.table[set * self.size..(set + 1) * self.size];
        while t[i] != way as u32 {
            debug_assert!(t[i] != EMPTY, "removing a way that is not indexed");
            i = (i + 1) & mask;
        }
        // Backward shift: move later members of the cluster into the hole when their home
        // position allows it, so every key stays reachable from its home without tombstones.
        let mut hole = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let w = t[j];
            if w == EMPTY {
                break;
            }
            let h = (hash(vpns[w as usize], ctxs[w as usize]) >> shift) as usize;
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(hole) & mask) {
                t[hole] = w;
                hole = j;
            }
        }
        t[hole] = EMPTY;
    }

    /// Forget every way of `set`.
    pub(crate) fn clear_set(&mut self, set: usize) {
        self.table[set * self.size..(set + 1) * self.size].fill(EMPTY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_with_collisions() {
        // 8 ways, 16 slots; keys chosen so that many share a home.
        let ways = 8;
        let mut ix = WayIndex::new(2, ways).unwrap();
        let mut vpns = vec![0u64; ways];
        let ctxs = vec![5u64; ways];
        let home0 = ix.home(0, 5);
        let mut k = 0u64;
        let mut w = 0;
        while w < ways {
            if ix.home(k, 5) == home0 || w >= 5 {
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
        for gone in [0, 3, 6, 1] {
            ix.remove(1, gone, vpns[gone], 5, &vpns, &ctxs);
            assert_eq!(ix.find(1, vpns[gone], 5, &vpns, &ctxs), None);
        }
        for (w, &v) in vpns.iter().enumerate() {
            let expect = if [0, 3, 6, 1].contains(&w) {
                None
            } else {
                Some(w)
            };
            assert_eq!(ix.find(1, v, 5, &vpns, &ctxs), expect);
        }
        ix.clear_set(1);
        assert_eq!(ix.find(1, vpns[2], 5, &vpns, &ctxs), None);
    }
}
