//! `lookaside bench`: events per CPU second, per configuration and per trace, with parsing
//! and simulation measured apart.
//!
//! Speed measured on one trace shape predicts nothing about another: a hit-dominated trace
//! (a program whose working set fits the TLB) exercises the first-level hit path, a
//! miss-heavy one the replacement and the walk, a whole-system one switches between address
//! spaces and modes. So the caller names several traces and several configurations (TLBs,
//! caches, whole machines, the one-pass engines); for each trace this measures
//!
//! - **parse alone**: the trace decoded into a sink that only counts its events;
//! - **simulate alone**: each configuration fed the events already held in memory;
//! - **parse + simulate**: each configuration fed from the file on one thread, as
//!   `lookaside simulate --reading one-thread` does (a native trace decoded straight into
//!   the machine).
//!
//! Each is run `runs` times on a fresh machine and timed by the CPU time of the measuring
//! thread (`CLOCK_THREAD_CPUTIME_ID`), not by the wall clock: on a shared machine a wall
//! clock counts the time other processes hold the core. Building a machine, and reading the
//! events into memory, are outside the timed region. Every run of one configuration on one
//! trace must give the same result, in both modes; a disagreement is an error. Figures are
//! data for a person, never an assertion in a test.
//!
//! Slow configurations may be limited to a prefix of each trace (`max_refs`), and a plan can
//! limit every trace (`max_refs` of the plan), so that a quick run stays quick; each cell
//! says how many events it measured.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::event::{Event, EventSink, BATCH};
use crate::machine::{Machine, MemoryLimit};
use crate::onepass::{self, AllAssoc, Feeder, StackDistance};
use crate::report::TraceInfo;
use crate::trace::native::NativeReader;
use crate::trace::{self, Format, Metadata, TraceSource};
use crate::workload::Synthetic;

/// What to measure: traces × configurations, `runs` times each.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub traces: Vec<BenchTrace>,
    pub configurations: Vec<BenchConfig>,
    /// Runs of each measurement (at least 1; min, median and max are reported).
    #[serde(default = "default_runs")]
    pub runs: usize,
    /// Events read from each trace at most (none: all of them).
    #[serde(default)]
    pub max_refs: Option<u64>,
    /// Lengths of synthetic streams simulated on a 64-entry data TLB, with the peak
    /// resident memory after each (it stays flat: memory grows with what is simulated, not
    /// with trace length).
    #[serde(default)]
    pub scale: Vec<u64>,
}

fn default_runs() -> usize {
    5
}

/// A trace: a file in any readable format, or a `workload:` spec, which is written once to
/// the native format (at the default zstd level) in the scratch directory, so that it can
/// be parsed like a file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchTrace {
    pub label: String,
    pub path: String,
}

/// What a configuration runs.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// A machine: `toml` (a machine file's text, presets included: the caller reads them),
    /// plus `tlb` flags and `set` overrides, as `lookaside simulate` takes them.
    Machine,
    /// Every fully associative LRU size up to 16384 by stack distance, in one pass.
    StackDistance,
    /// Set-associative LRU, 1…1024 sets × 1…16 ways, in one pass.
    AllAssociativity,
}

/// Which copy of a trace a configuration reads.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum InputKind {
    /// The trace as given (a `workload:` spec: its native copy).
    #[default]
    Trace,
    /// A copy of the trace's events in DineroIV's din text, written once per trace in the
    /// scratch directory: what parsing the classic cache simulators' input costs. Both modes
    /// read its events (din keeps only the kind and the address of a reference: every
    /// reference is 4 bytes, user mode, address space 0), so their results agree.
    Din,
}

impl InputKind {
    fn name(self) -> &'static str {
        match self {
            InputKind::Trace => "trace",
            InputKind::Din => "din",
        }
    }
}

/// One configuration (a row of the table).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchConfig {
    pub label: String,
    pub engine: EngineKind,
    #[serde(default)]
    pub toml: Option<String>,
    #[serde(default)]
    pub tlb: Vec<String>,
    /// `--cache` flags: DineroIV's untimed cache model (`[[cache]]` tables).
    #[serde(default)]
    pub cache: Vec<String>,
    #[serde(default)]
    pub set: Vec<String>,
    /// Events of each trace it runs on at most (a slow whole machine runs on a prefix).
    #[serde(default)]
    pub max_refs: Option<u64>,
    #[serde(default)]
    pub input: InputKind,
}

/// How often, at most, a long measurement asks the caller whether to stop.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// The caller's channel: `say(Some(step))` reports a step, `say(None)` only asks (about ten
/// times a second while a measurement runs); either returns `false` to stop the bench, which
/// then ends in an "interrupted" error.
pub type Say<'a> = dyn FnMut(Option<&str>) -> bool + 'a;

struct Watch<'a, 'b> {
    say: &'a mut Say<'b>,
    last: Instant,
}

impl Watch<'_, '_> {
    fn step(&mut self, message: &str) -> Result<()> {
        self.last = Instant::now();
        if (self.say)(Some(message)) {
            Ok(())
        } else {
            Err(Error::Usage("interrupted".into()))
        }
    }

    /// Cheap enough to call once per batch inside a timed loop: one clock read, and the
    /// caller only every [`POLL_EVERY`].
    #[inline]
    fn poll(&mut self) -> Result<()> {
        let now = Instant::now();
        if now.duration_since(self.last) >= POLL_EVERY {
            self.last = now;
            if !(self.say)(None) {
                return Err(Error::Usage("interrupted".into()));
            }
        }
        Ok(())
    }
}

/// CPU time of the calling thread, in seconds (user + system).
#[cfg(unix)]
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant libc defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// What [`thread_cpu_seconds`] measures, for the report.
#[cfg(unix)]
pub const CLOCK: &str = "CPU time of the measuring thread (CLOCK_THREAD_CPUTIME_ID)";

/// Without a per-thread CPU clock, the wall clock (said so in the report).
#[cfg(not(unix))]
pub fn thread_cpu_seconds() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64()
}

#[cfg(not(unix))]
pub const CLOCK: &str = "wall time (no per-thread CPU clock on this platform)";

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

/// Min, median and max of `xs` (not empty), as JSON.
fn spread(xs: &[f64]) -> Value {
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    json!({"min": s[0], "median": median, "max": s[n - 1]})
}

/// A sink that only counts: decoding with nothing downstream.
#[derive(Default)]
struct Counting {
    events: u64,
    references: u64,
}

impl EventSink for Counting {
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        self.events += 1;
        self.references += e.kind.is_ref() as u64;
    }
}

/// One measurement's runs: CPU seconds and events of each.
struct Runs {
    seconds: Vec<f64>,
    events: u64,
    references: u64,
}

impl Runs {
    fn json(&self, mode: &str, configuration: &str, trace: &str) -> Value {
        let rates: Vec<f64> = self.seconds.iter().map(|&s| rate(self.events, s)).collect();
        json!({
            "mode": mode, "configuration": configuration, "trace": trace,
            "events": self.events, "references": self.references,
            "cpu_seconds": self.seconds, "events_per_s_runs": rates,
            "events_per_s": spread(&rates),
        })
    }
}

/// A trace ready to measure: its file, and its first events in memory.
struct Loaded {
    label: String,
    file: PathBuf,
    format: Format,
    events: Vec<Event>,
}

/// Read up to `limit` events of `path` into memory, refusing a trace whose events would
/// take more than half of the host's memory (the bench holds them for simulation alone).
fn load(path: &Path, limit: u64, w: &mut Watch) -> Result<(Vec<Event>, Format)> {
    let (input, format) = trace::open_input(path, None)?;
    let mut src = trace::reader(input, format)?;
    let room = MemoryLimit::default_for_host().bytes / std::mem::size_of::<Event>() as u64;
    let mut all = Vec::new();
    let mut batch = Vec::with_capacity(BATCH);
    while (all.len() as u64) < limit && src.next_batch(&mut batch)? {
        let take = batch.len().min((limit - all.len() as u64) as usize);
        if (all.len() + take) as u64 > room {
            return Err(Error::Usage(format!(
                "{}: the bench holds a trace's events in memory, and more than {room} events \
                 ({}) would take over half of this host's memory; measure a prefix with \
                 --max-refs N",
                path.display(),
                crate::machine::human_bytes(room * std::mem::size_of::<Event>() as u64)
            )));
        }
        all.extend_from_slice(&batch[..take]);
        w.poll()?;
    }
    Ok((all, format))
}

/// Decode up to `limit` events of `path` into a counting sink; (events, references).
fn parse_alone(path: &Path, format: Format, limit: u64, w: &mut Watch) -> Result<(u64, u64)> {
    let (input, _) = trace::open_input(path, Some(format))?;
    let mut sink = Counting::default();
    if format == Format::Native {
        let mut r = NativeReader::new(input)?;
        while sink.events < limit {
            let max = (limit - sink.events).min(BATCH as u64) as usize;
            if r.decode_with(max, &mut sink)? == 0 {
                break;
            }
            w.poll()?;
        }
    } else {
        let mut src = trace::reader(input, format)?;
        let mut batch = Vec::with_capacity(BATCH);
        while sink.events < limit && src.next_batch(&mut batch)? {
            let take = batch.len().min((limit - sink.events) as usize);
            for e in &batch[..take] {
                sink.event(e);
            }
            w.poll()?;
        }
    }
    Ok((sink.events, sink.references))
}

/// A configuration built afresh for one run.
enum Built {
    Machine(Box<Machine>),
    Stack(Box<StackDistance>, Feeder),
    AllAssoc(Box<AllAssoc>, Feeder),
}

impl Built {
    fn new(c: &BenchConfig) -> Result<Built> {
        let feeder = || Feeder::new(onepass::Options::default());
        Ok(match c.engine {
            EngineKind::Machine => Built::Machine(Box::new(Machine::assemble_all(
                c.toml.as_deref(),
                &c.label,
                &c.tlb,
                &c.cache,
                &c.set,
            )?)),
            EngineKind::StackDistance => Built::Stack(
                Box::new(StackDistance::new(onepass::DEFAULT_MAX_DISTANCE)),
                feeder(),
            ),
            EngineKind::AllAssociativity => {
                Built::AllAssoc(Box::new(AllAssoc::new(onepass::DEFAULT_MAX_SETS)), feeder())
            }
        })
    }

    /// Simulate a batch of events.
    #[inline]
    fn batch(&mut self, events: &[Event]) {
        match self {
            Built::Machine(m) => m.run_batch(events),
            Built::Stack(e, f) => f.feed(e.as_mut(), events),
            Built::AllAssoc(e, f) => f.feed(e.as_mut(), events),
        }
    }

    /// What the run computed, to compare runs with each other: a machine's whole result
    /// (less the trace's name), or a one-pass engine's references and a few of its answers.
    fn outcome(&self) -> Value {
        match self {
            Built::Machine(m) => {
                let info = TraceInfo {
                    path: String::new(),
                    format: String::new(),
                };
                crate::report::result_json(m, &info)
            }
            Built::Stack(e, f) => {
                let r = e.result();
                let misses = [1, 64, 1024, 16384].map(|n| r.misses(n));
                json!({"references": f.references, "misses": misses})
            }
            Built::AllAssoc(e, f) => {
                let r = e.result();
                let misses = [(1, 1), (16, 4), (64, 16), (1024, 16)].map(|(s, w)| r.misses(s, w));
                json!({"references": f.references, "misses": misses})
            }
        }
    }
}

/// Feed `events` (in memory) to `b`; returns the events fed.
fn simulate_alone(b: &mut Built, events: &[Event], w: &mut Watch) -> Result<u64> {
    for chunk in events.chunks(BATCH) {
        b.batch(chunk);
        w.poll()?;
    }
    Ok(events.len() as u64)
}

/// Read up to `limit` events of `path` and feed them to `b` on this thread, as
/// `lookaside simulate --reading one-thread` does: a native trace is decoded straight into
/// a machine that takes events one at a time, anything else goes through batches.
fn parse_and_simulate(
    b: &mut Built,
    path: &Path,
    format: Format,
    limit: u64,
    w: &mut Watch,
) -> Result<u64> {
    let (input, _) = trace::open_input(path, Some(format))?;
    let mut n = 0u64;
    if let Built::Machine(m) = b {
        if format == Format::Native && !m.fed_in_batches() {
            let mut r = NativeReader::new(input)?;
            while n < limit {
                let max = (limit - n).min(BATCH as u64) as usize;
                let k = m.decode_native(&mut r, max)?;
                if k == 0 {
                    break;
                }
                n += k as u64;
                w.poll()?;
            }
            return Ok(n);
        }
    }
    let mut src = trace::reader(input, format)?;
    let mut batch = Vec::with_capacity(BATCH);
    while n < limit && src.next_batch(&mut batch)? {
        let take = batch.len().min((limit - n) as usize);
        b.batch(&batch[..take]);
        n += take as u64;
        w.poll()?;
    }
    Ok(n)
}

/// What a cell says of the result besides speed: for a machine, the share of translations
/// it could not simulate (a MIPS machine's address errors on a 64-bit trace: a rate over
/// them is not a rate of simulation) and the counts of its first structure; for a one-pass
/// engine, nothing.
fn summary(outcome: &Value) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    if let Some(share) = outcome.pointer("/trace/dropped_share") {
        m.insert("dropped_share".into(), share.clone());
    }
    if let Some((name, s)) = outcome
        .get("structures")
        .and_then(Value::as_object)
        .and_then(|s| s.iter().next())
    {
        m.insert(
            "first_structure".into(),
            json!({"name": name, "accesses": s["accesses"], "misses": s["misses"]}),
        );
    }
    m
}

/// The events in `events` that are references (not control events).
fn references(events: &[Event]) -> u64 {
    events.iter().filter(|e| e.kind.is_ref()).count() as u64
}

/// Write the first `limit` events of a `workload:` spec to a native trace in `work_dir` (at
/// the default zstd level); a file is used as it is.
fn materialise(
    t: &BenchTrace,
    work_dir: &Path,
    index: usize,
    limit: u64,
    w: &mut Watch,
) -> Result<PathBuf> {
    let Some(mut src) = crate::workload::from_spec(&t.path)? else {
        // Every measurement reads the file again: a pipe or standard input cannot serve.
        let path = PathBuf::from(&t.path);
        let regular = std::fs::metadata(&path).map_or(true, |m| m.is_file());
        if t.path == "-" || !regular {
            return Err(Error::Usage(format!(
                "{}: the bench reads each trace many times: give a file, not a pipe",
                t.path
            )));
        }
        return Ok(path);
    };
    let dst = work_dir.join(format!("trace-{index}.lks"));
    let mut meta = Metadata::default();
    meta.extra.insert("workload".into(), t.path.clone());
    let mut sink = trace::create(&dst, Some(Format::Native), &meta)?;
    let mut batch = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    while n < limit && src.next_batch(&mut batch)? {
        let take = batch.len().min((limit - n) as usize);
        sink.write_batch(&batch[..take])?;
        n += take as u64;
        w.poll()?;
    }
    sink.finish()?;
    Ok(dst)
}

/// Run `plan`, writing scratch files into `work_dir`; `say` reports each step and can stop
/// the bench (see [`Say`]). Returns every run's figures as JSON.
pub fn run_plan(plan: &Plan, work_dir: &Path, say: &mut Say) -> Result<Value> {
    if plan.runs == 0 {
        return Err(Error::Usage("bench: --runs must be at least 1".into()));
    }
    if plan.traces.is_empty() {
        return Err(Error::Usage("bench: no trace to measure".into()));
    }
    std::fs::create_dir_all(work_dir).map_err(|e| Error::io(work_dir.display().to_string(), e))?;
    let mut w = Watch {
        say,
        last: Instant::now(),
    };
    // Streams first: peak memory read before anything else raises it.
    let mut scale = Vec::new();
    for &n in &plan.scale {
        w.step(&format!("synthetic stream of {n} references"))?;
        let mut b = Built::new(&BenchConfig {
            label: "dtlb 64".into(),
            engine: EngineKind::Machine,
            toml: None,
            tlb: vec!["dtlb:entries=64,ways=full,policy=lru,page=4k,serves=data".into()],
            cache: vec![],
            set: vec![],
            max_refs: None,
            input: InputKind::Trace,
        })?;
        let mut src = Synthetic::new(n, 1, 256, 64 << 10);
        let mut batch = Vec::with_capacity(BATCH);
        let mut fed = 0u64;
        let t = thread_cpu_seconds();
        while src.next_batch(&mut batch)? {
            b.batch(&batch);
            fed += batch.len() as u64;
            w.poll()?;
        }
        let secs = thread_cpu_seconds() - t;
        scale.push(json!({"references": fed, "cpu_seconds": secs,
                          "events_per_s": rate(fed, secs), "peak_rss_kib": peak_rss_kib()}));
    }

    let limit = plan.max_refs.unwrap_or(u64::MAX);
    let mut traces = Vec::new();
    let mut cells = Vec::new();
    for (i, t) in plan.traces.iter().enumerate() {
        if t.path.starts_with("workload:") {
            w.step(&format!(
                "{}: writing {} to the native format",
                t.label, t.path
            ))?;
        }
        let file = materialise(t, work_dir, i, limit, &mut w)?;
        let (events, format) = load(&file, limit, &mut w)?;
        if events.is_empty() {
            return Err(Error::Usage(format!(
                "{}: the trace holds no event: nothing to measure",
                t.path
            )));
        }
        let bytes = std::fs::metadata(&file).map(|m| m.len()).ok();
        let l = Loaded {
            label: t.label.clone(),
            file,
            format,
            events,
        };
        traces.push(
            json!({"label": t.label, "path": t.path, "format": format.name(),
                           "file_bytes": bytes, "events": l.events.len(),
                           "references": references(&l.events)}),
        );
        let scratch = work_dir.join(format!("trace-{i}"));
        measure_trace(plan, &l, &scratch, &mut w, &mut cells)?;
    }

    let configurations: Vec<Value> = plan
        .configurations
        .iter()
        .map(|c| {
            json!({"label": c.label, "engine": c.engine_name(), "toml": c.toml, "tlb": c.tlb,
                   "cache": c.cache, "set": c.set, "max_refs": c.max_refs,
                   "input": c.input.name()})
        })
        .collect();
    Ok(json!({
        "clock": CLOCK,
        "runs": plan.runs,
        "max_refs": plan.max_refs,
        "traces": traces,
        "configurations": configurations,
        "cells": cells,
        "scale": scale,
    }))
}

impl BenchConfig {
    fn engine_name(&self) -> &'static str {
        match self.engine {
            EngineKind::Machine => "machine",
            EngineKind::StackDistance => "stack-distance",
            EngineKind::AllAssociativity => "all-associativity",
        }
    }
}

/// Every measurement of one trace: parse alone, then each configuration simulated alone and
/// parsed + simulated.
/// Write `events` to a din text file `dst` and read them back: the events a din reader
/// gives (what din cannot say is lost), and the file.
fn din_copy(events: &[Event], dst: &Path, w: &mut Watch) -> Result<Loaded> {
    let mut sink = trace::create(dst, Some(Format::Din), &Metadata::default())?;
    for chunk in events.chunks(BATCH) {
        sink.write_batch(chunk)?;
        w.poll()?;
    }
    sink.finish()?;
    let (events, format) = load(dst, u64::MAX, w)?;
    Ok(Loaded {
        label: String::new(),
        file: dst.to_path_buf(),
        format,
        events,
    })
}

/// Every measurement of one trace: parse alone, then each configuration simulated alone and
/// parsed + simulated. `scratch`: a path prefix for the copies some configurations read
/// (din text), made once per prefix length and removed after the trace.
fn measure_trace(
    plan: &Plan,
    t: &Loaded,
    scratch: &Path,
    w: &mut Watch,
    cells: &mut Vec<Value>,
) -> Result<()> {
    let mut copies: Vec<(u64, Loaded)> = Vec::new();
    let r = measure_trace_with(plan, t, scratch, w, cells, &mut copies);
    for (_, c) in &copies {
        let _ = std::fs::remove_file(&c.file);
    }
    r
}

fn measure_trace_with(
    plan: &Plan,
    t: &Loaded,
    scratch: &Path,
    w: &mut Watch,
    cells: &mut Vec<Value>,
    copies: &mut Vec<(u64, Loaded)>,
) -> Result<()> {
    let all = t.events.len() as u64;
    w.step(&format!("{}: parse alone ({all} events)", t.label))?;
    let mut runs = Runs {
        seconds: Vec::new(),
        events: 0,
        references: 0,
    };
    for _ in 0..plan.runs {
        let t0 = thread_cpu_seconds();
        let (n, r) = parse_alone(&t.file, t.format, all, w)?;
        runs.seconds.push(thread_cpu_seconds() - t0);
        if n != all {
            return Err(Error::Usage(format!(
                "bench: {}: parsing gave {n} events, not the {all} read before",
                t.file.display()
            )));
        }
        (runs.events, runs.references) = (n, r);
    }
    cells.push(runs.json("parse", "parse alone (counting)", &t.label));

    for c in &plan.configurations {
        let n = all.min(c.max_refs.unwrap_or(u64::MAX));
        let (events, file, format) = match c.input {
            InputKind::Trace => (&t.events[..n as usize], &t.file, t.format),
            InputKind::Din => {
                let at = match copies.iter().position(|(k, _)| *k == n) {
                    Some(at) => at,
                    None => {
                        w.step(&format!("{}: writing {n} events as din text", t.label))?;
                        let dst = scratch.with_extension(format!("{n}.din"));
                        copies.push((n, din_copy(&t.events[..n as usize], &dst, w)?));
                        copies.len() - 1
                    }
                };
                let d = &copies[at].1;
                (&d.events[..], &d.file, d.format)
            }
        };
        // A din copy holds the references of the prefix, not its control events.
        let n = events.len() as u64;
        w.step(&format!("{}: {} ({n} events)", t.label, c.label))?;
        let mut first: Option<Value> = None;
        for (mode, from_file) in [("simulate", false), ("parse+simulate", true)] {
            let mut runs = Runs {
                seconds: Vec::new(),
                events: n,
                references: references(events),
            };
            for _ in 0..plan.runs {
                let mut b = Built::new(c)?;
                let t0 = thread_cpu_seconds();
                let fed = if from_file {
                    parse_and_simulate(&mut b, file, format, n, w)?
                } else {
                    simulate_alone(&mut b, events, w)?
                };
                runs.seconds.push(thread_cpu_seconds() - t0);
                if fed != n {
                    return Err(Error::Usage(format!(
                        "bench: {} on {}: {fed} events fed, not {n}",
                        c.label, t.label
                    )));
                }
                let got = b.outcome();
                match &first {
                    None => first = Some(got),
                    Some(v) if *v != got => {
                        return Err(Error::Usage(format!(
                            "bench: {} on {}: a {mode} run gave another result than the first run",
                            c.label, t.label
                        )))
                    }
                    Some(_) => {}
                }
            }
            let mut cell = runs.json(mode, &c.label, &t.label);
            if let (Some(o), Some(r)) = (cell.as_object_mut(), &first) {
                o.extend(summary(r));
                if c.input != InputKind::Trace {
                    o.insert("input".into(), json!(c.input.name()));
                    let bytes = std::fs::metadata(file).map(|m| m.len()).ok();
                    o.insert("file_bytes".into(), json!(bytes));
                }
            }
            cells.push(cell);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(traces: Vec<BenchTrace>, runs: usize) -> Plan {
        let machine = |label: &str, tlb: &[&str]| BenchConfig {
            label: label.into(),
            engine: EngineKind::Machine,
            toml: None,
            tlb: tlb.iter().map(|s| s.to_string()).collect(),
            cache: vec![],
            set: vec![],
            max_refs: None,
            input: InputKind::Trace,
        };
        let mut l1 = machine("l1", &[]);
        l1.cache = vec!["l1:size=4k,line=64,ways=4,policy=lru,serves=unified".into()];
        let mut din = l1.clone();
        din.label = "l1 from din".into();
        din.input = InputKind::Din;
        din.max_refs = Some(4000);
        let mut cache = machine("tlb + dcache", &["dtlb:entries=64,ways=full,policy=lru"]);
        cache.toml = Some(
            "[memory]\n[memory.dcache]\nsize = \"32KiB\"\nline = 64\nways = 8\nmiss_cycles = 10\n"
                .into(),
        );
        cache.max_refs = Some(3000);
        Plan {
            traces,
            configurations: vec![
                machine("dtlb 64", &["dtlb:entries=64,ways=full,policy=lru"]),
                cache,
                l1,
                din,
                BenchConfig {
                    label: "stack".into(),
                    engine: EngineKind::StackDistance,
                    toml: None,
                    tlb: vec![],
                    cache: vec![],
                    set: vec![],
                    max_refs: None,
                    input: InputKind::Trace,
                },
            ],
            runs,
            max_refs: Some(10_000),
            scale: vec![],
        }
    }

    fn cell<'a>(r: &'a Value, mode: &str, conf: &str, trace: &str) -> &'a Value {
        r["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["mode"] == mode && c["configuration"] == conf && c["trace"] == trace)
            .unwrap_or_else(|| panic!("no cell {mode} {conf} {trace}"))
    }

    #[test]
    fn every_configuration_on_every_trace_in_each_mode() {
        let dir = std::env::temp_dir().join(format!("lookaside-bench-{}", std::process::id()));
        let p = plan(
            vec![
                BenchTrace {
                    label: "seg".into(),
                    path: "workload:segments,refs=20000".into(),
                },
                BenchTrace {
                    label: "seg-small".into(),
                    path: "workload:segments,refs=5000,seed=2".into(),
                },
            ],
            3,
        );
        let mut steps = Vec::new();
        let r = run_plan(&p, &dir, &mut |m| {
            if let Some(m) = m {
                steps.push(m.to_string());
            }
            true
        })
        .unwrap();
        // The din copies are scratch: gone once the bench is done with their trace.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".din"))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(left.is_empty(), "{left:?}");
        assert!(steps.iter().any(|s| s.contains("as din text")));
        assert!(steps.iter().any(|s| s.contains("parse alone")));
        // The plan's limit cuts the 20000-reference stream; the shorter one is whole.
        assert_eq!(r["traces"][0]["events"], 10_000);
        assert_eq!(r["traces"][1]["events"], 5_000);
        for t in ["seg", "seg-small"] {
            let parse = cell(&r, "parse", "parse alone (counting)", t);
            assert_eq!(parse["cpu_seconds"].as_array().unwrap().len(), 3);
            for conf in ["dtlb 64", "tlb + dcache", "l1", "l1 from din", "stack"] {
                for mode in ["simulate", "parse+simulate"] {
                    let c = cell(&r, mode, conf, t);
                    let s = &c["events_per_s"];
                    let (lo, mid, hi) = (
                        s["min"].as_f64().unwrap(),
                        s["median"].as_f64().unwrap(),
                        s["max"].as_f64().unwrap(),
                    );
                    assert!(lo <= mid && mid <= hi, "{c}");
                    assert_eq!(c["events_per_s_runs"].as_array().unwrap().len(), 3);
                }
            }
        }
        // The cache machine ran on its 3000-event prefix only.
        assert_eq!(cell(&r, "simulate", "tlb + dcache", "seg")["events"], 3000);
        // The din row read a din text copy of its 4000-event prefix (the stream has no
        // control event: each reference is one din line) in both modes; the trace's other
        // rows read the trace itself.
        for mode in ["simulate", "parse+simulate"] {
            let c = cell(&r, mode, "l1 from din", "seg");
            assert_eq!(
                (c["events"].as_u64(), c["references"].as_u64()),
                (Some(4000), Some(4000))
            );
            assert_eq!(c["input"], "din");
            assert!(c["file_bytes"].as_u64().unwrap() > 4000 * 4, "{c}");
            let fs = &c["first_structure"];
            assert_eq!(fs["name"], "l1");
            assert!(fs["accesses"].as_u64().unwrap() >= 4000, "{c}");
            assert!(fs["misses"].as_u64().unwrap() > 0, "{c}");
            assert!(cell(&r, mode, "l1", "seg").get("input").is_none());
        }
        assert_eq!(r["configurations"][3]["input"], "din");
        assert_eq!(
            r["configurations"][2]["cache"][0],
            "l1:size=4k,line=64,ways=4,policy=lru,serves=unified"
        );

        assert_eq!(
            cell(&r, "parse+simulate", "dtlb 64", "seg")["events"],
            10_000
        );
    }

    /// The prefix parsed and simulated from the file is the one simulated from memory: the
    /// same result (the bench checks every run against the first, across both modes).
    #[test]
    fn a_prefix_from_the_file_gives_the_memory_prefix_result() {
        let dir = std::env::temp_dir().join(format!("lookaside-bench-p{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = BenchTrace {
            label: "seg".into(),
            path: "workload:segments,refs=9000".into(),
        };
        let mut say = |_: Option<&str>| true;
        let mut w = Watch {
            say: &mut say,
            last: Instant::now(),
        };
        let file = materialise(&t, &dir, 0, u64::MAX, &mut w).unwrap();
        let (events, format) = load(&file, 7000, &mut w).unwrap();
        let c = BenchConfig {
            label: "dtlb".into(),
            engine: EngineKind::Machine,
            toml: None,
            tlb: vec!["dtlb:entries=16,ways=full,policy=lru".into()],
            cache: vec![],
            set: vec![],
            max_refs: None,
            input: InputKind::Trace,
        };
        let mut a = Built::new(&c).unwrap();
        let mut b = Built::new(&c).unwrap();
        simulate_alone(&mut a, &events, &mut w).unwrap();
        assert_eq!(
            parse_and_simulate(&mut b, &file, format, 7000, &mut w).unwrap(),
            7000
        );
        assert_eq!(a.outcome(), b.outcome());
        assert_eq!(a.outcome()["trace"]["references"], 7000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stop_from_the_caller_ends_the_bench() {
        let dir = std::env::temp_dir().join(format!("lookaside-bench-s{}", std::process::id()));
        let p = plan(
            vec![BenchTrace {
                label: "seg".into(),
                path: "workload:segments,refs=2000".into(),
            }],
            1,
        );
        let e = run_plan(&p, &dir, &mut |_| false).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.to_string().contains("interrupted"), "{e}");
    }

    #[test]
    fn standard_input_is_refused_with_its_reason() {
        let dir = std::env::temp_dir().join(format!("lookaside-bench-i{}", std::process::id()));
        let mut p = plan(vec![], 1);
        p.traces.push(BenchTrace {
            label: "stdin".into(),
            path: "-".into(),
        });
        let e = run_plan(&p, &dir, &mut |_| true).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.to_string().contains("not a pipe"), "{e}");
    }

    #[test]
    fn spread_is_min_median_max() {
        assert_eq!(
            spread(&[3.0, 1.0, 2.0, 5.0, 4.0]),
            json!({"min": 1.0, "median": 3.0, "max": 5.0})
        );
        assert_eq!(
            spread(&[4.0, 1.0]),
            json!({"min": 1.0, "median": 2.5, "max": 4.0})
        );
    }

    #[test]
    fn the_thread_clock_moves_with_work() {
        let t0 = thread_cpu_seconds();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_seconds() > t0);
    }
}
