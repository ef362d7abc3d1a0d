//! The cache hierarchy against hand-computed counts.

use crate::event::{Event, Kind};
use crate::machine::Machine;
use serde_json::Value;

fn machine(caches: &[&str], sets: &[&str]) -> Machine {
    let caches: Vec<String> = caches.iter().map(|s| s.to_string()).collect();
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Machine::assemble_all(None, "t", &[], &caches, &sets).unwrap()
}

fn result(m: &Machine) -> Value {
    crate::report::result_json(m, &Default::default())
}

/// A direct-mapped write-back data cache of four 16-byte lines: hits, misses, a dirty
/// victim written back to memory, and the copy-back of what is left dirty at the end.
#[test]
fn a_small_write_back_cache_by_hand() {
    let mut m = machine(&["dc:size=64,line=16,serves=data"], &[]);
    m.run_batch(&[
        Event::reference(Kind::Store, 0x100, 4), // miss (allocates, fetches 16 bytes), dirty
        Event::reference(Kind::Load, 0x104, 4),  // hit
        Event::reference(Kind::Load, 0x140, 4),  // miss: same set, evicts the dirty line
        Event::reference(Kind::Store, 0x200, 4), // miss, dirty, left at the end
        Event::reference(Kind::Fetch, 0x100, 4), // not cached: the cache serves data
    ]);
    let r = result(&m);
    let d = &r["structures"]["dc"];
    assert_eq!(
        (d["accesses"].as_u64(), d["misses"].as_u64()),
        (Some(4), Some(3))
    );
    assert_eq!(d["by_kind"]["store"]["misses"], 2);
    assert_eq!(
        d["writebacks"], 2,
        "the evicted line and the one flushed at the end"
    );
    assert_eq!(d["flushed"], 1);
    assert_eq!(d["bytes_read"], 48);
    assert_eq!(d["bytes_written"], 32);
    assert_eq!(d["geometry"]["sets"], 4);
    assert_eq!(d["geometry"]["next"], "memory");
    assert_eq!(d["type"], "cache");
    // The result is the same however often it is asked for: the copy-back is on a copy.
    assert_eq!(result(&m), r);
}

use super::dinero::{Dinero, Params, INSTRN, READ, WRITE};
use crate::config::{Allocate, FetchPolicy};
use proptest::prelude::*;

/// One cache of a generated hierarchy, as both models take it.
#[derive(Clone, Debug)]
struct Spec {
    name: &'static str,
    serves: &'static str,
    block_log: u32,
    sub_log: u32,
    sets_log: u32,
    assoc: usize,
    lru: bool,
    write_back: bool,
    allocate: Allocate,
    fetch: FetchPolicy,
    distance: u64,
    ccc: bool,
    next: Option<&'static str>,
}

impl Spec {
    fn flag(&self) -> String {
        let block = 1u64 << self.block_log;
        let mut f = format!(
            "{}:size={},line={block},ways={},policy={},serves={},write={},allocate={},fetch={},sub_block={}",
            self.name,
            (block * self.assoc as u64) << self.sets_log,
            self.assoc,
            if self.lru { "lru" } else { "fifo" },
            self.serves,
            if self.write_back { "back" } else { "through" },
            match self.allocate {
                Allocate::Yes => "yes",
                Allocate::No => "no",
                Allocate::NoFetch => "no-fetch",
            },
            self.fetch.name(),
            1u64 << self.sub_log,
        );
        if self.fetch != FetchPolicy::Demand {
            f.push_str(&format!(",prefetch_distance={}", self.distance));
        }
        if self.ccc {
            f.push_str(",3c=yes");
        }
        if let Some(n) = self.next {
            f.push_str(&format!(",next={n}"));
        }
        f
    }

    fn params(&self, next: Option<usize>) -> Params {
        Params {
            block: 1 << self.block_log,
            sub: 1 << self.sub_log,
            sets: 1 << self.sets_log,
            assoc: self.assoc,
            lru: self.lru,
            write_back: self.write_back,
            allocate: self.allocate,
            fetch: self.fetch,
            distance: self.distance,
            ccc: self.ccc,
            next,
        }
    }
}

/// What the generated caches may use besides demand-fetched whole blocks.
const FETCH_POLICIES: bool = true;
const SUB_BLOCKS: bool = true;
const CLASSES: bool = true;

/// A cache; `whole_blocks`: demand-fetched, without sub-blocks (a plain cache, the short
/// path of [`Hierarchy`]'s references).
fn spec_strategy(whole_blocks: bool) -> impl Strategy<Value = Spec> {
    (
        (2u32..7, 0u32..6, 0u32..4, 1usize..5, any::<bool>()),
        (any::<bool>(), 0u8..3, 0u8..6, 1u64..5, any::<bool>()),
    )
        .prop_map(
            move |((block_log, sub, sets_log, assoc, lru), (wb, alloc, fetch, dist, ccc))| {
                // At most 32 sub-blocks per block.
                let sub_log = if SUB_BLOCKS && !whole_blocks {
                    block_log
                        .saturating_sub(sub)
                        .max(block_log.saturating_sub(5))
                } else {
                    block_log
                };
                let fetch = if FETCH_POLICIES && !whole_blocks {
                    fetch
                } else {
                    0
                };
                let ccc = ccc && CLASSES;
                let fetch = [
                    FetchPolicy::Demand,
                    FetchPolicy::Always,
                    FetchPolicy::Miss,
                    FetchPolicy::Tagged,
                    FetchPolicy::LoadForward,
                    FetchPolicy::SubBlock,
                ][fetch as usize];
                let subs = 1u64 << (block_log - sub_log);
                let distance = match fetch {
                    FetchPolicy::LoadForward | FetchPolicy::SubBlock => dist.min(subs),
                    _ => dist,
                };
                Spec {
                    name: "",
                    serves: "unified",
                    block_log,
                    sub_log,
                    sets_log,
                    assoc,
                    lru,
                    write_back: wb,
                    allocate: [Allocate::Yes, Allocate::No, Allocate::NoFetch][alloc as usize],
                    fetch,
                    distance,
                    ccc,
                    next: None,
                }
            },
        )
}

/// A hierarchy: a unified first level or split I/D, then up to two unified levels.
fn hierarchy_strategy(whole_blocks: bool) -> impl Strategy<Value = Vec<Spec>> {
    (
        any::<bool>(),
        0usize..3,
        prop::collection::vec(spec_strategy(whole_blocks), 4),
    )
        .prop_map(|(split, below, mut s)| {
            let lower = ["l2", "l3"];
            let mut out = Vec::new();
            let first_next = (below > 0).then_some("l2");
            if split {
                s[0].name = "il1";
                s[0].serves = "instruction";
                s[1].name = "dl1";
                s[1].serves = "data";
                s[0].next = first_next;
                s[1].next = first_next;
                out.push(s[0].clone());
                out.push(s[1].clone());
            } else {
                s[0].name = "ul1";
                s[0].next = first_next;
                out.push(s[0].clone());
            }
            for l in 0..below {
                let mut c = s[2 + l].clone();
                c.name = lower[l];
                c.next = (l + 1 < below).then(|| lower[l + 1]);
                out.push(c);
            }
            out
        })
}

/// A reference: kind (0 fetch, 1 load, 2 store), address, size.
type Reference = (u8, u64, u16);

fn stream_strategy() -> impl Strategy<Value = Vec<Reference>> {
    let random = prop::collection::vec((0u8..3, 0u64..2048, 1u16..25), 1..500);
    // Adversarial: sweeps over one block more than a cache holds, strided to one set.
    let sweep = (1u64..80, 2u32..8, 1usize..6, 0u8..3).prop_map(|(blocks, shift, rounds, kind)| {
        (0..rounds)
            .flat_map(|_| (0..blocks).map(move |b| (kind, b << shift, 4u16)))
            .collect::<Vec<_>>()
    });
    prop_oneof![random, sweep]
}

fn kind_of(k: u8) -> Kind {
    [Kind::Fetch, Kind::Load, Kind::Store][k as usize]
}

/// DineroIV's count of `kind` in an array indexed by its access types (+3: prefetch).
fn d4(a: &[u64; 6], kind: Kind, prefetch: bool) -> u64 {
    let t = match kind {
        Kind::Fetch => INSTRN,
        Kind::Load => READ,
        _ => WRITE,
    };
    a[t + if prefetch { 3 } else { 0 }]
}

/// Run both models and compare every count DineroIV keeps, cache by cache.
fn compare(
    specs: &[Spec],
    stream: &[Reference],
    first: bool,
) -> std::result::Result<(), TestCaseError> {
    let flags: Vec<String> = specs.iter().map(Spec::flag).collect();
    let sets: Vec<String> = if first {
        vec!["machine.straddle=\"first\"".into()]
    } else {
        vec![]
    };
    let mut m = Machine::assemble_all(None, "t", &[], &flags, &sets).unwrap();
    let index = |n: &str| specs.iter().position(|s| s.name == n);
    let params = specs
        .iter()
        .map(|s| s.params(s.next.and_then(index)))
        .collect();
    let (ci, cd) = match index("ul1") {
        Some(u) => (u, u),
        None => (index("il1").unwrap(), index("dl1").unwrap()),
    };
    let mut d = Dinero::new(params, ci, cd);
    let events: Vec<Event> = stream
        .iter()
        .map(|&(k, a, s)| Event::reference(kind_of(k), a, s))
        .collect();
    m.run_batch(&events);
    for &(k, a, s) in stream {
        let root = &specs[if k == 0 { ci } else { cd }];
        let mut size = s as u64;
        if first {
            let block = 1u64 << root.block_log;
            size = size.min(block - a % block);
        }
        d.reference([INSTRN, READ, WRITE][k as usize], a, size);
    }
    d.finish();
    let r = result(&m);
    for (i, s) in specs.iter().enumerate() {
        let j = &r["structures"][s.name];
        let c = d.counts(i);
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        for kind in Kind::REFS {
            let k = &j["by_kind"][kind.name()];
            let ctx = format!("{} {}", s.name, kind.name());
            prop_assert_eq!(
                n(&k["accesses"]),
                d4(&c.fetch, kind, false),
                "fetches {}",
                ctx
            );
            prop_assert_eq!(n(&k["misses"]), d4(&c.miss, kind, false), "misses {}", ctx);
            prop_assert_eq!(
                n(&j["block_miss_breakdown"]["by_kind"][kind.name()]),
                if s.sub_log < s.block_log || s.ccc {
                    d4(&c.blockmiss, kind, false)
                } else {
                    0
                },
                "block misses {}",
                ctx
            );
            if s.fetch != FetchPolicy::Demand {
                let p = &j["prefetches"]["by_kind"][kind.name()];
                prop_assert_eq!(
                    n(&p["accesses"]),
                    d4(&c.fetch, kind, true),
                    "prefetches {}",
                    ctx
                );
                prop_assert_eq!(
                    n(&p["misses"]),
                    d4(&c.miss, kind, true),
                    "prefetch misses {}",
                    ctx
                );
                prop_assert_eq!(
                    n(&p["block_misses"]),
                    d4(&c.blockmiss, kind, true),
                    "pf block misses {}",
                    ctx
                );
                if s.ccc {
                    prop_assert_eq!(
                        n(&p["compulsory"]),
                        d4(&c.comp, kind, true),
                        "pf comp {}",
                        ctx
                    );
                    prop_assert_eq!(n(&p["capacity"]), d4(&c.cap, kind, true), "pf cap {}", ctx);
                    prop_assert_eq!(
                        n(&p["conflict"]),
                        d4(&c.conf, kind, true),
                        "pf conf {}",
                        ctx
                    );
                }
            }
            if s.ccc {
                prop_assert_eq!(
                    n(&k["compulsory"]),
                    d4(&c.comp, kind, false),
                    "comp {}",
                    ctx
                );
                prop_assert_eq!(n(&k["capacity"]), d4(&c.cap, kind, false), "cap {}", ctx);
                prop_assert_eq!(n(&k["conflict"]), d4(&c.conf, kind, false), "conf {}", ctx);
                let b = &j["block_miss_breakdown"];
                prop_assert_eq!(
                    n(&b["compulsory"][kind.name()]),
                    d4(&c.comp_block, kind, false),
                    "DB comp {}",
                    ctx
                );
                prop_assert_eq!(
                    n(&b["capacity"][kind.name()]),
                    d4(&c.cap_block, kind, false),
                    "DB cap {}",
                    ctx
                );
                prop_assert_eq!(
                    n(&b["conflict"][kind.name()]),
                    d4(&c.conf_block, kind, false),
                    "DB conf {}",
                    ctx
                );
            }
        }
        // DineroIV counts no write-backs, only their bytes: a write-back cache of whole
        // blocks that allocates on every write writes nothing else.
        if s.sub_log == s.block_log && s.write_back && s.allocate == Allocate::Yes {
            prop_assert_eq!(
                n(&j["writebacks"]) << s.block_log,
                c.bytes_written,
                "write-backs {}",
                s.name
            );
        }
        prop_assert_eq!(n(&j["multi_block"]), c.multiblock, "multi-block {}", s.name);
        prop_assert_eq!(n(&j["bytes_read"]), c.bytes_read, "bytes read {}", s.name);
        prop_assert_eq!(
            n(&j["bytes_written"]),
            c.bytes_written,
            "bytes written {}",
            s.name
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    /// Every count of every cache equals DineroIV's (the brute-force transcription), for
    /// random hierarchies (one or two levels below a unified or split first level) of every
    /// geometry, sub-block size, LRU or FIFO, fetch policy and prefetch distance, write and
    /// allocation policy, with or without the classes of misses (DineroIV's `-ccc`), on
    /// random and adversarial streams, with references split at block boundaries or kept to
    /// their first block.
    #[test]
    fn every_count_is_dinero_iv_s(
        specs in hierarchy_strategy(false),
        stream in stream_strategy(),
        first in any::<bool>(),
    ) {
        compare(&specs, &stream, first)?;
    }

    /// The same for hierarchies of plain caches only (whole blocks fetched on demand), whose
    /// references take the short path (tags touched once, transfers made at once), with
    /// every write and allocation policy and the classes of misses.
    #[test]
    fn plain_caches_count_as_dinero_iv(
        specs in hierarchy_strategy(true),
        stream in stream_strategy(),
        first in any::<bool>(),
    ) {
        compare(&specs, &stream, first)?;
    }
}

/// Bad hierarchies are refused naming the key; a piece not built yet says so.
#[test]
fn bad_hierarchies_name_the_key() {
    let e = |caches: &[&str]| {
        let caches: Vec<String> = caches.iter().map(|s| s.to_string()).collect();
        Machine::assemble_all(None, "--cache", &[], &caches, &[])
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        e(&["d1:size=1k,line=16", "d2:size=1k,line=16,serves=data"]),
        "--cache: cache.d2.serves: 'd1' and 'd2' both take load references first (or is one the other's next level?)"
    );
    assert_eq!(
        e(&[
            "u:size=1k,line=16,next=l2",
            "l2:size=4k,line=16,serves=data"
        ]),
        "--cache: cache.u.next: 'l2' does not serve the fetch references that 'u' passes on"
    );
    assert_eq!(
        e(&["a:size=1k,line=16,next=b", "b:size=1k,line=16,next=a"]),
        "--cache: cache.a.next: the next-level links form a cycle"
    );
    assert_eq!(
        e(&["a:size=1k,line=16,next=zz"]),
        "--cache: cache.a.next: no cache named 'zz'"
    );
    assert_eq!(
        e(&["a:size=1k,line=64,sub_block=1"]),
        "--cache: cache.a.sub_block: 64 sub-blocks per line: at most 32"
    );
    assert_eq!(
        e(&["a:size=1k,line=64,sub_block=128"]),
        "--cache: cache.a.sub_block: 128 is not a power of two no larger than the line (64)"
    );
    assert_eq!(
        e(&["a:size=1k,line=64,prefetch_distance=2"]),
        "--cache: cache.a.prefetch_distance: a demand-fetch cache does not prefetch (set fetch too)"
    );
    assert_eq!(
        e(&["a:size=1k,line=64,sub_block=16,fetch=sub-block,prefetch_distance=5"]),
        "--cache: cache.a.prefetch_distance: 5 sub-blocks is more than the 4 of a line"
    );
    assert_eq!(
        e(&["a:size=1k,line=64,fetch=always,prefetch_distance=0"]),
        "--cache: cache.a.prefetch_distance: must be at least 1"
    );
    let both = Machine::assemble_all(
        None,
        "--tlb",
        &["a:entries=4".to_string()],
        &["a:size=1k,line=64".to_string()],
        &[],
    );
    assert!(both
        .unwrap_err()
        .to_string()
        .contains("cache.a.name: a TLB (or the walk) has this name"));
    let memory = Machine::assemble_all(
        Some("[[tlb]]\nname='t'\nentries=4\n[memory]\n"),
        "m.toml",
        &[],
        &["c:size=1k,line=64".to_string()],
        &[],
    )
    .unwrap_err();
    assert!(matches!(memory, crate::Error::Config { .. }), "{memory}");
    assert!(memory
        .to_string()
        .contains("[[cache]] together with [memory]"));
    assert!(memory.to_string().contains("two machines"), "{memory}");
}

/// Caches alone make a machine: no TLB, nothing translated, no walk shown.
#[test]
fn a_machine_of_caches_alone() {
    let mut m = machine(&["ic:size=1k,line=32", "dc:size=1k,line=32"], &[]);
    m.run_batch(&[
        Event::reference(Kind::Fetch, 0x1000, 4),
        Event::reference(Kind::Load, 0x2000, 8),
        Event::reference(Kind::Load, 0x2010, 8),
    ]);
    let r = result(&m);
    assert_eq!(r["structures"]["ic"]["misses"], 1);
    assert_eq!(r["structures"]["dc"]["accesses"], 2);
    assert_eq!(r["structures"]["dc"]["hits"], 1);
    assert_eq!(r["walk"]["count"], 0);
    let table = crate::report::table(&r);
    assert!(table.contains("dc         1K 1w 32B lru"), "{table}");
    assert!(!table.contains("walk"), "{table}");
}

/// The shipped real traces (a prefix of each: the brute force is slow) through both models,
/// on DineroIV's classic two-level machine, a small direct-mapped one that misses much, and
/// one of sub-blocks and prefetching, all classifying their misses: every count equal.
#[test]
fn real_traces_give_dinero_iv_s_counts() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/lookaside/data");
    let l1 = |name, serves, size_log, block_log, assoc, wb| Spec {
        name,
        serves,
        block_log,
        sub_log: block_log,
        sets_log: size_log - block_log - (assoc as u32).trailing_zeros(),
        assoc,
        lru: true,
        write_back: wb,
        allocate: Allocate::Yes,
        fetch: FetchPolicy::Demand,
        distance: 1,
        ccc: true,
        next: None,
    };
    let mut classic = vec![
        l1("il1", "instruction", 15, 6, 8, true),
        l1("dl1", "data", 15, 6, 8, true),
        l1("l2", "unified", 20, 6, 16, true),
    ];
    classic[0].next = Some("l2");
    classic[1].next = Some("l2");
    let small = vec![l1("ul1", "unified", 12, 4, 1, false)];
    // Sub-blocks and prefetching: tagged at the first level, sub-block below.
    let mut prefetching = vec![
        l1("il1", "instruction", 13, 6, 1, true),
        l1("dl1", "data", 13, 6, 1, true),
        l1("l2", "unified", 18, 6, 4, true),
    ];
    for (i, c) in prefetching.iter_mut().enumerate() {
        c.sub_log = 4;
        c.fetch = if i < 2 {
            FetchPolicy::Tagged
        } else {
            FetchPolicy::SubBlock
        };
        c.distance = 1 + (i == 2) as u64;
        c.next = (i < 2).then_some("l2");
    }
    for trace in [
        "demo.lks",
        "mawk.lks",
        "sortprog.lks",
        "tarzone.lks",
        "gzip-system.lks",
    ] {
        let (input, format) = crate::trace::open_input(&dir.join(trace), None).unwrap();
        let mut source = crate::trace::reader(input, format).unwrap();
        let mut batch = Vec::new();
        let mut stream: Vec<Reference> = Vec::new();
        while stream.len() < 300_000 && source.next_batch(&mut batch).unwrap() {
            stream.extend(batch.iter().filter(|e| e.kind.is_ref()).map(|e| {
                let k = match e.kind {
                    Kind::Fetch => 0,
                    Kind::Load => 1,
                    _ => 2,
                };
                (k, e.addr, e.size)
            }));
        }
        assert!(stream.len() >= 250_000, "{trace}: {}", stream.len());
        for specs in [&classic, &small, &prefetching] {
            for first in [true, false] {
                compare(specs, &stream, first)
                    .unwrap_or_else(|e| panic!("{trace} {:?} first={first}: {e}", specs[0]));
            }
        }
    }
}

/// The `--dinero` summary of the shipped `sortprog` trace on the machine of `caches` is,
/// byte for byte, DineroIV 7's output in `file` (see tests/data/README.md).
fn summary_is(file: &str, caches: &[&str]) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let trace = root.join("../../python/lookaside/data/sortprog.lks");
    let mut m = machine(caches, &[]);
    let r = crate::run::simulate_path(
        &trace,
        None,
        &mut m,
        crate::run::Reading::OneThread,
        &mut |_| true,
    )
    .unwrap();
    let want = std::fs::read_to_string(root.join("tests/data/dineroIV").join(file)).unwrap();
    assert_eq!(super::dinero_summary(&r).unwrap(), want, "{file}");
}

/// What DineroIV prints at the end, Lookaside prints with `--dinero`: the same bytes.
#[test]
fn the_summary_is_dinero_iv_s_output() {
    summary_is(
        "sortprog.l1-l2.txt",
        &[
            "il1:size=32k,line=64,ways=8,next=l2",
            "dl1:size=32k,line=64,ways=8,next=l2",
            "l2:size=1M,line=64,ways=16",
        ],
    );
    summary_is(
        "sortprog.l1-l2-3c.txt",
        &[
            "il1:size=32k,line=64,ways=8,next=l2,3c=yes",
            "dl1:size=32k,line=64,ways=8,next=l2,3c=yes",
            "l2:size=1M,line=64,ways=16,3c=yes",
        ],
    );
    summary_is(
        "sortprog.sub-blocks-prefetch-3c.txt",
        &[
            "il1:size=8k,line=64,sub_block=16,fetch=tagged,3c=yes,next=l2",
            "dl1:size=8k,line=64,sub_block=16,fetch=tagged,3c=yes,next=l2",
            "l2:size=256k,line=64,ways=4,sub_block=16,fetch=sub-block,prefetch_distance=2,3c=yes",
        ],
    );
    let tlb_only = Machine::assemble(None, "t", &["d:entries=4".to_string()], &[]).unwrap();
    let e = super::dinero_summary(&result(&tlb_only)).unwrap_err();
    assert!(e.contains("no [[cache]]"), "{e}");
}

/// A machine of caches alone sends the running address space's references straight to the
/// hierarchy: with switches, other address spaces, kernel references and control events in
/// the stream, its caches count what they count beside a TLB (the general path).
#[test]
fn caches_alone_count_what_they_count_beside_a_tlb() {
    use crate::event::Mode;
    let caches = [
        "i1:size=1k,line=32,ways=2,serves=instruction,next=l2".to_string(),
        "d1:size=1k,line=32,ways=2,policy=fifo,serves=data,next=l2".to_string(),
        "l2:size=4k,line=64,ways=4,3c=yes".to_string(),
    ];
    let mut stream = Vec::new();
    let mut x = 7u64;
    for i in 0..5000u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let kind = [Kind::Fetch, Kind::Load, Kind::Store][(x >> 60) as usize % 3];
        let mut e = Event::reference(kind, (x >> 40) % 16384, 1 + (x >> 30) as u16 % 8)
            .with_asid((i / 700) as u32 % 3);
        if (x >> 20).is_multiple_of(5) {
            e = e.with_mode(Mode::Kernel);
        }
        if i.is_multiple_of(700) {
            stream.push(Event::control(Kind::ContextSwitch, 0, e.asid));
        }
        stream.push(e);
    }
    let alone = |m: &mut Machine| {
        // One event at a time, as a native trace is decoded.
        let mut feed = m.feed();
        for e in &stream {
            crate::event::EventSink::event(&mut feed, e);
        }
    };
    let mut a = Machine::assemble_all(None, "t", &[], &caches, &[]).unwrap();
    alone(&mut a);
    let mut b = Machine::assemble_all(
        None,
        "t",
        &["dtlb:entries=4,ways=full".to_string()],
        &caches,
        &[],
    )
    .unwrap();
    b.run_batch(&stream);
    let (ra, rb) = (result(&a), result(&b));
    for name in ["i1", "d1", "l2"] {
        assert_eq!(ra["structures"][name], rb["structures"][name], "{name}");
    }
    assert!(ra["structures"]["l2"]["accesses"].as_u64().unwrap() > 1000);
    assert_eq!(ra["trace"]["references"], rb["trace"]["references"]);
}

/// An event of a generated stream for [`the_caches_alone_loop_counts_as_the_general_path`]:
/// a reference (kind 0–2, address, size, address space, kernel mode) or, kind 3–5, a
/// context switch to the address space, a marker or a flush of everything.
type Mixed = (u8, u64, u16, u32, bool);

fn mixed_event(&(k, addr, size, asid, kernel): &Mixed) -> Event {
    match k {
        0..=2 => {
            let e = Event::reference(kind_of(k), addr, size).with_asid(asid);
            if kernel {
                e.with_mode(crate::event::Mode::Kernel)
            } else {
                e
            }
        }
        3 => Event::control(Kind::ContextSwitch, 0, asid),
        4 => Event::control(Kind::Marker, addr, asid),
        _ => Event::control(Kind::TlbFlush, crate::event::FLUSH_ALL, 0),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A machine of caches alone runs its own loop (counts kept in locals, settled before
    /// every event that is not a reference of the running address space): for random
    /// hierarchies (every replacement policy, plain or not, one to three levels, with the
    /// classes of misses) and streams of references of several address spaces and both
    /// modes (sizes from 0, crossing blocks) among context switches, markers and flushes,
    /// run in batches cut anywhere, it reports exactly what the machine's general path
    /// reports for the same caches beside a TLB, what its event-at-a-time feed does, and
    /// what it does decoding the stream from a native trace.
    #[test]
    fn the_caches_alone_loop_counts_as_the_general_path(
        specs in prop_oneof![hierarchy_strategy(true), hierarchy_strategy(false)],
        policies in prop::collection::vec(0usize..5, 4),
        stream in prop::collection::vec(
            (0u8..6, 0u64..4096, 0u16..40, 0u32..3, any::<bool>()).prop_map(|m: Mixed| {
                // Mostly references.
                if m.0 >= 3 && !m.1.is_multiple_of(4) { (m.0 % 3, m.1, m.2, m.3, m.4) } else { m }
            }),
            1..600,
        ),
        cuts in prop::collection::vec(1usize..200, 1..8),
        first in any::<bool>(),
    ) {
        let flags: Vec<String> = specs
            .iter()
            .zip(&policies)
            .map(|(s, &p)| {
                let policy = ["lru", "fifo", "random", "plru", "nru"][p];
                s.flag().replace(
                    if s.lru { "policy=lru" } else { "policy=fifo" },
                    &format!("policy={policy}"),
                )
            })
            .collect();
        let sets: Vec<String> = if first {
            vec!["machine.straddle=\"first\"".into()]
        } else {
            vec![]
        };
        let events: Vec<Event> = stream.iter().map(mixed_event).collect();
        let build = |tlbs: &[String]| Machine::assemble_all(None, "t", tlbs, &flags, &sets).unwrap();
        let mut alone = build(&[]);
        let mut rest: &[Event] = &events;
        for &c in cuts.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (now, later) = rest.split_at(c.min(rest.len()));
            alone.run_batch(now);
            rest = later;
        }
        let mut general = build(&["dtlb:entries=4,ways=full".to_string()]);
        general.run_batch(&events);
        let mut fed = build(&[]);
        {
            let mut feed = fed.feed();
            for e in &events {
                crate::event::EventSink::event(&mut feed, e);
            }
        }
        // Decoded from a native trace straight into the machine.
        let dir = crate::trace::tests::scratch("caches-alone");
        let path = dir.join("t.lks");
        crate::trace::tests::write(&path, None, &events);
        let mut decoded = build(&[]);
        let (input, _) = crate::trace::open_input(&path, None).unwrap();
        let mut source = crate::trace::native::NativeReader::new(input).unwrap();
        crate::run::run_native(&mut source, &mut decoded, &mut |_| true).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let (ra, rg, rf) = (result(&alone), result(&general), result(&fed));
        let rd = result(&decoded);
        for s in &specs {
            prop_assert_eq!(&ra["structures"][s.name], &rg["structures"][s.name], "{}", s.name);
            prop_assert_eq!(&ra["structures"][s.name], &rf["structures"][s.name], "{}", s.name);
            prop_assert_eq!(&ra["structures"][s.name], &rd["structures"][s.name], "{}", s.name);
        }
        prop_assert_eq!(&ra["trace"]["references"], &rd["trace"]["references"]);
        prop_assert_eq!(&ra["trace"]["by_kind"], &rd["trace"]["by_kind"]);
        prop_assert_eq!(&ra["trace"], &rf["trace"]);
        // Beside a TLB, references crossing a page are also counted as straddles.
        let (mut ta, mut tg) = (ra["trace"].clone(), rg["trace"].clone());
        ta["straddles"] = Value::Null;
        tg["straddles"] = Value::Null;
        prop_assert_eq!(ta, tg);
    }
}
