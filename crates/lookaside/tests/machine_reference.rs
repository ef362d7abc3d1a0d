//! The whole machine — hierarchy wiring, address spaces, global pages, straddling accesses,
//! flushes and shootdowns — against a brute-force model written from the semantics in
//! `machine.rs`'s module doc, on random and adversarial event streams.

use lookaside::event::{Event, Kind, Mode, FLUSH_ALL};
use lookaside::machine::Machine;
use proptest::prelude::*;

/// One structure of the model: per set a Vec in recency (LRU) or insertion (FIFO) order, front
/// = next victim. Entries are (vpn, asid-or-None-for-global).
#[derive(Clone, Debug)]
struct RefTlb {
    name: String,
    sets: usize,
    ways: usize,
    lru: bool,
    tagged: bool,
    serves: [bool; 3],
    next: Option<usize>,
    content: Vec<Vec<(u64, Option<u32>)>>,
    accesses: u64,
    misses: u64,
}

impl RefTlb {
    fn lookup_fill(&mut self, vpn: u64, tag: Option<u32>) -> bool {
        let set = &mut self.content[(vpn % self.sets as u64) as usize];
        if let Some(i) = set.iter().position(|e| *e == (vpn, tag)) {
            if self.lru {
                let e = set.remove(i);
                set.push(e);
            }
            return true;
        }
        if set.len() == self.ways {
            set.remove(0);
        }
        set.push((vpn, tag));
        false
    }
}

struct RefMachine {
    tlbs: Vec<RefTlb>,
    /// An unmapped range: references starting in it are not translated, nor is the part of
    /// a straddling reference that falls in it.
    hole: Option<(u64, u64)>,
    global_above: u64,
    asid: u32,
    walks: u64,
}

impl RefMachine {
    fn root(&self, kind: Kind) -> Option<usize> {
        let nexts: Vec<usize> = self.tlbs.iter().filter_map(|t| t.next).collect();
        (0..self.tlbs.len()).find(|&i| self.tlbs[i].serves[kind as usize] && !nexts.contains(&i))
    }

    fn translate(&mut self, addr: u64, kind: Kind) {
        let mut level = self.root(kind);
        let had_root = level.is_some();
        while let Some(i) = level {
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
            if t.lookup_fill(addr >> 12, tag) {
                return;
            }
            t.misses += 1;
            level = t.next;
        }
        if had_root {
            self.walks += 1;
        }
    }

    fn switch(&mut self, asid: u32) {
        if asid != self.asid {
            self.asid = asid;
            for t in self.tlbs.iter_mut().filter(|t| !t.tagged) {
                for s in &mut t.content {
                    s.retain(|e| e.1.is_none());
                }
            }
        }
    }

    fn event(&mut self, e: &Event) {
        match e.kind {
            Kind::Fetch | Kind::Load | Kind::Store => {
                self.switch(e.asid);
                let in_hole = |a: u64| self.hole.is_some_and(|(s, x)| a >= s && a < x);
                if in_hole(e.addr) {
                    return;
                }
                let last = e.addr + e.size.max(1) as u64 - 1;
                let second = last >> 12 != e.addr >> 12 && !in_hole(last);
                self.translate(e.addr, e.kind);
                if second {
                    self.translate(last, e.kind);
                }
            }
            Kind::ContextSwitch => self.switch(e.asid),
            Kind::TlbFlush if e.addr == FLUSH_ALL => {
                for t in &mut self.tlbs {
                    t.content.iter_mut().for_each(Vec::clear);
                }
            }
            Kind::TlbFlush | Kind::Unmap | Kind::Protect => {
                let global = e.addr >= self.global_above;
                for t in &mut self.tlbs {
                    let tag = if global {
                        None
                    } else if t.tagged {
                        Some(e.asid)
                    } else {
                        Some(0)
                    };
                    for s in &mut t.content {
                        s.retain(|x| *x != (e.addr >> 12, tag));
                    }
                }
            }
            _ => {}
        }
    }
}

/// A machine spec: (name, entries, ways, lru?, tagged?, serves, next)
type Spec = (
    &'static str,
    usize,
    usize,
    bool,
    bool,
    &'static str,
    Option<&'static str>,
);

const MACHINES: &[&[Spec]] = &[
    &[("dtlb", 8, 8, true, true, "data", None)],
    &[("u", 12, 3, false, false, "unified", None)],
    &[
        ("itlb", 4, 2, true, true, "instruction", Some("l2")),
        ("dtlb", 4, 4, false, false, "data", Some("l2")),
        ("l2", 24, 6, true, true, "unified", None),
    ],
    &[
        ("utlb", 2, 2, true, false, "data", Some("dtlb")),
        ("dtlb", 6, 3, true, true, "data", Some("l2")),
        ("l2", 16, 16, false, true, "data", None),
        ("itlb", 3, 1, true, true, "instruction", None),
    ],
    // Structures whose hits change nothing (direct-mapped, FIFO) serving several kinds:
    // their fast path keeps a last page per kind.
    &[("u", 8, 1, true, true, "unified", None)],
    &[
        ("u", 4, 4, false, true, "unified", Some("l2")),
        ("l2", 8, 2, false, false, "unified", None),
    ],
];

/// `regions`: 0, none; 1, a (4 KiB, so semantically empty) region, which turns off the
/// machine's uniform-page fast path; 2, an unmapped hole, which the fast path checks first.
/// Every path must match the model.
fn build(spec: &[Spec], regions: u8) -> (Machine, RefMachine) {
    let mut toml = String::from("[machine]\nglobal_above = \"0xffff000000000000\"\n");
    if regions == 1 {
        toml += "[pages]\nregions = [{ start = 0x1000, end = 0x9000, size = '4k' }]\n";
    }
    if regions == 2 {
        toml += "[pages]\nregions = [{ start = 0x5000, end = 0x7000, size = 'unmapped' }]\n";
    }
    for (name, entries, ways, lru, tagged, serves, next) in spec {
        toml += &format!(
            "[[tlb]]\nname='{name}'\nentries={entries}\nways={ways}\npolicy='{}'\nasid={tagged}\nserves='{serves}'\n",
            if *lru { "lru" } else { "fifo" }
        );
        if let Some(n) = next {
            toml += &format!("next='{n}'\n");
        }
    }
    let m = Machine::assemble(Some(&toml), "test", &[], &[]).unwrap();
    let tlbs = spec
        .iter()
        .map(|(name, entries, ways, lru, tagged, serves, next)| RefTlb {
            name: name.to_string(),
            sets: entries / ways,
            ways: *ways,
            lru: *lru,
            tagged: *tagged,
            serves: match *serves {
                "instruction" => [true, false, false],
                "data" => [false, true, true],
                _ => [true, true, true],
            },
            next: next.map(|n| spec.iter().position(|s| s.0 == n).unwrap()),
            content: vec![Vec::new(); entries / ways],
            accesses: 0,
            misses: 0,
        })
        .collect();
    (
        m,
        RefMachine {
            tlbs,
            global_above: 0xffff_0000_0000_0000,
            hole: (regions == 2).then_some((0x5000, 0x7000)),
            asid: 0,
            walks: 0,
        },
    )
}

fn event() -> impl Strategy<Value = Event> {
    let page = prop_oneof![
        0u64..24,
        (0u64..4).prop_map(|p| (0xffff_0000_0000_0000_u64 >> 12) + p)
    ];
    (0u8..20, page, 0u64..4096, 1u16..17, 0u32..3, any::<bool>()).prop_map(
        |(k, page, off, size, asid, kernel)| {
            let addr = page * 4096 + off;
            let mode = if kernel { Mode::Kernel } else { Mode::User };
            match k {
                0 => Event::control(Kind::ContextSwitch, 0, asid),
                1 => Event::control(Kind::TlbFlush, FLUSH_ALL, asid),
                2 => Event::control(Kind::TlbFlush, page * 4096, asid),
                3 => Event::control(Kind::Unmap, page * 4096, asid),
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
    let (mut m, mut r) = build(MACHINES[which], regions);
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
    }
    assert_eq!(
        l.total(l.walk_index(), |_, _, _| true).misses,
        r.walks,
        "walks"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn machine_matches_reference(which in 0..MACHINES.len(), regions in 0u8..3, events in prop::collection::vec(event(), 1..400)) {
        check(which, regions, &events);
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
            for regions in 0..3 {
                check(which, regions, &events);
            }
        }
    }
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
