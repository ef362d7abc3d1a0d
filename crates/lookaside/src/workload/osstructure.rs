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

use crate::error::Result;
use crate::event::{Event, Kind, Mode, BATCH};
use crate::mmu::layout::{KSEG0, KSEG2};
use crate::tlb::SplitMix64;
use crate::trace::TraceSource;

/// How the operating system is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OsStructure {
    MonolithicUnmapped,
    MonolithicMapped,
    Microkernel,
    Decomposed,
}

/// Parameters of the application and its calls.
#[derive(Clone, Debug, PartialEq, Eq)]
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

/// The application and its operating system as an event source.
#[derive(Clone, Debug)]
pub struct OsWorkload {
    p: OsWorkloadParams,
    call: u64,
    rng: SplitMix64,
    cur: u32,
}

impl OsWorkload {
    pub fn new(p: OsWorkloadParams) -> OsWorkload {
        OsWorkload {
            rng: SplitMix64::new(p.seed),
            p,
            call: 0,
            cur: 1,
        }
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

    fn one_call(&mut self, out: &mut Vec<Event>) {
        // The application computes.
        for _ in 0..self.p.burst_pages {
            let i = self.random() % self.p.app_pages.max(1) as u64;
            let (kind, page) = Self::user_page(i);
            self.refs(kind, page, Mode::User, out);
        }
        // The call.
        match self.p.structure {
            OsStructure::MonolithicUnmapped | OsStructure::MonolithicMapped => {
                self.refs(Kind::Fetch, KSEG0 + 0x1_0000, Mode::Kernel, out);
                let mapped = self.p.structure == OsStructure::MonolithicMapped;
                self.service_data(mapped, out);
                // copyin/copyout: the kernel touches the caller's buffer.
                self.refs(Kind::Store, DATA, Mode::Kernel, out);
            }
            OsStructure::Microkernel | OsStructure::Decomposed => {
                self.ipc(2, out);
                self.serve(out);
                // The server still uses some mapped kernel data (Mach: "some").
                self.service_data(true, out);
                let forward = self.p.structure == OsStructure::Decomposed
                    && self.call.is_multiple_of(self.p.forward_every.max(1) as u64);
                if forward {
                    self.ipc(3, out);
                    self.serve(out);
                    self.ipc(2, out);
                }
                self.ipc(1, out);
            }
        }
    }
}

impl TraceSource for OsWorkload {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        if self.call == 0 && self.p.syscalls > 0 {
            out.push(Event::control(Kind::ContextSwitch, 0, 1));
        }
        while out.len() < BATCH && self.call < self.p.syscalls {
            self.one_call(out);
            self.call += 1;
        }
        Ok(!out.is_empty())
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
}
