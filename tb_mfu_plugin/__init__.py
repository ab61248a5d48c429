"""tb_mfu_plugin: why training is slow when the GPU reads 100 % busy.

Layers, data flowing one way: ``trace`` (find and decode files) -> ``analysis``
(pure metrics) -> ``diagnosis`` (rules) -> faces (CLI, TensorBoard plugin).
"""

__version__ = "0.1.0"
