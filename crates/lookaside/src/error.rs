//! Typed errors of the engine. Every error names where the bad input is — the file, the line or
//! byte offset, and the field or config key — so the front ends can print it as it is and exit
//! non-zero. The engine never panics on bad input.

use std::fmt;

/// Where in an input the problem is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// 1-based line of a text input.
    Line(u64),
    /// 0-based byte offset (in the decompressed stream of a compressed input).
    Byte(u64),
    /// The whole input (e.g. empty or unreadable).
    Whole,
    /// 1-based event of a trace, in stream order (where a consumer of events found the
    /// problem, after the reader had decoded them).
    Event(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Byte(n) => write!(f, "byte offset {n}"),
            Location::Whole => Ok(()),
            Location::Event(n) => write!(f, "event {n}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A trace is malformed: `field` names what was wrong (e.g. `address`, `label`, `magic`).
    #[error("{path}{}{location}: {field}: {message}", if matches!(location, Location::Whole) { "" } else { ": " })]
    Trace {
        path: String,
        location: Location,
        field: String,
        message: String,
    },
    /// A machine description is invalid: `key` is the dotted config key (e.g. `tlb.dtlb.ways`);
    /// `position` the 1-based line and column in the source's text, when known.
    #[error("{source_name}{}: {key}: {message}", Position(*position))]
    Config {
        source_name: String,
        position: Option<(u64, u64)>,
        key: String,
        message: String,
    },
    /// A capability that is designed but not built yet.
    #[error("not yet implemented: {0}")]
    NotYet(String),
    /// A bad argument to an API or command.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn trace(
        path: impl Into<String>,
        location: Location,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Error {
        Error::Trace {
            path: path.into(),
            location,
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn config(
        source_name: impl Into<String>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Error {
        Error::Config {
            source_name: source_name.into(),
            position: None,
            key: key.into(),
            message: message.into(),
        }
    }

    /// A config error at a 1-based `line` and `column` of the source's text.
    pub fn config_at(
        source_name: impl Into<String>,
        line: u64,
        column: u64,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Error {
        Error::Config {
            source_name: source_name.into(),
            position: Some((line, column)),
            key: key.into(),
            message: message.into(),
        }
    }
}

/// `: line N, column C` of a config error, or nothing.
struct Position(Option<(u64, u64)>);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some((line, column)) => write!(f, ": line {line}, column {column}"),
            None => Ok(()),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What is wrong with the parameters of a structure (a TLB, a cache, a page mapping): the
/// field (`entries`, `ways`, `line`, `memory`, …) and why. Displays as `field: message`; the
/// machine turns it into a config error naming the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ParamError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_file_location_and_field() {
        let e = Error::trace("t.din", Location::Line(7), "label", "unknown label 9");
        assert_eq!(e.to_string(), "t.din: line 7: label: unknown label 9");
        let e = Error::trace("t.lkt", Location::Whole, "magic", "not a Lookaside trace");
        assert_eq!(e.to_string(), "t.lkt: magic: not a Lookaside trace");
        let e = Error::config("m.toml", "tlb.dtlb.ways", "3 does not divide 64 entries");
        assert_eq!(
            e.to_string(),
            "m.toml: tlb.dtlb.ways: 3 does not divide 64 entries"
        );
        let e = Error::config_at("m.toml", 3, 1, "tlb.d.entires", "unknown key");
        assert_eq!(
            e.to_string(),
            "m.toml: line 3, column 1: tlb.d.entires: unknown key"
        );
    }
}
