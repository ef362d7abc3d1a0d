//! Throughput measurements of the TLB engine (ignored by default; they time, never assert).
//!
//! Run in release mode, single-threaded, and read the printed numbers:
//!
//! ```text
//! cargo test --release -p lookaside --lib tlb::bench -- --ignored --nocapture --test-threads=1
//! ```
//!
//! The streams are synthetic but shaped like real traces: instruction fetches walking code
//! pages sequentially with branches and calls, interleaved with data references to a stack, a
//! skewed heap working set and array sweeps, so that a 64-entry fully associative TLB misses a
//! few percent of the time. The addresses are precomputed, so the loop measures the TLB (plus
//! one shift per reference, as the machine does).

use super::*;
use std::time::Instant;

const PAGE_SHIFT: u32 = 12;

/// Addresses of `n` references: ~60% fetches, ~40% data, interleaved (a unified TLB sees the
/// page change on most references, so the MRU fast path only catches part of them).
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

/// `n` page numbers, each a uniformly random one of `pages` distinct pages (no locality at
/// all: the MRU fast path never helps; every access is a full lookup).
fn scattered(n: usize, pages: u64, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| (rng.below(pages as usize) as u64 * 7919) << PAGE_SHIFT)
        .collect()
}

/// Accesses per second and miss ratio of `addrs` through `t` (best of `reps` passes).
#[inline(never)]
fn measure(t: &mut Tlb, addrs: &[u64], reps: usize) -> (f64, f64) {
    let mut best = f64::MAX;
    let mut misses = 0;
    for _ in 0..reps {
        t.flush_all();
        let start = Instant::now();
        let mut m = 0usize;
        for &a in addrs {
            m += !t.access(a >> PAGE_SHIFT, 1, NO_CTX, Part::Lower) as usize;
        }
        best = best.min(start.elapsed().as_secs_f64());
        misses = m;
    }
    (
        addrs.len() as f64 / best,
        misses as f64 / addrs.len() as f64,
    )
}

fn row(label: &str, p: &TlbParams, lookup: Lookup, addrs: &[u64]) -> f64 {
    let mut t = Tlb::with_lookup(p, lookup).unwrap();
    let (rate, miss) = measure(&mut t, addrs, 3);
    println!(
        "{label:<12} {:>5} entries {:>5}-way {:<6} {:<6} {:>8.1} M acc/s  miss {:>6.3}%",
        p.entries,
        p.ways,
        p.policy.name(),
        format!("{lookup:?}"),
        rate / 1e6,
        100.0 * miss
    );
    rate
}

#[test]
#[ignore]
fn throughput_fully_associative() {
    let n = 20_000_000;
    let real = realistic(n, 1);
    let same_page = real
        .windows(2)
        .filter(|w| w[0] >> PAGE_SHIFT == w[1] >> PAGE_SHIFT)
        .count();
    println!(
        "realistic stream: {n} refs, {:.1}% on the page of the previous reference",
        100.0 * same_page as f64 / n as f64
    );
    let base = Instant::now();
    let sum = real
        .iter()
        .fold(0u64, |s, &a| s.wrapping_add(a >> PAGE_SHIFT));
    println!(
        "baseline (read + shift only): {:.0} M refs/s ({sum:x})",
        n as f64 / base.elapsed().as_secs_f64() / 1e6
    );
    for &policy in Policy::ALL {
        let small = row(
            "realistic",
            &TlbParams::new(64, 64, policy),
            Lookup::Auto,
            &real,
        );
        let large = row(
            "realistic",
            &TlbParams::new(1024, 1024, policy),
            Lookup::Auto,
            &real,
        );
        println!("  1024/64 slowdown {:.2}x", small / large);
    }
    let scat = scattered(n / 2, 56, 2);
    for entries in [64, 1024] {
        row(
            "scattered",
            &TlbParams::new(entries, entries, Policy::Lru),
            Lookup::Auto,
            &scat,
        );
    }
    row(
        "set-assoc",
        &TlbParams::new(1536, 12, Policy::Lru),
        Lookup::Auto,
        &real,
    );
    row(
        "set-assoc",
        &TlbParams::new(64, 4, Policy::Lru),
        Lookup::Auto,
        &real,
    );
}

/// Scan versus hash index, per associativity, on streams that defeat the MRU fast path;
/// this is where `INDEX_MIN_WAYS` comes from.
#[test]
#[ignore]
fn scan_index_crossover() {
    let n = 5_000_000;
    let real = realistic(n, 3);
    for ways in [4, 8, 12, 16, 24, 32, 48, 64, 128] {
        let p = TlbParams::new(ways, ways, Policy::Lru);
        // Every access a hit (after warm-up) on a random one of the ways: no locality.
        let scat = scattered(n, ways as u64, 4);
        let s = row("scattered", &p, Lookup::Scan, &scat);
        let i = row("scattered", &p, Lookup::Index, &scat);
        let rs = row("realistic", &p, Lookup::Scan, &real);
        let ri = row("realistic", &p, Lookup::Index, &real);
        println!(
            "  {ways}-way: index/scan {:.2}x scattered, {:.2}x realistic",
            i / s,
            ri / rs
        );
    }
}

/// A short run of the headline configurations, best of many short passes (for comparing
/// implementation variants on a shared machine).
#[test]
#[ignore]
fn quick() {
    let n: usize = std::env::var("TLB_BENCH_REFS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000);
    let reps = std::env::var("TLB_BENCH_REPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(9);
    let real = realistic(n, 1);
    let scat = scattered(n, 56, 2);
    let configs = [
        ("realistic", 64, 64, Policy::Lru, &real),
        ("realistic", 1024, 1024, Policy::Lru, &real),
        ("realistic", 64, 64, Policy::Plru, &real),
        ("realistic", 64, 4, Policy::Lru, &real),
        ("scattered", 64, 64, Policy::Lru, &scat),
    ];
    // TLB_BENCH_CFG=entries,ways,policy,lookup (lookup: auto, scan or index) runs just that
    // configuration on the realistic stream.
    if let Ok(cfg) = std::env::var("TLB_BENCH_CFG") {
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
        let mut t = Tlb::with_lookup(&p, lookup).unwrap();
        let (rate, miss) = measure(&mut t, &real, reps);
        println!(
            "{cfg:<24} {:>7.1} M acc/s  miss {:.3}%",
            rate / 1e6,
            100.0 * miss
        );
        return;
    }
    let only: Option<usize> = std::env::var("TLB_BENCH_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    for (i, (label, e, w, pol, addrs)) in configs.into_iter().enumerate() {
        if only.is_some_and(|o| o != i) {
            continue;
        }
        let p = TlbParams::new(e, w, pol);
        let mut t = Tlb::new(&p).unwrap();
        let (rate, miss) = measure(&mut t, addrs, reps);
        println!(
            "{label:<10} {e:>5}/{w:<5} {:<5} {:>7.1} M acc/s  miss {:.3}%",
            pol.name(),
            rate / 1e6,
            100.0 * miss
        );
    }
}
