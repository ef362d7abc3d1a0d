//! DineroIII/IV "din" traces (`dineroIV -informat d`): one `label address` pair per line.
//!
//! The classic cache-simulator format, still written by many tracing tools. Following
//! DineroIV's `tracein_din` (dinfmt.c): leading blanks are skipped, the label and the address
//! are hex (an optional `0x` is accepted), and whatever follows the address on the line is
//! ignored (it may be a comment). Labels:
//!
//! | label | DineroIII manual | DineroIV code | Lookaside |
//! |---|---|---|---|
//! | 0 | read data | `D4XREAD` | [`Kind::Load`] |
//! | 1 | write data | `D4XWRITE` | [`Kind::Store`] |
//! | 2 | instruction fetch | `D4XINSTRN` | [`Kind::Fetch`] |
//! | 3 | escape record, treated as unknown access type | `D4XMISC` (a read that never prefetches, counted apart) | skipped and counted |
//! | 4 | escape record, causes a cache flush | `D4XCOPYB` (copy back, no invalidate) | [`Kind::TlbFlush`] of everything |
//! | 5 | — | `D4XINVAL` (invalidate the block) | [`Kind::TlbFlush`] of the page holding the address |
//! | other | — | undefined | error (field `label`) |
//!
//! Why: label 3 has no kind of ours to go to (it is neither a fetch nor a load DineroIV would
//! count as one), so it is dropped but counted ([`TraceSource::skipped`](super::TraceSource::skipped)),
//! keeping fetch/load/store counts equal to DineroIV's. Label 4 is a flush in the manual; a
//! translation structure has nothing to copy back, so the flush it stands for is a flush of
//! every translation (`FLUSH_ALL`, address space 0). Label 5 is DineroIV's invalidation of one
//! block, which for a TLB is the invalidation of one page.
//!
//! din has no size: every reference is 4 bytes, DineroIV's size for din. Unlike DineroIV, the
//! address is kept exact (DineroIV rounds it down to a multiple of 4 because its din is
//! word-oriented); a 4-byte access near a page end therefore straddles into the next page, as
//! the real access would. Events are user mode, address space 0, with no physical address.
//! Blank lines are skipped (DineroIV rejects them).
//!
//! Writing keeps only what din can say: loads, stores and fetches (`0`/`1`/`2` and the
//! address), a flush of everything (`4 0`) and of one page (`5 addr`). Sizes, address spaces,
//! modes and physical addresses are dropped, and the other control events are dropped and
//! counted in [`TraceSink::dropped`](super::TraceSink::dropped).

use std::path::Path;

use super::textio::{
    hex_field, line_end, push_hex, rest_is_blank, shown, LineEncoder, LineError, LineFormat,
    TextReader, TextWriter, HEX, NOT_HEX,
};
use crate::error::Result;
use crate::event::{Event, Kind, FLUSH_ALL, FLUSH_SPACE};
use crate::trace::compress::Input;

/// Size of every din reference (DineroIV's `r.size = 4`).
pub const DIN_SIZE: u16 = 4;

/// Line syntax of din, for [`TextReader`].
#[derive(Debug, Default)]
pub struct Din {
    skipped: u64,
}

/// A din trace being read.
pub type DinReader = TextReader<Din>;

/// Reads the din trace `input`.
pub fn reader(input: Input) -> DinReader {
    TextReader::new(input, Din::default())
}

impl LineFormat for Din {
    fn parse(
        &mut self,
        text: &[u8],
        out: &mut Vec<Event>,
        limit: usize,
    ) -> Result<(usize, u64), LineError> {
        let mut i = 0;
        let mut lines = 0u64;
        while i < text.len() && out.len() < limit {
            // The common line, `L hex\n` (a one-digit label of a reference, one space, 1 to 16
            // digits without `0x`, the newline), read at once; any other goes the long way.
            if let Some((kind, addr, next)) = plain_line(text, i) {
                out.push(Event::reference(kind, addr, DIN_SIZE));
                i = next;
                lines += 1;
                continue;
            }
            while text[i] == b' ' || text[i] == b'\t' {
                i += 1;
            }
            let mut overflow = false;
            let (label, j, ldigits) = hex_field(text, i, &mut overflow);
            if ldigits == 0 || text[j] != b' ' && text[j] != b'\t' {
                if rest_is_blank(text, i) {
                    i = line_end(text, i) + 1;
                    lines += 1;
                    continue;
                }
                return Err(bad_label(lines, text, j, ldigits));
            }
            let label = if overflow { u64::MAX } else { label };
            i = j;
            while text[i] == b' ' || text[i] == b'\t' {
                i += 1;
            }
            let mut overflow = false;
            let (addr, j, digits) = hex_field(text, i, &mut overflow);
            i = j;
            let c = text[i];
            if digits == 0 || overflow || c != b'\n' && !matches!(c, b' ' | b'\t' | b'\r') {
                return Err(bad_address(lines, text, i, digits, overflow));
            }
            if c != b'\n' {
                i = line_end(text, i);
            }
            i += 1;
            lines += 1;
            match label {
                0 => out.push(Event::reference(Kind::Load, addr, DIN_SIZE)),
                1 => out.push(Event::reference(Kind::Store, addr, DIN_SIZE)),
                2 => out.push(Event::reference(Kind::Fetch, addr, DIN_SIZE)),
                3 => self.skipped += 1,
                4 => out.push(Event::control(Kind::TlbFlush, FLUSH_ALL, 0)),
                5 => out.push(Event::control(Kind::TlbFlush, addr, 0)),
                _ => {
                    return Err(LineError::new(
                        lines - 1,
                        "label",
                        format!("unknown label {label:x} (expected 0-5)"),
                    ))
                }
            }
        }
        Ok((i, lines))
    }

    fn skipped(&self) -> u64 {
        self.skipped
    }
}

/// The line at `text[i]` (`text` ends in `'\n'`) if it is a reference in the common form
/// `L hex\n`: a label `0`, `1` or `2`, one space, 1 to 16 hex digits not starting `0x`,
/// the newline. Returns its kind, its address and the index after its newline. Whatever
/// else a line may be (blanks, a `0x` prefix, more digits, a comment, a carriage return,
/// another label or an error) is left to the general parse, which reads these the same.
#[inline(always)]
fn plain_line(text: &[u8], i: usize) -> Option<(Kind, u64, usize)> {
    let kind = match text.get(i..i + 2)? {
        [b'0', b' '] => Kind::Load,
        [b'1', b' '] => Kind::Store,
        [b'2', b' '] => Kind::Fetch,
        _ => return None,
    };
    // `text[i + 2]` exists (the line goes on past the space), and so does the byte after it
    // when it is a digit.
    let start = i + 2;
    if text[start] == b'0' && text[start + 1] | 0x20 == b'x' {
        return None;
    }
    let mut j = start;
    let mut addr = 0u64;
    loop {
        let d = HEX[text[j] as usize];
        if d == NOT_HEX {
            break;
        }
        addr = addr << 4 | d as u64;
        j += 1;
    }
    let digits = j - start;
    (digits != 0 && digits <= 16 && text[j] == b'\n').then_some((kind, addr, j + 1))
}

#[cold]
fn bad_label(line: u64, text: &[u8], j: usize, digits: usize) -> LineError {
    let message = if digits == 0 {
        format!("expected a hex label, found {}", shown(text[j]))
    } else if text[j] == b'\n' || text[j] == b'\r' {
        "missing address after the label".to_string()
    } else {
        format!("unexpected {} in the label", shown(text[j]))
    };
    LineError::new(line, "label", message)
}

#[cold]
pub(crate) fn bad_address(
    line: u64,
    text: &[u8],
    i: usize,
    digits: usize,
    overflow: bool,
) -> LineError {
    let message = if digits == 0 && matches!(text[i], b'\n' | b'\r') {
        "missing address".to_string()
    } else if digits == 0 {
        format!("expected a hex address, found {}", shown(text[i]))
    } else if overflow {
        "address does not fit in 64 bits".to_string()
    } else {
        format!("unexpected {} in the address", shown(text[i]))
    };
    LineError::new(line, "address", message)
}

/// din's text for events.
#[derive(Debug, Default)]
pub struct DinEncoder;

/// A din trace being written.
pub type DinWriter = TextWriter<DinEncoder>;

/// Creates a din trace at `path` (compressed if the extension says so).
pub fn writer(path: &Path) -> Result<DinWriter> {
    TextWriter::create(path, DinEncoder)
}

impl LineEncoder for DinEncoder {
    fn encode(&mut self, events: &[Event], buf: &mut Vec<u8>) -> u64 {
        let mut dropped = 0;
        for e in events {
            let label: &[u8] = match e.kind {
                Kind::Load => b"0 ",
                Kind::Store => b"1 ",
                Kind::Fetch => b"2 ",
                Kind::TlbFlush if e.addr == FLUSH_ALL => {
                    buf.extend_from_slice(b"4 0\n");
                    continue;
                }
                // No label says "one address space's entries": left out and counted, as
                // every event the format cannot carry.
                Kind::TlbFlush if e.addr == FLUSH_SPACE => {
                    dropped += 1;
                    continue;
                }
                Kind::TlbFlush => b"5 ",
                _ => {
                    dropped += 1;
                    continue;
                }
            };
            buf.extend_from_slice(label);
            push_hex(buf, e.addr, 0);
            buf.push(b'\n');
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<(Vec<Event>, u64), LineError> {
        crate::trace::textio::parse_all::<Din>(text)
    }

    #[test]
    fn reads_labels_as_documented() {
        let (evs, skipped) = parse(
            "2 0\n0 1000\n  0 70f60888 a comment\n1\t0x70F6088C\n3 1234\n4 0\n5 2000\n\n0x2 10\r\n",
        )
        .unwrap();
        let r = Event::reference;
        assert_eq!(
            evs,
            vec![
                r(Kind::Fetch, 0, 4),
                r(Kind::Load, 0x1000, 4),
                r(Kind::Load, 0x70f60888, 4),
                r(Kind::Store, 0x70f6088c, 4),
                Event::control(Kind::TlbFlush, FLUSH_ALL, 0),
                Event::control(Kind::TlbFlush, 0x2000, 0),
                r(Kind::Fetch, 0x10, 4),
            ]
        );
        assert_eq!(skipped, 1);
    }

    #[test]
    fn errors_name_the_line_and_field() {
        let err = |t: &str| {
            let e = parse(t).unwrap_err();
            (e.line, e.field, e.message)
        };
        assert_eq!(
            err("0 10\n9 10\n"),
            (1, "label", "unknown label 9 (expected 0-5)".into())
        );
        assert_eq!(
            err("0 10\n\n0\n"),
            (2, "label", "missing address after the label".into())
        );
        assert_eq!(
            err("r 10"),
            (0, "label", "expected a hex label, found 'r'".into())
        );
        assert_eq!(err("0z 10").2, "unexpected 'z' in the label");
        assert_eq!(err("0 10g").2, "unexpected 'g' in the address");
        assert_eq!(err("0 \n"), (0, "address", "missing address".into()));
        assert_eq!(err("0 ,").2, "expected a hex address, found ','");
        assert_eq!(
            err("0 10000000000000000").2,
            "address does not fit in 64 bits"
        );
    }

    use proptest::prelude::*;

    /// A din line: common (`L hex`) or not (other labels, blanks, `0x`, long or overflowing
    /// addresses, comments, carriage returns, blank lines, bad bytes).
    fn line() -> impl Strategy<Value = String> {
        let label = prop_oneof![
            4 => (0u8..3).prop_map(|l| l.to_string()),
            1 => prop::sample::select(vec!["3", "4", "5", "9", "00", "0x2", "r", ""])
                .prop_map(str::to_string),
        ];
        let addr = prop_oneof![
            4 => any::<u64>().prop_map(|a| format!("{a:x}")),
            1 => (0u32..64).prop_map(|b| format!("{:X}", 1u64 << b)),
            1 => any::<u64>().prop_map(|a| format!("0x{a:x}")),
            1 => prop::sample::select(vec![
                "", "0", "0x", "00000000000000000001", "10000000000000000", "12g", "ffffffffffffffff",
            ])
            .prop_map(str::to_string),
        ];
        let sep = prop::sample::select(vec![" ", " ", " ", "  ", "\t", ""]);
        let tail = prop::sample::select(vec![
            "",
            "",
            "",
            " 4",
            "\r",
            " # note",
            "x",
            "/",
            ":",
            "@",
            "G",
            "`",
            "g",
            "\u{b0}",
            "\u{10}",
            "0123456789abcdefABCDEF",
        ]);
        (label, sep, addr, tail).prop_map(|(l, s, a, t)| format!("{l}{s}{a}{t}"))
    }

    proptest! {
        /// Common lines are read at once, the others the long way: both read every text
        /// alike (the same events and skipped records, or the same error at the same line),
        /// as the long way alone reads it (every line indented, which it skips).
        #[test]
        fn the_common_lines_read_as_the_general_parse_does(
            lines in prop::collection::vec(line(), 1..40),
        ) {
            let text = lines.join("\n");
            let indented = lines.iter().map(|l| format!(" {l}")).collect::<Vec<_>>().join("\n");
            match (parse(&text), parse(&indented)) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(a), Err(b)) => {
                    prop_assert_eq!((a.line, a.field), (b.line, b.field));
                    prop_assert_eq!(a.message, b.message);
                }
                (a, b) => prop_assert!(false, "{:?} vs {:?}", a.map(|x| x.0.len()), b.map(|x| x.0.len())),
            }
        }
    }

    #[test]
    fn writer_keeps_what_din_can_say() {
        let r = Event::reference;
        let mut buf = Vec::new();
        let dropped = DinEncoder.encode(
            &[
                r(Kind::Fetch, 0x400d7d4, 3),
                r(Kind::Load, 0x10, 8),
                r(Kind::Store, u64::MAX, 4),
                Event::control(Kind::TlbFlush, FLUSH_ALL, 3),
                Event::control(Kind::TlbFlush, 0x5000, 3),
                Event::control(Kind::ContextSwitch, 0, 3),
            ],
            &mut buf,
        );
        assert_eq!(dropped, 1);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "2 400d7d4\n0 10\n1 ffffffffffffffff\n4 0\n5 5000\n"
        );
    }
}
