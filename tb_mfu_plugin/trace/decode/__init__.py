"""Trace JSON to columnar tables: the chunked msgspec decoder, its processes, and the columns it fills."""
