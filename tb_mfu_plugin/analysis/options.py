"""Settings shared by every face (CLI flags, plugin flags) and passed to the analysis."""

from __future__ import annotations

from dataclasses import dataclass

from ..trace.limits import DEFAULT_LIMITS, Limits


@dataclass(frozen=True)
class AnalysisOptions:
    # Peak override: a number beats a device name beats the trace's deviceProperties.
    peak_tflops: float | None = None
    device_name: str | None = None
    # Model FLOPs per step supplied by the user (beats the sidecar file).
    flops_per_step: float | None = None
    # fp32 matmuls run on tensor cores (torch.backends.cuda.matmul.allow_tf32 = True).
    tf32: bool = False
    # Every recorded step, warm-up included (analysis.time.steps.steady_state leaves leading warm-up
    # steps out of every per-step figure by default): torch-tb-profiler's steps.
    all_steps: bool = False
    top_kernels: int = 50
    # Extra kernel-name regexes counted as tensor-core kernels, added to
    # the family table of analysis.kernel_families (new libraries name kernels their own way).
    tensor_core_patterns: tuple[str, ...] = ()
    # Diagnosis thresholds to change, as (name, value) pairs of diagnosis.Thresholds fields.
    thresholds: tuple[tuple[str, float], ...] = ()
    # Caps on what one file may cost (size, gzip ratio, event size, names, events,
    # devices, wall time): see trace/limits.py and docs/limits.md.
    limits: Limits = DEFAULT_LIMITS
    # The link collectives run over, for bus-bandwidth shares: a key of analysis.interconnects.LINKS
    # ("NVLink 4", "PCIe 5 x16") or a figure in GB/s; None infers it from the GPU model.
    interconnect: str | None = None
