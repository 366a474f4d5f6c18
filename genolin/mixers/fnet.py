"""The fnet mixer (design document 003; ``ops/mixing.py``): Fourier mixing over the length and the hidden
dimension, each sequence over its own real tokens; no q, k, v, no heads."""

from __future__ import annotations

import torch

from genolin.mixers.base import Mixer
from genolin.ops import fnet_mixing


class FNetMixer(Mixer):
    name = "fnet"
    uses_qkv = False

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.drop(self.out(fnet_mixing(x, mask)))


__all__ = ["FNetMixer"]
