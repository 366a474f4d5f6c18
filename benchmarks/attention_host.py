"""Host cost of genolin's Triton attention at training lengths: the same kernels called through the eager autograd
Function (what training uses), through the custom ops (what torch.compile sees), and without autograd.

At short lengths the GPU finishes the kernels before the host has issued them, so these timings measure the host:
Triton's launcher, allocations, the autograd engine. Per path and map: median of CUDA-event timings
(triton.testing.do_bench) and the host's issue time per call (200 calls, no synchronisation); then the top of a
cProfile of the Function path.

    python benchmarks/attention_host.py --n 16384 --out benchmarks/results/attention_host/h200
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import attention_inputs, attention_options, now, write_result  # noqa: E402

from genolin.ops import favor_projection, linear_attention  # noqa: E402
from genolin.ops import linear_attn_triton as lat  # noqa: E402


def paths(q, k, v, do, fm, w):
    """name -> a closure running one call of that path."""
    qd, kd, vd = q.detach(), k.detach(), v.detach()
    _, sz, mk = lat._forward_kernels(qd, kd, vd, None, w, fm, 1e-6)

    def function():
        torch.autograd.backward(linear_attention(q, k, v, feature_map=fm, projection=w, backend="triton"), do)
        q.grad = k.grad = v.grad = None

    def ops():
        torch.autograd.backward(lat._linear_attention_fwd(q, k, v, None, w, fm, 1e-6)[0], do)
        q.grad = k.grad = v.grad = None

    def forward():
        with torch.no_grad():
            linear_attention(q, k, v, feature_map=fm, projection=w, backend="triton")

    return {"fwd+bwd, autograd Function": function, "fwd+bwd, custom ops": ops, "fwd, no grad": forward,
            "fwd kernels alone": lambda: lat._forward_kernels(qd, kd, vd, None, w, fm, 1e-6),
            "bwd kernels alone": lambda: lat._backward_kernels(qd, kd, vd, None, w, sz, mk, do, fm, 1e-6)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    attention_options(ap, n=[16_384])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    rows, profiles = [], {}
    lines = ["| map | N | path | do_bench ms | host issue ms/call |", "|---|---:|---|---:|---:|"]
    for n in args.n:
        q, k, v, do = attention_inputs((args.b, n, args.h, args.d), seed=n)
        for fm in args.maps:
            w = favor_projection(128, args.d, seed=0, device="cuda") if fm == "favor" else None
            calls = paths(q, k, v, do, fm, w)
            for name, fn in calls.items():
                for _ in range(5):
                    fn()
                torch.cuda.synchronize()
                ms = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")
                t0 = time.perf_counter()
                for _ in range(200):
                    fn()
                host = (time.perf_counter() - t0) / 200 * 1e3
                torch.cuda.synchronize()
                rows.append({"map": fm, "N": n, "path": name, "do_bench_ms": ms, "host_issue_ms": host})
                lines.append(f"| {fm} | {n:,} | {name} | {ms:.3f} | {host:.3f} |")
                print(lines[-1], flush=True)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(200):
                calls["fwd+bwd, autograd Function"]()
            torch.cuda.synchronize()
            prof.disable()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
            profiles[f"{fm} N={n}"] = text.getvalue()
    meta = {"date": now(), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__, "B": args.b, "H": args.h, "D": args.d}
    print(json.dumps(meta))
    if args.out:
        write_result(args.out, {"meta": meta, "rows": rows, "profiles": profiles},
                     f"# Attention host cost ({meta['gpu']}, {meta['date']})\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
