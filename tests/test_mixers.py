"""The mixer registry: every kind builds by name, runs forward and backward, and behaves as its declared
properties say (streams, causal_capable, scan, length_limited, redraws); the tuples other modules import derive
from the one table."""

from __future__ import annotations

import pytest
import torch

import genolin.model as model_mod
from genolin import mixers
from genolin.mixers import MIXER_CLASSES, MIXERS, Mixer, build_mixer
from genolin.mixers.scan import ScanMixer
from genolin.model import Encoder, EncoderConfig


def config(mixer: str, **kw) -> EncoderConfig:
    base = dict(vocab_size=5 + 4**3, d_model=12, n_layers=1, n_heads=2, mixer=mixer, chunk_tokens=8,
                local_window_tokens=4, favor_features=6, track_channels=2, conv_kernel=3, max_len=32, linformer_rows=4)
    base.update(kw)
    return EncoderConfig(**base)


def encoder(cfg: EncoderConfig) -> Encoder:
    torch.manual_seed(0)
    return Encoder(cfg).double().eval()


def token_batch(n=20, lengths=(20, 13)):
    ids = torch.randint(5, 5 + 4**3, (len(lengths), n), generator=torch.Generator().manual_seed(1))
    for i, length in enumerate(lengths):
        ids[i, length:] = 0
    return ids


def test_the_table_names_each_kind_once_and_the_tuples_derive_from_it():
    assert MIXERS == ("softmax", "linear", "favor", "hybrid", "gla", "deltanet", "gated_deltanet", "linformer",
                      "fnet", "synthesizer")
    for name, cls in MIXER_CLASSES.items():
        assert issubclass(cls, Mixer) and cls.name == name
        assert cls.__module__.startswith("genolin.mixers.")
    kinds = MIXER_CLASSES.values()
    assert mixers.STREAMING_MIXERS == tuple(c.name for c in kinds if c.streams) == ("linear", "favor", "hybrid")
    assert mixers.CAUSAL_MIXERS == ("softmax", "linear", "favor", "hybrid")
    assert mixers.SCAN_MIXERS == ("gla", "deltanet", "gated_deltanet")
    assert mixers.LENGTH_LIMITED_MIXERS == ("linformer", "synthesizer")
    assert set(mixers.STREAMING_MIXERS) <= set(mixers.CAUSAL_MIXERS)  # the streaming path has its causal form
    for name in ("MIXERS", "STREAMING_MIXERS", "SCAN_MIXERS", "LENGTH_LIMITED_MIXERS", "LENGTH_LIMITED_MAX_TOKENS",
                 "Mixer"):  # the model's names are the registry's
        assert getattr(model_mod, name) is getattr(mixers, name)
    with pytest.raises(ValueError, match="mixer must be one of"):
        mixers.mixer_class("performer")


@pytest.mark.parametrize("name", MIXERS)
def test_every_kind_builds_runs_and_declares_its_properties(name):
    kind = MIXER_CLASSES[name]
    cfg = config(name)
    assert isinstance(build_mixer(cfg, 0), kind)
    m = encoder(cfg)
    assert type(m.blocks[0].mixer) is kind and m.mixer_kind is kind
    ids = token_batch()  # 20 tokens > chunk_tokens 8
    out = m(ids)
    (out.logits.sum() + out.track.pow(2).sum()).backward()
    assert torch.isfinite(out.hidden).all()
    assert all(p.grad is not None for p in m.parameters())  # DDP needs every parameter used
    assert issubclass(kind, ScanMixer) == kind.scan

    with torch.no_grad():
        if kind.streams:
            streamed = m(ids, stream=True).hidden
            real = ids != 0
            assert torch.allclose(streamed[real], out.hidden[real], atol=1e-10)
        else:
            with pytest.raises(ValueError, match="no streaming path"):
                m(ids, stream=True)

    if kind.causal_capable:
        c = encoder(config(name, causal=True))
        parallel = c(ids[:, :9]).hidden
        state = c.init_state()
        with torch.no_grad():
            steps = torch.stack([c.step(ids[:, t], state)[0] for t in range(9)], 1)
        assert torch.allclose(steps, parallel, atol=1e-10)
    else:
        with pytest.raises(ValueError, match="causal=True"):
            config(name, causal=True)

    if kind.length_limited:
        with pytest.raises(ValueError, match="model.max_len"):
            Encoder(config(name, max_len=0))
        with pytest.raises(ValueError, match="model.max_len"):
            encoder(config(name, max_len=16))(ids)
    else:  # any length, with max_len unset
        assert torch.isfinite(encoder(config(name, max_len=0))(token_batch(n=40, lengths=(40, 3))).hidden).all()

    before = {k: v.clone() for k, v in m.state_dict().items()}
    m.train()
    assert m.redraw_favor_features(m.cfg.favor_redraw_interval) == kind.redraws
    changed = [k for k, v in m.state_dict().items() if not torch.equal(v, before[k])]
    assert changed == (["blocks.0.mixer.projection"] if kind.redraws else [])
