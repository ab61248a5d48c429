"""Work done once per decoded trace and shared by all of its devices.

A multi-GPU trace is analysed device by device, and some queries (FLOPs per op, the
ops' places on the roofline) read the whole trace: they are computed for the first
device and reused for the others. The last result is kept with a weak reference to its
tables, so nothing outlives the trace it was computed from.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

from ..trace.tables import TraceTables

T = TypeVar("T")


def once_per_trace(compute: Callable[[TraceTables], T]) -> Callable[[TraceTables], T]:
    """``compute(tables)``, computed once for the most recent trace and reused for it."""
    last: list[tuple[weakref.ref[TraceTables], T]] = []
    # the plugin analyses files on several threads: one slot, swapped whole under a lock
    lock = threading.Lock()

    def cached(tables: TraceTables) -> T:
        with lock:
            got = last[0] if last else None
        if got is not None and got[0]() is tables:
            return got[1]
        value = compute(tables)
        with lock:
            last[:] = [(weakref.ref(tables), value)]
        return value

    return cached
