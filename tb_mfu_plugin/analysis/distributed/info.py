"""The trace's ``distributedInfo`` as the report's typed ``Distributed`` block.

``trace.decode.header`` has already bounded the free-form JSON (its depth, rank and world size).
What remains is the shape: a key whose value is not of the type PyTorch writes (a
``backend`` that is a number, a ``pg_config`` that is not a list of process groups) is
left out with a note, so one odd key neither fails the trace nor reaches the report
untyped. Keys no PyTorch version writes are not kept: the block holds what the report
declares.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .blocks import Distributed

_FIELD_TYPES = {f.name: f.type for f in msgspec.structs.fields(Distributed)}


def distributed_block(info: dict[str, Any] | None, notes: list[str]) -> Distributed | None:
    """``info`` (``TraceMeta.distributed_info``) as a ``Distributed``; None when the trace has none."""
    if info is None:
        return None
    try:
        return msgspec.convert(info, Distributed)
    except msgspec.ValidationError:
        pass  # some key has an odd value: keep the others, one by one
    kept: dict[str, Any] = {}
    for key, kind in _FIELD_TYPES.items():
        if key not in info:
            continue
        try:
            kept[key] = msgspec.convert(info[key], kind)
        except msgspec.ValidationError:
            notes.append(f"distributedInfo.{key} is not what PyTorch writes there and was ignored.")
    return Distributed(**kept)
