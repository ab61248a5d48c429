"""Each op on the roofline: how far from its own limit, min(peak FLOP/s, bandwidth x intensity).

Which ops (``op_placement``): the outermost op with a byte formula on its thread, once each,
whose recorded shapes give an estimate. Its GPU time is the time of every GPU event (kernels,
device-to-device copies, memsets) launched inside it. Ops that launched a host<->device copy
are left out: PCIe, not HBM, bounds them.

Per op (one row per op name and recorded shapes) and per op class, over the analysed
steps (ops by their CPU start, as FLOPs for MFU):

- intensity I = FLOPs / bytes (minimum traffic, ``op_bytes``);
- achieved FLOP/s = FLOPs / GPU time, achieved bandwidth = bytes / GPU time;
- the roof at I: min(P, B x I); equivalently the op's time at the roof is
  max(FLOPs / P, bytes / B), and ``roof_share`` = that time / the GPU time (the share of
  the roof reached; above 1 means the byte model over-counts or caches served the data);
- ``bound``: "compute" when FLOPs / P > bytes / B (I above the ridge P / B), else "memory".

GPU work launched outside every modelled op is listed by the op that launched it, with
the reason (no formula, or shapes not recorded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.distinct import distinct_inverse
from ...trace.tables import KERNEL, MEMSET, TraceTables
from .. import fmt
from ..device.devices import props_of
from ..kernels.kernels import blocks_per_sm
from ..per_trace import once_per_trace
from ..report import Device, Roofline, RooflineClass, RooflineOp, RooflineUnmodelled
from ..time import intervals
from ..time.steps import Steps
from . import op_bytes as B
from .hbm_bandwidth import peak_bandwidth
from .placement import PlacedOps, place_ops

MAX_OPS = 150  # rows of ``roofline.ops`` in the report; the rest are summed in ``ops_left_out``


# ---------------------------------------------------------------------------
# placement


@dataclass(frozen=True)
class Ceilings:
    peak_flops: float | None
    peak_bandwidth: float | None  # bytes/s

    def place(self, flops: float, nbytes: float, us: float) -> dict[str, Any]:
        """Intensity, achieved rates, the roof and the share of it reached, for totals over ``us``."""
        flops, nbytes, us = float(flops), float(nbytes), float(us)  # plain floats for the JSON encoder
        t = us * 1e-6
        out: dict[str, Any] = {
            "intensity": flops / nbytes if nbytes > 0 else None,
            "achieved_flops": flops / t if t > 0 else None,
            "achieved_bandwidth": nbytes / t if t > 0 else None,
            "roof_flops": None,
            "roof_share": None,
            "bound": None,
            "roof_us_per_step": None,
        }
        p, bw = self.peak_flops, self.peak_bandwidth
        if not p or not bw or t <= 0 or (flops <= 0 and nbytes <= 0):
            return out
        t_compute, t_memory = flops / p, nbytes / bw
        t_roof = max(t_compute, t_memory)
        out["bound"] = "compute" if t_compute > t_memory else "memory"
        out["roof_share"] = t_roof / t
        out["roof_us_per_step"] = t_roof * 1e6
        if nbytes > 0:
            out["roof_flops"] = min(p, bw * flops / nbytes)
        return out


def _per_window(values: np.ndarray, keys: np.ndarray, nkeys: int) -> np.ndarray:
    return np.bincount(keys, weights=values, minlength=nkeys)[:nkeys] if len(keys) else np.zeros(nkeys)


def _gpu_per_op(
    placed: PlacedOps, g: Any, dev: np.ndarray, num_sms: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per op, on this device: GPU time (all its events, wherever they ran in time), passes
    (kernels and device copies; memsets are setup), and its kernels' blocks-per-SM x time and
    the time for which blocks per SM are known (their ratio is the time-weighted mean)."""
    nops = len(placed.row)
    mine = dev & (placed.gpu_op >= 0)
    ops = placed.gpu_op

    def per_op(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        w = None if weights is None else weights[mask]
        return np.bincount(ops[mask], weights=w, minlength=nops)[:nops].astype(np.float64)

    bps = blocks_per_sm(g, num_sms)
    known = mine & (g.kind == KERNEL) & ~np.isnan(bps)
    return (
        per_op(mine, g.dur),
        per_op(mine & (g.kind != MEMSET)),
        per_op(known, g.dur * np.nan_to_num(bps)),
        per_op(known, g.dur),
    )


def build_roofline(
    placed: PlacedOps,
    tables: TraceTables,
    ceilings: Ceilings,
    cpu_windows: tuple[np.ndarray, np.ndarray],
    gpu_windows: tuple[np.ndarray, np.ndarray],
    device: int | None,
    num_sms: int | None = None,
) -> Roofline:
    """The ``roofline`` block of one device's report over the analysed steps."""
    g = tables.gpu
    nsteps = max(1, len(cpu_windows[0]))
    dev = g.device == device if device is not None else np.ones(len(g), bool)
    op_us, op_kernels, op_bps_us, op_known_us = _gpu_per_op(placed, g, dev, num_sms)
    in_step = intervals.window_of_unsorted(placed.ts, *cpu_windows) >= 0
    sel = np.flatnonzero(in_step & (op_us > 0) & ~placed.host_copy)
    ngroups = len(placed.groups)
    grp = placed.group[sel]
    us = _per_window(op_us[sel], grp, ngroups) / nsteps
    fl = _per_window(placed.flops[sel], grp, ngroups) / nsteps
    by = _per_window(placed.bytes[sel], grp, ngroups) / nsteps
    cnt = np.bincount(grp, minlength=ngroups)[:ngroups] / nsteps if len(grp) else np.zeros(ngroups)
    kpc = _per_window(op_kernels[sel], grp, ngroups) / nsteps
    bps_us = _per_window(op_bps_us[sel], grp, ngroups)
    known_us = _per_window(op_known_us[sel], grp, ngroups)

    ops: list[RooflineOp] = []
    for k in np.flatnonzero(us > 0)[np.argsort(-us[us > 0], kind="stable")].tolist():
        name, cls, shapes, dtype, exact = placed.groups[k]
        op = _op_row(name, cls, shapes, dtype, exact, cnt[k], us[k], fl[k], by[k], ceilings)
        op.kernels_per_call = float(kpc[k] / cnt[k]) if cnt[k] else 0.0
        op.mean_blocks_per_sm = float(bps_us[k] / known_us[k]) if known_us[k] > 0 else None
        ops.append(op)
    classes = _classes(ops, ceilings)
    unmodelled = _unmodelled(placed, tables, dev, gpu_windows, nsteps)
    modelled_us = float(sum(o.us_per_step for o in ops))
    unmodelled_us = float(sum(u.us_per_step for u in unmodelled))
    host_us = float(op_us[np.flatnonzero(in_step & placed.host_copy)].sum()) / nsteps
    notes = _notes(ops, unmodelled, host_us)
    left = ops[MAX_OPS:]
    return Roofline(
        peak_flops=ceilings.peak_flops,
        peak_bandwidth=ceilings.peak_bandwidth,
        ridge_intensity=ceilings.peak_flops / ceilings.peak_bandwidth
        if ceilings.peak_flops and ceilings.peak_bandwidth
        else None,
        ops=ops[:MAX_OPS],
        ops_left_out=len(left),
        ops_left_out_us_per_step=float(sum(o.us_per_step for o in left)),
        classes=classes,
        unmodelled=unmodelled,
        modelled_us_per_step=modelled_us,
        unmodelled_us_per_step=unmodelled_us,
        coverage=modelled_us / (modelled_us + unmodelled_us) if modelled_us + unmodelled_us > 0 else None,
        notes=notes,
    )


def _notes(ops: list[RooflineOp], unmodelled: list[RooflineUnmodelled], host_us: float) -> list[str]:
    """The caveats that apply to this roofline, in words."""
    notes: list[str] = []
    if any(u.reason == "shapes not recorded" for u in unmodelled):
        notes.append(
            "some ops with a byte formula have no recorded shapes (record with record_shapes=True; the profiler "
            "records long tensor lists, such as a large model's fused optimizer, without shapes)"
        )
    if host_us > 0:
        notes.append(f"{fmt.us(host_us)} per step of ops that copy between host and device are left out (PCIe-bound)")
    if any(not o.exact for o in ops):
        notes.append(
            "ops marked approximate assume fp32 tensor lists (their dtype is not recorded) or an unknown conv stride"
        )
    if any(o.above_roof and o.bound == "memory" for o in ops):
        notes.append(
            "memory-bound ops above their roof (share > 100 %) moved less than the byte model says: their data was "
            "in L2 cache, an input was passed twice, or a fused kernel did not need it all"
        )
    if any(o.above_roof and o.bound == "compute" for o in ops):
        notes.append(
            "compute-bound ops above their roof did fewer FLOPs than the shape formula counts (Winograd or FFT "
            "convolutions, a conv stride the trace does not record) or ran on a faster path than the peak used"
        )
    return notes


def _op_row(
    name: str,
    cls: str,
    shapes: str,
    dtype: str | None,
    exact: bool,
    count: float,
    us: float,
    flops: float,
    nbytes: float,
    ceilings: Ceilings,
) -> RooflineOp:
    pl = ceilings.place(flops, nbytes, us)
    roof_us = pl["roof_us_per_step"]
    share = pl["roof_share"]
    return RooflineOp(
        name=name,
        op_class=cls,
        shapes=shapes,
        dtype=dtype,
        exact=exact,
        count_per_step=float(count),
        us_per_step=float(us),
        flops_per_step=float(flops),
        bytes_per_step=float(nbytes),
        intensity=pl["intensity"],
        achieved_flops=pl["achieved_flops"],
        achieved_bandwidth=pl["achieved_bandwidth"],
        roof_flops=pl["roof_flops"],
        roof_share=share,
        bound=pl["bound"],
        roof_us_per_step=roof_us,
        lost_us_per_step=max(0.0, float(us) - roof_us) if roof_us is not None else None,
        above_roof=bool(share is not None and share > 1.0),
    )


def _classes(ops: list[RooflineOp], ceilings: Ceilings) -> list[RooflineClass]:
    acc: dict[str, list[float]] = {}
    for o in ops:
        a = acc.setdefault(o.op_class, [0.0, 0.0, 0.0, 0.0, 0.0])
        a[0] += o.count_per_step
        a[1] += o.us_per_step
        a[2] += o.flops_per_step
        a[3] += o.bytes_per_step
        a[4] += o.lost_us_per_step or 0.0
    out = []
    for cls, (count, us, fl, by, lost) in sorted(acc.items(), key=lambda kv: -kv[1][1]):
        pl = ceilings.place(fl, by, us)
        out.append(
            RooflineClass(
                op_class=cls,
                count_per_step=count,
                us_per_step=us,
                flops_per_step=fl,
                bytes_per_step=by,
                intensity=pl["intensity"],
                achieved_flops=pl["achieved_flops"],
                achieved_bandwidth=pl["achieved_bandwidth"],
                roof_share=pl["roof_share"],
                bound=pl["bound"],
                lost_us_per_step=lost,
            )
        )
    return out


def _unmodelled(
    placed: PlacedOps,
    tables: TraceTables,
    dev: np.ndarray,
    gpu_windows: tuple[np.ndarray, np.ndarray],
    nsteps: int,
    top: int = 12,
) -> list[RooflineUnmodelled]:
    g = tables.gpu
    sel = dev & (placed.gpu_op < 0) & (intervals.window_of_unsorted(g.ts, *gpu_windows) >= 0)
    if not sel.any():
        return []
    codes = placed.gpu_launcher_name[sel]
    uniq, inv = distinct_inverse(codes)
    sums = np.bincount(inv, weights=g.dur[sel])
    counts = np.bincount(inv)
    out = []
    for i in np.argsort(-sums, kind="stable")[:top].tolist():
        code = int(uniq[i])
        name = tables.names[code] if code >= 0 else "(no op)"
        if code < 0:
            reason = "no launching op in the trace (CUDA graph replay, or events the profiler did not link)"
        elif name == "record_param_comms" or "nccl" in name.lower() or name.startswith("c10d::"):
            reason = "communication (network-bound, not on the HBM roofline)"
        elif name.startswith(("triton_", "Torch-Compiled Region", "CompiledFunction")):
            reason = "compiled (torch.compile) code: the fused ops' shapes are not recorded"
        elif name in B.BYTE_FORMULAS:
            reason = "shapes not recorded"
        else:
            reason = "no byte formula"
        out.append(
            RooflineUnmodelled(
                name=name, reason=reason, count_per_step=float(counts[i]) / nsteps, us_per_step=float(sums[i]) / nsteps
            )
        )
    return out


# ---------------------------------------------------------------------------
# the report hook (``pipeline`` calls it for every device, after the FLOPs step)

_placed_cached = once_per_trace(place_ops)


def placed_ops(tables: TraceTables) -> PlacedOps:
    """The trace's modelled ops and the GPU events each launched, as the roofline placed them
    (computed once per trace: the diagnosis reads which events the ops it names ran)."""
    return _placed_cached(tables)


def roofline_block(
    tables: TraceTables,
    steps: Steps,
    device: Device,
    peak_name: str | None,
) -> Roofline:
    """The roofline of one device's analysed steps: its FLOP/s ceiling is the peak MFU uses
    (``device.peak_flops``, chosen by ``analysis.device.mfu_report``), its bandwidth the HBM's of
    the GPU model ``peak_name`` or of the device's properties."""
    bw = peak_bandwidth(peak_name, props_of(tables, device.index))
    ceilings = Ceilings(device.peak_flops, bw.bytes_per_s)
    cpu_w = (np.asarray(steps.cpu_start, np.float64), np.asarray(steps.cpu_end, np.float64))
    gpu_w = (np.asarray(steps.start, np.float64), np.asarray(steps.end, np.float64))
    roof = build_roofline(_placed_cached(tables), tables, ceilings, cpu_w, gpu_w, device.index, device.num_sms)
    roof.peak_source = device.peak_source
    roof.bandwidth_source = bw.source
    if not device.peak_flops or not bw.bytes_per_s:
        roof.notes.insert(0, f"no roofline ceilings: {bw.source if not bw.bytes_per_s else 'no peak FLOP/s'}")
    return roof
