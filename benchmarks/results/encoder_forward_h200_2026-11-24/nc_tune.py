"""norm_conv's kernel alone on a genome batch (128 x 4,096 tokens, d 256, float32 in, bf16 out): BLOCK_N x num_warps
sweep, and the modules' eager path. The last line is 'BEST BLOCK_N NUM_WARPS MS'.

    PYTHONPATH=$PWD python nc_tune.py      # on the device, from the repository root
"""

import time

import torch

import genolin.ops.norm_conv_triton as T
from genolin.ops import norm_conv

x = torch.randn(128, 4096, 256, device="cuda")
g = torch.randn(256, device="cuda")
w = torch.randn(256, 1, 7, device="cuda")
b = torch.randn(256, device="cuda")


def timed(f, n=20):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    s = time.perf_counter()
    for _ in range(n):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - s) / n * 1e3


best = None
with torch.no_grad():
    for bn in (2, 4, 8, 16):
        for nw in (1, 2, 4, 8):
            T.BLOCK_N, T.NUM_WARPS = bn, nw
            ms = timed(lambda: norm_conv(x, g, 1e-6, w, b, 3, None, torch.bfloat16, backend="triton"))
            print(f"BLOCK_N {bn:3d} warps {nw} ms {ms:.3f}  GB/s {(x.numel() * 6) / ms / 1e6:.0f}", flush=True)
            if best is None or ms < best[0]:
                best = (ms, bn, nw)
    ms = timed(lambda: norm_conv(x, g, 1e-6, w, b, 3, None, torch.bfloat16, backend="reference"))
    print(f"reference (eager modules, fp32) ms {ms:.3f}")
print(f"BEST {best[1]} {best[2]} {best[0]:.3f}")
