"""FLOPs: per op from its shapes, counted once, per window, recompute, and the FLOPs detail block."""
