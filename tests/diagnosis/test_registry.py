"""The rule registry: every rule has its words and declares the thresholds it reads, the
docs name every rule and threshold, and the order is the one the rules depend on."""

from __future__ import annotations

import dataclasses
import inspect
import re
import string
import sys
from typing import Any

import pytest
from conftest import ROOT, SAMPLES

from tb_mfu_plugin.diagnosis import DEFAULT, RULE_IDS, RULES, Thresholds, engine
from tb_mfu_plugin.diagnosis import context as context_module
from tb_mfu_plugin.diagnosis.context import Context
from tb_mfu_plugin.diagnosis.registry import GAP_THRESHOLDS, SEVERITY_THRESHOLDS, Rule, rule
from tb_mfu_plugin.running.pipeline import analyze_path

from .helpers import check_reads_and_words

FIELDS = [f.name for f in dataclasses.fields(Thresholds)]
DOCS = ROOT / "docs" / "diagnosis.md"
TABLE_START = "<!-- thresholds table: generated from the rule registry; tests/diagnosis/test_registry.py checks it -->"
TABLE_END = "<!-- end of the thresholds table -->"


def test_every_rule_has_a_title_a_fix_and_known_thresholds() -> None:
    assert len(RULES) == len(set(RULE_IDS)) == 22
    for r in RULES:
        assert r.titles and all(t.strip() for t in r.titles.values()), r.id
        assert r.fixes and all(t.strip() for t in r.fixes.values()), r.id
        assert len(set(r.thresholds)) == len(r.thresholds), r.id
        assert set(r.thresholds) <= set(FIELDS), (r.id, set(r.thresholds) - set(FIELDS))
        assert not set(r.thresholds) & set(SEVERITY_THRESHOLDS), r.id  # every rule reads those


def test_declared_thresholds_are_named_where_the_rule_or_its_context_reads_them() -> None:
    """A declaration never goes stale: the name is in the rule's module or in the Context's."""
    shared = inspect.getsource(context_module)
    for r in RULES:
        source = inspect.getsource(sys.modules[r.module])
        for name in r.thresholds:
            assert f"th.{name}" in source or f"th.{name}" in shared, (r.id, name)


def test_every_threshold_is_read_by_a_rule_or_the_severity() -> None:
    declared = {name for r in RULES for name in r.thresholds} | set(SEVERITY_THRESHOLDS)
    assert declared == set(FIELDS)


def test_rules_run_after_the_rules_whose_findings_they_read() -> None:
    order = {r.id: i for i, r in enumerate(RULES)}
    # the rules that leave out the time of earlier findings (one cause, one finding), and gpu_idle
    assert [r.id for r in RULES if r.after] == [
        "small_copies",
        "memcpy_bound",
        "unfused_optimizer",
        "launch_bound",
        "low_sm_efficiency",
        "dataloader_stall",
        "gpu_idle",
        "below_roofline",
        "memory_headroom",
    ]
    for r in RULES:
        assert all(order[a] < order[r.id] for a in r.after), r.id


def test_a_rule_id_registers_once_and_after_what_it_reads() -> None:
    before = list(RULES)

    def sync_point(ctx: Context) -> list[Any]:  # the name of a registered rule
        return []

    with pytest.raises(ValueError, match="registered twice"):
        rule(title="t", fix="f")(sync_point)
    unregistered = Rule("x", __name__, lambda ctx, fired: [], {"": "t"}, {"": "f"}, None, (), ())

    def later(ctx: Context, fired: Any) -> list[Any]:
        return []

    with pytest.raises(ValueError, match="registered after"):
        rule(after=(unregistered,), title="t", fix="f")(later)
    with pytest.raises(TypeError, match="takes"):
        rule(title="t", fix="f")(later)  # reads findings but declares no rule to read them from
    assert RULES == before


def test_every_template_names_only_format_fields() -> None:
    """Titles, fixes and notes are str.format templates: a literal brace would break them."""
    for r in RULES:
        for text in [*r.titles.values(), *r.fixes.values(), *([r.note] if r.note else [])]:
            fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
            assert all(re.fullmatch(r"[a-z_0-9]+", f) for f in fields), (r.id, fields)


# --------------------------------------------------------------------------- on real traces

# Together these show every rule firing (sample_traces/README.md).
RUNS = (
    "gpt_naive_attention",
    "tiny_mlp_cuda_graph",
    "pageable_copy_loop",
    "dataloader_stall",
    "fp32_no_tensor_cores",
    "small_copies",
    "low_sm_efficiency",
    "ddp_2gpu",
    "memory_leak",
    "gpt_memory_checkpointing",
)
# Rules no sample trace shows yet, each fired on hand-made traces by its own tests: the pipeline
# runs are shared fixtures, not samples (tests/diagnosis/test_pipeline_real.py); the samples'
# collectives reach about half the link's peak once the wait for the straggler is taken out; and
# pageable_copy_loop's copies, which run with no kernel alongside, are all pageable: pageable_memcpy's.
# No sample comes near its device's memory or fragments its allocator (near_oom, allocator_fragmentation).
SHOWN_BY_HAND_MADE = {"pipeline_bubble", "low_bus_bandwidth", "memcpy_bound", "near_oom", "allocator_fragmentation"}


def test_on_real_traces_rules_read_only_what_they_declare(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rule, run on the samples as the pipeline runs it (FLOPs and roofline applied), reads
    no undeclared threshold and fills all its templates; together the samples fire every rule."""
    read: dict[str, set[str]] = {}
    real = engine.run_claims

    def checked(ctx: Context, notes: Any) -> Any:
        found = real(ctx, notes)
        findings = [f for f, _ in found]
        for k, v in check_reads_and_words(ctx.report, ctx.tables, ctx.steps, ctx.view, ctx.th, findings).items():
            read.setdefault(k, set()).update(v)
        return found

    monkeypatch.setattr(engine, "run_claims", checked)
    fired: set[str] = set()
    for run in RUNS:
        if not any((SAMPLES / run).glob("rank0.*.pt.trace.json*")):
            pytest.skip(f"sample trace not recorded: {SAMPLES / run}")
        for w in analyze_path(str(SAMPLES / run)).runs[0].workers:
            assert w.error is None and not [n for n in w.notes if n.startswith("diagnosis")], (run, w.notes)
            fired |= {f.id for f in w.findings}
    assert fired == set(RULE_IDS) - SHOWN_BY_HAND_MADE
    assert set(read) == set(RULE_IDS)


# --------------------------------------------------------------------------- docs/diagnosis.md


def thresholds_table() -> str:
    """The docs' table of thresholds: name, default and what reads it, in the dataclass's order."""
    rows = ["| threshold | default | read by |", "|---|---|---|"]
    for name in FIELDS:
        readers = [f"`{r.id}`" for r in RULES if name in r.thresholds]
        if name in GAP_THRESHOLDS:  # the idle gaps' attribution, which the waterfall's idle bars are
            readers.append("the waterfall")
        if name in SEVERITY_THRESHOLDS:
            readers.append("every finding's severity")
        rows.append(f"| `{name}` | `{getattr(DEFAULT, name)!r}` | {', '.join(readers)} |")
    return "\n".join(rows)


def test_docs_name_every_rule_in_the_rules_table() -> None:
    text = DOCS.read_text()
    for rule_id in RULE_IDS:
        assert re.search(rf"^\| `{rule_id}`", text, re.MULTILINE), rule_id


def test_docs_thresholds_table_is_current() -> None:
    text = DOCS.read_text()
    assert TABLE_START in text and TABLE_END in text
    current = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    expected = thresholds_table()
    assert current == expected, f"replace the table in {DOCS} with:\n{expected}"
