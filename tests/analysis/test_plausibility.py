"""Impossible figures: shares above 1 are flagged (float rounding is clamped), MFU above 1 is nulled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from msgspec import UNSET

from tb_mfu_plugin.analysis.device import plausibility as P
from tb_mfu_plugin.analysis.device.peaks import PeakChoice
from tb_mfu_plugin.analysis.flops.detail import FlopsDetail, Impossible
from tb_mfu_plugin.analysis.report import Summary
from tb_mfu_plugin.analysis.time.step_metrics import StepColumns

BASE: dict[str, Any] = dict(
    gpu_busy_share=0.5,
    kernel_time_share=0.5,
    memcpy_time_share=0.0,
    memset_time_share=0.0,
    idle_share=0.5,
    host_sync_blocked_share=0.0,
    sm_efficiency=0.4,
    achieved_occupancy=0.3,
    tensor_core_kernel_share=0.9,
    h2d_bytes_per_step=0.0,
    d2h_bytes_per_step=0.0,
    d2d_bytes_per_step=0.0,
    p2p_bytes_per_step=0.0,
    sync_count_per_step=0.0,
    kernels_per_step=10.0,
)


def _detail(**mfus: float) -> FlopsDetail:
    """A FLOPs block with nothing counted but the MFU-like figures ``mfus``."""
    return FlopsDetail(
        source=None,
        convention="FlopCounterMode",
        flops_per_step=None,
        executed_flops_per_step=None,
        model_flops_per_step=None,
        attention_recompute_flops_per_step=0.0,
        checkpoint_recompute_flops_per_step=0.0,
        ops_counted=0,
        dtype=None,
        dtype_shares={},
        by_op=[],
        approximate_share=0.0,
        notes=[],
        unattributed_kernel_us=0.0,
        unattributed_kernel_share=None,
        unattributed_top=[],
        **mfus,
    )


def _summary_and_columns(**over: Any) -> tuple[Summary, StepColumns]:
    """A one-step summary and its step's columns, each figure of BASE with ``over``."""
    s = Summary(steps=1, step_time_us=1000.0, **{**BASE, **over})
    values = {k: np.array([float(v)]) for k, v in {**BASE, **over}.items()}
    return s, StepColumns(values=values, known={}, breakdown={}, gaps=np.zeros(0))


def test_rounding_above_one_is_clamped_without_a_flag() -> None:
    s, cols = _summary_and_columns(gpu_busy_share=1.0 + 1e-9)
    s, cols, note = P.guard_shares(s, cols)
    assert s.gpu_busy_share == 1.0 and cols.values["gpu_busy_share"][0] == 1.0 and note is None


def test_a_real_excess_is_flagged_and_named() -> None:
    s, cols, note = P.guard_shares(*_summary_and_columns(sm_efficiency=1.2))
    assert note is not None and "sm_efficiency" in note
    assert s.sm_efficiency == 1.2  # kept, and shown as impossible by every face


def test_mfu_above_one_against_an_assumed_peak_names_the_peak() -> None:
    detail = _detail(hfu=1.4, mfu_model=0.9)
    choice = PeakChoice("H100 SXM", 989.4e12, "bf16", "…", False, dtype_source="assumed")
    guard = P.guard_mfu(1.5, np.array([1.5]), np.array([3]), detail, choice, "--flops-per-step", [])
    assert guard is not None and guard.summary_withheld and guard.steps_withheld.tolist() == [True]
    assert detail.hfu is None and detail.mfu_model == 0.9  # a possible figure stays
    imp = detail.impossible
    assert isinstance(imp, Impossible)
    assert imp.values.mfu == pytest.approx(1.5) and imp.values.hfu == pytest.approx(1.4)
    assert imp.values.steps == {"3": 1.5}
    assert imp.likely_cause == "peak" and "fp8 peak (1,978.9 TFLOP/s)" in imp.explanation
    assert "150" not in guard.note  # no impossible figure in words


def test_mfu_within_bounds_is_untouched() -> None:
    detail = _detail(hfu=0.41)
    choice = PeakChoice("H100 SXM", 989.4e12, "bf16", "…", False)
    assert P.guard_mfu(0.4, np.array([0.4]), np.array([1]), detail, choice, "shapes", []) is None
    assert detail.impossible is UNSET and detail.hfu == 0.41
