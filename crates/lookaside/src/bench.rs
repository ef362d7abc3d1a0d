//! `lookaside bench`: references per second, with parsing and simulation measured apart.
//!
//! From one input trace it writes the same references in each format (repeated until the
//! stream is long enough to time), then measures per format: parsing alone, and parsing plus
//! simulation of a 64-entry fully associative LRU data TLB, on one core and with reading on
//! a second thread. Simulation alone is measured on
//! events already in memory, for 64- and 1024-entry fully associative TLBs and a two-level
//! hierarchy, and so are the one-pass engines (every fully associative LRU size up to 16384
//! by stack distance; 1…1024 sets × 1…16 ways of set-associative LRU), and page-table walks
//! per organisation ([`crate::pagetable::bench`]). Peak memory is read after synthetic streams of growing length to show that it
//! does not grow with trace length. Wall-clock figures are data for a person, never an
//! assertion in a test.

use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::event::{Event, BATCH};
use crate::machine::Machine;
use crate::onepass::{self, AllAssoc, Engine, Feeder, StackDistance};
use crate::run::{drain, run, run_path, Reading};
use crate::trace::{self, Format, Metadata};
use crate::workload::Synthetic;

fn machine(flags: &[&str]) -> Result<Machine> {
    let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
    Machine::assemble(None, "bench", &flags, &[])
}

const DTLB64: &str = "dtlb:entries=64,ways=full,policy=lru,page=4k,serves=data";
const DTLB1024: &str = "dtlb:entries=1024,ways=full,policy=lru,page=4k,serves=data";

/// A whole machine to time in the simulation-only rows (presets are data the caller reads).
#[derive(Clone, Debug)]
pub struct BenchMachine {
    pub label: String,
    pub toml: String,
    /// `key=value` overrides, as `--set`.
    pub overrides: Vec<String>,
}

/// Peak resident memory of this process so far, in KiB (Linux `VmHWM`), if known.
pub fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// Read all events of `path` into memory (the input trace is small).
fn load(path: &Path) -> Result<Vec<Event>> {
    let mut src = trace::open(path, None)?;
    let mut all = Vec::new();
    let mut batch = Vec::with_capacity(BATCH);
    while src.next_batch(&mut batch)? {
        all.extend_from_slice(&batch);
    }
    Ok(all)
}

/// Run the suite on `input` (any readable trace), writing scratch files into `work_dir`.
/// Each format's file holds at least `min_refs` events. `scale_refs` lists lengths of the
/// synthetic streams used to show flat memory.
pub fn run_suite(
    input: &Path,
    work_dir: &Path,
    min_refs: u64,
    scale_refs: &[u64],
    machines: &[BenchMachine],
) -> Result<Value> {
    std::fs::create_dir_all(work_dir).map_err(|e| Error::io(work_dir.display().to_string(), e))?;
    // Streams first: peak memory read before anything else raises it.
    let mut scale = Vec::new();
    for &n in scale_refs {
        let mut m = machine(&[DTLB64])?;
        let mut src = Synthetic::new(n, 1, 256, 64 << 10);
        let t = Instant::now();
        let p = run(&mut src, &mut m, &mut |_| true)?;
        let secs = t.elapsed().as_secs_f64();
        scale.push(
            json!({"references": p.events, "events_per_s": rate(p.events, secs),
                          "peak_rss_kib": peak_rss_kib()}),
        );
    }

    let events = load(input)?;
    if events.is_empty() {
        return Err(Error::Usage(format!(
            "{}: the trace is empty",
            input.display()
        )));
    }
    let repeat = min_refs.div_ceil(events.len() as u64).max(1);

    let mut formats = Vec::new();
    for (fmt, ext) in [
        (Format::Native, "lks"),
        (Format::Din, "din"),
        (Format::Lackey, "lackey"),
    ] {
        let path = work_dir.join(format!("bench.{ext}"));
        let meta = Metadata::default();
        let mut sink = trace::create(&path, Some(fmt), &meta)?;
        for _ in 0..repeat {
            for chunk in events.chunks(BATCH) {
                sink.write_batch(chunk)?;
            }
        }
        sink.finish()?;
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);

        let t = Instant::now();
        let n = drain(trace::open(&path, Some(fmt))?.as_mut())?;
        let parse = t.elapsed().as_secs_f64();

        let mut m = machine(&[DTLB64])?;
        let t = Instant::now();
        let (p, _) = run_path(&path, Some(fmt), &mut m, Reading::OneThread, &mut |_| true)?;
        let both = t.elapsed().as_secs_f64();
        let misses = m.ledger().total(0, |_, _, _| true).misses;

        let mut m2 = machine(&[DTLB64])?;
        let t = Instant::now();
        run_path(&path, Some(fmt), &mut m2, Reading::Pipelined, &mut |_| true)?;
        let piped = t.elapsed().as_secs_f64();
        if m2.ledger().total(0, |_, _, _| true).misses != misses {
            return Err(Error::Usage(
                "bench: the pipelined run disagrees with the serial one".into(),
            ));
        }
        formats.push(json!({
            "format": fmt.name(), "file_bytes": bytes, "events": n,
            "parse_events_per_s": rate(n, parse),
            "parse_and_simulate_events_per_s": rate(p.events, both),
            "parse_and_simulate_pipelined_events_per_s": rate(p.events, piped),
            "dtlb64_misses": misses,
        }));
        let _ = std::fs::remove_file(&path);
    }

    // Simulation alone, over events held in memory.
    let mut sim = Vec::new();
    let configs: [(&str, &[&str]); 3] = [
        ("dtlb 64 FA LRU", &[DTLB64]),
        ("dtlb 1024 FA LRU", &[DTLB1024]),
        (
            "itlb 128/8w + dtlb 64/4w + stlb 1536/12w",
            &[
                "itlb:entries=128,ways=8,serves=instruction,next=stlb",
                "dtlb:entries=64,ways=4,serves=data,next=stlb",
                "stlb:entries=1536,ways=12,serves=unified",
            ],
        ),
    ];
    let mut built = Vec::new();
    for (label, flags) in configs {
        built.push((label.to_string(), machine(flags)?));
    }
    for b in machines {
        let m = Machine::assemble(Some(&b.toml), &b.label, &[], &b.overrides)?;
        built.push((b.label.clone(), m));
    }
    for (label, mut m) in built {
        let t = Instant::now();
        for _ in 0..repeat {
            for chunk in events.chunks(BATCH) {
                m.run_batch(chunk);
            }
        }
        let secs = t.elapsed().as_secs_f64();
        sim.push(
            json!({"machine": label, "events": repeat * events.len() as u64,
                        "simulate_events_per_s": rate(repeat * events.len() as u64, secs)}),
        );
    }

    let fed = repeat * events.len() as u64;
    let row = |engine: &str, secs: f64| json!({"engine": engine, "events": fed, "events_per_s": rate(fed, secs)});
    let one = vec![
        row(
            "stack distance: FA LRU, every size 1..16384",
            time_engine(
                StackDistance::new(onepass::DEFAULT_MAX_DISTANCE),
                &events,
                repeat,
            ),
        ),
        row(
            "all-associativity: LRU, 1..1024 sets x 1..16 ways",
            time_engine(AllAssoc::new(onepass::DEFAULT_MAX_SETS), &events, repeat),
        ),
    ];

    Ok(json!({
        "input": input.display().to_string(),
        "input_events": events.len(),
        "repeat": repeat,
        "formats": formats,
        "simulate_only": sim,
        "onepass": one,
        "walks": crate::pagetable::bench::walk_rates(4_000_000),
        "scale": scale,
    }))
}

/// Seconds to feed `events`, `repeat` times, to `engine` (default options: every reference
/// kind, 4 KiB pages).
fn time_engine<E: Engine>(mut engine: E, events: &[Event], repeat: u64) -> f64 {
    let mut feeder = Feeder::new(onepass::Options::default());
    let t = Instant::now();
    for _ in 0..repeat {
        for chunk in events.chunks(BATCH) {
            feeder.feed(&mut engine, chunk);
        }
    }
    t.elapsed().as_secs_f64()
}
