"""docs/notebook.md is a notebook: its python blocks run, in order, on the real sample."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, SAMPLES

DOC = ROOT / "docs" / "notebook.md"


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_docs_page_has_the_walkthrough() -> None:
    code = "\n".join(_blocks())
    for accessor in ("workers()", "steps()", "kernels()", "copies()", "syncs()", "findings()", "ranks()",
                     "collectives()", "memory()", "Report.from_json"):
        assert accessor in code, accessor


def test_every_python_block_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if not (SAMPLES / "gpt_naive_attention").is_dir():
        pytest.skip("sample traces not available")
    monkeypatch.chdir(ROOT)
    namespace: dict[str, object] = {"__name__": "__notebook__"}
    for i, block in enumerate(_blocks()):
        exec(compile(block, f"{DOC.name}[block {i}]", "exec"), namespace)
    out = capsys.readouterr().out
    # what the page shows was printed: the sample's facts, not the exact float formatting
    for fact in ("NVIDIA H200", "naive_attention", "aten::item", "allreduce", "pageable", "8388608"):
        assert fact in out, fact
