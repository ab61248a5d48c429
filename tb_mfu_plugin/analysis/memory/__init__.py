"""Device memory over the analysed steps, from the allocator's ``[memory]`` events (issue 25).

- ``timeline``: one device's events, the step and the op around each, and its phase;
- ``per_step``: per step, the peak allocated and reserved, where it falls, the allocation at the
  step's start and end, and the growth from step to step;
- ``live``: which allocations are alive at the peak, by the op that made them;
- ``capacity`` and ``headroom``: the device's memory and how many times the batch could grow;
- ``checkpoint``: what activation checkpointing costs in recompute time and saves in memory;
- ``block``: the report's ``memory`` block (``types``), put together once per device.

Empty on purpose: ``analysis.report`` imports ``types`` from here, and this package's other modules
import the report.
"""
