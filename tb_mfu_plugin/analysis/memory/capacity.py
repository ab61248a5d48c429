"""The device's memory: ``totalGlobalMem`` from the trace's ``deviceProperties``, else the
datasheet capacity of its GPU model.

Datasheet capacities are written in GB but are binary (an "80GB" A100 has 80 GiB of HBM), so the
table holds GiB; the total CUDA reports is a little below it (an H200's "141GB" shows as 139.8 GiB),
so a figure from the table is a slight overstatement, and says where it came from. Where one model
name covers several capacities (A100 40 or 80 GB, V100 16 or 32 GB, GH200 96 or 144 GB) the device
name must say which ("A100-SXM4-80GB"); otherwise the capacity is unknown, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..device.peaks import match_gpu
from ..fmt import nbytes

_GIB = 1 << 30

# peaks model key -> (GiB, a pattern the device name must match, or None for the only capacity)
CAPACITY_GIB: dict[str, list[tuple[float, str | None]]] = {
    "GB200": [(186, None)],
    "B200": [(180, None)],
    "GH200": [(144, r"144\s?G"), (96, r"\b96\s?G")],
    "H200 NVL": [(141, None)],
    "H200 SXM": [(141, None)],
    "H100 NVL": [(94, None)],
    "H100 PCIe": [(80, None)],
    "H100 SXM": [(80, None)],
    "H20": [(96, None)],
    "L40S": [(48, None)],
    "L40": [(48, None)],
    "L4": [(24, None)],
    "RTX 4090": [(24, None)],
    "A100": [(80, r"\b80\s?GB"), (40, r"\b40\s?GB")],
    "A10G": [(24, None)],
    "A10": [(24, None)],
    "A30": [(24, None)],
    "A40": [(48, None)],
    "RTX 3090 Ti": [(24, None)],
    "RTX 3090": [(24, None)],
    "T4": [(16, None)],
    "V100S PCIe": [(32, None)],
    "V100 PCIe": [(32, r"\b32\s?GB"), (16, r"\b16\s?GB")],
    "V100 SXM2": [(32, r"\b32\s?GB"), (16, r"\b16\s?GB")],
    "V100 SXM3": [(32, None)],
    "MI325X": [(256, None)],
    "MI300X": [(192, None)],
    "MI300A": [(128, None)],
    "MI250X (per GCD)": [(64, None)],
    "MI250 (per GCD)": [(64, None)],
    "MI210": [(64, None)],
}
# A device with more memory than this is no real GPU (the trace layer's MAX_MEMORY_BYTES is larger).
MAX_DEVICE_BYTES = 1 << 45


@dataclass(frozen=True)
class DeviceMemory:
    bytes: int | None
    source: str  # where the figure came from, or why it is unknown


def device_memory(props: Mapping[str, Any] | None, name: str | None) -> DeviceMemory:
    """The memory of a device whose ``deviceProperties`` entry is ``props`` (None when the trace
    has none for it) and whose name is ``name``."""
    mem = (props or {}).get("totalGlobalMem")
    if type(mem) is int and 0 < mem <= MAX_DEVICE_BYTES:
        return DeviceMemory(mem, "deviceProperties totalGlobalMem")
    name = name or str((props or {}).get("name") or "")
    g = match_gpu(name)
    variants = CAPACITY_GIB.get(g.key, []) if g is not None else []
    for gib, marker in variants:
        if marker is None or re.search(marker, name, re.IGNORECASE):
            total = int(gib * _GIB)
            return DeviceMemory(total, f"the {g.key if g else name} datasheet capacity, {nbytes(total)}")
    if g is not None and variants:
        return DeviceMemory(None, f"{name!r} does not say which {g.key} memory size it has")
    return DeviceMemory(None, f"no deviceProperties totalGlobalMem and no known capacity for {name or 'this device'!r}")
