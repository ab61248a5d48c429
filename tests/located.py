"""Reports of the same traces read from different places (a folder, a URL, an archive),
made comparable field for field: every location under the root becomes ``<root>/...``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
# The user FLOPs read from a run's sidecar, so that every test also reads a sidecar remotely.
SIDECAR = {"version": 1, "flops_per_step": 1.5e12, "source": "test sidecar"}


def add_sidecar(run_dir: Path) -> None:
    (run_dir / "tb_mfu.json").write_text(json.dumps(SIDECAR))


def sample_logdir(dest: Path, runs: tuple[str, ...]) -> Path:
    """``dest`` made a logdir of copies of sample runs (tests never write into sample_traces),
    the first with a sidecar."""
    for run in runs:
        shutil.copytree(SAMPLES / run, dest / run, ignore=shutil.ignore_patterns("ground_truth.json"))
    add_sidecar(dest / runs[0])
    return dest


def runs_by_name(doc: Any, root: str) -> dict[str, dict[str, Any]]:
    """``doc`` (a report, as JSON text or decoded) by run name, its locations under ``root``
    (a folder, a URL or an archive's path or URL) written as ``<root>/<path inside>``."""
    text = doc if isinstance(doc, str) else doc.decode() if isinstance(doc, bytes) else json.dumps(doc)
    escaped = json.dumps(str(root).rstrip("/"))[1:-1]
    if re.search(r"\.(zip|tar\.gz|tgz|tar)$", escaped):
        text = re.sub(r'(?:zip|tar)://([^"]*?)::' + re.escape(escaped), lambda m: "<root>/" + m.group(1), text)
    else:
        text = text.replace(escaped, "<root>")
    return {r["name"]: r for r in json.loads(text)["runs"]}


def reports_at(location: str | Path, options: AnalysisOptions | None = None) -> dict[str, dict[str, Any]]:
    """``tb-mfu analyze --json``'s runs of ``location``, comparable with any other place's."""
    return runs_by_name(to_json(analyze_path(str(location), options)), str(location))
