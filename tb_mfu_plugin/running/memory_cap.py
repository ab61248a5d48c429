"""A cap on the memory of each analysis process, so that one hostile file cannot take the machine.

A trace is decoded under caps on its size and ratio, but a file within them, or a bug
on odd input, can still make one analysis grow: beside 13 hostile remote sources a
worker once grew past 4.5 GB. Left alone, the kernel's OOM killer may then pick the
TensorBoard server itself. So each worker *process* (the tab's ``--mfu_workers``,
the CLI's ``--jobs``) runs under ``RLIMIT_DATA``: an allocation past the cap fails,
the analysis gets a ``MemoryError``, and that file's error says so in one line;
the other files, and the server, go on.

``RLIMIT_DATA`` counts a process's private writable memory (the heap, numpy's
arrays, anonymous mappings, since Linux 4.7), not the shared libraries or address
space merely reserved, so the cap reads as the memory the analysis may use.

The cap: ``--mfu_worker_max_memory`` / ``$TB_MFU_WORKER_MAX_MEMORY`` (a size, or
``none``), else ``max(2 GiB, 3/4 of the memory / workers)``: all workers together
stay within three quarters of the machine's memory (or its cgroup's limit), and
none gets less than 2 GiB (a 184 MB trace analyses under 192 MiB, 100 MB of it the
interpreter and numpy: 2 GiB holds traces of about 3.5 GB). Where ``resource`` is missing (Windows) nothing is capped.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

from ..trace.limits import GiB, format_size, parse_size

logger = logging.getLogger(__name__)

MEMORY_ENV = "TB_MFU_WORKER_MAX_MEMORY"
MIN_DEFAULT_BYTES = 2 * GiB
SHARE_OF_MEMORY = 0.75
_OUT_OF_MEMORY = re.compile(r"\bMemoryError\b|out of memory", re.IGNORECASE)


@dataclass(frozen=True)
class MemoryCap:
    bytes: int
    named_by: str  # the flag or variable that sets it, for the error line

    def error(self) -> str:
        return f"analysis ran out of its memory cap ({format_size(self.bytes)}, {self.named_by})"

    def rewrite(self, reason: str | None) -> str | None:
        """A file's error, said as the cap when it is running out of memory."""
        return self.error() if reason and _OUT_OF_MEMORY.search(reason) else reason


def machine_memory() -> int | None:
    """The bytes of memory this process may use: the machine's, or its cgroup's limit if lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def default_cap_bytes(workers: int) -> int:
    total = machine_memory()
    if total is None:
        return MIN_DEFAULT_BYTES
    return max(MIN_DEFAULT_BYTES, int(total * SHARE_OF_MEMORY / max(1, workers)))


def memory_cap(value: str | None, workers: int, named_by: str = f"${MEMORY_ENV}") -> MemoryCap | None:
    """The cap ``value`` (given by ``named_by``) asks for: a size, or ``none``/``0`` for no cap;
    None for the variable's, else the default. ValueError names where a bad value came from."""
    if value is None or not str(value).strip():
        value = os.environ.get(MEMORY_ENV, "").strip() or None
        if value is None:
            return MemoryCap(default_cap_bytes(workers), named_by)
        named_by = f"${MEMORY_ENV}"
    text = str(value).strip()
    if text.lower() in ("none", "off", "0"):
        return None
    try:
        size = parse_size(text)
    except ValueError:
        raise ValueError(f"{named_by} must be a size (e.g. 4GiB) or 'none', got {text!r}") from None
    if size <= 0:
        raise ValueError(f"{named_by} must be a size (e.g. 4GiB) or 'none', got {text!r}")
    return MemoryCap(size, named_by)


def apply(cap: MemoryCap | None) -> None:
    """Put this process under ``cap`` (in a worker process, before it analyses anything)."""
    if cap is None:
        return
    try:
        import resource
    except ImportError:  # Windows
        return
    try:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        soft = cap.bytes if hard == resource.RLIM_INFINITY else min(cap.bytes, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    except (ValueError, OSError) as exc:
        logger.warning("tb-mfu: cannot cap the analysis process's memory at %s (%s)", format_size(cap.bytes), exc)
