//! A deterministic program-like stream for benchmarks and scale tests: sequential
//! instruction fetch through a code footprint with taken branches, loads and stores that mix
//! sequential array walks with random accesses to a heap working set. Generated in batches
//! at constant memory, however long the stream.

use crate::error::Result;
use crate::event::{Event, Kind, BATCH};
use crate::tlb::SplitMix64;
use crate::trace::TraceSource;

/// A synthetic stream of `total` references.
#[derive(Clone, Debug)]
pub struct Synthetic {
    total: u64,
    made: u64,
    rng: SplitMix64,
    pc: u64,
    code_base: u64,
    code_bytes: u64,
    array: u64,
    array_base: u64,
    array_bytes: u64,
    heap_base: u64,
    heap_bytes: u64,
}

impl Synthetic {
    /// `total` references over a code footprint of `code_kib` KiB and a heap of `heap_kib` KiB
    /// (each rounded up to a power of two, so that addresses are drawn with masks, not
    /// divisions).
    pub fn new(total: u64, seed: u64, code_kib: u64, heap_kib: u64) -> Synthetic {
        Synthetic {
            total,
            made: 0,
            rng: SplitMix64::new(seed),
            pc: 0x40_0000,
            code_base: 0x40_0000,
            code_bytes: (code_kib.max(1) << 10).next_power_of_two(),
            array: 0,
            array_base: 0x1000_0000,
            array_bytes: 64 << 20,
            heap_base: 0x7f00_0000_0000,
            heap_bytes: (heap_kib.max(1) << 10).next_power_of_two(),
        }
    }
}

impl TraceSource for Synthetic {
    fn next_batch(&mut self, out: &mut Vec<Event>) -> Result<bool> {
        out.clear();
        while out.len() < BATCH && self.made < self.total {
            let r = self.rng.next_u64();
            // An instruction, then with some probability a data reference.
            out.push(Event::reference(Kind::Fetch, self.pc, 4));
            self.pc += 4;
            if r & 0x1f == 0 {
                // A taken branch somewhere in the code footprint.
                self.pc = self.code_base + ((r >> 8) & (self.code_bytes - 1) & !3);
            }
            self.made += 1;
            if self.made < self.total && (r >> 5) & 3 != 0 {
                let kind = if (r >> 7) & 3 == 0 {
                    Kind::Store
                } else {
                    Kind::Load
                };
                let addr = if (r >> 9) & 1 == 0 {
                    self.array = (self.array + 8) & (self.array_bytes - 1);
                    self.array_base + self.array
                } else {
                    self.heap_base + ((r >> 16) & (self.heap_bytes - 1) & !7)
                };
                out.push(Event::reference(kind, addr, 8));
                self.made += 1;
            }
        }
        Ok(!out.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_exactly_total_and_is_deterministic() {
        let mut a = Synthetic::new(10_001, 3, 64, 1024);
        let mut b = Synthetic::new(10_001, 3, 64, 1024);
        let (mut va, mut vb) = (Vec::new(), Vec::new());
        let mut n = 0;
        while a.next_batch(&mut va).unwrap() {
            assert!(b.next_batch(&mut vb).unwrap());
            assert_eq!(va, vb);
            n += va.len();
        }
        assert_eq!(n, 10_001);
    }
}
