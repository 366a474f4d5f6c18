"""genolin.ops against the explicit quadratic formula: every feature map, causal and not, padding, chunking,
gradients, FAVOR+ accuracy, half precision at N = 100,000."""

from __future__ import annotations

import math

import pytest
import torch

from genolin.ops import (
    FEATURE_MAPS,
    accumulate_state,
    by_sequence_linear_attention,
    causal_linear_attention,
    favor_projection,
    linear_attention,
    linear_attention_step,
    naive_linear_attention,
    query_state,
    softmax_attention,
)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative RMS error of a against b."""
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


def inputs(b=2, n=37, h=3, d=8, e=5, *, seed=0, dtype=torch.float64, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(b, n, h, d, generator=g, dtype=torch.float64) * scale for _ in range(2))
    v = torch.randn(b, n, h, e, generator=g, dtype=torch.float64)
    return q.to(dtype), k.to(dtype), v.to(dtype)


def projection_for(fm, d, m=16, dtype=torch.float64):
    return favor_projection(m, d, seed=7, dtype=dtype) if fm == "favor" else None


def padding_mask(b, n):
    mask = torch.ones(b, n, dtype=torch.bool)
    mask[0, n - n // 3:] = False  # first sequence padded at its end
    return mask


@pytest.mark.parametrize("fm", FEATURE_MAPS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_op_equals_quadratic_formula(fm, causal, padded):
    q, k, v = inputs(n=37, d=9, e=5)
    w = projection_for(fm, 9)
    mask = padding_mask(2, 37) if padded else None
    ref = naive_linear_attention(q, k, v, feature_map=fm, projection=w, key_padding_mask=mask, causal=causal)
    for chunk in (None, 1, 6, 37, 100):
        o = linear_attention(q, k, v, feature_map=fm, projection=w, key_padding_mask=mask, causal=causal,
                             chunk_size=chunk, backend="reference")
        assert o.dtype == v.dtype and o.shape == v.shape
        assert rel(o, ref) < 1e-12, (chunk, rel(o, ref))


@pytest.mark.parametrize("fm", FEATURE_MAPS)
@pytest.mark.parametrize("causal", [False, True])
def test_padded_batch_equals_each_sequence_alone(fm, causal):
    q, k, v = inputs(b=3, n=29, d=6, e=4, seed=3)
    w = projection_for(fm, 6)
    lengths = [29, 17, 1]
    mask = torch.arange(29)[None, :] < torch.tensor(lengths)[:, None]
    batch = linear_attention(q, k, v, feature_map=fm, projection=w, key_padding_mask=mask, causal=causal,
                             chunk_size=8)
    for i, n in enumerate(lengths):
        alone = linear_attention(q[i:i + 1, :n], k[i:i + 1, :n], v[i:i + 1, :n], feature_map=fm, projection=w,
                                 causal=causal)
        assert rel(batch[i:i + 1, :n], alone) < 1e-12


ELEMENTWISE_MAPS = [fm for fm in FEATURE_MAPS if fm != "favor"]


@pytest.mark.parametrize("fm", ELEMENTWISE_MAPS)
@pytest.mark.parametrize("padded", [False, True])
def test_by_sequence_path_equals_formula_forward_and_backward(fm, padded):
    """The CPU path (one sequence at a time, strided head batches) against the quadratic formula in float64:
    outputs and the gradients of q, k, v, odd sizes, q/k/v as the strided slices of one projection that the
    model passes (the path allocates its outputs: no buffer to poison)."""
    b, n, h, d = 3, 41, 3, 7
    g = torch.Generator().manual_seed(11)
    qkv = torch.randn(b, n, 3, h, d, generator=g, dtype=torch.float64)
    mask = padding_mask(b, n) if padded else None
    grads = {}
    for name in ("fast", "naive"):
        leaf = qkv.clone().requires_grad_()
        q, k, v = leaf.unbind(2)  # strided views, as Mixer._qkv gives them
        fn = by_sequence_linear_attention if name == "fast" else naive_linear_attention
        o = fn(q, k, v, feature_map=fm, key_padding_mask=mask)
        weight = torch.randn(o.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
        (o * weight).sum().backward()
        grads[name] = (o.detach(), leaf.grad.clone())
    (o_fast, g_fast), (o_ref, g_ref) = grads["fast"], grads["naive"]
    assert o_fast.shape == (b, n, h, d) and o_fast.dtype == torch.float64
    assert torch.isfinite(o_fast).all() and torch.isfinite(g_fast).all()
    assert rel(o_fast, o_ref) < 1e-12
    assert rel(g_fast, g_ref) < 1e-10
    if padded:  # padded keys get no gradient; padded queries still get outputs
        assert g_fast[0, n - n // 3:, 1:].abs().max() == 0


@pytest.mark.parametrize("fm", ELEMENTWISE_MAPS)
def test_elementwise_features_without_autograd_match_with_and_leave_input(fm):
    from genolin.ops import elementwise_features

    for dtype, atol in ((torch.float64, 1e-15), (torch.float32, 1e-7)):
        qkv = torch.randn(3, 11, 3, 2, 5, dtype=dtype) * 4  # q as the projections give it: a strided view
        qkv[0, :6, 0, 0, 0] = torch.tensor([0.0, -0.0, -100.0, 50.0, float("inf"), float("-inf")], dtype=dtype)
        x = qkv[:, :, 0]
        kept = x.clone()
        want = elementwise_features(x, fm)
        with torch.no_grad():
            got = elementwise_features(x, fm)
        assert torch.equal(x, kept)
        if fm != "elu":  # ("exp" of a row holding inf is NaN either way)
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        else:  # exp(min(x, 0)) + max(x, 0) against elu(x) + 1: expm1's + 1 rounds, exp does not
            assert torch.allclose(got, want, rtol=0, atol=atol) and torch.equal(got.isinf(), want.isinf())
            assert torch.equal(got[x > 0], want[x > 0]) and got[0, 2, 0, 0] == torch.exp(x[0, 2, 0, 0])


def test_by_sequence_path_is_the_cpu_choice_for_long_sequences(monkeypatch):
    """linear_attention on a CPU takes the by-sequence path for bidirectional elementwise attention over sequences
    of BY_SEQUENCE_MIN_TOKENS or more that need no chunking, and equals the reference there (float32 too)."""
    import genolin.ops.linear_attn as la

    calls = []
    real = la.by_sequence_linear_attention
    monkeypatch.setattr(la, "by_sequence_linear_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.delenv("GENOLIN_ATTENTION_BACKEND", raising=False)
    n = la.BY_SEQUENCE_MIN_TOKENS + 3
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        q, k, v = inputs(b=2, n=n, h=2, d=5, e=3, dtype=dtype)
        mask = padding_mask(2, n)
        o = la.linear_attention(q, k, v, key_padding_mask=mask, chunk_size=n)
        ref = la.linear_attention(q, k, v, key_padding_mask=mask, chunk_size=n, backend="reference")
        assert o.dtype == dtype and rel(o, ref) < tol
    assert len(calls) == 2
    q, k, v = inputs(b=2, n=n, h=2, d=5, e=3)
    la.linear_attention(q, k, v, chunk_size=64)  # chunked: the reference
    la.linear_attention(q, k, v, causal=True)  # causal: the reference
    la.linear_attention(*inputs(n=n - 10), chunk_size=None)  # short: the reference
    assert len(calls) == 2


@pytest.mark.parametrize("fm", FEATURE_MAPS)
@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck(fm, causal):
    q, k, v = inputs(b=2, n=7, h=2, d=3, e=2, seed=5)
    w = projection_for(fm, 3, m=5)
    mask = padding_mask(2, 7)
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))

    def f(q, k, v):
        return linear_attention(q, k, v, feature_map=fm, projection=w, key_padding_mask=mask, causal=causal,
                                chunk_size=3, eps=1e-3)

    assert torch.autograd.gradcheck(f, (q, k, v), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("fm", FEATURE_MAPS)
def test_key_gradient_through_denominator_with_zero_values(fm):
    """v = 0 makes the numerator vanish; dL/dk then flows only through the denominator (and must be right)."""
    q, k, _ = inputs(b=1, n=6, h=2, d=3, e=2, seed=9)
    v = torch.zeros(1, 6, 2, 2, dtype=torch.float64)
    w = projection_for(fm, 3, m=4)
    k = k.clone().requires_grad_()
    v = v.requires_grad_()
    # With v = 0 the output is 0 whatever k: check the gradient of a loss that weights o by a fixed tensor,
    # against the quadratic formula's gradient (both are nonzero through dv and zero through dk).
    weights = torch.randn(1, 6, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for causal in (False, True):
        out = linear_attention(q, k, v, feature_map=fm, projection=w, causal=causal, chunk_size=4)
        ref = naive_linear_attention(q, k, v, feature_map=fm, projection=w, causal=causal)
        gk, gv = torch.autograd.grad((out * weights).sum(), (k, v))
        rk, rv = torch.autograd.grad((ref * weights).sum(), (k, v))
        assert torch.equal(gk, torch.zeros_like(gk)) and torch.equal(rk, torch.zeros_like(rk))
        assert rel(gv, rv) < 1e-12
    # The denominator's k-gradient shows once values are constant: o = c * den/(den + eps).
    v_const = torch.ones(1, 6, 2, 2, dtype=torch.float64)
    for causal in (False, True):
        out = linear_attention(q, k, v_const, feature_map=fm, projection=w, causal=causal, chunk_size=4, eps=0.5)
        ref = naive_linear_attention(q, k, v_const, feature_map=fm, projection=w, causal=causal, eps=0.5)
        (gk,) = torch.autograd.grad(out.sum(), k)
        (rk,) = torch.autograd.grad(ref.sum(), k)
        assert rk.abs().max() > 1e-6 and rel(gk, rk) < 1e-10
    assert torch.autograd.gradcheck(
        lambda k: linear_attention(q, k, v_const, feature_map=fm, projection=w, eps=0.5), (k,), eps=1e-6, atol=1e-7)


def test_favor_error_to_softmax_falls_with_more_features():
    q, k, v = inputs(b=1, n=64, h=4, d=16, e=16, seed=11, scale=0.5)
    exact = softmax_attention(q, k, v)
    errors = {}
    for m in (16, 64, 256):
        runs = [rel(linear_attention(q, k, v, feature_map="favor", projection=favor_projection(m, 16, seed=s,
                                     dtype=torch.float64)), exact) for s in range(8)]
        errors[m] = sum(runs) / len(runs)
    assert errors[16] > errors[64] > errors[256], errors
    assert errors[256] < 0.5 * errors[16], errors


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fm", FEATURE_MAPS)
def test_half_precision_long_sequence(dtype, fm):
    q, k, v = inputs(b=1, n=100_000, h=2, d=16, e=16, seed=2, dtype=dtype)
    w = projection_for(fm, 16, m=32, dtype=torch.float32)
    o = linear_attention(q, k, v, feature_map=fm, projection=w, chunk_size=8192)
    assert o.dtype == dtype and torch.isfinite(o).all()
    w64 = None if w is None else w.double()
    ref = linear_attention(q.double(), k.double(), v.double(), feature_map=fm, projection=w64, chunk_size=8192)
    assert rel(o, ref) < 2e-2
    oc = linear_attention(q[:, :4096], k[:, :4096], v[:, :4096], feature_map=fm, projection=w, causal=True)
    refc = linear_attention(q[:, :4096].double(), k[:, :4096].double(), v[:, :4096].double(), feature_map=fm,
                            projection=w64, causal=True)
    assert torch.isfinite(oc).all() and rel(oc, refc) < 2e-2


def test_relu_rows_of_zeros_are_finite():
    q, k, v = inputs(b=1, n=10, h=1, d=4, e=3)
    q[0, :5] = -1.0  # phi(q) = 0 for these rows: output 0 / eps
    k[0, 7:] = -2.0
    for causal in (False, True):
        o = linear_attention(q, k, v, feature_map="relu", causal=causal)
        assert torch.isfinite(o).all() and torch.equal(o[0, :5], torch.zeros_like(o[0, :5]))


def test_all_keys_padded_gives_zeros_not_nan():
    q, k, v = inputs(b=1, n=5, h=1, d=4, e=3)
    mask = torch.zeros(1, 5, dtype=torch.bool)
    for fm in FEATURE_MAPS:
        o = linear_attention(q, k, v, feature_map=fm, projection=projection_for(fm, 4), key_padding_mask=mask)
        assert torch.equal(o, torch.zeros_like(o))


def test_favor_large_norms_stay_finite_and_exact():
    """Logits near 200 overflow exp() without the stabilisers; with them the output equals the formula."""
    q, k, v = inputs(b=1, n=40, h=2, d=8, e=3, seed=4, scale=6.0)
    w = favor_projection(32, 8, seed=0, dtype=torch.float64)
    o = linear_attention(q, k, v, feature_map="favor", projection=w, chunk_size=7)
    o32 = linear_attention(q.float(), k.float(), v.float(), feature_map="favor", projection=w.float(), chunk_size=7)
    ref = naive_linear_attention(q, k, v, feature_map="favor", projection=w)  # float64 has the range
    assert torch.isfinite(o32).all() and rel(o, ref) < 1e-10 and rel(o32, ref) < 1e-4


@pytest.mark.parametrize("fm", FEATURE_MAPS)
def test_step_api_equals_parallel_causal(fm):
    q, k, v = inputs(b=2, n=11, d=5, e=4, seed=8)
    w = projection_for(fm, 5)
    parallel = linear_attention(q, k, v, feature_map=fm, projection=w, causal=True)
    state, outs = None, []
    for t in range(11):
        o, state = linear_attention_step(q[:, t], k[:, t], v[:, t], state, feature_map=fm, projection=w)
        outs.append(o)
    assert rel(torch.stack(outs, dim=1), parallel) < 1e-12
    # and a chunked continuation: first 4 tokens, then the rest from the state
    o1, st = causal_linear_attention(q[:, :4], k[:, :4], v[:, :4], feature_map=fm, projection=w)
    o2, _ = causal_linear_attention(q[:, 4:], k[:, 4:], v[:, 4:], feature_map=fm, projection=w, state=st,
                                    chunk_size=3)
    assert rel(torch.cat([o1, o2], dim=1), parallel) < 1e-12


def test_streaming_state_equals_op():
    q, k, v = inputs(n=50, d=6, e=3)
    w = favor_projection(12, 6, seed=3, dtype=torch.float64)
    state = None
    for s in range(0, 50, 13):
        state = accumulate_state(k[:, s:s + 13], v[:, s:s + 13], feature_map="favor", projection=w, state=state)
    o = query_state(q, state, feature_map="favor", projection=w, chunk_size=9)
    assert rel(o, linear_attention(q, k, v, feature_map="favor", projection=w)) < 1e-12


def test_softmax_attention_matches_formula():
    q, k, v = inputs(b=2, n=9, h=2, d=4, e=3)
    mask = padding_mask(2, 9)
    for causal in (False, True):
        scores = torch.einsum("bihd,bjhd->bhij", q, k) / 2.0
        allowed = mask[:, None, None, :] & (torch.ones(9, 9, dtype=torch.bool).tril() if causal else True)
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        ref = torch.einsum("bhij,bjhe->bihe", weights, v)
        assert rel(softmax_attention(q, k, v, key_padding_mask=mask, causal=causal), ref) < 1e-12


def test_favor_projection_properties():
    w = favor_projection(40, 16, seed=5, dtype=torch.float64)
    assert w.shape == (40, 16)
    assert torch.equal(w, favor_projection(40, 16, seed=5, dtype=torch.float64))
    assert torch.equal(w, favor_projection(40, 16, generator=torch.Generator().manual_seed(5), dtype=torch.float64))
    assert not torch.equal(w, favor_projection(40, 16, seed=6, dtype=torch.float64))
    directions = w / w.norm(dim=1, keepdim=True)
    for block in (directions[:16], directions[16:32]):
        assert torch.allclose(block @ block.T, torch.eye(16, dtype=torch.float64), atol=1e-12)
    norms = favor_projection(4096, 16, seed=1, dtype=torch.float64).norm(dim=1)
    # chi with 16 degrees of freedom: mean sqrt(2) Gamma(8.5)/Gamma(8) ~ 3.9598
    expected = math.sqrt(2) * math.exp(math.lgamma(8.5) - math.lgamma(8))
    assert abs(norms.mean().item() - expected) < 0.05
    with pytest.raises(ValueError):
        favor_projection(4, 4)


def test_argument_checks():
    q, k, v = inputs(b=1, n=4, h=1, d=4, e=2)
    with pytest.raises(ValueError, match="unknown feature map"):
        linear_attention(q, k, v, feature_map="cosine")
    with pytest.raises(ValueError, match="needs projection"):
        linear_attention(q, k, v, feature_map="favor")
    with pytest.raises(ValueError, match="key_padding_mask"):
        linear_attention(q, k, v, key_padding_mask=torch.ones(1, 5, dtype=torch.bool))
    with pytest.raises(NotImplementedError, match="bidirectional"):
        linear_attention(q, k, v, causal=True, backend="triton")
    with pytest.raises(ValueError, match="unknown backend"):
        linear_attention(q, k, v, backend="cuda")


@pytest.mark.parametrize("fm", FEATURE_MAPS)
@pytest.mark.parametrize("causal", [False, True])
def test_chunking_bounds_the_feature_tensors(fm, causal, monkeypatch):
    """With chunk_size C no feature tensor covers more than C tokens (so (N, H, M) is never whole)."""
    import genolin.ops.linear_attn as la

    seen = []
    for name in ("elementwise_features", "favor_logits"):
        original = getattr(la, name)
        monkeypatch.setattr(la, name, lambda x, *a, _f=original, **kw: (seen.append(x.shape[1]), _f(x, *a, **kw))[1])
    q, k, v = inputs(b=1, n=100, d=4, e=3)
    linear_attention(q, k, v, feature_map=fm, projection=projection_for(fm, 4), causal=causal, chunk_size=16)
    assert seen and max(seen) <= 16


def test_fla_backend_is_causal_cuda_and_elementwise_only():
    from genolin.ops import causal_linear_attention

    q = torch.randn(1, 8, 2, 4)
    with pytest.raises(ValueError, match="fla backend is for causal"):
        linear_attention(q, q, q, backend="fla")
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        linear_attention(q, q, q, causal=True, backend="fla")
    with pytest.raises(ValueError, match="FAVOR"):
        causal_linear_attention(q, q, q, feature_map="favor", projection=torch.randn(8, 4), backend="fla")
    with pytest.raises(ValueError, match="'reference' or 'fla'"):
        causal_linear_attention(q, q, q, backend="triton")
    # without CUDA "auto" is the PyTorch form
    auto, _ = causal_linear_attention(q, q, q)
    ref, _ = causal_linear_attention(q, q, q, backend="reference")
    assert torch.equal(auto, ref)
