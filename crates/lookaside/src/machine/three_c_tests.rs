use super::tests::{run_spec, MACH3};
use super::*;
use proptest::prelude::*;
use std::collections::HashSet;

/// One LRU structure by brute force: per set its keys, least recent first.
struct Lru {
    sets: Vec<Vec<(u32, u64)>>,
    ways: usize,
}

impl Lru {
    fn new(entries: usize, ways: usize) -> Lru {
        Lru {
            sets: vec![Vec::new(); entries / ways],
            ways,
        }
    }

    /// Access `(asid, page)`; returns whether it hit.
    fn access(&mut self, key: (u32, u64)) -> bool {
        let n = self.sets.len() as u64;
        let set = &mut self.sets[(key.1 % n) as usize];
        let hit = match set.iter().position(|&k| k == key) {
            Some(i) => {
                set.remove(i);
                true
            }
            None => {
                if set.len() == self.ways {
                    set.remove(0);
                }
                false
            }
        };
        set.push(key);
        hit
    }
}

/// A structure and its brute-force classifier: the structure, a fully associative LRU
/// shadow of its size, the pages ever touched; counts per (kind, mode, asid) of
/// accesses, misses and each class.
struct Classifier {
    real: Lru,
    full: Lru,
    seen: HashSet<(u32, u64)>,
    counts: std::collections::BTreeMap<(usize, usize, u32), [u64; 5]>,
}

impl Classifier {
    fn new(entries: usize, ways: usize) -> Classifier {
        Classifier {
            real: Lru::new(entries, ways),
            full: Lru::new(entries, entries),
            seen: HashSet::new(),
            counts: Default::default(),
        }
    }

    /// Returns whether it missed.
    fn access(&mut self, kind: usize, mode: usize, key: (u32, u64)) -> bool {
        let hit = self.real.access(key);
        let full_hit = self.full.access(key);
        let first = self.seen.insert(key);
        let c = self.counts.entry((kind, mode, key.0)).or_default();
        c[0] += 1;
        if !hit {
            c[1] += 1;
            c[2 + if full_hit {
                2
            } else if first {
                0
            } else {
                1
            }] += 1;
        }
        !hit
    }

    /// Sum of the counts `keep` accepts: accesses, misses, compulsory, capacity,
    /// conflict.
    fn total(&self, keep: impl Fn(usize, usize, u32) -> bool) -> [u64; 5] {
        let mut t = [0; 5];
        for (&(k, m, a), c) in &self.counts {
            if keep(k, m, a) {
                for (x, y) in t.iter_mut().zip(c) {
                    *x += y;
                }
            }
        }
        t
    }
}

fn fields(j: &serde_json::Value) -> [u64; 5] {
    ["accesses", "misses", "compulsory", "capacity", "conflict"].map(|f| j[f].as_u64().unwrap_or(0))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The classes of a two-level TLB's misses, per reference, equal a brute-force
    /// per-reference classifier (compulsory: the first touch of a page of an address
    /// space; capacity: a fully associative LRU structure of the same size misses too;
    /// conflict otherwise), in total and by kind, mode and address space; and
    /// classifying changes no hit or miss.
    #[test]
    fn tlb_misses_are_classified_per_reference(
        d_log in 0u32..5,
        d_ways_log in 0u32..3,
        s_log in 2u32..6,
        pages in 1u64..40,
        refs in prop::collection::vec((0u8..3, 0u64..48, 0u32..3, any::<bool>()), 1..500),
    ) {
        // Few pages, so that structures fill and kinds interleave on the same pages.
        let refs: Vec<(u8, u64, u32, bool)> =
            refs.iter().map(|&(k, p, a, m)| (k, p % pages, a % 2, m)).collect();
        let d_entries = 1usize << d_log;
        let d_ways = 1usize << d_ways_log.min(d_log);
        let s_entries = 1usize << s_log;
        let flags = |three_c: &str| {
            vec![
                format!("dtlb:entries={d_entries},ways={d_ways},serves=unified,next=stlb{three_c}"),
                format!("stlb:entries={s_entries},ways=2{three_c}"),
            ]
        };
        let events: Vec<Event> = refs
            .iter()
            .map(|&(k, page, asid, kernel)| {
                let kind = [Kind::Fetch, Kind::Load, Kind::Store][k as usize];
                let mode = if kernel { Mode::Kernel } else { Mode::User };
                Event::reference(kind, (page << 12) | 8, 4).with_asid(asid).with_mode(mode)
            })
            .collect();
        let run = |f: Vec<String>| {
            let mut m = Machine::assemble(None, "t", &f, &[]).unwrap();
            m.run_batch(&events);
            crate::report::result_json(&m, &Default::default())
        };
        let with = run(flags(",3c=yes"));
        let without = run(flags(""));
        let mut d = Classifier::new(d_entries, d_ways);
        let mut s = Classifier::new(s_entries, 2);
        for (&(k, page, asid, kernel), _) in refs.iter().zip(&events) {
            if d.access(k as usize, kernel as usize, (asid, page)) {
                s.access(k as usize, kernel as usize, (asid, page));
            }
        }
        for (name, c) in [("dtlb", &d), ("stlb", &s)] {
            let j = &with["structures"][name];
            prop_assert_eq!(fields(j), c.total(|_, _, _| true), "{}", name);
            prop_assert_eq!(&j["misses"], &without["structures"][name]["misses"]);
            prop_assert_eq!(&j["accesses"], &without["structures"][name]["accesses"]);
            for (k, kind) in Kind::REFS.iter().enumerate() {
                let want = c.total(|kk, _, _| kk == k);
                if want[0] > 0 {
                    prop_assert_eq!(fields(&j["by_kind"][kind.name()]), want);
                }
            }
            for (m, mode) in ["user", "kernel"].iter().enumerate() {
                let want = c.total(|_, mm, _| mm == m);
                if want[0] > 0 {
                    prop_assert_eq!(fields(&j["by_mode"][*mode]), want);
                }
            }
            for asid in 0..2u32 {
                let want = c.total(|_, _, a| a == asid);
                if want[0] > 0 {
                    prop_assert_eq!(fields(&j["by_asid"][asid.to_string()]), want);
                }
            }
        }
        // Compulsory misses are the distinct pages (of an address space) touched.
        let distinct = refs.iter().map(|r| (r.2, r.1)).collect::<HashSet<_>>().len() as u64;
        prop_assert_eq!(with["structures"]["dtlb"]["compulsory"].as_u64(), Some(distinct));
    }
}

/// The software-refilled TLB classifies its misses through the machine: every miss has a
/// class, and the counts and traps are those without classifying; so does a micro-TLB in
/// front of it.
#[test]
fn a_software_refilled_tlb_classifies_its_misses() {
    let spec = "workload:os,structure=microkernel,syscalls=300,seed=2";
    let run = |tlbs: &[String], sets: &[String]| {
        run_spec(
            &mut Machine::assemble(Some(MACH3), "p", tlbs, sets).unwrap(),
            spec,
        )
    };
    let with = run(&[], &["tlb.tlb.3c=true".into()]);
    let without = run(&[], &[]);
    let (t, plain) = (&with["structures"]["tlb"], &without["structures"]["tlb"]);
    for k in ["accesses", "misses"] {
        assert_eq!(t[k], plain[k], "{k}");
    }
    assert_eq!(with["traps"], without["traps"]);
    let class = |k: &str| t[k].as_u64().unwrap();
    let classes = class("compulsory") + class("capacity") + class("conflict");
    assert_eq!(classes, class("misses"));
    assert!(class("compulsory") > 0 && class("capacity") > 0);
    // A micro-TLB in front classifies its own misses too.
    let micro = run(
        &["u:entries=4,serves=instruction,next=tlb,3c=yes".into()],
        &[],
    );
    let u = &micro["structures"]["u"];
    let of = |k: &str| u[k].as_u64().unwrap();
    assert!(of("misses") > 0);
    assert_eq!(
        of("compulsory") + of("capacity") + of("conflict"),
        of("misses")
    );
}
