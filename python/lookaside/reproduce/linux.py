"""A whole Linux system in the spirit of the seeds: how much of a real system's memory
traffic and TLB misses come from the kernel, per process, and what structure does to them.

Uhlig et al. and Chen could only see kernel TLB misses because they traced the kernel; their
contrast was between OS structures (Ultrix, with services in the kernel, against Mach 3.0,
with services in user-level servers that talk by IPC). One Linux kernel has one structure,
so the contrast is drawn, as far as a Linux trace allows, between two workload structures
captured on it with ``lookaside trace --system``: ``compress``, one process computing (the
work stays in one address space: Ultrix-like), and ``pipe``, a client and a server
exchanging small messages through the kernel (every request crosses address spaces:
microkernel-like). Both run on ``modern-x86`` (TLB entries tagged by address space, as with
PCIDs or the MIPS ASIDs) and on the same machine untagged (every address-space switch
empties the non-global entries, as on x86 without PCIDs). The claims are the seeds'
trends; the numbers are today's.

The captures are kept in ``OUT/linux/traces/`` and reused by later runs (delete them to
capture afresh: a capture is not bit-reproducible).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import RECIPES, Check, Outcome, save_figure

#: workload → the structure it stands for.
WORKLOADS = {
    "compress": "one process computing (Ultrix-like)",
    "pipe": "client and server over pipes (microkernel-like)",
}
MACHINE = "modern-x86"
UNTAGGED = [f"tlb.{t}.asid=false" for t in ("itlb", "dtlb", "stlb")]


def capture(d: Path, say: Callable[[str], None]) -> dict[str, Path]:
    from ..system import record_system

    out = {}
    for w in WORKLOADS:
        path = d / "traces" / f"{w}.lks"
        if path.is_file():
            say(f"{w}: reusing {path}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            say(f"{w}: capturing a whole system (boots Linux under QEMU, ~1 min)")
            record_system(w, path, quiet=True)
        out[w] = path
    return out


def measure(w: str, path: Path) -> tuple[dict, list[dict]]:
    """Totals of one workload, and one row per address space."""
    import lookaside

    info = lookaside.info(path)
    names: dict[int, list[str]] = {}
    for p in info["metadata"].get("processes", []):
        names.setdefault(p["asid"], [])
        if p["name"] not in names[p["asid"]]:
            names[p["asid"]].append(p["name"])
    walks = {}
    for tag, overrides in (("tagged", []), ("untagged", UNTAGGED)):
        df = lookaside.simulate(path, MACHINE, overrides).to_pandas()
        walks[tag] = df[df.structure == "walk"]
    refs = info["references"]
    kernel_refs = info["modes"]["kernel"]
    t = walks["tagged"]
    total = {
        "workload": w, "structure": WORKLOADS[w], "references": refs,
        "instructions": info["instructions"],
        "kernel_ref_share": kernel_refs / refs,
        "switches_per_kinstr": 1000 * info["kinds"]["context_switch"] / info["instructions"],
        "walks_tagged": int(t.misses.sum()),
        "walks_untagged": int(walks["untagged"].misses.sum()),
        "kernel_walk_share": float(t[t["mode"] == "kernel"].misses.sum() / max(t.misses.sum(), 1)),
    }
    total["walks_per_kinstr"] = 1000 * total["walks_tagged"] / total["instructions"]
    total["untagged_over_tagged"] = total["walks_untagged"] / max(total["walks_tagged"], 1)
    rows = []
    for a, c in info["by_asid"].items():
        a = int(a)
        tw = walks["tagged"][walks["tagged"].asid == a]
        uw = walks["untagged"][walks["untagged"].asid == a]
        rows.append({"workload": w, "asid": a, "processes": ", ".join(names.get(a, [])),
                     "user_refs": c["user"], "kernel_refs": c["kernel"],
                     "walks_tagged": int(tw.misses.sum()),
                     "kernel_walks_tagged": int(tw[tw["mode"] == "kernel"].misses.sum()),
                     "walks_untagged": int(uw.misses.sum())})
    return total, rows


def run(d: Path, say: Callable[[str], None]) -> Outcome:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    o = Outcome("linux", RECIPES["linux"][0])
    totals, per_as = [], []
    for w, path in capture(d, say).items():
        t, rows = measure(w, path)
        totals.append(t)
        per_as += rows
        say(f"{w}: {t['references']:,} references simulated")
    df = pd.DataFrame(totals).set_index("workload")
    o.tables["workloads"] = df.reset_index()
    o.tables["per_address_space"] = pd.DataFrame(per_as)
    c, p = df.loc["compress"], df.loc["pipe"]

    def pct(x: float) -> str:
        return f"{100 * x:.0f}%"

    o.checks.append(Check(
        "work that crosses address spaces runs mostly in the kernel",
        "Chen: system references and stalls grow with OS services; Mach 3.0 > Ultrix",
        f"kernel share of references: compress {pct(c.kernel_ref_share)}, "
        f"pipe {pct(p.kernel_ref_share)}",
        bool(p.kernel_ref_share > 0.5 and p.kernel_ref_share > 2 * c.kernel_ref_share)))
    o.checks.append(Check(
        "kernel TLB misses dominate when services talk by IPC",
        "Uhlig: L1K/L2/L3 misses are most of Mach 3.0's TLB time",
        f"kernel share of page walks (tagged): compress {pct(c.kernel_walk_share)}, "
        f"pipe {pct(p.kernel_walk_share)}",
        bool(p.kernel_walk_share > 0.5)))
    o.checks.append(Check(
        "a microkernel-like structure takes more TLB misses per instruction",
        "Uhlig: Mach 3.0's TLB service time is several times Ultrix's",
        f"walks per 1000 instructions: compress {c.walks_per_kinstr:.2f}, "
        f"pipe {p.walks_per_kinstr:.2f}",
        bool(p.walks_per_kinstr > c.walks_per_kinstr)))
    o.checks.append(Check(
        "without address-space tags, switches cost misses in proportion to their rate",
        "Chen ch. 7, Uhlig: flushing at every switch hurts IPC-heavy systems most",
        f"untagged / tagged walks: compress {c.untagged_over_tagged:.2f}× "
        f"({c.switches_per_kinstr:.3f} switches/kinstr), pipe {p.untagged_over_tagged:.2f}× "
        f"({p.switches_per_kinstr:.3f})",
        bool(p.untagged_over_tagged > c.untagged_over_tagged
             and p.switches_per_kinstr > c.switches_per_kinstr)))

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    x = range(len(df))
    user = 1 - df.kernel_ref_share
    axes[0].bar(x, df.kernel_ref_share, label="kernel", color="#b55")
    axes[0].bar(x, user, bottom=df.kernel_ref_share, label="user", color="#58b")
    axes[0].set(xticks=list(x), xticklabels=[f"{w}\n{WORKLOADS[w]}" for w in df.index],
                ylabel="share of references", title="Who makes the references")
    axes[0].legend()
    width = 0.38
    for i, (col, label) in enumerate((("walks_tagged", "tagged (PCID/ASID)"),
                                      ("walks_untagged", "untagged (flush on switch)"))):
        axes[1].bar([k + (i - 0.5) * width for k in x],
                    1000 * df[col] / df.instructions, width, label=label)
    axes[1].set(xticks=list(x), xticklabels=list(df.index), ylabel="page walks per 1000 "
                "instructions", title=f"TLB misses on {MACHINE}")
    axes[1].legend()
    fig.tight_layout()
    o.figures.append(("Kernel share of references, and page walks with and without "
                      "address-space tags", save_figure(fig, d, "linux")))
    return o
