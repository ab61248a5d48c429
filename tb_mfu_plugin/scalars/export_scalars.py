"""``tb-mfu export-scalars LOGDIR --out DIR``: the report's per-step figures as TensorBoard
scalars, so MFU sits beside the loss in Scalars / Time Series and runs sort by MFU in HParams.

One TensorBoard run (a directory under ``DIR``) per analysed run and worker:
``DIR/<run>/<worker>``, with ``-gpu<index>`` when a worker's trace holds several GPUs
and ``-<span>`` when two spans of a worker share step numbers. Every step of the
report is a point at its profiler step number (``ProfilerStep#N``), under the JSON
report's key name with a ``tb_mfu/`` prefix (``tb_mfu/mfu``, ``tb_mfu/sm_efficiency``,
…; the step's ``dur_us`` is ``tb_mfu/step_time_us``, the summary's name for it). Each
span's summary goes under ``tb_mfu/summary/<key>`` at the span's last step: those are
the HParams dashboard's metric columns; a rank of a distributed run adds its job's one MFU there
(``tb_mfu/summary/job_mfu``, the report's ``ranks.job.mfu``). Traces recorded with ``profile_memory=True`` add each
step's peak memory (``tb_mfu/peak_allocated_bytes``, ``tb_mfu/peak_reserved_bytes``; the report's
``memory.steps``) and the highest over the steps to the summary.

Nothing is written unless ``--out`` is given. The event files' names end in
``.tb_mfu``; such files already in a target directory (an earlier export) are an error
unless ``--replace``, which removes only those. Other event files are never touched.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field

from ..analysis.definitions import DEFINITIONS, UNIT_MEANING, definition
from ..analysis.device.mfu import achieved_tflops_while_busy, mfu_for
from ..analysis.report import Report, Step, WorkerReport
from .tbevents import HParamValue, ScalarWriter, write_hparams_config

PREFIX = "tb_mfu/"
SUMMARY_PREFIX = PREFIX + "summary/"
# Step keys that are positions, not figures (``dur_us`` is exported as ``step_time_us``).
_NOT_FIGURES = {"step", "start_us", "dur_us"}

# Summary keys offered as metric columns in the HParams dashboard, with what they mean.
# (Their words are the figures' definitions, analysis.definitions, as every face states them.)
HPARAMS_METRICS: tuple[tuple[str, str], ...] = tuple(
    (key, f"{definition(name)} ({UNIT_MEANING[DEFINITIONS[name].unit]})")
    for key, name in (
        ("mfu", "mfu"),
        ("job_mfu", "ranks.job.mfu"),
        ("hfu", "flops.hfu"),
        ("achieved_tflops_while_busy", "flops.achieved_tflops_while_busy"),
        ("step_time_us", "step_time_us"),
        ("gpu_busy_share", "gpu_busy_share"),
        ("kernel_time_share", "kernel_time_share"),
        ("sm_efficiency", "sm_efficiency"),
        ("peak_allocated_bytes", "memory.peak_allocated_bytes"),
    )
)
# The memory block's per-step figures exported beside each step's (analysis.memory).
MEMORY_STEP_KEYS = ("peak_allocated_bytes", "peak_reserved_bytes")
HPARAMS: tuple[tuple[str, str], ...] = (
    ("run", "the analysed run (directory under the logdir)"),
    ("worker", "the profiler worker (trace file prefix)"),
    ("gpu", "the GPU's index in the trace"),
    ("device_name", "the GPU model"),
    ("dtype", "the dtype whose peak MFU is measured against"),
    ("peak_tflops", "the dense peak used for MFU, TFLOP/s"),
    ("flops_source", "where the FLOPs per step come from"),
)


class ExportError(Exception):
    """A reason to write nothing at all (one line, naming the directory)."""


def _executed_flops(w: WorkerReport) -> float | None:
    f = w.flops
    if f is None or f.hfu is None:  # HFU needs the trace's shapes
        return None
    return f.executed_flops_per_step or None


def step_figures(w: WorkerReport, st: Step) -> dict[str, float]:
    """The step's figures by JSON key (None and non-numeric keys left out), plus the
    per-step forms of two figures the report gives only over all steps:

    - ``hfu``: executed FLOPs per step / the step's time / the peak;
    - ``achieved_tflops_while_busy``: executed FLOPs per step / the step's GPU busy time.

    The executed FLOPs per step are the report's median over steps (``flops.executed_flops_per_step``):
    steps of a training loop execute the same FLOPs, so over the steps these give back the
    report's ``flops.hfu`` (a harmonic mean) and ``flops.achieved_tflops_while_busy`` (a median).
    """
    out: dict[str, float] = {"step_time_us": float(st.dur_us)}
    for name in st.__struct_fields__:
        value = getattr(st, name)
        if name in _NOT_FIGURES or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        out[name] = float(value)
    executed = _executed_flops(w)
    peak = w.device.peak_flops if w.device is not None else None
    hfu = mfu_for(executed, st.dur_us, peak)
    if hfu is not None:
        out["hfu"] = hfu
    busy = achieved_tflops_while_busy(executed, st.gpu_busy_share * st.dur_us)
    if busy is not None:
        out["achieved_tflops_while_busy"] = busy
    mem = next((s for s in w.memory.steps if s.step == st.step), None) if w.memory is not None else None
    for key in MEMORY_STEP_KEYS if mem is not None else ():
        if (value := getattr(mem, key)) is not None:
            out[key] = float(value)
    return out


def summary_figures(w: WorkerReport) -> dict[str, float]:
    """The worker's summary by JSON key, with ``hfu`` and ``achieved_tflops_while_busy`` from ``flops``
    and the ends of the likely ranges (``mfu_low``, ``mfu_high``, ``step_time_unprofiled_low_us``, …)."""
    out: dict[str, float] = {}
    s = w.summary
    if s is not None:
        for name in s.__struct_fields__:
            value = getattr(s, name)
            if not isinstance(value, bool) and isinstance(value, int | float):
                out[name] = float(value)
        # the likely ranges, an end each, under the notebook's column names
        for low, high, r in (
            ("mfu_low", "mfu_high", s.mfu_range),
            ("step_time_unprofiled_low_us", "step_time_unprofiled_high_us", s.step_time_unprofiled_range_us),
        ):
            if r is not None:
                out[low], out[high] = r.low, r.high
    f = w.flops
    if f is not None and f.hfu is not None:
        out["hfu"] = f.hfu
    if f is not None and f.achieved_tflops_while_busy is not None:
        out["achieved_tflops_while_busy"] = f.achieved_tflops_while_busy
    m = w.memory
    for key in MEMORY_STEP_KEYS if m is not None else ():
        if (value := getattr(m, key)) is not None:
            out[key] = float(value)
    return out


def _hparams(run: str, w: WorkerReport) -> dict[str, HParamValue]:
    hp: dict[str, HParamValue] = {"run": run, "worker": w.name}
    dev = w.device
    if dev is not None:
        if dev.index is not None:
            hp["gpu"] = dev.index
        if dev.name:
            hp["device_name"] = dev.name
        if dev.dtype:
            hp["dtype"] = dev.dtype
        if dev.peak_flops:
            hp["peak_tflops"] = dev.peak_flops / 1e12
    source = w.flops.headline_source if w.flops is not None else None
    if source:
        hp["flops_source"] = source
    return hp


@dataclass
class ExportedRun:
    """One TensorBoard run written: its directory (relative to ``--out``) and what went in."""

    name: str
    workers: list[WorkerReport] = field(default_factory=list)
    path: str = ""
    points: int = 0


def _safe_parts(name: str) -> list[str]:
    parts = [re.sub(r"[^\w.\-]+", "_", p) for p in re.split(r"[\\/]+", name)]
    return [p for p in parts if p not in ("", ".", "..")] or ["run"]


def plan_runs(report: Report) -> list[ExportedRun]:
    """Group the report's analysed workers into TensorBoard runs (see the module doc)."""
    groups: dict[tuple[str, str, int | None], list[WorkerReport]] = {}
    gpus: dict[tuple[str, str], set[int | None]] = {}
    for run in report.runs:
        for w in run.workers:
            if w.error is not None or not w.steps:
                continue
            index = w.device.index if w.device is not None else None
            groups.setdefault((run.name, w.name, index), []).append(w)
            gpus.setdefault((run.name, w.name), set()).add(index)
    planned: list[ExportedRun] = []
    for (run_name, worker, index), workers in groups.items():
        base = "/".join([*_safe_parts(run_name), *_safe_parts(worker)])
        if len(gpus[(run_name, worker)]) > 1:
            base += f"-gpu{index}"
        steps = [st.step for w in workers for st in w.steps]
        if len(steps) == len(set(steps)):
            planned.append(ExportedRun(base, workers))
        else:  # spans that restart the step count cannot share an axis
            planned.extend(ExportedRun(f"{base}-{_safe_parts(w.span)[0]}", [w]) for w in workers)
    return planned


# The suffix of the event files this export writes: the only files ``--replace`` removes.
SUFFIX = ".tb_mfu"


def _event_files(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names if n.startswith("events.out.tfevents.") and n.endswith(SUFFIX)]


def _claim(directories: list[str], replace: bool) -> None:
    """Refuse (or, with ``replace``, remove) an earlier export's event files where this one
    writes: a second file in a run directory would draw every point twice."""
    taken = [d for d in directories if _event_files(d)]
    if taken and not replace:
        raise ExportError(f"{taken[0]}: holds event files of an earlier export (pass --replace to overwrite them)")
    for d in taken:
        for path in _event_files(d):
            os.remove(path)


def export_report(report: Report, out_dir: str, replace: bool = False) -> list[ExportedRun]:
    """Write one TensorBoard run per analysed run and worker under ``out_dir``, plus the
    HParams experiment config at its root. Returns the runs written."""
    planned = plan_runs(report)
    if not planned:
        raise ExportError("no analysed steps to export (every file failed, or no trace has step markers)")
    for p in planned:
        p.path = os.path.join(out_dir, *p.name.split("/"))
    _claim([out_dir, *(p.path for p in planned)], replace)
    run_of = {id(w): r.name for r in report.runs for w in r.workers}
    # each rank's job's one MFU (RankSummary.job), a summary metric beside the rank's own
    job_of = {id(w): r.ranks.job.mfu for r in report.runs if r.ranks and r.ranks.job for w in r.workers}
    written_at = time.time()
    for p in planned:
        with ScalarWriter(p.path, filename_suffix=SUFFIX) as writer:
            p.points = _write_run(writer, p, run_of, written_at, job_of)
    write_hparams_config(out_dir, SUFFIX, HPARAMS, [(SUMMARY_PREFIX + k, d) for k, d in HPARAMS_METRICS])
    return planned


def _write_run(
    writer: ScalarWriter, p: ExportedRun, run_of: dict[int, str], written_at: float, job_of: dict[int, float]
) -> int:
    first = p.workers[0]
    hparams = _hparams(run_of[id(first)], first)
    writer.add_hparams(hparams, trial_id=p.name)
    t0 = min(st.start_us for w in p.workers for st in w.steps)
    points = 0
    for w in sorted(p.workers, key=lambda w: w.steps[0].step):
        for st in w.steps:
            # wall time: the export's, offset by the step's start, so "relative" time reads as trace time
            wall = written_at + (st.start_us - t0) * 1e-6
            for key, value in step_figures(w, st).items():
                writer.add_scalar(PREFIX + key, value, st.step, wall_time=wall)
                points += 1
        last = w.steps[-1]
        summary = summary_figures(w)
        if id(w) in job_of:
            summary["job_mfu"] = job_of[id(w)]
        for key, value in summary.items():
            writer.add_scalar(SUMMARY_PREFIX + key, value, last.step, wall_time=written_at)
    return points
