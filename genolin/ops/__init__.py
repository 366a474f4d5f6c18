"""Attention operators (each with a plain reference beside any fast version, as in fla).

- ``linear_attention(q, k, v, ...)``: the public op, (B, N, H, D) layout; see ``linear_attn.py``.
- ``accumulate_state`` / ``query_state`` / ``causal_linear_attention`` / ``linear_attention_step``: the same
  computation split so callers can stream over chunks or tokens.
- ``by_sequence_linear_attention``: the CPU's fast path for bidirectional elementwise maps (no layout copies).
- ``naive_linear_attention``: the formula with an explicit N x N kernel matrix (tests only).
- ``softmax_attention``: exact attention in the same layout; ``local_softmax_attention`` inside windows.
- ``favor_projection``: reproducible FAVOR+ random features.
- ``gla`` (gated linear attention) and ``delta_rule`` (DeltaNet; Gated DeltaNet with a decay): one left-to-right
  scan each, flash-linear-attention's kernels on CUDA, a chunked PyTorch form elsewhere, the token-by-token
  definitions (``gla_recurrent``, ``delta_rule_recurrent``) for tests; ``bidirectional_scan`` runs a scan both
  ways with padding made neutral.
- ``norm_conv``: RMSNorm, padding mask and depthwise convolution in one inference kernel (CUDA), beside
  ``norm_conv_reference``.
- ``swiglu``, ``gated_mix``, ``add_rms_norm``: a block's elementwise steps of inference as one kernel each (CUDA),
  beside their references; ``fused_applies`` says when the blocks take them.
- ``linformer_attention``, ``fnet_mixing``, ``synthesizer_attention``: the non-linear-attention baselines.
"""

from genolin.ops.bidirectional import bidirectional_scan, neutral_padding
from genolin.ops.delta_rule import delta_rule, delta_rule_chunked, delta_rule_recurrent
from genolin.ops.feature_maps import FEATURE_MAPS, elementwise_features, favor_logits, favor_projection
from genolin.ops.fused import (
    add_rms_norm,
    add_rms_norm_reference,
    fused_applies,
    gated_mix,
    gated_mix_reference,
    swiglu,
    swiglu_reference,
)
from genolin.ops.gla import gla, gla_chunked, gla_recurrent
from genolin.ops.linear_attn import (
    LinearAttentionState,
    accumulate_state,
    by_sequence_linear_attention,
    causal_linear_attention,
    linear_attention,
    linear_attention_step,
    naive_linear_attention,
    query_state,
)
from genolin.ops.mixing import check_length, fnet_mixing, linformer_attention, synthesizer_attention
from genolin.ops.norm_conv import norm_conv, norm_conv_applies, norm_conv_reference
from genolin.ops.softmax import local_softmax_attention, softmax_attention

__all__ = [
    "FEATURE_MAPS",
    "LinearAttentionState",
    "accumulate_state",
    "add_rms_norm",
    "add_rms_norm_reference",
    "bidirectional_scan",
    "by_sequence_linear_attention",
    "causal_linear_attention",
    "check_length",
    "delta_rule",
    "delta_rule_chunked",
    "delta_rule_recurrent",
    "elementwise_features",
    "favor_logits",
    "favor_projection",
    "fnet_mixing",
    "fused_applies",
    "gated_mix",
    "gated_mix_reference",
    "gla",
    "gla_chunked",
    "gla_recurrent",
    "linear_attention",
    "linear_attention_step",
    "linformer_attention",
    "local_softmax_attention",
    "naive_linear_attention",
    "neutral_padding",
    "norm_conv",
    "norm_conv_applies",
    "norm_conv_reference",
    "query_state",
    "softmax_attention",
    "swiglu",
    "swiglu_reference",
    "synthesizer_attention",
]
