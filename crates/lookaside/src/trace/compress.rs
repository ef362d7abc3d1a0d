//! Transparent compression for trace files, on both sides.
//!
//! Traces are large and compress ten- to fifty-fold, so people keep them as `.gz`, `.xz` or
//! `.zst`. Input compression is recognised by its magic bytes (never by the name, which lies
//! often enough), so every reader sees a plain byte stream through [`Input`]. Output
//! compression follows the extension, and every output goes to a temporary file beside its
//! target that is renamed into place only when the writer finishes ([`Output`]): an
//! interrupted conversion never leaves a partial file under the final name.
//!
//! Errors are sorted by where they come from: the file system ([`Error::Io`]), or the
//! compressed stream being corrupt or cut short ([`Error::Trace`] with field `compression` and
//! the offset reached in the decompressed stream).

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Location, Result};

/// How a file is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Xz,
    Zstd,
}

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

impl Compression {
    /// The compression whose magic number starts `bytes` ([`Compression::None`] if none does).
    pub fn detect(bytes: &[u8]) -> Compression {
        if bytes.starts_with(GZIP_MAGIC) {
            Compression::Gzip
        } else if bytes.starts_with(XZ_MAGIC) {
            Compression::Xz
        } else if bytes.starts_with(ZSTD_MAGIC) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// The compression named by the last extension of `path` (`.gz`, `.xz`, `.zst`/`.zstd`).
    pub fn from_extension(path: &Path) -> Compression {
        match extension(path).as_deref() {
            Some("gz") => Compression::Gzip,
            Some("xz") => Compression::Xz,
            Some("zst" | "zstd") => Compression::Zstd,
            _ => Compression::None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
        }
    }
}

/// The lower-cased last extension of `path`, if any.
pub(crate) fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
}

/// `path` as it appears in messages and results (`-` is standard input).
pub fn display(path: &Path) -> String {
    if path.as_os_str() == STDIN {
        return STDIN_NAME.to_string();
    }
    path.display().to_string()
}

/// What [`RawFile`] shares with its owner: bytes consumed and whether the file itself failed.
#[derive(Debug, Default)]
struct RawStats {
    bytes: AtomicU64,
    failed: AtomicBool,
}

/// The file as stored on disk (or any byte source), counting what is read from it (for
/// progress reports) and remembering whether an error came from the file rather than from a
/// decompressor above it.
struct RawFile {
    file: Box<dyn Read + Send>,
    stats: Arc<RawStats>,
}

impl Read for RawFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.file.read(buf) {
            Ok(n) => {
                self.stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                Ok(n)
            }
            Err(e) => {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.stats.failed.store(true, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }
}

/// The path that names standard input, as in most Unix tools.
pub const STDIN: &str = "-";

/// How standard input is named in messages.
pub const STDIN_NAME: &str = "<stdin>";

/// Bytes of the stored file read ahead for the magic-number check.
const RAW_BUF: usize = 256 * 1024;

/// A trace file opened for reading, decompressed if it is compressed.
///
/// The first decompressed bytes can be [`peek`](Input::peek)ed before any reader is chosen,
/// which is how the format is detected without reopening the file.
pub struct Input {
    inner: Box<dyn Read + Send>,
    compression: Compression,
    stats: Arc<RawStats>,
    path: String,
    /// Bytes peeked but not yet handed out, and how many of them were handed out.
    peeked: Vec<u8>,
    peek_pos: usize,
    /// Decompressed bytes handed out so far.
    offset: u64,
    /// Whether the decompressor (not the file) reported an error.
    decompression_failed: bool,
}

impl Input {
    /// Opens `path` and recognises its compression from the magic bytes. `-` is standard
    /// input. A path is opened exactly once, so a pipe or FIFO (`/dev/stdin`, `<(zcat …)`)
    /// reads the same bytes a file would: callers detect the format on the returned input
    /// ([`Input::peek`]) instead of opening the path a second time.
    pub fn open(path: &Path) -> Result<Input> {
        if path.as_os_str() == STDIN {
            return Input::from_reader(&display(path), Box::new(io::stdin()));
        }
        let name = display(path);
        let file = File::open(path).map_err(|e| Error::io(&name, e))?;
        Input::from_reader(&name, Box::new(file))
    }

    /// An input reading the bytes `bytes`, named `name` in messages (for tests and fuzzing).
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Input> {
        Input::from_reader(name, Box::new(io::Cursor::new(bytes)))
    }

    /// An input over any byte stream (a file, a pipe), named `name` in messages.
    pub fn from_reader(name: &str, file: Box<dyn Read + Send>) -> Result<Input> {
        let name = name.to_string();
        let stats = Arc::new(RawStats::default());
        let mut raw = BufReader::with_capacity(
            RAW_BUF,
            RawFile {
                file,
                stats: Arc::clone(&stats),
            },
        );
        let head = loop {
            match io::BufRead::fill_buf(&mut raw) {
                Ok(head) => break head,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io(&name, e)),
            }
        };
        let compression = Compression::detect(head);
        let inner: Box<dyn Read + Send> = match compression {
            Compression::None => Box::new(raw),
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
            Compression::Xz => Box::new(xz2::bufread::XzDecoder::new_multi_decoder(raw)),
            Compression::Zstd => {
                let dec = zstd::stream::read::Decoder::with_buffer(raw)
                    .map_err(|e| Error::io(&name, e))?;
                Box::new(dec)
            }
        };
        Ok(Input {
            inner,
            compression,
            stats,
            path: name,
            peeked: Vec::new(),
            peek_pos: 0,
            offset: 0,
            decompression_failed: false,
        })
    }

    /// The path, as it appears in messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Bytes of the stored (possibly compressed) file consumed so far.
    pub fn raw_bytes(&self) -> u64 {
        self.stats.bytes.load(Ordering::Relaxed)
    }

    /// Decompressed bytes handed out by [`Read::read`] so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The first (up to) `n` decompressed bytes, without consuming them. Call before reading.
    pub fn peek(&mut self, n: usize) -> Result<&[u8]> {
        while self.peeked.len() < n {
            let have = self.peeked.len();
            self.peeked.resize(n, 0);
            match self.inner.read(&mut self.peeked[have..]) {
                Ok(0) => {
                    self.peeked.truncate(have);
                    break;
                }
                Ok(k) => self.peeked.truncate(have + k),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.peeked.truncate(have),
                Err(e) => {
                    self.peeked.truncate(have);
                    return Err(self.error(e));
                }
            }
        }
        let end = n.min(self.peeked.len());
        Ok(&self.peeked[self.peek_pos.min(end)..end])
    }

    /// Reads until `buf` is full or the stream ends; returns the bytes read.
    pub fn read_full(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(k) => filled += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(e)),
            }
        }
        Ok(filled)
    }

    /// Turns an error met while reading into the right [`Error`]: an I/O error if the file
    /// failed, a `compression` error (at the decompressed offset reached) if the decompressor
    /// did.
    pub fn error(&self, e: io::Error) -> Error {
        if self.stats.failed.load(Ordering::Relaxed) || self.compression == Compression::None {
            Error::io(&self.path, e)
        } else {
            Error::trace(
                &self.path,
                Location::Byte(self.offset),
                "compression",
                format!(
                    "corrupt or truncated {} stream: {e}",
                    self.compression.name()
                ),
            )
        }
    }

    /// True if an error came from the stored file rather than from decompression.
    pub fn file_failed(&self) -> bool {
        self.stats.failed.load(Ordering::Relaxed)
    }

    /// True if the decompressor reported an error (a corrupt or truncated compressed file).
    pub fn decompression_failed(&self) -> bool {
        self.decompression_failed
    }
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = if self.peek_pos < self.peeked.len() {
            let n = buf.len().min(self.peeked.len() - self.peek_pos);
            buf[..n].copy_from_slice(&self.peeked[self.peek_pos..self.peek_pos + n]);
            self.peek_pos += n;
            if self.peek_pos == self.peeked.len() {
                self.peeked = Vec::new();
                self.peek_pos = 0;
            }
            n
        } else {
            match self.inner.read(buf) {
                Ok(n) => n,
                Err(e) => {
                    let file = self.stats.failed.load(Ordering::Relaxed);
                    if !file && e.kind() != io::ErrorKind::Interrupted {
                        self.decompression_failed = self.compression != Compression::None;
                    }
                    return Err(e);
                }
            }
        };
        self.offset += n as u64;
        Ok(n)
    }
}

/// The encoder stack of an [`Output`].
enum Encoder {
    Plain(BufWriter<File>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
    Xz(xz2::write::XzEncoder<BufWriter<File>>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
}

/// Bytes buffered between an encoder and the file.
const OUT_BUF: usize = 256 * 1024;

/// A trace file being written: compressed as its extension says, into a temporary file that
/// [`commit`](Output::commit) renames into place. Dropped without a commit, the temporary
/// file is removed. A destination that exists and is not a regular file (a FIFO, a
/// terminal, `/dev/null`) is written directly: a capture streams into a simulation that
/// reads the FIFO, and a reader of a stream cut short sees its end missing.
pub struct Output {
    enc: Option<Encoder>,
    tmp: PathBuf,
    dst: PathBuf,
    path: String,
}

impl Output {
    /// Creates the temporary file beside `path` and the encoder its extension asks for.
    pub fn create(path: &Path) -> Result<Output> {
        Output::create_with(path, Compression::from_extension(path))
    }

    /// Like [`Output::create`] with an explicit compression.
    pub fn create_with(path: &Path, compression: Compression) -> Result<Output> {
        let name = display(path);
        let (tmp, file) = if is_stream(path) {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(&name, e))?;
            (PathBuf::new(), file)
        } else {
            create_partial(path).map_err(|e| Error::io(&name, e))?
        };
        let mut out = Output {
            enc: None,
            tmp,
            dst: path.to_path_buf(),
            path: name,
        };
        let buf = BufWriter::with_capacity(OUT_BUF, file);
        out.enc = Some(match compression {
            Compression::None => Encoder::Plain(buf),
            Compression::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                buf,
                flate2::Compression::default(),
            )),
            Compression::Xz => Encoder::Xz(xz2::write::XzEncoder::new(buf, 6)),
            Compression::Zstd => {
                let mut enc = zstd::stream::write::Encoder::new(buf, 3)
                    .map_err(|e| Error::io(&out.path, e))?;
                enc.include_checksum(true)
                    .map_err(|e| Error::io(&out.path, e))?;
                Encoder::Zstd(enc)
            }
        });
        Ok(out)
    }

    /// The final path, as it appears in messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Turns a write error into an [`Error`] naming the output.
    pub fn error(&self, e: io::Error) -> Error {
        Error::io(&self.path, e)
    }

    /// Finishes the compressed stream, flushes it to disk and renames the file into place.
    pub fn commit(mut self) -> Result<()> {
        let enc = match self.enc.take() {
            Some(enc) => enc,
            None => {
                return Err(Error::Usage(format!(
                    "{}: output already closed",
                    self.path
                )))
            }
        };
        let buf = match enc {
            Encoder::Plain(w) => Ok(w),
            Encoder::Gzip(w) => w.finish(),
            Encoder::Xz(w) => w.finish(),
            Encoder::Zstd(w) => w.finish(),
        }
        .map_err(|e| Error::io(&self.path, e))?;
        let file = buf
            .into_inner()
            .map_err(|e| Error::io(&self.path, e.into_error()))?;
        if self.tmp.as_os_str().is_empty() {
            // A stream: everything is written; there is nothing to sync or rename.
            return Ok(());
        }
        file.sync_all().map_err(|e| Error::io(&self.path, e))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.dst).map_err(|e| Error::io(&self.path, e))?;
        // Renamed: nothing left for Drop to clean up.
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.enc {
            Some(Encoder::Plain(w)) => w.write(buf),
            Some(Encoder::Gzip(w)) => w.write(buf),
            Some(Encoder::Xz(w)) => w.write(buf),
            Some(Encoder::Zstd(w)) => w.write(buf),
            None => Err(io::Error::other("output already closed")),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.enc {
            Some(Encoder::Plain(w)) => w.write_all(buf),
            Some(Encoder::Gzip(w)) => w.write_all(buf),
            Some(Encoder::Xz(w)) => w.write_all(buf),
            Some(Encoder::Zstd(w)) => w.write_all(buf),
            None => Err(io::Error::other("output already closed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.enc {
            Some(Encoder::Plain(w)) => w.flush(),
            Some(Encoder::Gzip(w)) => w.flush(),
            Some(Encoder::Xz(w)) => w.flush(),
            Some(Encoder::Zstd(w)) => w.flush(),
            None => Ok(()),
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Not committed: close the file first, then remove the partial output.
        self.enc = None;
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Whether `path` exists and is not a regular file (or a link to one): a FIFO, a character
/// device or a socket, written in place rather than through a temporary file.
pub fn is_stream(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// Creates a fresh temporary file in the directory of `path`, named after it so that a
/// leftover is recognisable, and never under the final name: `.NAME.PID.N.partial`. It is
/// created with mode 0666 less the umask, as the final file would be. Stale partial files
/// of the same naming in that directory, left by a process that no longer runs (killed, or
/// the machine went down), are removed first, once per directory and process: each run
/// that writes into a directory tidies it (a sweep writing 10⁴ points lists it once).
/// Every writer of Lookaside (the Python layer too) makes its temporary files here.
pub fn create_partial(path: &Path) -> io::Result<(PathBuf, File)> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    static TIDIED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    if let Ok(mut tidied) = TIDIED.lock() {
        if !tidied.contains(&dir) {
            remove_stale_partials(&dir);
            tidied.push(dir.clone());
        }
    }
    let base = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    for _ in 0..1000 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{base}.{pid}.{n}.partial"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}

/// The process id in a partial file's name `.NAME.PID.N.partial`, if it is one.
fn partial_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?.strip_suffix(".partial")?;
    let mut parts = rest.rsplitn(3, '.');
    let n = parts.next()?;
    let pid = parts.next()?;
    parts.next()?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` still runs. Only answered where `/proc` lists processes; elsewhere
/// every process counts as alive, so that nothing in use is ever removed.
fn process_alive(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

/// Removes the partial files in `dir` (see [`create_partial`]) whose process is gone.
/// Best effort: a directory that cannot be listed, or a file that cannot be removed, is
/// left as it is.
pub fn remove_stale_partials(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(partial_pid) else {
            continue;
        };
        if pid != me && !process_alive(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("lookaside-compress-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn magic_numbers_are_recognised() {
        assert_eq!(Compression::detect(&[0x1f, 0x8b, 8]), Compression::Gzip);
        assert_eq!(Compression::detect(b"\xfd7zXZ\x00\x00"), Compression::Xz);
        assert_eq!(
            Compression::detect(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Compression::Zstd
        );
        assert_eq!(Compression::detect(b"I  0400"), Compression::None);
        assert_eq!(Compression::detect(b""), Compression::None);
        assert_eq!(
            Compression::from_extension(Path::new("a.din.ZST")),
            Compression::Zstd
        );
        assert_eq!(
            Compression::from_extension(Path::new("a.din")),
            Compression::None
        );
    }

    #[test]
    fn every_compression_round_trips_and_commits_atomically() {
        let dir = tmpdir("rt");
        let data: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for ext in ["raw", "gz", "xz", "zst"] {
            let path = dir.join(format!("t.{ext}"));
            let mut out = Output::create(&path).unwrap();
            out.write_all(&data).unwrap();
            assert!(!path.exists(), "the final name appears only on commit");
            out.commit().unwrap();
            let mut input = Input::open(&path).unwrap();
            let expect = match ext {
                "gz" => Compression::Gzip,
                "xz" => Compression::Xz,
                "zst" => Compression::Zstd,
                _ => Compression::None,
            };
            assert_eq!(input.compression(), expect);
            assert_eq!(input.peek(4).unwrap(), &data[..4]);
            let mut back = Vec::new();
            input.read_to_end(&mut back).unwrap();
            assert_eq!(back, data, "{ext}");
            assert_eq!(input.raw_bytes(), std::fs::metadata(&path).unwrap().len());
        }
        // Nothing but the committed files is left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(names.len(), 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A FIFO is written in place (a reader on its other end gets the bytes as they come),
    /// not replaced by a regular file on commit; dropped uncommitted, it stays a FIFO.
    #[test]
    fn a_fifo_is_written_in_place() {
        let dir = tmpdir("fifo");
        let path = dir.join("t.zst");
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        if !made.is_ok_and(|s| s.success()) {
            return; // no mkfifo here: nothing to test
        }
        assert!(is_stream(&path) && !is_stream(&dir) && !is_stream(&dir.join("none")));
        let reader = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut back = Vec::new();
                Input::open(&path).unwrap().read_to_end(&mut back).unwrap();
                back
            })
        };
        let data: Vec<u8> = (0..50_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let mut out = Output::create(&path).unwrap();
        out.write_all(&data).unwrap();
        out.commit().unwrap();
        assert_eq!(reader.join().unwrap(), data);
        assert!(is_stream(&path), "still a FIFO");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn dropping_an_output_removes_the_partial_file() {
        let dir = tmpdir("drop");
        let path = dir.join("t.zst");
        let mut out = Output::create(&path).unwrap();
        out.write_all(b"partial").unwrap();
        drop(out);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stale_partial_files_of_dead_processes_are_removed() {
        let dir = tmpdir("stale");
        // A process id no process has (above Linux's pid_max of 2^22).
        let dead = dir.join(".t.zst.4999999.0.partial");
        let mine = dir.join(format!(".t.zst.{}.7.partial", std::process::id()));
        let alive = dir.join(".t.zst.1.0.partial"); // init runs
        let other = dir.join(".notes.4999999.x.partial"); // not of our naming
        for p in [&dead, &mine, &alive, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        let out = Output::create(&dir.join("u.din")).unwrap();
        if Path::new("/proc/self").exists() {
            assert!(!dead.exists(), "a dead process's partial file is removed");
        }
        assert!(mine.exists() && other.exists() && alive.exists());
        drop(out);
        assert_eq!(partial_pid(".a.b.12.3.partial"), Some(12));
        assert_eq!(partial_pid(".12.3.partial"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn truncated_or_corrupt_streams_are_compression_errors() {
        let dir = tmpdir("trunc");
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i * 7919).to_le_bytes())
            .collect();
        for ext in ["gz", "xz", "zst"] {
            let path = dir.join(format!("t.{ext}"));
            let mut out = Output::create(&path).unwrap();
            out.write_all(&data).unwrap();
            out.commit().unwrap();
            let full = std::fs::read(&path).unwrap();
            for cut in [full.len() / 3, full.len() - 1] {
                std::fs::write(&path, &full[..cut]).unwrap();
                let mut input = Input::open(&path).unwrap();
                let mut buf = vec![0; 1 << 20];
                let err = loop {
                    match input.read_full(&mut buf) {
                        Ok(0) => panic!("{ext} cut at {cut} read as complete"),
                        Ok(_) => continue,
                        Err(e) => break e,
                    }
                };
                let msg = err.to_string();
                assert!(msg.contains("compression"), "{ext}: {msg}");
                assert!(msg.contains("byte offset"), "{ext}: {msg}");
            }
            // Corrupt the middle of the stream.
            let mut bad = full.clone();
            let mid = bad.len() / 2;
            for b in &mut bad[mid..mid + 16] {
                *b ^= 0x5a;
            }
            std::fs::write(&path, &bad).unwrap();
            let mut input = Input::open(&path).unwrap();
            let mut back = Vec::new();
            assert!(
                input.read_to_end(&mut back).is_err() || back != data,
                "{ext}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
