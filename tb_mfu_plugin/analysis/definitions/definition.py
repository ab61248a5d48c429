"""What a definition is: a figure's label, one-line definition, unit and better direction, and the
words every face puts beside an aggregated figure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["share", "time", "bytes", "flops", "flop_rate", "tflop_rate", "bandwidth", "count", "factor"]
# What each unit is in the report (its formatter turns it into text with the unit's symbol).
UNIT_MEANING: dict[Unit, str] = {
    "share": "a fraction 0-1, shown as a percentage",
    "time": "µs, shown in ns, µs, ms or s",
    "bytes": "bytes, shown in decimal units (1 MB = 10⁶ B, as GB/s)",
    "flops": "FLOPs (a count), shown in MFLOP to PFLOP",
    "flop_rate": "FLOP/s, shown in TFLOP/s",
    "tflop_rate": "TFLOP/s",
    "bandwidth": "GB/s (10⁹ bytes per second)",
    "count": "a number per step",
    "factor": "a multiple, shown with ×",
}

# Which way a figure is better, where one is: only the figures that say how fast a run is (MFU,
# achieved FLOP/s, step time) or how much memory it needs (the peaks, the batch headroom). Every
# other figure explains those and has none: a busier GPU is not a faster step ("busy is not
# fast"), and a run can get busier while it gets slower. Compare judges a change by it
# (analysis.run.compare).
Better = Literal["higher", "lower", "none"]

AGGREGATION = "time-weighted over the analysed (steady-state) steps"
MEDIAN_STEP = "median over the analysed steps of the per-step values"


@dataclass(frozen=True)
class Definition:
    label: str  # what every face calls it
    definition: str  # one line, the same text in the tab's help, the CLI, docs/metrics.md and the README
    unit: Unit
    better: Better = "none"  # which way is better (see Better)


def define(label: str, definition: str, unit: Unit, better: Better = "none") -> Definition:
    return Definition(label, definition, unit, better)
