"""The critical-path card and the what-if panel in a real TensorBoard and Chromium, on the recorded
``item_sync`` 'before' (validation/whatif_pairs: three re-timed findings).

The card lists the CLI's critical-path classes with their time per step, adding up to the step; the
panel starts at the recorded step, and picking findings shows the report's re-timing of exactly that
set (one finding, two together, all of them): the step, the gain and the MFU after, as the CLI's
JSON has them, never a sum of the gains alone.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tb_mfu_plugin.analysis.fmt import us

from ..conftest import validation_folder
from .conftest import ROOT
from .test_browser import TIMEOUT_MS, cli_json, first_usable, open_tab, pct_text

pytestmark = pytest.mark.e2e


@pytest.fixture
def pair_logdir(tmp_path: Path) -> Path:
    if not (ROOT / "validation" / "whatif_pairs" / "ground_truth.json").is_file():
        pytest.skip("the recorded what-if pairs are not available")
    sample = validation_folder("whatif_pairs") / "item_sync" / "before"  # unpacked from validation/traces.tar.xz
    dst = tmp_path / "logs" / "item_sync_before"
    shutil.copytree(sample, dst)
    return dst.parent


def _case(wi: dict[str, Any], mask: int) -> dict[str, Any]:
    return next(c for c in wi["cases"] if c["mask"] == mask)


def test_critical_path_and_whatif_panel_show_the_reports_retimings(
    start_tensorboard, page: Any, pair_logdir: Path, output_dir: Path
) -> None:
    w = first_usable(cli_json(pair_logdir)["item_sync_before"])
    cp, wi = w["critical_path"], w["whatif"]
    assert len(wi["findings"]) >= 2 and wi["combined"] is not None
    tb = start_tensorboard(pair_logdir)
    tb.wait_analysed()
    frame = open_tab(page, tb.url)

    table = frame.locator("[data-testid=critical-path-table]")
    table.wait_for(timeout=TIMEOUT_MS)
    frame.locator("[data-testid=critical-path-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    shown = [c for c in cp["classes"] if cp["us_per_step"].get(c, 0) > 0]
    rows = table.locator("tbody tr[data-cls]")
    assert rows.count() == len(shown)
    for c in shown:
        text = rows.and_(frame.locator(f"[data-cls={c}]")).inner_text()
        assert us(cp["us_per_step"][c]) in text and pct_text(cp["share"][c]) in text
    total = sum(cp["us_per_step"][c] for c in shown)
    assert frame.locator("[data-testid=critical-path-total]").inner_text() == us(total)

    panel = frame.locator("[data-testid=whatif]")
    step = panel.locator("[data-testid=whatif-step]")
    assert step.inner_text() == us(wi["step_us"])  # nothing picked: the step as recorded
    assert panel.locator("[data-testid=whatif-mfu]").inner_text() == pct_text(wi["mfu"])
    boxes = panel.locator("input[data-index]")
    assert boxes.count() == len(wi["findings"])

    def check(case: dict[str, Any]) -> None:
        assert step.inner_text() == us(case["step_us"])
        assert us(case["gain_us_per_step"]) in panel.locator("[data-testid=whatif-gain]").inner_text()
        assert panel.locator("[data-testid=whatif-mfu]").inner_text() == pct_text(case["mfu"])
        assert panel.locator("[data-testid=whatif-floor]").inner_text() == us(case["floor_us"])
        # the headline figures, without the profiler: every case has them, the fixes together too
        assert panel.locator("[data-testid=whatif-unprofiled]").inner_text() == us(case["unprofiled_step_us"])
        gain = panel.locator("[data-testid=whatif-unprofiled-gain]")
        assert gain.inner_text() == us(case["unprofiled_gain_us_per_step"])
        assert f"{pct_text(case['unprofiled_gain_share'])} of the step" in gain.locator("xpath=..").inner_text()

    # two findings whose fixes overlap: together is one re-timing, not the sum of the two alone
    n = len(wi["findings"])
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    i, j = next(
        (i, j)
        for i, j in pairs
        if _case(wi, 1 << i | 1 << j)["gain_us_per_step"]
        != pytest.approx(_case(wi, 1 << i)["gain_us_per_step"] + _case(wi, 1 << j)["gain_us_per_step"], rel=1e-3)
    )
    boxes.nth(i).check()
    check(_case(wi, 1 << i))
    boxes.nth(j).check()
    check(_case(wi, 1 << i | 1 << j))
    boxes.nth(i).uncheck()
    check(_case(wi, 1 << j))
    boxes.nth(j).uncheck()
    panel.locator("input[data-finding='*']").check()
    check(wi["combined"])
    assert f"All {wi['findings_retimed']}" in panel.locator("[data-testid=whatif-picked]").inner_text()
    panel.locator("input[data-finding='*']").uncheck()
    assert step.inner_text() == us(wi["step_us"])

    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(output_dir / "mfu-whatif.png"))
    assert not page.errors, page.errors  # type: ignore[attr-defined]
