//! Translation of one reference through the hierarchy: page sizes, straddles, each level
//! until a hit, the walk; switches of address space, flushes and shootdowns.

use super::*;

impl Machine {
    /// Move the counts of `tally` into the ledger (under the running address space).
    pub(super) fn settle(&mut self, tally: &mut Tally) {
        for mode in [Mode::User, Mode::Kernel] {
            for kind in Kind::REFS {
                let cell = Tally::cell(mode, kind);
                self.ledger.add_references(mode, kind, tally.refs[cell]);
                if let Fast::Root(r, _) = self.fast[kind as usize] {
                    self.ledger.add_hits(r, mode, kind, tally.hits[cell]);
                    let walks = tally.walks[cell];
                    self.ledger.add_misses(r, mode, kind, walks);
                    let w = self.ledger.walk_index();
                    self.ledger.add_misses(w, mode, kind, walks);
                }
            }
        }
        *tally = Tally::default();
    }

    /// Translate reference `e` (both pages when it straddles and `straddle = "split"`);
    /// returns whether its address is mapped and whether a translation walked.
    #[inline(never)]
    pub(super) fn reference(&mut self, e: Event) -> (bool, bool) {
        let Some(shift) = self.pages.backing(e.addr, e.asid) else {
            self.ledger.unmapped += 1;
            return (false, false);
        };
        self.walk_paddr = e.paddr;
        let mut walked = self.translate(e.addr, e.kind, e.mode, shift);
        let last = e.addr.wrapping_add(e.size.max(1) as u64 - 1);
        if self.split && (last ^ e.addr) >> shift != 0 {
            walked |= self.translate_rest(e, shift);
        }
        (true, walked)
    }

    /// The pages after the first that reference `e` (whose first page is backed by pages of
    /// `shift`) touches, each translated once (`machine.straddle = "split"`) and counted in
    /// `straddles`: one more page for an access crossing a boundary, up to 17 for 64 KiB at
    /// 4 KiB pages, each at the last byte the access touches in it. Pages in an unmapped
    /// region are skipped, as a reference starting there would be. An access whose last byte would lie past 2^64 ends at the top of the
    /// address space and is counted in `wrapped` (no machine has memory past it; the record
    /// is most likely corrupt). Returns whether a translation walked.
    #[inline(never)]
    pub(super) fn translate_rest(&mut self, e: Event, shift: u32) -> bool {
        let last = match e.addr.checked_add(e.size as u64 - 1) {
            Some(l) => l,
            None => {
                self.ledger.wrapped += 1;
                u64::MAX
            }
        };
        let mut walked = false;
        // The last byte of the page translated last.
        let mut end = e.addr | ((1u64 << shift) - 1);
        while end < last {
            let at = end + 1;
            match self.pages.backing(at, e.asid) {
                Some(s) => {
                    end = at | ((1u64 << s) - 1);
                    // At the last byte the access touches in the page (as a straddle
                    // always was): the fragment a structure holding smaller pages caches.
                    let addr = end.min(last);
                    self.ledger.straddles += 1;
                    // With a memory system, the walker maps the page where the caches find
                    // it: they know no physical address past a reference's first page.
                    if e.paddr != crate::event::NO_PADDR {
                        self.walk_paddr = match self.memory {
                            Some(_) => crate::event::NO_PADDR,
                            None => e.paddr.wrapping_add(addr - e.addr),
                        };
                    }
                    walked |= self.translate(addr, e.kind, e.mode, s);
                }
                // An unmapped region: on past its end.
                None => end = self.pages.span(at, e.asid).1,
            }
        }
        walked
    }

    /// The fast path's first-level structure `r` missed (and was filled) on `e`: count the
    /// miss and go on to the next levels.
    #[inline(never)]
    pub(super) fn root_missed(&mut self, addr: u64, kind: Kind, mode: Mode, r: usize) -> bool {
        self.ledger.access(r, mode, kind, true);
        if self.cpus.is_some() {
            let ctx = self.units[r].running_ctx(self.is_global(addr));
            self.shot_miss(r, addr >> self.default_shift[r], ctx);
        }
        self.last_missed = r;
        match self.pages.default {
            Some(backing) => {
                let next = self.next[r].at(kind, backing);
                self.translate_from(next, addr, kind, mode, backing)
            }
            None => false,
        }
    }

    /// One translation of the page of `addr` (backed by pages of `shift`) through the
    /// hierarchy; returns whether it walked.
    #[inline(always)]
    pub(super) fn translate(&mut self, addr: u64, kind: Kind, mode: Mode, shift: u32) -> bool {
        let root = self.roots.at(kind, shift);
        let walked = self.translate_from(root, addr, kind, mode, shift);
        // (A structure that climbs counts every access: no repeat is skipped.)
        if let (Some(r), false) = (root, self.uniform) {
            if !climb::climbs(&self.climbs, r) {
                self.remember(r, addr, kind, shift);
            }
        }
        walked
    }

    /// First-level structure `r` was just accessed for the page of `addr` (backed by pages
    /// of `shift`) by a reference of `kind`: remember the addresses its entry maps, in which
    /// the backing page size is the same (see [`Memo`]).
    #[inline(never)]
    pub(super) fn remember(&mut self, r: usize, addr: u64, kind: Kind, shift: u32) {
        // An access whose last page ends in an unmapped region is translated at its last
        // byte, in that region (see [`Machine::translate_rest`]): the span there is the
        // region's, whose addresses no entry maps.
        if self.pages.backing(addr, self.cur_asid).is_none() {
            return;
        }
        let s = self.units[r].shift_for(shift);
        let (lo, hi) = self.pages.span(addr, self.cur_asid);
        let start = (addr >> s) << s;
        let end = start.saturating_add((1u64 << s) - 1);
        let first = start.max(lo);
        self.memo[kind as usize & 3] = Memo {
            lo: first,
            len: end.min(hi).wrapping_sub(first).wrapping_add(1),
            root: r,
            key: entry_key(addr, s),
        };
    }

    /// The first-level structure whose entry a reference of `kind` to `size` bytes at `addr`
    /// repeats, when that is a hit that changes nothing (page maps with regions: see [`Memo`]).
    #[inline(always)]
    pub(super) fn memo_hit(&self, addr: u64, size: u16, kind: Kind) -> Option<usize> {
        let m = &self.memo[kind as usize & 3];
        let last = addr.wrapping_add(size.saturating_sub(1) as u64);
        (addr.wrapping_sub(m.lo) < m.len
            && last.wrapping_sub(m.lo) < m.len
            && self.last_page[m.root][kind as usize & 3] == m.key)
            .then_some(m.root)
    }

    /// [`Machine::translate`] from structure `level` down.
    #[inline(always)]
    pub(super) fn translate_from(
        &mut self,
        mut level: Option<usize>,
        addr: u64,
        kind: Kind,
        mode: Mode,
        shift: u32,
    ) -> bool {
        let global = self.is_global(addr);
        while let Some(i) = level {
            let u = &mut self.units[i];
            let s = if Some(shift) == self.pages.default {
                self.default_shift[i]
            } else {
                u.shift_for(shift)
            };
            let ctx = u.ctx(self.cur_asid, s, global);
            let hit = u.access(addr >> s, ctx, kind, mode);
            if u.shadow.is_some() {
                self.classify(i, addr >> s, ctx, hit, mode, kind);
            }
            // The fast path's key of the entry: its page while the page map is uniform (then
            // s is the default shift); else its page and size.
            let key = if self.uniform {
                addr >> s
            } else {
                entry_key(addr, s)
            };
            self.touched(i, kind, key, !hit);
            self.ledger.access(i, mode, kind, !hit);
            self.count_climb(i, !hit);
            if hit {
                return false;
            }
            if self.cpus.is_some() {
                self.shot_miss(i, addr >> s, ctx);
            }
            self.last_missed = i;
            level = self.next[i].at(kind, shift);
        }
        let w = self.ledger.walk_index();
        self.ledger.access(w, mode, kind, true);
        if self.prefetch.is_some() {
            self.remember_walk(addr, shift, global, mode);
        }
        if self.walker.is_some() {
            self.walk(addr, shift);
        }
        true
    }

    /// The walker refills the page of `addr` (of `2^shift` bytes), its table references
    /// going through the memory system, the `[[cache]]` hierarchy or its own cache.
    #[inline(never)]
    fn walk(&mut self, addr: u64, shift: u32) {
        let Some(w) = self.walker.as_deref_mut() else {
            return;
        };
        let (asid, paddr) = (self.cur_asid, self.walk_paddr);
        match (self.caches.as_deref_mut(), self.vac.as_deref_mut()) {
            // The [[cache]] hierarchy is physically addressed at the walker's frames.
            (Some(h), _) => w.miss_through(asid, addr, paddr, shift, h, &mut self.ledger),
            // The VAC's OS owns the physical memory.
            (None, Some(v)) => w.miss_placed(asid, addr, paddr, shift, v),
            (None, None) => w.miss(asid, addr, paddr, shift, self.memory.as_deref_mut()),
        }
    }

    /// The running address space becomes `asid`: untagged structures lose non-global entries.
    pub(super) fn switch_to(&mut self, asid: u32) {
        if asid == self.cur_asid {
            return;
        }
        let from = self.cur_asid;
        self.cur_asid = asid;
        self.ledger.set_asid(asid);
        self.cpu_ran(asid);
        self.forget_pages();
        for (u, &s) in self.units.iter_mut().zip(&self.default_shift) {
            u.ctx_now = u.ctx(asid, s, false);
            if !u.tagged {
                u.tlb.flush_if(|_, ctx| ctx & GLOBAL == 0);
                if let Some(sh) = u.shadow.as_deref_mut() {
                    sh.flush_if(|_, ctx| ctx & GLOBAL == 0);
                }
            }
        }
        if self.prefetch.is_some() {
            self.prefetch_into(from);
        }
    }

    /// Structure `i` classifies its misses: its access to `(vpn, ctx)` for a reference of
    /// `kind` in `mode` goes to its shadow too, and a miss (`!hit`) is counted by class.
    #[inline(never)]
    pub(super) fn classify(
        &mut self,
        i: usize,
        vpn: u64,
        ctx: u64,
        hit: bool,
        mode: Mode,
        kind: Kind,
    ) {
        let tell = self.units[i].reads_reference;
        if let Some(s) = self.units[i].shadow.as_deref_mut() {
            if tell {
                s.set_reference(kind, mode);
            }
            if let Some(c) = s.tlb_access(vpn, ctx, !hit) {
                self.ledger.classify(i, mode, kind, c);
            }
        }
    }

    /// Structure `i` was just accessed on `page` by a reference of `kind`, and filled it if
    /// it `missed`: keep the fast path's last pages (see [`Feed`]).
    #[inline(always)]
    pub(super) fn touched(&mut self, i: usize, kind: Kind, page: u64, missed: bool) {
        touched(
            &mut self.last_page[i],
            self.free_hits[i],
            kind as usize,
            page,
            missed,
        );
    }

    /// Forget the last pages of the fast path (entries or the running context changed).
    pub(super) fn forget_pages(&mut self) {
        self.last_page.fill([NO_PAGE; 4]);
    }

    pub(super) fn control(&mut self, e: Event) {
        // A map event rewrites the page's entry: if the table had the page, it is remapped,
        // and its translations go as on an unmap (its next touch walks, faults, and takes the
        // frame the OS now gives it).
        let remapped = e.kind == Kind::Map
            && self
                .walker
                .as_deref_mut()
                .is_some_and(|w| w.unmap(e.asid, e.addr));
        if remapped || matches!(e.kind, Kind::TlbFlush | Kind::Unmap | Kind::Protect) {
            self.forget_pages();
        }
        if e.kind == Kind::Marker {
            if let Some(m) = self.memory.as_deref_mut() {
                m.marker(e.addr);
            }
        }
        match e.kind {
            Kind::ContextSwitch => self.switch_to(e.asid),
            Kind::Marker => match e.cpu_marked() {
                Some(cpu) if self.cpus.is_some() => self.switch_cpu(cpu),
                Some(cpu) => self.other_cpu = self.other_cpu.max(cpu),
                None => {}
            },
            // Several CPUs: each CPU the invalidation reaches.
            Kind::TlbFlush | Kind::Unmap | Kind::Protect if self.cpus.is_some() => self.shoot(&e),
            Kind::TlbFlush if e.addr == FLUSH_ALL => {
                for u in &mut self.units {
                    u.tlb.flush_all();
                    if let Some(sh) = u.shadow.as_deref_mut() {
                        sh.flush_all();
                    }
                }
            }
            Kind::TlbFlush if e.addr == FLUSH_SPACE => {
                for u in &mut self.units {
                    u.invalidate_space(e.asid, self.cur_asid, |_, _| {});
                }
            }
            Kind::TlbFlush | Kind::Unmap | Kind::Protect | Kind::Map
                if e.kind != Kind::Map || remapped =>
            {
                let global = self.is_global(e.addr);
                if e.kind == Kind::Unmap {
                    if let Some(w) = self.walker.as_deref_mut() {
                        w.unmap(e.asid, e.addr);
                    }
                }
                if matches!(e.kind, Kind::Unmap | Kind::Map) {
                    if let Some(p) = self.prefetch.as_deref_mut() {
                        p.forget(e.asid, e.addr, global, self.cur_asid);
                    }
                }
                for u in &mut self.units {
                    u.invalidate_page(e.addr, e.asid, global, |_, _, _| {});
                }
            }
            _ => {}
        }
    }
}

/// The last pages `last` of a structure (per kind) after an access of `kind` to `page` that
/// filled it if it `missed` ([`Machine::touched`]); `free_hits`: its hits change no
/// replacement state.
#[inline(always)]
pub(super) fn touched(last: &mut [u64; 4], free_hits: bool, kind: usize, page: u64, missed: bool) {
    if !free_hits {
        // Only a repeat of this very access changes nothing.
        *last = [page; 4];
        return;
    }
    if missed {
        // The fill may have evicted the other kinds' pages.
        *last = [NO_PAGE; 4];
    }
    last[kind & 3] = page;
}
