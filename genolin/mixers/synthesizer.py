"""The synthesizer mixer (design document 003; ``ops/mixing.py``): attention weights that do not come from q . k,
times the values. ``synthesizer="dense"``: each token's row of logits over key positions from a per-token MLP,
W2 relu(W1 x); ``"random"``: learned logits R1 R2^T (H, L, L), factorised with rank ``synthesizer_rank``.
Length-limited: the logits are sized by ``max_len`` (training sets it to its longest input unless given); longer
inputs are refused."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from genolin.mixers.base import Mixer
from genolin.ops import check_length, synthesizer_attention


class SynthesizerMixer(Mixer):
    name = "synthesizer"
    length_limited = True
    uses_qkv = False

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        d, h = cfg.d_model, cfg.n_heads
        self.value = nn.Linear(d, d, bias=False)
        if cfg.synthesizer == "dense":  # per token, its row of logits over key positions: W2 relu(W1 x)
            self.synth_hidden = nn.Linear(d, d)
            self.synth_logits = nn.Linear(d, h * cfg.max_len)
        else:  # learned logits R1 R2^T (H, L, L), factorised; N(0, 1) entries at the start
            r = cfg.synthesizer_rank
            self.r1 = nn.Parameter(torch.randn(h, cfg.max_len, r) * r ** -0.25)
            self.r2 = nn.Parameter(torch.randn(h, cfg.max_len, r) * r ** -0.25)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Synthesized attention weights times the values: (B, N, d) -> (B, N, H, hd) -> (B, N, d)."""
        cfg = self.cfg
        b, n, _ = x.shape
        check_length(n, cfg.max_len, "the synthesizer mixer")
        v = self.value(x).view(b, n, cfg.n_heads, cfg.head_dim)
        if cfg.synthesizer == "dense":
            logits = self.synth_logits(F.relu(self.synth_hidden(x))).view(b, n, cfg.n_heads, cfg.max_len)
            logits = logits[..., :n].transpose(1, 2)  # (B, H, N, N)
        else:
            logits = (self.r1[:, :n] @ self.r2[:, :n].transpose(1, 2))[None]  # (1, H, N, N)
        return self._finish(synthesizer_attention(logits, v, key_padding_mask=mask))


__all__ = ["SynthesizerMixer"]
