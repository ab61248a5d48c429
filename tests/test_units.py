"""Every number with a unit is formatted by one function per unit (issue 23): in Python by
``tb_mfu_plugin/analysis/fmt.py``, in the tab by ``frontend/src/format.ts``, and the two give the same text
for the same value.

The scan reads every string literal of the package (``tokenize``: f-strings and ``str.format``
templates, which the rules' titles and fixes are) and every TypeScript source line, and fails on a
number formatted in place and followed by a unit (``{x:.1f} MiB``, ``{share:.0%}``,
``${x.toFixed(1)} ms``): such a figure would read differently from the same figure elsewhere (a
finding said "80.1 MiB" in its title and "84.0 MB" in its evidence).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tokenize
from pathlib import Path

import pytest

from tb_mfu_plugin.analysis import fmt

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tb_mfu_plugin"
SRC = ROOT / "frontend" / "src"

_UNIT = r"(?:%|[kKMGTP]i?B\b|B\b|[µu]s\b|ns\b|ms\b|s\b|[MGTP]?FLOP(?:/s)?\b|[GMT]B/s\b)"
# A replacement field with a format spec ("{x:.1f}", "{x/1e9:,.0f}"), then a unit; or a spec that
# itself prints a percentage ("{x:.0%}").
_PY_ADHOC = re.compile(r"\{[^{}:!]*(?:![rsa])?:[^{}]*[dfegn]\}\s?" + _UNIT + r"|\{[^{}:]*:[^{}]*%\}")
# Allowed their own: the formatters themselves; and the trace layer, which reads files and words
# I/O errors about its settings in the units they are given in (limits.py writes the size flags
# back as "8 GiB", the inverse of parse_size; a listing timeout in seconds), never a figure.
_PY_OWN = {PACKAGE / "analysis" / "fmt.py"}
_PY_OWN_DIRS = (PACKAGE / "trace",)

# A value turned into text in place (toFixed / toLocaleString / String(...)) and followed by a unit,
# or a template field followed by a unit whose expression is not a call of the formatters.
_TS_ADHOC = re.compile(
    r"\$\{(?:(?![^}]*\bf\.\w+\()[^}]*|f\.count\([^}]*)\}\s?" + _UNIT.replace("%|", "")
)  # a count with a unit after it is a figure of that unit, formatted by the wrong function
_TS_FIXED = re.compile(r"\.(?:toFixed|toPrecision)\(|\.toLocaleString\([^)]")  # (a Date's toLocaleString(): no unit)
# CSS lengths (a bar's width in %) and numbers handed to the charts (+x.toFixed(3)) are not text.
_TS_NOT_TEXT = re.compile(r"width: `\$\{|\+\(?[\w.]+\(?[^)]*\)?\.toFixed\(|\+part\(|\+b\.\w+\.toFixed|\+\(r\[1\]")
_TS_OWN = {"format.ts", "definitions.ts", "report_types.ts"}


def _py_strings(path: Path) -> list[tuple[int, str]]:
    out = []
    with open(path, "rb") as f:
        for tok in tokenize.tokenize(f.readline):
            if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                out.append((tok.start[0], tok.string))
    return out


def _is_docstring_or_comment(text: str) -> bool:
    return text.startswith(('"""', "'''", 'r"""', "r'''"))


def test_no_figure_is_formatted_in_place_in_the_package() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in _PY_OWN or path.is_relative_to(_PY_OWN_DIRS[0]):
            continue
        for line, text in _py_strings(path):
            if _is_docstring_or_comment(text):
                continue
            for m in _PY_ADHOC.finditer(text):
                found.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}")
    assert not found, "format these with tb_mfu_plugin.analysis.fmt (one function per unit):\n" + "\n".join(found)


def test_no_figure_is_formatted_in_place_in_the_tab() -> None:
    found = []
    for path in sorted(SRC.glob("*.ts")):
        if path.name in _TS_OWN:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("//") or _TS_NOT_TEXT.search(line):
                continue
            if _TS_ADHOC.search(line) or _TS_FIXED.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "format these with format.ts (one function per unit):\n" + "\n".join(found)


def test_the_scan_finds_what_it_is_for() -> None:
    """The patterns catch the forms that were in the code (so a passing scan means something)."""
    for bad in ('"{mib:.1f} MiB"', '"{us:.0f} µs per step"', '"{share:.0%} of matmul"', '"{x / 1e12:.1f} TFLOP/s"'):
        assert _PY_ADHOC.search(bad), bad
    for fine in ('"{count:.0f} kernels"', '"{name} (calls {api})"', '"{share:share} of matmul"'):
        assert not _PY_ADHOC.search(fine), fine
    assert _TS_ADHOC.search("return `${f.count(v, 1)} TFLOP/s`;")  # a count formatter, then a unit
    assert _TS_ADHOC.search("`${f.dur(x)} per step`") is None
    assert _TS_ADHOC.search("`${x.toFixed(1)} ms`") and _TS_FIXED.search("`${x.toFixed(1)} ms`")
    assert _TS_ADHOC.search("`${n} MB`")


# The same values through fmt.py and format.ts: zero, tiny, ties at every rounding boundary,
# each scale change, negatives, NaN.
_VALUES = [
    0.0,
    1e-9,
    0.000123,
    0.004,
    0.00995,
    0.01,
    0.0125,
    0.125,
    0.5,
    0.9999,
    1.0,
    1.2,
    2.5,
    9.995,
    10.0,
    99.95,
    100.0,
    999.5,
    1000.0,
    1234.5678,
    9999.99,
    12345.0,
    999999.0,
    1e6,
    2.5e6,
    1.23e9,
    4.6042e12,
    989.4e12,
    1.5e15,
    -3.25,
    -1500.0,
    float("nan"),
]
_PAIRS = {
    "pct": "pct",
    "us": "dur",
    "nbytes": "bytes",
    "flops": "flops",
    "flop_rate": "tflops",
    "gbps": "gbps",
    "intensity": "intensity",
    "count": "count",
}


def test_python_and_the_tab_format_every_unit_alike(tmp_path: Path) -> None:
    esbuild = SRC.parent / "node_modules" / ".bin" / "esbuild"
    if shutil.which("node") is None or not esbuild.exists():
        pytest.skip("frontend dependencies not installed (cd frontend && npm ci)")
    entry = tmp_path / "entry.ts"
    entry.write_text(
        f"import * as f from {json.dumps(str(SRC / 'format.ts'))};\n"
        f"const values = {json.dumps([v if v == v else None for v in _VALUES])}.map((v) => (v === null ? NaN : v));\n"
        f"const pairs = {json.dumps(_PAIRS)};\n"
        "const out: Record<string, string[]> = {};\n"
        "for (const [py, ts] of Object.entries(pairs)) out[py] = values.map((v) => (f as any)[ts](v));\n"
        "console.log(JSON.stringify(out));\n",
        encoding="utf-8",
    )
    bundle = tmp_path / "entry.mjs"
    subprocess.run(
        [str(esbuild), str(entry), "--bundle", "--format=esm", "--platform=node", f"--outfile={bundle}"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    done = subprocess.run(["node", str(bundle)], check=True, capture_output=True, text=True, timeout=60)
    tab = json.loads(done.stdout)
    for py, ts in _PAIRS.items():
        ours = [getattr(fmt, py)(v) for v in _VALUES]
        assert ours == tab[py], f"fmt.{py} vs format.ts {ts}:\n" + "\n".join(
            f"  {v!r}: {a!r} != {b!r}" for v, a, b in zip(_VALUES, ours, tab[py], strict=True) if a != b
        )


def test_every_unit_of_the_definitions_has_one_formatter() -> None:
    from tb_mfu_plugin.analysis.definitions import DEFINITIONS, UNIT_MEANING

    assert set(fmt.FORMATTERS) == set(UNIT_MEANING)
    ts = (SRC / "format.ts").read_text(encoding="utf-8")
    block = ts[ts.index("export const BY_UNIT") :]
    block = block[: block.index("};")]
    assert {u for u in UNIT_MEANING if re.search(rf"^\s*{u}\b", block, re.M)} == set(UNIT_MEANING)
    for name in DEFINITIONS:
        assert fmt.figure(name, None) == fmt.NA, name  # unknown reads n/a, never 0
