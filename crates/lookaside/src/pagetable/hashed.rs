//! The hashed page table (HPT) of Huck & Hays: the hash anchor table and the inverted table
//! merged, so that each 16-byte entry holds the tag (space and page number), protection, the
//! frame and a link — the HAT reference disappears.
//!
//! * The table has `buckets` head buckets, a power of two (aligned to its size, so hardware
//!   ORs the base with the index bits), each of 1 or 2 entries (the 32-byte 2-way variant).
//! * The hash is the space id XORed with the low page-number bits ([`super::xor_hash`]).
//! * A page whose head bucket is full is chained from it: into a free entry of the table
//!   itself ([`Chaining::Free`]), or into an overflow area ([`Chaining::Overflow`]). Chains
//!   never mix buckets: a page that needs its head bucket back from an entry borrowed by
//!   another bucket's chain moves that entry to another free slot, so every chain holds
//!   only keys of its bucket and a successful search examines 1 + α/2 entries on average
//!   (Knuth), α being pages per bucket.
//! * Move-to-head: a page found down the chain swaps places with the head bucket's last
//!   entry, so the next miss on it is resolved by the head (what the hybrid's refill does
//!   by construction).
//!
//! New entries join the end of their chain; removing a head entry pulls the first chain
//! entry into its place, so the head bucket holds only its own pages whenever a chain exists
//! (a search compares every way of the head bucket, then follows the chain).

use super::{xor_hash, Refs, TableRef, Usage, Walk, NIL, PAGE_SHIFT, TABLE_BASE};

/// Bytes per HPT entry (tag, protection, frame, link).
pub const HPT_ENTRY: u64 = 16;

/// Where a page whose head bucket is full goes.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Chaining {
    /// Into an unused entry of the table (the highest free one); the overflow area only when
    /// the table is full.
    #[default]
    Free,
    /// Into a separate overflow area.
    Overflow,
}

/// The shape of an HPT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashedParams {
    /// Head buckets, a power of two.
    pub buckets: usize,
    /// Entries per head bucket: 1 or 2.
    pub ways: usize,
    pub chaining: Chaining,
    pub move_to_head: bool,
    /// Physical address of the table (aligned to its size).
    pub base: u64,
    /// The size (as a shift) of the pages its entries map: every entry maps one page of it.
    pub page_shift: u32,
}

impl HashedParams {
    /// `buckets` 1-way buckets, free-entry chaining, no move-to-head.
    pub fn new(buckets: usize) -> HashedParams {
        HashedParams {
            buckets,
            ways: 1,
            chaining: Chaining::Free,
            move_to_head: false,
            base: TABLE_BASE,
            page_shift: PAGE_SHIFT,
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if !self.buckets.is_power_of_two() || self.buckets > 1 << 28 {
            return Err(format!(
                "{} buckets is not a power of two up to 2^28",
                self.buckets
            ));
        }
        if !matches!(self.ways, 1 | 2) {
            return Err(format!(
                "{} ways: a head bucket holds 1 or 2 entries",
                self.ways
            ));
        }
        Ok(())
    }

    pub fn bytes(&self) -> u64 {
        (self.buckets * self.ways) as u64 * HPT_ENTRY
    }
}

/// A hashed page table.
#[derive(Debug)]
pub struct Hashed {
    p: HashedParams,
    mask: u64,
    main: u32,
    /// Per slot (table entries first, then the overflow area): tag, frame, link.
    space: Vec<u32>,
    vpn: Vec<u64>,
    frame: Vec<u64>,
    next: Vec<u32>,
    used: Vec<bool>,
    /// Per bucket, the first chain entry.
    head_link: Vec<u32>,
    /// Candidate free table slots (checked when popped: a slot may have been taken by its
    /// own bucket since; `listed` keeps each slot on the list at most once, so the list
    /// never outgrows the table), and free overflow slots.
    free_main: Vec<u32>,
    listed: Vec<bool>,
    free_over: Vec<u32>,
    overflow_base: u64,
    pages: u64,
    /// Slots ever used in the overflow area.
    overflow_slots: u32,
    /// Entries moved to make room in their bucket for its own page.
    pub relocations: u64,
}

impl Hashed {
    pub fn new(p: HashedParams) -> Result<Hashed, String> {
        p.check()?;
        let main = p.buckets * p.ways;
        Ok(Hashed {
            mask: p.buckets as u64 - 1,
            main: main as u32,
            space: vec![0; main],
            vpn: vec![0; main],
            frame: vec![0; main],
            next: vec![NIL; main],
            used: vec![false; main],
            head_link: vec![NIL; p.buckets],
            free_main: if p.chaining == Chaining::Free {
                (0..main as u32).collect()
            } else {
                Vec::new()
            },
            listed: vec![p.chaining == Chaining::Free; main],
            free_over: Vec::new(),
            overflow_base: p.base + p.bytes(),
            pages: 0,
            overflow_slots: 0,
            relocations: 0,
            p,
        })
    }

    pub fn params(&self) -> &HashedParams {
        &self.p
    }

    #[inline(always)]
    fn bucket(&self, space: u32, vpn: u64) -> usize {
        (xor_hash(space, vpn) & self.mask) as usize
    }

    #[inline(always)]
    fn addr(&self, slot: u32) -> u64 {
        if slot < self.main {
            self.p.base + slot as u64 * HPT_ENTRY
        } else {
            self.overflow_base + (slot - self.main) as u64 * HPT_ENTRY
        }
    }

    #[inline(always)]
    fn is(&self, slot: u32, space: u32, vpn: u64) -> bool {
        let s = slot as usize;
        self.used[s] && self.vpn[s] == vpn && self.space[s] == space
    }

    /// Search the head bucket, then the chain; see [`super::PageTable::lookup`].
    pub fn lookup(&mut self, space: u32, vpn: u64, refs: &mut Refs) -> Walk {
        let b = self.bucket(space, vpn);
        let first = (b * self.p.ways) as u32;
        let mut w = Walk {
            chain: 1,
            ..Walk::default()
        };
        for way in 0..self.p.ways as u32 {
            let s = first + way;
            refs.push(TableRef {
                addr: self.addr(s),
                level: 0,
                write: false,
            });
            if way > 0 {
                w.second_way = true;
            }
            if self.is(s, space, vpn) {
                w.frame = Some(self.frame[s as usize]);
                w.head = true;
                return w;
            }
        }
        let mut s = self.head_link[b];
        while s != NIL {
            w.chain += 1;
            refs.push(TableRef {
                addr: self.addr(s),
                level: 1,
                write: false,
            });
            if self.is(s, space, vpn) {
                w.frame = Some(self.frame[s as usize]);
                if self.p.move_to_head {
                    self.swap_to_head(b, s);
                }
                return w;
            }
            s = self.next[s as usize];
        }
        w
    }

    /// Exchange the contents of chain slot `s` with the head bucket's last entry (links stay).
    fn swap_to_head(&mut self, b: usize, s: u32) {
        let h = b * self.p.ways + self.p.ways - 1;
        let s = s as usize;
        self.space.swap(h, s);
        self.vpn.swap(h, s);
        self.frame.swap(h, s);
    }

    /// A slot for a chain entry: a free table entry, else one of the overflow area.
    fn spare(&mut self) -> u32 {
        while let Some(s) = self.free_main.pop() {
            self.listed[s as usize] = false;
            if !self.used[s as usize] {
                return s;
            }
        }
        if let Some(s) = self.free_over.pop() {
            return s;
        }
        let s = self.main + self.overflow_slots;
        self.overflow_slots += 1;
        self.space.push(0);
        self.vpn.push(0);
        self.frame.push(0);
        self.next.push(NIL);
        self.used.push(false);
        s
    }

    fn release(&mut self, s: u32) {
        self.used[s as usize] = false;
        self.next[s as usize] = NIL;
        if s >= self.main {
            self.free_over.push(s);
        } else if self.p.chaining == Chaining::Free && !self.listed[s as usize] {
            self.listed[s as usize] = true;
            self.free_main.push(s);
        }
    }

    fn put(&mut self, s: u32, space: u32, vpn: u64, frame: u64) {
        let i = s as usize;
        self.used[i] = true;
        self.space[i] = space;
        self.vpn[i] = vpn;
        self.frame[i] = frame;
    }

    /// Map `(space, vpn)` to `frame` (the page must not be mapped).
    pub fn insert(&mut self, space: u32, vpn: u64, frame: u64) {
        self.pages += 1;
        let b = self.bucket(space, vpn);
        let first = (b * self.p.ways) as u32;
        for s in first..first + self.p.ways as u32 {
            if !self.used[s as usize] {
                self.put(s, space, vpn, frame);
                return;
            }
            let owner = self.bucket(self.space[s as usize], self.vpn[s as usize]);
            if owner != b {
                // Borrowed by another bucket's chain: move that entry out of the way.
                let to = self.spare();
                let i = s as usize;
                self.put(to, self.space[i], self.vpn[i], self.frame[i]);
                self.next[to as usize] = self.next[i];
                self.relink(owner, s, to);
                self.relocations += 1;
                self.next[i] = NIL;
                self.put(s, space, vpn, frame);
                return;
            }
        }
        let to = self.spare();
        self.put(to, space, vpn, frame);
        self.next[to as usize] = NIL;
        // Append at the end of the chain.
        match self.last_of_chain(b) {
            None => self.head_link[b] = to,
            Some(last) => self.next[last as usize] = to,
        }
    }

    fn last_of_chain(&self, b: usize) -> Option<u32> {
        let mut s = self.head_link[b];
        if s == NIL {
            return None;
        }
        while self.next[s as usize] != NIL {
            s = self.next[s as usize];
        }
        Some(s)
    }

    /// In bucket `b`'s chain, make the link that points at `from` point at `to`.
    fn relink(&mut self, b: usize, from: u32, to: u32) {
        if self.head_link[b] == from {
            self.head_link[b] = to;
            return;
        }
        let mut s = self.head_link[b];
        while s != NIL {
            if self.next[s as usize] == from {
                self.next[s as usize] = to;
                return;
            }
            s = self.next[s as usize];
        }
        debug_assert!(false, "slot {from} is not in the chain of bucket {b}");
    }

    /// Unmap `(space, vpn)`; its frame if it was mapped.
    pub fn remove(&mut self, space: u32, vpn: u64) -> Option<u64> {
        let b = self.bucket(space, vpn);
        let first = (b * self.p.ways) as u32;
        for s in first..first + self.p.ways as u32 {
            if self.is(s, space, vpn) {
                self.pages -= 1;
                let frame = self.frame[s as usize];
                let c = self.head_link[b];
                if c == NIL {
                    self.release(s);
                } else {
                    // Pull the first chain entry into the head.
                    let i = c as usize;
                    let (sp, vp, fr, nx) =
                        (self.space[i], self.vpn[i], self.frame[i], self.next[i]);
                    self.put(s, sp, vp, fr);
                    self.head_link[b] = nx;
                    self.release(c);
                }
                return Some(frame);
            }
        }
        let mut prev = NIL;
        let mut s = self.head_link[b];
        while s != NIL {
            if self.is(s, space, vpn) {
                self.pages -= 1;
                let frame = self.frame[s as usize];
                let nx = self.next[s as usize];
                if prev == NIL {
                    self.head_link[b] = nx;
                } else {
                    self.next[prev as usize] = nx;
                }
                self.release(s);
                return Some(frame);
            }
            prev = s;
            s = self.next[s as usize];
        }
        None
    }

    pub fn usage(&self) -> Usage {
        Usage {
            table_bytes: self.p.bytes() + self.overflow_slots as u64 * HPT_ENTRY,
            pages: self.pages,
            mapped_bytes: self.pages << self.p.page_shift,
        }
    }

    /// The chain of every bucket, head entries first (for tests and statistics).
    pub fn chains(&self) -> Vec<Vec<(u32, u64)>> {
        (0..self.p.buckets)
            .map(|b| {
                let mut v = Vec::new();
                for s in b * self.p.ways..(b + 1) * self.p.ways {
                    if self.used[s] && self.bucket(self.space[s], self.vpn[s]) == b {
                        v.push((self.space[s], self.vpn[s]));
                    }
                }
                let mut s = self.head_link[b];
                while s != NIL {
                    v.push((self.space[s as usize], self.vpn[s as usize]));
                    s = self.next[s as usize];
                }
                v
            })
            .collect()
    }
}
