//! Reading speed of every format, measured on a real trace (the lackey trace of
//! `tests/data/sortprog.c`, repeated at shifted addresses to ~10 M events).
//!
//! Ignored by default; run it optimised and read the rates it prints:
//!
//! ```text
//! cargo test --release -p lookaside --lib trace::bench -- --ignored --nocapture --test-threads=1
//! ```
//!
//! No assertions on time: machines differ. Files are read from the page cache (each is read
//! once before timing), so the numbers are parsing/decoding rates, not disk rates.

use std::path::Path;
use std::time::Instant;

use super::tests::{scratch, VecSource};
use super::*;

/// Events of the benchmark trace.
const TARGET_EVENTS: usize = 10_000_000;

/// CPU time of this thread in seconds (from the scheduler, in ns), so that another process
/// sharing the cores does not inflate the numbers; wall time where that is unavailable.
fn cpu_seconds(start: Instant) -> f64 {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|t| t.parse::<u64>().ok())
        });
    match ns {
        Some(ns) => ns as f64 / 1e9,
        None => start.elapsed().as_secs_f64(),
    }
}

/// Reads `path` to the end once (to warm the page cache), then `rounds` times; returns the
/// events and the mean CPU seconds per read. (The scheduler's CPU time has a granularity of a
/// few milliseconds, hence whole runs of many reads.)
fn time_read(path: &Path, format: Format, rounds: usize) -> (u64, f64) {
    let origin = Instant::now();
    let mut n = 0;
    let mut t0 = 0.0;
    for round in 0..=rounds {
        if round == 1 {
            t0 = cpu_seconds(origin);
        }
        let mut src = open(path, Some(format)).unwrap();
        let mut batch = Vec::new();
        let mut count = 0u64;
        let mut sink = 0u64;
        while src.next_batch(&mut batch).unwrap() {
            count += batch.len() as u64;
            // Touch every event, as a simulator would.
            sink = batch
                .iter()
                .fold(sink, |s, e| s ^ e.addr.wrapping_add(e.size as u64));
        }
        std::hint::black_box(sink);
        n = count;
    }
    (n, (cpu_seconds(origin) - t0) / rounds as f64)
}

#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn read_rates() {
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sortprog.lackey.zst");
    let base = tests::read_all(&real, None).unwrap();
    let mut events = Vec::with_capacity(TARGET_EVENTS + base.len());
    let mut shift = 0u64;
    while events.len() < TARGET_EVENTS {
        events.extend(base.iter().map(|e| Event {
            addr: e.addr.wrapping_add(shift),
            ..*e
        }));
        shift += 0x10_0000;
    }
    let dir = scratch("bench");
    let din_events: Vec<Event> = events
        .iter()
        .map(|e| Event::reference(e.kind, e.addr, 4))
        .collect();
    println!();
    for (name, format, evs) in [
        ("t.lackey", Format::Lackey, &events),
        ("t.din", Format::Din, &din_events),
        ("t.xdin", Format::XDin, &events),
        ("t.lks", Format::Native, &events),
        ("t.lackey.zst", Format::Lackey, &events),
    ] {
        let p = dir.join(name);
        let mut source = VecSource::new(evs.clone(), 4096);
        let origin = Instant::now();
        let t0 = cpu_seconds(origin);
        let sink = create(&p, Some(format), &Metadata::default()).unwrap();
        copy(&mut source, sink).unwrap();
        let write = cpu_seconds(origin) - t0;
        let bytes = std::fs::metadata(&p).unwrap().len();
        let (n, secs) = time_read(&p, format, 3);
        // For lackey, a line is an event except for `M` lines (two events each).
        println!(
            "{name:>14}: {n} events, {:.1} MB; read {:.2} s, {:.1} M events/s, {:.0} MB/s of \
             file; write {:.1} M events/s",
            bytes as f64 / 1e6,
            secs,
            n as f64 / secs / 1e6,
            bytes as f64 / secs / 1e6,
            n as f64 / write / 1e6,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Native decoding of the demo trace (a real program, not repeated), read 40 times over.
#[test]
#[ignore = "benchmark: run with --release -- --ignored --nocapture"]
fn native_demo_rate() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/lookaside/data/demo.lks");
    let (n, secs) = time_read(&demo, Format::Native, 40);
    println!(
        "\n      demo.lks: {n} events, {secs:.3} s, {:.1} M events/s",
        n as f64 / secs / 1e6
    );
}

/// A maintenance tool rather than a test (until the command line exists): converts the trace
/// `LOOKASIDE_SRC` into `LOOKASIDE_DST`, with metadata from the JSON in `LOOKASIDE_META` and
/// zstd level `LOOKASIDE_LEVEL` (default 3). This is how the demo trace was made.
#[test]
#[ignore = "tool: converts LOOKASIDE_SRC into LOOKASIDE_DST"]
fn convert_from_env() {
    let (Ok(src), Ok(dst)) = (
        std::env::var("LOOKASIDE_SRC"),
        std::env::var("LOOKASIDE_DST"),
    ) else {
        println!("set LOOKASIDE_SRC and LOOKASIDE_DST");
        return;
    };
    let mut meta: Metadata = match std::env::var("LOOKASIDE_META") {
        Ok(json) => serde_json::from_str(&json).unwrap(),
        Err(_) => Metadata::default(),
    };
    let level = std::env::var("LOOKASIDE_LEVEL").map_or(DEFAULT_LEVEL, |l| l.parse().unwrap());
    let (src, dst) = (Path::new(&src), Path::new(&dst));
    let mut source = open(src, None).unwrap();
    if meta.source_format.is_none() {
        let first = compress::Input::open(src)
            .unwrap()
            .peek(format::SNIFF_BYTES)
            .unwrap()
            .to_vec();
        meta.source_format = Some(detect(src, &first).unwrap().name().to_string());
    }
    let sink = create_with(dst, None, &meta, &WriteOptions { level }).unwrap();
    let n = copy(source.as_mut(), sink).unwrap();
    println!("{n} events written to {}", dst.display());
    println!(
        "{:#?}",
        summarize(open(dst, None).unwrap().as_mut()).unwrap()
    );
}
