"""Linear attention mixers (design document 002): "linear" (feature map elu / relu / exp, optionally after a
learned per-head projection of q and k to ``feature_dim`` features) and "favor" (FAVOR+ with ``favor_features``
random features, redrawn while training). Both, and the hybrid mixer built on them (``hybrid.py``), have the
streaming path and the causal form with a step API:

- whole sequence: ``linear_attention`` (the op works in chunks of ``chunk_tokens``);
- streaming, bidirectional: pass 1 accumulates every chunk's keys and values into the state S, z; pass 2 lets each
  chunk's queries read it; causal: one pass carrying the state from chunk to chunk;
- step: the state after the tokens so far, updated by one token.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from genolin.mixers.base import Mixer
from genolin.ops import (
    accumulate_state,
    causal_linear_attention,
    favor_projection,
    linear_attention,
    query_state,
)


def _seed_for(base: int, layer: int, draw: int) -> int:
    """A seed for FAVOR+ draw number ``draw`` of layer ``layer``: the same on every rank."""
    return ((base * 1_000_003 + layer) * 1_000_033 + draw) & 0x7FFF_FFFF_FFFF_FFFF


class LinearMixer(Mixer):
    """phi(q) (phi(k)^T v) / (phi(q) . sum phi(k)) per head, phi the configured feature map."""

    name = "linear"
    streams = causal_capable = True
    learned_features = True  # feature_dim: a learned per-head projection before the feature map

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        h, hd = cfg.n_heads, cfg.head_dim
        self.feature_proj = None
        if cfg.feature_dim and self.learned_features:
            self.feature_proj = nn.Parameter(torch.randn(h, cfg.feature_dim, hd) / math.sqrt(hd))
            self.feature_bias = nn.Parameter(torch.zeros(h, cfg.feature_dim))

    # -- pieces ------------------------------------------------------------------------------------------------
    def _features(self, x: torch.Tensor) -> torch.Tensor:
        """The learned per-head projection before the feature map: (B, N, H, hd) -> (B, N, H, r)."""
        if self.feature_proj is None:
            return x
        return torch.einsum("bnhd,hrd->bnhr", x, self.feature_proj) + self.feature_bias

    def _linear_kwargs(self) -> dict:
        return {"feature_map": self.cfg.feature_map}

    def _mix(self, x, q, k, v, mask, o: torch.Tensor) -> torch.Tensor:
        """What the heads give for the linear attention ``o`` (B, N, H, hd) of x's tokens: o itself (the hybrid
        mixer adds its local softmax)."""
        return o

    def _mix_step(self, x, q, k, v, state: dict, o: torch.Tensor) -> torch.Tensor:
        """``_mix`` for one token (x (B, 1, d); q, k, v, o (B, 1, H, hd)) in the step API."""
        return o

    # -- whole sequence ----------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        cfg = self.cfg
        q, k, v = self._qkv(x)
        o = linear_attention(self._features(q), self._features(k), v, key_padding_mask=mask, causal=cfg.causal,
                             eps=cfg.eps, chunk_size=cfg.chunk_tokens, **self._linear_kwargs())
        return self._finish(self._mix(x, q, k, v, mask, o))

    # -- streaming inference: x (B, N, d) in chunks of C tokens, output added into ``residual`` -----------------
    @torch.no_grad()
    def stream_into(self, x: torch.Tensor, mask: torch.Tensor | None, residual: torch.Tensor, chunk: int) -> None:
        cfg = self.cfg
        n = x.shape[1]
        kwargs = self._linear_kwargs()
        if cfg.causal:
            state = None
            for s in range(0, n, chunk):
                xc, mc = x[:, s:s + chunk], None if mask is None else mask[:, s:s + chunk]
                q, k, v = self._qkv(xc)
                o, state = causal_linear_attention(self._features(q), self._features(k), v, key_padding_mask=mc,
                                                   eps=cfg.eps, state=state, **kwargs)
                residual[:, s:s + chunk] += self._finish(self._mix(xc, q, k, v, mc, o))
            return
        state = None
        for s in range(0, n, chunk):  # pass 1: keys and values into S and z
            _, k, v = self._qkv(x[:, s:s + chunk])
            mc = None if mask is None else mask[:, s:s + chunk]
            state = accumulate_state(self._features(k), v, key_padding_mask=mc, state=state, **kwargs)
        for s in range(0, n, chunk):  # pass 2: queries read the state
            xc, mc = x[:, s:s + chunk], None if mask is None else mask[:, s:s + chunk]
            q, k, v = self._qkv(xc)
            o = query_state(self._features(q), state, eps=cfg.eps, out_dtype=v.dtype, **kwargs)
            residual[:, s:s + chunk] += self._finish(self._mix(xc, q, k, v, mc, o))

    # -- one token at a time (causal) -------------------------------------------------------------------------
    def init_state(self) -> dict:
        return {"attn": None, "t": 0}

    def step(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        q, k, v = self._qkv(x[:, None])
        o, state["attn"] = causal_linear_attention(self._features(q), self._features(k), v, eps=self.cfg.eps,
                                                   state=state["attn"], chunk_size=1, **self._linear_kwargs())
        o = self._mix_step(x[:, None], q, k, v, state, o)
        state["t"] += 1
        return self._finish(o)[:, 0]


class FavorMixer(LinearMixer):
    """FAVOR+: positive random features of q and k (a (favor_features, hd) projection per layer, a buffer: fixed
    in eval and saved with the model), redrawn by ``redraw`` while training."""

    name = "favor"
    redraws = True
    learned_features = False

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        w = favor_projection(cfg.favor_features, cfg.head_dim, seed=_seed_for(cfg.seed, layer, 0))
        self.register_buffer("projection", w)

    def _linear_kwargs(self) -> dict:
        return {"feature_map": "favor", "projection": self.projection}

    @torch.no_grad()
    def redraw(self, draw: int) -> None:
        """Draw number ``draw`` (deterministic in seed, layer and draw: every data-parallel rank draws the same)."""
        w = favor_projection(self.cfg.favor_features, self.cfg.head_dim,
                             seed=_seed_for(self.cfg.seed, self.layer, draw))
        self.projection.copy_(w)


__all__ = ["FavorMixer", "LinearMixer"]
