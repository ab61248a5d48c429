"""Open a trace (or a sidecar) by its location, wherever it is: the one function a worker
needs to read a file named by a ``Location`` (locations.py): a path, a URL or an archive member.

- a local path: ``files.open_regular`` (regular files only, never blocking);
- a URL: ``remote.open_url``, streamed while the decoder reads, nothing on disk;
- an archive member: ``archive.by_location.open_member_location``, streamed out of the archive.

Every failure is a one-line ``TraceError`` naming the location, except the local
``OSError``s that the callers already word (a missing file, no permission).
"""

from __future__ import annotations

import time
from typing import IO

from ..archive.by_location import open_member_location
from ..limits import DEFAULT_LIMITS, Deadline, Limits
from ..remote.remote import open_url, remote_uncompressed_size
from .files import open_regular, uncompressed_size
from .locations import Location

# A remote file that is not a trace (a sidecar, at most 1 MiB) has this long to arrive.
SMALL_FILE_SECONDS = 60.0


def open_location(
    location: Location,
    what: str = "trace",
    size: int | None = None,
    limits: Limits | None = None,
    deadline: Deadline | None = None,
) -> IO[bytes]:
    """``location`` opened for binary reading in order (``size``, when the listing knows it,
    saves a remote request; ``limits`` holds an archive to its caps). A remote file is read
    within ``deadline``: by default the ``max_seconds`` of ``limits`` for a trace, and
    ``SMALL_FILE_SECONDS`` at most for anything else (within ``deadline`` too, when given: a
    sidecar read for a trace is part of that trace's time)."""
    if location.member is not None:  # a remote archive's reads within the trace's deadline
        return open_member_location(location, limits, deadline)
    if location.is_url:
        if deadline is None or what != "trace":
            seconds = (limits or DEFAULT_LIMITS).max_seconds
            if what != "trace":
                seconds = min(seconds, SMALL_FILE_SECONDS) if seconds > 0 else SMALL_FILE_SECONDS
            if deadline is not None:
                seconds = min(seconds, max(0.001, deadline.end - time.monotonic()))
            deadline = Deadline(location.text, seconds)
        return open_url(location, size, deadline)
    return open_regular(location.path, what)


def decoded_size(location: Location, size: int) -> int:
    """The bytes the decoder will read from ``location``, for progress: gzip's ISIZE trailer
    where it is cheap to read (a local file, one ranged read of an object), else ``size``."""
    if location.member is not None:
        return size
    if location.is_url:
        return remote_uncompressed_size(location, size)
    return uncompressed_size(location.path, size)
