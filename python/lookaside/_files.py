"""Writing output files. Each appears under its name only once complete: it is written to a
temporary file beside it and renamed into place. The temporary file is made by the engine
(``.NAME.PID.N.partial``, with mode 0666 less the umask, as any new file would have), the
one naming every writer of Lookaside uses, so that the next run that writes into the
directory removes those a killed process left behind; one stopped by an exception
(Ctrl-C, SIGTERM) removes its own here."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Union

from . import _lookaside

Content = Union[str, bytes, Callable[[str], None]]


def write_atomically(path: str | os.PathLike[str], content: Content, *,
                     sync: bool = False) -> None:
    """Write `content` — text, bytes, or a call ``content(tmp_path)`` that writes the file
    (its name does not end with the final extension: give writers the format) — so that
    `path` appears only complete. With `sync`, the data reach the disk before the rename.
    Errors are ``OSError``s naming `path`."""
    path = os.fspath(path)
    tmp = os.fspath(_lookaside.create_partial(path))
    try:
        if callable(content):
            content(tmp)
        else:
            mode, encoding = ("wb", None) if isinstance(content, bytes) else ("w", "utf-8")
            with open(tmp, mode, encoding=encoding) as f:
                f.write(content)
                if sync:
                    f.flush()
                    os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise OSError(e.errno, e.strerror, path) from None
        raise
