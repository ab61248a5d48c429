"""The rows of one device and what the analysis derived from them, as two immutable values.

``DeviceRows`` comes first: the device's GPU rows with their per-row columns (blocks per SM,
occupancy, step, launch call). Every stage of ``analysis.per_device`` reads it. ``DeviceView`` is
made once, after the stages that derive facts from the rows (the host syncs, the kernel classes,
the GPU idle gaps and their causes, the critical-path model, the per-step columns), with every
field filled: what the diagnosis and the waterfall read (``analysis.device_facts``) is never a
half-built view.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trace.tables import GpuTable
from .critical_path.whatif import Model
from .kernels.families import NameClasses
from .time.idle_gaps import Gaps, GapThresholds
from .time.step_metrics import StepColumns
from .time.syncs import SyncEvents


@dataclass(frozen=True)
class DeviceRows:
    """The GPU rows of one device with their per-row derived columns."""

    gpu: GpuTable
    bps: np.ndarray  # blocks per SM, NaN unknown
    occ: np.ndarray  # achieved occupancy, NaN unknown
    step: np.ndarray  # index of the step each row belongs to, -1 for none (steps.assign)
    max_dur: float
    launcher: np.ndarray  # cpu row of each row's launch call, -1 unknown (tables.launcher of the device)


@dataclass(frozen=True)
class DeviceView(DeviceRows):
    """The rows and the facts the analysis derived from them once, every one filled."""

    syncs: SyncEvents  # the host syncs inside the steps, with their callers
    # class and dtype of every kernel name (user --tensor-core-pattern included), per name code
    classes: NameClasses
    # the GPU idle gaps over the steps and their causes, attributed once with ``gap_thresholds``: the
    # report's gpu_idle_after_sync_share, the waterfall and the diagnosis read the same gaps
    gaps: Gaps
    gap_thresholds: GapThresholds
    critical: Model | None  # the critical-path model of the steps (None: the model failed or has no step)
    # the columns the report's Steps were built from: later checks read a column, not 100,000 structs
    step_columns: StepColumns

    @classmethod
    def of(
        cls,
        rows: DeviceRows,
        *,
        syncs: SyncEvents,
        classes: NameClasses,
        gaps: Gaps,
        gap_thresholds: GapThresholds,
        critical: Model | None,
        step_columns: StepColumns,
    ) -> DeviceView:
        return cls(
            gpu=rows.gpu,
            bps=rows.bps,
            occ=rows.occ,
            step=rows.step,
            max_dur=rows.max_dur,
            launcher=rows.launcher,
            syncs=syncs,
            classes=classes,
            gaps=gaps,
            gap_thresholds=gap_thresholds,
            critical=critical,
            step_columns=step_columns,
        )
