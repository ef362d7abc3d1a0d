//! The data path of a machine whose `[[cache]]` hierarchy is physically addressed: one with
//! a page table (`[pagetable]`). The walker's physical memory is the machine's one physical
//! memory — a page's frame is the one its table entry maps — so the caches see each program
//! reference at that frame, and the walker's table reads and writes at their own physical
//! addresses ([`Walker::miss_through`]): the walks and the program compete for the caches.

use super::*;
use crate::pagetable::PAGE_SHIFT;

/// Bytes of a page of the walker's physical memory (a frame).
const PAGE: u64 = 1 << PAGE_SHIFT;

impl Machine {
    /// Reference `e`, just translated, reaches the caches at its physical address: a mapped
    /// page's at its frame ([`Walker::physical`], which maps a page no walk has mapped yet),
    /// a reference in an unmapped region (`mapped` false) at its address as it is. A
    /// reference crossing 4 KiB pages is one reference to the caches per page (two
    /// physical places), only the first with `machine.straddle = "first"`.
    #[inline(never)]
    pub(super) fn physical_cache_reference(&mut self, e: &Event, mapped: bool) {
        let (Some(w), Some(h)) = (self.walker.as_deref_mut(), self.caches.as_deref_mut()) else {
            return;
        };
        if !mapped {
            h.reference(e, &mut self.ledger);
            return;
        }
        if (e.addr & (PAGE - 1)) + e.size.max(1) as u64 > PAGE {
            return self.physical_pages(e);
        }
        if let Some(p) = w.physical(e.asid, e.addr, e.paddr) {
            h.reference_parts(p, e.size, e.kind, e.mode, &mut self.ledger);
        }
    }

    /// [`Machine::physical_cache_reference`] of a mapped reference crossing pages.
    #[inline(never)]
    fn physical_pages(&mut self, e: &Event) {
        let (Some(w), Some(h)) = (self.walker.as_deref_mut(), self.caches.as_deref_mut()) else {
            return;
        };
        let mut addr = e.addr;
        let mut left = e.size.max(1) as u64;
        loop {
            let in_page = (PAGE - (addr & (PAGE - 1))).min(left);
            let paddr = match e.paddr {
                crate::event::NO_PADDR => crate::event::NO_PADDR,
                p => p.wrapping_add(addr - e.addr),
            };
            if let Some(p) = w.physical(e.asid, addr, paddr) {
                h.reference_parts(p, in_page as u16, e.kind, e.mode, &mut self.ledger);
            }
            left -= in_page;
            if left == 0 || !self.split {
                return;
            }
            addr = match addr.checked_add(in_page) {
                Some(a) => a,
                None => return,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A small TLB and a 4-level radix table over 64 KiB of memory (16 frames: pages lose
    /// their frames), behind `extra` lines of config.
    fn machine(extra: &str, caches: &[&str]) -> Machine {
        let text = format!(
            "[machine]\nglobal_above='0xffff800000000000'\n[[tlb]]\nname='t'\nentries=4\nways='full'\nserves='data'\n[pagetable]\norganisation='radix'\nlevels=4\nmemory='64K'\npreload=0.25\n{extra}"
        );
        let caches: Vec<String> = caches.iter().map(|c| c.to_string()).collect();
        Machine::assemble_all(Some(&text), "m.toml", &[], &caches, &[]).unwrap()
    }

    const CACHES: [&str; 2] = [
        "l1:size=512,line=16,ways=2,serves=unified,next=l2",
        "l2:size=2k,line=32,ways=4,serves=unified",
    ];

    /// Events of three address spaces over a few user and kernel pages: references of every
    /// kind and mode (fetches untranslated: the TLB serves data), some crossing a page, some
    /// naming a shared physical page; switches and unmaps.
    fn events() -> impl Strategy<Value = Vec<Event>> {
        let one = (0u8..20, 0u32..3, 0u64..24, 0u64..4096, 1u16..12).prop_map(
            |(what, asid, page, offset, size)| {
                let kernel = page >= 20;
                let addr = if kernel {
                    0xffff_8880_0000_0000 + (page << 12) + offset
                } else {
                    0x40_0000 + (page << 12) + offset
                };
                let mut e = match what {
                    0 => Event::control(Kind::ContextSwitch, 0, asid),
                    1 => Event::control(Kind::Unmap, addr & !0xfff, asid),
                    _ => Event::reference(Kind::REFS[what as usize % 3], addr, size),
                };
                if e.kind.is_ref() {
                    e.asid = asid;
                    e.mode = if kernel { Mode::Kernel } else { Mode::User };
                    // Pages 8 and 9 are one shared physical page in every space.
                    if page == 8 || page == 9 {
                        e.paddr = 0x7700_0000 + offset;
                    }
                }
                e
            },
        );
        proptest::collection::vec(one, 1..400)
    }

    /// What the caches of [`machine`] with [`CACHES`] see, from a machine without them
    /// driven one page at a time: each walk's table references (kernel loads and stores of
    /// a word), then, once every page a reference touches is translated (each on its own,
    /// as a straddle is), the reference at their frames, one reference per page.
    fn physical_stream(events: &[Event]) -> Vec<Event> {
        let mut m = machine("[pagetable.cache]\nsize=0\n", &[]);
        m.walker.as_deref_mut().unwrap().serve_caches();
        let mut out = Vec::new();
        for e in events {
            let mut pieces = vec![*e];
            if e.kind.is_ref() {
                pieces.clear();
                let (mut addr, end) = (e.addr, e.addr + e.size as u64);
                while addr < end {
                    let next = ((addr >> 12) + 1) << 12;
                    let mut r = *e;
                    r.addr = addr;
                    r.size = (next.min(end) - addr) as u16;
                    if e.paddr != crate::event::NO_PADDR {
                        r.paddr = e.paddr + (addr - e.addr);
                    }
                    pieces.push(r);
                    addr = next;
                }
            }
            // Every page is translated before the access reaches the caches.
            for r in &pieces {
                let walks = m.walker().unwrap().stats().walks;
                m.run_batch(std::slice::from_ref(r));
                let w = m.walker().unwrap();
                if w.stats().walks > walks {
                    for t in w.last_walk() {
                        let kind = if t.write { Kind::Store } else { Kind::Load };
                        let mut t = Event::reference(kind, t.addr, 4);
                        t.mode = Mode::Kernel;
                        t.asid = e.asid;
                        out.push(t);
                    }
                }
            }
            for r in pieces.into_iter().filter(|r| r.kind.is_ref()) {
                let w = m.walker.as_deref_mut().unwrap();
                let p = w.physical(r.asid, r.addr, r.paddr).unwrap();
                out.push(Event {
                    addr: p,
                    paddr: crate::event::NO_PADDR,
                    ..r
                });
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// The caches behind a page table are the caches alone fed the physical stream, and
        /// the TLB and the walks are those without the caches (their penalty apart).
        #[test]
        fn caches_see_the_physical_stream(events in events()) {
            let mut with = machine("", &CACHES);
            with.run_batch(&events);
            let mut without = machine("[pagetable.cache]\nsize=0\n", &[]);
            without.run_batch(&events);
            let mut alone = Machine::assemble_all(None, "c", &[], &CACHES.map(String::from), &[]).unwrap();
            alone.run_batch(&physical_stream(&events));
            for s in 0..2 {
                let c = |m: &Machine, s: usize| m.ledger().total(s, |_, _, _| true);
                prop_assert_eq!(c(&with, s + 1), c(&alone, s), "cache {}", s);
            }
            let total = |m: &Machine| m.ledger().total(0, |_, _, _| true);
            prop_assert_eq!(total(&with), total(&without));
            let (a, b) = (with.walker().unwrap().stats(), without.walker().unwrap().stats());
            // (Faults differ: a page only fetched, which no TLB translates, is mapped when
            // it reaches the caches, and then holds a frame other pages would have had.)
            prop_assert_eq!(a.walks, b.walks);
            prop_assert_eq!(&a.level_refs, &b.level_refs);
        }
    }

    /// Two address spaces' pages at one virtual address are two places in a physical cache
    /// (they share a line in a virtual one), and the aliases of one physical page one place.
    #[test]
    fn address_spaces_and_aliases_in_a_physical_cache() {
        let at = |asid: u32, paddr: u64| {
            let mut e = Event::reference(Kind::Load, 0x40_0010, 4);
            e.asid = asid;
            e.paddr = paddr;
            e
        };
        let none = crate::event::NO_PADDR;
        let misses = |m: &mut Machine, events: &[Event]| {
            m.run_batch(events);
            let l1 = m
                .ledger()
                .structures()
                .iter()
                .position(|s| s == "l1")
                .unwrap();
            m.ledger().total(l1, |_, mode, _| mode == Mode::User).misses
        };
        let cache = ["l1:size=4k,line=16,ways=4"];
        let two = [at(1, none), at(2, none), at(1, none), at(2, none)];
        assert_eq!(misses(&mut machine("", &cache), &two), 2);
        let virt = &mut Machine::assemble_all(None, "c", &[], &[cache[0].into()], &[]).unwrap();
        assert_eq!(misses(virt, &two), 1);
        let shared = [at(1, 0x5000), at(2, 0x5000)];
        assert_eq!(misses(&mut machine("", &cache), &shared), 1);
    }

    /// The walker's table references reach the caches in kernel mode, counted in the
    /// walker's levels: a cold walk of 4 levels misses all 4 in an empty cache.
    #[test]
    fn walks_reach_the_caches() {
        let mut m = machine("", &["l1:size=4k,line=64,ways=4"]);
        m.run_batch(&[Event::reference(Kind::Load, 0x40_0000, 8)]);
        let kernel = m.ledger().total(1, |_, mode, _| mode == Mode::Kernel);
        let w = m.walker().unwrap().stats();
        assert_eq!(w.walks, 1);
        assert_eq!(kernel.accesses, w.level_refs.iter().sum::<u64>());
        assert_eq!(kernel.accesses, 4);
        assert_eq!(w.level_misses.iter().sum::<u64>(), kernel.misses);
        assert_eq!(
            w.penalty_cycles,
            kernel.misses * m.walker().unwrap().costs().cache_miss as u64
        );
    }

    #[test]
    fn what_a_physical_cache_refuses() {
        let refused = |extra: &str| {
            let text = format!("[[tlb]]\nname='t'\nentries=4\n[pagetable]\norganisation='radix'\nlevels=4\n{extra}");
            Machine::assemble_all(
                Some(&text),
                "m.toml",
                &[],
                &["l1:size=4k,line=16".into()],
                &[],
            )
            .err()
            .unwrap()
            .to_string()
        };
        assert!(refused("data_refs=true").contains("pagetable.data_refs"));
        assert!(refused("[pagetable.cache]\nsize='8K'").contains("pagetable.cache"));
        let big = refused("[pages]\nsize='2M'");
        assert!(
            big.contains("not yet") && big.contains("pages.size"),
            "{big}"
        );
    }
}
