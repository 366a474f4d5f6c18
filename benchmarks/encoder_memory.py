"""Peak memory (RSS) and time of encoder inference on long inputs: d_model 256, 6 layers, float32, CPU or GPU.

Each (mixer, N) runs in a fresh subprocess so its peak RSS is its own. Prints a table and writes JSON.

    python benchmarks/encoder_memory.py                       # N = 100,000 and 1,000,000; linear, favor, hybrid
    python benchmarks/encoder_memory.py --n 100000 --mixers linear
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import versions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def one(mixer: str, n: int, chunk: int, device: str) -> dict:
    import torch

    from genolin.model import Encoder, EncoderConfig

    torch.manual_seed(0)
    cfg = EncoderConfig(d_model=256, n_layers=6, n_heads=8, mixer=mixer, chunk_tokens=chunk, track_channels=2)
    model = Encoder(cfg).to(device).eval()
    ids = torch.randint(5, cfg.vocab_size, (1, n), device=device)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = model(ids)
        finite = bool(torch.isfinite(out.track).all())
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    activation = n * cfg.d_model * 4  # one (N, d_model) float32 tensor
    row = {"mixer": mixer, "n_tokens": n, "chunk_size": chunk, "device": device, "seconds": seconds,
           "peak_rss_bytes": peak, "rss_before_bytes": baseline, "activation_bytes": activation,
           "peak_rss_over_activation": (peak - baseline) / activation, "finite": finite,
           "parameters": model.n_parameters()}
    if device == "cuda":
        row["cuda_peak_bytes"] = torch.cuda.max_memory_allocated()
        row["cuda_peak_over_activation"] = row["cuda_peak_bytes"] / activation
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--mixers", nargs="+", default=["linear", "favor", "hybrid"])
    ap.add_argument("--chunk", type=int, default=16384)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "encoder_memory" / "latest.json")
    ap.add_argument("--one", nargs=2, metavar=("MIXER", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.chunk, args.device)))
        return
    import torch

    rows = []
    print(f"{'mixer':<8} {'N':>9} {'seconds':>8} {'peak RSS GiB':>13} {'x (N,d) act.':>13}")
    for n in args.n:
        for mixer in args.mixers:
            cmd = [sys.executable, __file__, "--one", mixer, str(n), "--chunk", str(args.chunk),
                   "--device", args.device]
            row = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            rows.append(row)
            print(f"{mixer:<8} {n:>9,} {row['seconds']:8.1f} {row['peak_rss_bytes'] / 2**30:13.2f} "
                  f"{row['peak_rss_over_activation']:13.2f}")
    from genolin.bench import cpu_name

    result = {**versions("encoder_memory"), "cpu": platform.processor() or cpu_name(),
              "threads": torch.get_num_threads(), "config": {"d_model": 256, "n_layers": 6, "n_heads": 8,
                                                             "dtype": "float32"}, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
