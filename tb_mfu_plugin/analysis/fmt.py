"""Figures as text: one function per unit, the Python twin of the tab's ``frontend/src/format.ts``.

Every figure with a unit that the CLI, a finding's words or a note shows goes through one of these
(``tests/test_units.py`` scans the package for any other way), and each gives the same text as its
namesake in ``format.ts`` for the same value (the test runs both), so the terminal, the tab and the
HTML export agree to the character:

============  ===============  ==========================================
unit          here             format.ts
============  ===============  ==========================================
share         ``pct``          ``pct``
time (µs)     ``us``           ``dur``
bytes         ``nbytes``       ``bytes``
FLOPs         ``flops``        ``flops``
FLOP/s        ``flop_rate``    ``tflops``
GB/s          ``gbps``         ``gbps``
FLOP/B        ``intensity``    ``intensity``
count         ``count``        ``count``
factor        ``factor``       ``factor``
change        ``rel_delta``    ``relDelta`` (relative, "+12 %")
change        ``pp_delta``     ``ppDelta`` (of shares, "+4.1 pp")
============  ===============  ==========================================

Rounding is half away from zero on the shortest decimal that reads back as the value, as
``Intl.NumberFormat`` rounds (Python's own format rounds the exact binary value half to even: 9.995
would read 9.99 here and 10.00 in the tab). Plain strings (no rich), so ``cli`` can word a
message without loading the tables.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a leaf module: the analysis and the diagnosis word their notes with it too
    from .definitions import Unit
    from .report import KernelStats, Summary, WorkerReport

NA = "n/a"
IMPOSSIBLE = "impossible (>100 %)"


def _known(x: float | None) -> bool:
    """A finite number (``isNumber`` in format.ts): None, NaN and infinities read n/a."""
    return x is not None and not isinstance(x, bool) and math.isfinite(x)


def fixed(x: float, digits: int) -> str:
    """``x`` with ``digits`` decimals and thousands separators: ``toLocaleString('en-US', ...)``."""
    # the shortest decimal that reads back as x (repr), rounded half up: what ICU does
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    return f"{q:,.{digits}f}"


def pct(x: float | None, digits: int | None = None) -> str:
    """A share (0-1) or an MFU as a percentage. Above 100 % it is impossible and never a figure
    (analysis.plausibility)."""
    if x is None or not _known(x):
        return NA
    if x > 1.0 + 1e-6:
        return IMPOSSIBLE
    v = x * 100
    return f"{fixed(v, digits if digits is not None else pct_digits(v))} %"


def pct_digits(v: float) -> int:
    """Decimals of a percentage ``v``: one from 1 %, two below; under 0.01 % two significant digits,
    so a tiny MFU reads 0.00079 %, never a rounded 0 (``pctDigits`` in format.ts)."""
    a = abs(v)
    if a >= 1 or a == 0:
        return 1
    if a >= 0.01:
        return 2
    return min(8, 1 - math.floor(math.log10(a)))


def us(x: float | None) -> str:
    """A duration given in µs, in ns, µs, ms or s."""
    if x is None or not _known(x):
        return NA
    a = abs(x)
    if a < 1:
        return f"{fixed(x * 1000, 0)} ns"
    if a < 1000:
        return f"{fixed(x, 2 if a < 10 else 1 if a < 100 else 0)} µs"
    if a < 1e6:
        return f"{fixed(x / 1000, 2)} ms"
    return f"{fixed(x / 1e6, 2)} s"


def nbytes(x: float | None) -> str:
    """A byte count in decimal units (1 MB = 10⁶ B, matching GB/s = 10⁹ B/s)."""
    if x is None or not _known(x):
        return NA
    if abs(x) < 1000:
        return f"{fixed(x, 0)} B"
    v, unit = x / 1000, "kB"
    for bigger in ("MB", "GB", "TB", "PB"):
        if abs(v) < 1000:
            break
        v, unit = v / 1000, bigger
    return f"{fixed(v, 2 if abs(v) < 10 else 1 if abs(v) < 100 else 0)} {unit}"


def flops(x: float | None) -> str:
    """FLOPs (a count) in MFLOP, GFLOP, TFLOP or PFLOP."""
    if x is None or not _known(x):
        return NA
    a = abs(x)
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if a >= scale:
            return f"{fixed(x / scale, 2)} {unit}"
    return f"{fixed(x, 0)} FLOP"


def flop_rate(x: float | None) -> str:
    """FLOP/s in TFLOP/s."""
    if x is None or not _known(x):
        return NA
    t = x / 1e12
    return f"{fixed(t, 2 if t < 10 else 1)} TFLOP/s"


def gbps(x: float | None) -> str:
    """A bandwidth in GB/s (10⁹ B/s)."""
    if x is None or not _known(x):
        return NA
    return f"{fixed(x, 2 if x < 10 else 1)} GB/s"


def intensity(x: float | None) -> str:
    """Arithmetic intensity: FLOPs per byte."""
    if x is None or not _known(x):
        return NA
    return f"{fixed(x, 2 if x < 10 else 1 if x < 1000 else 0)} FLOP/B"


def count(x: float | None, digits: int | None = None) -> str:
    """A count per step: whole numbers without decimals, others with 2 below 10 and 1 above."""
    if x is None or not _known(x):
        return NA
    d = digits if digits is not None else (0 if float(x).is_integer() else 2 if abs(x) < 10 else 1)
    return fixed(x, d)


def counts(xs: list[float | None]) -> list[str]:
    """Counts shown side by side (one row of runs compared) with one number of decimals, the most
    ``count`` gives any of them: 986 beside 357.7 reads "986.0", not "986"."""
    known = [x for x in xs if x is not None and _known(x)]
    digits = max((0 if float(x).is_integer() else 2 if abs(x) < 10 else 1 for x in known), default=0)
    return [count(x, digits) for x in xs]


def counted(n: int, noun: str) -> str:
    """``n`` and its noun, singular for one: "1 step", "3 steps"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def rel_delta(a: float | None, b: float | None) -> str:
    """``b`` against ``a`` as a signed relative change, "+12 %" (``relDelta``); empty when either is
    unknown or ``a`` is 0."""
    if a is None or b is None or not _known(a) or not _known(b) or a == 0:
        return ""
    r = (b - a) / abs(a)
    return f"{sign(r)}{fixed(abs(r) * 100, 1 if abs(r) < 0.1 else 0)} %"


def pp_delta(a: float | None, b: float | None) -> str:
    """Two shares' signed difference in percentage points, "+4.1 pp" (``ppDelta``); empty when
    either is unknown."""
    if a is None or b is None or not _known(a) or not _known(b):
        return ""
    d = (b - a) * 100
    return f"{sign(d)}{fixed(abs(d), 1)} pp"


def sign(x: float) -> str:
    """The sign a change is written with: +, − (the minus sign), or ± for none."""
    return "+" if x > 0 else "\u2212" if x < 0 else "\u00b1"


def factor(x: float | None) -> str:
    """A multiple (how many times something fits or grows): 2 decimals below 10, 1 above, then ×."""
    if x is None or not _known(x):
        return NA
    return f"{fixed(x, 2 if abs(x) < 10 else 1)}×"


def setting(value: float, unit: str) -> str:
    """A setting (a flag's or variable's value) written back in the unit it is given in, as the
    user would type it again ("60 s"): not a figure of a trace, so none of the units above."""
    return f"{value:g} {unit}"


def _tflop_rate(x: float | None) -> str:
    return flop_rate(None if x is None else x * 1e12)


# The formatter of each unit of analysis.definitions.
FORMATTERS: dict[Unit, Callable[[float | None], str]] = {
    "share": pct,
    "time": us,
    "bytes": nbytes,
    "flops": flops,
    "flop_rate": flop_rate,
    "tflop_rate": _tflop_rate,
    "bandwidth": gbps,
    "count": count,
    "factor": factor,
}


def figure(name: str, value: float | None) -> str:
    """A figure of ``analysis.definitions`` as text, by its unit's formatter."""
    from .definitions import DEFINITIONS

    return FORMATTERS[DEFINITIONS[name].unit](value)


class _UnitFormatter(string.Formatter):
    """``str.format`` whose format spec may name a unit: ``{share:share}``, ``{us:time}``,
    ``{bytes:bytes}``, ``{busbw:bandwidth}`` go through that unit's formatter; any other spec
    (``{count:.0f}``, ``{name}``) is Python's."""

    def format_field(self, value: Any, format_spec: str) -> str:
        unit = FORMATTERS.get(format_spec)  # type: ignore[call-overload]
        return unit(value) if unit is not None else str(super().format_field(value, format_spec))


_TEMPLATES = _UnitFormatter()


def template(text: str, **args: Any) -> str:
    """A finding's title, fix or note from its template (``diagnosis.registry``), units formatted
    by their one function each."""
    return _TEMPLATES.format(text, **args)


def mfu_shown(s: Summary | None) -> str:
    """MFU as its status says (``Summary.mfu_status``, decided by the analysis): the figure when known,
    "impossible" where it came out above 100 % and was withheld, else unknown."""
    state = s.mfu_status.state if s is not None and s.mfu_status is not None else None
    if state == "impossible":
        return "impossible"
    return pct(s.mfu if s is not None and state == "known" else None)


def mfu_text(w: WorkerReport) -> str:
    """A worker's MFU as ``mfu_shown`` writes it."""
    return mfu_shown(w.summary)


_CORE_SHORT = {"tensor-core": "TC", "cuda-core": "CUDA", "unknown": "?", "not-a-matmul": ""}


def core_unit(k: KernelStats) -> str:
    """Top-kernels cell: TC / CUDA / ? (a GEMM of unknown class) and the dtype the name gives."""
    short = _CORE_SHORT.get(k.core or "", "TC" if k.tensor_core else "")
    return f"{short} {k.dtype}" if short and k.dtype else short
