"""Files analysed on a Dask cluster: ``--scheduler tcp://host:8786``, or ``local`` for a LocalCluster.

Each task gets a file's *name* (a path, or an fsspec URL once the trace layer reads
them) and the analysis options, reads the file on its worker and returns the
encoded reports: the client never sends or receives trace bytes. The workers need
tb_mfu_plugin installed (the task is ``jobs.run_job``, sent by reference).

Discovery gives local paths absolute, so a worker started in another directory
finds them (the workers must see the same file system, or take URLs). A task that
fails (its worker died more often than Dask allows, or it raised) becomes that
file's error; the other tasks go on.

``dask[distributed]`` is optional: without it, asking for a scheduler is a
``SchedulerError`` that says how to install it.
"""

from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import Future
from typing import Any

from ..analysis.options import AnalysisOptions
from ..analysis.report import WorkerReport
from .flags import default_workers
from .jobs import (
    AnalyzeFn,
    Executor,
    FileJob,
    ProgressFn,
    SchedulerError,
    decoded_or_error,
    error_reports,
    run_job,
)

INSTALL_HINT = "--scheduler needs dask.distributed: pip install 'tb_mfu_plugin[dask]'"
CONNECT_TIMEOUT_S = 30
QUIET = {"logging.distributed": "error"}


class DaskExecutor(Executor):
    reports_progress = False  # a task reports when it ends, not while it decodes

    def __init__(
        self, analyze: AnalyzeFn, options: AnalysisOptions, scheduler: str, local_workers: int | None = None
    ) -> None:
        try:
            import dask
            import distributed
        except ImportError:
            raise SchedulerError(INSTALL_HINT) from None
        self._analyze = analyze
        self._options = options
        self._cluster: Any = None
        try:
            if scheduler == "local":
                n = local_workers if local_workers and local_workers > 0 else default_workers()
                with dask.config.set(QUIET):  # the workers' INFO lines would fill the CLI's stderr
                    self._cluster = distributed.LocalCluster(
                        n_workers=n,
                        threads_per_worker=1,  # the analysis holds the GIL: one file per process
                        processes=True,
                        dashboard_address=":0",  # any free port: 8787 may be another cluster's
                        silence_logs=logging.ERROR,
                    )
                self._client = distributed.Client(self._cluster)
            else:
                self._client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - an address, a network or a start-up failure: one line
            if self._cluster is not None:
                self._cluster.close()
            raise SchedulerError(f"cannot use the Dask scheduler {scheduler!r}: {type(exc).__name__}: {exc}") from None
        self.slots = max(1, sum(self._client.nthreads().values()))
        self._lock = threading.Lock()
        self._inflight: set[Any] = set()  # a Dask future nobody holds is cancelled

    def submit(self, job: FileJob, progress: ProgressFn | None = None) -> Future[list[WorkerReport]]:
        out: Future[list[WorkerReport]] = Future()
        key = f"tb-mfu-{job.span.path.basename}-{uuid.uuid4().hex}"
        fut = self._client.submit(run_job, self._analyze, job, self._options, key=key, pure=False)
        with self._lock:
            self._inflight.add(fut)
        fut.add_done_callback(lambda f: self._settle(f, job, out))
        return out

    def _settle(self, fut: Any, job: FileJob, out: Future[list[WorkerReport]]) -> None:
        try:
            if fut.status == "finished":
                out.set_result(decoded_or_error(job, fut.result()))
            else:
                exc = fut.exception()
                out.set_result(error_reports(job, f"Dask task failed: {type(exc).__name__}: {exc}"))
        except Exception as exc:  # noqa: BLE001 - a lost connection is this file's error too
            out.set_result(error_reports(job, f"Dask task failed: {type(exc).__name__}: {exc}"))
        finally:
            with self._lock:
                self._inflight.discard(fut)

    def close(self) -> None:
        import dask

        with dask.config.set(QUIET):
            self._client.close()
            if self._cluster is not None:
                self._cluster.close()
