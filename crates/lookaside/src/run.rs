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

/// Simulate every event of `source` on `machine`, reading and simulating on this thread.
/// `progress` is called every few hundred batches; returning `false` from it stops the run
/// early with an error.
pub fn run(
    source: &mut dyn TraceSource,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Progress> {
    let mut batch: Vec<Event> = Vec::with_capacity(BATCH);
    let mut p = Progress::default();
    while source.next_batch(&mut batch)? {
        machine.run_batch(&batch);
        p.events += batch.len() as u64;
        p.bytes = source.bytes_read();
        tick(&mut p, batch.len(), progress)?;
    }
    p.bytes = source.bytes_read();
    progress(p);
    Ok(p)
}

/// Batches in flight between the reader thread and the simulating one.
const IN_FLIGHT: usize = 4;

/// [`run`] with the reading (decompression, parsing) on a second thread, overlapped with the
/// simulation. Batches keep their order, so results are identical to [`run`]'s; memory stays
/// bounded by a few batches, which are recycled rather than reallocated.
pub fn run_pipelined(
    mut source: Box<dyn TraceSource + Send>,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Progress> {
    use std::sync::mpsc::sync_channel;
    std::thread::scope(|scope| {
        // The channels live inside the scope: when the simulating side returns (done, failed
        // or interrupted) its ends are dropped before the scope joins the reader, so a reader
        // blocked on either channel wakes up and ends instead of deadlocking.
        let (full_tx, full_rx) = sync_channel::<Result<(Vec<Event>, u64)>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<Vec<Event>>(IN_FLIGHT + 2);
        scope.spawn(move || {
            // Ends when the trace does, on an error, or when the simulating side hangs up.
            while let Ok(mut batch) = empty_rx.recv() {
                let item = match source.next_batch(&mut batch) {
                    Ok(true) => Ok((batch, source.bytes_read())),
                    Ok(false) => return,
                    Err(e) => Err(e),
                };
                let failed = item.is_err();
                if full_tx.send(item).is_err() || failed {
                    return;
                }
            }
        });
        for _ in 0..IN_FLIGHT + 2 {
            let _ = empty_tx.send(Vec::with_capacity(BATCH));
        }
        let mut p = Progress::default();
        for item in full_rx.iter() {
            let (batch, bytes) = item?;
            machine.run_batch(&batch);
            p.events += batch.len() as u64;
            p.bytes = bytes;
            tick(&mut p, batch.len(), progress)?;
            let _ = empty_tx.send(batch);
        }
        progress(p);
        Ok(p)
    })
}

/// Call `progress` about every [`PROGRESS_EVERY`] batches' worth of events.
#[inline]
fn tick(p: &mut Progress, len: usize, progress: &mut dyn FnMut(Progress) -> bool) -> Result<()> {
    let every = PROGRESS_EVERY * BATCH as u64;
    if (p.events - len as u64) / every != p.events / every && !progress(*p) {
        return Err(crate::Error::Usage("interrupted".into()));
    }
    Ok(())
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

/// Open the trace at `path`, settling its format (given, or detected) once.
fn open_detected(
    path: &Path,
    format: Option<Format>,
) -> Result<(Box<dyn TraceSource + Send>, Format)> {
    let format = format_of(path, format)?;
    Ok((crate::trace::open(path, Some(format))?, format))
}

/// Simulate the trace file at `path` (format detected unless given) on `machine` and return
/// the result as JSON (schema in [`crate::report`]). Reading overlaps simulation on a second
/// thread when the machine has more than one core; results do not depend on it.
pub fn simulate_path(
    path: &Path,
    format: Option<Format>,
    machine: &mut Machine,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<serde_json::Value> {
    let (source, format) = open_detected(path, format)?;
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        run_pipelined(source, machine, progress)?;
    } else {
        let mut source = source;
        run(source.as_mut(), machine, progress)?;
    }
    let info = TraceInfo {
        path: path.display().to_string(),
        format: format.name().into(),
    };
    Ok(crate::report::result_json(machine, &info))
}

/// What `lookaside info` shows: the trace's summary, format and metadata, as JSON.
pub fn info_json(path: &Path, format: Option<Format>) -> Result<serde_json::Value> {
    let (mut source, format) = open_detected(path, format)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::workload::Synthetic;

    fn machine() -> Machine {
        let flags = [
            "i:entries=16,ways=4,next=l2".to_string(),
            "d:entries=8,ways=full,next=l2".into(),
            "l2:entries=64,ways=8,policy=random".into(),
        ];
        Machine::assemble(None, "t", &flags, &[]).unwrap()
    }

    #[test]
    fn pipelined_run_gives_the_same_result() {
        let mut a = machine();
        let pa = run(
            &mut Synthetic::new(300_000, 7, 64, 4096),
            &mut a,
            &mut |_| true,
        )
        .unwrap();
        let mut b = machine();
        let mut calls = 0;
        let pb = run_pipelined(
            Box::new(Synthetic::new(300_000, 7, 64, 4096)),
            &mut b,
            &mut |_| {
                calls += 1;
                true
            },
        )
        .unwrap();
        assert_eq!(pa.events, pb.events);
        assert!(calls >= 1);
        let info = TraceInfo::default();
        assert_eq!(
            crate::report::result_json(&a, &info),
            crate::report::result_json(&b, &info)
        );
    }

    /// A source that fails after some batches, as a corrupt file does.
    struct FailsAfter(Synthetic, usize);

    impl TraceSource for FailsAfter {
        fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
            if self.1 == 0 {
                return Err(Error::trace(
                    "t.lks",
                    crate::error::Location::Byte(99),
                    "stream",
                    "corrupt",
                ));
            }
            self.1 -= 1;
            self.0.next_batch(out)
        }
    }

    #[test]
    fn errors_and_interrupts_stop_both_drivers() {
        let e = run_pipelined(
            Box::new(FailsAfter(Synthetic::new(1 << 30, 1, 64, 64), 700)),
            &mut machine(),
            &mut |_| true,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "t.lks: byte offset 99: stream: corrupt");
        let e = run(
            &mut FailsAfter(Synthetic::new(1 << 30, 1, 64, 64), 3),
            &mut machine(),
            &mut |_| true,
        )
        .unwrap_err();
        assert!(e.to_string().contains("corrupt"));
        let e = run_pipelined(
            Box::new(Synthetic::new(1 << 30, 1, 64, 64)),
            &mut machine(),
            &mut |_| false,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "interrupted");
    }
}
