//! A software TLB: a small set-associative table of recent translations in memory,
//! consulted before the page table is walked. Three designs of the papers are each one,
//! differing in how a page picks its set ([`StlbIndex`]) and in what a probe and a miss cost
//! (which their users price):
//!
//! * Bala, Kaashoek and Weihl's STLB (OSDI 1994): kernel translations, probed at the start of
//!   the MIPS generic miss handler (the software-refill model's `[refill.stlb]`, in
//!   [`crate::mmu`]); indexed by the low page-number bits or by a hash of them.
//! * PA-RISC's swTLB (`pagetable.organisation = "swtlb"`): every translation, 2-way, indexed by
//!   the low page-number bits, in front of another table ([`super::Front`]).
//! * Huck & Hays' HPT cache (`"hybrid"`): a small hashed page table probed by the hardware,
//!   indexed by the XOR of space id and page number, refilled into its head bucket.
//!
//! One or two ways per set, least recently used replaced (an empty way first); a slot's
//! frame is kept beside its tag.

use crate::tlb::{Part, Policy, Tlb, TlbParams, NO_CTX};

/// How a page picks its set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StlbIndex {
    /// The low page-number bits (modulo the sets).
    Low,
    /// A multiplicative hash of the page number (Bala's alternative to the low bits, which
    /// put Mach's page tables, 2 MB apart, into the same few sets).
    Hash,
    /// Huck & Hays' XOR of the space id with the page number.
    Xor,
}

/// A software TLB (see the module documentation).
#[derive(Clone, Debug)]
pub struct Stlb {
    /// The tags (a page's key, see [`Stlb::key`], and its space) and the replacement state.
    tags: Tlb,
    /// Per slot (set × ways + way), the frame of the page it holds.
    frames: Vec<u64>,
    index: StlbIndex,
}

impl Stlb {
    /// `entries` entries of `ways` ways (1 or 2; `ways` must divide `entries`), at most 2^24.
    pub fn new(entries: usize, ways: usize, index: StlbIndex) -> Result<Stlb, String> {
        if ways != 1 && ways != 2 {
            return Err(format!("ways: {ways} is not 1 or 2"));
        }
        if entries == 0 || !entries.is_multiple_of(ways) || entries > 1 << 24 {
            return Err(format!(
                "entries: {entries} is not a positive multiple of {ways} ways (at most 2^24)"
            ));
        }
        Ok(Stlb {
            tags: Tlb::new(&TlbParams::new(entries, ways, Policy::Lru))?,
            frames: vec![0; entries],
            index,
        })
    }

    /// Entries in all.
    pub fn entries(&self) -> usize {
        self.frames.len()
    }

    pub fn ways(&self) -> usize {
        self.tags.ways()
    }

    pub fn sets(&self) -> usize {
        self.tags.sets()
    }

    /// The key a page is tagged by, whose low bits (modulo the sets) are its set: a bijection
    /// of the page number for a given space, so tags stay unique.
    #[inline(always)]
    fn key(&self, space: u32, vpn: u64) -> u64 {
        match self.index {
            StlbIndex::Low => vpn,
            StlbIndex::Hash => {
                let z = vpn.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                z ^ (z >> 32)
            }
            StlbIndex::Xor => super::xor_hash(space, vpn),
        }
    }

    /// The set of page `vpn` of space `space`.
    #[inline]
    pub fn set_of(&self, space: u32, vpn: u64) -> usize {
        self.tags.set_of(self.key(space, vpn))
    }

    /// Where page `vpn` of space `space` is held — its set and way — changing nothing.
    #[cfg(test)]
    pub fn probe(&self, space: u32, vpn: u64) -> Option<(usize, usize)> {
        self.tags.probe(self.key(space, vpn), space as u64, NO_CTX)
    }

    /// The way and frame of page `vpn` of space `space` if held (its way becomes the set's
    /// most recent).
    #[inline]
    pub fn lookup(&mut self, space: u32, vpn: u64) -> Option<(usize, u64)> {
        let key = self.key(space, vpn);
        let (set, way) = self.tags.probe(key, space as u64, NO_CTX)?;
        self.tags.lookup(key, space as u64, NO_CTX);
        Some((way, self.frames[set * self.tags.ways() + way]))
    }

    /// Hold page `vpn` of space `space` in `frame` (if held already, only its frame and
    /// recency change), replacing the set's least recent entry; its set and way.
    pub fn fill(&mut self, space: u32, vpn: u64, frame: u64) -> (usize, usize) {
        let key = self.key(space, vpn);
        let (slot, _) = self.tags.fill_slot(key, space as u64, Part::Upper);
        self.frames[slot] = frame;
        let ways = self.tags.ways();
        (slot / ways, slot % ways)
    }

    /// Forget page `vpn` of space `space` (its translation changed or went away).
    pub fn invalidate(&mut self, space: u32, vpn: u64) {
        self.tags
            .invalidate(self.key(space, vpn), space as u64, NO_CTX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_mapped_and_two_way_least_recent_first() {
        let mut d = Stlb::new(4, 1, StlbIndex::Low).unwrap();
        d.fill(0, 1, 10);
        assert_eq!(d.lookup(0, 1), Some((0, 10)));
        d.fill(0, 5, 50); // same set as 1
        assert_eq!((d.lookup(0, 1), d.lookup(0, 5)), (None, Some((0, 50))));
        let mut t = Stlb::new(4, 2, StlbIndex::Low).unwrap();
        t.fill(0, 0, 1);
        t.fill(0, 2, 3);
        assert!(t.lookup(0, 0).is_some()); // 2 is now the least recent of set 0
        t.fill(0, 4, 5);
        assert!(t.probe(0, 0).is_some() && t.probe(0, 4).is_some() && t.probe(0, 2).is_none());
        t.invalidate(0, 4);
        assert_eq!(t.lookup(0, 4), None);
        // Tagged by space too.
        assert_eq!(t.lookup(1, 0), None);
        assert!(Stlb::new(4, 3, StlbIndex::Low)
            .unwrap_err()
            .starts_with("ways"));
        assert!(Stlb::new(5, 2, StlbIndex::Low)
            .unwrap_err()
            .starts_with("entries"));
    }

    #[test]
    fn the_low_bits_put_pages_512_apart_in_one_set_and_the_hash_does_not() {
        // Mach's per-task page tables are 2 MB (512 pages) apart: with the low-bit index of a
        // 512-set table they share a set, 2 ways hold two of them; hashed, all four stay.
        let pages = [0xC8201, 0xC8401, 0xC8601, 0xC8801];
        for (index, held) in [(StlbIndex::Low, 2), (StlbIndex::Hash, 4)] {
            let mut s = Stlb::new(1024, 2, index).unwrap();
            for &p in &pages {
                s.fill(0, p, p);
            }
            assert_eq!(
                pages.iter().filter(|&&p| s.probe(0, p).is_some()).count(),
                held
            );
        }
    }
}
