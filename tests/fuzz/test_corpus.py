"""The hostile corpus (issue 15): every case ends cleanly, and one bad file costs no one else.

Pass criteria, checked per case (``tb-mfu analyze CASE --json``, run by runner.py in
child processes so that a hang or a blow-up is caught, not suffered):

- exit 0 with every worker either an error string or a valid summary, or exit 1/2
  with one-line ``tb-mfu: ...`` errors on stderr; never a traceback;
- no hang: each case under ``CASE_SECONDS`` (faulthandler ends a child that hangs);
- peak RSS of the child under ``PEAK_RSS_MB``;
- nothing written into the logdir (a snapshot of every entry before and after).

``TB_MFU_FUZZ_LONG=1`` builds a corpus four times larger, with the issue's full-size
bombs, names and device counts, and allows each case more time.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import corpus
import hostile
import invariants
import pytest

ROOT = corpus.ROOT
CASE_SECONDS = 120.0 if hostile.LONG else 30.0
PEAK_RSS_MB = 1024
GOOD_RUN = "pageable_copy_loop"
PER_BASE = 4 * corpus.MUTATIONS_PER_BASE if hostile.LONG else corpus.MUTATIONS_PER_BASE


@pytest.fixture(scope="module")
def logdir(hostile_corpus: tuple[Path, list[Path]]) -> tuple[Path, list[Path]]:
    """The corpus of ``PER_BASE`` mutations per base, built once for the run (tests/conftest.py)."""
    return hostile_corpus


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TB_MFU_FUZZ_CASE_S=str(CASE_SECONDS), COLUMNS="120")
    env.pop("TB_MFU_CACHE_DIR", None)
    return env


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), root)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def _run_all(cases: list[Path], workers: int = 2) -> dict[str, dict[str, Any] | None]:
    """Results by case; None for a case whose child died (hang or crash) before reporting."""
    groups = [cases[i::workers] for i in range(workers)]
    results: dict[str, dict[str, Any] | None] = {}
    pending = [g for g in groups if g]
    while pending:
        procs = [
            (
                g,
                subprocess.Popen(
                    [sys.executable, str(Path(__file__).parent / "runner.py"), *map(str, g)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=_env(),
                    text=True,
                ),
            )
            for g in pending
        ]
        pending = []
        for group, proc in procs:
            out, _ = proc.communicate(timeout=CASE_SECONDS * len(group) + 60)
            done = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            for r in done:
                results[r["case"]] = r
            if len(done) < len(group):  # the next case killed the child: record it, go on after it
                results[str(group[len(done)])] = None
                pending.append(group[len(done) + 1 :])
        pending = [g for g in pending if g]
    return results


def _problems(r: dict[str, Any]) -> list[str]:
    out = []
    if r["crash"]:
        out.append("exception escaped: " + r["crash"].strip().splitlines()[-1])
    if "Traceback" in r["stderr"]:
        out.append("traceback on stderr")
    lines = r["stderr"].splitlines()
    if any(not line.startswith("tb-mfu: ") for line in lines):
        out.append(f"stderr is not one-line errors: {r['stderr'][:300]!r}")
    if r["rc"] == 0:
        out += _summary_problems(json.loads(r["stdout"]))
    elif r["rc"] not in (1, 2) or not lines:
        out.append(f"exit {r['rc']} with stderr {r['stderr'][:200]!r}")
    if r["peak_rss_mb"] > PEAK_RSS_MB:
        out.append(f"peak RSS {r['peak_rss_mb']} MB > {PEAK_RSS_MB} MB")
    return out


def _summary_problems(report: dict[str, Any]) -> list[str]:
    """A valid summary keeps the report's contract: shares in 0-1, non-negative bytes, and the
    invariants of tests/invariants.py (no MFU or projection above 100 %, no 0 for an unknown)."""
    out = invariants.report_problems(report)
    for run in report["runs"]:
        for w in run["workers"]:
            if w["error"] is not None:
                assert isinstance(w["error"], str) and "\n" not in w["error"]
                continue
            s = w["summary"]
            for k, v in s.items():
                if v is None or not isinstance(v, int | float):
                    continue
                if (k.endswith("_share") or k in ("sm_efficiency", "achieved_occupancy")) and not 0 <= v <= 1:
                    out.append(f"{w['file']}: {k} = {v} outside 0-1")
                if k.endswith("_bytes_per_step") and v < 0:
                    out.append(f"{w['file']}: {k} = {v} negative")
            if any(not 0 <= x <= 1 for x in s["breakdown"].values()):
                out.append(f"{w['file']}: breakdown outside 0-1: {s['breakdown']}")
            out += _combined_gain_problems(w)
    return out


def _combined_gain_problems(w: dict[str, Any]) -> list[str]:
    """The gain of fixing every finding at once: at least the largest gain, at most the step."""
    combined, gains = w["combined_gain_us_per_step"], [f["est_gain_us_per_step"] for f in w["findings"]]
    if combined is None:
        return [] if not gains else [f"{w['file']}: findings but no combined gain"]
    step = w["summary"]["step_time_mean_us"] or w["summary"]["step_time_us"]
    if gains and combined < max(gains) - 1e-6:
        return [f"{w['file']}: combined gain {combined} below the largest gain {max(gains)}"]
    if combined > step + 0.05:  # the gains are rounded to 0.1 µs (diagnosis.finding)
        return [f"{w['file']}: combined gain {combined} above the step {step}"]
    return []


def test_at_least_300_cases_one_run_directory_each(logdir: tuple[Path, list[Path]]) -> None:
    root, cases = logdir
    assert len(cases) >= 300
    assert len({c.name for c in cases}) == len(cases)
    assert all(c.parent == root and c.is_dir() for c in cases)


def test_every_case_ends_cleanly_in_time_and_memory(logdir: tuple[Path, list[Path]]) -> None:
    root, cases = logdir
    before = _snapshot(root)
    results = _run_all(cases)
    failures = {}
    for case in map(str, cases):
        r = results.get(case)
        if r is None:
            failures[case] = [f"no result: hung past {CASE_SECONDS} s or killed"]
        elif problems := _problems(r):
            failures[case] = problems
    assert not failures, json.dumps(failures, indent=1)[:4000]
    assert _snapshot(root) == before, "something was written into the logdir"
    analysed = sum(1 for r in results.values() if r and r["rc"] == 0)
    assert analysed >= 50  # the mutations leave many traces analysable, with notes


def test_whole_corpus_logdir_reports_the_good_run(logdir: tuple[Path, list[Path]], tmp_path: Path) -> None:
    """One logdir = the whole corpus + one good run: exit 0, the good run's numbers intact."""
    root, _ = logdir
    good = root / "zz_good_run"
    if not good.exists():
        shutil.copytree(corpus.SAMPLES / GOOD_RUN, good)
    alone = _analyze(good)
    before = _snapshot(root)
    everything = _analyze(root, timeout=CASE_SECONDS * 20)
    assert _snapshot(root) == before
    (run,) = [r for r in everything["runs"] if r["name"] == "zz_good_run"]
    (w,) = run["workers"]
    assert w["error"] is None
    assert w["summary"] == alone["runs"][0]["workers"][0]["summary"]
    truth = json.loads((good / "ground_truth.json").read_text())
    s = w["summary"]
    assert s["steps"] == truth["steps_profiled"] == 3
    assert s["flops_per_step"] == truth["flops_per_step"]  # FlopCounterMode's count, from the shapes
    assert s["d2h_bytes_per_step"] == 16 * 2**20  # one 16 MiB D2H per step (ground_truth.json)
    assert len(everything["runs"]) > 250


def _analyze(path: Path, timeout: float = 120) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json"],
        capture_output=True,
        env=_env(),
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    return report
