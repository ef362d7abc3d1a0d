//! Which page size backs each address: the `[pages]` section as the operating system applies
//! it. The TLBs route a reference by it, the walker maps a faulting page at it, and a memory
//! system gives a large page an aligned run of frames by it, so all three agree on a page's
//! size.

/// Which page size backs each address.
#[derive(Clone, Debug)]
pub(crate) struct PageSizes {
    pub(crate) default: Option<u32>,
    /// (start, end, asid filter, shift or None = unmapped), first match wins.
    pub(crate) regions: Vec<(u64, u64, Option<u32>, Option<u32>)>,
    /// Every region is unmapped (a hole in the default page size, like MIPS kseg0): the fast
    /// path still applies outside the holes.
    pub(crate) has_holes: bool,
}

impl PageSizes {
    #[inline(always)]
    pub(crate) fn backing(&self, addr: u64, asid: u32) -> Option<u32> {
        if self.regions.is_empty() {
            return self.default;
        }
        for &(start, end, a, shift) in &self.regions {
            if addr >= start && addr < end && a.is_none_or(|a| a == asid) {
                return shift;
            }
        }
        self.default
    }

    /// The addresses around `addr` backed as it is (for `asid`): `[lo, hi]`, inclusive.
    pub(crate) fn span(&self, addr: u64, asid: u32) -> (u64, u64) {
        let (mut lo, mut hi) = (0, u64::MAX);
        for &(start, end, a, _) in &self.regions {
            if a.is_some_and(|a| a != asid) {
                continue;
            }
            if addr >= start && addr < end {
                return (lo.max(start), hi.min(end - 1));
            }
            if end <= addr {
                lo = lo.max(end);
            } else {
                hi = hi.min(start - 1);
            }
        }
        (lo, hi)
    }

    /// Whether some address of `[start, end)` is translated (backed by pages) in an address
    /// space no region singles out.
    pub(crate) fn translates_any(&self, start: u64, end: u64) -> bool {
        let mut a = start;
        while a < end {
            if self.backing(a, u32::MAX).is_some() {
                return true;
            }
            match self.span(a, u32::MAX).1.checked_add(1) {
                Some(next) => a = next,
                None => return false,
            }
        }
        false
    }

    /// Whether pages of more than one size are mapped.
    pub(crate) fn mixed(&self) -> bool {
        let mut shifts = self.shifts();
        let first = shifts.next();
        shifts.any(|s| Some(s) != first)
    }

    /// Every shift some address can be backed by.
    pub(crate) fn shifts(&self) -> impl Iterator<Item = u32> + '_ {
        self.default
            .into_iter()
            .chain(self.regions.iter().filter_map(|r| r.3))
    }
}
