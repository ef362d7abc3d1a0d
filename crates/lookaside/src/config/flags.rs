//! The other ways to write a machine: `--set key=value` overrides and DineroIV-style
//! `--tlb`/`--cache` flags, each turned into the TOML table the file would have.

use super::*;

/// Apply `key=value` overrides to a TOML table before it is read as a machine.
///
/// Keys are dotted paths; a `tlb` element is addressed by its name (`tlb.dtlb.entries=128`).
/// Values are TOML literals (`128`, `"full"`, `true`, `["4k","2M"]`); a bare word that is not
/// a TOML literal is taken as a string (`tlb.dtlb.policy=fifo`).
pub fn apply_overrides(table: &mut toml::Table, overrides: &[String]) -> Result<()> {
    for ov in overrides {
        let (key, raw) = ov
            .split_once('=')
            .ok_or_else(|| Error::config("--set", ov, "expected key=value"))?;
        let key = key.trim();
        let value = parse_value(raw.trim());
        set_path(table, key, value).map_err(|m| Error::config("--set", key, m))?;
    }
    Ok(())
}

/// A TOML literal, or a plain string when `raw` is not one.
pub(super) fn parse_value(raw: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| toml::Value::String(raw.into())),
        Err(_) => toml::Value::String(raw.into()),
    }
}

pub(super) fn set_path(
    table: &mut toml::Table,
    key: &str,
    value: toml::Value,
) -> std::result::Result<(), String> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err("empty component in key".into());
    }
    if parts[0] == "tlb" || parts[0] == "cache" {
        let (what, array) = if parts[0] == "tlb" {
            ("TLB", "tlb")
        } else {
            ("cache", "cache")
        };
        if parts.len() < 3 {
            return Err(format!("address a {what} field as {array}.<name>.<field>"));
        }
        let list = table
            .get_mut(array)
            .and_then(|v| v.as_array_mut())
            .ok_or_else(|| format!("the machine has no [[{array}]] structures"))?;
        let names: Vec<String> = list
            .iter()
            .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
            .collect();
        let t = list
            .iter_mut()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some(parts[1]))
            .and_then(|t| t.as_table_mut())
            .ok_or_else(|| {
                format!(
                    "no {what} named '{}' (have: {})",
                    parts[1],
                    names.join(", ")
                )
            })?;
        return set_in(t, &parts[2..], value);
    }
    set_in(table, &parts, value)
}

pub(super) fn set_in(
    table: &mut toml::Table,
    parts: &[&str],
    value: toml::Value,
) -> std::result::Result<(), String> {
    let (last, path) = parts.split_last().ok_or("empty key")?;
    let mut t = table;
    for p in path {
        let entry = t
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t = entry
            .as_table_mut()
            .ok_or_else(|| format!("'{p}' is not a table"))?;
    }
    t.insert(last.to_string(), value);
    Ok(())
}

/// Turn a DineroIV-style flag `NAME:key=value,key=value` into a `[[tlb]]` table.
///
/// `serves` defaults from the name when absent, as in TOML (see [`Serves::for_name`]): so
/// `--tlb dtlb:entries=64` is a data TLB.
pub fn tlb_from_flag(flag: &str) -> Result<toml::Table> {
    let err = |m: String| Error::config("--tlb", flag, m);
    let (name, rest) = flag.split_once(':').unwrap_or((flag, ""));
    let name = name.trim();
    if name.is_empty() {
        return Err(err(
            "expected NAME:key=value,… (e.g. dtlb:entries=64,ways=full)".into(),
        ));
    }
    let mut t = toml::Table::new();
    t.insert("name".into(), toml::Value::String(name.into()));
    let keys = pairs(rest, |k, v| match k {
        // Lists inside a comma-separated flag use '+': page=4k+2M, next=stlb+stlb1g.
        "page" | "next" => toml::Value::Array(
            v.split('+')
                .map(|p| toml::Value::String(p.trim().into()))
                .collect(),
        ),
        "partition" => {
            // partition=8/fifo/random : lower ways / lower policy / upper policy
            let f: Vec<&str> = v.split('/').collect();
            let mut p = toml::Table::new();
            p.insert("lower".into(), parse_value(f[0]));
            if let Some(lp) = f.get(1) {
                p.insert("lower_policy".into(), toml::Value::String(lp.to_string()));
            }
            if let Some(up) = f.get(2) {
                p.insert("upper_policy".into(), toml::Value::String(up.to_string()));
            }
            toml::Value::Table(p)
        }
        _ => parse_value(v),
    })
    .map_err(err)?;
    t.extend(keys);
    Ok(t)
}

/// Turn a DineroIV-style flag `NAME:key=value,key=value` into a `[[cache]]` table (the keys
/// of [`CacheSpec`]: `--cache l1d:size=32k,line=64,ways=8,policy=lru,serves=data,next=l2`).
/// `serves` defaults from the name when absent, as in TOML.
pub fn cache_from_flag(flag: &str) -> Result<toml::Table> {
    let err = |m: String| Error::config("--cache", flag, m);
    let (name, rest) = flag.split_once(':').unwrap_or((flag, ""));
    let name = name.trim();
    if name.is_empty() {
        return Err(err(
            "expected NAME:key=value,… (e.g. l1d:size=32k,line=64,ways=8,serves=data)".into(),
        ));
    }
    let mut t = toml::Table::new();
    t.insert("name".into(), toml::Value::String(name.into()));
    t.extend(key_values(rest).map_err(err)?);
    Ok(t)
}

/// The table of `key=value,key=value` (each value a TOML literal, or a plain string when it
/// is not one; a number written as a whole float, `1e7`, an integer): a `--cache` flag's keys,
/// a `workload:` spec's.
pub(crate) fn key_values(text: &str) -> std::result::Result<toml::Table, String> {
    pairs(text, |_, v| match parse_value(v) {
        toml::Value::Float(f) if f >= 0.0 && f.fract() == 0.0 && f < 9.2e18 => {
            toml::Value::Integer(f as i64)
        }
        v => v,
    })
}

/// The table of `key=value,key=value`, each value read by `value(key, text)` (both trimmed):
/// the one reader of a flag's keys.
fn pairs(
    text: &str,
    value: impl Fn(&str, &str) -> toml::Value,
) -> std::result::Result<toml::Table, String> {
    let mut t = toml::Table::new();
    for kv in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("'{kv}' is not key=value"))?;
        let (k, v) = (k.trim(), v.trim());
        t.insert(k.into(), value(k, v));
    }
    Ok(t)
}
