"""The communication block: overlap against a hand-computed example, the collectives'
bandwidths, the link table, and the strategy of every multi-GPU sample and fixture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import SAMPLES, fixture_path
from tracegen import DistBuilder, nccl_args

from tb_mfu_plugin.analysis.distributed import collectives as co
from tb_mfu_plugin.analysis.distributed.interconnects import LINKS, choose_link
from tb_mfu_plugin.analysis.distributed.strategy import group_role
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import WorkerReport
from tb_mfu_plugin.reporting.trace import trace_reports
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.trace.decode.decode import decode_bytes, decode_trace
from tb_mfu_plugin.trace.tables import CommArgs

GEMM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
FOUR = (0, 1, 2, 3)


def _worked_example(tmp_path: Path) -> DistBuilder:
    """Two steps of 1000 µs on rank 0 of 4.

    Step 1: GEMMs [0, 300) and [500, 800); an all-reduce [200, 600): communication 400 µs, of
    which [200, 300) and [500, 600) overlap compute (200 µs), 200 µs exposed.
    Step 2: a GEMM [1000, 1400); an all-gather [1300, 1500) and a reduce-scatter [1450, 1700):
    communication [1300, 1700) = 400 µs, overlapped [1300, 1400) = 100 µs, exposed 300 µs.
    """
    b = DistBuilder(rank=0, world_size=4)
    b.step(1, 0, 1000)
    b.launch_kernel(GEMM, 1, 0, 300)
    b.collective(2, 200, 400, nccl_args("allreduce", 1 << 20, ranks=FOUR))
    b.launch_kernel(GEMM, 3, 500, 300)
    b.step(2, 1000, 1000)
    b.launch_kernel(GEMM, 1001, 1000, 400)
    b.collective(1002, 1300, 200, nccl_args("_allgather_base", 1 << 18, 1 << 20, ranks=FOUR))
    b.collective(1003, 1450, 250, nccl_args("_reduce_scatter_base", 1 << 20, 1 << 18, ranks=FOUR), stream=21)
    return b


def _report(b: DistBuilder, tmp_path: Path, name: str = "rank0") -> WorkerReport:
    (w,) = trace_reports(decode_trace(str(b.write(tmp_path / f"{name}.pt.trace.json.gz"))), name, "", AnalysisOptions())
    return w


def test_overlap_matches_the_hand_computed_example(tmp_path: Path) -> None:
    c = _report(_worked_example(tmp_path), tmp_path).communication
    assert c is not None
    assert [(s.step, s.communication_us, s.overlapped_us, s.exposed_us) for s in c.steps] == [
        (1, pytest.approx(400), pytest.approx(200), pytest.approx(200)),
        (2, pytest.approx(400), pytest.approx(100), pytest.approx(300)),
    ]
    assert [s.overlap_ratio for s in c.steps] == [pytest.approx(0.5), pytest.approx(0.25)]
    assert c.communication_us_per_step == pytest.approx(400)
    assert c.overlapped_us_per_step == pytest.approx(150)
    assert c.exposed_us_per_step == pytest.approx(250)
    assert c.overlap_ratio == pytest.approx(300 / 800)  # a ratio of sums, as HTA's over its window


def test_collectives_bytes_and_bandwidths_by_the_nccl_tests_convention(tmp_path: Path) -> None:
    c = _report(_worked_example(tmp_path), tmp_path).communication
    assert c is not None and c.link == "NVLink 4" and c.link_gbps == 450.0  # an H100 in the trace
    by_kind = {x.kind: x for x in c.collectives}
    assert set(by_kind) == {"allreduce", "allgather", "reducescatter"}
    ar, ag, rs = by_kind["allreduce"], by_kind["allgather"], by_kind["reducescatter"]
    mib4 = 4 * (1 << 20)  # 2^20 fp32 elements: the buffer (all-reduce), the gathered output, the full input
    for x in (ar, ag, rs):
        assert x.group == "default_pg" and x.group_size == 4 and x.dtype == "Float"
        assert x.count_per_step == 0.5 and x.bytes_per_step == mib4 / 2 and x.mean_message_bytes == mib4
        assert x.bandwidth_basis == "kernel time" and x.link == "NVLink 4"
    assert ar.algbw_gbps == pytest.approx(mib4 / 400e-6 / 1e9)
    assert ar.busbw_gbps == pytest.approx(ar.algbw_gbps * 2 * 3 / 4)  # 2(n-1)/n
    assert ag.busbw_gbps == pytest.approx(mib4 / 200e-6 / 1e9 * 3 / 4)  # (n-1)/n
    assert rs.busbw_gbps == pytest.approx(mib4 / 250e-6 / 1e9 * 3 / 4)
    assert ar.link_peak_share == pytest.approx(ar.busbw_gbps / 450.0)
    # exposed per collective: the all-reduce 200 µs over 2 steps; the all-gather [1400, 1500)
    assert ar.exposed_us_per_step == pytest.approx(100) and ag.exposed_us_per_step == pytest.approx(50)
    assert rs.exposed_us_per_step == pytest.approx(125)


def test_a_single_gpu_run_has_no_communication_block() -> None:
    if not (SAMPLES / "gpt_sdpa_fused").is_dir():
        pytest.skip("sample traces not available")
    run = analyze_path(str(SAMPLES / "gpt_sdpa_fused")).runs[0]
    assert [w.communication for w in run.workers] == [None] and run.strategy == []
    assert [w.pipeline for w in run.workers] == [None]


def test_bus_factors_and_message_sizes() -> None:
    assert co.bus_factor("allreduce", 8) == pytest.approx(2 * 7 / 8)
    assert co.bus_factor("allgather", 4) == co.bus_factor("reducescatter", 4) == co.bus_factor("alltoall", 4) == 0.75
    assert co.bus_factor("sendrecv", None) == co.bus_factor("broadcast", 8) == 1.0
    assert co.bus_factor("allreduce", None) is None
    assert co.kind_of("ncclDevKernel_SendRecv(x)", None) == "sendrecv"
    # an all-to-all runs as NCCL send/recv kernels: torch's name for the call wins
    (args,) = decode_args(nccl_args("alltoall_base", 384, dtype="Long"))
    assert co.kind_of("ncclDevKernel_SendRecv(x)", args) == "alltoall" and co.message_bytes(args) == 384 * 8
    assert co.protocol_of("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)") == "RING_LL"
    assert co.protocol_of("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") is None


def decode_args(args: dict[str, Any]) -> list[CommArgs]:
    """The args of one NCCL kernel, as the decoder keeps them."""
    b = DistBuilder()
    b.step(1, 0, 100)
    b.collective(1, 10, 10, args)
    return decode_bytes(b.text().encode()).comm_args


@pytest.mark.parametrize(
    ("device", "size", "link"),
    [
        ("NVIDIA H200", 4, "NVLink 4"),
        ("NVIDIA H100 80GB HBM3", 8, "NVLink 4"),
        ("NVIDIA H100 80GB HBM3", 16, "InfiniBand NDR 400G"),  # wider than one node's NVLink domain
        ("NVIDIA GB200", 72, "NVLink 5"),
        ("NVIDIA A100-SXM4-80GB", 8, "NVLink 3"),
        ("NVIDIA A100-PCIE-40GB", 2, "PCIe 4 x16"),
        ("NVIDIA L40S", 4, "PCIe 4 x16"),
        ("NVIDIA H100 PCIe", 2, "PCIe 5 x16"),
        ("AMD Instinct MI300X", 8, "xGMI (MI300X)"),
        ("AMD Instinct MI250X", 8, "xGMI (MI250X, per GCD)"),
    ],
)
def test_link_choice(device: str, size: int, link: str) -> None:
    assert choose_link(device, size).link == LINKS[link]


def test_link_override_and_unknown_devices() -> None:
    assert choose_link("NVIDIA H100", 2, "PCIe 5 x16").link == LINKS["PCIe 5 x16"]
    given = choose_link(None, 2, "200").link
    assert given is not None and given.gbps == 200.0
    assert choose_link(None, 2).link is None and "--interconnect" in choose_link(None, 2).source
    assert choose_link("NVIDIA H100", 2, "fast").link is None


@pytest.mark.parametrize(
    ("desc", "kinds", "markers", "role"),
    [
        ("mesh_tp", {"allreduce"}, set(), "TP"),
        ("mesh_dp", {"allgather", "reducescatter"}, set(), "FSDP"),
        ("mesh_dp", {"allreduce"}, {"DDP"}, "DDP"),
        ("dp_replicate", {"allreduce"}, set(), "DP"),
        ("dp_shard", {"allgather"}, set(), "FSDP"),
        ("mesh_pp", {"send", "recv"}, set(), "PP"),
        ("mesh_ep", {"alltoall"}, set(), "EP"),
        ("mesh_cp", {"alltoall"}, set(), None),  # context parallelism names no strategy of the list
        ("default_pg", {"allreduce"}, {"TP"}, "TP"),
        ("default_pg", {"allreduce"}, set(), "DP"),
        ("default_pg", {"sendrecv"}, {"EP"}, "EP"),
        ("default_pg", {"sendrecv"}, {"PP", "EP"}, "PP"),
        ("default_pg", {"broadcast"}, set(), None),
    ],
)
def test_group_roles(desc: str, kinds: set[str], markers: set[str], role: str | None) -> None:
    assert group_role(desc, kinds, markers)[0] == role


MULTI = [
    ("ddp_2gpu", ["DDP"]),
    ("ddp_4gpu", ["DDP"]),
    ("fsdp2_2gpu", ["FSDP"]),
    ("fsdp2_4gpu", ["FSDP"]),
    ("tp_2gpu", ["TP"]),
    ("tp_4gpu", ["TP"]),
    ("tpdp_4gpu", ["FSDP", "TP"]),
    # issue 38's 8-GPU runs (record_large_multi_gpu.py): skipped until recorded
    ("ddp_8gpu_gpt2b", ["DDP"]),
    ("fsdp2_8gpu_gpt2b", ["FSDP"]),
    ("tp2dp4_8gpu_gpt2b", ["FSDP", "TP"]),
]


@pytest.mark.parametrize(("run", "strategy"), MULTI)
def test_strategy_of_every_multi_gpu_sample(run: str, strategy: list[str]) -> None:
    if not (SAMPLES / run).is_dir():
        pytest.skip("sample traces not available")
    report = analyze_path(str(SAMPLES / run)).runs[0]
    assert report.strategy == strategy
    for w in report.workers:
        c = w.communication
        assert c is not None and c.strategy == strategy and c.link == "NVLink 4"
        assert 0.0 <= (c.overlap_ratio or 0.0) <= 1.0
        assert c.exposed_us_per_step + c.overlapped_us_per_step == pytest.approx(c.communication_us_per_step)
        named = [x for x in c.collectives if x.group is not None]
        assert named and all(x.bytes_per_step and x.busbw_gbps for x in named)
        if strategy == ["FSDP", "TP"]:  # FSDP over the dp mesh, TP all-reduces on the tp mesh
            assert {(x.group, x.role) for x in named} == {("mesh_dp", "FSDP"), ("mesh_tp", "TP")}
        if run in ("tp_2gpu", "tp_4gpu"):
            assert c.overlap_ratio == 0.0  # TP's all-reduces sit between the matmuls that need them


def test_strategy_of_the_hta_fixtures() -> None:
    (nccl,) = analyze_path(str(fixture_path("hta_test_data", "nccl_parser_config", "nccl_data.json.gz"))).runs
    assert nccl.strategy == ["DDP"]
    (w,) = nccl.workers
    assert w.communication is not None and {x.kind for x in w.communication.collectives} == {"allreduce", "broadcast"}
    # sampled ranks of a 128-rank job: send/recv kernels without args beside c10d::alltoall ops
    path = fixture_path("hta_test_data", "trace_filter", "sampled_rank-0.json.gz")
    (sampled,) = analyze_path(str(path)).runs
    assert sampled.strategy == ["EP"] and sampled.workers[0].pipeline is None
