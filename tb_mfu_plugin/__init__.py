"""tb_mfu_plugin: why training is slow when the GPU reads 100 % busy.

Layers, data flowing one way: ``trace`` (find and decode files) -> ``analysis``
(pure metrics) -> ``diagnosis`` (rules) -> faces (CLI, TensorBoard plugin, the
notebook API ``tb_mfu_plugin.analyze`` / ``tb_mfu_plugin.Report``).
"""

from __future__ import annotations

from typing import Any

from .core.version import __version__

__all__ = ["Report", "__version__", "analyze"]


def __getattr__(name: str) -> Any:
    # The notebook API is imported on first use, so `import tb_mfu_plugin` (the CLI,
    # TensorBoard's plugin loader) stays light.
    if name in ("analyze", "Report"):
        from .notebook import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'tb_mfu_plugin' has no attribute {name!r}")
