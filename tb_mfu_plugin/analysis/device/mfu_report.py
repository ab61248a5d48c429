"""One device's FLOPs, MFU and peak, filled into its report (``pipeline`` calls
``apply_to_report`` for every device of a trace).

The steps, each in its own module: which FLOPs per step (``flops/source.py``), the peak at the
compute dtype (``mfu_peak.py``), the formula over the steps (``mfu.py``), the plausibility
guard (``plausibility.py``) and what the report says besides the figure (``mfu_notes.py``).
"""

from __future__ import annotations

import numpy as np

from ...trace.locate.sidecar import Sidecar
from ...trace.tables import TraceTables
from ..flops import unshaped
from ..flops.count_once import count_flops
from ..flops.per_window import flops_in_windows
from ..flops.source import headline, user_flops
from ..options import AnalysisOptions
from ..per_device import DeviceView
from ..per_trace import once_per_trace
from ..report import WorkerReport
from ..time.steps import Steps, launched_in_steps
from . import plausibility
from .mfu import fill_detail, fill_mfu, flops_summary, unattributed_kernel_time
from .mfu_notes import mfu_spread, note_fp32_peak, withhold_impossible_rates
from .mfu_peak import mfu_peak

_op_flops_cached = once_per_trace(count_flops)


def apply_to_report(
    report: WorkerReport,
    tables: TraceTables,
    steps: Steps | None,
    view: DeviceView | None,
    options: AnalysisOptions,
    sidecar: tuple[Sidecar, str] | None = None,
) -> None:
    """Fill FLOPs, MFU, the peak and the FLOPs detail of one device's ``WorkerReport``.

    ``sidecar`` is the run's ``tb_mfu.json`` and its path, already read by the caller
    (the analysis does no I/O).

    - ``flops_per_step`` / ``mfu`` (per step and over the analysed steps) use, in order:
      ``options.flops_per_step`` (``--flops-per-step``), the trace's shapes
      (FlopCounterMode convention), the run's sidecar (``tb_mfu.json``).
    - ``report.device.peak_flops`` / ``peak_source`` / ``dtype`` from ``resolve_peak``.
    - ``report.flops``: ``flops_summary`` plus every MFU that can be computed
      (shapes = HFU, model = recompute removed, user/sidecar), the achieved TFLOP/s
      while the GPU is busy, the unattributed kernel time and the peak choice.
    """
    if report.error or report.summary is None or steps is None or not len(steps):
        return
    plausibility.guard_shares(report, view.step_columns if view is not None else None)
    device = report.device.index if report.device is not None else None
    of = _op_flops_cached(tables)
    if device is not None:
        of = of.for_device(device)
    cpu_start = np.asarray(steps.cpu_start, np.float64)
    cpu_end = np.asarray(steps.cpu_end, np.float64)
    dur = np.asarray(steps.dur, np.float64)
    wf = flops_in_windows(of, cpu_start, cpu_end)
    user = user_flops(options, sidecar)
    peak = mfu_peak(tables, view, of, device, user.options)
    choice = peak.peak
    if report.device is not None:
        report.device.peak_flops, report.device.peak_source = choice.peak_flops, choice.source
        report.device.dtype = choice.dtype
    has_shapes = bool(len(of)) and float(wf.flops.sum()) > 0
    head, head_source = headline(options, has_shapes, wf, user, len(dur))
    fill_mfu(report, head, dur, choice.peak_flops)
    unattributed = unattributed_kernel_time(tables, of, launched_in_steps(tables, steps, device))
    detail = flops_summary(of, cpu_start, cpu_end, unattributed)
    detail.headline_source = head_source
    fill_detail(detail, report, wf, dur, has_shapes, user, choice, peak.dtype)
    if choice.dtype_source == "assumed" and head is not None:
        report.notes.append(f"MFU peak: {choice.source}")
    if not has_shapes:
        # nothing counted is an unknown count, not a count of 0 (a CUDA-graph replay has no ops)
        detail.source = None
        detail.flops_per_step = detail.executed_flops_per_step = detail.model_flops_per_step = None
    why = unshaped.missing_flops_note(tables, np.asarray(steps.start), np.asarray(steps.end), device, has_shapes)
    if why is not None:
        detail.notes.append(why)
    plausibility.guard_mfu(report, detail, choice, head_source)
    withhold_impossible_rates(report)
    mfu_spread(report)
    note_fp32_peak(report, detail, peak.props, peak.kernel_names, choice, user.options)
    report.flops = detail
