"""Layer 1, core: helpers that know nothing of traces (errors, escaping, distinct values, PaLM, the version)."""
