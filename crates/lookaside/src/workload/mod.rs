//! Synthetic sources: event streams made by a model instead of read from a file. They
//! implement the same [`TraceSource`](crate::trace::TraceSource) as the readers, so everything downstream is shared.
//! The software-managed-TLB study's OS-structure models: [`OsWorkload`] (one application
//! under a monolithic, mapped, microkernel or decomposed OS) and [`Multiserver`] (the
//! token-passing ring).

mod multiserver;
mod osstructure;
mod synthetic;

pub use multiserver::{Multiserver, MultiserverParams};
pub use osstructure::{OsStructure, OsWorkload, OsWorkloadParams};
pub use synthetic::Synthetic;
