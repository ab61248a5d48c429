"""What ``tb-mfu`` prints about distributed runs: a rank's communication, the ranks side by
side, and runs under different strategies side by side (docs/distributed.md).

Rendering only, from reports already made safe by ``escape.for_rich``.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analysis.definitions import label
from ..analysis.fmt import count, gbps, nbytes, pct, us
from ..analysis.report import JobMfu, RunReport, WorkerReport
from ..analysis.run.strategies import StrategyRow
from .console import console as stdout_console


def _table(title: str, columns: tuple[str, ...]) -> Table:
    t = Table(title=title, title_justify="left")
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if i == 0 else "right")
    return t


def strategy_text(names: list[str]) -> str:
    return " × ".join(names) if names else "single GPU"


def print_communication(console: Console, w: WorkerReport) -> None:
    """The rank's overlap, its collectives and its pipeline bubble."""
    c = w.communication
    if c is None:
        return
    console.print(
        f"[bold]Communication[/] ({strategy_text(c.strategy)}): {us(c.communication_us_per_step)} per step, "
        f"{us(c.overlapped_us_per_step)} overlapped with compute ({pct(c.overlap_ratio)}), "
        f"{us(c.exposed_us_per_step)} exposed. Link: {c.link or 'unknown'}"
        + (f" ({gbps(c.link_gbps)} each way)" if c.link_gbps else ""),
        highlight=False,
    )
    t = _table(
        "Collectives per step (busbw by the nccl-tests convention)",
        ("collective", "group", "role", "dtype", "calls", "bytes", "kernel time", "exposed", "busbw", "of link"),
    )
    for x in c.collectives:
        basis = "" if x.bandwidth_basis == "last arrival" else " ¹"
        t.add_row(
            x.kind,
            f"{x.group or '?'} ({x.group_size or '?'})",
            x.role or "",
            x.dtype or "",
            count(x.count_per_step, 1),
            nbytes(x.bytes_per_step),
            us(x.us_per_step),
            us(x.exposed_us_per_step),
            gbps(x.busbw_gbps) + basis,
            pct(x.link_peak_share),
        )
    if c.unlisted is not None:  # the rows add up to the total with it
        u = c.unlisted
        t.add_row("rest ²", "", "", "", "", "", us(u.us_per_step), us(u.exposed_us_per_step), "", "")
    console.print(t)
    if c.unlisted is not None:
        console.print(f"[dim]² {c.unlisted.reason}.[/]", highlight=False)
    if any(x.bandwidth_basis != "last arrival" and x.busbw_gbps is not None for x in c.collectives):
        console.print(
            "[dim]¹ from this rank's kernel time, which includes waiting for the other members: a lower bound "
            "(analyse every rank's trace together for the bandwidth from the last arrival).[/]",
            highlight=False,
        )
    p = w.pipeline
    if p is not None:
        analytic = f", analytic (p−1)/(v·m+p−1) {pct(p.analytic_bubble_share)}" if p.analytic_bubble_share else ""
        console.print(
            f"[bold]Pipeline[/]: stage {p.stage} of {p.pipeline_size or '?'}, {p.microbatches or '?'} micro-batches"
            f" ({p.schedule or 'schedule unknown'}); bubble {us(p.bubble_us_per_step)} per step, "
            f"{pct(p.bubble_share)} of the step{analytic}",
            highlight=False,
        )


def print_ranks(console: Console, run: RunReport) -> None:
    r = run.ranks
    if r is None:
        return
    t = _table(
        f"{run.name}: ranks side by side (world size {r.world_size}), {strategy_text(run.strategy)}",
        (
            "rank",
            "worker",
            label("step_time_us"),
            label("gpu_busy_share"),
            label("idle_share"),
            label("ranks.exposed_communication_us_per_step"),
            label("ranks.overlap_ratio"),
            label("ranks.collective_wait_us_per_step"),
            label("ranks.bubble_share"),
            "clock shift",
            label("mfu"),
        ),
    )
    for row in r.ranks:
        t.add_row(
            str(row.rank),
            row.worker,
            us(row.step_time_us),
            pct(row.gpu_busy_share),
            pct(row.idle_share),
            us(row.exposed_communication_us_per_step),
            pct(row.overlap_ratio),
            us(row.collective_wait_us_per_step),
            pct(row.bubble_share) if row.bubble_share is not None else "",
            us(row.clock_shift_us),
            pct(row.mfu),
        )
    console.print(t)
    if r.job is not None:
        console.print(job_line(r.job), highlight=False)
    if r.clock_note:
        console.print(f"[dim]{r.clock_note}[/]", highlight=False)
    if r.mfu_note:
        console.print(f"[dim]{r.mfu_note}[/]", highlight=False)
    if r.straggler is not None:
        console.print(f"[bold]straggler: {r.straggler.worker}[/] — {r.straggler.reason}", highlight=False)
    console.print()


def job_line(j: JobMfu) -> str:
    """The job's MFU, where it likely lies, and the step it is over."""
    likely = f" (likely {pct(j.mfu_range.low)}–{pct(j.mfu_range.high)})" if j.mfu_range is not None else ""
    return (
        f"[bold]{label('ranks.job.mfu')}: {pct(j.mfu)}[/]{likely} over {j.ranks} ranks · "
        f"{label('ranks.job.step_time_unprofiled_us').lower()} {us(j.step_time_unprofiled_us)}, {j.worker}'s "
        "estimate, the shortest of the ranks'"
    )


def print_rank_job(console: Console, w: WorkerReport, job: JobMfu | None) -> None:
    """Under a rank's MFU, its job's where the two read otherwise, and why (RankSummary.job)."""
    s = w.summary
    if job is None or s is None or pct(job.mfu) == pct(s.mfu):
        return
    why = (
        "the same step, over every rank's FLOPs, which differ by rank"
        if job.worker == w.name
        else "this rank's step without the profiler keeps the profiled lateness of the ranks it waited for"
        + (", and the ranks' FLOPs differ" if job.flops_differ else "")
    )
    console.print(
        f"  [bold]{label('ranks.job.mfu')}: {pct(job.mfu)}[/], over every rank (the ranks' table): {why}.",
        highlight=False,
    )


def print_waited(console: Console, waited: str | None) -> None:
    """Why a rank that waited for the others has gains of its own step (RankRow.waited_note)."""
    if waited:
        console.print(f"[bold]This rank waited for others.[/] {waited}", highlight=False)


def print_strategies(rows: list[StrategyRow]) -> None:
    """Runs side by side by strategy: per-rank MFU, the slowest rank's step, communication, bubble."""
    console = stdout_console()
    t = _table(
        "Strategies side by side (MFU per rank: lowest / mean / highest; the others: mean over ranks)",
        (
            "run",
            "strategy",
            "ranks",
            "step traced (slowest rank)",
            label("ranks.job.step_time_unprofiled_us"),
            label("strategies.job_mfu"),
            label("strategies.mfu_min"),
            label("ranks.exposed_communication_us_per_step"),
            label("ranks.overlap_ratio"),
            label("ranks.collective_wait_us_per_step"),
            label("ranks.bubble_share"),
            "busbw (largest)",
        ),
    )
    for r in rows:
        mfu = f"{pct(r.mfu_min)} / {pct(r.mfu_mean)} / {pct(r.mfu_max)}" if r.mfu_mean is not None else "n/a"
        exposed = us(r.exposed_communication_us_per_step)
        if r.exposed_communication_share is not None:
            exposed += f" ({pct(r.exposed_communication_share)})"
        t.add_row(
            r.run,
            strategy_text(r.strategy),
            str(r.ranks),
            us(r.step_time_us),
            us(r.job_step_time_unprofiled_us),
            pct(r.job_mfu),
            mfu,
            exposed,
            pct(r.overlap_ratio),
            us(r.collective_wait_us_per_step),
            pct(r.bubble_share) if r.bubble_share is not None else "",
            gbps(r.busbw_gbps),
        )
    console.print(t)
