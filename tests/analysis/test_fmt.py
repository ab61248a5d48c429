"""``tb_mfu_plugin.analysis.fmt`` writes each figure as the tab's ``frontend/src/format.ts`` does: the
same string for the same number, checked against format.ts itself, run under node.

The CLI, the tab and the saved page then show one figure as one string (tests/e2e/test_faces.py
checks that on the samples); this test covers the values no sample happens to hold: ties at
the rounding digit, unit boundaries, thousands separators, zero, negatives, huge and tiny.
"""

from __future__ import annotations

import json
import math
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


def _changes() -> list[float]:
    """Changes (analysis.run.compare's FigureDelta.delta) as the compared runs give them: zero and
    its sign, the 10 % edge, ties, tiny and large, random."""
    rng = random.Random(29)
    xs = [0.0, -0.0, 0.05, 0.0999, 0.09995, 0.1, 0.125, -0.125, 0.0125, 1.0, 9.4, -100.0, 1e-9, 12.25, 0.45]
    xs += [(b - a) / abs(a) for a, b in ([37.7, 18.88], [2.0, 2.2], [2.0, 2.19], [986, 357.7], [0.0033, 0.0])]
    xs += [rng.uniform(-2, 2) for _ in range(300)] + [rng.uniform(-60, 60) for _ in range(300)]
    return xs + [10 ** rng.uniform(-3, 9) * rng.choice((-1, 1)) for _ in range(200)]


def test_counts_of_one_row_share_their_decimals() -> None:
    """``tb-mfu compare``'s count rows: "986.0" beside "357.7", never "986" beside "357.7"."""
    assert fmt.counts([986, 357.7]) == ["986.0", "357.7"]
    assert fmt.counts([3, 0]) == ["3", "0"]
    assert fmt.counts([0.5, 12, None]) == ["0.50", "12.00", fmt.NA]
    assert fmt.counts([]) == []


def test_changes_are_signed_and_empty_when_unknown() -> None:
    assert fmt.change((18.88 - 37.7) / 37.7, "relative") == "\u221250 %" and fmt.change(0.05, "relative") == "+5.0 %"
    assert fmt.change(0.123, "relative") == "+12 %" and fmt.change(-0.05, "relative") == "\u22125.0 %"
    assert fmt.change(12.2, "pp") == "+12.2 pp" and fmt.change(0.0, "pp") == "\u00b10.0 pp"
    assert fmt.change(4.06, "pp") == "+4.1 pp"
    assert fmt.change(None, "relative") == fmt.change(None, "pp") == fmt.change(math.nan, "pp") == ""


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
    deltas = _changes()
    (tmp_path / "values.json").write_text(json.dumps({**values, "deltas": deltas}))
    script = tmp_path / "run.mjs"
    script.write_text(
        "import * as f from './format.mjs';\n"
        "import { readFileSync } from 'node:fs';\n"
        "const v = JSON.parse(readFileSync(new URL('./values.json', import.meta.url)));\n"
        "const out = {};\n"
        "for (const [name, xs] of Object.entries(v)) if (name !== 'deltas') out[name] = xs.map((x) => f[name](x));\n"
        "out.na = ['pct', 'dur', 'bytes', 'flops'].map((n) => f[n](null));\n"
        "out.deltas = [null, ...v.deltas].map((x) => [f.change(x, 'pp'), f.change(x, 'relative')]);\n"
        "console.log(JSON.stringify(out));\n"
    )
    tab = json.loads(subprocess.run(["node", str(script)], check=True, capture_output=True, timeout=120).stdout)
    assert [[fmt.change(x, "pp"), fmt.change(x, "relative")] for x in [None, *deltas]] == tab.pop("deltas")
    for name, xs in values.items():
        ours = [PAIRS[name](x) for x in xs]
        wrong = [(x, a, b) for x, a, b in zip(xs, ours, tab[name], strict=True) if a != b]
        assert not wrong, (name, wrong[:10])
    assert tab["na"] == [fmt.NA] * 4 == [PAIRS[n](None) for n in ("pct", "dur", "bytes", "flops")]
