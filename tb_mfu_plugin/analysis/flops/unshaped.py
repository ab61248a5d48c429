"""Why a trace's ops give no FLOPs (or miss some), and what works instead.

FLOPs from shapes need each matmul, conv and attention op on the host with its ``Input Dims``
(``record_shapes=True``). Two ways of running a model leave no such op even when the profiler
records shapes:

- CUDA/HIP graph replays (``torch.cuda.CUDAGraph``, ``torch.compile(mode="reduce-overhead")``):
  one ``cudaGraphLaunch`` runs the captured kernels; no op, and so no shapes, is recorded for them;
- compiled graphs (``torch.compile``: ``Torch-Compiled Region``, ``CompiledFunction``,
  ``## Call CompiledFxGraph ##``) whose matmuls Inductor generates as Triton kernels, with no
  ``aten::mm`` around them.

Telling a user who recorded shapes to record shapes is wrong advice: the note says what happened
and what works: the model's FLOPs per step given directly (``--flops-per-step``, a ``tb_mfu.json``
sidecar), or ``MfuMonitor``, which counts them with ``FlopCounterMode`` on the eager model.
"""

from __future__ import annotations

import re

import numpy as np

from ...trace.tables import KERNEL, OP, TraceTables
from ..fmt import pct
from ..time import graphs, intervals

# The annotations and autograd functions torch.compile records around a compiled graph.
COMPILED_REGION = re.compile(r"^(?:Torch-Compiled Region|CompiledFunction|## Call CompiledFxGraph|TorchDynamo)")
# Graph replays running at least this share of the steps' kernel time make FLOPs from shapes partial.
GRAPH_SHARE_PARTIAL = 0.2

_WHAT_WORKS = (
    "give the model's FLOPs instead: --flops-per-step, a tb_mfu.json sidecar (flops_per_step or the model's "
    "dimensions), or tb_mfu_plugin.profiling.MfuMonitor, which counts them with FlopCounterMode on the eager model"
)


def graph_kernel_share(tables: TraceTables, start: np.ndarray, end: np.ndarray, device: int | None) -> float:
    """The share of the kernel time in the GPU windows ``[start, end)`` that graph replays ran."""
    g = tables.gpu
    sel = (g.kind == KERNEL) & (intervals.window_of_unsorted(g.ts, start, end) >= 0)
    if device is not None:
        sel &= g.device == device
    total = float(g.dur[sel].sum())
    if total <= 0:
        return 0.0
    graph = graphs.graph_launched(tables, tables.launcher)
    return float(g.dur[sel & graph].sum()) / total


def compiled_regions(tables: TraceTables) -> list[str]:
    """The kinds of compiled region the host recorded ("Torch-Compiled Region", "CompiledFunction"...),
    sorted; the names themselves carry frame ids and graph hashes."""
    names = tables.names
    hit = np.flatnonzero(tables.name_codes(COMPILED_REGION.match)).tolist()  # the step markers asked once
    return sorted({m.group(0) for c in hit if (m := COMPILED_REGION.match(names[c]))})


def shaped_ops(tables: TraceTables) -> int:
    """Host ops whose recorded shapes the decoder kept (FLOP and byte formula ops)."""
    cpu = tables.cpu
    return int(((cpu.input_id >= 0) & (cpu.kind == OP)).sum())


def missing_flops_note(
    tables: TraceTables, start: np.ndarray, end: np.ndarray, device: int | None, has_shapes: bool
) -> str | None:
    """The note that says why FLOPs from shapes are missing (``has_shapes`` False) or partial
    (graph replays ran a large share of the kernels), and what works; None when nothing is amiss."""
    share = graph_kernel_share(tables, start, end, device)
    regions = compiled_regions(tables)
    shaped = shaped_ops(tables)
    recorded = f" (the trace does record shapes: {shaped} ops carry them)" if shaped else ""
    if has_shapes:
        if share < GRAPH_SHARE_PARTIAL:
            return None
        return (
            f"FLOPs from shapes are partial: {pct(share)} of the steps' kernel time ran in CUDA graph replays, which "
            f"record no ops and so no shapes; MFU counts only the rest. To count all, {_WHAT_WORKS}"
        )
    if share >= 0.5:
        why = (
            f"no FLOPs from shapes: {pct(share)} of the steps' kernel time ran in CUDA graph replays "
            '(torch.cuda.CUDAGraph, torch.compile(mode="reduce-overhead")), which record no ops and so no '
            f"shapes, even with record_shapes=True{recorded}"
        )
    elif regions:
        why = (
            f"no FLOPs from shapes: the steps ran in torch.compile'd graphs ({', '.join(regions[:3])}), whose "
            f"matmuls Inductor generates without an aten op to carry their shapes{recorded}"
        )
    else:
        return "no FLOPs from shapes: record with record_shapes=True, or give --flops-per-step / a tb_mfu.json sidecar"
    return f"{why}; {_WHAT_WORKS}"
