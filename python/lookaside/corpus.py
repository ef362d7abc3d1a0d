"""The stored corpus: whole-system traces of real programs, captured once and kept with the
package, so that a recipe gives the same numbers on any machine and any day.

Each stored trace is a cut of one capture by ``lookaside trace --system`` (see
``data/corpus/README.md`` for what each holds and how it was made): the first
:data:`CUT_REFERENCES` references of the workload's measured phase (from the phase its
script marks ``run``; from the start of the recording when it marks none). :func:`path`
gives a stored trace by name; :func:`recapture` makes it anew by the same recipe, with the
kernel the stored one was made with, and :func:`use_recaptured` makes :func:`path` give
those instead (``lookaside reproduce --recapture``). ``LOOKASIDE_CORPUS=DIR`` makes
:func:`path` read ``DIR/NAME.lks`` instead (a corpus recaptured or cut elsewhere).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._lookaside import LookasideError

#: Stored name → (shipped workload, file service): what ``lookaside trace --system
#: --workload W --fs FS`` captures before the cut.
STORED: dict[str, tuple[str, str]] = {
    "compress": ("compress", "kernel"),
    "pipe": ("pipe", "kernel"),
    "compile": ("compile", "kernel"),
    "compile-user": ("compile", "user"),
    "compile-user2": ("compile", "user2"),
    "oltp-1": ("oltp-1", "kernel"),
    "oltp-4": ("oltp-4", "kernel"),
    "oltp-12": ("oltp-12", "kernel"),
    "ring": ("ring", "kernel"),
}

#: References kept of each capture, from the start of its measured phase.
CUT_REFERENCES = 20_000_000
#: The phase a workload script marks as the one measured (``lookaside-phase run``).
MEASURED_PHASE = "run"
#: zstd level of the stored traces (the smallest files; reading them is as fast).
LEVEL = 19
#: The kernel every stored trace was captured with (a recapture asks for this exact build).
KERNEL = "6.1.0-56-cloud-amd64=6.1.192-2"

_recaptured: dict[str, Any] = {}


def directory() -> Path:
    """Where :func:`path` looks: ``LOOKASIDE_CORPUS``, else the package's stored corpus."""
    env = os.environ.get("LOOKASIDE_CORPUS")
    if env:
        return Path(env)
    from . import _data_dir

    return _data_dir("data") / "corpus"


def _check(name: str) -> None:
    if name not in STORED:
        raise LookasideError(f"no stored trace named '{name}' (have: {', '.join(STORED)})")


def use_recaptured(d: Path | None, say: Callable[[str], Any] | None = None) -> None:
    """From now on :func:`path` recaptures each trace into ``d`` (once: a trace already
    there is reused) instead of reading the stored one; ``None`` goes back to the stored."""
    _recaptured.clear()
    if d is not None:
        _recaptured.update(dir=Path(d), say=say)


def path(name: str) -> Path:
    """The stored trace ``name`` (one of :data:`STORED`), or its recapture (see
    :func:`use_recaptured`)."""
    _check(name)
    if _recaptured:
        p = _recaptured["dir"] / f"{name}.lks"
        say = _recaptured["say"] or (lambda _m: None)
        if p.is_file():
            say(f"{name}: reusing the recapture {p}")
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            say(f"{name}: recapturing (boots Linux under QEMU, 1-2 min)")
            recapture(name, p)
        return p
    p = directory() / f"{name}.lks"
    if not p.is_file():
        w, fs = STORED[name]
        raise LookasideError(
            f"{p}: no such trace; capture it with `lookaside trace --system --workload {w} "
            f"--fs {fs}` and cut it (see lookaside.corpus.cut), or run the recipe with "
            "--recapture")
    return p


def marks_measured_phase(workload: str) -> bool:
    """Does the shipped workload's script mark its measured phase (``lookaside-phase run``)?"""
    from . import _data_dir

    script = _data_dir("tracers") / "system" / "workloads" / f"{workload.split('-')[0]}.sh"
    return f"lookaside-phase {MEASURED_PHASE}" in script.read_text(encoding="utf-8")


def cut(name: str, full: Path, out: str | os.PathLike[str]) -> int:
    """Cuts the whole capture ``full`` of stored trace ``name`` into ``out`` as the corpus
    stores it (:data:`CUT_REFERENCES` references of the measured phase, zstd level
    :data:`LEVEL`; the metadata keeps the capture's, which names everything that went into
    it, and says how it was cut); returns the events written."""
    from . import convert

    _check(name)
    w, _fs = STORED[name]
    return convert(full, out, phase=MEASURED_PHASE if marks_measured_phase(w) else None,
                   take=CUT_REFERENCES, level=LEVEL,
                   extra={"corpus": name})


def recapture(name: str, out: str | os.PathLike[str]) -> Path:
    """Captures ``name`` anew as it was stored (same workload, file service and kernel) and
    cuts it the same way into ``out``; the same kernel and inputs give the same trace, bit
    for bit."""
    from . import metadata
    from .system import record_system

    _check(name)
    w, fs = STORED[name]
    out = Path(out)
    # A trace stored before captures recorded the kernel's TLB flushes is captured again as
    # it was made, without them.
    flushes = "tlb_flushes" in metadata(path(name)).get("extra", {})
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        full = Path(tmp) / "full.lks"
        record_system(w, full, fs=fs, kernel=KERNEL, quiet=True, tlb_flushes=flushes)
        cut(name, full, out)
    return out
