"""Design-space sweeps: a cross product (or list) of machine variations × traces.

A sweep is described by a TOML file::

    [sweep]
    name = "dtlb-sizes"                 # default: the file's stem
    machine = "modern-x86"              # preset or TOML file (relative to this file); optional
    tlb = ["dtlb:entries=64,ways=full"] # DineroIV-style structures (added to `machine`)
    set = ["machine.seed=1"]            # fixed overrides, as --set
    traces = ["demo", "traces/gcc.lks"] # demo, mawk, sortprog: the traces shipped

    [axes]                              # every combination of these --set keys
    "tlb.dtlb.entries" = [16, 32, 64, 128]
    "tlb.dtlb.ways" = [4, "full"]

    [[points]]                          # and/or explicit points
    "tlb.dtlb.entries" = 48

Every point is a plain simulation, so results never depend on how many workers ran them or
where. Each finished point is written to ``OUT/points/ID.json`` by write-then-rename, with
``ID`` a hash of everything that determines its result, or with the other points of its
one-pass family to ``OUT/points/family-KEY.json`` (their figures as columns); a rerun skips
the points already there, so a killed sweep resumes with nothing lost or duplicated. The
tidy table of every point of the spec (one row per point × structure) is then written to
``OUT/results.csv`` and ``OUT/results.parquet``.

Points run on local threads by default (the engine releases the GIL), or on a Dask
distributed cluster given its scheduler address; the driver alone writes files. The planner
(:func:`plan`) answers families of LRU geometries in one pass over their trace and batches
the other points of a trace so that each batch reads the trace once; results never depend
on the plan. ``lookaside sweep NAME`` runs a sweep shipped in ``lookaside/data/sweeps``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Callable

from . import (
    ConfigError,
    _as_text,
    _lookaside,
    _page_bytes,
    _read_text,
    _toml_loads,
    demo_trace,
    preset_path,
)
from ._files import write_atomically

#: Bumped when the stored form of a point changes (old points are then rerun).
POINT_VERSION = 1
#: The sweeps shipped with the package.
_EXAMPLES = Path(__file__).resolve().parent / "data" / "sweeps"
#: A trace name that is a workload spec (``workload:multiserver,servers=3``), not a file.
WORKLOAD = "workload:"


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep: a trace and the overrides that make its machine."""

    trace: str
    trace_label: str
    settings: tuple[tuple[str, Any], ...]

    def overrides(self) -> list[str]:
        return list(self._overrides)

    @functools.cached_property
    def _overrides(self) -> tuple[str, ...]:
        # Asked for by validation, ids, planning and tasks: made once.
        return tuple(f"{k}={json.dumps(v)}" for k, v in self.settings)


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
    #: The one-pass family of each distinct machine, by its overrides (filled when loaded):
    #: its single TLB's name, entries and ways (ways = entries when fully associative) when
    #: the one-pass engines answer it, else None.
    families: dict[tuple[str, ...], tuple[str, int, int] | None] = field(default_factory=dict)
    #: The memory each point's machine may take (a size, ``"4G"``; None: half the host's).
    max_memory: str | None = None

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
        return self.point_ids([p])[0]

    def point_ids(self, points: list[Point]) -> list[str]:
        """:meth:`point_id` of each point (each trace file looked at once)."""
        traces: dict[str, dict[str, Any]] = {}
        for t in {p.trace for p in points}:
            if t.startswith(WORKLOAD):
                traces[t] = {"trace": t}  # a workload is defined by its spec
            else:
                st = os.stat(t)
                traces[t] = {"trace": os.path.abspath(t), "trace_bytes": st.st_size,
                             "trace_mtime_ns": st.st_mtime_ns}
        # The hash of json.dumps({"machine", "set", "tlb", trace…, "v"}, sort_keys=True),
        # made from the part that varies ("set") between the parts that do not.
        head = '{"machine": ' + json.dumps(self.machine_text) + ', "set": '
        tails = {t: ", " + json.dumps({"tlb": self.tlb, "v": POINT_VERSION, **info},
                                      sort_keys=True)[1:] for t, info in traces.items()}
        ids = []
        for p in points:
            raw = head + json.dumps(self.fixed + p.overrides()) + tails[p.trace]
            ids.append(hashlib.sha256(raw.encode()).hexdigest()[:24])
        return ids


def _shipped_trace(name: str) -> Path | None:
    """The trace shipped with the package under this name (demo, mawk, sortprog), if any."""
    if os.sep in name or "." in name:
        return None
    p = demo_trace().parent / f"{name}.lks"
    return p if p.is_file() else None


def _err(source: str, key: str, msg: str) -> ConfigError:
    return ConfigError(f"{source}: {key}: {msg}")


def _load_toml(path: Path) -> dict[str, Any]:
    return _toml_loads(_read_text(path, ConfigError), path)


def example_names() -> list[str]:
    """Names of the sweeps shipped with the package (``lookaside/data/sweeps``)."""
    return sorted(p.stem for p in _EXAMPLES.glob("*.toml"))


def spec_path(spec: str | os.PathLike[str]) -> Path:
    """The sweep file `spec` names: a path, or the name of a shipped sweep."""
    p = Path(spec)
    if p.is_file() or p.suffix or os.sep in str(spec):
        return p
    if (_EXAMPLES / f"{spec}.toml").is_file():
        return _EXAMPLES / f"{spec}.toml"
    raise ConfigError(f"{spec}: no such sweep file, nor a shipped sweep "
                      f"(have: {', '.join(example_names())})")


def load_spec(path: str | os.PathLike[str], *, max_memory: str | int | None = None) -> Spec:
    """Read and check a sweep file (or a shipped sweep, by name); errors name the file and
    the key. ``max_memory`` bounds each point's machine (see :func:`lookaside.simulate`): a
    point over it is refused here, before anything runs."""
    path = spec_path(path)
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
        text, mname = _read_text(base / machine, ConfigError), _as_text(str(base / machine))
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
        p = _shipped_trace(t) or base / t
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
                dict(axes), list(points),
                max_memory=None if max_memory is None else str(max_memory))
    # Every distinct machine must build: check them all (in one call) before running anything.
    first: dict[tuple[str, ...], Point] = {}
    for p in spec.expand():
        first.setdefault(tuple(p.overrides()), p)
    families, failure = _lookaside.check_machines(
        text, mname, tlb, [spec.fixed + list(ov) for ov in first], spec.max_memory)
    if failure is not None:
        i, e = failure
        if not isinstance(e, ConfigError):
            raise e
        p = list(first.values())[i]
        where = ", ".join(f"{k}={v!r}" for k, v in p.settings) or "the base machine"
        raise ConfigError(f"{src}: point {where}: {e}") from None
    spec.families = dict(zip(first, families))
    return spec


def run_point(trace: str, machine_text: str | None, machine_name: str, tlb: list[str],
              overrides: list[str], progress: Callable[[int, int], Any] | None = None,
              max_memory: str | None = None) -> dict[str, Any]:
    """Simulate one point (in whatever process or thread runs it); returns the result.
    `progress(events, bytes)` is called now and then; an exception it raises stops the run
    (so does one the run_* functions below get from theirs). `max_memory` bounds the
    machine's estimated memory (``--max-memory``)."""
    raw = _lookaside.simulate(trace, machine_text, machine_name, tlb, overrides, None, progress,
                              "one-thread", max_memory)
    return json.loads(raw)


#: How the name of a one-pass family's file in ``DIR/points`` starts: ``family-KEY.json``.
_FAMILY = "family-"


class Store:
    """The finished points of a sweep directory, ``DIR/points``: ``ID.json`` for a point
    simulated alone or in a batch (its result), ``family-KEY.json`` for the points of a
    one-pass family (the family's result once, its points' figures as columns: see
    :func:`run_family`). Read once, by listing the directory; what a sweep adds is kept. A
    file that is unreadable or not what its name says is ignored (its points run again).
    A family's columns are kept in memory (tens of bytes a point); a point stored alone is
    read again when its rows are asked for (its result holds every breakdown)."""

    def __init__(self, points_dir: str | os.PathLike[str]):
        self.dir = Path(points_dir)
        #: Points stored alone.
        self.points: set[str] = set()
        #: Points of families: their family's record and their index in its columns.
        self.members: dict[str, tuple[dict[str, Any], int]] = {}
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            names = []
        for name in names:
            if name.startswith(".") or not name.endswith(".json"):
                continue
            try:
                d = json.loads((self.dir / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(d, dict):
                continue
            if name.startswith(_FAMILY):
                if d.get("family") == name[len(_FAMILY):-5] and _columnar(d):
                    self._add_family(d)
            elif d.get("id") == name[:-5] and "result" in d:
                self.points.add(d["id"])

    def _add_family(self, record: dict[str, Any]) -> None:
        for i, pid in enumerate(record["points"]):
            self.members.setdefault(pid, (record, i))

    def __contains__(self, pid: str) -> bool:
        return pid in self.points or pid in self.members

    def ids(self) -> set[str]:
        """Every point stored."""
        return self.points | set(self.members)

    def record(self, pid: str) -> dict[str, Any] | None:
        """The record of point `pid` stored alone (`id`, `trace`, `settings`, `result`), or
        None if it is missing or unreadable."""
        try:
            d = json.loads((self.dir / f"{pid}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) and d.get("id") == pid and "result" in d else None

    def put_point(self, pid: str, p: Point, result: dict[str, Any]) -> None:
        """Store one point's result as ``ID.json``."""
        record = {"id": pid, "trace": p.trace_label, "settings": dict(p.settings),
                  "result": result}
        write_atomically(self.dir / f"{pid}.json", json.dumps(record), sync=True)
        self.points.add(pid)

    def put_family(self, members: list[tuple[str, Point]], result: dict[str, Any]) -> None:
        """Store a one-pass family's result (see :func:`run_family`) as one file."""
        key = _family_key(pid for pid, _ in members)
        record = {"family": key, "trace": members[0][1].trace_label,
                  "points": [pid for pid, _ in members], "result": result}
        write_atomically(self.dir / f"{_FAMILY}{key}.json", json.dumps(record), sync=True)
        self._add_family(record)

    def rows(self, pid: str, p: Point, keys: list[str]) -> list[dict[str, Any]]:
        """The point's rows of the tidy table (none if it is not stored)."""
        if pid in self.points:
            record = self.record(pid)
            return rows_of(record, keys) if record is not None else []
        if pid in self.members:
            record, i = self.members[pid]
            return _family_rows(record, i, pid, p, keys)
        return []


def _family_key(ids: Iterable[str]) -> str:
    return hashlib.sha256("".join(ids).encode()).hexdigest()[:16]


def _columnar(record: dict[str, Any]) -> bool:
    """Whether a family's record holds what its points' rows need: the family's result and a
    column of every figure with a value for each of its points."""
    r, pts = record.get("result"), record.get("points")
    if not isinstance(r, dict) or not isinstance(pts, list) or "trace" not in record:
        return False
    if not isinstance(r.get("trace"), dict) or "references" not in r["trace"]:
        return False
    if any(k not in r for k in ("structure", "page", "accesses", "warnings")):
        return False
    cols = r.get("columns")
    return isinstance(cols, dict) and all(
        isinstance(cols.get(c), list) and len(cols[c]) == len(pts) for c in _COLUMNS)


class _Bar:
    """A one-line progress bar on stderr (only on a terminal, unless forced)."""

    def __init__(self, total: int, done: int, enabled: bool):
        self.total, self.done, self.start_done = total, done, done
        self.t0 = time.monotonic()
        self.enabled = enabled

    def step(self, n: int = 1) -> None:
        self.done += n
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


def run_points(trace: str, machine_text: str | None, machine_name: str, tlb: list[str],
               overrides: list[list[str]], progress: Callable[[int, int], Any] | None = None,
               max_memory: str | None = None
               ) -> list[dict[str, Any]]:
    """Simulate several points of one trace on one reading of it (decoding is paid once);
    each result is exactly what :func:`run_point` gives for that point alone."""
    machines = [(machine_text, machine_name, tlb, o) for o in overrides]
    return json.loads(_lookaside.simulate_many(trace, machines, None, progress, max_memory))


#: The columns of a family's result, one value per geometry (see :func:`run_family`).
_COLUMNS = ("entries", "ways", "sets", "engine", "misses", "hits", "miss_ratio", "mpki",
            "instructions_per_miss")


def run_family(trace: str, machine_text: str | None, machine_name: str, tlb: list[str],
               overrides: list[str], want: list[tuple[int, int]],
               progress: Callable[[int, int], Any] | None = None) -> dict[str, Any]:
    """The machine's single LRU TLB at each geometry (entries, ways) of `want`, from one pass
    over the trace (its own geometry is ignored): what a per-config run says of the trace,
    once (``trace``, ``warnings``, ``structure``, ``page``, ``accesses``: every geometry
    looks up the same translations), and ``columns``, one list per figure (``entries``,
    ``ways``, ``sets``, ``engine``, ``misses``, ``hits``, ``miss_ratio``, ``mpki``,
    ``instructions_per_miss``) in `want`'s order, each value what a per-config run gives. The
    page-table walks are one per miss: their count and rate are ``misses`` and ``mpki``."""
    header, columns = _lookaside.one_pass(trace, machine_text, machine_name, tlb, overrides,
                                          None, [tuple(g) for g in want], progress)
    return {**json.loads(header), "columns": columns}


@dataclass
class Task:
    """One unit of work: a one-pass family (`want` set) or a batch of per-config points of
    one trace; either way one reading of the trace."""

    trace: str
    members: list[tuple[str, Point]]
    #: For a family: the overrides of its machine (a member's: the engines ignore its TLB's
    #: geometry) and the geometry of each member.
    family: list[str] | None = None
    want: list[tuple[int, int]] = field(default_factory=list)

    def args(self, spec: Spec) -> tuple[Any, ...]:
        if self.family is not None:
            return (run_family, self.trace, spec.machine_text, spec.machine_name, spec.tlb,
                    self.family, self.want)
        # max_memory by keyword: the callers pass `progress` by keyword too.
        return (functools.partial(run_points, max_memory=spec.max_memory), self.trace,
                spec.machine_text, spec.machine_name, spec.tlb,
                [spec.fixed + p.overrides() for _, p in self.members])

    @property
    def key(self) -> str:
        kind = "family" if self.family is not None else "points"
        return f"lookaside-{kind}-{_family_key(pid for pid, _ in self.members)}"


def _families(spec: Spec, todo: list[tuple[str, Point]]
              ) -> tuple[list[Task], list[tuple[str, Point]]]:
    """The one-pass tasks among `todo`, and the points left to run one by one.

    Points of one trace whose machines have a single TLB and differ only in its `entries`
    and `ways` form a family; when the engines answer that machine (LRU, one page size, no
    partition, no software refill… — the engine decides, see :attr:`Spec.families`), its
    members take one pass over the trace: all-associativity for those with a power-of-two
    set count up to 65536 and up to 16 ways (and the fully associative ones of up to 16
    entries), stack distance for the other fully associative ones, both engines on the same
    reading when both are needed. Families of one point run as ordinary points."""
    groups: dict[tuple[str, tuple[str, ...]], list[tuple[str, Point, tuple[int, int]]]] = {}
    rest: list[tuple[str, Point]] = []
    for pid, p in todo:
        ov = p.overrides()
        fam = spec.families[tuple(ov)]
        if fam is None:
            rest.append((pid, p))
            continue
        name, entries, ways = fam
        if not _lookaside.one_pass_answers(entries, ways):
            rest.append((pid, p))
            continue
        geometric = {f"tlb.{name}.entries", f"tlb.{name}.ways"}
        base = tuple(o for (k, _), o in zip(p.settings, ov) if k not in geometric)
        groups.setdefault((p.trace, base), []).append((pid, p, (entries, ways)))
    tasks = []
    for (trace, _), members in groups.items():
        if len(members) < 2:
            rest += [(pid, p) for pid, p, _ in members]
            continue
        first = members[0][1]
        tasks.append(Task(trace, [(pid, p) for pid, p, _ in members],
                          spec.fixed + first.overrides(), [g for _, _, g in members]))
    return tasks, rest


def plan(spec: Spec, todo: list[tuple[str, Point]], workers: int, *, one_pass: bool = True,
         batch: int | None = None) -> list[Task]:
    """The tasks that run `todo`: one-pass families first (see :func:`_families`), then the
    other points in batches of up to `batch` per trace (by default enough batches to keep
    `workers` busy, at most 32 points each). Results never depend on the plan."""
    tasks, rest = _families(spec, todo) if one_pass else ([], list(todo))
    by_trace: dict[str, list[tuple[str, Point]]] = {}
    for pid, p in rest:
        by_trace.setdefault(p.trace, []).append((pid, p))
    if batch is None:
        batch = max(1, min(32, len(rest) // max(1, 4 * workers)))
    for trace, pts in by_trace.items():
        tasks += [Task(trace, pts[i:i + batch]) for i in range(0, len(pts), batch)]
    return tasks


class _Stopped(Exception):
    """A local task ended because its sweep stopped."""


def _local(tasks: list[Task], spec: Spec, workers: int) -> Iterator[tuple[Task, Any]]:
    stop = threading.Event()

    def watch(_events: int, _bytes: int) -> None:
        # Called now and then by every running task: ends them all once the sweep stops
        # (interrupted, or a point failed), so that the pool's threads are free at once.
        if stop.is_set():
            raise _Stopped

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futs = {pool.submit(*t.args(spec), progress=watch): t for t in tasks}
        try:
            for f in as_completed(futs):
                yield futs[f], f.result()
        finally:
            stop.set()
            for f in futs:
                f.cancel()


def _client(address: str) -> Any:
    try:
        from distributed import Client
    except ModuleNotFoundError:
        raise ConfigError("--scheduler needs Dask: pip install 'lookaside[dask]'") from None
    return Client(address, timeout="30s")


def _dask(client: Any, tasks: list[Task], spec: Spec) -> Iterator[tuple[Task, Any]]:
    from distributed import as_completed as dask_completed

    # A run's own suffix: a driver killed mid-sweep may leave its tasks behind for a while.
    run = os.urandom(4).hex()
    futs = {}
    for t in tasks:
        f = client.submit(*t.args(spec), key=f"{t.key}-{run}", pure=False)
        futs[f.key] = (f, t)
    try:
        # Results come with their completions, in batches: no round trip per task.
        for batch in dask_completed([f for f, _ in futs.values()], with_results=True).batches():
            for f, result in batch:
                yield futs[f.key][1], result
    finally:
        client.cancel([f for f, _ in futs.values()])


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
              one_pass: bool = True, batch: int | None = None) -> SweepOutcome:
    """Run every point of `spec` not already stored under `out`, then write the table.

    With `one_pass`, points that differ only in the geometry of a single LRU TLB are
    answered by one pass over each trace (stack distance for fully associative sizes,
    all-associativity for set-associative ones), with results identical to per-config runs;
    the rest run in batches of up to `batch` points, each batch on one reading of its
    trace (see :func:`plan`)."""
    if batch is not None and batch < 1:
        raise ConfigError(f"batch: {batch} points per task (at least 1)")
    out = Path(out)
    points_dir = out / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    for stale in points_dir.glob(".*.tmp"):
        stale.unlink(missing_ok=True)
    pts = spec.expand()
    ids = spec.point_ids(pts)
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{spec.source}: two points of the sweep are the same simulation")
    store = Store(points_dir)
    todo = [(pid, p) for pid, p in zip(ids, pts) if pid not in store]
    bar = _Bar(len(pts), len(pts) - len(todo),
               sys.stderr.isatty() if progress is None else progress)

    def stored(members: list[tuple[str, Point]]) -> None:
        bar.step(len(members))
        if on_point:
            for pid, _ in members:
                on_point(pid)

    if todo:
        with contextlib.ExitStack() as stack:
            if scheduler:
                client = stack.enter_context(_client(scheduler))
                n = sum(client.nthreads().values()) or 1
                tasks = plan(spec, todo, n, one_pass=one_pass, batch=batch)
                runner = _dask(client, tasks, spec)
            else:
                n = workers or os.cpu_count() or 1
                tasks = plan(spec, todo, n, one_pass=one_pass, batch=batch)
                runner = _local(tasks, spec, n)
            for task, results in runner:
                if task.family is not None:  # one file, the family's figures as columns
                    store.put_family(task.members, results)
                    stored(task.members)
                    continue
                for (pid, p), result in zip(task.members, results):
                    store.put_point(pid, p, result)
                    stored([(pid, p)])
    bar.close()
    table = _table(spec, store, pts, ids)
    write_table(table, out)
    write_atomically(out / "sweep.json", json.dumps(
        {"name": spec.name, "spec": spec.source, "keys": spec.keys, "points": len(pts),
         "ids": ids}, indent=2))
    return SweepOutcome(spec, out, len(pts), len(todo), len(pts) - len(todo), table)


def _base(pid: str, label: str, settings: dict[str, Any], keys: Iterable[str],
          r: dict[str, Any]) -> dict[str, Any]:
    """The columns every row of a point has: its id, trace, axis values, what it left out."""
    base: dict[str, Any] = {"point": pid, "trace": label}
    for k in keys:
        base[k] = settings.get(k)
    # References the machine did not simulate (see the result's `warnings`): a point whose
    # numbers describe less than its trace says so in every row.
    base["dropped_share"] = r["trace"].get("dropped_share", 0.0)
    base["warnings"] = "; ".join(r.get("warnings", []))
    return base


def _structure_row(base: dict[str, Any], r: dict[str, Any], name: str, entries: Any, ways: Any,
                   pages: list[str], figures: tuple[Any, Any, Any, Any],
                   costs: dict[str, Any]) -> dict[str, Any]:
    """A structure's row: `figures` are its accesses, misses, miss ratio and MPKI."""
    page = min((_page_bytes(p) for p in pages), default=None)  # "4K", "2M"
    accesses, misses, miss_ratio, mpki = figures
    return {**base, "structure": name, "entries": entries, "ways": ways, "page_bytes": page,
            "mapping_bytes": entries * page if entries and page else None,
            "accesses": accesses, "misses": misses, "miss_ratio": miss_ratio, "mpki": mpki,
            "references": r["trace"]["references"],
            "instructions": r["trace"].get("instructions", 0), **costs}


def _walk_row(base: dict[str, Any], r: dict[str, Any], count: int, mpki: Any) -> dict[str, Any]:
    """The page-table walks' row."""
    return {**base, "structure": "walk", "entries": None, "ways": None,
            "accesses": count, "misses": count, "miss_ratio": None, "mpki": mpki,
            "references": r["trace"]["references"],
            "instructions": r["trace"].get("instructions", 0)}


def rows_of(record: dict[str, Any], keys: Iterable[str]) -> list[dict[str, Any]]:
    """Tidy rows of one stored point: one per structure, plus the page-table walks."""
    r = record["result"]
    base = _base(record["id"], record["trace"], record["settings"], keys, r)
    # The cycles of each kind of trap, when the machine refills by software: what the report
    # stacks as cost by miss type.
    cycles = r.get("traps", {}).get("cycles", {})
    costs = {f"cycles_{k}": v for k, v in cycles.items() if k != "total"}
    if "total" in cycles:
        costs["trap_cycles"] = cycles["total"]
    rows = []
    for name, s in r["structures"].items():
        g = s.get("geometry", {})
        figures = (s["accesses"], s["misses"], s["miss_ratio"], s.get("mpki"))
        # A cache's geometry in bytes (only in sweeps of caches: a TLB sweep's columns stay).
        cache = ({"size_bytes": g.get("size"), "line_bytes": g.get("line")}
                 if s.get("type") == "cache" else {})
        rows.append(_structure_row(base, r, name, g.get("entries"), g.get("ways"),
                                   g.get("page", []), figures, {**cache, **costs}))
    w = r["walk"]
    rows.append(_walk_row(base, r, w["count"], w.get("per_1000_instructions")))
    return rows


def _family_rows(record: dict[str, Any], i: int, pid: str, p: Point,
                 keys: Iterable[str]) -> list[dict[str, Any]]:
    """Tidy rows of point `pid` (`p`), the `i`th of a stored family: the rows
    :func:`rows_of` gives for the same point run alone."""
    r = record["result"]
    c = r["columns"]
    base = _base(pid, record["trace"], dict(p.settings), keys, r)
    figures = (r["accesses"], c["misses"][i], c["miss_ratio"][i], c["mpki"][i])
    return [_structure_row(base, r, r["structure"], c["entries"][i], c["ways"][i], r["page"],
                           figures, {}),
            _walk_row(base, r, c["misses"][i], c["mpki"][i])]


def _table(spec: Spec, store: Store, pts: list[Point], ids: list[str]):
    """The tidy table (pandas) of the points `pts` (with their `ids`) in `store`."""
    import pandas as pd

    keys = spec.keys
    rows: list[dict[str, Any]] = []
    for pid, p in zip(ids, pts):
        rows += store.rows(pid, p, keys)
    return pd.DataFrame(rows)


def collect(spec: Spec, out: str | os.PathLike[str]):
    """The tidy table (pandas) of every point of `spec` stored under `out`."""
    pts = spec.expand()
    return _table(spec, Store(Path(out) / "points"), pts, spec.point_ids(pts))


def write_table(table: Any, out: str | os.PathLike[str]) -> None:
    """``results.csv`` and ``results.parquet``, each appearing only complete."""
    out = Path(out)
    write_atomically(out / "results.csv", table.to_csv(index=False), sync=True)
    # Mixed-type axis columns (4 and "full") are stored as text in Parquet.
    t = table.copy()
    for c in t.columns:
        if t[c].dtype == object:
            t[c] = t[c].map(lambda v: None if v is None else str(v))
    write_atomically(out / "results.parquet", lambda tmp: t.to_parquet(tmp, index=False))
