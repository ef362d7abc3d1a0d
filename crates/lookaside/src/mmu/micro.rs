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

use crate::event::{Kind, Mode};
use crate::ledger::Ledger;
use crate::threec::Shadow;
use crate::tlb::{Part, Tlb, TlbParams, NO_CTX};

/// The shape of a micro-TLB (see the module documentation).
#[derive(Clone, Debug)]
pub struct MicroParams {
    pub tlb: TlbParams,
    /// Entries tagged by address space (else its user entries go at every switch).
    pub tagged: bool,
    /// Its structure in the ledger (the refilled TLB's is [`super::RefillParams::index`]).
    pub index: usize,
    /// Classify its misses against a fully associative shadow of its size and policy.
    pub three_c: bool,
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
    /// With `three_c`: its shadow, which every look-up and every loss of a copy reaches too
    /// (as the shadow of any structure: an inclusive fully associative micro-TLB would lose
    /// the same), keyed by a page's context less `dirty` (the page, not its dirty entry).
    shadow: Option<Box<Shadow<Tlb>>>,
    dirty: u64,
    /// Its replacement reads the mode of the fetch that fills an entry: each look-up tells it.
    reads_reference: bool,
}

impl Micro {
    /// A micro-TLB of shape `p`, whose entries' contexts carry the bit `dirty` for a dirty
    /// page.
    pub fn new(p: &MicroParams, dirty: u64) -> Result<Micro, String> {
        if p.tlb.partition.is_some() {
            return Err("micro.partition: a micro-TLB has no partition".into());
        }
        let shadow = if p.three_c {
            let s = Shadow::new(p.tlb.entries, p.tlb.policy, p.tlb.seed ^ 0x3c, true)
                .map_err(|m| format!("micro.3c: {m}"))?;
            Some(Box::new(s))
        } else {
            None
        };
        Ok(Micro {
            tlb: Tlb::new(&p.tlb).map_err(|e| format!("micro.{e}"))?,
            tagged: p.tagged,
            index: p.index,
            refills: 0,
            shadow,
            dirty,
            reads_reference: p.tlb.reads_reference(),
        })
    }

    /// Does it hold page `vpn` with context `ctx` or `gctx`? A fetch of `mode` looks: counted
    /// in `ledger` (and classified, with a shadow).
    #[inline(always)]
    pub fn lookup(
        &mut self,
        vpn: u64,
        ctx: u64,
        gctx: u64,
        mode: Mode,
        ledger: &mut Ledger,
    ) -> bool {
        if self.reads_reference {
            self.tlb.set_reference(Kind::Fetch, mode);
        }
        let held = self.tlb.lookup(vpn, ctx, gctx);
        ledger.access(self.index, mode, Kind::Fetch, !held);
        if let Some(s) = self.shadow.as_deref_mut() {
            if self.reads_reference {
                s.set_reference(Kind::Fetch, mode);
            }
            if let Some(c) = s.tlb_access(vpn, ctx & !self.dirty, !held) {
                ledger.classify(self.index, mode, Kind::Fetch, c);
            }
        }
        held
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
        if let Some(s) = self.shadow.as_deref_mut() {
            for c in [ctx, gctx].into_iter().filter(|&c| c != NO_CTX) {
                s.invalidate(vpn, c & !self.dirty);
            }
        }
    }

    /// The TLB lost every entry `pred` holds of: the copies go. (`pred` reads no dirty bit:
    /// the shadow's contexts have none.)
    pub fn drop_if(&mut self, pred: impl Fn(u64, u64) -> bool + Copy) {
        self.tlb.flush_if(pred);
        if let Some(s) = self.shadow.as_deref_mut() {
            s.flush_if(pred);
        }
    }

    pub fn flush_all(&mut self) {
        self.tlb.flush_all();
        if let Some(s) = self.shadow.as_deref_mut() {
            s.flush_all();
        }
    }

    /// The running address space changed: an untagged micro-TLB loses the entries that are
    /// not `global`.
    pub fn switched(&mut self, global: impl Fn(u64) -> bool + Copy) {
        if !self.tagged {
            self.drop_if(|_, c| !global(c));
        }
    }

    /// Its entries (set, way, page, context), for tests.
    #[cfg(test)]
    pub fn entries(&self) -> Vec<(usize, usize, u64, u64)> {
        self.tlb.entries_iter().collect()
    }
}
