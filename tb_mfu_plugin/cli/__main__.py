"""``python -m tb_mfu_plugin.cli``: the ``tb-mfu`` command."""

import sys

from .main import main

sys.exit(main())
