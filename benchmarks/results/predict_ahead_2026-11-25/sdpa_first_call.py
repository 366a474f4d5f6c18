"""First-call and steady cost of each SDPA backend at the hybrid mixer's local-window shape, each backend in a fresh
process (a first call's set-up, e.g. cuDNN's plan, is per process): windows of 128 tokens, 8 heads of 32, bf16,
batch 32 (or 64: RC) genome windows of 8,192 tokens -> 2,048 (4,096) attention windows; with and without a key mask.

    python sdpa_first_call.py            # runs every backend in a subprocess, prints a table
"""
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def one(backend: str, rows: int, masked: bool) -> None:
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)  # context
    q, k, v = (torch.randn(rows, 8, 128, 32, device=dev, dtype=torch.bfloat16) for _ in range(3))
    mask = torch.ones(rows, 1, 1, 128, dtype=torch.bool, device=dev) if masked else None
    if masked:
        mask[: rows // 3, ..., 100:] = False
    torch.cuda.synchronize()
    with sdpa_kernel(getattr(SDPBackend, backend)):
        t0 = time.perf_counter()
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(20):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        torch.cuda.synchronize()
        steady = (time.perf_counter() - t0) / 20
    print(f"| {backend} | {rows} | {masked} | {first * 1e3:.1f} | {steady * 1e3:.3f} |")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1")
    else:
        print("| backend | attention windows | key mask | first call ms | steady ms |\n|---|---:|---|---:|---:|")
        for b in ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"):
            for rows, masked in ((4096, False), (4096, True), (2048, False)):
                r = subprocess.run([sys.executable, __file__, b, str(rows), "1" if masked else "0"],
                                   capture_output=True, text=True)
                print(r.stdout.strip() or f"| {b} | {rows} | {masked} | failed: {r.stderr.strip().splitlines()[-1]} |")
