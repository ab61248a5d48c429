"""User-supplied model FLOPs: the ``tb_mfu.json`` sidecar file in a run directory.

Trace FLOPs come from recorded shapes, which miss work hidden in opaque kernels
(``torch.compile`` Triton matmul templates, custom CUDA ops) and follow
FlopCounterMode's convention. The sidecar gives the *model* FLOPs per step,
either directly or from model dimensions with the PaLM formula
(6·N + 12·L·H·Q·T FLOPs per token). Format (every key optional except as noted)::

    {
      "version": 1,
      "flops_per_step": 1.62e15,          # per GPU (per trace), per optimizer step
      "model": {                           # used when flops_per_step is absent
        "n_params": 1.24e8,                # N: parameters taking part in matmuls
        "tokens_per_step": 16384,          # per GPU; or "batch_size" (x seq_len)
        "n_layers": 12, "d_model": 768,    # attention term (d_model = heads x head_dim)
        "n_heads": 12, "head_dim": 64,     # ...or these two instead of d_model
        "seq_len": 1024
      },
      "tf32": false,                       # fp32 matmuls ran on TF32 tensor cores
      "source": "FlopCounterMode",         # free text: where the figure comes from
      "note": "..."
    }

``<worker>.tb_mfu.json`` next to the traces overrides ``tb_mfu.json`` for the
worker of that name (for runs whose ranks do different work). The loader only
reads; it never writes. ``tb_mfu_plugin.profiling`` writes this file.
"""

from __future__ import annotations

import math

import msgspec

from ...core.errors import TraceError
from ...core.palm import palm_flops_per_token
from ..limits import Deadline
from .discover import SIDECAR_NAME
from .locations import Location
from .opener import open_location

SIDECAR_VERSION = 1
_MAX_BYTES = 1 << 20
# 1e24 FLOPs in one step is ~30 minutes of a 1,000-GPU H100 cluster per step: beyond
# any training step we analyse; larger figures are typos or hostile.
MAX_FLOPS_PER_STEP = 1e24


class ModelDims(msgspec.Struct, kw_only=True, omit_defaults=True):
    n_params: float
    tokens_per_step: float | None = None
    batch_size: int | None = None
    n_layers: int | None = None
    d_model: int | None = None
    n_heads: int | None = None
    head_dim: int | None = None
    seq_len: int | None = None

    @property
    def d_attn(self) -> int | None:
        """H·Q, the width of attention (``d_model`` when not given as heads × head_dim)."""
        if self.n_heads and self.head_dim:
            return self.n_heads * self.head_dim
        return self.d_model

    @property
    def tokens(self) -> float | None:
        if self.tokens_per_step:
            return float(self.tokens_per_step)
        if self.batch_size and self.seq_len:
            return float(self.batch_size * self.seq_len)
        return None

    def flops_per_token(self) -> float:
        """PaLM: 6·N + 12·L·H·Q·T (``core.palm``; attention term only when L, H·Q and T are all given)."""
        return palm_flops_per_token(self.n_params, self.n_layers, self.d_attn, self.seq_len)

    def flops_per_step(self) -> float | None:
        t = self.tokens
        return None if t is None else self.flops_per_token() * t


class Sidecar(msgspec.Struct, kw_only=True, omit_defaults=True):
    version: int = SIDECAR_VERSION
    flops_per_step: float | None = None
    model: ModelDims | None = None
    tf32: bool | None = None
    source: str | None = None
    note: str | None = None

    def model_flops_per_step(self) -> float | None:
        """``flops_per_step`` if given, else the PaLM figure from ``model``."""
        if self.flops_per_step:
            return float(self.flops_per_step)
        if self.model is not None:
            return self.model.flops_per_step()
        return None

    @property
    def method(self) -> str:
        if self.flops_per_step:
            return self.source or "sidecar flops_per_step"
        return "6N + 12·L·H·Q·T (PaLM) from sidecar model dims"


_decoder = msgspec.json.Decoder(Sidecar)
_encoder = msgspec.json.Encoder()


def parse_sidecar(data: bytes, path: str = SIDECAR_NAME) -> Sidecar:
    """Decode and check a sidecar document. Raises ``TraceError(path, reason)``."""
    try:
        sc = _decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceError(path, f"invalid MFU sidecar: {exc}") from None
    except msgspec.DecodeError as exc:
        raise TraceError(path, f"MFU sidecar is not valid JSON ({exc})") from None
    except RecursionError:
        raise TraceError(path, "MFU sidecar: JSON nested too deeply") from None
    if sc.version > SIDECAR_VERSION:
        raise TraceError(path, f"MFU sidecar version {sc.version} is newer than this tool ({SIDECAR_VERSION})")
    if sc.flops_per_step is not None and not sc.flops_per_step > 0:
        raise TraceError(path, "MFU sidecar: flops_per_step must be a positive number")
    if sc.model is not None:
        m = sc.model
        if not m.n_params > 0:
            raise TraceError(path, "MFU sidecar: model.n_params must be positive")
        if m.tokens is None:
            raise TraceError(path, "MFU sidecar: model needs tokens_per_step (or batch_size and seq_len)")
        for k in ("n_layers", "d_model", "n_heads", "head_dim", "seq_len", "batch_size"):
            v = getattr(m, k)
            if v is not None and v <= 0:
                raise TraceError(path, f"MFU sidecar: model.{k} must be positive")
    if sc.flops_per_step is None and sc.model is None:
        raise TraceError(path, "MFU sidecar gives neither flops_per_step nor model dimensions")
    flops = sc.model_flops_per_step()
    if flops is None or not math.isfinite(flops) or flops > MAX_FLOPS_PER_STEP:
        raise TraceError(path, f"MFU sidecar: model FLOPs per step {flops!r} is not a plausible finite number")
    return sc


def encode_sidecar(sc: Sidecar) -> bytes:
    """The sidecar as indented JSON bytes (``profiling`` writes them)."""
    return msgspec.json.format(_encoder.encode(sc), indent=2) + b"\n"


def sidecar_paths(run_dir: Location, worker: str | None = None) -> list[Location]:
    """Candidate files in priority order: ``<worker>.tb_mfu.json``, then ``tb_mfu.json``."""
    out = []
    if worker:
        out.append(run_dir.join(f"{worker}.{SIDECAR_NAME}"))
    out.append(run_dir.join(SIDECAR_NAME))
    return out


def _read(path: Location, deadline: Deadline | None = None) -> bytes | None:
    """File bytes, or None when it does not exist."""
    try:
        # a FIFO or device named tb_mfu.json must not block the analysis
        with open_location(path, "MFU sidecar", deadline=deadline) as f:
            data = f.read(_MAX_BYTES + 1)
    except (FileNotFoundError, NotADirectoryError):  # a remote one too (errors.TraceNotFound)
        return None
    except OSError as exc:
        raise TraceError(path.text, f"cannot read MFU sidecar ({exc.strerror or exc})") from None
    if len(data) > _MAX_BYTES:
        raise TraceError(path.text, "MFU sidecar is larger than 1 MiB")
    return data


def load_sidecar(
    run_dir: Location, worker: str | None = None, deadline: Deadline | None = None
) -> tuple[Sidecar, str] | None:
    """The sidecar for ``run_dir`` (and ``worker``) with its location's text (as reports show
    it), or None when there is none.

    ``run_dir`` is the directory holding the traces (a run). A file that exists but
    is malformed raises ``TraceError(path, reason)``. A remote sidecar is read within
    ``deadline`` (its trace's), and 60 s at most.
    """
    for path in sidecar_paths(run_dir, worker):
        data = _read(path, deadline)
        if data is not None:
            return parse_sidecar(data, path.text), path.text
    return None
