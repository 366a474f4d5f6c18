"""The fused inference kernels of a block (genolin.ops.fused: swiglu, gated_mix, add_rms_norm) against their float64
references: odd sizes, strided inputs, mixed dtypes, outputs poisoned with NaN; and the encoder's inference through
them against the modules' own path. On a CPU the kernels run under TRITON_INTERPRET=1."""

from __future__ import annotations

import os

import pytest
import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # conftest sets it too: it must precede the import of triton
pytest.importorskip("triton", reason="triton is not installed (the gpu extra; the dev extra includes it)")

import genolin.mixers.hybrid as hybrid_module  # noqa: E402
import genolin.model as model_module  # noqa: E402
from genolin.model import Encoder, EncoderConfig  # noqa: E402
from genolin.ops import (  # noqa: E402
    add_rms_norm,
    add_rms_norm_reference,
    gated_mix,
    gated_mix_reference,
    swiglu,
    swiglu_reference,
)

DEVICE = "cuda" if ON_GPU else "cpu"
TOL = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 1e-2}


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    monkeypatch.setenv("GENOLIN_TRITON_POISON", "1")  # outputs start as NaN: every element must be written


def randn(*shape, dtype=torch.float64, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed + sum(shape) * 7)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1, 1, 2), (3, 37, 22), (2, 5, 600), (1, 70, 514)])
def test_swiglu_equals_the_float64_formula(dtype, shape):
    u = randn(*shape, dtype=dtype)
    with torch.no_grad():
        out = swiglu(u.to(DEVICE))
    ref = swiglu_reference(u.double())
    assert out.dtype == dtype and out.shape == (*shape[:-1], shape[-1] // 2)
    assert torch.isfinite(out).all(), "NaN left: an element was not written"
    assert rel(out.cpu(), ref) <= TOL[dtype]


def test_swiglu_reads_a_strided_input_and_refuses_an_odd_width():
    u = randn(4, 9, 40)
    with torch.no_grad():
        out = swiglu(u[:, ::2].to(DEVICE))  # rows not adjacent
    assert rel(out.cpu(), swiglu_reference(u[:, ::2])) <= TOL[torch.float64]
    with pytest.raises(ValueError, match="even"):
        swiglu(randn(2, 3, 7).to(DEVICE))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("b", "n", "h", "e"), [(1, 1, 1, 1), (2, 37, 4, 8), (3, 19, 5, 12), (1, 130, 8, 32)])
def test_gated_mix_equals_the_float64_formula(dtype, b, n, h, e):
    z, a, c = randn(b, n, h, dtype=dtype), randn(b, n, h, e, dtype=dtype, seed=1), randn(b, n, h, e, dtype=dtype,
                                                                                          seed=2)
    with torch.no_grad():
        out = gated_mix(z.to(DEVICE), a.to(DEVICE), c.to(DEVICE))
    ref = gated_mix_reference(z.double(), a.double(), c.double())
    assert out.dtype == dtype and out.shape == (b, n, h, e) and out.is_contiguous()
    assert torch.isfinite(out).all(), "NaN left: an element was not written"
    assert rel(out.cpu(), ref) <= TOL[dtype]


def test_gated_mix_reads_strided_views_and_promotes_as_the_reference():
    """a as the local attention gives it (a transposed (B, H, N, E) tensor), b float32 with bfloat16 z and a: the
    result in float32, as the reference's type promotion gives."""
    z = randn(2, 23, 4, dtype=torch.bfloat16)
    a = randn(2, 4, 23, 16, dtype=torch.bfloat16, seed=1).transpose(1, 2)  # (B, N, H, E), not contiguous
    c = randn(2, 23, 4, 16, dtype=torch.float32, seed=2)
    with torch.no_grad():
        out = gated_mix(z.to(DEVICE), a.to(DEVICE), c.to(DEVICE))
    ref = gated_mix_reference(z, a, c)
    assert out.dtype == ref.dtype == torch.float32
    assert rel(out.cpu(), gated_mix_reference(z.double(), a.double(), c.double())) <= TOL[torch.bfloat16]
    with pytest.raises(ValueError, match="do not match"):
        gated_mix(z.to(DEVICE), a.to(DEVICE), c[:, :5].to(DEVICE))


@pytest.mark.parametrize(("xd", "yd", "od"), [(torch.float64, torch.float64, None),
                                              (torch.float32, torch.float32, None),
                                              (torch.bfloat16, torch.bfloat16, None),
                                              (torch.float32, torch.bfloat16, torch.bfloat16)])
@pytest.mark.parametrize(("b", "n", "d"), [(1, 1, 1), (2, 37, 48), (3, 11, 100), (1, 65, 256)])
def test_add_rms_norm_equals_the_float64_formula(xd, yd, od, b, n, d):
    x, y, g = randn(b, n, d, dtype=xd), randn(b, n, d, dtype=yd, seed=1), randn(d, seed=2, scale=0.5) + 1
    with torch.no_grad():
        r, h = add_rms_norm(x.to(DEVICE), y.to(DEVICE), g.to(xd).to(DEVICE), 1e-6, od)
    r_ref, h_ref = add_rms_norm_reference(x.double(), y.double(), g, 1e-6)
    want_r = torch.promote_types(xd, yd)
    assert r.dtype == want_r and h.dtype == (od or want_r) and r.shape == h.shape == (b, n, d)
    assert torch.isfinite(r).all() and torch.isfinite(h).all(), "NaN left: an element was not written"
    assert rel(r.cpu(), r_ref) <= TOL[want_r]
    assert rel(h.cpu(), h_ref) <= TOL[od or want_r]


def test_the_kernels_refuse_gradients():
    u = randn(2, 3, 8).requires_grad_()
    for call in (lambda: swiglu(u), lambda: gated_mix(u[..., 0], u, u),
                 lambda: add_rms_norm(u, u, torch.ones(8), 1e-6)):
        with pytest.raises(NotImplementedError, match="no backward"):
            call()


@pytest.mark.parametrize("padding", [False, True])
def test_encoder_inference_through_the_kernels_equals_the_modules(monkeypatch, padding):
    """A float64 hybrid encoder in eval: every block through the fused kernels (as on CUDA; norm_conv too) against
    the modules' own path; the same hidden states, each kernel called once per block."""
    import genolin.ops.fused as fused_module

    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=4101, d_model=48, n_layers=2, n_heads=4, mixer="hybrid", local_window_tokens=16,
                        track_channels=2, n_classes=0)
    enc = Encoder(cfg).double().eval().to(DEVICE)
    for block in enc.blocks:  # non-trivial gains
        torch.nn.init.normal_(block.norm2.weight, 1.0, 0.3)
    ids = torch.randint(5, 4101, (2, 45), device=DEVICE)
    if padding:
        ids[1, 30:] = cfg.pad_id
    calls = []
    for name in ("swiglu", "gated_mix", "add_rms_norm"):  # each patched where it is called (the block, the mixer)
        real = getattr(fused_module, name)
        module = hybrid_module if name == "gated_mix" else model_module
        monkeypatch.setattr(module, name, lambda *a, _f=real, _n=name, **k: (calls.append(_n), _f(*a, **k))[1])
    with torch.no_grad():
        for module in (model_module, hybrid_module):
            monkeypatch.setattr(module, "fused_applies", lambda x: False)
        want = enc(ids).hidden
        assert not calls
        for module in (model_module, hybrid_module):
            monkeypatch.setattr(module, "fused_applies", lambda x: not torch.is_grad_enabled())
        got = enc(ids).hidden
    assert sorted(calls) == sorted(["swiglu", "gated_mix", "add_rms_norm"] * cfg.n_layers)
    assert torch.isfinite(got).all() and rel(got.cpu(), want.cpu()) <= 1e-12
