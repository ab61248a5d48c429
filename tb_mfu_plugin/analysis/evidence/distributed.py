"""The evidence of the distributed rules (``diagnosis/rules/communication.py``,
``collective_bandwidth.py``, ``pipeline.py``). Per step: the mean analysed step."""

from __future__ import annotations

from .common import FindingEvidence, KernelRow
from .units import Bandwidth, Bytes, Count, Index, Share, Text, Time, Whole


class ExposedCommunicationEvidence(FindingEvidence, tag="exposed_communication"):
    exposed_us_per_step: Time
    pipeline_bubble_us_per_step: Time | None  # a pipeline stage's, pipeline_bubble's
    communication_us_per_step: Time
    overlapped_share: Share | None
    collectives_us_per_step: dict[str, Time]  # by kind, from the kernel names
    kernels: list[KernelRow]
    rank: Index | None
    world_size: Whole | None
    strategy_guess: Text  # the fix text's strategy
    strategy: list[Text]


class LowBusBandwidthEvidence(FindingEvidence, tag="low_bus_bandwidth"):
    kind: Text
    group: Text | None
    group_size: Whole | None
    dtype: Text | None
    role: Text | None
    busbw_gbps: Bandwidth
    algbw_gbps: Bandwidth | None
    link: Text | None
    link_gbps: Bandwidth
    link_peak_share: Share
    mean_message_bytes: Bytes | None
    count_per_step: Count
    transfer_us_per_step: Time
    exposed_us_per_step: Time
    kernel_protocol: Text | None
    causes: list[Text]


class PipelineBubbleEvidence(FindingEvidence, tag="pipeline_bubble"):
    stage: Index | None
    stages: list[Index]
    pipeline_size: Whole | None
    microbatches: Whole | None
    schedule: Text | None
    bubble_us_per_step: Time
    bubble_share: Share
    analytic_bubble_share: Share | None
    p2p_us_per_step: Time
