//! DineroIV extended din traces (`dineroIV -informat D`, "xdin"): `type address size` lines.
//!
//! Following DineroIV's `tracein_xdin` (xdinfmt.c): leading blanks are skipped; the access
//! type is one letter (either case) followed by a blank; the address and the size are both
//! **hex**, each with an optional `0x`; the rest of the line is ignored (comments). Types:
//!
//! | type | DineroIV | Lookaside |
//! |---|---|---|
//! | `r` | read | [`Kind::Load`] |
//! | `w` | write | [`Kind::Store`] |
//! | `i` | instruction fetch | [`Kind::Fetch`] |
//! | `m` | miscellaneous (like a read, but never prefetches) | skipped and counted |
//! | `c` | copy back dirty lines, no invalidation (size 0: the whole cache) | skipped and counted |
//! | `v` | invalidate, no copy back (size 0: the whole cache) | [`Kind::TlbFlush`]: everything if the size is 0, else each 4 KiB page of `[address, address + size)` |
//!
//! Why: `m` has no kind of ours (skipping keeps fetch/load/store counts equal to DineroIV's,
//! which reports misc apart, and matches din label 3); a copy-back writes dirty data to memory
//! and leaves translations alone, so it changes nothing a TLB holds; an invalidation is what a
//! TLB flush is. The flushes are in address space 0, like every event of this format. A
//! reference's size must be 1..=0xffff (DineroIV keeps sizes in 16 bits and allows size 0
//! only for `c` and `v`). Blank lines are skipped.
//!
//! Writing keeps loads, stores and fetches with their sizes, writes a flush of everything as
//! `v 0 0` and a flush of one page as `v addr 1`, and drops address spaces, modes, physical
//! addresses and the other control events (counted by
//! [`TraceSink::dropped`](super::TraceSink::dropped)).

use std::path::Path;

use super::din::bad_address;
use super::textio::{
    hex_field, line_end, push_hex, rest_is_blank, shown, LineEncoder, LineError, LineFormat,
    TextReader, TextWriter,
};
use crate::error::Result;
use crate::event::{Event, Kind, FLUSH_ALL, FLUSH_SPACE};
use crate::trace::compress::Input;

/// Granule of the flushes an `v` record with a size expands into.
const FLUSH_PAGE: u64 = 4096;

/// Line syntax of xdin, for [`TextReader`].
#[derive(Debug, Default)]
pub struct XDin {
    skipped: u64,
}

/// An xdin trace being read.
pub type XDinReader = TextReader<XDin>;

/// Reads the xdin trace `input`.
pub fn reader(input: Input) -> XDinReader {
    TextReader::new(input, XDin::default())
}

impl LineFormat for XDin {
    fn parse(
        &mut self,
        text: &[u8],
        out: &mut Vec<Event>,
        limit: usize,
    ) -> Result<(usize, u64), LineError> {
        let mut i = 0;
        let mut lines = 0u64;
        while i < text.len() && out.len() < limit {
            while text[i] == b' ' || text[i] == b'\t' {
                i += 1;
            }
            // Lower-case the letter; `text[i + 1]` exists unless `text[i]` is the final newline.
            let t = text[i] | 0x20;
            if !matches!(t, b'r' | b'w' | b'i' | b'm' | b'c' | b'v')
                || text[i + 1] != b' ' && text[i + 1] != b'\t'
            {
                if rest_is_blank(text, i) {
                    i = line_end(text, i) + 1;
                    lines += 1;
                    continue;
                }
                return Err(bad_type(lines, text, i));
            }
            i += 2;
            while text[i] == b' ' || text[i] == b'\t' {
                i += 1;
            }
            let mut overflow = false;
            let (addr, j, digits) = hex_field(text, i, &mut overflow);
            i = j;
            if digits == 0 || overflow || text[i] != b' ' && text[i] != b'\t' {
                return Err(
                    if digits > 0 && !overflow && matches!(text[i], b'\n' | b'\r') {
                        LineError::new(lines, "size", "missing size")
                    } else {
                        bad_address(lines, text, i, digits, overflow)
                    },
                );
            }
            while text[i] == b' ' || text[i] == b'\t' {
                i += 1;
            }
            let (size, j, sdigits) = hex_field(text, i, &mut overflow);
            i = j;
            let c = text[i];
            if sdigits == 0
                || overflow
                || size > 0xffff
                || !matches!(c, b'\n' | b' ' | b'\t' | b'\r')
            {
                return Err(bad_size(lines, text, i, sdigits, size, overflow));
            }
            if c != b'\n' {
                i = line_end(text, i);
            }
            i += 1;
            lines += 1;
            let kind = match t {
                b'r' => Kind::Load,
                b'w' => Kind::Store,
                b'i' => Kind::Fetch,
                b'v' => {
                    invalidate(addr, size, out);
                    continue;
                }
                _ => {
                    self.skipped += 1;
                    continue;
                }
            };
            if size == 0 {
                return Err(LineError::new(
                    lines - 1,
                    "size",
                    "size 0 is only allowed for c and v records",
                ));
            }
            out.push(Event::reference(kind, addr, size as u16));
        }
        Ok((i, lines))
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }
}

/// The flushes of a `v` record: everything for size 0, else each page the range touches.
fn invalidate(addr: u64, size: u64, out: &mut Vec<Event>) {
    if size == 0 {
        out.push(Event::control(Kind::TlbFlush, FLUSH_ALL, 0));
        return;
    }
    let last = addr.saturating_add(size - 1) & !(FLUSH_PAGE - 1);
    let mut a = addr;
    loop {
        out.push(Event::control(Kind::TlbFlush, a, 0));
        let next = (a & !(FLUSH_PAGE - 1)).wrapping_add(FLUSH_PAGE);
        if a & !(FLUSH_PAGE - 1) >= last || next == 0 {
            break;
        }
        a = next;
    }
}

#[cold]
fn bad_type(line: u64, text: &[u8], i: usize) -> LineError {
    let t = text[i] | 0x20;
    let message = if matches!(t, b'r' | b'w' | b'i' | b'm' | b'c' | b'v') {
        if matches!(text[i + 1], b'\n' | b'\r') {
            "missing address".to_string()
        } else {
            format!(
                "expected a blank after the access type, found {}",
                shown(text[i + 1])
            )
        }
    } else {
        format!(
            "unknown access type {} (expected r, w, i, m, c or v)",
            shown(text[i])
        )
    };
    LineError::new(line, "kind", message)
}

#[cold]
fn bad_size(
    line: u64,
    text: &[u8],
    i: usize,
    digits: usize,
    size: u64,
    overflow: bool,
) -> LineError {
    let message = if digits == 0 {
        format!("expected a hex size, found {}", shown(text[i]))
    } else if overflow || size > 0xffff {
        "size is larger than 0xffff".to_string()
    } else {
        format!("unexpected {} in the size", shown(text[i]))
    };
    LineError::new(line, "size", message)
}

/// xdin's text for events.
#[derive(Debug, Default)]
pub struct XDinEncoder;

/// An xdin trace being written.
pub type XDinWriter = TextWriter<XDinEncoder>;

/// Creates an xdin trace at `path` (compressed if the extension says so).
pub fn writer(path: &Path) -> Result<XDinWriter> {
    TextWriter::create(path, XDinEncoder)
}

impl LineEncoder for XDinEncoder {
    fn encode(&mut self, events: &[Event], buf: &mut Vec<u8>) -> u64 {
        let mut dropped = 0;
        for e in events {
            let (tag, size): (&[u8], u64) = match e.kind {
                Kind::Load => (b"r ", e.size as u64),
                Kind::Store => (b"w ", e.size as u64),
                Kind::Fetch => (b"i ", e.size as u64),
                Kind::TlbFlush if e.addr == FLUSH_ALL => {
                    buf.extend_from_slice(b"v 0 0\n");
                    continue;
                }
                // No label says "one address space's entries": left out and counted, as
                // every event the format cannot carry.
                Kind::TlbFlush if e.addr == FLUSH_SPACE => {
                    dropped += 1;
                    continue;
                }
                Kind::TlbFlush => (b"v ", 1),
                _ => {
                    dropped += 1;
                    continue;
                }
            };
            buf.extend_from_slice(tag);
            push_hex(buf, e.addr, 0);
            buf.push(b' ');
            push_hex(buf, size, 0);
            buf.push(b'\n');
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Vec<Event>, u64), LineError> {
        crate::trace::textio::parse_all::<XDin>(text)
    }

    #[test]
    fn reads_every_access_type() {
        let (evs, skipped) = parse(
            "r 1000 4\nW 0x2000 0x10 comment\n  i\t400 2\nm 10 4\nc 0 0\n\nv 0 0\nv 1ffe 4\r\n",
        )
        .unwrap();
        let r = Event::reference;
        let f = |a| Event::control(Kind::TlbFlush, a, 0);
        assert_eq!(
            evs,
            vec![
                r(Kind::Load, 0x1000, 4),
                r(Kind::Store, 0x2000, 16),
                r(Kind::Fetch, 0x400, 2),
                f(FLUSH_ALL),
                f(0x1ffe),
                f(0x2000),
            ]
        );
        assert_eq!(skipped, 2);
    }

    #[test]
    fn invalidations_cover_every_page_without_overflowing() {
        let mut out = Vec::new();
        invalidate(u64::MAX - 2, 0xffff, &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
        invalidate(0x3000, 0x1000, &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
        invalidate(0x3fff, 2, &mut out);
        assert_eq!(
            out.iter().map(|e| e.addr).collect::<Vec<_>>(),
            vec![0x3fff, 0x4000]
        );
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let err = |t: &str| {
            let e = parse(t).unwrap_err();
            (e.line, e.field, e.message)
        };
        assert_eq!(
            err("r 10 4\nx 10 4\n"),
            (
                1,
                "kind",
                "unknown access type 'x' (expected r, w, i, m, c or v)".into()
            )
        );
        assert_eq!(
            err("rw 10 4").2,
            "expected a blank after the access type, found 'w'"
        );
        assert_eq!(err("r 10"), (0, "size", "missing size".into()));
        assert_eq!(err("r 10 4g").2, "unexpected 'g' in the size");
        assert_eq!(err("r 10 10000").2, "size is larger than 0xffff");
        assert_eq!(
            err("r 10 0"),
            (
                0,
                "size",
                "size 0 is only allowed for c and v records".into()
            )
        );
        assert_eq!(
            err("r 1q 4"),
            (0, "address", "unexpected 'q' in the address".into())
        );
        assert_eq!(err("r").2, "missing address");
    }

    #[test]
    fn writer_keeps_what_xdin_can_say() {
        let r = Event::reference;
        let mut buf = Vec::new();
        let dropped = XDinEncoder.encode(
            &[
                r(Kind::Fetch, 0x400d7d4, 3),
                r(Kind::Store, 0x10, 0xffff),
                Event::control(Kind::TlbFlush, FLUSH_ALL, 3),
                Event::control(Kind::TlbFlush, 0x5000, 3),
                Event::control(Kind::Marker, 0, 3),
            ],
            &mut buf,
        );
        assert_eq!(dropped, 1);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "i 400d7d4 3\nw 10 ffff\nv 0 0\nv 5000 1\n"
        );
    }
}
