//! The whole machine — hierarchy wiring, sibling structures for different page sizes, page
//! sizes of regions (fragments included), address spaces, global pages, straddling accesses,
//! flushes and shootdowns — against a brute-force model written from the semantics in
//! `machine.rs`'s module doc, on random and adversarial event streams; and with Bala's
//! IPC-path prefetching (`[prefetch]`), against the same model remembering every walk in
//! plain lists per address space; and with every structure classifying its misses (`3c`),
//! against a fully associative copy of each structure and the set of entries ever referenced.

use std::collections::{HashMap, HashSet};

use lookaside::event::{Event, Kind, Mode, FLUSH_ALL, FLUSH_SPACE};
use lookaside::machine::Machine;
use proptest::prelude::*;

/// An entry the prefetcher remembers: (structure, page, shift, global).
type Walked = (usize, u64, u32, bool);

/// An entry of a structure: (vpn, page shift, asid-or-None-for-global).
type Entry = (u64, u32, Option<u32>);

/// Look `e` up in `set` (recency order with `lru`, else insertion order; front = next
/// victim) and fill it when absent, evicting the front of a full set: whether it hit.
fn lookup_fill(set: &mut Vec<Entry>, ways: usize, lru: bool, e: Entry) -> bool {
    if let Some(i) = set.iter().position(|x| *x == e) {
        if lru {
            let x = set.remove(i);
            set.push(x);
        }
        return true;
    }
    if set.len() == ways {
        set.remove(0);
    }
    set.push(e);
    false
}

/// One structure of the model: per set a Vec in recency (LRU) or insertion (FIFO) order, front
/// = next victim. Entries are (vpn, page shift, asid-or-None-for-global).
#[derive(Clone, Debug)]
struct RefTlb {
    name: String,
    sets: usize,
    ways: usize,
    lru: bool,
    tagged: bool,
    serves: [bool; 3],
    /// Page shifts held.
    sizes: Vec<u32>,
    next: Vec<usize>,
    content: Vec<Vec<Entry>>,
    accesses: u64,
    misses: u64,
    /// Hill's classes of its misses: a fully associative structure of as many entries and
    /// the same policy, updated as this one is (fills, prefetches, invalidations); the
    /// entries ever referenced (or prefetched); compulsory, capacity and conflict misses.
    full: Vec<Entry>,
    seen: HashSet<Entry>,
    classes: [u64; 3],
}

impl RefTlb {
    /// A reference's look-up (filling on a miss), classified: whether it hit.
    fn lookup_fill(&mut self, vpn: u64, shift: u32, tag: Option<u32>) -> bool {
        let e = (vpn, shift, tag);
        let set = &mut self.content[(vpn % self.sets as u64) as usize];
        let hit = lookup_fill(set, self.ways, self.lru, e);
        let full_hit = lookup_fill(&mut self.full, self.sets * self.ways, self.lru, e);
        let first = self.seen.insert(e);
        if !hit {
            self.classes[if full_hit {
                2
            } else if first {
                0
            } else {
                1
            }] += 1;
        }
        hit
    }

    /// A prefetch fills the absent entry `e`, in the fully associative copy too.
    fn prefetch(&mut self, e: Entry) {
        lookup_fill(
            &mut self.content[(e.0 % self.sets as u64) as usize],
            self.ways,
            self.lru,
            e,
        );
        lookup_fill(&mut self.full, self.sets * self.ways, self.lru, e);
        self.seen.insert(e);
    }

    /// Every entry `keep` rejects leaves the structure and its fully associative copy.
    fn retain(&mut self, keep: impl Fn(&Entry) -> bool) {
        for set in &mut self.content {
            set.retain(&keep);
        }
        self.full.retain(&keep);
    }
}

struct RefMachine {
    tlbs: Vec<RefTlb>,
    /// Regions `[start, end)` backed by pages of a shift (None: unmapped), first match wins;
    /// 4 KiB pages elsewhere. A reference starting in an unmapped region is not translated,
    /// nor is the part of a straddling reference that falls in one.
    regions: Vec<(u64, u64, Option<u32>)>,
    global_above: u64,
    asid: u32,
    walks: u64,
    /// With `[prefetch]`: entries per switch (user, kernel); per address space, the entries
    /// of its walks, most recent first, no repeats, user and kernel apart; probes, inserted.
    prefetch: [usize; 2],
    walked: HashMap<u32, [Vec<Walked>; 2]>,
    probes: u64,
    inserted: u64,
}

impl RefMachine {
    fn backing(&self, addr: u64) -> Option<u32> {
        self.regions
            .iter()
            .find(|r| addr >= r.0 && addr < r.1)
            .map_or(Some(12), |r| r.2)
    }

    /// Among `candidates`, the structure serving `kind` that holds the largest page size not
    /// larger than the page (shift `backing`), with that size.
    fn pick(&self, candidates: &[usize], kind: Kind, backing: u32) -> Option<(usize, u32)> {
        let mut best: Option<(usize, u32)> = None;
        for &i in candidates {
            let t = &self.tlbs[i];
            if !t.serves[kind as usize] {
                continue;
            }
            for &s in &t.sizes {
                if s <= backing && best.is_none_or(|(_, b)| s > b) {
                    best = Some((i, s));
                }
            }
        }
        best
    }

    fn translate(&mut self, addr: u64, kind: Kind, mode: Mode, backing: u32) {
        let firsts: Vec<usize> = (0..self.tlbs.len())
            .filter(|i| !self.tlbs.iter().any(|t| t.next.contains(i)))
            .collect();
        let had_root = firsts.iter().any(|&i| self.tlbs[i].serves[kind as usize]);
        let mut level = self.pick(&firsts, kind, backing);
        let mut missed = None;
        while let Some((i, s)) = level {
            let global = addr >= self.global_above;
            let t = &mut self.tlbs[i];
            let tag = if global {
                None
            } else if t.tagged {
                Some(self.asid)
            } else {
                Some(0)
            };
            t.accesses += 1;
            if t.lookup_fill(addr >> s, s, tag) {
                return;
            }
            t.misses += 1;
            missed = Some((i, s));
            let next = t.next.clone();
            level = self.pick(&next, kind, backing);
        }
        if had_root {
            self.walks += 1;
        }
        if let (Some((i, s)), true) = (missed, self.prefetch != [0, 0]) {
            let class = (mode == Mode::Kernel) as usize;
            let n = self.prefetch[class];
            let e = (i, addr >> s, s, addr >= self.global_above);
            let list = &mut self.walked.entry(self.asid).or_default()[class];
            list.retain(|x| *x != e);
            list.insert(0, e);
            list.truncate(n);
        }
    }

    fn switch(&mut self, asid: u32) {
        if asid != self.asid {
            self.asid = asid;
            for t in self.tlbs.iter_mut().filter(|t| !t.tagged) {
                t.retain(|e| e.2.is_none());
            }
            // The receiver's remembered entries, user then kernel, each looked for in its
            // structure and filled where absent.
            let lists = self.walked.get(&asid).cloned().unwrap_or_default();
            for (i, vpn, s, global) in lists.into_iter().flatten() {
                let t = &mut self.tlbs[i];
                let tag = if global {
                    None
                } else if t.tagged {
                    Some(asid)
                } else {
                    Some(0)
                };
                self.probes += 1;
                let set = &t.content[(vpn % t.sets as u64) as usize];
                if !set.contains(&(vpn, s, tag)) {
                    t.prefetch((vpn, s, tag));
                    self.inserted += 1;
                }
            }
        }
    }

    fn event(&mut self, e: &Event) {
        match e.kind {
            Kind::Fetch | Kind::Load | Kind::Store => {
                self.switch(e.asid);
                let Some(b) = self.backing(e.addr) else {
                    return;
                };
                self.translate(e.addr, e.kind, e.mode, b);
                // Every further page the access touches, once each, found 1 KiB at a time
                // (finer than every page and hole here) and at its last byte, translated at
                // the last byte touched in it; an access past 2^64 ends at the top.
                let last = e.addr.saturating_add(e.size.max(1) as u64 - 1);
                let mut done = (e.addr >> b, b);
                let steps = (e.addr >> 10) + 1..=last >> 10;
                for at in steps.map(|k| k << 10).chain([last]) {
                    if let Some(b2) = self.backing(at) {
                        if (at >> b2, b2) != done {
                            done = (at >> b2, b2);
                            let end = at | ((1u64 << b2) - 1);
                            self.translate(end.min(last), e.kind, e.mode, b2);
                        }
                    }
                }
            }
            Kind::ContextSwitch => self.switch(e.asid),
            Kind::TlbFlush if e.addr == FLUSH_ALL => {
                for t in &mut self.tlbs {
                    t.retain(|_| false);
                }
            }
            // The space's entries but the global ones: all but the global ones in an
            // untagged structure, if the space is the one running (it holds no other).
            Kind::TlbFlush if e.addr == FLUSH_SPACE => {
                for t in &mut self.tlbs {
                    if t.tagged {
                        t.retain(|x| x.2 != Some(e.asid));
                    } else if e.asid == self.asid {
                        t.retain(|x| x.2.is_none());
                    }
                }
            }
            Kind::TlbFlush | Kind::Unmap | Kind::Protect => {
                let global = e.addr >= self.global_above;
                if e.kind == Kind::Unmap {
                    // An unmapped page is not prefetched again: gone from the lists of its
                    // space (of every space, a global page).
                    for (&a, lists) in self.walked.iter_mut() {
                        if global || a == e.asid {
                            for list in lists.iter_mut() {
                                list.retain(|x| !(x.3 == global && x.1 == e.addr >> x.2));
                            }
                        }
                    }
                }
                for t in &mut self.tlbs {
                    let tag = if global {
                        None
                    } else if t.tagged {
                        Some(e.asid)
                    } else {
                        Some(0)
                    };
                    for &s in &t.sizes.clone() {
                        t.retain(|x| *x != (e.addr >> s, s, tag));
                    }
                }
            }
            _ => {}
        }
    }
}

/// A structure of a machine.
#[derive(Clone, Copy)]
struct Spec {
    name: &'static str,
    entries: usize,
    ways: usize,
    lru: bool,
    tagged: bool,
    serves: &'static str,
    next: &'static [&'static str],
    /// Page sizes held (none: the machine's, 4 KiB).
    page: &'static [&'static str],
}

const fn t(
    name: &'static str,
    entries: usize,
    ways: usize,
    lru: bool,
    tagged: bool,
    serves: &'static str,
    next: &'static [&'static str],
) -> Spec {
    Spec {
        name,
        entries,
        ways,
        lru,
        tagged,
        serves,
        next,
        page: &[],
    }
}

/// `s` holding the page sizes `page`.
const fn holding(s: Spec, page: &'static [&'static str]) -> Spec {
    Spec { page, ..s }
}

const MACHINES: &[&[Spec]] = &[
    &[t("dtlb", 8, 8, true, true, "data", &[])],
    &[t("u", 12, 3, false, false, "unified", &[])],
    &[
        t("itlb", 4, 2, true, true, "instruction", &["l2"]),
        t("dtlb", 4, 4, false, false, "data", &["l2"]),
        t("l2", 24, 6, true, true, "unified", &[]),
    ],
    &[
        t("utlb", 2, 2, true, false, "data", &["dtlb"]),
        t("dtlb", 6, 3, true, true, "data", &["l2"]),
        t("l2", 16, 16, false, true, "data", &[]),
        t("itlb", 3, 1, true, true, "instruction", &[]),
    ],
    // Structures whose hits change nothing (direct-mapped, FIFO) serving several kinds:
    // their fast path keeps a last page per kind.
    &[t("u", 8, 1, true, true, "unified", &[])],
    &[
        t("u", 4, 4, false, true, "unified", &["l2"]),
        t("l2", 8, 2, false, false, "unified", &[]),
    ],
    // x86: 4 KiB and 2 MiB first-level data TLBs side by side, one STLB behind all.
    &[
        t("itlb", 4, 2, true, true, "instruction", &["stlb"]),
        holding(t("dtlb", 4, 4, true, true, "data", &["stlb"]), &["4k"]),
        holding(t("dtlb2m", 2, 2, true, true, "data", &["stlb"]), &["2M"]),
        holding(t("stlb", 16, 4, true, true, "unified", &[]), &["4k", "2M"]),
    ],
    // One first level, its misses going to a 4K+2M STLB or to a 1G one.
    &[
        t("u", 4, 4, true, true, "unified", &["s", "s1g"]),
        holding(t("s", 8, 2, false, false, "unified", &[]), &["4k", "2M"]),
        holding(t("s1g", 2, 2, true, true, "unified", &[]), &["1G"]),
    ],
    // Three first-level data TLBs (4K, 2M, 1G), the 1G one with a 1G second level of its
    // own; instructions alone.
    &[
        t("i", 2, 1, true, false, "instruction", &["l2"]),
        holding(t("d4", 4, 2, false, true, "data", &["l2"]), &["4k"]),
        holding(t("d2", 2, 2, true, true, "data", &["l2"]), &["2M"]),
        holding(t("d1", 1, 1, true, true, "data", &["l2g"]), &["1G"]),
        holding(t("l2", 8, 4, true, true, "unified", &[]), &["4k", "2M"]),
        holding(t("l2g", 2, 2, false, true, "data", &[]), &["1G"]),
    ],
    // A unified 4K first level beside a data one for 2M and 1G pages.
    &[
        t("u", 4, 4, true, true, "unified", &["s"]),
        holding(t("d", 2, 2, true, false, "data", &["s"]), &["2M", "1G"]),
        holding(t("s", 8, 8, true, true, "unified", &[]), &["4k", "2M"]),
    ],
];

/// The 2 MiB region of [`MIXED`] (two pages) and its 1 GiB one (one page).
const AREA_2M: u64 = 0x40_0000;
const AREA_1G: u64 = 0x4000_0000;

/// `regions` 3: pages of four sizes, a hole across a 4 KiB page, and 4 KiB pages carved out
/// of the first 2 MiB page (the first region that holds an address wins).
const MIXED: &str = "[pages]\nregions = [{ start = 0x5800, end = 0x6800, size = 'unmapped' },\n  { start = 0x10000, end = 0x30000, size = '64k' },\n  { start = 0x420000, end = 0x440000, size = '4k' },\n  { start = 0x400000, end = 0x800000, size = '2M' },\n  { start = 0x40000000, end = 0x80000000, size = '1G' }]\n";

/// `regions`: 0, none; 1, a (4 KiB, so semantically empty) region, which turns off the
/// machine's uniform-page fast path; 2, an unmapped hole, which the fast path checks first;
/// 3, [`MIXED`] page sizes. Every path must match the model.
fn build(spec: &[Spec], regions: u8) -> (Machine, RefMachine) {
    build_with(spec, regions, [0, 0], false)
}

/// [`build`] with IPC-path prefetching of `prefetch` (user, kernel) entries per switch
/// (none: `[0, 0]`), and every structure classifying its misses if `three_c`.
fn build_with(
    spec: &[Spec],
    regions: u8,
    prefetch: [usize; 2],
    three_c: bool,
) -> (Machine, RefMachine) {
    let mut toml = String::from("[machine]\nglobal_above = \"0xffff000000000000\"\n");
    if prefetch != [0, 0] {
        toml += &format!(
            "[prefetch]\nuser_entries = {}\nkernel_entries = {}\n",
            prefetch[0], prefetch[1]
        );
    }
    if regions == 1 {
        toml += "[pages]\nregions = [{ start = 0x1000, end = 0x9000, size = '4k' }]\n";
    }
    if regions == 2 {
        toml += "[pages]\nregions = [{ start = 0x5000, end = 0x7000, size = 'unmapped' }]\n";
    }
    if regions == 3 {
        toml += MIXED;
    }
    let shift = |p: &str| match p {
        "4k" => 12,
        "2M" => 21,
        "1G" => 30,
        _ => panic!("{p}"),
    };
    for s in spec {
        toml += &format!(
            "[[tlb]]\nname='{}'\nentries={}\nways={}\npolicy='{}'\nasid={}\nserves='{}'\nnext={:?}\n",
            s.name,
            s.entries,
            s.ways,
            if s.lru { "lru" } else { "fifo" },
            s.tagged,
            s.serves,
            s.next,
        );
        if !s.page.is_empty() {
            toml += &format!("page={:?}\n", s.page);
        }
        if three_c {
            toml += "3c=true\n";
        }
    }
    let m = Machine::assemble(Some(&toml), "test", &[], &[]).unwrap();
    let tlbs = spec
        .iter()
        .map(|s| RefTlb {
            name: s.name.to_string(),
            sets: s.entries / s.ways,
            ways: s.ways,
            lru: s.lru,
            tagged: s.tagged,
            serves: match s.serves {
                "instruction" => [true, false, false],
                "data" => [false, true, true],
                _ => [true, true, true],
            },
            sizes: if s.page.is_empty() {
                vec![12]
            } else {
                s.page.iter().map(|p| shift(p)).collect()
            },
            next: s
                .next
                .iter()
                .map(|n| spec.iter().position(|o| o.name == *n).unwrap())
                .collect(),
            content: vec![Vec::new(); s.entries / s.ways],
            accesses: 0,
            misses: 0,
            full: Vec::new(),
            seen: HashSet::new(),
            classes: [0; 3],
        })
        .collect();
    let regions = match regions {
        1 => vec![(0x1000, 0x9000, Some(12))],
        2 => vec![(0x5000, 0x7000, None)],
        3 => vec![
            (0x5800, 0x6800, None),
            (0x1_0000, 0x3_0000, Some(16)),
            (0x42_0000, 0x44_0000, Some(12)),
            (AREA_2M, AREA_2M + (4 << 20), Some(21)),
            (AREA_1G, AREA_1G + (1 << 30), Some(30)),
        ],
        _ => vec![],
    };
    (
        m,
        RefMachine {
            tlbs,
            global_above: 0xffff_0000_0000_0000,
            regions,
            asid: 0,
            walks: 0,
            prefetch,
            walked: HashMap::new(),
            probes: 0,
            inserted: 0,
        },
    )
}

fn event() -> impl Strategy<Value = Event> {
    // 4 KiB-aligned addresses: low pages (some in the 64 KiB region of MIXED), 4 KiB pieces
    // of both 2 MiB pages and of the 1 GiB page (some in one 2 MiB piece), and global pages.
    let page = prop_oneof![
        4 => (0u64..24).prop_map(|p| p << 12),
        1 => (0u64..32).prop_map(|k| AREA_2M + k * 0x2_0000),
        1 => (0u64..16).prop_map(|k| AREA_1G + (k / 2) * 0x80_0000 + (k % 2) * 0x1000),
        1 => (0u64..4).prop_map(|p| 0xffff_0000_0000_0000_u64 + (p << 12)),
        // The top of the address space, where an access can run past 2^64.
        1 => (1u64..4).prop_map(|p| 0u64.wrapping_sub(p << 12))
    ];
    // Most accesses are small; some span several pages (up to 16 of 4 KiB).
    let size = prop_oneof![8 => 1u16..17, 1 => 4000u16..=u16::MAX];
    (0u8..20, page, 0u64..4096, size, 0u32..3, any::<bool>()).prop_map(
        |(k, page, off, size, asid, kernel)| {
            let addr = page + off;
            let mode = if kernel { Mode::Kernel } else { Mode::User };
            match k {
                0 => Event::control(Kind::ContextSwitch, 0, asid),
                1 if off % 2 == 0 => Event::control(Kind::TlbFlush, FLUSH_ALL, asid),
                1 => Event::control(Kind::TlbFlush, FLUSH_SPACE, asid),
                2 => Event::control(Kind::TlbFlush, page, asid),
                3 => Event::control(Kind::Unmap, page, asid),
                4..=8 => Event::reference(Kind::Fetch, addr, size)
                    .with_asid(asid)
                    .with_mode(mode),
                9..=15 => Event::reference(Kind::Load, addr, size)
                    .with_asid(asid)
                    .with_mode(mode),
                _ => Event::reference(Kind::Store, addr, size)
                    .with_asid(asid)
                    .with_mode(mode),
            }
        },
    )
}

fn check(which: usize, regions: u8, events: &[Event]) {
    check_with(which, regions, [0, 0], false, events);
}

/// The machine `which` (with `prefetch` entries per switch, classifying misses if `three_c`)
/// and its model give the same counts: every structure's accesses and misses (and classes),
/// the walks, the prefetcher's probes and insertions.
fn check_with(which: usize, regions: u8, prefetch: [usize; 2], three_c: bool, events: &[Event]) {
    let (mut m, mut r) = build_with(MACHINES[which], regions, prefetch, three_c);
    for chunk in events.chunks(7) {
        m.run_batch(chunk);
    }
    for e in events {
        r.event(e);
    }
    let l = m.ledger();
    for (i, t) in r.tlbs.iter().enumerate() {
        let c = l.total(i, |_, _, _| true);
        assert_eq!(
            (c.accesses, c.misses),
            (t.accesses, t.misses),
            "structure {}",
            t.name
        );
        if three_c {
            let classes = l.class_total(i, |_, _, _| true);
            assert_eq!(classes, t.classes, "classes of structure {}", t.name);
        }
    }
    assert_eq!(
        l.total(l.walk_index(), |_, _, _| true).misses,
        r.walks,
        "walks"
    );
    if let Some(p) = m.prefetch_json() {
        assert_eq!(
            (p["probes"].as_u64(), p["inserted"].as_u64()),
            (Some(r.probes), Some(r.inserted))
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn machine_matches_reference(which in 0..MACHINES.len(), regions in 0u8..4, events in prop::collection::vec(event(), 1..400)) {
        check(which, regions, &events);
    }

    /// With IPC-path prefetching: the same counts, and the same probes and insertions.
    #[test]
    fn prefetching_machine_matches_reference(which in 0..MACHINES.len(), regions in 0u8..4, user in 0usize..=8, kernel in 0usize..=3, events in prop::collection::vec(event(), 1..400)) {
        let prefetch = if user + kernel == 0 { [1, 0] } else { [user, kernel] };
        check_with(which, regions, prefetch, false, &events);
    }

    /// Every structure classifying its misses, with and without prefetching: the same
    /// counts and classes (the prefetcher's insertions reach the fully associative copy).
    #[test]
    fn classifying_machine_matches_reference(which in 0..MACHINES.len(), regions in 0u8..4, user in 0usize..=8, kernel in 0usize..=3, events in prop::collection::vec(event(), 1..400)) {
        check_with(which, regions, [user, kernel], true, &events);
    }
}

#[test]
fn adversarial_sweeps_match_reference() {
    for which in 0..MACHINES.len() {
        for n in [2u64, 5, 9, 17, 25, 33] {
            let events: Vec<Event> = (0..n * 6)
                .map(|i| {
                    Event::reference(
                        if i % 3 == 0 { Kind::Fetch } else { Kind::Load },
                        (i % n) * 4096,
                        4,
                    )
                })
                .collect();
            for regions in 0..4 {
                check(which, regions, &events);
            }
        }
        // Cycles over pages of every size, straddling their boundaries: 4 KiB pieces of the
        // 2 MiB and 1 GiB pages, and the last bytes of each 4 KiB page below 0x18000 (into
        // the 64 KiB region and the hole).
        for n in [3u64, 7, 12, 20] {
            let events: Vec<Event> = (0..n * 8)
                .map(|i| {
                    let k = i % n;
                    let (kind, addr) = match i % 4 {
                        0 => (Kind::Fetch, AREA_2M + k * 0x3_1000),
                        1 => (Kind::Load, AREA_1G + k * 0x41_0000),
                        2 => (Kind::Store, (k * 2 + 1) * 4096 - 4),
                        _ => (Kind::Load, AREA_2M + (1 << 21) - 8 + k * 4096),
                    };
                    Event::reference(kind, addr, 8)
                })
                .collect();
            check(which, 3, &events);
        }
    }
}

#[test]
fn siblings_for_large_pages_see_only_large_pages() {
    // The x86 machine: the 2 MiB first level is consulted only for 2 MiB and 1 GiB pages.
    let refs = |regions: u8| {
        let (mut m, _) = build(MACHINES[6], regions);
        m.run_batch(&[
            Event::reference(Kind::Load, 0x1000, 4),
            Event::reference(Kind::Load, AREA_2M + 0x1000, 4),
            Event::reference(Kind::Store, AREA_1G + 0x1000, 4),
            Event::reference(Kind::Fetch, AREA_1G + 0x2000, 4),
        ]);
        let l = m.ledger();
        (0..4)
            .map(|s| l.total(s, |_, _, _| true).accesses)
            .collect::<Vec<_>>()
    };
    assert_eq!(refs(0), [1, 3, 0, 4]);
    assert_eq!(refs(3), [1, 1, 2, 4]);
}

#[test]
fn modes_and_address_spaces_are_counted_apart() {
    let (mut m, _) = build(MACHINES[0], 0);
    m.run_batch(&[
        Event::reference(Kind::Load, 0x1000, 4),
        Event::reference(Kind::Load, 0x1000, 4)
            .with_asid(5)
            .with_mode(Mode::Kernel),
        Event::reference(Kind::Store, 0x1000, 4)
            .with_asid(5)
            .with_mode(Mode::Kernel),
    ]);
    let l = m.ledger();
    assert_eq!(l.asids(), &[0, 5]);
    assert_eq!(l.cell(0, 0, Mode::User, Kind::Load).misses, 1);
    assert_eq!(l.cell(1, 0, Mode::Kernel, Kind::Load).misses, 1);
    assert_eq!(l.cell(1, 0, Mode::Kernel, Kind::Store).misses, 0);
}

/// An access whose last 4 KiB page ends in an unmapped hole (0x5800) is translated at its
/// last byte, in the hole; a reference in the hole after it is unmapped, not a repeat of
/// that translation (the machine remembered the hole's span as the entry's).
#[test]
fn an_access_ending_in_a_hole_maps_no_more_of_it() {
    let mut a = Event::reference(Kind::Load, 0x4000, 0x1801);
    a.asid = 1;
    let mut b = Event::reference(Kind::Load, 0x5800, 1);
    b.asid = 1;
    for which in 0..MACHINES.len() {
        check_with(which, 3, [1, 0], false, &[a, b]);
        check(which, 3, &[a, b]);
    }
}
