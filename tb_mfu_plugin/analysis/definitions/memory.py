"""The definitions of the memory figures (profile_memory=True traces)."""

from __future__ import annotations

from .definition import Definition, define

MEMORY: dict[str, Definition] = {
    # ---- memory (profile_memory=True: the caching allocator's [memory] events; docs/memory.md)
    "memory.peak_allocated_bytes": define(
        "Peak allocated",
        "The most memory the caching allocator had allocated to tensors in any recorded step (warm-up included) "
        "(torch.cuda.max_memory_allocated() over that step)",
        "bytes",
        "lower",
    ),
    "memory.peak_reserved_bytes": define(
        "Peak reserved",
        "The most device memory the caching allocator held in any recorded step, allocated or cached "
        "(torch.cuda.max_memory_reserved())",
        "bytes",
        "lower",
    ),
    "memory.peak_share": define(
        "Peak of device",
        "Peak allocated / the device's memory (deviceProperties totalGlobalMem, else the model's datasheet size)",
        "share",
    ),
    "memory.device_total_bytes": define(
        "Device memory",
        "The device's memory: deviceProperties totalGlobalMem, else the GPU model's datasheet capacity",
        "bytes",
    ),
    "memory.allocated_start_bytes": define(
        "Allocated at step start",
        "Allocated just before the peak step's first allocation or free: parameters, optimizer state and "
        "whatever lives across steps",
        "bytes",
    ),
    "memory.growth_per_step_bytes": define(
        "Growth / step",
        "The median over consecutive analysed steps of the change in allocated-at-step-start, per step: a "
        "steady rise is a leak",
        "bytes",
    ),
    "memory.reserved_minus_allocated_bytes": define(
        "Reserved − allocated",
        "At the peak: memory the allocator holds that no tensor uses (its cache, or fragmented blocks)",
        "bytes",
    ),
    "memory.headroom.batch_factor": define(
        "Batch headroom",
        "How many times the batch could grow before the device is full, if the peak above the step's start "
        "scales with the batch and the start does not: (device memory − start) / (peak − start)",
        "factor",
        "higher",
    ),
    "memory.headroom.batch_factor_at_90": define(
        "Batch headroom to 90 %",
        "The batch headroom that fills 90 % of the device instead: (0.9 × device memory − start) / (peak − start)",
        "factor",
    ),
    "memory.headroom.batch_scaled_bytes": define(
        "Batch-scaled memory",
        "Peak allocated − allocated at step start: activations, their gradients and workspace, taken to "
        "scale with the batch",
        "bytes",
    ),
    "memory.headroom.fixed_bytes": define(
        "Fixed memory",
        "Allocated at the peak step's start, taken not to scale with the batch",
        "bytes",
    ),
    "memory.recompute.us_per_step": define(
        "Recompute / step",
        "Activation checkpointing's re-run of forward ops in backward, per step: the longer of its host "
        "time and its kernels' GPU time",
        "time",
    ),
    "memory.recompute.saved_bytes": define(
        "Memory saved (bound)",
        "What the recompute allocates and still holds when it ends, per step: the activations checkpointing "
        "did not keep from the forward (an upper bound of what it saves)",
        "bytes",
    ),
    "memory.steps.peak_allocated_bytes": define(
        "Step peak",
        "The most memory allocated during the step (its max_memory_allocated())",
        "bytes",
    ),
    "memory.steps.peak_reserved_bytes": define(
        "Step reserved",
        "The most memory the allocator held during the step",
        "bytes",
    ),
    "memory.steps.allocated_start_bytes": define(
        "At start",
        "Allocated just before the step's first allocation or free (memory_allocated() at its start)",
        "bytes",
    ),
    "memory.steps.allocated_end_bytes": define(
        "At end",
        "Allocated after the step's last allocation or free",
        "bytes",
    ),
    "memory.steps.growth_bytes": define(
        "Growth",
        "Allocated at this step's start − at the previous analysed step's, per step between them",
        "bytes",
    ),
    "memory.steps.reserved_minus_allocated_bytes": define(
        "Cached",
        "At the step's peak: reserved − allocated",
        "bytes",
    ),
}
