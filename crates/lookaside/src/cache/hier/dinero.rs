//! A brute-force transcription of DineroIV's reference handling (`d4ref`, `d4_dopending`,
//! `d4copyback` of Dinero IV 7), for the tests: every set a list of its valid blocks, most
//! recently used (LRU) or most recently filled (FIFO) first, exactly DineroIV's priority
//! stack; one stack of pending references per cache, processed as DineroIV processes it
//! (recursively, each `d4ref` draining its cache's stack at its end); the fully associative
//! cache and the infinite cache of its `-ccc` classification. Nothing is shared with the
//! engine but the config types; slow on purpose.

use std::collections::HashMap;

use crate::config::{Allocate, FetchPolicy};

/// DineroIV's access types, as indices of its count arrays (demand: 0..3, prefetch: +3).
pub const READ: usize = 0;
pub const WRITE: usize = 1;
pub const INSTRN: usize = 2;

/// One cache's parameters.
#[derive(Clone, Debug)]
pub struct Params {
    pub block: u64,
    pub sub: u64,
    pub sets: u64,
    pub assoc: usize,
    pub lru: bool,
    pub write_back: bool,
    pub allocate: Allocate,
    pub fetch: FetchPolicy,
    /// In sub-blocks.
    pub distance: u64,
    pub ccc: bool,
    pub next: Option<usize>,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    block: u64,
    valid: u64,
    dirty: u64,
    referenced: u64,
}

/// A memory reference: DineroIV's `d4memref` (type, prefetch bit, multi-block bit).
#[derive(Clone, Copy, Debug)]
struct MemRef {
    addr: u64,
    size: u64,
    atype: usize,
    prefetch: bool,
    multiblock: bool,
    copyback: bool,
}

/// DineroIV's counters of one cache: `[type + 3 * prefetch]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub fetch: [u64; 6],
    pub miss: [u64; 6],
    pub blockmiss: [u64; 6],
    pub comp: [u64; 6],
    pub cap: [u64; 6],
    pub conf: [u64; 6],
    pub comp_block: [u64; 6],
    pub cap_block: [u64; 6],
    pub conf_block: [u64; 6],
    pub multiblock: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

struct Cache {
    p: Params,
    stacks: Vec<Vec<Node>>,
    full: Vec<Node>,
    inf: HashMap<u64, u64>,
    pending: Vec<MemRef>,
    c: Counts,
}

/// A DineroIV hierarchy: caches by index, the instruction and data caches of the first level.
pub struct Dinero {
    caches: Vec<Cache>,
    ci: usize,
    cd: usize,
}

impl Dinero {
    pub fn new(params: Vec<Params>, ci: usize, cd: usize) -> Dinero {
        Dinero {
            caches: params
                .into_iter()
                .map(|p| Cache {
                    stacks: vec![Vec::new(); p.sets as usize],
                    p,
                    full: Vec::new(),
                    inf: HashMap::new(),
                    pending: Vec::new(),
                    c: Counts::default(),
                })
                .collect(),
            ci,
            cd,
        }
    }

    /// One trace reference (DineroIV's main loop): instruction fetches to `ci`, the rest to
    /// `cd`.
    pub fn reference(&mut self, atype: usize, addr: u64, size: u64) {
        let c = if atype == INSTRN { self.ci } else { self.cd };
        self.d4ref(
            c,
            MemRef {
                addr,
                size,
                atype,
                prefetch: false,
                multiblock: false,
                copyback: false,
            },
        );
    }

    /// The copy-back at exit: of the data cache, propagated down.
    pub fn finish(&mut self) {
        let cd = self.cd;
        self.copyback(cd);
    }

    pub fn counts(&self, i: usize) -> &Counts {
        &self.caches[i].c
    }

    fn d4ref(&mut self, ci: usize, mr: MemRef) {
        if mr.copyback {
            self.copyback(ci);
            return;
        }
        let c = &mut self.caches[ci];
        let p = c.p.clone();
        let block_of = |a: u64| a / p.block * p.block;
        let blockaddr = block_of(mr.addr);
        // d4_splitm
        let mut m = mr;
        if blockaddr != block_of(mr.addr + mr.size - 1) {
            let newsize = p.block - (mr.addr - blockaddr);
            c.pending.push(MemRef {
                addr: blockaddr + p.block,
                size: mr.size - newsize,
                multiblock: true,
                ..mr
            });
            c.c.multiblock += 1;
            m.size = newsize;
        }
        m.multiblock = false;
        let atype = m.atype;
        let set = ((m.addr / p.block) % p.sets) as usize;
        let first_sb = (m.addr - blockaddr) / p.sub;
        let last_sb = (m.addr + m.size - 1 - blockaddr) / p.sub;
        let nsb = last_sb - first_sb + 1;
        let sbbits: u64 = (first_sb..=last_sb).map(|b| 1u64 << b).sum();
        let write = atype == WRITE;
        let walloc = write
            && match p.allocate {
                Allocate::Yes => true,
                Allocate::No => false,
                Allocate::NoFetch => m.size == nsb * p.sub,
            };
        let pos = c.stacks[set].iter().position(|n| n.block == blockaddr);
        let blockmiss = pos.is_none();
        let miss = blockmiss || pos.is_some_and(|i| c.stacks[set][i].valid & sbbits != sbbits);
        // Prefetch on demand reads and instruction fetches.
        if !m.prefetch && (atype == READ || atype == INSTRN) {
            let dist = p.distance * p.sub;
            let sub_of = |a: u64| a / p.sub * p.sub;
            let target = m.addr.wrapping_add(dist);
            let pf = match p.fetch {
                FetchPolicy::Demand => None,
                FetchPolicy::Always => Some(sub_of(target)),
                FetchPolicy::Miss => miss.then(|| sub_of(target)),
                FetchPolicy::Tagged => {
                    let referenced = pos.map_or(0, |i| c.stacks[set][i].referenced);
                    (miss || sbbits & referenced == 0).then(|| sub_of(target))
                }
                FetchPolicy::LoadForward => (block_of(target) == blockaddr).then(|| sub_of(target)),
                FetchPolicy::SubBlock => {
                    let a = sub_of(target);
                    Some(if block_of(a) != blockaddr {
                        a.wrapping_sub(p.block)
                    } else {
                        a
                    })
                }
            };
            if let Some(a) = pf {
                c.pending.push(MemRef {
                    addr: a,
                    size: p.sub,
                    atype,
                    prefetch: true,
                    multiblock: false,
                    copyback: false,
                });
            }
        }
        let mut wback = false;
        if !write || !blockmiss || walloc {
            let stack = &mut c.stacks[set];
            let at = match pos {
                Some(i) => {
                    if p.lru {
                        let n = stack.remove(i);
                        stack.insert(0, n);
                        0
                    } else {
                        i
                    }
                }
                None => {
                    stack.insert(
                        0,
                        Node {
                            block: blockaddr,
                            valid: 0,
                            dirty: 0,
                            referenced: 0,
                        },
                    );
                    0
                }
            };
            let n = &mut stack[at];
            n.valid |= sbbits;
            if !m.prefetch {
                n.referenced |= sbbits;
            }
            wback = write && p.write_back;
            if wback {
                n.dirty |= sbbits;
            }
            if blockmiss && stack.len() > p.assoc {
                let victim = stack.pop().unwrap();
                if victim.valid & victim.dirty != 0 {
                    wbblock(&mut c.pending, &victim, p.sub);
                }
            }
        }
        if write && !wback {
            c.pending.push(m);
        }
        if miss && (!write || (walloc && m.size != nsb * p.sub)) {
            c.pending.push(MemRef {
                atype: if write { READ } else { atype },
                addr: m.addr / p.sub * p.sub,
                size: nsb * p.sub,
                prefetch: false,
                multiblock: false,
                copyback: false,
            });
        }
        let t = atype + if m.prefetch { 3 } else { 0 };
        if p.ccc {
            let lines = p.sets as usize * p.assoc;
            let fpos = c.full.iter().position(|n| n.block == blockaddr);
            let fullblockmiss = fpos.is_none();
            let fullmiss =
                fullblockmiss || fpos.is_some_and(|i| c.full[i].valid & sbbits != sbbits);
            if !write || !fullblockmiss || walloc {
                let at = match fpos {
                    Some(i) if p.lru => {
                        let n = c.full.remove(i);
                        c.full.insert(0, n);
                        0
                    }
                    Some(i) => i,
                    None => {
                        c.full.insert(
                            0,
                            Node {
                                block: blockaddr,
                                valid: 0,
                                dirty: 0,
                                referenced: 0,
                            },
                        );
                        0
                    }
                };
                c.full[at].valid |= sbbits;
                if fullblockmiss && c.full.len() > lines {
                    c.full.pop();
                }
            }
            if miss {
                let mut infmiss = 0;
                if !fullmiss {
                    c.c.conf[t] += 1;
                } else {
                    let seen = c.inf.entry(blockaddr).or_insert(0);
                    infmiss = if *seen & sbbits == sbbits {
                        0
                    } else if *seen == 0 {
                        1
                    } else {
                        -1
                    };
                    *seen |= sbbits;
                    if infmiss != 0 {
                        c.c.comp[t] += 1;
                    } else {
                        c.c.cap[t] += 1;
                    }
                }
                if blockmiss {
                    if !fullblockmiss {
                        c.c.conf_block[t] += 1;
                    } else if infmiss == 1 {
                        c.c.comp_block[t] += 1;
                    } else {
                        c.c.cap_block[t] += 1;
                    }
                }
            }
        }
        c.c.fetch[t] += 1;
        if miss {
            c.c.miss[t] += 1;
            if blockmiss {
                c.c.blockmiss[t] += 1;
            }
        }
        if !self.caches[ci].pending.is_empty() {
            self.dopending(ci);
        }
    }

    fn dopending(&mut self, ci: usize) {
        while let Some(m) = self.caches[ci].pending.pop() {
            if m.prefetch || m.multiblock {
                self.d4ref(ci, m);
                continue;
            }
            let c = &mut self.caches[ci];
            if !m.copyback {
                if m.atype == WRITE {
                    c.c.bytes_written += m.size;
                } else {
                    c.c.bytes_read += m.size;
                }
            }
            if let Some(next) = c.p.next {
                self.d4ref(next, m);
            }
        }
    }

    fn copyback(&mut self, ci: usize) {
        let c = &mut self.caches[ci];
        c.pending.push(MemRef {
            addr: 0,
            size: 0,
            atype: WRITE,
            prefetch: false,
            multiblock: false,
            copyback: true,
        });
        for s in 0..c.stacks.len() {
            for i in 0..c.stacks[s].len() {
                let n = c.stacks[s][i];
                if n.valid & n.dirty != 0 {
                    wbblock(&mut c.pending, &n, c.p.sub);
                    c.stacks[s][i].dirty = 0;
                }
            }
        }
        self.dopending(ci);
    }
}

/// DineroIV's `d4_wbblock`: one write per contiguous run of dirty sub-blocks, pushed in
/// increasing address order.
fn wbblock(pending: &mut Vec<MemRef>, n: &Node, sub: u64) {
    let dirty = n.valid & n.dirty;
    let mut b = 0;
    while b < 64 {
        if dirty & (1 << b) == 0 {
            b += 1;
            continue;
        }
        let start = b;
        while b < 64 && dirty & (1 << b) != 0 {
            b += 1;
        }
        pending.push(MemRef {
            addr: n.block + start * sub,
            size: (b - start) * sub,
            atype: WRITE,
            prefetch: false,
            multiblock: false,
            copyback: false,
        });
    }
}
