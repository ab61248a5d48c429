"""The analyses kept on disk between servers: one file per entry, bounded in bytes.

Entries live in a user cache directory (never in a logdir). Each is written to a
temporary file and renamed over its name (``os.replace``), so a reader, in this
server or in another one sharing the directory, sees the whole old entry, the whole
new one or none: never half of one. Two servers writing the same entry at once
each rename a complete file; the last one stays.

The directory is bounded: after each write, while its entries take more than
``max_bytes``, the least recently used go (a read touches its entry's mtime, so
the mtime is the last use). Another server may evict or replace an entry between
our listing and our removal: a file that is gone is simply skipped, and a read
that finds nothing is a miss. A temporary file left by a server that died is
removed once it is an hour old.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time

from ..core.escape import one_line
from .settings import DEFAULT_CACHE_MAX_BYTES

logger = logging.getLogger(__name__)

ENTRY_SUFFIX = ".json"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0


class DiskCache:
    def __init__(self, directory: str, max_bytes: int = DEFAULT_CACHE_MAX_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name + ENTRY_SUFFIX)

    def read(self, name: str) -> bytes | None:
        """The entry's bytes, or None when there is none (or it cannot be read)."""
        path = self.path(name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.info("MFU plugin: ignoring unreadable cache entry %s (%s)", path, one_line(exc))
            return None
        try:
            os.utime(path)  # used now: the last to be evicted
        except OSError:  # a read-only cache still serves its entries
            pass
        return data

    def write(self, name: str, data: bytes) -> None:
        """Store an entry atomically, then evict down to the cap. Never raises: a cache
        that cannot be written costs speed, never a result."""
        path = self.path(name)
        tmp = None
        try:
            os.makedirs(self.directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, suffix=ENTRY_SUFFIX, dir=self.directory)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            tmp = None
        except Exception as exc:  # noqa: BLE001
            logger.warning("MFU plugin: cannot write cache entry %s (%s)", path, one_line(exc))
            return
        finally:
            if tmp is not None:
                _remove(tmp)
        self.evict(keep=path)

    def evict(self, keep: str | None = None) -> int:
        """Remove the least recently used entries until they fit the cap; the bytes removed.
        ``keep`` (the entry just written) goes last, only if it alone is over the cap."""
        entries, now = [], time.time()
        try:
            scan = list(os.scandir(self.directory))
        except OSError:
            return 0
        for e in scan:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:  # removed by another server meanwhile
                continue
            if e.name.startswith(_TMP_PREFIX):
                if now - st.st_mtime > _STALE_TMP_S:
                    _remove(e.path)
            elif e.name.endswith(ENTRY_SUFFIX) and e.is_file(follow_symlinks=False):
                entries.append((e.path == keep, st.st_mtime, e.path, st.st_size))
        total = sum(size for *_, size in entries)
        removed = 0
        for _, _, path, size in sorted(entries):  # oldest first, the one just written last
            if total <= self.max_bytes:
                break
            if _remove(path):
                removed += size
            total -= size  # gone either way: removed here or by another server
        return removed

    def size(self) -> int:
        """Bytes of the entries now (for tests and tools)."""
        total = 0
        try:
            for e in os.scandir(self.directory):
                if e.name.endswith(ENTRY_SUFFIX) and not e.name.startswith(_TMP_PREFIX):
                    try:
                        total += e.stat().st_size
                    except OSError:
                        pass
        except OSError:
            return 0
        return total


def _remove(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
