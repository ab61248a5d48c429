"""The tab on one logdir holding the whole hostile corpus (tests/fuzz) plus one good run.

Every run is served (200, with its state and one-line errors), the good run's numbers
are the CLI's on the same file, the analysis threads survive every case, and nothing is
written into the logdir. The CLI's side of the same corpus is tests/fuzz/test_corpus.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from urllib.parse import quote

from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.running.pipeline import analyze_path

from .conftest import ROOT

sys.path.append(str(ROOT / "tests" / "fuzz"))
import corpus  # noqa: E402

GOOD = "zz_good"
GOOD_SAMPLE = "pageable_copy_loop"


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*")}


def test_whole_corpus_is_served_and_the_good_run_is_right(serve, tmp_path):
    logdir = tmp_path / "corpus"
    cases = corpus.build_corpus(logdir)
    assert len(cases) >= 300
    good_src = next((ROOT / "sample_traces" / GOOD_SAMPLE).glob("*.pt.trace.json.gz"))
    (logdir / GOOD).mkdir()
    shutil.copy(good_src, logdir / GOOD / good_src.name)
    before = _listing(logdir)

    s = serve(logdir, cache_dir=str(tmp_path / "cache"))
    assert s.get("/runs").status_code == 200  # answers while the analyses run
    s.settle(timeout=900)
    assert all(t.is_alive() for t in s.plugin._cache._threads)

    r = s.get("/runs")
    assert r.status_code == 200
    runs = {run["name"]: run for run in json.loads(r.get_data())["runs"]}
    assert len(runs) >= len(cases)  # every case a run (a bad name is escaped, never dropped)
    for name, run in runs.items():
        assert run["state"] in ("ready", "error"), (name, run["state"])
        assert all(e and "\n" not in e for e in run.get("errors", [])), name
        rep = s.get(f"/report?run={quote(name, safe='')}")
        assert rep.status_code == 200, (name, rep.status_code)
        report = json.loads(rep.get_data())
        assert report["name"] == name
        for w in report["workers"]:
            summary = w.get("summary")
            if summary is None:
                assert w["error"], name  # no figures without a reason
                continue
            # the report's contract on hostile input: shares in 0-1, no negative bytes
            for key, value in summary.items():
                if key.endswith("_share") and value is not None:
                    assert 0.0 <= value <= 1.0, (name, key, value)
                if key.endswith("bytes_per_step"):
                    assert value >= 0, (name, key, value)
            assert summary["mfu"] is None or 0.0 <= summary["mfu"] <= 1.0, name

    served = json.loads(s.get(f"/report?run={GOOD}").get_data())
    cli = json.loads(to_json(analyze_path(str(logdir / GOOD))))["runs"][0]
    assert served["workers"][0]["error"] is None
    assert served["workers"][0]["summary"] == cli["workers"][0]["summary"]
    assert _listing(logdir) == before  # nothing written into the logdir
