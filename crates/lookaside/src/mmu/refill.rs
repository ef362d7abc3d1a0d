//! The software-managed TLB: one MIPS R2000-style TLB refilled by the OS's miss handlers over
//! the Mach/OSF/1 3-level (or Ultrix 2-level) page table, with nested traps.
//!
//! # What happens on a reference
//!
//! The address's segment ([`super::layout`]) decides everything (a 64-bit trace's addresses
//! are first mapped onto the segments: [`super::addresses`]). kseg0/kseg1 are unmapped.
//! Everything else is looked up in the TLB — kuseg pages by ASID, kseg2 pages as global
//! entries — and a miss raises a trap that runs the handler Mach 3.0 runs (`locore.s`
//! `TRAP_tlb_umiss`, `trap.c` `tlb_miss`, `tlb_mod`):
//!
//! * **kuseg miss → L1U** (uTLB vector). The handler loads the L1U PTE at its *virtual*
//!   address in the task's linear page table (kseg2, from the Context register), through the
//!   TLB. If that load misses, a nested **L2** trap goes through the generic vector: it loads
//!   the L2 PTE from the kernel page table — again through the TLB, so it can miss too and
//!   nest an **L3** trap, whose handler loads the L3 PTE from the unmapped root and inserts
//!   the kernel-page-table mapping. The L2 handler inserts the L2 PTE, loads the L1U PTE
//!   itself (now a hit) and inserts it, returning straight to the user instruction. One user
//!   reference can so take three traps: L1U → L2 → L3.
//! * **kseg2 kernel-data miss → L1K**: the handler loads the L1K PTE from the kernel page
//!   table through the TLB, which can nest an **L3**; then inserts the L1K PTE.
//! * **Miss on a task's page table** (the kernel touching it directly) → **L2**, on the kernel
//!   page table → **L3**, as Mach's `tlb_miss` classifies them by address.
//! * **Invalid**: the PTE found is invalid (the page was never touched, or was unmapped); the
//!   uTLB handler inserts it anyway, the retried reference faults, and the VM system maps the
//!   page (see [`FirstTouch`]).
//! * **Modify**: a store hits an entry whose dirty bit is off (a page mapped by a read fault,
//!   or write-protected for copy-on-write by a `Protect` event); `tlb_mod` sets the bit and
//!   rewrites the entry in place.
//!
//! With the 2-level (Ultrix) table the kernel page table is unmapped: L2 and L1K handlers load
//! their PTE without the TLB and no L3 trap exists.
//!
//! Every trap is counted under its own type and nesting depth; the cost model prices them
//! after the run ([`super::CostTable`]). The handlers' PTE loads are real references: those
//! into kseg2 go through the TLB (that is how traps nest), all are counted, and the handlers'
//! work can be recorded, in order, for a memory system ([`HandlerStep`],
//! [`SoftwareManagedTlb::record_handler_refs`]): each TLB-miss trap (L1U, L1K, L2, L3) runs
//! as many instructions as its cost table's cycles (one per cycle; a trap the software TLB
//! serves runs `stlb_hit`, one it misses adds `stlb_miss`), fetched in sequence from its
//! exception vector in kseg0 ([`layout::UTLB_VECTOR`] for L1U, [`layout::GENERAL_VECTOR`] for
//! the others), then makes its loads. A load that misses the TLB traps before it reaches
//! memory: it is recorded once, when it completes (after the nested handler, or made again by
//! Mach's L2 handler), so the recorded PTE loads are the counted ones less one per L2 trap
//! nested in an L1U handler; the software TLB's probes (8-byte entries) are recorded too.
//! Modify and Invalid traps (`tlb_mod`, the VM fault path) are priced but
//! make no recorded references.
//!
//! # Placement
//!
//! Each TLB write goes to the lower or upper partition by the class of the PTE written and
//! the placement policy (Uhlig Table VIII, [`PlacementPolicy`]); each partition has its own
//! replacement (FIFO lower and random upper on the R2000). Policy D builds the TLB without a
//! partition.
//!
//! # Speed
//!
//! A hit costs a segment compare chain and one [`Tlb::lookup`] (whose MRU entry and hints make
//! repeats nearly free); the dirty bit lives in the entry's context tag, so a load accepts a
//! clean or dirty entry in one probe and a store only a dirty one. Page states (a hash map)
//! are consulted only on misses. Nothing is allocated per reference and nothing is
//! dispatched dynamically.

use std::collections::HashMap;

use crate::config::{
    FirstTouch, KernelPte, MachineConfig, PlacementPolicy, ReadFaultMaps, RefillAddresses,
    StlbIndex, Straddle,
};
use crate::error::{Error, Result};
use crate::event::{Event, Kind, Mode, FLUSH_ALL, FLUSH_SPACE, NO_PADDR};
use crate::ledger::Ledger;
use crate::tlb::{
    DynamicParams, DynamicWork, HillClimber, Part, Partition, Policy, Tlb, TlbParams, NO_CTX,
};

use super::addresses::{AddressMap, Place};
use super::cost::{CostTable, Service, Trap, TrapCounts, Work};
use super::layout::{self, Segment, PAGE_SHIFT};
use super::micro::{Micro, MicroParams};
use super::recent::RecentMisses;
use crate::pagetable::{self, Stlb};
use crate::threec::Shadow;

/// The class of a PTE, which decides the partition it is placed in.
#[repr(usize)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PteClass {
    /// Maps a user page.
    L1U = 0,
    /// Maps a page of mapped kernel data.
    L1K = 1,
    /// Maps a page of a task's L1 page table.
    L2 = 2,
    /// Maps a page of the kernel page table.
    L3 = 3,
}

/// PTE classes, in order.
pub const PTE_CLASSES: [PteClass; 4] = [PteClass::L1U, PteClass::L1K, PteClass::L2, PteClass::L3];

impl PteClass {
    pub fn name(self) -> &'static str {
        match self {
            PteClass::L1U => "L1U",
            PteClass::L1K => "L1K",
            PteClass::L2 => "L2",
            PteClass::L3 => "L3",
        }
    }
}

/// The partition each PTE class goes to under a placement policy (Uhlig Table VIII); policy D
/// has no partition (every class goes to the one pool, called upper here).
pub fn placement_parts(p: PlacementPolicy) -> [Part; 4] {
    use Part::{Lower as Lo, Upper as Up};
    match p {
        PlacementPolicy::A => [Up, Up, Lo, Up],
        PlacementPolicy::B => [Up, Up, Lo, Lo],
        PlacementPolicy::C => [Up, Lo, Lo, Lo],
        PlacementPolicy::D => [Up, Up, Up, Up],
    }
}

/// What the handlers did besides trapping: their PTE loads and TLB writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandlerWork {
    /// PTE loads at kseg2 addresses, through the TLB (L1U PTEs, L1K and L2 PTEs of the
    /// 3-level table).
    pub pte_loads_mapped: u64,
    /// PTE loads from unmapped memory (L3 PTEs; Ultrix's L2 and L1K PTEs).
    pub pte_loads_unmapped: u64,
    /// TLB writes by class of the PTE written.
    pub fills: [u64; 4],
    /// TLB writes that went to the lower partition (0 without a partition).
    pub fills_lower: u64,
    /// Valid entries replaced, by class of the entry evicted.
    pub evicted: [u64; 4],
}

/// One step of the handlers' work as a memory system sees it (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandlerStep {
    /// A TLB-miss trap's handler starts: `instructions` fetches of 4 bytes in sequence from
    /// `code` (unmapped, cached kseg0).
    Enter {
        trap: Trap,
        code: u64,
        instructions: u32,
    },
    /// A load: a PTE, a software-TLB entry, or a prefetched L2 PTE (kernel mode; `paddr` set
    /// for a PTE read from unmapped memory).
    Load(Event),
    /// The handler entered last returns.
    Leave,
}

/// What the IPC-path prefetcher did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefetchWork {
    /// TLB probes (one per entry considered at a switch).
    pub probes: u64,
    /// Valid entries the insertions evicted (the pollution).
    pub evicted: u64,
    /// Entries absent and so inserted, per class, in [`PREFETCH_CLASSES`] order.
    pub inserted_by_class: [u64; 3],
}

impl PrefetchWork {
    /// Entries absent and so inserted, of every class.
    pub fn inserted(&self) -> u64 {
        self.inserted_by_class.iter().sum()
    }
}

/// The classes the IPC-path prefetcher can bring back, in the order of
/// [`PrefetchParams::entries`]: the L2 PTEs mapping the receiver's L1 page-table pages (Bala's
/// default), the receiver's own user pages (L1U) and the kernel data pages (L1K) it missed
/// on while it ran.
pub const PREFETCH_CLASSES: [PteClass; 3] = [PteClass::L2, PteClass::L1U, PteClass::L1K];

/// Bala's IPC-path prefetching: at every switch of address space, the receiver's most
/// recently missed entries of each class are probed for and inserted if absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefetchParams {
    /// Entries per switch for each class of [`PREFETCH_CLASSES`] (each at most
    /// [`MAX_PREFETCH`]); all 0 = off.
    pub entries: [usize; 3],
}

impl PrefetchParams {
    /// Bala's default: the receiver's `n` most recent L1 page-table pages (text, data and
    /// stack: 3).
    pub fn l2(n: usize) -> PrefetchParams {
        PrefetchParams { entries: [n, 0, 0] }
    }

    /// Is any class prefetched?
    pub fn on(&self) -> bool {
        self.entries.iter().any(|&n| n > 0)
    }
}

/// Bala's software TLB's shape (see [`Stlb`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StlbParams {
    pub entries: usize,
    /// 1 or 2.
    pub ways: usize,
    /// Which PTE classes it caches (L1U is never a kernel miss, so its flag is ignored).
    pub classes: [bool; 4],
    /// Index by a hash of the page number instead of its low bits.
    pub hashed: bool,
}

/// Most entries of one class the prefetcher can consider per switch.
pub use super::recent::MAX_RECENT as MAX_PREFETCH;

/// The parameters of a [`SoftwareManagedTlb`], validated by [`SoftwareManagedTlb::new`].
#[derive(Clone, Debug)]
pub struct RefillParams {
    /// The TLB: geometry, partition (lower slots) and replacement per partition.
    pub tlb: TlbParams,
    /// Entries tagged by ASID (else flushed of non-global entries on every switch).
    pub tagged: bool,
    /// 3 (Mach 3.0, OSF/1) or 2 (Ultrix).
    pub levels: u8,
    pub placement: PlacementPolicy,
    pub costs: CostTable,
    pub first_touch: FirstTouch,
    pub read_fault_maps: ReadFaultMaps,
    pub fold_user_addresses: bool,
    /// What the trace's addresses are (see [`super::addresses`]).
    pub addresses: RefillAddresses,
    /// An access crossing a page boundary translates both pages.
    pub split_straddles: bool,
    /// Bala's software TLB of kernel translations, if any.
    pub stlb: Option<StlbParams>,
    /// Bala's IPC-path prefetching: entries of the receiver probed (and inserted if absent)
    /// at every switch of address space.
    pub prefetch: PrefetchParams,
    /// Uhlig's dynamic partitioning, if any.
    pub dynamic: Option<DynamicParams>,
    /// The TLB's structure in the ledger (0 unless a micro-TLB comes first).
    pub index: usize,
    /// A micro-TLB for instruction fetches in front of the TLB, if any.
    pub micro: Option<MicroParams>,
    /// Classify the TLB's misses (compulsory, capacity, conflict) against a fully
    /// associative shadow of its size, replaced by its (upper partition's) policy.
    pub three_c: bool,
}

impl RefillParams {
    /// The R2000 under Mach 3.0: 64 slots fully associative, 8 lower (FIFO) + 56 upper
    /// (random), policy A, Table III Mach 3.0 costs.
    pub fn r2000_mach3() -> RefillParams {
        RefillParams {
            tlb: TlbParams {
                entries: 64,
                ways: 64,
                policy: Policy::Random,
                partition: Some(Partition {
                    lower_ways: 8,
                    lower_policy: Policy::Fifo,
                    upper_policy: Policy::Random,
                }),
                seed: 1,
            },
            tagged: true,
            levels: 3,
            placement: PlacementPolicy::A,
            costs: CostTable::preset("mach3").expect("shipped table"),
            first_touch: FirstTouch::User,
            read_fault_maps: ReadFaultMaps::Clean,
            fold_user_addresses: false,
            addresses: RefillAddresses::Mips,
            split_straddles: true,
            stlb: None,
            prefetch: PrefetchParams::default(),
            dynamic: None,
            index: 0,
            micro: None,
            three_c: false,
        }
    }
}

/// Context tag of a dirty user entry (or'ed with the ASID).
const DIRTY: u64 = 1 << 40;
/// Context tag of every kseg2 entry: global (the G bit), always dirty.
const GLOBAL: u64 = 1 << 41;
/// Where Bala's software TLB sits (kseg0: unmapped, so probing it cannot fault), and the
/// bytes of one of its entries, for the handler references it records.
const STLB_BASE: u64 = layout::KSEG0 + 0x0020_0000;
const STLB_ENTRY: usize = 8;
/// The space of its entries: kernel translations are global.
const KERNEL: u32 = 0;
/// No page (in the prefetcher's lists).
const NO_VPN: u64 = u64::MAX;

/// The state of a page's PTE as the OS keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PageState {
    Invalid,
    Clean,
    Dirty,
}

type PageMap = crate::pagetable::KeyMap<u64, PageState>;

/// The key of a user page of address space `asid` (kuseg page numbers are below 2^19).
#[inline]
fn user_key(asid: u32, vpn: u64) -> u64 {
    ((asid as u64 + 1) << 20) | vpn
}

/// The key of a kernel page (kseg2 page numbers are below 2^20).
#[inline]
fn kernel_key(vpn: u64) -> u64 {
    vpn
}

/// Count a reference's access to the TLB, structure `index` (a miss is also a `walk`, i.e. a
/// refill).
#[inline(always)]
fn count(index: usize, hit: bool, mode: Mode, kind: Kind, ledger: &mut Ledger) {
    ledger.access(index, mode, kind, !hit);
    if !hit {
        ledger.access(ledger.walk_index(), mode, kind, true);
    }
}

/// A MIPS R2000-style TLB with software refill (see the module documentation).
#[derive(Debug)]
pub struct SoftwareManagedTlb {
    tlb: Tlb,
    /// The TLB's (or its partitions') replacement reads the mode of the reference that fills
    /// an entry ([`crate::tlb::Policy::reads_reference`]): each fill tells it.
    reads_reference: bool,
    /// The kind and mode of the reference whose miss is being handled: those of the entry
    /// filled for its page (the handlers' own entries, of page-table pages, are kernel loads').
    filling: (Kind, Mode),
    parts: [Part; 4],
    partitioned: bool,
    params: RefillParams,
    /// How a 64-bit trace's addresses land on the MIPS segments; `None`: they are MIPS
    /// addresses.
    map: Option<AddressMap>,
    cur_asid: u32,
    /// Context of the running address space's user entries (clean; or `DIRTY` for dirty).
    uctx: u64,
    /// `ptebase` of the running task's L1 page table.
    ptebase: u64,
    /// Address space → page-table slot, and slot → address space.
    pt_slot: HashMap<u32, u64>,
    slot_owner: Vec<Option<u32>>,
    next_slot: u64,
    pages: PageMap,
    counts: TrapCounts,
    handler: HandlerWork,
    address_errors: u64,
    /// The address errors of user-mode references (outside kuseg, not folded).
    user_address_errors: u64,
    handler_refs: Option<Vec<HandlerStep>>,
    stlb: Option<Stlb>,
    stlb_misses: u64,
    /// Per address space, its most recently missed pages per prefetch class, kept for the
    /// prefetcher.
    recent: RecentMisses<u64, 3>,
    prefetch: PrefetchWork,
    /// Uhlig's dynamic partitioning: events are traps, the cost is the cycles of all work
    /// priced.
    climber: Option<HillClimber>,
    micro: Option<Micro>,
    /// With `three_c`: the TLB's fully associative shadow (see [`SoftwareManagedTlb::classify`]).
    shadow: Option<Box<Shadow<Tlb>>>,
}

impl SoftwareManagedTlb {
    /// A model with an empty TLB, running address space 0. Errors name the parameter.
    pub fn new(params: RefillParams) -> std::result::Result<SoftwareManagedTlb, String> {
        let mut p = params;
        if p.levels != 2 && p.levels != 3 {
            return Err(format!("levels: {} is not 2 or 3", p.levels));
        }
        if p.levels == 3 && p.costs.cycles_of(Trap::L3).is_none() {
            return Err(format!(
                "cycles.L3: the cost table '{}' has no L3 cost, and a 3-level page table takes L3 traps",
                p.costs.name
            ));
        }
        for t in super::cost::ALL_TRAPS {
            if t != Trap::L3 && p.costs.cycles_of(t).is_none() {
                return Err(format!(
                    "cycles.{}: the cost table '{}' has no cost for it",
                    t.name(),
                    p.costs.name
                ));
            }
        }
        if p.placement == PlacementPolicy::D {
            // No partitioning: one pool replaced by the upper partition's policy.
            if let Some(q) = p.tlb.partition.take() {
                p.tlb.policy = q.upper_policy;
            }
        } else if p.tlb.partition.is_none() {
            return Err(format!(
                "placement: policy {:?} places PTEs in a lower partition, and the TLB has none",
                p.placement
            ));
        }
        for (n, name) in p.prefetch.entries.iter().zip(["l2", "l1u", "l1k"]) {
            if *n > MAX_PREFETCH {
                return Err(format!(
                    "prefetch.{name}_entries: {n} is more than {MAX_PREFETCH}"
                ));
            }
        }
        let stlb = match &p.stlb {
            Some(s) => {
                let index = if s.hashed {
                    pagetable::StlbIndex::Hash
                } else {
                    pagetable::StlbIndex::Low
                };
                Some(Stlb::new(s.entries, s.ways, index).map_err(|e| format!("stlb.{e}"))?)
            }
            None => None,
        };
        let climber = match (&p.dynamic, &p.tlb.partition) {
            (None, _) => None,
            (Some(_), None) => {
                return Err("dynamic: dynamic partitioning needs a partition (not policy D)".into())
            }
            (Some(d), Some(q)) => Some(
                HillClimber::new(*d, p.tlb.ways, q.lower_ways)
                    .map_err(|e| format!("dynamic.{e}"))?,
            ),
        };
        let micro = match &p.micro {
            Some(q) if q.index == p.index => {
                return Err("micro.index: the micro-TLB and the TLB count as one structure".into())
            }
            Some(q) => Some(Micro::new(q, DIRTY)?),
            None => None,
        };
        let tlb = Tlb::new(&p.tlb)?;
        let shadow = if p.three_c {
            let policy = p.tlb.partition.map_or(p.tlb.policy, |q| q.upper_policy);
            let s = Shadow::new(p.tlb.entries, policy, p.tlb.seed ^ 0x3c, true)
                .map_err(|m| format!("3c: {m}"))?;
            Some(Box::new(s))
        } else {
            None
        };
        let x86_64 = p.addresses == RefillAddresses::X86_64;
        let map = (x86_64 || p.fold_user_addresses).then(|| AddressMap::new(x86_64));
        let prefetch = p.prefetch.entries;
        let mut m = SoftwareManagedTlb {
            reads_reference: p.tlb.reads_reference(),
            filling: (Kind::Load, Mode::User),
            map,
            parts: placement_parts(p.placement),
            partitioned: p.tlb.partition.is_some(),
            tlb,
            params: p,
            cur_asid: 0,
            uctx: 0,
            ptebase: 0,
            pt_slot: HashMap::new(),
            slot_owner: vec![None; layout::USER_PT_SLOTS as usize],
            next_slot: 0,
            pages: PageMap::default(),
            counts: TrapCounts::default(),
            handler: HandlerWork::default(),
            address_errors: 0,
            user_address_errors: 0,
            handler_refs: None,
            stlb,
            stlb_misses: 0,
            recent: RecentMisses::new(prefetch, NO_VPN),
            prefetch: PrefetchWork::default(),
            climber,
            micro,
            shadow,
        };
        m.enter(0);
        Ok(m)
    }

    /// The model a machine config describes: its `[[tlb]]` tables (whose parameters are
    /// `tlbs`, in order) and its `[refill]` section (errors name the key). The refilled TLB
    /// is the one whose misses go nowhere else; another may stand in front of it as a
    /// micro-TLB for instruction fetches ([`super::micro`]).
    pub fn from_config(
        config: &MachineConfig,
        tlbs: &[TlbParams],
        source_name: &str,
    ) -> Result<SoftwareManagedTlb> {
        let err = |k: &str, m: String| Error::config(source_name, k, m);
        let Some(r) = &config.refill else {
            return Err(err("refill", "the machine has no [refill] section".into()));
        };
        let (index, micro) = Self::structures(config, tlbs, source_name)?;
        let t = &config.tlbs[index];
        let tlb = &tlbs[index];
        let key = |f: &str| format!("tlb.{}.{f}", t.name);
        if t.serves != crate::config::Serves::Unified {
            return Err(err(
                &key("serves"),
                "with [refill] the TLB must be unified".into(),
            ));
        }
        if t.placement != crate::config::Placement::Upper {
            return Err(err(
                &key("placement"),
                "with [refill] the placement policy is refill.placement (A, B, C or D)".into(),
            ));
        }
        if !t.page.is_empty() && t.page != [crate::config::PageSize::Size(4096)] {
            return Err(err(&key("page"), "the R2000 holds 4 KiB pages only".into()));
        }
        if config.pages.size != crate::config::PageSize::Size(4096) {
            return Err(err("pages.size", "the R2000 has 4 KiB pages only".into()));
        }
        let x86_64 = r.addresses == RefillAddresses::X86_64;
        for (i, region) in config.pages.regions.iter().enumerate() {
            if region.kernel.is_none() || !x86_64 {
                return Err(err(
                    &format!("pages.regions[{i}]"),
                    if x86_64 {
                        "with [refill] the MIPS segments come from the model: a region can only declare a class of the trace's kernel layout unmapped (kseg0), as { kernel = \"direct_map\", size = \"unmapped\" }".into()
                    } else {
                        "with [refill] the MIPS segments (kseg0/kseg1 unmapped, kseg2 mapped) come from the model; a region naming a kernel class (kseg0 for a 64-bit trace) needs refill.addresses = \"x86-64\"; remove the regions".into()
                    },
                ));
            }
        }
        if let Some(g) = config.machine.global_above {
            if g != layout::KSEG2 {
                return Err(err(
                    "machine.global_above",
                    "with [refill] kseg2 (0xc0000000 and up) is global; leave it out or set it to 0xc0000000".into(),
                ));
            }
        }
        let costs = CostTable::preset(&r.costs)
            .map_err(|m| err("refill.costs", m))?
            .with_overrides(&r.cycles);
        let mut costs = costs;
        if let Some(ns) = r.cycle_ns {
            if !(ns.is_finite() && ns > 0.0) {
                return Err(err("refill.cycle_ns", "must be a positive number".into()));
            }
            costs.cycle_ns = ns;
        }
        let stlb = match &r.stlb {
            None => None,
            Some(s) => {
                let mut classes = [false; 4];
                for c in &s.classes {
                    classes[match c {
                        KernelPte::L1K => 1,
                        KernelPte::L2 => 2,
                        KernelPte::L3 => 3,
                    }] = true;
                }
                Some(StlbParams {
                    entries: s.entries,
                    ways: s.ways,
                    classes,
                    hashed: s.index == StlbIndex::Hash,
                })
            }
        };
        if r.dynamic.is_some() {
            return Err(err(
                "refill.dynamic",
                format!("dynamic partitioning belongs to the partitioned TLB: write it as tlb.{}.partition.dynamic (e.g. partition = {{ lower = 8, dynamic = {{ period = 1000 }} }})", t.name),
            ));
        }
        let dynamic = t
            .partition
            .as_ref()
            .and_then(|q| q.dynamic.as_ref())
            .map(DynamicParams::from);
        let params = RefillParams {
            dynamic,
            stlb,
            prefetch: r
                .prefetch
                .as_ref()
                .map_or(PrefetchParams::default(), |p| PrefetchParams {
                    entries: [p.l2_entries, p.l1u_entries, p.l1k_entries],
                }),
            tlb: tlb.clone(),
            tagged: t.asid,
            levels: r.levels,
            placement: r.placement,
            costs,
            first_touch: r.invalid_on_first_touch,
            read_fault_maps: r.read_fault_maps,
            fold_user_addresses: r.fold_user_addresses,
            addresses: r.addresses,
            split_straddles: config.machine.straddle == Straddle::Split,
            index,
            micro,
            three_c: t.three_c,
        };
        SoftwareManagedTlb::new(params).map_err(|m| {
            let (field, msg) = m.split_once(": ").unwrap_or(("", &m));
            let k = match field {
                "placement" | "levels" => format!("refill.{field}"),
                f if f.starts_with("cycles.")
                    || f.starts_with("stlb.")
                    || f.starts_with("prefetch.") =>
                {
                    format!("refill.{f}")
                }
                f if f.starts_with("dynamic") => key(&format!("partition.{f}")),
                _ => key("geometry"),
            };
            err(&k, msg.to_string())
        })
    }

    /// Which of the machine's `[[tlb]]` tables is the refilled TLB, and the micro-TLB in front
    /// of it, if any: one unified TLB whose misses go to the handlers, and at most one other
    /// whose misses go to it, serving instruction fetches, unpartitioned.
    fn structures(
        config: &MachineConfig,
        tlbs: &[TlbParams],
        source_name: &str,
    ) -> Result<(usize, Option<MicroParams>)> {
        let err = |k: String, m: &str| Error::config(source_name, &k, m.to_string());
        let last: Vec<usize> = (0..config.tlbs.len())
            .filter(|&i| config.tlbs[i].next.is_empty())
            .collect();
        let [index] = last[..] else {
            return Err(err(
                "tlb".into(),
                &format!(
                    "the software-refill model ([refill]) drives one TLB, the R2000's (optionally with a micro-TLB in front: next = its name); this machine has {} whose misses go to the handlers",
                    last.len()
                ),
            ));
        };
        let main = &config.tlbs[index].name;
        let micro = match config.tlbs.len() {
            1 => None,
            2 => {
                let i = 1 - index;
                let u = &config.tlbs[i];
                let key = |f: &str| format!("tlb.{}.{f}", u.name);
                if u.next != [main.clone()] {
                    return Err(err(key("next"), &format!("a micro-TLB's misses go to the TLB: next = \"{main}\"")));
                }
                if u.serves != crate::config::Serves::Instruction {
                    return Err(err(key("serves"), "a micro-TLB in front of the software-refilled TLB serves instruction fetches (one for data would also see the miss handlers' PTE loads, which this model sends to the TLB directly): serves = \"instruction\""));
                }
                if u.partition.is_some() || u.placement != crate::config::Placement::Upper {
                    return Err(err(key("partition"), "a micro-TLB has no partition"));
                }
                if !u.page.is_empty() && u.page != [crate::config::PageSize::Size(4096)] {
                    return Err(err(key("page"), "the R2000 holds 4 KiB pages only"));
                }
                Some(MicroParams {
                    tlb: tlbs[i].clone(),
                    tagged: u.asid,
                    index: i,
                    three_c: u.three_c,
                })
            }
            n => {
                return Err(err(
                    "tlb".into(),
                    &format!("the software-refill model ([refill]) drives one TLB and at most one micro-TLB in front of it; this machine has {n} TLBs"),
                ))
            }
        };
        Ok((index, micro))
    }

    /// The parameters in force (policy D: the TLB without its partition).
    pub fn params(&self) -> &RefillParams {
        &self.params
    }

    /// The TLB.
    pub fn tlb(&self) -> &Tlb {
        &self.tlb
    }

    /// Traps so far, by type and depth.
    pub fn counts(&self) -> &TrapCounts {
        &self.counts
    }

    /// Handler PTE loads and TLB writes so far.
    pub fn handler(&self) -> &HandlerWork {
        &self.handler
    }

    /// References not translated: user references outside kuseg (unless folded) and
    /// references at or above 4 GB.
    pub fn address_errors(&self) -> u64 {
        self.address_errors
    }

    /// The address errors of user-mode references: outside kuseg (above 2 GB) and not folded.
    pub fn user_address_errors(&self) -> u64 {
        self.user_address_errors
    }

    /// Whether the trace's addresses are mapped onto the MIPS segments as x86-64's
    /// (`refill.addresses = "x86-64"`).
    pub fn maps_x86_64(&self) -> bool {
        self.map.as_ref().is_some_and(AddressMap::x86_64)
    }

    /// Gives an x86-64 map the trace's kernel classes: those run unmapped (kseg0) and those
    /// mapped (kseg2), as `[start, end)` ranges (see [`AddressMap::bind`]); nothing for MIPS
    /// addresses.
    pub fn bind_kernel_classes(&mut self, unmapped: &[(u64, u64)], mapped: &[(u64, u64)]) {
        if let Some(m) = self.map.as_mut().filter(|m| m.x86_64()) {
            m.bind(unmapped, mapped);
        }
    }

    /// Why the trace's addresses could not be mapped onto the MIPS segments without
    /// aliasing pages (see [`AddressMap::unplaceable`]), or `None`.
    pub fn unplaceable(&self) -> Option<String> {
        self.map.as_ref().and_then(AddressMap::unplaceable)
    }

    /// Where a reference of `mode` to `addr` in address space `asid` lands on the MIPS
    /// segments: as it is (MIPS addresses), or through the address map.
    #[inline(always)]
    pub fn place(&mut self, addr: u64, mode: Mode, asid: u32) -> Place {
        match &mut self.map {
            None => match layout::segment(addr) {
                Segment::User => Place::User(addr),
                Segment::Unmapped if mode == Mode::Kernel => Place::Unmapped,
                Segment::KernelData | Segment::UserPageTable | Segment::KernelPageTable
                    if mode == Mode::Kernel =>
                {
                    Place::Kernel(addr)
                }
                _ => Place::Error,
            },
            Some(m) => m.place(addr, mode, asid),
        }
    }

    /// Slots in the lower partition (0 without a partition).
    pub fn lower_slots(&self) -> usize {
        self.params.tlb.partition.map_or(0, |p| p.lower_ways)
    }

    /// What the cost model prices: traps, those the software TLB served, its misses, and
    /// the prefetch probes.
    pub fn work(&self) -> Work {
        Work {
            traps: self.counts.totals(),
            stlb_hits: self.counts.fast,
            stlb_misses: self.stlb_misses,
            prefetches: self.prefetch.probes,
            micro_refills: self.micro.as_ref().map_or(0, |m| m.refills),
            l1u_counted: if self.climber.is_some() {
                self.counts.of(Trap::L1U)
            } else {
                0
            },
        }
    }

    /// What dynamic partitioning did; `None` without it.
    pub fn dynamic_work(&self) -> Option<&DynamicWork> {
        self.climber.as_ref().map(|c| c.work())
    }

    /// The hill climber of dynamic partitioning, if any.
    pub fn climber(&self) -> Option<&HillClimber> {
        self.climber.as_ref()
    }

    /// The lower partition's size now (it moves under dynamic partitioning).
    pub fn current_lower_slots(&self) -> usize {
        self.tlb.params().partition.map_or(0, |p| p.lower_ways)
    }

    /// After a refill: if a decision is due, price the interval and move the partition
    /// point (Uhlig's hill climbing).
    #[inline]
    fn after_refill(&mut self) {
        if let Some(c) = &self.climber {
            if c.due(self.counts.all()) {
                self.climb();
            }
        }
    }

    #[cold]
    fn climb(&mut self) {
        let now = self.service().total_cycles;
        let traps = self.counts.all();
        let c = self.climber.as_mut().expect("climbing");
        if let Some(target) = c.decide(traps, now) {
            self.tlb
                .repartition(target)
                .expect("target within the validated bounds");
            self.params.tlb.partition = self.tlb.params().partition;
        }
    }

    /// The work priced by the configured cost table.
    pub fn service(&self) -> Service {
        self.params.costs.price(&self.work())
    }

    /// Kernel misses the software TLB served (by trap type) and missed; `None` without one.
    pub fn stlb_counts(&self) -> Option<([u64; super::TRAPS], u64)> {
        self.stlb
            .as_ref()
            .map(|_| (self.counts.fast, self.stlb_misses))
    }

    /// Micro-TLB misses the TLB served without a trap; `None` without a micro-TLB.
    pub fn micro_refills(&self) -> Option<u64> {
        self.micro.as_ref().map(|m| m.refills)
    }

    /// The micro-TLB's entries (set, way, page, context), for tests.
    #[cfg(test)]
    pub fn micro_entries(&self) -> Vec<(usize, usize, u64, u64)> {
        self.micro.as_ref().map_or(Vec::new(), |m| m.entries())
    }

    /// What the IPC-path prefetcher did.
    pub fn prefetch_work(&self) -> &PrefetchWork {
        &self.prefetch
    }

    /// Start (or stop) recording the handlers' work — trap entries with their instruction
    /// counts, PTE loads that reach memory (kernel mode, 4 bytes; `paddr` set for unmapped
    /// ones), returns — to feed a memory system. The caller drains them with
    /// [`SoftwareManagedTlb::take_handler_refs`] after each batch.
    pub fn record_handler_refs(&mut self, on: bool) {
        self.handler_refs = on.then(Vec::new);
    }

    /// Move the recorded handler references into `out` (cleared first).
    pub fn take_handler_refs(&mut self, out: &mut Vec<HandlerStep>) {
        out.clear();
        if let Some(v) = &mut self.handler_refs {
            std::mem::swap(v, out);
        }
    }

    /// Simulate a batch: references are counted in `ledger` under structure 0 (a miss is
    /// also a `walk`, i.e. a refill), control events applied.
    pub fn run_batch(&mut self, events: &[Event], ledger: &mut Ledger) {
        // Chosen once per batch: a machine without a micro-TLB never tests for one, and
        // counts its TLB as structure 0; one that does not classify never tests for a shadow
        // (with a micro-TLB, the rarer machine, it is tested per miss of the micro-TLB).
        if self.micro.is_some() {
            self.run::<true, false>(events, ledger);
        } else if self.shadow.is_some() {
            self.run::<false, true>(events, ledger);
        } else {
            self.run::<false, false>(events, ledger);
        }
    }

    /// [`SoftwareManagedTlb::run_batch`] on a machine with a micro-TLB (`MICRO`) or without,
    /// classifying the TLB's misses (`C3`) or not.
    fn run<const MICRO: bool, const C3: bool>(&mut self, events: &[Event], ledger: &mut Ledger) {
        for e in events {
            if !e.kind.is_ref() {
                ledger.control(e.kind);
                self.control(e, ledger);
                continue;
            }
            if e.asid != self.cur_asid {
                self.switch_to(e.asid, ledger);
            }
            ledger.add_references(e.mode, e.kind, 1);
            self.translate::<MICRO, C3>(e.addr, e.kind, e.mode, ledger);
            if self.params.split_straddles
                && e.size > 1
                && (e.addr ^ e.addr.wrapping_add(e.size as u64 - 1)) >> PAGE_SHIFT != 0
            {
                self.translate_rest::<MICRO, C3>(e, ledger);
            }
        }
    }

    /// The pages after the first that reference `e` touches, one translation each, counted
    /// in `straddles` (as [`crate::machine::Machine`] does: an access past 2^64 ends at the
    /// top of the address space and is counted in `wrapped`).
    #[inline(never)]
    fn translate_rest<const MICRO: bool, const C3: bool>(
        &mut self,
        e: &Event,
        ledger: &mut Ledger,
    ) {
        let last = e.addr.checked_add(e.size as u64 - 1).unwrap_or_else(|| {
            ledger.wrapped += 1;
            u64::MAX
        });
        let mut page = e.addr >> PAGE_SHIFT;
        while page < last >> PAGE_SHIFT {
            page += 1;
            let addr = (page << PAGE_SHIFT | ((1 << PAGE_SHIFT) - 1)).min(last);
            ledger.straddles += 1;
            self.translate::<MICRO, C3>(addr, e.kind, e.mode, ledger);
        }
    }

    /// Translate one reference (one page) and count it; `MICRO`: the machine has a
    /// micro-TLB (else its TLB is structure 0); `C3`: its TLB may classify its misses.
    #[inline(always)]
    fn translate<const MICRO: bool, const C3: bool>(
        &mut self,
        addr: u64,
        kind: Kind,
        mode: Mode,
        ledger: &mut Ledger,
    ) {
        let micro = MICRO && kind == Kind::Fetch;
        let (hit, vpn, ctx) = match self.place(addr, mode, self.cur_asid) {
            Place::User(a) if micro => {
                let (clean, dirty) = (self.uctx, self.uctx | DIRTY);
                return self.fetch_through_micro(a, dirty, clean, mode, ledger);
            }
            Place::User(a) => (
                self.user_ref(a >> PAGE_SHIFT, kind, mode),
                a >> PAGE_SHIFT,
                self.uctx,
            ),
            Place::Unmapped => {
                ledger.unmapped += 1;
                return;
            }
            Place::Kernel(a) if micro => {
                return self.fetch_through_micro(a, GLOBAL, NO_CTX, mode, ledger)
            }
            Place::Kernel(a) => (self.kernel_ref(a, kind, mode), a >> PAGE_SHIFT, GLOBAL),
            Place::Error => {
                self.address_errors += 1;
                self.user_address_errors += (mode == Mode::User) as u64;
                return;
            }
        };
        let index = if MICRO { self.params.index } else { 0 };
        count(index, hit, mode, kind, ledger);
        if (MICRO || C3) && self.shadow.is_some() {
            self.classify(index, vpn, ctx, hit, mode, kind, ledger);
        }
    }

    /// The TLB classifies its misses: the shadow sees the reference's access to page `vpn`
    /// of context `ctx` (a user page's clean one: the page, not its dirty bit), after the
    /// handlers' own look-ups, as the TLB is written after them; a miss (`!hit`) is counted
    /// by class under structure `index`.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn classify(
        &mut self,
        index: usize,
        vpn: u64,
        ctx: u64,
        hit: bool,
        mode: Mode,
        kind: Kind,
        ledger: &mut Ledger,
    ) {
        if let Some(s) = self.shadow.as_deref_mut() {
            if self.reads_reference {
                s.set_reference(kind, mode);
            }
            if let Some(c) = s.tlb_access(vpn, ctx, !hit) {
                ledger.classify(index, mode, kind, c);
            }
        }
    }

    /// A look-up the miss handlers make through the TLB (a PTE's kseg2 page); true on a hit.
    /// A classifying shadow sees it as the TLB does, unclassified: its misses are nested
    /// traps, not misses of the references the ledger counts.
    #[inline]
    fn handler_lookup(&mut self, vpn: u64) -> bool {
        let hit = self.tlb.lookup(vpn, GLOBAL, NO_CTX);
        if self.shadow.is_some() {
            self.shadow_handler_lookup(vpn, hit);
        }
        hit
    }

    /// The classifying shadow sees a look-up of [`Self::handler_lookup`]: a kernel load.
    #[inline(never)]
    fn shadow_handler_lookup(&mut self, vpn: u64, hit: bool) {
        if let Some(s) = self.shadow.as_deref_mut() {
            if self.reads_reference {
                s.set_reference(Kind::Load, Mode::Kernel);
            }
            let _ = s.tlb_access(vpn, GLOBAL, !hit);
        }
    }

    /// An instruction fetch at `addr` (a kuseg or kseg2 address; its entry has context
    /// `ctx` or `gctx`), on a machine with a micro-TLB: the micro-TLB first, then (on a
    /// miss) the TLB, whose entry for the page is copied in front (see [`super::micro`]).
    #[inline(never)]
    fn fetch_through_micro(
        &mut self,
        addr: u64,
        ctx: u64,
        gctx: u64,
        mode: Mode,
        ledger: &mut Ledger,
    ) {
        let vpn = addr >> PAGE_SHIFT;
        let m = self.micro.as_mut().expect("a micro-TLB");
        let held = m.lookup(vpn, ctx, gctx, mode, ledger);
        if held {
            return;
        }
        let hit = if ctx == GLOBAL {
            self.kernel_ref(addr, Kind::Fetch, mode)
        } else {
            self.user_ref(vpn, Kind::Fetch, mode)
        };
        let entry = self
            .tlb
            .probe(vpn, ctx, gctx)
            .and_then(|(s, w)| self.tlb.get(s, w));
        let m = self.micro.as_mut().expect("a micro-TLB");
        if let Some((v, c)) = entry {
            m.copy(v, c);
        }
        m.refills += hit as u64;
        count(self.params.index, hit, mode, Kind::Fetch, ledger);
        if self.shadow.is_some() {
            let page = ctx & !DIRTY;
            self.classify(self.params.index, vpn, page, hit, mode, Kind::Fetch, ledger);
        }
    }

    /// A reference to user page `vpn` of the running address space; true on a TLB hit.
    #[inline(always)]
    fn user_ref(&mut self, vpn: u64, kind: Kind, mode: Mode) -> bool {
        let store = kind == Kind::Store;
        let clean = self.uctx;
        let dirty = clean | DIRTY;
        if store {
            if self.tlb.lookup(vpn, dirty, NO_CTX) {
                return true;
            }
            if self.tlb.lookup(vpn, clean, NO_CTX) {
                self.modify(vpn);
                return true;
            }
        } else if self.tlb.lookup(vpn, dirty, clean) {
            return true;
        }
        self.filling = (kind, mode);
        self.utlb_miss(vpn, store);
        false
    }

    /// A reference to kseg2 address `addr`; true on a TLB hit.
    #[inline(always)]
    fn kernel_ref(&mut self, addr: u64, kind: Kind, mode: Mode) -> bool {
        if self.tlb.lookup(addr >> PAGE_SHIFT, GLOBAL, NO_CTX) {
            return true;
        }
        self.filling = (kind, mode);
        self.kernel_miss(addr, 0);
        self.after_refill();
        false
    }

    /// The L1U trap (uTLB vector) for user page `vpn`, then the retried reference's Invalid
    /// and Modify traps if its PTE calls for them.
    #[cold]
    fn utlb_miss(&mut self, vpn: u64, store: bool) {
        self.counts.add(Trap::L1U, 0);
        self.enter_handler(Trap::L1U, self.trap_instructions(Trap::L1U));
        // lw k0, 0(k0): the L1U PTE at its virtual address, through the TLB.
        let pte = layout::l1u_pte_addr(self.ptebase, vpn << PAGE_SHIFT);
        if self.params.prefetch.on() {
            self.note_recent(PteClass::L2, pte >> PAGE_SHIFT);
            self.note_recent(PteClass::L1U, vpn);
        }
        if self.handler_lookup(pte >> PAGE_SHIFT) {
            self.record(pte, false);
        } else {
            // The load traps: the nested L2 trap (generic vector); Mach's handler then loads
            // the L1U PTE itself, through the L2 entry it just wrote, and inserts it.
            self.count_pte(false);
            self.kernel_miss(pte, 1);
            self.record(pte, false);
            self.handler_lookup(pte >> PAGE_SHIFT);
        }
        self.leave_handler();
        let key = user_key(self.cur_asid, vpn);
        let state = match self.pages.get(&key) {
            Some(&s) => s,
            None if self.params.first_touch != FirstTouch::None => PageState::Invalid,
            None => PageState::Dirty,
        };
        let state = if state == PageState::Invalid {
            // The entry goes in invalid; the retried reference faults and the VM system maps
            // the page (a write fault maps it dirty).
            self.counts.add(Trap::Invalid, 0);
            let s = if store || self.params.read_fault_maps == ReadFaultMaps::Dirty {
                PageState::Dirty
            } else {
                PageState::Clean
            };
            self.pages.insert(key, s);
            s
        } else {
            state
        };
        let ctx = if state == PageState::Dirty {
            self.uctx | DIRTY
        } else {
            self.uctx
        };
        self.fill(vpn, ctx, PteClass::L1U);
        if store && state == PageState::Clean {
            self.modify(vpn);
        }
        self.after_refill();
    }

    /// A Modify trap: the store hit the clean entry of user page `vpn`; `tlb_mod` sets the
    /// dirty bit in the PTE and rewrites the entry in place.
    fn modify(&mut self, vpn: u64) {
        self.counts.add(Trap::Modify, 0);
        self.tlb.retag(vpn, self.uctx, self.uctx | DIRTY);
        if let Some(m) = &mut self.micro {
            m.drop_entry(vpn, self.uctx, NO_CTX);
        }
        self.pages
            .insert(user_key(self.cur_asid, vpn), PageState::Dirty);
    }

    /// A TLB miss on kseg2 address `addr` at nesting depth `depth`: the trap its segment
    /// calls for, its handler's PTE load (which may nest), and the TLB write.
    fn kernel_miss(&mut self, addr: u64, depth: usize) {
        let vpn = addr >> PAGE_SHIFT;
        let (trap, class) = match layout::segment(addr) {
            Segment::UserPageTable => (Trap::L2, PteClass::L2),
            Segment::KernelPageTable if self.params.levels == 3 => (Trap::L3, PteClass::L3),
            _ => (Trap::L1K, PteClass::L1K),
        };
        self.counts.add(trap, depth);
        if class == PteClass::L1K && self.params.prefetch.on() {
            self.note_recent(PteClass::L1K, vpn);
        }
        if self.stlb_serves(class) {
            // Bala's fast path: the software TLB, in unmapped memory, before any state is
            // saved; a hit is inserted at once and cannot nest.
            let stlb = self.stlb.as_mut().expect("stlb_serves");
            let hit = stlb.lookup(KERNEL, vpn).is_some();
            let entry = STLB_BASE + (stlb.set_of(KERNEL, vpn) * stlb.ways() * STLB_ENTRY) as u64;
            let c = &self.params.costs;
            let instructions = if hit {
                c.stlb_hit
            } else {
                self.trap_instructions(trap) + c.stlb_miss
            };
            self.enter_handler(trap, instructions);
            self.record_stlb(entry);
            if hit {
                self.counts.fast[trap as usize] += 1;
                self.fill(vpn, GLOBAL, class);
                self.leave_handler();
                return;
            }
            self.stlb_misses += 1;
        } else {
            self.enter_handler(trap, self.trap_instructions(trap));
        }
        if trap == Trap::L3 {
            // The root of the hierarchy, in kseg0: never through the TLB.
            self.record(layout::l3_pte_addr(addr), true);
        } else if self.params.levels == 3 {
            // pmap_pte(kernel_pmap, addr): a kseg2 load that can miss, nesting an L3 (after
            // which it is made again).
            let pte = layout::kpte_addr(addr);
            if self.handler_lookup(pte >> PAGE_SHIFT) {
                self.record(pte, false);
            } else {
                self.count_pte(false);
                self.kernel_miss(pte, depth + 1);
                self.emit(pte, false);
            }
        } else {
            self.record(layout::sysmap_pte_addr(addr), true);
        }
        if class == PteClass::L1K && depth == 0 && self.params.first_touch == FirstTouch::All {
            let key = kernel_key(vpn);
            if self
                .pages
                .get(&key)
                .is_none_or(|&s| s == PageState::Invalid)
            {
                self.counts.add(Trap::Invalid, 0);
                self.pages.insert(key, PageState::Dirty);
            }
        }
        if self.stlb_serves(class) {
            if let Some(s) = &mut self.stlb {
                s.fill(KERNEL, vpn, vpn);
            }
        }
        self.fill(vpn, GLOBAL, class);
        self.leave_handler();
    }

    /// Instructions the handler of a TLB-miss trap of type `t` runs: its cycles in the cost
    /// table (the memory system's CPU runs one instruction per cycle).
    #[inline]
    fn trap_instructions(&self, t: Trap) -> u32 {
        self.params.costs.cycles_of(t).unwrap_or(0)
    }

    /// Record (if asked) that the handler of `trap` starts, running `instructions`.
    #[inline]
    fn enter_handler(&mut self, trap: Trap, instructions: u32) {
        if let Some(v) = &mut self.handler_refs {
            let code = if trap == Trap::L1U {
                layout::UTLB_VECTOR
            } else {
                layout::GENERAL_VECTOR
            };
            v.push(HandlerStep::Enter {
                trap,
                code,
                instructions,
            });
        }
    }

    /// Record (if asked) that the handler entered last returns.
    #[inline]
    fn leave_handler(&mut self) {
        if let Some(v) = &mut self.handler_refs {
            v.push(HandlerStep::Leave);
        }
    }

    /// Does the software TLB cache PTEs of `class`?
    #[inline]
    fn stlb_serves(&self, class: PteClass) -> bool {
        self.params
            .stlb
            .as_ref()
            .is_some_and(|s| s.classes[class as usize])
    }

    /// Write the PTE of class `class` into the partition its placement says; true if a
    /// valid entry was evicted.
    #[inline(always)]
    fn fill(&mut self, vpn: u64, ctx: u64, class: PteClass) -> bool {
        let part = self.parts[class as usize];
        if self.reads_reference {
            self.tell_filling(class);
        }
        let evicted = self.tlb.fill(vpn, ctx, part);
        if let Some((v, c)) = evicted {
            self.handler.evicted[self.class_of_entry(v, c) as usize] += 1;
            if let Some(m) = &mut self.micro {
                m.drop_entry(v, c, NO_CTX);
            }
        }
        self.handler.fills[class as usize] += 1;
        if self.partitioned && part == Part::Lower {
            self.handler.fills_lower += 1;
        }
        evicted.is_some()
    }

    /// Tell the TLB the reference an entry of `class` is filled for: a page's own entry, the
    /// reference that missed on it; a page-table page's (L2, L3), the handler's PTE load.
    #[inline(never)]
    fn tell_filling(&mut self, class: PteClass) {
        let (kind, mode) = match class {
            PteClass::L1U | PteClass::L1K => self.filling,
            PteClass::L2 | PteClass::L3 => (Kind::Load, Mode::Kernel),
        };
        self.tlb.set_reference(kind, mode);
    }

    /// Remember that the running address space missed on page `vpn` of prefetch class
    /// `class` (one of [`PREFETCH_CLASSES`]; most recent first, no repeats).
    fn note_recent(&mut self, class: PteClass, vpn: u64) {
        let class = PREFETCH_CLASSES
            .iter()
            .position(|&c| c == class)
            .expect("a prefetch class");
        self.recent.note(class, vpn);
    }

    /// Bala's IPC-path prefetch into the address space just entered: probe the TLB for each
    /// of its recently missed entries and insert those absent. The PTEs are read through
    /// unmapped memory (the pmap's own pointers), so the prefetch itself cannot fault; a user
    /// page goes in as the OS holds it (clean or dirty), and one not mapped (an Invalid PTE)
    /// is left out, as it would only trap again.
    fn prefetch_recent(&mut self) {
        let filling = self.filling;
        for (c, &class) in PREFETCH_CLASSES.iter().enumerate() {
            // A prefetched entry is its page's owner's: a user page's the user's.
            let mode = [Mode::Kernel, Mode::User][(class == PteClass::L1U) as usize];
            self.filling = (Kind::Load, mode);
            for vpn in self.recent.current(c) {
                // The context the entry goes in with, the two a present entry may have (a
                // user page's clean or dirty one), and where its PTE is.
                let (ctx, present, pte) = match class {
                    PteClass::L1U => {
                        let (clean, dirty) = (self.uctx, self.uctx | DIRTY);
                        let ctx = match self.pages.get(&user_key(self.cur_asid, vpn)) {
                            Some(PageState::Invalid) => continue,
                            Some(PageState::Clean) => clean,
                            _ => dirty,
                        };
                        let pte = layout::l1u_pte_addr(self.ptebase, vpn << PAGE_SHIFT);
                        (ctx, (dirty, clean), pte)
                    }
                    _ => (
                        GLOBAL,
                        (GLOBAL, NO_CTX),
                        layout::kpte_addr(vpn << PAGE_SHIFT),
                    ),
                };
                self.prefetch.probes += 1;
                if self.tlb.probe(vpn, present.0, present.1).is_none() {
                    self.record(pte, true);
                    self.prefetch.inserted_by_class[c] += 1;
                    if self.fill(vpn, ctx, class) {
                        self.prefetch.evicted += 1;
                    }
                    if let Some(s) = self.shadow.as_deref_mut() {
                        s.set_reference(Kind::Load, mode);
                        s.prefetched(vpn, ctx & !DIRTY);
                    }
                }
            }
        }
        self.filling = filling;
    }

    /// Record (if asked) the software-TLB probe of the entry at `addr`.
    #[inline]
    fn record_stlb(&mut self, addr: u64) {
        if let Some(v) = &mut self.handler_refs {
            v.push(HandlerStep::Load(
                Event::reference(Kind::Load, addr, 8)
                    .with_mode(Mode::Kernel)
                    .with_asid(self.cur_asid)
                    .with_paddr(addr - layout::KSEG0),
            ));
        }
    }

    /// Count and record (if asked) a handler PTE load.
    #[inline]
    fn record(&mut self, addr: u64, unmapped: bool) {
        self.count_pte(unmapped);
        self.emit(addr, unmapped);
    }

    /// Count a handler PTE load.
    #[inline]
    fn count_pte(&mut self, unmapped: bool) {
        if unmapped {
            self.handler.pte_loads_unmapped += 1;
        } else {
            self.handler.pte_loads_mapped += 1;
        }
    }

    /// Record (if asked) a PTE load that reaches memory.
    #[inline]
    fn emit(&mut self, addr: u64, unmapped: bool) {
        if let Some(v) = &mut self.handler_refs {
            let paddr = if unmapped {
                addr - layout::KSEG0
            } else {
                NO_PADDR
            };
            v.push(HandlerStep::Load(
                Event::reference(Kind::Load, addr, 4)
                    .with_mode(Mode::Kernel)
                    .with_asid(self.cur_asid)
                    .with_paddr(paddr),
            ));
        }
    }

    /// Make `asid` the running address space (its page table becomes the Context register's
    /// base); an untagged TLB loses its non-global entries.
    fn switch_to(&mut self, asid: u32, ledger: &mut Ledger) {
        if asid == self.cur_asid {
            return;
        }
        ledger.set_asid(asid);
        if !self.params.tagged {
            self.tlb_flush_if(|_, c| c & GLOBAL == 0);
        }
        if let Some(m) = &mut self.micro {
            m.switched(|c| c & GLOBAL != 0);
        }
        if self.params.prefetch.on() {
            self.recent.switch(self.cur_asid, asid);
        }
        self.enter(asid);
        if self.params.prefetch.on() {
            self.prefetch_recent();
        }
    }

    /// Set the running address space and find (or give) it a page-table slot.
    fn enter(&mut self, asid: u32) {
        self.cur_asid = asid;
        self.uctx = if self.params.tagged { asid as u64 } else { 0 };
        let slot = match self.pt_slot.get(&asid) {
            Some(&s) => s,
            None => self.new_slot(asid),
        };
        self.ptebase = layout::ptebase(slot);
    }

    /// A page-table slot for a new address space; past the 446 that fit, the oldest slot is
    /// reused, its owner forgotten and the TLB entries of its page-table pages flushed.
    #[cold]
    fn new_slot(&mut self, asid: u32) -> u64 {
        let slot = self.next_slot % layout::USER_PT_SLOTS;
        self.next_slot += 1;
        if let Some(old) = self.slot_owner[slot as usize].replace(asid) {
            self.pt_slot.remove(&old);
            let lo = layout::ptebase(slot) >> PAGE_SHIFT;
            let hi = lo + (layout::UPTESIZE >> PAGE_SHIFT);
            self.tlb_flush_if(|v, c| c == GLOBAL && (lo..hi).contains(&v));
        }
        self.pt_slot.insert(asid, slot);
        slot
    }

    fn control(&mut self, e: &Event, ledger: &mut Ledger) {
        // The page it names, on the MIPS segments (a page that lands nowhere is left as it
        // is: it matches no entry).
        let addr = match e.kind {
            Kind::TlbFlush if e.addr >= FLUSH_SPACE => e.addr,
            Kind::TlbFlush | Kind::Map | Kind::Unmap | Kind::Protect if self.map.is_some() => {
                match self.place(e.addr, Mode::Kernel, e.asid) {
                    Place::User(a) | Place::Kernel(a) => a,
                    Place::Unmapped | Place::Error => e.addr,
                }
            }
            _ => e.addr,
        };
        match e.kind {
            Kind::ContextSwitch => self.switch_to(e.asid, ledger),
            Kind::TlbFlush if e.addr == FLUSH_ALL => {
                self.tlb.flush_all();
                if let Some(m) = &mut self.micro {
                    m.flush_all();
                }
                if let Some(s) = self.shadow.as_deref_mut() {
                    s.flush_all();
                }
            }
            Kind::TlbFlush if e.addr == FLUSH_SPACE => {
                // The space's entries but the global ones (an untagged TLB holds those of the
                // running space alone).
                let (tagged, asid) = (self.params.tagged, e.asid);
                if tagged || asid == self.cur_asid {
                    self.tlb_flush_if(move |_, c| c & GLOBAL == 0 && (!tagged || c as u32 == asid));
                }
            }
            Kind::TlbFlush => self.shoot_down(addr, e.asid),
            Kind::Map | Kind::Unmap | Kind::Protect => {
                self.shoot_down(addr, e.asid);
                let state = match e.kind {
                    Kind::Map => PageState::Dirty,
                    Kind::Unmap => PageState::Invalid,
                    _ => PageState::Clean,
                };
                let vpn = addr >> PAGE_SHIFT;
                match layout::segment(addr) {
                    Segment::User => {
                        self.pages.insert(user_key(e.asid, vpn), state);
                    }
                    Segment::KernelData => {
                        self.pages.insert(kernel_key(vpn), state);
                    }
                    _ => {}
                }
                if let Some(s) = &mut self.stlb {
                    s.invalidate(KERNEL, vpn);
                }
            }
            _ => {}
        }
    }

    /// The class of a TLB entry, from its page and context.
    fn class_of_entry(&self, vpn: u64, ctx: u64) -> PteClass {
        if ctx & GLOBAL == 0 {
            return PteClass::L1U;
        }
        match layout::segment(vpn << PAGE_SHIFT) {
            Segment::UserPageTable => PteClass::L2,
            Segment::KernelPageTable if self.params.levels == 3 => PteClass::L3,
            _ => PteClass::L1K,
        }
    }

    /// Invalidate the TLB entry of the page at `addr` of address space `asid`.
    fn shoot_down(&mut self, addr: u64, asid: u32) {
        let vpn = addr >> PAGE_SHIFT;
        match layout::segment(addr) {
            Segment::User => {
                let base = if self.params.tagged { asid as u64 } else { 0 };
                self.tlb_invalidate(vpn, base | DIRTY, base);
            }
            Segment::Unmapped | Segment::Outside => {}
            _ => self.tlb_invalidate(vpn, GLOBAL, NO_CTX),
        }
    }

    /// Invalidate the TLB's entry of page `vpn` with context `ctx` or `gctx`, and its copy
    /// in the micro-TLB.
    fn tlb_invalidate(&mut self, vpn: u64, ctx: u64, gctx: u64) {
        self.tlb.invalidate(vpn, ctx, gctx);
        if let Some(m) = &mut self.micro {
            m.drop_entry(vpn, ctx, gctx);
        }
        if let Some(s) = self.shadow.as_deref_mut() {
            for c in [ctx, gctx].into_iter().filter(|&c| c != NO_CTX) {
                s.invalidate(vpn, c & !DIRTY);
            }
        }
    }

    /// Remove every entry of the TLB that `pred` holds of (page, context), and its copy in
    /// the micro-TLB.
    fn tlb_flush_if(&mut self, pred: impl Fn(u64, u64) -> bool + Copy) {
        self.tlb.flush_if(pred);
        if let Some(m) = &mut self.micro {
            m.drop_if(pred);
        }
        // (The shadow's contexts are clean ones: every test here reads the GLOBAL bit.)
        if let Some(s) = self.shadow.as_deref_mut() {
            s.flush_if(pred);
        }
    }
}
