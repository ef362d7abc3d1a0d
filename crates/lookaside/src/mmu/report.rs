//! The `traps` section of the result JSON (present when the machine has a `[refill]`
//! section): every trap by type, how many were nested, their cycles and seconds under the
//! configured cost table, and the handlers' PTE loads and TLB writes.
//!
//! ```text
//! traps.model     levels, placement, lower_slots, upper_slots, costs (table name), cycle_ns
//! traps.cycles_per_trap  {L1U, L1K, L2, L3, Modify, Invalid}: the cost table (null: none)
//! traps.counts    {L1U, …, Invalid, total}: traps of each type, nested ones included
//! traps.nested    {L1U, …}: of those, taken inside another trap's handler
//! traps.by_depth  [{L1U, …}, …]: per depth (0: the reference's own trap, 1, 2)
//! traps.cycles    {L1U, …, total}: counts × cycles (null: counted but no cost in the table)
//! traps.seconds   {L1U, …, total}: cycles × cycle_ns
//! traps.handler   pte_loads_mapped, pte_loads_unmapped, fills {L1U, L1K, L2, L3},
//!                 fills_lower, evicted {L1U, L1K, L2, L3}
//! traps.address_errors   references outside the segments their mode may use (not translated)
//! traps.stlb      (with a software TLB) entries, ways, hits {L1U, …} (traps served by the
//!                 fast path, charged stlb_hit cycles each), misses, hit_ratio
//! traps.prefetch  (with IPC-path prefetching) l2_entries, l1u_entries, l1k_entries, probes,
//!                 inserted, evicted, inserted_by_class (L2, L1U, L1K)
//! traps.micro     (with a micro-TLB) entries, refills (its misses the TLB served
//!                 without a trap, charged `micro` cycles each)
//! traps.dynamic   (with dynamic partitioning) period, threshold, step, cost ("trap cycles"),
//!                 decisions, moves_up, moves_down, min_lower, max_lower (sizes used),
//!                 final_lower
//! ```
//!
//! `cycles_per_trap` also has `stlb_hit`, `stlb_miss`, `prefetch` and `l1u_count` (and
//! `micro` with a micro-TLB); `cycles` and `seconds` have `stlb_miss` (the software TLB's
//! overhead on its misses), `prefetch` (the probes), `l1u_count` (counting L1U misses for
//! dynamic partitioning) and `micro` (its refills), all in `total`.
//!
//! Costs are counts × the table, so re-pricing a stored result needs only `counts` and a
//! table ([`super::CostTable::apply`]).

use serde_json::{json, Map, Value};

use super::cost::{ALL_TRAPS, DEPTHS};
use super::refill::{SoftwareManagedTlb, PTE_CLASSES};

fn by_trap<T: Into<Value> + Copy>(v: &[T; 6]) -> Map<String, Value> {
    ALL_TRAPS
        .iter()
        .map(|t| (t.name().to_string(), v[*t as usize].into()))
        .collect()
}

fn by_class(v: &[u64; 4]) -> Map<String, Value> {
    PTE_CLASSES
        .iter()
        .map(|c| (c.name().to_string(), json!(v[*c as usize])))
        .collect()
}

/// The `traps` object for a model's counts so far.
pub fn traps_json(m: &SoftwareManagedTlb) -> Value {
    let p = m.params();
    let counts = m.counts();
    let service = m.service();
    let mut c = by_trap(&counts.totals());
    c.insert("total".into(), json!(counts.all()));
    let nested = by_trap(&ALL_TRAPS.map(|t| counts.nested(t)));
    let by_depth: Vec<Value> = (0..DEPTHS)
        .map(|d| Value::Object(by_trap(&counts.by_depth[d])))
        .collect();
    let mut cycles: Map<String, Value> = ALL_TRAPS
        .iter()
        .map(|t| {
            (
                t.name().to_string(),
                service.cycles[*t as usize].map_or(Value::Null, |c| json!(c)),
            )
        })
        .collect();
    cycles.insert("stlb_miss".into(), json!(service.stlb_cycles));
    cycles.insert("prefetch".into(), json!(service.prefetch_cycles));
    cycles.insert("l1u_count".into(), json!(service.count_cycles));
    if p.micro.is_some() {
        cycles.insert("micro".into(), json!(service.micro_cycles));
    }
    cycles.insert("total".into(), json!(service.total_cycles));
    let mut seconds: Map<String, Value> = ALL_TRAPS
        .iter()
        .map(|t| {
            (
                t.name().to_string(),
                service.seconds()[*t as usize].map_or(Value::Null, |s| json!(s)),
            )
        })
        .collect();
    let secs = |c: u64| c as f64 * service.cycle_ns * 1e-9;
    seconds.insert("stlb_miss".into(), json!(secs(service.stlb_cycles)));
    seconds.insert("prefetch".into(), json!(secs(service.prefetch_cycles)));
    seconds.insert("l1u_count".into(), json!(secs(service.count_cycles)));
    if p.micro.is_some() {
        seconds.insert("micro".into(), json!(secs(service.micro_cycles)));
    }
    seconds.insert("total".into(), json!(service.total_seconds()));
    let per_trap: Map<String, Value> = ALL_TRAPS
        .iter()
        .map(|t| {
            (
                t.name().to_string(),
                p.costs.cycles_of(*t).map_or(Value::Null, |c| json!(c)),
            )
        })
        .collect();
    let mut per_trap = per_trap;
    per_trap.insert("stlb_hit".into(), json!(p.costs.stlb_hit));
    per_trap.insert("stlb_miss".into(), json!(p.costs.stlb_miss));
    per_trap.insert("prefetch".into(), json!(p.costs.prefetch));
    per_trap.insert("l1u_count".into(), json!(p.costs.l1u_count));
    if p.micro.is_some() {
        per_trap.insert("micro".into(), json!(p.costs.micro));
    }
    let h = m.handler();
    let entries = m.tlb().entries();
    let mut out = json!({
        "model": {
            "levels": p.levels,
            "placement": format!("{:?}", p.placement),
            "lower_slots": m.lower_slots(),
            "upper_slots": entries - m.lower_slots(),
            "costs": p.costs.name,
            "cycle_ns": p.costs.cycle_ns,
        },
        "cycles_per_trap": per_trap,
        "counts": c,
        "nested": nested,
        "by_depth": by_depth,
        "cycles": cycles,
        "seconds": seconds,
        "handler": {
            "pte_loads_mapped": h.pte_loads_mapped,
            "pte_loads_unmapped": h.pte_loads_unmapped,
            "fills": by_class(&h.fills),
            "fills_lower": h.fills_lower,
            "evicted": by_class(&h.evicted),
        },
        "address_errors": m.address_errors(),
    });
    if let (Some((fast, misses)), Some(s)) = (m.stlb_counts(), p.stlb) {
        let hits: u64 = fast.iter().sum();
        let ratio = if hits + misses == 0 {
            Value::Null
        } else {
            json!(hits as f64 / (hits + misses) as f64)
        };
        out["stlb"] = json!({
            "entries": s.entries,
            "ways": s.ways,
            "hits": by_trap(&fast),
            "misses": misses,
            "hit_ratio": ratio,
        });
    }
    if let Some(c) = m.climber() {
        out["dynamic"] = c.json("trap cycles");
    }
    if let (Some(q), Some(refills)) = (&p.micro, m.micro_refills()) {
        out["micro"] = json!({
            "entries": q.tlb.entries,
            "refills": refills,
        });
    }
    if p.prefetch.on() {
        let w = m.prefetch_work();
        let [l2, l1u, l1k] = p.prefetch.entries;
        let [in_l2, in_l1u, in_l1k] = w.inserted_by_class;
        out["prefetch"] = json!({
            "l2_entries": l2,
            "l1u_entries": l1u,
            "l1k_entries": l1k,
            "probes": w.probes,
            "inserted": w.inserted(),
            "evicted": w.evicted,
            "inserted_by_class": {"L2": in_l2, "L1U": in_l1u, "L1K": in_l1k},
        });
    }
    out
}

/// The `traps` object (as made by [`traps_json`]) as a plain-text table, in the layout of
/// Uhlig's Tables V and VI: per trap type the count, how many were nested, the cycles per
/// trap and the seconds.
pub fn traps_table(t: &Value) -> String {
    let m = &t["model"];
    let mut out = format!(
        "traps ({}-level page table, placement {}, {} lower + {} upper slots, costs {} at {} ns/cycle)\n",
        m["levels"],
        m["placement"].as_str().unwrap_or("?"),
        m["lower_slots"],
        m["upper_slots"],
        m["costs"].as_str().unwrap_or("?"),
        m["cycle_ns"]
    );
    out.push_str(&format!(
        "{:<10} {:>14} {:>12} {:>10} {:>12}\n",
        "type", "count", "nested", "cycles", "seconds"
    ));
    let num = |v: &Value| v.as_u64().map_or("-".to_string(), |n| n.to_string());
    let secs = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.6}"));
    for name in ALL_TRAPS.iter().map(|t| t.name()).chain(["total"]) {
        out.push_str(&format!(
            "{:<10} {:>14} {:>12} {:>10} {:>12}\n",
            name,
            num(&t["counts"][name]),
            if name == "total" {
                String::new()
            } else {
                num(&t["nested"][name])
            },
            if name == "total" {
                String::new()
            } else {
                num(&t["cycles_per_trap"][name])
            },
            secs(&t["seconds"][name]),
        ));
    }
    for extra in ["stlb_miss", "prefetch", "l1u_count", "micro"] {
        if t["cycles"][extra].as_u64().unwrap_or(0) > 0 {
            out.push_str(&format!(
                "{:<10} {:>14} {:>12} {:>10} {:>12}\n",
                extra,
                "",
                "",
                num(&t["cycles_per_trap"][extra]),
                secs(&t["seconds"][extra])
            ));
        }
    }
    if let Some(s) = t.get("stlb") {
        out.push_str(&format!(
            "stlb: {} entries, {}-way, {} misses, hit ratio {}\n",
            s["entries"],
            s["ways"],
            s["misses"],
            s["hit_ratio"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.3}"))
        ));
    }
    out
}
