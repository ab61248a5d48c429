"""SM efficiency calibrated on hardware counters (``analysis.kernels.sm_active``), checked on the recorded
zoo (validation/sm_zoo: torch.profiler traces matched kernel by kernel with Nsight Compute's
``sm__cycles_active``, on an H200, which the constants were fitted on), on the same zoo recorded on an
H100 that the fit never saw (validation/h100/sm_zoo), and the wave model on hand-made cases."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tb_mfu_plugin.analysis.kernels import sm_active as sa

ZOO = Path(__file__).resolve().parents[3] / "validation" / "sm_zoo"
HELD_OUT = ZOO.parent / "h100" / "sm_zoo"
HELD_OUT_AGAIN = ZOO.parent / "h100_host5" / "sm_zoo"  # another H100 host, recorded a day later
# What the trace cannot tell (docs/metrics.md): cub's radix-sort histogram is held back by its
# atomics, and a 512-block add ran 2.4 µs longer under ncu than in the trace.
KNOWN_MISSES = {"sort_2e20", "add_f32_2e19"}
# On the H100 the sort again, and two kernels the H200 read within 0.15: a 2.4 µs 128-block cuDNN layout
# change (0.20 off) and a 24 µs one-wave bf16 GEMM (0.17 off); the second H100 host misses the same three
HELD_OUT_MISSES = {"sort_2e20", "conv3x3_bf16_nchw_32x64x56", "gemm_bf16_256x1024x16384"}


def _fit_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fit_sm_efficiency", ZOO.parent / "fit_sm_efficiency.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _zoo(folder: Path) -> tuple[ModuleType, dict[str, np.ndarray], int]:
    if not (folder / "zoo_matched.csv.gz").is_file():
        pytest.skip(f"{folder} not recorded")
    fit = _fit_script()
    return (
        fit,
        fit.load(str(folder / "zoo_matched.csv.gz")),
        json.loads((folder / "zoo_meta.json").read_text())["num_sms"],
    )


@pytest.fixture(scope="module")
def zoo() -> tuple[ModuleType, dict[str, np.ndarray], int]:
    return _zoo(ZOO)


@pytest.fixture(scope="module", params=["fitted", "held_out", "held_out_again"])
def each_zoo(request: pytest.FixtureRequest) -> tuple[ModuleType, dict[str, np.ndarray], int]:
    return _zoo({"fitted": ZOO, "held_out": HELD_OUT, "held_out_again": HELD_OUT_AGAIN}[request.param])


@pytest.mark.parametrize(
    "folder, misses, rms",
    [(ZOO, KNOWN_MISSES, 0.06), (HELD_OUT, HELD_OUT_MISSES, 0.065), (HELD_OUT_AGAIN, HELD_OUT_MISSES, 0.065)],
    ids=["fitted", "held_out", "held_out_again"],
)
def test_every_zoo_kernel_within_015_but_the_few_the_trace_cannot_tell(
    folder: Path, misses: set[str], rms: float
) -> None:
    fit, d, sms = _zoo(folder)
    est = fit.estimate(d, sms, sa.OVERHEAD_US, sa.ROUND_WEIGHT)
    on = d["source"] == "zoo"
    assert on.sum() >= 90  # 94 kernels of 57 cases
    err = np.abs(est - d["hw"])[on]
    missed = d["case"][on][err > 0.15]
    assert set(missed) <= misses, missed
    assert err.max() < 0.35 and float(np.sqrt(np.mean(err**2))) < rms
    # torch-tb-profiler's min(1, blocks/SM) misses 39 of them, by up to 0.66
    tb = np.abs(np.minimum(1.0, d["bps"]) - d["hw"])[on]
    assert (tb > 0.15).sum() > 30 and tb.max() > 0.6


def test_time_weighted_step_figure_within_005_of_the_hardware(each_zoo: tuple) -> None:
    fit, d, sms = each_zoo
    est = fit.estimate(d, sms, sa.OVERHEAD_US, sa.ROUND_WEIGHT)
    steps = sorted(set(d["case"][d["source"] == "step"]))
    assert len(steps) >= 2
    for step in steps:
        m = d["case"] == step
        w = d["dur"][m]
        hw, ours = float((d["hw"][m] * w).sum() / w.sum()), float((est[m] * w).sum() / w.sum())
        tb = float((np.minimum(1.0, d["bps"][m]) * w).sum() / w.sum())
        assert abs(ours - hw) <= 0.05, (step, ours, hw)
        assert abs(ours - hw) < abs(tb - hw)


def test_the_product_constants_are_the_fit_of_the_recorded_zoo(zoo: tuple) -> None:
    fit, d, sms = zoo
    assert fit.fit(d, sms) == (sa.OVERHEAD_US, sa.ROUND_WEIGHT)


def test_wave_model() -> None:
    inf = np.inf
    bps = np.array([0.25, 1.0, 1.5, 2.0, 1.5, 0.0])
    res = np.array([inf, inf, 1.0, 1.0, inf, inf])
    # rounds: 1.5 blocks/SM one at a time -> half the SMs run a second round alone: 0.75;
    # all resident (fluid limit 1.5/2 = 0.75, rounds 1): the blend; nothing launched: 0
    got = sa.wave_coverage(bps, res, 0.5)
    assert got == pytest.approx([0.25, 1.0, 0.75, 1.0, 0.5 * 1.0 + 0.5 * 0.75, 0.0])


def test_resident_blocks_read_from_the_rounded_occupancy() -> None:
    # 128-thread blocks, 2048 threads per SM: 24 % of 3.88 blocks/SM is all of them (rounded), 50 %
    # of 62 blocks/SM is 8 at once; the estimator's 0 (nvjet) says nothing
    got = sa.resident_blocks(np.array([3.88, 62.0, 1.0]), np.array([24.0, 50.0, 0.0]), np.array([128.0, 128.0, 384.0]))
    assert got.tolist() == [float("inf"), 8.0, float("inf")]


def test_duration_and_unknown_blocks() -> None:
    a = sa.sm_active(np.array([1.0, 1.0, np.nan]), np.zeros(3), np.full(3, 256.0), np.array([2.4, 1000.0, 5.0]))
    assert a[0] == pytest.approx(0.5) and a[1] == pytest.approx(1000 / 1002.4) and np.isnan(a[2])
