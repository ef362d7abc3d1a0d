//! The driver: pull batches from a source and push them through a machine, reporting
//! progress now and then. Reading and simulating are separate calls so that each can be
//! timed on its own (`lookaside bench`).

use crate::error::Result;
use crate::event::{Event, BATCH};
use crate::machine::Machine;
use crate::trace::TraceSource;

/// How often (in batches) the progress callback is called.
const PROGRESS_EVERY: u64 = 256;

/// Progress of a run: events simulated and bytes of the trace file consumed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub events: u64,
    pub bytes: u64,
}

/// Simulate every event of `source` on `machine`. `progress` is called every few hundred
/// batches; returning `false` from it stops the run early with an error.
pub fn run(
    source: &mut dyn TraceSource,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Progress> {
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut p = Progress::default();
    let mut n = 0u64;
    while source.next_batch(&mut batch)? {
        machine.run_batch(&batch);
        p.events += batch.len() as u64;
        n += 1;
        if n % PROGRESS_EVERY == 0 {
            p.bytes = source.bytes_read();
            if !progress(p) {
                return Err(crate::Error::Usage("interrupted".into()));
            }
        }
    }
    p.bytes = source.bytes_read();
    progress(p);
    Ok(p)
}

/// Read every event of `source` without simulating (parsing speed alone).
pub fn drain(source: &mut dyn TraceSource) -> Result<u64> {
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    while source.next_batch(&mut batch)? {
        n += batch.len() as u64;
    }
    Ok(n)
}

/// Simulate the trace file at `path` (format detected unless given) on `machine` and return
/// the result as JSON (schema in [`crate::report`]).
pub fn simulate_path(
    path: &std::path::Path,
    format: Option<crate::trace::Format>,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<serde_json::Value> {
    let mut source = crate::trace::open(path, format)?;
    let format = match format {
        Some(f) => f,
        None => crate::trace::Format::of_path(path)?,
    };
    run(source.as_mut(), machine, progress)?;
    let info = crate::report::TraceInfo { path: path.display().to_string(), format: format.name().into() };
    Ok(crate::report::result_json(machine, &info))
}
