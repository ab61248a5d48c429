"""Bytes and the roofline: bytes per op, op placement against the roofs, the HBM bandwidth table."""
