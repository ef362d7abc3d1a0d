//! What a trace contains, in one pass: the numbers `lookaside info` prints.
//!
//! Counting is exact except for distinct pages, which need a set: the set is capped at
//! [`PAGE_LIMIT`] entries (tens of MB), past which the count is a lower bound and
//! [`Summary::pages_exact`] is false, so that summarising a huge trace cannot exhaust memory.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::TraceSource;
use crate::error::Result;
use crate::event::{Event, Kind, Mode, ALL_KINDS};

/// Page size used to count distinct pages.
pub const SUMMARY_PAGE: u64 = 4096;
/// Most distinct (address space, page) pairs remembered.
pub const PAGE_LIMIT: usize = 1 << 22;
/// Most distinct address spaces remembered.
pub const ASID_LIMIT: usize = 1 << 20;

/// Counts and ranges describing a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Every event, references and control events.
    pub events: u64,
    /// Fetches, loads and stores.
    pub references: u64,
    /// Instructions executed, i.e. fetches.
    pub instructions: u64,
    /// Events per kind name (`fetch`, `load`, …; every kind is listed).
    pub kinds: BTreeMap<&'static str, u64>,
    /// References per mode (`user`, `kernel`).
    pub modes: BTreeMap<&'static str, u64>,
    /// Distinct address-space ids among all events.
    pub asids: u64,
    /// Distinct 4 KiB pages touched by references, per address space.
    pub pages: u64,
    /// False if there were more distinct pages than could be remembered (then `pages` is a
    /// lower bound).
    pub pages_exact: bool,
    /// Lowest byte address a reference touched.
    pub addr_min: Option<u64>,
    /// Highest byte address a reference touched.
    pub addr_max: Option<u64>,
    /// References that carry a physical address.
    pub with_paddr: u64,
    /// Records the reader skipped (see the format's documentation).
    pub skipped: u64,
    /// Bytes of the file read.
    pub bytes: u64,
}

/// Reads `source` to the end and summarises it.
pub fn summarize(source: &mut dyn TraceSource) -> Result<Summary> {
    let mut kinds = [0u64; ALL_KINDS.len()];
    let mut modes = [0u64; 2];
    let mut asids = HashSet::new();
    let mut asids_full = false;
    let mut pages: HashSet<(u32, u64)> = HashSet::new();
    let mut pages_exact = true;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    let mut with_paddr = 0;
    // The last page inserted per stream (fetch, data): most references repeat it.
    let mut last = [(u32::MAX, u64::MAX); 2];
    let mut batch: Vec<Event> = Vec::new();
    while source.next_batch(&mut batch)? {
        for e in &batch {
            kinds[e.kind as usize] += 1;
            if !asids_full && asids.insert(e.asid) && asids.len() >= ASID_LIMIT {
                asids_full = true;
            }
            if !e.kind.is_ref() {
                continue;
            }
            modes[matches!(e.mode, Mode::Kernel) as usize] += 1;
            with_paddr += (e.paddr != crate::event::NO_PADDR) as u64;
            let end = e.addr.saturating_add((e.size as u64).max(1) - 1);
            lo = lo.min(e.addr);
            hi = hi.max(end);
            let s = (e.kind != Kind::Fetch) as usize;
            let (first, last_page) = (e.addr / SUMMARY_PAGE, end / SUMMARY_PAGE);
            if last[s] == (e.asid, first) && first == last_page {
                continue;
            }
            last[s] = (e.asid, last_page);
            for p in first..=last_page {
                if pages.len() < PAGE_LIMIT {
                    pages.insert((e.asid, p));
                } else if !pages.contains(&(e.asid, p)) {
                    pages_exact = false;
                }
            }
        }
    }
    let references = kinds[..3].iter().sum();
    Ok(Summary {
        events: kinds.iter().sum(),
        references,
        instructions: kinds[Kind::Fetch as usize],
        kinds: ALL_KINDS
            .iter()
            .map(|k| (k.name(), kinds[*k as usize]))
            .collect(),
        modes: [Mode::User, Mode::Kernel]
            .iter()
            .map(|m| (m.name(), modes[*m as usize]))
            .collect(),
        asids: asids.len() as u64,
        pages: pages.len() as u64,
        pages_exact,
        addr_min: (references > 0).then_some(lo),
        addr_max: (references > 0).then_some(hi),
        with_paddr,
        skipped: source.skipped(),
        bytes: source.bytes_read(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::VecSource;

    #[test]
    fn counts_kinds_modes_asids_and_pages() {
        let r = Event::reference;
        let events = vec![
            r(Kind::Fetch, 0x1000, 4),
            r(Kind::Fetch, 0x1004, 4),
            r(Kind::Load, 0x1ffe, 4), // straddles 0x1000 and 0x2000
            r(Kind::Store, 0x5000, 8)
                .with_asid(2)
                .with_mode(Mode::Kernel)
                .with_paddr(0x9000),
            Event::control(Kind::ContextSwitch, 0, 3),
        ];
        let s = summarize(&mut VecSource::new(events, 2)).unwrap();
        assert_eq!(s.events, 5);
        assert_eq!(s.references, 4);
        assert_eq!(s.instructions, 2);
        assert_eq!(s.kinds["load"], 1);
        assert_eq!(s.kinds["context_switch"], 1);
        assert_eq!(s.kinds["marker"], 0);
        assert_eq!(s.modes["kernel"], 1);
        assert_eq!(s.modes["user"], 3);
        assert_eq!(s.asids, 3);
        assert_eq!(s.pages, 3, "(0,1), (0,2), (2,5)");
        assert!(s.pages_exact);
        assert_eq!((s.addr_min, s.addr_max), (Some(0x1000), Some(0x5007)));
        assert_eq!(s.with_paddr, 1);
    }

    #[test]
    fn an_empty_trace_has_no_range() {
        let s = summarize(&mut VecSource::new(vec![], 1)).unwrap();
        assert_eq!((s.events, s.addr_min, s.addr_max), (0, None, None));
    }
}
