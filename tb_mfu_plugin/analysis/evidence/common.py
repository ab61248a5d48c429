"""What every finding's evidence has (its cost, the what-if re-timing, the note) and the rows several
rules show (the kernels behind a finding)."""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from .units import Count, Share, Text, Time, Whole


class UnprofiledWhatIf(msgspec.Struct, kw_only=True):
    """The same re-timing with the profiler's host cost taken out of the trace: what the fix gives a
    run that is not profiled (``WhatIf.unprofiled_step_us``), the finding's headline gain."""

    step_us: Time
    step_us_after: Time
    gain_us_per_step: Time
    gain_share: Share


class WhatIfEvidence(msgspec.Struct, kw_only=True):
    """A re-timed finding's re-timing (``diagnosis.whatif_gains``): the step on its critical path
    with the fix applied. A new figure is a new field with a unit and a default."""

    change: Text  # what the fix changes, in words (WhatIfFinding.change)
    step_us_after: Time
    floor_us_per_step: Time  # what the busiest chain keeps: no re-timing goes below it
    rule_gain_us_per_step: Time  # the rule's own estimate, before the re-timing
    profiled_gain_us_per_step: Time  # the gain on the trace as recorded (the headline is unprofiled's)
    unprofiled: UnprofiledWhatIf
    steps_modelled: Whole | None


class FindingEvidence(msgspec.Struct, kw_only=True, tag_field="rule"):
    """The fields every finding's evidence has. Each rule's evidence is a subclass tagged with the
    rule's id (``rule`` in the JSON): ``Finding.evidence`` is their tagged union
    (``analysis.evidence.Evidence``). The rule fills its own fields; ``diagnosis.finding.make_finding``
    the cost, the registry the note and ``diagnosis.whatif_gains`` the re-timing."""

    cost_us_per_step: Time = 0.0  # the time the cause takes, which bounds the gain
    cost_share: Share = 0.0  # of the step
    # the time the rule measured, where it exceeded the step (events that run at once counted twice)
    cost_above_step_us_per_step: Time | UnsetType = UNSET
    whatif: WhatIfEvidence | UnsetType = UNSET  # re-timed findings only
    note: Text | UnsetType = UNSET  # how the gain is estimated


# The fields of the base that a face shows before the rule's own (the rest after them)
HEAD_KEYS = ("cost_us_per_step", "cost_share", "cost_above_step_us_per_step")


class KernelRow(msgspec.Struct, kw_only=True):
    """One kernel name behind a finding, per step (``diagnosis.rules.evidence.top_kernels``)."""

    name: Text
    count_per_step: Count
    us_per_step: Time
