"""Which FLOPs per step the headline MFU uses, and where they come from.

In order: ``--flops-per-step`` (``AnalysisOptions.flops_per_step``), the trace's shapes
(FlopCounterMode convention, activation-checkpoint re-runs left out), the run's sidecar
(``tb_mfu.json``, read by ``trace/locate/sidecar.py``). The user's figure, given or from the
sidecar, is kept as well for ``FlopsDetail.mfu_user``; a sidecar that says ``"tf32": true``
switches the peak to TF32.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...trace.locate.sidecar import Sidecar
from ..options import AnalysisOptions
from .per_window import WindowFlops


@dataclass(frozen=True)
class UserFlops:
    """FLOPs per step the user gave (``--flops-per-step`` beats the sidecar), and the options
    to resolve the peak with (the sidecar's ``tf32`` switched on)."""

    flops: float | None
    source: str | None
    options: AnalysisOptions


def user_flops(options: AnalysisOptions, sidecar: tuple[Sidecar, str] | None) -> UserFlops:
    user: float | None = None
    source: str | None = None
    opts = options
    if sidecar is not None:
        sc, sc_path = sidecar
        user = sc.model_flops_per_step()
        source = f"{sc.method} ({sc_path})"
        if sc.tf32 and not options.tf32:
            opts = replace(options, tf32=True)
    if options.flops_per_step:
        user, source = float(options.flops_per_step), "--flops-per-step"
    return UserFlops(user, source, opts)


def headline(
    options: AnalysisOptions, has_shapes: bool, wf: WindowFlops, user: UserFlops, nsteps: int
) -> tuple[np.ndarray | None, str | None]:
    """FLOPs per step for the headline MFU and where they come from: ``--flops-per-step``, else
    the shapes, else the sidecar."""
    if options.flops_per_step:
        return np.full(nsteps, float(options.flops_per_step)), "--flops-per-step"
    if has_shapes:
        # MFU counts the model's FLOPs: activation-checkpoint re-runs go to HFU only
        return wf.mfu_flops, "shapes (FlopCounterMode convention)"
    if user.flops:
        return np.full(nsteps, float(user.flops)), user.source or "sidecar"
    return None, None
