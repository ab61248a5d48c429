"""The JSON report is a function of the trace alone, not of the process that wrote it.

Name codes once followed set order, which follows the per-process string hash; they decide
tie orders in the kernel tables and the order of float sums, so two runs of the same CLI on
the same trace printed different last digits and different kernel orders.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


def _report(path: Path, seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json"],
        capture_output=True,
        env=env,
        check=True,
    ).stdout
    report = json.loads(out)
    report.pop("tool_version")
    return report


@pytest.mark.parametrize("sample", ["ddp_2gpu", "gpt_compile"])
def test_report_does_not_depend_on_the_string_hash_seed(sample: str) -> None:
    first, second = _report(SAMPLES / sample, "1"), _report(SAMPLES / sample, "2")
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first["runs"][0]["workers"], "the sample must produce workers to compare"
