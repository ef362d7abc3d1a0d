"""TLB shootdowns as CPUs grow: how often a real Linux kernel makes them, and what they cost
the TLBs, on whole systems captured with several CPUs (``lookaside trace --system --cpus N``).

The papers studied one CPU; this study goes past them. Each workload runs on 1, 2, 4 and 8
CPUs: ``shootdown``, a threaded program whose main thread unmaps memory its workers (one
per other CPU) have just stored into (the case a shootdown exists for), and ``oltp-N``, N
sqlite3 clients for N CPUs (a multi-process server: each client its own address space).
Each capture runs on ``modern-x86`` with one TLB tree per CPU (``machine.cpus``), entries
tagged by address space (PCIDs) and untagged (flushed at every switch). The tables give,
per workload and CPU count: shootdowns (page invalidations the kernel sent to other CPUs)
and the invalidations other CPUs received (one per page and CPU reached) per million
instructions, the requests (one round of interrupts each, however many pages) and the
interrupts (IPIs) they took per million instructions, the entries they removed, the misses
they caused (a miss on an entry a shootdown removed) and those misses' share of all TLB
misses.

What this study does not say: the time shootdowns take. It counts what a cost table prices
(``machine.shootdown_cycles``: per request sent, per IPI sent and received, per page
invalidated on a receiver), but ships no table, since no source this project can cite gives
one: cycles per instruction = (send × requests + (per_target + receive) × IPIs + page ×
received) per instruction, for the user's own figures. Nor whether the
numbers repeat — a capture of several CPUs is not repeatable (QEMU's instruction counting
cannot boot it, see ``docs/capture.md``), so the tables are one run's, and a rerun gives
others of the same shape. There is no paper to compare with: the recipe makes no checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..report import plot_lines, subplots
from . import RECIPES, Outcome, save_figure

#: workload (its name for ``--workload``, ``{n}`` the CPU count) → what it stands for.
WORKLOADS = {
    "shootdown": "threads unmapping memory other CPUs use",
    "oltp-{n}": "N sqlite3 clients (a process each)",
}
CPUS = (1, 2, 4, 8)
MACHINE = "modern-x86"
UNTAGGED = [f"tlb.{t}.asid=false" for t in ("itlb", "dtlb", "stlb")]
#: Table column → the per-CPU count of the result's `cpus` section it sums (tagged TLBs).
TOTALS = {"shootdowns": "shootdowns_sent", "shootdowns_received": "shootdowns_received",
          "entries_invalidated": "entries_invalidated", "requests": "requests_sent",
          "ipis": "ipis_sent"}
#: Table column → the total it gives per million instructions.
RATES = {"shootdowns_per_minstr": "shootdowns", "received_per_minstr": "shootdowns_received",
         "requests_per_minstr": "requests", "ipis_per_minstr": "ipis"}


def capture(workload: str, cpus: int, d: Path) -> Path:
    """A capture of `workload` on `cpus` CPUs into `d` (kept: the tables come from it)."""
    from ..system import record_system

    name = workload.format(n=cpus)
    path = d / "traces" / f"{name}-cpus{cpus}.lks"
    path.parent.mkdir(parents=True, exist_ok=True)
    record_system(name, path, cpus=cpus, quiet=True)
    return path


def measure(path: Path, cpus: int) -> dict:
    """The shootdown figures of one capture on the machine of `cpus` CPUs, with TLB entries
    tagged by address space and untagged. A miss is one structure's (an L1 miss that the
    STLB serves counts once, one that walks twice); a shootdown is one page (or one whole
    flush) sent to other CPUs."""
    import lookaside

    info = lookaside.info(path)
    row = {"references": info["references"], "instructions": info["instructions"]}
    for tag, extra in (("tagged", []), ("untagged", UNTAGGED)):
        r = lookaside.simulate(path, MACHINE, [f"machine.cpus={cpus}", *extra]).data
        per = r.get("cpus", {}).get("per_cpu", [])
        row[f"misses_{tag}"] = sum(s["misses"] for s in r["structures"].values())
        row[f"walks_{tag}"] = r["walk"]["count"]
        row[f"shootdown_misses_{tag}"] = sum(c["shootdown_misses"] for c in per)
        if tag == "tagged":
            row.update({col: sum(c[key] for c in per) for col, key in TOTALS.items()})
    for col, count in RATES.items():
        row[col] = 1e6 * row[count] / row["instructions"]
    for tag in ("tagged", "untagged"):
        row[f"shootdown_miss_share_{tag}"] = (row[f"shootdown_misses_{tag}"]
                                              / max(row[f"misses_{tag}"], 1))
        row[f"walks_per_kinstr_{tag}"] = 1000 * row[f"walks_{tag}"] / row["instructions"]
    return row


def run(d: Path, say: Callable[[str], None], cpus: Sequence[int] = CPUS,
        workloads: Sequence[str] = tuple(WORKLOADS)) -> Outcome:
    import pandas as pd

    o = Outcome("shootdown", RECIPES["shootdown"][0])
    rows = []
    for w in workloads:
        for n in cpus:
            path = capture(w, n, d)
            row = {"workload": w.format(n="N"), "stands_for": WORKLOADS[w], "cpus": n,
                   **measure(path, n)}
            rows.append(row)
            say(f"{w.format(n=n)} on {n} CPU{'s' * (n > 1)}: {row['references']:,} "
                f"references, {row['shootdowns']:,} shootdowns")
    df = pd.DataFrame(rows)
    o.tables["shootdowns"] = df
    # One CPU sends none: the plots start at two, on log scales (the workloads differ by
    # three orders of magnitude).
    several = df[df.cpus > 1]
    fig, axes = subplots(3, size=(15, 4))
    plot_lines(axes[0], several, "cpus", {"shootdowns_per_minstr": "sent",
                                          "received_per_minstr": "received"},
               by="workload", xlabel="CPUs", ylabel="per million instructions", xlog=2,
               ylog=10, title="Page shootdowns sent and received")
    plot_lines(axes[1], several, "cpus", {"requests_per_minstr": "requests",
                                          "ipis_per_minstr": "IPIs"},
               by="workload", xlabel="CPUs", ylabel="per million instructions", xlog=2,
               ylog=10, title="Shootdown requests and their interrupts")
    plot_lines(axes[2], several, "cpus", {"shootdown_miss_share_tagged": "tagged (PCID)",
                                          "shootdown_miss_share_untagged": "untagged"},
               by="workload", xlabel="CPUs", ylabel="share of TLB misses", xlog=2, ylog=10,
               title=f"Misses shootdowns cause on {MACHINE}")
    o.figures.append(("Page shootdowns sent and received, requests and IPIs per million "
                      "instructions, and the share of TLB misses they cause, as CPUs grow "
                      "(none with one CPU; one capture each: not repeatable)",
                      save_figure(fig, d, "shootdown")))
    return o
