"""Every figure a face shows: its name, label, one-line definition and unit, in one table.

The name is the report's key (``summary.<name>`` and ``steps[].<name>``, or the block it is in:
``breakdown.idle_other``, ``launches.short_kernel_share``, ``flops.hfu``, ``ranks.bubble_share``,
``strategies.mfu_min``...). The CLI and the tab label a figure with its ``label`` and explain it
with its ``definition``; ``scripts/gen_definitions.py`` writes the table into the tab's
``frontend/src/definitions.ts`` and into docs/metrics.md and the README, and
``tests/analysis/test_definitions.py`` keeps all four equal. The ``unit`` names the one formatting function
of that unit (``fmt.FORMATTERS`` in Python, ``format.ts`` ``byUnit`` in the tab).

Aggregation: a ``summary`` share is time-weighted over the analysed steps (Σ part / Σ step time,
``analysis.time.aggregate``) and a per-step count is the mean step's; ``AGGREGATION`` says it in
the words the faces put beside a summary figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["share", "time", "bytes", "flops", "flop_rate", "tflop_rate", "bandwidth", "count", "factor"]
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
    "factor": "a multiple, shown with ×",
}

# Which way a figure is better, where one is: only the figures that say how fast a run is (MFU,
# achieved FLOP/s, step time) or how much memory it needs (the peaks, the batch headroom). Every
# other figure explains those and has none: a busier GPU is not a faster step ("busy is not
# fast"), and a run can get busier while it gets slower. Compare judges a change by it
# (analysis.run.compare).
Better = Literal["higher", "lower", "none"]

AGGREGATION = "time-weighted over the analysed (steady-state) steps"
MEDIAN_STEP = "median over the analysed steps of the per-step values"


@dataclass(frozen=True)
class Definition:
    label: str  # what every face calls it
    definition: str  # one line, the same text in the tab's help, the CLI, docs/metrics.md and the README
    unit: Unit
    better: Better = "none"  # which way is better (see Better)


def _d(label: str, definition: str, unit: Unit, better: Better = "none") -> Definition:
    return Definition(label, definition, unit, better)


DEFINITIONS: dict[str, Definition] = {
    # ---- MFU and FLOPs
    "mfu": _d(
        "MFU",
        "Model FLOPs utilisation over the analysed (steady-state) steps: their model FLOPs / (their step "
        "without the profiler's host cost, estimated × the GPU's dense 16-bit tensor-core peak, or the fp8/fp4 "
        "peak for runs in those dtypes: PaLM's convention, as torchtitan and Megatron quote it)",
        "share",
        "higher",
    ),
    "mfu_traced": _d(
        "MFU of the traced steps",
        "All the analysed steps' FLOPs / (their time as traced, under the profiler × the peak): the second figure "
        "beside MFU, which takes the profiler's host cost out of the step; the waterfall takes this step apart",
        "share",
    ),
    "step_time_unprofiled_us": _d(
        "Step without the profiler",
        "The mean analysed step re-timed on its critical path without the profiler's host cost (half the median "
        "launch call an event, 4 more a Triton launch): an estimate, the step the headline MFU is over",
        "time",
    ),
    "mfu_range": _d(
        "Likely MFU",
        "Where the headline MFU likely lies: over the longest and the shortest likely step without the "
        "profiler, re-timed with its cost per event at 0.6 and 1.5 times the estimate, the spread the cost "
        "showed across recordings (docs/mfu.md, section 6, says how often it held the truth)",
        "share",
    ),
    "step_time_unprofiled_range_us": _d(
        "Likely step without the profiler",
        "The shortest and the longest the step without the profiler likely is: re-timed with the profiler's "
        "cost per event at 1.5 and 0.6 times the estimate",
        "time",
    ),
    "mfu_median_step": _d(
        "MFU, median step",
        "The median of the per-step MFUs (each step's FLOPs / its time as traced / peak): the steady state, "
        "which a slow first step does not move (summary.distribution.mfu.median)",
        "share",
    ),
    "achieved_flops": _d(
        "Achieved",
        "Model FLOP/s over the analysed steps: their FLOPs / their time (MFU × peak)",
        "flop_rate",
        "higher",
    ),
    "flops.achieved_tflops_while_busy": _d(
        "Achieved while GPU busy",
        "Executed FLOPs / the time the GPU was busy: the upper view that the traced steps' MFU, a lower bound, matches",
        "tflop_rate",
    ),
    "flops_per_step": _d(
        "FLOPs / step (MFU's count)",
        "Model FLOPs of the mean step, the count MFU divides: FlopCounterMode convention, activation-checkpoint "
        "re-runs left out; unknown when no op was counted",
        "flops",
    ),
    "flops.executed_flops_per_step": _d(
        "Executed FLOPs / step (HFU's count)",
        "Every FLOP the step executed, activation-checkpoint re-runs too: the count HFU divides",
        "flops",
    ),
    "flops.model_flops_per_step": _d(
        "FLOPs without recompute / step",
        "The FLOPs with every recompute removed (checkpoint re-runs and flash attention's backward "
        "recomputation of the scores): PaLM's count, which the MFU without recompute divides",
        "flops",
    ),
    "flops.hfu": _d(
        "HFU",
        "Hardware FLOPs utilisation: executed FLOPs (checkpoint re-runs too) / time / peak",
        "share",
    ),
    "flops.mfu_at_compute_peak": _d(
        "MFU of the units it ran on",
        "An fp32 or TF32 run's FLOPs / time / the peak of the units its matmuls ran on (the fp32 CUDA-core or "
        "TF32 tensor-core peak): a second figure beside MFU, which is against the 16-bit tensor-core peak",
        "share",
    ),
    "flops.mfu_at_bf16_peak": _d(
        "MFU against the bf16 peak",
        "An fp8 or fp4 run's FLOPs / time / the dense bf16 peak: to compare with bf16 runs (its MFU is against "
        "the peak of the dtype it ran in)",
        "share",
    ),
    "flops.mfu_model": _d(
        "MFU without recompute",
        "FLOPs without recompute / time / peak: MFU by PaLM's count, for comparison with papers that use it",
        "share",
    ),
    "device.peak_flops": _d(
        "Peak",
        "The peak MFU is measured against: the GPU's dense bf16 (or fp16) tensor-core peak, the fp8 or fp4 "
        "one for runs in those dtypes, or --peak-tflops",
        "flop_rate",
    ),
    # ---- step time
    "step_time_us": _d(
        "Step time",
        "The mean analysed step: Σ step time / steps over the steady-state steps (ProfilerStep#N, extended to "
        "the GPU work it launched; warm-up steps left out): the step every share, the waterfall and MFU apply to",
        "time",
        "lower",
    ),
    "step_time_median_us": _d(
        "Median step time",
        "The median duration of the analysed steps: another aggregation than the step time's mean",
        "time",
    ),
    "step_time_mean_us": _d(
        "Mean step time",
        "Σ step time / steps: the same figure as the step time (kept for readers of schema 2)",
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
    "steps.mfu": _d(
        "MFU of the step as traced",
        "One step's FLOPs / its duration as traced, under the profiler / the peak: each step's own figure, "
        "below the headline MFU where the profiler slowed the host, since that one is over the mean step "
        "without the profiler's host cost",
        "share",
    ),
    "steps.breakdown_us": _d(
        "Part of the step",
        "Each part of one step's breakdown as time in that step: its share x the step's duration",
        "time",
    ),
    "breakdown_us_per_step": _d(
        "Part of the mean step",
        "Each part of the breakdown as time in the mean step: its time-weighted share x the mean step",
        "time",
    ),
    # ---- efficiency
    "sm_efficiency": _d(
        "SM efficiency",
        "Share of the SMs with work, integrated over the step: each kernel's SM efficiency as the hardware counts it "
        "(Nsight Compute's sm__cycles_active), estimated from its blocks per SM, occupancy and duration "
        "(launch overhead and partial waves), summed over concurrent kernels and capped at 1",
        "share",
    ),
    "sm_efficiency_tb": _d(
        "SM efficiency (PyTorch Profiler)",
        "The PyTorch Profiler tab's Est. SM Efficiency: blocks per SM capped at 1, integrated over the step. It "
        "reads short and tail-bound kernels as full",
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
    # ---- the critical path (analysis.critical_path): each class's time on it, adding up to the step
    "critical_path.host": _d(
        "Host",
        "Critical-path time in host work outside launch, sync and DataLoader calls (Python, op dispatch)",
        "time",
    ),
    "critical_path.dataloader": _d("DataLoader", "Critical-path time in DataLoader calls on the host", "time"),
    "critical_path.launch": _d(
        "Launch", "Critical-path time in kernel launch calls, and from a launch call to its kernel's start", "time"
    ),
    "critical_path.sync": _d(
        "Sync",
        "Critical-path time in host-device syncs beyond the GPU work they waited for, and their return",
        "time",
    ),
    "critical_path.kernel_matmul": _d(
        "Matmul kernels", "Critical-path time in tensor-core matmul/conv kernels", "time"
    ),
    "critical_path.kernel_matmul_cuda_core": _d(
        "CUDA-core matmuls", "Critical-path time in matmul/conv kernels on the CUDA cores", "time"
    ),
    "critical_path.kernel_attention": _d("Attention kernels", "Critical-path time in fused attention kernels", "time"),
    "critical_path.kernel_elementwise": _d(
        "Elementwise kernels", "Critical-path time in elementwise, normalisation and reduction kernels", "time"
    ),
    "critical_path.kernel_other": _d(
        "Other kernels",
        "Critical-path time in other kernels (fused Triton, optimizer, matmuls of unknown unit)",
        "time",
    ),
    "critical_path.communication": _d(
        "Communication", "Critical-path time in collective kernels, waiting for peers included", "time"
    ),
    "critical_path.copy": _d(
        "Copies", "Critical-path time in memcpys on the GPU and in the host's memcpy calls (pageable staging)", "time"
    ),
    "critical_path.memset": _d("Memsets", "Critical-path time in memsets", "time"),
    "critical_path.gpu_gap": _d(
        "Gaps on a stream",
        "Critical-path time between two ops of one stream, the second queued behind the first: the GPU may "
        "be busy on other streams meanwhile, so it is not GPU idle (the waterfall's idle bars)",
        "time",
    ),
    "critical_path.stream_wait": _d(
        "Stream waits", "Critical-path time an op waited for an op of another stream (an event wait)", "time"
    ),
    "critical_path.other": _d(
        "Unattributed", "Critical-path time before ops with no dependency the trace shows (no launch call)", "time"
    ),
    # ---- what-if (diagnosis.whatif_gains): the step re-timed with findings' fixes applied
    "whatif.step_us": _d(
        "Simulated step",
        "The mean step re-timed on its critical path with the picked findings' fixes applied together",
        "time",
    ),
    "whatif.gain_us_per_step": _d(
        "Simulated gain", "The modelled step less the simulated one: what the fixes together give", "time"
    ),
    "whatif.mfu": _d("MFU after", "MFU at the simulated step, with the same FLOPs", "share"),
    "whatif.floor_us": _d(
        "Floor",
        "The work the fixes leave on the busiest stream or on the host: no re-timing is shorter",
        "time",
    ),
    "whatif.unprofiled_step_us": _d(
        "Without the profiler",
        "The simulated step with the profiler's host cost per recorded event taken out of the trace",
        "time",
    ),
    "strategies.mfu_min": _d(
        "MFU per rank",
        "Lowest / mean / highest over the ranks of each rank's MFU: the figure its Overview shows",
        "share",
    ),
    "strategies.peak_allocated_max": _d(
        "Peak memory per rank",
        "Lowest / highest over the ranks of each rank's peak allocated memory (profile_memory=True traces)",
        "bytes",
    ),
    # ---- memory (profile_memory=True: the caching allocator's [memory] events; docs/memory.md)
    "memory.peak_allocated_bytes": _d(
        "Peak allocated",
        "The most memory the caching allocator had allocated to tensors in any recorded step (warm-up included) "
        "(torch.cuda.max_memory_allocated() over that step)",
        "bytes",
        "lower",
    ),
    "memory.peak_reserved_bytes": _d(
        "Peak reserved",
        "The most device memory the caching allocator held in any recorded step, allocated or cached "
        "(torch.cuda.max_memory_reserved())",
        "bytes",
        "lower",
    ),
    "memory.peak_share": _d(
        "Peak of device",
        "Peak allocated / the device's memory (deviceProperties totalGlobalMem, else the model's datasheet size)",
        "share",
    ),
    "memory.device_total_bytes": _d(
        "Device memory",
        "The device's memory: deviceProperties totalGlobalMem, else the GPU model's datasheet capacity",
        "bytes",
    ),
    "memory.allocated_start_bytes": _d(
        "Allocated at step start",
        "Allocated just before the peak step's first allocation or free: parameters, optimizer state and "
        "whatever lives across steps",
        "bytes",
    ),
    "memory.growth_per_step_bytes": _d(
        "Growth / step",
        "The median over consecutive analysed steps of the change in allocated-at-step-start, per step: a "
        "steady rise is a leak",
        "bytes",
    ),
    "memory.reserved_minus_allocated_bytes": _d(
        "Reserved − allocated",
        "At the peak: memory the allocator holds that no tensor uses (its cache, or fragmented blocks)",
        "bytes",
    ),
    "memory.headroom.batch_factor": _d(
        "Batch headroom",
        "How many times the batch could grow before the device is full, if the peak above the step's start "
        "scales with the batch and the start does not: (device memory − start) / (peak − start)",
        "factor",
        "higher",
    ),
    "memory.headroom.batch_factor_at_90": _d(
        "Batch headroom to 90 %",
        "The batch headroom that fills 90 % of the device instead: (0.9 × device memory − start) / (peak − start)",
        "factor",
    ),
    "memory.headroom.batch_scaled_bytes": _d(
        "Batch-scaled memory",
        "Peak allocated − allocated at step start: activations, their gradients and workspace, taken to "
        "scale with the batch",
        "bytes",
    ),
    "memory.headroom.fixed_bytes": _d(
        "Fixed memory",
        "Allocated at the peak step's start, taken not to scale with the batch",
        "bytes",
    ),
    "memory.recompute.us_per_step": _d(
        "Recompute / step",
        "Activation checkpointing's re-run of forward ops in backward, per step: the longer of its host "
        "time and its kernels' GPU time",
        "time",
    ),
    "memory.recompute.saved_bytes": _d(
        "Memory saved (bound)",
        "What the recompute allocates and still holds when it ends, per step: the activations checkpointing "
        "did not keep from the forward (an upper bound of what it saves)",
        "bytes",
    ),
    "memory.steps.peak_allocated_bytes": _d(
        "Step peak",
        "The most memory allocated during the step (its max_memory_allocated())",
        "bytes",
    ),
    "memory.steps.peak_reserved_bytes": _d(
        "Step reserved",
        "The most memory the allocator held during the step",
        "bytes",
    ),
    "memory.steps.allocated_start_bytes": _d(
        "At start",
        "Allocated just before the step's first allocation or free (memory_allocated() at its start)",
        "bytes",
    ),
    "memory.steps.allocated_end_bytes": _d(
        "At end",
        "Allocated after the step's last allocation or free",
        "bytes",
    ),
    "memory.steps.growth_bytes": _d(
        "Growth",
        "Allocated at this step's start − at the previous analysed step's, per step between them",
        "bytes",
    ),
    "memory.steps.reserved_minus_allocated_bytes": _d(
        "Cached",
        "At the step's peak: reserved − allocated",
        "bytes",
    ),
}


def label(name: str) -> str:
    return DEFINITIONS[name].label


def definition(name: str) -> str:
    return DEFINITIONS[name].definition


def help_text(name: str) -> str:
    """The label's tooltip in the tab and the CLI's line: ``definition``."""
    return DEFINITIONS[name].definition
