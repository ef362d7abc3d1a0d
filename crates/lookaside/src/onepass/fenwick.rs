//! Counting over positions: a Fenwick (binary indexed) tree of `u32` counts, and [`BitSet`], a
//! set of positions built on one — prefix counts and "k-th member" in O(log n).

#[derive(Clone, Debug)]
pub(crate) struct Fenwick {
    t: Vec<u32>,
}

impl Fenwick {
    /// Positions `1..len` (`len` a power of two), all zero.
    #[cfg(test)]
    pub(crate) fn new(len: usize) -> Fenwick {
        debug_assert!(len.is_power_of_two() && len >= 2);
        Fenwick { t: vec![0; len] }
    }

    /// Add 1 at `i`.
    #[inline]
    pub(crate) fn inc(&mut self, mut i: usize) {
        debug_assert!(i >= 1 && i < self.t.len());
        while i < self.t.len() {
            self.t[i] = self.t[i].wrapping_add(1);
            i += i & i.wrapping_neg();
        }
    }

    /// Subtract 1 at `i` (which holds at least 1).
    #[inline]
    pub(crate) fn dec(&mut self, mut i: usize) {
        debug_assert!(i >= 1 && i < self.t.len());
        while i < self.t.len() {
            self.t[i] = self.t[i].wrapping_sub(1);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of positions `1..=i`.
    #[inline]
    pub(crate) fn prefix(&self, mut i: usize) -> u32 {
        let mut s = 0u32;
        while i > 0 {
            s = s.wrapping_add(self.t[i]);
            i &= i - 1;
        }
        s
    }

    /// The smallest position whose prefix sum reaches `k` (`1 <= k <= total`).
    pub(crate) fn kth(&self, mut k: u32) -> usize {
        let mut pos = 0;
        let mut step = self.t.len() / 2;
        while step > 0 {
            let next = pos + step;
            if next < self.t.len() && self.t[next] < k {
                pos = next;
                k -= self.t[next];
            }
            step /= 2;
        }
        pos + 1
    }

    /// The tree of plain counts `points` (index 0 unused, length a power of two).
    pub(crate) fn from_points(mut t: Vec<u32>) -> Fenwick {
        let n = t.len();
        debug_assert!(n.is_power_of_two() && n >= 2);
        t[0] = 0;
        for i in 1..n {
            let j = i + (i & i.wrapping_neg());
            if j < n {
                t[j] = t[j].wrapping_add(t[i]);
            }
        }
        Fenwick { t }
    }
}

/// A set of positions `0..len` (`len` a multiple of 64): a bitmap, plus a Fenwick tree over
/// the population of each 64-bit word. Why not a Fenwick tree over the positions themselves:
/// this is 32 times smaller (a bit per position, and a count per 64 of them), so the stack's
/// timestamps of a footprint of tens of thousands of pages fit in the first-level cache,
/// and a prefix count walks a tree 6 levels shorter and then counts bits in one word.
#[derive(Clone, Debug)]
pub(crate) struct BitSet {
    bits: Vec<u64>,
    /// Word `w` is position `w + 1`.
    words: Fenwick,
}

impl BitSet {
    /// An empty set of positions `0..len` (`len` a power of two, at least 64).
    pub(crate) fn new(len: usize) -> BitSet {
        BitSet::from_bits(vec![0; len / 64])
    }

    /// The set whose bitmap is `bits` (a power-of-two number of words).
    pub(crate) fn from_bits(bits: Vec<u64>) -> BitSet {
        let w = bits.len();
        debug_assert!(w.is_power_of_two());
        let mut pop = vec![0u32; 2 * w];
        for (i, b) in bits.iter().enumerate() {
            pop[i + 1] = b.count_ones();
        }
        BitSet {
            bits,
            words: Fenwick::from_points(pop),
        }
    }

    /// One past the largest position.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.bits.len() * 64
    }

    #[inline(always)]
    pub(crate) fn contains(&self, i: usize) -> bool {
        self.bits[i >> 6] >> (i & 63) & 1 != 0
    }

    /// Add `i` (not a member).
    #[inline]
    pub(crate) fn insert(&mut self, i: usize) {
        debug_assert!(!self.contains(i));
        self.bits[i >> 6] |= 1 << (i & 63);
        self.words.inc((i >> 6) + 1);
    }

    /// Remove `i` (a member).
    #[inline]
    pub(crate) fn remove(&mut self, i: usize) {
        debug_assert!(self.contains(i));
        self.bits[i >> 6] &= !(1 << (i & 63));
        self.words.dec((i >> 6) + 1);
    }

    /// Members in `0..=i`.
    #[inline]
    pub(crate) fn prefix(&self, i: usize) -> u32 {
        let w = i >> 6;
        self.words.prefix(w) + (self.bits[w] & (u64::MAX >> (63 - (i & 63)))).count_ones()
    }

    /// The `k`-th smallest member (`1 <= k <= members`).
    pub(crate) fn kth(&self, k: u32) -> usize {
        let w = self.words.kth(k) - 1;
        let mut k = k - self.words.prefix(w);
        let mut b = self.bits[w];
        while k > 1 {
            b &= b - 1;
            k -= 1;
        }
        w * 64 + b.trailing_zeros() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitset_counts_like_a_plain_set() {
        let n = 256;
        let mut s = BitSet::new(n);
        let mut plain = vec![false; n];
        let mut x = 99u64;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (x >> 33) as usize % n;
            if plain[i] {
                s.remove(i);
            } else {
                s.insert(i);
            }
            plain[i] = !plain[i];
            let j = (x >> 20) as usize % n;
            assert_eq!(
                s.prefix(j),
                plain[..=j].iter().filter(|&&b| b).count() as u32
            );
            let members: Vec<usize> = (0..n).filter(|&i| plain[i]).collect();
            if !members.is_empty() {
                let k = 1 + (x >> 40) as usize % members.len();
                assert_eq!(s.kth(k as u32), members[k - 1]);
            }
        }
        let t = BitSet::from_bits(s.bits.clone());
        for (j, &p) in plain.iter().enumerate() {
            assert_eq!(t.prefix(j), s.prefix(j));
            assert_eq!(t.contains(j), p);
        }
    }

    #[test]
    fn agrees_with_plain_counts() {
        let n = 64;
        let mut f = Fenwick::new(n);
        let mut plain = vec![0u32; n];
        let mut x = 12345u64;
        for _ in 0..500 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = 1 + (x >> 33) as usize % (n - 1);
            if plain[i] > 0 && (x >> 20) & 1 == 1 {
                f.dec(i);
                plain[i] -= 1;
            } else {
                f.inc(i);
                plain[i] += 1;
            }
            for j in 0..n {
                assert_eq!(f.prefix(j), plain[1..=j].iter().sum::<u32>());
            }
            let total: u32 = plain.iter().sum();
            for k in 1..=total {
                let p = f.kth(k);
                assert!(f.prefix(p) >= k && f.prefix(p - 1) < k);
            }
        }
        let g = Fenwick::from_points(plain.clone());
        assert_eq!(g.t, f.t);
    }
}
