"""Where trace files are analysed: in this process, in local processes, or on a Dask cluster.

Every executor takes one file at a time (a ``FileJob``: its span and its worker's
name) and answers with a ``concurrent.futures.Future`` of that file's reports. The
pipeline submits the files and assembles the ``RunReport``s in discovery order, so
the result does not depend on which executor ran them, nor on the order they ended.

Only the file's *name* goes out and only its compact reports come back, encoded by
msgspec (``encode_reports``): a worker process never sends tables or trace bytes.
No executor raises for a file: whatever happens to one (an exception, a process
killed for memory, a Dask task lost) becomes that file's error report, and the
other files go on.

``ProcessExecutor`` feeds at most ``slots`` files to its pool at once, so when a
process dies the files it may have been running are known: each is run again
alone in a fresh process, and the one that kills that process too gets the error.
Each of its processes runs under a memory cap (``memory_cap``): a file that needs
more gets the one-line error "analysis ran out of its memory cap", and no process
can grow until the kernel's OOM killer picks the server.
"""

from __future__ import annotations

import functools
import itertools
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from ..analysis.options import AnalysisOptions
from ..analysis.report import WorkerReport
from ..core.small_pages import prefer_small_pages
from ..trace.limits import format_size
from ..trace.remote.redact import redacting_logger
from .flags import default_workers
from .jobs import (
    AnalyzeFn,
    Executor,
    FileJob,
    ProgressFn,
    decoded_or_error,
    encode_reports,
    error_reports,
    run_job,
)
from .memory_cap import MEMORY_ENV, MEMORY_FLAG, MemoryCap, memory_cap
from .memory_cap import apply as apply_memory_cap

logger = redacting_logger(__name__)  # locations in its lines: signatures blanked

# A child sends its progress at most this often: the parent's bar needs no more.
PROGRESS_INTERVAL_S = 0.1
_PR_SET_PDEATHSIG = 1  # prctl(2)
STOP_LOCK_S = 0.2  # terminate waits this long at most for a submit under way


class SerialExecutor(Executor):
    """In this process, in the submitting thread: ``--jobs 1``, one file, or a test's stand-in."""

    def __init__(self, analyze: AnalyzeFn, options: AnalysisOptions) -> None:
        self._analyze = analyze
        self._options = options

    def submit(self, job: FileJob, progress: ProgressFn | None = None) -> Future[list[WorkerReport]]:
        out: Future[list[WorkerReport]] = Future()
        try:
            out.set_result(self._analyze(job.span, job.worker, self._options, progress))
        except Exception as exc:  # noqa: BLE001 - the pipeline should not raise; if it does, it is the file's error
            out.set_result(error_reports(job, f"analysis failed: {type(exc).__name__}: {exc}"))
        return out


# -- local processes ------------------------------------------------------------------

_child_progress: Any = None  # the progress queue, in a worker process


def _init_child(queue: Any, environ: dict[str, str], memory: MemoryCap | None = None) -> None:
    global _child_progress
    _child_progress = queue
    # A forkserver child inherits the environment of the fork server, which started with the
    # first pool of this process: storage options and credentials set since (a plugin's
    # --mfu_storage_options, a second server in one process) would be missing.
    os.environ.clear()
    os.environ.update(environ)
    prefer_small_pages()
    apply_memory_cap(memory)
    # Ctrl-C reaches every process of the terminal's job: the parent ends its processes itself
    # (terminate), so a child prints no KeyboardInterrupt of its own. And a child whose parent
    # is gone (killed outright) ends too, rather than wait for ever for files that never come.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent ends (the fork server, or the process that forked
    it from its only thread). Elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent ended before the call: no signal will come
        os._exit(1)


def _answer() -> None:
    """What a process runs to say it has started (``ProcessExecutor.start``)."""


def _run_in_child(
    analyze: AnalyzeFn, task_id: int, job: FileJob, options: AnalysisOptions, memory: MemoryCap | None = None
) -> bytes:
    last = 0.0

    def progress(n: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_INTERVAL_S and _child_progress is not None:
            last = now
            _child_progress.put((task_id, n))

    if memory is None:
        return run_job(analyze, job, options, progress)
    try:
        reports = analyze(job.span, job.worker, options, progress)
    except MemoryError:
        reports = None  # the memory it held is free again once the exception is gone
    if reports is None:
        return encode_reports(error_reports(job, memory.error()))
    for r in reports:  # the analysis says "out of memory" its own way; the cap is what ran out
        r.error = memory.rewrite(r.error)
    return encode_reports(reports)


def process_context() -> Any:
    """fork where it is safe (a process with one thread, as the CLI without its bar): it starts
    at once and inherits the imported analysis. Otherwise forkserver (the TensorBoard server's
    threads), whose server imports the main module and the analysis once for all children, in a
    session of its own (``own_session``); spawn where neither exists."""
    methods = mp.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return mp.get_context("fork")
    if "forkserver" in methods:
        ctx = mp.get_context("forkserver")
        # own_session first: it moves to a session of its own, then imports the main module (which
        # a "__main__" here would have imported before it), so all is imported, and every process
        # forked, in a session apart from the server's
        ctx.set_forkserver_preload(["tb_mfu_plugin.running.own_session", "tb_mfu_plugin.running.pipeline"])
        return ctx
    return mp.get_context("spawn")


def _shareable_context() -> Any:
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


@dataclass(eq=False)
class _Task:
    id: int
    job: FileJob
    progress: ProgressFn | None
    out: Future[list[WorkerReport]] = field(default_factory=Future)
    isolated: bool = False  # running alone after a process died under it


class ProcessExecutor(Executor):
    """A pool of ``slots`` local processes; files beyond ``slots`` wait here, in order."""

    def __init__(
        self, analyze: AnalyzeFn, options: AnalysisOptions, slots: int, memory: MemoryCap | None = None
    ) -> None:
        self.slots = max(1, slots)
        self._analyze = analyze
        self._options = options
        self.memory = memory  # each process's cap (None: none)
        self._lock = threading.RLock()  # a future already done runs its callback in submit's thread
        self._waiting: deque[_Task] = deque()
        self._running = 0
        self._pool: ProcessPoolExecutor | None = None
        self._isolated: set[ProcessPoolExecutor] = set()
        self._queue: Any = None
        self._drain: threading.Thread | None = None
        self._callbacks: dict[int, ProgressFn] = {}
        self._ids = itertools.count()
        self._closed = False

    def submit(self, job: FileJob, progress: ProgressFn | None = None) -> Future[list[WorkerReport]]:
        task = _Task(next(self._ids), job, progress)
        with self._lock:
            if self._closed:
                raise RuntimeError("executor closed")
            self._waiting.append(task)
            self._pump()
        return task.out

    def start(self, timeout: float | None = None) -> bool:
        """Start every process of the pool now, ahead of any file, and wait (at most ``timeout``
        seconds) until each has answered; True when all have. The first file then meets no
        start-up: under a fork server that start-up is an interpreter importing the analysis."""
        with self._lock:
            if self._closed:
                return False
            pool = self._shared_pool()
        try:  # outside the lock: the first submit waits for the fork server to start
            answers = [pool.submit(_answer) for _ in range(self.slots)]
        except Exception:  # noqa: BLE001 - a broken or closed pool: the files will say why
            return False
        done, _ = wait(answers, timeout)
        return len(done) == len(answers) and all(not f.cancelled() and f.exception() is None for f in answers)

    def close(self) -> None:
        self._stop(kill=False)

    def terminate(self) -> None:
        self._stop(kill=True)

    def _stop(self, kill: bool) -> None:
        # Killing waits for no lock long: a thread may hold it while its submit waits for the fork
        # server to start a process, for as long as the machine makes that take.
        held = self._lock.acquire(timeout=STOP_LOCK_S if kill else -1)
        try:
            self._closed = True
            pools = [p for p in (self._pool, *self._isolated) if p is not None]
            self._pool = None
            waiting = list(self._waiting)
            self._waiting.clear()
        finally:
            if held:
                self._lock.release()
        for task in waiting:
            task.out.cancel()
        for pool in pools:
            if kill:  # the pool's shutdown would wait for the running files; it has no kill of its own
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    proc.kill()
                # its shutdown takes the lock its submit holds while a process starts: not waited for
                stop = functools.partial(pool.shutdown, wait=False, cancel_futures=True)
                threading.Thread(target=stop, name="tb-mfu-stop", daemon=True).start()
            else:
                pool.shutdown(wait=True, cancel_futures=True)
        if self._queue is not None:
            self._queue.put(None)  # ends the drain thread
            if not kill:  # killing waits for no thread: the drain, a daemon, ends on the None
                if self._drain is not None:
                    self._drain.join(5)
                self._queue.close()  # not under the drain's read: closing it there breaks the read

    # -- feeding the pool (under the lock) ------------------------------------------
    def _pump(self) -> None:
        while self._waiting and self._running < self.slots:
            task = self._waiting.popleft()
            self._running += 1
            self._start(task)

    def _start(self, task: _Task) -> None:
        pool: ProcessPoolExecutor | None = None
        try:
            pool = self._new_pool(1) if task.isolated else self._shared_pool()
            if task.isolated:
                self._isolated.add(pool)
            if task.progress is not None:
                self._callbacks[task.id] = task.progress
            fut: Future[bytes] = pool.submit(
                _run_in_child, self._analyze, task.id, task.job, self._options, self.memory
            )
        except Exception as exc:  # noqa: BLE001 - no process (limits, a broken pool): this file's error
            fut = Future()
            fut.set_exception(exc)
        self._relay()
        fut.add_done_callback(functools.partial(self._done, task, pool))

    def _shared_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = self._new_pool(self.slots)
        return self._pool

    def _new_pool(self, n: int) -> ProcessPoolExecutor:
        if self._queue is None:
            # From a context that can also hand it to forkserver children (one made for fork
            # cannot be), as a later pool may start while threads run.
            self._queue = _shareable_context().Queue()
        return ProcessPoolExecutor(
            n,
            mp_context=process_context(),
            initializer=_init_child,
            initargs=(self._queue, dict(os.environ), self.memory),
        )

    def _relay(self) -> None:
        """Start relaying progress, once the first children are forked (fork copies no thread)."""
        if self._drain is None:
            self._drain = threading.Thread(target=self._relay_progress, name="tb-mfu-progress", daemon=True)
            self._drain.start()

    # -- results ----------------------------------------------------------------------
    def _done(self, task: _Task, pool: ProcessPoolExecutor | None, fut: Future[bytes]) -> None:
        try:
            if self._settle(task, pool, fut):
                return
            result = self._outcome(task, fut)
        except Exception as exc:  # noqa: BLE001 - a callback that raises would leave the file's future pending forever
            logger.exception("tb-mfu: settling %s failed", task.job.span.path.text)
            result = error_reports(task.job, f"analysis failed: {type(exc).__name__}: {exc}")
        if not task.out.done():
            task.out.set_result(result)

    def _settle(self, task: _Task, pool: ProcessPoolExecutor | None, fut: Future[bytes]) -> bool:
        """Frees the task's slot and feeds the pool; True when the task was started again,
        alone, because a process died under it."""
        exc = fut.exception() if not fut.cancelled() else None
        with self._lock:
            self._callbacks.pop(task.id, None)
            if task.isolated and pool is not None:
                self._isolated.discard(pool)
                pool.shutdown(wait=False)
            if isinstance(exc, BrokenProcessPool) and not task.isolated and not self._closed:
                # A process died: this file may have killed it, or merely have shared the pool.
                # Run it alone to tell; it keeps its slot.
                if pool is not None and self._pool is pool:
                    self._pool = None
                    pool.shutdown(wait=False)
                task.isolated = True
                self._start(task)
                return True
            self._running -= 1
            if not self._closed:
                self._pump()
        return False

    def _outcome(self, task: _Task, fut: Future[bytes]) -> list[WorkerReport]:
        if fut.cancelled():
            return error_reports(task.job, "analysis cancelled")
        exc = fut.exception()
        if exc is None:
            return decoded_or_error(task.job, fut.result())
        if isinstance(exc, BrokenProcessPool):
            cap = f"; its memory cap is {format_size(self.memory.bytes)}" if self.memory else ""
            return error_reports(task.job, f"the analysis process died (killed, e.g. for lack of memory{cap})")
        if isinstance(exc, MemoryError) and self.memory is not None:  # out of memory outside the analysis
            return error_reports(task.job, self.memory.error())
        return error_reports(task.job, f"analysis failed: {type(exc).__name__}: {exc}")

    def _relay_progress(self) -> None:
        """Hands each child's progress to its file's callback (a stale one, after the file
        finished, is dropped: its callback is gone)."""
        while True:
            try:
                item = self._queue.get()
            except (EOFError, OSError):
                return
            if item is None:
                return
            task_id, n = item
            with self._lock:
                callback = self._callbacks.get(task_id)
            if callback is not None:
                try:
                    callback(n)
                except Exception:  # a display's failure must not stop the relay
                    logger.exception("progress callback failed")


def open_executor(
    analyze: AnalyzeFn,
    options: AnalysisOptions,
    jobs: int | None = None,
    scheduler: str | None = None,
    files: int | None = None,
    memory: str | None = None,
) -> Executor:
    """The executor for ``jobs`` processes (default: ``flags.default_workers()``) or a Dask
    ``scheduler`` (``tcp://host:8786``, or ``local`` for a LocalCluster of ``jobs`` workers).

    No more local processes than ``files``; one file or ``jobs=1`` runs here, in this process.
    Each process runs under the memory cap ``memory`` (a size or ``none``, as ``--worker-max-memory``
    gives it; None: ``$TB_MFU_WORKER_MAX_MEMORY``, else the default of ``memory_cap``).
    Raises ``SchedulerError`` with a one-line reason when Dask is missing or unreachable.
    """
    if scheduler:
        from .dask_executor import DaskExecutor

        return DaskExecutor(analyze, options, scheduler, jobs)
    n = jobs if jobs is not None and jobs > 0 else default_workers()
    if files is not None:
        n = min(n, files)
    if n <= 1:
        return SerialExecutor(analyze, options)
    return ProcessExecutor(analyze, options, n, memory_cap(memory, n, MEMORY_FLAG if memory else f"${MEMORY_ENV}"))
