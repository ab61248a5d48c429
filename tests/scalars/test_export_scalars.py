"""`tb-mfu export-scalars`: event files read back with TensorBoard's own reader, against the JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, SAMPLES
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.plugins.hparams import metadata as hp_metadata
from tensorboard.util import tensor_util

from tb_mfu_plugin.analysis.report import Device, Report, RunReport, Step, Summary, WorkerReport
from tb_mfu_plugin.cli import main
from tb_mfu_plugin.scalars.export_scalars import export_report, plan_runs, step_figures


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tb_mfu_plugin.cli", *args], capture_output=True, text=True, cwd=ROOT)


def _json(path: Path) -> dict:
    out = _cli("analyze", str(path), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _read(run_dir: Path) -> ea.EventAccumulator:
    acc = ea.EventAccumulator(str(run_dir), size_guidance={ea.TENSORS: 0})
    acc.Reload()
    return acc


def _series(acc: ea.EventAccumulator, tag: str) -> dict[int, float]:
    return {e.step: float(tensor_util.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)}


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scalars")
    for run in ("gpt_naive_attention", "gpt_checkpointing", "ddp_2gpu"):
        before = _files(SAMPLES / run)
        res = _cli("export-scalars", str(SAMPLES / run), "--out", str(out / run))
        assert res.returncode == 0, res.stderr
        assert _files(SAMPLES / run) == before  # nothing written into the logdir
    return out


@pytest.mark.parametrize("run", ["gpt_naive_attention", "gpt_checkpointing", "ddp_2gpu"])
def test_every_step_figure_equals_the_json_report(run: str, exported: Path) -> None:
    report = _json(SAMPLES / run)
    (r,) = report["runs"]
    assert len(r["workers"]) >= 1
    for w in r["workers"]:
        acc = _read(exported / run / run / w["name"])
        steps = w["steps"]
        assert _series(acc, "tb_mfu/step_time_us") == pytest.approx({s["step"]: s["dur_us"] for s in steps}, rel=1e-6)
        for key in (
            "mfu",
            "gpu_busy_share",
            "kernel_time_share",
            "sm_efficiency",
            "memcpy_time_share",
            "h2d_bytes_per_step",
            "d2h_bytes_per_step",
            "d2d_bytes_per_step",
            "sync_count_per_step",
            "host_sync_blocked_share",
            "flops_per_step",
            "idle_share",
        ):
            got = _series(acc, f"tb_mfu/{key}")
            assert got == pytest.approx({s["step"]: s[key] for s in steps}, rel=1e-6, abs=1e-12), key
        # per-step HFU and achieved TFLOP/s give back the report's figures over the steps: the steps' HFU
        # is over the traced steps, the report's over the headline's step (without the profiler's drag),
        # so each stands to its own basis's MFU as the hardware's FLOPs to the model's
        hfu = np.array(list(_series(acc, "tb_mfu/hfu").values()))
        assert len(hfu) == len(steps)
        traced_hfu = len(hfu) / np.sum(1 / hfu)
        ratio = w["flops"]["hfu"] / w["summary"]["mfu"]
        assert traced_hfu / w["summary"]["mfu_traced"] == pytest.approx(ratio, rel=1e-5)
        # the report's figure is all FLOPs over all busy time: Σ flops / Σ (flops / TFLOP/s per step)
        tflops = np.array(list(_series(acc, "tb_mfu/achieved_tflops_while_busy").values()))
        flops = np.array(list(_series(acc, "tb_mfu/flops_per_step").values()))
        assert flops.sum() / (flops / tflops).sum() == pytest.approx(w["flops"]["achieved_tflops_while_busy"], rel=1e-5)
        last = steps[-1]["step"]
        for key in ("mfu", "step_time_us", "gpu_busy_share", "sm_efficiency"):
            assert _series(acc, f"tb_mfu/summary/{key}") == pytest.approx({last: w["summary"][key]}, rel=1e-6)
        assert _series(acc, "tb_mfu/summary/hfu") == pytest.approx({last: w["flops"]["hfu"]}, rel=1e-6)
        likely = w["summary"]["mfu_range"]
        for end in ("low", "high"):  # the likely range where the headline is an estimate, none where not
            want = {last: likely[end]} if likely else {}
            assert _series(acc, f"tb_mfu/summary/mfu_{end}") == pytest.approx(want, rel=1e-6)
        # a rank of a distributed run: its job's one MFU beside its own; none on one GPU
        job = (r.get("ranks") or {}).get("job")
        if job is None:
            assert "tb_mfu/summary/job_mfu" not in acc.Tags()["tensors"]
        else:
            assert _series(acc, "tb_mfu/summary/job_mfu") == pytest.approx({last: job["mfu"]}, rel=1e-6)


def test_checkpointing_sample_has_hfu_above_mfu(exported: Path) -> None:
    acc = _read(exported / "gpt_checkpointing" / "gpt_checkpointing" / "rank0")
    mfu, hfu = _series(acc, "tb_mfu/mfu"), _series(acc, "tb_mfu/hfu")
    assert mfu.keys() == hfu.keys() and all(hfu[s] > mfu[s] * 1.05 for s in mfu)


def test_peak_memory_per_step_beside_mfu(tmp_path: Path) -> None:
    """A profile_memory=True trace: each step's peak memory (the memory block's) beside its MFU, and the
    highest in the summary; a trace without memory events has no such tag."""
    out = tmp_path / "scalars"
    assert _cli("export-scalars", str(SAMPLES / "memory_leak"), "--out", str(out)).returncode == 0
    (w,) = _json(SAMPLES / "memory_leak")["runs"][0]["workers"]
    acc = _read(out / "memory_leak" / "rank0")
    m = w["memory"]
    assert _series(acc, "tb_mfu/peak_allocated_bytes") == {s["step"]: s["peak_allocated_bytes"] for s in m["steps"]}
    assert _series(acc, "tb_mfu/peak_reserved_bytes") == {s["step"]: s["peak_reserved_bytes"] for s in m["steps"]}
    assert list(_series(acc, "tb_mfu/peak_allocated_bytes").values()) == [1419984896, 1428373504, 1436762112]
    assert _series(acc, "tb_mfu/summary/peak_allocated_bytes") == {5: m["peak_allocated_bytes"]}
    assert _series(acc, "tb_mfu/mfu").keys() == {3, 4, 5}


def test_no_memory_tag_without_memory_events(exported: Path) -> None:
    acc = _read(exported / "gpt_naive_attention" / "gpt_naive_attention" / "rank0")
    assert "tb_mfu/peak_allocated_bytes" not in acc.Tags()["tensors"]


def test_hparams_session_and_experiment_config(exported: Path) -> None:
    acc = _read(exported / "ddp_2gpu" / "ddp_2gpu" / "rank1")
    content = acc.SummaryMetadata(hp_metadata.SESSION_START_INFO_TAG).plugin_data.content
    start = hp_metadata.parse_session_start_info_plugin_data(content)
    assert start.hparams["worker"].string_value == "rank1"
    assert start.hparams["run"].string_value == "ddp_2gpu"
    assert start.hparams["device_name"].string_value == "NVIDIA H200"
    assert start.hparams["peak_tflops"].number_value == pytest.approx(989.4)
    root = _read(exported / "ddp_2gpu")
    experiment = hp_metadata.parse_experiment_plugin_data(
        root.SummaryMetadata(hp_metadata.EXPERIMENT_TAG).plugin_data.content
    )
    metrics = [m.name.tag for m in experiment.metric_infos]
    assert "tb_mfu/summary/mfu" in metrics and "tb_mfu/summary/step_time_us" in metrics
    assert "tb_mfu/summary/job_mfu" in metrics
    assert {h.name for h in experiment.hparam_infos} >= {"run", "worker", "device_name", "peak_tflops"}


def test_out_is_required_and_nothing_is_written_without_it(tmp_path: Path) -> None:
    res = _cli("export-scalars", str(SAMPLES / "gpt_naive_attention"))
    assert res.returncode == 2 and "--out" in res.stderr


def test_out_inside_the_logdir_when_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    logdir = tmp_path / "logs"
    (logdir / "run_a").mkdir(parents=True)
    src = next((SAMPLES / "tiny_mlp_launch_bound").glob("*.pt.trace.json.gz"))
    os.symlink(src, logdir / "run_a" / src.name)
    assert main(["export-scalars", str(logdir), "--out", str(logdir / "tb_mfu")]) == 0
    assert list((logdir / "tb_mfu" / "run_a" / "rank0").glob("events.out.tfevents.*.tb_mfu"))
    # a second export into the same place would draw every point twice: refused, then replaced
    assert main(["export-scalars", str(logdir), "--out", str(logdir / "tb_mfu")]) == 1
    assert "earlier export" in capsys.readouterr().err
    foreign = logdir / "tb_mfu" / "events.out.tfevents.123.host.1.0"
    foreign.write_bytes(b"")  # someone else's event file: never removed
    assert main(["export-scalars", str(logdir), "--out", str(logdir / "tb_mfu"), "--replace"]) == 0
    assert len(list((logdir / "tb_mfu" / "run_a" / "rank0").glob("events.out.tfevents.*"))) == 1
    assert foreign.exists()


def test_nothing_to_export_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w.1.pt.trace.json").write_text("{not json")
    assert main(["export-scalars", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "no analysed steps" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _worker(name: str, span: str, gpu: int, steps: list[int]) -> WorkerReport:
    metrics = dict(
        gpu_busy_share=0.5,
        kernel_time_share=0.4,
        memcpy_time_share=0.0,
        memset_time_share=0.0,
        idle_share=0.5,
        host_sync_blocked_share=0.0,
        sm_efficiency=None,
        achieved_occupancy=None,
        tensor_core_kernel_share=0.0,
        h2d_bytes_per_step=0.0,
        d2h_bytes_per_step=0.0,
        d2d_bytes_per_step=0.0,
        p2p_bytes_per_step=0.0,
        sync_count_per_step=0.0,
        kernels_per_step=1.0,
    )
    return WorkerReport(
        name=name,
        span=span,
        file=f"{name}.{span}.pt.trace.json",
        device=Device(index=gpu, name="X"),
        summary=Summary(steps=len(steps), step_time_us=10.0, **metrics),
        steps=[Step(step=s, start_us=10.0 * s, dur_us=10.0, **metrics) for s in steps],
    )


def test_run_naming_spans_and_gpus() -> None:
    report = Report(
        runs=[
            RunReport(
                name="logs/run a",
                workers=[
                    _worker("rank0", "100", 0, [3, 4, 5]),
                    _worker("rank0", "200", 0, [13, 14, 15]),  # one curve
                    _worker("rank0", "100", 1, [3, 4, 5]),  # a second GPU in the same trace
                    _worker("rank1", "100", 0, [3, 4]),
                    _worker("rank1", "300", 0, [3, 4]),  # step numbers restart
                ],
            ),
        ]
    )
    planned = {p.name: [(w.span, w.device.index if w.device else None) for w in p.workers] for p in plan_runs(report)}
    assert planned == {
        "logs/run_a/rank0-gpu0": [("100", 0), ("200", 0)],
        "logs/run_a/rank0-gpu1": [("100", 1)],
        "logs/run_a/rank1-100": [("100", 0)],
        "logs/run_a/rank1-300": [("300", 0)],
    }


def test_two_spans_share_one_curve(tmp_path: Path) -> None:
    report = Report(
        runs=[RunReport(name="run", workers=[_worker("rank0", "100", 0, [3, 4]), _worker("rank0", "200", 0, [13, 14])])]
    )
    (run,) = export_report(report, str(tmp_path))
    acc = _read(tmp_path / "run" / "rank0")
    assert sorted(_series(acc, "tb_mfu/step_time_us")) == [3, 4, 13, 14]
    assert sorted(_series(acc, "tb_mfu/summary/step_time_us")) == [4, 14]  # each span's summary at its end
    assert "tb_mfu/sm_efficiency" not in acc.Tags()["tensors"]  # None is left out, never drawn as 0
    assert run.points == 4 * len(step_figures(report.runs[0].workers[0], report.runs[0].workers[0].steps[0]))


def _post_json(url: str, body: dict) -> Any:
    import urllib.request

    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "X-XSRF-Protected": "1"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310 (loopback only)
        return json.loads(r.read())


@pytest.mark.e2e
def test_a_real_tensorboard_lists_the_scalars_and_sorts_runs_by_mfu(tmp_path: Path) -> None:
    from e2e.conftest import TensorBoard

    runs = ("gpt_naive_attention", "gpt_sdpa_fused", "tiny_mlp_launch_bound")
    logdir = tmp_path / "logs"
    logdir.mkdir()
    for run in runs:
        os.symlink(SAMPLES / run, logdir / run)
    out = tmp_path / "scalars"
    assert main(["export-scalars", str(logdir), "--out", str(out)]) == 0
    expected = {f"{r['name']}/{w['name']}": w["summary"]["mfu"] for r in _json(logdir)["runs"] for w in r["workers"]}
    tb = TensorBoard(out, tmp_path / "cache")
    try:
        tags = tb.get_json("/data/plugin/scalars/tags")
        assert set(expected) <= set(tags)
        assert all({"tb_mfu/mfu", "tb_mfu/step_time_us", "tb_mfu/sm_efficiency"} <= set(tags[r]) for r in expected)
        mfu_col = {"metric": {"group": "", "tag": "tb_mfu/summary/mfu"}, "order": "ORDER_DESC"}
        body = {
            "experimentName": "",
            "colParams": [mfu_col],
            "startIndex": 0,
            "sliceSize": 10,
            "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE", "STATUS_RUNNING"],
        }
        groups = _post_json(tb.url + "/data/plugin/hparams/session_groups", body)["sessionGroups"]
        shown = {
            g["sessions"][0]["name"]: next(
                m["value"] for m in g["metricValues"] if m["name"]["tag"] == "tb_mfu/summary/mfu"
            )
            for g in groups
        }
        assert shown == pytest.approx(expected, rel=1e-6)
        assert list(shown) == sorted(expected, key=expected.__getitem__, reverse=True)  # sorted by MFU
    finally:
        tb.stop()
