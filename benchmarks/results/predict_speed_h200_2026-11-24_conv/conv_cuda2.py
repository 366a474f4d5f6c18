"""Base track encoder on CUDA (bf16 autocast): ShortConv as conv1d with transposes (current CUDA path) vs the
channels-last 2-D convolution; inference batches and a training step (fwd+bwd)."""
import time
import torch
import torch.nn.functional as F
import genolin.model as gm
from genolin.model import Encoder, EncoderConfig, ShortConv

dev = "cuda"
orig = ShortConv.forward
def cl_forward(self, x):
    return self._channels_last(x, self.left, self.right)

def t(f, n=20):
    for _ in range(3): f()
    torch.cuda.synchronize(); s = time.perf_counter()
    for _ in range(n): f()
    torch.cuda.synchronize(); return (time.perf_counter() - s) / n * 1e3

# micro: conv forward+backward
for B, N in [(64, 2048), (16, 4096), (4, 25000), (1, 100000)]:
    sc = ShortConv(256, 7, False).to(dev)
    x = torch.randn(B, N, 256, device=dev, requires_grad=True)
    for name, fwd in [("conv1d", lambda: orig(sc, x)), ("channels_last", lambda: cl_forward(sc, x))]:
        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                y = fwd()
            y.float().square().mean().backward()
        print(f"conv B{B} N{N} {name:14s} fwd+bwd {t(step):7.3f} ms", flush=True)

cfg = EncoderConfig(vocab_size=4101, d_model=256, n_layers=6, n_heads=8, mixer="hybrid", track_channels=2,
                    dropout=0.0)
model = Encoder(cfg).to(dev)
for B, N in [(64, 4096), (16, 4096)]:
    ids = torch.randint(1, 4101, (B, N), device=dev)
    for name, fwd in [("conv1d", orig), ("channels_last", cl_forward)]:
        ShortConv.forward = fwd
        model.eval()
        def infer():
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                model(ids, padding=False)
        model.train()
        def train():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(ids[:16], padding=False)
            out.track.float().square().mean().backward()
        model.eval(); ti = t(infer)
        model.train(); tt = t(train)
        print(f"encoder B{B} N{N} {name:14s} inference {ti:8.2f} ms   train fwd+bwd (B16) {tt:8.2f} ms", flush=True)
ShortConv.forward = orig
