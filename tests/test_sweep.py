"""Sweeps: expansion, equality with single runs, worker-count independence, resume after a
kill, a real Dask cluster, the report, and errors that name the file and key."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import lookaside
from lookaside.sweep import Store, load_spec, run_sweep

SPEC = """
[sweep]
name = "t"
tlb = ["dtlb:entries=64,ways=full,policy=lru,page=4k,serves=data"]
traces = ["demo", "{lackey}"]

[axes]
"tlb.dtlb.entries" = [4, 16, 64]
"tlb.dtlb.policy" = ["lru", "fifo"]

[[points]]
"tlb.dtlb.entries" = 8
"tlb.dtlb.ways" = 2
"""


@pytest.fixture
def spec_file(tmp_path: Path, lackey_trace: Path) -> Path:
    p = tmp_path / "t.toml"
    p.write_text(SPEC.replace("{lackey}", str(lackey_trace)))
    return p


def table(out: Path) -> pd.DataFrame:
    df = pd.read_csv(out / "results.csv")
    return df.sort_values(["point", "structure"]).reset_index(drop=True)


def engines(out: Path) -> list[str | None]:
    """The engine that answered each stored point: a one-pass engine, or None (simulated)."""
    s = Store(out / "points")
    return ([s.record(pid)["result"].get("engine") for pid in s.points]
            + [f["result"]["columns"]["engine"][i] for f, i in s.members.values()])


#: The all-associativity set of `lookaside bench`: LRU, 1…1024 sets × 1…16 ways.
SA176 = "".join(f'[[points]]\n"tlb.d.entries" = {sets * ways}\n"tlb.d.ways" = {ways}\n'
                for sets in (1 << i for i in range(11)) for ways in range(1, 17))


class Calls:
    """Counts the engine calls a sweep makes (local workers run in this process)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        from lookaside import sweep

        self.one_pass: list[int] = []  # geometries per call
        self.simulated = 0  # machines simulated per config
        one_pass, many = sweep._lookaside.one_pass, sweep._lookaside.simulate_many

        def counted_one_pass(*args, **kw):
            self.one_pass.append(len(args[6]))
            return one_pass(*args, **kw)

        def counted_many(trace, machines, *args, **kw):
            self.simulated += len(machines)
            return many(trace, machines, *args, **kw)

        monkeypatch.setattr(sweep._lookaside, "one_pass", counted_one_pass)
        monkeypatch.setattr(sweep._lookaside, "simulate_many", counted_many)


def test_points_are_the_product_plus_the_list(spec_file: Path):
    spec = load_spec(spec_file)
    pts = spec.expand()
    assert len(pts) == 2 * (3 * 2 + 1)
    assert spec.keys == ["tlb.dtlb.entries", "tlb.dtlb.policy", "tlb.dtlb.ways"]
    assert len({spec.point_id(p) for p in pts}) == len(pts)


def test_point_ids_hash_what_determines_the_result(tmp_path: Path, lackey_trace: Path):
    """Ids are what a rerun finds stored points by: they stay the hash of this key."""
    import hashlib
    import os

    spec_file = tmp_path / "ids.toml"
    spec_file.write_text(
        '[sweep]\nmachine = "modern-x86"\nset = ["machine.seed=3"]\n'
        f'traces = ["demo", "{lackey_trace}", "workload:multiserver,servers=2,hops=20"]\n'
        '[axes]\n"tlb.dtlb.entries" = [32, 64]\n"tlb.dtlb.policy" = ["lru", "fifo"]\n')
    spec = load_spec(spec_file)

    def reference(p) -> str:
        key = {"v": 1, "machine": spec.machine_text, "tlb": spec.tlb,
               "set": spec.fixed + p.overrides()}
        if p.trace.startswith("workload:"):
            key["trace"] = p.trace
        else:
            st = os.stat(p.trace)
            key.update(trace=os.path.abspath(p.trace), trace_bytes=st.st_size,
                       trace_mtime_ns=st.st_mtime_ns)
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]

    pts = spec.expand()
    assert spec.point_ids(pts) == [reference(p) for p in pts]
    assert spec.point_id(pts[5]) == reference(pts[5])


def test_every_point_equals_its_own_simulation(spec_file: Path, tmp_path: Path, demo: Path):
    o = run_sweep(load_spec(spec_file), tmp_path / "out", workers=2, progress=False)
    assert (o.total, o.ran, o.reused) == (14, 14, 0)
    df = o.table
    row = df[(df.trace == "demo") & (df["tlb.dtlb.entries"] == 16)
             & (df["tlb.dtlb.policy"] == "fifo") & (df.structure == "dtlb")]
    assert len(row) == 1
    r = lookaside.simulate(demo, None, {"tlb.dtlb.entries": 16, "tlb.dtlb.policy": "fifo"},
                           tlb=["dtlb:entries=64,ways=full,policy=lru,page=4k,serves=data"])
    assert int(row.misses.iloc[0]) == r["dtlb"]["misses"]
    assert int(row.accesses.iloc[0]) == r["dtlb"]["accesses"]
    # Larger fully associative LRU TLBs never miss more (inclusion), on both traces.
    lru = df[(df["tlb.dtlb.policy"] == "lru") & (df.structure == "dtlb")]
    for _, g in lru.groupby("trace"):
        assert g.sort_values("tlb.dtlb.entries").misses.is_monotonic_decreasing
    pq = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert len(pq) == len(df)


def test_results_do_not_depend_on_the_worker_count(spec_file: Path, tmp_path: Path):
    spec = load_spec(spec_file)
    run_sweep(spec, tmp_path / "one", workers=1, progress=False)
    run_sweep(spec, tmp_path / "three", workers=3, progress=False)
    pd.testing.assert_frame_equal(table(tmp_path / "one"), table(tmp_path / "three"))


def test_a_killed_sweep_resumes_without_loss_or_duplication(tmp_path: Path, demo: Path):
    spec = tmp_path / "many.toml"
    spec.write_text(
        '[sweep]\ntlb = ["dtlb:entries=4,ways=full,page=4k"]\ntraces = ["demo"]\n'
        '[axes]\n"tlb.dtlb.entries" = [' + ", ".join(str(n) for n in range(1, 41)) + "]\n")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "lookaside.cli", "sweep", str(spec), "-o", str(out), "-j", "1",
           "--no-one-pass",
           "-q", "--no-report"]
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
        deadline = time.monotonic() + 120
        while len(list((out / "points").glob("*.json"))) < 3:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = list((out / "points").glob("*.json"))
    assert 3 <= len(done) < 40, "the sweep finished before it could be killed"
    for f in done:  # every stored point is complete
        assert json.loads(f.read_text())["result"]["structures"]["dtlb"]["accesses"] > 0
    assert not (out / "results.csv").exists()
    o = run_sweep(load_spec(spec), out, workers=2, progress=False)
    assert o.reused == len(done) and o.ran == 40 - len(done)
    # The rest in one pass: one file for all of them.
    assert len(Store(out / "points").ids()) == 40
    assert len(list((out / "points").glob("*.json"))) == len(done) + 1
    clean = run_sweep(load_spec(spec), tmp_path / "clean", workers=2, progress=False)
    pd.testing.assert_frame_equal(table(out), table(clean.out))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_real_dask_cluster_gives_the_same_table(spec_file: Path, tmp_path: Path):
    distributed = pytest.importorskip("distributed")
    spec = load_spec(spec_file)
    run_sweep(spec, tmp_path / "local", workers=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        o = run_sweep(spec, tmp_path / "dask", scheduler=cluster.scheduler_address,
                      progress=False)
    assert o.ran == o.total == 14
    pd.testing.assert_frame_equal(table(tmp_path / "local"), table(tmp_path / "dask"))


def test_cli_sweep_writes_the_report(cli, spec_file: Path, tmp_path: Path):
    out = tmp_path / "cli"
    p = cli("sweep", spec_file, "-o", out, "-q")
    assert "14 points" in p.stderr
    html = (out / "report.html").read_text()
    assert html.count("<svg") >= 4  # miss ratio vs entries and a heat map, per trace
    assert (out / "plots" / "line-dtlb-tlb_dtlb_entries-demo.svg").stat().st_size > 1000
    again = cli("report", out, "--metric", "mpki")
    assert again.stdout.strip().endswith("report.html")


@pytest.mark.parametrize("body, words", [
    ('[sweep]\ntraces = ["demo"]\ntlb = ["d:entries=4"]\nspeed = 1\n', ["sweep.speed", "unknown"]),
    ('[sweep]\ntraces = ["nope.lks"]\ntlb = ["d:entries=4"]\n', ["sweep.traces", "nope.lks"]),
    ('[sweep]\ntraces = ["demo"]\n', ["sweep.machine"]),
    ('[sweep]\ntraces = ["demo"]\ntlb = ["d:entries=4"]\n[axes]\n"tlb.d.policy" = ["lfu"]\n',
     ["tlb.d.policy='lfu'", "policy"]),
    ('[sweep]\ntraces = ["demo"]\ntlb = ["d:entries=4"]\n[axes]\n"tlb.d.entries" = []\n',
     ["axes.tlb.d.entries", "non-empty"]),
    ('[sweep\n', ["bad.toml"]),
])
def test_bad_specs_name_the_file_and_key(cli, tmp_path: Path, body: str, words: list[str]):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    p = cli("sweep", f, "-o", tmp_path / "o", check=False)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    assert str(f) in p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


@pytest.mark.parametrize("axes", [
    '"tlb.d.entries" = [1, 2, 3, 4, 8, 16, 24, 32, 64, 128, 512]',
    '"tlb.d.entries" = [4, 16, 64, 256]\n"tlb.d.ways" = [1, 2, 4]',
])
def test_one_pass_answers_equal_per_config_runs(tmp_path: Path, lackey_trace: Path, axes: str,
                                                monkeypatch: pytest.MonkeyPatch):
    ways = "full" if "ways" not in axes else "1"
    spec_file = tmp_path / "g.toml"
    spec_file.write_text(
        f'[sweep]\ntlb = ["d:entries=4,ways={ways},page=4k,serves=data"]\n'
        f'traces = ["demo", "{lackey_trace}"]\n[axes]\n{axes}\n')
    spec = load_spec(spec_file)
    calls = Calls(monkeypatch)
    fast = run_sweep(spec, tmp_path / "fast", progress=False)
    # One engine call per trace, for all its points.
    assert (calls.one_pass, calls.simulated) == ([len(spec.expand()) // 2] * 2, 0)
    assert set(engines(tmp_path / "fast")) == {
        "all-associativity" if "ways" in axes else "stack-distance"}
    slow = run_sweep(spec, tmp_path / "slow", progress=False, one_pass=False)
    assert fast.total == slow.total == len(spec.expand())
    pd.testing.assert_frame_equal(table(tmp_path / "fast"), table(tmp_path / "slow"))


def test_mixed_axes_split_into_one_pass_families_and_batches(tmp_path: Path,
                                                            lackey_trace: Path):
    from lookaside.sweep import plan

    spec_file = tmp_path / "m.toml"
    spec_file.write_text(
        f'[sweep]\ntlb = ["d:entries=4,ways=full,serves=data"]\n'
        f'traces = ["demo", "{lackey_trace}"]\n[axes]\n'
        '"tlb.d.entries" = [8, 16, 64, 256]\n"tlb.d.ways" = [1, 4, "full"]\n'
        '"tlb.d.policy" = ["lru", "fifo"]\n"pages.size" = ["4k", "16k"]\n')
    spec = load_spec(spec_file)
    pts = spec.expand()
    assert len(pts) == 2 * 4 * 3 * 2 * 2
    todo = [(spec.point_id(p), p) for p in pts]
    tasks = plan(spec, todo, workers=2)
    families = [t for t in tasks if t.family is not None]
    # Per trace and page size, one pass: all-associativity for the 8 set-associative points
    # and the fully associative 8 and 16, stack distance for 64 and 256.
    assert len(families) == 2 * 2
    assert [len(t.members) for t in families] == [12] * 4
    assert all(dict(p.settings)["tlb.d.policy"] == "lru" for t in families for _, p in t.members)
    batches = [t for t in tasks if t.family is None]
    assert all(len({p.trace for _, p in t.members}) == 1 for t in batches)
    # Every point is in exactly one task.
    planned = [pid for t in tasks for pid, _ in t.members]
    assert sorted(planned) == sorted(pid for pid, _ in todo)
    fast = run_sweep(spec, tmp_path / "fast", progress=False)
    answered = engines(tmp_path / "fast")
    assert answered.count("all-associativity") == 40 and answered.count("stack-distance") == 8
    assert answered.count(None) == 48  # FIFO, simulated
    slow = run_sweep(spec, tmp_path / "slow", progress=False, one_pass=False, batch=1)
    assert fast.total == slow.total == len(pts)
    pd.testing.assert_frame_equal(table(tmp_path / "fast"), table(tmp_path / "slow"))


def test_a_sweep_of_caches_beside_a_tlb_runs_point_by_point(tmp_path: Path, demo: Path):
    # The one-pass engines answer TLBs alone: a family of this machine's TLB is refused
    # (its caches would be left out) and every point runs in full.
    machine = tmp_path / "c.toml"
    machine.write_text('[[tlb]]\nname = "dtlb"\nentries = 64\n'
                       '[[cache]]\nname = "l1"\nsize = "16k"\nline = 64\n')
    spec_file = tmp_path / "s.toml"
    spec_file.write_text('[sweep]\nmachine = "c.toml"\ntraces = ["demo"]\n[axes]\n'
                         '"tlb.dtlb.entries" = [16, 64]\n"cache.l1.ways" = [1, 4]\n')
    o = run_sweep(load_spec(spec_file), tmp_path / "out", progress=False)
    engines = {json.loads(f.read_text())["result"].get("engine")
               for f in (tmp_path / "out" / "points").glob("*.json")}
    assert engines == {None}
    df = o.table
    row = df[(df.structure == "l1") & (df["cache.l1.ways"] == 4)
             & (df["tlb.dtlb.entries"] == 16)]
    r = lookaside.simulate(demo, machine, {"cache.l1.ways": 4, "tlb.dtlb.entries": 16})
    assert int(row.misses.iloc[0]) == r["l1"]["misses"]
    assert (int(row.size_bytes.iloc[0]), int(row.line_bytes.iloc[0])) == (16384, 64)


@pytest.mark.parametrize("section, key", [
    ('[pagetable]\norganisation = "radix"\nlevels = 4\n', "pagetable"),
    ("[prefetch]\nuser_entries = 4\nkernel_entries = 4\n", "prefetch"),
])
def test_a_sweep_of_a_tlb_keeps_the_sections_beside_it(tmp_path: Path, demo: Path,
                                                       section: str, key: str):
    # A one-pass engine would answer the TLB and drop the walker (or the prefetcher): the
    # family is refused, and each point stores what the machine run in full stores, with or
    # without --no-one-pass.
    machine = tmp_path / "w.toml"
    machine.write_text('[[tlb]]\nname = "dtlb"\nentries = 64\n' + section)
    spec_file = tmp_path / "s.toml"
    spec_file.write_text('[sweep]\nmachine = "w.toml"\ntraces = ["demo"]\n[axes]\n'
                         '"tlb.dtlb.entries" = [16, 32, 64]\n')
    fast = run_sweep(load_spec(spec_file), tmp_path / "fast", progress=False)
    slow = run_sweep(load_spec(spec_file), tmp_path / "slow", progress=False, one_pass=False)
    keys = [sorted(json.loads(f.read_text())["result"])
            for d in ("fast", "slow") for f in sorted((tmp_path / d / "points").glob("*.json"))]
    assert len(keys) == 6 and all(k == keys[0] for k in keys) and key in keys[0]
    pd.testing.assert_frame_equal(fast.table, slow.table)
    r = lookaside.simulate(demo, machine, {"tlb.dtlb.entries": 16})
    row = fast.table[(fast.table.structure == "walk") & (fast.table["tlb.dtlb.entries"] == 16)]
    assert int(row.accesses.iloc[0]) == r["walk"]["count"] == r["dtlb"]["misses"]


def test_a_sweep_over_workloads_and_a_fifo_policy_runs_point_by_point(tmp_path: Path):
    spec_file = tmp_path / "w.toml"
    spec_file.write_text(
        '[sweep]\nmachine = "decstation3100-mach3"\n'
        'traces = ["workload:multiserver,servers=2,hops=200"]\n'
        '[axes]\n"tlb.tlb.partition.lower" = [4, 8, 12]\n')
    o = run_sweep(load_spec(spec_file), tmp_path / "out", progress=False)
    assert o.ran == 3
    df = o.table
    assert set(df.trace) == {"workload:multiserver,servers=2,hops=200"}
    assert (df[df.structure == "tlb"].accesses > 0).all()


def test_report_plots_mapping_size_and_cost_by_miss_type(tmp_path: Path):
    import re

    from lookaside.report import write_report

    pages = tmp_path / "pages.toml"
    pages.write_text('[sweep]\ntlb = ["tlb:entries=16,ways=full,policy=lru"]\n'
                     'traces = ["demo"]\n[axes]\n"tlb.tlb.entries" = [8, 16, 32]\n'
                     '"pages.size" = ["4k", "16k"]\n')
    spec = load_spec(pages)
    o = run_sweep(spec, tmp_path / "p", progress=False)
    t = o.table[o.table.structure == "tlb"].dropna(subset=["mapping_bytes"])
    assert (t.mapping_bytes == t.entries * t.page_bytes).all() and t.page_bytes.nunique() == 2
    html = write_report(tmp_path / "p").read_text()
    assert "vs mapping size" in html
    traps = tmp_path / "traps.toml"
    traps.write_text('[sweep]\nmachine = "decstation3100-mach3"\n'
                     'traces = ["workload:multiserver,servers=2,hops=200"]\n'
                     '[axes]\n"tlb.tlb.partition.lower" = [4, 8]\n')
    o = run_sweep(load_spec(traps), tmp_path / "t", progress=False)
    assert {"cycles_L1U", "cycles_L2"} <= set(o.table.columns)
    html = write_report(tmp_path / "t").read_text()
    assert re.search(r"trap cycles by miss type vs tlb\.tlb\.partition\.lower", html)
    assert list((tmp_path / "t" / "plots").glob("cost-*.svg"))
    # The partition-point curve: total trap cycles per point, the sum of the kinds.
    rows = o.table.drop_duplicates("point")
    kinds = [c for c in rows.columns if c.startswith("cycles_")]
    assert (rows.trap_cycles == rows[kinds].fillna(0).sum(axis=1)).all()
    assert re.search(r"trap cycles vs tlb\.tlb\.partition\.lower", html)
    assert list((tmp_path / "t" / "plots").glob("partition-*.svg"))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_dask_sweep_killed_and_resumed_equals_a_local_run(tmp_path: Path):
    """A few hundred points over a real trace (the shipped sortprog) on a real Dask cluster
    (a scheduler and two worker processes): the driver is SIGKILLed midway, the rerun
    finishes only what is missing, and the table equals that of a local run."""
    distributed = pytest.importorskip("distributed")
    spec_file = tmp_path / "d.toml"
    spec_file.write_text(
        '[sweep]\ntlb = ["t:entries=4,ways=full"]\ntraces = ["sortprog"]\n[axes]\n'
        '"tlb.t.entries" = [4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]\n'
        '"tlb.t.ways" = [1, 2, 4, "full"]\n"tlb.t.policy" = ["lru", "fifo", "random"]\n'
        '"pages.size" = ["4k", "16k"]\n"tlb.t.serves" = ["data", "unified"]\n')
    spec = load_spec(spec_file)
    total = len(spec.expand())
    assert total == 10 * 4 * 3 * 2 * 2
    out = tmp_path / "dask"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        # Small batches, so that the driver is killed while it is storing points.
        cmd = [sys.executable, "-m", "lookaside.cli", "sweep", str(spec_file), "-o", str(out),
               "--scheduler", cluster.scheduler_address, "--batch", "8", "-q", "--no-report"]
        with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as proc:
            deadline = time.monotonic() + 120
            while len(list((out / "points").glob("*.json"))) < total // 4:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        done = Store(out / "points").ids()
        assert total // 4 <= len(done) < total, "the sweep finished before it could be killed"
        assert not (out / "results.csv").exists()
        o = run_sweep(spec, out, scheduler=cluster.scheduler_address, progress=False)
    assert (o.reused, o.ran) == (len(done), total - len(done))
    stored = Store(out / "points").ids()
    assert stored == {spec.point_id(p) for p in spec.expand()}  # nothing lost, nothing extra
    assert not list((out / "points").glob(".*.tmp"))
    local = run_sweep(spec, tmp_path / "local", workers=2, progress=False)
    assert len(local.table) == 2 * total  # the TLB and the walks, per point
    pd.testing.assert_frame_equal(table(out), table(local.out))


def test_the_shipped_design_space_loads_by_name_and_plans(cli, tmp_path: Path):
    from lookaside.sweep import example_names, plan

    assert "tlb-design" in example_names()
    spec = load_spec("tlb-design")
    pts = spec.expand()
    assert len(pts) == 3600
    assert {label for label, _ in spec.traces} == {"demo", "mawk", "sortprog"}
    assert all(Path(path).is_file() and Path(path).stat().st_size < 1 << 20
               for _, path in spec.traces)
    todo = [(spec.point_id(p), p) for p in pts]
    assert len({pid for pid, _ in todo}) == 3600
    tasks = plan(spec, todo, workers=2)
    # Every LRU point is answered in one pass: per trace, page size and stream, one pass
    # with both engines (stack distance for 32 … 4096 fully associative).
    families = [t for t in tasks if t.family is not None]
    assert len(families) == 3 * 4 * 2
    assert sum(len(t.members) for t in families) == 3600 // 3
    assert sum(len(t.members) for t in tasks) == 3600
    p = cli("sweep", "no-such-sweep", "-o", tmp_path / "o", check=False)
    assert p.returncode == 2 and "tlb-design" in p.stderr and "Traceback" not in p.stderr


def test_the_progress_bar_counts_points_and_quiet_turns_it_off(tmp_path: Path, capsys):
    spec_file = tmp_path / "bar.toml"
    spec_file.write_text('[sweep]\ntlb = ["tlb:entries=16,ways=full,policy=fifo"]\n'
                         'traces = ["sortprog"]\n[axes]\n"tlb.tlb.entries" = [8, 16, 32]\n')
    run_sweep(load_spec(spec_file), tmp_path / "on", progress=True)
    err = capsys.readouterr().err
    # One carriage-return-updated line per finished point, ending at 3/3, then a newline.
    assert [m.group(1) for m in re.finditer(r"\] (\d)/3 points", err)] == ["1", "2", "3"]
    assert err.endswith("\n") and "eta" in err
    run_sweep(load_spec(spec_file), tmp_path / "off", progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("extra, passes", [
    ("", [176]),
    # Fully associative sizes past 16 (stack distance) on the same pass.
    ('[[points]]\n"tlb.d.entries" = 24\n[[points]]\n"tlb.d.entries" = 3000\n', [178]),
], ids=["176", "176+stack-distance"])
def test_the_176_configurations_take_one_engine_call_and_equal_per_config_runs(
        tmp_path: Path, lackey_trace: Path, monkeypatch: pytest.MonkeyPatch, extra: str,
        passes: list[int]):
    spec_file = tmp_path / "sa.toml"
    spec_file.write_text('[sweep]\ntlb = ["d:entries=64,ways=full,policy=lru,page=4k"]\n'
                         f'traces = ["{lackey_trace}"]\n' + SA176 + extra)
    spec = load_spec(spec_file)
    calls = Calls(monkeypatch)
    fast = run_sweep(spec, tmp_path / "fast", progress=False)
    assert (calls.one_pass, calls.simulated) == (passes, 0)
    # One file holds the family: its points' figures as columns.
    assert [f.name for f in (tmp_path / "fast" / "points").iterdir()] == [
        next((tmp_path / "fast" / "points").glob("family-*.json")).name]
    assert set(engines(tmp_path / "fast")) == (
        {"all-associativity"} if not extra else {"all-associativity", "stack-distance"})
    calls = Calls(monkeypatch)
    slow = run_sweep(spec, tmp_path / "slow", progress=False, one_pass=False)
    assert (calls.one_pass, calls.simulated) == ([], fast.total)
    assert fast.total == slow.total == 176 + extra.count("[[points]]")
    for name in ("results.csv", "results.parquet"):
        assert ((tmp_path / "fast" / name).read_bytes()
                == (tmp_path / "slow" / name).read_bytes()), name


def test_a_stored_family_is_reused_and_a_damaged_one_run_again(tmp_path: Path,
                                                              lackey_trace: Path,
                                                              monkeypatch: pytest.MonkeyPatch):
    spec_file = tmp_path / "sa.toml"
    spec_file.write_text('[sweep]\ntlb = ["d:entries=64,ways=full,policy=lru,page=4k"]\n'
                         f'traces = ["{lackey_trace}"]\n' + SA176)
    spec = load_spec(spec_file)
    out = tmp_path / "out"
    first = run_sweep(spec, out, progress=False)
    csv = (out / "results.csv").read_bytes()
    calls = Calls(monkeypatch)
    again = run_sweep(spec, out, progress=False)
    assert (again.ran, again.reused, calls.one_pass) == (0, 176, [])
    assert (out / "results.csv").read_bytes() == csv
    family = next((out / "points").glob("family-*.json"))
    family.write_text(family.read_text()[:-40])  # cut short: not JSON any more
    calls = Calls(monkeypatch)
    fixed = run_sweep(spec, out, progress=False)
    assert (fixed.ran, fixed.reused, calls.one_pass) == (176, 0, [176])
    assert (out / "results.csv").read_bytes() == csv
    assert first.total == 176
