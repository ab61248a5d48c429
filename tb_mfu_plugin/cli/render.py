"""What ``tb-mfu`` prints on a terminal: a report, and two runs compared, as rich tables.

Rendering only: ``cli`` runs the analysis and decides what to print. Every string
shown comes from a report made safe by ``escape.for_rich`` (names from traces and
file names are text, never markup), so no table or title can be restyled by a name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from ..analysis import fmt
from ..analysis.definitions import AGGREGATION, label
from ..analysis.flops.detail import FlopsDetail
from ..analysis.fmt import core_unit, count, figure, flop_rate, flops, gbps, mfu_text, nbytes, pct, us
from ..analysis.report import Device, JobMfu, Report, Summary, WorkerReport
from ..analysis.run.compare import AgainstBaseline, Comparison
from ..analysis.run.findings_compare import FindingChange
from ..core.escape import for_rich, markup_escape
from .console import console as stdout_console
from .console import cut
from .render_compare import figure_rows, print_kernels
from .render_critical import gain_text, print_critical_path, print_whatif
from .render_dist import print_communication, print_rank_job, print_ranks, print_waited
from .render_evidence import print_evidence
from .render_memory import print_memory

if TYPE_CHECKING:
    from ..running.pipeline import PathProgressFn


def _table(title: str, columns: tuple[str, ...]) -> Table:
    """A left-titled table of right-justified columns, the shape of most tables here."""
    t = Table(title=title, title_justify="left")
    for col in columns:
        t.add_column(col, justify="right")
    return t


@contextmanager
def progress_bar() -> Iterator[PathProgressFn]:
    """A transient bar of decoded bytes on stderr, fed by ``pipeline.analyze_path``'s progress."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=Console(stderr=True),
    )
    with bar:
        task = bar.add_task("Analysing", total=1)

        def show(run: str, worker: str, done: int, total: int) -> None:
            bar.update(task, description=markup_escape(cut(f"{run} · {worker}", 40, True)), completed=done, total=total)

        yield show


def print_report(report: Report, top: int, evidence: bool = False) -> None:
    """Every worker of every run, then each distributed run's ranks side by side; ``evidence``: each
    finding's evidence too."""
    console = stdout_console()
    report = for_rich(report)  # names from traces and file names are text, never markup
    for run in report.runs:
        job = run.ranks.job if run.ranks is not None else None
        waited = {(r.worker, r.span): r.waited_note for r in run.ranks.ranks} if run.ranks is not None else {}
        for w in run.workers:
            _print_worker(console, run.name, w, top, evidence, job, waited.get((w.name, w.span)))
        print_ranks(console, run)


def _print_worker(
    console: Console,
    run_name: str,
    w: WorkerReport,
    top: int,
    evidence: bool = False,
    job: JobMfu | None = None,
    waited: str | None = None,
) -> None:
    """One worker's tables; ``job`` and ``waited``: its run's one MFU, and why this rank's findings'
    gains are of its own step (RankRow.waited_note), where it is a rank of a distributed run."""
    title = f"[bold]{run_name}[/] · worker {w.name}" + (f" · span {w.span}" if w.span else "")
    if w.error:  # its one-line error, naming the file and the reason, is on stderr (cli.main)
        console.print(f"{title}\n  [red]not analysed[/]: the reason is on stderr\n", highlight=False)
        return
    s, dev = w.summary, w.device
    assert s is not None and dev is not None
    console.rule(title)
    _print_device_and_steps(console, dev, s)
    t = _table(
        f"Where the step goes ({AGGREGATION}: {fmt.counted(s.steps, 'step')})",
        tuple(label(k) for k in _SUMMARY_ROW),
    )
    t.add_row(*(mfu_text(w) if k == "mfu" else figure(k, getattr(s, k)) for k in _SUMMARY_ROW))
    console.print(t)
    _print_flops(console, w, job)
    _print_copies_and_syncs(console, w)
    _print_launches(console, w)
    print_communication(console, w)
    print_memory(console, w)
    _print_top_kernels(console, w, top)
    _print_roofline(console, w, top)
    print_critical_path(console, w)
    print_waited(console, waited)
    _print_diagnosis(console, w)
    if evidence:
        print_evidence(console, w)
    print_whatif(console, w)
    for n in w.notes:
        console.print(f"[dim]note:[/] {n}", highlight=False)
    console.print()


# The summary figures of the "where the step goes" table, by report key (analysis.definitions).
_SUMMARY_ROW = (
    "mfu",
    "gpu_busy_share",
    "kernel_time_share",
    "sm_efficiency",
    "achieved_occupancy",
    "tensor_core_kernel_share",
    "memcpy_time_share",
    "idle_share",
    "gpu_idle_after_sync_share",
    "host_sync_blocked_share",
)


def _print_device_and_steps(console: Console, dev: Device, s: Summary) -> None:
    peak = f"{flop_rate(dev.peak_flops)} {dev.dtype or ''} ({dev.peak_source})" if dev.peak_flops else "unknown"
    console.print(
        f"device {dev.index}: {dev.name or 'unknown GPU'}"
        + (f", {dev.num_sms} SMs, sm_{(dev.compute_capability or '').replace('.', '')}" if dev.num_sms else "")
        + f" · peak {peak}",
        highlight=False,
    )
    spread = s.distribution.get("step_time_us")
    basis = s.basis.description if s.basis is not None else fmt.counted(s.steps, "step")
    console.print(
        f"{basis}; {label('step_time_us').lower()} {us(s.step_time_us)}"
        + (f" (median {us(s.step_time_median_us)}, min {us(spread.min)}, max {us(spread.max)})" if spread else ""),
        highlight=False,
    )
    for left in s.basis.left_out if s.basis is not None else []:
        console.print(f"[dim]  left out: step {left.step if left.step is not None else '?'}: {left.reason}[/]")


def _print_copies_and_syncs(console: Console, w: WorkerReport) -> None:
    if w.copies:
        t = _table("Copies per step", ("direction", "host memory", "count", "bytes", "time", "bandwidth", "< 64 kB"))
        for c in w.copies:
            t.add_row(
                c.direction,
                c.memory,
                count(c.count_per_step, 1),
                nbytes(c.bytes_per_step),
                us(c.time_us_per_step),
                gbps(c.gbps),
                count(c.small_count_per_step, 1),
            )
        console.print(t)
    if w.syncs:
        t = _table("Host-device syncs per step", ("API", "issued by", "inside", "count", "blocked"))
        for y in w.syncs:
            t.add_row(
                y.api,
                y.root_op or "(no op: direct call)",
                y.op or "",
                count(y.count_per_step, 1),
                us(y.blocked_us_per_step),
            )
        console.print(t)


def _print_launches(console: Console, w: WorkerReport) -> None:
    ln = w.launches
    if not ln:
        return
    console.print(
        f"launches: {count(ln.kernels_per_step, 0)} kernels/step, median kernel {us(ln.median_kernel_us)}, "
        f"{pct(ln.short_kernel_share)} under {us(10)}, launch API {us(ln.launch_api_us_per_step)}/step; "
        f"GPU idle gaps {count(ln.idle_gaps.count_per_step, 0)}/step totalling {us(ln.idle_gaps.total_us_per_step)}",
        highlight=False,
    )
    if ln.graph_launches_per_step:
        console.print(
            f"CUDA graph replays: {count(ln.graph_launches_per_step)}/step running "
            f"{count(ln.graph_kernels_per_step, 0)} kernels (median {us(ln.graph_median_kernel_us)}), graph launch API "
            f"{us(ln.graph_launch_api_us_per_step)}/step; the host "
            f"launched {count(ln.kernels_launched_one_by_one_per_step, 0)} kernels/step one by one",
            highlight=False,
        )


def _print_top_kernels(console: Console, w: WorkerReport, top: int) -> None:
    if not w.top_kernels:
        return
    t = Table(title=f"Top {min(top, len(w.top_kernels))} kernels", title_justify="left")
    for col, just in (
        ("kernel", "left"),
        ("count", "right"),
        ("total", "right"),
        ("share", "right"),
        ("blocks/SM", "right"),
        ("SM eff.", "right"),
        ("occupancy", "right"),
        ("unit", "center"),
    ):
        if col == "kernel":
            t.add_column(col, overflow="ellipsis", no_wrap=True, max_width=48)
        else:
            t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for k in w.top_kernels[:top]:
        t.add_row(
            k.name,
            str(k.count),
            us(k.total_us),
            pct(k.share),
            count(k.mean_blocks_per_sm, 2),
            pct(k.sm_efficiency),
            pct(k.achieved_occupancy),
            core_unit(k),
        )
    console.print(t)


def _print_roofline(console: Console, w: WorkerReport, top: int) -> None:
    """The ops that lose the most time below their roof (docs/roofline.md)."""
    r = w.roofline
    if r is None or not r.ops or not r.peak_flops or not r.peak_bandwidth:
        return
    ops = sorted(r.ops, key=lambda o: -(o.lost_us_per_step or 0.0))[:top]
    t = Table(
        title=f"Roofline: ops by time lost below their roof (peak {flop_rate(r.peak_flops)}, HBM "
        f"{gbps(r.peak_bandwidth / 1e9)}; {pct(r.coverage)} of GPU time placed; ↑ above roof: cached)",
        title_justify="left",
    )
    t.add_column("op", overflow="ellipsis", no_wrap=True, min_width=14, max_width=40)
    for col in ("bound", "time/step", "achieved", "of roof", "lost/step"):
        t.add_column(col, no_wrap=True, justify="left" if col == "bound" else "right")
    for o in ops:
        got = (
            flop_rate(o.achieved_flops)
            if o.bound == "compute"
            else gbps(o.achieved_bandwidth / 1e9 if o.achieved_bandwidth is not None else None)
        )
        share = pct(o.roof_share) + (" ↑" if o.above_roof else "")
        t.add_row(f"{o.name} {o.shapes}", o.bound or "n/a", us(o.us_per_step), got, share, us(o.lost_us_per_step))
    console.print(t)


def _print_flops(console: Console, w: WorkerReport, job: JobMfu | None = None) -> None:
    s, f = w.summary, w.flops
    assert s is not None
    line = f"{label('flops_per_step')}: {flops(s.flops_per_step)}"
    if f is not None and f.headline_source:
        line += f" from {f.headline_source}"
    if f is not None and f.achieved_tflops_while_busy is not None:
        busy = figure("flops.achieved_tflops_while_busy", f.achieved_tflops_while_busy)
        line += f"; achieved {busy} while the GPU is busy in the traced steps"
    console.print(line, highlight=False)
    if f is not None and f.impossible:
        console.print(
            f"  [bold red]MFU impossible[/] (above 100 %), not shown as a figure; likely cause: "
            f"{f.impossible.explanation}",
            highlight=False,
        )
    console.print(
        f"  matmul kernels: tensor-core {pct(s.tensor_core_kernel_share)} of kernel time, CUDA-core "
        f"{pct(s.cuda_core_matmul_kernel_share)}, unknown unit {pct(s.unknown_core_kernel_share)}; dtype "
        f"{(f and f.kernel_dtype) or 'unknown'} by kernel names, peak dtype "
        f"{(f and f.peak.dtype) or 'n/a'} ({_peak_dtype_from(f.peak.dtype_source if f else None)})",
        highlight=False,
    )
    for e in _other_utilisations(f):
        console.print(f"  {e}", highlight=False)
    if s.mfu is not None and s.mfu_status is not None:
        basis = s.mfu_status.basis
        console.print(
            (
                f"  [dim]MFU is over the step without the profiler's host cost ({us(s.step_time_unprofiled_us)}, "
                f"estimated{_likely(s)}); over the traced steps it is {pct(s.mfu_traced)}.[/]"
                if basis == "without_profiler"
                else "  [dim]MFU is over the traced steps, which the profiler slows when they are host-bound: a "
                "lower bound; the TFLOP/s while busy is the matching upper view.[/]"
            ),
            highlight=False,
        )
    print_rank_job(console, w, job)


def _likely(s: Summary) -> str:
    """Where the estimated step and the headline MFU likely lie, as the profiler's cost varies
    (Summary.step_time_unprofiled_range_us, mfu_range): ", likely 12.63 ms–16.29 ms: MFU 28.6 %–36.9 %",
    or where both ends of the step read the same, that the profiler's cost hardly moves it."""
    t, m = s.step_time_unprofiled_range_us, s.mfu_range
    if t is None:
        return ""
    if us(t.low) == us(t.high):
        return ", which the profiler's cost hardly moves"
    mfu = f": MFU {_span(pct(m.low), pct(m.high))}" if m is not None else ""
    return f", likely {us(t.low)}–{us(t.high)}{mfu}"


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low}–{high}"


def _peak_dtype_from(source: str | None) -> str:
    """Where the peak's dtype came from: the compute dtype it was chosen for (by shapes or kernel
    names; an fp16 run's peak is bf16's, the 16-bit one), the option, or assumed."""
    if source in ("shapes", "kernel names"):
        return f"chosen for the compute dtype, from {source}"
    return "assumed: PaLM's convention" if source == "assumed" else f"from the {source or 'n/a'}"


def _other_utilisations(f: FlopsDetail | None) -> list[str]:
    """HFU and the MFUs of the other FLOP counts where they differ, and what the count missed."""
    if f is None:
        return []
    extra = []
    if f.mfu_model is not None and f.hfu is not None and abs(f.mfu_model - f.hfu) > 1e-4:
        extra.append(
            f"{label('flops.mfu_model')} {pct(f.mfu_model)} ({label('flops.model_flops_per_step')} "
            f"{flops(f.model_flops_per_step)}), {label('flops.hfu')} {pct(f.hfu)} "
            f"({label('flops.executed_flops_per_step')} {flops(f.executed_flops_per_step)})"
        )
    for key in ("flops.mfu_at_compute_peak", "flops.mfu_at_bf16_peak"):
        v = getattr(f, key.removeprefix("flops."))
        if isinstance(v, float):
            peak = f.compute_peak.peak_flops if key.endswith("compute_peak") and f.compute_peak else None
            extra.append(f"{label(key)} {pct(v)}" + (f" (peak {flop_rate(peak)})" if peak else ""))
    if f.mfu_user is not None:
        extra.append(f"MFU from your model FLOPs ({f.user_flops_source}) {pct(f.mfu_user)}")
    if f.unattributed_kernel_share:
        extra.append(f"{pct(f.unattributed_kernel_share)} of kernel time is in ops with no FLOP formula")
    return extra


_SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "dim"}


def _print_diagnosis(console: Console, w: WorkerReport) -> None:
    s = w.summary
    if w.waterfall and s is not None:
        # the waterfall takes the traced step apart, so its title names the MFU it ends at (as the tab's
        # card says), not the headline over the step without the profiler
        traced = s.mfu_status is not None and s.mfu_status.basis == "without_profiler" and s.mfu_traced is not None
        what = f"MFU of the traced steps {pct(s.mfu_traced)}" if traced else f"MFU {mfu_text(w)}"
        t = Table(
            title=f"GPU busy {pct(s.gpu_busy_share)} but {what}: where the traced step goes", title_justify="left"
        )
        t.add_column("")
        t.add_column("per step", justify="right")
        t.add_column("share", justify="right")
        for row in w.waterfall:
            style = "bold" if row.kind in ("total", "subtotal", "result") else None
            prefix = "  − " if row.kind == "loss" else ""
            t.add_row(prefix + row.label, us(row.us_per_step), pct(row.share), style=style)
        console.print(t)
    if w.findings:
        t = Table(
            title="Findings, by estimated gain (each alone, the step re-timed with its fix and without the profiler, "
            "the gain on the traced step under it; the gains do not add up)",
            title_justify="left",
            show_lines=True,
            caption=_combined_caption(w),
            caption_justify="left",
        )
        t.add_column("severity")
        t.add_column("finding", ratio=3)
        t.add_column("est. gain/step", justify="right")
        t.add_column("fix", ratio=4)
        for f in w.findings:
            t.add_row(
                f"[{_SEVERITY_STYLE[f.severity]}]{f.severity}[/]",
                f"[bold]{f.id}[/]\n{f.title}",
                gain_text(f),
                f.recommendation,
            )
        console.print(t)


def _combined_caption(w: WorkerReport) -> str | None:
    """The gain of fixing every finding at once (``combined_gain_us_per_step``), under the table."""
    if w.combined_gain_us_per_step is None or len(w.findings) < 2:
        return None
    how = (
        "one re-timing of every fix"
        if w.whatif is not None and w.whatif.combined is not None
        else "each time counted once"
    )
    return (
        f"All {len(w.findings)} findings together: {us(w.combined_gain_us_per_step)} per step "
        f"({pct(w.combined_gain_share)} of the step), {how}"
    )


_CHANGE_STYLE = {"fixed": "green", "new": "red", "remains": "dim"}


def print_comparison(c: Comparison) -> None:
    """Each run after the baseline against it, rank by rank: the figures side by side with their
    change, then the findings fixed, new or remaining.

    ``c`` comes from reports already made safe by ``escape.for_rich``: the findings were
    matched on those same strings.
    """
    console = stdout_console()
    each = c.against_baseline or [AgainstBaseline(matched_by=c.matched_by, ranks=c.ranks)]
    for against in each:
        other = next((p.other.run for p in against.ranks if p.other is not None), None)
        base = next((p.baseline.run for p in against.ranks if p.baseline is not None), None)
        # with three runs or more, each table says which run it puts beside the baseline
        whose = f": {other} against the baseline {base}" if len(each) > 1 and other and base else ""
        _print_against(console, against, whose, c.rows.shown)
    if c.rows.why:
        console.print(f"[dim]No memory rows: {c.rows.why}.[/]")


def _print_against(console: Console, c: AgainstBaseline, whose: str, shown: list[str]) -> None:
    how = "the same rank of each run" if c.matched_by == "rank" else "the workers of each run in order"
    for pair in c.ranks:
        a, b = pair.baseline, pair.other
        who = f"rank {pair.rank}" if pair.rank is not None else f"worker {pair.position + 1} of {len(c.ranks)}"
        title = f"Compare {who} ({how}){whose}"
        if pair.rank is None and len(c.ranks) == 1:
            who, title = "the runs", f"Compare (the one worker of each run){whose}"
        t = Table(title=title, title_justify="left")
        for col in ("", "baseline", "other", "change"):
            t.add_column(col, justify="right" if col else "left")
        t.add_row("worker", *(f"{x.run} · {x.worker}" if x else "(no such rank)" for x in (a, b)), "")
        t.add_row("file", *(os.path.basename(x.file) if x else "" for x in (a, b)), "")
        # the figures and their changes as analysis.run.compare computed them (the tab's rows)
        for row in figure_rows(pair.figures, a, b, shown):
            t.add_row(*row)
        console.print(t)
        if a is not None and b is not None:
            _print_changes(console, who + whose.replace(": ", ", ", 1), pair.findings)
            print_kernels(console, who + whose.replace(": ", ", ", 1), pair.kernels)


def _print_changes(console: Console, who: str, changes: list[FindingChange]) -> None:
    t = Table(title=f"Findings of {who}", title_justify="left")
    for col in ("status", "finding", "gain before", "gain after"):
        t.add_column(col)
    for c in changes:
        name = c.id + (f" · {c.subject}" if c.subject else "")
        t.add_row(
            f"[{_CHANGE_STYLE[c.status]}]{c.status}[/]", name, us(c.baseline_gain_us_per_step), us(c.gain_us_per_step)
        )
    console.print(t)
