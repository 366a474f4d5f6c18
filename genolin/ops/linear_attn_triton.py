"""Fused Triton kernels for bidirectional linear attention (the ``backend="triton"`` of ``linear_attention``).

Shapes as the op: q, k (B, N, H, D); v (B, N, H, E); key mask (B, N); FAVOR+ projection W (M, D); M = D for
the elementwise maps. phi(q) and phi(k) live in registers only (float32): they are never written to memory.

Forward
  1. state kernel, grid (P, B*H): program p reduces tokens [p*L, (p+1)*L) of one (batch, head) into partial
     S_p (M, E), z_p (M) in float32 (padded keys zeroed after phi). For FAVOR+ each program keeps its own running
     max m_p of the key exponents and rescales its partials when it grows (online rescaling; eps stays outside).
  2. the partials are combined in a fixed order (deterministic, no atomics): m = max_p m_p,
     S = sum_p exp(m_p - m) S_p, z likewise.
  3. output kernel, grid (P, B*H): S and z loaded once per program, o = phi(q) S / (phi(q) z + eps), with eps
     scaled by exp(-a_i - m) for FAVOR+ (a_i the query row max), so the output equals the unstabilised formula.
Backward (saved: q, k, v, mask, W and the float32 S, z, m; not phi)
  A. query kernel, grid (P, B*H): recompute phi(q), den, o; a = do / den, c = rowsum(do * o) / den;
     dq = (a S^T - c z^T) * phi'(q); partial dS += phi(q)^T a, dz -= phi(q)^T c.
  B. after the fixed-order reduction of dS, dz, key kernel: dk = (v dS^T + dz) * phi'(k), dv = phi(k) dS.
All element offsets are int64 (tensors past 2^31 elements). N is not a compile-time constant (no recompiles).
Dots: tf32 for 16-bit inputs (the state sums phi^T v with bf16 operands when LOWP), IEEE float32 for float32
inputs; accumulation always float32.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

FMAPS = {"elu": 0, "relu": 1, "exp": 2, "favor": 3}


@triton.jit
def _features(x, xmask, W, offs_m, m_mask, FMAP: tl.constexpr, D_SCALE, INV_SQRT_M, PRECISION: tl.constexpr):
    """phi(x) for a (BLOCK_N, BLOCK_D) tile in float32 -> (BLOCK_N, BLOCK_M); for FAVOR+ the raw exponents."""
    if FMAP == 0:
        return tl.where(x > 0, x + 1.0, tl.exp(tl.minimum(x, 0.0)))
    elif FMAP == 1:
        return tl.maximum(x, 0.0)
    elif FMAP == 2:
        xm = tl.where(xmask, x, -1.0e30)  # finite: a row of padding gives exp(0), masked to 0 below, not NaN
        return tl.where(xmask, tl.exp(xm - tl.max(xm, axis=1)[:, None]), 0.0)
    else:
        xh = x * D_SCALE
        logits = tl.dot(xh, tl.trans(W), input_precision=PRECISION)
        return logits - 0.5 * tl.sum(xh * xh, axis=1)[:, None]


@triton.jit
def _feature_grad(g, x, phi, xmask, W, FMAP: tl.constexpr, D_SCALE, PRECISION: tl.constexpr):
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
        # phi = s exp(x^ W^T - |x^|^2 / 2 - const), x^ = x D^-1/4: dx^ = (g phi) W - rowsum(g phi) x^
        gl = g * phi
        xh = x * D_SCALE
        dxh = tl.dot(gl, W, input_precision=PRECISION) - tl.sum(gl, axis=1)[:, None] * xh
        return dxh * D_SCALE


@triton.jit
def _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """The FAVOR+ projection (BLOCK_M, BLOCK_D) in float32; zeros (unused) for the other maps."""
    if FMAP == 3:
        return tl.load(W + offs_m[:, None] * D + offs_d[None, :], mask=m_mask[:, None] & d_mask[None, :], other=0.0)
    return tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)


@triton.jit
def _load_state(S_PTR, Z_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr):
    """A reduced (M, E) state, its (M,) companion and the key offset of one (batch, head)."""
    bh64 = bh.to(tl.int64)
    S = tl.load(S_PTR + bh64 * BLOCK_M * BLOCK_E + offs_m[:, None] * BLOCK_E + offs_e[None, :])
    z = tl.load(Z_PTR + bh64 * BLOCK_M + offs_m)
    return S, z, tl.load(M_PTR + bh64)


@triton.jit
def _query_features(q, xmask, W, offs_m, m_mask, m_k, FMAP: tl.constexpr, D_SCALE, INV_SQRT_M, EPS,
                    PRECISION: tl.constexpr):
    """phi(q) (BLOCK_N, BLOCK_M) and the eps of each row: for FAVOR+ the row max a is subtracted and eps scaled by
    exp(-a - m_k) alike, so num / (den + eps) equals the unstabilised formula."""
    phi = _features(q, xmask, W, offs_m, m_mask, FMAP, D_SCALE, INV_SQRT_M, PRECISION)
    eps = tl.zeros((q.shape[0],), dtype=tl.float32) + EPS
    if FMAP == 3:
        logits = tl.where(m_mask[None, :], phi, float("-inf"))
        a = tl.max(logits, axis=1)
        phi = tl.exp(logits - a[:, None]) * INV_SQRT_M
        eps = EPS * tl.exp(-(a + m_k))
    return tl.where(m_mask[None, :], phi, 0.0), eps


@triton.jit(do_not_specialize=["N", "L"])
def _state_kernel(K, V, MASK, W, SP, ZP, MP,
                  N, L, H, D, E, M,
                  skb, skn, skh, svb, svn, svh, smb,
                  D_SCALE, INV_SQRT_M,
                  FMAP: tl.constexpr, HAS_MASK: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    p = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_m = tl.arange(0, BLOCK_M)
    d_mask = offs_d < D
    e_mask = offs_e < E
    m_mask = offs_m < M
    w = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, BLOCK_M, BLOCK_D)
    S = tl.zeros((BLOCK_M, BLOCK_E), dtype=tl.float32)
    z = tl.zeros((BLOCK_M,), dtype=tl.float32)
    m_run = tl.full([], -1.0e30, tl.float32)  # the running FAVOR+ key offset; "nothing seen" stays finite
    start = p.to(tl.int64) * L
    end = tl.minimum(start + L, N)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        valid = offs_n < end
        if HAS_MASK:
            valid = valid & (tl.load(MASK + b * smb + offs_n, mask=valid, other=0) != 0)
        k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :],
                    mask=valid[:, None] & d_mask[None, :], other=0.0).to(tl.float32)
        v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_e[None, :],
                    mask=valid[:, None] & e_mask[None, :], other=0.0).to(tl.float32)
        phi = _features(k, valid[:, None] & d_mask[None, :], w, offs_m, m_mask, FMAP, D_SCALE, INV_SQRT_M,
                        PRECISION)
        if FMAP == 3:
            logits = tl.where(valid[:, None] & m_mask[None, :], phi, float("-inf"))
            m_new = tl.maximum(m_run, tl.max(tl.max(logits, axis=1), axis=0))
            alpha = tl.exp(m_run - m_new)
            S = S * alpha
            z = z * alpha
            phi = tl.exp(logits - m_new) * INV_SQRT_M
            m_run = m_new
        phi = tl.where(valid[:, None] & m_mask[None, :], phi, 0.0)
        if LOWP:
            S += tl.dot(tl.trans(phi.to(tl.bfloat16)), v.to(tl.bfloat16))
        else:
            S += tl.dot(tl.trans(phi), v, input_precision=PRECISION)
        z += tl.sum(phi, axis=0)
    part = p.to(tl.int64) * tl.num_programs(1) + bh
    tl.store(SP + part * BLOCK_M * BLOCK_E + offs_m[:, None] * BLOCK_E + offs_e[None, :], S)
    tl.store(ZP + part * BLOCK_M + offs_m, z)
    tl.store(MP + part, m_run)


@triton.jit(do_not_specialize=["N", "L"])
def _output_kernel(Q, W, S_PTR, Z_PTR, M_PTR, OUT,
                   N, L, H, D, E, M,
                   sqb, sqn, sqh, sob, son, soh,
                   D_SCALE, INV_SQRT_M, EPS,
                   FMAP: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    p = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_m = tl.arange(0, BLOCK_M)
    d_mask = offs_d < D
    e_mask = offs_e < E
    m_mask = offs_m < M
    w = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, BLOCK_M, BLOCK_D)
    S, z, m_k = _load_state(S_PTR, Z_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M, BLOCK_E)
    start = p.to(tl.int64) * L
    end = tl.minimum(start + L, N)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        rows = offs_n < end
        q = tl.load(Q + b * sqb + h * sqh + offs_n[:, None] * sqn + offs_d[None, :],
                    mask=rows[:, None] & d_mask[None, :], other=0.0).to(tl.float32)
        phi, eps = _query_features(q, rows[:, None] & d_mask[None, :], w, offs_m, m_mask, m_k, FMAP, D_SCALE,
                                   INV_SQRT_M, EPS, PRECISION)
        num = tl.dot(phi, S, input_precision=PRECISION)
        den = tl.sum(phi * z[None, :], axis=1) + eps
        o = num / den[:, None]
        tl.store(OUT + b * sob + h * soh + offs_n[:, None] * son + offs_e[None, :], o.to(OUT.dtype.element_ty),
                 mask=rows[:, None] & e_mask[None, :])


@triton.jit(do_not_specialize=["N", "L"])
def _query_grad_kernel(Q, DO, W, S_PTR, Z_PTR, M_PTR, DQ, DSP, DZP,
                       N, L, H, D, E, M,
                       sqb, sqn, sqh, sdob, sdon, sdoh, sdqb, sdqn, sdqh,
                       D_SCALE, INV_SQRT_M, EPS,
                       FMAP: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr,
                       BLOCK_M: tl.constexpr):
    p = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_m = tl.arange(0, BLOCK_M)
    d_mask = offs_d < D
    e_mask = offs_e < E
    m_mask = offs_m < M
    w = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, BLOCK_M, BLOCK_D)
    S, z, m_k = _load_state(S_PTR, Z_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M, BLOCK_E)
    dS = tl.zeros((BLOCK_M, BLOCK_E), dtype=tl.float32)
    dz = tl.zeros((BLOCK_M,), dtype=tl.float32)
    start = p.to(tl.int64) * L
    end = tl.minimum(start + L, N)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        rows = offs_n < end
        xmask = rows[:, None] & d_mask[None, :]
        q = tl.load(Q + b * sqb + h * sqh + offs_n[:, None] * sqn + offs_d[None, :], mask=xmask,
                    other=0.0).to(tl.float32)
        do = tl.load(DO + b * sdob + h * sdoh + offs_n[:, None] * sdon + offs_e[None, :],
                     mask=rows[:, None] & e_mask[None, :], other=0.0).to(tl.float32)
        phi, eps = _query_features(q, xmask, w, offs_m, m_mask, m_k, FMAP, D_SCALE, INV_SQRT_M, EPS, PRECISION)
        den = tl.sum(phi * z[None, :], axis=1) + eps
        o = tl.dot(phi, S, input_precision=PRECISION) / den[:, None]
        ga = do / den[:, None]
        c = tl.sum(do * o, axis=1) / den
        gphi = tl.dot(ga, tl.trans(S), input_precision=PRECISION) - c[:, None] * z[None, :]
        dq = _feature_grad(gphi, q, phi, xmask, w, FMAP, D_SCALE, PRECISION)
        tl.store(DQ + b * sdqb + h * sdqh + offs_n[:, None] * sdqn + offs_d[None, :], dq.to(DQ.dtype.element_ty),
                 mask=xmask)
        if LOWP:
            dS += tl.dot(tl.trans(phi.to(tl.bfloat16)), ga.to(tl.bfloat16))
        else:
            dS += tl.dot(tl.trans(phi), ga, input_precision=PRECISION)
        dz -= tl.sum(phi * c[:, None], axis=0)
    part = p.to(tl.int64) * tl.num_programs(1) + bh
    tl.store(DSP + part * BLOCK_M * BLOCK_E + offs_m[:, None] * BLOCK_E + offs_e[None, :], dS)
    tl.store(DZP + part * BLOCK_M + offs_m, dz)


@triton.jit(do_not_specialize=["N", "L"])
def _key_grad_kernel(K, V, MASK, W, DS_PTR, DZ_PTR, M_PTR, DK, DV,
                     N, L, H, D, E, M,
                     skb, skn, skh, svb, svn, svh, smb, sdkb, sdkn, sdkh, sdvb, sdvn, sdvh,
                     D_SCALE, INV_SQRT_M,
                     FMAP: tl.constexpr, HAS_MASK: tl.constexpr, PRECISION: tl.constexpr, LOWP: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_M: tl.constexpr):
    p = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_e = tl.arange(0, BLOCK_E)
    offs_m = tl.arange(0, BLOCK_M)
    d_mask = offs_d < D
    e_mask = offs_e < E
    m_mask = offs_m < M
    w = _load_projection(W, offs_m, offs_d, m_mask, d_mask, D, FMAP, BLOCK_M, BLOCK_D)
    dS, dz, m_k = _load_state(DS_PTR, DZ_PTR, M_PTR, bh, offs_m, offs_e, BLOCK_M, BLOCK_E)
    start = p.to(tl.int64) * L
    end = tl.minimum(start + L, N)
    for n0 in range(start, end, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N).to(tl.int64)
        rows = offs_n < end
        valid = rows
        if HAS_MASK:
            valid = valid & (tl.load(MASK + b * smb + offs_n, mask=rows, other=0) != 0)
        xmask = rows[:, None] & d_mask[None, :]
        k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :], mask=xmask,
                    other=0.0).to(tl.float32)
        v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_e[None, :],
                    mask=rows[:, None] & e_mask[None, :], other=0.0).to(tl.float32)
        phi = _features(k, xmask, w, offs_m, m_mask, FMAP, D_SCALE, INV_SQRT_M, PRECISION)
        if FMAP == 3:
            phi = tl.exp(tl.where(m_mask[None, :], phi, float("-inf")) - m_k) * INV_SQRT_M
        keep = valid[:, None] & m_mask[None, :]
        phi = tl.where(keep, phi, 0.0)
        gphi = tl.where(keep, tl.dot(v, tl.trans(dS), input_precision=PRECISION) + dz[None, :], 0.0)
        dk = _feature_grad(gphi, k, phi, xmask, w, FMAP, D_SCALE, PRECISION)
        dv = tl.dot(phi, dS, input_precision=PRECISION)
        tl.store(DK + b * sdkb + h * sdkh + offs_n[:, None] * sdkn + offs_d[None, :], dk.to(DK.dtype.element_ty),
                 mask=xmask)
        tl.store(DV + b * sdvb + h * sdvh + offs_n[:, None] * sdvn + offs_e[None, :], dv.to(DV.dtype.element_ty),
                 mask=rows[:, None] & e_mask[None, :])


# --- launch helpers ---------------------------------------------------------------------------------------------


def _blocks(d: int, e: int, m: int) -> dict:
    """Tile sizes: the head dims padded to powers of two; tokens per step shrink as the tiles widen.
    GENOLIN_TRITON_BLOCK_N overrides the tokens per step (tuning)."""
    bd, be, bm = (max(16, triton.next_power_of_2(x)) for x in (d, e, m))
    widest = max(bd, be, bm)
    block_n = 64 if widest <= 64 else 32 if widest <= 128 else 16
    block_n = int(os.environ.get("GENOLIN_TRITON_BLOCK_N", block_n))
    return {"BLOCK_N": block_n, "BLOCK_D": bd, "BLOCK_E": be, "BLOCK_M": bm}


def _num_warps(blocks: dict) -> int:
    default = 4 if max(blocks["BLOCK_D"], blocks["BLOCK_E"], blocks["BLOCK_M"]) <= 64 else 8
    return int(os.environ.get("GENOLIN_TRITON_WARPS", default))


def _split(n: int, bh: int, block_n: int, device: torch.device) -> tuple[int, int]:
    """(P, L): P programs per (batch, head), L tokens each (a multiple of block_n)."""
    forced = os.environ.get("GENOLIN_TRITON_SPLIT")
    if forced:
        p_target = int(forced)
    elif device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        p_target = max(1, 16 * sms // max(bh, 1))  # measured best on an H200 at B*H = 8 (264 programs each)
    else:
        p_target = 2
    p_target = max(1, min(p_target, triton.cdiv(max(n, 1), block_n)))
    length = triton.cdiv(triton.cdiv(max(n, 1), p_target), block_n) * block_n
    return triton.cdiv(max(n, 1), length), length


def _alloc(shape, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """Kernel outputs: uninitialised, or NaN-filled with GENOLIN_TRITON_POISON=1 so tests see unwritten elements."""
    if os.environ.get("GENOLIN_TRITON_POISON"):
        return torch.full(shape, float("nan"), device=like.device, dtype=dtype or like.dtype)
    return torch.empty(shape, device=like.device, dtype=dtype or like.dtype)


def _precision(dtype: torch.dtype) -> str:
    """IEEE float32 dots for float32 inputs (3xtf32 was measured 100x less accurate than PyTorch's float32 on relu
    gradients at 1 M tokens, where small denominators amplify rounding); tf32 for 16-bit inputs."""
    return "ieee" if dtype == torch.float32 else "tf32"


class _TritonLinearAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, projection, feature_map: str, eps: float):
        b, n, h, d = q.shape
        e = v.shape[-1]
        favor = feature_map == "favor"
        m = projection.shape[0] if favor else d
        blocks = _blocks(d, e, m)
        bm, be = blocks["BLOCK_M"], blocks["BLOCK_E"]
        p, length = _split(n, b * h, blocks["BLOCK_N"], q.device)
        w = projection.float().contiguous() if favor else q.new_empty(1, dtype=torch.float32)
        mask_t = mask.to(torch.uint8).contiguous() if mask is not None else q.new_empty(1, dtype=torch.uint8)
        # bf16 operands for the state sums of 16-bit inputs; not under the interpreter, which has no bf16 dots
        lowp = q.is_cuda and q.dtype != torch.float32 and os.environ.get("GENOLIN_TRITON_LOWP", "1") != "0"
        common = dict(FMAP=FMAPS[feature_map], PRECISION=_precision(q.dtype), LOWP=lowp,
                      num_warps=_num_warps(blocks), **blocks)
        if os.environ.get("GENOLIN_TRITON_STAGES"):  # software-pipelining depth of the token loops (tuning)
            common["num_stages"] = int(os.environ["GENOLIN_TRITON_STAGES"])
        scales = (d ** -0.25, 1.0 / math.sqrt(m))
        sp = _alloc((p, b * h, bm, be), q, torch.float32)
        zp = _alloc((p, b * h, bm), q, torch.float32)
        mp = _alloc((p, b * h), q, torch.float32)
        _state_kernel[(p, b * h)](
            k, v, mask_t, w, sp, zp, mp, n, length, h, d, e, m,
            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
            mask_t.stride(0) if mask is not None else 0, *scales, HAS_MASK=mask is not None, **common)
        m_k = mp.amax(dim=0)  # (B*H,)
        factor = torch.exp(mp - m_k)  # 1 for non-FAVOR maps (every m_p is the same constant)
        S = (sp * factor[..., None, None]).sum(dim=0).contiguous()
        z = (zp * factor[..., None]).sum(dim=0).contiguous()
        o = _alloc((b, n, h, e), v)
        _output_kernel[(p, b * h)](
            q, w, S, z, m_k, o, n, length, h, d, e, m,
            q.stride(0), q.stride(1), q.stride(2), o.stride(0), o.stride(1), o.stride(2),
            *scales, eps, **common)
        ctx.save_for_backward(q, k, v, mask_t, w, S, z, m_k)
        ctx.meta = (feature_map, eps, mask is not None, p, length, blocks, common, scales)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, mask_t, w, S, z, m_k = ctx.saved_tensors
        feature_map, eps, has_mask, p, length, blocks, common, scales = ctx.meta
        b, n, h, d = q.shape
        e = v.shape[-1]
        m = w.shape[0] if feature_map == "favor" else d
        bm, be = blocks["BLOCK_M"], blocks["BLOCK_E"]
        do = do.contiguous() if do.stride(-1) != 1 else do
        dq, dk, dv = _alloc(q.shape, q), _alloc(k.shape, k), _alloc(v.shape, v)
        dsp = _alloc((p, b * h, bm, be), q, torch.float32)
        dzp = _alloc((p, b * h, bm), q, torch.float32)
        _query_grad_kernel[(p, b * h)](
            q, do, w, S, z, m_k, dq, dsp, dzp, n, length, h, d, e, m,
            q.stride(0), q.stride(1), q.stride(2), do.stride(0), do.stride(1), do.stride(2),
            dq.stride(0), dq.stride(1), dq.stride(2), *scales, eps, **common)
        dS = dsp.sum(dim=0).contiguous()
        dz = dzp.sum(dim=0).contiguous()
        _key_grad_kernel[(p, b * h)](
            k, v, mask_t, w, dS, dz, m_k, dk, dv, n, length, h, d, e, m,
            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
            mask_t.stride(0) if has_mask else 0,
            dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1), dv.stride(2),
            *scales, HAS_MASK=has_mask, **common)
        return dq, dk, dv, None, None, None, None


def triton_linear_attention(q, k, v, *, feature_map="elu", projection=None, key_padding_mask=None, eps=1e-6):
    """Bidirectional linear attention through the fused kernels; see the module docstring."""
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    return _TritonLinearAttention.apply(q, k, v, key_padding_mask, projection, feature_map, eps)
