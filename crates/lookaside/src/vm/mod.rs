//! The operating system's side of physical memory: which frame backs each virtual page.
//!
//! A [`PageMapper`] gives every `(address space, virtual page)` a physical frame the first
//! time the page is touched, by a [`Mapping`] policy, and keeps it for the rest of the run
//! (Chen: "when a mapping is created for a virtual page it does not change"). Physically
//! indexed caches see the result: two pages conflict in a cache exactly when their frames
//! have the same *page colour* (frame number modulo `cache span / page size`).
//!
//! When every frame is taken (the trace touches more than the simulated memory), frames are
//! handed out again from the start of the policy's order and [`PageMapper::reused`] counts
//! them: the run goes on, and the report says that its physical memory was too small.

use crate::onepass::map::PageMap;
use crate::tlb::SplitMix64;
use std::fmt;
use std::str::FromStr;

#[cfg(test)]
mod tests;

/// Entries of [`PageMapper`]'s cache of recent pages (a power of two).
const RECENT: usize = 16;

/// The machine's one physical memory as a page-table walker sees it when another model owns
/// it: the memory system's page mapping ([`crate::cache::system::MemorySystem`]), or the OS
/// of a virtually addressed cache ([`crate::cache::vac::drive::VacDriver`]). A page the
/// walker faults on is mapped to the frame this gives it, where that model sees its data, so
/// the table and the data path never disagree on a page's frame.
pub trait PhysicalMemory {
    /// The frame (of 4 KiB) of the page of `addr` in address space `asid`, mapping the page
    /// now if it has none; `paddr` is the physical address the reference carries
    /// ([`crate::event::NO_PADDR`] if none). `None`: the model refused the page (it keeps
    /// the error).
    fn frame_for(&mut self, asid: u32, addr: u64, paddr: u64) -> Option<u64>;
}

/// How a frame is chosen for a page touched for the first time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mapping {
    /// Colour-preserving and a function of (VPN, ASID), as Chen's simulator and Ultrix: the
    /// frame has the page's colour, and its place within the colour is a hash of the ASID
    /// and the VPN (the next free frame of that colour on a collision). No two pages within
    /// one cache span of virtual addresses of one space conflict.
    #[default]
    Deterministic,
    /// A uniformly random free frame, seeded (Mach after its free list is shuffled).
    Random,
    /// Bin hopping (Kessler & Hill): successive first touches take successive colours.
    BinHopping,
    /// The next free frame in frame order (Mach's free list at boot).
    Sequential,
    /// Frame number = virtual page number, whatever the space: physical = virtual, for
    /// comparing with simulators of virtually addressed caches (valgrind's cachegrind).
    Identity,
    /// The physical address the trace carries (full-system traces); pages without one fall
    /// back to `deterministic` and are counted in [`PageMapper::untraced`].
    Trace,
}

impl Mapping {
    pub const ALL: [Mapping; 6] = [
        Mapping::Deterministic,
        Mapping::Random,
        Mapping::BinHopping,
        Mapping::Sequential,
        Mapping::Identity,
        Mapping::Trace,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mapping::Deterministic => "deterministic",
            Mapping::Random => "random",
            Mapping::BinHopping => "bin-hopping",
            Mapping::Sequential => "sequential",
            Mapping::Identity => "identity",
            Mapping::Trace => "trace",
        }
    }
}

serde_by_name!(Mapping, Mapping::ALL.iter().map(|m| m.name()));

impl fmt::Display for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mapping {
    type Err = String;
    fn from_str(s: &str) -> Result<Mapping, String> {
        Mapping::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let names: Vec<_> = Mapping::ALL.iter().map(|m| m.name()).collect();
                format!("unknown page mapping '{s}' (one of: {})", names.join(", "))
            })
    }
}

/// Gives frames to pages (see the module documentation).
#[derive(Clone, Debug)]
pub struct PageMapper {
    policy: Mapping,
    page_shift: u32,
    frames: u64,
    colours: u64,
    /// `(vpn, asid) → frame`.
    map: PageMap,
    /// One bit per frame: taken.
    used: Vec<u64>,
    taken: u64,
    /// Sequential: the next frame to try. Bin hopping: the next colour.
    cursor: u64,
    rng: SplitMix64,
    reused: u64,
    wrapped: bool,
    untraced: u64,
    /// Recent pages and their frames, direct-mapped by page number: instruction and data
    /// references alternate between a few pages, and this spares the hash map for them.
    recent: [(u64, u32, u64); RECENT],
}

pub use crate::error::ParamError;

impl PageMapper {
    /// `memory` bytes of frames of `1 << page_shift` bytes; colours from `colour_span`, the
    /// largest cache way (size / ways) the frames must spread over.
    pub fn new(
        policy: Mapping,
        page_shift: u32,
        memory: u64,
        colour_span: u64,
        seed: u64,
    ) -> Result<PageMapper, ParamError> {
        let page = 1u64 << page_shift;
        let frames = memory >> page_shift;
        if policy != Mapping::Identity && (frames == 0 || frames > u32::MAX as u64) {
            return Err(ParamError {
                field: "memory",
                message: format!("{memory} bytes is not between one page ({page}) and 2^32 frames"),
            });
        }
        let colours = (colour_span / page).max(1);
        if policy != Mapping::Identity && !frames.is_multiple_of(colours) {
            return Err(ParamError {
                field: "memory",
                message: format!("{frames} frames is not a multiple of the {colours} page colours"),
            });
        }
        Ok(PageMapper {
            policy,
            page_shift,
            frames,
            colours,
            map: PageMap::new(),
            used: if policy == Mapping::Identity {
                Vec::new()
            } else {
                vec![0; frames.div_ceil(64) as usize]
            },
            taken: 0,
            cursor: 0,
            rng: SplitMix64::new(seed),
            reused: 0,
            wrapped: false,
            untraced: 0,
            recent: [(u64::MAX, 0, 0); RECENT],
        })
    }

    /// log2 of the page size.
    pub fn page_shift(&self) -> u32 {
        self.page_shift
    }

    pub fn policy(&self) -> Mapping {
        self.policy
    }

    /// The frame page `vpn` of `asid` was given, if it has one (a lookup that chooses nothing).
    pub fn frame_given(&self, asid: u32, vpn: u64) -> Option<u64> {
        if self.policy == Mapping::Identity {
            return Some(vpn);
        }
        self.map
            .find(vpn, asid as u64)
            .map(|slot| self.map.get(slot) as u64)
    }

    /// Restore [`PageMapper::untraced`] (after mapping a page no trace names).
    pub fn set_untraced(&mut self, n: u64) {
        self.untraced = n;
    }

    /// Frames of memory (of [`PageMapper::page_shift`]).
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Page colours (frames that conflict in the colour span are those of equal colour).
    pub fn colours(&self) -> u64 {
        self.colours
    }

    /// Pages that got a frame some other page already had (memory exhausted).
    pub fn reused(&self) -> u64 {
        self.reused
    }

    /// Pages a `trace` mapping had to place itself (no physical address in the trace).
    pub fn untraced(&self) -> u64 {
        self.untraced
    }

    /// Pages mapped so far.
    pub fn pages(&self) -> u64 {
        self.map.len() as u64
    }

    /// The physical address of `vaddr` in space `asid`; `traced` is the address the trace
    /// carries ([`crate::event::NO_PADDR`] when none).
    #[inline]
    pub fn translate(&mut self, asid: u32, vaddr: u64, traced: u64) -> u64 {
        let off = vaddr & ((1 << self.page_shift) - 1);
        match self.policy {
            Mapping::Identity => vaddr,
            Mapping::Trace if traced != crate::event::NO_PADDR => traced,
            _ => (self.frame(asid, vaddr >> self.page_shift) << self.page_shift) | off,
        }
    }

    /// The frame of page `vpn` of `asid`, chosen now if the page is new.
    #[inline(always)]
    pub fn frame(&mut self, asid: u32, vpn: u64) -> u64 {
        if self.policy == Mapping::Identity {
            return vpn;
        }
        let r = (vpn as usize ^ asid as usize) & (RECENT - 1);
        if self.recent[r].0 == vpn && self.recent[r].1 == asid {
            return self.recent[r].2;
        }
        self.frame_slow(asid, vpn, r)
    }

    /// [`PageMapper::frame`] of a page not among the recent ones (slot `r` of them).
    #[inline(never)]
    fn frame_slow(&mut self, asid: u32, vpn: u64, r: usize) -> u64 {
        let f = match self.map.find(vpn, asid as u64) {
            Some(slot) => self.map.get(slot) as u64,
            None => {
                let f = self.choose(asid, vpn);
                self.map.entry(vpn, asid as u64, f as u32);
                f
            }
        };
        self.recent[r] = (vpn, asid, f);
        f
    }

    /// A frame for a new page, marked taken.
    fn choose(&mut self, asid: u32, vpn: u64) -> u64 {
        if self.policy == Mapping::Trace {
            self.untraced += 1;
        }
        if self.taken == self.frames {
            // Memory is exhausted: start over, in the policy's order.
            self.wrapped = true;
            self.used.fill(0);
            self.taken = 0;
            self.cursor = 0;
        }
        self.reused += self.wrapped as u64;
        let per_colour = self.frames / self.colours;
        let f = match self.policy {
            Mapping::Deterministic | Mapping::Trace | Mapping::Identity => {
                // (Identity never gets here: its frame is the page number.)
                let colour = vpn % self.colours;
                let h = (vpn / self.colours)
                    .wrapping_add((asid as u64).wrapping_mul(0x9E37_79B9))
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15);
                let start = ((h >> 32) * per_colour) >> 32;
                self.free_in_colour(colour, start)
            }
            Mapping::Random => {
                let start = self.rng.below(self.frames as usize) as u64;
                self.free_from(start)
            }
            Mapping::BinHopping => {
                // The next colour with a free frame, from the cursor.
                let mut f = None;
                for i in 0..self.colours {
                    let c = (self.cursor + i) % self.colours;
                    if let Some(x) = self.free_in_colour_opt(c, 0) {
                        self.cursor = c + 1;
                        f = Some(x);
                        break;
                    }
                }
                f.expect("a free frame exists when taken < frames")
            }
            Mapping::Sequential => {
                let f = self.free_from(self.cursor);
                self.cursor = f + 1;
                f
            }
        };
        self.used[(f / 64) as usize] |= 1 << (f % 64);
        self.taken += 1;
        f
    }

    fn is_used(&self, f: u64) -> bool {
        self.used[(f / 64) as usize] & (1 << (f % 64)) != 0
    }

    /// The first free frame at or after `start`, wrapping.
    fn free_from(&self, start: u64) -> u64 {
        (0..self.frames)
            .map(|i| (start + i) % self.frames)
            .find(|&f| !self.is_used(f))
            .expect("a free frame exists when taken < frames")
    }

    /// The first free frame of `colour` from its `start`-th frame, wrapping within the
    /// colour; any free frame if the colour is full.
    fn free_in_colour(&self, colour: u64, start: u64) -> u64 {
        self.free_in_colour_opt(colour, start)
            .unwrap_or_else(|| self.free_from(colour))
    }

    fn free_in_colour_opt(&self, colour: u64, start: u64) -> Option<u64> {
        let per = self.frames / self.colours;
        (0..per)
            .map(|i| ((start + i) % per) * self.colours + colour)
            .find(|&f| !self.is_used(f))
    }
}
