"""What a collective kernel is and what it moved: its kind, process group, message size, and the
nccl-tests bandwidths (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).

*algbw* = message bytes / time. *busbw* = algbw x a factor that makes collectives of every kind
and group size comparable with the link's peak: for all-reduce 2(n-1)/n, all-gather,
reduce-scatter and all-to-all (n-1)/n, broadcast, reduce and send/recv 1. The message size is
nccl-tests' own: the larger of the input and output buffers (the gathered output of an
all-gather, the full input of a reduce-scatter).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...trace.tables import CommArgs

ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL = "allreduce", "allgather", "reducescatter", "alltoall"
BROADCAST, REDUCE, SENDRECV, SEND, RECV, OTHER = "broadcast", "reduce", "sendrecv", "send", "recv", "other"
P2P = frozenset({SENDRECV, SEND, RECV})

# torch's "Collective name" arg (record_param_comms, NCCL kernels) -> kind. Coalesced calls
# (several tensors in one NCCL group) carry the kind of their members in the kernel name instead.
_BY_TORCH_NAME = {
    "allreduce": ALLREDUCE,
    "allreduce_coalesced": ALLREDUCE,
    "all_reduce": ALLREDUCE,
    "_allgather_base": ALLGATHER,
    "allgather": ALLGATHER,
    "allgather_into_tensor_coalesced": ALLGATHER,
    "all_gather_into_tensor": ALLGATHER,
    "_reduce_scatter_base": REDUCESCATTER,
    "reduce_scatter": REDUCESCATTER,
    "reduce_scatter_tensor_coalesced": REDUCESCATTER,
    "reduce_scatter_tensor": REDUCESCATTER,
    "alltoall_base": ALLTOALL,
    "alltoall": ALLTOALL,
    "all_to_all": ALLTOALL,
    "broadcast": BROADCAST,
    "reduce": REDUCE,
    "send": SEND,
    "recv": RECV,
}
# NCCL/RCCL kernel names: ncclDevKernel_AllReduce_Sum_f32_RING_LL, ncclKernel_SendRecv_RING_SIMPLE_...
_BY_KERNEL = re.compile(r"(AllReduce|AllGather|ReduceScatter|AllToAll|Broadcast|Reduce|SendRecv|Send|Recv)")
_KERNEL_KINDS = {
    "AllReduce": ALLREDUCE,
    "AllGather": ALLGATHER,
    "ReduceScatter": REDUCESCATTER,
    "AllToAll": ALLTOALL,
    "Broadcast": BROADCAST,
    "Reduce": REDUCE,
    "SendRecv": SENDRECV,
    "Send": SEND,
    "Recv": RECV,
}
# Only NCCL < 2.19 compiles one kernel per algorithm and protocol (ncclKernel_AllReduce_RING_LL_Sum_float);
# the ncclDevKernel_* entry points of later versions pick both at run time, whatever their name says.
_PROTOCOL = re.compile(r"^ncclKernel_\w+?_((?:RING|TREE|COLLNET\w*|NVLS\w*|PAT)_(?:LL128|LL|SIMPLE))")

# Bytes per element by torch's dtype name (the "dtype" arg).
ELEMENT_BYTES = {
    "Double": 8,
    "Float": 4,
    "Half": 2,
    "BFloat16": 2,
    "Long": 8,
    "Int": 4,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
    "ComplexFloat": 8,
    "ComplexDouble": 16,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Float8_e4m3fnuz": 1,
    "Float8_e5m2fnuz": 1,
    "UInt32": 4,
    "UInt64": 8,
    "UInt16": 2,
}


def kind_of(kernel_name: str, args: CommArgs | None) -> str:
    """The collective a kernel runs: torch's own name for the call when the kernel carries it
    (an all-to-all runs as NCCL send/recv kernels), else the kernel name's."""
    if args is not None:
        got = _BY_TORCH_NAME.get(args.collective.lower())
        if got is not None:
            return got
    m = _BY_KERNEL.search(kernel_name)
    return _KERNEL_KINDS[m.group(1)] if m else OTHER


def bus_factor(kind: str, n: int | None) -> float | None:
    """nccl-tests' busbw / algbw for a collective of ``kind`` over ``n`` ranks."""
    if kind in P2P or kind in (BROADCAST, REDUCE):
        return 1.0
    if n is None or n < 1:
        return None
    if kind == ALLREDUCE:
        return 2.0 * (n - 1) / n
    if kind in (ALLGATHER, REDUCESCATTER, ALLTOALL):
        return (n - 1) / n
    return None


def bandwidths(
    kind: str, group_size: int | None, nbytes: float, transfer_us: float, link_gbps: float | None
) -> tuple[float | None, float | None, float | None]:
    """(algbw, busbw, busbw / the link's peak) of ``nbytes`` moved in ``transfer_us``, GB/s: the one
    definition for the bandwidth over the kernels' time and over the time from the last member's
    arrival (``analysis.run.clocks``). None where the time is not positive or the factor unknown."""
    if transfer_us <= 0:
        return None, None, None
    algbw = nbytes / transfer_us / 1e3
    factor = bus_factor(kind, group_size)
    busbw = algbw * factor if factor is not None else None
    return algbw, busbw, busbw / link_gbps if busbw is not None and link_gbps else None


def message_bytes(args: CommArgs | None) -> int | None:
    """nccl-tests' message size of one call: the larger buffer, in bytes; None when unknown."""
    if args is None or args.dtype is None:
        return None
    size = ELEMENT_BYTES.get(args.dtype)
    nelems = max(args.in_nelems, args.out_nelems)
    if size is None or nelems < 0:
        return None
    return nelems * size


def group_key(args: CommArgs | None) -> str | None:
    """A process group's identity across ranks: its name plus its ranks (names are hashes of the
    ranks in torch >= 2.3, but "0" on every rank's default group of older versions)."""
    if args is None or args.group is None:
        return None
    return f"{args.group}{args.group_ranks or ''}"


def group_label(args: CommArgs | None, pg_config: Sequence[object] | None = None) -> str | None:
    """What to call a group: its description ("mesh_tp", "default_pg"), else its name."""
    if args is None:
        return None
    if args.group_desc and args.group_desc != "undefined":
        return args.group_desc
    for pg in pg_config or ():
        if isinstance(pg, dict) and str(pg.get("pg_name")) == args.group and isinstance(pg.get("pg_desc"), str):
            return str(pg["pg_desc"])
    return args.group


def protocol_of(kernel_name: str) -> str | None:
    """Algorithm and protocol, for kernels whose name fixes them (NCCL < 2.19), else None."""
    m = _PROTOCOL.search(kernel_name)
    return m.group(1) if m else None
