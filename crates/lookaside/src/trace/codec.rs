//! The record encoding of the native format: how each [`Event`] becomes a few bytes, and back.
//!
//! The encoding is designed for the decoder, which runs on every simulation and must keep up
//! with the machine (the target is well over 100 M events per second on one core). Each record
//! is a one-byte header followed by LEB128 varints, at most 25 bytes in all; the decoder reads
//! records out of a buffer that always has [`WINDOW`] readable bytes past the record start
//! (zero padding at the end), so it never checks for the end of the data inside a record.
//!
//! ```text
//! reference (header bits 0-1 = kind 0 fetch, 1 load, 2 store):
//!   header  bit 2     mode (1 = kernel)
//!           bit 3     a physical address follows
//!           bits 4-6  size: code c < 7 means 1 << c bytes (1, 2, 4, …, 64); 7 means a varint follows
//!           bit 7     reserved, 0
//!   varint  zigzag(addr - previous addr of the same stream)       fetches and data are separate
//!   varint  zigzag(paddr - previous paddr of the same stream)     if bit 3   streams, so a run of
//!   varint  size                                                  if code 7  fetches costs ~2 B each
//! other records (header bits 0-1 = 3, op = header >> 2):
//!   op 0    END: u64 event count, u64 check a, u64 check b (little-endian) — the trailer
//!   op 1    ASID: varint asid; the address space of every following event
//!   op 2-7  control event of kind op + 1 (context switch … marker):
//!           flags byte (bit 0 kernel, bit 1 paddr follows, bit 2 size follows; others 0),
//!           varint addr, [varint paddr], [varint size]          all absolute, no deltas
//! ```
//!
//! Deltas wrap around (`wrapping_sub`/`wrapping_add`), so every `u64` round-trips; an absent
//! physical address is [`NO_PADDR`]. The check words are a position-sensitive fold of every
//! decoded field ([`Fold`]), independent of zstd's own checksum of the bytes: they catch a bug
//! or a mismatch in the codec itself, and the count catches a stream cut at a record boundary.

use crate::event::{Event, Kind, Mode, NO_PADDR};

/// Bytes readable from any record start (the longest record is 25 bytes).
pub(crate) const WINDOW: usize = 32;

const OP_END: u8 = 0;
const OP_ASID: u8 = 1;
/// `op = kind - CONTROL_OP_BIAS` for control kinds 3..=8 (ops 2..=7).
const CONTROL_OP_BIAS: u8 = 1;
const CLASS_OTHER: u8 = 3;

const FLAG_KERNEL: u8 = 1;
const FLAG_PADDR: u8 = 2;
const FLAG_SIZE: u8 = 4;

const SIZE_EXPLICIT: u8 = 7;

/// The end-of-stream record's payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Trailer {
    pub count: u64,
    pub check: Fold,
}

/// An order-sensitive checksum of decoded events: a running sum of mixed event words and a
/// running sum of those sums (Fletcher-style), cheap enough to run on every batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Fold {
    pub a: u64,
    pub b: u64,
}

impl Fold {
    #[inline]
    pub fn add(&mut self, events: &[Event]) {
        let (mut a, mut b) = (self.a, self.b);
        for e in events {
            let meta = (e.asid as u64) << 32
                | (e.size as u64) << 16
                | (e.kind as u64) << 8
                | e.mode as u64;
            let x = (e.addr ^ e.paddr.rotate_left(32) ^ meta.rotate_left(17))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
            a = a.wrapping_add(x ^ x >> 29);
            b = b.wrapping_add(a);
        }
        self.a = a;
        self.b = b;
    }
}

#[inline(always)]
fn zigzag(d: u64) -> u64 {
    (d << 1) ^ ((d as i64 >> 63) as u64)
}

#[inline(always)]
fn unzigzag(z: u64) -> u64 {
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

/// Turns events into records, tracking the previous addresses and the current address space.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    prev: [u64; 2],
    prev_paddr: [u64; 2],
    asid: u32,
}

impl Encoder {
    #[inline]
    pub fn encode(&mut self, e: &Event, out: &mut Vec<u8>) {
        if e.asid != self.asid {
            out.push(CLASS_OTHER | OP_ASID << 2);
            put_varint(out, e.asid as u64);
            self.asid = e.asid;
        }
        let mode = matches!(e.mode, Mode::Kernel) as u8;
        let has_paddr = e.paddr != NO_PADDR;
        if !e.kind.is_ref() {
            out.push(CLASS_OTHER | (e.kind as u8 - CONTROL_OP_BIAS) << 2);
            let mut flags = 0;
            if mode != 0 {
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
        let code = match e.size {
            1 => 0,
            2 => 1,
            4 => 2,
            8 => 3,
            16 => 4,
            32 => 5,
            64 => 6,
            _ => SIZE_EXPLICIT,
        };
        let s = (e.kind != Kind::Fetch) as usize;
        out.push(e.kind as u8 | mode << 2 | (has_paddr as u8) << 3 | code << 4);
        put_varint(out, zigzag(e.addr.wrapping_sub(self.prev[s])));
        self.prev[s] = e.addr;
        if has_paddr {
            put_varint(out, zigzag(e.paddr.wrapping_sub(self.prev_paddr[s])));
            self.prev_paddr[s] = e.paddr;
        }
        if code == SIZE_EXPLICIT {
            put_varint(out, e.size as u64);
        }
    }

    /// The END record and trailer.
    pub fn end(&self, trailer: &Trailer, out: &mut Vec<u8>) {
        out.push(CLASS_OTHER | OP_END << 2);
        out.extend_from_slice(&trailer.count.to_le_bytes());
        out.extend_from_slice(&trailer.check.a.to_le_bytes());
        out.extend_from_slice(&trailer.check.b.to_le_bytes());
    }
}

/// Decoder registers: previous addresses per stream and the current address space.
#[derive(Debug, Default)]
pub(crate) struct DecodeState {
    prev: [u64; 2],
    prev_paddr: [u64; 2],
    asid: u32,
}

/// Why [`decode`] returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// `out` is full.
    Full,
    /// Reached `limit`: more bytes are needed.
    Limit,
    /// Read the END record.
    End(Trailer),
}

/// A malformed record: where it starts (index into the buffer) and what is wrong.
#[derive(Debug)]
pub(crate) struct DecodeError {
    pub at: usize,
    pub message: String,
}

/// Reads a varint at `w[i..]`; `None` if it is longer than 10 bytes or exceeds 64 bits.
#[inline(always)]
fn varint(w: &[u8; WINDOW], i: usize) -> Option<(u64, usize)> {
    let b = w[i];
    if b < 0x80 {
        return Some((b as u64, i + 1));
    }
    varint_long(w, i)
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

const REF_KINDS: [Kind; 3] = [Kind::Fetch, Kind::Load, Kind::Store];

/// Decodes records from `buf[pos..]` into `out` while `pos < limit` and `out` holds fewer than
/// `max` events. The caller guarantees `buf.len() >= limit + WINDOW`. Returns the position
/// after the last record decoded; it may pass `limit` (and the real end of the data, if
/// `limit` is it: the caller checks).
pub(crate) fn decode(
    buf: &[u8],
    mut pos: usize,
    limit: usize,
    st: &mut DecodeState,
    out: &mut Vec<Event>,
    max: usize,
) -> Result<(usize, Stop), DecodeError> {
    let bad = |at: usize, message: String| DecodeError { at, message };
    while pos < limit {
        if out.len() >= max {
            return Ok((pos, Stop::Full));
        }
        let Some(w) = buf
            .get(pos..pos + WINDOW)
            .and_then(|s| <&[u8; WINDOW]>::try_from(s).ok())
        else {
            return Err(bad(pos, "internal: record window out of the buffer".into()));
        };
        let h = w[0];
        let k = h & 3;
        if k == CLASS_OTHER {
            match other(w, st)? {
                Other::Event(e, len) => {
                    out.push(e);
                    pos += len;
                }
                Other::Asid(len) => pos += len,
                Other::End(t) => return Ok((pos + 25, Stop::End(t))),
                Other::Bad(message) => return Err(bad(pos, message)),
            }
            continue;
        }
        if h & 0x80 != 0 {
            return Err(bad(
                pos,
                format!("reserved bit set in record header 0x{h:02x}"),
            ));
        }
        let s = (k != 0) as usize;
        let Some((d, mut i)) = varint(w, 1) else {
            return Err(bad(pos, "malformed address varint".into()));
        };
        let addr = st.prev[s].wrapping_add(unzigzag(d));
        st.prev[s] = addr;
        let mut paddr = NO_PADDR;
        if h & 8 != 0 {
            let Some((d, j)) = varint(w, i) else {
                return Err(bad(pos, "malformed physical address varint".into()));
            };
            i = j;
            paddr = st.prev_paddr[s].wrapping_add(unzigzag(d));
            st.prev_paddr[s] = paddr;
        }
        let code = (h >> 4) & 7;
        let size = if code == SIZE_EXPLICIT {
            match varint(w, i) {
                Some((v, j)) if v <= u16::MAX as u64 => {
                    i = j;
                    v as u16
                }
                _ => return Err(bad(pos, "malformed or too large size".into())),
            }
        } else {
            1u16 << code
        };
        out.push(Event {
            addr,
            paddr,
            asid: st.asid,
            size,
            kind: REF_KINDS[k as usize],
            mode: if h & 4 != 0 { Mode::Kernel } else { Mode::User },
        });
        pos += i;
    }
    Ok((pos, Stop::Limit))
}

/// A non-reference record, decoded.
enum Other {
    Event(Event, usize),
    Asid(usize),
    End(Trailer),
    Bad(String),
}

#[cold]
fn other(w: &[u8; WINDOW], st: &mut DecodeState) -> Result<Other, DecodeError> {
    let op = w[0] >> 2;
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&w[i..i + 8]);
        u64::from_le_bytes(b)
    };
    match op {
        OP_END => Ok(Other::End(Trailer {
            count: word(1),
            check: Fold {
                a: word(9),
                b: word(17),
            },
        })),
        OP_ASID => match varint(w, 1) {
            Some((v, i)) if v <= u32::MAX as u64 => {
                st.asid = v as u32;
                Ok(Other::Asid(i))
            }
            _ => Ok(Other::Bad("malformed or too large address-space id".into())),
        },
        _ => {
            let Some(kind) = Kind::from_u8(op + CONTROL_OP_BIAS) else {
                return Ok(Other::Bad(format!("unknown record type 0x{:02x}", w[0])));
            };
            let flags = w[1];
            if flags & !(FLAG_KERNEL | FLAG_PADDR | FLAG_SIZE) != 0 {
                return Ok(Other::Bad(format!(
                    "reserved flag set in control record 0x{flags:02x}"
                )));
            }
            let Some((addr, mut i)) = varint(w, 2) else {
                return Ok(Other::Bad("malformed address varint".into()));
            };
            let mut paddr = NO_PADDR;
            if flags & FLAG_PADDR != 0 {
                let Some((p, j)) = varint(w, i) else {
                    return Ok(Other::Bad("malformed physical address varint".into()));
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
                    _ => return Ok(Other::Bad("malformed or too large size".into())),
                }
            }
            let mode = if flags & FLAG_KERNEL != 0 {
                Mode::Kernel
            } else {
                Mode::User
            };
            Ok(Other::Event(
                Event {
                    addr,
                    paddr,
                    asid: st.asid,
                    size,
                    kind,
                    mode,
                },
                i,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::FLUSH_ALL;

    fn round_trip(events: &[Event]) -> Vec<Event> {
        let mut enc = Encoder::default();
        let mut bytes = Vec::new();
        for e in events {
            enc.encode(e, &mut bytes);
        }
        let mut check = Fold::default();
        check.add(events);
        enc.end(
            &Trailer {
                count: events.len() as u64,
                check,
            },
            &mut bytes,
        );
        let len = bytes.len();
        bytes.resize(len + WINDOW, 0);
        let mut st = DecodeState::default();
        let mut out = Vec::new();
        let (pos, stop) = decode(&bytes, 0, len, &mut st, &mut out, usize::MAX).unwrap();
        assert_eq!(pos, len);
        let mut got = Fold::default();
        got.add(&out);
        assert_eq!(
            stop,
            Stop::End(Trailer {
                count: out.len() as u64,
                check: got
            })
        );
        out
    }

    #[test]
    fn zigzag_round_trips_extremes() {
        for d in [0, 1, u64::MAX, i64::MAX as u64, i64::MIN as u64, 12345] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!(zigzag(u64::MAX), 1, "-1 is small");
    }

    #[test]
    fn every_field_round_trips() {
        let r = Event::reference;
        let events = vec![
            r(Kind::Fetch, 0x400000, 4),
            r(Kind::Fetch, 0x400004, 3),
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
            r(Kind::Fetch, 0, 64),
        ];
        assert_eq!(round_trip(&events), events);
    }

    #[test]
    fn sequential_fetches_cost_two_bytes() {
        let events: Vec<Event> = (0..1000u64)
            .map(|i| Event::reference(Kind::Fetch, 0x400000 + 4 * i, 4))
            .collect();
        let mut enc = Encoder::default();
        let mut bytes = Vec::new();
        for e in &events[1..] {
            enc.encode(e, &mut bytes);
        }
        let mut first = Vec::new();
        enc.encode(&events[0], &mut first);
        assert!(bytes.len() <= 2 * 999 + 8, "{} bytes", bytes.len());
    }

    #[test]
    fn malformed_records_are_errors() {
        let run = |bytes: &[u8]| {
            let mut b = bytes.to_vec();
            let len = b.len();
            b.resize(len + WINDOW, 0);
            let mut out = Vec::new();
            decode(&b, 0, len, &mut DecodeState::default(), &mut out, 100).map(|(_, s)| s)
        };
        assert_eq!(
            run(&[0x80, 0]).unwrap_err().message,
            "reserved bit set in record header 0x80"
        );
        assert_eq!(
            run(&[0xff]).unwrap_err().message,
            "unknown record type 0xff"
        );
        assert_eq!(
            run(&[0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f])
                .unwrap_err()
                .message,
            "malformed address varint"
        );
        assert_eq!(
            run(&[0x07, 0x80, 0x80, 0x80, 0x80, 0x10])
                .unwrap_err()
                .message,
            "malformed or too large address-space id"
        );
        assert_eq!(
            run(&[0x0b, 0x08, 0]).unwrap_err().message,
            "reserved flag set in control record 0x08"
        );
        assert_eq!(
            run(&[0x70, 0, 0x80, 0x80, 0x04]).unwrap_err().message,
            "malformed or too large size"
        );
    }
}
