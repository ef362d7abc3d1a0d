//! The loop of a machine whose references enter one TLB: one first-level structure, replaced
//! by LRU or FIFO, whatever lies below it (next levels, a page-table walker, Bala's
//! prefetcher) — the machine of most TLB studies, and of DineroIV's TLB-as-a-cache — as long
//! as nothing else sees the references but the walker's data cache (no memory system, caches,
//! software refill, virtually addressed cache, shadow or second CPU). A walker whose data
//! cache sees the program's loads and stores (`pagetable.data_refs`, Huck & Hays' machines)
//! gets each of them from the loop once it is translated, as from [`Feed`](super::Feed).
//!
//! [`Feed`](super::Feed) serves every machine, so each of its probes looks up which
//! structure, which engine and which of a dozen wirings applies, and calls out of the loop to
//! do it. Here all of that is settled when the loop starts: the structure's engine is taken
//! out of the machine for the loop's lifetime (an [`ExactTlb`] of one policy and lookup, its
//! access inlined with no dispatch), its contexts, page shift and last pages are locals, and
//! every count of the first level is a local of the [`Tally`]. A first-level miss with one
//! plain level below (nothing below that, no walker or prefetcher acting on the walk) is
//! taken by the loop too, that level's counts kept in locals; any other first-level miss
//! goes to the machine as [`Feed`](super::Feed)'s does (nothing below the first level reads
//! its engine). Everything else — an event that is not a reference of the running
//! address space, or a reference that straddles two pages on a machine that splits it —
//! puts the engine back and goes through the machine's general path, which then gives the
//! loop the machine's state back. The results are the same as [`Feed`](super::Feed)'s, count
//! for count.

use super::feed::{Fast, Tally, NO_PAGE};
use super::Machine;
use crate::event::{Event, EventSink, Kind, Mode};
use crate::tlb::{Engine, ExactTlb};

/// The one first-level structure of a machine that [`RootFeed`] can simulate, and its
/// engine's policy and lookup (`(lru, indexed)`), or `None`. See the module documentation
/// for what the machine must lack.
pub(super) fn one_root(m: &Machine) -> Option<(usize, bool, bool)> {
    if m.refill.is_some()
        || m.memory.is_some()
        || m.caches.is_some()
        || m.vac.is_some()
        || m.cpus.is_some()
        || m.pages.has_holes
        || !m.uniform
    {
        return None;
    }
    let mut root = None;
    for kind in 0..3 {
        match m.fast[kind] {
            Fast::Untranslated => {}
            Fast::Root(r, _) if root.is_none_or(|x| x == r) => root = Some(r),
            _ => return None,
        }
    }
    let r = root?;
    let u = &m.units[r];
    if u.shadow.is_some() || u.shot.is_some() || u.reads_reference {
        return None;
    }
    match u.tlb {
        Engine::LruScan(_) => Some((r, true, false)),
        Engine::LruIndexed(_) => Some((r, true, true)),
        Engine::FifoScan(_) => Some((r, false, false)),
        Engine::FifoIndexed(_) => Some((r, false, true)),
        Engine::General(_) => None,
    }
}

/// Simulates events one at a time on a machine whose references enter one TLB ([`one_root`]),
/// whose engine is an `ExactTlb<LRU, INDEXED>`; the same results as [`Feed`](super::Feed)'s.
pub(super) struct RootFeed<'m, const LRU: bool, const INDEXED: bool> {
    m: &'m mut Machine,
    /// The structure's engine, out of the machine while the loop runs (a spare in its place);
    /// the spare while the machine has it back.
    tlb: ExactTlb<LRU, INDEXED>,
    /// The structure.
    r: usize,
    /// Its page shift.
    shift: u32,
    /// The reference kinds it translates, a bit per kind.
    kinds: u8,
    /// Its hits change no replacement state ([`Machine::touched`]).
    free_hits: bool,
    /// Per kind, whether it has nothing below it: a miss is a walk, only counted
    /// ([`Machine::alone`]).
    alone: [bool; 4],
    /// The walker's data cache sees the program's loads and stores
    /// ([`Machine::walker_data_ref`]).
    data: bool,
    /// The level below it, when the loop takes it too ([`second_level`]).
    second: Option<Second>,
    /// Its last page per kind ([`Machine::last_page`]).
    last: [u64; 4],
    /// Its context tags under the running address space, non-global and global.
    ctx_now: u64,
    ctx_global: u64,
    /// [`Machine::global_above`].
    global_above: u64,
    split: bool,
    /// The running address space: a reference in it takes the loop.
    asid: u32,
    tally: Tally,
    /// Per [`Tally::cell`], first-level misses that went to the second level, and that
    /// level's hits and misses (walks), not yet in the ledger.
    below: [[u64; 8]; 3],
}

/// A second level the loop takes itself: the one structure below the first for every kind
/// it translates, with nothing below it (a miss is a walk) and nothing that needs more than
/// its counts — no walker or prefetcher acting on the walk, no shadow, no dynamic
/// partitioning ([`second_level`]). Its engine stays in the machine (any policy), reached
/// directly.
#[derive(Clone, Copy)]
struct Second {
    unit: usize,
    shift: u32,
    /// Its context tags under the running address space, non-global and global.
    ctx_now: u64,
    ctx_global: u64,
}

/// The level below first-level structure `r` that the loop takes itself, if there is one
/// (see [`Second`]).
fn second_level(m: &Machine, r: usize) -> Option<usize> {
    let d = m.pages.default?;
    if m.walker.is_some() || m.prefetch.is_some() {
        return None;
    }
    let mut second = None;
    for kind in Kind::REFS {
        if !matches!(m.fast[kind as usize], Fast::Root(..)) {
            continue;
        }
        let l2 = m.next[r].at(kind, d)?;
        if second.is_some_and(|x| x != l2) || m.next[l2].at(kind, d).is_some() {
            return None;
        }
        second = Some(l2);
    }
    let l2 = second?;
    let u = &m.units[l2];
    if u.shadow.is_some() || u.shot.is_some() || super::climb::climbs(&m.climbs, l2) {
        return None;
    }
    Some(l2)
}

impl<'m, const LRU: bool, const INDEXED: bool> RootFeed<'m, LRU, INDEXED> {
    /// The loop of `m`, whose structure `r` is alone with an `ExactTlb<LRU, INDEXED>` engine
    /// (as [`one_root`] says).
    pub(super) fn new(m: &'m mut Machine, r: usize) -> RootFeed<'m, LRU, INDEXED> {
        let mut tlb = ExactTlb::spare();
        swap(&mut m.units[r].tlb, &mut tlb);
        let mut kinds = 0;
        let mut shift = 0;
        for kind in 0..3 {
            if let Fast::Root(_, s) = m.fast[kind] {
                kinds |= 1 << kind;
                shift = s;
            }
        }
        let mut feed = RootFeed {
            tlb,
            r,
            shift,
            kinds,
            free_hits: m.free_hits[r],
            alone: [m.alone[0], m.alone[1], m.alone[2], false],
            data: m.walker.as_ref().is_some_and(|w| w.sees_data()),
            second: second_level(m, r).map(|unit| Second {
                unit,
                shift: m.default_shift[unit],
                ctx_now: 0,
                ctx_global: 0,
            }),
            below: [[0; 8]; 3],
            last: [NO_PAGE; 4],
            ctx_now: 0,
            ctx_global: 0,
            global_above: m.global_above,
            split: m.split,
            asid: 0,
            tally: Tally::default(),
            m,
        };
        feed.reload();
        feed
    }

    /// Take the machine's state that events outside the loop may change.
    fn reload(&mut self) {
        let u = &self.m.units[self.r];
        (self.ctx_now, self.ctx_global) = (u.ctx_now, u.ctx_global);
        self.last = self.m.last_page[self.r];
        self.asid = self.m.cur_asid;
        if let Some(l2) = &mut self.second {
            let u = &self.m.units[l2.unit];
            (l2.ctx_now, l2.ctx_global) = (u.ctx_now, u.ctx_global);
        }
    }

    /// Give the machine back the engine, the last pages and the counts.
    fn put_back(&mut self) {
        self.m.settle(&mut self.tally);
        self.tally = Tally::default();
        if let Some(l2) = self.second {
            let walk = self.m.ledger.walk_index();
            for mode in [Mode::User, Mode::Kernel] {
                for kind in Kind::REFS {
                    let c = Tally::cell(mode, kind);
                    let [missed, hits, walks] = self.below.map(|b| b[c]);
                    let ledger = &mut self.m.ledger;
                    ledger.add_misses(self.r, mode, kind, missed);
                    ledger.add_hits(l2.unit, mode, kind, hits);
                    ledger.add_misses(l2.unit, mode, kind, walks);
                    ledger.add_misses(walk, mode, kind, walks);
                }
            }
            self.below = [[0; 8]; 3];
        }
        self.m.last_page[self.r] = self.last;
        swap(&mut self.m.units[self.r].tlb, &mut self.tlb);
    }

    /// A first-level miss of reference `e` with levels below (or a walker, or a prefetcher):
    /// to the machine, as [`Feed`](super::Feed)'s. Nothing there reads the first level's
    /// engine, or the last pages this loop keeps.
    #[inline(never)]
    fn below(&mut self, e: &Event) {
        self.m.walk_paddr = e.paddr;
        self.m.root_missed(e.addr, e.kind, e.mode, self.r);
    }

    /// A first-level miss of reference `e` (counted in `cell`, global or not) that the
    /// second level `l2` takes: what [`Machine::root_missed`] does there, counted here.
    #[inline(never)]
    fn second(&mut self, l2: Second, e: &Event, cell: usize, global: bool) {
        self.below[0][cell] += 1;
        let ctx = if global { l2.ctx_global } else { l2.ctx_now };
        let u = &mut self.m.units[l2.unit];
        let missed = !u.access(e.addr >> l2.shift, ctx, e.kind, e.mode);
        self.below[1 + missed as usize][cell] += 1;
    }

    /// An event the loop does not take: through the machine's general path, with the engine
    /// back in place.
    #[inline(never)]
    fn cold(&mut self, e: &Event) {
        self.put_back();
        self.m.feed().event(e);
        swap(&mut self.m.units[self.r].tlb, &mut self.tlb);
        self.reload();
    }
}

impl<const LRU: bool, const INDEXED: bool> EventSink for RootFeed<'_, LRU, INDEXED> {
    /// What [`Feed::simulate`](super::Feed) and [`Feed::translate_root`](super::Feed) do for a
    /// reference of the running address space, on this machine.
    #[inline(always)]
    fn event(&mut self, e: &Event) {
        if !(e.kind.is_ref() && e.asid == self.asid) {
            return self.cold(e);
        }
        let kind = e.kind as usize & 3;
        let cell = Tally::cell(e.mode, e.kind);
        if self.kinds & (1 << kind) == 0 {
            self.tally.refs[cell] += 1;
            return;
        }
        let page = e.addr >> self.shift;
        if self.split {
            let last = e.addr.wrapping_add(e.size.saturating_sub(1) as u64) >> self.shift;
            if last != page {
                return self.cold(e);
            }
        }
        self.tally.refs[cell] += 1;
        self.translate(e, kind, cell, page);
        if self.data && e.kind != Kind::Fetch {
            self.m.walker_data_ref(e);
        }
    }
}

impl<const LRU: bool, const INDEXED: bool> RootFeed<'_, LRU, INDEXED> {
    /// The translation of reference `e` of `kind` (counted in `cell`) on `page`: the first
    /// level, and on a miss what lies below.
    #[inline(always)]
    fn translate(&mut self, e: &Event, kind: usize, cell: usize, page: u64) {
        if page == self.last[kind] {
            self.tally.hits[cell] += 1;
            return;
        }
        let global = super::global_at(e.addr, self.global_above);
        let ctx = if global {
            self.ctx_global
        } else {
            self.ctx_now
        };
        let hit = self.tlb.access(page, ctx);
        super::translate::touched(&mut self.last, self.free_hits, kind, page, !hit);
        if hit {
            self.tally.hits[cell] += 1;
        } else if self.alone[kind] {
            self.tally.walks[cell] += 1;
        } else if let Some(l2) = self.second {
            self.second(l2, e, cell, global);
        } else {
            self.below(e);
        }
    }
}

impl<const LRU: bool, const INDEXED: bool> Drop for RootFeed<'_, LRU, INDEXED> {
    fn drop(&mut self) {
        self.put_back();
    }
}

/// Swap the `ExactTlb<LRU, INDEXED>` that `engine` holds with `t`: the loop takes the
/// machine's engine and leaves a spare ([`ExactTlb::spare`]) in its place, then gives it back
/// the same way.
fn swap<const LRU: bool, const INDEXED: bool>(engine: &mut Engine, t: &mut ExactTlb<LRU, INDEXED>) {
    let slot = ExactTlb::<LRU, INDEXED>::lend(engine).expect("the engine one_root chose");
    std::mem::swap(slot, t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::result_json;
    use crate::report::TraceInfo;

    /// Every machine whose references enter one TLB, run through its loop, counts what the
    /// machine's general path counts: LRU and FIFO, scanned and indexed sets, unified and
    /// data TLBs, tagged and untagged, with a global region, splitting straddles or not, alone
    /// or with a next level, a page-table walker (its data cache seeing the program's loads
    /// and stores or not) or a prefetcher; on a stream of every event kind in three address
    /// spaces.
    #[test]
    fn the_loop_counts_what_the_general_path_counts() {
        let mut events = crate::run::tests::mixed_events(40_000, 11);
        // Physical addresses on two references in three, for the walker: two address spaces'
        // pages share a frame by them.
        for (i, e) in events.iter_mut().enumerate() {
            if e.kind.is_ref() && i % 3 != 0 {
                e.paddr = (e.addr & 0x3f_ffff) | 0x8000_0000;
            }
        }
        let global = "machine.global_above=0xffff800000000000";
        let l2 = "l2:entries=32,ways=4,policy=fifo,page=4k";
        let machines: [(&[&str], &[&str]); 16] = [
            (&["d:entries=64,ways=full,policy=lru,page=4k"], &[]),
            (&["d:entries=8,ways=2,policy=lru,page=4k"], &[]),
            (
                &["d:entries=64,ways=full,policy=fifo,page=4k,serves=unified"],
                &[],
            ),
            (&["d:entries=12,ways=3,policy=fifo,page=4k,asid=false"], &[]),
            (
                &["d:entries=32,ways=full,policy=lru,page=4k,serves=unified"],
                &["machine.straddle=split", global],
            ),
            (
                &["d:entries=64,ways=32,policy=fifo,page=4k,serves=unified,asid=false"],
                &[global],
            ),
            (
                &["d:entries=16,ways=4,policy=lru,page=4k,serves=instruction"],
                &["machine.straddle=split"],
            ),
            (
                &["d:entries=16,ways=full,policy=lru,page=2m"],
                &["pages.size=2m"],
            ),
            (&["d:entries=8,ways=2,page=4k,next=l2", l2], &[global]),
            (
                &[
                    "d:entries=32,ways=full,policy=fifo,page=4k,serves=unified,next=l2",
                    l2,
                ],
                &["machine.straddle=split"],
            ),
            (
                &["d:entries=16,ways=4,page=4k,serves=unified"],
                &["pagetable.organisation=radix", global],
            ),
            (
                &["d:entries=16,ways=full,page=4k,serves=unified,next=l2", l2],
                &["prefetch.user_entries=4", "prefetch.kernel_entries=2"],
            ),
            (
                &[
                    "d:entries=8,ways=full,page=4k,serves=unified,next=l2",
                    "l2:entries=64,ways=full,policy=plru,page=4k,asid=false",
                ],
                &["machine.straddle=split", global],
            ),
            (
                &[
                    "d:entries=4,ways=4,policy=fifo,page=4k,next=l2",
                    "l2:entries=48,ways=3,policy=random,page=4k,serves=unified",
                ],
                &[],
            ),
            (
                &["d:entries=16,ways=full,page=4k,serves=unified"],
                &[
                    "pagetable.organisation=hashed",
                    "pagetable.data_refs=true",
                    "pagetable.memory=1M",
                    "machine.straddle=split",
                    global,
                ],
            ),
            (
                &["d:entries=8,ways=2,policy=fifo,page=4k"],
                &[
                    "pagetable.organisation=radix",
                    "pagetable.data_refs=true",
                    "pagetable.cache.size=4K",
                ],
            ),
        ];
        for (flags, sets) in machines {
            let build = || {
                let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
                let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
                Machine::assemble(None, "t", &flags, &sets).unwrap()
            };
            let mut general = build();
            let mut feed = general.feed();
            for e in &events {
                feed.event(e);
            }
            drop(feed);
            let mut looped = build();
            assert!(one_root(&looped).is_some(), "{flags:?}: takes the loop");
            for chunk in events.chunks(777) {
                looped.run_batch(chunk);
            }
            let info = TraceInfo::default();
            assert_eq!(
                result_json(&looped, &info),
                result_json(&general, &info),
                "{flags:?} {sets:?}"
            );
        }
    }

    /// Machines whose references enter two TLBs, reach caches, or enter one of another
    /// policy or with a shadow take the general path.
    #[test]
    fn only_a_machine_of_one_root_takes_the_loop() {
        for flags in [
            vec!["d:entries=16,ways=full,policy=plru,page=4k"],
            vec!["d:entries=16,ways=full,page=4k,3c=yes"],
            vec![
                "i:entries=16,ways=4,page=4k,serves=instruction",
                "d:entries=16,ways=4,page=4k",
            ],
        ] {
            let flags: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
            let m = Machine::assemble(None, "t", &flags, &[]).unwrap();
            assert!(one_root(&m).is_none(), "{flags:?}");
        }
        let flags = ["d:entries=16,ways=4,page=4k".to_string()];
        let plain = Machine::assemble(None, "t", &flags, &[]).unwrap();
        assert!(one_root(&plain).is_some());
        let caches = ["l1:size=4k,line=64,ways=2,serves=unified".to_string()];
        let cached = Machine::assemble_all(None, "t", &flags, &caches, &[]).unwrap();
        assert!(one_root(&cached).is_none());
    }
}
