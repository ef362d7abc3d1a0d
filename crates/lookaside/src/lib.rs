//! Lookaside: a fast, trace-driven simulator of address translation and memory hierarchies.
//!
//! Data flows one way: a [`trace`] source produces [`event::Event`] batches, a
//! [`machine::Machine`] built from a [`config`] consumes them, its [`ledger`] counts what
//! happened, and [`report`] turns the counts into JSON and tables.

pub mod error;
pub mod event;
pub mod tlb;
pub mod trace;

pub use error::{Error, Result};
pub use event::{Event, Kind, Mode};
