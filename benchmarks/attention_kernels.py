"""Bidirectional linear attention on a GPU: genolin's Triton kernels against the alternatives and the HBM floor.

B = 1, H = 8, D = E = 64, bf16, N in {16 K, 128 K, 1 M}, plus B = 8 at 128 K. For each method: forward and
forward+backward time (median of CUDA-event timings, triton.testing.do_bench), peak memory beyond the inputs and
outputs (o; and dq, dk, dv with backward), and the error of genolin's outputs against the float32 reference.
The floor: the bytes a pass must move (forward reads q, k, v and writes o; backward reads q, k, v, do and writes
dq, dk, dv) over the device-to-device copy bandwidth measured in the same run.

Methods: genolin triton (elu; FAVOR+ with M = 128), genolin reference (PyTorch), the plain einsum formula (the code
of design document 000, written here), exact softmax (SDPA, N <= 256 K), performer-pytorch's FastAttention (M = 128;
`pip install -e ".[bench]"` brings it and the hyper-connections package its import chain needs). Causal: genolin's
fla path (fla's chunk_simple_gla numerator + genolin's float32 denominator and state), genolin's PyTorch reference
(chunks of 128), and fla's own normalised chunk_linear_attn (elu+1 applied before). Errors: each genolin method and
fla's against the float32 reference of its kind (bidirectional or causal).

    python benchmarks/attention_kernels.py --out benchmarks/results/attention_kernels/h200
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import attention_inputs, copy_bandwidth, now, write_result  # noqa: E402

from genolin import __version__  # noqa: E402
from genolin.ops import causal_linear_attention, favor_projection, linear_attention, softmax_attention  # noqa: E402

SIZES = [(1, 16_384), (1, 131_072), (1, 1_048_576), (8, 131_072)]
H, D = 8, 64


def einsum_reference(q, k, v, eps=1e-6):
    """The textbook formula with einsum: elu + 1 features, S = phi(K)^T V, z = sum phi(K)."""
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    s = torch.einsum("bnhd,bnhe->bhde", fk, v)
    z = fk.sum(dim=1)
    num = torch.einsum("bnhd,bhde->bnhe", fq, s)
    den = torch.einsum("bnhd,bhd->bnh", fq, z)
    return num / (den.unsqueeze(-1) + eps)


def methods(n: int):
    w = favor_projection(128, D, seed=0, device="cuda")
    out = {
        "genolin triton elu": lambda q, k, v: linear_attention(q, k, v, feature_map="elu", backend="triton"),
        "genolin triton favor M=128": lambda q, k, v: linear_attention(q, k, v, feature_map="favor", projection=w,
                                                                       backend="triton"),
        "genolin reference elu": lambda q, k, v: linear_attention(q, k, v, feature_map="elu", backend="reference",
                                                                  chunk_size=65536),
        "einsum (design doc 000)": einsum_reference,
    }
    if n <= 262_144:
        out["softmax (SDPA)"] = softmax_attention
    if n <= 131_072:  # a Python loop over chunks of 128: 2 s forward + backward at 128 K
        out["genolin reference elu (causal)"] = lambda q, k, v: causal_linear_attention(q, k, v,
                                                                                        backend="reference")[0]
    try:
        from fla.ops.linear_attn import chunk_linear_attn

        def fla(q, k, v):
            return chunk_linear_attn(F.elu(q) + 1, F.elu(k) + 1, v, scale=1.0, normalize=True)[0]

        out["genolin fla elu (causal)"] = lambda q, k, v: causal_linear_attention(q, k, v, backend="fla")[0]
        out["fla chunk_linear_attn (causal)"] = fla
    except Exception as exc:  # noqa: BLE001 - an optional comparison
        print(f"fla not available: {exc}")
    try:
        from performer_pytorch import FastAttention

        performer = FastAttention(dim_heads=D, nb_features=128, causal=False).cuda()

        def perf(q, k, v):
            return performer(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)

        out["performer-pytorch FastAttention M=128"] = perf
    except Exception as exc:  # noqa: BLE001
        print(f"performer-pytorch not available: {exc}")
    return out


# genolin's fla causal path refuses gradients (fla's chunk_simple_gla backward faulted in the GPU tests): forward only
INFERENCE_ONLY = {"genolin fla elu (causal)"}


def measure(fn, q, k, v, do, backward: bool):
    """(median ms, peak bytes allocated beyond the inputs and the outputs: o, and dq, dk, dv with backward)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    if backward:
        def run():
            torch.autograd.backward(fn(q, k, v), do)
            q.grad = k.grad = v.grad = None
    else:
        def run():
            with torch.no_grad():
                fn(q, k, v)
    run()
    torch.cuda.synchronize()
    outputs = do.numel() * do.element_size() * (4 if backward else 1)
    peak = torch.cuda.max_memory_allocated() - base - outputs
    ms = triton.testing.do_bench(run, warmup=10, rep=100, return_mode="median")
    return ms, peak


def write(prefix: str, rows: list[dict], bw: float) -> str:
    """PREFIX.json and PREFIX.md of the rows so far; returns the markdown."""
    meta = {"benchmark": "attention_kernels", "date": now(),
            "genolin": __version__, "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(), "python": platform.python_version(),
            "copy_bandwidth_GBps": bw / 1e9, "dtype": "bfloat16"}
    lines = [f"# Linear attention kernels, {meta['gpu']}, {meta['date']}", "",
             f"torch {meta['torch']}, triton {meta['triton']}, CUDA {meta['cuda']}, genolin {__version__}; bf16, "
             f"H = {H}, D = E = {D}; copy bandwidth {bw / 1e9:.0f} GB/s (read + write); medians of CUDA-event "
             "timings; memory = peak allocated beyond q, k, v, do and the outputs (o; dq, dk, dv); no fwd+bwd for "
             "inference-only paths.", "",
             "| method | B | N | fwd ms | fwd+bwd ms | fwd floor | f+b floor | fwd MiB | f+b MiB | rel. err |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['method']} | {r['B']} | {r['N']:,} | {r['error']} | | | | | | |")
            continue
        err = f"{r['rel_err_vs_fp32_reference']:.1e}" if "rel_err_vs_fp32_reference" in r else ""
        fb = (f"{r['fwdbwd_ms']:.3f}", f"{r['fwdbwd_extra_bytes'] / 2**20:.1f}") if "fwdbwd_ms" in r else ("-", "-")
        lines.append(f"| {r['method']} | {r['B']} | {r['N']:,} | {r['fwd_ms']:.3f} | {fb[0]} | "
                     f"{r['floor_fwd_ms']:.3f} | {r['floor_fwdbwd_ms']:.3f} | {r['fwd_extra_bytes'] / 2**20:.1f} | "
                     f"{fb[1]} | {err} |")
    text = "\n".join(lines) + "\n"
    write_result(prefix, {"meta": meta, "rows": rows}, text)
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="benchmarks/results/attention_kernels/latest")
    ap.add_argument("--only", default="", help="comma-separated substrings: time only the methods naming one")
    args = ap.parse_args()
    only = [w for w in args.only.split(",") if w]
    bw = copy_bandwidth()
    rows = []
    for b, n in SIZES:
        q, k, v, do = attention_inputs((b, n, H, D), seed=n + b)
        elems = b * n * H * D
        floor_fwd = elems * 4 * 2 / bw * 1e3  # read q, k, v + write o, bf16
        floor_fb = floor_fwd + elems * 7 * 2 / bw * 1e3  # + read q, k, v, do + write dq, dk, dv
        q32, k32, v32 = (x.detach().float() for x in (q, k, v))
        refs = {False: linear_attention(q32, k32, v32, backend="reference", chunk_size=65536),
                True: causal_linear_attention(q32, k32, v32, backend="reference", chunk_size=256)[0]}
        del q32, k32, v32
        for name, fn in methods(n).items():
            if only and not any(w in name for w in only):
                continue
            row = {"method": name, "B": b, "N": n, "H": H, "D": D, "floor_fwd_ms": floor_fwd,
                   "floor_fwdbwd_ms": floor_fb}
            try:
                row["fwd_ms"], row["fwd_extra_bytes"] = measure(fn, q, k, v, do, backward=False)
                if name not in INFERENCE_ONLY:
                    row["fwdbwd_ms"], row["fwdbwd_extra_bytes"] = measure(fn, q, k, v, do, backward=True)
                if name.startswith(("genolin", "fla")) and "favor" not in name:
                    ref = refs["causal" in name]
                    with torch.no_grad():
                        o = fn(q, k, v).float()
                    row["rel_err_vs_fp32_reference"] = ((o - ref).norm() / ref.norm()).item()
            except torch.cuda.OutOfMemoryError:
                row["error"] = "out of memory"
                torch.cuda.empty_cache()
            rows.append(row)
            print(json.dumps(row), flush=True)
            write(args.out, rows, bw)  # after every row: a time limit keeps what was measured
        del q, k, v, do, refs
        torch.cuda.empty_cache()
    print(write(args.out, rows, bw))


if __name__ == "__main__":
    main()
