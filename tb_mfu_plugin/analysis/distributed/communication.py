"""One rank's collective communication: overlap with compute per step, and the collectives.

Overlap follows Holistic Trace Analysis (``get_comm_comp_overlap``): the union of the
communication kernels' intervals, the union of the compute kernels' (every other kernel; copies
and memsets are neither), and the share of the first that the second covers. HTA measures it
over the whole trace; here it is per analysed step window, so warm-up collectives and the
profiler's edges do not count (benchmarks/bench_hta_overlap.py compares both on the same traces).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...trace.tables import KERNEL, CommArgs, GpuTable, TraceTables
from ..kernels.name_patterns import comm_kernel_mask
from ..time import intervals
from ..time.steps import Steps
from . import collectives as co
from .blocks import Collective, CommStep, Communication, SyncPoint, UnlistedCommunication
from .interconnects import LinkChoice, choose_link
from .strategy import Roles, detect_roles

# Calls kept per group and step for aligning ranks' clocks (analysis.clock_skew): enough
# medians to be robust, few enough to keep the JSON small.
SYNC_POINTS_PER_GROUP_STEP = 64
SYNC_POINTS_MAX = 1024


@dataclass(frozen=True)
class CommRows:
    """The device's collective kernels: masks over the view's GPU rows, and per collective row
    (``np.flatnonzero(comm)`` order) its kind, what it moved and its name's protocol."""

    comm: np.ndarray  # collective kernels
    comp: np.ndarray  # every other kernel
    kind: list[str]
    args: list[CommArgs | None]
    protocol: list[str | None]


def comm_rows(tables: TraceTables, gpu: GpuTable) -> CommRows:
    """Classify the rows of a device's ``GpuTable``."""
    is_k = gpu.kind == KERNEL
    code = comm_kernel_mask(tables.names, tables.gpu_name_codes)
    comm = is_k & code[gpu.name]
    rows = np.flatnonzero(comm)
    args = [tables.comm_args[i] if i >= 0 else None for i in gpu.comm[rows].tolist()]
    names = [tables.names[c] for c in gpu.name[rows].tolist()]
    return CommRows(
        comm=comm,
        comp=is_k & ~code[gpu.name],
        kind=[co.kind_of(n, a) for n, a in zip(names, args, strict=True)],
        args=args,
        protocol=[co.protocol_of(n) for n in names],
    )


def p2p_mask(rows: CommRows) -> np.ndarray:
    """The rows of the view that are point-to-point transfers (send/recv): a pipeline's."""
    out = np.zeros(len(rows.comm), bool)
    out[[r for r, k in zip(np.flatnonzero(rows.comm).tolist(), rows.kind, strict=True) if k in co.P2P]] = True
    return out


def overlap_in(
    ts: np.ndarray, end: np.ndarray, comm: np.ndarray, comp: np.ndarray, lo: float, hi: float
) -> tuple[float, float]:
    """(communication, overlapped) µs inside ``[lo, hi)``: the union of the ``comm`` rows, and
    the part of it that the union of the ``comp`` rows covers (|A ∩ B| = |A| + |B| - |A ∪ B|)."""
    a = intervals.union_length(ts[comm], end[comm], lo, hi)
    if a == 0.0:
        return 0.0, 0.0
    b = intervals.union_length(ts[comp], end[comp], lo, hi)
    both = comm | comp
    ab = intervals.union_length(ts[both], end[both], lo, hi)
    return a, max(0.0, a + b - ab)


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _windows(gpu: GpuTable, steps: Steps) -> list[tuple[int, float, float, slice]]:
    """Per step: its number, window, and the slice of rows (sorted by start) that can overlap it."""
    longest = float(gpu.dur.max()) if len(gpu) else 0.0
    return [
        (int(k), lo, hi, intervals.overlap_slice(gpu.ts, lo, hi, longest))
        for k, lo, hi in zip(steps.number.tolist(), steps.start.tolist(), steps.end.tolist(), strict=True)
    ]


def step_overlap(gpu: GpuTable, rows: CommRows, steps: Steps) -> list[CommStep]:
    out = []
    for number, lo, hi, sl in _windows(gpu, steps):
        c, o = overlap_in(gpu.ts[sl], gpu.end[sl], rows.comm[sl], rows.comp[sl], lo, hi)
        out.append(
            CommStep(step=number, communication_us=c, overlapped_us=o, exposed_us=c - o, overlap_ratio=_ratio(o, c))
        )
    return out


def exposed_time(gpu: GpuTable, mine: np.ndarray, comp: np.ndarray, steps: Steps) -> float:
    """Time covered by the rows ``mine`` with no ``comp`` row running, over the step windows."""
    total = 0.0
    for _, lo, hi, sl in _windows(gpu, steps):
        c, o = overlap_in(gpu.ts[sl], gpu.end[sl], mine[sl], comp[sl], lo, hi)
        total += c - o
    return total


def analyze_communication(
    tables: TraceTables,
    gpu: GpuTable,
    step_of_row: np.ndarray,
    steps: Steps,
    device_name: str | None,
    interconnect: str | None = None,
    launched: np.ndarray | None = None,
) -> Communication | None:
    """The ``communication`` block of one device, None when it ran no collective kernel.
    ``gpu`` is the device's ``GpuTable``, ``step_of_row`` the step of each row, ``launched``
    whether the trace holds its launch call. Time shares are over the step windows; the
    collectives count only the calls launched in a step (a call the GPU runs late, launched
    before the trace began, belongs to an earlier step and carries no args)."""
    rows = comm_rows(tables, gpu)
    if not rows.comm.any() or len(steps) == 0:
        return None
    n = len(steps)
    per_step = step_overlap(gpu, rows, steps)
    total = sum(s.communication_us for s in per_step)
    overlapped = sum(s.overlapped_us for s in per_step)
    roles = detect_roles(tables, rows.kind, rows.args)
    dist = tables.meta.distributed_info or {}
    pg_config = dist.get("pg_config") if isinstance(dist.get("pg_config"), list) else None
    counted = step_of_row if launched is None else np.where(launched, step_of_row, -1)
    colls, link = _collectives(gpu, rows, counted, steps, roles, pg_config, device_name, interconnect)
    return Communication(
        unlisted=_unlisted(total / n, (total - overlapped) / n, colls),
        communication_us_per_step=total / n,
        exposed_us_per_step=(total - overlapped) / n,
        overlapped_us_per_step=overlapped / n,
        overlap_ratio=_ratio(overlapped, total),
        collectives=colls,
        steps=per_step,
        strategy=roles.strategy,
        strategy_evidence=roles.evidence,
        link=link.link.key if link.link else None,
        link_gbps=link.link.gbps if link.link else None,
        link_source=link.source,
        sync_points=_sync_points(gpu, rows, counted, steps),
    )


# The rows and the total agree when they differ by less than this share of the total (float sums).
_ADDS_UP = 1e-6


def _unlisted(total: float, exposed: float, colls: list[Collective]) -> UnlistedCommunication | None:
    """The part of the total (and of its exposed part) the rows do not add up to, with why."""
    rest = total - sum(c.us_per_step for c in colls)
    rest_exposed = exposed - sum(c.exposed_us_per_step for c in colls)
    if abs(rest) <= _ADDS_UP * max(total, 1.0) and abs(rest_exposed) <= _ADDS_UP * max(total, 1.0):
        return None
    if rest < 0:
        reason = (
            "collectives that ran at the same time on different streams: each row counts that time, "
            "the total counts it once"
        )
    else:
        reason = (
            "collective kernel time in the steps that no row lists: calls launched before the first "
            "analysed step, or whose launch call the trace does not hold"
        )
    return UnlistedCommunication(us_per_step=rest, exposed_us_per_step=rest_exposed, reason=reason)


def _collectives(
    gpu: GpuTable,
    rows: CommRows,
    step_of_row: np.ndarray,
    steps: Steps,
    roles: Roles,
    pg_config: list[Any] | None,
    device_name: str | None,
    interconnect: str | None,
) -> tuple[list[Collective], LinkChoice]:
    """One ``Collective`` per (kind, group, dtype) over the rows the steps launched, largest time
    first; and the link of the group with the most collective time."""
    n = len(steps)
    index = np.flatnonzero(rows.comm)
    groups: dict[tuple[str, str | None, str | None], list[int]] = defaultdict(list)
    for j, (r, kind, args) in enumerate(zip(index.tolist(), rows.kind, rows.args, strict=True)):
        if step_of_row[r] >= 0:
            groups[(kind, co.group_key(args), args.dtype if args else None)].append(j)
    out = []
    for (kind, key, dtype), members in groups.items():
        rs = index[members]
        args = rows.args[members[0]]
        size = args.group_size if args is not None and args.group_size > 0 else None
        link = choose_link(device_name, size, interconnect)
        nbytes = [co.message_bytes(rows.args[j]) for j in members]
        known = np.array([b is not None for b in nbytes])
        dur = gpu.dur[rs]
        moved = float(sum(b for b in nbytes if b is not None))
        link_gbps = link.link.gbps if link.link else None
        algbw, busbw, link_share = co.bandwidths(kind, size, moved, float(dur[known].sum()), link_gbps)
        out.append(
            Collective(
                kind=kind,
                group=co.group_label(args, pg_config),
                group_id=key,
                group_size=size,
                role=roles.by_group.get(key or ""),
                dtype=dtype,
                count_per_step=len(rs) / n,
                bytes_per_step=moved / n if known.any() else None,
                us_per_step=float(dur.sum()) / n,
                exposed_us_per_step=exposed_time(gpu, _mask(len(gpu), rs), rows.comp, steps) / n,
                mean_message_bytes=moved / int(known.sum()) if known.any() else None,
                algbw_gbps=algbw,
                busbw_gbps=busbw,
                link_peak_share=link_share,
                link=link.link.key if link.link else None,
                link_gbps=link_gbps,
                kernel_busbw_gbps=busbw,
                kernel_protocol=rows.protocol[members[0]],
            )
        )
    out.sort(key=lambda c: -c.us_per_step)
    biggest = out[0].group_size if out else None
    return out, choose_link(device_name, biggest, interconnect)


def _mask(n: int, rows: np.ndarray) -> np.ndarray:
    out = np.zeros(n, bool)
    out[rows] = True
    return out


def _sync_points(gpu: GpuTable, rows: CommRows, step_of_row: np.ndarray, steps: Steps) -> list[SyncPoint]:
    """The first calls of every group in every step, in launch order on the GPU."""
    seen: dict[tuple[str, int], int] = defaultdict(int)
    out = []
    numbers = steps.number
    for r, kind, args in zip(np.flatnonzero(rows.comm).tolist(), rows.kind, rows.args, strict=True):
        key = co.group_key(args)
        s = int(step_of_row[r])
        if key is None or s < 0:
            continue
        i = seen[(key, s)]
        seen[(key, s)] = i + 1
        if i < SYNC_POINTS_PER_GROUP_STEP:
            nbytes = co.message_bytes(args)
            out.append(
                SyncPoint(
                    group=key,
                    step=int(numbers[s]),
                    index=i,
                    kind=kind,
                    dtype=args.dtype if args else None,
                    nbytes=-1 if nbytes is None else nbytes,
                    start_us=float(gpu.ts[r]),
                    end_us=float(gpu.end[r]),
                )
            )
            if len(out) >= SYNC_POINTS_MAX:
                break
    return out
