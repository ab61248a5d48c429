"""tb_mfu_plugin.profiling with the CPU build of torch: traces and sidecar land in the logdir."""

from __future__ import annotations

import glob
import stat
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from tb_mfu_plugin.analysis.flops import shapes as F  # noqa: E402
from tb_mfu_plugin.analysis.flops.count_once import count_flops  # noqa: E402
from tb_mfu_plugin.analysis.flops.per_window import flops_in_windows  # noqa: E402
from tb_mfu_plugin.profiling import count_step_flops, mfu_profile  # noqa: E402
from tb_mfu_plugin.trace.decode.decode import decode_trace  # noqa: E402
from tb_mfu_plugin.trace.locate.locations import Location  # noqa: E402
from tb_mfu_plugin.trace.locate.sidecar import SIDECAR_NAME, ModelDims, load_sidecar  # noqa: E402
from tb_mfu_plugin.trace.tables import ANNOTATION  # noqa: E402


def make_step():  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)

    def step() -> None:
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()

    return step


def expected_flops() -> int:
    with FlopCounterMode(display=False) as fc:
        make_step()()
    return int(fc.get_total_flops())


def test_first_step_is_counted_and_sidecar_written(tmp_path: Path) -> None:
    step = make_step()
    logdir = tmp_path / "run_a"
    with mfu_profile(str(logdir)) as prof:
        for _ in range(6):
            step()
            prof.step()
    traces = glob.glob(str(logdir / "*.pt.trace.json.gz"))
    assert len(traces) == 1
    got = load_sidecar(Location.parse(str(logdir)))
    assert got is not None
    sc, path = got
    assert path == str(logdir / SIDECAR_NAME)
    want = expected_flops()
    assert want > 0 and sc.flops_per_step == want == prof.flops_per_step
    assert sc.source is not None and "FlopCounterMode" in sc.source
    assert stat.S_IMODE((logdir / SIDECAR_NAME).stat().st_mode) & 0o044  # readable by others

    # the recorded trace gives the same FLOPs per step from its shapes
    t = decode_trace(traces[0], keep_inputs=F.is_flop_op)
    of = count_flops(t)
    c = t.cpu
    codes = [i for i, n in enumerate(t.names) if n.startswith("ProfilerStep#")]
    import numpy as np

    steps = np.nonzero((c.kind == ANNOTATION) & np.isin(c.name, codes))[0]
    assert len(steps) == 3  # schedule(wait=1, warmup=1, active=3)
    wf = flops_in_windows(of, c.ts[steps], c.ts[steps] + c.dur[steps])
    assert np.all(wf.flops == want)


def test_step_fn_and_explicit_and_model_dims(tmp_path: Path) -> None:
    step = make_step()
    want = expected_flops()
    assert count_step_flops(make_step()) == want
    with mfu_profile(str(tmp_path / "a"), step_fn=make_step(), active=1) as prof:
        for _ in range(3):
            step()
            prof.step()
    assert load_sidecar(Location.parse(str(tmp_path / "a")))[0].flops_per_step == want  # type: ignore[index]

    with mfu_profile(str(tmp_path / "b"), flops_per_step=123.0, active=1) as prof:
        for _ in range(3):
            step()
            prof.step()
    assert load_sidecar(Location.parse(str(tmp_path / "b")))[0].flops_per_step == 123.0  # type: ignore[index]

    dims = {"n_params": 1000, "tokens_per_step": 10}
    with mfu_profile(str(tmp_path / "c"), model=dims, active=1) as prof:
        for _ in range(3):
            step()
            prof.step()
    sc = load_sidecar(Location.parse(str(tmp_path / "c")))[0]  # type: ignore[index]
    assert sc.model == ModelDims(n_params=1000, tokens_per_step=10)
    assert sc.model_flops_per_step() == 6 * 1000 * 10


def test_worker_name_writes_per_worker_sidecar(tmp_path: Path) -> None:
    step = make_step()
    with mfu_profile(str(tmp_path), worker_name="rank3", flops_per_step=5.0, active=1) as prof:
        for _ in range(3):
            step()
            prof.step()
    assert (tmp_path / f"rank3.{SIDECAR_NAME}").exists()
    assert glob.glob(str(tmp_path / "rank3.*.pt.trace.json.gz"))
    assert load_sidecar(Location.parse(str(tmp_path)), worker="rank3")[0].flops_per_step == 5.0  # type: ignore[index]


def test_counting_needs_an_unrecorded_first_step(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        with mfu_profile(str(tmp_path), wait=0):
            pass
    with pytest.raises(ValueError):
        with mfu_profile(str(tmp_path), model={"n_params": 10}):
            pass
