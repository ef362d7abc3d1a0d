"""User-level capture: run a real program and record what it does into a trace.

``record(["gzip", "-k", "f"], "gzip.lks")`` runs the program under ``qemu-<arch>`` (QEMU's
user-mode emulator) with Lookaside's TCG plugin, which reports every executed instruction
(a fetch of its bytes) and every load and store with its size; the engine reads that
stream from a pipe while the program runs and writes it into a native trace. Where QEMU is
missing it falls back to ``valgrind --tool=lackey --trace-mem=yes`` (much slower), and says
so. The plugin is C (``tracers/qemu/`` in this package); it is built with the C compiler
(``$CC``, else ``gcc``) on first use, into a per-user cache keyed by a hash of its source.

Environment: ``LOOKASIDE_QEMU`` names the QEMU binary (default ``qemu-<arch>`` of the
program, e.g. ``qemu-x86_64``), ``LOOKASIDE_VALGRIND`` the valgrind binary,
``LOOKASIDE_CACHE_DIR`` the cache (default ``$XDG_CACHE_HOME/lookaside`` or
``~/.cache/lookaside``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform
import resource
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from . import LookasideError, _data_dir, _lookaside
from ._files import is_stream, output_size

#: QEMU's name for the architecture of an ELF ``e_machine``.
ELF_ARCH = {3: "i386", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64"}

VIAS = ("auto", "qemu", "valgrind")

#: zstd level of captured native traces: the fastest, so that compressing keeps up with the
#: program (level 3, the default of `lookaside convert`, makes them ~10% smaller at half the
#: speed; convert later to ship them).
CAPTURE_LEVEL = 1


def _say(msg: str) -> None:
    print(f"lookaside: {msg}", file=sys.stderr)


def plugin_source() -> Path:
    """The directory holding the plugin's C source."""
    return _data_dir("tracers") / "qemu"


def cache_dir() -> Path:
    d = os.environ.get("LOOKASIDE_CACHE_DIR")
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "lookaside"


def build_plugin(cache: Path | None = None, cc: str | None = None,
                 name: str = "lookaside-plugin") -> Path:
    """The QEMU plugin ``name`` (``lookaside-plugin`` for programs, ``lookaside-system-plugin``
    for whole systems) as a shared object, built from the shipped source unless a build of
    that exact source is already in the cache."""
    src = plugin_source()
    files = [src / f"{name}.c", src / "qemu-plugin-v1.h", src / "lookaside-stream.h"]
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    out_dir = (cache or cache_dir()) / "qemu-plugin"
    so = out_dir / f"{name}-{h.hexdigest()[:16]}.so"
    if so.is_file():
        return so
    cc = cc or os.environ.get("CC") or "gcc"
    if not shutil.which(cc):
        raise LookasideError(f"building the QEMU plugin needs a C compiler: '{cc}' not found "
                             "(install gcc, or set CC)")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{so.name}.{os.getpid()}.tmp"
    cmd = [cc, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-I", str(src), "-o",
           str(tmp), str(files[0])]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        lines = [ln for ln in p.stderr.splitlines() if "error" in ln] or p.stderr.splitlines()
        raise LookasideError(f"building the QEMU plugin failed ({shlex.join(cmd)}): "
                             f"{lines[0] if lines else f'exit {p.returncode}'}")
    os.replace(tmp, so)
    return so


def _resolve(argv: list[str]) -> list[str]:
    """``argv`` with the program as a path, and a ``#!`` script as its interpreter's argv."""
    if not argv:
        raise LookasideError("no program given: lookaside trace -o FILE -- PROGRAM ARGS…")
    prog = argv[0]
    path = shutil.which(prog) if "/" not in prog else prog
    if not path or not os.path.isfile(path):
        raise LookasideError(f"{prog}: program not found")
    if not os.access(path, os.X_OK):
        raise LookasideError(f"{prog}: not executable")
    with open(path, "rb") as f:
        head = f.read(256)
    if head.startswith(b"#!"):
        line = head[2:].split(b"\n", 1)[0].decode(errors="replace").strip()
        parts = line.split(None, 1)
        if not parts:
            raise LookasideError(f"{prog}: empty #! line")
        return _resolve([*parts, path, *argv[1:]])
    return [path, *argv[1:]]


def _arch(path: str) -> str:
    with open(path, "rb") as f:
        head = f.read(20)
    if not head.startswith(b"\x7fELF") or len(head) < 20:
        raise LookasideError(f"{path}: not an ELF executable or a #! script")
    arch = ELF_ARCH.get(int.from_bytes(head[18:20], "little"))
    if not arch:
        raise LookasideError(f"{path}: unsupported ELF machine "
                             f"{int.from_bytes(head[18:20], 'little')}")
    return arch


def _qemu(arch: str) -> str | None:
    name = os.environ.get("LOOKASIDE_QEMU") or f"qemu-{arch}"
    return shutil.which(name)


def _version(binary: str) -> str:
    try:
        p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return (p.stdout.strip().splitlines() or [binary])[0]
    except (OSError, subprocess.SubprocessError):
        return binary


def _cpu_model() -> str | None:
    """The host CPU's model name, from /proc/cpuinfo (Linux), if it says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Processor", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return None


def host_metadata(via: str, emulator: str) -> list[tuple[str, str]]:
    """The ``kernel`` and ``machine`` metadata of a user-level capture: the host's kernel
    (which serves the program's system calls under QEMU and valgrind alike), its
    architecture and CPU, and the CPU the program was shown: under QEMU (``via`` "qemu",
    ``emulator`` e.g. ``qemu-x86_64``) the model ``$QEMU_CPU`` names, else QEMU's default;
    under valgrind, valgrind's own CPUID."""
    u = platform.uname()
    machine = u.machine + (f" ({cpu})" if (cpu := _cpu_model()) else "")
    if via == "qemu":
        cpu_env = os.environ.get("QEMU_CPU")
        machine += (f"; the program ran on {emulator}'s CPU model {cpu_env} (QEMU_CPU)"
                    if cpu_env else f"; the program ran on {emulator}'s default CPU model")
    else:
        machine += "; the program saw valgrind's CPUID"
    return [("kernel", f"{u.system} {u.release}"), ("machine", machine)]


class _Tee(threading.Thread):
    """Passes a child's stderr through to ours (each line after `prefix`, nothing if
    `quiet`), keeping its last lines for error messages."""

    def __init__(self, stream, prefix: str = "", quiet: bool = False):
        super().__init__(daemon=True)
        self.stream = stream
        self.prefix = prefix
        self.quiet = quiet
        self.last: deque[str] = deque(maxlen=5)

    def take(self, line: str) -> str | None:
        """The line to pass through and keep, or None to swallow it."""
        return line

    def run(self) -> None:
        with self.stream:
            for raw in self.stream:
                line = self.take(raw.decode(errors="replace"))
                if line is None:
                    continue
                if not self.quiet:
                    sys.stderr.write(f"{self.prefix}{line}")
                if line.strip():
                    self.last.append(line.strip())
        sys.stderr.flush()

    def why(self) -> str:
        return f": {self.last[-1]}" if self.last else ""


def record(argv: list[str], output: str | os.PathLike[str], via: str = "auto", *,
           level: int | None = None, progress: Callable[[int, int], Any] | None = None,
           quiet: bool = False) -> dict[str, Any]:
    """Run ``argv`` and record its references into the trace ``output``; returns a summary
    (events by kind, seconds, rate, how it was captured, the program's exit status).

    ``via`` is ``"qemu"``, ``"valgrind"`` or ``"auto"`` (QEMU when it is installed, else
    valgrind, saying so). Nothing is written at ``output`` unless the capture is complete.
    """
    if via not in VIAS:
        raise LookasideError(f"unknown capture method '{via}' (expected {', '.join(VIAS)})")
    output = os.fspath(output)
    argv = _resolve(list(argv))
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise LookasideError(f"{output}: no such directory: {parent}")
    qemu = None
    if via in ("auto", "qemu"):
        arch = _arch(argv[0])
        qemu = _qemu(arch)
        if qemu is None:
            name = os.environ.get("LOOKASIDE_QEMU") or f"qemu-{arch}"
            if via == "qemu":
                raise LookasideError(f"{name} not found (install qemu-user)")
            if not quiet:
                _say(f"{name} not found: capturing with valgrind lackey instead "
                     "(much slower; install qemu-user for speed)")
    if qemu:
        plugin = build_plugin()
        tool = "qemu"
    else:
        valgrind = shutil.which(os.environ.get("LOOKASIDE_VALGRIND") or "valgrind")
        if valgrind is None:
            raise LookasideError("neither QEMU (qemu-user) nor valgrind is installed: "
                                 "cannot capture")
        tool = "valgrind"
    command = shlex.join(argv)
    r, w = os.pipe()
    try:
        if qemu:
            cmd = [qemu, "-plugin", f"{plugin},fd={w}", *argv]
            binary, stream = qemu, "qemu"
        else:
            cmd = [valgrind, "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}",
                   "--child-silent-after-fork=yes", *argv]
            binary, stream = valgrind, "lackey"
        extra = [("capture", "qemu-user plugin" if qemu else "valgrind lackey"),
                 ("capture_tool", _version(binary)),
                 *host_metadata(tool, os.path.basename(binary)),
                 ("date", datetime.datetime.now(datetime.timezone.utc)
                  .strftime("%Y-%m-%dT%H:%M:%SZ"))]
        t0 = time.perf_counter()
        cpu0 = _cpu()
        try:
            proc = subprocess.Popen(cmd, pass_fds=(w,), stderr=subprocess.PIPE)
        except OSError as e:
            raise LookasideError(f"{binary}: cannot start: {e.strerror}") from None
        os.close(w)
        w = -1
        tee = _Tee(proc.stderr)
        tee.start()
        try:
            raw = _lookaside.record(f"/dev/fd/{r}", stream, output, command, extra,
                                    CAPTURE_LEVEL if level is None else level, progress)
        except BaseException as e:
            # Recording failed first (a bad output, an interrupt): stop the program. Or the
            # program (or QEMU) failed, and the stream shows it: say so.
            # (A stream that ends early means the process is ending: give it a moment.)
            stopped = False
            try:
                proc.wait(timeout=2 if isinstance(e, LookasideError) else 0)
            except subprocess.TimeoutExpired:
                stopped = True
                proc.kill()
            status = _finish(proc, tee)
            if isinstance(e, LookasideError) and status != 0 and not stopped:
                raise LookasideError(f"{os.path.basename(binary)} failed "
                                     f"({_status(status)}){tee.why()}") from None
            if isinstance(e, LookasideError):
                # Name the stream, not the descriptor it was read through.
                raise type(e)(str(e).replace(f"/dev/fd/{r}", f"the {stream} stream")) from None
            raise
        status = _finish(proc, tee)
        seconds = time.perf_counter() - t0
        cpu1 = _cpu()
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)
    out = json.loads(raw)
    if tool == "valgrind" and (status < 0 or (status != 0 and out["events"] == 0)):
        # Lackey's output has no end mark: a killed valgrind leaves a partial trace, and one
        # that could not start the program an empty one.
        if not is_stream(output):
            os.unlink(output)
        raise LookasideError(f"valgrind failed ({_status(status)}){tee.why()}")
    out.update(via=tool, seconds=seconds, command=command, exit_status=status,
               output=output, output_bytes=output_size(output))
    _timings(out, seconds, cpu0, cpu1)
    return out


def _timings(out: dict[str, Any], seconds: float, cpu0: tuple[float, float],
             cpu1: tuple[float, float]) -> None:
    """Adds the rate and the CPU seconds of the program under QEMU (or valgrind) and of
    reading, encoding and compressing its stream here (on two threads; all three run in
    parallel) to a capture's summary."""
    out["rate"] = out["events"] / seconds if seconds > 0 else 0.0
    out["cpu_program"] = cpu1[0] - cpu0[0]
    out["cpu_record"] = cpu1[1] - cpu0[1]


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of finished children, and of this process."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    s = resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime, s.ru_utime + s.ru_stime


def _finish(proc: subprocess.Popen, tee: _Tee) -> int:
    status = proc.wait()
    # A process the program left running in the background may hold its stderr open: its
    # output keeps flowing through while this process lives, but nothing waits for it.
    tee.join(timeout=0.5)
    return status


def _status(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def describe(s: dict[str, Any]) -> list[str]:
    """Lines reporting a capture, as ``lookaside trace`` prints them."""
    ev = s["events"]
    refs = s["fetches"] + s["loads"] + s["stores"]
    lines = [f"{s['output']}: {refs:,} references (fetch {s['fetches']:,}, load {s['loads']:,}, "
             f"store {s['stores']:,}) of `{s['command']}` via {s['via']}"
             + (f", {s['threads']} thread{'s' if s['threads'] != 1 else ''}"
                if s.get("threads") and s["via"] != "qemu-system" else "")
             + (f", {s['syscalls']:,} system calls (marked in the trace)"
                if s.get("syscalls") else ""),
             f"{s['seconds']:.2f} s, {s['rate'] / 1e6:.1f} M references/s recorded; "
             + (f"{s['output_bytes'] / 1e6:.1f} MB, {s['output_bytes'] / max(ev, 1):.2f} "
                "bytes per reference" if s.get("output_bytes") is not None
                else "streamed into a FIFO (nothing stored)"),
             f"CPU: {s['cpu_program']:.2f} s running the program under {s['via']}, "
             f"{s['cpu_record']:.2f} s recording it"]
    if s["via"] == "qemu-system":
        names = sorted({p["name"] for p in s.get("processes", [])})
        lines.insert(1, f"kernel {s['kernel']}: {len(s.get('processes', []))} processes in "
                        f"{len({p['asid'] for p in s.get('processes', [])})} address spaces "
                        f"({', '.join(names)}), {s['switches']:,} address-space switches, "
                        f"{s.get('tlb_flushes', 0):,} TLB flushes; "
                        f"booting took {s['boot_seconds']:.1f} s, recording "
                        f"{s['record_seconds']:.1f} s ({s['record_rate'] / 1e6:.1f} M "
                        "references/s)"
                        + (f"; the tracer's own {sum(s['excluded']['counts']):,} references "
                           "left out" if s.get("excluded") else ""))
    if s.get("ending") == "exec":
        lines.append("the program replaced itself (execve); what it started ran untraced")
    if s["exit_status"] != 0:
        lines.append(f"note: the program ended with {_status(s['exit_status'])}; "
                     "the trace records it up to there")
    return lines
