"""A 4-rank run fills in while it loads, in a real TensorBoard and a real Chromium.

TensorBoard runs under ``staggered_tensorboard.py``, which holds the k-th analysed
file back k times ``STAGGER_S`` seconds (a wrapper of the cache's executor, put in by
the test), so the half-loaded state lasts long enough to be seen whatever the machine's
speed: first one rank's figures with the others pending and no straggler, then all four
ranks side by side.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
from .test_browser import TIMEOUT_MS, cli_json, open_tab, pct_text

pytestmark = pytest.mark.e2e

RUN = "ddp_4gpu"
STAGGER_S = "6"


def test_ranks_appear_as_they_are_analysed(start_tensorboard: Any, page: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    shutil.copytree(ROOT / "sample_traces" / RUN, logdir / RUN)
    launcher = [sys.executable, str(Path(__file__).with_name("staggered_tensorboard.py")), STAGGER_S]
    tb = start_tensorboard(logdir, "--mfu_workers", "2", command=launcher)
    frame = open_tab(page, tb.url)

    # Partial: one rank's numbers on screen while the others are still pending.
    banner = frame.locator("[data-testid=partial-banner]")
    banner.wait_for(timeout=TIMEOUT_MS)
    frame.locator("[data-testid=run-title]").filter(has_text=RUN).wait_for(timeout=TIMEOUT_MS)
    shown_mfu = frame.locator("[data-testid=mfu-value]").text_content()
    assert "files analysed" in (banner.text_content() or "")
    assert "Still analysing" in (banner.text_content() or "")
    assert frame.locator("[data-testid=straggler]").count() == 0  # named only once every rank is in
    expected = cli_json(logdir)[RUN]
    mfus = {pct_text(w["summary"]["mfu"]) for w in expected["workers"]}
    assert shown_mfu in mfus  # a real rank's figure, as the CLI gives it
    page.screenshot(path=str(ROOT / "test-output" / "mfu-progressive-partial.png"))

    # Full: every rank side by side, nothing pending.
    banner.wait_for(state="detached", timeout=TIMEOUT_MS)
    rows = frame.locator("[data-testid=ranks-table] tbody tr")
    rows.nth(3).wait_for(timeout=TIMEOUT_MS)
    assert rows.count() == 4
    assert frame.locator("[data-testid=ranks-pending]").count() == 0
    workers = frame.locator("[data-testid=worker-select] option")
    assert workers.count() == 4
    page.screenshot(path=str(ROOT / "test-output" / "mfu-progressive-full.png"))
