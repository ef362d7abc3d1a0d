//! Simulation speed alone, for profiling: `cargo run --release --example simrate -- TRACE
//! [REPEAT] [--tlb SPEC]… [--stream]` loads the trace into memory and runs it REPEAT times;
//! with `--stream` it reads and simulates the file REPEAT times on one thread instead
//! (a native trace decoded straight into the machine unless `--batched`). `--config FILE`
//! simulates a whole machine described in TOML instead of `--tlb` structures.

use std::time::Instant;

use lookaside::machine::Machine;
use lookaside::trace;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args
        .first()
        .ok_or("usage: simrate TRACE [REPEAT] [--tlb SPEC]…")?;
    let repeat: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let mut flags: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--tlb")
        .map(|w| w[1].clone())
        .collect();
    if flags.is_empty() {
        flags.push("dtlb:entries=64,ways=full,policy=lru,serves=data".into());
    }
    if args.iter().any(|a| a == "--stream") {
        let mut m = Machine::assemble(None, "simrate", &flags, &[])?;
        let t = Instant::now();
        let mut events = 0;
        let batched = args.iter().any(|a| a == "--batched");
        for _ in 0..repeat {
            let done = &mut |_| true;
            let (input, format) = trace::open_input(path.as_ref(), None)?;
            events += if format == trace::Format::Native && !batched {
                let mut src = trace::native::NativeReader::new(input)?;
                lookaside::run::run_native(&mut src, &mut m, done)?.events
            } else {
                let mut src = trace::reader(input, format)?;
                lookaside::run::run(src.as_mut(), &mut m, done)?.events
            };
        }
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{:.1} M events/s read and simulated ({events} events)",
            events as f64 / secs / 1e6,
        );
        return Ok(());
    }
    let mut src = trace::open(path.as_ref(), None)?;
    let (mut all, mut batch) = (Vec::new(), Vec::new());
    while src.next_batch(&mut batch)? {
        all.extend_from_slice(&batch);
    }
    let config = args
        .windows(2)
        .find(|w| w[0] == "--config")
        .map(|w| std::fs::read_to_string(&w[1]))
        .transpose()?;
    let mut m = match &config {
        Some(text) => Machine::assemble(Some(text), "simrate", &[], &[])?,
        None => Machine::assemble(None, "simrate", &flags, &[])?,
    };
    let t = Instant::now();
    for _ in 0..repeat {
        for chunk in all.chunks(4096) {
            m.run_batch(chunk);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let n = (all.len() * repeat) as f64;
    println!(
        "{:.1} M events/s ({} events × {repeat})",
        n / secs / 1e6,
        all.len()
    );
    Ok(())
}
