"""Tests of the TensorBoard plugin.

tests/conftest.py puts tests/ at the front of sys.path (for ``tracegen``), where
this folder would shadow the real ``tensorboard`` package. Import the real one
first, with tests/ out of the way; later imports then find it in sys.modules.
"""

import os as _os
import sys as _sys

_TESTS = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))


def _real_tensorboard() -> None:
    mod = _sys.modules.get("tensorboard")
    if mod is not None and not str(getattr(mod, "__file__", "") or "").startswith(_TESTS):
        return
    _sys.modules.pop("tensorboard", None)
    saved = list(_sys.path)
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _TESTS]
    try:
        import tensorboard  # noqa: F401  (the installed package)
    finally:
        _sys.path[:] = saved


_real_tensorboard()
