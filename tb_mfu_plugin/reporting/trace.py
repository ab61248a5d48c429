"""The reports of every device of one decoded trace (``trace_reports``): what a worker process
returns for a file. Pure, no I/O: ``running.pipeline`` decodes the file and reads its sidecar."""

from __future__ import annotations

import msgspec
import numpy as np

from ..analysis.device.devices import gpu_devices
from ..analysis.flops.shapes import implausible_input_ops
from ..analysis.options import AnalysisOptions
from ..analysis.report import WorkerReport
from ..core.distinct import distinct_counts
from ..core.errors import reason_line
from ..diagnosis import from_options
from ..trace.limits import Deadline
from ..trace.locate.sidecar import Sidecar
from ..trace.tables import TraceTables
from .device import device_report

GPU_ONLY = "gpu_only_trace"


def trace_reports(
    tables: TraceTables,
    worker: str,
    span: str,
    options: AnalysisOptions,
    sidecar: tuple[Sidecar, str] | None = None,
    deadline: Deadline | None = None,
) -> list[WorkerReport]:
    """Reports for every device of one decoded trace. ``sidecar`` is the run's ``tb_mfu.json``
    with its path, when there is one; ``deadline`` is checked between devices."""
    devices, devices_note = _capped_devices(tables, options.limits.max_devices)
    if not devices:
        reason = (
            "CPU-only trace: no GPU activity (no kernel, memcpy or memset events)"
            if len(tables.cpu)
            else "trace has no events"
        )
        if tables.meta.notes:  # e.g. every event dropped for an impossible timestamp
            reason += f" ({' '.join(tables.meta.notes)})"
        return [WorkerReport(name=worker, span=span, file=tables.meta.path, error=reason_line(reason))]
    notes, flags = _trace_notes(tables, devices_note)
    thresholds = from_options(options)
    reports = []
    for device in devices:
        if deadline is not None:
            deadline.check()
        r = device_report(tables, device, options, thresholds, sidecar, name=worker, span=span)
        reports.append(msgspec.structs.replace(r, notes=r.notes + notes, flags=r.flags + flags))
    return reports


def _trace_notes(tables: TraceTables, devices_note: str | None) -> tuple[list[str], list[str]]:
    """What the trace as a whole brings to each device's report: the decoder's repairs, ops with
    impossible shapes, the devices left out, a trace without host events."""
    notes, flags = [], []
    if len(tables.cpu) == 0:  # valid input (a GPU-only export): flagged, host figures unknown
        flags.append(GPU_ONLY)
        notes.append(
            "The trace has GPU events but no CPU events: host-side figures (syncs, launch API time, "
            "step markers) are unavailable."
        )
    notes += tables.meta.notes
    bad_shapes = implausible_input_ops(tables.names, tables.cpu)
    if bad_shapes:
        notes.append(
            f"{bad_shapes} ops have impossible recorded shapes (negative dims or absurd sizes): "
            "their FLOPs are unknown."
        )
    if devices_note:
        notes.append(devices_note)
    return notes, flags


def _capped_devices(tables: TraceTables, cap: int) -> tuple[list[int], str | None]:
    """The devices to analyse: all of them, or the ``cap`` with the most GPU events.

    Each device is analysed over the whole trace, so thousands of declared devices
    cost thousands of passes; no real trace has more than a node's GPUs.
    """
    devices = gpu_devices(tables)
    if len(devices) <= cap:
        return devices, None
    ids, counts = distinct_counts(tables.gpu.device)
    busiest = ids[np.lexsort((ids, -counts))[:cap]]
    note = (
        f"GPU work on {len(devices)} devices: only the {cap} with the most GPU events were analysed "
        "(the max_devices cap)."
    )
    return sorted(int(d) for d in busiest), note
