//! Which machines the one-pass engines answer, and answering them from a trace file.
//!
//! A *family* is one machine whose single TLB varies only in geometry (entries, ways). The
//! sweep planner asks [`answer_path`] for the geometries it needs; every answer carries
//! exactly the fields a per-config run reports for that structure (`accesses`, `hits`,
//! `misses`, `miss_ratio`, `mpki`, `instructions_per_miss`, and the `walk`), computed by
//! the same code, so a planned sweep and a per-config one give identical tables.

use std::path::Path;

use serde_json::{json, Value};

use super::{AllAssoc, Engine, Feeder, Options, StackDistance, WAYS};
use crate::config::{MachineConfig, Placement, Straddle};
use crate::error::{Error, Result};
use crate::event::{Kind, BATCH};
use crate::ledger::Counter;
use crate::trace::Format;

/// Largest set count answered by the all-associativity engine here.
pub const MAX_SETS: usize = 1 << 16;

impl Options {
    /// The options under which the engines count exactly what `config` counts, or why they
    /// cannot (the message names the config key).
    pub fn for_machine(config: &MachineConfig) -> std::result::Result<Options, String> {
        if config.refill.is_some() {
            return Err("refill: software refill is not one LRU structure".into());
        }
        if config.memory.is_some() {
            return Err(
                "memory: the memory system behind the TLB is not simulated in one pass".into(),
            );
        }
        let [t] = config.tlbs.as_slice() else {
            return Err(format!(
                "tlb: the one-pass engines answer one structure, the machine has {}",
                config.tlbs.len()
            ));
        };
        if t.policy != "lru" {
            return Err(format!("tlb.{}.policy: '{}' is not lru", t.name, t.policy));
        }
        if t.partition.is_some() || t.placement != Placement::Upper {
            return Err(format!("tlb.{}.partition: partitioned", t.name));
        }
        if !config.pages.regions.is_empty() {
            return Err("pages.regions: page-size regions".into());
        }
        if config.machine.global_above.is_some() {
            return Err("machine.global_above: global pages".into());
        }
        let Some(shift) = config.pages.size.shift() else {
            return Err("pages.size: unmapped".into());
        };
        if t.page.iter().any(|p| p.shift() != Some(shift)) {
            return Err(format!(
                "tlb.{}.page: a page size other than the machine's",
                t.name
            ));
        }
        Ok(Options {
            page_shift: shift,
            kinds: Kind::REFS.map(|k| t.serves.serves(k)),
            tagged: t.asid,
            split: config.machine.straddle == Straddle::Split,
        })
    }
}

/// The geometry of one member of a family: `entries` entries of `ways` ways.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub entries: usize,
    pub ways: usize,
}

/// Answer every geometry in `want` of the machine `config` (its single TLB's own entries
/// and ways are ignored) on the trace at `path`, in one pass: stack distance when every
/// geometry is fully associative, else all-associativity (sets a power of two up to
/// [`MAX_SETS`], at most [`WAYS`] ways). Returns `{engine, trace: {references,
/// instructions}, structure, answers: [{entries, ways, sets, structure: {...}, walk:
/// {...}}]}`; a usage error says why the family cannot be answered in one pass. `progress` is
/// called now and then; returning `false` from it stops the pass.
pub fn answer_path(
    path: &Path,
    format: Option<Format>,
    config: &MachineConfig,
    want: &[Geometry],
    progress: &mut dyn FnMut(crate::run::Progress) -> bool,
) -> Result<Value> {
    let opts = Options::for_machine(config).map_err(Error::Usage)?;
    let page = crate::config::PageSize::Size(1 << opts.page_shift).label();
    if want.is_empty() {
        return Err(Error::Usage("no geometry asked for".into()));
    }
    let full = want.iter().all(|g| g.ways == g.entries);
    for g in want {
        if g.entries == 0 || g.ways == 0 || g.entries % g.ways != 0 {
            return Err(Error::Usage(format!(
                "{} entries of {} ways is not a geometry",
                g.entries, g.ways
            )));
        }
        let sets = g.entries / g.ways;
        if !full && (!sets.is_power_of_two() || sets > MAX_SETS || g.ways > WAYS) {
            return Err(Error::Usage(format!(
                "{} entries of {} ways: all-associativity needs a power-of-two set count up \
                 to {MAX_SETS} and at most {WAYS} ways",
                g.entries, g.ways
            )));
        }
    }
    // A trace file, or the stream a `workload:` spec makes.
    let (mut opened, format) = crate::run::open_source(path, format)?;
    let mut source = crate::run::Watched::new(opened.as_mut(), progress);
    let mut feeder = Feeder::new(opts);
    let (engine, accesses, misses, instructions): (&str, u64, Vec<u64>, u64) = if full {
        let mut sd = StackDistance::new(want.iter().map(|g| g.entries).max().unwrap_or(1));
        let instructions = pass(&mut source, &mut feeder, &mut sd)?;
        let r = sd.result();
        let m = want
            .iter()
            .map(|g| r.misses(g.entries).unwrap_or(0))
            .collect();
        ("stack-distance", r.accesses, m, instructions)
    } else {
        let max_sets = want.iter().map(|g| g.entries / g.ways).max().unwrap_or(1);
        let mut aa = AllAssoc::new(max_sets);
        let instructions = pass(&mut source, &mut feeder, &mut aa)?;
        let r = aa.result();
        let m = want
            .iter()
            .map(|g| r.misses(g.entries / g.ways, g.ways).unwrap_or(0))
            .collect();
        ("all-associativity", r.accesses, m, instructions)
    };
    let name = &config.tlbs[0].name;
    let answers: Vec<Value> = want
        .iter()
        .zip(misses)
        .map(|(g, misses)| {
            let c = Counter { accesses, misses };
            let walk = Counter {
                accesses: misses,
                misses,
            };
            let mut w = serde_json::Map::new();
            w.insert("count".into(), json!(misses));
            if let Some(x) = crate::report::counter_json(walk, instructions).get("mpki") {
                w.insert("per_1000_instructions".into(), x.clone());
            }
            json!({
                "entries": g.entries, "ways": g.ways, "sets": g.entries / g.ways,
                "structure": crate::report::counter_json(c, instructions),
                "walk": w,
            })
        })
        .collect();
    // Translations: one per reference of a translated kind and one per further page.
    let translations = accesses;
    Ok(json!({
        "engine": engine,
        "trace": {"path": path.display().to_string(), "format": format,
                  "references": feeder.references, "instructions": instructions,
                  "straddles": feeder.straddles, "wrapped": feeder.wrapped,
                  "dropped": feeder.wrapped,
                  "dropped_share": crate::machine::dropped_share(feeder.wrapped, translations)},
        "warnings": crate::machine::unsimulated_warnings(feeder.wrapped, translations),
        "structure": name,
        "page": [page],
        "answers": answers,
    }))
}

/// Feed every event of `source` to `engine`; returns the instructions (fetches) seen.
fn pass<E: Engine>(
    source: &mut dyn crate::trace::TraceSource,
    feeder: &mut Feeder,
    engine: &mut E,
) -> Result<u64> {
    let mut batch = Vec::with_capacity(BATCH);
    let mut instructions = 0;
    while source.next_batch(&mut batch)? {
        instructions += batch.iter().filter(|e| e.kind == Kind::Fetch).count() as u64;
        feeder.feed(engine, &batch);
    }
    Ok(instructions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn data(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(name)
    }

    fn per_config(flag: &str) -> Value {
        let mut m = crate::machine::Machine::assemble(None, "t", &[flag.to_string()], &[]).unwrap();
        crate::run::simulate_path(
            &data("sortprog.lackey.zst"),
            None,
            &mut m,
            crate::run::Reading::OneThread,
            &mut |_| true,
        )
        .unwrap()
    }

    #[test]
    fn answers_are_the_per_config_results() {
        for (base, want) in [
            (
                "d:entries=8,ways=full,serves=data",
                vec![(1, 1), (4, 4), (64, 64), (96, 96)],
            ),
            (
                "t:entries=8,ways=2,asid=false",
                vec![(1, 1), (8, 2), (64, 4), (1024, 16), (48, 3)],
            ),
        ] {
            let config = MachineConfig::assemble(None, "t", &[base.into()], &[]).unwrap();
            let geos: Vec<Geometry> = want
                .iter()
                .map(|&(entries, ways)| Geometry { entries, ways })
                .collect();
            let r = answer_path(
                &data("sortprog.lackey.zst"),
                None,
                &config,
                &geos,
                &mut |_| true,
            );
            if want
                .iter()
                .any(|&(e, w)| e != w && !(e / w).is_power_of_two())
            {
                assert!(r.unwrap_err().to_string().contains("power-of-two"));
                continue;
            }
            let r = r.unwrap();
            for (a, &(entries, ways)) in r["answers"].as_array().unwrap().iter().zip(&want) {
                let name = base.split(':').next().unwrap();
                let flag = format!("{base},entries={entries},ways={ways}");
                let full = per_config(&flag);
                let s = &full["structures"][name];
                for k in [
                    "accesses",
                    "hits",
                    "misses",
                    "miss_ratio",
                    "mpki",
                    "instructions_per_miss",
                ] {
                    assert_eq!(a["structure"][k], s[k], "{flag} {k}");
                }
                assert_eq!(a["walk"]["count"], full["walk"]["count"], "{flag}");
                assert_eq!(
                    a["walk"]["per_1000_instructions"],
                    full["walk"]["per_1000_instructions"]
                );
                assert_eq!(r["trace"]["references"], full["trace"]["references"]);
                assert_eq!(r["trace"]["instructions"], full["trace"]["instructions"]);
            }
        }
    }

    #[test]
    fn a_workload_spec_is_answered_like_a_trace_file() {
        let spec = std::path::Path::new("workload:multiserver,servers=2,hops=200");
        let config =
            MachineConfig::assemble(None, "t", &["d:entries=8,ways=full".into()], &[]).unwrap();
        let geos = [Geometry {
            entries: 16,
            ways: 16,
        }];
        let r = answer_path(spec, None, &config, &geos, &mut |_| true).unwrap();
        let flags = ["d:entries=16,ways=full".to_string()];
        let mut m = crate::machine::Machine::assemble(None, "t", &flags, &[]).unwrap();
        let full = crate::run::simulate_path(
            spec,
            None,
            &mut m,
            crate::run::Reading::OneThread,
            &mut |_| true,
        )
        .unwrap();
        assert_eq!(r["trace"]["format"], "workload");
        assert_eq!(
            r["answers"][0]["structure"]["misses"],
            full["structures"]["d"]["misses"]
        );
    }

    #[test]
    fn machines_outside_the_family_say_why() {
        for (flags, key) in [
            (vec!["a:entries=8", "b:entries=8,serves=data"], "tlb:"),
            (vec!["a:entries=8,policy=fifo"], "tlb.a.policy"),
            (
                vec!["a:entries=8,ways=2,partition=1/fifo/lru"],
                "tlb.a.partition",
            ),
            (vec!["a:entries=8,page=4k+2M"], "tlb.a.page"),
        ] {
            let flags: Vec<String> = flags.into_iter().map(String::from).collect();
            let config = MachineConfig::assemble(None, "t", &flags, &[]).unwrap();
            let e = Options::for_machine(&config).unwrap_err();
            assert!(e.starts_with(key), "{e}");
        }
    }
}
