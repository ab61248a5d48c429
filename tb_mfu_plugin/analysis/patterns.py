"""Evidence extraction: the patterns in the trace tables that the diagnosis rules point at.

Pure functions from ``TraceTables`` (and the per-device GPU rows) to small results:

- name classes of kernels (matmul/conv, fused attention, multi-tensor optimizer kernels);
- host windows on a thread (``Windows``) and "which GPU work was launched inside them",
  by the host time of the launching runtime/driver call on the same thread;
- hand-written attention chains: batched matmul -> softmax -> (dropout) -> batched matmul,
  in the host op sequence of one thread, forward and backward;
- the optimizer step, ``zero_grad`` and DataLoader windows (``record_function`` annotations
  in torch 2.x, ``cpu_op`` events in 2021 traces);
- runs of consecutive non-matmul kernels on one stream (unfused elementwise chains);
- what the host was doing during a GPU idle gap.

Nothing here decides whether something is a problem: that is ``diagnosis``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..trace.tables import ANNOTATION, OP, GpuTable, TraceTables
from .kernels import tensor_core_mask
from .steps import launches

# ---------------------------------------------------------------------------- name classes

# Matmul / convolution kernels, tensor-core or not (SIMT sgemm, implicit_convolve_sgemm and
# winograd transforms included). ``conv(?!ert)``: "convert" kernels are casts, not convolutions.
MATMUL_KERNEL = re.compile(
    r"gemm|gemv|matmul|conv(?!ert)|winograd|dgrad|wgrad|fprop|xmma|nvjet|cutlass|scudnn|hcudnn"
    r"|_MI\d+x\d+x\d+|Cijk_|splitKreduce|flash|fmha|_attn_fwd|_attn_bwd|attention_kernel|sdpa"
    r"|triton_tem_fused_.*mm|triton_.*_mm_|triton_mm|bmm",
    re.IGNORECASE,
)
# Helper kernels whose names match the above but do no matrix math.
_NOT_MATMUL = re.compile(r"computeOffsets|computeBOffsets|OffsetsKernel|bn_fw|bn_bw|scalePackedTensor", re.IGNORECASE)
# Fused attention: FlashAttention, memory-efficient attention, cuDNN SDPA, Triton flex/attention.
FUSED_ATTENTION_KERNEL = re.compile(
    r"flash|fmha|_attn_fwd|_attn_bwd|attention_kernel|sdpa|flex_attention|cudnn_generated_fort_native_sdpa",
    re.IGNORECASE,
)
FUSED_ATTENTION_OPS = frozenset(
    {
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_flash_attention_forward",
        "aten::_efficient_attention_forward",
        "aten::_fused_sdp_choice",
    }
)
# Kernels of foreach / fused optimizers (one launch covers many tensors).
MULTI_TENSOR_KERNEL = re.compile(
    r"multi_tensor_apply|fused_adam|FusedAdam|fused_sgd|FusedSgd|fused_lamb", re.IGNORECASE
)
# Collective-communication kernels (NCCL/RCCL, symmetric-memory all-reduce): few blocks by design,
# and their time is waiting on peers as much as work.
COMM_KERNEL = re.compile(
    r"nccl|rccl|cross_device_reduce|one_shot_all_reduce|two_shot_all_reduce|multimem_all_reduce|all_gather_into",
    re.IGNORECASE,
)
# Kernels that are already fused (Inductor/Triton) or communication: they break elementwise chains.
_NOT_ELEMENTWISE = re.compile(r"^triton_|ncclKernel|ncclDevKernel|multi_tensor_apply|cutlass|nvjet", re.IGNORECASE)

OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#(.+?)\.step$")
OPTIMIZER_ZERO_GRAD = re.compile(r"^Optimizer\.zero_grad#(.+?)\.zero_grad$")
DATALOADER = re.compile(r"enumerate\(DataLoader\)#|DataLoaderIter.*__next__|^DataLoader\.__next__")


_LAUNCH_CALL = re.compile(r"Launch|Memcpy|Memset", re.IGNORECASE)


def launch_call_rows(tables: TraceTables) -> np.ndarray:
    """Runtime/driver calls that enqueue device work (kernel launches, memcpys, memsets), in time
    order; synchronize, event and query calls are left out."""
    rows = launches(tables)
    hit = name_mask(tables.names, _LAUNCH_CALL)
    return rows[hit[tables.cpu.name[rows]]]


def name_mask(names: Sequence[str], pattern: re.Pattern[str], exclude: re.Pattern[str] | None = None) -> np.ndarray:
    """Boolean lookup table over name codes."""
    return np.fromiter(
        (bool(pattern.search(n)) and not (exclude is not None and exclude.search(n)) for n in names),
        dtype=bool,
        count=len(names),
    )


def matmul_kernel_mask(names: Sequence[str]) -> np.ndarray:
    """Per name code: a matmul, convolution or attention kernel (tensor-core or not)."""
    return name_mask(names, MATMUL_KERNEL, _NOT_MATMUL) | tensor_core_mask(names)


def fused_attention_kernel_mask(names: Sequence[str]) -> np.ndarray:
    return name_mask(names, FUSED_ATTENTION_KERNEL)


def multi_tensor_kernel_mask(names: Sequence[str]) -> np.ndarray:
    return name_mask(names, MULTI_TENSOR_KERNEL)


def comm_kernel_mask(names: Sequence[str]) -> np.ndarray:
    return name_mask(names, COMM_KERNEL)


def elementwise_kernel_mask(names: Sequence[str]) -> np.ndarray:
    """Per name code: an unfused, non-matmul kernel (ATen/cuDNN elementwise, reductions, norms)."""
    return ~matmul_kernel_mask(names) & ~name_mask(names, _NOT_ELEMENTWISE) & ~comm_kernel_mask(names)


# ---------------------------------------------------------------------------- host windows


@dataclass(frozen=True)
class Windows:
    """Host time windows, each on one thread (pid, tid)."""

    pid: np.ndarray  # int64
    tid: np.ndarray  # int64
    lo: np.ndarray  # float64 µs
    hi: np.ndarray

    def __len__(self) -> int:
        return len(self.lo)

    @staticmethod
    def of_rows(tables: TraceTables, rows: np.ndarray) -> Windows:
        cpu = tables.cpu
        rows = np.asarray(rows, dtype=np.int64)
        return Windows(cpu.pid[rows], cpu.tid[rows], cpu.ts[rows], cpu.end[rows])

    @staticmethod
    def empty() -> Windows:
        z = np.empty(0, np.int64)
        return Windows(z, z, np.empty(0), np.empty(0))


def in_windows(pid: np.ndarray, tid: np.ndarray, ts: np.ndarray, w: Windows) -> np.ndarray:
    """Which points (pid, tid, ts) lie inside a window of their own thread (ends included)."""
    out = np.zeros(len(ts), bool)
    if len(w) == 0 or len(ts) == 0:
        return out
    for p, t in set(zip(w.pid.tolist(), w.tid.tolist(), strict=True)):
        mine = (w.pid == p) & (w.tid == t)
        lo, hi = _merge(w.lo[mine], w.hi[mine])
        sel = np.flatnonzero((pid == p) & (tid == t))
        if not len(sel):
            continue
        k = np.searchsorted(lo, ts[sel], side="right") - 1
        ok = k >= 0
        ok[ok] = ts[sel][ok] <= hi[k[ok]]
        out[sel[ok]] = True
    return out


def _merge(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    out_lo: list[float] = []
    out_hi: list[float] = []
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        if out_hi and a <= out_hi[-1]:
            out_hi[-1] = max(out_hi[-1], b)
        else:
            out_lo.append(a)
            out_hi.append(b)
    return np.array(out_lo), np.array(out_hi)


def launched_in(tables: TraceTables, launcher: np.ndarray, w: Windows) -> np.ndarray:
    """For GPU rows whose launching cpu rows are ``launcher`` (-1 unknown): was the launch call
    made inside one of the windows, on the window's thread?"""
    out = np.zeros(len(launcher), bool)
    known = np.flatnonzero(launcher >= 0)
    if not len(known) or not len(w):
        return out
    cpu = tables.cpu
    rows = launcher[known]
    out[known] = in_windows(cpu.pid[rows], cpu.tid[rows], cpu.ts[rows], w)
    return out


def rows_named(tables: TraceTables, pattern: re.Pattern[str], kinds: tuple[int, ...] = (OP, ANNOTATION)) -> np.ndarray:
    """CPU rows of the given kinds whose name matches ``pattern``, in time order."""
    cpu = tables.cpu
    hit = name_mask(tables.names, pattern)
    kind_ok = np.isin(cpu.kind, np.array(kinds, dtype=cpu.kind.dtype))
    return np.flatnonzero(kind_ok & hit[cpu.name])


def optimizer_step_rows(tables: TraceTables) -> np.ndarray:
    return _outermost_per_thread(tables, rows_named(tables, OPTIMIZER_STEP))


def zero_grad_rows(tables: TraceTables) -> np.ndarray:
    return _outermost_per_thread(tables, rows_named(tables, OPTIMIZER_ZERO_GRAD))


def dataloader_rows(tables: TraceTables) -> np.ndarray:
    return _outermost_per_thread(tables, rows_named(tables, DATALOADER))


def _outermost_per_thread(tables: TraceTables, rows: np.ndarray) -> np.ndarray:
    """Drop rows nested in another of ``rows`` on the same thread (an annotation and its
    mirror ``cpu_op`` in some exports)."""
    if len(rows) < 2:
        return rows
    cpu = tables.cpu
    order = np.lexsort((-cpu.dur[rows], cpu.ts[rows], cpu.tid[rows], cpu.pid[rows]))
    rows = rows[order]
    keep = np.ones(len(rows), bool)
    cur = rows[0]
    for i in range(1, len(rows)):
        r = rows[i]
        same = cpu.pid[r] == cpu.pid[cur] and cpu.tid[r] == cpu.tid[cur]
        if same and cpu.ts[r] >= cpu.ts[cur] and cpu.end[r] <= cpu.end[cur]:
            keep[i] = False
        else:
            cur = r
    rows = rows[keep]
    return rows[np.argsort(cpu.ts[rows], kind="stable")]


def ops_named_in(tables: TraceTables, w: Windows, prefixes: tuple[str, ...]) -> dict[str, int]:
    """Count of ops whose name starts with one of ``prefixes``, started inside the windows."""
    cpu = tables.cpu
    hit = np.fromiter((n.startswith(prefixes) for n in tables.names), bool, len(tables.names))
    rows = np.flatnonzero((cpu.kind == OP) & hit[cpu.name])
    rows = rows[in_windows(cpu.pid[rows], cpu.tid[rows], cpu.ts[rows], w)]
    out: dict[str, int] = defaultdict(int)
    for r in rows:
        out[tables.names[cpu.name[r]]] += 1
    return dict(out)


# ---------------------------------------------------------------------------- attention chains

_MM, _SOFTMAX, _DROPOUT = 1, 2, 3
_OP_CLASS = {
    "aten::matmul": _MM,
    "aten::bmm": _MM,
    "aten::baddbmm": _MM,
    "aten::einsum": _MM,
    "aten::softmax": _SOFTMAX,
    "aten::_softmax": _SOFTMAX,
    "aten::_safe_softmax": _SOFTMAX,
    "aten::_softmax_backward_data": _SOFTMAX,
    "aten::dropout": _DROPOUT,
    "aten::native_dropout": _DROPOUT,
    "aten::feature_dropout": _DROPOUT,
    "aten::native_dropout_backward": _DROPOUT,
}
_BATCHED = frozenset({"aten::bmm", "aten::baddbmm"})


@dataclass(frozen=True)
class AttentionChain:
    """Batched matmul(s) -> softmax -> (dropout) -> batched matmul(s) on one host thread."""

    pid: int
    tid: int
    start: float  # host window of the chain, µs
    end: float
    ops: tuple[str, ...]  # outermost ops of the chain, in order
    rows: tuple[int, ...]
    backward: bool  # the softmax is ``_softmax_backward_data``
    shapes: str | None  # recorded input dims of the first matmul, when kept
    four_d: bool | None  # both inputs of a recorded aten::matmul are 4-D (None: not recorded)


@dataclass
class _Node:
    row: int
    cls: int
    name: str
    ts: float
    end: float
    batched: bool
    dims: list[list[int]] | None


def _dims(tables: TraceTables, row: int) -> list[list[int]] | None:
    rec = tables.cpu.inputs.get(row)
    if rec is None or rec.dims is None:
        return None
    try:
        d = json.loads(rec.dims)
    except ValueError:
        return None
    return [x for x in d if isinstance(x, list)] if isinstance(d, list) else None


def _thread_nodes(tables: TraceTables, rows: np.ndarray, cls_of: np.ndarray) -> list[_Node]:
    """Outermost interesting ops of one thread, in order; a matmul is *batched* when it is a
    bmm/baddbmm or encloses one (aten::matmul on >= 3-D operands dispatches to bmm)."""
    cpu, names = tables.cpu, tables.names
    order = np.lexsort((-cpu.dur[rows], cpu.ts[rows]))
    nodes: list[_Node] = []
    for r in rows[order].tolist():
        name = names[cpu.name[r]]
        ts, end = float(cpu.ts[r]), float(cpu.end[r])
        if nodes and ts >= nodes[-1].ts and end <= nodes[-1].end:
            top = nodes[-1]
            if name in _BATCHED:
                top.batched = True
            if top.dims is None and name == "aten::matmul":
                top.dims = _dims(tables, r)
            continue
        nodes.append(_Node(r, int(cls_of[cpu.name[r]]), name, ts, end, name in _BATCHED, _dims(tables, r)))
    for n in nodes:
        if n.cls == _MM and n.dims is not None and len(n.dims) >= 2:
            a, b = n.dims[0], n.dims[1]
            # recorded operands that are not both batched: a plain (folded) matmul, not attention
            if len(a) < 3 or len(b) < 3:
                n.batched = False
            elif n.name == "aten::matmul":
                n.batched = True
    return nodes


def attention_chains(tables: TraceTables, max_launches_between: int = 8, max_side: int = 2) -> list[AttentionChain]:
    """Hand-written attention in the host op sequence: batched matmul(s), softmax, optional
    dropout, batched matmul(s), with at most ``max_launches_between`` GPU launches between
    consecutive members (the scale, mask and cast kernels). Works without recorded shapes;
    when ``aten::matmul`` inputs were kept they must be batched, and 4-D is reported."""
    cpu, names = tables.cpu, tables.names
    cls_of = np.fromiter((_OP_CLASS.get(n, 0) for n in names), np.int8, len(names))
    rows = np.flatnonzero((cpu.kind == OP) & (cls_of[cpu.name] > 0))
    if not len(rows):
        return []
    lrows = launch_call_rows(tables)
    out: list[AttentionChain] = []
    for p, t in sorted(set(zip(cpu.pid[rows].tolist(), cpu.tid[rows].tolist(), strict=True))):
        mine = rows[(cpu.pid[rows] == p) & (cpu.tid[rows] == t)]
        if not (cls_of[cpu.name[mine]] == _SOFTMAX).any():
            continue
        nodes = _thread_nodes(tables, mine, cls_of)
        lts = np.sort(cpu.ts[lrows[(cpu.pid[lrows] == p) & (cpu.tid[lrows] == t)]])

        def between(a: _Node, b: _Node, lts: np.ndarray = lts) -> int:
            return int(np.searchsorted(lts, b.ts, side="left") - np.searchsorted(lts, a.end, side="right"))

        for j, sm in enumerate(nodes):
            if sm.cls != _SOFTMAX:
                continue
            left = _side(nodes, j, -1, between, max_launches_between, max_side)
            right = _side(nodes, j, +1, between, max_launches_between, max_side)
            if not left or not right:
                continue
            members = sorted([nodes[i] for i in left + right] + [sm], key=lambda n: n.ts)
            drops = [n for n in nodes[min(left) : max(right) + 1] if n.cls == _DROPOUT]
            members = sorted(members + drops, key=lambda n: n.ts)
            first_mm = next(n for n in members if n.cls == _MM)
            dims = first_mm.dims
            four = None
            mm_dims = [n.dims for n in members if n.cls == _MM and n.dims is not None and n.name == "aten::matmul"]
            if mm_dims:
                four = all(len(d) >= 2 and len(d[0]) == 4 and len(d[1]) == 4 for d in mm_dims)
            out.append(
                AttentionChain(
                    pid=int(p),
                    tid=int(t),
                    start=members[0].ts,
                    end=max(n.end for n in members),
                    ops=tuple(n.name for n in members),
                    rows=tuple(n.row for n in members),
                    backward=sm.name.endswith("_backward_data"),
                    shapes=json.dumps(dims) if dims is not None else None,
                    four_d=four,
                )
            )
    return out


def _side(nodes: list[_Node], j: int, step: int, between, limit: int, max_side: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Indexes of the batched matmuls next to the softmax at ``j`` (dropouts skipped)."""
    got: list[int] = []
    prev = nodes[j]
    i = j + step
    while 0 <= i < len(nodes) and len(got) < max_side:
        n = nodes[i]
        a, b = (n, prev) if step < 0 else (prev, n)
        if between(a, b) > limit:
            break
        if n.cls == _DROPOUT and not got:
            prev = n
            i += step
            continue
        if n.cls != _MM or not n.batched:
            break
        got.append(i)
        prev = n
        i += step
    return got


# ---------------------------------------------------------------------------- GPU-side patterns


def elementwise_runs(gpu: GpuTable, is_elementwise: np.ndarray, eligible: np.ndarray, min_len: int) -> list[np.ndarray]:
    """Runs of at least ``min_len`` consecutive elementwise kernels on one stream.

    ``gpu`` holds kernel rows; ``is_elementwise`` is the lookup table over name codes;
    ``eligible`` (per row) excludes kernels claimed by other patterns, which end a run.
    Returns row indexes into ``gpu`` for each run.
    """
    runs: list[np.ndarray] = []
    ew = is_elementwise[gpu.name] & eligible
    for s in np.unique(gpu.stream):
        rows = np.flatnonzero(gpu.stream == s)
        rows = rows[np.argsort(gpu.ts[rows], kind="stable")]
        flag = ew[rows]
        if not flag.any():
            continue
        edges = np.diff(np.concatenate(([0], flag.astype(np.int8), [0])))
        starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
            if b - a >= min_len:
                runs.append(rows[a:b])
    return runs


def host_activity(tables: TraceTables, lo: float, hi: float, limit: int = 5) -> list[dict[str, object]]:
    """The outermost host ops and annotations overlapping [lo, hi) (step markers left out),
    with the overlapped µs per name: what the CPU did while the GPU waited."""
    cpu, names = tables.cpu, tables.names
    end_idx = int(np.searchsorted(cpu.ts, hi, side="left"))
    cand = np.arange(end_idx)
    cand = cand[((cpu.kind[cand] == OP) | (cpu.kind[cand] == ANNOTATION)) & (cpu.end[cand] > lo)]
    cand = cand[[not names[c].startswith("ProfilerStep#") for c in cpu.name[cand]]]
    if not len(cand):
        return []
    cand = _outermost_per_thread(tables, cand)
    overlap: dict[str, float] = defaultdict(float)
    for r in cand.tolist():
        overlap[names[cpu.name[r]]] += float(min(cpu.end[r], hi) - max(cpu.ts[r], lo))
    top = sorted(overlap.items(), key=lambda kv: -kv[1])[:limit]
    return [{"name": n, "us": round(v, 1)} for n, v in top]
