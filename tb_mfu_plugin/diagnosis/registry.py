"""The rule registry: a rule registers itself with its words and the thresholds it reads.

A rule is a function from the ``Context`` to ``Hit``s (the numbers it found). The ``@rule``
decorator above it holds everything else as data: the title, fix and note templates
(``str.format``, filled from the hit's ``args``; a spec naming a unit, ``{share:share}``, formats
it by that unit's one function, ``fmt.template``) and the names of the ``Thresholds`` fields
the rule reads, directly or through the Context; ``after``, the rules whose findings it reads.
The rule's id is the function's name, so it is written once; ``RULES`` is in registration
order, which is the evaluation order.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..analysis.critical_path.whatif import Change
from ..analysis.evidence import Evidence, rule_of
from ..analysis.fmt import template
from ..analysis.report import Benefit, Severity
from .context import ReportFacts
from .cost_time import Findings, TimeSet
from .finding import Finding, make_finding

# rule id -> the findings it gave and the time they claim, for the rules that ran before (and did not fail)
Fired = Mapping[str, Findings]

# Read by every rule that fires (make_finding grades the gain with them), so no rule lists them.
SEVERITY_THRESHOLDS = ("high_share", "medium_share")
# Read by the attribution of the GPU idle gaps (``Context.gaps``): a rule that reads the gaps lists them.
GAP_THRESHOLDS = ("sync_gap_tolerance_us", "launch_gap_max_us")


@dataclass(frozen=True)
class Hit:
    """What a rule found: the numbers. The registry turns it into a ``Finding`` with the words."""

    cost_us: float
    gain_us: float
    evidence: Evidence  # the rule's own struct (analysis.evidence), tagged with its id
    args: Mapping[str, Any] = field(default_factory=dict)  # fill the title, fix and note templates
    title: str = ""  # which of the rule's titles, when it has several
    fix: tuple[str, ...] = ("",)  # which of its fix texts, joined by spaces, in this order
    subject: str | None = None
    # The stretches of the steps its cost covers, on the device's clock (cost_time): the engine
    # adds the findings' gains over their union, and the tests check no two findings share time.
    time: TimeSet | None = None
    # What the fix does to the trace (analysis.critical_path.whatif): the engine re-times the step with
    # it applied, and that gives the finding's gain (diagnosis.whatif_gains). None: the rule's own estimate.
    change: Change | None = None
    # A risk rather than a time (the memory rules: a leak, a peak near the device's size): the
    # severity at least, whatever the gain.
    risk: Severity | None = None
    # What a fix that saves no step time brings, in its own unit (report.Benefit)
    benefit: Benefit | None = None


# A rule reads a Context (a device's facts and report), or only a ReportFacts (the run-level rule)
Check = Callable[[ReportFacts, Fired], list[Hit]]


@dataclass(frozen=True)
class Rule:
    id: str  # the function's name
    module: str  # where the function is
    check: Check
    titles: Mapping[str, str]
    fixes: Mapping[str, str]
    note: str | None  # how the gain is estimated: the evidence's note
    thresholds: tuple[str, ...]  # the Thresholds fields it reads, besides SEVERITY_THRESHOLDS
    after: tuple[str, ...]  # rules whose findings it reads; they are registered (and run) before it

    def __call__(self, ctx: ReportFacts, fired: Fired | None = None) -> list[Finding]:
        return [self.finding(ctx, hit) for hit in self.hits(ctx, fired)]

    def claims(self, ctx: ReportFacts, fired: Fired | None = None) -> list[tuple[Finding, TimeSet | None]]:
        """Its findings, each with the time its cost covers."""
        out = []
        for hit in self.hits(ctx, fired):
            f = self.finding(ctx, hit)
            if hit.change is not None:
                ctx.changes[(f.id, f.subject)] = (
                    hit.change,
                    ctx.mfu,
                )
            out.append((f, hit.time))
        return out

    def hits(self, ctx: ReportFacts, fired: Fired | None = None) -> list[Hit]:
        earlier = {id: (fired or {}).get(id, Findings()) for id in self.after}  # only what it declared
        return self.check(ctx, earlier)

    def finding(self, ctx: ReportFacts, hit: Hit) -> Finding:
        evidence = hit.evidence
        if rule_of(type(evidence)) != self.id:
            raise TypeError(f"diagnosis rule {self.id!r} gave the evidence of {rule_of(type(evidence))!r}")
        if self.note is not None:
            evidence = msgspec.structs.replace(evidence, note=template(self.note, **hit.args))
        return make_finding(
            id=self.id,
            subject=hit.subject,
            title=template(self.titles[hit.title], **hit.args),
            evidence=evidence,
            cost_us=hit.cost_us,
            gain_us=hit.gain_us,
            step_us=ctx.step_us,
            mfu=ctx.mfu,
            recommendation=" ".join(template(self.fixes[k], **hit.args) for k in hit.fix),
            high_share=ctx.th.high_share,
            medium_share=ctx.th.medium_share,
            risk=hit.risk,
            benefit=hit.benefit,
        )


RULES: list[Rule] = []


def _texts(text: str | Mapping[str, str]) -> Mapping[str, str]:
    return {"": text} if isinstance(text, str) else text


def rule(
    *,
    title: str | Mapping[str, str],
    fix: str | Mapping[str, str],
    note: str | None = None,
    thresholds: tuple[str, ...] = (),
    after: tuple[Rule, ...] = (),
) -> Callable[[Callable[..., list[Hit]]], Rule]:
    """Register ``def <id>(ctx) -> list[Hit]`` with its words and the thresholds it reads; with
    ``after``, ``def <id>(ctx, fired) -> list[Hit]``, which reads what those rules found."""

    def register(check: Callable[..., list[Hit]]) -> Rule:
        id = check.__name__
        if len(inspect.signature(check).parameters) != (2 if after else 1):
            raise TypeError(f"diagnosis rule {id!r} takes (ctx, fired) with after=..., else (ctx)")
        known = {r.id for r in RULES}
        if id in known:
            raise ValueError(f"diagnosis rule {id!r} is registered twice")
        late = [r.id for r in after if r.id not in known]
        if late:
            raise ValueError(f"diagnosis rule {id!r} must be registered after {late}")
        run: Check = check if after else lambda ctx, _: check(ctx)
        found = Rule(
            id, check.__module__, run, _texts(title), _texts(fix), note, thresholds, tuple(r.id for r in after)
        )
        RULES.append(found)
        return found

    return register
