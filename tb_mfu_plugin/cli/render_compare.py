"""``tb-mfu compare``'s figures and kernels of one rank, as the tab's Compare shows them: the
changes ``analysis.run.compare`` computed once (``FigureDelta``, ``KernelDelta``), written here
and never recomputed.

The names come from reports made safe by ``escape.for_rich`` (``cli.main._compare``).
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analysis.definitions import label
from ..analysis.fmt import change, figure, mfu_shown, us
from ..analysis.run.compare import ComparedWorker, FigureDelta, KernelDelta

# the verdicts the tab colours (metrics.ts): better or worse past the noise; the rest is grey
_STYLE = {"better": "green", "worse": "red"}
KERNELS_SHOWN = 10


def _shown(d: FigureDelta, x: ComparedWorker | None, value: float | None) -> str:
    """One side's figure: blank for a rank the run lacks; an MFU withheld as impossible (and the
    FLOP/s from it) reads "impossible", as in the tab."""
    if x is None:
        return ""
    if d.figure in ("mfu", "achieved_flops") and value is None and mfu_shown(x.summary) == "impossible":
        return "impossible"
    return figure(d.figure, value)


def _styled(text: str, verdict: str) -> str:
    style = _STYLE.get(verdict, "dim")
    return f"[{style}]{text}[/]" if text else ""


def figure_rows(
    figures: list[FigureDelta], a: ComparedWorker | None, b: ComparedWorker | None
) -> list[tuple[str, str, str, str]]:
    """(label, baseline, other, change) of each figure Compare shows."""
    return [
        (
            label(d.figure),
            _shown(d, a, d.baseline),
            _shown(d, b, d.value),
            _styled(change(d.delta, d.delta_unit), d.verdict),
        )
        for d in figures
    ]


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
        sign = "+" if d > 0 else "\u2212" if d < 0 else "\u00b1"
        t.add_row(
            k.name,
            us(k.baseline_us_per_step) if k.baseline_us_per_step is not None else "not in top list",
            us(k.us_per_step) if k.us_per_step is not None else "not in top list",
            _styled(f"{sign}{us(abs(d))}", k.verdict),
        )
    console.print(t)
