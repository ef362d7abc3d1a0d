//! A write buffer between a write-through cache and memory, timed in CPU cycles.
//!
//! Chen's DECstation 5000/200 (Table 3-1): six entries; a write takes five cycles of memory,
//! one when it falls in the same DRAM page as the write before it (page mode), eleven when it
//! is partial (narrower than a word: read-modify-write). CPU reads have priority for memory
//! but wait for a write already issued. The CPU stalls on a write to a full buffer.
//!
//! The model is event-driven: the caller hands over each write and each memory read with the
//! CPU cycle it happens at (times never decrease), and queued writes are issued lazily, in
//! order, whenever memory was free before that time. Rules, exactly:
//! * the head write is issued at `max(memory free, its arrival)`; memory is then busy for its
//!   cycles; it occupies its entry until it completes;
//! * a read at `t` is served before any write that would be issued at `t` or later; it waits
//!   for memory to be free (the stall this returns, write-buffer stall in Chen's MCPI) and
//!   then holds memory for the read's own cycles;
//! * a write at `t` finds the writes issued at or before `t` gone from the queue; if the
//!   entries are all taken (queued or in progress) the CPU waits until one frees; a write
//!   finding memory free is issued at once (a read in the same cycle comes after it).

/// The shape and timing of a write buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WriteBufferParams {
    pub entries: usize,
    /// Cycles of memory for a full write.
    pub write_cycles: u32,
    /// Cycles for a write to the DRAM page of the previous write.
    pub page_mode_cycles: u32,
    /// log2 of the DRAM page size, for page mode.
    pub dram_page_shift: u32,
    /// Cycles for a partial write.
    pub partial_cycles: u32,
}

impl WriteBufferParams {
    /// Chen's Table 3-1.
    pub fn decstation5000() -> WriteBufferParams {
        WriteBufferParams {
            entries: 6,
            write_cycles: 5,
            page_mode_cycles: 1,
            dram_page_shift: 12,
            partial_cycles: 11,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    page: u64,
    partial: bool,
    arrival: u64,
}

/// The write buffer (see the module documentation).
#[derive(Clone, Debug)]
pub struct WriteBuffer {
    p: WriteBufferParams,
    /// Ring of queued (not yet issued) writes.
    ring: Vec<Pending>,
    head: usize,
    len: usize,
    /// Cycle at which memory is next free.
    mem_free: u64,
    /// Cycle at which the write in progress (if any) completes.
    write_done: u64,
    /// DRAM page of the last write issued.
    last_page: u64,
    /// Writes issued in page mode.
    pub page_mode_writes: u64,
    pub writes: u64,
}

impl WriteBuffer {
    pub fn new(p: &WriteBufferParams) -> Result<WriteBuffer, String> {
        if p.entries == 0 {
            return Err("entries: must be at least 1".into());
        }
        Ok(WriteBuffer {
            ring: vec![Pending::default(); p.entries],
            p: p.clone(),
            head: 0,
            len: 0,
            mem_free: 0,
            write_done: 0,
            last_page: u64::MAX,
            page_mode_writes: 0,
            writes: 0,
        })
    }

    /// Ring position `i` (below twice the ring's length: a head plus at most a ring's
    /// entries) brought into the ring: a compare, where `%` by a length known only at run
    /// time is a division on every write.
    #[inline(always)]
    fn wrap(&self, i: usize) -> usize {
        let n = self.ring.len();
        debug_assert!(i < 2 * n);
        if i >= n {
            i - n
        } else {
            i
        }
    }

    /// Issue the queued writes whose issue time is before `now` (or at it, `inclusive`).
    #[inline]
    fn advance(&mut self, now: u64, inclusive: bool) {
        while self.len > 0 {
            let w = self.ring[self.head];
            let start = self.mem_free.max(w.arrival);
            if start > now || (start == now && !inclusive) {
                break;
            }
            let cycles = if w.partial {
                self.p.partial_cycles
            } else if w.page == self.last_page {
                self.page_mode_writes += 1;
                self.p.page_mode_cycles
            } else {
                self.p.write_cycles
            };
            self.last_page = w.page;
            self.mem_free = start + cycles as u64;
            self.write_done = self.mem_free;
            self.head = self.wrap(self.head + 1);
            self.len -= 1;
        }
    }

    /// A write of `paddr` at cycle `now`; returns the cycles the CPU stalls (buffer full).
    #[inline]
    pub fn write(&mut self, now: u64, paddr: u64, partial: bool) -> u64 {
        self.writes += 1;
        let mut t = now;
        loop {
            self.advance(t, true);
            let taken = self.len + (self.write_done > t) as usize;
            if taken < self.p.entries {
                break;
            }
            // Full: wait for the write in progress, or for memory to finish a read so that
            // the head can be issued.
            t = if self.write_done > t {
                self.write_done
            } else {
                self.mem_free
            };
        }
        let tail = self.wrap(self.head + self.len);
        self.ring[tail] = Pending {
            page: paddr >> self.p.dram_page_shift,
            partial,
            arrival: t,
        };
        self.len += 1;
        // Memory free now takes the write at once: a read in the same cycle comes after it.
        self.advance(t, true);
        t - now
    }

    /// A read that goes to memory at cycle `now` and holds it for `cycles`; returns the cycles
    /// it first waits for a write already issued.
    #[inline]
    pub fn read(&mut self, now: u64, cycles: u32) -> u64 {
        self.advance(now, false);
        let stall = self.mem_free.saturating_sub(now);
        self.mem_free = now + stall + cycles as u64;
        stall
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// Cycle by cycle: at each cycle, a read arriving then takes free memory first; then the
    /// head write is issued if memory is free; then a write arriving then is queued if an
    /// entry is free (an in-progress write holds its entry until it completes).
    struct Stepper {
        p: WriteBufferParams,
        q: VecDeque<(u64, bool)>,
        busy_until: u64,
        write_until: u64,
        last_page: u64,
    }

    impl Stepper {
        fn issue(&mut self, c: u64) {
            if self.busy_until <= c {
                if let Some((page, partial)) = self.q.pop_front() {
                    let d = if partial {
                        self.p.partial_cycles
                    } else if page == self.last_page {
                        self.p.page_mode_cycles
                    } else {
                        self.p.write_cycles
                    };
                    self.last_page = page;
                    self.busy_until = c + d as u64;
                    self.write_until = self.busy_until;
                }
            }
        }

        /// Run cycles `from..to`, issuing writes.
        fn run(&mut self, from: u64, to: u64) {
            for c in from..to {
                self.issue(c);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// The event-driven buffer stalls exactly as a cycle-by-cycle model does.
        #[test]
        fn matches_cycle_by_cycle_model(
            entries in 1usize..7,
            ops in prop::collection::vec((0u64..8, 0u8..3, 0u64..4, any::<bool>()), 1..200),
        ) {
            let p = WriteBufferParams { entries, ..WriteBufferParams::decstation5000() };
            let mut wb = WriteBuffer::new(&p).unwrap();
            let mut r = Stepper { p: p.clone(), q: VecDeque::new(), busy_until: 0,
                                  write_until: 0, last_page: u64::MAX };
            let (mut now, mut stepped) = (0u64, 0u64);
            for &(gap, op, page, partial) in &ops {
                now += gap;
                r.run(stepped, now);
                let addr = page << 12;
                let (got, want);
                if op == 0 {
                    got = wb.read(now, 15);
                    // The read takes memory as soon as it is free, before any write.
                    let start = r.busy_until.max(now);
                    want = start - now;
                    r.busy_until = start + 15;
                    now = start + 15;
                    stepped = now;
                } else {
                    got = wb.write(now, addr, partial && op == 2);
                    let mut t = now;
                    loop {
                        r.issue(t);
                        let taken = r.q.len() + (r.write_until > t) as usize;
                        if taken < entries { break; }
                        t += 1;
                    }
                    r.q.push_back((page, partial && op == 2));
                    want = t - now;
                    now = t;
                    stepped = t + 1;
                    r.run(t, t + 1);
                }
                prop_assert_eq!(got, want);
            }
        }
    }

    #[test]
    fn page_mode_writes_stream_and_a_full_buffer_stalls() {
        let mut wb = WriteBuffer::new(&WriteBufferParams::decstation5000()).unwrap();
        // Seven writes to one DRAM page, one per cycle: the first takes 5 cycles, the rest 1.
        let stalls: Vec<u64> = (0..7).map(|i| wb.write(i, 0x1000 + 4 * i, false)).collect();
        assert_eq!(stalls, [0; 7]);
        // Issued so far: the first at 0 (done at 5), then page mode at 5 and at 6.
        assert_eq!(wb.page_mode_writes, 2);
        // Seven writes to distinct pages in one cycle: the seventh finds the six entries taken
        // (one in progress until cycle 5, five queued).
        let mut wb = WriteBuffer::new(&WriteBufferParams::decstation5000()).unwrap();
        let stalls: Vec<u64> = (0..7).map(|i| wb.write(0, i << 12, false)).collect();
        assert_eq!(stalls, [0, 0, 0, 0, 0, 0, 5]);
        // A read waits for the write in progress only.
        let mut wb = WriteBuffer::new(&WriteBufferParams::decstation5000()).unwrap();
        wb.write(0, 0, false);
        assert_eq!(wb.read(2, 15), 3, "the write issued at 0 ends at 5");
    }
}
