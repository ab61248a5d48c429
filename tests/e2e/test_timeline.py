"""The Timeline card in Chromium (issue 36): the saved offline page of every sample draws each
worker's timeline on its canvas with every mark, and every finding has its mark; a finding's "Show
on timeline" zooms to its mark and a click on a mark's flag opens the finding; Compare in a real
TensorBoard draws two runs' timelines one above the other."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT
from .test_browser import TIMEOUT_MS, open_tab
from .test_faces import open_saved

pytestmark = pytest.mark.e2e

SAMPLES = ROOT / "sample_traces"
PAIR = ("gpt_naive_attention", "gpt_sdpa_fused")


def _saved_page(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """``tb-mfu analyze sample_traces --html``, and the same report as JSON, by run."""
    if not any(SAMPLES.glob("*/*.pt.trace.json*")):
        pytest.skip("no sample traces")
    html = tmp_path / "samples.html"
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(SAMPLES), "--json", "--html", str(html)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    ).stdout
    return html, {r["name"]: r for r in json.loads(out)["runs"]}


def _poll(pg: Any, check: Any, what: str) -> None:
    for _ in range(100):
        if check():
            return
        pg.wait_for_timeout(100)
    raise AssertionError(what)


def _check_worker(pg: Any, run: str, w: dict[str, Any]) -> None:
    t = w["timeline"]
    chart = pg.locator("[data-testid=timeline-chart]")
    chart.locator("canvas").first.wait_for(timeout=TIMEOUT_MS)
    assert chart.get_attribute("data-intervals") == str(len(t["intervals"]["lane"]))
    assert chart.get_attribute("data-marks") == str(len(t["marks"]))
    # every mark of a finding of the report went through the canvas' renderer
    _poll(pg, lambda: chart.get_attribute("data-rendered-marks") == str(len(t["marks"])), f"{run}: marks not drawn")
    chips = pg.locator("[data-testid=timeline-mark]")
    assert chips.count() == len(w["findings"])
    for i, f in enumerate(w["findings"]):
        chip = chips.nth(i)
        assert chip.get_attribute("data-id") == f["id"]
        assert int(chip.get_attribute("data-marks") or 0) >= 1, f"{run} {w['name']}: {f['id']} has no mark"
    assert t["why"] in (pg.locator("[data-testid=timeline] .explain").first.text_content() or "")


def test_every_sample_draws_its_timeline_with_a_mark_for_each_finding(browser: Any, tmp_path: Path) -> None:
    html, runs = _saved_page(tmp_path)
    pg = open_saved(browser, html)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    select = pg.locator("[data-testid=run-select]")
    for name, run in runs.items():
        select.select_option(name)
        pg.locator("[data-testid=run-title]").filter(has_text=name).wait_for(timeout=TIMEOUT_MS)
        for i, w in enumerate(run["workers"]):
            if w["error"] or not w["summary"]:
                continue
            if len(run["workers"]) > 1:
                pg.locator("[data-testid=worker-select]").select_option(str(i))
            pg.locator("[data-testid=timeline]").wait_for(timeout=TIMEOUT_MS)
            _check_worker(pg, name, w)
    assert not errors, errors


def test_a_finding_zooms_to_its_mark_and_a_mark_opens_its_finding(browser: Any, tmp_path: Path) -> None:
    html, runs = _saved_page(tmp_path)
    pg = open_saved(browser, html)
    pg.locator("[data-testid=run-select]").select_option(PAIR[0])
    pg.locator("[data-testid=run-title]").filter(has_text=PAIR[0]).wait_for(timeout=TIMEOUT_MS)
    chart = pg.locator("[data-testid=timeline-chart]")
    _poll(pg, lambda: chart.get_attribute("data-first-mark") is not None, "no mark drawn")
    # a click on the first mark's flag opens its finding's evidence
    x, y, finding = (int(v) for v in (chart.get_attribute("data-first-mark") or "").split(","))
    box = chart.bounding_box()
    assert box is not None
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    assert box is not None
    pg.mouse.click(box["x"] + x, box["y"] + y)
    details = pg.locator(f"li.finding[data-index='{finding}'] details")
    _poll(pg, lambda: details.get_attribute("open") is not None, "the mark did not open its finding")
    # "Show on timeline" zooms the timeline onto that finding's first mark
    mark = next(
        m
        for m in runs[PAIR[0]]["workers"][0]["timeline"]["marks"]
        if (m["id"], m["subject"])
        == (
            runs[PAIR[0]]["workers"][0]["findings"][finding]["id"],
            runs[PAIR[0]]["workers"][0]["findings"][finding]["subject"],
        )
    )
    pg.locator(f"li.finding[data-index='{finding}'] [data-testid=show-on-timeline]").click()
    _poll(pg, lambda: chart.get_attribute("data-zoom") is not None, "no zoom")
    lo, hi = (float(v) for v in (chart.get_attribute("data-zoom") or "").split(","))
    assert lo * 1000 <= mark["start_us"] and mark["start_us"] + mark["dur_us"] <= hi * 1000 + 1e-3
    assert hi - lo < runs[PAIR[0]]["workers"][0]["timeline"]["dur_us"] / 1000


def test_compare_draws_two_timelines_on_one_scale(start_tensorboard: Any, page: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "logs"
    for run in PAIR:
        if not any((SAMPLES / run).glob("*.pt.trace.json*")):
            pytest.skip(f"{run} sample not available")
        shutil.copytree(SAMPLES / run, logdir / run)
    tb = start_tensorboard(logdir)
    tb.wait_analysed()
    frame = open_tab(page, tb.url)
    frame.locator("[data-testid=tab-compare]").click()
    picker = frame.locator("[data-testid=compare-picker]")
    picker.wait_for(timeout=TIMEOUT_MS)
    for label in picker.locator("label.chip").all():
        box = label.locator("input")
        if not box.is_checked():
            box.click()
    card = frame.locator("[data-testid=compare-timelines]")
    card.wait_for(timeout=TIMEOUT_MS)
    charts = frame.locator("[data-testid=compare-timeline-chart]")
    assert charts.count() == 2
    for k in range(2):
        charts.nth(k).locator("canvas").first.wait_for(timeout=TIMEOUT_MS)
    text = card.inner_text()
    assert all(run in text for run in PAIR)
    assert not page.errors, page.errors  # type: ignore[attr-defined]
