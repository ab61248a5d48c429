"""The order in which the tab's files are analysed, with a lane kept free for local files.

Files wait in priority order (a lower number first; the file the user is looking
at is asked for again with a lower one). A remote file (a URL, or a member of an
archive read over the network) may be slow for reasons no cap on the file can see
soon: a server that trickles a byte a second holds its analysis until the remote
read's deadline. So remote files may hold at most ``remote_slots`` of the analysis
threads at once, ``max(1, workers - 1)``: with two or more workers a local file
never waits behind remote ones. (With one worker, a remote file may hold it: give
a server with remote sources two workers or more.)
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")

# Priorities, the lowest first: a file of a run a request asked for, of the run the tab opens on,
# of any other run.
VIEWED, OPENED, BACKGROUND = 0, 1, 2


def remote_slots(workers: int) -> int:
    return max(1, workers - 1)


class FileQueue(Generic[K]):
    """A priority queue of keys in two lanes; ``get`` blocks for the best key it may hand out,
    and every key handed out is given back with ``done``."""

    def __init__(self, is_remote: Callable[[K], bool], slots: int) -> None:
        self._is_remote = is_remote
        self.slots = slots  # remote keys handed out at once, at most
        self._cond = threading.Condition()
        self._local: list[tuple[int, int, K]] = []
        self._remote: list[tuple[int, int, K]] = []
        self._seq = itertools.count()
        self._remote_out = 0

    def put(self, priority: int, key: K) -> None:
        with self._cond:
            heapq.heappush(self._remote if self._is_remote(key) else self._local, (priority, next(self._seq), key))
            self._cond.notify_all()  # a waiter that takes only some keys (``most``) must not swallow it

    def get(self, most: int | None = None) -> K:
        """The best key the caller may have; with ``most``, only a local key of that priority or a
        lower one (the tab's first-look thread: the runs looked at)."""
        with self._cond:
            while True:
                if most is not None:
                    lanes = [self._local] if self._local and self._local[0][0] <= most else []
                else:
                    lanes = [self._local] + ([self._remote] if self._remote_out < self.slots else [])
                ready = [lane for lane in lanes if lane]
                if ready:
                    lane = min(ready, key=lambda q: q[0][:2])
                    _, _, key = heapq.heappop(lane)
                    if lane is self._remote:
                        self._remote_out += 1
                    return key
                self._cond.wait()

    def done(self, key: K) -> None:
        if self._is_remote(key):
            with self._cond:
                self._remote_out -= 1
                self._cond.notify_all()

    def remote_running(self) -> int:
        with self._cond:
            return self._remote_out
