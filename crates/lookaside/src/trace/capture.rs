//! The raw stream of a live capture, and recording it into a trace file.
//!
//! Lookaside's QEMU plugin (`python/lookaside/tracers/qemu/lookaside-plugin.c`) writes what
//! a program does, as it runs, in a simple fixed-size form that costs the traced program as
//! little as possible; [`CaptureReader`] turns that stream into events, and [`record`] writes
//! them (or those of a valgrind lackey pipe) into a trace file as they arrive. The capture
//! stays outside the engine: the engine only ever sees [`Event`]s.
//!
//! The stream (integers little-endian):
//!
//! ```text
//! offset  size  field
//! 0       8     magic "LKSCAPTR"
//! 8       4     version, u32: 1 for a program (qemu-user), 2 for a whole system
//!               (qemu-system)
//! 12      4     record size, u32: 16 in version 1, 24 in version 2
//! 16      …     blocks, each a 16-byte header {u32 tag, u32 vcpu, u64 count} and then:
//!   tag 1 RECORDS  `count` records, all of thread (vCPU) `vcpu`, in execution order.
//!                  Version 1: u64 virtual address, u16 size (bytes, > 0), u8 kind (0 fetch,
//!                  1 load, 2 store, 3 system call: the thread entered the kernel, the
//!                  call's number (below 2^32) in place of the address, size 0), 5 zero
//!                  bytes.
//!                  Version 2: u64 virtual address, u64 physical address (all ones if
//!                  unknown), u32 address space, u16 size, u8 kind (0 fetch, 1 load, 2 store,
//!                  3 context switch: the running address space becomes this record's,
//!                  size 0; 4 TLB flush (a shootdown): the page at the address of this
//!                  record's address space, every page of it but the global ones
//!                  ([`crate::event::FLUSH_SPACE`]) or every page ([`crate::event::FLUSH_ALL`]),
//!                  dropped from the TLBs of the CPUs whose bits the physical address sets,
//!                  size 0; 8 marker: the payload in place of the address, size 0: an idle
//!                  loop's bounds ([`crate::event::IDLE_MARK`]) or a phase the workload
//!                  started ([`crate::event::PHASE_MARK`])), u8 mode (0 user, 1 kernel)
//!   tag 2 EXEC     the program called execve (the new program runs untraced); `count` is
//!                  the records written so far; the stream may end right after this block
//!   tag 3 END      the program exited (the system's workload finished); `count` is the
//!                  records written, `vcpu` the threads seen; nothing may follow
//!   tag 4 PROC     (version 2) a process: `vcpu` is its address space, `count` its pid,
//!                  and 16 bytes follow: its name, NUL-padded
//!   tag 5 EXCLUDED (version 2, at most once, before END) what the capture left out: the
//!                  tracing's own work (the guest module's probes and marker loads). 40
//!                  bytes follow: u64 start and end of the module's code, and u64 fetches,
//!                  loads and stores of that code, which are not among the records
//!   tag 6 LAYOUT   (version 2, at most once) the guest kernel's address layout, read by its
//!                  module from the running kernel: 112 bytes follow, u64 start and end
//!                  (exclusive) of each class of [`KernelClass::ALL`] in that order (both 0:
//!                  the kernel has no such class); stored as the `kernel_layout` metadata
//! ```
//!
//! Records of one thread keep their order; records of different threads interleave block by
//! block (blocks of up to 4096 records), in the order the blocks were written. In version 2
//! the threads are the guest's CPUs and their blocks are in the order they ran (the plugin
//! writes a block wherever the running vCPU changes): a block of another vCPU than the last
//! becomes a CPU marker ([`Event::on_cpu`]) before its events, so the events keep the order
//! QEMU ran them in and say which CPU made each (a stream of vCPU 0 alone has none). In
//! version 1 every event is a user-mode event in address space 0 (the threads of a program
//! share it) with no physical address; a system call becomes a marker ([`Event::syscall`]).
//! A stream that ends anywhere but after END (or EXEC) is an error ("truncated"), as is any
//! malformed block or record; errors name the byte offset.

use std::io::{self, Read};
use std::path::Path;

use serde::Serialize;

use super::kernel::{KernelClass, KernelLayout};
use super::{create_with, Format, Metadata, Process, TraceSource, WriteOptions};
use crate::error::{Error, Location, Result};
use crate::event::{Event, Kind, Mode, BATCH, MAX_CPUS, SYSCALL_NR};

use super::stream::Progress;

/// The first bytes of a capture stream.
pub const MAGIC: &[u8; 8] = b"LKSCAPTR";
/// The stream version of a program's capture.
pub const VERSION: u32 = 1;
/// The stream version of a whole system's capture.
pub const VERSION_SYSTEM: u32 = 2;
/// Bytes of one record of a program's capture.
pub const RECORD: usize = 16;
/// Bytes of one record of a whole system's capture.
pub const RECORD_SYSTEM: usize = 24;
/// Bytes of a process name in a PROC block.
const NAME: usize = 16;
/// Most processes listed in a trace's header (about 50 bytes each; the header is at most
/// 1 MiB).
const MAX_PROCESSES: usize = 10_000;
/// Bytes of the stream header and of a block header.
const HEAD: usize = 16;
/// Block tags.
pub const TAG_RECORDS: u32 = 1;
pub const TAG_EXEC: u32 = 2;
pub const TAG_END: u32 = 3;
pub const TAG_PROC: u32 = 4;
pub const TAG_EXCLUDED: u32 = 5;
pub const TAG_LAYOUT: u32 = 6;
/// Bytes after an EXCLUDED block's header.
const EXCLUDED: usize = 40;
/// Bytes after a LAYOUT block's header: a start and an end per kernel address class.
const LAYOUT: usize = 16 * KernelClass::ALL.len();
/// Bytes read from the stream at a time.
const CHUNK: usize = 1 << 20;

/// How a capture ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ending {
    /// The program exited (an END block).
    Exit,
    /// The program replaced itself with another through execve (last block EXEC).
    Exec,
}

/// The tracing's own work, which a whole-system capture counts instead of recording: the
/// references of the guest module's code (its probes on the scheduler's tracepoints and its
/// marker loads). The model of a system traced for a study must not see the tracer; Chen
/// (1994) excluded tracing activity from his traces too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Excluded {
    /// Start and end of the module's code (guest virtual addresses).
    pub code: [u64; 2],
    /// References of that code left out, by kind: fetch, load, store.
    pub counts: [u64; 3],
}

impl Excluded {
    /// The `excluded` metadata value: what was left out and how many references.
    pub fn describe(&self) -> String {
        let [f, l, s] = self.counts;
        format!(
            "tracing module code {:#x}-{:#x}: {} references not recorded (fetch {f}, load \
             {l}, store {s})",
            self.code[0],
            self.code[1],
            f + l + s
        )
    }
}

/// A capture stream being read.
pub struct CaptureReader<R> {
    input: R,
    path: String,
    /// `buf[pos..filled]` read but not decoded; `base` is the stream offset of `buf[0]`.
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    base: u64,
    eof: bool,
    /// Records left in the current RECORDS block.
    left: u64,
    records: u64,
    /// The last block was EXEC (the stream may end here).
    after_exec: bool,
    ending: Option<Ending>,
    threads: u32,
    counts: [u64; 3],
    /// Bytes per record: [`RECORD`] (a program) or [`RECORD_SYSTEM`] (a whole system).
    record: usize,
    switches: u64,
    syscalls: u64,
    /// TLB flush records read (the kernel's flushes: shootdowns and a CPU's own).
    tlb_flushes: u64,
    /// The vCPU whose records were read last (a whole system): the CPU of the events.
    cpu: u32,
    /// A RECORDS block of another vCPU has begun: a CPU marker goes before its records.
    cpu_changed: bool,
    processes: Vec<Process>,
    excluded: Option<Excluded>,
    layout: Option<KernelLayout>,
}

impl<R: Read> CaptureReader<R> {
    /// Reads the stream header of `input` (named `path` in messages).
    pub fn new(input: R, path: impl Into<String>) -> Result<CaptureReader<R>> {
        let mut r = CaptureReader {
            input,
            path: path.into(),
            buf: vec![0; CHUNK],
            pos: 0,
            filled: 0,
            base: 0,
            eof: false,
            left: 0,
            records: 0,
            after_exec: false,
            ending: None,
            threads: 0,
            counts: [0; 3],
            record: RECORD,
            switches: 0,
            syscalls: 0,
            tlb_flushes: 0,
            cpu: 0,
            cpu_changed: false,
            processes: Vec::new(),
            excluded: None,
            layout: None,
        };
        r.want(HEAD)?;
        if r.filled == 0 {
            return Err(r.err(
                0,
                "stream",
                "empty: nothing was recorded (the plugin was not loaded, or the program did \
                 not start)",
            ));
        }
        if r.filled < MAGIC.len() || &r.buf[..8] != MAGIC {
            return Err(r.err(
                0,
                "magic",
                "not a Lookaside capture stream (expected \"LKSCAPTR\")",
            ));
        }
        if r.filled < HEAD {
            return Err(r.err(
                r.filled as u64,
                "header",
                "truncated: the stream ends inside its header",
            ));
        }
        let version = u32::from_le_bytes(r.buf[8..12].try_into().unwrap_or_default());
        r.record = match version {
            VERSION => RECORD,
            VERSION_SYSTEM => RECORD_SYSTEM,
            _ => {
                return Err(r.err(
                    8,
                    "version",
                    format!(
                        "unsupported capture version {version} (this build reads \
                         {VERSION} and {VERSION_SYSTEM}); rebuild the plugin"
                    ),
                ))
            }
        };
        let size = u32::from_le_bytes(r.buf[12..16].try_into().unwrap_or_default());
        if size as usize != r.record {
            return Err(r.err(
                12,
                "header",
                format!(
                    "record size {size}, expected {} for version {version}",
                    r.record
                ),
            ));
        }
        r.pos = HEAD;
        Ok(r)
    }

    /// TLB flushes read (flush records of a whole system's capture: one per page, or one per
    /// whole address space or everything).
    pub fn tlb_flushes(&self) -> u64 {
        self.tlb_flushes
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// How the stream ended, once it has.
    pub fn ending(&self) -> Option<Ending> {
        self.ending
    }

    /// Threads the program ran (from the END block; 0 before it).
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// True for a whole system's capture (version 2).
    pub fn is_system(&self) -> bool {
        self.record == RECORD_SYSTEM
    }

    /// Context-switch records read so far (whole-system captures).
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// System-call records read so far (a program's captures).
    pub fn syscalls(&self) -> u64 {
        self.syscalls
    }

    /// The processes named so far (whole-system captures).
    pub fn processes(&self) -> &[Process] {
        &self.processes
    }

    /// What the capture left out (whole-system captures, from the EXCLUDED block).
    pub fn excluded(&self) -> Option<Excluded> {
        self.excluded
    }

    /// The guest kernel's address layout (whole-system captures, from the LAYOUT block).
    pub fn layout(&self) -> Option<&KernelLayout> {
        self.layout.as_ref()
    }

    fn err(&self, at: u64, field: &str, message: impl Into<String>) -> Error {
        Error::trace(&self.path, Location::Byte(at), field, message)
    }

    /// Stream offset of `buf[pos]`.
    fn at(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Reads until at least `n` bytes are buffered past `pos`, or the stream ends.
    fn want(&mut self, n: usize) -> Result<()> {
        if self.filled - self.pos >= n {
            return Ok(());
        }
        self.buf.copy_within(self.pos..self.filled, 0);
        self.base += self.pos as u64;
        self.filled -= self.pos;
        self.pos = 0;
        while self.filled < n && !self.eof {
            match self.input.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.filled += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        Ok(())
    }

    fn truncated(&self, inside: &str) -> Error {
        self.err(
            self.base + self.filled as u64,
            "stream",
            format!(
                "truncated: the capture ends {inside} after {} records (the traced program \
                 or QEMU was killed, or failed to start)",
                self.records
            ),
        )
    }

    /// The error of the malformed record at `buf[p..]`.
    fn bad_record(&self, p: usize) -> Error {
        let word = u64::from_le_bytes(self.buf[p + 8..p + 16].try_into().unwrap_or_default());
        let at = self.base + p as u64;
        let addr = u64::from_le_bytes(self.buf[p..p + 8].try_into().unwrap_or_default());
        let kind = (word >> 16) & 0xff;
        if kind > 3 {
            self.err(
                at + 10,
                "kind",
                format!(
                    "unknown record kind {kind} (expected 0 fetch, 1 load, 2 store, 3 system call)"
                ),
            )
        } else if kind == 3 && word as u16 != 0 {
            self.err(
                at + 8,
                "size",
                format!("a system call of {} bytes (expected 0)", word as u16),
            )
        } else if kind == 3 && addr > SYSCALL_NR {
            self.err(
                at,
                "address",
                format!("system call number {addr} is not below 2^32"),
            )
        } else if kind < 3 && word as u16 == 0 {
            self.err(at + 8, "size", "a reference of 0 bytes")
        } else {
            self.err(
                at + 11,
                "record",
                "reserved bytes are not zero (a corrupt stream?)",
            )
        }
    }

    /// The error of the malformed whole-system record at `buf[p..]`.
    fn bad_system_record(&self, p: usize) -> Error {
        let r = &self.buf[p..p + RECORD_SYSTEM];
        let at = self.base + p as u64;
        let size = u16::from_le_bytes([r[20], r[21]]);
        match (r[22], r[23]) {
            (k, _) if k > 4 && k != 8 => self.err(
                at + 22,
                "kind",
                format!(
                    "unknown record kind {k} (expected 0 fetch, 1 load, 2 store, 3 context \
                     switch, 4 TLB flush, 8 marker)"
                ),
            ),
            (_, m) if m > 1 => self.err(
                at + 23,
                "mode",
                format!("unknown mode {m} (expected 0 user, 1 kernel)"),
            ),
            (3, _) => self.err(
                at + 20,
                "size",
                format!("a context switch of {size} bytes (expected 0)"),
            ),
            (4, _) => self.err(
                at + 20,
                "size",
                format!("a TLB flush of {size} bytes (expected 0)"),
            ),
            (8, _) => self.err(
                at + 20,
                "size",
                format!("a marker of {size} bytes (expected 0)"),
            ),
            _ => self.err(at + 20, "size", "a reference of 0 bytes"),
        }
    }

    /// References read so far by kind (fetch, load, store).
    pub fn counts(&self) -> [u64; 3] {
        self.counts
    }

    /// Reads the next block header; returns false at the end of the stream.
    fn block(&mut self) -> Result<bool> {
        self.want(HEAD)?;
        let have = self.filled - self.pos;
        if have == 0 && self.after_exec {
            self.ending = Some(Ending::Exec);
            return Ok(false);
        }
        if have == 0 {
            return Err(self.truncated("without its END block"));
        }
        if have < HEAD {
            return Err(self.truncated("inside a block header"));
        }
        let h = &self.buf[self.pos..self.pos + HEAD];
        let tag = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let vcpu = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        let count = u64::from_le_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]);
        let at = self.at();
        self.pos += HEAD;
        match tag {
            TAG_RECORDS => {
                if self.is_system() && vcpu != self.cpu {
                    if vcpu >= MAX_CPUS {
                        return Err(self.err(
                            at,
                            "vcpu",
                            format!("vCPU {vcpu}: a trace has at most {MAX_CPUS} CPUs"),
                        ));
                    }
                    self.cpu = vcpu;
                    self.cpu_changed = true;
                }
                self.left = count;
                self.after_exec = false;
                Ok(true)
            }
            TAG_PROC if self.is_system() => {
                self.want(NAME)?;
                if self.filled - self.pos < NAME {
                    return Err(self.truncated("inside a PROC block"));
                }
                let raw = &self.buf[self.pos..self.pos + NAME];
                let end = raw.iter().position(|&b| b == 0).unwrap_or(NAME);
                self.processes.push(Process {
                    asid: vcpu,
                    pid: count as u32,
                    name: String::from_utf8_lossy(&raw[..end]).into_owned(),
                });
                self.pos += NAME;
                Ok(true)
            }
            TAG_EXCLUDED if self.is_system() => {
                if self.excluded.is_some() {
                    return Err(self.err(at, "block", "a second EXCLUDED block"));
                }
                self.want(EXCLUDED)?;
                if self.filled - self.pos < EXCLUDED {
                    return Err(self.truncated("inside an EXCLUDED block"));
                }
                let raw = &self.buf[self.pos..self.pos + EXCLUDED];
                let word = |i: usize| {
                    u64::from_le_bytes(raw[8 * i..8 * i + 8].try_into().unwrap_or_default())
                };
                self.excluded = Some(Excluded {
                    code: [word(0), word(1)],
                    counts: [word(2), word(3), word(4)],
                });
                self.pos += EXCLUDED;
                Ok(true)
            }
            TAG_LAYOUT if self.is_system() => {
                if self.layout.is_some() {
                    return Err(self.err(at, "block", "a second LAYOUT block"));
                }
                self.want(LAYOUT)?;
                if self.filled - self.pos < LAYOUT {
                    return Err(self.truncated("inside a LAYOUT block"));
                }
                let raw = &self.buf[self.pos..self.pos + LAYOUT];
                let word = |i: usize| {
                    u64::from_le_bytes(raw[8 * i..8 * i + 8].try_into().unwrap_or_default())
                };
                let mut classes = Vec::new();
                for (i, &class) in KernelClass::ALL.iter().enumerate() {
                    let (start, end) = (word(2 * i), word(2 * i + 1));
                    if (start, end) == (0, 0) {
                        continue;
                    }
                    if end <= start {
                        return Err(self.err(
                            at,
                            "LAYOUT",
                            format!(
                                "{}: end {end:#x} is not above start {start:#x}",
                                class.name()
                            ),
                        ));
                    }
                    classes.push((class, start, end));
                }
                self.layout = Some(KernelLayout::of(&classes));
                self.pos += LAYOUT;
                Ok(true)
            }
            TAG_EXEC | TAG_END => {
                if count != self.records {
                    return Err(self.err(
                        at,
                        "block",
                        format!(
                            "the {} block counts {count} records but {} were read",
                            if tag == TAG_END { "END" } else { "EXEC" },
                            self.records
                        ),
                    ));
                }
                if tag == TAG_EXEC {
                    self.after_exec = true;
                    return Ok(true);
                }
                self.want(1)?;
                if self.filled > self.pos {
                    return Err(self.err(self.at(), "stream", "data after the END block"));
                }
                self.threads = vcpu;
                self.ending = Some(Ending::Exit);
                Ok(false)
            }
            _ => Err(self.err(at, "block", format!("unknown block tag {tag}"))),
        }
    }
}

impl<R: Read> CaptureReader<R> {
    /// Decodes `take` version-1 records at `pos` into `out`; returns the index of the first
    /// malformed one, if any (then `out` holds those before it).
    fn decode_program(&mut self, take: usize, out: &mut Vec<Event>) -> Option<usize> {
        let bytes = &self.buf[self.pos..self.pos + take * RECORD];
        let mut counts = self.counts;
        let mut bad = None;
        for (i, r) in bytes.chunks_exact(RECORD).enumerate() {
            let addr = u64::from_le_bytes(r[..8].try_into().unwrap_or_default());
            let word = u64::from_le_bytes(r[8..].try_into().unwrap_or_default());
            // The kind and the reserved bytes above it in one test.
            let kind = (word >> 16) as usize;
            let size = word as u16;
            if kind > 2 || size == 0 {
                if word == 3 << 16 && addr <= SYSCALL_NR {
                    self.syscalls += 1;
                    out.push(Event::syscall(addr, 0));
                    continue;
                }
                bad = Some(i);
                break;
            }
            counts[kind] += 1;
            out.push(Event::reference(Kind::REFS[kind], addr, size));
        }
        self.counts = counts;
        bad
    }

    /// Decodes `take` version-2 records at `pos` into `out`, like [`Self::decode_program`].
    fn decode_system(&mut self, take: usize, out: &mut Vec<Event>) -> Option<usize> {
        let bytes = &self.buf[self.pos..self.pos + take * RECORD_SYSTEM];
        let mut counts = self.counts;
        let mut switches = self.switches;
        let mut tlb_flushes = self.tlb_flushes;
        let mut bad = None;
        for (i, r) in bytes.chunks_exact(RECORD_SYSTEM).enumerate() {
            let addr = u64::from_le_bytes(r[..8].try_into().unwrap_or_default());
            let paddr = u64::from_le_bytes(r[8..16].try_into().unwrap_or_default());
            let asid = u32::from_le_bytes([r[16], r[17], r[18], r[19]]);
            let size = u16::from_le_bytes([r[20], r[21]]);
            let (kind, mode) = (r[22] as usize, r[23]);
            let mode = match mode {
                0 => Mode::User,
                1 => Mode::Kernel,
                _ => {
                    bad = Some(i);
                    break;
                }
            };
            let e = match kind {
                0..=2 if size > 0 => {
                    counts[kind] += 1;
                    Event::reference(Kind::REFS[kind], addr, size).with_paddr(paddr)
                }
                3 if size == 0 => {
                    switches += 1;
                    Event::control(Kind::ContextSwitch, 0, asid)
                }
                4 if size == 0 => {
                    tlb_flushes += 1;
                    Event::control(Kind::TlbFlush, addr, asid).with_paddr(paddr)
                }
                8 if size == 0 => Event::control(Kind::Marker, addr, asid),
                _ => {
                    bad = Some(i);
                    break;
                }
            };
            out.push(e.with_asid(asid).with_mode(mode));
        }
        self.counts = counts;
        self.switches = switches;
        self.tlb_flushes = tlb_flushes;
        bad
    }
}

impl<R: Read> TraceSource for CaptureReader<R> {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        out.reserve(BATCH);
        while out.len() < BATCH {
            if self.ending.is_some() {
                break;
            }
            if self.left == 0 {
                if !self.block()? {
                    break;
                }
                continue;
            }
            let size = self.record;
            self.want(size)?;
            let avail = (self.filled - self.pos) / size;
            if avail == 0 {
                return Err(self.truncated("inside a record"));
            }
            if std::mem::take(&mut self.cpu_changed) {
                out.push(Event::on_cpu(self.cpu));
            }
            let take = avail.min(BATCH - out.len()).min(self.left as usize);
            let bad = if size == RECORD {
                self.decode_program(take, out)
            } else {
                self.decode_system(take, out)
            };
            if let Some(i) = bad {
                return Err(if size == RECORD {
                    self.bad_record(self.pos + i * size)
                } else {
                    self.bad_system_record(self.pos + i * size)
                });
            }
            self.pos += take * size;
            self.left -= take as u64;
            self.records += take as u64;
        }
        Ok(!out.is_empty())
    }

    fn bytes_read(&self) -> u64 {
        self.base + self.pos as u64
    }
}

/// Where a recording comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    /// Lookaside's QEMU plugin (a capture stream, see the module documentation).
    Qemu,
    /// `valgrind --tool=lackey --trace-mem=yes` output.
    Lackey,
}

impl std::str::FromStr for Via {
    type Err = Error;

    fn from_str(s: &str) -> Result<Via> {
        match s {
            "qemu" => Ok(Via::Qemu),
            "lackey" | "valgrind" => Ok(Via::Lackey),
            _ => Err(Error::Usage(format!(
                "unknown capture source '{s}' (expected qemu or lackey)"
            ))),
        }
    }
}

/// What [`record`] wrote.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Recorded {
    /// Events written (all references).
    pub events: u64,
    pub fetches: u64,
    pub loads: u64,
    pub stores: u64,
    /// Threads the program ran (QEMU only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// How the capture ended (QEMU only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ending: Option<Ending>,
    /// Context switches recorded (whole-system captures).
    pub switches: u64,
    /// System calls recorded (a program's captures under QEMU), as markers in the trace.
    pub syscalls: u64,
    /// The kernel's TLB flushes recorded (whole-system captures; shootdowns and a CPU's own),
    /// one per page, or one per whole address space or everything.
    pub tlb_flushes: u64,
    /// The processes seen, also stored in the trace's metadata (whole-system captures).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Process>,
    /// What the capture left out (whole-system captures), also in the metadata (`excluded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluded: Option<Excluded>,
    /// The guest kernel's address layout (whole-system captures), also in the metadata
    /// (`kernel_layout`, see [`KernelLayout::describe`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_layout: Option<String>,
    /// Bytes of the stream read.
    pub stream_bytes: u64,
}

/// How often (in batches) [`record`] calls its progress callback.
const PROGRESS_EVERY: u64 = 256;

/// Reads the live stream at `src` (a pipe, a FIFO or a file) as `via` says and writes it to
/// `dst` (native unless its extension names another format) with `meta`. `progress` is
/// called now and then and once at the end; returning false from it abandons the recording.
/// Nothing appears at `dst` unless the whole stream was read and written (a FIFO at `dst` is
/// written as the stream goes, without the processes and exclusions only known at its end).
pub fn record(
    src: &Path,
    via: Via,
    dst: &Path,
    meta: &Metadata,
    options: &WriteOptions,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Recorded> {
    let name = src.display().to_string();
    let format = Format::from_extension(dst).unwrap_or(Format::Native);
    let sink = create_with(dst, Some(format), meta, options)?;
    match via {
        Via::Qemu => {
            let file = std::fs::File::open(src).map_err(|e| Error::io(&name, e))?;
            let mut reader = CaptureReader::new(file, name)?;
            let mut r = pump(&mut reader, Some(CaptureReader::counts), sink, progress)?;
            r.threads = Some(reader.threads());
            r.ending = reader.ending();
            r.switches = reader.switches();
            r.syscalls = reader.syscalls();
            r.tlb_flushes = reader.tlb_flushes();
            r.processes = reader.processes().to_vec();
            r.excluded = reader.excluded();
            r.kernel_layout = reader.layout().map(KernelLayout::describe);
            // Only known now: the header is rewritten with them (as many as fit). A stream
            // (a FIFO read by a simulation) cannot be rewritten: its reader never sees them.
            if (!r.processes.is_empty() || r.excluded.is_some() || r.kernel_layout.is_some())
                && format == Format::Native
                && !super::compress::is_stream(dst)
            {
                let mut meta = Metadata {
                    processes: r.processes.clone(),
                    ..meta.clone()
                };
                if let Some(x) = r.excluded {
                    meta.extra.insert("excluded".into(), x.describe());
                }
                if let Some(l) = &r.kernel_layout {
                    meta.extra
                        .insert(super::kernel::METADATA_KEY.into(), l.clone());
                }
                if meta.processes.len() > MAX_PROCESSES {
                    meta.processes.truncate(MAX_PROCESSES);
                    meta.extra.insert(
                        "processes_listed".into(),
                        format!("the first {MAX_PROCESSES} of {}", r.processes.len()),
                    );
                }
                super::native::set_metadata(dst, &meta)?;
            }
            Ok(r)
        }
        Via::Lackey => {
            let mut reader = super::open(src, Some(Format::Lackey))?;
            pump(reader.as_mut(), None, sink, progress)
        }
    }
}

/// Copies `source` into `sink` and finishes the sink if all went well. The stream is read
/// and decoded on a second thread while this one encodes and compresses, so that recording
/// keeps up with the program. `counts` gives the references by kind the source has read,
/// when it keeps them; else they are counted here.
fn pump<S: TraceSource + Send + ?Sized>(
    source: &mut S,
    counts: Option<fn(&S) -> [u64; 3]>,
    mut sink: Box<dyn super::TraceSink + Send>,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Recorded> {
    let interrupted = || Error::Usage("interrupted".into());
    let mut r = Recorded::default();
    let mut counted = [0u64; 3];
    let mut batches = 0u64;
    super::stream::read_ahead(source, |batch, bytes| {
        if counts.is_none() {
            for e in batch {
                counted[(e.kind as usize).min(2)] += 1;
            }
        }
        sink.write_batch(batch)?;
        r.events += batch.len() as u64;
        r.stream_bytes = bytes;
        batches += 1;
        if batches.is_multiple_of(PROGRESS_EVERY)
            && !progress(Progress {
                events: r.events,
                bytes,
            })
        {
            return Err(interrupted());
        }
        Ok(())
    })?;
    r.stream_bytes = source.bytes_read();
    if !progress(Progress {
        events: r.events,
        bytes: r.stream_bytes,
    }) {
        return Err(interrupted());
    }
    [r.fetches, r.loads, r.stores] = match counts {
        Some(f) => f(source),
        None => counted,
    };
    sink.finish()?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{FLUSH_ALL, IDLE_MARKERS};
    use std::io::Cursor;

    /// A stream as the plugin writes it: header, the records in blocks of `block`, then
    /// `tail` (END, EXEC or nothing).
    fn stream(events: &[(u8, u64, u16)], block: usize, tail: Option<u32>) -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(MAGIC);
        s.extend_from_slice(&VERSION.to_le_bytes());
        s.extend_from_slice(&(RECORD as u32).to_le_bytes());
        for (i, chunk) in events.chunks(block).enumerate() {
            s.extend_from_slice(&TAG_RECORDS.to_le_bytes());
            s.extend_from_slice(&(i as u32 % 2).to_le_bytes());
            s.extend_from_slice(&(chunk.len() as u64).to_le_bytes());
            for &(kind, addr, size) in chunk {
                s.extend_from_slice(&addr.to_le_bytes());
                s.extend_from_slice(&size.to_le_bytes());
                s.push(kind);
                s.extend_from_slice(&[0; 5]);
            }
        }
        if let Some(tag) = tail {
            s.extend_from_slice(&tag.to_le_bytes());
            s.extend_from_slice(&2u32.to_le_bytes());
            s.extend_from_slice(&(events.len() as u64).to_le_bytes());
        }
        s
    }

    fn sample(n: usize) -> Vec<(u8, u64, u16)> {
        (0..n)
            .map(|i| {
                (
                    (i % 3) as u8,
                    0x40_0000 + 8 * i as u64,
                    [1, 2, 4, 8, 16][i % 5],
                )
            })
            .collect()
    }

    type Reader = CaptureReader<Cursor<Vec<u8>>>;

    /// [`record`] with default options; `go` is what the progress callback answers.
    fn record_with(
        src: &Path,
        via: Via,
        dst: &Path,
        meta: &Metadata,
        go: bool,
    ) -> Result<Recorded> {
        record(src, via, dst, meta, &WriteOptions::default(), &mut |_| go)
    }

    fn read_all(bytes: Vec<u8>) -> Result<(Vec<Event>, Reader)> {
        let mut r = CaptureReader::new(Cursor::new(bytes), "cap")?;
        let mut all = Vec::new();
        let mut batch = Vec::new();
        while r.next_batch(&mut batch)? {
            assert!(batch.len() <= BATCH);
            all.extend_from_slice(&batch);
        }
        Ok((all, r))
    }

    #[test]
    fn round_trip() {
        let events = sample(10_000);
        for block in [1, 7, 4096, 5000, 20_000] {
            let (got, r) = read_all(stream(&events, block, Some(TAG_END))).unwrap();
            assert_eq!(got.len(), events.len());
            for (e, &(k, a, s)) in got.iter().zip(&events) {
                assert_eq!(*e, Event::reference(Kind::from_u8(k).unwrap(), a, s));
            }
            assert_eq!(r.ending(), Some(Ending::Exit));
            assert_eq!(r.threads(), 2);
            assert_eq!(r.records(), 10_000);
        }
        let (got, r) = read_all(stream(&[], 1, Some(TAG_END))).unwrap();
        assert!(got.is_empty() && r.ending() == Some(Ending::Exit));
    }

    #[test]
    fn a_stream_may_end_after_exec() {
        let (got, r) = read_all(stream(&sample(100), 30, Some(TAG_EXEC))).unwrap();
        assert_eq!((got.len(), r.ending()), (100, Some(Ending::Exec)));
        // A failed execve: recording goes on after the EXEC block.
        let mut s = stream(&sample(3), 30, Some(TAG_EXEC));
        let more = stream(&sample(6)[3..], 30, Some(TAG_END));
        s.extend_from_slice(&more[HEAD..]);
        let n = s.len();
        s[n - 8..].copy_from_slice(&6u64.to_le_bytes());
        let (got, r) = read_all(s).unwrap();
        assert_eq!((got.len(), r.ending()), (6, Some(Ending::Exit)));
    }

    #[test]
    fn system_calls_become_markers_in_stream_order() {
        let events = [(0, 0x1000, 4), (3, 1, 0), (1, 0x2000, 8), (3, 231, 0)];
        let (got, r) = read_all(stream(&events, 3, Some(TAG_END))).unwrap();
        assert_eq!(
            got,
            [
                Event::reference(Kind::Fetch, 0x1000, 4),
                Event::syscall(1, 0),
                Event::reference(Kind::Load, 0x2000, 8),
                Event::syscall(231, 0),
            ]
        );
        assert_eq!((r.syscalls(), r.counts(), r.records()), (2, [1, 1, 0], 4));
    }

    fn error_of(bytes: Vec<u8>) -> String {
        read_all(bytes).err().expect("an error").to_string()
    }

    #[test]
    fn truncation_is_an_error_naming_the_offset() {
        let full = stream(&sample(10), 4, Some(TAG_END));
        // Cut inside the third record of the first block: 16 header + 16 block + 2.5 records.
        let cut = HEAD + HEAD + 2 * RECORD + 8;
        let e = error_of(full[..cut].to_vec());
        assert_eq!(
            e,
            format!(
                "cap: byte offset {cut}: stream: truncated: the capture ends inside a record \
                 after 2 records (the traced program or QEMU was killed, or failed to start)"
            )
        );
        // Cut between blocks: the END block is missing.
        let e = error_of(full[..full.len() - HEAD].to_vec());
        assert!(e.contains("without its END block after 10 records"), "{e}");
        assert!(
            e.contains(&format!("byte offset {}", full.len() - HEAD)),
            "{e}"
        );
        // Cut inside a block header.
        let e = error_of(full[..full.len() - 3].to_vec());
        assert!(e.contains("inside a block header"), "{e}");
        let e = error_of(Vec::new());
        assert!(
            e.starts_with("cap: byte offset 0: stream: empty: nothing was recorded"),
            "{e}"
        );
        // Cut inside the stream header.
        let e = error_of(full[..10].to_vec());
        assert_eq!(
            e,
            "cap: byte offset 10: header: truncated: the stream ends inside its header"
        );
    }

    #[test]
    fn malformed_streams_are_errors() {
        let good = stream(&sample(10), 4, Some(TAG_END));
        let e = error_of(b"LKSTRACE\x01\0\0\0\x10\0\0\0".to_vec());
        assert!(
            e.starts_with("cap: byte offset 0: magic: not a Lookaside capture"),
            "{e}"
        );
        let mut s = good.clone();
        s[8] = 3;
        assert!(error_of(s).contains("byte offset 8: version: unsupported capture version 3"));
        let mut s = good.clone();
        s[8] = 2;
        assert!(error_of(s).contains("byte offset 12: header: record size 16, expected 24"));
        // The second record's kind byte.
        let mut s = good.clone();
        let kind_at = HEAD + HEAD + RECORD + 10;
        s[kind_at] = 7;
        assert_eq!(
            error_of(s),
            format!("cap: byte offset {kind_at}: kind: unknown record kind 7 (expected 0 fetch, 1 load, 2 store, 3 system call)")
        );
        // A system call with a size, or with a number that does not fit its marker.
        let mut s = good.clone();
        s[kind_at] = 3;
        assert!(error_of(s).contains(": size: a system call of 2 bytes (expected 0)"));
        let syscall = |nr: u64| stream(&[(0, 0x1000, 4), (3, nr, 0)], 4, Some(TAG_END));
        let e = error_of(syscall(1 << 32));
        assert_eq!(
            e,
            format!(
                "cap: byte offset {}: address: system call number 4294967296 is not below 2^32",
                HEAD + HEAD + RECORD
            )
        );
        let mut s = good.clone();
        s[HEAD + HEAD + 8] = 0;
        s[HEAD + HEAD + 9] = 0;
        assert!(error_of(s).contains(": size: a reference of 0 bytes"));
        let mut s = good.clone();
        s[HEAD + HEAD + 15] = 1;
        assert!(error_of(s).contains(": record: reserved bytes are not zero"));
        let mut s = good.clone();
        s[HEAD] = 9;
        assert_eq!(
            error_of(s),
            "cap: byte offset 16: block: unknown block tag 9"
        );
        let mut s = good.clone();
        let n = s.len();
        s[n - 8] = 11;
        assert!(error_of(s).contains("the END block counts 11 records but 10 were read"));
        let mut s = good;
        s.push(0);
        assert!(error_of(s).contains("data after the END block"));
    }

    /// A whole-system stream: header, PROC blocks for `procs`, the events in one block, END.
    fn system_stream(events: &[Event], procs: &[(u32, u32, &str)]) -> Vec<u8> {
        let mut s = Vec::new();
        s.extend_from_slice(MAGIC);
        s.extend_from_slice(&VERSION_SYSTEM.to_le_bytes());
        s.extend_from_slice(&(RECORD_SYSTEM as u32).to_le_bytes());
        for &(asid, pid, name) in procs {
            s.extend_from_slice(&TAG_PROC.to_le_bytes());
            s.extend_from_slice(&asid.to_le_bytes());
            s.extend_from_slice(&(pid as u64).to_le_bytes());
            let mut n = [0u8; NAME];
            n[..name.len()].copy_from_slice(name.as_bytes());
            s.extend_from_slice(&n);
        }
        s.extend_from_slice(&TAG_RECORDS.to_le_bytes());
        s.extend_from_slice(&0u32.to_le_bytes());
        s.extend_from_slice(&(events.len() as u64).to_le_bytes());
        for e in events {
            s.extend_from_slice(&e.addr.to_le_bytes());
            s.extend_from_slice(&e.paddr.to_le_bytes());
            s.extend_from_slice(&e.asid.to_le_bytes());
            s.extend_from_slice(&e.size.to_le_bytes());
            s.push(e.kind as u8);
            s.push(e.mode as u8);
        }
        s.extend_from_slice(&TAG_END.to_le_bytes());
        s.extend_from_slice(&1u32.to_le_bytes());
        s.extend_from_slice(&(events.len() as u64).to_le_bytes());
        s
    }

    fn system_sample() -> Vec<Event> {
        vec![
            Event::control(Kind::ContextSwitch, 0, 1),
            Event::reference(Kind::Fetch, 0xffff_ffff_8100_0000, 3)
                .with_paddr(0x100_0000)
                .with_asid(1)
                .with_mode(Mode::Kernel),
            Event::reference(Kind::Load, 0x40_1000, 8)
                .with_paddr(0x2345_6008)
                .with_asid(1),
            Event::reference(Kind::Store, 0x7fff_0000, 4).with_asid(1),
            Event::control(Kind::ContextSwitch, 0, 2),
            Event::reference(Kind::Fetch, 0x40_1000, 2)
                .with_paddr(0x3000)
                .with_asid(2),
            Event::phase("run").with_asid(2).with_mode(Mode::Kernel),
            Event::control(Kind::Marker, IDLE_MARKERS[0], 2).with_mode(Mode::Kernel),
            Event::control(Kind::Marker, IDLE_MARKERS[1], 2).with_mode(Mode::Kernel),
        ]
    }

    #[test]
    fn system_streams_carry_every_field_and_the_processes() {
        let events = system_sample();
        let (got, r) = read_all(system_stream(
            &events,
            &[(1, 80, "sh"), (2, 81, "pingpong")],
        ))
        .unwrap();
        assert_eq!(got, events);
        assert!(r.is_system());
        assert_eq!((r.switches(), r.counts()), (2, [2, 1, 1]));
        assert_eq!(
            r.processes(),
            &[
                Process {
                    asid: 1,
                    pid: 80,
                    name: "sh".into()
                },
                Process {
                    asid: 2,
                    pid: 81,
                    name: "pingpong".into()
                }
            ]
        );
    }

    /// A system stream with the events of each (vCPU, events) in a block of its own, in order.
    fn system_blocks(blocks: &[(u32, Vec<Event>)]) -> Vec<u8> {
        let mut s = system_stream(&[], &[]);
        s.truncate(s.len() - 2 * HEAD); // the empty RECORDS block and END
        let mut n = 0;
        for (vcpu, events) in blocks {
            let one = system_stream(events, &[]);
            let block = &one[HEAD..one.len() - HEAD];
            s.extend_from_slice(&TAG_RECORDS.to_le_bytes());
            s.extend_from_slice(&vcpu.to_le_bytes());
            s.extend_from_slice(&block[8..]);
            n += events.len() as u64;
        }
        s.extend_from_slice(&TAG_END.to_le_bytes());
        s.extend_from_slice(&2u32.to_le_bytes());
        s.extend_from_slice(&n.to_le_bytes());
        s
    }

    #[test]
    fn the_cpus_blocks_become_cpu_markers_and_shootdowns_tlb_flushes() {
        let load = |a: u64, asid: u32| Event::reference(Kind::Load, a, 8).with_asid(asid);
        let shoot = Event::control(Kind::TlbFlush, 0x7000, 3)
            .with_paddr(0b10)
            .with_mode(Mode::Kernel);
        let all = Event::control(Kind::TlbFlush, FLUSH_ALL, 0)
            .with_paddr(0b11)
            .with_mode(Mode::Kernel);
        let blocks = vec![
            (0, vec![load(0x1000, 1)]),
            (1, vec![load(0x2000, 3), load(0x3000, 3)]),
            (1, vec![shoot]),
            (0, vec![load(0x4000, 1), all]),
        ];
        let (got, r) = read_all(system_blocks(&blocks)).unwrap();
        assert_eq!(
            got,
            vec![
                load(0x1000, 1),
                Event::on_cpu(1),
                load(0x2000, 3),
                load(0x3000, 3),
                shoot,
                Event::on_cpu(0),
                load(0x4000, 1),
                all,
            ]
        );
        assert_eq!(
            (r.records(), r.tlb_flushes(), r.counts()),
            (6, 2, [0, 4, 0])
        );
        // A stream that starts on another vCPU says so first.
        let (got, _) = read_all(system_blocks(&blocks[1..2])).unwrap();
        assert_eq!(got[0], Event::on_cpu(1));
        // No more CPUs than a mask names.
        let s = system_blocks(&[(64, vec![load(0x1000, 1)])]);
        assert!(error_of(s).contains(&format!(
            "byte offset {HEAD}: vcpu: vCPU 64: a trace has at most 64 CPUs"
        )));
    }

    #[test]
    fn malformed_system_records_are_errors() {
        let good = system_stream(&system_sample(), &[]);
        let first = HEAD + HEAD;
        let mut s = good.clone();
        s[first + RECORD_SYSTEM + 22] = 9;
        assert!(error_of(s).contains(&format!(
            "byte offset {}: kind: unknown record kind 9",
            first + RECORD_SYSTEM + 22
        )),);
        let mut s = good.clone();
        s[first + 23] = 2;
        assert!(error_of(s).contains(": mode: unknown mode 2"));
        let mut s = good.clone();
        s[first + 20] = 5; // a context switch with a size
        assert!(error_of(s).contains(": size: a context switch of 5 bytes"));
        let mut s = good.clone();
        s[first + 20] = 5;
        s[first + 22] = 4; // a TLB flush with a size
        assert!(error_of(s).contains(": size: a TLB flush of 5 bytes"));
        // A PROC block in a program's stream is not one.
        let mut s = stream(&sample(2), 4, Some(TAG_END));
        s[HEAD] = TAG_PROC as u8;
        assert!(error_of(s).contains("block: unknown block tag 4"));
        // Cut inside a PROC block's name.
        let s = system_stream(&[], &[(1, 2, "sh")]);
        assert!(error_of(s[..HEAD + HEAD + 5].to_vec()).contains("inside a PROC block"));
    }

    #[test]
    fn a_system_recording_stores_its_processes_in_the_header() {
        let dir = std::env::temp_dir().join(format!("lookaside-system-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, dst) = (dir.join("stream"), dir.join("sys.lks"));
        let events = system_sample();
        std::fs::write(&src, system_stream(&events, &[(2, 81, "pingpong")])).unwrap();
        let meta = Metadata {
            command: Some("workload pipe".into()),
            ..Default::default()
        };
        let r = record_with(&src, Via::Qemu, &dst, &meta, true).unwrap();
        assert_eq!((r.events, r.switches, r.processes.len()), (9, 2, 1));
        let mut back = super::super::open(&dst, None).unwrap();
        let m = back.metadata().unwrap().clone();
        assert_eq!(m.command.as_deref(), Some("workload pipe"));
        assert_eq!(m.processes, r.processes);
        let mut got = Vec::new();
        let mut batch = Vec::new();
        while back.next_batch(&mut batch).unwrap() {
            got.extend_from_slice(&batch);
        }
        assert_eq!(got, events, "the records survive the new header");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `stream` (a whole system's, ending with END) with an EXCLUDED block before its END.
    fn with_excluded(stream: &[u8], x: &Excluded) -> Vec<u8> {
        let (body, end) = stream.split_at(stream.len() - HEAD);
        let mut s = body.to_vec();
        s.extend_from_slice(&TAG_EXCLUDED.to_le_bytes());
        s.extend_from_slice(&[0; 12]);
        for v in x.code.iter().chain(&x.counts) {
            s.extend_from_slice(&v.to_le_bytes());
        }
        s.extend_from_slice(end);
        s
    }

    #[test]
    fn the_tracings_own_work_is_counted_in_the_metadata_not_recorded() {
        let x = Excluded {
            code: [0xffff_ffff_c000_0000, 0xffff_ffff_c000_1000],
            counts: [700, 200, 100],
        };
        let events = system_sample();
        let full = with_excluded(&system_stream(&events, &[(1, 80, "sh")]), &x);
        let (got, r) = read_all(full.clone()).unwrap();
        assert_eq!((got, r.excluded()), (events.clone(), Some(x)));
        let dir = std::env::temp_dir().join(format!("lookaside-excl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, dst) = (dir.join("stream"), dir.join("sys.lks"));
        std::fs::write(&src, &full).unwrap();
        let r = record_with(&src, Via::Qemu, &dst, &Metadata::default(), true).unwrap();
        assert_eq!((r.events, r.excluded), (9, Some(x)));
        let back = super::super::open(&dst, None).unwrap();
        assert_eq!(
            back.metadata().unwrap().extra["excluded"],
            "tracing module code 0xffffffffc0000000-0xffffffffc0001000: 1000 references not \
             recorded (fetch 700, load 200, store 100)"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        // Malformed: twice, cut short, or in a program's stream.
        let twice = with_excluded(&full, &x);
        assert!(error_of(twice).contains("block: a second EXCLUDED block"));
        let cut = &full[..full.len() - HEAD - 10];
        assert!(error_of(cut.to_vec()).contains("inside an EXCLUDED block"));
        let mut s = stream(&sample(2), 4, Some(TAG_END));
        s[HEAD] = TAG_EXCLUDED as u8;
        assert!(error_of(s).contains("block: unknown block tag 5"));
    }

    /// `stream` (a whole system's, ending with END) with a LAYOUT block of `ranges` (a start
    /// and an end per class of [`KernelClass::ALL`]) before its END.
    fn with_layout(stream: &[u8], ranges: &[(u64, u64); 7]) -> Vec<u8> {
        let (body, end) = stream.split_at(stream.len() - HEAD);
        let mut s = body.to_vec();
        s.extend_from_slice(&TAG_LAYOUT.to_le_bytes());
        s.extend_from_slice(&[0; 12]);
        for (a, b) in ranges {
            s.extend_from_slice(&a.to_le_bytes());
            s.extend_from_slice(&b.to_le_bytes());
        }
        s.extend_from_slice(end);
        s
    }

    #[test]
    fn the_kernel_layout_goes_into_the_metadata() {
        let mut ranges = [(0u64, 0u64); 7];
        for (i, &(_, a, b)) in super::super::kernel::X86_64_NOKASLR.iter().enumerate() {
            ranges[i] = (a, b);
        }
        ranges[6] = (0, 0); // no CPU entry area: left out
        let events = system_sample();
        let full = with_layout(&system_stream(&events, &[(1, 80, "sh")]), &ranges);
        let (got, r) = read_all(full.clone()).unwrap();
        assert_eq!(got, events);
        let layout = r.layout().unwrap().clone();
        assert_eq!(
            layout.range(KernelClass::DirectMap),
            Some((0xffff_8880_0000_0000, 0xffff_c880_0000_0000))
        );
        assert_eq!(layout.range(KernelClass::CpuEntryArea), None);
        let dir = std::env::temp_dir().join(format!("lookaside-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, dst) = (dir.join("stream"), dir.join("sys.lks"));
        std::fs::write(&src, &full).unwrap();
        record_with(&src, Via::Qemu, &dst, &Metadata::default(), true).unwrap();
        let back = super::super::open(&dst, None).unwrap();
        let stored = &back.metadata().unwrap().extra["kernel_layout"];
        assert_eq!(KernelLayout::parse(stored), Ok(layout));
        std::fs::remove_dir_all(&dir).unwrap();
        // Malformed: twice, cut short, an empty range, or in a program's stream.
        assert!(error_of(with_layout(&full, &ranges)).contains("block: a second LAYOUT block"));
        let cut = &full[..full.len() - HEAD - 10];
        assert!(error_of(cut.to_vec()).contains("inside a LAYOUT block"));
        ranges[1] = (0x2000, 0x1000);
        let bad = with_layout(&system_stream(&events, &[]), &ranges);
        assert!(error_of(bad).contains("LAYOUT: text: end 0x1000 is not above start 0x2000"));
        let mut s = stream(&sample(2), 4, Some(TAG_END));
        s[HEAD] = TAG_LAYOUT as u8;
        assert!(error_of(s).contains("block: unknown block tag 6"));
    }

    #[test]
    fn record_writes_a_native_trace_only_when_complete() {
        let dir = std::env::temp_dir().join(format!("lookaside-capture-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("stream");
        let dst = dir.join("out.lks");
        let events = sample(50_000);
        std::fs::write(&src, stream(&events, 16384, Some(TAG_END))).unwrap();
        let meta = Metadata {
            command: Some("prog arg".into()),
            ..Default::default()
        };
        let mut calls = 0;
        let r = record(
            &src,
            Via::Qemu,
            &dst,
            &meta,
            &WriteOptions::default(),
            &mut |_| {
                calls += 1;
                true
            },
        )
        .unwrap();
        assert_eq!(
            (r.events, r.fetches, r.loads, r.stores),
            (50_000, 16_667, 16_667, 16_666)
        );
        assert_eq!((r.threads, r.ending), (Some(2), Some(Ending::Exit)));
        assert!(calls >= 1);
        let mut back = super::super::open(&dst, None).unwrap();
        assert_eq!(
            back.metadata().unwrap().command.as_deref(),
            Some("prog arg")
        );
        assert_eq!(crate::trace::stream::drain(back.as_mut()).unwrap(), 50_000);
        std::fs::remove_file(&dst).unwrap();
        // Truncated, or abandoned: no output at all.
        let bytes = stream(&events, 16384, None);
        std::fs::write(&src, bytes).unwrap();
        let e = record_with(&src, Via::Qemu, &dst, &meta, true);
        assert!(e.unwrap_err().to_string().contains("truncated"));
        assert!(!dst.exists());
        std::fs::write(&src, stream(&events, 16384, Some(TAG_END))).unwrap();
        let e = record_with(&src, Via::Qemu, &dst, &meta, false);
        assert_eq!(e.unwrap_err().to_string(), "interrupted");
        assert!(!dst.exists());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary files left"
        );
        // A lackey pipe: M is a load and a store.
        let lackey = "==1== Lackey\nI  0400d7d4,3\n L 04222cac,8\n M 0421ab10,4\n S 7ff0,1\n";
        std::fs::write(&src, lackey).unwrap();
        let r = record_with(&src, Via::Lackey, &dst, &meta, true).unwrap();
        assert_eq!((r.events, r.fetches, r.loads, r.stores), (5, 1, 2, 2));
        assert_eq!((r.threads, r.ending), (None, None));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
