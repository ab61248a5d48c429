"""Every figure a face shows: its name, label, one-line definition and unit, in one table
(``DEFINITIONS``, the step's figures, the critical path's and the what-if's, and memory's).

The name is the report's key (``summary.<name>`` and ``steps[].<name>``, or the block it is in:
``breakdown.idle_other``, ``launches.short_kernel_share``, ``flops.hfu``, ``ranks.bubble_share``,
``strategies.mfu_min``...). The CLI and the tab label a figure with its ``label`` and explain it
with its ``definition``; ``scripts/gen_definitions.py`` writes the table into the tab's
``frontend/src/definitions.ts`` and into docs/metrics.md and the README, and
``tests/analysis/test_definitions.py`` keeps all four equal. The ``unit`` names the one formatting function
of that unit (``fmt.FORMATTERS`` in Python, ``format.ts`` ``byUnit`` in the tab).

Aggregation: a ``summary`` share is time-weighted over the analysed steps (Σ part / Σ step time,
``analysis.time.aggregate``) and a per-step count is the mean step's; ``AGGREGATION`` says it in
the words the faces put beside a summary figure.
"""

from __future__ import annotations

from .definition import AGGREGATION, MEDIAN_STEP, UNIT_MEANING, Better, Definition, Unit
from .figures import FIGURES
from .memory import MEMORY
from .model import MODEL

__all__ = [
    "AGGREGATION",
    "DEFINITIONS",
    "MEDIAN_STEP",
    "UNIT_MEANING",
    "Better",
    "Definition",
    "Unit",
    "definition",
    "help_text",
    "label",
]

# in the order every generated table lists them
DEFINITIONS: dict[str, Definition] = {**FIGURES, **MODEL, **MEMORY}


def label(name: str) -> str:
    return DEFINITIONS[name].label


def definition(name: str) -> str:
    return DEFINITIONS[name].definition


def help_text(name: str) -> str:
    """The label's tooltip in the tab and the CLI's line: ``definition``."""
    return DEFINITIONS[name].definition
