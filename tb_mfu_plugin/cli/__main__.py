"""``python -m tb_mfu_plugin.cli``: the ``tb-mfu`` command."""

from .exit import run

run()
