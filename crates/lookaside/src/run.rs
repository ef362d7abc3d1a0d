//! The driver: pull batches from a source and push them through a machine, reporting
//! progress now and then. Reading and simulating are separate calls so that each can be
//! timed on its own (`lookaside bench`).

use std::path::Path;

use crate::error::Result;
use crate::event::{Event, BATCH};
use crate::machine::Machine;
use crate::report::TraceInfo;
use crate::trace::{Format, TraceSource};

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
        if n.is_multiple_of(PROGRESS_EVERY) {
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

/// The format of the trace at `path`: `format` when given, else detected from its content.
pub fn format_of(path: &Path, format: Option<Format>) -> Result<Format> {
    match format {
        Some(f) => Ok(f),
        None => {
            let mut input = crate::trace::compress::Input::open(path)?;
            crate::trace::detect(path, input.peek(crate::trace::format::SNIFF_BYTES)?)
        }
    }
}

/// Simulate the trace file at `path` (format detected unless given) on `machine` and return
/// the result as JSON (schema in [`crate::report`]).
pub fn simulate_path(
    path: &Path,
    format: Option<Format>,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<serde_json::Value> {
    let format = format_of(path, format)?;
    let mut source = crate::trace::open(path, Some(format))?;
    run(source.as_mut(), machine, progress)?;
    let info = TraceInfo {
        path: path.display().to_string(),
        format: format.name().into(),
    };
    Ok(crate::report::result_json(machine, &info))
}

/// What `lookaside info` shows: the trace's summary, format and metadata, as JSON.
pub fn info_json(path: &Path, format: Option<Format>) -> Result<serde_json::Value> {
    let format = format_of(path, format)?;
    let mut source = crate::trace::open(path, Some(format))?;
    let summary = crate::trace::summarize(source.as_mut())?;
    let mut v = serde_json::json!({ "path": path.display().to_string(), "format": format.name() });
    if let (Some(o), Ok(serde_json::Value::Object(s))) =
        (v.as_object_mut(), serde_json::to_value(&summary))
    {
        o.extend(s);
        if let Some(m) = source.metadata() {
            o.insert(
                "metadata".into(),
                serde_json::to_value(m).unwrap_or_default(),
            );
        }
    }
    Ok(v)
}
