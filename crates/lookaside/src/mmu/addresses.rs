//! Where a trace's addresses land on the MIPS segments of the software-refill model: the one
//! place where a 64-bit trace is made to fit the R2000's 32-bit address space.
//!
//! The model ([`super::SoftwareManagedTlb`]) knows only the MIPS segments ([`super::layout`]).
//! A trace of a MIPS system uses them as they are (`refill.addresses = "mips"`: no
//! [`AddressMap`] at all, and nothing added per reference). A 64-bit trace is mapped onto them
//! by an [`AddressMap`]:
//!
//! | trace address | MIPS segment |
//! |---|---|
//! | the lower half (bit 63 clear): user space of the running address space, whatever the mode | kuseg, folded (below) |
//! | a kernel class that `[pages]` declares unmapped (`{ kernel = "direct_map", size = "unmapped" }`), in kernel mode | kseg0: not translated |
//! | any other class of the trace's `kernel_layout` (vmalloc, kernel stacks among it; modules; fixmap; CPU entry area) | mapped kernel data in kseg2 (`0xC000_0000..0xC800_0000`, L1K PTEs), folded |
//! | anything else: an upper-half address in no class, a user-mode reference to a kseg0 class | address error: not translated |
//!
//! That is x86-64 (`refill.addresses = "x86-64"`), where the kernel reaches user buffers
//! through the TLB with the process's ASID as the MIPS kernel reaches kuseg, and where what a
//! MIPS kernel would keep in kseg0 — its image, the memory it addresses directly, its page
//! structures — is named by the trace's kernel layout (see [`crate::trace::kernel`]).
//! `refill.fold_user_addresses = true` without it folds only the user side: every user-mode
//! reference and every reference below 2 GB goes to kuseg this way, the kernel's references
//! above 2 GB keep the MIPS segments.
//!
//! # The fold
//!
//! Pages move by 4 MB blocks — the span of one MIPS page-table page (1,024 PTEs of 4 bytes)
//! — each keeping its offset in its block: pages that share a page-table page in the trace
//! share one on the MIPS, so L2 and L3 misses are the trace's own, and the low 10 bits of
//! every page number stay, so every TLB of up to 1,024 sets indexes them as the trace's. Each
//! block of an address space (of mapped kernel data: of the kernel, whose entries are
//! global) gets a MIPS block of its own the first time it is seen: the one numbered by the
//! trace block's low bits (the identity for a MIPS address, the low 31 bits of a user
//! address) if it is free, else the next free one after it. The fold is so injective on each
//! address space: distinct pages stay distinct, and a result never mixes two pages into one.
//! An address space touching more blocks than kuseg's 512 (2 GB), or a kernel mapping more
//! than kseg2's 32 blocks of kernel data (128 MB), cannot be mapped without aliasing: the
//! reference is an address error and the run is refused, naming the page
//! ([`AddressMap::unplaceable`]).
//!
//! # Speed
//!
//! A 64-entry memo of recently placed blocks answers almost every reference with one compare;
//! kseg0 classes are a compare each (there are three or so); the block tables are consulted
//! only when a block is not in the memo. Memory grows with the blocks touched.

use std::collections::HashMap;

use crate::event::Mode;

use super::layout::{self, Segment};

/// Bytes a fold moves together: 4 MB, what one MIPS page-table page maps.
pub const BLOCK_SHIFT: u32 = 22;
const BLOCK_MASK: u64 = (1 << BLOCK_SHIFT) - 1;
/// Blocks of kuseg (2 GB).
pub const USER_BLOCKS: u64 = layout::KSEG0 >> BLOCK_SHIFT;
/// Blocks of kseg2's mapped kernel data (128 MB, below the page tables).
pub const KERNEL_BLOCKS: u64 = (layout::USER_PT_BASE - layout::KSEG2) >> BLOCK_SHIFT;
/// The memo's space for kernel blocks (user blocks are keyed by their address space).
const KERNEL_SPACE: u32 = u32::MAX;
/// Entries of the memo (a power of two).
const MEMO: usize = 64;

/// Where a reference lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A user page of the running address space, at this kuseg address.
    User(u64),
    /// kseg0 or kseg1: not translated.
    Unmapped,
    /// kseg2, at this address: mapped kernel data, or a page table touched directly.
    Kernel(u64),
    /// An address error: not translated.
    Error,
}

/// The page that could not be placed without aliasing (see [`AddressMap::unplaceable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Unplaceable {
    /// The address space of a user page; `None`: mapped kernel data.
    space: Option<u32>,
    addr: u64,
}

/// A block in the memo: the addresses `lo .. lo + len` (inside one block) of `space` are at
/// MIPS block `base`.
#[derive(Clone, Copy, Debug)]
struct Memo {
    lo: u64,
    len: u64,
    space: u32,
    base: u64,
}

const NO_MEMO: Memo = Memo {
    lo: 0,
    len: 0,
    space: 0,
    base: 0,
};

/// Which MIPS blocks are taken (a bit each; at most 512).
type Taken = [u64; 8];

/// The mapping of a 64-bit trace's addresses onto the MIPS segments (see the module
/// documentation).
#[derive(Clone, Debug)]
pub struct AddressMap {
    /// x86-64: the upper half by kernel classes. Otherwise MIPS with folded user addresses.
    x86_64: bool,
    /// Kernel classes in kseg0, as (start, length).
    unmapped: Vec<(u64, u64)>,
    /// Kernel classes mapped in kseg2, as (start, length).
    mapped: Vec<(u64, u64)>,
    memo: Box<[Memo; MEMO]>,
    /// (address space, trace block) → kuseg block.
    user: HashMap<(u32, u64), u64>,
    user_taken: HashMap<u32, Taken>,
    /// Trace block → kseg2 block of kernel data.
    kernel: HashMap<u64, u64>,
    kernel_taken: Taken,
    unplaceable: Option<Unplaceable>,
}

impl AddressMap {
    /// A map for x86-64 (`x86_64`: until [`AddressMap::bind`] gives the kernel classes, every
    /// upper-half address is an address error) or for MIPS with folded user addresses.
    pub fn new(x86_64: bool) -> AddressMap {
        AddressMap {
            x86_64,
            unmapped: Vec::new(),
            mapped: Vec::new(),
            memo: Box::new([NO_MEMO; MEMO]),
            user: HashMap::new(),
            user_taken: HashMap::new(),
            kernel: HashMap::new(),
            kernel_taken: [0; 8],
            unplaceable: None,
        }
    }

    /// Whether this maps an x86-64 trace (else: MIPS with folded user addresses).
    pub fn x86_64(&self) -> bool {
        self.x86_64
    }

    /// The trace's kernel classes: those run unmapped (kseg0) and those mapped (kseg2), as
    /// `[start, end)` ranges (an unmapped range wins where they overlap). Called before the
    /// first reference.
    pub fn bind(&mut self, unmapped: &[(u64, u64)], mapped: &[(u64, u64)]) {
        let spans = |r: &[(u64, u64)]| {
            r.iter()
                .filter(|(s, e)| e > s)
                .map(|&(s, e)| (s, e - s))
                .collect()
        };
        self.unmapped = spans(unmapped);
        self.mapped = spans(mapped);
        self.memo.fill(NO_MEMO);
    }

    /// Where a reference of `mode` to `addr`, in address space `asid`, lands.
    #[inline(always)]
    pub fn place(&mut self, addr: u64, mode: Mode, asid: u32) -> Place {
        if self.x86_64 {
            if addr >> 63 == 0 {
                return self.user_page(addr, asid);
            }
            for &(start, len) in &self.unmapped {
                if addr.wrapping_sub(start) < len {
                    return if mode == Mode::Kernel {
                        Place::Unmapped
                    } else {
                        Place::Error
                    };
                }
            }
            let m = self.memo[memo_index(addr, KERNEL_SPACE)];
            if m.space == KERNEL_SPACE && addr.wrapping_sub(m.lo) < m.len {
                return Place::Kernel(m.base | (addr & BLOCK_MASK));
            }
            return self.kernel_slow(addr);
        }
        if mode == Mode::User || addr < layout::KSEG0 {
            return self.user_page(addr, asid);
        }
        match layout::segment(addr) {
            Segment::Unmapped => Place::Unmapped,
            Segment::Outside => Place::Error,
            _ => Place::Kernel(addr),
        }
    }

    /// A user address of address space `asid`, folded into kuseg.
    #[inline(always)]
    fn user_page(&mut self, addr: u64, asid: u32) -> Place {
        let m = self.memo[memo_index(addr, asid)];
        if m.space == asid && addr.wrapping_sub(m.lo) < m.len {
            return Place::User(m.base | (addr & BLOCK_MASK));
        }
        self.user_slow(addr, asid)
    }

    #[cold]
    #[inline(never)]
    fn user_slow(&mut self, addr: u64, asid: u32) -> Place {
        let block = addr >> BLOCK_SHIFT;
        let base = match self.user.get(&(asid, block)) {
            Some(&b) => b,
            None => {
                let taken = self.user_taken.entry(asid).or_insert([0; 8]);
                let Some(b) = claim(taken, USER_BLOCKS, block) else {
                    self.refuse(Some(asid), addr);
                    return Place::Error;
                };
                self.user.insert((asid, block), b);
                b
            }
        } << BLOCK_SHIFT;
        self.memo[memo_index(addr, asid)] = Memo {
            lo: block << BLOCK_SHIFT,
            len: 1 << BLOCK_SHIFT,
            space: asid,
            base,
        };
        Place::User(base | (addr & BLOCK_MASK))
    }

    #[cold]
    #[inline(never)]
    fn kernel_slow(&mut self, addr: u64) -> Place {
        let Some(&(start, len)) = self.mapped.iter().find(|&&(s, l)| addr.wrapping_sub(s) < l)
        else {
            return Place::Error;
        };
        let block = addr >> BLOCK_SHIFT;
        let b = match self.kernel.get(&block) {
            Some(&b) => b,
            None => {
                let Some(b) = claim(&mut self.kernel_taken, KERNEL_BLOCKS, block) else {
                    self.refuse(None, addr);
                    return Place::Error;
                };
                self.kernel.insert(block, b);
                b
            }
        };
        let base = layout::KSEG2 + (b << BLOCK_SHIFT);
        // The memo holds the part of the block inside this class only: the rest may lie in
        // another class, or in none.
        let lo = (block << BLOCK_SHIFT).max(start);
        let hi = ((block << BLOCK_SHIFT) | BLOCK_MASK).min(start + (len - 1));
        self.memo[memo_index(addr, KERNEL_SPACE)] = Memo {
            lo,
            len: hi - lo + 1,
            space: KERNEL_SPACE,
            base,
        };
        Place::Kernel(base | (addr & BLOCK_MASK))
    }

    fn refuse(&mut self, space: Option<u32>, addr: u64) {
        if self.unplaceable.is_none() {
            self.unplaceable = Some(Unplaceable {
                space,
                addr: addr & !((1 << layout::PAGE_SHIFT) - 1),
            });
        }
    }

    /// Why the trace could not be mapped without aliasing (the first page that could not be
    /// placed), or `None`.
    pub fn unplaceable(&self) -> Option<String> {
        let u = self.unplaceable?;
        Some(match u.space {
            Some(asid) => format!(
                "address space {asid} touches more than {USER_BLOCKS} distinct 4 MB blocks of user memory (the page at {:#x} is in one more): MIPS kuseg (2 GB) cannot hold them without aliasing pages",
                u.addr
            ),
            None => format!(
                "the kernel maps more than {KERNEL_BLOCKS} distinct 4 MB blocks of memory outside its kseg0 classes (the page at {:#x} is in one more): MIPS kseg2's mapped kernel data (128 MB) cannot hold them without aliasing pages; declare more kernel classes unmapped in [pages]",
                u.addr
            ),
        })
    }
}

/// The memo entry of the block of `addr` in `space`.
#[inline(always)]
fn memo_index(addr: u64, space: u32) -> usize {
    let key = (addr >> BLOCK_SHIFT) ^ ((space as u64) << 41);
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - MEMO.trailing_zeros())) as usize
}

/// Take a free block of the `n` in `taken` for trace block `block`: the one numbered by its
/// low bits if free, else the next free one after it (round the end); `None` if all are.
fn claim(taken: &mut Taken, n: u64, block: u64) -> Option<u64> {
    (0..n).map(|k| (block + k) % n).find(|&b| {
        let (word, bit) = ((b / 64) as usize, 1u64 << (b % 64));
        let free = taken[word] & bit == 0;
        if free {
            taken[word] |= bit;
        }
        free
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mmu::reference::PlainFold;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const DIRECT: (u64, u64) = (0xffff_8880_0000_0000, 0xffff_c880_0000_0000);
    const TEXT: (u64, u64) = (0xffff_ffff_8000_0000, 0xffff_ffff_c000_0000);
    const VMALLOC: (u64, u64) = (0xffff_c900_0000_0000, 0xffff_e900_0000_0000);
    const MODULES: (u64, u64) = (0xffff_ffff_c000_0000, 0xffff_ffff_ff00_0000);
    /// A mapped class that starts and ends inside blocks, beside a gap.
    const ODD: (u64, u64) = (0xffff_fe00_0012_3000, 0xffff_fe00_0045_6000);

    fn x86() -> AddressMap {
        let mut m = AddressMap::new(true);
        m.bind(&[DIRECT, TEXT], &[VMALLOC, MODULES, ODD]);
        m
    }

    #[test]
    fn segments_of_an_x86_64_trace() {
        let mut m = x86();
        let k = Mode::Kernel;
        let u = Mode::User;
        // User pages keep their offset in their 4 MB block; the block's low 9 bits choose
        // the kuseg block when it is free.
        assert_eq!(m.place(0x40_1234, u, 1), Place::User(0x40_1234));
        assert_eq!(m.place(0x7ffd_1234_5678, u, 1), Place::User(0x1234_5678));
        // The kernel reaches user space with the running ASID.
        assert_eq!(m.place(0x40_1234, k, 1), Place::User(0x40_1234));
        // kseg0 classes: not translated in kernel mode, address errors in user mode.
        for a in [DIRECT.0, DIRECT.1 - 1, TEXT.0 + 0x100_0000] {
            assert_eq!(m.place(a, k, 1), Place::Unmapped);
            assert_eq!(m.place(a, u, 1), Place::Error);
        }
        // Mapped classes: kseg2 kernel data, the same for every address space.
        let v = m.place(VMALLOC.0 + 0x5_4321, k, 1);
        assert_eq!(v, Place::Kernel(layout::KSEG2 + 0x5_4321));
        assert_eq!(m.place(VMALLOC.0 + 0x5_4321, k, 7), v);
        // Outside every class, and non-canonical: address errors.
        for a in [DIRECT.0 - 1, DIRECT.1, 1 << 63, u64::MAX, ODD.0 - 1, ODD.1] {
            assert_eq!(m.place(a, k, 1), Place::Error, "{a:#x}");
        }
        // A class that shares its block number's low bits with vmalloc's takes the next
        // block; its ends inside blocks are its ends.
        let odd = layout::KSEG2 + (1 << 22);
        assert_eq!(m.place(ODD.0, k, 1), Place::Kernel(odd + 0x12_3000));
        assert_eq!(m.place(ODD.1 - 1, k, 1), Place::Kernel(odd + 0x45_5fff));
        assert!(m.unplaceable().is_none());
    }

    #[test]
    fn blocks_that_collide_in_their_low_bits_get_blocks_of_their_own() {
        let mut m = x86();
        let u = Mode::User;
        // Three blocks with the same low 9 bits: the first keeps its number, the others
        // take the next free ones.
        let a = m.place(0x0040_0000, u, 1);
        let b = m.place(0x0080_0000_0040_0000, u, 1);
        let c = m.place(0x7fff_8040_0000 | 0x123, u, 1);
        assert_eq!(
            (a, b, c),
            (
                Place::User(0x40_0000),
                Place::User(0x80_0000),
                Place::User(0xc0_0123)
            )
        );
        // Another address space has blocks of its own.
        assert_eq!(m.place(0x0080_0000_0040_0000, u, 2), Place::User(0x40_0000));
        // Kernel blocks collide modulo 32.
        let k = Mode::Kernel;
        let x = m.place(VMALLOC.0, k, 0);
        let y = m.place(VMALLOC.0 + (32 << 22), k, 0);
        assert_eq!(
            (x, y),
            (
                Place::Kernel(layout::KSEG2),
                Place::Kernel(layout::KSEG2 + (1 << 22))
            )
        );
    }

    #[test]
    fn a_memo_entry_serves_its_own_address_space_only() {
        // Two address spaces whose blocks share a memo entry, the block at different kuseg
        // blocks in each.
        let (a, b) = (0x0040_0000u64, 0x7f00_0040_0000u64);
        let other = (2..u32::MAX)
            .find(|&s| memo_index(b, s) == memo_index(b, 1))
            .unwrap();
        let mut m = x86();
        assert_eq!(m.place(a, Mode::User, 1), Place::User(0x40_0000));
        assert_eq!(m.place(b, Mode::User, 1), Place::User(0x80_0000));
        assert_eq!(m.place(b, Mode::User, other), Place::User(0x40_0000));
        assert_eq!(m.place(b | 8, Mode::User, 1), Place::User(0x80_0008));
        assert_eq!(m.place(b | 8, Mode::User, other), Place::User(0x40_0008));
    }

    #[test]
    fn more_blocks_than_kuseg_holds_are_refused_naming_the_page() {
        let mut m = x86();
        for b in 0..USER_BLOCKS {
            assert!(matches!(m.place(b << 31, Mode::User, 3), Place::User(_)));
        }
        // Another address space is unaffected; the 513th block of this one is refused.
        assert!(matches!(m.place(0, Mode::User, 4), Place::User(0)));
        assert_eq!(m.place(0x7f00_0000_1234, Mode::User, 3), Place::Error);
        // A block already placed still is.
        assert!(matches!(m.place(5 << 31, Mode::User, 3), Place::User(_)));
        let e = m.unplaceable().unwrap();
        assert!(
            e.starts_with("address space 3 touches more than 512 distinct 4 MB blocks")
                && e.contains("page at 0x7f0000001000"),
            "{e}"
        );
        let mut k = x86();
        for b in 0..KERNEL_BLOCKS {
            assert!(matches!(
                k.place(VMALLOC.0 + (b << 40), Mode::Kernel, 0),
                Place::Kernel(_)
            ));
        }
        assert_eq!(k.place(MODULES.0, Mode::Kernel, 0), Place::Error);
        assert!(k
            .unplaceable()
            .unwrap()
            .contains("more than 32 distinct 4 MB blocks"));
    }

    #[test]
    fn folded_mips_addresses_keep_the_kernel_segments() {
        let mut m = AddressMap::new(false);
        assert_eq!(m.place(0x40_0000, Mode::User, 1), Place::User(0x40_0000));
        assert_eq!(
            m.place(0x7fff_0040_0000, Mode::User, 1),
            Place::User(0x80_0000)
        );
        // User mode anywhere folds; kernel mode keeps kseg0, kseg2 and the 4 GB limit.
        assert_eq!(
            m.place(layout::KSEG2, Mode::User, 1),
            Place::User(0x4000_0000)
        );
        assert_eq!(m.place(layout::KSEG0, Mode::Kernel, 1), Place::Unmapped);
        assert_eq!(
            m.place(layout::KSEG2, Mode::Kernel, 1),
            Place::Kernel(layout::KSEG2)
        );
        assert_eq!(m.place(1 << 32, Mode::Kernel, 1), Place::Error);
    }

    /// Adversarial addresses: blocks that collide in their low bits, the ends of the halves,
    /// of the classes and of the blocks, non-canonical ones.
    fn address(sel: u8, x: u32) -> (u64, Mode) {
        let x = x as u64;
        let page = (x % 1024) << 12 | (x & 0xff8);
        let mode = if x & 1 == 0 { Mode::User } else { Mode::Kernel };
        match sel % 10 {
            0..=3 => (((x % 5) << 22) | ((x / 5 % 7) << 31) | page, mode),
            4 => ((1 << 47) - 1 - (x % 8192), mode),
            5 => ((1 << 63) - (x % 3) * 4096 - 1, mode),
            6 => (VMALLOC.0 + ((x % 40) << 27) + page, Mode::Kernel),
            7 => (ODD.0 - 0x4000 + ((x % 0x400) << 12), Mode::Kernel),
            8 => (
                [DIRECT.0, DIRECT.1, TEXT.0, MODULES.0, MODULES.1, 1 << 63][x as usize % 6]
                    .wrapping_add((x >> 3) % 5)
                    .wrapping_sub(2),
                mode,
            ),
            _ => (x.wrapping_mul(0x9E37_79B9_7F4A_7C15), mode),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// Against the plain fold and the class table read as written: the same place for
        /// every reference, and never two trace pages of a space on one MIPS page.
        #[test]
        fn matches_the_plain_fold_and_never_aliases(
            refs in prop::collection::vec((any::<u8>(), any::<u32>(), 0u32..3), 1..600),
        ) {
            let mut m = x86();
            let mut plain = PlainFold::default();
            let mut owner: BTreeMap<(u32, u64), u64> = BTreeMap::new();
            let within = |a: u64, r: (u64, u64)| (r.0..r.1).contains(&a);
            for (sel, x, asid) in refs {
                let (addr, mode) = address(sel, x);
                let want = if addr >> 63 == 0 {
                    plain.fold(asid, addr, USER_BLOCKS).map_or(Place::Error, Place::User)
                } else if within(addr, DIRECT) || within(addr, TEXT) {
                    if mode == Mode::Kernel { Place::Unmapped } else { Place::Error }
                } else if [VMALLOC, MODULES, ODD].iter().any(|&r| within(addr, r)) {
                    plain
                        .fold(KERNEL_SPACE, addr, KERNEL_BLOCKS)
                        .map_or(Place::Error, |a| Place::Kernel(layout::KSEG2 + a))
                } else {
                    Place::Error
                };
                let got = m.place(addr, mode, asid);
                prop_assert_eq!(got, want, "{:#x} {:?} asid {}", addr, mode, asid);
                let (space, mips) = match got {
                    Place::User(a) => (asid, a),
                    Place::Kernel(a) => (KERNEL_SPACE, a),
                    _ => continue,
                };
                let page = addr >> 12;
                let first = *owner.entry((space, mips >> 12)).or_insert(page);
                prop_assert_eq!(first, page, "{:#x} aliases page {:#x}", addr, first << 12);
            }
        }
    }
}
