"""Peak bandwidth of the links collectives run over, and the choice of link for a GPU.

Values are **unidirectional GB/s per GPU** (1e9 bytes/s), the ceiling of nccl-tests' *bus
bandwidth*: a ring collective sends and receives at once, so busbw can approach the one-way
figure, never the bidirectional one vendors quote first (NVLink 4's "900 GB/s" is 450 each
way). Cross-node groups are bounded by the network instead, one 400 Gb/s NIC per GPU.

The trace names the GPU, not the topology, so the link is inferred from the model (an H100
SXM has NVLink 4; an L40S has only PCIe) and a group larger than the GPU's NVLink domain is
taken to span nodes. ``AnalysisOptions.interconnect`` overrides both (a key below, or GB/s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..fmt import gbps as fmt_gbps


@dataclass(frozen=True)
class Link:
    key: str
    gbps: float  # unidirectional, per GPU
    source: str


LINKS: dict[str, Link] = {
    link.key: link
    for link in (
        Link("NVLink 5", 900.0, "NVIDIA Blackwell datasheets: 1.8 TB/s bidirectional per GPU (18 links)"),
        Link("NVLink 4", 450.0, "NVIDIA H100/H200 SXM datasheets: 900 GB/s bidirectional per GPU (18 links)"),
        Link("NVLink 4 bridge (H100 NVL)", 300.0, "NVIDIA H100 NVL datasheet: 600 GB/s bidirectional bridge"),
        Link("NVLink 3", 300.0, "NVIDIA A100 SXM datasheet: 600 GB/s bidirectional per GPU (12 links)"),
        Link("NVLink 2", 150.0, "NVIDIA V100 SXM2 datasheet: 300 GB/s bidirectional per GPU (6 links)"),
        Link("PCIe 5 x16", 63.0, "PCI-SIG: 32 GT/s x16, 128b/130b, one way"),
        Link("PCIe 4 x16", 31.5, "PCI-SIG: 16 GT/s x16, 128b/130b, one way"),
        Link("PCIe 3 x16", 15.75, "PCI-SIG: 8 GT/s x16, 128b/130b, one way"),
        Link("xGMI (MI300X)", 448.0, "AMD Instinct MI300X datasheet: 896 GB/s bidirectional (7 links)"),
        Link(
            "xGMI (MI250X, per GCD)",
            200.0,
            "AMD Instinct MI250X datasheet: 8 links x 100 GB/s bidirectional, 4 per GCD",
        ),  # noqa: E501
        Link("InfiniBand NDR 400G", 50.0, "400 Gb/s per GPU (one ConnectX-7 NIC per GPU), one way"),
    )
}

# GPU model -> its own scale-up link and how many GPUs share that domain. Order matters as in
# analysis.peaks: the first pattern that matches the device name wins.
_GPU_LINKS: list[tuple[str, str, int]] = [
    (r"\bGB200\b|\bGB300\b", "NVLink 5", 72),
    (r"\bB200\b|\bB100\b|\bB300\b", "NVLink 5", 8),
    (r"\bH200\b.*\bNVL\b", "NVLink 4", 4),  # 2- or 4-way NVLink bridge at the full 900 GB/s
    (r"\bH100\b.*\bNVL\b", "NVLink 4 bridge (H100 NVL)", 2),
    (r"\bH100\b.*\bPCI", "PCIe 5 x16", 8),
    (r"\bGH200\b|\bH200\b|\bH100\b|\bH800\b|\bH20\b", "NVLink 4", 8),
    (r"\bA100\b.*\bPCI", "PCIe 4 x16", 8),
    (r"\bA100\b|\bA800\b|\bPG509\b", "NVLink 3", 8),
    (r"\bV100\b.*\bPCI", "PCIe 3 x16", 8),
    (r"\bV100\b", "NVLink 2", 8),
    (r"\bL40S?\b|\bL4\b|\bA10G?\b|\bA30\b|\bA40\b|\bRTX\b", "PCIe 4 x16", 8),
    (r"\bT4\b", "PCIe 3 x16", 8),
    (r"\bMI3\d\dX\b", "xGMI (MI300X)", 8),
    (r"\bMI250X?\b|\bMI210\b", "xGMI (MI250X, per GCD)", 8),
]
_COMPILED = [(re.compile(p, re.IGNORECASE), key, domain) for p, key, domain in _GPU_LINKS]
NETWORK = "InfiniBand NDR 400G"


@dataclass(frozen=True)
class LinkChoice:
    link: Link | None
    source: str  # one line: why this link


def choose_link(device_name: str | None, group_size: int | None, override: str | None = None) -> LinkChoice:
    """The link a group of ``group_size`` ranks of ``device_name`` GPUs runs over."""
    if override:
        return _override(override)
    for pattern, key, domain in _COMPILED:
        if device_name and pattern.search(device_name):
            if group_size is not None and group_size > domain:
                why = f"a group of {group_size} ranks is larger than the {domain}-GPU {key} domain of a {device_name}"
                return LinkChoice(LINKS[NETWORK], f"{why}: taken to span nodes")
            return LinkChoice(LINKS[key], f"{key} of a {device_name} (inferred from the GPU model)")
    return LinkChoice(None, f"no link known for the device {device_name!r}: pass --interconnect")


def _override(text: str) -> LinkChoice:
    if text in LINKS:
        return LinkChoice(LINKS[text], "given (--interconnect)")
    try:
        gbps = float(text)
    except ValueError:
        return LinkChoice(None, f"unknown --interconnect {text!r} (a GB/s figure or one of: {', '.join(LINKS)})")
    if not gbps > 0:
        return LinkChoice(None, f"--interconnect {text!r} is not a positive GB/s figure")
    return LinkChoice(Link(f"{fmt_gbps(gbps)} link", gbps, "given (--interconnect)"), "given (--interconnect)")
