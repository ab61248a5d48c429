"""A CUDA graph replay as it runs without the profiler (``critical_path.unprofiled``): the profiler
traces every node of a replay, which spaces its kernels out (0.256 µs apart on every host, against
about 0.11 without it) and, on a slow host, makes its launch call longer than the replay itself. The
step re-timed with the profiler's host cost alone read 8-36 % longer than the step timed without the
profiler; with the replay's own cost out it reads within 2 % of it, on every recorded replay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, validation_folder

from tb_mfu_plugin.analysis.critical_path.whatif import Model

SAMPLE = ROOT / "sample_traces" / "tiny_mlp_cuda_graph"
# the tiny MLP's step captured in one graph, timed without the profiler on each host that recorded it
PAIRS = ("whatif_pairs", "gain_pairs", "h100/gain_pairs", "h100_host5/gain_pairs", "h100_host8/gain_pairs")


def _model(folder: Path) -> Model:
    from tb_mfu_plugin.analysis.options import AnalysisOptions
    from tb_mfu_plugin.analysis.per_device import analyze_device
    from tb_mfu_plugin.running.pipeline import _keep_inputs
    from tb_mfu_plugin.trace.decode.decode import decode_trace

    (path,) = sorted(folder.glob("*.pt.trace.json*"))
    tables = decode_trace(str(path), keep_inputs=_keep_inputs)
    view = analyze_device(tables, int(tables.gpu.device[0]), AnalysisOptions()).view
    assert view is not None and view.critical is not None
    return view.critical


def _cases() -> list[tuple[str, Path, float]]:
    out = []
    if (SAMPLE / "ground_truth.json").is_file():
        truth = json.loads((SAMPLE / "ground_truth.json").read_text())["step_time_us_unprofiled"]
        out.append(("sample", SAMPLE, truth))
    for pairs in PAIRS:
        gt = ROOT / "validation" / pairs / "ground_truth.json"
        if gt.is_file():
            after = json.loads(gt.read_text())["pairs"]["cuda_graph"]["after"]
            out.append((pairs, Path(pairs), after["step_time_unprofiled"]["median_us"]))
    return out


@pytest.mark.parametrize(("name", "folder", "truth"), _cases(), ids=[c[0] for c in _cases()])
def test_a_replayed_step_without_the_profiler_reads_as_timed(name: str, folder: Path, truth: float) -> None:
    where = folder if folder.is_absolute() else validation_folder(*folder.parts) / "cuda_graph" / "after"
    m = _model(where)
    # every kernel of the step comes from one launch call: a replay, which the median launch call
    # (how fast this host runs one launch) leaves out
    per_call = np.bincount(m.g.ops.call[m.g.ops.call >= 0])
    assert per_call.max() > 100 and not np.isfinite(m.g.launch_call_us)
    assert m.step_us > 1.08 * truth  # the profiler's cost on the replay, which the host events do not carry
    # each replay's call costs the host GRAPH_LAUNCH_UNPROFILED_SHARE of its traced time, or less
    from tb_mfu_plugin.analysis.critical_path.unprofiled import GRAPH_LAUNCH_UNPROFILED_SHARE

    w = m.unprofiled_weights.w
    for c in np.flatnonzero(per_call > 1):
        assert w[m.g.host.call == c].sum() <= GRAPH_LAUNCH_UNPROFILED_SHARE * m.g.calls.dur[c] + 1e-6
    assert m.unprofiled_step_us == pytest.approx(truth, rel=0.02)
    short, long = m.unprofiled_step_range_us
    assert short <= m.unprofiled_step_us <= long


def test_a_replay_adopted_by_a_what_if_runs_as_one_without_the_profiler() -> None:
    """The what-if of capturing the step in a graph spaces its kernels as a replay without the
    profiler does, when re-timed without it, and as one under it otherwise."""
    from tb_mfu_plugin.analysis.critical_path.unprofiled import GRAPH_GAP_UNPROFILED_US
    from tb_mfu_plugin.analysis.critical_path.whatif import GRAPH_GAP_US, Change

    if not (ROOT / "validation" / "whatif_pairs" / "ground_truth.json").is_file():
        pytest.skip("validation/whatif_pairs not recorded")
    m = _model(validation_folder("whatif_pairs") / "cuda_graph" / "before")
    replay = Change("the step captured in one CUDA graph", graph_replay=True)
    traced, bare = m._weights([replay], False), m._weights([replay], True)
    in_steps = (m.g.ops.step >= 0) & np.isfinite(m.g.ops.gap)
    assert np.all(traced.gap[in_steps] <= GRAPH_GAP_US) and np.all(bare.gap[in_steps] <= GRAPH_GAP_UNPROFILED_US)
    assert m.simulate([replay], without_profiler=True).step_us < m.simulate([replay]).step_us
