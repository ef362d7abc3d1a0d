//! A machine of several CPUs against the obvious model: one machine of one CPU per CPU, each
//! given the events its CPU made, and the invalidations that reach it.

use super::*;
use crate::config::Shootdown;
use crate::event::{Cpus, NO_PADDR};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

/// Per-CPU TLBs of `policy`: an 8-entry 2-way data TLB in front of a 16-entry fully associative
/// one, on `cpus` CPUs reached by `shootdown`; `seed` is the machine's; shootdowns cost
/// [`COST`].
fn config(policy: &str, cpus: u32, shootdown: &str, seed: u64) -> String {
    let [send, per_target, receive, page, flush_all] = COST;
    format!(
        "[machine]\nseed={seed}\ncpus={cpus}\nshootdown='{shootdown}'\n\
         shootdown_cycles={{send={send},per_target={per_target},receive={receive},page={page},flush_all={flush_all}}}\n\
         [[tlb]]\nname='d'\nentries=8\nways=2\npolicy='{policy}'\nserves='data'\nnext='l2'\n\
         [[tlb]]\nname='l2'\nentries=16\nways='full'\npolicy='{policy}'\nserves='unified'\n"
    )
}

/// Cycles of a shootdown: send, per target, receive, per page, per flush of everything (each a
/// power of two, so that every term shows in a sum).
const COST: [u64; 5] = [1, 1 << 8, 1 << 16, 1 << 24, 1 << 40];

fn machine(text: &str) -> Machine {
    Machine::assemble(Some(text), "m.toml", &[], &[]).unwrap()
}

/// Loads of 24 pages in 3 address spaces, context switches, CPU markers, TLB flushes (of a
/// page or all; local or naming CPUs, those in runs of up to 4 pages as a capture writes a
/// request) and unmaps, on 3 CPUs.
fn events() -> impl Strategy<Value = Vec<Event>> {
    let one =
        (0u8..16, 0u32..3, 0u64..24, 0u64..8, 1u64..5).prop_map(|(what, n, page, mask, run)| {
            let addr = page << 12;
            match what {
                0 | 1 => vec![Event::on_cpu(n)],
                2 => vec![Event::control(Kind::ContextSwitch, 0, n + 1)],
                3 => vec![Event::control(Kind::TlbFlush, addr, n + 1)],
                4 => (0..run)
                    .map(|p| {
                        Event::control(Kind::TlbFlush, addr + (p << 12), n + 1).with_paddr(mask)
                    })
                    .collect(),
                5 if run % 2 == 0 => {
                    vec![Event::control(Kind::TlbFlush, FLUSH_ALL, 0).with_paddr(mask)]
                }
                5 => vec![Event::control(Kind::TlbFlush, FLUSH_SPACE, n + 1).with_paddr(mask)],
                15 => vec![Event::control(Kind::TlbFlush, FLUSH_SPACE, n + 1)],
                6 => vec![Event::control(Kind::Unmap, addr, n + 1)],
                7 => vec![Event::control(Kind::Protect, addr, n + 1)],
                _ => vec![Event::reference(Kind::Load, addr | 8, 8).with_asid(n + 1)],
            }
        });
    proptest::collection::vec(one, 0..300).prop_map(|v| v.concat())
}

/// What each CPU counted of shootdown requests, by the definition: a request is a run of
/// neighbouring TLB flushes with the same CPU mask and address space, or one unmap or
/// protect; its sender pays `send` and `per_target` per other CPU reached, each of those
/// `receive`, and `page` (`flush_all` for a whole TLB or address space) per invalidation
/// reaching it. Per CPU: requests
/// sent, interrupts sent and received, cycles sending and receiving.
fn requests(events: &[Event], cpus: u32, reached: &[u64]) -> Vec<[u64; 5]> {
    let [send, per_target, receive, page, flush_all] = COST;
    let mut out = vec![[0u64; 5]; cpus as usize];
    let mut who = Cpus::default();
    let mut last: Option<&Event> = None;
    for (e, &targets) in events.iter().zip(reached) {
        let c = who.of(e) as usize;
        let continues = e.kind == Kind::TlbFlush
            && e.paddr != NO_PADDR
            && last.is_some_and(|l| {
                l.kind == Kind::TlbFlush && l.paddr == e.paddr && l.asid == e.asid
            });
        last = Some(e);
        let others = targets & !(1 << c);
        if others == 0 || !matches!(e.kind, Kind::TlbFlush | Kind::Unmap | Kind::Protect) {
            continue;
        }
        if !continues {
            out[c][0] += 1;
            out[c][1] += others.count_ones() as u64;
            out[c][3] += send + per_target * others.count_ones() as u64;
        }
        for t in (0..cpus as usize).filter(|t| others & (1 << t) != 0) {
            out[t][2] += !continues as u64;
            out[t][4] += if continues { 0 } else { receive }
                + if e.addr >= FLUSH_SPACE {
                    flush_all
                } else {
                    page
                };
        }
    }
    out
}

/// Each structure's valid entries (page, context).
fn entries(m: &Machine) -> Vec<HashSet<(u64, u64)>> {
    m.units
        .iter()
        .map(|u| {
            u.tlb
                .entries()
                .into_iter()
                .map(|(_, _, v, c)| (v, c))
                .collect()
        })
        .collect()
}

/// The model: each CPU's machine gets its CPU's events; a TLB flush naming CPUs is each named
/// CPU's own flush; an unmap or protect reaches the CPUs `shootdown` says (those that ran
/// the address space since their last flush of everything, all, or the running one). A CPU
/// runs the address space of its last context switch or reference. Per CPU and structure,
/// the entries an invalidation from another CPU removed are *shot*: a reference that fills
/// one again was a miss the shootdown caused; the CPU's own invalidation of an entry, or of
/// everything, makes it no longer shot. Returns the machines, each CPU's shootdown misses and
/// the CPUs each event reached (a mask; 0 for events that invalidate nothing).
fn model(
    events: &[Event],
    policy: &str,
    cpus: u32,
    shootdown: Shootdown,
) -> (Vec<Machine>, Vec<u64>, Vec<u64>) {
    let mut ms: Vec<Machine> = (0..cpus as u64)
        .map(|c| {
            machine(&config(
                policy,
                1,
                "ran",
                1 ^ c.wrapping_mul(0x2545_F491_4F6C_DD1D),
            ))
        })
        .collect();
    let mut shot: Vec<Vec<HashSet<(u64, u64)>>> = vec![vec![HashSet::new(); 2]; cpus as usize];
    let mut shot_misses = vec![0u64; cpus as usize];
    let all = (1u64 << cpus) - 1;
    let mut ran: HashMap<u32, u64> = HashMap::from([(0, all)]);
    let mut running_asid = vec![0u32; cpus as usize];
    let mut who = Cpus::default();
    let mut reached = Vec::with_capacity(events.len());
    for e in events {
        let c = who.of(e) as usize;
        reached.push(0);
        let mut reach = |targets: u64, ms: &mut Vec<Machine>, e: Event| {
            *reached.last_mut().unwrap() = targets;
            for (t, m) in ms.iter_mut().enumerate() {
                if targets & (1 << t) != 0 {
                    let before = entries(m);
                    m.run_batch(&[e]);
                    let after = entries(m);
                    for i in 0..2 {
                        if t != c {
                            shot[t][i].extend(before[i].difference(&after[i]));
                        } else if e.addr == FLUSH_ALL {
                            shot[t][i].clear();
                        } else if e.addr == FLUSH_SPACE {
                            // The CPU's own flush of a space: none of its entries is a
                            // shootdown's any more (tagged TLBs: the space's context).
                            let ctx = m.units[i].ctx(e.asid, 12, false);
                            shot[t][i].retain(|&(_, x)| x != ctx);
                        } else {
                            let ctx = m.units[i].ctx(e.asid, 12, false);
                            shot[t][i].remove(&(e.addr >> 12, ctx));
                        }
                    }
                }
            }
        };
        match e.kind {
            Kind::Marker => {}
            // A reference of another address space switches to it, as a context switch does.
            Kind::ContextSwitch | Kind::Load => {
                running_asid[c] = e.asid;
                *ran.entry(e.asid).or_default() |= 1 << c;
                let before = entries(&ms[c]);
                ms[c].run_batch(&[*e]);
                let after = entries(&ms[c]);
                for i in 0..2 {
                    for filled in after[i].difference(&before[i]) {
                        shot_misses[c] += shot[c][i].remove(filled) as u64;
                    }
                }
            }
            Kind::TlbFlush => {
                let targets = if e.paddr == NO_PADDR {
                    1 << c
                } else {
                    e.paddr & all
                };
                reach(targets, &mut ms, e.with_paddr(NO_PADDR));
                if e.addr == FLUSH_SPACE {
                    for t in (0..cpus as usize).filter(|t| targets & (1 << t) != 0) {
                        if running_asid[t] != e.asid {
                            ran.entry(e.asid).and_modify(|m| *m &= !(1 << t));
                        }
                    }
                }
                if e.addr == FLUSH_ALL {
                    for t in (0..cpus as usize).filter(|t| targets & (1 << t) != 0) {
                        ran.values_mut().for_each(|m| *m &= !(1 << t));
                        *ran.entry(running_asid[t]).or_default() |= 1 << t;
                    }
                }
            }
            Kind::Unmap | Kind::Protect => {
                let targets = match shootdown {
                    Shootdown::Local => 1 << c,
                    Shootdown::All => all,
                    Shootdown::Ran => (1 << c) | ran.get(&e.asid).copied().unwrap_or(0),
                };
                reach(targets, &mut ms, *e);
            }
            _ => ms[c].run_batch(&[*e]),
        }
    }
    (ms, shot_misses, reached)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Each CPU's accesses and misses of each structure, and its references, are those of its
    /// machine in the model; the machine's totals are their sums.
    #[test]
    fn each_cpu_is_a_machine_of_its_own(
        events in events(),
        policy in proptest::sample::select(&["lru", "fifo", "random"][..]),
        shootdown in proptest::sample::select(&[Shootdown::Ran, Shootdown::All, Shootdown::Local][..]),
        batch in 1usize..50,
    ) {
        let name = serde_json::to_value(shootdown).unwrap();
        let mut m = machine(&config(policy, 3, name.as_str().unwrap(), 1));
        for b in events.chunks(batch) {
            m.run_batch(b);
        }
        let (want, shot_misses, reached) = model(&events, policy, 3, shootdown);
        let sent = requests(&events, 3, &reached);
        let got = m.cpus_json().unwrap();
        for (c, w) in want.iter().enumerate() {
            let per = &got["per_cpu"][c];
            for (s, name) in ["d", "l2"].iter().enumerate() {
                let t = w.ledger().total(s, |_, _, _| true);
                prop_assert_eq!(&per["structures"][name]["accesses"], t.accesses, "cpu {} {}", c, name);
                prop_assert_eq!(&per["structures"][name]["misses"], t.misses, "cpu {} {}", c, name);
            }
            let refs: u64 = Kind::REFS.iter().map(|&k| w.ledger().refs_of_kind(k)).sum();
            prop_assert_eq!(&per["references"], refs, "cpu {}", c);
            prop_assert_eq!(&per["shootdown_misses"], shot_misses[c], "cpu {}", c);
            let [requests, ipis_sent, ipis_received, sending, receiving] = sent[c];
            prop_assert_eq!(&per["requests_sent"], requests, "cpu {}", c);
            prop_assert_eq!(&per["ipis_sent"], ipis_sent, "cpu {}", c);
            prop_assert_eq!(&per["ipis_received"], ipis_received, "cpu {}", c);
            prop_assert_eq!(&per["shootdown_cycles"]["sending"], sending, "cpu {}", c);
            prop_assert_eq!(&per["shootdown_cycles"]["receiving"], receiving, "cpu {}", c);
        }
        let total: u64 = sent.iter().map(|s| s[3] + s[4]).sum();
        prop_assert_eq!(&got["shootdown_cycles"], total);
        for s in 0..2 {
            let sum: u64 = want.iter().map(|w| w.ledger().total(s, |_, _, _| true).misses).sum();
            prop_assert_eq!(m.ledger().total(s, |_, _, _| true).misses, sum);
        }
    }
}

/// `events` run on the machine `config(1)` and on `config(4)`: asserts that the machine of four
/// CPUs gives the machine of one's result (but for the machine's description and the `cpus`
/// section); returns the machine of one and that section.
fn one_and_four(events: &[Event], config: impl Fn(u32) -> String) -> (Machine, serde_json::Value) {
    let mut one = machine(&config(1));
    let mut four = machine(&config(4));
    one.run_batch(events);
    four.run_batch(events);
    let info = crate::report::TraceInfo::default();
    let mut a = crate::report::result_json(&one, &info);
    let mut b = crate::report::result_json(&four, &info);
    let cpus = b.as_object_mut().unwrap().remove("cpus").unwrap();
    for r in [&mut a, &mut b] {
        r.as_object_mut().unwrap().remove("machine");
    }
    assert_eq!(a, b);
    (one, cpus)
}

/// A stream without CPU markers runs on CPU 0 alone: the machine of several gives the machine
/// of one's result, and CPU 0 counts everything.
#[test]
fn one_cpus_stream_is_the_machine_of_ones() {
    let events: Vec<Event> = (0..2000u64)
        .map(|i| {
            Event::reference(Kind::Load, (i * 7919 % 40) << 12, 8).with_asid(1 + (i % 3) as u32)
        })
        .collect();
    let (mut one, cpus) = one_and_four(&events, |n| config("lru", n, "ran", 1));
    assert_eq!(cpus["per_cpu"][0]["references"], 2000);
    assert_eq!(cpus["per_cpu"][3]["references"], 0);
    // A machine of one given the events of several runs them all, and says so.
    assert!(one.warnings().is_empty());
    one.run_batch(&[Event::on_cpu(2), events[0], Event::on_cpu(1)]);
    let w = one.warnings().join("\n");
    assert!(w.contains("CPU 2") && w.contains("machine.cpus"), "{w}");
}

/// A shared structure is one for every CPU: a page one CPU brought in hits there for
/// another, and a shootdown to any CPU removes it; a per-CPU structure misses again.
#[test]
fn a_shared_structure_serves_every_cpu() {
    let text = config("lru", 2, "local", 1) + "shared=true\n";
    let mut m = machine(&text);
    let load = Event::reference(Kind::Load, 0x5000, 8).with_asid(1);
    m.run_batch(&[load, Event::on_cpu(1), load]);
    let j = m.cpus_json().unwrap();
    assert_eq!(j["per_cpu"][1]["structures"]["d"]["misses"], 1);
    assert_eq!(j["per_cpu"][1]["structures"]["l2"]["misses"], 0, "{j}");
    // CPU 1 shoots the page down on CPU 0 only: the shared L2 loses it too.
    m.run_batch(&[
        Event::control(Kind::TlbFlush, 0x5000, 1).with_paddr(1),
        Event::on_cpu(0),
        load,
    ]);
    let j = m.cpus_json().unwrap();
    assert_eq!(j["per_cpu"][0]["structures"]["l2"]["misses"], 2, "{j}");
    assert_eq!(j["per_cpu"][1]["shootdowns_sent"], 1);
    assert_eq!(j["per_cpu"][0]["shootdowns_received"], 1);
    assert_eq!(j["per_cpu"][0]["entries_invalidated"], 1);
    // CPU 0's own TLB lost the page to the shootdown: its next miss there was the
    // shootdown's (a shared structure's misses are nobody's).
    assert_eq!(j["per_cpu"][0]["shootdown_misses"], 1);
    assert_eq!(j["per_cpu"][1]["shootdown_misses"], 0);
}

/// A trace naming a CPU the machine lacks is refused; several CPUs with a section that has no
/// model of them yet say so.
#[test]
fn cpus_the_machine_lacks_and_sections_not_yet_are_refused() {
    let mut m = machine(&config("lru", 2, "ran", 1));
    m.run_batch(&[Event::on_cpu(2), Event::reference(Kind::Load, 0, 8)]);
    let e = m.cannot_follow("t.lks").unwrap().to_string();
    assert!(e.contains("CPU 2") && e.contains("machine.cpus"), "{e}");
    let e = Machine::assemble(Some(&config("lru", 0, "ran", 1)), "m.toml", &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("machine.cpus"), "{e}");
    let text = config("lru", 2, "ran", 1) + "[prefetch]\nuser_entries=4\nkernel_entries=2\n";
    let e = Machine::assemble(Some(&text), "m.toml", &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not yet") && e.contains("prefetch"), "{e}");
}

/// Per-CPU TLBs of `policy` (see [`config`]) over a 4-level radix table with paging-structure
/// caches, whose walker's data cache sees the program's loads and stores.
fn config_walked(policy: &str, cpus: u32, shootdown: &str) -> String {
    config(policy, cpus, shootdown, 1)
        + "[pagetable]\norganisation='radix'\nlevels=4\ndata_refs=true\nmemory='64K'\n\
           psc=[{level=0,entries=2,ways=2},{level=1,entries=2,ways=2},{level=2,entries=4,ways=2}]\n\
           [pagetable.cache]\nsize='2K'\nline=32\nways=2\n"
}

/// A stream without CPU markers on a machine of several CPUs with a page table: the machine
/// of one's result.
#[test]
fn one_cpus_stream_with_a_page_table_is_the_machine_of_ones() {
    let events: Vec<Event> = (0..3000u64)
        .map(|i| {
            let kind = if i % 5 == 0 { Kind::Store } else { Kind::Load };
            Event::reference(kind, ((i * 7919 % 90) << 12) | ((i % 64) * 8), 8)
                .with_asid(1 + (i % 3) as u32)
        })
        .collect();
    let (one, cpus) = one_and_four(&events, |n| config_walked("lru", n, "ran"));
    let a = crate::report::result_json(&one, &crate::report::TraceInfo::default());
    assert!(
        a["pagetable"]["faults"].as_u64().unwrap() > 90,
        "{}",
        a["pagetable"]
    );
    assert_eq!(cpus["per_cpu"][0]["page_faults"], a["pagetable"]["faults"]);
    assert_eq!(
        cpus["per_cpu"][0]["walk_cycles"],
        a["pagetable"]["cycles"]["total"]
    );
    assert_eq!(cpus["per_cpu"][1]["walk_cycles"], 0);
}

/// The page table is every CPU's, its paging-structure caches and the walker's data cache
/// each CPU's own: a page CPU 0 faulted in does not fault for CPU 1, whose walk finds no
/// upper entry in its own caches and whose load misses its own data cache; CPU 0's next walk
/// in the same 2 MiB skips the three upper levels.
#[test]
fn each_cpu_walks_the_one_table_through_caches_of_its_own() {
    let mut m = machine(&config_walked("lru", 2, "local"));
    // Offset 0x340: the data's lines lie in another set of the data cache than the table
    // entries the walks read (at the start of their table pages).
    let load = |addr| Event::reference(Kind::Load, addr, 8).with_asid(1);
    m.run_batch(&[load(0x40_0340), Event::on_cpu(1), load(0x40_0340)]);
    m.run_batch(&[Event::on_cpu(0), load(0x40_1340)]);
    let info = crate::report::TraceInfo::default();
    let r = crate::report::result_json(&m, &info);
    let t = &r["pagetable"];
    assert_eq!(t["walks"], 3, "{t}");
    assert_eq!(t["faults"], 2, "{t}");
    assert_eq!(t["psc_skipped"], 3, "{t}");
    // CPU 1's data cache had never seen the page's line: three loads, three misses.
    assert_eq!(t["data"]["refs"], 3, "{t}");
    assert_eq!(t["data"]["misses"], 3, "{t}");
    let per = &r["cpus"]["per_cpu"];
    assert_eq!(per[0]["page_faults"], 2, "{per}");
    assert_eq!(per[1]["page_faults"], 0, "{per}");
    assert_eq!(per[0]["structures"]["walk"]["accesses"], 2, "{per}");
    assert_eq!(per[1]["structures"]["walk"]["accesses"], 1, "{per}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// On any interleaving of several CPUs with shootdowns, the CPUs' walks, walk cycles and
    /// page faults add up to the walker's.
    #[test]
    fn the_cpus_walks_add_up_to_the_walkers(
        events in events(),
        shootdown in proptest::sample::select(&["ran", "all", "local"][..]),
        batch in 1usize..50,
    ) {
        let mut m = machine(&config_walked("lru", 3, shootdown));
        for b in events.chunks(batch) {
            m.run_batch(b);
        }
        let info = crate::report::TraceInfo::default();
        let r = crate::report::result_json(&m, &info);
        let per = r["cpus"]["per_cpu"].as_array().unwrap();
        let sum = |f: &dyn Fn(&serde_json::Value) -> u64| per.iter().map(f).sum::<u64>();
        prop_assert_eq!(sum(&|c| c["walk_cycles"].as_u64().unwrap()), r["pagetable"]["cycles"]["total"].as_u64().unwrap());
        prop_assert_eq!(sum(&|c| c["page_faults"].as_u64().unwrap()), r["pagetable"]["faults"].as_u64().unwrap());
        prop_assert_eq!(sum(&|c| c["structures"]["walk"]["accesses"].as_u64().unwrap()), r["pagetable"]["walks"].as_u64().unwrap());
    }
}
