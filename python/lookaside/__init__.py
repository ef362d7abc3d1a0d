"""Lookaside: a fast, trace-driven simulator of address translation and memory hierarchies.

The engine is Rust; this package is the thin front: machine descriptions (presets are TOML
data files shipped in ``lookaside/presets``), the :func:`simulate` call, results that turn
into pandas DataFrames, and the ``lookaside`` command. :mod:`lookaside.capture` records real
programs into traces (``lookaside trace``).

Examples
--------
>>> import lookaside
>>> r = lookaside.simulate(lookaside.demo_trace(), "modern-x86")
>>> r["dtlb"]["misses"] <= r["dtlb"]["accesses"]
True
>>> r.to_pandas().columns.tolist()[:4]
['structure', 'asid', 'mode', 'kind']
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Union

from . import _lookaside
from ._lookaside import ConfigError, LookasideError, NotYetError, TraceError

__version__: str = _lookaside.__version__
__all__ = [
    "ConfigError",
    "LookasideError",
    "LookasideWarning",
    "NotYetError",
    "Result",
    "TraceError",
    "access_map",
    "check_config",
    "config_schema",
    "machine_data",
    "machine_toml",
    "metadata",
    "convert",
    "convert_counts",
    "demo_trace",
    "info",
    "preset_names",
    "preset_path",
    "simulate",
]

PathLike = Union[str, "os.PathLike[str]"]

class LookasideWarning(UserWarning):
    """A result leaves something out that its numbers do not show: more than 1 % of the
    translations were not simulated (``Result.data["warnings"]`` says what)."""


#: The machine used when none is named.
DEFAULT_PRESET = "modern-x86"


class _DefaultPreset(str):
    """The default of a ``config`` argument: the default preset, unless ``tlb`` or ``cache``
    flags describe the machine. A value of its own, so that the preset named explicitly is
    kept with the flags."""


_DEFAULT = _DefaultPreset(DEFAULT_PRESET)


def _config_of(config: Any, tlb: Sequence[str], cache: Sequence[str]) -> Any:
    """`config`, or none when it was left at its default and flags describe the machine."""
    return None if config is _DEFAULT and (tlb or cache) else config


def _data_dir(name: str) -> Path:
    return Path(str(resources.files(__name__).joinpath(name)))


def preset_names() -> list[str]:
    """Names of the shipped machine presets."""
    return sorted(p.stem for p in _data_dir("presets").glob("*.toml"))


def preset_path(name: str) -> Path:
    """The TOML file of preset ``name``."""
    p = _data_dir("presets") / f"{name}.toml"
    if not p.is_file():
        raise ConfigError(f"no preset named '{name}' (have: {', '.join(preset_names())})")
    return p


def demo_trace() -> Path:
    """The small real trace shipped with the package (see ``lookaside/data/README.md``)."""
    return _data_dir("data") / "demo.lks"


def _machine_source(config: PathLike | Mapping[str, Any] | None,
                    flags: str = "--tlb") -> tuple[str | None, str]:
    """(TOML text, name for messages) of a config given as a path, a preset name, machine
    data (:func:`machine_data`) or None (a machine of `flags` only)."""
    if config is None:
        return None, flags
    if isinstance(config, Mapping):
        return machine_toml(config, "machine data"), "machine data"
    p = Path(config)
    try:
        is_file = p.is_file()
    except OSError as e:  # a name too long for a path, say: none such
        raise ConfigError(f"{_as_text(str(config))[:80]}: not a config file ({e.strerror})"
                          ) from None
    if is_file:
        return _read_text(p, ConfigError), _as_text(str(p))
    if isinstance(config, str) and "/" not in config and not config.endswith(".toml"):
        return preset_path(config).read_text(encoding="utf-8"), f"preset {config}"
    raise ConfigError(f"{config}: no such config file")


def _read_text(path: Path, error: type[LookasideError]) -> str:
    """The UTF-8 text of the file at `path`; a file that is not UTF-8 raises `error` naming
    the file and the byte offset of the first bad byte."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise error(f"{path}: {e.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(f"{path}: line {line}, column {column} (byte offset {e.start}): not UTF-8 "
                    f"text ({e.reason})") from None


def _as_text(s: str) -> str:
    """`s` with the bytes that are not UTF-8 (a file name or argument may hold any; Python
    keeps them as lone surrogates) written as escapes (``\\xe9``): text for messages and
    metadata."""
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _utf8(what: str, values: Sequence[str]) -> list[str]:
    """`values` (flags or overrides) as a list, each checked to be text the engine can read:
    an argument whose bytes are not UTF-8 (which Python holds as lone surrogates) is a
    :class:`ConfigError` naming it."""
    out = list(values)
    for v in out:
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ConfigError(f"{what} '{_as_text(v)}': character {e.start}: not UTF-8 text"
                              ) from None
    return out


def _overrides(
    overrides: Mapping[str, Any] | Sequence[str] | None, kwargs: Mapping[str, Any]
) -> list[str]:
    """``--set`` strings from a mapping (``{"tlb.dtlb.entries": 128}``), a list of
    ``"key=value"`` strings, and keyword arguments (``tlb__dtlb__entries=128``)."""
    out: list[str] = []
    if isinstance(overrides, Mapping):
        items = list(overrides.items())
    else:
        out.extend(overrides or [])
        items = []
    items += [(k.replace("__", "."), v) for k, v in kwargs.items()]
    for k, v in items:
        # JSON literals are TOML literals for strings, numbers, booleans and lists.
        out.append(f"{k}={json.dumps(v)}")
    return out


class Result:
    """The result of one run: counts per structure, by kind, mode and address space.

    ``result["dtlb"]`` is that structure's summary (``accesses``, ``hits``, ``misses``,
    ``miss_ratio``, ``mpki``, breakdowns ``by_kind``/``by_mode``/``by_asid``, ``geometry``);
    :meth:`to_pandas` gives one row per (structure, asid, mode, kind) cell, and
    :meth:`frames` every section (caches, MCPI, traps, page tables, …) as tidy DataFrames.
    """

    def __init__(self, data: dict[str, Any]):
        self.data = data

    @property
    def structures(self) -> dict[str, dict[str, Any]]:
        return self.data["structures"]

    def __getitem__(self, name: str) -> dict[str, Any]:
        if name == "walk":
            return self.data["walk"]
        return self.structures[name]

    def __repr__(self) -> str:
        parts = ", ".join(f"{n} {s['misses']}/{s['accesses']}" for n, s in self.structures.items())
        return f"<lookaside.Result misses/accesses: {parts}>"

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.data, indent=indent)

    def table(self) -> str:
        """The plain-text table ``lookaside simulate`` prints."""
        return _lookaside.table(json.dumps(self.data))

    def dinero(self) -> str:
        """The caches' statistics as DineroIV prints them at the end of a run (from its
        ``---Simulation complete.`` line), for ``diff`` against DineroIV's output
        (``lookaside simulate --dinero``); a :class:`LookasideError` without caches."""
        return _lookaside.dinero(json.dumps(self.data))

    def frames(self) -> dict[str, Any]:
        """Every section of the result as tidy pandas DataFrames, by name (only the sections
        this machine has): ``tlb`` (the rows of :meth:`to_pandas`), ``structures`` (one row
        per structure and ``walk``: counts, ratios, geometry), ``breakdown`` (per structure
        by kind, mode and asid), ``trace`` and ``machine`` (one row each), ``config`` (the
        machine's keys as ``--set`` names them, with values); with ``[refill]``: ``traps``
        (one row per trap type), ``traps_by_depth``, ``traps_summary``; with ``[memory]``:
        ``mcpi`` (per mode and component: stall cycles and MCPI), ``memory_by_mode``,
        ``memory_by_asid``, ``caches``, ``tlb_handlers``, ``memory_summary``; with
        ``[pagetable]``: ``walk_levels``, ``chain_histogram``, ``pagetable_summary``; with
        ``[vac]``: ``vac_phases``, ``vac_summary``. A ``*_summary`` frame is one row of the
        section's other scalars, as dotted columns (``cycles.total``); ``df.attrs["sections"]``
        names the JSON sections a frame shows."""
        from .frames import frames

        return frames(self.data)

    def to_pandas(self, section: str = "tlb") -> Any:
        """One section of :meth:`frames` as a DataFrame; by default ``tlb``: one row per
        (structure, asid, mode, kind) with accesses, hits, misses and miss_ratio.

        The pseudo-structure ``walk`` counts the misses that left the whole hierarchy.
        """
        if section == "tlb":  # no need to build the others
            from .frames import tlb_rows

            return tlb_rows(self.data)
        all_frames = self.frames()
        if section not in all_frames:
            raise LookasideError(f"section: no '{section}' in this result "
                                 f"(have: {', '.join(all_frames)})")
        return all_frames[section]


def simulate(
    trace: PathLike,
    config: PathLike | Mapping[str, Any] | None = _DEFAULT,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    tlb: Sequence[str] = (),
    cache: Sequence[str] = (),
    format: str | None = None,
    progress: Callable[[int, int], Any] | None = None,
    reading: str = "auto",
    max_memory: str | int | None = None,
    **kwargs: Any,
) -> Result:
    """Simulate ``trace`` on a machine and return its :class:`Result`.

    ``config`` is a preset name (see :func:`preset_names`), a TOML file, machine data
    (:func:`machine_data`), or ``None`` for a machine made only of ``tlb`` flags
    (``"dtlb:entries=64,ways=full,policy=lru,page=4k"``)
    and ``cache`` flags (``"l1d:size=32k,line=64,ways=8,serves=data"``), which otherwise add
    to the config's structures. Left out, it is the default preset, or ``None`` when flags
    are given.
    ``overrides`` (a mapping or ``key=value`` strings) and keyword arguments with ``__`` for
    dots (``tlb__dtlb__entries=128``) change single keys, like ``--set``. ``reading`` is
    where the trace is read: ``"one-thread"`` (with the simulation), ``"pipelined"`` (on a
    second thread) or ``"auto"`` (pipelined when there is a second core); results never
    depend on it. ``max_memory`` (bytes, or a size such as ``"4G"``) bounds the memory the
    machine may take (default: half of the host's); a machine estimated over it is refused
    with a ``ConfigError`` before anything is allocated. The GIL is released while the
    simulation runs.
    """
    text, name = _machine_source(_config_of(config, tlb, cache),
                                 "--tlb" if tlb else "--cache")
    raw = _lookaside.simulate(
        os.fspath(trace),
        text,
        name,
        _utf8("--tlb", tlb),
        _utf8("--set", _overrides(overrides, kwargs)),
        format,
        progress,
        reading,
        _size(max_memory),
        _utf8("--cache", cache),
    )
    result = Result(json.loads(raw))
    for w in result.data.get("warnings", []):
        warnings.warn(f"{os.fspath(trace)}: {w}", LookasideWarning, stacklevel=2)
    return result


def _size(n: str | int | None) -> str | None:
    """A size argument as the engine reads it (bytes as a number, or ``"4G"``)."""
    return None if n is None else str(n)


def check_config(
    config: PathLike | Mapping[str, Any] | None = _DEFAULT,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    tlb: Sequence[str] = (),
    cache: Sequence[str] = (),
    max_memory: str | int | None = None,
    **kwargs: Any,
) -> str:
    """Validate a machine; returns it as normalised TOML (every default filled in)."""
    text, name = _machine_source(_config_of(config, tlb, cache),
                                 "--tlb" if tlb else "--cache")
    return _lookaside.check_config(text, name, _utf8("--tlb", tlb),
                                   _utf8("--set", _overrides(overrides, kwargs)),
                                   _size(max_memory), _utf8("--cache", cache))


def machine_data(config: PathLike | Mapping[str, Any] | None = DEFAULT_PRESET,
                 overrides: Mapping[str, Any] | Sequence[str] | None = None,
                 **kwargs: Any) -> dict[str, Any]:
    """A machine as data: a preset's or file's config (or data), validated, every default
    filled in, as nested dicts and lists (``[[tlb]]`` is ``data["tlb"]``). Change it as data
    and simulate it as it is (``simulate(trace, data)``) or as text (:func:`machine_toml`) —
    no editing of TOML text."""
    return _toml_loads(check_config(config, overrides, **kwargs))


def machine_toml(data: Mapping[str, Any], name: str = "machine") -> str:
    """The TOML text of machine `data` (as :func:`machine_data` gives it), read by the engine's
    own schema: a key or value it does not know is a :class:`ConfigError` naming it."""
    return _lookaside.config_toml(json.dumps(data), name)


def _toml_loads(text: str, source: str | os.PathLike[str] = "machine") -> dict[str, Any]:
    """TOML text as data; text that is not TOML is a :class:`ConfigError` naming `source`."""
    try:
        import tomllib  # Python ≥ 3.11
    except ModuleNotFoundError:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: {e}") from None


def config_schema() -> dict[str, Any]:
    """The JSON Schema of a machine description (every section, key, default and closed
    choice), generated from the engine's own types: check a machine against it before a
    long sweep, or let an editor complete its keys."""
    return json.loads(_lookaside.config_schema())


def convert(src: PathLike, dst: PathLike, *, src_format: str | None = None,
            dst_format: str | None = None, command: str = "",
            progress: Callable[[int, int], Any] | None = None, phase: str | None = None,
            skip: int = 0, take: int | None = None, level: int | None = None,
            extra: dict[str, str] | None = None) -> int:
    """Convert a trace between formats (chosen from the extensions unless given); returns
    the number of events written (events the output format cannot represent are left out:
    :func:`convert_counts` says how many). The output appears only once it is complete.
    A cut keeps a window of the trace: from the start of phase ``phase`` (its first marker;
    else from the start), ``skip`` references left out and then ``take`` kept (else all),
    after the CPU, address space, phase and idle state the events before it set up; the
    output's metadata says so (``cut``). ``level`` is the native output's zstd level (1-22),
    ``extra`` more metadata. ``progress(events, bytes)`` is called now and then; Ctrl-C
    stops the conversion."""
    return convert_counts(src, dst, src_format=src_format, dst_format=dst_format,
                          command=command, progress=progress, phase=phase, skip=skip,
                          take=take, level=level, extra=extra)[0]


def convert_counts(src: PathLike, dst: PathLike, *, src_format: str | None = None,
                   dst_format: str | None = None, command: str = "",
                   progress: Callable[[int, int], Any] | None = None,
                   phase: str | None = None, skip: int = 0, take: int | None = None,
                   level: int | None = None,
                   extra: dict[str, str] | None = None) -> tuple[int, int]:
    """:func:`convert`, returning ``(written, left_out)``: the events written, and the events
    read that the output format could not represent (e.g. control events in din, a fifth
    load of one instruction in ChampSim)."""
    for name, v in (("skip", skip), ("take", take)):
        if v is not None and v < 0:
            raise LookasideError(f"{name}: {v} is not a count of references")
    return _lookaside.convert(os.fspath(src), os.fspath(dst), src_format, dst_format, command,
                              progress, phase, skip, take, level, extra)


def access_map(trace: PathLike, *, page: str | int = "4k", interval: int = 100_000,
               select: str = "data", format: str | None = None,
               progress: Callable[[int, int], Any] | None = None) -> Any:
    """The memory access map of a trace (Chen 1994, Figs. 7-12 to 7-14): one row per page
    touched in an interval of ``interval`` instructions, as a pandas DataFrame with columns
    ``asid``, ``page`` (page number), ``address`` (of the page) and ``interval``. ``select``
    is ``"data"``, ``"instruction"`` or ``"all"``; ``df.attrs`` holds ``page_bytes``,
    ``interval_instructions`` and ``intervals``. :func:`lookaside.report.plot_access_map`
    draws it."""
    import pandas as pd

    page_bytes = page if isinstance(page, int) else _page_bytes(page)
    raw = json.loads(_lookaside.access_map(os.fspath(trace), page_bytes, interval, select,
                                           format, progress))
    rows = [(asid, pg, pg * page_bytes, i)
            for (asid, pg), ivs in zip(raw["pages"], raw["touched"]) for i in ivs]
    df = pd.DataFrame(rows, columns=["asid", "page", "address", "interval"])
    df.attrs.update(page_bytes=page_bytes, interval_instructions=raw["interval_instructions"],
                    intervals=raw["intervals"], truncated_at=raw["truncated_at"])
    return df


def _page_bytes(text: str) -> int:
    """Bytes of a page size, as the engine reads it (``4k``, ``2M``, ``8192``)."""
    return _lookaside.page_bytes(text)


def metadata(trace: PathLike, *, format: str | None = None) -> dict[str, Any]:
    """What a trace says about itself (its capture, command, processes, kernel layout…), read
    from its header alone, however long the trace: ``info(trace)["metadata"]`` without
    reading the events. Empty for a format that carries none."""
    return json.loads(_lookaside.metadata(os.fspath(trace), format)) or {}


def info(trace: PathLike, *, format: str | None = None,
         progress: Callable[[int, int], Any] | None = None) -> dict[str, Any]:
    """A summary of a trace: events by kind and mode, references per address space and per
    CPU (``by_asid``, ``by_cpu``), pages touched, …
    ``progress(events, bytes)`` is called now and then; Ctrl-C stops the reading."""
    return json.loads(_lookaside.info(os.fspath(trace), format, progress))
