"""Which operators' FLOPs count, MFU, and the GPU time MFU leaves out.

The count-once rule
-------------------
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

Recompute
---------
``flops`` per op follows FlopCounterMode, which counts what ran, recompute
included. ``recompute_flops`` is the part of it that repeats forward work:

- fused attention backward recomputes Q·Kᵀ: one fifth of its FLOPs;
- activation checkpointing re-runs forward ops during backward. A forward op is
  taken as recompute when it runs inside a *built-in* autograd node (numbered names
  such as ``AddmmBackward0``, where non-reentrant checkpointing unpacks and
  recomputes) or the reentrant ``CheckpointFunctionBackward`` node, *and* either is
  a forward conv/attention op or sits under a forward-only composite op
  (``aten::linear``, ``aten::matmul``, ``aten::einsum``, ``aten::conv2d``,
  ``aten::scaled_dot_product_attention``...). Built-in backward formulas call
  ``mm``/``bmm``/``convolution_backward`` directly, never those composites, so
  genuine backward math is not flagged. Custom ``autograd.Function``, TorchScript
  and compiled backward nodes may use ``matmul`` legitimately and are not treated
  as recompute; recompute inside a ``torch.compile``d backward (min-cut
  partitioner) is invisible in the trace and is not detected.

HFU uses ``flops`` (hardware work); MFU in the PaLM sense uses ``flops - recompute_flops``.

All of it is vectorised numpy: intervals of different threads are laid on one
time axis, each thread shifted by more than the trace's span, so nesting queries
are sorted searches and prefix maxima, with no per-event Python loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..options import AnalysisOptions
from ..sidecar import Sidecar
from ..trace.tables import DRIVER, KERNEL, OP, RUNTIME, TraceTables
from . import dtype_choice, kernel_families, plausibility
from . import flops as F
from .aggregate import spread
from .devices import device_properties
from .peaks import resolve_peak
from .per_trace import once_per_trace

# Ops that run forward math and that autograd backward formulas never call.
FORWARD_COMPOSITES = frozenset(
    {
        "aten::linear",
        "aten::matmul",
        "aten::einsum",
        "aten::bilinear",
        "aten::tensordot",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::conv_transpose1d",
        "aten::conv_transpose2d",
        "aten::conv_transpose3d",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_attention_math",
    }
)
# Built-in autograd nodes are generated with a numbered name (AddmmBackward0); their
# formulas never call the forward composites. Custom Functions (MyOpBackward),
# TorchScript (DifferentiableGraphBackward) and compiled graphs (CompiledFunctionBackward)
# may, legitimately, so only the reentrant checkpoint's node joins them.
_BACKWARD_NODE = re.compile(r"Backward\d+$|Checkpoint\w*Backward")


def is_backward_node(name: str) -> bool:
    """Autograd nodes inside which a forward composite op can only be recompute."""
    return bool(_BACKWARD_NODE.search(name))


# ---------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class OpFlops:
    """The counted ops of one trace, in time order (rows of ``tables.cpu``)."""

    row: np.ndarray  # int64 cpu row
    ts: np.ndarray  # float64 µs, op start (attribute to steps by this)
    flops: np.ndarray  # float64, FlopCounterMode convention (recompute included)
    recompute_flops: np.ndarray  # float64, part of ``flops`` that repeats forward work
    checkpoint_recompute: np.ndarray  # bool, the whole op re-runs forward (activation checkpointing)
    name: np.ndarray  # int32 code into ``names``
    dtype: np.ndarray  # object: "bf16", "fp16", "fp32", "fp8", ... or "unknown"
    family: np.ndarray  # object: "matmul" | "conv" | "attention"
    exact: np.ndarray  # bool: False where a documented assumption was needed
    device: np.ndarray  # int32, the device its GPU work ran on (-1 unknown / CPU-only)
    names: list[str]
    # per row of ``tables.gpu``: launched inside a counted op / name of the launching op
    kernel_counted: np.ndarray  # bool
    kernel_op_name: np.ndarray  # int32 code into ``names``, -1 when unknown
    gpu_work_required: bool
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.row)

    def for_device(self, device: int) -> OpFlops:
        """The ops whose GPU work ran on ``device`` (ops of unknown device go to every device
        when the trace has one device, else to none)."""
        known = self.device[self.device >= 0]
        single = len(np.unique(known)) <= 1
        keep = (self.device == device) | ((self.device < 0) & single)
        idx = np.flatnonzero(keep)
        return OpFlops(
            row=self.row[idx],
            ts=self.ts[idx],
            flops=self.flops[idx],
            recompute_flops=self.recompute_flops[idx],
            checkpoint_recompute=self.checkpoint_recompute[idx],
            name=self.name[idx],
            dtype=self.dtype[idx],
            family=self.family[idx],
            exact=self.exact[idx],
            device=self.device[idx],
            names=self.names,
            kernel_counted=self.kernel_counted,
            kernel_op_name=self.kernel_op_name,
            gpu_work_required=self.gpu_work_required,
            notes=self.notes,
        )

    @property
    def total(self) -> float:
        return float(self.flops.sum())

    @property
    def model_flops(self) -> np.ndarray:
        """FLOPs per op without recompute (PaLM's MFU convention)."""
        return self.flops - self.recompute_flops

    @property
    def mfu_flops(self) -> np.ndarray:
        """FLOPs per op without activation-checkpoint re-runs; the fused attention backward's
        Q·Kᵀ recompute stays, as FlopCounterMode counts it."""
        return self.flops - np.where(self.checkpoint_recompute, self.recompute_flops, 0.0)

    def dominant_dtype(self) -> str | None:
        """FLOP-weighted compute dtype of the counted ops (None when nothing counted)."""
        if not len(self):
            return None
        acc: dict[str, float] = {}
        for d, f in zip(self.dtype.tolist(), self.flops.tolist(), strict=True):
            acc[d] = acc.get(d, 0.0) + f
        known = {k: v for k, v in acc.items() if k != "unknown"}
        pick = known or acc
        return max(pick, key=lambda k: pick[k])

    def dtype_shares(self) -> dict[str, float]:
        tot = self.total
        if tot <= 0:
            return {}
        acc: dict[str, float] = {}
        for d, f in zip(self.dtype.tolist(), self.flops.tolist(), strict=True):
            acc[d] = acc.get(d, 0.0) + f
        return {k: v / tot for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}

    def by_op(self) -> dict[str, float]:
        """Total FLOPs per op name, largest first."""
        if not len(self):
            return {}
        codes, inv = np.unique(self.name, return_inverse=True)
        sums = np.bincount(inv, weights=self.flops)
        order = np.argsort(-sums)
        return {self.names[int(codes[i])]: float(sums[i]) for i in order}


@dataclass(frozen=True)
class WindowFlops:
    flops: np.ndarray  # per window, every executed FLOP, FlopCounterMode convention (HFU numerator)
    model_flops: np.ndarray  # per window, all recompute removed (PaLM convention)
    # per window, FlopCounterMode convention without activation-checkpoint re-runs: what
    # FlopCounterMode counts for the same model trained without checkpointing (headline MFU)
    mfu_flops: np.ndarray


@dataclass(frozen=True)
class UnattributedEntry:
    op: str
    kernel_us: float
    kernels: int


@dataclass(frozen=True)
class UnattributedTime:
    kernel_us: float  # all kernel time considered
    attributed_us: float  # kernels launched inside counted ops
    unattributed_us: float
    top: list[UnattributedEntry]

    @property
    def unattributed_share(self) -> float | None:
        return self.unattributed_us / self.kernel_us if self.kernel_us > 0 else None


# ---------------------------------------------------------------------------
# interval machinery


@dataclass(frozen=True)
class _Axis:
    """All cpu rows on one time axis: g = ts - t0 + thread_index * span."""

    g0: np.ndarray  # start
    g1: np.ndarray  # end
    tol: float


def _axis(tables: TraceTables) -> _Axis:
    c = tables.cpu
    n = len(c)
    if n == 0:
        z = np.empty(0)
        return _Axis(z, z, 0.0)
    _, pi = np.unique(c.pid, return_inverse=True)
    tids, ti = np.unique(c.tid, return_inverse=True)
    _, tidx = np.unique(pi.reshape(-1).astype(np.int64) * len(tids) + ti.reshape(-1), return_inverse=True)
    tidx = tidx.reshape(-1)
    end = c.ts + c.dur
    t0 = float(c.ts.min())
    span = float(end.max() - t0) + 1000.0
    off = tidx.astype(np.float64) * span - t0
    # Legacy traces write whole microseconds: a child may end 1 µs after its parent.
    integral = bool(np.all(c.ts == np.floor(c.ts)) and np.all(c.dur == np.floor(c.dur)))
    tol = 1.0 if integral else 1e-3
    return _Axis(c.ts + off, end + off, tol)


def _in_sorted(values: np.ndarray, sorted_unique: np.ndarray) -> np.ndarray:
    """``np.isin`` for a sorted unique right-hand side, without its hashing cost."""
    if not len(sorted_unique) or not len(values):
        return np.zeros(len(values), bool)
    k = np.clip(np.searchsorted(sorted_unique, values), 0, len(sorted_unique) - 1)
    return sorted_unique[k] == values


def _sorted_set(ax: _Axis, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows sorted by (start asc, end desc, row asc): parents before their children."""
    if not len(rows):
        e = np.empty(0)
        return rows, e, e
    order = np.lexsort((rows, -ax.g1[rows], ax.g0[rows]))
    r = rows[order]
    return r, ax.g0[r], ax.g1[r]


def _nested_in_self(s1: np.ndarray, tol: float) -> np.ndarray:
    """For a sorted set, whether each interval lies inside an earlier one of the set."""
    if not len(s1):
        return np.zeros(0, bool)
    pm = np.maximum.accumulate(s1)
    prev = np.concatenate([[-np.inf], pm[:-1]])
    return prev >= s1 - tol


def _inside_any(q0: np.ndarray, q1: np.ndarray, s0: np.ndarray, s1: np.ndarray, tol: float) -> np.ndarray:
    """Whether each query interval [q0, q1] lies inside some interval of the sorted set.

    A query that is itself a member of the set is inside itself: use it only for
    queries outside the set, or ``_nested_in_self`` for members.
    """
    out = np.zeros(len(q0), bool)
    if not len(s0) or not len(q0):
        return out
    pm = np.maximum.accumulate(s1)
    k = np.searchsorted(s0, q0 + tol, side="right") - 1
    ok = k >= 0
    out[ok] = pm[k[ok]] >= q1[ok] - tol
    return out


def _containing_disjoint(p: np.ndarray, s0: np.ndarray, s1: np.ndarray, tol: float) -> np.ndarray:
    """Index into a sorted set of *disjoint* intervals of the one containing each point, or -1."""
    out = np.full(len(p), -1, np.int64)
    if not len(s0) or not len(p):
        return out
    k = np.searchsorted(s0, p + tol, side="right") - 1
    ok = k >= 0
    kk = k[ok]
    hit = s1[kk] >= p[ok] - tol
    idx = np.nonzero(ok)[0][hit]
    out[idx] = kk[hit]
    return out


def _contains_point(s0: np.ndarray, s1: np.ndarray, points: np.ndarray, tol: float) -> np.ndarray:
    """Whether each interval contains at least one of the (sorted) points."""
    if not len(points):
        return np.zeros(len(s0), bool)
    lo = np.searchsorted(points, s0 - tol, side="left")
    hi = np.searchsorted(points, s1 + tol, side="right")
    return hi > lo


# ---------------------------------------------------------------------------
# counting


def _name_mask(tables: TraceTables, pred: Any) -> np.ndarray:
    lut = tables.name_codes(pred)
    if not len(tables.cpu):
        return np.zeros(0, bool)
    return lut[tables.cpu.name] if len(lut) else np.zeros(len(tables.cpu), bool)


def count_flops(tables: TraceTables, require_gpu_work: bool | None = None) -> OpFlops:
    """Select the ops whose FLOPs count, once each, and compute their FLOPs.

    ``require_gpu_work``: count only ops that launched GPU work. ``None`` (default)
    means "when the trace has any GPU events".
    """
    c, g = tables.cpu, tables.gpu
    names = tables.names
    notes: list[str] = []
    if require_gpu_work is None:
        require_gpu_work = len(g) > 0
    ax = _axis(tables)
    tol = ax.tol
    is_op = c.kind == OP

    formula_mask = _name_mask(tables, F.is_flop_op) & is_op
    frows = np.nonzero(formula_mask)[0]

    # ---- legacy hints (traces without Concrete Inputs)
    conv_out = _conv_out_hints(tables, frows)
    grad_input = _legacy_grad_input_hints(tables, ax, frows)

    # ---- evaluate every formula row
    n = len(frows)
    fl = np.full(n, np.nan)
    rec = np.zeros(n)
    exact = np.ones(n, bool)
    dtype = np.empty(n, object)
    family = np.empty(n, object)
    direction = np.empty(n, object)
    missing_shapes = 0
    inputs = c.inputs
    for i, r in enumerate(frows.tolist()):
        name = names[c.name[r]]
        inp = inputs.get(r)
        est = None
        if inp is not None:
            hints = None
            if name in F.CONV_FORWARD and not inp.concrete and conv_out:
                hints = F.Hints(conv_out=conv_out)
            elif name == F.LEGACY_CONV_BACKWARD:
                hints = F.Hints(grad_input=grad_input.get(r))
            est = F.estimate(name, inp, hints)
        if est is None:
            arg = c.flops[r]
            if not np.isnan(arg):
                fl[i] = arg
                dtype[i] = "unknown"
                fam = F.FORMULAS[name]
                family[i], direction[i] = fam.family, fam.direction
                exact[i] = False
            else:
                missing_shapes += inp is None
            continue
        fl[i] = est.flops
        rec[i] = est.recompute_flops
        exact[i] = est.exact
        dtype[i] = est.dtype or "unknown"
        family[i] = est.family
        direction[i] = est.direction
    if missing_shapes:
        notes.append(
            f"{missing_shapes} matmul/conv/attention ops carry no recorded shapes "
            "(profile with record_shapes=True); their FLOPs are not counted"
        )

    valid = ~np.isnan(fl)
    # Tensor subclasses (DTensor) dispatch an op on global shapes, then run the same op
    # on the local shard inside it: the inner one is the work this GPU did.
    wrappers = _same_name_wrappers(tables, ax, frows[valid])
    if wrappers.any():
        valid[np.nonzero(valid)[0][wrappers]] = False
        notes.append(
            f"{int(wrappers.sum())} ops wrap the same op on local shards (tensor subclass such as "
            "DTensor): the inner, per-GPU op is counted"
        )
    vrows = frows[valid]
    vexact = exact[valid]

    # ---- count-once: outermost exact formulas; inexact ones only where no exact one is near
    e_rows, e0, e1 = _sorted_set(ax, vrows[vexact])
    e_outer = e_rows[~_nested_in_self(e1, tol)]
    i_rows = vrows[~vexact]
    if len(i_rows):
        i0, i1 = ax.g0[i_rows], ax.g1[i_rows]
        inside_exact = _inside_any(i0, i1, e0, e1, tol)
        has_exact_inside = _contains_point(i0, i1, e0, tol) if len(e0) else np.zeros(len(i_rows), bool)
        keep = i_rows[~inside_exact & ~has_exact_inside]
        k_rows, _, k1 = _sorted_set(ax, keep)
        i_outer = k_rows[~_nested_in_self(k1, tol)]
    else:
        i_outer = i_rows
    counted = np.sort(np.concatenate([e_outer, i_outer]))

    # ---- launch points: runtime/driver calls that reached the GPU, ops named by GPU events
    is_call = (c.kind == RUNTIME) | (c.kind == DRIVER)
    launch_rt = is_call & _in_sorted(c.correlation, np.unique(g.correlation[g.correlation >= 0]))
    launch_op = is_op & _in_sorted(c.external_id, np.unique(g.external_id[g.external_id >= 0]))
    points = np.sort(np.concatenate([ax.g0[launch_rt], ax.g0[launch_op]]))

    c_rows, c0, c1 = _sorted_set(ax, counted)
    if require_gpu_work:
        launched = _contains_point(c0, c1, points, tol)
        dropped = int((~launched).sum())
        if dropped:
            notes.append(
                f"{dropped} matmul/conv/attention ops launched no GPU work (ran on the CPU, or were "
                "abandoned, as in checkpoint early stop); not counted"
            )
        c_rows, c0, c1 = c_rows[launched], c0[launched], c1[launched]

    # ---- activation-checkpoint recompute
    pos = np.searchsorted(frows, c_rows)
    is_fwd = direction[pos] == "fwd"
    ckpt = np.zeros(len(c_rows), bool)
    if is_fwd.any():
        bmask = _name_mask(tables, is_backward_node) & is_op
        if bmask.any():
            _, b0, b1 = _sorted_set(ax, np.nonzero(bmask)[0])
            amask = _name_mask(tables, lambda s: s in FORWARD_COMPOSITES) & is_op
            a_rows = np.nonzero(amask)[0]
            a_in_b = a_rows[_inside_any(ax.g0[a_rows], ax.g1[a_rows], b0, b1, tol)]
            _, a0, a1 = _sorted_set(ax, a_in_b)
            in_b = _inside_any(c0, c1, b0, b1, tol)
            in_a = _inside_any(c0, c1, a0, a1, tol)
            fam_c = family[pos]
            ckpt = is_fwd & in_b & (in_a | (fam_c == "conv") | (fam_c == "attention"))
            if ckpt.any():
                notes.append(
                    f"{int(ckpt.sum())} forward ops re-run inside backward (activation checkpointing): "
                    "counted in HFU, left out of model FLOPs"
                )

    fl_c = fl[pos]
    rec_c = np.where(ckpt, fl_c, rec[pos])

    # ---- which kernels ran inside counted ops, and which op launched each kernel
    kernel_counted, kernel_op_name, op_device = _kernel_attribution(tables, ax, c_rows, c0, c1, launch_rt, is_op)

    if not exact[pos].all():
        notes.append(
            f"{int((~exact[pos]).sum())} ops needed an assumption (legacy trace without stride/padding, "
            "variable-length attention, or a trace 'flops' arg): their FLOPs are approximate"
        )
    beyond = np.fromiter(
        (F.FORMULAS[names[int(k)]].beyond_flop_counter for k in c.name[c_rows]), bool, len(c_rows)
    )
    if beyond.any() and fl_c[beyond].sum() > 0:
        share = fl_c[beyond].sum() / max(fl_c.sum(), 1.0)
        notes.append(f"{share:.1%} of FLOPs come from ops FlopCounterMode does not count (grouped/legacy ops)")

    return OpFlops(
        row=c_rows.astype(np.int64),
        ts=c.ts[c_rows],
        flops=fl_c,
        recompute_flops=rec_c,
        checkpoint_recompute=ckpt,
        name=c.name[c_rows],
        dtype=dtype[pos],
        family=family[pos],
        exact=exact[pos],
        device=op_device,
        names=names,
        kernel_counted=kernel_counted,
        kernel_op_name=kernel_op_name,
        gpu_work_required=bool(require_gpu_work),
        notes=notes,
    )


def _same_name_wrappers(tables: TraceTables, ax: _Axis, rows: np.ndarray) -> np.ndarray:
    """Whether each row contains another row of the same op name (a subclass wrapper)."""
    out = np.zeros(len(rows), bool)
    if not len(rows):
        return out
    codes = tables.cpu.name[rows]
    for code in np.unique(codes).tolist():
        idx = np.nonzero(codes == code)[0]
        if len(idx) < 2:
            continue
        r = rows[idx]
        order = np.lexsort((r, -ax.g1[r], ax.g0[r]))  # parents before children
        s0, s1 = ax.g0[r][order], ax.g1[r][order]
        # rows after me in that order that start before I end lie inside me
        after = np.searchsorted(s0, s1, side="left") - (np.arange(len(order)) + 1)
        out[idx[order]] = after > 0
    return out


_ConvKey = tuple[tuple[int, ...], tuple[int, ...]]


def _conv_out_hints(tables: TraceTables, frows: np.ndarray) -> dict[_ConvKey, tuple[int, ...]]:
    """(input dims, weight dims) -> output spatial, from conv backward ops, when the trace
    records no Concrete Inputs for forward convs (legacy traces)."""
    c, names = tables.cpu, tables.names
    need = False
    for r in frows.tolist():
        if names[c.name[r]] in F.CONV_FORWARD:
            inp = c.inputs.get(r)
            if inp is not None and not inp.concrete:
                need = True
            break
    if not need:
        return {}
    seen: dict[_ConvKey, tuple[int, ...] | None] = {}
    for r in frows.tolist():
        idx = F.CONV_BACKWARD_DIMS.get(names[c.name[r]])
        inp = c.inputs.get(r)
        if idx is None or inp is None:
            continue
        p = F.parse_inputs(inp)
        go, x, w = p.shape(idx[0]), p.shape(idx[1]), p.shape(idx[2])
        if go is None or x is None or w is None:
            continue
        key = (tuple(x), tuple(w))
        val = tuple(go[2:])
        if key in seen and seen[key] != val:
            seen[key] = None  # ambiguous: two convs with the same shapes, different strides
        else:
            seen.setdefault(key, val)
    return {k: v for k, v in seen.items() if v is not None}


def _legacy_grad_input_hints(tables: TraceTables, ax: _Axis, frows: np.ndarray) -> dict[int, bool]:
    """For legacy ``cudnn_convolution_backward`` rows: was grad_input computed?"""
    c = tables.cpu
    codes = [i for i, n in enumerate(tables.names) if n == F.LEGACY_CONV_BACKWARD]
    if not codes:
        return {}
    parents = frows[np.isin(c.name[frows], codes)]
    child_codes = [i for i, n in enumerate(tables.names) if n == F.LEGACY_CONV_BACKWARD_INPUT]
    children = np.nonzero(np.isin(c.name, child_codes) & (c.kind == OP))[0]
    pts = np.sort(ax.g0[children])
    has = _contains_point(ax.g0[parents], ax.g1[parents], pts, ax.tol)
    return dict(zip(parents.tolist(), has.tolist(), strict=True))


def _kernel_attribution(
    tables: TraceTables,
    ax: _Axis,
    c_rows: np.ndarray,
    c0: np.ndarray,
    c1: np.ndarray,
    launch_rt: np.ndarray,
    is_op: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c, g = tables.cpu, tables.gpu
    ng = len(g)
    counted = np.zeros(ng, bool)
    op_name = np.full(ng, -1, np.int32)
    op_device = np.full(len(c_rows), -1, np.int64)  # device ids are int64 (trace/tables.py)
    if not ng:
        return counted, op_name, op_device
    # launch point of each GPU event: its runtime call (by correlation), else its op (by external id)
    point = np.full(ng, np.nan)
    rt_rows = np.nonzero(launch_rt)[0]
    if len(rt_rows):
        corr = c.correlation[rt_rows]
        order = np.argsort(corr, kind="stable")
        sc, sr = corr[order], rt_rows[order]
        k = np.searchsorted(sc, g.correlation)
        k = np.clip(k, 0, len(sc) - 1)
        hit = (sc[k] == g.correlation) & (g.correlation >= 0)
        point[hit] = ax.g0[sr[k[hit]]]
    # the op named by the GPU event's external id (the innermost op that launched it)
    op_rows = np.nonzero(is_op & (c.external_id >= 0))[0]
    ext_op = np.full(ng, -1, np.int64)
    if len(op_rows):
        ext = c.external_id[op_rows]
        order = np.argsort(ext, kind="stable")
        se, sr = ext[order], op_rows[order]
        k = np.clip(np.searchsorted(se, g.external_id), 0, len(se) - 1)
        hit = (se[k] == g.external_id) & (g.external_id >= 0)
        ext_op[hit] = sr[k[hit]]
    no_point = np.isnan(point) & (ext_op >= 0)
    point[no_point] = ax.g0[ext_op[no_point]]
    has = ~np.isnan(point)
    if len(c0):
        idx = _containing_disjoint(point[has], c0, c1, ax.tol)
        counted[np.nonzero(has)[0]] = idx >= 0
        hit = idx >= 0
        op_device[idx[hit]] = g.device[np.nonzero(has)[0][hit]]
    # name: the external-id op, else the outermost op around the launch point
    op_name[ext_op >= 0] = c.name[ext_op[ext_op >= 0]]
    rest = np.nonzero(has & (ext_op < 0))[0]
    if len(rest):
        o_rows, o0, o1 = _sorted_set(ax, np.nonzero(is_op)[0])
        top = ~_nested_in_self(o1, ax.tol)
        t_rows, t0, t1 = o_rows[top], o0[top], o1[top]
        idx = _containing_disjoint(point[rest], t0, t1, ax.tol)
        ok = idx >= 0
        op_name[rest[ok]] = c.name[t_rows[idx[ok]]]
    return counted, op_name, op_device


# ---------------------------------------------------------------------------
# per step, MFU, what is left out


def _window_mask(ts: np.ndarray, start_us: np.ndarray, end_us: np.ndarray) -> np.ndarray:
    """Index of the window containing each ts (windows sorted and disjoint), -1 if none."""
    start_us = np.asarray(start_us, np.float64)
    end_us = np.asarray(end_us, np.float64)
    out = np.full(len(ts), -1, np.int64)
    if not len(start_us):
        return out
    order = np.argsort(start_us)
    s, e = start_us[order], end_us[order]
    k = np.searchsorted(s, ts, side="right") - 1
    ok = k >= 0
    inside = np.zeros(len(ts), bool)
    inside[ok] = ts[ok] < e[k[ok]]
    out[inside] = order[k[inside]]
    return out


def flops_in_windows(of: OpFlops, start_us: np.ndarray, end_us: np.ndarray) -> WindowFlops:
    """FLOPs of counted ops whose start falls in each [start, end) window (e.g. steps)."""
    nwin = len(np.asarray(start_us))
    w = _window_mask(of.ts, start_us, end_us)
    ok = w >= 0
    def per_window(values: np.ndarray) -> np.ndarray:
        return np.bincount(w[ok], weights=values[ok], minlength=nwin)[:nwin].astype(np.float64)

    return WindowFlops(per_window(of.flops), per_window(of.model_flops), per_window(of.mfu_flops))


def unattributed_kernel_time(
    tables: TraceTables,
    of: OpFlops,
    start_us: np.ndarray | None = None,
    end_us: np.ndarray | None = None,
    top: int = 10,
    device: int | None = None,
) -> UnattributedTime:
    """Kernel time launched outside every counted op, grouped by the launching op.

    Kernels are selected by their GPU start inside the windows when given (and by
    ``device``). The group is the op named by the kernel's external id (the
    innermost op that launched it), else the outermost op around its launch call,
    else ``(no op)``.
    """
    g = tables.gpu
    sel = g.kind == KERNEL
    if device is not None:
        sel &= g.device == device
    if start_us is not None and end_us is not None:
        sel &= _window_mask(g.ts, start_us, end_us) >= 0
    dur = g.dur
    total = float(dur[sel].sum())
    att = float(dur[sel & of.kernel_counted].sum())
    un = sel & ~of.kernel_counted
    entries: list[UnattributedEntry] = []
    if un.any():
        codes = of.kernel_op_name[un]
        d = dur[un]
        uniq, inv = np.unique(codes, return_inverse=True)
        sums = np.bincount(inv, weights=d)
        counts = np.bincount(inv)
        order = np.argsort(-sums)[: max(top, 0)]
        for i in order:
            code = int(uniq[i])
            nm = tables.names[code] if code >= 0 else "(no op)"
            if nm in F.FORMULAS:
                nm += " (shapes not recorded)"
            entries.append(UnattributedEntry(nm, float(sums[i]), int(counts[i])))
    return UnattributedTime(total, att, total - att, entries)


def mfu_for(flops_per_step: float | None, step_time_us: float | None, peak_flops: float | None) -> float | None:
    """MFU = FLOPs per step / step time / peak FLOP/s (a fraction, 0-1). None if any is unknown."""
    if not flops_per_step or not step_time_us or not peak_flops:
        return None
    if step_time_us <= 0 or peak_flops <= 0:
        return None
    return float(flops_per_step) / (float(step_time_us) * 1e-6) / float(peak_flops)


def overall_mfu(flops: np.ndarray | None, dur_us: np.ndarray, peak_flops: float | None) -> float | None:
    """MFU over several steps: sum of FLOPs / sum of step time / peak."""
    if flops is None or not len(dur_us):
        return None
    return mfu_for(float(np.sum(flops)), float(np.sum(dur_us)), peak_flops)


def achieved_tflops_while_busy(flops: float | None, busy_us: float | None) -> float | None:
    """FLOPs / GPU busy time, in TFLOP/s: the rate while the GPU works (idle time excluded)."""
    if not flops or not busy_us or busy_us <= 0:
        return None
    return float(flops) / (float(busy_us) * 1e-6) / 1e12


def palm_flops_per_token(
    n_params: float, n_layers: int | None = None, d_attn: int | None = None, seq_len: int | None = None
) -> float:
    """PaLM appendix B: 6·N + 12·L·H·Q·T FLOPs per token (H·Q = ``d_attn``, T = seq_len).

    The attention term counts backward as 2× forward with no recompute and no causal
    discount. Shape-derived FLOPs of a model using fused SDPA exceed it by
    2·L·H·Q·T per token: FlopCounterMode counts the Q·Kᵀ recompute of the backward.
    """
    f = 6.0 * n_params
    if n_layers and d_attn and seq_len:
        f += 12.0 * n_layers * d_attn * seq_len
    return f


def flops_summary(
    of: OpFlops,
    start_us: np.ndarray,
    end_us: np.ndarray,
    unattributed: UnattributedTime | None = None,
    top_ops: int = 10,
) -> dict[str, Any]:
    """A JSON-friendly detail block for ``WorkerReport.flops`` (per-step figures are means over
    the windows, as the summary's: total / windows)."""
    wf = flops_in_windows(of, start_us, end_us)
    mean = float(np.mean(wf.flops)) if len(wf.flops) else None
    mean_model = float(np.mean(wf.model_flops)) if len(wf.model_flops) else None
    in_win = _window_mask(of.ts, start_us, end_us) >= 0
    nwin = max(len(wf.flops), 1)
    attn_rec = float(of.recompute_flops[in_win & ~of.checkpoint_recompute].sum()) / nwin
    ckpt_rec = float(of.recompute_flops[in_win & of.checkpoint_recompute].sum()) / nwin
    by_op = list(of.by_op().items())[:top_ops]
    out: dict[str, Any] = {
        "source": "shapes",
        "convention": "FlopCounterMode",
        "flops_per_step": float(np.mean(wf.mfu_flops)) if len(wf.mfu_flops) else None,
        "executed_flops_per_step": mean,
        "model_flops_per_step": mean_model,
        "attention_recompute_flops_per_step": attn_rec,
        "checkpoint_recompute_flops_per_step": ckpt_rec,
        "ops_counted": int(in_win.sum()),
        "dtype": of.dominant_dtype(),
        "dtype_shares": of.dtype_shares(),
        "by_op": [{"op": k, "flops_share": v / of.total if of.total else 0.0} for k, v in by_op],
        "approximate_share": float(of.flops[~of.exact].sum() / of.total) if of.total else 0.0,
        "notes": list(of.notes),
    }
    if unattributed is not None:
        out["unattributed_kernel_us"] = unattributed.unattributed_us
        out["unattributed_kernel_share"] = unattributed.unattributed_share
        out["unattributed_top"] = [
            {"op": e.op, "kernel_us": e.kernel_us, "kernels": e.kernels} for e in unattributed.top
        ]
    return out


# ---------------------------------------------------------------------------
# the report hook (``pipeline._add_flops`` calls it for every device of a trace)

_op_flops_cached = once_per_trace(count_flops)


def _props(tables: TraceTables, device: int | None) -> dict[str, Any] | None:
    if device is None:
        props = tables.meta.device_properties
        return props[0] if len(props) == 1 else None
    return device_properties(tables, device).props


def apply_to_report(
    report: Any,
    tables: TraceTables,
    steps: Any,
    view: Any,
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
    plausibility.guard_shares(report)
    device = report.device.index if report.device is not None else None
    of = _op_flops_cached(tables)
    if device is not None:
        of = of.for_device(device)
    cpu_start = np.asarray(steps.cpu_start, np.float64)
    cpu_end = np.asarray(steps.cpu_end, np.float64)
    dur = np.asarray(steps.dur, np.float64)
    wf = flops_in_windows(of, cpu_start, cpu_end)

    # user figures: the flag beats the sidecar
    user: float | None = None
    user_source: str | None = None
    sc = None
    if sidecar is not None:
        sc, sc_path = sidecar
        user = sc.model_flops_per_step()
        user_source = f"{sc.method} ({sc_path})"
    if options.flops_per_step:
        user, user_source = float(options.flops_per_step), "--flops-per-step"
    opts = options
    if sc is not None and sc.tf32 and not options.tf32:
        opts = replace(options, tf32=True)

    gpu = view.gpu if view is not None else tables.gpu
    is_k = gpu.kind == KERNEL
    kernel_codes = np.unique(gpu.name[is_k])
    kernel_names = {tables.names[int(c)] for c in kernel_codes}
    classes = getattr(view, "classes", None) or kernel_families.classify_names(tables.names, kernel_codes)
    in_steps = is_k & (view.step >= 0) if view is not None else is_k
    kshares = dtype_choice.kernel_dtype_shares(gpu.name[in_steps], gpu.dur[in_steps], classes)
    dchoice = dtype_choice.choose_dtype(of.dominant_dtype(), kshares)
    choice = resolve_peak(_props(tables, device), kernel_names, dchoice.dtype, opts, dchoice.how, dchoice.source)
    if report.device is not None:
        report.device.peak_flops = choice.peak_flops
        report.device.peak_source = choice.source
        report.device.dtype = choice.dtype

    has_shapes = bool(len(of)) and float(wf.flops.sum()) > 0
    if options.flops_per_step:
        head: np.ndarray | None = np.full(len(dur), float(options.flops_per_step))
        head_source = "--flops-per-step"
    elif has_shapes:
        # MFU counts the model's FLOPs: activation-checkpoint re-runs go to HFU only
        head, head_source = wf.mfu_flops, "shapes (FlopCounterMode convention)"
    elif user:
        head, head_source = np.full(len(dur), float(user)), user_source or "sidecar"
    else:
        head, head_source = None, None

    def per_step_mfu(fl: np.ndarray | None) -> list[float | None]:
        if fl is None:
            return [None] * len(dur)
        return [mfu_for(float(f), float(d), choice.peak_flops) for f, d in zip(fl, dur, strict=True)]

    mfus = per_step_mfu(head)
    for i, st in enumerate(report.steps[: len(dur)]):
        st.flops_per_step = float(head[i]) if head is not None else None
        st.mfu = mfus[i]
    # The mean step's FLOPs and MFU over the analysed steps: all their FLOPs over all their
    # time (the time-weighted mean of the per-step MFUs), the aggregation of every summary
    # share (analysis.aggregate), so mfu = flops_per_step / step_time_mean_us / peak.
    report.summary.flops_per_step = float(np.mean(head)) if head is not None else None
    report.summary.mfu = overall_mfu(head, dur, choice.peak_flops)
    mfu_spread = spread(mfus)
    if mfu_spread is not None:
        report.summary.distribution["mfu"] = mfu_spread

    unattributed = unattributed_kernel_time(
        tables, of, np.asarray(steps.start), np.asarray(steps.end), device=device
    )
    detail = flops_summary(of, cpu_start, cpu_end, unattributed)
    busy = [s.gpu_busy_share * s.dur_us for s in report.steps[: len(dur)]]
    detail.update(
        {
            "headline_source": head_source,
            "hfu": overall_mfu(wf.flops, dur, choice.peak_flops) if has_shapes else None,
            "mfu_model": overall_mfu(wf.model_flops, dur, choice.peak_flops) if has_shapes else None,
            "user_flops_per_step": user,
            "user_flops_source": user_source,
            "mfu_user": overall_mfu(np.full(len(dur), user), dur, choice.peak_flops) if user else None,
            # all FLOPs over all busy time, aggregated as MFU (not a median of the steps' rates)
            "achieved_tflops_while_busy": achieved_tflops_while_busy(float(np.sum(wf.flops)), float(sum(busy)))
            if has_shapes
            else None,
            "peak": {
                "name": choice.name,
                "peak_flops": choice.peak_flops,
                "dtype": choice.dtype,
                "dtype_source": choice.dtype_source,
                "source": choice.source,
                "inferred": choice.inferred,
            },
            "kernel_dtype": dchoice.kernel_dtype,
            "kernel_dtype_shares": dchoice.kernel_shares,
        }
    )
    if choice.dtype_source == "assumed" and head is not None:
        report.notes.append(f"MFU peak: {choice.source}")
    if not has_shapes:
        detail["source"] = None
        detail["notes"].append(
            "no FLOPs from shapes: record with record_shapes=True, or give --flops-per-step / a tb_mfu.json sidecar"
        )
    plausibility.guard_mfu(report, detail, choice, head_source)
    _note_fp32_peak(report, detail, tables, device, kernel_names, choice, opts)
    report.flops = detail


def _note_fp32_peak(report: Any, detail: dict[str, Any], tables: TraceTables, device: int | None,
                    kernel_names: set[str], choice: Any, options: AnalysisOptions) -> None:
    """An fp32 run is measured against the CUDA-core fp32 peak, which flatters it: say what
    the same work scores against the bf16 tensor-core peak that the fix would use."""
    mfu = report.summary.mfu if report.summary is not None else None
    if choice.dtype != "fp32" or mfu is None or options.peak_tflops:
        return
    bf16 = resolve_peak(_props(tables, device), kernel_names, "bf16", options)
    if not bf16.peak_flops or not choice.peak_flops or bf16.peak_flops <= choice.peak_flops:
        return
    at_bf16 = mfu * choice.peak_flops / bf16.peak_flops
    detail["mfu_at_bf16_peak"] = at_bf16
    report.notes.append(
        f"MFU {mfu:.1%} is against the fp32 CUDA-core peak ({choice.peak_flops / 1e12:.1f} TFLOP/s) because the "
        f"matmuls ran in fp32; against the bf16 tensor-core peak ({bf16.peak_flops / 1e12:.0f} TFLOP/s) the same "
        f"work is {at_bf16:.1%} (see no_tensor_cores: bf16 autocast or TF32)."
    )
