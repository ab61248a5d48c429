"""The collective args of NCCL kernels: kept once per distinct record, and never a reason to
refuse a file (their names are generic: another event may carry them with another type)."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES

from tb_mfu_plugin.trace.decode.decode import decode_bytes, decode_trace
from tb_mfu_plugin.trace.tables import CommArgs

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _kernel(ts: float, args: dict[str, object]) -> dict[str, object]:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": NCCL,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": 5,
        "args": {"device": 0, "stream": 7, "correlation": int(ts), **args},
    }


def test_records_are_kept_once_and_indexed_by_the_kernels() -> None:
    args = {
        "Collective name": "allreduce",
        "In msg nelems": 1024,
        "Out msg nelems": 1024,
        "Group size": 2,
        "dtype": "BFloat16",
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1]",
    }
    events = [_kernel(10, args), _kernel(1, args), _kernel(20, {}), _kernel(30, {**args, "In msg nelems": 8})]
    t = decode_bytes(json.dumps({"traceEvents": events}).encode())
    first = CommArgs("allreduce", 1024, 1024, 2, "BFloat16", "0", "default_pg", "[0, 1]")
    assert t.comm_args == [first, CommArgs("allreduce", 8, 1024, 2, "BFloat16", "0", "default_pg", "[0, 1]")]
    assert t.gpu.comm.tolist() == [0, 0, -1, 1]  # rows sorted by time, the index follows them


def test_wrong_types_leave_fields_unknown_and_the_file_readable() -> None:
    odd = {
        "Collective name": "allreduce",
        "In msg nelems": [1],
        "Out msg nelems": -5,
        "Group size": "two",
        "dtype": {"a": 1},
        "Process Group Name": 3,
        "Process Group Ranks": [0, 1],
    }
    events = [_kernel(1, odd), _kernel(2, {"Collective name": 7, "dtype": "x"})]
    t = decode_bytes(json.dumps({"traceEvents": events}).encode())
    assert t.comm_args == [CommArgs("allreduce", -1, -1, -1, None, "3", None, None)]
    assert t.gpu.comm.tolist() == [0, -1]


def test_a_real_two_dimensional_run_carries_its_three_groups() -> None:
    path = next((SAMPLES / "tpdp_4gpu").glob("rank0.*.pt.trace.json.gz"), None)
    if path is None:
        pytest.skip("sample traces not available")
    t = decode_trace(str(path))
    assert {(a.collective, a.group_desc) for a in t.comm_args} == {
        ("_allgather_base", "mesh_dp"),
        ("_reduce_scatter_base", "mesh_dp"),
        ("allreduce", "mesh_tp"),
    }
    assert all(a.group_size == 2 and a.in_nelems > 0 for a in t.comm_args)
