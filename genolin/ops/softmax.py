"""Exact softmax attention in genolin's layout, for comparison: q, k (B, N, H, D), v (B, N, H, E) -> (B, N, H, E).

A thin wrapper of torch's scaled_dot_product_attention (which picks a fused kernel where it can). Quadratic in N:
a baseline, not a long-context path. A query whose keys are all padded has no defined output (NaN).

``local_softmax_attention``: the same inside non-overlapping windows of W tokens (the local half of the hybrid
mixer); cost linear in N. The input is padded to a multiple of W; a window holding only padding gets an arbitrary
finite output (its rows are padding too).
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


def local_softmax_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    *,
    key_padding_mask: torch.Tensor | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """Softmax attention within non-overlapping windows of ``window`` tokens: (B, N, H, *) -> (B, N, H, E)."""
    b, n, h, _ = q.shape
    pad = -n % window
    mask = key_padding_mask
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (q, k, v))
        if mask is None:
            mask = torch.ones(b, n, dtype=torch.bool, device=q.device)
        mask = F.pad(mask, (0, pad), value=False)
    nw = (n + pad) // window
    qw, kw, vw = (t.reshape(b * nw, window, h, t.shape[-1]) for t in (q, k, v))
    mw = None  # no padding: no mask, so the attention kernel takes its fast path
    if mask is not None:
        mw = mask.reshape(b * nw, window)
        mw = mw | ~mw.any(dim=1, keepdim=True)  # windows of padding only: any finite output will do
    o = softmax_attention(qw, kw, vw, key_padding_mask=mw, causal=causal)
    return o.reshape(b, n + pad, h, v.shape[-1])[:, :n]
