"""An op's recorded inputs (``Input Dims``, ``Input type``, ``Concrete Inputs``), decoded.

``record_shapes=True`` records them on ``cpu_op`` events as raw JSON; the decoder keeps the
bytes of the ops that have a FLOP or byte formula, and they are parsed here only when a
formula needs them. Shapes are checked for plausibility (``plausible_shape``): a recorded
shape with a negative dim or an impossible size makes the op's cost unknown, never huge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgspec

from ...trace.tables import OpInputs


def dtype_of(type_name: str | None) -> str | None:
    """Normalise a recorded ``Input type`` string to a compute dtype.

    ``"c10::BFloat16"`` -> ``"bf16"``, ``"c10::Half"`` -> ``"fp16"``, ``"float"`` ->
    ``"fp32"``, ``"c10::Float8_e4m3fn"`` -> ``"fp8"``. ``None`` for non-float
    types and empty strings.
    """
    if not type_name:
        return None
    t = type_name.lower()
    if "bfloat16" in t:
        return "bf16"
    if t in ("c10::half", "half") or "float16" in t:
        return "fp16"
    if "float8" in t:
        return "fp8"
    if "float4" in t:
        return "fp4"
    if t in ("float", "float32"):
        return "fp32"
    if t in ("double", "float64"):
        return "fp64"
    if t in ("signed char", "int8", "c10::qint8"):
        return "int8"
    return None


@dataclass(frozen=True)
class Parsed:
    """An op's recorded inputs, decoded. ``dims[i]`` is ``[]`` for non-tensors."""

    dims: list[Any]
    types: list[str]
    concrete: list[str]

    def shape(self, i: int) -> list[int] | None:
        """Shape of argument ``i`` if it is a tensor with known, plausible dims, else None."""
        if i >= len(self.dims):
            return None
        d = self.dims[i]
        if not isinstance(d, list) or not d or not all(isinstance(x, int) for x in d):
            return None
        return d if plausible_shape(d) else None

    def value(self, i: int) -> Any:
        """Concrete value of argument ``i`` (int, float, bool, list, str) or None."""
        if i >= len(self.concrete):
            return None
        return _concrete_value(self.concrete[i])

    def dtype(self, i: int = 0) -> str | None:
        if i < len(self.types):
            return dtype_of(self.types[i])
        return None


# A recorded shape with a negative dim, or a tensor of more than 2^38 elements (more
# than any GPU's memory holds at one byte each), is no real shape: its op's FLOPs are
# unknown rather than 1e29. One op above 2^60 FLOPs (15+ minutes of a 1 PFLOP/s GPU)
# is refused the same way.
MAX_NUMEL = 1 << 38
MAX_OP_FLOPS = float(1 << 60)


def plausible_shape(dims: Sequence[Any]) -> bool:
    n = 1
    for x in dims:
        if type(x) is not int or x < 0:
            return False
        n *= x
        if n > MAX_NUMEL:
            return False
    return True


_decode_list = msgspec.json.Decoder(list[Any])


def decode_list(raw: bytes | None) -> list[Any]:
    if not raw:
        return []
    try:
        v = _decode_list.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return []
    return v


def parse_inputs(inputs: OpInputs) -> Parsed:
    dims = decode_list(inputs.dims)
    types = [t if isinstance(t, str) else "" for t in decode_list(inputs.types)]
    concrete = [c if isinstance(c, str) else "" for c in decode_list(inputs.concrete)]
    return Parsed(dims, types, concrete)


@lru_cache(maxsize=4096)
def _concrete_value(s: str) -> Any:
    """Parse one ``Concrete Inputs`` string: ``"[2, 2]"``, ``"False"``, ``"1"``, ``"0."``."""
    if s is None:
        return None
    s = s.strip()
    if not s:
        return None
    if s in ("True", "False"):
        return s == "True"
    if s.startswith("[") and s.endswith("]"):
        inner = s[1:-1].strip()
        if not inner:
            return []
        out: list[Any] = []
        for part in inner.split(","):
            v = _concrete_value(part.strip())
            out.append(v)
        return out
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def concrete_ints(v: Any, n: int) -> list[int] | None:
    """A concrete int list of length ``n`` (a single int is broadcast), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return [v] * n
    if isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        if len(v) == n:
            return v
        if len(v) == 1:
            return v * n
    return None
