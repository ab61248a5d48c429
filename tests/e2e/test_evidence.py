"""The Findings card's evidence in Chromium (issue 32, item 5): every value the tab shows is the text
the CLI and the notebook write for it (analysis.evidence.show), each by the unit its type carries,
on the saved page of the samples that together fire every rule that a sample shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tb_mfu_plugin.analysis.evidence.show import evidence_lines
from tb_mfu_plugin.analysis.report import Report

from ..diagnosis.test_registry import RUNS
from .conftest import ROOT
from .test_browser import TIMEOUT_MS
from .test_faces import open_saved

pytestmark = pytest.mark.e2e

SAMPLES = ROOT / "sample_traces"

# Each value the card shows, by its path in the evidence's JSON (as show.EvidenceLine.path): a field's
# <dd data-key>, a block's or a map's <dl> inside it, a table's <td data-key> per row.
_READ = """(root) => {
  const out = {};
  const cell = (el, path) => {
    const dl = el.querySelector(':scope > dl.facts');
    const table = el.querySelector(':scope > .table-wrap > table');
    if (dl) facts(dl, path + '.');
    else if (table)
      table.querySelectorAll(':scope > tbody > tr').forEach((tr, i) => {
        for (const td of tr.querySelectorAll(':scope > td')) cell(td, `${path}[${i}].${td.dataset.key}`);
      });
    else out[path] = el.textContent;
  };
  const facts = (dl, prefix) => {
    for (const dd of dl.querySelectorAll(':scope > dd'))
      cell(dd, prefix + (dd.dataset.key ?? dd.previousElementSibling.textContent));
  };
  facts(root.querySelector(':scope > dl.facts'), '');
  return out;
}"""


def _saved(tmp_path: Path) -> tuple[Path, Report]:
    runs = [SAMPLES / r for r in RUNS]
    if not all(any(r.glob("*.pt.trace.json*")) for r in runs):
        pytest.skip("sample traces not recorded")
    folder = tmp_path / "samples"
    folder.mkdir()
    for r in runs:
        (folder / r.name).symlink_to(r)
    html = tmp_path / "samples.html"
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(folder), "--json", "--html", str(html)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    ).stdout
    return html, msgspec.json.decode(out, type=Report)


def test_the_tab_shows_each_evidence_value_as_the_cli_writes_it(browser: Any, tmp_path: Path) -> None:
    html, report = _saved(tmp_path)
    pg = open_saved(browser, html)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    shown = 0
    for run in report.runs:
        pg.locator("[data-testid=run-select]").select_option(run.name)
        pg.locator("[data-testid=run-title]").filter(has_text=run.name).wait_for(timeout=TIMEOUT_MS)
        for k, w in enumerate(run.workers):
            if w.error or not w.findings:
                continue
            if len(run.workers) > 1:
                pg.locator("[data-testid=worker-select]").select_option(str(k))
            cards = pg.locator("[data-testid=findings] [data-testid=evidence]")
            cards.first.wait_for(state="attached", timeout=TIMEOUT_MS)
            assert cards.count() == len(w.findings)
            for i, f in enumerate(w.findings):
                card = cards.nth(i)
                assert card.get_attribute("data-rule") == f.id
                got = card.evaluate(_READ)
                want = {line.path: line.text for line in evidence_lines(f.evidence)}
                assert got == want, f"{run.name} {w.name} {f.id}"
                shown += len(got)
    assert shown > 500 and not errors, errors
