"""One truth on every face: each headline figure reads the same on the CLI's tables, in the JSON,
in the tab (a real TensorBoard in a real Chromium) and in the HTML export.

For every worker report and every rank of every sample trace (and of the ../shared fixtures for
the faces without a browser), each figure of ``WORKER_FIGURES`` and ``RANK_FIGURES`` is formatted
from the JSON by ``tb_mfu_plugin.analysis.fmt`` (which writes a figure as the tab's format.ts does); the
CLI's tables must print that very string where the table says, and the tab and the saved page
must show it where the table says. Where the JSON has None, every face shows "n/a".

The tables below are the one place a figure's name on each face is written: a figure renamed in
the report or relabelled on a face is a one-line change here.

- The CLI face is ``render.print_report`` of the report (what ``tb-mfu analyze`` prints after its
  analysis; printed off a terminal, so at the width the tables need), the JSON face what
  ``--json`` writes, both from one analysis per root.
- The browser faces run on a few runs in one TensorBoard: the Overview of each worker report and
  its ranks card, and the page the tab's "Download report" saves, opened offline. Their header
  line, ranks card and communication card must read the same text too (issue 23 §4: the saved
  page once said "single GPU" under a DDP run).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import urllib.request
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tb_mfu_plugin.analysis import fmt
from tb_mfu_plugin.analysis.definitions import label
from tb_mfu_plugin.analysis.report import Report
from tb_mfu_plugin.core.escape import json_bytes
from tb_mfu_plugin.running.pipeline import analyze_paths

from .conftest import ROOT, TensorBoard, _skip_without_browser
from .test_browser import TIMEOUT_MS, open_tab, poll

pytestmark = pytest.mark.e2e

SAMPLES = ROOT / "sample_traces"
SHARED = ROOT.parent / "shared" / "fixtures"
FIXTURES = ("pipeline_parallel_h200", "torch_tb_profiler_samples", "tracelens_hf_inference", "hta_test_data")
# The browser's runs: two ranks under DDP, an MFU and FLOPs unknown, a sync wait and an idle
# that differs from the idle outside syncs, a CUDA-graph replay with no FLOP count.
BROWSER_RUNS = ("ddp_2gpu", "low_sm_efficiency", "gpt_naive_attention", "tiny_mlp_cuda_graph")

Json = dict[str, Any]
Format = Callable[[Any, Json], str]  # (the JSON value, its worker report's JSON) -> the string shown


def _mfu(x: Any, worker: Json) -> str:
    # fmt.mfu_shown on the JSON: "impossible" where the analysis withheld an MFU above 100 %
    return "impossible" if x is None and "impossible_mfu" in worker.get("flags", []) else fmt.pct(x)


def _plain(f: Callable[[Any], str]) -> Format:
    return lambda x, _w: f(x)


@dataclass(frozen=True)
class Figure:
    """A figure, where the report holds it, how it is written, and where each face shows it.

    ``cli``: ("table", column) of the "Where the step goes" table, ("line", what the line says
    before the figure); ``tab`` (the Overview and the saved page): ("kpi", label) of the headline
    figures, ("legend", label) of "Where a step goes", ("facts", label) of "FLOPs counted".
    None where a face does not show it."""

    name: str
    path: tuple[str, ...]
    fmt: Format
    cli: tuple[str, str] | None
    tab: tuple[str, str] | None


# Each figure under its report name and its one label (analysis.definitions), on every face.
WORKER_FIGURES = (
    Figure("MFU", ("summary", "mfu"), _mfu, ("table", "MFU"), ("kpi", "MFU")),
    Figure("GPU busy", ("summary", "gpu_busy_share"), _plain(fmt.pct), ("table", "GPU busy"), ("kpi", "GPU busy")),
    Figure("GPU idle", ("summary", "idle_share"), _plain(fmt.pct), ("table", label("idle_share")), None),
    Figure(
        "GPU idle after syncs",
        ("summary", "gpu_idle_after_sync_share"),
        _plain(fmt.pct),
        ("table", label("gpu_idle_after_sync_share")),
        ("legend", label("breakdown.idle_after_sync")),
    ),
    Figure(
        "other idle",
        ("summary", "breakdown", "idle_other"),
        _plain(fmt.pct),
        None,
        ("legend", label("breakdown.idle_other")),
    ),
    Figure(
        "host blocked in syncs",
        ("summary", "host_sync_blocked_share"),
        _plain(fmt.pct),
        ("table", label("host_sync_blocked_share")),
        None,
    ),
    Figure(
        "median step time",
        ("summary", "step_time_us"),
        _plain(fmt.us),
        ("line", label("step_time_us").lower()),
        ("kpi", label("step_time_us")),
    ),
    Figure(
        "FLOPs per step",
        ("summary", "flops_per_step"),
        _plain(fmt.flops),
        ("line", label("flops_per_step") + ":"),
        ("facts", label("flops_per_step")),
    ),
)


@dataclass(frozen=True)
class RankFigure:
    """A figure of a rank's row of ``ranks.ranks``: its key, and its column on each face."""

    name: str
    key: str
    fmt: Callable[[Any], str]
    cli: str  # column of the CLI's "ranks side by side" table
    tab: str  # column of the tab's ranks card


RANK_FIGURES = (
    RankFigure("MFU", "mfu", fmt.pct, "MFU", "MFU"),
    RankFigure("GPU busy", "gpu_busy_share", fmt.pct, "GPU busy", "GPU busy"),
    RankFigure("GPU idle", "idle_share", fmt.pct, label("idle_share"), label("idle_share")),
    RankFigure("median step time", "step_time_us", fmt.us, label("step_time_us"), label("step_time_us")),
)


def value(worker: Json, path: tuple[str, ...]) -> Any:
    x: Any = worker
    for key in path:
        x = x.get(key) if isinstance(x, dict) else None
    return x


def expected(worker: Json) -> dict[str, str]:
    """Each figure of a worker report as every face must write it."""
    return {f.name: f.fmt(value(worker, f.path), worker) for f in WORKER_FIGURES}


def usable(run: Json) -> list[tuple[int, Json]]:
    return [(i, w) for i, w in enumerate(run["workers"]) if w["summary"] is not None and w["error"] is None]


# -- the CLI's tables, read back -----------------------------------------------------------------


def _cells(line: str, bar: str) -> list[str]:
    return [c.strip() for c in line.strip().strip(bar).split(bar)]


def _table_after(lines: list[str], i: int) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of the table whose title is line ``i``."""
    j = i + 1
    while not lines[j].startswith("┃"):
        j += 1
    head = _cells(lines[j], "┃")
    rows = []
    for line in lines[j + 1 :]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            rows.append(_cells(line, "│"))
    return head, rows


def cli_sections(text: str) -> list[list[str]]:
    """The lines of each analysed worker's part of ``print_report``'s output, in order."""
    sections: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("─") and " · worker " in line:
            sections.append([])
        elif sections:
            sections[-1].append(line)
    return sections


def cli_figures(section: list[str]) -> dict[str, str]:
    """What one worker's part of the tables says for each figure with a place on the CLI."""
    out: dict[str, str] = {}
    title = next(i for i, ln in enumerate(section) if ln.startswith("Where the step goes ("))
    head, (row, *_) = _table_after(section, title)
    table = dict(zip(head, row, strict=True))
    for f in WORKER_FIGURES:
        if f.cli is None:
            continue
        kind, label = f.cli
        if kind == "table":
            out[f.name] = table[label]
        else:
            (line,) = [ln for ln in section if label in ln][:1]
            m = re.search(re.escape(label) + r" (.+?)(?: from |; | \(|$)", line)
            assert m, line
            out[f.name] = m.group(1)
    return out


def cli_ranks(text: str, run: str) -> dict[str, dict[str, str]]:
    """The CLI's ranks table of ``run``: by worker, each column's cell."""
    lines = text.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(f"{run}: ranks side by side ("))
    head, rows = _table_after(lines, i)
    return {r[head.index("worker")]: dict(zip(head, r, strict=True)) for r in rows}


# -- one analysis per root: the JSON and the tables ------------------------------------------------


@dataclass
class Faces:
    report: Json  # what --json prints
    tables: str  # what the tables print


def trace_paths(root: Path) -> list[str]:
    """``root`` as a logdir, and each gzipped trace in it named otherwise than a logdir's
    (``*.pt.trace.json.gz``), which a scan of the logdir leaves out, as a path of its own."""
    others = sorted(root.rglob("*.json.gz"))
    return [str(root), *(str(p) for p in others if ".pt.trace.json" not in p.name and p.stat().st_size > 0)]


def faces_of(root: Path, monkeypatch: pytest.MonkeyPatch) -> Faces:
    from tb_mfu_plugin.cli.render import print_report

    reports = analyze_paths(trace_paths(root), jobs=None)
    report = Report(runs=[run for r in reports for run in r.runs], tool_version=reports[0].tool_version)
    monkeypatch.delenv("COLUMNS", raising=False)  # off a terminal, at the width the tables need
    out = io.StringIO()
    with redirect_stdout(out):
        print_report(msgspec.json.decode(json_bytes(report), type=Report), top=3)
    return Faces(json.loads(json_bytes(report)), out.getvalue())


ROOTS = [SAMPLES, *(SHARED / f for f in FIXTURES)]


@pytest.fixture(scope="module")
def faces() -> dict[Path, Faces]:
    found: dict[Path, Faces] = {}
    with pytest.MonkeyPatch.context() as mp:
        for root in ROOTS:
            if root.is_dir():
                found[root] = faces_of(root, mp)
    if SAMPLES not in found:
        pytest.skip("sample traces not available")
    return found


@pytest.mark.parametrize("root", ROOTS, ids=lambda p: p.name)
def test_the_cli_tables_print_the_json_figures(faces: dict[Path, Faces], root: Path) -> None:
    if root not in faces:
        pytest.skip(f"{root} not available")
    got = faces[root]
    sections = cli_sections(got.tables)
    analysed = [(run, w) for run in got.report["runs"] for _, w in usable(run)]
    assert len(sections) == len(analysed)
    checked = 0
    for (run, w), section in zip(analysed, sections, strict=True):
        want = expected(w)
        shown = cli_figures(section)
        assert shown == {k: want[k] for k in shown}, (run["name"], w["name"], w["span"])
        checked += len(shown)
    for run in got.report["runs"]:
        if run["ranks"] is None:
            continue
        table = cli_ranks(got.tables, run["name"])
        for row in run["ranks"]["ranks"]:
            for f in RANK_FIGURES:
                assert table[row["worker"]][f.cli] == f.fmt(row[f.key]), (run["name"], row["worker"], f.name)
                checked += 1
    assert checked


def test_unknown_is_n_a_on_the_cli_and_in_the_json(faces: dict[Path, Faces]) -> None:
    """A run with no FLOP count: the JSON has None, the tables say n/a, never 0."""
    got = faces[SAMPLES]
    (run,) = [r for r in got.report["runs"] if r["name"] == "low_sm_efficiency"]
    (w,) = run["workers"]
    assert w["summary"]["mfu"] is None and w["summary"]["flops_per_step"] is None
    sections = cli_sections(got.tables)
    names = [(r["name"], wr["name"]) for r in got.report["runs"] for _, wr in usable(r)]
    shown = cli_figures(sections[names.index(("low_sm_efficiency", w["name"]))])
    assert shown["MFU"] == fmt.NA and shown["FLOPs per step"] == fmt.NA


def test_one_label_names_one_figure_across_the_faces() -> None:
    """Two figures never share a label (lower-cased) on the faces: "Two aggregations get two names"."""
    by_label: dict[str, set[tuple[str, ...]]] = {}
    for f in WORKER_FIGURES:
        for where in (f.cli, f.tab):
            if where is not None:
                by_label.setdefault(where[1].lower().rstrip(":"), set()).add(f.path)
    shared = {label: paths for label, paths in by_label.items() if len(paths) > 1}
    assert not shared, f"one label, two figures: {shared}"


# -- the tab and the saved page, in Chromium -----------------------------------------------------

COLLECT = """() => {
  const text = (el) => (el ? el.textContent.trim() : null);
  const out = { kpi: {}, legend: {}, facts: {}, ranks: null, runbar: null, ranksCard: null, comm: null };
  const ov = document.querySelector('[data-testid=overview]');
  if (!ov) return out;
  for (const k of ov.querySelectorAll(':scope > .kpis > .kpi'))
    out.kpi[text(k.querySelector('.kpi-label'))] = text(k.querySelector('.kpi-value'));
  for (const l of ov.querySelectorAll('.leg'))
    out.legend[text(l.querySelector('.leg-label'))] = text(l.querySelector('.leg-val'));
  const facts = ov.querySelector('[data-testid=flops-facts]');
  if (facts) for (const dt of facts.querySelectorAll('dt')) out.facts[text(dt)] = text(dt.nextElementSibling);
  const rt = document.querySelector('[data-testid=ranks-table] table');
  if (rt) {
    const head = [...rt.querySelectorAll('thead th')].map((th) => th.firstChild.textContent.trim());
    out.ranks = [...rt.querySelectorAll('tbody tr')].map((tr) =>
      Object.fromEntries([...tr.querySelectorAll('td')].map((td, i) => [head[i], td.textContent.trim()])));
    out.ranksCard = rt.closest('section').innerText;
  }
  const bar = document.querySelector('.runbar');
  if (bar) {
    const copy = bar.cloneNode(true);
    copy.querySelector('[data-testid=download]')?.remove();
    out.runbar = copy.textContent.trim();
  }
  out.comm = document.querySelector('[data-testid=communication-card]')?.innerText ?? null;
  return out;
}"""


def tab_figures(seen: Json) -> dict[str, str | None]:
    """What the Overview shows for each figure with a place on the tab (None: not found there)."""
    return {f.name: seen[f.tab[0]].get(f.tab[1]) for f in WORKER_FIGURES if f.tab is not None}


def tab_ranks(seen: Json) -> dict[str, dict[str, str]] | None:
    return {r["Worker"]: r for r in seen["ranks"]} if seen["ranks"] is not None else None


def want_tab(run: Json, w: Json) -> Json:
    want = expected(w)
    ranks = None
    if run["ranks"] is not None:
        ranks = {r["worker"]: {f.tab: f.fmt(r[f.key]) for f in RANK_FIGURES} for r in run["ranks"]["ranks"]}
    return {"figures": {f.name: want[f.name] for f in WORKER_FIGURES if f.tab is not None}, "ranks": ranks}


def shown_tab(seen: Json) -> Json:
    ranks = tab_ranks(seen)
    if ranks is not None:
        ranks = {k: {f.tab: row.get(f.tab) for f in RANK_FIGURES} for k, row in ranks.items()}
    return {"figures": tab_figures(seen), "ranks": ranks}


def differences(want: Json, shown: Json) -> list[str]:
    """The figures (and rank cells) ``shown`` gets wrong, by name."""
    out = [k for k, v in want["figures"].items() if shown["figures"].get(k) != v]
    if want["ranks"] != shown["ranks"]:
        out.append("ranks")
    return out


def settled(collect: Callable[[], Json], want: Json, timeout_s: float = 60) -> Json:
    """What the page shows once it has drawn the worker report ``want`` is of: when it shows
    ``want``, the same on two reads in a row (or, after ``timeout_s``, what it shows then: the
    caller says what differs)."""
    last: list[Json] = []

    def shows() -> bool:
        seen = collect()
        again = bool(last) and seen == last[0]
        last[:] = [seen]
        return again and not differences(want, shown_tab(seen))

    try:
        poll(shows, timeout_s)
    except AssertionError:
        pass
    return last[0]


@pytest.fixture(scope="module")
def browser_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not all((SAMPLES / r).is_dir() for r in BROWSER_RUNS):
        pytest.skip("sample traces not available")
    d = tmp_path_factory.mktemp("faces") / "logs"
    for r in BROWSER_RUNS:
        shutil.copytree(SAMPLES / r, d / r)
    return d


def test_the_tab_and_the_saved_page_show_the_json_figures(
    faces: dict[Path, Faces], browser_logdir: Path, page: Any, browser: Any, tmp_path: Path
) -> None:
    _skip_without_browser()
    runs = {r["name"]: r for r in faces[SAMPLES].report["runs"] if r["name"] in BROWSER_RUNS}
    tb = TensorBoard(browser_logdir, tmp_path / "cache")
    wrong: list[str] = []
    checked = 0
    try:
        tb.wait_analysed()
        frame = open_tab(page, tb.url)
        frame.locator("[data-testid=run-select]").wait_for(timeout=TIMEOUT_MS)
        live_frame = next(f for f in page.frames if "plugin_entry.html" in f.url)
        for name in BROWSER_RUNS:
            run = runs[name]
            frame.locator("[data-testid=run-select]").select_option(name)
            frame.locator("[data-testid=run-title]").filter(has_text=name).wait_for(timeout=TIMEOUT_MS)
            for i, w in usable(run):
                if len(run["workers"]) > 1:
                    frame.locator("[data-testid=worker-select]").select_option(str(i))
                want = want_tab(run, w)
                live = settled(lambda: live_frame.evaluate(COLLECT), want)
                wrong += [f"tab {name}/{w['name']}: {k}" for k in differences(want, shown_tab(live))]
                saved = tmp_path / f"{name}-{i}.html"
                url = f"{tb.url}/data/plugin/mfu/download?run={name}&format=html&worker={i}"
                with urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 (loopback only)
                    saved.write_bytes(r.read())
                offline = open_saved(browser, saved)
                try:
                    seen = settled(lambda: offline.evaluate(COLLECT), want)  # noqa: B023
                    wrong += [f"saved {name}/{w['name']}: {k}" for k in differences(want, shown_tab(seen))]
                    # the same text in the title line, the ranks card and the communication card (§4)
                    for part in ("runbar", "ranksCard", "comm"):
                        assert seen[part] == live[part], (name, w["name"], part)
                finally:
                    offline.context.close()
                checked += 1
        assert "DDP" in live_ranks_title(runs["ddp_2gpu"], frame)
        check_suggested_sets(tb, frame)
    finally:
        tb.stop()
    assert checked == sum(len(usable(r)) for r in runs.values()) >= 5
    assert not page.errors, page.errors  # type: ignore[attr-defined]
    assert not wrong, wrong


def check_suggested_sets(tb: TensorBoard, frame: Any) -> None:
    """Compare opens on the runs /runs suggests, saying why; Strategies, with no set that fits
    among these runs (one distributed run), says what to pick (issue 23 §8)."""
    body = tb.get_json("/data/plugin/mfu/runs")
    pair = body["suggested_compare"]
    assert pair["runs"] == ["ddp_2gpu", "gpt_naive_attention"]  # one GPT: FLOPs per step within 1.5 %
    frame.locator("[data-testid=tab-compare]").click()
    heads = frame.locator("[data-testid=compare-table] thead .runname")
    heads.first.wait_for(timeout=TIMEOUT_MS)
    poll(lambda: [t.strip() for t in heads.all_text_contents()] == pair["runs"])
    assert frame.locator("[data-testid=compare-why]").text_content() == pair["reason"]
    # the rows are the ones analysis.run.compare decided for these runs, the note its reason
    rows = tb.get_json("/data/plugin/mfu/compare?" + "&".join(f"run={r}" for r in pair["runs"]))["rows"]
    poll(lambda: frame.locator("[data-testid=compare-table] tbody tr").count() == len(rows["shown"]))
    note = frame.locator("[data-testid=compare-no-memory]")
    assert rows["why"] and note.text_content() == f"No memory rows: {rows['why']}."
    assert body["suggested_strategies"]["runs"] == []
    frame.locator("[data-testid=tab-strategies]").click()
    hint = frame.locator("[data-testid=compare-hint]")
    hint.wait_for(timeout=TIMEOUT_MS)
    assert hint.text_content() == body["suggested_strategies"]["reason"]


def live_ranks_title(run: Json, frame: Any) -> str:
    """The ranks card's title of ``run`` in the tab: its strategy, never "single GPU" (§4)."""
    frame.locator("[data-testid=run-select]").select_option(run["name"])
    frame.locator("[data-testid=run-title]").filter(has_text=run["name"]).wait_for(timeout=TIMEOUT_MS)
    title = frame.locator("section.card:has([data-testid=ranks-table]) h2").text_content() or ""
    assert "single GPU" not in title
    return title


def open_saved(browser: Any, html: Path) -> Any:
    """The saved page from file://, offline, with no request but the file itself."""
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000}, offline=True)
    pg = ctx.new_page()
    requests: list[str] = []
    pg.on("request", lambda r: requests.append(r.url))
    pg.goto(html.as_uri())
    pg.locator("[data-testid=run-title]").wait_for(timeout=TIMEOUT_MS)
    assert requests == [html.as_uri()], requests
    return pg
