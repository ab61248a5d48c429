"""Distributed runs: communication, collectives, clock skew, pipeline bubble, strategy, interconnects."""
