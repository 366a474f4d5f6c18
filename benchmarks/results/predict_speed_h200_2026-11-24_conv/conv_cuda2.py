"""Base track encoder on CUDA (bf16 autocast): ShortConv as conv1d with transposes (the CUDA path before) vs the
channels-last 2-D convolution; the convolution alone (forward + backward), inference batches and a training step.

    PYTHONPATH=$PWD python conv_cuda2.py      # on the device, from the repository root
"""

import time

import torch

from genolin.model import Encoder, EncoderConfig, ShortConv

DEV = "cuda"
CONV1D = ShortConv.forward  # run on CUDA with more than CHANNELS_LAST_CONV_MAX_TOKENS tokens: conv1d


def conv1d(self, x):
    return CONV1D(self, x) if x.shape[1] > 8192 else self.conv(
        torch.nn.functional.pad(x.transpose(1, 2), (self.left, self.right))).transpose(1, 2)


def channels_last(self, x):
    return self._channels_last(x, self.left, self.right)


def timed(f, n=20) -> float:
    """Milliseconds per call of f, after 3 warm-up calls."""
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e3


def conv_step(sc, x, forward):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = forward(sc, x)
    y.float().square().mean().backward()


def main() -> None:
    for b, n in [(64, 2048), (16, 4096), (4, 25000), (1, 100000)]:
        sc = ShortConv(256, 7, False).to(DEV)
        x = torch.randn(b, n, 256, device=DEV, requires_grad=True)
        for name, forward in [("conv1d", conv1d), ("channels_last", channels_last)]:
            ms = timed(lambda sc=sc, x=x, forward=forward: conv_step(sc, x, forward))
            print(f"conv B{b} N{n} {name:14s} fwd+bwd {ms:7.3f} ms", flush=True)

    cfg = EncoderConfig(vocab_size=4101, d_model=256, n_layers=6, n_heads=8, mixer="hybrid", track_channels=2,
                        dropout=0.0)
    model = Encoder(cfg).to(DEV)

    def infer(ids):
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            model(ids, padding=False)

    def train(ids):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(ids[:16], padding=False)
        out.track.float().square().mean().backward()

    for b, n in [(64, 4096), (16, 4096)]:
        ids = torch.randint(1, 4101, (b, n), device=DEV)
        for name, forward in [("conv1d", conv1d), ("channels_last", channels_last)]:
            ShortConv.forward = forward
            model.eval()
            t_infer = timed(lambda ids=ids: infer(ids))
            model.train()
            t_train = timed(lambda ids=ids: train(ids))
            print(f"encoder B{b} N{n} {name:14s} inference {t_infer:8.2f} ms   train fwd+bwd (B16) {t_train:8.2f} ms",
                  flush=True)
    ShortConv.forward = CONV1D


if __name__ == "__main__":
    main()
