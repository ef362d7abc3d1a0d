"""Shared fixtures: small real traces and a runner for the installed ``lookaside`` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import lookaside

DATA = Path(__file__).resolve().parent.parent / "crates" / "lookaside" / "tests" / "data"


@pytest.fixture(scope="session")
def demo() -> Path:
    return lookaside.demo_trace()


@pytest.fixture(scope="session")
def lackey_trace() -> Path:
    """A lackey trace of a real program (see crates/lookaside/tests/data/README.md)."""
    return DATA / "sortprog.lackey.zst"


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``lookaside ARGS…`` as a user would, through the installed module."""
    p = subprocess.run([sys.executable, "-m", "lookaside.cli", *map(str, args)],
                       capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


@pytest.fixture
def cli():
    return run_cli


def _repeatable(info: dict) -> dict:
    """A trace's `info`, less what differs between two captures of the same inputs: the
    date of the capture and the file's path."""
    del info["metadata"]["extra"]["date"], info["path"]
    return info


@pytest.fixture
def repeatable():
    """`info` of a trace less its capture date and path (see `_repeatable`)."""
    return _repeatable
