//! The machine's common TLB, simulated on a short path: unpartitioned, replaced by LRU or
//! FIFO, and looked up with one exact context (the machine never passes a second, global
//! one: a global entry is a context tag of its own).
//!
//! It behaves exactly as a [`Tlb`](super::Tlb) of the same parameters driven with
//! `gctx = NO_CTX` (same hits, same victims, same contents in the same ways: see the module
//! documentation there), and is tested against the same reference model. What it leaves out
//! is what those parameters never need, and what made a miss cost several times a hit:
//!
//! * no MRU entry or hints: a lookup is a scan of the set or a walk of one hash chain
//!   ([`WayIndex`]), about what checking a hint costs, and a miss has no hint to check first
//!   and none to record;
//! * no second context, no partitions, no policy dispatch: LRU and FIFO keep one list per set
//!   ([`Lists`]: a hit of LRU moves its way to the back, a fill moves it to the back, the
//!   victim is the front, an invalidation unlinks), the choice of policy a const parameter
//!   of the type, so that each path is compiled once per policy.
//!
//! [`Engine`] holds either this or the general [`Tlb`], chosen once when the machine is built.

use super::index::WayIndex;
use super::policy::list::Lists;
use super::{filled, scan, Part, Policy, Tlb, TlbParams, INDEX_MIN_WAYS, NO_CTX};

/// An unpartitioned LRU (`LRU = true`) or FIFO (`false`) TLB looked up with exact contexts.
#[derive(Clone)]
pub struct ExactTlb<const LRU: bool> {
    vpn: Vec<u64>,
    /// `NO_CTX` marks an invalid way.
    ctx: Vec<u64>,
    /// Per set, recency (LRU) or fill (FIFO) order of its valid ways.
    order: Lists,
    /// Valid bit per way, `words` words per set (finds the lowest invalid way fast).
    valid_bits: Vec<u64>,
    words: usize,
    /// Valid ways per set.
    used: Vec<u32>,
    valid: usize,
    index: Option<WayIndex>,
    sets: usize,
    ways: usize,
    set_mask: u64,
    sets_pow2: bool,
    params: TlbParams,
}

impl<const LRU: bool> ExactTlb<LRU> {
    /// An empty TLB of parameters `p`, which must be unpartitioned with the policy of `LRU`.
    pub fn new(p: &TlbParams) -> Result<ExactTlb<LRU>, String> {
        p.check().map_err(|e| e.to_string())?;
        let want = if LRU { Policy::Lru } else { Policy::Fifo };
        assert!(
            p.partition.is_none() && p.policy == want,
            "ExactTlb: unpartitioned {want} only"
        );
        let (ways, sets) = (p.ways, p.entries / p.ways);
        let words = ways.div_ceil(64);
        Ok(ExactTlb {
            vpn: filled(p.entries, 0)?,
            ctx: filled(p.entries, NO_CTX)?,
            order: Lists::new(sets, ways)?,
            valid_bits: filled(sets * words, 0)?,
            words,
            used: filled(sets, 0)?,
            valid: 0,
            index: match ways >= INDEX_MIN_WAYS {
                true => Some(WayIndex::new(sets, ways)?),
                false => None,
            },
            sets,
            ways,
            set_mask: (sets as u64).wrapping_sub(1),
            sets_pow2: sets.is_power_of_two(),
            params: p.clone(),
        })
    }

    /// The set `vpn` maps to.
    #[inline(always)]
    fn set_of(&self, vpn: u64) -> usize {
        if self.sets_pow2 {
            (vpn & self.set_mask) as usize
        } else {
            (vpn % self.sets as u64) as usize
        }
    }

    /// The way of `set` holding `(vpn, ctx)`, and with a hash index the key's chain in it.
    #[inline(always)]
    fn find(&self, set: usize, vpn: u64, ctx: u64) -> (Option<usize>, usize) {
        let base = set * self.ways;
        let vs = &self.vpn[base..base + self.ways];
        let cs = &self.ctx[base..base + self.ways];
        match &self.index {
            None => (scan(vs, cs, vpn, ctx, ctx), 0),
            Some(ix) => {
                let chain = ix.chain(set, vpn, ctx);
                (ix.find_in(chain, set, vpn, ctx, vs, cs), chain)
            }
        }
    }

    /// Look `(vpn, ctx)` up; on a miss fill it (into the lowest invalid way of its set, else
    /// in place of the policy's victim). Returns whether it hit.
    ///
    /// # Panics
    /// On a miss with `ctx == NO_CTX`, which is never stored.
    #[inline(always)]
    pub fn access(&mut self, vpn: u64, ctx: u64) -> bool {
        let set = self.set_of(vpn);
        let (found, chain) = self.find(set, vpn, ctx);
        if let Some(way) = found {
            if LRU {
                self.order.move_to_back(set, way);
            }
            return true;
        }
        self.fill_new(set, chain, vpn, ctx);
        false
    }

    /// Put the new key `(vpn, ctx)`, whose chain in the hash index is `chain`, into `set`.
    #[inline(always)]
    fn fill_new(&mut self, set: usize, chain: usize, vpn: u64, ctx: u64) {
        assert!(
            ctx != NO_CTX,
            "ExactTlb::access: NO_CTX is not a storable context"
        );
        let base = set * self.ways;
        let way = if (self.used[set] as usize) < self.ways {
            let bits = &mut self.valid_bits[set * self.words..(set + 1) * self.words];
            let mut wi = 0;
            while bits[wi] == !0 {
                wi += 1;
            }
            let bit = (!bits[wi]).trailing_zeros() as usize;
            bits[wi] |= 1 << bit;
            self.used[set] += 1;
            self.valid += 1;
            wi * 64 + bit
        } else {
            // Every way is valid, so the list holds every way.
            let w = self.order.front(set).unwrap_or(0);
            if let Some(ix) = &mut self.index {
                ix.remove(set, w, self.vpn[base + w], self.ctx[base + w]);
            }
            w
        };
        self.vpn[base + way] = vpn;
        self.ctx[base + way] = ctx;
        if let Some(ix) = &mut self.index {
            ix.insert_in(chain, set, way);
        }
        self.order.move_to_back(set, way);
    }

    /// Make the valid `way` of `set` invalid.
    fn remove(&mut self, set: usize, way: usize) {
        let slot = set * self.ways + way;
        if let Some(ix) = &mut self.index {
            ix.remove(set, way, self.vpn[slot], self.ctx[slot]);
        }
        self.vpn[slot] = 0;
        self.ctx[slot] = NO_CTX;
        self.valid_bits[set * self.words + way / 64] &= !(1 << (way % 64));
        self.used[set] -= 1;
        self.valid -= 1;
        self.order.unlink(set, way);
    }

    /// Remove `(vpn, ctx)`; returns whether it was present.
    pub fn invalidate(&mut self, vpn: u64, ctx: u64) -> bool {
        let set = self.set_of(vpn);
        match self.find(set, vpn, ctx).0 {
            Some(way) => {
                self.remove(set, way);
                true
            }
            None => false,
        }
    }

    /// Remove every entry for which `pred(vpn, ctx)` is true; `pred` sees the valid entries
    /// in (set, way) order. Returns how many went.
    pub fn flush_if(&mut self, mut pred: impl FnMut(u64, u64) -> bool) -> usize {
        let mut n = 0;
        for set in 0..self.sets {
            if self.used[set] == 0 {
                continue;
            }
            for way in 0..self.ways {
                let slot = set * self.ways + way;
                let (v, c) = (self.vpn[slot], self.ctx[slot]);
                if c != NO_CTX && pred(v, c) {
                    self.remove(set, way);
                    n += 1;
                }
            }
        }
        n
    }

    /// Remove every entry.
    pub fn flush_all(&mut self) {
        self.flush_if(|_, _| true);
    }

    /// Number of valid entries.
    pub fn valid_entries(&self) -> usize {
        self.valid
    }

    /// The valid entries as `(set, way, vpn, ctx)`, in (set, way) order.
    pub fn entries_iter(&self) -> impl Iterator<Item = (usize, usize, u64, u64)> + '_ {
        let ways = self.ways;
        self.vpn
            .iter()
            .zip(&self.ctx)
            .enumerate()
            .filter(|&(_, (_, &c))| c != NO_CTX)
            .map(move |(i, (&v, &c))| (i / ways, i % ways, v, c))
    }
}

/// A TLB as the machine holds it: the short path of [`ExactTlb`] when its parameters allow
/// (unpartitioned LRU or FIFO), else the general [`Tlb`]; chosen once, when it is built. The
/// machine looks up one exact context per access (`gctx = NO_CTX`), which both answer alike.
#[derive(Clone)]
pub enum Engine {
    Lru(ExactTlb<true>),
    Fifo(ExactTlb<false>),
    General(Tlb),
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Engine::Lru(_) => "lru",
            Engine::Fifo(_) => "fifo",
            Engine::General(_) => "general",
        };
        f.debug_struct("Engine")
            .field("kind", &kind)
            .field("params", self.params())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// The engine for parameters `p`; the error names the bad field.
    pub fn new(p: &TlbParams) -> Result<Engine, String> {
        Ok(match (p.partition, p.policy) {
            (None, Policy::Lru) => Engine::Lru(ExactTlb::new(p)?),
            (None, Policy::Fifo) => Engine::Fifo(ExactTlb::new(p)?),
            _ => Engine::General(Tlb::new(p)?),
        })
    }

    /// [`Tlb::access`] with `gctx = NO_CTX`: look up `(vpn, ctx)`, fill it (into `part`, when
    /// partitioned) on a miss; returns whether it hit.
    #[inline(always)]
    pub fn access(&mut self, vpn: u64, ctx: u64, part: Part) -> bool {
        match self {
            Engine::Lru(t) => t.access(vpn, ctx),
            Engine::Fifo(t) => t.access(vpn, ctx),
            Engine::General(t) => t.access(vpn, ctx, NO_CTX, part),
        }
    }

    /// [`Tlb::invalidate`] with `gctx = NO_CTX`.
    pub fn invalidate(&mut self, vpn: u64, ctx: u64) -> bool {
        match self {
            Engine::Lru(t) => t.invalidate(vpn, ctx),
            Engine::Fifo(t) => t.invalidate(vpn, ctx),
            Engine::General(t) => t.invalidate(vpn, ctx, NO_CTX),
        }
    }

    /// [`Tlb::flush_if`].
    pub fn flush_if(&mut self, pred: impl FnMut(u64, u64) -> bool) -> usize {
        match self {
            Engine::Lru(t) => t.flush_if(pred),
            Engine::Fifo(t) => t.flush_if(pred),
            Engine::General(t) => t.flush_if(pred),
        }
    }

    /// [`Tlb::flush_all`].
    pub fn flush_all(&mut self) {
        match self {
            Engine::Lru(t) => t.flush_all(),
            Engine::Fifo(t) => t.flush_all(),
            Engine::General(t) => t.flush_all(),
        }
    }

    /// The parameters it was built from.
    pub fn params(&self) -> &TlbParams {
        match self {
            Engine::Lru(t) => &t.params,
            Engine::Fifo(t) => &t.params,
            Engine::General(t) => t.params(),
        }
    }

    /// Number of sets.
    pub fn sets(&self) -> usize {
        let p = self.params();
        p.entries / p.ways
    }

    /// Ways per set.
    pub fn ways(&self) -> usize {
        self.params().ways
    }

    /// Number of valid entries.
    pub fn valid_entries(&self) -> usize {
        match self {
            Engine::Lru(t) => t.valid_entries(),
            Engine::Fifo(t) => t.valid_entries(),
            Engine::General(t) => t.valid_entries(),
        }
    }

    /// The valid entries as `(set, way, vpn, ctx)`, in (set, way) order.
    pub fn entries(&self) -> Vec<(usize, usize, u64, u64)> {
        match self {
            Engine::Lru(t) => t.entries_iter().collect(),
            Engine::Fifo(t) => t.entries_iter().collect(),
            Engine::General(t) => t.entries_iter().collect(),
        }
    }
}
