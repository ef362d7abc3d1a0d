//! The machine's common TLB, simulated on a short path: unpartitioned, replaced by LRU or
//! FIFO, and looked up with one exact context (the machine never passes a second, global
//! one: a global entry is a context tag of its own).
//!
//! It behaves exactly as a [`Tlb`](super::Tlb) of the same parameters driven with
//! `gctx = NO_CTX` (same hits, same victims, same contents in the same ways: see the module
//! documentation there), and is tested against the same reference model. What it leaves out
//! is what those parameters never need, and what made a miss cost several times a hit:
//!
//! * no MRU entry or hints: a lookup is a scan of the set or a walk of one hash chain, about
//!   what checking a hint costs, and a miss has no hint to check first and none to record;
//! * no second context, no partitions, no policy dispatch: LRU and FIFO keep one list per set
//!   (a hit of LRU moves its way to the back, a fill moves it to the back, the victim is the
//!   front, an invalidation unlinks), the choice of policy a const parameter of the type, so
//!   that each path is compiled once per policy;
//! * a way's tags, chain link and list links in one record (`Node`), and the chain it is on
//!   recorded there: a miss's victim leaves its chain without its key being hashed again.
//!
//! [`Engine`] holds either this or the general [`Tlb`], chosen once when the machine is built.

use super::index::{unlink, NIL};
use super::{filled, Part, Policy, SetIndex, Tlb, TlbParams, INDEX_MIN_WAYS, NO_CTX};

/// One way of a set, or a set's sentinel: its tags, its link in its hash chain and its links
/// in the set's recency (LRU) or fill (FIFO) list, in one record of 32 bytes, so that a miss
/// — look up, take the victim, unlink it from its chain, refill — touches one or two cache
/// lines per node instead of one in each of four arrays, and the victim's chain is read, not
/// hashed again.
///
/// A way's node number is its slot (`set * ways + way`); the sentinels follow every way
/// (`entries + set`); links and chains hold node numbers. Each set's list is circular through
/// its sentinel (its `next` the oldest way, its `prev` the newest), so that linking and
/// unlinking need no branches; a node in no list points to itself.
#[derive(Clone, Copy)]
struct Node {
    vpn: u64,
    /// [`NO_CTX`] marks an invalid way, and every sentinel.
    ctx: u64,
    /// The next node of this valid way's hash chain, or [`NIL`] (with `INDEXED` only).
    chain: u32,
    /// A valid way's chain: its position in `head` (with `INDEXED`). A sentinel: how many
    /// ways of its set are valid.
    aux: u32,
    prev: u32,
    next: u32,
}

/// The nodes of an [`ExactTlb`] for the hot path: see [`ExactTlb::nodes_ptr`].
#[derive(Clone, Copy)]
struct Nodes {
    p: *mut Node,
    #[cfg(debug_assertions)]
    len: usize,
}

impl Nodes {
    /// Node `i`, which must be one of the engine's (see [`ExactTlb::nodes_ptr`]).
    #[inline(always)]
    fn get(self, i: usize) -> Node {
        #[cfg(debug_assertions)]
        assert!(i < self.len, "node {i} of {}", self.len);
        // SAFETY: `i` is in bounds (see `ExactTlb::nodes_ptr`), and the engine, borrowed
        // mutably for the call that made `self`, holds no other reference to it.
        unsafe { *self.p.add(i) }
    }

    /// Change node `i`, which must be one of the engine's, by `f`.
    #[inline(always)]
    fn with(self, i: usize, f: impl FnOnce(&mut Node)) {
        #[cfg(debug_assertions)]
        assert!(i < self.len, "node {i} of {}", self.len);
        // SAFETY: as for `get`; the reference lives only for `f`.
        f(unsafe { &mut *self.p.add(i) })
    }
}

/// An unpartitioned LRU (`LRU = true`) or FIFO (`false`) TLB looked up with exact contexts,
/// through a hash index (`INDEXED`: sets of at least [`INDEX_MIN_WAYS`] ways) or a scan of
/// the set. Both choices are const parameters: each combination is compiled on its own, with
/// no test of either per access.
///
/// The hash index: per set a table of chain heads, a power of two at least
/// [`super::index::LOAD`] times the ways (most misses find an empty chain), a key's chain the
/// top bits of its Fibonacci hash; a fill pushes its way on the front of its chain, a removal
/// unlinks it from the chain its node records. Nothing ever moves.
#[derive(Clone)]
pub struct ExactTlb<const LRU: bool, const INDEXED: bool> {
    /// Every set's ways, in slot order, then every set's sentinel.
    nodes: Vec<Node>,
    /// With `INDEXED`, `size` chain heads per set (node numbers or [`NIL`]); else empty.
    head: Vec<u32>,
    /// Chain heads per set, a power of two.
    size: usize,
    /// `64 - log2(size)`: a hash's top `log2(size)` bits are its chain.
    shift: u32,
    /// Valid bit per way, `words` words per set (finds the lowest invalid way fast).
    valid_bits: Vec<u64>,
    words: usize,
    valid: usize,
    sets: usize,
    ways: usize,
    /// `sets * ways`: the first sentinel's node.
    entries: usize,
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
        assert!(p.entries + sets < NIL as usize, "too many TLB nodes");
        let mut nodes = filled(
            p.entries + sets,
            Node {
                vpn: 0,
                ctx: NO_CTX,
                chain: NIL,
                aux: 0,
                prev: 0,
                next: 0,
            },
        )?;
        for (i, n) in nodes.iter_mut().enumerate() {
            (n.prev, n.next) = (i as u32, i as u32);
        }
        let size = (super::index::LOAD * ways).next_power_of_two().max(2);
        Ok(ExactTlb {
            nodes,
            head: filled(if INDEXED { sets * size } else { 0 }, NIL)?,
            size,
            shift: 64 - size.trailing_zeros(),
            valid_bits: filled(sets * ways.div_ceil(64), 0)?,
            words: ways.div_ceil(64),
            valid: 0,
            sets,
            ways,
            entries: p.entries,
            set_index: SetIndex::new(sets),
            params: p.clone(),
        })
    }

    /// An engine of one set of the fewest ways this lookup takes, empty: what a loop that
    /// takes an engine out of its [`Engine`] for a while leaves in its place. Nothing accesses
    /// it there, and an access would be as safe as any other: it is a whole engine.
    pub fn spare() -> ExactTlb<LRU, INDEXED> {
        let ways = if INDEXED { INDEX_MIN_WAYS } else { 1 };
        let policy = if LRU { Policy::Lru } else { Policy::Fifo };
        ExactTlb::new(&TlbParams::new(ways, ways, policy)).expect("a spare engine of one set")
    }

    /// The engine `engine` holds, if it is one of this policy and lookup: so that a loop made
    /// for one engine reaches it with no dispatch per access.
    pub fn lend(engine: &mut Engine) -> Option<&mut ExactTlb<LRU, INDEXED>> {
        let any: &mut dyn std::any::Any = match engine {
            Engine::LruScan(t) => t,
            Engine::LruIndexed(t) => t,
            Engine::FifoScan(t) => t,
            Engine::FifoIndexed(t) => t,
            Engine::General(_) => return None,
        };
        any.downcast_mut()
    }

    /// The set `vpn` maps to.
    #[inline(always)]
    fn set_of(&self, vpn: u64) -> usize {
        self.set_index.of(vpn)
    }

    /// The node of `set`'s sentinel.
    #[inline(always)]
    fn sentinel(&self, set: usize) -> usize {
        self.entries + set
    }

    /// The nodes, as a pointer for the hot path's unchecked reads and writes ([`Nodes`]).
    ///
    /// Every node number the engine computes or stores is below `nodes.len()`: a way's slot
    /// is `set * ways + way` and a sentinel `entries + set`, with `set` below `sets`
    /// ([`SetIndex::of`]); a node's links start at its own number ([`ExactTlb::new`],
    /// [`ExactTlb::remove`]) and only ever take the numbers of other nodes; a chain link is a
    /// way's slot or [`NIL`], which is never followed. So the hot path indexes without bounds
    /// checks (and without reloading the vector's place after every store), each index
    /// checked in debug builds, where the reference-model tests run.
    #[inline(always)]
    fn nodes_ptr(&mut self) -> Nodes {
        Nodes {
            p: self.nodes.as_mut_ptr(),
            #[cfg(debug_assertions)]
            len: self.nodes.len(),
        }
    }

    /// The chain of (vpn, ctx) in `set`: the context rotated out of the way of typical page
    /// numbers, then a Fibonacci hash (the mix of [`super::index::WayIndex`]).
    #[inline(always)]
    fn chain(&self, set: usize, vpn: u64, ctx: u64) -> usize {
        let h = (vpn ^ ctx.rotate_left(44)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift;
        set * self.size + h as usize
    }

    /// The node of `set` holding `(vpn, ctx)`, and with the hash index the key's chain.
    #[inline(always)]
    fn find(&self, set: usize, vpn: u64, ctx: u64) -> (Option<usize>, usize) {
        if INDEXED {
            let chain = self.chain(set, vpn, ctx);
            let mut w = self.head[chain];
            while w != NIL {
                debug_assert!((w as usize) < self.nodes.len());
                // SAFETY: a chain holds ways' slots (see `nodes_ptr`).
                let n = unsafe { self.nodes.get_unchecked(w as usize) };
                if n.vpn == vpn && n.ctx == ctx {
                    return (Some(w as usize), chain);
                }
                w = n.chain;
            }
            (None, chain)
        } else {
            let base = set * self.ways;
            let ways = &self.nodes[base..base + self.ways];
            // A loop that returns (not `position`, which the compiler unrolls for 32-byte
            // nodes at a cost of more than it saves on a few ways).
            for (w, n) in ways.iter().enumerate() {
                if n.vpn == vpn && n.ctx == ctx {
                    return (Some(base + w), 0);
                }
            }
            (None, 0)
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
            Err((set, chain)) => (self.fill_new(set, chain, vpn, ctx), false),
        }
    }

    /// The hit half of [`ExactTlb::touch`]: the slot of `(vpn, ctx)`, moved to the back of
    /// LRU's order; on a miss its set and chain, for the fill.
    #[inline(always)]
    fn probe(&mut self, vpn: u64, ctx: u64) -> Result<usize, (usize, usize)> {
        let set = self.set_of(vpn);
        let (found, chain) = self.find(set, vpn, ctx);
        match found {
            Some(i) => {
                if LRU {
                    self.make_newest(set, i);
                }
                Ok(i)
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
            Err((set, chain)) => (self.fill_cold(set, chain, vpn, ctx), false),
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
        let i = self.find(set, vpn, ctx).0?;
        if LRU {
            self.make_newest(set, i);
        }
        Some(i)
    }

    /// Make node `i` the newest of `set`'s list, wherever it was (or wasn't) before.
    /// Branch-free: moving the newest node unlinks and relinks it in place.
    #[inline(always)]
    fn make_newest(&mut self, set: usize, i: usize) {
        let s = self.sentinel(set);
        let n = self.nodes_ptr();
        let (p, x) = (n.get(i).prev, n.get(i).next);
        n.with(p as usize, |m| m.next = x);
        n.with(x as usize, |m| m.prev = p);
        let last = n.get(s).prev;
        n.with(last as usize, |m| m.next = i as u32);
        n.with(i, |m| (m.prev, m.next) = (last, s as u32));
        n.with(s, |m| m.prev = i as u32);
    }

    /// Put the new key `(vpn, ctx)`, whose chain in the hash index is `chain`, into `set`;
    /// returns its slot.
    #[inline(always)]
    fn fill_new(&mut self, set: usize, chain: usize, vpn: u64, ctx: u64) -> usize {
        assert!(
            ctx != NO_CTX,
            "ExactTlb::access: NO_CTX is not a storable context"
        );
        let s = self.sentinel(set);
        let n = self.nodes_ptr();
        let i = if (n.get(s).aux as usize) < self.ways {
            let bits = &mut self.valid_bits[set * self.words..(set + 1) * self.words];
            let mut wi = 0;
            while bits[wi] == !0 {
                wi += 1;
            }
            let bit = (!bits[wi]).trailing_zeros() as usize;
            bits[wi] |= 1 << bit;
            n.with(s, |m| m.aux += 1);
            self.valid += 1;
            let i = set * self.ways + wi * 64 + bit;
            self.make_newest(set, i);
            i
        } else {
            // Every way is valid, so the list holds every way: the front is the victim, and
            // refilled it becomes the back (LRU: the most recent; FIFO: the newest). The
            // sentinel steps from before it to after it.
            let f = n.get(s).next as usize;
            let after = n.get(f).next as usize;
            if after != s {
                let l = n.get(s).prev as usize;
                n.with(l, |m| m.next = f as u32);
                n.with(f, |m| (m.prev, m.next) = (l as u32, s as u32));
                n.with(s, |m| (m.prev, m.next) = (f as u32, after as u32));
                n.with(after, |m| m.prev = s as u32);
            }
            if INDEXED {
                self.unchain(f);
            }
            f
        };
        let hb = if INDEXED { self.head[chain] } else { NIL };
        n.with(i, |m| {
            (m.vpn, m.ctx) = (vpn, ctx);
            if INDEXED {
                (m.chain, m.aux) = (hb, chain as u32);
            }
        });
        if INDEXED {
            self.head[chain] = i as u32;
        }
        i
    }

    /// Take the valid node `i` out of its hash chain (with `INDEXED`).
    #[inline(always)]
    fn unchain(&mut self, i: usize) {
        let chain = self.nodes[i].aux as usize;
        unlink(&mut self.head[chain], &mut self.nodes, i, |n| &mut n.chain);
    }

    /// Make the valid node `i` of `set` invalid.
    fn remove(&mut self, set: usize, i: usize) {
        if INDEXED {
            self.unchain(i);
        }
        let way = i - set * self.ways;
        self.valid_bits[set * self.words + way / 64] &= !(1 << (way % 64));
        let s = self.sentinel(set);
        self.nodes[s].aux -= 1;
        self.valid -= 1;
        let n = &mut self.nodes;
        let (p, x) = (n[i].prev, n[i].next);
        n[p as usize].next = x;
        n[x as usize].prev = p;
        n[i] = Node {
            vpn: 0,
            ctx: NO_CTX,
            chain: NIL,
            aux: 0,
            prev: i as u32,
            next: i as u32,
        };
    }

    /// Remove `(vpn, ctx)`; returns whether it was present.
    pub fn invalidate(&mut self, vpn: u64, ctx: u64) -> bool {
        let set = self.set_of(vpn);
        match self.find(set, vpn, ctx).0 {
            Some(i) => {
                self.remove(set, i);
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
            if self.nodes[self.sentinel(set)].aux == 0 {
                continue;
            }
            for i in set * self.ways..(set + 1) * self.ways {
                let t = self.nodes[i];
                if t.ctx != NO_CTX && pred(t.vpn, t.ctx) {
                    self.remove(set, i);
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
        self.nodes[..self.entries]
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
