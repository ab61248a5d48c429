"""Diagnosis: rules over the analysis results that name the bottleneck, show the evidence,
estimate the gain and give the fix (``findings``), plus the step-time waterfall."""

from .engine import diagnose
from .finding import Finding
from .rules import RULE_IDS, RULES
from .thresholds import DEFAULT, Thresholds

__all__ = ["DEFAULT", "RULES", "RULE_IDS", "Finding", "Thresholds", "diagnose"]
