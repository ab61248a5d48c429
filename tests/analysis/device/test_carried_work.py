"""Work the first analysed step inherited from a step before the trace: the step without the profiler
leaves it out (``critical_path.graph.Ops.carried``), and the report says so where it is worth saying
(``mfu_notes.carried_work_note``)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, validation_folder

from tb_mfu_plugin.analysis.device.mfu_notes import CARRIED_NOTE_SHARE, carried_work_note
from tb_mfu_plugin.running.pipeline import analyze_path


def test_no_inherited_work_or_too_little_needs_no_note() -> None:
    assert carried_work_note(0, 0.0, 13_000.0) is None
    assert carried_work_note(3, CARRIED_NOTE_SHARE * 13_000.0 * 0.9, 13_000.0) is None
    assert carried_work_note(117, 3_340.0, None) is None


def test_inherited_work_is_named_with_its_time() -> None:
    note = carried_work_note(117, 3_340.0, 13_900.0)
    assert note is not None and "117 GPU ops (3.34 ms)" in note and "leaves them out" in note


def test_flexattentions_first_step_on_the_seventh_host() -> None:
    """The seventh H100 host's FlexAttention trace began with the warmup step's last 117 kernels in
    the queue: the headline names them, and reads within 5 % of the MFU measured without the profiler
    (−8.5 % while it counted them)."""
    host = ROOT / "validation" / "h100_host7"
    if not (host / "traces.tar.xz").is_file():
        pytest.skip("validation/h100_host7 is not in this checkout")
    truth = json.loads((host / "mfu_truth" / "ground_truth.json").read_text())["runs"]["flex_attention_compile"]
    (w,) = [
        w
        for r in analyze_path(str(validation_folder("h100_host7", "mfu_truth") / "flex_attention_compile")).runs
        for w in r.workers
    ]
    assert any("117 GPU ops" in n for n in w.notes), w.notes
    assert w.summary is not None and w.summary.step_time_unprofiled_us is not None
    assert w.summary.step_time_unprofiled_us == pytest.approx(truth["step_time_unprofiled"]["median_us"], rel=0.05)
