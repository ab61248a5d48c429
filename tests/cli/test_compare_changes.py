"""``tb-mfu compare`` prints each figure's change as ``analysis.run.compare`` computed it (the
``--json`` pair's ``figures``), through ``fmt.change``: the CLI computes no delta of its own."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis import fmt
from tb_mfu_plugin.analysis.definitions import label
from tb_mfu_plugin.cli import main


def _rows(text: str) -> dict[str, list[str]]:
    """The compare table's rows by label: [baseline, other, change]."""
    out = {}
    for line in text.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip().strip("│").split("│")]
            out.setdefault(cells[0], cells[1:])
    return out


def test_the_change_column_is_the_json_delta(capsys: pytest.CaptureFixture[str]) -> None:
    naive, sdpa = SAMPLES / "gpt_naive_attention", SAMPLES / "gpt_sdpa_fused"
    if not naive.is_dir():
        pytest.skip("sample traces not available")
    assert main(["compare", str(naive), str(sdpa), "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)
    (pair,) = comparison["ranks"]
    assert main(["compare", str(naive), str(sdpa)]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    checked = 0
    for d in pair["figures"]:
        if d["figure"] in comparison["rows"]["left_out"]:
            assert d["figure"].startswith("memory.") and d["baseline"] is None and d["value"] is None
            assert label(d["figure"]) not in rows  # no memory events in either: no row of unknowns
            continue
        base, other, change = rows[label(d["figure"])]
        assert change == fmt.change(d["delta"], d["delta_unit"]), d["figure"]
        assert (base, other) == (fmt.figure(d["figure"], d["baseline"]), fmt.figure(d["figure"], d["value"]))
        checked += change != ""
    assert checked >= 10
    assert f"No memory rows: {comparison['rows']['why']}." in out
    step = next(d for d in pair["figures"] if d["figure"] == "step_time_us")
    assert step["verdict"] == "better"  # the fused run's step is shorter
    # the kernels that changed most: the JSON's first, as the tab lists them
    assert "Kernels that changed most, the runs" in out
    first = pair["kernels"][0]
    assert rows[first["name"][:47] + "…"][2].endswith(fmt.us(abs(first["delta_us_per_step"])))
