"""Typed evidence (issue 32, item 5): one struct per rule, tagged with its id, every field with its
unit; the rules build them on real traces; reports round-trip through msgpack (worker processes) and
JSON (the tab's disk cache) as the same types; every face writes a value by its unit."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import msgspec
import numpy as np
import pytest
from conftest import SAMPLES

from tb_mfu_plugin.analysis.evidence import EVIDENCE_TYPES, Evidence, FindingEvidence, SyncPointEvidence, rule_of
from tb_mfu_plugin.analysis.evidence.show import UNKNOWN, evidence_lines, layout, value_text
from tb_mfu_plugin.analysis.evidence.units import EVIDENCE_UNITS, evidence_fields, field_label, unit
from tb_mfu_plugin.analysis.fmt import FORMATTERS
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.report import Finding, WorkerReport
from tb_mfu_plugin.diagnosis import DEFAULT, RULE_IDS, RULES
from tb_mfu_plugin.diagnosis.finding import make_finding
from tb_mfu_plugin.diagnosis.registry import Hit, Rule
from tb_mfu_plugin.running.jobs import decode_reports, encode_reports
from tb_mfu_plugin.running.pipeline import analyze_path
from tb_mfu_plugin.tensorboard.disk_cache import DiskCache
from tb_mfu_plugin.tensorboard.stored_reports import FileKey, StoredReports
from tb_mfu_plugin.trace.locate.locations import Location

from .helpers import blank_evidence
from .test_registry import RUNS, SHOWN_BY_HAND_MADE


def _leaves(fields: Any) -> list[Any]:
    return [x for f in fields for x in (_leaves(f.fields) if f.fields else [f])]


def test_one_struct_per_rule_tagged_with_its_id_in_the_rules_order() -> None:
    assert [rule_of(c) for c in EVIDENCE_TYPES] == [r.id for r in RULES] == list(RULE_IDS)
    assert all(issubclass(c, FindingEvidence) and c.__struct_config__.tag_field == "rule" for c in EVIDENCE_TYPES)


def test_every_evidence_field_has_a_unit() -> None:
    for cls in EVIDENCE_TYPES:
        leaves = _leaves(evidence_fields(cls))
        assert leaves and all(f.unit in EVIDENCE_UNITS for f in leaves), cls
        # the faces' order: the cost first, the rule's own fields, the what-if and the note last
        keys = [f.key for f in layout(cls)]
        assert keys[:3] == ["cost_us_per_step", "cost_share", "cost_above_step_us_per_step"]
        assert keys[-2:] == ["whatif", "note"]


class _NoUnit(FindingEvidence, tag="no_unit"):
    seconds: float


class _Mixed(FindingEvidence, tag="mixed"):
    either: Annotated[float, unit("time")] | str


def test_a_field_without_one_unit_is_refused() -> None:
    with pytest.raises(TypeError, match="_NoUnit.seconds has no unit"):
        evidence_fields(_NoUnit)
    with pytest.raises(TypeError, match="union of several types"):
        evidence_fields(_Mixed)


def test_labels_read_as_words() -> None:
    assert field_label("host_blocked_us_per_step") == "Host blocked / step"
    assert field_label("us_per_step") == "Time / step" and field_label("us") == "Time"
    assert field_label("median_kernel_us") == "Median kernel"
    assert field_label("gpu_idle_recovered_us_per_step") == "GPU idle recovered / step"
    assert field_label("busbw_gbps") == "Bus bandwidth"


def test_a_rule_must_give_its_own_evidence() -> None:
    """The registry refuses a hit whose evidence is another rule's: the tag is the finding's id."""
    (sync,) = [r for r in RULES if r.id == "sync_point"]
    other = Rule("dataloader_stall", __name__, sync.check, sync.titles, sync.fixes, None, (), ())
    hit = Hit(cost_us=1.0, gain_us=1.0, evidence=blank_evidence("sync_point"), args={"subject": "x", "count": 1})

    ctx = SimpleNamespace(step_us=100.0, mfu=None, th=DEFAULT)  # what Rule.finding reads
    with pytest.raises(TypeError, match="gave the evidence of 'sync_point'"):
        other.finding(ctx, hit)  # type: ignore[arg-type]


def test_make_finding_checks_the_evidence_against_its_types() -> None:
    """A value of the wrong type fails where the rule makes its finding, never in a face; numpy
    scalars become plain numbers and floats are rounded as before."""
    ev = msgspec.structs.replace(
        blank_evidence("sync_point"), count_per_step=np.float64(2.123456), explicit=np.bool_(1)
    )
    kw: dict[str, Any] = dict(id="sync_point", title="t", cost_us=5, gain_us=5, step_us=100.0, mfu=None)
    kw |= dict(recommendation="r", high_share=0.1, medium_share=0.03)
    f = make_finding(evidence=ev, **kw)
    assert isinstance(f.evidence, SyncPointEvidence)
    assert f.evidence.count_per_step == 2.1235 and f.evidence.explicit is True
    assert (f.evidence.cost_us_per_step, f.evidence.cost_share) == (5.0, 0.05)
    with pytest.raises(msgspec.ValidationError, match=r"\$.host_blocked_us_per_step"):
        make_finding(evidence=msgspec.structs.replace(ev, host_blocked_us_per_step="5 µs"), **kw)


@pytest.fixture(scope="module")
def sample_reports() -> list[WorkerReport]:
    out = []
    for run in RUNS:
        if not any((SAMPLES / run).glob("rank0.*.pt.trace.json*")):
            pytest.skip(f"sample trace not recorded: {SAMPLES / run}")
        out += [w for r in analyze_path(str(SAMPLES / run)).runs for w in r.workers]
    return out


def test_every_rule_builds_its_struct_on_the_samples(sample_reports: list[WorkerReport]) -> None:
    """On the samples that together fire every rule (test_registry.RUNS), each finding's evidence
    is its rule's struct, its JSON has exactly the struct's keys, and it decodes alone as the union."""
    found: set[str] = set()
    for w in sample_reports:
        assert not [n for n in w.notes if n.startswith("diagnosis")], w.notes
        for f in w.findings:
            (cls,) = [c for c in EVIDENCE_TYPES if rule_of(c) == f.id]
            assert type(f.evidence) is cls
            data = json.loads(msgspec.json.encode(f.evidence))
            keys = {x.encode_name for x in msgspec.structs.fields(cls)} | {"rule"}
            assert data["rule"] == f.id and set(data) <= keys
            assert msgspec.json.decode(msgspec.json.encode(f.evidence), type=Evidence) == f.evidence
            found.add(f.id)
    assert found == set(RULE_IDS) - SHOWN_BY_HAND_MADE


def test_reports_round_trip_between_processes_and_through_the_disk_cache(
    sample_reports: list[WorkerReport], tmp_path: Path
) -> None:
    """msgpack between worker processes (running.jobs) and JSON in the tab's disk cache
    (tensorboard.stored_reports) give back the same reports, evidence structs and all."""
    assert decode_reports(encode_reports(sample_reports)) == sample_reports
    stored = StoredReports(DiskCache(str(tmp_path)), AnalysisOptions())
    key = FileKey(Location.local(str(tmp_path / "x.pt.trace.json")), 1, 1.0, "run", "rank0", "1")
    stored.write(key, sample_reports)
    assert stored.read(key) == sample_reports


def test_every_value_is_written_by_its_unit(sample_reports: list[WorkerReport]) -> None:
    """Each line of every finding's evidence (what the CLI and the notebook show) is its value
    through its unit's one formatter, and no face reads a unit from a key's name."""
    units: set[str] = set()
    for w in sample_reports:
        for f in w.findings:
            lines = evidence_lines(f.evidence)
            assert lines[0].path == "cost_us_per_step" and lines[0].text == FORMATTERS["time"](
                f.evidence.cost_us_per_step
            )
            for line in lines:
                units.add(line.unit)
                if line.unit in FORMATTERS and isinstance(line.value, float | int) and not isinstance(line.value, bool):
                    assert line.text == FORMATTERS[line.unit](line.value), line  # type: ignore[index]
                elif isinstance(line.value, list):
                    assert line.text == ", ".join(value_text(line.unit, v) for v in line.value)
                elif line.value is None:
                    assert line.text == UNKNOWN
            assert "note" not in {x.path for x in lines}
    assert {"time", "share", "bytes", "count", "text", "flag", "bandwidth", "factor"} <= units


def test_the_findings_own_types_leave_no_free_form_json() -> None:
    """Finding.evidence is the union of the rules' structs: its schema names each of them."""
    (schema,), defs = msgspec.json.schema_components([Finding])
    ev = defs["Finding"]["properties"]["evidence"]
    names = {r["$ref"].rsplit("/", 1)[-1] for r in ev["anyOf"]}
    assert names == {c.__name__ for c in EVIDENCE_TYPES}
    assert ev["discriminator"]["propertyName"] == "rule"
