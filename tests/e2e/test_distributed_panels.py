"""The distributed panels in a real TensorBoard and Chromium: a rank's Communication card, the
ranks' clocks and overlap, and the Strategies view, against ``tb-mfu compare --json``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
from .test_browser import TIMEOUT_MS, _chip_name, open_tab, pct_text, poll

pytestmark = pytest.mark.e2e

SAMPLES = ROOT / "sample_traces"
RUNS = ("ddp_2gpu", "fsdp2_2gpu", "tp_2gpu")


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    if not all((SAMPLES / r).is_dir() for r in RUNS):
        pytest.skip("multi-GPU sample traces not available")
    dst = tmp_path / "logs"
    for r in RUNS:
        shutil.copytree(SAMPLES / r, dst / r)
    return dst


def compare_json(logdir: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "compare", *(str(logdir / r) for r in RUNS), "--json"],
        check=True,
        capture_output=True,
        cwd=ROOT,
    ).stdout
    return {row["run"]: row for row in json.loads(out)["strategies"]}


def job_json(run: Path) -> dict[str, Any]:
    """The job's MFU of ``run`` as ``tb-mfu analyze --json`` gives it."""
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(run), "--json"],
        check=True,
        capture_output=True,
        cwd=ROOT,
    ).stdout
    job: dict[str, Any] = json.loads(out)["runs"][0]["ranks"]["job"]
    return job


def test_communication_ranks_and_strategies(start_tensorboard, page, logdir, output_dir):
    expected = compare_json(logdir)
    job = job_json(logdir / "ddp_2gpu")
    tb = start_tensorboard(logdir)
    tb.wait_analysed()
    frame = open_tab(page, tb.url)
    run_select = frame.locator("[data-testid=run-select]")
    run_select.wait_for(timeout=TIMEOUT_MS)
    run_select.select_option("ddp_2gpu")

    poll(lambda: frame.locator("[data-testid=run-strategy]").text_content() == "DDP")
    card = frame.locator("[data-testid=communication-card]")
    card.wait_for(timeout=TIMEOUT_MS)
    kpis = frame.locator("[data-testid=comm-kpis]")
    poll(lambda: "DDP" in kpis.inner_text() and "NVLink 4" in kpis.inner_text())
    rows = frame.locator("[data-testid=collectives-table] tbody tr")
    assert rows.count() >= 1 and "allreduce" in rows.first.inner_text() and "default_pg (2)" in rows.first.inner_text()
    ranks = frame.locator("[data-testid=ranks-table]")
    assert "Clock shift" in ranks.inner_text() and "Overlap" in ranks.inner_text()
    assert "Clocks aligned on the ends of" in frame.locator("[data-testid=clock-note]").inner_text()
    # one job, one MFU: the ranks card says it, and rank 0's Overview, which reads 16 %, points to it
    line = frame.locator("[data-testid=ranks-job-mfu]").inner_text()
    assert line.startswith(f"Job MFU {pct_text(job['mfu'])}") and "rank1's estimate, the shortest" in line
    note = frame.locator("[data-testid=mfu-job]").inner_text()
    assert note.startswith(f"Job MFU {pct_text(job['mfu'])} over every rank")
    waited = frame.locator("[data-testid=rank-waited]").inner_text()
    assert "This rank waited for others" in waited and "the job's step shortens with the fixes of rank1's" in waited
    page.set_viewport_size({"width": 1440, "height": 2600})
    page.wait_for_timeout(800)
    page.screenshot(path=str(output_dir / "mfu-communication.png"))
    page.set_viewport_size({"width": 1440, "height": 1000})

    frame.locator("[data-testid=tab-strategies]").click()
    picker = frame.locator("[data-testid=compare-picker]")
    picker.wait_for(timeout=TIMEOUT_MS)
    for label in picker.locator("label.chip").all():
        checkbox = label.locator("input")
        if not checkbox.is_checked() and _chip_name(label) in RUNS:
            checkbox.click()
    table = frame.locator("[data-testid=strategies-table]")
    body = table.locator("tbody tr")
    poll(lambda: body.count() == len(RUNS))
    for tr in body.all():
        cells = tr.locator("td").all_text_contents()
        row = expected[cells[0].strip()]
        assert cells[1] == " × ".join(row["strategy"])
        # the job's MFU, then the per-rank: the mean, the lowest and highest rank's, each named on the page
        assert cells[4].startswith(pct_text(row["job_mfu"])) and cells[4].endswith(" ms")  # "over 18.64 ms"
        mean, low, high = (pct_text(row[k]) for k in ("mfu_mean", "mfu_min", "mfu_max"))
        assert cells[5] == f"{mean} meanlowest {low} · highest {high}"
        assert cells[7] == pct_text(row["overlap_ratio"])
    page.set_viewport_size({"width": 1440, "height": 900})
    page.wait_for_timeout(500)
    page.screenshot(path=str(output_dir / "mfu-strategies.png"))
    assert not page.errors, page.errors  # type: ignore[attr-defined]
