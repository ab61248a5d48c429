"""``tensorboard`` whose MFU tab publishes each analysed file later than the one before.

    python tests/e2e/staggered_tensorboard.py SECONDS [tensorboard's arguments]

The k-th file to finish is held back k times SECONDS before the tab shows it, so a browser test
sees a run half loaded whatever the machine's speed (test_progressive.py). The delay is put in
here, around the cache's executor, and nowhere in the package: the server itself never waits.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from tb_mfu_plugin.tensorboard import cache


class _Late:
    """A file's future whose result, once there, is handed on ``delay()`` seconds later, in the
    thread that waits for it (the cache's analysis thread, never the executor's own)."""

    def __init__(self, inner: Future[Any], delay: Callable[[], float]) -> None:
        self._inner, self._delay = inner, delay

    def result(self, timeout: float | None = None) -> Any:
        out = self._inner.result(timeout)
        time.sleep(self._delay())
        return out


class _Staggered:
    """An executor whose k-th result to finish comes back k times ``step`` seconds late."""

    def __init__(self, inner: Any, step: float, finished: itertools.count[int]) -> None:
        self._inner, self._step, self._finished = inner, step, finished

    def submit(self, *args: Any, **kwargs: Any) -> _Late:
        return _Late(self._inner.submit(*args, **kwargs), lambda: self._step * next(self._finished))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def main() -> None:
    step = float(sys.argv.pop(1))
    finished = itertools.count()
    executor_now = cache.AnalysisCache._executor_now

    def staggered(self: cache.AnalysisCache) -> Any:
        return _Staggered(executor_now(self), step, finished)

    cache.AnalysisCache._executor_now = staggered  # type: ignore[method-assign]
    from tensorboard.main import run_main

    sys.argv[0] = "tensorboard"
    run_main()


if __name__ == "__main__":
    main()
