"""What names say: regexes over kernel, host-op and runtime-call names, and lookup tables.

A trace stores each distinct name once (``TraceTables.names``) and events refer to it by code,
so every test here runs once per distinct name and yields a boolean table over name codes
(``name_mask``); indexing it with an event column classifies every event at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ...trace.tables import OP, TraceTables, name_lookup
from .families import MATMUL_KERNEL
from .kernels import tensor_core_mask

# Helper kernels whose names match the above but do no matrix math.
_NOT_MATMUL = re.compile(r"computeOffsets|computeBOffsets|OffsetsKernel|bn_fw|bn_bw|scalePackedTensor", re.IGNORECASE)
# Fused attention: FlashAttention, memory-efficient attention, cuDNN SDPA, Triton flex/attention.
FUSED_ATTENTION_KERNEL = re.compile(
    r"flash|fmha|_attn_fwd|_attn_bwd|attention_kernel|sdpa|flex_attention|cudnn_generated_fort_native_sdpa",
    re.IGNORECASE,
)
FUSED_ATTENTION_OPS = frozenset(
    {
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_flash_attention_forward",
        "aten::_efficient_attention_forward",
        "aten::_fused_sdp_choice",
    }
)
# Kernels of foreach / fused optimizers (one launch covers many tensors).
MULTI_TENSOR_KERNEL = re.compile(
    r"multi_tensor_apply|fused_adam|FusedAdam|fused_sgd|FusedSgd|fused_lamb", re.IGNORECASE
)
# Collective-communication kernels (NCCL/RCCL, symmetric-memory all-reduce): few blocks by design,
# and their time is waiting on peers as much as work.
COMM_KERNEL = re.compile(
    r"nccl|rccl|cross_device_reduce|one_shot_all_reduce|two_shot_all_reduce|multimem_all_reduce|all_gather_into",
    re.IGNORECASE,
)
# Kernels that are already fused (Inductor/Triton) or communication: they break elementwise chains.
_NOT_ELEMENTWISE = re.compile(r"^triton_|ncclKernel|ncclDevKernel|multi_tensor_apply|cutlass|nvjet", re.IGNORECASE)

OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#(.+?)\.step$")
OPTIMIZER_ZERO_GRAD = re.compile(r"^Optimizer\.zero_grad#(.+?)\.zero_grad$")
DATALOADER = re.compile(r"enumerate\(DataLoader\)#|DataLoaderIter.*__next__|^DataLoader\.__next__")


# Runtime and driver calls that enqueue device work: kernel launches (cudaLaunchKernel,
# cuLaunchKernel, hipExtModuleLaunchKernel, cudaGraphLaunch...), copies and memsets. A launch
# call without a GPU event means the trace was cut before that work was recorded.
_KERNEL_LAUNCH = "Launch"
LAUNCH_CALL = re.compile(rf"{_KERNEL_LAUNCH}|Memcpy|Memset", re.IGNORECASE)
# The kernel launches alone: the host time the launch statistics count as launch overhead.
KERNEL_LAUNCH_CALL = re.compile(_KERNEL_LAUNCH, re.IGNORECASE)


def launch_call_rows(tables: TraceTables) -> np.ndarray:
    """Runtime/driver calls that carry a correlation id and enqueue device work (kernel launches,
    memcpys, memsets), in time order; synchronize, event and query calls are left out."""
    rows = tables.launch_rows
    hit = name_mask(tables.names, LAUNCH_CALL, codes=tables.call_name_codes)
    out: np.ndarray = rows[hit[tables.cpu.name[rows]]]
    return out


def op_rows_named(tables: TraceTables, predicate: Callable[[str], object]) -> np.ndarray:
    """Boolean mask over cpu rows: the ops whose name satisfies ``predicate``."""
    lut = tables.name_codes(predicate, tables.cpu_name_codes((OP,)))
    if not len(tables.cpu):
        return np.zeros(0, bool)
    named = lut[tables.cpu.name] if len(lut) else np.zeros(len(tables.cpu), bool)
    return np.asarray(named & (tables.cpu.kind == OP))


def name_mask(
    names: Sequence[str],
    pattern: re.Pattern[str],
    exclude: re.Pattern[str] | None = None,
    codes: np.ndarray | None = None,
) -> np.ndarray:
    """Boolean lookup table over name codes; ``codes``: test only these names, the others read as
    False (``TraceTables.gpu_name_codes`` for a table read at GPU rows)."""
    return name_lookup(names, lambda n: pattern.search(n) and not (exclude is not None and exclude.search(n)), codes)


def matmul_kernel_mask(names: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
    """Per name code: a matmul, convolution or attention kernel (tensor-core or not)."""
    mask: np.ndarray = name_mask(names, MATMUL_KERNEL, _NOT_MATMUL, codes) | tensor_core_mask(names, codes=codes)
    return mask


def fused_attention_kernel_mask(names: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
    return name_mask(names, FUSED_ATTENTION_KERNEL, codes=codes)


def multi_tensor_kernel_mask(names: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
    return name_mask(names, MULTI_TENSOR_KERNEL, codes=codes)


def comm_kernel_mask(names: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
    return name_mask(names, COMM_KERNEL, codes=codes)


def elementwise_kernel_mask(names: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
    """Per name code: an unfused, non-matmul kernel (ATen/cuDNN elementwise, reductions, norms);
    given ``codes``, False for the other names."""
    mask: np.ndarray = (
        ~matmul_kernel_mask(names, codes)
        & ~name_mask(names, _NOT_ELEMENTWISE, codes=codes)
        & ~comm_kernel_mask(names, codes)
    )
    if codes is not None:
        mask &= name_lookup(names, lambda _: True, codes)
    return mask
