#!/usr/bin/env python3
"""``tensorboard`` with one of the ideas of issue 34 that the tab does not ship, for
``bench_first_numbers.py --variant NAME`` to measure beside the shipped behaviour.

    python benchmarks/first_numbers_variants.py VARIANT [tensorboard's arguments]

- ``pool-only``: no analysis in the server's process; every file waits for the worker processes
  (the order is the shipped one: the run the tab opens on first).
- ``defer-pool``: the shipped behaviour, but the worker processes start only once the machine is
  not saturated (no more runnable tasks than usable cores in ``/proc/loadavg``, four samples 0.25 s
  apart), or after 30 s; meanwhile every small file is analysed in the server's process.
- ``nice-here``: the shipped behaviour, with the server's analysis threads at nice -10 (needs
  CAP_SYS_NICE, as root has): what a higher priority would give, were it allowed.
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
    pool = executor_choice.StartingPool
    if variant == "pool-only":
        init = pool.__init__

        def ready_at_once(self: Any, *args: Any) -> None:
            init(self, *args)
            self.ready.set()  # "started": every file goes to the processes, which start on first use

        pool.__init__ = ready_at_once  # type: ignore[method-assign]
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
    elif variant != "shipped":
        raise SystemExit(f"unknown variant {variant!r}")
    from tensorboard.main import run_main

    sys.argv[0] = "tensorboard"
    run_main()


if __name__ == "__main__":
    main()
