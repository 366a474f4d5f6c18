"""The linformer mixer (design document 003; ``ops/mixing.py``): keys and values projected along the length to
``linformer_rows`` rows, then softmax attention over those rows. Length-limited: the projections are sized by
``max_len`` (training sets it to its longest input unless given); longer inputs are refused."""

from __future__ import annotations

import torch
import torch.nn as nn

from genolin.mixers.base import Mixer
from genolin.ops import check_length, linformer_attention


class LinformerMixer(Mixer):
    name = "linformer"
    length_limited = True

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        # (linformer_rows, max_len), N(0, 1): the op divides by sqrt(real tokens)
        self.proj_k = nn.Parameter(torch.randn(cfg.linformer_rows, cfg.max_len))
        self.proj_v = nn.Parameter(torch.randn(cfg.linformer_rows, cfg.max_len))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        check_length(x.shape[1], self.cfg.max_len, "the linformer mixer")
        q, k, v = self._qkv(x)
        return self._finish(linformer_attention(q, k, v, self.proj_k, self.proj_v, key_padding_mask=mask))


__all__ = ["LinformerMixer"]
