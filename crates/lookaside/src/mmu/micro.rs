//! A micro-TLB in front of the software-refilled TLB: a few entries that instruction fetches
//! look in first — the model of Chen's Chapter 7 (a micro-TLB for instruction fetches refilled
//! from the TLB behind it, 3 cycles a refill) and of the R4000's and MIPS32 4Kc's instruction
//! micro-TLBs.
//!
//! A fetch it misses goes to the TLB, and whatever entry the TLB then holds for the page —
//! found there, or written by the miss handlers — is copied in. A miss the TLB serves without
//! a trap is a *refill*, priced at `refill.cycles.micro` cycles (Chen's 3); a miss that traps
//! costs the trap. The micro-TLB holds only copies of the TLB's entries: whenever the TLB
//! loses or rewrites an entry (replacement, a shootdown, a flush, the dirty bit set in place)
//! the copy goes too, so it never translates a page the TLB no longer would. Untagged
//! (`asid = false`: Chen's pessimistic model) it also loses its user entries at every switch
//! of address space.
//!
//! Fetches only: the miss handlers' PTE loads go to the TLB directly, which a micro-TLB for
//! data would see first; the handlers' own code is in unmapped kseg0 and needs no entry.

#[cfg(doc)]
use crate::tlb::NO_CTX;
use crate::tlb::{Part, Tlb, TlbParams};

/// The shape of a micro-TLB (see the module documentation).
#[derive(Clone, Debug)]
pub struct MicroParams {
    pub tlb: TlbParams,
    /// Entries tagged by address space (else its user entries go at every switch).
    pub tagged: bool,
    /// Its structure in the ledger (the refilled TLB's is [`super::RefillParams::index`]).
    pub index: usize,
}

/// A micro-TLB (see the module documentation).
#[derive(Debug)]
pub(super) struct Micro {
    tlb: Tlb,
    tagged: bool,
    /// Its structure in the ledger.
    pub index: usize,
    /// Misses the TLB behind served without a trap.
    pub refills: u64,
}

impl Micro {
    pub fn new(p: &MicroParams) -> Result<Micro, String> {
        if p.tlb.partition.is_some() {
            return Err("micro.partition: a micro-TLB has no partition".into());
        }
        Ok(Micro {
            tlb: Tlb::new(&p.tlb).map_err(|e| format!("micro.{e}"))?,
            tagged: p.tagged,
            index: p.index,
            refills: 0,
        })
    }

    /// Does it hold page `vpn` with context `ctx` or `gctx`?
    #[inline(always)]
    pub fn lookup(&mut self, vpn: u64, ctx: u64, gctx: u64) -> bool {
        self.tlb.lookup(vpn, ctx, gctx)
    }

    /// Copy in the TLB's entry `(vpn, ctx)` after a miss.
    pub fn copy(&mut self, vpn: u64, ctx: u64) {
        self.tlb.fill(vpn, ctx, Part::Upper);
    }

    /// The TLB lost (or rewrote) its entry of page `vpn` with context `ctx` or `gctx`
    /// ([`NO_CTX`]: none): the copy goes.
    #[inline]
    pub fn drop_entry(&mut self, vpn: u64, ctx: u64, gctx: u64) {
        self.tlb.invalidate(vpn, ctx, gctx);
    }

    /// The TLB lost every entry `pred` holds of: the copies go.
    pub fn drop_if(&mut self, pred: impl FnMut(u64, u64) -> bool) {
        self.tlb.flush_if(pred);
    }

    pub fn flush_all(&mut self) {
        self.tlb.flush_all();
    }

    /// The running address space changed: an untagged micro-TLB loses the entries that are
    /// not `global`.
    pub fn switched(&mut self, global: impl Fn(u64) -> bool) {
        if !self.tagged {
            self.tlb.flush_if(|_, c| !global(c));
        }
    }

    /// Its entries (set, way, page, context), for tests.
    #[cfg(test)]
    pub fn entries(&self) -> Vec<(usize, usize, u64, u64)> {
        self.tlb.entries_iter().collect()
    }
}
