"""The Triton kernels of ``genolin.ops.fused`` (see there); imported only when a kernel runs (importing Triton
costs start-up time on a CPU). Each program takes a tile of rows and every column of them (d and h of the encoder
are at most a few thousand), computes in float32 (float64 for float64 inputs) and stores once."""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from genolin.ops.launch import cdiv, next_power_of_2


def _empty(shape, like: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if os.environ.get("GENOLIN_TRITON_POISON"):  # tests: every element must be written
        return torch.full(shape, float("nan"), device=like.device, dtype=dtype)
    return torch.empty(shape, device=like.device, dtype=dtype)


def _rows(t: torch.Tensor) -> torch.Tensor:
    """(..., c) -> (M, c) with unit column stride (a view where the layout allows, else a copy)."""
    t = t.reshape(-1, t.shape[-1])
    return t if t.stride(-1) == 1 else t.contiguous()


@triton.jit
def _swiglu_kernel(u_ptr, out_ptr, M, H, stride_um, stride_om,
                   ACC64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr):
    acc_t = tl.float64 if ACC64 else tl.float32
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    ok = (rows < M)[:, None] & (cols < H)[None, :]
    src = u_ptr + rows[:, None] * stride_um + cols[None, :]
    gate = tl.load(src, mask=ok, other=0.0).to(acc_t)
    value = tl.load(src + H, mask=ok, other=0.0).to(acc_t)
    out = gate / (1.0 + tl.exp(-gate)) * value
    tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :], out.to(out_ptr.dtype.element_ty), mask=ok)


def swiglu_kernel(u: torch.Tensor) -> torch.Tensor:
    """u (..., 2h) -> (..., h)."""
    lead, two_h = u.shape[:-1], u.shape[-1]
    if two_h % 2:
        raise ValueError(f"swiglu needs an even last dimension, got {two_h}")
    h = two_h // 2
    u2 = _rows(u)
    m = u2.shape[0]
    out = _empty((m, h), u, u.dtype)
    block_h = min(next_power_of_2(h), 256)
    block_m = max(1, 4096 // block_h)
    _swiglu_kernel[(cdiv(m, block_m), cdiv(h, block_h))](
        u2, out, m, h, u2.stride(0), out.stride(0),
        ACC64=u.dtype == torch.float64, BLOCK_M=block_m, BLOCK_H=block_h, num_warps=4)
    return out.reshape(*lead, h)


@triton.jit
def _gated_mix_kernel(z_ptr, a_ptr, b_ptr, out_ptr, N, H,
                      sz_b, sz_n, sz_h, sa_b, sa_n, sa_h, sa_e, sb_b, sb_n, sb_h, sb_e,
                      E: tl.constexpr, ACC64: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    # program (i, b): tokens [i * BLOCK_N, (i + 1) * BLOCK_N) of sequence b, all H * E columns (c = h * E + e)
    acc_t = tl.float64 if ACC64 else tl.float32
    bi = tl.program_id(1).to(tl.int64)
    n = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    c = tl.arange(0, BLOCK_C)
    h, e = c // E, c % E
    ok = (n < N)[:, None] & (c < H * E)[None, :]
    z = tl.load(z_ptr + bi * sz_b + n[:, None] * sz_n + h[None, :] * sz_h, mask=ok, other=0.0).to(acc_t)
    a = tl.load(a_ptr + bi * sa_b + n[:, None] * sa_n + (h * sa_h + e * sa_e)[None, :], mask=ok, other=0.0)
    b = tl.load(b_ptr + bi * sb_b + n[:, None] * sb_n + (h * sb_h + e * sb_e)[None, :], mask=ok, other=0.0)
    s = 1.0 / (1.0 + tl.exp(-z))
    out = s * a.to(acc_t) + (1.0 - s) * b.to(acc_t)
    tl.store(out_ptr + (bi * N + n[:, None]) * (H * E) + c[None, :], out.to(out_ptr.dtype.element_ty), mask=ok)


def gated_mix_kernel(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """z (B, N, H), a and b (B, N, H, E), any strides -> (B, N, H, E) contiguous."""
    bsz, n, h, e = a.shape
    if b.shape != a.shape or z.shape != (bsz, n, h):
        raise ValueError(f"gated_mix: z {tuple(z.shape)}, a {tuple(a.shape)}, b {tuple(b.shape)} do not match")
    dtype = torch.promote_types(z.dtype, torch.promote_types(a.dtype, b.dtype))
    out = _empty((bsz, n, h, e), a, dtype)
    block_c = next_power_of_2(h * e)
    block_n = max(1, 4096 // block_c)
    _gated_mix_kernel[(cdiv(n, block_n), bsz)](
        z, a, b, out, n, h, *z.stride(), *a.stride(), *b.stride(),
        E=e, ACC64=dtype == torch.float64, BLOCK_N=block_n, BLOCK_C=block_c, num_warps=4)
    return out


@triton.jit
def _add_rms_norm_kernel(x_ptr, y_ptr, g_ptr, r_ptr, h_ptr, M, D, eps, stride_xm, stride_ym,
                         ACC64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    acc_t = tl.float64 if ACC64 else tl.float32
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    ok = (rows < M)[:, None] & (cols < D)[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :], mask=ok, other=0.0)
    y = tl.load(y_ptr + rows[:, None] * stride_ym + cols[None, :], mask=ok, other=0.0)
    r = (x.to(acc_t) + y.to(acc_t)).to(r_ptr.dtype.element_ty)  # the sum in its own dtype, as the reference
    tl.store(r_ptr + rows[:, None] * D + cols[None, :], r, mask=ok)
    rf = r.to(acc_t)
    rstd = 1.0 / tl.sqrt(tl.sum(rf * rf, axis=1) / D + eps)
    g = tl.load(g_ptr + cols, mask=cols < D, other=0.0).to(acc_t)
    tl.store(h_ptr + rows[:, None] * D + cols[None, :], (rf * rstd[:, None] * g[None, :]).to(h_ptr.dtype.element_ty),
             mask=ok)


def add_rms_norm_kernel(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, eps: float,
                        out_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x, y (..., d), weight (d,) -> (x + y in their promoted dtype, its norm in ``out_dtype``, default the
    sum's dtype), both contiguous."""
    if x.shape != y.shape or weight.shape != x.shape[-1:]:
        raise ValueError(f"add_rms_norm: x {tuple(x.shape)}, y {tuple(y.shape)}, weight {tuple(weight.shape)}")
    d = x.shape[-1]
    x2, y2 = _rows(x), _rows(y)
    m = x2.shape[0]
    r_dtype = torch.promote_types(x.dtype, y.dtype)
    r, h = _empty((m, d), x, r_dtype), _empty((m, d), x, out_dtype or r_dtype)
    block_d = next_power_of_2(d)
    block_m = max(1, 2048 // block_d)
    _add_rms_norm_kernel[(cdiv(m, block_m),)](
        x2, y2, weight.contiguous(), r, h, m, d, eps, x2.stride(0), y2.stride(0),
        ACC64=r_dtype == torch.float64, BLOCK_M=block_m, BLOCK_D=block_d, num_warps=4)
    return r.reshape(x.shape), h.reshape(x.shape)
