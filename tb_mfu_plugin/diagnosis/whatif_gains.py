"""Each finding's gain from re-timing the step with its fix applied, and the gains of several fixes
from one re-timing of all of them.

A rule says what its fix changes in the trace (``Hit.change``: ops faster or folded away, syncs
removed, host time hidden, launches replayed from a CUDA graph...). The device's critical-path model
(``analysis.critical_path``, built by the analysis) is re-timed with that change, and the modelled
step less the re-timed one is the finding's ``est_gain_us_per_step``: what the fix gives once the
work it exposes next (launches behind a removed sync, a host that becomes the limit once kernels are
fused) is timed too. The rule's own estimate stays in the evidence (``whatif.rule_gain_us_per_step``).

Applied together, the changes give the combined gain: weights only ever shrink, so it is at least
each gain alone and never more than the step. The what-if panel's combinations (every subset of
the ``MAX_PANEL`` largest re-timed findings) are re-timed here too, so that no face computes one.
"""

from __future__ import annotations

from itertools import combinations

import msgspec

from ..analysis.critical_path.report_types import WhatIf, WhatIfCase, WhatIfFinding
from ..analysis.critical_path.whatif import Change, Model, Outcome
from ..analysis.device.mfu import projected_mfu
from ..analysis.evidence import UnprofiledWhatIf, WhatIfEvidence
from ..analysis.fmt import us
from ..analysis.report import Finding
from .context import Context
from .cost_time import Claim, TimeSet, combined_gain, union
from .finding import make_finding, rebased, round_gain

MAX_PANEL = 6  # findings the panel combines (2^6 - 1 re-timings at most)
# Ops x re-timings the panel's combinations may cost: fewer findings past it (on the 1 GB benchmark
# trace, 16 modelled steps of 4.8 k ops, one re-timing takes about 12 ms and 4 findings are combined: docs/scaling.md).
# Each combination is re-timed twice, on the trace and without the profiler, so the panel costs twice that.
PANEL_WORK = 1.5e6

Claimed = list[tuple[Finding, TimeSet | None]]
# a re-timed finding: the finding, its change, the MFU its projection starts from, its re-timing on
# the trace and without the profiler's host cost
Timed = tuple[Finding, Change, float | None, Outcome, Outcome]


def retime(ctx: Context, claimed: Claimed) -> tuple[Claimed, float | None, WhatIf | None]:
    """The claims with each re-timed finding's gain from its re-timing, the combined gain (None:
    no model, or no finding to re-time: the engine then combines the rules' own gains) and the
    what-if panel (None without a model)."""
    model = ctx.view.critical
    if model is None:
        return claimed, None, None
    timed: list[Timed] = []
    out: Claimed = []
    for f, t in claimed:
        got = ctx.changes.get((f.id, f.subject))
        if got is None:  # its rule's gain, a share of the step the re-timed gains are of
            out.append((rebased(f, model.unprofiled_step_us, ctx.mfu, ctx.th.high_share, ctx.th.medium_share), t))
            continue
        change, mfu = got
        outcome, unprofiled = model.simulate([change]), model.simulate([change], without_profiler=True)
        new = _retimed(ctx, f, change, mfu, outcome, unprofiled)
        timed.append((new, change, mfu, outcome, unprofiled))
        out.append((new, t))
    panel = _panel(ctx, model, timed)
    if not timed:
        return out, None, panel
    all_at_once = panel.combined
    assert all_at_once is not None
    times = {id(f): t for f, t in out}
    timed_ids = {id(f) for f, *_ in timed}
    held = [t for f, *_ in timed if (t := times[id(f)]) is not None]
    # the headline gains are the ones without the profiler: so is the gain of all of them at once
    together = all_at_once.unprofiled_gain_us_per_step
    claims = [Claim(together if together is not None else all_at_once.gain_us_per_step, union(held))]
    claims += [Claim(f.est_gain_us_per_step, t) for f, t in out if id(f) not in timed_ids]
    return out, combined_gain(claims, model.unprofiled_step_us), panel


def _retimed(
    ctx: Context, f: Finding, change: Change, mfu: float | None, outcome: Outcome, unprofiled: Outcome
) -> Finding:
    """The finding with the re-timed gain, its cost at least that (the fix removes at least what it
    gives), and the re-timing in its evidence. The headline gain is the one without the profiler
    (issue 33: what a user measures once the fix is in, on a run that is not profiled), and its share,
    severity and projected MFU are of the step without the profiler, the headline MFU's; the gain on
    the trace as recorded stays as a second figure (``evidence.whatif.profiled_gain_us_per_step``)."""
    profiled = _gain(outcome.gain_us)
    gain = headline_gain(f.id, outcome, unprofiled)
    step = unprofiled.step_us + unprofiled.gain_us  # the step without the profiler, before the fix
    whatif = WhatIfEvidence(
        change=change.what,
        step_us_after=outcome.step_us,
        floor_us_per_step=outcome.floor_us,
        rule_gain_us_per_step=f.est_gain_us_per_step,
        profiled_gain_us_per_step=profiled,
        # the headline: the re-timing with the profiler's host cost taken out of the trace
        # (whatif.unprofiled): what the fix gives a run that is not profiled
        unprofiled=UnprofiledWhatIf(
            step_us=step,
            step_us_after=step - gain,
            gain_us_per_step=gain,
            gain_share=gain / step if step > 0 else 0.0,
        ),
        steps_modelled=ctx.view.critical.g.steps if ctx.view.critical is not None else None,
    )
    note = f.evidence.note
    evidence = msgspec.structs.replace(
        f.evidence,
        whatif=whatif,
        note="gain: the step re-timed on its critical path with the fix applied and the profiler's host cost "
        "taken out (evidence.whatif)" + (f"; the rule's own estimate: {note}" if isinstance(note, str) else ""),
    )
    cost = min(max(f.evidence.cost_us_per_step, gain), step)
    return make_finding(
        id=f.id,
        subject=f.subject,
        title=f.title + _held_back(f.est_gain_us_per_step, round_gain(gain), round_gain(profiled), ctx.step_us),
        evidence=evidence,
        cost_us=cost,
        gain_us=gain,
        step_us=step,
        mfu=mfu,
        recommendation=f.recommendation,
        high_share=ctx.th.high_share,
        medium_share=ctx.th.medium_share,
        benefit=f.benefit,
    )


# A host sync costs the GPU the time the host takes to launch work after it, which the profiler only
# lengthens: without the profiler it costs at most what it costs in the trace. The de-profiled model
# can turn a host-bound step GPU-bound and so credit a sync it does not cost; on the recorded control
# (validation/whatif_pairs/item_sync_host_bound) it predicted 2.46 ms where the fix gave nothing.
AT_MOST_PROFILED = frozenset({"sync_point"})


# A re-timing's gain below this is the arithmetic's, not the fix's: trace timestamps are µs since an
# epoch (5.8e12 µs on the H100 hosts), where a float64 resolves about 0.001 µs, so a fix that moves
# nothing re-times to a gain of a few thousandths of a µs (0.00049 µs on ddp_2gpu's below_roofline,
# which its title wrote "0 ns" and its headline, rounded to 0.0005, "1 ns").
RETIME_NOISE_US = 0.01


def _gain(us_: float) -> float:
    """A re-timed gain, never below 0 and 0 within ``RETIME_NOISE_US``."""
    return us_ if us_ >= RETIME_NOISE_US else 0.0


def headline_gain(finding_id: str, outcome: Outcome, unprofiled: Outcome) -> float:
    """A re-timed fix's headline gain: the one without the profiler, for a sync at most the profiled
    one. The finding and the panel's case of its fix alone both take it, so they agree."""
    gain = _gain(unprofiled.gain_us)
    return min(gain, _gain(outcome.gain_us)) if finding_id in AT_MOST_PROFILED else gain


# A re-timed gain below this share of the rule's own estimate is said in the title: the cause's time is
# real, but the step waits on other work, so its fix alone gives little.
HELD_BACK = 0.5


def _held_back(rule_gain: float, gain: float, profiled: float, step_us: float) -> str:
    """What the title adds when the fix alone would give far less than the time its cause takes: a
    finding never reads "loses X ms" beside a gain of 0 without saying why. Where the fix gives the
    traced step what it would not give a run without the profiler, the profiler's host cost is why."""
    if step_us <= 0 or rule_gain < 0.01 * step_us or gain >= HELD_BACK * rule_gain:
        return ""
    if profiled >= HELD_BACK * rule_gain:
        return (
            f"; alone, its fix saves {us(gain)} a step without the profiler ({us(profiled)} on the traced "
            "step): most of this is the profiler's own host cost"
        )
    return f"; alone, its fix saves {us(gain)} a step: other work holds the step"


def _panel(ctx: Context, model: Model, timed: list[Timed]) -> WhatIf:
    """Every subset of the largest re-timed findings, and all of them at once."""
    step = model.step_us
    ranked = sorted(timed, key=lambda x: -x[0].est_gain_us_per_step)
    k = MAX_PANEL
    while k > 1 and len(model.g.ops) * (2**k) > PANEL_WORK:
        k -= 1
    shown = ranked[:k]
    cases: list[WhatIfCase] = []
    for size in range(1, len(shown) + 1):
        for subset in combinations(range(len(shown)), size):
            picked = [shown[i] for i in subset]
            mask = sum(1 << i for i in subset)
            if size == 1:
                f, _, _, out, unprofiled = picked[0]
                cases.append(_case(mask, model, ctx.mfu, out, unprofiled, headline_gain(f.id, out, unprofiled)))
            else:
                cases.append(_retimed_case(mask, model, ctx.mfu, [p[1] for p in picked]))
    combined = _retimed_case((1 << len(shown)) - 1, model, ctx.mfu, [x[1] for x in timed]) if timed else None
    findings = [WhatIfFinding(id=f.id, subject=f.subject, change=ch.what) for f, ch, *_ in shown]
    return WhatIf(
        step_us=step,
        unprofiled_step_us=model.unprofiled_step_us,
        mfu=ctx.mfu,
        steps_modelled=model.g.steps,
        findings=findings,
        cases=cases,
        combined=combined,
        findings_retimed=len(timed),
    )


def _retimed_case(mask: int, model: Model, mfu: float | None, changes: list[Change]) -> WhatIfCase:
    """Several fixes at once, re-timed on the trace and without the profiler."""
    out, unprofiled = model.simulate(changes), model.simulate(changes, without_profiler=True)
    return _case(mask, model, mfu, out, unprofiled, _gain(unprofiled.gain_us))


def _case(mask: int, model: Model, mfu: float | None, outcome: Outcome, unprofiled: Outcome, gain: float) -> WhatIfCase:
    """A re-timing, its headline ``gain`` the one without the profiler: its MFU after is projected
    from the step without the profiler, the headline MFU's, as a finding's ``est_mfu_after`` is (one
    page once showed "→ MFU 46.3 %" on a finding and 42.5 % for the same fix in this panel, projected
    from the traced step)."""
    step, before = model.step_us, model.unprofiled_step_us
    traced = _gain(outcome.gain_us)
    return WhatIfCase(
        unprofiled_step_us=before - gain,
        unprofiled_gain_us_per_step=gain,
        unprofiled_gain_share=gain / before if before > 0 else 0.0,
        unprofiled_floor_us=unprofiled.floor_us,
        mask=mask,
        step_us=outcome.step_us,
        gain_us_per_step=traced,
        gain_share=traced / step if step > 0 else 0.0,
        mfu=projected_mfu(mfu, before, gain),
        floor_us=outcome.floor_us,
    )
