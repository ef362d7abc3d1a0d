//! A translation cache in memory in front of another page table.
//!
//! * **Hybrid** (Huck & Hays): a small HPT used as a cache in front of a software-managed
//!   forward-mapped table. Hardware probes the head bucket (the XOR hash of space id and page
//!   number); on a miss software walks the table behind and writes the translation into the
//!   head bucket — every refill moves the page to the head, which is why a small HPT cache
//!   nearly matches a large native HPT on head-bucket hit rate.
//! * **swTLB** (earlier PA-RISC HP-UX releases): a 2-way software TLB indexed by the low 10–12
//!   page-number bits, consulted before the table behind it (there, an IPT).
//!
//! Both are a software TLB ([`Stlb`], the one home of the idea, Bala's STLB included) with
//! 16-byte entries, at a physical address of their own so that their references go through
//! the data cache.

use super::hashed::HPT_ENTRY;
use super::stlb::{Stlb, StlbIndex};
use super::{InsertError, PageTable, Refs, TableRef, Usage, Walk};

/// Which front table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontKind {
    /// A small HPT, indexed by the XOR hash, refilled into the head bucket.
    Hybrid,
    /// A software TLB indexed by the low page-number bits.
    SwTlb,
}

/// The shape of a front table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontParams {
    pub kind: FrontKind,
    /// Sets (head buckets), a power of two.
    pub sets: usize,
    /// 1 or 2.
    pub ways: usize,
    /// Physical address of the front table.
    pub base: u64,
}

/// A front table and the table behind it.
#[derive(Debug)]
pub struct Front {
    p: FrontParams,
    stlb: Stlb,
    inner: PageTable,
    /// Refills written into the front table.
    pub refills: u64,
}

impl Front {
    pub fn new(p: FrontParams, inner: PageTable) -> Result<Front, String> {
        if !p.sets.is_power_of_two() || p.sets > 1 << 24 {
            return Err(format!("{} sets is not a power of two up to 2^24", p.sets));
        }
        if !matches!(p.ways, 1 | 2) {
            return Err(format!("{} ways: 1 or 2", p.ways));
        }
        let index = match p.kind {
            FrontKind::Hybrid => StlbIndex::Xor,
            FrontKind::SwTlb => StlbIndex::Low,
        };
        Ok(Front {
            stlb: Stlb::new(p.sets * p.ways, p.ways, index)?,
            inner,
            refills: 0,
            p,
        })
    }

    pub fn kind(&self) -> FrontKind {
        self.p.kind
    }

    pub fn inner(&self) -> &PageTable {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut PageTable {
        &mut self.inner
    }

    pub fn params(&self) -> &FrontParams {
        &self.p
    }

    #[inline(always)]
    fn slot_addr(&self, set: usize, way: usize) -> u64 {
        self.p.base + (set * self.p.ways + way) as u64 * HPT_ENTRY
    }

    /// Look up `(space, vpn)`; a miss walks the table behind from `root`'s root (see
    /// [`PageTable::lookup_from`]).
    pub fn lookup(&mut self, root: u32, space: u32, vpn: u64, refs: &mut Refs) -> Walk {
        let set = self.stlb.set_of(space, vpn);
        match self.stlb.lookup(space, vpn) {
            Some((way, frame)) => {
                for w in 0..=way {
                    refs.push(TableRef {
                        addr: self.slot_addr(set, w),
                        level: 0,
                        write: false,
                    });
                }
                return Walk {
                    frame: Some(frame),
                    chain: 1,
                    head: true,
                    second_way: way > 0,
                    ..Walk::default()
                };
            }
            None => {
                for w in 0..self.p.ways {
                    refs.push(TableRef {
                        addr: self.slot_addr(set, w),
                        level: 0,
                        write: false,
                    });
                }
            }
        }
        let from = refs.len();
        let mut w = self.inner.lookup_from(root, space, vpn, refs);
        for r in &mut refs[from..] {
            r.level += 1;
        }
        w.head = false;
        w.front_miss = true;
        w.second_way = self.p.ways > 1;
        if let Some(frame) = w.frame {
            let (s, way) = self.stlb.fill(space, vpn, frame);
            refs.push(TableRef {
                addr: self.slot_addr(s, way),
                level: 0,
                write: true,
            });
            self.refills += 1;
        }
        w
    }

    pub fn insert(
        &mut self,
        space: u32,
        vpn: u64,
        shift: u32,
        frame: u64,
    ) -> Result<(), InsertError> {
        self.inner.insert(space, vpn, shift, frame)
    }

    pub fn remove(&mut self, space: u32, vpn: u64) -> Option<u64> {
        self.stlb.invalidate(space, vpn);
        self.inner.remove(space, vpn)
    }

    pub fn usage(&self) -> Usage {
        let mut u = self.inner.usage();
        u.table_bytes += (self.p.sets * self.p.ways) as u64 * HPT_ENTRY;
        u
    }

    pub fn level_names(&self) -> Vec<String> {
        let mut v = vec![match self.p.kind {
            FrontKind::Hybrid => "HPT".to_string(),
            FrontKind::SwTlb => "swTLB".to_string(),
        }];
        v.extend(self.inner.level_names());
        v
    }
}
