//! What Bala, Kaashoek and Weihl's IPC-path prefetcher (OSDI 1994) remembers: per address
//! space, per class of entry, the most recently missed entries, most recent first, no
//! repeats. The running space's lists are at hand; the others wait until their space is
//! switched to, when the prefetcher probes for what they hold. One home for both prefetchers:
//! the software-refill model's (classes: the MIPS page-table levels) and the walked
//! machine's (classes: user and kernel mode).

use std::collections::HashMap;

/// Most entries of one class remembered, and prefetched, per switch.
pub const MAX_RECENT: usize = 8;

/// The lists of one address space: per class, most recent first, `none` past the end.
type Lists<T, const C: usize> = [[T; MAX_RECENT]; C];

/// Per address space, per class, the most recently missed entries.
#[derive(Clone, Debug)]
pub(crate) struct RecentMisses<T, const C: usize> {
    /// Entries kept per class (at most [`MAX_RECENT`]; 0: the class is not kept).
    kept: [usize; C],
    /// What fills a list past its end.
    none: T,
    /// The running address space's lists; the others wait in `others`.
    cur: Lists<T, C>,
    others: HashMap<u32, Lists<T, C>>,
}

impl<T: Copy + PartialEq, const C: usize> RecentMisses<T, C> {
    /// Keep `kept[c]` entries of class `c` (each at most [`MAX_RECENT`]); `none` is no entry.
    pub fn new(kept: [usize; C], none: T) -> Self {
        assert!(
            kept.iter().all(|&n| n <= MAX_RECENT),
            "at most {MAX_RECENT} kept"
        );
        RecentMisses {
            kept,
            none,
            cur: [[none; MAX_RECENT]; C],
            others: HashMap::new(),
        }
    }

    /// Entries kept of class `c`.
    pub fn kept(&self, c: usize) -> usize {
        self.kept[c]
    }

    /// The running address space missed on `x` of class `c`: it goes to the front of the
    /// class's list — from where it was, or in place of the last, what follows moving down.
    #[inline]
    pub fn note(&mut self, c: usize, x: T) {
        let n = self.kept[c];
        if n == 0 {
            return;
        }
        let list = &mut self.cur[c][..n];
        let at = list.iter().position(|&e| e == x).unwrap_or(n - 1);
        list.copy_within(0..at, 1);
        list[0] = x;
    }

    /// The running address space's entries of class `c`, most recent first (a copy: the
    /// caller may note more while it goes through them).
    pub fn current(&self, c: usize) -> impl Iterator<Item = T> {
        let none = self.none;
        self.cur[c]
            .into_iter()
            .take(self.kept[c])
            .take_while(move |&e| e != none)
    }

    /// The running address space changes from `from` to `to`: `from`'s lists wait, `to`'s
    /// (empty if it has none) are now at hand.
    pub fn switch(&mut self, from: u32, to: u32) {
        let none = [[self.none; MAX_RECENT]; C];
        self.others.insert(from, self.cur);
        self.cur = self.others.remove(&to).unwrap_or(none);
    }

    /// Forget every entry `gone` says, of the running space's lists (`running`) and of those
    /// of each waiting space `space` for which `of(space)` holds; the rest keep their order.
    pub fn forget(&mut self, running: bool, of: impl Fn(u32) -> bool, gone: impl Fn(&T) -> bool) {
        let none = self.none;
        let drop = |lists: &mut Lists<T, C>| {
            for list in lists.iter_mut() {
                let mut kept = 0;
                for i in 0..MAX_RECENT {
                    if list[i] != none && !gone(&list[i]) {
                        list[kept] = list[i];
                        kept += 1;
                    }
                }
                list[kept..].fill(none);
            }
        };
        if running {
            drop(&mut self.cur);
        }
        for (&space, lists) in self.others.iter_mut() {
            if of(space) {
                drop(lists);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_the_most_recent_distinct_entries_per_space_and_class() {
        let mut r = RecentMisses::<u64, 2>::new([2, 1], u64::MAX);
        for v in [1, 2, 1, 3] {
            r.note(0, v);
        }
        r.note(1, 9);
        let now = |r: &RecentMisses<u64, 2>, c| r.current(c).collect::<Vec<_>>();
        assert_eq!((now(&r, 0), now(&r, 1)), (vec![3, 1], vec![9]));
        // Space 0's lists wait while space 1 (nothing remembered) runs.
        r.switch(0, 1);
        assert!(now(&r, 0).is_empty() && now(&r, 1).is_empty());
        r.note(0, 7);
        r.switch(1, 0);
        assert_eq!((now(&r, 0), now(&r, 1)), (vec![3, 1], vec![9]));
        // Forgetting page 3 in the running space and 7 in waiting space 1 only.
        r.forget(true, |s| s == 1, |&e| e == 3 || e == 7);
        assert_eq!(now(&r, 0), vec![1]);
        r.switch(0, 1);
        assert!(now(&r, 0).is_empty());
        // A class not kept remembers nothing.
        let mut off = RecentMisses::<u64, 1>::new([0], u64::MAX);
        off.note(0, 5);
        assert_eq!(off.current(0).count(), 0);
    }
}
