"""Which table and kind a decoded event belongs to: its category as written, or, for writers
that leave ``cat`` out, its name and args.

A category maps to ``table * 8 + kind``: table 0 is "not analysed" (flows, Python functions,
overhead markers...), 1 the cpu table, 2 the gpu table, 3 "no category: look closer".
"""

from __future__ import annotations

from typing import Any

from ..tables import ANNOTATION, DRIVER, KERNEL, MEMCPY, MEMSET, OP, RUNTIME
from . import schema
from .schema import Event
from .values import INT64_MAX

# cat as written -> table * 8 + kind; table 0 = skip, 1 = cpu, 2 = gpu, 3 = no cat
CPU, GPU, NO_CAT = 1, 2, 3
CAT_CLASS: dict[str, int] = {
    **{c: GPU * 8 + KERNEL for c in schema.KERNEL_CATS},
    **{c: GPU * 8 + MEMCPY for c in schema.MEMCPY_CATS},
    **{c: GPU * 8 + MEMSET for c in schema.MEMSET_CATS},
    **{c: CPU * 8 + OP for c in schema.CPU_OP_CATS},
    **{c: CPU * 8 + ANNOTATION for c in schema.ANNOTATION_CATS},
    **{c: CPU * 8 + RUNTIME for c in schema.RUNTIME_CATS},
    **{c: CPU * 8 + DRIVER for c in schema.DRIVER_CATS},
}


def _is_id(v: Any) -> bool:
    return type(v) is int and 0 <= v <= INT64_MAX


def kind_without_category(e: Event) -> tuple[int, int] | None:
    """Classify an event that carries no ``cat`` from its name and args: (table, kind)."""
    a = e.args
    name = e.name
    if _is_id(a.device) and _is_id(a.correlation) and _is_id(a.stream):
        if name.startswith("Memcpy"):
            return (GPU, MEMCPY)
        if name.startswith("Memset"):
            return (GPU, MEMSET)
        return (GPU, KERNEL)
    if name.startswith("ProfilerStep#"):
        return (CPU, ANNOTATION)
    if _is_id(a.correlation):
        return (CPU, RUNTIME)
    return (CPU, OP)
