"""Runs compared rank by rank (``tb-mfu compare``): every analysed worker of the baseline
beside the worker of another run that holds the same rank, with the findings fixed, new or
remaining between the two, and each figure's and each top kernel's change; each run given after
the baseline is compared with it so.

The changes are computed here once for every face (``worker_deltas``): the CLI's ``compare``
prints a ``ComparedRank``'s, the plugin's ``/compare`` body carries ``deltas_against_baseline``
(every pair of a run's worker and the baseline's, as ``findings_against_baseline``), and the
tab's Compare only shows them. A figure's change is in percentage points for a share, relative
otherwise; it is judged better or worse only where the figure has a better direction
(``definitions.Better``: "busy is not fast") and the change is past the noise.

Workers are matched by their distributed rank when every worker of both runs has one (the
trace's ``distributedInfo``), else by their order in the run (discovery order, spans in time
order, as every face lists them). A rank found in one run only is listed with nothing beside it.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

from ..definitions import DEFINITIONS, Better
from ..memory.types import MemoryBrief
from ..report import Report, RunReport, Summary, WorkerReport
from .findings_compare import FindingChange, compare_findings, pairs_against_baseline, usable
from .strategies import StrategyRow

COMPARISON_SCHEMA = 2  # 1 compared the first worker of each run only

# The figures Compare shows, in its order (definitions keys): what says how fast a run is, then
# what explains it, then its memory (profile_memory=True traces).
COMPARED_FIGURES = (
    "mfu",
    "achieved_flops",
    "step_time_us",
    # the step MFU and achieved FLOP/s are over, so that a reader can derive them from the table
    "step_time_unprofiled_us",
    "gpu_busy_share",
    "kernel_time_share",
    "sm_efficiency",
    "achieved_occupancy",
    "tensor_core_kernel_share",
    "breakdown.memcpy",
    "idle_share",
    "gpu_idle_after_sync_share",
    "host_sync_blocked_share",
    "flops_per_step",
    "kernels_per_step",
    "launches.short_kernel_share",
    "launches.launch_api_us_per_step",
    "launches.graph_launches_per_step",
    "launches.graph_kernels_per_step",
    "sync_count_per_step",
    "h2d_bytes_per_step",
    "d2h_bytes_per_step",
    "memory.peak_allocated_bytes",
    "memory.peak_reserved_bytes",
    "memory.peak_share",
    "memory.growth_per_step_bytes",
    "memory.headroom.batch_factor",
    "memory.recompute.us_per_step",
    "memory.recompute.saved_bytes",
)
# A change smaller than these is noise, judged "same": 2 % of the baseline, or 0.5 percentage
# points of a share (run-to-run jitter of a step is about 1 %).
NOISE_RELATIVE = 0.02
NOISE_PP = 0.5

Verdict = Literal["better", "worse", "same", "none", "unknown"]
# Why every memory row is left out, where no worker compared has a memory figure
NO_MEMORY = "none of these traces was recorded with profile_memory=True"


class FigureDelta(msgspec.Struct, kw_only=True):
    """One figure of a worker against the same figure of the baseline's worker."""

    figure: str  # its definitions key (label, unit and better direction there)
    baseline: float | None
    value: float | None
    # value − baseline: in percentage points for a share ((value − baseline) × 100), else relative
    # ((value − baseline) / |baseline|); None when either is unknown, or the baseline is 0 (relative)
    delta: float | None
    delta_unit: Literal["pp", "relative"]
    # better / worse past the noise (NOISE_RELATIVE, NOISE_PP) for a figure with a better direction,
    # same within it; none for a figure without one; unknown when either value is
    verdict: Verdict


class KernelDelta(msgspec.Struct, kw_only=True):
    """One kernel of either worker's top kernels: its time per analysed step in each."""

    name: str
    baseline_us_per_step: float | None  # None: not among the baseline's top kernels
    us_per_step: float | None  # None: not among this worker's top kernels
    # us_per_step − baseline_us_per_step, a kernel missing from a top list counting 0 there (it ran
    # for less than the last kernel listed, or not at all)
    delta_us_per_step: float
    verdict: Verdict  # less time is better, past the noise; never unknown (missing counts as 0)


class CompareRows(msgspec.Struct, kw_only=True):
    """Which of ``COMPARED_FIGURES`` a Compare of some workers shows, decided once for every face:
    the memory figures exist for traces recorded with profile_memory=True, so a memory figure that
    no worker compared has is left out, rather than shown as a row of unknowns. While a run is
    still loading nothing is left out: its figures are not known yet."""

    shown: list[str]  # in COMPARED_FIGURES' order
    left_out: list[str]
    why: str | None = None  # where every memory row is left out, the one reason (NO_MEMORY)


class WorkerDeltas(msgspec.Struct, kw_only=True):
    """A worker of a run against a worker of the baseline run (indices into each run's
    ``workers``), or against itself (``baseline_run`` is ``run``: its own figures): every figure
    Compare shows, and the top kernels of both, the most changed first."""

    run: str
    worker: int
    baseline_run: str
    baseline_worker: int
    figures: list[FigureDelta]
    kernels: list[KernelDelta]


class ComparedWorker(msgspec.Struct, kw_only=True):
    run: str
    worker: str
    span: str
    file: str
    summary: Summary
    flags: list[str]  # the worker's (an MFU withheld as impossible is flagged)
    memory: MemoryBrief | None = None  # profile_memory=True traces only (analysis.memory)


class ComparedRank(msgspec.Struct, kw_only=True):
    """One rank: the baseline's worker and the other run's (None where the run has no such rank)."""

    rank: int | None  # None when matched by order
    position: int  # its place among the pairs, from 0
    baseline: ComparedWorker | None
    other: ComparedWorker | None
    findings: list[FindingChange]  # fixed, new or remaining; empty unless both sides are there
    # each of COMPARED_FIGURES (unknown on a side with no worker) and the top kernels' changes
    figures: list[FigureDelta] = []
    kernels: list[KernelDelta] = []


class AgainstBaseline(msgspec.Struct, kw_only=True):
    """One run given after the baseline, rank by rank against it."""

    matched_by: Literal["rank", "order"]
    ranks: list[ComparedRank]


class Comparison(msgspec.Struct, kw_only=True):
    """What ``tb-mfu compare --json`` prints: ``matched_by`` and ``ranks`` are the second run against
    the baseline; ``against_baseline`` holds every run after the baseline, that one first."""

    schema_version: int = COMPARISON_SCHEMA
    matched_by: Literal["rank", "order"]
    ranks: list[ComparedRank]
    strategies: list[StrategyRow] = []  # every run given, side by side by strategy
    against_baseline: list[AgainstBaseline] = []
    # the figures every rank's table shows, over every worker of every run given (``compare_rows``)
    rows: CompareRows


def analysed(report: Report) -> list[tuple[str, WorkerReport]]:
    """Each worker report with a summary, with its run's name, in the report's order."""
    return [(r.name, w) for r in report.runs for w in r.workers if w.error is None and w.summary is not None]


def _rank(w: WorkerReport) -> int | None:
    return w.distributed.rank if w.distributed is not None else None


def _compared(run: str, w: WorkerReport) -> ComparedWorker:
    assert w.summary is not None
    memory = w.memory.brief() if w.memory is not None else None
    return ComparedWorker(
        run=run, worker=w.name, span=w.span, file=w.file, summary=w.summary, flags=w.flags, memory=memory
    )


def compare_runs(baseline: Report, other: Report) -> Comparison:
    """Every rank of ``baseline`` against the same rank of ``other`` (see the module's doc)."""
    a, b = analysed(baseline), analysed(other)
    ranked = all(_rank(w) is not None for _, w in a + b) and len({_rank(w) for _, w in a}) == len(a)
    ranked = ranked and len({_rank(w) for _, w in b}) == len(b)
    if ranked:
        by_a, by_b = {_rank(w): (r, w) for r, w in a}, {_rank(w): (r, w) for r, w in b}
        keys: list[int | None] = sorted({*by_a, *by_b}, key=lambda k: k if k is not None else -1)
        pairs = [(k, by_a.get(k), by_b.get(k)) for k in keys]
    else:
        n = max(len(a), len(b))
        pairs = [(None, a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(n)]
    out = []
    for i, (rank, x, y) in enumerate(pairs):
        changes = compare_findings(x[1].findings, y[1].findings) if x is not None and y is not None else []
        figures, kernels = worker_deltas(x[1] if x is not None else None, y[1] if y is not None else None)
        out.append(
            ComparedRank(
                rank=rank,
                position=i,
                baseline=_compared(*x) if x is not None else None,
                other=_compared(*y) if y is not None else None,
                findings=changes,
                figures=figures,
                kernels=kernels,
            )
        )
    rows = compare_rows([w for _, w in a + b])
    return Comparison(matched_by="rank" if ranked else "order", ranks=out, rows=rows)


# -- the changes of two workers ------------------------------------------------------------------


def figure_value(w: WorkerReport | None, name: str) -> float | None:
    """The figure ``name`` (a definitions key) of a worker report: ``summary.<name>`` when the
    summary has its first part (``mfu``, ``breakdown.memcpy``), else the worker's block
    (``launches.short_kernel_share``, ``memory.headroom.batch_factor``); None where absent."""
    if w is None or w.summary is None:
        return None
    head, *rest = name.split(".")
    x: Any = w.summary if head in Summary.__struct_fields__ else w
    for key in (head, *rest):
        x = x.get(key) if isinstance(x, dict) else getattr(x, key, None)
        if x is None:
            return None
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else None


def verdict(better: Better, baseline: float | None, value: float | None, share: bool) -> Verdict:
    """How ``value`` reads against ``baseline`` for a figure whose better direction is ``better``."""
    if baseline is None or value is None:
        return "unknown"
    if better == "none":
        return "none"
    diff = value - baseline
    noise = abs(diff) * 100 < NOISE_PP if share else abs(diff) < NOISE_RELATIVE * abs(baseline)
    if noise:
        return "same"
    return "better" if (diff > 0) == (better == "higher") else "worse"


def figure_delta(name: str, baseline: float | None, value: float | None) -> FigureDelta:
    d = DEFINITIONS[name]
    share = d.unit == "share"
    delta = None
    if baseline is not None and value is not None:
        if share:
            delta = (value - baseline) * 100
        elif baseline != 0:
            delta = (value - baseline) / abs(baseline)
    return FigureDelta(
        figure=name,
        baseline=baseline,
        value=value,
        delta=delta,
        delta_unit="pp" if share else "relative",
        verdict=verdict(d.better, baseline, value, share),
    )


def _kernels_per_step(w: WorkerReport | None) -> dict[str, float]:
    if w is None or w.summary is None:
        return {}
    steps = max(1, w.summary.steps)  # top_kernels' totals are over the analysed steps
    return {k.name: k.total_us / steps for k in w.top_kernels}


def kernel_deltas(baseline: WorkerReport | None, other: WorkerReport | None) -> list[KernelDelta]:
    """The top kernels of both workers, time per analysed step in each, the most changed first."""
    a, b = _kernels_per_step(baseline), _kernels_per_step(other)
    out = []
    for name in {**a, **b}:
        x, y = a.get(name), b.get(name)
        diff = (y or 0.0) - (x or 0.0)
        out.append(
            KernelDelta(
                name=name,
                baseline_us_per_step=x,
                us_per_step=y,
                delta_us_per_step=diff,
                verdict=verdict("lower", x or 0.0, y or 0.0, share=False),
            )
        )
    out.sort(key=lambda k: (-abs(k.delta_us_per_step), k.name))
    return out


def worker_deltas(
    baseline: WorkerReport | None, other: WorkerReport | None
) -> tuple[list[FigureDelta], list[KernelDelta]]:
    """Every figure of ``COMPARED_FIGURES`` and every top kernel of ``other`` against ``baseline``
    (a missing worker: its figures unknown, its kernel list empty)."""
    figures = [figure_delta(n, figure_value(baseline, n), figure_value(other, n)) for n in COMPARED_FIGURES]
    return figures, kernel_deltas(baseline, other)


def compare_rows(workers: list[WorkerReport | None]) -> CompareRows:
    """The rows a Compare of ``workers`` shows (``CompareRows``); a None worker is a run still
    loading, and with none at all nothing is known to leave out."""
    memory = [n for n in COMPARED_FIGURES if n.startswith("memory.")]
    known = bool(workers) and all(w is not None for w in workers)
    left_out = [n for n in memory if known and all(figure_value(w, n) is None for w in workers)]
    return CompareRows(
        shown=[n for n in COMPARED_FIGURES if n not in left_out],
        left_out=left_out,
        why=NO_MEMORY if left_out and left_out == memory else None,
    )


def rows_of_runs(runs: list[RunReport | None]) -> CompareRows:
    """``compare_rows`` of every analysed worker of the runs picked (None: a run still loading)."""
    return compare_rows([w for r in runs for w in (r.workers if r is not None else [None]) if w is None or usable(w)])


def deltas_against_baseline(runs: list[RunReport | None]) -> list[WorkerDeltas]:
    """Every usable worker of every loaded run against itself (its own figures, which its column
    of the tab's table shows), then each pair of ``pairs_against_baseline`` (the deltas)."""
    own = [(r, i, w, r, i, w) for r in runs if r is not None for i, w in enumerate(r.workers) if usable(w)]
    base = runs[0] if runs else None
    pairs = [(r, i, w, base, j, b) for r, i, w, j, b in pairs_against_baseline(runs) if base is not None]
    out = []
    for run, i, w, against, j, b in own + pairs:
        figures, kernels = worker_deltas(b, w)
        out.append(
            WorkerDeltas(
                run=run.name,
                worker=i,
                baseline_run=against.name,
                baseline_worker=j,
                figures=figures,
                kernels=kernels,
            )
        )
    return out


def compare_all(baseline: Report, others: list[Report]) -> Comparison:
    """Every run of ``others`` against ``baseline``, rank by rank; the first one also as the
    comparison's own ``matched_by`` and ``ranks`` (what a comparison of two runs has)."""
    each = [compare_runs(baseline, other) for other in others]
    out = each[0]
    out.against_baseline = [AgainstBaseline(matched_by=c.matched_by, ranks=c.ranks) for c in each]
    out.rows = compare_rows([w for report in (baseline, *others) for _, w in analysed(report)])
    return out
