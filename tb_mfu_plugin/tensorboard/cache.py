"""Per-file analyses computed in the background, cached in memory and on disk.

A file is identified by (location, size, mtime) plus the run and worker it belongs
to, and for a remote object or an archive member by its store's identity (ETag or
version id, ``SpanFile.ident``) and size instead of a date; a trace that grows or
is rewritten gets a new key and is analysed again, and an unchanged object listed
again is not downloaded again.
Daemon threads take files from a priority queue, so the file the user is looking
at jumps ahead of the rest, and remote files never hold every thread
(``file_queue``: a local run is analysed at once beside slow sources). Each file
goes to an executor (``executors``): local processes by default (``--mfu_workers``,
``$TB_MFU_WORKERS``), each under the memory cap ``--mfu_worker_max_memory``, or a
Dask cluster (``--mfu_scheduler``). The server's threads thus only wait: the analysis holds no
GIL of theirs, and requests, which only read the state, stay quick.

The optional disk cache lives in a user cache directory (``--mfu_cache_dir``,
``$TB_MFU_CACHE_DIR``, else ``$XDG_CACHE_HOME/tb_mfu_plugin`` or
``~/.cache/tb_mfu_plugin``), never in the logdir, bounded by
``--mfu_cache_max_bytes`` (``disk_cache``). Its key includes a fingerprint of the
analysis code, so an upgrade re-analyses. A file found there is ready at once:
looked up when the file is first requested (by the scan thread, for a new scan),
not queued behind the analyses.

No file can stop the others: whatever one file raises (in the analysis, in the
checks before it, while writing its cache entry) becomes that file's error, and
a worker thread that died anyway is replaced on the next request.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from ..analysis.options import AnalysisOptions
from ..analysis.report import SCHEMA_VERSION, WorkerReport
from ..core.escape import json_bytes, one_line
from ..running.executors import ProcessExecutor, SerialExecutor
from ..running.jobs import AnalyzeFn, Executor, FileJob, SchedulerError
from ..running.memory_cap import memory_cap
from ..running.pipeline import analyze_file
from ..trace.locate.discover import SpanFile
from ..trace.locate.locations import is_local
from ..trace.locate.opener import decoded_size
from ..trace.remote.redact import redacting_logger
from .disk_cache import DiskCache
from .env import CACHE_DIR_ENV
from .file_queue import FileQueue, is_remote_file, remote_slots
from .settings import DEFAULT_CACHE_MAX_BYTES, MEMORY_FLAG, default_workers, stagger_for_tests_s

logger = redacting_logger(__name__)  # locations and errors in its lines: signatures blanked

QUEUED, LOADING, DONE, ERROR = "queued", "loading", "done", "error"

# refuse(path, worker) -> why the file must not be opened, or None (paths.FileGate.refusal)
RefuseFn = Callable[[str, str], str | None]

_reports_decoder = msgspec.json.Decoder(list[WorkerReport])


@dataclass(frozen=True)
class FileKey:
    path: str
    size: int
    mtime: float
    run: str
    worker: str
    span: str
    deps: tuple[tuple[str, int, int | str], ...] = ()  # other inputs of the analysis (sidecar files)
    ident: str = ""  # a remote object's ETag or version id (SpanFile.ident)


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
            return [WorkerReport(name=k.worker, span=k.span, file=k.path, error=self.error)]
        return []


def default_cache_dir(flag_value: str | None = None) -> str | None:
    """The disk cache folder, or None when turned off (``none``, ``off`` or empty)."""
    value = flag_value if flag_value is not None else os.environ.get(CACHE_DIR_ENV)
    if value is not None:
        if value.strip().lower() in ("", "none", "off", "0", "false"):
            return None
        return os.path.expanduser(value)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tb_mfu_plugin")


_fingerprint: str | None = None


def code_fingerprint() -> str:
    """Changes whenever the analysis code does: the version plus the sources' sizes and mtimes."""
    global _fingerprint
    if _fingerprint is None:
        import tb_mfu_plugin

        root = os.path.dirname(os.path.abspath(tb_mfu_plugin.__file__))
        h = hashlib.sha256(f"{getattr(tb_mfu_plugin, '__version__', '')}|{SCHEMA_VERSION}".encode())
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in ("tensorboard", "__pycache__"))
            for fn in sorted(filenames):
                if fn.endswith(".py"):
                    p = os.path.join(dirpath, fn)
                    try:
                        st = os.stat(p)
                    except OSError:
                        continue
                    h.update(f"{os.path.relpath(p, root)}:{st.st_size}:{st.st_mtime_ns}".encode())
        _fingerprint = h.hexdigest()[:16]
    return _fingerprint


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
        self._disk = DiskCache(cache_dir, max_bytes) if cache_dir else None
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
        self._queue: FileQueue[FileKey] = FileQueue(lambda k: is_remote_file(k.path), remote_slots(self._n_workers))
        self._threads: list[threading.Thread] = []
        self._thread_seq = itertools.count()
        self._idle = threading.Condition(self._lock)
        self._pending = 0
        self._stagger_s = stagger_for_tests_s()
        self._finished = itertools.count()

    # -- keys ------------------------------------------------------------
    @staticmethod
    def key(span: SpanFile, run: str, worker: str, deps: tuple[tuple[str, int, int | str], ...] = ()) -> FileKey:
        return FileKey(span.path, span.size, span.mtime, run, worker, span.span, deps, span.ident)

    def _disk_name(self, key: FileKey) -> str:
        ident = json.dumps(
            [
                os.path.abspath(key.path) if is_local(key.path) else key.path,
                key.size,
                key.mtime,
                key.ident,
                key.run,
                key.worker,
                key.span,
                [list(d) for d in key.deps],
                repr(self.options),
                code_fingerprint(),
            ]
        )
        return hashlib.sha256(ident.encode()).hexdigest()

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

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or running (for tests and tools)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def close(self) -> None:
        """Stop the worker processes now (the server is exiting): running analyses are lost."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.terminate()

    # -- workers ---------------------------------------------------------
    def _ensure_threads(self) -> None:
        """Start the worker threads, and replace any that died (called under the lock)."""
        dead = [t for t in self._threads if not t.is_alive()]
        for t in dead:
            logger.error("MFU plugin: analysis thread %s had stopped; starting a new one", t.name)
        self._threads = [t for t in self._threads if t.is_alive()]
        while len(self._threads) < self._n_workers:
            t = threading.Thread(target=self._work, name=f"mfu-analyse-{next(self._thread_seq)}", daemon=True)
            self._threads.append(t)
            t.start()

    def _executor_now(self) -> Executor:
        """The executor, made on first use (no process starts, no cluster is reached, for a
        server whose files all come from the disk cache). Raises ``SchedulerError``."""
        with self._executor_lock:
            if self._executor is None:
                if self._executor_error is not None:
                    raise SchedulerError(self._executor_error)
                if self._stand_in is not None:
                    self._executor = SerialExecutor(self._stand_in, self.options)
                elif self._scheduler:
                    from ..running.dask_executor import DaskExecutor

                    try:
                        self._executor = DaskExecutor(analyze_file, self.options, self._scheduler)
                    except SchedulerError as exc:
                        self._executor_error = str(exc)  # said once per file, not retried per file
                        raise
                    with self._lock:  # as many files in flight as the cluster has threads
                        self._n_workers = max(self._n_workers, self._executor.slots)
                        self._queue.slots = remote_slots(self._n_workers)
                        self._ensure_threads()
                else:
                    cap = memory_cap(self._worker_memory, self._n_workers, MEMORY_FLAG)
                    self._executor = ProcessExecutor(analyze_file, self.options, self._n_workers, cap)
                _close_at_exit(self)
            return self._executor

    def _work(self) -> None:
        while True:
            key = self._queue.get()
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
            logger.exception("MFU plugin: analysing %s failed", one_line(key.path))
            self._fail(st, f"{type(exc).__name__}: {exc}")
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def _fail(self, st: FileState, reason: str) -> None:
        with self._lock:
            if st.state != DONE:  # an exception after the result (the cache write) keeps the result
                st.error = f"{st.key.path}: {' '.join(reason.split()) or 'failed'}"
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
            reports = self._executor_now().submit(FileJob(span, key.worker), progress).result()
        except SchedulerError as exc:
            self._fail(st, str(exc))
            return
        if self._stagger_s:  # test hook (env.TEST_STAGGER_ENV): the k-th file to finish waits k steps
            time.sleep(self._stagger_s * next(self._finished))
        with self._lock:
            st.reports, st.state = list(reports), DONE
            st.seconds = time.monotonic() - st.started
        if not any(r.error for r in reports):  # errors may be transient (a file still being written)
            self._write_disk(key, st.reports)

    # -- disk ------------------------------------------------------------
    def _from_disk(self, key: FileKey) -> list[WorkerReport] | None:
        """The file's reports from the disk cache, if it has them and the file may be opened."""
        if self._disk is None or (self.refuse is not None and self.refuse(key.path, key.worker) is not None):
            return None
        data = self._disk.read(self._disk_name(key))
        if data is None:
            return None
        try:
            return _reports_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            logger.info("MFU plugin: ignoring unreadable cache entry for %s (%s)", one_line(key.path), one_line(exc))
            return None

    def _write_disk(self, key: FileKey, reports: list[WorkerReport]) -> None:
        if self._disk is None:
            return
        try:
            data = json_bytes(reports)  # names that are not UTF-8 are stored escaped
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written costs speed, never the result
            logger.warning("MFU plugin: cannot encode the cache entry of %s (%s)", one_line(key.path), one_line(exc))
            return
        self._disk.write(self._disk_name(key), data)


def _close_at_exit(cache: AnalysisCache) -> None:
    """Kill the cache's processes when the server exits, before Python's own exit hook would
    wait for their analyses to end (threading's exit hooks run last-registered first)."""
    ref = weakref.ref(cache)

    def close() -> None:
        c = ref()
        if c is not None:
            c.close()

    register = getattr(threading, "_register_atexit", None)
    if register is None:  # not CPython: at least at the interpreter's exit
        import atexit

        atexit.register(close)
        return
    try:
        register(close)
    except RuntimeError:  # already shutting down
        pass
