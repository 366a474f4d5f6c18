"""Feature maps phi for linear attention, and FAVOR+ random projections.

Shapes: x (B, N, H, D) -> phi(x) (B, N, H, M), computed in ``acc`` dtype (float32, or float64 for float64 x);
M = D for "elu", "relu", "exp" and M = projection rows for "favor".

- "elu":  phi(x) = elu(x) + 1 = where(x > 0, x + 1, exp(x)); in float32 or wider (bf16 x + 1 cancels).
- "relu": phi(x) = max(x, 0).
- "exp":  phi(x)_i = exp(x_i - max_j x_j), per token (the max is part of the map).
- "favor": FAVOR+ positive random features, W (M, D): x^ = x D^(-1/4),
  phi(x) = exp(W x^ - |x^|^2 / 2) / sqrt(M), so that E[phi(q) . phi(k)] = exp(q . k / sqrt(D)).
  The exponent is returned as *logits* (:func:`favor_logits`) so that callers can subtract stabilising
  offsets (see ``linear_attention``), which must not differ from key to key.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

FEATURE_MAPS = ("elu", "relu", "exp", "favor")


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype: float64 for float64 inputs, float32 for everything else (bf16, fp16, fp32)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def elementwise_features(x: torch.Tensor, feature_map: str) -> torch.Tensor:
    """phi(x) for "elu", "relu", "exp": (..., D) -> (..., D) in the accumulation dtype."""
    x = x.to(acc_dtype(x.dtype))
    if feature_map == "elu":
        # elu(x) + 1: x + 1 for x > 0, exp(x) otherwise (elu never takes exp of a large x). On a CPU without
        # autograd as exp(min(x, 0)) + max(x, 0): there exp is several times faster than elu's expm1
        # (docs/benchmarks.md, prediction speed on 2 CPU cores), and exp(x) is the more exact of the two. With
        # autograd elu's own backward (the two clamps' gradients would both pass at x = 0); on a GPU (fla's causal
        # path) one fused elu, + 1 in place without autograd
        if torch.is_grad_enabled():
            return F.elu(x) + 1
        if x.device.type == "cpu":
            return x.clamp(max=0).exp_().add_(x.clamp(min=0))
        return F.elu(x).add_(1)
    if feature_map == "relu":
        return x.clamp(min=0)
    if feature_map == "exp":
        return torch.exp(x - x.amax(dim=-1, keepdim=True))
    raise ValueError(f"unknown feature map {feature_map!r}; choose from {FEATURE_MAPS}")


def favor_logits(x: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """FAVOR+ exponents W x^ - |x^|^2/2 for x (..., D) and W (M, D) -> (..., M), in the accumulation dtype."""
    acc = acc_dtype(x.dtype)
    d = x.shape[-1]
    if projection.shape[-1] != d:
        raise ValueError(f"projection has {projection.shape[-1]} columns but the head dimension is {d}")
    xh = x.to(acc) * d**-0.25
    return xh @ projection.to(acc).T - 0.5 * (xh * xh).sum(-1, keepdim=True)


def favor_scale(projection: torch.Tensor) -> float:
    """The 1 / sqrt(M) of FAVOR+."""
    return 1.0 / math.sqrt(projection.shape[0])


def favor_projection(
    n_features: int,
    head_dim: int,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Draw a FAVOR+ projection W (n_features, head_dim): orthogonal random features.

    Rows come in blocks of ``head_dim`` orthonormal vectors (Q of the QR decomposition of a Gaussian matrix,
    with the signs of R's diagonal moved into Q so that Q is Haar-distributed), each row rescaled to the norm
    of an independent Gaussian vector (chi-distributed with head_dim degrees of freedom), so that each row is
    marginally N(0, I). Drawn on the CPU in float64 from ``seed`` or ``generator``, so every data-parallel rank
    given the same seed draws the same W whatever its device.
    """
    if (seed is None) == (generator is None):
        raise ValueError("give exactly one of seed= or generator=: FAVOR+ draws must be reproducible")
    if n_features < 1 or head_dim < 1:
        raise ValueError("n_features and head_dim must be positive")
    g = generator if generator is not None else torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(-(-n_features // head_dim)):
        gaussian = torch.randn(head_dim, head_dim, generator=g, dtype=torch.float64)
        q, r = torch.linalg.qr(gaussian)
        q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)  # column j times sign(R_jj)
        blocks.append(q.T)  # orthonormal rows
    w = torch.cat(blocks)[:n_features]
    norms = torch.randn(n_features, head_dim, generator=g, dtype=torch.float64).norm(dim=1)
    return (w * norms.unsqueeze(1)).to(dtype=dtype, device=device)
