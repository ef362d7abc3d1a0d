"""Huck & Hays 1993, audited (claims, criteria and workloads fixed in
``data/claims/huck93.toml``): inverted, hashed, forward-mapped and hybrid page tables behind
a 96-entry fully associative TLB, refilled by hardware or software, every table reference
through a 256 KB direct-mapped data cache (30 cycles a miss), on a 32 MB machine.

The paper's traces (HP-UX and MPE/iX, OLTP and telecom) are not available; the multi-user
workload ``workload:multiuser`` stands in for them: time-sliced users of one program sharing
its text and a buffer pool, in global addresses (HP-UX) or rewritten at each context switch
into per-process aliases (the aliased sharing model, ASM), at 4 and 12 users and 64 and 256
bytes a run, and one user alone, seeds 1-5; the claims about single processes on the HP-UX
configurations also run on the four real programs shipped (once each: nothing in them is
random). The storage and chain
length of the tables built are mechanisms, the paper's own arithmetic transcriptions; the rest
are predictions.

The stored whole-system Linux traces of OLTP (:mod:`lookaside.corpus`: ``oltp-1``,
``oltp-4``, ``oltp-12``, a TPC-B-like sqlite3 workload with 1, 4 and 12 client processes) run
too, once each, on the HP-UX configurations: 4 and 12 clients take the multi-user claims, 1
client those of a single process (the mapping is in the claims file). Each trace is read as it
is, every address space and the kernel, in global addresses: the upper 32 bits of an x86-64
address are its space id. So the kernel's pages (direct map, text, vmalloc) are one set
shared by every address space, one TLB entry and one table entry each, as HP-UX's global
kernel space is; a process's user pages lie at its own addresses (Linux places each exec'd
process's mappings at random, so processes rarely share a user address: a page a forked
child still shares with its parent is one page, the few private pages of two processes at one
address would be one too). Every page is a 4 KiB page (the tables hold no other size; Linux
maps its direct map with large pages). The traces carry physical addresses, so a kernel alias
of a user page (the direct map) is a page of its own that shares the user page's frame. The
ASM configurations are not run on them: their 2-level table maps 32-bit spaces.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .. import LookasideError, corpus, machine_toml
from ..report import plot_bars, plot_lines, subplots
from ..sweep import run_point
from . import RECIPES, Outcome, parallel, save_figure, watch
from .claims import load, plot_ranges

#: The multi-user workload (12 users, 70% of data runs on shared memory) and one user alone.
MULTI = "workload:multiuser,span=256"
SINGLE = "workload:multiuser,users=1"
MEMORY_MB = 32
FRAMES = MEMORY_MB * 256

#: Basic cycles of the hardware FMPT walker swept against the hybrid (the preset: 9).
WALKER_CYCLES = (6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36)

TLB = {"name": "tlb", "entries": 96, "ways": "full", "policy": "lru"}

#: The paper's configurations: label → (table type, hardware support, total entries,
#: [pagetable] keys, global addresses).
CONFIGS: dict[str, tuple[str, str, str, dict, bool]] = {
    "UX-SW-IPT4x-1w": ("IPT", "All SW", "32K",
                       {"organisation": "inverted", "refill": "software", "ratio": 4}, True),
    "UX-SW-HPT4x-1w": ("HPT", "All SW", "32K",
                       {"organisation": "hashed", "refill": "software", "ratio": 4}, True),
    "UX-HW-HPT4x-1w": ("HPT", "HW-HPT, SW-overflow", "32K",
                       {"organisation": "hashed", "ratio": 4}, True),
    "UX-HW-HPT2x-2w": ("HPT", "HW-HPT, SW-overflow", "32K",
                       {"organisation": "hashed", "ratio": 2, "ways": 2}, True),
    "ASM-HW-HPT2x-1w": ("FMPT", "HW-HPT, SW-FMPT", "16K",
                        {"organisation": "hybrid", "entries": 16384}, False),
    "ASM-HW-HPT1x-1w": ("FMPT", "HW-HPT, SW-FMPT", "8K",
                        {"organisation": "hybrid", "entries": 8192}, False),
    "ASM-HW-HPT.5x-1w": ("FMPT", "HW-HPT, SW-FMPT", "4K",
                         {"organisation": "hybrid", "entries": 4096}, False),
    "ASM-HW-HPT.25x-1w": ("FMPT", "HW-HPT, SW-FMPT", "2K",
                          {"organisation": "hybrid", "entries": 2048}, False),
    "ASM-SW-FMPT": ("FMPT", "All SW, no HPT", "—",
                    {"organisation": "radix", "refill": "software"}, False),
    "ASM-HW-FMPT": ("FMPT", "All HW, no HPT", "—", {"organisation": "radix"}, False),
    # MPE/iX ran on a 64 MB machine (16K frames): 2 × 16K = 32K entries.
    "iX-SW-IPT2x-1w": ("IPT", "All SW", "32K",
                       {"organisation": "inverted", "refill": "software", "ratio": 2}, True),
    "iX-HW-HPT2x-1w": ("HPT", "HW-HPT, SW overflow", "32K",
                       {"organisation": "hashed", "ratio": 2}, True),
    "iX-SW-HPT2x-1w": ("HPT", "All SW", "32K",
                       {"organisation": "hashed", "refill": "software", "ratio": 2}, True),
}


#: Memory systems whose data cache the walker's table references (and the program's loads and
#: stores) go through instead of the private model: the paper's cache in a memory system, and
#: the DECstation 5000/200's data cache (Chen 1994: 64 KB direct-mapped, 4-byte lines fetching
#: 16 bytes, write-through, 15 cycles a miss).
MEMORY_SYSTEMS = {
    "memory system, 256 KB D-cache": {
        "memory": "32MiB", "dcache": {"size": "256KiB", "line": 32, "miss_cycles": 30}},
    "memory system, DECstation 5000/200 D-cache": {
        "memory": "32MiB", "dcache": {"size": "64KiB", "line": 4, "fetch": 16,
                                      "write": "through", "miss_cycles": 15}},
}


def machine(pagetable: dict, global_addresses: bool, extra: dict | None = None,
            memory_mb: int = MEMORY_MB, *, preload: float = 0.5, data_refs: bool = True,
            memory: dict | None = None) -> str:
    """The PA-RISC machine with this [pagetable] (its keys, and `extra` ones, as data; common
    keys added; `data_refs`: the program's loads and stores reach the walker's data cache, as
    they must be left out with a `memory` system, whose D-cache they reach anyway)."""
    pt = {**pagetable, **(extra or {}), "memory": f"{memory_mb}M"}
    m: dict = {"tlb": [dict(TLB)], "pagetable": pt}
    if data_refs:
        pt["data_refs"] = True
    if global_addresses:
        m["machine"] = {"global_above": 0}
        # HP-UX's memory is full of other processes' pages: the hashed and inverted tables
        # hold them too (the per-process tables of the ASM do not).
        pt.update(addresses="global", preload=preload)
    if memory is not None:
        m["memory"] = memory
    return machine_toml(m)


def simulate(workload: str, text: str) -> dict:
    return run_point(workload, text, "huck93", [], [], progress=watch)


def per_process(workload: str) -> str:
    return workload + ("," if "," in workload else ",") + "addresses=per-process"


def row(label: str, workload: str, extra: dict | None = None) -> dict:
    kind, hw, entries, pt, glob = CONFIGS[label]
    mb = 64 if label.startswith("iX") else MEMORY_MB
    r = simulate(workload if glob else per_process(workload), machine(pt, glob, extra, mb))
    p = r["pagetable"]
    cpm = p["cycles_per_miss"]
    out = {"config": label, "type": kind, "hw_support": hw, "entries": entries,
           "references": r["trace"]["references"], "walks": p["walks"],
           "tlb_miss_rate": p["walks"] / r["trace"]["references"],
           "basic": cpm["basic"], "cache_penalty": cpm["cache_penalty"], "total": cpm["total"],
           "chain_mean": p["chain"]["mean"], "head_hit_rate": p["head_hit_rate"],
           "table_bytes": p["table"]["bytes"], "table_of_memory": p["table"]["of_memory"],
           "data_miss_rate": p["data"]["miss_rate"],
           # Pages mapped (one table entry each) and the frames they take.
           "pages_mapped": p["faults"], "frames": p["frames_allocated"]}
    for lv in p["levels"]:
        out[f"miss_{lv['name']}"] = lv["miss_rate"]
    return out


SEEDS = range(1, 6)
#: The multi-user family (users, bytes a run touches) and the single-process spans.
MULTI_FAMILY = [(users, span) for users in (4, 12) for span in (64, 256)]
SINGLE_SPANS = (64, 256)
#: Configurations the single-process claims need.
SINGLE_CONFIGS = ("UX-HW-HPT4x-1w", "UX-SW-HPT4x-1w", "UX-HW-HPT2x-2w", "UX-SW-IPT4x-1w",
                  "ASM-HW-HPT1x-1w", "ASM-HW-HPT2x-1w", "ASM-HW-FMPT")
#: The real programs shipped, one process each, and the configurations they fit: the HP-UX
#: ones in global addresses (the ASM's 2-level table maps 32-bit spaces; their pages lie
#: above 4 GB).
PROGRAMS = ("demo", "mawk", "sortprog", "tarzone")
PROGRAM_CONFIGS = ("UX-HW-HPT4x-1w", "UX-SW-HPT4x-1w", "UX-HW-HPT2x-2w", "UX-SW-IPT4x-1w")


#: The stored OLTP traces (whole systems: TPC-B-like sqlite3 with 1, 4 and 12 client
#: processes) and the kind of run each is: one client takes the single-process claims the
#: programs take, 4 and 12 clients the multi-user ones, on the HP-UX configurations only.
OLTP_SINGLE, OLTP_MULTI = "oltp, one client", "oltp, clients"
OLTP = {"oltp-1": OLTP_SINGLE, "oltp-4": OLTP_MULTI, "oltp-12": OLTP_MULTI}
#: The 64 MB configurations of MPE/iX's order (a multi-user claim).
IX_CONFIGS = ("iX-HW-HPT2x-1w", "iX-SW-HPT2x-1w", "iX-SW-IPT2x-1w")


#: The hybrid's HPT-cache sizes (entries per physical page) and their configurations.
HPT_CACHES = {"0.25x": "ASM-HW-HPT.25x-1w", "0.5x": "ASM-HW-HPT.5x-1w", "1x": "ASM-HW-HPT1x-1w",
              "2x": "ASM-HW-HPT2x-1w"}


def workloads() -> list[tuple[str, str, int | None, str]]:
    """(name, spec, seed, kind) of every run: kind is "multi-user", "single process" or
    "program" (a real program shipped)."""
    from .. import _data_dir

    out = []
    for seed in SEEDS:
        for users, span in MULTI_FAMILY:
            out.append((f"{users} users, {span} B runs",
                        f"workload:multiuser,users={users},span={span},seed={seed}", seed,
                        "multi-user"))
        for span in SINGLE_SPANS:
            out.append((f"1 user, {span} B runs",
                        f"workload:multiuser,users=1,span={span},seed={seed}", seed,
                        "single process"))
    # Nothing in a program's run is random (its space ids are its own address bits, the
    # preloaded pages and the LRU TLB are deterministic): one run each, seed none.
    for name in PROGRAMS:
        out.append((name, str(_data_dir("data") / f"{name}.lks"), None, "program"))
    return out


def oltp_workloads(say: Callable[[str], None]) -> list[tuple[str, str, None, str]]:
    """(name, path, seed, kind) of each stored OLTP trace there is (a deterministic capture:
    one run, seed none); a trace not stored is said and left out."""
    out = []
    for name, kind in OLTP.items():
        try:
            out.append((name, str(corpus.path(name)), None, kind))
        except LookasideError as e:
            say(f"{name}: not run: {e}")
    return out


def measure(spec: str, kind: str) -> dict[str, dict]:
    """The rows of every configuration a workload's claims need, by label."""
    if kind in ("program", OLTP_SINGLE):
        return {label: row(label, spec) for label in PROGRAM_CONFIGS}
    if kind == OLTP_MULTI:
        return {label: row(label, spec) for label in PROGRAM_CONFIGS + IX_CONFIGS}
    return {label: row(label, spec)
            for label in (CONFIGS if kind == "multi-user" else SINGLE_CONFIGS)}


def judge(claims: dict, name: str, seed: int | None, kind: str,
          rows: dict[str, dict]) -> None:
    """Add one workload's results to every claim that runs on it."""

    def tot(c: str) -> float:
        return rows[c]["total"]

    def add(cid: str, value) -> None:
        claims[cid].add(name, seed, value)

    add("hardware-hpt-half-basic",
        rows["UX-HW-HPT4x-1w"]["basic"] / rows["UX-SW-HPT4x-1w"]["basic"])
    add("dynamic-chain-lengths", rows["UX-SW-HPT4x-1w"]["chain_mean"])
    add("two-way-slightly-worse", tot("UX-HW-HPT2x-2w") / tot("UX-HW-HPT4x-1w"))
    add("hpt-saves-6-basic-cycles",
        rows["UX-SW-IPT4x-1w"]["basic"] - rows["UX-SW-HPT4x-1w"]["basic"])
    add("two-way-higher-hit-rate", {"1-way": rows["UX-HW-HPT4x-1w"]["head_hit_rate"],
                                    "2-way": rows["UX-HW-HPT2x-2w"]["head_hit_rate"]})
    if kind in ("program", OLTP_SINGLE):
        return
    if kind == OLTP_MULTI:
        hpux_multi_user(claims, name, seed, rows)
        return
    add("larger-table-higher-head-hit", {"1x": rows["ASM-HW-HPT1x-1w"]["head_hit_rate"],
                                         "2x": rows["ASM-HW-HPT2x-1w"]["head_hit_rate"]})
    aliasing = rows["ASM-HW-HPT1x-1w"]["tlb_miss_rate"] / rows["UX-HW-HPT4x-1w"]["tlb_miss_rate"]
    if kind == "single process":
        add("numeric-fmpt-root-miss-0-3", rows["ASM-HW-FMPT"]["miss_root"])
        add("numeric-fmpt-leaf-miss-up-to-25", rows["ASM-HW-FMPT"]["miss_leaf"])
        add("finite-ipt-56-cycles", tot("UX-SW-IPT4x-1w"))
        add("hybrid-3-cycles-better-finite", tot("ASM-HW-FMPT") - tot("ASM-HW-HPT1x-1w"))
        add("hybrid-equals-or-beats-walker", tot("ASM-HW-HPT1x-1w") / tot("ASM-HW-FMPT"))
        add("front-bucket-82-doduc", rows["ASM-HW-HPT1x-1w"]["head_hit_rate"])
        add("single-process-unaffected-by-aliasing", aliasing - 1)
        return
    hpux_multi_user(claims, name, seed, rows)
    add("fmpt-root-miss-2-3", rows["ASM-HW-FMPT"]["miss_root"])
    add("fmpt-leaf-miss-12-15", rows["ASM-HW-FMPT"]["miss_leaf"])
    add("hybrid-equals-or-beats-walker", tot("ASM-HW-HPT2x-1w") / tot("ASM-HW-FMPT"))
    add("asm-hpt-almost-as-good",
        rows["ASM-HW-HPT1x-1w"]["head_hit_rate"] / rows["UX-HW-HPT4x-1w"]["head_hit_rate"])
    add("multi-user-needs-large-caches",
        {x: rows[c]["head_hit_rate"] for x, c in HPT_CACHES.items()})
    add("aliasing-raises-miss-rate", aliasing - 1)


def hpux_multi_user(claims: dict, name: str, seed: int | None, rows: dict[str, dict]) -> None:
    """The multi-user claims on the HP-UX configurations (global addresses): all that the
    OLTP traces with several clients take."""

    def tot(c: str) -> float:
        return rows[c]["total"]

    claims["hpt-beats-ipt-hardware-beats-both"].add(
        name, seed, {c: tot(c) for c in ("UX-HW-HPT4x-1w", "UX-SW-HPT4x-1w", "UX-SW-IPT4x-1w")})
    claims["mpe-order"].add(name, seed, {c: tot(c) for c in IX_CONFIGS})
    claims["head-bucket-cache-miss-20"].add(name, seed, rows["UX-HW-HPT4x-1w"]["miss_head"])
    for c in ("UX-SW-IPT4x-1w", "UX-SW-HPT4x-1w"):
        claims["cache-penalty-share-20-35"].add(f"{name}; {c}", seed,
                                                rows[c]["cache_penalty"] / tot(c))


def transcriptions(claims: dict) -> None:
    """The paper's own arithmetic on table storage and depth (Sections 2.1 and 2.3)."""
    kb = 1024
    for case, ours, text in (("best case, 4 B / 4 KB", 4 / (4 * kb), 0.001),
                             ("worst case, 4 KB / 4 KB", 1.0, 1.0)):
        claims["fmpt-best-and-worst-storage"].add(case, None, abs(ours / text - 1))
    claims["fmpt-typical-process-4-percent"].add("3 x 4 KB / 272 KB", None,
                                                 3 * 4 * kb / (272 * kb))
    claims["fmpt-64-bit-5-levels"].add("52 bits / 9 bits a level", None, (64 - 12) / 9)
    claims["ipt-io-hole-200k"].add("50 MB / 4 KB x 16 B, in KB", None,
                                   50 * kb * kb // (4 * kb) * 16 / kb)


def structures(claims: dict) -> tuple:
    """Storage of the tables built for 32 MB, and chain length on uniform keys."""
    import pandas as pd

    storage = []
    for cid, label, pt in [
        ("ipt-storage", "IPT: 16K-entry HAT + 8K-entry IPT",
         {"organisation": "inverted", "refill": "software", "ratio": 2}),
        ("hpt-storage-2x", "HPT 2× (16K 16-byte entries)",
         {"organisation": "hashed", "ratio": 2}),
        ("hpt-storage-4x", "HPT 4× (32K 16-byte entries)",
         {"organisation": "hashed", "ratio": 4}),
    ]:
        p = simulate(SINGLE + ",slices=20", machine(pt, True))["pagetable"]
        claims[cid].add(label, None, p["table"]["of_memory"])
        storage.append({"table": label, "bytes": p["table"]["bytes"],
                        "percent": 100 * p["table"]["of_memory"]})
    chains = []
    for ratio in (4, 2, 1, 0.5, 0.25):
        pt = {"organisation": "hashed", "refill": "software", "ratio": ratio,
              "chaining": "overflow"}
        text = machine(pt, True, preload=0)
        p = simulate("workload:uniform,pages=8192,rounds=3", text)["pagetable"]
        chains.append({"entries_per_page": ratio, "alpha": 1 / ratio, "formula": 1 + 0.5 / ratio,
                       "measured": p["chain"]["mean"]})
        if ratio == 2:
            claims["chain-length-2-to-1"].add("uniform keys, 2x", None, p["chain"]["mean"])
    return pd.DataFrame(storage), pd.DataFrame(chains)


def oltp_table(oltp: list[tuple], measured: list[dict[str, dict]]):
    """One row per OLTP trace and configuration: its client count, cycles per miss (basic,
    cache penalty, total), TLB miss rate, head-bucket hits and the head bucket's data-cache
    misses, chains, the program's own data-cache misses (its loads and stores share the
    cache), and the pages the tables map in the frames they take."""
    import pandas as pd

    out = []
    for (name, *_), rows in zip(oltp, measured):
        for label, r in rows.items():
            out.append({"trace": name, "clients": int(name.rsplit("-", 1)[1]), "config": label,
                        **{k: r.get(k) for k in (
                            "references", "walks", "tlb_miss_rate", "basic", "cache_penalty",
                            "total", "head_hit_rate", "miss_head", "chain_mean",
                            "data_miss_rate", "pages_mapped", "frames")}})
    return pd.DataFrame(out)


def oltp_figure(df):
    """Cycles per TLB miss of each configuration, a bar per client count."""
    wide = df.pivot(index="config", columns="clients", values="total")
    wide = wide.reindex([c for c in CONFIGS if c in wide.index]).reset_index()
    fig, ax = subplots(size=(8, 4))
    plot_bars(ax, wide, "config",
              {n: f"{n} client{'s' if n > 1 else ''}" for n in sorted(df.clients.unique())},
              stacked=False, rotate=30, ylabel="cycles per TLB miss",
              title="OLTP whole-system traces: cycles per miss (basic + cache penalty)")
    return fig


def oltp_verdicts(claims: dict, names: list[str]) -> list[str]:
    """Each claim's results on the OLTP traces, one line a claim: value (or ordering) per
    trace and whether it holds."""
    from dataclasses import replace

    lines = []
    for c in claims.values():
        rs = [r for r in c.results if r.workload.split(";")[0] in names]
        if not rs:
            continue
        vals = ", ".join(
            f"{r.workload} " + (" < ".join(sorted(r.value, key=r.value.get))
                                if isinstance(r.value, dict) else f"{r.value:.3g}")
            for r in rs)
        lines.append(f"OLTP traces, {c.id}: {replace(c, results=rs).summary()}: {vals}")
    return lines


def run(d: Path, say: Callable[[str], None]) -> Outcome:
    import numpy as np
    import pandas as pd

    o = Outcome("huck93", RECIPES["huck93"][0])
    claims = load("huck93")
    o.claims = list(claims.values())
    transcriptions(claims)
    o.tables["storage"], ch = structures(claims)
    o.tables["chain_length_uniform"] = ch
    say("storage and chain lengths: done")
    # The OLTP traces first: the longest jobs, so that neither worker idles at the end.
    oltp = oltp_workloads(say)
    jobs = oltp + workloads()
    measured = parallel(lambda j: measure(j[1], j[3]), jobs)
    for (name, _, seed, kind), rows in zip(jobs, measured):
        judge(claims, name, seed, kind, rows)
    say("configurations on every workload: done")
    if oltp:
        o.tables["oltp"] = oltp_table(oltp, measured[:len(oltp)])
        o.figures.append(("Cycles per TLB miss on the OLTP traces, by client count",
                          save_figure(oltp_figure(o.tables["oltp"]), d, "oltp")))
        for line in oltp_verdicts(claims, [name for name, *_ in oltp]):
            say(line)
    # The tables and plots below show seed 1 of the 12-user, 256-byte workload and of the
    # single process at 256 bytes (the recipe's earlier settings), beside the claims.
    first = {(name, seed): rows for (name, _, seed, _), rows in zip(jobs, measured)}
    df = pd.DataFrame(list(first[("12 users, 256 B runs", 1)].values()))
    o.tables["configurations"] = df
    by = df.set_index("config")
    heads = [float(by.loc[c, "head_hit_rate"]) for c in HPT_CACHES.values()]
    # The hybrid against a hardware FMPT walker (Graph 5). The walker's basic cost (hw_fmpt,
    # 9 cycles) is an assumption, not the paper's: sweep it, and find the walker cost at
    # which the hybrid equals it (seed 1; an exploration beside the claims).
    sweep = []
    for name, w in (("single process", SINGLE), ("multi-user (12 users)", MULTI)):
        for hw in WALKER_CYCLES:
            radix = {"organisation": "radix", "cycles": {"hw_fmpt": hw}}
            p = simulate(per_process(w), machine(radix, False))["pagetable"]
            sweep.append({"workload": name, "hw_fmpt": hw, **{
                k: p["cycles_per_miss"][k] for k in ("basic", "cache_penalty", "total")}})
    sw = pd.DataFrame(sweep)
    o.tables["walker_cost_sweep"] = sw
    def break_even(workload: str, hybrid_total: float) -> float:
        """The walker basic cost at which the walker's total equals `hybrid_total`."""
        g = sw[sw.workload == workload].sort_values("hw_fmpt")
        return float(np.interp(hybrid_total, g.total, g.hw_fmpt, left=np.nan, right=np.nan))

    versus = []
    for name, w, sizes in (("single process", SINGLE, (1,)),
                           ("multi-user (12 users)", MULTI, (2, 4, 8, 16))):
        walker = sw[(sw.workload == name) & (sw.hw_fmpt == 9)].iloc[0]
        for x in sizes:
            hybrid = {"organisation": "hybrid", "entries": x * FRAMES}
            p = simulate(per_process(w), machine(hybrid, False))["pagetable"]
            c = p["cycles_per_miss"]
            versus.append({"workload": name, "hpt_cache": f"{x}×", "entries": x * FRAMES,
                           "head_hit_rate": p["head_hit_rate"],
                           "hpt_line_miss_rate": p["levels"][0]["miss_rate"],
                           "hybrid_basic": c["basic"], "hybrid_penalty": c["cache_penalty"],
                           "hybrid_total": c["total"], "walker_penalty": walker.cache_penalty,
                           "walker_total": walker.total,
                           "break_even_hw_fmpt": break_even(name, c["total"])})
    vs = pd.DataFrame(versus)
    o.tables["hybrid_vs_walker"] = vs
    # Deeper forward-mapped tables (2, 3, 4 levels, 4-byte PTEs): no published numbers.
    deep = []
    for bits in ([10, 10], [7, 7, 6], [5, 5, 5, 5]):
        for label in ("ASM-HW-HPT2x-1w", "ASM-HW-FMPT"):
            r = row(label, MULTI, {"bits": bits, "entry_bytes": 4})
            deep.append({"config": label, "levels": len(bits), "basic": r["basic"],
                         "cache_penalty": r["cache_penalty"], "total": r["total"]})
    o.tables["deeper_fmpt"] = pd.DataFrame(deep)
    # The same walks with the table references in a memory system's data cache.
    through = []
    for label in ("UX-SW-IPT4x-1w", "UX-HW-HPT4x-1w", "ASM-HW-FMPT"):
        pt, glob = CONFIGS[label][3], CONFIGS[label][4]
        w = MULTI if glob else per_process(MULTI)
        for name, mem in MEMORY_SYSTEMS.items():
            text = machine(pt, glob, data_refs=False, memory=mem)
            cpm = simulate(w, text)["pagetable"]["cycles_per_miss"]
            through.append({"config": label, "data_cache": name, "basic": cpm["basic"],
                            "cache_penalty": cpm["cache_penalty"], "total": cpm["total"]})
    o.tables["memory_system"] = pd.DataFrame(through)
    say("explorations: done")
    # Aliasing (Graph 6), seed 1: the native HPT in global addresses against the ASM's
    # hybrid over per-process aliases, rows the claims already measured.
    alias = []
    for name, w in (("multi-user (12 users)", "12 users, 256 B runs"),
                    ("single process", "1 user, 256 B runs")):
        g, a = first[(w, 1)]["UX-HW-HPT4x-1w"], first[(w, 1)]["ASM-HW-HPT1x-1w"]
        alias.append({"workload": name, "global": g["tlb_miss_rate"], "asm": a["tlb_miss_rate"],
                      "pages_global": g["pages_mapped"], "pages_asm": a["pages_mapped"],
                      "frames_global": g["frames"], "frames_asm": a["frames"],
                      "data_miss_global": g["data_miss_rate"],
                      "data_miss_asm": a["data_miss_rate"]})
    al = pd.DataFrame(alias)
    al["increase"] = al.asm / al["global"] - 1
    o.tables["aliasing"] = al
    fig, ax = subplots(size=(9, 4))
    plot_ranges(ax, [c for c in o.claims if c.kind == "prediction"],
                "Huck & Hays 1993: the paper's values (band) and every run (dots)")
    o.figures.append(("Each numeric claim: the paper's value or range beside every run",
                      save_figure(fig, d, "huck_claims")))
    # Figures: cycles per miss (Graph 4), head-bucket hit rate (Graph 7), chains, aliasing.
    fig, ax = subplots(size=(9, 4))
    plot_bars(ax, df, "config", {"basic": "basic", "cache_penalty": "data-cache penalty"},
              rotate=60, ylabel="cycles per TLB miss",
              title="Cycles per miss by configuration (cf. Graph 4)")
    o.figures.append(("Cycles per TLB miss, basic and cache penalty",
                      save_figure(fig, d, "cycles")))
    fig, ax = subplots(size=(5.5, 4))
    plot_lines(ax, pd.DataFrame({"size": [0.25, 0.5, 1, 2], "head": heads}), "size",
               {"head": "ASM hybrid HPT cache"},
               hlines={"UX native HPT 4×": float(by.loc["UX-HW-HPT4x-1w", "head_hit_rate"])},
               xlog=True, xlabel="HPT-cache entries per physical page",
               ylabel="head-bucket hit rate", title="Head-bucket hits (cf. Graph 7)")
    o.figures.append(("Head-bucket hit rate against HPT size", save_figure(fig, d, "head")))
    fig, ax = subplots(size=(5.5, 4))
    plot_lines(ax, ch, "alpha", {"measured": "uniform keys"}, published="formula",
               published_label="1 + α/2", xlabel="α = pages per HPT entry",
               ylabel="mean chain length", title="HPT chain length")
    o.figures.append(("Mean chain length against the load factor", save_figure(fig, d, "chains")))
    fig, ax = subplots(size=(5.5, 4))
    plot_bars(ax, al, "workload", {"global": "global addresses",
                                   "asm": "per-process aliases (ASM)"},
              stacked=False, scale=100, ylabel="TLB miss rate (%)",
              title="Aliasing and TLB misses (cf. Graph 6)")
    o.figures.append(("TLB miss rate under global addresses and aliases",
                      save_figure(fig, d, "aliasing")))
    fig, ax = subplots(size=(6, 4))
    plot_lines(ax, sw, "hw_fmpt", "total", by="workload",
               label="hardware FMPT walker, {}",
               hlines={f"hybrid {r.hpt_cache}, {r.workload}": float(r.hybrid_total)
                       for r in vs.itertuples() if r.hpt_cache in ("1×", "2×", "16×")},
               xlabel="walker basic cycles (hw_fmpt; the preset: 9)",
               ylabel="cycles per TLB miss", title="Hybrid against the walker's cost (cf. Graph 5)")
    o.figures.append(("Hardware FMPT walker against its basic cost, and the hybrid",
                      save_figure(fig, d, "walker_cost")))
    return o
