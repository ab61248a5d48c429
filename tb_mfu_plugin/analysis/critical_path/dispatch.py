"""The host time that dispatched some GPU work: what goes with it when a fix folds it away.

An op that launched only folded work (``aten::softmax`` and its ``cudaLaunchKernel``, autograd's
``evaluate_function: SoftmaxBackward0``) is host time the fix saves: fused kernels are dispatched
once. An op that also launched work that stays (``aten::linear``, a module's annotation) stays.
The windows are the outermost such ops, found for every op at once on the threads' common axis
(``analysis.nesting``).
"""

from __future__ import annotations

import numpy as np

from ...trace.tables import OP, TraceTables
from ..time.nesting import thread_axis


def dispatch_windows(
    tables: TraceTables, gone_calls: np.ndarray, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """Host windows of the outermost ops (started in ``[lo, hi]``) whose every launch call inside
    them, on their thread, is one of ``gone_calls``."""
    cpu = tables.cpu
    empty = np.empty(0)
    if not len(gone_calls) or not len(cpu):
        return empty, empty
    ax = thread_axis(tables)
    calls = tables.launch_rows
    calls = calls[(cpu.ts[calls] >= lo) & (cpu.ts[calls] <= hi)]
    gone = np.isin(calls, gone_calls)
    at_gone, at_kept = np.sort(ax.g0[calls[gone]]), np.sort(ax.g0[calls[~gone]])
    ops = np.flatnonzero((cpu.kind == OP) & (cpu.ts >= lo) & (cpu.ts <= hi))
    a, b = ax.g0[ops] - ax.tol, ax.g1[ops] + ax.tol
    n_gone = np.searchsorted(at_gone, b, side="right") - np.searchsorted(at_gone, a, side="left")
    n_kept = np.searchsorted(at_kept, b, side="right") - np.searchsorted(at_kept, a, side="left")
    cand = ops[(n_gone > 0) & (n_kept == 0)]
    if not len(cand):
        return empty, empty
    order = np.lexsort((-ax.g1[cand], ax.g0[cand]))
    cand = cand[order]
    reach = np.maximum.accumulate(ax.g1[cand])
    outer = np.ones(len(cand), bool)
    outer[1:] = ax.g0[cand][1:] > reach[:-1] + ax.tol
    kept = cand[outer]
    return cpu.ts[kept], cpu.end[kept]
