"""The ``lookaside`` command as a user meets it: output, exit codes, messages."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import lookaside


def test_demo_prints_a_table(cli):
    p = cli("demo")
    for word in ("itlb", "dtlb", "stlb", "walk", "MPKI"):
        assert word in p.stdout


def test_simulate_quick_mode_json(cli, lackey_trace):
    p = cli("simulate", lackey_trace, "--tlb", "dtlb:entries=64,ways=full,policy=lru,page=4k",
            "--json")
    r = json.loads(p.stdout)
    d = r["structures"]["dtlb"]
    assert d["geometry"]["serves"] == "data"
    assert d["accesses"] >= r["trace"]["by_kind"]["load"] + r["trace"]["by_kind"]["store"]
    assert d["hits"] + d["misses"] == d["accesses"]
    assert "mpki" in d and "instructions_per_miss" in d


def test_set_overrides_a_preset(cli, demo):
    p = cli("simulate", demo, "--config", "modern-x86", "--set", "tlb.stlb.entries=768",
            "--json")
    assert json.loads(p.stdout)["structures"]["stlb"]["geometry"]["sets"] == 64


def test_output_file(cli, demo, tmp_path):
    out = tmp_path / "r.json"
    cli("simulate", demo, "--json", "-o", out)
    assert json.loads(out.read_text())["schema"] == "lookaside/result-v1"


def test_outputs_into_a_fifo_are_written_in_place(cli, demo, tmp_path):
    """A FIFO given as output (a converted trace, a JSON result) is written, not replaced by
    a regular file: a reader on its other end gets the whole of it."""
    fifo = tmp_path / "out.lks"
    os.mkfifo(fifo)
    got: dict[str, bytes] = {}
    for what in ("trace", "result"):
        reader = threading.Thread(target=lambda w=what: got.__setitem__(w, fifo.read_bytes()))
        reader.start()
        if what == "trace":
            cli("convert", demo, fifo)
        else:
            cli("simulate", demo, "--tlb", "d:entries=64", "--json", "-o", fifo)
        reader.join(timeout=60)
        assert fifo.is_fifo() and sorted(tmp_path.iterdir()) == [fifo]
    assert got["trace"].startswith(b"LKSTRACE")
    assert json.loads(got["result"])["structures"]["d"]["accesses"] > 0


def test_presets_and_config(cli):
    p = cli("presets")
    assert "modern-x86" in p.stdout and "decstation3100-mach3" in p.stdout
    p = cli("config", "--config", "decstation3100-mach3")
    assert "lower_policy" in p.stdout


def check_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.startswith("lookaside: error: "), p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in p.stderr, (n, p.stderr)


def test_errors_name_the_file_line_and_field(cli, tmp_path):
    bad = tmp_path / "bad.lackey"
    bad.write_text("I  04000000,4\n L 04001000,8\n Q 12,3\n")
    check_error(cli("simulate", bad, "--tlb", "d:entries=8", check=False), "bad.lackey", "line 3")
    check_error(cli("simulate", tmp_path / "missing.din", check=False), "missing.din")


def test_config_errors_name_the_key(cli, demo, tmp_path):
    check_error(cli("simulate", demo, "--tlb", "dtlb:entries=64,ways=3", check=False),
                "tlb.dtlb.ways")
    check_error(cli("simulate", demo, "--tlb", "dtlb:entries=0", check=False), "tlb.dtlb.entries")
    check_error(cli("simulate", demo, "--tlb", "dtlb:entries=8,policy=mru", check=False),
                "tlb.dtlb.policy", "mru")
    check_error(cli("simulate", demo, "--set", "tlb.nope.entries=3", check=False), "nope")
    cfg = tmp_path / "m.toml"
    cfg.write_text("[[tlb]]\nname = 'dtlb'\nentires = 64\n")
    check_error(cli("simulate", demo, "--config", cfg, check=False), "m.toml", "entires", "line")


def test_config_errors_are_one_line(cli, demo, tmp_path):
    def one_line(*args, needles=()):
        p = cli("simulate", demo, *args, check=False)
        check_error(p, *needles)
        assert p.stderr.count("\n") == 1 and p.stderr.endswith("\n"), p.stderr

    cfg = tmp_path / "m.toml"
    cfg.write_text("[[tlb]]\nname = 'dtlb'\nentries = = 64\n")
    one_line("--config", cfg, needles=[f"{cfg}: line 3, column 11: syntax: "])
    cfg.write_text("[[tlb]]\nname = 'dtlb'\nentries = 64\nentires = 64\n")
    one_line("--config", cfg, needles=[f"{cfg}: line 4, column 1: tlb.dtlb.entires: unknown key"])
    one_line("--tlb", "d:foo=1", needles=["--tlb: tlb.d.foo: unknown key (expected one of: name"])
    one_line("--set", "tlb.dtlb.bogus=1", needles=["--set: tlb.dtlb.bogus: unknown key"])
    one_line("--tlb", "dtlb:page=3k",
             needles=["--tlb: tlb.dtlb.page: '3k' is not a page size (e.g. 4k, 2M, 1G)"])
    one_line("--tlb", "dtlb:entries=8,policy=mru",
             needles=["--tlb: tlb.dtlb.policy: unknown replacement policy \"mru\""])
    one_line("--config", "modern-x86", "--set", "tlb.stlb.policy=mru",
             needles=["--set: tlb.stlb.policy: unknown replacement policy"])
    # A bad value in a file is found at its line, even with flags beside it.
    cfg.write_text("[[tlb]]\nname = 'dtlb'\nentries = 64\nways = 3\n")
    one_line("--config", cfg, "--set", "machine.seed=3",
             needles=[f"{cfg}: line 4, column 1: tlb.dtlb.ways: 3 does not divide 64 entries"])


def test_siblings_for_large_pages_from_flags(cli, demo):
    # x86's first level: a 4K DTLB and a 2M one side by side, one STLB behind; the shared
    # libraries of the demo trace mapped with 2 MiB pages.
    flags = ["--tlb", "itlb:entries=128,ways=8,next=stlb",
             "--tlb", "dtlb:entries=64,ways=4,next=stlb",
             "--tlb", "dtlb2m:entries=32,ways=4,page=2M,next=stlb",
             "--tlb", "stlb:entries=1536,ways=12,page=4k+2M"]
    region = 'pages.regions=[{start="0x4000000", end="0x4c00000", size="2M"}]'

    def run(*more):
        return json.loads(cli("simulate", demo, *flags, *more, "--json").stdout)

    r = run("--set", region)
    s, kinds = r["structures"], r["trace"]["by_kind"]
    assert s["dtlb2m"]["geometry"]["page"] == ["2M"]
    assert s["dtlb"]["accesses"] > 0 and s["dtlb2m"]["accesses"] > 0
    assert s["dtlb"]["accesses"] + s["dtlb2m"]["accesses"] >= kinds["load"] + kinds["store"]
    assert s["dtlb2m"]["misses"] <= 6  # the region's 2 MiB pages, each filled once
    assert s["stlb"]["accesses"] == sum(s[t]["misses"] for t in ("itlb", "dtlb", "dtlb2m"))
    assert r["walk"]["count"] == s["stlb"]["misses"]
    # Without 2 MiB pages the 2M DTLB is never consulted.
    r = run()
    assert r["structures"]["dtlb2m"]["accesses"] == 0
    assert r["structures"]["dtlb"]["accesses"] >= kinds["load"] + kinds["store"]
    # Ambiguous or incomplete wirings are one-line config errors naming the key.
    p = cli("simulate", demo, *flags[:4], "--tlb", "dtlb2m:entries=32,page=4k+2M,next=stlb",
            *flags[6:], check=False)
    check_error(p, "--tlb: tlb.dtlb2m.page: 'dtlb' and 'dtlb2m' both hold 4K pages")
    assert p.stderr.count("\n") == 1
    # A TLB of 2 MiB pages alone makes the machine's pages 2 MiB; beside one holding 4 KiB
    # pages only, the machine keeps 4 KiB pages and the error names the --set that changes it.
    r = json.loads(cli("simulate", demo, "--tlb", "dtlb:entries=32,ways=full,page=2m",
                       "--json").stdout)
    assert r["machine"]["config"]["pages"]["size"] == "2M"
    assert r["structures"]["dtlb"]["misses"] < 10
    check_error(cli("simulate", demo, "--tlb", "d:entries=8,page=2M",
                    "--tlb", "i:entries=8,page=4k", check=False),
                "--tlb: tlb.d.page: 4K pages: no first-level TLB for load references holds",
                "set --set pages.size=2M")


def test_caches_from_flags_without_a_tlb(cli, demo):
    # Split 32 KiB first levels and a unified second level, DineroIV-style, no TLB: the
    # second level sees the first levels' misses and write-backs (reads and writes).
    caches = ["--cache", "il1:size=32k,line=64,ways=8,next=l2",
              "--cache", "dl1:size=32k,line=64,ways=8,policy=lru,next=l2",
              "--cache", "l2:size=1M,line=64,ways=16"]
    r = json.loads(cli("simulate", demo, *caches, "--json").stdout)
    s, kinds = r["structures"], r["trace"]["by_kind"]
    assert list(s) == ["il1", "dl1", "l2"]
    assert s["il1"]["geometry"]["serves"] == "instruction"
    assert s["il1"]["accesses"] >= kinds["fetch"]
    assert s["dl1"]["by_kind"]["store"]["accesses"] >= kinds["store"]
    # Each first-level miss fetches its block; each dirty victim (and each block dirty at
    # the end) is written back.
    assert s["l2"]["by_kind"]["store"]["accesses"] == s["dl1"]["writebacks"] > 0
    assert s["l2"]["accesses"] == (s["il1"]["misses"] + s["dl1"]["misses"]
                                   + s["dl1"]["writebacks"])
    table = cli("simulate", demo, *caches).stdout
    assert "dl1        32K 8w 64B lru" in table and "walk" not in table
    # A bad key is one line naming the flag and the key.
    p = cli("simulate", demo, "--cache", "l1:size=32k,line=48", check=False)
    check_error(p, "--cache: cache.l1.line: 48 is not a power of two")
    p = cli("config", "--cache", "l1:size=32k,line=64,ways=8", "--set", "cache.l1.ways=4")
    assert 'ways = 4' in p.stdout and "[[cache]]" in p.stdout


def test_dinero_summary_diffs_clean_against_dinero_iv(cli):
    # DineroIV 7's own output for this machine on the trace's xdin conversion (see
    # crates/lookaside/tests/data/README.md), from its "---Simulation complete." line on.
    data = Path(__file__).parents[1] / "crates" / "lookaside" / "tests" / "data"
    trace = Path(lookaside.__file__).parent / "data" / "sortprog.lks"
    p = cli("simulate", trace, "--dinero", "--cache", "il1:size=32k,line=64,ways=8,next=l2",
            "--cache", "dl1:size=32k,line=64,ways=8,next=l2",
            "--cache", "l2:size=1M,line=64,ways=16")
    assert p.stdout == (data / "dineroIV" / "sortprog.l1-l2.txt").read_text()
    check_error(cli("simulate", trace, "--dinero", "--tlb", "d:entries=8", check=False),
                "no [[cache]]")


def test_failed_run_leaves_no_output_file(cli, tmp_path):
    bad = tmp_path / "bad.din"
    bad.write_text("0 10\n7 20\n")
    out = tmp_path / "r.json"
    check_error(cli("simulate", bad, "--tlb", "d:entries=8", "-o", out, check=False), "line 2")
    assert not out.exists()


def test_not_yet_commands_say_so(cli, demo):
    # Several CPUs have TLB trees of their own, not yet caches.
    p = cli("simulate", demo, "--tlb", "d:entries=8", "--cache", "l1:size=4k,line=64,ways=2",
            "--set", "machine.cpus=2", check=False)
    check_error(p, "not yet", "machine.cpus: 2 CPUs with cache")


def test_a_vac_beside_a_table_of_two_page_sizes(cli, demo, tmp_path):
    # A 2 MiB page beside 4 KiB ones (where the demo's program keeps data) takes an aligned
    # run of the VAC's OS's frames: the table maps one page of 2 MiB and the rest of 4 KiB.
    m = tmp_path / "m.toml"
    m.write_text('[[tlb]]\nname = "t"\nentries = 32\npage = ["4K", "2M"]\n'
                 '[pages]\nregions = [{start = 0x4000000, end = 0x4200000, size = "2M"}]\n'
                 '[pagetable]\norganisation = "radix"\nlevels = 4\n[vac]\npage = "4KiB"\n')
    r = json.loads(cli("simulate", demo, "--config", m, "--json").stdout)
    assert r["pagetable"]["faults"] > 0 and r["pagetable"]["unmappable"] == 0
    table = r["pagetable"]["table"]
    assert table["mapped_bytes"] == (2 << 20) + 4096 * (table["pages"] - 1)
    assert r["vac"]["counts"]["first_touch_maps"] > 0


def test_a_vac_beside_a_table_of_its_pages(cli, demo):
    # The HP 9000/834's 2 KiB pages: a hashed table maps the machine's pages, so it fits;
    # a radix table holds no 2 KiB page, and the error says which table would.
    hp = ["--config", "hp9000-834", "--set", "pagetable.organisation=hashed", "--json"]
    r = json.loads(cli("simulate", demo, *hp).stdout)
    assert r["pagetable"]["faults"] > 0 and r["pagetable"]["unmappable"] == 0
    assert r["pagetable"]["table"]["mapped_bytes"] == 2048 * r["pagetable"]["table"]["pages"]
    p = cli("simulate", demo, "--config", "hp9000-834", "--set", "pagetable.organisation=radix",
            check=False)
    check_error(p, "pages.size: 2K pages with [pagetable]", "a hashed or inverted table")


def test_memory_behind_the_refill_model_and_the_walker(cli):
    # The software-refill model's handlers and the walker's table reads reach the caches.
    w = "workload:multiuser,users=3,slices=30,quantum=1000"
    caches = ["--set", "memory.dcache.size=64KiB", "--set", "memory.dcache.line=16",
              "--set", "memory.dcache.miss_cycles=15"]
    r = json.loads(cli("simulate", w, "--config", "decstation3100-mach3",
                       "--set", "refill.fold_user_addresses=true", *caches, "--json").stdout)
    h = r["memory"]["tlb_handlers"]
    assert h["utlb"]["misses"] == r["traps"]["counts"]["L1U"] > 0
    assert h["ktlb"]["misses"] == sum(r["traps"]["counts"][t] for t in ("L1K", "L2", "L3"))
    assert r["memory"]["system"]["stalls"]["dcache"] > 0
    r = json.loads(cli("simulate", w, "--config", "pa-risc-hpt",
                       "--set", "pagetable.data_refs=false", *caches, "--json").stdout)
    assert r["pagetable"]["cache"] == "memory"
    assert r["memory"]["tlb_handlers"]["walk"]["misses"] == r["pagetable"]["walks"] > 0


def test_the_os_model_serves_a_real_programs_calls(cli, demo):
    shipped = Path(lookaside.__file__).parent / "data" / "tarzone.lks"
    assert lookaside.info(shipped)["kinds"]["marker"] == 331  # tar's system calls

    def traps(structure: str, trace: Path, preset: str, more: str = "") -> dict:
        w = f"workload:os,structure={structure},trace={trace}{more}"
        r = json.loads(cli("simulate", w, "--config", preset, "--json").stdout)
        return r["traps"]["counts"]

    ultrix = traps("monolithic", shipped, "decstation3100-ultrix")
    mach = traps("microkernel", shipped, "decstation3100-mach3")
    assert ultrix["L1K"] == 0 < mach["L1K"] and ultrix["L1U"] < mach["L1U"]
    # A trace without markers (lackey's): calls injected every N references, or an error.
    assert traps("microkernel", demo, "decstation3100-mach3", ",every=5000")["L1K"] > 0
    w = f"workload:os,structure=microkernel,trace={demo}"
    check_error(cli("simulate", w, "--config", "decstation3100-mach3", check=False),
                "workload:os: the trace has no system-call markers")
    for more, key in [(",every=0", "every"), (",syscalls=5", "syscalls")]:
        check_error(cli("simulate", w + more, "--config", "decstation3100-mach3", check=False),
                    f": {key}: ")
    check_error(cli("simulate", "workload:os,every=5", "--config", "decstation3100-mach3",
                    check=False), "give trace=FILE too")


def test_a_trace_is_rewritten_between_sharing_models(cli, demo, tmp_path):
    w = "workload:multiuser,users=3,slices=30,quantum=1000,shared=60"
    saved = tmp_path / "global.lks"
    cli("convert", w, saved)  # a workload spec converts like a trace
    assert lookaside.info(saved)["metadata"]["extra"]["workload"] == w

    def result(source: str) -> dict:
        r = json.loads(cli("simulate", source, "--config", "pa-risc-hpt", "--json").stdout)
        return {k: r[k] for k in ("structures", "walk", "pagetable")}

    aliased = result(f"workload:rewrite,trace={saved},to=per-process")
    assert aliased == result(w + ",addresses=per-process")
    assert aliased != result(str(saved))
    check_error(cli("simulate", f"workload:rewrite,trace={demo},to=global", check=False),
                "event 3: address: 0x1fff000738 does not fit the 32-bit offset")
    check_error(cli("simulate", f"workload:rewrite,trace={demo}", check=False), ": to: missing")


def test_a_virtually_addressed_cache_in_a_machine(cli, demo, tmp_path):
    m = tmp_path / "vac.toml"
    m.write_text('[[tlb]]\nname = "dtlb"\nentries = 64\nserves = "data"\n'
                 '[vac]\nmapping = "colour"\n')
    r = json.loads(cli("simulate", demo, "--config", m, "--json").stdout)
    v, kinds = r["vac"], r["trace"]["by_kind"]
    assert (v["counts"]["loads"], v["counts"]["stores"]) == (kinds["load"], kinds["store"])
    assert v["lines"]["hits"] + v["lines"]["misses"] >= kinds["load"] + kinds["store"]
    assert v["primitives"]["maps"] == v["counts"]["first_touch_maps"] > 0
    assert v["cache"]["colours"] == 32 and v["elapsed_us"] > 0
    assert "vac: 128 KiB 2-way" in cli("simulate", demo, "--config", m).stdout
    for bad, key in [("ways = 3", "vac.size"), ('policy = "magic"', "vac.policy"),
                     ('mapping = "best"', "vac.mapping"), ("colour = 1", "colour")]:
        m.write_text(f'[[tlb]]\nname = "t"\nentries = 8\n[vac]\n{bad}\n')
        check_error(cli("simulate", demo, "--config", m, check=False), key)


def test_page_table_machines_simulate_and_name_bad_keys(cli, tmp_path):
    w = "workload:multiuser,users=3,slices=30,quantum=1000"
    r = json.loads(cli("simulate", w, "--config", "pa-risc-hpt", "--json").stdout)
    pt = r["pagetable"]
    assert pt["organisation"] == "hashed" and pt["walks"] == r["walk"]["count"] > 0
    assert pt["table"]["bytes"] == 512 * 1024 and pt["head_hit_rate"] > 0.5
    cpm = pt["cycles_per_miss"]
    assert abs(cpm["basic"] + cpm["cache_penalty"] - cpm["total"]) < 1e-9
    m = tmp_path / "m.toml"
    m.write_text('[[tlb]]\nname = "t"\nentries = 32\n[pagetable]\norganisation = "radix"\n'
                 'levels = 4\npsc = [{ level = 2, entries = 16, ways = 4 }]\n')
    r = json.loads(cli("simulate", w + ",addresses=per-process", "--config", m, "--json").stdout)
    assert [lv["name"] for lv in r["pagetable"]["levels"]] == ["L4", "L3", "L2", "L1"]
    assert r["pagetable"]["psc_skipped"] > 0
    # PA-RISC's software TLB (2-way by default) in front of the IPT.
    m.write_text('[[tlb]]\nname = "t"\nentries = 32\n[pagetable]\norganisation = "swtlb"\n'
                 'refill = "software"\n')
    pt = json.loads(cli("simulate", w, "--config", m, "--json").stdout)["pagetable"]
    assert pt["organisation"] == "swtlb" and (pt["front_entries"], pt["front_ways"]) == (2048, 2)
    assert [lv["name"] for lv in pt["levels"]] == ["swTLB", "HAT", "IPT", "chain"]
    assert 0 < pt["head_hit_rate"] < 1 and pt["front_refills"] == pt["walks"] - pt["head_hits"]
    assert pt["cycles_per_miss"]["basic"] >= 27
    for bad, key in [("ratio = 3", "pagetable.ratio"), ('refill = "magic"', "pagetable.refill"),
                     ("cycles = { hw_hbt = 1 }", "pagetable.cycles.hw_hbt")]:
        m.write_text(f'[[tlb]]\nname = "t"\nentries = 32\n[pagetable]\n'
                     f'organisation = "hashed"\n{bad}\n')
        check_error(cli("simulate", w, "--config", m, check=False), key)


def test_access_map_as_table_and_image(cli, demo, tmp_path):
    import pandas as pd

    import lookaside

    df = lookaside.access_map(demo, page="4k", interval=100_000, select="data")
    info = lookaside.info(demo)
    # Every page the trace's data references touch appears, each at most once per interval.
    assert df.duplicated(["asid", "page", "interval"]).sum() == 0
    assert 0 < df.page.nunique() <= info["pages"]
    assert df.attrs["intervals"] == -(-info["instructions"] // 100_000)
    assert (df.address == df.page * 4096).all()
    csv = tmp_path / "map.csv"
    cli("map", demo, "--select", "instruction", "--interval", "50000", "-o", csv)
    table = pd.read_csv(csv)
    assert set(table.columns) == {"asid", "page", "address", "interval"} and len(table)
    png = tmp_path / "map.png"
    cli("map", demo, "-o", png)
    assert png.read_bytes()[:4] == b"\x89PNG"
    p = cli("map", demo, "-o", tmp_path / "map.txt", check=False)
    assert p.returncode != 0 and "map.txt" in p.stderr and not (tmp_path / "map.txt").exists()
    p = cli("map", demo, "--page", "3k", check=False)
    assert p.returncode != 0 and "page" in p.stderr


def test_the_docs_explain_every_field_of_info():
    """docs/traces.md's "What `lookaside info` reports" names each field info gives."""
    readme = (Path(__file__).parents[1] / "docs" / "traces.md").read_text(encoding="utf-8")
    section = readme.split("## What `lookaside info` reports", 1)[1].split("\n## ", 1)[0]
    shipped = Path(lookaside.__file__).parent / "data" / "tarzone.lks"
    fields = set(lookaside.info(shipped)) | {"translations", "pages", "remaps", "returns",
                                             "exact"}
    missing = sorted(f for f in fields if f"`{f}`" not in section)
    assert not missing, missing


def run_with(args: list, *, umask: int | None = None, tty_stderr: bool = False,
             cwd: Path | None = None) -> tuple[int, str, str]:
    """Run ``lookaside ARGS…`` under `umask`, with stderr on a terminal if asked; returns
    (status, stdout, stderr)."""
    import os
    import pty
    import subprocess
    import sys

    def setup() -> None:
        if umask is not None:
            os.umask(umask)

    master = slave = None
    if tty_stderr:
        master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "lookaside.cli", *map(str, args)], cwd=cwd,
                         stdout=subprocess.PIPE,
                         stderr=slave if tty_stderr else subprocess.PIPE,
                         preexec_fn=setup)
    err = b""
    if tty_stderr:
        import threading

        os.close(slave)
        chunks: list[bytes] = []

        def drain() -> None:
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal is closed once the command ends
                    return
                if not chunk:
                    return
                chunks.append(chunk)

        reader = threading.Thread(target=drain)
        reader.start()
        with p.stdout:
            out = p.stdout.read()
        p.wait()
        reader.join()
        os.close(master)
        err = b"".join(chunks)
    else:
        out, err = p.communicate()
    p.wait()
    return p.returncode, out.decode(), err.decode(errors="replace")


def test_result_files_honour_the_umask(demo: Path, tmp_path: Path):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ntlb = ["dtlb:entries=4,ways=full,page=4k"]\ntraces = ["demo"]\n'
                    '[axes]\n"tlb.dtlb.entries" = [2, 4]\n')
    for umask in (0o022, 0o077, 0o002):
        d = tmp_path / f"u{umask:o}"
        d.mkdir()
        for args in (["simulate", demo, "--json", "-o", d / "r.json"],
                     ["config", "-o", d / "m.toml"],
                     ["convert", demo, d / "t.din.gz"],
                     ["map", demo, "-o", d / "m.csv"],
                     ["sweep", spec, "-o", d / "sw", "-q"]):
            status, _, err = run_with(args, umask=umask)
            assert status == 0, err
        files = [d / "r.json", d / "m.toml", d / "t.din.gz", d / "m.csv",
                 d / "sw" / "results.csv", d / "sw" / "results.parquet",
                 d / "sw" / "sweep.json", d / "sw" / "report.html",
                 *(d / "sw" / "points").glob("*.json")]
        assert len(files) == 9  # the sweep's two points in one family's file
        for f in files:
            assert f.stat().st_mode & 0o777 == 0o666 & ~umask, (f, oct(f.stat().st_mode))


def test_long_commands_show_progress_on_a_terminal_only(demo: Path, lackey_trace: Path,
                                                         tmp_path: Path):
    for args in (["info", lackey_trace], ["info", lackey_trace, "--json"],
                 ["simulate", lackey_trace, "--json"],
                 ["map", demo]):
        status, quiet_out, quiet_err = run_with(args)  # stderr not a terminal
        assert status == 0 and quiet_err == "", quiet_err
        status, out, err = run_with(args, tty_stderr=True)
        assert status == 0, err
        assert "M events" in err, (args, err)
        assert out == quiet_out, "progress never mixes with the output"
        status, out, err = run_with([*args, "-q"], tty_stderr=True)
        assert status == 0 and "M events" not in err and out == quiet_out, err
    # convert: the same trace, progress or not.
    for name, tty in (("a.lks", True), ("b.lks", False)):
        status, _, err = run_with(["convert", lackey_trace, tmp_path / name], tty_stderr=tty)
        assert status == 0 and ("M events" in err) == tty, err
    assert (tmp_path / "a.lks").read_bytes() != b""
    assert (lookaside.info(tmp_path / "a.lks")["references"]
            == lookaside.info(tmp_path / "b.lks")["references"])


def test_report_says_what_it_draws_unless_quiet(tmp_path: Path):
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\ntlb = ["dtlb:entries=4,ways=full,page=4k"]\ntraces = ["demo"]\n'
                    '[axes]\n"tlb.dtlb.entries" = [2, 4]\n')
    status, _, err = run_with(["sweep", spec, "-o", tmp_path / "sw", "-q", "--no-report"])
    assert status == 0, err
    status, out, err = run_with(["report", tmp_path / "sw"])
    assert status == 0 and out.strip() == str(tmp_path / "sw" / "report.html"), err
    assert "plots" in err and "knees, best configurations" in err
    status, out2, err = run_with(["report", tmp_path / "sw", "-q"])
    assert status == 0 and out2 == out and err == "", err
