"""Where the time of genolin's Triton attention goes: each kernel's GPU time, the bytes it must move, and the
launch overhead of the whole op (eager against CUDA-graph replay).

Per kernel: median over repetitions of the CUDA time the PyTorch profiler records, and bytes moved / time
against the copy bandwidth measured in the same run; registers and spills from Triton's compiled kernels.

    python benchmarks/triton_breakdown.py --n 16384 131072 1048576 --maps elu favor \\
        --out benchmarks/results/triton_breakdown/h200
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import attention_inputs, attention_options, copy_bandwidth, now, write_result  # noqa: E402

from genolin.ops import favor_projection, linear_attention  # noqa: E402
from genolin.ops import linear_attn_triton as lat  # noqa: E402

KERNELS = {  # kernel -> tensors of (B, N, H, 64) it reads or writes in bf16 (the per-head states are small)
    "_state_kernel": 2, "_output_kernel": 2, "_query_grad_kernel": 3, "_key_grad_kernel": 4, "_reduce_kernel": 0}


def graph_ms(fn, reps: int = 20) -> float:
    """Median ms of a CUDA-graph replay of fn (no Python or launch overhead)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return triton.testing.do_bench(g.replay, warmup=5, rep=reps * 5, return_mode="median")


def measure(q, k, v, do, fm, w, args, bw) -> dict:
    """Eager and graph timings of one feature map, and each kernel's median CUDA time under the profiler."""
    n = q.shape[1]
    tensor_bytes = q.numel() * q.element_size()

    def fwd():
        with torch.no_grad():
            return linear_attention(q, k, v, feature_map=fm, projection=w, backend="triton")

    def fwdbwd():
        torch.autograd.backward(linear_attention(q, k, v, feature_map=fm, projection=w, backend="triton"), do)
        q.grad = k.grad = v.grad = None

    fwdbwd()
    torch.cuda.synchronize()
    times = defaultdict(list)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(args.reps):
            fwdbwd()
        torch.cuda.synchronize()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            times[ev.name].append(ev.device_time_total / 1e3)
    row = {"map": fm, "B": args.b, "N": n, "H": args.h, "D": args.d,
           "fwd_ms": triton.testing.do_bench(fwd, warmup=10, rep=100, return_mode="median"),
           "fwd_graph_ms": graph_ms(fwd),
           "fwdbwd_ms": triton.testing.do_bench(fwdbwd, warmup=5, rep=100, return_mode="median"),
           "kernels": {}}
    for name, ts in sorted(times.items()):
        short = next((kname for kname in KERNELS if kname in name), name[:60])
        ms = statistics.median(ts)
        entry = {"ms": ms, "calls": len(ts) // args.reps}
        if KERNELS.get(short):
            entry["TBps"] = KERNELS[short] * tensor_bytes / (ms / 1e3) / 1e12
        row["kernels"][short] = entry
    print(f"{fm} N={n:,}: fwd {row['fwd_ms']:.3f} ms (graph {row['fwd_graph_ms']:.3f}), "
          f"fwd+bwd {row['fwdbwd_ms']:.3f} ms; floor fwd {4 * tensor_bytes / bw * 1e3:.3f}, "
          f"fwd+bwd {11 * tensor_bytes / bw * 1e3:.3f}")
    for kname, entry in row["kernels"].items():
        tb = f"{entry['TBps']:.2f} TB/s" if "TBps" in entry else ""
        print(f"    {kname:<40} {entry['ms']:8.3f} ms  x{entry['calls']}  {tb}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    attention_options(ap, n=[1_048_576])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    bw = copy_bandwidth()
    rows = []
    for n in args.n:
        q, k, v, do = attention_inputs((args.b, n, args.h, args.d), seed=n)
        for fm in args.maps:
            w = favor_projection(128, args.d, seed=0, device="cuda") if fm == "favor" else None
            rows.append(measure(q, k, v, do, fm, w, args, bw))
    compiled = {}
    for kname in KERNELS:
        fn = getattr(lat, kname)
        try:  # Triton's per-device cache of compiled kernels (internal; its layout varies between versions)
            for dev_cache in fn.device_caches.values():
                for kern in dev_cache[0].values():
                    kern._init_handles()
                    compiled.setdefault(kname, []).append(
                        {"regs": kern.n_regs, "spills": kern.n_spills, "shared": kern.metadata.shared,
                         "warps": kern.metadata.num_warps, "stages": kern.metadata.num_stages})
        except (AttributeError, IndexError, TypeError) as exc:
            print(f"  {kname}: no compile report ({exc})")
    for kname, entries in compiled.items():
        for e in entries:
            print(f"  {kname:<20} regs {e['regs']:4d} spills {e['spills']:4d} shared {e['shared']:6d} "
                  f"warps {e['warps']} stages {e['stages']}")
    meta = {"date": now(), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton.__version__, "copy_bandwidth_GBps": bw / 1e9}
    print(json.dumps(meta))
    if args.out:
        write_result(args.out, {"meta": meta, "rows": rows, "compiled": compiled})


if __name__ == "__main__":
    main()
