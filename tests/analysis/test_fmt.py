"""``tb_mfu_plugin.analysis.fmt`` writes each figure as the tab's ``frontend/src/format.ts`` does: the
same string for the same number, checked against format.ts itself, run under node.

The CLI, the tab and the saved page then show one figure as one string (tests/e2e/test_faces.py
checks that on the samples); this test covers the values no sample happens to hold: ties at
the rounding digit, unit boundaries, thousands separators, zero, negatives, huge and tiny.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from tb_mfu_plugin.analysis import fmt

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "frontend"
PAIRS = {"pct": fmt.pct, "dur": fmt.us, "bytes": fmt.nbytes, "flops": fmt.flops, "factor": fmt.factor}


def _values() -> dict[str, list[float]]:
    rng = random.Random(23)
    edges = [0.0, -0.0, 1e-9, 0.005, 0.0125, 0.125, 0.5, 0.9999, 1.0, 1.000001, 1.5, 2.675, 9.995, 10, 99.95]
    edges += [999.5, 1000, 9999.5, 1e4, 1e6 - 0.5, 1e6, 1.005e6, 1234567.891, 1e9, 1e12, 4.604204941312e12, 1e15]
    edges += [1e18, -12.25, -0.004, 12.25, 0.1225]
    shares = [rng.random() for _ in range(300)] + [rng.random() * 0.01 for _ in range(100)] + [0.0005, 0.00125]
    spread = [10 ** rng.uniform(-3, 19) * rng.choice((1, -1)) for _ in range(600)]
    return {
        "pct": edges[:14] + shares,
        "dur": edges + spread,
        "bytes": edges + spread,
        "flops": edges + spread,
        "factor": edges + spread,
    }


def _delta_pairs() -> list[list[float]]:
    """Pairs (before, after) for the compared runs' changes: equal, zero, signs, ties, the 10 % edge."""
    rng = random.Random(29)
    pairs = [[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [2.0, 2.2], [2.0, 2.19], [0.5, 0.55], [-4.0, -2.0], [986, 357.7]]
    pairs += [[0.118, 0.24], [0.2040, 0.2912], [0.0033, 0.0], [1e-9, 2e-9], [0.00125, 0.0025]]
    pairs += [[rng.random(), rng.random()] for _ in range(200)]
    return pairs + [[10 ** rng.uniform(-3, 9), 10 ** rng.uniform(-3, 9)] for _ in range(200)]


def test_counts_of_one_row_share_their_decimals() -> None:
    """``tb-mfu compare``'s count rows: "986.0" beside "357.7", never "986" beside "357.7"."""
    assert fmt.counts([986, 357.7]) == ["986.0", "357.7"]
    assert fmt.counts([3, 0]) == ["3", "0"]
    assert fmt.counts([0.5, 12, None]) == ["0.50", "12.00", fmt.NA]
    assert fmt.counts([]) == []


def test_deltas_are_signed_and_empty_when_unknown() -> None:
    assert fmt.rel_delta(37.7, 18.88) == "\u221250 %" and fmt.rel_delta(2.0, 2.1) == "+5.0 %"
    assert fmt.pp_delta(0.118, 0.240) == "+12.2 pp" and fmt.pp_delta(0.5, 0.5) == "\u00b10.0 pp"
    assert fmt.rel_delta(0.0, 1.0) == fmt.rel_delta(None, 1.0) == fmt.pp_delta(0.1, None) == ""


def test_python_figures_are_the_tabs(tmp_path: Path) -> None:
    esbuild = FRONTEND / "node_modules" / ".bin" / "esbuild"
    if shutil.which("node") is None or not esbuild.exists():
        pytest.skip("frontend dependencies not installed (cd frontend && npm ci)")
    bundle = tmp_path / "format.mjs"
    subprocess.run(
        [str(esbuild), str(FRONTEND / "src" / "format.ts"), "--bundle", "--format=esm", f"--outfile={bundle}"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    values = _values()
    deltas = _delta_pairs()
    (tmp_path / "values.json").write_text(json.dumps({**values, "deltas": deltas}))
    script = tmp_path / "run.mjs"
    script.write_text(
        "import * as f from './format.mjs';\n"
        "import { readFileSync } from 'node:fs';\n"
        "const v = JSON.parse(readFileSync(new URL('./values.json', import.meta.url)));\n"
        "const out = {};\n"
        "for (const [name, xs] of Object.entries(v)) if (name !== 'deltas') out[name] = xs.map((x) => f[name](x));\n"
        "out.na = ['pct', 'dur', 'bytes', 'flops'].map((n) => f[n](null));\n"
        "out.deltas = v.deltas.map(([a, b]) => [f.relDelta(a, b), f.ppDelta(a, b)]);\n"
        "console.log(JSON.stringify(out));\n"
    )
    tab = json.loads(subprocess.run(["node", str(script)], check=True, capture_output=True, timeout=120).stdout)
    assert [[fmt.rel_delta(a, b), fmt.pp_delta(a, b)] for a, b in deltas] == tab.pop("deltas")
    for name, xs in values.items():
        ours = [PAIRS[name](x) for x in xs]
        wrong = [(x, a, b) for x, a, b in zip(xs, ours, tab[name], strict=True) if a != b]
        assert not wrong, (name, wrong[:10])
    assert tab["na"] == [fmt.NA] * 4 == [PAIRS[n](None) for n in ("pct", "dur", "bytes", "flops")]
