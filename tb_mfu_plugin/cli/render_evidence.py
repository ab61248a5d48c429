"""``tb-mfu analyze --evidence``: each finding's evidence under the findings, every value in its unit.

The fields, their labels and their order are the tab's (``analysis.evidence.show``): the cost, the
rule's own figures (a row of a table per line: "Kernels 2 › Time / step"), the what-if re-timing,
then the note that says how the gain is estimated.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analysis.evidence.show import evidence_lines
from ..analysis.report import WorkerReport


def print_evidence(console: Console, w: WorkerReport) -> None:
    for f in w.findings:
        t = Table(
            title=f"Evidence of {f.id}" + (f" · {f.subject}" if f.subject else ""),
            title_justify="left",
            show_header=False,
        )
        t.add_column("field", style="dim")
        t.add_column("value", overflow="fold")
        for line in evidence_lines(f.evidence):
            t.add_row(line.label, line.text)
        console.print(t)
        if isinstance(f.evidence.note, str):
            console.print(f"  {f.evidence.note}", style="dim", highlight=False)
