"""RMSNorm then a depthwise convolution along the sequence, as one op: what each block does before its mixer.

    h = x / sqrt(mean_d(x^2) + eps) * g           (B, N, d), per token over its d channels
    h = h * mask                                   padding tokens to zero, so nothing leaks through the convolution
    out[t] = bias + sum_j w[:, j] * h[t + j - left]  'same' zero padding: h[t] = 0 outside [0, N)

``norm_conv_reference`` is that formula in PyTorch (the modules' own calls). ``norm_conv`` runs one Triton
kernel for inference (no gradient): program (i, b) writes tokens [i * BLOCK_N, (i + 1) * BLOCK_N) of sequence b,
reading for each tap j the rows shifted by j - left (from L2 after the first tap) and normalising them again
(k x the norm's arithmetic, which costs nothing next to the memory traffic). The normalised tensor is never
written. torch.compile fuses the norm and the convolution's shifted products too, but only compiled; eager, a norm
kernel and a cuDNN convolution took as long as the compiled fusion (docs/benchmarks.md, encoder forward).

Precision: the sums over d and over the taps accumulate in float32 (float64 for float64 input); the output is
rounded once, to ``out_dtype`` (bfloat16 under CUDA autocast), where the reference rounds the normalised tensor
to bfloat16 before the convolution.
"""

from __future__ import annotations

import importlib.util
import os

import torch
import torch.nn.functional as F


def norm_conv_reference(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, conv_weight: torch.Tensor,
                        conv_bias: torch.Tensor | None, left: int, mask: torch.Tensor | None = None,
                        out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """x (B, N, d), norm_weight (d,), conv_weight (d, k) or Conv1d's (d, 1, k), conv_bias (d,), mask (B, N) bool
    -> (B, N, d)."""
    h = F.rms_norm(x, (x.shape[-1],), norm_weight, eps)
    if mask is not None:
        h = h * mask.unsqueeze(-1).to(h.dtype)
    k = conv_weight.shape[-1]
    hp = F.pad(h.transpose(1, 2), (left, k - 1 - left))  # (B, d, N + k - 1)
    out = F.conv1d(hp, conv_weight.to(hp.dtype).reshape(x.shape[-1], 1, k),
                   None if conv_bias is None else conv_bias.to(hp.dtype), groups=x.shape[-1])
    return out.transpose(1, 2).to(out_dtype or x.dtype)


# looked up once, at import: inside a compiled block the lookup (importlib) breaks the graph
HAS_TRITON = importlib.util.find_spec("triton") is not None


def require_triton(what: str) -> None:
    """An ImportError naming the extra to install, when ``what`` (kernels asked for by name) needs the missing
    triton: CPU installs leave it out, and every "auto" choice falls back to the PyTorch references."""
    if not HAS_TRITON:
        raise ImportError(f"{what} need triton, which is not installed (pip install 'genolin[gpu]'; CUDA builds of "
                          f"torch bring it)")


def norm_conv_applies(x: torch.Tensor) -> bool:
    """Whether the model's blocks take the kernel: inference (gradients off) on CUDA tensors with Triton
    installed; the environment variable GENOLIN_NORM_CONV=reference turns it off (to compare whole runs)."""
    return (x.is_cuda and not torch.is_grad_enabled() and HAS_TRITON
            and os.environ.get("GENOLIN_NORM_CONV") != "reference")


def norm_conv(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, conv_weight: torch.Tensor,
              conv_bias: torch.Tensor | None, left: int, mask: torch.Tensor | None = None,
              out_dtype: torch.dtype | None = None, *, backend: str = "auto") -> torch.Tensor:
    """Shapes as ``norm_conv_reference``; out_dtype: None = x's dtype. backend: "triton" (the kernel: CUDA, or
    any device under TRITON_INTERPRET=1; no gradient), "reference", "auto" (``norm_conv_applies``)."""
    if backend not in ("auto", "triton", "reference"):
        raise ValueError(f"backend must be auto, triton or reference, got {backend!r}")
    if backend == "reference" or (backend == "auto" and not norm_conv_applies(x)):
        return norm_conv_reference(x, norm_weight, eps, conv_weight, conv_bias, left, mask, out_dtype)
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                       for t in (x, norm_weight, conv_weight, conv_bias)):
        raise NotImplementedError("the norm_conv kernel is for inference: it has no backward")
    require_triton("the norm_conv kernels")
    from genolin.ops.norm_conv_triton import norm_conv_kernel, norm_conv_op

    # compiled blocks call the op (opaque to the compiler); eager calls launch the kernel without it
    launch = norm_conv_op if torch.compiler.is_compiling() else norm_conv_kernel
    return launch(x, norm_weight, float(eps), conv_weight, conv_bias, left, mask, out_dtype or x.dtype)
