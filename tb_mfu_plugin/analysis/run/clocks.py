"""A distributed run's ranks on one clock: each rank's clock aligned on the collectives they share
(``distributed.clock_skew``), the time each waits inside collectives for a later member, and each
collective's bandwidth measured from the last member's arrival, free of that wait.

Each file is analysed alone (and cached alone by the tab), so what needs several ranks is done
here, over their reports, each time a run is put together. The reports given are never changed:
the ranks whose collectives gain figures are new copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from ..distributed import collectives as co
from ..distributed.blocks import Collective, Communication
from ..distributed.clock_skew import Alignment, Arrivals, Transfer, align, arrivals
from ..fmt import us
from ..report import WorkerReport
from .ranks import RankClock


@dataclass(frozen=True)
class RankAlignment:
    """The run's workers (those with collectives as copies with arrival bandwidths), each one's clock
    (None where it has no collectives), the reference worker and how well the clocks align."""

    workers: list[WorkerReport]
    clocks: list[RankClock | None]
    reference: str | None = None
    residual_us: float | None = None
    note: str | None = None


def _rank_key(w: WorkerReport) -> tuple[bool, int, str, str]:
    rank = w.distributed.rank if w.distributed is not None else None
    return (rank is None, rank if rank is not None else 0, w.name, w.span)


def _communication(w: WorkerReport) -> Communication:
    assert w.communication is not None  # only workers with collectives are aligned
    return w.communication


def align_ranks(workers: list[WorkerReport]) -> RankAlignment:
    """The ranks of ``workers`` (a run's reports, in the run's order) on one clock; nothing aligned
    unless two of them ran collectives."""
    comm = [i for i, w in enumerate(workers) if w.error is None and w.communication is not None]
    if len(comm) < 2:
        return RankAlignment(list(workers), [None] * len(workers))
    order = sorted(comm, key=lambda i: _rank_key(workers[i]))
    points = [_communication(workers[i]).sync_points for i in order]
    al = align(points)
    arr = arrivals(points, al.shift_us)
    out = list(workers)
    clocks: list[RankClock | None] = [None] * len(workers)
    for j, i in enumerate(order):
        out[i] = _with_arrivals(workers[i], arr.transfers[j])
        summary = workers[i].summary
        steps = summary.steps if summary is not None else 0
        clocks[i] = RankClock(
            shift_us=al.shift_us[j],
            wait_us_per_step=arr.wait_us[j] / steps if steps and arr.complete[j] else None,
        )
    names = [workers[i].name for i in order]
    return RankAlignment(out, clocks, names[0], al.residual_us, _clock_note(al, arr, names))


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


def _with_arrivals(w: WorkerReport, transfers: dict[tuple[str, str, str | None], Transfer]) -> WorkerReport:
    """``w`` with its collectives' bandwidth measured from the last member's arrival, where every
    member's trace was analysed."""
    comm = _communication(w)
    colls = [_arrival_bandwidth(c, transfers.get((c.kind, c.group_id or "", c.dtype))) for c in comm.collectives]
    return msgspec.structs.replace(w, communication=msgspec.structs.replace(comm, collectives=colls))


def _arrival_bandwidth(c: Collective, t: Transfer | None) -> Collective:
    if t is None or t.bytes_us <= 0 or t.kernel_us <= 0:
        return c
    algbw, busbw, link_share = co.bandwidths(c.kind, c.group_size, t.bytes, t.bytes_us, c.link_gbps)
    return msgspec.structs.replace(
        c,
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        link_peak_share=link_share,
        bandwidth_basis="last arrival",
        # the matched calls are a sample when a step has more than the sync points keep
        transfer_us_per_step=c.us_per_step * t.transfer_us / t.kernel_us,
        wait_share=max(0.0, 1.0 - t.transfer_us / t.kernel_us),
    )
