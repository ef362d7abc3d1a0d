"""The stored corpus: whole-system traces of real programs, captured once and kept with the
package, so that a recipe gives the same numbers on any machine and any day.

Each stored trace is a cut of one capture by ``lookaside trace --system`` (see
``data/corpus/README.md`` for what each holds and how it was made): the first
:data:`CUT_REFERENCES` references of the workload's measured phase (the phase its script
marks ``run``; the whole recording when it marks none). :func:`path` gives a stored trace by
name; :func:`recapture` makes it anew, by the same recipe, with the kernel the stored one was
made with. ``LOOKASIDE_CORPUS=DIR`` makes :func:`path` read ``DIR/NAME.lks`` instead (a
corpus recaptured elsewhere, or uncut).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._lookaside import LookasideError, NotYetError

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
#: The kernel every stored trace was captured with (a recapture asks for this exact build).
KERNEL = "6.1.0-56-cloud-amd64=6.1.192-2"


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


def path(name: str) -> Path:
    """The stored trace ``name`` (one of :data:`STORED`)."""
    _check(name)
    p = directory() / f"{name}.lks"
    if not p.is_file():
        w, fs = STORED[name]
        raise LookasideError(
            f"{p}: no such trace; capture it with `lookaside trace --system --workload {w} "
            f"--fs {fs}` (or run the recipe with --recapture)")
    return p


def recapture(name: str, out: str | os.PathLike[str], *,
              say: Callable[[str], Any] | None = None) -> Path:
    """Captures ``name`` anew as it was stored (same workload, file service and kernel) and
    cuts it the same way into ``out``."""
    _check(name)
    raise NotYetError("recapturing the stored corpus is not built yet: capture with "
                      "`lookaside trace --system` and set LOOKASIDE_CORPUS")
