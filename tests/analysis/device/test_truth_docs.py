"""docs/mfu.md quotes the headline MFU and the findings' headline gains against the recorded truth
(validation/: the H200 set, the H100 one and the second H100 host's) as today's analyzer reports them:
the tables scripts/gen_truth_tables.py writes, never those of the day the page was written."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT, load_module


def test_the_docs_tables_against_the_truth_are_todays() -> None:
    gen = load_module(ROOT / "scripts" / "gen_truth_tables.py")
    for folder in (f for pair in gen.SETS.values() for f in pair if f is not None):
        if not (ROOT / "validation" / folder / "ground_truth.json").is_file():
            pytest.skip(f"validation/{folder} not recorded")
    text = gen.DOC.read_text()
    assert gen.rendered(text) == text, "stale tables in docs/mfu.md: run python scripts/gen_truth_tables.py"
    # each set's MFU table names every truth run it was recorded with (² marks a truth recounted on the
    # model as it ran, validation/flops_as_run.py; ³ a truth that spread over 1.25×); a set whose MFU
    # traces are in git history keeps the table last printed, or none
    tables = len(re.findall(r"^Device: .*; MFU = FLOPs / step time /", text, re.M))
    assert tables >= sum(1 for folders in gen.SETS.values() if folders[0] is not None)
    for name in ("hf_gpt2", "hf_vit", "hf_llama_sdpa_gqa", "flex_attention_compile"):
        assert len(re.findall(rf"^\| `{name}`( ²)?( ³)? \|", text, re.M)) == tables, name
    # Llama with SDPA and GQA: its truth is FlopCounterMode's count of the SDPA model, which ours matches
    assert len(re.findall(r"^\| `hf_llama_sdpa_gqa` ²( ³)? \| \+0\.0% \|", text, re.M)) == tables
