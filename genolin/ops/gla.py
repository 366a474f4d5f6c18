"""Gated linear attention (GLA, Yang et al. 2024): linear attention whose state decays per key dimension.

Layout: q, k (B, N, H, K); v (B, N, H, V); g (B, N, H, K) log-decays (<= 0); o (B, N, H, V) in v's dtype.
One left-to-right scan (the "causal" form; ``bidirectional_scan`` combines it with a scan of the reversed
sequence)::

    S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T        (K, V), S_0 = 0 (or ``initial_state``)
    o_t = scale * S_t^T q_t

- ``gla_recurrent``: the definition, one token at a time (tests hold everything against it);
- ``gla_chunked``: the same in chunks of C tokens (PyTorch, any device; what runs on a CPU and in training
  without CUDA). With b_t the cumulative log-decay inside a chunk (b_0 = 0 at its start)::

    o_t = scale * ((q_t * exp(b_t))^T S_0 + sum_{s <= t} ((q_t * exp(b_t)) . (k_s * exp(-b_s))) v_s)
    S_C = exp(b_C) * S_0 + sum_s (k_s * exp(b_C - b_s)) v_s^T

  exp(-b_s) grows within a chunk, so the chunk is short (16) and callers bound the per-token decay
  (the model clamps log-decays at -4: exp(64) is far inside float32's range).
- ``gla``: the public op: flash-linear-attention's ``chunk_gla`` Triton kernels for CUDA tensors when the
  package is installed (backend "fla"), else ``gla_chunked`` (backend "reference").
"""

from __future__ import annotations

import os

import torch

from genolin.ops.feature_maps import acc_dtype

GLA_CHUNK = 16
BACKENDS = ("auto", "reference", "fla")


def start_state(initial_state: torch.Tensor | None, shape: tuple, dt, device) -> torch.Tensor:
    """The scan's state at the start: ``initial_state`` in dtype ``dt``, or zeros of ``shape`` (B, H, K, V)."""
    return torch.zeros(shape, dtype=dt, device=device) if initial_state is None else initial_state.to(dt)


def gla_recurrent(q, k, v, g, *, scale: float, initial_state: torch.Tensor | None = None):
    """The definition, token by token: -> (o (B, N, H, V), final state (B, H, K, V)); float32 or float64 math."""
    dt = acc_dtype(q.dtype)
    b, n, h, kd = q.shape
    state = start_state(initial_state, (b, h, kd, v.shape[-1]), dt, q.device)
    out = []
    for t in range(n):
        state = state * g[:, t].to(dt).exp()[..., None] + k[:, t].to(dt)[..., None] * v[:, t].to(dt)[..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t].to(dt) * scale, state))
    o = torch.stack(out, 1) if out else v.new_zeros(v.shape).to(dt)
    return o.to(v.dtype), state


def gla_chunked(q, k, v, g, *, scale: float, chunk_size: int = GLA_CHUNK,
                initial_state: torch.Tensor | None = None):
    """The chunked form (see the module docstring): -> (o (B, N, H, V), final state (B, H, K, V))."""
    dt = acc_dtype(q.dtype)
    b, n, h, kd = q.shape
    vd = v.shape[-1]
    c = chunk_size
    pad = -n % c
    q, k, v, g = (torch.nn.functional.pad(x.to(dt), (0, 0, 0, 0, 0, pad)) for x in (q, k, v, g))  # pads: g = 0
    nc = (n + pad) // c
    # (B, H, nc, C, *): heads ahead of chunks, so each chunk is one batched matmul
    q, k, v, g = (x.view(b, nc, c, h, -1).permute(0, 3, 1, 2, 4) for x in (q, k, v, g))
    cum = g.cumsum(3)  # b_t, (B, H, nc, C, K)
    qg = q * scale * cum.exp()
    kg = k * (-cum).exp()
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    attn = (qg @ kg.transpose(-1, -2)).masked_fill(~causal, 0.0)  # (B, H, nc, C, C)
    o = attn @ v  # intra-chunk part
    last = cum[:, :, :, -1:]  # b_C, (B, H, nc, 1, K)
    k_to_end = k * (last - cum).exp()  # keys decayed to the chunk's end
    delta = k_to_end.transpose(-1, -2) @ v  # (B, H, nc, K, V): the chunk's own contribution to the state
    decay = last.squeeze(3).exp()  # (B, H, nc, K)
    state = start_state(initial_state, (b, h, kd, vd), dt, q.device)
    inter = []
    # the only sequential part: (B, H, K, V) per chunk. unbind, not [:, :, i]: the backward of each index would
    # write a full-size gradient (quadratic in N); unbind's gathers them in one stack
    for qg_i, decay_i, delta_i in zip(qg.unbind(2), decay.unbind(2), delta.unbind(2), strict=True):
        inter.append(qg_i @ state)
        state = state * decay_i[..., None] + delta_i
    o = o + torch.stack(inter, 2)
    o = o.permute(0, 2, 3, 1, 4).reshape(b, nc * c, h, vd)[:, :n]
    return o.to(v.dtype), state


def _fla_ready(x: torch.Tensor) -> bool:
    if x.device.type != "cuda":
        return False
    try:
        import fla.ops  # noqa: F401
    except ImportError:
        return False
    return True


def pick_backend(backend: str, x: torch.Tensor) -> str:
    """"fla" or "reference" for ``backend`` (auto: fla for CUDA tensors where installed; the environment variable
    GENOLIN_ATTENTION_BACKEND=reference replaces auto, to run a whole model on the PyTorch path)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {BACKENDS}")
    if backend == "auto" and os.environ.get("GENOLIN_ATTENTION_BACKEND") == "reference":
        backend = "reference"
    if backend == "auto":
        return "fla" if _fla_ready(x) else "reference"
    if backend == "fla" and not _fla_ready(x):
        raise ValueError("the fla backend needs CUDA tensors and the flash-linear-attention package (fla-core)")
    return backend


def gla(q, k, v, g, *, scale: float | None = None, backend: str = "auto") -> torch.Tensor:
    """One left-to-right GLA scan: q, k (B, N, H, K), v (B, N, H, V), g (B, N, H, K) log-decays -> (B, N, H, V)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    if pick_backend(backend, q) == "fla":
        from fla.ops.gla import chunk_gla

        o, _ = chunk_gla(q, k, v, g.float(), scale=scale)
        return o.to(v.dtype)
    return gla_chunked(q, k, v, g, scale=scale)[0]


__all__ = ["BACKENDS", "GLA_CHUNK", "gla", "gla_chunked", "gla_recurrent", "pick_backend"]
