"""The stored corpus: every trace the recipes use is in the package, within its budget, says
what it is and how it was cut; a cut is the window it says; a recapture gives the same
events."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import lookaside
from lookaside import corpus

MIB = 1 << 20


def _stored() -> dict[str, Path]:
    return {name: corpus.directory() / f"{name}.lks" for name in corpus.STORED}


def test_every_stored_trace_is_there_within_the_budget_and_says_what_it_is():
    paths = _stored()
    assert all(p.is_file() for p in paths.values()), [n for n, p in paths.items()
                                                       if not p.is_file()]
    assert sum(p.stat().st_size for p in paths.values()) <= 64 * MIB
    kernel = "linux-image-" + corpus.KERNEL
    for name, p in paths.items():
        info = lookaside.info(p)
        extra = info["metadata"]["extra"]
        workload, fs = corpus.STORED[name]
        assert extra["corpus"] == name
        assert extra["workload"] == f"workload {workload}"
        assert extra["file_service"].split(":")[0] == fs
        assert extra["kernel_package"] == kernel
        assert info["references"] == corpus.CUT_REFERENCES, name
        phase = corpus.MEASURED_PHASE if corpus.marks_measured_phase(workload) else None
        assert (f"from the start of phase '{phase}'" if phase else
                "from the start of the trace") in extra["cut"]
        assert info["with_paddr"] == info["references"]
        assert info["kinds"]["context_switch"] >= 1


def test_a_cut_keeps_the_window_after_the_state_before_it(tmp_path, cli):
    """`lookaside convert --phase --skip --take` of a stored trace: the window is the
    references it names, the address space running comes first, and a cut of a cut says
    both cuts."""
    src = corpus.path("oltp-4")
    out = tmp_path / "w.lks"
    cli("convert", "-q", "--skip", "1000", "--take", "5000", str(src), str(out))
    info = lookaside.info(out)
    assert info["references"] == 5000
    cut = info["metadata"]["extra"]["cut"]
    assert cut.count("; then ") == 1 and "the next 5000 references after skipping 1000" in cut
    # The window's references are the source's 1001st to 6000th, in order (din keeps the
    # references alone).
    cli("convert", "-q", "--take", "6000", str(src), str(tmp_path / "whole.din"))
    cli("convert", "-q", str(out), str(tmp_path / "window.din"))
    whole = (tmp_path / "whole.din").read_text().splitlines()
    assert (tmp_path / "window.din").read_text().splitlines() == whole[1000:6000]
    # An unmarked phase and a level out of range are errors that name them.
    p = cli("convert", "-q", "--phase", "nope", str(src), str(tmp_path / "x.lks"), check=False)
    assert p.returncode == 2 and "marks no such phase" in p.stderr
    assert not (tmp_path / "x.lks").exists()
    p = cli("convert", "-q", "--level", "40", str(src), str(tmp_path / "y.lks"), check=False)
    assert p.returncode == 2 and "level: 40" in p.stderr


@pytest.mark.skipif(not shutil.which("qemu-system-x86_64"), reason="needs qemu-system-x86")
def test_a_recapture_gives_the_stored_events(tmp_path, repeatable):
    """`ring` recaptured (the kernel the corpus names, the same workload) and cut as stored:
    the same events, bit for bit, and the same summary but for the capture's date."""
    out = corpus.recapture("ring", tmp_path / "ring.lks")
    stored = corpus.path("ring")
    new, old = (repeatable(lookaside.info(p)) for p in (out, stored))
    # The stored corpus names the initramfs it was captured with, whose marker module was
    # built on the capturing host with an ELF build-id derived from its build directory's name
    # (since mapped away: see test_the_marker_module_builds_the_same_anywhere); the module's
    # code and size, and so the events, are the same.
    for info in (new, old):
        del info["metadata"]["extra"]["initramfs"]
    assert new == old
    assert out.read_bytes()[-4096:] == stored.read_bytes()[-4096:]
