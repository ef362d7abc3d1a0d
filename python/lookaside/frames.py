"""A result as tidy pandas DataFrames, one per section (see :meth:`lookaside.Result.frames`).

Each section of the result JSON gets the frames that suit its shape: tables with one row per
thing (structure, trap type, cache, walk level, VAC phase, …) and, for what is left over, one
row that flattens the section's remaining scalars into dotted columns (``cycles.total``). The
leftovers are taken generically, so a key added to the engine's JSON shows up in a frame
without a change here; a new top-level section becomes a one-row frame of its own name.
Every frame lists the JSON sections it shows in ``df.attrs["sections"]``.
"""

from __future__ import annotations

from typing import Any, Callable

#: Top-level keys that are not results (the schema name and the engine's version).
_META = ("schema", "lookaside_version")


def _flatten(v: Any, prefix: str = "") -> dict[str, Any]:
    """Scalars of a nested dict as {dotted path: value}; a list of tables is keyed by each
    table's ``name`` where it has one (``tlb.dtlb.entries``, as ``--set`` names it), else by
    its position; a list of scalars stays one value."""
    if isinstance(v, dict):
        out: dict[str, Any] = {}
        for k, x in v.items():
            out.update(_flatten(x, f"{prefix}{k}."))
        return out
    if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
        out = {}
        for i, x in enumerate(v):
            name = x.get("name", i) if isinstance(x.get("name", i), (str, int)) else i
            out.update(_flatten({k: y for k, y in x.items() if k != "name"}
                                if "name" in x else x, f"{prefix}{name}."))
        return out
    return {prefix.rstrip("."): v}


def _frame(rows: Any, section: str | list[str], columns: list[str] | None = None) -> Any:
    import pandas as pd

    df = pd.DataFrame(rows, columns=columns)
    # Counts stay integers where some rows lack them (pandas would make them floats).
    for c in df.columns:
        if df[c].dtype.kind == "f" and df[c].isna().any():
            given = [r.get(c) for r in rows if isinstance(r, dict) and r.get(c) is not None]
            if given and all(isinstance(v, int) and not isinstance(v, bool) for v in given):
                df[c] = df[c].astype("Int64")
    df.attrs["sections"] = [section] if isinstance(section, str) else section
    return df


def _one_row(d: dict[str, Any], section: str, leave: tuple[str, ...] = ()) -> Any:
    """One row of every scalar of `d` but the keys in `leave` (shown by other frames)."""
    return _frame([_flatten({k: v for k, v in d.items() if k not in leave})], section)


def _ratio(misses: Any, accesses: Any) -> Any:
    return (misses / accesses).where(accesses > 0)


def tlb_rows(r: dict[str, Any]) -> Any:
    """One row per (structure, asid, mode, kind) cell: accesses, hits, misses, miss_ratio
    (and the classes of misses, when some structure classifies them)."""
    cols = ["structure", "asid", "mode", "kind", "accesses", "hits", "misses"]
    cols += [c for c in ("compulsory", "capacity", "conflict") if r["rows"] and c in r["rows"][0]]
    df = _frame(r["rows"], "rows", cols)
    df["miss_ratio"] = _ratio(df["misses"], df["accesses"])
    return df


def _tlb(r: dict[str, Any]) -> dict[str, Any]:
    df = tlb_rows(r)
    summary, breakdown = [], []
    parts = dict(r["structures"])
    walk = r["walk"]
    parts["walk"] = {"accesses": walk["count"], "hits": 0, "misses": walk["count"],
                     "mpki": walk.get("per_1000_instructions"),
                     **{k: v for k, v in walk.items()
                        if k not in ("count", "per_1000_instructions")}}
    breakdown_columns = ["structure", "by", "value", "accesses", "hits", "misses", "miss_ratio"]
    for name, s in parts.items():
        row: dict[str, Any] = {"structure": name}
        row.update({k: v for k, v in s.items() if not isinstance(v, dict)})
        for k, v in s.get("geometry", {}).items():
            row[k] = "+".join(v) if isinstance(v, list) else v
        # A cache's other sections (prefetches, block misses) as dotted columns.
        row.update(_flatten({k: v for k, v in s.items() if isinstance(v, dict)
                             and k != "geometry" and not k.startswith("by_")}))
        summary.append(row)
        for by in ("kind", "mode", "asid"):
            for value, c in s.get(f"by_{by}", {}).items():
                breakdown.append({"structure": name, "by": by, "value": value, **c})
                # The classes of misses, when a structure classifies them.
                breakdown_columns += [k for k in c if k not in breakdown_columns]
    structures = _frame(summary, ["structures", "walk"])
    bd = _frame(breakdown, ["structures", "walk"], breakdown_columns)
    return {"tlb": df, "structures": structures, "breakdown": bd}


def _traps(t: dict[str, Any]) -> dict[str, Any]:
    """Traps by type (one row per type: count, nested, cycles per trap, cycles, seconds, PTE
    fills and evictions), by nesting depth, and the rest (model, handler totals, …)."""
    per_type = {"count": ("counts",), "nested": ("nested",),
                "cycles_per_trap": ("cycles_per_trap",), "cycles": ("cycles",),
                "seconds": ("seconds",), "fills": ("handler", "fills"),
                "evicted": ("handler", "evicted")}
    types: dict[str, dict[str, Any]] = {}
    for col, path in per_type.items():
        d: Any = t
        for p in path:
            d = d.get(p, {}) if isinstance(d, dict) else {}
        for typ, v in d.items():
            types.setdefault(typ, {"type": typ})[col] = v
    by_type = _frame(list(types.values()), "traps", ["type", *per_type])
    depth = _frame([{"depth": i, "type": typ, "count": n}
                    for i, d in enumerate(t.get("by_depth", [])) for typ, n in d.items()],
                   "traps", ["depth", "type", "count"])
    handler = {k: v for k, v in t.get("handler", {}).items() if k not in ("fills", "evicted")}
    rest = {**{k: v for k, v in t.items() if k not in
               ("counts", "nested", "cycles_per_trap", "cycles", "seconds", "by_depth",
                "handler")}, "handler": handler}
    return {"traps": by_type, "traps_by_depth": depth,
            "traps_summary": _one_row(rest, "traps")}


_COMPONENT_TOTAL = "all"


def _memory(m: dict[str, Any]) -> dict[str, Any]:
    """MCPI by mode and component, per mode and per address space, the caches, the TLB
    handlers' share, and the rest (totals, write buffer, page mapping)."""
    modes = [k for k in ("user", "system", "idle") if isinstance(m.get(k), dict)]
    mcpi = []
    for mode in modes:
        s = m[mode]
        for comp, cycles in s.get("stalls", {}).items():
            mcpi.append({"mode": mode, "component": comp, "stall_cycles": cycles,
                         "mcpi": m.get("by_component", {}).get(comp, {}).get(mode)})
    for comp, by_mode in m.get("by_component", {}).items():  # modes without stalls given
        for mode, v in by_mode.items():
            if mode not in modes:
                mcpi.append({"mode": mode, "component": comp, "stall_cycles": None, "mcpi": v})

    def per(scope: dict[str, Any], key: str) -> list[dict[str, Any]]:
        return [{key: name, "instructions": s.get("instructions"),
                 "stall_cycles": s.get("stall_cycles"),
                 "cycles_per_instruction": s.get("cycles_per_instruction"),
                 **{f"stalls_{c}": n for c, n in s.get("stalls", {}).items()}}
                for name, s in scope.items()]

    out = {
        "mcpi": _frame(mcpi, "memory", ["mode", "component", "stall_cycles", "mcpi"]),
        "memory_by_mode": _frame(per({k: m[k] for k in modes}, "mode"), "memory"),
        "memory_by_asid": _frame(per(m.get("by_address_space", {}), "asid"), "memory"),
        "caches": _frame(m.get("caches", []), "memory"),
        "tlb_handlers": _frame([{"handler": k, **v} for k, v in
                                m.get("tlb_handlers", {}).items()], "memory"),
    }
    out["memory_summary"] = _one_row(m, "memory", (*modes, "by_component", "by_address_space",
                                                    "caches", "tlb_handlers"))
    return out


def _pagetable(p: dict[str, Any]) -> dict[str, Any]:
    """Walk references by level of the table, walks by chain length, and the rest."""
    chain = p.get("chain", {})
    hist = _frame([{"entries_examined": i, "walks": n}
                   for i, n in enumerate(chain.get("histogram", []))],
                  "pagetable", ["entries_examined", "walks"])
    rest = {k: v for k, v in p.items() if k not in ("levels", "chain")}
    rest["chain"] = {k: v for k, v in chain.items() if k != "histogram"}
    return {"walk_levels": _frame(p.get("levels", []), "pagetable"), "chain_histogram": hist,
            "pagetable_summary": _one_row(rest, "pagetable")}


def _vac(v: dict[str, Any]) -> dict[str, Any]:
    """The cost of each phase of the VM workload (its primitives as columns), and the rest."""
    phases = _frame([{"phase": ph.get("phase"), **_flatten({k: x for k, x in ph.items()
                                                              if k != "phase"})}
                     for ph in v.get("phases", [])], "vac")
    if phases.empty:
        phases = _frame([], "vac", ["phase", "count", "us"])
    return {"vac_phases": phases, "vac_summary": _one_row(v, "vac", ("phases",))}


def _cpus(c: dict[str, Any]) -> dict[str, Any]:
    """One row per CPU of a machine of several (its structures' counts as dotted columns,
    ``structures.dtlb.misses``), and the rest."""
    per = [{"cpu": p.get("cpu"), **_flatten({k: x for k, x in p.items() if k != "cpu"})}
           for p in c.get("per_cpu", [])]
    return {"cpus": _frame(per, "cpus"), "cpus_summary": _one_row(c, "cpus", ("per_cpu",))}


#: The frames of each section (in this order); one-row frames for the others.
_SECTIONS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "trace": lambda t: {"trace": _one_row(t, "trace")},
    "machine": lambda m: {"config": _frame(
        [{"key": k, "value": v} for k, v in _flatten(m.get("config", {})).items()],
        "machine", ["key", "value"]),
        "machine": _one_row(m, "machine", ("config",))},
    "traps": _traps,
    "memory": _memory,
    "pagetable": _pagetable,
    "vac": _vac,
    "cpus": _cpus,
}


def frames(result: dict[str, Any]) -> dict[str, Any]:
    """Every section of `result` (the engine's JSON) as tidy DataFrames, by name."""
    out = _tlb(result)
    for key, value in result.items():
        if key in _META or key in ("structures", "walk", "rows"):
            continue
        if key in _SECTIONS:
            out.update(_SECTIONS[key](value))
        elif isinstance(value, dict):
            out[key] = _one_row(value, key)
        else:
            out[key] = _frame([{key: value}], key)
    return out
