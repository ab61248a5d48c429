"""Rewrite docs/mfu.md's accuracy tables (issue 33) from the recorded ground truth and today's
analyzer: for each set of truth runs and pairs, what ``validation/truth_tables.py`` prints, between
``<!-- truth:SET:start -->`` and ``<!-- truth:SET:end -->``. So the page quotes today's headline MFU
and gains against the truth, never those of the day it was written.

    python scripts/gen_truth_tables.py          # rewrite the tables
    python scripts/gen_truth_tables.py --check  # exit 1 if a table is not today's
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "mfu.md"
# set -> (its MFU truth runs, its folders of pairs), under validation/; None where the MFU runs' traces are
# in git history only (the set's README says where), so that the tree stays under what a device call carries
SETS: dict[str, tuple[str | None, ...]] = {
    "h200": ("mfu_truth", "gain_pairs"),
    "h100": ("h100/mfu_truth", "h100/gain_pairs"),
    "h100_host5": ("h100_host5/mfu_truth", "h100_host5/gain_pairs", "h100_host5/gain_pairs_noncausal"),
    "h100_host6": ("h100_host6/mfu_truth", "h100_host6/gain_pairs", "h100_host6/gain_pairs_noncausal"),
    "h100_host7": ("h100_host7/mfu_truth", "h100_host7/gain_pairs"),
    "h100_host8": ("h100_host8/mfu_truth", "h100_host8/gain_pairs"),
    "h100_host10": (None, "h100_host10/gain_pairs"),
}


def tables(name: str) -> str:
    """``truth_tables.py --mfu-dir … --gains-dir …``'s output for one set."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "validation"))
    import truth_tables
    from packed import unpacked  # a host's traces may be kept as its traces.tar.xz

    mfu, *gains = (None if d is None else unpacked(str(ROOT / "validation" / d)) for d in SETS[name])
    parts = [truth_tables.mfu_table(mfu)] if mfu is not None else []
    return "\n\n".join([*parts, *(truth_tables.gains_table(g) for g in gains if g is not None)])


def rendered(text: str) -> str:
    """The page with today's tables between each set's markers."""
    for name in SETS:
        start, end = f"<!-- truth:{name}:start -->", f"<!-- truth:{name}:end -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"{DOC.relative_to(ROOT)} has no {start} … {end}")
        text = pattern.sub(lambda _m, n=name, s=start, e=end: f"{s}\n{tables(n)}\n{e}", text, count=1)
    return text


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "scripts"))
    from doc_regen import rewrite_or_check

    sys.exit(rewrite_or_check(DOC, rendered, __file__, "MFU or gains other than today's against the truth"))
