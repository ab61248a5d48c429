"""What runs the tab's analyses: a stand-in function here (tests), a Dask cluster
(``--mfu_scheduler``) or local processes (``--mfu_workers``, each under
``--mfu_worker_max_memory``), and their end when the server exits.

``AnalysisCache`` makes its executor on first use (no process starts, no cluster is reached, for
a server whose files all come from the disk cache) and keeps it.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

from ..analysis.options import AnalysisOptions
from ..running.executors import ProcessExecutor, SerialExecutor
from ..running.jobs import AnalyzeFn, Executor
from ..running.memory_cap import memory_cap
from ..running.pipeline import analyze_file
from .settings import MEMORY_FLAG

T = TypeVar("T")


def make_executor(
    options: AnalysisOptions,
    workers: int,
    stand_in: AnalyzeFn | None = None,
    scheduler: str | None = None,
    worker_memory: str | None = None,
) -> Executor:
    """``stand_in`` run here, else the Dask ``scheduler``, else ``workers`` local processes.
    Raises ``SchedulerError`` when Dask is missing or the cluster cannot be reached."""
    if stand_in is not None:
        return SerialExecutor(stand_in, options)
    if scheduler:
        from ..running.dask_executor import DaskExecutor

        return DaskExecutor(analyze_file, options, scheduler)
    cap = memory_cap(worker_memory, workers, MEMORY_FLAG)
    return ProcessExecutor(analyze_file, options, workers, cap)


def close_at_exit(owner: T, close: Callable[[T], None]) -> None:
    """Call ``close(owner)`` when the server exits, before Python's own exit hook would wait for
    the processes' analyses to end (threading's exit hooks run last-registered first); a weak
    reference, so an owner gone before is not kept alive."""
    ref = weakref.ref(owner)

    def at_exit() -> None:
        o = ref()
        if o is not None:
            close(o)

    register = getattr(threading, "_register_atexit", None)
    if register is None:  # not CPython: at least at the interpreter's exit
        import atexit

        atexit.register(at_exit)
        return
    try:
        register(at_exit)
    except RuntimeError:  # already shutting down
        pass
