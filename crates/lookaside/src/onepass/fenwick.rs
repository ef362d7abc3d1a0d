//! A Fenwick (binary indexed) tree of `u32` counts over positions `1..len`, `len` a power of
//! two: point update, prefix sum and "k-th one" in O(log len), conversion to and from plain
//! counts in O(len) (for compaction).

#[derive(Clone, Debug)]
pub(crate) struct Fenwick {
    t: Vec<u32>,
}

impl Fenwick {
    /// Positions `1..len` (`len` a power of two), all zero.
    pub(crate) fn new(len: usize) -> Fenwick {
        debug_assert!(len.is_power_of_two() && len >= 2);
        Fenwick { t: vec![0; len] }
    }

    /// One past the largest position.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.t.len()
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

    /// Turn the tree into the plain count of each position (index 0 unused), in place.
    pub(crate) fn into_points(mut self) -> Vec<u32> {
        let n = self.t.len();
        for i in (1..n).rev() {
            let j = i + (i & i.wrapping_neg());
            if j < n {
                self.t[j] = self.t[j].wrapping_sub(self.t[i]);
            }
        }
        self.t
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let back = f.clone().into_points();
        assert_eq!(back[1..], plain[1..]);
        let g = Fenwick::from_points(back);
        assert_eq!(g.t, f.t);
    }
}
