"""The tab's route bodies as typed Structs: what ``/runs``, ``/report`` (202), ``/compare``, the
upload routes and the offline page send the frontend.

``scripts/gen_ts_types.py`` writes their TypeScript (``frontend/src/route_types.ts``) from these
Structs, as it writes the report's, so the tab's idea of a body cannot drift from the server's.
Every body is encoded by ``escape.json_bytes`` like the report (``msgspec`` writes each field,
defaults included).
"""

from __future__ import annotations

import os
from typing import Literal

import msgspec

from ..analysis.report import Report, RunReport, WorkerReport
from ..analysis.run.compare import CompareRows, WorkerDeltas
from ..analysis.run.findings_compare import FindingsAgainstBaseline
from ..analysis.run.strategies import StrategyRow
from ..trace.locate.locations import Location
from .pairing import Suggestion, suggest_compare, suggest_strategies

# A file's analysis (cache.QUEUED, LOADING, DONE, ERROR); a run's, from its files' (plugin._run_state).
SpanState = Literal["queued", "loading", "done", "error"]
RunState = Literal["queued", "loading", "ready", "partial", "error"]


class SpanStatus(msgspec.Struct, kw_only=True):
    """One trace file of a worker and the state of its analysis."""

    span: str
    file: str  # the file's name
    size: int  # bytes on disk
    mtime: float
    state: SpanState
    progress: float  # 0-1
    bytes_read: int  # decoded so far
    bytes_total: int  # decoded size (estimated for gzip over 4 GiB)
    seconds: float | None  # the analysis took, once done
    cached: bool  # read from the disk cache
    devices: list[int | None]  # the GPUs it holds reports of
    errors: list[str]  # one line each


class WorkerStatus(msgspec.Struct, kw_only=True):
    name: str
    spans: list[SpanStatus]


class RunStatus(msgspec.Struct, kw_only=True):
    """A run as ``/runs`` lists it: its files and how far their analyses are."""

    name: str
    path: str  # relative to its logdir unless --mfu_show_full_paths
    state: RunState
    progress: float  # 0-1, over the decoded bytes of its files
    size: int  # bytes on disk
    errors: list[str]
    workers: list[WorkerStatus]


class SourceInfo(msgspec.Struct, kw_only=True):
    name: str | None  # --logdir_spec's name, None for --logdir
    path: str


class UploadsStatus(msgspec.Struct, kw_only=True):
    """Upload in the tab (share.uploads_status): whether the drop zone is on, and why not."""

    enabled: bool
    reason: str | None
    max_bytes: int


class RunsBody(msgspec.Struct, kw_only=True):
    """``/runs``: the last scan, every run's state, and the runs Compare and Strategies start with."""

    schema_version: int
    tool_version: str
    scanned: bool
    scanning: bool
    sources: list[SourceInfo]
    errors: list[str]  # one line per source that could not be scanned
    runs: list[RunStatus]
    uploads: UploadsStatus
    # What Compare and Strategies show until the user picks (tensorboard.pairing); runs=[] and a
    # reason saying what to pick where no pair fits.
    suggested_compare: Suggestion
    suggested_strategies: Suggestion


class PendingFile(msgspec.Struct, kw_only=True):
    """A file of a run still being analysed, in ``/report``'s 202 body."""

    worker: str
    span: str
    file: str
    state: SpanState
    progress: float
    bytes_read: int
    bytes_total: int


class PartialReport(RunReport, kw_only=True):
    """``/report`` while a run's files are analysed (HTTP 202): the reports in so far in the run's
    order, the ranks in so far side by side (no straggler until every rank is in), the files still
    pending and the run's progress. A complete report (200) is a plain ``RunReport``."""

    state: RunState
    progress: float
    size: int
    pending: list[PendingFile]


class CompareEntry(msgspec.Struct, kw_only=True):
    name: str
    state: RunState
    progress: float
    report: RunReport | None  # None while its files are analysed


class CompareBody(msgspec.Struct, kw_only=True):
    """``/compare``: the runs asked for, and the loaded ones side by side by strategy."""

    schema_version: int
    runs: list[CompareEntry]
    strategies: list[StrategyRow]  # analysis.run.strategies
    # the rows the table shows and those it leaves out, with why (analysis.run.compare.rows_of_runs)
    rows: CompareRows
    # each run's findings against the baseline's, per pair of workers (analysis.run.findings_compare)
    findings: list[FindingsAgainstBaseline] = []
    # each figure's and top kernel's change against the baseline, per pair of workers, and the
    # baseline's workers against themselves (analysis.run.compare)
    deltas: list[WorkerDeltas] = []


class UploadedFile(msgspec.Struct, kw_only=True):
    """``/upload``: one file of an upload stored."""

    file: str  # the name it was stored under
    bytes: int
    queued_s: float = 0.0  # seconds it waited in the queue for an upload slot


class UploadCommitted(msgspec.Struct, kw_only=True):
    """``/upload_done``: the upload became a run."""

    run: str
    state: Literal["ready"]
    files: list[str]


class UploadCancelled(msgspec.Struct, kw_only=True):
    """``/upload_done?cancel=1``."""

    cancelled: bool


class ErrorBody(msgspec.Struct, kw_only=True):
    """An upload refused (4xx), in one line."""

    error: str


class OfflinePayload(msgspec.Struct, kw_only=True):
    """The offline page's data block (``offline.py``): the route bodies the tab's code reads,
    so the page draws with the very code the live tab runs. ``report`` is what ``--json`` prints
    (one run for a download, every run for ``tb-mfu analyze --html``); ``runs`` is ``/runs`` for
    those runs; ``run`` and ``worker`` the run and worker report to open on."""

    report: Report
    runs: RunsBody
    run: str
    worker: int
    saved_at: str  # ISO 8601, UTC


# -- the bodies of a report made without a server (tb-mfu analyze --html) ---------------------


def _span_status(w: WorkerReport) -> SpanStatus:
    size, mtime = 0, 0.0
    where = Location.parse(w.file)  # a report's text (no password: its location was parsed before)
    if where.is_local:
        try:
            st = os.stat(where.path)
            size, mtime = st.st_size, st.st_mtime
        except OSError:
            pass
    return SpanStatus(
        span=w.span,
        file=where.basename,
        size=size,
        mtime=mtime,
        state="done",
        progress=1.0,
        bytes_read=w.trace_bytes,
        bytes_total=w.trace_bytes,
        seconds=None,
        cached=False,
        devices=[],
        errors=[],
    )


def run_status(run: RunReport) -> RunStatus:
    """What ``/runs`` would list for a run analysed in full, from its report alone: one span per
    trace file (with the devices it holds reports of and their errors), every file done."""
    workers: dict[str, dict[str, SpanStatus]] = {}
    for w in run.workers:
        spans = workers.setdefault(w.name, {})
        span = spans.get(w.file) or spans.setdefault(w.file, _span_status(w))
        if w.device is not None:
            span.devices.append(w.device.index)
        if w.error:
            span.errors.append(w.error)
    files_of = [s for by_file in workers.values() for s in by_file.values()]
    failed = sum(1 for w in run.workers if w.error)
    state: RunState = "error" if failed == len(run.workers) else "partial" if failed else "ready"
    files = [w.file for w in run.workers]
    return RunStatus(
        name=run.name,
        path=os.path.dirname(files[0]) if files else "",
        state=state,
        progress=1.0,
        size=sum(s.size for s in files_of),
        errors=[e for s in files_of for e in s.errors],
        workers=[WorkerStatus(name=k, spans=list(v.values())) for k, v in workers.items()],
    )


def saved_listing(report: Report, statuses: list[RunStatus], sources: list[SourceInfo]) -> RunsBody:
    """``/runs`` as an offline page holds it: the runs of ``report`` with their ``statuses``,
    scanned, and no upload (a saved page has no server to upload to)."""
    return RunsBody(
        schema_version=report.schema_version,
        tool_version=report.tool_version,
        scanned=True,
        scanning=False,
        sources=sources,
        errors=[],
        runs=statuses,
        uploads=UploadsStatus(enabled=False, reason="this is a saved report", max_bytes=0),
        suggested_compare=suggest_compare(report.runs),
        suggested_strategies=suggest_strategies(report.runs),
    )


def runs_body(report: Report, path: str) -> RunsBody:
    """``/runs`` for the runs of ``report``, analysed from ``path`` with no server."""
    return saved_listing(report, [run_status(r) for r in report.runs], [SourceInfo(name=None, path=path)])
