//! A brute-force reference model of [`super::Tlb`], for differential testing.
//!
//! Written to be obviously right rather than fast: every set is a `Vec` of optional entries
//! searched linearly, LRU and FIFO are explicit `Vec`s in recency / insertion order, PLRU is
//! an explicit recursive walk over a `Vec<bool>` tree, the clock is a `Vec<bool>` and a hand
//! stepped one way at a time, and the PRNG is SplitMix64 written out again. It shares no code
//! with the real engine.

use super::{Part, Policy, TlbParams, NO_CTX};
use crate::event::Mode;

/// Replacement state of one partition of one set.
#[derive(Clone, Debug)]
enum Pol {
    /// Ways, least recently used first.
    Lru(Vec<usize>),
    /// Ways, oldest fill first.
    Fifo(Vec<usize>),
    Random,
    /// Node `i` (1-based heap numbering over the next power of two of leaves): true = the
    /// victim is in the right subtree.
    Plru {
        bits: Vec<bool>,
        leaves: usize,
    },
    Clock {
        refs: Vec<bool>,
        hand: usize,
    },
    /// Ways least recently used first, and whether a kernel-mode reference filled each.
    UserFirst {
        order: Vec<usize>,
        kernel: Vec<bool>,
    },
}

impl Pol {
    fn new(p: Policy, n: usize) -> Pol {
        match p {
            Policy::Lru => Pol::Lru(Vec::new()),
            Policy::Fifo => Pol::Fifo(Vec::new()),
            Policy::Random => Pol::Random,
            Policy::Plru => {
                let mut leaves = 1;
                while leaves < n {
                    leaves *= 2;
                }
                Pol::Plru {
                    bits: vec![false; leaves],
                    leaves,
                }
            }
            Policy::Nru => Pol::Clock {
                refs: vec![false; n],
                hand: 0,
            },
            Policy::UserFirst => Pol::UserFirst {
                order: Vec::new(),
                kernel: vec![false; n],
            },
        }
    }

    /// Way `w` was hit, or filled (`is_fill`) by a reference in `mode`.
    fn touch(&mut self, w: usize, is_fill: bool, mode: Mode) {
        match self {
            Pol::UserFirst { order, kernel } => {
                order.retain(|&x| x != w);
                order.push(w);
                if is_fill {
                    kernel[w] = mode == Mode::Kernel;
                }
            }
            Pol::Lru(order) => {
                order.retain(|&x| x != w);
                order.push(w);
            }
            Pol::Fifo(order) => {
                if is_fill {
                    order.retain(|&x| x != w);
                    order.push(w);
                }
            }
            Pol::Random => {}
            Pol::Plru { bits, leaves } => {
                // Walk down from the root to leaf w, pointing every node away from w.
                let (mut node, mut lo, mut size) = (1, 0, *leaves);
                while size > 1 {
                    let half = size / 2;
                    if w < lo + half {
                        bits[node] = true;
                        node *= 2;
                    } else {
                        bits[node] = false;
                        node = 2 * node + 1;
                        lo += half;
                    }
                    size = half;
                }
            }
            Pol::Clock { refs, .. } => refs[w] = true,
        }
    }

    fn invalidate(&mut self, w: usize) {
        match self {
            Pol::Lru(order) | Pol::Fifo(order) => order.retain(|&x| x != w),
            Pol::UserFirst { order, .. } => order.retain(|&x| x != w),
            Pol::Random | Pol::Plru { .. } => {}
            Pol::Clock { refs, .. } => refs[w] = false,
        }
    }

    fn victim(&mut self, n: usize, rng: &mut RefRng) -> usize {
        match self {
            Pol::Lru(order) | Pol::Fifo(order) => {
                assert_eq!(
                    order.len(),
                    n,
                    "victim asked of a partition that is not full"
                );
                order[0]
            }
            Pol::Random => rng.below(n),
            Pol::UserFirst { order, kernel } => {
                assert_eq!(
                    order.len(),
                    n,
                    "victim asked of a partition that is not full"
                );
                *order.iter().find(|&&w| !kernel[w]).unwrap_or(&order[0])
            }
            Pol::Plru { bits, leaves } => {
                let (mut node, mut lo, mut size) = (1, 0, *leaves);
                while size > 1 {
                    let half = size / 2;
                    let right_exists = (lo + half..lo + size).any(|leaf| leaf < n);
                    if bits[node] && right_exists {
                        node = 2 * node + 1;
                        lo += half;
                    } else {
                        node *= 2;
                    }
                    size = half;
                }
                lo
            }
            Pol::Clock { refs, hand } => loop {
                let h = *hand;
                *hand = (h + 1) % n;
                if refs[h] {
                    refs[h] = false;
                } else {
                    return h;
                }
            },
        }
    }
}

/// SplitMix64, written out independently.
#[derive(Clone, Debug)]
pub struct RefRng(u64);

impl RefRng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^= z >> 31;
        ((z as u128 * n as u128) >> 64) as usize
    }
}

/// The reference TLB.
#[derive(Clone, Debug)]
pub struct RefTlb {
    sets: usize,
    ways: usize,
    /// Way ranges of the partitions.
    parts: Vec<(usize, usize)>,
    slots: Vec<Vec<Option<(u64, u64)>>>,
    /// `pols[set][part]`.
    pols: Vec<Vec<Pol>>,
    /// The policy of each partition.
    policies: Vec<Policy>,
    rng: RefRng,
    /// The mode of the reference the next accesses serve (see `Tlb::set_reference`).
    mode: Mode,
}

impl RefTlb {
    pub fn new(p: &TlbParams) -> RefTlb {
        let sets = p.entries / p.ways;
        let (parts, policies) = match &p.partition {
            None => (vec![(0, p.ways)], vec![p.policy]),
            Some(q) => (
                vec![(0, q.lower_ways), (q.lower_ways, p.ways)],
                vec![q.lower_policy, q.upper_policy],
            ),
        };
        let pols = (0..sets)
            .map(|_| {
                parts
                    .iter()
                    .zip(&policies)
                    .map(|(r, &pol)| Pol::new(pol, r.1 - r.0))
                    .collect()
            })
            .collect();
        RefTlb {
            sets,
            ways: p.ways,
            parts,
            slots: vec![vec![None; p.ways]; sets],
            pols,
            policies,
            rng: RefRng(p.seed),
            mode: Mode::User,
        }
    }

    /// The mode of the reference the next accesses serve.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    fn set_of(&self, vpn: u64) -> usize {
        (vpn % self.sets as u64) as usize
    }

    fn part_of(&self, way: usize) -> usize {
        self.parts
            .iter()
            .position(|&(lo, hi)| lo <= way && way < hi)
            .unwrap()
    }

    /// The way hit by (vpn, ctx, gctx): an exact-context match first, else a gctx match.
    fn find(&self, vpn: u64, ctx: u64, gctx: u64) -> Option<(usize, usize)> {
        let set = self.set_of(vpn);
        let s = &self.slots[set];
        let exact = s
            .iter()
            .position(|e| ctx != NO_CTX && *e == Some((vpn, ctx)));
        let global = s
            .iter()
            .position(|e| gctx != NO_CTX && *e == Some((vpn, gctx)));
        exact.or(global).map(|w| (set, w))
    }

    fn touch(&mut self, set: usize, way: usize, is_fill: bool) {
        let p = self.part_of(way);
        let lo = self.parts[p].0;
        let mode = self.mode;
        self.pols[set][p].touch(way - lo, is_fill, mode);
    }

    pub fn lookup(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        match self.find(vpn, ctx, gctx) {
            Some((set, way)) => {
                self.touch(set, way, false);
                true
            }
            None => false,
        }
    }

    pub fn fill(&mut self, vpn: u64, ctx: u64, part: Part) -> Option<(u64, u64)> {
        if let Some((set, way)) = self.find(vpn, ctx, NO_CTX) {
            self.touch(set, way, false);
            return None;
        }
        let set = self.set_of(vpn);
        let p = if self.parts.len() == 2 && part == Part::Upper {
            1
        } else {
            0
        };
        let (lo, hi) = self.parts[p];
        let (way, evicted) = match (lo..hi).find(|&w| self.slots[set][w].is_none()) {
            Some(w) => (w, None),
            None => {
                let w = lo + self.pols[set][p].victim(hi - lo, &mut self.rng);
                (w, self.slots[set][w])
            }
        };
        self.slots[set][way] = Some((vpn, ctx));
        self.touch(set, way, true);
        evicted
    }

    pub fn access(&mut self, vpn: u64, ctx: u64, gctx: u64, part: Part) -> bool {
        if self.lookup(vpn, ctx, gctx) {
            return true;
        }
        self.fill(vpn, ctx, part);
        false
    }

    fn remove(&mut self, set: usize, way: usize) {
        self.slots[set][way] = None;
        let p = self.part_of(way);
        let lo = self.parts[p].0;
        self.pols[set][p].invalidate(way - lo);
    }

    pub fn invalidate(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        match self.find(vpn, ctx, gctx) {
            Some((set, way)) => {
                self.remove(set, way);
                true
            }
            None => false,
        }
    }

    /// Move the partition point (see `Tlb::repartition`); false if not possible.
    pub fn repartition(&mut self, lower_ways: usize) -> bool {
        if self.parts.len() != 2 || lower_ways == 0 || lower_ways >= self.ways {
            return false;
        }
        let policies: Vec<Policy> = (0..2).map(|i| self.policies[i]).collect();
        // Whether a kernel-mode reference filled each way, where the old state kept it.
        let kernel: Vec<Vec<bool>> = (0..self.sets)
            .map(|set| {
                (0..self.ways)
                    .map(|way| {
                        let p = self
                            .parts
                            .iter()
                            .position(|r| way >= r.0 && way < r.1)
                            .unwrap();
                        match &self.pols[set][p] {
                            Pol::UserFirst { kernel, .. } => kernel[way - self.parts[p].0],
                            _ => false,
                        }
                    })
                    .collect()
            })
            .collect();
        self.parts = vec![(0, lower_ways), (lower_ways, self.ways)];
        for set in 0..self.sets {
            self.pols[set] = self
                .parts
                .iter()
                .zip(&policies)
                .map(|(r, &pol)| Pol::new(pol, r.1 - r.0))
                .collect();
            // Refilled in the mode that filled each entry (user where the state kept none).
            let mode = self.mode;
            for way in 0..self.ways {
                if self.slots[set][way].is_some() {
                    self.mode = [Mode::User, Mode::Kernel][kernel[set][way] as usize];
                    self.touch(set, way, true);
                }
            }
            self.mode = mode;
        }
        true
    }

    /// Change the context of `(vpn, ctx)` to `new_ctx` in place (see `Tlb::retag`).
    pub fn retag(&mut self, vpn: u64, ctx: u64, new_ctx: u64) -> bool {
        let Some((set, way)) = self.find(vpn, ctx, NO_CTX) else {
            return false;
        };
        if ctx == new_ctx {
            return true;
        }
        if self.find(vpn, new_ctx, NO_CTX).is_some() {
            self.remove(set, way);
        } else {
            self.slots[set][way] = Some((vpn, new_ctx));
        }
        true
    }

    pub fn flush_if(&mut self, mut pred: impl FnMut(u64, u64) -> bool) -> usize {
        let mut n = 0;
        for set in 0..self.sets {
            for way in 0..self.ways {
                if let Some((v, c)) = self.slots[set][way] {
                    if pred(v, c) {
                        self.remove(set, way);
                        n += 1;
                    }
                }
            }
        }
        n
    }

    pub fn flush_all(&mut self) {
        self.flush_if(|_, _| true);
    }

    pub fn valid_entries(&self) -> usize {
        self.slots.iter().flatten().filter(|e| e.is_some()).count()
    }

    /// (set, way, vpn, ctx) of every valid entry, in (set, way) order.
    pub fn contents(&self) -> Vec<(usize, usize, u64, u64)> {
        let mut out = Vec::new();
        for (s, set) in self.slots.iter().enumerate() {
            for (w, e) in set.iter().enumerate() {
                if let Some((v, c)) = *e {
                    out.push((s, w, v, c));
                }
            }
        }
        out
    }
}
