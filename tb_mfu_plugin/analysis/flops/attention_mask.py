"""The host-device sync in the build of a hand-written attention's additive mask.

Hugging Face transformers' eager attention adds a float mask of the scores' shape, built each
forward from a boolean one: ``torch.where(mask, torch.tensor(0.0, device=mask.device), min)``
(transformers 5.17, ``masking_utils.eager_mask``). ``torch.tensor(value, device=cuda)`` copies a
Python value from pageable host memory, a blocking host-to-device copy that waits for the whole
GPU queue, so every step starts with the GPU drained and the host refilling it. Its SDPA path
passes ``is_causal`` and builds no mask, so the fix to the attention takes the sync away too
(measured on an H100: the gain pair's eager Llama step ran 1.77 ms faster with the mask's zero made on
the GPU, the same kernels without the sync; validation/mask_sync).

In the trace: a sync under a host-to-device copy, followed on its thread, within a few ops (the
constructor's ``lift_fresh`` and ``detach_``), by an ``aten::where`` whose first input has the
scores' last two dims, the query and key lengths of the attention chains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...trace.tables import TraceTables
from ..time.thread_ops import ThreadOps
from .attention_chains import AttentionChain, attention_dims, matmul_dims

# The ops a ``torch.tensor(value, device=...)`` runs after its copy (``aten::lift_fresh``, then
# ``aten::detach_`` with its autograd twin), and a margin: the mask's ``where`` comes next.
MAX_OPS_BETWEEN = 6


def mask_syncs(
    tables: TraceTables,
    chains: Sequence[AttentionChain],
    sync_rows: np.ndarray,
    copy_ops: Sequence[int | None],
    is_h2d: Callable[[int], bool],
    thread_ops: ThreadOps,
) -> np.ndarray:
    """The cpu rows of the syncs (``sync_rows``, each under the op ``copy_ops[i]``) that build the
    chains' additive mask: a host-to-device copy followed on its thread, at most ``MAX_OPS_BETWEEN``
    ops later, by an ``aten::where`` whose first input ends in the chains' two lengths."""
    lengths = {(x[1], x[2]) for c in chains if (x := attention_dims(c.shapes)) is not None}
    if not lengths:
        return np.empty(0, np.int64)
    out = []
    for r, op in zip(sync_rows.tolist(), copy_ops, strict=True):
        if op is None or not is_h2d(op):
            continue
        where = thread_ops.next_named(op, MAX_OPS_BETWEEN + 1, "aten::where")
        if where is not None and _mask_shaped(tables, where, lengths):
            out.append(r)
    return np.asarray(out, np.int64)


def _mask_shaped(tables: TraceTables, row: int, lengths: set[tuple[int, int]]) -> bool:
    rec = tables.cpu.inputs_at(row)
    dims = matmul_dims(rec.dims.decode()) if rec is not None and rec.dims is not None else None
    if not dims or len(dims[0]) < 2:
        return False
    first = dims[0]
    return (min(first[-2:]), max(first[-2:])) in lengths
