"""The notebook API (tm.analyze, tm.Report.from_json) on real traces: columns, dtypes, values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, SAMPLES, fixture_path

import tb_mfu_plugin as tm
from tb_mfu_plugin.analysis import fmt
from tb_mfu_plugin.notebook import frames

ACCESSORS = {
    "workers": frames.WORKERS,
    "steps": frames.STEPS,
    "kernels": frames.KERNELS,
    "copies": frames.COPIES,
    "syncs": frames.SYNCS,
    "findings": frames.FINDINGS,
    "evidence": frames.EVIDENCE,
    "ranks": frames.RANKS,
    "collectives": frames.COLLECTIVES,
    "critical_path": frames.CRITICAL_PATH,
    "whatif": frames.WHATIF,
    "memory": frames.MEMORY,
}
BREAKDOWN = [
    "breakdown_kernel",
    "breakdown_memcpy",
    "breakdown_memset",
    "breakdown_idle_after_sync",
    "breakdown_idle_other",
]


def _cli_json(path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(path), "--json"],
        capture_output=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def naive() -> tm.Report:
    return tm.analyze(SAMPLES / "gpt_naive_attention")


@pytest.fixture(scope="module")
def ddp() -> tm.Report:
    return tm.analyze(str(SAMPLES / "ddp_2gpu"))


def _check_schema(df: pd.DataFrame, schema: dict[str, str], extra: list[str] = ()) -> None:  # type: ignore[assignment]
    assert list(df.columns) == [*schema, *extra]
    for col, dtype in schema.items():
        empty = pd.Series([], dtype=object) if dtype == "object" else pd.Series(pd.array([], dtype=dtype))
        assert df[col].dtype == empty.dtype, col
    for col in extra:
        assert df[col].dtype == "float64", col


@pytest.mark.parametrize("name", sorted(ACCESSORS))
def test_every_accessor_has_its_documented_columns_and_dtypes(name: str, naive: tm.Report, ddp: tm.Report) -> None:
    for r in (naive, ddp):
        df = getattr(r, name)()
        _check_schema(df, ACCESSORS[name], BREAKDOWN if name in ("steps", "workers") else [])


def test_steps_are_the_json_reports_steps(naive: tm.Report) -> None:
    data = _cli_json(SAMPLES / "gpt_naive_attention")
    (w,) = data["runs"][0]["workers"]
    df = naive.steps()
    assert len(df) == len(w["steps"]) == 2  # the steady state: step 3 is a warm-up step, left out
    assert df["step"].tolist() == [s["step"] for s in w["steps"]]
    for key in ("dur_us", "start_us", "mfu", "gpu_busy_share", "sm_efficiency", "d2d_bytes_per_step"):
        assert df[key].tolist() == pytest.approx([s[key] for s in w["steps"]], rel=1e-12), key
    assert df["breakdown_idle_other"].tolist() == pytest.approx([s["breakdown"]["idle_other"] for s in w["steps"]])
    assert set(df["run"]) == {"gpt_naive_attention"} and set(df["worker"]) == {"rank0"}
    assert df["gpu"].tolist() == [0, 0]


def test_critical_path_and_whatif_are_the_json_reports(naive: tm.Report) -> None:
    """One row per modelled step, its classes adding up to the step; one row per re-timing, the
    combined one last and applying every panel finding."""
    (w,) = _cli_json(SAMPLES / "gpt_naive_attention")["runs"][0]["workers"]
    cp, wi = w["critical_path"], w["whatif"]
    df = naive.critical_path()
    assert df["step"].tolist() == [s["step"] for s in cp["steps"]]
    assert df[list(cp["classes"])].sum(axis=1).tolist() == pytest.approx(df["dur_us"].tolist(), rel=1e-9)
    for c in cp["classes"]:
        assert df[c].tolist() == pytest.approx([s["us"].get(c, 0.0) for s in cp["steps"]]), c
    wf = naive.whatif()
    assert len(wf) == len(wi["cases"]) + 1 and wf["combined"].tolist() == [False] * len(wi["cases"]) + [True]
    assert wf["step_us"].tolist() == pytest.approx([c["step_us"] for c in [*wi["cases"], wi["combined"]]])
    assert [len(x) for x in wf["findings"][:-1]] == [bin(c["mask"]).count("1") for c in wi["cases"]]


def test_workers_copies_syncs_kernels_findings_match_the_json(naive: tm.Report) -> None:
    (w,) = _cli_json(SAMPLES / "gpt_naive_attention")["runs"][0]["workers"]
    row = naive.workers().iloc[0]
    assert row["mfu"] == pytest.approx(w["summary"]["mfu"])
    assert row["hfu"] == pytest.approx(w["flops"]["hfu"])
    assert row["combined_gain_us_per_step"] == w["combined_gain_us_per_step"] > 0
    assert row["combined_gain_share"] == w["combined_gain_share"]
    likely, steps = w["summary"]["mfu_range"], w["summary"]["step_time_unprofiled_range_us"]
    assert [row["mfu_low"], row["mfu_high"]] == [likely["low"], likely["high"]]
    assert [row["step_time_unprofiled_low_us"], row["step_time_unprofiled_high_us"]] == [steps["low"], steps["high"]]
    assert row["device_name"] == "NVIDIA H200" and row["num_sms"] == 132 and row["dtype"] == "bf16"
    assert pd.isna(row["error"])
    copies = naive.copies()
    assert copies[["direction", "memory"]].values.tolist() == [[c["direction"], c["memory"]] for c in w["copies"]]
    assert copies["bytes_per_step"].tolist() == [c["bytes_per_step"] for c in w["copies"]]
    syncs = naive.syncs()
    assert syncs["root_op"].tolist() == [s["root_op"] for s in w["syncs"]]  # aten::item, aten::to
    assert syncs["blocked_us_per_step"].sum() == pytest.approx(sum(s["blocked_us_per_step"] for s in w["syncs"]))
    kernels = naive.kernels()
    assert len(kernels) == len(w["top_kernels"]) and kernels["count"].sum() == sum(k["count"] for k in w["top_kernels"])
    findings = naive.findings()
    assert findings["id"].tolist() == [f["id"] for f in w["findings"]]
    assert "naive_attention" in set(findings["id"])
    assert isinstance(findings["evidence"].iloc[0], dict)


def test_evidence_has_each_value_of_each_finding_in_its_unit(naive: tm.Report) -> None:
    """One row per value of each finding's evidence: its JSON path, unit and the text every face
    shows (a time through the time formatter, a share as a percentage)."""
    (w,) = _cli_json(SAMPLES / "gpt_naive_attention")["runs"][0]["workers"]
    ev = naive.evidence()
    assert list(dict.fromkeys(zip(ev["id"], ev["subject"].fillna(""), strict=True))) == [
        (f["id"], f["subject"] or "") for f in w["findings"]
    ]
    att = ev[ev["id"] == "naive_attention"].set_index("path")
    (f,) = [f for f in w["findings"] if f["id"] == "naive_attention"]
    assert att.loc["cost_us_per_step", "unit"] == "time" and att.loc["cost_share", "unit"] == "share"
    assert att.loc["cost_us_per_step", "text"] == fmt.us(f["evidence"]["cost_us_per_step"])
    assert att.loc["whatif.unprofiled.gain_share", "text"] == fmt.pct(
        f["evidence"]["whatif"]["unprofiled"]["gain_share"]
    )
    assert att.loc["kernels[0].name", "value"] == f["evidence"]["kernels"][0]["name"]
    assert "note" not in att.index


def test_distributed_run_has_ranks_and_collectives(ddp: tm.Report) -> None:
    ranks = ddp.ranks()
    assert ranks["rank"].tolist() == [0, 1]
    assert ranks["straggler"].sum() == 1  # rank1 is the one rank0 waits for in this sample
    assert ranks.loc[ranks["straggler"], "worker"].item() == "rank1"
    # the job's one MFU on both rows: over rank 1's step, the shorter estimate, so rank 1's own
    job = ddp.report.runs[0].ranks.job
    assert job is not None and (ranks["job_mfu"] == job.mfu).all()
    assert ranks.loc[ranks["worker"] == "rank1", "mfu"].item() == pytest.approx(job.mfu)
    coll = ddp.collectives()
    assert set(coll["collective"]) == {"allreduce"} and (coll["kernel_us_per_step"] > 0).all()
    assert coll["worker"].tolist() == ["rank0", "rank1"] and set(coll["group"]) == {"default_pg"}
    # the same transfer seen from both ranks, once the wait for the straggler is taken out
    assert coll["busbw_gbps"].max() / coll["busbw_gbps"].min() < 1.01
    assert ranks.loc[ranks["worker"] == "rank1", "clock_shift_us"].abs().item() < 100
    steps = ddp.steps()
    assert sorted(set(steps["worker"])) == ["rank0", "rank1"] and sorted(set(steps["gpu"])) == [0, 1]


def test_single_gpu_run_has_empty_ranks_and_collectives_with_columns(naive: tm.Report) -> None:
    for df, schema in ((naive.ranks(), frames.RANKS), (naive.collectives(), frames.COLLECTIVES)):
        assert df.empty
        _check_schema(df, schema)


def test_memory_is_the_json_reports_memory_steps(tmp_path: Path) -> None:
    """memory(): a row per analysed step of a profile_memory=True trace, the JSON's values; the same
    from the JSON file; no rows without memory events (its columns and dtypes all the same)."""
    r = tm.analyze(SAMPLES / "gpt_memory_checkpointing")
    df = r.memory()
    _check_schema(df, frames.MEMORY)
    data = _cli_json(SAMPLES / "gpt_memory_checkpointing")
    m = data["runs"][0]["workers"][0]["memory"]
    assert df["peak_allocated_bytes"].tolist() == [s["peak_allocated_bytes"] for s in m["steps"]]
    assert df["peak_phase"].tolist() == [s["peak_phase"] for s in m["steps"]] == ["backward"] * 3
    assert (df["device_total_bytes"] == m["device_total_bytes"]).all()
    assert (df["batch_factor"] == m["headroom"]["batch_factor"]).all()
    path = tmp_path / "r.json"
    r.to_json(path)
    pd.testing.assert_frame_equal(tm.Report.from_json(path).memory(), df)


def test_from_json_gives_the_same_frames(naive: tm.Report, tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(
        subprocess.run(
            [sys.executable, "-m", "tb_mfu_plugin.cli", "analyze", str(SAMPLES / "gpt_naive_attention"), "--json"],
            capture_output=True,
            check=True,
            cwd=ROOT,
        ).stdout
    )
    again = tm.Report.from_json(path)
    for name in ACCESSORS:
        pd.testing.assert_frame_equal(getattr(naive, name)(), getattr(again, name)(), obj=name)


def test_from_json_roundtrip_of_a_distributed_run(ddp: tm.Report, tmp_path: Path) -> None:
    ddp.to_json(tmp_path / "ddp.json")
    again = tm.Report.from_json(tmp_path / "ddp.json")
    assert again.report == ddp.report  # every typed block, its optional keys included, comes back as it was
    for name in ACCESSORS:
        pd.testing.assert_frame_equal(getattr(ddp, name)(), getattr(again, name)(), obj=name)


def test_from_json_names_the_file_when_it_is_not_a_report(tmp_path: Path) -> None:
    bad = tmp_path / "compare.json"
    bad.write_text('{"schema_version": 1, "runs": "nope"}')
    with pytest.raises(ValueError, match=r"compare\.json: not a tb-mfu analyze --json report"):
        tm.Report.from_json(bad)


def test_a_bad_file_is_a_row_with_its_error(tmp_path: Path) -> None:
    (tmp_path / "w.1.pt.trace.json").write_text("{not json")
    r = tm.analyze(tmp_path)
    workers = r.workers()
    assert len(workers) == 1 and "w.1.pt.trace.json" in workers["file"].iloc[0]
    assert isinstance(workers["error"].iloc[0], str) and workers["error"].iloc[0]
    assert r.steps().empty and list(r.steps().columns) == list(frames.STEPS)


def test_missing_path_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such file"):
        tm.analyze(tmp_path / "absent")


def test_third_party_v100_trace() -> None:
    run = fixture_path("torch_tb_profiler_samples", "resnet50_num_workers_0")
    r = tm.analyze(run)
    steps = r.steps()
    assert len(steps) > 0 and (steps["dur_us"] > 0).all()
    assert r.workers()["device_name"].str.contains("V100").all()
    _check_schema(r.kernels(), frames.KERNELS)


def test_import_is_light_and_the_api_is_lazy() -> None:
    code = (
        "import sys, tb_mfu_plugin as tm; assert 'pandas' not in sys.modules, 'pandas'; "
        "assert 'tb_mfu_plugin.notebook' not in sys.modules; tm.Report; "
        "assert 'pandas' not in sys.modules, 'pandas after Report'; print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    with pytest.raises(AttributeError):
        tm.no_such_thing  # noqa: B018
