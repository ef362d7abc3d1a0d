//! Every organisation against its reference model on random and adversarial streams of
//! touches (a fault maps the page, FIFO frame replacement unmaps the oldest), lookups and
//! unmaps; and the storage and chain-length arithmetic of Huck & Hays.

use proptest::prelude::*;

use super::reference::{Model, RefFront, RefHashed, RefInverted, RefRadix};
use super::*;

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Touch: look up, and on a fault map the page (of 4 KiB, or 2 MiB when `big`).
    Touch(u32, u64, bool),
    Unmap(u32, u64),
}

fn ops(spaces: u32, vpns: u64) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        prop_oneof![
            8 => (0..spaces, 0..vpns, prop::bool::weighted(0.05)).prop_map(|(s, v, b)| Op::Touch(s, v, b)),
            1 => (0..spaces, 0..vpns).prop_map(|(s, v)| Op::Unmap(s, v)),
        ],
        1..400,
    )
}

/// Run `ops` on the table and the model with `frames` frames; compare every walk.
fn check<M: Model>(t: &mut PageTable, m: &mut M, frames: u64, ops: &[Op], big_ok: bool) {
    let mut mem = Frames::new(frames);
    let mut refs = Refs::new();
    for (n, &op) in ops.iter().enumerate() {
        match op {
            Op::Touch(s, v, big) => {
                refs.clear();
                let w = t.lookup(s, v, &mut refs);
                let r = m.lookup(s, v);
                assert_eq!(
                    (w.frame, w.chain, w.head, w.front_miss),
                    (r.frame, r.chain, r.head, r.front_miss),
                    "op {n}: {op:?}"
                );
                if !matches!(t, PageTable::Front(_)) {
                    assert_eq!(w.second_way, r.second_way, "op {n}: {op:?}");
                }
                if w.frame.is_none() {
                    let shift = if big && big_ok { 21 } else { PAGE_SHIFT };
                    let (f, old) = mem.alloc(s, v);
                    if let Some((os, ov)) = old {
                        assert_eq!(
                            t.remove(os, ov).is_some(),
                            m.remove(os, ov),
                            "op {n}: reclaim"
                        );
                    }
                    t.insert(s, v, shift, f).unwrap();
                    m.insert(s, v, shift, f);
                }
            }
            Op::Unmap(s, v) => {
                assert_eq!(t.remove(s, v).is_some(), m.remove(s, v), "op {n}: {op:?}")
            }
        }
        assert_eq!(t.usage().table_bytes, m.table_bytes(), "op {n}: bytes");
    }
}

fn hashed(buckets: usize, ways: usize, chaining: Chaining, mth: bool) -> PageTable {
    PageTable::Hashed(
        Hashed::new(HashedParams {
            buckets,
            ways,
            chaining,
            move_to_head: mth,
            base: TABLE_BASE,
            page_shift: PAGE_SHIFT,
        })
        .unwrap(),
    )
}

// Overflow entries count as table bytes in the real table; the model has none, so only
// tables that never overflow are compared on bytes (free chaining, frames ≤ entries).
proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn hashed_matches_reference(ops in ops(4, 96), ways in 1usize..=2, mth: bool,
                                buckets in prop::sample::select(vec![4usize, 16, 64])) {
        let frames = (buckets * ways) as u64;
        let mut t = hashed(buckets, ways, Chaining::Free, mth);
        let mut m = RefHashed::new(buckets, ways, mth);
        check(&mut t, &mut m, frames, &ops, false);
        if let PageTable::Hashed(h) = &t {
            for (b, chain) in h.chains().iter().enumerate() {
                for &(s, v) in chain {
                    prop_assert_eq!((xor_hash(s, v) as usize) & (buckets - 1), b);
                }
            }
        }
    }

    #[test]
    fn hashed_overflow_matches_reference(ops in ops(3, 64), ways in 1usize..=2, mth: bool) {
        // Overflow chaining: compare walks (bytes differ by the overflow area).
        let mut t = hashed(8, ways, Chaining::Overflow, mth);
        let mut m = RefHashed::new(8, ways, mth);
        let mut mem = Frames::new(40);
        let mut refs = Refs::new();
        for op in ops {
            match op {
                Op::Touch(s, v, _) => {
                    let w = t.lookup(s, v, &mut refs);
                    let r = m.lookup(s, v);
                    prop_assert_eq!((w.frame, w.chain, w.head), (r.frame, r.chain, r.head));
                    if w.frame.is_none() {
                        let (f, old) = mem.alloc(s, v);
                        if let Some((os, ov)) = old {
                            prop_assert_eq!(t.remove(os, ov).is_some(), m.remove(os, ov));
                        }
                        t.insert(s, v, PAGE_SHIFT, f).unwrap();
                        m.insert(s, v, PAGE_SHIFT, f);
                    }
                }
                Op::Unmap(s, v) => prop_assert_eq!(t.remove(s, v).is_some(), m.remove(s, v)),
            }
        }
    }

    #[test]
    fn inverted_matches_reference(ops in ops(4, 96), hat in prop::sample::select(vec![4usize, 32])) {
        let frames = 24;
        let mut t = PageTable::Inverted(Inverted::new(InvertedParams { frames, hat, base: TABLE_BASE, page_shift: PAGE_SHIFT }).unwrap());
        let mut m = RefInverted::new(hat, frames);
        check(&mut t, &mut m, frames, &ops, false);
    }

    #[test]
    fn radix_matches_reference(ops in ops(3, 1 << 12), x86 in any::<bool>()) {
        // Small levels so that large leaves and many table pages occur: 3 × 4 bits (a
        // "large" page is then 2^(12+4+4)... see below) or 2 × 10 bits.
        let (bits, entry) = if x86 { (vec![3u32, 9, 9], 8u32) } else { (vec![10, 10], 4) };
        let p = RadixParams { bits: bits.clone(), entry_bytes: entry, psc: Vec::new(), base: TABLE_BASE, canonical: false };
        let mut t = PageTable::Radix(Radix::new(p).unwrap());
        let mut m = RefRadix::new(bits, entry as u64);
        // x86: 9 bits below the middle level, so 2 MiB leaves (shift 21) live there.
        let ops: Vec<Op> = ops.into_iter().map(|o| match o {
            Op::Touch(s, v, b) => Op::Touch(s, v * 97 % (1 << 21), b),
            Op::Unmap(s, v) => Op::Unmap(s, v * 97 % (1 << 21)),
        }).collect();
        check(&mut t, &mut m, 64, &ops, x86);
    }

    #[test]
    fn paging_structure_caches_only_skip_references(ops in ops(3, 1 << 12)) {
        let mk = |psc| PageTable::Radix(Radix::new(RadixParams { psc, canonical: false, ..RadixParams::x86_64(4) }).unwrap());
        let mut plain = mk(Vec::new());
        let mut cached = mk(vec![Some((4, 4)), Some((8, 2)), Some((16, 4))]);
        let mut mem = Frames::new(50);
        let (mut r1, mut r2) = (Refs::new(), Refs::new());
        for op in ops {
            if let Op::Touch(s, v, _) = op {
                let v = v.wrapping_mul(0x1_0001_0001) & ((1 << 36) - 1);
                r1.clear();
                r2.clear();
                let a = plain.lookup(s, v, &mut r1);
                let b = cached.lookup(s, v, &mut r2);
                prop_assert_eq!(a.frame, b.frame);
                prop_assert_eq!(a.chain, b.chain + b.skipped);
                prop_assert_eq!(&r1[b.skipped as usize..], &r2[..]);
                if a.frame.is_none() {
                    let (f, old) = mem.alloc(s, v);
                    if let Some((os, ov)) = old {
                        plain.remove(os, ov);
                        cached.remove(os, ov);
                    }
                    plain.insert(s, v, PAGE_SHIFT, f).unwrap();
                    cached.insert(s, v, PAGE_SHIFT, f).unwrap();
                }
            }
        }
    }

    #[test]
    fn fronts_match_reference(ops in ops(4, 256), ways in 1usize..=2, hybrid: bool) {
        let sets = 8;
        let kind = if hybrid { FrontKind::Hybrid } else { FrontKind::SwTlb };
        let fp = FrontParams { kind, sets, ways, base: TABLE_BASE + (1 << 30) };
        if hybrid {
            let inner = PageTable::Radix(Radix::new(RadixParams::two_level_32()).unwrap());
            let mut t = PageTable::Front(Box::new(Front::new(fp, inner).unwrap()));
            let mut m = RefFront::new(true, sets, ways, RefRadix::new(vec![10, 10], 4));
            check(&mut t, &mut m, 100, &ops, false);
        } else {
            let inner = PageTable::Inverted(Inverted::new(InvertedParams { frames: 100, hat: 64, base: TABLE_BASE, page_shift: PAGE_SHIFT }).unwrap());
            let mut t = PageTable::Front(Box::new(Front::new(fp, inner).unwrap()));
            let mut m = RefFront::new(false, sets, ways, RefInverted::new(64, 100));
            check(&mut t, &mut m, 100, &ops, false);
        }
    }
}

#[test]
fn an_x86_64_table_walks_both_canonical_halves() {
    let mut t = Radix::new(RadixParams::x86_64(4)).unwrap();
    let mut refs = Refs::new();
    // The kernel half (0xffff8880_12345000) by its low 48 bits (PML4 entry 273), beside the
    // user page with the same low 47 bits: two pages, two frames.
    let (kernel, user) = (
        0xffff_8880_1234_5000u64 >> 12,
        0x0000_0880_1234_5000u64 >> 12,
    );
    t.insert(0, kernel, 12, 7).unwrap();
    t.insert(0, user, 12, 8).unwrap();
    assert_eq!(t.lookup(0, kernel, &mut refs).frame, Some(7));
    assert_eq!(t.lookup(0, user, &mut refs).frame, Some(8));
    // Its root entry is the upper half's: 256 + 17.
    refs.clear();
    t.lookup(0, kernel, &mut refs);
    assert_eq!(refs[0].addr % 4096, (256 + 17) * 8);
    // Non-canonical addresses (bit 47 not repeated above) are out of range, and so is any
    // 64-bit address for Huck & Hays' 32-bit table.
    for bad in [0x0000_8000_0000_0000u64 >> 12, 0xfff0_8880_1234_5000 >> 12] {
        assert_eq!(t.insert(0, bad, 12, 9), Err(InsertError::OutOfRange));
        assert_eq!(t.lookup(0, bad, &mut refs).frame, None);
    }
    let mut small = Radix::new(RadixParams::two_level_32()).unwrap();
    assert_eq!(small.insert(0, kernel, 12, 1), Err(InsertError::OutOfRange));
    assert_eq!(t.remove(0, kernel), Some(7));
    assert_eq!(t.lookup(0, kernel, &mut refs).frame, None);
}

#[test]
fn every_space_walks_the_one_kernel_half_from_its_own_root() {
    // The kernel half is mapped once (space KERNEL); spaces 1 and 2 walk it from their own
    // root pages (the PML4 each process has), then through the same lower tables.
    let mut t = PageTable::Radix(Radix::new(RadixParams::x86_64(4)).unwrap());
    const KERNEL: u32 = u32::MAX;
    let kernel = 0xffff_8880_1234_5000u64 >> 12;
    let user = 0x0000_7fff_0000_0000u64 >> 12;
    t.insert(1, user, 12, 3).unwrap();
    t.insert(KERNEL, kernel, 12, 7).unwrap();
    let walk = |t: &mut PageTable, from: u32| {
        let mut refs = Refs::new();
        let w = t.lookup_from(from, KERNEL, kernel, &mut refs);
        (w.frame, refs.iter().map(|r| r.addr).collect::<Vec<_>>())
    };
    let (f1, r1) = walk(&mut t, 1);
    let (f2, r2) = walk(&mut t, 2);
    assert_eq!((f1, f2), (Some(7), Some(7)));
    assert_eq!((r1.len(), r2.len()), (4, 4));
    // Root entry 256 + 17 of two different root pages; the same PDPT, PD and PT entries.
    assert_ne!(r1[0] >> 12, r2[0] >> 12);
    assert_eq!(
        (r1[0] % 4096, r2[0] % 4096),
        ((256 + 17) * 8, (256 + 17) * 8)
    );
    assert_eq!(r1[1..], r2[1..]);
    let mut refs = Refs::new();
    assert_eq!(t.lookup_from(1, 1, user, &mut refs).frame, Some(3));
    assert_eq!(
        refs[0].addr >> 12,
        r1[0] >> 12,
        "space 1's root holds both halves"
    );
    // Space 2 has a root page now, and no user pages: the kernel's are not its own.
    assert_eq!(t.lookup(2, user, &mut refs).frame, None);
    assert_eq!(t.lookup(2, kernel, &mut refs).frame, None);
}

#[test]
fn adversarial_one_bucket_chains_grow_and_shrink() {
    // Every page hashes to bucket 0 of 16: one chain of 16 entries in free slots.
    for ways in [1, 2] {
        let mut t = hashed(16, ways, Chaining::Free, false);
        let mut m = RefHashed::new(16, ways, false);
        let keys: Vec<Op> = (0..16u64).map(|i| Op::Touch(0, i * 16, false)).collect();
        let mut stream = keys.clone();
        stream.extend(keys.iter().rev().copied());
        stream.extend((0..16u64).step_by(3).map(|i| Op::Unmap(0, i * 16)));
        stream.extend(keys.iter().copied());
        // Frames = entries: the table is exactly full, nothing overflows.
        check(&mut t, &mut m, 16 * ways as u64, &stream, false);
    }
}

#[test]
fn storage_overheads_are_huck_and_hays() {
    // 32 MB of 4 KB pages = 8K frames.
    let mem = 32u64 << 20;
    let ipt = InvertedParams {
        frames: 8192,
        hat: 16384,
        base: TABLE_BASE,
        page_shift: PAGE_SHIFT,
    };
    assert_eq!(ipt.bytes(), 192 << 10);
    assert_eq!(
        format!("{:.3}", 100.0 * ipt.bytes() as f64 / mem as f64),
        "0.586"
    );
    let h2 = HashedParams::new(16384);
    let h4 = HashedParams::new(32768);
    assert_eq!(
        format!("{:.2}", 100.0 * h2.bytes() as f64 / mem as f64),
        "0.78"
    );
    assert_eq!(
        format!("{:.2}", 100.0 * h4.bytes() as f64 / mem as f64),
        "1.56"
    );
    // A typical process (128 KB text, 128 KB data, 16 KB stack) in the 2-level table: root
    // and two leaves, 12 KB for 272 KB, about 4%.
    let mut r = Radix::new(RadixParams::two_level_32()).unwrap();
    let mut f = 0;
    for (start, pages) in [(0x0000_1000u64, 32u64), (0x0010_0000, 32), (0x7fff_c000, 4)] {
        for p in 0..pages {
            r.insert(1, (start >> 12) + p, 12, f).unwrap();
            f += 1;
        }
    }
    let u = r.usage();
    assert_eq!((u.table_bytes, u.mapped_bytes), (12 << 10, 272 << 10));
    assert_eq!(
        (100.0 * u.table_bytes as f64 / u.mapped_bytes as f64).round(),
        4.0
    );
}

#[test]
fn mean_chain_length_is_one_plus_half_alpha_on_uniform_keys() {
    // Successful searches in separate chaining: 1 + α/2 (Knuth), α = pages per bucket.
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for (ratio, want) in [
        (4.0, 1.125),
        (2.0, 1.25),
        (1.0, 1.5),
        (0.5, 2.0),
        (0.25, 3.0),
    ] {
        let frames = 1u64 << 14;
        let buckets = (frames as f64 * ratio) as usize;
        let mut t = hashed(buckets, 1, Chaining::Overflow, false);
        let keys: Vec<(u32, u64)> = (0..frames)
            .map(|_| ((next() >> 48) as u32, next() >> 20))
            .collect();
        for (f, &(s, v)) in keys.iter().enumerate() {
            t.insert(s, v, PAGE_SHIFT, f as u64).unwrap();
        }
        let mut refs = Refs::new();
        let total: u64 = keys
            .iter()
            .map(|&(s, v)| t.lookup(s, v, &mut refs).chain as u64)
            .sum();
        let mean = total as f64 / frames as f64;
        assert!(
            (mean - want).abs() < 0.03 * want,
            "ratio {ratio}: {mean} vs {want}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Frames against a model: a page naming an object in memory joins its frame; any other
    /// page takes the next frame in FIFO order, evicting every page that mapped it; a frame
    /// no page maps forgets its object. The owners of each frame are exactly the pages mapped
    /// to it.
    #[test]
    fn pages_naming_one_object_share_its_frame(
        ops in prop::collection::vec((0u32..4, 0u64..12, prop::option::of(0u64..6), prop::bool::weighted(0.15)), 1..300),
        capacity in 1u64..8,
    ) {
        use std::collections::{BTreeMap, BTreeSet};
        let mut fr = Frames::new(capacity);
        // page → frame; frame → object; the FIFO hand.
        let mut mapped: BTreeMap<(u32, u64), u64> = BTreeMap::new();
        let mut holds: BTreeMap<u64, u64> = BTreeMap::new();
        let mut hand = 0u64;
        let mut evicted = Vec::new();
        for (space, vpn, object, unmap) in ops {
            let page = (space, vpn);
            if unmap || mapped.contains_key(&page) {
                if let Some(f) = mapped.remove(&page) {
                    fr.unmap(f, space, vpn);
                    if !mapped.values().any(|&g| g == f) {
                        holds.remove(&f);
                    }
                }
                continue;
            }
            evicted.clear();
            let m = fr.map(space, vpn, object, &mut evicted);
            let home = object.and_then(|o| holds.iter().find(|(_, &h)| h == o).map(|(&f, _)| f));
            match home {
                Some(f) => {
                    prop_assert_eq!(m, Mapped { frame: f, shared: true });
                    prop_assert!(evicted.is_empty());
                }
                None => {
                    prop_assert_eq!(m, Mapped { frame: hand, shared: false });
                    let gone: BTreeSet<(u32, u64)> =
                        mapped.iter().filter(|(_, &f)| f == hand).map(|(&p, _)| p).collect();
                    prop_assert_eq!(evicted.iter().copied().collect::<BTreeSet<_>>(), gone.clone());
                    prop_assert_eq!(evicted.len(), gone.len());
                    mapped.retain(|_, f| *f != hand);
                    holds.remove(&hand);
                    if let Some(o) = object {
                        holds.insert(hand, o);
                    }
                    hand = (hand + 1) % capacity;
                }
            }
            mapped.insert(page, m.frame);
            for f in 0..capacity {
                let owners: BTreeSet<(u32, u64)> = fr.owners(f).collect();
                let want: BTreeSet<(u32, u64)> =
                    mapped.iter().filter(|(_, &g)| g == f).map(|(&p, _)| p).collect();
                prop_assert_eq!(owners, want, "frame {}", f);
            }
        }
        prop_assert_eq!(fr.in_use(), mapped.values().collect::<BTreeSet<_>>().len() as u64);
    }
}

/// No process's space id is the kernel's: the address space whose scrambled id would be
/// `u32::MAX` (4,050,964,655) would otherwise have its pages kept with the kernel's shared
/// ones. The ids stay distinct over every space that is not `u32::MAX` itself.
#[test]
fn no_space_id_is_the_kernels() {
    let kernel = crate::cache::system::KERNEL_SPACE;
    let odd = 4_050_964_655u32;
    assert_eq!(
        odd.wrapping_mul(0x9E37_79B1),
        kernel,
        "the space that collided"
    );
    assert_ne!(scramble_space(odd), kernel);
    let mut seen = std::collections::HashSet::new();
    for asid in (0..1u32 << 16).chain([odd, odd - 1, odd + 1, u32::MAX - 1]) {
        let id = scramble_space(asid);
        assert_ne!(id, kernel, "asid {asid}");
        assert!(seen.insert(id), "asid {asid} shares id {id:#x}");
    }
}
