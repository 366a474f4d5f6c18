"""The hybrid mixer (design document 000): softmax inside non-overlapping windows of ``local_window_tokens``
tokens plus global linear attention (``linear.py``: feature map and ``feature_dim`` as there), mixed per head and
token by a learned sigmoid gate: o = g local + (1 - g) global, g = sigmoid(W x) (B, N, H, 1)."""

from __future__ import annotations

import torch
import torch.nn as nn

from genolin.mixers.linear import LinearMixer
from genolin.mixers.softmax import cached_softmax_step
from genolin.ops import fused_applies, gated_mix, local_softmax_attention


class HybridMixer(LinearMixer):
    name = "hybrid"

    @classmethod
    def check(cls, cfg) -> None:
        if cfg.chunk_tokens % cfg.local_window_tokens:  # streamed chunks must not cut a window
            raise ValueError("chunk_tokens must be a multiple of local_window_tokens for the hybrid mixer")

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        self.gate = nn.Linear(cfg.d_model, cfg.n_heads)

    def _local(self, q, k, v, mask):
        """Softmax within non-overlapping windows: (B, N, H, hd) -> (B, N, H, hd)."""
        return local_softmax_attention(q, k, v, self.cfg.local_window_tokens, key_padding_mask=mask,
                                       causal=self.cfg.causal)

    def _combine(self, x, local, global_):
        if fused_applies(x):  # inference on CUDA: gate, products and sum in one pass
            return gated_mix(self.gate(x), local, global_)
        g = torch.sigmoid(self.gate(x)).unsqueeze(-1)  # (B, N, H, 1)
        return g * local + (1 - g) * global_

    def _mix(self, x, q, k, v, mask, o: torch.Tensor) -> torch.Tensor:
        return self._combine(x, self._local(q, k, v, mask), o)

    def init_state(self) -> dict:
        return {"attn": None, "k": None, "v": None, "t": 0}

    def _mix_step(self, x, q, k, v, state: dict, o: torch.Tensor) -> torch.Tensor:
        # softmax over the cached keys of the current window, which starts anew every local_window_tokens tokens
        local = cached_softmax_step(q, k, v, state, restart=state["t"] % self.cfg.local_window_tokens == 0)
        return self._combine(x, local, o)


__all__ = ["HybridMixer"]
