//! Lookaside: a fast, trace-driven simulator of address translation and memory hierarchies.
//!
//! Data flows one way: a [`trace`] reader or a [`workload`] model produces
//! [`event::Event`] batches, a [`machine::Machine`] built from a [`config`] consumes them
//! (its structures live in [`tlb`]), its [`ledger`] counts what happened (with [`threec`], why it missed), and [`report`]
//! turns the counts into JSON and tables. [`run`] drives the loop. The [`onepass`] engines
//! consume the same batches and answer a whole sweep of LRU structures in one pass.

pub mod bench;
pub mod cache;
pub mod config;
pub mod error;
pub mod event;
pub mod ledger;
pub mod machine;
pub mod mmu;
pub mod onepass;
pub mod pagetable;
pub mod report;
pub mod run;
pub mod threec;
pub mod tlb;
pub mod trace;
pub mod vm;
pub mod workload;

pub use error::{Error, Result};
pub use event::{Event, Kind, Mode};
