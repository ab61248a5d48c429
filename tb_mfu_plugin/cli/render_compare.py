"""``tb-mfu compare``'s figures and kernels of one rank, as the tab's Compare shows them: the
changes ``analysis.run.compare`` computed once (``FigureDelta``, ``KernelDelta``), written here
and never recomputed.

The names come from reports made safe by ``escape.for_rich`` (``cli.main._compare``).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analysis.definitions import DEFINITIONS, label
from ..analysis.fmt import change, counts, figure, mfu_shown, sign, us
from ..analysis.run.compare import ComparedWorker, FigureDelta, KernelDelta

# the verdicts the tab colours (metrics.ts): better or worse past the noise; the rest is grey
_STYLE = {"better": "green", "worse": "red"}
KERNELS_SHOWN = 10


def _shown(d: FigureDelta, x: ComparedWorker | None, value: float | None, text: str) -> str:
    """One side's figure (``text``, its unit's): blank for a rank the run lacks; an MFU withheld as
    impossible (and the FLOP/s from it) reads "impossible", as in the tab."""
    if x is None:
        return ""
    if d.figure in ("mfu", "achieved_flops") and value is None and mfu_shown(x.summary) == "impossible":
        return "impossible"
    return text


def _texts(d: FigureDelta) -> list[str]:
    """The two sides' texts: counts of one row with one number of decimals ("986.0" beside "357.7")."""
    if DEFINITIONS[d.figure].unit == "count":
        return counts([d.baseline, d.value])
    return [figure(d.figure, d.baseline), figure(d.figure, d.value)]


def _styled(text: str, verdict: str) -> str:
    style = _STYLE.get(verdict, "dim")
    return f"[{style}]{text}[/]" if text else ""


def figure_rows(
    figures: list[FigureDelta], a: ComparedWorker | None, b: ComparedWorker | None, shown: list[str]
) -> list[tuple[str, str, str, str]]:
    """(label, baseline, other, change) of each figure of ``shown`` (``Comparison.rows``, the rows
    the tab shows for the same runs)."""
    rows = []
    for d in figures:
        if d.figure not in shown:
            continue
        x, y = _texts(d)
        rows.append(
            (
                label(d.figure),
                _shown(d, a, d.baseline, x),
                _shown(d, b, d.value, y),
                _styled(change(d.delta, d.delta_unit), d.verdict),
            )
        )
    return rows


def print_kernels(console: Console, who: str, kernels: list[KernelDelta]) -> None:
    """The top kernels of both runs that changed most, time per analysed step in each."""
    if not kernels:
        return
    t = Table(title=f"Kernels that changed most, {who}", title_justify="left")
    t.add_column("kernel", overflow="ellipsis", no_wrap=True, max_width=48)  # as the top kernels' table
    for col in ("baseline / step", "other / step", "Δ / step"):
        t.add_column(col, justify="right")
    for k in kernels[:KERNELS_SHOWN]:
        d = k.delta_us_per_step
        t.add_row(
            k.name,
            us(k.baseline_us_per_step) if k.baseline_us_per_step is not None else "not in top list",
            us(k.us_per_step) if k.us_per_step is not None else "not in top list",
            _styled(f"{sign(d)}{us(abs(d))}", k.verdict),
        )
    console.print(t)
