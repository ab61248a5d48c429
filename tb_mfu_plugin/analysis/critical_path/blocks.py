"""The report's critical-path block, from a graph and its walk."""

from __future__ import annotations

import numpy as np

from . import classes as cls
from .graph import BY_WAIT, Graph
from .path import Walk
from .report_types import CriticalPath, CriticalPathStep


def critical_path_block(g: Graph, w: Walk, steps_analysed: int) -> CriticalPath:
    dur = g.step_end - g.step_start
    out = []
    for i in range(g.steps):
        us = {c: float(w.us[i, k]) for k, c in enumerate(cls.CLASSES) if w.us[i, k] != 0.0}
        out.append(CriticalPathStep(step=int(g.step_number[i]), dur_us=float(dur[i]), us=us, bound=_largest(w.us[i])))
    total = w.us.sum(axis=0)
    n = max(g.steps, 1)
    span = float(dur.sum())
    return CriticalPath(
        classes=list(cls.CLASSES),
        steps=out,
        us_per_step={c: float(total[k]) / n for k, c in enumerate(cls.CLASSES) if total[k] != 0.0},
        share={c: float(total[k]) / span for k, c in enumerate(cls.CLASSES) if total[k] != 0.0 and span > 0},
        bound=_largest(total),
        step_us=span / n,
        steps_modelled=g.steps,
        launch_latency_us=g.launch_latency_us,
        stream_gap_us=g.stream_gap_us,
        inferred_waits_per_step=float((g.ops.bind == BY_WAIT).sum()) / n,
    )


def _largest(us: np.ndarray) -> str:
    return cls.CLASSES[int(np.argmax(us))]
