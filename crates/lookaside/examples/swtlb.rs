//! The software-managed TLB on the multiserver token ring: trap counts and costs over a sweep
//! of the lower partition, and the simulation rate.
//!
//! `cargo run --release --example swtlb -- [SERVERS] [PAGES_PER_HOP] [HOPS] [PLACEMENT]`
//! prints, for lower partitions of 4..24 slots (64 in all), the traps by type and the total
//! handling time under Mach 3.0's Table III costs; then the references per second of the
//! whole model on that stream and on a program-like stream with few misses.

use std::time::Instant;

use lookaside::event::Event;
use lookaside::machine::Machine;
use lookaside::mmu::ALL_TRAPS;
use lookaside::trace::TraceSource;
use lookaside::workload::{Multiserver, MultiserverParams, Synthetic};

fn config(lower: usize, placement: &str) -> String {
    format!(
        "[[tlb]]\nname = 'tlb'\nentries = 64\nways = 'full'\npolicy = 'random'\n\
         partition = {{ lower = {lower}, lower_policy = 'fifo', upper_policy = 'random' }}\n\
         [refill]\nplacement = '{placement}'\ncosts = 'mach3'\nfold_user_addresses = true\n"
    )
}

fn collect(src: &mut dyn TraceSource) -> Vec<Event> {
    let (mut v, mut all) = (Vec::new(), Vec::new());
    while src.next_batch(&mut v).unwrap() {
        all.extend_from_slice(&v);
    }
    all
}

/// M references per second simulating `events` `repeat` times, and the traps per 1000
/// references.
fn rate(events: &[Event], cfg: &str, repeat: usize) -> (f64, f64) {
    let mut m = Machine::assemble(Some(cfg), "swtlb", &[], &[]).unwrap();
    let t = Instant::now();
    for _ in 0..repeat {
        for chunk in events.chunks(4096) {
            m.run_batch(chunk);
        }
    }
    let n = (events.len() * repeat) as f64;
    let traps = m.refill().map_or(0, |r| r.counts().all()) as f64;
    (n / t.elapsed().as_secs_f64() / 1e6, traps * 1000.0 / n)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let placement = args.get(3).cloned().unwrap_or_else(|| "A".into());
    let p = MultiserverParams {
        servers: arg(0, 2) as u32,
        pages_per_hop: arg(1, 24) as u32,
        hops: arg(2, 20_000),
        ..MultiserverParams::default()
    };
    let events = collect(&mut Multiserver::new(p.clone()));
    println!(
        "multiserver: {} servers, {} pages per hop, {} hops, {} events, policy {placement}",
        p.servers,
        p.pages_per_hop,
        p.hops,
        events.len()
    );
    print!("{:>5}", "lower");
    for t in ALL_TRAPS {
        print!(" {:>9}", t.name());
    }
    println!(" {:>10}", "seconds");
    for lower in 4..=24 {
        let mut m = Machine::assemble(Some(&config(lower, &placement)), "swtlb", &[], &[]).unwrap();
        for chunk in events.chunks(4096) {
            m.run_batch(chunk);
        }
        let r = m.refill().unwrap();
        print!("{lower:>5}");
        for t in ALL_TRAPS {
            print!(" {:>9}", r.counts().of(t));
        }
        println!(" {:>10.4}", r.service().total_seconds());
    }
    let (ms, mt) = rate(&events, &config(8, &placement), 5);
    println!("rate: {ms:.1} M refs/s on the token ring ({mt:.1} traps per 1000 references)");
    for heap_kib in [64, 4096] {
        let prog = collect(&mut Synthetic::new(20_000_000, 1, 64, heap_kib));
        let (ps, pt) = rate(&prog, &config(8, &placement), 2);
        // The same TLB without software refill (a plain lookup per reference), for scale.
        let plain = config(8, &placement);
        let plain = &plain[..plain.find("[refill]").unwrap_or(plain.len())];
        let (bs, _) = rate(&prog, plain, 2);
        println!(
            "rate: {ps:.1} M refs/s on a program-like stream, {heap_kib} KiB heap ({pt:.2} traps per 1000 references; the TLB alone: {bs:.1} M refs/s)"
        );
    }
}
