"""Memory copies: direction and host-memory kind from the memcpy name, bytes, time, bandwidth."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...trace.tables import GpuTable
from ..report import CopyStats

SMALL_COPY_BYTES = 64 * 1024
DIRECTIONS = ("H2D", "D2H", "D2D", "P2P", "other")
_DIRECTION = {"htod": "H2D", "dtoh": "D2H", "dtod": "D2D", "ptop": "P2P", "htoh": "other"}
# "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)"
_NAME = re.compile(r"memcpy\s+(\w+)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.IGNORECASE)


def classify(names: Sequence[str], codes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per name code: direction index into DIRECTIONS, and host memory kind
    (0 device/none, 1 pageable, 2 pinned, 3 unknown). ``codes``: classify only these names (the
    GPU rows', ``TraceTables.gpu_name_codes``); the others read as "other" and unknown."""
    direction = np.full(len(names), DIRECTIONS.index("other"), np.int8)
    memory = np.full(len(names), 3, np.int8)
    for code in range(len(names)) if codes is None else sorted({int(c) for c in codes}):
        n = names[code]
        m = _NAME.search(n)
        if not m:
            continue
        direction[code] = DIRECTIONS.index(_DIRECTION.get(m.group(1).lower(), "other"))
        ends = {(m.group(2) or "").lower(), (m.group(3) or "").lower()}
        if "pageable" in ends:
            memory[code] = 1
        elif "pinned" in ends:
            memory[code] = 2
        elif ends == {"device"}:
            memory[code] = 0
    return direction, memory


MEMORY_KINDS = ("device", "pageable", "pinned", "unknown")


def copy_stats(memcpy: GpuTable, names: Sequence[str], steps: int) -> list[CopyStats]:
    """Copies grouped by (direction, host memory), per step. ``memcpy``: memcpy rows in the steps."""
    if len(memcpy) == 0 or steps == 0:
        return []
    direction, memory = classify(names, memcpy.name)
    d = direction[memcpy.name]
    m = memory[memcpy.name]
    nbytes = np.maximum(memcpy.bytes, 0)
    out = []
    for di, dname in enumerate(DIRECTIONS):
        for mi, mname in enumerate(MEMORY_KINDS):
            sel = (d == di) & (m == mi)
            if not sel.any():
                continue
            b = float(nbytes[sel].sum(dtype=np.float64))  # float: an int64 sum can overflow
            t = float(memcpy.dur[sel].sum())
            out.append(
                CopyStats(
                    direction=dname,
                    memory=mname,
                    count_per_step=float(sel.sum()) / steps,
                    bytes_per_step=b / steps,
                    time_us_per_step=t / steps,
                    gbps=b / (t * 1e3) if t > 0 else None,  # bytes/µs = 1e6 B/s; /1e3 -> GB/s
                    small_count_per_step=float((sel & (memcpy.bytes >= 0) & (nbytes < SMALL_COPY_BYTES)).sum()) / steps,
                )
            )
    return out
