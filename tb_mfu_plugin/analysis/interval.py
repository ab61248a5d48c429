"""Where an estimated figure likely lies: its own struct, so that every block of the report can carry
one (the summary's MFU, and the job's in the ranks block) without importing the report."""

from __future__ import annotations

import msgspec


class Interval(msgspec.Struct, kw_only=True):
    """Where an estimated figure likely lies: ``low`` <= the figure <= ``high``."""

    low: float
    high: float
