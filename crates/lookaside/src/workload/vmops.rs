//! The VM-primitive workloads of Inouye, Konuru, Walpole and Sears (*The effects of virtually
//! addressed caches on virtual memory design and performance*, 1992): message passing by
//! Chorus IPC-copy, IPC-move (lazy or eager mapping) and pure copy with recycled buffers
//! ([`Ipc`]), and Mach's copy-on-write page initialisation, cases 1-3 ([`Cow`]).
//!
//! Each is the paper's step list (§3.6, §3.7) written as an event stream: the kernel's work as
//! VM events — maps (lazy or eager, of frames fresh from the free pool), unmaps (destroying
//! pages), protection changes, copies (between mappings or through physical addresses) — and
//! the sender's, receiver's or task's own loads and stores, in the address spaces involved.
//! Nothing here prices anything: a machine's `[vac]` does, from the lines its cache holds
//! when each primitive runs, so the same stream costs what any cache, policy, page size and
//! timing make it cost. Phase markers ([`Event::phase`]) label what to measure: `send` is one
//! `ipcSend` to the receiver's read of one word per page (Table 3's interval, without the
//! null message's fixed cost), `cow` one copy-on-write fault and `read` the task reading the
//! new page.
//!
//! Address spaces: the kernel is 0, the sender (or the parent) 1, the receiver (or the child)
//! 2. Frames are the workload's own, the lowest free one each time (as a `[vac]`'s pool hands
//! them out, so the two agree), in pages of `page` bytes, which must be the `[vac]`'s page.
//! A buffer's *colour* is its first page's offset, in pages, above a 16 MiB boundary: its page
//! colour in any cache whose way spans at most 16 MiB (the HP 9000/834's 64 KB way has 32).
//! Deterministic; one message (or fault) is generated at a time.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::event::{flags, CopySource, Event, Kind, BATCH, PHYSICAL};
use crate::trace::TraceSource;

/// The kernel's address space.
pub const KERNEL: u32 = 0;
/// The sender's (IPC) or the parent's (copy-on-write) address space.
pub const SENDER: u32 = 1;
/// The receiver's (IPC) or the child's (copy-on-write) address space.
pub const RECEIVER: u32 = 2;
/// Where the sender's, the receiver's and the kernel's IPC buffers start (plus their colour).
pub const SENDER_BASE: u64 = 0x100_0000;
pub const RECEIVER_BASE: u64 = 0x200_0000;
pub const BUFFER_BASE: u64 = 0x300_0000;
/// Chorus maps all of physical memory into a kernel region; its base is colour 0, so a
/// frame's kernel address has the frame's own colour.
pub const KSEG: u64 = 0x8000_0000;
/// Where the copy-on-write pages are: page `i` at `COW_BASE + (3 + i) × page` (colour
/// `3 + i`).
pub const COW_BASE: u64 = 0x40_0000;

/// Bytes of a word: the sender writes every word of its message, the task reads every word
/// of its page.
const WORD: u64 = 4;

/// An IPC design of the paper's Table 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IpcDesign {
    /// Chorus IPC-copy: copy into a fresh kernel page, then move it to the receiver.
    Copy,
    /// Chorus IPC-move, the receiver's page mapped lazily (a pseudo page fault on first use).
    Move,
    /// IPC-move with the receiver's page mapped eagerly.
    MoveEager,
    /// Two copies through a recycled kernel buffer that stays mapped.
    PureCopy,
}

impl IpcDesign {
    pub const ALL: [IpcDesign; 4] = [
        IpcDesign::Copy,
        IpcDesign::Move,
        IpcDesign::MoveEager,
        IpcDesign::PureCopy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            IpcDesign::Copy => "copy",
            IpcDesign::Move => "move",
            IpcDesign::MoveEager => "move-eager",
            IpcDesign::PureCopy => "pure-copy",
        }
    }

    pub fn parse(name: &str) -> std::result::Result<IpcDesign, String> {
        IpcDesign::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| format!("'{name}' is not copy, move, move-eager or pure-copy"))
    }

    /// Whether the design sends `bytes` (moves need whole pages; a pure copy, some data).
    pub fn sends(self, bytes: u64, page: u64) -> bool {
        match self {
            IpcDesign::Move | IpcDesign::MoveEager => bytes > 0 && bytes.is_multiple_of(page),
            IpcDesign::PureCopy => bytes > 0,
            IpcDesign::Copy => true,
        }
    }
}

/// Parameters of [`Ipc`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IpcParams {
    pub design: IpcDesign,
    /// Bytes per message (page-aligned; a multiple of a word): `size` in a spec.
    #[serde(
        rename(deserialize = "size"),
        deserialize_with = "crate::config::byte_count"
    )]
    pub bytes: u64,
    /// Messages measured (phase `send`).
    pub messages: u64,
    /// Messages sent before them (phase `warm`), for the cache and the frame pool to reach
    /// their steady state.
    pub warm: u64,
    /// The VM page (the `[vac]`'s), at most 64 KiB.
    #[serde(deserialize_with = "crate::config::byte_count")]
    pub page: u64,
    /// Colours of the sender's and receiver's buffers (not cache aligned in the paper), and
    /// of the kernel's recycled IPC buffer (pure copy).
    pub sender_colour: u64,
    pub receiver_colour: u64,
    pub buffer_colour: u64,
}

impl Default for IpcParams {
    fn default() -> Self {
        IpcParams {
            design: IpcDesign::Copy,
            bytes: 2 << 10,
            messages: 10,
            warm: 3,
            page: 2 << 10,
            sender_colour: 0,
            receiver_colour: 5,
            buffer_colour: 11,
        }
    }
}

/// A bad parameter: the spec key and what is wrong.
pub type ParamError = (&'static str, String);

/// The checks a page size must pass.
fn check_page(page: u64) -> std::result::Result<(), ParamError> {
    if !page.is_power_of_two() || !(64..=64 << 10).contains(&page) {
        return Err((
            "page",
            format!("{page} is not a power of two from 64 bytes to 64 KiB"),
        ));
    }
    Ok(())
}

impl IpcParams {
    pub fn check(&self) -> std::result::Result<(), ParamError> {
        check_page(self.page)?;
        if !self.bytes.is_multiple_of(WORD) {
            return Err(("size", format!("{} is not whole words", self.bytes)));
        }
        if !self.design.sends(self.bytes, self.page) {
            let what = match self.design {
                IpcDesign::PureCopy => "some data".to_string(),
                _ => format!("whole {}-byte pages", self.page),
            };
            return Err((
                "size",
                format!("{} sends {what}, not {}", self.design.name(), self.bytes),
            ));
        }
        let limit = (16 << 20) / self.page;
        for (key, c) in [
            ("sender_colour", self.sender_colour),
            ("receiver_colour", self.receiver_colour),
            ("buffer_colour", self.buffer_colour),
        ] {
            if c + self.pages() > limit {
                return Err((key, format!("{c}: the buffer runs past its 16 MiB region")));
            }
        }
        Ok(())
    }

    /// Pages per message.
    pub fn pages(&self) -> u64 {
        self.bytes.div_ceil(self.page)
    }

    /// Page `i` of the sender's buffer.
    pub fn sender_page(&self, i: u64) -> u64 {
        SENDER_BASE + (self.sender_colour + i) * self.page
    }

    /// Page `i` of the receiver's buffer.
    pub fn receiver_page(&self, i: u64) -> u64 {
        RECEIVER_BASE + (self.receiver_colour + i) * self.page
    }

    /// Page `i` of the kernel's IPC buffer (pure copy).
    pub fn buffer_page(&self, i: u64) -> u64 {
        BUFFER_BASE + (self.buffer_colour + i) * self.page
    }

    /// Bytes of the message in page `i`.
    fn part(&self, i: u64) -> u64 {
        (self.bytes - i * self.page).min(self.page)
    }

    /// A copy's `size`: the bytes of page `i`, 0 for the whole page.
    fn copy_size(&self, i: u64) -> u16 {
        let part = self.part(i);
        if part == self.page {
            0
        } else {
            part as u16
        }
    }
}

/// Frames, the lowest free one first.
#[derive(Clone, Debug, Default)]
struct Frames {
    used: BTreeSet<u64>,
    page: u64,
}

impl Frames {
    fn alloc(&mut self) -> u64 {
        let mut f = 0;
        while self.used.contains(&f) {
            f += 1;
        }
        self.used.insert(f);
        f * self.page
    }

    fn free(&mut self, frame: u64) {
        self.used.remove(&(frame / self.page));
    }
}

fn map(asid: u32, va: u64, frame: u64, f: u16) -> Event {
    Event::control(Kind::Map, va, asid)
        .with_paddr(frame)
        .with_flags(f)
}

fn copy(asid: u32, addr: u64, from: CopySource, size: u16) -> Event {
    Event::copy_page(asid, addr, from, size).expect("the workload's addresses fit 32 bits")
}

/// Message passing between two address spaces by one of Table 3's designs (see the module
/// documentation): the sender writes every word of its buffer (replacing pages a move took
/// first), `ipcSend` runs the design's steps page by page, each step for every page before
/// the next starts (§3.6), and the receiver reads one word per page.
#[derive(Clone, Debug)]
pub struct Ipc {
    p: IpcParams,
    frames: Frames,
    /// The frame behind each page of the sender's and the receiver's buffers, if mapped.
    sender: Vec<Option<u64>>,
    receiver: Vec<Option<u64>>,
    /// Messages generated so far.
    made: u64,
    queue: Vec<Event>,
    pos: usize,
}

impl Ipc {
    pub fn new(p: IpcParams) -> std::result::Result<Ipc, ParamError> {
        p.check()?;
        let pages = p.pages() as usize;
        let mut w = Ipc {
            frames: Frames {
                page: p.page,
                ..Frames::default()
            },
            sender: vec![None; pages],
            receiver: vec![None; pages],
            made: 0,
            queue: Vec::new(),
            pos: 0,
            p,
        };
        w.init();
        Ok(w)
    }

    pub fn params(&self) -> &IpcParams {
        &self.p
    }

    /// The buffers, mapped eagerly: the sender's, and for pure copy the kernel's and the
    /// receiver's, which it recycles.
    fn init(&mut self) {
        let p = self.p.clone();
        let new = flags::MAP_EAGER | flags::MAP_NEW_FRAME;
        self.queue.push(Event::vm_page(p.page));
        self.queue.push(Event::phase("init"));
        for i in 0..p.pages() {
            let f = self.frames.alloc();
            self.sender[i as usize] = Some(f);
            self.queue.push(map(SENDER, p.sender_page(i), f, new));
        }
        if p.design == IpcDesign::PureCopy {
            for i in 0..p.pages() {
                let f = self.frames.alloc();
                self.queue.push(map(KERNEL, p.buffer_page(i), f, new));
            }
            for i in 0..p.pages() {
                let f = self.frames.alloc();
                self.receiver[i as usize] = Some(f);
                self.queue.push(map(RECEIVER, p.receiver_page(i), f, new));
            }
        }
    }

    /// The receiver's old page `i`, if any, is unmapped and destroyed.
    fn destroy_old(&mut self, i: u64) {
        if let Some(old) = self.receiver[i as usize].take() {
            self.queue.push(
                Event::control(Kind::Unmap, self.p.receiver_page(i), RECEIVER)
                    .with_flags(flags::UNMAP_DEAD),
            );
            self.frames.free(old);
        }
    }

    /// One message; `measured` labels its `ipcSend` `send` (else the whole message is `warm`).
    fn message(&mut self, measured: bool) {
        let p = self.p.clone();
        let pages = p.pages();
        self.queue
            .push(Event::phase(if measured { "fill" } else { "warm" }));
        self.queue
            .push(Event::control(Kind::ContextSwitch, 0, SENDER));
        // The sender gets replacement pages for those a move took (a lazy mapping: its first
        // store faults them in), then writes every word.
        for i in 0..pages {
            if self.sender[i as usize].is_none() {
                let f = self.frames.alloc();
                self.sender[i as usize] = Some(f);
                self.queue
                    .push(map(SENDER, p.sender_page(i), f, flags::MAP_NEW_FRAME));
            }
        }
        for off in (0..p.bytes).step_by(WORD as usize) {
            self.queue.push(
                Event::reference(Kind::Store, p.sender_page(0) + off, WORD as u16)
                    .with_asid(SENDER),
            );
        }
        if measured {
            self.queue.push(Event::phase("send"));
        }
        let sender = |i: u64| CopySource::Virtual(SENDER, p.sender_page(i));
        match p.design {
            IpcDesign::Copy => {
                let frames: Vec<u64> = (0..pages).map(|_| self.frames.alloc()).collect();
                let new = flags::MAP_EAGER | flags::MAP_NEW_FRAME;
                for &f in &frames {
                    self.queue.push(map(KERNEL, KSEG + f, f, new));
                }
                for (i, &f) in (0..).zip(&frames) {
                    self.queue
                        .push(copy(KERNEL, KSEG + f, sender(i), p.copy_size(i)));
                }
                for i in 0..pages {
                    self.destroy_old(i);
                }
                // ipcReceive: the kernel page is unloaded (flushed) and mapped lazily into
                // the receiver.
                for &f in &frames {
                    self.queue
                        .push(Event::control(Kind::Unmap, KSEG + f, KERNEL));
                }
                for (i, &f) in (0..).zip(&frames) {
                    self.receiver[i as usize] = Some(f);
                    self.queue.push(map(RECEIVER, p.receiver_page(i), f, 0));
                }
            }
            IpcDesign::Move | IpcDesign::MoveEager => {
                let mut frames = Vec::new();
                for i in 0..pages {
                    frames.push(self.sender[i as usize].take().expect("refilled"));
                    self.queue
                        .push(Event::control(Kind::Unmap, p.sender_page(i), SENDER));
                }
                for i in 0..pages {
                    self.destroy_old(i);
                }
                let f = if p.design == IpcDesign::MoveEager {
                    flags::MAP_EAGER
                } else {
                    0
                };
                for (i, &frame) in (0..).zip(&frames) {
                    self.receiver[i as usize] = Some(frame);
                    self.queue.push(map(RECEIVER, p.receiver_page(i), frame, f));
                }
            }
            IpcDesign::PureCopy => {
                for i in 0..pages {
                    self.queue
                        .push(copy(KERNEL, p.buffer_page(i), sender(i), p.copy_size(i)));
                }
                for i in 0..pages {
                    let from = CopySource::Virtual(KERNEL, p.buffer_page(i));
                    self.queue
                        .push(copy(RECEIVER, p.receiver_page(i), from, p.copy_size(i)));
                }
            }
        }
        // The receiver reads one word per page.
        self.queue
            .push(Event::control(Kind::ContextSwitch, 0, RECEIVER));
        for i in 0..pages {
            self.queue.push(
                Event::reference(Kind::Load, p.receiver_page(i), WORD as u16).with_asid(RECEIVER),
            );
        }
    }
}

impl Units for Ipc {
    fn next_unit(&mut self) -> bool {
        if self.made == self.p.warm + self.p.messages {
            return false;
        }
        let measured = self.made >= self.p.warm;
        self.message(measured);
        self.made += 1;
        true
    }

    fn queue(&mut self) -> (&mut Vec<Event>, &mut usize) {
        (&mut self.queue, &mut self.pos)
    }
}

impl TraceSource for Ipc {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        Ok(next_batch_of(self, out))
    }
}

/// A workload made one unit at a time (a message, a fault) into a queue of events, which
/// [`next_batch_of`] hands out in batches.
trait Units {
    /// Queue the next unit's events; false when there are no more.
    fn next_unit(&mut self) -> bool;
    /// The queue, and how much of it is handed out.
    fn queue(&mut self) -> (&mut Vec<Event>, &mut usize);
}

/// The next batch of `u`'s events into `out`; false when there are none.
fn next_batch_of(u: &mut impl Units, out: &mut Vec<Event>) -> bool {
    out.clear();
    while out.len() < BATCH {
        let (queue, pos) = u.queue();
        if *pos == queue.len() {
            queue.clear();
            *pos = 0;
            if !u.next_unit() {
                break;
            }
            continue;
        }
        let n = (BATCH - out.len()).min(queue.len() - *pos);
        out.extend_from_slice(&queue[*pos..*pos + n]);
        *pos += n;
    }
    !out.is_empty()
}

/// Mach's copy-on-write page initialisation (§3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CowCase {
    /// 1: Mach's machine-independent code as on a physically addressed cache: the old (warm)
    /// page is copied to a new (cold) one through physical addresses, then mapped. Nothing
    /// needs flushing on such a cache (pair it with `indexing = "physical"`).
    PhysicalCache = 1,
    /// 2: the same code on a VAC, where the pmap keeps it consistent: the physical copy
    /// flushes the old page's virtual lines first, the old page's physical lines are flushed
    /// after it, and mapping the new page flushes its physical lines. It ends cold.
    PhysicalInit = 2,
    /// 3: a VAC, mapping the new page first (NO-ACCESS to the task) and copying virtual to
    /// virtual. It ends warm.
    MapFirst = 3,
}

impl CowCase {
    pub fn parse(v: &str) -> std::result::Result<CowCase, String> {
        match v {
            "1" => Ok(CowCase::PhysicalCache),
            "2" => Ok(CowCase::PhysicalInit),
            "3" => Ok(CowCase::MapFirst),
            _ => Err(format!("'{v}' is not 1, 2 or 3")),
        }
    }
}

/// Parameters of [`Cow`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CowParams {
    /// 1, 2 or 3 in a spec ([`CowCase::parse`]).
    #[serde(deserialize_with = "cow_case")]
    pub case: CowCase,
    /// Pages the parent writes and the child then faults on, one after the other.
    pub pages: u64,
    /// The VM page (the `[vac]`'s), at most 64 KiB.
    #[serde(deserialize_with = "crate::config::byte_count")]
    pub page: u64,
}

/// A copy-on-write case, written as its number.
fn cow_case<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<CowCase, D::Error> {
    let n = u64::deserialize(d)?;
    CowCase::parse(&n.to_string()).map_err(serde::de::Error::custom)
}

impl Default for CowParams {
    fn default() -> Self {
        CowParams {
            case: CowCase::MapFirst,
            pages: 1,
            page: 2 << 10,
        }
    }
}

impl CowParams {
    pub fn check(&self) -> std::result::Result<(), ParamError> {
        check_page(self.page)?;
        let most = (SENDER_BASE - COW_BASE) / self.page - 3;
        if self.pages == 0 || self.pages > most {
            return Err((
                "pages",
                format!("{} is not from 1 to {most} (at this page size)", self.pages),
            ));
        }
        Ok(())
    }

    /// The `i`-th shared page (the same address in parent and child).
    pub fn page_at(&self, i: u64) -> u64 {
        COW_BASE + (3 + i) * self.page
    }
}

/// Copy-on-write faults (see the module documentation): the parent writes every word of its
/// pages, a child shares them read-only (lazily mapped), then writes each: a fault per page
/// (`cow`) that gives it a private copy by the case's steps, after which it reads every word
/// of the new page (`read`).
#[derive(Clone, Debug)]
pub struct Cow {
    p: CowParams,
    frames: Frames,
    /// The parent's frames.
    old: Vec<u64>,
    /// Faults generated so far.
    made: u64,
    queue: Vec<Event>,
    pos: usize,
}

impl Cow {
    pub fn new(p: CowParams) -> std::result::Result<Cow, ParamError> {
        p.check()?;
        let mut w = Cow {
            frames: Frames {
                page: p.page,
                ..Frames::default()
            },
            old: Vec::new(),
            made: 0,
            queue: Vec::new(),
            pos: 0,
            p,
        };
        w.init();
        Ok(w)
    }

    fn words(&mut self, kind: Kind, asid: u32, page: u64) {
        for off in (0..self.p.page).step_by(WORD as usize) {
            self.queue
                .push(Event::reference(kind, page + off, WORD as u16).with_asid(asid));
        }
    }

    fn init(&mut self) {
        self.queue.push(Event::vm_page(self.p.page));
        self.queue.push(Event::phase("init"));
        self.queue
            .push(Event::control(Kind::ContextSwitch, 0, SENDER));
        for i in 0..self.p.pages {
            let x = self.p.page_at(i);
            let f = self.frames.alloc();
            self.old.push(f);
            let new = flags::MAP_EAGER | flags::MAP_NEW_FRAME;
            self.queue.push(map(SENDER, x, f, new));
            self.words(Kind::Store, SENDER, x);
            // The child shares the page read-only, copy-on-write; it has not touched it yet.
            self.queue.push(map(RECEIVER, x, f, flags::MAP_READ_ONLY));
        }
        self.queue
            .push(Event::control(Kind::ContextSwitch, 0, RECEIVER));
    }

    fn fault(&mut self, i: u64) {
        let x = self.p.page_at(i);
        let old = self.old[i as usize];
        let new = self.frames.alloc();
        let remap = map(RECEIVER, x, new, flags::MAP_NEW_FRAME);
        let writable =
            Event::control(Kind::Protect, x, RECEIVER).with_flags(flags::PROTECT_WRITABLE);
        let physical = copy(PHYSICAL, new, CopySource::Physical(old), 0);
        self.queue.push(Event::phase("cow"));
        match self.p.case {
            CowCase::PhysicalCache => self.queue.extend([physical, remap, writable]),
            CowCase::PhysicalInit => self.queue.extend([
                physical,
                // The old page's physically indexed lines are flushed.
                Event::control(Kind::Unmap, old, PHYSICAL),
                // Mapping the new page flushes its physically indexed lines.
                remap,
                writable,
            ]),
            CowCase::MapFirst => self.queue.extend([
                remap,
                writable,
                copy(RECEIVER, x, CopySource::Virtual(SENDER, x), 0),
            ]),
        }
        self.queue.push(Event::phase("read"));
        self.words(Kind::Load, RECEIVER, x);
    }
}

impl Units for Cow {
    fn next_unit(&mut self) -> bool {
        if self.made == self.p.pages {
            return false;
        }
        self.fault(self.made);
        self.made += 1;
        true
    }

    fn queue(&mut self) -> (&mut Vec<Event>, &mut usize) {
        (&mut self.queue, &mut self.pos)
    }
}

impl TraceSource for Cow {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        Ok(next_batch_of(self, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::vac::alias::AliasPolicy;
    use crate::cache::vac::drive::{feed, FirstTouch, PhaseCost, VacDriver};
    use crate::cache::vac::timing::Timing;
    use crate::cache::vac::VacParams;

    fn hp() -> Timing {
        Timing::preset("hp9000-834").unwrap()
    }

    /// The phases of the workload `spec` as the HP 9000/834's `[vac]` prices them.
    fn priced(spec: &str, params: &VacParams, policy: AliasPolicy) -> Vec<PhaseCost> {
        let mut source = crate::workload::from_spec(spec).unwrap().unwrap();
        let mut d = VacDriver::new(params, policy, hp(), FirstTouch::Any).unwrap();
        feed(&mut d, &mut *source, |_, _| {}).unwrap_or_else(|e| panic!("{spec}: {e}"));
        d.phases()
    }

    fn per(phases: &[PhaseCost], label: &str) -> f64 {
        let p = phases.iter().find(|p| p.phase == label).unwrap();
        p.us / p.count as f64
    }

    #[test]
    fn an_eager_move_of_2k_costs_what_its_primitives_say() {
        let t = hp();
        let p = priced(
            "workload:ipc,design=move-eager,size=2k,messages=3",
            &VacParams::hp9000_834(),
            AliasPolicy::chorus(),
        );
        let lines = 64.0;
        let flush = |dirty: f64| {
            t.flush.base_us
                + t.flush.line_us * lines
                + t.flush.writeback_us * (dirty - t.flush.overlap_lines as f64).max(0.0)
        };
        let unmap = t.vm.unmap_us + t.vm.tlb_purge_us;
        // The sender's page unloaded (every line dirty), the receiver's old page destroyed
        // (one clean line: it read one word), the page mapped eagerly, the receiver's word
        // read from memory.
        let by_hand = unmap + flush(lines) + unmap + flush(1.0) + t.vm.map_us + t.memory.fill_us;
        assert!((per(&p, "send") - by_hand).abs() < 1e-9, "{p:?}");
        // 254.7 µs; Table 3's 591.7 adds the null message.
        assert!((by_hand + t.ipc.null_us - 591.723).abs() < 1e-9);
        let send = p.iter().find(|p| p.phase == "send").unwrap();
        assert_eq!(send.count, 3);
        assert_eq!(send.primitives.pseudo_faults, 0);
        assert_eq!(send.primitives.flush_calls, 6);
    }

    #[test]
    fn copy_on_write_case_3_costs_what_its_primitives_say() {
        let t = hp();
        let p = priced(
            "workload:cow,case=3",
            &VacParams::hp9000_834(),
            AliasPolicy::chorus(),
        );
        let lines = 64.0;
        // Allocation, remap (a TLB purge; the child's dormant alias has no lines), write
        // permission, and a copy from the parent's cached lines into 64 cold ones (the same
        // virtual address: the same sets, two ways).
        let by_hand = t.vm.page_alloc_us
            + t.vm.map_us
            + t.vm.tlb_purge_us
            + t.vm.protect_us
            + t.vm.tlb_purge_us
            + t.copy.base_us
            + t.copy.line_us * lines
            + t.memory.fill_us * lines;
        assert!((per(&p, "cow") - by_hand).abs() < 1e-9, "{p:?}");
        assert_eq!(per(&p, "read"), 0.0, "the copy left the new page warm");
    }

    #[test]
    fn the_recipe_s_table_3_is_the_workload_s() {
        // Table 3 as the recipe's own drivers priced it before they became workloads.
        let chorus = AliasPolicy::chorus();
        let purge = AliasPolicy::parse("pseudo-aliasing+purge").unwrap();
        for (policy, design, size, us) in [
            (chorus, "copy", "1k", 1041.323),
            (chorus, "copy", "2k", 1168.075),
            (chorus, "copy", "16k", 6985.600),
            (chorus, "move", "2k", 991.723),
            (chorus, "move", "16k", 5574.784),
            (chorus, "move-eager", "16k", 2374.784),
            (chorus, "pure-copy", "2k", 562.608),
            (chorus, "pure-copy", "16k", 2141.864),
            (purge, "copy", "2k", 1143.271),
            (purge, "move", "16k", 5376.352),
        ] {
            let spec = format!("workload:ipc,design={design},size={size},messages=2");
            let p = priced(&spec, &VacParams::hp9000_834(), policy);
            let ours = per(&p, "send") + hp().ipc.null_us;
            assert!((ours - us).abs() < 1e-6, "{spec} {}: {ours}", policy.name());
        }
    }

    #[test]
    fn messages_follow_the_step_lists() {
        let events = |spec: &str| {
            crate::workload::drain(crate::workload::from_spec(spec).unwrap().unwrap().as_mut())
        };
        let phases =
            |ev: &[Event]| -> Vec<String> { ev.iter().filter_map(Event::phase_label).collect() };
        let ev = events("workload:ipc,design=move,size=4k,messages=2,warm=1");
        assert_eq!(
            phases(&ev),
            ["init", "warm", "fill", "send", "fill", "send"]
        );
        // The sender writes every word of every message; the receiver reads a word a page.
        let stores = ev.iter().filter(|e| e.kind == Kind::Store).count();
        assert_eq!(stores, 3 * 4096 / 4);
        let loads: Vec<&Event> = ev.iter().filter(|e| e.kind == Kind::Load).collect();
        assert_eq!(loads.len(), 3 * 2);
        assert!(loads.iter().all(|e| e.asid == RECEIVER));
        // A move: the sender's pages unmapped (kept), the receiver's old ones destroyed, the
        // moved frames mapped lazily; the sender's replacements are new frames.
        let last = ev
            .iter()
            .rposition(|e| e.phase_label().as_deref() == Some("send"));
        let send = &ev[last.unwrap()..];
        let unmaps: Vec<u16> = send
            .iter()
            .filter(|e| e.kind == Kind::Unmap)
            .map(|e| e.size)
            .collect();
        assert_eq!(unmaps, [0, 0, flags::UNMAP_DEAD, flags::UNMAP_DEAD]);
        let maps: Vec<&Event> = send.iter().filter(|e| e.kind == Kind::Map).collect();
        assert!(maps.len() == 2 && maps.iter().all(|e| e.asid == RECEIVER && e.size == 0));
        // Pure copy: two copies a page, sender → kernel buffer → receiver, between mappings.
        let ev = events("workload:ipc,design=pure-copy,size=3k,messages=1,warm=0,buffer_colour=20");
        let copies: Vec<(u32, u64, Option<CopySource>, u16)> = ev
            .iter()
            .filter(|e| e.kind == Kind::CopyPage)
            .map(|e| (e.asid, e.addr, CopySource::of(e.paddr), e.size))
            .collect();
        let k = BUFFER_BASE + 20 * 2048;
        let r = RECEIVER_BASE + 5 * 2048;
        assert_eq!(
            copies,
            [
                (KERNEL, k, Some(CopySource::Virtual(SENDER, SENDER_BASE)), 0),
                (
                    KERNEL,
                    k + 2048,
                    Some(CopySource::Virtual(SENDER, SENDER_BASE + 2048)),
                    1024
                ),
                (RECEIVER, r, Some(CopySource::Virtual(KERNEL, k)), 0),
                (
                    RECEIVER,
                    r + 2048,
                    Some(CopySource::Virtual(KERNEL, k + 2048)),
                    1024
                ),
            ]
        );
        // Copy-on-write case 2: the physical copy, the old page's physical lines flushed,
        // the child's page remapped to the new frame and made writable.
        let ev = events("workload:cow,case=2");
        let cow: Vec<Kind> = ev
            .iter()
            .skip_while(|e| e.phase_label().as_deref() != Some("cow"))
            .skip(1)
            .take_while(|e| e.kind != Kind::Marker)
            .map(|e| e.kind)
            .collect();
        assert_eq!(cow, [Kind::CopyPage, Kind::Unmap, Kind::Map, Kind::Protect]);
    }

    #[test]
    fn messages_reach_a_steady_state_and_big_ones_batch() {
        // Every measured message costs the same once the warm-up is over, and a message
        // bigger than a batch streams across batches.
        let params = VacParams::hp9000_834();
        for design in IpcDesign::ALL {
            let one = priced(
                &format!("workload:ipc,design={},size=16k,messages=1", design.name()),
                &params,
                AliasPolicy::chorus(),
            );
            let five = priced(
                &format!("workload:ipc,design={},size=16k,messages=5", design.name()),
                &params,
                AliasPolicy::chorus(),
            );
            assert!(
                (per(&one, "send") - per(&five, "send")).abs() < 1e-6,
                "{design:?}"
            );
        }
        let mut w = Ipc::new(IpcParams {
            bytes: 64 << 10,
            messages: 1,
            warm: 0,
            ..IpcParams::default()
        })
        .unwrap();
        let all = crate::workload::drain(&mut w);
        assert_eq!(all.iter().filter(|e| e.kind == Kind::Store).count(), 16384);
    }
}
