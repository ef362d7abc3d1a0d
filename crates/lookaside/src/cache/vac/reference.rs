//! A brute-force virtually indexed, physically tagged cache for the tests: sets as vectors of
//! lines, LRU by timestamps, tags compared by physical line number — nothing shared with the
//! tag store of [`super::Vac`].

use super::Lines;

#[derive(Clone, Copy, Debug)]
struct Line {
    pline: u64,
    dirty: bool,
    stamp: u64,
}

pub struct RefVac {
    sets: Vec<Vec<Line>>,
    ways: usize,
    line: u64,
    page: u64,
    now: u64,
}

impl RefVac {
    pub fn new(size: u64, ways: usize, line: u64, page: u64) -> RefVac {
        let nsets = (size / line) as usize / ways;
        RefVac {
            sets: vec![Vec::new(); nsets],
            ways,
            line,
            page,
            now: 0,
        }
    }

    fn set(&self, index_addr: u64) -> usize {
        ((index_addr / self.line) % self.sets.len() as u64) as usize
    }

    /// (hit, victim: (pline, dirty)).
    pub fn access(
        &mut self,
        index_addr: u64,
        paddr: u64,
        write: bool,
    ) -> (bool, Option<(u64, bool)>) {
        self.now += 1;
        let s = self.set(index_addr);
        let pline = paddr / self.line;
        let now = self.now;
        let set = &mut self.sets[s];
        if let Some(l) = set.iter_mut().find(|l| l.pline == pline) {
            l.stamp = now;
            l.dirty |= write;
            return (true, None);
        }
        let mut victim = None;
        if set.len() == self.ways {
            let (i, _) = set
                .iter()
                .enumerate()
                .min_by_key(|(_, l)| l.stamp)
                .expect("full set");
            let v = set.remove(i);
            victim = Some((v.pline, v.dirty));
        }
        set.push(Line {
            pline,
            dirty: write,
            stamp: now,
        });
        (false, victim)
    }

    /// Flush or purge one alias of a page; the counts.
    pub fn clear_page(&mut self, index_page: u64, ppage: u64) -> Lines {
        let mut n = Lines::default();
        let mut off = 0;
        while off < self.page {
            n.visited += 1;
            let s = self.set(index_page + off);
            let pline = (ppage + off) / self.line;
            if let Some(i) = self.sets[s].iter().position(|l| l.pline == pline) {
                let l = self.sets[s].remove(i);
                n.present += 1;
                n.dirty += l.dirty as u64;
            }
            off += self.line;
        }
        n
    }

    /// Every line as (set, pline, dirty), sorted.
    pub fn content(&self) -> Vec<(usize, u64, bool)> {
        let mut v: Vec<_> = self
            .sets
            .iter()
            .enumerate()
            .flat_map(|(s, set)| set.iter().map(move |l| (s, l.pline, l.dirty)))
            .collect();
        v.sort();
        v
    }
}
