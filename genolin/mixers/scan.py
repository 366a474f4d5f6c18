"""The recurrent mixers (design document 001; the scans are ``ops/gla.py`` and ``ops/delta_rule.py``): a state per
head updated token by token with decay gates and/or the delta rule, bidirectional (the same scan left-to-right and
right-to-left, summed), then a per-head RMSNorm.

- "gla": per-key-dim log-decay logsigmoid(W x) / 16, clamped at -4;
- "deltanet": q, k = l2norm(silu(.)), write strength beta = sigmoid(W x) per head;
- "gated_deltanet": also a per-head decay -exp(A_log) softplus(W x + dt_bias), as in Gated DeltaNet.

No streaming path or causal form: genome prediction runs them on whole training-length windows.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from genolin.mixers.base import Mixer
from genolin.ops import bidirectional_scan, delta_rule, gla

GLA_GATE_NORMALIZER, GLA_MIN_LOG_DECAY = 16.0, -4.0  # gla: log-decay = max(logsigmoid(.) / 16, -4) per token


class ScanMixer(Mixer):
    """q, k, v -> ``_scan`` both ways -> per-head RMSNorm -> output projection."""

    scan = True

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        self.head_norm = nn.RMSNorm(cfg.head_dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        q, k, v = self._qkv(x)
        acc = torch.float64 if x.dtype == torch.float64 else torch.float32  # gates in float32 under autocast
        o = self._scan(x, q, k, v, mask, acc)
        return self._finish(self.head_norm(o.to(v.dtype)))

    def _scan(self, x, q, k, v, mask, acc: torch.dtype) -> torch.Tensor:
        """Both directions, summed: (B, N, H, hd) -> (B, N, H, hd); gates computed in ``acc``."""
        raise NotImplementedError


class GLAMixer(ScanMixer):
    name = "gla"

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        self.gate = nn.Linear(cfg.d_model, cfg.d_model)  # per-key-dim log-decays (B, N, H, hd)

    def _scan(self, x, q, k, v, mask, acc: torch.dtype) -> torch.Tensor:
        b, n, h, hd = q.shape
        g = F.logsigmoid(self.gate(x).to(acc)) / GLA_GATE_NORMALIZER
        return bidirectional_scan(gla, q, k, v, mask=mask, g=g.clamp(min=GLA_MIN_LOG_DECAY).view(b, n, h, hd))


class DeltaNetMixer(ScanMixer):
    name = "deltanet"

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        self.beta = nn.Linear(cfg.d_model, cfg.n_heads)

    def _decay(self, x: torch.Tensor, acc: torch.dtype) -> torch.Tensor | None:
        """Per-head log-decay (B, N, H), or None: none (plain DeltaNet)."""
        return None

    def _scan(self, x, q, k, v, mask, acc: torch.dtype) -> torch.Tensor:
        q, k = F.normalize(F.silu(q), dim=-1), F.normalize(F.silu(k), dim=-1)
        beta = torch.sigmoid(self.beta(x).to(acc))  # (B, N, H)
        return bidirectional_scan(delta_rule, q, k, v, mask=mask, beta=beta, g=self._decay(x, acc))


class GatedDeltaNetMixer(DeltaNetMixer):
    name = "gated_deltanet"

    def __init__(self, cfg, layer: int):
        super().__init__(cfg, layer)
        h = cfg.n_heads  # Mamba-2-style decay: -exp(A_log) softplus(W x + dt_bias)
        self.decay = nn.Linear(cfg.d_model, h, bias=False)
        self.A_log = nn.Parameter(torch.empty(h).uniform_(1, 16).log())
        dt = torch.exp(torch.rand(h) * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt

    def _decay(self, x: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
        return -self.A_log.to(acc).exp() * F.softplus(self.decay(x).to(acc) + self.dt_bias.to(acc))


__all__ = ["GLA_GATE_NORMALIZER", "GLA_MIN_LOG_DECAY", "DeltaNetMixer", "GLAMixer", "GatedDeltaNetMixer",
           "ScanMixer"]
