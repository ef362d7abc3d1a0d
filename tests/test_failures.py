"""Failures injected from outside: a full disk, a read-only output, a corrupted compressed
block in the middle of a trace, a Dask worker killed during a sweep. Each must end in a
clear error (exit 2, one line naming the file) or a clean recovery — never a traceback and
never an output file that looks complete but is not."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from lookaside.sweep import load_spec, run_sweep


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "64k", read_only: bool = False):
    """A small tmpfs at `path` (skips the test where mounting is not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def assert_clean_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("lookaside: error: "), p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in last, (n, p.stderr)


def test_a_full_disk_leaves_no_partial_output(cli, demo: Path, tmp_path: Path):
    with tmpfs(tmp_path / "full") as d:
        for dst in ("x.din", "x.lks", "x.lackey.zst"):
            p = cli("convert", demo, d / dst, check=False)
            assert_clean_error(p, "x.")
            assert "No space left" in p.stderr or "space" in p.stderr.lower(), p.stderr
            assert list(d.iterdir()) == [], "a partial or temporary file was left behind"


def test_a_read_only_output_is_a_clear_error(cli, demo: Path, tmp_path: Path):
    with tmpfs(tmp_path / "ro", read_only=True) as d:
        p = cli("simulate", demo, "-o", d / "r.json", "--json", check=False)
        assert_clean_error(p, "Read-only")
        p = cli("convert", demo, d / "x.din", check=False)
        assert_clean_error(p, "Read-only")
        assert list(d.iterdir()) == []


def test_a_sweep_on_a_full_disk_fails_cleanly_and_resumes(cli, tmp_path: Path):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ntlb = ["dtlb:entries=4,ways=full,page=4k"]\ntraces = ["demo"]\n'
                    '[axes]\n"tlb.dtlb.entries" = [1, 2, 4, 8, 16, 32, 64, 128]\n')
    with tmpfs(tmp_path / "small", size="16k") as d:
        p = cli("sweep", spec, "-o", d / "out", "-q", "--no-report", check=False)
        assert_clean_error(p, str(d / "out"), "No space left")
        stored = list((d / "out" / "points").glob("*.json"))
        for f in stored:  # whatever was stored is complete
            assert f.read_text().endswith("}")
        assert not list((d / "out" / "points").glob(".*.tmp"))
        assert not (d / "out" / "results.csv").exists()
    # The same sweep elsewhere completes.
    cli("sweep", spec, "-o", tmp_path / "out", "-q", "--no-report")
    assert len(pd.read_csv(tmp_path / "out" / "results.csv")) == 16


def test_a_corrupted_block_mid_trace_names_the_file(cli, demo: Path, tmp_path: Path):
    data = bytearray(demo.read_bytes())
    for at in (len(data) // 3, len(data) // 2, 2 * len(data) // 3):
        bad = bytearray(data)
        bad[at] ^= 0x5A
        f = tmp_path / f"bad-{at}.lks"
        f.write_bytes(bytes(bad))
        for reading in ("one-thread", "pipelined"):
            p = cli("simulate", f, "--reading", reading, "-o", tmp_path / "r.json", check=False)
            assert_clean_error(p, str(f))
            assert not (tmp_path / "r.json").exists()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_killed_dask_worker_loses_no_point(tmp_path: Path):
    distributed = pytest.importorskip("distributed")
    spec_file = tmp_path / "s.toml"
    spec_file.write_text(
        '[sweep]\ntlb = ["dtlb:entries=4,ways=full,page=4k"]\ntraces = ["demo"]\n'
        '[axes]\n"tlb.dtlb.entries" = [' + ", ".join(str(n) for n in range(1, 25)) + "]\n")
    spec = load_spec(spec_file)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        killed = threading.Event()

        def kill_one(_pid: str) -> None:
            if killed.is_set():
                return
            killed.set()
            with distributed.Client(cluster.scheduler_address) as c:
                pids = list(c.run(os.getpid).values())
            os.kill(pids[0], 9)
            time.sleep(0.2)

        o = run_sweep(spec, tmp_path / "dask", scheduler=cluster.scheduler_address,
                      progress=False, on_point=kill_one, one_pass=False)
    assert killed.is_set()
    assert o.ran == o.total == 24
    local = run_sweep(spec, tmp_path / "local", workers=2, progress=False)
    key = ["point", "structure"]
    pd.testing.assert_frame_equal(
        o.table.sort_values(key).reset_index(drop=True),
        local.table.sort_values(key).reset_index(drop=True))


# --- Pipes and FIFOs: a trace read from a stream gives exactly the file's counts. -----------

def _lookaside(*args: str, **kw) -> subprocess.CompletedProcess:
    import sys
    return subprocess.run([sys.executable, "-m", "lookaside.cli", *map(str, args)],
                          capture_output=True, **kw)


def _refs(stdout: bytes) -> int:
    import json
    return json.loads(stdout)["trace"]["references"]


@pytest.fixture(scope="module")
def stream_traces(tmp_path_factory, demo: Path) -> dict[str, Path]:
    """The demo trace in a text format, gzip-compressed text, and native (level 3)."""
    import lookaside
    d = tmp_path_factory.mktemp("streams")
    out = {}
    for name in ("t.din", "t.din.gz", "t.lks"):
        lookaside.convert(demo, d / name)
        out[name] = d / name
    return out


@pytest.mark.parametrize("name", ["t.din", "t.din.gz", "t.lks"])
def test_a_trace_on_standard_input_gives_the_files_counts(stream_traces, name: str):
    f = stream_traces[name]
    tlb = ("--tlb", "dtlb:entries=64,ways=full")
    want = _lookaside("simulate", f, *tlb, "--json")
    assert want.returncode == 0, want.stderr
    for path in ("-", "/dev/stdin"):
        for reading in ("one-thread", "pipelined"):
            got = _lookaside("simulate", path, *tlb, "--json", "--reading", reading,
                             input=f.read_bytes())
            assert got.returncode == 0, (path, got.stderr)
            assert _refs(got.stdout) == _refs(want.stdout) > 200_000, (path, reading)
            a, b = json.loads(got.stdout), json.loads(want.stdout)
            assert a["structures"] == b["structures"]
    info = _lookaside("info", "-", "--json", input=f.read_bytes())
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["references"] == _refs(want.stdout)
    assert json.loads(info.stdout)["path"] == "<stdin>"


def test_a_trace_through_a_fifo_and_a_process_substitution(stream_traces, tmp_path: Path):
    f = stream_traces["t.din.gz"]
    want = _refs(_lookaside("simulate", f, "--tlb", "dtlb:entries=64", "--json").stdout)
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as w:
            w.write(f.read_bytes())

    t = threading.Thread(target=feed)
    t.start()
    got = _lookaside("simulate", fifo, "--tlb", "dtlb:entries=64", "--json", timeout=60)
    t.join()
    assert got.returncode == 0, got.stderr
    assert _refs(got.stdout) == want
    # bash's <(zcat t.din.gz): a /dev/fd path onto a pipe.
    got = subprocess.run(["bash", "-c", f'"$0" -m lookaside.cli simulate <(zcat "{f}") '
                          '--tlb dtlb:entries=64 --json', __import__("sys").executable],
                         capture_output=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert _refs(got.stdout) == want


def test_an_empty_trace_is_refused_by_simulate(cli, tmp_path: Path):
    empty = tmp_path / "e.din"
    empty.write_text("")
    p = cli("simulate", empty, "--tlb", "dtlb:entries=64", check=False)
    assert_clean_error(p, str(empty), "holds no event")
    p = _lookaside("simulate", "-", "--tlb", "dtlb:entries=64", "--format", "din", input=b"")
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().strip() == ("lookaside: error: <stdin>: events: the trace holds no "
                                         "event: nothing to simulate")
    # info still describes it: an empty trace is a fact, not an error.
    assert json.loads(cli("info", empty, "--json").stdout)["events"] == 0
