//! The inverted page table (IPT) with its hash anchor table (HAT): one 16-byte entry per
//! physical frame (entry `f` describes frame `f`), and a HAT of 4-byte anchors indexed by the
//! hash of the virtual address, each the index of the first entry of a chain. Each entry
//! holds the link and two tag words (upper and lower virtual address) in one cache line.
//!
//! A search reads the HAT anchor, then each entry of the chain (tag 1, then tag 2, in one
//! line) until the tags match. Only one virtual address can map a frame, so sharing uses
//! global addresses. New mappings go to the front of their chain.
//!
//! Storage: a 16K-entry HAT and an 8K-entry IPT for 32 MB of 4 KB pages is
//! (16 B + 2 × 4 B) per 4 KB page: 192 KB, 0.586% of memory.

use super::{xor_hash, InsertError, Refs, TableRef, Usage, Walk, NIL, PAGE_SHIFT, TABLE_BASE};

/// Bytes per HAT anchor.
pub const HAT_ENTRY: u64 = 4;
/// Bytes per IPT entry (link, tag 1, tag 2, protection).
pub const IPT_ENTRY: u64 = 16;

/// The shape of an inverted table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvertedParams {
    /// Physical frames (IPT entries).
    pub frames: u64,
    /// HAT anchors, a power of two.
    pub hat: usize,
    /// Physical address of the HAT; the IPT follows it.
    pub base: u64,
    /// The size (as a shift) of the frames, and so of the pages its entries map.
    pub page_shift: u32,
}

impl InvertedParams {
    pub fn check(&self) -> Result<(), String> {
        if !self.hat.is_power_of_two() || self.hat > 1 << 28 {
            return Err(format!(
                "{} HAT entries is not a power of two up to 2^28",
                self.hat
            ));
        }
        if self.frames == 0 || self.frames > 1 << 28 {
            return Err(format!("{} frames: between 1 and 2^28", self.frames));
        }
        Ok(())
    }

    pub fn bytes(&self) -> u64 {
        self.hat as u64 * HAT_ENTRY + self.frames * IPT_ENTRY
    }
}

/// An inverted page table with its HAT.
#[derive(Debug)]
pub struct Inverted {
    p: InvertedParams,
    mask: u64,
    hat: Vec<u32>,
    space: Vec<u32>,
    vpn: Vec<u64>,
    next: Vec<u32>,
    used: Vec<bool>,
    ipt_base: u64,
    pages: u64,
}

impl Inverted {
    pub fn new(p: InvertedParams) -> Result<Inverted, String> {
        p.check()?;
        let n = p.frames as usize;
        // The IPT starts on the line after the HAT.
        let ipt_base = p.base + p.hat as u64 * HAT_ENTRY;
        Ok(Inverted {
            mask: p.hat as u64 - 1,
            hat: vec![NIL; p.hat],
            space: vec![0; n],
            vpn: vec![0; n],
            next: vec![NIL; n],
            used: vec![false; n],
            ipt_base,
            pages: 0,
            p,
        })
    }

    pub fn params(&self) -> &InvertedParams {
        &self.p
    }

    #[inline(always)]
    fn anchor(&self, space: u32, vpn: u64) -> usize {
        (xor_hash(space, vpn) & self.mask) as usize
    }

    /// HAT, then the chain; see [`super::PageTable::lookup`].
    pub fn lookup(&mut self, space: u32, vpn: u64, refs: &mut Refs) -> Walk {
        let a = self.anchor(space, vpn);
        refs.push(TableRef {
            addr: self.p.base + a as u64 * HAT_ENTRY,
            level: 0,
            write: false,
        });
        let mut w = Walk::default();
        let mut f = self.hat[a];
        while f != NIL {
            w.chain += 1;
            let i = f as usize;
            refs.push(TableRef {
                addr: self.ipt_base + f as u64 * IPT_ENTRY,
                level: if w.chain == 1 { 1 } else { 2 },
                write: false,
            });
            if self.vpn[i] == vpn && self.space[i] == space {
                w.frame = Some(f as u64);
                w.head = w.chain == 1;
                return w;
            }
            f = self.next[i];
        }
        // An empty anchor (the h bit) or the end of the chain: still one step of the search.
        w.chain = w.chain.max(1);
        w
    }

    /// Map `(space, vpn)` to `frame`, which must be free.
    pub fn insert(&mut self, space: u32, vpn: u64, frame: u64) -> Result<(), InsertError> {
        if frame >= self.p.frames {
            return Err(InsertError::Frame(frame));
        }
        let i = frame as usize;
        if self.used[i] {
            let (s, v) = (self.space[i], self.vpn[i]);
            self.remove(s, v);
        }
        let a = self.anchor(space, vpn);
        self.used[i] = true;
        self.space[i] = space;
        self.vpn[i] = vpn;
        self.next[i] = self.hat[a];
        self.hat[a] = frame as u32;
        self.pages += 1;
        Ok(())
    }

    pub fn remove(&mut self, space: u32, vpn: u64) -> Option<u64> {
        let a = self.anchor(space, vpn);
        let mut prev = NIL;
        let mut f = self.hat[a];
        while f != NIL {
            let i = f as usize;
            if self.vpn[i] == vpn && self.space[i] == space {
                if prev == NIL {
                    self.hat[a] = self.next[i];
                } else {
                    self.next[prev as usize] = self.next[i];
                }
                self.used[i] = false;
                self.next[i] = NIL;
                self.pages -= 1;
                return Some(f as u64);
            }
            prev = f;
            f = self.next[i];
        }
        None
    }

    pub fn usage(&self) -> Usage {
        Usage {
            table_bytes: self.p.bytes(),
            pages: self.pages,
            mapped_bytes: self.pages << self.p.page_shift,
        }
    }

    /// The chain of every anchor, first entry first (for tests).
    pub fn chains(&self) -> Vec<Vec<(u32, u64)>> {
        self.hat
            .iter()
            .map(|&h| {
                let mut v = Vec::new();
                let mut f = h;
                while f != NIL {
                    v.push((self.space[f as usize], self.vpn[f as usize]));
                    f = self.next[f as usize];
                }
                v
            })
            .collect()
    }
}

impl Default for InvertedParams {
    fn default() -> Self {
        InvertedParams {
            frames: 8192,
            hat: 16384,
            base: TABLE_BASE,
            page_shift: PAGE_SHIFT,
        }
    }
}
