"""``lookaside reproduce``: each seed study as a recipe that runs, compares with the paper and
says so.

A recipe with a claims file (``data/claims/NAME.toml``, see :mod:`.claims`) measures each
claim the file states on every workload and seed that fits it, and the claims module judges
the results by the criterion fixed in the file; ``claims.json`` holds them all, and the
headline counts predictions only. A recipe not yet audited that way returns :class:`Check`
rows — a claim of the paper, the published value or trend, ours, and whether they agree —
which are shown apart, as unaudited checks, and never counted in a headline.

:func:`reproduce` writes into ``OUT/NAME/``: ``claims.json`` (audited recipes),
``verdict.csv`` and ``verdict.json``, one CSV per table, the plots (SVG and PNG) and
``report.html``, a self-contained page that opens without a server.
"""

from __future__ import annotations

import html
import importlib
import json
import textwrap
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import NotYetError
from .._files import write_atomically

#: name → (title, module under lookaside.reproduce, or None while the models it needs are
#: not built yet: the string then says what is missing).
RECIPES: dict[str, tuple[str, str | None, str]] = {
    "uhlig94": ("Uhlig et al., Design Tradeoffs for Software-Managed TLBs (TOCS 1994)",
                "uhlig94", ""),
    "bala94": ("Bala, Kaashoek, Weihl, Software Prefetching and Caching for TLBs (OSDI 1994)",
               "bala94", ""),
    "huck93": ("Huck & Hays, Translation Table Management in Large Address Space Machines "
               "(ISCA 1993)", "huck93", ""),
    "chen94": ("Chen, Impact of Software Structure and Policy on CPU and Memory System "
               "Performance (CMU 1994)", "chen94", ""),
    "inouye92": ("Inouye et al., Effects of Virtually Addressed Caches on VM Design (1992)",
                 "inouye92", ""),
    "linux": ("A whole Linux system traced with its kernel: kernel share of references and "
              "TLB misses, per process, one process against client/server", "linux", ""),
    "shootdown": ("TLB shootdowns on whole Linux systems of 1 to 8 CPUs: how often, and "
                  "the TLB misses they cause (beyond the papers, which studied one CPU)",
                  "shootdown", ""),
}

#: Recipes that capture whole systems as they run (QEMU and Debian's kernel, minutes) instead
#: of reading stored traces: run by name, left out of ``--all``.
LIVE = ("shootdown",)


@dataclass
class Check:
    """One comparison with the paper."""

    claim: str
    published: str
    ours: str
    ok: bool
    exact: bool = False
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.ok:
            return "exact" if self.exact else "holds"
        return "MISMATCH" if self.exact else "differs"


@dataclass
class Outcome:
    """What a recipe produced."""

    name: str
    title: str
    checks: list[Check] = field(default_factory=list)
    tables: dict[str, Any] = field(default_factory=dict)  # name → pandas.DataFrame
    figures: list[tuple[str, Path]] = field(default_factory=list)  # (caption, SVG path)
    claims: list[Any] = field(default_factory=list)  # claims.Claim, judged

    @property
    def ok(self) -> bool:
        """False only where our own arithmetic is wrong (a transcription or an exact check
        that does not match): a prediction that differs from the paper is a result."""
        return (all(c.ok for c in self.checks if c.exact)
                and all(c.verdict != "mismatch" for c in self.claims))


class _Stopped(Exception):
    """A recipe's job ended because the recipe stopped."""


#: Set while a recipe's parallel jobs must stop (interrupted, or one of them failed).
_stop = threading.Event()


def watch(_events: int, _bytes: int) -> None:
    """The progress callback of every simulation a recipe runs through :func:`parallel`:
    ends it at its next report once the recipe stops, so that Ctrl-C is prompt."""
    if _stop.is_set():
        raise _Stopped


def parallel(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int = 2) -> list:
    """``fn`` over ``jobs`` on ``workers`` threads (the engine releases the GIL), the results
    in the jobs' order; identical to a loop. If one job fails or the recipe is interrupted,
    every running job stops at its next :func:`watch` and the error goes on."""
    _stop.clear()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(fn, j) for j in jobs]
        try:
            return [f.result() for f in futures]
        except BaseException:
            _stop.set()
            for f in futures:
                f.cancel()
            raise


def all_recipes() -> list[str]:
    """What ``--all`` runs: every recipe that is built, but those that capture (:data:`LIVE`)."""
    return [n for n, r in RECIPES.items() if r[1] and n not in LIVE]


def recipe_module(name: str) -> Any:
    if name not in RECIPES:
        raise NotYetError(f"no recipe named '{name}' (have: {', '.join(RECIPES)})")
    _, module, missing = RECIPES[name]
    if module is None:
        raise NotYetError(f"reproduce {name}: not built yet — it needs {missing}")
    return importlib.import_module(f"{__name__}.{module}")


def reproduce(name: str, out: str | Path = "reproduce",
              progress: Callable[[str], None] | None = None) -> Outcome:
    """Run recipe `name`, writing its results into ``out/name``."""
    mod = recipe_module(name)
    d = Path(out) / name
    (d / "plots").mkdir(parents=True, exist_ok=True)
    outcome: Outcome = mod.run(d, progress or (lambda _msg: None))
    write(outcome, d)
    return outcome


def verdict_table(o: Outcome) -> str:
    """The verdict as plain text: the claims (each quote wrapped beneath, nothing cut) with
    their headline; or, for an unaudited recipe, one row per check, a cell longer than its
    column wrapping onto the row's next lines, the columns staying aligned."""
    if o.claims:
        from .claims import headline, text_table

        return "\n".join([o.title, "", text_table(o.claims), "", headline(o.claims)])
    rows = [("claim", "published", "ours", "verdict")]
    rows += [(c.claim, c.published, c.ours, c.verdict) for c in o.checks]
    widths = [min(max(len(r[i]) for r in rows), (52, 26, 26, 9)[i]) for i in range(4)]

    def wrap(s: str, w: int) -> list[str]:
        return textwrap.wrap(s, w, break_on_hyphens=False) or [""]

    lines = [f"{o.title}", ""]
    for i, r in enumerate(rows):
        cells = [wrap(v, w) for v, w in zip(r, widths)]
        for k in range(max(len(c) for c in cells)):
            lines.append("  ".join((c[k] if k < len(c) else "").ljust(w)
                                   for c, w in zip(cells, widths)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    n_ok = sum(c.ok for c in o.checks)
    lines += ["", f"{n_ok} of {len(o.checks)} checks agree (unaudited: not yet claims as data)"]
    return "\n".join(lines)


def write(o: Outcome, d: Path) -> None:
    import pandas as pd

    from .claims import headline, html_rows

    checks = [{**asdict(c), "verdict": c.verdict} for c in o.checks]
    if o.claims:
        claims = [c.to_json() for c in o.claims]
        write_atomically(d / "claims.json", json.dumps(claims, indent=2, allow_nan=False,
                                                      default=str))
        checks = [{"claim": c["id"], "kind": c["kind"], "quote": c["quote"],
                   "verdict": c["verdict"], "runs": len(c["results"]),
                   "held": sum(r["holds"] for r in c["results"])} for c in claims]
    # Each file appears only complete (an interrupted run leaves none half-written).
    write_atomically(d / "verdict.csv", pd.DataFrame(checks).to_csv(index=False))
    write_atomically(d / "verdict.json", json.dumps(
        {"recipe": o.name, "title": o.title, "ok": o.ok,
         **({"headline": headline(o.claims)} if o.claims else {}), "checks": checks},
        indent=2))
    for name, df in o.tables.items():
        write_atomically(d / f"{name}.csv", df.to_csv(index=False))
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>lookaside reproduce {html.escape(o.name)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}"
        "table{border-collapse:collapse;font-size:85%}td,th{border:1px solid #ccc;"
        "padding:2px 6px}.ok{color:#186a18}.bad{color:#b00;font-weight:bold}"
        ".mixed{color:#a60}figure{display:inline-block;margin:1em;vertical-align:top}"
        "figcaption{font-size:90%;color:#444}</style></head><body>",
        f"<h1>{html.escape(o.title)}</h1>",
    ]
    if o.claims:
        parts += [f"<p><b>{html.escape(headline(o.claims))}</b></p>", html_rows(o.claims)]
    else:
        parts += [f"<p>{sum(c.ok for c in o.checks)} of {len(o.checks)} checks agree "
                  "(unaudited: not yet claims as data).</p>"]
    if o.checks:
        parts.append("<table><tr><th>claim</th><th>published</th><th>ours</th>"
                     "<th>verdict</th><th>note</th></tr>")
    for c in o.checks:
        cls = "ok" if c.ok else "bad"
        parts.append(f"<tr><td>{html.escape(c.claim)}</td><td>{html.escape(c.published)}</td>"
                     f"<td>{html.escape(c.ours)}</td><td class='{cls}'>{c.verdict}</td>"
                     f"<td>{html.escape(c.note)}</td></tr>")
    if o.checks:
        parts.append("</table>")
    for caption, svg in o.figures:
        text = Path(svg).read_text(encoding="utf-8")
        parts.append(f"<figure>{text[text.index('<svg'):]}"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    for name, df in o.tables.items():
        parts.append(f"<h2>{html.escape(name)}</h2>")
        parts.append(df.to_html(index=False, na_rep="—"))
    parts.append("</body></html>")
    write_atomically(d / "report.html", "\n".join(parts))


def save_figure(fig: Any, d: Path, name: str) -> Path:
    """Write a figure (drawn with :mod:`lookaside.report`'s plotting functions) as
    ``d/plots/NAME.svg`` and ``.png``; returns the SVG path."""
    from ..report import save_figure as save

    return save(fig, d / "plots", name)
