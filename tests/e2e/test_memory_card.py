"""The Memory card in a real TensorBoard and Chromium (issue 25): on gpt_memory (recorded with
profile_memory=True) it shows the CLI's peak, share of the device and headroom, the timeline with the
peak marked with its op, and the per-step table; on a sample without memory events there is no card."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tb_mfu_plugin.analysis import fmt

from .conftest import ROOT
from .test_browser import TIMEOUT_MS, cli_json, first_usable, open_tab

pytestmark = pytest.mark.e2e

RUNS = ("gpt_memory", "tiny_mlp_launch_bound")


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    for run in RUNS:
        src = ROOT / "sample_traces" / run
        if not any(src.glob("*.pt.trace.json*")):
            pytest.skip(f"{run} sample not available")
        shutil.copytree(src, tmp_path / "logs" / run)
    return tmp_path / "logs"


def test_memory_card_on_gpt_memory_and_none_without_memory_events(
    start_tensorboard: Any, page: Any, logdir: Path, output_dir: Path
) -> None:
    runs = cli_json(logdir)
    m = first_usable(runs["gpt_memory"])["memory"]
    assert first_usable(runs["tiny_mlp_launch_bound"])["memory"]["unavailable"] is not None
    tb = start_tensorboard(logdir)
    tb.wait_analysed()
    frame = open_tab(page, tb.url)
    select = frame.locator("[data-testid=run-select]")
    select.wait_for(timeout=TIMEOUT_MS)
    select.select_option("gpt_memory")
    frame.locator("[data-testid=run-title]").filter(has_text="gpt_memory").wait_for(timeout=TIMEOUT_MS)
    card = frame.locator("[data-testid=memory-card]")
    card.wait_for(timeout=TIMEOUT_MS)
    kpis = frame.locator("[data-testid=memory-kpis]").inner_text()
    assert fmt.nbytes(m["peak_allocated_bytes"]) in kpis  # 1.11 GB: the ground truth's max_memory_allocated
    assert fmt.pct(m["peak_share"]) in kpis and fmt.factor(m["headroom"]["batch_factor"]) in kpis
    frame.locator("[data-testid=memory-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    peak = frame.locator("[data-testid=memory-peak]").inner_text()
    assert fmt.nbytes(m["peak_allocated_bytes"]) in peak and m["peak_op"] in peak
    rows = frame.locator("[data-testid=memory-steps-table] tbody tr")
    assert rows.count() == len(m["steps"]) == 3
    for row, s in zip(rows.all(), m["steps"], strict=True):
        text = row.inner_text()
        assert str(s["step"]) in text and fmt.nbytes(s["peak_allocated_bytes"]) in text and "backward" in text
    assert frame.locator("[data-testid=memory-ops-table] tbody tr").count() == len(m["top_ops"])
    card.scroll_into_view_if_needed()
    page.wait_for_timeout(800)  # charts animate for 300 ms
    card.screenshot(path=str(output_dir / "mfu-memory.png"))

    select.select_option("tiny_mlp_launch_bound")
    frame.locator("[data-testid=run-title]").filter(has_text="tiny_mlp_launch_bound").wait_for(timeout=TIMEOUT_MS)
    frame.locator("[data-testid=mfu-value]").wait_for(timeout=TIMEOUT_MS)
    assert frame.locator("[data-testid=memory-card]").count() == 0
    assert not page.errors, page.errors  # type: ignore[attr-defined]
