from __future__ import annotations

import sys
from pathlib import Path

# corpus.py and hostile.py import each other by plain name, like tests/tracegen.py
sys.path.append(str(Path(__file__).resolve().parent))
