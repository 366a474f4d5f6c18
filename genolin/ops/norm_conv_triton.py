"""The Triton kernel of ``genolin.ops.norm_conv`` (see there), as the custom op ``genolin::norm_conv``; imported
only when the op runs on it (importing Triton costs start-up time on a CPU)."""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from genolin.ops.launch import cdiv, next_power_of_2

BLOCK_N, NUM_WARPS = 8, 4  # tokens per program: 8 at d 256 keeps the taps in registers (32 spilled, 20x slower)


@triton.jit
def _norm_conv_kernel(x_ptr, g_ptr, w_ptr, bias_ptr, mask_ptr, out_ptr, N, D, eps,
                      stride_xb, stride_xn, stride_mb, stride_ob, stride_on,
                      K: tl.constexpr, LEFT: tl.constexpr, HAS_MASK: tl.constexpr, HAS_BIAS: tl.constexpr,
                      ACC64: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    acc_t = tl.float64 if ACC64 else tl.float32
    b = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)  # output tokens
    cols = tl.arange(0, BLOCK_D)
    col_ok = cols < D
    g = tl.load(g_ptr + cols, mask=col_ok, other=0.0).to(acc_t)
    acc = tl.zeros((BLOCK_N, BLOCK_D), dtype=acc_t)
    for j in tl.static_range(K):
        src = rows + (j - LEFT)  # the input row tap j reads for each output row
        ok = (src >= 0) & (src < N)
        xs = tl.load(x_ptr + b * stride_xb + src[:, None] * stride_xn + cols[None, :],
                     mask=ok[:, None] & col_ok[None, :], other=0.0).to(acc_t)
        rstd = 1.0 / tl.sqrt(tl.sum(xs * xs, axis=1) / D + eps)  # (BLOCK_N,); rows outside: x = 0, h = 0
        if HAS_MASK:
            real = tl.load(mask_ptr + b * stride_mb + src, mask=ok, other=0).to(acc_t)
            rstd = rstd * real
        wj = tl.load(w_ptr + cols * K + j, mask=col_ok, other=0.0).to(acc_t)  # (BLOCK_D,)
        acc += xs * rstd[:, None] * (g * wj)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(acc_t)[None, :]
    out_ok = (rows < N)[:, None] & col_ok[None, :]
    tl.store(out_ptr + b * stride_ob + rows[:, None] * stride_on + cols[None, :],
             acc.to(out_ptr.dtype.element_ty), mask=out_ok)

def norm_conv_kernel(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, conv_weight: torch.Tensor,
                     conv_bias: torch.Tensor | None, left: int, mask: torch.Tensor | None,
                     out_dtype: torch.dtype) -> torch.Tensor:
    """The launch (eager calls it directly: the op's first call imports torch's compiler stack)."""
    x = x.contiguous()
    b, n, d = x.shape
    k = conv_weight.shape[-1]
    w = conv_weight.reshape(d, k).contiguous()
    if os.environ.get("GENOLIN_TRITON_POISON"):  # tests: every element must be written
        out = torch.full((b, n, d), float("nan"), device=x.device, dtype=out_dtype)
    else:
        out = torch.empty((b, n, d), device=x.device, dtype=out_dtype)
    m = mask.to(torch.uint8).contiguous() if mask is not None else x  # (any pointer when HAS_MASK is off)
    _norm_conv_kernel[(cdiv(n, BLOCK_N), b)](
        x, norm_weight.contiguous(), w, conv_bias if conv_bias is not None else x, m, out, n, d, eps,
        x.stride(0), x.stride(1), m.stride(0) if mask is not None else 0, out.stride(0), out.stride(1),
        K=k, LEFT=left, HAS_MASK=mask is not None, HAS_BIAS=conv_bias is not None,
        ACC64=x.dtype == torch.float64, BLOCK_N=BLOCK_N, BLOCK_D=next_power_of_2(d), num_warps=NUM_WARPS)
    return out


# a custom op: torch.compile calls it as it calls a matmul (no tracing into Triton code, no graph break)
@torch.library.custom_op("genolin::norm_conv", mutates_args=())
def norm_conv_op(x: torch.Tensor, norm_weight: torch.Tensor, eps: float, conv_weight: torch.Tensor,
                 conv_bias: torch.Tensor | None, left: int, mask: torch.Tensor | None,
                 out_dtype: torch.dtype) -> torch.Tensor:
    return norm_conv_kernel(x, norm_weight, eps, conv_weight, conv_bias, left, mask, out_dtype)


@norm_conv_op.register_fake
def _(x, norm_weight, eps, conv_weight, conv_bias, left, mask, out_dtype):
    return x.new_empty(x.shape, dtype=out_dtype)
