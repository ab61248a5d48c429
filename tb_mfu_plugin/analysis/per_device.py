"""One device of one trace, analysed: ``analyze_device`` runs the stages in order, each taking
values and returning values, and builds the device's report once from what they returned.

    steps -> rows -> kernel classes -> syncs -> idle gaps -> critical path -> per-step columns
          -> summary -> FLOPs and MFU -> steps' structs -> kernels, copies, syncs, launches
          -> memory -> roofline -> communication and pipeline -> waterfall

What the diagnosis reads besides the report (the ``DeviceView``, the facts of the rules) comes
back with it in ``DeviceAnalysis``; the diagnosis adds its findings to a copy of the report
(``reporting.device``). A stage whose figures are a card of their own (memory, roofline,
communication, the critical path, the waterfall) that fails on odd input leaves a note instead of
costing the rest of the report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import numpy as np

from ..core.distinct import distinct
from ..trace.locate.sidecar import Sidecar
from ..trace.tables import KERNEL, TraceTables
from .bytes.roofline import roofline_block
from .critical_path.device import device_model
from .critical_path.report_types import CriticalPath
from .critical_path.whatif import Model
from .device import devices
from .device.mfu_report import Drag, MfuFigures, mfu_figures
from .device.plausibility import IMPOSSIBLE_SHARE, guard_shares
from .device_facts import DeviceFacts
from .device_sections import kernel_sections
from .device_view import DeviceRows, DeviceView
from .distributed.blocks import Communication, Pipeline
from .distributed.communication import analyze_communication
from .distributed.info import distributed_block
from .distributed.pipeline_bubble import analyze_pipeline
from .kernels import families as kernel_families
from .kernels import kernels
from .memory.block import memory_block
from .memory.types import Memory
from .options import AnalysisOptions
from .report import Device, LeftOutStep, Roofline, StepBasis, Summary, WaterfallBar, WorkerReport
from .time import aggregate, copies, graphs, idle_gaps, intervals, syncs, windows
from .time.step_metrics import KernelClasses, StepColumns, build_steps, step_columns
from .time.steps import Steps, assign, find_steps, steady_state
from .waterfall import waterfall

T = TypeVar("T")


@dataclass(frozen=True)
class DeviceAnalysis:
    """One device's analysis: its report (every figure of the analysis; the diagnosis' fields
    empty), and what the diagnosis reads besides (``view`` and ``facts`` are None where the device
    had no analysed step: the report then carries the error)."""

    report: WorkerReport
    tables: TraceTables
    steps: Steps
    view: DeviceView | None
    facts: DeviceFacts | None


def _device(found: devices.DeviceProps, device: int) -> Device:
    props = found.props
    if props is None:
        return Device(index=device, name=None, properties_match=found.how)
    major, minor = _count(props.get("computeMajor")), _count(props.get("computeMinor"))
    return Device(
        index=device,
        name=devices.display_name(props),
        num_sms=_count(props.get("numSms")) or None,
        compute_capability=f"{major}.{minor}" if major is not None and minor is not None else None,
        properties_match=found.how,
    )


def _count(value: Any) -> int | None:
    """A whole non-negative number from free-form trace JSON (``108`` or ``108.0``), else None:
    the report's types are checked when it crosses a process, so a hostile ``"numSms": 1.5``
    must not reach it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 2**31:
        return None  # NaN fails the range test too
    return None if isinstance(value, float) and not value.is_integer() else int(value)


def _drag(model: Model | None) -> Drag | None:
    """The profiler's drag on the modelled steps: the critical-path model re-timed without its cost,
    and the work their first step inherited, which that re-timing leaves out."""
    if model is None or model.step_us <= 0:
        return None
    low, high = model.unprofiled_step_range_us
    carried = model.g.ops.carried
    return Drag(
        model.unprofiled_step_us / model.step_us,
        low / model.step_us,
        high / model.step_us,
        int(carried.sum()),
        float(model.g.ops.d[carried].sum()),
    )


def analyze_device(
    tables: TraceTables,
    device: int,
    options: AnalysisOptions,
    sidecar: tuple[Sidecar, str] | None = None,
    *,
    name: str = "",
    span: str = "",
    launcher: np.ndarray | None = None,
) -> DeviceAnalysis:
    """Everything the analysis says about one device of one trace (see the module's doc).
    ``sidecar``: the run's ``tb_mfu.json`` with its path, read by the caller; ``name`` and ``span``
    name the worker and span in the report."""
    launcher = tables.launcher if launcher is None else launcher
    found = devices.device_properties(tables, device)
    dev = _device(found, device)
    notes: list[str] = [found.note] if found.note else []
    flags: list[str] = []
    recorded = find_steps(tables, device, launcher)
    steps = recorded if options.all_steps else steady_state(recorded)
    if steps.synthetic:
        flags.append("no_step_markers")
        notes.append("No ProfilerStep# markers: the whole trace is analysed as one step.")
    notes.extend(f"Dropped {d}" for d in steps.dropped)
    distributed = distributed_block(tables.meta.distributed_info, notes)
    file, size = tables.meta.path, tables.meta.size_bytes
    rows = _device_rows(tables, device, launcher, steps, dev.num_sms)
    if len(steps) == 0:
        error = "no complete step with GPU activity on this device" + (
            f" ({'; '.join(recorded.dropped)})" if recorded.dropped else ""
        )
        report = WorkerReport(
            name=name, span=span, file=file, trace_bytes=size, device=dev, distributed=distributed, error=error
        )
        return DeviceAnalysis(msgspec.structs.replace(report, notes=notes, flags=flags), tables, steps, None, None)
    view, summary, critical = _view_and_summary(tables, rows, steps, options, notes, flags)
    busy = _busy_us(view, steps)
    mfu = mfu_figures(tables, steps, rows, view.classes, device, busy, options, sidecar, flags, _drag(view.critical))
    notes += mfu.notes
    flags += mfu.flags
    dev = msgspec.structs.replace(
        dev, peak_flops=mfu.peak.peak_flops, peak_source=mfu.peak.source, dtype=mfu.peak.dtype
    )
    summary = _with_mfu(summary, mfu, steps)
    facts = DeviceFacts(tables, steps, view, device, gap_thresholds=view.gap_thresholds)
    sections = kernel_sections(tables, view, steps, summary, options)
    cards = _cards(tables, view, facts, steps, recorded, dev, summary, mfu, options, notes)
    report = WorkerReport(
        name=name,
        span=span,
        file=file,
        trace_bytes=size,
        device=dev,
        distributed=distributed,
        summary=summary,
        steps=build_steps(steps, view.step_columns, _flop_columns(mfu)),
        flops=mfu.detail,
        critical_path=critical,
        top_kernels=sections.top_kernels,
        copies=sections.copies,
        syncs=sections.syncs,
        launches=sections.launches,
        memory=cards.memory,
        roofline=cards.roofline,
        communication=cards.communication,
        pipeline=cards.pipeline,
        waterfall=cards.waterfall,
        notes=notes + sections.notes,
        flags=flags,
    )
    return DeviceAnalysis(report, tables, steps, view, facts)


def _view_and_summary(
    tables: TraceTables,
    rows: DeviceRows,
    steps: Steps,
    options: AnalysisOptions,
    notes: list[str],
    flags: list[str],
) -> tuple[DeviceView, Summary, CriticalPath | None]:
    """The stages from the rows to the per-step columns and their summary: the kernel classes, the
    host syncs, the GPU idle gaps, the critical-path model and the columns of every step."""
    gpu = rows.gpu
    name_classes = kernel_families.classify_names(
        tables.names, distinct(gpu.name[gpu.kind == KERNEL]), options.tensor_core_patterns
    )
    classes = KernelClasses(
        name_classes.mask(kernel_families.TENSOR_CORE),
        copies.classify(tables.names, tables.gpu_name_codes)[0],
        name_classes.core,
    )
    host_windows = list(zip(steps.cpu_start.tolist(), steps.cpu_end.tolist(), strict=True))
    found_syncs = syncs.find_syncs(tables.cpu, tables.names, host_windows)
    th = idle_gaps.GapThresholds.of(options.thresholds)
    gaps = idle_gaps.device_gaps(
        tables, steps, gpu, found_syncs.rows, rows.launcher, graphs.graph_launched(tables, rows.launcher), th
    )
    critical = _contained(
        "critical path",
        lambda: device_model(tables, gpu, rows.step, rows.launcher, found_syncs.rows, name_classes, steps),
        notes,
    )
    model: Model | None = critical[0] if critical is not None else None
    cols = _columns(tables, rows, steps, classes, found_syncs, gaps)
    summary = _summary(rows, cols, steps.dur, classes.tensor_core, name_classes)
    summary, cols, share_note = guard_shares(summary, cols)
    if share_note is not None:
        flags.append(IMPOSSIBLE_SHARE)
        notes.append(share_note)
    view = DeviceView.of(
        rows,
        syncs=found_syncs,
        classes=name_classes,
        gaps=gaps,
        gap_thresholds=th,
        critical=model,
        step_columns=cols,
    )
    return view, msgspec.structs.replace(summary, basis=_basis(steps)), critical[1] if critical is not None else None


def _device_rows(
    tables: TraceTables, device: int, launcher: np.ndarray, steps: Steps, num_sms: int | None
) -> DeviceRows:
    """The device's GPU rows, their blocks per SM, occupancy, step and launch call."""
    gpu = tables.gpu.take(np.flatnonzero(tables.gpu.device == device))
    dev_launcher = launcher[tables.gpu.device == device]
    # (indexed only where launched: a GPU-only trace has no CPU rows at all)
    launched = dev_launcher >= 0
    launch_ts = np.full(len(dev_launcher), np.nan)
    launch_ts[launched] = tables.cpu.ts[dev_launcher[launched]]
    launch_api = np.full(len(dev_launcher), -1, np.int64)
    launch_api[launched] = tables.cpu.name[dev_launcher[launched]]
    grid_unit = kernels.grid_units_per_block(gpu, launch_api, tables.names, devices.is_rocm(tables))
    return DeviceRows(
        gpu=gpu,
        bps=kernels.blocks_per_sm(gpu, num_sms, grid_unit),
        occ=kernels.occupancy(gpu),
        step=assign(steps, gpu.ts, launch_ts),
        max_dur=float(gpu.dur.max()) if len(gpu) else 0.0,
        launcher=dev_launcher,
    )


def _columns(
    tables: TraceTables,
    rows: DeviceRows,
    steps: Steps,
    classes: KernelClasses,
    found_syncs: syncs.SyncEvents,
    gaps: idle_gaps.Gaps,
) -> StepColumns:
    """The columns of every analysed step, with the GPU idle gaps of all of them. A sync belongs to
    the last step whose host window starts at or before it (``find_syncs`` kept those inside)."""
    cpu, n = tables.cpu, len(steps)
    sync_rows = found_syncs.rows
    sync_step = intervals.window_starting_before(cpu.ts[sync_rows], steps.cpu_start)
    mine = sync_step >= 0
    order = np.argsort(sync_step[mine], kind="stable")  # by step, in row order
    per_step = np.bincount(sync_step[mine], minlength=n)
    host_sync_us = windows.sums(cpu.dur[sync_rows][mine][order], per_step)
    after_sync = idle_gaps.sync_us_by_step(gaps, steps)
    return step_columns(rows, steps, classes, host_sync_us, per_step, after_sync)


def _summary(
    rows: DeviceRows, cols: StepColumns, dur: np.ndarray, tc: np.ndarray, classes: kernel_families.NameClasses
) -> Summary:
    """The steps as one (``aggregate``), with the kernel-weighted figures over their kernels."""
    gpu = rows.gpu
    ks = (rows.step >= 0) & (gpu.kind == KERNEL)
    return aggregate.summarize_columns(
        dur,
        cols.values,
        cols.known,
        cols.breakdown,
        aggregate.KernelTotals.of(
            gpu.dur[ks],
            rows.occ[ks],
            tc[gpu.name[ks]],
            classes.mask(kernel_families.UNKNOWN)[gpu.name[ks]],
            classes.mask(kernel_families.CUDA_CORE)[gpu.name[ks]],
        ),
    )


def _basis(steps: Steps) -> StepBasis:
    """Which steps the per-step figures describe (all the analysed ones), and what was left out."""
    n = len(steps)
    first = int(steps.number[0]) if n and not steps.synthetic else None
    last = int(steps.number[-1]) if n and not steps.synthetic else None
    which = f"#{first}" if first == last else f"#{first}-#{last}"
    counted = f"{n} step{'s' if n != 1 else ''}"
    text = f"{counted} ({which}), the mean step" if first is not None else f"{counted} (no step markers)"
    warmup = [LeftOutStep(step=k, dur_us=d, reason=why) for k, d, why in steps.warmup]
    if warmup:
        text += f"; {len(warmup)} warm-up step{'s' if len(warmup) != 1 else ''} left out"
    return StepBasis(
        steps=n,
        first_step=first,
        last_step=last,
        left_out=warmup + [LeftOutStep(step=None, reason=d) for d in steps.dropped],
        description=text,
    )


def _busy_us(view: DeviceView, steps: Steps) -> np.ndarray:
    busy: np.ndarray = view.step_columns.values["gpu_busy_share"] * steps.dur
    return busy


def _with_mfu(summary: Summary, mfu: MfuFigures, steps: Steps) -> Summary:
    distribution = dict(summary.distribution)
    if mfu.mfu_spread is not None:
        distribution["mfu"] = mfu.mfu_spread
    return msgspec.structs.replace(
        summary,
        flops_per_step=mfu.summary_flops,
        mfu=mfu.summary_mfu,
        achieved_flops=mfu.summary_achieved,
        distribution=distribution,
        mfu_status=mfu.status,
        mfu_traced=mfu.summary_mfu_traced,
        step_time_unprofiled_us=mfu.step_unprofiled_us,
        step_time_unprofiled_range_us=mfu.step_unprofiled_range_us,
        mfu_range=mfu.mfu_range,
    )


def _flop_columns(mfu: MfuFigures) -> dict[str, np.ndarray]:
    return {"flops_per_step": mfu.flops, "mfu": mfu.mfu, "achieved_flops": mfu.achieved_flops}


@dataclass(frozen=True)
class _Cards:
    memory: Memory | None
    roofline: Roofline | None
    communication: Communication | None
    pipeline: Pipeline | None
    waterfall: list[WaterfallBar]


def _cards(
    tables: TraceTables,
    view: DeviceView,
    facts: DeviceFacts,
    steps: Steps,
    recorded: Steps,
    dev: Device,
    summary: Summary,
    mfu: MfuFigures,
    options: AnalysisOptions,
    notes: list[str],
) -> _Cards:
    """The report's cards past the summary, each from its stage; a stage that fails leaves a note.
    ``recorded``: every complete step, warm-up included, which the memory card reads."""
    comm = _contained(
        "communication analysis",
        lambda: analyze_communication(
            tables, view.gpu, view.step, steps, dev.name, options.interconnect, view.launcher >= 0
        ),
        notes,
    )
    index = dev.index if dev.index is not None else -1
    status = summary.mfu_status or mfu.status
    return _Cards(
        memory=_contained("memory analysis", lambda: memory_block(tables, index, dev.name, recorded), notes),
        roofline=_contained("roofline", lambda: roofline_block(tables, steps, dev, mfu.peak.name), notes),
        communication=comm,
        pipeline=_contained(
            "pipeline analysis", lambda: analyze_pipeline(tables, view.gpu, view.step, steps, comm), notes
        ),
        # the waterfall takes the traced step apart: its last bar is the traced steps' MFU
        waterfall=_contained("waterfall", lambda: waterfall(facts, summary.mfu_traced, status), notes) or [],
    )


def _contained(what: str, stage: Callable[[], T | None], notes: list[str]) -> T | None:
    """``stage()``, or None and a note when it fails: a bug in one card on odd input must not cost
    the rest of the report."""
    try:
        return stage()
    except Exception as exc:  # noqa: BLE001
        notes.append(f"{what} failed: {type(exc).__name__}: {exc}")
        return None
