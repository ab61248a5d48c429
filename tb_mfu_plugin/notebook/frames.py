"""The report's tables as pandas DataFrames: one row per (run, worker, span, gpu, …).

Every frame starts with the identity columns ``run``, ``worker``, ``span`` (strings)
and ``gpu`` (the device index, nullable ``Int64``). The other columns keep the JSON
report's key names, which carry their units (``dur_us``, ``bytes_per_step``,
``*_share`` fractions 0-1). Dtypes are set from the report structs' types, so an
empty frame has the same columns and dtypes as a full one: ``int`` → ``int64``,
``float`` → ``float64`` (a missing value is NaN), ``str`` → ``string``, ``bool`` →
``bool``, dicts and lists → ``object``; an optional ``int`` or ``bool`` is the nullable
``Int64`` / ``boolean``.

pandas is imported inside the builders: importing this module stays light.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from ..analysis.critical_path.classes import CLASSES
from ..analysis.critical_path.report_types import WhatIfCase
from ..analysis.distributed.blocks import Collective
from ..analysis.evidence.show import evidence_lines
from ..analysis.memory.types import MemoryStep
from ..analysis.report import CopyStats, KernelStats, Report, Step, Summary, SyncStats, WorkerReport

if TYPE_CHECKING:
    import pandas as pd

Schema = dict[str, str]
Row = dict[str, Any]

IDENTITY: Schema = {"run": "string", "worker": "string", "span": "string", "gpu": "Int64"}


def _dtype(annotation: Any) -> str | None:
    """The pandas dtype of a struct field's type (``X | None`` as X); None for dicts and lists."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        optional = len(args) < len(typing.get_args(annotation))
        annotation = args[0] if len(args) == 1 else Any
    if annotation is bool:
        return "boolean" if optional else "bool"
    if annotation is int:
        return "Int64" if optional else "int64"  # numpy ints have no missing value
    if annotation is float:
        return "float64"
    if annotation is str:
        return "string"
    return None


def struct_schema(cls: type[msgspec.Struct], skip: Iterable[str] = ()) -> Schema:
    """The scalar fields of a report struct, in declaration order, with their pandas dtypes."""
    out: Schema = {}
    for f in msgspec.structs.fields(cls):
        dt = _dtype(f.type)
        if dt is not None and f.name not in skip:
            out[f.name] = dt
    return out


# The frames' schemas. ``steps`` and ``workers`` also get one ``breakdown_<part>`` float64
# column per part of the step breakdown (kernel, memcpy, memset, idle_after_sync, idle_other).
STEPS: Schema = {
    **IDENTITY,
    "step": "int64",
    "start_us": "float64",
    "dur_us": "float64",
    **struct_schema(Step, skip=("step", "start_us", "dur_us")),
}
WORKERS: Schema = {
    **IDENTITY,
    "file": "string",
    "error": "string",
    "device_name": "string",
    "num_sms": "Int64",
    "peak_flops": "float64",
    "dtype": "string",
    **struct_schema(Summary, skip=("steps",)),
    "steps": "Int64",
    "hfu": "float64",
    "achieved_tflops_while_busy": "float64",
    "flops_source": "string",
    # the gain of fixing every finding at once (diagnosis.engine): not the sum of findings()' gains
    "combined_gain_us_per_step": "float64",
    "combined_gain_share": "float64",
    # Summary.mfu_range and step_time_unprofiled_range_us, one column an end (NaN where there is none)
    "mfu_low": "float64",
    "mfu_high": "float64",
    "step_time_unprofiled_low_us": "float64",
    "step_time_unprofiled_high_us": "float64",
}
KERNELS: Schema = {**IDENTITY, **struct_schema(KernelStats)}
# one row per analysed step of a profile_memory=True trace (analysis.memory, docs/memory.md), with the
# device's memory and the worker's headroom beside each (a Literal phase is a string)
MEMORY: Schema = {
    **IDENTITY,
    **struct_schema(MemoryStep),
    "peak_phase": "string",
    "device_total_bytes": "Int64",
    "batch_factor": "float64",
}
COPIES: Schema = {**IDENTITY, **struct_schema(CopyStats)}
SYNCS: Schema = {**IDENTITY, **struct_schema(SyncStats)}
FINDINGS: Schema = {
    **IDENTITY,
    "id": "string",
    "severity": "string",
    "title": "string",
    "subject": "string",
    "est_gain_us_per_step": "float64",
    "est_gain_share": "float64",
    "est_mfu_after": "float64",
    "recommendation": "string",
    "evidence": "object",
}
# One row per value of a finding's evidence (analysis.evidence.show.evidence_lines): where it is in the
# evidence's JSON, its label, its unit, the value as in the JSON, and the text every face shows for it
EVIDENCE: Schema = {
    **IDENTITY,
    "id": "string",
    "subject": "string",
    "path": "string",
    "label": "string",
    "unit": "string",
    "value": "object",
    "text": "string",
}
RANKS: Schema = {
    "run": "string",
    "rank": "Int64",
    "worker": "string",
    "span": "string",
    "step_time_us": "float64",
    "gpu_busy_share": "float64",
    "idle_share": "float64",
    "exposed_communication_us_per_step": "float64",
    "mfu": "float64",
    "job_mfu": "float64",  # the run's one MFU (RankSummary.job), the same on each of its rows
    "straggler": "bool",
    "communication_us_per_step": "float64",
    "overlap_ratio": "float64",
    "bubble_share": "float64",
    "clock_shift_us": "float64",
    "collective_wait_us_per_step": "float64",
}
# ``collective`` and ``kernel_us_per_step`` are the Collective's ``kind`` and ``us_per_step``, under
# the names the frame had before the report carried a per-collective table.
COLLECTIVES: Schema = {
    **IDENTITY,
    "rank": "Int64",
    "collective": "string",
    "kernel_us_per_step": "float64",
    **struct_schema(Collective, skip=("kind", "us_per_step")),
}

# One row per modelled step: its critical path's µs in each class (the classes' names), adding up to dur_us.
CRITICAL_PATH: Schema = {
    **IDENTITY,
    "step": "int64",
    "dur_us": "float64",
    "bound": "string",
    **dict.fromkeys(CLASSES, "float64"),
}
# One row per what-if re-timing: the findings it applies ("id" or "id · subject"), ``combined`` for
# the one of every re-timed finding at once (WorkerReport.whatif.combined).
WHATIF: Schema = {**IDENTITY, "findings": "object", "combined": "bool", **struct_schema(WhatIfCase)}


def frame(rows: list[Row], schema: Schema, extra: Schema | None = None) -> pd.DataFrame:
    """A DataFrame with exactly ``schema``'s columns (then ``extra``'s) and dtypes."""
    import pandas as pd

    full = {**schema, **(extra or {})}
    columns = {}
    for name, dtype in full.items():
        values = [row.get(name) for row in rows]
        if dtype == "bool":
            values = [bool(v) for v in values]
        if dtype == "object":
            columns[name] = pd.Series(values, dtype=object)
        else:
            columns[name] = pd.Series(pd.array(values, dtype=dtype))
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)))


def _workers(report: Report) -> Iterator[tuple[str, WorkerReport, Row]]:
    for run in report.runs:
        for w in run.workers:
            gpu = w.device.index if w.device is not None else None
            yield run.name, w, {"run": run.name, "worker": w.name, "span": w.span, "gpu": gpu}


def _fields(obj: msgspec.Struct, schema: Schema) -> Row:
    return {k: getattr(obj, k) for k in schema if hasattr(obj, k)}


def _breakdown_schema(parts: Iterable[dict[str, float]]) -> Schema:
    names: dict[str, None] = {}
    for p in parts:
        names.update(dict.fromkeys(p))
    return {f"breakdown_{k}": "float64" for k in names}


def steps_rows(report: Report) -> tuple[list[Row], Schema]:
    rows = []
    for _, w, ident in _workers(report):
        for st in w.steps:
            row = {**ident, **_fields(st, STEPS)}
            row.update({f"breakdown_{k}": v for k, v in st.breakdown.items()})
            rows.append(row)
    extra = _breakdown_schema(st.breakdown for _, w, _ in _workers(report) for st in w.steps)
    return rows, extra


def workers_rows(report: Report) -> tuple[list[Row], Schema]:
    rows = []
    for _, w, ident in _workers(report):
        row: Row = {**ident, "file": w.file, "error": w.error}
        if w.device is not None:
            row.update(
                device_name=w.device.name,
                num_sms=w.device.num_sms,
                peak_flops=w.device.peak_flops,
                dtype=w.device.dtype,
            )
        if w.summary is not None:
            s = w.summary
            row.update(_fields(s, WORKERS))
            row.update({f"breakdown_{k}": v for k, v in s.breakdown.items()})
            m, t = s.mfu_range, s.step_time_unprofiled_range_us
            row.update(
                mfu_low=m and m.low,
                mfu_high=m and m.high,
                step_time_unprofiled_low_us=t and t.low,
                step_time_unprofiled_high_us=t and t.high,
            )
        f = w.flops
        row.update(
            hfu=f and f.hfu,
            achieved_tflops_while_busy=f and f.achieved_tflops_while_busy,
            flops_source=f and f.headline_source,
            combined_gain_us_per_step=w.combined_gain_us_per_step,
            combined_gain_share=w.combined_gain_share,
        )
        rows.append(row)
    extra = _breakdown_schema(w.summary.breakdown for _, w, _ in _workers(report) if w.summary is not None)
    return rows, extra


def kernels_rows(report: Report) -> list[Row]:
    return [{**ident, **_fields(k, KERNELS)} for _, w, ident in _workers(report) for k in w.top_kernels]


def copies_rows(report: Report) -> list[Row]:
    return [{**ident, **_fields(c, COPIES)} for _, w, ident in _workers(report) for c in w.copies]


def syncs_rows(report: Report) -> list[Row]:
    return [{**ident, **_fields(s, SYNCS)} for _, w, ident in _workers(report) for s in w.syncs]


def findings_rows(report: Report) -> list[Row]:
    return [
        {**ident, **_fields(f, FINDINGS), "evidence": msgspec.to_builtins(f.evidence)}
        for _, w, ident in _workers(report)
        for f in w.findings
    ]


def evidence_rows(report: Report) -> list[Row]:
    """One row per value of each finding's evidence, with its unit and its text (analysis.evidence.show)."""
    return [
        {**ident, "id": f.id, "subject": f.subject, **dataclasses.asdict(line)}
        for _, w, ident in _workers(report)
        for f in w.findings
        for line in evidence_lines(f.evidence)
    ]


def ranks_rows(report: Report) -> list[Row]:
    rows = []
    for run in report.runs:
        if run.ranks is None:
            continue
        straggler, job = run.ranks.straggler, run.ranks.job
        for r in run.ranks.ranks:
            row = {"run": run.name, **_fields(r, RANKS)}
            row["job_mfu"] = job.mfu if job is not None else None
            row["straggler"] = straggler is not None and straggler.worker == r.worker
            rows.append(row)
    return rows


def collectives_rows(report: Report) -> list[Row]:
    """One row per collective kind, process group and dtype of every worker that ran collectives
    (``WorkerReport.communication``, docs/distributed.md)."""
    rows = []
    for _, w, ident in _workers(report):
        if w.communication is None:
            continue
        rank = w.distributed.rank if w.distributed is not None else None
        for c in w.communication.collectives:
            rows.append(
                {
                    **ident,
                    "rank": rank,
                    "collective": c.kind,
                    "kernel_us_per_step": c.us_per_step,
                    **_fields(c, COLLECTIVES),
                }
            )
    return rows


def critical_path_rows(report: Report) -> list[Row]:
    rows = []
    for _, w, ident in _workers(report):
        if w.critical_path is None:
            continue
        for st in w.critical_path.steps:
            # a class with no time on the step's path is 0 here: the path was walked, it has none
            rows.append(
                {
                    **ident,
                    "step": st.step,
                    "dur_us": st.dur_us,
                    "bound": st.bound,
                    **{c: st.us.get(c, 0.0) for c in CLASSES},
                }
            )
    return rows


def whatif_rows(report: Report) -> list[Row]:
    rows = []
    for _, w, ident in _workers(report):
        wi = w.whatif
        if wi is None:
            continue
        names = [f.id + (f" · {f.subject}" if f.subject else "") for f in wi.findings]
        for c in wi.cases:
            picked = [n for k, n in enumerate(names) if c.mask >> k & 1]
            rows.append({**ident, "findings": picked, "combined": False, **_fields(c, WHATIF)})
        if wi.combined is not None:
            more = wi.findings_retimed - len(names)  # re-timed findings the panel does not list
            every = names + ([f"and {more} more"] if more > 0 else [])
            rows.append({**ident, "findings": every, "combined": True, **_fields(wi.combined, WHATIF)})
    return rows


def memory_rows(report: Report) -> list[Row]:
    """One row per analysed step of every worker with memory figures (``WorkerReport.memory``)."""
    rows = []
    for _, w, ident in _workers(report):
        m = w.memory
        if m is None or m.unavailable is not None:
            continue
        factor = m.headroom.batch_factor if m.headroom is not None else None
        for s in m.steps:
            rows.append(
                {**ident, **_fields(s, MEMORY), "device_total_bytes": m.device_total_bytes, "batch_factor": factor}
            )
    return rows
