//! Lookaside's native trace format (`.lks`): compact, self-describing, checked, and fast to
//! decode.
//!
//! Text traces cost more to parse than to simulate, and they cannot carry what whole-system
//! traces need (address spaces, modes, physical addresses, control events). The native format
//! carries every [`Event`] field exactly and decodes at well over 100 M events/s. Layout:
//!
//! ```text
//! offset  size  field
//! 0       8     magic "LKSTRACE"
//! 8       2     format version, u16 little-endian (2)
//! 10      4     header length H, u32 little-endian (at most 1 MiB)
//! 14      H     header: UTF-8 JSON {"encoding": "lks1", "compression": "zstd",
//!               "checksum": "crc32", "metadata": {command, source_format, tool, extra}}
//! 14+H    4     CRC-32 of bytes 8 .. 14+H (version, length and header), u32 little-endian
//! 18+H    …     one zstd stream (content checksum on) holding the records (see `codec`),
//!               ending with the END record and its trailer (event count, CRC-32 of the
//!               record bytes)
//! ```
//!
//! Version 1, written before the header had its CRC, is the same without those 4 bytes; it
//! is still read (its header unchecked). The header is checked before any record is read, so
//! corrupt metadata is refused at once, never shown or carried into a conversion; a single
//! flipped bit of the version field never turns 2 into 1.
//!
//! Nothing may follow the END record. A file cut anywhere is an error: inside the header
//! ("truncated"), inside the zstd stream (zstd reports it), or exactly between frames or
//! records (the END record is missing: "truncated"). Byte offsets in errors count the header
//! and then the *decompressed* record stream (offset 18+H is the first record).

use std::collections::BTreeMap;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::codec::{decode, DecodeState, Encoder, Stop, Trailer, END_LEN, WINDOW};
use super::compress::{Input, Output};
use super::{TraceSink, TraceSource};
use crate::error::{Error, Location, Result};
use crate::event::{Event, EventSink, BATCH};

/// The first bytes of every native trace.
pub const MAGIC: &[u8; 8] = b"LKSTRACE";
/// The format version this code writes (it reads this one and [`VERSION_UNCHECKED`]).
pub const VERSION: u16 = 2;
/// The version whose header has no CRC (read, never written).
pub const VERSION_UNCHECKED: u16 = 1;
/// Bytes of the header's CRC (version 2 on).
const HEADER_CRC: usize = 4;
/// The record encoding named in the header.
pub const ENCODING: &str = "lks1";
/// Bytes before the header JSON.
const PREAMBLE: usize = 14;
/// Largest header accepted (it is a few hundred bytes in practice).
const MAX_HEADER: u32 = 1 << 20;
/// Default zstd level of the writer: fast enough for bulk conversion. Level 19 makes files
/// about 30% smaller, at a tenth of the speed (worth it for traces that are shipped), and a
/// miss-heavy trace written at 19 parses at about half the speed (many short matches).
pub const DEFAULT_LEVEL: i32 = 3;
/// From this zstd level on, a trace is written to be small (the shipped traces): zstd's
/// literals stay Huffman-coded. Below it they are stored raw: on a miss-heavy trace most
/// record bytes are random address bits that zstd cannot match and Huffman coding shrinks
/// by only about a tenth, and decoding them is where inflation spends its time. Raw, they
/// inflate about twice as fast and the trace parses about 1.4x faster; a real program's
/// trace, mostly matches, parses as fast as before and is 6-13 % larger. Any zstd reader
/// reads either kind, so the format is the same.
const SMALLEST_LEVEL: i32 = 19;
/// Decompressed bytes decoded per refill.
pub(crate) const CAP: usize = 512 * 1024;

/// What a trace says about itself: stored in the native header, carried through conversions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Metadata {
    /// The command that produced the trace (the traced program, or the conversion).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The format the trace was converted from (`lackey`, `din`, …), if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_format: Option<String>,
    /// The tool and version that wrote the file; the writer fills it in when empty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Free-form key/values (workload, machine, date, …).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
    /// The processes of a whole-system trace: which address space each ran in.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<Process>,
}

/// A process seen in a whole-system trace: its pid and name, and the address-space id its
/// references carry. Threads share their process's address space; a process that execs
/// moves to a new one (and may appear twice, under each name it had).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub asid: u32,
    pub pid: u32,
    pub name: String,
}

impl Metadata {
    /// `self`, with every field it leaves empty taken from `other`.
    pub fn or(mut self, other: &Metadata) -> Metadata {
        self.command = self.command.or_else(|| other.command.clone());
        self.source_format = self.source_format.or_else(|| other.source_format.clone());
        self.tool = self.tool.or_else(|| other.tool.clone());
        for (k, v) in &other.extra {
            self.extra.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if self.processes.is_empty() {
            self.processes = other.processes.clone();
        }
        self
    }
}

/// The header JSON.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    encoding: String,
    compression: String,
    checksum: String,
    #[serde(default)]
    metadata: Metadata,
}

/// The name of this writer, as put in [`Metadata::tool`].
fn tool_name() -> String {
    format!("lookaside {}", env!("CARGO_PKG_VERSION"))
}

/// A native trace being read.
pub struct NativeReader {
    path: String,
    metadata: Metadata,
    dec: zstd::stream::read::Decoder<'static, BufReader<Input>>,
    /// Decompressed records: `buf[pos..filled]` not yet decoded, then `WINDOW` zero bytes.
    buf: Vec<u8>,
    pos: usize,
    filled: usize,
    eof: bool,
    /// Logical offset (header + decompressed records) of `buf[0]`.
    base: u64,
    state: DecodeState,
    /// CRC-32 of the record bytes decoded so far.
    crc: crc32fast::Hasher,
    count: u64,
    done: bool,
}

/// Reads `n` bytes of the header, or says where the file ends.
fn read_exact(input: &mut Input, buf: &mut [u8], at: u64) -> Result<()> {
    let n = input.read_full(buf)?;
    if n < buf.len() {
        return Err(Error::trace(
            input.path(),
            Location::Byte(at + n as u64),
            "header",
            "truncated: the file ends inside the header",
        ));
    }
    Ok(())
}

impl NativeReader {
    /// Reads the header of `input` and prepares to decode its records.
    pub fn new(mut input: Input) -> Result<NativeReader> {
        let path = input.path().to_string();
        let mut pre = [0u8; PREAMBLE];
        let n = input.read_full(&mut pre)?;
        if n < MAGIC.len() || &pre[..8] != MAGIC {
            return Err(Error::trace(
                &path,
                Location::Byte(0),
                "magic",
                "not a Lookaside native trace (expected \"LKSTRACE\")",
            ));
        }
        if n < PREAMBLE {
            return Err(Error::trace(
                &path,
                Location::Byte(n as u64),
                "header",
                "truncated: the file ends inside the header",
            ));
        }
        let version = u16::from_le_bytes([pre[8], pre[9]]);
        if version != VERSION && version != VERSION_UNCHECKED {
            return Err(Error::trace(
                &path,
                Location::Byte(8),
                "version",
                format!(
                    "unsupported format version {version} (this build reads versions \
                     {VERSION_UNCHECKED} and {VERSION})"
                ),
            ));
        }
        let len = u32::from_le_bytes([pre[10], pre[11], pre[12], pre[13]]);
        if len > MAX_HEADER {
            return Err(Error::trace(
                &path,
                Location::Byte(10),
                "header",
                format!("header length {len} is implausible (at most {MAX_HEADER})"),
            ));
        }
        let mut json = vec![0u8; len as usize];
        read_exact(&mut input, &mut json, PREAMBLE as u64)?;
        let mut records_at = PREAMBLE as u64 + len as u64;
        if version == VERSION {
            let mut stored = [0u8; HEADER_CRC];
            read_exact(&mut input, &mut stored, records_at)?;
            if u32::from_le_bytes(stored) != header_crc(&pre, &json) {
                return Err(Error::trace(
                    &path,
                    Location::Byte(records_at),
                    "header",
                    "CRC mismatch: the version, length or metadata is corrupt",
                ));
            }
            records_at += HEADER_CRC as u64;
        }
        let header: Header = serde_json::from_slice(&json).map_err(|e| {
            Error::trace(
                &path,
                Location::Byte(PREAMBLE as u64),
                "header",
                format!("bad JSON: {e}"),
            )
        })?;
        let expect = |field: &str, got: &str, want: &str| {
            if got == want {
                Ok(())
            } else {
                Err(Error::trace(
                    &path,
                    Location::Byte(PREAMBLE as u64),
                    field,
                    format!("unsupported {field} '{got}' (this build reads '{want}')"),
                ))
            }
        };
        expect("encoding", &header.encoding, ENCODING)?;
        expect("compression", &header.compression, "zstd")?;
        expect("checksum", &header.checksum, "crc32")?;
        let dec = zstd::stream::read::Decoder::with_buffer(BufReader::with_capacity(CAP, input))
            .map_err(|e| Error::io(&path, e))?;
        Ok(NativeReader {
            path,
            metadata: header.metadata,
            dec,
            buf: vec![0; CAP + WINDOW],
            pos: 0,
            filled: 0,
            eof: false,
            base: records_at,
            state: DecodeState::default(),
            crc: crc32fast::Hasher::new(),
            count: 0,
            done: false,
        })
    }

    /// What the trace says about itself.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// An error reading the record stream: from the file, an outer decompressor, or zstd.
    fn stream_error(&self, e: io::Error) -> Error {
        let input = self.dec.get_ref().get_ref();
        if input.file_failed() || input.decompression_failed() {
            // The file, or an outer compression around the whole file (`.lks.gz`).
            return input.error(e);
        }
        let at = Location::Byte(self.base + self.filled as u64);
        if e.kind() == io::ErrorKind::UnexpectedEof {
            return Error::trace(&self.path, at, "compression", format!("truncated: {e}"));
        }
        Error::trace(
            &self.path,
            at,
            "compression",
            format!("corrupt zstd record stream: {e}"),
        )
    }

    fn truncated(&self, at: u64) -> Error {
        Error::trace(
            &self.path,
            Location::Byte(at),
            "stream",
            format!(
                "truncated: the records end without an END record after {} events",
                self.count
            ),
        )
    }

    /// Moves the undecoded tail to the front and decompresses more after it.
    fn refill(&mut self) -> Result<()> {
        self.buf.copy_within(self.pos..self.filled, 0);
        self.base += self.pos as u64;
        self.filled -= self.pos;
        self.pos = 0;
        while self.filled < CAP && !self.eof {
            match self.dec.read(&mut self.buf[self.filled..CAP]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.stream_error(e)),
            }
        }
        self.buf[self.filled..self.filled + WINDOW].fill(0);
        Ok(())
    }

    /// Checks the trailer, and that nothing follows it (which also makes zstd verify its
    /// content checksum at the end of the frame).
    fn finish(&mut self, trailer: Trailer, end_at: u64) -> Result<()> {
        if trailer.count != self.count {
            return Err(Error::trace(
                &self.path,
                Location::Byte(end_at),
                "trailer",
                format!(
                    "the trailer counts {} events but {} were read",
                    trailer.count, self.count
                ),
            ));
        }
        if trailer.crc != self.crc.clone().finalize() {
            return Err(Error::trace(
                &self.path,
                Location::Byte(end_at),
                "trailer",
                "CRC mismatch: the records read differ from those written",
            ));
        }
        let extra = self.filled - self.pos;
        let mut scratch = [0u8; 4096];
        let mut more = 0usize;
        while extra == 0 && more == 0 && !self.eof {
            match self.dec.read(&mut scratch) {
                Ok(0) => self.eof = true,
                Ok(n) => more += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.stream_error(e)),
            }
        }
        if extra + more > 0 {
            return Err(Error::trace(
                &self.path,
                Location::Byte(self.base + self.pos as u64),
                "stream",
                "data after the END record",
            ));
        }
        Ok(())
    }
}

impl NativeReader {
    /// Decode up to `max` events, handing each to `sink` in order as it is decoded (no batch
    /// in between); returns how many, 0 at the end of the trace. [`TraceSource::next_batch`]
    /// is this with the batch as the sink; a simulation calls it directly so that each event
    /// goes from the decoder to the machine in registers.
    ///
    /// On an error, events of this call before the bad record may already have been emitted.
    #[inline]
    pub fn decode_with(&mut self, max: usize, sink: &mut impl EventSink) -> Result<usize> {
        if self.done {
            return Ok(0);
        }
        let mut total = 0;
        let trailer = loop {
            let limit = if self.eof {
                self.filled
            } else {
                self.filled.saturating_sub(WINDOW)
            };
            if self.pos >= limit {
                if self.eof {
                    return Err(self.truncated(self.base + self.filled as u64));
                }
                self.refill()?;
                continue;
            }
            let at = self.pos;
            match decode(&self.buf, at, limit, &mut self.state, max - total, sink) {
                Ok((pos, n, stop)) => {
                    if pos > self.filled {
                        // A record runs into the zero padding: the data ends inside it.
                        return Err(self.truncated(self.base + self.filled as u64));
                    }
                    total += n;
                    self.pos = pos;
                    match stop {
                        Stop::Full => {
                            self.crc.update(&self.buf[at..pos]);
                            break None;
                        }
                        Stop::Limit => self.crc.update(&self.buf[at..pos]),
                        Stop::End(t) => {
                            self.crc.update(&self.buf[at..pos - END_LEN]);
                            break Some(t);
                        }
                    }
                }
                Err(e) => {
                    return Err(Error::trace(
                        &self.path,
                        Location::Byte(self.base + e.at as u64),
                        "record",
                        e.message,
                    ));
                }
            }
        };
        self.count += total as u64;
        if let Some(t) = trailer {
            let end_at = self.base + (self.pos - END_LEN) as u64;
            self.finish(t, end_at)?;
            self.done = true;
        }
        Ok(total)
    }
}

/// Decodes a whole record stream already inflated into memory (`records`: the records and
/// the END record, then at least [`RECORD_WINDOW`] bytes of zero padding) into `sink`, without
/// zstd, the CRC or the buffer refills of [`NativeReader`]: the decoder's own speed, for
/// profiling (`examples/simrate --decode`). Returns the events decoded and the trailer's
/// count; an error names the byte offset into `records`.
#[doc(hidden)]
pub fn decode_records(
    records: &[u8],
    sink: &mut impl EventSink,
) -> std::result::Result<(u64, u64), String> {
    let len = records
        .len()
        .checked_sub(WINDOW)
        .ok_or("records: shorter than the padding")?;
    let mut st = DecodeState::default();
    match decode(records, 0, len, &mut st, usize::MAX, sink) {
        Ok((_, n, Stop::End(t))) => Ok((n as u64, t.count)),
        Ok((pos, n, _)) => Err(format!("byte {pos}: no END record after {n} events")),
        Err(e) => Err(format!("byte {}: {}", e.at, e.message)),
    }
}

/// Zero bytes [`decode_records`] needs after the records.
#[doc(hidden)]
pub const RECORD_WINDOW: usize = WINDOW;

impl TraceSource for NativeReader {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        out.reserve(BATCH);
        match self.decode_with(BATCH, out) {
            Ok(n) => Ok(n > 0),
            Err(e) => {
                out.clear();
                Err(e)
            }
        }
    }

    fn bytes_read(&self) -> u64 {
        self.dec.get_ref().get_ref().raw_bytes()
    }

    fn metadata(&self) -> Option<&Metadata> {
        Some(&self.metadata)
    }
}

/// A native trace being written.
pub struct NativeWriter {
    enc: Option<zstd::stream::write::Encoder<'static, Output>>,
    path: String,
    coder: Encoder,
    buf: Vec<u8>,
    /// CRC-32 of the record bytes written so far.
    crc: crc32fast::Hasher,
    count: u64,
}

/// Record bytes buffered before they are handed to zstd.
const RECORD_BUF: usize = 128 * 1024;

/// The preamble and header of a native trace with this metadata (`path` names it in errors).
fn preamble(metadata: &Metadata, path: &str) -> Result<Vec<u8>> {
    let mut metadata = metadata.clone();
    if metadata.tool.is_none() {
        metadata.tool = Some(tool_name());
    }
    let header = Header {
        encoding: ENCODING.into(),
        compression: "zstd".into(),
        checksum: "crc32".into(),
        metadata,
    };
    let json = serde_json::to_vec(&header)
        .map_err(|e| Error::Usage(format!("{path}: cannot encode the header: {e}")))?;
    if json.len() > MAX_HEADER as usize {
        return Err(Error::Usage(format!(
            "{path}: the metadata is too large for the header ({} bytes, at most {MAX_HEADER})",
            json.len()
        )));
    }
    let mut pre = Vec::with_capacity(PREAMBLE + json.len() + HEADER_CRC);
    pre.extend_from_slice(MAGIC);
    pre.extend_from_slice(&VERSION.to_le_bytes());
    pre.extend_from_slice(&(json.len() as u32).to_le_bytes());
    let crc = header_crc(&pre, &json);
    pre.extend_from_slice(&json);
    pre.extend_from_slice(&crc.to_le_bytes());
    Ok(pre)
}

/// The CRC-32 a version-2 header carries: over the version and length fields of `pre` (the
/// preamble) and the header JSON.
fn header_crc(pre: &[u8], json: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&pre[8..PREAMBLE]);
    h.update(json);
    h.finalize()
}

/// Replaces the metadata of the native trace at `path` (uncompressed outside, i.e. `.lks`),
/// for what is only known once the trace is written, such as the processes of a
/// whole-system capture. The records are copied as they are (still compressed); the file
/// is replaced atomically.
pub fn set_metadata(path: &Path, metadata: &Metadata) -> Result<()> {
    let name = path.display().to_string();
    let mut input = std::fs::File::open(path).map_err(|e| Error::io(&name, e))?;
    let mut pre = [0u8; PREAMBLE];
    input
        .read_exact(&mut pre)
        .map_err(|e| Error::io(&name, e))?;
    if &pre[..8] != MAGIC {
        return Err(Error::trace(
            &name,
            Location::Byte(0),
            "magic",
            "not a Lookaside native trace (expected \"LKSTRACE\")",
        ));
    }
    let version = u16::from_le_bytes([pre[8], pre[9]]);
    let len = u32::from_le_bytes([pre[10], pre[11], pre[12], pre[13]]);
    let crc = if version == VERSION_UNCHECKED {
        0
    } else {
        HEADER_CRC
    };
    io::copy(
        &mut (&mut input).take(len as u64 + crc as u64),
        &mut io::sink(),
    )
    .map_err(|e| Error::io(&name, e))?;
    let mut out = Output::create_with(path, super::compress::Compression::None)?;
    out.write_all(&preamble(metadata, &name)?)
        .map_err(|e| out.error(e))?;
    io::copy(&mut input, &mut out).map_err(|e| out.error(e))?;
    out.commit()
}

impl NativeWriter {
    /// Creates a native trace at `path` with the given metadata and zstd `level` (1-22;
    /// [`DEFAULT_LEVEL`] is a good choice).
    pub fn create(path: &Path, metadata: &Metadata, level: i32) -> Result<NativeWriter> {
        let mut out = Output::create(path)?;
        let pre = preamble(metadata, out.path())?;
        out.write_all(&pre).map_err(|e| out.error(e))?;
        let path = out.path().to_string();
        let mut enc =
            zstd::stream::write::Encoder::new(out, level).map_err(|e| Error::io(&path, e))?;
        enc.include_checksum(true)
            .map_err(|e| Error::io(&path, e))?;
        if level < SMALLEST_LEVEL {
            enc.set_parameter(zstd::stream::raw::CParameter::LiteralCompressionMode(
                zstd::zstd_safe::ParamSwitch::Disable,
            ))
            .map_err(|e| Error::io(&path, e))?;
        }
        Ok(NativeWriter {
            enc: Some(enc),
            path,
            coder: Encoder::default(),
            buf: Vec::with_capacity(RECORD_BUF + 64),
            crc: crc32fast::Hasher::new(),
            count: 0,
        })
    }

    fn drain(&mut self) -> Result<()> {
        self.crc.update(&self.buf);
        let r = match &mut self.enc {
            Some(enc) => enc.write_all(&self.buf),
            None => Err(io::Error::other("writer already finished")),
        };
        self.buf.clear();
        r.map_err(|e| Error::io(&self.path, e))
    }
}

impl TraceSink for NativeWriter {
    fn write_batch(&mut self, events: &[Event]) -> Result<()> {
        for e in events {
            self.coder.encode(e, &mut self.buf);
            if self.buf.len() >= RECORD_BUF {
                self.drain()?;
            }
        }
        self.count += events.len() as u64;
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<()> {
        self.drain()?;
        let trailer = Trailer {
            count: self.count,
            crc: self.crc.clone().finalize(),
        };
        self.coder.end(&trailer, &mut self.buf);
        let mut enc = self
            .enc
            .take()
            .ok_or_else(|| Error::Usage("writer already finished".into()))?;
        enc.write_all(&self.buf)
            .map_err(|e| Error::io(&self.path, e))?;
        let out = enc.finish().map_err(|e| Error::io(&self.path, e))?;
        out.commit()
    }
}
