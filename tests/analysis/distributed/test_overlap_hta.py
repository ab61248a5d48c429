"""Our comm/comp overlap against Holistic Trace Analysis's own on the same traces, within 2
points (``benchmarks/bench_hta_overlap.py`` holds the comparison and says how the windows match).

HTA is installed into a temporary virtual environment, which takes minutes and the network, so
the test runs only when asked: ``TB_MFU_HTA=1`` installs it, ``TB_MFU_HTA_VENV=DIR`` uses a venv
that has it already.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES, SHARED, load_module

VENV = os.environ.get("TB_MFU_HTA_VENV")
pytestmark = pytest.mark.skipif(
    not (VENV or os.environ.get("TB_MFU_HTA") == "1"),
    reason="set TB_MFU_HTA=1 (installs HolisticTraceAnalysis into a temporary venv) or TB_MFU_HTA_VENV=DIR",
)


def test_overlap_agrees_with_hta_within_two_points(tmp_path: Path) -> None:
    bench = load_module(ROOT / "benchmarks" / "bench_hta_overlap.py")
    runs = [SAMPLES / "ddp_2gpu", SAMPLES / "fsdp2_2gpu", SAMPLES / "tpdp_4gpu"]
    runs += [p for p in [SHARED / "hta_test_data" / "nccl_parser_config"] if p.is_dir()]
    runs = [r for r in runs if r.is_dir()]
    if not runs:
        pytest.skip("no multi-rank traces available")
    python = Path(VENV) / "bin" / "python" if VENV else bench.make_venv(tmp_path / "hta")
    rows = bench.compare(python, runs)
    assert len(rows) == sum(
        4 if r.name == "tpdp_4gpu" else 1 if r.parent == SHARED / "hta_test_data" else 2 for r in runs
    )
    for run, rank, ours, _, hta, _ in rows:
        assert ours is not None and abs(ours - hta) <= 2.0, (run, rank, ours, hta)
