//! A machine of several CPUs (`machine.cpus`): each CPU has its own TLB tree — every
//! structure but those marked `shared`, which all CPUs use — and runs an address space of
//! its own; the trace's CPU markers ([`crate::event::CPU_MARK`]) say which CPU makes each
//! event, and a context switch is the running CPU's.
//!
//! The running CPU's structures are the machine's own units, where the fast path finds them:
//! a CPU marker parks them and brings the next CPU's in (a swap of each of its structures),
//! so a reference costs what it costs on a machine of one CPU, and a stream of one CPU gives
//! exactly the results of the machine of one.
//!
//! **Shootdowns.** A TLB flush that names CPUs (its `paddr` a mask, bit c for CPU c; without
//! one it is the running CPU's own flush) invalidates its page, or everything, in each named
//! CPU's TLBs; an unmap or protect reaches the CPUs `machine.shootdown` says (those that ran
//! the address space, all, or the running one only). A shared structure is reached when any
//! CPU is. Each CPU counts the shootdowns it sent (an invalidation that reached another CPU)
//! and received, the entries invalidations removed from its TLBs, and the misses shootdowns
//! caused it: a miss of one of its own structures on an entry a shootdown from another CPU
//! removed (kept per structure until a miss refills it or the CPU invalidates it itself),
//! looked at on the miss paths only ([`Machine::shot_miss`]).
//!
//! **Requests and their cost.** Interrupts go per request, not per page: a request is a run
//! of flushes naming the same CPUs in one address space with no other event between them
//! (the pages of one range the kernel flushes), or one unmap or protect. Each CPU counts the
//! requests it sent, the interrupts it sent (other CPUs reached) and received, and the cycles
//! `machine.shootdown_cycles` prices them at, sending and receiving.
//!
//! **A page table.** The table, the OS's frames and the walk costs are the machine's: every
//! CPU walks the one table in memory, and a page one CPU faulted in is mapped for all. Each
//! CPU has its own of what sits in the CPU: the walker's data cache and the radix table's
//! paging-structure caches ([`CpuParts`]), parked and swapped with its TLBs. As on a
//! machine of one, table pages are never freed, so no invalidation reaches a
//! paging-structure cache. Each CPU counts the cycles of the walks it made and the page
//! faults they took.
//!
//! Not yet on several CPUs (refused when built): software refill, a memory system, caches,
//! a virtually addressed cache, prefetching and dynamic partitioning.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{Machine, Unit};
use crate::config::{MachineConfig, Shootdown, ShootdownCycles};
use crate::error::{Error, Result};
use crate::event::{Event, Kind, FLUSH_ALL, FLUSH_SPACE, MAX_CPUS, NO_PADDR};
use crate::ledger::{Counter, Ledger};
use crate::mmu::{CpuParts, Walker};
use crate::tlb::Engine;

/// What one CPU counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct CpuStats {
    /// References it made.
    references: u64,
    /// Per structure of the ledger (and the walk after them): its accesses and misses.
    structures: Vec<Counter>,
    /// Invalidations it made that reached another CPU.
    shootdowns_sent: u64,
    /// Invalidations another CPU made that reached it.
    shootdowns_received: u64,
    /// Entries invalidations (its own and others') removed from its TLBs.
    entries_invalidated: u64,
    /// Misses of its own structures on an entry a shootdown removed (and nothing refilled
    /// or invalidated since): the misses shootdowns caused.
    shootdown_misses: u64,
    /// Shootdown requests it sent (each one round of interrupts, however many pages).
    requests_sent: u64,
    /// Interrupts it sent: per request, the other CPUs it reached.
    ipis_sent: u64,
    /// Requests from other CPUs that reached it (an interrupt each).
    ipis_received: u64,
    /// Cycles it spent sending requests and waiting for them ([`ShootdownCycles`]).
    cycles_sending: u64,
    /// Cycles it spent on requests from other CPUs.
    cycles_receiving: u64,
    /// Cycles of the page-table walks it made (basic and data-cache penalty), and the page
    /// faults they took.
    walk_cycles: u64,
    page_faults: u64,
}

/// The units each CPU has its own of (those not `shared`), in order: the order of a CPU's
/// parked structures.
fn own(shared: &[bool]) -> impl Iterator<Item = usize> + '_ {
    (0..shared.len()).filter(|&i| !shared[i])
}

/// The CPUs of a machine of several (see the module documentation).
#[derive(Debug)]
pub(super) struct CpuSet {
    running: usize,
    /// Per unit, whether every CPU uses it (`shared`); each CPU has its own of the others.
    shared: Vec<bool>,
    /// Per CPU, its own structures while another runs (the units not shared, in order); the
    /// running CPU's slot holds spares, which each swap moves along.
    parked: Vec<Vec<Unit>>,
    /// Per CPU, its parts of the walker while another runs, the same way (empty without a
    /// page table).
    walker: Vec<CpuParts>,
    /// Per CPU, the address space it runs.
    asid: Vec<u32>,
    /// Per address space, the CPUs that ran it since their TLBs were last flushed whole.
    ran: HashMap<u32, u64>,
    policy: Shootdown,
    cycles: ShootdownCycles,
    /// The request the last event continued, if it was a TLB flush naming CPUs: its mask,
    /// address space and the ledger's event count after it ([`Ledger::events`]).
    request: Option<(u64, u32, u64)>,
    stats: Vec<CpuStats>,
    /// The ledger's totals when the running CPU began to run.
    since: Totals,
    /// The first CPU the trace named that the machine lacks.
    beyond: Option<u32>,
}

/// Per structure of a ledger (and the walk), its accesses and misses; the references; and
/// the walker's cycles and page faults.
type Totals = (Vec<Counter>, u64, [u64; 2]);

/// The [`Totals`] of `l` and walker `w` now.
fn totals(l: &Ledger, w: Option<&Walker>) -> Totals {
    let per = (0..=l.walk_index())
        .map(|s| l.total(s, |_, _, _| true))
        .collect();
    let walks = w.map_or([0; 2], |w| {
        let s = w.stats();
        [s.basic_cycles + s.penalty_cycles, s.faults]
    });
    (
        per,
        Kind::REFS.iter().map(|&k| l.refs_of_kind(k)).sum(),
        walks,
    )
}

/// Add to `s` what a ledger and the walker counted between `since` and `now`.
fn add_since(s: &mut CpuStats, since: &Totals, now: &Totals) {
    s.structures.resize(now.0.len(), Counter::default());
    for (i, c) in now.0.iter().enumerate() {
        let before = since.0.get(i).copied().unwrap_or_default();
        s.structures[i].accesses += c.accesses - before.accesses;
        s.structures[i].misses += c.misses - before.misses;
    }
    s.references += now.1 - since.1;
    s.walk_cycles += now.2[0] - since.2[0];
    s.page_faults += now.2[1] - since.2[1];
}

impl CpuSet {
    /// The CPUs of `config` (`None` for one), each with copies of the per-CPU structures of
    /// `units` (fresh, their random policies seeded per CPU), which are CPU 0's; errors name
    /// the key.
    pub(super) fn build(
        config: &MachineConfig,
        units: &mut [Unit],
        walker: Option<&mut Walker>,
        src: &str,
    ) -> Result<Option<Box<CpuSet>>> {
        let n = config.machine.cpus;
        let err = |k: &str, m: String| Error::config(src, k, m);
        if n == 0 || n > MAX_CPUS {
            return Err(err(
                "machine.cpus",
                format!("{n}: a machine has 1 to {MAX_CPUS} CPUs"),
            ));
        }
        if n == 1 {
            return Ok(None);
        }
        let others = [
            ("refill", config.refill.is_some()),
            ("memory", config.memory.is_some()),
            ("cache", !config.caches.is_empty()),
            ("vac", config.vac.is_some()),
            ("prefetch", config.prefetch.is_some()),
            (
                "partition.dynamic",
                config
                    .tlbs
                    .iter()
                    .any(|t| t.partition.as_ref().is_some_and(|p| p.dynamic.is_some())),
            ),
        ];
        if let Some((section, _)) = others.iter().find(|o| o.1) {
            return Err(Error::NotYet(format!(
                "{src}: machine.cpus: {n} CPUs with {section} (several CPUs have TLB trees only, so far)"
            )));
        }
        let shared: Vec<bool> = config.tlbs.iter().map(|t| t.shared).collect();
        for i in own(&shared) {
            units[i].shot = Some(Box::default());
        }
        let mut parked = Vec::with_capacity(n as usize);
        for cpu in 0..n as u64 {
            let mut mine = Vec::new();
            for i in own(&shared) {
                let mut p = units[i].tlb.params().clone();
                p.seed ^= cpu.wrapping_mul(0x2545_F491_4F6C_DD1D);
                let mut u = units[i].clone();
                u.tlb = Engine::new(&p).map_err(|m| err(&format!("tlb[{i}]"), m))?;
                if u.shadow.is_some() {
                    u.shadow = Some(Box::new(
                        super::build::shadow_of(&p).map_err(|m| err(&format!("tlb[{i}].3c"), m))?,
                    ));
                }
                mine.push(u);
            }
            parked.push(mine);
        }
        let walker = match walker {
            Some(w) => (0..n).map(|_| w.cpu_parts()).collect(),
            None => Vec::new(),
        };
        let mut set = CpuSet {
            running: 0,
            shared,
            parked,
            walker,
            asid: vec![0; n as usize],
            ran: HashMap::new(),
            policy: config.machine.shootdown,
            cycles: config.machine.shootdown_cycles,
            request: None,
            stats: vec![CpuStats::default(); n as usize],
            since: (Vec::new(), 0, [0; 2]),
            beyond: None,
        };
        // Every CPU starts in address space 0.
        set.ran.insert(0, set.all());
        Ok(Some(Box::new(set)))
    }

    /// The address space CPU `c` runs, `current` the machine's (the running CPU's: its slot in
    /// `asid` is written only when it stops).
    fn runs(&self, c: usize, current: u32) -> u32 {
        if c == self.running {
            current
        } else {
            self.asid[c]
        }
    }

    fn count(&self) -> usize {
        self.parked.len()
    }

    /// Every CPU, as a mask.
    fn all(&self) -> u64 {
        u64::MAX >> (64 - self.count())
    }

    /// The running CPU stops: what the ledger and the walker counted since it began is its
    /// own.
    fn close(&mut self, l: &Ledger, w: Option<&Walker>) {
        let now = totals(l, w);
        add_since(&mut self.stats[self.running], &self.since, &now);
        self.since = now;
    }

    /// The CPUs an invalidation of the OS in address space `asid` reaches (a mask), `global`
    /// if the page is every address space's.
    fn reached(&self, asid: u32, global: bool) -> u64 {
        let me = 1u64 << self.running;
        match self.policy {
            Shootdown::Local => me,
            Shootdown::Ran if !global => me | self.ran.get(&asid).copied().unwrap_or(0),
            Shootdown::Ran | Shootdown::All => self.all(),
        }
    }
}

impl Machine {
    /// A CPU marker: CPU `cpu` runs from here, with its own structures and address space.
    pub(super) fn switch_cpu(&mut self, cpu: u32) {
        let Some(set) = self.cpus.as_deref_mut() else {
            return;
        };
        let c = cpu as usize;
        if c >= set.count() {
            set.beyond.get_or_insert(cpu);
            return;
        }
        if c == set.running {
            return;
        }
        set.close(&self.ledger, self.walker.as_deref());
        let r = set.running;
        set.asid[r] = self.cur_asid;
        for (k, i) in own(&set.shared).enumerate() {
            std::mem::swap(&mut self.units[i], &mut set.parked[r][k]);
            std::mem::swap(&mut self.units[i], &mut set.parked[c][k]);
        }
        if let Some(w) = self.walker.as_deref_mut() {
            w.swap_cpu_parts(&mut set.walker[r]);
            w.swap_cpu_parts(&mut set.walker[c]);
        }
        set.running = c;
        let asid = set.asid[c];
        self.cur_asid = asid;
        self.ledger.set_asid(asid);
        self.forget_pages();
        for (u, &s) in self.units.iter_mut().zip(&self.default_shift) {
            u.ctx_now = u.ctx(asid, s, false);
        }
    }

    /// The running CPU's structure `i` missed on `(vpn, ctx)` (and refilled it): a miss a
    /// shootdown caused if a shootdown removed that entry.
    #[inline(never)]
    pub(super) fn shot_miss(&mut self, i: usize, vpn: u64, ctx: u64) {
        let (Some(set), Some(shot)) = (self.cpus.as_deref_mut(), self.units[i].shot.as_deref_mut())
        else {
            return;
        };
        if shot.remove(&(vpn, ctx)) {
            set.stats[set.running].shootdown_misses += 1;
        }
    }

    /// The running CPU switched to address space `asid`: it has run it.
    pub(super) fn cpu_ran(&mut self, asid: u32) {
        if let Some(set) = self.cpus.as_deref_mut() {
            *set.ran.entry(asid).or_default() |= 1 << set.running;
        }
    }

    /// A TLB flush, unmap or protect on a machine of several CPUs: each CPU it reaches drops
    /// the translations it names from its TLBs (see the module documentation).
    pub(super) fn shoot(&mut self, e: &Event) {
        let global = e.addr < FLUSH_SPACE && self.is_global(e.addr);
        let Some(set) = self.cpus.as_deref_mut() else {
            return;
        };
        let targets = match (e.kind, e.paddr) {
            (Kind::TlbFlush, NO_PADDR) => 1 << set.running,
            (Kind::TlbFlush, mask) => mask & set.all(),
            _ => set.reached(e.asid, global),
        };
        // One request is a run of TLB flushes naming the same CPUs, in one address space,
        // with no other event between them (a capture writes one run per request the kernel
        // sends: the pages of one range); an unmap or protect is a request of its own.
        let new_request = match (e.kind, e.paddr) {
            (Kind::TlbFlush, NO_PADDR) => {
                set.request = None;
                false
            }
            (Kind::TlbFlush, mask) => {
                let stamp = self.ledger.events();
                let continues = set.request == Some((mask, e.asid, stamp - 1));
                set.request = Some((mask, e.asid, stamp));
                !continues
            }
            _ => {
                set.request = None;
                true
            }
        };
        // Invalidate in `u`, a structure of a CPU the invalidation reaches, which runs
        // address space `running`; `remote`: a shootdown from another CPU, whose removals
        // are kept for the misses they cause (a CPU's own invalidation leaves no entry a
        // shootdown's). How many it removed.
        let flush = |u: &mut Unit, running: u32, remote: bool| -> u64 {
            let mut shot = u.shot.take();
            let mut n = 0;
            if e.addr == FLUSH_SPACE {
                if let (Some(s), false) = (&mut shot, remote) {
                    let of = Unit::of_space(u.tagged, e.asid, running);
                    s.retain(|&(_, ctx)| !of(ctx));
                }
                n = u.invalidate_space(e.asid, running, |vpn, ctx| {
                    if let (Some(s), true) = (&mut shot, remote) {
                        s.insert((vpn, ctx));
                    }
                });
            } else if e.addr == FLUSH_ALL {
                if let (Some(s), false) = (&mut shot, remote) {
                    s.clear();
                }
                n = u.tlb.flush_if(|vpn, ctx| {
                    if let (Some(s), true) = (&mut shot, remote) {
                        s.insert((vpn, ctx));
                    }
                    true
                }) as u64;
                if let Some(sh) = u.shadow.as_deref_mut() {
                    sh.flush_all();
                }
            } else {
                u.invalidate_page(e.addr, e.asid, global, |vpn, ctx, present| {
                    n += present as u64;
                    match (&mut shot, remote) {
                        (Some(s), true) if present => {
                            s.insert((vpn, ctx));
                        }
                        (Some(s), false) => {
                            s.remove(&(vpn, ctx));
                        }
                        _ => {}
                    }
                });
            }
            u.shot = shot;
            n
        };
        let r = set.running;
        // The running CPU's structures, and the shared ones whichever CPUs it reaches.
        let mut removed = 0;
        for (i, u) in self.units.iter_mut().enumerate() {
            if targets & (1 << r) != 0 || (set.shared[i] && targets != 0) {
                removed += flush(u, self.cur_asid, false);
            }
        }
        set.stats[r].entries_invalidated += removed;
        let cost = set.cycles;
        let work = if e.addr == FLUSH_ALL || e.addr == FLUSH_SPACE {
            cost.flush_all
        } else {
            cost.page
        };
        for c in (0..set.count()).filter(|&c| c != r && targets & (1 << c) != 0) {
            let running = set.runs(c, self.cur_asid);
            let n: u64 = set.parked[c]
                .iter_mut()
                .map(|u| flush(u, running, true))
                .sum();
            let s = &mut set.stats[c];
            s.entries_invalidated += n;
            s.shootdowns_received += 1;
            s.cycles_receiving += work;
            if new_request {
                s.ipis_received += 1;
                s.cycles_receiving += cost.receive;
            }
        }
        let others = (targets & !(1 << r)).count_ones() as u64;
        if others != 0 {
            let s = &mut set.stats[r];
            s.shootdowns_sent += 1;
            if new_request {
                s.requests_sent += 1;
                s.ipis_sent += others;
                s.cycles_sending += cost.send + cost.per_target * others;
            }
        }
        if e.addr == FLUSH_SPACE {
            // A CPU that does not run the address space holds none of it now.
            for c in (0..set.count()).filter(|&c| targets & (1 << c) != 0) {
                if set.runs(c, self.cur_asid) != e.asid {
                    if let Some(m) = set.ran.get_mut(&e.asid) {
                        *m &= !(1 << c);
                    }
                }
            }
        }
        if e.addr == FLUSH_ALL {
            // A CPU flushed whole caches no address space; it runs its own still.
            for c in (0..set.count()).filter(|&c| targets & (1 << c) != 0) {
                for m in set.ran.values_mut() {
                    *m &= !(1 << c);
                }
                let running = set.runs(c, self.cur_asid);
                *set.ran.entry(running).or_default() |= 1 << c;
            }
        }
        self.forget_pages();
    }

    /// The first CPU the trace named that the machine lacks, as an error (see
    /// [`Machine::cannot_follow`]).
    pub(super) fn cpu_beyond(&self, name: &str) -> Option<Error> {
        let set = self.cpus.as_deref()?;
        let cpu = set.beyond?;
        Some(Error::trace(
            name,
            crate::error::Location::Whole,
            "cpu",
            format!(
                "the trace names CPU {cpu}, but the machine has {} (machine.cpus)",
                set.count()
            ),
        ))
    }

    /// The `cpus` section of the result: what each CPU counted (none on a machine of one).
    pub fn cpus_json(&self) -> Option<Value> {
        let set = self.cpus.as_deref()?;
        let mut stats = set.stats.clone();
        // The running CPU's counts since it began to run.
        add_since(
            &mut stats[set.running],
            &set.since,
            &totals(&self.ledger, self.walker.as_deref()),
        );
        let names = self.ledger.structures();
        let per: Vec<Value> = stats
            .iter()
            .enumerate()
            .map(|(cpu, s)| {
                let structures: serde_json::Map<String, Value> = names
                    .iter()
                    .chain(std::iter::once(&"walk".to_string()))
                    .zip(
                        s.structures
                            .iter()
                            .chain(std::iter::repeat(&Counter::default())),
                    )
                    .map(|(n, c)| {
                        (
                            n.clone(),
                            json!({"accesses": c.accesses, "misses": c.misses}),
                        )
                    })
                    .collect();
                let mut j = json!({
                    "cpu": cpu,
                    "references": s.references,
                    "structures": structures,
                    "shootdowns_sent": s.shootdowns_sent,
                    "shootdowns_received": s.shootdowns_received,
                    "entries_invalidated": s.entries_invalidated,
                    "shootdown_misses": s.shootdown_misses,
                    "requests_sent": s.requests_sent,
                    "ipis_sent": s.ipis_sent,
                    "ipis_received": s.ipis_received,
                    "shootdown_cycles": {
                        "sending": s.cycles_sending,
                        "receiving": s.cycles_receiving,
                    },
                });
                if self.walker.is_some() {
                    j["walk_cycles"] = json!(s.walk_cycles);
                    j["page_faults"] = json!(s.page_faults);
                }
                j
            })
            .collect();
        let cycles: u64 = stats
            .iter()
            .map(|s| s.cycles_sending + s.cycles_receiving)
            .sum();
        Some(json!({
            "count": set.count(),
            "shootdown": set.policy,
            "shootdown_cycles": cycles,
            "per_cpu": per,
        }))
    }
}
