"""Findings on real traces: the H200 sample runs (each rule fires on the run built to show it
and stays silent on the clean one) and third-party traces, whose findings are written down here.
Every report also passes ``check_report`` (sound gains, a waterfall that adds up)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES, fixture_path, load_module, validation_folder

from tb_mfu_plugin.analysis.device.devices import gpu_devices
from tb_mfu_plugin.analysis.flops import attention_chains
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.diagnosis import DEFAULT
from tb_mfu_plugin.diagnosis.sync_subjects import GRAD_SCALER_STEP
from tb_mfu_plugin.reporting.device import device_report
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.tables import KERNEL, TraceTables

from .helpers import KEEP, check_report


@functools.cache
def _decoded(path: str) -> TraceTables:
    return decode_trace(path, keep_inputs=lambda n: n in KEEP)


@functools.cache
def _reports(path: str) -> tuple[WorkerReport, ...]:
    tables = _decoded(path)
    out = []
    for d in gpu_devices(tables):
        out.append(device_report(tables, d, AnalysisOptions(), DEFAULT))
    return tuple(out)


def _sample(run: str, rank: int = 0) -> WorkerReport:
    d = SAMPLES / run
    files = sorted(d.glob(f"rank{rank}.*.pt.trace.json.gz")) if d.is_dir() else []
    if not files:
        pytest.skip(f"sample trace not recorded: {d}")
    (rep,) = _reports(str(files[0]))
    check_report(rep)
    return rep


def _ids(rep: WorkerReport) -> set[str]:
    return {f.id for f in rep.findings}


def _find(rep: WorkerReport, rule: str) -> list[dict]:
    return [f for f in rep.findings if f.id == rule]


# --------------------------------------------------------------------------- H200 sample runs


def test_gpt_naive_attention() -> None:
    rep = _sample("gpt_naive_attention")
    assert {"sync_point", "naive_attention", "unfused_optimizer"} <= _ids(rep)
    # 3 syncs a step: loss.item() and the two blocking pageable .to(device) copies
    syncs = {f.evidence.call: f.evidence.count_per_step for f in _find(rep, "sync_point")}
    assert syncs["tensor.item()"] == 1
    (h2d,) = [v for k, v in syncs.items() if "host-to-device" in k]
    assert h2d == 2
    # AdamW(foreach=False) calls aten::item on CPU step counters 69 times a step: not syncs
    assert sum(syncs.values()) == 3
    (att,) = _find(rep, "naive_attention")
    ev = att.evidence
    assert ev.forward_per_step == 4 and ev.backward_per_step == 4  # 4 layers
    assert ev.four_d is True and ev.matmul_input_dims == [[8, 16, 1024, 64], [8, 16, 64, 1024]]
    assert att.severity == "high"
    (opt,) = _find(rep, "unfused_optimizer")
    assert opt.evidence.optimizer == ["AdamW"]
    assert opt.evidence.multi_tensor_kernel_share == 0
    # the headline gains are without the profiler (issue 33): there the attention chain's is the
    # largest; on the profiled step, host-bound under the profiler, the per-parameter optimizer's was
    assert rep.findings[0].id == "naive_attention"
    whatifs = [(f.id, getattr(f.evidence, "whatif", None)) for f in rep.findings]
    profiled = {i: w.profiled_gain_us_per_step for i, w in whatifs if w is not None}
    assert max(profiled, key=profiled.__getitem__) == "unfused_optimizer"


def test_gpt_sdpa_fused_is_clean_of_what_it_fixed() -> None:
    rep = _sample("gpt_sdpa_fused")
    assert not {"naive_attention", "unfused_optimizer"} & _ids(rep)
    assert not [f for f in _find(rep, "sync_point") if ".item()" in f.evidence.call]
    assert "sync_point" not in _ids(rep)  # no syncs at all in this run


def test_gpt_compile() -> None:
    rep = _sample("gpt_compile")
    assert not {"naive_attention", "unfused_optimizer", "sync_point", "launch_bound"} & _ids(rep)
    # only the eager loss (log_softmax + nll) is left unfused by torch.compile
    (f,) = _find(rep, "unfused_elementwise")
    assert f.evidence.runs_per_step == 1


def test_tiny_mlp_launch_bound() -> None:
    rep = _sample("tiny_mlp_launch_bound")
    assert "launch_bound" in _ids(rep)
    assert rep.findings[0].id == "launch_bound"
    assert "sync_point" not in _ids(rep)  # its aten::item calls are on CPU step counters
    assert "unfused_optimizer" in _ids(rep)  # AdamW(foreach=False)


def test_tiny_mlp_cuda_graph_is_not_launch_bound() -> None:
    """The same MLP with its whole step replayed from one CUDA graph (one cudaGraphLaunch -> 492
    kernels a step): the host launched one graph, so launch_bound must not fire and nothing may
    advise CUDA Graphs; the finding left is about the number of kernels."""
    rep = _sample("tiny_mlp_cuda_graph")
    gt = json.loads((SAMPLES / "tiny_mlp_cuda_graph" / "ground_truth.json").read_text())
    la = rep.launches
    assert la is not None and rep.summary is not None
    assert la.graph_launches_per_step == gt["expected"]["graph_launches_per_step"] == 1
    assert la.graph_kernels_per_step == la.kernels_per_step == 492
    assert "launch_bound" not in _ids(rep) and gt["expected"]["launch_bound"] is False
    (f,) = _find(rep, "tiny_kernels_in_graphs")
    assert f.evidence.graph_kernels_per_step == 492 and f.evidence.median_kernel_us < 2
    for g in rep.findings:
        assert "capture the step with CUDA Graphs" not in g.recommendation
        assert "make_graphed_callables" not in g.recommendation
    idle = {e.id: e.us_per_step for e in rep.waterfall if e.group == "idle"}
    # the replay's inner gaps are the graph's: what is left as launch gaps is a sliver of the step
    assert idle["idle_graph"] == pytest.approx(f.evidence.whatif.rule_gain_us_per_step, abs=0.1)
    assert idle["idle_launch"] < 0.01 * rep.waterfall[0].us_per_step
    eager = _sample("tiny_mlp_launch_bound")
    assert eager.launches is not None and eager.launches.graph_launches_per_step == 0
    assert "tiny_kernels_in_graphs" not in _ids(eager)


def test_pageable_copy_loop() -> None:
    rep = _sample("pageable_copy_loop")
    # its copies run with no kernel alongside and are all pageable: one finding, with both levers
    assert "pageable_memcpy" in _ids(rep) and "memcpy_bound" not in _ids(rep)
    (f,) = _find(rep, "pageable_memcpy")
    assert f.evidence.bytes_per_step == 67191808 + 16777216
    assert f.evidence.with_no_kernel_share > 0.99
    assert "pin_memory=True" in f.recommendation and "prefetch the next batch on a side stream" in f.recommendation
    # 6 blocking copies: 5 host-to-device .to(device) and the copy_ into a pageable host tensor
    counts = sorted(s.evidence.count_per_step for s in _find(rep, "sync_point"))
    assert counts == [1, 5]


COMPILED = ["gpt_compile", "gpt_compile_reduce_overhead", "gpt_flex_attention", "gpt_flex_attention_full"]
# What a fix says when it tells a run to start compiling; a compiled run hears none of these.
TO_COMPILE = (
    "`torch.compile(model)` (Inductor",
    "`torch.compile` the model",
    "via `torch.compile`)",
    "(`torch.compile`)",
    "with `torch.compile`",
)


@pytest.mark.parametrize("run", COMPILED)
def test_a_compiled_run_is_not_told_to_torch_compile(run: str) -> None:
    """Its elementwise chains are the eager loss outside the compiled graphs: the fix says so. No
    other finding (GPU idle between kernels, launches, the roofline, SM efficiency) tells it to
    compile either: only what compiling left out, or another mode."""
    rep = _sample(run)
    (f,) = _find(rep, "unfused_elementwise")
    assert f.recommendation.startswith("The run already uses torch.compile")
    assert "Torch-Compiled Region" in f.evidence.compiled_regions
    for g in rep.findings:
        assert not any(words in g.recommendation for words in TO_COMPILE), (g.id, g.recommendation)


def test_every_fix_that_says_compile_has_a_compiled_variant() -> None:
    """The rules choose the variant on the trace's compiled regions (rules.evidence.compiled)."""
    from tb_mfu_plugin.diagnosis.registry import RULES

    told = []
    for r in RULES:
        for key, text in r.fixes.items():
            if key.endswith("compiled") or not any(words in text for words in TO_COMPILE):
                continue
            told.append(r.id)
            assert (key + "_compiled" if key else "compiled") in r.fixes, (r.id, key)
    assert {"gpu_idle", "launch_bound", "tiny_kernels_in_graphs", "below_roofline", "low_sm_efficiency"} <= set(told)


def test_resnet50_bf16_uses_tensor_cores() -> None:
    rep = _sample("resnet50_bf16")
    assert not {"no_tensor_cores", "dataloader_stall", "sync_point", "pageable_memcpy"} & _ids(rep)


def test_fp32_no_tensor_cores_evidence_lists_the_cuda_core_kernels() -> None:
    rep = _sample("fp32_no_tensor_cores")
    (f,) = _find(rep, "no_tensor_cores")
    ev = f.evidence
    assert ev.non_tensor_core_share_of_matmul == pytest.approx(1.0) and ev.unknown_core_us_per_step == 0
    assert ev.basis == ["CUDA-core kernel names (FFMA/SIMT/SGEMM/scudnn/Winograd/GEMV)"]
    assert ev.kernels and all(k.core_class == "cuda-core" and k.dtype == "fp32" for k in ev.kernels)
    assert {k.family for k in ev.kernels} == {"FFMA / SIMT GEMMs (cuBLAS, CUTLASS, MAGMA)"}
    assert any("simt_sgemm" in k.name for k in ev.kernels) and any("_ffma_" in k.name for k in ev.kernels)


@pytest.mark.parametrize(
    ("run", "ranks"), [("ddp_2gpu", 2), ("fsdp2_2gpu", 2), ("tp_2gpu", 2), ("ddp_4gpu", 4), ("tp_4gpu", 4)]
)
def test_multi_gpu_runs(run: str, ranks: int) -> None:
    for r in range(ranks):
        rep = _sample(run, r)
        # collectives use few blocks by design: they are not a low-SM-efficiency problem
        for f in _find(rep, "low_sm_efficiency"):
            assert not any("nccl" in k.name.lower() for k in f.evidence.kernels)
        assert not {"naive_attention", "unfused_optimizer", "sync_point"} & _ids(rep)
    if run == "tp_2gpu":
        # DTensor dispatch makes TP CPU-bound: rank 1's GPU waits for its host most of the step
        assert _sample(run, 1).findings[0].id == "gpu_idle"


# --------------------------------------------------------------------------- third-party traces

# What each trace gives (rule ids), checked by hand against the trace:
THIRD_PARTY = {
    # ResNet-50 fp32 on a V100, num_workers=0: the GPU waits ~60 ms a step on the in-process
    # DataLoader, every conv/GEMM is SIMT fp32, the batch is copied from pageable memory with a
    # blocking .to(device), SGD runs per parameter (483 kernels a step).
    "torch_tb_profiler_samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz": {
        "dataloader_stall",
        "no_tensor_cores",
        "unfused_elementwise",
        "unfused_optimizer",
        "pageable_memcpy",
        "sync_point",
    },
    # num_workers=4: no DataLoader stall any more; the host (launching ~1.5k kernels a step) is the limit.
    "torch_tb_profiler_samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz": {
        "launch_bound",
        "no_tensor_cores",
        "unfused_elementwise",
        "unfused_optimizer",
        "pageable_memcpy",
        "sync_point",
    },
    # V100, ~3.9k kernels a step (7.5k under 5 µs in the trace), GPU idle 45 % in short gaps.
    "hta_test_data/df_index_resolver/df_index_resolver.json.gz": {
        "launch_bound",
        # one 71 ms all-reduce a step that no compute overlaps
        "exposed_communication",
        "no_tensor_cores",
        "unfused_elementwise",
        "unfused_optimizer",
        "small_copies",
        # profile_memory=True (issue 25): 19 % of the 32 GB at the peak, so the batch could grow ~10x
        # within 90 % of the device while the run is launch-bound...
        "memory_headroom",
        # ...and at the peak the allocator holds 6.15 GB (48 % of what it reserved) that no tensor uses
        "allocator_fragmentation",
    },
    # Sampled ranks of a recommendation model: bmm and softmax ops exist but form no attention chain
    # (the softmax feeds a 2-D matmul [[2048, 2], [2, 1]]); the GPU waits on the host and on NCCL.
    # ranks 0 and 1 of 128: NCCL SendRecv (pipeline stages) ~170 ms a step with no compute alongside.
    # No no_tensor_cores: the GEMMs are TF32 CUTLASS tensor-op kernels; the fp32 ampere_sgemm ones
    # take ~6.3 ms of a 615 ms step (1 %), and the FBGEMM embedding kernels are not matmuls.
    "hta_test_data/trace_filter/sampled_rank-0.json.gz": {"gpu_idle", "exposed_communication"},
    "hta_test_data/trace_filter/sampled_rank-1.json.gz": {"gpu_idle", "exposed_communication"},
    # Explicit torch.cuda.Event.synchronize() calls, 8 a step.
    "hta_test_data/nccl_parser_config/nccl_data.json.gz": {"gpu_idle", "sync_point"},
    "hta_test_data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": {
        "no_tensor_cores",
        "unfused_elementwise",
        "small_copies",
    },
    "hta_test_data/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz": {
        "gpu_idle",
        "sync_point",
        "pageable_memcpy",
    },
    "hta_test_data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz": {"gpu_idle"},
}


@pytest.mark.parametrize("rel", sorted(THIRD_PARTY))
def test_third_party_findings(rel: str) -> None:
    path = fixture_path(*rel.split("/"))
    (rep,) = _reports(str(path))
    check_report(rep)
    assert _ids(rep) == THIRD_PARTY[rel]


def test_resnet_num_workers_0_details() -> None:
    path = fixture_path("torch_tb_profiler_samples", "resnet50_num_workers_0", "worker0.1623143089861.pt.trace.json.gz")
    (rep,) = _reports(str(path))
    assert rep.findings[0].id == "dataloader_stall"
    dl = rep.findings[0].evidence
    assert dl.single_process is True and dl.ops == ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]
    (tc,) = _find(rep, "no_tensor_cores")
    assert tc.evidence.non_tensor_core_share_of_matmul == 1
    assert "float16" in tc.recommendation and "GradScaler" in tc.recommendation  # V100: fp16 AMP
    (s,) = _find(rep, "sync_point")
    assert "host-to-device" in s.evidence.call and s.evidence.count_per_step == 2


def test_df_index_resolver_tiny_kernels() -> None:
    path = fixture_path("hta_test_data", "df_index_resolver", "df_index_resolver.json.gz")
    t = _decoded(str(path))
    k = t.gpu.kind == KERNEL
    assert 7000 < int((t.gpu.dur[k] < 5).sum()) < 8000  # ~7.5k kernels under 5 µs
    (rep,) = _reports(str(path))
    assert rep.findings[0].id == "launch_bound"


def test_trace_filter_has_bmm_and_softmax_but_no_attention_chain() -> None:
    path = fixture_path("hta_test_data", "trace_filter", "sampled_rank-0.json.gz")
    t = _decoded(str(path))
    names = {t.names[c] for c in set(t.cpu.name.tolist())}
    assert {"aten::bmm", "aten::softmax", "aten::_softmax_backward_data"} <= names
    assert attention_chains.attention_chains(t) == []
    assert attention_chains.attention_chains(t, max_launches_between=10**6) == []


def test_explicit_event_synchronize_is_named() -> None:
    path = fixture_path("hta_test_data", "nccl_parser_config", "nccl_data.json.gz")
    (rep,) = _reports(str(path))
    (s,) = _find(rep, "sync_point")
    assert s.evidence.explicit is True
    assert s.evidence.call.startswith("torch.cuda.Event.synchronize()")
    assert s.evidence.count_per_step == 8


def test_hta_benchmark_names_torch_cuda_synchronize() -> None:
    path = fixture_path(
        "hta_test_data", "critical_path", "simple_add", "benchmark_result_493459_1694039959_trace.json.gz"
    )
    (rep,) = _reports(str(path))
    calls = {f.evidence.call for f in _find(rep, "sync_point")}
    assert "torch.cuda.synchronize()" in calls


def test_every_sample_trace_is_sound() -> None:
    files = sorted(Path(SAMPLES).glob("*/rank*.pt.trace.json.gz")) if Path(SAMPLES).is_dir() else []
    if not files:
        pytest.skip("no sample traces recorded")
    for f in files:
        for rep in _reports(str(f)):
            check_report(rep)


def test_the_docs_table_of_sample_findings_is_todays() -> None:
    """docs/diagnosis.md quotes each sample's findings with today's headline gains (the table
    scripts/gen_findings_table.py writes from the reports), never the gains of the day it was written."""
    if not (SAMPLES / "gpt_naive_attention").is_dir():
        pytest.skip("sample traces not available")
    gen = load_module(ROOT / "scripts" / "gen_findings_table.py")
    text = gen.DOC.read_text()
    assert gen.rendered(text) == text, "stale gains in docs/diagnosis.md: run python scripts/gen_findings_table.py"
    # every sample the table lists was recorded, and each row names its findings
    for name in gen.SAMPLES:
        assert f"| `{name}` |" in text, name


def test_the_fused_attention_runs_its_matmuls_without_the_scores_traffic() -> None:
    """naive_attention's fix: the chain's matmuls each keep the share of their roof they ran at, on a
    roof without the B x H x T x T scores they wrote and read. On the H200 sample (B 8, H 16, T 1024,
    d 64, bf16): a matmul's 2·128·1024²·64 FLOPs take 17.4 µs at the 989.4 TFLOP/s peak, its two
    T x d operands 7.0 µs at 4.8 TB/s and the scores 55.9 µs more: 17.4 / 62.9 = 0.28."""
    rep = _sample("gpt_naive_attention")
    (att,) = _find(rep, "naive_attention")
    change = att.evidence.whatif.change
    assert "its matmul kernels x 0.28" in change and "128 x 1024 x 1024 scores" in change, change
    assert rep.roofline.peak_bandwidth == 4.8e12 and rep.roofline.peak_flops == 989.4e12


@pytest.mark.parametrize(
    ("shapes", "dims"),
    [
        ("[[8, 16, 1024, 64], [8, 16, 64, 1024]]", (128, 1024, 1024, 64)),  # QK^T, 4-D
        ("[[64, 2048, 2048], [64, 2048, 64]]", (64, 2048, 2048, 64)),  # a backward bmm, 3-D
        ("[[64, 77, 64], [64, 64, 1024]]", (64, 77, 1024, 64)),  # cross-attention lengths
        ("[[64, 2048], [2048, 64]]", None),  # not batched
        ("[[8, 16, 1024, 64], [16, 64, 1024]]", None),  # ranks differ
        ("not json", None),
        (None, None),
    ],
)
def test_attention_dims(shapes: str | None, dims: tuple[int, int, int, int] | None) -> None:
    from tb_mfu_plugin.analysis.flops.attention_chains import attention_dims

    assert attention_dims(shapes) == dims


# --------------------------------------------------------------------------- GradScaler's sync


def _validation_run(where: tuple[str, ...], run: str) -> WorkerReport:
    """The report of a recorded truth run, ``where`` the set's folder of runs (unpacked from its host's
    archive where the tree keeps it packed), ``run`` the run's folder in it."""
    files = sorted(validation_folder(*where).joinpath(run).glob("*.pt.trace.json*"))
    if not files:
        pytest.skip(f"{'/'.join(where)}/{run}: its traces are kept in git history only")
    (rep,) = _reports(str(files[0]))
    return rep


@pytest.mark.parametrize("where", [("mfu_truth",), ("h100", "mfu_truth"), ("h100_host7", "mfu_truth")])
def test_grad_scaler_sync_is_named_on_the_recorded_fp16_runs(where: tuple[str, ...]) -> None:
    """fp16 autocast with torch.amp.GradScaler and AdamW's default (foreach) step: GradScaler.step
    reads found_inf with .item() each step (validation/truth_models.py, fp16_gradscaler). The finding
    names GradScaler and the fused optimizer that takes found_inf on the GPU, never the user's own
    .item() advice."""
    rep = _validation_run(where, "fp16_gradscaler")
    (f,) = _find(rep, "sync_point")
    assert f.subject == GRAD_SCALER_STEP
    assert "torch.optim.AdamW(params, ..., fused=True)" in f.recommendation
    assert "loss.detach()" not in f.recommendation


def test_the_users_own_item_keeps_its_advice() -> None:
    """`losses.append(loss.item())` between backward and the (for-loop AdamW) step: no GradScaler."""
    rep = _validation_run(("h100_host7", "gain_pairs"), "item_sync/before")
    (f,) = _find(rep, "sync_point")
    assert f.subject == "tensor.item()" and "loss.detach()" in f.recommendation
