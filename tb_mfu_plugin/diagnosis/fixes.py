"""What each finding's fix does to the trace, as a ``Change`` the critical-path model re-times
(``analysis.critical_path.whatif``; ``diagnosis.whatif_gains`` gives the gains).

Each function describes one fix in the trace's own terms, from what its rule found: the ops it
makes faster or folds into others, the host time it takes away, the syncs it removes. The
factors are physical where the trace or the device tells them (the pinned bandwidth the copy
rule measured, the device's bf16 and fp32 peaks, an op's roof) and the rule's own assumptions
otherwise (a fused optimizer's work ratio), each named in the change's words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from ..analysis import fmt
from ..analysis.critical_path import classes as cpc
from ..analysis.critical_path.dispatch import dispatch_windows
from ..analysis.critical_path.whatif import GRAPH_GAP_US, Change, HostChange, OpChange
from ..analysis.device import peaks
from ..analysis.flops.attention_chains import attention_dims
from ..analysis.fmt import us
from ..analysis.memory.checkpoint import regions as recompute_regions
from ..analysis.time import copies as cp
from ..analysis.time import patterns as pt
from .context import Context
from .cost_time import TimeSet

# Optimizers that torch.optim offers with fused=True; the others have foreach at best. Their fused
# step also takes GradScaler's found_inf on the GPU (``_step_supports_amp_scaling``: torch/optim/adam.py,
# sgd.py, adagrad.py), so GradScaler reads nothing back for them.
FUSED_CAPABLE = {"Adam", "AdamW", "SGD", "Adagrad"}


def _rows(mask: np.ndarray) -> np.ndarray:
    return np.flatnonzero(mask)


def syncs_removed(rows: Iterable[int], subject: str, count: float) -> Change:
    return Change(f"the {count:g} sync(s) per step of {subject} removed", syncs=np.fromiter(rows, np.int64))


def found_inf_on_gpu(
    ctx: Context, rows: Iterable[int], count: float, ratio: float, host_us_per_kernel: float
) -> Change:
    """GradScaler stepping a fused optimizer: its read of found_inf gone (the fused step takes it on
    the GPU), and the optimizer step fused as ``fused_optimizer`` fuses a per-parameter one (its
    multi-tensor kernels folded at ``ratio`` of their time, its host time ``host_us_per_kernel`` a
    kernel), since the fix is the fused step itself."""
    fused = fused_optimizer(ctx, ctx.optimizer_kernels, ratio, host_us_per_kernel)
    return Change(
        f"the {count:g} read(s) per step of GradScaler's found_inf removed, and {fused.what}",
        ops=fused.ops,
        host=fused.host,
        syncs=np.fromiter(rows, np.int64),
    )


def copy_syncs(ctx: Context, directions: set[str]) -> np.ndarray:
    """The syncs a blocking copy of one of ``directions`` makes (``.to(device)`` without
    ``non_blocking``): they go with a non-blocking copy."""
    ev = ctx.sync_events
    keep = [
        int(r)
        for r, c in zip(ev.rows.tolist(), ctx.sync_causes, strict=True)
        if c.direction in directions and c.subject.startswith(("blocking host-to-device copy", "device-to-host copy"))
    ]
    return np.asarray(keep, np.int64)


def typical_launch_us(ctx: Context) -> float:
    """What a kernel launch call costs the host here (the median launch call of the model)."""
    model = ctx.view.critical
    if model is None or not np.isfinite(model.g.launch_call_us):
        return 5.0
    return model.g.launch_call_us


def pinned(ctx: Context, pageable: np.ndarray, gbps: dict[str, float]) -> Change:
    """Pageable copies from pinned memory with ``non_blocking=True``: each at the pinned bandwidth of
    its direction, its call as cheap as a launch, and the syncs of the blocking copies gone."""
    g = ctx.view.gpu
    direction, _ = cp.classify(ctx.names)
    rows = _rows(pageable)
    dirs = [cp.DIRECTIONS[int(d)] for d in direction[g.name[rows]]]
    at = np.array([gbps.get(d, 0.0) for d in dirs], np.float64)
    nbytes = np.maximum(g.bytes[rows], 0).astype(np.float64)
    new = np.where(at > 0, nbytes / np.where(at > 0, at * 1e3, 1.0), g.dur[rows])
    factor = np.where(g.dur[rows] > 0, new / np.where(g.dur[rows] > 0, g.dur[rows], 1.0), 1.0)
    calls = ctx.launcher[rows]
    calls = calls[calls >= 0]
    launch = np.full(len(calls), typical_launch_us(ctx))
    text = (
        f"the pageable copies from pinned memory at {', '.join(f'{d} {fmt.gbps(v)}' for d, v in sorted(gbps.items()))}"
    )
    return Change(
        text + ", copied with non_blocking=True (their syncs removed)",
        ops=(OpChange(rows, factor),),
        calls=((calls, launch),),
        syncs=copy_syncs(ctx, set(dirs)),
    )


def copies_gone(ctx: Context, mask: np.ndarray, what: str) -> Change:
    """Copies that no longer run (kept on the GPU, preallocated, or overlapped on a side stream),
    their launch calls and their syncs with them."""
    direction, _ = cp.classify(ctx.names)
    rows = _rows(mask)
    dirs = {cp.DIRECTIONS[int(d)] for d in direction[ctx.view.gpu.name[rows]]}
    return Change(what, ops=(OpChange(rows, 0.0, fused=True),), syncs=copy_syncs(ctx, dirs))


def modelled(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """The rows (of the device view) in the steps the critical-path model holds: a change to any
    other row moves nothing the re-timing sees (``critical_path.device.MAX_MODELLED_STEPS``)."""
    model = ctx.view.critical
    if model is None:
        return rows[:0]
    step = ctx.view.step[rows]
    return rows[(step >= 0) & (step < model.g.steps)]


def folded_dispatch(ctx: Context, gone: np.ndarray) -> tuple[HostChange, ...]:
    """The host time of the ops that launched only the folded rows ``gone`` (``dispatch_windows``),
    in the modelled steps."""
    model = ctx.view.critical
    gone = modelled(ctx, gone)
    if model is None or not len(gone):
        return ()
    calls = ctx.launcher[gone]
    calls = np.unique(calls[calls >= 0])
    lo, hi = float(model.g.host.t[0]), float(model.g.host.t[int(model.g.step_host_end[-1])])
    start, end = dispatch_windows(ctx.tables, calls, lo, hi)
    return (HostChange(start, end, 0.0),) if len(start) else ()


def fused_attention_matmul_factor(ctx: Context) -> tuple[float, str]:
    """How much faster a chain's matmuls run as one fused kernel: each keeps the share of its roof it
    ran at, and the fused kernel's roof has no traffic of the B x H x T x T scores (written by QK^T,
    read by PV, and in the backward each matmul reads or writes one). 1 where the matmuls are not
    16-bit or no chain's shapes, peak or bandwidth are known: then they run as they ran."""
    r, flops = ctx.report.roofline, ctx.report.flops
    dims = [x for c in ctx.attention_chains if (x := attention_dims(c.shapes)) is not None]
    sixteen_bit = flops is not None and flops.dtype in ("bf16", "fp16")
    if not dims or r is None or not r.peak_flops or not r.peak_bandwidth or not sixteen_bit:
        return 1.0, "its matmul kernels as they ran"
    batch, tq, tk, head = max(set(dims), key=dims.count)
    size = 2  # bytes of a 16-bit element
    compute = 2.0 * batch * tq * tk * head / r.peak_flops  # one matmul's, at the peak
    operands = batch * (tq + tk) * head * size / r.peak_bandwidth  # its two T x d operands or results
    scores = batch * tq * tk * size / r.peak_bandwidth
    factor = max(compute, operands) / max(compute, operands + scores)
    return factor, (
        f"its matmul kernels x {factor:.2f} (each at the share of its roof it ran at, on a roof without the "
        f"traffic of the {batch} x {tq} x {tk} scores)"
    )


def fused_attention(ctx: Context, rows: np.ndarray, matmul: np.ndarray) -> Change:
    """The attention chains as one fused kernel: the matmuls at the speed a roof without the scores'
    traffic allows (``fused_attention_matmul_factor``), the rest (scale, mask, softmax, dropout,
    copies of the scores) folded away with the host ops that launched them, and each chain's host
    time as long as its first matmul op (one op dispatches it all)."""
    gone = _rows(rows & ~matmul)
    factor, how = fused_attention_matmul_factor(ctx)
    cpu = ctx.tables.cpu
    chains = [c for c in ctx.attention_chains if c.end > c.start and c.rows]
    lo = np.array([c.start for c in chains])
    hi = np.array([c.end for c in chains])
    first = np.array([float(cpu.dur[c.rows[0]]) for c in chains])
    windows = (HostChange(lo, hi, np.minimum(1.0, first / (hi - lo))),) if chains else ()
    kept = (OpChange(_rows(rows & matmul), factor),) if factor < 1.0 else ()
    syncs = ctx.attention_mask_syncs
    mask = (
        f", and the {len(syncs) / max(ctx.n, 1):g} blocking copy a step that builds its additive mask gone "
        "(SDPA's causal path builds none)"
        if len(syncs)
        else ""
    )
    return Change(
        f"each attention chain as one fused op (F.scaled_dot_product_attention): {how}, "
        "its other kernels folded into them with the host ops that launched only those, and its host time "
        f"that of its first matmul op{mask}",
        ops=(OpChange(gone, 0.0, fused=True), *kept),
        host=folded_dispatch(ctx, gone) + windows,
        syncs=syncs,
    )


def fused_optimizer(ctx: Context, launched: np.ndarray, ratio: float, host_us_per_kernel: float) -> Change:
    """The per-parameter optimizer kernels as fused ones: their time x ``ratio`` with no gaps, and each
    ``Optimizer.step``'s host time (its ops, its launches and the Python between them) cut to
    ``host_us_per_kernel`` for each kernel it launched: a fused step still walks its parameters in
    Python, but dispatches a handful of multi-tensor ops."""
    rows = _rows(launched)
    steps = ctx.optimizer_rows
    cpu = ctx.tables.cpu
    lo, hi = cpu.ts[steps], cpu.end[steps]
    calls = ctx.launcher[rows]
    at = np.sort(cpu.ts[calls[calls >= 0]])
    launched_in = np.searchsorted(at, hi, side="right") - np.searchsorted(at, lo, side="left")
    keep = np.minimum(1.0, host_us_per_kernel * launched_in / np.maximum(hi - lo, 1e-9))
    return Change(
        f"the optimizer step fused: its kernels' time x {ratio:g} with no gaps, and its host time "
        f"{us(host_us_per_kernel)} for each kernel it launched",
        ops=(OpChange(rows, ratio, fused=True),),
        host=folded_dispatch(ctx, rows) + ((HostChange(lo, hi, keep),) if len(steps) else ()),
    )


def fused_runs(ctx: Context, kern_rows: np.ndarray, runs: Sequence[np.ndarray]) -> Change:
    """Each elementwise run as one kernel as long as its longest member: the others folded into it,
    with the host ops that launched only them."""
    g = ctx.view.gpu
    model = ctx.view.critical
    last = model.g.steps if model is not None else 0
    gone = []
    for r in runs:
        rows = kern_rows[r]
        if 0 <= ctx.view.step[rows[0]] < last:  # (the runs of steps the model does not hold change nothing)
            gone.append(np.delete(rows, int(np.argmax(g.dur[rows]))))
    folded = np.concatenate(gone) if gone else np.empty(0, np.int64)
    return Change(
        f"each of the {len(runs) / max(ctx.n, 1):.0f} elementwise runs per step fused into one kernel as long as "
        "its longest member, with the host ops that launched only the others",
        ops=(OpChange(folded, 0.0, fused=True),),
        host=folded_dispatch(ctx, folded),
    )


def scaled(rows_mask: np.ndarray, factor: np.ndarray | float, what: str) -> Change:
    rows = _rows(rows_mask)
    f = factor[rows] if isinstance(factor, np.ndarray) and len(factor) == len(rows_mask) else factor
    return Change(what, ops=(OpChange(rows, f),))


def tensor_core_factor(ctx: Context, fallback_speedup: float) -> tuple[float, str]:
    """How much faster fp32 matmuls run on the 16-bit tensor cores of this device: the ratio of its
    fp32 and bf16 (fp16 before Ampere) dense peaks, each kernel keeping its share of its peak; the
    threshold's speed-up where the device is not known."""
    name = ctx.report.device.name if ctx.report.device else None
    found = peaks.match_gpu(name) if name else None
    if found is not None and found.tflops.get("fp32"):
        fast = found.tflops.get("bf16") or found.tflops.get("fp16")
        if fast:
            peaks_text = f"fp32 {fmt.flop_rate(found.tflops['fp32'] * 1e12)} -> 16-bit {fmt.flop_rate(fast * 1e12)}"
            return found.tflops["fp32"] / fast, f"{found.key} {peaks_text}"
    return 1.0 / fallback_speedup, f"{fallback_speedup:g}x (device peaks unknown)"


def graph_replay(ctx: Context) -> Change:
    return Change(
        "every step's launches replayed from one CUDA graph: the host work from its first launch to its last "
        "gone (syncs and DataLoader calls left), its kernels as close as a replay's "
        f"({us(GRAPH_GAP_US)} apart at most)",
        graph_replay=True,
    )


def gapless(mask: np.ndarray, what: str) -> Change:
    return Change(what, ops=(OpChange(_rows(mask), 1.0, no_gap=True),))


def host_hidden(lo: np.ndarray, hi: np.ndarray, what: str, only: tuple[str, ...] = ()) -> Change:
    return Change(what, host=(HostChange(lo, hi, 0.0, only),))


def idle_host_work(time: TimeSet) -> Change:
    return host_hidden(
        time.start, time.end, "the host work during the unexplained GPU idle taken off the step", (cpc.HOST,)
    )


def recompute_removed(ctx: Context) -> tuple[Change, np.ndarray]:
    """Activation checkpointing off: each recompute region's host time gone (the forward ops it
    re-runs and their launches: in a host-bound step that is where the time goes) and the kernels it
    launched folded away. Also the rows of those kernels (the time the finding claims)."""
    reg = recompute_regions(ctx.tables, ctx.steps)
    cpu = ctx.tables.cpu
    w = pt.Windows(cpu.pid[reg.node], cpu.tid[reg.node], reg.lo, reg.hi)
    rows = ctx.launched_in(w) & ctx.in_step
    gone = _rows(rows)
    return (
        Change(
            f"activation checkpointing off: its {len(reg.node) / max(ctx.n, 1):g} recompute regions per step "
            "gone, the forward ops they re-run with their launches and kernels",
            ops=(OpChange(gone, 0.0, fused=True),),
            host=(HostChange(reg.lo, reg.hi, 0.0),) if len(reg.node) else (),
        ),
        rows,
    )
