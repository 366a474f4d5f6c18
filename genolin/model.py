"""The genolin encoder: k-mer token ids -> contextual embeddings -> sequence class logits and per-token tracks.

    ids (B, N) long, mask (B, N) bool (True = real token; default ids != [PAD])
    -> embedding (B, N, d)   (+ fixed sinusoids of the token index, ``positions="sinusoidal"``)
    -> optional stem: x += GELU(Conv1d(x)), a full (d -> d) convolution of width ``stem_kernel`` (motif
       detectors over single bases or short k-mers: what short labelled sequences need from scratch)
    -> optional pooled stem (``stem_pool`` P > 1, sequence heads): x averaged over groups of P tokens
       (B, N, d) -> (B, ceil(N / P), d), the mask to (B, ceil(N / P)): a learned stride, where k-mer tokens at
       stride P would give each of the 4^k k-mers an embedding of its own to memorise
    -> n_layers x Block:  x += Mixer(Conv(Norm(x)))   (depthwise conv along N, then attention)
                          x += GatedMLP(Norm(x))
    -> final Norm -> hidden (B, N, d)
    -> sequence head: masked mean (or attention) pooling -> logits (B, n_classes)
                      (+ with ``kmer_logits`` K: a linear map of the sequence's k-mer profile, k = 1..K, each
                      k's counts over windows of real bases divided by their number: a bag-of-k-mers logistic
                      regression inside the model; training starts it from the fitted regression,
                      ``SequenceTask.init_model``)
    -> track head:    per-token logits (B, N, track_channels)    (e.g. + and - strand promoter scores)

Mixers (``EncoderConfig.mixer``): softmax, linear, favor, hybrid, gla, deltanet, gated_deltanet, linformer, fnet,
synthesizer: one class per kind in ``genolin.mixers`` (``genolin/mixers/<family>.py``), registered in ``MIXER_CLASSES``;
each block builds its mixer by name (``build_mixer``).

Memory: with gradients off and N > ``chunk_tokens`` (on CUDA: and a batch of more than STREAM_CUDA_MIN_TOKENS) the
forward pass streams every sub-layer over chunks of tokens (norm, convolution, projections, attention state, MLP),
so peak memory is a few (N, d) activations.
Training uses the plain path (the attention op itself still works in chunks); ``checkpointing`` recomputes each
block in the backward pass, ``checkpoint_mlp`` each block's norm + MLP (the activations that take the most
memory: 2 x hidden + hidden = about 8 d per token, against the mixer's few d); both together nest: inside each
block's recompute its two halves (norm + convolution + mixer; norm + MLP) are recomputed again one at a time, so
the backward pass holds the block inputs and one half's activations (least memory, a third forward).
``Encoder.compile_blocks`` compiles the blocks (norm, convolution, MLP and their backward fused; the recompute
traced into the backward graph). ``causal=True`` gives a left-to-right encoder with a step API (``init_state`` /
``step``) whose outputs equal the parallel ones.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from genolin.mixers import (
    CAUSAL_MIXERS,
    GLA_GATE_NORMALIZER,
    GLA_MIN_LOG_DECAY,
    LENGTH_LIMITED_MAX_TOKENS,
    LENGTH_LIMITED_MIXERS,
    MIXERS,
    SCAN_MIXERS,
    STREAMING_MIXERS,
    Mixer,
    build_mixer,
    listed,
    mixer_class,
)
from genolin.ops import add_rms_norm, fused_applies, norm_conv, norm_conv_applies, swiglu

# attention pooling's score per position bin is this times its parameter: AdamW moves a parameter by about lr a step,
# and a bin's score must move by several units to focus the pooling (0.001 a step: thousands of steps)
POOL_POSITION_SCALE = 32.0


@dataclass
class EncoderConfig:
    vocab_size: int = 5 + 4**6  # k = 6
    d_model: int = 256
    n_layers: int = 6
    n_heads: int = 8
    mixer: str = "linear"
    feature_map: str = "elu"  # for "linear" and the global part of "hybrid": elu | relu | exp
    feature_dim: int | None = None  # learned per-head projection of q, k to this many features (None: off)
    favor_features: int = 128
    favor_redraw_interval: int = 1000  # optimizer steps between FAVOR+ redraws while training (0: never)
    local_window_tokens: int = 128  # "hybrid": local softmax window
    max_len: int = 0  # linformer, synthesizer: the longest input in tokens (sizes parameters); 0: training sets it
    linformer_rows: int = 64  # linformer: keys and values projected to this many rows
    synthesizer: str = "dense"  # synthesizer: dense | random (factorised)
    synthesizer_rank: int = 32  # synthesizer "random": rank of the learned logits R1 R2^T
    conv_kernel: int = 7
    stem_kernel: int = 0  # > 0: a full convolution of this width over the embeddings, before the blocks
    stem_pool: int = 1  # > 1: the stem's output averaged over groups of this many tokens (sequence heads only)
    positions: str = "off"  # off | sinusoidal: add fixed sinusoids of the token's index to the embeddings
    kmer_logits: int = 0  # > 0: sequence logits += a linear map of the k-mer profile, k = 1..this (single-base ids)
    mlp_ratio: float = 8 / 3  # gated MLP hidden size / d_model
    dropout: float = 0.0
    # stochastic depth (Huang et al. 2016): while training, block l of L (0-based) drops its mixer and its MLP
    # branch, each for each sequence at random, with probability drop_path x (l + 1) / L; kept ones are scaled by
    # 1 / (1 - p). Inference is unchanged. 0: off
    drop_path: float = 0.0
    causal: bool = False
    n_classes: int = 2  # 0: no sequence head
    track_channels: int = 0  # 0: no track head
    pooling: str = "mean"  # mean | attention
    # attention pooling: a learned score per bin of relative position (token index / real length, this many bins)
    # added to each token's pooling score, so a classifier can learn where in its inputs to look (0: off)
    pool_position_bins: int = 0
    pool_position_scale: float = POOL_POSITION_SCALE  # a bin's score is this times its parameter
    # attention pooling: also a learned slope (scaled as the bins; its start: pool_distance_power) times log2(1 +
    # distance from the centre in tokens) / 16 on each score: a prior on distance that reaches distances the
    # training crops rarely show
    pool_distance_slope: bool = False
    # where the slope starts: each token's pooling weight (1 + distance)^-p before training (1: equal weight per
    # octave of distance, where a slope from 0 weighs every token alike and so 100 kbp mostly by its far octaves)
    pool_distance_power: float = 0.0
    chunk_tokens: int = 16384  # per chunk, for the attention op and for streaming inference
    checkpointing: bool = False  # training: recompute each whole block in the backward pass (little memory)
    checkpoint_mlp: bool = False  # training: recompute each block's norm + MLP (its largest activations); with
    #                               checkpointing: nested (each half again inside the block's recompute)
    eps: float = 1e-6
    seed: int = 0  # FAVOR+ draws derive from it
    pad_id: int = 0

    def __post_init__(self):
        kind = mixer_class(self.mixer)  # ValueError naming the known mixers
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.pooling not in ("mean", "attention"):
            raise ValueError(f"pooling must be 'mean' or 'attention', got {self.pooling!r}")
        if self.pool_position_bins < 0 or (self.pool_position_bins and self.pooling != "attention"):
            raise ValueError("pool_position_bins must be 0, or above 0 with pooling='attention'")
        if self.pool_distance_slope and self.pooling != "attention":
            raise ValueError("pool_distance_slope needs pooling='attention'")
        if self.pool_distance_power and not self.pool_distance_slope:
            raise ValueError("pool_distance_power needs pool_distance_slope")
        if self.feature_map not in ("elu", "relu", "exp"):
            raise ValueError(f"feature_map must be elu, relu or exp (FAVOR+ is mixer='favor'), "
                             f"got {self.feature_map!r}")
        if not 0 <= self.kmer_logits <= 8:
            raise ValueError(f"kmer_logits must be 0..8, got {self.kmer_logits}")
        if not 0 <= self.drop_path < 1:
            raise ValueError(f"drop_path must be at least 0 and below 1, got {self.drop_path}")
        if self.stem_kernel < 0 or (self.stem_kernel and self.causal):
            raise ValueError("stem_kernel must be >= 0, and 0 for a causal encoder")
        if self.stem_pool < 1 or (self.stem_pool > 1 and (self.causal or self.track_channels
                                                          or self.stem_kernel < self.stem_pool)):
            raise ValueError("stem_pool must be 1, or above 1 for a sequence classifier (no track head, not "
                             "causal) with a stem_kernel at least as wide")
        if self.causal and not kind.causal_capable:
            raise ValueError(f"causal=True is for the {listed(CAUSAL_MIXERS)} mixers, not {self.mixer!r}")
        if self.positions not in ("off", "sinusoidal"):
            raise ValueError(f"positions must be 'off' or 'sinusoidal', got {self.positions!r}")
        if self.causal and self.positions != "off":
            raise ValueError("positions must be 'off' for a causal encoder (its step API has no index)")
        if self.synthesizer not in ("dense", "random"):
            raise ValueError(f"synthesizer must be 'dense' or 'random', got {self.synthesizer!r}")
        if min(self.linformer_rows, self.synthesizer_rank) < 1 or self.max_len < 0:
            raise ValueError("linformer_rows and synthesizer_rank must be 1 or more, max_len 0 or more")
        kind.check(self)  # the mixer's own settings (e.g. hybrid: chunk_tokens a multiple of its window)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EncoderOutput:
    hidden: torch.Tensor  # (B, N, d)
    logits: torch.Tensor | None  # (B, n_classes); None without a sequence head (n_classes = 0)
    track: torch.Tensor | None = None  # (B, N, track_channels)


# ShortConv on CUDA: the channels-last form for sequences up to this many tokens (faster than conv1d for many short
# rows, slower for a few long ones; docs/benchmarks.md); on a CPU always
CHANNELS_LAST_CONV_MAX_TOKENS = 8192
# Without gradients on CUDA a batch streams (``Encoder.streams``) only above this many block tokens (rows x tokens
# after the stem): the streaming pass runs the attention state on PyTorch einsums and every projection twice, and
# was 2-3x slower than the plain pass on the fused kernels for 100 kbp sequences (docs/benchmarks.md,
# "Long-context classification"); one 1 Mbp sequence (250,000 block tokens at stride 4) still takes the plain pass.
# On a CPU every sequence longer than chunk_tokens streams: bounded memory (1 Mbp within 2 GiB on 2 cores).
STREAM_CUDA_MIN_TOKENS = 2**19


class ShortConv(nn.Module):
    """Depthwise convolution along the sequence: (B, N, d) -> (B, N, d); 'same' padding, or left-only if causal."""

    def __init__(self, d: int, kernel: int, causal: bool):
        super().__init__()
        self.conv = nn.Conv1d(d, d, kernel, groups=d)
        self.left = kernel - 1 if causal else kernel // 2
        self.right = kernel - 1 - self.left

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():  # k shifted products: fused with the norm before (a convolution would
            return self._shifted(x)         # stay a separate kernel with a transposed copy on each side)
        if not x.is_cuda or x.shape[1] <= CHANNELS_LAST_CONV_MAX_TOKENS:
            return self._channels_last(x, self.left, self.right)
        x = F.pad(x.transpose(1, 2), (self.left, self.right))
        return self.conv(x).transpose(1, 2)

    def _channels_last(self, x: torch.Tensor, left: int, right: int) -> torch.Tensor:
        """The convolution (zero-padded by ``left`` / ``right`` rows) as a 2-D depthwise one over the (B, d, 1, N)
        view of a contiguous x, whose memory is that view's channels-last layout: oneDNN reads and writes (B, N, d)
        as it is. Conv1d takes channels first: a transposed copy on each side, and the projection after it then
        read a strided input (several times slower, on a CPU and on a genome batch on a GPU)."""
        if left != right:  # asymmetric (causal, even kernels): pad the rows, keeping the layout
            x, left = F.pad(x, (0, 0, left, right)), 0
        x4 = x.contiguous().transpose(1, 2).unsqueeze(2)  # (B, d, 1, N), channels-last memory
        y = F.conv2d(x4, self.conv.weight.unsqueeze(2), self.conv.bias, padding=(0, left), groups=x.shape[-1])
        return y.squeeze(2).transpose(1, 2)

    def _shifted(self, x: torch.Tensor) -> torch.Tensor:
        """The same convolution as a sum over taps: out[t] = bias + sum_j w[:, j] * x_padded[t + j]."""
        n, w = x.shape[1], self.conv.weight[:, 0, :]  # (d, k)
        xp = F.pad(x, (0, 0, self.left, self.right))  # (B, N + k - 1, d)
        out = self.conv.bias
        for j in range(w.shape[1]):
            out = out + xp[:, j:j + n] * w[:, j]
        return out

    def forward_halo(self, x: torch.Tensor, left: int, right: int) -> torch.Tensor:
        """x holds ``left`` rows before and ``right`` after the rows wanted (missing halo rows are zero-padded)."""
        if not x.is_cuda:
            return self._channels_last(x, self.left - left, self.right - right)
        x = F.pad(x.transpose(1, 2), (self.left - left, self.right - right))
        return self.conv(x).transpose(1, 2)


class GatedMLP(nn.Module):
    """SwiGLU: (B, N, d) -> (B, N, d)."""

    def __init__(self, d: int, ratio: float, dropout: float):
        super().__init__()
        hidden = int(round(d * ratio / 8)) * 8
        self.up = nn.Linear(d, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if fused_applies(x):  # inference on CUDA: SiLU and product in one pass over up's output
            return self.drop(self.down(swiglu(self.up(x))))
        if x.is_cuda:
            gate, value = self.up(x).chunk(2, dim=-1)
        else:  # two products with the weight's halves: on a CPU, SiLU of the strided half ran 4x slower
            hidden = self.down.in_features
            gate, value = F.linear(x, self.up.weight[:hidden]), F.linear(x, self.up.weight[hidden:])
            if not torch.is_grad_enabled():  # in place: on a CPU these (B, N, hidden) passes are bound by memory
                return self.drop(self.down(F.silu(gate, inplace=True).mul_(value)))
        return self.drop(self.down(F.silu(gate) * value))


class Block(nn.Module):
    def __init__(self, cfg: EncoderConfig, layer: int):
        super().__init__()
        # both: nested; inside the block's recompute each half (norm + convolution + mixer, norm + MLP) is
        # recomputed again on its own, so the block's backward holds one half's activations at a time
        self.checkpointing, self.checkpoint_mlp = cfg.checkpointing, cfg.checkpoint_mlp
        self.norm1 = nn.RMSNorm(cfg.d_model)
        self.conv = ShortConv(cfg.d_model, cfg.conv_kernel, cfg.causal)
        self.mixer = build_mixer(cfg, layer)
        self.norm2 = nn.RMSNorm(cfg.d_model)
        self.mlp = GatedMLP(cfg.d_model, cfg.mlp_ratio, cfg.dropout)
        self.drop_prob = cfg.drop_path * (layer + 1) / cfg.n_layers

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        # the recompute sits inside forward, so a compiled block (Encoder.compile_blocks) traces it: the compiler
        # then keeps only the block's input and recomputes the rest fused into the backward pass
        if self.checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(self._forward, x, mask, use_reentrant=False)
        return self._forward(x, mask)

    def _forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        recompute = self.training and torch.is_grad_enabled()
        # inference on CUDA: the residual add and norm2 in one kernel (not when compile_blocks compiled the halves)
        if fused_applies(x) and self.norm2.weight is not None and "_mixer_residual" not in vars(self):
            y = self._mixer_out(x, mask)
            dtype = torch.promote_types(x.dtype, y.dtype)
            out_dtype = torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else dtype
            eps = self.norm2.eps if self.norm2.eps is not None else torch.finfo(dtype).eps
            x, h = add_rms_norm(x, y, self.norm2.weight, eps, out_dtype)
            return x + self.mlp(h)
        if self.checkpointing and self.checkpoint_mlp and recompute:
            x = checkpoint(self._mixer_residual, x, mask, use_reentrant=False)
        else:
            x = self._mixer_residual(x, mask)
        if self.checkpoint_mlp and recompute:
            # the MLP's (B, N, 2 * hidden) and (B, N, hidden) activations are not kept: recomputed in backward
            return checkpoint(self._mlp_residual, x, use_reentrant=False)
        return self._mlp_residual(x)

    def _mixer_residual(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return x + self._drop_path(self._mixer_out(x, mask))

    def _drop_path(self, y: torch.Tensor) -> torch.Tensor:
        """Stochastic depth on a branch y (B, N, d) while training: each sequence's branch kept with probability
        1 - p and then scaled by 1 / (1 - p), else zero."""
        if not self.training or self.drop_prob == 0:
            return y
        keep = 1.0 - self.drop_prob
        return y * (torch.rand(y.shape[0], 1, 1, device=y.device) < keep).to(y.dtype) / keep

    def _mixer_out(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """mixer(conv(norm1(x) * mask)): what the block adds to x before its MLP."""
        if norm_conv_applies(x):  # inference on CUDA: norm, mask and convolution in one kernel
            h = self._norm_conv(x, mask)
        else:
            h = self.norm1(x)
            if mask is not None:
                h = h * mask.unsqueeze(-1).to(h.dtype)  # padding must not reach real tokens through the convolution
            h = self.conv(h)
        return self.mixer(h, mask)

    def _norm_conv(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """conv(norm1(x) * mask) through ``genolin.ops.norm_conv``, in autocast's dtype when it is on."""
        dev = x.device.type
        out_dtype = torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else x.dtype
        eps = self.norm1.eps if self.norm1.eps is not None else torch.finfo(x.dtype).eps
        return norm_conv(x, self.norm1.weight, eps, self.conv.conv.weight, self.conv.conv.bias, self.conv.left,
                         mask, out_dtype, backend="triton")

    def _mlp_residual(self, x: torch.Tensor) -> torch.Tensor:
        return x + self._drop_path(self.mlp(self.norm2(x)))

    @torch.no_grad()
    def stream_(self, x: torch.Tensor, mask: torch.Tensor | None, chunk: int) -> None:
        """The same as forward, in place on x, working on chunks of ``chunk`` tokens (one extra (B, N, d))."""
        n = x.shape[1]
        left, right = self.conv.left, self.conv.right
        h = torch.empty_like(x)
        for s in range(0, n, chunk):  # h = conv(norm(x)), each chunk with its halo
            a, e = max(s - left, 0), min(s + chunk + right, n)
            hn = self.norm1(x[:, a:e])
            if mask is not None:
                hn = hn * mask[:, a:e].unsqueeze(-1).to(hn.dtype)
            h[:, s:s + chunk] = self.conv.forward_halo(hn, s - a, e - min(s + chunk, n))
        self.mixer.stream_into(h, mask, x, chunk)
        del h
        for s in range(0, n, chunk):
            xc = x[:, s:s + chunk]
            xc += self.mlp(self.norm2(xc))

    def step(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        """x (B, d) -> (B, d) for the next token of a causal encoder."""
        h = self.norm1(x)[:, None]  # (B, 1, d)
        k = self.conv.conv.kernel_size[0]
        past = state.get("conv")
        if past is None:
            past = torch.zeros(x.shape[0], k - 1, x.shape[1], dtype=x.dtype, device=x.device)
        window = torch.cat([past, h], dim=1)  # (B, k, d)
        state["conv"] = window[:, 1:]
        hc = self.conv.forward_halo(window, k - 1, 0)[:, -1]
        x = x + self.mixer.step(hc, state.setdefault("mixer", self.mixer.init_state()))
        return x + self.mlp(self.norm2(x))


def kmer_profile(ids: torch.Tensor, k_max: int) -> torch.Tensor:
    """Single-base ids (B, N) (A, C, G, T = 5..8; anything else is not a base) -> (B, 4 + 16 + ... + 4^k_max)
    float32: for each k, the counts of every k-mer over the windows of k real bases, divided by their number and
    times 2^k (one occurrence in a 70 bp sequence weighs about as much for k = 6 as for k = 1)."""
    code = ids.long() - 5
    real = (code >= 0) & (code < 4)
    code = code.clamp(0, 3)
    parts = []
    for k in range(1, k_max + 1):
        if ids.shape[1] < k:
            parts.append(ids.new_zeros((ids.shape[0], 4**k), dtype=torch.float32))
            continue
        windows = code.unfold(1, k, 1)  # (B, N - k + 1, k)
        index = (windows * (4 ** torch.arange(k - 1, -1, -1, device=ids.device))).sum(-1)
        ok = real.unfold(1, k, 1).all(-1).float()
        counts = torch.zeros(ids.shape[0], 4**k, device=ids.device).scatter_add_(1, index, ok)
        parts.append(counts * 2.0**k / ok.sum(1, keepdim=True).clamp_min(1.0))
    return torch.cat(parts, 1)


def sinusoids(n: int, d: int, device=None, dtype=None) -> torch.Tensor:
    """(n, d) absolute-position signal: column pairs (sin, cos)(i / 10000^(2j/d)) of the index i (Transformer's).

    For short sequences whose content sits at fixed offsets (GUE's core promoters are centred on the TSS, the
    TATA box near -30): elu linear attention has no position signal of its own beyond its convolutions."""
    i = torch.arange(n, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / d))
    out = torch.zeros(n, d, device=device, dtype=torch.float32)
    out[:, 0::2] = torch.sin(i * freq)
    out[:, 1::2] = torch.cos(i * freq[: d // 2])
    return out.to(dtype)


def _without_padding(mask: torch.Tensor) -> torch.Tensor | None:
    """None when every token is real (the maskless, faster paths: flash attention); else ``mask``."""
    return None if bool(mask.all()) else mask


def pool_mask(mask: torch.Tensor, p: int) -> torch.Tensor:
    """mask (B, N) -> (B, ceil(N / p)): a group is real when any of its p tokens is."""
    pad = -mask.shape[1] % p
    return F.pad(mask, (0, pad)).view(mask.shape[0], -1, p).any(-1)


def pool_groups(x: torch.Tensor, mask: torch.Tensor, p: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x (B, N, d), mask (B, N) -> the mean of each group of p consecutive real tokens (B, ceil(N / p), d) and
    the groups' mask (``pool_mask``); padding counts for nothing, an all-padding group is zero."""
    b, n, d = x.shape
    pad = -n % p
    m = F.pad(mask, (0, pad)).view(b, -1, p, 1).to(x.dtype)
    sums = (F.pad(x, (0, 0, 0, pad)).view(b, -1, p, d) * m).sum(2)
    return sums / m.sum(2).clamp_min(1.0), m.squeeze(-1).amax(-1) > 0


class Encoder(nn.Module):
    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.stem = nn.Conv1d(cfg.d_model, cfg.d_model, cfg.stem_kernel, padding=cfg.stem_kernel // 2) \
            if cfg.stem_kernel else None
        self.mixer_kind = mixer_class(cfg.mixer)  # its properties: streams, causal_capable, redraws, ...
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.d_model)
        has_classes = cfg.n_classes > 0
        self.pool_score = nn.Linear(cfg.d_model, 1) if has_classes and cfg.pooling == "attention" else None
        self.pool_position = None
        if self.pool_score is not None and cfg.pool_position_bins:  # zero: plain attention pooling at the start
            self.pool_position = nn.Parameter(torch.zeros(cfg.pool_position_bins))
        self.pool_slope = None
        if self.pool_score is not None and cfg.pool_distance_slope:
            # score offset scale x slope x log2(1 + d) / 16 = -p ln(1 + d)  <=>  slope = -16 ln(2) p / scale
            start = -16 * math.log(2) * cfg.pool_distance_power / cfg.pool_position_scale
            self.pool_slope = nn.Parameter(torch.full((), start))
        self.classifier = nn.Linear(cfg.d_model, cfg.n_classes) if has_classes else None
        self.track_head = nn.Linear(cfg.d_model, cfg.track_channels) if cfg.track_channels else None
        self.kmer_linear = None
        if has_classes and cfg.kmer_logits:
            if cfg.vocab_size != 5 + 4:
                raise ValueError("kmer_logits needs single-base tokens (vocab_size 9: k = 1)")
            self.kmer_linear = nn.Linear(sum(4**k for k in range(1, cfg.kmer_logits + 1)), cfg.n_classes)
            nn.init.zeros_(self.kmer_linear.weight)  # starts as the plain model
            nn.init.zeros_(self.kmer_linear.bias)

    def compile_blocks(self, **options) -> Encoder:
        """torch.compile each block in place (regional compilation: the blocks share their code, so one graph,
        compiled once, serves every layer; two with padding and without); returns self. Embedding, head and the
        padding check stay eager. ``options`` go to torch.compile (e.g. ``backend="aot_eager"`` in tests). In
        training the compiled graphs fuse norm, convolution and MLP forward and backward, and with
        ``checkpointing`` recompute the block inside its backward graph."""
        import torch._inductor.config as inductor_config

        if hasattr(inductor_config.triton, "mix_order_reduction"):
            # inductor's fused cross-axis reduction (the RMSNorm backward over d with the convolution's weight
            # gradient over tokens) ran at half the speed of the two reductions apart
            mode = options.pop("mode", None)  # torch.compile takes a mode or options, so the mode as its options
            mode_options = torch._inductor.list_mode_options(mode) if mode else {}
            options["options"] = {**mode_options, "triton.mix_order_reduction": False, **options.get("options", {})}
        for block in self.blocks:
            if block.checkpointing and block.checkpoint_mlp:
                # nested recompute: the halves compiled each on its own, the recompute around them left to eager
                # autograd (a compiled block flattens nested recompute: 21.2 GiB at 1 M tokens against 16.8 eager)
                block._mixer_residual = torch.compile(block._mixer_residual, dynamic=False, **options)
                block._mlp_residual = torch.compile(block._mlp_residual, dynamic=False, **options)
            else:
                block.compile(dynamic=False, **options)
        return self

    def to_inference_bf16(self) -> Encoder:
        """Weights, and so the residual stream, in bfloat16 for inference under bf16 autocast (returns self).
        Autocast alone keeps float32 weights and a float32 residual stream, which the norms, the convolution and
        the residual additions then read and write at twice the bytes (a genome batch runs about a tenth faster
        in bfloat16, docs/benchmarks.md). The norms keep the float32 epsilon they trained
        with (nn.RMSNorm's default is the input dtype's machine epsilon: 2^-7 for bfloat16)."""
        for module in self.modules():
            if isinstance(module, nn.RMSNorm) and module.eps is None:
                module.eps = torch.finfo(torch.float32).eps
        return self.to(torch.bfloat16)

    @staticmethod
    def set_activation_memory_budget(budget: float | None) -> float:
        """The share of a compiled training graph's activations it keeps for the backward pass (torch's
        ``activation_memory_budget``; 1: what the partitioner keeps by default, lower: it recomputes more inside
        the compiled backward, choosing what is cheapest to recompute). Process-wide, read when a graph is
        compiled (its first call); None leaves it. Returns the value before. Lower budgets trade time for memory:
        0.13 kept about a quarter of the activations at 1.3x the step time, about what whole-block recompute
        costs (docs/benchmarks.md, training step)."""
        import torch._functorch.config as functorch_config

        before = functorch_config.activation_memory_budget
        if budget is not None:
            functorch_config.activation_memory_budget = budget
        return before

    def stem_conv(self, x: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """The stem's convolution of x (B, N, d) -> (B, N, d). Given the ids that x embeds, with a vocabulary
        smaller than d (single bases: 9 against 64-256), the same sum over one-hot ids (B, V, N) with the
        embedding folded into the weights (d, V, K): V / d of the multiply-adds, the bulk of a long input's stem.
        Padding ids are left out of the one-hot (as their zero embedding adds nothing), so the padding row's
        embedding gets no gradient, as nn.Embedding's padding_idx ensures on the other path."""
        n, cfg = x.shape[1], self.cfg
        if ids is None or cfg.vocab_size >= cfg.d_model:
            return self.stem(x.transpose(1, 2))[..., :n].transpose(1, 2)
        folded = torch.einsum("oik,vi->ovk", self.stem.weight, self.embed.weight)  # (d, V, K)
        onehot = F.one_hot(ids, cfg.vocab_size) * (ids != cfg.pad_id).unsqueeze(-1)  # (B, N, V)
        y = F.conv1d(onehot.transpose(1, 2).to(x.dtype), folded.to(x.dtype), self.stem.bias.to(x.dtype),
                     padding=cfg.stem_kernel // 2)
        return y[..., :n].transpose(1, 2)

    def streams(self, rows: int, tokens: int, device: torch.device) -> bool:
        """Whether ``encode`` without gradients streams a batch of ``rows`` sequences of ``tokens`` block tokens
        (after a pooled stem): a streaming mixer and a sequence longer than chunk_tokens, and on CUDA more than
        STREAM_CUDA_MIN_TOKENS block tokens in the batch."""
        if not self.mixer_kind.streams or tokens <= self.cfg.chunk_tokens:
            return False
        return device.type != "cuda" or rows * tokens > STREAM_CUDA_MIN_TOKENS

    def encode(self, ids: torch.Tensor, mask: torch.Tensor | None = None, *, stream: bool | None = None,
               x: torch.Tensor | None = None, padding: bool | None = None):
        """ids (B, N) -> hidden (B, N, d). ``stream``: None = when gradients are off and ``streams`` says so.
        ``x`` (B, N, d): token embeddings to use instead of ``embed(ids)`` (attributions differentiate through
        them: ``genolin.explain``). ``padding``: whether ``mask`` has padding, when the caller knows (None: look,
        which waits for the GPU's queue to drain)."""
        cfg = self.cfg
        if mask is None:
            mask = ids != cfg.pad_id
        mask_or_none = _without_padding(mask) if padding is None else (mask if padding else None)
        embedded = x is None and cfg.positions == "off"  # x is embed(ids) exactly: the stem may work from ids
        x = self.embed(ids) if x is None else x
        if cfg.positions == "sinusoidal":
            x = x + sinusoids(ids.shape[1], cfg.d_model, x.device, x.dtype) * mask.unsqueeze(-1)
        if self.stem is not None:  # padding embeds to zero (padding_idx), so it adds nothing to real tokens
            x = x + F.gelu(self.stem_conv(x, ids if embedded else None))
        if cfg.stem_pool > 1:
            x, mask = pool_groups(x, mask, cfg.stem_pool)
            mask_or_none = None if mask_or_none is None else mask
        if stream is None:
            stream = not torch.is_grad_enabled() and self.streams(x.shape[0], x.shape[1], x.device)
        elif stream and not self.mixer_kind.streams:
            raise ValueError(f"the {cfg.mixer} mixer has no streaming path ({listed(STREAMING_MIXERS)} have)")
        if stream:
            for block in self.blocks:
                block.stream_(x, mask_or_none, cfg.chunk_tokens)
            return self._final_norm_streaming(x)
        for block in self.blocks:
            x = block(x, mask_or_none)
        return self.norm(x)

    @torch.no_grad()
    def _final_norm_streaming(self, x: torch.Tensor) -> torch.Tensor:
        for s in range(0, x.shape[1], self.cfg.chunk_tokens):
            x[:, s:s + self.cfg.chunk_tokens] = self.norm(x[:, s:s + self.cfg.chunk_tokens])
        return x

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked pooling (B, N, d) -> (B, d): mean over real tokens, or softmax-weighted (attention pooling; with
        ``pool_position_bins`` P, token i of a sequence of n real tokens adds ``pool_position_scale`` x
        ``pool_position[floor(P i / n)]`` to its score)."""
        m = mask.unsqueeze(-1).to(hidden.dtype)
        if self.pool_score is None:
            return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
        scores = self.pool_score(hidden)  # (B, N, 1)
        if self.pool_position is not None:
            bins = self.pool_position.numel()
            n = mask.sum(1, keepdim=True).clamp_min(1)  # (B, 1) real tokens (padding sits at the end)
            i = torch.arange(mask.shape[1], device=mask.device)[None]  # (1, N)
            which = torch.div(i * bins, n, rounding_mode="floor").clamp_max(bins - 1)  # (B, N)
            scores = scores + (self.cfg.pool_position_scale * self.pool_position[which]).unsqueeze(-1).to(scores.dtype)
        if self.pool_slope is not None:
            acc = torch.promote_types(scores.dtype, torch.float32)  # positions to 1e5 need more than bf16's 8 bits
            n = mask.sum(1, keepdim=True).clamp_min(1).to(acc)  # (B, 1) real tokens, first
            i = torch.arange(mask.shape[1], device=mask.device, dtype=acc)[None]
            far = torch.log2(1 + (i - (n - 1) / 2).abs()) / 16  # (B, N)
            scores = scores + (self.cfg.pool_position_scale * self.pool_slope * far).unsqueeze(-1).to(scores.dtype)
        scores = scores.masked_fill(~mask.unsqueeze(-1), float("-inf"))
        weights = torch.softmax(scores, dim=1).nan_to_num(0.0)  # all-padding rows: zeros
        return (weights * hidden).sum(1)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None, *, stream: bool | None = None,
                x: torch.Tensor | None = None, profile: torch.Tensor | None = None, padding: bool | None = None):
        """``x``, ``profile``: token embeddings and k-mer profile given instead of computed from ``ids``;
        ``padding``: see ``encode``."""
        if mask is None:
            mask = ids != self.cfg.pad_id
        hidden = self.encode(ids, mask, stream=stream, x=x, padding=padding)
        if self.cfg.stem_pool > 1:
            mask = pool_mask(mask, self.cfg.stem_pool)
        logits = self.classifier(self.pool(hidden, mask)) if self.classifier is not None else None
        if self.kmer_linear is not None:
            profile = kmer_profile(ids, self.cfg.kmer_logits) if profile is None else profile
            logits = logits + self.kmer_linear(profile.to(logits.dtype))
        track = self.track_head(hidden) if self.track_head is not None else None
        return EncoderOutput(hidden=hidden, logits=logits, track=track)

    # -- causal step API --------------------------------------------------------------------------------------
    def init_state(self) -> list[dict]:
        """Per-layer state for :meth:`step` (attention S and z, convolution and window buffers)."""
        if not self.cfg.causal:
            raise ValueError("the step API needs a causal encoder (EncoderConfig.causal=True)")
        return [{} for _ in self.blocks]

    def step(self, ids: torch.Tensor, state: list[dict]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The next token ids (B,) -> (hidden (B, d), track logits (B, C) or None); ``state`` is updated."""
        x = self.embed(ids)
        for block, st in zip(self.blocks, state, strict=True):
            x = block.step(x, st)
        hidden = self.norm(x)
        return hidden, (self.track_head(hidden) if self.track_head is not None else None)

    @torch.no_grad()
    def redraw_favor_features(self, step: int) -> bool:
        """Redraw FAVOR+ projections every ``favor_redraw_interval`` optimizer steps (training only).

        Deterministic in (seed, layer, step): every data-parallel rank draws the same. Returns True if redrawn.
        """
        interval = self.cfg.favor_redraw_interval
        if not self.mixer_kind.redraws or not self.training or interval <= 0 or step == 0 or step % interval:
            return False
        for block in self.blocks:
            block.mixer.redraw(step // interval)
        return True

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def config_from_dict(values: dict) -> EncoderConfig:
    """An EncoderConfig from a dict (e.g. a saved JSON config); unknown keys are an error."""
    known = {f for f in EncoderConfig.__dataclass_fields__}
    unknown = set(values) - known
    if unknown:
        raise ValueError(f"unknown encoder settings: {', '.join(sorted(unknown))}")
    return EncoderConfig(**values)


# the mixer names and tuples are the registry's (genolin.mixers), kept here for the modules that read them from the
# model; Mixer is the base class of every kind
__all__ = ["CAUSAL_MIXERS", "GLA_GATE_NORMALIZER", "GLA_MIN_LOG_DECAY", "LENGTH_LIMITED_MAX_TOKENS",
           "LENGTH_LIMITED_MIXERS", "MIXERS", "SCAN_MIXERS", "STREAMING_MIXERS", "Encoder", "EncoderConfig",
           "EncoderOutput", "Mixer", "config_from_dict"]
