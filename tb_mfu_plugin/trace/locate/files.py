"""Open only regular files, never blocking: a FIFO or a device named like a trace
(or like the sidecar) must fail at once, not hang the one analysis thread.

``os.stat`` refuses what is not a regular file before ``open``; the open itself
uses ``O_NONBLOCK`` (a FIFO swapped in after the stat then opens at once instead
of waiting for a writer) and ``fstat`` checks the opened file again, which closes
the race between the two.
"""

from __future__ import annotations

import os
import stat
import struct
from io import BufferedReader

from ...core.errors import TraceError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse(path: str, mode: int, what: str) -> TraceError:
    return TraceError(path, f"{what} is {_kind(mode)}, not a regular file: not read")


def open_regular(path: str, what: str = "trace") -> BufferedReader:
    """``path`` opened for binary reading if it is a regular file; TraceError otherwise.

    OSErrors other than the refusals (missing file, permissions) propagate for the
    caller to word.
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(path, st.st_mode, what)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(path, st.st_mode, what)
        # Regular files ignore O_NONBLOCK; clearing it keeps later reads ordinary.
        os.set_blocking(fd, True)
        f: BufferedReader = os.fdopen(fd, "rb")
        return f
    except BaseException:
        os.close(fd)
        raise


def uncompressed_size(path: str, size: int) -> int:
    """The size the decoder will read: gzip's ISIZE trailer (size mod 2^32) or the file size.

    Never blocks: a FIFO or device (or anything unreadable) gives ``size`` back.
    """
    try:
        with open_regular(path) as f:
            if f.read(2) != b"\x1f\x8b" or size < 18:
                return size
            f.seek(-4, os.SEEK_END)
            isize: int = struct.unpack("<I", f.read(4))[0]
    except (OSError, TraceError, struct.error):
        return size
    # ISIZE is the size mod 4 GiB: a trace is never smaller than its gzip file.
    while isize < size:
        isize += 1 << 32
    return isize


def is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
