//! Speed of the one-pass engines: `cargo run --release --example onepass -- [TRACE]
//! [--repeat N] [--synthetic N] [--heap-kib K] [--only stack|assoc|both]` (`ONEPASS_MAX=N`: the
//! stack-distance engine tracks sizes up to N, by default 16384).
//!
//! Measures, on events already in memory, the stack-distance engine (every fully associative
//! LRU size up to 16384), the all-associativity engine (1…1024 sets × 1…16 ways, 176
//! configurations) and both in one pass, over the synthetic stream of `lookaside bench`
//! (seed 1, 256 KiB of code, 64 MiB of heap — a random working set of 16 Ki pages, so about
//! a quarter of the references are far down the stack; `--heap-kib` changes it) and over TRACE if given (repeated N times, by
//! default often enough to reach 20 M events). Prints references per second.

use std::time::Instant;

use lookaside::event::{Event, BATCH};
use lookaside::onepass::{AllAssoc, Engine, Feeder, Options, StackDistance};
use lookaside::trace::{self, TraceSource};
use lookaside::workload::Synthetic;

fn load(src: &mut dyn TraceSource) -> Result<Vec<Event>, Box<dyn std::error::Error>> {
    let (mut all, mut batch) = (Vec::new(), Vec::with_capacity(BATCH));
    while src.next_batch(&mut batch)? {
        all.extend_from_slice(&batch);
    }
    Ok(all)
}

/// CPU seconds this thread has used (Linux; 0 elsewhere). The machine may be shared, so
/// rates are given per CPU second as well as per wall-clock second.
fn cpu_secs() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/thread-self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which ends with ')'): utime and stime are 12 and 13.
    let rest = s.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// Feed `events` `repeat` times to a fresh engine; returns (references per wall-clock
/// second, per CPU second, engine).
fn time<E: Engine>(mut engine: E, events: &[Event], repeat: usize) -> (f64, f64, E) {
    let mut feeder = Feeder::new(Options::default());
    let (t, c) = (Instant::now(), cpu_secs());
    for _ in 0..repeat {
        for chunk in events.chunks(BATCH) {
            feeder.feed(&mut engine, chunk);
        }
    }
    let (secs, cpu) = (t.elapsed().as_secs_f64(), cpu_secs() - c);
    let n = feeder.references as f64;
    (n / secs, if cpu > 0.0 { n / cpu } else { 0.0 }, engine)
}

fn measure(label: &str, events: &[Event], repeat: usize, only: Option<&str>) {
    let refs = events.iter().filter(|e| e.kind.is_ref()).count() * repeat;
    println!(
        "{label}: {} events × {repeat} ({:.1} M references)",
        events.len(),
        refs as f64 / 1e6
    );
    if only.is_some_and(|o| o != "stack") {
        return measure_assoc(events, repeat, only);
    }
    let max: usize = std::env::var("ONEPASS_MAX")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(16384);
    let (r, c, sd) = time(StackDistance::new(max), events, repeat);
    let s = sd.result();
    println!(
        "  stack distance, FA LRU 1..{max}: {:6.1} M refs/s ({:6.1} per CPU s)  misses at 64 entries: {}",
        r / 1e6,
        c / 1e6,
        s.misses(64).unwrap_or(0)
    );
    let front: u64 = s.histogram[..lookaside::onepass::FRONT].iter().sum();
    println!(
        "    ({:.1}% of accesses deeper than the {} most recent pages)",
        100.0 * (s.accesses - front) as f64 / s.accesses as f64,
        lookaside::onepass::FRONT
    );
    if only.is_none() {
        measure_assoc(events, repeat, only);
    }
}

fn measure_assoc(events: &[Event], repeat: usize, only: Option<&str>) {
    if only.is_some_and(|o| o != "assoc") {
        return measure_both(events, repeat);
    }
    let (r, c, aa) = time(AllAssoc::new(1024), events, repeat);
    let a = aa.result();
    println!(
        "  all-associativity, 176 configs:  {:6.1} M refs/s ({:6.1} per CPU s)  misses at 16 sets × 4 ways: {}",
        r / 1e6,
        c / 1e6,
        a.misses(16, 4).unwrap_or(0)
    );
    if only.is_none() {
        measure_both(events, repeat);
    }
}

fn measure_both(events: &[Event], repeat: usize) {
    let (r, c, _) = time(
        (StackDistance::new(16384), AllAssoc::new(1024)),
        events,
        repeat,
    );
    println!(
        "  both in one pass:                {:6.1} M refs/s ({:6.1} per CPU s)",
        r / 1e6,
        c / 1e6
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.windows(2)
            .find(|w| w[0] == name)
            .and_then(|w| w[1].parse::<usize>().ok())
    };
    let synthetic = opt("--synthetic").unwrap_or(4_000_000);
    let heap_kib = opt("--heap-kib").unwrap_or(64 << 10);
    let events = load(&mut Synthetic::new(
        synthetic as u64,
        1,
        256,
        heap_kib as u64,
    ))?;
    let only = args
        .windows(2)
        .find(|w| w[0] == "--only")
        .map(|w| w[1].as_str());
    measure(
        &format!("synthetic (256 KiB code, {heap_kib} KiB heap)"),
        &events,
        5,
        only,
    );
    let path = args
        .iter()
        .enumerate()
        .find(|&(i, a)| !a.starts_with("--") && (i == 0 || !args[i - 1].starts_with("--")))
        .map(|(_, a)| a.clone());
    if let Some(path) = path {
        let events = load(trace::open(path.as_ref(), None)?.as_mut())?;
        let repeat = opt("--repeat").unwrap_or((20_000_000 / events.len().max(1)).max(1));
        measure(&path, &events, repeat, only);
    }
    Ok(())
}
