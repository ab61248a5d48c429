"""A finding's evidence: one struct per diagnosis rule, every field typed with its unit.

``Finding.evidence`` (``analysis.report``) is the tagged union ``Evidence`` of these structs, tagged
with the rule's id (the JSON's ``rule`` key), so a report decoded from JSON or msgpack (worker
processes, the tab's disk cache) comes back as the same types, validated. Every struct derives from
``FindingEvidence`` (the cost, the what-if re-timing, the note: ``common.py``); each leaf field's type
carries its unit (``units.py``), from which every face formats it (``show.py`` for the CLI and the
notebook, the generated ``frontend/src/evidence_fields.ts`` for the tab).

The structs live here, not beside their rules in ``diagnosis/rules/``, because the report type holds
them and the analysis layer imports nothing of the diagnosis.
"""

from __future__ import annotations

from typing import get_args

from .common import FindingEvidence, KernelRow, UnprofiledWhatIf, WhatIfEvidence
from .copies import MemcpyBoundEvidence, PageableMemcpyEvidence, SmallCopiesEvidence
from .distributed import ExposedCommunicationEvidence, LowBusBandwidthEvidence, PipelineBubbleEvidence
from .host import (
    DataloaderStallEvidence,
    GpuIdleEvidence,
    LaunchBoundEvidence,
    SyncPointEvidence,
    TinyKernelsInGraphsEvidence,
)
from .kernels import (
    BelowRooflineEvidence,
    LowSmEfficiencyEvidence,
    NaiveAttentionEvidence,
    NoTensorCoresEvidence,
    UnfusedElementwiseEvidence,
    UnfusedOptimizerEvidence,
)
from .memory import (
    ActivationCheckpointingEvidence,
    AllocatorFragmentationEvidence,
    MemoryHeadroomEvidence,
    MemoryLeakEvidence,
    NearOomEvidence,
)

# The union msgspec decodes by its tag, in the rules' order (diagnosis/rules/__init__.py); a new rule's
# struct joins here.
Evidence = (
    SyncPointEvidence
    | PageableMemcpyEvidence
    | SmallCopiesEvidence
    | MemcpyBoundEvidence
    | NaiveAttentionEvidence
    | UnfusedOptimizerEvidence
    | UnfusedElementwiseEvidence
    | LaunchBoundEvidence
    | TinyKernelsInGraphsEvidence
    | LowSmEfficiencyEvidence
    | NoTensorCoresEvidence
    | DataloaderStallEvidence
    | ExposedCommunicationEvidence
    | LowBusBandwidthEvidence
    | PipelineBubbleEvidence
    | GpuIdleEvidence
    | BelowRooflineEvidence
    | MemoryLeakEvidence
    | NearOomEvidence
    | AllocatorFragmentationEvidence
    | MemoryHeadroomEvidence
    | ActivationCheckpointingEvidence
)
EVIDENCE_TYPES: tuple[type[FindingEvidence], ...] = get_args(Evidence)


def rule_of(cls: type[FindingEvidence]) -> str:
    """The rule id a struct is tagged with."""
    tag = cls.__struct_config__.tag
    assert isinstance(tag, str), cls
    return tag


__all__ = [
    "EVIDENCE_TYPES",
    "ActivationCheckpointingEvidence",
    "AllocatorFragmentationEvidence",
    "BelowRooflineEvidence",
    "DataloaderStallEvidence",
    "Evidence",
    "ExposedCommunicationEvidence",
    "FindingEvidence",
    "GpuIdleEvidence",
    "KernelRow",
    "LaunchBoundEvidence",
    "LowBusBandwidthEvidence",
    "LowSmEfficiencyEvidence",
    "MemcpyBoundEvidence",
    "MemoryHeadroomEvidence",
    "MemoryLeakEvidence",
    "NaiveAttentionEvidence",
    "NearOomEvidence",
    "NoTensorCoresEvidence",
    "PageableMemcpyEvidence",
    "PipelineBubbleEvidence",
    "SmallCopiesEvidence",
    "SyncPointEvidence",
    "TinyKernelsInGraphsEvidence",
    "UnfusedElementwiseEvidence",
    "UnfusedOptimizerEvidence",
    "UnprofiledWhatIf",
    "WhatIfEvidence",
    "rule_of",
]
