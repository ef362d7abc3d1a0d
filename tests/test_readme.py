"""The README is what a newcomer reads first: short, with a contents list, a set-up that
works on a stock system, every command, and links that lead somewhere. The deep reference
lives in docs/, linked from it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from lookaside.cli import parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings (outside code blocks)."""
    out, code = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            code = not code
        elif not code and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def links(markdown: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", markdown)


def test_the_readme_reads_in_ten_minutes():
    assert len(README.splitlines()) <= 250
    assert "## Contents" in README


def test_every_link_of_the_readme_and_the_docs_resolves():
    pages = {ROOT / "README.md": README}
    pages |= {p: p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md")}
    for page, text in pages.items():
        for link in links(text):
            if link.startswith(("http://", "https://")):
                continue
            target, _, anchor = link.partition("#")
            path = (page.parent / target).resolve() if target else page
            assert path.exists(), (page.name, link)
            if anchor and path.suffix == ".md":
                assert anchor in anchors(path.read_text(encoding="utf-8")), (page.name, link)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / link.partition("#")[0]).resolve() for link in links(README)}
    for page in (ROOT / "docs").glob("*.md"):
        assert page.resolve() in linked, page.name


def test_the_command_summary_names_every_command():
    summary = README.split("## Commands", 1)[1].split("```", 2)[1]
    sub = next(a for a in parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"lookaside {name}" in summary, name


def test_set_up_works_on_a_stock_system():
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert "python3 -m venv" in setup  # stock Debian refuses pip outside a venv
    assert "minutes" in setup  # the first install compiles the engine
    assert "bash .ci/run" in setup
    assert re.search(r"\[Coming from DineroIV", README)
    assert "![" in README  # one picture


def test_no_file_holds_a_merge_conflict_marker():
    """A merge resolved in haste can leave `<<<<<<<`/`>>>>>>>` lines in a text file that
    nothing else reads strictly (the README, the docs): no tracked text file has one."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if files.returncode != 0:
        pytest.skip("not a git checkout")
    marked = []
    for name in files.stdout.split():
        p = ROOT / name
        if p.suffix not in {".md", ".py", ".rs", ".toml", ".c", ".h", ".sh", ".txt"}:
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        if re.search(r"^(<{7}|>{7}) ", text, re.M):
            marked.append(name)
    assert marked == []
