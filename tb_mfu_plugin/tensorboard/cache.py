"""Per-file analyses computed in the background, cached in memory and on disk.

A file is identified by (location, size, mtime) plus the run and worker it belongs
to, and for a remote object or an archive member by its store's identity (ETag or
version id, ``SpanFile.ident``) and size instead of a date; a trace that grows or
is rewritten gets a new key and is analysed again, and an unchanged object listed
again is not downloaded again.
Work happens in daemon threads fed by a priority queue, so the file the user
is looking at jumps ahead of the rest. Requests only read the state.

The optional disk cache lives in a user cache directory (``--mfu_cache_dir``,
``$TB_MFU_CACHE_DIR``, else ``$XDG_CACHE_HOME/tb_mfu_plugin`` or
``~/.cache/tb_mfu_plugin``), never in the logdir. Entries are written to a
temporary file and renamed, so a reader never sees half an entry, and their
key includes a fingerprint of the analysis code, so an upgrade re-analyses.

No file can stop the others: whatever one file raises (in the analysis, in the
checks before it, while writing its cache entry) becomes that file's error, and
a worker thread that died anyway is replaced on the next request.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from ..analysis.report import SCHEMA_VERSION, WorkerReport
from ..escape import json_bytes, one_line
from ..options import AnalysisOptions
from ..pipeline import ProgressFn, analyze_file
from ..trace.discover import SpanFile
from ..trace.locations import is_local
from ..trace.opener import decoded_size
from .env import CACHE_DIR_ENV, WORKERS_ENV

logger = logging.getLogger(__name__)

QUEUED, LOADING, DONE, ERROR = "queued", "loading", "done", "error"

# pipeline.analyze_file, or a stand-in of the same shape (tests)
AnalyzeFn = Callable[[SpanFile, str, AnalysisOptions, ProgressFn], list[WorkerReport]]
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
    """Analyses of trace files, computed by background threads."""

    def __init__(
        self,
        options: AnalysisOptions | None = None,
        cache_dir: str | None = None,
        workers: int | None = None,
        analyze: AnalyzeFn | None = None,
        refuse: RefuseFn | None = None,
    ) -> None:
        self.options = options or AnalysisOptions()
        self.cache_dir = cache_dir
        self._analyze = analyze or analyze_file
        self.refuse = refuse
        if workers is None:
            try:
                workers = int(os.environ.get(WORKERS_ENV, "1"))
            except ValueError:
                workers = 1
        self._n_workers = max(1, workers)
        self._lock = threading.Lock()
        self._entries: dict[FileKey, FileState] = {}
        self._queue: queue.PriorityQueue[tuple[int, int, FileKey]] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._thread_seq = itertools.count()
        self._idle = threading.Condition(self._lock)
        self._pending = 0

    # -- keys ------------------------------------------------------------
    @staticmethod
    def key(span: SpanFile, run: str, worker: str, deps: tuple[tuple[str, int, int | str], ...] = ()) -> FileKey:
        return FileKey(span.path, span.size, span.mtime, run, worker, span.span, deps, span.ident)

    def _disk_path(self, key: FileKey) -> str | None:
        if not self.cache_dir:
            return None
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
        return os.path.join(self.cache_dir, hashlib.sha256(ident.encode()).hexdigest() + ".json")

    # -- requests --------------------------------------------------------
    def request(self, key: FileKey, priority: int = 1) -> FileState:
        """The state of ``key``; queues its analysis if it is new. Never blocks on work.

        A lower ``priority`` runs sooner; asking again with a lower one moves a
        queued file ahead.
        """
        with self._lock:
            st = self._entries.get(key)
            if st is None:
                st = FileState(key, _priority=priority)
                self._entries[key] = st
                self._pending += 1
                self._queue.put((priority, next(self._seq), key))
            elif st.state == QUEUED and priority < st._priority:
                st._priority = priority
                self._queue.put((priority, next(self._seq), key))
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

    def _work(self) -> None:
        while True:
            _, _, key = self._queue.get()
            with self._lock:
                st = self._entries.get(key)
                if st is None or st.state != QUEUED:
                    continue  # a duplicate queue entry left by a priority bump
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
        reports = self._read_disk(key)
        if reports is not None:
            with self._lock:
                st.reports, st.state, st.from_disk = reports, DONE, True
                st.seconds = time.monotonic() - st.started
            return
        st.bytes_total = decoded_size(key.path, key.size)

        def progress(n: int) -> None:
            st.bytes_read = n  # an int store: atomic under the GIL, read without the lock

        span = SpanFile(key.span, key.path, key.size, key.mtime, key.ident)
        try:
            reports = self._analyze(span, key.worker, self.options, progress)
        except Exception as exc:  # the pipeline should not raise; one bad file must not stop the rest
            logger.exception("MFU plugin: analysing %s failed", one_line(key.path))
            self._fail(st, str(exc) or type(exc).__name__)
            return
        with self._lock:
            st.reports, st.state = list(reports), DONE
            st.seconds = time.monotonic() - st.started
        if not any(r.error for r in reports):  # errors may be transient (a file still being written)
            self._write_disk(key, st.reports)

    # -- disk ------------------------------------------------------------
    def _read_disk(self, key: FileKey) -> list[WorkerReport] | None:
        path = self._disk_path(key)
        if path is None:
            return None
        try:
            with open(path, "rb") as f:
                return _reports_decoder.decode(f.read())
        except FileNotFoundError:
            return None
        except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            logger.info("MFU plugin: ignoring unreadable cache entry %s (%s)", path, one_line(exc))
            return None

    def _write_disk(self, key: FileKey, reports: list[WorkerReport]) -> None:
        path = self._disk_path(key)
        if path is None:
            return
        tmp = None
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=os.path.dirname(path))
            with os.fdopen(fd, "wb") as f:
                f.write(json_bytes(reports))  # names that are not UTF-8 are stored escaped
            os.replace(tmp, path)
            tmp = None
        except Exception as exc:  # a cache that cannot be written costs speed, never the result
            logger.warning("MFU plugin: cannot write cache entry %s (%s)", path, one_line(exc))
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
