"""Memory a batch needs, against what the device has: the guard that stops a run before its first step (or a
prediction before its first batch) with one line instead of an allocator's error.

    training_bytes(cfg, tokens, n_params)   weights, gradients, AdamW's two moments and the activations that a
                                            batch of ``tokens`` (rows x padded length) keeps for backward
    inference_bytes(cfg, tokens, n_params)  weights and the few activations a forward without gradients holds
    window_bytes(cfg, tokens)               the activations of a forward over genome windows on a CPU (measured)
    available_bytes(device)                 free GPU memory, or the RAM the process may still take
    peak_bytes(device)                      the most this process has held (CUDA tensors, or peak RSS)
    check_fits(needed, device, what, fix)   an InputError when the estimate is over what is available
    out_of_memory_line(exc)                 an allocator's error that got past the guard, as one line for a user

The activation coefficients are float32 elements per token per layer in units of d_model, read off the tensors
autograd saves (``saved_tensors_hooks``; tests/test_long.py holds the estimate above the measured bytes for every
mixer) with some room added: the transient buffers of a backward pass (the gradients of one layer's activations)
and the allocator's rounding are not counted there.
"""

from __future__ import annotations

import re

import torch

from genolin import host
from genolin.errors import InputError
from genolin.host import GIB, gib
from genolin.model import EncoderConfig

# float32 elements saved for backward per token and layer, in units of d_model (measured: linear 30.3, hybrid 32.5,
# softmax 25.3, fnet 22.2, linformer 28.4, gla 53.4, deltanet 85.2; the MLP's share is 13.6)
ACTIVATION_D = {"gla": 58.0, "deltanet": 92.0, "gated_deltanet": 96.0}
DEFAULT_ACTIVATION_D = 36.0
MLP_ACTIVATION_D = 13.0  # what checkpoint_mlp recomputes instead of keeping
BLOCK_INPUT_D = 1.0  # a whole-block recompute keeps each block's input
EXTRA_D = 6.0  # embedding, stem, final norm and head outputs, per token
# on CUDA under bf16 autocast, bytes per float32-counted element: activations in bfloat16, and the Triton attention
# kernels keep no feature maps for backward (measured peaks: 0.34-0.41 of the float32 count, docs/benchmarks.md)
AMP_FACTOR = 0.32
HEADROOM = 1.15  # allocator rounding and fragmentation


def _mixer_extra(cfg: EncoderConfig) -> float:
    """Elements per token and layer beyond the d_model multiples: per-head terms that do not scale with d."""
    if cfg.mixer == "favor":  # random features of q and k and their exponentials, per head
        return 6.0 * cfg.n_heads * cfg.favor_features
    if cfg.mixer == "synthesizer":  # each token's logits over max_len keys, and their softmax
        return 2.0 * cfg.n_heads * cfg.max_len
    if cfg.mixer == "hybrid":  # the local softmax's scores over its window
        return 1.0 * cfg.n_heads * cfg.local_window_tokens
    return 0.0


def layer_elements(cfg: EncoderConfig) -> float:
    """float32 elements one layer saves for backward per token, without recomputation."""
    return ACTIVATION_D.get(cfg.mixer, DEFAULT_ACTIVATION_D) * cfg.d_model + _mixer_extra(cfg)


def training_bytes(cfg: EncoderConfig, tokens: int, n_params: int, *, amp: bool = False, ema: bool = False) -> int:
    """Peak bytes of one training step on a batch of ``tokens`` tokens (rows x padded length): the weights, their
    gradients and AdamW's two moments (and a weight average with ``ema``), the activations kept for backward (with
    checkpointing: each block's input, plus one block's activations while it is recomputed) and the gradients of
    one layer's activations in flight during backward."""
    full = layer_elements(cfg)
    if cfg.checkpointing:
        kept = cfg.n_layers * BLOCK_INPUT_D * cfg.d_model + full
    elif cfg.checkpoint_mlp:
        kept = cfg.n_layers * (full - MLP_ACTIVATION_D * cfg.d_model) + MLP_ACTIVATION_D * cfg.d_model
    else:
        kept = cfg.n_layers * full
    # the blocks see tokens / stem_pool tokens; embedding and stem all of them
    per_token = ((kept + full) / cfg.stem_pool + EXTRA_D * cfg.d_model) * 4 * (AMP_FACTOR if amp else 1.0)
    weights = n_params * 4 * (5 if ema else 4)
    return int(HEADROOM * (weights + per_token * tokens))


def inference_bytes(cfg: EncoderConfig, tokens: int, n_params: int, *, stream: bool, amp: bool = False) -> int:
    """Peak bytes of a forward pass without gradients on ``tokens`` tokens: the weights, the residual stream and a
    few (tokens, d) buffers; the mixer's activations of one layer at a time, over chunks of ``chunk_tokens`` when
    the pass streams (linear-time mixers on inputs longer than a chunk)."""
    layer = layer_elements(cfg) - MLP_ACTIVATION_D * cfg.d_model / 2  # no dropout masks or saved inputs
    block_tokens = tokens // cfg.stem_pool  # what the blocks see after a pooled stem
    rows_tokens = min(block_tokens, cfg.chunk_tokens) if stream else block_tokens
    per_token = (EXTRA_D + 4) * cfg.d_model * 4
    return int(HEADROOM * (n_params * 4 + per_token * tokens
                           + layer * 4 * (AMP_FACTOR if amp else 1.0) * rows_tokens))


# a forward without gradients over genome windows on a CPU (genolin predict), bytes per token besides the (EXTRA_D +
# 4) x d_model float32 of inference_bytes' residual stream and buffers: ids, mask, a layer's temporaries. Measured
# (peak RSS over the run, two model threads, 1 Mbp): the tiny preset's bacteria model (d 32) 2.4 kB per token in
# flight, base and s1 (d 256) 11.4 kB: 40 d + about 1.15 kB; the hybrid mixer's local softmax adds nothing seen
WINDOW_TOKEN_BYTES = 1200


def window_bytes(cfg: EncoderConfig, tokens: int) -> int:
    """Peak bytes of the activations of a forward without gradients on a CPU over a batch of genome windows of
    ``tokens`` tokens in all (rows x tokens per window), weights not included. Calibrated on measurements
    (``WINDOW_TOKEN_BYTES``): ``inference_bytes``, whose per-layer term is sized by what training saves for
    backward, came to 2 to 4.5 times the peaks measured for these batches."""
    extra = 0.0 if cfg.mixer == "hybrid" else _mixer_extra(cfg)  # per-head terms, made whole
    return int(HEADROOM * tokens * ((EXTRA_D + 4) * cfg.d_model * 4 + WINDOW_TOKEN_BYTES + 4 * extra))


def available_bytes(device: torch.device) -> int:
    """What a new allocation may still take: on CUDA the GPU's free memory plus what PyTorch's allocator holds
    unused; on a CPU the host's (``genolin.host.available_bytes``: MemAvailable, or less under a cgroup limit).
    GENOLIN_MEMORY_GIB, where set, replaces the reading (to plan for a smaller machine, and in tests)."""
    given = host.given_bytes()
    if given is not None:
        return given
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    return host.available_bytes()


def peak_bytes(device: torch.device) -> int:
    """The most memory this process has held: CUDA tensors on a GPU (since the last reset), else its peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether an exception is an allocator's out-of-memory (CUDA's, or the CPU allocator's RuntimeError)."""
    return isinstance(exc, torch.OutOfMemoryError) or (isinstance(exc, RuntimeError)
                                                       and "can't allocate memory" in str(exc))


def out_of_memory_line(exc: BaseException) -> str:
    """One line for an out-of-memory error the estimates did not foresee (another process took the GPU's memory
    after the check, or a stage without a check): where, what was asked for and what was free, and what to do."""
    text = str(exc)
    smaller = "a smaller batch (predict: --batch-size; train: --set batch_size=N)"
    if isinstance(exc, torch.OutOfMemoryError):
        asked = re.search(r"Tried to allocate ([\d.]+ [KMGT]?i?B)", text)
        total = re.search(r"total capacity of ([\d.]+ [KMGT]?i?B) of which ([\d.]+ [KMGT]?i?B) is free", text)
        figures = ", ".join(([f"{asked.group(1)} asked for"] if asked else [])
                            + ([f"{total.group(2)} of {total.group(1)} free"] if total else []))
        return (f"the GPU ran out of memory{f' ({figures})' if figures else ''}: another process may hold its "
                f"memory (nvidia-smi lists them), or a batch is too large; free the GPU or give {smaller}")
    asked = re.search(r"tried to allocate (\d+) bytes", text)
    figures = f"{gib(int(asked.group(1)))} asked for, " if asked else ""
    return (f"the host ran out of memory ({figures}{gib(host.available_bytes())} of RAM available now): close other "
            f"programs or give {smaller}")


def check_fits(needed: int, device: torch.device, what: str, fix: str) -> None:
    """An InputError naming ``what`` (the batch and its longest input), the estimate, what the device has, and
    ``fix`` (the settings to change), when ``needed`` bytes are more than ``available_bytes``."""
    room = available_bytes(device)
    if needed > room:
        where = "GPU memory" if device.type == "cuda" else "memory (RAM)"
        raise InputError(None, f"{what} needs about {gib(needed)}, more than the {gib(room)} of {where} available; "
                               f"{fix}")


__all__ = ["GIB", "available_bytes", "check_fits", "gib", "inference_bytes", "is_out_of_memory",
           "out_of_memory_line", "peak_bytes", "training_bytes", "window_bytes"]
