"""Retake the README's pictures of the tab from today's build, so that they show today's figures,
each in TensorBoard's light and dark theme (``NAME.png`` and ``NAME-dark.png``):

- docs/mfu-tab.png: the Overview of sample_traces/gpt_naive_attention;
- docs/mfu-compare.png: Compare, it against gpt_sdpa_fused;
- docs/roofline-card.png: the Roofline card of roofline_microbench, the GEMM's point hovered;

and docs/timeline.md's (light): docs/timeline-card.png (the naive-attention sample's Timeline card),
docs/timeline-zoom.png (zoomed onto its .item()) and docs/timeline-compare.png (the two timelines in
Compare). A real TensorBoard serves the three samples and Debian's Chromium draws the tab, as in
tests/e2e/; the dark pictures are of a browser whose OS setting is dark, which TensorBoard and the tab
follow.

    python scripts/screenshots.py [--timeline-only]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT))

from conftest import CHROMIUM, CHROMIUM_ARGS, TensorBoard  # noqa: E402 - the e2e tests' own TensorBoard

from tests.e2e.test_roofline_panel import _point_px  # noqa: E402 - where the test finds a point

FRAME = 'iframe[src*="plugin_entry.html?name=mfu"]'
RUN, OTHER, ROOFLINE = "gpt_naive_attention", "gpt_sdpa_fused", "roofline_microbench"
WAIT_MS = 300_000
PICTURES = ("mfu-tab", "mfu-compare", "roofline-card")
WIDTH = 1440
# the roofline chart's log axes span 1e-2 .. 1e4 on both sides for the microbenchmark
AXIS_DECADES = (-2.0, 4.0)


def _charts_drawn(page: Any, testid: str) -> None:
    frame = page.frame_locator(FRAME)
    frame.locator(f"[data-testid={testid}] canvas").first.wait_for(timeout=WAIT_MS)
    page.wait_for_timeout(1500)  # the charts animate


def _shot_down_to(page: Any, selector: str, out: Path) -> None:
    """The page from its top down to the end of the card ``selector`` finds in the tab, so that the
    picture ends at a card's edge, never through one."""
    page.set_viewport_size({"width": WIDTH, "height": 3000})
    page.wait_for_timeout(800)  # the charts take the new size
    box = page.frame_locator(FRAME).locator(selector).bounding_box()
    assert box is not None, selector
    page.set_viewport_size({"width": WIDTH, "height": int(box["y"] + box["height"] + 10)})
    page.wait_for_timeout(800)
    page.screenshot(path=str(out))


def _overview(page: Any, url: str, out: Path) -> None:
    page.set_viewport_size({"width": WIDTH, "height": 1400})
    page.goto(f"{url}/#mfu&view=overview&run={RUN}")
    page.frame_locator(FRAME).locator("[data-testid=mfu-value]").wait_for(timeout=WAIT_MS)
    _charts_drawn(page, "steps-chart")
    _shot_down_to(page, "[data-testid=steps-card]", out)


def _compare(page: Any, url: str, out: Path) -> None:
    page.set_viewport_size({"width": WIDTH, "height": 1400})
    page.goto(f"{url}/#mfu&view=compare&compare={RUN},{OTHER}")
    page.reload()
    _charts_drawn(page, "compare-chart")
    _shot_down_to(page, "section:has([data-testid=findings-diff])", out)


def _roofline(page: Any, url: str, gemm: dict[str, Any], out: Path) -> None:
    page.set_viewport_size({"width": WIDTH, "height": 1400})
    page.goto(f"{url}/#mfu&view=overview&run={ROOFLINE}")
    frame = page.frame_locator(FRAME)
    card = frame.locator("[data-testid=roofline-card]")
    card.wait_for(timeout=WAIT_MS)
    card.evaluate("(el) => el.scrollIntoView({ block: 'end' })")  # its top clear of the sticky header
    _charts_drawn(page, "roofline-chart")
    box = frame.locator("[data-testid=roofline-chart]").bounding_box()
    assert box is not None
    page.mouse.move(*_point_px(box, gemm["intensity"], gemm["achieved_flops"] / 1e12, *AXIS_DECADES))
    frame.locator("[data-testid=roofline-chart] .tt").wait_for(timeout=10_000)
    card.screenshot(path=str(out))


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


def _palette(paths: list[Path]) -> None:
    """Each picture as a 256-colour palette PNG: the tab's flat colours and text stay legible at about a
    third of the bytes, and the tree must stay under the 64 MiB a device call carries (docs/mfu.md's
    validation sets take most of it)."""
    from PIL import Image

    for path in paths:
        with Image.open(path) as im:
            small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
        small.save(path, optimize=True)


def main() -> int:
    from playwright.sync_api import sync_playwright

    timeline_only = "--timeline-only" in sys.argv[1:]

    with tempfile.TemporaryDirectory() as tmp:
        logdir = Path(tmp) / "logs"
        logdir.mkdir()
        for run in (RUN, OTHER, ROOFLINE):  # only these: the stock plugin reads every run before serving
            (logdir / run).symlink_to(ROOT / "sample_traces" / run)
        tb = TensorBoard(logdir, Path(tmp) / "cache")
        written: list[str] = []
        try:
            tb.wait_analysed()
            report = tb.get_json(f"/data/plugin/mfu/report?run={ROOFLINE}")
            ops = next(w for w in report["workers"] if w["roofline"])["roofline"]["ops"]
            gemm = next(o for o in ops if o["name"] == "aten::mm")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 1400}, device_scale_factor=1)
                timeline_shots(page, tb.url)
                written += [f"docs/timeline-{k}.png" for k in ("card", "zoom", "compare")]
                page.close()
                if timeline_only:
                    browser.close()
                    _palette([ROOT / w for w in written])
                    print("wrote " + ", ".join(written))
                    return 0
                schemes: tuple[tuple[Literal["light", "dark"], str], ...] = (("light", ""), ("dark", "-dark"))
                for scheme, suffix in schemes:
                    ctx = browser.new_context(device_scale_factor=1, color_scheme=scheme)
                    page = ctx.new_page()
                    shots = [ROOT / "docs" / f"{name}{suffix}.png" for name in PICTURES]
                    _overview(page, tb.url, shots[0])
                    _compare(page, tb.url, shots[1])
                    _roofline(page, tb.url, gemm, shots[2])
                    written += [str(out.relative_to(ROOT)) for out in shots]
                    ctx.close()
                browser.close()
        finally:
            tb.stop()
    _palette([ROOT / w for w in written])
    print("wrote " + ", ".join(written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
