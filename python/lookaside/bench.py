"""``lookaside bench``: what it measures (traces × configurations) and its table.

The engine (``lookaside::bench``) times each configuration on each trace — parse alone,
simulate alone on events in memory, parse + simulate on one thread — by the CPU time of the
measuring thread, ``runs`` times; this module chooses the traces and configurations (the
presets are data files read here and passed in), names the host, and draws the table.

The default traces span what translation studies meet: the hit-dominated demo trace
(0.03 % of its references miss a 64-entry TLB), the miss-heavy synthetic stream
``workload:segments`` (about half miss), and a real whole-system trace (kernel and
processes, with context switches). Speed on one of them predicts nothing about another.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import tempfile
from pathlib import Path
from typing import Any, Callable

from . import _data_dir, _lookaside, demo_trace, preset_path

#: The shipped whole-system trace (see ``lookaside/data/README.md``).
SYSTEM_TRACE = "gzip-system.lks"
#: The miss-heavy synthetic stream (20 M references by default).
SEGMENTS = "workload:segments"
#: Events of each trace (and of the segments stream) under ``--quick``.
QUICK_REFS = 30_000
#: Events a cache, a whole machine or a one-pass engine runs on, at most, per trace: enough
#: for a steady rate, few enough that the default bench ends in a few minutes on two cores
#: (the TLB rows run on every trace whole).
PREFIX = 2_000_000

#: A first-level cache: 32 KiB, 8-way, 64-byte lines, LRU (write-back, write-allocate).
L1 = "size=32k,line=64,ways=8,policy=lru,write=back"
#: DineroIV's untimed cache model (``[[cache]]``, no TLB): one unified cache.
CACHE = [f"l1:{L1},serves=unified"]
#: Split first-level caches and a 1 MiB 16-way second level behind them.
CACHE_TWO_LEVEL = [f"l1i:{L1},serves=instruction,next=l2", f"l1d:{L1},serves=data,next=l2",
                   "l2:size=1m,line=64,ways=16,policy=lru,write=back,serves=unified"]
#: The one cache with its misses classified (compulsory, capacity, conflict).
CACHE_3C = [f"l1:{L1},serves=unified,3c=yes"]


def memory(**caches: dict[str, Any]) -> list[str]:
    """``--set`` overrides giving a timed memory system (``[memory]``, behind a TLB) these
    caches (``dcache={"size": "32KiB", …}``)."""
    return [f"memory.{name}.{key}={value}" for name, fields in caches.items()
            for key, value in fields.items()]


def _timed(miss_cycles: int, **fields: Any) -> dict[str, Any]:
    return {"size": "32KiB", "line": 64, "ways": 8, "policy": "lru", **fields,
            "miss_cycles": miss_cycles}


#: The smallest machine with a data cache in the timed memory system.
DCACHE = memory(dcache=_timed(10, write="back"))
#: Split 32 KiB first-level caches and a 1 MiB second level behind them.
TWO_LEVEL_CACHE = memory(icache=_timed(10), dcache=_timed(10, write="back"),
                         l2=_timed(100, size="1MiB", ways=16, write="back"))

DTLB64 = "dtlb:entries=64,ways=full,policy=lru,page=4k"

#: A 4-level x86-64 radix table behind modern-x86's TLBs, with paging-structure caches.
RADIX = ["pagetable.organisation=radix", "pagetable.levels=4",
         "pagetable.psc=[{level=0,entries=4,ways=4},{level=1,entries=4,ways=4},"
         "{level=2,entries=32,ways=4}]"]


def configurations() -> list[dict[str, Any]]:
    """The rows of the bench: TLBs, caches, whole machines (presets), one-pass engines."""
    def preset(name: str) -> str:
        return preset_path(name).read_text(encoding="utf-8")

    def machine(label: str, tlb: list[str], toml: str | None = None,
                overrides: list[str] = (), max_refs: int | None = None, *,
                cache: list[str] = (), din: bool = False) -> dict[str, Any]:
        return {"label": label, "engine": "machine", "toml": toml, "tlb": tlb,
                "cache": list(cache), "set": list(overrides), "max_refs": max_refs,
                "input": "din" if din else "trace"}

    return [
        machine("TLB 64 FA LRU", [DTLB64]),
        machine("TLB 64 4-way LRU", ["dtlb:entries=64,ways=4,policy=lru,page=4k"]),
        machine("TLB 1024 FA LRU", ["dtlb:entries=1024,ways=full,policy=lru,page=4k"]),
        machine("2-level TLB: 64 4-way + 1024 8-way",
                ["dtlb:entries=64,ways=4,policy=lru,page=4k,next=stlb",
                 "stlb:entries=1024,ways=8,policy=lru,page=4k"]),
        machine("cache 32 KiB 8-way LRU", [], cache=CACHE),
        machine("din text: cache 32 KiB 8-way LRU", [], cache=CACHE, din=True),
        machine("caches 32 KiB I/D + 1 MiB 16-way L2", [], cache=CACHE_TWO_LEVEL),
        machine("3C: cache 32 KiB 8-way LRU", [], cache=CACHE_3C),
        machine("TLB 64 FA + 32 KiB 8-way D-cache", [DTLB64], None, DCACHE, max_refs=PREFIX),
        machine("TLB 64 FA + 32 KiB I/D + 1 MiB L2", [DTLB64], None, TWO_LEVEL_CACHE,
                max_refs=PREFIX),
        machine("MIPS software refill (decstation3100-mach3)", [],
                preset("decstation3100-mach3"), ["refill.fold_user_addresses=true"], PREFIX),
        machine("radix walk + PSCs (modern-x86)", [], preset("modern-x86"), RADIX, PREFIX),
        machine("radix walk + physical caches 32 KiB I/D + 1 MiB L2", [], preset("modern-x86"),
                RADIX, PREFIX, cache=CACHE_TWO_LEVEL),
        machine("hashed walk (pa-risc-hpt)", [], preset("pa-risc-hpt"), max_refs=PREFIX),
        machine("Chen's memory system (decstation5000-200)", [], preset("decstation5000-200"),
                max_refs=PREFIX),
        {"label": "one-pass FA: stack distance, sizes 1-16384", "engine": "stack-distance",
         "max_refs": PREFIX},
        {"label": "one-pass SA: all-associativity, 176 configs", "engine": "all-associativity",
         "max_refs": PREFIX},
    ]


def default_traces(quick: bool) -> list[dict[str, str]]:
    """The demo trace, the segments stream and the shipped whole-system trace."""
    segments = f"{SEGMENTS},refs={QUICK_REFS}" if quick else SEGMENTS
    return [{"label": "demo", "path": str(demo_trace())},
            {"label": "segments", "path": segments},
            {"label": "system", "path": str(_data_dir("data") / SYSTEM_TRACE)}]


def host() -> dict[str, Any]:
    """The machine the bench runs on: CPU model and logical CPUs (``/proc/cpuinfo``), the
    time, and the load average at the start."""
    model, cpus = None, 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "processor":
                    cpus += 1
    except OSError:
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {"cpu": model or platform.processor() or platform.machine(),
            "logical_cpus": cpus or os.cpu_count(),
            "system": f"{platform.system()} {platform.release()}",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load_average": load}


def run(traces: list[str] | None = None, *, runs: int = 5, quick: bool = False,
        max_refs: int | None = None, scale: list[int] = (),
        say: Callable[[str | None], Any] | None = None) -> dict[str, Any]:
    """Measure every configuration on each trace (paths or ``workload:`` specs; default the
    three shipped shapes), on its first ``max_refs`` events at most; returns the engine's
    figures with the host and the plan."""
    if traces:
        chosen = [{"label": _label(t), "path": str(t)} for t in traces]
    else:
        chosen = default_traces(quick)
    confs = configurations()
    if quick:
        for c in confs:
            c["max_refs"] = None
    if quick:
        max_refs = min(max_refs or QUICK_REFS, QUICK_REFS)
    plan = {"traces": chosen, "configurations": confs, "runs": runs, "max_refs": max_refs,
            "scale": list(scale)}
    at = host()
    with tempfile.TemporaryDirectory(prefix="lookaside-bench-") as work:
        r = json.loads(_lookaside.bench(json.dumps(plan), work, say))
    r["host"] = at
    r["quick"] = quick
    return r


def _label(trace: str) -> str:
    if str(trace).startswith("workload:"):
        return str(trace)[len("workload:"):].split(",")[0]
    return Path(trace).name


def _num(x: float) -> str:
    """Three significant figures or so: 326, 52.7, 8.41."""
    return f"{x:.0f}" if x >= 99.5 else f"{x:.1f}" if x >= 9.95 else f"{x:.2f}"


def _cell(c: dict[str, Any]) -> str:
    s = c["events_per_s"]
    mark = " †" if c.get("dropped_share", 0) > 0.01 else ""
    return (f"{_num(s['median'] / 1e6)} ({_num(s['min'] / 1e6)}–{_num(s['max'] / 1e6)})"
            f"{mark}")


def table(r: dict[str, Any]) -> str:
    """The text table of a bench result: rows = configurations, columns = traces, cells =
    median M events/s over the runs with min–max, for simulation alone and for parsing +
    simulation on one thread (after parsing alone)."""
    traces = [t["label"] for t in r["traces"]]
    cells = {(c["mode"], c["configuration"], c["trace"]): c for c in r["cells"]}
    h = r["host"]
    load = " ".join(f"{x:.2f}" for x in h["load_average"]) if h.get("load_average") else "?"
    lines = [f"lookaside bench: M events per CPU second, median (min–max) of {r['runs']} runs "
             f"(CPU time of the measuring thread)",
             f"host: {h['cpu']}, {h['logical_cpus']} logical CPUs, {h['system']}; "
             f"{h['date']}; load average {load} at the start", "", "traces:"]
    tlb64 = "TLB 64 FA LRU"
    for t in r["traces"]:
        c = cells.get(("simulate", tlb64, t["label"]))
        fs = c.get("first_structure") if c else None
        miss = (f"; {100 * fs['misses'] / fs['accesses']:.2f} % of data references miss "
                f"the {tlb64}" if fs and fs["accesses"] else "")
        mb = f", {t['file_bytes'] / 1e6:.2f} MB" if t.get("file_bytes") else ""
        path = t["path"] if t["path"].startswith("workload:") else Path(t["path"]).name
        lines.append(f"  {t['label']:<10} {path}: {t['events']:,} events "
                     f"({t['format']}{mb}){miss}")
    width = max(len(c["label"]) for c in r["configurations"]) + 10
    cw = max(20, *(len(x) + 2 for x in traces))
    prefixes = {}
    for c in r["configurations"]:
        n = c["max_refs"]
        if n is not None and any(n < t["events"] for t in r["traces"]):
            prefixes[c["label"]] = n

    def row(label: str, mode: str) -> str:
        shown = label + (f" [≤{prefixes[label] / 1e6:g}M]" if label in prefixes else "")
        return f"{shown:<{width}}" + "".join(
            f"{_cell(cells[(mode, label, t)]) if (mode, label, t) in cells else '-':>{cw}}"
            for t in traces)

    head = "".join(f"{t:>{cw}}" for t in traces)
    lines += ["", f"{'simulate alone (events in memory)':<{width}}{head}"]
    lines += [row(c["label"], "simulate") for c in r["configurations"]]
    lines += ["", f"{'parse + simulate, one thread':<{width}}{head}"]
    lines.append(row("parse alone (counting)", "parse"))
    lines += [row(c["label"], "parse+simulate") for c in r["configurations"]]
    if prefixes:
        lines += ["", "[≤NM]: the row ran on the first N million events of each trace "
                      "(a shorter trace whole)."]
    for c in r["configurations"]:
        if c.get("input") == "din":
            lines.append(f"The row '{c['label']}' reads a din text copy of each trace's "
                         "references (DineroIV's input: a kind and an address per line, every "
                         "reference 4 bytes), in both modes.")
    dropped = sorted({(c["configuration"], c["trace"], c["dropped_share"]) for c in r["cells"]
                      if c.get("dropped_share", 0) > 0.01 and c["mode"] == "simulate"})
    for conf, trace, share in dropped:
        lines.append(f"† {conf} on {trace}: {100 * share:.1f} % of the translations were not "
                     "simulated (address errors: a 32-bit MIPS maps no address at or above "
                     "4 GB, where an x86-64 kernel lies); the rate counts them.")
    if r.get("scale"):
        lines += ["", f"{'synthetic stream':>16} {'M events/s':>10} {'peak RSS MiB':>13}"]
        for s in r["scale"]:
            rss = s["peak_rss_kib"]
            lines.append(f"{s['references']:>16,} {s['events_per_s'] / 1e6:>10.1f} "
                         f"{(rss or 0) / 1024:>13.1f}")
    return "\n".join(lines) + "\n"
