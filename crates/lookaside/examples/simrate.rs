//! Simulation speed alone, for profiling: `cargo run --release --example simrate -- TRACE
//! [REPEAT] [--tlb SPEC]… [--cache SPEC]… [--stream]` loads the trace into memory and runs it REPEAT times;
//! with `--stream` it reads and simulates the file REPEAT times on one thread instead
//! (a native trace decoded straight into the machine unless `--batched`). `--config FILE`
//! simulates a whole machine described in TOML instead of `--tlb` structures.
//!
//! The floors under a native trace's simulation: `--parse` decodes the file REPEAT times into
//! a sink that only counts the events (decoding alone, zstd and the CRC included); `--zstd`
//! only inflates its record stream (zstd's own speed, under every decoder); `--decode`
//! inflates it once into memory and decodes that REPEAT times (the decoder alone, no zstd
//! and no CRC). `--write OUT` rewrites TRACE (any format, or a `workload:` spec) as a
//! native trace at zstd level REPEAT and prints its bytes per event. Rates are per
//! second of this process's CPU time, so that other load on the machine does not count.

use std::io::Read;
use std::time::Instant;

use lookaside::event::{Event, EventSink};
use lookaside::machine::Machine;
use lookaside::trace;

/// A sink that only counts: what decoding costs with nothing behind it.
struct Count(u64);

impl EventSink for Count {
    #[inline(always)]
    fn event(&mut self, _: &Event) {
        self.0 += 1;
    }
}

/// CPU seconds this process has used (user and system), from the scheduler's count in ns.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    match stat
        .split_whitespace()
        .next()
        .and_then(|t| t.parse::<u64>().ok())
    {
        Some(ns) => ns as f64 / 1e9,
        None => f64::NAN,
    }
}

/// Inflates the record stream of native trace `path` (after its header) and returns its
/// decompressed bytes, keeping them in `keep` if given; nothing is decoded.
fn inflate(path: &str, mut keep: Option<&mut Vec<u8>>) -> Result<u64, Box<dyn std::error::Error>> {
    let mut file = std::io::BufReader::with_capacity(512 * 1024, std::fs::File::open(path)?);
    let mut pre = [0u8; 14];
    file.read_exact(&mut pre)?;
    let version = u16::from_le_bytes([pre[8], pre[9]]);
    let len = u32::from_le_bytes([pre[10], pre[11], pre[12], pre[13]]) as u64;
    let skip = len + if version >= 2 { 4 } else { 0 };
    std::io::copy(&mut (&mut file).take(skip), &mut std::io::sink())?;
    let mut dec = zstd::stream::read::Decoder::with_buffer(file)?;
    let mut buf = vec![0u8; 512 * 1024];
    let mut total = 0u64;
    loop {
        let n = dec.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        if let Some(keep) = keep.as_deref_mut() {
            keep.extend_from_slice(&buf[..n]);
        }
        total += n as u64;
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().ok_or(
        "usage: simrate TRACE [REPEAT] [--tlb SPEC]… [--cache SPEC]… [--stream | --parse | --decode | --zstd | --write OUT]",
    )?;
    let repeat: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let mut flags: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--tlb")
        .map(|w| w[1].clone())
        .collect();
    let caches: Vec<String> = args
        .windows(2)
        .filter(|w| w[0] == "--cache")
        .map(|w| w[1].clone())
        .collect();
    if flags.is_empty() && caches.is_empty() {
        flags.push("dtlb:entries=64,ways=full,policy=lru,serves=data".into());
    }
    if args.iter().any(|a| a == "--zstd") {
        let t = cpu_seconds();
        let mut bytes = 0;
        for _ in 0..repeat {
            bytes += inflate(path, None)?;
        }
        let secs = cpu_seconds() - t;
        println!(
            "{:.1} MB/s of records inflated ({bytes} bytes, {secs:.3} s CPU)",
            bytes as f64 / secs / 1e6
        );
        return Ok(());
    }
    if let Some(out) = args.windows(2).find(|w| w[0] == "--write").map(|w| &w[1]) {
        // Rewrite TRACE (a file in any format, or a `workload:` spec) as a native trace at
        // zstd level REPEAT: this build's encoder, for comparing encodings.
        let mut src = match lookaside::workload::from_spec(path)? {
            Some(src) => src,
            None => trace::open(path.as_ref(), None)?,
        };
        let meta = src.metadata().cloned().unwrap_or_default();
        let options = trace::WriteOptions {
            level: repeat as i32,
        };
        let sink = trace::create_with(out.as_ref(), Some(trace::Format::Native), &meta, &options)?;
        let n = trace::copy(src.as_mut(), sink)?;
        let bytes = inflate(out, None)?;
        println!(
            "{n} events written to {out}: {bytes} record bytes, {:.3} bytes/event, {} bytes on disk",
            bytes as f64 / n as f64,
            std::fs::metadata(out)?.len()
        );
        return Ok(());
    }
    if args.iter().any(|a| a == "--decode") {
        // Decoding alone: the records inflated once into memory, then decoded REPEAT times
        // (no zstd, no CRC, no refills).
        let mut records = Vec::new();
        inflate(path, Some(&mut records))?;
        records.resize(records.len() + trace::native::RECORD_WINDOW, 0);
        let t = cpu_seconds();
        let mut count = Count(0);
        for _ in 0..repeat {
            let (n, want) = trace::native::decode_records(&records, &mut count)?;
            if n != want {
                return Err(format!("decoded {n} events, the trailer counts {want}").into());
            }
        }
        let secs = cpu_seconds() - t;
        println!(
            "{:.1} M events/s decoded from memory ({} events, {:.3} bytes/event, {secs:.3} s CPU)",
            count.0 as f64 / secs / 1e6,
            count.0,
            (records.len() - trace::native::RECORD_WINDOW) as f64 * repeat as f64 / count.0 as f64
        );
        return Ok(());
    }
    if args.iter().any(|a| a == "--parse") {
        let t = cpu_seconds();
        let mut count = Count(0);
        for _ in 0..repeat {
            let (input, _) = trace::open_input(path.as_ref(), None)?;
            let mut src = trace::native::NativeReader::new(input)?;
            while src.decode_with(lookaside::event::BATCH, &mut count)? > 0 {}
        }
        let secs = cpu_seconds() - t;
        println!(
            "{:.1} M events/s decoded ({} events, {secs:.3} s CPU)",
            count.0 as f64 / secs / 1e6,
            count.0
        );
        return Ok(());
    }
    let config = args
        .windows(2)
        .find(|w| w[0] == "--config")
        .map(|w| std::fs::read_to_string(&w[1]))
        .transpose()?;
    if args.iter().any(|a| a == "--stream") {
        let mut m = match &config {
            Some(text) => Machine::assemble(Some(text), "simrate", &[], &[])?,
            None => Machine::assemble_all(None, "simrate", &flags, &caches, &[])?,
        };
        let t = Instant::now();
        let cpu = cpu_seconds();
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
        let cpu = cpu_seconds() - cpu;
        println!(
            "{:.1} M events/s read and simulated ({events} events; {:.1} M/s of CPU time)",
            events as f64 / secs / 1e6,
            events as f64 / cpu / 1e6,
        );
        return Ok(());
    }
    let mut src = trace::open(path.as_ref(), None)?;
    let (mut all, mut batch) = (Vec::new(), Vec::new());
    while src.next_batch(&mut batch)? {
        all.extend_from_slice(&batch);
    }
    let mut m = match &config {
        Some(text) => Machine::assemble(Some(text), "simrate", &[], &[])?,
        None => Machine::assemble_all(None, "simrate", &flags, &caches, &[])?,
    };
    let t = Instant::now();
    let cpu = cpu_seconds();
    for _ in 0..repeat {
        for chunk in all.chunks(4096) {
            m.run_batch(chunk);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu;
    let n = (all.len() * repeat) as f64;
    println!(
        "{:.1} M events/s ({} events × {repeat}; {:.1} M/s of CPU time)",
        n / secs / 1e6,
        all.len(),
        n / cpu / 1e6
    );
    Ok(())
}
