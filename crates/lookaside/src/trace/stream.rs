//! Moving a trace's events along: reading a source on a second thread ([`read_ahead`]),
//! watching a reading with a progress callback ([`Watched`]), draining it. Layered below
//! the driver ([`crate::run`]) and the capture, which both use it.

use crate::error::Result;
use crate::event::{Event, BATCH};

use super::TraceSource;

/// Batches in flight between a reading thread and the one consuming them.
const IN_FLIGHT: usize = 4;

/// Progress of a run or a reading: events simulated (or read) and bytes of the trace file
/// consumed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    pub events: u64,
    pub bytes: u64,
}

/// Read `source` on a second thread, handing each batch — with the bytes of the file
/// consumed when it was read — to `consume` on this one, in order. Batches are recycled, so
/// memory stays bounded by a few of them. Ends at the end of the source, on a read error, or
/// when `consume` fails (the reader then stops too).
pub fn read_ahead<S: TraceSource + Send + ?Sized>(
    source: &mut S,
    mut consume: impl FnMut(&[Event], u64) -> Result<()>,
) -> Result<()> {
    use std::sync::mpsc::sync_channel;
    std::thread::scope(|scope| {
        // The channels live inside the scope: when this side returns (done, failed or
        // interrupted) its ends are dropped before the scope joins the reader, so a reader
        // blocked on either channel wakes up and ends instead of deadlocking.
        let (full_tx, full_rx) = sync_channel::<Result<(Vec<Event>, u64)>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<Vec<Event>>(IN_FLIGHT + 2);
        let reader = &mut *source;
        scope.spawn(move || {
            // Ends when the trace does, on an error, or when the consuming side hangs up.
            while let Ok(mut batch) = empty_rx.recv() {
                let item = match reader.next_batch(&mut batch) {
                    Ok(true) => Ok((batch, reader.bytes_read())),
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
        for item in full_rx.iter() {
            let (batch, bytes) = item?;
            consume(&batch, bytes)?;
            let _ = empty_tx.send(batch);
        }
        Ok(())
    })
}

/// How often a [`Watched`] source calls its progress callback.
pub(crate) const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// A trace source that reports [`Progress`] about ten times a second and ends in an
/// "interrupted" error as soon as the callback returns `false`. The commands that only read
/// a trace (info, convert, access maps, one-pass answers) wrap their source in it, so that
/// each is watched and can be stopped without a check in its own loop. The cadence is by
/// time, not by events: those loops run from a few to hundreds of millions of events a
/// second (xz output against plain counting), and a stop must be prompt in all of them.
pub struct Watched<'a, S: TraceSource + ?Sized> {
    source: &'a mut S,
    progress: &'a mut dyn FnMut(Progress) -> bool,
    p: Progress,
    last: std::time::Instant,
}

impl<'a, S: TraceSource + ?Sized> Watched<'a, S> {
    pub fn new(source: &'a mut S, progress: &'a mut dyn FnMut(Progress) -> bool) -> Self {
        Watched {
            source,
            progress,
            p: Progress::default(),
            last: std::time::Instant::now(),
        }
    }
}

impl<S: TraceSource + ?Sized> TraceSource for Watched<'_, S> {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        let more = self.source.next_batch(out)?;
        self.p.events += out.len() as u64;
        let now = std::time::Instant::now();
        if !more || now.duration_since(self.last) >= WATCH_EVERY {
            self.last = now;
            self.p.bytes = self.source.bytes_read();
            if !(self.progress)(self.p) && more {
                return Err(crate::Error::Usage("interrupted".into()));
            }
        }
        Ok(more)
    }

    fn bytes_read(&self) -> u64 {
        self.source.bytes_read()
    }

    fn skipped(&self) -> u64 {
        self.source.skipped()
    }

    fn metadata(&self) -> Option<&super::Metadata> {
        self.source.metadata()
    }
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
