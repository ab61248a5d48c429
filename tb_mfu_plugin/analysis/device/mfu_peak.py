"""The peak one device's MFU is measured against: the compute dtype, from the counted ops'
shapes and the dtypes in the names of the kernels that ran in the steps (``dtype_choice``),
then the peak of the device at that dtype (``peaks.resolve_peak``: ``--peak-tflops``, else
``--device-name``, else the trace's device properties, else the kernel names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.distinct import distinct
from ...trace.tables import KERNEL, TraceTables
from ..device_view import DeviceRows
from ..flops.per_window import OpFlops
from ..kernels import families as kernel_families
from ..options import AnalysisOptions
from . import dtype_choice
from .devices import props_of
from .dtype_choice import DtypeChoice
from .peaks import PeakChoice, resolve_peak


@dataclass(frozen=True)
class MfuPeak:
    props: dict[str, Any] | None  # the device's properties in the trace
    kernel_names: set[str]  # of the device's kernels
    dtype: DtypeChoice  # the compute dtype and how it was chosen
    peak: PeakChoice  # the peak at that dtype and where it came from


def kernel_dtype(
    tables: TraceTables, rows: DeviceRows, classes: kernel_families.NameClasses, of: OpFlops
) -> tuple[set[str], DtypeChoice]:
    """The device's kernel names, and the compute dtype chosen from the counted ops' shapes and
    the dtypes in the names of the kernels that ran in the steps."""
    gpu = rows.gpu
    is_k = gpu.kind == KERNEL
    kernel_names = {tables.names[int(c)] for c in distinct(gpu.name[is_k])}
    in_steps = is_k & (rows.step >= 0)
    kshares = dtype_choice.kernel_dtype_shares(gpu.name[in_steps], gpu.dur[in_steps], classes)
    return kernel_names, dtype_choice.choose_dtype(of.dominant_dtype(), kshares)


def mfu_peak(
    tables: TraceTables,
    rows: DeviceRows,
    classes: kernel_families.NameClasses,
    of: OpFlops,
    device: int | None,
    options: AnalysisOptions,
) -> MfuPeak:
    """The peak of ``device`` for its MFU, resolved with ``options`` (the user's, TF32 included)."""
    kernel_names, dchoice = kernel_dtype(tables, rows, classes, of)
    props = props_of(tables, device)
    choice = resolve_peak(props, kernel_names, dchoice.dtype, options, dchoice.how, dchoice.source)
    return MfuPeak(props, kernel_names, dchoice, choice)
