//! Which machines the one-pass engines answer, and answering them from a trace file.
//!
//! A *family* is one machine whose single TLB varies only in geometry (entries, ways). The
//! sweep planner asks [`answer_path`] for the geometries it needs and gets one
//! [`FamilyAnswer`] from one pass over the trace: what the trace held, once, and each
//! geometry's misses, as a column. Every field a per-config run reports for that structure
//! (`accesses`, `hits`, `misses`, `miss_ratio`, `mpki`, `instructions_per_miss`, and the
//! `walk`) follows from them by the code that writes results ([`Figures`]), so a planned
//! sweep and a per-config one give identical tables.

use std::path::Path;

use serde_json::{json, Value};

use super::{AllAssoc, Engine, Feeder, Options, StackDistance, WAYS};
use crate::config::{MachineConfig, Placement, Straddle};
use crate::error::{Error, Result};
use crate::event::{Kind, BATCH};
use crate::ledger::Counter;
use crate::report::Figures;
use crate::tlb::Policy;
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
        // Every other section the machine has would be left out of the point silently: its
        // counts (and the stored point's keys) would differ from the machine run in full.
        if config.pagetable.is_some() {
            return Err("pagetable: page-table walks are not simulated in one pass".into());
        }
        if config.vac.is_some() {
            return Err("vac: a virtually addressed cache is not simulated in one pass".into());
        }
        if config.prefetch.is_some() {
            return Err(
                "prefetch: IPC-path prefetching fills the TLB at switches, which one pass does \
                 not simulate"
                    .into(),
            );
        }
        if let Some(c) = config.caches.first() {
            return Err(format!(
                "cache.{}: caches are not simulated in one pass",
                c.name
            ));
        }
        if config.machine.cpus != 1 {
            return Err(format!(
                "machine.cpus: one pass simulates one CPU, the machine has {}",
                config.machine.cpus
            ));
        }
        let [t] = config.tlbs.as_slice() else {
            return Err(format!(
                "tlb: the one-pass engines answer one structure, the machine has {}",
                config.tlbs.len()
            ));
        };
        if t.policy != Policy::Lru {
            return Err(format!("tlb.{}.policy: '{}' is not lru", t.name, t.policy));
        }
        if t.three_c {
            return Err(format!(
                "tlb.{}.3c: the classes of misses are not counted in one pass",
                t.name
            ));
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

impl Geometry {
    fn full(&self) -> bool {
        self.ways == self.entries
    }

    /// Whether one of the one-pass engines answers it (the sweep planner asks, to send the
    /// geometries they do not answer through the machine instead): stack distance a fully
    /// associative one up to [`super::MAX_DISTANCE_LIMIT`] entries, all-associativity the
    /// others it takes.
    pub fn answered(&self) -> bool {
        self.entries > 0
            && self.ways > 0
            && self.entries.is_multiple_of(self.ways)
            && if self.full() {
                self.entries <= super::MAX_DISTANCE_LIMIT
            } else {
                self.all_assoc()
            }
    }

    /// Whether the all-associativity engine answers it: a power-of-two set count up to
    /// [`MAX_SETS`] and at most [`WAYS`] ways (fully associative up to [`WAYS`] entries too).
    fn all_assoc(&self) -> bool {
        let sets = self.entries / self.ways;
        sets.is_power_of_two() && sets <= MAX_SETS && self.ways <= WAYS
    }
}

/// The engine that answered a geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    StackDistance,
    AllAssociativity,
}

impl Method {
    /// Its name in results (`engine`).
    pub fn name(self) -> &'static str {
        match self {
            Method::StackDistance => "stack-distance",
            Method::AllAssociativity => "all-associativity",
        }
    }
}

/// The answers of one pass for a family: what the trace held, and each geometry's misses,
/// as columns (`geometries[i]` answered by `methods[i]` with `misses[i]`). Every geometry
/// looks up the same translations, `accesses`.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyAnswer {
    /// The trace: its path (or workload spec) and format.
    pub path: String,
    pub format: &'static str,
    /// The trace's references and instructions (fetches), as a machine counts them.
    pub references: u64,
    pub instructions: u64,
    /// Translations past the first page of a reference, and references past 2^64 (the
    /// machine's `straddles` and `wrapped`).
    pub straddles: u64,
    pub wrapped: u64,
    /// The highest CPU the trace's CPU markers name (0: only CPU 0 made events).
    pub other_cpu: u32,
    /// The TLB's name and its page size, as results label it (`4K`).
    pub structure: String,
    pub page: String,
    pub accesses: u64,
    pub geometries: Vec<Geometry>,
    pub methods: Vec<Method>,
    pub misses: Vec<u64>,
}

impl FamilyAnswer {
    /// The counter of geometry `i` (its page-table walks are one per miss).
    pub fn counter(&self, i: usize) -> Counter {
        Counter {
            accesses: self.accesses,
            misses: self.misses[i],
        }
    }

    /// Share of the translations left unsimulated (references past 2^64), as the machine
    /// gives it.
    pub fn dropped_share(&self) -> f64 {
        crate::machine::dropped_share(self.wrapped, self.accesses)
    }

    /// What the results must say about translations left unsimulated.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = crate::machine::unsimulated_warnings(self.wrapped, self.accesses);
        w.extend(crate::machine::one_cpu_warning(self.other_cpu));
        w
    }

    /// What is common to every geometry, as JSON: `{trace: {path, format, references,
    /// instructions, straddles, wrapped, dropped, dropped_share}, warnings, structure, page:
    /// [page], accesses}`, the fields a per-config result has under those names.
    pub fn header_json(&self) -> Value {
        json!({
            "trace": {"path": self.path, "format": self.format,
                      "references": self.references, "instructions": self.instructions,
                      "straddles": self.straddles, "wrapped": self.wrapped,
                      "dropped": self.wrapped, "dropped_share": self.dropped_share()},
            "warnings": self.warnings(),
            "structure": self.structure,
            "page": [self.page],
            "accesses": self.accesses,
        })
    }

    /// Geometry `i` as a per-config result's parts: `{engine, entries, ways, sets,
    /// structure: {accesses, hits, misses, miss_ratio, mpki, instructions_per_miss}, walk:
    /// {count, per_1000_instructions}}`, computed by the code that writes results.
    pub fn answer_json(&self, i: usize) -> Value {
        let g = self.geometries[i];
        let c = self.counter(i);
        let mut walk = serde_json::Map::new();
        walk.insert("count".into(), json!(c.misses));
        let walks = Counter {
            accesses: c.misses,
            misses: c.misses,
        };
        if let Some(x) = Figures::of(walks, self.instructions).mpki {
            walk.insert("per_1000_instructions".into(), json!(x));
        }
        json!({
            "engine": self.methods[i].name(),
            "entries": g.entries, "ways": g.ways, "sets": g.entries / g.ways,
            "structure": crate::report::counter_json(c, self.instructions),
            "walk": walk,
        })
    }
}

/// Answer every geometry in `want` of the machine `config` (its single TLB's own entries
/// and ways are ignored) on the trace at `path`, in one pass over it: all-associativity for
/// the set-associative geometries (a power-of-two set count up to [`MAX_SETS`], at most
/// [`WAYS`] ways) and the fully associative ones up to [`WAYS`] entries, stack distance for
/// the other fully associative ones (up to [`super::MAX_DISTANCE_LIMIT`] entries); both
/// engines see the same events when both are needed. A usage error says why the family
/// cannot be answered so. `progress` is called now and then; returning `false` from it stops
/// the pass.
pub fn answer_path(
    path: &Path,
    format: Option<Format>,
    config: &MachineConfig,
    want: &[Geometry],
    progress: &mut dyn FnMut(crate::run::Progress) -> bool,
) -> Result<FamilyAnswer> {
    let opts = Options::for_machine(config).map_err(Error::Usage)?;
    let page = crate::config::PageSize::Size(1 << opts.page_shift).label();
    if want.is_empty() {
        return Err(Error::Usage("no geometry asked for".into()));
    }
    for g in want {
        if g.entries == 0 || g.ways == 0 || g.entries % g.ways != 0 {
            return Err(Error::Usage(format!(
                "{} entries of {} ways is not a geometry",
                g.entries, g.ways
            )));
        }
        if g.full() && g.entries > super::MAX_DISTANCE_LIMIT {
            return Err(Error::Usage(format!(
                "{} entries, fully associative: stack distance answers up to {}",
                g.entries,
                super::MAX_DISTANCE_LIMIT
            )));
        }
        if !g.full() && !g.all_assoc() {
            return Err(Error::Usage(format!(
                "{} entries of {} ways: all-associativity needs a power-of-two set count up \
                 to {MAX_SETS} and at most {WAYS} ways",
                g.entries, g.ways
            )));
        }
    }
    // The small fully associative geometries ride along with all-associativity when it runs.
    let assoc = want.iter().any(|g| !g.full());
    let methods: Vec<Method> = want
        .iter()
        .map(|g| match assoc && g.all_assoc() {
            true => Method::AllAssociativity,
            false => Method::StackDistance,
        })
        .collect();
    let largest = |m: Method, size: fn(&Geometry) -> usize| {
        want.iter()
            .zip(&methods)
            .filter(|&(_, &x)| x == m)
            .map(|(g, _)| size(g))
            .max()
    };
    let max_distance = largest(Method::StackDistance, |g| g.entries);
    let max_sets = largest(Method::AllAssociativity, |g| g.entries / g.ways);
    // A trace file, or the stream a `workload:` spec makes.
    let (mut opened, format) = crate::run::open_source(path, format)?;
    let mut source = crate::run::Watched::new(opened.as_mut(), progress);
    let mut feeder = Feeder::new(opts);
    let mut sd = max_distance.map(StackDistance::new);
    let mut aa = max_sets.map(AllAssoc::new);
    let instructions = match (&mut sd, &mut aa) {
        (Some(sd), Some(aa)) => pass(&mut source, &mut feeder, &mut (sd, aa))?,
        (Some(sd), None) => pass(&mut source, &mut feeder, sd)?,
        (None, Some(aa)) => pass(&mut source, &mut feeder, aa)?,
        (None, None) => unreachable!("every geometry has a method"),
    };
    // The miss curve once (every size), not a sum over the histogram per geometry.
    let (sd, aa) = (sd.map(|s| s.result()), aa.map(|a| a.result()));
    let curve = sd.as_ref().map(|r| r.miss_curve()).unwrap_or_default();
    let misses = want
        .iter()
        .zip(&methods)
        .map(|(g, m)| match (m, &aa) {
            (Method::StackDistance, _) => curve.get(g.entries - 1).copied(),
            (Method::AllAssociativity, Some(r)) => r.misses(g.entries / g.ways, g.ways),
            (Method::AllAssociativity, None) => None,
        })
        .collect::<Option<Vec<u64>>>()
        .ok_or_else(|| Error::Usage("a geometry the pass did not answer".into()))?;
    let accesses = match (&sd, &aa) {
        (Some(r), _) => r.accesses,
        (None, Some(r)) => r.accesses,
        (None, None) => 0,
    };
    Ok(FamilyAnswer {
        path: path.display().to_string(),
        format,
        references: feeder.references,
        instructions,
        straddles: feeder.straddles,
        wrapped: feeder.wrapped,
        other_cpu: feeder.other_cpu,
        structure: config.tlbs[0].name.clone(),
        page,
        accesses,
        geometries: want.to_vec(),
        methods,
        misses,
    })
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
            // Both engines in one pass: fully associative sizes past 16 by stack distance.
            (
                "m:entries=8,ways=2,serves=data",
                vec![(8, 2), (16, 16), (17, 17), (512, 512), (64, 4), (8, 2)],
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
            assert_eq!(r.geometries, geos);
            let name = base.split(':').next().unwrap();
            assert_eq!(r.structure, name);
            let header = r.header_json();
            for (i, &(entries, ways)) in want.iter().enumerate() {
                let a = r.answer_json(i);
                let method = match entries != ways
                    || (want.iter().any(|&(e, w)| e != w) && entries <= WAYS)
                {
                    true => "all-associativity",
                    false => "stack-distance",
                };
                assert_eq!(a["engine"], method, "{entries}/{ways}");
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
                assert_eq!(s["geometry"]["page"], header["page"]);
                assert_eq!(a["walk"]["count"], full["walk"]["count"], "{flag}");
                assert_eq!(
                    a["walk"]["per_1000_instructions"],
                    full["walk"]["per_1000_instructions"]
                );
                for k in [
                    "references",
                    "instructions",
                    "straddles",
                    "wrapped",
                    "dropped_share",
                ] {
                    assert_eq!(header["trace"][k], full["trace"][k], "{flag} {k}");
                }
                assert_eq!(header["warnings"], full["warnings"]);
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
        assert_eq!(r.format, "workload");
        assert_eq!(
            serde_json::json!(r.misses[0]),
            full["structures"]["d"]["misses"]
        );
    }

    #[test]
    fn geometries_no_engine_answers_are_refused() {
        let config =
            MachineConfig::assemble(None, "t", &["d:entries=8,ways=full".into()], &[]).unwrap();
        for (entries, ways, words) in [
            (12, 5, "not a geometry"),
            (0, 1, "not a geometry"),
            (24, 2, "power-of-two"),
            (64, 32, "at most 16 ways"),
            (
                super::super::MAX_DISTANCE_LIMIT + 1,
                super::super::MAX_DISTANCE_LIMIT + 1,
                "stack distance answers up to",
            ),
        ] {
            let geos = [Geometry { entries, ways }];
            let e = answer_path(
                &data("sortprog.lackey.zst"),
                None,
                &config,
                &geos,
                &mut |_| true,
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains(words), "{entries}/{ways}: {e}");
        }
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
            (vec!["a:entries=8,3c=yes"], "tlb.a.3c"),
        ] {
            let flags: Vec<String> = flags.into_iter().map(String::from).collect();
            let config = MachineConfig::assemble(None, "t", &flags, &[]).unwrap();
            let e = Options::for_machine(&config).unwrap_err();
            assert!(e.starts_with(key), "{e}");
        }
        // Sections beside the one TLB are refused, never dropped.
        for (text, key) in [
            ("[pagetable]\norganisation = \"radix\"\n", "pagetable:"),
            ("[vac]\n", "vac:"),
            ("[prefetch]\nuser_entries = 4\n", "prefetch:"),
            (
                "[[cache]]\nname = \"c\"\nsize = \"8k\"\nline = 32\n",
                "cache.c:",
            ),
            ("[machine]\ncpus = 2\n", "machine.cpus:"),
        ] {
            let flags = vec!["a:entries=8".to_string()];
            let config = MachineConfig::assemble(Some(text), "t", &flags, &[]).unwrap();
            let e = Options::for_machine(&config).unwrap_err();
            assert!(e.starts_with(key), "{e}");
        }
    }
}
