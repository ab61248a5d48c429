"""The tb_mfu.json sidecar: format, PaLM figure, lookup order, typed errors, read-only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tb_mfu_plugin.core.errors import TraceError
from tb_mfu_plugin.trace.locate.locations import Location
from tb_mfu_plugin.trace.locate.sidecar import (
    SIDECAR_NAME,
    ModelDims,
    Sidecar,
    encode_sidecar,
    load_sidecar,
    parse_sidecar,
)


def test_flops_per_step() -> None:
    sc = parse_sidecar(b'{"flops_per_step": 1.5e15, "source": "FlopCounterMode"}')
    assert sc.model_flops_per_step() == 1.5e15
    assert sc.method == "FlopCounterMode"


def test_model_dims_palm_formula() -> None:
    # the sample GPT: N = 83,941,376 non-embedding params, L=4, d=1024, T=1024, 8192 tokens
    doc = {"model": {"n_params": 83941376, "n_layers": 4, "d_model": 1024, "seq_len": 1024, "tokens_per_step": 8192}}
    sc = parse_sidecar(json.dumps(doc).encode())
    per_token = 6 * 83941376 + 12 * 4 * 1024 * 1024
    assert sc.model_flops_per_step() == per_token * 8192 == 4538203373568  # ground_truth.json's analytic figure
    assert "PaLM" in sc.method


def test_model_heads_times_head_dim_and_batch_size() -> None:
    m = ModelDims(n_params=1e6, n_layers=2, n_heads=8, head_dim=64, seq_len=128, batch_size=4)
    assert m.d_attn == 512 and m.tokens == 512
    assert m.flops_per_step() == (6e6 + 12 * 2 * 512 * 128) * 512
    # no attention dims: 6N only
    assert ModelDims(n_params=1e6, tokens_per_step=10).flops_per_step() == 6e7


@pytest.mark.parametrize(
    "doc,reason",
    [
        (b"{", "not valid JSON"),
        (b"[]", "invalid MFU sidecar"),
        (b'{"flops_per_step": "lots"}', "invalid MFU sidecar"),
        (b'{"flops_per_step": -3}', "positive"),
        (b"{}", "neither flops_per_step nor model"),
        (b'{"model": {"n_params": 1e6}}', "tokens_per_step"),
        (b'{"model": {"n_params": 0, "tokens_per_step": 5}}', "n_params"),
        (b'{"model": {"n_params": 1, "tokens_per_step": 5, "n_layers": -1}}', "n_layers"),
        (b'{"version": 99, "flops_per_step": 1}', "newer"),
    ],
)
def test_errors_are_typed_and_one_line(doc: bytes, reason: str) -> None:
    with pytest.raises(TraceError) as ei:
        parse_sidecar(doc, "/runs/a/tb_mfu.json")
    assert ei.value.path == "/runs/a/tb_mfu.json"
    assert reason in ei.value.reason and "\n" not in str(ei.value)


def test_unknown_keys_are_ignored() -> None:
    assert parse_sidecar(b'{"flops_per_step": 2, "future_key": [1, 2]}').flops_per_step == 2


def test_encode_roundtrip() -> None:
    sc = Sidecar(flops_per_step=3e12, tf32=True, source="x")
    assert parse_sidecar(encode_sidecar(sc)) == sc


def test_load_from_run_dir_and_worker_override(tmp_path: Path) -> None:
    assert load_sidecar(Location.parse(str(tmp_path))) is None
    assert load_sidecar(Location.parse(str(tmp_path / "missing"))) is None
    (tmp_path / SIDECAR_NAME).write_text('{"flops_per_step": 1e12}')
    (tmp_path / f"rank1.{SIDECAR_NAME}").write_text('{"flops_per_step": 2e12}')
    got = load_sidecar(Location.parse(str(tmp_path)))
    assert got is not None and got[0].flops_per_step == 1e12 and got[1].endswith(SIDECAR_NAME)
    got = load_sidecar(Location.parse(str(tmp_path)), worker="rank1")
    assert got is not None and got[0].flops_per_step == 2e12
    got = load_sidecar(Location.parse(str(tmp_path)), worker="rank0")  # falls back to the run-wide file
    assert got is not None and got[0].flops_per_step == 1e12


def test_bad_file_raises_with_its_path(tmp_path: Path) -> None:
    (tmp_path / SIDECAR_NAME).write_text("{nope")
    with pytest.raises(TraceError) as ei:
        load_sidecar(Location.parse(str(tmp_path)))
    assert ei.value.path == str(tmp_path / SIDECAR_NAME)


def test_reading_never_writes(tmp_path: Path) -> None:
    (tmp_path / SIDECAR_NAME).write_text('{"flops_per_step": 1e12}')
    os.chmod(tmp_path, 0o555)
    try:
        before = sorted(os.listdir(tmp_path))
        assert load_sidecar(Location.parse(str(tmp_path))) is not None
        assert sorted(os.listdir(tmp_path)) == before
    finally:
        os.chmod(tmp_path, 0o755)
