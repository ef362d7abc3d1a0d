//! The hierarchy's side of the loop of a machine of caches alone
//! ([`crate::machine`]'s `CacheFeed`): the short path of [`Hierarchy::reference_parts`]
//! with its accesses counted by the caller, in a [`ShortTally`] of locals, rather than in
//! the ledger one by one. The tally is settled into the ledger (under the running address
//! space) before anything changes that address space and when the loop ends; everything
//! else — the fill, the transfers, the shadow's classes, every reference off the short path
//! — counts where it always does, so that results are those of
//! [`Hierarchy::reference_parts`] reference for reference.

use super::{Hierarchy, NO_LEVEL};
use crate::cache::tags::{CacheTags, Touch};
use crate::event::{Kind, Mode};
use crate::ledger::Ledger;

/// How the loop reaches the blocks of its first levels, chosen once for the loop
/// ([`Hierarchy::first_stores`]) so that each reference's access is the one its stores need.
pub(crate) trait FirstStore {
    fn access(tags: &mut CacheTags, block: u64) -> Touch;
}

/// Any store: [`CacheTags::access`].
pub(crate) struct AnyStore;

impl FirstStore for AnyStore {
    #[inline(always)]
    fn access(tags: &mut CacheTags, block: u64) -> Touch {
        tags.access(block)
    }
}

/// Stores of order words, LRU (`LRU`) or FIFO, in power-of-two numbers of sets:
/// [`CacheTags::access_ordered`].
pub(crate) struct Ordered<const LRU: bool>;

impl<const LRU: bool> FirstStore for Ordered<LRU> {
    #[inline(always)]
    fn access(tags: &mut CacheTags, block: u64) -> Touch {
        tags.access_ordered::<LRU>(block)
    }
}

/// Which [`FirstStore`] serves every first level a short path goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stores {
    Any,
    Lru,
    Fifo,
}

/// Accesses of the short paths' first levels not yet in the ledger, per cell
/// (`mode * 3 + kind`, masked to 8): those that hit and those that missed; and, per kind,
/// what the misses of a quick level (see [`super::Short::quick`]) did besides: the dirty
/// victims written back and the writes that covered their block (which fetch nothing); and
/// when the level classifies its misses, their classes per cell and their block misses'
/// classes per kind.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ShortTally {
    hits: [u64; 8],
    misses: [u64; 8],
    writebacks: [u64; 4],
    covered: [u64; 4],
    classes: [[u64; 3]; 8],
    block_classes: [[u64; 4]; 3],
}

/// The cell of `(mode, kind)` in a [`ShortTally`]; masked so that indexing needs no bounds
/// check.
#[inline(always)]
fn cell(mode: Mode, kind: Kind) -> usize {
    (mode as usize * 3 + kind as usize) & 7
}

impl Hierarchy {
    /// Which [`FirstStore`] serves the first levels of every short path:
    /// [`Ordered`] when [`CacheTags::ordered`] says so of them all, alike.
    pub(crate) fn first_stores(&self) -> Stores {
        let mut ordered = self
            .short
            .iter()
            .filter(|s| s.level != NO_LEVEL)
            .map(|s| self.levels[s.level].tags.ordered());
        let Some(first) = ordered.next() else {
            return Stores::Any;
        };
        match first {
            _ if ordered.any(|o| o != first) => Stores::Any,
            Some(true) => Stores::Lru,
            Some(false) => Stores::Fifo,
            None => Stores::Any,
        }
    }

    /// [`Hierarchy::reference_parts`], its short path's accesses counted in `tally`, its
    /// first levels' blocks reached through `S` ([`Hierarchy::first_stores`]).
    #[inline(always)]
    pub(crate) fn reference_alone<S: FirstStore>(
        &mut self,
        addr: u64,
        size: u16,
        kind: Kind,
        mode: Mode,
        tally: &mut ShortTally,
        ledger: &mut Ledger,
    ) {
        // The mode of the last reference is also the one the copy-back at the end is
        // counted in.
        self.mode = mode;
        let short = self.short[kind as usize & 3];
        if short.level != NO_LEVEL && (addr & short.block_mask) + size as u64 <= short.limit {
            let lv = short.level;
            let c = &mut self.levels[lv];
            let block = addr >> short.block_shift;
            let t = S::access(&mut c.tags, block);
            if t.hit {
                if kind == Kind::Store {
                    c.dirty[t.slot] = 1;
                }
                tally.hits[cell(mode, kind)] += 1;
                if short.classify {
                    self.alone_hit_classified(lv, block);
                }
                return;
            }
            tally.misses[cell(mode, kind)] += 1;
            if short.quick {
                // The block and the victim's write-back counted at settling; only the
                // slot's dirty bit is stored now (its valid bit is always set: plain).
                let write = kind == Kind::Store;
                let dirty = &mut c.dirty[t.slot];
                if t.evicted.is_some() && *dirty != 0 {
                    tally.writebacks[kind as usize & 3] += 1;
                }
                *dirty = write as u32;
                if write && self.first_ref(lv, addr, size, kind).size == short.block_mask + 1 {
                    tally.covered[kind as usize & 3] += 1;
                }
                if short.classify {
                    self.alone_miss_classified(lv, block, mode, kind, tally);
                }
                return;
            }
            return self.alone_miss(lv, addr, size, kind, t.slot, t.evicted, ledger);
        }
        self.reference_full(addr, size, kind, mode, ledger);
    }

    /// A hit on the short path of a level that classifies its misses: the shadow sees it too
    /// (the hit itself is counted in the tally).
    #[inline(never)]
    fn alone_hit_classified(&mut self, lv: usize, block: u64) {
        if let Some(s) = &mut self.levels[lv].shadow {
            s.hit(block, super::CTX);
        }
    }

    /// A miss on the short path of a quick level that classifies its misses: the shadow
    /// sees it and classifies it, the classes counted in the tally.
    #[inline(never)]
    fn alone_miss_classified(
        &mut self,
        lv: usize,
        block: u64,
        mode: Mode,
        kind: Kind,
        tally: &mut ShortTally,
    ) {
        if let Some(s) = &mut self.levels[lv].shadow {
            let (class, block_class) = s.classify(block, super::CTX, 1, true, true, true);
            if let Some(k) = class {
                tally.classes[cell(mode, kind)][k as usize] += 1;
            }
            if let Some(k) = block_class {
                tally.block_classes[k as usize][kind as usize & 3] += 1;
            }
        }
    }

    /// A miss on the short path, its block filled (see [`Hierarchy::short_filled`]).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn alone_miss(
        &mut self,
        lv: usize,
        addr: u64,
        size: u16,
        kind: Kind,
        slot: usize,
        evicted: Option<u64>,
        ledger: &mut Ledger,
    ) {
        self.short_filled(lv, addr, size, kind, slot, evicted, ledger);
    }

    /// Move the counts of `tally` into `ledger` (under its running address space) and into
    /// the caches' own counts.
    pub(crate) fn settle(&mut self, tally: &mut ShortTally, ledger: &mut Ledger) {
        for kind in Kind::REFS {
            let k = kind as usize & 3;
            let short = self.short[k];
            if short.level == NO_LEVEL {
                continue;
            }
            let s = self.base + short.level;
            let mut misses = 0;
            for mode in [Mode::User, Mode::Kernel] {
                let c = cell(mode, kind);
                ledger.add_hits(s, mode, kind, tally.hits[c]);
                ledger.add_misses(s, mode, kind, tally.misses[c]);
                ledger.add_classes(s, mode, kind, tally.classes[c]);
                misses += tally.misses[c];
            }
            if short.quick {
                // What [`Hierarchy::short_filled`] counts of each miss.
                let block_bytes = short.block_mask + 1;
                let t = &mut self.levels[short.level].t;
                t.block_misses[k] += misses;
                t.writebacks += tally.writebacks[k];
                t.bytes_written += tally.writebacks[k] * block_bytes;
                t.bytes_read += (misses - tally.covered[k]) * block_bytes;
                for (class, n) in tally.block_classes.iter().enumerate() {
                    t.block_classes[class][k] += n[k];
                }
            }
        }
        *tally = ShortTally::default();
    }
}
