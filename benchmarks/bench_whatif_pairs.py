#!/usr/bin/env python3
"""Each finding's predicted gain against the gain its fix really gave, on the recorded H200 pairs.

validation/whatif_pairs/<pair>/{before,after} are two runs of one workload that differ by exactly one
fix; ground_truth.json holds their step times measured without the profiler (median of 40 steps).
For each pair this analyses the profiled 'before', takes the finding the fix answers, and compares:

- predicted: the finding's re-timed gain with the profiler's host cost taken out of the trace
  (``evidence.whatif.unprofiled.gain_share``, diagnosis.whatif_gains), as a share of the step,
  applied to the unprofiled 'before' median. The share, because the profiled trace's step is not
  the unprofiled one (the same step ran 35 ms unprofiled and 67 ms profiled on fused_adamw): the
  model's de-profiled step is within 10 % of the measured one on most pairs, and the share carries
  what is left of that error to neither side;
- measured: before median - after median, unprofiled.

It also prints the gain re-timed on the profiled trace itself (``est_gain_us_per_step``) against the
profiled gain measured (the mean of the recorded steps), the rule's own estimate before the re-timing,
and the combined what-if of every finding on the 'before' against the measured 'after'.

The control pair (item_sync_host_bound) makes the same fix where it cannot help: its measured
"gain" is host jitter of either sign, so a prediction within CONTROL_SHARE of the step is right.

A pair whose truth is unsteady (its 40 steps on either side spread wider than STEADY_SPREAD, p90
over p10) is printed and counted in the median, but not held to the bound on every pair: its gain
moves by more than that bound from one stretch of steps to the next (fused_adamw's before ran
28.8-47.2 ms, p10 to p90, on this H200 host).

usage: python benchmarks/bench_whatif_pairs.py [PAIRS_DIR] [--markdown]
exit status 1 when a bound of issue 26 is not met (within 25 % on the median pair, 50 % on every
pair, the sign right on every pair, the control near 0).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tb_mfu_plugin.analysis.report import Finding, WorkerReport  # noqa: E402
from tb_mfu_plugin.running.pipeline import analyze_path  # noqa: E402

PAIRS = ROOT / "validation" / "whatif_pairs"
# The finding each pair's fix answers.
MATCHING = {
    "attention_sdpa": "naive_attention",
    "pinned_copies": "pageable_memcpy",
    "item_sync": "sync_point",
    "item_sync_host_bound": "sync_point",
    "fused_adamw": "unfused_optimizer",
    "cuda_graph": "launch_bound",
    "bf16_autocast": "no_tensor_cores",
    "compile_elementwise": "unfused_elementwise",
    "dataloader_workers": "dataloader_stall",
    "hf_llama_eager_sdpa": "naive_attention",  # validation/gain_pairs' Hugging Face pairs
    "hf_gpt2_fused_adamw": "unfused_optimizer",
    "hf_bert_eager_sdpa": "naive_attention",  # validation/h100_host5/gain_pairs_noncausal
    "hf_vit_eager_sdpa": "naive_attention",
    # GradScaler's found_inf .item() gone with fused AdamW, which takes it on the GPU
    "gradscaler_fused": "sync_point",
}
# Pairs that make a finding's second fix, whose headline gain is its first fix's: recorded and listed
# with their measured gain, not scored against that headline.
SECOND_FIX = {
    "gradscaler_bf16": "bf16 without a GradScaler is `sync_point`'s second fix for GradScaler's found_inf read; "
    "its headline is the first's (a fused optimizer, which also fuses the step)",
}
# Pairs whose 'after' lost a finding of the 'before' without its fix: capturing the step in a CUDA
# graph silences `unfused_optimizer` (its launches are gone), yet the graph still runs the for-loop
# AdamW's kernels, which the combined what-if also fuses, so it is faster than the 'after' by more.
STILL_RUNS = {"cuda_graph": "the for-loop AdamW's kernels, replayed inside the graph"}
CONTROLS = {"item_sync_host_bound"}
CONTROL_SHARE = 0.05  # a control's prediction within 5 % of the step counts as "no gain"
MEDIAN_BOUND, EVERY_BOUND = 0.25, 0.50
STEADY_SPREAD = 1.25  # p90 / p10 of a side's unprofiled steps, at most, for the pair to face EVERY_BOUND


@dataclass(frozen=True)
class Row:
    pair: str
    finding: str
    predicted_us: float  # unprofiled re-timing's share x the measured unprofiled before
    measured_us: float  # unprofiled: before median - after median
    before_us: float
    after_us: float
    model_before_us: float  # the model's de-profiled step
    model_after_us: float  # ... and with the fix
    trace_gain_us: float  # evidence.whatif.profiled_gain_us_per_step: re-timed on the trace as recorded
    profiled_gain_us: float  # measured with the profiler on (mean of the recorded steps)
    rule_gain_us: float  # the rule's own estimate before the re-timing
    combined_after_us: float | None  # every finding's fix at once, as a share applied to the before
    floor_us: float | None  # the combined re-timing's lower bound, on the same scale
    control: bool
    spread: float  # the wider side's p90 / p10 of its unprofiled steps
    before_findings: frozenset[str]
    after_findings: frozenset[str]

    @property
    def all_answered(self) -> bool:
        """The 'after' has none of the 'before''s findings: the one fix answered all of them, so the
        combined what-if and the measured 'after' are the same change (except where the 'after' still
        runs what a finding of the 'before' would have fixed, ``STILL_RUNS``)."""
        return not self.before_findings & self.after_findings and self.pair not in STILL_RUNS

    @property
    def error(self) -> float | None:
        """(predicted - measured) / |measured|; None on a control."""
        return None if self.control else (self.predicted_us - self.measured_us) / abs(self.measured_us)

    @property
    def steady(self) -> bool:
        return self.spread <= STEADY_SPREAD

    @property
    def sign_right(self) -> bool:
        if self.control:
            return abs(self.predicted_us) <= CONTROL_SHARE * self.before_us
        return (self.predicted_us > 0) == (self.measured_us > 0)


def _finding(w: WorkerReport, fid: str) -> Finding | None:
    found = [f for f in w.findings if f.id == fid]
    return max(found, key=lambda f: f.est_gain_us_per_step) if found else None


def _spread(side: dict) -> float:
    t = side["step_time_unprofiled"]
    return float(t["p90_us"] / t["p10_us"])


def pair_row(pairs: Path, pair: str, truth: dict) -> Row:
    (w,) = [w for r in analyze_path(str(pairs / pair / "before")).runs for w in r.workers]
    after_ids = {f.id for r in analyze_path(str(pairs / pair / "after")).runs for x in r.workers for f in x.findings}
    fid = MATCHING[pair]
    f = _finding(w, fid)
    g = truth["pairs"][pair]
    before = g["before"]["step_time_unprofiled"]["median_us"]
    after = g["after"]["step_time_unprofiled"]["median_us"]
    prof = float(
        np.mean(g["before"]["step_time_us_profiled_steps"]) - np.mean(g["after"]["step_time_us_profiled_steps"])
    )
    ev = f.evidence.whatif if f is not None else msgspec.UNSET
    un = None if isinstance(ev, msgspec.UnsetType) else ev.unprofiled
    share = un.gain_share if un else 0.0
    combined_after = floor = None
    wi = w.whatif
    if (
        wi is not None
        and wi.combined is not None
        and wi.combined.unprofiled_step_us is not None
        and wi.unprofiled_step_us > 0
    ):
        # on the unprofiled scale, as the predicted gain: the model's de-profiled steps' ratio x the before
        combined_after = before * wi.combined.unprofiled_step_us / wi.unprofiled_step_us
        floor = before * (wi.combined.unprofiled_floor_us or 0.0) / wi.unprofiled_step_us
    return Row(
        pair=pair,
        finding=fid if f is not None else f"{fid} (did not fire)",
        predicted_us=share * before,
        measured_us=before - after,
        before_us=before,
        after_us=after,
        model_before_us=un.step_us if un else float("nan"),
        model_after_us=un.step_us_after if un else float("nan"),
        trace_gain_us=ev.profiled_gain_us_per_step if not isinstance(ev, msgspec.UnsetType) else 0.0,
        profiled_gain_us=prof,
        rule_gain_us=ev.rule_gain_us_per_step if not isinstance(ev, msgspec.UnsetType) else 0.0,
        combined_after_us=combined_after,
        floor_us=floor,
        control=pair in CONTROLS,
        spread=max(_spread(g["before"]), _spread(g["after"])),
        before_findings=frozenset(f.id for f in w.findings),
        after_findings=frozenset(after_ids),
    )


def rows(pairs: Path = PAIRS) -> list[Row]:
    """Each recorded pair's row; ``pairs`` with its traces, or a folder whose traces are in its host's
    traces.tar.xz (validation/packed.py), unpacked once."""
    sys.path.insert(0, str(ROOT / "validation"))
    from packed import unpacked

    pairs = Path(unpacked(str(pairs)))
    truth = json.loads((pairs / "ground_truth.json").read_text())
    return [pair_row(pairs, p, truth) for p in MATCHING if (pairs / p / "before").is_dir()]


@dataclass(frozen=True)
class Verdict:
    median_error: float
    worst_error: float
    signs_right: bool
    median_ok: bool
    every_ok: bool

    @property
    def ok(self) -> bool:
        return self.median_ok and self.every_ok and self.signs_right


def verdict(found: list[Row]) -> Verdict:
    errors = [abs(r.error) for r in found if r.error is not None]
    med = statistics.median(errors)
    worst = max((abs(r.error) for r in found if r.error is not None and r.steady), default=0.0)
    return Verdict(med, worst, all(r.sign_right for r in found), med <= MEDIAN_BOUND, worst <= EVERY_BOUND)


def _ms(x: float | None) -> str:
    return "–" if x is None or x != x else f"{x / 1e3:.2f}"


def table(found: list[Row], markdown: bool) -> str:
    head = (
        "pair",
        "matching finding",
        "predicted gain ms",
        "measured gain ms",
        "error",
        "model before / after ms (measured)",
        "re-timed on the trace ms",
        "measured profiled ms",
        "rule's own ms",
        "all findings: step after ms (floor)",
    )
    lines = []
    for r in found:
        err = "control" if r.error is None else f"{r.error:+.0%}" + ("" if r.steady else " ²")
        model = f"{_ms(r.model_before_us)} / {_ms(r.model_after_us)} ({_ms(r.before_us)} / {_ms(r.after_us)})"
        comb = f"{_ms(r.combined_after_us)} ({_ms(r.floor_us)})" + ("" if r.all_answered else " ¹")
        lines.append(
            (
                f"`{r.pair}`" if markdown else r.pair,
                f"`{r.finding}`" if markdown else r.finding,
                _ms(r.predicted_us),
                _ms(r.measured_us),
                err,
                model,
                _ms(r.trace_gain_us),
                _ms(r.profiled_gain_us),
                _ms(r.rule_gain_us),
                comb,
            )
        )
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
        out += ["| " + " | ".join(line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*head), *(fmt.format(*line) for line in lines)])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", nargs="?", type=Path, default=PAIRS)
    p.add_argument("--markdown", action="store_true", help="the table as docs/diagnosis.md holds it")
    args = p.parse_args()
    found = rows(args.pairs)
    print(table(found, args.markdown))
    v = verdict(found)
    print(
        "¹ the 'after' still has some of the 'before''s findings, or still runs what one of them would fix "
        "(STILL_RUNS): it fixed one of them, the what-if all"
    )
    print(
        f"² unsteady truth: a side's unprofiled steps spread over {STEADY_SPREAD:g}x (p90 / p10); "
        "counted in the median, not held to the bound on every pair"
    )
    print(
        f"\nmedian |error| {v.median_error:.0%} (bound {MEDIAN_BOUND:.0%}: {'met' if v.median_ok else 'NOT met'}); "
        f"worst {v.worst_error:.0%} on the steady pairs "
        f"(bound {EVERY_BOUND:.0%}: {'met' if v.every_ok else 'NOT met'}); "
        f"sign {'right on every pair' if v.signs_right else 'WRONG on a pair'} "
        f"(the control within {CONTROL_SHARE:.0%} of its step)"
    )
    return 0 if v.ok else 1


if __name__ == "__main__":
    sys.exit(main())
