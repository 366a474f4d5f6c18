"""The Triton kernels against the float64 formula: forward and the three gradients, every feature map, odd N,
head dims 16/48/64, padding, outputs poisoned with NaN. On a CPU the kernels run under TRITON_INTERPRET=1."""

from __future__ import annotations

import os

import pytest
import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # conftest sets it too: it must precede the import of triton
pytest.importorskip("triton", reason="triton is not installed (the gpu extra; the dev extra includes it)")

from genolin.ops import FEATURE_MAPS, favor_projection, linear_attention, naive_linear_attention  # noqa: E402

DEVICE = "cuda" if ON_GPU else "cpu"
TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 2e-2}


def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-300)).item()


@pytest.fixture(autouse=True)
def _poison_and_split(monkeypatch):
    monkeypatch.setenv("GENOLIN_TRITON_POISON", "1")  # outputs start as NaN: every element must be written
    monkeypatch.setenv("GENOLIN_TRITON_SPLIT", "3")  # several partials per (batch, head): the reduction is tested


def check(fm, n, d, e, dtype, *, b=2, h=2, m=24, padded=True, seed=0, eps=1e-6):
    g = torch.Generator().manual_seed(seed + n + d)
    q, k = (torch.randn(b, n, h, d, generator=g) * 0.7 for _ in range(2))
    v = torch.randn(b, n, h, e, generator=g)
    grad = torch.randn(b, n, h, e, generator=g)
    w = favor_projection(m, d, seed=seed) if fm == "favor" else None
    mask = None
    if padded:
        mask = torch.ones(b, n, dtype=torch.bool)
        mask[-1, n - n // 3:] = False
    # the fast path on the device in the given dtype
    qd, kd, vd = (x.to(DEVICE, dtype).requires_grad_() for x in (q, k, v))
    out = linear_attention(qd, kd, vd, feature_map=fm, projection=None if w is None else w.to(DEVICE),
                           key_padding_mask=None if mask is None else mask.to(DEVICE), eps=eps, backend="triton")
    out.backward(grad.to(DEVICE, dtype))
    # the formula in float64 on the same (rounded) inputs
    q64, k64, v64 = (x.detach().cpu().double().requires_grad_() for x in (qd, kd, vd))
    ref = naive_linear_attention(q64, k64, v64, feature_map=fm, projection=None if w is None else w.double(),
                                 key_padding_mask=mask, eps=eps)
    ref.backward(grad.to(dtype).double())
    tol = TOL[dtype]
    for name, fast, slow in (("o", out, ref), ("dq", qd.grad, q64.grad), ("dk", kd.grad, k64.grad),
                             ("dv", vd.grad, v64.grad)):
        assert torch.isfinite(fast).all(), f"{name}: NaN or inf (an element not written?)"
        assert rel(fast.cpu(), slow) <= tol, f"{name}: relative error {rel(fast.cpu(), slow):.2e} > {tol}"


@pytest.mark.parametrize("fm", FEATURE_MAPS)
@pytest.mark.parametrize(("n", "d"), [(n, d) for n in (1, 63) for d in (16, 48, 64)] + [(1000, 64)] + [
    pytest.param(1000, d, marks=pytest.mark.slow) for d in (16, 48)])  # 3 s each in the interpreter
def test_float32_against_float64(fm, n, d):
    # With one key, o = v x / (x + eps) hardly depends on q and k: their true gradients (~eps) are a cancellation
    # no float32 code resolves at eps = 1e-6; eps = 1 (about phi.phi) makes them carry signal.
    check(fm, n, d, d if d != 48 else 40, torch.float32, padded=n > 1, eps=1.0 if n == 1 else 1e-6)


@pytest.mark.parametrize("fm", FEATURE_MAPS)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_against_float64(fm, dtype):
    check(fm, 257, 32, 24, dtype)


def test_unpadded_and_strided_inputs():
    """Non-contiguous q/k/v (a slice of a fused qkv tensor) and no mask."""
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(1, 77, 3, 2, 16, generator=g).to(DEVICE)
    q, k, v = qkv.unbind(2)
    out = linear_attention(q, k, v, backend="triton")
    ref = naive_linear_attention(q.double().cpu(), k.double().cpu(), v.double().cpu())
    assert rel(out.cpu(), ref) < 1e-4


def test_auto_uses_the_reference_off_cuda_and_for_causal():
    q = torch.randn(1, 9, 1, 16)
    if not ON_GPU:
        assert torch.equal(linear_attention(q, q, q), linear_attention(q, q, q, backend="reference"))
    with pytest.raises(NotImplementedError, match="bidirectional"):
        linear_attention(q.to(DEVICE), q.to(DEVICE), q.to(DEVICE), causal=True, backend="triton")


def test_relu_gradient_at_exact_zeros_follows_the_reference():
    """At x = 0 the reference (clamp(min=0)) passes the gradient; the kernels must agree (exact zeros do occur:
    CUDA's randn drew some among 256 M values and the gradients differed there)."""
    g = torch.Generator().manual_seed(5)
    q, k = (torch.randn(1, 70, 2, 16, generator=g) for _ in range(2))
    v = torch.randn(1, 70, 2, 16, generator=g)
    q[0, ::7, :, ::3] = 0.0
    k[0, ::5, :, ::4] = 0.0
    qd, kd, vd = (x.clone().to(DEVICE).requires_grad_() for x in (q, k, v))
    linear_attention(qd, kd, vd, feature_map="relu", backend="triton").sum().backward()
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    naive_linear_attention(q64, k64, v64, feature_map="relu").sum().backward()
    assert rel(qd.grad.cpu(), q64.grad) < 1e-4 and rel(kd.grad.cpu(), k64.grad) < 1e-4


def test_the_kernels_are_a_well_formed_custom_op():
    """torch.library.opcheck: schema, fake (shape-only) implementation, autograd registration and the dispatcher
    agree with the real kernels (what torch.compile and selective checkpointing rely on)."""
    from genolin.ops.linear_attn_triton import _linear_attention_fwd

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 37, 2, 16, generator=g, device="cpu").to(DEVICE).requires_grad_() for _ in range(3))
    mask = torch.ones(2, 37, dtype=torch.bool, device=DEVICE)
    mask[1, 30:] = False
    for m, fm, w in ((mask, "elu", None), (None, "favor", favor_projection(24, 16, seed=1).to(DEVICE))):
        torch.library.opcheck(_linear_attention_fwd, (q, k, v, m, w, fm, 1e-6),
                              test_utils=("test_schema", "test_faketensor", "test_autograd_registration"))


def test_compiled_function_calls_the_kernels_as_one_op():
    """A torch.compile'd function around the Triton backend: forward and gradients equal eager's, no graph break
    (the kernels are a custom op the compiler does not trace into)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    def f(q, k, v, mask):
        return (linear_attention(q.sin(), k, v, key_padding_mask=mask, backend="triton") * 2).sum()

    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 45, 2, 16, generator=g).to(DEVICE) for _ in range(3))
    mask = torch.ones(1, 45, dtype=torch.bool, device=DEVICE)
    mask[0, 40:] = False
    grads = []
    torch._dynamo.reset()
    counters.clear()
    for fn in (f, torch.compile(f, backend="aot_eager", fullgraph=True)):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        fn(*leaves, mask).backward()
        grads.append([x.grad for x in leaves])
    assert not counters["graph_break"]
    for eager, compiled in zip(*grads, strict=True):
        assert torch.isfinite(compiled).all()
        assert rel(compiled.cpu(), eager.cpu()) <= 1e-6


def test_eager_training_runs_the_ops_kernels_without_their_dispatch():
    """Eager autograd goes through a plain autograd Function (the ops' dispatch cost more host time than the kernels
    at training lengths): outputs and gradients equal the custom ops', bit for bit, with a mask and with FAVOR+."""
    from genolin.ops.linear_attn_triton import _EagerLinearAttention, _linear_attention_fwd

    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(2, 53, 2, 16, generator=g).to(DEVICE) for _ in range(3))
    do = torch.randn(2, 53, 2, 16, generator=g).to(DEVICE)
    mask = torch.ones(2, 53, dtype=torch.bool, device=DEVICE)
    mask[0, 41:] = False
    for m, fm, w in ((mask, "elu", None), (None, "favor", favor_projection(24, 16, seed=2).to(DEVICE))):
        results = []
        for path in ("op", "eager"):
            leaves = [x.clone().requires_grad_() for x in (q, k, v)]
            if path == "op":
                o = _linear_attention_fwd(*leaves, m, w, fm, 1e-6)[0]
            else:
                o = linear_attention(*leaves, feature_map="favor" if w is not None else fm, projection=w,
                                     key_padding_mask=m, backend="triton")
                assert o.grad_fn.name().startswith(_EagerLinearAttention.__name__), o.grad_fn.name()
            o.backward(do)
            results.append([o.detach(), *(x.grad for x in leaves)])
        for a, b in zip(*results, strict=True):
            assert torch.equal(a, b)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    (dq,) = torch.autograd.grad(linear_attention(*leaves, backend="triton").sum(), leaves[0], create_graph=True)
    with pytest.raises(RuntimeError):  # no second derivative: an error, not a silent zero
        dq.sum().backward()


EAGER_SCRIPT = """
import sys, torch
from genolin.ops import norm_conv
from genolin.ops.linear_attn_triton import _linear_attention_fwd, triton_linear_attention
from genolin.ops.norm_conv_triton import norm_conv_op
dev = sys.argv[1]
g = torch.Generator().manual_seed(0)
x, gain, w, bias = (torch.randn(*s, generator=g).to(dev) for s in ((2, 37, 24), (24,), (24, 1, 3), (24,)))
q, k, v = (torch.randn(2, 37, 2, 16, generator=g).to(dev) for _ in range(3))
mask = torch.ones(2, 37, dtype=torch.bool, device=dev)
mask[1, 30:] = False
with torch.no_grad():
    y = norm_conv(x, gain, 1e-6, w, bias, 1, mask, backend="triton")
    o = triton_linear_attention(q, k, v, key_padding_mask=mask)
    assert "torch._dynamo" not in sys.modules, "an eager kernel call imported torch._dynamo"
    assert torch.equal(y, norm_conv_op(x, gain, 1e-6, w, bias, 1, mask, x.dtype))
    assert torch.equal(o, _linear_attention_fwd(q, k, v, mask, None, "elu", 1e-6)[0])
print("ok")
"""


def test_eager_inference_launches_the_kernels_without_their_ops():
    """Eager calls without gradients launch the kernels directly (the same outputs as the custom ops): an op's
    first call imports torch's compiler stack, which eager prediction paid inside its first batch. A fresh
    interpreter, so no earlier test has imported it."""
    import subprocess
    import sys

    env = {**os.environ, "GENOLIN_TRITON_POISON": "1"}
    out = subprocess.run([sys.executable, "-c", EAGER_SCRIPT, DEVICE], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


def test_launch_arithmetic_equals_tritons():
    """genolin.ops.launch's plain-Python cdiv and next_power_of_2 (Triton's cost ~2.3 us a call) give Triton's."""
    import triton

    from genolin.ops.launch import cdiv, next_power_of_2

    assert all(next_power_of_2(n) == triton.next_power_of_2(n) for n in range(1, 5000))
    assert all(cdiv(a, b) == triton.cdiv(a, b) for a in range(0, 400) for b in range(1, 70))


def test_registers_and_spills_of_a_kernel_compiled_offline(tmp_path):
    """benchmarks/triton_registers.py compiles a kernel for sm_90 without a GPU and reads ptxas's registers and
    spills; the backward-only tile override reaches the backward's config and leaves the forward's."""
    import subprocess
    import sys
    from pathlib import Path

    from genolin.ops import linear_attn_triton as lat

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "triton_registers.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, str(script), "--maps", "elu", "--configs", "32x8", "--kernels",
                          "_output_kernel", "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=300,
                         env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    row = __import__("json").loads((tmp_path / "r.json").read_text())["rows"][0]
    assert row["kernel"] == "_output_kernel" and (row["block_n"], row["warps"]) == (32, 8)
    assert 16 <= row["registers"] <= 255 and row["spill_stores"] >= 0 and row["spill_loads"] >= 0
    assert "| elu | _output_kernel | 32 x 8 |" in (tmp_path / "r.md").read_text()

    fwd, bwd = lat._config(64, 64, 128, backward=False), lat._config(64, 64, 128, backward=True)
    os.environ.update(GENOLIN_TRITON_BWD_BLOCK_N="32", GENOLIN_TRITON_BWD_WARPS="8")
    try:
        assert lat._config(64, 64, 128, backward=False) == fwd
        assert lat._config(64, 64, 128, backward=True) == {**bwd, "BLOCK_N": 32, "num_warps": 8}
    finally:
        del os.environ["GENOLIN_TRITON_BWD_BLOCK_N"], os.environ["GENOLIN_TRITON_BWD_WARPS"]
