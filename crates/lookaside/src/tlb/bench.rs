//! Throughput measurements of the TLB engine (ignored by default; they time, never assert).
//!
//! Run in release mode and read the printed numbers:
//!
//! ```text
//! cargo test --release -p lookaside --lib tlb::bench::throughput -- --ignored --nocapture
//! ```
//!
//! The main stream is synthetic but shaped like a real unified-TLB trace: instruction fetches
//! walking code pages sequentially with branches and calls, interleaved with data references
//! to a stack, a skewed heap working set, an array sweep and scattered heap pages — so only
//! ~40% of references are on the page of the previous one and a 64-entry fully associative
//! LRU TLB misses ~3% of the time. The addresses are precomputed, so the loop measures the TLB
//! (plus the shift to a page number the machine would do). Each figure is the best of several
//! passes, to see through other work on the machine.
//!
//! On a shared machine wall-clock figures are noisy; implementation variants were compared by
//! instruction and (simulated) misprediction counts instead, with
//! `valgrind --tool=callgrind --branch-sim=yes --collect-atstart=no --toggle-collect='*measure*'`
//! on [`quick`] (`TLB_BENCH_REFS`, `TLB_BENCH_REPS`, `TLB_BENCH_ONLY=<row>` and
//! `TLB_BENCH_CFG=<entries>,<ways>,<policy>,<auto|scan|index>` narrow it down;
//! `TLB_BENCH_ADDRS=<file>` replaces the synthetic stream by a real one, see [`trace`]).

use super::*;
use std::time::Instant;

const PAGE_SHIFT: u32 = 12;

/// Addresses of `n` references: ~60% fetches, ~40% data, interleaved.
fn realistic(n: usize, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    let code_base = 0x40_0000u64;
    let heap_base = 0x1000_0000u64;
    let stack = 0x7fff_f000_0000u64;
    let mut pc = code_base;
    let mut sweep = heap_base + (1 << 32);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let r = rng.next_u64();
        // Instruction fetch: sequential, with near branches and occasional calls to one of 24
        // hot functions (skewed) or, rarely, anywhere in 2000 code pages.
        pc += 4;
        match r % 64 {
            0..=5 => pc = (pc & !0xfff) + (r >> 20) % 4096 / 4 * 4,
            6 => {
                let f = ((r >> 24) % 24) * ((r >> 40) % 24) / 24;
                pc = code_base + (f << PAGE_SHIFT) + (r >> 50) % 1024 * 4;
            }
            7 if (r >> 30).is_multiple_of(64) => {
                pc = code_base + (((r >> 32) % 2000) << PAGE_SHIFT)
            }
            _ => {}
        }
        out.push(pc);
        if (r >> 8) % 5 < 2 {
            let q = rng.next_u64();
            let addr = match q % 16 {
                // Stack: two pages.
                0..=6 => stack + (q >> 16) % 8192,
                // Heap: 48 pages, skewed (product of two uniforms).
                7..=13 => {
                    let p = ((q >> 8) % 48) * ((q >> 20) % 48) / 48;
                    heap_base + (p << PAGE_SHIFT) + (q >> 40) % 4096
                }
                // Array sweep: 8-byte strides through a large array.
                14 => {
                    sweep += 8;
                    sweep
                }
                // Anywhere in 64 MB.
                _ => heap_base + (q >> 20) % (64 << 20),
            };
            out.push(addr);
        }
    }
    out.truncate(n);
    out
}

/// Addresses of `n` references, each on a uniformly random one of `pages` distinct pages: no
/// locality at all, every reference a hit once warm (if `pages` fit).
fn scattered(n: usize, pages: u64, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| (rng.below(pages as usize) as u64 * 7919) << PAGE_SHIFT)
        .collect()
}

/// Accesses per second and miss ratio of `addrs` through `t`: best of `reps` passes, each
/// from an empty TLB.
#[inline(never)]
fn measure(t: &mut Tlb, addrs: &[u64], reps: usize) -> (f64, f64) {
    let mut best = f64::MAX;
    let mut misses = 0;
    for _ in 0..reps {
        t.flush_all();
        let start = Instant::now();
        let mut m = 0usize;
        for &a in addrs {
            // Upper: the random part of a MIPS-style partitioned TLB (ignored otherwise).
            m += !t.access(a >> PAGE_SHIFT, 1, NO_CTX, Part::Upper) as usize;
        }
        best = best.min(start.elapsed().as_secs_f64());
        misses = m;
    }
    (
        addrs.len() as f64 / best,
        misses as f64 / addrs.len() as f64,
    )
}

/// Measure and print one configuration; returns accesses per second.
fn row(label: &str, p: &TlbParams, lookup: Lookup, addrs: &[u64], reps: usize) -> f64 {
    let mut t = Tlb::with_lookup(p, lookup).unwrap();
    let (rate, miss) = measure(&mut t, addrs, reps);
    let part = match &p.partition {
        Some(q) => format!("{}+{}", q.lower_policy, q.upper_policy),
        None => p.policy.name().to_string(),
    };
    println!(
        "{label:<10} {:>5} entries {:>5}-way {part:<12} {:<6} {:>7.1} M acc/s  miss {:>6.3}%",
        p.entries,
        p.ways,
        format!("{lookup:?}"),
        rate / 1e6,
        100.0 * miss
    );
    rate
}

/// The headline figures: 64- and 1024-entry fully associative TLBs under every policy, and a
/// few other shapes.
#[test]
#[ignore]
fn throughput() {
    let n = 4_000_000;
    let reps = 7;
    let real = realistic(n, 1);
    let same_page = real
        .windows(2)
        .filter(|w| w[0] >> PAGE_SHIFT == w[1] >> PAGE_SHIFT)
        .count();
    println!(
        "realistic stream: {n} refs, {:.1}% on the page of the previous reference",
        100.0 * same_page as f64 / n as f64
    );
    for &policy in Policy::ALL {
        let small = row(
            "realistic",
            &TlbParams::new(64, 64, policy),
            Lookup::Auto,
            &real,
            reps,
        );
        let p = TlbParams::new(1024, 1024, policy);
        let large = row("realistic", &p, Lookup::Auto, &real, reps);
        println!(
            "{:>60} 1024 vs 64 entries: {:.2}x the time",
            "",
            small / large
        );
    }
    for (e, w) in [(1536, 12), (64, 4), (32, 32)] {
        row(
            "realistic",
            &TlbParams::new(e, w, Policy::Lru),
            Lookup::Auto,
            &real,
            reps,
        );
    }
    let mips = TlbParams {
        partition: Some(Partition {
            lower_ways: 8,
            lower_policy: Policy::Fifo,
            upper_policy: Policy::Random,
        }),
        ..TlbParams::new(64, 64, Policy::Lru)
    };
    row("realistic", &mips, Lookup::Auto, &real, reps);
    let scat = scattered(n, 56, 2);
    for entries in [64, 1024] {
        let p = TlbParams::new(entries, entries, Policy::Lru);
        row("scattered", &p, Lookup::Auto, &scat, reps);
    }
}

/// The headline configurations on a real trace: `TLB_BENCH_ADDRS` names a file of raw
/// little-endian `u64` virtual addresses, one per reference (e.g. converted from
/// `valgrind --tool=lackey --trace-mem=yes` output).
#[test]
#[ignore]
fn trace() {
    let Ok(path) = std::env::var("TLB_BENCH_ADDRS") else {
        println!("set TLB_BENCH_ADDRS to a file of little-endian u64 addresses");
        return;
    };
    let addrs = read_addrs(&path);
    let same_page = addrs
        .windows(2)
        .filter(|w| w[0] >> PAGE_SHIFT == w[1] >> PAGE_SHIFT)
        .count();
    println!(
        "trace: {} refs, {:.1}% on the page of the previous reference",
        addrs.len(),
        100.0 * same_page as f64 / addrs.len() as f64
    );
    for &policy in Policy::ALL {
        for entries in [64, 1024] {
            let p = TlbParams::new(entries, entries, policy);
            row("trace", &p, Lookup::Auto, &addrs, 5);
        }
    }
    row(
        "trace",
        &TlbParams::new(1536, 12, Policy::Lru),
        Lookup::Auto,
        &addrs,
        5,
    );
}

/// The addresses in a file of raw little-endian `u64`s.
fn read_addrs(path: &str) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap();
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Scan versus hash index per associativity (fully associative LRU). With the hint table in
/// front, the lookup structure is only used on hint misses and TLB misses, where the index
/// pays its upkeep and the scan its length; `INDEX_MIN_WAYS` comes from here (and from the
/// callgrind counts of the same runs).
#[test]
#[ignore]
fn scan_index_crossover() {
    let real = realistic(4_000_000, 3);
    for ways in [8, 16, 24, 32, 48, 64, 128] {
        let p = TlbParams::new(ways, ways, Policy::Lru);
        let s = row("realistic", &p, Lookup::Scan, &real, 5);
        let i = row("realistic", &p, Lookup::Index, &real, 5);
        println!(
            "{:>60} {ways}-way: index {:.2}x the speed of scan",
            "",
            i / s
        );
    }
}

/// A short run of the headline configurations, best of many short passes (for comparing
/// implementation variants; see the module documentation for the knobs).
#[test]
#[ignore]
fn quick() {
    let env = |k: &str| std::env::var(k).ok();
    let n: usize = env("TLB_BENCH_REFS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let reps = env("TLB_BENCH_REPS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let real = match env("TLB_BENCH_ADDRS") {
        Some(path) => read_addrs(&path),
        None => realistic(n, 1),
    };
    if let Some(cfg) = env("TLB_BENCH_CFG") {
        let f: Vec<&str> = cfg.split(',').collect();
        let p = TlbParams::new(
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
        );
        let lookup = match f[3] {
            "scan" => Lookup::Scan,
            "index" => Lookup::Index,
            _ => Lookup::Auto,
        };
        row("realistic", &p, lookup, &real, reps);
        return;
    }
    let scat = scattered(n, 56, 2);
    let configs = [
        (64, 64, Policy::Lru, &real),
        (1024, 1024, Policy::Lru, &real),
        (64, 64, Policy::Plru, &real),
        (64, 4, Policy::Lru, &real),
        (64, 64, Policy::Lru, &scat),
    ];
    let only: Option<usize> = env("TLB_BENCH_ONLY").and_then(|v| v.parse().ok());
    for (i, (e, w, pol, addrs)) in configs.into_iter().enumerate() {
        if only.is_none_or(|o| o == i) {
            let label = if i == 4 { "scattered" } else { "realistic" };
            row(label, &TlbParams::new(e, w, pol), Lookup::Auto, addrs, reps);
        }
    }
}
