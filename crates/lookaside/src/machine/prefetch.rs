//! Bala, Kaashoek and Weihl's IPC-path prefetching (OSDI 1994) on a machine whose TLB misses
//! are walked (`[prefetch]`; the software-refill model has its own, `[refill.prefetch]`, whose
//! classes are the MIPS page-table levels; both remember misses in a
//! [`crate::mmu::RecentMisses`]).
//!
//! Every walk is remembered for the address space that took it: the entry the last structure
//! it missed in would hold (structure, page, size, global or not), most recent first, no
//! repeats, user and kernel apart (by the mode of the reference that walked), at most
//! [`MAX_ENTRIES`] each. When an address space is switched to — the hand-off of an IPC — its
//! `user_entries` and `kernel_entries` most recent are probed for in their structures (a probe
//! changes no replacement state) and those absent are inserted, as a hit-free fill. What an
//! insertion costs is the PTE's read, which is counted (`inserted`) but not simulated through
//! `[pagetable]` or `[memory]`: Bala's handler reads it through unmapped memory. A structure
//! that classifies its misses (`3c`) gives its shadow the same insertions
//! ([`crate::threec::Shadow::prefetched`]): its classes are of demand misses, against a
//! fully associative structure that was prefetched into as it was.

use crate::event::{Kind, Mode};
use crate::mmu::RecentMisses;

/// Most entries of one class remembered, and prefetched, per switch.
pub use crate::mmu::MAX_RECENT as MAX_ENTRIES;

/// A remembered entry: the structure, the page number at its page size, that shift, and
/// whether the entry is global.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Recent {
    pub unit: u16,
    pub shift: u8,
    pub global: bool,
    pub vpn: u64,
}

/// No entry (past the end of a list).
const NONE: Recent = Recent {
    unit: u16::MAX,
    shift: 0,
    global: false,
    vpn: u64::MAX,
};

/// The prefetcher's state and what it did.
#[derive(Clone, Debug)]
pub(super) struct Prefetcher {
    /// Per address space, the entries its walks filled, per class (user, kernel).
    recent: RecentMisses<Recent, 2>,
    /// Probes made (one per remembered entry considered at a switch).
    pub probes: u64,
    /// Entries absent and so inserted, per class.
    pub inserted: [u64; 2],
}

impl Prefetcher {
    pub fn new(user_entries: usize, kernel_entries: usize) -> Prefetcher {
        Prefetcher {
            recent: RecentMisses::new([user_entries, kernel_entries], NONE),
            probes: 0,
            inserted: [0; 2],
        }
    }

    /// The running address space walked to fill `r` (kernel mode: `kernel`): it goes to the
    /// front of its class's list.
    pub fn note(&mut self, r: Recent, kernel: bool) {
        self.recent.note(kernel as usize, r);
    }

    /// The `prefetch` section of the result: the entries per switch, the probes made and
    /// the entries inserted, per class.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "user_entries": self.recent.kept(0),
            "kernel_entries": self.recent.kept(1),
            "probes": self.probes,
            "inserted": self.inserted[0] + self.inserted[1],
            "inserted_by_class": {"user": self.inserted[0], "kernel": self.inserted[1]},
        })
    }

    /// Page `addr` of address space `asid` was unmapped (`global`: a global page, of every
    /// space; `running`: the running space): its entries are forgotten, as the OS would not
    /// prefetch a translation it no longer has.
    pub fn forget(&mut self, asid: u32, addr: u64, global: bool, running: u32) {
        self.recent.forget(
            global || asid == running,
            |a| global || a == asid,
            |e| e.global == global && e.vpn == addr >> e.shift,
        );
    }

    /// The running address space changes from `from` to `to`: keep `from`'s lists, take
    /// `to`'s, and return the entries to prefetch for it (with their class), class by class,
    /// most recent first — in an array (the first `.1` of it), so that a switch allocates
    /// nothing.
    pub fn switch(&mut self, from: u32, to: u32) -> ([(usize, Recent); 2 * MAX_ENTRIES], usize) {
        self.recent.switch(from, to);
        let mut out = [(0, NONE); 2 * MAX_ENTRIES];
        let mut n = 0;
        for c in 0..2 {
            for e in self.recent.current(c) {
                out[n] = (c, e);
                n += 1;
            }
        }
        (out, n)
    }
}

impl super::Machine {
    /// A walk of the page of `addr` (backed by pages of `shift`) fills the entry of the
    /// structure that missed last: the prefetcher remembers it for the running address space.
    #[cold]
    pub(super) fn remember_walk(&mut self, addr: u64, shift: u32, global: bool, mode: Mode) {
        let i = self.last_missed;
        let s = self.units[i].shift_for(shift);
        if let Some(p) = self.prefetch.as_deref_mut() {
            let r = Recent {
                unit: i as u16,
                shift: s as u8,
                global,
                vpn: addr >> s,
            };
            p.note(r, mode == Mode::Kernel);
        }
    }

    /// Bala's IPC-path prefetch on a switch from address space `from` to the running one:
    /// each entry the prefetcher remembers for it is probed for in its structure and inserted
    /// where absent (see [`prefetch`]).
    pub(super) fn prefetch_into(&mut self, from: u32) {
        let Some(p) = self.prefetch.as_deref_mut() else {
            return;
        };
        let (todo, n) = p.switch(from, self.cur_asid);
        for &(class, r) in &todo[..n] {
            let u = &mut self.units[r.unit as usize];
            let ctx = u.ctx(self.cur_asid, r.shift as u32, r.global);
            let p = self.prefetch.as_deref_mut().expect("a prefetcher");
            p.probes += 1;
            if !u.tlb.holds(r.vpn, ctx) {
                let mode = [Mode::User, Mode::Kernel][class];
                u.access(r.vpn, ctx, Kind::Load, mode);
                if let Some(sh) = u.shadow.as_deref_mut() {
                    sh.set_reference(Kind::Load, mode);
                    sh.prefetched(r.vpn, ctx);
                }
                p.inserted[class] += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries a switch returns, as a list.
    fn switched(p: &mut Prefetcher, from: u32, to: u32) -> Vec<(usize, Recent)> {
        let (all, n) = p.switch(from, to);
        all[..n].to_vec()
    }

    fn page(vpn: u64) -> Recent {
        Recent {
            unit: 0,
            shift: 12,
            global: false,
            vpn,
        }
    }

    #[test]
    fn lists_keep_the_most_recent_distinct_entries_per_space() {
        let mut p = Prefetcher::new(2, 1);
        for v in [1, 2, 1, 3] {
            p.note(page(v), false);
        }
        p.note(page(9), true);
        // Space 0's lists wait while space 1 (nothing remembered) runs.
        assert!(switched(&mut p, 0, 1).is_empty());
        p.note(page(7), false);
        let back = switched(&mut p, 1, 0);
        assert_eq!(back, [(0, page(3)), (0, page(1)), (1, page(9))]);
        // Unmapping a page of space 0 forgets it there only; space 1 runs, 0 waits.
        let other = switched(&mut p, 0, 1);
        assert_eq!(other, [(0, page(7))]);
        p.forget(0, 1 << 12, false, 1);
        p.forget(5, 7 << 12, false, 1);
        assert_eq!(switched(&mut p, 1, 0), [(0, page(3)), (1, page(9))]);
        assert_eq!(switched(&mut p, 0, 1), [(0, page(7))]);
    }
}
