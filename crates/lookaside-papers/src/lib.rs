//! The papers' own tables, recomputed on the Lookaside engine: what a `lookaside reproduce`
//! recipe compares with the published numbers. The engine (the `lookaside` crate) holds the
//! mechanisms — TLBs, refill and its trap costs, the virtually addressed cache and its VM
//! primitives — and no paper's tables; this crate holds one module per paper, each with its
//! transcriptions of the published numbers and the experiments that re-run them, through the
//! engine's public API only.
//!
//! * [`uhlig94`] — Uhlig et al. (TOCS 1994): Tables VI and VII, exactly, from Tables V and III
//!   priced by the engine's trap cost tables ([`lookaside::mmu::CostTable`]).
//! * [`inouye92`] — Inouye et al. (1992): Tables 1–3 and Mach's copy-on-write cases re-run on
//!   the virtually addressed cache ([`lookaside::cache::vac`]).

pub mod inouye92;
pub mod uhlig94;
