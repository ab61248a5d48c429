"""Rewrite the ``text`` block after each ``python`` block of docs/notebook.md with what that block
prints, running the blocks in order from the repository root as tests/test_notebook_docs.py does,
so that the page shows today's figures and not those of the day it was written.

    python scripts/gen_notebook_doc.py          # rewrite the page
    python scripts/gen_notebook_doc.py --check  # exit 1 if a shown output is not today's
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "notebook.md"
# a python block, then (after prose-free blank lines) the text block that shows its output
PAIR = re.compile(r"(^```python\n(?P<code>.*?)^```\n\s*^```text\n)(?P<out>.*?)(^```$)", re.S | re.M)


def rendered(text: str) -> str:
    """The page with each python block's output in the text block after it."""
    os.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "__notebook__"}
    out: list[str] = []
    pos = 0
    for m in PAIR.finditer(text):
        # the python blocks without an output block before this one run first, in order
        for code in re.findall(r"^```python\n(.*?)^```", text[pos : m.start()], flags=re.S | re.M):
            exec(compile(code, DOC.name, "exec"), namespace)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(m.group("code"), DOC.name, "exec"), namespace)
        out.append(text[pos : m.start()] + m.group(1) + buf.getvalue() + m.group(4))
        pos = m.end()
    return "".join(out) + text[pos:]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from doc_regen import rewrite_or_check  # beside this script, which runs from scripts/

    return rewrite_or_check(DOC, rendered, __file__, "outputs that are not today's")


if __name__ == "__main__":
    raise SystemExit(main())
