"""Where work runs: the device a command asked for, and the processes of a torchrun (DDP) launch.

``pick_device("auto" | "cpu" | "cuda", local_rank)``: CUDA when asked for or available ("auto"), the rank's own
GPU under torchrun; asking for CUDA without one is an InputError. ``cpu_bf16`` says whether this CPU multiplies
bfloat16 matrices natively. ``init_distributed`` joins torchrun's process group when RANK is set (NCCL on CUDA, gloo
on CPU) and quiets the console of every rank but 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from dataclasses import dataclass

import torch

from genolin.errors import InputError


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self, device: torch.device) -> None:
        if self.world > 1:
            import torch.distributed as tdist

            with peers_alive():
                tdist.barrier(device_ids=[device.index] if device.type == "cuda" else None)

    def mean(self, values: list[float], device: torch.device) -> float | None:
        """The mean of ``values`` over every rank's (None when there are none): decisions taken on it agree across
        ranks. Every rank must call it."""
        total, count = float(sum(values)), len(values)
        if self.world > 1:
            import torch.distributed as tdist

            t = torch.tensor([total, count], dtype=torch.float64, device=device)
            with peers_alive():
                tdist.all_reduce(t)
            total, count = float(t[0]), int(t[1])
        return total / count if count else None

    def close(self) -> None:
        if self.world > 1:
            import torch.distributed as tdist

            tdist.destroy_process_group()


@contextlib.contextmanager
def peers_alive():
    """Around a collective call: the error of a peer that stopped (gloo's "Connection closed by peer", NCCL's
    errors) becomes one line saying so; the peer printed its own error."""
    try:
        yield
    except RuntimeError as exc:  # torch.distributed.DistBackendError is one
        raise InputError(None, "another torchrun process stopped (its error is above)") from exc


def _stopped_by_torchrun(signum, frame) -> None:
    # SIGTERM also comes from a scheduler or a user; under torchrun it most often means a peer failed
    raise InputError(None, "stopped by SIGTERM, as torchrun stops the others when one process fails (its error "
                           "is above)")


def resolve(name: str) -> str:
    """"auto" -> "cuda" when a GPU is there, else "cpu"; other names unchanged."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    name = resolve(name)
    if name == "cuda":
        if not torch.cuda.is_available():
            raise InputError(None, "--device cuda: no CUDA GPU is available")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init_distributed(device: str) -> Dist:
    """torchrun's way: RANK set -> a process group (NCCL on CUDA, gloo on CPU); otherwise one process."""
    if "RANK" not in os.environ:
        return Dist()
    import torch.distributed as tdist

    d = Dist(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0)))
    if not tdist.is_initialized():
        tdist.init_process_group(backend="nccl" if resolve(device) == "cuda" else "gloo")
    # torchrun ends the other processes with SIGTERM when one fails: end as an error, so that outputs written
    # under temporary names are removed on the way out (Python's default would exit at once, leaving them)
    signal.signal(signal.SIGTERM, _stopped_by_torchrun)
    if not d.main:  # rank 0 alone talks: the other ranks' console shows warnings and errors only
        for handler in logging.getLogger("genolin").handlers:
            if type(handler) is logging.StreamHandler:
                handler.setLevel(max(handler.level, logging.WARNING))
    return d


@contextlib.contextmanager
def shape_free_kernels(device: torch.device, enabled: bool = True):
    """On CUDA (and ``enabled``), torch's cuDNN convolutions and cuDNN attention off inside: cuDNN builds and keeps
    an execution plan for each input shape, and batches of cropped sequences bring new shapes every few steps; the
    plans cost more host time and memory than cuDNN's kernels save (docs/benchmarks.md, "Host memory"). Elsewhere,
    or with GENOLIN_CUDNN=1 in the environment, a no-op."""
    if device.type != "cuda" or not enabled or os.environ.get("GENOLIN_CUDNN") == "1":
        yield
        return
    convolutions, attention = torch.backends.cudnn.enabled, torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cudnn.enabled = False
        torch.backends.cuda.enable_cudnn_sdp(False)  # the other attention backends as they were
        yield
    finally:
        torch.backends.cudnn.enabled = convolutions
        torch.backends.cuda.enable_cudnn_sdp(attention)


def cpu_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AVX512-BF16 or AMX): there a bfloat16 matmul runs
    about 3x the float32 one (2 cores of an AMD EPYC: 228 against 76 GFLOP/s), elsewhere it is emulated and slower."""
    return any(getattr(torch.cpu, name, lambda: False)() for name in ("_is_avx512_bf16_supported",
                                                                      "_is_amx_tile_supported"))
