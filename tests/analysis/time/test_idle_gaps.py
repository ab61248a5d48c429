"""GPU idle gaps and their causes on a hand-made step whose answer is worked out below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.time import graphs, patterns, syncs
from tb_mfu_plugin.analysis.time.idle_gaps import HOST, OTHER, SYNC, HostActivity, idle_gaps
from tb_mfu_plugin.analysis.time.steps import find_steps
from tb_mfu_plugin.trace.decode.decode import decode_trace


def test_gaps_split_into_dataloader_sync_and_rest(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.launch_kernel("k1", 10, 100, 200)  # launched at 10, runs [100, 300)
    b.launch_kernel("k2", 20, 500, 100)  # launched at 20, runs [500, 600)
    b.runtime("cudaStreamSynchronize", 310, 170)  # blocks [310, 480]: returns inside the gap [300, 500)
    b.events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            "pid": b.pid,
            "tid": b.tid,
            "ts": 650,
            "dur": 100,
            "args": {},
        }
    )
    t = decode_trace(str(b.write(tmp_path / "g.pt.trace.json.gz")))
    steps = find_steps(t, 0)
    host_windows = [(float(a), float(e)) for a, e in zip(steps.cpu_start, steps.cpu_end, strict=True)]
    host = HostActivity(
        patterns.dataloader_rows(t),
        syncs.find_syncs(t.cpu, t.names, host_windows).rows,
        t.launcher,
        graphs.graph_launched(t, t.launcher),
    )
    g = idle_gaps(t, steps, t.gpu, host, sync_gap_tolerance_us=0.0, launch_gap_max_us=50.0)
    # idle: [0, 100) before k1, [300, 500) between, [600, 1000) after k2 up to the step's end
    assert g.start.tolist() == [0, 300, 600]
    assert g.end.tolist() == [100, 500, 1000]
    assert g.weight.tolist() == [100, 200, 400]
    assert g.dataloader_us.tolist() == [0, 0, 100]
    # the sync gives back its blocked time, at most the gap
    assert g.sync_us.tolist() == [0, 170, 0]
    assert g.rest_us.tolist() == [100, 30, 300]
    # the host launched k1 and k2 during the first gap: the GPU waited for it
    assert g.cause.tolist() == [HOST, OTHER, OTHER]
    assert g.total(SYNC) == 170
    assert g.total(OTHER) == 330
    (row,) = g.sync_us_by_row
    assert t.names[t.cpu.name[row]] == "cudaStreamSynchronize"


def test_a_sync_returning_just_before_a_gap_counts_within_the_tolerance(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.launch_kernel("k1", 10, 100, 200)
    b.launch_kernel("k2", 20, 500, 100)
    b.runtime("cudaDeviceSynchronize", 200, 98)  # returns at 298, 2 µs before the gap at 300
    t = decode_trace(str(b.write(tmp_path / "s.pt.trace.json.gz")))
    steps = find_steps(t, 0)
    rows = syncs.find_syncs(t.cpu, t.names, [(0.0, 1000.0)]).rows
    host = HostActivity(np.empty(0, np.int64), rows, t.launcher, np.zeros(len(t.gpu), bool))
    strict = idle_gaps(t, steps, t.gpu, host, sync_gap_tolerance_us=0.0, launch_gap_max_us=50.0)
    assert strict.total(SYNC) == 0
    tolerant = idle_gaps(t, steps, t.gpu, host, sync_gap_tolerance_us=5.0, launch_gap_max_us=50.0)
    assert tolerant.sync_us.tolist() == [0, 98, 0]
