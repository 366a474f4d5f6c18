"""The elementwise steps of a block's inference, each as one kernel: what eager PyTorch runs as several passes.

    swiglu(u)              u (M, 2h) -> silu(u[:, :h]) * u[:, h:]                      (M, h)   the MLP's gate
    gated_mix(z, a, b)     z (B, N, H), a and b (B, N, H, E) -> s a + (1 - s) b, s = sigmoid(z)   (B, N, H, E)
    add_rms_norm(x, y, g)  x, y (B, N, d) -> (r, r / sqrt(mean_d(r^2) + eps) * g), r = x + y   both (B, N, d)

The ``*_reference`` functions are those formulas in PyTorch, the modules' own calls. The kernels (Triton,
``genolin.ops.fused_triton``) read each input once and write each output once, computing in float32 (float64 for
float64 inputs) and rounding once. Eager bf16 inference of the base encoder on a genome batch spent more than half
its time in such passes (SiLU of the strided gate half and its product, the hybrid gate's broadcast products,
residual adds; docs/benchmarks.md, encoder forward); compiled blocks fuse them but compiling costs seconds at
start-up.

The kernels are for inference (no gradient); ``fused_applies`` says when the blocks take them: gradients off, CUDA,
Triton installed, not inside a compiled graph (the compiler fuses these itself), and the environment variable
GENOLIN_FUSED not set to ``reference``. Rounding: the reference rounds each intermediate to the working dtype
(bfloat16 under autocast); the kernels round only the outputs, so in bfloat16 they are at least as close to the
float64 result.
"""

from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from genolin.ops.norm_conv import HAS_TRITON, require_triton


def swiglu_reference(u: torch.Tensor) -> torch.Tensor:
    """(..., 2h) -> (..., h): silu of the first half times the second."""
    gate, value = u.chunk(2, dim=-1)
    return F.silu(gate) * value


def gated_mix_reference(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """z (B, N, H) gate logits, a and b (B, N, H, E) -> sigmoid(z) a + (1 - sigmoid(z)) b."""
    s = torch.sigmoid(z).unsqueeze(-1)
    return s * a + (1 - s) * b


def add_rms_norm_reference(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, eps: float,
                           out_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(x + y, rms_norm(x + y) * weight) for x, y (B, N, d), weight (d,); the norm in ``out_dtype`` (None: the
    sum's dtype)."""
    r = x + y
    return r, F.rms_norm(r, (r.shape[-1],), weight, eps).to(out_dtype or r.dtype)


def fused_applies(x: torch.Tensor) -> bool:
    """Whether a block's inference takes the kernels (see the module's docstring)."""
    return (x.is_cuda and not torch.is_grad_enabled() and HAS_TRITON and not torch.compiler.is_compiling()
            and os.environ.get("GENOLIN_FUSED") != "reference")


def _no_grad(*tensors: torch.Tensor) -> None:
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise NotImplementedError("the fused block kernels are for inference: they have no backward")


def swiglu(u: torch.Tensor) -> torch.Tensor:
    """``swiglu_reference`` in one kernel (CUDA, or any device under TRITON_INTERPRET=1; no gradient)."""
    _no_grad(u)
    require_triton("the fused block kernels")
    from genolin.ops.fused_triton import swiglu_kernel

    return swiglu_kernel(u)


def gated_mix(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``gated_mix_reference`` in one kernel; a and b may be strided views (the local attention's transposed
    output), the result is contiguous in the dtype the reference gives."""
    _no_grad(z, a, b)
    require_triton("the fused block kernels")
    from genolin.ops.fused_triton import gated_mix_kernel

    return gated_mix_kernel(z, a, b)


def add_rms_norm(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, eps: float,
                 out_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``add_rms_norm_reference`` in one kernel: the sum rounded to its dtype, then normalised from that (as the
    reference does)."""
    _no_grad(x, y, weight)
    require_triton("the fused block kernels")
    from genolin.ops.fused_triton import add_rms_norm_kernel

    return add_rms_norm_kernel(x, y, weight, float(eps), out_dtype)
