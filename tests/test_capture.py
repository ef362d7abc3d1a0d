"""`lookaside trace`: small real captures (QEMU and valgrind), their agreement, and errors.

Counts of the same program recorded by QEMU's plugin and by valgrind lackey agree to within
``TOLERANCE`` for programs whose own work dominates their start-up (measured: 0.2-0.4% for
the two below). They are not identical: the two run the dynamic loader and libc start-up
differently (valgrind preloads its own library; glibc picks string routines for the CPU
each one presents), which costs ~20,000 instructions either way; for a program that does
almost nothing after start-up (``/bin/true``) QEMU records ~18% fewer instructions.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lookaside
from lookaside import capture

#: Largest relative difference accepted between QEMU's and valgrind's counts of one kind.
TOLERANCE = 0.02

needs_gcc = pytest.mark.skipif(not shutil.which("gcc"), reason="needs gcc")
needs_qemu = pytest.mark.skipif(not shutil.which("qemu-x86_64"), reason="needs qemu-user")
needs_valgrind = pytest.mark.skipif(not shutil.which("valgrind"), reason="needs valgrind")

SUM = r"""
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long *a = malloc(n * sizeof *a);
    for (long i = 0; i < n; i++) a[i] = i;
    long s = 0;
    for (int r = 0; r < 10; r++) for (long i = 0; i < n; i++) s += a[i];
    printf("%ld\n", s);
    return 0;
}
"""

THREADS = r"""
#include <pthread.h>
#include <stdio.h>
#define N 100000
static long a[2][N];
static void *work(void *p) {
    long *v = p, s = 0;
    for (int r = 0; r < 5; r++)
        for (long i = 0; i < N; i++) { v[i] += i; s += v[i]; }
    return (void *)s;
}
int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, work, a[i]);
    long total = 0;
    for (int i = 0; i < 2; i++) { void *r; pthread_join(t[i], &r); total += (long)r; }
    printf("%ld\n", total);
    return 0;
}
"""


@pytest.fixture(scope="session")
def programs(tmp_path_factory) -> dict[str, Path]:
    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    d = tmp_path_factory.mktemp("progs")
    out = {}
    for name, src, flags in [("sum", SUM, []), ("threads", THREADS, ["-pthread"])]:
        c = d / f"{name}.c"
        c.write_text(src)
        subprocess.run(["gcc", "-O1", *flags, "-o", str(d / name), str(c)], check=True)
        out[name] = d / name
    return out


@pytest.fixture(scope="session")
def env(tmp_path_factory) -> dict[str, str]:
    """The environment of the CLI runs: a plugin cache of their own."""
    e = dict(os.environ)
    e["LOOKASIDE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    for k in ("LOOKASIDE_QEMU", "LOOKASIDE_VALGRIND", "CC"):
        e.pop(k, None)
    return e


def trace(env: dict[str, str], *args, **more: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lookaside.cli", "trace", *map(str, args)],
                          capture_output=True, text=True, env={**env, **more})


def counts(path: Path) -> dict[str, int]:
    return lookaside.info(path)["kinds"]


def check_error(p: subprocess.CompletedProcess, text: str) -> None:
    assert p.returncode == 2, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("lookaside: error: ") and text in last, p.stderr


@needs_qemu
def test_capture_a_program_with_qemu(programs, env, tmp_path, cli):
    out = tmp_path / "sum.lks"
    p = trace(env, "-o", out, "--", programs["sum"], "200000")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(10 * 199999 * 200000 // 2)  # the program's own output
    assert "references (fetch" in p.stderr and "M references/s recorded" in p.stderr
    i = json.loads(cli("info", out, "--json").stdout)
    assert i["format"] == "native"
    k = i["kinds"]
    assert k["fetch"] > 10 * 200000 * 3 and k["load"] > 10 * 200000 and k["store"] > 200000
    assert i["modes"]["user"] == i["references"]
    meta = i["metadata"]
    assert meta["command"].endswith("sum 200000")
    assert meta["extra"]["capture"] == "qemu-user plugin"
    assert "QEMU" in meta["extra"]["capture_tool"] or "qemu" in meta["extra"]["capture_tool"]
    # What ran it, as for a whole system: the kernel serving its calls, the machine.
    assert set(meta["extra"]) == {"capture", "capture_tool", "kernel", "machine", "date"}
    assert meta["extra"]["kernel"] == f"{platform.system()} {platform.release()}"
    assert meta["extra"]["machine"].startswith(platform.machine())
    assert "qemu-x86_64's" in meta["extra"]["machine"]
    # The trace feeds every other command.
    r = lookaside.simulate(out, None, tlb=["dtlb:entries=64,ways=full,policy=lru,page=4k"])
    assert r["dtlb"]["accesses"] >= k["load"] + k["store"]


@needs_qemu
def test_a_capture_streams_into_a_simulation_through_a_fifo(programs, env, tmp_path):
    """`trace -o FIFO` writes into the FIFO as the program runs (no file appears, the FIFO
    stays one), and `simulate FIFO` reads it at the same time: the result equals that of
    the same capture stored in a file."""
    fifo = tmp_path / "live.lks"
    os.mkfifo(fifo)
    tlb = "dtlb:entries=64,ways=full,policy=lru,page=4k"
    cmd = [sys.executable, "-m", "lookaside.cli"]
    sim = subprocess.Popen([*cmd, "simulate", fifo, "--tlb", tlb, "--json"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p = trace(env, "-o", fifo, "--", programs["sum"], "50000")
    streamed, err = sim.communicate(timeout=120)
    assert p.returncode == 0 and sim.returncode == 0, (p.stderr, err)
    assert "streamed into a FIFO" in p.stderr
    assert fifo.is_fifo() and sorted(tmp_path.iterdir()) == [fifo]
    stored = tmp_path / "stored.lks"
    assert trace(env, "-o", stored, "--", programs["sum"], "50000").returncode == 0
    live, kept = json.loads(streamed), lookaside.simulate(stored, None, tlb=[tlb])
    assert live["trace"]["references"] == kept.data["trace"]["references"] > 50000 * 10
    assert live["structures"]["dtlb"]["misses"] == kept["dtlb"]["misses"]


@needs_qemu
def test_system_calls_are_marked_where_they_happen(env, tmp_path, cli):
    c = tmp_path / "calls.c"
    c.write_text("#include <unistd.h>\n#include <sys/syscall.h>\n"
                 "int main(void) { for (int i = 0; i < 50; i++) syscall(SYS_getppid); "
                 "return 0; }\n")
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / "calls"), str(c)], check=True)
    base, more = tmp_path / "base.lks", tmp_path / "more.lks"
    assert trace(env, "-o", base, "--", "true").returncode == 0
    p = trace(env, "-o", more, "--", tmp_path / "calls")
    assert p.returncode == 0, p.stderr
    marked = counts(more)["marker"]
    assert f"{marked:,} system calls (marked in the trace)" in p.stderr
    # The program's 50 calls beyond what start-up and exit make (`true` makes about as many).
    assert 50 <= marked - counts(base)["marker"] <= 60
    # An OS model serves them: a microkernel's server touches mapped kernel data.
    w = f"workload:os,structure=microkernel,trace={more}"
    r = json.loads(cli("simulate", w, "--config", "decstation3100-mach3", "--json").stdout)
    assert r["traps"]["counts"]["L1K"] > 0


@needs_qemu
@needs_valgrind
@pytest.mark.parametrize("name,args", [("sum", ["100000"]), ("threads", [])])
def test_counts_agree_with_valgrind(programs, env, tmp_path, name, args):
    got = {}
    for via in ("qemu", "valgrind"):
        out = tmp_path / f"{name}.{via}.lks"
        p = trace(env, "-o", out, "--via", via, "--", programs[name], *args)
        assert p.returncode == 0, p.stderr
        got[via] = counts(out)
    for kind in ("fetch", "load", "store"):
        q, v = got["qemu"][kind], got["valgrind"][kind]
        assert abs(q - v) <= TOLERANCE * v, (kind, q, v)


@needs_qemu
def test_threads_are_all_recorded(programs, env, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKASIDE_CACHE_DIR", env["LOOKASIDE_CACHE_DIR"])
    s = capture.record([str(programs["threads"])], tmp_path / "t.lks", "qemu", quiet=True)
    assert s["threads"] == 3 and s["ending"] == "exit" and s["exit_status"] == 0
    # Each worker runs 5 * 100000 iterations of a loop with a load and a store.
    assert s["stores"] >= 2 * 5 * 100000 and s["loads"] >= 2 * 5 * 100000
    assert counts(tmp_path / "t.lks")["store"] == s["stores"]


@needs_qemu
@pytest.mark.parametrize("argv", [["true"], ["ls", "/"]])
def test_capture_system_binaries(env, tmp_path, argv):
    out = tmp_path / "sys.lks"
    p = trace(env, "-o", out, "--", *argv)
    assert p.returncode == 0, p.stderr
    k = counts(out)
    assert k["fetch"] > 50_000 and k["load"] > 10_000 and k["store"] > 5_000


@needs_qemu
def test_a_failing_program_is_still_recorded(env, tmp_path):
    out = tmp_path / "false.lks"
    p = trace(env, "-o", out, "--", "false")
    assert p.returncode == 0, p.stderr
    assert "the program ended with exit status 1" in p.stderr
    assert counts(out)["fetch"] > 0


@needs_qemu
def test_scripts_run_under_their_interpreter(env, tmp_path):
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    p = trace(env, "-o", tmp_path / "s.lks", "--", script)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hi\n" and "`/bin/sh " in p.stderr


@needs_qemu
def test_a_background_process_is_not_waited_for(env, tmp_path):
    # (Not through pipes here: the sleep would hold them open, and the test would wait.)
    t0 = time.monotonic()
    code = subprocess.call([sys.executable, "-m", "lookaside.cli", "trace", "-q", "-o",
                            str(tmp_path / "bg.lks"), "--", "sh", "-c", "sleep 4 &"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    assert code == 0 and time.monotonic() - t0 < 3.5


@needs_valgrind
def test_falls_back_to_valgrind_and_says_so(programs, env, tmp_path, cli):
    out = tmp_path / "fb.lks"
    p = trace(env, "-o", out, "--", programs["sum"], "1000",
              LOOKASIDE_QEMU="no-such-qemu-binary")
    assert p.returncode == 0, p.stderr
    assert "no-such-qemu-binary not found: capturing with valgrind lackey instead" in p.stderr
    i = json.loads(cli("info", out, "--json").stdout)
    assert i["metadata"]["extra"]["capture"] == "valgrind lackey"
    extra = i["metadata"]["extra"]
    assert set(extra) == {"capture", "capture_tool", "kernel", "machine", "date"}
    assert extra["kernel"] == f"{platform.system()} {platform.release()}"
    assert "valgrind" in extra["capture_tool"] and "valgrind's CPUID" in extra["machine"]
    assert all(i["kinds"][k] > 0 for k in ("fetch", "load", "store"))


@needs_valgrind
def test_valgrind_failures_leave_no_output(env, tmp_path):
    out = tmp_path / "x.lks"
    check_error(trace(env, "-o", out, "--via", "valgrind", "--", "sh", "-c", "kill -9 $$"),
                "valgrind failed (killed by signal 9)")
    assert not out.exists()


def test_errors(env, tmp_path, programs):
    out = tmp_path / "x.lks"
    check_error(trace(env, "-o", out, "--", "no-such-program-here"),
                "no-such-program-here: program not found")
    check_error(trace(env, "-o", out), "no program given")
    check_error(trace(env, "-o", out, "--via", "qemu", "--", programs["sum"],
                      LOOKASIDE_QEMU="no-such-qemu-binary"),
                "no-such-qemu-binary not found (install qemu-user)")
    check_error(trace(env, "-o", out, "--", programs["sum"], LOOKASIDE_QEMU="no-such-qemu",
                      LOOKASIDE_VALGRIND="no-such-valgrind"),
                "neither QEMU (qemu-user) nor valgrind is installed")
    check_error(trace(env, "-o", tmp_path / "nodir" / "x.lks", "--", "true"), "no such directory")
    notelf = tmp_path / "data.bin"
    notelf.write_bytes(b"\0" * 64)
    notelf.chmod(0o755)
    check_error(trace(env, "-o", out, "--via", "qemu", "--", notelf),
                "not an ELF executable or a #! script")
    assert not out.exists()


@needs_qemu
def test_qemu_failures_leave_no_output(env, tmp_path, programs):
    out = tmp_path / "x.lks"
    # "QEMU" that exits at once without recording anything.
    check_error(trace(env, "-o", out, "--", programs["sum"], LOOKASIDE_QEMU="false"),
                "false failed (exit status 1)")
    # The traced process is killed: the stream has no end.
    p = trace(env, "-o", out, "--", "sh", "-c", "kill -9 $$")
    check_error(p, "failed (killed by signal 9)")
    # The plugin cannot be built.
    cache = tmp_path / "empty-cache"
    check_error(trace(env, "-o", out, "--", programs["sum"], CC="false",
                      LOOKASIDE_CACHE_DIR=str(cache)),
                "building the QEMU plugin failed")
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_plugin_is_built_once(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("needs gcc")
    so = capture.build_plugin(tmp_path)
    assert so.is_file() and so.suffix == ".so"
    # Cached: no compiler needed the second time.
    assert capture.build_plugin(tmp_path, cc="no-such-compiler") == so
    with pytest.raises(lookaside.LookasideError, match="needs a C compiler"):
        capture.build_plugin(tmp_path / "other", cc="no-such-compiler")


FORK = r"""
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    volatile long s = 0;
    pid_t p = fork();
    for (long i = 0; i < 100000; i++) s += i;
    if (p == 0) return 0;
    waitpid(p, 0, 0);
    printf("%ld\n", (long)s);
    return 0;
}
"""


@needs_qemu
@needs_gcc
def test_exec_and_fork(env, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKASIDE_CACHE_DIR", env["LOOKASIDE_CACHE_DIR"])
    # execve: the trace ends there, complete, and says so.
    s = capture.record(["sh", "-c", "exec true"], tmp_path / "e.lks", "qemu", quiet=True)
    assert s["ending"] == "exec" and counts(tmp_path / "e.lks")["fetch"] == s["fetches"] > 0
    # fork: only the parent is recorded (the child's copy of the loop is not).
    c = tmp_path / "fork.c"
    c.write_text(FORK)
    subprocess.run(["gcc", "-O1", "-o", str(tmp_path / "fork"), str(c)], check=True)
    s = capture.record([str(tmp_path / "fork")], tmp_path / "f.lks", "qemu", quiet=True)
    # One store per iteration (plus ~20,000 in start-up); twice that if the child counted.
    assert s["ending"] == "exit" and 100_000 < s["stores"] < 160_000


def test_the_metadata_names_the_cpu_the_program_was_shown(monkeypatch):
    monkeypatch.setenv("QEMU_CPU", "qemu64")
    meta = dict(capture.host_metadata("qemu", "qemu-x86_64"))
    assert meta["kernel"] == f"{platform.system()} {platform.release()}"
    assert meta["machine"].startswith(platform.machine())
    assert meta["machine"].endswith("qemu-x86_64's CPU model qemu64 (QEMU_CPU)")
    monkeypatch.delenv("QEMU_CPU")
    assert dict(capture.host_metadata("qemu", "qemu-x86_64"))["machine"].endswith(
        "qemu-x86_64's default CPU model")
