"""The tab fits a 1024 px window and follows TensorBoard's theme, in a real TensorBoard and Chromium.

- At 1024 px in dark mode, every view of every sample run (each worker report's Overview with its
  evidence and tables open and every what-if fix picked, Compare and Strategies of every run)
  has no element whose content is wider than its box (scrollWidth > clientWidth), no page that
  scrolls sideways and no header control over another. An element that scrolls or cuts on
  purpose (a wide table in its scroll box, a kernel name ending in "…" with the whole name as
  its tooltip) carries the class ``may-overflow`` and is left out; nothing else is.
- The dark theme applies (the page and the cards computed dark, the text light), follows
  TensorBoard's toggle both ways while the tab is open, and the OS setting (prefers-color-scheme)
  when TensorBoard has no pick of its own; a saved offline report follows the OS.
- While runs load, the header still fits; a server that does not answer is said, not spun on.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT, TensorBoard, _skip_without_browser
from .test_browser import FRAME, TIMEOUT_MS, poll

pytestmark = pytest.mark.e2e

SAMPLES = ROOT / "sample_traces"
WIDTH = 1024
MAX_COMPARE = 8  # hashstate.ts's cap on the runs of one link

# Every visible element whose content is wider than its box, and the page's own sideways scroll.
# Inline boxes have no client width (0): their text counts in the block that holds them.
OVERFLOWS_JS = """
() => {
  const out = [];
  const name = (el) => {
    const id = el.dataset && el.dataset.testid ? `[data-testid=${el.dataset.testid}]` : '';
    const classes = typeof el.className === 'string' ? el.className.trim().split(/\\s+/) : [];
    const cls = classes.filter(Boolean).map((c) => `.${c}`).join('');
    const text = (el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 70);
    return `<${el.tagName.toLowerCase()}${id}${cls}> ${el.scrollWidth}>${el.clientWidth} px: "${text}"`;
  };
  for (const el of document.body.querySelectorAll('*')) {
    if (el.classList.contains('may-overflow') || el.closest('svg')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === 'hidden') continue;
    if (el.scrollWidth > el.clientWidth) out.push(name(el));
  }
  const doc = document.scrollingElement;
  if (doc.scrollWidth > doc.clientWidth)
    out.push(`the page scrolls sideways: ${doc.scrollWidth}>${doc.clientWidth} px`);
  return out;
}
"""

# The header's controls that overlap another one (the run count over the Worker menu was one).
HEADER_OVERLAPS_JS = """
() => {
  const els = Array.from(document.querySelectorAll(
    '.topbar .brand, .topbar .tabs, .topbar .picker, .topbar .status, .topbar .iconbtn, .topbar a.ext'))
    .filter((e) => e.getBoundingClientRect().width > 0);
  const out = [];
  for (let i = 0; i < els.length; i++)
    for (let j = i + 1; j < els.length; j++) {
      const a = els[i].getBoundingClientRect(), b = els[j].getBoundingClientRect();
      if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
        out.push(`${els[i].className} over ${els[j].className}`);
    }
  return out;
}
"""

THEME_JS = """
() => {
  const bg = (el) => el ? getComputedStyle(el).backgroundColor : null;
  return {
    theme: document.documentElement.dataset.theme,
    page: bg(document.body),
    text: getComputedStyle(document.body).color,
    card: bg(document.querySelector('.card, .kpi, .banner')),
    select: bg(document.querySelector('select')),
  };
}
"""


def luminance(css: str) -> float:
    """Relative luminance (WCAG) of an ``rgb(r, g, b)`` / ``rgba(...)`` colour."""
    parts = [float(x) for x in css[css.index("(") + 1 : css.index(")")].split(",")[:3]]

    def lin(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in parts)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def assert_theme(frame: Any, dark: bool) -> None:
    t = frame.evaluate(THEME_JS)
    assert t["theme"] == ("dark" if dark else "light"), t
    for key in ("page", "card", "select"):
        if t[key] is not None and not t[key].endswith(", 0)"):  # transparent says nothing
            assert (luminance(t[key]) < 0.05) == dark, (key, t)
    assert (luminance(t["text"]) > 0.6) == dark, t


def tab_frame(page: Any) -> Any:
    """The tab's iframe, once TensorBoard has made it and it has drawn the tab's header."""
    page.frame_locator(FRAME).locator("header.topbar").wait_for(timeout=TIMEOUT_MS)
    frame = page.locator(FRAME).element_handle().content_frame()
    assert frame is not None
    return frame


def go(page: Any, hash_: str) -> None:
    """Shows ``#mfu&<hash_>`` in the open tab: TensorBoard's hash, which the tab follows."""
    page.evaluate("h => { window.location.hash = h }", f"mfu&{hash_}")


CHARTS_DRAWN_JS = "() => Array.from(document.querySelectorAll('.chart')).every((c) => c.querySelector('canvas'))"
WORKER_PICKED_JS = "() => document.querySelector('[data-testid=worker-select]').value"


def settle(frame: Any) -> None:
    """Every chart drawn (a canvas in each) and the fonts laid out."""
    poll(lambda: frame.evaluate(CHARTS_DRAWN_JS))
    frame.wait_for_timeout(150)


def problems(frame: Any, where: str) -> list[str]:
    return [f"{where}: {p}" for p in frame.evaluate(OVERFLOWS_JS) + frame.evaluate(HEADER_OVERLAPS_JS)]


def _context(browser: Any, scheme: str, width: int = WIDTH) -> Any:
    return browser.new_context(viewport={"width": width, "height": 900}, device_scale_factor=1, color_scheme=scheme)


def _overview_problems(page: Any, frame: Any, run: str) -> list[str]:
    """Every worker report of ``run``: drawn, then again with its details open and all fixes picked."""
    go(page, f"view=overview&run={run}")
    frame.locator("[data-testid=run-title]").filter(has_text=run).wait_for(timeout=TIMEOUT_MS)
    found: list[str] = []
    workers = frame.locator("[data-testid=worker-select] option").count()
    for idx in range(max(1, workers)):
        if workers > 1:
            frame.locator("[data-testid=worker-select]").select_option(str(idx))
            poll(lambda i=idx: frame.evaluate(WORKER_PICKED_JS) == str(i))
        frame.locator("[data-testid=overview], [data-testid=worker-error]").first.wait_for(timeout=TIMEOUT_MS)
        settle(frame)
        where = f"{run} worker {idx}"
        found += problems(frame, where)
        frame.evaluate("() => document.querySelectorAll('details').forEach((d) => { d.open = true; })")
        pick_all = frame.locator("[data-testid=whatif] input[data-finding='*']")
        if pick_all.count():
            pick_all.check()
        else:
            for box in frame.locator("[data-testid=whatif] input[data-index]").all():
                box.check()
        frame.wait_for_timeout(100)
        found += problems(frame, f"{where}, details open, fixes picked")
    return found


def _open(browser: Any, tb: TensorBoard, scheme: str, width: int) -> tuple[Any, Any, list[str], list[str]]:
    """A page on the tab at ``width`` in ``scheme``: its context, its frame, the sample runs and
    the page's errors as they come."""
    runs = [r["name"] for r in tb.get_json("/data/plugin/mfu/runs")["runs"]]
    assert len(runs) >= 20
    ctx = _context(browser, scheme, width)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{tb.url}/#mfu&view=overview&run={runs[0]}")
    frame = tab_frame(page)
    frame.locator("[data-testid=run-title]").wait_for(timeout=TIMEOUT_MS)
    return page, frame, runs, errors


def _picked_shown(frame: Any, view: str, group: list[str]) -> bool:
    """Whether Compare's columns (or Strategies' rows) are the runs of ``group`` now."""
    if view == "compare":
        heads = frame.locator("[data-testid=compare-table] thead .runname").all_text_contents()
        return [h.strip() for h in heads] == group
    cells = frame.locator("[data-testid=strategies-table] tbody tr td:first-child").all_text_contents()
    return sorted(c.strip() for c in cells) == sorted(group)


def test_every_view_of_every_sample_run_fits_1024px_in_dark_mode(samples_tb: TensorBoard, browser: Any) -> None:
    page, frame, runs, errors = _open(browser, samples_tb, "dark", WIDTH)
    assert_theme(frame, dark=True)
    found: list[str] = []
    for run in runs:
        found += _overview_problems(page, frame, run)
    assert_theme(frame, dark=True)

    # every run in Compare and in Strategies, up to a link's eight at once
    groups = [runs[i : i + MAX_COMPARE] for i in range(0, len(runs), MAX_COMPARE)]
    for view in ("compare", "strategies"):
        for group in groups:
            go(page, f"view={view}&compare={','.join(group)}")
            poll(lambda view=view, group=group: _picked_shown(frame, view, group))
            settle(frame)
            found += problems(frame, f"{view} of {', '.join(group)}")
    assert_theme(frame, dark=True)
    page.context.close()
    assert not found, "cut or overlapping at 1024 px:\n" + "\n".join(found)
    assert not errors, errors


def test_every_overview_fits_1280px_in_light_mode(samples_tb: TensorBoard, browser: Any) -> None:
    """Above 1200 px the figures stand six in a row, each at its narrowest near 1280 px."""
    page, frame, runs, errors = _open(browser, samples_tb, "light", 1280)
    assert_theme(frame, dark=False)
    found = [p for run in runs for p in _overview_problems(page, frame, run)]
    page.context.close()
    assert not found, "cut or overlapping at 1280 px:\n" + "\n".join(found)
    assert not errors, errors


TB_PICKS = {"Browser default": "browser_default", "Light": "light", "Dark": "dark"}


def _tb_theme(page: Any, choice: str) -> None:
    """Picks ``choice`` in TensorBoard's own theme menu, and waits until TensorBoard has kept it
    (in its settings, which the tab reads when the OS setting changes)."""
    page.locator("app-header-dark-mode-toggle button").first.click()
    page.locator("[role=menuitem]", has_text=choice).click()
    kept = f'"theme":"{TB_PICKS[choice]}"'
    poll(lambda: kept in (page.evaluate("localStorage.getItem('_tb_global_settings')") or ""))


def test_the_tab_follows_tensorboards_toggle_and_the_os_setting(samples_tb: TensorBoard, browser: Any) -> None:
    ctx = _context(browser, "light")
    page = ctx.new_page()
    page.goto(f"{samples_tb.url}/#mfu&view=overview&run=gpt_naive_attention")
    frame = tab_frame(page)
    frame.locator("[data-testid=steps-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    assert_theme(frame, dark=False)

    _tb_theme(page, "Dark")  # TensorBoard's toggle, while the tab is open
    poll(lambda: frame.evaluate("() => document.documentElement.dataset.theme") == "dark")
    assert_theme(frame, dark=True)
    frame.locator("[data-testid=steps-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)  # drawn again
    _tb_theme(page, "Light")
    poll(lambda: frame.evaluate("() => document.documentElement.dataset.theme") == "light")
    assert_theme(frame, dark=False)

    # TensorBoard's pick stands over the OS; with Browser default the tab follows the OS live
    page.emulate_media(color_scheme="dark")
    frame.wait_for_timeout(300)
    assert_theme(frame, dark=False)
    _tb_theme(page, "Browser default")
    page.emulate_media(color_scheme="light")
    page.emulate_media(color_scheme="dark")
    poll(lambda: frame.evaluate("() => document.documentElement.dataset.theme") == "dark")
    assert_theme(frame, dark=True)
    ctx.close()

    # a new page on a dark OS: TensorBoard opens dark, and so does the tab
    ctx = _context(browser, "dark")
    page = ctx.new_page()
    page.goto(f"{samples_tb.url}/#mfu&view=compare&compare=gpt_naive_attention,gpt_sdpa_fused")
    frame = tab_frame(page)
    frame.locator("[data-testid=compare-chart] canvas").first.wait_for(timeout=TIMEOUT_MS)
    assert_theme(frame, dark=True)
    ctx.close()


def test_a_saved_report_follows_the_os_setting(browser: Any, tmp_path: Path) -> None:
    _skip_without_browser()
    html = tmp_path / "report.html"
    cli = [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(SAMPLES / "gpt_naive_attention")]
    subprocess.run([*cli, "--html", str(html)], check=True, capture_output=True, cwd=ROOT)
    for scheme in ("dark", "light"):
        ctx = _context(browser, scheme)
        page = ctx.new_page()
        page.goto(html.as_uri())
        page.locator("[data-testid=overview]").wait_for(timeout=TIMEOUT_MS)
        settle(page.main_frame)
        assert_theme(page.main_frame, dark=scheme == "dark")
        assert not problems(page.main_frame, f"saved report, {scheme}")
        ctx.close()


def test_the_header_fits_while_runs_load(
    start_tensorboard: Any, browser: Any, tmp_path: Path, output_dir: Path
) -> None:
    """Three runs, each analysed file shown 20 s after the one before: the tab is seen loading."""
    logdir = tmp_path / "logs"
    logdir.mkdir()
    for run in ("gpt_naive_attention", "gpt_sdpa_fused", "dataloader_stall"):
        (logdir / run).symlink_to(SAMPLES / run)
    launcher = [sys.executable, str(Path(__file__).with_name("staggered_tensorboard.py")), "20"]
    tb = start_tensorboard(logdir, command=launcher)
    ctx = _context(browser, "dark")
    page = ctx.new_page()
    page.goto(f"{tb.url}/#mfu&view=overview&run=gpt_naive_attention")
    frame = tab_frame(page)
    frame.locator("[data-testid=loading] .lrow").first.wait_for(timeout=TIMEOUT_MS)  # runs still loading
    found = problems(frame, "loading")
    page.screenshot(path=str(output_dir / "mfu-loading-1024-dark.png"))
    assert not found, "\n".join(found)
    assert_theme(frame, dark=True)
    ctx.close()


def test_a_server_that_does_not_answer_is_said_not_spun_on(samples_tb: TensorBoard, browser: Any) -> None:
    ctx = _context(browser, "light")
    page = ctx.new_page()
    page.route("**/data/plugin/mfu/runs*", lambda route: route.fulfill(status=503, body="down for a test"))
    page.goto(f"{samples_tb.url}/#mfu")
    frame = tab_frame(page)
    panel = frame.locator("[data-testid=run-error]")
    panel.wait_for(timeout=TIMEOUT_MS)
    assert "503" in panel.inner_text() and "asks again" in panel.inner_text()
    assert frame.locator("main .spinner").count() == 0
    page.unroute("**/data/plugin/mfu/runs*")
    frame.locator("[data-testid=run-title]").wait_for(timeout=TIMEOUT_MS)  # it fills in once answered
    ctx.close()
