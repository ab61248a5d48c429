"""``/compare`` carries each figure's and top kernel's change, computed once by
``analysis.run.compare.deltas_against_baseline`` from the very reports the body holds: the tab's
Compare looks the pair it shows up and computes nothing."""

from __future__ import annotations

import json

import msgspec

from tb_mfu_plugin.analysis.report import RunReport
from tb_mfu_plugin.analysis.run.compare import COMPARED_FIGURES, deltas_against_baseline, rows_of_runs

from .conftest import RUN_A, RUN_B


def test_compare_body_carries_the_deltas_of_its_reports(serve, two_runs):
    s = serve(two_runs)
    s.settle()
    body = s.json(f"/compare?run={RUN_B}&run={RUN_A}")
    reports = [msgspec.convert(e["report"], RunReport) for e in body["runs"]]
    assert body["deltas"] == json.loads(msgspec.json.encode(deltas_against_baseline(reports)))
    assert body["rows"] == json.loads(msgspec.json.encode(rows_of_runs(reports)))
    keys = [(p["run"], p["worker"], p["baseline_run"], p["baseline_worker"]) for p in body["deltas"]]
    assert keys == [(RUN_B, 0, RUN_B, 0), (RUN_A, 0, RUN_A, 0), (RUN_A, 0, RUN_B, 0)]
    pair = body["deltas"][2]
    assert [d["figure"] for d in pair["figures"]] == list(COMPARED_FIGURES)
    step = next(d for d in pair["figures"] if d["figure"] == "step_time_us")
    a, b = (e["report"]["workers"][0]["summary"]["step_time_us"] for e in body["runs"])
    assert (step["baseline"], step["value"], step["delta_unit"]) == (a, b, "relative")
    assert step["verdict"] == ("better" if b < a * 0.98 else "worse" if b > a * 1.02 else "same")
    assert pair["kernels"] and all(k["verdict"] in ("better", "worse", "same") for k in pair["kernels"])
    # one run only: its own figures, nothing to compare against
    alone = s.json(f"/compare?run={RUN_A}")
    assert [(p["run"], p["baseline_run"]) for p in alone["deltas"]] == [(RUN_A, RUN_A)]
