//! The data path of a machine whose `[[cache]]` hierarchy is physically addressed: one with
//! a page table (`[pagetable]`). The walker's physical memory is the machine's one physical
//! memory — a page's frame is the one its table entry maps — so the caches see each program
//! reference at that frame, and the walker's table reads and writes at their own physical
//! addresses ([`Walker::miss_through`]): the walks and the program compete for the caches.

use super::*;
use crate::pagetable::PAGE_SHIFT;

/// The size (as a shift) of the mapped page holding `addr` of `asid`, for the frames of
/// walker `w`: a table of one page size needs no look-up of the page's size.
#[inline(always)]
pub(super) fn walked_shift(w: &Walker, pages: &PageSizes, addr: u64, asid: u32) -> Option<u32> {
    match w.holds_large_pages() {
        false => Some(w.base_shift()),
        true => pages.backing(addr, asid),
    }
}

impl Machine {
    /// Load or store `e`, just translated, goes to the walker's data cache (a walker that
    /// sees the program's data: `pagetable.data_refs`) at its page's frame; the general path
    /// and the one-TLB loop both send it here.
    #[inline(never)]
    pub(super) fn walker_data_ref(&mut self, e: &Event) {
        if let Some(w) = self.walker.as_deref_mut() {
            if let Some(shift) = walked_shift(w, &self.pages, e.addr, e.asid) {
                w.data_ref(e.asid, e.addr, e.kind == Kind::Store, shift);
            }
        }
    }

    /// Reference `e`, just translated, reaches the caches at its physical address: a mapped
    /// page's at its frame ([`Walker::physical`], which maps a page no walk has mapped yet;
    /// a large page's data is an aligned run of its size), a reference in an unmapped region
    /// (`mapped` false) at its address as it is. A reference crossing pages is one reference
    /// to the caches per page (two physical places), only the first with
    /// `machine.straddle = "first"`.
    #[inline(never)]
    pub(super) fn physical_cache_reference(&mut self, e: &Event, mapped: bool) {
        let (Some(w), Some(h)) = (self.walker.as_deref_mut(), self.caches.as_deref_mut()) else {
            return;
        };
        if !mapped {
            h.reference(e, &mut self.ledger);
            return;
        }
        let Some(shift) = walked_shift(w, &self.pages, e.addr, e.asid) else {
            return;
        };
        let page = 1u64 << shift;
        if (e.addr & (page - 1)) + e.size.max(1) as u64 > page {
            return self.physical_pages(e);
        }
        if let Some(p) = w.physical(e.asid, e.addr, e.paddr, shift) {
            h.reference_parts(p, e.size, e.kind, e.mode, &mut self.ledger);
        }
    }

    /// [`Machine::physical_cache_reference`] of a mapped reference crossing pages (a part in
    /// an unmapped region reaches the caches at its address).
    #[inline(never)]
    fn physical_pages(&mut self, e: &Event) {
        let (Some(w), Some(h)) = (self.walker.as_deref_mut(), self.caches.as_deref_mut()) else {
            return;
        };
        let mut addr = e.addr;
        let mut left = e.size.max(1) as u64;
        loop {
            let shift = self.pages.backing(addr, e.asid);
            let page = 1u64 << shift.unwrap_or(PAGE_SHIFT);
            let in_page = (page - (addr & (page - 1))).min(left);
            let paddr = match e.paddr {
                crate::event::NO_PADDR => crate::event::NO_PADDR,
                p => p.wrapping_add(addr - e.addr),
            };
            let at = match shift {
                Some(s) => w.physical(e.asid, addr, paddr, s),
                None => Some(addr),
            };
            if let Some(p) = at {
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
    use crate::event::NO_PADDR;
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

    /// The user pages of [`events`] in one 2 MiB page.
    const LARGE: &str = "[pages]\nregions=[{start=0x400000, end=0x600000, size='2M'}]\n";

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
    fn physical_stream(events: &[Event], pages: &str) -> Vec<Event> {
        let mut m = machine(&format!("[pagetable.cache]\nsize=0\n{pages}"), &[]);
        m.walker.as_deref_mut().unwrap().serve_caches().unwrap();
        let mut out = Vec::new();
        for e in events {
            let mut pieces = vec![*e];
            if e.kind.is_ref() {
                pieces.clear();
                let (mut addr, end) = (e.addr, e.addr + e.size as u64);
                while addr < end {
                    let shift = m.pages.backing(addr, e.asid).unwrap();
                    let next = ((addr >> shift) + 1) << shift;
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
                let shift = m.pages.backing(r.addr, r.asid).unwrap();
                let w = m.walker.as_deref_mut().unwrap();
                let p = w.physical(r.asid, r.addr, r.paddr, shift).unwrap();
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
        /// the TLB and the walks are those without the caches (their penalty apart); with the
        /// user pages in one 2 MiB page or not.
        #[test]
        fn caches_see_the_physical_stream(events in events(), large in any::<bool>()) {
            let pages = if large { LARGE } else { "" };
            let mut with = machine(pages, &CACHES);
            with.run_batch(&events);
            let mut without = machine(&format!("[pagetable.cache]\nsize=0\n{pages}"), &[]);
            without.run_batch(&events);
            let mut alone = Machine::assemble_all(None, "c", &[], &CACHES.map(String::from), &[]).unwrap();
            alone.run_batch(&physical_stream(&events, pages));
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
    }

    /// A large page's data is one aligned run of its size: its 4 KiB parts are its frame's
    /// consecutive 4 KiB, one fault maps them all, and a cache sees each part apart.
    #[test]
    fn a_large_page_is_an_aligned_run() {
        let cache = ["l1:size=64k,line=64,ways=4"];
        let mut m = machine("[pages]\nsize='2M'\n", &cache);
        let parts: Vec<Event> = (0..8u64)
            .map(|k| Event::reference(Kind::Load, 0x20_0000 + 0x1_5000 + k * 4096 + 8, 8))
            .collect();
        m.run_batch(&parts);
        m.run_batch(&parts);
        assert_eq!(m.walker().unwrap().stats().faults, 1);
        let l1 = m.ledger().total(1, |_, mode, _| mode == Mode::User);
        assert_eq!((l1.accesses, l1.misses), (16, 8));
        let w = m.walker.as_deref_mut().unwrap();
        let base = w.physical(0, 0x20_0000, NO_PADDR, 21).unwrap();
        assert_eq!(base & ((1 << 21) - 1), 0, "{base:#x}");
        for k in 0..8u64 {
            let a = 0x20_0000 + 0x1_5000 + k * 4096 + 8;
            assert_eq!(w.physical(0, a, NO_PADDR, 21), Some(base + (a - 0x20_0000)));
        }
        assert_eq!(m.walker().unwrap().stats().faults, 1);
    }

    /// Large pages of two sizes never share physical addresses: a 2 MiB page in the 512th
    /// frame after a 1 GiB page's is another place in the caches than that 1 GiB page.
    #[test]
    fn large_pages_of_two_sizes_do_not_overlap() {
        let text = "[machine]\nglobal_above='0xffff800000000000'\n[[tlb]]\nname='t'\nentries=4\nways='full'\nserves='data'\npage=['4K', '2M', '1G']\n[pagetable]\norganisation='radix'\nlevels=4\nmemory='16M'\npreload=0\n[pages]\nregions=[{start=0x4000_0000, end=0x8000_0000, size='1G'}, {start=0x1_0000_0000, end=0x2_0000_0000, size='2M'}]\n";
        let mut m = Machine::assemble_all(
            Some(text),
            "m.toml",
            &[],
            &["l1:size=64k,line=64,ways=4".into()],
            &[],
        )
        .unwrap();
        let two_m = |k: u64| Event::reference(Kind::Load, 0x1_0000_0000 + (k << 21), 8);
        let mut events = vec![two_m(0), Event::reference(Kind::Load, 0x4000_0000, 8)];
        events.extend((1..=600).map(two_m));
        m.run_batch(&events);
        let w = m.walker.as_deref_mut().unwrap();
        let giant = w.physical(0, 0x4000_0000, NO_PADDR, 30).unwrap();
        let large: Vec<u64> = (0..=600)
            .map(|k| {
                w.physical(0, 0x1_0000_0000 + (k << 21), NO_PADDR, 21)
                    .unwrap()
            })
            .collect();
        assert!(!large.contains(&giant), "{giant:#x}");
        assert!(large.iter().all(|p| p & ((1 << 21) - 1) == 0));
        assert_eq!(giant & ((1 << 30) - 1), 0);
    }

    /// Pages larger than 32 GiB (x86-64's root level maps 512 GiB) are runs of their own size
    /// too: each of two 512 GiB pages is one aligned run, apart from the other and from a
    /// 2 MiB page, so 16 bytes 32 GiB apart in each are 32 places in a fully associative cache
    /// (32 cold misses, then hits). With a slot of 32 GiB per frame, bytes 32 GiB apart would
    /// fall in the next frame's slot.
    #[test]
    fn pages_larger_than_32_gib_are_aligned_runs_of_their_size() {
        let giant = 1u64 << 39;
        let regions = format!(
            "[pages]\nregions=[{{start={giant:#x}, end={:#x}, size='512G'}}, {{start=0x4000_0000, end=0x4020_0000, size='2M'}}]\n",
            3 * giant
        );
        let tlb =
            "[[tlb]]\nname='t'\nentries=4\nways='full'\nserves='data'\npage=['4K', '2M', '512G']\n";
        let text = format!(
            "{tlb}[pagetable]\norganisation='radix'\nlevels=4\nmemory='64K'\npreload=0.25\n{regions}"
        );
        let cache = ["l1:size=4k,line=64,ways=full".to_string()];
        let mut m = Machine::assemble_all(Some(&text), "m.toml", &[], &cache, &[]).unwrap();
        let bytes: Vec<u64> = [giant, 2 * giant]
            .into_iter()
            .flat_map(|page| (0..16u64).map(move |k| page + (k << 35) + 0x40))
            .collect();
        let loads: Vec<Event> = bytes
            .iter()
            .map(|&a| Event::reference(Kind::Load, a, 8))
            .collect();
        m.run_batch(&loads);
        m.run_batch(&loads);
        m.run_batch(&[Event::reference(Kind::Load, 0x4000_0040, 8)]);
        let user = m.ledger().total(1, |_, mode, _| mode == Mode::User);
        assert_eq!((user.accesses, user.misses), (65, 33));
        let w = m.walker.as_deref_mut().unwrap();
        let start =
            |w: &mut Walker, page: u64, shift: u32| w.physical(0, page, NO_PADDR, shift).unwrap();
        let (a, b) = (start(w, giant, 39), start(w, 2 * giant, 39));
        let two_m = start(w, 0x4000_0000, 21);
        assert_eq!((a % giant, b % giant, two_m % (1 << 21)), (0, 0, 0));
        assert!(a.abs_diff(b) >= giant, "{a:#x} {b:#x}");
        assert!(!(a..a + giant).contains(&two_m) && !(b..b + giant).contains(&two_m));
        for &x in &bytes {
            let page = x & !(giant - 1);
            let at = w.physical(0, x, NO_PADDR, 39).unwrap();
            assert_eq!(at, start(w, page, 39) + (x - page), "{x:#x}");
        }
    }

    /// The largest page the config takes is 2^63 bytes (a radix table whose root level maps
    /// them); the pool of large pages then holds one slot, at 2^63, so a machine whose caches
    /// see them has a memory of one frame, and a larger memory is refused naming it (with
    /// `data_refs` too) rather than given addresses past 2^64.
    #[test]
    fn the_largest_page_has_one_slot_below_2_64() {
        let text = |memory: u64, extra: &str| {
            format!(
                "[[tlb]]\nname='t'\nentries=4\n[pages]\nsize='8589934592G'\n[pagetable]\norganisation='radix'\nbits=[1, 20, 20, 11]\nentry_bytes=8\nmemory={memory}\n{extra}"
            )
        };
        let cache = ["l1:size=4k,line=64,ways=4".to_string()];
        let build = |memory: u64, extra: &str| {
            Machine::assemble_all(Some(&text(memory, extra)), "m.toml", &[], &cache, &[])
        };
        let mut m = build(4096, "").unwrap();
        assert_eq!(m.walker().unwrap().table().page_shifts().last(), Some(&63));
        let high = 1u64 << 63;
        m.run_batch(&[
            Event::reference(Kind::Load, 0x1234, 8),
            Event::reference(Kind::Load, high + 0x5678, 8),
        ]);
        let l1 = m.ledger().total(1, |_, mode, _| mode == Mode::User);
        assert_eq!((l1.accesses, l1.misses), (2, 2));
        let w = m.walker.as_deref_mut().unwrap();
        // One frame: the upper page took it from the lower one, and lies at 2^63, its slot;
        // the lower one takes it back when touched again.
        assert_eq!(w.stats().faults, 2);
        assert_eq!(
            w.physical(0, high + 0x5678, NO_PADDR, 63),
            Some(high + 0x5678)
        );
        assert_eq!(w.physical(0, 0x1234, NO_PADDR, 63), Some(high + 0x1234));
        assert_eq!(w.stats().faults, 3);
        for (extra, with) in [("", &cache[..]), ("data_refs=true", &[][..])] {
            let e = Machine::assemble_all(Some(&text(8192, extra)), "m.toml", &[], with, &[])
                .err()
                .unwrap()
                .to_string();
            assert!(
                e.contains("pagetable.memory: 2 frames of 4K: with pages of 8589934592G, a physically addressed machine has room for 1 ")
                    && e.contains("make memory at most 4096 bytes"),
                "{e}"
            );
        }
        // Without physical addresses the pool is not used: any memory.
        let plain = text(8192, "");
        assert!(Machine::assemble(Some(&plain), "m.toml", &[], &[]).is_ok());
    }

    /// With `data_refs`, every load and store of a large page reaches the walker's data cache
    /// (each of its 4 KiB parts finds the page's frame), not only those of the part whose
    /// walk faulted.
    #[test]
    fn every_part_of_a_large_page_reaches_the_data_cache() {
        let loads: Vec<Event> = (0..200u64)
            .map(|i| Event::reference(Kind::Load, 0x1000_0000 + (i % 8) * 4096 + (i * 8) % 4096, 8))
            .collect();
        for size in ["4K", "2M"] {
            let mut m = machine(&format!("data_refs=true\n[pages]\nsize='{size}'\n"), &[]);
            m.run_batch(&loads);
            let s = m.walker().unwrap().stats();
            assert_eq!(s.data_refs, 200, "{size} pages");
        }
    }
}
