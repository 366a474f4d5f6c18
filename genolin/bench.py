"""Benchmarks: the attention comparison behind ``genolin bench attention``.

For each attention variant and sequence length N, on random q, k (B, N, H, D) and v (B, N, H, E):
forward time, forward+backward time, peak memory beyond the inputs, and the approximation error to exact
softmax attention (relative RMS error and cosine similarity of the outputs) where softmax fits (N up to
``softmax_max_n``). Times are medians of repeated runs (CUDA events on a GPU). Peak memory is the CUDA
allocator's peak on a GPU and the process's peak resident memory (VmHWM, reset between runs) on a CPU.
The result is a dict (written as JSON) and a log-log plot of time against N with fitted slopes.

The "hybrid" row is a cost proxy for the hybrid mixer: the plain average of softmax inside windows and global
elu attention (the model learns a gate instead), so its error column is no approximation claim. The rows of the
other mixers run the op as the mixer does, with fixed random stand-ins for what the model would compute from
its input: gla, deltanet, gated_deltanet (both scan directions; decays and write strengths drawn once; q and k
l2-normalised for the delta rule), linformer (64 projected rows, N(0, 1) projections), fnet (v's (N, H x E) as
the hidden states), synthesizer (dense: each query's logits over the N positions from a random (D, N) map,
the cost of the dense synthesizer's second layer). The error to softmax is reported for the variants that
approximate it (elu, relu, exp, favor, linformer; hybrid as said), not for the mixers that compute something
else. On CUDA, gla and the delta rules run flash-linear-attention's kernels where it is installed; the other
rows run genolin's default path (linear attention: the Triton kernels on CUDA).
"""

from __future__ import annotations

import datetime as dt
import gc
import importlib
import logging
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from genolin import __version__
from genolin.ops import (
    bidirectional_scan,
    delta_rule,
    favor_projection,
    fnet_mixing,
    gla,
    linear_attention,
    linformer_attention,
    local_softmax_attention,
    softmax_attention,
    synthesizer_attention,
)
from genolin.ops.delta_rule import delta_rule_backend
from genolin.ops.gla import pick_backend

log = logging.getLogger(__name__)

VARIANTS = ("softmax", "elu", "relu", "exp", "favor", "hybrid", "gla", "deltanet", "gated_deltanet", "linformer",
            "fnet", "synthesizer")
APPROXIMATES_SOFTMAX = ("softmax", "elu", "relu", "exp", "favor", "hybrid", "linformer")
LINFORMER_ROWS = 64


def _mixer_fn(variant: str, q: torch.Tensor, v: torch.Tensor) -> Callable:
    """(q, k, v) -> o for the mixers beyond linear attention, their input-dependent parts drawn once here."""
    b, n, h, d = q.shape
    g = torch.Generator(device="cpu").manual_seed(n)

    def draw(*shape):
        return torch.randn(*shape, generator=g).to(q.device)

    if variant == "gla":
        from genolin.model import GLA_GATE_NORMALIZER, GLA_MIN_LOG_DECAY  # the gla mixer's gate, as it bounds it

        decay = (torch.nn.functional.logsigmoid(draw(b, n, h, d)) / GLA_GATE_NORMALIZER).clamp(min=GLA_MIN_LOG_DECAY)
        return lambda q, k, v: bidirectional_scan(gla, q, k, v, g=decay)
    if variant in ("deltanet", "gated_deltanet"):
        beta = torch.sigmoid(draw(b, n, h)).to(q.dtype)
        decay = -0.1 * torch.rand(b, n, h, generator=g).to(q.device) if variant == "gated_deltanet" else None

        def scan(q, k, v):
            q, k = (torch.nn.functional.normalize(x, dim=-1) for x in (q, k))
            return bidirectional_scan(delta_rule, q, k, v, beta=beta, g=decay)
        return scan
    if variant == "linformer":
        e, f = draw(LINFORMER_ROWS, n).to(q.dtype), draw(LINFORMER_ROWS, n).to(q.dtype)
        return lambda q, k, v: linformer_attention(q, k, v, e, f)
    if variant == "fnet":
        return lambda q, k, v: fnet_mixing(v.reshape(b, n, -1)).view(v.shape)
    if variant == "synthesizer":
        w = draw(h, d, n).to(q.dtype) * d ** -0.5
        return lambda q, k, v: synthesizer_attention(torch.einsum("bnhd,hdm->bhnm", q, w), v)
    raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")


def _scan_backends(variant: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> dict:
    """Which code runs a scan mixer's forward and backward here ("fla" or "reference"), as the ops choose them."""
    if variant == "gla":
        chosen = pick_backend("auto", q)
        return {"backend": chosen, "backward_backend": chosen}
    if variant not in ("deltanet", "gated_deltanet"):
        return {}
    gated = variant == "gated_deltanet"
    return {"backend": delta_rule_backend("auto", q, k, v, gated=gated, needs_grad=False),
            "backward_backend": delta_rule_backend("auto", q, k, v, gated=gated, needs_grad=True)}


def _attention_fn(variant: str, *, head_dim: int, favor_features: int, window: int, chunk_size: int | None,
                  device, q: torch.Tensor, v: torch.Tensor) -> Callable:
    """A function (q, k, v) -> o for one variant (q, v: the benchmark's inputs, for the shapes of fixed draws)."""
    if variant == "softmax":
        return softmax_attention
    if variant in ("elu", "relu", "exp"):
        return lambda q, k, v: linear_attention(q, k, v, feature_map=variant, chunk_size=chunk_size)
    if variant == "favor":
        w = favor_projection(favor_features, head_dim, seed=0, device=device)
        return lambda q, k, v: linear_attention(q, k, v, feature_map="favor", projection=w, chunk_size=chunk_size)
    if variant == "hybrid":
        def hybrid(q, k, v):
            glob = linear_attention(q, k, v, feature_map="elu", chunk_size=chunk_size)
            return 0.5 * (local_softmax_attention(q, k, v, window) + glob)
        return hybrid
    return _mixer_fn(variant, q, v)


class _Memory:
    """Peak memory of a region beyond what was allocated when it started."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def start(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            gc.collect()
            try:
                with open("/proc/self/clear_refs", "w") as fh:
                    fh.write("5")  # reset the peak resident set size (Linux)
            except OSError:
                pass
            self.base = _status_kib("VmRSS")

    def peak(self) -> int | None:
        if self.cuda:
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated() - self.base
        hwm = _status_kib("VmHWM")
        # VmHWM restarts at the resident size of the reset; pages freed since can put it a little under the base
        return None if hwm is None or self.base is None else max(hwm - self.base, 0) * 1024


def _status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _time(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median milliseconds of fn() after one warm-up run."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def run_attention_benchmark(
    *,
    lengths: Sequence[int],
    variants: Sequence[str] = VARIANTS,
    batch: int = 1,
    heads: int = 8,
    head_dim: int = 64,
    value_dim: int | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    repeats: int = 5,
    favor_features: int = 128,
    window: int = 128,
    chunk_size: int | None = None,
    softmax_max_n: int = 8192,
    backward: bool = True,
    input_scale: float = 0.5,
    seed: int = 0,
    on_length: Callable[[dict], None] | None = None,
) -> dict:
    """Run the comparison; returns {"meta": ..., "rows": [...]} (one row per variant and N).

    ``on_length(result)`` is called after each N with the rows so far (``meta["complete"]`` False until the last),
    so a caller can write what finished before a time limit.

    q and k are drawn N(0, input_scale^2): moderate norms, where FAVOR+ is meant to approximate softmax
    (its estimator variance grows like exp(|q|^2 / sqrt(D))).
    """
    dev = torch.device(device)
    settings = dict(batch=batch, heads=heads, head_dim=head_dim, value_dim=value_dim or head_dim, dtype=dtype,
                    repeats=repeats, favor_features=favor_features, window=window, chunk_size=chunk_size,
                    softmax_max_n=softmax_max_n, input_scale=input_scale, seed=seed)
    result = {"meta": {**_meta(dev, **settings), "complete": False}, "rows": []}
    # every CPU measurement starts with a full collection; objects alive before the run are not the run's garbage,
    # and setting them aside keeps a collection in a process holding many (a test session) at milliseconds
    gc.freeze()
    try:
        for i, n in enumerate(lengths):
            result["rows"] += _rows_for_length(n, variants, dev, backward=backward, **settings)
            result["meta"]["complete"] = i == len(lengths) - 1
            if on_length is not None:
                on_length(result)
    finally:
        gc.unfreeze()
    return result


def _rows_for_length(n, variants, dev, *, batch, heads, head_dim, value_dim, dtype, repeats, favor_features, window,
                     chunk_size, softmax_max_n, input_scale, seed, backward) -> list[dict]:
    tdtype = getattr(torch, dtype)
    g = torch.Generator(device="cpu").manual_seed(seed + n)
    q, k = (torch.randn(batch, n, heads, head_dim, generator=g).mul(input_scale).to(dev, tdtype) for _ in range(2))
    v = torch.randn(batch, n, heads, value_dim, generator=g).to(dev, tdtype)
    grad = torch.randn(batch, n, heads, value_dim, generator=g).to(dev, tdtype)
    exact = softmax_attention(q.float(), k.float(), v.float()).double() if n <= softmax_max_n else None
    memory = _Memory(dev)
    rows = []
    for variant in variants:
        if variant in ("softmax", "synthesizer") and n > softmax_max_n:  # quadratic
            continue
        fn = _attention_fn(variant, head_dim=head_dim, favor_features=favor_features, window=window,
                           chunk_size=chunk_size, device=dev, q=q, v=v)
        row = {"variant": variant, "n": n, **_scan_backends(variant, q, k, v)}
        with torch.no_grad():
            memory.start()
            out = fn(q, k, v)
            row["forward_peak_bytes"] = memory.peak()
            row["forward_ms"] = _time(lambda fn=fn: fn(q, k, v), dev, repeats)
        if exact is not None and variant in APPROXIMATES_SOFTMAX:
            o = out.double()
            row["rel_error_to_softmax"] = ((o - exact).norm() / exact.norm()).item()
            row["cosine_to_softmax"] = torch.nn.functional.cosine_similarity(o.flatten(), exact.flatten(),
                                                                             dim=0).item()
        del out
        if backward:
            qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

            def fwd_bwd(fn=fn, qg=qg, kg=kg, vg=vg):
                torch.autograd.backward(fn(qg, kg, vg), grad)
                qg.grad = kg.grad = vg.grad = None

            memory.start()
            fwd_bwd()
            row["forward_backward_peak_bytes"] = memory.peak()
            row["forward_backward_ms"] = _time(fwd_bwd, dev, repeats)
        rows.append(row)
        log.info("%-8s N=%-9d fwd %9.2f ms  fwd+bwd %9s ms", variant, n, row["forward_ms"],
                 f"{row['forward_backward_ms']:.2f}" if backward else "-")
    return rows


def _meta(dev: torch.device, **settings) -> dict:
    meta = {"benchmark": "attention", "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "genolin": __version__, "torch": torch.__version__, "python": platform.python_version(),
            "device": dev.type, "cpu": cpu_name(), "threads": torch.get_num_threads(), **settings}
    if dev.type == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(dev)
        meta["cuda"] = torch.version.cuda
    for package in ("triton", "fla"):  # fla: flash-linear-attention, the CUDA kernels of gla and the delta rules
        try:
            meta[package] = importlib.import_module(package).__version__
        except ImportError:
            pass
    return meta


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (benchmarks record it), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fitted_slopes(rows: list[dict], key: str, min_n: int = 4096) -> dict[str, float]:
    """Slope of log(time) against log(N) per variant, over N >= min_n (all N if fewer than two such)."""
    import numpy as np

    slopes = {}
    for variant in dict.fromkeys(r["variant"] for r in rows):
        pts = [(r["n"], r[key]) for r in rows if r["variant"] == variant and r.get(key)]
        big = [p for p in pts if p[0] >= min_n]
        pts = big if len(big) >= 2 else pts
        if len(pts) >= 2:
            x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
            slopes[variant] = float(np.polyfit(x, y, 1)[0])
    return slopes


def format_table(result: dict) -> str:
    """A fixed-width table of the rows."""
    head = (f"{'variant':<14} {'N':>9} {'fwd ms':>10} {'fwd+bwd ms':>11} {'fwd MiB':>9} {'f+b MiB':>9} "
            f"{'rel.err':>8} {'cosine':>7}")
    lines = [head, "-" * len(head)]

    def mib(x):
        return f"{x / 2**20:9.1f}" if x is not None else f"{'-':>9}"

    for r in result["rows"]:
        err = f"{r['rel_error_to_softmax']:8.4f}" if "rel_error_to_softmax" in r else f"{'-':>8}"
        cos = f"{r['cosine_to_softmax']:7.4f}" if "cosine_to_softmax" in r else f"{'-':>7}"
        fb = f"{r['forward_backward_ms']:11.2f}" if "forward_backward_ms" in r else f"{'-':>11}"
        lines.append(f"{r['variant']:<14} {r['n']:>9,} {r['forward_ms']:10.2f} {fb} {mib(r['forward_peak_bytes'])} "
                     f"{mib(r.get('forward_backward_peak_bytes'))} {err} {cos}")
    for key, label in (("forward_ms", "forward"), ("forward_backward_ms", "forward+backward")):
        slopes = fitted_slopes(result["rows"], key)
        if slopes:
            lines.append(f"log-log slope of {label} time vs N: "
                         + ", ".join(f"{v} {s:.2f}" for v, s in slopes.items()))
    return "\n".join(lines)


def plot(result: dict, path: str | Path) -> Path:
    """Log-log plot of forward (and forward+backward) time against N, slopes in the legend; writes a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from genolin.io.atomic import atomic_path

    keys = [k for k in ("forward_ms", "forward_backward_ms") if any(k in r for r in result["rows"])]
    fig, axes = plt.subplots(1, len(keys), figsize=(6.2 * len(keys), 4.6), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        slopes = fitted_slopes(result["rows"], key)
        for variant in dict.fromkeys(r["variant"] for r in result["rows"]):
            pts = sorted((r["n"], r[key]) for r in result["rows"] if r["variant"] == variant and key in r)
            if pts:
                label = f"{variant} (slope {slopes[variant]:.2f})" if variant in slopes else variant
                ax.loglog(*zip(*pts, strict=True), marker="o", label=label)
        ax.set_xlabel("sequence length N (tokens)")
        ax.set_ylabel("time (ms)")
        ax.set_title("forward" if key == "forward_ms" else "forward + backward")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    meta = result["meta"]
    where = meta.get("gpu") or f"{meta['cpu']} ({meta['threads']} threads)"
    fig.suptitle(f"genolin attention, B={meta['batch']} H={meta['heads']} D={meta['head_dim']} {meta['dtype']}, "
                 f"{where}", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return path


def write_result(result: dict, json_path: str | Path) -> Path:
    from genolin.io.atomic import write_json

    write_json(json_path, result)
    return Path(json_path)


def default_lengths(device: str) -> list[int]:
    if device.startswith("cuda"):
        return [2**p for p in range(12, 19, 2)] + [1_000_000]  # 4 K .. 256 K, then 1 M
    return [1024, 4096, 16384, 65536, 262144]


__all__ = ["APPROXIMATES_SOFTMAX", "VARIANTS", "cpu_name", "default_lengths", "fitted_slopes", "format_table", "plot",
           "run_attention_benchmark", "write_result"]
