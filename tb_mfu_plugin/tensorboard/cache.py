"""Per-file analyses computed in the background, cached in memory and on disk.

A file is identified by its ``FileKey`` (``stored_reports``: location, size, mtime or a
remote object's ETag, run, worker); a trace that grows or is rewritten gets a new key and is
analysed again, and an unchanged object listed again is not downloaded again.
Daemon threads take files from a priority queue, so the file the user is looking
at jumps ahead of the rest, and remote files never hold every thread
(``file_queue``: a local run is analysed at once beside slow sources). Each file
goes to an executor (``executor_choice``): local processes by default (``--mfu_workers``,
``$TB_MFU_WORKERS``), each under the memory cap ``--mfu_worker_max_memory``, or a
Dask cluster (``--mfu_scheduler``). The server's threads thus only wait: the analysis holds no
GIL of theirs, and requests, which only read the state, stay quick. The one exception is the
first minute: until the local processes have started, a small file of a run looked at (the run
the tab opens on, or one a request asks for) is analysed in the server's process, by a thread
kept for those files alone (``StartingPool``; it costs 0.05 to 0.2 s of CPU a file).

The optional disk cache (``stored_reports``: never in the logdir; its entries' names
include a fingerprint of the analysis code, so an upgrade re-analyses) makes a file
found there ready at once:
looked up when the file is first requested (by the scan thread, for a new scan),
not queued behind the analyses.

No file can stop the others: whatever one file raises (in the analysis, in the
checks before it, while writing its cache entry) becomes that file's error, and
a worker thread that died anyway is replaced on the next request.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..analysis.options import AnalysisOptions
from ..analysis.report import WorkerReport
from ..core.escape import one_line
from ..running.flags import default_workers
from ..running.jobs import AnalyzeFn, Executor, FileJob, SchedulerError
from ..trace.locate.discover import SpanFile
from ..trace.locate.locations import Location
from ..trace.locate.opener import decoded_size
from ..trace.remote.redact import redacting_logger
from .disk_cache import DiskCache
from .executor_choice import StartingPool, close_at_exit, make_executor
from .file_queue import OPENED, FileQueue, remote_slots
from .settings import DEFAULT_CACHE_MAX_BYTES
from .stored_reports import FileKey, StoredReports

logger = redacting_logger(__name__)  # locations and errors in its lines: signatures blanked

QUEUED, LOADING, DONE, ERROR = "queued", "loading", "done", "error"

# refuse(path, worker) -> why the file must not be opened, or None (paths.FileGate.refusal)
RefuseFn = Callable[[Location, str], str | None]


@dataclass
class FileState:
    key: FileKey
    state: str = QUEUED
    bytes_read: int = 0  # uncompressed bytes decoded so far
    bytes_total: int = 0  # uncompressed size (estimated for gzip over 4 GiB)
    reports: list[WorkerReport] | None = None
    error: str | None = None  # the analysis failed as a whole (an unexpected exception)
    from_disk: bool = False
    started: float = 0.0
    seconds: float | None = None
    _priority: int = field(default=1, repr=False)

    @property
    def progress(self) -> float:
        if self.state in (DONE, ERROR):
            return 1.0
        if self.state == QUEUED or self.bytes_total <= 0:
            return 0.0
        return min(0.99, self.bytes_read / self.bytes_total)

    def errors(self) -> list[str]:
        if self.error:
            return [self.error]
        return [r.error for r in self.reports or [] if r.error]

    def worker_reports(self) -> list[WorkerReport]:
        """The file's reports, or one report of its error when the analysis failed as a whole."""
        if self.reports is not None:
            return self.reports
        if self.error:
            k = self.key
            return [WorkerReport(name=k.worker, span=k.span, file=k.path.text, error=self.error)]
        return []


class AnalysisCache:
    """Analyses of trace files, run by an executor on behalf of background threads.

    ``analyze`` (a stand-in for ``pipeline.analyze_file``, in tests) runs in the
    threads themselves, ``workers`` of them (default 1); otherwise the files go to
    ``workers`` local processes, or to the Dask ``scheduler``.
    """

    def __init__(
        self,
        options: AnalysisOptions | None = None,
        cache_dir: str | None = None,
        workers: int | None = None,
        analyze: AnalyzeFn | None = None,
        refuse: RefuseFn | None = None,
        *,
        scheduler: str | None = None,
        max_bytes: int = DEFAULT_CACHE_MAX_BYTES,
        worker_memory: str | None = None,
    ) -> None:
        self.options = options or AnalysisOptions()
        self.cache_dir = cache_dir
        self._stored = StoredReports(DiskCache(cache_dir, max_bytes), self.options) if cache_dir else None
        self._stand_in = analyze
        self._scheduler = scheduler
        self._worker_memory = worker_memory  # each process's cap: --mfu_worker_max_memory (memory_cap)
        self.refuse = refuse
        self._n_workers = max(1, workers or (1 if analyze is not None or scheduler else default_workers()))
        self._executor: Executor | None = None
        self._executor_error: str | None = None
        self._executor_lock = threading.Lock()
        self._lock = threading.Lock()
        self._entries: dict[FileKey, FileState] = {}
        # remote files never take every thread: a local file always finds one (file_queue)
        self._queue: FileQueue[FileKey] = FileQueue(lambda k: k.path.is_url, remote_slots(self._n_workers))
        self._threads: dict[threading.Thread, int | None] = {}  # each thread, and the priorities it takes
        self._thread_seq = itertools.count()
        self._pending = 0  # files queued or running: while any, the threads must be alive
        # The server has answered a request (TensorBoard is up): the local processes may start.
        self.answering = threading.Event()

    # -- keys ------------------------------------------------------------
    @staticmethod
    def key(span: SpanFile, run: str, worker: str, deps: tuple[tuple[str, int, int | str], ...] = ()) -> FileKey:
        return FileKey(span.path, span.size, span.mtime, run, worker, span.span, deps, span.ident)

    # -- requests --------------------------------------------------------
    def request(self, key: FileKey, priority: int = 1) -> FileState:
        """The state of ``key``; queues its analysis if it is new, unless the disk cache has it.
        Never waits for an analysis (a new key costs one small file read).

        A lower ``priority`` runs sooner; asking again with a lower one moves a
        queued file ahead.
        """
        with self._lock:
            st = self._entries.get(key)
            if st is not None:
                if st.state == QUEUED and priority < st._priority:
                    st._priority = priority
                    self._queue.put(priority, key)
                return st
        cached = self._from_disk(key)  # outside the lock: requests for other files go on
        with self._lock:
            st = self._entries.get(key)
            if st is None:
                st = FileState(key, _priority=priority)
                self._entries[key] = st
                if cached is not None:
                    st.reports, st.state, st.from_disk, st.seconds = cached, DONE, True, 0.0
                else:
                    self._pending += 1
                    self._queue.put(priority, key)
            if self._pending:
                self._ensure_threads()
            return st

    def get(self, key: FileKey) -> FileState | None:
        with self._lock:
            return self._entries.get(key)

    def close(self) -> None:
        """Stop the worker processes now (the server is exiting): running analyses are lost."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.terminate()

    # -- workers ---------------------------------------------------------
    def _ensure_threads(self) -> None:
        """Start the worker threads, and replace any that died (called under the lock). With local
        processes, one more thread takes only the files of runs looked at (``OPENED`` or lower), so
        that these never wait behind files that wait for the processes to start."""
        dead = [t for t in self._threads if not t.is_alive()]
        for t in dead:
            logger.error("MFU plugin: analysis thread %s had stopped; starting a new one", t.name)
            del self._threads[t]
        first_look = self._stand_in is None and self._scheduler is None
        wanted: list[int | None] = [None] * self._n_workers + ([OPENED] if first_look else [])
        for most in self._threads.values():
            wanted.remove(most)
        for most in wanted:
            name = "mfu-first-look" if most is not None else "mfu-analyse"
            t = threading.Thread(target=self._work, args=(most,), name=f"{name}-{next(self._thread_seq)}", daemon=True)
            self._threads[t] = most
            t.start()

    def _executor_now(self) -> Executor:
        """The executor, made on first use (``executor_choice``). Raises ``SchedulerError``."""
        with self._executor_lock:
            if self._executor is None:
                if self._executor_error is not None:
                    raise SchedulerError(self._executor_error)
                try:
                    self._executor = make_executor(
                        self.options,
                        self._n_workers,
                        self._stand_in,
                        self._scheduler,
                        self._worker_memory,
                        self.answering,
                    )
                except SchedulerError as exc:
                    self._executor_error = str(exc)  # said once per file, not retried per file
                    raise
                if self._scheduler and self._stand_in is None:
                    with self._lock:  # as many files in flight as the cluster has threads
                        self._n_workers = max(self._n_workers, self._executor.slots)
                        self._queue.slots = remote_slots(self._n_workers)
                        self._ensure_threads()
                close_at_exit(self, AnalysisCache.close)
            return self._executor

    def _work(self, most: int | None = None) -> None:
        while True:
            key = self._queue.get(most)
            try:
                self._take(key)
            finally:
                self._queue.done(key)

    def _take(self, key: FileKey) -> None:
        with self._lock:
            st = self._entries.get(key)
            if st is None or st.state != QUEUED:
                return  # a duplicate queue entry left by a priority bump
            st.state = LOADING
            st.started = time.monotonic()
        try:
            self._compute(st)
        except BaseException as exc:  # noqa: BLE001 - one file's failure is its error, never the thread's end
            logger.exception("MFU plugin: analysing %s failed", one_line(key.path.text))
            self._fail(st, f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._pending -= 1

    def _fail(self, st: FileState, reason: str) -> None:
        with self._lock:
            if st.state != DONE:  # an exception after the result (the cache write) keeps the result
                st.error = f"{st.key.path.text}: {' '.join(reason.split()) or 'failed'}"
                st.state = ERROR
            st.seconds = time.monotonic() - st.started

    def _compute(self, st: FileState) -> None:
        key = st.key
        refusal = self.refuse(key.path, key.worker) if self.refuse is not None else None
        if refusal is not None:
            self._fail(st, refusal)
            return
        st.bytes_total = decoded_size(key.path, key.size)

        def progress(n: int) -> None:
            st.bytes_read = n  # an int store: atomic under the GIL, read without the lock

        span = SpanFile(key.span, key.path, key.size, key.mtime, key.ident)
        try:
            executor, job = self._executor_now(), FileJob(span, key.worker)
            if isinstance(executor, StartingPool) and st._priority <= OPENED:
                done = executor.submit_first(job, progress)  # here while the processes start
            else:
                done = executor.submit(job, progress)
            reports = done.result()
        except SchedulerError as exc:
            self._fail(st, str(exc))
            return
        with self._lock:
            st.reports, st.state = list(reports), DONE
            st.seconds = time.monotonic() - st.started
        if not any(r.error for r in reports):  # errors may be transient (a file still being written)
            self._write_disk(key, st.reports)

    # -- disk ------------------------------------------------------------
    def _from_disk(self, key: FileKey) -> list[WorkerReport] | None:
        """The file's reports from the disk cache, if it has them and the file may be opened."""
        if self._stored is None or (self.refuse is not None and self.refuse(key.path, key.worker) is not None):
            return None
        return self._stored.read(key)

    def _write_disk(self, key: FileKey, reports: list[WorkerReport]) -> None:
        if self._stored is not None:
            self._stored.write(key, reports)
