//! Synthetic sources: event streams made by a model instead of read from a file. They
//! implement the same [`TraceSource`] as the readers, so everything downstream is shared.
//! The OS-structure models of the software-managed-TLB study will live here too.

mod synthetic;

pub use synthetic::Synthetic;
