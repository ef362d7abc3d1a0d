//! The trace formats Lookaside reads and writes, and how a file's format is recognised.
//!
//! A format is chosen once, when a file is opened (as DineroIV's `-informat` chooses its input
//! function once). Users rarely want to say which format a file is in, so [`detect`] looks at
//! the file's first (decompressed) bytes: the native magic number, or else which of the text
//! syntaxes accepts the first lines. The extension (`.lackey`, `.din`, `.xdin`, `.lks`,
//! `.champsim`/`.champsimtrace`, `.cloudsuite`, optionally followed by `.gz`, `.xz` or
//! `.zst`) settles ties and names the format of files too short to tell; an explicit format
//! overrides both. ChampSim traces have no magic number and no text to recognise, so they are
//! known by name (or by the explicit format) only: content alone never makes a file
//! ChampSim, and a file named `.champsim` whose content is a text or native trace is read as
//! what it is.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use super::compress::{display, Compression};
use super::din::Din;
use super::lackey::Lackey;
use super::native::MAGIC;
use super::textio::sniff;
use super::xdin::XDin;
use crate::error::{Error, Location, Result};

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Valgrind lackey `--trace-mem=yes` text.
    Lackey,
    /// DineroIII/IV classic din text (`label address`).
    Din,
    /// DineroIV extended din text (`type address size`).
    XDin,
    /// Lookaside's own compressed binary format (`.lks`).
    Native,
    /// ChampSim's 64-byte instruction records (`.champsimtrace`).
    ChampSim,
    /// The CloudSuite variant of ChampSim's records (96 bytes, with an address-space id).
    CloudSuite,
}

/// Every format, in the order they are listed to users.
pub const ALL_FORMATS: [Format; 6] = [
    Format::Native,
    Format::Lackey,
    Format::Din,
    Format::XDin,
    Format::ChampSim,
    Format::CloudSuite,
];

impl Format {
    /// The name used on command lines and in metadata (`lackey`, `din`, `xdin`, `native`,
    /// `champsim`, `cloudsuite`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Lackey => "lackey",
            Format::Din => "din",
            Format::XDin => "xdin",
            Format::Native => "native",
            Format::ChampSim => "champsim",
            Format::CloudSuite => "cloudsuite",
        }
    }

    /// The file extension of the format (without compression).
    pub fn extension(self) -> &'static str {
        match self {
            Format::Lackey => "lackey",
            Format::Din => "din",
            Format::XDin => "xdin",
            Format::Native => "lks",
            Format::ChampSim => "champsimtrace",
            Format::CloudSuite => "cloudsuite",
        }
    }

    /// The format named by the extension of `path`, looking past one compression extension
    /// (`trace.din.gz` is din).
    pub fn from_extension(path: &Path) -> Option<Format> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let mut parts = name.rsplit('.');
        let mut ext = parts.next()?;
        if matches!(ext, "gz" | "xz" | "zst" | "zstd") {
            ext = parts.next()?;
        }
        if !name.contains('.') {
            return None;
        }
        if ext == "champsim" {
            return Some(Format::ChampSim);
        }
        ALL_FORMATS.into_iter().find(|f| f.extension() == ext)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Format {
    type Err = Error;

    fn from_str(s: &str) -> Result<Format> {
        match s.to_ascii_lowercase().as_str() {
            "lackey" => Ok(Format::Lackey),
            "din" => Ok(Format::Din),
            "xdin" => Ok(Format::XDin),
            "native" | "lks" => Ok(Format::Native),
            "champsim" => Ok(Format::ChampSim),
            "cloudsuite" => Ok(Format::CloudSuite),
            _ => Err(Error::Usage(format!(
                "unknown trace format '{s}' (expected lackey, din, xdin, native, champsim or \
                 cloudsuite)"
            ))),
        }
    }
}

/// Bytes of a file looked at to detect its format.
pub const SNIFF_BYTES: usize = 16 * 1024;

/// Detects the format of the trace at `path` from its first decompressed bytes `first_bytes`
/// (at most [`SNIFF_BYTES`] are looked at; if fewer are given they are taken to be the whole
/// file), falling back on the extension.
pub fn detect(path: &Path, first_bytes: &[u8]) -> Result<Format> {
    let whole = first_bytes.len() < SNIFF_BYTES;
    let sample = &first_bytes[..first_bytes.len().min(SNIFF_BYTES)];
    let by_ext = Format::from_extension(path);
    if sample.starts_with(MAGIC) {
        return Ok(Format::Native);
    }
    if Compression::detect(sample) != Compression::None {
        return Err(Error::trace(
            display(path),
            Location::Whole,
            "format",
            "compressed twice (decompress it once first)",
        ));
    }
    // Which text syntaxes accept the sample, and on how many non-blank lines.
    let votes = [
        (Format::Lackey, sniff(Lackey::default(), sample, whole)),
        (Format::Din, sniff(Din::default(), sample, whole)),
        (Format::XDin, sniff(XDin::default(), sample, whole)),
    ];
    let accepted: Vec<Format> = votes
        .iter()
        .filter(|(_, v)| matches!(v, Some(n) if *n > 0))
        .map(|(f, _)| *f)
        .collect();
    if let Some(ext) = by_ext {
        if accepted.is_empty() || accepted.contains(&ext) {
            // Also when nothing fits: the reader then reports the first bad line precisely.
            return Ok(ext);
        }
    }
    match accepted.as_slice() {
        [one] => Ok(*one),
        [] if sample.is_empty() => Err(Error::trace(
            display(path),
            Location::Whole,
            "format",
            "empty file without a trace extension: cannot tell its format (give it one)",
        )),
        [] => Err(Error::trace(
            display(path),
            Location::Whole,
            "format",
            "not a trace in any known format (native, lackey, din, xdin); \
             if it is one, name the format explicitly to see what is wrong \
             (ChampSim traces have no magic number: name them .champsimtrace)",
        )),
        many => Err(Error::trace(
            display(path),
            Location::Whole,
            "format",
            format!(
                "could be {}: name the format explicitly",
                many.iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print() {
        for f in ALL_FORMATS {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
            assert_eq!(f.to_string(), f.name());
        }
        assert_eq!("LKS".parse::<Format>().unwrap(), Format::Native);
        assert_eq!(
            "pixie".parse::<Format>().unwrap_err().to_string(),
            "unknown trace format 'pixie' (expected lackey, din, xdin, native, champsim or \
             cloudsuite)"
        );
    }

    #[test]
    fn extensions_look_past_compression() {
        let f = |p: &str| Format::from_extension(Path::new(p));
        assert_eq!(f("a/b.din"), Some(Format::Din));
        assert_eq!(f("b.XDIN.gz"), Some(Format::XDin));
        assert_eq!(f("b.lackey.zst"), Some(Format::Lackey));
        assert_eq!(f("b.lks"), Some(Format::Native));
        assert_eq!(f("b.lks.xz"), Some(Format::Native));
        assert_eq!(f("din"), None);
        assert_eq!(f("b.gz"), None);
        assert_eq!(f("b.txt"), None);
        assert_eq!(
            f("600.perlbench_s-210B.champsimtrace.xz"),
            Some(Format::ChampSim)
        );
        assert_eq!(f("t.CHAMPSIM.gz"), Some(Format::ChampSim));
        assert_eq!(f("t.champsimtrace.zst"), Some(Format::ChampSim));
        assert_eq!(f("t.champsimtrace"), Some(Format::ChampSim));
        assert_eq!(f("t.cloudsuite.xz"), Some(Format::CloudSuite));
        assert_eq!(f("champsimtrace"), None);
        // A name that is not UTF-8 (on Unix a file name is any bytes) still has its extension.
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let name = std::ffi::OsStr::from_bytes(b"caf\xe9.din.gz");
            assert_eq!(Format::from_extension(Path::new(name)), Some(Format::Din));
        }
    }

    #[test]
    fn champsim_is_known_by_name_only() {
        let d = |p: &str, b: &[u8]| detect(Path::new(p), b);
        let mut rec = vec![0u8; 128];
        rec[..8].copy_from_slice(&0x401000u64.to_le_bytes());
        assert_eq!(d("t.champsimtrace", &rec).unwrap(), Format::ChampSim);
        assert_eq!(d("t.champsim", b"").unwrap(), Format::ChampSim);
        assert_eq!(d("t.cloudsuite", &rec).unwrap(), Format::CloudSuite);
        let err = d("t", &rec).unwrap_err().to_string();
        assert!(err.contains("name them .champsimtrace"), "{err}");
        // Other formats under a ChampSim name are still what they are.
        assert_eq!(
            d("t.champsim", b"I  0400d7d4,8\n L 04222cac,8\n").unwrap(),
            Format::Lackey
        );
        assert_eq!(d("t.champsimtrace", b"2 0\n0 1000\n").unwrap(), Format::Din);
        assert_eq!(
            d("t.champsimtrace", b"LKSTRACE\x01\x00").unwrap(),
            Format::Native
        );
        // And a ChampSim record never passes for text, whatever its name.
        for name in ["t", "t.din", "t.lackey", "t.xdin"] {
            assert_ne!(d(name, &rec).ok(), Some(Format::ChampSim), "{name}");
        }
    }

    #[test]
    fn content_decides_and_extension_breaks_ties() {
        let d = |p: &str, b: &[u8]| detect(Path::new(p), b);
        let lackey = b"==1== Lackey\nI  0400d7d4,8\n L 04222cac,8\n";
        let din = b"2 0\n0 1000\n1 70f6088c\n";
        let xdin = b"r 1000 4\ni 400 2\n";
        assert_eq!(d("t", lackey).unwrap(), Format::Lackey);
        assert_eq!(
            d("t.din", lackey).unwrap(),
            Format::Lackey,
            "content beats a wrong name"
        );
        assert_eq!(d("t", din).unwrap(), Format::Din);
        assert_eq!(d("t", xdin).unwrap(), Format::XDin);
        assert_eq!(d("t", b"LKSTRACE\x01\x00").unwrap(), Format::Native);
        assert_eq!(d("t.din", b"").unwrap(), Format::Din);
        assert_eq!(
            d("t.din", b"zz top\n").unwrap(),
            Format::Din,
            "the reader will say why"
        );
        assert_eq!(
            d("t", b"").unwrap_err().to_string(),
            "t: format: empty file without a trace extension: cannot tell its format (give it one)"
        );
        assert!(d("t", b"hello world\n").is_err());
        assert!(d("t", b"\n\n").is_err());
    }

    #[test]
    fn a_cut_last_line_does_not_spoil_detection() {
        let mut big = Vec::new();
        while big.len() < SNIFF_BYTES + 100 {
            big.extend_from_slice(b"I  0400d7d4,8\n");
        }
        assert_eq!(
            detect(Path::new("t"), &big[..SNIFF_BYTES + 5]).unwrap(),
            Format::Lackey
        );
    }
}
