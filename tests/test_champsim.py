"""ChampSim traces: a real program captured, converted to ChampSim, read back and counted.

A ChampSim record is one instruction with at most 4 loads and 2 stores, so the conversion
keeps every instruction and leaves out only the data references a record cannot hold (and
control events); ``lookaside convert`` says how many, and the counts must add up exactly.
"""

from __future__ import annotations

import json
import lzma
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import lookaside

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    long *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (long i = 0; i < n; i++) a[i] = i * 7 % n;
    memcpy(b, a, n * sizeof *a);
    long s = 0;
    for (int r = 0; r < 3; r++) for (long i = 0; i < n; i++) s += b[a[i]];
    printf("%ld\n", s);
    return 0;
}
"""

can_capture = pytest.mark.skipif(
    not shutil.which("gcc") or not (shutil.which("qemu-x86_64") or shutil.which("valgrind")),
    reason="needs gcc and qemu-user or valgrind")


def info(path: Path, *more: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "lookaside.cli", "info", str(path), "--json",
                        *more], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def convert(src: Path, dst: Path, *more: str) -> tuple[int, int]:
    """``lookaside convert``; returns the events written and left out, as it reports them."""
    p = subprocess.run([sys.executable, "-m", "lookaside.cli", "convert", str(src), str(dst),
                        *more], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    m = re.fullmatch(r"(.+): (\d+) events(?: \((\d+) left out: the output format cannot "
                     r"represent them\))?\n", p.stderr)
    assert m and m.group(1) == str(dst), p.stderr
    return int(m.group(2)), int(m.group(3) or 0)


def error(path: Path, *more: str) -> str:
    p = subprocess.run([sys.executable, "-m", "lookaside.cli", "info", str(path), *more],
                       capture_output=True, text=True)
    assert p.returncode == 2, (p.returncode, p.stderr)
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("lookaside: error: ") and "Traceback" not in p.stderr, p.stderr
    return last


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    """A real program recorded by ``lookaside trace`` (QEMU, or valgrind without it)."""
    d = tmp_path_factory.mktemp("champsim")
    (d / "prog.c").write_text(PROGRAM)
    subprocess.run(["gcc", "-O1", "-o", str(d / "prog"), str(d / "prog.c")], check=True)
    env = dict(os.environ, LOOKASIDE_CACHE_DIR=str(d / "cache"))
    out = d / "prog.lks"
    p = subprocess.run([sys.executable, "-m", "lookaside.cli", "trace", "-q", "-o", str(out),
                        "--", str(d / "prog"), "20000"], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(3 * sum(i * 7 % 20000 for i in range(20000)))
    return out


@can_capture
def test_a_captured_program_converts_to_champsim_and_back(captured, tmp_path):
    orig = info(captured)
    k = orig["kinds"]
    assert k["fetch"] > 20000 * 3 * 4 and k["load"] > 20000 * 3 * 2

    cs = tmp_path / "prog.champsimtrace.xz"
    written, left_out = convert(captured, cs)
    assert written + left_out == orig["events"]
    with lzma.open(cs) as f:
        assert len(f.read()) == 64 * k["fetch"], "one 64-byte record per instruction"

    back = info(cs)
    assert back["format"] == "champsim"
    b = back["kinds"]
    # Every instruction is kept; only data references a record cannot hold (a fifth load or
    # a third store of one instruction) and control events are left out, and they add up.
    assert b["fetch"] == k["fetch"]
    assert b["load"] <= k["load"] and b["store"] <= k["store"]
    assert back["events"] == written
    assert back["references"] + left_out == orig["events"]
    assert k["load"] + k["store"] - b["load"] - b["store"] <= 0.01 * (k["load"] + k["store"])
    assert back["modes"] == {"user": back["references"], "kernel": 0}
    assert back["asids"] == 1 and back["with_paddr"] == 0
    # 1-byte accesses never reach into a page the original did not touch.
    assert back["pages"] <= orig["pages"]

    # Read back, the ChampSim trace converts without loss, and simulates.
    lks = tmp_path / "back.lks"
    assert convert(cs, lks) == (written, 0)
    assert info(lks)["kinds"] == b
    r = lookaside.simulate(cs, None, tlb=["dtlb:entries=64,ways=full,policy=lru,page=4k"])
    assert r["dtlb"]["accesses"] == b["load"] + b["store"]
    again = tmp_path / "again.champsim"
    assert convert(lks, again) == (written, 0)
    with lzma.open(cs) as f:
        assert again.read_bytes() == f.read(), "ChampSim to native and back is exact"


@can_capture
def test_champsim_is_known_by_name_or_format_and_cut_files_are_errors(captured, tmp_path):
    cs = tmp_path / "prog.champsimtrace"
    written, _ = convert(captured, cs)
    data = cs.read_bytes()

    plain = tmp_path / "prog.trace"
    plain.write_bytes(data)
    assert "name them .champsimtrace" in error(plain)
    assert info(plain, "-f", "champsim")["events"] == written

    cut = tmp_path / "cut.champsimtrace.xz"
    cut.write_bytes(lzma.compress(data[:-24]))
    last = error(cut)
    start = len(data) - 64
    assert (f"byte offset {start + 40}: source_memory: truncated: the last record (at byte "
            f"offset {start}) has 40 of its 64 bytes") in last, last

    p = subprocess.run([sys.executable, "-m", "lookaside.cli", "convert", str(captured),
                        str(tmp_path / "x.lks"), "--to", "cloudsuite"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "not yet implemented: writing CloudSuite" in p.stderr
