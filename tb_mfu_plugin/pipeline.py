"""Files in, reports out: discovery + decoding + analysis, shared by the CLI and the plugin.

Nothing here raises on a bad trace: a file that cannot be analysed becomes a
``WorkerReport`` whose ``error`` is a one-line reason, and the others go on.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from . import __version__
from .analysis.flops import is_flop_op
from .analysis.mfu import apply_to_report as apply_flops
from .analysis.op_bytes import is_roofline_op
from .analysis.report import Report, RunReport, WorkerReport
from .analysis.roofline import apply_to_report as apply_roofline
from .analysis.worker import analyze_device, gpu_devices
from .diagnosis import DEFAULT, Thresholds, diagnose
from .diagnosis.ranks import compare_ranks
from .errors import TraceError
from .options import AnalysisOptions
from .sidecar import Sidecar, load_sidecar
from .trace.decode import decode_trace
from .trace.discover import RunFiles, SpanFile, discover_runs
from .trace.tables import TraceTables

ProgressFn = Callable[[int], None]



def _keep_inputs(name: str) -> bool:
    """The decoder keeps recorded shapes only for ops with a FLOP or a byte formula (the
    roofline's); it asks once per distinct op name."""
    return is_flop_op(name) or is_roofline_op(name)


def _error_report(span: SpanFile, worker: str, reason: str) -> WorkerReport:
    return WorkerReport(name=worker, span=span.span, file=span.path, error=reason)


def thresholds_from(options: AnalysisOptions) -> Thresholds:
    """The diagnosis thresholds with the options' overrides; ValueError names a bad one."""
    if not options.thresholds:
        return DEFAULT
    changes: dict[str, Any] = {}
    for name, value in options.thresholds:
        current = getattr(DEFAULT, name, None)
        if name not in Thresholds.__dataclass_fields__ or not isinstance(current, int | float):
            numeric = sorted(k for k in Thresholds.__dataclass_fields__ if isinstance(getattr(DEFAULT, k), int | float))
            raise ValueError(f"unknown diagnosis threshold {name!r} (known: {', '.join(numeric)})")
        changes[name] = type(current)(value)
    return dataclasses.replace(DEFAULT, **changes)


def analyze_tables(
    tables: TraceTables,
    worker: str,
    span: str,
    options: AnalysisOptions,
    sidecar: tuple[Sidecar, str] | None = None,
) -> list[WorkerReport]:
    """Reports for every device of one decoded trace (pure: no I/O). ``sidecar`` is the
    run's ``tb_mfu.json`` with its path, when there is one."""
    devices = gpu_devices(tables)
    if not devices:
        reason = (
            "CPU-only trace: no GPU activity (no kernel, memcpy or memset events)"
            if len(tables.cpu)
            else "trace has no events"
        )
        return [WorkerReport(name=worker, span=span, file=tables.meta.path, error=reason)]
    reports = []
    for device in devices:
        report, steps, view = analyze_device(tables, device, options)
        report.name = worker
        report.span = span
        report.distributed = tables.meta.distributed_info
        apply_flops(report, tables, steps, view, options, sidecar)
        try:
            apply_roofline(report, tables, steps)  # after FLOPs: the roof uses MFU's peak
        except Exception as exc:  # a roofline bug must not cost the rest of the report
            report.notes.append(f"roofline failed: {type(exc).__name__}: {exc}")
        # after FLOPs: findings estimate the MFU they would bring
        diagnose(report, tables, steps, view, thresholds_from(options))
        reports.append(report)
    return reports


def analyze_file(
    span: SpanFile,
    worker: str,
    options: AnalysisOptions | None = None,
    progress: ProgressFn | None = None,
) -> list[WorkerReport]:
    options = options or AnalysisOptions()
    try:
        tables = decode_trace(span.path, keep_inputs=_keep_inputs, progress=progress)
    except TraceError as exc:
        return [_error_report(span, worker, exc.reason)]
    sidecar, sidecar_error = None, None
    try:
        sidecar = load_sidecar(os.path.dirname(span.path) or ".", worker)
    except TraceError as exc:  # a bad sidecar costs its figures, not the analysis
        sidecar_error = str(exc)
    try:
        reports = analyze_tables(tables, worker, span.span, options, sidecar)
    except Exception as exc:  # an analysis bug on odd input must not hide the other files
        return [_error_report(span, worker, f"analysis failed: {type(exc).__name__}: {exc}")]
    if sidecar_error:
        for r in reports:
            r.notes.append(sidecar_error)
    return reports


def analyze_run(
    run: RunFiles, options: AnalysisOptions | None = None, progress: ProgressFn | None = None
) -> RunReport:
    options = options or AnalysisOptions()
    workers: list[WorkerReport] = []
    for w in run.workers:
        for span in w.spans:
            workers.extend(analyze_file(span, w.name, options, progress))
    return run_report(run.name, workers)


def run_report(name: str, workers: list[WorkerReport]) -> RunReport:
    """A run's report from its workers' reports, with the ranks compared for distributed runs."""
    return RunReport(name=name, workers=workers, ranks=compare_ranks(workers))


def analyze_path(path: str, options: AnalysisOptions | None = None, progress: ProgressFn | None = None) -> Report:
    """Analyse every run under ``path`` (a logdir, a run directory or one trace file)."""
    if not os.path.exists(path):
        raise TraceError(path, "no such file or directory")
    runs = discover_runs(path)
    return Report(tool_version=__version__, runs=[analyze_run(r, options, progress) for r in runs])
