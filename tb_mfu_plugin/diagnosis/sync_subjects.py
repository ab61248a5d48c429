"""The user-facing call behind a host-device sync: ``tensor.item()``, ``torch.cuda.synchronize()``,
a blocking copy, an op with a data-dependent shape, from the sync's API and the ops around it.

Words, not analysis: ``Context.sync_causes`` finds each sync's API, ops and copy direction in the
trace, and the ``sync_point`` rule (``rules/syncs.py``) picks its fix text from the subject.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SyncCause:
    subject: str  # what the user wrote, e.g. "tensor.item()"
    api: str
    op: str | None
    root_op: str | None
    direction: str | None  # H2D / D2H for blocking copies


_EXPLICIT = {
    "cudaDeviceSynchronize": "torch.cuda.synchronize()",
    "cuCtxSynchronize": "torch.cuda.synchronize()",
    "hipDeviceSynchronize": "torch.cuda.synchronize()",
    "cudaStreamSynchronize": "torch.cuda.Stream.synchronize() (e.g. torch.cuda.current_stream().synchronize())",
    "cuStreamSynchronize": "torch.cuda.Stream.synchronize() (e.g. torch.cuda.current_stream().synchronize())",
    "hipStreamSynchronize": "torch.cuda.Stream.synchronize() (e.g. torch.cuda.current_stream().synchronize())",
    "cudaEventSynchronize": "torch.cuda.Event.synchronize() / Event.elapsed_time()",
    "cuEventSynchronize": "torch.cuda.Event.synchronize() / Event.elapsed_time()",
    "hipEventSynchronize": "torch.cuda.Event.synchronize() / Event.elapsed_time()",
}
_SCALAR = {
    "aten::item": "tensor.item()",
    "aten::_local_scalar_dense": "tensor.item() / float(tensor) / int(tensor)",
    "aten::is_nonzero": "bool(tensor) / `if tensor:`",
    "aten::equal": "torch.equal()",
    "aten::allclose": "torch.allclose()",
}
_DATA_DEPENDENT = (
    "aten::nonzero",
    "aten::masked_select",
    "aten::unique",
    "aten::_unique",
    "aten::_unique2",
    "aten::unique_consecutive",
    "aten::unique_dim",
    "aten::repeat_interleave",
    "aten::index",
    "aten::argwhere",
    "aten::nonzero_numpy",
)
_COPY_OPS = ("aten::to", "aten::_to_copy", "aten::copy_", "aten::cpu", "aten::cuda", "aten::contiguous", "aten::clone")


# A blocking copy of a value the constructor built on the host (``DeviceFacts.from_host_value``)
FROM_HOST_VALUE = "torch.tensor(value, device=...) (a blocking host-to-device copy of a host value)"
# GradScaler.step's read of found_inf before an optimizer that cannot take it on the GPU
# (``DeviceFacts.reads_found_inf``): the user wrote ``scaler.step(optimizer)``, not ``.item()``
GRAD_SCALER_STEP = "torch.amp.GradScaler.step() (reads found_inf with .item())"


def sync_subject(
    api: str,
    op: str | None,
    root: str | None,
    direction: str | None,
    from_host_value: bool = False,
    found_inf: bool = False,
) -> str:
    """The user-facing call behind a sync, from the API and the ops around it (``found_inf``: the
    scalar read is GradScaler.step's)."""
    if op is None and root is None:
        if api in _EXPLICIT:
            return _EXPLICIT[api]
        return f"a synchronous {api} outside any PyTorch op (custom extension or library)"
    # 2021 traces record record_function annotations (Optimizer.step#..., DataLoader) as ops:
    # the user-facing op is then the innermost one.
    name = root if root is not None and root.startswith("aten::") else op or root or api
    if found_inf:
        return GRAD_SCALER_STEP
    if name in _SCALAR:
        return _SCALAR[name]
    if (op or "") == "aten::_local_scalar_dense" and name not in _COPY_OPS:
        return f"{name} (reads a GPU scalar: .item())"
    if name in _DATA_DEPENDENT:
        return f"{name} (data-dependent output shape)"
    if name in _COPY_OPS or (op in _COPY_OPS):
        if direction == "H2D" and from_host_value:
            return FROM_HOST_VALUE
        if direction == "H2D":
            return f"blocking host-to-device copy ({name}: tensor.to(device) / .cuda() without non_blocking=True)"
        if direction == "D2H":
            return f"device-to-host copy ({name}: tensor.cpu() / .numpy() / .tolist() / .to('cpu'))"
        return f"blocking copy ({name})"
    return f"{name} (calls {api})"
