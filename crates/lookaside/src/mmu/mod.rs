//! Refill: what happens after a TLB miss. Today, the software-managed TLB of the MIPS
//! R2000/R3000 under Mach 3.0, OSF/1 and Ultrix (Uhlig et al., *Design Tradeoffs for
//! Software-Managed TLBs*, TOCS 1994): miss handlers that load PTEs through the TLB itself, so
//! that misses nest (L1U → L2 → L3, L1K → L3), each trap counted under its own type with its
//! own cost.
//!
//! * [`layout`] — the MIPS segments and Mach's page-table layout: where each PTE lives.
//! * [`addresses`] — where a 64-bit trace's addresses land on those segments (x86-64: user
//!   pages folded into kuseg without aliasing, the kernel's classes in kseg0 or kseg2).
//! * [`SoftwareManagedTlb`] — the TLB, the handlers, placement policies A–D, Invalid and
//!   Modify traps, dynamic partitioning by hill climbing, IPC-path prefetching; driven by
//!   events like a [`crate::machine::Machine`] (which delegates to it when the config has a
//!   `[refill]` section). The OS-structure workloads that exercise it are in
//!   [`crate::workload`] (`OsWorkload`, `Multiserver`).
//! * [`CostTable`], [`TrapCounts`] — the cost model, applied to counts after the run.
//! * Bala et al.'s software TLB of kernel translations (a fast path for kernel misses) is a
//!   [`crate::pagetable::Stlb`], the store of the page tables' front tables too; the
//!   IPC-path prefetcher lives in [`SoftwareManagedTlb`], and what it remembers (shared with
//!   the walked machine's, [`crate::machine`]) in `recent`.
//! * [`report`] — the `traps` section of the result JSON.
//! * [`Walker`] — refill from a [`crate::pagetable`] organisation by hardware or software,
//!   every table reference through a data cache, priced by Huck & Hays' cycle costs
//!   ([`WalkCosts`]); the `pagetable` section of the result JSON.
//!
//! The paper's Tables VI and VII, computed exactly from its Tables V and III with
//! [`CostTable`], are not the engine's: they live in the `lookaside-papers` crate
//! (`lookaside_papers::uhlig94`).

pub mod addresses;
mod cost;
pub mod layout;
mod micro;
mod recent;
mod refill;
pub mod report;
mod walker;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

pub use cost::{CostTable, Service, Trap, TrapCounts, Work, ALL_TRAPS, DEPTHS, TRAPS};
pub use micro::MicroParams;
pub(crate) use recent::RecentMisses;
pub use recent::MAX_RECENT;
pub use refill::{
    placement_parts, HandlerStep, HandlerWork, PrefetchParams, PrefetchWork, PteClass,
    RefillParams, SoftwareManagedTlb, StlbParams, MAX_PREFETCH, PREFETCH_CLASSES, PTE_CLASSES,
};
pub use walker::{
    table_page_shift, Addresses, CpuParts, RefillBy, WalkCosts, WalkStats, Walker, CHAIN_BINS,
    COST_NAMES,
};
