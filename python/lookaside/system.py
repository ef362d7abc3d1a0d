"""Full-system capture: boot a real Linux kernel under QEMU, run a workload inside it, and
record every reference of the kernel and of every process.

``record_system("pipe", "pipe.lks")`` boots Debian's cloud kernel in
``qemu-system-x86_64`` (TCG) with an initramfs built here (static busybox, the
``lookaside_marks`` kernel module, the workload), runs the workload, and powers the guest
off. Lookaside's system plugin records each instruction fetch, load and store with its
virtual and physical address, user/kernel mode and address space; the module tells the
plugin which process runs (see ``tracers/system/lookaside_marks.c``), and the plugin
leaves the module's own code out. Recording spans the workload: /init starts it after
loading the module and stops it before removing it (the boot is not recorded). Time in the
guest is virtual (:data:`QEMU_CLOCK`), so the same inputs give the same trace. A host
program runs by its absolute path with what it needs (:class:`Guest`,
:func:`guest_command`), never a busybox applet of the same name.

What is fetched, once, into the cache (``LOOKASIDE_CACHE_DIR``, as for user-level
capture), with ``apt-get download`` (so apt's package lists must be current): the kernel
image named by ``linux-image-cloud-amd64`` (or ``--kernel``/``LOOKASIDE_KERNEL``, a release
such as ``6.1.0-56-cloud-amd64``, optionally ``=VERSION``: :func:`assets`), its headers and
kbuild of the same version to build the module,
and ``busybox-static``; for the workloads that compile, the Tiny C Compiler and the C library
it compiles against (see :data:`TOOLCHAIN`); for those that name Debian packages
(``# needs: pkg:NAME``), those packages and the libraries they depend on
(:func:`debian_packages`). ``LOOKASIDE_QEMU_SYSTEM`` names the QEMU binary
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
from ._files import is_stream, output_size
from .capture import CAPTURE_LEVEL, _cpu, _say, _Tee, _timings, _version, build_plugin, cache_dir

#: The meta package whose dependency names the kernel release used by default.
KERNEL_META = "linux-image-cloud-amd64"
#: Guest RAM. Fetch physical addresses come from the host address of guest RAM, which is one
#: block below 3 GiB on QEMU's pc machine.
RAM_MIB = 512
#: Kernel command line: serial console, no KASLR (stable kernel addresses across runs), no
#: page-table isolation (one CR3 per address space), power off rather than reboot on panic;
#: the crypto self-tests skipped (0.7 s of the boot, nothing after it); the CPU's RDRAND
#: trusted to seed the random-number generator (see :data:`CPU`), the boot loader not (QEMU
#: hands none; nothing from the host counts).
APPEND = ("console=ttyS0 quiet loglevel=3 panic=-1 nokaslr pti=off cryptomgr.notests "
          "random.trust_cpu=on random.trust_bootloader=off")
#: The guest's CPU: QEMU's qemu64 with RDRAND, which the kernel trusts (as Debian's kernels
#: do by default) to seed its random-number generator at boot. Without it the generator is
#: not ready when the workload starts, and the first read of /dev/urandom (sqlite3 makes
#: one) spins ~1.5 G references of the kernel's jitter-entropy loop. QEMU's RDRAND draws
#: from ``-seed`` (:data:`QEMU_CLOCK`), so the numbers are the same every run.
CPU = "qemu64,+rdrand"
#: What makes a capture repeatable, bit for bit: time in the guest is virtual, counted in
#: instructions (1 ns each, ``-icount shift=0``) and jumping ahead when the guest idles
#: (``sleep=off``) instead of following the host's clock; the real-time clock starts at a
#: fixed date and runs on that virtual time; QEMU's random numbers for the guest (the seed
#: it hands a ``-kernel`` boot, RDRAND) come from a fixed seed. Then the same kernel,
#: initramfs and QEMU give the same event stream every run (the tests check it).
#: The guest's date when it boots, in seconds since 1970 (2000-01-01T00:00:00Z): its clock
#: starts there, and every file of the initramfs bears it (not 0, which gzip, for one, warns
#: about: its format keeps 0 for "no time").
GUEST_EPOCH = 946684800
QEMU_CLOCK = ("-icount", "shift=0,sleep=off", "-rtc",
              "base=" + datetime.datetime.fromtimestamp(GUEST_EPOCH, datetime.timezone.utc)
              .strftime("%Y-%m-%dT%H:%M:%S") + ",clock=vm", "-seed", "1")
#: Most CPUs a guest has (``--cpus``): its vCPUs take turns on one host thread, so each one
#: more slows the capture.
MAX_CPUS = 32
#: How a guest of several CPUs runs: its vCPUs take turns on one host thread (so that their
#: references come in the order they ran), with the real-time clock and random numbers of
#: :data:`QEMU_CLOCK` but *without* its instruction counting, which cannot run an x86 guest
#: of several CPUs: QEMU 7.2's ``-icount`` lets a vCPU spinning for another keep its turn
#: for as long as its time budget lasts, and the kernel never finishes bringing up its
#: second CPU. So time in such a guest follows the host's clock, timer interrupts land
#: where the host's timing puts them, and two captures of the same inputs differ (the
#: trace's metadata says so, ``repeatable``).
SMP_ACCEL, SMP_CLOCK = "tcg,thread=single", QEMU_CLOCK[2:]
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


#: The user-level file server of ``--fs user`` and ``user2``: bindfs, a passthrough FUSE
#: server (every file operation of the workload on /workload becomes a request the kernel's
#: FUSE module sends to it, which it makes on the directory underneath); its package brings
#: libfuse2.
FILE_SERVER = "bindfs"
#: Where the file service runs (``--fs``): in the kernel; in one user-level server (Mach's UX
#: server); through two stacked ones (AFS's cache manager in front of it).
FILE_SERVICES = {"kernel": 0, "user": 1, "user2": 2}


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
        return parse_kernel(rel)[0]
    for dep in _depends(KERNEL_META):
        if dep.startswith("linux-image-"):
            return dep[len("linux-image-"):]
    raise LookasideError(f"{KERNEL_META} names no kernel image")


def parse_kernel(spec: str) -> tuple[str, str | None]:
    """A kernel as ``--kernel`` names it: ``RELEASE`` or ``RELEASE=VERSION`` (a trace's
    ``kernel_package`` metadata, with or without its ``linux-image-``), or
    ``RELEASE (VERSION)`` (its ``kernel``)."""
    m = re.fullmatch(r"\s*(?:linux-image-)?([0-9][\w.+~-]*)\s*(?:=\s*(\S+)|\((\S+)\))?\s*",
                     spec)
    if not m:
        raise LookasideError(f"kernel '{spec}': expected RELEASE or RELEASE=VERSION, as a "
                             "trace's kernel_package metadata gives it (e.g. "
                             "6.1.0-56-cloud-amd64=6.1.192-2)")
    return m.group(1), m.group(2) or m.group(3)


def _versions(package: str) -> list[str]:
    """The versions of ``package`` that apt can fetch (its version table)."""
    out = _run(["apt-cache", "policy", package], f"looking up {package}")
    table = out.split("Version table:", 1)[1] if "Version table:" in out else ""
    return re.findall(r"^\s+(?:\*\*\*\s+)?(\S+)\s+-?\d+\s*$", table, re.M)


def _kbuild_version(package: str, version: str) -> str:
    """The version of the kernel's build tools (``linux-kbuild-*``, shared by every flavour
    of a release) to build a module for the kernel ``version``: that version, or else the
    newest apt offers of the same upstream release (the headers ask for ``>=``: Debian's
    security archive replaces the build tools' package when any flavour is rebuilt, before
    or without a new image of this one)."""
    offered = _versions(package)
    if version in offered:
        return version
    upstream = version.rsplit("-", 1)[0]
    same = [v for v in offered if v.rsplit("-", 1)[0] == upstream]
    if not same:
        raise LookasideError(
            f"{package} {version} cannot be fetched: apt offers "
            f"{', '.join(offered) or 'no version of it'}, none of release {upstream} (run "
            "`apt-get update` if apt's lists are stale)")
    return same[0]


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

    @property
    def package(self) -> str:
        """The kernel's Debian package as apt pins it: ``linux-image-RELEASE=VERSION``."""
        return f"linux-image-{self.release}={self.version}"


def assets(cache: Path | None = None, say: Callable[[str], Any] = _say,
           kernel: str | None = None) -> Assets:
    """Downloads and unpacks what a system capture needs, unless the cache has it. ``kernel``
    (or ``LOOKASIDE_KERNEL``) names the kernel (see :func:`parse_kernel`); with a version,
    that exact version or an error saying what apt and the cache have instead (Debian's
    mirrors keep only the current kernel). Without a kernel named, the one Debian's cloud
    meta package names; without apt (offline, or no package lists), a single release already
    in the cache serves."""
    base = (cache or cache_dir()) / "system"
    spec = kernel or os.environ.get("LOOKASIDE_KERNEL")
    release, want = parse_kernel(spec) if spec else (None, None)
    if release is None:
        try:
            release = kernel_release()
        except LookasideError:
            cached = sorted(d.name for d in base.glob("*") if (d / "VERSION").is_file())
            if len(cached) != 1:
                raise
            release = cached[0].split("=")[0]
            say(f"apt cannot name the kernel: using {release}, the one in the cache")
            return Assets(base / cached[0], release)
    root = base / release
    have = (root / "VERSION").read_text().strip() if (root / "VERSION").is_file() else None
    if have is not None and want in (None, have):
        return Assets(root, release)
    if want is not None:
        # Another version of the same release (a rebuild) lives beside it.
        root = base / f"{release}={want}"
        if (root / "VERSION").is_file():
            return Assets(root, release)
    _need("apt-get", "apt")
    image = f"linux-image-{release}"
    named = f"kernel {release}" + (f" {want}" if want else "")
    cached = ", ".join(sorted(f"{d.name} ({(d / 'VERSION').read_text().strip()})"
                              for d in base.glob("*") if (d / "VERSION").is_file())) or "none"
    try:
        offered = _versions(image)
    except LookasideError as e:
        raise LookasideError(f"{named} cannot be fetched ({e}); kernels in the cache: "
                             f"{cached}") from None
    if not offered or (want is not None and want not in offered):
        raise LookasideError(
            f"{named} cannot be fetched: apt offers {', '.join(offered) or 'no version of it'}"
            f"; kernels in the cache: {cached}. Debian's mirrors keep only the current "
            "kernel: a trace made with another cannot be repeated on the same kernel unless "
            "that kernel is still in the cache (run `apt-get update` if apt's lists are "
            "stale)")
    version = want or _candidate(image)
    headers = f"linux-headers-{release}"
    packages = [f"{image}={version}", f"{headers}={version}"]
    for dep in _depends(headers):
        if dep.startswith("linux-headers-"):
            packages.append(f"{dep}={version}")
        elif dep.startswith("linux-kbuild-"):
            packages.append(f"{dep}={_kbuild_version(dep, version)}")
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


#: Where a workload's Debian packages' programs lie in a package (and in the guest).
PROGRAM_DIRS = ("bin", "sbin", "usr/bin", "usr/sbin")
#: Where the guest's dynamic loader looks for shared libraries (Debian's multiarch paths).
LIBRARY_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib")


def _sections(out: str, key: str) -> dict[str, str]:
    """apt-cache's output for several packages, by package: a section starts at a line
    ``NAME`` or ``NAME:`` at the margin (``depends``, ``policy``), or ``Package: NAME``
    (``show``, with ``key`` "Package: ")."""
    parts: dict[str, str] = {}
    name = None
    for ln in out.splitlines():
        head = (ln[len(key):].strip() if key and ln.startswith(key)
                else ln.rstrip(":").strip() if not key and ln[:1] not in ("", " ") else None)
        if head is not None:
            name = head
            parts.setdefault(name, "")
        elif name is not None:
            parts[name] += ln + "\n"
    return parts


def package_closure(names: list[str]) -> list[str]:
    """``names`` and what they depend on (Depends and Pre-Depends, recursively; the first of
    alternatives), pinned at apt's candidate versions (``name=version``), in order of
    discovery. Essential packages other than those named are left out with what only they
    depend on: every Debian system has them, so packages name them for their maintainer
    scripts (dpkg, tar), not for their programs, which need only libraries. Three
    apt-cache calls in all (each loads apt's cache: a second or two)."""
    graph = _sections(_run(["apt-cache", "depends", "--recurse", "--important", *names],
                           "looking up dependencies"), "")
    deps: dict[str, list[str]] = {}
    for name, body in graph.items():
        deps[name] = []
        alternative = False
        for ln in body.splitlines():
            m = re.match(r"\s*(\|?)(?:Pre)?Depends:\s*(\S+)", ln)
            if m:
                if not alternative and not m.group(2).startswith("<"):
                    deps[name].append(m.group(2))
                alternative = m.group(1) == "|"
    show = _sections(_run(["apt-cache", "show", "--no-all-versions",
                           *[n for n in deps if n not in names]], "looking up packages"),
                     "Package: ")
    essential = {n for n, body in show.items()
                 if re.search(r"^Essential:\s*yes", body, re.M | re.I)}
    order = list(dict.fromkeys(names))
    for name in order:  # grows as it goes: breadth first
        order += [d for d in deps.get(name, []) if d not in order and d not in essential]
    policy = _sections(_run(["apt-cache", "policy", *order], "looking up packages"), "")
    pins = []
    for name in order:
        m = re.search(r"Candidate:\s*(\S+)", policy.get(name, ""))
        if not m or m.group(1) == "(none)":
            raise LookasideError(f"apt has no package {name}: run `apt-get update` (as root) "
                                 "if its package lists are stale")
        pins.append(f"{name}={m.group(1)}")
    return pins


def debian_packages(names: list[str], cache: Path | None = None,
                    say: Callable[[str], Any] = _say) -> list[Path]:
    """The Debian packages ``names`` and the libraries they depend on
    (:func:`package_closure`), each unpacked in the cache under its pinned version
    (``system/packages/NAME=VERSION``, shared by every workload that needs it) and downloaded
    with ``apt-get download`` unless the cache has it; returns their roots, the named
    packages first. Each named package's root keeps its closure (``CLOSURE``), resolved
    once per version of it: the same package gets the same libraries until it changes, and,
    without apt, a single cached version of each serves with the libraries it was fetched
    with."""
    base = (cache or cache_dir()) / "system" / "packages"
    closures: dict[str, list[str]] = {}
    try:
        for name in names:
            closure = base / f"{name}={_candidate(name)}" / "CLOSURE"
            closures[name] = (closure.read_text().split() if closure.is_file()
                              else package_closure([name]))
    except LookasideError:
        for name in names:
            cached = sorted(d for d in base.glob(f"{name}=*") if (d / "CLOSURE").is_file())
            if len(cached) != 1:
                raise
            say(f"apt cannot name {name}'s version: using the one in the cache "
                f"({cached[0].name})")
            closures[name] = (cached[0] / "CLOSURE").read_text().split()
    pins = list(dict.fromkeys(p for c in closures.values() for p in c))
    missing = [p for p in pins if not (base / p / "VERSION").is_file()]
    if missing:
        say(f"fetching Debian packages for the guest ({', '.join(missing)}) (once)")
    for pin in missing:
        _unpack_packages(base / pin, [pin], f"the guest's package {pin}", pin + "\n")
    for closure in closures.values():
        f = base / closure[0] / "CLOSURE"
        if not f.is_file():
            tmp = f.with_name(f".CLOSURE.{os.getpid()}")
            tmp.write_text("\n".join(closure) + "\n")
            os.replace(tmp, f)
    return [base / p for p in pins]


def _elf_needs(path: Path) -> tuple[list[str], str | None]:
    """The shared libraries (``DT_NEEDED``) and the program interpreter of an ELF file."""
    _need("readelf", "binutils")
    out = _run(["readelf", "-dlW", str(path)], f"reading {path}")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    m = re.search(r"\[Requesting program interpreter: ([^\]]+)\]", out)
    return needed, m.group(1) if m else None


def _in_roots(roots: list[Path], path: str) -> tuple[Path, str] | None:
    """The file at ``path`` (absolute, as the guest sees it) in the unpacked packages, and
    the path it has in its package: under merged /usr a package may ship /lib/x or
    /usr/lib/x."""
    rel = path.lstrip("/")
    names = [rel, rel[4:] if rel.startswith("usr/") else "usr/" + rel]
    for root in roots:
        for n in names:
            p = root / n
            if p.is_symlink() or p.exists():
                return root, n
    return None


def package_files(roots: list[Path], names: list[str]) -> list[tuple[str, Path]]:
    """The guest paths and host files of the named packages' programs (every file in
    :data:`PROGRAM_DIRS` of the roots of ``names``) and of what they need to run, found
    among ``roots``: each ELF file's shared libraries and interpreter, recursively, with
    the symbolic links that name them. A library none of the packages has is an error."""
    out: dict[str, Path] = {}
    todo: list[tuple[Path, str]] = []

    def add(root: Path, rel: str) -> None:
        while rel not in out:
            p = root / rel
            out[rel] = p
            if not p.is_symlink():
                todo.append((root, rel))
                return
            target = os.readlink(p)
            path = target if target.startswith("/") else os.path.normpath(
                os.path.join("/", os.path.dirname(rel), target))
            found = _in_roots(roots, path)
            if found is None:
                raise LookasideError(f"/{rel} links to {target}, which none of the guest's "
                                     "packages has")
            root, rel = found

    heads = [r for r in roots if r.name.split("=", 1)[0] in names]
    for root in heads:
        for d in PROGRAM_DIRS:
            if (root / d).is_dir() and not (root / d).is_symlink():
                for p in sorted((root / d).iterdir()):
                    add(root, str(p.relative_to(root)))
    while todo:
        root, rel = todo.pop(0)
        if not _is_elf(root / rel):
            continue
        needed, interp = _elf_needs(root / rel)
        wanted = [interp] if interp else []
        for lib in needed:
            where = next((f"/{d}/{lib}" for d in LIBRARY_DIRS
                          if _in_roots(roots, f"/{d}/{lib}")), None)
            if where is None:
                raise LookasideError(f"/{rel} needs {lib}, which none of the guest's "
                                     f"packages has ({', '.join(r.name for r in roots)})")
            wanted.append(where)
        for path in wanted:
            found = _in_roots(roots, path)
            if found is None:
                raise LookasideError(f"/{rel} needs {path}, which none of the guest's "
                                     "packages has")
            add(*found)
    return [(rel, p) for rel, p in out.items()]


def file_server_files(a: Assets, cache: Path | None = None,
                      say: Callable[[str], Any] = _say) -> tuple[list[tuple[str, Path]], list[str]]:
    """The guest paths and host files of the user-level file service — bindfs
    (:data:`FILE_SERVER`) with what it runs on, from Debian's packages
    (:func:`debian_packages`, :func:`package_files`), and the kernel's FUSE module from the
    kernel package — and the packages' pins."""
    fuse = a.root / "lib" / "modules" / a.release / "kernel" / "fs" / "fuse" / "fuse.ko"
    if not fuse.is_file():
        raise LookasideError(f"the user-level file service needs {fuse}, which is missing")
    roots = debian_packages([FILE_SERVER], cache, say)
    files = package_files(roots, [FILE_SERVER])
    return [(str(fuse.relative_to(a.root)), fuse), *files], [r.name for r in roots]


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


def build_module(a: Assets, tlb_flushes: bool = True) -> Path:
    """The marker module for this kernel, built unless its cached tree (beside the kernel)
    has a build of this source; with ``tlb_flushes``, with its probes of the kernel's TLB
    flushes (``LK_TLB_FLUSHES``: shootdowns and a CPU's own), which every capture has now;
    without, the module that made the traces stored before them. The build directory's name is
    mapped away (``-ffile-prefix-map``): the linker derives the module's ELF build-id from
    everything it links, debug information naming that (temporary) directory included, so
    that each host would otherwise build other bytes and give the initramfs another hash."""
    src = _data_dir("tracers") / "system"
    files = [src / "lookaside_marks.c", src / "Kbuild"]
    flags = " -DLK_TLB_FLUSHES" if tlb_flushes else ""
    h = hashlib.sha256(a.release.encode() + b" prefix-mapped" + flags.encode())
    for f in files:
        h.update(f.read_bytes())
    out = a.root / f"lookaside_marks-{h.hexdigest()[:16]}.ko"
    if out.is_file():
        return out
    _need("make", "make")
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            shutil.copy(f, tmp)
        _run(["make", "-C", str(a.headers), f"M={tmp}",
              f"KCFLAGS=-ffile-prefix-map={tmp}=.{flags}", "modules"],
             f"building the marker module for {a.release}")
        tmp_ko = out.with_name(f".{out.name}.{os.getpid()}")
        _run(["strip", "--strip-debug", "-o", str(tmp_ko), str(Path(tmp) / "lookaside_marks.ko")],
             "stripping the marker module")
        os.replace(tmp_ko, out)
    return out


class Cpio:
    """An initramfs being written: the kernel's "newc" cpio format, uncompressed (nothing to
    decompress in the emulated guest); every entry owned by root, dated :data:`GUEST_EPOCH`."""

    def __init__(self, f):
        self.f = f
        self.ino = 1
        self.seen: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)):
        name = name.lstrip("/")
        if name in self.seen:
            return
        self.seen.add(name)
        fields = [self.ino, mode, 0, 0, 1, GUEST_EPOCH, len(data), 0, 0, rdev[0], rdev[1],
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
    """The shared libraries (and loader) a dynamically linked program or library needs, by
    ldd; one it cannot find is an error."""
    p = subprocess.run(["ldd", program], capture_output=True, text=True)
    if p.returncode != 0:  # static, or not an ELF executable ldd understands
        return []
    libs = []
    for ln in p.stdout.splitlines():
        if "=> not found" in ln:
            raise LookasideError(f"{program} needs {ln.split()[0]}, which ldd cannot find on "
                                 "this host")
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", ln)
        if m:
            libs.append(m.group(1))
    return libs


#: Where busybox lives in the guest, with its applets linked in /lookaside/bin: the tools of
#: /init and of the shipped workloads' scripts. It is on no host program's PATH: busybox's
#: shell runs its own applet for a command named bare whenever it has one (gzip, xz, sort…),
#: whatever PATH says, so a host program runs by its absolute path, and what it runs by name
#: is found on PATH among the real programs put into the guest, or not at all.
TOOLS = "lookaside"
#: Top-level directories that are links into /usr in the guest, as on Debian since 12 (merged
#: /usr), so that every host file keeps its path under either of its names.
MERGED = ("bin", "sbin", "lib", "lib64")
#: PATH of a host program in the guest (Debian's for root).
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: PATH of the shipped workloads' scripts: their programs, busybox's applets, the toolchain.
WORKLOAD_PATH = f"/workload/bin:/{TOOLS}/bin:/usr/bin"
#: Most bytes of files put into the guest: its RAM (:data:`RAM_MIB`) holds the initramfs and
#: its unpacked copy at once while it boots, besides the kernel and the workload.
MAX_GUEST_BYTES = 192 << 20
#: Guest paths no file may take: mount points, and busybox's own directory.
RESERVED = ("proc", "sys", "dev", TOOLS, "init")
#: What a program prints when something it runs or opens is missing (the shell's "not
#: found", the loader's missing library, exec's ENOENT, an interpreter's missing modules).
MISSING = re.compile(r"not found|No such file or directory|cannot execute|cannot open shared "
                     r"object|error while loading shared libraries|Could not find|"
                     r"ModuleNotFoundError")


def guest_path(path: str) -> str:
    """The path of a host file in the guest's merged-/usr tree, without its leading slash:
    ``/lib/x86_64-linux-gnu/libc.so.6`` is ``usr/lib/x86_64-linux-gnu/libc.so.6``."""
    parts = os.path.normpath("/" + path.lstrip("/")).lstrip("/").split("/")
    if parts[0] in MERGED:
        parts.insert(0, "usr")
    return "/".join(parts)


def _is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def tree_digest(path: Path) -> str:
    """SHA-256 of a file, or of a directory tree: its entries in sorted order, each its
    relative path and kind, with a file's content hash or a link's target."""
    if not path.is_dir():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    h = hashlib.sha256()
    for root, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(dirs + names):
            p = Path(root) / name
            rel = str(p.relative_to(path)).encode()
            if p.is_symlink():
                h.update(b"L" + rel + b"\0" + os.readlink(p).encode() + b"\0")
            elif p.is_dir():
                h.update(b"D" + rel + b"\0")
            else:
                h.update(b"F" + rel + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


class Guest:
    """The files that go into the guest besides busybox, /init and the marker module: guest
    path → host file (its content, or the link itself) or bytes; the programs and libraries
    among them (whose Debian packages the trace's metadata names) and the inputs named by the
    user (with their SHA-256)."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[Path | bytes, int, bool]] = {}
        self.size = 0
        self.binaries: list[str] = []
        self.inputs: list[tuple[str, str]] = []

    def _put(self, guest: str, src: Path | bytes, mode: int, link: bool = False) -> None:
        guest = guest_path(guest)
        if guest.split("/")[0] in RESERVED:
            raise LookasideError(f"/{guest}: the guest keeps that path for itself")
        if guest in self.files:
            return
        self.size += len(src) if isinstance(src, bytes) else (
            0 if link and src.is_symlink() else src.stat().st_size)
        if self.size > MAX_GUEST_BYTES:
            raise LookasideError(
                f"the files for the guest pass {MAX_GUEST_BYTES >> 20} MiB at /{guest}: its "
                f"{RAM_MIB} MiB of RAM must hold them twice while it boots")
        self.files[guest] = (src, mode, link)

    def add_bytes(self, guest: str, data: bytes, mode: int = 0o644) -> None:
        self._put(guest, data, mode)

    def add_file(self, guest: str, host: Path, link: bool = False) -> None:
        """The host file at ``host`` (its content; or the symbolic link itself if ``link``)."""
        try:
            mode = host.lstat().st_mode if link else host.stat().st_mode
        except OSError as e:
            raise LookasideError(f"{host}: cannot copy into the guest: {e.strerror}") from None
        self._put(guest, host, mode & 0o7777, link)

    def add_program(self, path: str, as_path: str | None = None, depth: int = 0) -> None:
        """The host program at ``path`` at the same path in the guest (or ``as_path``): an
        ELF executable with the shared libraries it needs, or a ``#!`` script with its
        interpreter (and, for ``#!/usr/bin/env NAME``, the program NAME is on this host's
        PATH)."""
        if depth > 4:
            raise LookasideError(f"{path}: #! interpreters nested too deep")
        try:
            with open(path, "rb") as f:
                head = f.read(256)
        except OSError as e:
            raise LookasideError(f"{path}: cannot read: {e.strerror}") from None
        if head.startswith(b"#!"):
            words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
            if not words or not os.path.isabs(words[0]):
                raise LookasideError(f"{path}: its #! line names no interpreter by absolute "
                                     "path")
            interp = words[0]
            if not os.path.isfile(interp):
                raise LookasideError(f"{path}: its interpreter {interp} is not on this host")
            self.add_program(interp, depth=depth + 1)
            if os.path.basename(interp) == "env":
                names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
                if names:
                    found = shutil.which(names[0])
                    if not found:
                        raise LookasideError(f"{path}: its #! line runs {names[0]}, which is "
                                             "not on this host's PATH")
                    self.add_program(found, depth=depth + 1)
        elif head.startswith(b"\x7fELF"):
            self._add_libraries(path)
        else:
            raise LookasideError(f"{path}: not an ELF executable or a #! script")
        self.add_file(as_path or path, Path(path))
        self.binaries.append(path)

    def _add_libraries(self, path: str) -> None:
        for lib in _libraries(path):
            self.add_file(lib, Path(lib))
            self.binaries.append(lib)

    def add_tree(self, guest: str, host: Path) -> None:
        """A host file or directory tree at ``guest`` (symbolic links kept as links); the ELF
        executables and libraries in it bring the shared libraries they need."""
        if not host.is_dir():
            self.add_file(guest, host)
            if _is_elf(host):
                self._add_libraries(str(host))
                self.binaries.append(str(host))
            return
        self._put(guest, b"", stat.S_IFDIR | 0o755)
        for root, dirs, names in os.walk(host):
            dirs.sort()
            for name in sorted(dirs + names):
                p = Path(root) / name
                g = f"{guest}/{p.relative_to(host)}"
                if p.is_symlink() or not p.is_dir():
                    self.add_file(g, p, link=True)
                    if not p.is_symlink() and _is_elf(p) and (
                            os.access(p, os.X_OK) or ".so" in name):
                        self._add_libraries(str(p))
                        self.binaries.append(str(p))
                else:
                    self._put(g, b"", stat.S_IFDIR | 0o755)

    def add_input(self, guest: str, host: str) -> None:
        """A file or tree the user named (``--file``, ``--copy``), with its SHA-256."""
        p = Path(host)
        if not p.exists():
            raise LookasideError(f"{host}: no such file or directory to copy into the guest")
        self.add_tree(guest, p)
        self.inputs.append((host, tree_digest(p)))

    def write(self, c: Cpio) -> None:
        for name, (src, mode, link) in self.files.items():
            if isinstance(src, bytes):
                if mode & stat.S_IFDIR:
                    c.dir(name)
                else:
                    c.file(name, src, mode)
            elif link:
                c.copy(name, src)
            else:
                c.file(name, src.read_bytes(), mode & 0o7777)


INIT = """#!/{tools}/busybox sh
export PATH=/{tools}/bin HOME=/workload
/{tools}/busybox mkdir -p /proc /sys /dev /tmp /{tools}/bin
/{tools}/busybox mount -t proc proc /proc
/{tools}/busybox mount -t sysfs sys /sys
/{tools}/busybox mount -t devtmpfs dev /dev
/{tools}/busybox --install -s /{tools}/bin
fail() {{
  echo "lookaside: the user-level file service did not start"; echo "{mark} 254"; poweroff -f
}}
{fs}cd /workload
if insmod /{tools}/lookaside_marks.ko; then
  exec 3>/sys/module/lookaside_marks/parameters/recording
  echo 1 >&3
  PATH={path} {run} </dev/null 3>&-
  status=$?
  echo 0 >&3
  exec 3>&-
  rmmod lookaside_marks
else
  status=255
fi
echo "{mark} $status"
poweroff -f
"""


#: ``lookaside-phase LABEL`` in the guest (on the shipped workloads' PATH, in /lookaside/bin
#: for any other): the workload starts phase LABEL (1-4 ASCII bytes), which the trace marks
#: (a phase marker, see the marker module's PHASE message). A workload marks ``run`` where the
#: part it is measured by begins, after its set-up: the stored corpus is cut from there.
PHASE_SCRIPT = """#!/{tools}/busybox sh
echo "$1" > /sys/module/lookaside_marks/parameters/phase || {{
  echo "lookaside-phase: a label of 1-4 ASCII bytes: '$1'" >&2; exit 2; }}
"""


def file_service(servers: int) -> str:
    """/init's lines that put /workload behind ``servers`` stacked bindfs servers (none: the
    kernel serves it): its files move to /lookaside/fs0, each server serves the one below
    (single-threaded, so that the capture stays deterministic), and the last is mounted on
    /workload. They start before recording does; their work for the workload is recorded."""
    if not servers:
        return ""
    lines = ["insmod /lib/modules/$(uname -r)/kernel/fs/fuse/fuse.ko || fail",
             f"/{TOOLS}/busybox mv /workload /{TOOLS}/fs0 && mkdir /workload"]
    for i in range(servers):
        below = f"/{TOOLS}/fs{i}"
        above = "/workload" if i == servers - 1 else f"/{TOOLS}/fs{i + 1}"
        if i < servers - 1:
            lines.append(f"mkdir {above}")
        lines.append(f"/usr/bin/bindfs --no-allow-other {below} {above} || fail")
    return "\n".join(lines) + "\n"


def build_initramfs(path: Path, a: Assets, module: Path, run: str, guest: Guest,
                    path_var: str = HOST_PATH, servers: int = 0) -> str:
    """Writes the guest's initramfs: busybox and the marker module in /lookaside, /init
    (which puts /workload behind ``servers`` user-level file servers (:func:`file_service`),
    loads the module, starts recording, runs the shell command ``run`` in /workload
    with ``path_var`` as its PATH and stdin from /dev/null, stops recording, removes the
    module and powers off), the merged-/usr links, and the ``guest`` files; returns its
    SHA-256."""
    with open(path, "wb") as f:
        c = Cpio(f)
        for d in MERGED:
            c.dir(f"usr/{d}")
            c.symlink(d, f"usr/{d}")
        for d in ("dev", "proc", "sys", "tmp", "workload", f"{TOOLS}/bin"):
            c.dir(d)
        c.device("dev/console", 5, 1)
        c.device("dev/null", 1, 3)
        c.file(f"{TOOLS}/busybox", a.busybox.read_bytes(), 0o755)
        c.file("init", INIT.format(tools=TOOLS, path=path_var, run=run, mark=EXIT_MARK,
                                   fs=file_service(servers)).encode(), 0o755)
        c.file(f"{TOOLS}/lookaside_marks.ko", module.read_bytes())
        c.file(f"{TOOLS}/bin/lookaside-phase", PHASE_SCRIPT.format(tools=TOOLS).encode(), 0o755)
        guest.write(c)
        c.close()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def busybox_applets(a: Assets) -> set[str]:
    """The applets of the guest's busybox (a static x86-64 binary: it runs here)."""
    try:
        p = subprocess.run([str(a.busybox), "--list"], capture_output=True, text=True)
    except OSError:
        return set()
    return set(p.stdout.split()) if p.returncode == 0 else set()


def guest_command(argv: list[str], guest: Guest, applets: Callable[[], set[str]]) -> list[str]:
    """The command line the guest runs for ``argv``: the program by its absolute path (put
    into the guest with what it needs, :meth:`Guest.add_program`), never busybox's applet of
    the same name; ``busybox APPLET …`` asks for the guest's busybox. A program this host
    does not have is an error, which says so if busybox has an applet of that name."""
    prog = argv[0]
    if prog == "busybox":
        return [f"/{TOOLS}/busybox", *argv[1:]]
    path = shutil.which(prog) if "/" not in prog else prog
    if not path or not os.path.isfile(path):
        if "/" not in prog and prog in applets():
            raise LookasideError(f"{prog}: not on this host; the guest's busybox has an applet "
                                 f"of that name: `-- busybox {prog} …` traces it")
        raise LookasideError(f"{prog}: program not found")
    if not os.access(path, os.X_OK):
        raise LookasideError(f"{prog}: not executable")
    path = os.path.abspath(path)
    guest.add_program(path)
    return [path, *argv[1:]]


def busybox_version(a: Assets) -> str:
    """``busybox-static=VERSION`` from the banner of the guest's busybox."""
    try:
        p = subprocess.run([str(a.busybox)], capture_output=True, text=True)
        m = re.search(r"\(Debian ([^)\s]+)\)", p.stdout + p.stderr)
    except OSError:
        m = None
    return f"busybox-static={m.group(1) if m else 'unknown'}"


def _aliases(path: str) -> list[str]:
    """``path`` and its other names under merged /usr (``/bin/x`` and ``/usr/bin/x``), and
    those of the file it links to: dpkg knows a file by the name its package ships."""
    out = []
    for p in (path, os.path.realpath(path)):
        g = "/" + guest_path(p)
        out += [p, g]
        if g.startswith("/usr/") and g.split("/")[2] in MERGED:
            out.append(g[4:])
    return list(dict.fromkeys(out))


def host_packages(paths: list[str]) -> list[str]:
    """The Debian packages (``name=version``) that ship the host files ``paths``, as dpkg
    knows them; files of no package are left out (the inputs' hashes cover them)."""
    if not paths or not shutil.which("dpkg-query"):
        return []
    names = [a for p in paths for a in _aliases(p)]
    p = subprocess.run(["dpkg-query", "-S", *names], capture_output=True, text=True)
    pkgs = set()
    for ln in p.stdout.splitlines():
        owners, sep, _ = ln.partition(": /")
        if sep and not owners.startswith("diversion"):
            pkgs.update(o.strip() for o in owners.split(","))
    if not pkgs:
        return []
    p = subprocess.run(["dpkg-query", "-W", "-f", "${binary:Package}=${Version}\n",
                        *sorted(pkgs)], capture_output=True, text=True)
    return sorted(ln for ln in p.stdout.splitlines() if "=" in ln)


class Workload(NamedTuple):
    """A shipped workload made ready for the guest."""

    #: The shell script the guest runs (/workload/run.sh).
    script: str
    #: Host programs built for it (static), copied into /workload/bin.
    programs: list[str]
    #: Other files it needs, as (guest path, host file): source directories, the toolchain.
    extra: list[tuple[str, Path]]
    #: The Debian packages (``name=version``) of what it runs besides busybox: the toolchain.
    packages: list[str]


def _needs(script: str) -> list[str]:
    """The words of a workload script's ``# needs:`` lines."""
    return [w for m in re.finditer(r"^#\s*needs:(.*)$", script, re.M) for w in m.group(1).split()]


def _script(name: str) -> str:
    """The script of the shipped workload ``name``: ``NAME.sh``, or, for ``NAME-N``, the
    script of ``NAME`` run with its parameter (its ``# parameter: VAR`` line) set to N
    (``oltp-12``: 12 clients)."""
    d = workloads_dir()
    path = d / f"{name}.sh"
    if path.is_file():
        return path.read_text()
    m = re.fullmatch(r"(.+)-([0-9]+)", name)
    base = d / f"{m.group(1)}.sh" if m else None
    if base is not None and base.is_file():
        script = base.read_text()
        var = re.search(r"^#\s*parameter:\s*([A-Za-z_][A-Za-z0-9_]*)\b", script, re.M)
        if var is None:
            raise LookasideError(f"unknown workload '{name}': {m.group(1)} takes no "
                                 "parameter")
        if int(m.group(2)) < 1:
            raise LookasideError(f"workload '{name}': {var.group(1)} must be at least 1")
        return f"{var.group(1)}={int(m.group(2))}\n{script}"
    raise LookasideError(f"unknown workload '{name}' (shipped: "
                         f"{', '.join(workload_names())})")


def _program(src: Path, cache: Path) -> Path:
    """The workload program built from the C source ``src`` (``gcc -static -O2``, or
    ``$CC``), built unless the cache has a build of this source."""
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
    return exe


def _workload(name: str, cache: Path, say: Callable[[str], Any] = _say) -> Workload:
    """A shipped workload: its script, the programs every workload's guest gets, built from
    their C source (each ``NAME.c`` beside the scripts) with ``gcc -static``, and what its
    ``# needs:`` lines name: ``tcc``, the guest's C toolchain (:func:`toolchain`);
    ``pkg:PACKAGE``, a Debian package whose programs go into the guest at their own paths
    with the libraries they need (:func:`debian_packages`, :func:`package_files`);
    ``cc:DIR/NAME.c``, a program of its own, built as the others (a program added to every
    guest would change the guests of the stored corpus, which recapture bit for bit); or a
    directory beside it, copied into /workload."""
    d = workloads_dir()
    script = _script(name)
    programs = [str(_program(src, cache)) for src in sorted(d.glob("*.c"))]
    extra: list[tuple[str, Path]] = []
    packages: list[str] = []
    debian = [n[4:] for n in _needs(script) if n.startswith("pkg:")]
    if debian:
        roots = debian_packages(debian, cache, say)
        extra += package_files(roots, debian)
        packages += [r.name for r in roots]
    for need in _needs(script):
        if need.startswith("pkg:"):
            continue
        if need.startswith("cc:") and need.endswith(".c") and (d / need[3:]).is_file():
            programs.append(str(_program(d / need[3:], cache)))
        elif need == "tcc":
            root = toolchain(cache, say)
            extra += toolchain_files(root)
            packages += (root / "VERSION").read_text().split()
        elif (d / need).is_dir():
            extra += [(f"workload/{need}/{p.name}", p)
                      for p in sorted((d / need).iterdir()) if p.is_file()]
        else:
            raise LookasideError(f"workload '{name}' needs '{need}', which is neither tcc, "
                                 "pkg:PACKAGE, cc:SOURCE.c nor a directory beside it")
    return Workload(script, programs, extra, list(dict.fromkeys(packages)))


class _Console(_Tee):
    """The guest's console, passed through like a program's stderr, less the line that
    carries the workload's exit status; the lines before that line are kept for errors."""

    def __init__(self, stream, quiet: bool):
        super().__init__(stream, prefix="guest| ", quiet=quiet)
        self.status: int | None = None
        self.output: list[str] = []

    def take(self, line: str) -> str | None:
        line = line.replace("\r", "")
        m = re.match(rf"{EXIT_MARK} (\d+)", line.strip())
        if m:
            self.status = int(m.group(1))
            self.output = list(self.last)
            return None
        return line


def _failed(status: int, output: list[str]) -> str:
    """The error of a workload that exited with ``status``: its last lines of output, and
    what is likely missing if they say that something was not found."""
    # Without the terminal's colours (the console is a terminal: gcc colours its errors).
    lines = [re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", ln) for ln in output[-3:]]
    lines = [ln if len(ln) <= 200 else ln[:197] + "..." for ln in lines]
    msg = (f"the workload failed in the guest (exit status {status})"
           + (f"; its last output: {' | '.join(lines)}" if lines else ", printing nothing"))
    if status in (126, 127) or any(MISSING.search(ln) for ln in lines):
        msg += ("; something it needs may be missing from the guest, which holds only the "
                "program, its #! interpreter, their shared libraries, /bin/sh and what --file "
                "and --copy name: copy what is missing with --copy PATH")
    return msg + " (no trace written)"


def record_system(workload: str | None, output: str | os.PathLike[str], *,
                  command: list[str] | None = None, files: list[str] = (),
                  copies: list[str] = (), kernel: str | None = None,
                  fs: str = "kernel", cpus: int = 1, level: int | None = None,
                  tlb_flushes: bool = True,
                  progress: Callable[[int, int], Any] | None = None,
                  quiet: bool = False) -> dict[str, Any]:
    """Boot the guest, run ``workload`` (a shipped one) or ``command`` (a host program and
    its arguments; see :func:`guest_command`), and record it into ``output``; returns a
    summary like :func:`lookaside.capture.record`'s, with the kernel and the processes seen.
    ``files`` are host files or directory trees copied into the guest's working directory
    (/workload), ``copies`` host files or trees copied to the same paths in the guest (ELF
    programs and libraries among them with the libraries they need); ``kernel`` names the
    kernel (:func:`assets`); ``fs`` where the file service of /workload runs
    (:data:`FILE_SERVICES`: ``user`` and ``user2`` put one or two bindfs servers between the
    workload and the kernel's file system); ``cpus`` the guest's CPUs (:data:`MAX_CPUS` at
    most): their references interleave in the order QEMU ran them, with a CPU marker where
    the running CPU changes and the kernel's TLB shootdowns as TLB flushes naming the CPUs
    they reach (not repeatable bit for bit: :data:`SMP_ACCEL`). Every TLB flush the kernel
    asks for is recorded (``tlb_flushes``; off only to capture again a trace stored before
    they were, with one CPU). A workload that exits with a non-zero status is an error.
    Nothing is written at ``output`` unless the capture is complete and the workload
    succeeded. The capture is deterministic (:data:`QEMU_CLOCK`): the trace's metadata names
    everything that went into it."""
    if (workload is None) == (not command):
        raise LookasideError("give a shipped workload or a command to run in the guest")
    if fs not in FILE_SERVICES:
        raise LookasideError(f"--fs {fs}: expected one of {', '.join(FILE_SERVICES)}")
    if not 1 <= cpus <= MAX_CPUS:
        raise LookasideError(f"--cpus {cpus}: a guest has 1 to {MAX_CPUS} CPUs")
    if cpus > 1 and not tlb_flushes:
        raise LookasideError("a guest of several CPUs records the kernel's TLB flushes: its "
                             "shootdowns are how the CPUs' TLBs stay right")
    for f in copies:
        if not os.path.isabs(f):
            raise LookasideError(f"--copy {f}: give the absolute path it has on this host, "
                                 "which it keeps in the guest")
    output = os.fspath(output)
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise LookasideError(f"{output}: no such directory: {parent}")
    qemu = shutil.which(os.environ.get("LOOKASIDE_QEMU_SYSTEM") or "qemu-system-x86_64")
    if not qemu:
        raise LookasideError("qemu-system-x86_64 not found (install qemu-system-x86)")
    cache = cache_dir()
    say = (lambda m: None) if quiet else _say
    a = assets(cache, say, kernel)
    module = build_module(a, tlb_flushes)
    plugin = build_plugin(cache, name="lookaside-system-plugin")
    guest = Guest()
    packages = [busybox_version(a)]
    servers = FILE_SERVICES[fs]
    if servers:
        served, pins = file_server_files(a, cache, say)
        for name, host in served:
            guest.add_file(name, host, link=True)
        packages += pins
    if workload is not None:
        w = _workload(workload, cache, say)
        guest.add_bytes("workload/run.sh", w.script.encode(), 0o755)
        for prog in w.programs:
            guest.add_file(f"workload/bin/{os.path.basename(prog)}", Path(prog))
        for name, host in w.extra:
            guest.add_file(name, host, link=True)
        packages += w.packages
        run, path_var = f"/{TOOLS}/bin/sh /workload/run.sh", WORKLOAD_PATH
        described = f"workload {workload}"
    else:
        argv = guest_command(list(command), guest, lambda: busybox_applets(a))
        if os.path.isfile("/bin/sh"):
            # What the program runs through system() or popen(): the host's shell.
            guest.add_program("/bin/sh")
        run, path_var = shlex.join(argv), HOST_PATH
        described = shlex.join(argv)
        if not argv[0].startswith(f"/{TOOLS}/"):
            guest.inputs.insert(0, (argv[0], tree_digest(Path(argv[0]))))
    for f in files:
        guest.add_input(f"workload/{os.path.basename(os.path.normpath(f))}", f)
    for f in copies:
        guest.add_input(f, f)
    packages += host_packages(guest.binaries)
    if not quiet:
        _say(f"booting Linux {a.release} under QEMU (TCG); recording starts when "
             f"the {described} does")
    # Written under a temporary name, renamed when complete: a failed workload leaves none.
    # A FIFO is written in place: a simulation reading it runs as the guest does.
    stream = is_stream(output)
    partial = (os.fspath(output) if stream else
               os.path.join(parent, f".lookaside-{os.getpid()}-{os.path.basename(output)}"))
    with tempfile.TemporaryDirectory() as tmp:
        initrd = Path(tmp) / "initramfs.cpio"
        initrd_sha = build_initramfs(initrd, a, module, run, guest, path_var, servers)
        r, w = os.pipe()
        accel, clock = ("tcg", QEMU_CLOCK) if cpus == 1 else (SMP_ACCEL, SMP_CLOCK)
        machine = ["-nodefaults", "-display", "none", "-no-reboot", "-accel", accel,
                   "-cpu", CPU, "-smp", str(cpus), "-m", str(RAM_MIB), *clock]
        cmd = [qemu, *machine, "-serial", "stdio", "-kernel", str(a.kernel),
               "-initrd", str(initrd), "-append", APPEND,
               "-plugin", f"{plugin},fd={w},ram={RAM_MIB << 20}"]
        extra = [("capture", "qemu-system plugin"), ("capture_tool", _version(qemu)),
                 ("kernel", f"{a.release} ({a.version})"),
                 ("kernel_package", a.package),
                 ("kernel_command_line", APPEND),
                 ("machine", f"qemu-system-x86_64 -cpu {CPU} -smp {cpus} -m {RAM_MIB}M (TCG)"),
                 ("qemu_command", shlex.join(["qemu-system-x86_64", *machine, "-kernel",
                                              f"vmlinuz-{a.release}", "-initrd",
                                              "initramfs.cpio", "-append", APPEND])),
                 ("guest_packages", " ".join(packages)),
                 ("initramfs", f"sha256:{initrd_sha}"),
                 ("workload", described),
                 ("file_service", fs if not servers else
                  f"{fs}: /workload through {servers} bindfs server{'s' * (servers > 1)} "
                  "over FUSE"),
                 ("date", datetime.datetime.now(datetime.timezone.utc)
                  .strftime("%Y-%m-%dT%H:%M:%SZ"))]
        if tlb_flushes:
            extra.append(("tlb_flushes", "recorded: the kernel's own (flush_tlb_mm_range on "
                          "one CPU, native_flush_tlb_multi, flush_tlb_kernel_range), as TLB "
                          "flushes naming the CPUs they reach"))
        if cpus > 1:
            extra.append(("repeatable", "no: a guest of several CPUs runs without instruction "
                          "counting (QEMU's -icount cannot boot it), so its timing follows "
                          "the host's"))
        if guest.inputs:
            extra.append(("inputs", "; ".join(f"{p} sha256:{h}" for p, h in guest.inputs)))
        t0 = time.perf_counter()
        first: list[float] = []

        def tick(events: int, nbytes: int) -> Any:
            # The first references arrive when recording starts: the boot is over.
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
                raw = _lookaside.record(f"/dev/fd/{r}", "qemu", partial,
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
            if status != 0:
                raise LookasideError(f"qemu-system-x86_64 failed (exit status {status})"
                                     f"{console.why()}")
            if console.status is None:
                raise LookasideError("the guest powered off without the workload's exit "
                                     f"status{console.why()}")
            if console.status != 0:
                raise LookasideError(_failed(console.status, console.output))
            if not stream:
                os.replace(partial, output)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
            if not stream and os.path.exists(partial):
                os.unlink(partial)
    out = json.loads(raw)
    out.update(via="qemu-system", seconds=seconds, command=described, exit_status=0,
               output=output, output_bytes=output_size(output), kernel=a.release,
               kernel_package=a.package)
    _timings(out, seconds, cpu0, cpu1)
    # Progress comes every few million events: the boot's end is known to within those.
    out["boot_seconds"] = (first[0] if first else t0 + seconds) - t0
    out["record_seconds"] = seconds - out["boot_seconds"]
    refs = out["fetches"] + out["loads"] + out["stores"]
    out["record_rate"] = refs / out["record_seconds"] if out["record_seconds"] > 0 else 0.0
    return out
