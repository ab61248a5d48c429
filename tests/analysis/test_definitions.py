"""One table defines every figure (``analysis/definitions/``): the tab's generated
``definitions.ts``, docs/metrics.md and the README state it with the same words, and the faces take
their labels from it instead of spelling them again."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
from conftest import load_module

from tb_mfu_plugin.analysis import definitions as D
from tb_mfu_plugin.analysis.report import LaunchStats, RankRow, Step, Summary

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "frontend" / "src"


def _gen():  # type: ignore[no-untyped-def]
    return load_module(ROOT / "scripts" / "gen_definitions.py")


def test_generated_definitions_are_current() -> None:
    """definitions.ts, docs/metrics.md's table and the README's are what the table renders."""
    for path, text in _gen().rendered().items():
        assert path.read_text(encoding="utf-8") == text, f"stale {path.name}: run python scripts/gen_definitions.py"


def test_docs_and_readme_state_each_definition_as_the_tab_does() -> None:
    metrics = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ts = (SRC / "definitions.ts").read_text(encoding="utf-8")
    gen = _gen()
    for name, d in D.DEFINITIONS.items():
        row = f"| {gen._md(d.label)} | `{name}` | {gen._md(d.definition)} |"
        assert row in metrics, name
        assert (row in readme) == (name in gen.README_FIGURES), name
        assert gen._ts_string(d.definition) in ts and gen._ts_string(d.label) in ts, name


def _fields(cls: type[msgspec.Struct]) -> set[str]:
    return set(cls.__struct_fields__)


def test_every_name_is_a_key_of_the_report() -> None:
    """A definition names a figure the report carries (or one derived only by reading it)."""
    from tb_mfu_plugin.analysis.memory.types import Headroom, Memory, MemoryStep, Recompute

    blocks = {
        "launches": _fields(LaunchStats),
        "ranks": _fields(RankRow),
        "memory": _fields(Memory),
        "memory.headroom": _fields(Headroom),
        "memory.recompute": _fields(Recompute),
        "memory.steps": _fields(MemoryStep),
        "steps": _fields(Step),
    }
    derived = {"mfu_median_step": "summary.distribution.mfu.median"}
    for name in D.DEFINITIONS:
        block, _, key = name.rpartition(".")
        if name in derived:
            assert derived[name] in D.DEFINITIONS[name].definition
        elif block in blocks:
            assert key in blocks[block], name
        elif block == "breakdown":
            from tb_mfu_plugin.analysis.time.aggregate import BREAKDOWN_KEYS

            assert key in BREAKDOWN_KEYS, name
        elif block == "critical_path":
            from tb_mfu_plugin.analysis.critical_path.classes import CLASSES

            assert key in CLASSES, name
        elif block == "whatif":
            from tb_mfu_plugin.analysis.critical_path.report_types import WhatIfCase

            assert key in _fields(WhatIfCase), name
        elif block in ("flops", "device", "strategies"):
            continue  # FlopsDetail, Device, StrategyRow: checked by name below
        else:
            assert key in _fields(Summary), name
    from tb_mfu_plugin.analysis.flops.detail import FlopsDetail
    from tb_mfu_plugin.analysis.report import Device
    from tb_mfu_plugin.analysis.run.strategies import StrategyRow

    assert {"hfu", "achieved_tflops_while_busy"} <= _fields(FlopsDetail)
    assert "peak_flops" in _fields(Device) and {"mfu_min", "peak_allocated_max"} <= _fields(StrategyRow)


def test_every_shared_summary_share_is_defined() -> None:
    """Each share and count of the summary that the faces show has a definition."""
    shown = {f for f in _fields(Summary) if f.endswith(("_share", "_per_step")) or f in ("mfu", "sm_efficiency")}
    assert shown <= set(D.DEFINITIONS), sorted(shown - set(D.DEFINITIONS))


def test_the_tab_takes_the_headline_labels_from_the_table() -> None:
    """No tab source spells a headline figure's label as its own string: it reads it from
    definitions.ts (f.label / f.definition), so a label changes in one place."""
    labels = {D.DEFINITIONS[n].label for n in _gen().README_FIGURES}
    # not the figure: the logo, the words of an evidence key, a roofline op's own achieved rate
    elsewhere = {("header.ts", "MFU"), ("diagnosis.ts", "MFU"), ("roofline.ts", "Achieved")}
    found = []
    for path in sorted(SRC.glob("*.ts")):
        if path.name in ("definitions.ts", "report_types.ts"):
            continue
        text = path.read_text(encoding="utf-8")
        for lab in labels:
            if (path.name, lab) not in elsewhere and re.search(r"['\"`]" + re.escape(lab) + r"['\"`]", text):
                found.append(f"{path.name}: {lab!r}")
    assert not found, found


def test_two_figures_never_share_a_label() -> None:
    """Two aggregations get two names: a label names one figure, except where two keys carry the same
    figure by definition (the GPU idle after syncs share, and the breakdown's part that is it; the job's
    MFU, and the Strategies column that shows it)."""
    same_figure = {
        frozenset({"gpu_idle_after_sync_share", "breakdown.idle_after_sync"}),
        frozenset({"ranks.job.mfu", "strategies.job_mfu"}),
    }
    by_label: dict[str, set[str]] = {}
    for name, d in D.DEFINITIONS.items():
        by_label.setdefault(d.label, set()).add(name)
    shared = {label: names for label, names in by_label.items() if len(names) > 1}
    assert all(frozenset(names) in same_figure for names in shared.values()), shared
