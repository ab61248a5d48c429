"""The tracked tree stays under what a device call carries (64 MiB, /work/.library/device): past it no
trace or ground truth can be recorded from this checkout. Recorded sets that nothing reads any more go
to git history, their README saying how to bring them back."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from conftest import ROOT

LIMIT = 64 * 2**20


def test_the_tracked_tree_fits_a_device_call() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    sizes = {n: (ROOT / n).stat().st_size for n in names.decode().split("\0") if n and (ROOT / n).is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.__getitem__, reverse=True)[:5]
    assert total < LIMIT, f"{total / 2**20:.1f} MiB tracked, over {LIMIT / 2**20:.0f} MiB; largest: {largest}"
