"""Dense peak FLOP/s per GPU model and dtype, and the choice of peak for MFU.

Values are vendor datasheet / whitepaper peaks in TFLOP/s, **dense** (2:4
structured-sparsity figures halved), at boost clock:

- ``fp32``: non-tensor FP32 (CUDA cores); on AMD the FP32 matrix-core peak.
- ``tf32``: TF32 tensor core (what fp32 matmuls use when TF32 is allowed).
- ``bf16`` / ``fp16``: 16-bit tensor core with FP32 accumulate (what PyTorch uses;
  GeForce cards run it at half their FP16-accumulate rate).
- ``fp8``: FP8 tensor core with FP32 accumulate.
- ``fp4``: FP4 tensor core (Blackwell; block-scaled NVFP4/MXFP4).

A missing dtype means the GPU has no tensor-core path for it; the choice then
falls back (bf16 on V100 -> fp16, fp8 on A100 -> bf16) and says so.

Per-device values: H100 NVL and H200 NVL are per GPU (NVIDIA's first NVL sheet
quoted a pair); MI250/MI250X are per GCD, which is what PyTorch sees as one device.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..fmt import flop_rate, nbytes
from ..options import AnalysisOptions


@dataclass(frozen=True)
class GpuPeaks:
    key: str  # canonical model name
    arch: str  # "volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3"
    tflops: Mapping[str, float]  # dtype -> dense TFLOP/s
    source: str  # where the numbers come from


# Order matters: the first pattern that matches the device name wins, so the more
# specific names ("L40S", "H100 NVL", "A10G", "GB200", "3090 Ti") come before the
# shorter ones they contain. Patterns use word boundaries: "L4" must not match "L40S".
# One GPU per line, so the table reads as a datasheet.
# fmt: off
_TABLE: list[tuple[str, GpuPeaks]] = [
    # ---- Blackwell
    (r"\bGB200\b", GpuPeaks("GB200", "blackwell", {"fp32": 90.0, "tf32": 1250.0, "bf16": 2500.0, "fp16": 2500.0, "fp8": 5000.0, "fp4": 10000.0}, "NVIDIA GB200 NVL72 datasheet, per GPU (÷72), sparse halved")),  # noqa: E501
    (r"\bB200\b", GpuPeaks("B200", "blackwell", {"fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "fp4": 9000.0}, "NVIDIA HGX B200 datasheet, per GPU (÷8), sparse halved")),  # noqa: E501
    # ---- Hopper
    (r"\bGH200\b", GpuPeaks("GH200", "hopper", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, "NVIDIA GH200 datasheet (H100 SXM compute), sparse halved")),  # noqa: E501
    (r"\bH200\b.*\bNVL\b", GpuPeaks("H200 NVL", "hopper", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}, "NVIDIA H200 NVL datasheet, per GPU, sparse halved")),  # noqa: E501
    (r"\bH200\b", GpuPeaks("H200 SXM", "hopper", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, "NVIDIA H200 SXM datasheet, sparse halved")),  # noqa: E501
    (r"\bH100\b.*\bNVL\b", GpuPeaks("H100 NVL", "hopper", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5, "fp8": 1670.5}, "NVIDIA H100 NVL datasheet (94 GB card), per GPU, sparse halved")),  # noqa: E501
    (r"\bH100\b.*\bPCI", GpuPeaks("H100 PCIe", "hopper", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5, "fp8": 1513.0}, "NVIDIA H100 PCIe datasheet, sparse halved")),  # noqa: E501
    (r"\bH100\b|\bH800\b", GpuPeaks("H100 SXM", "hopper", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9}, "NVIDIA H100 SXM datasheet, sparse halved")),  # noqa: E501
    (r"\bH20\b", GpuPeaks("H20", "hopper", {"fp32": 44.0, "tf32": 74.0, "bf16": 148.0, "fp16": 148.0, "fp8": 296.0}, "NVIDIA H20 datasheet (dense)")),  # noqa: E501
    # ---- Ada
    (r"\bL40S\b", GpuPeaks("L40S", "ada", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0}, "NVIDIA L40S datasheet, sparse halved")),  # noqa: E501
    (r"\bL40\b", GpuPeaks("L40", "ada", {"fp32": 90.5, "tf32": 90.5, "bf16": 181.0, "fp16": 181.0, "fp8": 362.0}, "NVIDIA L40 datasheet, sparse halved")),  # noqa: E501
    (r"\bL4\b", GpuPeaks("L4", "ada", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5}, "NVIDIA L4 datasheet, sparse halved")),  # noqa: E501
    (r"\bRTX 4090\b", GpuPeaks("RTX 4090", "ada", {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3}, "NVIDIA Ada GPU architecture whitepaper, FP32 accumulate, dense")),  # noqa: E501
    # ---- Ampere
    (r"\bA100\b|\bA800\b|\bPG509\b", GpuPeaks("A100", "ampere", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, "NVIDIA A100 datasheet (SXM and PCIe, 40/80 GB), sparse halved")),  # noqa: E501
    (r"\bA10G\b", GpuPeaks("A10G", "ampere", {"fp32": 35.0, "tf32": 35.0, "bf16": 70.0, "fp16": 70.0}, "AWS/NVIDIA A10G (G5) figures, dense")),  # noqa: E501
    (r"\bA10\b", GpuPeaks("A10", "ampere", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}, "NVIDIA A10 datasheet, sparse halved")),  # noqa: E501
    (r"\bA30\b", GpuPeaks("A30", "ampere", {"fp32": 10.3, "tf32": 82.0, "bf16": 165.0, "fp16": 165.0}, "NVIDIA A30 datasheet, sparse halved")),  # noqa: E501
    (r"\bA40\b", GpuPeaks("A40", "ampere", {"fp32": 37.4, "tf32": 74.8, "bf16": 149.7, "fp16": 149.7}, "NVIDIA A40 datasheet, sparse halved")),  # noqa: E501
    (r"\bRTX 3090 Ti\b", GpuPeaks("RTX 3090 Ti", "ampere", {"fp32": 40.0, "tf32": 40.0, "bf16": 80.0, "fp16": 80.0}, "NVIDIA GA102 whitepaper figures, FP32 accumulate, dense")),  # noqa: E501
    (r"\bRTX 3090\b", GpuPeaks("RTX 3090", "ampere", {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0}, "NVIDIA Ampere GA102 whitepaper, FP32 accumulate, dense")),  # noqa: E501
    # ---- Turing / Volta
    (r"\bT4\b", GpuPeaks("T4", "turing", {"fp32": 8.1, "fp16": 65.0}, "NVIDIA T4 datasheet")),
    (r"\bV100S\b", GpuPeaks("V100S PCIe", "volta", {"fp32": 16.4, "fp16": 130.0}, "NVIDIA V100S datasheet")),
    (r"\bV100\b.*\bPCI", GpuPeaks("V100 PCIe", "volta", {"fp32": 14.0, "fp16": 112.0}, "NVIDIA V100 datasheet (PCIe)")),  # noqa: E501
    (r"\bV100\b.*\bSXM3\b", GpuPeaks("V100 SXM3", "volta", {"fp32": 16.4, "fp16": 130.0}, "NVIDIA DGX-2 V100 SXM3 figures")),  # noqa: E501
    (r"\bV100\b", GpuPeaks("V100 SXM2", "volta", {"fp32": 15.7, "fp16": 125.0}, "NVIDIA V100 datasheet (SXM2)")),
    # ---- AMD (per device as PyTorch sees it; MI250/MI250X: per GCD)
    (r"\bMI325X\b", GpuPeaks("MI325X", "cdna3", {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}, "AMD Instinct MI325X datasheet, dense")),  # noqa: E501
    (r"\bMI300X\b", GpuPeaks("MI300X", "cdna3", {"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9}, "AMD Instinct MI300X datasheet, dense")),  # noqa: E501
    (r"\bMI300A\b", GpuPeaks("MI300A", "cdna3", {"fp32": 122.6, "tf32": 490.3, "bf16": 980.6, "fp16": 980.6, "fp8": 1961.2}, "AMD Instinct MI300A datasheet, dense")),  # noqa: E501
    (r"\bMI250X\b", GpuPeaks("MI250X (per GCD)", "cdna2", {"fp32": 47.85, "bf16": 191.5, "fp16": 191.5}, "AMD Instinct MI250X datasheet ÷ 2 GCDs (FP32 matrix)")),  # noqa: E501
    (r"\bMI250\b", GpuPeaks("MI250 (per GCD)", "cdna2", {"fp32": 45.25, "bf16": 181.0, "fp16": 181.0}, "AMD Instinct MI250 datasheet ÷ 2 GCDs (FP32 matrix)")),  # noqa: E501
    (r"\bMI210\b", GpuPeaks("MI210", "cdna2", {"fp32": 45.3, "bf16": 181.0, "fp16": 181.0}, "AMD Instinct MI210 datasheet (FP32 matrix)")),  # noqa: E501
]
# fmt: on
_COMPILED = [(re.compile(p, re.IGNORECASE), g) for p, g in _TABLE]
PEAKS: dict[str, GpuPeaks] = {g.key: g for _, g in _TABLE}

# What an inferred architecture stands for (the most common data-centre part).
_ARCH_DEFAULT = {
    "blackwell": "B200",
    "hopper": "H100 SXM",
    "ada": "L40S",
    "ampere": "A100",
    "turing": "T4",
    "volta": "V100 SXM2",
    "cdna3": "MI300X",
    "cdna2": "MI250X (per GCD)",
}
_ARCH_ORDER = ["volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3"]

# Kernel-name markers of the architecture a kernel was built for. A kernel built
# for an architecture cannot run on an older one, so the newest marker found is a
# lower bound on the GPU (cuBLAS runs sm80 kernels on Hopper, never the reverse).
_KERNEL_MARKERS: list[tuple[str, re.Pattern[str]]] = [
    ("blackwell", re.compile(r"sm_?10\d|blackwell", re.IGNORECASE)),
    ("hopper", re.compile(r"sm_?90|hopper|nvjet|wgmma|gmma", re.IGNORECASE)),
    ("ada", re.compile(r"sm_?89|\bada_", re.IGNORECASE)),
    ("ampere", re.compile(r"sm_?8[06]|ampere", re.IGNORECASE)),
    ("turing", re.compile(r"sm_?75|turing", re.IGNORECASE)),
    ("volta", re.compile(r"sm_?70|volta", re.IGNORECASE)),
    ("cdna3", re.compile(r"ISA94[0-9]|gfx94[0-9]", re.IGNORECASE)),
    ("cdna2", re.compile(r"ISA90a|gfx90a", re.IGNORECASE)),
]


@dataclass(frozen=True)
class PeakChoice:
    name: str | None  # the GPU model the peak belongs to ("H200 SXM"), None if unknown
    peak_flops: float | None  # FLOP/s (not TFLOP/s); None when no peak could be chosen
    dtype: str  # the dtype whose peak was used ("bf16", "tf32", "fp32", "fp8")
    source: str  # one line: why this peak
    inferred: bool  # True when the GPU model was guessed from kernel names / properties
    dtype_source: str = "shapes"  # shapes, kernel names, option, or assumed (the PaLM convention)


# With neither shapes nor a dtype in the kernel names, MFU uses the dense bf16 tensor-core
# peak, as PaLM's MFU does: the fp32 CUDA-core peak would turn a bf16 run's MFU into several
# hundred percent.
ASSUMED_DTYPE = "bf16"
ASSUMED_NOTE = (
    "matmul dtype unknown (no shapes recorded, no dtype in the kernel names): "
    "dense bf16 tensor-core peak assumed, the PaLM convention"
)


def match_gpu(name: str | None) -> GpuPeaks | None:
    """The table entry for a device name such as ``"NVIDIA H100 80GB HBM3"``, or None."""
    if not name:
        return None
    for rx, g in _COMPILED:
        if rx.search(name):
            return g
    return None


def infer_arch(kernel_names: Iterable[str]) -> str | None:
    """The newest architecture named by any kernel (``"hopper"`` for ``sm90_xmma_...``)."""
    found: set[str] = set()
    for k in kernel_names:
        for arch, rx in _KERNEL_MARKERS:
            if arch in found:
                continue
            if rx.search(k):
                found.add(arch)
    if not found:
        return None
    amd = [a for a in found if a.startswith("cdna")]
    if amd:
        return max(amd, key=_ARCH_ORDER.index)
    return max(found, key=_ARCH_ORDER.index)


_GFX = re.compile(r"\bgfx9(4\d|0a)", re.IGNORECASE)


def _arch_from_props(props: Mapping[str, Any]) -> str | None:
    """Architecture from computeMajor/Minor (NVIDIA), or warp size 64 + gfx9 (AMD CDNA), or a
    gfx target in ``gcnArchName`` / the name ("gfx942:sramecc+:xnack-" is CDNA3)."""
    gfx = _GFX.search(f"{props.get('gcnArchName') or ''} {props.get('name') or ''}")
    if gfx:
        return "cdna3" if gfx.group(1).startswith("4") else "cdna2"
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if not isinstance(major, int):
        return None
    name = str(props.get("name") or "")
    amd = props.get("warpSize") == 64 or "AMD" in name.upper() or "RADEON" in name.upper()
    if amd:
        if major == 9 and minor == 4:
            return "cdna3"
        if major == 9 and minor == 0:
            return "cdna2"
        return None
    return {7: "volta" if minor == 0 else "turing", 8: "ada" if minor == 9 else "ampere", 9: "hopper"}.get(
        major, "blackwell" if major >= 10 else None
    )


# Parts an architecture's SM/CU count tells apart.
_BY_SMS: dict[tuple[str, int], str] = {
    ("hopper", 132): "H100 SXM",
    ("hopper", 114): "H100 PCIe",
    ("hopper", 78): "H20",
    ("ampere", 108): "A100",
    ("ampere", 72): "A10",
    ("ampere", 80): "A10G",
    ("ampere", 82): "RTX 3090",
    ("ampere", 84): "RTX 3090 Ti",
    ("ada", 142): "L40S",
    ("ada", 58): "L4",
    ("ada", 128): "RTX 4090",
    ("volta", 80): "V100 SXM2",
    ("blackwell", 148): "B200",
    ("cdna2", 110): "MI250X (per GCD)",
    ("cdna2", 104): "MI250 (per GCD)",
    ("cdna3", 304): "MI300X",
    ("cdna3", 228): "MI300A",
}

# Parts that share an architecture and a count, told apart by their memory: (arch, count) ->
# (GiB above which the larger part, that part). Their peak FLOP/s are the same; the name is not.
_BY_MEMORY: dict[tuple[str, int], tuple[float, str]] = {
    ("hopper", 132): (100.0, "H200 SXM"),  # H100 SXM 80 GB, H200 SXM 141 GB
    ("cdna3", 304): (224.0, "MI325X"),  # MI300X 192 GB, MI325X 256 GB
}
_ARCH_WORDS = {"cdna3": "CDNA3 (gfx94x)", "cdna2": "CDNA2 (gfx90a)"}


def _model_for_arch(arch: str, props: Mapping[str, Any] | None) -> GpuPeaks:
    """Pick a model within an architecture, using the SM/CU count when it tells them apart."""
    sms = props.get("numSms") if props else None
    key = _BY_SMS.get((arch, sms)) if isinstance(sms, int) else None
    return PEAKS[key] if key else PEAKS[_ARCH_DEFAULT[arch]]


@dataclass(frozen=True)
class Identified:
    """A GPU model named from a ``deviceProperties`` entry whose name is empty."""

    model: GpuPeaks
    reason: str  # "compute 9.4 with wavefront 64 is CDNA3 (gfx94x), and 304 CUs is an MI300X"


def identify(props: Mapping[str, Any] | None) -> Identified | None:
    """The model of a ``deviceProperties`` entry with an empty or missing name, when its architecture
    (compute capability, wavefront size or gfx target) and its SM/CU count single it out; else None.

    vLLM's ROCm traces write ``"name": ""``; ``computeMajor`` 9, ``computeMinor`` 4, ``warpSize`` 64
    and ``numSms`` 304 are an MI300X all the same. A count the table does not know names nothing: the
    architecture alone is a guess, which ``resolve_peak`` makes and marks as inferred."""
    if not props or str(props.get("name") or "").strip():
        return None
    arch = _arch_from_props(props)
    sms = props.get("numSms")
    if arch is None or not isinstance(sms, int) or isinstance(sms, bool):
        return None
    key = _BY_SMS.get((arch, sms))
    if key is None:
        return None
    mem = props.get("totalGlobalMem")
    big = _BY_MEMORY.get((arch, sms))
    if big is not None and isinstance(mem, int | float) and mem / 2**30 > big[0]:
        key = big[1]
    amd = arch.startswith("cdna")
    gfx = _GFX.search(f"{props.get('gcnArchName') or ''}")
    if gfx:
        how = f"gfx target {gfx.group(0)}"
    elif amd:
        how = f"compute {props.get('computeMajor')}.{props.get('computeMinor')} with wavefront 64"
    else:
        how = f"compute capability {props.get('computeMajor')}.{props.get('computeMinor')}"
    count = f"{sms} {'CUs' if amd else 'SMs'}"
    if big is not None and isinstance(mem, int | float):
        count += f" with {nbytes(float(mem))}"
    elif big is not None:  # no memory size to tell the twins apart: say so
        count += f" (so has the {big[1]}, at the same peak)"
    what = _ARCH_WORDS.get(arch, arch.capitalize())
    return Identified(PEAKS[key], f"name empty; {how} is {what}, and {count} is the {key}")


# bf16 without bf16 tensor cores (Volta, Turing) runs on the fp16 ones: the 16-bit peak is fp16's
_FALLBACK = {"bf16": "fp16", "fp16": "fp32", "tf32": "fp32", "fp8": "bf16", "fp4": "fp8", "fp64": "fp32"}


# The table's tensor-core figures are the datasheets' sparse ones halved; its fp32 figure on an
# NVIDIA part is the CUDA-core rate, which has no sparse form, so the phrase must not follow it.
_SPARSE_HALVED = ", sparse halved"


def peak_text(g: GpuPeaks, dtype: str, tflops: float) -> str:
    """``bf16 dense 989.4 TFLOP/s (NVIDIA H200 SXM datasheet, sparse halved)``, or for the fp32
    CUDA-core peak ``fp32 CUDA-core 67 TFLOP/s (NVIDIA H200 SXM datasheet)``."""
    if dtype == "fp32" and g.source.endswith(_SPARSE_HALVED):
        return f"fp32 CUDA-core {flop_rate(tflops * 1e12)} ({g.source[: -len(_SPARSE_HALVED)]})"
    return f"{dtype} dense {flop_rate(tflops * 1e12)} ({g.source})"


def _dtype_peak(g: GpuPeaks, dtype: str) -> tuple[str, float, str]:
    """(dtype used, TFLOP/s, note) with fallbacks for dtypes the GPU has no tensor path for."""
    d = dtype
    note = ""
    while d not in g.tflops:
        nxt = _FALLBACK.get(d)
        if nxt is None:
            d = "fp32"
            break
        note = f"; {g.key} has no {dtype} tensor-core peak, using {nxt}"
        d = nxt
    return d, g.tflops[d], note


# The dtype whose peak MFU is measured against, for the dtype a run computes in (the PaLM convention,
# which torchtitan and Megatron follow): the dense 16-bit tensor-core peak, or the compute dtype's own
# where that is faster (fp8, fp4), so a run never looks better for computing in a slow dtype and a
# fast one never passes 100 %. Any other dtype (fp32, tf32, bf16, fp16, unknown) gets bf16.
MFU_DTYPE = {"fp8": "fp8", "fp4": "fp4"}


def resolve_peak(
    device_props: Mapping[str, Any] | None,
    kernel_names: Iterable[str],
    dtype: str | None,
    options: AnalysisOptions | None = None,
    dtype_how: str | None = None,
    dtype_source: str = "shapes",
) -> PeakChoice:
    """Choose the peak FLOP/s for MFU: the peak of the dtype ``MFU_DTYPE`` gives for the compute
    ``dtype`` (the dense bf16 tensor-core peak for fp32, TF32, bf16 and fp16 runs; fp8's and fp4's
    for those), on GPUs without bf16 tensor cores the fp16 one.

    Priority: ``options.peak_tflops`` > ``options.device_name`` > the trace's
    ``deviceProperties`` name > the architecture (from kernel names, or from
    computeMajor/Minor) with the most common part of it, marked inferred.
    ``dtype`` is the FLOP-weighted compute dtype of the counted ops
    (``OpFlops.dominant_dtype()``), else the kernel-time-weighted dtype of the matmul kernel
    names (``kernel_families``); ``dtype_how`` says which, for the source line. ``peak_at``
    gives the peak of one dtype as it is (the second figures of ``mfu_notes``).
    """
    known = bool(dtype and dtype != "unknown")
    want = MFU_DTYPE.get(dtype or "", "bf16")
    how = dtype_how or dtype_source
    if not known:
        dtype_source, said = "assumed", f" ({ASSUMED_NOTE})"
    elif want != dtype:
        said = (
            f" (the run computes in {dtype}, from {how}: MFU is against the 16-bit tensor-core peak, PaLM's convention)"
        )
    else:
        said = f" (dtype from {how})" if how != "shapes" else ""
    return replace(peak_at(device_props, kernel_names, want, options, said), dtype_source=dtype_source)


def peak_at(
    device_props: Mapping[str, Any] | None,
    kernel_names: Iterable[str],
    dtype: str,
    options: AnalysisOptions | None = None,
    said: str = "",
) -> PeakChoice:
    """The peak of ``dtype`` on the device (its fallback where the GPU has no such path, ``_FALLBACK``:
    bf16 on a GPU without bf16 tensor cores is fp16), ``said`` added to the source line."""
    return _resolve(device_props, kernel_names, dtype, said, options or AnalysisOptions())


def _resolve(
    device_props: Mapping[str, Any] | None,
    kernel_names: Iterable[str],
    want: str,
    assumed: str,
    options: AnalysisOptions,
) -> PeakChoice:
    if options.peak_tflops:
        return PeakChoice(
            options.device_name, options.peak_tflops * 1e12, want, f"--peak-tflops {options.peak_tflops:g}", False
        )
    props = device_props or {}
    if options.device_name:
        g = match_gpu(options.device_name)
        if g is None:
            why = f"--device-name {options.device_name!r} is not in the peak table"
            return PeakChoice(options.device_name, None, want, why, False)
        d, tf, note = _dtype_peak(g, want)
        src = f"{g.key} from --device-name: {peak_text(g, d, tf)}{note}{assumed}"
        return PeakChoice(g.key, tf * 1e12, d, src, False)
    dev_name = props.get("name") if isinstance(props.get("name"), str) else None
    g = match_gpu(dev_name)
    if g is not None and g.key.startswith("MI250") and isinstance(props.get("numSms"), int):
        # ROCm names both MI250 and MI250X "AMD Instinct MI250X / MI250": the CU count tells
        g = _model_for_arch("cdna2", props)
    if g is not None:
        d, tf, note = _dtype_peak(g, want)
        src = f"{g.key} from deviceProperties {dev_name!r}: {peak_text(g, d, tf)}{note}{assumed}"
        return PeakChoice(g.key, tf * 1e12, d, src, False)
    ident = identify(props)
    if ident is not None:  # an empty name whose architecture and SM/CU count tell the part
        g = ident.model
        d, tf, note = _dtype_peak(g, want)
        src = f"{g.key} identified from deviceProperties ({ident.reason}): {peak_text(g, d, tf)}{note}{assumed}"
        return PeakChoice(g.key, tf * 1e12, d, src, False)
    # unknown or missing name: infer
    arch = infer_arch(kernel_names)
    how = "kernel names"
    if arch is None:
        arch = _arch_from_props(props)
        how = "compute capability"
    if arch is None:
        why = f"device {dev_name!r} is not in the peak table" if dev_name else "the trace has no deviceProperties"
        return PeakChoice(
            None, None, want, f"no peak: {why} and no kernel names tell the architecture; pass --peak-tflops", True
        )
    g = _model_for_arch(arch, props)
    d, tf, note = _dtype_peak(g, want)
    what = (
        f"device {dev_name!r} unknown"
        if dev_name
        else ("deviceProperties name empty" if props else "no deviceProperties")
    )
    src = (
        f"{g.key} inferred ({what}; {arch} from {how}): {peak_text(g, d, tf)}{note}{assumed}; "
        "override with --device-name or --peak-tflops"
    )
    return PeakChoice(g.key, tf * 1e12, d, src, True)
