"""The encoder: shapes, masks, determinism, streaming == plain forward, causal step == parallel, FAVOR+ redraws."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import NEEDS_COMPILER

from genolin.model import MIXERS as ALL_MIXERS
from genolin.model import Block, Encoder, EncoderConfig, config_from_dict

MIXERS = ["softmax", "linear", "favor", "hybrid"]  # the causal-capable ones


def small(mixer="linear", **kw) -> EncoderConfig:
    base = dict(vocab_size=5 + 4**3, d_model=24, n_layers=2, n_heads=3, mixer=mixer, chunk_tokens=16,
                local_window_tokens=8, favor_features=12, track_channels=2, conv_kernel=5, max_len=64,
                linformer_rows=6)
    base.update(kw)
    return EncoderConfig(**base)


def model(cfg: EncoderConfig, seed=0) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(cfg).double().eval()


def token_batch(b=3, n=45, seed=1, lengths=(45, 30, 7)):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 5 + 4**3, (b, n), generator=g)
    for i, length in enumerate(lengths):
        ids[i, length:] = 0
    return ids


@pytest.mark.parametrize("mixer", [*ALL_MIXERS, "synthesizer_random"])
@pytest.mark.parametrize("pooling", ["mean", "attention"])
def test_shapes(mixer, pooling):
    kw = {"synthesizer": "random"} if mixer == "synthesizer_random" else {}
    mixer = mixer.removesuffix("_random")
    m = model(small(mixer, pooling=pooling, feature_dim=5 if mixer == "linear" else None, **kw))
    ids = token_batch()
    out = m(ids)
    assert out.hidden.shape == (3, 45, 24) and out.logits.shape == (3, 2) and out.track.shape == (3, 45, 2)
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.hidden).all()
    assert Encoder(small(mixer, track_channels=0, **kw))(ids).track is None
    (out.logits.sum() + out.track.sum()).backward()
    assert all(p.grad is not None for p in m.parameters() if p.requires_grad)  # DDP needs every one used


@pytest.mark.parametrize("mixer", [*ALL_MIXERS, "synthesizer_random"])
@pytest.mark.parametrize("causal,stem", [(False, 0), (True, 0), (False, 9), (False, 4)])
def test_padded_batch_equals_each_sequence_alone(mixer, causal, stem):
    kw = {"synthesizer": "random"} if mixer == "synthesizer_random" else {}
    mixer = mixer.removesuffix("_random")
    if causal and mixer not in MIXERS:
        with pytest.raises(ValueError, match="causal=True"):
            small(mixer, causal=True)
        return
    m = model(small(mixer, causal=causal, stem_kernel=stem, **kw))
    ids = token_batch()
    out = m(ids)
    for i, n in enumerate((45, 30, 7)):
        alone = m(ids[i:i + 1, :n])
        assert torch.allclose(out.hidden[i, :n], alone.hidden[0], atol=1e-10)
        assert torch.allclose(out.logits[i], alone.logits[0], atol=1e-10)


@pytest.mark.parametrize("mixer", ["linear", "favor", "hybrid"])
@pytest.mark.parametrize("causal,stem", [(False, 0), (True, 0), (False, 9)])
def test_streaming_equals_plain_forward(mixer, causal, stem, monkeypatch):
    cfg = small(mixer, causal=causal, feature_dim=5 if mixer == "linear" else None, stem_kernel=stem)
    m = model(cfg)
    ids = token_batch()
    plain = m(ids, stream=False)
    calls = []
    original = Block.stream_
    monkeypatch.setattr(Block, "stream_", lambda self, *a: (calls.append(1), original(self, *a))[1])
    with torch.no_grad():
        streamed = m(ids)  # N = 45 > chunk_tokens = 16 with gradients off: streams automatically
    assert len(calls) == cfg.n_layers
    real = ids != 0
    assert torch.allclose(streamed.hidden[real], plain.hidden[real], atol=1e-10)
    assert torch.allclose(streamed.logits, plain.logits, atol=1e-10)
    # a different chunk size for the op than for the stream changes summation order only
    m.cfg.chunk_tokens = 24  # a multiple of the hybrid window (8)
    with torch.no_grad():
        other = m(ids, stream=True)
    assert torch.allclose(other.hidden[real], plain.hidden[real], atol=1e-10)


def test_which_batches_stream():
    """A CPU streams any sequence longer than a chunk; CUDA only batches of more than STREAM_CUDA_MIN_TOKENS block
    tokens (the plain pass runs the fused kernels); mixers without a streaming path never do."""
    from genolin.model import STREAM_CUDA_MIN_TOKENS
    m = model(small("hybrid"))  # chunk_tokens 16
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert not m.streams(64, 16, cpu) and m.streams(1, 17, cpu)
    assert not m.streams(8, 25_000, cuda) and not m.streams(1, 250_000, cuda)
    assert not m.streams(1, STREAM_CUDA_MIN_TOKENS, cuda) and m.streams(2, STREAM_CUDA_MIN_TOKENS // 2 + 1, cuda)
    assert not model(small("gla")).streams(1, 10**7, cpu)


@pytest.mark.parametrize("mixer", MIXERS)
def test_causal_step_equals_parallel(mixer):
    m = model(small(mixer, causal=True, feature_dim=4 if mixer == "hybrid" else None))
    ids = token_batch(b=2, n=21, lengths=(21, 21))
    parallel = m(ids)
    state = m.init_state()
    hidden, tracks = [], []
    with torch.no_grad():
        for t in range(21):
            h, tr = m.step(ids[:, t], state)
            hidden.append(h)
            tracks.append(tr)
    assert torch.allclose(torch.stack(hidden, 1), parallel.hidden, atol=1e-10)
    assert torch.allclose(torch.stack(tracks, 1), parallel.track, atol=1e-10)
    with pytest.raises(ValueError, match="causal"):
        model(small(mixer)).init_state()


def test_causal_outputs_do_not_see_the_future():
    m = model(small("hybrid", causal=True))
    ids = token_batch(b=1, n=30, lengths=(30,))
    changed = ids.clone()
    changed[0, 20:] = 7
    a, b = m(ids).hidden, m(changed).hidden
    assert torch.allclose(a[0, :20], b[0, :20], atol=1e-12) and not torch.allclose(a[0, 20:], b[0, 20:])


def test_length_limits_and_paths_other_mixers_lack():
    with pytest.raises(ValueError, match="model.max_len"):
        model(small("linformer", max_len=40))(token_batch())
    with pytest.raises(ValueError, match="model.max_len"):
        model(small("synthesizer", max_len=40))(token_batch())
    with pytest.raises(ValueError, match="no streaming path"):
        model(small("gla"))(token_batch(), stream=True)
    with torch.no_grad():  # N > chunk_tokens without gradients: the whole window, not the streaming path
        assert torch.isfinite(model(small("deltanet"))(token_batch()).hidden).all()


@pytest.mark.parametrize("mixer", ALL_MIXERS)
def test_seeded_determinism(mixer):
    ids = token_batch()
    a, b = model(small(mixer), seed=3)(ids), model(small(mixer), seed=3)(ids)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.hidden, b.hidden)
    c = model(small(mixer), seed=4)(ids)
    assert not torch.equal(a.logits, c.logits)


def test_favor_redraw_schedule():
    cfg = small("favor", favor_redraw_interval=5)
    m1, m2 = model(cfg), model(cfg)
    w0 = m1.blocks[0].mixer.projection.clone()
    assert not torch.equal(w0, m1.blocks[1].mixer.projection)  # layers draw differently
    m1.train()
    m2.train()
    assert not m1.redraw_favor_features(3) and torch.equal(m1.blocks[0].mixer.projection, w0)
    assert m1.redraw_favor_features(10) and not torch.equal(m1.blocks[0].mixer.projection, w0)
    assert m2.redraw_favor_features(10)
    assert torch.equal(m1.blocks[0].mixer.projection, m2.blocks[0].mixer.projection)  # same on every "rank"
    m1.eval()
    w = m1.blocks[0].mixer.projection.clone()
    assert not m1.redraw_favor_features(15) and torch.equal(m1.blocks[0].mixer.projection, w)  # fixed in eval
    assert "blocks.0.mixer.projection" in m1.state_dict()  # saved with the model


def saved_bytes(fn) -> tuple[object, int]:
    """fn() under autograd's saved-tensor hooks: (its result, bytes of the tensors kept for backward)."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, total[0]


@pytest.mark.parametrize("mixer", ["hybrid", "linear", "favor"])
def test_checkpointing_gives_the_same_gradients_with_less_kept(mixer):
    """Whole-block, MLP-only and nested (both) recompute against the plain backward (float64, dropout on: recompute
    replays the same masks, padding in the batch): equal gradients; the MLP-only recompute keeps less for backward
    and whole blocks keep least."""
    ids = token_batch(n=45)
    grads, kept = {}, {}
    for mode in ("none", "mlp", "block", "both"):
        m = model(small(mixer, checkpointing=mode in ("block", "both"), checkpoint_mlp=mode in ("mlp", "both"),
                        dropout=0.1)).train()
        torch.manual_seed(7)
        out, kept[mode] = saved_bytes(lambda m=m: m(ids))
        (out.logits.sum() + (out.track ** 2).sum()).backward()
        grads[mode] = torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None])
    for mode in ("mlp", "block", "both"):
        assert torch.allclose(grads[mode], grads["none"], rtol=1e-9, atol=1e-11), mode
    assert kept["both"] == kept["block"] < kept["mlp"] < 0.75 * kept["none"], kept


INDUCTOR = pytest.param("block", "inductor", marks=[pytest.mark.slow, NEEDS_COMPILER])


@pytest.mark.parametrize(("mode", "backend"), [("none", "aot_eager"), ("mlp", "aot_eager"), ("block", "aot_eager"),
                                               ("both", "aot_eager"), ("none", "budget"), INDUCTOR])
def test_compiled_blocks_train_to_the_same_gradients(mode, backend):
    """Training through compiled blocks (Encoder.compile_blocks: the recompute traced inside the compiled graph,
    the attention kernels as custom ops) against eager blocks: equal outputs and gradients, padding in the batch,
    odd length; one graph per block kind (no graph break). "budget": the min-cut partitioner inductor uses, under
    an activation memory budget of 0.05 (it recomputes most of the block in the backward graph)."""
    from torch._dynamo.utils import counters

    budget_before = None
    if backend == "budget":  # process-wide: restored below
        budget_before = Encoder.set_activation_memory_budget(0.05)
        backend = "aot_eager_decomp_partition"
    try:
        _compiled_against_eager(mode, backend, counters)
    finally:
        if budget_before is not None:
            assert Encoder.set_activation_memory_budget(budget_before) == 0.05


def _compiled_against_eager(mode, backend, counters):
    import torch._dynamo

    ids = token_batch(n=45)
    dtype = torch.float32 if backend == "inductor" else torch.float64
    cfg = small("hybrid", checkpointing=mode in ("block", "both"), checkpoint_mlp=mode in ("mlp", "both"))
    results = []
    torch._dynamo.reset()
    counters.clear()
    for compiled in (False, True):
        m = model(cfg).to(dtype).train()
        if compiled:
            m.compile_blocks(backend=backend, fullgraph=True)
        out = m(ids)
        (out.logits.sum() + (out.track ** 2).sum()).backward()
        results.append((out.track, torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None])))
    assert not counters["graph_break"]
    tol = 1e-9 if dtype == torch.float64 else 1e-4
    for eager, compiled in zip(*results, strict=True):
        assert torch.isfinite(compiled).all()
        assert ((compiled - eager).norm() / eager.norm()).item() <= tol


def test_config_checks_and_round_trip():
    cfg = small("favor")
    assert config_from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown encoder settings"):
        config_from_dict({"d_model": 8, "colour": "red"})
    with pytest.raises(ValueError, match="mixer"):
        small("performer")
    with pytest.raises(ValueError, match="divisible"):
        small(d_model=25)
    with pytest.raises(ValueError, match="multiple of local_window_tokens"):
        small("hybrid", chunk_tokens=20)
    with pytest.raises(ValueError, match="no streaming path"), torch.no_grad():
        model(small("softmax"))(token_batch(), stream=True)


def test_float32_long_input_streams_with_small_memory_footprint():
    """A few thousand tokens through the streaming path in float32: finite and equal to the plain path."""
    torch.manual_seed(0)
    m = Encoder(small("linear", chunk_tokens=512)).eval()
    ids = torch.randint(5, 69, (1, 5000))
    with torch.no_grad():
        streamed = m(ids)
        plain = m(ids, stream=False)
    assert torch.isfinite(streamed.hidden).all()
    assert torch.allclose(streamed.hidden, plain.hidden, atol=1e-4, rtol=1e-4)


def test_streaming_never_forms_full_length_projections(monkeypatch):
    """In the streaming path q, k, v and the attention features exist for one chunk at a time."""
    import genolin.model as model_mod
    import genolin.ops.linear_attn as la

    seen = []
    original = la.elementwise_features
    monkeypatch.setattr(la, "elementwise_features", lambda x, fm: (seen.append(x.shape[1]), original(x, fm))[1])
    qkv_lengths = []
    original_qkv = model_mod.Mixer._qkv
    monkeypatch.setattr(model_mod.Mixer, "_qkv", lambda self, x: (qkv_lengths.append(x.shape[1]),
                                                                   original_qkv(self, x))[1])
    m = model(small("hybrid", chunk_tokens=16))
    with torch.no_grad():
        m(token_batch(n=100, lengths=(100, 60, 9)))
    assert max(seen) <= 16 and max(qkv_lengths) <= 16


def test_kmer_profile_counts_like_a_plain_loop():
    """k-mer frequencies (times 2^k) over windows of real bases, against counting strings; padding and N skipped."""
    import itertools
    import random

    from genolin.model import kmer_profile
    from genolin.tokenize import kmer_ids

    rng = random.Random(3)
    seqs = ["".join(rng.choice("ACGTN" if i % 2 else "ACGT") for _ in range(n)) for i, n in enumerate((23, 9, 4))]
    ids = torch.zeros(3, 23, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.from_numpy(kmer_ids(s, k=1).astype("int64"))
    got = kmer_profile(ids, 5)
    for i, s in enumerate(seqs):
        want = []
        for k in range(1, 6):
            kmers = [s[j:j + k] for j in range(len(s) - k + 1) if "N" not in s[j:j + k]]
            want += [2.0**k * kmers.count("".join(p)) / max(1, len(kmers)) for p in itertools.product("ACGT", repeat=k)]
        assert torch.allclose(got[i], torch.tensor(want, dtype=torch.float32), atol=1e-6)


def test_kmer_logits_start_at_zero_and_need_single_bases():
    cfg = small(vocab_size=9, kmer_logits=3, stem_kernel=5)
    ids = torch.randint(5, 9, (2, 30))
    m = model(cfg)
    out = m(ids)
    m.kmer_linear = None
    assert torch.allclose(out.logits, m(ids).logits)  # zero weights: the same logits as without
    with pytest.raises(ValueError, match="single-base"):
        Encoder(small(kmer_logits=3))


def test_gated_mlp_cpu_halves_equal_the_one_product():
    """On a CPU the MLP takes gate and value from the weight's halves; in float64 that is the one product split."""
    from genolin.model import GatedMLP

    torch.manual_seed(0)
    mlp = GatedMLP(24, 8 / 3, 0.0).double().eval()
    x = torch.randn(3, 37, 24, dtype=torch.float64)
    gate, value = mlp.up(x).chunk(2, dim=-1)
    want = mlp.down(torch.nn.functional.silu(gate) * value)
    assert torch.allclose(mlp(x), want, rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # the in-place form inference takes
        assert torch.allclose(mlp(x), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kernel", [1, 4, 7])
def test_short_conv_forms_equal_the_convolution(causal, kernel):
    """The sum over taps that torch.compile fuses (ShortConv._shifted), the CPU's channels-last 2-D form (forward)
    and the streaming form with halos (forward_halo) against nn.Conv1d on transposed input, float64, odd sizes,
    forward and backward."""
    from genolin.model import ShortConv

    torch.manual_seed(kernel)
    conv = ShortConv(13, kernel, causal).double()
    torch.nn.init.normal_(conv.conv.bias)
    x = torch.randn(3, 37, 13, dtype=torch.float64, requires_grad=True)
    params = (x, conv.conv.weight, conv.conv.bias)
    want = conv.conv(F.pad(x.transpose(1, 2), (conv.left, conv.right))).transpose(1, 2)
    grads_want = torch.autograd.grad(want.pow(2).sum(), params)
    for got in (conv._shifted(x), conv(x)):
        grads = torch.autograd.grad(got.pow(2).sum(), params)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        for g, g_want in zip(grads, grads_want, strict=True):
            torch.testing.assert_close(g, g_want, rtol=1e-12, atol=1e-12)
    with torch.no_grad():  # rows s..t-1 from a slice with their halo rows (cut at the sequence's ends)
        for s, t in ((10, 21), (0, 5), (30, 37)):
            a, e = max(s - conv.left, 0), min(t + conv.right, 37)
            part = conv.forward_halo(x[:, a:e], s - a, e - t)
            torch.testing.assert_close(part, want[:, s:t], rtol=1e-12, atol=1e-12)


def test_drop_path_drops_whole_branches_per_sequence_and_only_while_training():
    """drop_path p: block l of L keeps each sequence's mixer and MLP branch with probability 1 - p (l + 1) / L,
    scaling a kept one by 1 / (1 - p (l + 1) / L); evaluation is the plain block (float64, odd sizes)."""
    cfg = EncoderConfig(vocab_size=9, d_model=12, n_layers=3, n_heads=3, mixer="linear", drop_path=0.6, dropout=0.0)
    plain = EncoderConfig(**{**cfg.to_dict(), "drop_path": 0.0})
    torch.manual_seed(0)
    block = Block(cfg, 1).double()
    assert block.drop_prob == pytest.approx(0.6 * 2 / 3)
    x = torch.randn(64, 7, 12, dtype=torch.float64)
    mask = torch.ones(64, 7, dtype=torch.bool)
    with torch.no_grad():
        branch = block._mixer_out(x, mask)
        p = block.drop_prob
        block.train()
        got = torch.full_like(x, float("nan"))
        got[:] = block._mixer_residual(x, mask)
        kept = (got - x - branch / (1 - p)).flatten(1).abs().amax(1) <= 1e-12 * branch.flatten(1).abs().amax(1)
        dropped = (got - x).flatten(1).abs().amax(1) == 0
        assert (kept ^ dropped).all()  # every sequence: its whole branch kept (scaled) or dropped
        assert 10 <= int(dropped.sum()) <= 40  # p = 0.4 of 64
        block.eval()
        torch.testing.assert_close(block._mixer_residual(x, mask), x + branch, rtol=0, atol=0)
    ids = torch.randint(1, 9, (5, 11))
    torch.manual_seed(1)
    a = Encoder(cfg).double().eval()
    b = Encoder(plain).double().eval()
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(ids).logits, b(ids).logits, rtol=0, atol=0)
    with pytest.raises(ValueError, match="drop_path"):
        EncoderConfig(drop_path=1.0)
