"""Writing output files. Each appears under its name only once complete: it is written to a
temporary file beside it and renamed into place. The temporary file is made by the engine
(``.NAME.PID.N.partial``, with mode 0666 less the umask, as any new file would have), the
one naming every writer of Lookaside uses, so that the next run that writes into the
directory removes those a killed process left behind; one stopped by an exception
(Ctrl-C, SIGTERM) removes its own here."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Union

from . import _lookaside

Content = Union[str, bytes, Callable[[str], None]]


def write_atomically(path: str | os.PathLike[str], content: Content, *,
                     sync: bool = False) -> None:
    """Write `content` — text, bytes, or a call ``content(tmp_path)`` that writes the file
    (its name does not end with the final extension: give writers the format) — so that
    `path` appears only complete. With `sync`, the data reach the disk before the rename. A
    FIFO or device at `path` is written in place.
    Errors are ``OSError``s naming `path`."""
    path = os.fspath(path)
    if is_stream(path):
        # A FIFO or a device: nothing to rename, nothing a reader could mistake for complete
        # (and nothing to sync).
        _write(path, content, sync=False)
        return
    tmp = os.fspath(_lookaside.create_partial(path))
    try:
        _write(tmp, content, sync)
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror, path) from None
        raise


def _write(target: str, content: Content, sync: bool) -> None:
    """Write `content` to the file `target` (see :func:`write_atomically`)."""
    if callable(content):
        content(target)
        return
    mode, encoding = ("wb", None) if isinstance(content, bytes) else ("w", "utf-8")
    with open(target, mode, encoding=encoding) as f:
        f.write(content)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Whether `path` exists and is neither a regular file nor a directory (a FIFO, a
    terminal, ``/dev/null``): writers write such a destination in place, as the engine
    does, so that a capture streams into a simulation reading the FIFO."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def output_size(path: str | os.PathLike[str]) -> int | None:
    """The size of a finished output, or None for a stream (nothing stays to measure)."""
    return None if is_stream(path) else os.path.getsize(path)
