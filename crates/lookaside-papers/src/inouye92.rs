//! Inouye, Konuru, Walpole and Sears (1992), re-run on the model: each of the paper's
//! measurements is a sequence of VM primitives on a [`VacVm`] whose cache starts in the state the
//! paper describes, and its cost is what the primitives are charged.
//!
//! * Table 1 — a selective flush of 1–8 KB with the cache empty, clean or dirty.
//! * Table 2 — a byte copy of 1–8 KB, best case (source and destination cached, not cache
//!   aligned) and worst case (both flushed, the cache full of dirty lines from a 256 KB
//!   buffer).
//! * Table 3 — local, page-aligned `ipcSend` of 1–16 KB by Chorus IPC-copy, IPC-move (lazy
//!   mapping, as measured, or eager) and pure copy with recycled buffers: `workload:ipc`
//!   ([`lookaside::workload::Ipc`], the step lists of §3.6) after three messages that bring the
//!   cache to its steady state, priced by a `[vac]` of the HP 9000/834.
//! * Mach's copy-on-write page initialisation, cases 1–3 (physically addressed cache; VAC
//!   with pages initialised through physical addresses; VAC with a NO-ACCESS mapping first):
//!   `workload:cow` ([`lookaside::workload::Cow`]), priced the same way.
//!
//! Tables 3 and the copy-on-write cases thus take the code path of `lookaside simulate
//! workload:ipc,… --config …` with a `[vac]`: the workload's events through a
//! [`VacDriver`]. Tables 1 and 2 set up cache states no workload makes (the whole cache
//! flushed, then filled from a 256 KB buffer) and drive the primitives directly.
//!
//! The published numbers are here too, so that a test and the recipe can compare.

use serde::Serialize;
use serde_json::{json, Value};

use lookaside::cache::vac::alias::{AliasPolicy, At, VacVm, VmCounts};
use lookaside::cache::vac::drive::{feed, FirstTouch, PhaseCost, VacDriver};
use lookaside::cache::vac::timing::Timing;
use lookaside::cache::vac::{Indexing, VacParams};
use lookaside::workload::vmops::{Cow, CowParams, Ipc, IpcParams, KERNEL, RECEIVER};
pub use lookaside::workload::vmops::{CowCase, IpcDesign as Design};

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
const CLIENT: u32 = 1;
const SERVER: u32 = 2;
const OTHER: u32 = 3;

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

/// Messages sent before the one measured: enough for every buffer and the free pool to reach
/// their steady state.
pub const WARM_MESSAGES: u64 = 3;

/// Where pure copy's three buffers sit: a name and the page colours of the sender's, the
/// receiver's and the kernel's recycled IPC buffer. A 2-way set holds two pages of one colour,
/// so the copies miss only where three of the buffers' pages share a colour.
pub const PLACEMENTS: [(&str, u64, u64, u64); 3] = [
    // The default of `workload:ipc`: no colour holds more than two of their pages up to
    // 16 KB messages, so both copies are best case, as the paper explains its pure copy.
    ("apart", 0, 5, 11),
    // The kernel buffer on the receiver's colour: nothing changes while the sender's buffer
    // (colours 0 and on) stays clear of both; at 16 KB it overlaps them (colours 5-7).
    ("on-receiver", 0, 5, 5),
    // All three on one colour (the sender's and the receiver's buffers cache aligned, which
    // the paper's were not): every store of both copies misses and evicts a dirty line.
    ("one-colour", 0, 0, 0),
];

/// The phase `label` of what `d` priced.
fn phase(d: &VacDriver, label: &str) -> Result<PhaseCost, String> {
    d.phases()
        .into_iter()
        .find(|p| p.phase == label)
        .ok_or_else(|| format!("the workload has no phase '{label}'"))
}

/// The cost of one `bytes` message by `design` under `policy`, the kernel's IPC buffer (pure
/// copy) apart from the others (the first of [`PLACEMENTS`]).
pub fn ipc_cost(
    timing: &Timing,
    policy: AliasPolicy,
    design: Design,
    bytes: u64,
) -> Result<IpcCost, String> {
    let p = IpcParams {
        design,
        bytes,
        ..IpcParams::default()
    };
    ipc_cost_with(timing, policy, p)
}

/// The cost of one message of `workload:ipc` with parameters `p` (its `messages`, `warm`
/// and `page` are set here: one message after [`WARM_MESSAGES`], 2 KB pages) on the HP
/// 9000/834's cache under `policy`: the `send` phase's primitives as a `[vac]` prices them,
/// plus the message's fixed cost (`ipc.null_us + ipc.page_us` per page, which no cache state
/// changes).
pub fn ipc_cost_with(
    timing: &Timing,
    policy: AliasPolicy,
    p: IpcParams,
) -> Result<IpcCost, String> {
    let params = VacParams::hp9000_834();
    let p = IpcParams {
        messages: 1,
        warm: WARM_MESSAGES,
        page: params.page,
        ..p
    };
    let mut w = Ipc::new(p.clone()).map_err(|(k, m)| format!("{k}: {m}"))?;
    let mut d = VacDriver::new(&params, policy, timing.clone(), FirstTouch::Any)?;
    feed(&mut d, &mut w, |_, _| {})?;
    let send = phase(&d, "send")?;
    let (page, pages) = (p.page, p.pages());
    let us = send.us + timing.ipc.null_us + timing.ipc.page_us * pages as f64;
    // What the message leaves behind in the cache.
    let vm = d.vm();
    let mut warm = 0;
    let mut dirty = 0;
    let line = vm.vac().params().line;
    for i in 0..pages {
        let va = p.receiver_page(i);
        let Some(f) = vm.frame_at(RECEIVER, va) else {
            continue;
        };
        let n = (p.bytes - i * page).min(page) / line;
        for l in 0..n {
            if let Some((_, d)) = vm.vac().resident(va + l * line, f + l * line) {
                warm += 1;
                dirty += d as u64;
            }
        }
        if p.design == Design::PureCopy {
            let kva = p.buffer_page(i);
            let kf = vm.frame_at(KERNEL, kva).expect("kernel buffer");
            for l in 0..n {
                if let Some((_, true)) = vm.vac().resident(kva + l * line, kf + l * line) {
                    dirty += 1;
                }
            }
        }
    }
    // The sender's replacement pages are requested after the message (a move leaves holes).
    let deferred = match p.design {
        Design::Move | Design::MoveEager => {
            pages as f64 * (timing.vm.page_alloc_us + timing.vm.map_us)
        }
        _ => 0.0,
    } + dirty as f64 * timing.memory.writeback_us;
    Ok(IpcCost {
        design: p.design,
        bytes: p.bytes,
        us,
        deferred_us: deferred,
        warm_lines: warm,
        dirty_lines: dirty,
        counts: send.primitives,
    })
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

/// The cost of one copy-on-write fault on a 2 KB page that the parent has just written:
/// `workload:cow` with one page, priced by a `[vac]` of the HP 9000/834 (physically indexed
/// and with no consistency policy for case 1, which is about a physically addressed cache).
pub fn cow_cost(timing: &Timing, case: CowCase) -> Result<CowCost, String> {
    let mut params = VacParams::hp9000_834();
    let policy = if case == CowCase::PhysicalCache {
        params.indexing = Indexing::Physical;
        AliasPolicy::none()
    } else {
        AliasPolicy::chorus()
    };
    let p = CowParams {
        case,
        pages: 1,
        page: params.page,
    };
    let x = p.page_at(0);
    let mut w = Cow::new(p).map_err(|(k, m)| format!("{k}: {m}"))?;
    let mut d = VacDriver::new(&params, policy, timing.clone(), FirstTouch::Any)?;
    // Lines of the new page cached when the task resumes.
    let mut warm = 0;
    let line = params.line;
    feed(&mut d, &mut w, |label, d| {
        if label == "read" {
            let vm = d.vm();
            let new = vm.frame_at(RECEIVER, x).expect("mapped");
            warm = (0..params.page / line)
                .filter(|l| vm.vac().resident(x + l * line, new + l * line).is_some())
                .count() as u64;
        }
    })?;
    let (fault, read) = (phase(&d, "cow")?, phase(&d, "read")?);
    Ok(CowCost {
        case: case as u8,
        fault_us: fault.us,
        touch_us: read.us,
        warm_lines: warm,
        counts: fault.primitives,
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
                // Table 3's cells: moves of whole pages, pure copies of a page or more.
                let page_or_more = bytes >= page && design.sends(bytes, page);
                if design != Design::Copy && !page_or_more {
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
    let mut placement = Vec::new();
    for (name, sender, receiver, buffer) in PLACEMENTS {
        for &bytes in &MESSAGE_BYTES[2..] {
            let p = IpcParams {
                design: Design::PureCopy,
                bytes,
                sender_colour: sender,
                receiver_colour: receiver,
                buffer_colour: buffer,
                ..IpcParams::default()
            };
            let c = ipc_cost_with(&t, AliasPolicy::chorus(), p)?;
            placement.push(json!({
                "placement": name, "sender_colour": sender, "receiver_colour": receiver,
                "buffer_colour": buffer, "bytes": bytes, "ours": c.us,
                "deferred": c.deferred_us, "misses": c.counts.misses,
                "writebacks": c.counts.writebacks, "warm_lines": c.warm_lines,
            }));
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
        "placement": placement,
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
    fn the_kernel_buffer_s_colour_matters_only_where_three_pages_share_a_set() {
        let t = hp();
        let cost = |(_, s, r, b): (&str, u64, u64, u64), kb| {
            let p = IpcParams {
                design: Design::PureCopy,
                bytes: kb * KB,
                sender_colour: s,
                receiver_colour: r,
                buffer_colour: b,
                ..IpcParams::default()
            };
            ipc_cost_with(&t, AliasPolicy::chorus(), p).unwrap()
        };
        let [apart, on_receiver, one_colour] = PLACEMENTS;
        for kb in [2, 4, 8] {
            assert_eq!(cost(apart, kb).us, cost(on_receiver, kb).us, "{kb} KB");
            assert_eq!(
                cost(apart, kb).counts.misses,
                0,
                "{kb} KB: best-case copies"
            );
        }
        assert!(cost(on_receiver, 16).us > cost(apart, 16).us + 500.0);
        // One colour: each copy's stores miss and evict a dirty line (its loads hit what was
        // just written), and the eager move beats it.
        let c = cost(one_colour, 2);
        assert_eq!((c.counts.misses, c.counts.writebacks), (128, 128));
        let eager = ipc_cost(&t, AliasPolicy::chorus(), Design::MoveEager, 2 * KB).unwrap();
        assert!(eager.us < c.us && eager.us > cost(apart, 2).us);
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
