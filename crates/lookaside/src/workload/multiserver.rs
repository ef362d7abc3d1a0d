//! The multiserver token-passing workload of Uhlig et al. (TOCS 1994, Fig. 9): a client and
//! N user-level servers pass a token round a ring by IPC; each hop runs the kernel's IPC path
//! and then the receiver, which touches P pages of its own address space before passing the
//! token on. It exists to load a software-managed TLB the way a decomposed, microkernel OS
//! does: every address space keeps three L1 page-table pages live (text, data and stack lie
//! in different 4 MB regions, so each needs its own L2 PTE), the IPC path touches mapped
//! kernel data, and every hop switches address space.
//!
//! Addresses follow the MIPS/Mach layout of [`crate::mmu::layout`] (32-bit):
//!
//! * task `t` (address space `t + 1`; the client is task 0): text from `0x0040_0000`, data
//!   from `0x1000_0000`, stack down from `0x7FFF_F000` — three 4 MB regions;
//! * the hop's P pages go round text, data, stack (page `i` of the hop is page `i / 3` of its
//!   segment), each touched `refs_per_page` times (fetches in text, loads in data, stores in
//!   stack);
//! * the IPC path: `refs_per_page` fetches of kernel text in kseg0 (unmapped), then K pages of
//!   mapped kernel data spread over `kernel_regions` 4 MB regions of kseg2 (each region's
//!   PTEs sit in their own kernel-page-table page), then the receiver's kernel stack page,
//!   all in kernel mode; then a context switch to the receiver.
//!
//! With `seed != 0` the data pages a hop touches are drawn at random from a data working set
//! of `data_pages` pages (else the first ones, the same every hop). Deterministic; generated
//! in batches at constant memory.

use crate::error::Result;
use crate::event::{Event, Kind, Mode, BATCH};
use crate::mmu::layout::{KSEG0, KSEG2};
use crate::tlb::SplitMix64;
use crate::trace::TraceSource;

/// Parameters of the token ring.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MultiserverParams {
    /// Servers besides the client (N); N + 1 address spaces.
    pub servers: u32,
    /// User pages the receiver touches per hop (P).
    pub pages_per_hop: u32,
    /// Mapped kernel-data pages on the IPC path (K).
    pub kernel_pages: u32,
    /// 4 MB regions of kseg2 the kernel-data pages are spread over.
    pub kernel_regions: u32,
    /// References per page touched.
    pub refs_per_page: u32,
    /// Data pages each task's hop draws from (only with `seed != 0`).
    pub data_pages: u32,
    /// Token hops to generate.
    pub hops: u64,
    /// 0: every hop of a task touches the same pages; else the seed of the draw.
    pub seed: u64,
}

impl Default for MultiserverParams {
    fn default() -> Self {
        MultiserverParams {
            servers: 2,
            pages_per_hop: 6,
            kernel_pages: 4,
            kernel_regions: 2,
            refs_per_page: 8,
            data_pages: 16,
            hops: 1000,
            seed: 0,
        }
    }
}

const TEXT: u64 = 0x0040_0000;
const DATA: u64 = 0x1000_0000;
const STACK_TOP: u64 = 0x7FFF_F000;
/// Kernel text of the IPC path (unmapped).
const KTEXT: u64 = KSEG0 + 0x0003_0000;
/// Kernel stacks, one page per task, in the first kseg2 region (after the IPC data pages).
const KSTACKS: u64 = KSEG2 + 0x0030_0000;
const REGION: u64 = 4 << 20;

/// The token ring as an event source.
#[derive(Clone, Debug)]
pub struct Multiserver {
    p: MultiserverParams,
    hop: u64,
    rng: SplitMix64,
    /// The running address space (the client's, 1, at the start).
    cur: u32,
}

impl Multiserver {
    pub fn new(p: MultiserverParams) -> Multiserver {
        Multiserver {
            rng: SplitMix64::new(p.seed),
            p,
            hop: 0,
            cur: 1,
        }
    }

    /// Address spaces in the ring (servers + the client).
    pub fn tasks(&self) -> u32 {
        self.p.servers + 1
    }

    fn next_random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Append one hop: the IPC path into task `to`, the switch, and the receiver's work.
    fn hop(&mut self, to: u32, out: &mut Vec<Event>) {
        let p = &self.p;
        let asid = to + 1;
        let n = p.refs_per_page.max(1) as u64;
        let from = self.cur;
        let kref = |kind, addr| {
            Event::reference(kind, addr, 4)
                .with_mode(Mode::Kernel)
                .with_asid(from)
        };
        // The sender's IPC send path, still in the sender's address space.
        for i in 0..n {
            out.push(kref(Kind::Fetch, KTEXT + 4 * i));
        }
        let regions = p.kernel_regions.max(1) as u64;
        for j in 0..p.kernel_pages as u64 {
            let page = KSEG2 + (j % regions) * REGION + (j / regions) * 4096;
            for i in 0..n {
                let kind = if i % 4 == 3 { Kind::Store } else { Kind::Load };
                out.push(kref(kind, page + 8 * i));
            }
        }
        out.push(Event::control(Kind::ContextSwitch, 0, asid));
        self.cur = asid;
        // The receiver's side: its kernel stack, then its own pages.
        let kstack = KSTACKS + to as u64 * 4096;
        for i in 0..n {
            out.push(
                Event::reference(Kind::Store, kstack + 8 * i, 4)
                    .with_mode(Mode::Kernel)
                    .with_asid(asid),
            );
        }
        for i in 0..self.p.pages_per_hop as u64 {
            let k = i / 3;
            let (kind, base) = match i % 3 {
                0 => (Kind::Fetch, TEXT + k * 4096),
                1 => {
                    let page = if self.p.seed != 0 {
                        self.next_random() % self.p.data_pages.max(1) as u64
                    } else {
                        k
                    };
                    (Kind::Load, DATA + page * 4096)
                }
                _ => (Kind::Store, STACK_TOP - k * 4096),
            };
            for r in 0..n {
                out.push(Event::reference(kind, base + 4 * r, 4).with_asid(asid));
            }
        }
    }
}

impl TraceSource for Multiserver {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        if self.hop == 0 && self.p.hops > 0 {
            out.push(Event::control(Kind::ContextSwitch, 0, 1));
        }
        while out.len() < BATCH && self.hop < self.p.hops {
            let to = ((self.hop + 1) % self.tasks() as u64) as u32;
            self.hop(to, out);
            self.hop += 1;
        }
        Ok(!out.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(p: MultiserverParams) -> Vec<Event> {
        crate::workload::drain(&mut Multiserver::new(p))
    }

    #[test]
    fn hops_go_round_the_ring() {
        let p = MultiserverParams {
            servers: 2,
            hops: 5,
            ..MultiserverParams::default()
        };
        let ev = all(p.clone());
        let switches: Vec<u32> = ev
            .iter()
            .filter(|e| e.kind == Kind::ContextSwitch)
            .map(|e| e.asid)
            .collect();
        assert_eq!(switches, [1, 2, 3, 1, 2, 3]);
        // Per hop: 8 kernel fetches, 4 × 8 kernel-data refs, a switch, 8 kernel-stack stores,
        // 6 pages × 8 user refs.
        assert_eq!(ev.len(), 1 + 5 * (8 + 32 + 1 + 8 + 48));
        // User references are in the receiver's address space, in three 4 MB regions.
        let user: Vec<&Event> = ev
            .iter()
            .filter(|e| e.kind.is_ref() && e.mode == Mode::User)
            .collect();
        let mut regions: Vec<u64> = user.iter().map(|e| e.addr >> 22).collect();
        regions.sort_unstable();
        regions.dedup();
        assert_eq!(regions, [1, 0x40, 0x1FF]);
        assert!(user.iter().all(|e| e.addr < 0x8000_0000));
    }

    #[test]
    fn long_streams_keep_their_address_space_across_batches() {
        let p = MultiserverParams {
            servers: 3,
            hops: 300,
            seed: 7,
            ..MultiserverParams::default()
        };
        let a = all(p.clone());
        assert_eq!(a, all(p));
        // Every kernel reference of a hop's send path is in the sender's address space.
        let mut cur = 0;
        for e in &a {
            if e.kind == Kind::ContextSwitch {
                cur = e.asid;
            } else {
                assert_eq!(e.asid, cur);
            }
        }
    }
}
