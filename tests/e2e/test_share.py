"""Sharing in a real TensorBoard and a real headless Chromium: upload, the URL hash, the offline report.

- Traces uploaded with the file dialog and by a drop appear as runs under
  uploads/ with the CLI's figures for the same files; an archive is uploaded too
  (read as a logdir once the trace layer reads archives, else listed as pending).
- With --mfu_disable_upload there is no upload button and a drop uploads nothing.
- The view lives in TensorBoard's hash (#mfu&run=...): a link opens it, back and
  forward step through it, invalid values fall back to the defaults.
- "Download report" saves an HTML file that, opened from file://, draws the same
  Overview with no network request, and a hostile kernel name stays text.
"""

from __future__ import annotations

import base64
import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from .conftest import ROOT, TensorBoard, _skip_without_browser
from .test_browser import (
    FRAME,
    TIMEOUT_MS,
    check_overview_matches_cli,
    cli_json,
    first_usable,
    open_tab,
    pct_text,
    poll,
)

pytestmark = pytest.mark.e2e

SAMPLES = ROOT / "sample_traces"
RUNS = ("low_sm_efficiency", "pageable_copy_loop", "ddp_2gpu")
HOSTILE = "</script><script>window.__xss=1;alert(1)</script>"


def cli_run(path: Path, name: str) -> dict[str, Any]:
    """``tb-mfu analyze PATH --json``'s one run, under the name the tab gives it."""
    (run,) = cli_json(path).values()
    return {**run, "name": name}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tracegen import TraceBuilder

    d = tmp_path_factory.mktemp("share") / "logs"
    for run in RUNS:
        shutil.copytree(SAMPLES / run, d / run, ignore=shutil.ignore_patterns("*.json"))
    TraceBuilder().kernel_steps(HOSTILE).write(d / "hostile" / "worker0.1700000000000.pt.trace.json.gz")
    return d


@pytest.fixture(scope="module")
def tb(logdir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    """One TensorBoard for the module's tests: starting one and analysing costs most of their time."""
    _skip_without_browser()
    server = TensorBoard(logdir, tmp_path_factory.mktemp("cache"))
    try:
        server.wait_analysed()
        yield server
    finally:
        server.stop()


def plugin_frame(page: Any) -> Any:
    """The plugin iframe as a Frame (to run script in it), not a FrameLocator."""
    poll(lambda: any("plugin_entry.html" in f.url for f in page.frames))
    return next(f for f in page.frames if "plugin_entry.html" in f.url)


def drop(page: Any, files: dict[str, bytes], enter_only: bool = False) -> None:
    """Drags ``files`` onto the tab as the browser does (DragEvents carrying a DataTransfer)."""
    plugin_frame(page).evaluate(
        """([files, enterOnly]) => {
          const dt = new DataTransfer();
          for (const [name, b64] of files)
            dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
          const fire = (type) => document.body.dispatchEvent(
            new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
          fire('dragenter'); fire('dragover');
          if (!enterOnly) fire('drop');
        }""",
        [[[n, base64.b64encode(b).decode()] for n, b in files.items()], enter_only],
    )


def wait_run_shown(frame: Any, name: str) -> None:
    frame.locator("[data-testid=run-title]").filter(has_text=name).wait_for(timeout=TIMEOUT_MS)
    poll(lambda: frame.locator("[data-testid=run-title]").text_content() == name)


def test_uploaded_traces_and_archives_become_runs_with_the_cli_figures(tb, page, tmp_path, output_dir):
    frame = open_tab(page, tb.url)
    frame.locator("[data-testid=run-select]").wait_for(timeout=TIMEOUT_MS)
    button = frame.locator("[data-testid=upload-button]")
    # hidden until the uploads' status comes back: a request of its own, later than the runs under load
    button.wait_for(state="visible", timeout=TIMEOUT_MS)

    # the file dialog: one trace -> run uploads/rank0, shown with the CLI's figures
    src = sorted((SAMPLES / "gpt_sdpa_fused").glob("*.pt.trace.json.gz"))[0]
    frame.locator("[data-testid=upload-input]").set_input_files(str(src))
    wait_run_shown(frame, "uploads/rank0")
    check_overview_matches_cli(frame, cli_run(src, "uploads/rank0"))
    assert "run=uploads%2Frank0" in page.evaluate("location.hash")  # the link names it

    # a drop of both files of a 2-GPU run: one upload, one run of two workers
    ddp = sorted((SAMPLES / "ddp_2gpu").glob("*.pt.trace.json.gz"))
    drop(page, {f.name: f.read_bytes() for f in ddp}, enter_only=True)
    assert frame.locator("[data-testid=drop-overlay]").is_visible()
    drop(page, {f.name: f.read_bytes() for f in ddp})
    wait_run_shown(frame, "uploads/rank")
    check_overview_matches_cli(frame, cli_run(SAMPLES / "ddp_2gpu", "uploads/rank"))
    assert frame.locator("[data-testid=worker-select] option").count() == 2
    assert not frame.locator("[data-testid=drop-overlay]").is_visible()

    # a file of another type is refused, in one line, and nothing is sent
    drop(page, {"notes.txt": b"hello"})
    notice = frame.locator("[data-testid=upload-notice]")
    notice.wait_for(timeout=TIMEOUT_MS)
    assert "notes.txt" in (notice.text_content() or "")

    # an archive of a logdir
    archive = tmp_path / "team traces.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in ddp:
            z.write(f, f"team/ddp_2gpu/{f.name}")
    frame.locator("[data-testid=upload-input]").set_input_files(str(archive))
    expected = list(cli_json(archive).values())
    frame.locator("[data-testid=run-title]").filter(has_text="uploads/team_traces").wait_for(timeout=TIMEOUT_MS)
    title = frame.locator("[data-testid=run-title]").text_content() or ""
    (run,) = [r for r in expected if title.endswith(r["name"].rsplit("/", 1)[-1])]
    check_overview_matches_cli(frame, {**run, "name": title})
    page.set_viewport_size({"width": 1440, "height": 900})
    page.screenshot(path=str(output_dir / "mfu-upload.png"))
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_the_hash_holds_the_view_back_and_forward_walk_it(tb, page):
    ddp = cli_run(tb.logdir / "ddp_2gpu", "ddp_2gpu")
    rank1 = next(w for w in ddp["workers"] if w["name"] == "rank1")
    link = f"#mfu&view=overview&run=ddp_2gpu&worker=rank1&span={rank1['span']}&device={rank1['device']['index']}"
    page.goto(tb.url + "/" + link)
    frame = page.frame_locator(FRAME)
    wait_run_shown(frame, "ddp_2gpu")
    select = frame.locator("[data-testid=worker-select]")
    poll(lambda: select.input_value() == "1")  # the link's worker, not the first one
    mfu = frame.locator("[data-testid=mfu-value]")
    poll(lambda: mfu.text_content() == pct_text(rank1["summary"]["mfu"]))
    poll(lambda: page.evaluate("location.hash") == link)  # complete already: written back as it was

    frame.locator("[data-testid=run-select]").select_option("pageable_copy_loop")
    wait_run_shown(frame, "pageable_copy_loop")
    poll(lambda: "run=pageable_copy_loop" in page.evaluate("location.hash"))
    frame.locator("[data-testid=tab-compare]").click()
    frame.locator("[data-testid=compare-picker]").wait_for(timeout=TIMEOUT_MS)
    poll(lambda: "view=compare" in page.evaluate("location.hash"))

    page.go_back()
    wait_run_shown(frame, "pageable_copy_loop")
    page.go_back()
    wait_run_shown(frame, "ddp_2gpu")
    poll(lambda: select.input_value() == "1")
    page.go_forward()
    wait_run_shown(frame, "pageable_copy_loop")
    assert page.evaluate("location.hash").startswith("#mfu&")

    # a link to a compare set; names are URI-encoded inside the list
    names = ["low_sm_efficiency", "pageable_copy_loop"]
    compare = quote(",".join(quote(n, safe="") for n in names), safe="")
    page.goto(tb.url + f"/#mfu&view=compare&compare={compare}")
    table = page.frame_locator(FRAME).locator("[data-testid=compare-table]")
    table.wait_for(timeout=TIMEOUT_MS)
    poll(lambda: [t.strip() for t in table.locator("thead .runname").all_text_contents()] == names)
    assert not page.errors, page.errors  # type: ignore[attr-defined]


# TensorBoard 2.21 itself stops at a malformed %-escape anywhere in the hash (its own
# decodeURIComponent throws and it never loads the plugin's iframe), so these are values
# it passes on: well-formed, but wrong for us. (An empty part, "&&", is its plugin id: none.)
@pytest.mark.parametrize(
    "junk",
    [
        "#mfu&run=no_such_run&view=bogus&device=x&compare=nope%2Cnot_either",
        "#mfu&run=&worker=&span=" + "x" * 5000 + "&device=99999",
        "#mfu&compare=" + "%2C".join(["low_sm_efficiency"] * 20) + "&run=" + "r" * 5000,
        "#mfu&=&run=a=b&view=&worker=rank9&span=%25ZZ",
    ],
)
def test_invalid_hash_values_fall_back_to_the_defaults(tb, page, junk):
    page.goto(tb.url + "/" + junk)
    frame = page.frame_locator(FRAME)
    frame.locator("[data-testid=run-title]").wait_for(timeout=TIMEOUT_MS)
    names = [o.get_attribute("value") for o in frame.locator("[data-testid=run-select] option").all()]
    assert frame.locator("[data-testid=run-title]").text_content() in names
    assert frame.locator("[data-testid=tab-overview]").get_attribute("aria-selected") == "true"
    poll(lambda: "run=" in page.evaluate("location.hash"))  # rewritten to the view shown
    assert page.evaluate("location.hash").startswith("#mfu&")
    assert not page.errors, page.errors  # type: ignore[attr-defined]


def test_the_offline_report_draws_the_overview_from_file_with_no_network(tb, page, browser, tmp_path, output_dir):
    frame = open_tab(page, tb.url)
    frame.locator("[data-testid=run-select]").select_option("ddp_2gpu")
    wait_run_shown(frame, "ddp_2gpu")
    frame.locator("[data-testid=worker-select]").select_option("1")
    with page.expect_download() as dl:
        frame.locator("[data-testid=download-html]").click()
    html = tmp_path / "report.html"
    dl.value.save_as(html)
    assert dl.value.suggested_filename == "mfu-ddp_2gpu.html"
    with page.expect_download() as dl:
        frame.locator("[data-testid=download-json]").click()
    saved = json.loads(Path(dl.value.path()).read_text())
    assert saved["runs"][0]["name"] == "ddp_2gpu" and saved["schema_version"] >= 1

    expected = cli_run(tb.logdir / "ddp_2gpu", "ddp_2gpu")
    offline, requests, problems = open_offline(browser, html)
    try:
        select = offline.locator("[data-testid=worker-select]")
        assert select.input_value() == "1"  # the worker shown in the tab when it was saved
        rank1 = {**expected, "workers": [w for w in expected["workers"] if w["name"] == "rank1"]}
        check_overview_matches_cli(offline, rank1)
        select.select_option("0")
        rank0 = {**expected, "workers": [first_usable(expected)]}
        check_overview_matches_cli(offline, rank0)
        offline.locator("[data-testid=kernels-table] tbody tr").first.wait_for(timeout=TIMEOUT_MS)
        offline.set_viewport_size({"width": 1440, "height": 1800})
        offline.wait_for_timeout(800)
        offline.screenshot(path=str(output_dir / "mfu-offline.png"))
        assert requests == [html.as_uri()], requests  # the file itself, and nothing else
        assert not problems, problems
    finally:
        offline.context.close()


def test_a_hostile_kernel_name_stays_text_in_the_offline_report(tb, browser, tmp_path):
    import urllib.request

    with urllib.request.urlopen(tb.url + "/data/plugin/mfu/download?run=hostile&format=html", timeout=60) as r:  # noqa: S310
        html = tmp_path / "hostile.html"
        html.write_bytes(r.read())
    offline, requests, problems = open_offline(browser, html)
    try:
        cells = offline.locator("[data-testid=kernels-table] .kname")
        cells.first.wait_for(timeout=TIMEOUT_MS)
        assert HOSTILE in cells.all_text_contents()
        assert offline.evaluate("window.__xss") is None
        assert offline.locator("script").count() == 2  # the data block and the bundle: no injected one
        assert requests == [html.as_uri()] and not problems, (requests, problems)
    finally:
        offline.context.close()


def open_offline(browser: Any, html: Path) -> tuple[Any, list[str], list[str]]:
    """``html`` opened from file:// in a fresh offline context: the page, every URL it
    requested, and its errors, CSP violations and dialogs."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000}, offline=True)
    pg = ctx.new_page()
    requests: list[str] = []
    problems: list[str] = []
    pg.on("request", lambda r: requests.append(r.url))
    pg.on("pageerror", lambda e: problems.append(f"error: {e}"))
    pg.on("console", lambda m: problems.append(f"console: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    pg.goto(html.as_uri())
    pg.locator("[data-testid=run-title]").wait_for(timeout=TIMEOUT_MS)
    return pg, requests, problems


def test_without_upload_there_is_no_drop_zone(tmp_path, page):
    _skip_without_browser()
    logdir = tmp_path / "logs"
    shutil.copytree(SAMPLES / "low_sm_efficiency", logdir / "low_sm_efficiency")
    server = TensorBoard(logdir, tmp_path / "cache", "--mfu_disable_upload")
    try:
        server.wait_analysed()
        frame = open_tab(page, server.url)
        wait_run_shown(frame, "low_sm_efficiency")
        assert not frame.locator("[data-testid=upload-button]").is_visible()
        src = sorted((SAMPLES / "gpt_sdpa_fused").glob("*.pt.trace.json.gz"))[0]
        drop(page, {src.name: src.read_bytes()}, enter_only=True)
        assert not frame.locator("[data-testid=drop-overlay]").is_visible()
        drop(page, {src.name: src.read_bytes()})
        notice = frame.locator("[data-testid=upload-notice]")
        notice.wait_for(timeout=TIMEOUT_MS)
        assert "--mfu_disable_upload" in (notice.text_content() or "")
        assert [r["name"] for r in server.get_json("/data/plugin/mfu/runs")["runs"]] == ["low_sm_efficiency"]
        assert not (tmp_path / "cache" / "uploads").exists() and not (tmp_path / "cache" / "uploads-incoming").exists()
        assert not page.errors, page.errors  # type: ignore[attr-defined]
    finally:
        server.stop()
