"""The ``lookaside`` command.

Exit codes: 0 success; 2 any error (bad trace, config or argument), reported as one line
``lookaside: error: …`` naming the file, line or byte offset and the field — never a
traceback; 130 interrupted (SIGINT, Ctrl-C), 143 terminated (SIGTERM): the command stops
at once, leaves no partial output and says so in one line.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
import warnings
from pathlib import Path

from . import (
    DEFAULT_PRESET,
    LookasideError,
    LookasideWarning,
    NotYetError,
    Result,
    _as_text,
    _lookaside,
    check_config,
    config_schema,
    convert_counts,
    demo_trace,
    info,
    preset_names,
    preset_path,
    simulate,
)
from ._files import write_atomically
from .bench import QUICK_REFS

FORMATS = ["lackey", "din", "xdin", "native", "champsim", "cloudsuite"]


class Progress:
    """A one-line progress report on stderr, shown only on a terminal."""

    def __init__(self, path: str | None, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self.size = os.path.getsize(path) if (path and os.path.isfile(path)) else 0
        self.shown = False

    def __call__(self, events: int, nbytes: int) -> None:
        if not self.enabled:
            return
        pct = f" {100 * nbytes / self.size:5.1f}%" if self.size and nbytes else ""
        sys.stderr.write(f"\r  {events / 1e6:10.1f} M events{pct}")
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r" + " " * 40 + "\r")
            sys.stderr.flush()


class Steps:
    """Progress of a command made of steps: one line per step on stderr, with the time
    since the command started (shown whatever stderr is: the lines are few)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.monotonic()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f"  [{time.monotonic() - self.t0:5.0f} s] {message}", file=sys.stderr,
                  flush=True)


def emit(text: str, out: str | None) -> None:
    if out:
        write_atomically(out, text)
    else:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")


def add_machine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", metavar="FILE|PRESET",
                   help=f"machine: a TOML file or a preset name (default {DEFAULT_PRESET} "
                        "unless --tlb or --cache is given); see `lookaside presets`")
    p.add_argument("--tlb", action="append", default=[], metavar="NAME:key=value,…",
                   help="add a TLB DineroIV-style, e.g. dtlb:entries=64,ways=full,policy=lru,"
                        "page=4k (keys: entries, ways, policy, page (4k+2M), serves, next (a+b), "
                        "asid, partition (lower/lower_policy/upper_policy), placement, 3c); "
                        "repeatable")
    p.add_argument("--cache", action="append", default=[], metavar="NAME:key=value,…",
                   help="add a cache DineroIV-style, e.g. l1d:size=32k,line=64,ways=8,"
                        "policy=lru,serves=data,next=l2 (keys: size, line, ways, policy, "
                        "serves, next, write (back|through), allocate (yes|no|no-fetch), "
                        "fetch, prefetch_distance, sub_block, 3c); repeatable; caches see "
                        "virtual addresses, no TLB needed (physical ones, and the walks, "
                        "with a [pagetable])")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. tlb.dtlb.entries=128, "
                        "cache.l1d.ways=4 or machine.seed=3; repeatable")


def add_max_memory(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-memory", metavar="SIZE",
                   help="refuse a machine estimated to need more memory than this, before "
                        "allocating it (e.g. 4G; default: half of the host's memory)")


def machine_of(args: argparse.Namespace) -> str | None:
    if args.config is not None:
        return args.config
    return None if (args.tlb or args.cache) else DEFAULT_PRESET


def cmd_simulate(args: argparse.Namespace) -> int:
    prog = Progress(args.trace, not args.quiet)
    try:
        with warnings.catch_warnings():  # said below, as a `lookaside: warning:` line
            warnings.simplefilter("ignore", LookasideWarning)
            r = simulate(args.trace, machine_of(args), args.set, tlb=args.tlb,
                         cache=args.cache, format=args.format, progress=prog,
                         reading=args.reading, max_memory=args.max_memory)
    finally:
        prog.done()
    for w in r.data.get("warnings", []):
        print(f"lookaside: warning: {w}", file=sys.stderr)
    emit(r.to_json() if args.json else r.dinero() if args.dinero else r.table(), args.output)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    trace = demo_trace()
    print(f"Simulating the shipped demo trace ({trace.name}) on preset {DEFAULT_PRESET}.\n")
    r = simulate(trace, DEFAULT_PRESET)
    print(r.table())
    print("Try: lookaside simulate TRACE --tlb dtlb:entries=64,ways=full,policy=lru,page=4k")
    return 0


def cmd_convert(args: argparse.Namespace) -> int:
    prog = Progress(args.src, not args.quiet)
    try:
        n, left_out = convert_counts(args.src, args.dst, src_format=args.src_format,
                                     dst_format=args.dst_format,
                                     command=_as_text(shlex.join(["lookaside",
                                                                  *sys.argv[1:]])),
                                     progress=prog, phase=args.phase, skip=args.skip,
                                     take=args.take, level=args.level)
    finally:
        prog.done()
    note = (f" ({left_out} left out: the output format cannot represent them)"
            if left_out else "")
    print(f"{args.dst}: {n} events{note}", file=sys.stderr)
    return 0


def cmd_map(args: argparse.Namespace) -> int:
    from . import access_map

    prog = Progress(args.trace, not args.quiet)
    try:
        df = access_map(args.trace, page=args.page, interval=args.interval,
                        select=args.select, format=args.format, progress=prog)
    finally:
        prog.done()
    out = args.output
    if out is None or out.endswith(".csv"):
        emit(df.to_csv(index=False), out)
        return 0
    if not out.endswith((".png", ".svg", ".pdf")):
        raise LookasideError(f"{out}: the output is a .csv table or a .png/.svg/.pdf image")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report import plot_access_map

    fig, ax = plt.subplots(figsize=(7, 5))
    plot_access_map(df, ax, f"{os.path.basename(args.trace)}: {args.select} references")
    try:
        write_atomically(out, lambda tmp: fig.savefig(tmp, format=out.rsplit(".", 1)[1],
                                                       bbox_inches="tight"))
    finally:
        plt.close(fig)
    print(f"{out}: {df.page.nunique()} pages × {df.attrs['intervals']} intervals",
          file=sys.stderr)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    prog = Progress(args.trace, not args.quiet)
    try:
        s = info(args.trace, format=args.format, progress=prog)
    finally:
        prog.done()
    if args.json:
        emit(json.dumps(s, indent=2), None)
    else:
        width = max(len(k) for k in s)
        names: dict[int, list[str]] = {}
        for p in s.get("metadata", {}).get("processes", []):
            names.setdefault(p["asid"], [])
            if p["name"] not in names[p["asid"]]:
                names[p["asid"]].append(p["name"])
        for k, v in s.items():
            if k in ("by_asid", "by_cpu"):
                # One line per address space, named by the processes that ran in it; one
                # per CPU.
                for i, (a, c) in enumerate(v.items()):
                    named = k == "by_asid" and int(a) in names
                    who = f" ({', '.join(names[int(a)])})" if named else ""
                    shot = s.get("shootdowns", {}).get(a) if k == "by_cpu" else None
                    sd = (f"; shootdowns sent {shot['sent']:,}, received {shot['received']:,}"
                          if shot else "")
                    print(f"{k if i == 0 else '':<{width}}  {a}{who}: user {c['user']:,}, "
                          f"kernel {c['kernel']:,}{sd}")
                continue
            if k == "shootdowns":
                continue  # on the by_cpu lines
            if k.startswith("addr_") and isinstance(v, int):
                shown = f"{v:#x}"
            elif isinstance(v, dict) and k in ("kinds", "modes"):
                shown = ", ".join(f"{name} {n:,}" for name, n in v.items() if n)
            elif isinstance(v, (dict, list)):
                shown = json.dumps(v)
            elif isinstance(v, int) and not isinstance(v, bool):
                shown = f"{v:,}"
            else:
                shown = v
            print(f"{k:<{width}}  {shown}")
    return 0


def cmd_presets(args: argparse.Namespace) -> int:
    if args.name:
        sys.stdout.write(preset_path(args.name).read_text(encoding="utf-8"))
        return 0
    for name in preset_names():
        desc = ""
        for line in preset_path(name).read_text(encoding="utf-8").splitlines():
            if line.startswith("description"):
                desc = line.split("=", 1)[1].strip().strip('"')
        print(f"{name:<24} {desc}")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    if args.schema:
        emit(json.dumps(config_schema(), indent=2), args.output)
        return 0
    emit(check_config(machine_of(args), args.set, tlb=args.tlb, cache=args.cache), args.output)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from . import bench

    scale = [int(float(x)) for x in args.scale.split(",") if x] if args.scale else []
    if args.runs < 1:
        raise LookasideError("--runs must be at least 1")
    if args.max_refs is not None and args.max_refs < 1:
        raise LookasideError("--max-refs must be at least 1")
    steps = Steps(not args.quiet)

    def say(step: str | None) -> None:
        if step is not None:
            steps(step)

    r = bench.run(args.trace, runs=args.runs, quick=args.quick, max_refs=args.max_refs,
                  scale=scale, say=say)
    r["command"] = _as_text(shlex.join(["lookaside", *sys.argv[1:]]))
    emit(json.dumps(r, indent=2) if args.json else bench.table(r), args.output)
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from .report import write_report
    from .sweep import load_spec, run_sweep

    spec = load_spec(args.spec, max_memory=args.max_memory)
    out = args.out or f"sweep-{spec.name}"
    where = f"Dask scheduler {args.scheduler}" if args.scheduler else (
        f"{args.workers or os.cpu_count()} local workers")
    print(f"sweep {spec.name}: {len(spec.expand())} points on {where} → {out}/", file=sys.stderr)
    o = run_sweep(spec, out, workers=args.workers, scheduler=args.scheduler,
                  progress=None if not args.quiet else False, one_pass=not args.no_one_pass,
                  batch=args.batch)
    print(f"{o.total} points ({o.ran} run, {o.reused} already done): "
          f"{out}/results.csv, {out}/results.parquet", file=sys.stderr)
    warned = o.table[o.table["warnings"] != ""]["point"].nunique() if len(o.table) else 0
    if warned:
        print(f"lookaside: warning: {warned} points left references unsimulated (see the "
              "warnings and dropped_share columns)", file=sys.stderr)
    if not args.no_report:
        print(f"report: {write_report(out)}", file=sys.stderr)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    say = Steps(not args.quiet)
    print(write_report(args.dir, args.output, metric=args.metric, progress=say))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from .capture import describe, record

    argv = args.program[1:] if args.program[:1] == ["--"] else args.program
    if args.workload and not args.system:
        raise LookasideError("--workload runs inside a whole system: add --system")
    for opt, what in (("file", "--file copies into"), ("copy", "--copy copies into"),
                      ("kernel", "--kernel names the kernel of"),
                      ("fs", "--fs chooses the file service of"),
                      ("cpus", "--cpus gives CPUs to")):
        if getattr(args, opt) not in (None, []) and not args.system:
            raise LookasideError(f"{what} a whole system's guest: add --system")
    if args.system and args.via != "auto":
        raise LookasideError("--via chooses how a program is captured, not a whole system")
    prog = Progress(None, not args.quiet)
    try:
        if args.system:
            from .system import record_system

            if not args.workload and not argv:
                args.workload = "pipe"
            if args.workload and argv:
                raise LookasideError("give --workload NAME or -- PROGRAM ARGS…, not both")
            s = record_system(args.workload, args.output, command=argv or None,
                              files=args.file, copies=args.copy, kernel=args.kernel,
                              fs=args.fs or "kernel",
                              cpus=1 if args.cpus is None else args.cpus, level=args.level,
                              progress=prog, quiet=args.quiet)
        else:
            s = record(argv, args.output, args.via, level=args.level, progress=prog,
                       quiet=args.quiet)
    finally:
        prog.done()
    if not args.quiet:
        for line in describe(s):
            print(f"lookaside: {line}", file=sys.stderr)
    return 0


def cmd_reproduce(args: argparse.Namespace) -> int:
    from .reproduce import LIVE, RECIPES, all_recipes, recipe_module, reproduce, verdict_table

    names = all_recipes() if args.all else args.names
    if not names:
        raise NotYetError("name a recipe or --all (have: " + ", ".join(RECIPES) + ")")
    for n in names:
        recipe_module(n)  # unknown or not-built recipes fail before anything runs
    ok = True
    for n in names:
        say = Steps(not args.quiet)
        say(f"{n}: running")
        if args.recapture:
            from . import corpus

            corpus.use_recaptured(Path(args.out) / "corpus", say)
        o = reproduce(n, args.out, progress=say)
        print(verdict_table(o))
        print(f"\n{args.out}/{n}/report.html\n")
        ok &= o.ok
    if args.all:
        for n, (_title, module, missing) in RECIPES.items():
            if module is None:
                print(f"{n}: not built yet — it needs {missing}")
            elif n in LIVE:
                print(f"{n}: left out (it captures whole systems as it runs: "
                      f"`lookaside reproduce {n}`)")
    return 0 if ok else 1


def parser() -> argparse.ArgumentParser:
    from .reproduce import RECIPES

    p = argparse.ArgumentParser(
        prog="lookaside",
        description="A fast, trace-driven simulator of address translation and memory "
                    "hierarchies.")
    p.add_argument("--version", action="version", version=f"lookaside {_lookaside.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("simulate", help="simulate a trace on a machine")
    s.add_argument("trace", help="trace file (lackey, din, xdin, native or champsim; "
                                 ".gz/.xz/.zst ok)")
    s.add_argument("-f", "--format", choices=FORMATS, help="trace format (default: detected)")
    add_machine_args(s)
    out = s.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the result as JSON")
    out.add_argument("--dinero", action="store_true",
                     help="print the caches' statistics as DineroIV does, for diff against "
                          "its output from its '---Simulation complete.' line on")
    s.add_argument("-o", "--output", metavar="FILE", help="write the result here")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    s.add_argument("--reading", choices=["auto", "one-thread", "pipelined"], default="auto",
                   help="read the trace on the simulating thread or a second one (default: "
                        "a second one when there are two cores); results never differ")
    add_max_memory(s)
    s.set_defaults(run=cmd_simulate)

    s = sub.add_parser("demo", help="simulate the shipped demo trace on the default preset")
    s.set_defaults(run=cmd_demo)

    s = sub.add_parser("convert", help="convert a trace between formats")
    s.add_argument("src")
    s.add_argument("dst", help="output; format from the extension (.lks .din .xdin .lackey "
                               ".champsimtrace, "
                               "then optionally .gz/.xz/.zst) unless --to")
    s.add_argument("--from", dest="src_format", choices=FORMATS)
    s.add_argument("--to", dest="dst_format", choices=FORMATS)
    s.add_argument("--phase", metavar="LABEL",
                   help="cut: start at the first marker of phase LABEL (a whole-system "
                        "workload marks `run` where its measured part begins)")
    s.add_argument("--skip", type=int, default=0, metavar="N",
                   help="cut: leave out the first N references (from the phase's start)")
    s.add_argument("--take", type=int, metavar="N", help="cut: keep N references, then stop")
    s.add_argument("--level", type=int, metavar="N",
                   help="zstd level of a native output (default 1; 19 for a trace to keep)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    s.set_defaults(run=cmd_convert)

    s = sub.add_parser("info", help="summarise a trace")
    s.add_argument("trace")
    s.add_argument("-f", "--format", choices=FORMATS)
    s.add_argument("--json", action="store_true")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    s.set_defaults(run=cmd_info)

    s = sub.add_parser("map", help="memory access map: pages touched per interval of time")
    s.add_argument("trace")
    s.add_argument("-f", "--format", choices=FORMATS)
    s.add_argument("--page", default="4k", help="page size (default 4k)")
    s.add_argument("--interval", type=int, default=100_000,
                   help="instructions per interval (default 100000)")
    s.add_argument("--select", choices=["data", "instruction", "all"], default="data")
    s.add_argument("-o", "--output", metavar="FILE",
                   help="a .png/.svg/.pdf image, or a .csv table (default: CSV on stdout)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    s.set_defaults(run=cmd_map)

    s = sub.add_parser("presets", help="list the shipped machines, or print one")
    s.add_argument("name", nargs="?")
    s.set_defaults(run=cmd_presets)

    s = sub.add_parser("config", help="validate a machine and print it with defaults filled in")
    add_machine_args(s)
    s.add_argument("--schema", action="store_true",
                   help="print the JSON Schema of every machine description instead")
    s.add_argument("-o", "--output", metavar="FILE")
    s.set_defaults(run=cmd_config)

    s = sub.add_parser("bench", help="events per CPU second, per configuration and trace: "
                                     "parsing and simulation apart",
                       description="Time each configuration (TLBs, caches, whole machines, "
                                   "the one-pass engines) on each trace: parsing alone, "
                                   "simulation alone on events in memory, and both on one "
                                   "thread, by the CPU time of the measuring thread, --runs "
                                   "times. Default traces: the demo trace (hit-dominated), "
                                   "workload:segments (miss-heavy) and the shipped "
                                   "whole-system trace.")
    s.add_argument("trace", nargs="*",
                   help="traces or workload: specs to measure (default: the three shipped "
                        "shapes)")
    s.add_argument("--runs", type=int, default=5, metavar="N",
                   help="runs of each measurement; min, median and max are reported "
                        "(default 5)")
    s.add_argument("--quick", action="store_true",
                   help=f"the first {QUICK_REFS:,} events of each trace only (a check, not a "
                        "measurement)")
    s.add_argument("--max-refs", type=int, metavar="N",
                   help="the first N events of each trace at most (the bench holds them in "
                        "memory, 24 bytes each)")
    s.add_argument("--scale", metavar="N,N,…",
                   help="also run synthetic streams of these lengths and report peak memory, "
                        "e.g. 1e7,1e8,1e9")
    s.add_argument("--json", action="store_true", help="every run's figures as JSON")
    s.add_argument("-o", "--output", metavar="FILE", help="write the table (or JSON) here")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    s.set_defaults(run=cmd_bench)

    s = sub.add_parser("sweep", help="run a design-space sweep (a TOML spec of axes × traces)")
    s.add_argument("spec", help="sweep file, or the name of a shipped sweep (tlb-design); "
                   "see `lookaside.sweep` or docs/sweeps.md")
    s.add_argument("-o", "--out", metavar="DIR",
                   help="results directory (default sweep-NAME); rerunning resumes")
    s.add_argument("-j", "--workers", type=int, help="local worker threads (default: cores)")
    s.add_argument("--scheduler", metavar="ADDRESS",
                   help="run the points on this Dask distributed scheduler instead")
    s.add_argument("--no-report", action="store_true", help="skip the HTML report")
    s.add_argument("--no-one-pass", action="store_true",
                   help="run every point on its own, even where one pass over the trace "
                        "answers them (same results, slower)")
    s.add_argument("--batch", type=int, metavar="N",
                   help="at most N points per task (default: enough tasks for every worker, "
                        "up to 32 points each); each task reads its trace once")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_max_memory(s)
    s.set_defaults(run=cmd_sweep)

    s = sub.add_parser("report", help="write the HTML report of a finished sweep")
    s.add_argument("dir", help="the sweep's results directory")
    s.add_argument("-o", "--output", metavar="FILE", help="default DIR/report.html")
    s.add_argument("--metric", default="miss_ratio", choices=["miss_ratio", "mpki", "misses"])
    s.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    s.set_defaults(run=cmd_report)

    s = sub.add_parser("trace", help="run a program (or a whole system) and record its "
                                     "references into a trace",
                       usage="lookaside trace -o FILE [--via auto|qemu|valgrind] [--level N] "
                             "[-q] -- PROGRAM ARGS…\n"
                             "       lookaside trace --system -o FILE "
                             "[--kernel RELEASE[=VERSION]] [--fs kernel|user|user2]\n"
                             "                [--cpus N] [--workload NAME | [--file F]… "
                             "[--copy PATH]… -- PROGRAM ARGS…]",
                       description="Run PROGRAM under QEMU (user mode) with Lookaside's plugin "
                                   "and record every instruction fetch, load and store, of "
                                   "every thread, into a trace (native unless the output's "
                                   "extension names another format). Without QEMU, valgrind "
                                   "lackey records it instead (slower). With --system, boot a "
                                   "Linux kernel under qemu-system-x86_64, run a shipped "
                                   "workload (or PROGRAM, copied into the guest with its "
                                   "libraries and run by its absolute path) and record every "
                                   "reference of the kernel and of every process, with "
                                   "physical address, mode and address space; the same "
                                   "inputs give the same trace.")
    s.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the trace to write (e.g. prog.lks); it appears only when complete")
    s.add_argument("--via", choices=["auto", "qemu", "valgrind"], default="auto",
                   help="how to capture (default: QEMU if installed, else valgrind)")
    s.add_argument("--level", type=int, metavar="N",
                   help="zstd level of the native trace (default 1, the fastest; 3 is ~10%% "
                        "smaller at half the speed)")
    s.add_argument("--system", action="store_true",
                   help="record a whole system: kernel and every process (qemu-system-x86_64)")
    s.add_argument("--workload", metavar="NAME",
                   help="with --system: a shipped workload (default pipe; the corpus: gzip, "
                        "compile, text, andrew, ousterhout, djpeg, oltp[-N], ring[-N]; also "
                        "compress, mix; shootdown for --cpus)")
    s.add_argument("--file", action="append", default=[], metavar="F",
                   help="with --system: copy the file or directory tree F into the guest's "
                        "working directory")
    s.add_argument("--copy", action="append", default=[], metavar="PATH",
                   help="with --system: copy the file or directory tree at the absolute PATH "
                        "to the same path in the guest (programs and libraries in it with the "
                        "libraries they need): what the program runs or reads there")
    s.add_argument("--kernel", metavar="RELEASE[=VERSION]",
                   help="with --system: the guest's kernel (default: Debian's current cloud "
                        "kernel); with =VERSION that exact build, or an error (a trace's "
                        "kernel_package metadata names the one it was made with)")
    s.add_argument("--fs", choices=["kernel", "user", "user2"],
                   help="with --system: where the file service of the working directory runs: "
                        "in the kernel (default), in a user-level server (bindfs over FUSE, "
                        "as Mach's UX server), or through two stacked ones")
    s.add_argument("--cpus", type=int, metavar="N",
                   help="with --system: the guest's CPUs (default 1, at most "
                        "32): every CPU's references, in the order they ran, with CPU "
                        "markers and the kernel's TLB shootdowns")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress or report")
    s.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS…")
    s.set_defaults(run=cmd_trace)

    s = sub.add_parser("reproduce", help="regenerate a seed study and compare with the paper")
    s.add_argument("names", nargs="*", metavar="NAME", help=", ".join(RECIPES))
    s.add_argument("--all", action="store_true", help="every recipe that is built")
    s.add_argument("--out", default="reproduce", metavar="DIR",
                   help="results go to DIR/NAME/ (default ./reproduce)")
    s.add_argument("--recapture", action="store_true",
                   help="capture the whole-system traces of the stored corpus anew (into "
                        "OUT/corpus, reused by later runs) instead of reading the stored ones")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    s.set_defaults(run=cmd_reproduce)
    return p


class Terminated(KeyboardInterrupt):
    """Raised by the SIGTERM handler, so that a terminated command unwinds as an interrupted
    one does: the engine stops, partial outputs are removed, and the exit status says which
    signal it was (128 + its number)."""


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if not getattr(args, "run", None):
        p.print_help()
        return 2
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: leave signals as they are
        pass
    try:
        return args.run(args)
    except KeyboardInterrupt as e:
        signum = e.args[0] if isinstance(e, Terminated) else signal.SIGINT
        name = signal.Signals(signum).name
        print(f"lookaside: interrupted ({name})", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error worth a message.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        except OSError:
            pass
        return 0
    except (LookasideError, OSError) as e:
        if isinstance(e, OSError) and e.filename:
            msg = f"{e.filename}: {e.strerror}"
        else:
            msg = str(e)
        print(f"lookaside: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["main", "parser", "Result"]
