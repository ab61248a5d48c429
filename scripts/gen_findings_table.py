"""Rewrite docs/diagnosis.md's table of what the rules find on the H200 sample traces (between
``<!-- sample-findings:start -->`` and ``<!-- sample-findings:end -->``) from the report of each
sample, so that the page quotes today's headline gains and not those of the day it was written.

    python scripts/gen_findings_table.py          # rewrite the table
    python scripts/gen_findings_table.py --check  # exit 1 if the table is not today's
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "diagnosis.md"
START, END = "<!-- sample-findings:start -->", "<!-- sample-findings:end -->"
# the single-GPU samples, each recorded to show one pattern or to show none (sample_traces/README.md)
SAMPLES = (
    "gpt_naive_attention",
    "gpt_sdpa_fused",
    "gpt_compile",
    "tiny_mlp_launch_bound",
    "tiny_mlp_cuda_graph",
    "pageable_copy_loop",
    "small_copies",
    "resnet50_bf16",
    "dataloader_stall",
    "fp32_no_tensor_cores",
    "low_sm_efficiency",
)


def _thousands(us: float) -> str:
    return f"{us:,.0f}".replace(",", " ")


def table() -> str:
    """The table: each sample's findings with their headline gain (µs per step, as every face shows
    it), largest first, and the gain of all of them together."""
    sys.path.insert(0, str(ROOT))
    from tb_mfu_plugin.running.pipeline import analyze_path

    lines = [
        "| trace | findings, headline gain in µs per step (largest first) | all together |",
        "|---|---|---:|",
    ]
    for name in SAMPLES:
        (w,) = [w for r in analyze_path(str(ROOT / "sample_traces" / name)).runs for w in r.workers]
        found = ", ".join(
            f"`{f.id}` {_thousands(f.est_gain_us_per_step)}" if f.est_gain_us_per_step is not None else f"`{f.id}`"
            for f in w.findings
        )
        together = w.combined_gain_us_per_step
        lines.append(f"| `{name}` | {found or 'none'} | {_thousands(together) if together is not None else 'n/a'} |")
    return "\n".join(lines)


def rendered(text: str) -> str:
    """The page with today's table between the markers."""
    pattern = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{DOC.relative_to(ROOT)}: no {START} … {END} block")
    return pattern.sub(lambda _: f"{START}\n{table()}\n{END}", text)


def main() -> int:
    from doc_regen import rewrite_or_check  # beside this script, which runs from scripts/

    return rewrite_or_check(DOC, rendered, __file__, "gains that are not today's")


if __name__ == "__main__":
    raise SystemExit(main())
