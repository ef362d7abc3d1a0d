"""Failures injected from outside: a full disk, a read-only output, a corrupted compressed
block in the middle of a trace, a Dask worker killed during a sweep. Each must end in a
clear error (exit 2, one line naming the file) or a clean recovery — never a traceback and
never an output file that looks complete but is not."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

import lookaside
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


@pytest.mark.parametrize("flags", [[], ["--no-one-pass"]], ids=["one-pass", "no-one-pass"])
def test_a_sweep_on_a_full_disk_fails_cleanly_and_resumes(cli, tmp_path: Path,
                                                          flags: list[str]):
    # 200 points: their one-pass family's file, or their own files, fill 16 KiB.
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ntlb = ["dtlb:entries=4,ways=full,page=4k"]\ntraces = ["demo"]\n'
                    '[axes]\n"tlb.dtlb.entries" = [' + ", ".join(map(str, range(1, 201))) + "]\n")
    with tmpfs(tmp_path / "small", size="16k") as d:
        p = cli("sweep", spec, "-o", d / "out", "-q", "--no-report", *flags, check=False)
        assert_clean_error(p, str(d / "out"), "No space left")
        stored = list((d / "out" / "points").glob("*.json"))
        for f in stored:  # whatever was stored is complete
            assert f.read_text().endswith("}")
        assert not list((d / "out" / "points").glob(".*.tmp"))
        assert not list((d / "out" / "points").glob(".*.partial"))
        assert not (d / "out" / "results.csv").exists()
    if flags:
        return
    # The same sweep elsewhere completes.
    cli("sweep", spec, "-o", tmp_path / "out", "-q", "--no-report")
    assert len(pd.read_csv(tmp_path / "out" / "results.csv")) == 400


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

def run_lookaside(*args: str | bytes | os.PathLike[str], **kw) -> subprocess.CompletedProcess:
    """Run ``lookaside ARGS…`` as a user would, each argument a string, a path or raw bytes
    (as a shell passes them, whatever their encoding); other keywords (``input``,
    ``timeout``, ``text``) go to :func:`subprocess.run`. Output is bytes unless ``text``."""
    return subprocess.run([sys.executable, "-m", "lookaside.cli", *map(os.fspath, args)],
                          capture_output=True, **kw)


def _refs(stdout: bytes) -> int:
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
    want = run_lookaside("simulate", f, *tlb, "--json")
    assert want.returncode == 0, want.stderr
    for path in ("-", "/dev/stdin"):
        for reading in ("one-thread", "pipelined"):
            got = run_lookaside("simulate", path, *tlb, "--json", "--reading", reading,
                             input=f.read_bytes())
            assert got.returncode == 0, (path, got.stderr)
            assert _refs(got.stdout) == _refs(want.stdout) > 200_000, (path, reading)
            a, b = json.loads(got.stdout), json.loads(want.stdout)
            assert a["structures"] == b["structures"]
    info = run_lookaside("info", "-", "--json", input=f.read_bytes())
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["references"] == _refs(want.stdout)
    assert json.loads(info.stdout)["path"] == "<stdin>"


def test_a_trace_through_a_fifo_and_a_process_substitution(stream_traces, tmp_path: Path):
    f = stream_traces["t.din.gz"]
    want = _refs(run_lookaside("simulate", f, "--tlb", "dtlb:entries=64", "--json").stdout)
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as w:
            w.write(f.read_bytes())

    t = threading.Thread(target=feed)
    t.start()
    got = run_lookaside("simulate", fifo, "--tlb", "dtlb:entries=64", "--json", timeout=60)
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
    p = run_lookaside("simulate", "-", "--tlb", "dtlb:entries=64", "--format", "din", input=b"")
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.decode().strip() == ("lookaside: error: <stdin>: events: the trace holds no "
                                         "event: nothing to simulate")
    # info still describes it: an empty trace is a fact, not an error.
    assert json.loads(cli("info", empty, "--json").stdout)["events"] == 0


# --- Hostile input from the command line: bytes that are not UTF-8 -----------------------

BAD_TOML = b'[machine]\nname = "caf\xe9"\n'  # Latin-1, not UTF-8: byte 21 is bad


def lookaside_bytes(*args: str | bytes) -> subprocess.CompletedProcess:
    """:func:`run_lookaside` with its output decoded (bytes that are not UTF-8 escaped)."""
    return run_lookaside(*args, text=True, errors="backslashreplace")


def test_a_config_or_sweep_file_that_is_not_utf8_names_the_file_and_byte(cli, demo: Path,
                                                                        tmp_path: Path):
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(BAD_TOML)
    for args in (("simulate", demo, "--config", bad), ("config", "--config", bad)):
        assert_clean_error(cli(*args, check=False), str(bad),
                           "line 2, column 12 (byte offset 21)", "UTF-8")
    sweep = tmp_path / "s.toml"
    sweep.write_bytes(b'[sweep]\nname = "\xff"\ntraces = ["demo"]\n')
    assert_clean_error(cli("sweep", sweep, "-q", "--no-report", check=False), str(sweep),
                       "byte offset 16", "UTF-8")
    # A sweep's machine file too.
    sweep.write_bytes(b'[sweep]\nmachine = "latin1.toml"\ntraces = ["demo"]\n')
    assert_clean_error(cli("sweep", sweep, "-q", "--no-report", check=False), str(bad),
                       "line 2, column 12 (byte offset 21)")


def test_tlb_and_set_arguments_that_are_not_utf8_are_clean_errors(demo: Path):
    for args in ((b"--tlb", b"dtlb:entries=6\xff4"), (b"--set", b"tlb.dtlb.entries=\xff")):
        for cmd in (b"config", b"simulate"):
            trace = [os.fsencode(demo)] if cmd == b"simulate" else []
            p = lookaside_bytes(cmd, *trace, b"--tlb", b"dtlb:entries=64", *args)
            assert_clean_error(p, args[0].decode(), "not UTF-8")


def test_the_python_api_raises_config_error_for_text_that_is_not_utf8(demo: Path,
                                                                      tmp_path: Path):
    import lookaside

    bad = tmp_path / "latin1.toml"
    bad.write_bytes(BAD_TOML)
    with pytest.raises(lookaside.ConfigError, match=r"line 2, column 12 \(byte offset 21\)"):
        lookaside.check_config(bad)
    with pytest.raises(lookaside.ConfigError, match="--tlb"):
        lookaside.simulate(demo, None, tlb=["dtlb:entries=6\udcff4"])
    with pytest.raises(lookaside.ConfigError, match="--set"):
        lookaside.check_config(overrides=["machine.name=\udcff"])
    with pytest.raises(lookaside.ConfigError, match="latin1.toml"):
        bad.with_name("sw.toml").write_bytes(b'[sweep]\nmachine = "latin1.toml"\n'
                                             b'traces = ["demo"]\n')
        load_spec(bad.with_name("sw.toml"))


def test_trace_and_output_names_that_are_not_utf8_work(demo: Path, tmp_path: Path):
    # On Linux a file name is bytes: one that is not UTF-8 is still a file to read and write.
    d = os.fsencode(tmp_path)
    src = d + b"/caf\xe9.lks"
    with open(src, "wb") as f:
        f.write(demo.read_bytes())
    p = lookaside_bytes(b"simulate", src, b"--json", b"-o", d + b"/r\xe9sult.json")
    assert p.returncode == 0, p.stderr
    assert json.loads(Path(os.fsdecode(d + b"/r\xe9sult.json")).read_text())["structures"]
    p = lookaside_bytes(b"info", src, b"--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["references"] > 0
    p = lookaside_bytes(b"convert", src, d + b"/\xff.din")
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(d + b"/\xff.din") > 0
    # A missing one is a clean error naming it.
    p = lookaside_bytes(b"simulate", d + b"/no\xff.lks")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("lookaside: error: ") and "no" in p.stderr


# --- Signals: every long command stops at once, cleans up and says so -------------------

#: A stream long enough that no command ends on its own during a test.
ENDLESS = "workload:synthetic,refs=1e12,seed=1"


def start(*args: str | os.PathLike[str], cwd: Path) -> subprocess.Popen:
    """Start ``lookaside ARGS…`` with SIGINT at its default (a shell may start a background
    job with SIGINT ignored, and Python then leaves it so)."""
    return subprocess.Popen([sys.executable, "-m", "lookaside.cli", *map(str, args)],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def prompt(seconds: float) -> float:
    """How long stopping may take: `seconds` on an idle machine, stretched by the load per
    CPU (on a shared machine at load 12 on 2 CPUs a process gets a sixth of one), so that
    the tests tell a prompt stop from a late one and not a busy machine from an idle one.
    A command that ignores the signal runs on: `interrupt` gives up after a minute."""
    return seconds * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def interrupt(p: subprocess.Popen, sig: int, after: float = 1.5) -> tuple[str, float]:
    """Send `sig` to `p` once it has run `after` seconds; returns its stderr and how long
    it took to end after the signal."""
    time.sleep(after)
    assert p.poll() is None, p.communicate()
    p.send_signal(sig)
    t0 = time.monotonic()
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise AssertionError(f"did not stop on {signal.Signals(sig).name}") from None
    return err, time.monotonic() - t0


def sweep_spec(d: Path) -> Path:
    spec = d / "s.toml"
    spec.write_text('[sweep]\ntlb = ["dtlb:entries=4,ways=full,page=4k"]\n'
                    f'traces = ["{ENDLESS}"]\n[axes]\n"tlb.dtlb.entries" = [1, 2, 4, 8]\n')
    return spec


LONG_COMMANDS = {
    "simulate": lambda d: ["simulate", ENDLESS, "--tlb", "d:entries=64", "-o", d / "r.json"],
    "simulate-one-thread": lambda d: ["simulate", ENDLESS, "--reading", "one-thread",
                                      "-o", d / "r.json"],
    "convert": lambda d: ["convert", ENDLESS, d / "t.din.xz"],
    "convert-native": lambda d: ["convert", ENDLESS, d / "t.lks"],
    "info": lambda d: ["info", ENDLESS],
    "map": lambda d: ["map", ENDLESS, "--interval", "1000000000000", "-o", d / "m.csv"],
    "sweep-one-pass": lambda d: ["sweep", sweep_spec(d), "-o", d / "sw", "-q"],
    "sweep": lambda d: ["sweep", sweep_spec(d), "-o", d / "sw", "-q", "--no-one-pass"],
    "bench": lambda d: ["bench", ENDLESS, "-q", "-o", d / "b.txt"],
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", list(LONG_COMMANDS))
def test_a_signal_stops_a_long_command_within_a_second(tmp_path: Path, command: str,
                                                       sig: int):
    out = tmp_path / "out"
    out.mkdir()
    args = LONG_COMMANDS[command](out)
    before = {p.relative_to(out) for p in out.rglob("*")}
    p = start(*args, cwd=out)
    err, took = interrupt(p, sig)
    assert p.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == \
        f"lookaside: interrupted ({signal.Signals(sig).name})", err
    assert "Traceback" not in err
    assert took < prompt(1.5), f"{command} took {took:.1f} s to stop"
    # Nothing written: no output, no partial file (only what was there, and an empty
    # sweep's directory of points).
    left = {p.relative_to(out) for p in out.rglob("*")} - before
    assert left <= {Path("sw"), Path("sw/points")}, left


def test_a_trace_capture_stops_on_sigterm(tmp_path: Path):
    import shutil

    if not shutil.which("valgrind"):
        pytest.skip("needs valgrind")
    p = start("trace", "--via", "valgrind", "-q", "-o", tmp_path / "t.lks", "--",
              "/bin/sh", "-c", "while :; do :; done", cwd=tmp_path)
    err, took = interrupt(p, signal.SIGTERM, after=3)
    assert p.returncode == 143, err
    assert "interrupted (SIGTERM)" in err and took < prompt(3), (err, took)
    assert list(tmp_path.iterdir()) == []


def test_a_killed_command_leaves_a_partial_file_that_the_next_run_removes(tmp_path: Path,
                                                                          demo: Path):
    p = start("convert", ENDLESS, tmp_path / "t.din", cwd=tmp_path)
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob(".t.din.*.partial")) and time.monotonic() < deadline:
        time.sleep(0.1)
    p.kill()
    p.communicate()
    stale = list(tmp_path.glob(".*.partial"))
    assert [s.name for s in stale] == [f".t.din.{p.pid}.0.partial"]
    # The next command writing into the directory (any of them) tidies it.
    p = subprocess.run([sys.executable, "-m", "lookaside.cli", "simulate", demo,
                        "-o", tmp_path / "r.json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_reproduce_within_a_second(tmp_path: Path, sig: int):
    p = start("reproduce", "uhlig94", "--out", tmp_path / "rep", cwd=tmp_path)
    err, took = interrupt(p, sig, after=3)
    assert p.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1] == \
        f"lookaside: interrupted ({signal.Signals(sig).name})", err
    assert took < prompt(1.5), f"reproduce took {took:.1f} s to stop"
    assert not (tmp_path / "rep" / "uhlig94" / "verdict.json").exists()
    assert not [f for f in tmp_path.rglob("*") if f.name.endswith((".partial", ".tmp"))]


def test_a_config_file_whose_name_is_not_utf8_is_read(tmp_path: Path):
    d = os.fsencode(tmp_path)
    with open(d + b"/caf\xe9.toml", "wb") as f:
        f.write(b'[[tlb]]\nname = "dtlb"\nentries = 64\nwaays = 4\n')
    p = lookaside_bytes(b"config", b"--config", d + b"/caf\xe9.toml")
    # Its content is read; the error (a misspelt key) names it, bytes escaped.
    assert_clean_error(p, "caf\\xe9.toml", "waays")


def test_a_config_name_too_long_for_a_path_is_a_config_error():
    # TOML text passed where a path or preset name goes: a ConfigError, not an OSError.
    text = "[[tlb]]\nname = 'dtlb'\nentries = 64\n" * 20
    with pytest.raises(lookaside.ConfigError, match="not a config file"):
        lookaside.machine_data(text)


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
