//! Write a synthetic program-like stream (see `lookaside::workload::Synthetic`) of N events
//! as a native trace, for scale runs of the whole path:
//! `cargo run --release --example synthetic_trace -- OUT.lks N [SEED]`, then e.g.
//! `/usr/bin/time -v lookaside simulate OUT.lks` to see that peak memory does not depend on N.

use lookaside::trace::{self, Format, Metadata, TraceSource};
use lookaside::workload::Synthetic;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: synthetic_trace OUT.lks N [SEED]";
    let out = args.first().ok_or(usage)?;
    let n = args.get(1).ok_or(usage)?.parse::<f64>()? as u64;
    let seed = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let meta = Metadata {
        command: Some(format!("synthetic_trace {out} {n} {seed}")),
        ..Metadata::default()
    };
    let mut sink = trace::create(out.as_ref(), Some(Format::Native), &meta)?;
    let mut src = Synthetic::new(n, seed, 256, 64 << 10);
    let mut batch = Vec::new();
    let mut written = 0u64;
    while src.next_batch(&mut batch)? {
        sink.write_batch(&batch)?;
        written += batch.len() as u64;
        if written % (1 << 28) < batch.len() as u64 {
            eprintln!("{written} events");
        }
    }
    sink.finish()?;
    eprintln!("{out}: {written} events");
    Ok(())
}
