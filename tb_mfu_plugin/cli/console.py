"""The rich Console the CLI prints its tables on, wide enough off a terminal.

On a terminal rich fits the tables to the window. Written to a pipe or a CI log, rich assumes
80 columns and squeezes a wide table's headers into "t…" and "s…". There, this Console is as
wide as each table needs: a table gets the width of its content, folding only prose (the
findings' fixes) past ``PROSE_WIDTH`` (a column with a ``ratio``), never a figure's cell; a line of text is
written as one line, never wrapped.
``$COLUMNS``, when set, still wins, as it does for rich.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.rule import Rule
from rich.table import Table

PROSE_WIDTH = 160  # off a terminal, a table with prose columns folds them here...
RULE_WIDTH = 100
_UNBOUNDED = 100_000  # ...and one that needs more than that gets it


class FitConsole(Console):
    """A Console that, off a terminal, prints each table at the width it needs (see the module)."""

    def __init__(self, **kwargs: Any) -> None:
        probe = Console(**kwargs)
        self.fit = not probe.is_terminal and not os.environ.get("COLUMNS")
        super().__init__(**({**kwargs, "width": _UNBOUNDED} if self.fit else kwargs))

    def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
        if self.fit and kwargs.get("width") is None:
            if len(objects) == 1 and isinstance(objects[0], Table):
                table = objects[0]
                m = Measurement.get(self, self.options, table)
                prose = any(c.ratio for c in table.columns)
                kwargs["width"] = max(m.minimum, min(m.maximum, PROSE_WIDTH)) if prose else m.maximum
            elif len(objects) == 1 and isinstance(objects[0], Rule):
                kwargs["width"] = RULE_WIDTH
            else:
                kwargs.setdefault("soft_wrap", True)
        super().print(*objects, **kwargs)


def cut(text: str, width: int, keep_end: bool = False) -> str:
    """``text`` in at most ``width`` characters: whole, or cut with "…" where the cut is (at the
    end, or at the start when ``keep_end``), so a cut cell never reads as a whole one."""
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1 :] if keep_end else text[: width - 1] + "…"


def console() -> Console:
    """The Console for ``tb-mfu``'s tables on stdout."""
    return FitConsole()
