//! The trends of Uhlig et al. (TOCS 1994) that the software-managed-TLB model must show on the
//! multiserver token ring (their Fig. 5, 7 and 9; Table VIII), through the public API: a
//! machine built from a config with `[refill]`, fed by the workload.
//!
//! Each address space keeps 3 L2 PTEs live (text, data, stack in different 4 MB regions), so
//! with policy A (only L2 PTEs in the lower partition) the L2 traps fall to the cold misses
//! once the lower partition holds 3 × (address spaces) entries, and stay there; beyond that
//! point, every slot taken from the upper partition only adds L1U and L1K misses, so the
//! total is U-shaped with its minimum at that knee, which moves right with each server.
//!
//! Uhlig's FIFO ≈ random is not asserted here: the ring is a cycle of pages longer than the
//! upper partition, on which FIFO misses every time while random keeps some, so on the ring
//! FIFO in the upper partition comes out about 45% dearer at the optimum (even with random
//! data pages, `seed = 7`).

use lookaside::event::Event;
use lookaside::machine::Machine;
use lookaside::mmu::Trap;
use lookaside::trace::TraceSource;
use lookaside::workload::{Multiserver, MultiserverParams};

/// The ring with `servers` servers, 24 pages per hop, 2000 hops; `seed` 0: the same pages
/// every hop.
fn ring(servers: u32, seed: u64) -> Vec<Event> {
    let mut src = Multiserver::new(MultiserverParams {
        servers,
        pages_per_hop: 24,
        hops: 2000,
        seed,
        ..MultiserverParams::default()
    });
    let (mut v, mut all) = (Vec::new(), Vec::new());
    while src.next_batch(&mut v).unwrap() {
        all.extend_from_slice(&v);
    }
    all
}

/// (L2 traps, total seconds) of `events` on a 64-slot R2000 with `lower` lower slots.
fn run(events: &[Event], lower: usize, placement: &str, upper_policy: &str) -> (u64, f64) {
    let cfg = format!(
        "[[tlb]]\nname = 'tlb'\nentries = 64\nways = 'full'\n\
         partition = {{ lower = {lower}, lower_policy = 'fifo', upper_policy = '{upper_policy}' }}\n\
         [refill]\nplacement = '{placement}'\n"
    );
    let mut m = Machine::assemble(Some(&cfg), "trend", &[], &[]).unwrap();
    for chunk in events.chunks(4096) {
        m.run_batch(chunk);
    }
    let r = m.refill().unwrap();
    (r.counts().of(Trap::L2), r.service().total_seconds())
}

#[test]
fn l2_time_falls_then_flattens_and_the_optimum_moves_right_with_servers() {
    let mut optima = Vec::new();
    for servers in [2u32, 3] {
        let events = ring(servers, 0);
        let knee = 3 * (servers as usize + 1);
        let sweep: Vec<(usize, u64, f64)> = (4..=24)
            .map(|lower| {
                let (l2, s) = run(&events, lower, "A", "random");
                (lower, l2, s)
            })
            .collect();
        for &(lower, l2, _) in &sweep {
            if lower >= knee {
                // Only the cold misses of the live L2 PTEs.
                assert_eq!(l2, knee as u64, "{servers} servers, {lower} lower slots");
            } else {
                // FIFO over too few slots: the receiver's L2 PTEs miss on nearly every hop.
                assert!(l2 > 2000, "{servers} servers, {lower} lower slots: {l2}");
            }
        }
        let best = sweep.iter().min_by(|a, b| a.2.total_cmp(&b.2)).unwrap();
        // U-shaped: the optimum is at (or just past) the knee, well below both ends.
        assert!(
            best.0 == knee || best.0 == knee + 1,
            "{servers} servers: {sweep:?}"
        );
        assert!(
            sweep[0].2 > 1.5 * best.2 && sweep[20].2 > 1.2 * best.2,
            "{sweep:?}"
        );
        optima.push((best.0, best.2));
        // No partition at all (policy D) is far worse than the tuned partition.
        let (_, d) = run(&events, 8, "D", "random");
        assert!(d > 1.5 * best.2, "D {d} vs A {}", best.2);
    }
    // Each added server moves the optimum right, and the minimum cost rises.
    assert!(
        optima[1].0 > optima[0].0 && optima[1].1 > optima[0].1,
        "{optima:?}"
    );
}

/// (kernel traps L1K + L2 + L3, STLB fast-path share of them, total seconds).
fn bala(events: &[Event], lower: usize, extra: &str) -> (u64, f64, f64) {
    let cfg = format!(
        "[[tlb]]\nname = 'tlb'\nentries = 64\nways = 'full'\n\
         partition = {{ lower = {lower}, lower_policy = 'fifo', upper_policy = 'random' }}\n\
         [refill]\n{extra}"
    );
    let mut m = Machine::assemble(Some(&cfg), "bala", &[], &[]).unwrap();
    for chunk in events.chunks(4096) {
        m.run_batch(chunk);
    }
    let r = m.refill().unwrap();
    let c = r.counts();
    let kernel = c.of(Trap::L1K) + c.of(Trap::L2) + c.of(Trap::L3);
    let fast: u64 = c.fast.iter().sum();
    (
        kernel,
        fast as f64 / kernel as f64,
        r.service().total_seconds(),
    )
}

/// Bala et al.'s abstract, as trends on the ring (their platform's numbers are not
/// available): prefetching the receiver's L2 PTEs on the IPC path cuts kernel TLB misses by
/// 40-50%; a software TLB gives a fast path for over 90% of kernel misses and, by removing
/// nested traps, cuts kernel traps by 20-40%. The software TLB here is 2-way with a hashed
/// index: a low-bit index puts the page-table pages of every task in a few sets (they are
/// 512 pages apart), and serves only 27-48% of kernel misses on the ring.
#[test]
fn bala_prefetching_and_the_software_tlb_on_the_ring() {
    const STLB: &str = "[refill.stlb]\nentries = 1024\nways = 2\nindex = 'hash'\n";
    for servers in [2u32, 3, 4] {
        let events = ring(servers, 7);
        for lower in [8, 16] {
            let (base, _, base_s) = bala(&events, lower, "");
            let (pre, _, _) = bala(&events, lower, "[refill.prefetch]\n");
            let (stlb, fast, stlb_s) = bala(&events, lower, STLB);
            let (both, _, both_s) = bala(&events, lower, &format!("[refill.prefetch]\n{STLB}"));
            let cut = |n: u64| 1.0 - n as f64 / base as f64;
            eprintln!(
                "{servers} servers, {lower} lower: kernel traps {base}, prefetch -{:.0}%, \
                 stlb -{:.0}% ({:.1}% fast), both -{:.0}%",
                100.0 * cut(pre),
                100.0 * cut(stlb),
                100.0 * fast,
                100.0 * cut(both)
            );
            assert!(fast > 0.9, "fast path {fast}");
            assert!((0.15..=0.4).contains(&cut(stlb)), "stlb cut {}", cut(stlb));
            assert!(stlb_s < base_s && both_s < base_s);
            if lower == 8 && servers >= 3 {
                // The fixed R2000 partition cannot hold the ring's L2 PTEs: prefetching them
                // back on every hand-off removes most L2 traps.
                assert!(cut(pre) >= 0.4, "prefetch cut {}", cut(pre));
            }
            // Prefetching never adds kernel traps.
            assert!(pre <= base);
        }
    }
}

/// Dynamic partitioning (Uhlig Table IX): starting from the R2000's fixed 8 lower slots, hill
/// climbing finds the ring's knee by itself: far better than fixed 8, close to the best
/// static partition (it pays for counting L1U misses and for its excursions).
#[test]
fn dynamic_partitioning_tracks_the_best_static_partition() {
    let events = ring(3, 0);
    let total = |extra: &str, lower: usize| {
        let cfg = format!(
            "[[tlb]]\nname = 'tlb'\nentries = 64\nways = 'full'\n\
             partition = {{ lower = {lower}, lower_policy = 'fifo', upper_policy = 'random'{extra} }}\n\
             [refill]\nplacement = 'A'\n"
        );
        let mut m = Machine::assemble(Some(&cfg), "dynamic", &[], &[]).unwrap();
        for chunk in events.chunks(4096) {
            m.run_batch(chunk);
        }
        let r = m.refill().unwrap();
        (
            r.service().total_seconds(),
            r.current_lower_slots(),
            r.dynamic_work().copied(),
        )
    };
    let fixed8 = total("", 8).0;
    let best = (4..=24)
        .map(|l| total("", l).0)
        .fold(f64::INFINITY, f64::min);
    let (dynamic, end, work) = total(", dynamic = { period = 200, threshold = 0.05 }", 8);
    eprintln!(
        "dynamic {dynamic:.4} s (ends at {end}, {work:?}); fixed 8 {fixed8:.4}, best static {best:.4}"
    );
    let work = work.unwrap();
    assert!(work.max_seen >= 12, "never reached the knee: {work:?}");
    assert!(dynamic < 0.75 * fixed8, "dynamic {dynamic} fixed {fixed8}");
    // Uhlig found dynamic 0-13% below the best static point on phased workloads; on this
    // stationary ring it cannot beat it, and lands within 25% of it.
    assert!(dynamic < 1.25 * best, "dynamic {dynamic} best {best}");
}

/// Uhlig's section 4.2 on one application: the miss mix follows the OS structure. With
/// unmapped kernel data almost every trap is L1U; mapping kernel data adds L1K misses that
/// dominate the time; moving the service to a user-level server adds L1U misses (the
/// server's) and L2/L3 misses; decomposing it further multiplies the L2 misses.
#[test]
fn the_miss_mix_follows_the_os_structure() {
    use lookaside::workload::{OsStructure, OsWorkload, OsWorkloadParams};
    let run = |structure, costs: &str| {
        let mut src = OsWorkload::new(OsWorkloadParams {
            structure,
            syscalls: 3000,
            ..OsWorkloadParams::default()
        });
        let cfg = format!(
            "[[tlb]]\nname = 'tlb'\nentries = 64\nways = 'full'\n\
             partition = {{ lower = 8, lower_policy = 'fifo', upper_policy = 'random' }}\n\
             [refill]\ncosts = '{costs}'\n"
        );
        let mut m = Machine::assemble(Some(&cfg), "os", &[], &[]).unwrap();
        let mut v = Vec::new();
        while src.next_batch(&mut v).unwrap() {
            m.run_batch(&v);
        }
        let r = m.refill().unwrap();
        (r.counts().totals(), r.service())
    };
    let (ultrix, _) = run(OsStructure::MonolithicUnmapped, "mach3");
    let (osf1, osf1_s) = run(OsStructure::MonolithicMapped, "osf1");
    let (mach, _) = run(OsStructure::Microkernel, "mach3");
    let (afsout, _) = run(OsStructure::Decomposed, "mach3");
    for (name, t) in [
        ("unmapped", ultrix),
        ("mapped", osf1),
        ("microkernel", mach),
        ("decomposed", afsout),
    ] {
        eprintln!("{name}: {t:?}");
    }
    let share = |t: [u64; 6], i: usize| t[i] as f64 / t.iter().sum::<u64>() as f64;
    // [L1U, L1K, L2, L3, Modify, Invalid]
    assert!(share(ultrix, 0) > 0.95, "{ultrix:?}");
    assert_eq!(ultrix[1], 0);
    let secs = osf1_s.seconds();
    assert!(
        secs[1].unwrap() > secs[0].unwrap(),
        "L1K time dominates: {secs:?}"
    );
    // Uhlig: 2.2x from OSF/1 to Mach 3.0; here the server's own pages add about 1.45x.
    assert!(
        mach[0] as f64 > 1.3 * osf1[0] as f64,
        "{mach:?} vs {osf1:?}"
    );
    assert!(mach[2] > 0 && mach[3] > 0);
    assert!(
        afsout[2] as f64 > 2.0 * mach[2] as f64,
        "{afsout:?} vs {mach:?}"
    );
}
