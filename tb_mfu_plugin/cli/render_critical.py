"""What ``tb-mfu`` prints of the critical path (``WorkerReport.critical_path``) and of the what-if
re-timings (``WorkerReport.whatif``): rendering only, every figure from the report."""

from __future__ import annotations

from msgspec import UnsetType
from rich.console import Console
from rich.table import Table

from ..analysis.critical_path.report_types import WhatIf, WhatIfCase
from ..analysis.definitions import label
from ..analysis.fmt import pct, us
from ..analysis.report import Finding, WorkerReport
from .console import cut

MAX_STEP_COLUMNS = 6  # steps shown side by side; the per-step figures are all in --json
FIX_WIDTH = 60  # characters of a what-if row's finding (its subject may be a long call); the table says which


def print_critical_path(console: Console, w: WorkerReport) -> None:
    """Each class's time on the modelled steps' critical paths, per step and over them."""
    cp = w.critical_path
    if cp is None or not cp.steps:
        return
    shown = cp.steps[:MAX_STEP_COLUMNS]
    t = Table(
        title=f"Critical path: what each step waits on ({cp.steps_modelled} of {len(w.steps)} steps modelled; "
        f"bound by {label('critical_path.' + cp.bound).lower()})",
        title_justify="left",
        caption=f"launch call to kernel start {us(cp.launch_latency_us)}, queued ops {us(cp.stream_gap_us)} apart "
        f"(medians); {cp.inferred_waits_per_step:.3g} waits on another stream per step, inferred from timing",
        caption_justify="left",
    )
    t.add_column("")
    t.add_column("per step", justify="right")
    t.add_column("share", justify="right")
    for s in shown:
        t.add_column(f"step {s.step}", justify="right")
    for c in cp.classes:
        if c not in cp.us_per_step:
            continue
        t.add_row(
            label("critical_path." + c),
            us(cp.us_per_step[c]),
            pct(cp.share.get(c)),
            *(us(s.us[c]) if c in s.us else "" for s in shown),
        )
    t.add_row("Step", us(sum(cp.us_per_step.values())), pct(1.0), *(us(s.dur_us) for s in shown), style="bold")
    console.print(t)


def gain_text(f: Finding) -> str:
    """A finding's gain cell: its headline gain (without the profiler, where the step was re-timed),
    its MFU after, and the gain re-timed on the trace as recorded, the second figure."""
    after = f.est_mfu_after
    text = us(f.est_gain_us_per_step) + (f"\n→ MFU {pct(after)}" if after is not None else "")
    w = f.evidence.whatif
    if not isinstance(w, UnsetType):
        text += f"\ntraced {us(w.profiled_gain_us_per_step)}"
    return text


def print_whatif(console: Console, w: WorkerReport) -> None:
    """The step re-timed with each re-timed finding's fix, and with all of them at once."""
    wi = w.whatif
    if wi is None or not wi.findings or wi.combined is None:
        return
    t = Table(
        title="What-if: the step re-timed with the fixes applied, without the profiler (the findings' gains, "
        "the headline MFU's step) and on the trace as recorded",
        title_justify="left",
    )
    for col in (
        "fix",
        label("whatif.unprofiled_step_us"),
        label("whatif.unprofiled_gain_us_per_step"),
        label("whatif.mfu"),
        label("whatif.step_us"),
        label("whatif.gain_us_per_step"),
        label("whatif.floor_us"),
    ):
        t.add_column(col, justify="left" if col == "fix" else "right")
    t.add_row("(as recorded)", us(wi.unprofiled_step_us), "", pct(wi.mfu), us(wi.step_us), "", "", style="dim")
    for k, f in enumerate(wi.findings):
        case = _case(wi, 1 << k)
        if case is not None:
            name = f.id + (f" · {f.subject}" if f.subject else "")
            t.add_row(cut(name, FIX_WIDTH), *_cells(case))
    together = f"all {wi.findings_retimed} re-timed findings together" if wi.findings_retimed > 1 else "the one above"
    t.add_row(together, *_cells(wi.combined), style="bold")
    console.print(t)


def _case(wi: WhatIf, mask: int) -> WhatIfCase | None:
    return next((c for c in wi.cases if c.mask == mask), None)


def _cells(c: WhatIfCase) -> tuple[str, ...]:
    # None only in reports written before every case had its re-timing without the profiler
    unprofiled = "" if c.unprofiled_step_us is None else us(c.unprofiled_step_us)
    gain = c.unprofiled_gain_us_per_step
    share = "" if c.unprofiled_gain_share is None else f" ({pct(c.unprofiled_gain_share)})"
    un_gain = "" if gain is None else us(gain) + share
    traced = f"{us(c.gain_us_per_step)} ({pct(c.gain_share)})"
    return unprofiled, un_gain, pct(c.mfu), us(c.step_us), traced, us(c.floor_us)
