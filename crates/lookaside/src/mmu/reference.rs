//! A brute-force reference model of the software refill, for differential testing: Mach's
//! `tlb_miss` transcribed as plainly as possible, over the brute-force reference TLB
//! (`tlb/reference.rs`), with page states in a `BTreeMap`, the Context register's table base
//! recomputed from a `Vec` of address spaces on every miss, and no fast paths. A 64-bit
//! trace's addresses are placed on the MIPS segments by the rule of `addresses.rs` read as
//! written: a `BTreeMap` of blocks searched on every reference, the kernel classes scanned.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{FirstTouch, PlacementPolicy, ReadFaultMaps, RefillAddresses};
use crate::event::{Event, Kind, Mode, FLUSH_ALL, FLUSH_SPACE};
use crate::tlb::reference::RefTlb;
use crate::tlb::{Part, NO_CTX};

use super::refill::{HandlerWork, RefillParams};

const G: u64 = 1 << 41;
const D: u64 = 1 << 40;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum St {
    Invalid,
    Clean,
    Dirty,
}

/// The fold of a 64-bit trace's 4 MB blocks onto MIPS blocks, brute force: (space, trace
/// block) → MIPS block (`None`: none was free), in order of first sight; the kernel's space
/// is `u32::MAX`. The model of [`super::addresses`]'s fold, here and in its own tests.
#[derive(Default)]
pub(crate) struct PlainFold {
    blocks: BTreeMap<(u32, u64), Option<u64>>,
}

impl PlainFold {
    /// The MIPS block of `addr`'s 4 MB block in `space`: the first free one of `n` from the
    /// block's low bits on, taken the first time the block is seen.
    pub(crate) fn fold(&mut self, space: u32, addr: u64, n: u64) -> Option<u64> {
        let block = addr >> 22;
        if !self.blocks.contains_key(&(space, block)) {
            let taken: Vec<u64> = self
                .blocks
                .iter()
                .filter(|((s, _), _)| *s == space)
                .filter_map(|(_, b)| *b)
                .collect();
            let b = (0..n).map(|k| (block + k) % n).find(|b| !taken.contains(b));
            self.blocks.insert((space, block), b);
        }
        self.blocks[&(space, block)].map(|b| b << 22 | (addr & 0x3f_ffff))
    }
}

pub struct RefModel {
    pub tlb: RefTlb,
    levels: u8,
    tagged: bool,
    /// Partition per class L1U, L1K, L2, L3 (`None`: not partitioned).
    parts: Option<[Part; 4]>,
    first_touch: FirstTouch,
    read_dirty: bool,
    fold: bool,
    x86: bool,
    /// Kernel classes (x86-64): unmapped and mapped `[start, end)` ranges.
    unmapped_classes: Vec<(u64, u64)>,
    mapped_classes: Vec<(u64, u64)>,
    /// (space, trace block) → MIPS block (`None`: none was free), in order of first sight;
    /// the kernel's space is `u32::MAX`.
    blocks: PlainFold,
    split: bool,
    asid: u32,
    /// Address spaces in order of first appearance: the index is the page-table slot.
    spaces: Vec<u32>,
    /// (kernel page, asid, vpn) → state.
    pages: BTreeMap<(bool, u32, u64), St>,
    pub traps: [[u64; 6]; 3],
    pub handler: HandlerWork,
    pub address_errors: u64,
    pub accesses: u64,
    pub misses: u64,
    pub unmapped: u64,
    /// The micro-TLB for fetches, if any, whether it is tagged, and its accesses, misses and
    /// refills (misses the TLB served without a trap). It holds only entries the TLB holds:
    /// after every change to the TLB, brute force drops every copy the TLB no longer has.
    pub micro: Option<(RefTlb, bool)>,
    pub micro_counts: [u64; 3],
    /// With `three_c` (and an LRU or FIFO upper policy): the TLB's misses by class.
    pub classes: Option<Classes>,
    /// The micro-TLB's, likewise: its shadow loses what the micro-TLB is told to lose (every
    /// entry the TLB loses or rewrites, held or not), as any structure's shadow.
    pub micro_classes: Option<Classes>,
    /// The mode of the reference being translated: the TLB is told it when it fills that
    /// reference's own page (a page-table page's entry: kernel mode).
    filling: Mode,
}

/// The 3C classification of the TLB's misses, brute force: a fully associative list of its
/// size in recency (LRU) or arrival (FIFO) order, the pages ever referenced, and the counts
/// (compulsory, capacity, conflict). Pages are (page, context) with a user page's clean
/// context: the page, not its dirty bit.
pub struct Classes {
    entries: usize,
    lru: bool,
    /// Most recent (or newest) last.
    order: Vec<(u64, u64)>,
    seen: BTreeSet<(u64, u64)>,
    pub counts: [u64; 3],
}

impl Classes {
    fn new(entries: usize, policy: crate::tlb::Policy) -> Classes {
        Classes {
            entries,
            lru: policy == crate::tlb::Policy::Lru,
            order: Vec::new(),
            seen: BTreeSet::new(),
            counts: [0; 3],
        }
    }

    /// `(vpn, ctx)` is looked up in the list (moved to the end, or added, evicting the
    /// first); a miss of the TLB (`missed`) is classified: the list held it, conflict; it was
    /// referenced before, capacity; else compulsory (now referenced). Counted if `count`.
    fn access(&mut self, vpn: u64, ctx: u64, missed: bool, count: bool) {
        let at = self.order.iter().position(|&p| p == (vpn, ctx));
        let held = at.is_some();
        self.touch(vpn, ctx, at);
        if !missed {
            return;
        }
        let class = if held {
            2
        } else if self.seen.contains(&(vpn, ctx)) {
            1
        } else {
            self.seen.insert((vpn, ctx));
            0
        };
        if count {
            self.counts[class] += 1;
        }
    }

    fn touch(&mut self, vpn: u64, ctx: u64, at: Option<usize>) {
        match at {
            Some(i) if self.lru => {
                let p = self.order.remove(i);
                self.order.push(p);
            }
            Some(_) => {}
            None => {
                if self.order.len() == self.entries {
                    self.order.remove(0);
                }
                self.order.push((vpn, ctx));
            }
        }
    }

    fn invalidate(&mut self, vpn: u64, ctx: u64) {
        self.order.retain(|&p| p != (vpn, ctx));
    }

    /// Lose every entry but the global ones (an untagged structure's switch).
    fn keep_global(&mut self) {
        self.order.retain(|p| p.1 & G != 0);
    }
}

impl RefModel {
    pub fn new(p: &RefillParams) -> RefModel {
        let mut tp = p.tlb.clone();
        use Part::{Lower as L, Upper as U};
        let parts = match p.placement {
            PlacementPolicy::A => Some([U, U, L, U]),
            PlacementPolicy::B => Some([U, U, L, L]),
            PlacementPolicy::C => Some([U, L, L, L]),
            PlacementPolicy::D => {
                if let Some(q) = tp.partition.take() {
                    tp.policy = q.upper_policy;
                }
                None
            }
        };
        RefModel {
            tlb: RefTlb::new(&tp),
            levels: p.levels,
            tagged: p.tagged,
            parts,
            first_touch: p.first_touch,
            read_dirty: p.read_fault_maps == ReadFaultMaps::Dirty,
            fold: p.fold_user_addresses,
            x86: p.addresses == RefillAddresses::X86_64,
            unmapped_classes: Vec::new(),
            mapped_classes: Vec::new(),
            blocks: PlainFold::default(),
            split: p.split_straddles,
            asid: 0,
            spaces: vec![0],
            pages: BTreeMap::new(),
            traps: [[0; 6]; 3],
            handler: HandlerWork::default(),
            address_errors: 0,
            accesses: 0,
            misses: 0,
            unmapped: 0,
            micro: p.micro.as_ref().map(|q| (RefTlb::new(&q.tlb), q.tagged)),
            micro_counts: [0; 3],
            classes: (p.three_c && classifiable(tp.policy))
                .then(|| Classes::new(tp.entries, tp.policy)),
            micro_classes: p
                .micro
                .as_ref()
                .filter(|q| q.three_c && classifiable(q.tlb.policy))
                .map(|q| Classes::new(q.tlb.entries, q.tlb.policy)),
            filling: Mode::User,
        }
    }

    /// The micro-TLB is told to lose its copy of `(vpn, ctx)`: so is its shadow.
    fn micro_lost(&mut self, vpn: u64, ctx: u64) {
        if let Some(c) = &mut self.micro_classes {
            c.invalidate(vpn, ctx & !D);
        }
    }

    /// The micro-TLB (and its shadow) lose every entry that is not global.
    fn micro_lost_user(&mut self) {
        if let Some(c) = &mut self.micro_classes {
            c.keep_global();
        }
    }

    /// A look-up of the handlers through the TLB (a PTE's page): seen by the classes,
    /// unclassified.
    fn handler_lookup(&mut self, vpn: u64) -> bool {
        let hit = self.tlb.lookup(vpn, G, NO_CTX);
        if let Some(c) = &mut self.classes {
            c.access(vpn, G, !hit, false);
        }
        hit
    }

    /// Invalidate the TLB's entry of `vpn` with context `ctx` or `gctx`, and the classes'.
    fn invalidate(&mut self, vpn: u64, ctx: u64, gctx: u64) {
        self.tlb.invalidate(vpn, ctx, gctx);
        if let Some(c) = &mut self.classes {
            c.invalidate(vpn, ctx & !D);
            c.invalidate(vpn, gctx & !D);
        }
        self.micro_lost(vpn, ctx);
        self.micro_lost(vpn, gctx);
    }

    /// Drop from the micro-TLB every entry the TLB does not hold (with that context).
    fn sync_micro(&mut self) {
        let Some((micro, _)) = &mut self.micro else {
            return;
        };
        let held: Vec<(u64, u64)> = self.tlb.contents().iter().map(|e| (e.2, e.3)).collect();
        for (_, _, v, c) in micro.contents() {
            if !held.contains(&(v, c)) {
                micro.invalidate(v, c, NO_CTX);
            }
        }
    }

    /// The trace's kernel classes (x86-64).
    pub fn bind(&mut self, unmapped: &[(u64, u64)], mapped: &[(u64, u64)]) {
        self.unmapped_classes = unmapped.to_vec();
        self.mapped_classes = mapped.to_vec();
    }

    /// The MIPS block of `addr`'s 4 MB block in `space` (see [`PlainFold::fold`]).
    fn fold(&mut self, space: u32, addr: u64, n: u64) -> Option<u64> {
        self.blocks.fold(space, addr, n)
    }

    /// Where `addr` lands: (user page, unmapped, kseg2 address); `None`: an address error.
    fn place(&mut self, addr: u64, mode: Mode, asid: u32) -> Option<(Option<u64>, Option<u64>)> {
        let user = |a: Option<u64>| a.map(|a| (Some(a), None));
        let kernel = |a: u64| Some((None, Some(a)));
        let within = |a: u64, r: &[(u64, u64)]| r.iter().any(|&(s, e)| (s..e).contains(&a));
        if self.x86 {
            if addr < 1 << 63 {
                user(self.fold(asid, addr, 512))
            } else if within(addr, &self.unmapped_classes) {
                (mode == Mode::Kernel).then_some((None, None))
            } else if within(addr, &self.mapped_classes) {
                self.fold(u32::MAX, addr, 32)
                    .map(|a| (None, Some(0xC000_0000 + a)))
            } else {
                None
            }
        } else if addr < 0x8000_0000 && !self.fold {
            user(Some(addr))
        } else if self.fold && (mode == Mode::User || addr < 0x8000_0000) {
            user(self.fold(asid, addr, 512))
        } else if mode == Mode::User || addr >= 1 << 32 {
            None
        } else if addr < 0xC000_0000 {
            Some((None, None))
        } else {
            kernel(addr)
        }
    }

    fn base(&self, asid: u32) -> u64 {
        if self.tagged {
            asid as u64
        } else {
            0
        }
    }

    fn switch(&mut self, asid: u32) {
        if asid == self.asid {
            return;
        }
        if !self.tagged {
            self.tlb.flush_if(|_, c| c & G == 0);
            if let Some(c) = &mut self.classes {
                c.keep_global();
            }
            self.sync_micro();
            self.micro_lost_user();
        }
        if let Some((micro, false)) = &mut self.micro {
            micro.flush_if(|_, c| c & G == 0);
            self.micro_lost_user();
        }
        self.asid = asid;
        if !self.spaces.contains(&asid) {
            self.spaces.push(asid);
        }
    }

    pub fn event(&mut self, e: &Event) {
        if !e.kind.is_ref() {
            let mut e = *e;
            if (self.fold || self.x86) && e.kind != Kind::ContextSwitch && e.addr < FLUSH_SPACE {
                if let Some((u, k)) = self.place(e.addr, Mode::Kernel, e.asid) {
                    e.addr = u.or(k).unwrap_or(e.addr);
                }
            }
            let vpn = e.addr >> 12;
            match e.kind {
                Kind::ContextSwitch => self.switch(e.asid),
                Kind::TlbFlush if e.addr == FLUSH_ALL => {
                    self.tlb.flush_all();
                    if let Some(c) = &mut self.classes {
                        c.order.clear();
                    }
                    if let Some(c) = &mut self.micro_classes {
                        c.order.clear();
                    }
                    self.sync_micro();
                }
                Kind::TlbFlush if e.addr == FLUSH_SPACE => {
                    let (tagged, asid, running) = (self.tagged, e.asid, self.asid);
                    let of = move |c: u64| {
                        c & G == 0
                            && if tagged {
                                c as u32 == asid
                            } else {
                                asid == running
                            }
                    };
                    self.tlb.flush_if(|_, c| of(c));
                    for c in [&mut self.classes, &mut self.micro_classes]
                        .into_iter()
                        .flatten()
                    {
                        c.order.retain(|p| !of(p.1));
                    }
                    self.sync_micro();
                }
                Kind::TlbFlush | Kind::Map | Kind::Unmap | Kind::Protect => {
                    if e.addr < 0x8000_0000 {
                        let b = self.base(e.asid);
                        self.invalidate(vpn, b | D, b);
                    } else if (0xC000_0000..1 << 32).contains(&e.addr) {
                        self.invalidate(vpn, G, NO_CTX);
                    }
                    self.sync_micro();
                    let st = match e.kind {
                        Kind::Map => St::Dirty,
                        Kind::Unmap => St::Invalid,
                        Kind::Protect => St::Clean,
                        _ => return,
                    };
                    if e.addr < 0x8000_0000 {
                        self.pages.insert((false, e.asid, vpn), st);
                    } else if (0xC000_0000..0xC800_0000).contains(&e.addr) {
                        self.pages.insert((true, 0, vpn), st);
                    }
                }
                _ => {}
            }
            return;
        }
        self.switch(e.asid);
        self.page(e.addr, e.kind, e.mode);
        if self.split {
            // Every further 4 KiB page the access touches; one past 2^64 ends at the top.
            let last = e.addr.saturating_add(e.size.max(1) as u64 - 1);
            for vpn in (e.addr >> 12) + 1..=last >> 12 {
                self.page(vpn << 12, e.kind, e.mode);
            }
        }
    }

    fn page(&mut self, addr: u64, kind: Kind, mode: Mode) {
        let store = kind == Kind::Store;
        self.filling = mode;
        let placed = self.place(addr, mode, self.asid);
        // A fetch of a mapped page looks in the micro-TLB first.
        let key = match placed {
            Some((Some(a), _)) => Some((a >> 12, self.base(self.asid) | D, self.base(self.asid))),
            Some((None, Some(a))) => Some((a >> 12, G, NO_CTX)),
            _ => None,
        };
        let through_micro = match (key, &mut self.micro) {
            (Some((vpn, ctx, gctx)), Some((micro, _))) if kind == Kind::Fetch => {
                self.micro_counts[0] += 1;
                micro.set_mode(mode);
                let held = micro.lookup(vpn, ctx, gctx);
                if let Some(c) = &mut self.micro_classes {
                    c.access(vpn, ctx & !D, !held, true);
                }
                if held {
                    return;
                }
                self.micro_counts[1] += 1;
                true
            }
            _ => false,
        };
        let hit = match placed {
            None => {
                self.address_errors += 1;
                return;
            }
            Some((Some(a), _)) => self.user(a >> 12, store),
            Some((None, None)) => {
                self.unmapped += 1;
                return;
            }
            Some((None, Some(a))) => {
                if self.tlb.lookup(a >> 12, G, NO_CTX) {
                    true
                } else {
                    self.kernel_miss(a, 0);
                    false
                }
            }
        };
        self.accesses += 1;
        self.misses += !hit as u64;
        if let (Some(c), Some((vpn, ctx, _))) = (&mut self.classes, key) {
            c.access(vpn, ctx & !D, !hit, true);
        }
        if let (true, Some((vpn, ctx, gctx))) = (through_micro, key) {
            // Copy in the entry the TLB now holds for the page (an exact context first).
            let held = self.tlb.contents();
            let entry = [ctx, gctx]
                .iter()
                .filter(|&&c| c != NO_CTX)
                .find_map(|&c| held.iter().find(|e| (e.2, e.3) == (vpn, c)));
            let (micro, _) = self.micro.as_mut().expect("a micro-TLB");
            if let Some(&(_, _, v, c)) = entry {
                micro.fill(v, c, Part::Upper);
            }
            self.micro_counts[2] += hit as u64;
        }
    }

    fn trap(&mut self, t: usize, depth: usize) {
        self.traps[depth][t] += 1;
    }

    fn user(&mut self, vpn: u64, store: bool) -> bool {
        let b = self.base(self.asid);
        if self.tlb.lookup(vpn, b | D, NO_CTX) {
            return true;
        }
        if self.tlb.lookup(vpn, b, NO_CTX) {
            if store {
                self.modify(vpn);
            }
            return true;
        }
        // uTLB vector: L1U.
        self.trap(0, 0);
        let slot = self.spaces.iter().position(|&a| a == self.asid).unwrap() as u64;
        let pte = 0xC800_0000 + slot * (2 << 20) + vpn * 4;
        self.handler.pte_loads_mapped += 1;
        if !self.handler_lookup(pte >> 12) {
            self.kernel_miss(pte, 1);
            self.handler.pte_loads_mapped += 1;
            self.handler_lookup(pte >> 12);
        }
        let default = if self.first_touch == FirstTouch::None {
            St::Dirty
        } else {
            St::Invalid
        };
        let key = (false, self.asid, vpn);
        let mut st = *self.pages.get(&key).unwrap_or(&default);
        if st == St::Invalid {
            self.trap(5, 0);
            st = if store || self.read_dirty {
                St::Dirty
            } else {
                St::Clean
            };
            self.pages.insert(key, st);
        }
        self.fill(vpn, if st == St::Dirty { b | D } else { b }, 0);
        if store && st == St::Clean {
            self.modify(vpn);
        }
        false
    }

    fn modify(&mut self, vpn: u64) {
        self.trap(4, 0);
        let b = self.base(self.asid);
        self.tlb.retag(vpn, b, b | D);
        self.sync_micro();
        self.micro_lost(vpn, b);
        self.pages.insert((false, self.asid, vpn), St::Dirty);
    }

    fn kernel_miss(&mut self, addr: u64, depth: usize) {
        // Mach's tlb_miss: classify by address.
        let class = if addr < 0xC800_0000 {
            1
        } else if addr < 0xFFC0_0000 {
            2
        } else if self.levels == 3 {
            3
        } else {
            1
        };
        let trap = class; // L1K = 1, L2 = 2, L3 = 3 in both numberings
        self.trap(trap, depth);
        if class == 3 || self.levels == 2 {
            self.handler.pte_loads_unmapped += 1;
        } else {
            let q = 0xFFC0_0000 + (addr >> 12) * 4;
            self.handler.pte_loads_mapped += 1;
            if !self.handler_lookup(q >> 12) {
                self.kernel_miss(q, depth + 1);
            }
        }
        if class == 1 && depth == 0 && self.first_touch == FirstTouch::All {
            let key = (true, 0, addr >> 12);
            if matches!(self.pages.get(&key), None | Some(St::Invalid)) {
                self.trap(5, 0);
                self.pages.insert(key, St::Dirty);
            }
        }
        self.fill(addr >> 12, G, class);
    }

    fn fill(&mut self, vpn: u64, ctx: u64, class: usize) {
        let part = self.parts.map_or(Part::Upper, |p| p[class]);
        self.tlb
            .set_mode([self.filling, self.filling, Mode::Kernel, Mode::Kernel][class]);
        let evicted = self.tlb.fill(vpn, ctx, part);
        self.sync_micro();
        if let Some((v, c)) = evicted {
            self.micro_lost(v, c);
            let ev = if c & G == 0 {
                0
            } else if v < 0xC8000 {
                1
            } else if v < 0xFFC00 {
                2
            } else if self.levels == 3 {
                3
            } else {
                1
            };
            self.handler.evicted[ev] += 1;
        }
        self.handler.fills[class] += 1;
        if self.parts.is_some() && part == Part::Lower {
            self.handler.fills_lower += 1;
        }
    }
}

/// Whether [`Classes`] models a shadow of `policy` (LRU or FIFO: a random shadow draws from
/// its own generator, a user-first one keeps its entries' modes).
fn classifiable(policy: crate::tlb::Policy) -> bool {
    matches!(policy, crate::tlb::Policy::Lru | crate::tlb::Policy::Fifo)
}
