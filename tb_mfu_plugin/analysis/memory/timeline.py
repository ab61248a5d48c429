"""One device's memory events on the step timeline: the step each lies in, the op around it on
its thread, and the phase of the training step (forward, backward, optimizer) it belongs to.

The events are host-side (the allocator runs on the thread that asks for memory), so a step is its
host window ``[cpu_start, cpu_end]`` (``ProfilerStep#N`` on the host), as for the syncs: the
ground truth's counters (``max_memory_allocated()`` reset at each step start) see the same events.

The op around an event is found by nesting on the same thread, never by name or time alone:
``autograd::engine::evaluate_function: MmBackward0`` -> ``MmBackward0`` -> ``aten::mm`` on the
autograd thread. The op that allocated is the innermost one that is not an allocation primitive
(``aten::empty_strided`` inside ``aten::mm`` says nothing the ``aten::mm`` does not); the root op is
the outermost. The phase comes from the ops around the event:

- backward: under an autograd node (``autograd::engine::evaluate_function: ...`` or a
  ``...Backward0`` node), on whichever thread ran it;
- optimizer: under an ``Optimizer.step#...`` or ``Optimizer.zero_grad#...`` annotation (what
  ``torch.optim`` records), or an op of that name in traces that file them as ops;
- forward: anything else before the step's first backward event (the loss included);
- other: anything else after it (a gradient clip between backward and ``step()``, the frees of
  the step's locals after the optimizer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.distinct import distinct
from ...trace.tables import ANNOTATION, MEMORY, OP, MemoryTable, TraceTables
from ..device.devices import gpu_devices
from ..flops.recompute import is_backward_node
from ..time import intervals
from ..time.steps import Steps
from ..time.syncs import enclosing_ops

FORWARD, BACKWARD, OPTIMIZER, OTHER = 0, 1, 2, 3
PHASES = ("forward", "backward", "optimizer", "other")
_AUTOGRAD_NODE = "autograd::engine::evaluate_function"
_OPTIMIZER = ("Optimizer.step#", "Optimizer.zero_grad#")
# Ops that only allocate what the op around them asked for.
ALLOCATION_PRIMITIVES = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::resize_",
        "aten::empty.memory_format",
    }
)


@dataclass(frozen=True)
class Timeline:
    """The device's ``[memory]`` events (allocations and frees; not the OOM markers), in time order."""

    mem: MemoryTable
    step: np.ndarray  # index of the step whose host window holds the event, -1 outside every step
    op: np.ndarray  # cpu row of the innermost op around the event on its thread, -1 none
    root: np.ndarray  # cpu row of the outermost op around it, -1 none
    phase: np.ndarray  # FORWARD, BACKWARD, OPTIMIZER or OTHER (OTHER outside the steps too)
    ooms: int  # the allocator's [OutOfMemory] events on the device, inside the steps
    note: str | None = None  # how the events' device was matched, when not by its id


def device_rows(tables: TraceTables, device: int) -> tuple[np.ndarray, str | None]:
    """Rows of ``tables.memory`` for the GPU ``device`` of the kernel events, and a note when they
    are matched other than by id. CUDA numbers both alike; where they differ (ROCm numbers kernel
    devices by HSA agent) the events are taken only when the trace has one of each, never guessed."""
    m = tables.memory
    if not len(m):
        return np.empty(0, np.int64), None
    ids = distinct(m.device[m.device >= 0]).tolist()
    if device in ids:
        return np.flatnonzero(m.device == device), None
    gpus = gpu_devices(tables)
    if len(ids) == 1 and len(gpus) == 1:
        note = (
            f"The memory events name device {ids[0]} and the kernels device {device}: taken as the same GPU, "
            "the trace's only one."
        )
        return np.flatnonzero(m.device == ids[0]), note
    if ids:
        note = f"No memory events name device {device} (they name {ids[:8]}): its memory figures are unknown."
        return np.empty(0, np.int64), note
    return np.empty(0, np.int64), None


def build(tables: TraceTables, device: int, steps: Steps) -> Timeline:
    """The timeline of ``device`` over ``steps``."""
    rows, note = device_rows(tables, device)
    mem = tables.memory.take(rows)
    step = intervals.window_of(mem.ts, steps.cpu_start, steps.cpu_end, closed=True)
    is_oom = mem.kind != MEMORY
    ooms = int((is_oom & (step >= 0)).sum())
    if is_oom.any():
        keep = np.flatnonzero(~is_oom)
        mem, step = mem.take(keep), step[keep]
    cpu = tables.cpu
    ops = np.flatnonzero(cpu.kind == OP)
    primitive = tables.name_codes(ALLOCATION_PRIMITIVES.__contains__)
    op, _ = _enclosing(tables, mem, ops[~primitive[cpu.name[ops]]] if len(ops) else ops)
    _, root = _enclosing(tables, mem, ops)
    phase = _phases(tables, mem, step, root, len(steps))
    return Timeline(mem, step, op, root, phase, ooms, note)


def _enclosing(tables: TraceTables, mem: MemoryTable, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per event, the innermost and the outermost of the cpu ``rows`` (in start order) around it on
    its thread (pid, tid), -1 for none."""
    cpu = tables.cpu
    inner = np.full(len(mem), -1, np.int64)
    outer = np.full(len(mem), -1, np.int64)
    if not len(mem) or not len(rows):
        return inner, outer
    threads = np.stack([mem.pid, mem.tid], axis=1)
    # the allocating threads are few (the main thread, autograd's per device, a loader)
    for pid, tid in np.unique(threads, axis=0).tolist():
        mine = np.flatnonzero((mem.pid == pid) & (mem.tid == tid))
        cand = rows[(cpu.pid[rows] == pid) & (cpu.tid[rows] == tid)]
        if not len(cand):
            continue
        t = mem.ts[mine]
        i, o = enclosing_ops(cpu.ts[cand], cpu.end[cand], t, t)
        inner[mine] = np.where(i >= 0, cand[np.maximum(i, 0)], -1)
        outer[mine] = np.where(o >= 0, cand[np.maximum(o, 0)], -1)
    return inner, outer


def _phases(tables: TraceTables, mem: MemoryTable, step: np.ndarray, root: np.ndarray, n: int) -> np.ndarray:
    names = tables.names
    autograd = tables.name_codes(lambda s: s.startswith(_AUTOGRAD_NODE) or is_backward_node(s))
    optimizer = tables.name_codes(lambda s: s.startswith(_OPTIMIZER))
    has_root = root >= 0
    root_code = np.where(has_root, tables.cpu.name[np.maximum(root, 0)], 0) if len(tables.cpu) else root
    backward = has_root & autograd[root_code] if len(names) else np.zeros(len(mem), bool)
    cpu = tables.cpu
    ann = np.flatnonzero(((cpu.kind == ANNOTATION) | (cpu.kind == OP)) & optimizer[cpu.name]) if len(cpu) else root
    _, in_opt = _enclosing(tables, mem, ann)
    phase = np.full(len(mem), OTHER, np.int8)
    phase[backward] = BACKWARD
    phase[(in_opt >= 0) & ~backward] = OPTIMIZER
    # forward: the rest of a step before its first backward event (a step without backward: all of it)
    first_bwd = np.full(n, np.inf)
    in_step = step >= 0
    np.minimum.at(first_bwd, step[in_step & backward], mem.ts[in_step & backward])
    rest = in_step & (phase == OTHER)
    before = np.zeros(len(mem), bool)
    before[rest] = mem.ts[rest] < first_bwd[step[rest]]
    phase[before] = FORWARD
    return phase
