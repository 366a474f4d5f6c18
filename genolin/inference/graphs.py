"""CUDA graphs of the genome-window forward: one launch a batch instead of the hundreds an eager forward makes
from Python (for the base track model more of the host's time than the GPU's work at stride 4).

    GraphedForward(forward, device)(flags, *inputs) -> forward(*flags, *inputs), replayed from a captured graph
    graphs_allowed() -> False when GENOLIN_CUDA_GRAPHS=0
"""

from __future__ import annotations

import logging
import os

import torch

log = logging.getLogger(__name__)


def graphs_allowed() -> bool:
    """Whether the environment lets genome batches replay CUDA graphs (GENOLIN_CUDA_GRAPHS=0: never)."""
    return os.environ.get("GENOLIN_CUDA_GRAPHS", "1") != "0"


class GraphCaptureError(RuntimeError):
    """A forward that could not be captured as a CUDA graph."""


class GraphedForward:
    """``forward(*flags, *inputs)`` on CUDA, replayed from CUDA graphs captured at the first call of each (input shapes,
    flags).

    Each graph has its own input buffers, copied into from the call's host tensors, its own output and memory pool: a
    replay overwrites the previous replay's output, so a caller uses the output through operations queued on the same
    stream before the next call (the stream runs them in order)."""

    def __init__(self, forward, device: torch.device):
        self.forward, self.device = forward, device
        self.graphs: dict[tuple, tuple[list, torch.cuda.CUDAGraph, torch.Tensor]] = {}

    def capture(self, flags: tuple, *inputs: torch.Tensor) -> tuple:
        """The graph of ``forward(*flags, *inputs)``'s shapes and flags, captured now if it is not yet: (input
        buffers, graph, output). ``flags``: hashable arguments that choose the computation (padding, RC)."""
        key = (tuple((tuple(t.shape), t.dtype) for t in inputs), flags)
        if key not in self.graphs:
            self.graphs[key] = self._capture(inputs, flags)
        return self.graphs[key]

    def __call__(self, flags: tuple, *inputs: torch.Tensor) -> torch.Tensor:
        """``forward(*flags, *inputs)`` replayed (captured first if need be)."""
        static, graph, out = self.capture(flags, *inputs)
        for buffer, t in zip(static, inputs, strict=True):
            buffer.copy_(t, non_blocking=True)
        graph.replay()
        return out

    def _capture(self, inputs: tuple, flags: tuple):
        static = [t.to(self.device, non_blocking=True) for t in inputs]
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        try:
            with torch.cuda.stream(side):  # first launches (Triton's loading, library handles) outside the capture
                self.forward(*flags, *static)
            main.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # thread-local: CUDA calls other threads make meanwhile (pinned copies) do not end the capture
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                out = self.forward(*flags, *static)
        except RuntimeError as exc:
            torch.cuda.synchronize(self.device)
            raise GraphCaptureError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
        log.debug("captured a CUDA graph of the forward: inputs %s, flags %s", [tuple(t.shape) for t in inputs], flags)
        return static, graph, out
