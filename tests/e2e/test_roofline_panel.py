"""The Roofline panel in a real TensorBoard and Chromium, on the H200 microbenchmark sample.

The table shows the CLI's roof shares for the streaming multiply and the 8192³ GEMM, the
chart draws both points, and hovering the GEMM's point shows its numbers.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
from .test_browser import TIMEOUT_MS, cli_json, first_usable, open_tab, pct_text

pytestmark = pytest.mark.e2e

SAMPLE = ROOT / "sample_traces" / "roofline_microbench"


@pytest.fixture
def microbench_logdir(tmp_path: Path) -> Path:
    if not any(SAMPLE.glob("*.pt.trace.json*")):
        pytest.skip("roofline_microbench sample not available")
    dst = tmp_path / "logs" / "roofline_microbench"
    shutil.copytree(SAMPLE, dst)
    return dst.parent


def _point_px(box: dict[str, float], x: float, y: float, lo: float, hi: float) -> tuple[float, float]:
    """Pixel of (intensity, TFLOP/s) on the chart: both axes log10 over [lo, hi] decades, grid
    insets as in frontend/src/roofline.ts (left 72, right 24, top 48, bottom 48)."""
    fx = (math.log10(x) - lo) / (hi - lo)
    fy = (math.log10(y) - lo) / (hi - lo)
    px = box["x"] + 72 + fx * (box["width"] - 96)
    py = box["y"] + box["height"] - 48 - fy * (box["height"] - 96)
    return px, py


def test_roofline_panel_shows_the_cli_shares_and_hover(
    start_tensorboard, page: Any, microbench_logdir: Path, output_dir: Path
) -> None:
    run = cli_json(microbench_logdir)["roofline_microbench"]
    roof = first_usable(run)["roofline"]
    ops = {o["name"]: o for o in roof["ops"]}
    tb = start_tensorboard(microbench_logdir)
    tb.wait_analysed()
    frame = open_tab(page, tb.url)
    card = frame.locator("[data-testid=roofline-card]")
    card.wait_for(timeout=TIMEOUT_MS)
    frame.locator("[data-testid=roofline-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    rows = frame.locator("[data-testid=roofline-table] tbody tr")
    rows.first.wait_for(timeout=TIMEOUT_MS)
    assert rows.count() == 2
    for name in ("aten::mul", "aten::mm"):
        row = rows.filter(has_text=name)
        assert row.count() == 1
        assert pct_text(ops[name]["roof_share"]) in row.inner_text()
        assert ops[name]["bound"] in row.inner_text()
    assert "4,800.0 GB/s" in frame.locator("[data-testid=roofline-facts]").inner_text()

    card.scroll_into_view_if_needed()
    page.set_viewport_size({"width": 1440, "height": 1400})
    page.wait_for_timeout(800)  # charts animate for 300 ms
    # the GEMM's point: intensity 2731 FLOP/B, 711 TFLOP/s; both axes span 1e-2 .. 1e4
    chart = frame.locator("[data-testid=roofline-chart]")
    box = chart.bounding_box()
    assert box is not None
    mm = ops["aten::mm"]
    px, py = _point_px(box, mm["intensity"], mm["achieved_flops"] / 1e12, -2.0, 4.0)
    page.mouse.move(px, py)
    tooltip = chart.locator(".tt")
    tooltip.wait_for(timeout=10_000)
    text = tooltip.inner_text()
    assert "aten::mm" in text and "compute-bound" in text and pct_text(mm["roof_share"]) in text
    card.screenshot(path=str(output_dir / "mfu-roofline.png"))
    assert not page.errors, page.errors  # type: ignore[attr-defined]
