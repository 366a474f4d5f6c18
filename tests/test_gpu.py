"""GPU-only checks (skipped without CUDA): the reference op and the encoder on a CUDA device at long N,
against float64 on the same inputs."""

from __future__ import annotations

import pytest
import torch

from genolin.model import Encoder, EncoderConfig
from genolin.ops import FEATURE_MAPS, favor_projection, linear_attention

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

TOL = {torch.bfloat16: 2e-2, torch.float16: 2e-2, torch.float32: 1e-4}


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("fm", FEATURE_MAPS)
@pytest.mark.parametrize("n", [100_003, 1_000_000])
def test_op_on_cuda_long_sequences(dtype, fm, n):
    g = torch.Generator(device="cuda").manual_seed(n)
    q, k = (torch.randn(1, n, 8, 64, device="cuda", generator=g).mul(0.5).to(dtype) for _ in range(2))
    v = torch.randn(1, n, 8, 64, device="cuda", generator=g).to(dtype)
    mask = torch.ones(1, n, dtype=torch.bool, device="cuda")
    mask[0, -1000:] = False
    w = favor_projection(128, 64, seed=1, device="cuda") if fm == "favor" else None
    out = torch.full_like(v, float("nan"))
    out.copy_(linear_attention(q, k, v, feature_map=fm, projection=w, key_padding_mask=mask, chunk_size=65536))
    ref = linear_attention(q.double(), k.double(), v.double(), feature_map=fm,
                           projection=None if w is None else w.double(), key_padding_mask=mask)
    assert torch.isfinite(out).all() and rel(out, ref) < TOL[dtype]


@pytest.mark.parametrize("fm", FEATURE_MAPS)
def test_causal_on_cuda(fm):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k = (torch.randn(2, 50_001, 4, 32, device="cuda", generator=g).mul(0.5).bfloat16() for _ in range(2))
    v = torch.randn(2, 50_001, 4, 32, device="cuda", generator=g).bfloat16()
    w = favor_projection(64, 32, seed=2, device="cuda") if fm == "favor" else None
    out = linear_attention(q, k, v, feature_map=fm, projection=w, causal=True, chunk_size=256)
    ref = linear_attention(q.double(), k.double(), v.double(), feature_map=fm,
                           projection=None if w is None else w.double(), causal=True, chunk_size=256)
    assert torch.isfinite(out).all() and rel(out, ref) < 2e-2


@pytest.mark.parametrize("mixer", ["linear", "favor", "hybrid"])
def test_encoder_streaming_on_cuda(mixer):
    torch.manual_seed(0)
    cfg = EncoderConfig(d_model=128, n_layers=2, n_heads=4, mixer=mixer, chunk_size=4096, track_channels=2)
    model = Encoder(cfg).cuda().eval()
    ids = torch.randint(5, cfg.vocab_size, (2, 20_000), device="cuda")
    ids[1, 15_000:] = 0
    with torch.no_grad():
        streamed = model(ids)
        plain = model(ids, stream=False)
    real = ids != 0
    assert torch.isfinite(streamed.track).all()
    assert rel(streamed.hidden[real], plain.hidden[real]) < 1e-4
