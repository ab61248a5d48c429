"""Files in, reports out: discovery + decoding + analysis, shared by the CLI and the plugin.

Nothing here raises on a bad trace: a file that cannot be analysed becomes a
``WorkerReport`` whose ``error`` is a one-line reason, and the others go on. That
holds for *any* exception raised while decoding or analysing one file (an
analysis bug on odd input included), not only for the ``TraceError`` of a file we
knew to refuse. What the decoder repaired (``TraceMeta.notes``) is copied into
every report of the file.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import msgspec

from ..analysis.bytes.op_bytes import is_roofline_op
from ..analysis.flops.shapes import is_flop_op
from ..analysis.options import AnalysisOptions
from ..analysis.report import Report, RunReport, WorkerReport
from ..core.errors import TraceError, reason_line
from ..core.version import __version__
from ..diagnosis import DEFAULT, Thresholds, from_options
from ..reporting import run as reporting_run
from ..reporting.trace import trace_reports
from ..trace.decode.decode import decode_trace
from ..trace.limits import Deadline
from ..trace.locate.discover import RunFiles, SpanFile
from ..trace.locate.listing import discover
from ..trace.locate.locations import Location
from ..trace.locate.opener import decoded_size
from ..trace.locate.sidecar import load_sidecar
from .executors import open_executor
from .jobs import Executor, FileJob

# Uncompressed bytes of one file decoded so far.
ProgressFn = Callable[[int], None]
# (run, worker, bytes decoded so far, bytes in all) over every file of a path.
PathProgressFn = Callable[[str, str, int, int], None]


def _keep_inputs(name: str) -> bool:
    """The decoder keeps recorded shapes only for ops with a FLOP or a byte formula (the
    roofline's); it asks once per distinct op name."""
    return is_flop_op(name) or is_roofline_op(name)


def _error_report(span: SpanFile, worker: str, reason: str) -> WorkerReport:
    return WorkerReport(name=worker, span=span.span, file=span.path.text, error=reason_line(reason))


def _unexpected(what: str, exc: BaseException) -> str:
    return f"{what} failed: {type(exc).__name__}: {exc}"


def analyze_file(
    span: SpanFile,
    worker: str,
    options: AnalysisOptions | None = None,
    progress: ProgressFn | None = None,
) -> list[WorkerReport]:
    options = options or AnalysisOptions()
    deadline = Deadline(span.path.text, options.limits.max_seconds)
    try:
        tables = decode_trace(
            span.path, keep_inputs=_keep_inputs, progress=progress, limits=options.limits, deadline=deadline
        )
    except TraceError as exc:
        return [_error_report(span, worker, exc.reason)]
    except Exception as exc:  # noqa: BLE001 - one file's failure, whatever it is, stays that file's
        return [_error_report(span, worker, _unexpected("decoding", exc))]
    sidecar, sidecar_error = None, None
    try:
        sidecar = load_sidecar(span.path.parent(), worker, deadline)  # a remote one: within the file's time
    except TraceError as exc:  # a bad sidecar costs its figures, not the analysis
        sidecar_error = str(exc)
    except Exception as exc:  # noqa: BLE001
        sidecar_error = _unexpected("reading the MFU sidecar", exc)
    try:
        reports = trace_reports(tables, worker, span.span, options, sidecar, deadline)
    except TraceError as exc:  # a cap (wall time) reached during the analysis
        return [_error_report(span, worker, exc.reason)]
    except Exception as exc:  # noqa: BLE001 - an analysis bug on odd input must not hide the other files
        return [_error_report(span, worker, _unexpected("analysis", exc))]
    if sidecar_error:
        return [msgspec.structs.replace(r, notes=[*r.notes, reason_line(sidecar_error)]) for r in reports]
    return reports


# A file's reports from its worker's name and its span: ``analyze_file``, or the tab's cache.
FileReportsFn = Callable[[str, SpanFile], list[WorkerReport]]


def run_report(
    run: RunFiles, reports_of: FileReportsFn, thresholds: Thresholds = DEFAULT, with_ranks: bool = True
) -> RunReport:
    """A run's report from the reports of its files (workers in discovery order, each worker's
    spans in time order, each file's devices), with the run-level view of ``reporting.run``.
    ``with_ranks=False`` leaves that view out (the tab's partial report: a comparison of the ranks
    in so far would mislead)."""
    workers = [r for w in run.workers for span in w.spans for r in reports_of(w.name, span)]
    if not with_ranks:
        return RunReport(name=run.name, workers=workers)
    return reporting_run.run_report(run.name, workers, thresholds)


def analyze_run(run: RunFiles, options: AnalysisOptions | None = None, progress: ProgressFn | None = None) -> RunReport:
    """Analyse every file of ``run`` here, in turn; ``progress`` gets each file's decoded bytes."""
    opts = options or AnalysisOptions()
    return run_report(run, lambda worker, span: analyze_file(span, worker, opts, progress), from_options(opts))


def analyze_path(
    path: Location | str,
    options: AnalysisOptions | None = None,
    progress: PathProgressFn | None = None,
    jobs: int | None = 1,
    scheduler: str | None = None,
    memory: str | None = None,
) -> Report:
    """Analyse every run under ``path``: a logdir, a run directory or one trace file, local,
    remote (a URL) or an archive (``.zip``, ``.tar.gz``). A location that cannot be listed
    raises ``TraceError``. Text (a script's or a test's) is parsed here, once, as a face would.

    ``jobs`` files at once in local processes (None: ``flags.default_workers()``; 1, the default
    for library use: here, in turn), each under the memory cap ``memory`` (``memory_cap``), or on
    the Dask ``scheduler`` (``tcp://host:port`` or ``local``). ``progress(run, worker, done, total)``
    follows the bytes decoded over all the files. The report is the same whichever way the files were run.
    """
    return analyze_paths([path], options, progress, jobs, scheduler, memory)[0]


def analyze_paths(
    paths: Sequence[Location | str],
    options: AnalysisOptions | None = None,
    progress: PathProgressFn | None = None,
    jobs: int | None = 1,
    scheduler: str | None = None,
    memory: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> list[Report]:
    """``analyze_path`` of each path, their files sharing one executor and one progress count.

    Raises ``TraceError`` for a missing path or a location that cannot be listed,
    ``executors.SchedulerError`` when the scheduler cannot be used. What a listing left out
    (a part it could not read, or what a cap left out) is one line to ``warn`` (default: logged).
    """
    opts = options or AnalysisOptions()
    where = [p if isinstance(p, Location) else Location.parse(p) for p in paths]
    for path in where:
        if path.is_local and not os.path.exists(path.path):
            raise TraceError(path.text, "no such file or directory")
    # no HEAD per HTTP file (only a cache's keys need one): each file costs its own read, in its max_seconds
    found = [discover(p, limits=opts.limits, warn=warn, identify=False) for p in where]
    every = [r for runs in found for r in runs]
    meter = _PathMeter(every, progress) if progress is not None else None
    with open_executor(analyze_file, opts, jobs, scheduler, sum(len(r.files) for r in every), memory) as executor:
        # Every file goes in first (the executor runs them as it can), then each run takes its reports in order.
        futures = [
            {(w.name, s.path): _submit(executor, meter, r.name, w.name, s) for w in r.workers for s in w.spans}
            for r in every
        ]
        th = from_options(opts)
        reports = iter([run_report(r, _results(files), th) for r, files in zip(every, futures, strict=True)])
    return [Report(tool_version=__version__, runs=[next(reports) for _ in runs]) for runs in found]


def _submit(
    executor: Executor, meter: _PathMeter | None, run: str, worker: str, span: SpanFile
) -> Future[list[WorkerReport]]:
    fut = executor.submit(FileJob(span, worker), meter.follow(run, worker, span.path) if meter else None)
    if meter is not None:
        fut.add_done_callback(functools.partial(meter.finish, run, worker, span.path))
    return fut


def _results(files: dict[tuple[str, Location], Future[list[WorkerReport]]]) -> FileReportsFn:
    return lambda worker, span: files[(worker, span.path)].result()


class _PathMeter:
    """Decoded bytes over all the files of a path, for one progress bar: gzip's trailer
    tells each file's decoded size up front. Files run at once report from several
    threads; the lock keeps the count from ever going back."""

    def __init__(self, runs: list[RunFiles], progress: PathProgressFn) -> None:
        self._sizes = {s.path: decoded_size(s.path, s.size) for r in runs for s in r.files}
        self._total = sum(self._sizes.values()) or 1
        self._done: dict[Location, int] = {}
        self._sum = 0
        self._lock = threading.Lock()
        self._progress = progress

    def follow(self, run: str, worker: str, path: Location) -> ProgressFn:
        """The progress callback of one file; the bar names it from now on (it is about to start)."""
        with self._lock:
            self._progress(run, worker, self._sum, self._total)

        def advance(n: int) -> None:
            self._advance(run, worker, path, n)

        return advance

    def finish(self, run: str, worker: str, path: Location, _: object) -> None:
        self._advance(run, worker, path, self._sizes[path])

    def _advance(self, run: str, worker: str, path: Location, n: int) -> None:
        with self._lock:
            n = min(n, self._sizes[path])
            before = self._done.get(path, 0)
            if n <= before:
                return
            self._done[path] = n
            self._sum += n - before
            self._progress(run, worker, self._sum, self._total)
