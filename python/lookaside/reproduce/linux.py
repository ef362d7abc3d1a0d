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

Chen's memory-system assertions, which the synthetic OS model could not settle, are checked
on the same traces with the DECstation 5000/200 caches (``decstation5000-200`` with the
traces' own physical addresses, and without its synthesised MIPS TLB handlers, which do not
apply to an x86 kernel): system references have worse locality than user references, and
user/system competition for the caches is small.

The traces are the stored corpus's cuts (:mod:`lookaside.corpus`; ``--recapture`` captures
them anew, bit for bit the same).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..report import plot_bars, subplots
from . import RECIPES, Check, Outcome, save_figure

#: workload → the structure it stands for.
WORKLOADS = {
    "compress": "one process computing (Ultrix-like)",
    "pipe": "client and server over pipes (microkernel-like)",
}
MACHINE = "modern-x86"
UNTAGGED = [f"tlb.{t}.asid=false" for t in ("itlb", "dtlb", "stlb")]


def decstation(private: str) -> str:
    """The DECstation 5000/200 memory system over a Linux trace: the guest's own frames
    (512 MiB), no synthesised MIPS TLB handlers; caches shared or private per mode."""
    from .. import machine_toml
    from .chen94 import decstation_data

    m = decstation_data(mapping="trace", memory="512MiB", private=private)
    del m["memory"]["handler"]
    return machine_toml(m)


def memory(path: Path | str, machine: Callable[[str], str] | None = None,
           associativity: bool = False) -> dict:
    """Chen's memory-system measurements of one workload on one reading of it. With caches
    shared by both modes: MCPI, S-MCPI, MCPI by component and mode (Fig. 4-1), stall cycles
    per instruction of the same mode (Table 4-2), each mode's share of the misses and the
    system's miss rates (Table 4-1), the TLB handlers' MCPI (Table 4-5), and TLB misses of
    the system (kernel mode, and the user-mode servers of address spaces above 1) and of the
    application (address space 1 in user mode). With caches private per mode: the MCPI
    (competition is the difference, Table 4-4) and each mode's cache stalls per own
    instruction (its locality without the other's evictions). With `associativity`, also the
    fraction of the system-only caches' misses a 2-way LRU cache of the same size removes
    (Fig. 4-6). `machine(private)` gives the machine's text (default: the DECstation 5000/200
    over a Linux trace's own frames)."""
    from ..sweep import run_points

    variants = [[], ['memory.private="mode"']]
    if associativity:
        variants.append(['memory.private="mode"', "memory.icache.ways=2", "memory.dcache.ways=2"])
    shared, private, *two_way = run_points(str(path), (machine or decstation)("none"), "linux",
                                           [], variants)
    m = shared["memory"]
    caches = {c["name"]: c for c in m["caches"]}
    out = {"mcpi_none": m["mcpi"], "mcpi_mode": private["memory"]["mcpi"],
           "s_mcpi": m["s_mcpi"]}
    out.update({f"{c}_{md}": m["by_component"][c][md]
                for c in ("icache", "dcache", "wbuffer") for md in ("system", "user")})
    for md in ("user", "system"):
        a = m[md]
        out[f"instructions_{md}"] = a["instructions"]
        for c in ("icache", "dcache", "wbuffer"):
            out[f"{c}_{md}_per_instruction"] = a["stalls"][c] / max(a["instructions"], 1)
    for c in ("icache", "dcache"):
        stalls = {md: m[md]["stalls"][c] for md in ("user", "system")}
        out[f"{c}_system_share"] = stalls["system"] / max(sum(stalls.values()), 1)
        for md in ("user", "system"):
            out[f"{c}_{md}_misses"] = stalls[md] / caches[c]["miss_cycles"]
    pc = {c["name"]: c for c in private["memory"]["caches"]}
    reads = {md: pc[f"dcache[{md}]"]["reads"] for md in ("user", "kernel")}
    out["dreads_system_share"] = reads["kernel"] / max(sum(reads.values()), 1)
    out["imiss_rate_system"] = out["icache_system_misses"] / max(out["instructions_system"], 1)
    out["dmiss_rate_system"] = out["dcache_system_misses"] / max(reads["kernel"], 1)
    for mode in ("user", "system"):  # each mode's own locality, without the other's evictions
        a = private["memory"][mode]
        cache = a["stalls"]["icache"] + a["stalls"]["dcache"]
        out[f"{mode}_cache_cpi"] = cache / max(a["instructions"], 1)
    handlers = m.get("tlb_handlers", {})
    out["tlb_handler_mcpi"] = (sum(h["mcpi"] for h in handlers.values()) if handlers
                               else float("nan"))
    walks = [r for r in shared["rows"] if r["structure"] == "walk"]
    served = servers(path)
    out["system_tlb_misses"] = sum(r["misses"] for r in walks
                                   if r["mode"] == "kernel" or served(r["asid"]))
    out["application_tlb_misses"] = sum(r["misses"] for r in walks
                                        if r["mode"] == "user" and not served(r["asid"]))
    if two_way:
        tc = {c["name"]: c for c in two_way[0]["memory"]["caches"]}
        for c in ("icache", "dcache"):
            dm, aw = pc[f"{c}[kernel]"]["read_misses"], tc[f"{c}[kernel]"]["read_misses"]
            out[f"{c}_system_removed_by_2way"] = 1 - aw / dm if dm else float("nan")
        dm = sum(pc[f"{c}[kernel]"]["read_misses"] for c in ("icache", "dcache"))
        aw = sum(tc[f"{c}[kernel]"]["read_misses"] for c in ("icache", "dcache"))
        out["system_removed_by_2way"] = 1 - aw / dm if dm else float("nan")
    return out


#: Processes of a whole-system trace that serve the others: the user-level file servers of
#: ``--fs user`` and ``user2``. The thesis counts Mach's UNIX server as system.
SERVERS = ("bindfs",)


def servers(path: Path | str) -> Callable[[int], bool]:
    """Which address spaces of the trace (or ``workload:`` spec) at ``path`` are servers: the
    OS-structure model's above 1 (its application is 1), a whole-system trace's those of
    :data:`SERVERS`."""
    from .. import metadata

    if str(path).startswith("workload:"):
        return lambda asid: asid > 1
    procs = metadata(path).get("processes", [])
    asids = {p["asid"] for p in procs if p["name"] in SERVERS}
    return asids.__contains__


def traces() -> dict[str, Path]:
    """The stored whole-system traces of the workloads (:mod:`lookaside.corpus`)."""
    from .. import corpus

    return {w: corpus.path(w) for w in WORKLOADS}


def memory_checks(df) -> list[Check]:
    """Chen's two memory-system assertions over the rows of :func:`memory` (indexed by
    workload), as checks; ``reproduce chen94`` makes them on these traces too."""
    extra = df.mcpi_none / df.mcpi_mode - 1
    return [
        Check("system references have worse locality than user references",
              "Chen: system cache stalls per instruction above user (S-MCPI > user)",
              ", ".join(f"{w}: {r.system_cache_cpi:.3f} vs {r.user_cache_cpi:.3f}"
                        for w, r in df.iterrows()),
              bool((df.system_cache_cpi > df.user_cache_cpi).all()),
              note="full-system Linux traces; I+D cache stall cycles per instruction of each "
                   "mode, with DECstation 5000/200 caches private per mode (locality without "
                   "the other mode's evictions)"),
        Check("user/system competition for the caches is small",
              "a small share of MCPI (Chen, Table 4-4)",
              ", ".join(f"{w}: {100 * x:+.1f}%" for w, x in extra.items()),
              bool(((extra >= -0.02) & (extra < 0.25)).all()),
              note="full-system Linux traces; MCPI with caches shared, against private caches "
                   "per mode"),
    ]


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
    total.update(memory(path))
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
    import pandas as pd

    o = Outcome("linux", RECIPES["linux"][0])
    totals, per_as = [], []
    for w, path in traces().items():
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

    o.checks += memory_checks(df)

    fig, axes = subplots(2, size=(10, 4))
    bars = df.reset_index()
    bars["user_ref_share"] = 1 - bars.kernel_ref_share
    plot_bars(axes[0], bars, "workload", {"kernel_ref_share": "kernel", "user_ref_share": "user"},
              ylabel="share of references", title="Who makes the references")
    for col in ("walks_tagged", "walks_untagged"):
        bars[f"{col}_pki"] = 1000 * bars[col] / bars.instructions
    plot_bars(axes[1], bars, "workload", {"walks_tagged_pki": "tagged (PCID/ASID)",
                                          "walks_untagged_pki": "untagged (flush on switch)"},
              stacked=False, ylabel="page walks per 1000 instructions",
              title=f"TLB misses on {MACHINE}")
    o.figures.append(("Kernel share of references, and page walks with and without "
                      "address-space tags", save_figure(fig, d, "linux")))
    return o
