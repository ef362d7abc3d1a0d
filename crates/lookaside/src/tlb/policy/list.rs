//! Intrusive doubly linked lists of way numbers, one per set, shared by LRU and FIFO.
//!
//! Timestamps would make every victim choice a scan over the ways; a list makes hits, fills,
//! invalidations and victim choices O(1) at any associativity. Each set has `ways` way nodes
//! and one sentinel node, all in one flat array of `(prev, next)` pairs of global node
//! numbers (`set * (ways + 1) + way`; the sentinel is way number `ways`), so a node's two links
//! share a cache line and a bounds check. The list is circular through the sentinel, so
//! linking and unlinking need no branches, and a node that is in no list points to itself, so
//! unlinking it again is harmless.
//!
//! Order: the sentinel's `next` is the oldest node (the front), its `prev` the newest (the back).

#[derive(Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

#[derive(Clone)]
pub(crate) struct Lists {
    link: Vec<Link>,
    stride: usize,
}

impl Lists {
    /// `sets` empty lists over `ways` ways each.
    pub(crate) fn new(sets: usize, ways: usize) -> Result<Lists, String> {
        let stride = ways + 1;
        let n = sets * stride;
        assert!(n <= u32::MAX as usize, "too many list nodes");
        let mut link = crate::tlb::filled(n, Link { prev: 0, next: 0 })?;
        for (i, l) in link.iter_mut().enumerate() {
            *l = Link {
                prev: i as u32,
                next: i as u32,
            };
        }
        Ok(Lists { link, stride })
    }

    #[inline(always)]
    fn node(&self, set: usize, way: usize) -> usize {
        set * self.stride + way
    }

    #[inline(always)]
    fn sentinel(&self, set: usize) -> usize {
        set * self.stride + self.stride - 1
    }

    /// Take `way` out of its set's list (no-op if it is in none).
    #[inline(always)]
    pub(crate) fn unlink(&mut self, set: usize, way: usize) {
        let i = self.node(set, way);
        let Link { prev: p, next: n } = self.link[i];
        self.link[p as usize].next = n;
        self.link[n as usize].prev = p;
        self.link[i] = Link {
            prev: i as u32,
            next: i as u32,
        };
    }

    /// Make `way` the newest node of its set's list, wherever it was (or wasn't) before.
    /// Branch-free: moving the newest node unlinks and relinks it in place.
    #[inline(always)]
    pub(crate) fn move_to_back(&mut self, set: usize, way: usize) {
        let i = self.node(set, way);
        let s = self.sentinel(set);
        let Link { prev: p, next: n } = self.link[i];
        self.link[p as usize].next = n;
        self.link[n as usize].prev = p;
        let last = self.link[s].prev;
        self.link[last as usize].next = i as u32;
        self.link[i] = Link {
            prev: last,
            next: s as u32,
        };
        self.link[s].prev = i as u32;
    }

    /// The oldest way of the set's list, if the list is not empty.
    #[inline]
    pub(crate) fn front(&self, set: usize) -> Option<usize> {
        let s = self.sentinel(set);
        let f = self.link[s].next as usize;
        (f != s).then(|| f - set * self.stride)
    }

    /// The ways of the set's list, oldest first (for tests and debugging).
    #[cfg(test)]
    pub(super) fn order(&self, set: usize) -> Vec<usize> {
        let s = self.sentinel(set);
        let mut out = Vec::new();
        let mut i = self.link[s].next as usize;
        while i != s {
            out.push(i - set * self.stride);
            i = self.link[i].next as usize;
        }
        out
    }
}
