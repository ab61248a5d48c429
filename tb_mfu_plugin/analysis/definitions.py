"""Every figure a face shows: its name, label, one-line definition and unit, in one table.

The name is the report's key (``summary.<name>`` and ``steps[].<name>``, or the block it is in:
``breakdown.idle_other``, ``launches.short_kernel_share``, ``flops.hfu``, ``ranks.bubble_share``,
``strategies.mfu_min``...). The CLI and the tab label a figure with its ``label`` and explain it
with its ``definition``; ``scripts/gen_definitions.py`` writes the table into the tab's
``frontend/src/definitions.ts`` and into docs/metrics.md and the README, and
``tests/test_definitions.py`` keeps all four equal. The ``unit`` names the one formatting function
of that unit (``fmt.FORMATTERS`` in Python, ``format.ts`` ``byUnit`` in the tab).

Aggregation: a ``summary`` share is time-weighted over the analysed steps (Σ part / Σ step time,
``analysis.time.aggregate``) and a per-step count is the mean step's; ``AGGREGATION`` says it in
the words the faces put beside a summary figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["share", "time", "bytes", "flops", "flop_rate", "tflop_rate", "bandwidth", "count"]
# What each unit is in the report (its formatter turns it into text with the unit's symbol).
UNIT_MEANING: dict[Unit, str] = {
    "share": "a fraction 0-1, shown as a percentage",
    "time": "µs, shown in ns, µs, ms or s",
    "bytes": "bytes, shown in decimal units (1 MB = 10⁶ B, as GB/s)",
    "flops": "FLOPs (a count), shown in MFLOP to PFLOP",
    "flop_rate": "FLOP/s, shown in TFLOP/s",
    "tflop_rate": "TFLOP/s",
    "bandwidth": "GB/s (10⁹ bytes per second)",
    "count": "a number per step",
}

AGGREGATION = "time-weighted over the analysed steps"
MEDIAN_STEP = "median over the analysed steps of the per-step values"


@dataclass(frozen=True)
class Definition:
    label: str  # what every face calls it
    definition: str  # one line, the same text in the tab's help, the CLI, docs/metrics.md and the README
    unit: Unit


def _d(label: str, definition: str, unit: Unit) -> Definition:
    return Definition(label, definition, unit)


DEFINITIONS: dict[str, Definition] = {
    # ---- MFU and FLOPs
    "mfu": _d(
        "MFU",
        "Model FLOPs utilisation over the analysed steps: all their model FLOPs / (all their time × the peak "
        "FLOP/s of the matmul dtype)",
        "share",
    ),
    "mfu_median_step": _d(
        "MFU, median step",
        "The median of the per-step MFUs (each step's FLOPs / its time / peak): the steady state, which a slow "
        "first step does not move (summary.distribution.mfu.median)",
        "share",
    ),
    "achieved_flops": _d(
        "Achieved",
        "Model FLOP/s over the analysed steps: their FLOPs / their time (MFU × peak)",
        "flop_rate",
    ),
    "flops.achieved_tflops_while_busy": _d(
        "Achieved while GPU busy",
        "Executed FLOPs / the time the GPU was busy: the upper view that MFU's lower bound matches",
        "tflop_rate",
    ),
    "flops_per_step": _d(
        "FLOPs / step",
        "Model FLOPs of the mean step (FlopCounterMode convention, activation-checkpoint re-runs left out); "
        "unknown when no op was counted",
        "flops",
    ),
    "flops.hfu": _d(
        "HFU",
        "Hardware FLOPs utilisation: every executed FLOP (checkpoint re-runs too) / time / peak",
        "share",
    ),
    "device.peak_flops": _d(
        "Peak",
        "The dense peak FLOP/s of the GPU for the matmul dtype, which MFU is measured against",
        "flop_rate",
    ),
    # ---- step time
    "step_time_us": _d(
        "Median step time",
        "The median duration of the analysed steps (ProfilerStep#N, extended to the GPU work it launched)",
        "time",
    ),
    "step_time_mean_us": _d(
        "Mean step time",
        "Σ step time / steps: the step that the shares, the waterfall and MFU apply to",
        "time",
    ),
    # ---- GPU time
    "gpu_busy_share": _d(
        "GPU busy",
        "Share of the step with any kernel, copy or memset running on the GPU",
        "share",
    ),
    "kernel_time_share": _d(
        "Kernel time",
        "Share of the step with any kernel running (the PyTorch Profiler tab's GPU Utilization)",
        "share",
    ),
    "memcpy_time_share": _d("Memcpy time", "Share of the step with a copy running", "share"),
    "memset_time_share": _d("Memset time", "Share of the step with a memset running", "share"),
    "idle_share": _d(
        "GPU idle",
        "Share of the step with nothing running on the GPU: 1 − GPU busy",
        "share",
    ),
    "gpu_idle_after_sync_share": _d(
        "GPU idle after syncs",
        "GPU idle time that host-device syncs explain: in each idle gap, the host time blocked in the syncs "
        "that returned in it, at most the gap (what removing them would give back)",
        "share",
    ),
    "host_sync_blocked_share": _d(
        "Host blocked in syncs",
        "Host time blocked in synchronising calls (.item(), blocking copies, synchronize) / step time: a host "
        "figure, above GPU idle when the host waits while the GPU works",
        "share",
    ),
    # ---- the breakdown (exclusive parts of the step, summing to 1)
    "breakdown.kernel": _d("Kernels", "GPU time with at least one kernel running", "share"),
    "breakdown.memcpy": _d("Memcpy only", "GPU time copying, with no kernel running", "share"),
    "breakdown.memset": _d("Memset only", "GPU time in memsets only", "share"),
    "breakdown.idle_after_sync": _d(
        "GPU idle after syncs",
        "The GPU idle after syncs figure (gpu_idle_after_sync_share), as a part of the step",
        "share",
    ),
    "breakdown.idle_other": _d(
        "Other GPU idle",
        "GPU idle that syncs do not explain: data loading, launch gaps, host work",
        "share",
    ),
    # ---- efficiency
    "sm_efficiency": _d(
        "SM efficiency",
        "Share of the SMs with work (blocks per SM capped at 1), integrated over the step: the PyTorch Profiler "
        "tab's Est. SM Efficiency",
        "share",
    ),
    "achieved_occupancy": _d(
        "Occupancy",
        "Estimated achieved occupancy, weighted by kernel time over the kernels that report it",
        "share",
    ),
    "tensor_core_kernel_share": _d(
        "Tensor-core kernels",
        "Share of kernel time in tensor-core kernels, by the kernel-name family table",
        "share",
    ),
    "unknown_core_kernel_share": _d(
        "Unknown-unit kernels",
        "Share of kernel time in GEMM-like kernels that no family names (tensor-core use unknown)",
        "share",
    ),
    "cuda_core_matmul_kernel_share": _d(
        "CUDA-core matmuls",
        "Share of kernel time in matmul/conv kernels on the CUDA cores (FFMA, SIMT, SGEMM, GEMV)",
        "share",
    ),
    # ---- counts per step
    "kernels_per_step": _d("Kernels / step", "Kernels the step launched (graph replays' kernels too)", "count"),
    "sync_count_per_step": _d("Syncs / step", "Host-device synchronising calls per step", "count"),
    "h2d_bytes_per_step": _d("H2D / step", "Bytes copied host to device per step", "bytes"),
    "d2h_bytes_per_step": _d("D2H / step", "Bytes copied device to host per step", "bytes"),
    "d2d_bytes_per_step": _d("D2D / step", "Bytes copied device to device per step", "bytes"),
    "p2p_bytes_per_step": _d("P2P / step", "Bytes copied peer to peer per step", "bytes"),
    # ---- launches
    "launches.short_kernel_share": _d("Short kernels", "Share of the kernels under 10 µs", "share"),
    "launches.launch_api_us_per_step": _d("Launch API / step", "Host time in kernel launch calls per step", "time"),
    "launches.graph_launches_per_step": _d(
        "Graph replays / step",
        "CUDA/HIP graph launches per step: each replays a whole captured graph",
        "count",
    ),
    "launches.graph_kernels_per_step": _d(
        "Kernels in graphs",
        "Kernels per step run by graph replays, not launched one by one by the host",
        "count",
    ),
    # ---- distributed
    "ranks.exposed_communication_us_per_step": _d(
        "Exposed comm / step",
        "Collective time per step with no compute kernel running beside it",
        "time",
    ),
    "ranks.overlap_ratio": _d("Overlap", "Share of the communication time running beside compute", "share"),
    "ranks.collective_wait_us_per_step": _d(
        "Waits / step",
        "Time inside collectives waiting for a member that started later (clocks aligned), per step",
        "time",
    ),
    "ranks.bubble_share": _d("Bubble", "Share of a pipeline stage's step idle for the other stages", "share"),
    "strategies.mfu_min": _d(
        "MFU per rank, median step",
        "Lowest / mean / highest over the ranks of each rank's MFU, median step",
        "share",
    ),
}


def label(name: str) -> str:
    return DEFINITIONS[name].label


def definition(name: str) -> str:
    return DEFINITIONS[name].definition


def help_text(name: str) -> str:
    """The label's tooltip in the tab and the CLI's line: ``definition``."""
    return DEFINITIONS[name].definition
