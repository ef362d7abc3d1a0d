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
use super::{filled, Part, Policy, SetIndex, Tlb, TlbParams, INDEX_MIN_WAYS, NO_CTX};

/// The tags of one way: `ctx == NO_CTX` marks it invalid. Kept together, so that a check
/// of a way is one bounds check and one cache line.
#[derive(Clone, Copy)]
struct Tag {
    vpn: u64,
    ctx: u64,
}

/// An unpartitioned LRU (`LRU = true`) or FIFO (`false`) TLB looked up with exact contexts,
/// through a hash index (`INDEXED`: sets of at least [`INDEX_MIN_WAYS`] ways) or a scan of
/// the set. Both choices are const parameters: each combination is compiled on its own, with
/// no test of either per access.
#[derive(Clone)]
pub struct ExactTlb<const LRU: bool, const INDEXED: bool> {
    tags: Vec<Tag>,
    /// Per set, recency (LRU) or fill (FIFO) order of its valid ways.
    order: Lists,
    /// Valid bit per way, `words` words per set (finds the lowest invalid way fast).
    valid_bits: Vec<u64>,
    words: usize,
    /// Valid ways per set.
    used: Vec<u32>,
    valid: usize,
    /// With `INDEXED`; else empty.
    index: WayIndex,
    sets: usize,
    ways: usize,
    set_index: SetIndex,
    params: TlbParams,
}

impl<const LRU: bool, const INDEXED: bool> ExactTlb<LRU, INDEXED> {
    /// An empty TLB of parameters `p`, which must be unpartitioned with the policy of `LRU`
    /// and, with `INDEXED`, at least [`INDEX_MIN_WAYS`] ways (fewer without).
    pub fn new(p: &TlbParams) -> Result<ExactTlb<LRU, INDEXED>, String> {
        p.check().map_err(|e| e.to_string())?;
        let want = if LRU { Policy::Lru } else { Policy::Fifo };
        assert!(
            p.partition.is_none() && p.policy == want && INDEXED == (p.ways >= INDEX_MIN_WAYS),
            "ExactTlb: unpartitioned {want}, indexed from {INDEX_MIN_WAYS} ways"
        );
        let (ways, sets) = (p.ways, p.entries / p.ways);
        let words = ways.div_ceil(64);
        Ok(ExactTlb {
            tags: filled(
                p.entries,
                Tag {
                    vpn: 0,
                    ctx: NO_CTX,
                },
            )?,
            order: Lists::new(sets, ways)?,
            valid_bits: filled(sets * words, 0)?,
            words,
            used: filled(sets, 0)?,
            valid: 0,
            index: WayIndex::new(if INDEXED { sets } else { 0 }, ways)?,
            sets,
            ways,
            set_index: SetIndex::new(sets),
            params: p.clone(),
        })
    }

    /// The set `vpn` maps to.
    #[inline(always)]
    fn set_of(&self, vpn: u64) -> usize {
        self.set_index.of(vpn)
    }

    /// The way of `set` holding `(vpn, ctx)`, and with the hash index the key's chain in it.
    #[inline(always)]
    fn find(&self, set: usize, vpn: u64, ctx: u64) -> (Option<usize>, usize) {
        let base = set * self.ways;
        if INDEXED {
            let chain = self.index.chain(set, vpn, ctx);
            let tags = &self.tags;
            let holds = |w: usize| {
                let t = tags[base + w];
                t.vpn == vpn && t.ctx == ctx
            };
            (self.index.find_by(chain, set, holds), chain)
        } else {
            let tags = &self.tags[base..base + self.ways];
            (tags.iter().position(|t| t.vpn == vpn && t.ctx == ctx), 0)
        }
    }

    /// Whether `(vpn, ctx)` is held, changing nothing.
    pub fn holds(&self, vpn: u64, ctx: u64) -> bool {
        self.find(self.set_of(vpn), vpn, ctx).0.is_some()
    }

    /// Look `(vpn, ctx)` up; on a miss fill it (into the lowest invalid way of its set, else
    /// in place of the policy's victim). Returns whether it hit.
    ///
    /// # Panics
    /// On a miss with `ctx == NO_CTX`, which is never stored.
    #[inline(always)]
    pub fn access(&mut self, vpn: u64, ctx: u64) -> bool {
        self.touch(vpn, ctx).1
    }

    /// [`ExactTlb::access`], which also says where the key now lives: its slot
    /// (`set * ways + way`, which never moves while it stays) and whether it hit.
    #[inline(always)]
    pub fn touch(&mut self, vpn: u64, ctx: u64) -> (usize, bool) {
        match self.probe(vpn, ctx) {
            Ok(slot) => (slot, true),
            Err((set, chain)) => (set * self.ways + self.fill_new(set, chain, vpn, ctx), false),
        }
    }

    /// The hit half of [`ExactTlb::touch`]: the slot of `(vpn, ctx)`, moved to the back of
    /// LRU's order; on a miss its set and chain, for the fill.
    #[inline(always)]
    fn probe(&mut self, vpn: u64, ctx: u64) -> Result<usize, (usize, usize)> {
        let set = self.set_of(vpn);
        let (found, chain) = self.find(set, vpn, ctx);
        match found {
            Some(way) => {
                if LRU {
                    self.order.move_to_back(set, way);
                }
                Ok(set * self.ways + way)
            }
            None => Err((set, chain)),
        }
    }

    /// [`ExactTlb::touch`] for a caller whose accesses mostly hit: the fill is out of line,
    /// so that a hit's path holds few registers.
    #[inline(always)]
    pub fn touch_mostly_hit(&mut self, vpn: u64, ctx: u64) -> (usize, bool) {
        match self.probe(vpn, ctx) {
            Ok(slot) => (slot, true),
            Err((set, chain)) => (
                set * self.ways + self.fill_cold(set, chain, vpn, ctx),
                false,
            ),
        }
    }

    /// [`ExactTlb::fill_new`], out of line.
    #[inline(never)]
    fn fill_cold(&mut self, set: usize, chain: usize, vpn: u64, ctx: u64) -> usize {
        self.fill_new(set, chain, vpn, ctx)
    }

    /// The slot of `(vpn, ctx)` if present, the hit updating the order as an access's
    /// does; a miss changes nothing.
    #[inline(always)]
    pub fn lookup(&mut self, vpn: u64, ctx: u64) -> Option<usize> {
        let set = self.set_of(vpn);
        let way = self.find(set, vpn, ctx).0?;
        if LRU {
            self.order.move_to_back(set, way);
        }
        Some(set * self.ways + way)
    }

    /// Put the new key `(vpn, ctx)`, whose chain in the hash index is `chain`, into `set`;
    /// returns its way.
    #[inline(always)]
    fn fill_new(&mut self, set: usize, chain: usize, vpn: u64, ctx: u64) -> usize {
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
            let w = wi * 64 + bit;
            self.order.move_to_back(set, w);
            w
        } else {
            // Every way is valid, so the list holds every way: the front is the victim, and
            // refilled it becomes the back (LRU: the most recent; FIFO: the newest).
            let w = self.order.rotate(set).unwrap_or(0);
            let old = std::mem::replace(&mut self.tags[base + w], Tag { vpn, ctx });
            if INDEXED {
                self.index.replace(set, w, old.vpn, old.ctx, chain);
            }
            return w;
        };
        self.tags[base + way] = Tag { vpn, ctx };
        if INDEXED {
            self.index.insert_in(chain, set, way);
        }
        way
    }

    /// Make the valid `way` of `set` invalid.
    fn remove(&mut self, set: usize, way: usize) {
        let slot = set * self.ways + way;
        if INDEXED {
            let old = self.tags[slot];
            self.index.remove(set, way, old.vpn, old.ctx);
        }
        self.tags[slot] = Tag {
            vpn: 0,
            ctx: NO_CTX,
        };
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
                let t = self.tags[set * self.ways + way];
                if t.ctx != NO_CTX && pred(t.vpn, t.ctx) {
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
        self.tags
            .iter()
            .enumerate()
            .filter(|&(_, t)| t.ctx != NO_CTX)
            .map(move |(i, t)| (i / ways, i % ways, t.vpn, t.ctx))
    }
}

/// A TLB as the machine holds it: the short path of [`ExactTlb`] when its parameters allow
/// (unpartitioned LRU or FIFO), else the general [`Tlb`]; chosen once, when it is built. The
/// machine looks up one exact context per access (`gctx = NO_CTX`), which both answer alike.
///
/// One per structure of a machine, so its size does not matter; boxing the general engine
/// would add a dependent load to every one of its accesses.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Engine {
    LruScan(ExactTlb<true, false>),
    LruIndexed(ExactTlb<true, true>),
    FifoScan(ExactTlb<false, false>),
    FifoIndexed(ExactTlb<false, true>),
    General(Tlb),
}

/// Runs `$e` with `$t` bound to the TLB of engine `$engine`, whichever its type.
macro_rules! each_engine {
    ($engine:expr, $t:ident => $e:expr) => {
        match $engine {
            Engine::LruScan($t) => $e,
            Engine::LruIndexed($t) => $e,
            Engine::FifoScan($t) => $e,
            Engine::FifoIndexed($t) => $e,
            Engine::General($t) => $e,
        }
    };
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("exact", &!matches!(self, Engine::General(_)))
            .field("params", self.params())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// The engine for parameters `p`; the error names the bad field.
    pub fn new(p: &TlbParams) -> Result<Engine, String> {
        let indexed = p.ways >= INDEX_MIN_WAYS;
        Ok(match (p.partition, p.policy, indexed) {
            (None, Policy::Lru, false) => Engine::LruScan(ExactTlb::new(p)?),
            (None, Policy::Lru, true) => Engine::LruIndexed(ExactTlb::new(p)?),
            (None, Policy::Fifo, false) => Engine::FifoScan(ExactTlb::new(p)?),
            (None, Policy::Fifo, true) => Engine::FifoIndexed(ExactTlb::new(p)?),
            _ => Engine::General(Tlb::new(p)?),
        })
    }

    /// The kind and mode of the reference the next accesses serve ([`Tlb::set_reference`]);
    /// the exact engines' policies (LRU, FIFO) read neither.
    #[inline(always)]
    pub fn set_reference(&mut self, kind: crate::event::Kind, mode: crate::event::Mode) {
        if let Engine::General(t) = self {
            t.set_reference(kind, mode);
        }
    }

    /// [`Tlb::access`] with `gctx = NO_CTX`: look up `(vpn, ctx)`, fill it (into `part`, when
    /// partitioned) on a miss; returns whether it hit.
    #[inline(always)]
    pub fn access(&mut self, vpn: u64, ctx: u64, part: Part) -> bool {
        match self {
            Engine::LruScan(t) => t.access(vpn, ctx),
            Engine::LruIndexed(t) => t.access(vpn, ctx),
            Engine::FifoScan(t) => t.access(vpn, ctx),
            Engine::FifoIndexed(t) => t.access(vpn, ctx),
            Engine::General(t) => t.access(vpn, ctx, NO_CTX, part),
        }
    }

    /// Whether `(vpn, ctx)` is held, changing nothing (a probe, as MIPS `tlbp`).
    pub fn holds(&self, vpn: u64, ctx: u64) -> bool {
        match self {
            Engine::General(t) => t.probe(vpn, ctx, NO_CTX).is_some(),
            Engine::LruScan(t) => t.holds(vpn, ctx),
            Engine::LruIndexed(t) => t.holds(vpn, ctx),
            Engine::FifoScan(t) => t.holds(vpn, ctx),
            Engine::FifoIndexed(t) => t.holds(vpn, ctx),
        }
    }

    /// [`Tlb::invalidate`] with `gctx = NO_CTX`.
    pub fn invalidate(&mut self, vpn: u64, ctx: u64) -> bool {
        match self {
            Engine::General(t) => t.invalidate(vpn, ctx, NO_CTX),
            Engine::LruScan(t) => t.invalidate(vpn, ctx),
            Engine::LruIndexed(t) => t.invalidate(vpn, ctx),
            Engine::FifoScan(t) => t.invalidate(vpn, ctx),
            Engine::FifoIndexed(t) => t.invalidate(vpn, ctx),
        }
    }

    /// [`Tlb::flush_if`].
    pub fn flush_if(&mut self, pred: impl FnMut(u64, u64) -> bool) -> usize {
        each_engine!(self, t => t.flush_if(pred))
    }

    /// [`Tlb::flush_all`].
    pub fn flush_all(&mut self) {
        each_engine!(self, t => t.flush_all())
    }

    /// [`Tlb::repartition`]; an error for an engine with no partition.
    pub fn repartition(&mut self, lower_ways: usize) -> Result<(), super::ParamError> {
        match self {
            Engine::General(t) => t.repartition(lower_ways),
            _ => Err(super::no_partition()),
        }
    }

    /// The parameters it holds now (a partition point may have moved).
    pub fn params(&self) -> &TlbParams {
        match self {
            Engine::General(t) => t.params(),
            Engine::LruScan(t) => &t.params,
            Engine::LruIndexed(t) => &t.params,
            Engine::FifoScan(t) => &t.params,
            Engine::FifoIndexed(t) => &t.params,
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
        each_engine!(self, t => t.valid_entries())
    }

    /// The valid entries as `(set, way, vpn, ctx)`, in (set, way) order.
    pub fn entries(&self) -> Vec<(usize, usize, u64, u64)> {
        each_engine!(self, t => t.entries_iter().collect())
    }
}
