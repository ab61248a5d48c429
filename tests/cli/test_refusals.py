"""``tb-mfu`` refuses what it cannot honour with exit status 2 and one line (issue 34, part 4), and
``compare`` shows every run against the baseline with the change beside each figure."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tensorboard.plugins.base_plugin import FlagsError

from tb_mfu_plugin.analysis.fmt import pp_delta, rel_delta
from tb_mfu_plugin.cli import main
from tb_mfu_plugin.cli.console import cut
from tb_mfu_plugin.running import flags as F
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.tensorboard.entry import MfuPluginLoader

from ..conftest import ROOT, SAMPLES

NAIVE, SDPA, COMPILE = (SAMPLES / r for r in ("gpt_naive_attention", "gpt_sdpa_fused", "gpt_compile"))


def _tb_mfu(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command, as a user runs it: its exit status and what it wrote."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_an_unknown_device_name_is_refused_with_the_nearest_known_ones() -> None:
    got = _tb_mfu("analyze", str(SAMPLES / "dataloader_stall"), "--device-name", "H900")
    assert got.returncode == 2 and got.stdout == ""
    line = _one_line(got.stderr)
    assert "--device-name" in line and "unknown GPU 'H900'" in line
    nearest = line.split("the nearest known: ", 1)[1].split(" (see", 1)[0].split(", ")
    assert "H200 SXM" in nearest and len(nearest) == 3  # from the peak table (analysis/device/peaks.py)


def test_a_device_name_the_table_knows_is_taken_in_any_spelling() -> None:
    assert F.device_name("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3"
    assert F.device_name("h200") == "h200"
    with pytest.raises(F.Refused, match=r"unknown GPU 'xyz'; known: GB200, B200, .*MI210$"):
        F.device_name("xyz")  # nothing near: every known name


def test_the_tabs_device_name_flag_and_the_variable_are_refused_alike() -> None:
    """One table for both faces: TensorBoard's fix_flags turns the same ValueError into its flag error."""
    with pytest.raises(ValueError, match=r"^--mfu_device_name: unknown GPU 'A1000'; the nearest known: A100, "):
        F.resolve(argparse.Namespace(mfu_device_name="A1000"), F.PLUGIN, {})
    with pytest.raises(FlagsError, match=r"--mfu_device_name: unknown GPU 'H900'"):
        MfuPluginLoader().fix_flags(argparse.Namespace(mfu_device_name="H900"))


@pytest.mark.parametrize("top", ["-3", "0", "two"])
def test_top_must_be_one_or_more(top: str) -> None:
    got = _tb_mfu("analyze", str(SAMPLES / "dataloader_stall"), "--top", top)
    assert got.returncode == 2 and got.stdout == ""
    assert _one_line(got.stderr) == (
        f"tb-mfu analyze: argument --top: must be a whole number of at least 1, got '{top}' (see tb-mfu analyze --help)"
    )


def test_every_usage_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["analyze", "x", "--jobs", "0"], ["compare", str(NAIVE)], ["analyze", "x", "--no-such-flag"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 2
        assert _one_line(capsys.readouterr().err).startswith("tb-mfu")


def test_compare_of_three_runs_shows_each_against_the_baseline() -> None:
    got = _tb_mfu("compare", str(NAIVE), str(SDPA), str(COMPILE), "--json")
    assert got.returncode == 0, got.stderr
    body = json.loads(got.stdout)
    against = body["against_baseline"]
    assert [a["ranks"][0]["other"]["run"] for a in against] == ["gpt_sdpa_fused", "gpt_compile"]
    assert all(a["ranks"][0]["baseline"]["run"] == "gpt_naive_attention" for a in against)
    assert (against[0]["matched_by"], against[0]["ranks"]) == (body["matched_by"], body["ranks"])  # schema 2 kept
    compiled = {w.name: w for r in analyze_path(str(COMPILE)).runs for w in r.workers}
    third = against[1]["ranks"][0]
    assert compiled[third["other"]["worker"]].summary is not None
    assert third["other"]["summary"]["mfu"] == compiled[third["other"]["worker"]].summary.mfu
    assert {c["id"]: c["status"] for c in third["findings"]}["naive_attention"] == "fixed"

    text = _tb_mfu("compare", str(NAIVE), str(SDPA), str(COMPILE))
    assert text.returncode == 0, text.stderr
    for run in ("gpt_sdpa_fused", "gpt_compile"):
        title = f"Compare (the one worker of each run): {run} against the baseline gpt_naive_attention"
        assert title in text.stdout
        assert f"Findings of the runs, {run} against the baseline gpt_naive_attention" in text.stdout


def _row(out: str, label: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if ln.startswith(f"│ {label} "))
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_compare_has_a_change_column_and_one_format_per_row() -> None:
    got = _tb_mfu("compare", str(NAIVE), str(SDPA))
    assert got.returncode == 0, got.stderr
    (a,) = (w for r in analyze_path(str(NAIVE)).runs for w in r.workers)
    (b,) = (w for r in analyze_path(str(SDPA)).runs for w in r.workers)
    assert a.summary is not None and b.summary is not None
    head = _row(got.stdout.replace("┃", "│"), "")
    assert head[1:] == ["baseline", "other", "change"]
    mfu = _row(got.stdout, "MFU")
    assert mfu[3] == pp_delta(a.summary.mfu, b.summary.mfu) and mfu[3].startswith("+")  # shares: points
    step = _row(got.stdout, "Step time")
    assert step[3] == rel_delta(a.summary.step_time_us, b.summary.step_time_us) and step[3].startswith("\u2212")
    kernels = _row(got.stdout, "Kernels / step")[1:3]
    decimals = {len(k.partition(".")[2]) for k in kernels}
    assert len(decimals) == 1, kernels  # "986.0" beside "357.7", not "986" beside "357.7"


def test_a_cut_whatif_row_ends_in_an_ellipsis() -> None:
    """Piped (no terminal), the what-if table's long finding is cut, and says so."""
    got = _tb_mfu("analyze", str(NAIVE), "--jobs", "1")
    assert got.returncode == 0, got.stderr
    table = got.stdout[got.stdout.index("What-if:") :]
    row = next(ln for ln in table.splitlines() if "sync_point · blocking" in ln)
    cell = row.split("│")[1].strip()
    assert cell.endswith("…") and len(cell) == 60, cell
    assert cut("short", 60) == "short" and cut("abcdef", 4) == "abc…" and cut("abcdef", 4, keep_end=True) == "…def"


def test_compare_needs_an_analysable_worker_in_every_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "w.1.pt.trace.json").write_text("{not json")
    assert main(["compare", str(NAIVE), str(SDPA), str(bad), "--jobs", "1"]) == 1
    assert "compare needs one analysable worker in each run" in capsys.readouterr().err
