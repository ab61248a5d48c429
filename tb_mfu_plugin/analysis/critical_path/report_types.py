"""The report's critical-path and what-if blocks (``WorkerReport.critical_path``, ``.whatif``): msgspec
Structs only, so that ``analysis.report`` can hold them without importing the model."""

from __future__ import annotations

import msgspec


class CriticalPathStep(msgspec.Struct, kw_only=True):
    step: int
    dur_us: float
    # µs of the step's critical path in each class (classes with none left out): they add up to dur_us
    us: dict[str, float]
    bound: str  # the class with the most time


class CriticalPath(msgspec.Struct, kw_only=True):
    """Each modelled step's critical path by class (``analysis.critical_path``; docs/diagnosis.md)."""

    classes: list[str]  # every class, in the order the faces list them
    steps: list[CriticalPathStep]
    # time-weighted over the modelled steps: µs per step and share of the step, per class
    us_per_step: dict[str, float]
    share: dict[str, float]
    bound: str  # the class with the most time over the modelled steps
    step_us: float = 0.0  # the modelled steps' mean duration: what us_per_step adds up to
    steps_modelled: int  # the first steps_modelled of the analysed steps (all, unless the trace has many)
    launch_latency_us: float  # launch call start to kernel start on an idle stream (median), what edges assume
    stream_gap_us: float  # between two queued ops of a stream (median)
    inferred_waits_per_step: float  # ops found waiting for another stream's op, per step


class WhatIfCase(msgspec.Struct, kw_only=True):
    """One re-timing: the step with the changes of some findings applied together."""

    mask: int  # bit k set: WhatIf.findings[k] applied
    step_us: float  # the simulated mean step, on the trace as recorded
    gain_us_per_step: float  # the modelled step less it
    gain_share: float  # of the modelled step
    # MFU at the simulated step without the profiler (same FLOPs), from the headline MFU: for one fix
    # alone, its finding's est_mfu_after. None when unknown or past 100 %
    mfu: float | None
    floor_us: float  # the busiest chain's work the changes leave, per step: the step cannot be shorter
    # the same changes re-timed with the profiler's host cost taken out of the trace: the step and gain
    # of a run that is not profiled, the headline ones (for one fix alone, its finding's gain). Set on
    # every case; None only in reports written before 2026-12-07, which had them on single fixes alone
    unprofiled_step_us: float | None = None
    unprofiled_gain_us_per_step: float | None = None
    unprofiled_floor_us: float | None = None
    unprofiled_gain_share: float | None = None  # of WhatIf.unprofiled_step_us


class WhatIfFinding(msgspec.Struct, kw_only=True):
    """A re-timed finding, as Compare names findings: (id, subject) is unique in a report."""

    id: str
    subject: str | None = None
    change: str  # what its fix changes, in words (the same as its evidence's whatif.change)


class WhatIf(msgspec.Struct, kw_only=True):
    """What the findings' fixes give, re-timed on the critical-path model, alone and together."""

    step_us: float  # the modelled mean step (the trace's own timing re-timed unchanged)
    unprofiled_step_us: float  # the same with the profiler's host cost taken out (diagnosis.whatif_gains)
    mfu: float | None
    steps_modelled: int
    # the re-timed findings with the largest gains, at most diagnosis.whatif_gains.MAX_PANEL of them
    findings: list[WhatIfFinding]
    cases: list[WhatIfCase]  # every non-empty subset of ``findings``, by mask
    combined: WhatIfCase | None = None  # every re-timed finding at once (the report's combined gain)
    findings_retimed: int = 0  # findings whose gain the re-timing gave (``combined`` applies them all)
