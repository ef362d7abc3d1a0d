//! A per-set hash index from (vpn, ctx) to way, for highly associative TLBs.
//!
//! Scanning the ways of a set costs O(ways) per lookup; beyond a few tens of ways (a 1024-entry
//! fully associative TLB) that dominates the simulator. This index makes a lookup O(1): each
//! set has an open-addressing table, a power of two at least [`LOAD`] times the way count, so
//! it is never more than `1 / LOAD` full. A slot holds a way number and a 32-bit fingerprint of
//! its key (the high half of the key's hash, whose top bits are also its home slot): a probe
//! compares fingerprints and reads the TLB's tags, which the caller passes in, only on a
//! fingerprint match, and moving a slot needs no tags at all. Collisions are resolved by
//! linear probing; deletion uses backward shifting, so there are no tombstones and probe
//! lengths never degrade, whatever the mix of fills and invalidations. Each way's slot is
//! kept (`slot_of`), so a way is removed without a search — on a miss-heavy stream every
//! fill removes its victim.
//!
//! The index holds exactly the valid ways of each set, and the TLB guarantees keys are unique
//! within a set.

/// Table size is the next power of two `>= LOAD * ways`. 4 rather than 2 halves the
/// mispredicted probe-loop exits (measured with `tlb/bench.rs` under callgrind) for 4 bytes
/// more per way.
pub(crate) const LOAD: usize = 4;

/// A free slot. A used slot is `fingerprint << 32 | way`, and no way is `u32::MAX`.
const EMPTY: u64 = u64::MAX;

#[derive(Clone)]
pub(crate) struct WayIndex {
    table: Vec<u64>,
    /// Per way (`set * ways + way`), its slot in its set's table while it is indexed.
    slot_of: Vec<u32>,
    ways: usize,
    /// Slots per set, a power of two.
    size: usize,
    /// `32 - log2(size)`: a fingerprint's top `log2(size)` bits are its home slot.
    shift: u32,
}

/// The fingerprint of a key: the high half of its Fibonacci hash, the context rotated out of
/// the way of typical page numbers.
#[inline(always)]
fn fingerprint(vpn: u64, ctx: u64) -> u32 {
    ((vpn ^ ctx.rotate_left(44)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

impl WayIndex {
    /// An empty index for `sets` sets of `ways` ways.
    pub(crate) fn new(sets: usize, ways: usize) -> Result<WayIndex, String> {
        let size = (LOAD * ways).next_power_of_two().max(2);
        Ok(WayIndex {
            table: super::filled(sets * size, EMPTY)?,
            slot_of: super::filled(sets * ways, 0)?,
            ways,
            size,
            shift: 32 - size.trailing_zeros(),
        })
    }

    /// The heap bytes of an index of `sets` sets of `ways` ways (see [`WayIndex::new`]).
    pub(crate) fn heap_bytes(sets: u64, ways: u64) -> u64 {
        let size = (LOAD as u64 * ways).next_power_of_two().max(2);
        sets * (size * 8 + ways * 4)
    }

    #[inline(always)]
    fn home(&self, fp: u32) -> usize {
        (fp >> self.shift) as usize
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
        let base = set * self.size;
        let mask = self.size - 1;
        let fp = fingerprint(vpn, ctx);
        let mut i = self.home(fp);
        loop {
            let e = self.table[base + i];
            if e == EMPTY {
                return None;
            }
            if (e >> 32) as u32 == fp {
                let w = e as u32 as usize;
                if vpns[w] == vpn && ctxs[w] == ctx {
                    return Some(w);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Record that `way` of `set` now holds (vpn, ctx), a key not already in the set.
    #[inline(always)]
    pub(crate) fn insert(&mut self, set: usize, way: usize, vpn: u64, ctx: u64) {
        let base = set * self.size;
        let mask = self.size - 1;
        let fp = fingerprint(vpn, ctx);
        let mut i = self.home(fp);
        while self.table[base + i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.table[base + i] = (fp as u64) << 32 | way as u64;
        self.slot_of[set * self.ways + way] = i as u32;
    }

    /// Forget `way` of `set`, which is indexed.
    #[inline(always)]
    pub(crate) fn remove(&mut self, set: usize, way: usize) {
        let mask = self.size - 1;
        let shift = self.shift;
        let ways = &mut self.slot_of[set * self.ways..(set + 1) * self.ways];
        let t = &mut self.table[set * self.size..(set + 1) * self.size];
        let mut hole = ways[way] as usize;
        debug_assert_eq!(
            t[hole] as u32 as usize, way,
            "removing a way that is not indexed"
        );
        // Backward shift: move later members of the cluster into the hole when their home
        // position allows it, so every key stays reachable from its home without tombstones.
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let e = t[j];
            if e == EMPTY {
                break;
            }
            let h = ((e >> 32) as u32 >> shift) as usize;
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(hole) & mask) {
                t[hole] = e;
                ways[e as u32 as usize] = hole as u32;
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
        let home0 = ix.home(fingerprint(0, 5));
        let mut k = 0u64;
        let mut w = 0;
        while w < ways {
            if ix.home(fingerprint(k, 5)) == home0 || w >= 5 {
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
            ix.remove(1, gone);
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
