//! The record encoding of the native format: how each [`Event`] becomes a few bytes, and back.
//!
//! The encoding is designed for the decoder, which runs on every simulation and must keep up
//! with the machine (the target is well over 100 M events per second on one core):
//!
//! - Each record is a one-byte header and LEB128 varints, at most 25 bytes; the decoder reads
//!   records out of a buffer that always has [`WINDOW`] readable bytes past a record start
//!   (zero padding at the end), so it never checks for the end of the data inside a record.
//! - Everything the header says (kind, size, which address register, what follows) comes
//!   from one lookup in a 256-entry table ([`HEADERS`]): no branches on the header bits.
//! - Addresses are deltas from one of five registers: one for fetches (consecutive fetches
//!   are a byte or two apart) and four for data, picked by the *encoder* (the closest one, or
//!   the least recently used one when none is close). Stack, heap and globals each keep a
//!   register, so most data deltas fit in one byte too: short varints are predictable
//!   branches, and small records mean less for zstd to inflate.
//! - What rarely changes is state, not repeated per reference: the address space (`ASID`
//!   records) and the user/kernel mode (`MODE` records).
//! - Records of one length come in runs (fetches a byte apart: two bytes; random addresses
//!   in one region: five; whole-system references with one-byte deltas: three). After a
//!   record of such a length the decoder reads the next ones of that length in an unrolled
//!   run ([`RUN`]): per record one header load and test, one test of the delta's
//!   continuation bits, no length branch and no loop test; one-byte deltas come from a
//!   table ([`SHORT_DELTAS`]).
//!
//! ```text
//! fetch   header bits 0-1 = 0   bits 2-5 size 1..=15 (0: varint size follows)
//!                               bit 6 reserved (0)   bit 7 paddr follows
//! load    header bits 0-1 = 1   bits 2-4 size code c < 7: 1 << c bytes (7: varint size follows)
//! store   header bits 0-1 = 2   bits 5-6 data register (slot)   bit 7 paddr follows
//!   then  varint zigzag(addr - register); the register becomes addr
//!         varint zigzag(paddr - paddr register of the same slot)      if bit 7
//!         varint size                                                 if the size says so
//! other   header bits 0-1 = 3, op = header >> 2:
//!   op 0  END, then u64 event count and u32 CRC-32 of every record byte before END (LE)
//!   op 1  ASID varint: the address space of every following event
//!   op 2  MODE user, op 3 MODE kernel: the mode of every following reference
//!   op 4-11 control event of kind op - 1 (context switch … zero page), carrying all its fields:
//!         flags byte (bit 0 kernel, bit 1 paddr follows, bit 2 size follows; others 0),
//!         varint addr, [varint paddr], [varint size]              absolute, no registers
//! ```
//!
//! Deltas wrap around (`wrapping_sub`/`wrapping_add`), so every `u64` round-trips; an absent
//! physical address is [`NO_PADDR`]. The trailer's count catches a stream cut at a record
//! boundary, its CRC any change to the record bytes (independently of zstd's own checksum).

use crate::event::{Event, EventSink, Kind, Mode, NO_PADDR};

/// Bytes readable from any record start (the longest record, a control event, is 25 bytes).
pub(crate) const WINDOW: usize = 32;
/// Length of the END record with its trailer.
pub(crate) const END_LEN: usize = 13;

const CLASS_OTHER: u8 = 3;
const OP_END: u8 = 0;
const OP_ASID: u8 = 1;
const OP_USER: u8 = 2;
const OP_KERNEL: u8 = 3;
/// `op = kind + CONTROL_OP_BIAS` for control kinds 3..=10 (ops 4..=11).
const CONTROL_OP_BIAS: u8 = 1;

const FLAG_KERNEL: u8 = 1;
const FLAG_PADDR: u8 = 2;
const FLAG_SIZE: u8 = 4;

/// Header bit saying a physical address follows (every reference class).
const H_PADDR: u8 = 0x80;
/// Data size code meaning "a varint size follows".
const DATA_SIZE_EXPLICIT: u8 = 7;

/// Address registers: 0 for fetches, 1-4 for the data slots (8 so that a masked index needs
/// no bounds check; 5-7 are never used).
const REGS: usize = 8;

/// What a header byte means: one load from [`HEADERS`] per record, each field a byte or two
/// the decoder reads as it is (no shifts and masks), eight bytes so that indexing is a
/// scaled load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(8))]
pub(crate) struct Header {
    /// Bytes touched (unless [`Header::SIZE`]).
    size: u16,
    kind: Kind,
    /// Address register: 0 for fetches, 1-4 for the data slots.
    reg: u8,
    /// What follows the address delta ([`Header::PADDR`], [`Header::SIZE`]), or
    /// [`Header::SPECIAL`]; 0 for the plain references of the fast path.
    flags: u8,
    /// What the fast loop for references without physical addresses does with the record:
    /// the register (0 fetch, 1-4 data) of a plain reference, [`Header::SLOW`] for the rest.
    /// The one byte is both the test for the fast path and the register index, so the fast
    /// path costs one compare and needs no masking.
    path: u8,
    /// The same for the loop that also reads physical addresses: the register, plus
    /// [`Header::PATH_PADDR`] if a physical address delta follows; [`Header::SLOW`] for
    /// records with a size, the other class and reserved bits.
    path_physical: u8,
}

impl Header {
    /// A physical address delta follows.
    const PADDR: u8 = 1;
    /// A varint size follows.
    const SIZE: u8 = 2;
    /// Not a reference (class 3), or a reserved bit is set: the slow path sorts it out.
    const SPECIAL: u8 = 4;
    /// [`Header::path`] of a record the fast path leaves to the slow one (above every
    /// register and register + [`Header::PATH_PADDR`]).
    const SLOW: u8 = 0xff;
    /// In [`Header::path_physical`]: a physical address delta follows.
    const PATH_PADDR: u8 = 8;

    const fn new(size: u16, kind: Kind, reg: u8, flags: u8) -> Header {
        let path = if flags == 0 { reg } else { Header::SLOW };
        let path_physical = match flags {
            0 => reg,
            Header::PADDR => reg | Header::PATH_PADDR,
            _ => Header::SLOW,
        };
        Header {
            size,
            kind,
            reg,
            flags,
            path,
            path_physical,
        }
    }
}

/// The meaning of every header byte.
const HEADERS: [Header; 256] = {
    let special = Header::new(0, Kind::Fetch, 0, Header::SPECIAL);
    let mut t = [special; 256];
    let mut h = 0;
    while h < 256 {
        let b = h as u8;
        let paddr = if b & H_PADDR != 0 { Header::PADDR } else { 0 };
        t[h] = match b & 3 {
            0 if b & 0x40 != 0 => special,
            0 => {
                let size = ((b >> 2) & 15) as u16;
                let flags = paddr | if size == 0 { Header::SIZE } else { 0 };
                Header::new(size, Kind::Fetch, 0, flags)
            }
            class @ (1 | 2) => {
                let code = (b >> 2) & 7;
                let explicit = code == DATA_SIZE_EXPLICIT;
                Header::new(
                    if explicit { 0 } else { 1 << code },
                    if class == 1 { Kind::Load } else { Kind::Store },
                    1 + ((b >> 5) & 3),
                    paddr | if explicit { Header::SIZE } else { 0 },
                )
            }
            _ => special,
        };
        h += 1;
    }
    t
};

/// The END record's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trailer {
    pub count: u64,
    pub crc: u32,
}

#[inline(always)]
fn zigzag(d: u64) -> u64 {
    (d << 1) ^ ((d as i64 >> 63) as u64)
}

#[inline(always)]
const fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

#[inline(always)]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes of the varint of `v`.
#[inline(always)]
fn varint_len(v: u64) -> u32 {
    (70 - (v | 1).leading_zeros()) / 7
}

/// Turns events into records, tracking the registers the decoder will have.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    regs: [u64; REGS],
    pregs: [u64; REGS],
    /// When each data slot was last used (for the least-recently-used choice).
    used: [u64; 4],
    clock: u64,
    asid: u32,
    kernel: bool,
}

impl Encoder {
    /// The data slot to take `addr`'s delta from: the closest register, unless even that one
    /// is far (a varint of 3+ bytes), in which case the least recently used register is
    /// recycled for the new region.
    fn slot(&mut self, addr: u64) -> usize {
        let mut best = 0;
        let mut best_len = u32::MAX;
        for s in 0..4 {
            let len = varint_len(zigzag(addr.wrapping_sub(self.regs[1 + s])));
            if len < best_len {
                (best, best_len) = (s, len);
            }
        }
        if best_len >= 3 {
            best = (0..4).min_by_key(|&s| self.used[s]).unwrap_or(0);
        }
        self.clock += 1;
        self.used[best] = self.clock;
        best
    }

    #[inline]
    pub fn encode(&mut self, e: &Event, out: &mut Vec<u8>) {
        if e.asid != self.asid {
            out.push(CLASS_OTHER | OP_ASID << 2);
            put_varint(out, e.asid as u64);
            self.asid = e.asid;
        }
        let kernel = matches!(e.mode, Mode::Kernel);
        let has_paddr = e.paddr != NO_PADDR;
        if !e.kind.is_ref() {
            out.push(CLASS_OTHER | (e.kind as u8 + CONTROL_OP_BIAS) << 2);
            let mut flags = 0;
            if kernel {
                flags |= FLAG_KERNEL;
            }
            if has_paddr {
                flags |= FLAG_PADDR;
            }
            if e.size != 0 {
                flags |= FLAG_SIZE;
            }
            out.push(flags);
            put_varint(out, e.addr);
            if has_paddr {
                put_varint(out, e.paddr);
            }
            if e.size != 0 {
                put_varint(out, e.size as u64);
            }
            return;
        }
        if kernel != self.kernel {
            let op = if kernel { OP_KERNEL } else { OP_USER };
            out.push(CLASS_OTHER | op << 2);
            self.kernel = kernel;
        }
        let paddr_bit = if has_paddr { H_PADDR } else { 0 };
        let (header, reg, explicit) = if e.kind == Kind::Fetch {
            let explicit = e.size == 0 || e.size > 15;
            let size = if explicit { 0 } else { e.size as u8 };
            (size << 2 | paddr_bit, 0, explicit)
        } else {
            let code = match e.size {
                1 => 0,
                2 => 1,
                4 => 2,
                8 => 3,
                16 => 4,
                32 => 5,
                64 => 6,
                _ => DATA_SIZE_EXPLICIT,
            };
            let slot = self.slot(e.addr);
            let h = e.kind as u8 | code << 2 | (slot as u8) << 5 | paddr_bit;
            (h, 1 + slot, code == DATA_SIZE_EXPLICIT)
        };
        out.push(header);
        put_varint(out, zigzag(e.addr.wrapping_sub(self.regs[reg])));
        self.regs[reg] = e.addr;
        if has_paddr {
            put_varint(out, zigzag(e.paddr.wrapping_sub(self.pregs[reg])));
            self.pregs[reg] = e.paddr;
        }
        if explicit {
            put_varint(out, e.size as u64);
        }
    }

    /// The END record and trailer.
    pub fn end(&self, trailer: &Trailer, out: &mut Vec<u8>) {
        out.push(CLASS_OTHER | OP_END << 2);
        out.extend_from_slice(&trailer.count.to_le_bytes());
        out.extend_from_slice(&trailer.crc.to_le_bytes());
    }
}

/// Decoder registers, kept between calls to [`decode`].
#[derive(Debug, Default)]
pub(crate) struct DecodeState {
    regs: [u64; REGS],
    pregs: [u64; REGS],
    asid: u32,
    kernel: bool,
}

/// Why [`decode`] returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `out` is full.
    Full,
    /// Reached `limit`: more bytes are needed.
    Limit,
    /// Read the END record (which ends `END_LEN` bytes before the returned position).
    End(Trailer),
}

/// A malformed record: where it starts (index into the buffer) and what is wrong.
#[derive(Debug)]
pub(crate) struct DecodeError {
    pub at: usize,
    pub message: String,
}

/// Continuation bits of eight varint bytes read as one `u64`.
const CONTINUES: u64 = 0x8080_8080_8080_8080;

/// The varint at the start of the eight bytes `x` (little-endian), if it ends within them
/// (values below 2^56): its value and length, with no loop: the varint ends at the lowest
/// clear continuation bit, and its 7-bit groups are packed in three steps (pairs into 14
/// bits, then 28, then 56). The length is computed, not branched on, so the next record
/// waits for it: [`short_varint`] and [`long_delta`] try the common short lengths first, by
/// branches.
#[inline(always)]
fn varint8(x: u64) -> Option<(u64, usize)> {
    let ends = !x & CONTINUES;
    if ends == 0 {
        return None;
    }
    // The varint's bytes without their continuation bits.
    let v = x & (ends ^ (ends - 1)) & !CONTINUES;
    // Each step closes the gaps between the groups: in lanes of 16 bits (two 7-bit groups
    // with a 1-bit gap), then of 32 (two 14-bit groups, 2-bit gap), then of 64 (28, 4).
    let v = v - ((v & 0x7f00_7f00_7f00_7f00) >> 1);
    let hi = v & 0x3fff_0000_3fff_0000;
    let v = v - hi + (hi >> 2);
    let hi = v & 0x0fff_ffff_0000_0000;
    let v = v - hi + (hi >> 4);
    Some((v, ends.trailing_zeros() as usize / 8 + 1))
}

/// The varint at the start of the eight bytes `x`, and its length, if it is at most 8 bytes
/// long. Lengths 1 to 4 (the address deltas of nearly every record: neighbours, and random
/// addresses in up to 256 MiB) take a branch each, whose constant length lets the processor
/// predict where the next field or record starts and decode ahead (from a computed length,
/// each record would wait for the one before); runs of one length, as a loop or a random
/// region makes, predict well. Longer ones are [`varint8`].
#[inline(always)]
fn short_varint(x: u64) -> Option<(u64, usize)> {
    let v = x & 0x7f;
    if x & 0x80 == 0 {
        Some((v, 1))
    } else if x & 0x8000 == 0 {
        Some((v | (x >> 1 & 0x3f80), 2))
    } else if x & 0x80_0000 == 0 {
        Some((v | (x >> 1 & 0x3f80) | (x >> 2 & 0x1f_c000), 3))
    } else if x & 0x8000_0000 == 0 {
        let v = v | (x >> 1 & 0x3f80) | (x >> 2 & 0x1f_c000) | (x >> 3 & 0xfe0_0000);
        Some((v, 4))
    } else {
        varint8(x)
    }
}

/// The address delta of every one-byte varint (below 0x80), zigzag undone: one load instead
/// of four operations for the commonest delta.
const SHORT_DELTAS: [u64; 128] = {
    let mut t = [0u64; 128];
    let mut z = 0;
    while z < 128 {
        t[z] = unzigzag(z as u64);
        z += 1;
    }
    t
};

/// The decoder's tables, in one static so that one base register serves both (the loops
/// are short of registers).
#[repr(C)]
struct Tables {
    /// [`HEADERS`]: one load per record.
    headers: [Header; 256],
    /// [`SHORT_DELTAS`].
    short_deltas: [u64; 128],
}

static TABLES: Tables = Tables {
    headers: HEADERS,
    short_deltas: SHORT_DELTAS,
};

/// The address delta at the start of the eight bytes `x` whose first byte continues (two
/// bytes or more), and its length, if it is at most 8 bytes long: [`delta_at`] once the
/// one-byte case is ruled out.
#[inline(always)]
fn long_delta(x: u64) -> Option<(u64, usize)> {
    let v = x & 0x7f | (x >> 1 & 0x3f80);
    let (z, len) = if x & 0x8000 == 0 {
        (v, 2)
    } else if x & 0x80_0000 == 0 {
        (v | (x >> 2 & 0x1f_c000), 3)
    } else if x & 0x8000_0000 == 0 {
        (v | (x >> 2 & 0x1f_c000) | (x >> 3 & 0xfe0_0000), 4)
    } else {
        varint8(x)?
    };
    Some((unzigzag(z), len))
}

/// The address delta at `w[i..]` (`i + 8 <= WINDOW`) and the position after it, if its
/// varint is at most 8 bytes long: one byte from [`SHORT_DELTAS`], longer ones by
/// [`long_delta`].
#[inline(always)]
fn delta_at(w: &[u8; WINDOW], i: usize) -> Option<(u64, usize)> {
    let b = w[i];
    if b < 0x80 {
        Some((TABLES.short_deltas[b as usize], i + 1))
    } else {
        let (d, len) = long_delta(le8(w, i))?;
        Some((d, i + len))
    }
}

/// The eight bytes of `w` from `i` as a little-endian `u64`.
#[inline(always)]
fn le8(w: &[u8; WINDOW], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&w[i..i + 8]);
    u64::from_le_bytes(b)
}

/// Reads a varint at `w[i..]` (`i + 8 <= WINDOW`); `None` if it is longer than 10 bytes or
/// exceeds 64 bits.
#[inline(always)]
fn varint(w: &[u8; WINDOW], i: usize) -> Option<(u64, usize)> {
    match short_varint(le8(w, i)) {
        Some((v, len)) => Some((v, i + len)),
        None => varint_long(w, i),
    }
}

#[inline]
fn varint_long(w: &[u8; WINDOW], mut i: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = w[i];
        i += 1;
        if shift == 63 && b > 1 {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some((v, i));
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Decodes records from `buf[pos..]`, handing each event to `sink` in order, while
/// `pos < limit` and fewer than `max` events were handed over. The caller guarantees
/// `buf.len() >= limit + WINDOW`. Returns the position after the last record decoded (it may
/// pass `limit`, and the real end of the data if `limit` is it: the caller checks) and the
/// number of events emitted.
///
/// `sink` is generic, not a batch, so that a consumer can take each event while it is still
/// in registers (the machine simulates it right away) instead of through memory.
#[inline(always)]
pub(crate) fn decode(
    buf: &[u8],
    mut pos: usize,
    limit: usize,
    st: &mut DecodeState,
    max: usize,
    sink: &mut impl EventSink,
) -> Result<(usize, usize, Stop), DecodeError> {
    let bad = |at: usize, message: &str| DecodeError {
        at,
        message: message.to_string(),
    };
    let mut n = 0;
    // Each stretch starts in the loop for references without physical addresses, and moves
    // to the one that also reads them at the first that has one.
    let mut physical = false;
    let result = loop {
        if pos >= limit {
            break Ok(Stop::Limit);
        }
        if n >= max {
            break Ok(Stop::Full);
        }
        // A record is at least one byte long and emits at most one event, so the records
        // that start before `end` can pass neither `limit` nor `max`: one check of both per
        // stretch instead of per record.
        let end = limit.min(pos.saturating_add(max - n));
        // The windows of exactly the records that start before `end` lie in `stretch`.
        let Some(stretch) = end.checked_add(WINDOW - 1).and_then(|end| buf.get(..end)) else {
            break Err(bad(pos, "internal: record window out of the buffer"));
        };
        let (left, emitted, stop) = if physical {
            decode_stretch::<true>(&stretch[pos..], st, sink)
        } else {
            decode_stretch::<false>(&stretch[pos..], st, sink)
        };
        n += emitted;
        // Where the rest starts: the next record, or the bad one.
        pos = stretch.len() - left;
        physical = false;
        match stop {
            StretchStop::Done => {}
            StretchStop::Physical => physical = true,
            StretchStop::End(len, trailer) => {
                pos += len;
                break Ok(Stop::End(trailer));
            }
            StretchStop::Bad(message) => break Err(DecodeError { at: pos, message }),
        }
    };
    result.map(|stop| (pos, n, stop))
}

/// Why a stretch ended.
enum StretchStop {
    /// Every record of the stretch is decoded.
    Done,
    /// At a reference with a physical address, in the loop for references without: the
    /// rest of the stretch is for the loop that reads them.
    Physical,
    /// At the END record: its length, and the trailer.
    End(usize, Trailer),
    /// At a bad record: what is wrong with it.
    Bad(String),
}

/// Decodes the records whose windows lie in `rest` (those starting before its last
/// `WINDOW - 1` bytes) into `sink`; returns the bytes left from the first record not
/// decoded (the bad one, or END), the number of events emitted, and why it stopped early.
///
/// Out of line, with only the loop's own values live in it: inlined into the caller's
/// loops, those competed for registers with the caller's and went to the stack; a call per
/// stretch of thousands of records costs nothing.
///
/// The fetch register lives in a register of the processor, the data registers in memory:
/// fetches come in long runs, and a register in memory would make each wait for the store
/// of the one before (a branch on the kind, which runs predict, costs less).
///
/// Two loops, by `PHYSICAL`: the one for references with only an address (user-level
/// traces) stops at the first reference with a physical address, and the caller goes on
/// with the one that reads both (whole-system traces), whose fast path has a branch and a
/// second delta more. Each is the smaller for the stream it serves.
#[inline(never)]
fn decode_stretch<const PHYSICAL: bool>(
    mut rest: &[u8],
    st: &mut DecodeState,
    sink: &mut impl EventSink,
) -> (usize, usize, StretchStop) {
    let mut regs = st.regs;
    let mut fetch = regs[0];
    let mut pregs = st.pregs;
    let mut pfetch = pregs[0];
    // The address space (low half) and kernel mode (bit 32) in one register.
    let mut space = st.asid as u64 | (st.kernel as u64) << 32;
    let mut n = 0;
    let stop = 'records: loop {
        let Some(w) = rest.first_chunk::<WINDOW>() else {
            break StretchStop::Done;
        };
        let h = TABLES.headers[w[0] as usize];
        let mode = if space >> 32 != 0 {
            Mode::Kernel
        } else {
            Mode::User
        };
        'plain: {
            // Most records: a reference with an address delta (of up to 8 bytes) and, in
            // the `PHYSICAL` loop, maybe a physical address delta, decoded here; the rest
            // below (out of the way of this path's registers).
            let path = if PHYSICAL { h.path_physical } else { h.path };
            let last = if PHYSICAL {
                (REGS as u8 - 1) | Header::PATH_PADDR
            } else {
                REGS as u8 - 1
            };
            if path > last {
                break 'plain;
            }
            // A register index below `REGS`, so no bounds check.
            let r = (path & (REGS as u8 - 1)) as usize;
            let Some((d, mut end)) = delta_at(w, 1) else {
                break 'plain;
            };
            let mut paddr = NO_PADDR;
            if PHYSICAL && path & Header::PATH_PADDR != 0 {
                let Some((pd, next)) = delta_at(w, end) else {
                    break 'plain;
                };
                end = next;
                paddr = if r == 0 {
                    pfetch = pfetch.wrapping_add(pd);
                    pfetch
                } else {
                    pregs[r] = pregs[r].wrapping_add(pd);
                    pregs[r]
                };
            }
            let addr = if r == 0 {
                fetch = fetch.wrapping_add(d);
                fetch
            } else {
                regs[r] = regs[r].wrapping_add(d);
                regs[r]
            };
            sink.event(&Event {
                addr,
                paddr,
                asid: space as u32,
                size: h.size,
                kind: h.kind,
                mode,
            });
            n += 1;
            rest = &rest[end..];
            // More records of this length usually follow (fetches and neighbours with a
            // one-byte delta, random addresses in one region with a four-byte one): a run of
            // them (see [`RUN`]), whose windows all lie in `rest`.
            let asid = space as u32;
            if end == if PHYSICAL { 3 } else { 2 } {
                if let Some(run) = rest.first_chunk::<{ RUN + WINDOW }>() {
                    let done = if PHYSICAL {
                        let (f, p) = (&mut fetch, &mut pfetch);
                        short_run_physical(run, f, p, &mut regs, &mut pregs, asid, mode, sink)
                    } else {
                        short_run(run, &mut fetch, &mut regs, asid, mode, sink)
                    };
                    n += done;
                    rest = &rest[done * end..];
                }
            } else if !PHYSICAL && end == 5 {
                if let Some(run) = rest.first_chunk::<{ RUN + WINDOW }>() {
                    let done = run_of::<5>(run, &mut fetch, &mut regs, asid, mode, sink);
                    n += done;
                    rest = &rest[done * 5..];
                }
            }
            continue 'records;
        }
        if !PHYSICAL && h.flags == Header::PADDR {
            break StretchStop::Physical;
        }
        let len = if h.flags & Header::SPECIAL != 0 {
            let (mut asid, mut kernel) = (space as u32, space >> 32 != 0);
            let other = other(w, &mut asid, &mut kernel);
            space = asid as u64 | (kernel as u64) << 32;
            match other {
                Other::Event(e, len) => {
                    sink.event(&e);
                    n += 1;
                    len
                }
                Other::State(len) => len,
                Other::End(t) => break StretchStop::End(END_LEN, t),
                Other::Bad(message) => break StretchStop::Bad(message),
            }
        } else {
            (regs[0], pregs[0]) = (fetch, pfetch);
            let got = reference(w, h, &mut regs, &mut pregs);
            (fetch, pfetch) = (regs[0], pregs[0]);
            match got {
                Ok((addr, paddr, size, len)) => {
                    sink.event(&Event {
                        addr,
                        paddr,
                        asid: space as u32,
                        size,
                        kind: h.kind,
                        mode,
                    });
                    n += 1;
                    len
                }
                Err(message) => break StretchStop::Bad(message.to_string()),
            }
        };
        rest = &rest[len..];
    };
    (regs[0], pregs[0]) = (fetch, pfetch);
    st.regs = regs;
    st.pregs = pregs;
    st.asid = space as u32;
    st.kernel = space >> 32 != 0;
    (rest.len(), n, stop)
}

/// Bytes of records one run may decode: [`run_of`] up to six records of five bytes; the
/// runs of [`short_run`] and [`short_run_physical`] only the first [`SHORT_RUN`] (eight
/// records of two bytes, five of three). A run starts only where all `RUN + WINDOW` bytes
/// lie in the stretch, so that every record it decodes has its window. Runs are unrolled (a
/// loop of sixteen two-byte records cost more per record than eight unrolled), and only
/// after a two-byte record (three in whole-system traces) or a five-byte one: trying runs of
/// other lengths cost the common records more than they saved.
const RUN: usize = 30;
/// See [`RUN`].
const SHORT_RUN: usize = 16;

/// Adds `d` to register `r` (0: the fetch register, kept apart) and returns its new value.
#[inline(always)]
fn step(r: usize, d: u64, fetch: &mut u64, regs: &mut [u64; REGS]) -> u64 {
    if r == 0 {
        *fetch = fetch.wrapping_add(d);
        *fetch
    } else {
        regs[r] = regs[r].wrapping_add(d);
        regs[r]
    }
}

/// Decodes the leading two-byte records of `run` (a plain reference and a one-byte delta:
/// nearly every record of a user-level trace), up to eight of them, into `sink`; returns how
/// many, 0 if the first is not one. Unrolled, so each record costs a test of its header's
/// path, one of its delta byte, the delta's table entry and the register: no length to
/// compute, no loop test.
#[inline(always)]
fn short_run(
    run: &[u8; RUN + WINDOW],
    fetch: &mut u64,
    regs: &mut [u64; REGS],
    asid: u32,
    mode: Mode,
    sink: &mut impl EventSink,
) -> usize {
    for k in 0..SHORT_RUN / 2 {
        let h = TABLES.headers[run[2 * k] as usize];
        let b = run[2 * k + 1];
        // A plain reference (a register below `REGS`) with a one-byte delta (no
        // continuation bit).
        if h.path >= REGS as u8 || b >= 0x80 {
            return k;
        }
        let d = TABLES.short_deltas[b as usize];
        let addr = step(h.path as usize, d, fetch, regs);
        sink.event(&Event {
            addr,
            paddr: NO_PADDR,
            asid,
            size: h.size,
            kind: h.kind,
            mode,
        });
    }
    SHORT_RUN / 2
}

/// [`short_run`] for records of `L` bytes (3 to 5; five are random addresses in one region),
/// a plain reference and an address delta of `L - 1` bytes, up to `RUN / L` of them: one
/// test of the header's path and one of the delta's continuation bits per record, and the
/// delta's groups packed with no branch.
#[inline(always)]
fn run_of<const L: usize>(
    run: &[u8; RUN + WINDOW],
    fetch: &mut u64,
    regs: &mut [u64; REGS],
    asid: u32,
    mode: Mode,
    sink: &mut impl EventSink,
) -> usize {
    const { assert!(3 <= L && L <= 5) };
    // The continuation bits of the delta's bytes, and those that must be set (all but the
    // last).
    let bits = CONTINUES & (u64::MAX >> (64 - 8 * (L - 1)));
    let set = CONTINUES & (u64::MAX >> (72 - 8 * (L - 1)));
    for k in 0..RUN / L {
        let h = TABLES.headers[run[k * L] as usize];
        let x = le8_in(run, k * L + 1);
        if h.path >= REGS as u8 || x & bits != set {
            return k;
        }
        let v = x & 0x7f | (x >> 1 & 0x3f80);
        let v = match L {
            3 => v,
            4 => v | (x >> 2 & 0x1f_c000),
            _ => v | (x >> 2 & 0x1f_c000) | (x >> 3 & 0xfe0_0000),
        };
        let addr = step(h.path as usize, unzigzag(v), fetch, regs);
        sink.event(&Event {
            addr,
            paddr: NO_PADDR,
            asid,
            size: h.size,
            kind: h.kind,
            mode,
        });
    }
    RUN / L
}

/// The eight bytes of `run` from `i` as a little-endian `u64`.
#[inline(always)]
fn le8_in(run: &[u8; RUN + WINDOW], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&run[i..i + 8]);
    u64::from_le_bytes(b)
}

/// [`short_run`] for the three-byte records of whole-system traces: a plain reference with
/// one-byte address and physical address deltas; up to five.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn short_run_physical(
    run: &[u8; RUN + WINDOW],
    fetch: &mut u64,
    pfetch: &mut u64,
    regs: &mut [u64; REGS],
    pregs: &mut [u64; REGS],
    asid: u32,
    mode: Mode,
    sink: &mut impl EventSink,
) -> usize {
    for k in 0..SHORT_RUN / 3 {
        let h = TABLES.headers[run[3 * k] as usize];
        let (b, pb) = (run[3 * k + 1], run[3 * k + 2]);
        // A plain reference with a physical address (the register plus `PATH_PADDR`) and
        // one-byte deltas: one test of all three.
        let r = h.path_physical ^ Header::PATH_PADDR;
        if r >= REGS as u8 || b >= 0x80 || pb >= 0x80 {
            return k;
        }
        let r = r as usize;
        let d = TABLES.short_deltas[b as usize];
        let pd = TABLES.short_deltas[pb as usize];
        let paddr = step(r, pd, pfetch, pregs);
        let addr = step(r, d, fetch, regs);
        sink.event(&Event {
            addr,
            paddr,
            asid,
            size: h.size,
            kind: h.kind,
            mode,
        });
    }
    SHORT_RUN / 3
}

/// A reference record in window `w` with header `h`, in general (a long delta, a physical
/// address, a size): its address, physical address, size and length, having updated the
/// registers.
#[inline(never)]
fn reference(
    w: &[u8; WINDOW],
    h: Header,
    regs: &mut [u64; REGS],
    pregs: &mut [u64; REGS],
) -> Result<(u64, u64, u16, usize), &'static str> {
    let r = h.reg as usize & (REGS - 1);
    let (d, mut i) = varint(w, 1).ok_or("malformed address varint")?;
    let addr = regs[r].wrapping_add(unzigzag(d));
    regs[r] = addr;
    let mut paddr = NO_PADDR;
    if h.flags & Header::PADDR != 0 {
        let (d, j) = varint(w, i).ok_or("malformed physical address varint")?;
        i = j;
        paddr = pregs[r].wrapping_add(unzigzag(d));
        pregs[r] = paddr;
    }
    let mut size = h.size;
    if h.flags & Header::SIZE != 0 {
        match varint(w, i) {
            Some((v, j)) if v <= u16::MAX as u64 => {
                i = j;
                size = v as u16;
            }
            _ => return Err("malformed or too large size"),
        }
    }
    Ok((addr, paddr, size, i))
}

/// A record that is not a plain reference, decoded.
enum Other {
    Event(Event, usize),
    /// A state change (address space, mode) of this length.
    State(usize),
    End(Trailer),
    Bad(String),
}

#[cold]
fn other(w: &[u8; WINDOW], asid: &mut u32, kernel: &mut bool) -> Other {
    if w[0] & 3 != CLASS_OTHER {
        return Other::Bad(format!("reserved bit set in record header 0x{:02x}", w[0]));
    }
    let mut le = [0u8; 12];
    le.copy_from_slice(&w[1..13]);
    match w[0] >> 2 {
        OP_END => Other::End(Trailer {
            count: u64::from_le_bytes([le[0], le[1], le[2], le[3], le[4], le[5], le[6], le[7]]),
            crc: u32::from_le_bytes([le[8], le[9], le[10], le[11]]),
        }),
        OP_ASID => match varint(w, 1) {
            Some((v, i)) if v <= u32::MAX as u64 => {
                *asid = v as u32;
                Other::State(i)
            }
            _ => Other::Bad("malformed or too large address-space id".into()),
        },
        OP_USER => {
            *kernel = false;
            Other::State(1)
        }
        OP_KERNEL => {
            *kernel = true;
            Other::State(1)
        }
        op => control(w, op, *asid),
    }
}

/// A control event record.
fn control(w: &[u8; WINDOW], op: u8, asid: u32) -> Other {
    let Some(kind) = op.checked_sub(CONTROL_OP_BIAS).and_then(Kind::from_u8) else {
        return Other::Bad(format!("unknown record type 0x{:02x}", w[0]));
    };
    let flags = w[1];
    if flags & !(FLAG_KERNEL | FLAG_PADDR | FLAG_SIZE) != 0 {
        return Other::Bad(format!("reserved flag set in control record 0x{flags:02x}"));
    }
    let Some((addr, mut i)) = varint(w, 2) else {
        return Other::Bad("malformed address varint".into());
    };
    let mut paddr = NO_PADDR;
    if flags & FLAG_PADDR != 0 {
        let Some((p, j)) = varint(w, i) else {
            return Other::Bad("malformed physical address varint".into());
        };
        paddr = p;
        i = j;
    }
    let mut size = 0;
    if flags & FLAG_SIZE != 0 {
        match varint(w, i) {
            Some((v, j)) if v <= u16::MAX as u64 => {
                size = v as u16;
                i = j;
            }
            _ => return Other::Bad("malformed or too large size".into()),
        }
    }
    let mode = if flags & FLAG_KERNEL != 0 {
        Mode::Kernel
    } else {
        Mode::User
    };
    Other::Event(
        Event {
            addr,
            paddr,
            asid,
            size,
            kind,
            mode,
        },
        i,
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::event::{ALL_KINDS, BATCH, FLUSH_ALL};
    use crate::trace::tests::any_event;

    fn encode_all(events: &[Event]) -> Vec<u8> {
        let mut enc = Encoder::default();
        let mut bytes = Vec::new();
        for e in events {
            enc.encode(e, &mut bytes);
        }
        let crc = crc32fast::hash(&bytes);
        enc.end(
            &Trailer {
                count: events.len() as u64,
                crc,
            },
            &mut bytes,
        );
        bytes
    }

    fn round_trip(events: &[Event]) -> Vec<Event> {
        let mut bytes = encode_all(events);
        let len = bytes.len();
        let crc = crc32fast::hash(&bytes[..len - END_LEN]);
        bytes.resize(len + WINDOW, 0);
        let mut out = Vec::new();
        let (pos, n, stop) = decode(
            &bytes,
            0,
            len,
            &mut DecodeState::default(),
            usize::MAX,
            &mut out,
        )
        .unwrap();
        assert_eq!(n, out.len());
        assert_eq!(pos, len);
        assert_eq!(
            stop,
            Stop::End(Trailer {
                count: out.len() as u64,
                crc
            })
        );
        out
    }

    #[test]
    fn zigzag_and_varint_lengths() {
        for d in [0, 1, u64::MAX, i64::MAX as u64, i64::MIN as u64, 12345] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!(zigzag(u64::MAX), 1, "-1 is small");
        for v in [0u64, 1, 127, 128, 16383, 16384, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len() as u32, varint_len(v), "{v}");
        }
    }

    #[test]
    fn header_table_matches_the_layout() {
        let h = Header::new;
        assert_eq!(
            TABLES.headers[3 << 2],
            h(3, Kind::Fetch, 0, 0),
            "fetch of 3 bytes"
        );
        assert_eq!(
            TABLES.headers[0],
            h(0, Kind::Fetch, 0, Header::SIZE),
            "explicit size"
        );
        assert_eq!(
            TABLES.headers[0x40].flags,
            Header::SPECIAL,
            "reserved fetch bit"
        );
        assert_eq!(
            TABLES.headers[1 | 3 << 2 | 2 << 5 | 0x80],
            h(8, Kind::Load, 3, Header::PADDR)
        );
        assert_eq!(
            TABLES.headers[2 | 7 << 2],
            h(0, Kind::Store, 1, Header::SIZE)
        );
        assert_eq!(TABLES.headers[3].flags, Header::SPECIAL);
        assert_eq!(std::mem::size_of::<Header>(), 8);
    }

    #[test]
    fn every_field_round_trips() {
        let r = Event::reference;
        let mut events = vec![
            r(Kind::Fetch, 0x400000, 4),
            r(Kind::Fetch, 0x400004, 3),
            r(Kind::Fetch, 0x400007, 15),
            r(Kind::Fetch, 0x400016, 16),
            r(Kind::Fetch, 0x400016, 0),
            r(Kind::Load, u64::MAX, 8).with_paddr(0),
            r(Kind::Store, 0, u16::MAX)
                .with_mode(Mode::Kernel)
                .with_asid(u32::MAX),
            r(Kind::Load, 0x7fff_0000, 0).with_paddr(u64::MAX - 1),
            Event::control(Kind::TlbFlush, FLUSH_ALL, 7),
            Event::control(Kind::Map, 0x1000, 7)
                .with_paddr(0x8000)
                .with_mode(Mode::User),
            Event {
                size: 17,
                ..Event::control(Kind::Marker, 42, 0)
            },
            r(Kind::Fetch, 0, 64).with_mode(Mode::Kernel),
        ];
        for k in ALL_KINDS {
            events.push(Event {
                size: 3,
                ..Event::reference(k, 77, 1).with_asid(5)
            });
        }
        // Many data regions at once: every slot, recycled.
        for i in 0..200u64 {
            events.push(r(Kind::Load, ((i % 7) << 40) | (i * 8), 4));
        }
        assert_eq!(round_trip(&events), events);
    }

    #[test]
    fn no_record_is_longer_than_the_window() {
        let worst = [
            Event::control(Kind::Map, u64::MAX, 0).with_paddr(u64::MAX - 1),
            Event {
                size: u16::MAX,
                ..Event::control(Kind::Marker, u64::MAX / 3, 0)
            },
            Event::reference(Kind::Load, 1 << 63, 300).with_paddr(1 << 62),
            Event::reference(Kind::Fetch, 1 << 63, 300).with_paddr(1 << 62),
        ];
        let mut longest = 0;
        for e in worst {
            let mut bytes = Vec::new();
            Encoder::default().encode(
                &Event {
                    size: u16::MAX,
                    ..e
                },
                &mut bytes,
            );
            longest = longest.max(bytes.len());
        }
        assert_eq!(longest, 25);
        assert!(longest <= WINDOW);
    }

    #[test]
    fn interleaved_regions_stay_small() {
        // Stack, heap and code interleaved: each keeps its own register.
        let mut events = Vec::new();
        for i in 0..1000u64 {
            events.push(Event::reference(Kind::Fetch, 0x40_0000 + 3 * i, 3));
            events.push(Event::reference(
                Kind::Store,
                0x001f_feff_f000 - 8 * (i % 16),
                8,
            ));
            events.push(Event::reference(Kind::Load, 0x5000_0000 + 4 * i, 4));
        }
        let bytes = encode_all(&events);
        // Two bytes per event; one data register would need ~5 (6-byte deltas between regions).
        assert!(
            bytes.len() < events.len() * 21 / 10,
            "{} bytes",
            bytes.len()
        );
    }

    #[test]
    fn malformed_records_are_errors() {
        let run = |bytes: &[u8]| {
            let mut b = bytes.to_vec();
            let len = b.len();
            b.resize(len + WINDOW, 0);
            decode(
                &b,
                0,
                len,
                &mut DecodeState::default(),
                100,
                &mut Vec::new(),
            )
            .map(|(_, _, s)| s)
        };
        let msg = |bytes: &[u8]| run(bytes).unwrap_err().message;
        assert_eq!(msg(&[0x40, 0]), "reserved bit set in record header 0x40");
        assert_eq!(msg(&[0xff]), "unknown record type 0xff");
        assert_eq!(msg(&[0x33]), "unknown record type 0x33");
        assert_eq!(
            msg(&[0x04, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            "malformed address varint"
        );
        assert_eq!(
            msg(&[0x07, 0x80, 0x80, 0x80, 0x80, 0x10]),
            "malformed or too large address-space id"
        );
        assert_eq!(
            msg(&[0x13, 0x08, 0]),
            "reserved flag set in control record 0x08"
        );
        assert_eq!(
            msg(&[0x00, 0, 0x80, 0x80, 0x04]),
            "malformed or too large size"
        );
        assert_eq!(
            run(&[0x0f, 0x0b]).unwrap(),
            Stop::Limit,
            "mode records alone are fine"
        );
    }

    // The decoder against a reference: the layout of the module doc read one byte at a time,
    // with no window, header table or fast path, on encoded streams (every record kind, every
    // delta length, wrap-around), the same streams corrupted or cut, and byte soup; decoded in
    // pieces (limits and event budgets that split it anywhere, as the reader's refills do).

    /// How a decoding ended.
    #[derive(Debug, PartialEq, Eq)]
    enum Ending {
        /// The END record, and the position after its trailer.
        End(Trailer, usize),
        /// A bad record: where it starts, and what is wrong with it.
        Bad(usize, String),
        /// The data ran out, here: after the last record, or past the data if that record
        /// ran into the zero padding (the reader calls that truncated).
        Out(usize),
    }

    /// The events of `data` and how it ends, decoded as the module doc describes the
    /// layout; bytes past the data read as zero (the decoder's buffer is padded with zeros).
    fn reference_decode(data: &[u8]) -> (Vec<Event>, Ending) {
        let (events, ending, _) = reference_decode_ends(data);
        (events, ending)
    }

    /// [`reference_decode`], with the position after the record of the last event (0 if none).
    fn reference_decode_ends(data: &[u8]) -> (Vec<Event>, Ending, usize) {
        let mut last_end = 0;
        let byte = |i: usize| data.get(i).copied().unwrap_or(0);
        // At most 10 bytes, 7 bits each, least significant first; the value fits 64 bits.
        let varint = |mut i: usize| -> Option<(u64, usize)> {
            let mut v = 0u128;
            for k in 0..10 {
                let b = byte(i);
                i += 1;
                v |= ((b & 0x7f) as u128) << (7 * k);
                if b < 0x80 {
                    return u64::try_from(v).ok().map(|v| (v, i));
                }
            }
            None
        };
        // Zigzag: 2n for n >= 0, -2n - 1 for n < 0.
        let signed = |z: u64| if z & 1 == 0 { z >> 1 } else { !(z >> 1) };
        // Register 0 for fetches, 1-4 for the data slots.
        let mut regs = [0u64; 5];
        let mut pregs = [0u64; 5];
        let (mut asid, mut kernel) = (0u32, false);
        let mut events = Vec::new();
        let mut pos = 0;
        while pos < data.len() {
            let h = byte(pos);
            let bad = |message: String| Ending::Bad(pos, message);
            let (kind, reg, size) = match h & 3 {
                0 if h & 0x40 != 0 => {
                    return (
                        events,
                        bad(format!("reserved bit set in record header 0x{h:02x}")),
                        last_end,
                    )
                }
                0 => (Kind::Fetch, 0, Some((h >> 2) & 15).filter(|&s| s != 0)),
                1 | 2 => {
                    let kind = if h & 3 == 1 { Kind::Load } else { Kind::Store };
                    let code = (h >> 2) & 7;
                    (
                        kind,
                        1 + ((h >> 5) & 3) as usize,
                        (code != 7).then(|| 1 << code),
                    )
                }
                _ => {
                    let op = h >> 2;
                    match op {
                        0 => {
                            let le: Vec<u8> = (pos + 1..pos + 13).map(byte).collect();
                            let t = Trailer {
                                count: u64::from_le_bytes(le[..8].try_into().unwrap()),
                                crc: u32::from_le_bytes(le[8..].try_into().unwrap()),
                            };
                            return (events, Ending::End(t, pos + 13), last_end);
                        }
                        1 => match varint(pos + 1) {
                            Some((v, next)) if v <= u32::MAX as u64 => {
                                asid = v as u32;
                                pos = next;
                            }
                            _ => {
                                let m = "malformed or too large address-space id";
                                return (events, bad(m.into()), last_end);
                            }
                        },
                        2 | 3 => {
                            kernel = op == 3;
                            pos += 1;
                        }
                        4..=11 => {
                            let flags = byte(pos + 1);
                            if flags > 7 {
                                let m =
                                    format!("reserved flag set in control record 0x{flags:02x}");
                                return (events, bad(m), last_end);
                            }
                            let Some((addr, mut next)) = varint(pos + 2) else {
                                return (events, bad("malformed address varint".into()), last_end);
                            };
                            let mut paddr = NO_PADDR;
                            if flags & 2 != 0 {
                                let Some((p, n)) = varint(next) else {
                                    let m = "malformed physical address varint";
                                    return (events, bad(m.into()), last_end);
                                };
                                (paddr, next) = (p, n);
                            }
                            let mut size = 0;
                            if flags & 4 != 0 {
                                match varint(next) {
                                    Some((s, n)) if s <= u16::MAX as u64 => {
                                        (size, next) = (s as u16, n)
                                    }
                                    _ => {
                                        let m = "malformed or too large size";
                                        return (events, bad(m.into()), last_end);
                                    }
                                }
                            }
                            let mode = if flags & 1 != 0 {
                                Mode::Kernel
                            } else {
                                Mode::User
                            };
                            events.push(Event {
                                addr,
                                paddr,
                                asid,
                                size,
                                kind: ALL_KINDS[op as usize - 1],
                                mode,
                            });
                            last_end = next;
                            pos = next;
                        }
                        _ => {
                            return (
                                events,
                                bad(format!("unknown record type 0x{h:02x}")),
                                last_end,
                            )
                        }
                    }
                    continue;
                }
            };
            let Some((delta, mut next)) = varint(pos + 1) else {
                return (events, bad("malformed address varint".into()), last_end);
            };
            regs[reg] = regs[reg].wrapping_add(signed(delta));
            let mut paddr = NO_PADDR;
            if h & 0x80 != 0 {
                let Some((delta, n)) = varint(next) else {
                    return (
                        events,
                        bad("malformed physical address varint".into()),
                        last_end,
                    );
                };
                pregs[reg] = pregs[reg].wrapping_add(signed(delta));
                (paddr, next) = (pregs[reg], n);
            }
            let size = match size {
                Some(s) => s as u16,
                None => match varint(next) {
                    Some((s, n)) if s <= u16::MAX as u64 => {
                        next = n;
                        s as u16
                    }
                    _ => return (events, bad("malformed or too large size".into()), last_end),
                },
            };
            let mode = if kernel { Mode::Kernel } else { Mode::User };
            events.push(Event {
                addr: regs[reg],
                paddr,
                asid,
                size,
                kind,
                mode,
            });
            last_end = next;
            pos = next;
        }
        (events, Ending::Out(pos), last_end)
    }

    /// `data` decoded by [`decode`] in pieces: each call takes the next of `maxes` (cycled;
    /// none: no limit) as its event budget and stops at the next of `cuts` (positions in the
    /// data, then its end), as the reader decodes between refills; the record windows past
    /// a cut hold the data that follows it.
    fn decode_in_pieces(data: &[u8], cuts: &[usize], maxes: &[usize]) -> (Vec<Event>, Ending) {
        let mut buf = data.to_vec();
        buf.resize(data.len() + WINDOW, 0);
        let mut limits: Vec<usize> = cuts.iter().map(|&c| c.min(data.len())).collect();
        limits.sort_unstable();
        limits.push(data.len());
        let mut st = DecodeState::default();
        let mut out = Vec::new();
        let (mut pos, mut cut, mut call) = (0, 0, 0);
        loop {
            let max = maxes
                .get(call % maxes.len().max(1))
                .map_or(usize::MAX, |&m| m.max(1));
            call += 1;
            let before = out.len();
            match decode(&buf, pos, limits[cut], &mut st, max, &mut out) {
                Err(e) => return (out, Ending::Bad(e.at, e.message)),
                Ok((next, n, stop)) => {
                    assert_eq!(n, out.len() - before, "events counted as emitted");
                    pos = next;
                    match stop {
                        Stop::End(t) => return (out, Ending::End(t, pos)),
                        Stop::Full => assert_eq!(n, max, "full before the budget"),
                        Stop::Limit => {
                            assert!(pos >= limits[cut], "stopped before the limit");
                            if cut + 1 == limits.len() {
                                return (out, Ending::Out(pos));
                            }
                            cut += 1;
                        }
                    }
                }
            }
        }
    }

    /// Events whose addresses walk by deltas of every magnitude (so every varint length,
    /// and wrap-around past 0 and 2^64), and so do their physical addresses when they have
    /// one (half of them: a frame above the address), with every other field as
    /// [`any_event`] makes it.
    fn walking_events() -> impl Strategy<Value = Vec<Event>> {
        let step = (any_event(), 0u32..=64, any::<u64>(), any::<bool>(), 0u8..8);
        prop::collection::vec(step, 0..300).prop_map(|steps| {
            let mut addr = [0u64; 4];
            steps
                .into_iter()
                .map(|(e, bits, raw, down, region)| {
                    let delta = if bits == 64 {
                        raw
                    } else {
                        raw & ((1u64 << bits) - 1)
                    };
                    // Four regions at once (the encoder's four data slots, and recycling).
                    let a = &mut addr[(region & 3) as usize];
                    *a = if down {
                        a.wrapping_sub(delta)
                    } else {
                        a.wrapping_add(delta)
                    };
                    if region >= 4 {
                        return e;
                    }
                    let paddr = match e.paddr {
                        NO_PADDR => NO_PADDR,
                        p if p & 1 == 0 => a.wrapping_add(0x1000_0000),
                        p => p,
                    };
                    Event {
                        addr: *a,
                        paddr,
                        ..e
                    }
                })
                .collect()
        })
    }

    /// Streams made of runs, as the decoder's runs read them ([`short_run`], [`run_of`],
    /// [`short_run_physical`]): fetches a few bytes apart (two-byte records), sequential and
    /// random data in regions of 16 KiB, 1 MiB and 64 MiB (three-, four- and five-byte
    /// records), the same with physical addresses a page away (three-byte records and
    /// longer), each run 1 to 40 records long, and between runs any event (a control event,
    /// a change of mode or address space, an explicit size, a far address).
    fn run_events() -> impl Strategy<Value = Vec<Event>> {
        let segment = (0u8..8, 1usize..40, any::<u64>(), any_event());
        prop::collection::vec(segment, 0..24).prop_map(|segments| {
            let mut events = Vec::new();
            let (mut fetch, mut data) = (0x40_0000u64, 0x1000_0000u64);
            for (shape, len, seed, odd) in segments {
                let mut x = seed;
                let mut next = || {
                    // SplitMix64.
                    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = x;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^ (z >> 31)
                };
                let physical = shape & 4 != 0;
                for _ in 0..len {
                    let r = next();
                    let e = match shape & 3 {
                        0 => {
                            fetch = fetch.wrapping_add(r % 7);
                            Event::reference(Kind::Fetch, fetch, 1 + (r >> 8) as u16 % 15)
                        }
                        1 => {
                            data = data.wrapping_add(8);
                            Event::reference(Kind::Load, data, 8)
                        }
                        region => {
                            let bits = [14, 20, 26][region as usize - 2 + (r as usize >> 60) % 2];
                            let addr = 0x1000_0000 + (r & ((1 << bits) - 1) & !7);
                            let kind = if r >> 40 & 1 == 0 {
                                Kind::Load
                            } else {
                                Kind::Store
                            };
                            Event::reference(kind, addr, 1 << ((r >> 50) % 4))
                        }
                    };
                    events.push(if physical {
                        e.with_paddr(e.addr ^ 0x7000)
                    } else {
                        e
                    });
                }
                if shape >= 7 {
                    events.push(odd);
                }
            }
            events
        })
    }

    /// Bytes that look like records: headers of every class, varint bytes, anything.
    fn record_soup() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            any::<u8>(),
            0x80u8..=0xff,
            0u8..0x80,
            prop::sample::select(vec![
                0x00, 0x04, 0x3c, 0x84, 0x40, 0x01, 0x0d, 0x1d, 0x7e, 0xfe, 0x9d, 0x07, 0x0b, 0x0f,
                0x13, 0x2f, 0x33, 0xff, 0x03,
            ]),
        ];
        prop::collection::vec(byte, 0..400)
    }

    /// Positions in the data to cut the decoding at, and event budgets per call.
    fn pieces() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
        (
            prop::collection::vec(0usize..4000, 0..6),
            prop::collection::vec(prop_oneof![1usize..4, 1usize..300], 0..4),
        )
    }

    /// The record bytes of `events` without the END record.
    fn records(events: &[Event]) -> Vec<u8> {
        let mut bytes = encode_all(events);
        bytes.truncate(bytes.len() - END_LEN);
        bytes
    }

    /// `bytes` with each `(at, x)` of `flips` xored into the byte at fraction `at` of its
    /// length, then cut to fraction `cut` of it.
    fn corrupted(mut bytes: Vec<u8>, flips: &[(f64, u8)], cut: f64) -> Vec<u8> {
        for &(at, x) in flips {
            let i = (at * bytes.len() as f64) as usize;
            if let Some(b) = bytes.get_mut(i) {
                *b ^= x;
            }
        }
        bytes.truncate((cut * bytes.len() as f64) as usize);
        bytes
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

        #[test]
        fn decoder_matches_the_reference_on_encoded_streams(
            events in prop_oneof![walking_events(), prop::collection::vec(any_event(), 0..300)],
            (cuts, maxes) in pieces(),
        ) {
            let bytes = encode_all(&events);
            let crc = crc32fast::hash(&bytes[..bytes.len() - END_LEN]);
            let want = (events.clone(), Ending::End(Trailer { count: events.len() as u64, crc }, bytes.len()));
            prop_assert_eq!(&reference_decode(&bytes), &want);
            prop_assert_eq!(&decode_in_pieces(&bytes, &cuts, &maxes), &want);
            // With no END record, the data simply runs out.
            let plain = records(&events);
            let (got, ending) = decode_in_pieces(&plain, &cuts, &maxes);
            prop_assert_eq!(&got, &events);
            prop_assert_eq!(ending, Ending::Out(plain.len()));
        }

        #[test]
        fn decoder_matches_the_reference_on_corrupt_and_cut_streams(
            events in prop_oneof![walking_events(), prop::collection::vec(any_event(), 1..300)],
            flips in prop::collection::vec((0.0f64..1.0, 1u8..=255), 0..4),
            cut in prop_oneof![Just(1.0f64), 0.0f64..1.0],
            (cuts, maxes) in pieces(),
        ) {
            let bytes = corrupted(records(&events), &flips, cut);
            prop_assert_eq!(decode_in_pieces(&bytes, &cuts, &maxes), reference_decode(&bytes));
        }

        /// The runs of short records against the reference: whole, in pieces (a cut or an
        /// event budget anywhere in a run), corrupted and cut short.
        #[test]
        fn decoder_matches_the_reference_on_runs(
            events in run_events(),
            flips in prop::collection::vec((0.0f64..1.0, 1u8..=255), 0..3),
            cut in prop_oneof![Just(1.0f64), 0.0f64..1.0],
            (cuts, maxes) in pieces(),
        ) {
            let bytes = encode_all(&events);
            let (got, ending) = decode_in_pieces(&bytes, &cuts, &maxes);
            prop_assert_eq!(&got, &events);
            prop_assert!(matches!(ending, Ending::End(_, end) if end == bytes.len()));
            let bytes = corrupted(records(&events), &flips, cut);
            prop_assert_eq!(decode_in_pieces(&bytes, &cuts, &maxes), reference_decode(&bytes));
        }

        #[test]
        fn decoder_matches_the_reference_on_record_soup(
            bytes in record_soup(),
            (cuts, maxes) in pieces(),
        ) {
            prop_assert_eq!(decode_in_pieces(&bytes, &cuts, &maxes), reference_decode(&bytes));
        }
    }

    /// Every shipped native trace (user-level, whole-system with physical addresses, modes
    /// and address spaces) decodes to the events the reference decoder reads from its
    /// records, whole and in pieces, and re-encoding those events gives the same records.
    #[test]
    fn shipped_traces_decode_as_the_reference_reads_them() {
        use crate::trace::native::{MAGIC, VERSION_UNCHECKED};
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python/lookaside/data");
        let mut seen = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "lks") {
                continue;
            }
            let file = std::fs::read(&path).unwrap();
            assert_eq!(&file[..8], MAGIC);
            let version = u16::from_le_bytes([file[8], file[9]]);
            let len = u32::from_le_bytes([file[10], file[11], file[12], file[13]]) as usize;
            let at = 14 + len + if version == VERSION_UNCHECKED { 0 } else { 4 };
            let records = zstd::decode_all(&file[at..]).unwrap();
            let want = reference_decode(&records);
            assert!(matches!(want.1, Ending::End(..)), "{}", path.display());
            assert_eq!(
                decode_in_pieces(&records, &[], &[]),
                want,
                "{}",
                path.display()
            );
            let cuts = [records.len() / 3, records.len() / 2 + 1];
            assert_eq!(decode_in_pieces(&records, &cuts, &[1000, 4096]), want);
            assert_eq!(encode_all(&want.0), records, "{}", path.display());
            seen += 1;
        }
        assert!(seen >= 2, "shipped traces found: {seen}");
    }

    /// A native trace file at `path` whose record stream is `records`, whatever they are;
    /// returns the offset of the first record.
    fn native_file(path: &std::path::Path, records: &[u8]) -> u64 {
        use crate::trace::native::{MAGIC, VERSION};
        let json = br#"{"encoding":"lks1","compression":"zstd","checksum":"crc32"}"#;
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&VERSION.to_le_bytes());
        file.extend_from_slice(&(json.len() as u32).to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&file[8..]);
        crc.update(json);
        file.extend_from_slice(json);
        file.extend_from_slice(&crc.finalize().to_le_bytes());
        let records_at = file.len() as u64;
        file.extend_from_slice(&zstd::encode_all(records, 1).unwrap());
        std::fs::write(path, file).unwrap();
        records_at
    }

    /// What the reader must make of a file whose record stream is `records`: the reference's
    /// events, or the one error line (file offsets count the header, then the records).
    fn reader_should_give(
        path: &str,
        records: &[u8],
        records_at: u64,
    ) -> Result<Vec<Event>, String> {
        let (events, ending, last_end) = reference_decode_ends(records);
        let at = |pos: usize| records_at + pos as u64;
        let n = events.len() as u64;
        let ending = match ending {
            // An END record cut short, its trailer read from the zero padding.
            Ending::End(_, pos) if pos > records.len() => Ending::Out(pos),
            ending => ending,
        };
        match ending {
            Ending::Bad(pos, m) => Err(format!("{path}: byte offset {}: record: {m}", at(pos))),
            // The count is of the events in the batches handed over before the one that
            // found the end (each `BATCH` events): a full batch is handed over once data
            // (a whole record or part of one) follows its last event's record.
            Ending::Out(_) => Err(format!(
                "{path}: byte offset {}: stream: truncated: the records end without an END \
                 record after {} events",
                at(records.len()),
                if n.is_multiple_of(BATCH as u64) && last_end < records.len() {
                    n
                } else {
                    n.saturating_sub(1) / BATCH as u64 * BATCH as u64
                }
            )),
            Ending::End(t, pos) => {
                let end_at = at(pos - END_LEN);
                if t.count != n {
                    Err(format!(
                        "{path}: byte offset {end_at}: trailer: the trailer counts {} events \
                         but {n} were read",
                        t.count
                    ))
                } else if t.crc != crc32fast::hash(&records[..pos - END_LEN]) {
                    Err(format!(
                        "{path}: byte offset {end_at}: trailer: CRC mismatch: the records read \
                         differ from those written"
                    ))
                } else if pos < records.len() {
                    Err(format!(
                        "{path}: byte offset {}: stream: data after the END record",
                        at(pos)
                    ))
                } else {
                    Ok(events)
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Through the reader (zstd, refills of its buffer, the trailer's checks): the events
        /// of good streams, and for bad ones the same error at the same file offset, also
        /// where the bad part straddles a refill (after a prefix of about a buffer's length).
        #[test]
        fn reader_reports_what_the_reference_finds(
            events in prop_oneof![walking_events(), prop::collection::vec(any_event(), 1..200)],
            prefix in prop_oneof![Just(0usize), (super::super::native::CAP - 64)..(super::super::native::CAP + 8)],
            flips in prop::collection::vec((0.0f64..1.0, 1u8..=255), 0..3),
            cut in prop_oneof![Just(1.0f64), 0.0f64..1.0],
            tail in prop::collection::vec(any::<u8>(), 0..3),
        ) {
            // The prefix: fetches at 0 (two bytes each) and, if odd, a mode record.
            let mut plain = [0x10, 0x00].repeat(prefix / 2);
            if prefix % 2 == 1 {
                plain.push(0x0b);
            }
            let mut all = events.clone();
            all.splice(0..0, std::iter::repeat_n(Event::reference(Kind::Fetch, 0, 4), prefix / 2));
            let mut bytes = plain;
            let body = encode_all(&events);
            bytes.extend_from_slice(&body[..body.len() - END_LEN]);
            let crc = crc32fast::hash(&bytes);
            Encoder::default().end(&Trailer { count: all.len() as u64, crc }, &mut bytes);
            let clean = bytes.len();
            for (at, x) in flips {
                let i = prefix + (at * (clean - prefix) as f64) as usize;
                if let Some(b) = bytes.get_mut(i) {
                    *b ^= x;
                }
            }
            bytes.truncate(prefix + (cut * (clean - prefix) as f64) as usize);
            bytes.extend_from_slice(&tail);
            let dir = crate::trace::tests::scratch("codec-reader");
            let path = dir.join("t.lks");
            let records_at = native_file(&path, &bytes);
            let got = crate::trace::tests::read_all(&path, Some(crate::trace::Format::Native))
                .map_err(|e| e.to_string());
            let want = reader_should_give(&path.display().to_string(), &bytes, records_at);
            if let (Ok(got), Ok(want)) = (&got, &want) {
                prop_assert_eq!(want, &all);
                prop_assert_eq!(got, want);
            } else {
                prop_assert_eq!(got.err(), want.err());
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn reference_decoder_reads_the_documented_layout() {
        // Written out by hand from the module doc: a 4-byte fetch at 0 + 16; a kernel-mode
        // 8-byte load of address space 5 in slot 1 at 0 - 2 (wrapping), with a physical
        // address 0 + 64; a flush with its flags; END.
        let bytes = [
            0x10,
            0x20, // fetch, size 4, delta +16
            0x07,
            0x05, // ASID 5
            0x0f, // kernel
            0x1 | 3 << 2 | 1 << 5 | 0x80,
            0x03,
            0x80,
            0x01, // load 8, slot 1, -2, paddr +64
            0x03 | 5 << 2,
            0x05,
            0x80,
            0x20,
            0x07, // TLB flush, kernel, size: addr 0x1000, size 7
            0x03,
            3,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0xaa,
            0xbb,
            0xcc,
            0xdd, // END, count 3, CRC
        ];
        let (events, ending) = reference_decode(&bytes);
        assert_eq!(
            events,
            vec![
                Event::reference(Kind::Fetch, 0x10, 4),
                Event::reference(Kind::Load, u64::MAX - 1, 8)
                    .with_paddr(0x40)
                    .with_asid(5)
                    .with_mode(Mode::Kernel),
                Event {
                    size: 7,
                    ..Event::control(Kind::TlbFlush, 0x1000, 5).with_mode(Mode::Kernel)
                },
            ]
        );
        let t = Trailer {
            count: 3,
            crc: 0xddcc_bbaa,
        };
        assert_eq!(ending, Ending::End(t, bytes.len()));
        assert_eq!(decode_in_pieces(&bytes, &[3, 9], &[1]), (events, ending));
    }

    /// A sink that only counts.
    struct Count(u64);

    impl EventSink for Count {
        #[inline(always)]
        fn event(&mut self, _: &Event) {
            self.0 += 1;
        }
    }

    /// CPU seconds of this thread, from the scheduler (ns).
    fn thread_cpu_seconds() -> f64 {
        let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
        let ns = stat
            .split_whitespace()
            .next()
            .and_then(|t| t.parse::<u64>().ok());
        ns.map_or(f64::NAN, |ns| ns as f64 / 1e9)
    }

    /// Decoding alone, from records in memory (no zstd, no CRC, no copies) into a sink that
    /// only counts: the demo trace, the miss-heavy `workload:segments` stream, and a stream
    /// whose references all carry a physical address (`workload:multiuser`). Prints the
    /// rates per CPU second; asserts only that every event was decoded.
    ///
    /// `cargo test --release -p lookaside --lib codec::tests::decode_rate -- --ignored --nocapture`
    #[test]
    #[ignore = "benchmark: run with --release -- --ignored --nocapture"]
    fn decode_rate() {
        let demo = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../python/lookaside/data/demo.lks"
        );
        let workload = |spec| crate::workload::from_spec(spec).unwrap().unwrap();
        let sources: [(&str, Box<dyn crate::trace::TraceSource>); 3] = [
            ("demo.lks", crate::trace::open(demo.as_ref(), None).unwrap()),
            ("workload:segments", workload("workload:segments")),
            // Every reference with a physical address, as whole-system traces have.
            (
                "multiuser per-process",
                workload("workload:multiuser,addresses=per-process"),
            ),
        ];
        println!();
        for (name, mut source) in sources {
            let (mut events, mut batch) = (Vec::new(), Vec::new());
            while source.next_batch(&mut batch).unwrap() {
                events.extend_from_slice(&batch);
            }
            let mut bytes = records(&events);
            let len = bytes.len();
            bytes.resize(len + WINDOW, 0);
            let rounds = (50_000_000 / events.len()).max(2);
            // Five trials, each `rounds` decodings; the median rate (and the best).
            let mut rates: Vec<f64> = (0..5)
                .map(|_| {
                    let mut count = Count(0);
                    let t = thread_cpu_seconds();
                    for _ in 0..rounds {
                        let mut st = DecodeState::default();
                        let (pos, ..) =
                            decode(&bytes, 0, len, &mut st, usize::MAX, &mut count).unwrap();
                        assert_eq!(pos, len);
                    }
                    let secs = thread_cpu_seconds() - t;
                    assert_eq!(count.0, (events.len() * rounds) as u64);
                    count.0 as f64 / secs / 1e6
                })
                .collect();
            rates.sort_by(f64::total_cmp);
            println!(
                "{name:>22}: {} events × {rounds}, {:.2} bytes/event: {:.1} M events/s decoded \
                 (median of 5; best {:.1})",
                events.len(),
                len as f64 / events.len() as f64,
                rates[2],
                rates[4]
            );
        }
    }
}
