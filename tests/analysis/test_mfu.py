"""Which ops count (once each), recompute, kernel attribution, MFU arithmetic; real traces."""

from __future__ import annotations

import glob
import gzip
import json
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from tb_mfu_plugin.analysis.device import mfu as M
from tb_mfu_plugin.analysis.flops import shapes as F
from tb_mfu_plugin.analysis.flops.count_once import count_flops
from tb_mfu_plugin.analysis.flops.detail import FlopsDetail
from tb_mfu_plugin.analysis.flops.per_window import OpFlops, flops_in_windows
from tb_mfu_plugin.analysis.report import to_json
from tb_mfu_plugin.core.palm import palm_flops_per_token
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.tables import ANNOTATION, TraceTables

try:
    from conftest import SAMPLES, fixture_path
except ImportError:  # pragma: no cover
    SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
    fixture_path = None  # type: ignore[assignment]


class Trace:
    """A tiny torch-2.x-shaped trace: ops, launches and kernels at hand-picked times."""

    def __init__(self, gpu: bool = True) -> None:
        self.events: list[dict[str, Any]] = []
        self.gpu = gpu
        self._id = 100

    def _next(self) -> int:
        self._id += 1
        return self._id

    def op(
        self,
        name: str,
        ts: float,
        dur: float,
        dims: list[Any] | None = None,
        types: list[str] | None = None,
        concrete: list[str] | None = None,
        tid: int = 1,
    ) -> int:
        ext = self._next()
        args: dict[str, Any] = {"External id": ext}
        if dims is not None:
            args["Input Dims"] = dims
            args["Input type"] = types or ["c10::BFloat16" if d else "" for d in dims]
            if concrete is not None:
                args["Concrete Inputs"] = concrete
        self.events.append(
            {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}
        )
        return ext

    def launch(
        self,
        ts: float,
        kernel: str = "sm90_xmma_gemm_bf16",
        gpu_ts: float | None = None,
        dur: float = 10.0,
        ext: int = 0,
        tid: int = 1,
    ) -> int:
        corr = self._next()
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": tid,
                "ts": ts,
                "dur": 1.0,
                "args": {"External id": ext, "correlation": corr},
            }
        )
        self.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kernel,
                "pid": 0,
                "tid": 7,
                "ts": gpu_ts if gpu_ts is not None else ts + 5.0,
                "dur": dur,
                "args": {"External id": ext, "device": 0, "stream": 7, "correlation": corr},
            }
        )
        return corr

    def step(self, n: int, ts: float, dur: float) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{n}",
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {},
            }
        )

    def tables(self, tmp_path: Path) -> TraceTables:
        doc = {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200"}], "traceEvents": self.events}
        p = tmp_path / f"t{len(list(tmp_path.iterdir()))}.pt.trace.json"
        p.write_text(json.dumps(doc))
        return decode_trace(str(p), keep_inputs=F.is_flop_op)


MM = [[64, 128], [128, 256]]
MM_FLOPS = 2 * 64 * 256 * 128
ADDMM = [[256], [64, 128], [128, 256], [], []]


def counted_names(t: TraceTables, of: OpFlops) -> list[str]:
    return [t.names[int(k)] for k in of.name]


def test_linear_counts_its_addmm_once(tmp_path: Path) -> None:
    tr = Trace()
    tr.op("aten::linear", 0, 50, [[64, 128], [256, 128], [256]])
    e = tr.op("aten::addmm", 10, 30, ADDMM)
    tr.launch(20, ext=e)
    tr.op("aten::matmul", 60, 50, [[4, 64, 128], [4, 128, 256]])
    tr.op("aten::bmm", 70, 30, [[4, 64, 128], [4, 128, 256]])
    tr.launch(80)
    t = tr.tables(tmp_path)
    of = count_flops(t)
    assert counted_names(t, of) == ["aten::addmm", "aten::bmm"]
    assert of.total == MM_FLOPS * 5
    assert of.dominant_dtype() == "bf16"
    assert of.kernel_counted.all()


def test_sdpa_counts_the_sdpa_level_like_flop_counter_mode(tmp_path: Path) -> None:
    tr = Trace()
    q = [2, 4, 128, 64]
    tr.op("aten::scaled_dot_product_attention", 0, 100, [q, q, q, [], [], [], [], []])
    tr.op("aten::_scaled_dot_product_flash_attention", 5, 90, [q, q, q, [], [], [], []])
    tr.op("aten::_flash_attention_forward", 10, 80, [[2, 128, 4, 64]] * 3 + [[], [], [], []])
    tr.launch(20, kernel="flash_fwd_kernel")
    bwd_dims = [q, q, q, q, q, [2, 4, 128], [], [], [], [], [], [], [], []]
    tr.op("aten::_scaled_dot_product_flash_attention_backward", 200, 100, bwd_dims)
    tr.op("aten::_flash_attention_backward", 210, 80, [[2, 128, 4, 64]] * 5 + [[2, 4, 128]] + [[]] * 6)
    tr.launch(220, kernel="flash_bwd_kernel")
    t = tr.tables(tmp_path)
    of = count_flops(t)
    fwd = 4 * 2 * 4 * 128 * 128 * 64
    assert counted_names(t, of) == [
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_flash_attention_backward",
    ]
    assert of.flops.tolist() == [fwd, 2.5 * fwd]
    assert of.recompute_flops.tolist() == [0, fwd / 2]  # the Q.K^T recompute of the backward
    assert of.model_flops.sum() == 3 * fwd  # PaLM: backward = 2x forward


def test_convolution_chain_counts_the_outermost(tmp_path: Path) -> None:
    tr = Trace()
    x, w = [2, 3, 16, 16], [8, 3, 3, 3]
    c9 = ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"]
    tr.op("aten::conv2d", 0, 100, [x, w, [8], [], [], [], []])
    tr.op("aten::convolution", 2, 96, [x, w, [8], [], [], [], [], [], []], None, c9)
    tr.op("aten::_convolution", 4, 92, [x, w, [8]] + [[]] * 10, None, c9 + ["False", "False", "True", "True"])
    tr.op(
        "aten::cudnn_convolution",
        6,
        88,
        [x, w] + [[]] * 7,
        None,
        ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
    )
    tr.launch(10, kernel="sm90_xmma_fprop_implicit_gemm")
    t = tr.tables(tmp_path)
    of = count_flops(t)
    assert counted_names(t, of) == ["aten::convolution"]
    assert of.total == 2 * 2 * 8 * 3 * 9 * 64


def test_only_ops_that_launched_gpu_work_count(tmp_path: Path) -> None:
    tr = Trace()
    tr.op("aten::mm", 0, 20, MM)  # ran on the CPU
    tr.op("aten::mm", 30, 20, MM)
    tr.launch(35)
    # a launch on another thread at the same moment is not this op's
    tr.op("aten::mm", 100, 20, MM, tid=1)
    tr.launch(105, tid=2)
    t = tr.tables(tmp_path)
    of = count_flops(t)
    assert of.ts.tolist() == [30]
    assert any("launched no GPU work" in n for n in of.notes)
    # the same ops in a CPU-only trace all count
    cpu = Trace(gpu=False)
    for ts in (0, 30, 100):
        cpu.op("aten::mm", ts, 20, MM)
    of = count_flops(cpu.tables(tmp_path))
    assert len(of) == 3 and not of.gpu_work_required


def test_external_id_links_an_op_to_its_kernel(tmp_path: Path) -> None:
    # legacy traces: no runtime row inside the op, but the kernel names the op's External id
    tr = Trace()
    e = tr.op("aten::mm", 0, 20, MM)
    tr.events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "volta_sgemm",
            "pid": 0,
            "tid": 7,
            "ts": 50,
            "dur": 10,
            "args": {"External id": e, "device": 0, "stream": 7, "correlation": 999},
        }
    )
    t = tr.tables(tmp_path)
    of = count_flops(t)
    assert len(of) == 1 and of.kernel_counted.all()


def test_tensor_subclass_wrapper_counts_the_local_op(tmp_path: Path) -> None:
    # DTensor: aten::mm on global shapes, then aten::mm on this rank's shard inside it
    tr = Trace()
    tr.op("aten::mm", 0, 100, [[64, 128], [128, 512]])
    tr.op("aten::mm", 40, 30, MM)
    tr.launch(45)
    # plain back-to-back siblings are not wrappers
    tr.op("aten::mm", 200, 20, MM)
    tr.launch(205)
    tr.op("aten::mm", 220, 20, MM)
    tr.launch(225)
    t = tr.tables(tmp_path)
    of = count_flops(t)
    assert of.ts.tolist() == [40, 200, 220]
    assert of.total == 3 * MM_FLOPS
    assert any("DTensor" in n for n in of.notes)


def test_activation_checkpoint_recompute_is_detected(tmp_path: Path) -> None:
    tr = Trace()
    tr.op("aten::linear", 0, 50, [[64, 128], [256, 128], [256]])  # forward
    tr.op("aten::addmm", 10, 30, ADDMM)
    tr.launch(15)
    # backward of that linear: its node recomputes the checkpointed forward first
    tr.op("autograd::engine::evaluate_function: AddmmBackward0", 100, 200)
    tr.op("AddmmBackward0", 101, 198, [[64, 256]])
    tr.op("aten::linear", 110, 40, [[64, 128], [256, 128], [256]])  # recompute
    tr.op("aten::addmm", 115, 30, ADDMM)
    tr.launch(120)
    tr.op("aten::mm", 160, 30, [[64, 256], [256, 128]])  # grad input: genuine backward
    tr.launch(165)
    tr.op("aten::mm", 200, 30, [[256, 64], [64, 128]])  # grad weight
    tr.launch(205)
    # a custom autograd.Function's backward may use matmul: not recompute
    tr.op("autograd::engine::evaluate_function: MyLinearBackward", 400, 100)
    tr.op("MyLinearBackward", 401, 98, [[64, 256]])
    tr.op("aten::matmul", 410, 40, [[64, 256], [256, 128]])
    tr.op("aten::mm", 415, 30, [[64, 256], [256, 128]])
    tr.launch(420)
    t = tr.tables(tmp_path)
    of = count_flops(t)
    assert of.checkpoint_recompute.tolist() == [False, True, False, False, False]
    assert of.recompute_flops.sum() == MM_FLOPS
    assert of.model_flops.sum() == of.total - MM_FLOPS


def test_reentrant_checkpoint_node(tmp_path: Path) -> None:
    tr = Trace()
    tr.op("autograd::engine::evaluate_function: CheckpointFunctionBackward", 0, 100)
    tr.op("CheckpointFunctionBackward", 1, 98)
    tr.op("aten::matmul", 10, 30, MM)
    tr.op("aten::mm", 12, 20, MM)
    tr.launch(15)
    of = count_flops(tr.tables(tmp_path))
    assert of.checkpoint_recompute.tolist() == [True]


def test_unattributed_kernel_time_by_launching_op(tmp_path: Path) -> None:
    tr = Trace()
    e = tr.op("aten::mm", 0, 20, MM)
    tr.launch(5, gpu_ts=100, dur=40, ext=e)
    e = tr.op("aten::native_layer_norm", 30, 20, [[64, 128]])
    tr.launch(35, kernel="layer_norm_kernel", gpu_ts=150, dur=25, ext=e)
    e = tr.op("aten::add_", 60, 10, [[64, 128], [64, 128], []])
    tr.launch(62, kernel="elementwise", gpu_ts=180, dur=5, ext=e)
    tr.launch(64, kernel="elementwise", gpu_ts=190, dur=5, ext=e)
    tr.launch(900, kernel="ncclKernel", gpu_ts=900, dur=30)  # no op around it
    t = tr.tables(tmp_path)
    of = count_flops(t)
    un = M.unattributed_kernel_time(t, of)
    assert un.kernel_us == 105 and un.attributed_us == 40 and un.unattributed_us == 65
    assert [(x.op, x.kernel_us, x.kernels) for x in un.top] == [
        ("(no op)", 30, 1),
        ("aten::native_layer_norm", 25, 1),
        ("aten::add_", 10, 2),
    ]
    assert un.unattributed_share == pytest.approx(65 / 105)
    # only the selected kernels (the pipeline selects those the steps launched: steps.launched_in_steps)
    un = M.unattributed_kernel_time(t, of, t.gpu.ts < 200.0)
    assert un.kernel_us == 75 and un.unattributed_us == 35


def test_flops_in_windows_and_summary(tmp_path: Path) -> None:
    tr = Trace()
    for s in range(3):
        base = 1000.0 * s
        tr.step(s, base, 1000)
        for k in range(s + 1):
            tr.op("aten::mm", base + 10 + 100 * k, 20, MM)
            tr.launch(base + 15 + 100 * k)
    t = tr.tables(tmp_path)
    of = count_flops(t)
    c = t.cpu
    steps = np.nonzero(c.kind == ANNOTATION)[0]
    wf = flops_in_windows(of, c.ts[steps], c.ts[steps] + c.dur[steps])
    assert wf.flops.tolist() == [MM_FLOPS, 2 * MM_FLOPS, 3 * MM_FLOPS]
    assert flops_in_windows(of, np.array([5000.0]), np.array([6000.0])).flops.tolist() == [0]
    summary = M.flops_summary(of, c.ts[steps], c.ts[steps] + c.dur[steps], M.unattributed_kernel_time(t, of))
    assert summary.flops_per_step == 2 * MM_FLOPS and summary.dtype == "bf16"
    assert summary.by_op[0].op == "aten::mm"
    assert msgspec.json.decode(to_json(summary))["flops_per_step"] == 2 * MM_FLOPS  # plain numbers, no numpy


def test_mfu_arithmetic() -> None:
    # 4.6e12 FLOPs in a 19.3 ms step on a 989.4 TFLOP/s GPU
    assert M.mfu_for(4.6042e12, 19318.4, 989.4e12) == pytest.approx(0.2409, abs=1e-4)
    assert M.mfu_for(None, 1.0, 1.0) is None and M.mfu_for(1.0, 0.0, 1.0) is None and M.mfu_for(1.0, 1.0, None) is None
    assert M.achieved_tflops_while_busy(1e12, 1e6) == pytest.approx(1.0)
    assert M.achieved_tflops_while_busy(1e12, 0) is None
    # PaLM: 6N + 12 L H Q T per token
    assert palm_flops_per_token(1e8) == 6e8
    assert palm_flops_per_token(1e8, 4, 1024, 1024) == 6e8 + 12 * 4 * 1024 * 1024


def test_legacy_conv_output_from_backward_and_inexact_fallback(tmp_path: Path) -> None:
    """torch 1.9 traces record no stride: the forward conv learns its output size from the
    backward op with the same input/weight shapes; otherwise the inexact 'same' guess."""
    tr = Trace()
    x, w, go = [32, 3, 224, 224], [64, 3, 7, 7], [32, 64, 112, 112]
    for name in ("aten::convolution", "aten::_convolution", "aten::cudnn_convolution"):
        tr.op(
            name,
            {"aten::convolution": 0, "aten::_convolution": 2, "aten::cudnn_convolution": 4}[name],
            {"aten::convolution": 96, "aten::_convolution": 92, "aten::cudnn_convolution": 88}[name],
            [x, w] + [[]] * 7,
            ["float", "float"] + [""] * 7,
        )
    tr.launch(10)
    tr.op("aten::cudnn_convolution_backward", 200, 100, [x, go, w] + [[]] * 8, ["float"] * 3 + [""] * 8)
    tr.op("aten::cudnn_convolution_backward_weight", 210, 40, [[], go, x] + [[]] * 7, ["", "float", "float"] + [""] * 7)
    tr.launch(215)
    t = tr.tables(tmp_path)
    of = count_flops(t)
    one = 2 * 32 * 64 * 3 * 49 * 112 * 112
    assert counted_names(t, of) == ["aten::cudnn_convolution", "aten::cudnn_convolution_backward"]
    # forward learnt 112x112; backward: no *_backward_input child -> grad_weight only
    assert of.flops.tolist() == [one, one]
    assert of.exact.all()


# ---------------------------------------------------------------- real traces


def test_legacy_resnet50_fixture_matches_flop_counter_figure() -> None:
    if fixture_path is None:
        pytest.skip("conftest not importable")
    d = fixture_path("torch_tb_profiler_samples", "resnet50_num_workers_0")
    f = sorted(glob.glob(str(d / "*.pt.trace.json.gz")))[0]
    t = decode_trace(f, keep_inputs=F.is_flop_op)
    of = count_flops(t)
    c = t.cpu
    steps = np.nonzero(
        (c.kind == ANNOTATION) & np.isin(c.name, [i for i, n in enumerate(t.names) if n.startswith("ProfilerStep#")])
    )[0]
    wf = flops_in_windows(of, c.ts[steps], c.ts[steps] + c.dur[steps])
    # FlopCounterMode on torchvision ResNet-50 fwd+bwd at batch 64 (sample_traces/resnet50_bf16,
    # flops_by_op: convolution 523153440768 + convolution_backward 1031201095680 + addmm
    # 262144000 + mm 524288000); this 2021 V100 trace runs batch 32, without Concrete Inputs.
    assert np.all(wf.flops == (523153440768 + 1031201095680 + 262144000 + 524288000) / 2)
    assert of.dominant_dtype() == "fp32"


def _ground_truth_runs() -> list[Path]:
    return sorted(p.parent for p in SAMPLES.glob("*/ground_truth.json"))


@pytest.mark.parametrize("run", _ground_truth_runs(), ids=lambda p: p.name)
def test_sample_traces_within_two_percent_of_flop_counter_mode(run: Path) -> None:
    gt = json.loads((run / "ground_truth.json").read_text())
    per_rank = {r["rank"]: r["flops_per_step"] for r in gt.get("per_rank", [])}
    files = sorted(run.glob("*.pt.trace.json*"))
    assert files
    for f in files:
        rank = int(f.name.split(".")[0].removeprefix("rank") or 0)
        want = per_rank.get(rank, gt["flops_per_step"])
        t = decode_trace(str(f), keep_inputs=F.is_flop_op)
        of = count_flops(t)
        c = t.cpu
        codes = [i for i, n in enumerate(t.names) if n.startswith("ProfilerStep#")]
        steps = np.nonzero((c.kind == ANNOTATION) & np.isin(c.name, codes))[0]
        wf = flops_in_windows(of, c.ts[steps], c.ts[steps] + c.dur[steps])
        assert len(wf.flops) == gt.get("steps_profiled", len(wf.flops))
        if want == 0:  # a workload with no matmul (low_sm_efficiency): nothing to count
            assert np.all(wf.flops == 0), (f.name, wf.flops)
            continue
        if (gt.get("model") or {}).get("cuda_graph"):
            # a CUDA graph replay records no aten ops: there are no shapes to count FLOPs from
            assert np.all(wf.flops == 0), (f.name, wf.flops)
            continue
        assert np.all(np.abs(wf.flops / want - 1) < 0.02), (f.name, wf.flops, want)


def test_cpu_trace_matches_flop_counter_mode(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
    lin = torch.nn.Linear(16, 32)
    x = torch.randn(2, 3, 16, 16)
    t = torch.randn(2, 5, 16, requires_grad=True)

    def step() -> None:
        y = conv(x).sum() + lin(t).sum()
        att = torch.softmax(t @ t.transpose(1, 2), -1) @ t
        (y + att.sum() + torch.baddbmm(torch.zeros(2, 5, 5), t, t.transpose(1, 2)).sum()).backward()

    with FlopCounterMode(display=False) as fc:
        step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
        step()
    path = tmp_path / "cpu.pt.trace.json"
    p.export_chrome_trace(str(path))
    of = count_flops(decode_trace(str(path), keep_inputs=F.is_flop_op))
    assert of.total == fc.get_total_flops()
    assert not of.gpu_work_required


def test_gzip_trace_roundtrip(tmp_path: Path) -> None:
    tr = Trace()
    tr.op("aten::mm", 0, 20, MM)
    tr.launch(5)
    doc = {"traceEvents": tr.events}
    p = tmp_path / "x.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    of = count_flops(decode_trace(str(p), keep_inputs=F.is_flop_op))
    assert of.total == MM_FLOPS


def test_report_hook_fills_mfu_and_uses_the_sidecar(tmp_path: Path) -> None:
    run = SAMPLES / "gpt_sdpa_fused"
    if not (run / "ground_truth.json").exists():
        pytest.skip("sample traces not available")
    from tb_mfu_plugin.analysis.options import AnalysisOptions
    from tb_mfu_plugin.running.pipeline import analyze_path

    gt = json.loads((run / "ground_truth.json").read_text())
    for f in run.glob("*.pt.trace.json*"):
        (tmp_path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "tb_mfu.json").write_text(
        json.dumps(
            {"model": {"n_params": 83941376, "n_layers": 4, "d_model": 1024, "seq_len": 1024, "tokens_per_step": 8192}}
        )
    )
    w = analyze_path(str(tmp_path), AnalysisOptions()).runs[0].workers[0]
    assert w.error is None and w.summary is not None and w.device is not None and w.flops is not None
    assert w.summary.flops_per_step == pytest.approx(gt["flops_per_step"], rel=1e-6)
    assert w.device.peak_flops == pytest.approx(989.4e12) and w.device.dtype == "bf16"
    # the traced steps' MFU = FlopCounterMode FLOPs / traced step time / peak, over the analysed steps;
    # the headline is over the step estimated without the profiler's host cost
    total_us = sum(s.dur_us for s in w.steps)
    want = gt["flops_per_step"] * len(w.steps) / (total_us * 1e-6) / 989.4e12
    assert w.summary.mfu_traced == pytest.approx(want, rel=1e-6)
    assert w.summary.step_time_unprofiled_us is not None
    assert w.summary.mfu == pytest.approx(gt["flops_per_step"] / (w.summary.step_time_unprofiled_us * 1e-6) / 989.4e12)
    assert all(s.mfu is not None and s.flops_per_step for s in w.steps)
    f = w.flops
    assert f.headline_source is not None and f.headline_source.startswith("shapes")
    assert f.hfu == pytest.approx(w.summary.mfu)
    # PaLM model FLOPs (sidecar) vs shapes: the difference is the SDPA backward's Q.K^T recompute
    assert f.user_flops_per_step == gt["analytic_flops_per_step"]
    assert f.mfu_model is not None and f.hfu is not None and f.mfu_model < f.hfu
    assert f.mfu_user == pytest.approx(f.mfu_model, rel=0.002)
    assert f.model_flops_per_step == pytest.approx(f.user_flops_per_step, rel=0.002)
    assert f.unattributed_kernel_share is not None and 0 < f.unattributed_kernel_share < 1 and f.unattributed_top
    assert msgspec.json.decode(to_json(f), type=FlopsDetail) == f  # the typed block round-trips its JSON
    # the flag beats the trace and the sidecar for the headline
    w = analyze_path(str(tmp_path), AnalysisOptions(flops_per_step=1e12)).runs[0].workers[0]
    assert w.summary is not None and w.summary.flops_per_step == 1e12 and w.flops is not None
    assert w.flops.headline_source == "--flops-per-step"
