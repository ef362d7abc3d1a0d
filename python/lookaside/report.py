"""HTML reports of sweeps: the answer to the design question, and plots to check it by.

``write_report(DIR)`` reads a sweep's tidy table (``DIR/results.csv``, once) and writes
``DIR/report.html``: one self-contained page (plots embedded as SVG, no server and no
network needed) with the best configuration per trace, structure and metric, the knee of
every plotted curve, per structure the metric against each numeric or size axis (one line
per combination of the other axes), heat maps over the pairs of axes with the most cells,
the metric against mapping size (entries × page size, one line per page size) when page
sizes vary, trap cycles by miss type and against partition points for software-refilled
machines, and a sortable table of the points. Axes run in value order (sizes by bytes), on
log scales where values span two decades, and titles name the axes held. Plot files are
also written as ``DIR/plots/*.svg``; each plot is rendered once, and at most
:data:`MAX_FIGURES` of them, so a report takes seconds.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import numbers
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Callable

from . import _lookaside
from ._files import write_atomically


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)


# Plotting primitives: the sweep report below and the ``lookaside reproduce`` recipes draw
# every plot with these, so all plots share one look and one place to change it.


def subplots(ncols: int = 1, size: tuple[float, float] = (6.4, 4)) -> tuple[Any, Any]:
    """A figure of `ncols` axes side by side (off screen); returns (figure, axes), the axes a
    list when `ncols` > 1."""
    fig, axes = _plt().subplots(1, ncols, figsize=size)
    return fig, list(axes) if ncols > 1 else axes


def save_figure(fig: Any, plots: str | os.PathLike[str], name: str) -> Path:
    """Write the figure as ``plots/NAME.svg`` and ``plots/NAME.png`` and close it; returns
    the SVG's path."""
    plots = Path(plots)
    svg = plots / f"{name}.svg"
    fig.savefig(svg, format="svg", bbox_inches="tight")
    fig.savefig(plots / f"{name}.png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return svg


def _finish(ax: Any, xlabel: str | None, ylabel: str | None, title: str | None,
            xlog: bool | int, ylog: bool | int, legend: bool, grid: str = "both") -> None:
    for log, set_scale in ((xlog, ax.set_xscale), (ylog, ax.set_yscale)):
        if log:
            set_scale("log", **({"base": log} if log is not True else {}))
    ax.set(**{k: v for k, v in (("xlabel", xlabel), ("ylabel", ylabel), ("title", title))
              if v is not None})
    ax.grid(True, axis=grid, alpha=0.3)
    if legend and ax.get_legend_handles_labels()[1]:
        ax.legend(fontsize=7)


def plot_lines(ax: Any, df: Any, x: str, y: str | dict[str, str], by: str | list[str] | None = None,
               *, published: str | None = None, hlines: dict[str, float] | None = None,
               xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
               xlog: bool | int = False, ylog: bool | int = False, legend: bool = True,
               marker: str = "o", label: str | Callable[..., str] | None = None,
               published_label: str = "paper") -> None:
    """Lines of `y` against `x` on axes `ax`, one per group of `by` (columns of `df`).

    `y` is a column, or {column: label} for several series per group (each its own marker
    and dash). With `published` (a column of the paper's values), each line is drawn as
    "(ours)" and the published values over it, dashed with crosses in the same colour, where
    there are any, labelled `published_label`. `hlines` adds labelled horizontal reference
    lines. `xlog`/`ylog`: True or a base. A group is labelled by `label` (a format string,
    or a function, given the group's values), else by its value when `by` is one column,
    or by ``column=value, …``."""
    series = {y: None} if isinstance(y, str) else dict(y)
    keys = [by] if isinstance(by, str) else list(by or [])
    groups = df.groupby(keys, sort=True, observed=True) if keys else [((), df)]
    markers, dashes = [marker, "s", "^", "v", "D"], ["-", "--", ":", "-."]
    colour = 0
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        if callable(label):
            name = label(*key)
        elif label is not None:
            name = label.format(*key)
        elif isinstance(by, str):
            name = _label(key[0])
        else:
            name = ", ".join(f"{k}={_label(v)}" for k, v in zip(keys, key))
        g = g.sort_values(x)
        for i, (col, text) in enumerate(series.items()):
            line = ", ".join(t for t in (text, name) if t) or col
            c = f"C{colour % 10}"
            if published is None:
                ax.plot(g[x], g[col], marker=markers[i % len(markers)],
                        ls=dashes[i % len(dashes)], color=c, label=line)
            else:
                ax.plot(g[x], g[col], marker=marker, color=c, label=f"{line} (ours)")
                p = g.dropna(subset=[published])
                if len(p):
                    ax.plot(p[x], p[published], marker="x", ls="--", color=c,
                            label=f"{line} ({published_label})")
            if published is not None or len(series) == 1:
                colour += 1
        if published is None and len(series) > 1:
            colour += 1
    for i, (text, v) in enumerate((hlines or {}).items()):
        ax.axhline(v, ls="--", color="gray" if i == 0 else f"C{7 + i}", label=text)
    _finish(ax, xlabel, ylabel, title, xlog, ylog, legend)


def plot_bars(ax: Any, df: Any, x: str, y: dict[str, str], *, stacked: bool = True,
              xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
              rotate: float = 0, legend: bool = True, scale: float = 1.0) -> None:
    """Bars of the columns `y` ({column: label}) of `df` at each value of column `x` (as
    categories, in the frame's order): stacked, or grouped side by side. Values are
    multiplied by `scale`."""
    labels = [_label(v) for v in df[x]]
    pos = list(range(len(labels)))
    bottom = [0.0] * len(labels)
    width = 0.8 / len(y)
    for i, (col, text) in enumerate(y.items()):
        vals = [scale * float(v) for v in df[col].fillna(0)]
        if stacked:
            ax.bar(pos, vals, bottom=bottom, label=text)
            bottom = [b + v for b, v in zip(bottom, vals)]
        else:
            ax.bar([p - 0.4 + width * (i + 0.5) for p in pos], vals, width=width, label=text)
    ax.set_xticks(pos, labels)
    if rotate:
        ax.tick_params(axis="x", rotation=rotate)
    _finish(ax, xlabel, ylabel, title, False, False, legend, grid="y")



def plot_access_map(df: Any, ax: Any, title: str = "") -> Any:
    """Draw a memory access map (see :func:`lookaside.access_map`) on matplotlib axes `ax`:
    x = the pages touched (in address order, per address space), y = time in intervals of
    instructions, a dark cell where a page was touched in an interval (Chen's Figs. 7-12 to
    7-14). Returns the image."""
    import numpy as np

    pages = sorted(set(zip(df.asid, df.page)))
    col = {p: i for i, p in enumerate(pages)}
    rows = max(int(df.attrs.get("intervals", 0)), int(df.interval.max()) + 1 if len(df) else 1)
    grid = np.zeros((rows, max(len(pages), 1)), dtype=np.uint8)
    for asid, page, interval in zip(df.asid, df.page, df.interval):
        grid[interval, col[(asid, page)]] = 1
    img = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="Greys", origin="lower")
    kib = df.attrs.get("page_bytes", 4096) // 1024
    ax.set_xlabel(f"pages touched ({kib} KiB), in address order")
    ax.set_ylabel(f"time (intervals of {df.attrs.get('interval_instructions', '?'):,} "
                  "instructions)")
    if len(pages) > 1:
        ticks = np.linspace(0, len(pages) - 1, min(6, len(pages))).astype(int)
        ax.set_xticks(ticks, [f"{pages[t][1] * df.attrs.get('page_bytes', 4096):#x}"
                              for t in ticks], rotation=30, fontsize=7)
    ax.set_title(title or "memory access map")
    return img


# The sweep report. Every plot and table answers "which configuration, and how big is
# enough": axes in value order, log scales where values span decades, titles that say what
# is held, the best configuration per trace and metric, and the knee of each curve.

#: Most rows (points) of the results table shown in the page (the files hold them all).
MAX_TABLE_ROWS = 5000
#: Most lines on one plot; further axes are held at their most common value.
MAX_LINES = 12
#: Most plots in one report: each costs a render (~0.3 s), and past a few dozen nobody
#: looks; the page says how many were left out.
MAX_FIGURES = 24
#: Heat maps per trace: the pairs of axes with the most cells.
HEAT_MAPS_PER_TRACE = 2
#: An axis (or a metric) spanning this ratio (two decades) or more is drawn on a log scale.
LOG_RATIO = 100.0
#: The knee of a curve: the smallest value of its axis at which the metric has come within
#: this fraction of the curve's range (worst − best) of its best.
KNEE_FRACTION = 0.10
#: The metrics the summary ranks configurations by (lower is better), where the table has them.
SUMMARY_METRICS = {"misses": "fewest misses", "miss_ratio": "lowest miss ratio",
                   "mpki": "lowest MPKI", "trap_cycles": "fewest trap cycles"}
#: Columns of the table that hold byte counts, shown as sizes (4k, 2M).
SIZE_COLUMNS = ("page_bytes", "mapping_bytes")

_SIZE = re.compile(r"^\s*\d+\s*[kmgKMG](i?[bB])?\s*$")


def axis_number(v: Any) -> float | None:
    """The magnitude of an axis value: a number as itself, a size ("16k", "2M") in bytes;
    None for anything else ("full", "lru", a missing value)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, numbers.Real):
        return None if math.isnan(v) else float(v)
    if isinstance(v, str) and _SIZE.match(v):
        n = _lookaside.byte_count(v)
        return None if n is None else float(n)
    return None


def value_order(values: Iterable[Any]) -> list[Any]:
    """The distinct values of an axis in the order a reader expects: numbers and sizes by
    magnitude (4k < 16k < 64k < 2M), then "full", then other text in order of first
    appearance (the spec's order), then missing values."""
    distinct: dict[str, Any] = {}
    for v in values:
        distinct.setdefault(_label(v), v)
    seen = list(distinct.values())

    def key(iv: tuple[int, Any]) -> tuple[int, float, int]:
        i, v = iv
        n = axis_number(v)
        if n is not None:
            return (0, n, i)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return (3, 0.0, i)
        return (1 if v == "full" else 2, 0.0, i)

    return [v for _, v in sorted(enumerate(seen), key=key)]


def _label(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def size_label(n: float) -> str:
    """Bytes as a size: 4096 → 4k, 2097152 → 2M (exact multiples only)."""
    n = int(n)
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n:,}"


def sig(v: float, digits: int = 4) -> str:
    """A ratio to a few significant digits, in plain notation where that stays short."""
    if v == 0 or math.isnan(v) or math.isinf(v):
        return "0" if v == 0 else str(v)
    if not 1e-4 <= abs(v) < 1e7:
        return f"{v:.{digits - 1}e}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def log_scale(values: Iterable[Any]) -> bool:
    """Whether values (all positive) span two decades or more (:data:`LOG_RATIO`)."""
    nums = [n for n in map(axis_number, values) if n is not None]
    return bool(nums) and min(nums) > 0 and max(nums) / min(nums) >= LOG_RATIO


def knee(xs: Sequence[float], ys: Sequence[float]) -> int:
    """The index of the knee of the curve (xs, ys), xs increasing: the first point whose y is
    within :data:`KNEE_FRACTION` of the curve's range (max − min) of its minimum, measured on
    the scale the curve is drawn on: of log y where y spans two decades (:func:`log_scale`)."""
    vals = [math.log10(y) for y in ys] if log_scale(ys) else list(ys)
    best, worst = min(vals), max(vals)
    limit = best + KNEE_FRACTION * (worst - best)
    return next(i for i, y in enumerate(vals) if y <= limit)


def _numeric_axis(df: Any, key: str) -> bool:
    vals = list(df[key].dropna().unique())
    return len(vals) >= 2 and all(axis_number(v) is not None for v in vals)


def _ordered(g: Any, keys: list[str]) -> Any:
    """`g` sorted by its axes' values in :func:`value_order`, the first key outermost."""
    if not keys or g.empty:
        return g
    ranks = {}
    for k in keys:
        rank = {_label(v): i for i, v in enumerate(value_order(g[k]))}
        ranks[f"_rank_{k}"] = g[k].map(lambda v, rank=rank: rank[_label(v)])
    return g.assign(**ranks).sort_values(list(ranks), kind="stable").drop(columns=list(ranks))


def _mode(g: Any, key: str, metric: str | None = None) -> str:
    """The value (as text) to hold axis `key` at in `g`: among its most common values, the
    one under which `metric` takes the most distinct values (where the other axes make the
    most difference: not a direct-mapped TLB when policies are compared), the first of
    those; without a metric, the middle one in value order."""
    text = g[key].map(_label)
    counts = text.value_counts()
    top = [_label(v) for v in value_order(g[key]) if counts[_label(v)] == counts.max()]
    if metric is not None and metric in g.columns and len(top) > 1:
        distinct = [g.loc[text == v, metric].round(12).nunique() for v in top]
        return top[max(range(len(top)), key=lambda i: (distinct[i], -i))]
    return top[len(top) // 2]


def _at_mode(g: Any, keys: list[str], metric: str | None = None) -> Any:
    """The rows of `g` with each of `keys` held at one value (see :func:`_mode`)."""
    for k in keys:
        g = g[g[k].map(_label) == _mode(g, k, metric)]
    return g


def _held(df: Any, keys: list[str]) -> str:
    """What `keys` are held at in `df` (each has one value by then), for a title."""
    if not keys or not len(df):
        return ""
    return "held: " + ", ".join(f"{k}={_label(df[k].iloc[0])}" for k in keys)


def _lines_and_held(df: Any, keys: list[str], x: str) -> tuple[list[str], list[str]]:
    """For a plot against axis `x`: the other varying axes drawn as one line per combination
    of their values, as many as fit in MAX_LINES (axes with fewer values first), and the rest,
    to be held at their most common value."""
    varying = sorted((k for k in keys if k != x and df[k].nunique(dropna=False) > 1),
                     key=lambda k: df[k].nunique(dropna=False))
    others, lines = [], 1
    for k in varying:
        if lines * df[k].nunique(dropna=False) <= MAX_LINES:
            others.append(k)
            lines *= df[k].nunique(dropna=False)
    return others, [k for k in varying if k not in others]


def _as_lines(g: Any, others: list[str]) -> Any:
    """`g` with each line axis as an ordered category of its labels (legend in value order)."""
    import pandas as pd

    return g.assign(**{k: pd.Categorical(g[k].map(_label),
                                         [_label(v) for v in value_order(g[k])], ordered=True)
                       for k in others})


def _tick_values(ax: Any, values: list[Any], size: bool) -> None:
    """Ticks at an axis's own values (up to 16 of them), labelled as sizes or numbers; with
    more, sizes on a log axis get ticks at powers of two, labelled as sizes."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    nums = sorted({axis_number(v) for v in values} - {None})
    if not nums:
        return
    if len(nums) <= 16:
        ax.set_xticks(nums, [size_label(n) if size else _label(n) for n in nums])
        ax.xaxis.set_minor_locator(NullLocator())
    elif size and ax.get_xscale() == "log":
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=10))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(v)))
        ax.xaxis.set_minor_locator(NullLocator())


def _title(structure: str, metric: str, what: str, trace: str, held: str, lines: list[str]
           ) -> str:
    sub = "; ".join(t for t in (held, "one line per " + ", ".join(lines) if lines else "") if t)
    return f"{structure} {metric.replace('_', ' ')} {what} — {trace}" + (f"\n{sub}" if sub else "")


#: A plot of the report: (file name, caption, a function that draws it and returns the
#: figure), drawn only if it makes the cut of :data:`MAX_FIGURES`.
Figure = tuple[str, str, Callable[[], Any]]


def _curves(df: Any, keys: list[str], metric: str
            ) -> Iterator[tuple[str, str, str, Any, list[str], list[str]]]:
    """The curves of `metric` the line plots draw: per numeric (or size) axis x, structure and
    trace, (x, structure, trace, rows, line axes, held axes). The rows have x's magnitude as
    ``_x`` and each line axis as an ordered category; the held axes are at one value."""
    for x in keys:
        if not _numeric_axis(df, x):
            continue
        others, held = _lines_and_held(df, keys, x)
        for (structure, trace), g in df.groupby(["structure", "trace"], sort=False):
            g = g.dropna(subset=[metric])
            if g.empty:
                continue
            g = _at_mode(g, held, metric)
            if g[x].nunique() < 2:
                continue
            yield x, structure, trace, _as_lines(g.assign(_x=g[x].map(axis_number)), others), \
                others, held


def _lines(g: Any, others: list[str]) -> Iterator[tuple[Any, Any]]:
    """The lines of a curve's rows (in legend order): (the line axes' values, rows by x)."""
    groups = g.groupby(others, sort=True, observed=True) if others else [((), g)]
    for key, h in groups:
        yield (key if isinstance(key, tuple) else (key,)), h.sort_values("_x")


def _line_plots(df: Any, keys: list[str], metric: str) -> Iterator[Figure]:
    """Per structure and trace, `metric` against each numeric (or size) axis, one line per
    combination of other axes, the knee of each line circled."""
    for x, structure, trace, g, others, held in _curves(df, keys, metric):
        size = any(isinstance(v, str) for v in g[x].dropna())
        title = _title(structure, metric, f"vs {x}", trace, _held(g, held), others)

        def draw(g: Any = g, others: list[str] = others, title: str = title,
                 size: bool = size, x: str = x, structure: str = structure) -> Any:
            fig, ax = subplots()
            plot_lines(ax, g, "_x", {metric: ""}, others, xlabel=x,
                       ylabel=f"{structure} {metric.replace('_', ' ')}",
                       xlog=log_scale(g[x]), ylog=log_scale(g[metric]), legend=bool(others),
                       marker="o" if g["_x"].nunique() <= 40 else ".")
            for line, (_, h) in zip(ax.get_lines(), _lines(g, others)):
                k = knee(list(h["_x"]), list(h[metric]))
                ax.plot([h["_x"].iloc[k]], [h[metric].iloc[k]], marker="o", ms=11,
                        mfc="none", color=line.get_color(), label="_knee")
            _tick_values(ax, list(g[x]), size)
            ax.set_title(title, fontsize=9)
            return fig

        yield (f"line-{structure}-{x}-{trace}",
               f"{structure}: {metric} vs {x} ({trace}; ○ knee)", draw)


def _heat_maps(df: Any, keys: list[str], metric: str) -> Iterator[Figure]:
    """Per structure and trace, `metric` over the pairs of axes with the most cells
    (:data:`HEAT_MAPS_PER_TRACE`), the other axes held; rows and columns in value order."""
    varying = [k for k in keys if df[k].nunique(dropna=False) > 1]
    pairs = [(a, b) for i, a in enumerate(varying) for b in varying[i + 1:]]
    pairs.sort(key=lambda p: -df[p[0]].nunique(dropna=False) * df[p[1]].nunique(dropna=False))
    for (structure, trace), g0 in df.groupby(["structure", "trace"], sort=False):
        for a, b in pairs[:HEAT_MAPS_PER_TRACE]:
            rest = [k for k in varying if k not in (a, b)]
            g = _at_mode(g0.dropna(subset=[metric]), rest, metric)
            rows, cols = value_order(g[a]), value_order(g[b])
            table = (g.assign(_a=g[a].map(_label), _b=g[b].map(_label))
                     .pivot_table(index="_a", columns="_b", values=metric, aggfunc="first")
                     .reindex(index=[_label(v) for v in rows], columns=[_label(v) for v in cols]))
            if table.size < 2:
                continue
            title = _title(structure, metric, f"over {a} × {b}", trace, _held(g, rest), [])

            def draw(table: Any = table, g: Any = g, a: str = a, b: str = b,
                     title: str = title) -> Any:
                from matplotlib.colors import LogNorm

                fig, ax = _plt().subplots(figsize=(6.4, 4.4))
                norm = LogNorm() if log_scale(g[metric]) else None
                im = ax.imshow(table.to_numpy(dtype=float), aspect="auto", cmap="viridis",
                               norm=norm)
                ax.set_xticks(range(len(table.columns)), list(table.columns))
                ax.set_yticks(range(len(table.index)), list(table.index))
                ax.set(xlabel=b, ylabel=a)
                ax.set_title(title, fontsize=9)
                fig.colorbar(im, ax=ax)
                return fig

            yield (f"heat-{structure}-{a}-{b}-{trace}",
                   f"{structure}: {metric} over {a} × {b} ({trace})", draw)


def _mapping_size(df: Any, keys: list[str], metric: str) -> Iterator[Figure]:
    """Per structure and trace, `metric` against mapping size (entries × page size), one line
    per page size: Chen's Figs. 7-8 to 7-10, where equal-mapping-size points line up. Axes
    that set neither the entries nor the page size are held at their most common value."""
    if "mapping_bytes" not in df.columns:
        return
    for (structure, trace), g in df.groupby(["structure", "trace"], sort=False):
        g = g.dropna(subset=["mapping_bytes", metric])
        if g.page_bytes.nunique() < 2 or g.mapping_bytes.nunique() < 2:
            continue
        held = []
        for k in keys:
            h = _at_mode(g, [k], metric)
            if (h.entries.nunique(), h.page_bytes.nunique()) == (g.entries.nunique(),
                                                                 g.page_bytes.nunique()):
                g = h
                if df[k].nunique(dropna=False) > 1:
                    held.append(k)
        h = g.groupby(["page_bytes", "mapping_bytes"], as_index=False)[metric].mean()
        title = _title(structure, metric, "vs mapping size", trace, _held(g, held),
                       ["page size"])

        def draw(h: Any = h, title: str = title, structure: str = structure) -> Any:
            fig, ax = subplots()
            plot_lines(ax, h, "mapping_bytes", {metric: ""}, "page_bytes",
                       xlog=log_scale(h.mapping_bytes), ylog=log_scale(h[metric]),
                       label=lambda p: f"{size_label(p)} pages",
                       xlabel="mapping size (entries × page size)",
                       ylabel=f"{structure} {metric.replace('_', ' ')}")
            _tick_values(ax, list(h.mapping_bytes), True)
            ax.tick_params(axis="x", labelsize=7)
            ax.set_title(title, fontsize=9)
            return fig

        yield (f"mapping-{structure}-{trace}",
               f"{structure}: {metric} vs mapping size ({trace})", draw)


def _cost_by_type(df: Any, keys: list[str]) -> Iterator[Figure]:
    """For software-refilled machines: trap cycles stacked by miss type (L1U, L1K, L2, …)
    against each varying axis, at the most common value of the others (Uhlig's Figs. 4-6)."""
    kinds = [c for c in df.columns if c.startswith("cycles_") and df[c].fillna(0).any()]
    if not kinds:
        return
    varying = [k for k in keys if df[k].nunique(dropna=False) > 1]
    rows = df.drop_duplicates("point")
    for x in varying:
        for trace, g in rows.groupby("trace", sort=False):
            rest = [k for k in varying if k != x]
            g = _at_mode(g, rest)
            if g[x].nunique() < 2:
                continue
            held = _held(g, rest)

            def draw(g: Any = g, x: str = x, trace: str = trace, held: str = held) -> Any:
                fig, ax = subplots()
                plot_bars(ax, _ordered(g, [x]), x, {c: c[len("cycles_"):] for c in kinds},
                          xlabel=x, ylabel="TLB miss handling (cycles)")
                ax.set_title(f"cost by miss type — {trace}" + (f"\n{held}" if held else ""),
                             fontsize=9)
                return fig

            yield f"cost-{x}-{trace}", f"trap cycles by miss type vs {x} ({trace})", draw


def _partition_curves(df: Any, keys: list[str]) -> Iterator[Figure]:
    """For software-refilled machines: total trap cycles against each partition-point axis
    (``….partition.lower``), one line per value of the other varying axes (as many as fit in
    MAX_LINES; the rest held at their most common value): Uhlig's Figs. 7-9, where the
    optimum is the bottom of the U."""
    if "trap_cycles" not in df.columns or not df.trap_cycles.fillna(0).any():
        return
    rows = df.drop_duplicates("point")
    varying = [k for k in keys if rows[k].nunique(dropna=False) > 1]
    for x in (k for k in varying if k.endswith("partition.lower")):
        others, held = _lines_and_held(rows, keys, x)
        for trace, g in rows.groupby("trace", sort=False):
            g = _at_mode(g, held, "trap_cycles")
            if g[x].nunique() < 2:
                continue
            title = _title("total", "cost", "vs partition point", trace, _held(g, held), others)

            def draw(g: Any = g, x: str = x, others: list[str] = others,
                     title: str = title) -> Any:
                fig, ax = subplots()
                plot_lines(ax, _as_lines(g, others), x, {"trap_cycles": ""}, others,
                           marker=".", xlabel="lower partition (slots)",
                           ylabel="TLB miss handling (cycles)", legend=bool(others))
                ax.set_title(title, fontsize=9)
                return fig

            yield f"partition-{x}-{trace}", f"trap cycles vs {x} ({trace})", draw


def _best_row(g: Any, metric: str, axes: list[str]) -> Any:
    """The row of `g` with the lowest `metric`; among ties, the one with the smallest axis
    values (in :func:`value_order`, the first axis first): the cheapest of the best."""
    ties = g[g[metric] == g[metric].min()]
    return _ordered(ties, axes).iloc[0]


def best_configurations(df: Any, keys: list[str]) -> Any:
    """Per trace, structure and metric of :data:`SUMMARY_METRICS`: the best value and the
    configuration (the varying axes) that reaches it, with how many configurations tie."""
    import pandas as pd

    varying = [k for k in keys if df[k].nunique(dropna=False) > 1]
    rows = []
    for metric in (m for m in SUMMARY_METRICS if m in df.columns and df[m].notna().any()):
        data = df
        if metric == "trap_cycles":  # one per point, the same on every structure's row
            data = df.drop_duplicates("point").assign(structure="(all)")
        for (trace, structure), g in data.groupby(["trace", "structure"], sort=False):
            g = g.dropna(subset=[metric])
            if g.empty:
                continue
            best = _best_row(g, metric, varying)
            rows.append({"trace": trace, "structure": structure,
                         "goal": SUMMARY_METRICS[metric], "metric": metric,
                         "best": best[metric], **{k: best[k] for k in varying},
                         "ties": int((g[metric] == best[metric]).sum())})
    return pd.DataFrame(rows, columns=["trace", "structure", "goal", "metric", "best",
                                       *varying, "ties"])


def knees(df: Any, keys: list[str], metric: str) -> Any:
    """The knee (see :func:`knee`) of every curve the line plots draw: per numeric axis,
    structure, trace and line (the values of the line axes), with the held axes' values."""
    import pandas as pd

    rows = []
    for x, structure, trace, g, others, held in _curves(df, keys, metric):
        fixed = ", ".join(f"{k}={_label(g[k].iloc[0])}" for k in held)
        for key, h in _lines(g, others):
            if len(h) < 2:
                continue
            i = knee(list(h["_x"]), list(h[metric]))
            line = ", ".join(f"{k}={v}" for k, v in zip(others, key))
            rows.append({"trace": trace, "structure": structure, "axis": x, "knee": h[x].iloc[i],
                         metric: h[metric].iloc[i], "best": h[metric].min(),
                         "worst": h[metric].max(), "line": line or "—", "held": fixed or "—"})
    return pd.DataFrame(rows, columns=["trace", "structure", "axis", "knee", metric, "best",
                                       "worst", "line", "held"])


#: The columns of each structure in the page's table of points.
POINT_COLUMNS = ("misses", "miss_ratio", "mpki")


def points_table(df: Any, keys: list[str]) -> Any:
    """One row per point (the tidy table has one per point and structure): the trace, the
    axes, trap cycles where the machine has them, and each structure's misses, miss ratio
    and MPKI as ``STRUCTURE COLUMN``."""
    cols = ["point", "trace", *keys] + (["trap_cycles"] if "trap_cycles" in df.columns else [])
    out = df.drop_duplicates("point")[cols].reset_index(drop=True)
    for structure in df["structure"].unique():
        s = df[df["structure"] == structure].set_index("point")
        for c in POINT_COLUMNS:
            if c in s.columns and s[c].notna().any():
                out[f"{structure} {c}"] = out["point"].map(s[c])
    return out


def format_cell(column: str, v: Any, kind: str) -> tuple[str, float | None]:
    """A table cell as (text, sort value): integers with thousands separators, byte counts
    as sizes (4k, 2M), other numbers to four significant digits; sizes given as text sort by
    their bytes. `kind` is the column's, from :func:`column_kind`."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—", None
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        if kind == "size":
            return size_label(v), float(v)
        if kind == "int":
            return f"{int(v):,}", float(v)
        return sig(float(v)), float(v)
    return str(v), axis_number(v)


def column_kind(column: str, values: Any) -> str:
    """"size" (bytes), "int" (every number whole), "float" or "text"."""
    nums = [v for v in values if isinstance(v, numbers.Real) and not isinstance(v, bool)
            and not math.isnan(v)]
    if column in SIZE_COLUMNS:
        return "size"
    if nums and all(float(v).is_integer() for v in nums) and column not in ("miss_ratio",):
        return "int"
    return "float" if nums else "text"


def html_table(df: Any, cls: str = "sortable") -> str:
    """`df` as an HTML table whose columns sort when their header is clicked (see
    :data:`_SORT_JS`), cells formatted by :func:`format_cell`."""
    kinds = {c: column_kind(c, df[c].tolist()) for c in df.columns}
    head = "".join(f"<th title='click to sort'>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for row in df.itertuples(index=False):
        cells = []
        for c, v in zip(df.columns, row):
            text, n = format_cell(c, v, kinds[c])
            num = "" if n is None else f" data-n='{n:.17g}'"
            align = "" if n is not None or text == "—" else " class='t'"
            cells.append(f"<td{num}{align}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>"
            + "\n".join(body) + "</tbody></table>")


#: Click a header to sort by it (again to reverse): numbers (data-n) by value and before
#: text, text alphabetically.
_SORT_JS = """<script>
document.querySelectorAll("table.sortable th").forEach(th => th.onclick = () => {
  const i = th.cellIndex, body = th.closest("table").tBodies[0], up = th.dataset.dir !== "up";
  th.parentNode.querySelectorAll("th").forEach(h => delete h.dataset.dir);
  th.dataset.dir = up ? "up" : "down";
  const val = r => r.cells[i].dataset.n, txt = r => r.cells[i].textContent;
  const rows = [...body.rows].sort((a, b) => {
    const x = val(a), y = val(b);
    const c = x !== undefined && y !== undefined ? x - y
      : (x === undefined) - (y === undefined) || txt(a).localeCompare(txt(b));
    return up ? c : -c;
  });
  body.append(...rows);
});
</script>"""

_STYLE = ("<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
          "figure{display:inline-block;margin:1em;vertical-align:top}"
          "figcaption{font-size:90%;color:#444}table{border-collapse:collapse;font-size:85%;"
          "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
          "td.t{text-align:left}th{background:#f3f3f3;cursor:pointer;position:sticky;top:0}"
          "th[data-dir=up]::after{content:' ▲'}th[data-dir=down]::after{content:' ▼'}"
          "</style>")


def _svg(fig: Any, plots: Path, name: str) -> str:
    """Write the figure as ``plots/NAME.svg`` (one render: no PNG, no tight bounding box)
    and return its SVG element."""
    safe = name.replace("/", "_").replace(".", "_").replace(":", "_").replace(",", "_")
    path = plots / f"{safe}.svg"
    # Fixed margins, room for a two-line title: a tight bounding box costs a second render.
    fig.subplots_adjust(left=0.13, right=0.97, bottom=0.12, top=0.86)
    fig.savefig(path, format="svg")
    _plt().close(fig)
    svg = path.read_text(encoding="utf-8")
    return svg[svg.index("<svg"):]


def write_report(sweep_dir: str | os.PathLike[str], output: str | os.PathLike[str] | None = None,
                 metric: str = "miss_ratio",
                 progress: Callable[[str], None] | None = None) -> Path:
    """Write the HTML report of the sweep in `sweep_dir`; returns its path. `progress` is
    told of each kind of figure as it is drawn."""
    say = progress or (lambda _message: None)
    import pandas as pd

    d = Path(sweep_dir)
    try:
        meta = json.loads((d / "sweep.json").read_text(encoding="utf-8"))
        df = pd.read_csv(d / "results.csv")
    except FileNotFoundError as e:
        from . import LookasideError

        raise LookasideError(f"{e.filename}: not found (is {d} a finished sweep?)") from None
    keys = [k for k in meta["keys"] if k in df.columns]
    # CSV reads "full" next to numbers as text: give numbers back their type per column.
    for k in keys:
        df[k] = df[k].map(_typed)
    plots = d / "plots"
    plots.mkdir(exist_ok=True)
    for old in plots.glob("*.svg"):  # plots of an earlier report of this sweep
        old.unlink()
    tlbs = df[df["structure"] != "walk"]
    say(f"{len(df)} rows: plots (at most {MAX_FIGURES})")
    sources = itertools.chain(_line_plots(tlbs, keys, metric), _mapping_size(tlbs, keys, metric),
                              _heat_maps(tlbs, keys, metric), _cost_by_type(df, keys),
                              _partition_curves(df, keys))
    figures = [(caption, _svg(draw(), plots, name))
               for name, caption, draw in itertools.islice(sources, MAX_FIGURES)]
    left_out = sum(1 for _ in sources)  # counted, not drawn
    say(f"{len(figures)} plots drawn; knees, best configurations and the table")
    knee_table = knees(tlbs, keys, metric)
    varying = [k for k in keys if df[k].nunique(dropna=False) > 1]
    axes = "; ".join(f"{html.escape(k)} = {html.escape(', '.join(map(_label, value_order(df[k]))))}"
                     for k in varying) or "(none)"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Lookaside sweep {html.escape(meta['name'])}</title>", _STYLE, "</head><body>",
        f"<h1>Sweep {html.escape(meta['name'])}</h1>",
        f"<p>{meta['points']:,} point{'s' if meta['points'] != 1 else ''} from "
        f"<code>{html.escape(meta['spec'])}</code>; "
        f"axes: {axes}; plotted metric: {metric}.</p>",
        "<h2>Best configurations</h2>",
        "<p>Per trace and structure, the configuration with the lowest value of each metric; "
        "among ties (<code>ties</code> of them), the one with the smallest axis values, the "
        "first axis first.</p>",
        html_table(best_configurations(df, keys)),
        "<h2>Knees</h2>",
        f"<p>The knee of a curve is the smallest value of its axis at which {metric} is within "
        f"{KNEE_FRACTION:.0%} of the curve's range (worst − best) of its best, on the scale "
        "the curve is drawn on (the range of log values where it spans two decades): past it, a "
        "bigger configuration buys little. One row per line of the plots below (where the "
        "knee is circled): the line's own values, and those the plot holds.</p>",
        html_table(knee_table) if len(knee_table) else "<p>No curve: no numeric axis "
        "takes two values or more.</p>",
        "<h2>Plots</h2>",
    ]
    if not figures:
        parts.append("<p>No axis has two or more values to plot.</p>")
    if left_out:
        parts.append(f"<p>The first {MAX_FIGURES} plots; {left_out} more are left out (plot "
                     "them from <code>results.parquet</code>).</p>")
    for title, svg in figures:
        parts.append(f"<figure>{svg}<figcaption>{html.escape(title)}</figcaption></figure>")
    parts.append("<h2>Results</h2>")
    table = points_table(df, keys).drop(columns=["point"])
    same = [c for c in table.columns if table[c].nunique(dropna=False) == 1]
    if same:
        first = table.iloc[0]
        shown = [f"{c} = {format_cell(c, first[c], column_kind(c, [first[c]]))[0]}"
                 for c in same]
        parts.append(f"<p>The same in every row: {html.escape(', '.join(shown))}.</p>")
    parts.append("<p>One row per point (all columns in <code>results.csv</code> and "
                 "<code>results.parquet</code>); click a header to sort.</p>")
    if len(table) > MAX_TABLE_ROWS:
        parts.append(f"<p>The first {MAX_TABLE_ROWS:,} of {len(table):,} points (sorting "
                     "sorts these).</p>")
    parts.append(html_table(table.drop(columns=same).head(MAX_TABLE_ROWS)))
    parts += [_SORT_JS, "</body></html>"]
    target = Path(output) if output else d / "report.html"
    write_atomically(target, "\n".join(parts))
    return target


def _typed(v: Any) -> Any:
    if isinstance(v, str):
        for conv in (int, float):
            try:
                return conv(v)
            except ValueError:
                pass
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v
