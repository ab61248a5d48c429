"""Retake the README's pictures of the tab from today's build, so that they show today's figures:
docs/mfu-tab.png (the Overview of sample_traces/gpt_naive_attention) and docs/mfu-compare.png
(Compare: it against gpt_sdpa_fused), and docs/timeline.md's: docs/timeline-card.png (its Timeline
card), docs/timeline-zoom.png (zoomed onto its .item()) and docs/timeline-compare.png (the two
timelines in Compare). A real TensorBoard serves the two samples and Debian's Chromium draws the tab,
as in tests/e2e/.

    python scripts/screenshots.py [--timeline-only]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from conftest import CHROMIUM, CHROMIUM_ARGS, TensorBoard  # noqa: E402 - the e2e tests' own TensorBoard

FRAME = 'iframe[src*="plugin_entry.html?name=mfu"]'
RUN, OTHER = "gpt_naive_attention", "gpt_sdpa_fused"
WAIT_MS = 300_000


def timeline_shots(page: Any, url: str) -> None:
    """docs/timeline-card.png, docs/timeline-zoom.png and docs/timeline-compare.png."""
    page.set_viewport_size({"width": 1440, "height": 1400})
    page.goto(f"{url}/#mfu&run={RUN}")
    frame = page.frame_locator(FRAME)
    card = frame.locator("[data-testid=timeline]")
    card.locator("canvas").first.wait_for(timeout=WAIT_MS)
    card.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    card.screenshot(path=str(ROOT / "docs" / "timeline-card.png"))
    # zoomed onto the .item() at the step's end: the host blocked, the GPU draining, then idle
    item = frame.locator("li.finding", has_text="tensor.item()").locator("[data-testid=show-on-timeline]")
    item.click()
    page.wait_for_timeout(1500)
    card.screenshot(path=str(ROOT / "docs" / "timeline-zoom.png"))
    page.goto(f"{url}/#mfu&view=compare&compare={RUN},{OTHER}")
    page.reload()
    frame = page.frame_locator(FRAME)
    both = frame.locator("[data-testid=compare-timelines]")
    both.locator("canvas").first.wait_for(timeout=WAIT_MS)
    both.scroll_into_view_if_needed()
    page.wait_for_timeout(1500)
    both.screenshot(path=str(ROOT / "docs" / "timeline-compare.png"))


def main() -> int:
    from playwright.sync_api import sync_playwright

    timeline_only = "--timeline-only" in sys.argv[1:]

    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logs"
        logdir.mkdir()
        for run in (RUN, OTHER):  # only the two runs: the stock plugin reads every run before serving
            (logdir / run).symlink_to(ROOT / "sample_traces" / run)
        tb = TensorBoard(logdir, Path(tmp) / "cache")
        try:
            tb.wait_analysed()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 2300}, device_scale_factor=1)
                timeline_shots(page, tb.url)
                if timeline_only:
                    browser.close()
                    return 0
                page.set_viewport_size({"width": 1440, "height": 2300})
                page.goto(f"{tb.url}/#mfu&run={RUN}")
                frame = page.frame_locator(FRAME)
                frame.locator("[data-testid=mfu-value]").wait_for(timeout=WAIT_MS)
                frame.locator("[data-testid=steps-chart] canvas").first.wait_for(timeout=WAIT_MS)
                page.wait_for_timeout(1500)  # the charts animate
                page.screenshot(path=str(ROOT / "docs" / "mfu-tab.png"))
                page.set_viewport_size({"width": 1440, "height": 1400})
                page.goto(f"{tb.url}/#mfu&view=compare&compare={RUN},{OTHER}")
                page.reload()
                frame = page.frame_locator(FRAME)
                frame.locator("[data-testid=compare-chart] canvas").first.wait_for(timeout=WAIT_MS)
                page.wait_for_timeout(1500)
                page.screenshot(path=str(ROOT / "docs" / "mfu-compare.png"))
                browser.close()
        finally:
            tb.stop()
    print("wrote docs/mfu-tab.png, docs/mfu-compare.png and docs/timeline-*.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
