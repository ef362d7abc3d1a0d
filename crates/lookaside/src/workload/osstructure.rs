//! OS-structure workloads of Uhlig et al. (TOCS 1994, section 4.2): one application making
//! system calls, served by four structures of operating system, so that the same work shows
//! how structure alone changes the software-managed TLB's misses:
//!
//! * [`OsStructure::MonolithicUnmapped`] (Ultrix-like): the kernel serves the call in the
//!   caller's context, its data in kseg0 — no TLB misses of its own.
//! * [`OsStructure::MonolithicMapped`] (OSF/1-like): the same, with the kernel's data mapped in
//!   kseg2 — L1K misses, with their nested L3s.
//! * [`OsStructure::Microkernel`] (Mach 3.0-like): the call is an IPC to a user-level server
//!   (service migration): the kernel's IPC path, a switch to the server, which touches its
//!   own pages and the kernel data the service needs, and the reply.
//! * [`OsStructure::Decomposed`] (Mach3+AFSout-like): as the microkernel, but the server passes
//!   every `forward_every`-th call on to a second server (the AFS cache manager moved out of
//!   the UNIX server), one more round trip and one more address space.
//!
//! Between calls the application computes over its own pages (text, data and stack in three
//! 4 MB regions). Addresses follow [`crate::mmu::layout`]; the application is address space 1,
//! the servers 2 and 3. Deterministic for a seed; generated in batches at constant memory.
//!
//! The application can instead be a real program ([`OsWorkload::over_trace`]): its user-mode
//! references come from a trace, and the operating system serves a call at each of the
//! program's own system calls (the markers `lookaside trace` records under QEMU) or, for a
//! trace without them, one every N references. The program's 64-bit addresses are placed
//! into the 2 GB of kuseg by [`RegionFold`].

use crate::error::{Error, Location, Result};
use crate::event::{Event, Kind, Mode, BATCH};
use crate::mmu::layout::{KSEG0, KSEG2};
use crate::tlb::SplitMix64;
use crate::trace::TraceSource;

/// How the operating system is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Deserialize)]
pub enum OsStructure {
    #[serde(rename = "monolithic", alias = "monolithic-unmapped")]
    MonolithicUnmapped,
    #[serde(rename = "monolithic-mapped")]
    MonolithicMapped,
    #[serde(rename = "microkernel")]
    Microkernel,
    #[serde(rename = "decomposed")]
    Decomposed,
}

/// Parameters of the application and its calls.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OsWorkloadParams {
    pub structure: OsStructure,
    /// System calls to make.
    pub syscalls: u64,
    /// The application's working set, in pages (split over text, data and stack).
    pub app_pages: u32,
    /// Pages of it touched between two calls.
    pub burst_pages: u32,
    /// Kernel-data pages a call's service touches (kseg0 or kseg2 by structure).
    pub kernel_pages: u32,
    /// Mapped kernel-data pages of the IPC path (microkernel and decomposed).
    pub ipc_pages: u32,
    /// Pages a server touches per call.
    pub server_pages: u32,
    /// Decomposed: every this-many-th call goes on to the second server.
    pub forward_every: u32,
    pub refs_per_page: u32,
    pub seed: u64,
}

impl Default for OsWorkloadParams {
    fn default() -> Self {
        OsWorkloadParams {
            structure: OsStructure::Microkernel,
            syscalls: 1000,
            app_pages: 96,
            burst_pages: 16,
            kernel_pages: 6,
            ipc_pages: 3,
            server_pages: 9,
            forward_every: 2,
            refs_per_page: 8,
            seed: 1,
        }
    }
}

const TEXT: u64 = 0x0040_0000;
const DATA: u64 = 0x1000_0000;
const STACK_TOP: u64 = 0x7FFF_F000;
const REGION: u64 = 4 << 20;
/// The kernel's service data: in kseg0 (unmapped) or from kseg2 (mapped), two 4 MB regions.
const KDATA_UNMAPPED: u64 = KSEG0 + 0x0040_0000;
/// The IPC path's data, after the service data in the first kseg2 region.
const KIPC: u64 = KSEG2 + 0x0020_0000;

/// Bytes of the regions [`RegionFold`] places (one page of L1U PTEs maps 4 MB).
const FOLD_SHIFT: u32 = 22;
/// Regions kuseg holds.
const KUSEG_REGIONS: usize = (KSEG0 >> FOLD_SHIFT) as usize;

/// Places a 64-bit program's addresses into MIPS kuseg: each 4 MB region the program touches
/// gets the next free 4 MB region of kuseg, in order of first touch. Page offsets, pages and
/// what one page of L1U PTEs maps (4 MB) stay as the program had them, so its L1U and L2
/// misses are its own; only where its regions lie changes. (A reference whose bytes cross a
/// 4 MB boundary continues into the next kuseg region, which may hold another of the
/// program's regions: rare, and at most one extra page.)
#[derive(Clone, Debug)]
pub struct RegionFold {
    /// The program's region numbers, by the kuseg region they were given.
    from: Vec<u64>,
    /// The last (program region, kuseg region) placed.
    last: (u64, u64),
}

impl Default for RegionFold {
    fn default() -> Self {
        RegionFold {
            from: Vec::new(),
            last: (u64::MAX, 0),
        }
    }
}

impl RegionFold {
    /// The kuseg address of `addr`; `None` once the program has touched more regions than
    /// kuseg holds (512).
    #[inline]
    pub fn place(&mut self, addr: u64) -> Option<u64> {
        let region = addr >> FOLD_SHIFT;
        if region != self.last.0 {
            let slot = match self.from.iter().position(|&r| r == region) {
                Some(s) => s,
                None if self.from.len() < KUSEG_REGIONS => {
                    self.from.push(region);
                    self.from.len() - 1
                }
                None => return None,
            };
            self.last = (region, slot as u64);
        }
        Some(self.last.1 << FOLD_SHIFT | addr & ((1 << FOLD_SHIFT) - 1))
    }
}

/// A real program as the application: its trace, read in batches.
struct TracedApp {
    source: Box<dyn TraceSource + Send>,
    /// The trace's name, for messages.
    name: String,
    /// Inject a call every this many of the program's references, instead of serving the
    /// trace's system-call markers.
    every: Option<u64>,
    batch: Vec<Event>,
    pos: usize,
    done: bool,
    fold: RegionFold,
    /// The program's references since the last injected call.
    since: u64,
    /// The program's address space in the trace (the first one seen).
    asid: Option<u32>,
    /// Events of the trace read so far.
    read: u64,
}

/// Where the application's references come from.
enum App {
    /// The model: `burst_pages` random pages of the working set between two calls.
    Model,
    /// A real program's trace.
    Trace(Box<TracedApp>),
}

/// The application and its operating system as an event source.
pub struct OsWorkload {
    p: OsWorkloadParams,
    call: u64,
    rng: SplitMix64,
    cur: u32,
    app: App,
    started: bool,
    /// The user page the kernel copies to and from in a monolithic call (copyin/copyout):
    /// the model's data page, or the page of the program's last load or store.
    user_buffer: u64,
}

impl OsWorkload {
    pub fn new(p: OsWorkloadParams) -> OsWorkload {
        OsWorkload {
            rng: SplitMix64::new(p.seed),
            p,
            call: 0,
            cur: 1,
            app: App::Model,
            started: false,
            user_buffer: DATA,
        }
    }

    /// A real program under the operating system `p.structure` describes: the user-mode
    /// references of `source` (named `name` in messages) are the application's, placed into
    /// kuseg by [`RegionFold`], in address space 1; the OS serves a call at each system-call
    /// marker of the trace, or, with `every`, after every `every` references (the markers are
    /// then ignored). Kernel-mode references and control events of the trace are left out
    /// (the model's kernel replaces the traced one). `p.syscalls`, `p.app_pages` and
    /// `p.burst_pages` are not used. A trace with user references of two address spaces, or
    /// whose program touches more than 512 4 MB regions, is an error, as is a trace without
    /// a single system-call marker when `every` is not given.
    pub fn over_trace(
        p: OsWorkloadParams,
        source: Box<dyn TraceSource + Send>,
        name: impl Into<String>,
        every: Option<u64>,
    ) -> OsWorkload {
        let mut w = OsWorkload::new(p);
        w.app = App::Trace(Box::new(TracedApp {
            source,
            name: name.into(),
            every: every.filter(|&n| n > 0),
            batch: Vec::with_capacity(BATCH),
            pos: 0,
            done: false,
            fold: RegionFold::default(),
            since: 0,
            asid: None,
            read: 0,
        }));
        w
    }

    /// System calls served so far.
    pub fn calls(&self) -> u64 {
        self.call
    }

    fn random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn refs(&self, kind: Kind, page: u64, mode: Mode, out: &mut Vec<Event>) {
        for r in 0..self.p.refs_per_page.max(1) as u64 {
            out.push(
                Event::reference(kind, page + 8 * r, 4)
                    .with_mode(mode)
                    .with_asid(self.cur),
            );
        }
    }

    /// Page `i` of a task's working set: text, data and stack in turn.
    fn user_page(i: u64) -> (Kind, u64) {
        let k = i / 3;
        match i % 3 {
            0 => (Kind::Fetch, TEXT + k * 4096),
            1 => (Kind::Load, DATA + k * 4096),
            _ => (Kind::Store, STACK_TOP - k * 4096),
        }
    }

    fn switch(&mut self, to: u32, out: &mut Vec<Event>) {
        out.push(Event::control(Kind::ContextSwitch, 0, to));
        self.cur = to;
    }

    /// The kernel data a call's service touches: page `j` of `n`, over two regions.
    fn service_data(&self, mapped: bool, out: &mut Vec<Event>) {
        for j in 0..self.p.kernel_pages as u64 {
            let page = if mapped {
                KSEG2 + (j % 2) * REGION + (j / 2) * 4096
            } else {
                KDATA_UNMAPPED + j * 4096
            };
            let kind = if j % 3 == 2 { Kind::Store } else { Kind::Load };
            self.refs(kind, page, Mode::Kernel, out);
        }
    }

    /// One IPC (send, then the receiver runs): the kernel's path in the sender's context.
    fn ipc(&mut self, to: u32, out: &mut Vec<Event>) {
        self.refs(Kind::Fetch, KSEG0 + 0x3_0000, Mode::Kernel, out);
        for j in 0..self.p.ipc_pages as u64 {
            self.refs(Kind::Load, KIPC + j * 4096, Mode::Kernel, out);
        }
        self.switch(to, out);
    }

    /// A server's work on a call: its own pages.
    fn serve(&mut self, out: &mut Vec<Event>) {
        for i in 0..self.p.server_pages as u64 {
            let (kind, page) = Self::user_page(i);
            self.refs(kind, page, Mode::User, out);
        }
    }

    /// The model's application computes, then calls.
    fn one_call(&mut self, out: &mut Vec<Event>) {
        for _ in 0..self.p.burst_pages {
            let i = self.random() % self.p.app_pages.max(1) as u64;
            let (kind, page) = Self::user_page(i);
            self.refs(kind, page, Mode::User, out);
        }
        self.serve_call(out);
    }

    /// The operating system serves one system call of the application.
    fn serve_call(&mut self, out: &mut Vec<Event>) {
        self.call += 1;
        match self.p.structure {
            OsStructure::MonolithicUnmapped | OsStructure::MonolithicMapped => {
                self.refs(Kind::Fetch, KSEG0 + 0x1_0000, Mode::Kernel, out);
                let mapped = self.p.structure == OsStructure::MonolithicMapped;
                self.service_data(mapped, out);
                // copyin/copyout: the kernel touches the caller's buffer.
                self.refs(Kind::Store, self.user_buffer, Mode::Kernel, out);
            }
            OsStructure::Microkernel | OsStructure::Decomposed => {
                self.ipc(2, out);
                self.serve(out);
                // The server still uses some mapped kernel data (Mach: "some").
                self.service_data(true, out);
                // (`call` counts this call already: the first call is number 0.)
                let forward = self.p.structure == OsStructure::Decomposed
                    && (self.call - 1).is_multiple_of(self.p.forward_every.max(1) as u64);
                if forward {
                    self.ipc(3, out);
                    self.serve(out);
                    self.ipc(2, out);
                }
                self.ipc(1, out);
            }
        }
    }

    /// The traced program runs until `out` holds a batch, the OS serving its calls.
    fn run_traced(&mut self, t: &mut TracedApp, out: &mut Vec<Event>) -> Result<()> {
        let err = |t: &TracedApp, msg: String| {
            Error::trace(&t.name, Location::Event(t.read), "workload:os", msg)
        };
        while out.len() < BATCH {
            if t.pos == t.batch.len() {
                t.pos = 0;
                if t.done || !t.source.next_batch(&mut t.batch)? {
                    t.done = true;
                    break;
                }
            }
            let e = t.batch[t.pos];
            t.pos += 1;
            t.read += 1;
            if e.syscall_number().is_some() {
                if t.every.is_none() {
                    self.serve_call(out);
                }
                continue;
            }
            if !e.kind.is_ref() || e.mode == Mode::Kernel {
                continue;
            }
            match t.asid {
                None => t.asid = Some(e.asid),
                Some(a) if a != e.asid => {
                    return Err(err(
                        t,
                        format!(
                            "user references of address spaces {a} and {} (the OS model runs one program)",
                            e.asid
                        ),
                    ))
                }
                Some(_) => {}
            }
            let Some(addr) = t.fold.place(e.addr) else {
                return Err(err(
                    t,
                    format!(
                        "the program touches more than {KUSEG_REGIONS} regions of 4 MB, more than kuseg holds"
                    ),
                ));
            };
            if e.kind != Kind::Fetch {
                self.user_buffer = addr & !0xFFF;
            }
            out.push(
                Event::reference(e.kind, addr, e.size)
                    .with_mode(Mode::User)
                    .with_asid(self.cur),
            );
            if let Some(n) = t.every {
                t.since += 1;
                if t.since == n {
                    t.since = 0;
                    self.serve_call(out);
                }
            }
        }
        if t.done && t.every.is_none() && self.call == 0 && t.asid.is_some() {
            return Err(err(
                t,
                "the trace has no system-call markers (`lookaside trace` records them under \
                 QEMU); give every=N to inject a call every N references"
                    .into(),
            ));
        }
        Ok(())
    }
}

impl TraceSource for OsWorkload {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        match std::mem::replace(&mut self.app, App::Model) {
            App::Model => {
                if !self.started && self.p.syscalls > 0 {
                    out.push(Event::control(Kind::ContextSwitch, 0, 1));
                }
                self.started = true;
                while out.len() < BATCH && self.call < self.p.syscalls {
                    self.one_call(out);
                }
            }
            App::Trace(mut t) => {
                if !self.started {
                    out.push(Event::control(Kind::ContextSwitch, 0, 1));
                    self.started = true;
                }
                let r = self.run_traced(&mut t, out);
                self.app = App::Trace(t);
                r?;
                if out.len() == 1 && self.call == 0 && out[0].kind == Kind::ContextSwitch {
                    // An empty trace: nothing to switch to.
                    out.clear();
                }
            }
        }
        Ok(!out.is_empty())
    }

    fn bytes_read(&self) -> u64 {
        match &self.app {
            App::Model => 0,
            App::Trace(t) => t.source.bytes_read(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn all(p: OsWorkloadParams) -> Vec<Event> {
        crate::workload::drain(&mut OsWorkload::new(p))
    }

    #[test]
    fn structures_differ_only_in_how_calls_are_served() {
        let spaces = |s| {
            let mut a: Vec<u32> = all(OsWorkloadParams {
                structure: s,
                syscalls: 20,
                ..OsWorkloadParams::default()
            })
            .iter()
            .map(|e| e.asid)
            .collect();
            a.sort_unstable();
            a.dedup();
            a
        };
        assert_eq!(spaces(OsStructure::MonolithicUnmapped), [1]);
        assert_eq!(spaces(OsStructure::MonolithicMapped), [1]);
        assert_eq!(spaces(OsStructure::Microkernel), [1, 2]);
        assert_eq!(spaces(OsStructure::Decomposed), [1, 2, 3]);
        let unmapped = all(OsWorkloadParams {
            structure: OsStructure::MonolithicUnmapped,
            ..OsWorkloadParams::default()
        });
        assert!(unmapped
            .iter()
            .filter(|e| e.mode == Mode::Kernel)
            .all(|e| e.addr < KSEG2));
        let p = OsWorkloadParams::default();
        assert_eq!(all(p.clone()), all(p));
    }

    use crate::trace::tests::VecSource;

    fn traced(
        structure: OsStructure,
        events: Vec<Event>,
        every: Option<u64>,
    ) -> Result<Vec<Event>> {
        let p = OsWorkloadParams {
            structure,
            refs_per_page: 1,
            ..OsWorkloadParams::default()
        };
        let mut w = OsWorkload::over_trace(p, Box::new(VecSource::new(events, 3)), "t.lks", every);
        let (mut batch, mut all) = (Vec::new(), Vec::new());
        while w.next_batch(&mut batch)? {
            all.extend_from_slice(&batch);
        }
        Ok(all)
    }

    /// A program's events: two references, a call, a store, a call.
    fn program() -> Vec<Event> {
        vec![
            Event::reference(Kind::Fetch, 0x5555_5555_4123, 4),
            Event::reference(Kind::Load, 0x7ffd_1234_5678, 8),
            Event::syscall(0, 0),
            Event::reference(Kind::Store, 0x5555_5555_4ff8, 8),
            Event::reference(Kind::Load, 0xffff_ffff_8100_0000, 8).with_mode(Mode::Kernel),
            Event::control(Kind::ContextSwitch, 0, 0),
            Event::syscall(1, 0),
        ]
    }

    #[test]
    fn regions_keep_their_offsets_in_first_touch_order() {
        let mut f = RegionFold::default();
        assert_eq!(f.place(0x7ffd_1234_5678), Some(0x0034_5678));
        assert_eq!(
            f.place(0x5555_5555_4123),
            Some(0x0055_4123 - 0x0040_0000 + (1 << 22))
        );
        assert_eq!(f.place(0x7ffd_1200_0000), Some(0));
        // Distinct pages stay distinct, and kuseg holds 512 regions.
        let mut f = RegionFold::default();
        let mut seen = std::collections::HashMap::new();
        let mut rng = SplitMix64::new(7);
        for _ in 0..20_000 {
            let page = (rng.next_u64() % 600) << 22 | (rng.next_u64() % 8) << 12;
            match f.place(page) {
                Some(a) => {
                    assert!(a < KSEG0 && a & 0x3F_FFFF == page & 0x3F_FFFF);
                    assert_eq!(*seen.entry(a).or_insert(page), page);
                }
                None => assert_eq!(f.from.len(), KUSEG_REGIONS),
            }
        }
        assert_eq!(f.from.len(), KUSEG_REGIONS);
    }

    #[test]
    fn a_program_calls_at_its_own_system_calls() {
        let all = traced(OsStructure::MonolithicUnmapped, program(), None).unwrap();
        let user: Vec<Event> = all
            .iter()
            .filter(|e| e.mode == Mode::User)
            .copied()
            .collect();
        // The program's user references, folded, in address space 1; the kernel reference and
        // the trace's own switch are left out.
        assert_eq!(
            user,
            [
                Event::reference(Kind::Fetch, 0x15_4123, 4).with_asid(1),
                Event::reference(Kind::Load, (1 << 22) | 0x34_5678, 8).with_asid(1),
                Event::reference(Kind::Store, 0x15_4ff8, 8).with_asid(1),
            ]
        );
        // Two calls, each: the kernel's entry, its 6 service pages, copyin/copyout on the page
        // of the program's last data reference.
        let kernel: Vec<&Event> = all
            .iter()
            .filter(|e| e.mode == Mode::Kernel && e.kind.is_ref())
            .collect();
        assert_eq!(kernel.len(), 2 * (1 + 6 + 1));
        assert_eq!(kernel[7].addr, (1 << 22) | 0x34_5000);
        assert_eq!(kernel[15].addr, 0x15_4000);
        assert_eq!(all[0], Event::control(Kind::ContextSwitch, 0, 1));
    }

    #[test]
    fn structures_serve_the_same_program() {
        let user = |s| -> Vec<Event> {
            traced(s, program(), None)
                .unwrap()
                .into_iter()
                .filter(|e| e.mode == Mode::User && e.asid == 1)
                .collect()
        };
        let mono = user(OsStructure::MonolithicUnmapped);
        for s in [
            OsStructure::MonolithicMapped,
            OsStructure::Microkernel,
            OsStructure::Decomposed,
        ] {
            assert_eq!(user(s), mono);
        }
        let spaces = |s| {
            let mut a: Vec<u32> = traced(s, program(), None)
                .unwrap()
                .iter()
                .map(|e| e.asid)
                .collect();
            a.sort_unstable();
            a.dedup();
            a
        };
        assert_eq!(spaces(OsStructure::Decomposed), [1, 2, 3]);
    }

    #[test]
    fn calls_are_injected_every_n_references_and_markers_then_ignored() {
        let calls = |every| {
            traced(OsStructure::Microkernel, program(), every)
                .unwrap()
                .iter()
                .filter(|e| e.kind == Kind::ContextSwitch && e.asid == 2)
                .count()
        };
        assert_eq!(
            (calls(None), calls(Some(1)), calls(Some(2)), calls(Some(4))),
            (2, 3, 1, 0)
        );
    }

    #[test]
    fn traces_the_model_cannot_run_are_errors() {
        let no_calls: Vec<Event> = program()
            .into_iter()
            .filter(|e| e.kind != Kind::Marker)
            .collect();
        let e = traced(OsStructure::Microkernel, no_calls, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("t.lks: event 5: workload:os: the trace has no system-call markers"),
            "{e}"
        );
        let mut two = program();
        two.push(Event::reference(Kind::Load, 0x1000, 4).with_asid(3));
        let e = traced(OsStructure::Microkernel, two, None)
            .unwrap_err()
            .to_string();
        assert_eq!(e, "t.lks: event 8: workload:os: user references of address spaces 0 and 3 (the OS model runs one program)");
        assert!(traced(OsStructure::Microkernel, Vec::new(), None)
            .unwrap()
            .is_empty());
    }
}
