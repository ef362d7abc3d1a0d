//! Obviously-right models of each organisation, for the tests: lists and maps, no links, no
//! slots. They say what a lookup must find and how far down its chain.

use std::collections::{HashMap, HashSet};

use super::{xor_hash, Walk, PAGE_SHIFT};

type Key = (u32, u64);

/// What every model answers.
pub trait Model {
    fn lookup(&mut self, space: u32, vpn: u64) -> Walk;
    fn insert(&mut self, space: u32, vpn: u64, shift: u32, frame: u64);
    fn remove(&mut self, space: u32, vpn: u64) -> bool;
    fn table_bytes(&self) -> u64;
}

/// A hashed table as a list per bucket: the first `ways` are the head bucket.
pub struct RefHashed {
    pub buckets: usize,
    pub ways: usize,
    pub move_to_head: bool,
    pub lists: Vec<Vec<Option<(Key, u64)>>>,
}

impl RefHashed {
    pub fn new(buckets: usize, ways: usize, move_to_head: bool) -> Self {
        RefHashed {
            buckets,
            ways,
            move_to_head,
            lists: vec![vec![None; ways]; buckets],
        }
    }
    fn b(&self, s: u32, v: u64) -> usize {
        (xor_hash(s, v) % self.buckets as u64) as usize
    }
}

impl Model for RefHashed {
    fn lookup(&mut self, space: u32, vpn: u64) -> Walk {
        let b = self.b(space, vpn);
        let ways = self.ways;
        let l = &mut self.lists[b];
        let pos = l
            .iter()
            .position(|e| e.is_some_and(|(k, _)| k == (space, vpn)));
        let mut w = Walk::default();
        match pos {
            Some(i) if i < ways => {
                w.frame = l[i].map(|e| e.1);
                w.chain = 1;
                w.head = true;
                w.second_way = i > 0;
            }
            Some(i) => {
                w.frame = l[i].map(|e| e.1);
                w.chain = (i - ways + 2) as u32;
                w.second_way = ways > 1;
                if self.move_to_head {
                    l.swap(i, ways - 1);
                }
            }
            None => {
                w.chain = (l.len() - ways + 1) as u32;
                w.second_way = ways > 1;
            }
        }
        w
    }
    fn insert(&mut self, space: u32, vpn: u64, _shift: u32, frame: u64) {
        let b = self.b(space, vpn);
        let l = &mut self.lists[b];
        match l[..self.ways].iter().position(|e| e.is_none()) {
            Some(i) => l[i] = Some(((space, vpn), frame)),
            None => l.push(Some(((space, vpn), frame))),
        }
    }
    fn remove(&mut self, space: u32, vpn: u64) -> bool {
        let b = self.b(space, vpn);
        let ways = self.ways;
        let l = &mut self.lists[b];
        let Some(i) = l
            .iter()
            .position(|e| e.is_some_and(|(k, _)| k == (space, vpn)))
        else {
            return false;
        };
        if i < ways {
            l[i] = if l.len() > ways { l.remove(ways) } else { None };
        } else {
            l.remove(i);
        }
        true
    }
    fn table_bytes(&self) -> u64 {
        (self.buckets * self.ways) as u64 * 16
    }
}

/// An inverted table as a list per anchor, newest first.
pub struct RefInverted {
    pub hat: usize,
    pub frames: u64,
    pub lists: Vec<Vec<(Key, u64)>>,
}

impl RefInverted {
    pub fn new(hat: usize, frames: u64) -> Self {
        RefInverted {
            hat,
            frames,
            lists: vec![Vec::new(); hat],
        }
    }
}

impl Model for RefInverted {
    fn lookup(&mut self, space: u32, vpn: u64) -> Walk {
        let l = &self.lists[(xor_hash(space, vpn) % self.hat as u64) as usize];
        let mut w = Walk::default();
        match l.iter().position(|e| e.0 == (space, vpn)) {
            Some(i) => {
                w.frame = Some(l[i].1);
                w.chain = i as u32 + 1;
                w.head = i == 0;
            }
            None => w.chain = (l.len() as u32).max(1),
        }
        w
    }
    fn insert(&mut self, space: u32, vpn: u64, _shift: u32, frame: u64) {
        let a = (xor_hash(space, vpn) % self.hat as u64) as usize;
        self.lists[a].insert(0, ((space, vpn), frame));
    }
    fn remove(&mut self, space: u32, vpn: u64) -> bool {
        let a = (xor_hash(space, vpn) % self.hat as u64) as usize;
        let l = &mut self.lists[a];
        match l.iter().position(|e| e.0 == (space, vpn)) {
            Some(i) => {
                l.remove(i);
                true
            }
            None => false,
        }
    }
    fn table_bytes(&self) -> u64 {
        self.hat as u64 * 4 + self.frames * 16
    }
}

/// A forward-mapped table as a map of leaves and a set of table pages.
pub struct RefRadix {
    pub bits: Vec<u32>,
    pub entry_bytes: u64,
    /// (space, level, page number >> bits below the level) → frame.
    pub leaves: HashMap<(u32, usize, u64), u64>,
    /// (space, level, prefix above the level): a table page of that level exists.
    pub nodes: HashSet<(u32, usize, u64)>,
}

impl RefRadix {
    pub fn new(bits: Vec<u32>, entry_bytes: u64) -> Self {
        RefRadix {
            bits,
            entry_bytes,
            leaves: HashMap::new(),
            nodes: HashSet::new(),
        }
    }
    fn below(&self, l: usize) -> u32 {
        self.bits[l + 1..].iter().sum()
    }
    fn total(&self) -> u32 {
        self.bits.iter().sum()
    }
}

impl Model for RefRadix {
    fn lookup(&mut self, space: u32, vpn: u64) -> Walk {
        let mut w = Walk::default();
        if vpn >> self.total() != 0 || !self.nodes.contains(&(space, 0, 0)) {
            return w;
        }
        for l in 0..self.bits.len() {
            w.chain += 1;
            let b = self.below(l);
            if let Some(&f) = self.leaves.get(&(space, l, vpn >> b)) {
                w.frame = Some(f);
                return w;
            }
            if !self.nodes.contains(&(space, l + 1, vpn >> b)) {
                return w;
            }
        }
        w
    }
    fn insert(&mut self, space: u32, vpn: u64, shift: u32, frame: u64) {
        let n = self.bits.len();
        let Some(leaf) = (0..n).find(|&l| self.below(l) + PAGE_SHIFT == shift) else {
            return;
        };
        for l in 0..leaf {
            if self.leaves.contains_key(&(space, l, vpn >> self.below(l))) {
                return;
            }
        }
        for l in 0..=leaf {
            let prefix = if l == 0 { 0 } else { vpn >> self.below(l - 1) };
            self.nodes.insert((space, l, prefix));
        }
        if leaf + 1 < n
            && self
                .nodes
                .contains(&(space, leaf + 1, vpn >> self.below(leaf)))
        {
            return;
        }
        self.leaves
            .insert((space, leaf, vpn >> self.below(leaf)), frame);
    }
    fn remove(&mut self, space: u32, vpn: u64) -> bool {
        for l in 0..self.bits.len() {
            if self
                .leaves
                .remove(&(space, l, vpn >> self.below(l)))
                .is_some()
            {
                return true;
            }
        }
        false
    }
    fn table_bytes(&self) -> u64 {
        self.nodes
            .iter()
            .map(|&(_, l, _)| (self.entry_bytes << self.bits[l]).max(4096))
            .sum()
    }
}

/// A front table as one MRU-first list per set, in front of another model.
pub struct RefFront<M: Model> {
    pub hybrid: bool,
    pub sets: usize,
    pub ways: usize,
    pub lists: Vec<Vec<(Key, u64)>>,
    pub inner: M,
}

impl<M: Model> RefFront<M> {
    pub fn new(hybrid: bool, sets: usize, ways: usize, inner: M) -> Self {
        RefFront {
            hybrid,
            sets,
            ways,
            lists: vec![Vec::new(); sets],
            inner,
        }
    }
    fn set(&self, s: u32, v: u64) -> usize {
        let k = if self.hybrid { xor_hash(s, v) } else { v };
        (k % self.sets as u64) as usize
    }
}

impl<M: Model> Model for RefFront<M> {
    fn lookup(&mut self, space: u32, vpn: u64) -> Walk {
        let s = self.set(space, vpn);
        let l = &mut self.lists[s];
        if let Some(i) = l.iter().position(|e| e.0 == (space, vpn)) {
            let e = l.remove(i);
            l.insert(0, e);
            return Walk {
                frame: Some(e.1),
                chain: 1,
                head: true,
                ..Walk::default()
            };
        }
        let mut w = self.inner.lookup(space, vpn);
        w.front_miss = true;
        w.head = false;
        w.second_way = self.ways > 1;
        if let Some(f) = w.frame {
            let l = &mut self.lists[s];
            l.insert(0, ((space, vpn), f));
            l.truncate(self.ways);
        }
        w
    }
    fn insert(&mut self, space: u32, vpn: u64, shift: u32, frame: u64) {
        self.inner.insert(space, vpn, shift, frame);
    }
    fn remove(&mut self, space: u32, vpn: u64) -> bool {
        let s = self.set(space, vpn);
        self.lists[s].retain(|e| e.0 != (space, vpn));
        self.inner.remove(space, vpn)
    }
    fn table_bytes(&self) -> u64 {
        self.inner.table_bytes() + (self.sets * self.ways) as u64 * 16
    }
}
