"""What every mixer kind is: an ``nn.Module`` built from the encoder's config and its layer index, mixing tokens
x (B, N, d) with mask (B, N) bool (True = real; None: no padding) -> (B, N, d); and what it declares of itself.

A kind declares, as class attributes the registry (``genolin.mixers``) reads to derive ``MIXERS`` and the other
tuples:
- ``name``: its ``EncoderConfig.mixer`` value;
- ``streams``: it has ``stream_into``, the chunked path of inference with gradients off (memory of a few chunks);
- ``causal_capable``: ``causal=True`` is allowed, and ``step`` (one token at a time) equals the parallel form;
- ``scan``: a recurrent scan (decay gates and/or the delta rule), run both ways;
- ``length_limited``: parameters sized by ``max_len``; longer inputs are refused;
- ``redraws``: random features ``redraw`` replaces while training (FAVOR+).
``check(cfg)`` raises ValueError for settings the kind cannot take (called by ``EncoderConfig``).

The pieces most kinds share live here: the q, k, v projection (``qkv``, (d -> 3 d), unless ``uses_qkv`` is off)
and the output projection (``out``) with dropout. Parameters are created in a fixed order (shared ones first, then
the kind's own), so a seed gives the same weights whatever the kind, and a kind's attribute names are its
state_dict keys (``blocks.<layer>.mixer.<name>``): saved checkpoints depend on them.
"""

from __future__ import annotations

import torch
import torch.nn as nn

# the longest input new runs may give a length-limited mixer (genolin.config, SequenceTask): the dense synthesizer's
# logits are (B, H, N, max_len), 1 GiB per sequence and layer at 8,192 tokens with 4 heads in float32
LENGTH_LIMITED_MAX_TOKENS = 8192


def listed(names) -> str:
    """("a", "b", "c") -> "a, b and c" (for messages naming the kinds that have a property)."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class Mixer(nn.Module):
    """Multi-head token mixing of one kind: (B, N, d), mask (B, N) -> (B, N, d). ``cfg`` is the encoder's
    ``EncoderConfig`` (``genolin.model``), ``layer`` the block's index (0-based)."""

    name: str = ""
    streams: bool = False
    causal_capable: bool = False
    scan: bool = False
    length_limited: bool = False
    redraws: bool = False
    uses_qkv: bool = True

    @classmethod
    def check(cls, cfg) -> None:
        """Raise ValueError for settings this kind cannot take (nothing to check by default)."""

    def __init__(self, cfg, layer: int):
        super().__init__()
        self.cfg, self.layer = cfg, layer
        d = cfg.d_model
        if self.length_limited and cfg.max_len < 1:
            raise ValueError(f"the {self.name} mixer needs model.max_len (training sets it from the data)")
        if self.uses_qkv:
            self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.drop = nn.Dropout(cfg.dropout)

    # -- shared pieces -----------------------------------------------------------------------------------------
    def _qkv(self, x: torch.Tensor):
        """x (B, N, d) -> q, k, v (B, N, H, hd), strided views of one product."""
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.cfg.n_heads, self.cfg.head_dim).unbind(2)
        return q, k, v

    def _finish(self, o: torch.Tensor) -> torch.Tensor:
        """Heads (B, N, H, hd) -> output projection and dropout (B, N, d)."""
        b, n = o.shape[:2]
        return self.drop(self.out(o.reshape(b, n, self.cfg.d_model)))

    # -- the whole sequence: every kind ----------------------------------------------------------------------
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    # -- streaming inference (``streams``): x (B, N, d) in chunks of ``chunk`` tokens, added into ``residual`` -----
    def stream_into(self, x: torch.Tensor, mask: torch.Tensor | None, residual: torch.Tensor, chunk: int) -> None:
        raise ValueError(f"the {self.name} mixer has no streaming path")

    # -- one token at a time (``causal_capable``) ------------------------------------------------------------
    def init_state(self) -> dict:
        """The per-layer state ``step`` reads and updates."""
        return {}

    def step(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        """x (B, d) for the next token -> (B, d); ``state`` is updated in place."""
        raise ValueError(f"the {self.name} mixer has no step API")

    # -- random features (``redraws``) ----------------------------------------------------------------------
    @torch.no_grad()
    def redraw(self, draw: int) -> None:
        """Replace the random features with draw number ``draw`` (nothing to redraw by default)."""


__all__ = ["LENGTH_LIMITED_MAX_TOKENS", "Mixer", "listed"]
