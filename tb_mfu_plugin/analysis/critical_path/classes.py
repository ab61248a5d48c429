"""What each stretch of a critical path is: the classes the breakdown sums over.

A step's critical path is a chain of stretches that add up to the step (``path``). Each
stretch is host time of one kind, a GPU op of one kind, or a dependency edge between them. The
classes are fixed, in this order, so every face lists them alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...trace.tables import KERNEL, MEMCPY
from ...trace.tables import MEMSET as MEMSET_KIND
from ..kernels import families as kf
from ..kernels import name_patterns as nm

# Host segments (the merged host timeline of the device's launching threads).
HOST = "host"  # CPU work outside launch, sync and DataLoader calls (Python, op dispatch)
DATALOADER = "dataloader"  # inside DataLoader calls
LAUNCH = "launch"  # inside launch calls, and a launch call's start to its kernel's start
SYNC = "sync"  # blocked in a host-device sync beyond the GPU work it waited for, and its return
# GPU ops, by what they run
MATMUL = "kernel_matmul"  # tensor-core matmul / conv kernels
MATMUL_CUDA_CORE = "kernel_matmul_cuda_core"  # matmul / conv on the CUDA cores (fp32 without TF32)
ATTENTION = "kernel_attention"  # fused attention kernels
ELEMENTWISE = "kernel_elementwise"  # elementwise, normalisation and reduction kernels
OTHER_KERNEL = "kernel_other"  # any other kernel (matmuls of unknown unit, fused Triton, optimizer)
COMMUNICATION = "communication"  # collective kernels (their time includes waiting for peers)
COPY = "copy"  # memcpy on the GPU, and host time in memcpy calls (pageable staging)
MEMSET = "memset"
# Edges between GPU ops
GPU_GAP = "gpu_gap"  # between two ops of one stream, the second queued behind the first
STREAM_WAIT = "stream_wait"  # an op waiting for an op of another stream (event record / wait)
OTHER = "other"  # an op with no dependency the trace shows (no launch call, first on its stream)

CLASSES: tuple[str, ...] = (
    HOST,
    DATALOADER,
    LAUNCH,
    SYNC,
    MATMUL,
    MATMUL_CUDA_CORE,
    ATTENTION,
    ELEMENTWISE,
    OTHER_KERNEL,
    COMMUNICATION,
    COPY,
    MEMSET,
    GPU_GAP,
    STREAM_WAIT,
    OTHER,
)
CODE = {c: i for i, c in enumerate(CLASSES)}
HOST_CLASSES = (HOST, DATALOADER, LAUNCH, SYNC)
KERNEL_CLASSES = (MATMUL, MATMUL_CUDA_CORE, ATTENTION, ELEMENTWISE, OTHER_KERNEL, COMMUNICATION)
GPU_CLASSES = (*KERNEL_CLASSES, COPY, MEMSET)

# HTA's critical-path categories (``CPGraph.summary``'s bound_by), for the comparison with it.
HTA_CATEGORY = {
    HOST: "cpu_bound",
    DATALOADER: "cpu_bound",
    SYNC: "cpu_bound",
    LAUNCH: "gpu_kernel_launch_overhead",
    MATMUL: "gpu_compute_bound",
    MATMUL_CUDA_CORE: "gpu_compute_bound",
    ATTENTION: "gpu_compute_bound",
    ELEMENTWISE: "gpu_compute_bound",
    OTHER_KERNEL: "gpu_compute_bound",
    COPY: "gpu_compute_bound",
    MEMSET: "gpu_compute_bound",
    COMMUNICATION: "gpu_communication_bound",
    GPU_GAP: "gpu_kernel_kernel_overhead",
    STREAM_WAIT: "gpu_kernel_kernel_overhead",
    OTHER: "gpu_kernel_kernel_overhead",
}


def name_lut(names: Sequence[str], classes: kf.NameClasses, codes: np.ndarray | None = None) -> np.ndarray:
    """The class code a kernel of each name has, one name test per distinct name (``codes``: only
    these names, the kernels'; the others read as other kernels)."""
    per_name = np.full(len(names), CODE[OTHER_KERNEL], np.int8)
    core = classes.core
    per_name[core == kf.CODE[kf.TENSOR_CORE]] = CODE[MATMUL]
    per_name[core == kf.CODE[kf.CUDA_CORE]] = CODE[MATMUL_CUDA_CORE]
    sel = np.arange(len(names)) if codes is None else np.asarray(codes, np.int64)
    some = [names[int(c)] for c in sel]
    ew = nm.elementwise_kernel_mask(some) & (core[sel] == kf.CODE[kf.NOT_MATMUL])
    per_name[sel[ew]] = CODE[ELEMENTWISE]
    per_name[sel[nm.fused_attention_kernel_mask(some)]] = CODE[ATTENTION]
    per_name[sel[nm.comm_kernel_mask(some)]] = CODE[COMMUNICATION]
    return per_name


def op_classes(kind: np.ndarray, name: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """The class code of each GPU op: its kernel name's (``name_lut``), or copy / memset."""
    out = np.where(kind == KERNEL, lut[name], CODE[OTHER_KERNEL]).astype(np.int8)
    out[kind == MEMCPY] = CODE[COPY]
    out[kind == MEMSET_KIND] = CODE[MEMSET]
    return out
