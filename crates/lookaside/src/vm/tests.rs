//! Page-mapping policies: persistence, uniqueness while memory lasts, colours, and each
//! policy's order, on random streams of first touches.

use super::*;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

const PAGE: u32 = 12;

fn mapper(policy: Mapping, frames: u64, colours: u64, seed: u64) -> PageMapper {
    PageMapper::new(policy, PAGE, frames << PAGE, colours << PAGE, seed).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Every policy gives a page the same frame every time, distinct pages distinct frames
    /// while memory lasts, and (deterministic) the page's own colour.
    #[test]
    fn frames_persist_and_are_unique(
        policy in proptest::sample::select(vec![
            Mapping::Deterministic, Mapping::Random, Mapping::BinHopping, Mapping::Sequential,
        ]),
        touches in prop::collection::vec((0u32..4, 0u64..200), 1..300),
        seed in any::<u64>(),
    ) {
        let (frames, colours) = (4096, 16); // room in every colour
        let mut m = mapper(policy, frames, colours, seed);
        let mut seen: HashMap<(u32, u64), u64> = HashMap::new();
        let mut owners: HashSet<u64> = HashSet::new();
        for &(asid, vpn) in &touches {
            let f = m.frame(asid, vpn);
            prop_assert!(f < frames);
            match seen.get(&(asid, vpn)) {
                Some(&old) => prop_assert_eq!(f, old, "page ({}, {}) moved", asid, vpn),
                None => {
                    prop_assert!(owners.insert(f), "frame {} given twice", f);
                    seen.insert((asid, vpn), f);
                    if policy == Mapping::Deterministic {
                        prop_assert_eq!(f % colours, vpn % colours);
                    }
                }
            }
        }
        prop_assert_eq!(m.pages(), seen.len() as u64);
        prop_assert_eq!(m.reused(), 0);
    }
}

#[test]
fn sequential_takes_frames_in_order_and_bin_hopping_takes_colours_in_order() {
    let mut s = mapper(Mapping::Sequential, 64, 8, 0);
    let got: Vec<u64> = [9, 3, 100, 4].iter().map(|&v| s.frame(1, v)).collect();
    assert_eq!(got, [0, 1, 2, 3]);
    let mut b = mapper(Mapping::BinHopping, 64, 8, 0);
    let colours: Vec<u64> = (0..10).map(|v| b.frame(1, v * 8) % 8).collect();
    assert_eq!(colours, [0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
}

#[test]
fn random_is_seeded() {
    let run = |seed| {
        let mut m = mapper(Mapping::Random, 1024, 16, seed);
        (0..50).map(|v| m.frame(0, v)).collect::<Vec<_>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
}

#[test]
fn deterministic_depends_on_the_space_and_page_not_on_order() {
    let mut a = mapper(Mapping::Deterministic, 1 << 16, 16, 0);
    let mut b = mapper(Mapping::Deterministic, 1 << 16, 16, 0);
    let pages = [(1u32, 5u64), (2, 5), (1, 6000), (3, 77)];
    let fa: Vec<u64> = pages.iter().map(|&(s, v)| a.frame(s, v)).collect();
    let fb: Vec<u64> = pages.iter().rev().map(|&(s, v)| b.frame(s, v)).collect();
    assert_eq!(fa, fb.into_iter().rev().collect::<Vec<_>>());
    assert_ne!(fa[0], fa[1], "two spaces, same page: different frames");
}

#[test]
fn identity_and_trace() {
    let mut i = mapper(Mapping::Identity, 1, 1, 0);
    assert_eq!(
        i.translate(3, 0xdead_beef, crate::event::NO_PADDR),
        0xdead_beef
    );
    let mut t = mapper(Mapping::Trace, 64, 1, 0);
    assert_eq!(t.translate(3, 0x1234, 0x9_9234), 0x9_9234);
    assert_eq!(t.untraced(), 0);
    let p = t.translate(3, 0x5678, crate::event::NO_PADDR);
    assert_eq!(p & 0xfff, 0x678);
    assert_eq!(t.untraced(), 1);
}

#[test]
fn exhausted_memory_reuses_frames_and_says_so() {
    let mut m = mapper(Mapping::Sequential, 4, 1, 0);
    let got: Vec<u64> = (0..6).map(|v| m.frame(0, v)).collect();
    assert_eq!(got, [0, 1, 2, 3, 0, 1]);
    assert_eq!(m.reused(), 2);
}

#[test]
fn bad_memory_names_the_field() {
    let e = PageMapper::new(Mapping::Random, PAGE, 100, 4096, 0).unwrap_err();
    assert_eq!(e.field, "memory");
    let e = PageMapper::new(Mapping::Random, PAGE, 5 << PAGE, 4 << PAGE, 0).unwrap_err();
    assert_eq!(e.field, "memory");
}

/// `m` with base pages below 1 GiB and pages of `2^shift` bytes from there on.
fn sized(mut m: PageMapper, shift: u32) -> PageMapper {
    m.set_page_sizes(PageSizes {
        default: Some(PAGE),
        regions: vec![(1 << 30, u64::MAX, None, Some(shift))],
        has_holes: false,
    });
    m
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Base pages and large pages (smaller than, equal to and larger than the colour span) in
    /// one memory: a large page is a run of frames aligned to its size, its parts in order;
    /// every page keeps its frames; no frame is given twice while memory lasts; deterministic
    /// keeps colours (a run's first frame has its first part's colour).
    #[test]
    fn large_pages_are_aligned_runs(
        policy in proptest::sample::select(vec![
            Mapping::Deterministic, Mapping::Random, Mapping::BinHopping, Mapping::Sequential,
        ]),
        order in proptest::sample::select(vec![2u32, 4, 6]),
        touches in prop::collection::vec((0u32..4, any::<bool>(), 0u64..200, 0u64..1 << 20), 1..300),
        seed in any::<u64>(),
    ) {
        let (frames, colours) = (1u64 << 16, 16);
        let shift = PAGE + order;
        let n = 1u64 << order;
        let mut m = sized(mapper(policy, frames, colours, seed), shift);
        let mut base: HashMap<(u32, u64), u64> = HashMap::new();
        let mut runs: HashMap<(u32, u64), u64> = HashMap::new();
        let mut owners: HashSet<u64> = HashSet::new();
        for &(asid, large, page, offset) in &touches {
            if !large {
                // Base pages lie below the large pages' addresses.
                let f = m.frame(asid, page);
                match base.get(&(asid, page)) {
                    Some(&old) => prop_assert_eq!(f, old),
                    None => {
                        prop_assert!(owners.insert(f), "frame {} given twice", f);
                        base.insert((asid, page), f);
                    }
                }
                continue;
            }
            let lpn = (1 << 30 >> shift) + page % 8;
            let vaddr = (lpn << shift) | (offset & ((1 << shift) - 1));
            let p = m.translate(asid, vaddr, crate::event::NO_PADDR);
            let first = match runs.get(&(asid, lpn)) {
                Some(&b) => b,
                None => {
                    let b = m.frame_given(asid, vaddr >> PAGE).unwrap() - (vaddr >> PAGE) % n;
                    prop_assert_eq!(b % n, 0, "run at {} of {} frames", b, n);
                    for f in b..b + n {
                        prop_assert!(owners.insert(f), "frame {} given twice", f);
                    }
                    if policy == Mapping::Deterministic && n < colours {
                        prop_assert_eq!(b % colours, (lpn << order) % colours);
                    }
                    runs.insert((asid, lpn), b);
                    b
                }
            };
            prop_assert_eq!(p, (first << PAGE) + (vaddr & ((1 << shift) - 1)));
            prop_assert_eq!(m.frame_given(asid, vaddr >> PAGE), Some(p >> PAGE));
        }
        prop_assert_eq!(m.pages(), (base.len() + runs.len()) as u64);
        prop_assert_eq!(m.reused(), 0);
    }
}

#[test]
fn runs_follow_each_policys_order_and_are_handed_out_again_when_none_is_free() {
    let large = |m: &mut PageMapper, lpn: u64| m.translate(1, (1 << 30) + (lpn << 14), 0) >> PAGE;
    // Sequential: the next free aligned run after the cursor (frame 1 is taken: run 0 is not
    // free).
    let mut s = sized(mapper(Mapping::Sequential, 64, 8, 0), 14);
    assert_eq!(s.frame(1, 0), 0);
    assert_eq!(large(&mut s, 5), 4);
    assert_eq!(s.frame(1, 1), 8);
    assert_eq!(large(&mut s, 9), 12);
    // Bin hopping with runs of 4 frames and 8 colours: colours 0-3, then 4-7, then 0-3.
    let mut b = sized(mapper(Mapping::BinHopping, 64, 8, 0), 14);
    let colours: Vec<u64> = (0..3).map(|l| large(&mut b, l) % 8).collect();
    assert_eq!(colours, [0, 4, 0]);
    // Eight frames: one base page in each half leaves no free run of 4.
    let mut w = sized(mapper(Mapping::Sequential, 8, 1, 0), 14);
    assert_eq!((w.frame(1, 0), w.frame(1, 1)), (0, 1));
    w.cursor = 5;
    w.frame(1, 2);
    assert_eq!(w.reused(), 0);
    assert_eq!(
        large(&mut w, 3),
        0,
        "memory handed out again from its start"
    );
    assert_eq!(w.reused(), 1);
}
