"""Inouye, Konuru, Walpole, Sears 1992: the cost of VM primitives on a virtually addressed
cache. The HP 9000/834's D-cache (128 KB, 2-way, 32-byte lines, 2 KB pages, virtually indexed,
physically tagged) under pseudo-aliasing, with the ``hp9000-834`` timing preset: Tables 1 and 2
(flush and copy by cache state) to within 10%, Table 3 (IPC by copy, move and pure copy) and
Mach's copy-on-write cases 1-3 by shape. Every cost is priced from the lines the simulated
cache actually holds when the primitive runs; Table 3 and the copy-on-write cases are the
``workload:ipc`` and ``workload:cow`` streams priced by a ``[vac]``, as ``lookaside simulate``
prices them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from .. import _lookaside
from ..report import plot_bars, plot_lines, subplots
from . import RECIPES, Check, Outcome, save_figure

DESIGNS = {"copy": "Chorus IPC-copy", "move": "Chorus IPC-move (lazy)",
           "move-eager": "IPC-move, eager mapping", "pure-copy": "pure copy"}


def results(timing: str = "hp9000-834") -> dict:
    """The model's tables beside the published ones (see ``cache::vac::inouye92``)."""
    return json.loads(_lookaside.inouye92_results(timing))


def _span(xs) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.2f}" if abs(hi - lo) < 0.005 else f"{lo:.2f}–{hi:.2f}"


def run(d: Path, say: Callable[[str], None]) -> Outcome:
    import pandas as pd

    o = Outcome("inouye92", RECIPES["inouye92"][0])
    r = results()
    say("tables 1-3 and the copy-on-write cases: done")
    t1, t2 = pd.DataFrame(r["table1"]), pd.DataFrame(r["table2"])
    for df in (t1, t2):
        df["error_pct"] = 100 * (df.ours - df.published) / df.published
    t3 = pd.DataFrame(r["table3"])
    cow = pd.DataFrame(r["cow"])
    share = pd.DataFrame(r["sharing"])
    # Without consistency software, writers through unaligned aliases read stale data: free,
    # and wrong.
    share["consistent"] = ~((share.policy == "none") & ~share.aligned
                            & (share.access == "write"))
    o.tables.update({"table1_flush": t1, "table2_copy": t2, "table3_ipc": t3, "cow_cases": cow,
                     "alias_sharing": share})

    # Tables 1 and 2: calibrated, compared cell by cell.
    for name, df, what in [("Table 1", t1, "flush 1–8 KB, empty / clean / dirty"),
                           ("Table 2", t2, "copy 1–8 KB, best / worst case")]:
        worst = df.error_pct.abs().max()
        o.checks.append(Check(f"{name}: {what}", f"{len(df)} cells (µs)",
                              f"largest error {worst:.1f}%", bool(worst < 10),
                              note="timing preset hp9000-834; costs from the lines each flush "
                                   "or copy finds"))

    def cell(df, key, val, kb):
        return float(df[(df[key] == val) & (df.kb == kb)].ours.iloc[0])

    def pub(df, key, val, kb):
        return float(df[(df[key] == val) & (df.kb == kb)].published.iloc[0])

    o.checks.append(Check("an empty cache flushes as fast as a clean one", "Empty = Clean",
                          "equal" if (t1[t1.state == "empty"].ours.values
                                      == t1[t1.state == "clean"].ours.values).all() else "differ",
                          bool((t1[t1.state == "empty"].ours.values
                                == t1[t1.state == "clean"].ours.values).all()),
                          note="the flush loop visits every line address, cached or not"))
    ratios = [cell(t1, "state", "dirty", kb) / cell(t1, "state", "clean", kb) for kb in (2, 4, 8)]
    pubr = [pub(t1, "state", "dirty", kb) / pub(t1, "state", "clean", kb) for kb in (2, 4, 8)]
    o.checks.append(Check("dirty flushes cost 3–5× clean ones (2–8 KB)",
                          ", ".join(f"{x:.1f}×" for x in pubr),
                          ", ".join(f"{x:.1f}×" for x in ratios),
                          all(abs(a - b) / b < 0.1 for a, b in zip(ratios, pubr))))
    holds = {kb: cell(t1, "state", "clean", kb) + cell(t1, "state", "dirty", kb)
             < 2 * cell(t2, "case", "best", kb) for kb in (1, 2, 4, 8)}
    o.checks.append(Check("best + worst flush < two best copies", "at 2, 4, 8 KB; not at 1 KB "
                          "(116 vs 114)",
                          "at " + ", ".join(str(k) for k, v in holds.items() if v) + " KB"
                          + ("" if holds[1] else "; not at 1 KB"),
                          holds == {1: False, 2: True, 4: True, 8: True},
                          note="why moving a page (one dirty and one clean flush) can beat "
                               "copying it twice"))
    dirty2 = cell(t1, "state", "dirty", 2)
    o.checks.append(Check("a dirty 2 KB flush adds ~1000% to a 15 µs unmap", "1000%",
                          f"{100 * dirty2 / 15:.0f}%", abs(dirty2 / 15 - 10) < 1))
    # "Adding the flush cost to the unmap operation increases its cost by 150% in the best
    # case": two readings of "the flush cost", both shown.
    clean2 = cell(t1, "state", "clean", 2)
    call = r["timing"]["flush"]["base_us"]
    loop2 = clean2 - call

    def pct(us):
        return f"{100 * us / 20:.0f}–{100 * us / 15:.0f}%"

    o.checks.append(Check("a clean flush adds 150% to an unmap (best case): a whole flush call",
                          "150%", f"{pct(clean2)} ({clean2:.1f} µs on a 15–20 µs unmap)",
                          bool(clean2 / 20 <= 1.5 <= clean2 / 15),
                          note=f"Table 1's clean 2 KB flush, as timed: a pdcache() call, its "
                               f"{call:.1f} µs fixed cost (the intercept of Table 1's "
                               f"straight line) included"))
    o.checks.append(Check("… the flush loop alone (Table 1 less its fixed cost per call)",
                          "150%", f"{pct(loop2)} ({loop2:.1f} µs; "
                                  f"{100 * loop2 / 17.5:.0f}% at 17.5 µs)",
                          bool(loop2 / 20 <= 1.5 <= loop2 / 15),
                          note="a flush made inside the unmap need not pay a flush call's "
                               "fixed cost; the paper does not say which it meant. The model "
                               "charges the whole call on every flush it prices (Table 3 "
                               "included)"))

    # Table 3.
    base = t3[t3.policy == "pseudo-aliasing"]

    def ipc(design, kb, df=base, col="ours"):
        row = df[(df.design == design) & (df.bytes == kb * 1024)]
        return float(row[col].iloc[0])

    sizes = (2, 4, 8, 16)
    order = all(ipc("pure-copy", kb) <= ipc("move", kb) < ipc("copy", kb) for kb in sizes)
    o.checks.append(Check("Table 3: pure copy ≤ move < copy (page-sized, 2–16 KB)",
                          "holds at 2–16 KB",
                          "holds at 2–16 KB" if order else "differs", order))
    pr = [ipc("move", kb, col="published") / ipc("copy", kb, col="published") for kb in sizes]
    ours = [ipc("move", kb) / ipc("copy", kb) for kb in sizes]
    o.checks.append(Check("remapping is not dramatically cheaper than copying",
                          f"move / copy = {_span(pr)}", f"move / copy = {_span(ours)}",
                          all(abs(a - b) < 0.1 for a, b in zip(ours, pr)),
                          note="2–16 KB; each within 0.1 of the paper"))
    share_of = [ipc(des, kb) / ipc(des, kb, col="published")
                for des in ("copy", "move", "pure-copy") for kb in sizes]
    inc = {des: (ipc(des, 16) - ipc(des, 2)) / 7 for des in ("copy", "move", "pure-copy")}
    pinc = {des: (ipc(des, 16, col="published") - ipc(des, 2, col="published")) / 7
            for des in ("copy", "move", "pure-copy")}
    o.checks.append(Check("per-page increment: copy > move ≥ pure copy",
                          " > ".join(f"{pinc[k]:.0f}" for k in pinc) + " µs",
                          " > ".join(f"{inc[k]:.0f}" for k in inc) + " µs",
                          inc["copy"] > inc["move"] >= inc["pure-copy"],
                          note=f"absolute costs are {100 * min(share_of):.0f}–"
                               f"{100 * max(share_of):.0f}% of the paper's (2–16 KB): Table 3 "
                               "holds per-page work the paper does not break down (not a "
                               "consequence of Tables 1–2)"))
    # "An IPC-move implementation that eagerly mapped the message would outperform the
    # pure-copy IPC in this experiment": on the paper's own numbers, then on the model with
    # pure copy's buffers apart (two best-case copies, the paper's account of its pure copy)
    # and on one colour (copies that miss).
    fault = r["timing"]["vm"]["pseudo_fault_us"]
    pmove = [ipc("move", kb, col="published") - fault * kb / 2 for kb in sizes]
    ppure = [ipc("pure-copy", kb, col="published") for kb in sizes]
    o.checks.append(Check("eager mapping in IPC-move would beat pure copy: the paper's Table 3",
                          f"move − {fault:.0f} µs per page < pure copy",
                          ", ".join(f"{e:.0f} vs {p:.0f}" for e, p in zip(pmove, ppure)),
                          all(e < p for e, p in zip(pmove, ppure)),
                          note="Table 3's IPC-move less its measured pseudo page fault per "
                               "page, against its pure copy (2–16 KB µs): arithmetic on the "
                               "paper's numbers, no model"))
    eager = [ipc("move-eager", kb) for kb in sizes]
    pure = [ipc("pure-copy", kb) for kb in sizes]
    ppage = (ppure[-1] - ppure[0]) / 7
    best2, worst2 = pub(t2, "case", "best", 2), pub(t2, "case", "worst", 2)
    o.checks.append(Check("… on the model, pure copy's buffers apart (ipcSend alone)",
                          "eager move < pure copy",
                          ", ".join(f"{e:.0f} vs {p:.0f}" for e, p in zip(eager, pure)),
                          all(e < p for e, p in zip(eager, pure)),
                          note=f"no colour holds three of the buffers' pages, so both copies "
                               f"are best case, as the paper explains its pure copy; then the "
                               f"eager move's two flushes and three page-table updates per "
                               f"page (unmap, destroy, map) cost more. The paper's pure copy "
                               f"measured {ppage:.0f} µs a page: nearer two worst-case copies "
                               f"(2 × {worst2:.0f}) than two best (2 × {best2:.0f})"))
    deager = [ipc("move-eager", kb) + ipc("move-eager", kb, col="deferred") for kb in sizes]
    dpure = [ipc("pure-copy", kb) + ipc("pure-copy", kb, col="deferred") for kb in sizes]
    o.checks.append(Check("…counting what each design defers",
                          "pure copy: later write-backs; move: replacement pages",
                          ", ".join(f"{e:.0f} vs {p:.0f}" for e, p in zip(deager, dpure)),
                          all(e < p for e, p in zip(deager, dpure)),
                          note="deferred write-backs are an upper bound: a recycled buffer "
                               "line rewritten before eviction is written back once"))
    place = pd.DataFrame(r["placement"])
    o.tables["pure_copy_placement"] = place

    def placed(name, kb):
        row = place[(place.placement == name) & (place.bytes == kb * 1024)]
        return float(row.ours.iloc[0])

    one = [placed("one-colour", kb) for kb in sizes]
    on_r = [placed("on-receiver", kb) for kb in sizes]
    same = [kb for kb, a, b in zip(sizes, pure, on_r) if abs(a - b) < 0.05]
    o.checks.append(Check("… on the model, pure copy's buffers on one colour (copies that miss)",
                          "eager move < pure copy",
                          ", ".join(f"{e:.0f} vs {p:.0f}" for e, p in zip(eager, one)),
                          all(e < p for e, p in zip(eager, one)),
                          note="each copy's stores miss and write back a dirty line. With the "
                               "sender's and receiver's buffers not cache aligned (the "
                               "paper's), the kernel buffer's colour alone cannot do it: a "
                               "2-way set holds two pages, and with the kernel buffer on the "
                               "receiver's colour pure copy costs what it does apart at "
                               + ", ".join(str(k) for k in same) + " KB"
                               + "".join(f"; {b:.0f} µs (not {a:.0f}) at {kb} KB"
                                         for kb, a, b in zip(sizes, pure, on_r)
                                         if kb not in same)
                               + " (table pure_copy_placement)"))
    warm = {des: ipc(des, 4, col="warm_lines") / 128 for des in ("copy", "move", "pure-copy")}
    o.checks.append(Check("pure copy leaves the receiver's data warm; copy and move cold",
                          "warm vs cold",
                          ", ".join(f"{k} {100 * v:.0f}%" for k, v in warm.items()),
                          warm["pure-copy"] == 1 and warm["copy"] < 0.05 and warm["move"] < 0.05,
                          note="share of a 4 KB message cached for the receiver after it reads "
                               "one word per page"))
    purge = t3[t3.policy == "pseudo-aliasing+purge"]
    saves = [ipc(des, kb) - ipc(des, kb, df=purge) for des in ("copy", "move") for kb in sizes]
    o.checks.append(Check("purging dead pages beats flushing them", "purge < best-case flush",
                          f"saves {min(saves):.0f}–{max(saves):.0f} µs per message",
                          min(saves) > 0))

    # Mach's copy-on-write cases.
    tot = dict(zip(cow.case, cow.total))
    o.checks.append(Check("COW page initialisation: case 2 ≫ case 1 ≈ case 3",
                          "case 2 ≫ 1 ≈ 3",
                          f"{tot[2]:.0f} vs {tot[1]:.0f} ≈ {tot[3]:.0f} µs",
                          bool(tot[2] > 2 * tot[1] and abs(tot[1] - tot[3]) < 0.1 * tot[1]),
                          note="fault plus the task reading the new page; case 2 flushes "
                               "three times and leaves the page cold"))
    wl = dict(zip(cow.case, cow.warm_lines))
    o.checks.append(Check("the new page ends warm in cases 1 and 3, cold in case 2",
                          "warm, cold, warm", f"{wl[1]}, {wl[2]}, {wl[3]} of 64 lines cached",
                          bool(wl[1] == 64 and wl[2] == 0 and wl[3] == 64)))

    # Beyond the paper's tables: two address spaces taking turns on one shared page.
    def sh(policy, aligned, access):
        row = share[(share.policy == policy) & (share.aligned == aligned)
                    & (share.access == access)]
        return float(row.us_per_round.iloc[0])

    plain = sh("pseudo-aliasing", False, "read")
    ro = sh("pseudo-aliasing+read-only", False, "read")
    o.checks.append(Check("read-only aliasing makes read sharing free of faults and flushes",
                          "a 6–10% overall gain (HP's Tut)",
                          f"{plain:.0f} → {ro:.0f} µs per round, unaligned readers",
                          ro < 0.05 * plain,
                          note="a shared page read by two spaces in turn; the paper's figure "
                               "is for a whole system, ours for the sharing alone"))
    eq = sh("pseudo-aliasing+equivalent", True, "write")
    eqw = sh("pseudo-aliasing+equivalent", False, "write")
    o.checks.append(Check("equivalently mapped (same colour) aliases need no flush",
                          "resolved by hardware",
                          f"{sh('pseudo-aliasing', True, 'write'):.0f} → {eq:.0f} µs per round "
                          f"aligned; {eqw:.0f} unaligned",
                          eq < 0.05 * eqw,
                          note="writers in turn; the policy must know colours to exploit it"))

    # Figures.
    fig, ax = subplots(size=(6.4, 4.2))
    ipc = base[base.bytes > 0].assign(kb=lambda t: t.bytes / 1024)
    plot_lines(ax, ipc, "kb", "ours", "design", published="published",
               label=lambda des: DESIGNS[des], xlog=True, xlabel="message size (KB)",
               ylabel="ipcSend cost (µs)", title="Inouye 1992, Table 3: IPC cost per design")
    ax.set_xticks([1, 2, 4, 8, 16], labels=["1", "2", "4", "8", "16"])
    o.figures.append(("ipcSend cost against message size, per IPC design",
                      save_figure(fig, d, "ipc_designs")))

    fig, axes = subplots(2, size=(9, 3.8))
    for ax, df, key, title in [(axes[0], t1, "state", "Table 1: flush"),
                               (axes[1], t2, "case", "Table 2: copy")]:
        plot_lines(ax, df, "kb", "ours", key, published="published", xlabel="KB",
                   ylabel="µs", title=title)
    o.figures.append(("Flush and copy cost by cache state, model against the paper",
                      save_figure(fig, d, "flush_copy")))

    fig, ax = subplots(size=(5, 3.6))
    plot_bars(ax, cow.assign(label=[f"case {c}" for c in cow.case]), "label",
              {"fault": "fault handling", "touch": "task reads the page"}, ylabel="µs",
              title="Mach copy-on-write page initialisation")
    o.figures.append(("Copy-on-write cases 1–3", save_figure(fig, d, "cow_cases")))
    return o
