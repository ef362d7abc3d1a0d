//! The translation machinery's own references on a machine with a memory system: the miss
//! handlers `[memory.handler]` synthesises, and the software-refill model's handlers
//! (`[refill]` with `[memory]`), whose instruction fetches and PTE loads reach the caches
//! before the reference that caused them.

use super::*;

/// Where reference `e` lies, as the refill model `r` translated it (a 64-bit trace's mapped
/// pages at their MIPS addresses): the reference there, whether it is mapped, and the space
/// its page's frame is taken under (kseg2's are [`KSEG2_SPACE`]); none for an address error,
/// which reaches no memory.
fn placed(r: &mut SoftwareManagedTlb, e: Event) -> Option<(Event, bool, u32)> {
    Some(match r.place(e.addr, e.mode, e.asid) {
        Place::User(addr) => (Event { addr, ..e }, true, e.asid),
        Place::Unmapped => (e, false, e.asid),
        Place::Kernel(addr) => (Event { addr, ..e }, true, KSEG2_SPACE),
        Place::Error => return None,
    })
}

impl Machine {
    /// A reference the miss handler makes (in the running address space), on a machine with a
    /// memory system: translation through the TLBs (the handler of a walk it takes in turn),
    /// then the caches. Counted in the ledger directly: handler work is rare beside the
    /// program's references, which take [`Feed`]'s path.
    pub(super) fn memory_event(&mut self, e: &Event) {
        self.ledger.add_references(e.mode, e.kind, 1);
        self.handler_refs += 1;
        let (mapped, walked) = if self.translated.get(e.kind as usize) == Some(&true) {
            self.reference(*e)
        } else {
            (self.pages.backing(e.addr, e.asid).is_some(), false)
        };
        if walked {
            self.run_handler(*e);
        }
        if let Some(m) = self.memory.as_deref_mut() {
            m.reference(e, mapped);
        }
    }

    /// One event on a machine with `[refill]` and `[memory]`: the refill model translates (and
    /// counts) it, then the memory system sees what its handlers did — each trap's instruction
    /// fetches from its vector, each PTE load at its virtual address (kseg0: unmapped; kseg2:
    /// the frame of its page under [`KSEG2_SPACE`]), counted under `utlb` (L1U traps) or
    /// `ktlb` (L1K, L2, L3 traps) — and then the reference itself, unless it was an address
    /// error.
    #[inline(never)]
    pub(super) fn refill_memory_event(&mut self, e: Event) {
        let (Some(r), Some(mem)) = (self.refill.as_deref_mut(), self.memory.as_deref_mut()) else {
            return;
        };
        r.run_batch(std::slice::from_ref(&e), &mut self.ledger);
        r.take_handler_refs(&mut self.steps);
        // The activities the running handlers interrupted (traps nest three deep at most).
        let mut interrupted = [Activity::Program; 4];
        let mut depth = 0;
        for s in &self.steps {
            match *s {
                HandlerStep::Enter {
                    trap,
                    code,
                    instructions,
                } => {
                    let a = if trap == Trap::L1U {
                        Activity::Utlb
                    } else {
                        Activity::Ktlb
                    };
                    interrupted[depth & 3] = mem.enter(a);
                    depth += 1;
                    mem.handler_fetches(e.asid, code, instructions as u64);
                }
                HandlerStep::Load(l) => {
                    let at = match layout::segment(l.addr) {
                        Segment::Unmapped => At::Unmapped(l.addr),
                        _ => At::Mapped {
                            addr: l.addr,
                            space: KSEG2_SPACE,
                        },
                    };
                    mem.machinery(l.asid, l.kind, at, l.size);
                }
                HandlerStep::Leave => {
                    depth = depth.saturating_sub(1);
                    mem.leave(interrupted[depth & 3]);
                }
            }
        }
        if !e.kind.is_ref() {
            if e.kind == Kind::Marker {
                mem.marker(e.addr);
            }
            return;
        }
        if let Some((e, mapped, space)) = placed(r, e) {
            mem.reference_in(&e, mapped, space);
        }
    }

    /// One event on a machine with `[refill]` and `[[cache]]`: the refill model translates
    /// (and counts) it, then the caches see what its handlers did — each trap's instruction
    /// fetches from its vector, each PTE load, in kernel mode — and then the reference itself
    /// at the address the refill model translated (a 64-bit trace's mapped pages at their
    /// MIPS addresses), unless it was an address error. The caches are addressed as they are
    /// on any machine: by virtual address (kseg0 and kseg1 are the physical ones).
    #[inline(never)]
    pub(super) fn refill_cache_event(&mut self, e: Event) {
        let (Some(r), Some(h)) = (self.refill.as_deref_mut(), self.caches.as_deref_mut()) else {
            return;
        };
        r.run_batch(std::slice::from_ref(&e), &mut self.ledger);
        r.take_handler_refs(&mut self.steps);
        for s in &self.steps {
            match *s {
                HandlerStep::Enter {
                    code, instructions, ..
                } => {
                    for i in 0..instructions as u64 {
                        h.reference_parts(
                            code + 4 * i,
                            4,
                            Kind::Fetch,
                            Mode::Kernel,
                            &mut self.ledger,
                        );
                    }
                }
                HandlerStep::Load(l) => h.reference(&l, &mut self.ledger),
                HandlerStep::Leave => {}
            }
        }
        if !e.kind.is_ref() {
            return;
        }
        if let Some((e, ..)) = placed(r, e) {
            h.reference(&e, &mut self.ledger);
        }
    }

    /// The `n` instruction fetches of a miss handler's code from `code` on, in address space
    /// `asid`, when all of it lies in unmapped memory (kseg0): counted as
    /// [`Machine::memory_event`] counts each, and run through the memory system's
    /// line-at-a-time path ([`MemorySystem::handler_fetches`]). Returns false, doing nothing,
    /// when some of the code is mapped (its fetches translate, and can miss, one by one).
    fn unmapped_code(&mut self, asid: u32, code: u64, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        let Some(last) = n.checked_mul(4).and_then(|b| code.checked_add(b - 1)) else {
            return false;
        };
        if self.pages.backing(code, asid).is_some() || self.pages.span(code, asid).1 < last {
            return false;
        }
        self.ledger.add_references(Mode::Kernel, Kind::Fetch, n);
        self.handler_refs += n;
        if self.translated.get(Kind::Fetch as usize) == Some(&true) {
            self.ledger.unmapped += n;
        }
        if let Some(m) = self.memory.as_deref_mut() {
            m.handler_fetches(asid, code, n);
        }
        true
    }

    /// Synthesise the work of the software miss handler for `e`, which walked (MIPS R3000,
    /// Chen): a miss on a user-space address takes the UTLB handler (its instructions, then a
    /// load of the PTE from the linear page table in mapped kernel memory, which can itself
    /// miss); a miss on a mapped kernel address takes a KTLB handler (its instructions, then
    /// a load of the root PTE from unmapped memory). The R3000 picks the vector by the
    /// address, not the mode: the kernel copying to or from a user buffer takes the UTLB
    /// handler ([`layout::user_space`]).
    pub(super) fn run_handler(&mut self, e: Event) {
        let Some(h) = &self.handler else { return };
        let (code, table, root, pte) = (h.code, h.page_table, h.root_table, h.pte_bytes as u64);
        let shift = self.pages.default.unwrap_or(12);
        let kernel = |kind, addr, size| Event {
            addr,
            paddr: crate::event::NO_PADDR,
            asid: e.asid,
            size,
            kind,
            mode: Mode::Kernel,
        };
        let (activity, count, base, load) = if layout::user_space(e.addr) {
            let vpn = e.addr >> shift;
            let load = table.wrapping_add(vpn.wrapping_mul(pte));
            (Activity::Utlb, h.utlb_instructions, code, load)
        } else {
            let vpn = e.addr.wrapping_sub(table) >> shift;
            let load = root.wrapping_add(vpn.wrapping_mul(pte));
            (Activity::Ktlb, h.ktlb_instructions, code + 0x80, load)
        };
        let previous = match self.memory.as_deref_mut() {
            // A miss inside the KTLB handler (its PTE load) is not handled again.
            Some(m) if m.activity() != Activity::Ktlb => m.enter(activity),
            _ => return,
        };
        if !self.unmapped_code(e.asid, base, count as u64) {
            for i in 0..count as u64 {
                self.memory_event(&kernel(Kind::Fetch, base + 4 * i, 4));
            }
        }
        self.memory_event(&kernel(Kind::Load, load, pte as u16));
        if let Some(m) = self.memory.as_deref_mut() {
            m.leave(previous);
        }
    }
}
