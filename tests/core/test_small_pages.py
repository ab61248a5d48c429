"""The analysing processes turn numpy's huge-page advice off, unless $NUMPY_MADVISE_HUGEPAGE says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the advice is after the CLI ran (numpy's setter returns the value it replaces).
PROBE = (
    "import sys; from tb_mfu_plugin import cli; cli.main(sys.argv[1:]);"
    "from numpy._core import multiarray as m; print('advice', m._set_madvise_hugepage(True), file=sys.stderr)"
)


def _advice_after_cli(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    if env_value is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = env_value
    sample = ROOT / "sample_traces" / "small_copies"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "analyze", str(sample), "--json"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_the_cli_analyses_in_small_pages() -> None:
    pytest.importorskip("numpy._core.multiarray")
    assert _advice_after_cli(None) == "advice False"


def test_numpys_own_switch_wins() -> None:
    pytest.importorskip("numpy._core.multiarray")
    assert _advice_after_cli("1") == "advice True"
