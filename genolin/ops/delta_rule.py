"""The delta rule (DeltaNet, Schlag et al. 2021; Yang et al. 2024) and its gated form (Gated DeltaNet, Yang et
al. 2025): a state that is corrected towards each new value instead of only added to.

Layout: q, k (B, N, H, K) (keys L2-normalised by the caller); v (B, N, H, V); beta (B, N, H) in [0, 1];
g (B, N, H) log-decays (<= 0; None: DeltaNet, no decay); o (B, N, H, V) in v's dtype. One left-to-right scan::

    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T       (K, V), S_0 = 0
    o_t = scale * S_t^T q_t

- ``delta_rule_recurrent``: the definition, token by token (tests hold everything against it);
- ``delta_rule_chunked``: chunks of C tokens (PyTorch, any device). With b_t the cumulative log-decay inside
  the chunk and S_0 the state at its start, the corrected values u_t = v_t - exp(g_t) S_{t-1}^T k_t solve a
  unit lower-triangular system::

    u_t + sum_{s < t} exp(b_t - b_s) beta_s (k_t . k_s) u_s = v_t - exp(b_t) S_0^T k_t
    o_t = scale * (exp(b_t) S_0^T q_t + sum_{s <= t} exp(b_t - b_s) beta_s (q_t . k_s) u_s)
    S_C = exp(b_C) S_0 + sum_s exp(b_C - b_s) beta_s k_s u_s^T

  every exponent is <= 0, so any chunk length is stable; the (C, C) inverse is formed for all chunks at once and
  only the S_0 terms run chunk after chunk.
- ``delta_rule``: the public op: flash-linear-attention's ``chunk_delta_rule`` / ``chunk_gated_delta_rule``
  kernels for CUDA tensors where installed (backend "fla"), else ``delta_rule_chunked`` (backend "reference").
  One exception, automatic: fla refuses the gated backward on Hopper GPUs (H100, H200) under Triton 3.4-3.7.0,
  which compiles it wrongly (fla issue #640), unless tilelang is installed; there, while gradients are needed,
  the gated rule runs the PyTorch form (inference still runs fla's forward).
"""

from __future__ import annotations

import torch

from genolin.ops.feature_maps import acc_dtype
from genolin.ops.gla import pick_backend, start_state

DELTA_CHUNK = 32  # the (C, C) work grows with C; 16-32 is fastest on CPUs


def delta_rule_recurrent(q, k, v, beta, g=None, *, scale: float, initial_state: torch.Tensor | None = None):
    """The definition, token by token: -> (o (B, N, H, V), final state (B, H, K, V))."""
    dt = acc_dtype(q.dtype)
    b, n, h, kd = q.shape
    state = start_state(initial_state, (b, h, kd, v.shape[-1]), dt, q.device)
    out = []
    for t in range(n):
        kt, vt, bt = k[:, t].to(dt), v[:, t].to(dt), beta[:, t].to(dt)[..., None]
        if g is not None:
            state = state * g[:, t].to(dt).exp()[..., None, None]
        u = vt - torch.einsum("bhkv,bhk->bhv", state, kt)  # what the state predicts for k_t, corrected
        state = state + kt[..., None] * (bt * u)[..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t].to(dt) * scale, state))
    o = torch.stack(out, 1) if out else v.new_zeros(v.shape).to(dt)
    return o.to(v.dtype), state


def delta_rule_chunked(q, k, v, beta, g=None, *, scale: float, chunk_size: int = DELTA_CHUNK,
                       initial_state: torch.Tensor | None = None):
    """The chunked form (see the module docstring): -> (o (B, N, H, V), final state (B, H, K, V))."""
    dt = acc_dtype(q.dtype)
    b, n, h, kd = q.shape
    vd = v.shape[-1]
    c = min(chunk_size, max(n, 1))
    pad = -n % c
    pad4 = (0, 0, 0, 0, 0, pad)
    q, k, v = (torch.nn.functional.pad(x.to(dt), pad4) for x in (q, k, v))
    beta = torch.nn.functional.pad(beta.to(dt), (0, 0, 0, pad))  # padding: beta 0, g 0 (the state is unchanged)
    g = torch.zeros_like(beta) if g is None else torch.nn.functional.pad(g.to(dt), (0, 0, 0, pad))
    nc = (n + pad) // c
    q, k, v = (x.view(b, nc, c, h, -1).permute(0, 3, 1, 2, 4) for x in (q, k, v))  # (B, H, nc, C, *)
    beta, g = (x.view(b, nc, c, h).permute(0, 3, 1, 2) for x in (beta, g))  # (B, H, nc, C)
    cum = g.cumsum(-1)  # b_t
    diff = cum[..., :, None] - cum[..., None, :]  # b_t - b_s, (B, H, nc, C, C)
    strict = torch.ones(c, c, dtype=torch.bool, device=q.device).tril(-1)
    decay = diff.masked_fill(~strict, float("-inf")).exp()  # exp(b_t - b_s) for s < t, else 0
    w = decay * beta[..., None, :] * (k @ k.transpose(-1, -2))  # (B, H, nc, C, C), strictly lower
    eye = torch.eye(c, dtype=dt, device=q.device)
    t_inv = torch.linalg.solve_triangular(eye + w, eye.expand_as(w), upper=False, unitriangular=True)
    u_v = t_inv @ v  # the S_0-free part of u
    kd_b = k * cum.exp()[..., None]  # exp(b_t) k_t, for the S_0 term of u
    u_k = t_inv @ kd_b  # u = u_v - u_k @ S_0
    incl = decay + torch.diag_embed(torch.ones_like(cum))  # exp(b_t - b_s) for s <= t
    qk = (q @ k.transpose(-1, -2)) * incl * beta[..., None, :] * scale  # (B, H, nc, C, C)
    q_b = q * (cum.exp() * scale)[..., None]
    last = cum[..., -1:]  # b_C, (B, H, nc, 1)
    k_end = k * ((last - cum).exp() * beta)[..., None]  # exp(b_C - b_s) beta_s k_s
    state = start_state(initial_state, (b, h, kd, vd), dt, q.device)
    out = []
    chunks = zip(*(x.unbind(2) for x in (u_v, u_k, q_b, qk, last.exp(), k_end)), strict=True)  # unbind: see gla
    for u_v_i, u_k_i, q_b_i, qk_i, decay_i, k_end_i in chunks:  # sequential over chunks: the (B, H, K, V) state
        u = u_v_i - u_k_i @ state  # (B, H, C, V)
        out.append(q_b_i @ state + qk_i @ u)
        state = state * decay_i[..., None] + k_end_i.transpose(-1, -2) @ u
    o = torch.stack(out, 2).permute(0, 2, 3, 1, 4).reshape(b, nc * c, h, vd)[:, :n]
    return o.to(v.dtype), state


def fla_gated_backward_works() -> bool:
    """False where fla refuses the gated delta rule's backward (Hopper, Triton 3.4-3.7.0, no tilelang)."""
    import importlib.util

    try:
        from fla.utils import IS_NVIDIA_HOPPER, TRITON_ABOVE_3_4_0, TRITON_ABOVE_3_7_1
    except ImportError:  # another fla version: assume it works (the GPU tests would say otherwise)
        return True
    broken = IS_NVIDIA_HOPPER and TRITON_ABOVE_3_4_0 and not TRITON_ABOVE_3_7_1
    return not broken or importlib.util.find_spec("tilelang") is not None


def delta_rule_backend(backend: str, q, k, v, *, gated: bool, needs_grad: bool) -> str:
    """"fla" or "reference": what ``delta_rule`` runs for these inputs (ValueError where backend="fla" cannot)."""
    chosen = pick_backend(backend, q)
    if chosen == "fla" and gated and needs_grad and not fla_gated_backward_works():
        if backend == "fla":
            raise ValueError("fla cannot differentiate the gated delta rule here (Hopper GPU, Triton < 3.7.1: fla "
                             "issue #640); install tilelang or a newer Triton, or use backend='auto'")
        chosen = "reference"
    # fla's (ungated) chunk_delta_rule takes bf16/fp16 only, all three alike (under autocast the l2-normed q, k
    # come as float32 beside a bf16 v): the lowest precision present, and float32 inputs to the PyTorch form
    if chosen == "fla" and not gated and not any(x.dtype in (torch.bfloat16, torch.float16) for x in (q, k, v)):
        if backend == "fla":
            raise ValueError("fla's delta rule takes bfloat16 or float16 inputs (float32 runs on backend='auto' "
                             "or 'reference')")
        chosen = "reference"
    return chosen


def delta_rule(q, k, v, beta, g=None, *, scale: float | None = None, backend: str = "auto") -> torch.Tensor:
    """One left-to-right (gated) delta-rule scan -> (B, N, H, V); see the module docstring."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    needs_grad = torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (q, k, v, beta, g))
    chosen = delta_rule_backend(backend, q, k, v, gated=g is not None, needs_grad=needs_grad)
    if chosen == "fla":
        if g is None:
            from fla.ops.delta_rule import chunk_delta_rule

            low = [x.dtype for x in (q, k, v) if x.dtype in (torch.bfloat16, torch.float16)]  # cast all alike
            q, k, v = q.to(low[0]), k.to(low[0]), v.to(low[0])
            o, _ = chunk_delta_rule(q, k, v, beta.to(q.dtype), scale=scale)
        else:
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule

            o, _ = chunk_gated_delta_rule(q, k, v, g.float(), beta.to(q.dtype), scale=scale)
        return o.to(v.dtype)
    return delta_rule_chunked(q, k, v, beta, g, scale=scale)[0]


__all__ = ["DELTA_CHUNK", "delta_rule", "delta_rule_backend", "delta_rule_chunked", "delta_rule_recurrent",
           "fla_gated_backward_works"]
