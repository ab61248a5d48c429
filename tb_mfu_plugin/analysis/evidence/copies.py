"""The evidence of the copy rules (``diagnosis/rules/copies.py``). Per step: the mean analysed step."""

from __future__ import annotations

import msgspec

from .common import FindingEvidence
from .units import Bandwidth, Bytes, Count, Share, Text, Time


class PageableCopy(msgspec.Struct, kw_only=True):
    direction: Text
    count_per_step: Count
    bytes_per_step: Bytes
    us_per_step: Time
    gbps: Bandwidth | None  # achieved
    pinned_gbps: Bandwidth  # what pinned memory would reach
    pinned_gbps_source: Text  # measured on the trace, or assumed
    us_per_step_if_pinned: Time


class PageableMemcpyEvidence(FindingEvidence, tag="pageable_memcpy"):
    copies: list[PageableCopy]
    bytes_per_step: Bytes
    us_per_step: Time
    with_no_kernel_share: Share  # of their time, with no kernel alongside


class SmallCopiesEvidence(FindingEvidence, tag="small_copies"):
    small_copies_per_step: Count
    d2d_copies_per_step: Count
    d2d_bytes_per_step: Bytes
    cat_ops_per_step: Count
    us_per_step: Time
    us_per_step_alone: Time  # with no kernel alongside


class CopyRow(msgspec.Struct, kw_only=True):
    direction: Text
    memory: Text
    us_per_step: Time
    gbps: Bandwidth | None


class MemcpyBoundEvidence(FindingEvidence, tag="memcpy_bound"):
    copy_only_us_per_step: Time
    named_elsewhere_us_per_step: Time  # pageable_memcpy's and small_copies'
    copy_us_per_step: Time
    memcpy_time_share: Share
    gain_if_overlapped_us_per_step: Time
    bytes_per_step: dict[str, Bytes]  # by direction: H2D, D2H, D2D, P2P
    copies: list[CopyRow]
