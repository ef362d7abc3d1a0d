//! Valgrind lackey traces (`valgrind --tool=lackey --trace-mem=yes`): the easiest way to get
//! a real user-level trace of any Linux program.
//!
//! Lackey prints one line per access:
//!
//! ```text
//! I  0400d7d4,8     instruction fetch of 8 bytes
//!  L 04222cac,8     load
//!  S 04222cac,8     store
//!  M 0421ab10,4     modify: a load then a store of the same bytes
//! ```
//!
//! with the address in hex and the size in decimal. Reading:
//! - `M` becomes two events, a [`Kind::Load`] then a [`Kind::Store`] of the same address and
//!   size (what the instruction did, in order).
//! - Valgrind's own lines (`==pid== …` and `--pid-- …`) and blank lines are skipped;
//!   `SB addr` lines (from `--trace-superblocks=yes`) are skipped and counted in
//!   [`TraceSource::skipped`](super::TraceSource::skipped). Anything else is an error naming
//!   the line and the field (`kind`, `address`, `size`).
//! - Every event is user mode, address space 0, no physical address: that is all lackey
//!   knows. A size must be 1..=65535. Accesses that straddle a page are left whole; the machine
//!   splits them.
//!
//! Writing is lossy where lackey cannot say something: address space, mode and physical
//! address are dropped, and control events are dropped (counted by
//! [`TraceSink::dropped`](super::TraceSink::dropped)). A load immediately followed by a store
//! of the same address and size is written back as one `M` line, so a lackey trace converts
//! to lackey unchanged (apart from the `==` lines).

use std::path::Path;

use super::textio::{
    dec_field, hex_field, line_end, push_dec, push_hex, rest_is_blank, shown, LineEncoder,
    LineError, LineFormat, TextReader, TextWriter,
};
use crate::error::Result;
use crate::event::{Event, Kind};
use crate::trace::compress::Input;

/// Line syntax of lackey, for [`TextReader`].
#[derive(Debug, Default)]
pub struct Lackey {
    skipped: u64,
}

/// A lackey trace being read.
pub type LackeyReader = TextReader<Lackey>;

/// Reads the lackey trace `input`.
pub fn reader(input: Input) -> LackeyReader {
    TextReader::new(input, Lackey::default())
}

/// What the first one or two bytes of a line say it is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rec {
    Fetch,
    Load,
    Store,
    Modify,
}

impl LineFormat for Lackey {
    fn parse(
        &mut self,
        text: &[u8],
        out: &mut Vec<Event>,
        limit: usize,
    ) -> Result<(usize, u64), LineError> {
        let mut i = 0;
        let mut lines = 0u64;
        while i < text.len() && out.len() < limit {
            // The common shapes first: "I  addr,size" and " X addr,size".
            // (`text[i + 1]` exists: `text[i]` is a space, not the final newline.)
            let rec = match text[i] {
                b'I' => Some(Rec::Fetch),
                b' ' => match text[i + 1] {
                    b'L' => Some(Rec::Load),
                    b'S' => Some(Rec::Store),
                    b'M' => Some(Rec::Modify),
                    _ => None,
                },
                _ => None,
            };
            let rec = match rec {
                Some(Rec::Fetch) => {
                    i += 1;
                    Rec::Fetch
                }
                Some(rec) => {
                    i += 2;
                    rec
                }
                None => {
                    i = self.odd_line(text, i, lines)?;
                    lines += 1;
                    continue;
                }
            };
            if text[i] != b' ' {
                return Err(LineError::new(
                    lines,
                    "kind",
                    format!(
                        "expected a space after the record kind, found {}",
                        shown(text[i])
                    ),
                ));
            }
            while text[i] == b' ' {
                i += 1;
            }
            let mut overflow = false;
            let (addr, j, digits) = hex_field(text, i, &mut overflow);
            if digits == 0 || overflow || text[j] != b',' {
                return Err(bad_address(lines, text, j, digits, overflow));
            }
            let (size, k, sdigits) = dec_field(text, j + 1);
            if sdigits == 0 || size == 0 || size > u16::MAX as u64 {
                return Err(bad_size(lines, text, k, sdigits, size));
            }
            i = k;
            if text[i] != b'\n' {
                if !rest_is_blank(text, i) {
                    return Err(LineError::new(
                        lines,
                        "size",
                        format!("unexpected {} after the size", shown(text[i])),
                    ));
                }
                i = line_end(text, i);
            }
            i += 1;
            lines += 1;
            let size = size as u16;
            match rec {
                Rec::Fetch => out.push(Event::reference(Kind::Fetch, addr, size)),
                Rec::Load => out.push(Event::reference(Kind::Load, addr, size)),
                Rec::Store => out.push(Event::reference(Kind::Store, addr, size)),
                Rec::Modify => {
                    out.push(Event::reference(Kind::Load, addr, size));
                    out.push(Event::reference(Kind::Store, addr, size));
                }
            }
        }
        Ok((i, lines))
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }
}

impl Lackey {
    /// A line that is not a plain access: valgrind chatter, a blank line, a superblock line,
    /// or an error. Returns the index after the line.
    #[cold]
    fn odd_line(&mut self, text: &[u8], i: usize, line: u64) -> Result<usize, LineError> {
        let end = line_end(text, i);
        let l = &text[i..end];
        let chatter = |c: u8| l.len() >= 2 && l[0] == c && l[1] == c;
        if chatter(b'=') || chatter(b'-') || rest_is_blank(text, i) {
            return Ok(end + 1);
        }
        if l.starts_with(b"SB ") {
            self.skipped += 1;
            return Ok(end + 1);
        }
        // Be lenient about the spacing before the kind, strict about the kind itself.
        let t = l.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(0);
        let message = match l[t] {
            b'I' | b'L' | b'S' | b'M' => {
                format!("record kind '{}' in an unexpected column", l[t] as char)
            }
            b => format!(
                "expected a lackey record (\"I  addr,size\", \" L\", \" S\" or \" M\"), found {}",
                shown(b)
            ),
        };
        Err(LineError::new(line, "kind", message))
    }
}

#[cold]
fn bad_address(line: u64, text: &[u8], j: usize, digits: usize, overflow: bool) -> LineError {
    let message = if digits == 0 {
        format!("expected a hex address, found {}", shown(text[j]))
    } else if overflow {
        "address does not fit in 64 bits".to_string()
    } else {
        format!("expected ',' after the address, found {}", shown(text[j]))
    };
    LineError::new(line, "address", message)
}

#[cold]
fn bad_size(line: u64, text: &[u8], k: usize, digits: usize, size: u64) -> LineError {
    let message = if digits == 0 {
        format!("expected a decimal size, found {}", shown(text[k]))
    } else if size == 0 {
        "size 0 (an access touches at least one byte)".to_string()
    } else if size == u64::MAX {
        "size does not fit in 64 bits (at most 65535)".to_string()
    } else {
        format!("size {size} is larger than 65535")
    };
    LineError::new(line, "size", message)
}

/// Lackey's text for events; holds back a load in case a store of the same bytes follows
/// (the pair is written as one `M` line).
#[derive(Debug, Default)]
pub struct LackeyEncoder {
    pending: Option<Event>,
}

/// A lackey trace being written.
pub type LackeyWriter = TextWriter<LackeyEncoder>;

/// Creates a lackey trace at `path` (compressed if the extension says so).
pub fn writer(path: &Path) -> Result<LackeyWriter> {
    TextWriter::create(path, LackeyEncoder::default())
}

fn line(buf: &mut Vec<u8>, tag: &[u8; 3], e: &Event) {
    buf.extend_from_slice(tag);
    push_hex(buf, e.addr, 8);
    buf.push(b',');
    push_dec(buf, e.size as u64);
    buf.push(b'\n');
}

impl LineEncoder for LackeyEncoder {
    fn encode(&mut self, events: &[Event], buf: &mut Vec<u8>) -> u64 {
        let mut dropped = 0;
        for e in events {
            if let Some(p) = self.pending.take() {
                if e.kind == Kind::Store && e.addr == p.addr && e.size == p.size {
                    line(buf, b" M ", e);
                    continue;
                }
                line(buf, b" L ", &p);
            }
            match e.kind {
                Kind::Fetch => line(buf, b"I  ", e),
                Kind::Load => self.pending = Some(*e),
                Kind::Store => line(buf, b" S ", e),
                _ => dropped += 1,
            }
        }
        dropped
    }

    fn finish(&mut self, buf: &mut Vec<u8>) {
        if let Some(p) = self.pending.take() {
            line(buf, b" L ", &p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Mode;

    fn parse(text: &str) -> Result<Vec<Event>, LineError> {
        crate::trace::textio::parse_all::<Lackey>(text).map(|(events, _)| events)
    }

    #[test]
    fn reads_every_record_kind() {
        let evs = parse(
            "==1234== Lackey, an example Valgrind tool\n\
             I  0400d7d4,8\n \
             L 04222cac,8\n \
             S 1ffefffd48,16\n \
             M 0421ab10,4\n\
             \n\
             --1234-- a warning\n\
             I  ffffffffffffffff,65535\r\n",
        )
        .unwrap();
        let r = Event::reference;
        assert_eq!(
            evs,
            vec![
                r(Kind::Fetch, 0x400d7d4, 8),
                r(Kind::Load, 0x4222cac, 8),
                r(Kind::Store, 0x1ffefffd48, 16),
                r(Kind::Load, 0x421ab10, 4),
                r(Kind::Store, 0x421ab10, 4),
                r(Kind::Fetch, u64::MAX, 65535),
            ]
        );
        assert!(evs.iter().all(|e| e.mode == Mode::User && e.asid == 0));
    }

    #[test]
    fn superblock_lines_are_skipped_and_counted() {
        let mut l = Lackey::default();
        let mut out = Vec::new();
        l.parse(b"SB 04000000\nI  0400d7d4,3\n", &mut out, 100)
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(l.skipped(), 1);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let err = |t: &str| {
            let e = parse(t).unwrap_err();
            (e.line, e.field, e.message)
        };
        assert_eq!(
            err("I  0400d7d4,8\n X 0400,4\n"),
            (
                1,
                "kind",
                "expected a lackey record (\"I  addr,size\", \" L\", \" S\" or \" M\"), found 'X'"
                    .into()
            )
        );
        assert_eq!(
            err(" L 04zz,4"),
            (
                0,
                "address",
                "expected ',' after the address, found 'z'".into()
            )
        );
        assert_eq!(err(" L ,4").2, "expected a hex address, found ','");
        assert_eq!(
            err(" L 10,"),
            (
                0,
                "size",
                "expected a decimal size, found end of line".into()
            )
        );
        assert_eq!(err(" L 10,65536").2, "size 65536 is larger than 65535");
        assert_eq!(
            err(" L 10,0").2,
            "size 0 (an access touches at least one byte)"
        );
        assert_eq!(err(" L 10,4x").2, "unexpected 'x' after the size");
        assert_eq!(
            err(" L 10000000000000000,4").2,
            "address does not fit in 64 bits"
        );
        assert_eq!(err("IX 10,4").1, "kind");
    }

    #[test]
    fn writer_merges_load_store_pairs_into_modify() {
        let r = Event::reference;
        let mut enc = LackeyEncoder::default();
        let mut buf = Vec::new();
        let evs = [
            r(Kind::Fetch, 0x400d7d4, 3),
            r(Kind::Load, 0x10, 4),
            r(Kind::Store, 0x10, 4),
            r(Kind::Load, 0x20, 4),
            r(Kind::Store, 0x20, 8),
            Event::control(Kind::TlbFlush, 0, 0),
            r(Kind::Load, 0x30, 2),
        ];
        let dropped = enc.encode(&evs[..4], &mut buf) + enc.encode(&evs[4..], &mut buf);
        enc.finish(&mut buf);
        assert_eq!(dropped, 1);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "I  0400d7d4,3\n M 00000010,4\n L 00000020,4\n S 00000020,8\n L 00000030,2\n"
        );
    }
}
