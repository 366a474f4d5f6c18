"""Exact softmax attention in genolin's layout, for comparison: q, k (B, N, H, D), v (B, N, H, E) -> (B, N, H, E).

A thin wrapper of torch's scaled_dot_product_attention (which picks a fused kernel where it can). Quadratic in N:
a baseline, not a long-context path. A query whose keys are all padded has no defined output (NaN).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v with scale 1/sqrt(D) by default; key_padding_mask (B, N), True = real."""
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # (B, H, N, *)
    mask = None
    if key_padding_mask is not None:
        mask = key_padding_mask[:, None, None, :]  # (B, 1, 1, N)
        if causal:
            n = q.shape[1]
            mask = mask & torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, is_causal=causal and mask is None, scale=scale)
    return o.transpose(1, 2)
