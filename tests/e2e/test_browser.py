"""The MFU tab in a real TensorBoard, driven in a real headless Chromium.

- The figures on the page equal the CLI's ``--json`` figures for the same run.
- Switching run and opening Compare work; screenshots land in test-output/.
- Untrusted strings (a run name and a kernel name carrying an <img onerror>) stay text.
- With ``--load_fast=false`` the PYTORCH_PROFILER tab is listed beside MFU.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tb_mfu_plugin.analysis import fmt

from .conftest import ROOT

pytestmark = pytest.mark.e2e

SAMPLES = ROOT / "sample_traces"
SHARED_SAMPLES = ROOT.parent / "shared" / "fixtures" / "torch_tb_profiler_samples"
FRAME = 'iframe[src*="plugin_entry.html?name=mfu"]'
TIMEOUT_MS = 120_000


def _has_traces(d: Path) -> bool:
    return d.is_dir() and any(d.glob("*/*.pt.trace.json*"))


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    """The embedded H200 sample traces; else a copy of the torch-tb-profiler samples."""
    if _has_traces(SAMPLES):
        return SAMPLES
    if not _has_traces(SHARED_SAMPLES):
        pytest.skip("no sample traces")
    dst = tmp_path / "logs"
    shutil.copytree(SHARED_SAMPLES, dst, ignore=shutil.ignore_patterns("*.txt", "LICENSE"))
    return dst


def cli_json(path: Path) -> dict[str, Any]:
    """``python -m tb_mfu_plugin.cli analyze PATH --json``, by run name."""
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json"],
        check=True,
        capture_output=True,
        cwd=ROOT,
    ).stdout
    return {r["name"]: r for r in json.loads(out)["runs"]}


def first_usable(run: dict[str, Any]) -> dict[str, Any]:
    return next(w for w in run["workers"] if w["summary"] and not w["error"])


def pct_text(x: float | None) -> str:
    """The page's pct(): one decimal, two under 1 %, en-US grouping."""
    if x is None:
        return "n/a"
    v = x * 100
    digits = 1 if abs(v) >= 1 or v == 0 else 2
    return f"{v:,.{digits}f} %"


def ms_text(us: float) -> str:
    return f"{us / 1000:,.2f} ms"


def open_tab(page: Any, url: str) -> Any:
    page.goto(url + "/#mfu")
    page.wait_for_selector(FRAME, timeout=TIMEOUT_MS)
    return page.frame_locator(FRAME)


def check_overview_matches_cli(frame: Any, run: dict[str, Any]) -> None:
    frame.locator("[data-testid=run-title]").filter(has_text=run["name"]).wait_for(timeout=TIMEOUT_MS)
    w = first_usable(run)
    s = w["summary"]
    mfu = frame.locator("[data-testid=mfu-value]")
    mfu.wait_for(timeout=TIMEOUT_MS)
    raw = mfu.get_attribute("data-value")
    if s["mfu"] is None:
        assert raw == "" and mfu.text_content() == "n/a"
        assert frame.locator("[data-testid=mfu-why]").text_content()
    else:
        assert float(raw) == s["mfu"]  # the exact figure of the CLI's --json
        assert mfu.text_content() == pct_text(s["mfu"])
    likely = frame.locator("[data-testid=mfu-range]")
    if s.get("mfu_range") is None:  # no range where the headline is not an estimate: never an empty one
        assert likely.count() == 0
    else:
        low, high = pct_text(s["mfu_range"]["low"]), pct_text(s["mfu_range"]["high"])
        want = (
            f"likely {low}: the profiler's cost hardly moves it"
            if low == high
            else f"likely {low}–{high}, as the profiler's cost varies"
        )
        assert likely.text_content() == want
    step = frame.locator("[data-testid=step-time]")
    assert step.text_content() == ms_text(s["step_time_us"])
    # the KPI is the mean analysed step (one aggregation per worker); the per-step spread sits in its own block
    assert step.locator("xpath=..").locator(".kpi-label").text_content() == "Step time"
    spread = frame.locator("[data-testid=step-spread] tr[data-key=step_time_us] td")
    assert spread.first.text_content() == ms_text(s["distribution"]["step_time_us"]["median"])
    # each step's MFU is over its traced time: named so, never as the headline over the step without the profiler
    per_step = frame.locator("[data-testid=step-spread] tr[data-key=mfu]")
    if s["distribution"].get("mfu"):
        assert per_step.locator("th").text_content() == "MFU of the step as traced"
        assert per_step.locator("td").first.text_content() == pct_text(s["distribution"]["mfu"]["median"])
    else:
        assert per_step.count() == 0


def test_mfu_tab_shows_the_cli_figures_switches_run_and_compares(start_tensorboard, page, logdir, output_dir):
    expected = cli_json(logdir)
    assert len(expected) >= 2
    tb = start_tensorboard(logdir)
    body = tb.wait_analysed()
    names = [r["name"] for r in body["runs"]]
    assert sorted(names) == sorted(expected)
    good = [n for n in names if any(w["summary"] and not w["error"] for w in expected[n]["workers"])]

    frame = open_tab(page, tb.url)
    # TensorBoard's own tab bar lists MFU, and the iframe renders our module.
    assert page.get_by_text("MFU", exact=True).first.is_visible()

    run_select = frame.locator("[data-testid=run-select]")
    run_select.wait_for(timeout=TIMEOUT_MS)
    # the select is drawn before /runs has answered: its value is '' until its options are in
    poll(lambda: run_select.input_value() != "")
    first = run_select.input_value()
    check_overview_matches_cli(frame, expected[first])
    frame.locator("[data-testid=steps-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    frame.locator("[data-testid=kernels-table] tbody tr").first.wait_for(timeout=TIMEOUT_MS)
    href = frame.locator("[data-testid=pytorch-link]").get_attribute("href")
    assert href == tb.url + "/#pytorch_profiler"

    # Prefer a run with a known MFU for the screenshot, then switch to another one.
    with_mfu = [n for n in good if first_usable(expected[n])["summary"]["mfu"] is not None]
    shot_run = with_mfu[0] if with_mfu else good[0]
    if shot_run != first:
        run_select.select_option(shot_run)
        check_overview_matches_cli(frame, expected[shot_run])
    page.set_viewport_size({"width": 1440, "height": 2300})
    page.wait_for_timeout(800)  # charts animate for 300 ms
    page.screenshot(path=str(output_dir / "mfu-overview.png"))
    page.set_viewport_size({"width": 1440, "height": 1000})

    other = next(n for n in good if n != shot_run)
    run_select.select_option(other)
    check_overview_matches_cli(frame, expected[other])

    # A run that replays CUDA graphs says so in its launch statistics.
    if "tiny_mlp_cuda_graph" in good:
        run_select.select_option("tiny_mlp_cuda_graph")
        stats = frame.locator("[data-testid=launch-stats]")
        poll(lambda: "CUDA graph replays / step" in stats.inner_text())
        la = first_usable(expected["tiny_mlp_cuda_graph"])["launches"]
        assert f"{la['graph_kernels_per_step']:.0f}" in stats.inner_text()
        # several findings: the gain of fixing them all together, never their sum
        found = first_usable(expected["tiny_mlp_cuda_graph"])["findings"]
        if len(found) >= 2:
            combined = frame.locator("[data-testid=combined-gain]")
            poll(lambda: f"All {len(found)} together" in combined.inner_text())

    # Compare: the first two runs by default; pick two known-good ones explicitly.
    frame.locator("[data-testid=tab-compare]").click()
    picker = frame.locator("[data-testid=compare-picker]")
    picker.wait_for(timeout=TIMEOUT_MS)
    # The hand-written-attention GPT against its SDPA/fused fix shows findings fixed or new.
    pair = ["gpt_naive_attention", "gpt_sdpa_fused"]
    wanted = pair if all(n in good for n in pair) else [shot_run, other]
    for label in picker.locator("label.chip").all():
        checkbox = label.locator("input")
        if checkbox.is_checked() != (_chip_name(label) in wanted):
            checkbox.click()
    table = frame.locator("[data-testid=compare-table]")
    heads_loc = table.locator("thead .runname")
    poll(lambda: sorted(t.strip() for t in heads_loc.all_text_contents()) == sorted(wanted))
    heads = [t.strip() for t in heads_loc.all_text_contents()]
    mfu_row = table.locator("tbody tr").filter(has=frame.locator("th", has_text=re.compile(r"^MFU$")))
    vals = mfu_row.locator("td .val").all_text_contents()
    assert vals == [pct_text(first_usable(expected[n])["summary"]["mfu"]) for n in heads]
    frame.locator("[data-testid=compare-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    if wanted == pair:
        changes = frame.locator("[data-testid=findings-diff] tbody tr").filter(
            has=frame.locator("code", has_text=re.compile(r"^naive_attention$"))
        )
        # naive_attention is in one run only: "fixed" or "new" depending on which is the baseline
        assert changes.locator("[data-testid=finding-fixed], [data-testid=finding-new]").count() == 1
        # every finding fixed at once, per run: the report's combined gain, not the column's sum
        together = frame.locator("[data-testid=findings-together] td.num").all_text_contents()
        for name, text in zip(heads, together, strict=True):
            w = first_usable(expected[name])
            want = fmt.NA if len(w["findings"]) < 2 else fmt.us(w["combined_gain_us_per_step"])
            assert text.startswith(want), (name, text, want)
    page.set_viewport_size({"width": 1440, "height": 1700})
    page.wait_for_timeout(800)
    page.screenshot(path=str(output_dir / "mfu-compare.png"))
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def poll(pred: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("the page did not reach the expected state")
        time.sleep(0.1)


def _chip_name(label: Any) -> str:
    # A chip is: checkbox, [order badge], name, [state]; the name span has no class.
    spans = label.locator("span:not([class])").all_text_contents()
    return spans[0] if spans else ""


XSS = '<img src=x onerror="window.__xss=1;window.parent.__xss=1">'


def test_untrusted_names_render_as_text_and_a_corrupt_run_shows_its_error(
    start_tensorboard, page, tmp_path, output_dir
):
    from tracegen import TraceBuilder

    logdir = tmp_path / "logs"
    b = TraceBuilder()
    for i in range(3):
        t0 = 10_000.0 + i * 1000
        b.step(i + 1, t0, 900)
        b.launch_kernel(XSS, t0 + 10, t0 + 50, 400)
        b.launch_kernel("ampere_sgemm_128x64_tn", t0 + 20, t0 + 460, 300)
    b.write(logdir / XSS.replace("/", "_") / "worker0.1700000000000.pt.trace.json.gz")
    broken = logdir / "broken_run"
    broken.mkdir()
    (broken / "worker0.1700000000001.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{')[:-6])
    tb = start_tensorboard(logdir)
    tb.wait_analysed()

    frame = open_tab(page, tb.url)
    run_select = frame.locator("[data-testid=run-select]")
    run_select.wait_for(timeout=TIMEOUT_MS)
    run_name = XSS.replace("/", "_")
    run_select.select_option(run_name)
    title = frame.locator("[data-testid=run-title]")
    title.filter(has_text="onerror").wait_for(timeout=TIMEOUT_MS)
    assert title.text_content() == run_name
    kernel_cells = frame.locator("[data-testid=kernels-table] .kname")
    kernel_cells.first.wait_for(timeout=TIMEOUT_MS)
    assert XSS in kernel_cells.all_text_contents()
    # Nothing was parsed as markup: no <img> in the plugin's document, no handler ran.
    inner = page.frame_locator(FRAME).locator("img")
    assert inner.count() == 0
    frames = [f for f in page.frames if "plugin_entry.html" in f.url]
    assert frames and frames[0].evaluate("window.__xss") is None
    assert page.evaluate("window.__xss") is None
    # Sorting and filtering re-render rows: still text.
    frame.locator("[data-testid=kernels-table] th", has_text="Kernel").click()
    frame.locator("[data-testid=kernels-table] input.filter").fill("onerror")
    assert kernel_cells.all_text_contents() == [XSS]
    assert inner.count() == 0 and frames[0].evaluate("window.__xss") is None

    # The corrupt run shows its error; the good run keeps working.
    assert "error" in (frame.locator("[data-testid=run-select] option", has_text="broken_run").text_content() or "")
    run_select.select_option("broken_run")
    err = frame.locator("[data-testid=worker-error]")
    err.wait_for(timeout=TIMEOUT_MS)
    assert "worker0.1700000000001.pt.trace.json.gz" in (err.text_content() or "")
    page.screenshot(path=str(output_dir / "mfu-corrupt-run.png"))
    run_select.select_option(run_name)
    title.filter(has_text="onerror").wait_for(timeout=TIMEOUT_MS)

    # Compare puts the run name in chips, headers and chart labels: still text, and the
    # corrupt run's column says error while the good one shows its figures.
    frame.locator("[data-testid=tab-compare]").click()
    # One run is analysable: no pair is suggested, and the view says what to pick; pick both.
    assert "pick two or more runs" in (frame.locator("[data-testid=compare-hint]").text_content() or "")
    for label in frame.locator("[data-testid=compare-picker] label.chip").all():
        label.locator("input").click()
    table = frame.locator("[data-testid=compare-table]")
    table.wait_for(timeout=TIMEOUT_MS)
    heads = [t.strip() for t in table.locator("thead .runname").all_text_contents()]
    assert sorted(heads) == sorted([run_name, "broken_run"])
    step_row = table.locator("tbody tr").filter(has=frame.locator("th", has_text=re.compile(r"^Step time$")))
    cells = step_row.locator("td").all_text_contents()
    assert cells[heads.index("broken_run")] == "error"
    assert re.search(r"\d (ns|µs|ms|s)$", cells[heads.index(run_name)])  # format.ts dur: one time format
    assert inner.count() == 0 and frames[0].evaluate("window.__xss") is None
    assert page.evaluate("window.__xss") is None
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_load_fast_false_lists_pytorch_profiler_beside_mfu(start_tensorboard, page, logdir):
    expected = cli_json(logdir)
    tb = start_tensorboard(logdir, "--load_fast=false")
    tb.wait_analysed()
    listing = tb.get_json("/data/plugins_listing")
    assert listing["mfu"]["enabled"] is True and listing["mfu"]["tab_name"] == "MFU"
    assert "pytorch_profiler" in listing and listing["pytorch_profiler"]["enabled"] is True

    frame = open_tab(page, tb.url)
    tabs = page.locator("#tf-tensorboard, tb-header, body").first.inner_text(timeout=TIMEOUT_MS)
    assert "PYTORCH_PROFILER" in tabs.upper() and "MFU" in tabs
    run_select = frame.locator("[data-testid=run-select]")
    run_select.wait_for(timeout=TIMEOUT_MS)
    poll(lambda: run_select.input_value() != "")  # the select is drawn before /runs answers
    check_overview_matches_cli(frame, expected[run_select.input_value()])
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_impossible_mfu_is_shown_as_impossible_with_its_cause(start_tensorboard, page, tmp_path, output_dir):
    """A sidecar claiming more FLOPs than the GPU can run: the tab never shows MFU as a figure."""
    from tracegen import TraceBuilder

    logdir = tmp_path / "logs"
    b = TraceBuilder()
    for i in range(3):
        t0 = 10_000.0 + i * 1000
        b.step(i + 1, t0, 900)
        b.launch_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT", t0 + 10, t0 + 50, 400)
        b.launch_kernel("my_new_library_gemm_kernel_v2", t0 + 20, t0 + 460, 300)
    run = logdir / "too_many_flops"
    b.write(run / "worker0.1700000000000.pt.trace.json.gz")
    (run / "tb_mfu.json").write_text(json.dumps({"version": 1, "flops_per_step": 1e15}))
    tb = start_tensorboard(logdir)
    tb.wait_analysed()

    frame = open_tab(page, tb.url)
    frame.locator("[data-testid=run-title]").filter(has_text="too_many_flops").wait_for(timeout=TIMEOUT_MS)
    mfu = frame.locator("[data-testid=mfu-value]")
    assert mfu.text_content() == "impossible" and mfu.get_attribute("data-value") == ""
    reason = frame.locator("[data-testid=mfu-reason]").text_content() or ""
    assert "Likely cause: the FLOPs" in reason and "%" not in reason.split("Likely cause")[1]
    achieved = frame.locator(".kpi", has_text="Achieved").locator(".kpi-value")
    assert achieved.text_content() == "impossible"  # no FLOP/s figure derived from it either
    tc_sub = frame.locator(".kpi:has([data-testid=tensor-core-kpi]) .kpi-sub")
    assert "unknown 42.9 %" in (tc_sub.text_content() or "")  # 300 of 700 µs of kernels
    units = frame.locator("[data-testid=kernels-table] tbody tr").all_text_contents()
    assert any("my_new_library_gemm" in r and "unknown" in r for r in units)
    assert any("nvjet" in r and "tensor core · bf16" in r for r in units)
    page.screenshot(path=str(output_dir / "mfu-impossible.png"))
    assert not page.errors, page.errors  # type: ignore[attr-defined]
