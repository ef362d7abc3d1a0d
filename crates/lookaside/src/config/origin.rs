//! Where a key came from (its file and line, a flag, an override), and config errors in
//! our words: the key, its source and one line of message.

use super::*;

/// Where the keys of an assembled machine came from — its TOML text (a file or a preset),
/// `--tlb` flags or `--set` overrides — so that an error about a key names its source, and
/// its line and column when the key is in the text.
#[derive(Clone, Debug)]
pub struct Origin {
    text: Option<String>,
    name: String,
    /// The text as a table.
    pub(super) table: toml::Table,
    /// Names of the structures the text defines.
    text_tlbs: Vec<String>,
    /// Names of the structures `--tlb` adds (after the text's).
    flag_tlbs: Vec<String>,
    /// Names of the caches the text defines, and those `--cache` adds.
    text_caches: Vec<String>,
    flag_caches: Vec<String>,
    /// The keys `--set` overrides, in order.
    set_keys: Vec<String>,
}

impl Origin {
    /// The sources of a machine (see [`MachineConfig::assemble`]); fails when the text is not
    /// TOML.
    pub fn new(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        overrides: &[String],
    ) -> Result<Origin> {
        Origin::with_caches(text, source_name, tlb_flags, &[], overrides)
    }

    /// [`Origin::new`] with `--cache` flags too.
    pub fn with_caches(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        cache_flags: &[String],
        overrides: &[String],
    ) -> Result<Origin> {
        let table: toml::Table = match text {
            None => toml::Table::new(),
            Some(t) => toml::from_str(t).map_err(|e| {
                let at = e.span().map(|s| (t, s.start));
                located(source_name, at, "syntax", one_line(e.message()))
            })?,
        };
        let names = |v: Option<&toml::Value>| -> Vec<String> {
            v.and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .map(|t| {
                            t.get("name")
                                .and_then(|n| n.as_str())
                                .unwrap_or_default()
                                .to_string()
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let flag_names = |flags: &[String]| -> Vec<String> {
            flags
                .iter()
                .map(|f| {
                    f.split_once(':')
                        .map_or(f.as_str(), |s| s.0)
                        .trim()
                        .to_string()
                })
                .collect()
        };
        Ok(Origin {
            text_tlbs: names(table.get("tlb")),
            text_caches: names(table.get("cache")),
            text: text.map(str::to_string),
            name: source_name.to_string(),
            table,
            flag_tlbs: flag_names(tlb_flags),
            flag_caches: flag_names(cache_flags),
            set_keys: overrides
                .iter()
                .map(|o| {
                    o.split_once('=')
                        .map_or(o.as_str(), |s| s.0)
                        .trim()
                        .to_string()
                })
                .collect(),
        })
    }

    /// A config error about `key`, named by the source it came from.
    pub fn error(&self, key: &str, message: impl Into<String>) -> Error {
        self.error_in(key, message, None)
    }

    /// [`Origin::error`] about a key of the `tlb` element `tlb` (index in the assembled
    /// machine), when known: the text's structures come first, then those of `--tlb`.
    pub(super) fn error_in(
        &self,
        key: &str,
        message: impl Into<String>,
        tlb: Option<usize>,
    ) -> Error {
        let parts: Vec<&str> = key.split('.').collect();
        // The last override wins, so it is the one to blame.
        let set = self.set_keys.iter().rev().any(|s| {
            let s: Vec<&str> = s.split('.').collect();
            let n = s.len().min(parts.len());
            n > 0 && s[..n] == parts[..n]
        });
        if set {
            return Error::config("--set", key, message);
        }
        for (array, text_names, flag_names, flag_source) in [
            ("tlb", &self.text_tlbs, &self.flag_tlbs, "--tlb"),
            ("cache", &self.text_caches, &self.flag_caches, "--cache"),
        ] {
            let Some(rest) = key.strip_prefix(array) else {
                continue;
            };
            if !(rest.starts_with('.') || rest.starts_with('[')) {
                continue;
            }
            let flag = if let Some(i) = tlb.filter(|_| array == "tlb") {
                i >= text_names.len()
            } else if let Some(i) = rest.strip_prefix('[') {
                let i: usize = i
                    .split(']')
                    .next()
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(0);
                i >= text_names.len()
            } else {
                let name = parts.get(1).copied().unwrap_or_default();
                flag_names.iter().any(|f| f == name) && !text_names.iter().any(|t| t == name)
            };
            if flag {
                return Error::config(flag_source, key, message);
            }
        }
        let at = self
            .text
            .as_deref()
            .and_then(|t| key_offset(t, key).map(|o| (t, o)));
        located(&self.name, at, key, message)
    }

    /// `e` again, naming the source of its key when it is a config error of this machine
    /// without a position (as [`crate::machine::Machine::build`]'s are).
    pub fn locate(&self, e: Error) -> Error {
        match e {
            Error::Config {
                source_name,
                position: None,
                key,
                message,
            } if source_name == self.name => self.error(&key, message),
            e => e,
        }
    }
}

/// A config error about `key` of `source_name`, at byte offset `at.1` of its text `at.0`
/// (as a line and column) when known.
pub(super) fn located(
    source_name: &str,
    at: Option<(&str, usize)>,
    key: &str,
    message: impl Into<String>,
) -> Error {
    match at {
        Some((text, offset)) => {
            let (line, column) = line_column(text, offset);
            Error::config_at(source_name, line, column, key, message)
        }
        None => Error::config(source_name, key, message),
    }
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
pub(super) fn line_column(text: &str, offset: usize) -> (u64, u64) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let column = String::from_utf8_lossy(&before[start..]).chars().count() as u64 + 1;
    (line, column)
}

/// Byte offset in `text` of the config key `key` (`tlb.dtlb.ways`, `tlb[0].name`,
/// `pages.regions[1].end`: an element of an array of tables is named by its `name` or its
/// index), or of the deepest part of it that is there (the `[[tlb]]` of a missing key).
pub(super) fn key_offset(text: &str, key: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut at: &DeValue = &DeValue::Table(doc.get_ref().clone());
    let mut found = None;
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        let (name, index) = match part.split_once('[') {
            Some((n, i)) => (n, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let DeValue::Table(t) = at else { break };
        let Some((k, v)) = t.iter().find(|(k, _)| k.get_ref() == name) else {
            break;
        };
        found = Some(k.span().start);
        at = v.get_ref();
        if let DeValue::Array(a) = at {
            // An element: by index, or by the name the next part gives.
            let element = match index {
                Some(i) => a.get(i),
                None => match parts.peek() {
                    Some(n) => {
                        let hit = a.iter().find(|e| {
                            e.get_ref().get("name").and_then(|v| v.get_ref().as_str()) == Some(*n)
                        });
                        if hit.is_some() {
                            parts.next();
                        }
                        hit
                    }
                    None => None,
                },
            };
            let Some(e) = element else { break };
            found = Some(e.span().start);
            at = e.get_ref();
        }
    }
    found
}

/// The config key and a one-line message of a toml error from reading `table` as a machine
/// (and the index of the `[[tlb]]` it is in, if it is): the key names the element of an array
/// of tables (by its `name`, else its index) and the unknown or missing field.
pub(super) fn describe(
    table: &toml::Table,
    e: &toml::de::Error,
) -> (String, String, Option<usize>) {
    let keys = error_keys(e);
    let (field, message) = tidy(e.message());
    let root = toml::Value::Table(table.clone());
    let mut path: Vec<Step> = Vec::new();
    let mut key = String::new();
    for k in &keys {
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(k);
        path.push(Step::Key(k.clone()));
        let Some(toml::Value::Array(a)) = step_to(&root, &path) else {
            continue;
        };
        if a.is_empty() || !a.iter().all(toml::Value::is_table) {
            continue;
        }
        // Which element: the first whose prefix of the array fails the same way.
        let Some(i) = (0..a.len()).find(|&i| {
            let mut t = root.clone();
            if let Some(toml::Value::Array(a)) = step_to_mut(&mut t, &path) {
                a.truncate(i + 1);
            }
            MachineConfig::deserialize(t)
                .err()
                .is_some_and(|f| f.message() == e.message() && error_keys(&f) == keys)
        }) else {
            break;
        };
        match a[i].get("name").and_then(|n| n.as_str()) {
            Some(n) if !n.is_empty() && !n.contains('.') => {
                key.push('.');
                key.push_str(n);
            }
            _ => key.push_str(&format!("[{i}]")),
        }
        path.push(Step::Index(i));
    }
    if let Some(f) = field {
        if !key.is_empty() {
            key.push('.');
        }
        key.push_str(&f);
    }
    if key.is_empty() {
        key.push_str("toml");
    }
    let tlb = match path.as_slice() {
        [Step::Key(k), Step::Index(i), ..] if k == "tlb" => Some(*i),
        _ => None,
    };
    (key, message, tlb)
}

/// A step into a TOML value.
pub(super) enum Step {
    Key(String),
    Index(usize),
}

pub(super) fn step_to<'v>(v: &'v toml::Value, path: &[Step]) -> Option<&'v toml::Value> {
    path.iter().try_fold(v, |v, s| match s {
        Step::Key(k) => v.get(k.as_str()),
        Step::Index(i) => v.get(*i),
    })
}

pub(super) fn step_to_mut<'v>(
    v: &'v mut toml::Value,
    path: &[Step],
) -> Option<&'v mut toml::Value> {
    path.iter().try_fold(v, |v, s| match s {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

/// The key (dotted, the field it names last) and one-line message of an error from reading
/// a table that is not a whole machine (a `workload:` spec's keys).
pub(crate) fn key_and_message(e: &toml::de::Error) -> (String, String) {
    let mut keys = error_keys(e);
    let (field, message) = tidy(e.message());
    keys.extend(field);
    match keys.is_empty() {
        true => ("toml".into(), message),
        false => (keys.join("."), message),
    }
}

/// The keys a toml error says it is in (`in `tlb.page``), outermost first.
pub(super) fn error_keys(e: &toml::de::Error) -> Vec<String> {
    let mut bare = e.clone();
    // Without its input the error prints its keys instead of a snippet.
    bare.set_input(None);
    let text = bare.to_string();
    text.trim_end()
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("in `"))
        .and_then(|l| l.strip_suffix('`'))
        .map(|k| k.split('.').map(str::to_string).collect())
        .unwrap_or_default()
}

/// serde's message in our words, one line: the field it names when it names one (an unknown
/// or missing field), and the message.
pub(super) fn tidy(message: &str) -> (Option<String>, String) {
    let message = one_line(message);
    let quoted = |s: &str| s.replace('`', "");
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((field, expected)) = rest.split_once('`') {
            let why = match expected.trim_start_matches(", ") {
                "there are no fields" => "unknown key (this table takes none)".to_string(),
                e => match e.strip_prefix("expected one of ") {
                    Some(list) => format!("unknown key (expected one of: {})", quoted(list)),
                    None => format!("unknown key ({})", quoted(e)),
                },
            };
            return (Some(field.to_string()), why);
        }
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        if let Some((field, _)) = rest.split_once('`') {
            return (
                Some(field.to_string()),
                "missing (this key is required)".into(),
            );
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        if let Some((value, expected)) = rest.split_once('`') {
            let list = expected
                .trim_start_matches(", ")
                .trim_start_matches("expected one of ")
                .trim_start_matches("expected ");
            return (None, format!("'{value}' is not one of: {}", quoted(list)));
        }
    }
    (None, message)
}

/// `message` on one line.
pub(super) fn one_line(message: &str) -> String {
    message
        .trim()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}
