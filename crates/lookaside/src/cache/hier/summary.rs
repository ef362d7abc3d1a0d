//! DineroIV's statistics, printed as DineroIV prints them at the end of a run (its
//! `dostats`), from a result's caches: the same rows, columns, labels and number formats,
//! so that `diff` against DineroIV's output from its `---Simulation complete.` line on shows
//! nothing when the counts agree.
//!
//! Per cache, in DineroIV's order (each level's unified cache, then its instruction cache,
//! then its data cache) and under DineroIV's names (`l1-icache`, `l2-ucache`; a cache's own
//! name when two would share one): demand fetches and their fraction, with prefetching the
//! prefetch and total fetches; demand misses and miss rates, with classification (`3c`) the
//! compulsory, capacity and conflict misses and fractions, with prefetching prefetch and
//! total misses; with sub-blocks the block misses (and their classes); multi-block
//! references and the bytes to and from the next level. Columns: total, instruction fetches,
//! data (reads and writes), reads, writes, and DineroIV's `misc` type (always zero here).

use serde_json::Value;

use crate::event::Kind;

/// DineroIV's stand-in for a zero denominator.
fn nonzero(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        x
    }
}

/// One row of six columns: `label` (with its tabs) and the values, `%12.0f` or `%12.4f`.
fn row(out: &mut String, label: &str, v: [f64; 6], decimals: usize) {
    out.push_str(label);
    let cells: Vec<String> = v.iter().map(|x| format!("{x:12.decimals$}")).collect();
    out.push_str(&cells.join("\t"));
    out.push('\n');
}

/// A count by kind as DineroIV's columns: total, instrn, data, read, write, misc.
fn columns(get: impl Fn(Kind) -> f64) -> [f64; 6] {
    let (f, l, s) = (get(Kind::Fetch), get(Kind::Load), get(Kind::Store));
    [f + l + s, f, l + s, l, s, 0.0]
}

/// `a / b` column by column (DineroIV's rates and fractions).
fn ratio(a: [f64; 6], b: [f64; 6]) -> [f64; 6] {
    std::array::from_fn(|i| a[i] / nonzero(b[i]))
}

/// `a / total` for every column (DineroIV's "fraction of total").
fn share(a: [f64; 6], total: f64) -> [f64; 6] {
    a.map(|x| x / nonzero(total))
}

fn add(a: [f64; 6], b: [f64; 6]) -> [f64; 6] {
    std::array::from_fn(|i| a[i] + b[i])
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// The statistics of one cache (its `structures` entry) under `name`.
fn one(out: &mut String, name: &str, c: &Value) {
    let g = &c["geometry"];
    let prefetching = g["fetch"].as_str().is_some_and(|f| f != "demand");
    let classes = c.get("compulsory").is_some();
    let sub_blocks = g["sub_block"] != g["line"];
    let demand = |field: &str| columns(|k| num(&c["by_kind"][k.name()][field]));
    let pf = |field: &str| columns(|k| num(&c["prefetches"]["by_kind"][k.name()][field]));
    out.push_str(&format!("{name}\n"));
    out.push_str(" Metrics\t\t      Total\t      Instrn\t       Data\t       Read\t      Write\t       Misc\n");
    out.push_str(" -----------------\t      ------\t      ------\t      ------\t      ------\t      ------\t      ------\n");
    let fetches = demand("accesses");
    row(out, " Demand Fetches\t\t", fetches, 0);
    row(out, "  Fraction of total\t", share(fetches, fetches[0]), 4);
    let pf_fetches = pf("accesses");
    if prefetching {
        row(out, " Prefetch Fetches\t", pf_fetches, 0);
        row(out, "  Fraction\t\t", share(pf_fetches, pf_fetches[0]), 4);
        let total = add(fetches, pf_fetches);
        row(out, " Total Fetches\t\t", total, 0);
        row(out, "  Fraction\t\t", share(total, total[0]), 4);
    }
    out.push('\n');
    let misses = demand("misses");
    row(out, " Demand Misses\t\t", misses, 0);
    row(out, "  Demand miss rate\t", ratio(misses, fetches), 4);
    let class_rows = |out: &mut String, labels: [&str; 6], counts: [[f64; 6]; 3], of: [f64; 6]| {
        for (label, n) in labels[..3].iter().zip(counts) {
            row(out, label, n, 0);
        }
        for (label, n) in labels[3..].iter().zip(counts) {
            row(out, label, ratio(n, of), 4);
        }
    };
    if classes {
        class_rows(
            out,
            [
                "   Compulsory misses\t",
                "   Capacity misses\t",
                "   Conflict misses\t",
                "   Compulsory fraction\t",
                "   Capacity fraction\t",
                "   Conflict fraction\t",
            ],
            ["compulsory", "capacity", "conflict"].map(demand),
            misses,
        );
    }
    if prefetching {
        let pf_misses = pf("misses");
        row(out, " Prefetch Misses\t", pf_misses, 0);
        row(out, "  PF miss rate\t\t", ratio(pf_misses, pf_fetches), 4);
        if classes {
            class_rows(
                out,
                [
                    "   PF compulsory misses\t",
                    "   PF capacity misses\t",
                    "   PF conflict misses\t",
                    "   PF compulsory fract\t",
                    "   PF capacity fract\t",
                    "   PF conflict fract\t",
                ],
                ["compulsory", "capacity", "conflict"].map(pf),
                pf_misses,
            );
        }
        let total = add(misses, pf_misses);
        row(out, " Total Misses\t\t", total, 0);
        row(
            out,
            "  Total miss rate\t",
            ratio(total, add(fetches, pf_fetches)),
            4,
        );
    }
    out.push('\n');
    if sub_blocks {
        let b = &c["block_miss_breakdown"];
        let blocks = columns(|k| num(&b["by_kind"][k.name()]));
        row(out, " Demand Block Misses\t", blocks, 0);
        row(out, "  DB miss rate\t\t", ratio(blocks, fetches), 4);
        if classes {
            class_rows(
                out,
                [
                    "   DB compulsory misses\t",
                    "   DB capacity misses\t",
                    "   DB conflict misses\t",
                    "   DB compulsory fract\t",
                    "   DB capacity fract\t",
                    "   DB conflict fract\t",
                ],
                ["compulsory", "capacity", "conflict"]
                    .map(|k| columns(|kind| num(&b[k][kind.name()]))),
                blocks,
            );
        }
        if prefetching {
            let pf_blocks = pf("block_misses");
            row(out, " Prefetch Block Misses\t", pf_blocks, 0);
            row(out, "  PFB miss rate\t\t", ratio(pf_blocks, pf_fetches), 4);
            if classes {
                let pb = &c["prefetches"]["block_classes"];
                class_rows(
                    out,
                    [
                        "   PFB comp misses\t",
                        "   PFB cap misses\t",
                        "   PFB conf misses\t",
                        "   PFB comp fract\t",
                        "   PFB cap fract\t",
                        "   PFB conf fract\t",
                    ],
                    ["compulsory", "capacity", "conflict"]
                        .map(|k| columns(|kind| num(&pb[k][kind.name()]))),
                    pf_blocks,
                );
            }
            let total = add(blocks, pf_blocks);
            row(out, " Total Block Misses\t", total, 0);
            row(
                out,
                "  Tot blk miss rate\t",
                ratio(total, add(fetches, pf_fetches)),
                4,
            );
        }
        out.push('\n');
    }
    let (read, written) = (num(&c["bytes_read"]), num(&c["bytes_written"]));
    out.push_str(&format!(
        " Multi-block refs      {:12.0}\n",
        num(&c["multi_block"])
    ));
    out.push_str(&format!(" Bytes From Memory\t{read:12.0}\n"));
    out.push_str(&format!(
        " ( / Demand Fetches)\t{:12.4}\n",
        read / nonzero(fetches[0])
    ));
    out.push_str(&format!(" Bytes To Memory\t{written:12.0}\n"));
    out.push_str(&format!(
        " ( / Demand Writes)\t{:12.4}\n",
        written / nonzero(fetches[4])
    ));
    out.push_str(&format!(" Total Bytes r/w Mem\t{:12.0}\n", read + written));
    out.push_str(&format!(
        " ( / Demand Fetches)\t{:12.4}\n",
        (read + written) / nonzero(fetches[0])
    ));
    out.push('\n');
}

/// DineroIV's end-of-run statistics of the caches of `result` (a result's JSON), from its
/// `---Simulation complete.` line to its `---Execution complete.` line; an error when the
/// machine has no `[[cache]]`.
pub fn dinero_summary(result: &Value) -> Result<String, String> {
    let Some(structures) = result["structures"].as_object() else {
        return Err("not a Lookaside result".into());
    };
    // (level, DineroIV's u/i/d order, position, name, the cache).
    let mut caches: Vec<(u64, usize, usize, &str, &Value)> = structures
        .iter()
        .filter(|(_, s)| s["type"] == "cache")
        .enumerate()
        .map(|(i, (name, s))| {
            let g = &s["geometry"];
            let side = match g["serves"].as_str() {
                Some("instruction") => 1,
                Some("data") => 2,
                _ => 0,
            };
            (g["level"].as_u64().unwrap_or(1), side, i, name.as_str(), s)
        })
        .collect();
    if caches.is_empty() {
        return Err(
            "the machine has no [[cache]]: DineroIV's statistics are those of caches (add --cache)"
                .into(),
        );
    }
    caches.sort_by_key(|c| (c.0, c.1, c.2));
    let dinero_name =
        |c: &(u64, usize, usize, &str, &Value)| format!("l{}-{}cache", c.0, ["u", "i", "d"][c.1]);
    let mut out = String::from("---Simulation complete.\n");
    for c in &caches {
        let shared = caches.iter().filter(|o| (o.0, o.1) == (c.0, c.1)).count() > 1;
        let name = if shared {
            c.3.to_string()
        } else {
            dinero_name(c)
        };
        one(&mut out, &name, c.4);
    }
    out.push_str("---Execution complete.\n");
    Ok(out)
}
