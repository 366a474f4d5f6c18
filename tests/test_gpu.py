"""GPU-only checks (skipped without CUDA): the reference op and the encoder on a CUDA device at long N,
against float64 on the same inputs."""

from __future__ import annotations

import contextlib
import copy

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


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [37, 9001])  # the channels-last form (N <= CHANNELS_LAST_CONV_MAX_TOKENS), conv1d
def test_short_conv_on_cuda_equals_float64_on_the_cpu(causal, n):
    """ShortConv's CUDA forms, float32 forward and backward (outputs poisoned first), against float64 on a CPU."""
    from genolin.model import ShortConv

    torch.manual_seed(n)
    conv = ShortConv(24, 7, causal)
    torch.nn.init.normal_(conv.conv.bias)
    x = torch.randn(3, n, 24)
    ref_conv = ShortConv(24, 7, causal).double()
    ref_conv.load_state_dict(conv.state_dict())
    xd = x.double().requires_grad_()
    want = ref_conv(xd)
    want_grad = torch.autograd.grad(want.square().sum(), xd)[0]
    conv = conv.cuda()
    xc = x.cuda().requires_grad_()
    got = torch.full((3, n, 24), float("nan"), device="cuda")
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):  # float32 products, not TF32's 10-bit ones
        got.copy_(conv(xc))
        grad = torch.autograd.grad(conv(xc).square().sum(), xc)[0]
    assert torch.isfinite(got).all() and rel(got.cpu(), want) < 1e-5 and rel(grad.cpu(), want_grad) < 1e-5


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
    cfg = EncoderConfig(d_model=128, n_layers=2, n_heads=4, mixer=mixer, chunk_tokens=4096, track_channels=2)
    model = Encoder(cfg).cuda().eval()
    ids = torch.randint(5, cfg.vocab_size, (2, 20_000), device="cuda")
    ids[1, 15_000:] = 0
    with torch.no_grad():
        streamed = model(ids, stream=True)
        plain = model(ids, stream=False)
        assert not model.streams(*ids.shape, ids.device)  # 40,000 tokens on CUDA: the plain pass by default
    real = ids != 0
    assert torch.isfinite(streamed.track).all()
    assert rel(streamed.hidden[real], plain.hidden[real]) < 1e-4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("fm", FEATURE_MAPS)
def test_triton_kernels_at_one_million_tokens(dtype, fm):
    """Forward and the three gradients of the fused kernels at N = 1,000,003 against float64, outputs poisoned."""
    import os

    os.environ["GENOLIN_TRITON_POISON"] = "1"
    try:
        n = 1_000_003
        g = torch.Generator(device="cuda").manual_seed(7)
        q, k = (torch.randn(1, n, 4, 64, device="cuda", generator=g).mul(0.5).to(dtype) for _ in range(2))
        v = torch.randn(1, n, 4, 48, device="cuda", generator=g).to(dtype)
        do = torch.randn(1, n, 4, 48, device="cuda", generator=g).to(dtype)
        mask = torch.ones(1, n, dtype=torch.bool, device="cuda")
        mask[0, -12_345:] = False
        w = favor_projection(96, 64, seed=3, device="cuda") if fm == "favor" else None
        qs, ks, vs = (x.clone().requires_grad_() for x in (q, k, v))
        out = linear_attention(qs, ks, vs, feature_map=fm, projection=w, key_padding_mask=mask, backend="triton")
        out.backward(do)
        q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
        ref = linear_attention(q64, k64, v64, feature_map=fm, projection=None if w is None else w.double(),
                               key_padding_mask=mask, backend="reference", chunk_size=1 << 17)
        ref.backward(do.double())
        for fast, slow in ((out, ref), (qs.grad, q64.grad), (ks.grad, k64.grad), (vs.grad, v64.grad)):
            assert torch.isfinite(fast).all() and rel(fast, slow) < TOL[dtype]
    finally:
        del os.environ["GENOLIN_TRITON_POISON"]


def test_triton_past_two_to_the_31_elements():
    """q, k, v of more than 2^31 elements: rows beyond the int32 range are right (int64 offsets)."""
    h, d = 8, 64
    n = 2**31 // (h * d) + 5_000  # q has 2^31 + 2,560,000 elements
    g = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = (torch.randn(1, n, h, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(3))
    with torch.no_grad():
        out = linear_attention(q, k, v, backend="triton")
        from genolin.ops import accumulate_state, query_state

        state = accumulate_state(k, v, chunk_size=1 << 18)
        state_ref = query_state(q[:, -4096:], state, out_dtype=torch.float32)
    assert torch.isfinite(out).all()
    assert rel(out[:, -4096:], state_ref) < 2e-2


def test_genome_prediction_on_cuda_matches_the_cpu(tmp_path):
    """The fast CUDA path (bf16 autocast, Triton attention, batched forward + RC, pinned copies overlapping the
    next batch) against float32 on the CPU, on a genome of two contigs with an N run: probabilities within 0.02."""
    import numpy as np
    from conftest import ECOLI_BGZ, FIXTURES

    from genolin.inference import load_run
    from genolin.io.fasta import read_fasta
    from genolin.tasks.track import TrackData

    (rec,) = read_fasta(ECOLI_BGZ)
    b = rec.seq[50_000:90_001].decode()
    path = tmp_path / "g.fa"
    path.write_text(f">a\n{rec.seq[:60_000].decode()}\n>b\n{b[:9_000]}{'N' * 700}{b[9_700:]}\n")
    out = {}
    for device in ("cuda", "cpu"):
        run = load_run(FIXTURES / "v1_runs" / "track_run", device)
        data = TrackData.load([str(path)], [], run.config.train)
        pieces = list(run.predictor.region_probs(data, data.whole(), rc_average=True, progress=False))
        out[device] = np.concatenate([p for _, _, p in pieces])
        assert run.predictor.amp == (device == "cuda")
    assert out["cuda"].shape == out["cpu"].shape and np.isfinite(out["cuda"]).all()
    assert np.abs(out["cuda"] - out["cpu"]).max() < 0.02


def _genome_probs(path, monkeypatch, graphs: str, *, rc: bool, batch_size: int = 3, ahead: bool = False):
    """(probabilities of every bin, the predictor) of the v1 track run on ``path`` on CUDA, with
    GENOLIN_CUDA_GRAPHS=graphs; ``ahead``: pieces joined on region_probs' background thread."""
    import numpy as np
    from conftest import FIXTURES

    from genolin.inference import load_run
    from genolin.tasks.track import TrackData

    monkeypatch.setenv("GENOLIN_CUDA_GRAPHS", graphs)
    run = load_run(FIXTURES / "v1_runs" / "track_run", "cuda", batch_size=batch_size)
    data = TrackData.load([str(path)], [], run.config.train)
    pieces = list(run.predictor.region_probs(data, data.whole(), rc_average=rc, progress=False, ahead=ahead))
    return np.concatenate([p for _, _, p in pieces]), run.predictor


def _two_contigs(tmp_path):
    from conftest import ECOLI_BGZ

    from genolin.io.fasta import read_fasta

    (rec,) = read_fasta(ECOLI_BGZ)
    b = rec.seq[50_000:90_001].decode()
    path = tmp_path / "g.fa"  # contig ends inside batches (short windows: padding) and an N run
    path.write_text(f">a\n{rec.seq[:60_000].decode()}\n>b\n{b[:9_000]}{'N' * 700}{b[9_700:]}\n")
    return path


@pytest.mark.parametrize("rc", [False, True])
def test_genome_batches_replayed_from_cuda_graphs_equal_eager_launches(tmp_path, monkeypatch, rc):
    """Genome windows through captured CUDA graphs (every batch padded to the full batch's shape; one graph with
    padding, one without) against the same model launching its kernels one by one: the same probabilities."""
    import numpy as np

    path = _two_contigs(tmp_path)
    graphed, pred = _genome_probs(path, monkeypatch, "1", rc=rc)
    assert sorted(key[-1][0] for key in pred.windows.graphs.graphs) == [False, True]  # (padding, RC): full and padded
    eager, pred0 = _genome_probs(path, monkeypatch, "0", rc=rc)
    assert pred0.windows.graphs is None
    assert graphed.shape == eager.shape and np.isfinite(graphed).all()
    # full batches have the same shape both ways (bitwise the same kernels); padded ones are padded further here
    assert np.abs(graphed - eager).max() < 2e-3, np.abs(graphed - eager).max()


@pytest.mark.parametrize("graphs", ["0", "1"])
def test_genome_pieces_computed_ahead_equal_those_of_one_thread(tmp_path, monkeypatch, graphs):
    """region_probs(ahead=True) (batches launched and pieces joined on a background thread, as predict writes
    them): the same probabilities, bit for bit, as on the caller's thread."""
    import numpy as np

    path = _two_contigs(tmp_path)
    ahead, _ = _genome_probs(path, monkeypatch, graphs, rc=True, ahead=True)
    here, _ = _genome_probs(path, monkeypatch, graphs, rc=True)
    assert ahead.shape == here.shape and np.isfinite(ahead).all() and np.array_equal(ahead, here)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("fmt", ["bedgraph", "bigwig"])
def test_torchrun_on_two_gpus_writes_what_one_gpu_writes(tmp_path, fmt):
    """`torchrun --nproc-per-node 2 -m genolin predict` on two GPUs (NCCL: the round's kept bins all-gathered, the
    forward in CUDA graphs, batches of 4 so contig ends fall inside padded batches): the files of one GPU, byte
    for byte (bigWig: value for value)."""
    import os
    import subprocess
    import sys

    from conftest import FIXTURES

    path = _two_contigs(tmp_path)
    args = ["-q", "predict", "--model", str(FIXTURES / "v1_runs" / "track_run"), "--fasta", str(path), "--device",
            "cuda", "--rc-average", "--batch-size", "4", "--threshold", "0.0", "--format", fmt]
    one = subprocess.run([sys.executable, "-m", "genolin", *args, "--out", str(tmp_path / "one")],
                         capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": "0"})
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "-m", "genolin", *args[1:], "--out", str(tmp_path / "two")], capture_output=True,
                         text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    tracks = ("plus.bedGraph", "minus.bedGraph") if fmt == "bedgraph" else ("plus.bw", "minus.bw")
    for suffix in (*tracks, "peaks.bed"):
        if suffix.endswith(".bw"):
            import pyBigWig

            a, b = (pyBigWig.open(str(tmp_path / f"{w}.{suffix}")) for w in ("one", "two"))
            assert a.chroms() == b.chroms()
            assert all(a.values(c, 0, n) == b.values(c, 0, n) for c, n in a.chroms().items()), suffix
            continue
        a = (tmp_path / f"one.{suffix}").read_text().splitlines()
        b = (tmp_path / f"two.{suffix}").read_text().splitlines()
        assert a[1:] == b[1:] and len(a) > 2, suffix


def test_a_failed_graph_capture_falls_back_to_eager_launches(tmp_path, monkeypatch, caplog):
    """A forward that cannot be captured: one warning before the first batch, then every batch's kernels launched
    one by one, with the values the graphs give."""
    import numpy as np

    from genolin.inference import GraphCaptureError, GraphedForward

    path = _two_contigs(tmp_path)
    eager, _ = _genome_probs(path, monkeypatch, "0", rc=True)

    def refuse(self, inputs, padding):
        raise GraphCaptureError("operation not permitted when stream is capturing")

    graphed, _ = _genome_probs(path, monkeypatch, "1", rc=True)
    monkeypatch.setattr(GraphedForward, "_capture", refuse)
    with caplog.at_level("WARNING", logger="genolin.inference"):
        got, pred = _genome_probs(path, monkeypatch, "1", rc=True)
    assert pred.windows.graphs is False
    assert sum("CUDA graphs unavailable" in r.message for r in caplog.records) == 1
    assert got.shape == eager.shape and np.abs(got - eager).max() < 2e-3
    # the fallback keeps the graphs' batch shape: the same kernels on the same shapes, the same values
    assert np.array_equal(got, graphed)


def _kernel_and_reference_errors(monkeypatch, env: str, init, prepare) -> dict[str, torch.Tensor]:
    """Relative errors of a hybrid encoder's inference under bf16 autocast on CUDA against the float64 model on
    the CPU, with the environment variable ``env`` set to "kernel" and to "reference" (the modules' own path):
    ``init(block)`` draws each block's weights the kernel reads, ``prepare(gpu_encoder)`` readies the CUDA copy
    (compiles it, casts it); outputs poisoned with NaN, one row padded."""
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=4101, d_model=64, n_layers=3, n_heads=4, mixer="hybrid", track_channels=2,
                        n_classes=0)
    enc = Encoder(cfg).eval()
    for block in enc.blocks:
        init(block)
    ids = torch.randint(5, 4101, (3, 3001))
    ids[2, 2500:] = cfg.pad_id
    with torch.no_grad():
        want = Encoder(cfg).double().eval()
        want.load_state_dict(enc.state_dict())
        want = want(ids).track
        got = {}
        for path in ("kernel", "reference"):
            monkeypatch.setenv(env, path)
            gpu = copy.deepcopy(enc).cuda()
            prepare(gpu)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = torch.full((3, 3001, 2), float("nan"), device="cuda")
                out.copy_(gpu(ids.cuda()).track.float())
            got[path] = out.cpu()
    real = ids != cfg.pad_id
    assert all(torch.isfinite(o[real]).all() for o in got.values())
    return {p: rel(o[real], want[real]) for p, o in got.items()}


@pytest.mark.parametrize("compiled", [False, True])
def test_encoder_inference_with_the_norm_conv_kernel(monkeypatch, compiled):
    """The blocks' norm + convolution kernel under bf16 autocast on CUDA (eager, and as a custom op inside the
    compiled blocks) against the float64 model on the CPU, and as close to it as the modules' own path."""

    def init(block):
        torch.nn.init.normal_(block.norm1.weight, 1.0, 0.3)
        torch.nn.init.normal_(block.conv.conv.bias, 0.0, 0.3)

    def prepare(gpu):  # GENOLIN_NORM_CONV is read while tracing: a fresh compile per path
        if compiled:
            torch.compiler.reset()
            gpu.compile_blocks()

    errs = _kernel_and_reference_errors(monkeypatch, "GENOLIN_NORM_CONV", init, prepare)
    assert errs["kernel"] < 2e-2 and errs["kernel"] <= 1.5 * errs["reference"] + 1e-3, errs


@pytest.mark.parametrize("bf16_weights", [False, True])
def test_encoder_inference_with_the_fused_block_kernels(monkeypatch, bf16_weights):
    """Eager inference under bf16 autocast on CUDA through the fused block kernels (swiglu, gated_mix,
    add_rms_norm; float32 or, as genome prediction runs, bfloat16 weights and residual stream) against the
    float64 model on the CPU, and as close to it as the modules' own path (GENOLIN_FUSED=reference)."""

    def init(block):
        torch.nn.init.normal_(block.norm2.weight, 1.0, 0.3)

    def prepare(gpu):
        if bf16_weights:
            gpu.to_inference_bf16()

    errs = _kernel_and_reference_errors(monkeypatch, "GENOLIN_FUSED", init, prepare)
    assert errs["kernel"] < 3e-2 and errs["kernel"] <= 1.5 * errs["reference"] + 1e-3, errs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("op", ["gla", "deltanet", "gated_deltanet"])
@pytest.mark.parametrize("n", [1, 999, 4_097])
def test_fla_scans_match_the_reference(dtype, op, n):
    """fla's chunked kernels (bidirectional, padded rows) against genolin's PyTorch form in float64: outputs and
    the gradients of q, k, v and the gates; the output buffer poisoned first."""
    pytest.importorskip("fla.ops", reason="needs flash-linear-attention (pip install fla-core)")
    import torch.nn.functional as F

    from genolin.ops import bidirectional_scan, delta_rule, gla

    g = torch.Generator(device="cuda").manual_seed(n)
    b, h, d = 3, 4, 64

    def draw(*shape):
        return torch.randn(*shape, device="cuda", generator=g)

    q, k, v, do = draw(b, n, h, d), draw(b, n, h, d), draw(b, n, h, d), draw(b, n, h, d)
    if op == "gla":
        gates = {"g": (F.logsigmoid(draw(b, n, h, d)) / 16).clamp(min=-4)}
    else:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        gates = {"beta": torch.sigmoid(draw(b, n, h)),
                 "g": -0.2 * torch.rand(b, n, h, device="cuda", generator=g) if op == "gated_deltanet" else None}
    mask = torch.ones(b, n, dtype=torch.bool, device="cuda")
    mask[1, n // 2 + 1:] = False
    mask[2, 1:] = False
    scan = gla if op == "gla" else delta_rule

    def run(backend, cast):
        leaves = [x.detach().to(cast).requires_grad_() for x in (q, k, v)]
        gate_leaves = {name: None if x is None else x.detach().to(torch.float64 if cast == torch.float64
                                                                   else torch.float32).requires_grad_()
                       for name, x in gates.items()}
        out = torch.full((b, n, h, d), float("nan"), device="cuda", dtype=cast)
        out.copy_(bidirectional_scan(lambda *a, **kw: scan(*a, **kw, backend=backend), *leaves, mask=mask,
                                     **gate_leaves))
        (out * mask[..., None, None] * do.to(cast)).sum().backward()
        return out, [x.grad for x in leaves] + [x.grad for x in gate_leaves.values() if x is not None]

    from genolin.ops.delta_rule import fla_gated_backward_works

    if op == "deltanet" and dtype == torch.float32:  # fla's chunk_delta_rule takes bf16/fp16 only
        with pytest.raises(ValueError, match="bfloat16 or float16"):
            run("fla", dtype)
        auto = bidirectional_scan(lambda *a, **kw: scan(*a, **kw, backend="auto"), q, k, v, mask=mask, **gates)
        ref = bidirectional_scan(lambda *a, **kw: scan(*a, **kw, backend="reference"), q, k, v, mask=mask, **gates)
        assert torch.equal(auto, ref)  # "auto" takes the PyTorch form for float32
        return
    if op == "gated_deltanet" and not fla_gated_backward_works():
        with pytest.raises(ValueError, match="fla issue #640"):
            run("fla", dtype)
        auto = bidirectional_scan(lambda *a, **kw: scan(*a, **kw, backend="auto"),
                                  *(x.requires_grad_() for x in (q, k, v)), mask=mask, **gates)
        assert auto.grad_fn is not None  # "auto" trains on the PyTorch form there
        with torch.no_grad():  # and fla's forward still serves inference
            fast = bidirectional_scan(lambda *a, **kw: scan(*a, **kw, backend="fla"), q, k, v, mask=mask, **gates)
            ref = bidirectional_scan(lambda *a, **kw: scan(*a, **kw, backend="reference"), q.double(), k.double(),
                                     v.double(), mask=mask, **{n: None if x is None else x.double()
                                                               for n, x in gates.items()})
        assert rel(fast[mask], ref[mask]) < (TOL[dtype] if dtype != torch.float32 else 2e-3)
        return
    fast, fast_grads = run("fla", dtype)
    ref, ref_grads = run("reference", torch.float64)
    tol = TOL[dtype] if dtype != torch.float32 else 2e-3  # fla's kernels use tf32 in places
    assert torch.isfinite(fast[mask]).all() and rel(fast[mask], ref[mask]) < tol
    for a, r in zip(fast_grads, ref_grads, strict=True):
        # relative to the gradient's size, or to a small floor where it is ~0 (a gate's gradient at N = 1)
        error = (a.double() - r.double()).norm().item()
        assert torch.isfinite(a).all() and error < 2 * tol * max(r.norm().item(), 1e-3 * r.numel() ** 0.5)


@pytest.mark.parametrize("mixer", ["gla", "deltanet", "gated_deltanet", "linformer", "fnet", "synthesizer"])
def test_new_mixers_train_on_cuda_under_autocast(mixer):
    """A model of each mixer: bf16 autocast forward + backward on CUDA (fla kernels where they apply) against the
    same weights on the PyTorch reference in float32."""
    import os

    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=9, d_model=128, n_layers=2, n_heads=4, mixer=mixer, max_len=2048, n_classes=2,
                        track_channels=2)
    model = Encoder(cfg).cuda()
    ids = torch.randint(5, 9, (4, 2048), device="cuda")
    ids[1, 1500:] = 0
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(ids)
    (out.logits.float().sum() + out.track.float().sum()).backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    os.environ["GENOLIN_ATTENTION_BACKEND"] = "reference"
    try:
        with torch.no_grad():
            ref = model(ids)
    finally:
        del os.environ["GENOLIN_ATTENTION_BACKEND"]
    real = ids != 0
    assert rel(out.hidden.float()[real], ref.hidden[real]) < 5e-2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fm", ["elu", "relu", "exp"])
@pytest.mark.parametrize("n", [2, 999, 4_097])
def test_fla_causal_linear_attention_matches_the_reference(dtype, fm, n):
    """Causal linear attention on fla's kernels (inference: padded rows, continued from a state) against the
    PyTorch form in float64: outputs and the final state; the output buffer poisoned first. With gradients
    wanted the fla backend refuses (its backward faulted) and "auto" trains on the reference."""
    pytest.importorskip("fla.ops.simple_gla", reason="needs flash-linear-attention (pip install fla-core)")
    from genolin.ops import causal_linear_attention

    g = torch.Generator(device="cuda").manual_seed(n)
    b, h, d, e = 3, 4, 32, 64

    def draw(*shape):
        return torch.randn(*shape, device="cuda", generator=g) * 0.5

    q, k, v = draw(b, n, h, d), draw(b, n, h, d), draw(b, n, h, e)
    mask = torch.ones(b, n, dtype=torch.bool, device="cuda")
    mask[1, n // 2 + 1:] = False
    mask[2, 1:] = False
    cut = n // 3 + 1  # the first part's state carries into the second part

    @torch.no_grad()
    def run(backend, cast):
        qc, kc, vc = (x.to(cast) for x in (q, k, v))
        out = torch.full((b, n, h, e), float("nan"), device="cuda", dtype=cast)
        out[:, :cut], state = causal_linear_attention(qc[:, :cut], kc[:, :cut], vc[:, :cut], feature_map=fm,
                                                      key_padding_mask=mask[:, :cut], backend=backend)
        out[:, cut:], state = causal_linear_attention(qc[:, cut:], kc[:, cut:], vc[:, cut:], feature_map=fm,
                                                      key_padding_mask=mask[:, cut:], state=state, backend=backend)
        return out, state

    fast, fast_state = run("fla", dtype)
    ref, ref_state = run("reference", torch.float64)
    tol = TOL[dtype] if dtype != torch.float32 else 2e-3  # fla's kernels use tf32 in places
    assert torch.isfinite(fast).all() and rel(fast, ref) < tol
    # z sums the features in float32; in bf16 the inputs' rounding alone moves it by ~5e-4
    z_tol = 1e-5 if dtype == torch.float32 else tol
    assert rel(fast_state.S, ref_state.S) < tol and rel(fast_state.z, ref_state.z) < z_tol
    with torch.no_grad():  # "auto" takes fla for inference on CUDA tensors of more than one token
        auto, _ = causal_linear_attention(q.to(dtype), k.to(dtype), v.to(dtype), feature_map=fm,
                                          key_padding_mask=mask)
        plain, _ = causal_linear_attention(q.to(dtype), k.to(dtype), v.to(dtype), feature_map=fm,
                                           key_padding_mask=mask, backend="fla")
        assert torch.equal(auto, plain)
        with pytest.raises(ValueError, match="powers of two"):
            causal_linear_attention(q.to(dtype), k.to(dtype), v[..., :48].to(dtype), feature_map=fm, backend="fla")
    leaves = [x.to(dtype).requires_grad_() for x in (q, k, v)]
    with pytest.raises(ValueError, match="for inference"):
        causal_linear_attention(*leaves, feature_map=fm, backend="fla")
    trained, _ = causal_linear_attention(*leaves, feature_map=fm, key_padding_mask=mask)  # auto: the reference
    trained.float().sum().backward()
    assert all(torch.isfinite(x.grad).all() for x in leaves)


def test_causal_encoder_on_fla_matches_its_step_api():
    """A causal hybrid encoder: the whole-sequence forward (fla's kernels for the global part under bf16 autocast)
    against the exact token-by-token step API in float32."""
    pytest.importorskip("fla.ops.simple_gla", reason="needs flash-linear-attention (pip install fla-core)")
    torch.manual_seed(0)
    cfg = EncoderConfig(vocab_size=9, d_model=64, n_layers=2, n_heads=4, mixer="hybrid", causal=True,
                        track_channels=2, local_window_tokens=16)
    model = Encoder(cfg).cuda().eval()
    ids = torch.randint(5, 9, (2, 300), device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        whole = model(ids, stream=False).hidden.float()
    state = model.init_state()
    with torch.no_grad():
        steps = torch.stack([model.step(ids[:, t], state)[0] for t in range(ids.shape[1])], 1)
    assert rel(whole, steps) < 3e-2


def _track_steps(tmp_path, monkeypatch, graphs: str, steps: int = 12):
    """(per-step losses, final weights, the trainer's GraphedStep) of a small track model trained ``steps`` steps
    on CUDA with GENOLIN_CUDA_GRAPHS=graphs (dropout off: the same arithmetic both ways)."""
    from conftest import DATA, ECOLI_BGZ

    from genolin.config import DataSpec, Setting
    from genolin.train import Trainer, configure

    monkeypatch.setenv("GENOLIN_CUDA_GRAPHS", graphs)
    spec = DataSpec(task="track", fasta=[str(ECOLI_BGZ)], tss=[str(DATA / "ecoli_k12" / "gene_starts.bed")])
    settings = [Setting(k, v, "test") for k, v in (("d_model", 64), ("n_layers", 2), ("dropout", 0.0),
                                                   ("max_steps", steps), ("val_every_steps", steps))]
    cfg = configure("small", settings, spec)
    trainer = Trainer(cfg, spec, tmp_path / f"run{graphs}", device="cuda", progress=False)
    try:
        losses = []
        batches = trainer.epoch_batches(0)
        trainer.schedule.start(len(batches))
        for b in range(steps + 1):  # the last batch shorter: after the capture, an eager step (it does not fit)
            batch = trainer.make_batch(batches[b] if b < steps else batches[0][:1], 0, b)
            loss = trainer.graphed_step(batch, b)
            if loss is None:
                with trainer.graphed.eager() if trainer.graphed is not None else contextlib.nullcontext():
                    loss = trainer.micro_step(batch, 0, b, sync=True)
                    trainer.optimizer_step(trainer.schedule.next_lr())
            losses.append(loss)
        weights = {k: v.detach().float().cpu() for k, v in trainer.model.state_dict().items()}
        return torch.stack(losses).float().cpu(), weights, trainer.graphed
    finally:
        trainer.close()


def test_training_steps_replayed_from_a_cuda_graph_equal_eager_steps(tmp_path, monkeypatch):
    """Track training steps (forward, loss, backward, clipping, fused AdamW) replayed from one captured CUDA graph
    against the same steps launched eagerly: the same losses at every step and the same weights after 12 steps and a
    13th, shorter batch, which takes an eager step after the capture (from no gradient, not the last replay's)."""
    graphed_losses, graphed_w, step = _track_steps(tmp_path, monkeypatch, "1")
    assert step is not None and step.graph is not None and not step.failed  # captured after the eager steps
    eager_losses, eager_w, none = _track_steps(tmp_path, monkeypatch, "0")
    assert none is None
    assert torch.isfinite(graphed_losses).all()
    assert rel(graphed_losses, eager_losses) < 1e-5, (graphed_losses, eager_losses)
    for k, w in eager_w.items():
        assert rel(graphed_w[k], w) < 1e-4 or (w.norm() == 0 and graphed_w[k].norm() == 0), k


@pytest.mark.parametrize("task", ["sequence", "track"])
def test_cudnn_is_off_while_cropped_sequences_train_and_back_after(tmp_path, monkeypatch, task):
    """Batches of cropped sequences train without cuDNN (``shape_free_kernels``: a plan per shape), tracks'
    windows of one shape with it; either way the flag is as before once ``fit`` returns."""
    from conftest import DATA, ECOLI_BGZ, GUE_TATA, fit_watching

    from genolin.config import DataSpec, Setting
    from genolin.train import Trainer, configure

    monkeypatch.delenv("GENOLIN_CUDNN", raising=False)
    settings = [Setting(k, v, "test") for k, v in (("d_model", 32), ("n_layers", 1), ("max_steps", 2))]
    if task == "sequence":
        spec = DataSpec(task="sequence", csv=str(GUE_TATA / "train.csv"))
        settings.append(Setting("crop_min_bp", 100, "test"))  # cropped batches: widths change through the run
    else:
        spec = DataSpec(task="track", fasta=[str(ECOLI_BGZ)], tss=[str(DATA / "ecoli_k12" / "gene_starts.bed")])
    trainer = Trainer(configure("tiny", settings, spec), spec, tmp_path / "run", device="cuda", progress=False)
    seen = fit_watching(trainer, monkeypatch,
                        lambda: torch.backends.cudnn.enabled and torch.backends.cuda.cudnn_sdp_enabled())
    assert seen and all(flag == (task == "track") for flag in seen)
    assert torch.backends.cudnn.enabled and torch.backends.cuda.cudnn_sdp_enabled()
