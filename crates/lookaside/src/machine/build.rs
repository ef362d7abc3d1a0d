//! Building a machine from its config ([`Machine::build`]): every check that names a key,
//! the wiring of the structures (routes to first levels and next levels), the page map, and
//! the memory estimate that refuses a machine before anything big is allocated.

use super::*;

pub(super) fn key(t: &TlbConfig, field: &str) -> String {
    format!("tlb.{}.{}", t.name, field)
}

impl Machine {
    /// Validate `config` and build the machine; `source_name` names the config in errors.
    /// The machine may take up to [`MemoryLimit::default_for_host`].
    pub fn build(config: MachineConfig, source_name: &str) -> Result<Machine> {
        Machine::build_within(config, source_name, MemoryLimit::default_for_host())
    }

    /// [`Machine::build`], refusing a machine whose [`memory_estimate`] is over `limit`.
    pub fn build_within(
        config: MachineConfig,
        source_name: &str,
        limit: MemoryLimit,
    ) -> Result<Machine> {
        let err = |k: String, m: String| Error::config(source_name, k, m);
        if config.tlbs.is_empty() && config.caches.is_empty() {
            return Err(err(
                "tlb".into(),
                "the machine has no TLB and no cache (add a [[tlb]] or [[cache]] table, --tlb or --cache)".into(),
            ));
        }
        if !config.caches.is_empty() && config.memory.is_some() {
            // Not "not yet": one stream through two cache hierarchies is two machines.
            return Err(err(
                "cache".into(),
                "[[cache]] together with [memory]: a machine has one cache hierarchy, and a memory system's are [memory.icache], [memory.dcache] and [memory.l2] (timed); to compare the two, simulate two machines (a sweep over both reads the trace once)".into(),
            ));
        }
        if config.vac.is_some() {
            // The data path is one of caches (and write buffer), a VAC, or none.
            let other = [
                ("cache", !config.caches.is_empty(), "[[cache]]"),
                ("memory", config.memory.is_some(), "[memory]"),
            ];
            if let Some((key, _, section)) = other.iter().find(|o| o.1) {
                return Err(err(
                    (*key).into(),
                    format!("{section} together with [vac]: the virtually addressed cache is the machine's data cache, with its OS and its own timing, so a second data path would take the same loads and stores again; to compare the two, simulate two machines (a sweep over both reads the trace once)"),
                ));
            }
        }
        if !config.caches.is_empty() {
            if let Some(p) = &config.pagetable {
                physical_caches(p, source_name)?;
            }
        }
        // The smallest page the machine maps (a hashed or inverted table's page) and the
        // largest (where a walker puts large pages' data).
        let mapped = mapped_pages(&config);
        let smallest = mapped.0;
        if let (Some(v), Some(p)) = (&config.vac, &config.pagetable) {
            let base = crate::mmu::table_page_shift(p, smallest);
            vac_holds_its_pages(&config, (v, p), source_name)?;
            // (Pages smaller than the table's are refused with the walker: it cannot hold them.)
            if v.page.0 < 1 << base && smallest >= base {
                return Err(err(
                    "vac.page".into(),
                    format!(
                        "{}-byte VAC pages, but the page table's pages are {} (one table page would span two of the VAC OS's frames); give the machine pages of the VAC's size (pages.size = \"{}\"), or the VAC larger pages",
                        v.page.0,
                        PageSize::Size(1 << base).label(),
                        PageSize::Size(v.page.0).label()
                    ),
                ));
            }
        }
        let (pages, kernel_classes) = page_map(&config, source_name, None)?;
        // Everything is checked before anything big is allocated: the structures' parameters
        // and page sizes first, then how they are wired and the sections' cross-checks, then
        // the machine's memory against the limit; only then are the structures built.
        let mut planned = Vec::with_capacity(config.tlbs.len());
        for (i, t) in config.tlbs.iter().enumerate() {
            if t.name.is_empty()
                || !t
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(err(
                    format!("tlb[{i}].name"),
                    format!("'{}' is not a name (letters, digits, _ and -)", t.name),
                ));
            }
            if config.tlbs[..i].iter().any(|o| o.name == t.name) {
                return Err(err(key(t, "name"), "two TLBs have this name".into()));
            }
            let policy = t.policy;
            let ways = match t.ways {
                Ways::Full => t.entries,
                Ways::N(n) => n,
            };
            let partition = t.partition.as_ref().map(|p| Partition {
                lower_ways: p.lower,
                lower_policy: p.lower_policy,
                upper_policy: p.upper_policy,
            });
            if t.placement != Placement::Upper && partition.is_none() {
                return Err(err(
                    key(t, "placement"),
                    "a placement other than 'upper' needs a partition".into(),
                ));
            }
            let params = TlbParams {
                entries: t.entries,
                ways,
                policy,
                partition,
                seed: config.machine.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            };
            params.check().map_err(|e| {
                // The config calls the lower partition's size `partition.lower`.
                let field = if e.field == "partition.lower_ways" {
                    "partition.lower"
                } else {
                    e.field
                };
                err(key(t, field), e.message)
            })?;
            let mut shifts = Vec::new();
            let held = if t.page.is_empty() {
                vec![config.pages.size]
            } else {
                t.page.clone()
            };
            for p in held {
                match p.shift() {
                    Some(s) => shifts.push(s),
                    None => {
                        return Err(err(
                            key(t, "page"),
                            "a TLB cannot hold 'unmapped' pages".into(),
                        ))
                    }
                }
            }
            shifts.sort_unstable_by(|a, b| b.cmp(a));
            shifts.dedup();
            planned.push((params, shifts));
        }
        // Wire `next` and find the roots.
        let held: Vec<Vec<u32>> = planned.iter().map(|p| p.1.clone()).collect();
        let (roots, next, translated) = wire(&config, &held, &pages, source_name)?;
        if let (Some(g), Some(d)) = (config.machine.global_above, pages.default) {
            if g & ((1u64 << d) - 1) != 0 {
                return Err(err(
                    "machine.global_above".into(),
                    format!(
                        "{g:#x} is not aligned to the page size ({})",
                        config.pages.size.label()
                    ),
                ));
            }
        }
        let handler = config.memory.as_ref().and_then(|m| m.handler.clone());
        if handler.is_some() && config.refill.is_some() {
            return Err(err(
                "memory.handler".into(),
                "with [refill] the software-refill model runs the miss handlers (their instructions and PTE loads reach the caches); leave out [memory.handler]".into(),
            ));
        }
        if handler.is_some() && config.pagetable.is_some() {
            return Err(err(
                "memory.handler".into(),
                "with [pagetable] the walker refills from its table, and its table references reach the memory system's caches already; [memory.handler] synthesises the MIPS handlers of a machine without one (their PTE loads from a linear table of their own): leave one out".into(),
            ));
        }
        if let Some(mc) = config
            .memory
            .as_ref()
            .filter(|m| m.mapping != crate::vm::Mapping::Identity)
        {
            memory_holds_its_pages(&config, &pages, mc, source_name)?;
        }
        if config.memory.is_some() && config.pagetable.as_ref().is_some_and(|p| p.data_refs) {
            return Err(err(
                "pagetable.data_refs".into(),
                "with [memory] the program's loads and stores already go through the memory system's data cache, as do the walker's table references; leave data_refs out".into(),
            ));
        }
        if config.memory.is_some()
            && config
                .pagetable
                .as_ref()
                .is_some_and(|p| p.cache != crate::config::WalkCacheConfig::default())
        {
            return Err(err(
                "pagetable.cache".into(),
                "with [memory] the walker's table references take the memory system's data cache; leave [pagetable.cache] out".into(),
            ));
        }
        if let Some(p) = &config.prefetch {
            let refuse = |key: &str, why: &str| Err(err(key.into(), why.into()));
            if config.refill.is_some() {
                return refuse("prefetch", "with [refill] the IPC-path prefetcher is [refill.prefetch] (its classes are the MIPS page-table levels)");
            }
            for (n, key) in [
                (p.user_entries, "user_entries"),
                (p.kernel_entries, "kernel_entries"),
            ] {
                if n > prefetch::MAX_ENTRIES {
                    return refuse(
                        &format!("prefetch.{key}"),
                        &format!("{n} is more than {}", prefetch::MAX_ENTRIES),
                    );
                }
            }
            if p.user_entries + p.kernel_entries == 0 {
                return refuse(
                    "prefetch",
                    "nothing is prefetched: set user_entries or kernel_entries (1 to 8)",
                );
            }
            if config.tlbs.is_empty() {
                return refuse("prefetch", "the machine has no TLB to prefetch into");
            }
        }
        if config.refill.is_some() && config.pagetable.is_some() {
            return Err(err(
                "pagetable".into(),
                "a machine refills either by the MIPS software model ([refill]) or from a page table ([pagetable]), not both".into(),
            ));
        }
        let need = memory_estimate(&config);
        if need > limit.bytes {
            return Err(err(
                "machine".into(),
                format!(
                    "the machine needs ~{}, over the {} limit ({}): make its structures smaller or raise the limit",
                    human_bytes(need),
                    human_bytes(limit.bytes),
                    limit.option
                ),
            ));
        }
        let mut climbs = Vec::with_capacity(planned.len());
        let mut units = Vec::with_capacity(planned.len());
        for ((params, shifts), t) in planned.into_iter().zip(&config.tlbs) {
            let reads_reference = params.reads_reference();
            let tlb = Engine::new(&params).map_err(|m| err(key(t, "geometry"), m))?;
            // Under [refill] the refill model keeps the refilled TLB's shadow.
            let shadow = if t.three_c && config.refill.is_none() {
                Some(Box::new(
                    shadow_of(&params).map_err(|m| err(key(t, "3c"), m))?,
                ))
            } else {
                None
            };
            // Under [refill] the refill model climbs the TLB it refills.
            let dynamic = t.partition.as_ref().and_then(|p| p.dynamic.as_ref());
            climbs.push(match (dynamic, params.partition, config.refill.is_some()) {
                (Some(d), Some(q), false) => {
                    let climber =
                        HillClimber::new(d.into(), params.ways, q.lower_ways).map_err(|m| {
                            let (f, m) = m.split_once(": ").unwrap_or(("", &m));
                            err(key(t, &format!("partition.dynamic.{f}")), m.to_string())
                        })?;
                    Some(Box::new(Climb {
                        climber,
                        accesses: 0,
                        misses: 0,
                    }))
                }
                _ => None,
            });
            units.push(Unit {
                tlb,
                shifts,
                tagged: t.asid,
                placement: t.placement,
                reads_reference,
                ctx_now: NO_CTX,
                ctx_global: NO_CTX,
                shadow,
                shot: None,
            });
        }
        if climbs.iter().all(Option::is_none) {
            climbs.clear();
        }
        let caches = Hierarchy::build(&config, config.tlbs.len(), source_name)?.map(Box::new);
        let mut names: Vec<String> = config.tlbs.iter().map(|t| t.name.clone()).collect();
        if let Some(h) = &caches {
            names.extend(h.names().map(str::to_string));
        }
        let mut ledger = Ledger::new(names);
        if units.iter().any(|u| u.shadow.is_some())
            || caches.as_ref().is_some_and(|h| h.classifies())
            || (config.refill.is_some() && config.tlbs.iter().any(|t| t.three_c))
        {
            ledger.classify_misses();
        }
        let default_shift: Vec<u32> = match pages.default {
            Some(d) => units.iter().map(|u| u.shift_for(d)).collect(),
            None => vec![0; units.len()],
        };
        for (u, &s) in units.iter_mut().zip(&default_shift) {
            u.ctx_now = u.ctx(0, s, false);
            u.ctx_global = u.ctx(0, s, true);
        }
        let (uniform, fast, alone) = fast_paths(
            &pages,
            &roots,
            translated,
            &next,
            &default_shift,
            &slow_structures(&units, &climbs),
        );
        let mut memory = match &config.memory {
            Some(mc) => Some(Box::new(MemorySystem::build(
                mc,
                mc.memory_bytes(config.pagetable.as_ref()),
                pages.shifts().min().unwrap_or(12),
                config.machine.seed,
                config.machine.straddle,
                source_name,
            )?)),
            None => None,
        };
        if let (Some(m), true) = (memory.as_deref_mut(), pages.mixed()) {
            m.set_page_sizes(pages.clone());
        }
        if let Some(h) = &handler {
            // The handlers run from unmapped memory: a handler whose code or root table
            // could miss the TLB would recurse.
            for (field, a) in [("code", h.code), ("root_table", h.root_table)] {
                if pages.backing(a, 0).is_some() {
                    return Err(err(
                        format!("memory.handler.{field}"),
                        format!("{a:#x} must lie in an unmapped region of [pages] (pages.regions with size = \"unmapped\")"),
                    ));
                }
            }
        }
        let refill = match &config.refill {
            Some(_) => {
                let tlbs: Vec<_> = units.iter().map(|u| u.tlb.params().clone()).collect();
                let mut r = Box::new(SoftwareManagedTlb::from_config(
                    &config,
                    &tlbs,
                    source_name,
                )?);
                // The memory system, or the caches, see the handlers' work.
                r.record_handler_refs(memory.is_some() || caches.is_some());
                Some(r)
            }
            None => None,
        };
        let mut walker = match &config.pagetable {
            Some(p) => {
                let mut w = Box::new(match memory.as_deref_mut() {
                    // One physical memory: the walker maps pages where the caches see them.
                    Some(m) => {
                        if config.memory.as_ref().map(|c| c.mapping)
                            == Some(crate::vm::Mapping::Identity)
                        {
                            return Err(err(
                                "memory.mapping".into(),
                                "'identity' makes a page's frame its virtual page number, which no page table ([pagetable]) of a physical memory maps; choose another mapping".into(),
                            ));
                        }
                        Walker::with_memory(p, source_name, m, mapped)?
                    }
                    None => Walker::from_config(p, source_name, mapped)?,
                });
                // Pages the table cannot hold would never be walked: refuse them here.
                // (An unmapped region, a kernel class among them, has no size to hold.)
                let holds = w.table().page_shifts();
                for (key, size) in config.pages.sizes() {
                    if size.shift().is_none_or(|s| holds.contains(&s)) {
                        continue;
                    }
                    return Err(err(
                        key,
                        format!(
                            "{} pages with [pagetable]: {}",
                            size.label(),
                            w.table().page_sizes_held()
                        ),
                    ));
                }
                if let Some(m) = memory.as_deref_mut() {
                    // The table references go through the memory system's caches.
                    m.set_walker();
                }
                if caches.is_some() {
                    w.serve_caches()
                        .map_err(|m| err("pagetable.memory".into(), m))?;
                }
                Some(w)
            }
            None => None,
        };
        // A classified structure's shadow is fully associative: only a repeat of the very
        // last access is sure to change nothing there.
        let free_hits = units
            .iter()
            .map(|u| u.tlb.params().hits_change_nothing() && u.shadow.is_none())
            .collect();
        let vac = match &config.vac {
            Some(c) => {
                let mut v = Box::new(VacDriver::from_config(c, source_name)?);
                // One physical memory, the VAC's OS's: the walker maps its faults there, and
                // the frames its background pages took before the run are not free; pages
                // larger than the VAC's are runs of the OS's frames, so it learns their sizes.
                if let Some(w) = &walker {
                    for f in w.frames_held() {
                        v.claim_frame(f << w.base_shift());
                    }
                    if pages.shifts().any(|s| 1u64 << s > c.page.0) {
                        v.set_page_sizes(pages.clone());
                    }
                }
                Some(v)
            }
            None => None,
        };
        let prefetch = config
            .prefetch
            .as_ref()
            .map(|p| Box::new(Prefetcher::new(p.user_entries, p.kernel_entries)));
        let cpus =
            super::cpus::CpuSet::build(&config, &mut units, walker.as_deref_mut(), source_name)?;
        let alone = alone_unless_walks(alone, prefetch.is_some(), walker.is_some(), cpus.is_some());
        Ok(Machine {
            cpus,
            other_cpu: 0,
            vac,
            fast,
            alone,
            prefetch,
            last_missed: 0,
            refill,
            memory,
            handler,
            walker,
            walk_paddr: crate::event::NO_PADDR,
            split: config.machine.straddle == Straddle::Split,
            global_above: config.machine.global_above.unwrap_or(u64::MAX),
            units,
            climbs,
            roots,
            translated,
            next,
            pages,
            cur_asid: 0,
            last_page: vec![[NO_PAGE; 4]; default_shift.len()],
            uniform,
            memo: [NO_MEMO; 4],
            free_hits,
            default_shift,
            ledger,
            config,
            steps: Vec::new(),
            caches,
            kernel: KernelBinding {
                classes: kernel_classes,
                ..KernelBinding::default()
            },
            handler_refs: 0,
        })
    }

    /// Assemble a config from its sources (see [`MachineConfig::assemble`]) and build it.
    pub fn assemble(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        overrides: &[String],
    ) -> Result<Machine> {
        Machine::assemble_within(
            text,
            source_name,
            tlb_flags,
            overrides,
            MemoryLimit::default_for_host(),
        )
    }

    /// [`Machine::assemble`] within a memory limit (see [`Machine::build_within`]).
    pub fn assemble_within(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        overrides: &[String],
        limit: MemoryLimit,
    ) -> Result<Machine> {
        Machine::assemble_all_within(text, source_name, tlb_flags, &[], overrides, limit)
    }

    /// Assemble a config from all its sources, `--cache` flags too (see
    /// [`MachineConfig::assemble_all`]), and build it.
    pub fn assemble_all(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        cache_flags: &[String],
        overrides: &[String],
    ) -> Result<Machine> {
        Machine::assemble_all_within(
            text,
            source_name,
            tlb_flags,
            cache_flags,
            overrides,
            MemoryLimit::default_for_host(),
        )
    }

    /// [`Machine::assemble_all`] within a memory limit (see [`Machine::build_within`]).
    pub fn assemble_all_within(
        text: Option<&str>,
        source_name: &str,
        tlb_flags: &[String],
        cache_flags: &[String],
        overrides: &[String],
        limit: MemoryLimit,
    ) -> Result<Machine> {
        let config =
            MachineConfig::assemble_all(text, source_name, tlb_flags, cache_flags, overrides)?;
        // A bad key is blamed on the source it came from, at its line in the text.
        let origin = Origin::with_caches(text, source_name, tlb_flags, cache_flags, overrides)?;
        Machine::build_within(config, source_name, limit).map_err(|e| origin.locate(e))
    }
}

/// The checks of a machine whose `[[cache]]` hierarchy is physically addressed at the frames
/// of page table `p` (see the `physical` module): the walker's table references go through
/// the hierarchy, so its private cache and its own pass of the program's data are refused.
/// (Whether its memory's frames fit the pool of large pages is the walker's check: see
/// [`Walker::serve_caches`].)
fn physical_caches(p: &crate::config::PageTableConfig, source_name: &str) -> Result<()> {
    let err = |k: &str, m: &str| Err(Error::config(source_name, k, m));
    if p.data_refs {
        return err(
            "pagetable.data_refs",
            "with [[cache]] the program's loads and stores reach the caches at their frames, as do the walker's table references; leave data_refs out",
        );
    }
    if p.cache != crate::config::WalkCacheConfig::default() {
        return err(
            "pagetable.cache",
            "with [[cache]] the walker's table references take the [[cache]] hierarchy; leave [pagetable.cache] out",
        );
    }
    Ok(())
}

/// With pages of more than one size, the memory system gives a large page an aligned run of
/// its frames: memory must hold a page of every size, and a page of the kernel half, which
/// every address space shares, has one size for all (no region singles out address spaces
/// there).
fn memory_holds_its_pages(
    config: &MachineConfig,
    pages: &PageSizes,
    mc: &crate::config::MemoryConfig,
    source_name: &str,
) -> Result<()> {
    if !pages.mixed() {
        return Ok(());
    }
    let bytes = mc.memory_bytes(config.pagetable.as_ref());
    if let Some((key, size)) = config
        .pages
        .sizes()
        .find(|(_, s)| s.shift().is_some_and(|s| 1u64 << s > bytes))
    {
        return Err(Error::config(
            source_name,
            key,
            format!(
                "{} pages in {} of memory: a large page is an aligned run of frames, so memory must hold one (raise memory.memory)",
                size.label(),
                human_bytes(bytes)
            ),
        ));
    }
    if let Some(i) = config.pages.regions.iter().position(|r| {
        r.asid.is_some() && r.size.shift().is_some() && r.end.is_none_or(|e| e > 1 << 63)
    }) {
        return Err(Error::config(
            source_name,
            format!("pages.regions[{i}].asid"),
            "with [memory] and pages of more than one size, a region of the kernel half (addresses from 2^63), whose pages every address space shares, cannot single out an address space",
        ));
    }
    Ok(())
}

/// With `[vac]` and `[pagetable]`, a page larger than the VAC's is an aligned run of the VAC
/// OS's frames (see [`VacDriver::run`]): the table's memory must hold one.
fn vac_holds_its_pages(
    config: &MachineConfig,
    (v, p): (&crate::config::VacConfig, &crate::config::PageTableConfig),
    source_name: &str,
) -> Result<()> {
    let bytes = p
        .memory
        .map_or(crate::config::DEFAULT_PAGETABLE_MEMORY, |b| b.0);
    let runs = config.pages.sizes().find(|(_, s)| {
        s.shift()
            .is_some_and(|s| 1u64 << s > v.page.0 && 1u64 << s > bytes)
    });
    match runs {
        Some((key, size)) => Err(Error::config(
            source_name,
            key,
            format!(
                "{} pages in {} of memory (pagetable.memory), with [vac]: a page larger than the VAC's is an aligned run of its OS's frames, so memory must hold one (raise pagetable.memory)",
                size.label(),
                human_bytes(bytes)
            ),
        )),
        None => Ok(()),
    }
}

/// A bound on the memory one machine may take, and the option that sets it (for the message
/// that refuses a machine over it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimit {
    pub bytes: u64,
    pub option: &'static str,
}

/// The limit when none is given and `/proc/meminfo` cannot be read.
pub(super) const FALLBACK_LIMIT: u64 = 8 << 30;

impl MemoryLimit {
    /// The option that sets the limit, named in the refusal.
    pub const OPTION: &'static str = "--max-memory";

    /// `bytes`, set by `--max-memory` (or the Python API's `max_memory`).
    pub fn of(bytes: u64) -> MemoryLimit {
        MemoryLimit {
            bytes,
            option: Self::OPTION,
        }
    }

    /// Parse a size (`12G`, `512MiB`, `1000000`) for `--max-memory`.
    pub fn parse(text: &str) -> Result<MemoryLimit> {
        crate::config::parse_bytes(text.trim())
            .filter(|&b| b > 0)
            .map(MemoryLimit::of)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{}: '{text}' is not a size (e.g. 4G, 512M)",
                    Self::OPTION
                ))
            })
    }

    /// The default: half of the physical memory (`MemTotal` in `/proc/meminfo`), so that a
    /// machine several times too large is refused with a message instead of taking the host
    /// into swap or the out-of-memory killer; 8 GiB where the size is unknown.
    pub fn default_for_host() -> MemoryLimit {
        static HOST: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let bytes = *HOST.get_or_init(|| {
            std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("MemTotal:"))
                        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                })
                .map_or(FALLBACK_LIMIT, |kib| kib.saturating_mul(1024) / 2)
        });
        MemoryLimit::of(bytes)
    }
}

/// `n` bytes for a message: `4.9 GiB`, `512.0 MiB`, `96 bytes`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if n >= 1u64 << shift {
            return format!("{:.1} {unit}", n as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{n} bytes")
}

/// The memory a machine of `config` takes once built, estimated from the config alone (so
/// that [`Machine::build`] can refuse it before allocating anything): every structure's
/// arrays ([`TlbParams::heap_bytes`]), the caches' tag stores (twice with private user and
/// kernel caches) and dirty bits, the refill model's copy of its TLB and its software TLB,
/// and the fixed parts of the page tables and the frame allocators — a few words per
/// physical frame. What grows with the trace (pages touched, address spaces) is not in it.
pub fn memory_estimate(config: &MachineConfig) -> u64 {
    let tlb = |entries: usize, ways: usize| {
        TlbParams {
            entries,
            ways: ways.clamp(1, entries.max(1)),
            policy: Policy::Lru,
            partition: None,
            seed: 0,
        }
        .heap_bytes()
    };
    let of_ways = |w: Ways, entries: usize| match w {
        Ways::Full => entries,
        Ways::N(n) => n,
    };
    let cache = |size: u64, line: u64, ways: usize| {
        let lines = size.checked_div(line).unwrap_or(0);
        let lines = usize::try_from(lines).unwrap_or(usize::MAX);
        let ways = if ways == 0 { lines } else { ways };
        crate::cache::tags::CacheTags::heap_bytes(lines, ways).saturating_add(lines as u64)
    };
    /// Bytes per 4 KiB frame of a simulated physical memory (frame tables, page tables'
    /// anchors and buckets, allocation bitmaps): an upper bound.
    const PER_FRAME: u64 = 64;
    let frames = |memory: u64| (memory >> 12).saturating_mul(PER_FRAME);
    let mut total = 0u64;
    let mut add = |n: u64| total = total.saturating_add(n);
    // Each CPU has its own copy of a structure that is not shared, and one spare moves along
    // as the CPUs switch (see `machine::cpus`).
    let copies = match config.machine.cpus {
        0 | 1 => 1,
        n => n as u64 + 1,
    };
    for t in &config.tlbs {
        let n = if t.shared { 1 } else { copies };
        add(tlb(t.entries, of_ways(t.ways, t.entries)).saturating_mul(n));
    }
    if let Some(m) = &config.memory {
        // Private per address space: one set per space, made as spaces appear (counted as
        // one here: how many there will be is the trace's).
        let sides = if m.private == crate::config::Private::Mode {
            2
        } else {
            1
        };
        for c in [&m.icache, &m.dcache, &m.cache, &m.l2]
            .into_iter()
            .flatten()
        {
            let per = cache(c.size.0, c.line as u64, of_ways(c.ways, 0));
            add(per.saturating_mul(sides));
        }
        add(frames(m.memory_bytes(config.pagetable.as_ref())));
    }
    if let Some(r) = &config.refill {
        if let Some(t) = config.tlbs.first() {
            add(tlb(t.entries, of_ways(t.ways, t.entries)));
        }
        if let Some(s) = &r.stlb {
            add(tlb(s.entries, s.ways));
        }
    }
    if let Some(p) = &config.pagetable {
        // With [memory], its memory is the table's too (the walker's frame table and table
        // are sized for it).
        add(frames(match &config.memory {
            Some(m) => m.memory_bytes(Some(p)),
            None => p
                .memory
                .map_or(crate::config::DEFAULT_PAGETABLE_MEMORY, |b| b.0),
        }));
        add(cache(p.cache.size.0, p.cache.line as u64, p.cache.ways));
        if let Some(e) = p.entries {
            add(tlb(e, 1));
        }
    }
    if let Some(v) = &config.vac {
        add(cache(v.size.0, v.line.0, v.ways));
    }
    for t in config.tlbs.iter().filter(|t| t.three_c) {
        add(<crate::threec::Shadow>::heap_bytes(t.entries));
    }
    add(Hierarchy::memory_estimate(config));
    total
}

/// Wire the structures: the route of each reference to its first-level structure, and of each
/// structure's misses to its next level; and which kinds some structure translates. Checks
/// that every `next` names structures that serve what it passes on, with no cycle; that the
/// structures at one point serving one kind (the siblings) hold different page sizes; and that
/// a reference to a page of every size in use finds, at every level it reaches, a sibling that
/// holds that size or a smaller one (to cache it as fragments).
#[allow(clippy::type_complexity)]
pub(super) fn wire(
    config: &MachineConfig,
    shifts: &[Vec<u32>],
    pages: &PageSizes,
    source_name: &str,
) -> Result<(Route, Vec<Route>, [bool; 3])> {
    let err = |k: String, m: String| Error::config(source_name, k, m);
    let tlbs = &config.tlbs;
    let n = tlbs.len();
    if n >= NOWHERE as usize {
        return Err(err(
            "tlb".into(),
            format!("{n} TLBs: a machine has at most {}", NOWHERE - 1),
        ));
    }
    let serves: Vec<Serves> = tlbs.iter().map(|t| t.serves).collect();
    // The structures of `members` that serve references of `kind`.
    let serving = |members: &[usize], kind: Kind| -> Vec<usize> {
        members
            .iter()
            .copied()
            .filter(|&i| serves[i].serves(kind))
            .collect()
    };
    let size = |s: u32| PageSize::Size(1 << s).label();
    // What the structures `members` hold, for messages: 'a' holds 2M, 'b' holds 4K+1G.
    let holding = |members: &[usize]| {
        members
            .iter()
            .map(|&i| {
                let held: Vec<String> = shifts[i].iter().rev().map(|&s| size(s)).collect();
                format!("'{}' holds {}", tlbs[i].name, held.join("+"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut nexts: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut is_next = vec![false; n];
    for (i, t) in tlbs.iter().enumerate() {
        for name in &t.next {
            let j = tlbs
                .iter()
                .position(|o| &o.name == name)
                .ok_or_else(|| err(key(t, "next"), format!("no TLB named '{name}'")))?;
            if j == i {
                return Err(err(
                    key(t, "next"),
                    "a TLB cannot be its own next level".into(),
                ));
            }
            if nexts[i].contains(&j) {
                return Err(err(key(t, "next"), format!("names '{name}' twice")));
            }
            nexts[i].push(j);
            is_next[j] = true;
        }
        for kind in Kind::REFS {
            if nexts[i].is_empty()
                || !t.serves.serves(kind)
                || nexts[i].iter().any(|&j| serves[j].serves(kind))
            {
                continue;
            }
            let which = match nexts[i].as_slice() {
                [j] => format!("'{}' does not", tlbs[*j].name),
                several => format!(
                    "none of {} does",
                    several
                        .iter()
                        .map(|&j| format!("'{}'", tlbs[j].name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(err(
                key(t, "next"),
                format!(
                    "{which} serve the {} references that '{}' passes on",
                    kind.name(),
                    t.name
                ),
            ));
        }
    }
    for start in 0..n {
        let mut seen = vec![false; n];
        let mut stack = nexts[start].clone();
        while let Some(j) = stack.pop() {
            if j == start {
                return Err(err(
                    key(&tlbs[start], "next"),
                    "the next-level links form a cycle".into(),
                ));
            }
            if !seen[j] {
                seen[j] = true;
                stack.extend_from_slice(&nexts[j]);
            }
        }
    }
    // Siblings: the first-level structures, and the next levels of each structure.
    let firsts: Vec<usize> = (0..n).filter(|&i| !is_next[i]).collect();
    for (parent, members) in
        std::iter::once((None, &firsts)).chain(nexts.iter().enumerate().map(|(i, m)| (Some(i), m)))
    {
        for kind in Kind::REFS {
            if parent.is_some_and(|p| !serves[p].serves(kind)) {
                continue;
            }
            let m = serving(members, kind);
            for (x, &a) in m.iter().enumerate() {
                for &b in &m[x + 1..] {
                    let Some(&common) = shifts[b].iter().find(|s| shifts[a].contains(s)) else {
                        continue;
                    };
                    let (ta, tb) = (&tlbs[a].name, &tlbs[b].name);
                    return Err(match parent {
                        None => err(
                            key(&tlbs[b], "page"),
                            format!(
                                "'{ta}' and '{tb}' both hold {} pages and both take {} references first: structures at one level hold different page sizes (or is one the other's next level?)",
                                size(common),
                                kind.name()
                            ),
                        ),
                        Some(p) => err(
                            key(&tlbs[p], "next"),
                            format!(
                                "'{ta}' and '{tb}' both hold {} pages and both take the {} references that '{}' passes on: structures at one level hold different page sizes",
                                size(common),
                                kind.name(),
                                tlbs[p].name
                            ),
                        ),
                    });
                }
            }
        }
    }
    let roots = Route::among(&firsts, &serves, shifts);
    let next: Vec<Route> = nexts
        .iter()
        .map(|m| Route::among(m, &serves, shifts))
        .collect();
    let translated = Kind::REFS.map(|k| firsts.iter().any(|&i| serves[i].serves(k)));
    // Every page size in use, along every path a reference of it takes.
    let mut in_use: Vec<u32> = pages.shifts().collect();
    in_use.sort_unstable();
    in_use.dedup();
    for kind in Kind::REFS.into_iter().filter(|k| translated[*k as usize]) {
        for &b in &in_use {
            let Some(mut at) = roots.at(kind, b) else {
                let m = serving(&firsts, kind);
                // The machine's own page size: name the setting that changes it.
                let hint = match m.iter().filter_map(|&i| shifts[i].last()).min() {
                    Some(&s) if Some(b) == pages.default => format!(
                        "; the machine's pages are {} (pages.size): for pages of {} set --set pages.size={}, or let '{}' hold {} too",
                        size(b),
                        size(s),
                        size(s),
                        tlbs[m[0]].name,
                        size(b)
                    ),
                    _ => String::new(),
                };
                return Err(err(
                    key(&tlbs[m[0]], "page"),
                    format!(
                        "{} pages: no first-level TLB for {} references holds that size or a smaller one (to cache them as fragments): {}{hint}",
                        size(b),
                        kind.name(),
                        holding(&m)
                    ),
                ));
            };
            while !nexts[at].is_empty() {
                match next[at].at(kind, b) {
                    Some(j) => at = j,
                    None => {
                        let m = serving(&nexts[at], kind);
                        return Err(err(
                            key(&tlbs[at], "next"),
                            format!(
                                "{} pages: no next level of '{}' for {} references holds that size or a smaller one (to cache them as fragments): {}",
                                size(b),
                                tlbs[at].name,
                                kind.name(),
                                holding(&m)
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok((roots, next, translated))
}

/// The 3C shadow of a TLB of `params`: fully associative, of its size and (upper) policy.
pub(super) fn shadow_of(params: &TlbParams) -> std::result::Result<Shadow<Tlb>, String> {
    let policy = params.partition.map_or(params.policy, |p| p.upper_policy);
    Shadow::<Tlb>::new(params.entries, policy, params.seed ^ 0x3c, true)
}

/// The smallest and largest page sizes (as shifts) `config`'s `[pages]` maps: the smallest is a
/// hashed or inverted table's page ([`crate::mmu::table_page_shift`]), the largest sets where
/// a walker puts large pages' data. 4 KiB if every address is unmapped.
fn mapped_pages(config: &MachineConfig) -> (u32, u32) {
    let shifts = || config.pages.sizes().filter_map(|(_, s)| s.shift());
    let or_base = |s: Option<u32>| s.unwrap_or(crate::pagetable::PAGE_SHIFT);
    (or_base(shifts().min()), or_base(shifts().max()))
}

/// A kernel-class region of `[pages]`: its class and the range it resolved to (none: the
/// trace's layout does not give it).
pub(super) type ResolvedClass = (KernelClass, Option<(u64, u64)>);

/// The page map of `config`'s `[pages]`, with the regions that name a kernel class
/// ([`KernelClass`]) resolved in `layout` (a class the layout lacks, or no layout: no
/// region). Returns the map and, per kernel-class region, its class and the range it got.
pub(super) fn page_map(
    config: &MachineConfig,
    source_name: &str,
    layout: Option<&KernelLayout>,
) -> Result<(PageSizes, Vec<ResolvedClass>)> {
    let err = |k: String, m: &str| Error::config(source_name, k, m);
    let mut regions = Vec::new();
    let mut classes = Vec::new();
    for (i, r) in config.pages.regions.iter().enumerate() {
        let (start, end) = match (r.kernel, r.start, r.end) {
            (Some(class), None, None) => {
                if r.size != PageSize::Unmapped {
                    return Err(err(
                        format!("pages.regions[{i}].size"),
                        "a kernel class can only be declared unmapped (size = \"unmapped\"): its range comes from the trace, and may not be aligned to any page size",
                    ));
                }
                let range = layout.and_then(|l| l.range(class));
                classes.push((class, range));
                match range {
                    Some(range) => range,
                    None => continue,
                }
            }
            (Some(_), _, _) => {
                return Err(err(
                    format!("pages.regions[{i}]"),
                    "give start and end, or kernel (a class of the trace's kernel layout), not both",
                ))
            }
            (None, Some(start), Some(end)) => (start, end),
            (None, _, _) => {
                return Err(Error::config(
                    source_name,
                    format!("pages.regions[{i}]"),
                    format!(
                        "give start and end, or kernel = one of the trace's kernel address classes ({})",
                        crate::trace::kernel::class_names()
                    ),
                ))
            }
        };
        if end <= start {
            return Err(err(
                format!("pages.regions[{i}].end"),
                "end must be above start",
            ));
        }
        if let Some(s) = r.size.shift() {
            let mask = (1u64 << s) - 1;
            if start & mask != 0 || (end & mask != 0 && end != u64::MAX) {
                return Err(Error::config(
                    source_name,
                    format!("pages.regions[{i}]"),
                    format!(
                        "start and end must be aligned to the region's page size ({})",
                        r.size.label()
                    ),
                ));
            }
        }
        regions.push((start, end, r.asid, r.size.shift()));
    }
    Ok((
        PageSizes {
            default: config.pages.size.shift(),
            has_holes: !regions.is_empty() && regions.iter().all(|r| r.3.is_none()),
            regions,
        },
        classes,
    ))
}
