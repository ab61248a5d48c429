"""The byte model's vocabulary: element sizes, ``OpCost``, and reading tensors out of recorded inputs.

See ``op_bytes`` for the model and its table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import prod

from ..flops.recorded_inputs import Parsed

# Tensor-list dtypes are not recorded (the type reads "TensorList"): assume fp32, the
# dtype of AMP master weights, gradients and optimizer states. Estimates using it are inexact.
LIST_ELEM_BYTES = 4

_ELEM_BYTES: dict[str, int] = {
    "c10::bfloat16": 2,
    "bfloat16": 2,
    "c10::half": 2,
    "half": 2,
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "long int": 8,
    "int64_t": 8,
    "long": 8,
    "int": 4,
    "int32": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::half>": 4,
}
# c10::ScalarType codes, as recorded in Concrete Inputs (softmax backward's input_dtype)
SCALAR_TYPE_BYTES = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}


def elem_bytes(type_name: str | None) -> int | None:
    """Bytes per element of a recorded ``Input type`` (``"c10::BFloat16"`` -> 2), None if unknown."""
    if not type_name:
        return None
    t = type_name.lower()
    got = _ELEM_BYTES.get(t)
    if got is not None:
        return got
    if "float8" in t:
        return 1
    if "float4" in t:
        return 1  # two e2m1 values per byte; packed tensors record the byte count as elements
    return None


@dataclass(frozen=True)
class OpCost:
    bytes: float  # minimum HBM traffic
    flops: float
    op_class: str
    dtype: str | None = None
    exact: bool = True  # False when an assumption was needed (tensor-list dtype, conv output...)


ByteFn = Callable[[Parsed, str], "OpCost | None"]


@dataclass(frozen=True)
class ByteFormula:
    op_class: str  # elementwise | reduction | norm | softmax | embedding | copy | pooling | ...
    fn: ByteFn


# ---------------------------------------------------------------------------
# tensor helpers


def is_tensor(p: Parsed, i: int) -> bool:
    return p.shape(i) is not None and (i >= len(p.types) or p.types[i] not in ("TensorList", "Scalar"))


def numel(shape: Sequence[int]) -> int:
    return prod(shape) if shape else 1


def elem_size(p: Parsed, i: int, default: int = 4) -> int:
    got = elem_bytes(p.types[i]) if i < len(p.types) else None
    return got if got is not None else default


def tensor_bytes(p: Parsed, i: int) -> int:
    """Bytes of tensor argument ``i`` (0 when it is not a tensor with known dims)."""
    s = p.shape(i)
    return numel(s) * elem_size(p, i) if s is not None else 0


def broadcast(shapes: list[list[int]]) -> list[int] | None:
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for k, d in enumerate(s):
            j = n - len(s) + k
            if out[j] == 1:
                out[j] = d
            elif d not in (1, out[j]):
                return None
    return out


def tensor_list(p: Parsed, i: int) -> list[list[int]] | None:
    """Shapes of a recorded TensorList argument; None when the list was not recorded.

    The profiler writes long lists as ``[]`` (observed on torch 2.11 for the ~60-tensor
    lists of a GPT's fused AdamW); a list of 0-dim tensors is ``[[], [], ...]``.
    """
    if i >= len(p.dims):
        return None
    d = p.dims[i]
    if not isinstance(d, list) or not d or not all(isinstance(x, list) for x in d):
        return None
    if not all(all(isinstance(v, int) for v in x) for x in d):
        return None
    return d


def list_numel(shapes: list[list[int]] | None) -> int:
    return sum(numel(s) for s in shapes) if shapes else 0


def zero_dim(p: Parsed, i: int) -> bool:
    """Argument ``i`` is a 0-dim tensor: dims ``[]`` with a tensor dtype (a step counter)."""
    return i < len(p.dims) and p.dims[i] == [] and i < len(p.types) and elem_bytes(p.types[i]) is not None
