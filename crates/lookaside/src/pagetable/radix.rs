//! The forward-mapped page table (FMPT): a tree of table pages per address space, each level
//! indexed by a slice of the page number, root first (the control register points at the
//! root). A walk reads one entry per level until it reaches a leaf; a leaf above the last
//! level maps a large page (x86-64: a PDE maps 2 MiB, a PDPTE 1 GiB).
//!
//! Huck & Hays simulate a 2-level table with 4-byte entries (a 1,024-entry root of 4 KiB
//! leaves: 32-bit per-process spaces, their "ASM"), chosen as a lower bound; a 64-bit space
//! needs about 5 levels. x86-64 uses 9 bits per level and 8-byte entries, 4 or 5 levels.
//!
//! Paging-structure caches (the x86 PML4E/PDPTE/PDE caches) remember, per level, which upper
//! entries a recent walk used: a hit at the deepest cached level lets the walk start below
//! it, skipping the references above. They are [`Tlb`]s keyed by the page-number prefix that
//! selects the entry, tagged by space. Table pages are never freed (as in most kernels while
//! a process lives), so a cached upper entry never goes stale.

use crate::tlb::{Part, Policy, Tlb, TlbParams, NO_CTX};

use super::{InsertError, KeyMap, Refs, TableRef, Usage, Walk, PAGE_SHIFT, TABLE_BASE};

/// The shape of a forward-mapped table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RadixParams {
    /// Page-number bits translated by each level, root first (x86-64 4-level: `[9, 9, 9, 9]`;
    /// Huck & Hays' 2-level 32-bit table: `[10, 10]`).
    pub bits: Vec<u32>,
    /// Bytes per entry (4 for the 32-bit table, 8 for x86-64).
    pub entry_bytes: u32,
    /// Paging-structure cache per non-leaf level, root first: `(entries, ways)`, `None` =
    /// none at that level. Empty: no caches.
    pub psc: Vec<Option<(usize, usize)>>,
    /// Physical address of the first table page.
    pub base: u64,
    /// x86-64's canonical addresses: a page number whose bits above the levels' repeat the
    /// top one (the kernel half, `0xffff8…`) is walked by its low bits, as the MMU does
    /// (PML4 entries 256-511); otherwise it is out of range.
    pub canonical: bool,
}

impl RadixParams {
    /// x86-64: `levels` (4 or 5) levels of 9 bits, 8-byte entries.
    pub fn x86_64(levels: usize) -> RadixParams {
        RadixParams {
            bits: vec![9; levels],
            entry_bytes: 8,
            psc: Vec::new(),
            base: TABLE_BASE,
            canonical: true,
        }
    }

    /// Huck & Hays' 2-level table of a 32-bit space: 1,024-entry root, 1,024-entry leaves.
    pub fn two_level_32() -> RadixParams {
        RadixParams {
            bits: vec![10, 10],
            entry_bytes: 4,
            psc: Vec::new(),
            base: TABLE_BASE,
            canonical: false,
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.bits.is_empty() || self.bits.len() > 8 {
            return Err("between 1 and 8 levels".into());
        }
        if self.bits.iter().any(|&b| b == 0 || b > 20) {
            return Err("each level translates 1 to 20 bits".into());
        }
        if self.bits.iter().sum::<u32>() > 52 {
            return Err("the levels translate more than 52 page-number bits".into());
        }
        if !matches!(self.entry_bytes, 4 | 8 | 16) {
            return Err("entry bytes must be 4, 8 or 16".into());
        }
        // The leaf level holds translations, which the TLBs cache: no paging-structure cache.
        if self
            .psc
            .iter()
            .skip(self.bits.len() - 1)
            .any(|p| p.is_some())
        {
            return Err("paging-structure caches exist for the upper levels only".into());
        }
        for &(entries, ways) in self.psc.iter().flatten() {
            TlbParams::new(entries, ways, Policy::Lru)
                .check()
                .map_err(|e| format!("paging-structure cache: {e}"))?;
        }
        Ok(())
    }
}

/// Entry value: 0 empty, `LEAF | frame` a leaf, else `child node + 1` (frames and table
/// pages stay below 2^31: memory is at most 2^28 frames). 32-bit entries halve the host
/// memory a sparse table's pages take, which is what a walk's time goes to.
const LEAF: u32 = 1 << 31;

/// Levels a table may have ([`RadixParams::check`]): per-level arrays of this length are
/// indexed by a level masked to it, with no bounds check.
const MAX_LEVELS: usize = 8;

/// Where one level's index lies in a page number: `(vpn >> below) & mask`.
#[derive(Clone, Copy, Debug, Default)]
struct Slice {
    /// The number of low page-number bits below the level.
    below: u32,
    /// `2^bits - 1` for the level's `bits`.
    mask: u64,
}

/// Nodes remembered per level ([`Radix::reached_slot`]): enough for the leaf tables of a
/// working set a few dozen large regions wide (a 32-entry PDE cache's reach).
const REACHED_PER_LEVEL: usize = 64;

/// The node a walk reached at one level, remembered for the next walk under the same upper
/// entries: the walk's root node and the page-number prefix the levels above translate.
/// Table pages are never freed and an entry pointing at one never changes, so a remembered
/// node stays right for as long as the table lives.
#[derive(Clone, Copy, Debug)]
struct Reached {
    root: u32,
    prefix: u64,
    node: u32,
}

impl Reached {
    const NONE: Reached = Reached {
        root: u32::MAX,
        prefix: 0,
        node: 0,
    };
}

/// A forward-mapped page table of every address space.
#[derive(Debug)]
pub struct Radix {
    p: RadixParams,
    /// Per level (masked to [`MAX_LEVELS`]), its slice of the page number: the walk's index
    /// with no bounds check and nothing recomputed per walk.
    slices: [Slice; MAX_LEVELS],
    /// [`Radix::in_range`]'s constants: the top level's highest bit, the value of an upper
    /// half's bits from it up, and the mask of the bits the levels translate.
    top_shift: u32,
    top_ones: u64,
    vpn_mask: u64,
    /// Per level below the root, the nodes recent walks reached there ([`Reached`],
    /// [`Radix::reached_slot`]): a walk that a paging-structure cache lets start below the
    /// root finds its node here instead of reading the entries above, as the hardware holds
    /// the cached entry's pointer.
    reached: Box<[Reached]>,
    node_bytes: Vec<u64>,
    /// Physical address and entries of each table page, in allocation order.
    nodes: Vec<(u64, Box<[u32]>)>,
    next_addr: u64,
    roots: KeyMap<u32, u32>,
    /// The last (space, root node) looked up.
    last_root: Option<(u32, u32)>,
    psc: Vec<Option<Tlb>>,
    pages: u64,
    mapped_bytes: u64,
}

impl Radix {
    pub fn new(p: RadixParams) -> Result<Radix, String> {
        p.check()?;
        let n = p.bits.len();
        let mut below = vec![0; n];
        for l in (0..n.saturating_sub(1)).rev() {
            below[l] = below[l + 1] + p.bits[l + 1];
        }
        let node_bytes = p
            .bits
            .iter()
            .map(|&b| ((p.entry_bytes as u64) << b).max(1 << PAGE_SHIFT))
            .collect();
        let mut psc = Vec::new();
        for (l, c) in p.psc.iter().enumerate() {
            psc.push(match c {
                Some((entries, ways)) => {
                    let mut tp = TlbParams::new(*entries, *ways, Policy::Lru);
                    tp.seed = l as u64;
                    Some(Tlb::new(&tp)?)
                }
                None => None,
            });
        }
        let total_bits: u32 = p.bits.iter().sum();
        let mut slices = [Slice::default(); MAX_LEVELS];
        for (l, s) in slices.iter_mut().enumerate().take(n) {
            *s = Slice {
                below: below[l],
                mask: (1u64 << p.bits[l]) - 1,
            };
        }
        Ok(Radix {
            slices,
            top_shift: total_bits - 1,
            top_ones: (1u64 << (64 - PAGE_SHIFT - total_bits + 1)) - 1,
            vpn_mask: (1u64 << total_bits) - 1,
            reached: vec![Reached::NONE; MAX_LEVELS * REACHED_PER_LEVEL].into_boxed_slice(),
            next_addr: p.base,
            p,
            node_bytes,
            nodes: Vec::new(),
            roots: KeyMap::default(),
            last_root: None,
            psc,
            pages: 0,
            mapped_bytes: 0,
        })
    }

    pub fn levels(&self) -> usize {
        self.p.bits.len()
    }

    pub fn level_names(&self) -> Vec<String> {
        let n = self.levels();
        if n == 2 {
            return vec!["root".into(), "leaf".into()];
        }
        (0..n).map(|l| format!("L{}", n - l)).collect()
    }

    fn new_node(&mut self, level: usize) -> u32 {
        let entries = 1usize << self.p.bits[level];
        let addr = self.next_addr;
        self.next_addr += self.node_bytes[level];
        self.nodes
            .push((addr, vec![0u32; entries].into_boxed_slice()));
        (self.nodes.len() - 1) as u32
    }

    #[inline]
    fn root(&mut self, space: u32) -> Option<u32> {
        if let Some((s, r)) = self.last_root {
            if s == space {
                return Some(r);
            }
        }
        let r = *self.roots.get(&space)?;
        self.last_root = Some((space, r));
        Some(r)
    }

    /// The root node of `space`, an empty root page allocated if it has none yet (leaving the
    /// last-root memo to the walk's own space).
    fn root_or_new(&mut self, space: u32) -> u32 {
        if let Some(r) = self.root(space) {
            return r;
        }
        let r = self.new_node(0);
        self.roots.insert(space, r);
        r
    }

    /// The page number the levels translate for `vpn`, or `None` when it is out of range:
    /// below 2^total_bits; canonical, the lower half's (below 2^(total_bits - 1)) or the upper
    /// half's, sign-extended (`0xffff8…`), by its low bits, as the MMU walks them (x86-64's
    /// PML4 entries 256-511), and nothing between (a non-canonical address faults).
    #[inline(always)]
    fn in_range(&self, vpn: u64) -> Option<u64> {
        if !self.p.canonical {
            return (vpn & !self.vpn_mask == 0).then_some(vpn);
        }
        // A 64-bit address's page number has 64 - PAGE_SHIFT bits: the bits from the top
        // level's highest one up are all zeros or all ones.
        let top = vpn >> self.top_shift;
        (top == 0 || top == self.top_ones).then_some(vpn & self.vpn_mask)
    }

    #[inline(always)]
    fn index(&self, level: usize, vpn: u64) -> usize {
        let s = self.slices[level & (MAX_LEVELS - 1)];
        ((vpn >> s.below) & s.mask) as usize
    }

    /// The number of low page-number bits below `level`.
    #[inline(always)]
    fn below(&self, level: usize) -> u32 {
        self.slices[level & (MAX_LEVELS - 1)].below
    }

    /// The prefix of `vpn` that the levels above `level` translate (`level >= 1`).
    #[inline(always)]
    fn prefix(&self, level: usize, vpn: u64) -> u64 {
        vpn >> self.below(level - 1)
    }

    /// The node at `level` (`>= 1`) of the walk from `root` for `vpn`, whose entries above
    /// are tables (a paging-structure cache holds the one at `level - 1`): the remembered
    /// one ([`Reached`]), else found from the deepest level above that has one remembered by
    /// reading the entries between (no references: the cache holds the entry), each node on
    /// the way remembered.
    #[inline(always)]
    fn node_at(&mut self, root: u32, level: usize, vpn: u64) -> u32 {
        if let Some(node) = self.reached_at(root, level, vpn) {
            return node;
        }
        self.node_at_slow(root, level, vpn)
    }

    /// The node remembered at `level` (`>= 1`) for the walk from `root` for `vpn`, if any.
    #[inline(always)]
    fn reached_at(&self, root: u32, level: usize, vpn: u64) -> Option<u32> {
        let prefix = self.prefix(level, vpn);
        let r = self.reached[Radix::reached_slot(level, prefix)];
        (r.root == root && r.prefix == prefix).then_some(r.node)
    }

    #[inline(never)]
    fn node_at_slow(&mut self, root: u32, level: usize, vpn: u64) -> u32 {
        let (mut from, mut node) = (0, root);
        for l in (1..level).rev() {
            if let Some(n) = self.reached_at(root, l, vpn) {
                (from, node) = (l, n);
                break;
            }
        }
        for l in from..level {
            let e = self.nodes[node as usize].1[self.index(l, vpn)];
            debug_assert!(e != 0 && e & LEAF == 0);
            node = e - 1;
            self.reach(root, l + 1, vpn, node);
        }
        node
    }

    /// Where the OS's insert or remove of `vpn` under `root`, going down to `level`, starts:
    /// the table at `level` if a walk went through the tables above it ([`Reached`]), else
    /// the root.
    #[inline(always)]
    fn start_for(&self, root: u32, level: usize, vpn: u64) -> (usize, u32) {
        match level {
            0 => (0, root),
            _ => self
                .reached_at(root, level, vpn)
                .map_or((0, root), |n| (level, n)),
        }
    }

    /// Remember that the walk from `root` for `vpn` reached `node` at `level` (`>= 1`).
    #[inline(always)]
    fn reach(&mut self, root: u32, level: usize, vpn: u64, node: u32) {
        let prefix = self.prefix(level, vpn);
        self.reached[Radix::reached_slot(level, prefix)] = Reached { root, prefix, node };
    }

    /// Where the node reached at `level` under `prefix` is remembered: one of
    /// [`REACHED_PER_LEVEL`] slots of the level, by the prefix's low bits (neighbouring
    /// regions, as a walk's working set has them, take different slots).
    #[inline(always)]
    fn reached_slot(level: usize, prefix: u64) -> usize {
        (level & (MAX_LEVELS - 1)) * REACHED_PER_LEVEL + (prefix as usize & (REACHED_PER_LEVEL - 1))
    }

    /// Walk the levels of `space`'s table for `vpn`.
    pub fn lookup(&mut self, space: u32, vpn: u64, refs: &mut Refs) -> Walk {
        self.lookup_from(space, space, vpn, refs)
    }

    /// Walk the levels of `space`'s table for `vpn`, starting at the root page of space
    /// `from`; see [`super::PageTable::lookup_from`].
    pub fn lookup_from(&mut self, from: u32, space: u32, vpn: u64, refs: &mut Refs) -> Walk {
        let mut w = Walk::default();
        let Some(vpn) = self.in_range(vpn) else {
            return w;
        };
        let Some(root) = self.root(space) else {
            // No table yet: the walk reads the (empty) root pointer's target and faults.
            return w;
        };
        // The shared kernel half: the root entry is read from `from`'s own root page (every
        // address space has one, holding a copy of the kernel's entries, which point at the
        // same tables); the paging-structure caches are tagged by `from`, as by PCID.
        let from_root = if from == space {
            root
        } else {
            self.root_or_new(from)
        };
        let root_addr = self.nodes[from_root as usize].0;
        let tag = from as u64;
        let n = self.levels();
        // The deepest paging-structure cache that holds this walk's upper entry.
        let mut start = 0;
        let mut node = root;
        if !self.psc.is_empty() {
            for l in (0..self.psc.len().min(n - 1)).rev() {
                let key = vpn >> self.below(l);
                if let Some(c) = &mut self.psc[l] {
                    if c.lookup(key, tag, NO_CTX) {
                        start = l + 1;
                        break;
                    }
                }
            }
            // The node the cached entry points at (no references: the cache holds it).
            if start > 0 {
                node = self.node_at(root, start, vpn);
            }
            w.skipped = start as u32;
        }
        for l in start..n {
            let i = self.index(l, vpn);
            let (addr, ref entries) = self.nodes[node as usize];
            let e = entries[i];
            let addr = if l == 0 { root_addr } else { addr };
            refs.push(TableRef {
                addr: addr + i as u64 * self.p.entry_bytes as u64,
                level: l as u8,
                write: false,
            });
            w.chain += 1;
            if e == 0 {
                return w;
            }
            if e & LEAF != 0 {
                w.frame = Some((e & !LEAF) as u64);
                return w;
            }
            if l < self.psc.len() {
                let key = vpn >> self.below(l);
                if let Some(c) = &mut self.psc[l] {
                    c.fill(key, tag, Part::Upper);
                }
            }
            node = e - 1;
            self.reach(root, l + 1, vpn, node);
        }
        w
    }

    /// The page sizes (as shifts) some level's entries map, smallest first.
    pub fn page_shifts(&self) -> Vec<u32> {
        self.slices[..self.levels()]
            .iter()
            .rev()
            .map(|s| s.below + PAGE_SHIFT)
            .collect()
    }

    /// The level whose entries map pages of `2^shift` bytes.
    fn leaf_level(&self, shift: u32) -> Option<usize> {
        if shift == PAGE_SHIFT {
            // Base pages: the last level (nothing lies below it).
            return Some(self.levels() - 1);
        }
        let want = shift.checked_sub(PAGE_SHIFT)?;
        (0..self.levels()).find(|&l| self.below(l) == want)
    }

    pub fn insert(
        &mut self,
        space: u32,
        vpn: u64,
        shift: u32,
        frame: u64,
    ) -> Result<(), InsertError> {
        let Some(vpn) = self.in_range(vpn) else {
            return Err(InsertError::OutOfRange);
        };
        if frame >= LEAF as u64 {
            return Err(InsertError::Frame(frame));
        }
        let leaf = self.leaf_level(shift).ok_or(InsertError::PageSize(shift))?;
        let root = self.root_or_new(space);
        let (from, mut node) = self.start_for(root, leaf, vpn);
        for l in from..leaf {
            let i = self.index(l, vpn);
            let e = self.nodes[node as usize].1[i];
            if e & LEAF != 0 {
                // A large page already covers it: the caller maps only unmapped pages.
                return Ok(());
            }
            node = if e == 0 {
                let c = self.new_node(l + 1);
                self.nodes[node as usize].1[i] = c + 1;
                c
            } else {
                e - 1
            };
            self.reach(root, l + 1, vpn, node);
        }
        let i = self.index(leaf, vpn);
        let slot = &mut self.nodes[node as usize].1[i];
        if *slot == 0 {
            self.pages += 1;
            self.mapped_bytes += 1 << shift;
        }
        // A non-empty, non-leaf slot would be a table page under a large page: keep the table.
        if *slot == 0 || *slot & LEAF != 0 {
            *slot = LEAF | frame as u32;
        }
        Ok(())
    }

    pub fn remove(&mut self, space: u32, vpn: u64) -> Option<u64> {
        let vpn = self.in_range(vpn)?;
        let root = self.root(space)?;
        // A large page above the last level cannot map `vpn` if a walk went through the
        // tables there (the entries on the way point at tables).
        let (from, mut node) = self.start_for(root, self.levels() - 1, vpn);
        for l in from..self.levels() {
            let i = self.index(l, vpn);
            let e = self.nodes[node as usize].1[i];
            if e == 0 {
                return None;
            }
            if e & LEAF != 0 {
                let frame = (e & !LEAF) as u64;
                self.nodes[node as usize].1[i] = 0;
                self.pages -= 1;
                self.mapped_bytes -= 1 << (self.below(l) + PAGE_SHIFT);
                return Some(frame);
            }
            node = e - 1;
        }
        None
    }

    pub fn usage(&self) -> Usage {
        Usage {
            table_bytes: self.next_addr - self.p.base,
            pages: self.pages,
            mapped_bytes: self.mapped_bytes,
        }
    }

    /// The paging-structure caches, per level (a machine of several CPUs keeps a set per
    /// CPU and swaps the running CPU's in: [`crate::mmu::CpuParts`]).
    pub fn psc_mut(&mut self) -> &mut Vec<Option<Tlb>> {
        &mut self.psc
    }

    /// Table pages allocated.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }
}
