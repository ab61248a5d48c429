"""The invariants of issue 23 on the third-party fixtures and on what the faces write.

- Every fixture report holds tests/invariants.py (the samples: tests/test_sample_traces.py; the
  hostile corpus: tests/fuzz/test_corpus.py).
- An unknown is never shown as a number: where the report has None, the CLI prints n/a, the
  notebook frames hold NaN and the Scalars export writes no point (the tab: tests/e2e).
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import pytest
from conftest import SAMPLES, SHARED
from invariants import report_problems

from tb_mfu_plugin.analysis.report import Report, to_json
from tb_mfu_plugin.running.pipeline import analyze_path

# The fixtures with GPU work in steps: the pipeline-parallel H200 runs (rank pairs), TraceLens'
# inference twins, torch-tb-profiler's samples, HTA's traces.
FIXTURES = (
    sorted(
        str(p.relative_to(SHARED))
        for pattern in (
            "pipeline_parallel_h200/*",
            "tracelens_hf_inference/*/*.json.gz",
            "torch_tb_profiler_samples/*",
            "hta_test_data/*/*.json.gz",
        )
        for p in SHARED.glob(pattern)
        if p.is_dir() or p.is_file()
    )
    if SHARED.is_dir()
    else []
)


@functools.cache
def _analysed(path: str) -> Report:
    return analyze_path(path)


@pytest.mark.parametrize("rel", FIXTURES)
def test_invariants_on_the_fixtures(rel: str) -> None:
    report = _analysed(str(SHARED / rel))
    assert not report_problems(json.loads(to_json(report))), report_problems(json.loads(to_json(report)))


def _sample(run: str) -> Report:
    if not (SAMPLES / run).is_dir():
        pytest.skip(f"sample trace not recorded: {run}")
    return _analysed(str(SAMPLES / run))


def _cli_text(report: Report, capsys: pytest.CaptureFixture[str]) -> str:
    from tb_mfu_plugin.cli.render import print_report

    print_report(report, top=5)
    return capsys.readouterr().out


@pytest.mark.parametrize("run", ["tiny_mlp_cuda_graph", "low_sm_efficiency"])
def test_the_cli_shows_unknown_flops_and_mfu_as_n_a(run: str, capsys: pytest.CaptureFixture[str]) -> None:
    """No FLOPs counted: the CLI says n/a for FLOPs per step and MFU, and the waterfall's last row
    has no value (it drew 1.0 % on tiny_mlp_cuda_graph)."""
    text = _cli_text(_sample(run), capsys)
    assert "FLOPs / step (MFU's count): n/a" in text
    assert "but MFU n/a" in text
    assert not re.search(r"\b0(\.0+)? [MGTP]?FLOP\b", text)  # no "0 FLOP" / "0.00 TFLOP"
    last = next(line for line in text.splitlines() if "Model FLOPs at peak" in line)
    assert "unknown" in last and last.count("n/a") == 2, last


def test_the_cli_never_shows_an_impossible_projection(capsys: pytest.CaptureFixture[str]) -> None:
    """fp32_no_tensor_cores read '→ MFU impossible (>100 %)' under no_tensor_cores."""
    text = _cli_text(_sample("fp32_no_tensor_cores"), capsys)
    assert "→ MFU" in text and "→ MFU impossible" not in text


def test_notebook_frames_hold_nan_where_the_report_has_none() -> None:
    from tb_mfu_plugin.notebook import Report as NotebookReport

    nb = NotebookReport(_sample("tiny_mlp_cuda_graph"))
    workers, steps = nb.workers(), nb.steps()
    for col in ("mfu", "flops_per_step", "achieved_flops"):
        assert workers[col].isna().all() and steps[col].isna().all(), col
    assert (steps["gpu_idle_after_sync_share"] == 0).all()  # known: no sync, so no idle after one


def test_scalars_write_no_point_for_an_unknown(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    from tb_mfu_plugin.scalars.export_scalars import export_report

    (run,) = export_report(_sample("tiny_mlp_cuda_graph"), str(tmp_path))
    acc = ea.EventAccumulator(run.path, size_guidance={ea.TENSORS: 0})
    acc.Reload()
    tags = set(acc.Tags()["tensors"])
    assert "tb_mfu/gpu_busy_share" in tags and "tb_mfu/summary/gpu_busy_share" in tags
    assert not {"tb_mfu/mfu", "tb_mfu/flops_per_step", "tb_mfu/achieved_flops", "tb_mfu/summary/mfu"} & tags
    ours = [t for t in tags if t.startswith("tb_mfu/")]
    values = [float(tensor_util.make_ndarray(e.tensor_proto)) for t in ours for e in acc.Tensors(t)]
    assert values and all(math.isfinite(v) for v in values)
