//! Trace input and output, kept apart from the engine (as DineroIV keeps `tracein.c` apart
//! from `ref.c`): every format is read into the same [`Event`] batches through one
//! [`TraceSource`] trait, chosen once when the file is opened, and written through one
//! [`TraceSink`] trait. Adding a format touches only this directory.
//!
//! - [`open`] recognises compression ([`compress`]) and format ([`format::detect`]) from the
//!   first bytes of a file and returns its reader; [`create`] picks a writer from the
//!   extension; [`convert`] copies one into the other; [`summarize`] counts what is inside.
//! - Formats: [`lackey`] (valgrind), [`din`] and [`xdin`] (DineroIV), [`champsim`]
//!   (ChampSim's instruction records, and their CloudSuite variant), [`native`] (ours:
//!   compact, exact, checked, fast; its record encoding is in `codec.rs`).
//! - [`capture`] reads the live stream of Lookaside's QEMU plugin (a program being traced)
//!   and [`capture::record`]s it, or a valgrind lackey pipe, into a trace file as it arrives.
//! - Text readers share [`textio`]; every reader works at constant memory and reports bad
//!   input as an [`Error::Trace`](crate::Error) naming the file, the line or byte offset, and
//!   the field.

use std::path::Path;

use crate::error::{Error, Result};
use crate::event::Event;

pub mod accessmap;
pub mod capture;
pub mod champsim;
mod codec;
pub mod compress;
pub mod cut;
pub mod din;
pub mod format;
pub mod kernel;
pub mod lackey;
pub mod native;
pub mod stream;
pub mod summary;
pub mod textio;
pub mod xdin;

#[cfg(test)]
mod bench;
#[cfg(test)]
pub(crate) mod tests;

pub use compress::Compression;
pub use format::{detect, Format, ALL_FORMATS};
pub use native::{Metadata, Process, DEFAULT_LEVEL};
pub use summary::{summarize, Summary};

/// A stream of events, read in batches at constant memory.
pub trait TraceSource {
    /// Clear `out` and fill it with the next events (about [`crate::event::BATCH`] of them).
    /// Returns `Ok(false)`, with `out` empty, once the trace is exhausted.
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool>;

    /// Bytes of the underlying file consumed so far, for progress reports.
    fn bytes_read(&self) -> u64 {
        0
    }

    /// Well-formed records read but not turned into events because they carry nothing to
    /// simulate (din label 3, xdin `m` and `c`, lackey `SB` lines), so far.
    fn skipped(&self) -> u64 {
        0
    }

    /// What the trace says about itself (native traces only).
    fn metadata(&self) -> Option<&Metadata> {
        None
    }
}

/// A boxed source is a source (so that wrappers like [`crate::workload::Rewrite`] take what
/// [`open`] returns).
impl<T: TraceSource + ?Sized> TraceSource for Box<T> {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        (**self).next_batch(out)
    }

    fn bytes_read(&self) -> u64 {
        (**self).bytes_read()
    }

    fn skipped(&self) -> u64 {
        (**self).skipped()
    }

    fn metadata(&self) -> Option<&Metadata> {
        (**self).metadata()
    }
}

/// Somewhere events can be written.
pub trait TraceSink {
    fn write_batch(&mut self, events: &[Event]) -> Result<()>;
    /// Flush and close; only after this does the output exist under its final name.
    fn finish(self: Box<Self>) -> Result<()>;

    /// Events written so far that the format cannot represent and were left out (e.g.
    /// control events in lackey).
    fn dropped(&self) -> u64 {
        0
    }
}

/// Bytes of a file's decompressed start looked at to detect its format.
const SNIFF: usize = format::SNIFF_BYTES;

/// Opens the trace at `path`, decompressing it if it is compressed (gzip, xz, zstd, by magic
/// number), in `format` or else the detected format.
pub fn open(path: &Path, format: Option<Format>) -> Result<Box<dyn TraceSource + Send>> {
    let (input, format) = open_input(path, format)?;
    reader(input, format)
}

/// Opens `path` once and settles its format (detecting it, unless given, from the first
/// bytes of the very input that is then read: never by opening the path again, which would
/// lose what a pipe had already handed out).
pub fn open_input(path: &Path, format: Option<Format>) -> Result<(compress::Input, Format)> {
    let mut input = compress::Input::open(path)?;
    let format = match format {
        Some(f) => f,
        None => detect(path, input.peek(SNIFF)?)?,
    };
    Ok((input, format))
}

/// The reader of `format` over `input` (any byte source, see [`compress::Input`]).
pub fn reader(input: compress::Input, format: Format) -> Result<Box<dyn TraceSource + Send>> {
    Ok(match format {
        Format::Lackey => Box::new(lackey::reader(input)),
        Format::Din => Box::new(din::reader(input)),
        Format::XDin => Box::new(xdin::reader(input)),
        Format::Native => Box::new(native::NativeReader::new(input)?),
        Format::ChampSim => Box::new(champsim::reader(input)),
        Format::CloudSuite => Box::new(champsim::cloudsuite_reader(input)),
    })
}

/// Options of [`create_with`].
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// zstd level of the native format's record stream.
    pub level: i32,
}

impl Default for WriteOptions {
    fn default() -> WriteOptions {
        WriteOptions {
            level: DEFAULT_LEVEL,
        }
    }
}

/// Creates a trace at `path` in `format` or else the format its extension names, compressed
/// if the extension says so (`.gz`, `.xz`, `.zst`). `meta` goes into native headers (text
/// formats have nowhere to put it). Nothing appears under `path` until the sink is finished.
pub fn create(
    path: &Path,
    format: Option<Format>,
    meta: &Metadata,
) -> Result<Box<dyn TraceSink + Send>> {
    create_with(path, format, meta, &WriteOptions::default())
}

/// [`create`] with options.
pub fn create_with(
    path: &Path,
    format: Option<Format>,
    meta: &Metadata,
    options: &WriteOptions,
) -> Result<Box<dyn TraceSink + Send>> {
    let format = match format.or_else(|| Format::from_extension(path)) {
        Some(f) => f,
        None => {
            return Err(Error::Usage(format!(
                "{}: cannot tell the output format from the name; use .lks, .lackey, .din, \
                 .xdin or .champsimtrace (optionally followed by .gz, .xz or .zst), or name \
                 the format",
                path.display()
            )))
        }
    };
    Ok(match format {
        Format::Lackey => Box::new(lackey::writer(path)?),
        Format::Din => Box::new(din::writer(path)?),
        Format::XDin => Box::new(xdin::writer(path)?),
        Format::Native => Box::new(native::NativeWriter::create(path, meta, options.level)?),
        Format::ChampSim => Box::new(champsim::writer(path)?),
        Format::CloudSuite => {
            return Err(Error::NotYet(
                "writing CloudSuite traces (they can be read; write ChampSim's own format, \
                 .champsimtrace, instead)"
                    .into(),
            ))
        }
    })
}

/// Copies every event of `source` into `sink` and finishes it; returns the events the sink
/// kept (those it could represent).
pub fn copy(source: &mut dyn TraceSource, sink: Box<dyn TraceSink + Send>) -> Result<u64> {
    copy_counted(source, sink).map(|c| c.written)
}

/// What a conversion did: the events read, and how many of them the output kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Converted {
    /// Events read from the source.
    pub read: u64,
    /// Events written (those the output format can represent).
    pub written: u64,
}

impl Converted {
    /// Events the output format could not represent and left out.
    pub fn left_out(&self) -> u64 {
        self.read - self.written
    }
}

/// [`copy`], saying how many events were read as well as written.
pub fn copy_counted(
    source: &mut dyn TraceSource,
    mut sink: Box<dyn TraceSink + Send>,
) -> Result<Converted> {
    let mut batch = Vec::new();
    let mut read = 0u64;
    while source.next_batch(&mut batch)? {
        sink.write_batch(&batch)?;
        read += batch.len() as u64;
    }
    let written = read - sink.dropped();
    sink.finish()?;
    Ok(Converted { read, written })
}

/// Converts the trace at `src` (in `src_format`, else detected) into `dst` (in `dst_format`,
/// else named by its extension). The metadata written is `meta`, completed from the
/// source's own metadata and with the source format filled in. Returns the events written.
pub fn convert(
    src: &Path,
    src_format: Option<Format>,
    dst: &Path,
    dst_format: Option<Format>,
    meta: &Metadata,
) -> Result<u64> {
    convert_counted(src, src_format, dst, dst_format, meta).map(|c| c.written)
}

/// [`convert`], saying how many events were read as well as written (the difference is
/// what the output format could not represent).
pub fn convert_counted(
    src: &Path,
    src_format: Option<Format>,
    dst: &Path,
    dst_format: Option<Format>,
    meta: &Metadata,
) -> Result<Converted> {
    let (input, f) = open_input(src, src_format)?;
    convert_source(
        reader(input, f)?.as_mut(),
        f.name(),
        dst,
        dst_format,
        meta,
        &WriteOptions::default(),
    )
}

/// Writes every event of `source`, whose format is named `src_format` (it goes into the
/// output's metadata when `meta` does not say), to `dst` in `dst_format` or the format its
/// extension names, with `meta` and the source's own provenance, written with `options`;
/// the tool is always this one.
pub fn convert_source(
    source: &mut dyn TraceSource,
    src_format: &str,
    dst: &Path,
    dst_format: Option<Format>,
    meta: &Metadata,
    options: &WriteOptions,
) -> Result<Converted> {
    let mut meta = meta.clone();
    if let Some(m) = source.metadata() {
        let tool = meta.tool.take();
        meta = meta.or(m);
        meta.tool = tool;
    }
    if meta.source_format.is_none() {
        meta.source_format = Some(src_format.to_string());
    }
    let sink = create_with(dst, dst_format, &meta, options)?;
    copy_counted(source, sink)
}
