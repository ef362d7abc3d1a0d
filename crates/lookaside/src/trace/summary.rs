//! What a trace contains, in one pass: the numbers `lookaside info` prints.
//!
//! Counting is exact except for distinct pages, which need a set: the set is capped at
//! [`PAGE_LIMIT`] entries (tens of MB), past which the count is a lower bound and
//! [`Summary::pages_exact`] is false, so that summarising a huge trace cannot exhaust memory.
//!
//! For traces with physical addresses (whole-system captures) the summary also checks that
//! they are consistent with the address-space labels: see [`Translations`].

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::TraceSource;
use crate::error::Result;
use crate::event::{Cpus, Event, Kind, Mode, ALL_KINDS, MAX_CPUS, NO_PADDR};

/// Page size used to count distinct pages.
pub const SUMMARY_PAGE: u64 = 4096;
/// Most distinct (address space, page) pairs remembered.
pub const PAGE_LIMIT: usize = 1 << 22;
/// Most distinct address spaces remembered.
pub const ASID_LIMIT: usize = 1 << 20;
/// Most address spaces given their own counts in [`Summary::by_asid`].
pub const BY_ASID_LIMIT: usize = 4096;

/// References of one address space, by mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ModeCounts {
    pub user: u64,
    pub kernel: u64,
}

/// The TLB shootdowns of one CPU: TLB flushes whose CPU mask ([`Kind::TlbFlush`]'s
/// `paddr`) names another CPU than the one that made them, one per page (or one of every
/// page).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Shootdowns {
    /// Shootdowns this CPU made.
    pub sent: u64,
    /// Shootdowns another CPU made that name this one.
    pub received: u64,
}

/// How the physical addresses of a trace map its (address space, virtual page) pairs, over
/// the user-mode references that carry one (4 KiB pages). Kernel references are left out:
/// the kernel maps one address to many frames by design (text_poke's temporary mapping),
/// and a wrong label shows first in the user's own references after a switch anyway.
///
/// A page's frame changes legitimately a few times in a run (copy-on-write after fork, a
/// page freed and faulted in again): those are `remaps`. A page whose frame changes *back*
/// to the one it had before the last change (A → B → A) is the signature of references
/// labelled with the wrong address space, e.g. a parent's and a forked child's (same virtual
/// layout, different frames) mixed up at a context switch, which makes one at nearly every
/// switch. A correctly labelled trace has a few at most: the page allocator hands out
/// recently freed frames first, so a copy-on-write copy can land in the frame the page had
/// before. `returns` counts them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Translations {
    /// Distinct (address space, virtual page) pairs with a physical address.
    pub pages: u64,
    /// Times a pair's frame differed from the one it had.
    pub remaps: u64,
    /// Remaps back to the frame the pair had before its previous remap.
    pub returns: u64,
    /// False if there were more pairs than could be remembered (then all three are lower
    /// bounds).
    pub exact: bool,
}

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
    /// References per address space and mode (the first [`BY_ASID_LIMIT`] address spaces).
    pub by_asid: BTreeMap<u32, ModeCounts>,
    /// References per CPU and mode (the first [`BY_ASID_LIMIT`] CPUs): a trace with no CPU
    /// marker ([`crate::event::CPU_MARK`]) is CPU 0's.
    pub by_cpu: BTreeMap<u32, ModeCounts>,
    /// TLB shootdowns per CPU (CPUs of [`Self::by_cpu`]; none when the trace has none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub shootdowns: BTreeMap<u32, Shootdowns>,
    /// The translations the physical addresses of user-mode references imply (when any
    /// carries one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub translations: Option<Translations>,
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
    let mut by_asid: BTreeMap<u32, ModeCounts> = BTreeMap::new();
    let mut by_cpu: BTreeMap<u32, ModeCounts> = BTreeMap::new();
    let mut shootdowns: BTreeMap<u32, Shootdowns> = BTreeMap::new();
    let mut cpus = Cpus::default();
    // Per (address space, page): its frame and the frame before the last change.
    let mut frames: HashMap<(u32, u64), (u64, u64)> = HashMap::new();
    let mut tr = Translations {
        exact: true,
        ..Translations::default()
    };
    // The last (address space, page, frame) per stream (fetch, data): most references
    // repeat it.
    let mut last = [(u32::MAX, u64::MAX, u64::MAX); 2];
    let mut batch: Vec<Event> = Vec::new();
    while source.next_batch(&mut batch)? {
        for e in &batch {
            kinds[e.kind as usize] += 1;
            let cpu = cpus.of(e);
            if !asids_full && asids.insert(e.asid) && asids.len() >= ASID_LIMIT {
                asids_full = true;
            }
            if e.kind == Kind::TlbFlush
                && e.paddr != NO_PADDR
                && cpu < MAX_CPUS
                && e.paddr & !(1u64 << cpu) != 0
            {
                shootdowns.entry(cpu).or_default().sent += 1;
                for c in (0..MAX_CPUS).filter(|&c| c != cpu && e.paddr >> c & 1 == 1) {
                    shootdowns.entry(c).or_default().received += 1;
                }
            }
            if !e.kind.is_ref() {
                continue;
            }
            let kernel = matches!(e.mode, Mode::Kernel);
            modes[kernel as usize] += 1;
            for (map, key) in [(&mut by_asid, e.asid), (&mut by_cpu, cpu)] {
                if map.len() < BY_ASID_LIMIT || map.contains_key(&key) {
                    let c = map.entry(key).or_default();
                    if kernel {
                        c.kernel += 1;
                    } else {
                        c.user += 1;
                    }
                }
            }
            let has_paddr = e.paddr != NO_PADDR;
            with_paddr += has_paddr as u64;
            let end = e.addr.saturating_add((e.size as u64).max(1) - 1);
            lo = lo.min(e.addr);
            hi = hi.max(end);
            let s = (e.kind != Kind::Fetch) as usize;
            let (first, last_page) = (e.addr / SUMMARY_PAGE, end / SUMMARY_PAGE);
            let frame = if has_paddr {
                e.paddr / SUMMARY_PAGE
            } else {
                u64::MAX
            };
            if last[s] == (e.asid, first, frame) && first == last_page {
                continue;
            }
            last[s] = (
                e.asid,
                last_page,
                if first == last_page { frame } else { u64::MAX },
            );
            if has_paddr && !kernel {
                // The physical address is that of the first byte: its page is checked.
                let full = frames.len() >= PAGE_LIMIT;
                match frames.get_mut(&(e.asid, first)) {
                    Some((now, before)) if *now != frame => {
                        tr.remaps += 1;
                        tr.returns += (*before == frame) as u64;
                        *before = *now;
                        *now = frame;
                    }
                    Some(_) => {}
                    None if full => tr.exact = false,
                    None => {
                        frames.insert((e.asid, first), (frame, u64::MAX));
                    }
                }
            }
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
        by_asid,
        by_cpu,
        shootdowns,
        translations: (with_paddr > 0 && modes[0] > 0).then_some(Translations {
            pages: frames.len() as u64,
            ..tr
        }),
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
    fn counts_references_per_address_space_and_mode() {
        let r = Event::reference;
        let events = vec![
            r(Kind::Fetch, 0x1000, 4).with_asid(1),
            r(Kind::Load, 0xffff_8000_0000_0000, 8)
                .with_asid(1)
                .with_mode(Mode::Kernel),
            r(Kind::Store, 0x2000, 4).with_asid(7),
        ];
        let s = summarize(&mut VecSource::new(events, 2)).unwrap();
        assert_eq!(s.by_asid[&1], ModeCounts { user: 1, kernel: 1 });
        assert_eq!(s.by_asid[&7], ModeCounts { user: 1, kernel: 0 });
        assert_eq!(s.translations, None, "no physical addresses");
    }

    proptest::proptest! {
        /// References per CPU equal a brute-force tally of who made each reference, in a
        /// random interleaving of CPUs whose every change is marked (with redundant markers,
        /// other markers and control events between), batched anywhere; before the first
        /// marker the references are CPU 0's. Shootdowns likewise: TLB flushes with random
        /// CPU masks (the running CPU's own flush, without one, is none).
        #[test]
        fn references_per_cpu_follow_the_cpu_markers(
            refs in proptest::collection::vec(
                (0u32..4, proptest::bool::ANY, 0u8..6, 0u64..16), 0..200),
            batch in 1usize..17,
        ) {
            let mut events = Vec::new();
            let mut want: BTreeMap<u32, ModeCounts> = BTreeMap::new();
            let mut shot: BTreeMap<u32, Shootdowns> = BTreeMap::new();
            let mut running = 0;
            for (i, &(cpu, kernel, extra, mask)) in refs.iter().enumerate() {
                if cpu != running || extra == 0 {
                    events.push(Event::on_cpu(cpu));
                    running = cpu;
                }
                match extra {
                    1 => events.push(Event::phase("CPUS")),
                    2 => events.push(Event::control(Kind::ContextSwitch, 0, cpu + 1)),
                    3 => {
                        let flush = Event::control(Kind::TlbFlush, i as u64 * 64, 1);
                        events.push(if mask == 0 { flush } else { flush.with_paddr(mask) });
                        let others: Vec<u32> =
                            (0..4).filter(|&c| c != running && mask >> c & 1 == 1).collect();
                        if !others.is_empty() {
                            shot.entry(running).or_default().sent += 1;
                        }
                        for c in others {
                            shot.entry(c).or_default().received += 1;
                        }
                    }
                    _ => {}
                }
                let mode = if kernel { Mode::Kernel } else { Mode::User };
                events.push(Event::reference(Kind::Load, i as u64 * 64, 8).with_mode(mode));
                let c = want.entry(running).or_default();
                if kernel { c.kernel += 1 } else { c.user += 1 }
            }
            let s = summarize(&mut VecSource::new(events, batch)).unwrap();
            proptest::prop_assert_eq!(s.by_cpu, want);
            proptest::prop_assert_eq!(s.shootdowns, shot);
        }
    }

    /// A parent and its forked child: the same virtual pages, different frames.
    fn fork_pair(rounds: u64, mislabel_every: u64) -> Vec<Event> {
        let mut v = Vec::new();
        for i in 0..rounds {
            for (asid, frame) in [(1u32, 0x10u64), (2, 0x20)] {
                // The reference after the switch is labelled with the previous address
                // space every `mislabel_every` rounds (a label applied too late).
                let label = if mislabel_every > 0 && i % mislabel_every == 0 {
                    3 - asid
                } else {
                    asid
                };
                v.push(Event::control(Kind::ContextSwitch, 0, asid));
                v.push(
                    Event::reference(Kind::Store, 0x7000 + 8 * i, 8)
                        .with_asid(label)
                        .with_paddr(frame * SUMMARY_PAGE + 8 * i),
                );
            }
        }
        v
    }

    #[test]
    fn translations_tell_right_labels_from_wrong_ones() {
        let s = summarize(&mut VecSource::new(fork_pair(100, 0), 7)).unwrap();
        let t = s.translations.unwrap();
        assert_eq!((t.pages, t.remaps, t.returns, t.exact), (2, 0, 0, true));
        let s = summarize(&mut VecSource::new(fork_pair(100, 10), 7)).unwrap();
        let t = s.translations.unwrap();
        assert!(t.returns > 0 && t.remaps > t.returns, "{t:?}");
        // Copy-on-write: the child's page gets its own frame once, and keeps it.
        let mut v = fork_pair(3, 0);
        v.push(
            Event::reference(Kind::Store, 0x7000, 8)
                .with_asid(2)
                .with_paddr(0x30 * SUMMARY_PAGE),
        );
        v.extend(fork_pair(3, 0).into_iter().map(|e| {
            if e.asid == 2 && e.kind.is_ref() {
                e.with_paddr(0x30 * SUMMARY_PAGE + e.paddr % SUMMARY_PAGE)
            } else {
                e
            }
        }));
        let t = summarize(&mut VecSource::new(v, 5))
            .unwrap()
            .translations
            .unwrap();
        assert_eq!((t.remaps, t.returns), (1, 0));
    }

    #[test]
    fn an_empty_trace_has_no_range() {
        let s = summarize(&mut VecSource::new(vec![], 1)).unwrap();
        assert_eq!((s.events, s.addr_min, s.addr_max), (0, None, None));
    }
}
