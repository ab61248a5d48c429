"""The trace's distributedInfo as the typed ``Distributed`` block: every key PyTorch writes
kept as written, a key of the wrong type left out with a note."""

from __future__ import annotations

import json

import msgspec
import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.distributed.info import distributed_block
from tb_mfu_plugin.analysis.report import Distributed, to_json
from tb_mfu_plugin.trace.decode.decode import decode_trace


@pytest.mark.parametrize("run", ["ddp_2gpu", "tp_2gpu"])
def test_a_real_header_keeps_every_key_as_written(run: str) -> None:
    traces = sorted((SAMPLES / run).glob("rank*.pt.trace.json*"))
    if not traces:
        pytest.skip(f"sample trace not recorded: {SAMPLES / run}")
    info = decode_trace(str(traces[0])).meta.distributed_info
    assert info is not None and info["pg_config"]  # the process groups are there to keep
    notes: list[str] = []
    block = distributed_block(info, notes)
    assert block is not None and notes == []
    assert json.loads(to_json(block)) == info


def test_a_key_of_the_wrong_type_is_left_out_with_a_note() -> None:
    notes: list[str] = []
    info = {"rank": 1, "world_size": 4, "backend": 7, "pg_config": [{"pg_name": "0", "ranks": "all"}], "x": 1}
    block = distributed_block(info, notes)
    assert block == Distributed(rank=1, world_size=4)
    assert sorted(notes) == [
        "distributedInfo.backend is not what PyTorch writes there and was ignored.",
        "distributedInfo.pg_config is not what PyTorch writes there and was ignored.",
    ]
    assert msgspec.json.decode(to_json(block)) == {"rank": 1, "world_size": 4}


def test_no_info_is_no_block_and_an_empty_one_stays_empty() -> None:
    notes: list[str] = []
    assert distributed_block(None, notes) is None
    assert to_json(distributed_block({}, notes)) == b"{}" and notes == []
