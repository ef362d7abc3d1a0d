"""Result.frames(): every section of the result JSON as tidy DataFrames, nothing left out."""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

import pandas as pd
import pytest

import lookaside

#: Where a walk's own names went in the structures frame (its row is named "walk").
WALK_ALIASES = {"count": {"accesses", "misses"}, "per_1000_instructions": {"mpki"}}


def leaves(v: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """Every numeric leaf of a JSON value, with its path (list items by position)."""
    if isinstance(v, dict):
        return [x for k, y in v.items() for x in leaves(y, (*path, k))]
    if isinstance(v, list):
        return [x for i, y in enumerate(v) for x in leaves(y, (*path, i))]
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return [(path, v)]
    return []


def _cells(df: pd.DataFrame) -> list[Any]:
    out: list[Any] = []
    for col in df.columns:
        for v in df[col].tolist():
            out += v if isinstance(v, list) else [v]
    return out


def _parts(text: str) -> set[str]:
    return {text, *text.split("."), *re.split(r"[._]", text)}


def covers(name: str, df: pd.DataFrame) -> tuple[set[float], set[str]]:
    """The numbers a frame holds, and the names it uses (frame name, columns, text cells)."""
    cells = _cells(df)
    nums = {float(v) for v in cells
            if isinstance(v, numbers.Real) and not isinstance(v, bool) and not pd.isna(v)}
    names = _parts(name)
    for t in [*map(str, df.columns), *(v for v in cells if isinstance(v, str))]:
        names |= _parts(t)
    return nums, names


CASES = [(p, None) for p in lookaside.preset_names()] + [
    # Software refill and a VAC whose workload has phases: sections the demo trace leaves empty.
    ("decstation3100-ultrix", "workload:multiserver,servers=2,hops=200"),
    ("hp9000-834", "workload:ipc,design=move,size=8k"),
]


@pytest.fixture(scope="module")
def results(demo) -> dict[tuple[str, str | None], lookaside.Result]:
    return {}


def _result(results, demo, preset, trace) -> lookaside.Result:
    if (preset, trace) not in results:
        # A MIPS refill machine refuses the 64-bit demo trace unless its user addresses are
        # folded into kuseg.
        mips = "[refill]" in lookaside.preset_path(preset).read_text(encoding="utf-8")
        fold = ["refill.fold_user_addresses=true"] if mips and trace is None else []
        results[(preset, trace)] = lookaside.simulate(trace or demo, preset, fold)
    return results[(preset, trace)]


@pytest.mark.parametrize("preset, trace", CASES)
def test_every_number_of_the_json_is_in_a_frame_of_its_section(results, demo, preset, trace):
    every_number_in_a_frame(_result(results, demo, preset, trace), preset)


#: A hierarchy of caches beside a TLB: every field of a cache.
CACHES = ["il1:size=32k,line=64,ways=8,next=l2", "dl1:size=32k,line=64,ways=8,next=l2,3c=yes",
          "l2:size=1M,line=64,ways=16"]


def test_every_number_of_a_cache_hierarchy_is_in_a_frame(demo):
    r = lookaside.simulate(demo, None, tlb=["dtlb:entries=64,3c=yes"], cache=CACHES)
    every_number_in_a_frame(r, "caches")
    f = r.frames()
    s = f["structures"].set_index("structure")
    assert s.loc["l2", "writebacks"] == r["l2"]["writebacks"]
    assert s.loc["dl1", "prefetches.accesses"] == 0
    assert s.loc["l2", "size"] == 1 << 20 and s.loc["dl1", "level"] == 1
    # The classes of misses, per structure and per cell.
    assert s.loc["dtlb", "compulsory"] == r["dtlb"]["compulsory"] > 0
    d = r["dl1"]
    assert d["compulsory"] + d["capacity"] + d["conflict"] == d["misses"]
    b = f["breakdown"].set_index(["structure", "by", "value"])
    assert b.loc[("dl1", "kind", "store"), "conflict"] == d["by_kind"]["store"]["conflict"]
    rows = f["tlb"]
    assert rows[rows.structure == "dtlb"].compulsory.sum() == r["dtlb"]["compulsory"]


def test_every_number_of_a_machine_of_several_cpus_is_in_a_frame(demo):
    r = lookaside.simulate(demo, "modern-x86", ["machine.cpus=2", "tlb.stlb.shared=true"])
    every_number_in_a_frame(r, "cpus")
    c = r.frames()["cpus"].set_index("cpu")
    assert c.loc[0, "references"] == r.data["cpus"]["per_cpu"][0]["references"] > 0
    assert c.loc[1, "structures.dtlb.misses"] == 0
    assert c.loc[0, "structures.dtlb.misses"] == r["dtlb"]["misses"]


def every_number_in_a_frame(r: lookaside.Result, label: str) -> None:
    frames = r.frames()
    assert list(frames)[:3] == ["tlb", "structures", "breakdown"]
    for key, value in r.data.items():
        if key in ("schema", "lookaside_version"):
            continue
        mine = {n: covers(n, df) for n, df in frames.items()
                if key in df.attrs["sections"]}
        assert mine, f"no frame shows the section '{key}'"
        for path, v in leaves(value, (key,)):
            name = next(p for p in reversed(path) if isinstance(p, str))
            want = WALK_ALIASES.get(name, set()) | {name} if key == "walk" else {name}
            hits = [n for n, (nums, names) in mine.items()
                    if (float(v) in nums or (isinstance(v, float) and math.isnan(v)))
                    and want & names]
            assert hits, f"{label}: {'.'.join(map(str, path))} = {v} is in no frame"


def test_frames_hold_the_values_of_their_json(results, demo):
    # TLBs, breakdowns and the default frame.
    r = _result(results, demo, "modern-x86", None)
    f = r.frames()
    pd.testing.assert_frame_equal(r.to_pandas(), f["tlb"])
    pd.testing.assert_frame_equal(r.to_pandas("tlb"), f["tlb"])
    s = f["structures"].set_index("structure")
    assert s.loc["dtlb", "misses"] == r["dtlb"]["misses"]
    assert s.loc["stlb", "entries"] == 1536 and s.loc["stlb", "page"] == "4K"
    assert s.loc["walk", "misses"] == r["walk"]["count"]
    assert s.loc["walk", "mpki"] == r["walk"]["per_1000_instructions"]
    b = f["breakdown"].set_index(["structure", "by", "value"])
    assert b.loc[("stlb", "kind", "load"), "hits"] == r["stlb"]["by_kind"]["load"]["hits"]
    cfg = f["config"].set_index("key")["value"]
    assert cfg["tlb.dtlb.entries"] == 64 and cfg["tlb.stlb.ways"] == 12
    assert f["trace"].loc[0, "by_kind.store"] == r.data["trace"]["by_kind"]["store"]

    # Caches and MCPI by mode and component.
    m = _result(results, demo, "decstation5000-200", None)
    f, mem = m.frames(), m.data["memory"]
    mcpi = f["mcpi"].set_index(["mode", "component"])
    assert mcpi.loc[("user", "wbuffer"), "mcpi"] == mem["by_component"]["wbuffer"]["user"]
    assert mcpi.loc[("system", "dcache"), "stall_cycles"] == mem["system"]["stalls"]["dcache"]
    caches = f["caches"].set_index("name")
    assert caches.loc["dcache", "write_misses"] == mem["caches"][1]["write_misses"]
    assert f["tlb_handlers"].set_index("handler").loc["utlb", "misses"] == \
        mem["tlb_handlers"]["utlb"]["misses"]
    assert f["memory_summary"].loc[0, "mcpi"] == mem["mcpi"]

    # Traps by type and depth.
    t = _result(results, demo, "decstation3100-ultrix", "workload:multiserver,servers=2,hops=200")
    f, traps = t.frames(), t.data["traps"]
    by_type = f["traps"].set_index("type")
    assert by_type.loc["L2", "count"] == traps["counts"]["L2"] > 0
    assert by_type.loc["total", "cycles"] == traps["cycles"]["total"]
    assert by_type.loc["L1K", "fills"] == traps["handler"]["fills"]["L1K"]
    depth = f["traps_by_depth"].set_index(["depth", "type"])["count"]
    assert depth[(1, "L2")] == traps["by_depth"][1]["L2"]
    assert f["traps_summary"].loc[0, "model.costs"] == traps["model"]["costs"]

    # Page-table walks by level and chain length.
    p = _result(results, demo, "pa-risc-hpt", None)
    f, pt = p.frames(), p.data["pagetable"]
    assert f["walk_levels"].to_dict("records") == pt["levels"]
    assert f["chain_histogram"].walks.tolist() == pt["chain"]["histogram"]
    assert f["pagetable_summary"].loc[0, "cycles.total"] == pt["cycles"]["total"]

    # VAC phases.
    v = _result(results, demo, "hp9000-834", "workload:ipc,design=move,size=8k")
    f, vac = v.frames(), v.data["vac"]
    phases = f["vac_phases"].set_index("phase")
    assert list(phases.index) == [ph["phase"] for ph in vac["phases"]]
    send = next(ph for ph in vac["phases"] if ph["phase"] == "send")
    assert phases.loc["send", "us"] == send["us"]
    assert phases.loc["send", "primitives.flushed.dirty"] == send["primitives"]["flushed"]["dirty"]
    assert f["vac_summary"].loc[0, "lines.misses"] == vac["lines"]["misses"]


def test_a_new_section_is_a_frame_and_a_missing_one_is_an_error(results, demo):
    r = _result(results, demo, "modern-x86", None)
    data = {**r.data, "energy": {"picojoules": 12.5, "by": {"tlb": 3}}}
    f = lookaside.Result(data).frames()
    assert f["energy"].loc[0, "by.tlb"] == 3 and f["energy"].attrs["sections"] == ["energy"]
    with pytest.raises(lookaside.LookasideError, match="no 'traps'.*have: tlb, structures"):
        r.to_pandas("traps")
