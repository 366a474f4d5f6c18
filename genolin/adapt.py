"""Test-time adaptation: before a track model scores a genome, its masked-token objective is trained on that genome's
own sequence (``genolin predict`` / ``genolin evaluate`` with ``--adapt-steps N``). Opt-in; whether it helps is for
the benchmark to say (``benchmarks/track_recipes.py --adapt-steps N``).

    adapt(run, fasta, steps, lr=, batch_size=, seed=) -> Adaptation: the loaded run's models trained in place, in
        eval mode, cast for inference as ``load_run`` casts them

Each optimizer step: a batch of the run's ``batch_size`` random windows of its training length (``window_bp``) from
the genome(s), each read on a strand drawn at random; ids (B, W / stride) corrupted by ``mask_tokens`` at the run's
``mlm_prob``, k and stride; the loss is ``masked_token_loss`` alone (hidden (B, N, d) against the embedding table),
gradients clipped at the run's ``clip``, AdamW at a constant ``lr``. Only the FASTA is read: no TSS BED reaches this
module, so evaluation labels cannot leak into the weights. The track head gets no gradient (the masked-token loss
does not read it), so it stays as trained; the encoder and the embedding move.

Determinism: windows and strands come from numpy's generator seeded with ``seed``; masking and dropout from torch's,
seeded with ``seed`` inside a forked RNG state (the caller's torch RNG is left as it was). Under torchrun every rank
adapts alike and then takes rank 0's weights, so all ranks score with the same ones.

Weights: adaptation trains float32 weights. A run that ``load_run`` would cast to bfloat16 for inference (track
models on CUDA trained under autocast) must be loaded with ``bf16_weights=False`` and is cast here afterwards
(``Encoder.to_inference_bf16``, as ``load_run`` does); the forward runs under bf16 autocast on CUDA where the run
trained with ``amp``, as training did.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from genolin import memory
from genolin.errors import InputError
from genolin.inference import Run, inference_bf16
from genolin.model import Encoder
from genolin.tasks import TrackData, pad_tokens
from genolin.tasks.masking import mask_tokens, masked_token_loss
from genolin.train import make_optimizer

log = logging.getLogger(__name__)

# The default learning rate, as a share of the run's peak training lr: the weights arrive at the end of a cosine
# decay (to min_lr_ratio, 0.05 by default, of the peak), so a tenth of the peak is about twice the lr they last
# moved at: meant to lower the masked-token loss of a new genome within a few hundred steps while the features the
# (frozen) track head reads move little (an expectation; benchmarks/track_recipes.py --adapt-steps measures it).
LR_SHARE = 0.1
REPORT_STEPS = 10  # the losses logged are the means of the first and of the last this many steps


@dataclass(frozen=True)
class AdaptOptions:
    """What ``--adapt-steps`` and ``--adapt-lr`` ask for; ``steps`` 0: no adaptation."""

    steps: int = 0
    lr: float | None = None  # None: LR_SHARE of each model's training lr
    batch_size: int | None = None  # None: the run's training batch_size
    seed: int = 0


@dataclass
class Adaptation:
    """What one adaptation did: per model of the run (an ensemble's members in order), its lr and the
    masked-token loss of every step."""

    genomes: list[str]
    steps: int
    batch_size: int
    window_bp: int
    lrs: list[float]
    losses: list[list[float]]  # per model: the loss of each step, before that step's update
    seconds: float

    @property
    def report_steps(self) -> int:
        """Steps averaged at each end: REPORT_STEPS, at most half of the steps (so the two ends never overlap)."""
        return max(1, min(REPORT_STEPS, self.steps // 2))

    def loss_start(self, member: int = 0) -> float:
        """The mean loss of the first ``report_steps`` steps of model ``member``."""
        return float(np.mean(self.losses[member][:self.report_steps]))

    def loss_end(self, member: int = 0) -> float:
        """The mean loss of the last ``report_steps`` steps of model ``member``."""
        return float(np.mean(self.losses[member][-self.report_steps:]))

    def describe(self) -> str:
        """One sentence: on what, how many steps, the loss at the start and at the end."""
        losses = "; ".join(f"{self.loss_start(i):.4f} -> {self.loss_end(i):.4f}" for i in range(len(self.losses)))
        lrs = ", ".join(f"{lr:.3g}" for lr in dict.fromkeys(self.lrs))
        n = self.report_steps
        return (f"test-time adaptation on {', '.join(self.genomes)}: {self.steps} steps of the masked-token loss "
                f"(no TSS labels) on batches of {self.batch_size} random windows of {self.window_bp:,} bp, either "
                f"strand, lr {lrs}, {self.seconds:.1f} s; masked-token loss {losses} (mean of the first and of the "
                f"last {n} step{'s' if n > 1 else ''})")

    def record(self) -> dict:
        """For metrics.json: the settings and the losses at the start and the end (per model)."""
        return {"steps": self.steps, "genomes": self.genomes, "batch_size": self.batch_size,
                "window_bp": self.window_bp, "lr": self.lrs,
                "mlm_loss_start": [self.loss_start(i) for i in range(len(self.losses))],
                "mlm_loss_end": [self.loss_end(i) for i in range(len(self.losses))]}


def check_adaptable(run: Run) -> None:
    """An InputError (one line) for a run that test-time adaptation cannot train: one that is not a track model.
    ``predict`` and ``evaluate`` call it before they read their inputs."""
    if not run.task.has_track:
        raise InputError("--adapt-steps", f"test-time adaptation is for track models (it trains on windows of a "
                                          f"genome); this run is a {run.config.task} model")


def adapt(run: Run, fasta: Sequence[str], steps: int, *, lr: float | None = None, batch_size: int | None = None,
          seed: int = 0, circular: Sequence[str] = (), bf16_weights: bool | None = None,
          progress: bool | None = None) -> Adaptation:
    """Train the masked-token loss of ``run``'s model(s) for ``steps`` optimizer steps on random windows of the
    genomes in ``fasta`` (``circular``: contigs read as circles, as ``DataSpec.circular``), then leave them in eval
    mode, cast to bfloat16 when ``bf16_weights`` (None: ``load_run``'s default for this run and device).
    ``lr``: None is LR_SHARE of each model's training lr; ``batch_size``: None is the run's. The run must hold
    float32 weights (``load_run(bf16_weights=False)``). An InputError for a run that is not a track model, a genome
    without a contig as long as a training window, or a batch that would not fit the device's memory."""
    check_adaptable(run)
    if steps < 1:
        raise ValueError(f"adapt needs at least one step, got {steps}")
    predictor = run.predictor
    members = predictor.members
    for model, _ in members:
        if any(p.dtype != torch.float32 for p in model.parameters()):
            raise ValueError("adapt trains float32 weights: load the run with load_run(..., bf16_weights=False)")
        if model.cfg.stem_pool > 1:
            raise InputError("--adapt-steps", f"the masked-token loss reads one hidden state per token; this run "
                                              f"pools {model.cfg.stem_pool} tokens in its stem (model.stem_pool)")
    cfg = run.task.cfg
    data = run.task.scoring_data(list(fasta), [], tuple(circular))  # no TSS BED: labels never reach adaptation
    try:
        regions = data.check_fits(data.whole(), "sequence")
    except InputError:
        longest = max(data.lengths.values(), default=0)
        raise InputError(fasta[0], f"test-time adaptation reads windows of the run's training length "
                                   f"({cfg.window_bp:,} bp); the longest contig has {longest:,} bp") from None
    batch_size = batch_size or cfg.batch_size
    device = predictor.device
    tokens = batch_size * (cfg.window_bp // cfg.stride)
    amp = cfg.amp and device.type == "cuda"
    for model, _ in members:  # one model trains at a time
        needed = memory.training_bytes(model.cfg, tokens, model.n_parameters(), amp=amp)
        memory.check_fits(needed, device, f"test-time adaptation on a batch of {tokens:,} tokens ({batch_size} "
                                          f"windows of {cfg.window_bp:,} bp)",
                          ("the run trained on batches of this size: " if batch_size == cfg.batch_size else "")
                          + "adapt on a device with more memory")
    if cfg.mlm_weight == 0:
        log.warning("this run trained without the masked-token term (mlm_weight 0): adaptation starts that "
                    "objective from scratch through the embedding table")
    t0 = time.monotonic()
    lrs, losses = [], []
    for i, (model, task) in enumerate(members):
        member_lr = lr if lr is not None else LR_SHARE * task.cfg.lr
        lrs.append(member_lr)
        desc = "adapting" + (f" model {i + 1}/{len(members)}" if len(members) > 1 else "")
        losses.append(_train(model, task.cfg, data, regions, steps, member_lr, batch_size, seed, device, amp,
                             desc, progress))
        if predictor.dist.world > 1:
            _take_rank0_weights(model, device, predictor.dist)
        model.eval()
    if bf16_weights is None:
        bf16_weights = inference_bf16(run.config, device)
    if bf16_weights:
        for model, _ in members:
            model.to_inference_bf16()
    done = Adaptation(data.genome_names, steps, batch_size, cfg.window_bp, lrs, losses, time.monotonic() - t0)
    log.info("%s", done.describe())
    return done


def _train(model: Encoder, cfg, data: TrackData, regions, steps: int, lr: float, batch_size: int, seed: int,
           device: torch.device, amp: bool, desc: str, progress: bool | None) -> list[float]:
    """``steps`` AdamW steps of the masked-token loss on ``model`` in place -> the loss of each step."""
    from genolin.progress import progress_bar

    rng = np.random.default_rng([seed, 0x7ADA])
    optimizer = make_optimizer(model, dataclasses.replace(cfg, lr=lr))
    forked = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    losses: list[float] = []
    model.train()
    with torch.random.fork_rng(devices=forked), torch.enable_grad(), \
            progress_bar(total=steps, unit="step", desc=desc, enabled=progress) as bar:
        torch.manual_seed(seed)
        for _ in range(steps):
            windows = data.random_windows(regions, rng, batch_size)
            # (B, W / stride) k-mer ids, each window on a strand drawn at random
            ids, mask = pad_tokens([data.tokens(w, rc=bool(rng.random() < 0.5)) for w in windows])
            ids, mask = ids.to(device), mask.to(device)
            corrupted, chosen = mask_tokens(ids, mask, cfg.mlm_prob, k=cfg.k, stride=cfg.stride)
            try:
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                    out = model(corrupted, mask)
                loss = masked_token_loss(out.hidden, model.embed.weight, ids, chosen)
                del out
                loss.backward()
            except (torch.OutOfMemoryError, RuntimeError) as exc:  # the memory estimate is not exact
                if not memory.is_out_of_memory(exc):
                    raise
                raise InputError(None, f"out of memory in test-time adaptation on a batch of {len(windows)} windows "
                                       f"of {data.window_bp:,} bp (the run's training batch); adapt on a device "
                                       f"with more memory") from None
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            value = loss.item()
            if not math.isfinite(value):
                raise InputError(None, f"test-time adaptation diverged (masked-token loss {value}); give a smaller "
                                       f"--adapt-lr (now {lr:g})")
            losses.append(value)
            bar.update(1)
            bar.set_postfix(mlm_loss=f"{np.mean(losses[-REPORT_STEPS:]):.4f}")
    return losses


def _take_rank0_weights(model: Encoder, device: torch.device, dist) -> None:
    """Under torchrun: every rank's weights replaced by rank 0's (each rank adapted alike; kernels need not be
    bitwise alike across GPUs)."""
    import torch.distributed as tdist

    from genolin.device import peers_alive

    with peers_alive(), torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tdist.broadcast(tensor.data, 0)
    dist.barrier(device)


__all__ = ["LR_SHARE", "AdaptOptions", "Adaptation", "adapt", "check_adaptable"]
