"""An archive by its location: listed once and kept (a few, for a minute when remote), and a
member streamed out of it by its ``zip://member::archive`` (or ``tar://``) location."""

from __future__ import annotations

import io
import os
import threading
import time
from collections import OrderedDict
from typing import IO, Any, cast

from ...core.errors import TraceError
from ..limits import DEFAULT_LIMITS, Deadline, Limits
from ..locate.locations import Location
from ..remote.bounded import Scoped, reads_within
from .reader import Archive

_CACHE_SIZE = 8
_REMOTE_TTL_S = 60.0
# (location, caps) -> (identity, when listed, archive): caps other than the listing's would
# refuse other members
_cache: OrderedDict[tuple[Location, Limits], tuple[Any, float, Archive]] = OrderedDict()
_cache_lock = threading.Lock()


def _forget_after_fork() -> None:
    """A forked child (``tb-mfu --jobs``) shares its parent's open file descriptions, and so
    their read offsets: two processes reading members of one archive would read each other's
    bytes. The child drops the inherited archives and opens its own."""
    global _cache_lock
    _cache_lock = threading.Lock()
    _cache.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def _identity(location: Location) -> Any:
    """What says an archive changed: size and mtime of a local file; remote ones expire instead."""
    if location.is_url:
        return None
    st = os.stat(location.path)
    return (st.st_size, st.st_mtime_ns)


def archive_at(location: Location, limits: Limits | None = None) -> Archive:
    """The archive at ``location``, listed once and kept (a few, for a minute when remote)."""
    if location.member is not None:  # its path is a member's name, which must never open a local file
        raise TraceError(location.text, "an archive inside an archive is not read")
    limits = limits or DEFAULT_LIMITS
    key = (location, limits)
    ident = _identity(location)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        fresh = hit is not None and (ident is not None or now - hit[1] < _REMOTE_TTL_S) and not hit[2].broken
        if hit is not None and hit[0] == ident and fresh:
            _cache.move_to_end(key)
            return hit[2]
    arc = Archive.open(location, limits=limits)
    with _cache_lock:
        _cache[key] = (ident, now, arc)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)[1][2].close()
    return arc


def open_member_location(
    location: Location, limits: Limits | None = None, deadline: Deadline | None = None
) -> IO[bytes]:
    """The member named by ``zip://member::archive`` (or ``tar://``), streamed; a remote
    archive's reads for it (its listing too, when it is not listed yet) within ``deadline``."""
    m = location.member
    if m is None:
        raise TraceError(location.text, "not an archive member location")
    with reads_within(deadline):
        stream = archive_at(m.archive, limits).open_member(m.name)
    return cast(IO[bytes], io.BufferedReader(Scoped(stream, deadline), 1 << 20))
