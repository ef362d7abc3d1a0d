"""HTML reports of sweeps: plots a person would rather look at than read.

``write_report(DIR)`` reads a sweep's tidy table (``DIR/results.csv``) and writes
``DIR/report.html``: one self-contained page (plots embedded as SVG, no server and no
network needed) with, per structure, the miss ratio against each numeric axis (one line per
combination of the other axes, log-2 x axis for sizes), a heat map over every pair of axes,
the miss ratio against mapping size (entries × page size, one line per page size) when page
sizes vary, trap cycles stacked by miss type for software-refilled machines, and the table
itself. Plot files are also written as ``DIR/plots/*.svg`` and ``*.png``.
"""

from __future__ import annotations

import html
import json
import numbers
import os
from pathlib import Path
from typing import Any, Callable

from ._files import write_atomically


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _numeric(values: list[Any]) -> bool:
    return all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)


def _label(v: Any) -> str:
    return "—" if v is None else str(v)


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
    groups = df.groupby(keys, sort=True) if keys else [((), df)]
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


def _save(fig: Any, plots: Path, name: str) -> str:
    """Write the figure as SVG and PNG; return the SVG text for embedding."""
    svg = save_figure(fig, plots, name).read_text(encoding="utf-8")
    return svg[svg.index("<svg"):]


#: Most rows of the table shown in the page (the files hold them all).
MAX_TABLE_ROWS = 1000
#: Most lines on one plot; further axes are held at their most common value.
MAX_LINES = 12


def _mode(g: Any, key: str, metric: str | None = None) -> str:
    """The value (as text) to hold axis `key` at in `g`: among its most common values, the
    one under which `metric` takes the most distinct values (where the other axes make the
    most difference: not a direct-mapped TLB when policies are compared), the first of
    those; without a metric, the middle one in order of appearance."""
    text = g[key].map(str)
    counts = text.value_counts()
    top = [v for v in text.unique() if counts[v] == counts.max()]
    if metric is not None and metric in g.columns and len(top) > 1:
        distinct = [g.loc[text == v, metric].round(12).nunique() for v in top]
        return top[max(range(len(top)), key=lambda i: (distinct[i], -i))]
    return top[len(top) // 2]


def _at_mode(g: Any, keys: list[str], metric: str | None = None) -> Any:
    """The rows of `g` with each of `keys` held at one value (see :func:`_mode`)."""
    for k in keys:
        g = g[g[k].map(str) == _mode(g, k, metric)]
    return g


def _mode_label(df: Any, keys: list[str]) -> str:
    """The values `keys` are held at in `df` (each has one by then)."""
    return ", ".join(f"{k}={df[k].map(str).iloc[0]}" for k in keys if len(df))


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


def _line_plots(df: Any, keys: list[str], metric: str, plots: Path) -> list[tuple[str, str]]:
    out = []
    for x in keys:
        xs = list(df[x].dropna().unique())
        if len(xs) < 2 or not _numeric(xs):
            continue
        xs = sorted(xs)
        others, held = _lines_and_held(df, keys, x)
        for (structure, trace), g in df.groupby(["structure", "trace"], sort=True):
            g = _at_mode(g, held, metric)
            fig, ax = subplots()
            # Text keys where a column mixes types (4 and "full"), so that it groups and sorts.
            g = g.assign(**{k: g[k].map(_label) for k in others
                            if len({type(v) for v in g[k]}) > 1})
            plot_lines(ax, g, x, {metric: ""}, others, xlabel=x,
                       ylabel=f"{structure} {metric.replace('_', ' ')}",
                       xlog=2 if max(xs) / max(min(xs), 1e-12) >= 8 else False,
                       legend=bool(others))
            ax.set_title(f"{structure} — {trace}" + (f"\n({_mode_label(g, held)})"
                                                       if held else ""), fontsize=9)
            name = f"line-{structure}-{x}-{trace}".replace("/", "_").replace(".", "_")
            out.append((f"{structure}: {metric} vs {x} ({trace})", _save(fig, plots, name)))
    return out


def _heat_maps(df: Any, keys: list[str], metric: str, plots: Path) -> list[tuple[str, str]]:
    out = []
    varying = [k for k in keys if df[k].nunique(dropna=False) > 1]
    for i, a in enumerate(varying):
        for b in varying[i + 1:]:
            rest = [k for k in varying if k not in (a, b)]
            for (structure, trace), g in df.groupby(["structure", "trace"], sort=True):
                # One map per pair, at the most common value of every other axis.
                g = _at_mode(g, rest, metric)
                table = g.pivot_table(index=a, columns=b, values=metric, aggfunc="first")
                if table.size < 2:
                    continue
                plt = _plt()
                fig, ax = plt.subplots(figsize=(6.4, 4.4))
                im = ax.imshow(table.to_numpy(dtype=float), aspect="auto", cmap="viridis")
                ax.set_xticks(range(len(table.columns)), [_label(c) for c in table.columns])
                ax.set_yticks(range(len(table.index)), [_label(r) for r in table.index])
                ax.set_xlabel(b)
                ax.set_ylabel(a)
                ax.set_title(f"{structure} {metric.replace('_', ' ')} — {trace}")
                fig.colorbar(im, ax=ax)
                name = f"heat-{structure}-{a}-{b}-{trace}".replace("/", "_").replace(".", "_")
                title = f"{structure}: {metric} over {a} × {b} ({trace})"
                out.append((title, _save(fig, plots, name)))
    return out


def _mapping_size(df: Any, keys: list[str], metric: str,
                  plots: Path) -> list[tuple[str, str]]:
    """Per structure and trace, `metric` against mapping size (entries × page size), one line
    per page size: Chen's Figs. 7-8 to 7-10, where equal-mapping-size points line up. Axes
    that set neither the entries nor the page size are held at their most common value."""
    out = []
    if "mapping_bytes" not in df.columns:
        return out
    for (structure, trace), g in df.groupby(["structure", "trace"], sort=True):
        g = g.dropna(subset=["mapping_bytes"])
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
        fig, ax = subplots()
        h = g.groupby(["page_bytes", "mapping_bytes"], as_index=False)[metric].mean()
        h["mapping_kib"] = h.mapping_bytes / 1024
        plot_lines(ax, h, "mapping_kib", {metric: ""}, "page_bytes", xlog=2,
                   label=lambda p: f"{int(p) // 1024} KiB pages" if p >= 1024 else f"{int(p)} B",
                   xlabel="mapping size (KiB = entries × page size)",
                   ylabel=f"{structure} {metric.replace('_', ' ')}")
        ax.set_title(f"{structure} — {trace}" + (f"\n({_mode_label(g, held)})" if held else ""),
                     fontsize=9)
        name = f"mapping-{structure}-{trace}".replace("/", "_").replace(".", "_")
        out.append((f"{structure}: {metric} vs mapping size ({trace})", _save(fig, plots, name)))
    return out


def _partition_curves(df: Any, keys: list[str], plots: Path) -> list[tuple[str, str]]:
    """For software-refilled machines: total trap cycles against each partition-point axis
    (``….partition.lower``), one line per value of the other varying axes (as many as fit in
    MAX_LINES; the rest held at their most common value): Uhlig's Figs. 7-9, where the
    optimum is the bottom of the U."""
    out = []
    if "trap_cycles" not in df.columns or not df.trap_cycles.fillna(0).any():
        return out
    rows = df.drop_duplicates("point")
    varying = [k for k in keys if rows[k].nunique(dropna=False) > 1]
    for x in (k for k in varying if k.endswith("partition.lower")):
        others, held = _lines_and_held(rows, keys, x)
        for trace, g in rows.groupby("trace", sort=True):
            g = _at_mode(g, held, "trap_cycles")
            if g[x].nunique() < 2:
                continue
            g = g.assign(**{k: g[k].map(_label) for k in others})
            fig, ax = subplots()
            plot_lines(ax, g, x, {"trap_cycles": ""}, others, marker=".",
                       xlabel="lower partition (slots)", ylabel="TLB miss handling (cycles)",
                       legend=bool(others))
            ax.set_title(f"total cost vs partition point — {trace}"
                         + (f"\n({_mode_label(g, held)})" if held else ""), fontsize=9)
            name = f"partition-{x}-{trace}".replace("/", "_").replace(".", "_")
            out.append((f"trap cycles vs {x} ({trace})", _save(fig, plots, name)))
    return out


def _cost_by_type(df: Any, keys: list[str], plots: Path) -> list[tuple[str, str]]:
    """For software-refilled machines: trap cycles stacked by miss type (L1U, L1K, L2, …)
    against each varying axis, at the most common value of the others (Uhlig's Figs. 4-6)."""
    out = []
    kinds = [c for c in df.columns if c.startswith("cycles_") and df[c].fillna(0).any()]
    if not kinds:
        return out
    varying = [k for k in keys if df[k].nunique(dropna=False) > 1]
    rows = df.drop_duplicates("point")
    for x in varying:
        for trace, g in rows.groupby("trace", sort=True):
            g = _at_mode(g, [k for k in varying if k != x])
            if g[x].nunique() < 2:
                continue
            g = g.sort_values(x, key=lambda c: c.map(lambda v: (str(type(v)), v)))
            fig, ax = subplots()
            plot_bars(ax, g, x, {c: c[len("cycles_"):] for c in kinds}, xlabel=x,
                      ylabel="TLB miss handling (cycles)", title=f"cost by miss type — {trace}")
            name = f"cost-{x}-{trace}".replace("/", "_").replace(".", "_")
            out.append((f"trap cycles by miss type vs {x} ({trace})", _save(fig, plots, name)))
    return out


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
    say(f"{len(df)} rows: line plots")
    figures = _line_plots(df[df["structure"] != "walk"], keys, metric, plots)
    say("heat maps")
    figures += _heat_maps(df[df["structure"] != "walk"], keys, metric, plots)
    say("mapping size, cost by miss type, partition curves")
    figures += _mapping_size(df[df["structure"] != "walk"], keys, metric, plots)
    figures += _cost_by_type(df, keys, plots)
    figures += _partition_curves(df, keys, plots)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Lookaside sweep {html.escape(meta['name'])}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
        "figure{display:inline-block;margin:1em;vertical-align:top}"
        "figcaption{font-size:90%;color:#444}table{border-collapse:collapse;font-size:85%}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style></head><body>",
        f"<h1>Sweep {html.escape(meta['name'])}</h1>",
        f"<p>{meta['points']} points from <code>{html.escape(meta['spec'])}</code>; "
        f"axes: {html.escape(', '.join(keys) or '(none)')}; metric: {metric}.</p>",
    ]
    if not figures:
        parts.append("<p>No axis has two or more values to plot.</p>")
    for title, svg in figures:
        parts.append(f"<figure>{svg}<figcaption>{html.escape(title)}</figcaption></figure>")
    parts.append("<h2>Results</h2>")
    if len(df) > MAX_TABLE_ROWS:
        parts.append(f"<p>The first {MAX_TABLE_ROWS} of {len(df)} rows; all of them are in "
                     "<code>results.csv</code> and <code>results.parquet</code>.</p>")
    parts.append(df.head(MAX_TABLE_ROWS).to_html(index=False, float_format=lambda v: f"{v:.6g}",
                                                 na_rep="—"))
    parts.append("</body></html>")
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
