"""The rules, one concept each, grouped by the family of bottleneck they name.

Each module registers its rules on import (``registry.rule``); the order of the imports
below is the order in which they run and in which ``RULES`` lists them. A rule that reads
other rules' findings (``@rule(after=...)``) must come after them.

Every rule states the time its cause takes per step (``cost``) and an estimated gain that
never exceeds it (``make_finding`` clamps, the tests check).
"""

from ..registry import RULES

# The order of these imports is the evaluation order: sorting them would change it.
# isort: off
from . import syncs, copies, fusion, launches, sm_efficiency, tensor_cores, dataloader  # noqa: F401
from . import communication, collective_bandwidth, pipeline, idle, roofline  # noqa: F401
# isort: on

RULE_IDS = tuple(r.id for r in RULES)

__all__ = ["RULES", "RULE_IDS"]
