"""Every number a diagnosis rule compares against, in one place. Data, not code: pass your
own ``Thresholds(...)`` to ``diagnose`` (or ``dataclasses.replace(DEFAULT, ...)``).

Which rule reads which is declared on the rule (``@rule(thresholds=...)``, checked by
tests/diagnosis/test_registry.py) and tabled in docs/diagnosis.md; the sections below
group them by what they are about."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..analysis.options import AnalysisOptions
from ..analysis.time.idle_gaps import LAUNCH_GAP_MAX_US, SYNC_GAP_TOLERANCE_US


@dataclass(frozen=True)
class Thresholds:
    # --- severity, from the estimated gain as a share of the step
    high_share: float = 0.10
    medium_share: float = 0.03

    # --- idle-gap attribution (Context.gaps: every rule that reads the GPU idle gaps, and the waterfall)
    # A sync "causes" the GPU gap it returns in; host and device clocks differ by a few µs.
    # (The analysis attributes the gaps once, for the report's gpu_idle_after_sync_share too, so
    # the two defaults live in analysis.idle_gaps.)
    sync_gap_tolerance_us: float = SYNC_GAP_TOLERANCE_US
    # Gaps the host caused by launching (no sync, no data loading) count as launch gaps up
    # to this length; longer host-caused gaps are reported as GPU idle with what the host did.
    launch_gap_max_us: float = LAUNCH_GAP_MAX_US

    # --- host-device syncs
    sync_min_per_step: float = 1.0  # at least one host-device sync per step
    sync_max_findings: int = 5  # one finding per cause; the rest are merged into the last

    # --- pageable copies
    pageable_min_bytes_per_step: float = 1 << 20  # 1 MiB
    pageable_min_share: float = 0.01  # ... or 1 % of the step in pageable copies
    # Pinned host<->device bandwidth assumed when the trace has no large pinned copy to measure,
    # by compute capability (PCIe Gen5 / Gen4 / Gen3 x16, what such hosts typically reach).
    pinned_gbps_by_cc: tuple[tuple[float, float], ...] = ((9.0, 40.0), (8.0, 20.0), (0.0, 12.0))
    pinned_gbps_unknown: float = 20.0
    pinned_measure_min_bytes: float = 1 << 20  # a pinned copy must average >= 1 MiB to be measured

    # --- copies on the critical path
    memcpy_bound_share: float = 0.20  # copies running with no kernel alongside, share of step

    # --- small copies
    small_copies_per_step: float = 32.0  # copies under 64 KiB per step
    d2d_copies_per_step: float = 64.0
    cat_ops_per_step: float = 64.0
    small_copies_min_share: float = 0.005

    # --- attention chains
    attention_max_launches_between: int = 8  # scale/mask/cast kernels between chain members

    # --- per-parameter optimizer
    optimizer_min_kernels_per_step: float = 64.0
    optimizer_max_multi_tensor_share: float = 0.5  # above this the optimizer is foreach/fused already
    # A fused / foreach optimizer does the same math in far fewer, fuller kernels; assume its
    # kernel time is this share of the per-parameter kernels' busy time.
    optimizer_fused_work_ratio: float = 0.5
    # A fused step's host time per per-parameter kernel it replaces: it still walks the parameters
    # in Python. Measured on fused AdamW steps (GPT, HF GPT-2) on an H200 and three H100 hosts:
    # 0.8-1.3 µs.
    optimizer_fused_host_us_per_kernel: float = 1.0

    # --- elementwise chains
    elementwise_min_run: int = 4  # consecutive non-matmul kernels on one stream
    elementwise_min_share: float = 0.05  # estimated gain, share of step

    # --- kernels launched one by one
    launch_min_kernels_per_step: float = 50.0
    launch_short_kernel_us: float = 10.0  # median kernel under this, or ...
    launch_short_kernel_share: float = 0.5  # ... this share of kernels under 10 µs
    launch_gap_min_share: float = 0.10  # launch gaps, share of step
    # (only kernels the host launched one by one count, not graph replays' kernels)

    # --- kernels of CUDA graph replays
    graph_min_kernels_per_step: float = 50.0  # kernels run by graph replays
    graph_short_kernel_us: float = 10.0  # their median under this, or ...
    graph_short_kernel_share: float = 0.5  # ... this share of them under 10 µs
    graph_gap_min_share: float = 0.05  # GPU idle between a replay's kernels, share of step

    # --- SM efficiency
    low_blocks_per_sm: float = 1.0
    low_sm_min_kernel_us: float = 5.0  # shorter kernels are latency-bound: more blocks do not help
    low_sm_min_share: float = 0.05  # estimated lost time, share of step

    # --- tensor cores
    no_tc_min_share: float = 0.05  # non-tensor-core matmul/conv time, share of step
    tensor_core_speedup: float = 2.0  # conservative speed-up of those kernels on tensor cores

    # --- data loading
    dataloader_min_share: float = 0.05

    # --- communication
    comm_exposed_min_share: float = 0.10  # collective kernels with no compute alongside, share of step
    # Bus bandwidth (nccl-tests convention) far below the link's peak, measured from the last member's
    # arrival (only when the group's other traces were analysed too: diagnosis.distributed).
    busbw_low_share: float = 0.30  # busbw under this share of the link's peak ...
    busbw_min_exposed_share: float = 0.03  # ... on a collective whose exposed time is this share of the step
    busbw_target_share: float = 0.70  # the share of the peak a well-sized collective reaches (gain estimate)
    busbw_small_message_bytes: float = 8 << 20  # mean message under this: latency-bound (NVLink needs ~10 MB)

    # --- pipeline parallelism
    bubble_min_share: float = 0.10  # send/recv with no compute alongside, share of step

    # --- GPU idle no other finding claims
    gpu_idle_min_share: float = 0.10  # idle with no other cause, share of step
    gpu_idle_top_gaps: int = 3

    # --- the roofline
    roofline_far_below: float = 0.5  # ops under this share of their roof are named
    roofline_min_op_share: float = 0.005  # an op's lost time, share of step, to be named
    roofline_min_share: float = 0.05  # all named ops' lost time, share of step, to fire
    roofline_small_launch_us: float = 10.0  # memory-bound calls shorter than this are latency-bound
    roofline_tile: int = 64  # GEMM dims not a multiple of this waste tile work
    roofline_top_ops: int = 5

    # --- device memory (profile_memory=True traces: analysis.memory)
    leak_min_bytes_per_step: float = 1 << 20  # allocated at step start grows this much a step, in every step
    leak_min_steps: int = 3  # analysed steps of known start (two growths at least)
    leak_high_risk_steps: float = 10_000  # high when the device fills within this many more steps
    near_oom_share: float = 0.90  # the peak (allocated or reserved) above this share of the device
    fragmentation_min_share: float = 0.30  # reserved - allocated at the peak, share of reserved ...
    fragmentation_min_bytes: float = 1 << 30  # ... and at least this much
    headroom_min_factor: float = 2.0  # the batch could at least double within 90 % of the device
    headroom_max_suggested: float = 8.0  # the largest batch factor a finding suggests at once
    checkpoint_min_share: float = 0.05  # recompute time, share of step


DEFAULT = Thresholds()


def from_options(options: AnalysisOptions) -> Thresholds:
    """The thresholds with the options' overrides (``--threshold NAME=VALUE``); ValueError names a
    bad one."""
    if not options.thresholds:
        return DEFAULT
    changes: dict[str, Any] = {}
    for name, value in options.thresholds:
        current = getattr(DEFAULT, name, None)
        if name not in Thresholds.__dataclass_fields__ or not isinstance(current, int | float):
            numeric = sorted(k for k in Thresholds.__dataclass_fields__ if isinstance(getattr(DEFAULT, k), int | float))
            raise ValueError(f"unknown diagnosis threshold {name!r} (known: {', '.join(numeric)})")
        changes[name] = type(current)(value)
    return dataclasses.replace(DEFAULT, **changes)
