//! Synthetic sources: event streams made by a model instead of read from a file. They
//! implement the same [`TraceSource`] as the readers, so everything downstream is shared.
//! [`Multiserver`] is the token-passing OS-structure model of the software-managed-TLB study.

mod multiserver;
mod synthetic;

pub use multiserver::{Multiserver, MultiserverParams};
pub use synthetic::Synthetic;
