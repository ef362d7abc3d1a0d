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
    for (flag, what) in [
        (
            "a:size=1k,line=64,sub_block=16",
            "cache.a.sub_block: sub-blocks",
        ),
        (
            "a:size=1k,line=64,fetch=miss",
            "cache.a.fetch: fetch policies other than demand",
        ),
        (
            "a:size=1k,line=64,3c=yes",
            "cache.a.3c: the classes of misses",
        ),
    ] {
        let caches = [flag.to_string()];
        match Machine::assemble_all(None, "--cache", &[], &caches, &[]) {
            Err(crate::Error::NotYet(m)) => assert!(m.ends_with(what), "{m}"),
            other => panic!("{flag}: {:?}", other.map(|_| ())),
        }
    }
    assert_eq!(
        e(&["a:size=1000,line=64"]),
        "--cache: cache.a.size: 1000 is not a positive multiple of the line (64)"
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
    assert!(matches!(memory, crate::Error::NotYet(_)), "{memory}");
    assert!(memory
        .to_string()
        .contains("[[cache]] together with [memory]"));
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
