//! The loop of a machine of caches alone (DineroIV's model: `[[cache]]` tables and no TLB,
//! walker, memory system, software refill or virtually addressed cache).
//!
//! Such a machine needs nothing of a reference of its running address space but the
//! hierarchy, so its loop is its own ([`CacheFeed`]): a decoder (or a batch) hands each
//! event to [`CacheFeed::event`], which counts the reference in locals and takes the short
//! path of its kind's first level inline, its accesses counted in locals too
//! ([`ShortTally`]); the counts reach the ledger only before anything that changes the
//! running address space and when the loop ends. The hierarchy is taken out of the machine
//! for the loop's lifetime (one pointer, not a look-up through the machine per event) and put
//! back for every other event, which goes through the machine's general [`Feed`](super::Feed).

use std::marker::PhantomData;

use super::{Machine, Tally};
use crate::cache::hier::{FirstStore, Hierarchy, ShortTally};
use crate::event::{Event, EventSink, Kind, Mode};

/// Simulates events one at a time on a machine of caches alone (see the module
/// documentation and [`Machine::caches_alone`]); the same results as [`Feed`](super::Feed)'s.
/// `S` reaches the blocks of the first levels (see [`Hierarchy::first_stores`]).
pub(crate) struct CacheFeed<'m, S: FirstStore> {
    m: &'m mut Machine,
    /// The machine's hierarchy, while the loop runs (always there but during [`Feed`](super::Feed)'s
    /// events).
    h: Option<Box<Hierarchy>>,
    /// References of the stream not yet in the ledger, per cell ([`Tally::cell`]).
    refs: [u64; 8],
    short: ShortTally,
    /// The running address space: a reference in it goes straight to the hierarchy.
    asid: u32,
    store: PhantomData<S>,
}

impl<'m, S: FirstStore> CacheFeed<'m, S> {
    /// The loop of `m`, a machine of caches alone ([`Machine::caches_alone`]).
    pub(crate) fn new(m: &'m mut Machine) -> CacheFeed<'m, S> {
        let h = m.caches.take();
        debug_assert!(h.is_some(), "a machine of caches alone has a hierarchy");
        CacheFeed {
            asid: m.cur_asid,
            m,
            h,
            refs: [0; 8],
            short: ShortTally::default(),
            store: PhantomData,
        }
    }

    /// Move the counts into the ledger (under the running address space).
    fn settle(&mut self) {
        let ledger = &mut self.m.ledger;
        for mode in [Mode::User, Mode::Kernel] {
            for kind in Kind::REFS {
                ledger.add_references(mode, kind, self.refs[Tally::cell(mode, kind)]);
            }
        }
        self.refs = [0; 8];
        if let Some(h) = &mut self.h {
            h.settle(&mut self.short, ledger);
        }
    }

    /// An event other than a reference of the running address space: settled, then through
    /// the machine's general path with its hierarchy back in place.
    #[inline(never)]
    fn cold(&mut self, e: &Event) {
        self.settle();
        self.m.caches = self.h.take();
        self.m.feed().event(e);
        self.h = self.m.caches.take();
        self.asid = self.m.cur_asid;
    }
}

impl<S: FirstStore> CacheFeed<'_, S> {
    /// A reference of the running address space, given by its fields.
    #[inline(always)]
    fn reference(&mut self, addr: u64, size: u16, kind: Kind, mode: Mode) {
        self.refs[Tally::cell(mode, kind)] += 1;
        let Some(h) = self.h.as_deref_mut() else {
            return;
        };
        h.reference_alone::<S>(addr, size, kind, mode, &mut self.short, &mut self.m.ledger);
    }
}

impl<S: FirstStore> EventSink for CacheFeed<'_, S> {
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        if e.kind.is_ref() && e.asid == self.asid {
            self.reference(e.addr, e.size, e.kind, e.mode);
        } else {
            self.cold(e);
        }
    }
}

impl<S: FirstStore> Drop for CacheFeed<'_, S> {
    fn drop(&mut self) {
        self.settle();
        self.m.caches = self.h.take();
    }
}
