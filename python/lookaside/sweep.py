"""Design-space sweeps: a cross product (or list) of machine variations × traces.

A sweep is described by a TOML file::

    [sweep]
    name = "dtlb-sizes"                 # default: the file's stem
    machine = "modern-x86"              # preset or TOML file (relative to this file); optional
    tlb = ["dtlb:entries=64,ways=full"] # DineroIV-style structures (added to `machine`)
    set = ["machine.seed=1"]            # fixed overrides, as --set
    traces = ["demo", "traces/gcc.lks"] # "demo" is the shipped demo trace

    [axes]                              # every combination of these --set keys
    "tlb.dtlb.entries" = [16, 32, 64, 128]
    "tlb.dtlb.ways" = [4, "full"]

    [[points]]                          # and/or explicit points
    "tlb.dtlb.entries" = 48

Every point is a plain simulation, so results never depend on how many workers ran them or
where. Each finished point is written to ``OUT/points/ID.json`` by write-then-rename, with
``ID`` a hash of everything that determines its result; a rerun skips the points already
there, so a killed sweep resumes with nothing lost or duplicated. The tidy table of every
point of the spec (one row per point × structure) is then written to ``OUT/results.csv``
and ``OUT/results.parquet``.

Points run on local threads by default (the engine releases the GIL), or on a Dask
distributed cluster given its scheduler address; the driver alone writes files.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Callable

from . import ConfigError, _lookaside, _page_bytes, demo_trace, preset_path

#: Bumped when the stored form of a point changes (old points are then rerun).
POINT_VERSION = 1
#: A trace name that is a workload spec (``workload:multiserver,servers=3``), not a file.
WORKLOAD = "workload:"


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep: a trace and the overrides that make its machine."""

    trace: str
    trace_label: str
    settings: tuple[tuple[str, Any], ...]

    def overrides(self) -> list[str]:
        return [f"{k}={json.dumps(v)}" for k, v in self.settings]


@dataclass
class Spec:
    """A parsed sweep file (see the module documentation)."""

    name: str
    source: str
    machine_text: str | None
    machine_name: str
    tlb: list[str]
    fixed: list[str]
    traces: list[tuple[str, str]]
    axes: dict[str, list[Any]] = field(default_factory=dict)
    points: list[dict[str, Any]] = field(default_factory=list)
    #: The normalised TOML of each distinct machine, by its overrides (filled when loaded).
    machines: dict[tuple[str, ...], str] = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        """Every key that varies, axes first, in the order given."""
        keys = list(self.axes)
        for p in self.points:
            keys += [k for k in p if k not in keys]
        return keys

    def expand(self) -> list[Point]:
        """Every point, traces outermost, in a fixed order."""
        combos: list[dict[str, Any]] = []
        if self.axes:
            names = list(self.axes)
            combos += [dict(zip(names, vals)) for vals in product(*self.axes.values())]
        combos += self.points
        if not combos:
            combos = [{}]
        out = []
        for label, path in self.traces:
            for c in combos:
                out.append(Point(path, label, tuple(c.items())))
        return out

    def point_id(self, p: Point) -> str:
        """A hash of everything that determines the point's result."""
        key = {
            "v": POINT_VERSION,
            "machine": self.machine_text,
            "tlb": self.tlb,
            "set": self.fixed + p.overrides(),
        }
        if p.trace.startswith(WORKLOAD):
            key["trace"] = p.trace  # a workload is defined by its spec
        else:
            st = os.stat(p.trace)
            key.update(trace=os.path.abspath(p.trace), trace_bytes=st.st_size,
                       trace_mtime_ns=st.st_mtime_ns)
        raw = json.dumps(key, sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:24]


def _err(source: str, key: str, msg: str) -> ConfigError:
    return ConfigError(f"{source}: {key}: {msg}")


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib  # Python ≥ 3.11
    except ModuleNotFoundError:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and check a sweep file; errors name the file and the key."""
    path = Path(path)
    src = str(path)
    doc = _load_toml(path)
    unknown = set(doc) - {"sweep", "axes", "points"}
    if unknown:
        raise _err(src, sorted(unknown)[0], "unknown table (expected sweep, axes, points)")
    sw = doc.get("sweep", {})
    if not isinstance(sw, dict):
        raise _err(src, "sweep", "must be a table")
    allowed = {"name", "machine", "tlb", "set", "traces"}
    for k in sw:
        if k not in allowed:
            raise _err(src, f"sweep.{k}", f"unknown key (expected {', '.join(sorted(allowed))})")
    base = path.parent

    def strings(key: str) -> list[str]:
        v = sw.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise _err(src, f"sweep.{key}", "must be a list of strings")
        return v

    machine = sw.get("machine")
    if machine is None:
        text, mname = None, "--tlb"
    elif not isinstance(machine, str):
        raise _err(src, "sweep.machine", "must be a preset name or a TOML file")
    elif (base / machine).is_file():
        text, mname = (base / machine).read_text(encoding="utf-8"), str(base / machine)
    else:
        try:
            text, mname = preset_path(machine).read_text(encoding="utf-8"), f"preset {machine}"
        except ConfigError:
            msg = f"'{machine}' is neither a file nor a preset"
            raise _err(src, "sweep.machine", msg) from None
    tlb = strings("tlb")
    if text is None and not tlb:
        raise _err(src, "sweep.machine", "give a machine, tlb structures, or both")
    traces = []
    for t in strings("traces"):
        if t.startswith(WORKLOAD):
            traces.append((t, t))
            continue
        p = demo_trace() if t == "demo" else base / t
        if not p.is_file():
            raise _err(src, "sweep.traces", f"{p}: no such trace file")
        traces.append((t, str(p)))
    if not traces:
        raise _err(src, "sweep.traces", "name at least one trace")
    axes = doc.get("axes", {})
    if not isinstance(axes, dict):
        raise _err(src, "axes", "must be a table of key = [values]")
    for k, v in axes.items():
        if not isinstance(v, list) or not v:
            raise _err(src, f"axes.{k}", "must be a non-empty list of values")
    points = doc.get("points", [])
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise _err(src, "points", "must be an array of tables ([[points]])")
    spec = Spec(sw.get("name", path.stem), src, text, mname, tlb, strings("set"), traces,
                dict(axes), list(points))
    # Every distinct machine must build: check them all before running anything.
    for p in spec.expand():
        ov = tuple(p.overrides())
        if ov in spec.machines:
            continue
        try:
            spec.machines[ov] = _lookaside.check_config(text, mname, tlb, spec.fixed + list(ov))
        except ConfigError as e:
            where = ", ".join(f"{k}={v!r}" for k, v in p.settings) or "the base machine"
            raise ConfigError(f"{src}: point {where}: {e}") from None
    return spec


def run_point(trace: str, machine_text: str | None, machine_name: str, tlb: list[str],
              overrides: list[str]) -> dict[str, Any]:
    """Simulate one point (in whatever process or thread runs it); returns the result."""
    raw = _lookaside.simulate(trace, machine_text, machine_name, tlb, overrides, None, None,
                              "one-thread")
    return json.loads(raw)


def _write_atomically(path: Path, text: str) -> None:
    """Write `text` so that `path` appears only complete; errors name `path`."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


def _stored(points_dir: Path, pid: str) -> dict[str, Any] | None:
    """The stored point `pid`, or None if it is missing or unreadable (then rerun)."""
    try:
        d = json.loads((points_dir / f"{pid}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if d.get("id") == pid and "result" in d else None


class _Bar:
    """A one-line progress bar on stderr (only on a terminal, unless forced)."""

    def __init__(self, total: int, done: int, enabled: bool):
        self.total, self.done, self.start_done = total, done, done
        self.t0 = time.monotonic()
        self.enabled = enabled

    def step(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        ran = self.done - self.start_done
        dt = time.monotonic() - self.t0
        rate = ran / dt if dt > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        sys.stderr.write(f"\r  [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}"
                         f" points  {rate:6.1f}/s  eta {eta:5.0f}s ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _local(jobs: list[tuple[str, Point]], spec: Spec, workers: int
           ) -> Iterator[tuple[str, Point, dict[str, Any]]]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(run_point, p.trace, spec.machine_text, spec.machine_name, spec.tlb,
                            spec.fixed + p.overrides()): (pid, p) for pid, p in jobs}
        try:
            for f in as_completed(futs):
                pid, p = futs[f]
                yield pid, p, f.result()
        finally:
            for f in futs:
                f.cancel()


def _dask(jobs: list[tuple[str, Point]], spec: Spec, address: str
          ) -> Iterator[tuple[str, Point, dict[str, Any]]]:
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ModuleNotFoundError:
        raise ConfigError("--scheduler needs Dask: pip install 'lookaside[dask]'") from None
    with Client(address, timeout="30s") as client:
        futs = {}
        for pid, p in jobs:
            f = client.submit(run_point, p.trace, spec.machine_text, spec.machine_name,
                              spec.tlb, spec.fixed + p.overrides(), key=f"lookaside-{pid}",
                              pure=False)
            futs[f.key] = (f, pid, p)
        try:
            for f in dask_completed([f for f, _, _ in futs.values()]):
                _, pid, p = futs[f.key]
                yield pid, p, f.result()
        finally:
            client.cancel([f for f, _, _ in futs.values()])


def _toml(text: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


def _one_pass_groups(spec: Spec, todo: list[tuple[str, Point]]
                     ) -> tuple[dict[str, list[tuple[str, Point, tuple[int, int]]]],
                                list[tuple[str, Point]]]:
    """Split `todo` into groups one pass answers (per trace) and points to run one by one.

    A group qualifies when the machine has one TLB and the points differ only in its
    `entries` and `ways`; whether the engines can answer it exactly (LRU, one page size, no
    partition, power-of-two sets…) is the engine's decision, asked when the group runs.
    """
    base = _toml(_lookaside.check_config(spec.machine_text, spec.machine_name, spec.tlb,
                                         spec.fixed))
    tlbs = base.get("tlb", [])
    if len(tlbs) != 1:
        return {}, todo
    name = tlbs[0]["name"]
    geometric = {f"tlb.{name}.entries", f"tlb.{name}.ways"}
    if not set(spec.keys) <= geometric:
        return {}, todo
    groups: dict[str, list[tuple[str, Point, tuple[int, int]]]] = {}
    for pid, p in todo:
        cfg = _toml(spec.machines[tuple(p.overrides())])
        t = cfg["tlb"][0]
        ways = t["entries"] if t["ways"] == "full" else t["ways"]
        groups.setdefault(p.trace, []).append((pid, p, (t["entries"], ways)))
    return groups, []


def _one_pass(spec: Spec, trace: str, group: list[tuple[str, Point, tuple[int, int]]]
              ) -> list[tuple[str, Point, dict[str, Any]]] | None:
    """The group's results from one pass, shaped like per-config results; None if the
    engines cannot answer this machine exactly."""
    from . import LookasideError

    want = sorted({g for _, _, g in group})
    try:
        raw = _lookaside.one_pass(trace, spec.machine_text, spec.machine_name, spec.tlb,
                                  spec.fixed, None, want)
    except LookasideError:
        return None
    r = json.loads(raw)
    answers = {(a["entries"], a["ways"]): a for a in r["answers"]}
    out = []
    for pid, p, g in group:
        a = answers[g]
        s = {**a["structure"], "geometry": {"entries": a["entries"], "sets": a["sets"],
                                            "ways": a["ways"], "page": r["page"]}}
        result = {"engine": r["engine"], "trace": r["trace"],
                  "structures": {r["structure"]: s}, "walk": a["walk"]}
        out.append((pid, p, result))
    return out


@dataclass
class SweepOutcome:
    spec: Spec
    out: Path
    total: int
    ran: int
    reused: int
    table: Any  # pandas.DataFrame


def run_sweep(spec: Spec, out: str | os.PathLike[str], *, workers: int | None = None,
              scheduler: str | None = None, progress: bool | None = None,
              on_point: Callable[[str], None] | None = None,
              one_pass: bool = True) -> SweepOutcome:
    """Run every point of `spec` not already stored under `out`, then write the table.

    With `one_pass`, points that differ only in the geometry of a single LRU TLB are
    answered by one pass over each trace (stack distance for fully associative sizes,
    all-associativity for set-associative ones), with results identical to per-config runs;
    the rest run one by one."""
    out = Path(out)
    points_dir = out / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    for stale in points_dir.glob(".*.tmp"):
        stale.unlink(missing_ok=True)
    pts = spec.expand()
    ids = [spec.point_id(p) for p in pts]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{spec.source}: two points of the sweep are the same simulation")
    todo = [(pid, p) for pid, p in zip(ids, pts) if _stored(points_dir, pid) is None]
    bar = _Bar(len(pts), len(pts) - len(todo),
               sys.stderr.isatty() if progress is None else progress)
    def store(pid: str, p: Point, result: dict[str, Any]) -> None:
        record = {"id": pid, "trace": p.trace_label, "settings": dict(p.settings),
                  "result": result}
        _write_atomically(points_dir / f"{pid}.json", json.dumps(record))
        bar.step()
        if on_point:
            on_point(pid)

    rest = todo
    if todo and one_pass:
        groups, rest = _one_pass_groups(spec, todo)
        for trace, group in groups.items():
            answered = _one_pass(spec, trace, group)
            if answered is None:
                rest += [(pid, p) for pid, p, _ in group]
                continue
            for pid, p, result in answered:
                store(pid, p, result)
    if rest:
        runner = (_dask(rest, spec, scheduler) if scheduler
                  else _local(rest, spec, workers or os.cpu_count() or 1))
        for pid, p, result in runner:
            store(pid, p, result)
    bar.close()
    table = collect(spec, out)
    write_table(table, out)
    _write_atomically(out / "sweep.json", json.dumps(
        {"name": spec.name, "spec": spec.source, "keys": spec.keys, "points": len(pts),
         "ids": ids}, indent=2))
    return SweepOutcome(spec, out, len(pts), len(todo), len(pts) - len(todo), table)


def rows_of(record: dict[str, Any], keys: Iterable[str]) -> list[dict[str, Any]]:
    """Tidy rows of one stored point: one per structure, plus the page-table walks."""
    r = record["result"]
    base: dict[str, Any] = {"point": record["id"], "trace": record["trace"]}
    for k in keys:
        base[k] = record["settings"].get(k)
    instr = r["trace"].get("instructions", 0)
    # The cycles of each kind of trap, when the machine refills by software: what the report
    # stacks as cost by miss type.
    costs = {f"cycles_{k}": v for k, v in r.get("traps", {}).get("cycles", {}).items()
             if k != "total"}
    rows = []
    for name, s in r["structures"].items():
        g = s.get("geometry", {})
        page = min((_page_bytes(p) for p in g.get("page", [])), default=None)  # "4K", "2M"
        entries = g.get("entries")
        rows.append({**base, "structure": name, "entries": entries,
                     "ways": g.get("ways"), "page_bytes": page,
                     "mapping_bytes": entries * page if entries and page else None,
                     "accesses": s["accesses"], "misses": s["misses"],
                     "miss_ratio": s["miss_ratio"], "mpki": s.get("mpki"),
                     "references": r["trace"]["references"], "instructions": instr, **costs})
    w = r["walk"]
    rows.append({**base, "structure": "walk", "entries": None, "ways": None,
                 "accesses": w["count"], "misses": w["count"], "miss_ratio": None,
                 "mpki": w.get("per_1000_instructions"), "references": r["trace"]["references"],
                 "instructions": instr})
    return rows


def collect(spec: Spec, out: str | os.PathLike[str]):
    """The tidy table (pandas) of every point of `spec` stored under `out`."""
    import pandas as pd

    points_dir = Path(out) / "points"
    rows: list[dict[str, Any]] = []
    for p in spec.expand():
        rec = _stored(points_dir, spec.point_id(p))
        if rec is not None:
            rows += rows_of(rec, spec.keys)
    return pd.DataFrame(rows)


def write_table(table: Any, out: str | os.PathLike[str]) -> None:
    """``results.csv`` and ``results.parquet``, each appearing only complete."""
    out = Path(out)
    _write_atomically(out / "results.csv", table.to_csv(index=False))
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".", suffix=".tmp")
    os.close(fd)
    try:
        # Mixed-type axis columns (4 and "full") are stored as text in Parquet.
        t = table.copy()
        for c in t.columns:
            if t[c].dtype == object:
                t[c] = t[c].map(lambda v: None if v is None else str(v))
        t.to_parquet(tmp, index=False)
        os.replace(tmp, out / "results.parquet")
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
