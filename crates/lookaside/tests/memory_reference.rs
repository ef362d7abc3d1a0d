//! The assembled memory system — split or unified first level, an optional second level,
//! write-through or write-back, write-allocate or not, fetch blocks wider than a line,
//! uncached ranges, caches private per mode, the idle loop, references spanning two lines —
//! against a brute-force model written from `cache/system.rs`'s module documentation, on
//! random event streams. Each cache is LRU (every policy of the cache itself is compared
//! with its own reference model in the cache's tests) and there is no write buffer (its
//! timing has its own cycle-by-cycle model): what is under test is how the parts are put
//! together — which cache a reference reaches, what a miss costs and whom it is charged to,
//! where a dirty victim goes (into the second level), and the copy-back at the end.

use lookaside::config::MachineConfig;
use lookaside::event::{Event, Kind, Mode};
use lookaside::machine::Machine;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Value;

/// Marker payloads opening and closing the idle loop.
const IDLE: [u64; 2] = [7, 8];
/// Virtual range that bypasses the caches (when the machine has it).
const UNCACHED: (u64, u64) = (0x8000, 0x9000);
const UNCACHED_CYCLES: u64 = 11;

#[derive(Clone, Debug)]
struct CacheSpec {
    size: u64,
    line: u64,
    ways: u64,
    write_back: bool,
    allocate: bool,
    fetch: u64,
    miss_cycles: u64,
}

impl CacheSpec {
    fn toml(&self, table: &str) -> String {
        format!(
            "[memory.{table}]\nsize = {}\nline = {}\nways = {}\nwrite = \"{}\"\n\
             write_allocate = {}\nfetch = {}\nmiss_cycles = {}\n",
            self.size,
            self.line,
            self.ways,
            if self.write_back { "back" } else { "through" },
            self.allocate,
            self.fetch,
            self.miss_cycles
        )
    }
}

/// One LRU cache: per set the lines present, least recent first, each with its dirty bit.
#[derive(Clone, Debug)]
struct RefCache {
    spec: CacheSpec,
    sets: Vec<Vec<(u64, bool)>>,
    reads: u64,
    read_misses: u64,
    writes: u64,
    write_misses: u64,
    fills: u64,
    writebacks: u64,
}

impl RefCache {
    fn new(spec: &CacheSpec) -> RefCache {
        let sets = (spec.size / spec.line / spec.ways) as usize;
        RefCache {
            spec: spec.clone(),
            sets: vec![Vec::new(); sets],
            reads: 0,
            read_misses: 0,
            writes: 0,
            write_misses: 0,
            fills: 0,
            writebacks: 0,
        }
    }

    fn set(&mut self, line: u64) -> &mut Vec<(u64, bool)> {
        let n = self.sets.len() as u64;
        &mut self.sets[(line % n) as usize]
    }

    /// Make `line` the most recent of its set if present; returns whether it was.
    fn touch(&mut self, line: u64, dirty: bool) -> bool {
        let set = self.set(line);
        match set.iter().position(|e| e.0 == line) {
            Some(i) => {
                let (l, d) = set.remove(i);
                set.push((l, d || dirty));
                true
            }
            None => false,
        }
    }

    /// Fill `line`; a dirty victim's address joins `victims`.
    fn put(&mut self, line: u64, dirty: bool, victims: &mut Vec<u64>) {
        self.fills += 1;
        let ways = self.spec.ways as usize;
        let size = self.spec.line;
        let set = self.set(line);
        let mut wrote_back = false;
        if set.len() == ways {
            let (old, was_dirty) = set.remove(0);
            if was_dirty {
                victims.push(old * size);
                wrote_back = true;
            }
        }
        set.push((line, dirty));
        self.writebacks += wrote_back as u64;
    }

    /// Every dirty line's address, in address order; they are clean from now on.
    fn take_dirty(&mut self) -> Vec<u64> {
        let size = self.spec.line;
        let mut out: Vec<u64> = Vec::new();
        for set in &mut self.sets {
            for e in set.iter_mut().filter(|e| e.1) {
                out.push(e.0 * size);
                e.1 = false;
            }
        }
        out.sort_unstable();
        out
    }

    /// A line access; returns (hit, whether the miss stalls for a memory read).
    fn access(&mut self, paddr: u64, write: bool) -> (bool, bool) {
        let mut victims = Vec::new();
        self.access_evicting(paddr, write, &mut victims)
    }

    /// [`RefCache::access`], the addresses of the dirty lines it evicts into `victims`.
    fn access_evicting(&mut self, paddr: u64, write: bool, victims: &mut Vec<u64>) -> (bool, bool) {
        let line = paddr / self.spec.line;
        let wb = self.spec.write_back;
        if write {
            self.writes += 1;
            if self.touch(line, wb) {
                return (true, false);
            }
            self.write_misses += 1;
            if self.spec.allocate {
                self.put(line, wb, victims);
                // Filling a line wider than the word written reads the rest from memory.
                return (false, self.spec.line > 4);
            }
            return (false, false);
        }
        self.reads += 1;
        if self.touch(line, false) {
            return (true, false);
        }
        self.read_misses += 1;
        // The aligned fetch block: the other absent lines first, then the one missed.
        let per = self.spec.fetch / self.spec.line;
        let first = line / per * per;
        for other in first..first + per {
            if other != line && !self.set(other).iter().any(|e| e.0 == other) {
                self.put(other, false, victims);
            }
        }
        self.put(line, false, victims);
        (false, true)
    }
}

/// The caches of one side (everyone, or one mode): indices into `RefMemory::caches`.
#[derive(Clone, Copy, Debug)]
struct Side {
    i: usize,
    d: usize,
    l2: Option<usize>,
}

/// Instructions and stalls (icache, dcache, wbuffer, uncached) of one account.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Account {
    instructions: u64,
    stalls: [u64; 4],
}

struct RefMemory {
    caches: Vec<RefCache>,
    sides: Vec<Side>,
    private_mode: bool,
    uncached: bool,
    idle: bool,
    acct: [Account; 2],
    idle_acct: Account,
    straddles: Vec<u64>,
}

impl RefMemory {
    fn new(
        split: bool,
        l1: &[CacheSpec; 2],
        l2: &Option<CacheSpec>,
        private_mode: bool,
        uncached: bool,
    ) -> RefMemory {
        let mut caches = Vec::new();
        let mut sides = Vec::new();
        for _ in 0..if private_mode { 2 } else { 1 } {
            let i = caches.len();
            caches.push(RefCache::new(&l1[0]));
            let d = if split {
                caches.push(RefCache::new(&l1[1]));
                i + 1
            } else {
                i
            };
            let l2 = l2.as_ref().map(|s| {
                caches.push(RefCache::new(s));
                caches.len() - 1
            });
            sides.push(Side { i, d, l2 });
        }
        let n = caches.len();
        RefMemory {
            caches,
            sides,
            private_mode,
            uncached,
            idle: false,
            acct: [Account::default(); 2],
            idle_acct: Account::default(),
            straddles: vec![0; n],
        }
    }

    fn event(&mut self, e: &Event) {
        if e.kind == Kind::Marker {
            if e.addr == IDLE[0] {
                self.idle = true;
            } else if e.addr == IDLE[1] {
                self.idle = false;
            }
            return;
        }
        let mode = (e.mode == Mode::Kernel) as usize;
        let mut stalls = [0u64; 4];
        let write = e.kind == Kind::Store;
        if self.uncached && e.addr >= UNCACHED.0 && e.addr < UNCACHED.1 {
            if !write {
                stalls[3] += UNCACHED_CYCLES;
            }
        } else {
            let side = self.sides[if self.private_mode { mode } else { 0 }];
            let (l1, comp) = if e.kind == Kind::Fetch {
                (side.i, 0)
            } else {
                (side.d, 1)
            };
            // Identity mapping: the physical address is the virtual one.
            let line = self.caches[l1].spec.line;
            // Every line the reference's bytes touch, in order.
            let last = e.addr + e.size as u64 - 1;
            let mut lines = vec![e.addr];
            for l in e.addr / line + 1..=last / line {
                lines.push(l * line);
                self.straddles[l1] += 1;
            }
            for paddr in lines {
                let mut victims = Vec::new();
                let (_, stall) = self.caches[l1].access_evicting(paddr, write, &mut victims);
                if stall {
                    let mut cycles = self.caches[l1].spec.miss_cycles;
                    if let Some(l2) = side.l2 {
                        if !self.caches[l2].access(paddr, false).0 {
                            cycles += self.caches[l2].spec.miss_cycles;
                        }
                    }
                    stalls[comp] += cycles;
                }
                // Dirty victims go into the second level as writes, after the fill, and
                // cost no stall (there is no write buffer here).
                if let Some(l2) = side.l2 {
                    for v in victims {
                        self.caches[l2].access(v, true);
                    }
                }
            }
        }
        let a = if self.idle {
            &mut self.idle_acct
        } else {
            &mut self.acct[mode]
        };
        a.instructions += (e.kind == Kind::Fetch) as u64;
        for (s, x) in a.stalls.iter_mut().zip(stalls) {
            *s += x;
        }
    }
}

impl RefMemory {
    /// The copy-back at the end: each side's first levels' dirty lines, in address order,
    /// into its second level; then the second level's. Returns the lines flushed per cache.
    fn flush(&mut self) -> Vec<u64> {
        let mut flushed = vec![0; self.caches.len()];
        for side in self.sides.clone() {
            let mut firsts = vec![side.d, side.i];
            firsts.dedup();
            for l1 in firsts {
                let dirty = self.caches[l1].take_dirty();
                flushed[l1] += dirty.len() as u64;
                if let Some(l2) = side.l2 {
                    for a in dirty {
                        self.caches[l2].access(a, true);
                    }
                }
            }
            if let Some(l2) = side.l2 {
                flushed[l2] += self.caches[l2].take_dirty().len() as u64;
            }
        }
        flushed
    }
}

fn account(j: &Value) -> Account {
    let s = &j["stalls"];
    Account {
        instructions: j["instructions"].as_u64().unwrap(),
        stalls: ["icache", "dcache", "wbuffer", "uncached"].map(|c| s[c].as_u64().unwrap()),
    }
}

fn cache_spec() -> impl Strategy<Value = CacheSpec> {
    (
        select(vec![16u64, 32, 64, 128]),
        select(vec![4u64, 8, 16]),
        select(vec![1u64, 2, 4]),
        any::<bool>(),
        any::<bool>(),
        select(vec![1u64, 2, 4]),
        1u64..40,
    )
        .prop_map(
            |(lines, line, ways, write_back, allocate, per, miss)| CacheSpec {
                size: lines * line,
                line,
                ways: ways.min(lines),
                write_back,
                allocate,
                fetch: line * per,
                miss_cycles: miss,
            },
        )
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        (
            0u8..16,
            0u64..0x3000,
            // Mostly words; some block moves spanning many lines.
            select(vec![1u16, 2, 4, 8, 4, 8, 64, 300]),
            any::<bool>(),
        ),
        1..400,
    )
    .prop_map(|raw| {
        raw.into_iter()
            .map(|(k, off, size, kernel)| {
                let mode = if kernel { Mode::Kernel } else { Mode::User };
                // A few addresses fall in the uncached range; markers open and close the
                // idle loop now and then.
                let addr = if k == 13 {
                    UNCACHED.0 + off % 0x1000
                } else {
                    0x1000 + off
                };
                match k {
                    0..=5 => Event::reference(Kind::Fetch, addr, size).with_mode(mode),
                    6..=9 | 13 => Event::reference(Kind::Load, addr, size).with_mode(mode),
                    10..=12 => Event::reference(Kind::Store, addr, size).with_mode(mode),
                    14 => Event::control(Kind::Marker, IDLE[0], 0),
                    _ => Event::control(Kind::Marker, IDLE[1], 0),
                }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn memory_system_matches_the_model(
        split in any::<bool>(),
        l1 in (cache_spec(), cache_spec()),
        l2 in prop::option::of(cache_spec()),
        private_mode in any::<bool>(),
        uncached in any::<bool>(),
        evs in events(),
    ) {
        let l1 = [l1.0, l1.1];
        // A second level of lines no narrower than the first's.
        let l2 = l2.map(|mut s| {
            s.line = s.line.max(l1[0].line).max(l1[1].line);
            s.fetch = s.line;
            s.size = s.size.max(s.line * s.ways);
            s
        });
        let mut text = String::from(
            "[pages]\nsize = \"4k\"\n[[tlb]]\nname = \"tlb\"\nentries = 64\nways = \"full\"\n\
             [memory]\nmapping = \"identity\"\n",
        );
        text += &format!(
            "private = \"{}\"\nidle_markers = [{}, {}]\nuncached_cycles = {UNCACHED_CYCLES}\n",
            if private_mode { "mode" } else { "none" },
            IDLE[0],
            IDLE[1]
        );
        if uncached {
            text += &format!("uncached = [{{ start = {}, end = {} }}]\n", UNCACHED.0, UNCACHED.1);
        }
        if split {
            text += &l1[0].toml("icache");
            text += &l1[1].toml("dcache");
        } else {
            text += &l1[0].toml("cache");
        }
        if let Some(s) = &l2 {
            text += &s.toml("l2");
        }
        let config = MachineConfig::from_toml(&text, "m.toml").unwrap();
        let mut m = Machine::build(config, "m.toml").unwrap();
        for chunk in evs.chunks(37) {
            m.run_batch(chunk);
        }
        let j = m.memory().unwrap().json();
        let mut r = RefMemory::new(split, &l1, &l2, private_mode, uncached);
        for e in &evs {
            r.event(e);
        }
        let flushed = r.flush();
        prop_assert_eq!(account(&j["user"]), r.acct[0], "user\n{}", text);
        prop_assert_eq!(account(&j["system"]), r.acct[1], "system\n{}", text);
        prop_assert_eq!(account(&j["idle"]), r.idle_acct, "idle\n{}", text);
        let caches = j["caches"].as_array().unwrap();
        prop_assert_eq!(caches.len(), r.caches.len());
        for (((c, rc), straddles), flushed) in
            caches.iter().zip(&r.caches).zip(&r.straddles).zip(&flushed)
        {
            let got: Vec<u64> = ["reads", "read_misses", "writes", "write_misses", "fills",
                                 "writebacks", "flushed", "straddles"]
                .iter().map(|k| c[*k].as_u64().unwrap()).collect();
            let want = vec![rc.reads, rc.read_misses, rc.writes, rc.write_misses, rc.fills,
                            rc.writebacks + flushed, *flushed, *straddles];
            prop_assert_eq!(got, want, "{}\n{}", c["name"], text);
        }
        let stalls: u64 = r.acct.iter().flat_map(|a| a.stalls).sum();
        prop_assert_eq!(j["stall_cycles"].as_u64().unwrap(), stalls);
    }
}
