"""The whole path — din text, reader, machine, ledger, JSON — against a few lines of obviously
right Python, on random and adversarial streams (hypothesis)."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

import lookaside


def reference_misses(pages: list[int], entries: int, ways: int, policy: str) -> int:
    """Misses of a set-associative LRU or FIFO TLB, one OrderedDict per set."""
    sets = entries // ways
    content = [OrderedDict() for _ in range(sets)]
    misses = 0
    for p in pages:
        s = content[p % sets]
        if p in s:
            if policy == "lru":
                s.move_to_end(p)
            continue
        misses += 1
        if len(s) == ways:
            s.popitem(last=False)
        s[p] = True
    return misses


geometries = st.sampled_from([(1, 1), (4, 1), (4, 4), (8, 2), (12, 3), (16, 16), (48, 6),
                              (64, 64), (96, 12)])
streams = st.one_of(
    st.lists(st.integers(0, 200), min_size=1, max_size=600),
    # Adversarial: cyclic sweeps just larger than a set or the whole structure.
    st.tuples(st.integers(1, 130), st.integers(1, 8), st.integers(1, 7)).map(
        lambda t: [(i % t[0]) * t[2] for i in range(t[0] * t[1])]),
)


@settings(max_examples=60, deadline=None)
@given(pages=streams, geom=geometries, policy=st.sampled_from(["lru", "fifo"]))
def test_din_stream_matches_reference(tmp_path_factory, pages, geom, policy):
    entries, ways = geom
    path = tmp_path_factory.mktemp("ref") / "t.din"
    # Loads at varying offsets inside 4 KiB pages; 4-byte accesses never straddle here.
    path.write_text("".join(f"0 {p * 4096 + (i * 12) % 4092:x}\n" for i, p in enumerate(pages)))
    r = lookaside.simulate(path, None,
                           tlb=[f"dtlb:entries={entries},ways={ways},policy={policy},page=4k"])
    assert r["dtlb"]["accesses"] == len(pages)
    assert r["dtlb"]["misses"] == reference_misses(pages, entries, ways, policy)
