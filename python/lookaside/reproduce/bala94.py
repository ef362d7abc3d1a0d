"""Bala, Kaashoek, Weihl 1994: prefetching the receiver's L2 PTEs on the IPC path, and a
software TLB (STLB) of kernel translations in unmapped memory, under Mach 3.0.

Only the paper's abstract is available. Its claims, their criteria and the workloads they run
on are fixed in ``data/claims/bala94.toml``; this recipe only measures, on every workload
that fits, over seeds 1-5, and once each on the stored whole-system Linux traces that fit
(``compile-user``, ``compile-user2``, ``ring``: :mod:`lookaside.corpus`, mapped onto the MIPS
segments), and the claims module judges."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .. import _data_dir, _lookaside, machine_toml
from ..report import plot_lines, subplots
from . import RECIPES, Outcome, parallel, save_figure, watch
from .claims import load, plot_ranges
from .uhlig94 import machine_with, on_linux_traces, on_x86_64, real_traces, ring, traps

SEEDS = range(1, 6)
SERVERS = (2, 3, 4)
PAGES_PER_HOP = (6, 12, 24, 48)
HOPS = 2000
#: The STLB organisations run (the abstract gives none; see the claims file), as the
#: ``[refill]`` keys each adds.
STLBS = {
    "stlb 1024 direct low": {"stlb": {"entries": 1024, "ways": 1, "index": "low"}},
    "stlb 1024 2-way hash": {"stlb": {"entries": 1024, "ways": 2, "index": "hash"}},
}
#: IPC-path prefetching with its defaults (the receiver's 3 most recent L2 PTEs).
PREFETCH = {"prefetch": {}}
#: Mach 3.0 applications: the real program under one server, and under two (AFSout).
APPLICATIONS = {"tar, Mach 3.0": "microkernel", "tar, Mach 3.0 + AFS server": "decomposed"}
#: The stored Linux traces run (the claims file says why), and whether each is a synthetic
#: multi-address-space benchmark.
REAL = {"compile-user": False, "compile-user2": False, "ring": True}
#: The machines of one workload, as the ``[refill]`` keys each adds: none, prefetching, and
#: each STLB alone and with it.
CONFIGS = {"base": {}, "prefetch": PREFETCH,
           **{k: v for stlb, extra in STLBS.items()
              for k, v in ((stlb, extra), (f"{stlb} + prefetch", extra | PREFETCH))}}
#: Which classes to prefetch (see :func:`prefetch_classes`): L2 PTEs, user pages, kernel data.
PREFETCH_CLASSES = {
    "none": {},
    **{name: {"prefetch": {"l2_entries": l2, "l1u_entries": l1u, "l1k_entries": l1k}}
       for name, (l2, l1u, l1k) in (("L2", (3, 0, 0)), ("L2 + L1U", (3, 4, 0)),
                                    ("L2 + L1U + L1K", (3, 4, 4)))},
}


def bala_machine(refill: dict) -> str:
    """The DECstation 3100 under Mach 3.0 (8 lower slots) with the ``[refill]`` keys
    `refill` added (``stlb``, ``prefetch``)."""
    m = machine_with(8)
    m["refill"].update(refill)
    return machine_toml(m)


def kernel(t: dict) -> int:
    """Kernel TLB misses: traps on kernel data and page tables (L1K, L2, L3)."""
    c = t["counts"]
    return c["L1K"] + c["L2"] + c["L3"]


def workloads() -> list[tuple[str, str, int | None, bool]]:
    """(name, workload spec, seed, synthetic) of every generated run."""
    tar = _data_dir("data") / "tarzone.lks"
    out = []
    for seed in SEEDS:
        for name, structure in APPLICATIONS.items():
            out.append((name, f"workload:os,structure={structure},trace={tar},seed={seed}",
                        seed, False))
        for n in SERVERS:
            for p in PAGES_PER_HOP:
                spec = (f"workload:multiserver,servers={n},pages_per_hop={p},hops={HOPS},"
                        f"seed={seed}")
                out.append((f"ring {n} servers, {p} pages/hop", spec, seed, True))
    return out


def run_one(spec: str, seed: int, refill: dict) -> dict:
    return traps(spec, bala_machine(refill), [f"machine.seed={seed}"])


def run_trace(path: str) -> dict[str, dict]:
    """The traps of a stored Linux trace on every machine of :data:`CONFIGS`, mapped onto
    the MIPS segments, on one reading of it (once: the preset's machine seed)."""
    machines = [(on_x86_64(bala_machine(refill)), "decstation3100-mach3", [], [])
                for refill in CONFIGS.values()]
    rs = json.loads(_lookaside.simulate_many(path, machines, None, watch, None))
    return {k: r["traps"] for k, r in zip(CONFIGS, rs)}


def run(d: Path, say: Callable[[str], None]) -> Outcome:
    import pandas as pd

    o = Outcome("bala94", RECIPES["bala94"][0])
    claims = load("bala94")
    o.claims = list(claims.values())
    rows = []
    traces = real_traces(list(REAL), say)
    real = parallel(run_trace, list(traces.values()))
    runs: list[tuple[str, int | None, bool, Callable[[str], dict]]] = [
        (name, seed, synthetic, lambda k, s=spec, sd=seed: run_one(s, sd, CONFIGS[k]))
        for name, spec, seed, synthetic in workloads()]
    runs += [(f"linux {n}", None, REAL[n], got.__getitem__) for n, got in zip(traces, real)]
    for name, seed, synthetic, result in runs:
        base = result("base")
        pre = result("prefetch")
        k0 = kernel(base)
        cut = 1 - kernel(pre) / k0 if k0 else float("nan")
        claims["prefetch-cuts-kernel-misses"].add(name, seed, cut)
        for stlb in STLBS:
            st = result(stlb)
            both = result(f"{stlb} + prefetch")
            k = kernel(st)
            fast = sum(st["stlb"]["hits"].values())
            where = f"{name}; {stlb}"
            claims["stlb-fast-path-share"].add(where, seed, fast / k if k else float("nan"))
            claims["stlb-cuts-kernel-traps"].add(where, seed, 1 - k / k0 if k0 else float("nan"))
            secs = base["seconds"]["total"]
            saved = {"prefetch": secs - pre["seconds"]["total"],
                     "caching": secs - st["seconds"]["total"],
                     "both": secs - both["seconds"]["total"]}
            if synthetic:
                claims["synthetic-prefetch-caching-both"].add(where, seed, saved)
            rows.append({"workload": name, "seed": seed, "stlb": stlb, "kernel_traps": k0,
                         "with_prefetch": kernel(pre), "with_stlb": k,
                         "with_both": kernel(both), "stlb_fast_share": fast / max(k, 1),
                         "seconds": secs, **{f"saved_{k_}": v for k_, v in saved.items()}})
        say(f"{name}, seed {seed}: done" if seed is not None else f"{name}: done")
    df = pd.DataFrame(rows)
    o.tables["bala_runs"] = df
    o.tables["linux_traces"] = on_linux_traces(o.claims)
    o.tables["prefetch_classes"] = prefetch_classes()
    fig, ax = subplots(size=(7, 4))
    plot_ranges(ax, o.claims, "Bala 1994: the abstract's ranges (band) and every run (dots)")
    o.figures.append(("The abstract's ranges beside every run (green: inside; red: a "
                      "workload with a run outside)", save_figure(fig, d, "bala_claims")))
    ring_rows = df[df.workload.str.startswith("ring") & (df.seed == 1)
                   & (df.stlb == next(iter(STLBS)))].copy()
    ring_rows["servers"] = ring_rows.workload.str.extract(r"ring (\d)").astype(int)
    ring_rows["pages"] = ring_rows.workload.str.extract(r"(\d+) pages").astype(int)
    fig, ax = subplots()
    plot_lines(ax, ring_rows, "servers", {"kernel_traps": "base", "with_prefetch": "prefetch",
                                          "with_stlb": "STLB"}, "pages",
               label="{} pages/hop", xlabel="servers on the ring",
               ylabel="kernel TLB traps (L1K + L2 + L3)",
               title="Bala 1994 on the token ring (seed 1)")
    o.figures.append(("Kernel traps with prefetching and the STLB on the ring",
                      save_figure(fig, d, "bala")))
    return o


def prefetch_classes():
    """Which classes to prefetch (no published numbers; exploration, not a claim): the
    receiver's L2 PTEs, then also its user pages and the kernel data it missed on; what each
    saves and what it pollutes, on the 3-server ring at the recipe's 24 pages per hop."""
    import pandas as pd

    rows = []
    w = ring(3, seed=7)
    for name, refill in PREFETCH_CLASSES.items():
        t = traps(w, bala_machine(refill))
        pf = t.get("prefetch", {})
        rows.append({"prefetched": name, "L1U": t["counts"]["L1U"], "kernel_traps": kernel(t),
                     "probes": pf.get("probes", 0), "inserted": pf.get("inserted", 0),
                     "evicted": pf.get("evicted", 0), "seconds": t["seconds"]["total"]})
    return pd.DataFrame(rows)

