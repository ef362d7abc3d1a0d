//! An open-addressing hash map from a page key `(vpn, ctx)` to a `u32`, for the one-pass
//! engines' slow paths.
//!
//! Why not `std::collections::HashMap`: its SipHash costs more than the rest of a reference
//! here, and its entries move on every insertion that grows it. This table hashes with one
//! multiply (Fibonacci hashing, the same mix as the TLB's way index), probes linearly, never
//! deletes (the engines keep a page's entry while the page is known, and rebuild the table
//! when they drop pages), and keeps key and value in one flat slot (one cache line per probe
//! on the random references where the map is used at all) so that a slot number is a
//! stable handle until the next growth or rebuild ([`PageMap::generation`] says when).

use crate::tlb::NO_CTX;

/// Ask the processor to start loading the cache line of `x` (a hint: no effect on results).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing observable; the pointer comes from a
    // reference, and SSE is part of the x86-64 baseline.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// The mix: the context is rotated away from the low bits where page numbers vary.
#[inline(always)]
fn hash(vpn: u64, ctx: u64) -> u64 {
    (vpn ^ ctx.rotate_left(44)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// One slot: key and value together, so that a probe touches one cache line, not three.
#[derive(Clone, Copy, Debug)]
struct Slot {
    vpn: u64,
    /// `NO_CTX` marks a free slot.
    ctx: u64,
    val: u32,
}

const FREE: Slot = Slot {
    vpn: 0,
    ctx: NO_CTX,
    val: 0,
};

/// `(vpn, ctx) → u32`; `ctx == NO_CTX` marks a free slot, so it is not a storable context.
#[derive(Clone, Debug)]
pub(crate) struct PageMap {
    slots: Vec<Slot>,
    len: usize,
    shift: u32,
    generation: u32,
}

impl PageMap {
    pub(crate) fn new() -> PageMap {
        PageMap::with_slots(1 << 10)
    }

    fn with_slots(slots: usize) -> PageMap {
        debug_assert!(slots.is_power_of_two() && slots >= 2);
        PageMap {
            slots: vec![FREE; slots],
            len: 0,
            shift: 64 - slots.trailing_zeros(),
            generation: 0,
        }
    }

    /// The pages of every key of context `ctx` held.
    pub(crate) fn pages_of(&self, ctx: u64) -> Vec<u64> {
        self.slots
            .iter()
            .filter(|s| s.ctx == ctx && ctx != NO_CTX)
            .map(|s| s.vpn)
            .collect()
    }

    /// Keys held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Changes whenever slots move (growth, [`PageMap::retain`]); a slot number obtained
    /// under one generation is valid until it changes.
    #[inline(always)]
    pub(crate) fn generation(&self) -> u32 {
        self.generation
    }

    #[inline(always)]
    fn home(&self, vpn: u64, ctx: u64) -> usize {
        (hash(vpn, ctx) >> self.shift) as usize
    }

    /// Start loading the first slot `(vpn, ctx)` probes into the cache: the engines call
    /// this a few references ahead, so that the random pages of a large footprint do not
    /// each stall on a cache miss.
    #[inline(always)]
    pub(crate) fn prefetch(&self, vpn: u64, ctx: u64) {
        let i = self.home(vpn, ctx);
        prefetch(&self.slots[i]);
    }

    /// The slot holding `(vpn, ctx)`.
    #[inline]
    pub(crate) fn find(&self, vpn: u64, ctx: u64) -> Option<usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(vpn, ctx);
        loop {
            let s = &self.slots[i];
            if s.ctx == NO_CTX {
                return None;
            }
            if s.ctx == ctx && s.vpn == vpn {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot holding `(vpn, ctx)`, inserted with value `init` if absent; the flag is true
    /// when it was inserted. May grow the table (and so change the generation).
    #[inline]
    pub(crate) fn entry(&mut self, vpn: u64, ctx: u64, init: u32) -> (usize, bool) {
        debug_assert!(ctx != NO_CTX);
        let mask = self.slots.len() - 1;
        let mut i = self.home(vpn, ctx);
        loop {
            let s = &self.slots[i];
            if s.ctx == NO_CTX {
                break;
            }
            if s.ctx == ctx && s.vpn == vpn {
                return (i, false);
            }
            i = (i + 1) & mask;
        }
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow(2 * self.slots.len());
            return (self.place(vpn, ctx, init), true);
        }
        self.slots[i] = Slot {
            vpn,
            ctx,
            val: init,
        };
        self.len += 1;
        (i, true)
    }

    /// Insert a key known to be absent, without checking the load.
    fn place(&mut self, vpn: u64, ctx: u64, v: u32) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(vpn, ctx);
        while self.slots[i].ctx != NO_CTX {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot { vpn, ctx, val: v };
        self.len += 1;
        i
    }

    fn grow(&mut self, slots: usize) {
        let old = std::mem::replace(self, PageMap::with_slots(slots));
        self.generation = old.generation.wrapping_add(1);
        for s in &old.slots {
            if s.ctx != NO_CTX {
                self.place(s.vpn, s.ctx, s.val);
            }
        }
    }

    /// Keep only the keys whose value `f` maps to `Some(new value)`; resizes the table to the
    /// keys kept (so memory follows the live pages, not every page ever seen).
    pub(crate) fn retain(&mut self, mut f: impl FnMut(u32) -> Option<u32>) {
        let mut keep = vec![false; self.slots.len()];
        let mut kept = 0usize;
        for (s, k) in self.slots.iter_mut().zip(keep.iter_mut()) {
            if s.ctx != NO_CTX {
                if let Some(v) = f(s.val) {
                    s.val = v;
                    *k = true;
                    kept += 1;
                }
            }
        }
        let slots = (4 * kept).next_power_of_two().max(1 << 10);
        let old = std::mem::replace(self, PageMap::with_slots(slots));
        self.generation = old.generation.wrapping_add(1);
        for (s, k) in old.slots.iter().zip(keep) {
            if k {
                self.place(s.vpn, s.ctx, s.val);
            }
        }
    }

    #[inline(always)]
    pub(crate) fn get(&self, slot: usize) -> u32 {
        self.slots[slot].val
    }

    #[inline(always)]
    pub(crate) fn set(&mut self, slot: usize, v: u32) {
        self.slots[slot].val = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_grow_retain() {
        let mut m = PageMap::new();
        for k in 0..5000u64 {
            let (s, new) = m.entry(k * 4096, k % 3, k as u32);
            assert!(new);
            assert_eq!(m.get(s), k as u32);
        }
        assert!(m.generation() > 0);
        assert_eq!(m.len(), 5000);
        for k in 0..5000u64 {
            let s = m.find(k * 4096, k % 3).unwrap();
            assert_eq!(m.get(s), k as u32);
            assert_eq!(m.entry(k * 4096, k % 3, 0), (s, false));
            assert_eq!(m.find(k * 4096, (k + 1) % 3), None);
        }
        m.retain(|v| (v % 2 == 0).then_some(v / 2));
        assert_eq!(m.len(), 2500);
        for k in 0..5000u64 {
            let got = m.find(k * 4096, k % 3).map(|s| m.get(s));
            assert_eq!(got, (k % 2 == 0).then_some(k as u32 / 2));
        }
    }
}
