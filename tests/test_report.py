"""The plotting functions every plot is drawn with (sweep reports and the recipes)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lookaside.report import plot_bars, plot_lines, save_figure, subplots


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
