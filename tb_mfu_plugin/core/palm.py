"""The PaLM formula: model FLOPs per token of a dense decoder-only transformer.

PaLM (Chowdhery et al., 2022, appendix B) counts the training FLOPs of one token as

    6·N + 12·L·H·Q·T

- ``6·N``: every one of the ``N`` parameters takes part in one multiply-add (2 FLOPs) per
  token in the forward pass, and in two in the backward pass (the gradient with respect to
  the activations and with respect to the weight): 2 + 4 = 6 FLOPs per parameter.
- ``12·L·H·Q·T``: self-attention's two matmuls, Q·Kᵀ and scores·V, are not parameters. Per
  layer and token each costs 2·(H·Q)·T FLOPs forward (``H·Q`` the attention width, ``T`` the
  sequence length), so 4·H·Q·T forward and twice that backward: 12·H·Q·T, times ``L`` layers.
  It assumes no recompute and no causal discount (the full T×T score matrix).

Shape-derived FLOPs (``flop_count``, FlopCounterMode's convention) of a model using fused
SDPA exceed it by 2·L·H·Q·T per token: FlopCounterMode also counts the Q·Kᵀ recompute of the
fused attention backward.
"""

from __future__ import annotations


def palm_flops_per_token(
    n_params: float, n_layers: int | None = None, d_attn: int | None = None, seq_len: int | None = None
) -> float:
    """6·N + 12·L·H·Q·T FLOPs per token (``d_attn`` = H·Q, ``seq_len`` = T); the attention term
    only when L, H·Q and T are all given."""
    f = 6.0 * n_params
    if n_layers and d_attn and seq_len:
        f += 12.0 * n_layers * d_attn * seq_len
    return f
