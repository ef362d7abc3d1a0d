//! Inouye, Konuru, Walpole and Sears (1992), re-run on the model: each of the paper's
//! measurements is a sequence of VM primitives on a [`VacVm`] whose cache starts in the state the
//! paper describes, and its cost is what the primitives are charged.
//!
//! * Table 1 — a selective flush of 1–8 KB with the cache empty, clean or dirty.
//! * Table 2 — a byte copy of 1–8 KB, best case (source and destination cached, not cache
//!   aligned) and worst case (both flushed, the cache full of dirty lines from a 256 KB
//!   buffer).
//! * Table 3 — local, page-aligned `ipcSend` of 1–16 KB by Chorus IPC-copy, IPC-move (lazy
//!   mapping, as measured, or eager) and pure copy with recycled buffers, each as the step
//!   list of §3.6 of the paper, repeated until the cache reaches its steady state.
//! * Mach's copy-on-write page initialisation, cases 1–3 (physically addressed cache; VAC
//!   with pages initialised through physical addresses; VAC with a NO-ACCESS mapping first).
//!
//! The published numbers are here too, so that a test and the recipe can compare.

use serde::Serialize;
use serde_json::{json, Value};

use super::alias::{AliasPolicy, At, VacVm, VmCounts};
use super::timing::Timing;
use super::{Indexing, VacParams};

/// Table 1 of the paper (µs): rows Empty, Clean, Dirty; columns 1, 2, 4, 8 KB.
pub const TABLE1: [(&str, [f64; 4]); 3] = [
    ("empty", [36.0, 49.0, 75.0, 128.0]),
    ("clean", [36.0, 49.0, 75.0, 128.0]),
    ("dirty", [80.0, 150.0, 291.0, 579.0]),
];

/// Table 2 (µs): rows best, worst; columns 1, 2, 4, 8 KB.
pub const TABLE2: [(&str, [f64; 4]); 2] = [
    ("best", [57.0, 113.0, 224.0, 446.0]),
    ("worst", [212.0, 408.0, 793.0, 1562.0]),
];

/// Sizes of Tables 1 and 2 (KB).
pub const SIZES_KB: [u64; 4] = [1, 2, 4, 8];

/// Table 3 (µs): message sizes null, 1, 2, 4, 8, 16 KB; `None` where the paper has N/A.
pub const TABLE3: [(&str, [Option<f64>; 6]); 3] = [
    (
        "copy",
        [
            Some(337.0),
            Some(786.0),
            Some(1668.0),
            Some(2838.0),
            Some(5097.0),
            Some(9562.0),
        ],
    ),
    (
        "move",
        [
            None,
            None,
            Some(1531.0),
            Some(2424.0),
            Some(4225.0),
            Some(7649.0),
        ],
    ),
    (
        "pure-copy",
        [
            None,
            None,
            Some(1355.0),
            Some(2282.0),
            Some(3806.0),
            Some(7273.0),
        ],
    ),
];

/// Message sizes of Table 3 (bytes).
pub const MESSAGE_BYTES: [u64; 6] = [0, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10];

const KB: u64 = 1 << 10;
/// Address spaces of the experiments.
const KERNEL: u32 = 0;
const CLIENT: u32 = 1;
const SERVER: u32 = 2;
const OTHER: u32 = 3;
/// Chorus maps all of physical memory into a kernel region; its base is colour 0, so a
/// frame's kernel address has the frame's own colour.
const KSEG: u64 = 0x8000_0000;

fn vm(policy: AliasPolicy, timing: &Timing) -> VacVm {
    VacVm::new(&VacParams::hp9000_834(), policy, timing.clone()).expect("the HP cache is valid")
}

/// Map `bytes` at `va` of `asid` to fresh frames, writable and live.
fn buffer(vm: &mut VacVm, asid: u32, va: u64, bytes: u64) -> Result<(), String> {
    let page = vm.vac().params().page;
    for i in 0..bytes.div_ceil(page) {
        let f = vm.alloc_frame(None)?;
        vm.map(asid, va + i * page, f, true, true)?;
    }
    Ok(())
}

/// Load (or store) every line of `bytes` at `at`.
fn touch_all(vm: &mut VacVm, at: At, bytes: u64, store: bool) -> Result<(), String> {
    let line = vm.vac().params().line;
    for off in (0..bytes).step_by(line as usize) {
        if store {
            vm.store(at.offset(off), 1)?;
        } else {
            vm.load(at.offset(off))?;
        }
    }
    Ok(())
}

/// Microseconds `f` charges.
fn timed(vm: &mut VacVm, f: impl FnOnce(&mut VacVm) -> Result<(), String>) -> Result<f64, String> {
    let t0 = vm.elapsed_us();
    f(vm)?;
    Ok(vm.elapsed_us() - t0)
}

/// One cell of Table 1: flush `kb` KB with the cache `state` (`empty`, `clean`, `dirty`).
pub fn flush_time(timing: &Timing, state: &str, kb: u64) -> Result<f64, String> {
    let mut vm = vm(AliasPolicy::chorus(), timing);
    let (at, bytes) = (At::Virt(CLIENT, 0x10_0000), kb * KB);
    buffer(&mut vm, CLIENT, 0x10_0000, bytes)?;
    touch_all(&mut vm, at, bytes, true)?;
    vm.vac_mut().flush_all();
    match state {
        "empty" => {}
        "clean" => touch_all(&mut vm, at, bytes, false)?,
        "dirty" => touch_all(&mut vm, at, bytes, true)?,
        _ => return Err(format!("state: '{state}' is not empty, clean or dirty")),
    }
    timed(&mut vm, |vm| vm.flush_range(at, bytes).map(|_| ()))
}

/// One cell of Table 2: copy `kb` KB, `best` or `worst` case.
pub fn copy_time(timing: &Timing, case: &str, kb: u64) -> Result<f64, String> {
    let mut vm = vm(AliasPolicy::chorus(), timing);
    let bytes = kb * KB;
    // Source at colour 0, destination at colour 16: not cache aligned.
    let (src, dst) = (At::Virt(CLIENT, 0x10_0000), At::Virt(SERVER, 0x20_8000));
    buffer(&mut vm, CLIENT, 0x10_0000, bytes)?;
    buffer(&mut vm, SERVER, 0x20_8000, bytes)?;
    touch_all(&mut vm, src, bytes, true)?;
    match case {
        "best" => {
            vm.copy(src, dst, bytes)?;
        }
        "worst" => {
            vm.flush_range(src, bytes)?;
            vm.flush_range(dst, bytes)?;
            let big = 256 * KB;
            buffer(&mut vm, OTHER, 0x100_0000, big)?;
            touch_all(&mut vm, At::Virt(OTHER, 0x100_0000), big, true)?;
        }
        _ => return Err(format!("case: '{case}' is not best or worst")),
    }
    timed(&mut vm, |vm| vm.copy(src, dst, bytes).map(|_| ()))
}

/// An IPC design of Table 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Design {
    /// Chorus IPC-copy: copy into a fresh kernel page, then move it to the receiver.
    Copy,
    /// Chorus IPC-move, the receiver's page mapped lazily (a pseudo page fault on first use).
    Move,
    /// IPC-move with the receiver's page mapped eagerly.
    MoveEager,
    /// Two copies through a recycled kernel buffer that stays mapped.
    PureCopy,
}

impl Design {
    pub const ALL: [Design; 4] = [
        Design::Copy,
        Design::Move,
        Design::MoveEager,
        Design::PureCopy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Design::Copy => "copy",
            Design::Move => "move",
            Design::MoveEager => "move-eager",
            Design::PureCopy => "pure-copy",
        }
    }

    /// Whether the design sends `bytes` (moves need whole pages).
    pub fn sends(self, bytes: u64, page: u64) -> bool {
        match self {
            Design::Move | Design::MoveEager => bytes > 0 && bytes.is_multiple_of(page),
            Design::PureCopy => bytes >= page,
            Design::Copy => true,
        }
    }
}

/// One message of Table 3, in the cache's steady state.
#[derive(Clone, Debug, Serialize)]
pub struct IpcCost {
    pub design: Design,
    pub bytes: u64,
    /// `ipcSend` to the receiver's read of one word per page, as the paper measures.
    pub us: f64,
    /// Costs the design defers out of that interval: the sender's replacement pages (move),
    /// and a write-back of every line the message left dirty in the cache.
    pub deferred_us: f64,
    /// Lines of the message the cache still holds for the receiver after its reads (of
    /// `bytes / 32`): warm data.
    pub warm_lines: u64,
    /// Lines the message left dirty (kernel buffer and receiver's buffer).
    pub dirty_lines: u64,
    /// What the measured message did.
    pub counts: VmCounts,
}

/// The sender's buffer (colour 0) and the receiver's (colour 5: not cache aligned with it),
/// and the pure-copy kernel buffer (colour 11).
const CLIENT_BUF: u64 = 0x100_0000;
const SERVER_BUF: u64 = 0x200_0000 + 5 * 2048;
const KERNEL_BUF: u64 = 0x300_0000 + 11 * 2048;

/// Messages sent before the one measured: enough for every buffer and the free pool to reach
/// their steady state.
const WARM_MESSAGES: usize = 3;

/// The cost of one `bytes` message by `design` under `policy`.
pub fn ipc_cost(
    timing: &Timing,
    policy: AliasPolicy,
    design: Design,
    bytes: u64,
) -> Result<IpcCost, String> {
    let mut vm = vm(policy, timing);
    let page = vm.vac().params().page;
    if !design.sends(bytes, page) && bytes > 0 {
        return Err(format!(
            "bytes: {} does not send {bytes} bytes (whole pages only)",
            design.name()
        ));
    }
    let pages = bytes.div_ceil(page);
    buffer(&mut vm, CLIENT, CLIENT_BUF, bytes)?;
    if design == Design::PureCopy {
        buffer(&mut vm, KERNEL, KERNEL_BUF, bytes)?;
        buffer(&mut vm, SERVER, SERVER_BUF, bytes)?;
    }
    let mut last = None;
    for _ in 0..=WARM_MESSAGES {
        // The sender refills its buffer (replacement pages after a move) and writes every word.
        timed(&mut vm, |vm| {
            for i in 0..pages {
                if vm.frame_at(CLIENT, CLIENT_BUF + i * page).is_none() {
                    let f = vm.alloc_frame(None)?;
                    vm.map(CLIENT, CLIENT_BUF + i * page, f, true, false)?;
                }
            }
            Ok(())
        })?;
        touch_all(&mut vm, At::Virt(CLIENT, CLIENT_BUF), bytes, true)?;
        let c0 = vm.counts();
        let us = timed(&mut vm, |vm| send(vm, design, bytes, pages))?;
        last = Some((us, diff(vm.counts(), c0)));
    }
    let (us, counts) = last.expect("one message at least");
    // What the message leaves behind in the cache.
    let mut warm = 0;
    let mut dirty = 0;
    let line = vm.vac().params().line;
    for i in 0..pages {
        let va = SERVER_BUF + i * page;
        let Some(f) = vm.frame_at(SERVER, va) else {
            continue;
        };
        let n = (bytes - i * page).min(page) / line;
        for l in 0..n {
            if let Some((_, d)) = vm.vac().resident(va + l * line, f + l * line) {
                warm += 1;
                dirty += d as u64;
            }
        }
        if design == Design::PureCopy {
            let kva = KERNEL_BUF + i * page;
            let kf = vm.frame_at(KERNEL, kva).expect("kernel buffer");
            for l in 0..n {
                if let Some((_, true)) = vm.vac().resident(kva + l * line, kf + l * line) {
                    dirty += 1;
                }
            }
        }
    }
    // The sender's replacement pages are requested after the message (a move leaves holes).
    let deferred = match design {
        Design::Move | Design::MoveEager => {
            pages as f64 * (timing.vm.page_alloc_us + timing.vm.map_us)
        }
        _ => 0.0,
    } + dirty as f64 * timing.memory.writeback_us;
    Ok(IpcCost {
        design,
        bytes,
        us,
        deferred_us: deferred,
        warm_lines: warm,
        dirty_lines: dirty,
        counts,
    })
}

/// One message, `ipcSend` to the receiver's read of one word per page. Each step is done for
/// every page before the next step starts (§3.6).
fn send(vm: &mut VacVm, design: Design, bytes: u64, pages: u64) -> Result<(), String> {
    let page = vm.vac().params().page;
    let t = vm.timing().clone();
    vm.spend(t.ipc.null_us + t.ipc.page_us * pages as f64);
    let part = |i: u64| (bytes - i * page).min(page);
    let client = |i: u64| At::Virt(CLIENT, CLIENT_BUF + i * page);
    let server = |i: u64| At::Virt(SERVER, SERVER_BUF + i * page);
    // The receiver's old page is unmapped and destroyed (flushed, or purged).
    let destroy_old = |vm: &mut VacVm, i: u64| -> Result<(), String> {
        if let Some(old) = vm.frame_at(SERVER, SERVER_BUF + i * page) {
            vm.unmap(SERVER, SERVER_BUF + i * page, true)?;
            vm.free_frame(old)?;
        }
        Ok(())
    };
    match design {
        Design::Copy => {
            let mut frames = Vec::new();
            for _ in 0..pages {
                frames.push(vm.alloc_frame(None)?);
            }
            for &f in &frames {
                vm.map(KERNEL, KSEG + f, f, true, true)?;
            }
            for (i, &f) in frames.iter().enumerate() {
                vm.copy(client(i as u64), At::Virt(KERNEL, KSEG + f), part(i as u64))?;
            }
            for i in 0..pages {
                destroy_old(vm, i)?;
            }
            // ipcReceive: the kernel page is unloaded (flushed: its lines are dirty) and
            // mapped lazily into the receiver.
            for &f in &frames {
                vm.unmap(KERNEL, KSEG + f, false)?;
            }
            for (i, &f) in frames.iter().enumerate() {
                vm.map(SERVER, SERVER_BUF + i as u64 * page, f, true, false)?;
            }
        }
        Design::Move | Design::MoveEager => {
            let mut frames = Vec::new();
            for i in 0..pages {
                frames.push(vm.frame_at(CLIENT, CLIENT_BUF + i * page).expect("mapped"));
                vm.unmap(CLIENT, CLIENT_BUF + i * page, false)?;
            }
            for i in 0..pages {
                destroy_old(vm, i)?;
            }
            let eager = design == Design::MoveEager;
            for (i, &f) in frames.iter().enumerate() {
                vm.map(SERVER, SERVER_BUF + i as u64 * page, f, true, eager)?;
            }
        }
        Design::PureCopy => {
            for i in 0..pages {
                vm.copy(client(i), At::Virt(KERNEL, KERNEL_BUF + i * page), part(i))?;
            }
            for i in 0..pages {
                vm.copy(At::Virt(KERNEL, KERNEL_BUF + i * page), server(i), part(i))?;
            }
        }
    }
    // The receiver reads one word per page.
    for i in 0..pages {
        vm.load(server(i))?;
    }
    Ok(())
}

fn diff(a: VmCounts, b: VmCounts) -> VmCounts {
    a.since(&b)
}

/// Mach's copy-on-write page initialisation (§3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CowCase {
    /// 1: a physically addressed cache; the old (warm) page is copied to a new (cold) one.
    PhysicalCache = 1,
    /// 2: a VAC under Mach's machine-independent code, which initialises pages through
    /// physical addresses: flush the old page, copy cold to cold, flush the physical lines of
    /// both, map the new page. It ends cold.
    PhysicalInit = 2,
    /// 3: a VAC, mapping the new page first (NO-ACCESS to the task) and copying virtual to
    /// virtual. It ends warm.
    MapFirst = 3,
}

/// One copy-on-write fault.
#[derive(Clone, Debug, Serialize)]
pub struct CowCost {
    pub case: u8,
    /// The fault's handling: allocation, flushes, copy, mapping.
    pub fault_us: f64,
    /// The task then reading every line of the new page.
    pub touch_us: f64,
    /// Lines of the new page cached when the task resumes (of 64).
    pub warm_lines: u64,
    pub counts: VmCounts,
}

/// The cost of one copy-on-write fault on a 2 KB page that the parent has just written.
pub fn cow_cost(timing: &Timing, case: CowCase) -> Result<CowCost, String> {
    let mut params = VacParams::hp9000_834();
    let policy = if case == CowCase::PhysicalCache {
        params.indexing = Indexing::Physical;
        AliasPolicy::none()
    } else {
        AliasPolicy::chorus()
    };
    let mut vm = VacVm::new(&params, policy, timing.clone())?;
    let page = params.page;
    let x = 0x40_0000 + 3 * page; // colour 3
    let old = vm.alloc_frame(None)?;
    vm.map(CLIENT, x, old, true, true)?;
    touch_all(&mut vm, At::Virt(CLIENT, x), page, true)?;
    // The child shares the page read-only, copy-on-write; it has not touched it yet.
    vm.map(SERVER, x, old, false, false)?;
    let c0 = vm.counts();
    let fault_us = timed(&mut vm, |vm| {
        let new = vm.alloc_frame(None)?;
        match case {
            CowCase::PhysicalCache => {
                vm.copy_page(At::Phys(old), At::Phys(new))?;
                vm.remap(SERVER, x, new)?;
            }
            CowCase::PhysicalInit => {
                // The physical access to the old page flushes the parent's alias first.
                vm.copy_page(At::Phys(old), At::Phys(new))?;
                vm.unload(At::Phys(old))?;
                // Mapping the new page flushes its physically indexed lines.
                vm.remap(SERVER, x, new)?;
            }
            CowCase::MapFirst => {
                // A free-pool page is cold: the mapping needs no flush.
                vm.remap(SERVER, x, new)?;
                vm.protect(SERVER, x, true)?;
                vm.copy_page(At::Virt(CLIENT, x), At::Virt(SERVER, x))?;
                return Ok(());
            }
        }
        vm.protect(SERVER, x, true).map(|_| ())
    })?;
    let counts = diff(vm.counts(), c0);
    let new = vm.frame_at(SERVER, x).expect("mapped");
    let line = params.line;
    let warm = (0..page / line)
        .filter(|l| vm.vac().resident(x + l * line, new + l * line).is_some())
        .count() as u64;
    let touch_us = timed(&mut vm, |vm| {
        touch_all(vm, At::Virt(SERVER, x), page, false)
    })?;
    Ok(CowCost {
        case: case as u8,
        fault_us,
        touch_us,
        warm_lines: warm,
        counts,
    })
}

/// Two address spaces sharing one frame, taking turns to touch every line of it (stores when
/// `write`, else loads through read-only mappings), their pages cache aligned or not: the
/// cost of one round (both turns) in the steady state under `policy`. What pseudo-aliasing
/// charges for sharing, and what read-only aliasing and equivalent mapping save.
pub fn sharing_cost(
    timing: &Timing,
    policy: AliasPolicy,
    aligned: bool,
    write: bool,
) -> Result<f64, String> {
    let mut vm = vm(policy, timing);
    let page = vm.vac().params().page;
    let f = vm.alloc_frame(None)?;
    // 0x20_0000 has the colour of 0x10_0000 (a multiple of the 64 KB way); one page on does not.
    let other = if aligned { 0x20_0000 } else { 0x20_0000 + page };
    vm.map(CLIENT, 0x10_0000, f, write, false)?;
    vm.map(SERVER, other, f, write, false)?;
    let round = |vm: &mut VacVm| -> Result<(), String> {
        touch_all(vm, At::Virt(CLIENT, 0x10_0000), page, write)?;
        touch_all(vm, At::Virt(SERVER, other), page, write)
    };
    round(&mut vm)?;
    const ROUNDS: usize = 8;
    let us = timed(&mut vm, |vm| (0..ROUNDS).try_for_each(|_| round(vm)))?;
    Ok(us / ROUNDS as f64)
}

/// Everything the `inouye92` recipe compares, as JSON: the model's Tables 1–3 and the
/// copy-on-write cases next to the published numbers, under the timing preset `timing`.
pub fn results(timing: &str) -> Result<Value, String> {
    let t = Timing::preset(timing)?;
    let mut table1 = Vec::new();
    for (state, published) in TABLE1 {
        for (j, kb) in SIZES_KB.iter().enumerate() {
            table1.push(json!({"state": state, "kb": kb, "published": published[j],
                               "ours": flush_time(&t, state, *kb)?}));
        }
    }
    let mut table2 = Vec::new();
    for (case, published) in TABLE2 {
        for (j, kb) in SIZES_KB.iter().enumerate() {
            table2.push(json!({"case": case, "kb": kb, "published": published[j],
                               "ours": copy_time(&t, case, *kb)?}));
        }
    }
    let page = VacParams::hp9000_834().page;
    let mut table3 = Vec::new();
    for policy in [
        AliasPolicy::chorus(),
        AliasPolicy::parse("pseudo-aliasing+purge").expect("valid"),
    ] {
        for design in Design::ALL {
            for (j, &bytes) in MESSAGE_BYTES.iter().enumerate() {
                let published = TABLE3
                    .iter()
                    .find(|r| r.0 == design.name())
                    .and_then(|r| r.1[j]);
                if bytes > 0 && !design.sends(bytes, page) {
                    continue;
                }
                if bytes == 0 && design != Design::Copy {
                    continue;
                }
                let c = ipc_cost(&t, policy, design, bytes)?;
                table3.push(json!({
                    "policy": policy.name(), "design": design.name(), "bytes": bytes,
                    "published": if policy == AliasPolicy::chorus() { published } else { None },
                    "ours": c.us, "deferred": c.deferred_us, "warm_lines": c.warm_lines,
                    "dirty_lines": c.dirty_lines, "pseudo_faults": c.counts.pseudo_faults,
                    "flushed_dirty": c.counts.flushed.dirty, "flush_calls": c.counts.flush_calls,
                    "purge_calls": c.counts.purge_calls,
                }));
            }
        }
    }
    let mut cow = Vec::new();
    for case in [
        CowCase::PhysicalCache,
        CowCase::PhysicalInit,
        CowCase::MapFirst,
    ] {
        let c = cow_cost(&t, case)?;
        cow.push(
            json!({"case": c.case, "fault": c.fault_us, "touch": c.touch_us,
                        "total": c.fault_us + c.touch_us, "warm_lines": c.warm_lines,
                        "flush_calls": c.counts.flush_calls,
                        "flushed_dirty": c.counts.flushed.dirty}),
        );
    }
    let mut sharing = Vec::new();
    for name in [
        "pseudo-aliasing",
        "pseudo-aliasing+read-only",
        "pseudo-aliasing+equivalent",
        "none",
    ] {
        let policy = AliasPolicy::parse(name).expect("valid");
        for aligned in [false, true] {
            for write in [false, true] {
                let us = sharing_cost(&t, policy, aligned, write)?;
                sharing.push(json!({"policy": name, "aligned": aligned,
                                    "access": if write { "write" } else { "read" },
                                    "us_per_round": us}));
            }
        }
    }
    Ok(json!({
        "timing": t, "cache": VacParams::hp9000_834(), "sharing": sharing,
        "table1": table1, "table2": table2, "table3": table3, "cow": cow,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp() -> Timing {
        Timing::preset("hp9000-834").unwrap()
    }

    #[test]
    fn tables_1_and_2_within_ten_per_cent() {
        let t = hp();
        for (state, published) in TABLE1 {
            for (j, &kb) in SIZES_KB.iter().enumerate() {
                let ours = flush_time(&t, state, kb).unwrap();
                let err = (ours - published[j]).abs() / published[j];
                assert!(
                    err < 0.10,
                    "flush {state} {kb} KB: {ours:.1} vs {}",
                    published[j]
                );
            }
        }
        for (case, published) in TABLE2 {
            for (j, &kb) in SIZES_KB.iter().enumerate() {
                let ours = copy_time(&t, case, kb).unwrap();
                let err = (ours - published[j]).abs() / published[j];
                assert!(
                    err < 0.10,
                    "copy {case} {kb} KB: {ours:.1} vs {}",
                    published[j]
                );
            }
        }
    }

    #[test]
    fn table_3_ordering_and_the_eager_mapping() {
        let t = hp();
        let p = AliasPolicy::chorus();
        for kb in [2, 4, 8, 16] {
            let c = |d| ipc_cost(&t, p, d, kb * KB).unwrap();
            let (copy, mv, eager, pure) = (
                c(Design::Copy),
                c(Design::Move),
                c(Design::MoveEager),
                c(Design::PureCopy),
            );
            assert!(pure.us <= mv.us && mv.us < copy.us, "{kb} KB");
            assert_eq!(mv.counts.pseudo_faults, kb / 2);
            assert_eq!(eager.counts.pseudo_faults, 0);
            assert!(
                pure.warm_lines == kb * 32 && mv.warm_lines == kb / 2,
                "{kb} KB"
            );
        }
    }

    #[test]
    fn cow_case_2_dwarfs_cases_1_and_3() {
        let t = hp();
        let [c1, c2, c3] = [
            CowCase::PhysicalCache,
            CowCase::PhysicalInit,
            CowCase::MapFirst,
        ]
        .map(|c| cow_cost(&t, c).unwrap());
        let total = |c: &CowCost| c.fault_us + c.touch_us;
        assert!(total(&c2) > 2.0 * total(&c1), "{c1:?} {c2:?}");
        assert!(
            (total(&c1) - total(&c3)).abs() < 0.1 * total(&c1),
            "{c1:?} {c3:?}"
        );
        assert_eq!((c1.warm_lines, c2.warm_lines, c3.warm_lines), (64, 0, 64));
    }

    #[test]
    fn sharing_costs_follow_the_policies() {
        let t = hp();
        let p = |n| AliasPolicy::parse(n).unwrap();
        let c = |n, aligned, write| sharing_cost(&t, p(n), aligned, write).unwrap();
        // Every turn takes a pseudo page fault and a flush under plain pseudo-aliasing.
        assert!(c("pseudo-aliasing", false, true) > 2.0 * t.vm.pseudo_fault_us);
        assert!(c("pseudo-aliasing", true, false) > 2.0 * t.vm.pseudo_fault_us);
        // Read-only aliases coexist; aligned aliases share lines under equivalent mapping.
        assert_eq!(c("pseudo-aliasing+read-only", false, false), 0.0);
        assert_eq!(c("pseudo-aliasing+equivalent", true, true), 0.0);
        assert!(c("pseudo-aliasing+equivalent", false, true) > 2.0 * t.vm.pseudo_fault_us);
    }

    #[test]
    fn results_are_deterministic() {
        assert_eq!(
            results("hp9000-834").unwrap(),
            results("hp9000-834").unwrap()
        );
    }

    #[test]
    fn results_are_json() {
        let v = results("hp9000-834").unwrap();
        assert_eq!(v["table1"].as_array().unwrap().len(), 12);
        assert!(results("nope").unwrap_err().contains("hp9000-834"));
    }
}
