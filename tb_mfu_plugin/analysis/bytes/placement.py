"""The ops on the roofline: which ops are modelled, once each, and the GPU events each launched.

Which ops: the count-once rule of ``flop_count``, over the ops that have a byte formula
(``op_bytes.BYTE_FORMULAS``, a superset of the FLOP formulas): the **outermost** such op
on its thread, nested in time, whose recorded shapes give an estimate. Its GPU events are
those whose launch point (``op_attribution``: the runtime call that launched the event, by
correlation id, else the op the event's external id names) lies within the op. Ops that
launched a host<->device copy are marked: PCIe, not HBM, bounds them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...trace.tables import MEMCPY, OpInputs, TraceTables, name_lookup
from ..flops import shapes as F
from ..flops.conv_hints import conv_out_hints
from ..flops.formulas import Hints
from ..kernels.name_patterns import op_rows_named
from ..time import nesting
from ..time.nesting import ThreadAxis
from ..time.op_attribution import launch_points, ops_by_external_id, outermost_op_at
from . import op_bytes as B
from .model import OpCost

_HOST_COPY = ("HtoD", "DtoH", "HtoH", "PtoP")
# One distinct (op name code, recorded dims, types, concrete inputs): its cost is estimated once.
_Key = tuple[int, bytes | None, bytes | None, bytes | None]
# One row of the roofline table: (op name, op class, shapes text, dtype, exact).
Group = tuple[str, str, str, str | None, bool]


@dataclass(frozen=True)
class PlacedOps:
    """The modelled ops of one trace (rows of ``tables.cpu``, time order) and their GPU events."""

    row: np.ndarray  # int64 cpu row
    ts: np.ndarray  # float64 µs, op start
    bytes: np.ndarray  # float64
    flops: np.ndarray  # float64
    group: np.ndarray  # int64 index into ``groups``
    groups: list[tuple[str, str, str, str | None, bool]]  # (name, class, shapes, dtype, exact)
    gpu_op: np.ndarray  # per gpu row: index into the ops above, -1 when launched outside them
    gpu_launcher_name: np.ndarray  # per gpu row: int32 name code of the op that launched it, -1
    host_copy: np.ndarray  # per op: launched a host<->device copy (not on the HBM roofline)
    unestimated: int  # formula ops whose shapes were missing or unparsable


def _shapes_text(dims: bytes | None, limit: int = 160) -> str:
    s = (dims or b"").decode("utf-8", "replace")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def place_ops(tables: TraceTables) -> PlacedOps:
    """Select the modelled ops once each and map every GPU event to the op that launched it."""
    c = tables.cpu
    ax = nesting.thread_axis(tables)
    rows = np.flatnonzero(op_rows_named(tables, B.is_roofline_op))
    keys, key_of = _shape_keys(tables, rows)
    costs = _key_costs(tables, rows, keys)
    key_ok = np.fromiter((x is not None for x in costs), bool, len(costs))
    ok = (key_of >= 0) & key_ok[np.maximum(key_of, 0)] if len(keys) else np.zeros(len(rows), bool)
    valid = rows[ok]
    valid = valid[~nesting.same_name_wrappers(tables, ax, valid)]
    o_rows, o0, o1 = nesting.sorted_set(ax, nesting.outermost(ax, valid))
    o_key = key_of[np.searchsorted(rows, o_rows)]
    groups, key_group, key_bytes, key_flops = _groups(tables.names, keys, costs)
    gpu_op, launcher_name = _gpu_ops(tables, ax, o0, o1)
    return PlacedOps(
        row=o_rows.astype(np.int64),
        ts=c.ts[o_rows],
        bytes=key_bytes[o_key],
        flops=key_flops[o_key],
        group=key_group[o_key],
        groups=groups,
        gpu_op=gpu_op,
        gpu_launcher_name=launcher_name,
        host_copy=_host_copies(tables, gpu_op, len(o_rows)),
        unestimated=int((~ok).sum()),
    )


def _shape_keys(tables: TraceTables, rows: np.ndarray) -> tuple[list[_Key], np.ndarray]:
    """The distinct (op, recorded inputs) keys of ``rows`` and each row's key (-1: no inputs).
    A step repeats the same few hundred keys thousands of times: each is estimated once."""
    c = tables.cpu
    codes, ids, key_of = c.distinct_inputs(rows)
    records = c.input_records
    keys = [
        (code, records[i].dims, records[i].types, records[i].concrete)
        for code, i in zip(codes.tolist(), ids.tolist(), strict=True)
    ]
    return keys, key_of


def _key_costs(tables: TraceTables, rows: np.ndarray, keys: list[_Key]) -> list[B.OpCost | None]:
    """The byte and FLOP estimate of each key. Legacy traces (no Concrete Inputs): forward convs
    learn their output size from their backward ops, exactly as for MFU (``conv_hints``)."""
    names = tables.names
    conv_out = conv_out_hints(tables, rows[op_rows_named(tables, F.is_flop_op)[rows]]) if len(rows) else {}
    hints = Hints(conv_out=conv_out) if conv_out else None
    return [
        B.estimate(names[k[0]], OpInputs(k[1], k[2], k[3]), hints if names[k[0]] in F.CONV_FORWARD else None)
        for k in keys
    ]


def _groups(
    names: list[str], keys: list[_Key], costs: list[OpCost | None]
) -> tuple[list[Group], np.ndarray, np.ndarray, np.ndarray]:
    """The table's rows (op name + recorded dims and types: Concrete Inputs such as a scale do
    not split a row), and per key its row, bytes and FLOPs."""
    group_ids: dict[tuple[int, bytes | None, bytes | None], int] = {}
    groups: list[Group] = []
    key_group = np.full(len(keys), -1, np.int64)
    key_bytes, key_flops = np.zeros(len(keys)), np.zeros(len(keys))
    for j, (k, cost) in enumerate(zip(keys, costs, strict=True)):
        if cost is None:
            continue
        gk = (k[0], k[1], k[2])
        gid = group_ids.get(gk)
        if gid is None:
            gid = group_ids[gk] = len(groups)
            groups.append((names[k[0]], cost.op_class, _shapes_text(k[1]), cost.dtype, cost.exact))
        key_group[j], key_bytes[j], key_flops[j] = gid, cost.bytes, cost.flops
    return groups, key_group, key_bytes, key_flops


def _gpu_ops(tables: TraceTables, ax: ThreadAxis, o0: np.ndarray, o1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per GPU row: the modelled op ``[o0, o1]`` around its launch point (-1 none), and the name
    code of the op that launched it (the external-id op, else the outermost op around its launch
    point, -1 unknown)."""
    c, g = tables.cpu, tables.gpu
    ext_op = ops_by_external_id(tables)
    point = launch_points(tables, ax, ext_op)
    gpu_op = np.full(len(g), -1, np.int64)
    has = ~np.isnan(point)
    if len(o0) and has.any():
        gpu_op[has] = nesting.containing_disjoint(point[has], o0, o1, ax.tol)
    launcher_name = np.full(len(g), -1, np.int32)
    launcher_name[ext_op >= 0] = c.name[ext_op[ext_op >= 0]]
    rest = np.flatnonzero(has & (ext_op < 0) & (gpu_op < 0))
    if len(rest):  # no op named by the event: the outermost op around its launch call
        top = outermost_op_at(tables, ax, point[rest])
        launcher_name[rest[top >= 0]] = c.name[top[top >= 0]]
    return gpu_op, launcher_name


def _host_copies(tables: TraceTables, gpu_op: np.ndarray, nops: int) -> np.ndarray:
    """Per modelled op: did it launch a host<->device copy (not on the HBM roofline)?"""
    g, names = tables.gpu, tables.names
    copy_codes = name_lookup(names, lambda nm: any(t in nm for t in _HOST_COPY), tables.gpu_name_codes)
    host = (g.kind == MEMCPY) & copy_codes[g.name] if len(g) else np.zeros(0, bool)
    host_copy = np.zeros(nops, bool)
    hit = host & (gpu_op >= 0)
    host_copy[gpu_op[hit]] = True
    return host_copy
