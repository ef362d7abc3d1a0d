//! Bala, Kaashoek and Weihl's software TLB (OSDI 1994): a table of recently used kernel
//! translations in *unmapped* memory, consulted at the start of the generic miss handler.
//! A hit inserts the entry and returns at once — a fast path that cannot fault, so the nested
//! traps the page-table walk would take never happen; a miss runs the normal (slow, possibly
//! nested) handler and then fills the table.
//!
//! Direct-mapped or 2-way set associative (LRU within a set), indexed by the low bits of the
//! virtual page number (or, optionally, by a hash of all of them), tagged by the whole page
//! number. Kernel translations are global, so no address-space tag is needed.
//!
//! The low-bit index has a pathology on Mach's layout: the tasks' linear page tables are
//! 2 MB (512 pages) apart, so the page-table pages of the same region of every task — and
//! kernel data 4 MB apart — fall into the same few sets of a 512- or 1024-set table.

/// An empty slot (no kseg2 page number reaches it).
const EMPTY: u64 = u64::MAX;

/// Where the table sits (kseg0), for the handler references it records.
pub const STLB_BASE: u64 = super::layout::KSEG0 + 0x0020_0000;

/// A software TLB.
#[derive(Clone, Debug)]
pub struct Stlb {
    tags: Vec<u64>,
    sets: usize,
    ways: usize,
    /// Per set: the way used last (2-way LRU).
    last: Vec<u8>,
    hashed: bool,
}

impl Stlb {
    /// `entries` entries of `ways` ways (1 or 2; `ways` must divide `entries`), indexed by the
    /// low page-number bits or (`hashed`) by a hash of the page number.
    pub fn new(entries: usize, ways: usize, hashed: bool) -> Result<Stlb, String> {
        if ways != 1 && ways != 2 {
            return Err(format!("ways: {ways} is not 1 or 2"));
        }
        if entries == 0 || !entries.is_multiple_of(ways) || entries > 1 << 24 {
            return Err(format!(
                "entries: {entries} is not a positive multiple of {ways} ways (at most 2^24)"
            ));
        }
        Ok(Stlb {
            tags: vec![EMPTY; entries],
            sets: entries / ways,
            ways,
            last: vec![0; entries / ways],
            hashed,
        })
    }

    /// Entries in all.
    pub fn entries(&self) -> usize {
        self.tags.len()
    }

    /// The set of page `vpn`: its low page-number bits (modulo the sets), or a hash of it.
    #[inline]
    fn set(&self, vpn: u64) -> usize {
        let key = if self.hashed {
            let z = vpn.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z ^ (z >> 32)
        } else {
            vpn
        };
        (key % self.sets as u64) as usize
    }

    /// Address of the first entry of `vpn`'s set (8 bytes per entry).
    pub fn entry_addr(&self, vpn: u64) -> u64 {
        STLB_BASE + (self.set(vpn) * self.ways * 8) as u64
    }

    /// Is `vpn` held? (A hit makes its way the set's most recent.)
    pub fn lookup(&mut self, vpn: u64) -> bool {
        let s = self.set(vpn);
        for w in 0..self.ways {
            if self.tags[s * self.ways + w] == vpn {
                self.last[s] = w as u8;
                return true;
            }
        }
        false
    }

    /// Hold `vpn`, replacing the set's least recent entry (an empty way first).
    pub fn fill(&mut self, vpn: u64) {
        if self.lookup(vpn) {
            return;
        }
        let s = self.set(vpn);
        let base = s * self.ways;
        let w = (0..self.ways)
            .find(|&w| self.tags[base + w] == EMPTY)
            .unwrap_or(if self.ways == 2 {
                1 - self.last[s] as usize
            } else {
                0
            });
        self.tags[base + w] = vpn;
        self.last[s] = w as u8;
    }

    /// Forget `vpn` (its PTE changed).
    pub fn invalidate(&mut self, vpn: u64) {
        let s = self.set(vpn);
        for w in 0..self.ways {
            if self.tags[s * self.ways + w] == vpn {
                self.tags[s * self.ways + w] = EMPTY;
            }
        }
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        self.tags.fill(EMPTY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_mapped_and_two_way() {
        let mut d = Stlb::new(4, 1, false).unwrap();
        d.fill(1);
        assert!(d.lookup(1));
        d.fill(5); // same set as 1
        assert!(!d.lookup(1) && d.lookup(5));
        let mut t = Stlb::new(4, 2, false).unwrap();
        t.fill(0);
        t.fill(2);
        assert!(t.lookup(0)); // 2 is now the least recent of set 0
        t.fill(4);
        assert!(t.lookup(0) && t.lookup(4) && !t.lookup(2));
        t.invalidate(4);
        assert!(!t.lookup(4));
        assert!(Stlb::new(4, 3, false).unwrap_err().starts_with("ways"));
        assert!(Stlb::new(5, 2, false).unwrap_err().starts_with("entries"));
        // Pages 512 apart share a set of a low-bit-indexed 512-set table, not of a hashed one.
        let pages = [0xC8201, 0xC8401, 0xC8601, 0xC8801];
        for (hashed, held) in [(false, 2), (true, 4)] {
            let mut s = Stlb::new(1024, 2, hashed).unwrap();
            pages.iter().for_each(|&p| s.fill(p));
            assert_eq!(pages.iter().filter(|&&p| s.lookup(p)).count(), held);
        }
    }
}
