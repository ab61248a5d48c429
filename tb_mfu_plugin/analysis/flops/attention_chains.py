"""Hand-written attention: batched matmul -> softmax -> (dropout) -> batched matmul.

Found in the host op sequence of one thread, forward and backward, with or without recorded
shapes: a model that writes attention by hand instead of calling
``scaled_dot_product_attention`` runs it as several kernels and materialises the scores.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import msgspec
import numpy as np

from ...trace.tables import OP, TraceTables
from ..kernels.name_patterns import launch_call_rows
from ..time import intervals

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

    @property
    def input_dims(self) -> list[list[int]] | None:
        """The first matmul's recorded input dims (one list of ints per input), None when unrecorded or
        of another form."""
        return matmul_dims(self.shapes)


def matmul_dims(shapes: str | None) -> list[list[int]] | None:
    """Recorded ``Input Dims`` as written in ``AttentionChain.shapes``: one list of ints per input,
    None when unrecorded or of another form."""
    try:
        return msgspec.json.decode(shapes, type=list[list[int]]) if shapes else None
    except msgspec.DecodeError:  # (a ValidationError too)
        return None


def attention_dims(shapes: str | None) -> tuple[int, int, int, int] | None:
    """(batch x heads, query length, key length, head dim) from a chain matmul's recorded input
    dims ``[[..., m, k], [..., k, n]]``: of m, k and n the head dim is the smallest, the two lengths
    the others (QK^T, PV and the backward's matmuls each have the scores as an operand or output)."""
    dims = matmul_dims(shapes)
    if dims is None or len(dims) < 2:
        return None
    a, b = dims[0], dims[1]
    if not (len(a) >= 3 and len(a) == len(b) and all(x > 0 for x in (*a, *b))):
        return None
    d, t1, t2 = sorted((a[-2], a[-1], b[-1]))
    return int(np.prod(a[:-2])), t1, t2, d


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
    rec = tables.cpu.inputs_at(row)
    return None if rec is None or rec.dims is None else _parsed_dims(rec.dims)


@lru_cache(maxsize=4096)
def _parsed_dims(dims: bytes) -> list[list[int]] | None:
    """Recorded ``Input Dims``, parsed once per distinct record (callers only read them)."""
    try:
        d = json.loads(dims)
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


Between = Callable[["_Node", "_Node"], int]


def attention_chains(tables: TraceTables, max_launches_between: int = 8, max_side: int = 2) -> list[AttentionChain]:
    """Hand-written attention in the host op sequence: batched matmul(s), softmax, optional
    dropout, batched matmul(s), with at most ``max_launches_between`` GPU launches between
    consecutive members (the scale, mask and cast kernels). Works without recorded shapes;
    when ``aten::matmul`` inputs were kept they must be batched, and 4-D is reported."""
    cpu, names = tables.cpu, tables.names
    of_class = np.flatnonzero(tables.name_codes(_OP_CLASS.__contains__)).tolist()  # the step markers asked once
    cls_of = np.zeros(len(names), np.int8)
    cls_of[of_class] = [_OP_CLASS[names[c]] for c in of_class]
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
            """Launch calls strictly between the end of ``a`` and the start of ``b``."""
            return int(intervals.points_between(lts, a.end, b.ts, closed=False))

        for j, sm in enumerate(nodes):
            if sm.cls != _SOFTMAX:
                continue
            left = _side(nodes, j, -1, between, max_launches_between, max_side)
            right = _side(nodes, j, +1, between, max_launches_between, max_side)
            if left and right:
                out.append(_chain(int(p), int(t), nodes, sm, left, right))
    return out


def _chain(pid: int, tid: int, nodes: list[_Node], sm: _Node, left: list[int], right: list[int]) -> AttentionChain:
    """The chain around the softmax ``sm`` from the matmuls at ``left`` and ``right``, with the
    dropouts between them."""
    members = sorted([nodes[i] for i in left + right] + [sm], key=lambda n: n.ts)
    drops = [n for n in nodes[min(left) : max(right) + 1] if n.cls == _DROPOUT]
    members = sorted(members + drops, key=lambda n: n.ts)
    first_mm = next(n for n in members if n.cls == _MM)
    dims = first_mm.dims
    four = None
    mm_dims = [n.dims for n in members if n.cls == _MM and n.dims is not None and n.name == "aten::matmul"]
    if mm_dims:
        four = all(len(d) >= 2 and len(d[0]) == 4 and len(d[1]) == 4 for d in mm_dims)
    return AttentionChain(
        pid=pid,
        tid=tid,
        start=members[0].ts,
        end=max(n.end for n in members),
        ops=tuple(n.name for n in members),
        rows=tuple(n.row for n in members),
        backward=sm.name.endswith("_backward_data"),
        shapes=json.dumps(dims) if dims is not None else None,
        four_d=four,
    )


def _side(nodes: list[_Node], j: int, step: int, between: Between, limit: int, max_side: int) -> list[int]:
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
