"""Face: the notebook API (``tb_mfu_plugin.analyze``, ``tb_mfu_plugin.Report``) and its DataFrames."""

from .notebook import Report, analyze

__all__ = ["Report", "analyze"]
