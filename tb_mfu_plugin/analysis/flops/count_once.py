"""Which operators' FLOPs count, once each: the count-once rule.

A training step records the same math at several levels: ``aten::linear`` ->
``aten::addmm``; ``aten::matmul`` -> ``aten::bmm``; ``aten::scaled_dot_product_attention``
-> ``aten::_scaled_dot_product_flash_attention`` -> ``aten::_flash_attention_forward``;
``aten::convolution`` -> ``aten::_convolution`` -> ``aten::cudnn_convolution``. We count
the **outermost op that has a formula** (``flops.FORMULAS``), on its thread, nested in
time, and none of its descendants. That is the level ``FlopCounterMode`` sees (it
counts at the dispatcher, above the kernels), so totals agree with it. Composite
ops (``linear``, ``matmul``, ``scaled_dot_product_attention``) have no formula, so
the op underneath them counts. When the outermost formula is *inexact* (a legacy
trace without stride/padding) and an exact formula exists below it, the exact ones
count instead.

An op counts only if it (or an op nested in it) launched GPU work: a runtime or
driver call inside it whose correlation id matches a GPU event, or an op inside it
whose external id a GPU event carries. Traces with no GPU events at all (CPU-only)
count every outermost formula op.

``flops`` per op follows FlopCounterMode, which counts what ran, recompute included.
``recompute_flops`` is the part of it that repeats forward work: fused attention backward
recomputes Q·Kᵀ (one fifth of its FLOPs), and activation checkpointing re-runs whole
forward ops during backward (``recompute``).

The phases below are vectorised numpy over the thread axis of ``analysis.time.nesting``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.distinct import distinct, in_distinct
from ...trace.tables import DRIVER, OP, RUNTIME, OpInputs, TraceTables
from ..fmt import pct
from ..kernels.name_patterns import op_rows_named
from ..time import nesting
from ..time.nesting import ThreadAxis
from ..time.op_attribution import attribute_kernels
from . import recompute
from . import shapes as F
from .conv_hints import ConvKey, conv_out_hints, legacy_grad_input_hints
from .formulas import Hints
from .per_window import OpFlops


@dataclass(frozen=True)
class _Estimates:
    """The FLOP estimate of every formula op of the trace (``rows``, time order)."""

    rows: np.ndarray  # cpu rows of the ops with a FLOP formula
    flops: np.ndarray  # NaN where neither shapes nor a trace ``flops`` arg gave a figure
    recompute: np.ndarray
    exact: np.ndarray
    dtype: np.ndarray
    family: np.ndarray
    direction: np.ndarray
    missing_shapes: int  # ops with no recorded shapes and no ``flops`` arg


def count_flops(tables: TraceTables, require_gpu_work: bool | None = None) -> OpFlops:
    """Select the ops whose FLOPs count, once each, and compute their FLOPs.

    ``require_gpu_work``: count only ops that launched GPU work. ``None`` (default)
    means "when the trace has any GPU events".
    """
    c = tables.cpu
    notes: list[str] = []
    if require_gpu_work is None:
        require_gpu_work = len(tables.gpu) > 0
    ax = nesting.thread_axis(tables)
    est = _estimate_all(tables, ax)
    if est.missing_shapes:
        notes.append(
            f"{est.missing_shapes} matmul/conv/attention ops carry no recorded shapes "
            "(profile with record_shapes=True); their FLOPs are not counted"
        )
    valid = _unwrapped(tables, ax, est, notes)
    c_rows, c0, c1 = nesting.sorted_set(ax, _count_once(ax, est.rows[valid], est.exact[valid]))
    if require_gpu_work:
        launched = nesting.contains_point(c0, c1, _launch_points(tables, ax), ax.tol)
        dropped = int((~launched).sum())
        if dropped:
            notes.append(
                f"{dropped} matmul/conv/attention ops launched no GPU work (ran on the CPU, or were "
                "abandoned, as in checkpoint early stop); not counted"
            )
        c_rows, c0, c1 = c_rows[launched], c0[launched], c1[launched]

    pos = np.searchsorted(est.rows, c_rows)
    ckpt = recompute.checkpoint_recompute(tables, ax, c0, c1, est.direction[pos] == "fwd", est.family[pos])
    if ckpt.any():
        notes.append(
            f"{int(ckpt.sum())} forward ops re-run inside backward (activation checkpointing): "
            "counted in HFU, left out of model FLOPs"
        )
    fl_c = est.flops[pos]
    kernel_counted, kernel_op_name, op_device = attribute_kernels(tables, ax, c0, c1)
    notes.extend(_approximation_notes(tables, c_rows, fl_c, est.exact[pos]))
    return OpFlops(
        row=c_rows.astype(np.int64),
        ts=c.ts[c_rows],
        flops=fl_c,
        recompute_flops=np.where(ckpt, fl_c, est.recompute[pos]),
        checkpoint_recompute=ckpt,
        name=c.name[c_rows],
        dtype=est.dtype[pos],
        family=est.family[pos],
        exact=est.exact[pos],
        device=op_device,
        names=tables.names,
        kernel_counted=kernel_counted,
        kernel_op_name=kernel_op_name,
        gpu_work_required=bool(require_gpu_work),
        notes=notes,
    )


def _estimate_all(tables: TraceTables, ax: ThreadAxis) -> _Estimates:
    """Every formula op's FLOPs: from its recorded shapes (with the legacy conv hints), else from
    the trace's ``flops`` arg (inexact, dtype unknown), else NaN."""
    c, names = tables.cpu, tables.names
    frows = np.nonzero(op_rows_named(tables, F.is_flop_op))[0]
    conv_out = conv_out_hints(tables, frows)
    grad_input = legacy_grad_input_hints(tables, ax, frows)
    n = len(frows)
    fl, rec, exact = np.full(n, np.nan), np.zeros(n), np.ones(n, bool)
    dtype, family, direction = np.empty(n, object), np.empty(n, object), np.empty(n, object)
    missing_shapes = 0
    records = c.input_records
    for i, (r, rec_id) in enumerate(zip(frows.tolist(), c.input_id[frows].tolist(), strict=True)):
        name = names[c.name[r]]
        inp = records[rec_id] if rec_id >= 0 else None
        est = F.estimate(name, inp, _hints(name, inp, conv_out, grad_input.get(r))) if inp is not None else None
        if est is None:
            arg = c.flops[r]
            if not np.isnan(arg):
                fl[i], dtype[i], exact[i] = arg, "unknown", False
                formula = F.formula_of(name)
                assert formula is not None  # frows are formula ops
                family[i], direction[i] = formula.family, formula.direction
            else:
                missing_shapes += inp is None
            continue
        fl[i], rec[i], exact[i] = est.flops, est.recompute_flops, est.exact
        dtype[i], family[i], direction[i] = est.dtype or "unknown", est.family, est.direction
    return _Estimates(frows, fl, rec, exact, dtype, family, direction, missing_shapes)


def _hints(name: str, inp: OpInputs, conv_out: dict[ConvKey, tuple[int, ...]], grad_input: bool | None) -> Hints | None:
    """The legacy-trace hints a formula op needs (``conv_hints``), None when it needs none."""
    if name in F.CONV_FORWARD and not inp.concrete and conv_out:
        return Hints(conv_out=conv_out)
    if name == F.LEGACY_CONV_BACKWARD:
        return Hints(grad_input=grad_input)
    return None


def _unwrapped(tables: TraceTables, ax: ThreadAxis, est: _Estimates, notes: list[str]) -> np.ndarray:
    """Which estimated ops may count: not NaN, and not a tensor-subclass wrapper (DTensor
    dispatches an op on global shapes, then runs the same op on the local shard inside it: the
    inner one is the work this GPU did)."""
    valid: np.ndarray = ~np.isnan(est.flops)
    wrappers = nesting.same_name_wrappers(tables, ax, est.rows[valid])
    if wrappers.any():
        valid[np.nonzero(valid)[0][wrappers]] = False
        notes.append(
            f"{int(wrappers.sum())} ops wrap the same op on local shards (tensor subclass such as "
            "DTensor): the inner, per-GPU op is counted"
        )
    return valid


def _count_once(ax: ThreadAxis, rows: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """The count-once rule over the estimated ``rows``: the outermost exact formulas, and the
    outermost inexact ones that neither lie inside nor contain an exact one. Sorted rows."""
    tol = ax.tol
    e_rows, e0, e1 = nesting.sorted_set(ax, rows[exact])
    e_outer = e_rows[~nesting.nested_in_self(e1, tol)]
    i_rows = rows[~exact]
    if len(i_rows):
        i0, i1 = ax.g0[i_rows], ax.g1[i_rows]
        inside_exact = nesting.inside_any(i0, i1, e0, e1, tol)
        has_exact_inside = nesting.contains_point(i0, i1, e0, tol) if len(e0) else np.zeros(len(i_rows), bool)
        i_outer = nesting.outermost(ax, i_rows[~inside_exact & ~has_exact_inside])
    else:
        i_outer = i_rows
    return np.sort(np.concatenate([e_outer, i_outer]))


def _launch_points(tables: TraceTables, ax: ThreadAxis) -> np.ndarray:
    """Sorted axis starts of the host events that reached the GPU: runtime/driver calls whose
    correlation id a GPU event carries, and ops whose external id a GPU event carries."""
    c, g = tables.cpu, tables.gpu
    is_call = (c.kind == RUNTIME) | (c.kind == DRIVER)
    launch_rt = is_call & in_distinct(c.correlation, distinct(g.correlation[g.correlation >= 0]))
    launch_op = (c.kind == OP) & in_distinct(c.external_id, distinct(g.external_id[g.external_id >= 0]))
    return np.sort(np.concatenate([ax.g0[launch_rt], ax.g0[launch_op]]))


def _approximation_notes(tables: TraceTables, rows: np.ndarray, flops: np.ndarray, exact: np.ndarray) -> list[str]:
    """What makes the counted FLOPs approximate: assumptions, and ops FlopCounterMode skips."""
    notes: list[str] = []
    if not exact.all():
        notes.append(
            f"{int((~exact).sum())} ops needed an assumption (legacy trace without stride/padding, "
            "variable-length attention, or a trace 'flops' arg): their FLOPs are approximate"
        )
    names = tables.names
    beyond = np.fromiter(
        (getattr(F.formula_of(names[int(k)]), "beyond_flop_counter", False) for k in tables.cpu.name[rows]),
        bool,
        len(rows),
    )
    if beyond.any() and flops[beyond].sum() > 0:
        share = flops[beyond].sum() / max(flops.sum(), 1.0)
        notes.append(f"{pct(share)} of FLOPs come from ops FlopCounterMode does not count (grouped/legacy ops)")
    return notes
