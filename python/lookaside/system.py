"""Full-system capture: boot a real Linux kernel under QEMU, run a workload inside it, and
record every reference of the kernel and of every process.

``record_system("pipe", "pipe.lks")`` boots Debian's cloud kernel in
``qemu-system-x86_64`` (TCG) with an initramfs built here (static busybox, the
``lookaside_marks`` kernel module, the workload), runs the workload, and powers the guest
off. Lookaside's system plugin records each instruction fetch, load and store with its
virtual and physical address, user/kernel mode and address space; the module tells the
plugin which process runs (see ``tracers/system/lookaside_marks.c``). Recording starts
when the module loads (the boot is not recorded) and ends when it is removed, after the
workload.

What is fetched, once, into the cache (``LOOKASIDE_CACHE_DIR``, as for user-level
capture), with ``apt-get download`` (so apt's package lists must be current): the kernel
image named by ``linux-image-cloud-amd64`` (or ``LOOKASIDE_KERNEL``, a release such as
``6.1.0-56-cloud-amd64``), its headers and kbuild of the same version to build the module,
and ``busybox-static``; for the workloads that compile, the Tiny C Compiler and the C library
it compiles against (see :data:`TOOLCHAIN`). ``LOOKASIDE_QEMU_SYSTEM`` names the QEMU binary
(default ``qemu-system-x86_64``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from . import LookasideError, _data_dir, _lookaside
from .capture import CAPTURE_LEVEL, _cpu, _say, _Tee, _timings, _version, build_plugin, cache_dir

#: The meta package whose dependency names the kernel release used by default.
KERNEL_META = "linux-image-cloud-amd64"
#: Guest RAM. Fetch physical addresses come from the host address of guest RAM, which is one
#: block below 3 GiB on QEMU's pc machine.
RAM_MIB = 512
#: Kernel command line: serial console, no KASLR (stable kernel addresses across runs), no
#: page-table isolation (one CR3 per address space), power off rather than reboot on panic.
APPEND = "console=ttyS0 quiet loglevel=3 panic=-1 nokaslr pti=off"
#: The line the guest's /init prints with the workload's exit status.
EXIT_MARK = "LOOKASIDE-EXIT"
#: The Debian packages of the guest's C toolchain, for workloads that need ``tcc``: the Tiny
#: C Compiler (it compiles, assembles and links by itself), and the C library it runs on and
#: compiles against (run time, start files and headers, and the kernel's headers, which some
#: of glibc's include).
TOOLCHAIN = ("tcc", "libc6", "libc6-dev", "linux-libc-dev")
#: What of the unpacked toolchain goes into the guest (globs relative to its root): tcc, its
#: run-time library and headers, the dynamic loader and the libraries tcc runs on, what a
#: program needs to link against glibc dynamically, and the headers.
TOOLCHAIN_FILES = (
    "usr/bin/tcc",
    "usr/lib/x86_64-linux-gnu/tcc/libtcc1.a",
    "usr/lib/x86_64-linux-gnu/tcc/include/*.h",
    "lib64/ld-linux-x86-64.so.2",
    "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
    "lib/x86_64-linux-gnu/libc.so.6",
    "lib/x86_64-linux-gnu/libm.so.6",
    "lib/x86_64-linux-gnu/libdl.so.2",
    "lib/x86_64-linux-gnu/libpthread.so.0",
    "usr/lib/x86_64-linux-gnu/crt[1in].o",
    "usr/lib/x86_64-linux-gnu/libc.so",
    "usr/lib/x86_64-linux-gnu/libc_nonshared.a",
    "usr/include/**/*",
)


def workloads_dir() -> Path:
    return _data_dir("tracers") / "system" / "workloads"


def workload_names() -> list[str]:
    """The shipped workloads (``tracers/system/workloads/NAME.sh``)."""
    return sorted(p.stem for p in workloads_dir().glob("*.sh"))


def _run(cmd: list[str], what: str, cwd: str | os.PathLike[str] | None = None) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except OSError as e:
        raise LookasideError(f"{what}: cannot run {cmd[0]}: {e.strerror}") from None
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()] or p.stdout.splitlines()
        raise LookasideError(f"{what} failed ({shlex.join(cmd)}): "
                             f"{lines[-1] if lines else f'exit {p.returncode}'}")
    return p.stdout


def _need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise LookasideError(f"{tool} not found (install {package})")
    return path


def _depends(package: str) -> list[str]:
    out = _run(["apt-cache", "depends", package], f"looking up {package}")
    deps = [ln.split(":", 1)[1].strip() for ln in out.splitlines()
            if ln.strip().startswith("Depends:")]
    if not deps:
        raise LookasideError(f"apt knows no dependencies of {package}: is the package "
                             "list current (apt-get update)?")
    return deps


def _candidate(package: str) -> str:
    out = _run(["apt-cache", "policy", package], f"looking up {package}")
    m = re.search(r"Candidate:\s*(\S+)", out)
    if not m or m.group(1) == "(none)":
        raise LookasideError(f"apt has no package {package}: run `apt-get update` (as root) "
                             "if its package lists are stale")
    return m.group(1)


def kernel_release() -> str:
    """The kernel release to boot: ``LOOKASIDE_KERNEL``, else the one the cloud meta package
    names (e.g. ``6.1.0-56-cloud-amd64``)."""
    rel = os.environ.get("LOOKASIDE_KERNEL")
    if rel:
        return rel
    for dep in _depends(KERNEL_META):
        if dep.startswith("linux-image-"):
            return dep[len("linux-image-"):]
    raise LookasideError(f"{KERNEL_META} names no kernel image")


class Assets:
    """The kernel, the headers to build modules for it, and a static busybox, unpacked in
    the cache."""

    def __init__(self, root: Path, release: str):
        self.root = root
        self.release = release
        self.kernel = root / "boot" / f"vmlinuz-{release}"
        self.headers = root / "usr" / "src" / f"linux-headers-{release}"
        self.busybox = root / "bin" / "busybox"
        self.version = (root / "VERSION").read_text().strip()


def assets(cache: Path | None = None, say: Callable[[str], Any] = _say) -> Assets:
    """Downloads and unpacks what a system capture needs, unless the cache has it. Without
    apt (offline, or no package lists), a single release already in the cache serves."""
    base = (cache or cache_dir()) / "system"
    try:
        release = kernel_release()
    except LookasideError:
        cached = sorted(d.name for d in base.glob("*") if (d / "VERSION").is_file())
        if len(cached) != 1:
            raise
        release = cached[0]
        say(f"apt cannot name the kernel: using {release}, the one in the cache")
    root = base / release
    if (root / "VERSION").is_file():
        return Assets(root, release)
    _need("apt-get", "apt")
    image = f"linux-image-{release}"
    version = _candidate(image)
    headers = f"linux-headers-{release}"
    packages = [f"{image}={version}", f"{headers}={version}"]
    for dep in _depends(headers):
        if dep.startswith(("linux-headers-", "linux-kbuild-")):
            packages.append(f"{dep}={version}")
    packages.append("busybox-static")
    say(f"fetching kernel {release} ({version}), its headers and busybox (once)")

    def fix(unpacked: Path) -> None:
        # The headers' one-line Makefile includes the common tree by its installed path.
        mk = unpacked / "usr" / "src" / headers / "Makefile"
        mk.write_text(re.sub(r"include\s+/usr/src/", f"include {root / 'usr' / 'src'}/",
                             mk.read_text()))

    _unpack_packages(root, packages, "the guest's packages", version + "\n", fix)
    return Assets(root, release)


def _unpack_packages(root: Path, packages: list[str], what: str, version: str,
                     fix: Callable[[Path], None] | None = None) -> None:
    """Downloads ``packages`` with ``apt-get download`` and unpacks them as ``root``, whole or
    not at all (unpacked beside it, then renamed), with ``version`` in its VERSION file;
    ``fix`` may patch the unpacked tree first."""
    _need("apt-get", "apt")
    _need("dpkg-deb", "dpkg")
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        try:
            _run(["apt-get", "download", *packages], f"downloading {what}", cwd=tmp)
        except LookasideError as e:
            # Debian removes a package's old versions from its mirrors when it publishes a
            # new one: package lists older than that name files that are gone (404).
            raise LookasideError(f"{e}; apt's package lists may be stale: run `apt-get "
                                 "update` (as root) and try again") from None
        unpacked = Path(tmp) / "root"
        for deb in sorted(Path(tmp).glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(unpacked)], f"unpacking {deb.name}")
        if fix is not None:
            fix(unpacked)
        (unpacked / "VERSION").write_text(version)
        try:
            os.rename(unpacked, root)
        except OSError:
            if not (root / "VERSION").is_file():  # not a concurrent capture that won
                raise


def toolchain(cache: Path | None = None, say: Callable[[str], Any] = _say) -> Path:
    """The guest's C toolchain (:data:`TOOLCHAIN`) unpacked in the cache, downloaded unless
    the cache has these versions; returns its root. Without apt, a single toolchain already
    in the cache serves."""
    base = (cache or cache_dir()) / "system" / "toolchain"
    try:
        pins = [f"{p}={_candidate(p)}" for p in TOOLCHAIN]
    except LookasideError:
        cached = sorted(d for d in base.glob("*") if (d / "VERSION").is_file())
        if len(cached) != 1:
            raise
        say(f"apt cannot name the toolchain's packages: using the one in the cache "
            f"({' '.join((cached[0] / 'VERSION').read_text().split())})")
        return cached[0]
    root = base / hashlib.sha256(" ".join(pins).encode()).hexdigest()[:16]
    if (root / "VERSION").is_file():
        return root
    say(f"fetching the guest's C toolchain ({', '.join(pins)}) (once)")
    _unpack_packages(root, pins, "the guest's toolchain", "\n".join(pins) + "\n")
    return root


def toolchain_files(root: Path) -> list[tuple[str, Path]]:
    """The guest paths and host files of the toolchain's part in the guest
    (:data:`TOOLCHAIN_FILES`)."""
    out = []
    for pattern in TOOLCHAIN_FILES:
        found = sorted(p for p in root.glob(pattern)
                       if p.is_symlink() or p.is_file())
        if not found:
            raise LookasideError(f"the guest's toolchain in {root} has no {pattern}")
        out += [(str(p.relative_to(root)), p) for p in found]
    return out


def build_module(a: Assets, cache: Path | None = None) -> Path:
    """The marker module for this kernel, built unless the cache has a build of this source."""
    src = _data_dir("tracers") / "system"
    files = [src / "lookaside_marks.c", src / "Kbuild"]
    h = hashlib.sha256(a.release.encode())
    for f in files:
        h.update(f.read_bytes())
    out = (cache or cache_dir()) / "system" / a.release / f"lookaside_marks-{h.hexdigest()[:16]}.ko"
    if out.is_file():
        return out
    _need("make", "make")
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            shutil.copy(f, tmp)
        _run(["make", "-C", str(a.headers), f"M={tmp}", "modules"],
             f"building the marker module for {a.release}")
        tmp_ko = out.with_name(f".{out.name}.{os.getpid()}")
        _run(["strip", "--strip-debug", "-o", str(tmp_ko), str(Path(tmp) / "lookaside_marks.ko")],
             "stripping the marker module")
        os.replace(tmp_ko, out)
    return out


class Cpio:
    """An initramfs being written: the kernel's "newc" cpio format, uncompressed (nothing to
    decompress in the emulated guest)."""

    def __init__(self, f):
        self.f = f
        self.ino = 1
        self.seen: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)):
        name = name.lstrip("/")
        if name in self.seen:
            return
        self.seen.add(name)
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
                  len(name) + 1, 0]
        self.ino += 1
        head = b"070701" + b"".join(b"%08x" % v for v in fields)
        self.f.write(head + name.encode() + b"\0")
        self.f.write(b"\0" * (-(len(head) + len(name) + 1) % 4))
        self.f.write(data)
        self.f.write(b"\0" * (-len(data) % 4))

    def dir(self, name: str) -> None:
        parts = name.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self._entry("/".join(parts[:i]), stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        parent = os.path.dirname(name.strip("/"))
        if parent:
            self.dir(parent)
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name: str, target: str) -> None:
        parent = os.path.dirname(name.strip("/"))
        if parent:
            self.dir(parent)
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def copy(self, name: str, path: Path) -> None:
        """The host file (or symbolic link) at ``path``, as ``name``."""
        if path.is_symlink():
            self.symlink(name, os.readlink(path))
        else:
            self.file(name, path.read_bytes(), path.stat().st_mode & 0o777)

    def device(self, name: str, major: int, minor: int) -> None:
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def close(self) -> None:
        self._entry("TRAILER!!!", 0)


def _libraries(program: str) -> list[str]:
    """The shared libraries (and loader) a dynamically linked program needs, by ldd."""
    p = subprocess.run(["ldd", program], capture_output=True, text=True)
    if p.returncode != 0:  # static, or not an ELF executable ldd understands
        return []
    libs = []
    for ln in p.stdout.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", ln)
        if m:
            libs.append(m.group(1))
    return libs


INIT = """#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox --install -s /bin
export PATH=/workload/bin:/bin:/usr/bin HOME=/workload
cd /workload
if insmod /lookaside_marks.ko; then
  sh /workload/run.sh
  status=$?
  rmmod lookaside_marks
else
  status=255
fi
echo "{mark} $status"
poweroff -f
"""


def build_initramfs(path: Path, a: Assets, module: Path, script: str,
                    programs: list[str], files: list[str],
                    extra: list[tuple[str, Path]] = ()) -> None:
    """Writes the guest's initramfs: busybox, /init, the module, /workload/run.sh (the workload),
    host programs with their libraries in /workload/bin, data files in /workload, and
    ``extra`` files at their guest paths (a workload's sources, the toolchain)."""
    with open(path, "wb") as f:
        c = Cpio(f)
        for d in ("bin", "dev", "proc", "sys", "tmp", "workload/bin"):
            c.dir(d)
        c.device("dev/console", 5, 1)
        c.device("dev/null", 1, 3)
        c.file("bin/busybox", a.busybox.read_bytes(), 0o755)
        c.file("init", INIT.format(mark=EXIT_MARK).encode(), 0o755)
        c.file("lookaside_marks.ko", module.read_bytes())
        c.file("workload/run.sh", script.encode(), 0o755)
        for prog in programs:
            c.file(f"workload/bin/{os.path.basename(prog)}", Path(prog).read_bytes(), 0o755)
            for lib in _libraries(prog):
                c.file(lib, Path(lib).read_bytes(), 0o755)
        for fpath in files:
            p = Path(fpath)
            if not p.is_file():
                raise LookasideError(f"{fpath}: no such file to copy into the guest")
            c.file(f"workload/{p.name}", p.read_bytes(), 0o644)
        for name, host in extra:
            c.copy(name, host)
        c.close()


class Workload(NamedTuple):
    """A shipped workload made ready for the guest."""

    #: The shell script the guest runs (/workload/run.sh).
    script: str
    #: Host programs built for it (static), copied into /workload/bin.
    programs: list[str]
    #: Other files it needs, as (guest path, host file): source directories, the toolchain.
    extra: list[tuple[str, Path]]


def _needs(script: str) -> list[str]:
    """The words of a workload script's ``# needs:`` lines."""
    return [w for m in re.finditer(r"^#\s*needs:(.*)$", script, re.M) for w in m.group(1).split()]


def _workload(name: str, cache: Path, say: Callable[[str], Any] = _say) -> Workload:
    """A shipped workload: its script, the programs it needs, built from their C source
    (``NAME.c`` beside it) with ``gcc -static``, and what its ``# needs:`` line names: ``tcc``,
    the guest's C toolchain (:func:`toolchain`), or a directory beside it, copied into
    /workload."""
    d = workloads_dir()
    path = d / f"{name}.sh"
    if not path.is_file():
        raise LookasideError(f"unknown workload '{name}' (shipped: "
                             f"{', '.join(workload_names())})")
    script = path.read_text()
    programs = []
    for src in sorted(d.glob("*.c")):
        h = hashlib.sha256(src.read_bytes()).hexdigest()[:16]
        exe = cache / "system" / "workloads" / f"{src.stem}-{h}" / src.stem
        if not exe.is_file():
            exe.parent.mkdir(parents=True, exist_ok=True)
            cc = os.environ.get("CC") or "gcc"
            _need(cc, "gcc")
            tmp = exe.with_name(f".{src.stem}.{os.getpid()}")
            _run([cc, "-O2", "-static", "-o", str(tmp), str(src)],
                 f"building the workload program {src.name}")
            os.replace(tmp, exe)
        programs.append(str(exe))
    extra: list[tuple[str, Path]] = []
    for need in _needs(script):
        if need == "tcc":
            extra += toolchain_files(toolchain(cache, say))
        elif (d / need).is_dir():
            extra += [(f"workload/{need}/{p.name}", p)
                      for p in sorted((d / need).iterdir()) if p.is_file()]
        else:
            raise LookasideError(f"workload '{name}' needs '{need}', which is neither tcc nor "
                                 "a directory beside it")
    return Workload(script, programs, extra)


class _Console(_Tee):
    """The guest's console, passed through like a program's stderr, less the line that
    carries the workload's exit status."""

    def __init__(self, stream, quiet: bool):
        super().__init__(stream, prefix="guest| ", quiet=quiet)
        self.status: int | None = None

    def take(self, line: str) -> str | None:
        line = line.replace("\r", "")
        m = re.match(rf"{EXIT_MARK} (\d+)", line.strip())
        if m:
            self.status = int(m.group(1))
            return None
        return line


def record_system(workload: str | None, output: str | os.PathLike[str], *,
                  command: list[str] | None = None, files: list[str] = (),
                  level: int | None = None,
                  progress: Callable[[int, int], Any] | None = None,
                  quiet: bool = False) -> dict[str, Any]:
    """Boot the guest, run ``workload`` (a shipped one) or ``command`` (a host program and
    its arguments, copied into the guest with its libraries), and record it into
    ``output``; returns a summary like :func:`lookaside.capture.record`'s, with the kernel,
    the processes seen and the workload's exit status. Nothing is written at ``output``
    unless the capture is complete."""
    if (workload is None) == (not command):
        raise LookasideError("give a shipped workload or a command to run in the guest")
    output = os.fspath(output)
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise LookasideError(f"{output}: no such directory: {parent}")
    qemu = shutil.which(os.environ.get("LOOKASIDE_QEMU_SYSTEM") or "qemu-system-x86_64")
    if not qemu:
        raise LookasideError("qemu-system-x86_64 not found (install qemu-system-x86)")
    cache = cache_dir()
    a = assets(cache, (lambda m: None) if quiet else _say)
    module = build_module(a, cache)
    plugin = build_plugin(cache, name="lookaside-system-plugin")
    if workload is not None:
        script, programs, guest_files = _workload(workload, cache,
                                                  (lambda m: None) if quiet else _say)
        described = f"workload {workload}"
    else:
        prog = command[0]
        path = shutil.which(prog) if "/" not in prog else prog
        if not path or not os.path.isfile(path):
            raise LookasideError(f"{prog}: program not found")
        programs, guest_files = [path], []
        script = shlex.join([os.path.basename(path), *command[1:]]) + "\n"
        described = shlex.join(command)
    if not quiet:
        _say(f"booting Linux {a.release} under QEMU (TCG); recording starts when "
             f"the {described} does")
    with tempfile.TemporaryDirectory() as tmp:
        initrd = Path(tmp) / "initramfs.cpio"
        build_initramfs(initrd, a, module, script, programs, list(files), guest_files)
        r, w = os.pipe()
        cmd = [qemu, "-nodefaults", "-display", "none", "-no-reboot", "-accel", "tcg",
               "-cpu", "qemu64", "-smp", "1", "-m", str(RAM_MIB), "-serial", "stdio",
               "-kernel", str(a.kernel), "-initrd", str(initrd), "-append", APPEND,
               "-plugin", f"{plugin},fd={w},ram={RAM_MIB << 20}"]
        extra = [("capture", "qemu-system plugin"), ("capture_tool", _version(qemu)),
                 ("kernel", f"{a.release} ({a.version})"),
                 ("machine", f"qemu-system-x86_64 -cpu qemu64 -smp 1 -m {RAM_MIB}M (TCG)"),
                 ("workload", described),
                 ("date", datetime.datetime.now(datetime.timezone.utc)
                  .strftime("%Y-%m-%dT%H:%M:%SZ"))]
        t0 = time.perf_counter()
        first: list[float] = []

        def tick(events: int, nbytes: int) -> Any:
            # The first references arrive when the module loads: the boot is over.
            if events and not first:
                first.append(time.perf_counter())
            return progress(events, nbytes) if progress else None

        cpu0 = _cpu()
        try:
            try:
                proc = subprocess.Popen(cmd, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            except OSError as e:
                raise LookasideError(f"{qemu}: cannot start: {e.strerror}") from None
            os.close(w)
            w = -1
            console = _Console(proc.stdout, quiet)
            console.start()
            try:
                raw = _lookaside.record(f"/dev/fd/{r}", "qemu", output,
                                        f"lookaside trace --system: {described}", extra,
                                        CAPTURE_LEVEL if level is None else level, tick)
            except BaseException as e:
                try:
                    proc.wait(timeout=5 if isinstance(e, LookasideError) else 0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                console.join(timeout=1)
                if isinstance(e, LookasideError):
                    raise LookasideError(
                        "the guest stopped before its workload finished "
                        f"({str(e).replace(f'/dev/fd/{r}', 'the capture stream')})"
                        f"{console.why()}") from None
                raise
            status = proc.wait()
            console.join(timeout=1)
            seconds = time.perf_counter() - t0
            cpu1 = _cpu()
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
    out = json.loads(raw)
    if status != 0:
        os.unlink(output)
        raise LookasideError(f"qemu-system-x86_64 failed (exit status {status})"
                             f"{console.why()}")
    out.update(via="qemu-system", seconds=seconds, command=described,
               exit_status=console.status if console.status is not None else -1,
               output=output, output_bytes=os.path.getsize(output), kernel=a.release)
    _timings(out, seconds, cpu0, cpu1)
    # Progress comes every few million events: the boot's end is known to within those.
    out["boot_seconds"] = (first[0] if first else t0 + seconds) - t0
    out["record_seconds"] = seconds - out["boot_seconds"]
    refs = out["fetches"] + out["loads"] + out["stores"]
    out["record_rate"] = refs / out["record_seconds"] if out["record_seconds"] > 0 else 0.0
    return out
