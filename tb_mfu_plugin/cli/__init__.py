"""Face: the ``tb-mfu`` command (``main``), the tables it prints, and its console."""

from .exit import run
from .main import main

__all__ = ["main", "run"]
