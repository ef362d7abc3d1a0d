//! Speed of the one-pass engines: `cargo run --release --example onepass -- [TRACE]
//! [--repeat N] [--synthetic N]`.
//!
//! Measures, on events already in memory, the stack-distance engine (every fully associative
//! LRU size up to 16384), the all-associativity engine (1…1024 sets × 1…16 ways, 176
//! configurations) and both in one pass, over the synthetic stream of `lookaside bench`
//! (seed 1, 256 KiB of code, 64 MiB of heap) and over TRACE if given (repeated N times, by
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

/// Feed `events` `repeat` times to a fresh engine; returns (references/s, engine).
fn time<E: Engine>(mut engine: E, events: &[Event], repeat: usize) -> (f64, E) {
    let mut feeder = Feeder::new(Options::default());
    let t = Instant::now();
    for _ in 0..repeat {
        for chunk in events.chunks(BATCH) {
            feeder.feed(&mut engine, chunk);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    (feeder.references as f64 / secs, engine)
}

fn measure(label: &str, events: &[Event], repeat: usize) {
    let refs = events.iter().filter(|e| e.kind.is_ref()).count() * repeat;
    println!(
        "{label}: {} events × {repeat} ({:.1} M references)",
        events.len(),
        refs as f64 / 1e6
    );
    let (r, sd) = time(StackDistance::new(16384), events, repeat);
    let s = sd.result();
    println!(
        "  stack distance, FA LRU 1..16384:        {:6.1} M refs/s   (misses at 64 entries: {})",
        r / 1e6,
        s.misses(64).unwrap_or(0)
    );
    let (r, aa) = time(AllAssoc::new(1024), events, repeat);
    let a = aa.result();
    println!(
        "  all-associativity, 176 configs:         {:6.1} M refs/s   (misses at 16 sets × 4 ways: {})",
        r / 1e6,
        a.misses(16, 4).unwrap_or(0)
    );
    let (r, _) = time(
        (StackDistance::new(16384), AllAssoc::new(1024)),
        events,
        repeat,
    );
    println!(
        "  both in one pass:                       {:6.1} M refs/s",
        r / 1e6
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
    let events = load(&mut Synthetic::new(synthetic as u64, 1, 256, 64 << 10))?;
    measure("synthetic", &events, 5);
    let path = args
        .iter()
        .enumerate()
        .find(|&(i, a)| !a.starts_with("--") && (i == 0 || !args[i - 1].starts_with("--")))
        .map(|(_, a)| a.clone());
    if let Some(path) = path {
        let events = load(trace::open(path.as_ref(), None)?.as_mut())?;
        let repeat = opt("--repeat").unwrap_or((20_000_000 / events.len().max(1)).max(1));
        measure(&path, &events, repeat);
    }
    Ok(())
}
