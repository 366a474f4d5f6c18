"""A left-to-right scan made bidirectional, as bidirectional state-space DNA models do (Caduceus' BiMamba): the
same scan over the sequence and over its reverse, with the same inputs, summed.

    o = scan(x) + flip(scan(flip(x)))          x: q, k, v (B, N, H, *) and per-token gates (B, N, H[, K])

Padding (key_padding_mask (B, N), True = real) must not reach real tokens from either side: at padded positions
k and v are zeroed and the gates made neutral (log-decay g = 0: no decay; beta = 0: no write), so the state
passes a padded token unchanged. Padded tokens' own outputs are arbitrary (finite); callers mask them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def neutral_padding(mask: torch.Tensor | None, k, v, gates: dict) -> tuple:
    """k, v and gates with padded positions made state-neutral (see the module docstring)."""
    if mask is None:
        return k, v, gates
    m = mask.to(k.dtype)[:, :, None]  # (B, N, 1)
    k, v = k * m[..., None], v * m.to(v.dtype)[..., None]
    out = {}
    for name, x in gates.items():
        if x is None:
            out[name] = None
            continue
        mx = mask.to(x.dtype)[:, :, None]
        out[name] = x * (mx if x.dim() == 3 else mx[..., None])  # g (B, N, H) or (B, N, H, K); beta (B, N, H)
    return k, v, out


def bidirectional_scan(scan: Callable, q, k, v, *, mask: torch.Tensor | None = None, causal: bool = False,
                       **gates) -> torch.Tensor:
    """scan(q, k, v, **gates) -> (B, N, H, V) run left-to-right and right-to-left (or only left-to-right when
    ``causal``), summed; ``gates`` are per-token tensors (B, N, ...) or None."""
    k, v, gates = neutral_padding(mask, k, v, gates)
    out = scan(q, k, v, **gates)
    if causal:
        return out

    def flip(x):
        return None if x is None else x.flip(1)

    back = scan(flip(q), flip(k), flip(v), **{n: flip(x) for n, x in gates.items()})
    return out + back.flip(1)


__all__ = ["bidirectional_scan", "neutral_padding"]
