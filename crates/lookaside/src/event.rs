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
    /// Invalidate translations: all of them (`addr == FLUSH_ALL`), those of address space
    /// `asid` but the global ones (`addr == FLUSH_SPACE`), or the one page holding `addr` in
    /// address space `asid`.
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
    /// The reference kinds, in discriminant order: fetch, load, store.
    pub const REFS: [Kind; REF_KINDS] = [Kind::Fetch, Kind::Load, Kind::Store];

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
/// `addr` of a [`Kind::TlbFlush`] that invalidates every entry of address space `asid` but
/// the global ones: a process's whole range, as Linux's `flush_tlb_mm()` (and a range
/// flush above its ceiling) asks. A flush of everything instead would also empty the
/// kernel's global entries and every other address space's, which a TLB tagged by address
/// space keeps.
pub const FLUSH_SPACE: u64 = u64::MAX - 1;

/// Payload tag of a system-call marker: a [`Kind::Marker`] whose payload is this tag or'ed with
/// the call's number (below 2^32) marks the point where the program entered the kernel. The
/// user-level capture writes one per system call, so a model of the operating system can
/// serve the program's own calls at the program's own points (`workload:os,trace=…`); the
/// tag keeps them apart from markers with small payloads (idle-loop markers).
pub const SYSCALL_MARK: u64 = 0x5359_5343_0000_0000; // "SYSC"
/// The bits of a system-call marker's payload that hold the call's number.
pub const SYSCALL_NR: u64 = 0xFFFF_FFFF;

/// Payload tag of a phase marker: a [`Kind::Marker`] whose payload is this tag or'ed with a
/// label of up to four ASCII bytes (big-endian: `send` is `0x7365_6e64`) starts a phase of the
/// stream, which lasts until the next phase marker. A workload labels its phases (the set-up,
/// the warm-up, the part measured) so that a model can say what each one cost: a machine's
/// `[vac]` adds up the microseconds and primitives of each label.
pub const PHASE_MARK: u64 = 0x5048_4153_0000_0000; // "PHAS"

/// Payload tag of an idle-loop marker: a [`Kind::Marker`] whose payload is this tag or'ed
/// with 1 opens the idle loop (the CPU has nothing to run), or'ed with 0 closes it. A
/// whole-system capture writes them where the scheduler switches to and from the idle task,
/// so that a model can leave the idle loop out of what it charges the system with (Chen's
/// MCPI excludes idle instructions); a machine's `idle_markers` names other payloads.
pub const IDLE_MARK: u64 = 0x4944_4c45_0000_0000; // "IDLE"
/// The payloads that open and close the idle loop ([`IDLE_MARK`]).
pub const IDLE_MARKERS: [u64; 2] = [IDLE_MARK | 1, IDLE_MARK];

/// Payload tag of a VM-page marker: a [`Kind::Marker`] whose payload is this tag or'ed with a
/// size in bytes (below 2^32) says that the stream's VM events (map, unmap, copy and zero
/// page) are in pages of that size. A workload built for one page size says so first, and a
/// model with a page of its own (a machine's `[vac]`) refuses a stream of another, which it
/// would otherwise price silently wrong.
pub const VM_PAGE_MARK: u64 = 0x564d_5047_0000_0000; // "VMPG"

/// Payload tag of a CPU marker: a [`Kind::Marker`] whose payload is this tag or'ed with a CPU
/// number (below 2^32) says that the events after it, up to the next CPU marker, were made by
/// that CPU. A capture of several CPUs interleaves their events in the order they ran and
/// writes one wherever the running CPU changes; a stream with none is CPU 0's ([`Cpus`]).
///
/// The CPU is state of the stream, as the address space is to a context switch, rather than
/// a field of every event: an event stays 24 bytes, every existing format keeps its records
/// (a file with no CPU marker is a one-CPU trace, as every earlier file is), and a model of
/// one CPU, which counts markers and simulates nothing for them, is unchanged and pays nothing.
pub const CPU_MARK: u64 = 0x4350_5553_0000_0000; // "CPUS"

/// Most CPUs a stream (and a machine) has: a shootdown names the CPUs it reaches in one
/// 64-bit mask (a [`Kind::TlbFlush`]'s `paddr`).
pub const MAX_CPUS: u32 = 64;

/// Which CPU made each event of a stream (see [`CPU_MARK`]): the last CPU marker's, 0 before
/// any.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cpus {
    current: u32,
}

impl Cpus {
    /// The CPU that made `e`, the next event of the stream (a CPU marker: the CPU it names).
    #[inline(always)]
    pub fn of(&mut self, e: &Event) -> u32 {
        if let Some(cpu) = e.cpu_marked() {
            self.current = cpu;
        }
        self.current
    }
}

/// Flags a control event carries in its `size` field (0: none), refining what a VM event asks
/// of a model that keeps mappings (a machine's `[vac]`); the TLBs ignore them. Which flags
/// mean something depends on the kind.
pub mod flags {
    /// [`Kind::Map`](super::Kind::Map): the mapping is usable at once — the OS enters the
    /// translation now (*eager*). Without it the mapping is *lazy*: the first touch takes a
    /// fault that enters it (Chorus's pseudo page fault).
    pub const MAP_EAGER: u16 = 1;
    /// [`Kind::Map`](super::Kind::Map): read-only (copy-on-write sharing): a store to the page
    /// is a write fault.
    pub const MAP_READ_ONLY: u16 = 2;
    /// [`Kind::Map`](super::Kind::Map): the frame has just been taken from the free pool
    /// (the page allocation is charged with the mapping).
    pub const MAP_NEW_FRAME: u16 = 4;
    /// [`Kind::Unmap`](super::Kind::Unmap): the page is destroyed: its content is dead (a
    /// policy that may purge dead lines purges them instead of flushing) and its frame goes
    /// back to the free pool.
    pub const UNMAP_DEAD: u16 = 1;
    /// [`Kind::Protect`](super::Kind::Protect): make the page writable again (without it:
    /// write-protect it).
    pub const PROTECT_WRITABLE: u16 = 1;
}

/// The `paddr` of a [`Kind::CopyPage`] whose source is a *virtual* address rather than a
/// frame: this bit, the source's address space in bits 32-62 and its 32-bit virtual address
/// in bits 0-31 — a global virtual address, PA-RISC style (see [`Event::copy_page`]).
pub const VIRTUAL_SOURCE: u64 = 1 << 63;

/// Where a [`Kind::CopyPage`] reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopySource {
    /// A physical address (Mach's `pmap_copy_page`: the frame through its physical address).
    Physical(u64),
    /// A virtual address of an address space (a kernel `bcopy` between mappings): address
    /// space below 2^31 - 1, address below 2^32.
    Virtual(u32, u64),
}

impl CopySource {
    /// The source a copy's `paddr` names (`None`: no source, [`NO_PADDR`]).
    pub fn of(paddr: u64) -> Option<CopySource> {
        if paddr == NO_PADDR {
            None
        } else if paddr & VIRTUAL_SOURCE != 0 {
            Some(CopySource::Virtual(
                ((paddr & !VIRTUAL_SOURCE) >> 32) as u32,
                paddr & 0xFFFF_FFFF,
            ))
        } else {
            Some(CopySource::Physical(paddr))
        }
    }

    /// The `paddr` that names this source; `None` for a virtual source out of range.
    pub fn paddr(self) -> Option<u64> {
        match self {
            CopySource::Physical(p) if p & VIRTUAL_SOURCE == 0 => Some(p),
            CopySource::Virtual(asid, va) if asid < 0x7FFF_FFFF && va <= 0xFFFF_FFFF => {
                Some(VIRTUAL_SOURCE | (asid as u64) << 32 | va)
            }
            _ => None,
        }
    }
}

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
        self.marker_value(SYSCALL_MARK)
    }

    /// The low 32 bits of a marker's payload when its upper 32 are the tag `tag`
    /// ([`SYSCALL_MARK`], [`PHASE_MARK`], [`VM_PAGE_MARK`], [`CPU_MARK`]).
    #[inline]
    fn marker_value(&self, tag: u64) -> Option<u64> {
        (self.kind == Kind::Marker && self.addr & !0xFFFF_FFFF == tag)
            .then_some(self.addr & 0xFFFF_FFFF)
    }

    /// The marker that starts the phase `label` (up to four ASCII bytes; see [`PHASE_MARK`]).
    pub fn phase(label: &str) -> Event {
        assert!(
            label.len() <= 4 && label.is_ascii(),
            "a phase label is 1-4 ASCII bytes"
        );
        let bits = label.bytes().fold(0u64, |acc, b| acc << 8 | b as u64);
        Event::control(Kind::Marker, PHASE_MARK | bits, 0)
    }

    /// The marker saying the stream's VM events are in pages of `bytes` (see
    /// [`VM_PAGE_MARK`]).
    pub fn vm_page(bytes: u64) -> Event {
        assert!(bytes <= u32::MAX as u64, "a VM page is below 4 GiB");
        Event::control(Kind::Marker, VM_PAGE_MARK | bytes, 0)
    }

    /// The marker saying the events after it were made by CPU `cpu` (see [`CPU_MARK`]).
    pub fn on_cpu(cpu: u32) -> Event {
        Event::control(Kind::Marker, CPU_MARK | cpu as u64, 0)
    }

    /// The CPU this event names, if it is a CPU marker.
    #[inline(always)]
    pub fn cpu_marked(&self) -> Option<u32> {
        self.marker_value(CPU_MARK).map(|c| c as u32)
    }

    /// The VM page size this event declares, if it is a VM-page marker.
    pub fn vm_page_bytes(&self) -> Option<u64> {
        self.marker_value(VM_PAGE_MARK)
    }

    /// The label of the phase this event starts, if it is a phase marker.
    pub fn phase_label(&self) -> Option<String> {
        let bytes = (self.marker_value(PHASE_MARK)? as u32).to_be_bytes();
        let label: String = bytes
            .iter()
            .skip_while(|b| **b == 0)
            .map(|&b| b as char)
            .collect();
        Some(label)
    }

    /// A copy of `bytes` (0: the whole page holding `addr`) to `addr` of address space `asid`
    /// ([`PHYSICAL`]: `addr` is physical) from `from`. `None` when `from` cannot be encoded
    /// (a virtual source beyond 32 bits).
    pub fn copy_page(asid: u32, addr: u64, from: CopySource, bytes: u16) -> Option<Event> {
        let mut e = Event::control(Kind::CopyPage, addr, asid).with_paddr(from.paddr()?);
        e.size = bytes;
        Some(e)
    }

    /// Set the flags of a control event (see [`flags`]).
    #[inline]
    pub fn with_flags(mut self, flags: u16) -> Event {
        self.size = flags;
        self
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

    /// A CPU marker names its CPU for the events after it; other markers (a phase whose label
    /// spells "CPUS" in another tag's place, a system call) name none.
    #[test]
    fn cpu_markers_say_which_cpu_made_the_events_after_them() {
        let load = Event::reference(Kind::Load, 0x1000, 8);
        let stream = [
            load,
            Event::on_cpu(3),
            load,
            Event::phase("CPUS"),
            Event::syscall(2, 1),
            load,
            Event::on_cpu(u32::MAX),
            load,
            Event::on_cpu(0),
            load,
        ];
        let mut cpus = Cpus::default();
        let of: Vec<u32> = stream.iter().map(|e| cpus.of(e)).collect();
        assert_eq!(of, [0, 3, 3, 3, 3, 3, u32::MAX, u32::MAX, 0, 0]);
        assert_eq!(Event::on_cpu(7).cpu_marked(), Some(7));
        assert_eq!(Event::phase("CPUS").cpu_marked(), None);
        assert_eq!(load.cpu_marked(), None);
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
    fn phase_markers_carry_their_label() {
        let e = Event::phase("send");
        assert_eq!(e.addr, PHASE_MARK | 0x7365_6e64);
        assert_eq!(e.phase_label().as_deref(), Some("send"));
        assert_eq!(Event::phase("rd").phase_label().as_deref(), Some("rd"));
        assert_eq!(Event::syscall(3, 0).phase_label(), None);
        assert_eq!(Event::control(Kind::Marker, 7, 0).phase_label(), None);
    }

    #[test]
    fn copy_sources_round_trip_through_paddr() {
        for from in [
            CopySource::Physical(0x40_0800),
            CopySource::Virtual(0, 0),
            CopySource::Virtual(3, 0x8000_1800),
            CopySource::Virtual(0x7FFF_FFFE, 0xFFFF_FFFF),
        ] {
            let e = Event::copy_page(2, 0x1000, from, 0).unwrap();
            assert_eq!(CopySource::of(e.paddr), Some(from));
        }
        assert_eq!(CopySource::of(NO_PADDR), None);
        assert!(CopySource::Virtual(1, 1 << 32).paddr().is_none());
        assert!(CopySource::Virtual(0x7FFF_FFFF, 0).paddr().is_none());
    }

    #[test]
    fn system_call_markers_are_told_from_other_markers() {
        assert_eq!(Event::syscall(231, 0).syscall_number(), Some(231));
        assert_eq!(Event::control(Kind::Marker, 7, 0).syscall_number(), None);
        let store = Event::reference(Kind::Store, SYSCALL_MARK | 3, 4);
        assert_eq!(store.syscall_number(), None);
    }
}
