"""What one file's analysis is, wherever it runs: the job (``FileJob``), the function that runs
it (``AnalyzeFn``), the bytes its reports travel as, and the ``Executor`` interface.

The executors (``executors``: here and in local processes; ``dask_executor``: on a Dask
cluster) build on this module, and ``executors.open_executor`` picks one of them; so each
executor module imports this one and none imports another's.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import msgspec

from ..analysis.options import AnalysisOptions
from ..analysis.report import WorkerReport
from ..core.errors import reason_line
from ..trace.locate.discover import SpanFile

# Uncompressed bytes of one file decoded so far.
ProgressFn = Callable[[int], None]
# pipeline.analyze_file, or a stand-in of the same shape; a process or Dask executor pickles
# it by reference, so it must be a module-level function there.
AnalyzeFn = Callable[[SpanFile, str, AnalysisOptions, ProgressFn | None], list[WorkerReport]]

_MSGPACK, _PICKLE = b"M", b"P"
_reports_decoder = msgspec.msgpack.Decoder(list[WorkerReport])


@dataclass(frozen=True)
class FileJob:
    """One trace file to analyse: what a worker process or a Dask task receives."""

    span: SpanFile
    worker: str


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def encode_reports(reports: list[WorkerReport]) -> bytes:
    """A file's reports as the bytes that cross a process or network boundary.

    msgpack by msgspec; pickle only for the rare report msgpack cannot encode: a file
    name that is not UTF-8 (kept by Python as lone surrogates).
    """
    try:
        return _MSGPACK + msgspec.msgpack.encode(reports)
    except UnicodeEncodeError:
        return _PICKLE + pickle.dumps(reports, protocol=pickle.HIGHEST_PROTOCOL)


def decode_reports(data: bytes) -> list[WorkerReport]:
    if data[:1] == _PICKLE:
        reports: list[WorkerReport] = pickle.loads(data[1:])
        return reports
    return _reports_decoder.decode(data[1:])


def decoded_or_error(job: FileJob, data: bytes) -> list[WorkerReport]:
    """A file's reports, or its error when they fail the report's types: a result that
    cannot be read back must become that file's error, never a future left unresolved."""
    try:
        return decode_reports(data)
    except (msgspec.DecodeError, pickle.UnpicklingError, ValueError, TypeError, EOFError) as exc:
        return error_reports(job, f"the analysis returned a report that does not decode: {exc}")


def error_reports(job: FileJob, reason: str) -> list[WorkerReport]:
    """The one report of a file whose analysis failed as a whole."""
    return [WorkerReport(name=job.worker, span=job.span.span, file=job.span.path.text, error=reason_line(reason))]


def run_job(analyze: AnalyzeFn, job: FileJob, options: AnalysisOptions, progress: ProgressFn | None = None) -> bytes:
    """What a worker process or a Dask task runs: read the file by its name, analyse it,
    return the encoded reports."""
    return encode_reports(analyze(job.span, job.worker, options, progress))


class Executor:
    """Analyses files, ``slots`` at a time; ``submit`` never blocks on the analysis."""

    slots: int = 1
    # Whether progress within a file reaches ``submit``'s callback (a Dask task reports none).
    reports_progress: bool = True

    def submit(self, job: FileJob, progress: ProgressFn | None = None) -> Future[list[WorkerReport]]:
        raise NotImplementedError

    def close(self) -> None:
        """Stop the processes or the cluster connection once the running files end (the
        executor is then unusable)."""

    def terminate(self) -> None:
        """Stop now (Ctrl-C, a server exiting): the running files are lost."""
        self.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()


class SchedulerError(Exception):
    """The executor asked for cannot be had (Dask missing, the scheduler unreachable)."""
