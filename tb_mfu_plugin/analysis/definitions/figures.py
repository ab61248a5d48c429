"""The definitions of the step's figures: MFU and FLOPs, step time, GPU time, the breakdown,
efficiency, counts, launches and the distributed ones."""

from __future__ import annotations

from .definition import Definition, define

FIGURES: dict[str, Definition] = {
    # ---- MFU and FLOPs
    "mfu": define(
        "MFU",
        "Model FLOPs utilisation over the analysed (steady-state) steps: their model FLOPs / (their step "
        "without the profiler's host cost, estimated × the GPU's dense 16-bit tensor-core peak, or the fp8/fp4 "
        "peak for runs in those dtypes: PaLM's convention, as torchtitan and Megatron quote it)",
        "share",
        "higher",
    ),
    "mfu_traced": define(
        "MFU of the traced steps",
        "All the analysed steps' FLOPs / (their time as traced, under the profiler × the peak): the second figure "
        "beside MFU, which takes the profiler's host cost out of the step; the waterfall takes this step apart",
        "share",
    ),
    "step_time_unprofiled_us": define(
        "Step without the profiler",
        "The mean analysed step re-timed on its critical path without the profiler's host cost (0.4 of the median "
        "launch call an event, 4 more a Triton launch, 4 each record function Lightning's profiler opens): an "
        "estimate, the step the headline MFU is over",
        "time",
        "lower",
    ),
    "mfu_range": define(
        "Likely MFU",
        "Where the headline MFU likely lies: over the longest and the shortest likely step without the "
        "profiler, re-timed with its cost per event at 0.30 and 0.75 of a launch call, the spread the cost "
        "showed across recordings, the short end reaching the fastest analysed step (docs/mfu.md, section 6, "
        "says how often it held the truth)",
        "share",
    ),
    "step_time_unprofiled_range_us": define(
        "Likely step without the profiler",
        "The shortest and the longest the step without the profiler likely is: re-timed with the profiler's "
        "cost per event at 0.75 and 0.30 of a launch call, the short end scaled from the mean analysed step "
        "to the fastest, since the profiler's cost differs from step to step",
        "time",
    ),
    "mfu_median_step": define(
        "MFU, median step",
        "The median of the per-step MFUs (each step's FLOPs / its time as traced / peak): the steady state, "
        "which a slow first step does not move (summary.distribution.mfu.median)",
        "share",
    ),
    "achieved_flops": define(
        "Achieved",
        "Model FLOP/s over the analysed steps: their FLOPs / their time (MFU × peak)",
        "flop_rate",
        "higher",
    ),
    "flops.achieved_tflops_while_busy": define(
        "Achieved while GPU busy (traced)",
        "Executed FLOPs / the time the GPU was busy in the traced steps: the upper view that the traced steps' MFU, "
        "a lower bound, matches. It can read below Achieved, which is over the step without the profiler",
        "tflop_rate",
    ),
    "flops_per_step": define(
        "FLOPs / step (MFU's count)",
        "Model FLOPs of the mean step, the count MFU divides: FlopCounterMode convention, activation-checkpoint "
        "re-runs left out; unknown when no op was counted",
        "flops",
    ),
    "flops.executed_flops_per_step": define(
        "Executed FLOPs / step (HFU's count)",
        "Every FLOP the step executed, activation-checkpoint re-runs too: the count HFU divides",
        "flops",
    ),
    "flops.model_flops_per_step": define(
        "FLOPs without recompute / step",
        "The FLOPs with every recompute removed (checkpoint re-runs and flash attention's backward "
        "recomputation of the scores): PaLM's count, which the MFU without recompute divides",
        "flops",
    ),
    "flops.hfu": define(
        "HFU",
        "Hardware FLOPs utilisation: executed FLOPs (checkpoint re-runs too) / time / peak",
        "share",
    ),
    "flops.mfu_at_compute_peak": define(
        "MFU of the units it ran on",
        "An fp32 or TF32 run's FLOPs / time / the peak of the units its matmuls ran on (the fp32 CUDA-core or "
        "TF32 tensor-core peak): a second figure beside MFU, which is against the 16-bit tensor-core peak",
        "share",
    ),
    "flops.mfu_at_bf16_peak": define(
        "MFU against the bf16 peak",
        "An fp8 or fp4 run's FLOPs / time / the dense bf16 peak: to compare with bf16 runs (its MFU is against "
        "the peak of the dtype it ran in)",
        "share",
    ),
    "flops.mfu_model": define(
        "MFU without recompute",
        "FLOPs without recompute / time / peak: MFU by PaLM's count, for comparison with papers that use it",
        "share",
    ),
    "device.peak_flops": define(
        "Peak",
        "The peak MFU is measured against: the GPU's dense bf16 (or fp16) tensor-core peak, the fp8 or fp4 "
        "one for runs in those dtypes, or --peak-tflops",
        "flop_rate",
    ),
    # ---- step time
    "step_time_us": define(
        "Step time",
        "The mean analysed step: Σ step time / steps over the steady-state steps (ProfilerStep#N, extended to "
        "the GPU work it launched; warm-up steps left out): the step every share, the waterfall and MFU apply to",
        "time",
        "lower",
    ),
    "step_time_median_us": define(
        "Median step time",
        "The median duration of the analysed steps: another aggregation than the step time's mean",
        "time",
    ),
    "step_time_mean_us": define(
        "Mean step time",
        "Σ step time / steps: the same figure as the step time (kept for readers of schema 2)",
        "time",
    ),
    # ---- GPU time
    "gpu_busy_share": define(
        "GPU busy",
        "Share of the step with any kernel, copy or memset running on the GPU",
        "share",
    ),
    "kernel_time_share": define(
        "Kernel time",
        "Share of the step with any kernel running (the PyTorch Profiler tab's GPU Utilization)",
        "share",
    ),
    "memcpy_time_share": define("Memcpy time", "Share of the step with a copy running", "share"),
    "memset_time_share": define("Memset time", "Share of the step with a memset running", "share"),
    "idle_share": define(
        "GPU idle",
        "Share of the step with nothing running on the GPU: 1 − GPU busy",
        "share",
    ),
    "gpu_idle_after_sync_share": define(
        "GPU idle after syncs",
        "GPU idle time that host-device syncs explain: in each idle gap, the host time blocked in the syncs "
        "that returned in it, at most the gap (what removing them would give back)",
        "share",
    ),
    "host_sync_blocked_share": define(
        "Host blocked in syncs",
        "Host time blocked in synchronising calls (.item(), blocking copies, synchronize) / step time: a host "
        "figure, above GPU idle when the host waits while the GPU works",
        "share",
    ),
    # ---- the breakdown (exclusive parts of the step, summing to 1)
    "breakdown.kernel": define("Kernels", "GPU time with at least one kernel running", "share"),
    "breakdown.memcpy": define("Memcpy only", "GPU time copying, with no kernel running", "share"),
    "breakdown.memset": define("Memset only", "GPU time in memsets only", "share"),
    "breakdown.idle_after_sync": define(
        "GPU idle after syncs",
        "The GPU idle after syncs figure (gpu_idle_after_sync_share), as a part of the step",
        "share",
    ),
    "breakdown.idle_other": define(
        "Other GPU idle",
        "GPU idle that syncs do not explain: data loading, launch gaps, host work",
        "share",
    ),
    "steps.mfu": define(
        "MFU of the step as traced",
        "One step's FLOPs / its duration as traced, under the profiler / the peak: each step's own figure, "
        "below the headline MFU where the profiler slowed the host, since that one is over the mean step "
        "without the profiler's host cost",
        "share",
    ),
    "steps.breakdown_us": define(
        "Part of the step",
        "Each part of one step's breakdown as time in that step: its share x the step's duration",
        "time",
    ),
    "breakdown_us_per_step": define(
        "Part of the mean step",
        "Each part of the breakdown as time in the mean step: its time-weighted share x the mean step",
        "time",
    ),
    # ---- efficiency
    "sm_efficiency": define(
        "SM efficiency",
        "Share of the SMs with work, integrated over the step: each kernel's SM efficiency as the hardware counts it "
        "(Nsight Compute's sm__cycles_active), estimated from its blocks per SM, occupancy and duration "
        "(launch overhead and partial waves), summed over concurrent kernels and capped at 1",
        "share",
    ),
    "sm_efficiency_tb": define(
        "SM efficiency (PyTorch Profiler)",
        "The PyTorch Profiler tab's Est. SM Efficiency: blocks per SM capped at 1, integrated over the step. It "
        "reads short and tail-bound kernels as full",
        "share",
    ),
    "achieved_occupancy": define(
        "Occupancy",
        "Estimated achieved occupancy, weighted by kernel time over the kernels that report it",
        "share",
    ),
    "tensor_core_kernel_share": define(
        "Tensor-core kernels",
        "Share of kernel time in tensor-core kernels, by the kernel-name family table",
        "share",
    ),
    "unknown_core_kernel_share": define(
        "Unknown-unit kernels",
        "Share of kernel time in GEMM-like kernels that no family names (tensor-core use unknown)",
        "share",
    ),
    "cuda_core_matmul_kernel_share": define(
        "CUDA-core matmuls",
        "Share of kernel time in matmul/conv kernels on the CUDA cores (FFMA, SIMT, SGEMM, GEMV)",
        "share",
    ),
    # ---- counts per step
    "kernels_per_step": define("Kernels / step", "Kernels the step launched (graph replays' kernels too)", "count"),
    "sync_count_per_step": define("Syncs / step", "Host-device synchronising calls per step", "count"),
    "h2d_bytes_per_step": define("H2D / step", "Bytes copied host to device per step", "bytes"),
    "d2h_bytes_per_step": define("D2H / step", "Bytes copied device to host per step", "bytes"),
    "d2d_bytes_per_step": define("D2D / step", "Bytes copied device to device per step", "bytes"),
    "p2p_bytes_per_step": define("P2P / step", "Bytes copied peer to peer per step", "bytes"),
    # ---- launches
    "launches.short_kernel_share": define("Short kernels", "Share of the kernels under 10 µs", "share"),
    "launches.launch_api_us_per_step": define("Launch API / step", "Host time in kernel launch calls per step", "time"),
    "launches.graph_launches_per_step": define(
        "Graph replays / step",
        "CUDA/HIP graph launches per step: each replays a whole captured graph",
        "count",
    ),
    "launches.graph_kernels_per_step": define(
        "Kernels in graphs",
        "Kernels per step run by graph replays, not launched one by one by the host",
        "count",
    ),
    # ---- distributed
    "ranks.exposed_communication_us_per_step": define(
        "Exposed comm / step",
        "Collective time per step with no compute kernel running beside it",
        "time",
    ),
    "ranks.overlap_ratio": define("Overlap", "Share of the communication time running beside compute", "share"),
    "ranks.collective_wait_us_per_step": define(
        "Waits / step",
        "Time inside collectives waiting for a member that started later (clocks aligned), per step",
        "time",
    ),
    "ranks.bubble_share": define("Bubble", "Share of a pipeline stage's step idle for the other stages", "share"),
    "ranks.job.mfu": define(
        "Job MFU",
        "The job's one MFU: every rank's FLOPs per step together / (the shortest of the ranks' steps without the "
        "profiler × their peaks together). The ranks of one synchronous job share a step; each rank's estimate "
        "keeps the profiled lateness of the ranks it waited for in its collectives, so the shortest is the job's "
        "(None unless every rank has an estimate)",
        "share",
    ),
    "ranks.job.step_time_unprofiled_us": define(
        "Job step without the profiler",
        "The shortest of the ranks' steps without the profiler (each rank's summary.step_time_unprofiled_us): "
        "the step the job's MFU is over",
        "time",
    ),
    "ranks.job.mfu_range": define(
        "Likely job MFU",
        "The job's MFU over the longest and the shortest likely step of the rank whose estimate it is "
        "(that rank's summary.step_time_unprofiled_range_us)",
        "share",
    ),
    # ---- strategies (Compare's table of runs side by side)
    "strategies.job_mfu": define(
        "Job MFU",
        "The run's one MFU: the job's over every rank (ranks.job.mfu), or the one GPU's own; the table is sorted by it",
        "share",
    ),
    "strategies.mfu_min": define(
        "MFU per rank",
        "Lowest / mean / highest over the ranks of each rank's MFU: the figure its Overview shows",
        "share",
    ),
    "strategies.peak_allocated_max": define(
        "Peak memory per rank",
        "Lowest / highest over the ranks of each rank's peak allocated memory (profile_memory=True traces)",
        "bytes",
    ),
}
