"""What the docs' regenerators (gen_notebook_doc.py, gen_findings_table.py) share: rewrite a page
with today's figures, or, with ``--check``, exit 1 where the page shows others."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rewrite_or_check(doc: Path, rendered: Callable[[str], str], script: str, stale: str) -> int:
    """``doc`` rewritten as ``rendered`` makes it; with ``--check`` on the command line, nothing
    written, and 1 with a line naming the page, what is ``stale`` and ``script`` to run."""
    text = doc.read_text()
    new = rendered(text)
    if "--check" in sys.argv[1:]:
        if new != text:
            print(f"{doc.relative_to(ROOT)} shows {stale}: run python {Path(script).name}")
            return 1
        return 0
    doc.write_text(new)
    return 0
