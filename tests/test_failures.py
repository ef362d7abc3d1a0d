"""Failures injected from outside: a full disk, a read-only output, a corrupted compressed
block in the middle of a trace, a Dask worker killed during a sweep. Each must end in a
clear error (exit 2, one line naming the file) or a clean recovery — never a traceback and
never an output file that looks complete but is not."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
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


# ----- no silently wrong answer: references left unsimulated, huge accesses, huge machines ---

def _lackey(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def test_a_mips_preset_refuses_a_64_bit_trace_naming_the_fix(cli, tmp_path: Path):
    # Stack and libraries of a 64-bit Linux program lie far above MIPS kuseg (2 GB): every
    # reference would be an address error, leaving a result of nothing but zeros.
    t = _lackey(tmp_path / "x86.lackey", [f" L {0x7ffd_0000_0000 + 64 * i:x},8"
                                          for i in range(500)] + [" S 601000,8"])
    for preset in ("decstation3100-mach3", "decstation3100-ultrix", "decstation3100-osf1"):
        p = cli("simulate", t, "--config", preset, check=False)
        assert_clean_error(p, str(t), "refill.fold_user_addresses",
                           "--set refill.fold_user_addresses=true")
    # The named fix works, with nothing left to warn about.
    p = cli("simulate", t, "--config", "decstation3100-mach3", "--json",
            "--set", "refill.fold_user_addresses=true")
    r = json.loads(p.stdout)
    assert r["warnings"] == [] and "warning" not in p.stderr
    assert r["structures"]["tlb"]["accesses"] == 501


def test_unsimulated_references_are_reported_everywhere(cli, tmp_path: Path):
    # 2 of 10 accesses run past 2^64: the bytes beyond the top are not simulated.
    t = _lackey(tmp_path / "wrap.lackey", [f" L {0x1000 * i:x},8" for i in range(8)]
                + [" L fffffffffffffff0,64", " S ffffffffffffff00,4096"])
    p = cli("simulate", t, "--tlb", "dtlb:entries=8", "--json")
    r = json.loads(p.stdout)
    assert r["trace"]["wrapped"] == 2 and r["trace"]["dropped"] == 2
    assert r["trace"]["dropped_share"] == pytest.approx(2 / 10)
    assert len(r["warnings"]) == 1 and "not simulated" in r["warnings"][0]
    assert "lookaside: warning: " in p.stderr and "not simulated" in p.stderr
    table = cli("simulate", t, "--tlb", "dtlb:entries=8").stdout
    assert any(line.startswith("warning: ") and "not simulated" in line
               for line in table.splitlines()), table
    # A sweep's table says which points left references out.
    spec = tmp_path / "s.toml"
    spec.write_text(f'[sweep]\ntlb = ["dtlb:entries=4"]\ntraces = ["{t}"]\n'
                    '[axes]\n"tlb.dtlb.entries" = [2, 4]\n')
    for engine in ("--no-one-pass", "--batch=1"):  # one point at a time, or one pass
        out = tmp_path / engine.strip("-")
        p = cli("sweep", spec, "-o", out, "-q", "--no-report", engine)
        rows = pd.read_csv(out / "results.csv")
        assert rows["dropped_share"].tolist() == pytest.approx([0.2] * len(rows)), engine
        assert rows["warnings"].str.contains("not simulated").all(), engine
        assert "left references unsimulated" in p.stderr
    # A clean trace warns of nothing.
    clean = _lackey(tmp_path / "clean.lackey", [f" L {0x1000 * i:x},8" for i in range(8)])
    p = cli("simulate", clean, "--tlb", "dtlb:entries=8", "--json")
    assert json.loads(p.stdout)["warnings"] == [] and "warning" not in p.stderr
    # From Python, a warning too.
    import lookaside

    with pytest.warns(lookaside.LookasideWarning, match="not simulated"):
        lookaside.simulate(t, None, tlb=["dtlb:entries=8"])


def test_an_access_larger_than_a_page_translates_every_page(tmp_path: Path):
    import lookaside

    # 65535 bytes from 0x10ff8 touch the 17 pages 0x10..0x20.
    t = _lackey(tmp_path / "big.lackey", [" L 10ff8,65535"])
    r = lookaside.simulate(t, None, tlb=["dtlb:entries=64,ways=full"])
    assert r["dtlb"]["accesses"] == 17 and r["dtlb"]["misses"] == 17
    assert r.data["trace"]["straddles"] == 16
    # The same pages again, one access each: all hit.
    t2 = _lackey(tmp_path / "again.lackey", [" L 10ff8,65535"] +
                 [f" L {p << 12:x},4" for p in range(0x10, 0x21)])
    r = lookaside.simulate(t2, None, tlb=["dtlb:entries=64,ways=full"])
    assert (r["dtlb"]["accesses"], r["dtlb"]["misses"]) == (34, 17)
    # Through the caches too: a 64 KiB store on the DECstation 5000/200 (4-byte D-cache
    # lines) writes 16384 lines.
    t3 = _lackey(tmp_path / "store.lackey", [" S 10000,65535"])
    r = lookaside.simulate(t3, "decstation5000-200")
    d = next(c for c in r.data["memory"]["caches"] if c["name"] == "dcache")
    assert d["writes"] == 16384 and d["straddles"] == 16383


def _huge_chain(n: int = 16) -> list[str]:
    return [f"t{i}:entries=16777216,ways=full" + (f",next=t{i + 1}" if i < n - 1 else "")
            for i in range(n)]


def test_a_machine_over_the_memory_limit_is_refused_before_allocating(tmp_path: Path):
    # Sixteen chained TLBs of 2^24 entries: ~10 GiB. Refused within a 1 GiB limit in one
    # error line, quickly and without allocating (the child's peak RSS stays small).
    flags = [a for t in _huge_chain() for a in ("--tlb", t)]
    probe = ("import resource, subprocess, sys, time\n"
             "t = time.monotonic()\n"
             "p = subprocess.run([sys.executable, '-m', 'lookaside.cli', *sys.argv[1:]],"
             " capture_output=True, text=True)\n"
             "print(p.returncode, time.monotonic() - t,"
             " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
             "sys.stderr.write(p.stderr)\n")
    p = subprocess.run([sys.executable, "-c", probe, "simulate", str(lookaside_demo()),
                        "--max-memory", "1G", *flags], capture_output=True, text=True)
    status, seconds, rss_kib = p.stdout.split()
    lines = p.stderr.strip().splitlines()
    assert int(status) == 2 and len(lines) == 1, p.stderr
    assert lines[0].startswith("lookaside: error: ") and "Traceback" not in p.stderr
    assert "machine needs ~" in lines[0] and "over the 1.0 GiB limit (--max-memory)" in lines[0]
    assert float(seconds) < 30 and int(rss_kib) < 512 * 1024, (seconds, rss_kib)


def test_a_sweep_point_over_the_memory_limit_is_a_clean_error(cli, tmp_path: Path):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ntlb = ["dtlb:entries=4,ways=full,next=l2", '
                    '"l2:entries=16,ways=full"]\ntraces = ["demo"]\n'
                    '[axes]\n"tlb.l2.entries" = [64, 16777216]\n')
    p = cli("sweep", spec, "-o", tmp_path / "out", "-q", "--no-report",
            "--max-memory", "64M", check=False)
    assert_clean_error(p, str(spec), "16777216", "machine needs ~", "(--max-memory)")
    assert not (tmp_path / "out" / "results.csv").exists()


def test_a_name_means_one_thing_in_toml_and_flags(cli, demo: Path, tmp_path: Path):
    # `dtlb` without `serves` is a data TLB in a [[tlb]] table, as with --tlb: fetches do
    # not reach it.
    m = tmp_path / "m.toml"
    m.write_text('[[tlb]]\nname = "dtlb"\nentries = 64\n[[tlb]]\nname = "itlb"\nentries = 32\n')
    toml_r = json.loads(cli("simulate", demo, "-c", m, "--json").stdout)
    flag_r = json.loads(cli("simulate", demo, "--tlb", "dtlb:entries=64",
                            "--tlb", "itlb:entries=32", "--json").stdout)
    for name in ("dtlb", "itlb"):
        assert toml_r["structures"][name]["accesses"] == flag_r["structures"][name]["accesses"]
    assert toml_r["structures"]["dtlb"]["geometry"]["serves"] == "data"
    assert "fetch" not in toml_r["structures"]["dtlb"]["by_kind"]
    # `lookaside config` prints what each structure serves.
    out = cli("config", "-c", m).stdout
    assert 'name = "dtlb"' in out and 'serves = "data"' in out and 'serves = "instruction"' in out


def lookaside_demo() -> Path:
    import lookaside

    return lookaside.demo_trace()
