"""``sync_point``: host-device syncs inside steps, one finding per cause."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...analysis.evidence.host import SyncCall, SyncPointEvidence
from .. import fixes
from ..context import Context
from ..cost_time import gap_time
from ..registry import GAP_THRESHOLDS, Hit, rule
from ..sync_subjects import FROM_HOST_VALUE, GRAD_SCALER_STEP

_TITLE = "Host-device sync: {subject}, {count:g}x per step "


def _fix_for(subject: str) -> str:
    """Which fix text fits the user-facing call behind the sync (``sync_subjects.sync_subject``)."""
    if subject.startswith(("torch.cuda.", "a synchronous")):
        return "explicit"
    if subject == FROM_HOST_VALUE:
        return "host_value"
    if subject == GRAD_SCALER_STEP:
        return "grad_scaler"
    if "host-to-device" in subject:
        return "h2d"
    if "device-to-host" in subject:
        return "d2h"
    if "data-dependent" in subject:
        return "data_dependent"
    if ".item()" in subject or "tensor" in subject or "torch.equal" in subject or "allclose" in subject:
        return "scalar"
    return "other"


def _path(*names: str | None) -> str:
    out: list[str] = []
    for n in names:
        if n and (not out or out[-1] != n):
            out.append(n)
    return " > ".join(out)


def _by_cause(ctx: Context) -> list[tuple[str, dict[str, Any]]]:
    """The syncs grouped by cause (subject): count, host time blocked, GPU idle recovered and the
    call paths, largest idle first. The syncs that build a hand-written attention's mask are
    ``naive_attention``'s: its fix takes them away, so they are one cause with it."""
    ev, causes, gaps = ctx.sync_events, ctx.sync_causes, ctx.gaps
    cpu = ctx.tables.cpu
    row_pos = {int(r): i for i, r in enumerate(ev.rows.tolist())}
    attention = set(ctx.attention_mask_syncs.tolist())
    by: dict[str, dict[str, Any]] = {}
    for i, c in enumerate(causes):
        if int(ev.rows[i]) in attention:
            continue
        d = by.setdefault(
            c.subject, {"count": 0, "blocked": 0.0, "idle": 0.0, "calls": defaultdict(int), "cause": c, "rows": set()}
        )
        d["count"] += 1
        d["rows"].add(int(ev.rows[i]))
        d["blocked"] += float(cpu.dur[ev.rows[i]])
        d["calls"][_path(c.root_op, c.op, c.api)] += 1
    for r, us in gaps.sync_us_by_row.items():
        if r not in attention:
            by[causes[row_pos[r]].subject]["idle"] += us
    return sorted(by.items(), key=lambda kv: (-kv[1]["idle"], -kv[1]["count"]))


@rule(
    title={
        "explicit": _TITLE + "(an explicit call outside any op)",
        "inside": _TITLE + "(inside {op})",
    },
    fix={
        "scalar": (
            "Keep the value on the GPU inside the loop: accumulate `loss.detach()` into a GPU tensor and call "
            "`.item()` only every N steps (when logging); avoid `float(t)`, `if t:` and `print(t)` on GPU tensors "
            "in the hot loop."
        ),
        "h2d": (
            "Copy from pinned memory without blocking: `DataLoader(..., pin_memory=True)` (or `t.pin_memory()` "
            "once for reused host buffers) and `t.to(device, non_blocking=True)`."
        ),
        "host_value": (
            "Create the value on the GPU instead of copying it there each step: `torch.full((), value, "
            "device=...)` or `torch.zeros((), device=...)`, a Python number where the op takes one "
            "(`torch.where(mask, 0.0, x)`), or one tensor made before the loop. (Hugging Face transformers "
            "5.17's eager attention mask does this each forward; `attn_implementation='sdpa'` builds no mask.)"
        ),
        "d2h": (
            "Do not read results back every step: log every N steps, or copy into a pinned buffer with "
            "`.to('cpu', non_blocking=True)` and read it after a later `torch.cuda.Event.synchronize()`."
        ),
        "data_dependent": (
            "Avoid data-dependent shapes in the step: use masks with `torch.where`, `torch.nonzero_static` or "
            "fixed-size ops instead of `nonzero` / boolean indexing / `unique`."
        ),
        "explicit": (
            "Remove the per-step synchronize: time with `torch.cuda.Event(enable_timing=True)` pairs and read "
            "them after the loop (or every N steps); the profiler already records GPU time."
        ),
        "other": "Move the call out of the hot loop or make it asynchronous (`non_blocking=True`).",
        "grad_scaler": (
            "GradScaler reads found_inf on the host only for an optimizer that cannot take it on the GPU: "
            "use a fused one, `torch.optim.{optimizer}(params, ..., fused=True)` (Adam, AdamW, SGD and Adagrad "
            "have one; GradScaler then hands it found_inf and the scale, and the step is skipped on the GPU). "
            "Or train in bf16 (`torch.autocast('cuda', dtype=torch.bfloat16)`), which needs no GradScaler."
        ),
        "grad_scaler_unnamed": (
            "GradScaler reads found_inf on the host only for an optimizer that cannot take it on the GPU: use one "
            "with `fused=True` (Adam, AdamW, SGD and Adagrad have one; GradScaler then hands it found_inf and the "
            "scale), or train in bf16 (`torch.autocast('cuda', dtype=torch.bfloat16)`), which needs no GradScaler."
        ),
        "grad_scaler_other": (
            "GradScaler reads found_inf on the host only for an optimizer that cannot take it on the GPU "
            "({optimizer} cannot): use one with `fused=True` (Adam, AdamW, SGD, Adagrad), or train in bf16 "
            "(`torch.autocast('cuda', dtype=torch.bfloat16)`), which needs no GradScaler."
        ),
    },
    note="gain: per sync, min(GPU idle gap it returned in, host time blocked in it): a GPU-bound "
    "loop keeps the GPU fed, a host-bound one launches that much earlier",
    # the attention chains' launch gap: the syncs that build their mask are naive_attention's
    thresholds=(
        "sync_min_per_step",
        "sync_max_findings",
        "attention_max_launches_between",
        *GAP_THRESHOLDS,
        # GradScaler's read goes with a fused optimizer, whose step the what-if fuses as unfused_optimizer's
        "optimizer_fused_work_ratio",
        "optimizer_fused_host_us_per_kernel",
    ),
)
def sync_point(ctx: Context) -> list[Hit]:
    """Host-device syncs inside steps, one finding per cause. A sync drains the GPU queue; its cost is
    the GPU idle it causes, at most the host time blocked in it (see ``Context.gaps``)."""
    out: list[Hit] = []
    th = ctx.th
    fused_host_us = th.optimizer_fused_host_us_per_kernel
    optimizer = ctx.optimizer_classes[0] if ctx.optimizer_classes else None
    for subject, d in _by_cause(ctx):
        count = d["count"] / ctx.n
        if count < th.sync_min_per_step:
            continue
        c = d["cause"]
        fix = _fix_for(subject)
        if fix == "grad_scaler" and optimizer not in fixes.FUSED_CAPABLE:
            # the trace names no optimizer step (a custom loop), or one without a fused step
            fix = "grad_scaler_unnamed" if optimizer is None else "grad_scaler_other"
        explicit = c.op is None and c.root_op is None
        idle = d["idle"] / ctx.n
        evidence = SyncPointEvidence(
            call=subject,
            explicit=explicit,
            api=c.api,
            op=c.op,
            root_op=c.root_op,
            copy_direction=c.direction,
            nesting=[SyncCall(path=k, count_per_step=v / ctx.n) for k, v in d["calls"].items()],
            count_per_step=count,
            host_blocked_us_per_step=d["blocked"] / ctx.n,
            gpu_idle_recovered_us_per_step=idle,
        )
        out.append(
            Hit(
                cost_us=idle,
                gain_us=idle,
                evidence=evidence,
                args={"subject": subject, "count": count, "op": c.root_op or c.op, "optimizer": optimizer},
                title="explicit" if explicit else "inside",
                fix=(fix,),
                subject=subject,
                time=gap_time(ctx, sync_rows=d["rows"]),
                change=(
                    fixes.found_inf_on_gpu(ctx, d["rows"], count, th.optimizer_fused_work_ratio, fused_host_us)
                    if fix == "grad_scaler"
                    else fixes.syncs_removed(d["rows"], subject, count)
                ),
            )
        )
    return out[: ctx.th.sync_max_findings]
