"""A long profiling window in a real TensorBoard and Chromium: 6,000 steps, each with its own
kernel time, so that every step's breakdown differs.

The per-step chart draws them (ECharts' large mode, with a zoom, above 2,000 steps), and its
tooltip shows the hovered step's parts as the report has them (``Step.breakdown_us`` and
``Step.breakdown``), not a product made in the tab. benchmarks/bench_tab_many_steps.py times the
same chart on 100,000 steps.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.fmt import us

from .test_browser import TIMEOUT_MS, cli_json, first_usable, open_tab, pct_text

pytestmark = pytest.mark.e2e

STEPS = 6000


@pytest.fixture
def long_window(tmp_path: Path) -> Path:
    b = TraceBuilder()
    for i in range(STEPS):
        t = 1000.0 + i * 100.0
        b.step(i, t, 90.0)
        # kernel time 10..49 µs: the steps' shares and part times all differ
        b.launch_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", t + 5, t + 20, 10.0 + i % 40)
    run = tmp_path / "logs" / "long_window"
    run.mkdir(parents=True)
    b.write(run / "w.1.pt.trace.json.gz")
    return run.parent


def _hover_step(frame: Any, page: Any, x_frac: float) -> str:
    chart = frame.locator("[data-testid=steps-chart]")
    box = chart.bounding_box()
    page.mouse.move(box["x"] + box["width"] * x_frac, box["y"] + box["height"] * 0.6)
    tip = frame.locator(".tt").filter(has_text="Step ")
    tip.first.wait_for(timeout=TIMEOUT_MS)
    text: str = tip.first.inner_text()
    return text


def test_a_long_window_draws_and_its_tooltip_shows_the_steps_own_parts(
    start_tensorboard, page: Any, long_window: Path
) -> None:
    w = first_usable(cli_json(long_window)["long_window"])
    steps = {s["step"]: s for s in w["steps"]}
    assert len(steps) == STEPS
    tb = start_tensorboard(long_window)
    tb.wait_analysed()
    frame = open_tab(page, tb.url)
    frame.locator("[data-testid=steps-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    frame.locator("[data-testid=steps-card]").scroll_into_view_if_needed()
    seen = set()
    for x in (0.3, 0.55, 0.8):
        text = _hover_step(frame, page, x)
        m = re.search(r"Step (\d+)", text)
        assert m, text
        s = steps[int(m[1])]
        seen.add(s["step"])
        # each part: its time in that step and its share, as the report has them
        for key, label in (("kernel", "Kernels"), ("idle_other", "Other GPU idle")):
            line = f"{label}\n{us(s['breakdown_us'][key])} · {pct_text(s['breakdown'][key])}"
            assert line in text, (line, text)
    assert len(seen) == 3
    assert not page.errors
