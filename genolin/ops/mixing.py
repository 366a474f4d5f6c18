"""The baselines of design document 003 that are not linear attention: Linformer, FNet and the Synthesizer.

Layout as the other ops: q, k (B, N, H, D), v (B, N, H, E) -> (B, N, H, E); key_padding_mask (B, N), True = real.

- ``linformer_attention``: keys and values projected along the length to P rows, then exact softmax attention
  over those P rows (Wang et al. 2020)::

      K' = E[:, :N] (m * K) / sqrt(n)   (P, D),   V' = F[:, :N] (m * V) / sqrt(n)   (P, E),
      o = softmax(q K'^T / sqrt(D)) V'

  E, F (P, L) are learned, L the maximum length: only the first N columns are used; padded keys are zeroed
  before the projection and n is the row's number of real tokens (with N(0, 1) entries in E the projected rows
  keep the keys' size whatever n is), so a sequence's output does not depend on its batch's padding. Inputs
  longer than L are refused (ValueError naming the setting): the projection has no columns for them.
- ``fnet_mixing``: x (B, N, C) -> Re(FFT over the length and the hidden dimension) (Lee-Thorp et al. 2022),
  with the unitary ("ortho") scaling so the output keeps the input's size. Each sequence is transformed over its
  own real tokens: a padded batch gives every row the result it has alone.
- ``synthesizer_attention``: softmax over given (B or 1, H, N, N) logits that do not come from q . k (dense:
  a per-token MLP; random: learned factorised R1 R2^T; Tay et al. 2021), padded keys excluded, times v.
"""

from __future__ import annotations

import torch

from genolin.ops.feature_maps import acc_dtype
from genolin.ops.softmax import softmax_attention


def _too_long(n: int, limit: int, what: str) -> ValueError:
    return ValueError(f"{what}: {n} tokens is more than its maximum length {limit} (model.max_len; "
                      f"train with a larger --set model.max_len=N)")


def linformer_attention(q, k, v, proj_k: torch.Tensor, proj_v: torch.Tensor, *,
                        key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Linformer: proj_k, proj_v (P, L) learned length projections; see the module docstring."""
    n = q.shape[1]
    if n > proj_k.shape[1]:
        raise _too_long(n, proj_k.shape[1], "linformer")
    if key_padding_mask is None:
        scale = torch.full((q.shape[0], 1, 1, 1), n ** -0.5, dtype=k.dtype, device=k.device)
    else:
        m = key_padding_mask.to(k.dtype)[:, :, None, None]
        scale = m.sum(1, keepdim=True).clamp_min(1.0).rsqrt()  # (B, 1, 1, 1)
        m = m * scale
        k, v = k * m, v * m.to(v.dtype)
    if key_padding_mask is None:
        k, v = k * scale, v * scale.to(v.dtype)
    kp = torch.einsum("pn,bnhd->bphd", proj_k[:, :n].to(k.dtype), k)
    vp = torch.einsum("pn,bnhe->bphe", proj_v[:, :n].to(v.dtype), v)
    return softmax_attention(q, kp, vp)


def fnet_mixing(x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """FNet: x (B, N, C) -> Re(FFT2) (B, N, C) over each row's real tokens; padded rows' outputs are 0."""
    dims = (1, 2)
    if key_padding_mask is None or bool(key_padding_mask.all()):
        return torch.fft.fft2(x.float() if x.dtype in (torch.bfloat16, torch.float16) else x, dim=dims,
                              norm="ortho").real.to(x.dtype)
    b, n, c = x.shape
    # pack each row's real tokens to its front (stable: in order), transform rows of equal length together
    order = torch.argsort((~key_padding_mask).to(torch.int8), dim=1, stable=True)  # (B, N)
    packed = torch.gather(x, 1, order[..., None].expand(b, n, c))
    lengths = key_padding_mask.sum(1)
    out = torch.zeros_like(packed)
    for length in torch.unique(lengths).tolist():
        if length == 0:
            continue
        rows = (lengths == length).nonzero().squeeze(1)
        part = packed[rows, :length]
        part = part.float() if part.dtype in (torch.bfloat16, torch.float16) else part
        out[rows, :length] = torch.fft.fft2(part, dim=dims, norm="ortho").real.to(x.dtype)
    return torch.zeros_like(x).scatter(1, order[..., None].expand(b, n, c), out)


def synthesizer_attention(logits: torch.Tensor, v: torch.Tensor, *,
                          key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(logits over real keys) v: logits (B or 1, H, N, N), v (B, N, H, E) -> (B, N, H, E)."""
    logits = logits.to(acc_dtype(logits.dtype))  # softmax in float32 (float64 for float64)
    if key_padding_mask is not None:
        logits = logits.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
    weights = torch.softmax(logits, dim=-1).nan_to_num(0.0).to(v.dtype)  # a row of all-padding keys: zeros
    return torch.einsum("bhij,bjhe->bihe", weights, v)


def check_length(n: int, limit: int, what: str) -> None:
    """ValueError when n tokens exceed a mixer's maximum length."""
    if n > limit:
        raise _too_long(n, limit, what)


__all__ = ["check_length", "fnet_mixing", "linformer_attention", "synthesizer_attention"]
