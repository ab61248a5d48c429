"""A distributed run as a whole: its strategy, its ranks' clocks aligned, the collectives'
bandwidth free of waiting, and the findings that need every rank (``low_bus_bandwidth``).

Each file is analysed alone (and cached alone by the tab), so what needs several ranks is done
here, over their reports, each time a run is put together. The reports given are never changed:
the ranks that gain figures or findings are new copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import msgspec

from ..analysis.distributed import collectives as co
from ..analysis.distributed.blocks import Collective, Communication
from ..analysis.distributed.clock_skew import Alignment, Arrivals, Transfer, align, arrivals
from ..analysis.distributed.strategy import run_strategy
from ..analysis.fmt import us
from ..analysis.report import WorkerReport
from ..analysis.timeline.repin import repinned
from .context import Context
from .finding import SEVERITIES, Finding
from .ranks import RankClock, RankSummary, compare_ranks
from .rules.collective_bandwidth import low_bus_bandwidth
from .thresholds import DEFAULT, Thresholds


@dataclass(frozen=True)
class RunView:
    workers: list[WorkerReport]
    ranks: RankSummary | None
    strategy: list[str]


def _rank_key(w: WorkerReport) -> tuple[bool, int, str, str]:
    rank = w.distributed.rank if w.distributed is not None else None
    return (rank is None, rank if rank is not None else 0, w.name, w.span)


def analyze_ranks(workers: list[WorkerReport], th: Thresholds = DEFAULT) -> RunView:
    """The run-level view of ``workers`` (a run's reports, in the run's order)."""
    comm = [i for i, w in enumerate(workers) if w.error is None and w.communication is not None]
    strategy = run_strategy([cast(Communication, workers[i].communication).strategy for i in comm])
    if len(comm) < 2:
        return RunView(workers, compare_ranks(workers), strategy)
    order = sorted(comm, key=lambda i: _rank_key(workers[i]))
    points = [cast(Communication, workers[i].communication).sync_points for i in order]
    al = align(points)
    arr = arrivals(points, al.shift_us)
    out = list(workers)
    clocks: list[RankClock | None] = [None] * len(workers)
    for j, i in enumerate(order):
        out[i] = _with_arrivals(workers[i], arr.transfers[j], th)
        summary = workers[i].summary
        steps = summary.steps if summary is not None else 0
        clocks[i] = RankClock(
            shift_us=al.shift_us[j],
            wait_us_per_step=arr.wait_us[j] / steps if steps and arr.complete[j] else None,
        )
    ranks = compare_ranks(out, clocks)
    if ranks is not None:
        ranks.clock_reference = workers[order[0]].name
        ranks.clock_residual_us = al.residual_us
        ranks.clock_note = _clock_note(al, arr, [workers[i].name for i in order])
    return RunView(out, ranks, strategy)


def _clock_note(al: Alignment, arr: Arrivals, names: list[str]) -> str:
    known = [(n, s) for n, s in zip(names, al.shift_us, strict=True) if s is not None]
    if len(known) < 2:
        return "Clocks not aligned: no collective call matched across ranks (traces without collective args)."
    worst = max(known, key=lambda x: abs(x[1]))
    lost = [n for n, s in zip(names, al.shift_us, strict=True) if s is None]
    text = (
        f"Clocks aligned on the ends of {max(al.matched)} collective calls shared with {names[0]}: "
        f"shifts up to {us(abs(worst[1]))} ({worst[0]})"
    )
    if al.residual_us is not None:
        text += f", aligned ends within {us(al.residual_us)} (median)"
    if lost:
        text += f"; not aligned (no call shared): {', '.join(lost)}"
    return text + "."


def _with_arrivals(
    w: WorkerReport, transfers: dict[tuple[str, str, str | None], Transfer], th: Thresholds
) -> WorkerReport:
    """``w`` with its collectives' bandwidth measured from the last member's arrival, where every
    member's trace was analysed, and ``low_bus_bandwidth`` run on those figures."""
    comm = cast(Communication, w.communication)
    colls = [_arrival_bandwidth(c, transfers.get((c.kind, c.group_id or "", c.dtype))) for c in comm.collectives]
    out = msgspec.structs.replace(w, communication=msgspec.structs.replace(comm, collectives=colls))
    if out.summary is None:
        return out
    ctx = _ReportContext(out, th)
    found = low_bus_bandwidth(cast(Context, ctx))
    kept = [f for f in w.findings if f.id != low_bus_bandwidth.id]
    findings = sorted(kept + found, key=_finding_order)
    combined = _combined_with(out, kept, found, ctx.step_us)
    share = combined / ctx.step_us if combined is not None and ctx.step_us > 0 else None
    return msgspec.structs.replace(
        out,
        findings=findings,
        combined_gain_us_per_step=combined,
        combined_gain_share=share,
        timeline=repinned(out.timeline, findings, {low_bus_bandwidth.id: "communication"}),
    )


def _combined_with(w: WorkerReport, kept: list[Finding], found: list[Finding], step_us: float) -> float | None:
    """The combined gain once ``found`` (low_bus_bandwidth, from the ranks' reports alone, with no
    trace to say when) joins the engine's findings ``kept``. Its time is the exposed time of its
    collective, which lies inside exposed_communication's where that fired (adding nothing), and
    apart from every other finding's (no compute, copy or idle runs then)."""
    base = w.combined_gain_us_per_step
    if not found or base is None or len(kept) != len(w.findings):
        return base  # (kept short: the engine's combined gain already held earlier low_bus_bandwidth findings)
    extra = sum(f.est_gain_us_per_step for f in found)
    if any(f.id == "exposed_communication" for f in kept):
        extra = 0.0
    elif w.communication is not None:
        extra = min(extra, w.communication.exposed_us_per_step)
    largest = max(f.est_gain_us_per_step for f in [*kept, *found])
    return max(min(base + extra, step_us), largest)


def _arrival_bandwidth(c: Collective, t: Transfer | None) -> Collective:
    if t is None or t.bytes_us <= 0 or t.kernel_us <= 0:
        return c
    algbw = t.bytes / t.bytes_us / 1e3
    factor = co.bus_factor(c.kind, c.group_size)
    busbw = algbw * factor if factor is not None else None
    return msgspec.structs.replace(
        c,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        link_peak_share=busbw / c.link_gbps if busbw is not None and c.link_gbps else None,
        bandwidth_basis="last arrival",
        # the matched calls are a sample when a step has more than the sync points keep
        transfer_us_per_step=c.us_per_step * t.transfer_us / t.kernel_us,
        wait_share=max(0.0, 1.0 - t.transfer_us / t.kernel_us),
    )


def _finding_order(f: Finding) -> tuple[float, int, str, str]:
    """The engine's order: largest gain first, then severity, id and subject."""
    return (-f.est_gain_us_per_step, SEVERITIES.index(f.severity), f.id, f.subject or "")


class _ReportContext:
    """What a rule that reads only the report needs of a ``Context``: the report, the mean
    step, MFU and the thresholds (``low_bus_bandwidth`` reads nothing else)."""

    def __init__(self, report: WorkerReport, th: Thresholds) -> None:
        s = report.summary
        assert s is not None
        self.report = report
        self.th = th
        self.step_us = s.step_time_mean_us or s.step_time_us
        self.mfu = s.mfu
