"""Peak HBM (device memory) bandwidth per GPU model: the roofline's sloped ceiling.

Data, keyed by the same canonical model names as ``peaks.PEAKS`` (``match_gpu(name).key``).
Values are vendor datasheet figures in TB/s (1e12 bytes/s). Where one model key covers
parts with different memory (A100 40 GB vs 80 GB, PCIe vs SXM; GH200 with HBM3 or
HBM3e), the variant is chosen from ``deviceProperties``: ``totalGlobalMem`` and the name.

MI250/MI250X are per GCD (3.2 TB/s per package, two GCDs), which is what PyTorch sees as
one device, as in the FLOP/s table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..device.peaks import PEAKS, match_gpu
from ..fmt import gbps, nbytes

_GIB = 1 << 30


@dataclass(frozen=True)
class Bandwidth:
    tbps: float  # TB/s, 1e12 bytes per second
    source: str


@dataclass(frozen=True)
class Variant:
    """A memory variant of one model key: picked when the name matches and the memory fits."""

    bandwidth: Bandwidth
    name_contains: str | None = None  # case-insensitive marker in the device name ("PCI")
    min_mem_gib: float = 0.0  # totalGlobalMem at least this much


# model key -> variants, most specific first; the last one is the default.
BANDWIDTH: dict[str, list[Variant]] = {
    "GB200": [Variant(Bandwidth(8.0, "NVIDIA GB200 NVL72 datasheet: 8 TB/s HBM3e per GPU"))],
    "B200": [Variant(Bandwidth(8.0, "NVIDIA HGX B200 datasheet: 8 TB/s HBM3e per GPU"))],
    "GH200": [
        Variant(Bandwidth(4.9, "NVIDIA GH200 datasheet: 144 GB HBM3e, 4.9 TB/s"), min_mem_gib=120),
        Variant(Bandwidth(4.0, "NVIDIA GH200 datasheet: 96 GB HBM3, 4 TB/s")),
    ],
    "H200 NVL": [Variant(Bandwidth(4.8, "NVIDIA H200 NVL datasheet: 4.8 TB/s HBM3e"))],
    "H200 SXM": [Variant(Bandwidth(4.8, "NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e"))],
    "H100 NVL": [Variant(Bandwidth(3.9, "NVIDIA H100 NVL datasheet: 3.9 TB/s HBM3 per GPU"))],
    "H100 PCIe": [Variant(Bandwidth(2.0, "NVIDIA H100 PCIe datasheet: 2 TB/s HBM2e"))],
    "H100 SXM": [Variant(Bandwidth(3.35, "NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3"))],
    "H20": [Variant(Bandwidth(4.0, "NVIDIA H20 datasheet: 4.0 TB/s HBM3"))],
    "L40S": [Variant(Bandwidth(0.864, "NVIDIA L40S datasheet: 864 GB/s GDDR6"))],
    "L40": [Variant(Bandwidth(0.864, "NVIDIA L40 datasheet: 864 GB/s GDDR6"))],
    "L4": [Variant(Bandwidth(0.3, "NVIDIA L4 datasheet: 300 GB/s GDDR6"))],
    "RTX 4090": [Variant(Bandwidth(1.008, "NVIDIA Ada whitepaper: RTX 4090 1008 GB/s GDDR6X"))],
    "A100": [
        Variant(Bandwidth(1.935, "NVIDIA A100 datasheet: 80 GB PCIe, 1935 GB/s HBM2e"), "PCI", 60),
        Variant(Bandwidth(2.039, "NVIDIA A100 datasheet: 80 GB SXM, 2039 GB/s HBM2e"), None, 60),
        Variant(Bandwidth(1.555, "NVIDIA A100 datasheet: 40 GB, 1555 GB/s HBM2")),
    ],
    "A10G": [Variant(Bandwidth(0.6, "AWS G5 / NVIDIA A10G figures: 600 GB/s GDDR6"))],
    "A10": [Variant(Bandwidth(0.6, "NVIDIA A10 datasheet: 600 GB/s GDDR6"))],
    "A30": [Variant(Bandwidth(0.933, "NVIDIA A30 datasheet: 933 GB/s HBM2"))],
    "A40": [Variant(Bandwidth(0.696, "NVIDIA A40 datasheet: 696 GB/s GDDR6"))],
    "RTX 3090 Ti": [Variant(Bandwidth(1.008, "NVIDIA GA102 figures: RTX 3090 Ti 1008 GB/s GDDR6X"))],
    "RTX 3090": [Variant(Bandwidth(0.936, "NVIDIA Ampere GA102 whitepaper: RTX 3090 936 GB/s GDDR6X"))],
    "T4": [Variant(Bandwidth(0.32, "NVIDIA T4 datasheet: 320 GB/s GDDR6"))],
    "V100S PCIe": [Variant(Bandwidth(1.134, "NVIDIA V100S datasheet: 1134 GB/s HBM2"))],
    "V100 PCIe": [Variant(Bandwidth(0.9, "NVIDIA V100 datasheet: 900 GB/s HBM2"))],
    "V100 SXM2": [Variant(Bandwidth(0.9, "NVIDIA V100 datasheet: 900 GB/s HBM2"))],
    "MI325X": [Variant(Bandwidth(6.0, "AMD Instinct MI325X datasheet: 6 TB/s HBM3e"))],
    "MI300X": [Variant(Bandwidth(5.3, "AMD Instinct MI300X datasheet: 5.3 TB/s HBM3"))],
    "MI300A": [Variant(Bandwidth(5.3, "AMD Instinct MI300A datasheet: 5.3 TB/s HBM3"))],
    "MI250X (per GCD)": [Variant(Bandwidth(1.6, "AMD Instinct MI250X datasheet: 3.2 TB/s ÷ 2 GCDs"))],
    "MI250 (per GCD)": [Variant(Bandwidth(1.6, "AMD Instinct MI250 datasheet: 3.2 TB/s ÷ 2 GCDs"))],
    "MI210": [Variant(Bandwidth(1.6, "AMD Instinct MI210 datasheet: 1.6 TB/s HBM2e"))],
}

# Every bandwidth key is a FLOP/s key: one model name for both ceilings.
assert set(BANDWIDTH) <= set(PEAKS), sorted(set(BANDWIDTH) - set(PEAKS))


@dataclass(frozen=True)
class BandwidthChoice:
    bytes_per_s: float | None
    source: str


def peak_bandwidth(key: str | None, props: Mapping[str, Any] | None = None) -> BandwidthChoice:
    """The HBM bandwidth of model ``key`` (a ``peaks`` key, e.g. the MFU peak's name).

    ``props`` (the trace's ``deviceProperties`` entry) picks the memory variant. When
    ``key`` is None the device name in ``props`` is matched against the peak table.
    """
    props = props or {}
    name = props.get("name") if isinstance(props.get("name"), str) else ""
    if key is None or key not in BANDWIDTH:
        g = match_gpu(key) or match_gpu(name)
        key = g.key if g is not None else key
    variants = BANDWIDTH.get(key or "")
    if not variants:
        what = key or name or "this device"
        return BandwidthChoice(None, f"no HBM bandwidth known for {what!r}")
    mem = props.get("totalGlobalMem")
    mem_gib = mem / _GIB if isinstance(mem, int | float) and mem > 0 else None
    for v in variants:
        if v.name_contains and v.name_contains.lower() not in str(name).lower():
            continue
        if v.min_mem_gib and (mem_gib is None or mem_gib < v.min_mem_gib):
            continue
        return _choice(key or "", v.bandwidth, mem if mem_gib is not None else None)
    return _choice(key or "", variants[-1].bandwidth, mem if mem_gib is not None else None)


def _choice(key: str, bw: Bandwidth, mem_bytes: float | None) -> BandwidthChoice:
    mem = f", {nbytes(mem_bytes)}" if mem_bytes is not None else ""
    return BandwidthChoice(bw.tbps * 1e12, f"{key}{mem}: {gbps(bw.tbps * 1e3)} ({bw.source})")
