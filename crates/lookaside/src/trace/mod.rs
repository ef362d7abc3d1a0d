//! Trace input and output, kept apart from the engine (as DineroIV keeps `tracein.c` apart
//! from `ref.c`): every format is read into the same [`Event`] batches through one
//! [`TraceSource`] trait, chosen once when the file is opened, and written through one
//! [`TraceSink`] trait. Adding a format touches only this directory.

use crate::error::Result;
use crate::event::Event;

/// A stream of events, read in batches at constant memory.
pub trait TraceSource {
    /// Clear `out` and fill it with the next events (about [`crate::event::BATCH`] of them).
    /// Returns `Ok(false)`, with `out` empty, once the trace is exhausted.
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool>;

    /// Bytes of the underlying file consumed so far, for progress reports.
    fn bytes_read(&self) -> u64 {
        0
    }
}

/// Somewhere events can be written.
pub trait TraceSink {
    fn write_batch(&mut self, events: &[Event]) -> Result<()>;
    /// Flush and close; only after this does the output exist under its final name.
    fn finish(self: Box<Self>) -> Result<()>;
}
