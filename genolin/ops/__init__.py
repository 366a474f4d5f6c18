"""Attention operators (each with a plain reference beside any fast version, as in fla).

- ``linear_attention(q, k, v, ...)``: the public op, (B, N, H, D) layout; see ``linear_attn.py``.
- ``accumulate_state`` / ``query_state`` / ``causal_linear_attention`` / ``linear_attention_step``: the same
  computation split so callers can stream over chunks or tokens.
- ``naive_linear_attention``: the formula with an explicit N x N kernel matrix (tests only).
- ``softmax_attention``: exact attention in the same layout; ``local_softmax_attention`` inside windows.
- ``favor_projection``: reproducible FAVOR+ random features.
"""

from genolin.ops.feature_maps import FEATURE_MAPS, elementwise_features, favor_logits, favor_projection
from genolin.ops.linear_attn import (
    LinearAttentionState,
    accumulate_state,
    causal_linear_attention,
    linear_attention,
    linear_attention_step,
    naive_linear_attention,
    query_state,
)
from genolin.ops.softmax import local_softmax_attention, softmax_attention

__all__ = [
    "FEATURE_MAPS",
    "LinearAttentionState",
    "accumulate_state",
    "causal_linear_attention",
    "elementwise_features",
    "favor_logits",
    "favor_projection",
    "linear_attention",
    "linear_attention_step",
    "local_softmax_attention",
    "naive_linear_attention",
    "query_state",
    "softmax_attention",
]
