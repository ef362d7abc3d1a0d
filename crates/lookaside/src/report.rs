//! Reports: the ledger as data (JSON with a documented schema) and as a plain-text table.
//!
//! The JSON is the one product of a run; the table and the Python DataFrame are both made from
//! it, so they can never disagree. The schema (`lookaside/result-v1`) is documented in
//! docs/results.md: `structures.<name>.{accesses,hits,misses,miss_ratio,mpki,…}` with breakdowns
//! `by_kind`, `by_mode`, `by_asid`, plus `rows`, one row per (structure, asid, mode, kind)
//! cell for DataFrames, and `warnings`, what the numbers leave out (see
//! [`Machine::warnings`]). Nothing in it depends on time or worker count.

use serde_json::{json, Map, Value};

use crate::event::{Kind, Mode, ALL_KINDS};
use crate::ledger::{Counter, Ledger};
use crate::machine::Machine;

/// Identifier of the result schema, bumped on incompatible changes.
pub const SCHEMA: &str = "lookaside/result-v1";

/// Where the trace came from, for the report header.
#[derive(Clone, Debug, Default)]
pub struct TraceInfo {
    pub path: String,
    pub format: String,
}

const MODES: [Mode; 2] = [Mode::User, Mode::Kernel];

/// `n / d`, none when `d` is 0.
fn ratio(n: u64, d: u64) -> Option<f64> {
    (d != 0).then(|| n as f64 / d as f64)
}

/// The figures of one counter in a result, typed: what [`counter_json`] writes, and what the
/// one-pass engines hand over as columns. One home, for every engine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figures {
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    /// None without accesses.
    pub miss_ratio: Option<f64>,
    /// Misses per 1000 instructions; none when the trace counted no instructions.
    pub mpki: Option<f64>,
    /// None without instructions or without misses.
    pub instructions_per_miss: Option<f64>,
}

impl Figures {
    /// The figures of `c` on a trace of `instructions` instructions (fetches).
    pub fn of(c: Counter, instructions: u64) -> Figures {
        Figures {
            accesses: c.accesses,
            hits: c.hits(),
            misses: c.misses,
            miss_ratio: ratio(c.misses, c.accesses),
            mpki: (instructions > 0).then(|| c.misses as f64 * 1000.0 / instructions as f64),
            instructions_per_miss: (instructions > 0)
                .then(|| ratio(instructions, c.misses))
                .flatten(),
        }
    }
}

/// The fields of one counter in a result (`accesses`, `hits`, `misses`, `miss_ratio`, and
/// with instructions `mpki`, `instructions_per_miss`, null without misses); see [`Figures`].
pub(crate) fn counter_json(c: Counter, instructions: u64) -> Map<String, Value> {
    let f = Figures::of(c, instructions);
    let mut m = Map::new();
    m.insert("accesses".into(), json!(f.accesses));
    m.insert("hits".into(), json!(f.hits));
    m.insert("misses".into(), json!(f.misses));
    m.insert("miss_ratio".into(), json!(f.miss_ratio));
    if let Some(mpki) = f.mpki {
        m.insert("mpki".into(), json!(mpki));
        m.insert(
            "instructions_per_miss".into(),
            json!(f.instructions_per_miss),
        );
    }
    m
}

/// The classes of misses (`compulsory`, `capacity`, `conflict`) of structure `s` over
/// everything `keep` accepts, added to `m` when the structure `classified` them.
fn classes_json(
    l: &Ledger,
    s: usize,
    classified: bool,
    keep: impl FnMut(usize, Mode, Kind) -> bool,
    m: &mut Map<String, Value>,
) {
    if !classified {
        return;
    }
    let c = l.class_total(s, keep);
    for (name, n) in crate::threec::CLASSES.iter().zip(c) {
        m.insert((*name).into(), json!(n));
    }
}

/// Breakdowns of structure `s` by kind, mode and address space (with the classes of its
/// misses when it `classified` them).
fn breakdowns(l: &Ledger, s: usize, classified: bool, m: &mut Map<String, Value>) {
    let mut by_kind = Map::new();
    for k in Kind::REFS {
        let keep = |_, _, kk| kk == k;
        let c = l.total(s, keep);
        if c.accesses > 0 {
            let mut e = counter_json(c, 0);
            classes_json(l, s, classified, keep, &mut e);
            by_kind.insert(k.name().into(), Value::Object(e));
        }
    }
    let mut by_mode = Map::new();
    for md in MODES {
        let keep = |_, mm, _| mm == md;
        let c = l.total(s, keep);
        if c.accesses > 0 {
            let mut e = counter_json(c, 0);
            classes_json(l, s, classified, keep, &mut e);
            by_mode.insert(md.name().into(), Value::Object(e));
        }
    }
    let mut by_asid = Map::new();
    for (ai, asid) in l.asids().iter().enumerate() {
        let keep = |a, _, _| a == ai;
        let c = l.total(s, keep);
        if c.accesses > 0 {
            let mut e = counter_json(c, 0);
            classes_json(l, s, classified, keep, &mut e);
            by_asid.insert(asid.to_string(), Value::Object(e));
        }
    }
    m.insert("by_kind".into(), Value::Object(by_kind));
    m.insert("by_mode".into(), Value::Object(by_mode));
    m.insert("by_asid".into(), Value::Object(by_asid));
}

/// The result of a run as JSON.
pub fn result_json(machine: &Machine, trace: &TraceInfo) -> Value {
    // The caches after their copy-back at the end, as DineroIV reports.
    let (finished, caches) = machine.finished();
    let l: &Ledger = &finished;
    let cfg = machine.config();
    let instructions = l.refs_of_kind(Kind::Fetch);
    let references: u64 = Kind::REFS.iter().map(|&k| l.refs_of_kind(k)).sum();

    let mut by_kind = Map::new();
    for k in Kind::REFS {
        by_kind.insert(k.name().into(), json!(l.refs_of_kind(k)));
    }
    let mut by_mode = Map::new();
    for md in MODES {
        let n: u64 = (0..l.asids().len())
            .flat_map(|a| Kind::REFS.iter().map(move |&k| (a, k)))
            .map(|(a, k)| l.refs(a, md, k))
            .sum();
        by_mode.insert(md.name().into(), json!(n));
    }
    let mut control = Map::new();
    for k in ALL_KINDS.iter().filter(|k| !k.is_ref()) {
        control.insert(k.name().into(), json!(l.control[*k as usize]));
    }
    let used: Vec<u32> = (0..l.asids().len())
        .filter(|&a| l.asid_used(a))
        .map(|a| l.asids()[a])
        .collect();

    let mut structures = Map::new();
    let geometry = machine.geometry();
    for (s, t) in cfg.tlbs.iter().enumerate() {
        let mut m = counter_json(l.total(s, |_, _, _| true), instructions);
        let (sets, ways) = geometry[s];
        let pages: Vec<String> = if t.page.is_empty() {
            vec![cfg.pages.size.label()]
        } else {
            t.page.iter().map(|p| p.label()).collect()
        };
        let mut g = Map::new();
        g.insert("entries".into(), json!(t.entries));
        g.insert("sets".into(), json!(sets));
        g.insert("ways".into(), json!(ways));
        g.insert("policy".into(), json!(t.policy));
        g.insert("page".into(), json!(pages));
        g.insert(
            "serves".into(),
            serde_json::to_value(t.serves).unwrap_or(Value::Null),
        );
        g.insert(
            "next".into(),
            match t.next.as_slice() {
                [] => json!("walk"),
                [one] => json!(one),
                several => json!(several),
            },
        );
        m.insert("geometry".into(), Value::Object(g));
        if let Some(d) = machine.dynamic_json(s) {
            m.insert("dynamic".into(), d);
        }
        classes_json(l, s, t.three_c, |_, _, _| true, &mut m);
        breakdowns(l, s, t.three_c, &mut m);
        structures.insert(t.name.clone(), Value::Object(m));
    }
    if let Some(h) = &caches {
        for (i, c) in cfg.caches.iter().enumerate() {
            let s = cfg.tlbs.len() + i;
            let mut m = counter_json(l.total(s, |_, _, _| true), instructions);
            classes_json(l, s, c.three_c, |_, _, _| true, &mut m);
            m.extend(h.fields(i));
            breakdowns(l, s, c.three_c, &mut m);
            structures.insert(c.name.clone(), Value::Object(m));
        }
    }
    let w = l.walk_index();
    let walks = l.total(w, |_, _, _| true).misses;
    let mut walk = Map::new();
    walk.insert("count".into(), json!(walks));
    if instructions > 0 {
        walk.insert(
            "per_1000_instructions".into(),
            json!(walks as f64 * 1000.0 / instructions as f64),
        );
    }
    breakdowns(l, w, false, &mut walk);

    let mut rows = Vec::new();
    for (ai, asid) in l.asids().iter().enumerate() {
        for s in 0..=w {
            let name = if s == w {
                "walk"
            } else {
                l.structures()[s].as_str()
            };
            for md in MODES {
                for k in Kind::REFS {
                    let c = l.cell(ai, s, md, k);
                    if c.accesses > 0 {
                        let mut row = json!({"structure": name, "asid": asid, "mode": md.name(), "kind": k.name(),
                                             "accesses": c.accesses, "hits": c.hits(), "misses": c.misses});
                        if l.classifies() {
                            for (n, x) in crate::threec::CLASSES
                                .iter()
                                .zip(l.class_cell(ai, s, md, k))
                            {
                                row[*n] = json!(x);
                            }
                        }
                        rows.push(row);
                    }
                }
            }
        }
    }

    let mut result = json!({
        "schema": SCHEMA,
        "lookaside_version": env!("CARGO_PKG_VERSION"),
        "trace": {
            "path": trace.path,
            "format": trace.format,
            "events": references + l.control.iter().sum::<u64>(),
            "references": references,
            "instructions": instructions,
            "by_kind": by_kind,
            "by_mode": by_mode,
            "control": control,
            "address_spaces": used,
            "straddles": l.straddles,
            "wrapped": l.wrapped,
            "unmapped": l.unmapped,
            "dropped": machine.dropped(),
            "dropped_share": machine.dropped_share(),
        },
        "machine": {
            "name": cfg.machine.name,
            "description": cfg.machine.description,
            "config": serde_json::to_value(cfg).unwrap_or(Value::Null),
        },
        "structures": structures,
        "walk": walk,
        "rows": rows,
        "warnings": machine.warnings(),
    });
    if let Some(k) = machine.kernel_regions_json() {
        result["machine"]["kernel_regions"] = k;
    }
    if let Some(r) = machine.refill() {
        result["traps"] = crate::mmu::report::traps_json(r);
    }
    if let Some(m) = machine.memory() {
        result["memory"] = m.json();
    }
    if let Some(w) = machine.walker() {
        result["pagetable"] = w.json();
    }
    if let Some(c) = machine.cpus_json() {
        result["cpus"] = c;
    }
    if let Some(v) = machine.vac() {
        result["vac"] = v.json();
    }
    if let Some(p) = machine.prefetch_json() {
        result["prefetch"] = p;
    }
    result
}

fn fmt_int(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn get_u64(v: &Value, path: &[&str]) -> u64 {
    path.iter()
        .try_fold(v, |v, p| v.get(*p))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn get_f64(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter()
        .try_fold(v, |v, p| v.get(*p))
        .and_then(Value::as_f64)
}

/// A readable table of a result (as made by [`result_json`]).
/// The `cpus` section as text: per CPU its references, the last-level walks it made, the
/// shootdowns it sent and received (pages, requests, interrupts) and, when the machine
/// prices them, their cycles.
fn cpus_table(c: &Value) -> String {
    let cycles = get_u64(c, &["shootdown_cycles"]);
    let mut out = format!(
        "cpus: {} (shootdown: {}{})\n",
        get_u64(c, &["count"]),
        c["shootdown"].as_str().unwrap_or(""),
        if cycles > 0 {
            format!("; shootdown cycles {}", fmt_int(cycles))
        } else {
            String::new()
        }
    );
    for p in c["per_cpu"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  cpu {:<3} {:>14} references {:>12} walks   shootdowns sent {} ({} requests, {} IPIs), received {} ({} IPIs); entries invalidated {}, misses they caused {}",
            get_u64(p, &["cpu"]),
            fmt_int(get_u64(p, &["references"])),
            fmt_int(get_u64(p, &["structures", "walk", "accesses"])),
            fmt_int(get_u64(p, &["shootdowns_sent"])),
            fmt_int(get_u64(p, &["requests_sent"])),
            fmt_int(get_u64(p, &["ipis_sent"])),
            fmt_int(get_u64(p, &["shootdowns_received"])),
            fmt_int(get_u64(p, &["ipis_received"])),
            fmt_int(get_u64(p, &["entries_invalidated"])),
            fmt_int(get_u64(p, &["shootdown_misses"])),
        ));
        if cycles > 0 {
            out.push_str(&format!(
                "; cycles sending {}, receiving {}",
                fmt_int(get_u64(p, &["shootdown_cycles", "sending"])),
                fmt_int(get_u64(p, &["shootdown_cycles", "receiving"])),
            ));
        }
        out.push('\n');
    }
    out
}

pub fn table(r: &Value) -> String {
    let mut out = String::new();
    let name = r["machine"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or("(unnamed)");
    let path = r["trace"]["path"].as_str().unwrap_or("");
    let format = r["trace"]["format"].as_str().unwrap_or("");
    out.push_str(&format!("machine {name}   trace {path} ({format})\n"));
    let refs = get_u64(r, &["trace", "references"]);
    let instr = get_u64(r, &["trace", "instructions"]);
    out.push_str(&format!(
        "references {}  (fetch {}, load {}, store {}; kernel {})   address spaces {}\n\n",
        fmt_int(refs),
        fmt_int(get_u64(r, &["trace", "by_kind", "fetch"])),
        fmt_int(get_u64(r, &["trace", "by_kind", "load"])),
        fmt_int(get_u64(r, &["trace", "by_kind", "store"])),
        fmt_int(get_u64(r, &["trace", "by_mode", "kernel"])),
        r["trace"]["address_spaces"]
            .as_array()
            .map_or(0, |a| a.len()),
    ));
    for w in r["warnings"].as_array().into_iter().flatten() {
        out.push_str(&format!("warning: {}\n", w.as_str().unwrap_or("")));
    }
    if r["warnings"].as_array().is_some_and(|w| !w.is_empty()) {
        out.push('\n');
    }
    out.push_str(&format!(
        "{:<10} {:<22} {:>14} {:>14} {:>12} {:>8} {:>9} {:>11}\n",
        "structure", "geometry", "accesses", "hits", "misses", "miss %", "MPKI", "instr/miss"
    ));
    let empty = Map::new();
    let structures = r["structures"].as_object().unwrap_or(&empty);
    for (sname, s) in structures {
        let g = &s["geometry"];
        let ways = get_u64(g, &["ways"]);
        let geom = if s["type"] == "cache" {
            let assoc = if get_u64(g, &["sets"]) == 1 {
                "FA".to_string()
            } else {
                format!("{ways}w")
            };
            format!(
                "{} {assoc} {}B {}",
                crate::config::PageSize::Size(get_u64(g, &["size"])).label(),
                get_u64(g, &["line"]),
                g["policy"].as_str().unwrap_or("")
            )
        } else {
            let entries = get_u64(g, &["entries"]);
            let assoc = if ways == entries {
                "FA".to_string()
            } else {
                format!("{ways}w")
            };
            let pages: Vec<&str> = g["page"]
                .as_array()
                .map_or(vec![], |a| a.iter().filter_map(Value::as_str).collect());
            format!(
                "{entries} {assoc} {} {}",
                g["policy"].as_str().unwrap_or(""),
                pages.join("+")
            )
        };
        let pct = get_f64(s, &["miss_ratio"]).map_or("-".into(), |x| format!("{:.3}", x * 100.0));
        let mpki = get_f64(s, &["mpki"]).map_or("-".into(), |x| format!("{x:.3}"));
        let ipm = get_f64(s, &["instructions_per_miss"]).map_or("-".into(), |x| format!("{x:.1}"));
        out.push_str(&format!(
            "{:<10} {:<22} {:>14} {:>14} {:>12} {:>8} {:>9} {:>11}\n",
            sname,
            geom,
            fmt_int(get_u64(s, &["accesses"])),
            fmt_int(get_u64(s, &["hits"])),
            fmt_int(get_u64(s, &["misses"])),
            pct,
            mpki,
            ipm
        ));
    }
    let walks = get_u64(r, &["walk", "count"]);
    let wpki = if instr > 0 {
        format!("{:.3}", walks as f64 * 1000.0 / instr as f64)
    } else {
        "-".into()
    };
    // A machine of caches alone has no page-table walk to show.
    if structures.values().any(|s| s["type"] != "cache") {
        out.push_str(&format!(
            "{:<10} {:<22} {:>14} {:>14} {:>12} {:>8} {:>9}\n",
            "walk",
            "(page-table refills)",
            "",
            "",
            fmt_int(walks),
            "",
            wpki
        ));
    }
    if let Some(c) = r.get("cpus") {
        out.push('\n');
        out.push_str(&cpus_table(c));
    }
    if let Some(t) = r.get("traps") {
        out.push('\n');
        out.push_str(&crate::mmu::report::traps_table(t));
    }
    if let Some(m) = r.get("memory") {
        out.push('\n');
        out.push_str(&crate::cache::system::table(m));
    }
    if let Some(p) = r.get("pagetable") {
        out.push('\n');
        out.push_str(&pagetable_table(p));
    }
    if let Some(v) = r.get("vac") {
        out.push('\n');
        out.push_str(&crate::cache::vac::drive::table(v));
    }
    out
}

/// The `pagetable` section as a few lines of text.
fn pagetable_table(p: &Value) -> String {
    let f = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.2}"));
    let pct = |v: &Value| {
        v.as_f64()
            .map_or("-".to_string(), |x| format!("{:.1}%", 100.0 * x))
    };
    let mut out = format!(
        "page table: {} ({} refill), {} walks, {} faults; cycles per miss {} = {} basic + {} cache penalty\n",
        p["organisation"].as_str().unwrap_or("?"),
        p["refill"].as_str().unwrap_or("?"),
        fmt_int(p["walks"].as_u64().unwrap_or(0)),
        fmt_int(p["faults"].as_u64().unwrap_or(0)),
        f(&p["cycles_per_miss"]["total"]),
        f(&p["cycles_per_miss"]["basic"]),
        f(&p["cycles_per_miss"]["cache_penalty"]),
    );
    out.push_str(&format!(
        "  mean chain {}, head-bucket hits {}, table {} bytes ({} of memory)\n",
        f(&p["chain"]["mean"]),
        pct(&p["head_hit_rate"]),
        fmt_int(p["table"]["bytes"].as_u64().unwrap_or(0)),
        pct(&p["table"]["of_memory"]),
    ));
    if let Some(levels) = p["levels"].as_array() {
        let parts: Vec<String> = levels
            .iter()
            .map(|l| {
                format!(
                    "{} {}",
                    l["name"].as_str().unwrap_or("?"),
                    pct(&l["miss_rate"])
                )
            })
            .collect();
        out.push_str(&format!("  data-cache misses: {}\n", parts.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(fmt_int(0), "0");
        assert_eq!(fmt_int(999), "999");
        assert_eq!(fmt_int(1000), "1,000");
        assert_eq!(fmt_int(1234567), "1,234,567");
    }
}
