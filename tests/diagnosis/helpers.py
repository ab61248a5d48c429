"""Hand-made traces for the diagnosis tests, and checks every report must pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect as mi
from tracegen import TraceBuilder

from tb_mfu_plugin.analysis.device_view import DeviceView
from tb_mfu_plugin.analysis.evidence import EVIDENCE_TYPES, Evidence, rule_of
from tb_mfu_plugin.analysis.fmt import template
from tb_mfu_plugin.analysis.options import AnalysisOptions
from tb_mfu_plugin.analysis.per_device import analyze_device
from tb_mfu_plugin.analysis.report import Finding, WaterfallBar, WorkerReport
from tb_mfu_plugin.analysis.time.steps import Steps
from tb_mfu_plugin.diagnosis import DEFAULT, RULES, Thresholds, diagnose
from tb_mfu_plugin.diagnosis.context import Context
from tb_mfu_plugin.diagnosis.cost_time import Findings
from tb_mfu_plugin.diagnosis.registry import SEVERITY_THRESHOLDS, Rule
from tb_mfu_plugin.reporting.device import with_diagnosis
from tb_mfu_plugin.trace.decode.decode import decode_trace
from tb_mfu_plugin.trace.tables import TraceTables

KEEP = ("aten::matmul", "aten::bmm", "aten::mm", "aten::addmm", "aten::linear", "aten::conv2d")


class Builder(TraceBuilder):
    """TraceBuilder plus the pieces the rules look at: launches, copies, syncs."""

    def launch(self, name: str, cpu_ts: float, gpu_ts: float, dur: float, **kw: Any) -> int:
        corr = self.runtime("cudaLaunchKernel", cpu_ts, 1.0)
        self.kernel(name, gpu_ts, dur, corr, **kw)
        return corr

    def copy(self, kind: str, cpu_ts: float, gpu_ts: float, dur: float, nbytes: int) -> None:
        corr = self.runtime("cudaMemcpyAsync", cpu_ts, 1.0)
        self.memcpy(kind, gpu_ts, dur, nbytes, corr)

    def sync(self, api: str, ts: float, dur: float) -> None:
        self.runtime(api, ts, dur)


def analyze(
    b: TraceBuilder,
    tmp_path: Path,
    th: Thresholds | None = None,
    name: str = "w",
    options: AnalysisOptions | None = None,
) -> tuple[WorkerReport, TraceTables, Steps, DeviceView]:
    """Decode, analyse device 0 and diagnose (``options``: the FLOPs and peak, as a user gives them)."""
    path = b.write(tmp_path / f"{name}.pt.trace.json.gz")
    tables = decode_trace(str(path), keep_inputs=lambda n: n in KEEP)
    analysis = analyze_device(tables, 0, options or AnalysisOptions())
    assert analysis.view is not None, analysis.report.error
    rep = with_diagnosis(analysis.report, diagnose(analysis, th))
    check_report(rep)
    check_reads_and_words(rep, tables, analysis.steps, analysis.view, th or DEFAULT, rep.findings)
    return rep, tables, analysis.steps, analysis.view


def mfu_options(mfu: float, step_us: float, peak_tflops: float = 1000.0) -> AnalysisOptions:
    """The options under which a trace of ``step_us`` steps has MFU ``mfu`` (FLOPs given by hand)."""
    return AnalysisOptions(flops_per_step=mfu * peak_tflops * 1e12 * step_us * 1e-6, peak_tflops=peak_tflops)


def rule_gain(f: Finding) -> float:
    """A finding's gain as its rule estimated it, before the engine re-timed the step with its fix
    (``evidence.whatif``; the re-timed gains are tests/diagnosis/test_whatif.py's): on hand-made
    traces whose one step annotation spans the whole step, the host holds the step however fast
    the GPU gets, so the re-timing gives 0 where the rule's arithmetic is what a test checks."""
    w = f.evidence.whatif
    return f.est_gain_us_per_step if isinstance(w, msgspec.UnsetType) else w.rule_gain_us_per_step


def _blank(t: mi.Type) -> Any:
    """The plainest value of a type: 0, "", False, an empty list or map, None where allowed."""
    if isinstance(t, mi.Metadata):
        return _blank(t.type)
    if isinstance(t, mi.UnionType):
        return None if any(isinstance(x, mi.NoneType) for x in t.types) else _blank(t.types[0])
    if isinstance(t, mi.StructType):
        return {f.encode_name: _blank(f.type) for f in t.fields if f.required}
    blanks = {mi.IntType: 0, mi.FloatType: 0.0, mi.StrType: "", mi.BoolType: False, mi.DictType: {}}
    return next((v for k, v in blanks.items() if isinstance(t, k)), [])


def blank_evidence(rule: str) -> Evidence:
    """A rule's evidence with every field at its plainest value: for findings made by hand."""
    (cls,) = [c for c in EVIDENCE_TYPES if rule_of(c) == rule]
    out: Evidence = msgspec.convert(_blank(mi.type_info(cls)), type=cls)
    return out


def ids(rep: WorkerReport) -> list[str]:
    return [f.id for f in rep.findings]


def one(rep: WorkerReport, rule: str) -> Finding:
    (f,) = [f for f in rep.findings if f.id == rule]
    return f


def check_report(rep: WorkerReport) -> None:
    """What holds for every report: sound gains, sorted findings, a waterfall that adds up."""
    assert not [n for n in rep.notes if n.startswith("diagnosis")], rep.notes
    gains = [f.est_gain_us_per_step for f in rep.findings]
    assert gains == sorted(gains, reverse=True)
    for f in rep.findings:
        assert f.severity in ("high", "medium", "low")
        cost = f.evidence.cost_us_per_step
        # no estimate exceeds the time it claims to remove
        assert 0 <= f.est_gain_us_per_step <= cost + 1e-9, f
        assert f.recommendation
        if f.est_mfu_after is not None:
            assert rep.summary is not None and rep.summary.mfu is not None
            # a projection is never an impossible figure; it starts from the run's MFU, or (a fix that
            # changes the dtype: no_tensor_cores) from its MFU against the peak of the new dtype
            assert f.est_mfu_after <= 1.0, f
            at_bf16 = rep.flops.mfu_at_bf16_peak if rep.flops is not None else None
            start = at_bf16 if f.id == "no_tensor_cores" and isinstance(at_bf16, float) else rep.summary.mfu
            assert f.est_mfu_after >= start - 1e-4
    keys = {(f.id, f.subject) for f in rep.findings}
    assert len(keys) == len(rep.findings)
    check_waterfall(rep.waterfall)
    check_waterfall_matches_summary(rep)


def check_waterfall(w: list[WaterfallBar]) -> None:
    if not w:
        return
    assert w[0].kind == "total" and w[-1].kind == "result"
    level = w[0].us_per_step
    assert level is not None
    for e in w[1:]:
        if e.us_per_step is None:  # only the result bar, when MFU is unknown or impossible
            assert e is w[-1] and e.share is None and e.mfu is None, e
            continue
        assert e.share is not None and e.us_per_step >= 0
        if e.kind == "loss":
            level -= e.us_per_step
        else:  # a subtotal or the result is what remains after the losses above it
            assert abs(e.us_per_step - level) <= 1e-6 * max(1.0, w[0].us_per_step) + 0.01, (e, level)
        assert abs(e.share - e.us_per_step / w[0].us_per_step) < 1e-4


def check_waterfall_matches_summary(rep: WorkerReport) -> None:
    """The waterfall and the summary aggregate the steps the same way (time-weighted, as MFU):
    its step is the mean step, its levels are the summary's shares of it and its result is
    MFU x step, so the bars and the headline figures agree."""
    s, w = rep.summary, {e.id: e for e in rep.waterfall}
    if s is None or not w:
        return
    step = w["step"].us_per_step
    tol = 1e-6 * step + 0.01  # the waterfall rounds to the nanosecond
    assert s.step_time_mean_us is not None and abs(step - s.step_time_mean_us) <= tol
    assert abs(w["gpu_busy"].us_per_step - s.gpu_busy_share * step) <= tol
    assert abs(w["kernels"].us_per_step - s.kernel_time_share * step) <= tol
    # the waterfall takes the traced step apart: its last bar is the traced steps' MFU x that step
    if s.mfu_traced is not None and w["mfu"].mfu is not None and not w["mfu"].clamped:
        assert abs(w["mfu"].us_per_step - s.mfu_traced * step) <= tol
    if s.mfu is None:  # unknown stays unknown: the result bar has no value
        assert w["mfu"].us_per_step is None and w["mfu"].share is None


class ReadThresholds:
    """Thresholds that remember which fields were read."""

    def __init__(self, th: Thresholds) -> None:
        self._th = th
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._th, name)
        self.read.add(name)
        return value


def check_reads_and_words(
    rep: WorkerReport,
    tables: TraceTables,
    steps: Steps,
    view: DeviceView,
    th: Thresholds,
    findings: list[Finding],
) -> dict[str, set[str]]:
    """Run as ``diagnose`` does, each rule on a fresh Context: it reads no threshold it does not
    declare (so docs/diagnosis.md's table is true), every hit fills every template of its rule
    (a fix text the trace did not choose still has its numbers), and the findings are ``findings``.
    Returns the thresholds each rule read."""
    if rep.error is not None or rep.summary is None or len(steps) == 0:
        return {}
    fired: dict[str, list[Any]] = {}
    read: dict[str, set[str]] = {}
    for rule in RULES:
        reads = ReadThresholds(th)
        ctx = Context(rep, tables, steps, view, reads)  # type: ignore[arg-type]
        hits = rule.hits(ctx, fired)
        fired[rule.id] = Findings((rule.finding(ctx, h), h.time) for h in hits)
        undeclared = reads.read - set(rule.thresholds) - set(SEVERITY_THRESHOLDS)
        assert not undeclared, f"{rule.id} reads {sorted(undeclared)} but does not declare them"
        for h in hits:
            fill_every_template(rule, h.args)
        read[rule.id] = reads.read
    found = sorted((f.id, f.subject or "") for fs in fired.values() for f in fs)
    assert found == sorted((f.id, f.subject or "") for f in findings), "not the engine's findings"
    return read


def fill_every_template(rule: Rule, args: Any) -> None:
    for text in [*rule.titles.values(), *rule.fixes.values(), *([rule.note] if rule.note else [])]:
        assert template(text, **args), (rule.id, text)
