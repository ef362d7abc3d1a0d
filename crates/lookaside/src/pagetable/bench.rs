//! Walks per second per organisation: each table is filled with the pages of a full 32 MB
//! memory (8K frames, random pages of 64 address spaces), then searched for resident pages in
//! a pseudo-random order prepared beforehand, the references of each walk collected in a
//! reused buffer (what a walker does before its data cache). Data for a person, never an
//! assertion in a test.

use std::time::Instant;

use serde_json::{json, Value};

use super::*;

/// The organisations timed: (label, a fresh table).
fn tables() -> Vec<(&'static str, PageTable)> {
    let radix = |p: RadixParams| PageTable::Radix(Radix::new(p).expect("radix"));
    let hashed = |buckets, ways| {
        PageTable::Hashed(
            Hashed::new(HashedParams {
                buckets,
                ways,
                chaining: Chaining::Free,
                move_to_head: false,
                base: TABLE_BASE,
                page_shift: PAGE_SHIFT,
            })
            .expect("hashed"),
        )
    };
    let inverted = || {
        PageTable::Inverted(
            Inverted::new(InvertedParams {
                frames: FRAMES,
                hat: 2 * FRAMES as usize,
                base: TABLE_BASE,
                page_shift: PAGE_SHIFT,
            })
            .expect("inverted"),
        )
    };
    let mut psc = RadixParams::x86_64(4);
    psc.psc = vec![Some((4, 4)), Some((4, 4)), Some((32, 4))];
    let front = |kind, sets, ways, inner| {
        PageTable::Front(Box::new(
            Front::new(
                FrontParams {
                    kind,
                    sets,
                    ways,
                    base: TABLE_BASE + (1 << 36),
                },
                inner,
            )
            .expect("front"),
        ))
    };
    vec![
        (
            "FMPT 2-level 32-bit (ASM)",
            radix(RadixParams::two_level_32()),
        ),
        ("radix x86-64 4-level", radix(RadixParams::x86_64(4))),
        ("radix x86-64 5-level", radix(RadixParams::x86_64(5))),
        ("radix x86-64 4-level + PSCs", radix(psc)),
        ("IPT + HAT 2x", inverted()),
        ("HPT 4x 1-way", hashed(4 * FRAMES as usize, 1)),
        ("HPT 2x 2-way", hashed(2 * FRAMES as usize, 2)),
        (
            "hybrid: HPT cache 8K + FMPT",
            front(
                FrontKind::Hybrid,
                8192,
                1,
                radix(RadixParams::two_level_32()),
            ),
        ),
        (
            "swTLB 2K 2-way + IPT",
            front(FrontKind::SwTlb, 1024, 2, inverted()),
        ),
    ]
}

const FRAMES: u64 = 8192;

/// Time `lookups` walks on each organisation.
pub fn walk_rates(lookups: u64) -> Value {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Resident pages: 64 spaces, 20-bit page numbers (32-bit spaces).
    let pages: Vec<(u32, u64)> = (0..FRAMES)
        .map(|_| {
            let r = next();
            ((r >> 58) as u32, (r >> 8) & 0xF_FFFF)
        })
        .collect();
    let order: Vec<usize> = (0..lookups.min(1 << 20))
        .map(|_| (next() % FRAMES) as usize)
        .collect();
    let mut rows = Vec::new();
    for (label, mut t) in tables() {
        let mut frames = Frames::new(FRAMES);
        let mut refs = Refs::with_capacity(64);
        for &(s, v) in &pages {
            refs.clear();
            if t.lookup(s, v, &mut refs).frame.is_none() {
                let (f, old) = frames.alloc(s, v);
                if let Some((os, ov)) = old {
                    t.remove(os, ov);
                }
                let _ = t.insert(s, v, PAGE_SHIFT, f);
            }
        }
        let (mut found, mut nrefs) = (0u64, 0u64);
        let start = Instant::now();
        let mut done = 0u64;
        while done < lookups {
            for &i in &order {
                let (s, v) = pages[i];
                refs.clear();
                let w = t.lookup(s, v, &mut refs);
                found += w.frame.is_some() as u64;
                nrefs += refs.len() as u64;
                done += 1;
                if done == lookups {
                    break;
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        rows.push(json!({
            "organisation": label, "walks": done, "found": found,
            "refs_per_walk": nrefs as f64 / done.max(1) as f64,
            "walks_per_s": if secs > 0.0 { done as f64 / secs } else { 0.0 },
            "table_bytes": t.usage().table_bytes,
        }));
    }
    Value::Array(rows)
}

#[cfg(test)]
mod tests {
    /// `cargo test --release -p lookaside walks_per_second -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn walks_per_second() {
        for r in super::walk_rates(20_000_000).as_array().unwrap() {
            println!(
                "{:<32} {:>8.1} M walks/s  {:>5.2} refs/walk  {:>9} table bytes",
                r["organisation"].as_str().unwrap(),
                r["walks_per_s"].as_f64().unwrap() / 1e6,
                r["refs_per_walk"].as_f64().unwrap(),
                r["table_bytes"]
            );
        }
    }
}
