//! Uhlig et al. (TOCS 1994) Tables VI and VII, exactly, from Table V's counts and Table III's
//! costs: the published numbers that follow from published data, as pure functions.
//!
//! Rounding, as the paper did it (checked on every cell):
//! * Table VI: each cell is its exact seconds (count × cycles × 60 ns) rounded to 0.01 s;
//!   the total is the *exact* total rounded (not the sum of rounded cells: Ultrix's cells sum
//!   to 11.81, its total is 11.82); "% of run time" is the exact total over Table V's run time,
//!   rounded to 0.01 %.
//! * Table VII: "previous" and "new" cells and totals as in Table VI; "time saved" per row is
//!   the difference of the *rounded* cells (L2: 8.08 − 0.79 = 7.29, where the exact saving is
//!   7.284), and the total saved is the sum of those (48.28, where 106.56 − 58.29 = 48.27).
//!
//! All arithmetic is in integers (picoseconds per cycle, hundredths of a second), so no
//! floating-point rounding can move a cell.

use serde_json::Value;

use lookaside::mmu::{CostTable, Trap, ALL_TRAPS, TRAPS};

/// The paper's tables as transcribed (Tables III, V, VI, VII, VIII, IX), JSON.
pub const PUBLISHED_JSON: &str = include_str!("../data/uhlig94-tables.json");

/// The published tables, parsed.
pub fn published() -> Value {
    serde_json::from_str(PUBLISHED_JSON).expect("the shipped table file is valid JSON")
}

/// One system's row of Table V.
#[derive(Clone, Debug, PartialEq)]
pub struct TableVRow {
    /// `Ultrix`, `OSF/1`, `Mach3`, `Mach3+AFSin`, `Mach3+AFSout`.
    pub system: String,
    pub run_time_s: u64,
    /// Traps per type in Table III order; `None` where the paper has no cell (Ultrix L3).
    pub counts: [Option<u64>; TRAPS],
    /// The printed total (OSF/1 and Mach3 rows sum to one more, from averaging over runs).
    pub total: u64,
    /// The shipped cost table of the Table III column the paper priced the system with.
    pub cost_table: &'static str,
}

/// Table V, from the shipped transcription.
pub fn table_v() -> Vec<TableVRow> {
    let p = published();
    let v = &p["table_V_miss_counts"];
    let column = &p["cost_column_used_by_system"];
    let mut rows = Vec::new();
    for system in ["Ultrix", "OSF/1", "Mach3", "Mach3+AFSin", "Mach3+AFSout"] {
        let r = &v[system];
        let cost_table = match column[system].as_str() {
            Some("Ultrix") => "ultrix",
            Some("OSF/1") => "osf1",
            _ => "mach3",
        };
        rows.push(TableVRow {
            system: system.into(),
            run_time_s: r["run_time_s"].as_u64().unwrap_or(0),
            counts: ALL_TRAPS.map(|t| r[t.name()].as_u64()),
            total: r["Total"].as_u64().unwrap_or(0),
            cost_table,
        });
    }
    rows
}

/// `n / d` rounded half up (`d > 0`).
fn div_round(n: u128, d: u128) -> i64 {
    ((n + d / 2) / d) as i64
}

/// Exact cost of `count` traps of `cycles` cycles at `cycle_ps` picoseconds, in ps.
fn picoseconds(count: u64, cycles: u32, cycle_ps: u64) -> u128 {
    count as u128 * cycles as u128 * cycle_ps as u128
}

/// Picoseconds in a hundredth of a second.
const PS_PER_HUNDREDTH: u128 = 10_000_000_000;

/// Seconds in hundredths (as the paper prints them), rounded half up.
pub fn hundredths(count: u64, cycles: u32, cycle_ps: u64) -> i64 {
    div_round(picoseconds(count, cycles, cycle_ps), PS_PER_HUNDREDTH)
}

/// One row of Table VI, in hundredths (seconds, and percent of run time).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableViRow {
    /// Seconds per trap type (Table III order); `None` where there is no count or no cost.
    pub cells: [Option<i64>; TRAPS],
    pub total: i64,
    pub pct_run_time: i64,
}

/// Table VI's row for `counts` priced by `costs`, over a run of `run_time_s` seconds.
pub fn table_vi_row(
    counts: &[Option<u64>; TRAPS],
    costs: &CostTable,
    run_time_s: u64,
) -> TableViRow {
    let ps = costs.cycle_ps();
    let mut cells = [None; TRAPS];
    let mut exact: u128 = 0;
    for t in ALL_TRAPS {
        let i = t as usize;
        if let (Some(n), Some(c)) = (counts[i], costs.cycles[i]) {
            exact += picoseconds(n, c, ps);
            cells[i] = Some(hundredths(n, c, ps));
        }
    }
    // percent × 100 = exact / 1e12 / run × 100 × 100.
    let pct = if run_time_s == 0 {
        0
    } else {
        div_round(exact, run_time_s as u128 * 100_000_000)
    };
    TableViRow {
        cells,
        total: div_round(exact, PS_PER_HUNDREDTH),
        pct_run_time: pct,
    }
}

/// Table II's last column: a total over the baseline's total, both in hundredths, as a ratio
/// in hundredths (51.85 / 11.82 → 4.39).
pub fn ratio_hundredths(total: i64, base: i64) -> i64 {
    div_round(total as u128 * 100, base as u128)
}

/// One row of Table VII (hundredths of a second).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableViiRow {
    pub trap: Trap,
    pub previous_cycles: u32,
    pub new_cycles: u32,
    pub count: u64,
    pub previous: i64,
    pub new: i64,
    pub saved: i64,
}

/// Table VII: the same counts priced by two cost tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableVii {
    /// In the paper's row order: L1U, L2, L1K, L3, Modify, Invalid.
    pub rows: Vec<TableViiRow>,
    pub count: u64,
    pub previous: i64,
    pub new: i64,
    pub saved: i64,
}

/// Table VII for `counts` (Table III order), priced by `previous` and by `new` (both must
/// cost every type; the error names the first that is missing).
pub fn table_vii(
    counts: &[u64; TRAPS],
    previous: &CostTable,
    new: &CostTable,
) -> Result<TableVii, String> {
    let (pp, np) = (previous.cycle_ps(), new.cycle_ps());
    let mut rows = Vec::new();
    let (mut exact_prev, mut exact_new, mut saved) = (0u128, 0u128, 0i64);
    for t in [
        Trap::L1U,
        Trap::L2,
        Trap::L1K,
        Trap::L3,
        Trap::Modify,
        Trap::Invalid,
    ] {
        let n = counts[t as usize];
        let cost = |c: &CostTable| {
            c.cycles_of(t)
                .ok_or_else(|| format!("cost table '{}' has no {} cost", c.name, t.name()))
        };
        let (pc, nc) = (cost(previous)?, cost(new)?);
        exact_prev += picoseconds(n, pc, pp);
        exact_new += picoseconds(n, nc, np);
        let (p, q) = (hundredths(n, pc, pp), hundredths(n, nc, np));
        saved += p - q;
        rows.push(TableViiRow {
            trap: t,
            previous_cycles: pc,
            new_cycles: nc,
            count: n,
            previous: p,
            new: q,
            saved: p - q,
        });
    }
    Ok(TableVii {
        rows,
        count: counts.iter().sum(),
        previous: div_round(exact_prev, PS_PER_HUNDREDTH),
        new: div_round(exact_new, PS_PER_HUNDREDTH),
        saved,
    })
}

/// Every cell of Tables VI, VII and Table II's ratios, ours beside the published value:
/// `[{table, row, column, published, ours}]` with seconds (or %, or ratios) as printed. What
/// `lookaside reproduce uhlig94` compares; the tests below assert the same equalities.
pub fn cells_json() -> Value {
    let p = published();
    let vi = &p["table_VI_service_time_s"];
    let mut cells = Vec::new();
    let mut cell = |table: &str, row: &str, column: &str, published: &Value, ours: Option<i64>| {
        cells.push(serde_json::json!({
            "table": table, "row": row, "column": column,
            "published": published.as_f64(),
            "ours": ours.map(|h| h as f64 / 100.0),
        }));
    };
    let mut totals = Vec::new();
    for r in table_v() {
        let Ok(costs) = CostTable::preset(r.cost_table) else {
            continue;
        };
        let row = table_vi_row(&r.counts, &costs, r.run_time_s);
        let want = &vi[&r.system];
        for t in ALL_TRAPS {
            cell(
                "VI",
                &r.system,
                t.name(),
                &want[t.name()],
                row.cells[t as usize],
            );
        }
        cell("VI", &r.system, "Total", &want["Total"], Some(row.total));
        cell(
            "VI",
            &r.system,
            "% of run time",
            &want["pct_run_time"],
            Some(row.pct_run_time),
        );
        totals.push((r.system.clone(), row.total));
    }
    let base = totals.first().map_or(1, |t| t.1);
    let published_ratio = [1.0, 4.39, 6.77, 9.02, 11.40];
    for ((system, total), want) in totals.iter().zip(published_ratio) {
        cell(
            "II",
            system,
            "ratio to Ultrix",
            &Value::from(want),
            Some(ratio_hundredths(*total, base)),
        );
    }
    let vii = &p["table_VII_Mach3+AFSin_new_costs"];
    if let (Some(afsin), Ok(before), Ok(after)) = (
        table_v().into_iter().find(|r| r.system == "Mach3+AFSin"),
        CostTable::preset("mach3"),
        CostTable::preset("mach3-new-vectors"),
    ) {
        let counts = afsin.counts.map(|c| c.unwrap_or(0));
        if let Ok(t) = table_vii(&counts, &before, &after) {
            for r in &t.rows {
                let name = r.trap.name();
                cell("VII", name, "new", &vii["new_total_s"][name], Some(r.new));
                let saved = vii["time_saved_s"]
                    .get(name)
                    .cloned()
                    .unwrap_or(Value::from(0.0));
                cell("VII", name, "saved", &saved, Some(r.saved));
            }
            cell(
                "VII",
                "Total",
                "new",
                &vii["new_total_s"]["Total"],
                Some(t.new),
            );
            cell(
                "VII",
                "Total",
                "saved",
                &vii["time_saved_s"]["Total"],
                Some(t.saved),
            );
        }
    }
    Value::from(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A published value in seconds as hundredths.
    fn h(v: &Value) -> i64 {
        (v.as_f64().expect("a number") * 100.0).round() as i64
    }

    #[test]
    fn table_iii_is_the_shipped_cost_tables() {
        let p = published();
        for (column, name) in [
            ("Ultrix", "ultrix"),
            ("OSF/1", "osf1"),
            ("Mach 3.0", "mach3"),
        ] {
            let t = CostTable::preset(name).unwrap();
            for trap in ALL_TRAPS {
                let published = p["table_III_miss_cost_cycles"][column][trap.name()].as_u64();
                assert_eq!(
                    t.cycles_of(trap).map(u64::from),
                    published,
                    "{column} {trap:?}"
                );
            }
        }
    }

    #[test]
    fn table_v_rows_sum_to_their_totals_within_averaging() {
        for r in table_v() {
            let sum: u64 = r.counts.iter().flatten().sum();
            let off = sum as i64 - r.total as i64;
            // OSF/1 and Mach3 sum to one more than printed (averages over three runs).
            assert!(off == 0 || (off == 1 && ["OSF/1", "Mach3"].contains(&r.system.as_str())));
        }
    }

    /// Every published cell of Table VI, and the % of run time, from Tables V and III.
    #[test]
    fn table_vi_exactly() {
        let p = published();
        let vi = &p["table_VI_service_time_s"];
        let mut totals = Vec::new();
        for r in table_v() {
            let costs = CostTable::preset(r.cost_table).unwrap();
            let row = table_vi_row(&r.counts, &costs, r.run_time_s);
            let want = &vi[&r.system];
            for t in ALL_TRAPS {
                match want[t.name()].as_f64() {
                    Some(_) => assert_eq!(
                        row.cells[t as usize],
                        Some(h(&want[t.name()])),
                        "{} {t:?}",
                        r.system
                    ),
                    None => assert_eq!(row.cells[t as usize], None, "{} {t:?}", r.system),
                }
            }
            assert_eq!(row.total, h(&want["Total"]), "{} total", r.system);
            assert_eq!(row.pct_run_time, h(&want["pct_run_time"]), "{} %", r.system);
            totals.push(row.total);
        }
        // Table II's ratios to Ultrix.
        let ratios: Vec<i64> = totals
            .iter()
            .map(|&t| ratio_hundredths(t, totals[0]))
            .collect();
        assert_eq!(ratios, [100, 439, 677, 902, 1140]);
    }

    /// Table VII: Mach3+AFSin re-priced with L1K = 20 and L2 = 40 cycles.
    #[test]
    fn table_vii_exactly() {
        let p = published();
        let vii = &p["table_VII_Mach3+AFSin_new_costs"];
        let afsin = table_v()
            .into_iter()
            .find(|r| r.system == "Mach3+AFSin")
            .unwrap();
        let counts = afsin.counts.map(|c| c.unwrap());
        let before = CostTable::preset("mach3").unwrap();
        let after = CostTable::preset("mach3-new-vectors").unwrap();
        let t = table_vii(&counts, &before, &after).unwrap();
        let vi = &p["table_VI_service_time_s"]["Mach3+AFSin"];
        for r in &t.rows {
            let name = r.trap.name();
            assert_eq!(
                r.new_cycles as u64,
                vii["new_cost_cycles"][name].as_u64().unwrap()
            );
            assert_eq!(r.previous, h(&vi[name]), "previous {name}");
            assert_eq!(r.new, h(&vii["new_total_s"][name]), "new {name}");
            let saved = vii["time_saved_s"].get(name).map_or(0, h);
            assert_eq!(r.saved, saved, "saved {name}");
        }
        assert_eq!(t.count, 33_933_413);
        assert_eq!(t.previous, 10_656);
        assert_eq!(t.new, h(&vii["new_total_s"]["Total"]));
        assert_eq!(t.saved, h(&vii["time_saved_s"]["Total"]));
        // What `reproduce uhlig94` shows agrees cell by cell.
        for c in cells_json().as_array().unwrap() {
            assert_eq!(c["published"], c["ours"], "{c}");
        }
        assert!(
            table_vii(&counts, &CostTable::preset("ultrix").unwrap(), &after)
                .unwrap_err()
                .contains("no L3 cost")
        );
    }
}
