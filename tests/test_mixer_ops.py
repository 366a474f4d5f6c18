"""The attention family beyond linear attention: GLA and the (gated) delta rule against their token-by-token
definitions (forward and backward, float64, odd sizes, chunk sizes that do not divide N, initial states), the
bidirectional scan and its padding, and Linformer / FNet / Synthesizer against their formulas written out."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from genolin.ops import (
    bidirectional_scan,
    delta_rule,
    delta_rule_chunked,
    delta_rule_recurrent,
    fnet_mixing,
    gla,
    gla_chunked,
    gla_recurrent,
    linformer_attention,
    synthesizer_attention,
)

TOL = 1e-10  # float64, relative


def rel(a, b):
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def inputs(b=2, n=37, h=3, kd=5, vd=7, seed=0, gated="scalar"):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(b, n, h, kd, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(b, n, h, vd, generator=g, dtype=torch.float64)
    beta = torch.rand(b, n, h, generator=g, dtype=torch.float64)
    if gated == "scalar":
        decay = -torch.rand(b, n, h, generator=g, dtype=torch.float64) * 0.7
    else:  # per key dimension, as the gla mixer makes them (clamped at -4)
        decay = (F.logsigmoid(3 * torch.randn(b, n, h, kd, generator=g, dtype=torch.float64)) / 4).clamp(min=-4)
    s0 = torch.randn(b, h, kd, vd, generator=g, dtype=torch.float64)
    return q, k, v, beta, decay, s0


def grads(fn, tensors):
    tensors = [t.detach().clone().requires_grad_() for t in tensors]
    out, state = fn(*tensors)
    w = torch.Generator().manual_seed(9)
    (out * torch.randn(out.shape, generator=w, dtype=out.dtype)).sum().add(state.square().sum()).backward()
    return out.detach(), state.detach(), [t.grad for t in tensors]


@pytest.mark.parametrize("n,chunk", [(1, 16), (37, 16), (37, 5), (64, 16), (101, 7)])
def test_gla_chunked_equals_recurrent(n, chunk):
    q, k, v, _, g, s0 = inputs(n=n, gated="key")
    ref = grads(lambda *t: gla_recurrent(*t[:4], scale=0.4, initial_state=t[4]), [q, k, v, g, s0])
    got = grads(lambda *t: gla_chunked(*t[:4], scale=0.4, chunk_size=chunk, initial_state=t[4]), [q, k, v, g, s0])
    assert rel(got[0], ref[0]) < TOL and rel(got[1], ref[1]) < TOL
    for a, b in zip(got[2], ref[2], strict=True):
        assert rel(a, b) < TOL


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("n,chunk", [(1, 64), (37, 64), (37, 5), (64, 16), (101, 7)])
def test_delta_rule_chunked_equals_recurrent(gated, n, chunk):
    q, k, v, beta, g, s0 = inputs(n=n)
    k = F.normalize(k, dim=-1)
    if gated:
        def run(fn, **kw):
            return grads(lambda *t: fn(*t[:5], scale=0.3, initial_state=t[5], **kw), [q, k, v, beta, g, s0])
    else:
        def run(fn, **kw):
            return grads(lambda *t: fn(*t[:4], None, scale=0.3, initial_state=t[4], **kw), [q, k, v, beta, s0])
    ref, got = run(delta_rule_recurrent), run(delta_rule_chunked, chunk_size=chunk)
    assert rel(got[0], ref[0]) < TOL and rel(got[1], ref[1]) < TOL
    for a, b in zip(got[2], ref[2], strict=True):
        assert rel(a, b) < TOL


def test_delta_rule_corrects_the_state_towards_the_value():
    """The delta rule's point: after writing (k, v) with beta = 1, the state maps k to v exactly."""
    q, k, v, _, _, _ = inputs(b=1, n=6, h=1, kd=4, vd=3)
    k = F.normalize(k, dim=-1)
    beta = torch.ones(1, 6, 1, dtype=torch.float64)
    _, state = delta_rule_recurrent(q, k, v, beta, scale=1.0)
    assert torch.allclose(torch.einsum("bhkv,bk->bv", state, k[:, -1, 0]), v[:, -1, 0], atol=1e-12)


@pytest.mark.parametrize("op", ["gla", "deltanet", "gated_deltanet"])
def test_bidirectional_scan_is_both_directions_and_ignores_padding(op):
    q, k, v, beta, g, _ = inputs(b=3, n=29, gated="key" if op == "gla" else "scalar")
    if op == "gla":
        def scan(q, k, v, g):
            return gla(q, k, v, g, scale=0.5, backend="reference")

        def recurrent(q, k, v, g):
            return gla_recurrent(q, k, v, g, scale=0.5)[0]
        gates = {"g": g}
    else:
        k = F.normalize(k, dim=-1)
        decay = g if op == "gated_deltanet" else None

        def scan(q, k, v, beta, g):
            return delta_rule(q, k, v, beta, g, scale=0.5, backend="reference")

        def recurrent(q, k, v, beta, g):
            return delta_rule_recurrent(q, k, v, beta, g, scale=0.5)[0]
        gates = {"beta": beta, "g": decay}
    mask = torch.ones(3, 29, dtype=torch.bool)
    mask[1, 20:] = False
    mask[2, 5:] = False
    out = torch.full_like(v, float("nan"))
    out.copy_(bidirectional_scan(scan, q, k, v, mask=mask, **gates))
    for i, n in enumerate((29, 20, 5)):
        one = {name: None if x is None else x[i:i + 1, :n] for name, x in gates.items()}
        args = (q[i:i + 1, :n], k[i:i + 1, :n], v[i:i + 1, :n])
        flipped = {name: None if x is None else x.flip(1) for name, x in one.items()}
        want = recurrent(*args, **one) + recurrent(*(a.flip(1) for a in args), **flipped).flip(1)
        assert rel(out[i, :n], want[0]) < TOL
    causal = bidirectional_scan(scan, q, k, v, mask=mask, causal=True, **gates)
    assert rel(causal[0], recurrent(q[:1], k[:1], v[:1], **{n: None if x is None else x[:1]
                                                            for n, x in gates.items()})[0]) < TOL


def test_backend_choice():
    q, k, v, _, g, _ = inputs(gated="key")
    with pytest.raises(ValueError, match="fla backend needs CUDA"):
        gla(q, k, v, g, backend="fla")
    with pytest.raises(ValueError, match="unknown backend"):
        gla(q, k, v, g, backend="cuda")


def test_linformer_equals_formula_and_ignores_padding():
    g = torch.Generator().manual_seed(3)
    b, n, h, d, p, L = 3, 23, 2, 4, 5, 40
    q, k, v = (torch.randn(b, n, h, d, generator=g, dtype=torch.float64) for _ in range(3))
    e, f = (torch.randn(p, L, generator=g, dtype=torch.float64) for _ in range(2))
    mask = torch.ones(b, n, dtype=torch.bool)
    mask[1, 15:] = False
    mask[2, 1:] = False
    out = linformer_attention(q, k, v, e, f, key_padding_mask=mask)
    for i, m in enumerate((23, 15, 1)):
        kp = torch.einsum("pn,nhd->phd", e[:, :m], k[i, :m]) / m ** 0.5
        vp = torch.einsum("pn,nhd->phd", f[:, :m], v[i, :m]) / m ** 0.5
        weights = torch.softmax(torch.einsum("nhd,phd->hnp", q[i, :m], kp) / d ** 0.5, -1)
        want = torch.einsum("hnp,phd->nhd", weights, vp)
        assert rel(out[i, :m], want) < TOL
        assert rel(linformer_attention(q[i:i + 1, :m], k[i:i + 1, :m], v[i:i + 1, :m], e, f)[0], want) < TOL
    with pytest.raises(ValueError, match="model.max_len"):
        linformer_attention(q, k, v, e[:, :20], f[:, :20])


def test_fnet_equals_numpy_fft_per_sequence():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(4, 19, 6, generator=g, dtype=torch.float64)
    mask = torch.ones(4, 19, dtype=torch.bool)
    mask[1, 11:] = False
    mask[2, 3:] = False
    mask[3, 11:] = False
    out = fnet_mixing(x, mask)
    for i, n in enumerate((19, 11, 3, 11)):
        want = np.fft.fft2(x[i, :n].numpy(), norm="ortho").real
        assert np.allclose(out[i, :n].numpy(), want, atol=1e-12)
        assert torch.equal(out[i, n:], torch.zeros_like(out[i, n:]))
    assert np.allclose(fnet_mixing(x).numpy(), np.fft.fft2(x.numpy(), axes=(1, 2), norm="ortho").real, atol=1e-12)


def test_synthesizer_softmax_over_real_keys():
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(2, 3, 9, 9, generator=g, dtype=torch.float64)
    v = torch.randn(2, 9, 3, 4, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, 6:] = False
    out = synthesizer_attention(logits, v, key_padding_mask=mask)
    for i, n in enumerate((9, 6)):
        want = torch.einsum("hij,jhe->ihe", torch.softmax(logits[i, :, :, :n], -1), v[i, :n])
        assert rel(out[i], want) < TOL
