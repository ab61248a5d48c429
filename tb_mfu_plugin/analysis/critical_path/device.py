"""One device's critical-path model, built once by the analysis (``analysis.per_device``) and read by
the diagnosis, which re-times it for each finding's fix."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...core.distinct import distinct
from ...trace.tables import GpuTable, TraceTables
from ..kernels.families import NameClasses
from ..time.steps import Steps
from . import classes as cls
from .blocks import critical_path_block
from .graph import Device, build
from .path import walk
from .report_types import CriticalPath
from .whatif import Model

# Steps the model holds at most: the first ones analysed. A trace of hundreds of steps repeats
# them; the re-timings of every finding (and of the what-if panel's combinations) then stay a
# small part of the analysis (docs/scaling.md).
MAX_MODELLED_STEPS = 16


def device_model(
    tables: TraceTables,
    gpu: GpuTable,
    step: np.ndarray,
    launcher: np.ndarray,
    sync_rows: np.ndarray,
    classes: NameClasses,
    steps: Steps,
    names: Sequence[str] | None = None,
) -> tuple[Model, CriticalPath] | None:
    """The model of the device's first steps and their critical-path block; None without a step."""
    if len(steps) == 0:
        return None
    lut = cls.name_lut(names if names is not None else tables.names, classes, distinct(gpu.name))
    g = build(tables, Device(gpu, step, launcher, sync_rows, lut), steps, MAX_MODELLED_STEPS)
    return Model(g, len(gpu)), critical_path_block(g, walk(g), len(steps))
