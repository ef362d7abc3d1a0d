//! Machinery shared by the text formats (lackey, din, xdin): a chunked line reader and a
//! buffered line writer. The writer only appends the bytes an encoder makes, so ChampSim's
//! binary writer, which also packs events into records as they come, uses it too.
//!
//! Text traces run to billions of lines, so the readers never build a `String` per line and
//! never call `str::parse`: the file is read in 1 MiB chunks, only the complete lines of a
//! chunk are handed to the format's parser (a line cut by the chunk boundary is carried over
//! to the next chunk), and the chunk handed over always ends in `'\n'`. That sentinel lets the
//! per-format parsers scan fields without checking for the end of the buffer: every field
//! scanner stops at a newline. Line numbers are counted by the parsers as they go and turned
//! into `file: line N: field: message` errors here.

use std::io::Write;
use std::path::Path;

use super::compress::{Input, Output};
use super::{TraceSink, TraceSource};
use crate::error::{Error, Location, Result};
use crate::event::{Event, BATCH};

/// Bytes read per chunk; also the longest line accepted.
pub(crate) const CHUNK: usize = 1 << 20;

/// Value of each hex digit, [`NOT_HEX`] for every other byte.
pub(crate) static HEX: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};
pub(crate) const NOT_HEX: u8 = 0xff;

/// A malformed line found by a [`LineFormat`]: which line (counted from the start of the text
/// handed over), which field, and what is wrong.
#[derive(Debug)]
pub struct LineError {
    pub line: u64,
    pub field: &'static str,
    pub message: String,
}

impl LineError {
    pub fn new(line: u64, field: &'static str, message: impl Into<String>) -> LineError {
        LineError {
            line,
            field,
            message: message.into(),
        }
    }
}

/// The line syntax of one text format.
pub trait LineFormat: Send {
    /// Parses complete lines of `text` (which ends in `'\n'`) into `out`, stopping at a line
    /// boundary once `out` holds `limit` events or the text is exhausted. Returns the bytes
    /// and lines consumed.
    fn parse(
        &mut self,
        text: &[u8],
        out: &mut Vec<Event>,
        limit: usize,
    ) -> Result<(usize, u64), LineError>;

    /// Well-formed records that were skipped because they carry nothing to simulate.
    fn skipped(&self) -> u64;
}

/// Parses a hex number starting at `text[i]` (an optional `0x`/`0X` prefix is accepted, as
/// DineroIV does). Returns the value, the index after the digits, and the number of digits
/// (0 if there was none). Sets `*overflow` if the value needs more than 64 bits.
///
/// Relies on the newline sentinel at the end of `text`: the scan stops at the first non-hex
/// byte, so it never runs past the `'\n'`.
#[inline(always)]
pub(crate) fn hex_field(text: &[u8], mut i: usize, overflow: &mut bool) -> (u64, usize, usize) {
    let mut d = HEX[text[i] as usize];
    if d == NOT_HEX {
        return (0, i, 0);
    }
    let mut digits = 0;
    if d == 0 && text[i + 1] | 0x20 == b'x' {
        i += 2;
        digits = 1; // "0x" alone reads as 0, as in DineroIV
        d = HEX[text[i] as usize];
        if d == NOT_HEX {
            return (0, i, digits);
        }
    }
    let mut v: u64 = 0;
    loop {
        *overflow |= v >> 60 != 0;
        v = v << 4 | d as u64;
        i += 1;
        digits += 1;
        d = HEX[text[i] as usize];
        if d == NOT_HEX {
            return (v, i, digits);
        }
    }
}

/// Parses a decimal number of at most 19 digits starting at `text[i]`. Returns the value,
/// the index after the digits and the number of digits (saturating: more than 19 digits
/// leave `u64::MAX`).
#[inline(always)]
pub(crate) fn dec_field(text: &[u8], mut i: usize) -> (u64, usize, usize) {
    let mut v: u64 = 0;
    let start = i;
    loop {
        let d = text[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.saturating_mul(10).saturating_add(d as u64);
        i += 1;
    }
    (v, i, i - start)
}

/// Index of the `'\n'` ending the line that contains `text[i]` (the text ends in `'\n'`).
#[inline]
pub(crate) fn line_end(text: &[u8], i: usize) -> usize {
    match text[i..].iter().position(|&b| b == b'\n') {
        Some(k) => i + k,
        None => text.len() - 1,
    }
}

/// True if `text[i..]` up to its newline is only spaces, tabs and a carriage return.
#[inline]
pub(crate) fn rest_is_blank(text: &[u8], i: usize) -> bool {
    let end = line_end(text, i);
    text[i..end]
        .iter()
        .all(|&b| b == b' ' || b == b'\t' || b == b'\r')
}

/// A byte shown in a message: printable as itself, else as an escape.
pub(crate) fn shown(b: u8) -> String {
    match b {
        b'\n' => "end of line".to_string(),
        0x21..=0x7e => format!("'{}'", b as char),
        _ => format!("byte 0x{b:02x}"),
    }
}

/// A text trace being read: chunks of complete lines handed to the format `F`.
pub struct TextReader<F> {
    input: Input,
    format: F,
    /// `buf[pos..complete]` are complete lines not yet parsed, `buf[complete..len]` the start
    /// of a line whose end has not been read yet.
    buf: Vec<u8>,
    pos: usize,
    complete: usize,
    len: usize,
    eof: bool,
    /// 1-based number of the line at `pos`.
    line: u64,
}

impl<F: LineFormat> TextReader<F> {
    pub(crate) fn new(input: Input, format: F) -> TextReader<F> {
        TextReader {
            input,
            format,
            buf: vec![0; CHUNK + 1],
            pos: 0,
            complete: 0,
            len: 0,
            eof: false,
            line: 1,
        }
    }

    /// Makes `buf[pos..complete]` non-empty; returns false at the end of the input.
    fn refill(&mut self) -> Result<bool> {
        self.buf.copy_within(self.pos..self.len, 0);
        self.len -= self.pos;
        self.pos = 0;
        self.complete = 0;
        while self.len < CHUNK && !self.eof {
            let n = self.input.read_full(&mut self.buf[self.len..CHUNK])?;
            self.eof = n == 0;
            self.len += n;
        }
        match self.buf[..self.len].iter().rposition(|&b| b == b'\n') {
            Some(i) => self.complete = i + 1,
            None if self.len == 0 => return Ok(false),
            None if self.eof => {
                // The last line has no newline: give it one (the buffer has room for it).
                self.buf[self.len] = b'\n';
                self.len += 1;
                self.complete = self.len;
            }
            None => {
                return Err(Error::trace(
                    self.input.path(),
                    Location::Line(self.line),
                    "line",
                    format!("line longer than {} bytes (is this a text trace?)", CHUNK),
                ))
            }
        }
        Ok(true)
    }
}

impl<F: LineFormat> TraceSource for TextReader<F> {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        out.reserve(BATCH + 32);
        while out.len() < BATCH {
            if self.pos == self.complete && !self.refill()? {
                break;
            }
            let text = &self.buf[self.pos..self.complete];
            match self.format.parse(text, out, BATCH) {
                Ok((bytes, lines)) => {
                    self.pos += bytes;
                    self.line += lines;
                }
                Err(e) => {
                    out.clear();
                    return Err(Error::trace(
                        self.input.path(),
                        Location::Line(self.line + e.line),
                        e.field,
                        e.message,
                    ));
                }
            }
        }
        Ok(!out.is_empty())
    }

    fn bytes_read(&self) -> u64 {
        self.input.raw_bytes()
    }

    fn skipped(&self) -> u64 {
        self.format.skipped()
    }
}

/// Runs `format` over the first bytes of a file and says how many lines it recognised, or
/// `None` if it rejected one. `whole` says whether `sample` is the entire file (else its last,
/// possibly cut, line is ignored). Used to detect the format of a text trace.
pub(crate) fn sniff<F: LineFormat>(mut format: F, sample: &[u8], whole: bool) -> Option<u64> {
    let mut text = if whole {
        sample.to_vec()
    } else {
        let last = sample.iter().rposition(|&b| b == b'\n')?;
        sample[..=last].to_vec()
    };
    if text.last() != Some(&b'\n') {
        text.push(b'\n');
    }
    let mut out = Vec::new();
    format.parse(&text, &mut out, usize::MAX).ok()?;
    let meaningful = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(|b| b.is_ascii_whitespace()))
        .count();
    Some(meaningful as u64)
}

/// The text of one format: turns events into lines.
pub trait LineEncoder: Send {
    /// Appends the lines for `events` to `buf`; returns how many events could not be
    /// represented and were dropped.
    fn encode(&mut self, events: &[Event], buf: &mut Vec<u8>) -> u64;
    /// Appends whatever is still held back (at the end of the trace).
    fn finish(&mut self, _buf: &mut Vec<u8>) {}
}

/// Text buffered before it is handed to the (compressing) output.
const WRITE_BUF: usize = 256 * 1024;

/// A text trace (or a ChampSim one) being written.
pub struct TextWriter<E> {
    out: Output,
    encoder: E,
    buf: Vec<u8>,
    dropped: u64,
}

impl<E: LineEncoder> TextWriter<E> {
    pub(crate) fn create(path: &Path, encoder: E) -> Result<TextWriter<E>> {
        Ok(TextWriter {
            out: Output::create(path)?,
            encoder,
            buf: Vec::with_capacity(WRITE_BUF + 4096),
            dropped: 0,
        })
    }

    fn drain(&mut self) -> Result<()> {
        let r = self.out.write_all(&self.buf);
        self.buf.clear();
        r.map_err(|e| self.out.error(e))
    }
}

impl<E: LineEncoder> TraceSink for TextWriter<E> {
    fn write_batch(&mut self, events: &[Event]) -> Result<()> {
        for chunk in events.chunks(1024) {
            self.dropped += self.encoder.encode(chunk, &mut self.buf);
            if self.buf.len() >= WRITE_BUF {
                self.drain()?;
            }
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.encoder.finish(&mut self.buf);
        self.drain()?;
        let TextWriter { out, .. } = *self;
        out.commit()
    }

    fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Lower-case hex digits.
const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends `v` in lower-case hex, zero-padded to at least `min_digits` (at most 16).
#[inline]
pub(crate) fn push_hex(buf: &mut Vec<u8>, v: u64, min_digits: u32) {
    let needed = (64 - (v | 1).leading_zeros()).div_ceil(4);
    let digits = needed.max(min_digits.min(16));
    for k in (0..digits).rev() {
        buf.push(DIGITS[((v >> (4 * k)) & 15) as usize]);
    }
}

/// Appends `v` in decimal.
#[inline]
pub(crate) fn push_dec(buf: &mut Vec<u8>, v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let mut v = v;
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// Parses all of `text` (a newline is added if missing) with a fresh `F`, checking that
/// every byte was consumed; returns the events and the records skipped. For the formats' tests.
#[cfg(test)]
pub(crate) fn parse_all<F: LineFormat + Default>(
    text: &str,
) -> Result<(Vec<Event>, u64), LineError> {
    let mut t = text.as_bytes().to_vec();
    if t.last() != Some(&b'\n') {
        t.push(b'\n');
    }
    let mut out = Vec::new();
    let mut f = F::default();
    let (used, _) = f.parse(&t, &mut out, usize::MAX)?;
    assert_eq!(used, t.len());
    Ok((out, f.skipped()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_fields_parse_with_and_without_prefix() {
        let mut of = false;
        assert_eq!(hex_field(b"1fFe,\n", 0, &mut of), (0x1ffe, 4, 4));
        assert_eq!(hex_field(b"0x1f \n", 0, &mut of), (0x1f, 4, 3));
        assert_eq!(hex_field(b"0X\n", 0, &mut of), (0, 2, 1));
        assert_eq!(hex_field(b"g\n", 0, &mut of), (0, 0, 0));
        assert!(!of);
        assert_eq!(hex_field(b"ffffffffffffffff\n", 0, &mut of).0, u64::MAX);
        assert!(!of);
        hex_field(b"10000000000000000\n", 0, &mut of);
        assert!(of);
        let mut of = false;
        assert_eq!(hex_field(b"00000000000000000001\n", 0, &mut of).0, 1);
        assert!(!of, "leading zeros do not overflow");
    }

    #[test]
    fn decimal_fields_saturate() {
        assert_eq!(dec_field(b"65535\n", 0), (65535, 5, 5));
        assert_eq!(dec_field(b"x\n", 0), (0, 0, 0));
        assert_eq!(dec_field(b"99999999999999999999999\n", 0).0, u64::MAX);
    }

    #[test]
    fn numbers_print() {
        let mut b = Vec::new();
        push_hex(&mut b, 0x400d7d4, 8);
        b.push(b' ');
        push_hex(&mut b, 0, 0);
        b.push(b' ');
        push_hex(&mut b, u64::MAX, 8);
        b.push(b' ');
        push_dec(&mut b, 0);
        b.push(b' ');
        push_dec(&mut b, 65535);
        assert_eq!(b, b"0400d7d4 0 ffffffffffffffff 0 65535");
    }
}
