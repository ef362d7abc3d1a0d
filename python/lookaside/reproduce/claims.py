"""A paper's claims as data, and the verdicts on them.

Each recipe with a claims file (``data/claims/NAME.toml``) states there, before any run, every
quantitative claim of its paper a simulator could address: the seed's own words (``quote``),
where they stand (``source``), what kind of claim it is, and the criterion a result is judged
by. The recipe only measures: it returns, per claim, one result per (workload, seed) it ran,
and this module judges them. A criterion is never chosen after a result is seen.

Kinds:

- ``prediction``: a simulation output compared with the paper — the only kind that counts
  as a reproduction;
- ``mechanism``: a property shown on a designed input (a nested L1U → L2 → L3 trap);
- ``transcription``: our arithmetic over the paper's own numbers (checks a transcription or
  a cost table; never a reproduction);
- ``calibration``: a model coefficient fitted to this number; its results are the fitted
  model's relative errors against the paper's numbers, and the largest is its fit error
  (reported, never a reproduction);
- ``not-modelled``: with the ``reason`` (what the simulator or the workloads lack).

Criteria (``criterion`` in the file, ``paper`` in ``claims.json``):

- ``{value = x, tolerance = t}``: within the relative tolerance ``t`` of ``x``;
- ``{range = [lo, hi]}``: between the paper's bounds, inclusive; a bound left out
  (``range = [0.9]`` or ``at_least``/``at_most``) makes it one-sided, only where the paper's
  claim is; ``tolerance = t`` widens both bounds by the relative ``t`` and needs a
  ``tolerance_reason``;
- ``{order = ["a", "b", …]}``: the named quantities of a result are strictly ascending.

Verdicts: ``holds`` (every run holds), ``mixed`` (k of n runs), ``differs`` (none),
``not-run`` (no result); transcriptions are ``exact`` or ``mismatch``; calibrations
``calibrated`` with their fit error; ``not-modelled``.
"""

from __future__ import annotations

import math
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from .. import ConfigError

KINDS = ("prediction", "mechanism", "transcription", "calibration", "not-modelled")


@dataclass
class Result:
    """One run's value for a claim: a number, or named numbers for an ordering."""

    workload: str
    seed: int | None
    value: float | dict[str, float]
    holds: bool = False


@dataclass
class Claim:
    """A claim of a paper, its criterion, and the results judged by it."""

    id: str
    kind: str
    quote: str
    source: str
    criterion: dict[str, Any] = field(default_factory=dict)
    workloads: str = ""
    reason: str = ""
    results: list[Result] = field(default_factory=list)

    @property
    def paper(self) -> dict[str, Any]:
        """The criterion as ``claims.json`` states it."""
        c = self.criterion
        if "order" in c:
            return {"order": list(c["order"])}
        if "value" in c:
            return {"value": c["value"], "tolerance": c.get("tolerance", 0.0)}
        if "range" in c or "at_least" in c or "at_most" in c:
            lo, hi = bounds(c)
            out: dict[str, Any] = {"range": [lo, hi]}
            if c.get("tolerance"):
                out["tolerance"] = c["tolerance"]
                out["tolerance_reason"] = c["tolerance_reason"]
            return out
        return {}

    def judge(self, value: float | dict[str, float]) -> bool:
        """Whether one result meets the criterion."""
        c = self.criterion
        if "order" in c:
            if not isinstance(value, dict):
                return False
            seq = [value[k] for k in c["order"]]
            return all(a < b for a, b in zip(seq, seq[1:]))
        if isinstance(value, dict) or value is None or math.isnan(value):
            return False
        if "value" in c:
            return abs(value - c["value"]) <= c.get("tolerance", 0.0) * abs(c["value"])
        lo, hi = bounds(c)
        t = c.get("tolerance", 0.0)
        lo = None if lo is None else lo - t * abs(lo)
        hi = None if hi is None else hi + t * abs(hi)
        return (lo is None or value >= lo) and (hi is None or value <= hi)

    def add(self, workload: str, seed: int | None, value: float | dict[str, float]) -> None:
        """Record one run, judged at once (numbers kept as plain floats, whatever made them)."""
        value = ({k: float(v) for k, v in value.items()} if isinstance(value, dict)
                 else float(value))
        seed = None if seed is None else int(seed)
        self.results.append(Result(workload, seed, value, bool(self.judge(value))))

    @property
    def held(self) -> int:
        return sum(r.holds for r in self.results)

    @property
    def verdict(self) -> str:
        if self.kind == "not-modelled":
            return "not-modelled"
        if not self.results:
            return "not-run"
        n, k = len(self.results), self.held
        if self.kind == "transcription":
            return "exact" if k == n else "mismatch"
        if self.kind == "calibration":
            return "calibrated"
        return "holds" if k == n else ("differs" if k == 0 else "mixed")

    @property
    def fit_error(self) -> float | None:
        """A calibration's largest relative error: its results are the relative errors of
        the fitted model against each of the paper's numbers it was fitted to."""
        if self.kind != "calibration" or not self.results:
            return None
        return max(abs(r.value) for r in self.results if not isinstance(r.value, dict))

    def summary(self) -> str:
        """The verdict with its count (``mixed 7 of 12``)."""
        v = self.verdict
        if v in ("mixed", "holds", "differs") and len(self.results) > 1:
            return f"{v} ({self.held} of {len(self.results)})"
        if v == "calibrated" and self.fit_error is not None:
            return f"calibrated (fit error {100 * self.fit_error:.1f}%)"
        return v

    def spread(self) -> str:
        """Our values in one line: the range over runs, or each ordering's outcome."""
        vals = [r.value for r in self.results]
        if not vals:
            return "—"
        if isinstance(vals[0], dict):
            return f"order held in {self.held} of {len(vals)} runs"
        lo, hi = min(vals), max(vals)
        return fmt(lo) if lo == hi else f"{fmt(lo)} … {fmt(hi)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "quote": self.quote, "source": self.source,
            "paper": self.paper, "workloads": self.workloads, "reason": self.reason,
            "results": [{"workload": r.workload, "seed": r.seed, "value": finite(r.value),
                         "holds": r.holds} for r in self.results],
            "verdict": self.verdict,
            **({"fit_error": self.fit_error} if self.kind == "calibration" else {}),
        }


def finite(value: float | dict[str, float]) -> float | dict[str, float] | None:
    """A result's value for JSON: a run that measured nothing (0/0) is null, never NaN."""
    if isinstance(value, dict):
        return {k: v if math.isfinite(v) else None for k, v in value.items()}
    return value if math.isfinite(value) else None


def bounds(c: dict[str, Any]) -> tuple[float | None, float | None]:
    """The (lo, hi) of a range criterion; None where it is open."""
    if "range" in c:
        r = list(c["range"]) + [None, None]
        return r[0], r[1]
    return c.get("at_least"), c.get("at_most")


def fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def claims_dir() -> Path:
    return Path(__file__).resolve().parent / "data" / "claims"


def has_claims(name: str) -> bool:
    return (claims_dir() / f"{name}.toml").is_file()


def load(name: str) -> dict[str, Claim]:
    """The claims of recipe ``name``, by id, in the file's order; checked for form."""
    path = claims_dir() / f"{name}.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out: dict[str, Claim] = {}
    for raw in data.get("claim", []):
        c = Claim(id=raw["id"], kind=raw["kind"], quote=raw["quote"], source=raw["source"],
                  criterion=raw.get("criterion", {}), workloads=raw.get("workloads", ""),
                  reason=raw.get("reason", ""))
        problem = form_problem(c)
        if problem or c.id in out:
            raise ConfigError(f"{path.name}: claim {c.id}: {problem or 'duplicate id'}")
        out[c.id] = c
    return out


def form_problem(c: Claim) -> str:
    """What is wrong with a claim's form, or ''."""
    if c.kind not in KINDS:
        return f"kind '{c.kind}' is not one of {', '.join(KINDS)}"
    if c.kind == "not-modelled":
        return "" if c.reason else "a not-modelled claim needs its reason"
    crit = c.criterion
    forms = [k for k in ("value", "range", "order") if k in crit]
    forms += ["range"] if ("at_least" in crit or "at_most" in crit) and not forms else []
    if len(forms) != 1:
        return "the criterion needs exactly one of value, range (or at_least/at_most), order"
    if crit.get("tolerance") and "range" in forms and not crit.get("tolerance_reason"):
        return "a widened range needs its tolerance_reason"
    if c.kind in ("prediction", "mechanism") and not c.workloads:
        return "a prediction names the workloads it runs on, and why"
    return ""


def headline(claims: list[Claim]) -> str:
    """The count that matters: predictions only; the other kinds are said apart."""
    by = {v: 0 for v in ("holds", "mixed", "differs", "not-run")}
    preds = [c for c in claims if c.kind == "prediction"]
    for c in preds:
        by[c.verdict] += 1
    trans = [c for c in claims if c.kind == "transcription"]
    cal = [c for c in claims if c.kind == "calibration"]
    errs = [c.fit_error for c in cal if c.fit_error is not None]
    mech = [c for c in claims if c.kind == "mechanism"]
    parts = [f"{len(preds)} predictions: {by['holds']} hold, {by['mixed']} mixed, "
             f"{by['differs']} differ" + (f", {by['not-run']} not run" if by["not-run"] else ""),
             f"{sum(c.verdict == 'exact' for c in trans)} of {len(trans)} transcriptions exact",
             f"{len(cal)} calibrations" + (f" (max fit error {100 * max(errs):.1f}%)"
                                           if errs else ""),
             f"{sum(c.verdict == 'holds' for c in mech)} of {len(mech)} mechanisms shown",
             f"{sum(c.kind == 'not-modelled' for c in claims)} not modelled"]
    return "; ".join(parts)


def text_table(claims: list[Claim], width: int = 100) -> str:
    """The claims as plain text: each claim's id, verdict and values, its quote wrapped
    beneath (nothing cut)."""
    lines = []
    for c in claims:
        lines.append(f"{c.id}  [{c.kind}]  {c.summary()}")
        body = [f"“{c.quote}” ({c.source})"]
        if c.kind == "not-modelled":
            body.append(f"not modelled: {c.reason}")
        elif c.kind == "transcription":
            body.append(f"our arithmetic over the paper's numbers: {c.workloads}; "
                        f"ours {c.spread()}")
        else:
            body.append(f"paper {describe(c.paper)}; ours {c.spread()}")
        for b in body:
            lines += textwrap.wrap(b, width, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(lines)


def describe(paper: dict[str, Any]) -> str:
    if "order" in paper:
        return " < ".join(paper["order"])
    if "value" in paper:
        return f"{fmt(paper['value'])} ± {100 * paper['tolerance']:.0f}%"
    if "range" in paper:
        lo, hi = paper["range"]
        text = (f"≥ {fmt(lo)}" if hi is None else f"≤ {fmt(hi)}" if lo is None
                else f"{fmt(lo)} … {fmt(hi)}")
        if paper.get("tolerance"):
            text += f" (widened {100 * paper['tolerance']:.0f}%: {paper['tolerance_reason']})"
        return text
    return "—"


def html_rows(claims: list[Claim]) -> str:
    """The claims as an HTML table, the quote beside each verdict."""
    import html

    out = ["<table><tr><th>claim</th><th>kind</th><th>the paper says</th><th>criterion</th>"
           "<th>ours</th><th>verdict</th><th>workloads</th></tr>"]
    for c in claims:
        cls = {"holds": "ok", "exact": "ok", "differs": "bad", "mismatch": "bad",
               "mixed": "mixed"}.get(c.verdict, "")
        words = c.reason if c.kind == "not-modelled" else c.workloads
        out.append(
            f"<tr><td>{html.escape(c.id)}</td><td>{c.kind}</td>"
            f"<td>“{html.escape(c.quote)}” <i>({html.escape(c.source)})</i></td>"
            f"<td>{html.escape(describe(c.paper))}</td><td>{html.escape(c.spread())}</td>"
            f"<td class='{cls}'>{html.escape(c.summary())}</td>"
            f"<td>{html.escape(words)}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def plot_ranges(ax: Any, claims: list[Claim], title: str = "") -> None:
    """Each numeric claim's runs (one dot per run, by workload) beside the paper's value or
    range (a shaded band): the paper drawn with ours."""
    numeric = [c for c in claims if c.results and not isinstance(c.results[0].value, dict)
               and ("range" in c.paper or "value" in c.paper)]
    for i, c in enumerate(numeric):
        p = c.paper
        if "range" in p:
            lo, hi = p["range"]
            vals = [r.value for r in c.results]
            lo = min(vals + [hi or 0]) if lo is None else lo
            hi = max(vals + [lo]) * 1.05 if hi is None else hi
        else:
            lo = p["value"] * (1 - p["tolerance"])
            hi = p["value"] * (1 + p["tolerance"])
        ax.fill_between([i - 0.4, i + 0.4], lo, hi, color="#9ecae1", alpha=0.6,
                        label="paper" if i == 0 else None)
        workloads = sorted({r.workload for r in c.results})
        for j, w in enumerate(workloads):
            ys = [r.value for r in c.results if r.workload == w]
            x = i - 0.3 + 0.6 * (j + 0.5) / len(workloads)
            ax.plot([x] * len(ys), ys, "o", ms=3,
                    color="#b00" if not all(r.holds for r in c.results if r.workload == w)
                    else "#186a18")
    ax.set_xticks(range(len(numeric)))
    ax.set_xticklabels([c.id for c in numeric], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("value (paper: band; ours: one dot per run)")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
