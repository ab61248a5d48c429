"""The MFU tab's backend: routes in, ``RunReport`` JSON out.

Everything slow happens elsewhere: the logdir scan in ``runs.RunIndex`` on a
daemon thread, and the analyses in ``cache.AnalysisCache``'s worker processes (or
on a Dask cluster). Handlers only read their state. While a run's files are
analysed, ``/report`` answers 202 with the reports done so far and the files
pending, so the tab fills in rank by rank. Runs are looked up by name in the server-side map; a name is
never joined onto a path. ``context.multiplexer`` is never touched (it is None
under ``--load_fast``).

Every response goes through ``_respond``: strings that are not valid UTF-8 (file
names with undecodable bytes) are escaped, and server paths are shown relative
to their logdir unless ``--mfu_show_full_paths`` (``paths.PathView``).
"""

from __future__ import annotations

import logging
import os
from typing import Any, cast

from tensorboard import errors
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from ..analysis.options import AnalysisOptions
from ..analysis.report import SCHEMA_VERSION, RunReport
from ..analysis.run.compare import deltas_against_baseline, rows_of_runs
from ..analysis.run.findings_compare import findings_against_baseline
from ..analysis.run.ranks import compare_ranks
from ..analysis.run.strategies import strategy_table
from ..core.escape import json_bytes
from ..core.version import __version__ as TOOL_VERSION
from ..running.flags import analysis_options
from ..running.pipeline import run_report
from ..trace.locate.discover import RunFiles, SpanFile
from ..trace.remote.storage import use_storage_options
from .bodies import (
    CompareBody,
    CompareEntry,
    PartialReport,
    PendingFile,
    RunsBody,
    RunState,
    RunStatus,
    SourceInfo,
    SpanStatus,
    WorkerStatus,
)
from .bodies import SpanState as SpanStateName
from .cache import ERROR, LOADING, QUEUED, AnalysisCache, FileState
from .file_queue import BACKGROUND, OPENED, VIEWED
from .hosts import AllowedHosts
from .pairing import Suggestion, suggest_compare, suggest_strategies
from .paths import FileGate, PathView
from .runs import RunIndex, Scan, Source, sources_from_flags
from .settings import settings_from_flags
from .share import serve_download, serve_upload, serve_upload_done, upload_area, uploads_status
from .stored_reports import default_cache_dir
from .uploads import UPLOADS

logger = logging.getLogger(__name__)

PLUGIN_NAME = "mfu"
STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
# The only files served from STATIC_DIR, with their content types.
STATIC_FILES = {
    "index.js": "text/javascript",  # the bundle; CSS is inlined in it
}
MAX_COMPARE = 8
MAX_NAME = 4096
# One span of a run: its worker's name, its file, and the state of its analysis.
SpanState = tuple[str, SpanFile, FileState]


def options_from_flags(flags: object) -> AnalysisOptions:
    """The analysis options of the ``--mfu_*`` flags (``running.flags.OPTIONS``, as the CLI's):
    the peak, the device, TF32, the tensor-core patterns, the thresholds, the link, the caps."""
    options: AnalysisOptions = analysis_options(settings_from_flags(flags).values)
    return options


class MfuPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(
        self,
        context: base_plugin.TBContext,
        *,
        cache: AnalysisCache | None = None,
        min_scan_interval_s: float = 5.0,
    ) -> None:
        super().__init__(context)
        flags = context.flags
        # before any listing: credentials for remote logdirs (never shown: storage.py)
        use_storage_options(getattr(flags, "mfu_storage_options", None) or None)
        self._sources = sources_from_flags(flags, getattr(context, "logdir", None))
        cache_dir = default_cache_dir(getattr(flags, "mfu_cache_dir", None))
        # The upload area (under the cache directory) is scanned and shown like one more logdir.
        self._uploads, self._upload_off = upload_area(flags, cache_dir, self._sources, self._uploaded)
        self._hosts = AllowedHosts.from_flags(flags)
        shown = self._sources + ([Source(UPLOADS, self._uploads.root)] if self._uploads else [])
        self._view = PathView(shown, bool(getattr(flags, "mfu_show_full_paths", False)))
        gate = FileGate(shown, bool(getattr(flags, "mfu_confine_to_logdir", False)))
        if cache is None:
            run = settings_from_flags(flags)
            cache = AnalysisCache(
                analysis_options(run.values),
                cache_dir,
                run.workers,
                scheduler=run.scheduler,
                max_bytes=run.cache_max_bytes,
                worker_memory=run.worker_memory,
            )
        if cache.refuse is None:
            cache.refuse = gate.refusal
        self._cache = cache
        extra = self._uploads.sources if self._uploads else None
        self._index = RunIndex(
            self._sources,
            min_scan_interval_s,
            on_scan=self._queue_scan,
            limits=cache.options.limits,
            extra_sources=extra,
        )
        self._suggestions: tuple[object, tuple[Suggestion, Suggestion]] | None = None
        self._index.refresh()  # start scanning now, so is_active() knows soon

    # -- TBPlugin --------------------------------------------------------
    def get_plugin_apps(self) -> dict[str, Any]:
        app = wrappers.Request.application
        apps: dict[str, Any] = {f"/{name}": app(self._serve_static) for name in STATIC_FILES}
        apps.update(
            {
                "/runs": app(self._serve_runs),
                "/report": app(self._serve_report),
                "/compare": app(self._serve_compare),
                "/download": app(self._serve_download),
                "/upload": app(lambda r: serve_upload(r, self._uploads, self._upload_off, self._hosts)),
                "/upload_done": app(lambda r: serve_upload_done(r, self._uploads, self._upload_off, self._hosts)),
            }
        )
        return apps

    def is_active(self) -> bool:
        """Whether any run has been found. Never blocks: reads the last background scan. TensorBoard
        asks it for its first page: the server is up, and the analysis processes may start."""
        self._cache.answering.set()
        self._index.refresh()
        return bool(self._index.current().runs)

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="MFU")

    # -- state -----------------------------------------------------------
    def _uploaded(self) -> None:
        """An upload became a run: scan now, so the tab's next poll lists it."""
        self._index.invalidate()

    def _queue_scan(self, scan: Scan) -> None:
        """Queue every file of a new scan: the user will most likely look at all runs. The first
        run listed goes first: the tab opens on it when the user has not picked one before
        (frontend ``pickDefaults``), and it is then the first run ready."""
        for i, run in enumerate(scan.runs.values()):
            self._states(run, priority=OPENED if i == 0 else BACKGROUND, scan=scan)

    def _states(self, run: RunFiles, priority: int = BACKGROUND, scan: Scan | None = None) -> list[SpanState]:
        """Each span of ``run`` with its analysis state; queues the ones not seen before."""
        deps = (scan or self._index.current()).sidecars.get(run.name, ())
        out = []
        for w in run.workers:
            for s in w.spans:
                out.append((w.name, s, self._cache.request(self._cache.key(s, run.name, w.name, deps), priority)))
        return out

    @staticmethod
    def _run_state(states: list[FileState]) -> str:
        if not states:
            return ERROR
        if any(s.state in (QUEUED, LOADING) for s in states):
            return LOADING if any(s.state != QUEUED for s in states) else QUEUED
        bad = sum(1 for s in states if s.error or (s.reports is not None and all(r.error for r in s.reports)))
        if bad == len(states):
            return ERROR
        if bad or any(s.errors() for s in states):
            return "partial"
        return "ready"

    def _lookup(self, name: str | None) -> RunFiles:
        if name is None or name == "":
            raise errors.InvalidArgumentError("missing query parameter 'run'")
        if len(name) > MAX_NAME or "\x00" in name:
            raise errors.InvalidArgumentError("invalid run name")
        run = self._index.current().runs.get(name)
        if run is None:
            raise errors.NotFoundError(f"no run named {name!r}")
        return run

    @staticmethod
    def _report_for(run: RunFiles, states: list[SpanState], with_ranks: bool = True) -> RunReport:
        """The run's ``RunReport``, put together by ``pipeline.run_report`` as the CLI's is,
        so the route and ``--json`` agree. Files not analysed yet have no reports in it."""
        by_file = {(worker, span.path): st for worker, span, st in states}
        reports_of = lambda worker, span: by_file[(worker, span.path)].worker_reports()  # noqa: E731
        return run_report(run, reports_of, with_ranks=with_ranks)

    def _partial(self, run: RunFiles, states: list[SpanState]) -> PartialReport:
        """A run still loading: the reports of the files done so far (in the final order), the
        ranks in so far side by side but no straggler yet (it is named against every rank), the
        files still pending, and the run's progress, so the tab fills in rank by rank."""
        report = self._report_for(run, states, with_ranks=False)
        try:
            ranks = compare_ranks(report.workers)
        except Exception:  # noqa: BLE001 - as in run_report: the side-by-side view is optional
            ranks = None
        if ranks is not None:
            ranks.straggler = None
        status = self._run_status(run, states)
        pending = [
            PendingFile(
                worker=worker,
                span=span.span,
                file=span.path.basename,
                state=cast(SpanStateName, st.state),
                progress=round(st.progress, 4),
                bytes_read=st.bytes_read,
                bytes_total=st.bytes_total,
            )
            for worker, span, st in states
            if st.state in (QUEUED, LOADING)
        ]
        return PartialReport(
            name=report.name,
            workers=report.workers,
            ranks=ranks,
            state=status.state,
            progress=status.progress,
            size=status.size,
            pending=pending,
        )

    def _run_status(self, run: RunFiles, states: list[SpanState]) -> RunStatus:
        fstates = [st for _, _, st in states]
        total = sum(max(st.bytes_total, st.key.size) for st in fstates) or 1
        done = sum(max(st.bytes_total, st.key.size) * st.progress for st in fstates)
        workers: dict[str, list[SpanStatus]] = {}
        for wname, span, st in states:
            workers.setdefault(wname, []).append(
                SpanStatus(
                    span=span.span,
                    file=span.path.basename,
                    size=span.size,
                    mtime=span.mtime,
                    state=cast(SpanStateName, st.state),
                    progress=round(st.progress, 4),
                    bytes_read=st.bytes_read,
                    bytes_total=st.bytes_total,
                    seconds=st.seconds,
                    cached=st.from_disk,
                    devices=[r.device.index for r in st.reports or [] if r.device is not None],
                    errors=st.errors(),
                )
            )
        return RunStatus(
            name=run.name,
            path=run.path.text,
            state=cast(RunState, self._run_state(fstates)),
            progress=round(min(1.0, done / total), 4),
            size=sum(st.key.size for st in fstates),
            errors=[e for st in fstates for e in st.errors()],
            workers=[WorkerStatus(name=k, spans=v) for k, v in workers.items()],
        )

    def _sources_info(self) -> list[SourceInfo]:
        return [SourceInfo(name=s.name, path=self._view.source_path(s)) for s in self._sources]

    def _suggested(self, states: dict[str, list[SpanState]]) -> tuple[Suggestion, Suggestion]:
        """The Compare and Strategies sets of the runs analysed in full (tensorboard.pairing), from
        their reports without the run-level view, which the suggestions do not need. Kept until
        a run's files change: /runs is polled every second while files load."""
        done = {
            name: ss for name, ss in states.items() if ss and all(st.state not in (QUEUED, LOADING) for _, _, st in ss)
        }
        key = tuple((name, tuple(st.key for _, _, st in ss)) for name, ss in done.items())
        if self._suggestions is None or self._suggestions[0] != key:
            runs = [
                RunReport(name=n, workers=[r for _, _, st in ss for r in st.worker_reports()]) for n, ss in done.items()
            ]
            self._suggestions = (key, (suggest_compare(runs), suggest_strategies(runs, MAX_COMPARE)))
        return self._suggestions[1]

    def _runs_body(self, refresh: bool = False) -> RunsBody:
        """``/runs``: the last scan and every run's state."""
        self._index.refresh(force=refresh)
        scan = self._index.current()
        states = {name: self._states(run) for name, run in scan.runs.items()}
        compare, strategies = self._suggested(states)
        return RunsBody(
            schema_version=SCHEMA_VERSION,
            tool_version=TOOL_VERSION,
            scanned=self._index.scanned,
            scanning=self._index.scanning,
            sources=self._sources_info(),
            errors=scan.errors,
            runs=[self._run_status(run, states[name]) for name, run in scan.runs.items()],
            uploads=uploads_status(self._uploads, self._upload_off),
            suggested_compare=compare,
            suggested_strategies=strategies,
        )

    # -- routes ----------------------------------------------------------
    def _respond(self, request: wrappers.Request, body: Any, code: int = 200) -> wrappers.Response:
        """``body`` as JSON, every string made encodable and its server paths relative."""
        self._cache.answering.set()  # the server is up (is_active)
        return http_util.Respond(request, self._view.json(json_bytes(body)), "application/json", code=code)

    def _serve_static(self, request: wrappers.Request) -> wrappers.Response:
        name = request.path.rsplit("/", 1)[-1]
        mimetype = STATIC_FILES.get(name)
        if mimetype is None:  # cannot happen through the route table; belt and braces
            raise errors.NotFoundError(name)
        try:
            with open(os.path.join(STATIC_DIR, name), "rb") as f:
                body = f.read()
        except FileNotFoundError:
            raise errors.NotFoundError(f"{name} is not built: run 'npm ci && npm run build' in frontend/") from None
        return http_util.Respond(request, body, mimetype)

    def _serve_runs(self, request: wrappers.Request) -> wrappers.Response:
        return self._respond(request, self._runs_body(refresh=request.args.get("refresh") == "1"))

    def _serve_report(self, request: wrappers.Request) -> wrappers.Response:
        """The run's report (200), or while files are still analysed its partial report (202)."""
        run = self._lookup(request.args.get("run"))
        states = self._states(run, priority=VIEWED)
        if any(st.state in (QUEUED, LOADING) for _, _, st in states):
            return self._respond(request, self._partial(run, states), code=202)
        return self._respond(request, self._report_for(run, states))

    def _serve_download(self, request: wrappers.Request) -> wrappers.Response:
        """The run's report as a file to keep or send: JSON, or the offline HTML page."""
        run = self._lookup(request.args.get("run"))
        states = self._states(run, priority=VIEWED)
        if any(st.state in (QUEUED, LOADING) for _, _, st in states):
            raise errors.NotFoundError(f"run {run.name!r} is still being analysed: download it when it is ready")
        return serve_download(
            request, self._report_for(run, states), self._run_status(run, states), self._sources_info(), self._view.json
        )

    def _serve_compare(self, request: wrappers.Request) -> wrappers.Response:
        names = request.args.getlist("run")
        if len(names) < 1:
            raise errors.InvalidArgumentError("give at least one 'run' query parameter")
        if len(names) > MAX_COMPARE:
            raise errors.InvalidArgumentError(f"compare at most {MAX_COMPARE} runs")
        runs = [self._lookup(n) for n in names]
        out = []
        for run in runs:
            states = self._states(run, priority=VIEWED)
            loading = any(st.state in (QUEUED, LOADING) for _, _, st in states)
            status = self._run_status(run, states)
            out.append(
                CompareEntry(
                    name=run.name,
                    state=status.state,
                    progress=status.progress,
                    report=None if loading else self._report_for(run, states),
                )
            )
        # the loaded runs side by side by parallel strategy (the CLI's `compare` table)
        loaded = [e.report for e in out if e.report is not None]
        body = CompareBody(
            schema_version=SCHEMA_VERSION,
            runs=out,
            strategies=strategy_table(loaded),
            # fixed / new / remaining findings against the first run, computed once (analysis.run.findings_compare)
            findings=findings_against_baseline([e.report for e in out]),
            deltas=deltas_against_baseline([e.report for e in out]),
            rows=rows_of_runs([e.report for e in out]),
        )
        return self._respond(request, body)
