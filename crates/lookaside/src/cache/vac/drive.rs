//! The virtually addressed cache and its OS driven by an event stream: what a machine's
//! `[vac]` section does (see [`crate::config::VacConfig`]).
//!
//! Every data reference (load, store) of the stream is a load or store of the [`VacVm`] at
//! its virtual address in its address space; a page touched for the first time is mapped
//! then, as the OS would on its first fault, to a frame the `mapping` policy picks: the
//! trace's own physical address, the lowest free frame, or the lowest free frame of the
//! page's colour (equivalent mapping, so that aliases stay cache aligned). The VM events of the
//! stream are the primitives, each priced from the lines it actually finds in the cache; their
//! [`flags`] refine them:
//!
//! * [`Kind::Map`] maps the page to the frame at `paddr`, lazily (the first touch takes a
//!   pseudo page fault) or, with [`flags::MAP_EAGER`], at once; writable unless
//!   [`flags::MAP_READ_ONLY`]; [`flags::MAP_NEW_FRAME`] charges the frame's allocation from
//!   the free pool. A map of a page already mapped is a remap (its protection stays).
//! * [`Kind::Unmap`] unmaps the page (flushing it by the policy); with
//!   [`flags::UNMAP_DEAD`] the page is destroyed — its lines are dead (a purging policy
//!   purges them) and its frame goes back to the pool. In address space [`PHYSICAL`] it
//!   unloads a frame's physical alias: the kernel is done with the frame's physical address,
//!   and its physically indexed lines are flushed.
//! * [`Kind::Protect`] write-protects the page (as for copy-on-write; the next store to it is
//!   a write fault, which makes it writable again, charged as a protection change), or, with
//!   [`flags::PROTECT_WRITABLE`], makes it writable.
//! * [`Kind::CopyPage`] copies `size` bytes (0: the whole page) to `addr` of `asid` from the
//!   source its `paddr` names ([`CopySource`]): a physical address, or a virtual address of
//!   an address space (a kernel copy between mappings). [`Kind::ZeroPage`] zeroes `size`
//!   bytes (0: the page).
//!
//! Beside a page table, a page of the machine larger than the VAC's is the OS's huge page
//! ([`VacDriver::set_page_sizes`]): an aligned run of frames, each VAC-sized part mapped at its
//! place in it when first touched; a map event of a part moves the whole page to the run that
//! puts the part at the frame named, and an unmap of a part removes the whole page, as the
//! TLBs and the table do (see [`VacDriver::run`]).
//!
//! Instruction fetches do not reach it (it is the data cache), and neither do context
//! switches and TLB flushes. Markers do not either, except *phase markers*
//! ([`Event::phase`]): the driver adds up the microseconds and primitives of each phase a
//! workload labels (the warm-up, the messages measured, …).
//!
//! A primitive the model refuses (an unmap of a page that is not mapped, a copy without a
//! source frame) is an error of the stream: the driver keeps the first one, with the event's
//! position, and ignores the rest of the stream; the caller turns it into an error naming the
//! trace ([`VacDriver::error`]).

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::alias::{AliasPolicy, At, VacVm, VmCounts, PHYS};
use super::timing::Timing;
use super::{VacParams, MAX_PADDR};
use crate::config::{PageSize, VacConfig};
use crate::error::{Error, Result};
use crate::event::{flags, CopySource, Event, Kind, NO_PADDR, PHYSICAL};
use crate::trace::TraceSource;
use crate::vm::PageSizes;

/// Which frame a page gets when it is first touched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FirstTouch {
    /// The frame of the physical address the reference carries (full-system traces); a
    /// reference without one is an error.
    Trace,
    /// The lowest free frame.
    #[default]
    Any,
    /// The lowest free frame of the page's colour (equivalent mapping).
    Colour,
}

impl std::str::FromStr for FirstTouch {
    type Err = String;

    fn from_str(name: &str) -> Result<FirstTouch, String> {
        match name {
            "trace" => Ok(FirstTouch::Trace),
            "any" => Ok(FirstTouch::Any),
            "colour" | "color" => Ok(FirstTouch::Colour),
            _ => Err(format!("'{name}' is not trace, any or colour")),
        }
    }
}

impl std::fmt::Display for FirstTouch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FirstTouch::Trace => "trace",
            FirstTouch::Any => "any",
            FirstTouch::Colour => "colour",
        })
    }
}

serde_by_name!(FirstTouch, ["trace", "any", "colour", "color"].into_iter());

/// What the stream asked of the driver, beyond the primitives' own counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DriveCounts {
    pub loads: u64,
    pub stores: u64,
    /// Pages mapped on their first touch.
    pub first_touch_maps: u64,
    /// Map events of pages already mapped (remaps).
    pub remaps: u64,
    /// Stores to write-protected pages, which made them writable.
    pub write_faults: u64,
}

/// What one labelled phase of the stream cost, over every time it ran.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseCost {
    pub phase: String,
    /// Phase markers that started it.
    pub count: u64,
    /// Microseconds charged while it ran.
    pub us: f64,
    /// What the primitives did while it ran.
    pub primitives: VmCounts,
}

/// The bytes a copy-page or zero-page event of `size` covers (0: the whole `page`), and where
/// it starts for an address it names (a whole-page one: the page holding the address).
fn extent(size: u16, page: u64) -> (u64, impl Fn(u64) -> u64) {
    let whole = size == 0;
    let bytes = if whole { page } else { size as u64 };
    (bytes, move |a: u64| if whole { a & !(page - 1) } else { a })
}

/// A [`VacVm`] fed by events (see the module documentation).
#[derive(Clone, Debug)]
pub struct VacDriver {
    vm: VacVm,
    mapping: FirstTouch,
    counts: DriveCounts,
    /// Every phase seen, in order of first appearance.
    phases: Vec<PhaseCost>,
    /// The phase running: its index, and the microseconds and counts when it started.
    current: Option<(usize, f64, VmCounts)>,
    /// Events seen so far.
    seen: u64,
    /// The first error: the 1-based event and what was wrong.
    error: Option<(u64, String)>,
    /// The machine's page sizes, when some are larger than the VAC's page and a page table
    /// maps the same memory ([`VacDriver::set_page_sizes`]).
    sizes: Option<Box<PageSizes>>,
    /// The run of frames of each large page that has one: (address space, the page's first
    /// address) → the run's first frame (physical address).
    runs: HashMap<(u32, u64), u64>,
}

impl VacDriver {
    /// The error names the parameter that is wrong.
    pub fn new(
        params: &VacParams,
        policy: AliasPolicy,
        timing: Timing,
        mapping: FirstTouch,
    ) -> std::result::Result<VacDriver, String> {
        Ok(VacDriver {
            vm: VacVm::new(params, policy, timing)?,
            mapping,
            counts: DriveCounts::default(),
            phases: Vec::new(),
            current: None,
            seen: 0,
            error: None,
            sizes: None,
            runs: HashMap::new(),
        })
    }

    /// The driver a machine's `[vac]` section describes; errors name the key
    /// (`vac.ways`, …) in `source_name`.
    pub fn from_config(c: &VacConfig, source_name: &str) -> Result<VacDriver> {
        let err = |field: &str, m: String| Error::config(source_name, format!("vac.{field}"), m);
        let params = VacParams {
            size: c.size.0,
            ways: c.ways,
            line: c.line.0,
            page: c.page.0,
            policy: c.replacement,
            indexing: c.indexing,
        };
        params.check().map_err(|m| {
            let (field, msg) = m.split_once(": ").unwrap_or(("size", &m));
            let field = field.split_whitespace().next().unwrap_or("size");
            err(field, msg.to_string())
        })?;
        let policy = AliasPolicy::parse(&c.policy)
            .map_err(|m| err("policy", m.trim_start_matches("alias policy: ").into()))?;
        let timing = Timing::preset(&c.timing).map_err(|m| err("timing", m))?;
        VacDriver::new(&params, policy, timing, c.mapping).map_err(|m| err("size", m))
    }

    /// Take the frame holding physical address `paddr` out of the OS's free pool: a frame
    /// the machine's page table gave another process before the run.
    pub fn claim_frame(&mut self, paddr: u64) {
        self.vm.claim_frame(paddr);
    }

    /// The machine maps pages of `sizes`, some larger than the VAC's, and a page table maps
    /// them in this OS's memory: a large page is then an aligned run of its frames, as an
    /// operating system's huge page is (see [`VacDriver::run`]), so that the table, which maps
    /// a large page at one frame, and the VAC agree on every byte's frame.
    pub(crate) fn set_page_sizes(&mut self, sizes: PageSizes) {
        self.sizes = Some(Box::new(sizes));
    }

    pub fn vm(&self) -> &VacVm {
        &self.vm
    }

    /// The first event the model refused: (1-based position in the stream, message).
    pub fn error(&self) -> Option<&(u64, String)> {
        self.error.as_ref()
    }

    /// What each labelled phase of the stream cost so far, in order of first appearance
    /// (the phase running counted up to now).
    pub fn phases(&self) -> Vec<PhaseCost> {
        let mut out = self.phases.clone();
        self.settle(&mut out);
        out
    }

    /// Add what the running phase cost since it started to its entry of `phases`.
    fn settle(&self, phases: &mut [PhaseCost]) {
        if let Some((i, us0, c0)) = &self.current {
            phases[*i].us += self.vm.elapsed_us() - us0;
            phases[*i].primitives += self.vm.counts().since(c0);
        }
    }

    /// End the running phase and start `label`.
    fn start_phase(&mut self, label: String) {
        let mut phases = std::mem::take(&mut self.phases);
        self.settle(&mut phases);
        self.phases = phases;
        let i = match self.phases.iter().position(|p| p.phase == label) {
            Some(i) => i,
            None => {
                self.phases.push(PhaseCost {
                    phase: label,
                    count: 0,
                    us: 0.0,
                    primitives: VmCounts::default(),
                });
                self.phases.len() - 1
            }
        };
        self.phases[i].count += 1;
        self.current = Some((i, self.vm.elapsed_us(), self.vm.counts()));
    }

    /// Drive the model with `events`, in order.
    pub fn run_batch(&mut self, events: &[Event]) {
        for e in events {
            self.seen += 1;
            if self.error.is_some() {
                continue;
            }
            if let Err(m) = self.event(e) {
                self.error = Some((self.seen, m));
            }
        }
    }

    fn event(&mut self, e: &Event) -> std::result::Result<(), String> {
        let page = self.vm.vac().params().page;
        match e.kind {
            Kind::Load | Kind::Store => {
                let at = self.touch(e.asid, e.addr, e.paddr)?;
                if e.kind == Kind::Load {
                    self.counts.loads += 1;
                    self.vm.load(at)?;
                } else {
                    self.counts.stores += 1;
                    if let At::Virt(asid, va) = at {
                        if !self.vm.writable(asid, va) {
                            self.counts.write_faults += 1;
                            self.vm.protect(asid, va & !(page - 1), true)?;
                        }
                    }
                    self.vm.store(at, 0)?;
                }
            }
            Kind::Map => {
                if e.paddr == NO_PADDR {
                    return Err(format!(
                        "paddr: the map event of page {:#x} (address space {}) gives no frame",
                        e.addr, e.asid
                    ));
                }
                // The page holding each address (the VAC's page may be smaller than the
                // machine's).
                let (va, frame) = (e.addr & !(page - 1), e.paddr & !(page - 1));
                let new = e.size & flags::MAP_NEW_FRAME != 0;
                match self.large_page(e.asid, e.addr) {
                    Some(large) => self.move_run(e.asid, large, e.addr, e.paddr, new)?,
                    // (An allocation claims its frame: only a frame named, not new, is
                    // claimed alone.)
                    None if new => {
                        self.vm.allocate(frame);
                    }
                    None => self.vm.claim_frame(frame),
                }
                if self.vm.mapped(e.asid, va).is_some() {
                    self.counts.remaps += 1;
                    self.vm.remap(e.asid, va, frame)?;
                } else {
                    let writable = e.size & flags::MAP_READ_ONLY == 0;
                    let eager = e.size & flags::MAP_EAGER != 0;
                    self.vm.map(e.asid, va, frame, writable, eager)?;
                }
            }
            Kind::Unmap if e.asid == PHYSICAL => {
                self.vm.unload(At::Phys(e.addr & !(page - 1)))?;
            }
            Kind::Unmap => {
                let va = e.addr & !(page - 1);
                let dead = e.size & flags::UNMAP_DEAD != 0;
                if let Some(large) = self.large_page(e.asid, e.addr) {
                    return self.unmap_large(e.asid, large, e.addr, dead);
                }
                let frame = self.vm.frame_at(e.asid, va);
                self.vm.unmap(e.asid, va, dead)?;
                if let (true, Some(frame)) = (dead, frame) {
                    self.vm.free_frame(frame)?;
                }
            }
            Kind::Protect => {
                let writable = e.size & flags::PROTECT_WRITABLE != 0;
                self.vm.protect(e.asid, e.addr & !(page - 1), writable)?;
            }
            Kind::CopyPage => {
                let (bytes, base) = extent(e.size, page);
                let src = match CopySource::of(e.paddr) {
                    None => {
                        return Err(format!(
                            "paddr: the copy to page {:#x} (address space {}) gives no source",
                            e.addr, e.asid
                        ))
                    }
                    Some(CopySource::Physical(p)) => {
                        self.vm.claim_frame(p);
                        At::Phys(base(p))
                    }
                    Some(CopySource::Virtual(asid, va)) => self.touch(asid, base(va), NO_PADDR)?,
                };
                let dst = self.touch(e.asid, base(e.addr), NO_PADDR)?;
                self.vm.copy(src, dst, bytes)?;
            }
            Kind::ZeroPage => {
                let (bytes, base) = extent(e.size, page);
                let dst = self.touch(e.asid, base(e.addr), NO_PADDR)?;
                self.vm.zero(dst, bytes)?;
            }
            Kind::Marker => {
                if let Some(label) = e.phase_label() {
                    self.start_phase(label);
                }
                if let Some(bytes) = e.vm_page_bytes() {
                    if bytes != page {
                        return Err(format!(
                            "the stream's VM events are in {bytes}-byte pages (a workload's \
                             `page`), the [vac]'s page is {page} bytes: set one to the other"
                        ));
                    }
                }
            }
            Kind::Fetch | Kind::ContextSwitch | Kind::TlbFlush => {}
        }
        Ok(())
    }

    /// Where a reference to `addr` of `asid` goes, mapping its page first if it is touched
    /// for the first time (`paddr`: the physical address the event carries, if any): a part
    /// of a large page at its place in the page's run ([`VacDriver::run`]).
    fn touch(&mut self, asid: u32, addr: u64, paddr: u64) -> std::result::Result<At, String> {
        if asid == PHYSICAL || asid == PHYS {
            self.vm.claim_frame(addr);
            return Ok(At::Phys(addr));
        }
        if self.vm.mapped(asid, addr).is_none() {
            let page = self.vm.vac().params().page;
            let frame = match (self.large_page(asid, addr), self.mapping) {
                (Some(large), _) => {
                    self.run(asid, large, addr, paddr)? + ((addr - large.0) & !(page - 1))
                }
                (None, FirstTouch::Trace) if paddr == NO_PADDR => return Err(untraced(asid, addr)),
                (None, FirstTouch::Trace) => {
                    self.vm.claim_frame(paddr);
                    paddr & !(page - 1)
                }
                (None, FirstTouch::Any) => self.vm.alloc_frame(None)?,
                (None, FirstTouch::Colour) => {
                    let colour = self.vm.vac().colour(addr);
                    self.vm.alloc_frame(Some(colour))?
                }
            };
            self.vm.map(asid, addr & !(page - 1), frame, true, true)?;
            self.counts.first_touch_maps += 1;
        }
        Ok(At::Virt(asid, addr))
    }

    /// The page larger than the VAC's holding `addr` of `asid`, if the machine maps one there
    /// ([`VacDriver::set_page_sizes`]): its first address and its size (as a shift).
    fn large_page(&self, asid: u32, addr: u64) -> Option<(u64, u32)> {
        let shift = self.sizes.as_ref()?.backing(addr, asid)?;
        let page = self.vm.vac().params().page;
        (1u64 << shift > page).then(|| (addr & !((1u64 << shift) - 1), shift))
    }

    /// The run of frames of large page `(start, shift)` of `asid`, taken now if it has none
    /// (for a first touch of `addr`, at physical address `paddr` if the event carries one): a
    /// run of the page's size, aligned to it, each VAC-sized part of the page at its place in
    /// it, mapped there when first touched — the OS's huge page. By `mapping`: the run that
    /// places `addr` at the trace's `paddr`, the lowest free one, or the lowest free one of
    /// the page's colour (the page's address is aligned to its size, so each part then has
    /// its own virtual page's colour, and aliases stay equivalently mapped). The run stays
    /// the page's until an unmap event removes the page or a map event moves it.
    fn run(
        &mut self,
        asid: u32,
        (start, shift): (u64, u32),
        addr: u64,
        paddr: u64,
    ) -> std::result::Result<u64, String> {
        if let Some(&run) = self.runs.get(&(asid, start)) {
            return Ok(run);
        }
        let frames = (1u64 << shift) / self.vm.vac().params().page;
        let run = match self.mapping {
            FirstTouch::Trace if paddr == NO_PADDR => return Err(untraced(asid, addr)),
            FirstTouch::Trace => {
                let run = self.run_placing(asid, (start, shift), addr, paddr)?;
                self.vm.claim_run(run, frames);
                run
            }
            FirstTouch::Any => self.vm.alloc_run(frames, None)?,
            FirstTouch::Colour => {
                let colour = self.vm.vac().colour(start);
                self.vm.alloc_run(frames, Some(colour))?
            }
        };
        self.runs.insert((asid, start), run);
        Ok(run)
    }

    /// The first frame of the aligned run that places `addr`, in large page `(start, shift)`
    /// of `asid`, at physical address `paddr` (the part holding `addr` in the frame holding
    /// `paddr`); an error if no aligned run does (the physical address is not where the page's
    /// part would be in one) or the run ends past physical memory.
    fn run_placing(
        &self,
        asid: u32,
        (start, shift): (u64, u32),
        addr: u64,
        paddr: u64,
    ) -> std::result::Result<u64, String> {
        let page = self.vm.vac().params().page;
        let size = 1u64 << shift;
        let run = (paddr & !(page - 1)).wrapping_sub((addr - start) & !(page - 1));
        let label = PageSize::Size(size).label();
        if run & (size - 1) != 0 {
            return Err(format!(
                "paddr: {paddr:#x} for {addr:#x} (address space {asid}) is not {:#x} into an aligned run of frames, where the {label} page holding it lies",
                addr - start
            ));
        }
        if run.checked_add(size).is_none_or(|end| end > MAX_PADDR) {
            return Err(format!(
                "paddr: {paddr:#x} for {addr:#x} (address space {asid}) puts its {label} page past physical memory"
            ));
        }
        Ok(run)
    }

    /// A map event places `addr`, in large page `(start, shift)` of `asid`, at physical
    /// address `paddr`: the page's run becomes the aligned run that puts it there (claimed,
    /// and allocated from the pool when `new`), and the page's other parts mapped elsewhere
    /// move with it (remapped), as the table will map the whole page there.
    fn move_run(
        &mut self,
        asid: u32,
        (start, shift): (u64, u32),
        addr: u64,
        paddr: u64,
        new: bool,
    ) -> std::result::Result<(), String> {
        let run = self.run_placing(asid, (start, shift), addr, paddr)?;
        let page = self.vm.vac().params().page;
        let frames = (1u64 << shift) / page;
        if new {
            self.vm.allocate_run(run, frames);
        } else {
            self.vm.claim_run(run, frames);
        }
        if self
            .runs
            .insert((asid, start), run)
            .is_some_and(|old| old != run)
        {
            let part = addr & !(page - 1);
            for i in 0..frames {
                let va = start + i * page;
                if va != part && self.vm.mapped(asid, va).is_some() {
                    self.vm.remap(asid, va, run + i * page)?;
                }
            }
        }
        Ok(())
    }

    /// An unmap event of `addr`, in large page `(start, shift)` of `asid`, removes the page
    /// (as it does from the TLBs and the table): each of its parts mapped, and its run, which
    /// goes back to the pool when the page is destroyed (`dead`).
    fn unmap_large(
        &mut self,
        asid: u32,
        (start, shift): (u64, u32),
        addr: u64,
        dead: bool,
    ) -> std::result::Result<(), String> {
        let page = self.vm.vac().params().page;
        let Some(run) = self.runs.remove(&(asid, start)) else {
            // No run, so no part mapped: the OS's refusal.
            return self.vm.unmap(asid, addr & !(page - 1), dead).map(drop);
        };
        let frames = (1u64 << shift) / page;
        for i in 0..frames {
            let va = start + i * page;
            if self.vm.mapped(asid, va).is_some() {
                self.vm.unmap(asid, va, dead)?;
            }
        }
        if dead {
            self.vm.free_run(run, frames)?;
        }
        Ok(())
    }

    /// The `vac` section of a result.
    pub fn json(&self) -> Value {
        let p = self.vm.vac().params();
        json!({
            "cache": {"size": p.size, "ways": p.ways, "line": p.line, "page": p.page,
                      "indexing": p.indexing, "colours": self.vm.vac().colours()},
            "policy": self.vm.policy().name(),
            "timing": self.vm.timing().name,
            "mapping": self.mapping,
            "counts": self.counts,
            "lines": self.vm.cache_counts(),
            "primitives": self.vm.counts(),
            "elapsed_us": self.vm.elapsed_us(),
            "phases": self.phases(),
        })
    }
}

#[cfg(test)]
impl VacDriver {
    /// The run of frames of the large page of `asid` starting at `start`, if it has one.
    pub(crate) fn run_of(&self, asid: u32, start: u64) -> Option<u64> {
        self.runs.get(&(asid, start)).copied()
    }
}

/// The refusal of a first touch without a physical address under `mapping = "trace"`.
fn untraced(asid: u32, addr: u64) -> String {
    format!(
        "paddr: {addr:#x} (address space {asid}) is touched first by a reference without a \
         physical address (mapping = \"trace\" needs one)"
    )
}

/// A machine with a page table and a virtually addressed cache has one physical memory, the
/// VAC's OS's: the walker maps a faulting page to the frame this OS gave it, mapping it now
/// (by `mapping`, as on its first touch) if the VAC has not seen it — an instruction page,
/// which only the walker sees. With VAC pages larger than the walker's, a walker page is its
/// part of the VAC's frame; a page larger than the VAC's is its run of frames, taken now if
/// it has none (its parts are mapped as the VAC touches them).
impl crate::vm::PhysicalMemory for VacDriver {
    fn frame_for(&mut self, asid: u32, addr: u64, paddr: u64, shift: u32) -> Option<u64> {
        if self.error.is_some() {
            return None;
        }
        let page = self.vm.vac().params().page;
        let large = match asid {
            PHYSICAL => None,
            _ => self.large_page(asid, addr),
        };
        let physical = match large {
            Some((start, size)) => self
                .run(asid, (start, size), addr, paddr)
                .map(|run| Some(run + (addr - start))),
            None => self.touch(asid, addr, paddr).map(|at| match at {
                At::Virt(asid, va) => self.vm.frame_at(asid, va).map(|f| f | (va & (page - 1))),
                At::Phys(p) => Some(p),
            }),
        };
        match physical {
            Ok(p) => p.map(|p| p >> shift),
            Err(m) => {
                self.error = Some((self.seen, m));
                None
            }
        }
    }
}

/// Feed `source` to `d`, calling `at(label, d)` at each phase marker, before its phase
/// starts, so that a caller can look at the cache as one phase ends (what a measurement
/// leaves warm or dirty); the error is the first event the driver refused.
pub fn feed(
    d: &mut VacDriver,
    source: &mut dyn TraceSource,
    mut at: impl FnMut(&str, &VacDriver),
) -> std::result::Result<(), String> {
    let mut batch = Vec::new();
    while source.next_batch(&mut batch).map_err(|e| e.to_string())? {
        let mut from = 0;
        for (i, e) in batch.iter().enumerate() {
            if let Some(label) = e.phase_label() {
                d.run_batch(&batch[from..i]);
                at(&label, d);
                from = i;
            }
        }
        d.run_batch(&batch[from..]);
    }
    match d.error() {
        Some((n, m)) => Err(format!("event {n}: {m}")),
        None => Ok(()),
    }
}

/// The `vac` section of a result (as [`VacDriver::json`] makes it) as a few lines of text.
pub fn table(v: &Value) -> String {
    let n = |path: &[&str]| {
        path.iter()
            .try_fold(v, |v, p| v.get(*p))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let c = &v["cache"];
    let mut out = format!(
        "vac: {} KiB {}-way {}-byte lines, {}-indexed, {} colours; policy {}, first touch {}\n",
        n(&["cache", "size"]) >> 10,
        n(&["cache", "ways"]),
        n(&["cache", "line"]),
        c["indexing"].as_str().unwrap_or("?"),
        n(&["cache", "colours"]),
        v["policy"].as_str().unwrap_or("?"),
        v["mapping"].as_str().unwrap_or("?"),
    );
    out.push_str(&format!(
        "  lines: {} hits, {} misses, {} written back; flushes wrote {} dirty lines, purges \
         discarded {}\n",
        n(&["lines", "hits"]),
        n(&["lines", "misses"]),
        n(&["lines", "writebacks"]),
        n(&["lines", "flushed_dirty"]),
        n(&["lines", "purged_dirty"]),
    ));
    out.push_str(&format!(
        "  primitives: {} maps ({} on first touch), {} unmaps, {} remaps, {} protects ({} write \
         faults), {} copies, {} zeroes, {} pseudo page faults, {} flush and {} purge calls; \
         {:.1} µs\n",
        n(&["primitives", "maps"]),
        n(&["counts", "first_touch_maps"]),
        n(&["primitives", "unmaps"]),
        n(&["primitives", "remaps"]),
        n(&["primitives", "protects"]),
        n(&["counts", "write_faults"]),
        n(&["primitives", "copies"]),
        n(&["primitives", "zeros"]),
        n(&["primitives", "pseudo_faults"]),
        n(&["primitives", "flush_calls"]),
        n(&["primitives", "purge_calls"]),
        v["elapsed_us"].as_f64().unwrap_or(0.0),
    ));
    let phases: Vec<String> = v["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let count = p["count"].as_u64().unwrap_or(0).max(1);
            let us = p["us"].as_f64().unwrap_or(0.0);
            format!(
                "{} {} × {:.1} µs",
                p["phase"].as_str().unwrap_or("?"),
                count,
                us / count as f64
            )
        })
        .collect();
    if !phases.is_empty() {
        out.push_str(&format!("  phases: {}\n", phases.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn driver(mapping: FirstTouch) -> VacDriver {
        VacDriver::new(
            &VacParams::hp9000_834(),
            AliasPolicy::chorus(),
            Timing::preset("hp9000-834").unwrap(),
            mapping,
        )
        .unwrap()
    }

    /// A driver of 4 KiB pages (16 KiB, 2-way: 2 page colours; `size` and `ways` to change
    /// that) whose machine maps `large` pages (a shift) over `[from, to)`, 4 KiB ones elsewhere.
    fn with_large_pages(
        mapping: FirstTouch,
        (size, ways): (u64, usize),
        (from, to, large): (u64, u64, u32),
    ) -> VacDriver {
        let params = VacParams {
            size,
            ways,
            line: 32,
            page: 4096,
            policy: crate::tlb::Policy::Lru,
            indexing: super::super::Indexing::Virtual,
        };
        let timing = Timing::preset("hp9000-834").unwrap();
        let mut d = VacDriver::new(&params, AliasPolicy::chorus(), timing, mapping).unwrap();
        d.set_page_sizes(PageSizes {
            default: Some(12),
            regions: vec![(from, to, None, Some(large))],
            has_holes: false,
        });
        d
    }

    /// A 2 MiB page is an aligned run of 512 of the OS's 4 KiB frames, taken on its first
    /// touch (the lowest free one) and each part mapped at its place in it when touched; an
    /// unmap removes the whole page (a dead one returns the run to the pool), a map event
    /// moves it (its mapped parts follow), and one that no aligned run explains is refused.
    #[test]
    fn a_large_page_is_an_aligned_run_of_frames() {
        let mut d = with_large_pages(FirstTouch::Any, (16 << 10, 2), (0x20_0000, 0x60_0000, 21));
        let load = |a| Event::reference(Kind::Load, a, 4).with_asid(1);
        let unmap = |a, f| Event::control(Kind::Unmap, a, 1).with_flags(f);
        // Frame 0 goes to a 4 KiB page, so the first aligned free run is the second; the next
        // 4 KiB page takes frame 1, the next 2 MiB page the third run.
        d.run_batch(&[load(0x1000), load(0x20_5010), load(0x3000), load(0x41_0000)]);
        assert!(d.error().is_none(), "{:?}", d.error());
        let at = |d: &VacDriver, va| d.vm.frame_at(1, va);
        assert_eq!(at(&d, 0x1000), Some(0));
        assert_eq!(at(&d, 0x20_5000), Some(0x20_5000));
        assert_eq!(at(&d, 0x3000), Some(0x1000));
        assert_eq!(at(&d, 0x41_0000), Some(0x41_0000));
        assert_eq!(
            (d.run_of(1, 0x20_0000), d.run_of(1, 0x40_0000)),
            (Some(0x20_0000), Some(0x40_0000))
        );
        assert_eq!(
            (d.counts.first_touch_maps, d.vm.counts().page_allocs),
            (4, 4)
        );
        // Another part of the page: its place in the run, no new allocation.
        d.run_batch(&[load(0x3F_F000)]);
        assert_eq!(at(&d, 0x3F_F000), Some(0x3F_F000));
        assert_eq!(d.vm.counts().page_allocs, 4);
        // Destroying the page through one part removes both parts and frees the run, which
        // the page takes again (the lowest aligned free run); a 4 KiB page still goes below.
        d.run_batch(&[unmap(0x20_5000, flags::UNMAP_DEAD)]);
        assert_eq!(
            (at(&d, 0x20_5000), at(&d, 0x3F_F000), d.run_of(1, 0x20_0000)),
            (None, None, None)
        );
        assert_eq!((d.vm.counts().unmaps, d.vm.counts().page_frees), (2, 1));
        d.run_batch(&[load(0x5000), load(0x20_0008)]);
        assert_eq!(
            (at(&d, 0x5000), at(&d, 0x20_0000)),
            (Some(0x2000), Some(0x20_0000))
        );
        // A map event of part 3 of the other page to 0x80_3000 moves it to the run at
        // 0x80_0000: part 16, mapped, follows (a remap), part 3 is mapped there.
        let map = |va, pa| Event::control(Kind::Map, va, 1).with_paddr(pa);
        d.run_batch(&[map(0x40_3000, 0x80_3000)]);
        assert!(d.error().is_none(), "{:?}", d.error());
        assert_eq!(
            (at(&d, 0x40_3000), at(&d, 0x41_0000)),
            (Some(0x80_3000), Some(0x81_0000))
        );
        assert_eq!(
            (d.run_of(1, 0x40_0000), d.vm.counts().remaps),
            (Some(0x80_0000), 1)
        );
        // No aligned run puts part 4 at 0x90_5000.
        d.run_batch(&[map(0x40_4000, 0x90_5000)]);
        let (n, why) = d.error().unwrap();
        assert_eq!(*n, 10);
        assert!(
            why.starts_with(
                "paddr: 0x905000 for 0x404000 (address space 1) is not 0x4000 into an aligned run"
            ),
            "{why}"
        );
    }

    /// Colour and alignment agree: a large page's address is aligned to its size, so the
    /// lowest aligned run of its first part's colour gives every part its own page's colour.
    /// With 256 colours (1 MiB direct-mapped, 4 KiB pages), a 64 KiB page at 0x13_0000 has
    /// colour 0x30: its run starts at frame 0x30, or, that frame taken, at 0x130.
    #[test]
    fn a_large_page_keeps_its_colours() {
        let mut d = with_large_pages(FirstTouch::Colour, (1 << 20, 1), (0x10_0000, 0x20_0000, 16));
        let load = |a| Event::reference(Kind::Load, a, 4).with_asid(1);
        d.run_batch(&[load(0x13_2000)]);
        assert_eq!(d.vm.frame_at(1, 0x13_2000), Some(0x3_2000));
        let mut d = with_large_pages(FirstTouch::Colour, (1 << 20, 1), (0x10_0000, 0x20_0000, 16));
        d.run_batch(&[load(0x3_0000), load(0x13_2000), load(0x13_F000)]);
        assert!(d.error().is_none(), "{:?}", d.error());
        assert_eq!(d.vm.frame_at(1, 0x3_0000), Some(0x3_0000));
        assert_eq!(d.run_of(1, 0x13_0000), Some(0x13_0000));
        for va in [0x13_2000, 0x13_F000] {
            let f = d.vm.frame_at(1, va).unwrap();
            assert_eq!((f, d.vm.vac().colour(f)), (va, d.vm.vac().colour(va)));
        }
    }

    /// With `mapping = "trace"`, the traced physical address of the first part touched
    /// places the run; one that is not at that part's place in an aligned run is refused.
    #[test]
    fn a_traced_large_page_is_where_the_trace_puts_it() {
        let mut d = with_large_pages(FirstTouch::Trace, (16 << 10, 2), (0x20_0000, 0x60_0000, 21));
        let load = |a, pa| {
            Event::reference(Kind::Load, a, 4)
                .with_asid(1)
                .with_paddr(pa)
        };
        d.run_batch(&[load(0x20_1234, 0x40_1234), load(0x20_9000, NO_PADDR)]);
        assert!(d.error().is_none(), "{:?}", d.error());
        assert_eq!(d.vm.frame_at(1, 0x20_9000), Some(0x40_9000));
        d.run_batch(&[load(0x40_1234, 0x40_2234)]);
        assert!(
            d.error()
                .unwrap()
                .1
                .starts_with("paddr: 0x402234 for 0x401234 (address space 1) is not 0x1234 into"),
            "{:?}",
            d.error()
        );
    }

    #[test]
    fn references_map_pages_on_first_touch_and_hit_after() {
        let mut d = driver(FirstTouch::Any);
        let load = |a| Event::reference(Kind::Load, a, 4).with_asid(1);
        d.run_batch(&[
            load(0x1000),
            load(0x1004),
            Event::reference(Kind::Store, 0x1008, 4).with_asid(1),
            Event::reference(Kind::Fetch, 0x9000, 4).with_asid(1),
            load(0x5000),
        ]);
        assert!(d.error().is_none());
        assert_eq!(d.counts.first_touch_maps, 2);
        assert_eq!((d.counts.loads, d.counts.stores), (3, 1));
        let c = d.vm.cache_counts();
        // One 32-byte line for 0x1000..0x100c, one for 0x5000: two cold misses.
        assert_eq!((c.misses, c.hits), (2, 2));
        assert_eq!(d.vm.frame_at(1, 0x1000), Some(0));
        assert_eq!(d.vm.frame_at(1, 0x5000), Some(2 << 10));
        // A frame a map event names is not handed out again.
        d.run_batch(&[
            Event::control(Kind::Map, 0x7000, 1).with_paddr(0x1000),
            load(0x9000),
        ]);
        assert_eq!(d.vm.frame_at(1, 0x9000), Some(0x1800));
    }

    #[test]
    fn a_store_to_a_protected_page_is_a_write_fault() {
        let mut d = driver(FirstTouch::Any);
        let store = Event::reference(Kind::Store, 0x1010, 4).with_asid(1);
        d.run_batch(&[
            store,
            Event::control(Kind::Protect, 0x1000, 1),
            Event::reference(Kind::Load, 0x1010, 4).with_asid(1),
            store,
            store,
        ]);
        assert!(d.error().is_none(), "{:?}", d.error());
        assert_eq!(d.counts.write_faults, 1);
        // The protection change and the write fault's.
        assert_eq!(d.vm.counts().protects, 2);
    }

    #[test]
    fn flags_refine_maps_unmaps_protects_and_copies() {
        let mut d = driver(FirstTouch::Any);
        let map = |asid, va, frame, f| {
            Event::control(Kind::Map, va, asid)
                .with_paddr(frame)
                .with_flags(f)
        };
        let load = |asid, a| Event::reference(Kind::Load, a, 4).with_asid(asid);
        let store = |asid, a| Event::reference(Kind::Store, a, 4).with_asid(asid);
        d.run_batch(&[
            map(1, 0x1000, 0x8000, flags::MAP_EAGER | flags::MAP_NEW_FRAME),
            store(1, 0x1000),
            map(2, 0x3000, 0x8000, flags::MAP_READ_ONLY),
            load(2, 0x3000),
        ]);
        assert!(d.error().is_none(), "{:?}", d.error());
        let c = d.vm.counts();
        // The eager mapping took no fault; the lazy one did, and flushed the first's line.
        assert_eq!((c.page_allocs, c.pseudo_faults, c.flushed.dirty), (1, 1, 1));
        assert!(!d.vm.writable(2, 0x3000));
        d.run_batch(&[store(2, 0x3000)]);
        assert_eq!(d.counts.write_faults, 1);
        d.run_batch(&[
            Event::control(Kind::Protect, 0x3000, 2),
            Event::control(Kind::Protect, 0x3000, 2).with_flags(flags::PROTECT_WRITABLE),
        ]);
        assert!(d.vm.writable(2, 0x3000));
        // A destroyed page's frame goes back to the pool: the next first touch gets it.
        d.run_batch(&[
            Event::control(Kind::Unmap, 0x1000, 1),
            Event::control(Kind::Unmap, 0x3000, 2).with_flags(flags::UNMAP_DEAD),
        ]);
        assert!(d.error().is_none(), "{:?}", d.error());
        assert_eq!(d.vm.counts().page_frees, 1);
        // A kilobyte copied between two address spaces' mappings; then a physical access and
        // the unload of the frame's physical alias.
        let from = CopySource::Virtual(1, 0x5000);
        d.run_batch(&[
            store(1, 0x5000),
            Event::copy_page(2, 0x9000, from, 1024).unwrap(),
            load(PHYSICAL, 0x7_0000),
            Event::control(Kind::Unmap, 0x7_0000, PHYSICAL),
        ]);
        assert!(d.error().is_none(), "{:?}", d.error());
        let c = d.vm.counts();
        // Misses: the two stores and the load before, the copy's 31 source lines (the
        // sender's first line is cached) and 32 destination lines, the physical load.
        assert_eq!(
            (c.copies, c.loads, c.misses),
            (1, 2, 1 + 1 + 1 + 31 + 32 + 1)
        );
        let flushes = c.flush_calls;
        assert_eq!(d.vm.mapped(2, 0x9000), Some(true));
        d.run_batch(&[
            load(PHYSICAL, 0x7_0000),
            Event::control(Kind::Unmap, 0x7_0000, PHYSICAL),
        ]);
        assert_eq!(d.vm.counts().flush_calls, flushes + 1);
        // A copy with no source is refused.
        d.run_batch(&[Event::control(Kind::CopyPage, 0x9000, 2)]);
        assert!(d.error().unwrap().1.contains("gives no source"));
    }

    #[test]
    fn phases_add_up_what_each_labelled_part_cost() {
        let mut d = driver(FirstTouch::Any);
        let store = |a| Event::reference(Kind::Store, a, 4).with_asid(1);
        d.run_batch(&[
            Event::phase("set"),
            store(0x1000),
            Event::phase("send"),
            store(0x2000),
            Event::control(Kind::ZeroPage, 0x3000, 1),
            Event::phase("set"),
            store(0x4000),
            Event::phase("send"),
        ]);
        d.run_batch(&[store(0x5000)]);
        assert!(d.error().is_none(), "{:?}", d.error());
        let p = d.phases();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].phase.as_str(), p[0].count), ("set", 2));
        assert_eq!((p[1].phase.as_str(), p[1].count), ("send", 2));
        assert_eq!(p[1].primitives.zeros, 1);
        assert_eq!(p[0].primitives.stores + p[1].primitives.stores, 4);
        let total = p[0].us + p[1].us;
        assert!((total - d.vm.elapsed_us()).abs() < 1e-9);
        let v = d.json();
        assert_eq!(v["phases"][1]["count"], 2);
        assert!(table(&v).contains("phases: set 2 × "), "{}", table(&v));
    }

    #[test]
    fn colour_mapping_keeps_aliases_cache_aligned() {
        let mut d = driver(FirstTouch::Colour);
        d.run_batch(&[Event::reference(Kind::Load, 0x3_0800, 4).with_asid(2)]);
        let frame = d.vm.frame_at(2, 0x3_0800).unwrap();
        assert_eq!(d.vm.vac().colour(frame), d.vm.vac().colour(0x3_0800));
    }

    #[test]
    fn copies_and_zeroes_are_priced_from_the_cache() {
        let mut d = driver(FirstTouch::Any);
        let page = 2 << 10;
        d.run_batch(&[
            Event::control(Kind::ZeroPage, 0x8000, 1),
            Event::control(Kind::CopyPage, 0xA000, 1).with_paddr(0x10_0000),
        ]);
        assert!(d.error().is_none(), "{:?}", d.error());
        let p = d.vm.counts();
        assert_eq!((p.zeros, p.copies), (1, 1));
        // Zeroing missed every line of the page; the copy missed every source and
        // destination line (the source frame is cold, and the destination page is new).
        let lines = page / 32;
        assert_eq!(d.vm.cache_counts().misses, 3 * lines);
        assert!(d.vm.elapsed_us() > 0.0);
    }

    #[test]
    fn a_machine_feeds_its_vac_every_event_and_its_tlbs_are_unchanged() {
        use crate::machine::Machine;
        let tlb = "[[tlb]]\nname = \"dtlb\"\nentries = 16\n";
        let vac = "[vac]\npolicy = \"pseudo-aliasing+purge\"\nmapping = \"colour\"\n";
        let mut rng = crate::tlb::SplitMix64::new(3);
        let mut events = Vec::new();
        for i in 0..5000u64 {
            let r = rng.next_u64();
            let (asid, addr) = ((r % 3) as u32, (r >> 8) % (64 << 10));
            events.push(match i % 97 {
                0 => Event::control(Kind::ZeroPage, addr, asid),
                1 => Event::control(Kind::CopyPage, addr, asid)
                    .with_paddr(0x40_0000 + (r >> 40) % 16 * 2048),
                2 => Event::control(Kind::ContextSwitch, 0, asid),
                _ if r.is_multiple_of(4) => Event::reference(Kind::Store, addr, 4).with_asid(asid),
                _ => Event::reference(Kind::Load, addr, 4).with_asid(asid),
            });
        }
        let mut with = Machine::assemble(Some(&format!("{tlb}{vac}")), "m.toml", &[], &[]).unwrap();
        let mut without = Machine::assemble(Some(tlb), "m.toml", &[], &[]).unwrap();
        let mut alone = VacDriver::from_config(with.config().vac.as_ref().unwrap(), "m").unwrap();
        for chunk in events.chunks(700) {
            with.run_batch(chunk);
            without.run_batch(chunk);
            alone.run_batch(chunk);
        }
        assert!(with.refused().is_none());
        assert_eq!(with.vac().unwrap().json(), alone.json());
        let all = |m: &Machine| m.ledger().total(0, |_, _, _| true);
        assert_eq!(all(&with), all(&without));
        assert!(all(&with).misses > 0);
        let v = alone.json();
        assert!(v["primitives"]["copies"].as_u64().unwrap() > 40);
        assert!(v["lines"]["misses"].as_u64().unwrap() > 0);
        let cfg = VacConfig {
            ways: 3,
            ..with.config().vac.clone().unwrap()
        };
        let e = VacDriver::from_config(&cfg, "m.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("m.toml: vac.size: "), "{e}");
        let cfg = VacConfig {
            policy: "pseudo-aliasing+fast".into(),
            ..cfg
        };
        let e = VacDriver::from_config(&VacConfig { ways: 2, ..cfg }, "m.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("m.toml: vac.policy: option 'fast'"),
            "{e}"
        );
    }

    #[test]
    fn a_refused_event_fails_the_run_naming_the_trace_and_the_event() {
        use crate::machine::Machine;
        use crate::run::{simulate_path, Reading};
        let dir = crate::trace::tests::scratch("vac-refused");
        let path = dir.join("t.lks");
        let mut sink =
            crate::trace::create(&path, None, &crate::trace::Metadata::default()).unwrap();
        sink.write_batch(&[
            Event::reference(Kind::Load, 0x1000, 4),
            Event::control(Kind::ZeroPage, 0x1000, 0),
            Event::control(Kind::Unmap, 0x8000, 0),
        ])
        .unwrap();
        sink.finish().unwrap();
        let text = "[[tlb]]\nname = \"t\"\nentries = 8\n[vac]\n";
        for reading in [Reading::OneThread, Reading::Pipelined] {
            let mut m = Machine::assemble(Some(text), "m.toml", &[], &[]).unwrap();
            let e = simulate_path(&path, None, &mut m, reading, &mut |_| true)
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!(
                    "{}: event 3: vac: va: 0x8000 is not mapped in address space 0",
                    path.display()
                )
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn refused_primitives_are_errors_naming_the_event() {
        let mut d = driver(FirstTouch::Any);
        d.run_batch(&[
            Event::reference(Kind::Load, 0x1000, 4),
            Event::control(Kind::Unmap, 0x4000, 0),
            Event::control(Kind::Unmap, 0x8000, 0),
        ]);
        let (at, msg) = d.error().unwrap();
        assert_eq!(*at, 2);
        assert!(msg.contains("not mapped"), "{msg}");
        let mut d = driver(FirstTouch::Trace);
        d.run_batch(&[Event::reference(Kind::Load, 0x1000, 4)]);
        assert!(d
            .error()
            .unwrap()
            .1
            .contains("mapping = \"trace\" needs one"));
        let mut d = driver(FirstTouch::Trace);
        d.run_batch(&[Event::reference(Kind::Load, 0x1234, 4).with_paddr(0x7_7234)]);
        assert_eq!(d.vm.frame_at(0, 0x1000), Some(0x7_7000 & !0x7ff));
        // A stream made for another page size is refused, not priced.
        let mut d = driver(FirstTouch::Any);
        d.run_batch(&[Event::vm_page(2 << 10), Event::vm_page(4 << 10)]);
        let (at, msg) = d.error().unwrap();
        assert_eq!(*at, 2);
        assert!(
            msg.contains("4096-byte pages") && msg.contains("2048 bytes"),
            "{msg}"
        );
    }
}
