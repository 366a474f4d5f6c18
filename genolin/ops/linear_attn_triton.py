"""Fused Triton kernels for bidirectional linear attention (the ``backend="triton"`` of ``linear_attention``).

Shapes as the op: q, k (B, N, H, D); v (B, N, H, E); key mask (B, N); FAVOR+ projection W (M, D); M = D for
the elementwise maps. phi(q) and phi(k) live in registers only (float32): they are never written to memory.
A state is stored as one row of BLOCK_M * (BLOCK_E + 1) floats: S (M, E) then z (M).

Forward
  1. state kernel, grid (P, B*H): program p reduces tokens [p*L, (p+1)*L) of one (batch, head) into partial
     S_p (M, E), z_p (M) in float32 (padded keys zeroed after phi). For FAVOR+ each program keeps its own running
     max m_p of the key exponents and rescales its partials when it grows (online rescaling; eps stays outside).
  2. reduction kernel: the partials are summed in a fixed order (deterministic, no atomics); FAVOR+:
     m = max_p m_p, S = sum_p exp(m_p - m) S_p, z likewise.
  3. output kernel, grid (P, B*H): S and z loaded once per program, o = phi(q) S / (phi(q) z + eps), with eps
     scaled by exp(-a_i - m) for FAVOR+ (a_i the query row max), so the output equals the unstabilised formula.
Backward (saved: q, k, v, mask, W and the float32 S, z, m; not phi, not o)
  A. query kernel, grid (P, B*H): recompute phi(q) and den = phi(q) z + eps; g = do S^T; since
     rowsum(do * o) = phi(q) . g / den, o is not needed: c = phi(q) . g / den, dq = ((g - c z^T) / den) * phi'(q);
     partial dS += (phi(q) / den)^T do, dz -= (phi(q) / den)^T c.
  B. after the reduction of dS, dz, key kernel: dk = (v dS^T + dz) * phi'(k), dv = phi(k) dS.
FAVOR+ features are one FMA and one ex2 per element: keys exp2(x Ws^T log2(e) - bias_row) with bias_row =
(|x|^2 D^-1/2 / 2 + m) log2(e) + log2(sqrt(M)) (+inf for padded keys); queries exp2((x Ws^T - max_m x Ws^T) log2(e))
/ sqrt(M), where |x|^2 cancels against the row max.
All element offsets are int64 (tensors past 2^31 elements). N is not a compile-time constant (no recompiles); D, E
and M are (one compile per model shape; masks on those axes fold away when a dim is a power of two).
Dots (accumulation always float32): bf16 inputs on CUDA ("LOWP") use bf16 operands; a per-token operand (phi / den)
is rounded once (its errors average out over the sums), an operand shared by every token (S, dS, the FAVOR+ W) is
split into hi + lo bf16 parts (two dots, ~16 mantissa bits; the forward output takes S's hi part alone, its
rounding being below o's own bf16 rounding), and inputs (q, k, v, do) are exact in bf16. float16
inputs use tf32 dots, float32 inputs IEEE float32 dots. On CUDA exp is one ex2.approx.ftz (values below 2^-126
flush to zero). Under LOWP the q and k tiles pass through an exact dot with the identity (``_widen``) so that phi is
computed once, in the dot-result layout.
"""

from __future__ import annotations

import functools
import math
import os

import torch
import triton
import triton.language as tl

from genolin.ops.launch import cdiv, next_power_of_2

FMAPS = {"elu": 0, "relu": 1, "exp": 2, "favor": 3}


_LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _exp2(x, FAST: tl.constexpr):
    """2^x in float32. FAST (CUDA): one ex2.approx.ftz (results below 2^-126 flush to 0; 2^-inf = 0), without the
    subnormal fix-ups tl.exp2 adds (three instructions per element in the hot loops)."""
    if FAST:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)
    return tl.exp2(x)


@triton.jit
def _exp(x, FAST: tl.constexpr):
    if FAST:
        return _exp2(x * _LOG2E, FAST)
    return tl.exp(x)


@triton.jit
def _program(N, L, H, D: tl.constexpr, E: tl.constexpr, M: tl.constexpr,
             BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    """What every streaming kernel starts from. Grid (P, B*H): program p of (batch, head) bh takes the tokens
    [start, end) = [p L, min((p + 1) L, N)); column offsets and masks of the D, E and M axes (the masks fold
    away when a dim equals its block, D, E and M being compile-time constants)."""
    p = tl.program_id(0)
    bh = tl.program_id(1)
    start = p.to(tl.int64) * L
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_m = tl.arange(0, BLOCK_M)
    return (p, bh, (bh // H).to(tl.int64), (bh % H).to(tl.int64), start, tl.minimum(start + L, N),
            offs_d, offs_e, offs_m, offs_d < D, offs_e < E, offs_m < M)


@triton.jit
def _load_tile(X, b, h, sb, sn, sh, offs_n, cols, mask):
    """Rows offs_n (int64) of X[b, :, h, :] at columns cols -> (rows, cols) in X's dtype, 0 where masked."""
    return tl.load(X + b * sb + h * sh + offs_n[:, None] * sn + cols[None, :], mask=mask, other=0.0)


@triton.jit
def _store_tile(X, b, h, sb, sn, sh, offs_n, cols, mask, x):
    tl.store(X + b * sb + h * sh + offs_n[:, None] * sn + cols[None, :], x.to(X.dtype.element_ty), mask=mask)


@triton.jit
def _widen(x16, eye, LOWP: tl.constexpr):
    """A loaded 16-bit tile as float32. LOWP: through a dot with the identity (exact: one bf16 product per sum),
    so the tile and all computed from it live in the dot-result layout; otherwise Triton computes phi twice, in
    the load layout and the dot layout (one exp pass and hundreds of instructions per tile more)."""
    if LOWP:
        return tl.dot(x16, eye)
    return x16.to(tl.float32)


@triton.jit
def _features(x, xmask, FMAP: tl.constexpr, FAST: tl.constexpr):
    """phi(x) of the elementwise maps (elu, relu, exp) for a float32 (BLOCK_N, BLOCK_D) tile; M = D."""
    if FMAP == 0:
        return tl.where(x > 0, x + 1.0, _exp(tl.minimum(x, 0.0), FAST))
    elif FMAP == 1:
        return tl.maximum(x, 0.0)
    else:
        xm = tl.where(xmask, x, -1.0e30)  # finite: a row of padding gives exp(0) here, not NaN; 0 after the where
        return tl.where(xmask, _exp(xm - tl.max(xm, axis=1)[:, None], FAST), 0.0)


@triton.jit
def _favor_dot(x, x16, Ws, Ws_hi, Ws_lo, m_mask, M: tl.constexpr, BLOCK_M: tl.constexpr,
               PRECISION: tl.constexpr, LOWP: tl.constexpr):
    """x Ws^T (BLOCK_N, BLOCK_M) with Ws = W D^-1/4; -inf in padded feature columns (exp gives 0 there, max
    ignores them). LOWP: x16 is exact in bf16 and Ws = hi + lo to ~2^-17, more exact than one tf32 dot."""
    if LOWP:
        xw = tl.dot(x16, tl.trans(Ws_lo), tl.dot(x16, tl.trans(Ws_hi)))
    else:
        xw = tl.dot(x, tl.trans(Ws), input_precision=PRECISION)
    if M != BLOCK_M:
        xw = tl.where(m_mask[None, :], xw, float("-inf"))
    return xw


@triton.jit
def _favor_norm(x, D_SCALE):
    """|x|^2 D^-1/2 / 2 per row of x (BLOCK_N, BLOCK_D): the FAVOR+ logits are x Ws^T minus this."""
    return (0.5 * D_SCALE * D_SCALE) * tl.sum(x * x, axis=1)


@triton.jit
def _favor_key_exp(xw, r, valid, m_off, LOG2_C, FAST: tl.constexpr):
    """FAVOR+ key features exp(x Ws^T - r - m_off) / sqrt(M) as one FMA and one ex2 per element
    (r = |x|^2 D^-1/2 / 2 per row, LOG2_C = log2(1 / sqrt(M))); rows not valid get a bias of +inf, so 0."""
    bias = tl.where(valid, (r + m_off) * _LOG2E - LOG2_C, float("inf"))
    return _exp2(xw * _LOG2E - bias[:, None], FAST)


@triton.jit
def _key_features(k, k16, valid, xmask, Ws, Ws_hi, Ws_lo, m_mask, m_k, FMAP: tl.constexpr, D_SCALE, LOG2_C,
                  M: tl.constexpr, BLOCK_M: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                  FAST: tl.constexpr):
    """phi(k) (BLOCK_N, BLOCK_M), 0 for keys not valid and for padded features; FAVOR+ with the key offset m_k."""
    if FMAP == 3:
        xw = _favor_dot(k, k16, Ws, Ws_hi, Ws_lo, m_mask, M, BLOCK_M, PRECISION, LOWP)
        phi = _favor_key_exp(xw, _favor_norm(k, D_SCALE), valid, m_k, LOG2_C, FAST)
    else:
        phi = tl.where(valid[:, None] & m_mask[None, :], _features(k, xmask, FMAP, FAST), 0.0)
    return phi


@triton.jit
def _query_features(q, q16, xmask, Ws, Ws_hi, Ws_lo, m_mask, m_k, FMAP: tl.constexpr, D_SCALE, LOG2_C, EPS,
                    M: tl.constexpr, BLOCK_M: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                    FAST: tl.constexpr):
    """phi(q) (BLOCK_N, BLOCK_M) and each row's eps. FAVOR+: the row max a of the logits x Ws^T - r is taken
    out, phi = exp(x Ws^T - max_m x Ws^T) / sqrt(M) (r cancels), and eps is scaled by exp(-a - m_k) alike, so
    num / (den + eps) equals the unstabilised formula."""
    if FMAP == 3:
        xw = _favor_dot(q, q16, Ws, Ws_hi, Ws_lo, m_mask, M, BLOCK_M, PRECISION, LOWP)
        mx = tl.max(xw, axis=1)
        phi = _exp2(xw * _LOG2E - (mx * _LOG2E - LOG2_C)[:, None], FAST)
        a = mx - _favor_norm(q, D_SCALE)
        eps = EPS * tl.exp(-(a + m_k))
    else:
        phi = tl.where(m_mask[None, :], _features(q, xmask, FMAP, FAST), 0.0)
        eps = tl.zeros((q.shape[0],), dtype=tl.float32) + EPS
    return phi, eps


@triton.jit
def _feature_grad(g, x, phi, xmask, Ws, Ws_hi, Ws_lo, FMAP: tl.constexpr, D_SCALE, PRECISION: tl.constexpr,
                  LOWP: tl.constexpr):
    """d loss / dx from g = d loss / d phi (BLOCK_N, BLOCK_M), x (BLOCK_N, BLOCK_D), phi = phi(x)."""
    if FMAP == 0:
        return g * tl.where(x > 0, 1.0, phi)
    elif FMAP == 1:
        return tl.where(x >= 0, g, 0.0)  # the reference's convention at 0 (clamp(min=0) passes the gradient there)
    elif FMAP == 2:
        # phi_i = exp(x_i - max x): d/dx = g * phi - (sum_i g_i phi_i) * (one-hot of the max, ties shared)
        xm = tl.where(xmask, x, -1.0e30)
        is_max = (xm == tl.max(xm, axis=1)[:, None]) & xmask
        count = tl.maximum(tl.sum(is_max.to(tl.float32), axis=1), 1.0)
        gp = g * phi
        return gp - (tl.sum(gp, axis=1) / count)[:, None] * is_max.to(tl.float32)
    else:
        # phi = s exp(x Ws^T - |x|^2 D^-1/2 / 2 - const): dx = (g phi) Ws - rowsum(g phi) x D^-1/2
        gl = g * phi
        return _dot_state(gl, Ws, Ws_hi, Ws_lo, PRECISION, LOWP) - \
            (D_SCALE * D_SCALE) * tl.sum(gl, axis=1)[:, None] * x


@triton.jit
def _parts(x, LOWP: tl.constexpr):
    """A loop-invariant float32 operand as (hi, lo) bf16 parts under LOWP (their sum keeps ~16 bits of x's
    mantissa); else x twice (unused)."""
    if LOWP:
        hi = x.to(tl.bfloat16)
        lo = (x - hi.to(tl.float32)).to(tl.bfloat16)
    else:
        hi = x
        lo = x
    return hi, lo


@triton.jit
def _dot_state(a, B, B_hi, B_lo, PRECISION: tl.constexpr, LOWP: tl.constexpr):
    """a (n, k) float32 times a loop-invariant B (k, m) -> (n, m) float32. LOWP: a rounded to bf16 (a per-token
    error that averages out over the sums) and B as hi + lo (a shared error would not); two bf16 dots cost less
    than one tf32 dot with float32 operands."""
    if LOWP:
        a16 = a.to(tl.bfloat16)
        return tl.dot(a16, B_lo, tl.dot(a16, B_hi))
    return tl.dot(a, B, input_precision=PRECISION)


@triton.jit
def _load_projection(W, offs_m, offs_d, m_mask, d_mask, D: tl.constexpr, FMAP: tl.constexpr, LOWP: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """The pre-scaled FAVOR+ projection Ws = W D^-1/4 (BLOCK_M, BLOCK_D) in float32 and its bf16 parts (zeros,
    unused, for the other maps)."""
    if FMAP == 3:
        ws = tl.load(W + offs_m[:, None] * D + offs_d[None, :], mask=m_mask[:, None] & d_mask[None, :], other=0.0)
    else:
        ws = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    hi, lo = _parts(ws, LOWP)
    return ws, hi, lo


@triton.jit
def _load_state(SZ_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr):
    """A reduced (M, E) state, its (M,) companion and the key offset of one (batch, head). States are stored
    as rows of BLOCK_M * (BLOCK_E + 1) floats: S (BLOCK_M, BLOCK_E) then z (BLOCK_M,)."""
    base = SZ_PTR + bh.to(tl.int64) * (BLOCK_M * (BLOCK_E + 1))
    S = tl.load(base + offs_m[:, None] * BLOCK_E + offs_e[None, :])
    z = tl.load(base + BLOCK_M * BLOCK_E + offs_m)
    return S, z, tl.load(M_PTR + bh)


@triton.jit
def _store_state(SZ_PTR, p, bh, S, z, offs_m, offs_e, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr):
    """Partial state of program p of (batch, head) bh, at row p * (B*H) + bh of the (P, B*H, SZ) partials."""
    base = SZ_PTR + (p.to(tl.int64) * tl.num_programs(1) + bh) * (BLOCK_M * (BLOCK_E + 1))
    tl.store(base + offs_m[:, None] * BLOCK_E + offs_e[None, :], S)
    tl.store(base + BLOCK_M * BLOCK_E + offs_m, z)


@triton.jit(do_not_specialize=["N", "L"])
def _state_kernel(K, V, MASK, W, SZP, MP,
                  N, L, H, D: tl.constexpr, E: tl.constexpr, M: tl.constexpr,
                  skb, skn, skh, svb, svn, svh, smb,
                  D_SCALE, LOG2_C,
                  FMAP: tl.constexpr, HAS_MASK: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                  ZDOT: tl.constexpr, FAST: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    p, bh, b, h, start, end, offs_d, offs_e, offs_m, d_mask, e_mask, m_mask = _program(
        N, L, H, D, E, M, BLOCK_D, BLOCK_E, BLOCK_M)
    ws, ws_hi, ws_lo = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, LOWP, BLOCK_M, BLOCK_D)
    S = tl.zeros((BLOCK_M, BLOCK_E), dtype=tl.float32)
    z = tl.zeros((BLOCK_M,), dtype=tl.float32)
    # ZDOT: z as phi^T 1 on the tensor cores (16 equal columns) instead of a cross-warp sum per tile
    z16 = tl.zeros((BLOCK_M, 16), dtype=tl.float32)
    ones = tl.full((BLOCK_N, 16), 1.0, tl.bfloat16)
    m_run = tl.full([], -1.0e30, tl.float32)  # the running FAVOR+ key offset; "nothing seen" stays finite
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        valid = offs_n < end
        if HAS_MASK:
            valid = valid & (tl.load(MASK + b * smb + offs_n, mask=valid, other=0) != 0)
        xmask = valid[:, None] & d_mask[None, :]
        k16 = _load_tile(K, b, h, skb, skn, skh, offs_n, offs_d, xmask)
        v16 = _load_tile(V, b, h, svb, svn, svh, offs_n, offs_e, valid[:, None] & e_mask[None, :])
        k = k16.to(tl.float32)
        if FMAP == 3:
            xw = _favor_dot(k, k16, ws, ws_hi, ws_lo, m_mask, M, BLOCK_M, PRECISION, LOWP)
            r = _favor_norm(k, D_SCALE)
            m_tile = tl.max(tl.where(valid, tl.max(xw, axis=1) - r, -1.0e30), axis=0)
            if m_tile > m_run:  # rescale only when the offset grows: after the first tiles it rarely does
                alpha = tl.exp(m_run - m_tile)
                S = S * alpha
                if LOWP and ZDOT:
                    z16 = z16 * alpha
                else:
                    z = z * alpha
                m_run = m_tile
            phi = _favor_key_exp(xw, r, valid, m_run, LOG2_C, FAST)
        else:
            phi = _key_features(k, k16, valid, xmask, ws, ws_hi, ws_lo, m_mask, m_run, FMAP, D_SCALE, LOG2_C, M,
                                BLOCK_M, PRECISION, LOWP, FAST)
        if LOWP:  # per-token roundings of phi; the sum over tokens keeps float32 accumulators
            phi_t = tl.trans(phi.to(tl.bfloat16))
            S = tl.dot(phi_t, v16, S)
            if ZDOT:
                z16 = tl.dot(phi_t, ones, z16)
            else:
                z += tl.sum(phi, axis=0)
        else:
            S = tl.dot(tl.trans(phi), v16.to(tl.float32), S, input_precision=PRECISION)
            z += tl.sum(phi, axis=0)
    if LOWP and ZDOT:
        z = tl.max(z16, axis=1)
    _store_state(SZP, p, bh, S, z, offs_m, offs_e, BLOCK_M, BLOCK_E)
    tl.store(MP + p.to(tl.int64) * tl.num_programs(1) + bh, m_run)


@triton.jit
def _reduce_kernel(PART, MP, OUT, MK, P, BH, RESCALE: tl.constexpr, SZ: tl.constexpr,
                   BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr):
    """Partial states PART (P, BH * SZ) -> OUT (BH * SZ): columns [c0, c0 + BLOCK_C) summed over p in a fixed
    order (deterministic). RESCALE (FAVOR+): partial p of (batch, head) j is scaled by exp(MP[p, j] - m_j),
    m_j = max_p MP[p, j], written to MK[j]."""
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < BH * SZ
    j = cols // SZ
    offs_p = tl.arange(0, BLOCK_P)
    m = tl.full((BLOCK_C,), -1.0e30, tl.float32)
    if RESCALE:
        for p0 in range(0, P, BLOCK_P):
            pm = ((p0 + offs_p) < P)[:, None] & cmask[None, :]
            mt = tl.load(MP + (p0 + offs_p)[:, None] * BH + j[None, :], mask=pm, other=-1.0e30)
            m = tl.maximum(m, tl.max(mt, axis=0))
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        pp = p0 + offs_p
        pm = (pp < P)[:, None] & cmask[None, :]
        x = tl.load(PART + pp[:, None].to(tl.int64) * (BH * SZ) + cols[None, :], mask=pm, other=0.0)
        if RESCALE:
            x = x * tl.exp(tl.load(MP + pp[:, None] * BH + j[None, :], mask=pm, other=-1.0e30) - m[None, :])
        acc += tl.sum(x, axis=0)
    tl.store(OUT + cols, acc, mask=cmask)
    tl.store(MK + j, m, mask=cmask & (cols % SZ == 0))


@triton.jit(do_not_specialize=["N", "L"])
def _output_kernel(Q, W, SZ_PTR, M_PTR, OUT,
                   N, L, H, D: tl.constexpr, E: tl.constexpr, M: tl.constexpr,
                   sqb, sqn, sqh, sob, son, soh,
                   D_SCALE, LOG2_C, EPS,
                   FMAP: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                   FAST: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr,
                   BLOCK_M: tl.constexpr):
    p, bh, b, h, start, end, offs_d, offs_e, offs_m, d_mask, e_mask, m_mask = _program(
        N, L, H, D, E, M, BLOCK_D, BLOCK_E, BLOCK_M)
    ws, ws_hi, ws_lo = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, LOWP, BLOCK_M, BLOCK_D)
    S, z, m_k = _load_state(SZ_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M, BLOCK_E)
    S_hi = S.to(tl.bfloat16)  # LOWP: S's hi part alone, its rounding (2^-9, averaged over M terms) is below o's own
    eye = (offs_d[:, None] == offs_d[None, :]).to(tl.bfloat16)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        rows = offs_n < end
        xmask = rows[:, None] & d_mask[None, :]
        q16 = _load_tile(Q, b, h, sqb, sqn, sqh, offs_n, offs_d, xmask)
        phi, eps = _query_features(_widen(q16, eye, LOWP), q16, xmask, ws, ws_hi, ws_lo, m_mask, m_k, FMAP,
                                   D_SCALE, LOG2_C, EPS, M, BLOCK_M, PRECISION, LOWP, FAST)
        if LOWP:
            num = tl.dot(phi.to(tl.bfloat16), S_hi)
        else:
            num = tl.dot(phi, S, input_precision=PRECISION)
        rden = 1.0 / (tl.sum(phi * z[None, :], axis=1) + eps)  # one division per row, not per element
        _store_tile(OUT, b, h, sob, son, soh, offs_n, offs_e, rows[:, None] & e_mask[None, :], num * rden[:, None])


@triton.jit(do_not_specialize=["N", "L"])
def _query_grad_kernel(Q, DO, W, SZ_PTR, M_PTR, DQ, DSZP,
                       N, L, H, D: tl.constexpr, E: tl.constexpr, M: tl.constexpr,
                       sqb, sqn, sqh, sdob, sdon, sdoh, sdqb, sdqn, sdqh,
                       D_SCALE, LOG2_C, EPS,
                       FMAP: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                       ZDOT: tl.constexpr, FAST: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                       BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    # With g = do S^T (BLOCK_N, M) and den = phi z + eps: rowsum(do * o) = phi . g / den, so o itself is not
    # needed: d phi = (g - c z) / den with c = phi . g / den; dS += (phi / den)^T do; dz -= (phi / den)^T c.
    p, bh, b, h, start, end, offs_d, offs_e, offs_m, d_mask, e_mask, m_mask = _program(
        N, L, H, D, E, M, BLOCK_D, BLOCK_E, BLOCK_M)
    ws, ws_hi, ws_lo = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, LOWP, BLOCK_M, BLOCK_D)
    S, z, m_k = _load_state(SZ_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M, BLOCK_E)
    St = tl.trans(S)
    St_hi, St_lo = _parts(St, LOWP)
    eye = (offs_d[:, None] == offs_d[None, :]).to(tl.bfloat16)
    dS = tl.zeros((BLOCK_M, BLOCK_E), dtype=tl.float32)
    # dz: LOWP and ZDOT as (phi / den)^T c on the tensor cores (16 equal columns of c, a (BLOCK_M, 16) accumulator);
    # else a (BLOCK_N, BLOCK_M) accumulator summed over its rows once, after the loop (registers the FAVOR+ tile needs)
    dz16 = tl.zeros((BLOCK_M, 16), dtype=tl.float32)
    dz_acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        rows = offs_n < end
        xmask = rows[:, None] & d_mask[None, :]
        q16 = _load_tile(Q, b, h, sqb, sqn, sqh, offs_n, offs_d, xmask)
        do16 = _load_tile(DO, b, h, sdob, sdon, sdoh, offs_n, offs_e, rows[:, None] & e_mask[None, :])
        do = do16.to(tl.float32)
        q = _widen(q16, eye, LOWP)
        phi, eps = _query_features(q, q16, xmask, ws, ws_hi, ws_lo, m_mask, m_k, FMAP, D_SCALE, LOG2_C, EPS,
                                   M, BLOCK_M, PRECISION, LOWP, FAST)
        rden = 1.0 / (tl.sum(phi * z[None, :], axis=1) + eps)
        g = _dot_state(do, St, St_hi, St_lo, PRECISION, LOWP)  # do is exact in bf16 under LOWP
        c = tl.sum(phi * g, axis=1) * rden
        gphi = (g - c[:, None] * z[None, :]) * rden[:, None]
        dq = _feature_grad(gphi, q, phi, xmask, ws, ws_hi, ws_lo, FMAP, D_SCALE, PRECISION, LOWP)
        _store_tile(DQ, b, h, sdqb, sdqn, sdqh, offs_n, offs_d, xmask, dq)
        phir = phi * rden[:, None]
        if LOWP:  # do as loaded is the B operand; phi / den rounded once per token
            phir_t = tl.trans(phir.to(tl.bfloat16))
            dS = tl.dot(phir_t, do16, dS)
            if ZDOT:  # c rounded once per token, as phi / den is
                dz16 = tl.dot(phir_t, tl.broadcast_to(c[:, None], (BLOCK_N, 16)).to(tl.bfloat16), dz16)
            else:
                dz_acc += phir * c[:, None]
        else:
            dS = tl.dot(tl.trans(phir), do, dS, input_precision=PRECISION)
            dz_acc += phir * c[:, None]
    if LOWP and ZDOT:
        dz = -tl.max(dz16, axis=1)
    else:
        dz = -tl.sum(dz_acc, axis=0)
    _store_state(DSZP, p, bh, dS, dz, offs_m, offs_e, BLOCK_M, BLOCK_E)


@triton.jit(do_not_specialize=["N", "L"])
def _key_grad_kernel(K, V, MASK, W, DSZ_PTR, M_PTR, DK, DV,
                     N, L, H, D: tl.constexpr, E: tl.constexpr, M: tl.constexpr,
                     skb, skn, skh, svb, svn, svh, smb, sdkb, sdkn, sdkh, sdvb, sdvn, sdvh,
                     D_SCALE, LOG2_C,
                     FMAP: tl.constexpr, HAS_MASK: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                     FAST: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    p, bh, b, h, start, end, offs_d, offs_e, offs_m, d_mask, e_mask, m_mask = _program(
        N, L, H, D, E, M, BLOCK_D, BLOCK_E, BLOCK_M)
    ws, ws_hi, ws_lo = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, LOWP, BLOCK_M, BLOCK_D)
    dS, dz, m_k = _load_state(DSZ_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M, BLOCK_E)
    dS_hi, dS_lo = _parts(dS, LOWP)
    dSt = tl.trans(dS)
    dSt_hi, dSt_lo = _parts(dSt, LOWP)
    eye = (offs_d[:, None] == offs_d[None, :]).to(tl.bfloat16)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        rows = offs_n < end
        valid = rows
        if HAS_MASK:
            valid = valid & (tl.load(MASK + b * smb + offs_n, mask=rows, other=0) != 0)
        xmask = rows[:, None] & d_mask[None, :]
        vmask = rows[:, None] & e_mask[None, :]
        k16 = _load_tile(K, b, h, skb, skn, skh, offs_n, offs_d, xmask)
        v = _load_tile(V, b, h, svb, svn, svh, offs_n, offs_e, vmask).to(tl.float32)
        k = _widen(k16, eye, LOWP)
        phi = _key_features(k, k16, valid, xmask, ws, ws_hi, ws_lo, m_mask, m_k, FMAP, D_SCALE, LOG2_C, M, BLOCK_M,
                            PRECISION, LOWP, FAST)
        gphi = tl.where(valid[:, None] & m_mask[None, :],
                        _dot_state(v, dSt, dSt_hi, dSt_lo, PRECISION, LOWP) + dz[None, :], 0.0)
        dk = _feature_grad(gphi, k, phi, xmask, ws, ws_hi, ws_lo, FMAP, D_SCALE, PRECISION, LOWP)
        _store_tile(DK, b, h, sdkb, sdkn, sdkh, offs_n, offs_d, xmask, dk)
        _store_tile(DV, b, h, sdvb, sdvn, sdvh, offs_n, offs_e, vmask, _dot_state(phi, dS, dS_hi, dS_lo, PRECISION,
                                                                                  LOWP))


# --- launch helpers ---------------------------------------------------------------------------------------------


def _config(d: int, e: int, m: int, backward: bool, itemsize: int = 2) -> dict:
    """Tile sizes and warps. Head dims are padded to powers of two. A warpgroup (4 warps) takes 64 tokens per step
    so the tensor cores get whole 64-row tiles; measured on Hopper GPUs (docs/benchmarks.md, attention kernels):
    64 tokens x 4 warps is best for D = E = 64 and for the FAVOR+ forward with M = 128 (state 128 x 64), while the
    heavier FAVOR+ backward kernels run best with 128 x 8; D or E of 256 leaves registers for 16 tokens only.
    float32 inputs with a dim above 64 take 32 x 8 (larger tiles exceed the shared memory).
    GENOLIN_TRITON_BLOCK_N / _WARPS override (tuning); GENOLIN_TRITON_BWD_BLOCK_N / _BWD_WARPS the backward's
    alone."""
    bd, be, bm = (max(16, next_power_of_2(x)) for x in (d, e, m))
    widest = max(bd, be, bm)
    if widest <= 64 or (not backward and bm * be <= 128 * 64 and bd <= 128 and itemsize < 4):
        block_n, warps = 64, 4
    elif widest <= 128 and itemsize == 4:
        block_n, warps = 32, 8
    elif widest <= 128:
        block_n, warps = 128, 8
    else:
        block_n, warps = 16, 8
    env = os.environ
    block_n = int((backward and env.get("GENOLIN_TRITON_BWD_BLOCK_N")) or env.get("GENOLIN_TRITON_BLOCK_N", block_n))
    warps = int((backward and env.get("GENOLIN_TRITON_BWD_WARPS")) or env.get("GENOLIN_TRITON_WARPS", warps))
    cfg = {"BLOCK_N": block_n, "BLOCK_D": bd, "BLOCK_E": be, "BLOCK_M": bm, "num_warps": warps}
    # software-pipelining depth of the token loops: Triton's default (3), but 2 for the FAVOR+ backward (M above
    # D and E): fewer stages leave registers to its spilling query kernel, which ran faster with 2 (the key kernel
    # the same; docs/benchmarks.md, "Attention kernels")
    stages = os.environ.get("GENOLIN_TRITON_STAGES") or (2 if backward and bm > max(bd, be) else None)
    if stages:
        cfg["num_stages"] = int(stages)
    return cfg


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _zdot() -> bool:
    """Column sums over tokens (z, dz) as dots with a block of ones on the tensor cores under LOWP
    (GENOLIN_TRITON_ZDOT=0: sums in registers, for comparison)."""
    return os.environ.get("GENOLIN_TRITON_ZDOT", "1") != "0"


def _split(n: int, bh: int, block_n: int, device: torch.device) -> tuple[int, int]:
    """(P, L): P programs per (batch, head), L tokens each (a multiple of block_n)."""
    forced = os.environ.get("GENOLIN_TRITON_SPLIT")
    if forced:
        p_target = int(forced)
    elif device.type == "cuda":
        sms = _sm_count(device.index if device.index is not None else torch.cuda.current_device())
        p_target = max(1, 4 * sms // max(bh, 1))  # ~4 programs per SM: measured best at B*H = 8
    else:
        p_target = 2
    p_target = max(1, min(p_target, cdiv(max(n, 1), block_n)))
    length = cdiv(cdiv(max(n, 1), p_target), block_n) * block_n
    return cdiv(max(n, 1), length), length


def _alloc(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """Kernel outputs: uninitialised, or NaN-filled with GENOLIN_TRITON_POISON=1 so tests see unwritten elements."""
    if os.environ.get("GENOLIN_TRITON_POISON"):
        return torch.full(shape, float("nan"), device=like.device, dtype=dtype or like.dtype)
    return torch.empty(shape, device=like.device, dtype=dtype or like.dtype)


def _precision(dtype: torch.dtype) -> str:
    """IEEE float32 dots for float32 inputs (3xtf32 was measured 100x less accurate than PyTorch's float32 on relu
    gradients at 1 M tokens, where small denominators amplify rounding); tf32 for 16-bit inputs."""
    return "ieee" if dtype == torch.float32 else "tf32"


def _reduce(part: torch.Tensor, mp: torch.Tensor | None):
    """Partial states (P, B*H, SZ) and FAVOR+ offsets (P, B*H) -> states (B*H, SZ), key offsets (B*H,)."""
    p, bh, sz = part.shape
    out = _alloc((bh, sz), part)
    mk = _alloc((bh,), part)
    block_c = 128
    _reduce_kernel[(cdiv(bh * sz, block_c),)](part, mp if mp is not None else part, out, mk, p, bh,
                                                     RESCALE=mp is not None, SZ=sz, BLOCK_P=32, BLOCK_C=block_c)
    return out, mk


def _plan(q: torch.Tensor, v: torch.Tensor, projection: torch.Tensor | None, feature_map: str):
    """Tiles and split of one call: (forward config, backward config, P, L, M); the same in forward, backward and
    the fake (shape-only) implementation."""
    b, n, h, d = q.shape
    m = projection.shape[0] if feature_map == "favor" else d
    fwd_cfg, bwd_cfg = (_config(d, v.shape[-1], m, backward=bwd, itemsize=q.element_size()) for bwd in (False, True))
    # one split for both directions: L a multiple of either direction's tokens per step
    p, length = _split(n, b * h, max(fwd_cfg["BLOCK_N"], bwd_cfg["BLOCK_N"]), q.device)
    return fwd_cfg, bwd_cfg, p, length, m


def _launch_args(q, mask, projection, feature_map):
    """The kernels' shared inputs: W (FAVOR+ projection times D^-1/4, so the kernels multiply the inputs as loaded,
    exact in bf16), the mask as uint8, the constexpr flags and the (D_SCALE, LOG2_C) scalars."""
    d = q.shape[-1]
    favor = feature_map == "favor"
    m = projection.shape[0] if favor else d
    w = (projection.float() * d ** -0.25).contiguous() if favor else q.new_empty(1, dtype=torch.float32)
    mask_t = mask.to(torch.uint8).contiguous() if mask is not None else q.new_empty(1, dtype=torch.uint8)
    # bf16 inputs on CUDA: bf16 dot operands (states as hi + lo); not under the interpreter (no bf16 dots)
    lowp = q.is_cuda and q.dtype == torch.bfloat16 and os.environ.get("GENOLIN_TRITON_LOWP", "1") != "0"
    common = dict(FMAP=FMAPS[feature_map], PRECISION=_precision(q.dtype), LOWP=lowp, FAST=q.is_cuda)
    scales = (d ** -0.25, -0.5 * math.log2(m))  # D_SCALE = D^-1/4, LOG2_C = log2(1 / sqrt(M))
    return w, mask_t, common, scales


# The kernels as two torch custom ops (forward -> o and the reduced state; backward -> dq, dk, dv) under
# torch.compile: opaque to it (a compiled block calls them as it calls a matmul, no graph break, no tracing into
# Triton code). Eager calls launch the kernels directly (inference) or through a plain autograd Function (training).
def _forward_kernels(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                     projection: torch.Tensor | None, feature_map: str, eps: float
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(B, N, H, D) q, k, (B, N, H, E) v -> o (B, N, H, E), states (B*H, BLOCK_M * (BLOCK_E + 1)) float32,
    FAVOR+ key offsets (B*H,) float32."""
    b, n, h, d = q.shape
    e = v.shape[-1]
    fwd_cfg, _, p, length, m = _plan(q, v, projection, feature_map)
    w, mask_t, common, scales = _launch_args(q, mask, projection, feature_map)
    bm, be = fwd_cfg["BLOCK_M"], fwd_cfg["BLOCK_E"]
    # z of the state kernel on the tensor cores with 4 warps only: with 8 warps the same code was seen to fault on
    # Hopper GPUs under Triton 3.6
    zdot = fwd_cfg["num_warps"] == 4 and _zdot()
    szp = _alloc((p, b * h, bm * (be + 1)), q, torch.float32)
    mp = _alloc((p, b * h), q, torch.float32)
    _state_kernel[(p, b * h)](
        k, v, mask_t, w, szp, mp, n, length, h, d, e, m,
        k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        mask_t.stride(0) if mask is not None else 0, *scales, HAS_MASK=mask is not None, ZDOT=zdot, **common,
        **fwd_cfg)
    sz, m_k = _reduce(szp, mp if feature_map == "favor" else None)
    o = _alloc((b, n, h, e), v)
    _output_kernel[(p, b * h)](
        q, w, sz, m_k, o, n, length, h, d, e, m,
        q.stride(0), q.stride(1), q.stride(2), o.stride(0), o.stride(1), o.stride(2),
        *scales, eps, **common, **fwd_cfg)
    return o, sz, m_k


@torch.library.custom_op("genolin::linear_attention_fwd", mutates_args=())
def _linear_attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                          projection: torch.Tensor | None, feature_map: str, eps: float
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_forward_kernels`` as an op."""
    return _forward_kernels(q, k, v, mask, projection, feature_map, eps)


@_linear_attention_fwd.register_fake
def _(q, k, v, mask, projection, feature_map, eps):
    b, n, h, _ = q.shape
    fwd_cfg = _plan(q, v, projection, feature_map)[0]
    size = fwd_cfg["BLOCK_M"] * (fwd_cfg["BLOCK_E"] + 1)
    return (q.new_empty(b, n, h, v.shape[-1], dtype=v.dtype), q.new_empty(b * h, size, dtype=torch.float32),
            q.new_empty(b * h, dtype=torch.float32))


def _backward_kernels(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                      projection: torch.Tensor | None, sz: torch.Tensor, m_k: torch.Tensor, do: torch.Tensor,
                      feature_map: str, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The forward's inputs, its states and do (B, N, H, E) -> dq, dk (B, N, H, D), dv (B, N, H, E)."""
    b, n, h, d = q.shape
    e = v.shape[-1]
    _, cfg, p, length, m = _plan(q, v, projection, feature_map)
    w, mask_t, common, scales = _launch_args(q, mask, projection, feature_map)
    bm, be = cfg["BLOCK_M"], cfg["BLOCK_E"]
    do = do.contiguous() if do.stride(-1) != 1 else do
    dq, dk, dv = _alloc(q.shape, q), _alloc(k.shape, k), _alloc(v.shape, v)
    dszp = _alloc((p, b * h, bm * (be + 1)), q, torch.float32)
    _query_grad_kernel[(p, b * h)](
        q, do, w, sz, m_k, dq, dszp, n, length, h, d, e, m,
        q.stride(0), q.stride(1), q.stride(2), do.stride(0), do.stride(1), do.stride(2),
        dq.stride(0), dq.stride(1), dq.stride(2), *scales, eps, ZDOT=_zdot(), **common, **cfg)
    dsz, _ = _reduce(dszp, None)
    _key_grad_kernel[(p, b * h)](
        k, v, mask_t, w, dsz, m_k, dk, dv, n, length, h, d, e, m,
        k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        mask_t.stride(0) if mask is not None else 0,
        dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1), dv.stride(2),
        *scales, HAS_MASK=mask is not None, **common, **cfg)
    return dq, dk, dv


@torch.library.custom_op("genolin::linear_attention_bwd", mutates_args=())
def _linear_attention_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                          projection: torch.Tensor | None, sz: torch.Tensor, m_k: torch.Tensor, do: torch.Tensor,
                          feature_map: str, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_backward_kernels`` as an op."""
    return _backward_kernels(q, k, v, mask, projection, sz, m_k, do, feature_map, eps)


@_linear_attention_bwd.register_fake
def _(q, k, v, mask, projection, sz, m_k, do, feature_map, eps):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, mask, projection, feature_map, eps = inputs
    _, sz, m_k = output
    ctx.save_for_backward(q, k, v, mask, projection, sz, m_k)
    ctx.feature_map, ctx.eps = feature_map, eps


def _backward(ctx, do, _dsz, _dmk):
    q, k, v, mask, projection, sz, m_k = ctx.saved_tensors
    dq, dk, dv = _linear_attention_bwd(q, k, v, mask, projection, sz, m_k, do, ctx.feature_map, ctx.eps)
    return dq, dk, dv, None, None, None, None


_linear_attention_fwd.register_autograd(_backward, setup_context=_setup_context)


class _EagerLinearAttention(torch.autograd.Function):
    """The same kernels under eager autograd, without the custom ops' dispatch, whose host time exceeds the
    kernels' at training lengths (docs/benchmarks.md, "Attention kernels"). torch.compile still sees the ops."""

    @staticmethod
    def forward(ctx, q, k, v, mask, projection, feature_map: str, eps: float):
        o, sz, m_k = _forward_kernels(q, k, v, mask, projection, feature_map, eps)
        ctx.save_for_backward(q, k, v, mask, projection, sz, m_k)
        ctx.feature_map, ctx.eps = feature_map, eps
        return o

    @staticmethod
    @torch.autograd.function.once_differentiable  # no double backward: an error, as through the ops, not a zero
    def backward(ctx, do):
        q, k, v, mask, projection, sz, m_k = ctx.saved_tensors
        dq, dk, dv = _backward_kernels(q, k, v, mask, projection, sz, m_k, do, ctx.feature_map, ctx.eps)
        return dq, dk, dv, None, None, None, None


def triton_linear_attention(q, k, v, *, feature_map="elu", projection=None, key_padding_mask=None, eps=1e-6):
    """Bidirectional linear attention through the fused kernels; see the module docstring."""
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if torch.compiler.is_compiling():
        return _linear_attention_fwd(q, k, v, key_padding_mask, projection, feature_map, float(eps))[0]
    if eager_inference(q, k, v, projection):  # the launches themselves: no op, no autograd
        return _forward_kernels(q, k, v, key_padding_mask, projection, feature_map, float(eps))[0]
    return _EagerLinearAttention.apply(q, k, v, key_padding_mask, projection, feature_map, float(eps))


def eager_inference(*tensors: torch.Tensor | None) -> bool:
    """Whether a kernel call can skip its custom op: outside torch.compile with no gradient to record. The op's
    first call imports torch's compiler stack (torch._dynamo, sympy: a second or more), which eager prediction
    then paid inside its first batch."""
    if torch.compiler.is_compiling():
        return False
    return not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors))
