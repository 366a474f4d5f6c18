"""The norm + convolution kernel (genolin.ops.norm_conv) against its float64 reference: odd lengths and widths,
kernels of 3 to 7 taps (asymmetric padding too), padding masks, outputs poisoned with NaN; and the encoder's
inference with the kernel against the modules' own path. On a CPU the kernel runs under TRITON_INTERPRET=1."""

from __future__ import annotations

import os

import pytest
import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # conftest sets it too: it must precede the import of triton
pytest.importorskip("triton", reason="triton is not installed (the gpu extra; the dev extra includes it)")

import genolin.model as model_module  # noqa: E402
from genolin.model import Encoder, EncoderConfig  # noqa: E402
from genolin.ops import norm_conv, norm_conv_reference  # noqa: E402

DEVICE = "cuda" if ON_GPU else "cpu"
TOL = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 1e-2}


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.fixture(autouse=True)
def _poison(monkeypatch):
    monkeypatch.setenv("GENOLIN_TRITON_POISON", "1")  # outputs start as NaN: every element must be written


def inputs(b, n, d, k, dtype, seed=0):
    g = torch.Generator().manual_seed(seed + n * 31 + d)
    x = torch.randn(b, n, d, generator=g) * 3
    gain = torch.randn(d, generator=g)
    w = torch.randn(d, 1, k, generator=g)
    bias = torch.randn(d, generator=g)
    mask = torch.ones(b, n, dtype=torch.bool)
    mask[-1, n - n // 3:] = False
    return [t.to(dtype) if t.is_floating_point() else t for t in (x, gain, w, bias)] + [mask]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("n", "d", "k", "left"), [(1, 16, 7, 3), (5, 48, 7, 3), (37, 24, 3, 1), (70, 64, 4, 3),
                                                   (33, 256, 7, 3), (19, 40, 5, 0)])
@pytest.mark.parametrize("masked", [True, False])
def test_kernel_equals_the_float64_formula(dtype, n, d, k, left, masked):
    x, gain, w, bias, mask = inputs(3, n, d, k, dtype)
    mask = mask if masked else None
    with torch.no_grad():
        out = norm_conv(x.to(DEVICE), gain.to(DEVICE), 1e-6, w.to(DEVICE), bias.to(DEVICE), left,
                        None if mask is None else mask.to(DEVICE), backend="triton")
    ref = norm_conv_reference(x.double(), gain.double(), 1e-6, w.double(), bias.double(), left, mask)
    assert out.dtype == dtype and out.shape == (3, n, d)
    assert torch.isfinite(out).all(), "NaN left: an element was not written"
    assert rel(out.cpu(), ref) <= TOL[dtype]


def test_out_dtype_and_no_bias():
    x, gain, w, _, mask = inputs(2, 21, 32, 7, torch.float32)
    with torch.no_grad():
        out = norm_conv(x.to(DEVICE), gain.to(DEVICE), 1e-5, w.to(DEVICE), None, 3, mask.to(DEVICE),
                        torch.bfloat16, backend="triton")
    ref = norm_conv_reference(x.double(), gain.double(), 1e-5, w.double(), None, 3, mask)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all() and rel(out.cpu(), ref) <= TOL[torch.bfloat16]


def test_the_kernel_refuses_gradients():
    x, gain, w, bias, _ = inputs(1, 9, 16, 7, torch.float32)
    with pytest.raises(NotImplementedError, match="no backward"):
        norm_conv(x.requires_grad_(), gain, 1e-6, w, bias, 3, backend="triton")
    with pytest.raises(ValueError, match="backend"):
        norm_conv(x, gain, 1e-6, w, bias, 3, backend="fast")


@pytest.mark.parametrize("padding", [False, True])
def test_encoder_inference_with_the_kernel_equals_the_modules(monkeypatch, padding):
    """A float64 hybrid encoder in eval: every block through the kernel (as on CUDA) against the modules' norm,
    mask and ShortConv; the same hidden states."""
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=4101, d_model=48, n_layers=2, n_heads=4, mixer="hybrid", local_window_tokens=16,
                        track_channels=2, n_classes=0)
    enc = Encoder(cfg).double().eval().to(DEVICE)
    for block in enc.blocks:  # non-trivial gains and biases
        torch.nn.init.normal_(block.norm1.weight, 1.0, 0.3)
        torch.nn.init.normal_(block.conv.conv.bias, 0.0, 0.3)
    ids = torch.randint(5, 4101, (2, 45), device=DEVICE)
    if padding:
        ids[1, 30:] = cfg.pad_id
    with torch.no_grad():
        monkeypatch.setattr(model_module, "norm_conv_applies", lambda x: False)
        want = enc(ids).hidden
        calls = []

        def applies(x):
            calls.append(x.shape)
            return not torch.is_grad_enabled()

        monkeypatch.setattr(model_module, "norm_conv_applies", applies)
        got = enc(ids).hidden
    assert len(calls) == cfg.n_layers
    assert torch.isfinite(got).all() and rel(got.cpu(), want.cpu()) <= 1e-12


def test_compiled_inference_blocks_are_one_graph_each():
    """Blocks compiled with fullgraph=True run inference (gradients off, on CUDA through the kernel) without a
    graph break: a break splits each block into several graphs, each traced again in every new process."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=4101, d_model=48, n_layers=2, n_heads=4, mixer="hybrid", local_window_tokens=16,
                        track_channels=2, n_classes=0)
    enc = Encoder(cfg).double().eval().to(DEVICE)
    ids = torch.randint(5, 4101, (2, 45), device=DEVICE)
    ids[1, 30:] = cfg.pad_id
    with torch.no_grad():
        want = enc(ids).track
        torch._dynamo.reset()
        counters.clear()
        got = enc.compile_blocks(backend="aot_eager", fullgraph=True)(ids).track
    assert not counters["graph_break"]
    assert torch.isfinite(got).all() and rel(got.cpu(), want.cpu()) <= 1e-12
