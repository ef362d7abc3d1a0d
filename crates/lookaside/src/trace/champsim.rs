//! ChampSim instruction traces (`*.champsimtrace.xz`), and the CloudSuite variant ChampSim
//! reads with `--cloudsuite`.
//!
//! ChampSim's traces (the DPC-3 and CRC-2 sets, and whatever its PIN tracer, `cvp2champsim`
//! or other tracers write) are a flat array of fixed-size little-endian records, one per
//! executed instruction, with no header and no magic number: ChampSim's `input_instr`
//! (`inc/trace_instruction.h`), 64 bytes:
//!
//! ```text
//! offset  size  field
//! 0       8     ip                        u64: the instruction's address
//! 8       1     is_branch                 0 or 1
//! 9       1     branch_taken              0 or 1
//! 10      2     destination_registers[2]  u8 register numbers, 0 = none
//! 12      4     source_registers[4]       u8 register numbers, 0 = none
//! 16      16    destination_memory[2]     u64 addresses the instruction writes, 0 = none
//! 32      32    source_memory[4]          u64 addresses the instruction reads, 0 = none
//! ```
//!
//! The CloudSuite variant (`cloudsuite_instr`) has four destination registers and four
//! destination addresses, and an address-space id, in 96 bytes (C layout, with padding):
//! `ip` at 0, `is_branch` 8, `branch_taken` 9, `destination_registers[4]` 10,
//! `source_registers[4]` 14, 6 bytes of padding, `destination_memory[4]` 24,
//! `source_memory[4]` 56, `asid[2]` 88, 6 bytes of padding.
//!
//! Reading. Each record becomes, in this order: a [`Kind::Fetch`] of `ip`, a
//! [`Kind::Load`] of every non-zero `source_memory` slot (in slot order), then a
//! [`Kind::Store`] of every non-zero `destination_memory` slot (in slot order). Loads come
//! before stores because an instruction reads its operands before it writes its result, and
//! because ChampSim issues them in that order (the load queue is filled before the store
//! queue); a read-modify-write of one address is thus a load and then a store, as in lackey.
//! ChampSim drops zero addresses (they mark empty slots) and keeps every other slot, so a
//! slot repeating an address of the same list is an access of its own here too (ChampSim's
//! tracer never writes one: it records each address at most once per list). Registers and
//! branch fields are not simulated; `is_branch` and `branch_taken` must be 0 or 1, which is
//! also how a file that is not a ChampSim trace is caught early (field `is_branch` or
//! `branch_taken`, with the byte offset).
//!
//! Sizes are not in the format. ChampSim itself has none either: every fetch and every
//! memory operand is a request for the one cache block (and the one page) holding its
//! address. Each reference is therefore given a size of 1 byte ([`FETCH_SIZE`],
//! [`DATA_SIZE`]), which touches exactly the block and the page ChampSim touches; any larger
//! guess (x86 instructions have no fixed length, and the tracer does not record operand
//! sizes) would invent a second block or page for the addresses near a boundary, which
//! ChampSim never accesses. Events are user mode (the format has no mode) with no physical
//! address, in address space 0 — or, for CloudSuite, in the address space
//! `asid[0] | asid[1] << 8` (the two bytes read as one little-endian 16-bit id).
//!
//! A file whose length is not a whole number of records is an error naming the byte offset
//! where it ends and the field its last record is cut in. As the format has no magic
//! number, it is recognised by name only (`.champsim` and `.champsimtrace`, optionally
//! followed by `.gz`, `.xz` or `.zst`; `.cloudsuite` for the variant), or named with the
//! format option; content sniffing never takes another file for one.
//!
//! Writing ([`writer`], ChampSim's 64-byte records only; CloudSuite is read-only). Each
//! fetch starts a record with its address as `ip`; the loads that follow it, up to the next
//! fetch, fill `source_memory` and the stores `destination_memory`. Branch and register
//! fields are written as zeros (Lookaside's events carry neither, so ChampSim would see no
//! branches and no register dependences), sizes, modes, address spaces and physical
//! addresses are dropped, and reading the record back gives its loads before its stores.
//! What the format cannot hold is left out and counted in
//! [`TraceSink::dropped`](super::TraceSink::dropped), never spilled into an invented
//! instruction (that would change the instruction count every per-instruction figure is
//! divided by): a fifth load or a third store of one instruction (ChampSim's own tracer
//! loses those too), a load or store before the first fetch (it has no instruction), one at
//! address 0 (which means an empty slot), and every control event.

use std::path::Path;

use super::compress::Input;
use super::textio::{LineEncoder, TextWriter};
use super::TraceSource;
use crate::error::{Error, Location, Result};
use crate::event::{Event, Kind, BATCH};

/// Size given to every fetch read from a ChampSim trace (see the module documentation).
pub const FETCH_SIZE: u16 = 1;
/// Size given to every load and store read from a ChampSim trace.
pub const DATA_SIZE: u16 = 1;

/// The record layout of a ChampSim trace variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Bytes per record.
    pub record: usize,
    /// Number of destination registers (their offset is 10, the source registers follow).
    dst_regs: usize,
    /// Offset and slot count of `destination_memory`.
    dst_mem: (usize, usize),
    /// Offset and slot count of `source_memory`.
    src_mem: (usize, usize),
    /// Offset of `asid[2]`, if the variant has one.
    asid: Option<usize>,
}

/// ChampSim's `input_instr`: 64 bytes, 2 destination and 4 source addresses.
pub const CHAMPSIM: Layout = Layout {
    record: 64,
    dst_regs: 2,
    dst_mem: (16, 2),
    src_mem: (32, 4),
    asid: None,
};

/// ChampSim's `cloudsuite_instr`: 96 bytes, 4 destination and 4 source addresses, an asid.
pub const CLOUDSUITE: Layout = Layout {
    record: 96,
    dst_regs: 4,
    dst_mem: (24, 4),
    src_mem: (56, 4),
    asid: Some(88),
};

impl Layout {
    /// The field holding byte `at` of a record.
    fn field(&self, at: usize) -> &'static str {
        let src_regs = 10 + self.dst_regs;
        match at {
            0..=7 => "ip",
            8 => "is_branch",
            9 => "branch_taken",
            a if a < src_regs => "destination_registers",
            a if a < src_regs + 4 => "source_registers",
            a if a < self.dst_mem.0 => "padding",
            a if a < self.dst_mem.0 + 8 * self.dst_mem.1 => "destination_memory",
            a if a < self.src_mem.0 + 8 * self.src_mem.1 => "source_memory",
            a if self.asid.is_some_and(|s| a < s + 2) => "asid",
            _ => "padding",
        }
    }

    /// Most events one record becomes.
    fn max_events(&self) -> usize {
        1 + self.dst_mem.1 + self.src_mem.1
    }
}

/// Records read from the input at a time.
const RECORDS_PER_READ: usize = 2048;

/// A ChampSim (or CloudSuite) trace being read.
pub struct ChampSimReader {
    input: Input,
    layout: Layout,
    /// `buf[pos..len]` are bytes read but not yet decoded.
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
    /// Decompressed offset of `buf[0]`.
    base: u64,
}

/// Reads the ChampSim trace `input` (64-byte `input_instr` records).
pub fn reader(input: Input) -> ChampSimReader {
    ChampSimReader::new(input, CHAMPSIM)
}

/// Reads the CloudSuite trace `input` (96-byte `cloudsuite_instr` records).
pub fn cloudsuite_reader(input: Input) -> ChampSimReader {
    ChampSimReader::new(input, CLOUDSUITE)
}

#[inline(always)]
fn u64_at(r: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&r[at..at + 8]);
    u64::from_le_bytes(b)
}

impl ChampSimReader {
    /// A reader of `input` in the given record layout.
    pub fn new(input: Input, layout: Layout) -> ChampSimReader {
        ChampSimReader {
            input,
            layout,
            buf: vec![0; layout.record * RECORDS_PER_READ],
            pos: 0,
            len: 0,
            eof: false,
            base: 0,
        }
    }

    /// Moves the undecoded tail to the front and reads until the buffer is full or the
    /// input ends.
    fn refill(&mut self) -> Result<()> {
        self.buf.copy_within(self.pos..self.len, 0);
        self.base += self.pos as u64;
        self.len -= self.pos;
        self.pos = 0;
        while self.len < self.buf.len() && !self.eof {
            let n = self.input.read_full(&mut self.buf[self.len..])?;
            self.eof = n == 0;
            self.len += n;
        }
        Ok(())
    }

    #[cold]
    fn truncated(&self) -> Error {
        let have = self.len - self.pos;
        let start = self.base + self.pos as u64;
        Error::trace(
            self.input.path(),
            Location::Byte(start + have as u64),
            self.layout.field(have),
            format!(
                "truncated: the last record (at byte offset {start}) has {have} of its {} bytes",
                self.layout.record
            ),
        )
    }

    #[cold]
    fn bad_flag(&self, at: usize, field: &'static str, value: u8) -> Error {
        Error::trace(
            self.input.path(),
            Location::Byte(self.base + at as u64),
            field,
            format!("{value:#04x} is neither 0 nor 1 (is this a ChampSim trace of this variant?)"),
        )
    }

    /// Decodes the record at `buf[at..]` into `out`.
    #[inline(always)]
    fn decode(&self, at: usize, out: &mut Vec<Event>) -> Result<()> {
        let l = &self.layout;
        let r = &self.buf[at..at + l.record];
        if r[8] > 1 {
            return Err(self.bad_flag(at + 8, "is_branch", r[8]));
        }
        if r[9] > 1 {
            return Err(self.bad_flag(at + 9, "branch_taken", r[9]));
        }
        let asid = match l.asid {
            Some(a) => u16::from_le_bytes([r[a], r[a + 1]]) as u32,
            None => 0,
        };
        out.push(Event::reference(Kind::Fetch, u64_at(r, 0), FETCH_SIZE).with_asid(asid));
        for (kind, (off, slots)) in [(Kind::Load, l.src_mem), (Kind::Store, l.dst_mem)] {
            for s in 0..slots {
                let addr = u64_at(r, off + 8 * s);
                if addr != 0 {
                    out.push(Event::reference(kind, addr, DATA_SIZE).with_asid(asid));
                }
            }
        }
        Ok(())
    }
}

impl TraceSource for ChampSimReader {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        out.reserve(BATCH + self.layout.max_events());
        let rec = self.layout.record;
        while out.len() < BATCH {
            if self.len - self.pos < rec {
                if self.eof {
                    if self.len > self.pos {
                        out.clear();
                        return Err(self.truncated());
                    }
                    break;
                }
                self.refill()?;
                continue;
            }
            if let Err(e) = self.decode(self.pos, out) {
                out.clear();
                return Err(e);
            }
            self.pos += rec;
        }
        Ok(!out.is_empty())
    }

    fn bytes_read(&self) -> u64 {
        self.input.raw_bytes()
    }
}

/// Loads and stores one ChampSim record holds.
const SRC_SLOTS: usize = 4;
const DST_SLOTS: usize = 2;

/// Turns events into 64-byte ChampSim records, one per fetch (see the module documentation).
#[derive(Debug, Default)]
pub struct ChampSimEncoder {
    /// The instruction being filled: its ip, loads and stores so far.
    open: Option<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    ip: u64,
    src: [u64; SRC_SLOTS],
    nsrc: usize,
    dst: [u64; DST_SLOTS],
    ndst: usize,
}

impl Pending {
    fn emit(&self, buf: &mut Vec<u8>) {
        let mut r = [0u8; 64];
        r[..8].copy_from_slice(&self.ip.to_le_bytes());
        for (s, a) in self.dst.iter().enumerate() {
            r[16 + 8 * s..24 + 8 * s].copy_from_slice(&a.to_le_bytes());
        }
        for (s, a) in self.src.iter().enumerate() {
            r[32 + 8 * s..40 + 8 * s].copy_from_slice(&a.to_le_bytes());
        }
        buf.extend_from_slice(&r);
    }
}

/// A ChampSim trace being written.
pub type ChampSimWriter = TextWriter<ChampSimEncoder>;

/// Creates a ChampSim trace at `path` (compressed if the extension says so).
pub fn writer(path: &Path) -> Result<ChampSimWriter> {
    TextWriter::create(path, ChampSimEncoder::default())
}

impl LineEncoder for ChampSimEncoder {
    fn encode(&mut self, events: &[Event], buf: &mut Vec<u8>) -> u64 {
        let mut dropped = 0;
        for e in events {
            match (e.kind, &mut self.open) {
                (Kind::Fetch, open) => {
                    if let Some(p) = open.take() {
                        p.emit(buf);
                    }
                    *open = Some(Pending {
                        ip: e.addr,
                        ..Pending::default()
                    });
                }
                (Kind::Load, Some(p)) if e.addr != 0 && p.nsrc < SRC_SLOTS => {
                    p.src[p.nsrc] = e.addr;
                    p.nsrc += 1;
                }
                (Kind::Store, Some(p)) if e.addr != 0 && p.ndst < DST_SLOTS => {
                    p.dst[p.ndst] = e.addr;
                    p.ndst += 1;
                }
                _ => dropped += 1,
            }
        }
        dropped
    }

    fn finish(&mut self, buf: &mut Vec<u8>) {
        if let Some(p) = self.open.take() {
            p.emit(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Mode;
    use crate::trace::tests::{read_all, scratch, write};
    use crate::trace::Format;
    use proptest::prelude::*;

    /// One 64-byte record.
    fn record(ip: u64, branch: [u8; 2], dst: [u64; 2], src: [u64; 4]) -> Vec<u8> {
        let mut r = vec![0u8; 64];
        r[..8].copy_from_slice(&ip.to_le_bytes());
        r[8..10].copy_from_slice(&branch);
        r[10..16].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        for (s, a) in dst.iter().enumerate() {
            r[16 + 8 * s..24 + 8 * s].copy_from_slice(&a.to_le_bytes());
        }
        for (s, a) in src.iter().enumerate() {
            r[32 + 8 * s..40 + 8 * s].copy_from_slice(&a.to_le_bytes());
        }
        r
    }

    /// One 96-byte CloudSuite record.
    fn cloudsuite_record(ip: u64, dst: [u64; 4], src: [u64; 4], asid: [u8; 2]) -> Vec<u8> {
        let mut r = vec![0xeeu8; 96]; // padding is whatever the writer's memory held
        r[..8].copy_from_slice(&ip.to_le_bytes());
        r[8..10].copy_from_slice(&[1, 0]);
        r[10..18].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        for (s, a) in dst.iter().enumerate() {
            r[24 + 8 * s..32 + 8 * s].copy_from_slice(&a.to_le_bytes());
        }
        for (s, a) in src.iter().enumerate() {
            r[56 + 8 * s..64 + 8 * s].copy_from_slice(&a.to_le_bytes());
        }
        r[88..90].copy_from_slice(&asid);
        r
    }

    fn read_bytes(name: &str, bytes: &[u8], format: Format) -> Result<Vec<Event>> {
        let dir = scratch(&format!("champsim-{name}"));
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let r = read_all(&p, Some(format)).map_err(|e| {
            let shown = p.display().to_string();
            match e {
                Error::Trace {
                    location,
                    field,
                    message,
                    ..
                } => Error::trace(name, location, field, message.replace(&shown, name)),
                other => other,
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
        r
    }

    const F: Kind = Kind::Fetch;
    const L: Kind = Kind::Load;
    const S: Kind = Kind::Store;

    fn r(kind: Kind, addr: u64) -> Event {
        Event::reference(kind, addr, 1)
    }

    #[test]
    fn records_become_a_fetch_then_loads_then_stores() {
        let mut t = record(0x401000, [0, 0], [0, 0], [0, 0, 0, 0]);
        t.extend(record(
            0x401004,
            [1, 1],
            [0x7ff0, 0],
            [0x6000, 0, 0x6008, 0],
        ));
        t.extend(record(
            u64::MAX,
            [0, 0],
            [0x10, 0x20],
            [0x30, 0x40, 0x30, u64::MAX],
        ));
        let evs = read_bytes("t.champsim", &t, Format::ChampSim).unwrap();
        assert_eq!(
            evs,
            vec![
                r(F, 0x401000),
                r(F, 0x401004),
                r(L, 0x6000),
                r(L, 0x6008),
                r(S, 0x7ff0),
                r(F, u64::MAX),
                r(L, 0x30),
                r(L, 0x40),
                r(L, 0x30),
                r(L, u64::MAX),
                r(S, 0x10),
                r(S, 0x20),
            ]
        );
        assert!(evs.iter().all(|e| e.mode == Mode::User && e.asid == 0));
        assert!(read_bytes("e.champsim", &[], Format::ChampSim)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn cloudsuite_records_carry_four_stores_and_an_asid() {
        let mut t = cloudsuite_record(0x1000, [1, 2, 3, 4], [5, 0, 0, 6], [0x34, 0x12]);
        t.extend(cloudsuite_record(0x1004, [0; 4], [0; 4], [0, 0]));
        let evs = read_bytes("t.cloudsuite", &t, Format::CloudSuite).unwrap();
        let a = |e: Event| e.with_asid(0x1234);
        assert_eq!(
            evs,
            vec![
                a(r(F, 0x1000)),
                a(r(L, 5)),
                a(r(L, 6)),
                a(r(S, 1)),
                a(r(S, 2)),
                a(r(S, 3)),
                a(r(S, 4)),
                r(F, 0x1004),
            ]
        );
        // One CloudSuite record is not a whole number of 64-byte records.
        assert!(read_bytes("t.champsim", &t[..96], Format::ChampSim)
            .unwrap_err()
            .to_string()
            .contains("has 32 of its 64 bytes"));
    }

    #[test]
    fn a_cut_record_names_the_offset_and_the_field() {
        let mut t = record(0x401000, [0, 0], [0; 2], [0; 4]);
        t.extend(record(0x401004, [0, 0], [0; 2], [0x10, 0, 0, 0]));
        let err = |n: usize| {
            read_bytes("t.champsim", &t[..n], Format::ChampSim)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(64 + 40),
            "t.champsim: byte offset 104: source_memory: truncated: the last record (at byte \
             offset 64) has 40 of its 64 bytes"
        );
        assert_eq!(
            err(3),
            "t.champsim: byte offset 3: ip: truncated: the last record (at byte offset 0) has \
             3 of its 64 bytes"
        );
        assert!(err(64 + 8).contains(": is_branch: "));
        assert!(err(64 + 11).contains(": destination_registers: "));
        assert!(err(64 + 13).contains(": source_registers: "));
        assert!(err(64 + 20).contains(": destination_memory: "));
        let c = CLOUDSUITE;
        let fields: Vec<_> = [9, 12, 16, 20, 30, 60, 88, 89, 90, 95]
            .iter()
            .map(|&a| c.field(a))
            .collect();
        assert_eq!(
            fields,
            [
                "branch_taken",
                "destination_registers",
                "source_registers",
                "padding",
                "destination_memory",
                "source_memory",
                "asid",
                "asid",
                "padding",
                "padding"
            ]
        );
    }

    #[test]
    fn branch_flags_that_are_not_0_or_1_are_errors() {
        let mut t = record(0x401000, [0, 0], [0; 2], [0; 4]);
        t.extend(record(0x401004, [2, 0], [0; 2], [0; 4]));
        assert_eq!(
            read_bytes("t.champsim", &t, Format::ChampSim)
                .unwrap_err()
                .to_string(),
            "t.champsim: byte offset 72: is_branch: 0x02 is neither 0 nor 1 (is this a ChampSim \
             trace of this variant?)"
        );
        t[64 + 8] = 1;
        t[64 + 9] = b'x';
        assert!(read_bytes("t.champsim", &t, Format::ChampSim)
            .unwrap_err()
            .to_string()
            .contains("byte offset 73: branch_taken: 0x78"));
        let text = b"I  0400d7d4,8\n L 04222cac,8\n S 04222cac,8\n I  0400d7d8,4\n";
        assert!(read_bytes("t", text, Format::ChampSim).is_err());
    }

    #[test]
    fn the_writer_packs_instructions_and_counts_what_does_not_fit() {
        let mut buf = Vec::new();
        let mut enc = ChampSimEncoder::default();
        let dropped = enc.encode(
            &[
                r(L, 0x10),                                // before any fetch
                Event::control(Kind::ContextSwitch, 0, 1), // control
                r(F, 0x400000).with_asid(7),               // asid is not kept
                r(S, 0x20),
                r(L, 0x30),
                r(L, 0), // address 0 means "none"
                r(L, 0x38),
                r(S, 0x28),
                r(S, 0x2c), // a third store
                r(L, 0x40),
                r(L, 0x48),
                r(L, 0x50), // a fifth load
            ],
            &mut buf,
        );
        assert_eq!(dropped, 5);
        assert!(buf.is_empty(), "the instruction is still open");
        assert_eq!(enc.encode(&[r(F, 0x400004)], &mut buf), 0);
        enc.finish(&mut buf);
        assert_eq!(
            buf,
            [
                record(0x400000, [0, 0], [0x20, 0x28], [0x30, 0x38, 0x40, 0x48]),
                record(0x400004, [0, 0], [0; 2], [0; 4]),
            ]
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r[10..16].fill(0);
                r
            })
            .collect::<Vec<_>>()
            .concat()
        );
    }

    /// Instructions as ChampSim can hold them: a fetch, then up to 4 loads and 2 stores
    /// at non-zero addresses, loads first.
    fn instructions() -> impl Strategy<Value = Vec<Event>> {
        let addr = prop_oneof![
            Just(1u64),
            Just(u64::MAX),
            0x40_0000u64..0x40_1000,
            1u64..u64::MAX
        ];
        let one = (
            prop_oneof![Just(0u64), addr.clone()],
            prop::collection::vec(addr.clone(), 0..=4),
            prop::collection::vec(addr, 0..=2),
        )
            .prop_map(|(ip, loads, stores)| {
                let mut v = vec![r(F, ip)];
                v.extend(loads.into_iter().map(|a| r(L, a)));
                v.extend(stores.into_iter().map(|a| r(S, a)));
                v
            });
        prop::collection::vec(one, 0..300).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn instruction_streams_round_trip(events in instructions()) {
            let dir = scratch("prop-champsim");
            for name in ["t.champsim", "t.champsimtrace.xz"] {
                let p = dir.join(name);
                prop_assert_eq!(write(&p, None, &events), events.len() as u64);
                prop_assert_eq!(&read_all(&p, None).unwrap(), &events);
            }
            let _ = std::fs::remove_dir_all(&dir);
        }

        #[test]
        fn any_length_but_whole_records_is_an_error(
            events in instructions(),
            cut in 1usize..64,
        ) {
            let dir = scratch("prop-champsim-cut");
            let p = dir.join("t.champsim");
            write(&p, None, &events);
            let mut bytes = std::fs::read(&p).unwrap();
            bytes.extend_from_slice(&[0u8; 64][..cut]);
            std::fs::write(&p, &bytes).unwrap();
            let e = read_all(&p, None).unwrap_err().to_string();
            prop_assert!(e.contains("truncated"), "{}", e);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
