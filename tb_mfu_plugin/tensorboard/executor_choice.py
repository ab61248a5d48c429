"""What runs the tab's analyses: a stand-in function here (tests), a Dask cluster
(``--mfu_scheduler``) or local processes (``--mfu_workers``, each under
``--mfu_worker_max_memory``), and their end when the server exits.

``AnalysisCache`` makes its executor on first use (no process starts, no cluster is reached, for
a server whose files all come from the disk cache) and keeps it.

The local processes start in the background (``StartingPool``), and until every one of them has
answered, a small local file is analysed here, in the server's own process, at once. Their
start-up is an interpreter that imports TensorBoard and the analysis (about 1 s of CPU); beside
torch-tb-profiler, whose loader starts one process per trace file, each importing pandas, that
second took 30 to 70 s on a 2-core machine, and the run the tab opened on waited for it. The
analysis of a small file here costs 0.05 to 0.2 s of CPU, with everything it needs imported
already (docs/scaling.md, "The first minute").
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from ..analysis.options import AnalysisOptions
from ..analysis.report import WorkerReport
from ..running.executors import ProcessExecutor, SerialExecutor
from ..running.jobs import AnalyzeFn, Executor, FileJob, ProgressFn
from ..running.memory_cap import memory_cap
from ..running.pipeline import analyze_file
from ..trace.locate.opener import decoded_size
from .settings import MEMORY_FLAG
from .shutdown import on_stop

T = TypeVar("T")
logger = logging.getLogger(__name__)


def make_executor(
    options: AnalysisOptions,
    workers: int,
    stand_in: AnalyzeFn | None = None,
    scheduler: str | None = None,
    worker_memory: str | None = None,
    answering: threading.Event | None = None,
) -> Executor:
    """``stand_in`` run here, else the Dask ``scheduler``, else ``workers`` local processes, which
    start once ``answering`` is set (the server has answered a request) or ``HOLD_MAX_S`` have passed.
    Raises ``SchedulerError`` when Dask is missing or the cluster cannot be reached."""
    if stand_in is not None:
        return SerialExecutor(stand_in, options)
    if scheduler:
        from ..running.dask_executor import DaskExecutor

        return DaskExecutor(analyze_file, options, scheduler)
    cap = memory_cap(worker_memory, workers, MEMORY_FLAG)
    pool = ProcessExecutor(analyze_file, options, workers, cap)
    return StartingPool(pool, SerialExecutor(analyze_file, options), answering)


# The most decoded bytes of a file analysed in the server's process while the pool starts: about
# 0.5 s of one core and 16 MB of memory, with no memory cap but the file caps (docs/limits.md).
HERE_MAX_BYTES = 32 << 20
# The processes start once TensorBoard has answered a first request, or after this long: until then
# they would only slow TensorBoard's own start (measured: docs/scaling.md, "The first minute").
HOLD_MAX_S = 30.0


class StartingPool(Executor):
    """Local processes started in the background on first use, once ``answering`` is set (the
    server has answered a request: TensorBoard is up) or ``HOLD_MAX_S`` later: started at once, they
    only slowed TensorBoard's own start. Until all have answered, a file of a run looked at
    (``submit_first``) is analysed ``here``, in this process, at once, if it is local and at most
    ``HERE_MAX_BYTES`` decoded; any other file waits for the processes, so that the server's own
    process (its GIL, its memory) analyses no more than the user looks at."""

    def __init__(self, pool: ProcessExecutor, here: Executor, answering: threading.Event | None = None) -> None:
        self.slots = pool.slots
        self.pool = pool
        self._here = here
        self._answering = answering
        self._lock = threading.Lock()
        self._here_lock = threading.Lock()
        self._starter: threading.Thread | None = None
        self._starting = threading.Event()  # the hold is over: the processes start
        self.ready = threading.Event()  # every process has answered, or starting them failed

    def submit(self, job: FileJob, progress: ProgressFn | None = None) -> Future[list[WorkerReport]]:
        self._start()
        self._starting.wait()  # the caller, a thread of the cache's, only waits
        return self.pool.submit(job, progress)

    def submit_first(self, job: FileJob, progress: ProgressFn | None = None) -> Future[list[WorkerReport]]:
        """A file of a run the user looks at: here while the processes start (see the class)."""
        self._start()
        loc = job.span.path
        if not self.ready.is_set() and not loc.is_url and decoded_size(loc, job.span.size) <= HERE_MAX_BYTES:
            with self._here_lock:  # one at a time: the GIL runs one anyway, and the memory is one file's
                return self._here.submit(job, progress)
        self._starting.wait()
        return self.pool.submit(job, progress)

    def _start(self) -> None:
        if self._starter is not None:
            return
        with self._lock:
            if self._starter is not None:
                return
            self._starter = threading.Thread(target=self._run_start, name="mfu-pool-start", daemon=True)
            self._starter.start()

    def _run_start(self) -> None:
        if self._answering is not None:
            self._answering.wait(HOLD_MAX_S)
        self._starting.set()
        t0 = time.monotonic()
        started = False
        try:
            started = self.pool.start()
        finally:  # started or not, the files go to the pool from now on (a failed start is their error)
            self.ready.set()
            took = time.monotonic() - t0
            logger.info(
                "MFU plugin: %d analysis processes %s in %.1f s", self.slots, "ready" if started else "failed", took
            )

    def close(self) -> None:
        self.pool.close()

    def terminate(self) -> None:
        self.pool.terminate()


def close_at_exit(owner: T, close: Callable[[T], None]) -> None:
    """Call ``close(owner)`` when the server exits, before Python's own exit hook would wait for
    the processes' analyses to end (threading's exit hooks run last-registered first), and at once
    on SIGTERM or Ctrl-C (``shutdown``); a weak reference, so an owner gone before is not kept alive."""
    on_stop(owner, close)
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
