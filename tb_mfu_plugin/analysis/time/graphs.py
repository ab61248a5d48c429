"""CUDA / HIP graph replays: which GPU work a graph launch ran.

One ``cudaGraphLaunch`` (``hipGraphLaunch`` on ROCm, ``cuGraphLaunch`` from the driver API)
replays a whole captured graph: CUPTI gives every kernel, memcpy and memset of the replay the
launch call's correlation id, so the launch join (``TraceTables.launcher``) maps all of them to
that one call. The host paid one launch for them, so the gaps between them are not host launch
overhead; they are the GPU's own cost of running many small kernels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...core.distinct import distinct
from ...trace.tables import TraceTables, name_lookup

GRAPH_LAUNCH = re.compile(r"^(?:cuda|hip|cu)GraphLaunch", re.IGNORECASE)


def graph_launch_codes(names: Sequence[str], codes: np.ndarray | None = None) -> np.ndarray:
    """Boolean lookup table over name codes: is the name a graph launch call. ``codes``: test only
    these names (the runtime and driver calls', ``TraceTables.call_name_codes``)."""
    return name_lookup(names, GRAPH_LAUNCH.match, codes)


def graph_launched(tables: TraceTables, launcher: np.ndarray) -> np.ndarray:
    """For GPU rows whose launching cpu rows are ``launcher`` (-1 unknown): did a graph replay run them."""
    is_graph = graph_launch_codes(tables.names, tables.call_name_codes)
    known = launcher >= 0
    out = np.zeros(len(launcher), bool)
    out[known] = is_graph[tables.cpu.name[launcher[known]]]
    return out


def replays(launcher: np.ndarray, graph: np.ndarray) -> int:
    """How many graph launches ran the rows marked ``graph``: each launch call is one replay."""
    return int(len(distinct(launcher[graph])))
