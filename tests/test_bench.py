"""``lookaside bench`` end to end: the structure of what it reports, and that its counts are
those of ``lookaside simulate`` (never a timing: speed is data for a person, not a test)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lookaside import bench

MODES = ("simulate", "parse+simulate")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """One quick bench, as JSON, and its text table (the same run rendered)."""
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    p = subprocess.run([sys.executable, "-m", "lookaside.cli", "bench", "--quick", "--json",
                        "-o", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "parse alone" in p.stderr  # the steps, on stderr
    return json.loads(out.read_text())


def test_every_configuration_on_every_trace(quick):
    r = quick
    assert r["runs"] == 5 and r["quick"] is True
    assert "CLOCK_THREAD_CPUTIME_ID" in r["clock"] or "wall" in r["clock"]
    assert [t["label"] for t in r["traces"]] == ["demo", "segments", "system"]
    labels = [c["label"] for c in r["configurations"]]
    assert labels == [c["label"] for c in bench.configurations()]
    din = {c["label"] for c in r["configurations"] if c["input"] == "din"}
    assert din == {"din text: cache 32 KiB 8-way LRU"}
    cells = {(c["mode"], c["configuration"], c["trace"]): c for c in r["cells"]}
    for t in r["traces"]:
        assert t["events"] == bench.QUICK_REFS
        assert t["references"] > 0
        expected = [("parse", "parse alone (counting)")] + [(m, c) for c in labels
                                                            for m in MODES]
        for mode, conf in expected:
            c = cells.pop((mode, conf, t["label"]))
            assert len(c["cpu_seconds"]) == len(c["events_per_s_runs"]) == 5
            assert all(s > 0 for s in c["cpu_seconds"])
            s = c["events_per_s"]
            assert 0 < s["min"] <= s["median"] <= s["max"]
            assert s["min"] == min(c["events_per_s_runs"])
            assert s["max"] == max(c["events_per_s_runs"])
            if conf in din:
                # A din copy holds the trace's references, not its control events.
                assert c["input"] == "din" and c["file_bytes"] > 0
                assert 0 < c["references"] == c["events"] <= t["events"]
            else:
                assert 0 < c["references"] <= c["events"] == t["events"]
    assert not cells, f"cells nobody asked for: {list(cells)}"
    assert r["host"]["cpu"] and r["host"]["logical_cpus"] >= 1 and r["host"]["date"]


def test_counts_are_those_of_simulate(quick, cli):
    """The 64-entry TLB row on the segments stream (whole under --quick) counts what
    `lookaside simulate` counts on the same input with the same flags."""
    r = quick
    seg = next(t for t in r["traces"] if t["label"] == "segments")
    assert seg["path"].startswith("workload:segments")
    conf = next(c for c in r["configurations"] if c["label"] == "TLB 64 FA LRU")
    args = [a for flag in conf["tlb"] for a in ("--tlb", flag)]
    sim = json.loads(cli("simulate", seg["path"], *args, "--json", "-q").stdout)
    dtlb = sim["structures"]["dtlb"]
    for mode in MODES:
        c = next(c for c in r["cells"] if (c["mode"], c["configuration"], c["trace"])
                 == (mode, conf["label"], "segments"))
        assert c["references"] == sim["trace"]["references"] > 0
        assert c["first_structure"] == {"name": "dtlb", "accesses": dtlb["accesses"],
                                        "misses": dtlb["misses"]}
        assert dtlb["misses"] > 0.4 * dtlb["accesses"]  # miss-heavy, as it should be


def _cell(r, mode, conf, trace):
    return next(c for c in r["cells"]
                if (c["mode"], c["configuration"], c["trace"]) == (mode, conf, trace))


def test_cache_rows_count_what_simulate_counts(quick, cli, tmp_path):
    """The DineroIV-model cache rows are `--cache` flags: on the segments stream each counts
    what `lookaside simulate` counts with the same flags, the din row what it counts on a
    din text copy of the stream (whose references are 4 bytes each: other counts)."""
    r = quick
    seg = next(t for t in r["traces"] if t["label"] == "segments")
    confs = {c["label"]: c for c in r["configurations"]}
    din = tmp_path / "segments.din"
    cli("convert", seg["path"], din)
    for label, trace in [("cache 32 KiB 8-way LRU", seg["path"]),
                         ("caches 32 KiB I/D + 1 MiB 16-way L2", seg["path"]),
                         ("3C: cache 32 KiB 8-way LRU", seg["path"]),
                         ("din text: cache 32 KiB 8-way LRU", din)]:
        conf = confs[label]
        assert conf["tlb"] == [] and conf["toml"] is None and conf["cache"]
        args = [a for flag in conf["cache"] for a in ("--cache", flag)]
        sim = json.loads(cli("simulate", trace, *args, "--json", "-q").stdout)
        name, first = next(iter(sim["structures"].items()))
        for mode in MODES:
            c = _cell(r, mode, label, "segments")
            assert c["references"] == sim["trace"]["references"] > 0
            assert c["first_structure"] == {"name": name, "accesses": first["accesses"],
                                            "misses": first["misses"]}, label
        data = sim["structures"]["l1d" if "l1d" in sim["structures"] else "l1"]
        assert data["misses"] > 0.3 * data["accesses"] > 0  # miss-heavy
    native = _cell(r, "simulate", "cache 32 KiB 8-way LRU", "segments")["first_structure"]
    three_c = _cell(r, "simulate", "3C: cache 32 KiB 8-way LRU", "segments")["first_structure"]
    assert native == three_c  # classification changes no count


def test_the_table_has_a_row_per_configuration_and_a_column_per_trace(quick):
    text = bench.table(quick)
    lines = text.splitlines()
    assert lines[1].startswith("host: ")
    heads = [ln for ln in lines if ln.startswith(("simulate alone", "parse + simulate"))]
    assert len(heads) == 2 and all(h.split()[-3:] == ["demo", "segments", "system"]
                                   for h in heads)
    for c in bench.configurations():
        rows = [ln for ln in lines if ln.startswith(c["label"])]
        assert len(rows) == 2, c["label"]
        assert all(len(row.split("(")) >= 4 for row in rows)  # three median (min–max) cells


def test_bad_arguments_are_one_error_line(cli, tmp_path):
    p = cli("bench", "--runs", "0", check=False)
    assert p.returncode == 2 and p.stderr.startswith("lookaside: error: ")
    p = cli("bench", "--quick", "-q", tmp_path / "missing.lks", check=False)
    assert p.returncode == 2 and p.stderr.startswith("lookaside: error: ")
    assert "missing.lks" in p.stderr and "Traceback" not in p.stderr
    p = cli("bench", "--quick", "-q", "-", check=False)  # read many times: a file, not a pipe
    assert p.returncode == 2 and "not a pipe" in p.stderr, p.stderr
