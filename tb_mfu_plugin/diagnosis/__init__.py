"""Diagnosis: rules over one device's analysis that name the bottleneck, show the evidence,
estimate the gain and give the fix (``findings``), and the rule that needs every rank of a run."""

from .engine import Diagnosis, diagnose
from .finding import Finding
from .rules import RULE_IDS, RULES
from .thresholds import DEFAULT, Thresholds, from_options

__all__ = ["DEFAULT", "RULES", "RULE_IDS", "Diagnosis", "Finding", "Thresholds", "diagnose", "from_options"]
