"""Fresh numpy arrays in plain 4 KiB pages, in the processes that analyse traces.

numpy advises the kernel to back every array of 4 MiB or more with transparent huge pages
(``madvise(MADV_HUGEPAGE)``). Where THP defrag is ``madvise`` (Debian's and Ubuntu's
default), the first touch of such an array may stop to compact memory for each 2 MiB page.
The analysis of a big trace makes and drops thousands of such arrays (a column of a 1 GB
trace is 15 MB), and on the 2-core development VM (2026-12-01) that advice cost more than it
saved: the first write to a fresh 160 MB array took 0.5-1.8 s with it and 0.1 s without, and
``tb-mfu analyze`` of the 1 GB benchmark trace on one core spent 1.6-3.2 s in the kernel with
it against 0.8-0.9 s without (wall 15.0 / 15.2 / 15.4 / 16.7 s against 12.8 / 13.4 / 13.8 /
16.8 s, runs alternated).

So the CLI and the analysis worker processes turn the advice off for themselves; the
TensorBoard server's own process is left as it is. ``$NUMPY_MADVISE_HUGEPAGE``, numpy's own
switch, wins when it is set (``NUMPY_MADVISE_HUGEPAGE=1`` keeps huge pages).
"""

from __future__ import annotations

import os

ENV = "NUMPY_MADVISE_HUGEPAGE"


def prefer_small_pages() -> None:
    """Stop numpy's huge-page advice in this process, unless ``$NUMPY_MADVISE_HUGEPAGE`` says otherwise."""
    if ENV in os.environ:  # numpy read it at import: the user's choice stands
        return
    try:
        from numpy._core import multiarray  # numpy >= 2
    except ImportError:  # numpy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is not None:
        setter(False)
