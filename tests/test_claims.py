"""Claims files: every quote is the seed's own words, every verdict follows from its results
and criterion, and the headline counts predictions only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lookaside.reproduce import RECIPES
from lookaside.reproduce.claims import Claim, claims_dir, headline, load

PAPERS = Path(__file__).resolve().parent / "data" / "papers"
FILES = sorted(p.stem for p in claims_dir().glob("*.toml"))


def words(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_every_claims_file_belongs_to_a_recipe():
    assert FILES, "no claims file"
    for name in FILES:
        assert name in RECIPES, name


@pytest.mark.parametrize("name", FILES)
def test_every_quote_is_found_in_its_seed(name: str):
    seed = words((PAPERS / f"{name}.txt").read_text(encoding="utf-8"))
    for c in load(name).values():
        assert words(c.quote) in seed, (c.id, c.quote)


@pytest.mark.parametrize("name", FILES)
def test_every_claim_is_well_formed(name: str):
    claims = load(name)
    assert claims
    for c in claims.values():
        assert c.source and c.quote
        if c.kind == "not-modelled":
            assert c.reason and c.verdict == "not-modelled"
        else:
            assert c.paper, c.id


#: Tables a quote names ("Table 4-1", "Tables 7-9 and 7-10", "Table VIII").
TABLES_IN_QUOTE = re.compile(r"\bTables?\s+([0-9IVX]+(?:-\d+)?"
                             r"(?:(?:,\s*|\s+and\s+|\s+to\s+)[0-9IVX]+(?:-\d+)?)*)")


def grouped(c: Claim) -> str:
    """Why a not-modelled claim stands for several tables at once, or '': one such claim is
    one table, figure or row group a reader would cite (companion tables of one chapter, such
    as Mach's and Ultrix's), never numbers gathered from several chapters' tables."""
    chapters = {int(n) for m in re.finditer(r"\b(\d+)-\d+", c.source) for n in m.groups()}
    tables = {t for m in TABLES_IN_QUOTE.findall(c.quote)
              for t in re.split(r",\s*|\s+and\s+|\s+to\s+", m)}
    chapters |= {int(t.split("-")[0]) for t in tables if "-" in t}
    if len(chapters) > 1:
        return f"tables of chapters {sorted(chapters)}: {c.source}"
    if len({t for t in tables if "-" not in t}) > 2:
        return f"quote cites tables {sorted(tables)}"
    return ""


@pytest.mark.parametrize("name", FILES)
def test_not_modelled_claims_are_one_table_each_with_a_reason(name: str):
    for c in load(name).values():
        if c.kind == "not-modelled":
            assert c.reason.strip(), c.id
            assert not grouped(c), (c.id, grouped(c))


def test_a_claim_grouping_several_chapters_tables_is_caught():
    old = Claim("per-workload-tables", "not-modelled", "Table 4-1",
                "Tables 2-1, 4-1 to 4-6, 7-1 to 7-7", reason="none of those traces exists")
    assert "chapters [2, 4, 7]" in grouped(old)
    assert grouped(Claim("t", "not-modelled", "Tables 4-1 and 7-3 show", "Section 4.2",
                         reason="r"))
    assert grouped(Claim("t", "not-modelled", "Tables II, V and VI", "Section 4", reason="r"))
    assert not grouped(Claim("t", "not-modelled", "Tables 7-2 and 7-3 show",
                             "Tables 7-9 to 7-12", reason="r"))


def claim(kind: str = "prediction", **criterion) -> Claim:
    return Claim("c", kind, "q", "Table 1", criterion=criterion, workloads="w")


def test_verdicts_follow_from_results_and_criterion():
    c = claim(range=[0.4, 0.5])
    assert c.verdict == "not-run"
    for v in (0.4, 0.45, 0.5):
        c.add("w", 1, v)
    assert c.verdict == "holds" and c.summary() == "holds (3 of 3)"
    c.add("w", 2, 0.51)
    assert c.verdict == "mixed" and c.summary() == "mixed (3 of 4)"
    nan = claim(range=[0, 1])
    nan.add("w", 1, float("nan"))  # a run that measured nothing holds nothing, and is null
    assert nan.verdict == "differs" and nan.to_json()["results"][0]["value"] is None
    d = claim(at_least=0.9)
    d.add("w", 1, 0.3)
    d.add("w", 2, 0.89999)
    assert d.verdict == "differs" and d.paper == {"range": [0.9, None]}
    o = claim(order=["a", "b", "c"])
    o.add("w", 1, {"a": 1, "b": 2, "c": 3})
    o.add("w", 2, {"a": 1, "b": 1, "c": 3})  # a tie is not an order
    assert [r.holds for r in o.results] == [True, False]
    v = claim(value=56.0, tolerance=0.1)
    v.add("w", None, 61.5)
    v.add("w", None, 61.7)
    assert [r.holds for r in v.results] == [True, False]
    w = claim(range=[0.2, 0.4], tolerance=0.5, tolerance_reason="OCR")
    w.add("w", None, 0.6)
    w.add("w", None, 0.61)
    assert [r.holds for r in w.results] == [True, False]


def test_the_headline_counts_predictions_only():
    p1, p2 = claim(range=[0, 1]), claim(range=[0, 1])
    p1.add("w", 1, 0.5)
    p2.add("w", 1, 2.0)
    t = claim("transcription", value=3.0, tolerance=0.0)
    t.add("paper", None, 3.0)
    cal = claim("calibration", value=0, tolerance=0.05)
    cal.add("cell 1", None, 0.04)
    cal.add("cell 2", None, -0.01)
    nm = Claim("n", "not-modelled", "q", "s", reason="no model")
    h = headline([p1, p2, t, cal, nm])
    assert h.startswith("2 predictions: 1 hold, 0 mixed, 1 differ;"), h
    assert "1 of 1 transcriptions exact" in h and "1 calibrations (max fit error 4.0%)" in h
    assert h.endswith("1 not modelled")
    # Exact transcriptions and fitted calibrations never raise the prediction count.
    assert headline([t, cal]).startswith("0 predictions: 0 hold")
