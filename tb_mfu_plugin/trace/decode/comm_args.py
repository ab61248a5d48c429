"""The collective args of an NCCL kernel, checked: what ``TraceTables.comm_args`` holds.

torch writes them on every NCCL kernel it launches (torch >= 2.2): the call's name, its element
counts, dtype and process group. Their names are generic ("dtype", "Group size"), so the schema
reads them as anything and this module keeps only the types it expects: a count that is not a
non-negative int64 is unknown (-1), a label that is not a string is unknown (None), a number
where a process group name stands is read as that name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..tables import CommArgs
from . import schema

INT64_MAX = 2**63 - 1

__all__ = ["CommArgs", "comm_column", "comm_record", "renumber"]


def _count(v: Any) -> int:
    return v if type(v) is int and 0 <= v <= INT64_MAX else -1


def _text(v: Any, cap: int) -> str | None:
    """A label as a string cut to the name cap."""
    if type(v) is int:
        v = str(v)
    return v[:cap] if isinstance(v, str) else None


def comm_record(a: schema.Args, cap: int) -> CommArgs:
    """The record of one kernel whose "Collective name" is a string; labels cut to ``cap`` characters."""
    return CommArgs(
        collective=_text(a.collective, cap) or "",
        in_nelems=_count(a.in_nelems),
        out_nelems=_count(a.out_nelems),
        group_size=_count(a.group_size),
        dtype=_text(a.comm_dtype, cap),
        group=_text(a.pg_name, cap),
        group_desc=_text(a.pg_desc, cap),
        group_ranks=_text(a.pg_ranks, cap),
    )


def comm_column(args: list[schema.Args], names: list[Any], records: dict[CommArgs, int], cap: int) -> np.ndarray:
    """Per GPU event, the index of its record in ``records`` (added there when new; -1 for none).
    ``names`` is each event's "Collective name": only NCCL kernels carry one, so the loop runs over
    a few events per step."""
    out = np.full(len(args), -1, np.int32)
    for i in [i for i, n in enumerate(names) if isinstance(n, str)]:
        out[i] = records.setdefault(comm_record(args[i], cap), len(records))
    return out


def renumber(column: np.ndarray, theirs: list[CommArgs], records: dict[CommArgs, int]) -> None:
    """A worker's ``comm`` column (indexes into ``theirs``) -> indexes into ``records``, in place."""
    if theirs:
        mine = np.array([records.setdefault(r, len(records)) for r in theirs], np.int32)
        at = column >= 0
        column[at] = mine[column[at]]
