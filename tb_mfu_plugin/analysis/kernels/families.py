"""Kernel-name families: which unit a kernel's math runs on, and its data type.

The classifier is this table, not code. Each ``Family`` is a regex over the kernel
name, the class of every kernel it matches and how to read the data type from the
name. The first family that matches wins, so the CUDA-core and helper families come
before the tensor-core ones (``sm80_xmma_gemm_f32f32_..._ffma_`` is an xmma kernel that
runs FFMA: CUDA cores).

Classes:

- ``tensor-core``: the math runs on matrix units (NVIDIA tensor cores: HMMA/IMMA,
  wgmma, tcgen05; AMD matrix cores: MFMA/WMMA, "xdlops").
- ``cuda-core``: a matmul/convolution on the scalar units (FFMA/SIMT SGEMM, GEMV,
  cuDNN's fp32 implicit-GEMM and Winograd kernels): positive evidence of no tensor cores.
- ``not-a-matmul``: names that look GEMM-ish but do no matrix math (split-K reductions,
  workspace set-up, FBGEMM embedding kernels).
- ``unknown``: a GEMM-like kernel (``MATMUL_KERNEL``) that no family names.
  It is reported as unknown, never counted as CUDA-core.

Data types (the dtype whose peak the math runs at): ``fp4``, ``fp8``, ``int8``,
``bf16``, ``fp16``, ``tf32``, ``fp32``, ``fp64``, or None when the name does not say.
Library conventions (checked on real names, see ``tests/analysis/kernels/test_kernel_families.py``):

- cuBLASLt ``nvjet_[smXX_]<types>_...``: ``tst`` = bf16 in, fp32 compute, bf16 out;
  ``tss`` bf16 in, fp32 out; ``hsh`` fp16; a five-letter code puts the A and B types
  first (``qqtst``: e4m3 x e4m3 -> bf16). Letters: t bf16, h fp16, q fp8 (e4m3),
  s fp32 (an nvjet kernel runs fp32 inputs as TF32: without TF32 cuBLAS picks FFMA kernels).
- TRT-LLM generated ``bmm_<out>_<A><B>_<acc>_..._sm100f``: the A and B types count
  (``bmm_Bfloat16_E2m1E2m1_Fp32`` is an FP4 GEMM with a bf16 output); the wider of A and
  B sets the rate (``MxE2m1`` x ``E4m3`` runs at the FP8 rate).
- rocBLAS/hipBLASLt Tensile ``Cijk_Ailk_Bljk_<types>_...``: the first letters are the
  input type (``BBS``/``B_BS``: bf16, ``HHS``: fp16, ``S``/``SB``: fp32, ``F8``: fp8,
  ``I8``: int8); ``_MI<m>x<n>x<k>`` means MFMA.
- Everything else: tokens (``e2m1``, ``e4m3``, ``bf16``/``bfloat16``, ``f16``/``half``,
  ``tf32``, ``f32f32``/``sgemm``/``float``...), the narrowest found first. CUTLASS
  ``tensorop_s1688gemm`` with no 16-bit token is TF32.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

TENSOR_CORE = "tensor-core"
CUDA_CORE = "cuda-core"
NOT_MATMUL = "not-a-matmul"
UNKNOWN = "unknown"
CLASSES = (TENSOR_CORE, CUDA_CORE, NOT_MATMUL, UNKNOWN)
# Integer codes of the classes in per-name lookup arrays.
CODE = {c: i for i, c in enumerate(CLASSES)}

# Matmul / convolution kernels, tensor-core or not (SIMT sgemm, implicit_convolve_sgemm and
# winograd transforms included). ``conv(?!ert)``: "convert" kernels are casts, not convolutions.
# Here, beside the families it screens for, so that name_patterns (which re-uses it) sits above.
MATMUL_KERNEL = re.compile(
    r"gemm|gemv|matmul|conv(?!ert)|winograd|dgrad|wgrad|fprop|xmma|nvjet|cutlass|scudnn|hcudnn"
    r"|_MI\d+x\d+x\d+|Cijk_|splitKreduce|flash|fmha|_attn_fwd|_attn_bwd|attention_kernel|sdpa"
    r"|triton_tem_fused_.*mm|triton_.*_mm_|triton_mm|bmm",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Family:
    name: str  # what users read in the docs and the evidence
    core: str  # one of CLASSES (never UNKNOWN)
    pattern: str  # regex, searched case-insensitively
    dtype: str = "tokens"  # how to read the dtype: tokens, nvjet, trtllm, tensile, none, or a fixed dtype


# Order matters: the first match wins.
FAMILIES: tuple[Family, ...] = (
    # ---- names that look like GEMMs but do no matrix math
    Family(
        "GEMM/conv helper kernels (split-K reduce, workspace set-up, offsets, im2col, Winograd tiles)",
        NOT_MATMUL,
        r"splitKreduce|ReduceSplitK|reduce_1Block_kernel|init_device_workspace|computeOffsets|computeBOffsets"
        r"|OffsetsKernel|reduce_wgrad|im2col|generateWinogradTiles|scalePackedTensor|bn_fw|bn_bw"
        r"|compute_dot_do_o|SubTensorOp",
        "none",
    ),
    Family(
        "FBGEMM embedding and quantisation kernels",
        NOT_MATMUL,
        r"fbgemm_gpu::|split_embedding_|bounds_check_indices",
        "none",
    ),
    # Inductor pointwise/reduction kernels are named after the ops they fuse
    # ("triton_poi_fused_addmm_relu_0" is the bias+ReLU epilogue of an extern mm), and norm
    # kernels may carry a library name ("flashinfer...RMSNormKernel"): no matrix math.
    Family(
        "Triton pointwise/reduction kernels and normalisation kernels",
        NOT_MATMUL,
        r"^triton_(?:poi|per|red)_|rms_?norm|layer_?norm|group_?norm|batch_?norm",
        "none",
    ),
    # ---- matmul/conv on the scalar units: the positive evidence no_tensor_cores uses
    Family(
        "FFMA / SIMT GEMMs (cuBLAS, CUTLASS, MAGMA)",
        CUDA_CORE,
        r"_ffma_|_simt_|(?:^|[\s_:<])(?:s|d|c|z|gc)gemm|gemmk1_kernel|gemmSN_",
    ),
    Family("cuBLAS GEMV and dot kernels", CUDA_CORE, r"gemv|\bdot_kernel"),
    Family(
        "cuDNN CUDA-core convolutions (scudnn/hcudnn, implicit/explicit sgemm, Winograd, alg0 engines)",
        CUDA_CORE,
        r"[shd]cudnn_|implicit_convolve_|explicit_convolve_|wgrad_alg\d_engine|dgrad_engine|winograd",
    ),
    # ---- NVIDIA tensor cores
    Family("cuBLASLt nvjet GEMMs (Hopper, Blackwell)", TENSOR_CORE, r"^nvjet_", "nvjet"),
    Family(
        "TRT-LLM generated GEMMs (trtllm-gen bmm/gemm, block-scaled FP8/FP4 MoE)",
        TENSOR_CORE,
        r"^(?:b?mm|gemm)_(?:Mx)?(?:E4m3|E5m2|E2m1|E2m3|E3m2|Bfloat16|Fp16|Fp32)_\w*_sm1\d\d[af]?\b",
        "trtllm",
    ),
    # cuDNN's SDPA kernels say "f16" for bf16 and fp16 alike: no dtype from them
    Family("cuDNN SDPA (fused attention)", TENSOR_CORE, r"cudnn_generated_fort_native_sdpa|cudnn\w*sdpa", "none"),
    Family(
        "MMA instructions and tensor-op tiles in the name (hmma, imma, wgmma, tcgen05, umma, s1688, h884, i8816)",
        TENSOR_CORE,
        r"hmma|imma|wgmma|gmma|tcgen05|utcmma|umma_|tensorop|tensor\d+x\d+x\d+|h884|s884|h1688|s1688|i8816"
        r"|16816|161616|884gemm|1688gemm|884cudnn",
    ),
    Family("cuBLAS/cuDNN xmma kernels (sm80 and newer)", TENSOR_CORE, r"xmma"),
    Family(
        "CUTLASS 2.x/3.x and CuTe DSL GEMMs (sm80, sm90, sm100, sm120)",
        TENSOR_CORE,
        r"cutlass3x|cutlass_(?:75|80|86|89|90|100|103|120)_|cutlass\w*(?:gemm|conv)|Sm1\d\dBlockScaled"
        r"|GemmUniversal|DeviceGemmFp[48]|sm(?:80|86|89|90a?|100a?f?|103|120)_\w*(?:gemm|conv|fprop|dgrad|wgrad)",
    ),
    Family(
        "Fused attention (FlashAttention, xFormers/PyTorch fmha, cuDNN SDPA, TRT-LLM fmha, Triton attention)",
        TENSOR_CORE,
        r"flash|fmha|sdpa|_attn_fwd|_attn_bwd|^attn_fwd|^attn_bwd|attention_kernel|mha_fwd|mha_bwd",
    ),
    Family(
        "Triton matmul kernels (Inductor mm templates, tl.dot)",
        TENSOR_CORE,
        r"^triton_tem_fused_\w*(?:mm|conv)|^triton_\w*(?:mm|bmm|matmul)(?:_|$)|matmul_kernel",
        "none",
    ),
    # ---- AMD matrix cores
    Family("hipBLASLt/rocBLAS Tensile MFMA GEMMs (Cijk_..._MI...)", TENSOR_CORE, r"^Cijk_\w*_MI\d+x\d+x\d+", "tensile"),
    Family(
        "AMD Composable Kernel GEMM/conv/attention",
        TENSOR_CORE,
        r"ck(?:_tile)?::\w*(?:gemm|conv|fmha|mha)|device_gemm|DeviceGemm",
    ),
    Family("AMD MFMA/WMMA and xdlops kernels (MIOpen gtcx, CK xdl)", TENSOR_CORE, r"mfma|wmma|xdlops|_xdl_|gtcx"),
    Family("AMD aiter GEMM/attention/MoE", TENSOR_CORE, r"aiter\w*(?:gemm|fmha|mha|moe|attn|asm_)|aiter::"),
)

# Dtype tokens for names without a library-specific rule; the narrowest type wins
# (a block-scaled FP4 GEMM also names its bf16 output).
_TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (d, re.compile(p, re.IGNORECASE))
    for d, p in (
        ("fp4", r"e2m1|nvfp4|mxfp4|mxf4|fp4|vec16ue4m3"),
        ("fp8", r"e4m3|e5m2|fp8|f8f6f4|_f8_|ue8m0"),
        ("int8", r"int8|i8816|imma|s8s8|i8i8|_i8_"),
        ("bf16", r"bf16|bfloat16|bhalf"),
        ("fp16", r"(?<!b)f16|fp16|half|h884|h1688"),
        ("tf32", r"tf32|xf32|tensorop_s1688gemm|tensorop_s1688(?:fprop|dgrad|wgrad)"),
        ("fp64", r"dgemm|fp64|f64|double|d884"),
        ("fp32", r"f32f32|sgemm|scudnn|ffma|simt|<float|\bfloat\b|fp32"),
    )
)
_NVJET = re.compile(r"^nvjet_(?:sm\d+_)?([a-z]{3,5})_", re.IGNORECASE)
_NVJET_LETTER = {"t": "bf16", "h": "fp16", "q": "fp8", "s": "tf32"}
_TRTLLM = re.compile(r"^[A-Za-z]+_(?:Mx)?[A-Z][a-z0-9]+_((?:Mx)?[A-Z][a-z0-9]+)((?:Mx)?[A-Z][a-z0-9]+)_")
_TRTLLM_TYPE = {
    "e2m1": "fp4",
    "e2m3": "fp8",
    "e3m2": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "fp32": "tf32",
}
_TENSILE = re.compile(r"^Cijk_A[a-z]{3}_B[a-z]{3}_([A-Z0-9]+)")
_TENSILE_TYPE = {"B": "bf16", "H": "fp16", "S": "fp32", "D": "fp64", "X": "tf32"}
# Wider types first: a mixed-input GEMM runs at the rate of its wider operand.
_WIDTH = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")


@dataclass(frozen=True)
class KernelClass:
    core: str  # one of CLASSES
    dtype: str | None
    family: str | None  # the Family.name that matched; None for unknown / not-a-matmul by default


_UNKNOWN_TENSILE = Family("Tensile GEMM without MFMA in its name", UNKNOWN, r"^Cijk_", "tensile")


def _compiled(extra_tensor_core: Sequence[str] = ()) -> list[tuple[Family, re.Pattern[str]]]:
    fams = list(FAMILIES)
    if extra_tensor_core:
        # user patterns (--tensor-core-pattern) go first: they name what the table does not know
        fams = [Family(f"user pattern {p!r}", TENSOR_CORE, p) for p in extra_tensor_core] + fams
    return [(f, re.compile(f.pattern, re.IGNORECASE)) for f in fams]


_DEFAULT = _compiled()


def tensor_core_screen(extra_tensor_core: Sequence[str] = ()) -> re.Pattern[str]:
    """One regex that every tensor-core name matches (a cheap first pass over many names)."""
    pats = [f.pattern for f in FAMILIES if f.core == TENSOR_CORE] + list(extra_tensor_core)
    return re.compile("|".join(f"(?:{p})" for p in pats), re.IGNORECASE)


def token_dtype(name: str) -> str | None:
    for d, rx in _TOKENS:
        if rx.search(name):
            return d
    return None


def _wider(a: str | None, b: str | None) -> str | None:
    known = [x for x in (a, b) if x in _WIDTH]
    return min(known, key=_WIDTH.index) if known else None


def _dtype(family: Family, name: str) -> str | None:
    rule = family.dtype
    if rule == "none":
        return None
    if rule == "nvjet":
        if re.search(r"vec16ue4m3|e2m1", name, re.IGNORECASE):
            return "fp4"
        m = _NVJET.match(name)
        if m:
            code = m.group(1).lower()
            ab = code[:2] if len(code) == 5 else code[:1]
            return _wider(*(_NVJET_LETTER.get(c) for c in (ab[0], ab[-1])))
        return None
    if rule == "trtllm":
        m = _TRTLLM.match(name)
        if m:
            a, b = (_TRTLLM_TYPE.get(x.lower().removeprefix("mx")) for x in m.groups())
            return _wider(a, b)
        return token_dtype(name)
    if rule == "tensile":
        m = _TENSILE.match(name)
        if m:
            code = m.group(1)
            if code.startswith(("F8", "B8")):
                return "fp8"
            if code.startswith("I8"):
                return "int8"
            return _TENSILE_TYPE.get(code[0])
        return None
    if rule == "tokens":
        return token_dtype(name)
    return rule  # a fixed dtype


def classify(name: str, gemm_like: bool, extra_tensor_core: Sequence[str] = ()) -> KernelClass:
    """The class and dtype of one kernel name. ``gemm_like``: the name looks like a matmul
    (``MATMUL_KERNEL``); such a name that no family knows is ``unknown``."""
    table = _compiled(extra_tensor_core) if extra_tensor_core else _DEFAULT
    for fam, rx in table:
        if rx.search(name):
            dt = _dtype(fam, name) if fam.core != NOT_MATMUL else None
            return KernelClass(fam.core, dt, fam.name)
    if gemm_like:
        dt = _dtype(_UNKNOWN_TENSILE, name) if name.startswith("Cijk_") else token_dtype(name)
        return KernelClass(UNKNOWN, dt, None)
    return KernelClass(NOT_MATMUL, None, None)


@dataclass(frozen=True)
class NameClasses:
    """Per name code: class code (index into CLASSES) and dtype (None when not known)."""

    core: np.ndarray  # int8 codes
    dtype: list[str | None]
    family: list[str | None]

    def mask(self, core: str) -> np.ndarray:
        mask: np.ndarray = self.core == CODE[core]
        return mask


def classify_names(
    names: Sequence[str], codes: Iterable[int] | None = None, extra_tensor_core: Sequence[str] = ()
) -> NameClasses:
    """Classify the names of a trace's name table. ``codes``: only these (the kernel names;
    a trace holds far more op names than kernel names); the others read as not-a-matmul."""
    core = np.full(len(names), CODE[NOT_MATMUL], np.int8)
    dtypes: list[str | None] = [None] * len(names)
    fams: list[str | None] = [None] * len(names)
    for i in range(len(names)) if codes is None else sorted({int(c) for c in codes}):
        n = names[i]
        kc = classify(n, bool(MATMUL_KERNEL.search(n)), extra_tensor_core)
        core[i] = CODE[kc.core]
        dtypes[i] = kc.dtype
        fams[i] = kc.family
    return NameClasses(core, dtypes, fams)


def dtype_shares(codes: Iterable[int], durations: Iterable[float], classes: NameClasses) -> dict[str, float]:
    """Kernel time per dtype over matmul kernels (tensor-core, CUDA-core and unknown), as shares
    of their total; kernels whose name gives no dtype count under ``"unknown"``."""
    acc: dict[str, float] = {}
    total = 0.0
    for c, d in zip(codes, durations, strict=True):
        if classes.core[c] == CODE[NOT_MATMUL]:
            continue
        key = classes.dtype[c] or "unknown"
        acc[key] = acc.get(key, 0.0) + float(d)
        total += float(d)
    if total <= 0:
        return {}
    return {k: v / total for k, v in sorted(acc.items(), key=lambda kv: -kv[1])}


def dominant_dtype(shares: dict[str, float]) -> str | None:
    """The dtype with the most matmul kernel time, among kernels whose name gives one."""
    known = {k: v for k, v in shares.items() if k != "unknown"}
    return max(known, key=lambda k: known[k]) if known else None
