"""Device properties by id, and ROCm's other numbering; ROCm grids in work-items or blocks.

Hand-made traces for each mapping case, then the real ROCm traces: TraceLens's MI300X twins
of its H100 traces and HTA's MI250 trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from conftest import fixture_path
from tracegen import H100, TraceBuilder

from tb_mfu_plugin.analysis.device import devices
from tb_mfu_plugin.analysis.device import peaks as P
from tb_mfu_plugin.analysis.kernels import kernels
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.running.pipeline import analyze_file
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.locate.discover import single_file_run
from tb_mfu_plugin.trace.tables import TraceTables

MI300X_VF = {
    "id": 0,
    "name": "AMD Instinct MI300X VF",
    "computeMajor": 9,
    "computeMinor": 4,
    "warpSize": 64,
    "numSms": 304,
    "maxThreadsPerMultiprocessor": 2048,
}
MI250 = {"id": 0, "name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "warpSize": 64, "numSms": 104}


def _tables(
    tmp_path: Path,
    props: list[dict[str, Any]],
    kernel_devices: list[int],
    api: str = "hipLaunchKernel",
    grid: list[int] | None = None,
) -> TraceTables:
    b = TraceBuilder(devices=props)
    b.step(1, 0, 1000)
    for i, d in enumerate(kernel_devices):
        corr = b.runtime(api, 10 + i, 2)
        b.kernel("k", 100 + 100 * i, 50, corr, device=d, blocks_per_sm=None, occupancy=None, grid=grid)
    return decode_trace(str(b.write(tmp_path / "t.pt.trace.json.gz")))


def test_cuda_maps_by_id(tmp_path: Path) -> None:
    a100 = {**H100, "id": 1, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108}
    t = _tables(tmp_path, [H100, a100], [1], api="cudaLaunchKernel")
    found = devices.device_properties(t, 1)
    assert found.how == "id" and found.props is not None and found.props["name"].startswith("NVIDIA A100")
    assert found.note is None and not devices.is_rocm(t)


def test_rocm_device_not_listed_uses_the_only_entry_and_says_so(tmp_path: Path) -> None:
    t = _tables(tmp_path, [MI300X_VF], [2])  # HSA agent 2 = GPU 0 behind two CPU agents
    found = devices.device_properties(t, 2)
    assert found.how == "only entry" and found.props == MI300X_VF
    assert found.note is not None and "HSA" in found.note and devices.is_rocm(t)


def test_rocm_alike_gpus_any_entry_is_right(tmp_path: Path) -> None:
    listed = [{**MI250, "id": i} for i in range(4)]
    t = _tables(tmp_path, listed, [5])
    found = devices.device_properties(t, 5)
    assert found.how == "all alike" and found.props is not None and found.props["numSms"] == 104


def test_rocm_different_gpus_pair_by_order_or_stay_unknown(tmp_path: Path) -> None:
    listed = [{**MI300X_VF, "id": 0}, {**MI250, "id": 1}]
    t = _tables(tmp_path, listed, [2, 3])  # both GPUs used: agents 2, 3 are GPUs 0, 1
    assert devices.device_properties(t, 3).how == "ordinal"
    assert devices.device_properties(t, 3).props["name"] == "AMD Radeon Graphics"  # type: ignore[index]
    t = _tables(tmp_path, listed, [1])  # one GPU used: id 1 may be agent 1 of any numbering
    found = devices.device_properties(t, 1)
    assert found.props is None and found.how == "ambiguous" and "need not be" in (found.note or "")


def test_cuda_unlisted_device_with_different_gpus_is_unknown(tmp_path: Path) -> None:
    a100 = {**H100, "id": 1, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108}
    t = _tables(tmp_path, [H100, a100], [3], api="cudaLaunchKernel")
    assert devices.device_properties(t, 3).props is None


def test_no_device_properties(tmp_path: Path) -> None:
    t = _tables(tmp_path, [], [0], api="cudaLaunchKernel")
    assert devices.device_properties(t, 0) == devices.DeviceProps(None, "none")


@pytest.mark.parametrize(
    "api,grid,expected",
    [
        ("hipExtModuleLaunchKernel", [76800, 1, 1], 300 / 304),  # work-items: 76800 / 256 threads = 300 blocks
        ("hipLaunchKernel", [300, 1, 1], 300 / 304),  # blocks, as in CUDA
        ("hipModuleLaunchKernel", [2, 12, 4], 96 / 304),  # Triton: blocks
        ("hipGraphLaunch", [76800, 1, 1], float("nan")),  # the grid's unit is not known: unknown
    ],
)
def test_rocm_grid_unit_follows_the_launch_call(tmp_path: Path, api: str, grid: list[int], expected: float) -> None:
    b = TraceBuilder(devices=[MI300X_VF])
    b.step(1, 0, 1000)
    corr = b.runtime(api, 10, 2)
    b.events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "Cijk_Alik_Bljk_B_MT256x128x64",
            "pid": 2,
            "tid": 0,
            "ts": 100,
            "dur": 50,
            "args": {"device": 2, "stream": 0, "correlation": corr, "grid": grid, "block": [256, 1, 1]},
        }
    )
    t = decode_trace(str(b.write(tmp_path / "t.pt.trace.json.gz")))
    api_code = t.cpu.name[t.launcher]
    unit = kernels.grid_units_per_block(t.gpu, api_code, t.names, devices.is_rocm(t))
    bps = kernels.blocks_per_sm(t.gpu, 304, unit)
    np.testing.assert_allclose(bps, [expected])


def _analyze(path: Path) -> Any:
    (w,) = analyze_file(single_file_run(str(path)).files[0], "r", AnalysisOptions())
    return w


def test_cuda_grid_is_blocks() -> None:
    # CUDA: grid always in blocks, whatever the launch call
    t = type("G", (), {"block_threads": np.array([128]), "__len__": lambda self: 1})()
    assert kernels.grid_units_per_block(t, np.array([-1]), [], rocm=False).tolist() == [1.0]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "props,key",
    [
        ({"name": "AMD Instinct MI300X VF", "numSms": 304, "warpSize": 64}, "MI300X"),
        ({"name": "", "computeMajor": 9, "computeMinor": 4, "warpSize": 64, "numSms": 304}, "MI300X"),
        ({"name": "", "gcnArchName": "gfx942:sramecc+:xnack-", "numSms": 304}, "MI300X"),
        (
            {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "warpSize": 64, "numSms": 104},
            "MI250 (per GCD)",
        ),
    ],
)
def test_amd_names_with_suffixes_or_none_find_their_peak(props: dict[str, Any], key: str) -> None:
    c = P.resolve_peak(props, [], "bf16", AnalysisOptions())
    assert c.name == key and c.peak_flops is not None


# --------------------------------------------------------------------------- real ROCm traces

TRACELENS = (
    "Falconsai_nsfw_image_detection__1016002",
    "Qwen_Qwen1.5-0.5B-Chat__1016005",
    "facebook_timesformer-base-finetuned-k400__1016002",
    "gaunernst_bert-small-uncased__1016001",
    "google_owlv2-large-patch14-ensemble__1016001",
)


@pytest.mark.parametrize("model", TRACELENS)
def test_mi300x_twins_device_peak_and_sm_efficiency(model: str) -> None:
    amd = _analyze(fixture_path("tracelens_hf_inference", "mi300", f"{model}.json.gz"))
    nv = _analyze(fixture_path("tracelens_hf_inference", "h100", f"{model}.json.gz"))
    assert amd.device is not None and amd.summary is not None and nv.summary is not None
    # kernels on HSA agent 2, deviceProperties id 0: found, and said how
    assert (amd.device.index, amd.device.name, amd.device.num_sms) == (2, "AMD Instinct MI300X VF", 304)
    assert amd.device.properties_match == "only entry" and any("HSA" in n for n in amd.notes)
    assert amd.device.peak_flops == pytest.approx(1307.4e12) and amd.device.compute_capability == "9.4"
    eff = amd.summary.sm_efficiency
    if eff is None:  # Qwen: 31 % of the kernel time has no grid and no launch call
        assert any("SM efficiency unknown" in n for n in amd.notes)
        return
    # never above the kernel time (the old grid / CUs read work-items as blocks: every GEMM
    # "covered" all 304 CUs 256 times over); and within 2x of the H100 twin's ratio
    assert 0 < eff <= amd.summary.kernel_time_share + 1e-9
    assert nv.summary.sm_efficiency is not None
    amd_ratio = eff / amd.summary.kernel_time_share
    nv_ratio = nv.summary.sm_efficiency / nv.summary.kernel_time_share
    assert 0.5 < amd_ratio / nv_ratio < 1.5, (amd_ratio, nv_ratio)


def test_mi300x_hipblaslt_gemm_blocks_per_cu() -> None:
    """hipBLASLt GEMMs (hipExtModuleLaunchKernel, grid in work-items) cover about one wave of CUs,
    like the H100 twin's cuBLAS GEMMs, not hundreds."""
    w = _analyze(fixture_path("tracelens_hf_inference", "mi300", f"{TRACELENS[0]}.json.gz"))
    gemms = [k for k in w.top_kernels if k.name.startswith("Cijk_")]
    assert gemms and all(k.mean_blocks_per_sm is not None and 0.1 < k.mean_blocks_per_sm < 2 for k in gemms)


def test_mi250_hta_trace_device_and_peak() -> None:
    w = _analyze(fixture_path("hta_test_data", "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"))
    assert w.device is not None and w.device.name == "AMD Radeon Graphics" and w.device.num_sms == 104
    # four alike GCDs: which entry device 2 is does not matter
    assert w.device.properties_match == "id" and w.device.peak_source and "MI250 (per GCD)" in w.device.peak_source
    assert w.summary is not None and w.summary.sm_efficiency is None  # no grid recorded at all


@pytest.mark.parametrize(
    ("name", "num_sms", "major", "want_name", "want_sms", "want_cc"),
    [
        (1.5, 132.0, 9, None, 132, "9.0"),  # a number for the name; a whole float count is kept
        (7, 1.5, 9, None, None, "9.0"),  # a fractional SM count is not a count
        ("NVIDIA H100", -4, "9", "NVIDIA H100", None, None),  # negative count; a string major
        ("NVIDIA H100", True, 9, "NVIDIA H100", None, "9.0"),  # JSON true is not 1 SM
    ],
)
def test_hostile_device_properties_never_break_the_reports_types(
    tmp_path: Path,
    name: Any,
    num_sms: Any,
    major: Any,
    want_name: str | None,
    want_sms: int | None,
    want_cc: str | None,
) -> None:
    # The report crosses processes as typed msgpack; a float name once made the parent's
    # decode fail and hung `tb-mfu analyze --jobs 2` on the hostile corpus.
    props = {**H100, "name": name, "numSms": num_sms, "computeMajor": major, "computeMinor": 0}
    b = TraceBuilder(devices=[props])
    b.step(1, 0, 1000)
    b.kernel("k", 100, 50, b.runtime("cudaLaunchKernel", 10, 2), blocks_per_sm=None, occupancy=None)
    path = b.write(tmp_path / "t.pt.trace.json.gz")
    run = single_file_run(str(path))
    [report] = analyze_file(run.files[0], run.workers[0].name)
    assert report.device is not None
    assert (report.device.name, report.device.num_sms, report.device.compute_capability) == (
        want_name,
        want_sms,
        want_cc,
    )
    assert msgspec.json.decode(msgspec.json.encode(report), type=WorkerReport) == report


# --------------------------------------------------------------------------- an empty device name (vLLM)

VLLM_MI300X = {**MI300X_VF, "name": "", "totalGlobalMem": 205571227648}


@pytest.mark.parametrize(
    ("props", "key", "why"),
    [
        (VLLM_MI300X, "MI300X", "compute 9.4 with wavefront 64 is CDNA3 (gfx94x), and 304 CUs with 206 GB"),
        ({**VLLM_MI300X, "totalGlobalMem": 256 * 2**30}, "MI325X", "304 CUs with 275 GB is the MI325X"),
        ({"name": "", "gcnArchName": "gfx942:sramecc+:xnack-", "numSms": 304}, "MI300X", "gfx target gfx942"),
        ({**H100, "name": "", "totalGlobalMem": 85 * 10**9}, "H100 SXM", "9.0 is Hopper, and 132 SMs with 85.0 GB"),
        ({**H100, "name": ""}, "H100 SXM", "132 SMs (so has the H200 SXM, at the same peak) is the H100 SXM"),
        ({**H100, "name": None, "totalGlobalMem": 150 * 10**9}, "H200 SXM", "132 SMs with 150 GB is the H200"),
    ],
)
def test_an_empty_name_is_identified_by_architecture_and_count(props: dict[str, Any], key: str, why: str) -> None:
    got = P.identify(props)
    assert got is not None and got.model.key == key and why in got.reason
    c = P.resolve_peak(props, [], "bf16", AnalysisOptions())
    assert c.name == key and not c.inferred and f"{key} identified from deviceProperties" in c.source
    assert c.peak_flops == P.PEAKS[key].tflops["bf16"] * 1e12 and devices.display_name(props) == key


@pytest.mark.parametrize(
    "props",
    [
        MI300X_VF,  # a name of its own: never replaced
        {**VLLM_MI300X, "numSms": 300},  # a CU count no part has: the architecture alone is a guess
        {"name": "", "numSms": 304},  # no architecture
        {"name": "", "computeMajor": 9, "computeMinor": 4, "warpSize": 64, "numSms": True},
    ],
)
def test_nothing_is_named_without_both_architecture_and_count(props: dict[str, Any]) -> None:
    assert P.identify(props) is None
    assert devices.display_name(props) == props["name"]


def test_vllm_like_trace_with_an_empty_name_is_named_with_the_reason(tmp_path: Path) -> None:
    # TraceLens's MI300X trace as vLLM's ROCm traces write it: "name": ""
    import gzip
    import json

    src = fixture_path("tracelens_hf_inference", "mi300", f"{TRACELENS[1]}.json.gz")
    doc = json.loads(gzip.open(src).read())
    doc["deviceProperties"][0]["name"] = ""
    path = tmp_path / "vllm.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    w = _analyze(path)
    assert w.device is not None and w.device.name == "MI300X" and w.device.num_sms == 304
    assert w.device.peak_flops == pytest.approx(1307.4e12)
    assert w.device.peak_source is not None and "identified from deviceProperties (name empty" in w.device.peak_source
    assert any("GPU named MI300X from deviceProperties: name empty" in n for n in w.notes)
