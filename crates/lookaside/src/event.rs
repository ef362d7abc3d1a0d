//! The one record every source produces and every machine consumes.
//!
//! A reference and a control event share one fixed-size, `Copy` record so that a batch is a
//! plain `Vec<Event>`: readers fill it, the machine walks it, nothing is allocated per
//! reference and nothing is dispatched dynamically inside the batch. Control events (context
//! switch, TLB flush, map/unmap/protect, markers) travel in the same stream, in order, so a
//! flush lands exactly between the references it separates.

/// What an event is. The first three are memory references; the rest are control events.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Instruction fetch.
    Fetch = 0,
    /// Data read.
    Load = 1,
    /// Data write.
    Store = 2,
    /// The running address space becomes `asid` (the OS switched context).
    ContextSwitch = 3,
    /// Invalidate translations: all of them (`addr == FLUSH_ALL`), or the one page holding
    /// `addr` in address space `asid`.
    TlbFlush = 4,
    /// The OS mapped the page at `addr` of `asid` to the frame at `paddr`.
    Map = 5,
    /// The OS removed the mapping of the page at `addr` of `asid`.
    Unmap = 6,
    /// The OS changed the protection of the page at `addr` of `asid` (cached translations of
    /// it are stale).
    Protect = 7,
    /// A marker with a payload in `addr` (phase boundaries, labels); counted, not simulated.
    Marker = 8,
    /// The OS copied a page (a VM primitive, as Mach's `pmap_copy_page`): from the frame at
    /// physical address `paddr` to the page at `addr` of `asid` (physical when `asid` is
    /// [`PHYSICAL`]).
    CopyPage = 9,
    /// The OS zeroed the page at `addr` of `asid` (physical when `asid` is [`PHYSICAL`]), as
    /// Mach's `pmap_zero_page`.
    ZeroPage = 10,
}

/// Number of reference kinds (fetch, load, store); ledger arrays are indexed by `Kind as usize`.
pub const REF_KINDS: usize = 3;
/// Every kind, in discriminant order.
pub const ALL_KINDS: [Kind; 11] = [
    Kind::Fetch,
    Kind::Load,
    Kind::Store,
    Kind::ContextSwitch,
    Kind::TlbFlush,
    Kind::Map,
    Kind::Unmap,
    Kind::Protect,
    Kind::Marker,
    Kind::CopyPage,
    Kind::ZeroPage,
];

impl Kind {
    /// True for fetch, load and store.
    #[inline(always)]
    pub fn is_ref(self) -> bool {
        (self as u8) < 3
    }

    /// The lower-case name used in reports and configs (`fetch`, `load`, `store`, …).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fetch => "fetch",
            Kind::Load => "load",
            Kind::Store => "store",
            Kind::ContextSwitch => "context_switch",
            Kind::TlbFlush => "tlb_flush",
            Kind::Map => "map",
            Kind::Unmap => "unmap",
            Kind::Protect => "protect",
            Kind::Marker => "marker",
            Kind::CopyPage => "copy_page",
            Kind::ZeroPage => "zero_page",
        }
    }

    /// The kind whose discriminant is `v`, if any.
    pub fn from_u8(v: u8) -> Option<Kind> {
        ALL_KINDS.get(v as usize).copied()
    }
}

/// Privilege mode of the reference.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    User = 0,
    Kernel = 1,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::User => "user",
            Mode::Kernel => "kernel",
        }
    }
}

/// The address space of a VM primitive ([`Kind::CopyPage`], [`Kind::ZeroPage`]) whose `addr`
/// is a physical address: the kernel working on a frame through its physical address.
pub const PHYSICAL: u32 = u32::MAX;

/// Marks an event with no physical address.
pub const NO_PADDR: u64 = u64::MAX;
/// `addr` of a [`Kind::TlbFlush`] that invalidates every entry (of every address space).
pub const FLUSH_ALL: u64 = u64::MAX;

/// Payload tag of a system-call marker: a [`Kind::Marker`] whose payload is this tag or'ed with
/// the call's number (below 2^32) marks the point where the program entered the kernel. The
/// user-level capture writes one per system call, so a model of the operating system can
/// serve the program's own calls at the program's own points (`workload:os,trace=…`); the
/// tag keeps them apart from markers with small payloads (idle-loop markers).
pub const SYSCALL_MARK: u64 = 0x5359_5343_0000_0000; // "SYSC"
/// The bits of a system-call marker's payload that hold the call's number.
pub const SYSCALL_NR: u64 = 0xFFFF_FFFF;

/// One reference or control event: 24 bytes, `Copy`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// Virtual address (references), page address (map/unmap/protect/flush) or payload (marker).
    pub addr: u64,
    /// Physical address when the source knows it, else [`NO_PADDR`].
    pub paddr: u64,
    /// Address-space id the event belongs to.
    pub asid: u32,
    /// Bytes touched (references); 0 for control events.
    pub size: u16,
    pub kind: Kind,
    pub mode: Mode,
}

impl Event {
    /// A user-mode reference in address space 0 with no physical address.
    #[inline]
    pub fn reference(kind: Kind, addr: u64, size: u16) -> Event {
        Event {
            addr,
            paddr: NO_PADDR,
            asid: 0,
            size,
            kind,
            mode: Mode::User,
        }
    }

    /// The marker of a system call numbered `nr` (see [`SYSCALL_MARK`]), in address space
    /// `asid`, made from user mode.
    #[inline]
    pub fn syscall(nr: u64, asid: u32) -> Event {
        Event::control(Kind::Marker, SYSCALL_MARK | (nr & SYSCALL_NR), asid).with_mode(Mode::User)
    }

    /// The number of the system call this event marks, if it is a system-call marker.
    #[inline]
    pub fn syscall_number(&self) -> Option<u64> {
        (self.kind == Kind::Marker && self.addr & !SYSCALL_NR == SYSCALL_MARK)
            .then_some(self.addr & SYSCALL_NR)
    }

    /// A control event of `kind` with the given address (or payload) and address space.
    #[inline]
    pub fn control(kind: Kind, addr: u64, asid: u32) -> Event {
        Event {
            addr,
            paddr: NO_PADDR,
            asid,
            size: 0,
            kind,
            mode: Mode::Kernel,
        }
    }

    #[inline]
    pub fn with_mode(mut self, mode: Mode) -> Event {
        self.mode = mode;
        self
    }

    #[inline]
    pub fn with_asid(mut self, asid: u32) -> Event {
        self.asid = asid;
        self
    }

    #[inline]
    pub fn with_paddr(mut self, paddr: u64) -> Event {
        self.paddr = paddr;
        self
    }
}

/// Events a reader puts in one batch (a batch is a reused `Vec<Event>` of about this length).
pub const BATCH: usize = 4096;

/// A consumer of events one at a time, in stream order: what a decoder hands each event to
/// when it need not fill a batch first (the machine's [`crate::machine::Feed`], or a batch).
/// A trait rather than a closure so that implementations can promise inlining into the
/// decoder's loop.
pub trait EventSink {
    fn event(&mut self, e: &Event);
}

impl EventSink for Vec<Event> {
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        self.push(*e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_is_compact() {
        assert_eq!(std::mem::size_of::<Event>(), 24);
    }

    #[test]
    fn kinds_round_trip_through_u8() {
        for k in ALL_KINDS {
            assert_eq!(Kind::from_u8(k as u8), Some(k));
        }
        assert_eq!(Kind::from_u8(11), None);
        assert!(Kind::Store.is_ref() && !Kind::ContextSwitch.is_ref());
    }

    #[test]
    fn system_call_markers_are_told_from_other_markers() {
        assert_eq!(Event::syscall(231, 0).syscall_number(), Some(231));
        assert_eq!(Event::control(Kind::Marker, 7, 0).syscall_number(), None);
        let store = Event::reference(Kind::Store, SYSCALL_MARK | 3, 4);
        assert_eq!(store.syscall_number(), None);
    }
}
