//! A multi-user workload in the manner of the OLTP and telecom traces of Huck & Hays (ISCA
//! 1993): U user processes of one program, time-sliced, sharing its text and a buffer pool
//! in shared memory, each with private data and a stack.
//!
//! Addresses are PA-RISC global virtual addresses: the upper 16 bits of a 48-bit address are
//! a space id (allocated pseudo-randomly, as HP-UX does), the lower 32 the offset. The shared
//! text and the shared memory each live in one space, so every user reaches a shared page by
//! the same address; each process's private data and stack live in its own space. Offsets:
//! text from `0x0000_1000`, private data from `0x4000_0000`, stack down from `0x7FFF_F000`,
//! shared memory from `0x8000_0000` (the quadrants of HP-UX).
//!
//! With `addresses = PerProcess` the stream is rewritten at each context switch into
//! per-process address spaces, as Huck & Hays rewrote their HP-UX traces for the aliased
//! sharing model (ASM): a reference keeps its offset and is tagged with the running process,
//! so a shared page has one alias per process that touches it. The page it reaches is still
//! the one of its global address, which the reference carries as its physical address: the
//! aliases of a shared page share one frame (each has a translation of its own). [`Rewrite`]
//! does the same to any stream.
//!
//! Each slice runs one process for `quantum` references, in runs of `run` references to one
//! page; a run goes to text (fetches) with probability 40%, else to data: shared memory with
//! probability `shared`%, otherwise private data or (one run in eight) the stack. Pages are
//! drawn with a skew towards the low pages of each segment (the square of a uniform draw),
//! so each segment has a hot core and a long tail; a run reads or writes `span` bytes of its
//! page, round and round. Deterministic for a seed.

use crate::error::{Error, Location, Result};
use crate::event::{Event, Kind, BATCH, NO_PADDR};
use crate::tlb::SplitMix64;
use crate::trace::TraceSource;

/// How the stream's addresses name shared pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressModel {
    /// One global address per shared page (space id in the upper bits).
    Global,
    /// Per-process aliases: the offset, tagged with the running process.
    PerProcess,
}

/// Parameters of the multi-user workload.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MultiuserParams {
    /// User processes (1: a single-process benchmark).
    pub users: u32,
    /// References per time slice.
    pub quantum: u64,
    /// Time slices to generate (round robin over the users).
    pub slices: u64,
    pub text_pages: u32,
    /// Pages of the shared buffer pool.
    pub shm_pages: u32,
    /// Private data pages per process.
    pub data_pages: u32,
    pub stack_pages: u32,
    /// Percent of data runs that go to shared memory.
    pub shared: u32,
    /// References per run on one page.
    pub run: u32,
    /// Bytes a run reads or writes (4 per reference, round and round), up to a page.
    pub span: u32,
    pub seed: u64,
    pub addresses: AddressModel,
}

impl Default for MultiuserParams {
    fn default() -> Self {
        MultiuserParams {
            users: 12,
            quantum: 2000,
            slices: 3000,
            text_pages: 128,
            shm_pages: 512,
            data_pages: 32,
            stack_pages: 4,
            shared: 70,
            run: 64,
            span: 256,
            seed: 1,
            addresses: AddressModel::Global,
        }
    }
}

const TEXT: u64 = 0x0000_1000;
const DATA: u64 = 0x4000_0000;
const STACK_TOP: u64 = 0x7FFF_F000;
const SHM: u64 = 0x8000_0000;

/// The workload as an event source.
#[derive(Clone, Debug)]
pub struct Multiuser {
    p: MultiuserParams,
    slice: u64,
    rng: SplitMix64,
    text_space: u64,
    shm_space: u64,
}

/// A 16-bit space id for numbered space `n` (distinct for distinct `n` below 2^16).
/// (Multiplication by an odd constant is a bijection on 16 bits.)
fn space16(n: u32) -> u64 {
    (n.wrapping_mul(0x9E37) & 0xFFFF) as u64
}

impl Multiuser {
    pub fn new(p: MultiuserParams) -> Multiuser {
        Multiuser {
            rng: SplitMix64::new(p.seed ^ 0x5851_F42D_4C95_7F2D),
            slice: 0,
            text_space: space16(0xFFFF),
            shm_space: space16(0xFFFE),
            p,
        }
    }

    fn next_random(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// A page of `n`, skewed to the low ones.
    fn skewed(&mut self, n: u32) -> u64 {
        let u = (self.next_random() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u * n.max(1) as f64) as u64).min(n.max(1) as u64 - 1)
    }

    fn slice(&mut self, out: &mut Vec<Event>) {
        let user = (self.slice % self.p.users.max(1) as u64) as u32;
        let asid = user + 1;
        out.push(Event::control(Kind::ContextSwitch, 0, asid));
        let private = space16(user);
        let run = self.p.run.max(1) as u64;
        let runs = self.p.quantum.div_ceil(run);
        for _ in 0..runs {
            let r = self.next_random() % 100;
            let (kind, space, base) = if r < 40 {
                (
                    Kind::Fetch,
                    self.text_space,
                    TEXT + self.skewed(self.p.text_pages) * 4096,
                )
            } else if (self.next_random() % 100) < self.p.shared as u64 {
                let k = if r.is_multiple_of(3) {
                    Kind::Store
                } else {
                    Kind::Load
                };
                (
                    k,
                    self.shm_space,
                    SHM + self.skewed(self.p.shm_pages) * 4096,
                )
            } else if r.is_multiple_of(8) {
                (
                    Kind::Store,
                    private,
                    STACK_TOP - self.skewed(self.p.stack_pages) * 4096,
                )
            } else {
                let k = if r.is_multiple_of(4) {
                    Kind::Store
                } else {
                    Kind::Load
                };
                (k, private, DATA + self.skewed(self.p.data_pages) * 4096)
            };
            let line = (self.next_random() % 64) * 64;
            let words = (self.p.span / 4).clamp(1, 1024) as u64;
            for i in 0..run {
                let offset = base + ((line + 4 * (i % words)) & 0xFFF);
                let global = (space << 32) | offset;
                out.push(match self.p.addresses {
                    AddressModel::Global => Event::reference(kind, global, 4).with_asid(asid),
                    // The alias, and the page it reaches: its global address.
                    AddressModel::PerProcess => Event::reference(kind, offset, 4)
                        .with_asid(asid)
                        .with_paddr(global),
                });
            }
        }
    }
}

impl TraceSource for Multiuser {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        while out.len() < BATCH && self.slice < self.p.slices {
            self.slice(out);
            self.slice += 1;
        }
        Ok(!out.is_empty())
    }
}

/// `pages` distinct pages at uniformly random global addresses (random 16-bit space id, random
/// 20-bit page number), each referenced once per round, in the same order every round: the
/// uniform keys under which a hashed table's mean successful search is 1 + α/2 (Knuth).
#[derive(Clone, Debug)]
pub struct Uniform {
    pages: Vec<u64>,
    rounds: u64,
    round: u64,
    at: usize,
}

impl Uniform {
    pub fn new(pages: u32, rounds: u64, seed: u64) -> Uniform {
        let mut m = Multiuser::new(MultiuserParams {
            seed,
            ..MultiuserParams::default()
        });
        let mut seen = std::collections::HashSet::new();
        let mut v = Vec::with_capacity(pages as usize);
        while v.len() < pages as usize {
            let x = m.next_random();
            let addr = ((x >> 48) << 32) | (x & 0xFFFF_F000);
            if seen.insert(addr) {
                v.push(addr);
            }
        }
        Uniform {
            pages: v,
            rounds,
            round: 0,
            at: 0,
        }
    }
}

impl TraceSource for Uniform {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        while out.len() < BATCH && self.round < self.rounds && !self.pages.is_empty() {
            out.push(Event::reference(Kind::Load, self.pages[self.at], 4).with_asid(1));
            self.at += 1;
            if self.at == self.pages.len() {
                self.at = 0;
                self.round += 1;
            }
        }
        Ok(!out.is_empty())
    }
}

/// Rewrites a stream between the address models at context switches: to per-process
/// aliases (keep the low 32 bits, tagged with the running process; the reference carries the
/// address it had as its physical address, unless it has one, so that the aliases of a page
/// share its frame), or to global addresses
/// (each process's 32-bit space gets a space id of its own in the upper bits; a
/// per-process stream carries no sharing, so nothing becomes shared).
///
/// The offsets are 32-bit, as on PA-RISC: rewriting to global addresses a reference whose
/// address does not fit 32 bits (a 64-bit program's) would alias distinct pages, so it is an
/// error naming the event (when the source is named, see [`Rewrite::named`]).
pub struct Rewrite<S> {
    inner: S,
    to: AddressModel,
    name: String,
    /// Events passed on so far.
    seen: u64,
}

impl<S: TraceSource> Rewrite<S> {
    pub fn new(inner: S, to: AddressModel) -> Self {
        Rewrite {
            inner,
            to,
            name: "rewrite".into(),
            seen: 0,
        }
    }

    /// The same, naming the source `name` in errors.
    pub fn named(inner: S, to: AddressModel, name: impl Into<String>) -> Self {
        Rewrite {
            name: name.into(),
            ..Rewrite::new(inner, to)
        }
    }
}

impl<S: TraceSource> TraceSource for Rewrite<S> {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        let more = self.inner.next_batch(out)?;
        for (i, e) in out.iter_mut().enumerate() {
            if !e.kind.is_ref() {
                continue;
            }
            let offset = e.addr & 0xFFFF_FFFF;
            e.addr = match self.to {
                AddressModel::PerProcess => {
                    // The page the alias reaches is the one the address named: its identity
                    // rides in the physical address (unless the trace knows that already).
                    if e.paddr == NO_PADDR {
                        e.paddr = e.addr;
                    }
                    offset
                }
                AddressModel::Global if offset != e.addr => {
                    return Err(Error::trace(
                        &self.name,
                        Location::Event(self.seen + i as u64 + 1),
                        "address",
                        format!(
                            "{:#x} does not fit the 32-bit offset of a global address (to=global rewrites 32-bit programs)",
                            e.addr
                        ),
                    ))
                }
                AddressModel::Global => (space16(e.asid) << 32) | offset,
            };
        }
        self.seen += out.len() as u64;
        Ok(more)
    }

    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::workload::drain as all;

    #[test]
    fn rewriting_global_addresses_gives_the_per_process_stream() {
        let p = MultiuserParams {
            slices: 40,
            quantum: 2000,
            shm_pages: 32,
            ..MultiuserParams::default()
        };
        let global = all(&mut Multiuser::new(p.clone()));
        let asm = all(&mut Multiuser::new(MultiuserParams {
            addresses: AddressModel::PerProcess,
            ..p.clone()
        }));
        let rewritten = all(&mut Rewrite::new(
            Multiuser::new(p),
            AddressModel::PerProcess,
        ));
        assert_eq!(asm, rewritten);
        assert_eq!(global.len(), asm.len());
        // Shared pages have one address globally, one per process as aliases.
        let pages = |ev: &[Event], tag: bool| {
            let mut s: Vec<(u32, u64)> = ev
                .iter()
                .filter(|e| e.kind.is_ref() && e.addr & 0xFFFF_FFFF >= SHM)
                .map(|e| (if tag { e.asid } else { 0 }, e.addr >> 12))
                .collect();
            s.sort_unstable();
            s.dedup();
            s.len()
        };
        assert!(pages(&asm, true) > 3 * pages(&global, false));
        assert!(global.iter().all(|e| !e.kind.is_ref() || e.addr >> 48 == 0));
    }

    #[test]
    fn rewriting_a_64_bit_program_to_global_addresses_is_an_error() {
        use crate::trace::tests::VecSource;
        let events = vec![
            Event::reference(Kind::Load, 0x1000, 4),
            Event::reference(Kind::Load, 0x7ffd_0000_1000, 4),
        ];
        let mut r = Rewrite::named(
            VecSource::new(events.clone(), 8),
            AddressModel::Global,
            "t.lks",
        );
        let e = r.next_batch(&mut Vec::new()).unwrap_err().to_string();
        assert!(
            e.starts_with("t.lks: event 2: address: 0x7ffd00001000 does not fit"),
            "{e}"
        );
        let per = all(&mut Rewrite::new(
            VecSource::new(events, 8),
            AddressModel::PerProcess,
        ));
        assert_eq!(per[1].addr, 0x1000);
    }

    #[test]
    fn space_ids_are_distinct() {
        let mut ids: Vec<u64> = (0..1000).map(space16).collect();
        ids.extend([space16(0xFFFF), space16(0xFFFE)]);
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }
}
