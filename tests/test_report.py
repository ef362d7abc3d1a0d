"""The plotting functions every plot is drawn with (sweep reports and the recipes), and the
sweep report: value order, log scales, held axes in titles, best configurations, knees, the
table."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from lookaside import _page_bytes
from lookaside.report import (
    _heat_maps,
    _line_plots,
    best_configurations,
    format_cell,
    html_table,
    knee,
    knees,
    log_scale,
    plot_bars,
    plot_lines,
    save_figure,
    subplots,
    value_order,
    write_report,
)
from lookaside.sweep import load_spec, run_sweep


def test_lines_per_group_with_the_paper_overlaid(tmp_path: Path):
    df = pd.DataFrame({"kb": [1, 2, 4, 1, 2, 4], "design": ["b"] * 3 + ["a"] * 3,
                       "ours": [3, 2, 1, 6, 5, 4], "published": [3.5, None, 1.5, None, None, None]})
    fig, ax = subplots()
    plot_lines(ax, df, "kb", "ours", "design", published="published",
               label=lambda d: d.upper(), xlog=2, ylabel="µs")
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    # Design "a" has no published values: no overlay for it.
    assert list(lines) == ["A (ours)", "B (ours)", "B (paper)"]
    assert list(lines["B (paper)"].get_xdata()) == [1, 4]
    assert list(lines["B (paper)"].get_ydata()) == [3.5, 1.5]
    assert lines["B (paper)"].get_color() == lines["B (ours)"].get_color()
    assert lines["B (paper)"].get_linestyle() == "--"
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "µs"
    svg = save_figure(fig, tmp_path, "lines")
    assert svg.read_text().lstrip().startswith("<?xml") and (tmp_path / "lines.png").exists()


def test_several_series_per_group_and_reference_lines():
    df = pd.DataFrame({"n": [2, 3, 2, 3], "lower": [8, 8, 16, 16], "base": [10, 12, 9, 11],
                       "pre": [5, 6, 4, 5]})
    fig, ax = subplots()
    plot_lines(ax, df, "n", {"base": "base", "pre": "prefetch"}, "lower",
               label="{} lower", hlines={"limit": 7.0})
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert labels == ["base, 8 lower", "prefetch, 8 lower", "base, 16 lower",
                      "prefetch, 16 lower", "limit"]
    assert list(ax.get_lines()[-1].get_ydata()) == [7.0, 7.0]


def test_bars_stack_or_stand_side_by_side():
    df = pd.DataFrame({"case": ["x", "y"], "a": [1.0, 2.0], "b": [3.0, None]})
    fig, ax = subplots()
    plot_bars(ax, df, "case", {"a": "A", "b": "B"})
    tops = sorted(round(p.get_y() + p.get_height(), 9) for p in ax.patches)
    assert tops == [1.0, 2.0, 2.0, 4.0]  # y's B is missing: counted as 0
    fig, ax = subplots()
    plot_bars(ax, df, "case", {"a": "A", "b": "B"}, stacked=False, scale=100)
    assert sorted(p.get_height() for p in ax.patches) == [0, 100, 200, 300]
    assert all(p.get_y() == 0 for p in ax.patches)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y"]


ENTRIES, PAGES, POLICY = "tlb.tlb.entries", "pages.size", "tlb.tlb.policy"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """A real sweep whose page sizes are listed out of order, as text sorts them."""
    d = tmp_path_factory.mktemp("sweep")
    (d / "s.toml").write_text(
        '[sweep]\ntlb = ["tlb:entries=16,ways=full,policy=lru"]\ntraces = ["sortprog"]\n'
        f'[axes]\n"{ENTRIES}" = [32, 8, 16]\n"{PAGES}" = ["2M", "4k", "16k"]\n'
        f'"{POLICY}" = ["lru", "fifo"]\n')
    o = run_sweep(load_spec(d / "s.toml"), d / "out", progress=False)
    return d / "out", o.table


def _drawn(figures, name: str):
    return next(draw() for n, _, draw in figures if n == name)


def test_axis_values_sort_by_magnitude_not_as_text(sweep):
    assert value_order(["16k", "2M", "4k", "64k"]) == ["4k", "16k", "64k", "2M"]
    assert value_order([8, "full", 1000, 2, 64]) == [2, 8, 64, 1000, "full"]
    assert value_order(["lru", "fifo", "random", "lru"]) == ["lru", "fifo", "random"]
    out, df = sweep
    keys = [ENTRIES, PAGES, POLICY]
    tlb = df[df.structure == "tlb"]
    heat = _drawn(_heat_maps(tlb, keys, "miss_ratio"),
                  f"heat-tlb-{ENTRIES}-{PAGES}-sortprog")
    ax = heat.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["8", "16", "32"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4k", "16k", "2M"]
    # The image's columns follow the labels: each cell is that configuration's miss ratio.
    image = ax.get_images()[0].get_array()
    policy = heat.axes[0].get_title().split(f"{POLICY}=")[1].split(",")[0].split(";")[0]
    for i, e in enumerate([8, 16, 32]):
        for j, p in enumerate(["4k", "16k", "2M"]):
            row = tlb[(tlb[ENTRIES] == e) & (tlb[PAGES] == p) & (tlb[POLICY] == policy)]
            assert image[i, j] == pytest.approx(row.miss_ratio.item())
    # A size axis is plotted against its bytes, and the lines are in value order.
    line = _drawn(_line_plots(tlb, keys, "miss_ratio"), f"line-tlb-{PAGES}-sortprog").axes[0]
    assert list(line.get_lines()[0].get_xdata()) == [4096, 16384, 2 << 20]
    assert [t.get_text() for t in line.get_xticklabels()] == ["4k", "16k", "2M"]
    by_entries = _drawn(_line_plots(tlb, keys, "miss_ratio"), f"line-tlb-{ENTRIES}-sortprog")
    legend = [t.get_text() for t in by_entries.axes[0].get_legend().get_texts()]
    assert legend.index("tlb.tlb.policy=lru, pages.size=4k") < \
        legend.index("tlb.tlb.policy=lru, pages.size=16k") < \
        legend.index("tlb.tlb.policy=lru, pages.size=2M")


def test_titles_name_the_axes_held(sweep):
    _, df = sweep
    tlb = df[df.structure == "tlb"]
    keys = [ENTRIES, PAGES, POLICY]
    heat = _drawn(_heat_maps(tlb, keys, "miss_ratio"), f"heat-tlb-{ENTRIES}-{PAGES}-sortprog")
    assert re.search(rf"held: {re.escape(POLICY)}=(lru|fifo)$", heat.axes[0].get_title())
    # Lines for as many axes as fit in a dozen lines; the rest are held, and say so.
    rows = [{"structure": "d", "trace": "t", "entries": e, "a": a, "b": b,
             "miss_ratio": 1 / (e + a + 10 * b)}
            for e in (8, 16, 32) for a in (1, 2, 3, 4) for b in (1, 2, 3, 4)]
    ax = _drawn(_line_plots(pd.DataFrame(rows), ["entries", "a", "b"], "miss_ratio"),
                "line-d-entries-t").axes[0]
    held = re.search(r"held: b=(\d); one line per a$", ax.get_title())
    assert held and len(ax.get_legend().get_texts()) == 4
    b = int(held.group(1))
    first = ax.get_lines()[0]  # a=1, at the b the title names
    assert list(first.get_ydata()) == [1 / (e + 1 + 10 * b) for e in (8, 16, 32)]


def test_log_scale_where_values_span_two_decades():
    assert log_scale([8, 64, 512, 4096]) and log_scale(["4k", "2M"])
    assert not log_scale([1, 2, 4, 8, 16]) and not log_scale([0, 10, 1000])
    for entries, xscale in (([8, 64, 512, 4096], "log"), ([4, 8, 16, 32], "linear")):
        df = pd.DataFrame({"structure": "d", "trace": "t", "entries": entries,
                           "miss_ratio": [0.5, 0.01, 0.002, 0.001]})
        ax = _drawn(_line_plots(df, ["entries"], "miss_ratio"), "line-d-entries-t").axes[0]
        assert ax.get_xscale() == xscale and ax.get_yscale() == "log"  # 500×: log
    flat = pd.DataFrame({"structure": "d", "trace": "t", "entries": [1, 2],
                         "miss_ratio": [0.2, 0.1]})
    ax = _drawn(_line_plots(flat, ["entries"], "miss_ratio"), "line-d-entries-t").axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("linear", "linear")


def test_knee_is_where_the_curve_comes_within_a_tenth_of_its_range():
    # Spanning less than two decades: measured linearly (range 5, limit 5.5).
    assert knee([1, 2, 3, 4], [10, 6, 5.1, 5]) == 2
    # Spanning three decades, as drawn on a log axis: 20 is 0.3 decades of 3 above the best.
    assert knee([1, 2, 3, 4], [1000, 100, 20, 10]) == 3
    assert knee([1, 2, 3], [0, 0, 0]) == 0  # flat: the smallest
    assert knee([1, 2, 3], [7, 0, 0]) == 1


def _cheapest_best(rows: list[dict], metric: str) -> dict:
    """Independently of the report: the lowest value, ties broken by the smallest entries,
    then page size in bytes, then policy in the spec's order."""
    best = min(r[metric] for r in rows)
    ties = [r for r in rows if r[metric] == best]
    return min(ties, key=lambda r: (r[ENTRIES], _page_bytes(r[PAGES]),
                                    ["lru", "fifo"].index(r[POLICY])))


def test_summary_has_the_best_configuration_per_trace_structure_and_metric(sweep):
    out, df = sweep
    summary = best_configurations(df, [ENTRIES, PAGES, POLICY])
    for metric in ("misses", "miss_ratio", "mpki"):
        for structure in ("tlb", "walk"):
            rows = [r for r in df[df.structure == structure].to_dict("records")
                    if not math.isnan(r[metric])]
            got = summary[(summary.metric == metric) & (summary.structure == structure)]
            if not rows:  # the walk has no miss ratio
                assert got.empty
                continue
            want = _cheapest_best(rows, metric)
            assert len(got) == 1
            g = got.iloc[0]
            assert (g.best, g[ENTRIES], g[PAGES], g[POLICY]) == \
                (want[metric], want[ENTRIES], want[PAGES], want[POLICY])
            assert g.ties == sum(r[metric] == want[metric] for r in rows)
    # A design where the smallest is not the best: some configuration beats 8 entries.
    tlb = summary[(summary.metric == "misses") & (summary.structure == "tlb")].iloc[0]
    assert (tlb[ENTRIES], tlb[PAGES]) != (8, "4k")
    html = write_report(out).read_text()
    assert "<h2>Best configurations</h2>" in html and "fewest misses" in html
    row = re.search(r"<td class='t'>fewest misses</td>.*?</tr>", html).group(0)
    assert f">{tlb[PAGES]}<" in row and f">{int(tlb.best):,}<" in row


def test_knees_follow_the_plotted_curves(sweep):
    _, df = sweep
    tlb = df[df.structure == "tlb"]
    table = knees(tlb, [ENTRIES, PAGES, POLICY], "miss_ratio")
    row = table[(table.axis == ENTRIES) & (table.line.str.contains("pages.size=4k"))
                & (table.line.str.contains("policy=lru"))].iloc[0]
    curve = tlb[(tlb[PAGES] == "4k") & (tlb[POLICY] == "lru")].sort_values(ENTRIES)
    assert row.knee == curve[ENTRIES].iloc[knee(list(curve[ENTRIES]), list(curve.miss_ratio))]
    assert row.best == curve.miss_ratio.min() and row.worst == curve.miss_ratio.max()


def test_table_cells_are_formatted_and_sort_by_value(sweep):
    assert format_cell("misses", 2097152, "int") == ("2,097,152", 2097152.0)
    assert format_cell("page_bytes", 2097152.0, "size")[0] == "2M"
    assert format_cell("mapping_bytes", 32768.0, "size")[0] == "32k"
    assert format_cell("miss_ratio", 0.0002939646165969938, "float")[0] == "0.000294"
    assert format_cell("miss_ratio", 2.205194e-06, "float")[0] == "2.205e-06"
    assert format_cell("mpki", 55.87261862480733, "float")[0] == "55.87"
    assert format_cell("pages.size", "16k", "text") == ("16k", 16384.0)
    assert format_cell("misses", float("nan"), "int")[0] == "—"
    t = html_table(pd.DataFrame({"pages.size": ["2M", "4k"], "misses": [1234567.0, 5.0]}))
    assert "<td data-n='2097152'>2M</td>" in t and "<td data-n='1234567'>1,234,567</td>" in t
    out, df = sweep
    html = write_report(out).read_text()
    results = html[html.index("<h2>Results</h2>"):]
    assert "<th title='click to sort'>tlb miss_ratio</th>" in results
    assert results.count("<tr><td") == df.point.nunique()  # one row per point
    assert "The same in every row: trace = sortprog" in results
    assert not re.search(r">[^<]*\de[+]\d", html)  # no 2.09715e+06
    assert "table.sortable th" in html and "<script src" not in html
