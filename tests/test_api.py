"""The Python API: results, DataFrames, overrides, determinism, format equivalence."""

from __future__ import annotations

import json

import pytest

import lookaside


def test_simulate_demo_on_default_preset(demo):
    r = lookaside.simulate(demo)
    assert r.data["schema"] == "lookaside/result-v1"
    assert set(r.structures) == {"itlb", "dtlb", "stlb"}
    refs = r.data["trace"]["by_kind"]
    # Every fetch enters the itlb and every load/store the dtlb, once per page touched.
    straddles = r.data["trace"]["straddles"]
    assert r["itlb"]["accesses"] + r["dtlb"]["accesses"] == sum(refs.values()) + straddles
    # The stlb sees exactly the first-level misses; walks are exactly the stlb misses.
    assert r["stlb"]["accesses"] == r["itlb"]["misses"] + r["dtlb"]["misses"]
    assert r["walk"]["count"] == r["stlb"]["misses"]
    assert 0 < r["dtlb"]["misses"] < r["dtlb"]["accesses"]


def test_to_pandas_rows_add_up_to_the_structure_totals(demo):
    r = lookaside.simulate(demo)
    df = r.to_pandas()
    assert list(df.columns[:7]) == ["structure", "asid", "mode", "kind", "accesses", "hits",
                                    "misses"]
    sums = df.groupby("structure")[["accesses", "misses"]].sum()
    for name, s in r.structures.items():
        assert sums.loc[name, "accesses"] == s["accesses"]
        assert sums.loc[name, "misses"] == s["misses"]
    assert sums.loc["walk", "misses"] == r["walk"]["count"]
    assert (df["hits"] == df["accesses"] - df["misses"]).all()


def test_results_are_deterministic(demo):
    a = lookaside.simulate(demo, tlb=["dtlb:entries=32,ways=full,policy=random"])
    b = lookaside.simulate(demo, tlb=["dtlb:entries=32,ways=full,policy=random"])
    assert a.to_json() == b.to_json()
    c = lookaside.simulate(demo, tlb=["dtlb:entries=32,ways=full,policy=random"],
                           machine__seed=99)
    assert c["dtlb"]["accesses"] == a["dtlb"]["accesses"]


def test_a_preset_named_with_flags_is_kept(demo):
    # Flags alone make a machine of their own; a preset named beside them gains them.
    flags = lookaside.simulate(demo, cache=["l1d:size=32k,line=64,ways=8"])
    assert set(flags.structures) == {"l1d"}
    named = lookaside.simulate(demo, "modern-x86", cache=["l1d:size=32k,line=64,ways=8"])
    assert set(named.structures) == {"itlb", "dtlb", "stlb", "l1d"}
    named = lookaside.simulate(demo, "modern-x86", tlb=["u:entries=8,serves=instruction,next=itlb"])
    assert {"itlb", "u"} <= set(named.structures)


def test_caches_behind_a_page_table_are_physical(demo):
    # The walker's table reads reach the caches in kernel mode (the demo is user-only).
    r = lookaside.simulate(demo, "modern-x86", cache=["l1d:size=32k,line=64,ways=8"],
                           pagetable__organisation="radix", pagetable__levels=4)
    assert r.data["pagetable"]["cache"] == "caches"
    kernel = r["l1d"]["by_mode"]["kernel"]["accesses"]
    assert kernel == sum(level["refs"] for level in r.data["pagetable"]["levels"]) > 0


def test_overrides_three_ways(demo):
    base = lookaside.simulate(demo, "modern-x86")
    a = lookaside.simulate(demo, "modern-x86", {"tlb.dtlb.entries": 16, "tlb.dtlb.ways": 2})
    b = lookaside.simulate(demo, "modern-x86", ["tlb.dtlb.entries=16", "tlb.dtlb.ways=2"])
    c = lookaside.simulate(demo, "modern-x86", tlb__dtlb__entries=16, tlb__dtlb__ways=2)
    assert a.to_json() == b.to_json() == c.to_json()
    assert a["dtlb"]["geometry"]["entries"] == 16
    assert a["dtlb"]["misses"] > base["dtlb"]["misses"]


def test_mechanisms_combine_with_any_hierarchy():
    # Bala's prefetch on a walked two-level hierarchy whose TLBs are flushed at each switch:
    # entries go back in, so the second level misses less; and a micro-TLB for fetches in
    # front of the MIPS refill TLB, whose refills are priced and whose traps are unchanged.
    small = ["tlb.stlb.entries=64", "tlb.stlb.ways=4"] + [
        f"tlb.{t}.asid=false" for t in ("itlb", "dtlb", "stlb")]
    base = lookaside.simulate("workload:os", "modern-x86", small)
    pre = lookaside.simulate("workload:os", "modern-x86",
                             small + ["prefetch.user_entries=8", "prefetch.kernel_entries=8"])
    assert "prefetch" not in base.data
    assert 0 < pre.data["prefetch"]["inserted"] <= pre.data["prefetch"]["probes"]
    assert pre["stlb"]["misses"] < base["stlb"]["misses"]
    assert pre.frames()["prefetch"]["probes"][0] == pre.data["prefetch"]["probes"]
    mips = lookaside.simulate("workload:os", "decstation3100-mach3")
    micro = lookaside.simulate("workload:os", "decstation3100-mach3",
                               tlb=["utlb:entries=2,ways=full,serves=instruction,next=tlb"])
    assert micro.data["traps"]["counts"] == mips.data["traps"]["counts"]
    assert 0 < micro["utlb"]["misses"] < micro["utlb"]["accesses"]
    assert micro.data["traps"]["cycles"]["micro"] == 3 * micro.data["traps"]["micro"]["refills"]
    with pytest.raises(lookaside.ConfigError, match="prefetch: with \\[refill\\]"):
        lookaside.simulate("workload:os", "decstation3100-mach3", ["prefetch.user_entries=1"])


def test_a_machine_is_data(demo):
    # A preset as data, changed as data, back to TOML: the same machine as by --set.
    m = lookaside.machine_data("modern-x86")
    stlb = next(t for t in m["tlb"] if t["name"] == "stlb")
    stlb.update(placement="kernel-lower", partition={"lower": 4, "dynamic": {"period": 500}})
    sets = ["tlb.stlb.placement=kernel-lower", "tlb.stlb.partition.lower=4",
            "tlb.stlb.partition.dynamic.period=500"]
    a = lookaside.simulate("workload:os", m)
    b = lookaside.simulate("workload:os", "modern-x86", sets)
    assert a.data["structures"] == b.data["structures"]
    d = a.data["structures"]["stlb"]["dynamic"]
    assert d["cost"] == "misses" and d["decisions"] >= 1
    assert a.frames()["structures"].set_index("structure").loc["stlb", "dynamic.final_lower"] \
        == d["final_lower"]
    # The round trip of a whole preset, through data and through text, is the preset.
    hpt = lookaside.machine_data("pa-risc-hpt")
    assert lookaside.machine_data(hpt) == hpt
    assert "[pagetable]" in lookaside.machine_toml(hpt)
    stlb["bogus"] = 1
    with pytest.raises(lookaside.ConfigError, match="unknown field `bogus`"):
        lookaside.machine_toml(m)


def test_bigger_fully_associative_lru_never_misses_more(demo):
    # LRU is a stack algorithm: misses can only fall as a fully associative TLB grows.
    misses = [lookaside.simulate(demo, tlb=[f"dtlb:entries={n},ways=full,policy=lru"])["dtlb"]
              ["misses"] for n in (4, 8, 16, 32, 64, 128)]
    assert misses == sorted(misses, reverse=True)
    assert misses[0] > misses[-1]


@pytest.mark.parametrize("fmt,ext", [("din", "din"), ("lackey", "lackey"),
                                      ("native", "lks"), ("xdin", "xdin.gz")])
def test_same_trace_in_every_format_gives_identical_counts(lackey_trace, tmp_path, fmt, ext):
    flags = ["dtlb:entries=64,ways=4,policy=lru,serves=data",
             "itlb:entries=32,ways=full,policy=fifo,serves=instruction"]
    # din carries no access sizes (every access is taken as 4 bytes), so it can only agree
    # when accesses that straddle pages are translated once, at their first byte.
    over = {"machine.straddle": "first"} if fmt == "din" else {}
    ref = lookaside.simulate(lackey_trace, None, over, tlb=flags)
    out = tmp_path / f"t.{ext}"
    n = lookaside.convert(lackey_trace, out)
    assert n > 0
    assert lookaside.info(out)["format"] == fmt
    r = lookaside.simulate(out, None, over, tlb=flags)
    for s in ("dtlb", "itlb"):
        assert r[s]["accesses"] == ref[s]["accesses"], s
        assert r[s]["misses"] == ref[s]["misses"], s


def test_info_summarises(lackey_trace):
    s = lookaside.info(lackey_trace)
    text = json.dumps(s)
    assert "fetch" in text and "load" in text
    # A trace without CPU markers is one CPU's, CPU 0.
    assert list(s["by_cpu"]) == ["0"]
    assert s["by_cpu"]["0"]["user"] + s["by_cpu"]["0"]["kernel"] == s["references"]


def test_every_preset_validates():
    names = lookaside.preset_names()
    assert {"modern-x86", "decstation3100-mach3"} <= set(names)
    for n in names:
        toml = lookaside.check_config(n)
        assert "[[tlb]]" in toml


def test_errors_are_typed(demo, tmp_path):
    with pytest.raises(lookaside.TraceError, match="nope.din"):
        lookaside.simulate(tmp_path / "nope.din")
    with pytest.raises(lookaside.ConfigError, match=r"tlb\.dtlb\.ways"):
        lookaside.simulate(demo, tlb=["dtlb:entries=64,ways=3"])
    with pytest.raises(lookaside.ConfigError, match="no preset named"):
        lookaside.simulate(demo, "no-such-machine")
    bad = tmp_path / "bad.din"
    bad.write_text("0 1000\n1 2000\nxyz\n")
    with pytest.raises(lookaside.TraceError, match="line 3"):
        lookaside.simulate(bad, None, tlb=["dtlb:entries=4"])


def test_every_shipped_machine_validates_against_the_exported_schema(cli):
    """The JSON Schema comes from the engine's own types: every preset and a machine made
    from flags, as the engine normalises them, validate; a closed choice outside its names
    and a key the engine does not know are refused, as the engine refuses them."""
    import jsonschema
    import tomllib

    schema = lookaside.config_schema()
    assert json.loads(cli("config", "--schema").stdout) == schema
    jsonschema.Draft202012Validator.check_schema(schema)
    machines = [lookaside.check_config(name) for name in lookaside.preset_names()]
    machines.append(lookaside.check_config(
        None, tlb=["dtlb:entries=64,ways=full,policy=clock,page=4k"],
        cache=["l1:size=32k,line=64,ways=8,policy=plru,serves=unified,3c=yes"]))
    for text in machines:
        jsonschema.validate(tomllib.loads(text), schema)
    m = tomllib.loads(machines[-1])
    assert m["tlb"][0]["policy"] == "nru"  # "clock" is NRU's other name
    for bad in ({"policy": "mru"}, {"entres": 64}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**m, "tlb": [{**m["tlb"][0], **bad}]}, schema)
        with pytest.raises(lookaside.ConfigError):
            key, value = next(iter(bad.items()))
            lookaside.check_config(None, [f"tlb.dtlb.{key}={value!r}".replace("'", '"')],
                                   tlb=["dtlb:entries=64,ways=full,policy=lru,page=4k"])


def test_sizes_and_one_pass_limits_come_from_the_engine():
    # The Python layer asks the engine instead of repeating its rules.
    from lookaside import _lookaside, _page_bytes
    from lookaside.report import axis_number

    assert _page_bytes("2M") == 2 << 20 and _page_bytes("4KiB") == 4096
    with pytest.raises(lookaside.LookasideError, match="'3k' is not a page size"):
        _page_bytes("3k")
    assert axis_number("48k") == 48 * 1024  # a cache size need not be a page size
    answers = _lookaside.one_pass_answers
    assert answers(1 << 26, 1 << 26) and not answers((1 << 26) + 1, (1 << 26) + 1)
    assert answers(1024, 16) and answers(1 << 20, 16)
    assert not answers(1024, 32)  # more ways than all-associativity keeps
    assert not answers(96, 4)  # 24 sets: not a power of two
    assert not answers(1 << 21, 16)  # 2^17 sets


def test_metadata_reads_the_header_alone(tmp_path):
    # A trace cut in the middle of its events: its summary cannot be read, its header can.
    from pathlib import Path

    shipped = Path(lookaside.__file__).parent / "data" / "gzip-system.lks"
    whole = lookaside.info(shipped)["metadata"]
    assert whole.get("processes")
    cut = tmp_path / "cut.lks"
    data = shipped.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(lookaside.LookasideError):
        lookaside.info(cut)
    assert lookaside.metadata(cut) == whole == lookaside.metadata(shipped)
    din = tmp_path / "t.din"
    din.write_text("0 1000\n1 2000\n")
    assert lookaside.metadata(din) == {}


def test_the_engine_stub_names_every_function_of_the_engine():
    # The type stub is what editors and type checkers know of the engine: a function the
    # engine exports and the stub leaves out is a function they call blind.
    import ast
    from pathlib import Path

    from lookaside import _lookaside

    stub = Path(lookaside.__file__).with_name("_lookaside.pyi").read_text()
    declared = {n.name for n in ast.parse(stub).body
                if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    exported = {n for n in dir(_lookaside) if not n.startswith("_")}
    assert exported - declared == set()
