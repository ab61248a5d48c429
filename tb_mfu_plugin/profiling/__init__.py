"""Face inside the training loop: record traces ready for MFU (``mfu_profile``) and log MFU over
the whole run (``MfuMonitor``). torch is imported inside the functions, so importing this needs none."""

from .monitor import MfuMonitor
from .record import MfuProfiler, count_step_flops, mfu_profile, write_sidecar

__all__ = ["MfuMonitor", "MfuProfiler", "count_step_flops", "mfu_profile", "write_sidecar"]
