//! The MIPS R2000/R3000 address space as Mach 3.0 and OSF/1 lay it out, and where each PTE
//! lives (constants from the CMU Mach 3.0 MIPS sources: `vm_param.h`, `pmap.h`, `locore.s`).
//!
//! ```text
//! 0x0000_0000 ┬ kuseg   user, mapped through the TLB by L1U PTEs (tagged by ASID)
//! 0x8000_0000 ┼ kseg0   kernel, unmapped, cached   (kernel text, most data, the L3 root)
//! 0xA000_0000 ┼ kseg1   kernel, unmapped, uncached (devices)
//! 0xC000_0000 ┼ kseg2   kernel, mapped (global entries):
//!             │   0xC000_0000 .. 0xC800_0000  mapped kernel data          → L1K PTEs
//!             │   0xC800_0000 .. KPTEADDR     per-task linear L1 page tables, 2 MB each
//!             │                               (UPTESIZE), holding L1U PTEs → mapped by L2 PTEs
//! 0xFFC0_0000 ┴   KPTEADDR .. 4 GB           the kernel (L2) page table, 4 MB, holding the
//!                                             L1K and L2 PTEs           → mapped by L3 PTEs
//! ```
//!
//! The L3 PTEs (`root_kptes`) sit in kseg0, so loading one never goes through the TLB: that is
//! what ends the cascade. Pages are 4 KiB and PTEs 4 bytes, so one page-table page maps 4 MB.
//!
//! Ultrix keeps its kernel page table (`Sysmap`) in unmapped memory: a 2-level table, whose L2
//! and L1K PTE loads never miss, and so no L3 traps.

/// Page shift: the R2000 has 4 KiB pages only.
pub const PAGE_SHIFT: u32 = 12;
/// Bytes per PTE.
pub const PTE_BYTES: u64 = 4;
/// Start of kseg0 (kernel, unmapped, cached).
pub const KSEG0: u64 = 0x8000_0000;
/// Start of kseg1 (kernel, unmapped, uncached).
pub const KSEG1: u64 = 0xA000_0000;
/// Start of kseg2 (kernel, mapped); also Mach's `VM_MIN_KERNEL_ADDRESS`.
pub const KSEG2: u64 = 0xC000_0000;
/// End of the mapped kernel data (`VM_MAX_KERNEL_ADDRESS` = kseg2 + 64 × 2 MB) and start of
/// the per-task L1 page tables.
pub const USER_PT_BASE: u64 = 0xC800_0000;
/// Size of one task's linear L1 page table (`UPTESIZE`): 2 GB of kuseg / 4 KiB × 4 bytes.
pub const UPTESIZE: u64 = 2 << 20;
/// Start of the kernel (L2) page table, 4 MB mapping all 4 GB (`KPTEADDR` = −4 MB).
pub const KPTEADDR: u64 = 0xFFC0_0000;
/// End of the 32-bit address space.
pub const ADDR_LIMIT: u64 = 1 << 32;
/// Where the L3 root table (`root_kptes`) sits, in kseg0: 1,024 PTEs, one page. Its exact
/// place does not matter to the TLB (kseg0 is unmapped); it is fixed so that handler
/// references are reproducible addresses.
pub const ROOT_KPTES: u64 = KSEG0 + 0x0010_0000;
/// The R2000's uTLB-miss exception vector (kseg0): the L1U handler's code starts here.
pub const UTLB_VECTOR: u64 = KSEG0;
/// The general exception vector (kseg0): the L1K, L2 and L3 handlers' code starts here (one
/// path into Mach's `tlb_miss`, so their instructions share cache lines).
pub const GENERAL_VECTOR: u64 = KSEG0 + 0x80;
/// Task page tables that fit between `USER_PT_BASE` and `KPTEADDR` (446).
pub const USER_PT_SLOTS: u64 = (KPTEADDR - USER_PT_BASE) / UPTESIZE;

/// Where an address falls, which decides the PTE class of its mapping and the trap a TLB miss
/// on it raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// kuseg: user pages, L1U PTEs; misses go to the uTLB vector.
    User,
    /// kseg0 and kseg1: no translation.
    Unmapped,
    /// kseg2 below `USER_PT_BASE`: mapped kernel data, L1K PTEs.
    KernelData,
    /// A task's L1 page table: its pages are mapped by L2 PTEs.
    UserPageTable,
    /// The kernel page table: its pages are mapped by L3 PTEs.
    KernelPageTable,
    /// At or above 4 GB: not a MIPS address.
    Outside,
}

/// The segment of `addr`.
#[inline(always)]
pub fn segment(addr: u64) -> Segment {
    if addr < KSEG0 {
        Segment::User
    } else if addr < KSEG2 {
        Segment::Unmapped
    } else if addr < USER_PT_BASE {
        Segment::KernelData
    } else if addr < KPTEADDR {
        Segment::UserPageTable
    } else if addr < ADDR_LIMIT {
        Segment::KernelPageTable
    } else {
        Segment::Outside
    }
}

/// Whether a TLB miss on `addr` is a user-space miss, taken by the uTLB vector whatever the
/// mode: kuseg (below 2 GB) in a 32-bit trace, and in a 64-bit one the lower half apart from
/// the 32-bit kernel segments (x86-64 user programs do not use 2–4 GB; its kernel lives in the
/// upper half, where the sign-extended kseg0 and kseg1 are too).
#[inline]
pub fn user_space(addr: u64) -> bool {
    addr < KSEG0 || (ADDR_LIMIT..1 << 63).contains(&addr)
}

/// Base of the linear L1 page table of page-table slot `slot` (the pmap's `ptebase`).
#[inline]
pub fn ptebase(slot: u64) -> u64 {
    USER_PT_BASE + slot * UPTESIZE
}

/// Virtual address of the L1U PTE of user address `va` in the table at `ptebase` — what the
/// R2000 Context register hands the uTLB handler.
#[inline]
pub fn l1u_pte_addr(ptebase: u64, va: u64) -> u64 {
    ptebase + (va >> PAGE_SHIFT) * PTE_BYTES
}

/// Virtual address (in the kernel page table) of the PTE mapping kseg2 address `va`: the L1K
/// PTE of a kernel-data address, the L2 PTE of a user page-table address
/// (`pmap_pte(kernel_pmap, va)`).
#[inline]
pub fn kpte_addr(va: u64) -> u64 {
    KPTEADDR + ((va & (ADDR_LIMIT - 1)) >> PAGE_SHIFT) * PTE_BYTES
}

/// Unmapped (kseg0) address of the L3 PTE mapping kernel-page-table address `va`.
#[inline]
pub fn l3_pte_addr(va: u64) -> u64 {
    ROOT_KPTES + ((va - KPTEADDR) >> PAGE_SHIFT) * PTE_BYTES
}

/// Unmapped address of the PTE of kseg2 address `va` in Ultrix's unmapped kernel page table
/// (`Sysmap`, placed after the L3 root in kseg0; 4 MB would cover all of kseg2).
#[inline]
pub fn sysmap_pte_addr(va: u64) -> u64 {
    ROOT_KPTES + 0x1000 + ((va - KSEG2) >> PAGE_SHIFT) * PTE_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mach_layout() {
        assert_eq!(USER_PT_SLOTS, 446);
        assert_eq!(segment(0x0040_0000), Segment::User);
        assert_eq!(segment(0x8000_0000), Segment::Unmapped);
        assert_eq!(segment(0xBFFF_FFFF), Segment::Unmapped);
        assert_eq!(segment(0xC000_0000), Segment::KernelData);
        assert_eq!(segment(0xC7FF_FFFF), Segment::KernelData);
        assert_eq!(segment(0xC800_0000), Segment::UserPageTable);
        assert_eq!(segment(0xFFBF_FFFF), Segment::UserPageTable);
        assert_eq!(segment(0xFFC0_0000), Segment::KernelPageTable);
        assert_eq!(segment(0xFFFF_FFFF), Segment::KernelPageTable);
        assert_eq!(segment(1 << 32), Segment::Outside);
        // One L1 page-table page (1,024 PTEs) maps 4 MB of kuseg.
        let pt = ptebase(0);
        assert_eq!(
            l1u_pte_addr(pt, 0x0040_0000) >> 12,
            l1u_pte_addr(pt, 0x007F_F000) >> 12
        );
        assert_ne!(
            l1u_pte_addr(pt, 0x0040_0000) >> 12,
            l1u_pte_addr(pt, 0x0080_0000) >> 12
        );
        // The kernel page table maps itself in its last page; the L3 root maps its 1,024 pages.
        assert_eq!(kpte_addr(KPTEADDR) >> 12, 0xFFFF_F000 >> 12);
        assert_eq!(l3_pte_addr(0xFFFF_FFFC), ROOT_KPTES + 4092);
        assert_eq!(segment(l3_pte_addr(KPTEADDR)), Segment::Unmapped);
        assert_eq!(segment(sysmap_pte_addr(0xFFFF_FFFF)), Segment::Unmapped);
    }

    #[test]
    fn user_space_is_kuseg_or_the_lower_half_of_a_64_bit_space() {
        for a in [0, 0x7FFF_FFFF, 1 << 32, 0x5555_5555_0000, 0x7FFF_FFFF_FFFF] {
            assert!(user_space(a), "{a:#x}");
        }
        for a in [
            KSEG0,
            KSEG2,
            0xFFFF_FFFF,
            1 << 63,
            0xFFFF_8880_0000_0000,
            0xFFFF_FFFF_8000_0000,
        ] {
            assert!(!user_space(a), "{a:#x}");
        }
    }
}
