//! Page tables: where a TLB miss finds its translation, and what the search costs in memory
//! references. The organisations compared by Huck & Hays (*Architectural Support for
//! Translation Table Management in Large Address Space Machines*, ISCA 1993), and today's
//! x86-64 radix tables:
//!
//! * [`Radix`] — a forward-mapped page table (FMPT) of N levels, each indexed by a slice of the
//!   page number: the 2-level 32-bit per-process table of Huck & Hays' aliased sharing model
//!   ("ASM"), or the x86-64 4- and 5-level tables with 4 KiB, 2 MiB and 1 GiB leaves, with
//!   optional paging-structure caches per level.
//! * [`Inverted`] — an inverted page table (IPT): one entry per physical frame, reached from a
//!   hash anchor table (HAT) and chained, with the two tag words.
//! * [`Hashed`] — a hashed page table (HPT): 16-byte entries that hold both the tag and the
//!   frame, 1- or 2-way head buckets, collisions chained into free entries or an overflow
//!   area, an XOR hash of space id and page number, optional move-to-head.
//! * [`Front`] — a small translation cache in memory in front of another table: the hybrid
//!   (a small HPT refilled by software from an FMPT, so every refill lands in the head bucket)
//!   and the PA-RISC software TLB (swTLB: 2-way, indexed by the low page-number bits).
//! * [`Stlb`] — the software TLB a front table keeps, which is also Bala et al.'s STLB of the
//!   MIPS refill model ([`crate::mmu`]): one home for the idea.
//!
//! [`PageTable`] is the one interface: an enum over the organisations (a walk is one `match`,
//! never a virtual call). A lookup appends the table words it read to a caller-owned
//! [`Refs`] buffer — physical addresses a walker sends through a data cache — and returns a
//! [`Walk`]: the frame, the chain length, whether the head bucket held it. Tables are built
//! by the OS model as pages are touched: a miss that finds nothing is a page fault, the
//! [`Frames`] allocator hands out the next frame (FIFO replacement once memory is full) and
//! the mapping is inserted; the frame's previous page is removed first.
//!
//! Addresses are page numbers (`vpn`) of the table's base page — 4 KiB for a radix table, whose
//! levels are laid out for it; the machine's page size for the others — in a space (`space`: an address-space id, or the
//! upper bits of a global address). Every table lives at its own physical base, above the
//! frames of data, laid out as a kernel lays tables out at boot: hashed tables aligned to
//! their size, the rest page-aligned, one after the other.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

pub mod bench;
mod front;
mod hashed;
mod inverted;
mod radix;
mod stlb;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

pub use front::{Front, FrontKind, FrontParams};
pub use hashed::{Chaining, Hashed, HashedParams, HPT_ENTRY};
pub use inverted::{Inverted, InvertedParams, HAT_ENTRY, IPT_ENTRY};
pub use radix::{Radix, RadixParams};
pub use stlb::{Stlb, StlbIndex};

/// The base page of a radix table, and the default of the others: 4 KiB.
pub const PAGE_SHIFT: u32 = 12;

/// Where the page tables start in physical memory: far above any frame of data, so that a
/// table address never equals a data address (the cache still sees both, by index).
pub const TABLE_BASE: u64 = 1 << 40;

/// No entry (end of a chain, an empty slot).
pub(crate) const NIL: u32 = u32::MAX;

/// One table word read by a walk: its physical address and which part of the table it is in
/// (an index into [`PageTable::level_names`]), so cache misses can be counted per level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableRef {
    pub addr: u64,
    pub level: u8,
    /// A store (a refill written into a front table), not a load.
    pub write: bool,
}

/// The table references of one walk (reused from walk to walk: no allocation once warm).
pub type Refs = Vec<TableRef>;

/// What one lookup found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// The frame mapping the page, `None` if the table has no translation (a page fault).
    pub frame: Option<u64>,
    /// Entries (hashed, inverted) or levels (radix) examined; the head bucket counts as 1.
    pub chain: u32,
    /// Resolved by the first entry examined: the head bucket of a hashed table, the first
    /// inverted entry, a hit in a front table. (Radix walks: false.)
    pub head: bool,
    /// The second way of a 2-way head bucket was compared (a serial compare's extra step).
    pub second_way: bool,
    /// A front table (hybrid HPT cache, swTLB) missed and the table behind it was walked.
    pub front_miss: bool,
    /// Radix levels whose reference a paging-structure cache saved.
    pub skipped: u32,
}

/// Mapped pages and table memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of table memory (every structure, allocated or fixed).
    pub table_bytes: u64,
    /// Pages mapped and the bytes they map.
    pub pages: u64,
    pub mapped_bytes: u64,
}

/// Why a mapping could not be inserted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// The page number has more bits than the table translates.
    OutOfRange,
    /// This organisation cannot hold a page of this size.
    PageSize(u32),
    /// An inverted table's frame is beyond physical memory.
    Frame(u64),
}

/// A page table of any organisation (see the module documentation).
#[derive(Debug)]
pub enum PageTable {
    Radix(Radix),
    Inverted(Inverted),
    Hashed(Hashed),
    Front(Box<Front>),
}

impl PageTable {
    /// Look up `(space, vpn)`, appending the words read to `refs`.
    #[inline]
    pub fn lookup(&mut self, space: u32, vpn: u64, refs: &mut Refs) -> Walk {
        self.lookup_from(space, space, vpn, refs)
    }

    /// Look up `(space, vpn)` for a walk that starts at the root of space `root` (the
    /// running address space's; it differs from `space` for the kernel half, which every
    /// address space shares): a forward-mapped table reads its root entry from `root`'s
    /// root page, as each x86-64 process's PML4 holds a copy of the kernel's entries.
    pub fn lookup_from(&mut self, root: u32, space: u32, vpn: u64, refs: &mut Refs) -> Walk {
        match self {
            PageTable::Radix(t) => t.lookup_from(root, space, vpn, refs),
            PageTable::Inverted(t) => t.lookup(space, vpn, refs),
            PageTable::Hashed(t) => t.lookup(space, vpn, refs),
            PageTable::Front(t) => t.lookup(root, space, vpn, refs),
        }
    }

    /// Map the page of `2^shift` bytes holding `vpn` to `frame` (the OS, after a fault;
    /// not a walk, so no references are reported). The page must not be mapped already.
    pub fn insert(
        &mut self,
        space: u32,
        vpn: u64,
        shift: u32,
        frame: u64,
    ) -> Result<(), InsertError> {
        match self {
            PageTable::Radix(t) => t.insert(space, vpn, shift, frame),
            PageTable::Inverted(t) => {
                only_base(shift, t.params().page_shift).and_then(|_| t.insert(space, vpn, frame))
            }
            PageTable::Hashed(t) => {
                only_base(shift, t.params().page_shift).map(|_| t.insert(space, vpn, frame))
            }
            PageTable::Front(t) => t.insert(space, vpn, shift, frame),
        }
    }

    /// Unmap the page holding `vpn`; its frame if it was mapped.
    pub fn remove(&mut self, space: u32, vpn: u64) -> Option<u64> {
        match self {
            PageTable::Radix(t) => t.remove(space, vpn),
            PageTable::Inverted(t) => t.remove(space, vpn),
            PageTable::Hashed(t) => t.remove(space, vpn),
            PageTable::Front(t) => t.remove(space, vpn),
        }
    }

    /// Table memory and what it maps.
    pub fn usage(&self) -> Usage {
        match self {
            PageTable::Radix(t) => t.usage(),
            PageTable::Inverted(t) => t.usage(),
            PageTable::Hashed(t) => t.usage(),
            PageTable::Front(t) => t.usage(),
        }
    }

    /// Names of the parts of the table, indexed by [`TableRef::level`].
    pub fn level_names(&self) -> Vec<String> {
        match self {
            PageTable::Radix(t) => t.level_names(),
            PageTable::Inverted(_) => vec!["HAT".into(), "IPT".into(), "chain".into()],
            PageTable::Hashed(_) => vec!["head".into(), "chain".into()],
            PageTable::Front(t) => t.level_names(),
        }
    }

    /// A short name of the organisation (`radix`, `inverted`, `hashed`, `hybrid`, `swtlb`).
    pub fn kind(&self) -> &'static str {
        match self {
            PageTable::Radix(_) => "radix",
            PageTable::Inverted(_) => "inverted",
            PageTable::Hashed(_) => "hashed",
            PageTable::Front(t) => match t.kind() {
                FrontKind::Hybrid => "hybrid",
                FrontKind::SwTlb => "swtlb",
            },
        }
    }

    /// The page sizes (as shifts) the table can map: a radix table's at each level's
    /// boundary; every other organisation's entries hold pages of its one size.
    pub fn page_shifts(&self) -> Vec<u32> {
        match self {
            PageTable::Radix(t) => t.page_shifts(),
            _ => vec![self.base_shift()],
        }
    }

    /// The smallest page the table maps (as a shift): the unit of its page numbers.
    pub fn base_shift(&self) -> u32 {
        match self {
            PageTable::Radix(_) => PAGE_SHIFT,
            PageTable::Inverted(t) => t.params().page_shift,
            PageTable::Hashed(t) => t.params().page_shift,
            PageTable::Front(t) => t.inner().base_shift(),
        }
    }

    /// Why a page size outside [`PageTable::page_shifts`] cannot be mapped, for messages.
    pub fn page_sizes_held(&self) -> String {
        let holder = match self {
            PageTable::Radix(t) => {
                let sizes: Vec<String> = t
                    .page_shifts()
                    .iter()
                    .map(|&s| crate::config::PageSize::Size(1 << s).label())
                    .collect();
                return format!(
                    "the radix table's levels map {} pages (a hashed or inverted table maps pages of the machine's smallest size)",
                    sizes.join(", ")
                );
            }
            PageTable::Inverted(_) => "an inverted page table holds",
            PageTable::Hashed(_) => "a hashed page table holds",
            PageTable::Front(t) => match t.kind() {
                FrontKind::Hybrid => "a hybrid's HPT cache holds",
                FrontKind::SwTlb => "a software TLB holds",
            },
        };
        let size = crate::config::PageSize::Size(1 << self.base_shift()).label();
        format!("{holder} pages of one size, {size} on this machine (the smallest of [pages]; a radix table maps several)")
    }

    /// Whether the table describes a frame by one entry (an inverted table, alone or behind a
    /// front table): aliases of one frame cannot be mapped together.
    pub fn one_entry_per_frame(&self) -> bool {
        match self {
            PageTable::Inverted(_) => true,
            PageTable::Front(t) => t.inner().one_entry_per_frame(),
            _ => false,
        }
    }

    /// The paging-structure caches of the radix table (alone or behind a front table), if
    /// it is one: what each CPU has of its own of the table ([`crate::mmu::CpuParts`]).
    pub fn psc_mut(&mut self) -> Option<&mut Vec<Option<crate::tlb::Tlb>>> {
        match self {
            PageTable::Radix(t) => Some(t.psc_mut()),
            PageTable::Front(t) => t.inner_mut().psc_mut(),
            _ => None,
        }
    }

    /// Levels of the radix table walked on a miss (for the cost model); 0 if not radix.
    pub fn radix_levels(&self) -> usize {
        match self {
            PageTable::Radix(t) => t.levels(),
            PageTable::Front(t) => t.inner().radix_levels(),
            _ => 0,
        }
    }
}

fn only_base(shift: u32, base: u32) -> Result<(), InsertError> {
    if shift == base {
        Ok(())
    } else {
        Err(InsertError::PageSize(shift))
    }
}

/// The hash of Huck & Hays: the space id XORed with the low page-number bits. (The OS allocates
/// space ids pseudo-randomly, so their bits spread the spaces over the table; see
/// [`scramble_space`].) The page number's bits above the low 18 — for a 32-bit offset, its
/// quadrant, which on PA-RISC selects the space register and so the space — are scrambled in
/// too, so that segments at aligned bases of one space do not pile onto the same buckets
/// (zero for the first quadrant: there the hash is the plain XOR).
#[inline(always)]
pub fn xor_hash(space: u32, vpn: u64) -> u64 {
    vpn ^ space as u64 ^ ((vpn >> 18).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32)
}

/// A pseudo-random space id for address space `asid`, as HP-UX allocates them: a bijection
/// (multiplication by an odd constant), so distinct spaces keep distinct ids. The one
/// address space whose product is `u32::MAX` — the id the kernel's shared pages are kept
/// under ([`crate::cache::system::KERNEL_SPACE`]) — takes the product of `u32::MAX` instead,
/// which is never a process's own space (it is [`crate::event::PHYSICAL`]); so no process's
/// pages share the kernel's, and the ids stay distinct.
#[inline(always)]
pub fn scramble_space(asid: u32) -> u32 {
    const ODD: u32 = 0x9E37_79B1;
    match asid.wrapping_mul(ODD) {
        u32::MAX => u32::MAX.wrapping_mul(ODD),
        s => s,
    }
}

/// A hash map keyed by page numbers, frames, physical addresses or space ids: keys already
/// spread in their low bits (or small), which one multiply mixes enough — SipHash's
/// resistance to chosen keys buys nothing on a trace, and costs a fault its time.
pub(crate) type KeyMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// The hasher of [`KeyMap`]: a multiply by the golden ratio, its high bits folded down.
#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0 ^ b as u64);
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        let z = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = z ^ (z >> 29);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The owner of a frame whose page was unmapped.
const FREE: (u32, u64) = (u32::MAX, u64::MAX);

/// No physical page named (a private page: its frame is its own).
const NO_OBJECT: u64 = u64::MAX;

/// Physical frames and who owns each: the OS model's memory. The first touch of a page takes
/// the next free frame; once memory is full the oldest frame is taken from the pages mapping
/// it (FIFO), so the table never maps more pages than there are frames. Deterministic.
///
/// A page may name the physical page it holds (an *object*: the physical address a trace
/// carries, or the global address of a shared page rewritten into per-process aliases).
/// Every page naming one object shares one frame: the aliases of a shared page each have
/// their own translation, and one copy of the data.
#[derive(Clone, Debug)]
pub struct Frames {
    /// The first page mapping each frame, [`FREE`] if none.
    owner: Vec<(u32, u64)>,
    /// Further pages mapping a frame (aliases of its object).
    aliases: KeyMap<u64, Vec<(u32, u64)>>,
    /// The object each frame holds ([`NO_OBJECT`] for a private page), and back.
    object: Vec<u64>,
    by_object: KeyMap<u64, u64>,
    capacity: u64,
    next: u64,
    /// Frames taken from a page that held them.
    pub reclaimed: u64,
}

/// What [`Frames::map`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    pub frame: u64,
    /// The page's object was in a frame already: the page joined it as an alias.
    pub shared: bool,
}

impl Frames {
    /// Physical memory of `capacity` frames.
    pub fn new(capacity: u64) -> Frames {
        Frames {
            owner: Vec::new(),
            aliases: KeyMap::default(),
            object: Vec::new(),
            by_object: KeyMap::default(),
            capacity: capacity.max(1),
            next: 0,
            reclaimed: 0,
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The page `(space, vpn)` mapping `frame` was unmapped; the frame is free once no page
    /// maps it.
    pub fn unmap(&mut self, frame: u64, space: u32, vpn: u64) {
        let Some(o) = self.owner.get_mut(frame as usize) else {
            return;
        };
        let page = (space, vpn);
        let more = self.aliases.get_mut(&frame);
        if *o == page {
            *o = match more.and_then(|v| v.pop()) {
                Some(p) => p,
                None => FREE,
            };
        } else if let Some(v) = more {
            v.retain(|&p| p != page);
        }
        if self.aliases.get(&frame).is_some_and(|v| v.is_empty()) {
            self.aliases.remove(&frame);
        }
        if self.owner[frame as usize] == FREE {
            self.drop_object(frame);
        }
    }

    /// Every page mapping `frame`.
    pub fn owners(&self, frame: u64) -> impl Iterator<Item = (u32, u64)> + '_ {
        let first = self
            .owner
            .get(frame as usize)
            .copied()
            .filter(|&o| o != FREE);
        first
            .into_iter()
            .chain(self.aliases.get(&frame).into_iter().flatten().copied())
    }

    /// Every page mapped, with its frame.
    pub fn pages(&self) -> Vec<((u32, u64), u64)> {
        (0..self.owner.len() as u64)
            .flat_map(|f| self.owners(f).map(move |p| (p, f)))
            .collect()
    }

    /// The frames holding at least one page, in frame order.
    pub fn held(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.owner.len() as u64).filter(|&f| self.owner[f as usize] != FREE)
    }

    /// Frames holding at least one page.
    pub fn in_use(&self) -> u64 {
        self.owner.iter().filter(|&&o| o != FREE).count() as u64
    }

    fn drop_object(&mut self, frame: u64) {
        let o = std::mem::replace(&mut self.object[frame as usize], NO_OBJECT);
        if o != NO_OBJECT {
            self.by_object.remove(&o);
        }
    }

    /// Page `(space, vpn)` is given `frame` (below [`Frames::capacity`]), chosen elsewhere: by
    /// the page-mapping policy of the machine's memory system, its one physical memory. The
    /// frame's other pages keep it (`shared`: the aliases of one physical page, or a memory
    /// too small that hands frames out again); nothing is reclaimed.
    pub fn place(&mut self, space: u32, vpn: u64, frame: u64) -> Mapped {
        let f = frame as usize;
        if f >= self.owner.len() {
            self.owner.resize(f + 1, FREE);
            self.object.resize(f + 1, NO_OBJECT);
        }
        let shared = self.owner[f] != FREE;
        if shared {
            self.aliases.entry(frame).or_default().push((space, vpn));
        } else {
            self.owner[f] = (space, vpn);
        }
        Mapped { frame, shared }
    }

    /// A frame for the private page `(space, vpn)`, and the page that held it (to be
    /// unmapped), if any. (For memories without shared pages: see [`Frames::map`].)
    pub fn alloc(&mut self, space: u32, vpn: u64) -> (u64, Option<(u32, u64)>) {
        let mut old = Vec::new();
        let m = self.map(space, vpn, None, &mut old);
        debug_assert!(old.len() <= 1, "a shared frame: use Frames::map");
        (m.frame, old.first().copied())
    }

    /// A frame for page `(space, vpn)`, holding `object` if it names one: the frame already
    /// holding that object, or the next frame, whose pages (every alias of its object) are
    /// appended to `evicted` to be unmapped.
    pub fn map(
        &mut self,
        space: u32,
        vpn: u64,
        object: Option<u64>,
        evicted: &mut Vec<(u32, u64)>,
    ) -> Mapped {
        if let Some(&f) = object.and_then(|o| self.by_object.get(&o)) {
            if self.owner[f as usize] == FREE {
                self.owner[f as usize] = (space, vpn);
            } else {
                self.aliases.entry(f).or_default().push((space, vpn));
            }
            return Mapped {
                frame: f,
                shared: true,
            };
        }
        let f = self.next;
        self.next = (self.next + 1) % self.capacity;
        if (f as usize) < self.owner.len() {
            let old = std::mem::replace(&mut self.owner[f as usize], (space, vpn));
            if old != FREE {
                self.reclaimed += 1;
                evicted.push(old);
                if let Some(v) = self.aliases.remove(&f) {
                    evicted.extend(v);
                }
            }
            self.drop_object(f);
        } else {
            self.owner.push((space, vpn));
            self.object.push(NO_OBJECT);
        }
        if let Some(o) = object {
            self.object[f as usize] = o;
            self.by_object.insert(o, f);
        }
        Mapped {
            frame: f,
            shared: false,
        }
    }
}
