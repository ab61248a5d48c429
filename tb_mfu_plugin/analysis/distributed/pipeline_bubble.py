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
are counted from the host's ``c10d::send`` / ``c10d::recv_`` ops, the stage is the rank's
place in its send/recv group, and on the first and last stage the order of those ops tells the
schedule: all forwards before all backwards (GPipe) or the two interleaved (1F1B).

The pipeline size p is the size of the group the send/recv kernels ran on, as their args say.
Traces whose NCCL kernels carry no args (torch 2.11 writes none for point-to-point) fall back on
``distributedInfo.pg_config``: the group named for the pipeline (``pp``, ``pipe``) that holds
the rank, else the only group that holds it.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from ...trace.tables import ANNOTATION, OP, CommArgs, GpuTable, TraceTables
from ..time import intervals
from ..time.steps import Steps
from . import collectives as co
from .blocks import Communication, Pipeline
from .communication import comm_rows, exposed_time, p2p_mask
from .info import distributed_block
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
    p2p = p2p_mask(rows)
    p2p_args = [a for a, k in zip(rows.args, rows.kind, strict=True) if k in co.P2P and a is not None]
    n = len(steps)
    step_us = float((steps.end - steps.start).sum()) / n
    bubble = exposed_time(gpu, p2p, rows.comp, steps) / n
    p2p_us = sum(
        intervals.union_length(gpu.ts[p2p], gpu.end[p2p], lo, hi)
        for lo, hi in zip(steps.start.tolist(), steps.end.tolist(), strict=True)
    )
    actions = _actions(tables, steps)
    size, size_source = _pipeline_size(p2p_args), "send/recv kernels' group"
    if size is None:
        size, size_source = _pipeline_size_from_groups(tables)
    stages = sorted(actions.stages)
    v = max(1, len(stages))
    stage = stages[0] if stages else _rank_in_group(tables, p2p_args)
    m, source = actions.microbatches, "annotations"
    p2p_ops = _p2p_ops_per_step(tables, steps)
    if m is None:
        m, source = _microbatches_from_p2p(p2p_ops, len(steps), stage, size), "send/recv count"
    schedule, schedule_source = actions.schedule, "annotations" if actions.schedule else None
    if schedule is None:
        schedule = _schedule_from_p2p(p2p_ops, stage, size)
        schedule_source = "send/recv order" if schedule else None
    analytic = (size - 1) / (v * m + size - 1) if size and m else None
    return Pipeline(
        stage=stage,
        stages=stages,
        pipeline_size=size,
        pipeline_size_source=size_source if size else None,
        bubble_us_per_step=bubble,
        bubble_share=bubble / step_us if step_us > 0 else 0.0,
        analytic_bubble_share=analytic,
        microbatches=m,
        microbatches_source=source if m else None,
        schedule=schedule,
        schedule_source=schedule_source,
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


def _p2p_ops_per_step(tables: TraceTables, steps: Steps) -> list[list[bool]]:
    """Per step, the host's send/recv ops in time order, True for a send."""
    codes = [tables.names.index(n) for n in _P2P_OPS if n in tables.names]
    out: list[list[bool]] = [[] for _ in range(len(steps))]
    if not codes:
        return out
    cpu = tables.cpu
    rows = np.flatnonzero(np.isin(cpu.name, codes) & (cpu.kind == OP))
    rows = rows[np.argsort(cpu.ts[rows], kind="stable")]
    step = intervals.window_of(cpu.ts[rows], steps.cpu_start, steps.cpu_end, closed=True)
    send = tables.names.index(_P2P_OPS[0]) if _P2P_OPS[0] in tables.names else -1
    for r, s in zip(rows.tolist(), step.tolist(), strict=True):
        if s >= 0:
            out[s].append(int(cpu.name[r]) == send)
    return out


def _microbatches_from_p2p(ops: list[list[bool]], n: int, stage: int | None, size: int | None) -> int | None:
    """Micro-batches from the host's send/recv ops when no annotation names them (torch's
    Schedule1F1B records none): a stage with one stage per rank sends and receives one
    activation and one gradient per micro-batch across each of its boundaries (one at either
    end of the pipeline, two in the middle)."""
    if stage is None or not size or size < 2 or not n:
        return None
    boundaries = (stage > 0) + (stage < size - 1)
    per_step = sum(len(o) for o in ops) / n / (2 * boundaries)
    return round(per_step) if per_step >= 1 and abs(per_step - round(per_step)) < 0.01 else None


def _schedule_from_p2p(ops: list[list[bool]], stage: int | None, size: int | None) -> str | None:
    """GPipe or 1F1B from the order of the send/recv ops of an end stage. The first stage sends
    activations forward and receives gradients back; the last receives activations and sends
    gradients. All forward transfers before all backward ones is GPipe; the two interleaved is
    1F1B. A middle stage sends and receives in both passes, so its order does not tell."""
    if stage is None or not size or size < 2 or stage not in (0, size - 1):
        return None
    forward_is_send = stage == 0
    seen: set[str] = set()
    for step in ops:
        forward = [op == forward_is_send for op in step]
        if forward.count(True) < 2 or forward.count(False) < 2:
            continue  # one micro-batch, or a step the profiler cut: no order to read
        first_backward = forward.index(False)
        seen.add("GPipe" if not any(forward[first_backward:]) else "1F1B")
    return seen.pop() if len(seen) == 1 else None


# A process group named for the pipeline: "pp", "mesh_pp", "pipeline", "pipe_group".
_PIPELINE_GROUP = re.compile(r"(?:^|[^a-z])(?:pp|pipe\w*)(?:$|[^a-z])", re.IGNORECASE)


def _pipeline_size_from_groups(tables: TraceTables) -> tuple[int | None, str]:
    """p from ``distributedInfo.pg_config`` when the send/recv kernels do not name their group:
    the group named for the pipeline that holds the rank, else the only group that holds it."""
    info = distributed_block(tables.meta.distributed_info, [])
    if info is None or info.rank is None or not info.pg_config:
        return None, ""
    mine = [g for g in info.pg_config if g.ranks is not None and info.rank in g.ranks and g.pg_size]
    named = [g for g in mine if _PIPELINE_GROUP.search(f"{g.pg_desc or ''} {g.pg_name or ''}")]
    for found in (named, mine):
        if len(found) == 1:
            g = found[0]
            return g.pg_size, f"process group {g.pg_desc or g.pg_name or '?'} (distributedInfo)"
    return None, ""


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
