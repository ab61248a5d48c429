"""The definitions of the critical path's classes and the what-if's re-timings."""

from __future__ import annotations

from .definition import Definition, define

MODEL: dict[str, Definition] = {
    # ---- the critical path (analysis.critical_path): each class's time on it, adding up to the step
    "critical_path.host": define(
        "Host",
        "Critical-path time in host work outside launch, sync and DataLoader calls (Python, op dispatch)",
        "time",
    ),
    "critical_path.dataloader": define("DataLoader", "Critical-path time in DataLoader calls on the host", "time"),
    "critical_path.launch": define(
        "Launch", "Critical-path time in kernel launch calls, and from a launch call to its kernel's start", "time"
    ),
    "critical_path.sync": define(
        "Sync",
        "Critical-path time in host-device syncs beyond the GPU work they waited for, and their return",
        "time",
    ),
    "critical_path.kernel_matmul": define(
        "Matmul kernels", "Critical-path time in tensor-core matmul/conv kernels", "time"
    ),
    "critical_path.kernel_matmul_cuda_core": define(
        "CUDA-core matmul kernels", "Critical-path time in matmul/conv kernels on the CUDA cores", "time"
    ),
    "critical_path.kernel_attention": define(
        "Attention kernels", "Critical-path time in fused attention kernels", "time"
    ),
    "critical_path.kernel_elementwise": define(
        "Elementwise kernels", "Critical-path time in elementwise, normalisation and reduction kernels", "time"
    ),
    "critical_path.kernel_other": define(
        "Other kernels",
        "Critical-path time in other kernels (fused Triton, optimizer, matmuls of unknown unit)",
        "time",
    ),
    "critical_path.communication": define(
        "Communication", "Critical-path time in collective kernels, waiting for peers included", "time"
    ),
    "critical_path.copy": define(
        "Copies", "Critical-path time in memcpys on the GPU and in the host's memcpy calls (pageable staging)", "time"
    ),
    "critical_path.memset": define("Memsets", "Critical-path time in memsets", "time"),
    "critical_path.gpu_gap": define(
        "Gaps on a stream",
        "Critical-path time between two ops of one stream, the second queued behind the first: the GPU may "
        "be busy on other streams meanwhile, so it is not GPU idle (the waterfall's idle bars)",
        "time",
    ),
    "critical_path.stream_wait": define(
        "Stream waits", "Critical-path time an op waited for an op of another stream (an event wait)", "time"
    ),
    "critical_path.other": define(
        "Unattributed", "Critical-path time before ops with no dependency the trace shows (no launch call)", "time"
    ),
    # ---- what-if (diagnosis.whatif_gains): the step re-timed with findings' fixes applied. The headline
    # figures are without the profiler, as the findings' gains and the headline MFU are; the traced ones second
    "whatif.unprofiled_step_us": define(
        "Re-timed step without the profiler",
        "The step re-timed with the picked findings' fixes and the profiler's host cost per recorded event taken "
        "out of the trace: what a run that is not profiled would take (with none picked, the headline MFU's step)",
        "time",
    ),
    "whatif.unprofiled_gain_us_per_step": define(
        "Gain without the profiler",
        "What the picked fixes together give a run that is not profiled; for one fix alone, its finding's "
        "estimated gain",
        "time",
    ),
    "whatif.mfu": define(
        "MFU after",
        "MFU at the step without the profiler, with the same FLOPs, the headline MFU's basis; for one fix "
        "alone, its finding's projected MFU",
        "share",
    ),
    "whatif.step_us": define(
        "Simulated step (traced)",
        "The mean traced step re-timed on its critical path with the picked findings' fixes applied together, "
        "the profiler's cost still in it",
        "time",
    ),
    "whatif.gain_us_per_step": define(
        "Simulated gain (traced)",
        "The traced step less the simulated one: what the fixes give the profiled run",
        "time",
    ),
    "whatif.floor_us": define(
        "Floor",
        "The work the fixes leave on the busiest stream or on the host of the traced step: no re-timing is shorter",
        "time",
    ),
}
