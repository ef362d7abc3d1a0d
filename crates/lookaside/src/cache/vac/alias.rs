//! The operating system above a virtually addressed cache: mappings of physical frames into
//! address spaces, the policy that keeps the aliases of a frame consistent, and the VM
//! primitives, each priced from the lines it actually finds in the cache.
//!
//! # Aliases and classes
//!
//! An *alias* is one address a frame can be reached through: a virtual page of an address
//! space, or the frame's own physical address ([`PHYS`]: accesses with translation off, or
//! through a kernel window that is indexed physically). Aliases whose page colours agree
//! share cache lines (the hardware resolves them); aliases of different colours do not.
//!
//! The consistency software reasons in *classes* of aliases that share lines: with
//! [`AliasPolicy::equivalent_mapping`] it knows about colours, and a class is every alias of
//! one colour; without it, every alias is its own class (the software then flushes even
//! between aliases that happen to be aligned, which is correct, only slower).
//!
//! # Pseudo-aliasing (Inouye et al. §3)
//!
//! At most one class of a frame is *live* — has lines in the cache, and translations the
//! hardware may use. Every other mapping is kept *dormant*: its page-table entry is invalid but
//! remembered, so touching it raises a *pseudo page fault* that revives it. Making a class
//! live (a new eager mapping, a pseudo page fault, a physical access) first makes every other
//! live class dormant: its TLB entries are purged and its lines *flushed* (written back and
//! invalidated). Unmapping a live alias flushes its lines, or *purges* them (invalidates
//! without writing back) when [`AliasPolicy::purge_dead`] is set and the caller says the
//! content is dead (the frame is being destroyed). Changing a mapping flushes the old one.
//!
//! *Read-only aliasing* lets several classes be live at once when every live alias is
//! read-only; their lines are then clean, so making one of them writable only *purges* the
//! others. The software knows a class is clean when no writable alias of it has been live
//! since its last flush (a per-class dirty mark, as the TLB's dirty bit would tell it).
//!
//! # Invariants (checked by the consistency oracle in `tests.rs`)
//!
//! Under any consistent policy (anything but [`Consistency::None`]):
//! * lines of a frame exist in the cache only for its live classes;
//! * if two classes of a frame are live, every live alias is read-only and no line of the frame
//!   is dirty.
//!
//! Together they mean no access ever reads a stale line, and memory is current for every line
//! no live class holds dirty.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use super::timing::Timing;
use super::{Lines, Vac, VacCounts, VacParams, MAX_PADDR};
use crate::event::{flags, Event, Kind, NO_PADDR};

/// An address-space id.
pub type Asid = u32;

/// The pseudo address space of physical accesses: the alias `(PHYS, frame)` of every frame.
pub const PHYS: Asid = u32::MAX;

/// Whether software keeps aliases consistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Consistency {
    /// Nothing: mappings are made and removed with no flush. Stale data is possible (what
    /// the oracle must catch), except on a physically indexed cache, where it needs nothing.
    None,
    /// Pseudo-aliasing: one live class per frame (see the module documentation).
    PseudoAliasing,
}

/// How the OS keeps the aliases of a frame consistent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct AliasPolicy {
    pub consistency: Consistency,
    /// Purge rather than flush the lines of a page whose content is dead (unmapped to be
    /// destroyed, or freed). Chorus v3.3 always flushes.
    pub purge_dead: bool,
    /// Let read-only aliases of different colours be live together.
    pub read_only_aliasing: bool,
    /// Treat aliases of one page colour as one class: no flush between equivalently mapped
    /// aliases.
    pub equivalent_mapping: bool,
}

impl AliasPolicy {
    /// Pseudo-aliasing as in the Chorus v3.3 nucleus: always flush, no read-only aliasing, no
    /// use of colours.
    pub fn chorus() -> AliasPolicy {
        AliasPolicy {
            consistency: Consistency::PseudoAliasing,
            purge_dead: false,
            read_only_aliasing: false,
            equivalent_mapping: false,
        }
    }

    /// No consistency management.
    pub fn none() -> AliasPolicy {
        AliasPolicy {
            consistency: Consistency::None,
            ..AliasPolicy::chorus()
        }
    }

    /// A policy from its name: `none`, or `pseudo-aliasing` followed by any of `+purge`,
    /// `+read-only`, `+equivalent` (e.g. `pseudo-aliasing+purge+equivalent`).
    pub fn parse(name: &str) -> Result<AliasPolicy, String> {
        let mut parts = name.split('+');
        let mut p = match parts.next().unwrap_or("") {
            "none" => AliasPolicy::none(),
            "pseudo-aliasing" => AliasPolicy::chorus(),
            other => {
                return Err(format!(
                    "alias policy: '{other}' is not 'none' or 'pseudo-aliasing'"
                ))
            }
        };
        for opt in parts {
            match opt {
                "purge" => p.purge_dead = true,
                "read-only" => p.read_only_aliasing = true,
                "equivalent" => p.equivalent_mapping = true,
                _ => {
                    return Err(format!(
                        "alias policy: option '{opt}' is not purge, read-only or equivalent"
                    ))
                }
            }
        }
        if p.consistency == Consistency::None && p != AliasPolicy::none() {
            return Err("alias policy: 'none' takes no options".into());
        }
        Ok(p)
    }

    /// The name [`AliasPolicy::parse`] reads back.
    pub fn name(&self) -> String {
        if self.consistency == Consistency::None {
            return "none".into();
        }
        let mut s = String::from("pseudo-aliasing");
        for (on, opt) in [
            (self.purge_dead, "+purge"),
            (self.read_only_aliasing, "+read-only"),
            (self.equivalent_mapping, "+equivalent"),
        ] {
            if on {
                s.push_str(opt);
            }
        }
        s
    }
}

/// An address: virtual (address space, address) or physical.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum At {
    Virt(Asid, u64),
    Phys(u64),
}

impl At {
    /// The same address `bytes` further on.
    pub fn offset(self, bytes: u64) -> At {
        match self {
            At::Virt(a, v) => At::Virt(a, v + bytes),
            At::Phys(p) => At::Phys(p + bytes),
        }
    }
}

/// One alias: address space and page address ([`PHYS`] and the frame address for the
/// physical one).
type Alias = (Asid, u64);

/// A class of aliases that share lines, as the consistency software sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Class {
    Colour(u64),
    Alias(Alias),
}

#[derive(Clone, Copy, Debug)]
struct Mapping {
    /// Frame (physical page address).
    frame: u64,
    writable: bool,
    /// Usable by the hardware; false = dormant (a touch raises a pseudo page fault).
    live: bool,
}

#[derive(Clone, Debug, Default)]
struct Frame {
    /// Aliases mapping the frame, in the order they were made.
    aliases: Vec<Alias>,
    /// Classes a writable alias has been live in since they were last flushed.
    dirty: Vec<Class>,
}

/// What the primitives did, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct VmCounts {
    pub maps: u64,
    pub unmaps: u64,
    pub remaps: u64,
    pub protects: u64,
    pub copies: u64,
    pub zeros: u64,
    pub page_allocs: u64,
    pub page_frees: u64,
    pub loads: u64,
    pub stores: u64,
    pub pseudo_faults: u64,
    pub tlb_purges: u64,
    /// Flush calls and the lines they visited, found and wrote back.
    pub flush_calls: u64,
    pub flushed: Lines,
    /// Purge calls and the lines they visited, found and discarded.
    pub purge_calls: u64,
    pub purged: Lines,
    /// Misses of loads, stores, copies and zeroing, and the dirty victims they wrote back.
    pub misses: u64,
    pub writebacks: u64,
}

impl VmCounts {
    /// What was counted since `earlier` (counts of the same machine, taken before).
    pub fn since(&self, earlier: &VmCounts) -> VmCounts {
        let l = |x: Lines, y: Lines| Lines {
            visited: x.visited - y.visited,
            present: x.present - y.present,
            dirty: x.dirty - y.dirty,
        };
        let (a, b) = (self, earlier);
        VmCounts {
            maps: a.maps - b.maps,
            unmaps: a.unmaps - b.unmaps,
            remaps: a.remaps - b.remaps,
            protects: a.protects - b.protects,
            copies: a.copies - b.copies,
            zeros: a.zeros - b.zeros,
            page_allocs: a.page_allocs - b.page_allocs,
            page_frees: a.page_frees - b.page_frees,
            loads: a.loads - b.loads,
            stores: a.stores - b.stores,
            pseudo_faults: a.pseudo_faults - b.pseudo_faults,
            tlb_purges: a.tlb_purges - b.tlb_purges,
            flush_calls: a.flush_calls - b.flush_calls,
            flushed: l(a.flushed, b.flushed),
            purge_calls: a.purge_calls - b.purge_calls,
            purged: l(a.purged, b.purged),
            misses: a.misses - b.misses,
            writebacks: a.writebacks - b.writebacks,
        }
    }
}

impl std::ops::AddAssign for VmCounts {
    fn add_assign(&mut self, o: VmCounts) {
        self.maps += o.maps;
        self.unmaps += o.unmaps;
        self.remaps += o.remaps;
        self.protects += o.protects;
        self.copies += o.copies;
        self.zeros += o.zeros;
        self.page_allocs += o.page_allocs;
        self.page_frees += o.page_frees;
        self.loads += o.loads;
        self.stores += o.stores;
        self.pseudo_faults += o.pseudo_faults;
        self.tlb_purges += o.tlb_purges;
        self.flush_calls += o.flush_calls;
        self.flushed += o.flushed;
        self.purge_calls += o.purge_calls;
        self.purged += o.purged;
        self.misses += o.misses;
        self.writebacks += o.writebacks;
    }
}

/// One VM primitive or access, as a workload or a trace drives a [`VacVm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    /// Map the page at `va` of `asid` to the frame `frame`; `eager` makes the mapping live at
    /// once (flushing other classes), else the first touch takes a pseudo page fault.
    Map {
        asid: Asid,
        va: u64,
        frame: u64,
        writable: bool,
        eager: bool,
    },
    /// Remove a mapping; `dead` says the frame's content no longer matters (it is about to
    /// be destroyed), which lets a purging policy purge instead of flush.
    Unmap {
        asid: Asid,
        va: u64,
        dead: bool,
    },
    /// Point an existing mapping at another frame (flushing the old one's lines).
    Remap {
        asid: Asid,
        va: u64,
        frame: u64,
    },
    /// Change a mapping's protection.
    Protect {
        asid: Asid,
        va: u64,
        writable: bool,
    },
    /// Make an alias dormant (flush its lines, purge its TLB entry) without removing it.
    Unload {
        at: At,
    },
    Load {
        at: At,
    },
    /// Store `value` (an opaque version number, kept when the cache tracks data).
    Store {
        at: At,
        value: u64,
    },
    /// Copy one page.
    CopyPage {
        src: At,
        dst: At,
    },
    /// Zero one page.
    ZeroPage {
        dst: At,
    },
    /// Return a frame to the free pool (its physical alias is flushed, or purged).
    Free {
        frame: u64,
    },
}

impl Op {
    /// The primitive an engine event stands for, if any: loads, fetches and stores, maps (to
    /// `paddr`; writable and lazy unless the event's [`flags`] say read-only or eager),
    /// unmaps (of a dead page with [`flags::UNMAP_DEAD`]) and protection changes. Other
    /// control events return `None` (a machine's `[vac]` drives the rest: see
    /// [`super::drive`]).
    pub fn from_event(e: &Event) -> Result<Option<Op>, String> {
        let at = At::Virt(e.asid, e.addr);
        Ok(Some(match e.kind {
            Kind::Fetch | Kind::Load => Op::Load { at },
            Kind::Store => Op::Store { at, value: 0 },
            Kind::Map => {
                if e.paddr == NO_PADDR {
                    return Err(format!(
                        "map event of page {:#x} (asid {}): paddr: no frame given",
                        e.addr, e.asid
                    ));
                }
                Op::Map {
                    asid: e.asid,
                    va: e.addr,
                    frame: e.paddr,
                    writable: e.size & flags::MAP_READ_ONLY == 0,
                    eager: e.size & flags::MAP_EAGER != 0,
                }
            }
            Kind::Unmap => Op::Unmap {
                asid: e.asid,
                va: e.addr,
                dead: e.size & flags::UNMAP_DEAD != 0,
            },
            Kind::Protect => Op::Protect {
                asid: e.asid,
                va: e.addr,
                writable: e.size & flags::PROTECT_WRITABLE != 0,
            },
            _ => return Ok(None),
        }))
    }
}

/// What a load or store did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touch {
    pub hit: bool,
    pub pseudo_fault: bool,
    /// The value the line holds after the access (what a load read).
    pub value: u64,
}

/// A virtually addressed cache with the OS that keeps it consistent (see the module
/// documentation); every primitive returns its cost in microseconds and adds it to
/// [`VacVm::elapsed_us`].
#[derive(Clone, Debug)]
pub struct VacVm {
    vac: Vac,
    policy: AliasPolicy,
    timing: Timing,
    maps: HashMap<Alias, Mapping>,
    frames: HashMap<u64, Frame>,
    /// Frames handed out and not yet freed (by frame number).
    used: BTreeSet<u64>,
    counts: VmCounts,
    elapsed_us: f64,
}

impl VacVm {
    /// An empty machine; the error names the cache parameter that is wrong.
    pub fn new(params: &VacParams, policy: AliasPolicy, timing: Timing) -> Result<VacVm, String> {
        timing.check()?;
        Ok(VacVm {
            vac: Vac::new(params)?,
            policy,
            timing,
            maps: HashMap::new(),
            frames: HashMap::new(),
            used: BTreeSet::new(),
            counts: VmCounts::default(),
            elapsed_us: 0.0,
        })
    }

    pub fn vac(&self) -> &Vac {
        &self.vac
    }

    /// The cache, for experiments that set up a cache state directly (its changes are not
    /// charged).
    pub fn vac_mut(&mut self) -> &mut Vac {
        &mut self.vac
    }

    pub fn policy(&self) -> AliasPolicy {
        self.policy
    }

    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    pub fn counts(&self) -> VmCounts {
        self.counts
    }

    pub fn cache_counts(&self) -> VacCounts {
        self.vac.counts()
    }

    /// Microseconds charged so far.
    pub fn elapsed_us(&self) -> f64 {
        self.elapsed_us
    }

    fn page(&self) -> u64 {
        self.vac.params().page
    }

    fn consistent(&self) -> bool {
        self.policy.consistency != Consistency::None
    }

    fn charge(&mut self, us: f64) -> f64 {
        self.elapsed_us += us;
        us
    }

    /// Take the frame holding physical address `paddr` out of the free pool (if it is in it),
    /// so that a frame a workload names itself (a map event, a physical access, a trace's
    /// physical address) is never handed out again by [`VacVm::alloc_frame`].
    pub fn claim_frame(&mut self, paddr: u64) {
        self.claim_run(paddr, 1);
    }

    /// [`VacVm::claim_frame`] of the `frames` frames from the one holding `paddr` (a large
    /// page's run).
    pub fn claim_run(&mut self, paddr: u64, frames: u64) {
        let first = paddr / self.page();
        self.used.extend(first..first + frames);
    }

    /// Take a frame from the free pool: the lowest free frame, of page colour `colour` when
    /// one is given (page colouring lets the OS make aliases equivalently mapped). Returns
    /// the frame's physical address.
    pub fn alloc_frame(&mut self, colour: Option<u64>) -> Result<u64, String> {
        self.alloc_run(1, colour)
    }

    /// Take a run of `frames` free frames (a power of two) from the pool, as one allocation:
    /// the lowest run aligned to its size, whose first frame has page colour `colour` when one
    /// is given — a large page's, so that each of its parts has the colour of its own virtual
    /// page. (A large page's address is aligned to its size, so its colour is a multiple of
    /// the run's frames, or 0 when the run spans every colour: aligned runs of that colour
    /// exist.) Returns the first frame's physical address.
    pub fn alloc_run(&mut self, frames: u64, colour: Option<u64>) -> Result<u64, String> {
        debug_assert!(frames.is_power_of_two());
        let colours = self.vac.colours();
        let (mut f, step) = match colour {
            Some(c) if c >= colours => {
                return Err(format!(
                    "colour: {c} is not below the cache's {colours} page colours"
                ))
            }
            Some(c) if !c.is_multiple_of(frames.min(colours)) => {
                return Err(format!(
                    "colour: no run of {frames} frames aligned to its size starts at colour {c}"
                ))
            }
            Some(c) => (c, colours.max(frames)),
            None => (0, frames),
        };
        let last = MAX_PADDR / self.page();
        while f < last && self.used.range(f..f + frames).next().is_some() {
            f += step;
        }
        if f + frames > last {
            return Err("physical memory exhausted".into());
        }
        self.allocate_run(f * self.page(), frames);
        Ok(f * self.page())
    }

    /// Take the frame at physical address `frame` from the free pool as a page allocation
    /// (charged, counted), for a frame the workload picked itself; a frame already out of the
    /// pool (named by an earlier event) stays out.
    pub fn allocate(&mut self, frame: u64) -> f64 {
        self.allocate_run(frame, 1)
    }

    /// [`VacVm::allocate`] of the run of `frames` frames from `frame` (a large page's), as
    /// one allocation.
    pub fn allocate_run(&mut self, frame: u64, frames: u64) -> f64 {
        self.claim_run(frame, frames);
        self.counts.page_allocs += 1;
        let us = self.timing.vm.page_alloc_us;
        self.charge(us)
    }

    /// Return a frame to the pool. It must not be mapped; its physical alias's lines are
    /// purged (a purging policy: the content is dead) or flushed.
    pub fn free_frame(&mut self, frame: u64) -> Result<f64, String> {
        self.free_run(frame, 1)
    }

    /// [`VacVm::free_frame`] of the run of `frames` frames from `frame` (a large page's), as
    /// one free; nothing changes if one of them cannot be freed.
    pub fn free_run(&mut self, frame: u64, frames: u64) -> Result<f64, String> {
        let (first, page) = (self.page_base(frame, "frame")?, self.page());
        let run = (0..frames).map(move |i| first + i * page);
        for frame in run.clone() {
            if let Some(a) = self
                .frames
                .get(&frame)
                .and_then(|f| f.aliases.iter().find(|a| a.0 != PHYS))
            {
                return Err(format!(
                    "frame: {frame:#x} is still mapped at {:#x} in address space {}",
                    a.1, a.0
                ));
            }
            if !self.used.contains(&(frame / page)) {
                return Err(format!("frame: {frame:#x} is not allocated"));
            }
        }
        let mut us = 0.0;
        for frame in run {
            self.used.remove(&(frame / page));
            let p = (PHYS, frame);
            if let Some(m) = self.maps.get(&p).copied() {
                if m.live && self.consistent() {
                    us += self.clear(p, !self.policy.purge_dead);
                }
                self.maps.remove(&p);
            }
            self.frames.remove(&frame);
        }
        self.counts.page_frees += 1;
        Ok(self.charge(us))
    }

    fn page_base(&self, addr: u64, field: &str) -> Result<u64, String> {
        if addr & (self.page() - 1) != 0 {
            return Err(format!("{field}: {addr:#x} is not page aligned"));
        }
        Ok(addr)
    }

    fn class(&self, a: Alias) -> Class {
        if self.policy.equivalent_mapping {
            Class::Colour(self.vac.colour(a.1))
        } else {
            Class::Alias(a)
        }
    }

    /// Whether live aliases `a` and `b` of one frame may stay live together.
    fn compatible(&self, a: Alias, b: Alias) -> bool {
        if self.class(a) == self.class(b) {
            return true;
        }
        self.policy.read_only_aliasing && !self.maps[&a].writable && !self.maps[&b].writable
    }

    fn frame_of(&self, a: Alias) -> u64 {
        self.maps[&a].frame
    }

    /// Write back and invalidate (`write_back`) or purge the lines of alias `a`'s page, as
    /// one call; clears the class's dirty mark. Returns the cost.
    fn clear(&mut self, a: Alias, write_back: bool) -> f64 {
        let frame = self.frame_of(a);
        let class = self.class(a);
        if let Some(f) = self.frames.get_mut(&frame) {
            f.dirty.retain(|c| *c != class);
        }
        if write_back {
            let l = self.vac.flush_page(a.1, frame);
            self.counts.flush_calls += 1;
            self.counts.flushed += l;
            self.timing.flush_us(l)
        } else {
            let l = self.vac.purge_page(a.1, frame);
            self.counts.purge_calls += 1;
            self.counts.purged += l;
            self.timing.purge_us(l)
        }
    }

    fn class_dirty(&self, a: Alias) -> bool {
        let frame = self.frame_of(a);
        let class = self.class(a);
        self.frames
            .get(&frame)
            .is_some_and(|f| f.dirty.contains(&class))
    }

    fn mark_dirty(&mut self, a: Alias) {
        let frame = self.frame_of(a);
        let class = self.class(a);
        let f = self.frames.entry(frame).or_default();
        if !f.dirty.contains(&class) {
            f.dirty.push(class);
        }
    }

    fn purge_tlb(&mut self, a: Alias) -> f64 {
        if a.0 == PHYS {
            return 0.0;
        }
        self.counts.tlb_purges += 1;
        self.timing.vm.tlb_purge_us
    }

    /// Make alias `a` live: every live alias of the frame it may not coexist with becomes
    /// dormant (TLB purge; its class's lines flushed once, or purged when known clean).
    /// Returns the cost (not yet charged).
    fn activate(&mut self, a: Alias) -> f64 {
        let mut us = 0.0;
        if self.consistent() {
            let frame = self.frame_of(a);
            let others: Vec<Alias> = self.frames[&frame]
                .aliases
                .iter()
                .copied()
                .filter(|&b| b != a && self.maps[&b].live && !self.compatible(a, b))
                .collect();
            let mut cleared: Vec<Class> = Vec::new();
            for b in others {
                self.maps.get_mut(&b).expect("alias").live = false;
                us += self.purge_tlb(b);
                let class = self.class(b);
                if !cleared.contains(&class) {
                    cleared.push(class);
                    let dirty = self.class_dirty(b);
                    us += self.clear(b, dirty || !self.policy.read_only_aliasing);
                }
            }
        }
        let m = self.maps.get_mut(&a).expect("alias");
        m.live = true;
        if m.writable {
            self.mark_dirty(a);
        }
        us
    }

    /// Add a mapping (live or dormant), checking its fields.
    fn insert(&mut self, a: Alias, frame: u64, writable: bool) -> Result<(), String> {
        if self.maps.contains_key(&a) {
            return Err(format!(
                "va: {:#x} is already mapped in address space {}",
                a.1, a.0
            ));
        }
        if frame >= MAX_PADDR {
            return Err(format!("frame: {frame:#x} is beyond physical memory"));
        }
        self.maps.insert(
            a,
            Mapping {
                frame,
                writable,
                live: !self.consistent(),
            },
        );
        self.frames.entry(frame).or_default().aliases.push(a);
        if !self.consistent() && writable {
            self.mark_dirty(a);
        }
        Ok(())
    }

    fn remove(&mut self, a: Alias) -> Mapping {
        let m = self.maps.remove(&a).expect("alias");
        if let Some(f) = self.frames.get_mut(&m.frame) {
            f.aliases.retain(|&b| b != a);
        }
        m
    }

    /// Map the page at `va` of `asid` to `frame`.
    pub fn map(
        &mut self,
        asid: Asid,
        va: u64,
        frame: u64,
        writable: bool,
        eager: bool,
    ) -> Result<f64, String> {
        if asid == PHYS {
            return Err("asid: the physical alias is not mapped explicitly".into());
        }
        let va = self.page_base(va, "va")?;
        let frame = self.page_base(frame, "frame")?;
        let a = (asid, va);
        self.insert(a, frame, writable)?;
        self.counts.maps += 1;
        let mut us = self.timing.vm.map_us;
        if eager {
            us += self.activate(a);
        }
        Ok(self.charge(us))
    }

    fn mapping(&self, asid: Asid, va: u64) -> Result<(Alias, Mapping), String> {
        let va = self.page_base(va, "va")?;
        let a = (asid, va);
        match self.maps.get(&a) {
            Some(&m) => Ok((a, m)),
            None => Err(format!("va: {va:#x} is not mapped in address space {asid}")),
        }
    }

    /// Remove the mapping of `va` in `asid`.
    pub fn unmap(&mut self, asid: Asid, va: u64, dead: bool) -> Result<f64, String> {
        let (a, m) = self.mapping(asid, va)?;
        if dead {
            if let Some(b) = self.frames[&m.frame]
                .aliases
                .iter()
                .find(|&&b| b != a && b.0 != PHYS)
            {
                return Err(format!(
                    "dead: frame {:#x} is still mapped at {:#x} in address space {}",
                    m.frame, b.1, b.0
                ));
            }
        }
        let mut us = self.timing.vm.unmap_us + self.purge_tlb(a);
        if m.live && self.consistent() {
            us += self.release(a, dead);
        }
        self.remove(a);
        if dead && self.consistent() {
            // The physical alias's lines are dead too.
            let p = (PHYS, m.frame);
            if self.maps.get(&p).is_some_and(|m| m.live) {
                us += self.clear(p, !self.policy.purge_dead);
                self.maps.get_mut(&p).expect("alias").live = false;
            }
        }
        self.counts.unmaps += 1;
        Ok(self.charge(us))
    }

    /// The lines of live alias `a`, which is going away: nothing if another live alias of its
    /// class keeps them (written back first if only read-only ones remain), else flushed, or
    /// purged when dead under a purging policy.
    fn release(&mut self, a: Alias, dead: bool) -> f64 {
        let frame = self.frame_of(a);
        let class = self.class(a);
        let keepers: Vec<Alias> = self.frames[&frame]
            .aliases
            .iter()
            .copied()
            .filter(|&b| b != a && self.maps[&b].live && self.class(b) == class)
            .collect();
        if keepers.is_empty() {
            return self.clear(a, !(dead && self.policy.purge_dead));
        }
        if self.class_dirty(a) && keepers.iter().all(|b| !self.maps[b].writable) {
            return self.clear(a, true);
        }
        0.0
    }

    /// Point the mapping of `va` in `asid` at `frame`: the old mapping's lines are flushed,
    /// its TLB entry purged, and the new mapping made live.
    pub fn remap(&mut self, asid: Asid, va: u64, frame: u64) -> Result<f64, String> {
        let (a, m) = self.mapping(asid, va)?;
        let frame = self.page_base(frame, "frame")?;
        if frame >= MAX_PADDR {
            return Err(format!("frame: {frame:#x} is beyond physical memory"));
        }
        let mut us = self.timing.vm.map_us + self.purge_tlb(a);
        if m.live && self.consistent() {
            us += self.release(a, false);
        }
        self.remove(a);
        self.insert(a, frame, m.writable)?;
        us += self.activate(a);
        self.counts.remaps += 1;
        Ok(self.charge(us))
    }

    /// Change the protection of `va` in `asid`. PA-RISC keeps protection in the TLB, so this
    /// is a TLB purge, plus, under read-only aliasing, a flush when a live writable page with
    /// dirty lines becomes read-only (read-only aliases must be clean to coexist) and the
    /// other live classes made dormant when a read-only page becomes writable.
    pub fn protect(&mut self, asid: Asid, va: u64, writable: bool) -> Result<f64, String> {
        let (a, m) = self.mapping(asid, va)?;
        let mut us = self.timing.vm.protect_us + self.purge_tlb(a);
        self.maps.get_mut(&a).expect("alias").writable = writable;
        if m.live && self.consistent() {
            if m.writable && !writable && self.policy.read_only_aliasing && self.class_dirty(a) {
                us += self.clear(a, true);
            }
            if writable {
                us += self.activate(a);
            }
        }
        self.counts.protects += 1;
        Ok(self.charge(us))
    }

    /// The alias, mapping and physical address of `at`, creating the physical alias of a
    /// frame on first use.
    fn resolve(&mut self, at: At) -> Result<(Alias, u64), String> {
        match at {
            At::Virt(asid, va) => {
                let mask = self.page() - 1;
                let (a, m) = self.mapping(asid, va & !mask)?;
                Ok((a, m.frame | (va & mask)))
            }
            At::Phys(pa) => {
                if pa >= MAX_PADDR {
                    return Err(format!("paddr: {pa:#x} is beyond physical memory"));
                }
                let frame = pa & !(self.page() - 1);
                let a = (PHYS, frame);
                if !self.maps.contains_key(&a) {
                    self.insert(a, frame, true)?;
                }
                Ok((a, pa))
            }
        }
    }

    /// Make `a` usable for an access: a pseudo page fault if it is a dormant virtual alias,
    /// the kernel's flushes if it is a dormant physical one. Returns the cost and whether a
    /// pseudo page fault was taken.
    fn make_live(&mut self, a: Alias, write: bool) -> Result<(f64, bool), String> {
        let m = self.maps[&a];
        if write && !m.writable {
            return Err(format!(
                "protection: store to read-only page {:#x} of address space {}",
                a.1, a.0
            ));
        }
        let mut us = 0.0;
        let mut fault = false;
        if !m.live {
            if a.0 != PHYS {
                fault = true;
                self.counts.pseudo_faults += 1;
                us += self.timing.vm.pseudo_fault_us;
            }
            us += self.activate(a);
        }
        if write && self.consistent() {
            self.mark_dirty(a);
        }
        Ok((us, fault))
    }

    /// One line-sized access; returns its miss cost and what it did.
    fn touch(&mut self, at: At, store: Option<u64>) -> Result<(f64, Touch), String> {
        let (a, pa) = self.resolve(at)?;
        let (mut us, pseudo_fault) = self.make_live(a, store.is_some())?;
        let index = match at {
            At::Virt(_, va) => va,
            At::Phys(pa) => pa,
        };
        let (acc, value) = self.vac.access_data(index, pa, store);
        if !acc.hit {
            let wb = acc.victim.is_some_and(|v| v.dirty);
            self.counts.misses += 1;
            self.counts.writebacks += wb as u64;
            us += self.timing.miss_us(1, wb as u64);
        }
        Ok((
            us,
            Touch {
                hit: acc.hit,
                pseudo_fault,
                value,
            },
        ))
    }

    /// Load from `at`: what the access cost (its miss, any pseudo page fault) and what it
    /// read.
    pub fn load(&mut self, at: At) -> Result<(f64, Touch), String> {
        let (us, t) = self.touch(at, None)?;
        self.counts.loads += 1;
        Ok((self.charge(us), t))
    }

    /// Store `value` to `at`.
    pub fn store(&mut self, at: At, value: u64) -> Result<(f64, Touch), String> {
        let (us, t) = self.touch(at, Some(value))?;
        self.counts.stores += 1;
        Ok((self.charge(us), t))
    }

    fn line(&self) -> u64 {
        self.vac.params().line
    }

    fn check_range(&self, at: At, bytes: u64, field: &str) -> Result<(), String> {
        let a = match at {
            At::Virt(_, v) => v,
            At::Phys(p) => p,
        };
        if !a.is_multiple_of(self.line()) || !bytes.is_multiple_of(self.line()) {
            return Err(format!(
                "{field}: {a:#x} + {bytes} bytes is not whole {}-byte lines",
                self.line()
            ));
        }
        Ok(())
    }

    /// Refuse a range touching an unmapped page, or a read-only one when `write`, before any
    /// of it is accessed (so a refused copy changes nothing).
    fn check_mapped(&mut self, at: At, bytes: u64, write: bool) -> Result<(), String> {
        let mut off = 0;
        while off < bytes {
            let (a, _) = self.resolve(at.offset(off))?;
            if write && !self.maps[&a].writable {
                return Err(format!(
                    "protection: store to read-only page {:#x} of address space {}",
                    a.1, a.0
                ));
            }
            off += self.line();
        }
        Ok(())
    }

    /// Copy `bytes` (whole lines) from `src` to `dst`, as one bcopy: a load and a store per
    /// line, priced as a best-case copy plus the misses and dirty victims they met.
    pub fn copy(&mut self, src: At, dst: At, bytes: u64) -> Result<f64, String> {
        self.check_range(src, bytes, "src")?;
        self.check_range(dst, bytes, "dst")?;
        self.check_mapped(src, bytes, false)?;
        self.check_mapped(dst, bytes, true)?;
        let lines = bytes / self.line();
        let mut us = self.timing.copy.base_us + self.timing.copy.line_us * lines as f64;
        for i in 0..lines {
            let off = i * self.line();
            let (a, t) = self.touch(src.offset(off), None)?;
            let (b, _) = self.touch(dst.offset(off), Some(t.value))?;
            us += a + b;
        }
        self.counts.copies += 1;
        Ok(self.charge(us))
    }

    /// Copy one page.
    pub fn copy_page(&mut self, src: At, dst: At) -> Result<f64, String> {
        self.copy(src, dst, self.page())
    }

    /// Zero `bytes` (whole lines) at `dst`, as one call.
    pub fn zero(&mut self, dst: At, bytes: u64) -> Result<f64, String> {
        self.check_range(dst, bytes, "dst")?;
        self.check_mapped(dst, bytes, true)?;
        let lines = bytes / self.line();
        let mut us = self.timing.zero.base_us + self.timing.zero.line_us * lines as f64;
        for i in 0..lines {
            let (a, _) = self.touch(dst.offset(i * self.line()), Some(0))?;
            us += a;
        }
        self.counts.zeros += 1;
        Ok(self.charge(us))
    }

    /// Zero one page.
    pub fn zero_page(&mut self, dst: At) -> Result<f64, String> {
        self.zero(dst, self.page())
    }

    /// Make the alias of `at`'s page dormant: flush its lines (one call) and purge its TLB
    /// entry; the mapping stays, and the next touch takes a pseudo page fault (Chorus's
    /// *unload*).
    pub fn unload(&mut self, at: At) -> Result<f64, String> {
        let (a, _) = self.resolve(at)?;
        let m = self.maps[&a];
        let mut us = self.purge_tlb(a);
        if m.live && self.consistent() {
            us += self.clear(a, true);
            self.maps.get_mut(&a).expect("alias").live = false;
        }
        Ok(self.charge(us))
    }

    /// Flush `bytes` (whole lines) from `at` as one pdcache() call (Table 1's measurement):
    /// lines are written back and invalidated; mappings stay as they are. The pages must be
    /// mapped.
    pub fn flush_range(&mut self, at: At, bytes: u64) -> Result<f64, String> {
        self.check_range(at, bytes, "at")?;
        self.check_mapped(at, bytes, false)?;
        let mut l = Lines::default();
        let mut off = 0;
        while off < bytes {
            let here = at.offset(off);
            let (_, pa) = self.resolve(here)?;
            let index = match here {
                At::Virt(_, va) => va,
                At::Phys(p) => p,
            };
            let in_page = (self.page() - (pa & (self.page() - 1))).min(bytes - off);
            l += self.vac.flush_lines(index, pa, in_page / self.line());
            off += in_page;
        }
        self.counts.flush_calls += 1;
        self.counts.flushed += l;
        let us = self.timing.flush_us(l);
        Ok(self.charge(us))
    }

    /// Charge `us` of work the cache does not model (a message's fixed cost).
    pub fn spend(&mut self, us: f64) -> f64 {
        self.charge(us)
    }

    /// Apply one [`Op`]; returns its cost.
    pub fn apply(&mut self, op: &Op) -> Result<f64, String> {
        match *op {
            Op::Map {
                asid,
                va,
                frame,
                writable,
                eager,
            } => self.map(asid, va, frame, writable, eager),
            Op::Unmap { asid, va, dead } => self.unmap(asid, va, dead),
            Op::Remap { asid, va, frame } => self.remap(asid, va, frame),
            Op::Protect { asid, va, writable } => self.protect(asid, va, writable),
            Op::Unload { at } => self.unload(at),
            Op::Load { at } => self.load(at).map(|r| r.0),
            Op::Store { at, value } => self.store(at, value).map(|r| r.0),
            Op::CopyPage { src, dst } => self.copy_page(src, dst),
            Op::ZeroPage { dst } => self.zero_page(dst),
            Op::Free { frame } => self.free_frame(frame),
        }
    }

    /// The frame `va` of `asid` is mapped to.
    pub fn frame_at(&self, asid: Asid, va: u64) -> Option<u64> {
        let va = va & !(self.page() - 1);
        self.maps.get(&(asid, va)).map(|m| m.frame)
    }

    /// The aliases of `frame` (address space, page address), in the order they were made;
    /// `(PHYS, frame)` once it has been accessed physically.
    pub fn aliases_of(&self, frame: u64) -> Vec<(Asid, u64)> {
        self.frames
            .get(&frame)
            .map(|f| f.aliases.clone())
            .unwrap_or_default()
    }

    /// Whether `va` of `asid` is mapped writable (false when it is not mapped).
    pub fn writable(&self, asid: Asid, va: u64) -> bool {
        let va = va & !(self.page() - 1);
        self.maps.get(&(asid, va)).is_some_and(|m| m.writable)
    }

    /// Whether `va` of `asid` is mapped, and live.
    pub fn mapped(&self, asid: Asid, va: u64) -> Option<bool> {
        let va = va & !(self.page() - 1);
        self.maps.get(&(asid, va)).map(|m| m.live)
    }
}

#[cfg(test)]
impl VacVm {
    /// Every virtual mapping: (address space, page address) and its frame.
    pub(crate) fn mappings(&self) -> impl Iterator<Item = ((Asid, u64), u64)> + '_ {
        self.maps
            .iter()
            .filter(|(a, _)| a.0 != PHYS)
            .map(|(&a, m)| (a, m.frame))
    }

    /// The invariants of a consistent policy (module documentation), checked against the
    /// cache's actual content; the error says which line breaks which.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        if !self.consistent() {
            return Ok(());
        }
        let lpp_shift = (self.page() / self.line()).trailing_zeros();
        for (_, pline, set, dirty) in self.vac.lines() {
            let frame = (pline >> lpp_shift) * self.page();
            let f = self
                .frames
                .get(&frame)
                .ok_or_else(|| format!("line {pline:#x} of unmapped frame {frame:#x} cached"))?;
            let live: Vec<Alias> = f
                .aliases
                .iter()
                .copied()
                .filter(|a| self.maps[a].live)
                .collect();
            // Some live alias indexes this line into `set`.
            let line_off = (pline << self.line().trailing_zeros()) & (self.page() - 1);
            let holder = live.iter().find(|a| {
                let idx = if self.vac.params().indexing == super::Indexing::Physical {
                    frame
                } else {
                    a.1
                };
                self.vac
                    .resident(idx + line_off, frame + line_off)
                    .map(|(s, _)| s / self.vac.params().ways)
                    == Some(set)
            });
            if holder.is_none() {
                return Err(format!(
                    "line {pline:#x} (set {set}) is cached but no live alias of frame {frame:#x} \
                     indexes it (live: {live:?})"
                ));
            }
            let classes: BTreeSet<String> = live
                .iter()
                .map(|&a| format!("{:?}", self.class(a)))
                .collect();
            if classes.len() > 1 {
                if let Some(w) = live.iter().find(|a| self.maps[a].writable) {
                    return Err(format!(
                        "frame {frame:#x}: {} live classes but {w:?} is writable",
                        classes.len()
                    ));
                }
                if dirty {
                    return Err(format!(
                        "frame {frame:#x}: {} live classes and line {pline:#x} is dirty",
                        classes.len()
                    ));
                }
            }
        }
        Ok(())
    }
}
