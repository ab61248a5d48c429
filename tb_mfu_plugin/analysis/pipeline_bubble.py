"""The pipeline bubble of one stage: time it waits on a neighbour with nothing to compute.

A stage that needs its neighbour's activations (forward) or gradients (backward) posts a receive
and the compute stream waits for it, so the wait shows on the GPU as send/recv kernels running
with no compute kernel beside them. That time, per step, is the measured bubble. The
analytic bubble of a synchronous schedule with p stages and m micro-batches is
(p-1)/(m+p-1) of the step (GPipe and 1F1B alike), and (p-1)/(v·m+p-1) when each rank runs v
interleaved stages; a measured bubble well above it points to unbalanced stages or slow links.

Micro-batches and stages come from the annotations torch.distributed.pipelining records:
``Forward i`` / ``Backward i`` (GPipe) and ``PP:<stage><F|B|I|W><micro-batch>`` (the schedules
of the runtime: interleaved, zero bubble). ``Schedule1F1B`` records none; there the micro-batches
are counted from the host's ``c10d::send`` / ``c10d::recv_`` ops, and the stage is the rank's
place in its send/recv group.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ..trace.tables import ANNOTATION, OP, CommArgs, GpuTable, TraceTables
from . import collectives as co
from . import intervals
from .communication import comm_rows, exposed_time
from .dist_report import Communication, Pipeline
from .steps import Steps
from .strategy import PP

_RUNTIME_ACTION = re.compile(r"^PP:(\d+)(F|B|I|W)(\d+)$")
_GPIPE_ACTION = re.compile(r"^(Forward|Backward) (\d+)$")


def analyze_pipeline(
    tables: TraceTables, gpu: GpuTable, step_of_row: np.ndarray, steps: Steps, comm: Communication | None
) -> Pipeline | None:
    """The ``pipeline`` block of one device; None unless its collectives include pipeline send/recv."""
    if comm is None or PP not in comm.strategy or len(steps) == 0:
        return None
    rows = comm_rows(tables, gpu)
    p2p = np.zeros(len(gpu), bool)
    p2p_rows = [r for r, k in zip(np.flatnonzero(rows.comm).tolist(), rows.kind, strict=True) if k in co.P2P]
    p2p[p2p_rows] = True
    p2p_args = [a for a, k in zip(rows.args, rows.kind, strict=True) if k in co.P2P and a is not None]
    n = len(steps)
    step_us = float((steps.end - steps.start).sum()) / n
    bubble = exposed_time(gpu, p2p, rows.comp, steps) / n
    p2p_us = sum(
        intervals.union_length(gpu.ts[p2p], gpu.end[p2p], lo, hi)
        for lo, hi in zip(steps.start.tolist(), steps.end.tolist(), strict=True)
    )
    actions = _actions(tables, steps)
    size = _pipeline_size(p2p_args)
    stages = sorted(actions.stages)
    v = max(1, len(stages))
    stage = stages[0] if stages else _rank_in_group(tables, p2p_args)
    m, source = actions.microbatches, "annotations"
    if m is None:
        m, source = _microbatches_from_p2p(tables, steps, stage, size), "send/recv count"
    analytic = (size - 1) / (v * m + size - 1) if size and m else None
    return Pipeline(
        stage=stage,
        stages=stages,
        pipeline_size=size,
        bubble_us_per_step=bubble,
        bubble_share=bubble / step_us if step_us > 0 else 0.0,
        analytic_bubble_share=analytic,
        microbatches=m,
        microbatches_source=source if m else None,
        schedule=actions.schedule,
        p2p_us_per_step=p2p_us / n,
    )


class _Actions:
    """What the schedule's annotations say: stage indices, micro-batches per step, schedule."""

    def __init__(self) -> None:
        self.stages: set[int] = set()
        self.microbatches: int | None = None
        self.schedule: str | None = None


def _actions(tables: TraceTables, steps: Steps) -> _Actions:
    out = _Actions()
    parsed: dict[int, tuple[int | None, str, int]] = {}
    for code, name in enumerate(tables.names):
        m = _RUNTIME_ACTION.match(name)
        if m:
            parsed[code] = (int(m.group(1)), m.group(2), int(m.group(3)))
            continue
        g = _GPIPE_ACTION.match(name)
        if g:
            parsed[code] = (None, g.group(1)[0], int(g.group(2)))
    if not parsed:
        return out
    cpu = tables.cpu
    codes = np.fromiter(parsed, np.int64, len(parsed))
    rows = np.flatnonzero(np.isin(cpu.name, codes) & ((cpu.kind == ANNOTATION) | (cpu.kind == OP)))
    step = intervals.window_of(cpu.ts[rows], steps.cpu_start, steps.cpu_end, closed=True)
    per_step: dict[int, set[int]] = defaultdict(set)
    kinds: set[str] = set()
    for r, s in zip(rows.tolist(), step.tolist(), strict=True):
        stage, kind, mb = parsed[int(cpu.name[r])]
        if s < 0:
            continue
        if stage is not None:
            out.stages.add(stage)
        kinds.add(kind)
        if kind == "F":
            per_step[s].add(mb)
    if per_step:
        out.microbatches = int(np.median([len(v) for v in per_step.values()]))
    runtime = any(v[0] is not None for v in parsed.values())
    if not runtime:
        out.schedule = "GPipe"
    elif {"I", "W"} & kinds:
        out.schedule = "zero bubble"
    else:
        out.schedule = "interleaved 1F1B" if len(out.stages) > 1 else "1F1B"
    return out


_P2P_OPS = ("c10d::send", "c10d::recv_")


def _microbatches_from_p2p(tables: TraceTables, steps: Steps, stage: int | None, size: int | None) -> int | None:
    """Micro-batches from the host's send/recv ops when no annotation names them (torch's
    Schedule1F1B records none): a stage with one stage per rank sends and receives one
    activation and one gradient per micro-batch across each of its boundaries (one at either
    end of the pipeline, two in the middle)."""
    if stage is None or not size or size < 2:
        return None
    codes = [tables.names.index(n) for n in _P2P_OPS if n in tables.names]
    if not codes:
        return None
    cpu = tables.cpu
    rows = np.flatnonzero(np.isin(cpu.name, codes) & (cpu.kind == OP))
    inside = intervals.window_of(cpu.ts[rows], steps.cpu_start, steps.cpu_end, closed=True) >= 0
    boundaries = (stage > 0) + (stage < size - 1)
    per_step = int(inside.sum()) / len(steps) / (2 * boundaries)
    return round(per_step) if per_step >= 1 and abs(per_step - round(per_step)) < 0.01 else None


def _pipeline_size(p2p_args: list[CommArgs]) -> int | None:
    """p: the size of the group the send/recv kernels ran on, as their args say."""
    sizes = [a.group_size for a in p2p_args if a.group_size > 0]
    return max(sizes) if sizes else None


def _rank_in_group(tables: TraceTables, p2p_args: list[CommArgs]) -> int | None:
    """The rank's position in its pipeline group's ranks, when no annotation names its stage."""
    rank = (tables.meta.distributed_info or {}).get("rank")
    if not isinstance(rank, int):
        return None
    for a in p2p_args:
        members = [int(x) for x in re.findall(r"\d+", a.group_ranks or "")]
        if rank in members:
            return members.index(rank)
    return rank
