//! Every one-pass count against per-config simulation: the real [`Tlb`] (policy LRU) driven
//! call by call, and the whole [`Machine`] driven by the same events, on random, adversarial
//! and real streams.

use super::*;
use crate::event::{Mode, NO_PADDR};
use crate::machine::Machine;
use crate::tlb::{Part, Policy, Tlb, TlbParams, NO_CTX};
use proptest::prelude::*;
use std::path::Path;

#[derive(Clone, Copy, Debug)]
enum Op {
    Access(u64, u64),
    Invalidate(u64, u64),
    Flush,
}

/// An LRU TLB of `entries` entries, `ways` ways, driven by [`Op`]s, counting misses.
struct RefTlb {
    tlb: Tlb,
    misses: u64,
}

impl RefTlb {
    fn new(entries: usize, ways: usize) -> RefTlb {
        RefTlb {
            tlb: Tlb::new(&TlbParams::new(entries, ways, Policy::Lru)).unwrap(),
            misses: 0,
        }
    }

    fn op(&mut self, op: Op) {
        match op {
            Op::Access(v, c) => {
                if !self.tlb.access(v, c, NO_CTX, Part::Upper) {
                    self.misses += 1;
                }
            }
            Op::Invalidate(v, c) => {
                self.tlb.invalidate(v, c, NO_CTX);
            }
            Op::Flush => self.tlb.flush_all(),
        }
    }
}

fn apply<E: Engine>(e: &mut E, ops: &[Op]) {
    for &op in ops {
        match op {
            Op::Access(v, c) => e.access(v, c),
            Op::Invalidate(v, c) => e.invalidate(v, c),
            Op::Flush => e.flush(),
        }
    }
}

/// Fully associative sizes checked: all small ones around the front's edge, and a spread.
fn fa_sizes(max: usize) -> Vec<usize> {
    let mut s: Vec<usize> = (1..=40).collect();
    s.extend([
        47, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 500, 1000, 1024,
    ]);
    s.extend([1500, 2048, 4095, 4096, 4097, 16383, 16384]);
    s.retain(|&n| n <= max);
    s
}

/// Check a stack-distance pass over `ops` against a fully associative LRU TLB per size.
fn check_stack(ops: &[Op], max: usize, sizes: &[usize]) {
    let mut sd = StackDistance::new(max);
    apply(&mut sd, ops);
    let r = sd.result();
    let accesses = ops.iter().filter(|o| matches!(o, Op::Access(..))).count() as u64;
    assert_eq!(r.accesses, accesses);
    let curve = r.miss_curve();
    for &n in sizes {
        let mut t = RefTlb::new(n, n);
        for &op in ops {
            t.op(op);
        }
        assert_eq!(r.misses(n), Some(t.misses), "{n} entries");
        assert_eq!(curve[n - 1], t.misses, "{n} entries (curve)");
    }
}

/// Check an all-associativity pass over `ops` against a set-associative LRU TLB per config.
fn check_all_assoc(ops: &[Op], max_sets: usize) {
    let mut aa = AllAssoc::new(max_sets);
    apply(&mut aa, ops);
    let r = aa.result();
    assert_eq!(r.sets.len(), max_sets.trailing_zeros() as usize + 1);
    for &sets in &r.sets {
        for ways in 1..=WAYS {
            let mut t = RefTlb::new(sets * ways, ways);
            for &op in ops {
                t.op(op);
            }
            assert_eq!(
                r.misses(sets, ways),
                Some(t.misses),
                "{sets} sets × {ways} ways"
            );
        }
    }
}

/// Random operations: hot pages, a wider footprint, a few contexts, occasional invalidations
/// and flushes (none when `control` is false).
fn ops(pages: u64, len: usize, control: bool) -> impl Strategy<Value = Vec<Op>> {
    let c = if control { 1 } else { 0 };
    let op = prop_oneof![
        30 => (0..8u64, 0..2u64).prop_map(|(v, c)| Op::Access(v, c)),
        30 => (0..pages, 0..2u64).prop_map(|(v, c)| Op::Access(v, c)),
        10 => (0..pages / 8 + 1).prop_map(|v| Op::Access(v * 1024, 0)),
        2 * c => (0..pages, 0..2u64).prop_map(|(v, c)| Op::Invalidate(v, c)),
        c => Just(Op::Flush),
    ];
    prop::collection::vec(op, 0..len)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn stack_matches_fully_associative_lru(ops in ops(120, 3000, false)) {
        check_stack(&ops, 256, &fa_sizes(256));
    }

    #[test]
    fn stack_matches_with_invalidations_and_flushes(ops in ops(120, 3000, true)) {
        check_stack(&ops, 256, &fa_sizes(256));
    }

    #[test]
    fn stack_with_a_small_max_distance(ops in ops(60, 1000, true), max in 1usize..40) {
        check_stack(&ops, max, &fa_sizes(max));
        let mut sd = StackDistance::new(max);
        apply(&mut sd, &ops);
        prop_assert_eq!(sd.result().misses(max + 1), None);
    }

    #[test]
    fn all_assoc_matches_set_associative_lru(ops in ops(300, 2000, false)) {
        check_all_assoc(&ops, 16);
    }

    #[test]
    fn all_assoc_matches_with_invalidations_and_flushes(ops in ops(300, 2000, true)) {
        check_all_assoc(&ops, 16);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn all_assoc_matches_up_to_1024_sets(ops in ops(5000, 4000, true)) {
        check_all_assoc(&ops, 1024);
    }
}

/// A pseudo-random stream long enough to compact the stack's trees many times, with
/// invalidations and flushes.
fn long_stream(n: usize, pages: u64, seed: u64) -> Vec<Op> {
    let mut x = seed;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = x >> 16;
        out.push(match r % 1000 {
            0 => Op::Flush,
            1..=20 => Op::Invalidate((r >> 10) % pages, 0),
            21..=500 => Op::Access((r >> 10) % 24, 0),
            _ => Op::Access((r >> 10) % pages, (r >> 40) & 1),
        });
    }
    out
}

#[test]
fn stack_survives_compaction() {
    let ops = long_stream(300_000, 6000, 7);
    check_stack(&ops, 16384, &[1, 16, 17, 100, 1000, 4096, 8000, 16384]);
    // And without flushes, so that the footprint is large when the trees compact.
    let ops: Vec<Op> = ops
        .into_iter()
        .filter(|o| !matches!(o, Op::Flush))
        .collect();
    check_stack(&ops, 16384, &[1, 16, 17, 1000, 5000, 6000, 12000]);
}

#[test]
fn stack_memory_follows_the_footprint_not_the_length() {
    let mut sd = StackDistance::new(64);
    let mut x = 1u64;
    for _ in 0..2_000_000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        sd.access((x >> 33) % 3000, 0);
    }
    assert_eq!(sd.pages(), 3000);
    let (tree, map) = sd.footprint();
    assert!(tree <= 16384 && map <= 3000, "tree {tree}, map {map}");
}

/// Loops over `n` pages, `rounds` times.
fn cyclic(n: u64, rounds: usize, stride: u64) -> Vec<Op> {
    (0..rounds)
        .flat_map(|_| (0..n).map(move |p| Op::Access(p * stride, 0)))
        .collect()
}

#[test]
fn cyclic_loops_around_each_size() {
    for n in [1u64, 2, 15, 16, 17, 18, 100, 1024, 4096] {
        let ops = cyclic(n, 4, 1);
        let sizes: Vec<usize> = [n - 1, n, n + 1, n + 2]
            .iter()
            .map(|&s| s as usize)
            .filter(|&s| s >= 1)
            .collect();
        check_stack(&ops, 8192, &sizes);
        let r = {
            let mut sd = StackDistance::new(8192);
            apply(&mut sd, &ops);
            sd.result()
        };
        // LRU's pathology: one entry too few misses every time.
        if n > 1 {
            assert_eq!(r.misses(n as usize - 1), Some(4 * n));
        }
        assert_eq!(r.misses(n as usize), Some(n));
    }
}

#[test]
fn strides_into_one_set() {
    // Every page maps to set 0 for every set count up to 1024: a loop of w + 1 pages misses
    // every time with w ways, whatever the set count.
    for n in [2u64, 4, 16, 17] {
        let ops = cyclic(n, 5, 1024);
        check_all_assoc(&ops, 1024);
        let mut aa = AllAssoc::new(1024);
        apply(&mut aa, &ops);
        let r = aa.result();
        for &s in &r.sets {
            assert_eq!(r.misses(s, n as usize - 1), Some(5 * n));
        }
    }
    // Pages that share a set only at small set counts.
    for stride in [1u64, 3, 64, 96, 513] {
        check_all_assoc(&cyclic(40, 4, stride), 1024);
    }
}

#[test]
fn alternating_pages_take_the_shortcut_exactly() {
    // Two pages used in turn (code and data), interleaved with a third now and then, and
    // invalidations of each.
    let mut ops = Vec::new();
    for i in 0..3000u64 {
        ops.push(Op::Access(0x400, 0));
        ops.push(Op::Access(0x1000 + (i / 500) * 0x11, 0));
        if i % 7 == 0 {
            ops.push(Op::Access(0x400 + 1024 * (i % 5), 0));
        }
        if i % 331 == 0 {
            ops.push(Op::Invalidate(0x400, 0));
        }
        if i % 977 == 0 {
            ops.push(Op::Invalidate(0x1000 + (i / 500) * 0x11, 0));
        }
    }
    check_all_assoc(&ops, 1024);
    check_stack(&ops, 64, &fa_sizes(64));
}

// ---- Through the event driver, against the whole machine ----

/// The machine with one LRU TLB that `opts` describes.
fn machine(entries: usize, ways: usize, opts: &Options) -> Machine {
    let serves = match opts.kinds {
        [true, false, false] => "instruction",
        [false, true, true] => "data",
        [true, true, true] => "unified",
        k => panic!("no machine serves {k:?}"),
    };
    let page = format!("{}k", 1u64 << (opts.page_shift - 10));
    let flag = format!(
        "t:entries={entries},ways={ways},policy=lru,page={page},serves={serves},asid={}",
        opts.tagged
    );
    let straddle = if opts.split { "split" } else { "first" };
    Machine::assemble(
        None,
        "t",
        &[flag],
        &[
            format!("machine.straddle={straddle}"),
            format!("pages.size={page}"),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// (accesses, misses) of the machine's TLB after `events`.
fn machine_counts(entries: usize, ways: usize, opts: &Options, events: &[Event]) -> (u64, u64) {
    let mut m = machine(entries, ways, opts);
    for chunk in events.chunks(BATCH) {
        m.run_batch(chunk);
    }
    let c = m.ledger().total(0, |_, _, _| true);
    (c.accesses, c.misses)
}

fn check_events(events: &[Event], opts: &Options, fa: &[usize], max_sets: usize) {
    let mut engines = (StackDistance::new(4096), AllAssoc::new(max_sets));
    let mut feeder = Feeder::new(opts.clone());
    for chunk in events.chunks(7) {
        feeder.feed(&mut engines, chunk);
    }
    let (s, a) = (engines.0.result(), engines.1.result());
    assert_eq!(s.accesses, a.accesses);
    for &n in fa {
        let (acc, miss) = machine_counts(n, n, opts, events);
        assert_eq!(s.accesses, acc, "{opts:?}");
        assert_eq!(s.misses(n), Some(miss), "{n} entries, {opts:?}");
    }
    for &sets in &a.sets {
        for ways in 1..=WAYS {
            let (acc, miss) = machine_counts(sets * ways, ways, opts, events);
            assert_eq!(a.accesses, acc);
            assert_eq!(
                a.misses(sets, ways),
                Some(miss),
                "{sets} sets × {ways} ways, {opts:?}"
            );
        }
    }
}

fn event() -> impl Strategy<Value = Event> {
    let kind = prop_oneof![Just(Kind::Fetch), Just(Kind::Load), Just(Kind::Store)];
    // Mostly small accesses, some over many pages; a few pages at the top of the address
    // space, where an access can run past 2^64.
    let size = prop_oneof![12 => 1..16u16, 1 => 4000..=u16::MAX];
    let page = prop_oneof![20 => 0..40u64, 1 => (u64::MAX >> 12) - 2..=u64::MAX >> 12];
    let reference = (kind, page, 0..4096u64, size, 0..3u32, any::<bool>()).prop_map(
        |(kind, page, off, size, asid, kernel)| Event {
            addr: page * 4096 + if off % 4 == 0 { 4096 - 4 } else { off },
            paddr: NO_PADDR,
            asid,
            size,
            kind,
            mode: if kernel { Mode::Kernel } else { Mode::User },
        },
    );
    let control = (0..10u8, 0..40u64, 0..3u32).prop_map(|(k, page, asid)| {
        let kind = match k {
            0..=2 => Kind::ContextSwitch,
            3 => Kind::Marker,
            4 => Kind::Map,
            5 => Kind::Unmap,
            6 => Kind::Protect,
            _ => Kind::TlbFlush,
        };
        let addr = match k {
            8 => FLUSH_ALL,
            9 => FLUSH_SPACE,
            _ => page * 4096,
        };
        Event::control(kind, addr, asid)
    });
    prop_oneof![40 => reference, 1 => control]
}

fn options() -> impl Strategy<Value = Options> {
    (
        prop_oneof![
            Just([true, true, true]),
            Just([false, true, true]),
            Just([true, false, false])
        ],
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(12u32), Just(13u32)],
    )
        .prop_map(|(kinds, tagged, split, page_shift)| Options {
            page_shift,
            kinds,
            tagged,
            split,
        })
}

proptest! {
    // 24 cases once let a defect of the machine's global test at the top byte through for
    // many runs (a seed found it; its regression is kept): enough cases to meet such seeds.
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn events_match_the_machine(
        events in prop::collection::vec(event(), 0..1500),
        opts in options(),
    ) {
        check_events(&events, &opts, &[1, 2, 3, 8, 16, 17, 24, 40], 8);
    }
}

fn sortprog() -> Vec<Event> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sortprog.lackey.zst");
    let mut src = crate::trace::open(&path, None).unwrap();
    let (mut all, mut batch) = (Vec::new(), Vec::new());
    while src.next_batch(&mut batch).unwrap() {
        all.extend_from_slice(&batch);
    }
    all
}

#[test]
fn real_trace_matches_the_machine() {
    let events = sortprog();
    // 198,233 fetches, 26,412 loads, 28,577 stores, and 25 modifies (a load and a store).
    assert_eq!(events.len(), 253_272);
    let fa: Vec<usize> = (1..=24).chain([32, 48, 64, 128, 256]).collect();
    check_events(&events, &Options::default(), &fa, 1024);
    let data = Options {
        kinds: [false, true, true],
        ..Options::default()
    };
    check_events(&events, &data, &[1, 4, 16, 17, 64], 64);
}

#[test]
fn run_helpers_read_a_trace() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sortprog.lackey.zst");
    let opts = Options::default();
    let s = run_stack(
        crate::trace::open(&path, None).unwrap().as_mut(),
        &opts,
        DEFAULT_MAX_DISTANCE,
    )
    .unwrap();
    let a = run_all_assoc(
        crate::trace::open(&path, None).unwrap().as_mut(),
        &opts,
        DEFAULT_MAX_SETS,
    )
    .unwrap();
    let events = sortprog();
    assert_eq!(s.misses(64), Some(machine_counts(64, 64, &opts, &events).1));
    assert_eq!(
        a.misses(16, 4),
        Some(machine_counts(64, 4, &opts, &events).1)
    );
    // Misses never grow with size, and the largest sizes miss only cold.
    let curve = s.miss_curve();
    assert_eq!(curve.len(), DEFAULT_MAX_DISTANCE);
    assert!(curve.windows(2).all(|w| w[0] >= w[1]));
    let j = s.to_json();
    assert_eq!(j["misses"][63], curve[63]);
    assert_eq!(j["accesses"], s.accesses);
    let j = a.to_json();
    assert_eq!(j["configs"].as_array().unwrap().len(), 176);
    assert_eq!(j["configs"][0]["misses"], a.misses(1, 1).unwrap());
}

#[test]
fn run_helpers_refuse_bad_arguments() {
    let mut src = crate::workload::Synthetic::new(10, 1, 4, 4);
    let opts = Options::default();
    let e = |r: crate::Result<()>| r.unwrap_err().to_string();
    assert!(e(run_stack(&mut src, &opts, 0).map(|_| ())).contains("max_distance"));
    assert!(e(run_all_assoc(&mut src, &opts, 48).map(|_| ())).contains("max_sets"));
    let bad = Options {
        page_shift: 64,
        ..Options::default()
    };
    assert!(e(run_stack(&mut src, &bad, 16).map(|_| ())).contains("page_shift"));
    let none = Options {
        kinds: [false; 3],
        ..Options::default()
    };
    assert!(e(run_all_assoc(&mut src, &none, 16).map(|_| ())).contains("kinds"));
}

#[test]
fn pages_counts_the_stack_through_invalidations_and_flushes() {
    let mut sd = StackDistance::new(64);
    for p in 0..100 {
        sd.access(p, 0);
    }
    assert_eq!(sd.pages(), 100);
    sd.invalidate(99, 0); // in the front
    sd.invalidate(3, 0); // deep
    sd.invalidate(3, 1); // not there
    assert_eq!(sd.pages(), 98);
    sd.access(3, 0);
    assert_eq!(sd.pages(), 99);
    sd.flush();
    assert_eq!(sd.pages(), 0);
    sd.access(5, 0);
    sd.access(6, 0);
    assert_eq!(sd.pages(), 2);
    let r = sd.result();
    // Every access so far was the first to its page since the start, its invalidation or
    // the flush.
    assert_eq!(r.cold, r.accesses);
}

#[test]
fn the_cpus_a_trace_names_are_noted_and_said() {
    let opts = Options {
        page_shift: 12,
        kinds: [true, true, true],
        tagged: true,
        split: false,
    };
    let load = |a| Event::reference(Kind::Load, a, 8);
    let mut f = Feeder::new(opts.clone());
    let mut s = StackDistance::new(16);
    f.feed(
        &mut s,
        &[
            load(0x1000),
            Event::on_cpu(3),
            load(0x2000),
            Event::on_cpu(0),
        ],
    );
    assert_eq!((f.other_cpu, f.references), (3, 2));
    let mut one = Feeder::new(opts);
    one.feed(&mut s, &[Event::on_cpu(0), load(0x1000)]);
    assert_eq!(one.other_cpu, 0);
    let answer = |other_cpu| crate::onepass::FamilyAnswer {
        path: "t".into(),
        format: "native",
        references: 2,
        instructions: 0,
        straddles: 0,
        wrapped: 0,
        other_cpu,
        structure: "t".into(),
        page: "4K".into(),
        accesses: 2,
        geometries: vec![],
        methods: vec![],
        misses: vec![],
    };
    assert!(answer(3)
        .warnings()
        .iter()
        .any(|w| w.starts_with("cpus:") && w.contains("CPU 3")));
    assert!(answer(0).warnings().is_empty());
}
