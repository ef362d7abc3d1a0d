//! Memory access maps (Chen 1994, Figures 7-12 to 7-14): which pages a trace touches in each
//! interval of time, for judging whether large pages (superpages) would map them well.
//!
//! Time is counted in instructions (fetches), as in the thesis; an interval is `interval`
//! instructions. A cell (page, interval) is set when a selected reference touched the page
//! during the interval. Pages are per address space when the trace has several.
//!
//! Memory is one bit per (distinct page, interval), capped: past [`MAX_CELLS`] the map stops
//! growing and [`AccessMap::truncated_at`] says at which interval it stopped.

use std::collections::HashMap;

use serde::Serialize;

use super::TraceSource;
use crate::error::Result;
use crate::event::{Event, Kind};

/// Most (page × interval) cells kept.
pub const MAX_CELLS: u64 = 1 << 30;

/// Which references count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Select {
    Instructions,
    Data,
    All,
}

impl Select {
    pub fn parse(s: &str) -> std::result::Result<Select, String> {
        match s {
            "instruction" | "instructions" => Ok(Select::Instructions),
            "data" => Ok(Select::Data),
            "all" => Ok(Select::All),
            _ => Err(format!(
                "'{s}' is not a reference selection (instruction, data, all)"
            )),
        }
    }

    fn wants(self, kind: Kind) -> bool {
        match self {
            Select::Instructions => kind == Kind::Fetch,
            Select::Data => matches!(kind, Kind::Load | Kind::Store),
            Select::All => kind.is_ref(),
        }
    }
}

/// The map of one trace.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AccessMap {
    pub page_bytes: u64,
    pub interval_instructions: u64,
    pub intervals: u64,
    /// Distinct (address space, page number), ascending.
    pub pages: Vec<(u32, u64)>,
    /// Per page of `pages`, the intervals in which it was touched, ascending.
    pub touched: Vec<Vec<u64>>,
    /// The interval at which the cell cap stopped the map, if it did.
    pub truncated_at: Option<u64>,
}

/// Read `source` to the end and build its map.
pub fn access_map(
    source: &mut dyn TraceSource,
    page_shift: u32,
    interval: u64,
    select: Select,
) -> Result<AccessMap> {
    let interval = interval.max(1);
    let mut pages: HashMap<(u32, u64), Vec<u64>> = HashMap::new();
    let (mut instructions, mut cells) = (0u64, 0u64);
    let mut truncated_at = None;
    // The last page recorded in the current interval per stream: most references repeat it.
    let mut last = [(u32::MAX, u64::MAX, u64::MAX); 2];
    let mut batch: Vec<Event> = Vec::new();
    while source.next_batch(&mut batch)? {
        for e in &batch {
            // A data reference belongs to the instruction fetched last.
            let now = if e.kind == Kind::Fetch {
                instructions += 1;
                (instructions - 1) / interval
            } else {
                instructions.saturating_sub(1) / interval
            };
            if !select.wants(e.kind) || truncated_at.is_some() {
                continue;
            }
            let key = (e.asid, e.addr >> page_shift);
            let s = (e.kind != Kind::Fetch) as usize;
            if last[s] == (key.0, key.1, now) {
                continue;
            }
            last[s] = (key.0, key.1, now);
            let v = pages.entry(key).or_default();
            if v.last() != Some(&now) {
                v.push(now);
                cells += 1;
                if cells >= MAX_CELLS {
                    truncated_at = Some(now);
                }
            }
        }
    }
    let mut keys: Vec<(u32, u64)> = pages.keys().copied().collect();
    keys.sort_unstable();
    let touched = keys
        .iter()
        .map(|k| pages.remove(k).unwrap_or_default())
        .collect();
    Ok(AccessMap {
        page_bytes: 1 << page_shift,
        interval_instructions: interval,
        intervals: instructions.div_ceil(interval),
        pages: keys,
        touched,
        truncated_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tests::VecSource;

    #[test]
    fn cells_are_pages_touched_per_interval_of_instructions() {
        let f = |a| Event::reference(Kind::Fetch, a, 4);
        let l = |a| Event::reference(Kind::Load, a, 8);
        // Two instructions per interval; a load belongs to the instruction before it:
        // [f 0x1000, l 0x5000, f 0x1004, l 0x9000] [f 0x2000, l 0x5008]
        let events = vec![
            f(0x1000),
            l(0x5000),
            f(0x1004),
            l(0x9000),
            f(0x2000),
            l(0x5008),
        ];
        let map = |sel| access_map(&mut VecSource::new(events.clone(), 4), 12, 2, sel).unwrap();
        let d = map(Select::Data);
        assert_eq!(d.pages, vec![(0, 5), (0, 9)]);
        assert_eq!(d.touched, vec![vec![0, 1], vec![0]]);
        assert_eq!(d.intervals, 2);
        let i = map(Select::Instructions);
        assert_eq!(i.pages, vec![(0, 1), (0, 2)]);
        assert_eq!(i.touched, vec![vec![0], vec![1]]);
        assert_eq!(map(Select::All).pages.len(), 4);
    }
}
