//! The operating system's side of physical memory: which frame backs each virtual page.
//!
//! A [`PageMapper`] gives every `(address space, virtual page)` a physical frame the first
//! time the page is touched, by a [`Mapping`] policy, and keeps it for the rest of the run
//! (Chen: "when a mapping is created for a virtual page it does not change"). Physically
//! indexed caches see the result: two pages conflict in a cache exactly when their frames
//! have the same *page colour* (frame number modulo `cache span / page size`).
//!
//! With pages of more than one size ([`PageSizes`]), frames are of the smallest and a large
//! page is an aligned run of them, its parts in order (a huge page is physically contiguous).
//!
//! When every frame is taken (the trace touches more than the simulated memory), frames are
//! handed out again from the start of the policy's order and [`PageMapper::reused`] counts
//! them: the run goes on, and the report says that its physical memory was too small.

use crate::onepass::map::PageMap;
use crate::tlb::SplitMix64;
use std::fmt;
use std::str::FromStr;

mod sizes;
pub(crate) use sizes::PageSizes;

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
    /// The frame (of `2^shift` bytes, the walker's base page) of the page of `addr` in
    /// address space `asid`, mapping the page now if it has none; `paddr` is the physical
    /// address the reference carries ([`crate::event::NO_PADDR`] if none). `None`: the model
    /// refused the page (it keeps the error).
    fn frame_for(&mut self, asid: u32, addr: u64, paddr: u64, shift: u32) -> Option<u64>;
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
    /// The size of each page when pages of more than one size are mapped (else every page
    /// is a base page of `page_shift`): a large page is an aligned run of base frames.
    sizes: Option<Box<PageSizes>>,
    /// Large pages: `(large page number tagged with its shift, space) → first frame of its
    /// run`.
    large: PageMap,
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
            sizes: None,
            large: PageMap::new(),
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
        if let Some(shift) = self.large_shift(asid, vpn) {
            let order = shift - self.page_shift;
            return self
                .large
                .find(large_key(vpn, order), asid as u64)
                .map(|slot| self.large.get(slot) as u64 + (vpn & ((1 << order) - 1)));
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

    /// Pages mapped so far (a large page counts once).
    pub fn pages(&self) -> u64 {
        (self.map.len() + self.large.len()) as u64
    }

    /// Map pages of more than one size: `sizes` says each page's, and a page larger than
    /// the base page is an aligned run of base frames, physically contiguous as an operating
    /// system's huge page is; its parts take the run's frames in order, and the run is
    /// chosen ([`PageMapper::choose_run`]) the first time any part is touched. Memory must
    /// hold a page of each size. (A space is the `asid` of [`PageSizes::backing`].)
    pub(crate) fn set_page_sizes(&mut self, sizes: PageSizes) {
        self.sizes = Some(Box::new(sizes));
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

    /// Start loading the slot of the page map that [`PageMapper::frame`] of page `vpn` of
    /// `asid` will probe, unless the page is among the recent ones (a hint: no effect on any
    /// frame). The pages a TLB misses on are mostly new to the recent ones, and the map of a
    /// large footprint is too big to stay in the processor's caches: asked when the miss is
    /// known, the line arrives while the miss handler runs, before the reference needs it.
    #[inline]
    pub fn prefetch(&self, asid: u32, vpn: u64) {
        if self.policy == Mapping::Identity || self.sizes.is_some() {
            return;
        }
        let r = (vpn as usize ^ asid as usize) & (RECENT - 1);
        if self.recent[r].0 != vpn || self.recent[r].1 != asid {
            self.map.prefetch(vpn, asid as u64);
        }
    }

    /// [`PageMapper::frame`] of a page not among the recent ones (slot `r` of them).
    #[inline(never)]
    fn frame_slow(&mut self, asid: u32, vpn: u64, r: usize) -> u64 {
        let f = match self.large_shift(asid, vpn) {
            Some(shift) => self.large_part(asid, vpn, shift - self.page_shift),
            None => self.base_frame(asid, vpn),
        };
        self.recent[r] = (vpn, asid, f);
        f
    }

    /// The frame of base page `vpn` of `asid`, chosen now if the page is new, whatever the
    /// page sizes say (also for a page no program touches: a page table's preloaded
    /// background pages).
    #[inline(always)]
    pub fn base_frame(&mut self, asid: u32, vpn: u64) -> u64 {
        if self.policy == Mapping::Identity {
            return vpn;
        }
        match self.map.find(vpn, asid as u64) {
            Some(slot) => self.map.get(slot) as u64,
            None => {
                let f = self.choose(asid, vpn);
                self.map.entry(vpn, asid as u64, f as u32);
                f
            }
        }
    }

    /// The size (as a shift) of the page holding base page `vpn` of `asid`, if it is larger
    /// than a base page.
    #[inline(always)]
    fn large_shift(&self, asid: u32, vpn: u64) -> Option<u32> {
        let s = self.sizes.as_ref()?.backing(vpn << self.page_shift, asid)?;
        (s > self.page_shift).then_some(s)
    }

    /// The frame of base page `vpn` of `asid`, a part of a large page of `2^order` base
    /// pages: its run's first frame (the run chosen now if the page is new) plus the part.
    fn large_part(&mut self, asid: u32, vpn: u64, order: u32) -> u64 {
        let key = large_key(vpn, order);
        let first = match self.large.find(key, asid as u64) {
            Some(slot) => self.large.get(slot) as u64,
            None => {
                let first = self.choose_run(asid, vpn >> order, order);
                self.large.entry(key, asid as u64, first as u32);
                first
            }
        };
        first + (vpn & ((1 << order) - 1))
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

    /// The first frame of a free run of `2^order` frames, aligned to its size, for large page
    /// `lpn` of `asid`; its frames are marked taken. The policies choose among runs as
    /// [`PageMapper::choose`] does among frames: deterministic by a hash of the page and
    /// the space, keeping the page's colour when a run is smaller than the colour span;
    /// random; sequential from the cursor; bin hopping the next colours after the last. With
    /// no free run left, memory is handed out again from the start, as when it is exhausted.
    fn choose_run(&mut self, asid: u32, lpn: u64, order: u32) -> u64 {
        if self.policy == Mapping::Trace {
            self.untraced += 1;
        }
        let n = 1u64 << order;
        let vpn = lpn << order;
        // Runs smaller than the colour span start at a chosen colour (a multiple of `n`).
        let coloured = matches!(
            self.policy,
            Mapping::Deterministic | Mapping::Trace | Mapping::BinHopping
        ) && n < self.colours
            && self.colours.is_multiple_of(n);
        let step = if coloured { self.colours } else { n };
        let count = self.frames / step;
        debug_assert!(count > 0, "memory holds a run of {n} frames");
        let offsets = if coloured { self.colours / n } else { 1 };
        let (first_offset, start) = match self.policy {
            Mapping::Deterministic | Mapping::Trace | Mapping::Identity => {
                let h = lpn
                    .wrapping_add((asid as u64).wrapping_mul(0x9E37_79B9))
                    .wrapping_mul(0x9E37_79B9_7F4A_7C15);
                (vpn % self.colours / n, ((h >> 32) * count) >> 32)
            }
            Mapping::Random => (0, self.rng.below(count as usize) as u64),
            Mapping::Sequential => (0, self.cursor.div_ceil(n) % count),
            Mapping::BinHopping => (self.cursor.div_ceil(n) % offsets, 0),
        };
        // Deterministic keeps its colour; bin hopping moves on to the next colour.
        let tries = if self.policy == Mapping::BinHopping {
            offsets
        } else {
            1
        };
        let at = |o: u64, i: u64| ((start + i) % count) * step + (first_offset + o) % offsets * n;
        let free = (0..tries)
            .flat_map(|o| (0..count).map(move |i| (o, i)))
            .map(|(o, i)| at(o, i))
            .find(|&b| self.run_free(b, n));
        let base = match free {
            Some(b) => b,
            None => {
                self.wrapped = true;
                self.used.fill(0);
                self.taken = 0;
                self.cursor = 0;
                match self.policy {
                    Mapping::Sequential => 0,
                    _ => at(0, 0),
                }
            }
        };
        self.reused += self.wrapped as u64;
        self.take_run(base, n);
        self.taken += n;
        self.cursor = match self.policy {
            Mapping::Sequential => base + n,
            Mapping::BinHopping if coloured => base % self.colours + n,
            _ => self.cursor,
        };
        base
    }

    /// Whether the `n` frames from `base` (aligned to `n`, a power of two) are all free.
    fn run_free(&self, base: u64, n: u64) -> bool {
        let (words, mask) = run_bits(base, n);
        self.used[words].iter().all(|&w| w & mask == 0)
    }

    /// Mark the `n` frames from `base` taken (as [`PageMapper::run_free`]).
    fn take_run(&mut self, base: u64, n: u64) {
        let (words, mask) = run_bits(base, n);
        self.used[words].iter_mut().for_each(|w| *w |= mask);
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

/// The key of the large page of `2^order` base pages holding base page `vpn`: its number,
/// tagged with its size above every page number.
#[inline(always)]
fn large_key(vpn: u64, order: u32) -> u64 {
    (vpn >> order) | (order as u64) << 58
}

/// The words of the `used` bitmap covering frames `base..base + n` (`n` a power of two,
/// `base` aligned to it) and the bits of each word they take.
fn run_bits(base: u64, n: u64) -> (std::ops::Range<usize>, u64) {
    let first = (base / 64) as usize;
    if n >= 64 {
        (first..first + (n / 64) as usize, u64::MAX)
    } else {
        (first..first + 1, ((1u64 << n) - 1) << (base % 64))
    }
}
