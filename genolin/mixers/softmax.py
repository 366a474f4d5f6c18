"""The softmax mixer: exact multi-head attention (quadratic in N; a baseline), with a causal form whose step API
keeps every past key and value."""

from __future__ import annotations

import torch

from genolin.mixers.base import Mixer
from genolin.ops import softmax_attention


def cached_softmax_step(q, k, v, state: dict, *, restart: bool = False) -> torch.Tensor:
    """q, k, v (B, 1, H, hd) of the next token -> softmax attention over the cached keys and values, this token's
    included: (B, 1, H, hd). The cache (``state["k"]``, ``state["v"]``, (B, T, H, hd)) grows by the token, or
    starts anew from it with ``restart`` (the hybrid mixer's windows)."""
    if state["k"] is None or restart:
        state["k"], state["v"] = k, v
    else:
        state["k"], state["v"] = torch.cat([state["k"], k], 1), torch.cat([state["v"], v], 1)
    return softmax_attention(q, state["k"], state["v"])


class SoftmaxMixer(Mixer):
    """softmax(q k^T / sqrt(hd)) v per head, padded keys excluded (and later ones with ``causal``)."""

    name = "softmax"
    causal_capable = True

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        q, k, v = self._qkv(x)
        return self._finish(softmax_attention(q, k, v, key_padding_mask=mask, causal=self.cfg.causal))

    def init_state(self) -> dict:
        return {"k": None, "v": None, "t": 0}

    def step(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        q, k, v = self._qkv(x[:, None])
        o = cached_softmax_step(q, k, v, state)
        state["t"] += 1
        return self._finish(o)[:, 0]


__all__ = ["SoftmaxMixer", "cached_softmax_step"]
