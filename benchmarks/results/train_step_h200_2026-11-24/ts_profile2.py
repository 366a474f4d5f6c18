"""Variants of a compiled training step (base encoder, hybrid): time, peak memory, top GPU kernels per step.

    python ts_profile2.py N MODE VARIANT    (MODE: none | mlp | block; VARIANT: base | conv1d | nopersist | coordesc
                                             | nosplit; TORCHINDUCTOR_MIX_ORDER_REDUCTION=0 for the mix-order trial)
"""

import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from genolin.model import Encoder, EncoderConfig, ShortConv

n, mode, variant = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if variant == "conv1d":  # training through nn.Conv1d under compile too

    def conv_forward(self, x):
        if torch.compiler.is_compiling() and not torch.is_grad_enabled():
            return self._shifted(x)
        x = F.pad(x.transpose(1, 2), (self.left, self.right))
        return self.conv(x).transpose(1, 2)

    ShortConv.forward = conv_forward
if variant in ("nopersist", "coordesc", "nosplit"):
    import torch._inductor.config as ic

    if variant == "nopersist":
        ic.triton.persistent_reductions = False
    elif variant == "coordesc":
        ic.coordinate_descent_tuning = True
    else:
        ic.split_reductions = False
torch.manual_seed(0)
cfg = EncoderConfig(n_classes=0, track_channels=2, mixer="hybrid", checkpointing=mode == "block",
                    checkpoint_mlp=mode == "mlp")
m = Encoder(cfg).cuda().train().compile_blocks()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
ids = torch.randint(5, cfg.vocab_size, (1, n), device="cuda")


def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(ids).track.float().square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


for _ in range(3):
    step()
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
times = []
for _ in range(5):
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
times.sort()
peak = torch.cuda.max_memory_allocated() / 2**30
print(f"RESULT n={n} mode={mode} variant={variant} ms={times[2] * 1e3:.1f} peak_gib={peak:.2f}")
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    for _ in range(2):
        step()
    torch.cuda.synchronize()
events = [e for e in prof.key_averages() if e.self_device_time_total > 0]
events.sort(key=lambda e: -e.self_device_time_total)
print(f"  GPU per step {sum(e.self_device_time_total for e in events) / 2 / 1e3:.1f} ms")
for e in events[:14]:
    print(f"  {e.self_device_time_total / 2 / 1e3:7.2f} ms  {e.count // 2:4d}x  {e.key[:150]}")
