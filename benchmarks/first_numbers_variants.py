#!/usr/bin/env python3
"""``tensorboard`` with one of the ideas of issue 34 that the tab does not ship, for
``bench_first_numbers.py --variant NAME`` to measure beside the shipped behaviour.

    python benchmarks/first_numbers_variants.py VARIANT [tensorboard's arguments]

- ``pool-only``: no analysis in the server's process; every file waits for the worker processes
  (the order is the shipped one: the run the tab opens on first).
- ``no-hold``: the shipped behaviour, but the worker processes start with the first file, not
  once TensorBoard has answered.
- ``defer-pool``: the shipped behaviour, but the worker processes start only once the machine is
  not saturated (no more runnable tasks than usable cores in ``/proc/loadavg``, four samples 0.25 s
  apart), or after 30 s; meanwhile every small file is analysed in the server's process.
- ``nice-here``: the shipped behaviour, with the server's analysis threads at nice -10 (needs
  CAP_SYS_NICE, as root has): what a higher priority would give, were it allowed.
- ``own-session``: the shipped behaviour, with each worker process in a session of its own
  (``os.setsid`` as it starts): under Linux's autogroup scheduling (on where the CPU cgroup is the
  root one, as on the development machine) a session shares the CPU with other sessions as a
  whole, so a worker no longer competes with torch-tb-profiler's loaders one process against
  each of theirs, all in TensorBoard's session.
- ``look-after-answer``: the shipped behaviour, but the run the tab opens on is analysed only once
  TensorBoard has answered (nothing of the tab's runs competes with TensorBoard's start).
- ``without-stock``: the shipped tab without torch-tb-profiler (TensorBoard's entry points less
  ``torch_profiler``): what TensorBoard's own start costs, for the launch-to-first-numbers goal.
- ``shipped``: nothing changed (the same launcher, for a like-for-like start-up).

The patches are put in here, around the tab's executor, and nowhere in the package.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from tb_mfu_plugin.running.jobs import usable_cores
from tb_mfu_plugin.tensorboard import executor_choice

DEFER_MAX_S = 30.0
VARIANT_ENV = "TB_MFU_BENCH_VARIANT"


def _own_session_children() -> None:
    """Each worker process calls setsid as it starts. Done at import, so that the fork server, which
    imports this script as its main module, hands the patched initializer to its children."""
    from tb_mfu_plugin.running import executors

    init = executors._init_child

    def init_in_own_session(*args: Any) -> None:
        os.setsid()
        init(*args)

    init_in_own_session.__module__, init_in_own_session.__qualname__ = init.__module__, init.__qualname__
    executors._init_child = init_in_own_session


if os.environ.get(VARIANT_ENV) == "own-session":
    _own_session_children()


def _runnable() -> int:
    """Tasks runnable now, this reader excepted (the 4th field of /proc/loadavg: running/total)."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[3].split("/")[0]) - 1


def _saturated() -> bool:
    samples = []
    for _ in range(4):
        samples.append(_runnable())
        time.sleep(0.25)
    return sorted(samples)[len(samples) // 2] > usable_cores()


def main() -> None:
    variant = sys.argv.pop(1)
    os.environ[VARIANT_ENV] = variant  # for the fork server, which imports this script again
    if variant == "own-session":
        _own_session_children()
    pool = executor_choice.StartingPool
    if variant == "pool-only":
        init = pool.__init__

        def ready_at_once(self: Any, *args: Any) -> None:
            init(self, *args)
            self.ready.set()  # "started": every file goes to the processes, which start on first use

        pool.__init__ = ready_at_once  # type: ignore[method-assign]
    elif variant == "no-hold":
        init = pool.__init__

        def at_once(self: Any, *args: Any) -> None:
            init(self, *args)
            self._answering = None  # the processes start with the first file, not after the answer

        pool.__init__ = at_once  # type: ignore[method-assign]
    elif variant == "defer-pool":
        run_start = pool._run_start

        def deferred(self: Any) -> None:
            give_up = time.monotonic() + DEFER_MAX_S
            while time.monotonic() < give_up and _saturated():
                pass
            run_start(self)

        pool._run_start = deferred  # type: ignore[method-assign]
    elif variant == "nice-here":
        submit = pool.submit

        def nicer(self: Any, job: Any, progress: Any = None) -> Any:
            tid = threading.get_native_id()
            if os.getpriority(os.PRIO_PROCESS, tid) != -10:
                os.setpriority(os.PRIO_PROCESS, tid, -10)  # this analysis thread only
            return submit(self, job, progress)

        pool.submit = nicer  # type: ignore[method-assign]
    elif variant == "look-after-answer":
        submit_first = pool.submit_first

        def after_answer(self: Any, job: Any, progress: Any = None) -> Any:
            if self._answering is not None:
                self._answering.wait()  # nothing of the tab's runs before TensorBoard answers
            return submit_first(self, job, progress)

        pool.submit_first = after_answer  # type: ignore[method-assign]
    elif variant == "without-stock":
        from tensorboard import default

        dynamic = default.get_dynamic_plugins

        def without_torch_profiler() -> list[Any]:
            return [p for p in dynamic() if "torch_tb_profiler" not in getattr(p, "__module__", "")]

        default.get_dynamic_plugins = without_torch_profiler
    elif variant not in ("shipped", "own-session"):
        raise SystemExit(f"unknown variant {variant!r}")
    from tensorboard.main import run_main

    sys.argv[0] = "tensorboard"
    run_main()


if __name__ == "__main__":
    main()
