"""Training: the loop, single process or DDP under torchrun. Settings: ``genolin.config``; what is learned and how it
is scored: ``genolin.tasks``; the run directory: ``genolin.checkpoint``.

    Trainer.fit: per epoch, the task's batches -> micro_step (forward, loss, backward; gradients all-reduced on
    the last micro-batch of an accumulation only) -> optimizer_step (clip, lr from the schedule, AdamW) -> ...
    -> evaluate (the task's scoring of the validation set through genolin.inference, as ``genolin evaluate``
    does) -> early stopping -> checkpoint.

Sharpness-aware minimization (``sam_rho`` > 0; Foret et al. 2021): with the gradient g of an optimizer step's
batches (all micro-batches of an accumulation, all-reduced under DDP), the weights move to w + rho g / ||g||, the same
batches run forward and backward again there (same augmentation, same dropout masks), the weights move back and the
optimizer steps with that second gradient. Twice a plain step's compute.

Weight averaging (``ema_decay`` > 0): after each optimizer step every parameter's average moves towards it,
avg <- avg + (1 - d_t) (w - avg), d_t = min(ema_decay, (1 + t) / (10 + t)) at step t. The averages live in the
optimizer's per-parameter state (key "ema", beside AdamW's moments), so checkpoints and --resume carry them;
validation and best.safetensors use the averaged weights (the model's buffers, e.g. FAVOR+ projections, as they
are), model.safetensors the trained ones that --resume continues.

Schedule: linear warm-up to ``lr`` over ``warmup_steps`` optimizer steps, then cosine decay to
``lr * min_lr_ratio`` at the last step (epochs x steps per epoch, or ``max_steps``).

Determinism and resume: the batch order of epoch e comes from (seed, e), augmentation of batch b from
(seed, e, b), and torch's RNG (dropout) is seeded from (seed, optimizer step) before every micro-batch, so a run
resumed from any checkpoint continues exactly as the uninterrupted run. Checkpoints are written at the end of every
epoch and when --max-steps / --max-minutes stop the run, always at an optimizer-step boundary.

DDP: with RANK set (torchrun), every rank builds the same batch list and takes every world-th batch; gradients are
all-reduced, so all ranks hold the same weights and compute the same validation metric and early-stopping decision.
Rank 0 logs and writes the run directory.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from genolin import __version__, memory
from genolin import checkpoint as ckpt
from genolin.config import DataSpec, Setting, TrainConfig, describe_tokens, make_config
from genolin.device import init_distributed, pick_device
from genolin.errors import InputError
from genolin.inference import Predictor, describe_views
from genolin.model import Encoder, kmer_profile
from genolin.tasks import TASK_TYPES, get_task
from genolin.tasks.masking import mask_tokens, masked_token_loss

log = logging.getLogger(__name__)


def lr_at(step: int, total: int, cfg: TrainConfig, min_progress: float = 0.0) -> float:
    """Linear warm-up to cfg.lr, then cosine decay to cfg.lr * min_lr_ratio when progress reaches 1: progress is
    the fraction of the post-warm-up steps done of ``total``, or ``min_progress`` (of a time budget) if larger."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = max(min(1.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)), min(1.0, min_progress))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


@contextlib.contextmanager
def holding(params: list[torch.Tensor], values: list[torch.Tensor]):
    """``params`` hold ``values`` inside (copied in), their own values again after (copied back exactly: a restore by
    subtraction, w + e - e, need not give w)."""
    own = [p.detach().clone() for p in params]
    with torch.no_grad():
        torch._foreach_copy_(params, values)
    try:
        yield
    finally:
        with torch.no_grad():
            torch._foreach_copy_(params, own)


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98))


class Trainer:
    def __init__(self, cfg: TrainConfig, spec: DataSpec, out_dir: str | os.PathLike, *, device: str = "auto",
                 resume: bool = False, progress: bool | None = None):
        self.spec, self.out = spec, Path(out_dir)
        self.dist = init_distributed(device)
        self.device = pick_device(device, self.dist.local_rank)
        self.progress = progress if self.dist.main else False
        self.task = get_task(spec.task, cfg)
        self.task.load_training(spec)
        self.cfg = dataclasses.replace(cfg, model=cfg.encoder_config(self.task.head(), self.task.longest_tokens()))
        self.task.cfg = self.cfg
        torch.manual_seed(self.cfg.seed)
        self.model = Encoder(self.cfg.model)
        self.fitted_at_start = not resume and self.task.init_model(self.model)
        self.model = self.model.to(self.device)
        self._budget_before = None
        if self.cfg.compile and self.device.type == "cuda":
            if self.cfg.compile_memory_budget is not None:  # restored by close()
                self._budget_before = Encoder.set_activation_memory_budget(self.cfg.compile_memory_budget)
            self.model.compile_blocks(**({} if self.cfg.compile_mode == "default" else {"mode": self.cfg.compile_mode}))
        elif self.cfg.compile:  # on a CPU the compiler's start-up (tens of seconds) outweighs what it saves
            log.warning("compile: CUDA only; the blocks run uncompiled on %s", self.device)
        self.optimizer = make_optimizer(self.model, self.cfg)
        self.net = self.model
        if self.dist.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.net = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.predictor = Predictor(self.model, self.task, self.device, batch_size=self.cfg.batch_size,
                                   max_tokens=self.cfg.max_tokens, amp=self.cfg.amp)
        self.check_memory()
        # start_margin: how far training must beat the starting model's validation score (``validate_start``)
        self.state = {"epoch": 0, "batch": 0, "step": 0, "best": None, "best_epoch": None, "bad_epochs": 0,
                      "done": False, "progress": 0.0, "start_margin": 0.0}
        self.total = 1  # the schedule's length in optimizer steps, set by fit
        self._lock = ckpt.lock_run_dir(self.out) if self.dist.main else None  # released by close() or at exit
        try:
            if resume:
                self._resume()
            elif self.dist.main:
                self._start_run_dir()
        except BaseException:
            self.close()
            raise
        self.progress_at_start = self.state["progress"]  # the schedule's progress when this run started
        self.step_at_start, self.by_clock = self.state["step"], False

    def check_memory(self) -> None:
        """An InputError before the first step when the largest training batch (``Task.largest_batch``) would not
        fit the device's memory by ``genolin.memory``'s estimate, naming it and the settings to change."""
        tokens, what = self.task.largest_batch()
        amp = self.cfg.amp and self.device.type == "cuda"
        needed = memory.training_bytes(self.cfg.model, tokens, self.model.n_parameters(), amp=amp,
                                       ema=self.cfg.ema_decay > 0)
        memory.check_fits(needed, self.device, f"training on a batch of {tokens:,} tokens ({what})",
                          self._memory_fix(tokens))

    def _memory_fix(self, tokens: int) -> str:
        """The settings that make a training batch of ``tokens`` tokens (the largest) smaller, in words."""
        cfg = self.cfg
        fewer = "" if tokens <= self.task.longest_tokens() else \
            f"lower max_tokens (now {cfg.max_tokens:,}) or batch_size, or "
        recompute = "" if cfg.model.checkpointing else "model.checkpointing=true, "
        return f"{fewer}set {recompute}a larger stride or a smaller model (--set KEY=VALUE)"

    def close(self) -> None:
        """Release the run directory's lock and the process group."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        if self._budget_before is not None:
            Encoder.set_activation_memory_budget(self._budget_before)
            self._budget_before = None
        self.dist.close()

    # -- the run directory ---------------------------------------------------------------------------------------
    def _start_run_dir(self) -> None:
        if (self.out / ckpt.STATE).exists():
            raise InputError(self.out, "holds a run already: continue it with --resume, or choose another --out")
        ckpt.write_run_config(self.out, ckpt.RunConfig(self.spec.task, self.cfg, self.spec, self.task.state()))

    def _resume(self) -> None:
        self.state.update(ckpt.load_checkpoint(self.out, self.model, self.optimizer))
        log.info("resuming %s at epoch %d, step %d", self.out, self.state["epoch"] + 1, self.state["step"])

    def checkpoint(self, *, best: bool = False, metrics: dict | None = None,
                   best_weights: dict[str, torch.Tensor] | None = None) -> None:
        """A crash-safe checkpoint (genolin.checkpoint); with ``best`` also best.safetensors (of ``best_weights``
        where given, else the model's or its averages), carrying the decision threshold chosen on ``metrics``, the
        validation that made these weights the best."""
        if not self.dist.main:
            return
        meta = {"step": str(self.state["step"]), "epoch": str(self.state["epoch"])}
        best_meta = None
        if best:
            chosen = (metrics or {}).get("best_threshold")
            best_meta = dict(meta)
            if chosen:  # tracks: max F1; classifiers: max MCC (the metric is stored beside the value)
                rule = "f1" if "f1" in chosen else "mcc"
                best_meta.update({"threshold": repr(chosen["value"]), f"threshold_{rule}": repr(chosen[rule])})
        if best_meta is not None and best_weights is None and self.cfg.ema_decay:  # the averaged weights
            with self.averaged_weights():
                best_weights = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        ckpt.save_checkpoint(self.out, self.model, self.optimizer, self.state, meta=meta, best_meta=best_meta,
                             best_weights=best_weights)

    def _log_metrics(self, record: dict) -> None:
        if self.dist.main:
            with open(self.out / "metrics.jsonl", "a") as fh:
                fh.write(json.dumps(record) + "\n")

    # -- steps ---------------------------------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list:
        """This rank's batches of an epoch (whole accumulation groups). With ``val_every_steps`` a track epoch is
        that many optimizer steps of windows."""
        cfg = self.cfg
        n_batches = cfg.val_every_steps * cfg.grad_accum * self.dist.world if cfg.val_every_steps else None
        batches = self.task.epoch_batches(np.random.default_rng([cfg.seed, epoch]), n_batches)
        per_rank = len(batches) // self.dist.world
        if per_rank == 0:
            raise InputError(None, f"too little training data for {self.dist.world} processes")
        usable = per_rank - per_rank % cfg.grad_accum or per_rank
        return batches[self.dist.rank::self.dist.world][:usable]

    def plan(self) -> tuple[int, int]:
        """(optimizer steps of the schedule, epochs to run): ``steps`` if set, else epochs x steps per epoch;
        ``max_steps`` ends it earlier."""
        cfg = self.cfg
        per_epoch = max(1, -(-len(self.epoch_batches(0)) // cfg.grad_accum))
        total = cfg.steps if cfg.steps is not None else cfg.epochs * per_epoch
        epochs = -(-cfg.steps // per_epoch) if cfg.steps is not None else cfg.epochs
        return (min(total, cfg.max_steps) if cfg.max_steps is not None else total), epochs

    def schedule_progress(self) -> float:
        """How far the schedule is, 0 to 1: by steps, or by the clock under a time budget when that is further."""
        return min(1.0, max(self.state["step"] / max(1, self.total), self.state["progress"]))

    def time_progress(self, total: int, t_start: float) -> float:
        """The schedule's progress by the clock under a time budget (max_minutes), 0 while the steps are on pace
        to finish in time (then the schedule is by steps alone, deterministic). Once, after 20 steps, the pace says
        they would not, the clock takes over for the rest of the run: progress runs from where this run started to
        1 at its deadline."""
        cfg = self.cfg
        if cfg.max_minutes is None:
            return 0.0
        budget, elapsed = cfg.max_minutes * 60, time.monotonic() - t_start
        if not self.by_clock:
            done = self.state["step"] - self.step_at_start
            if done < 20 or elapsed + elapsed / done * (total - self.state["step"]) <= budget:
                return 0.0
            self.by_clock = True
            log.info("at this pace the %d steps would not end within %s min: the schedule follows the clock",
                     total, cfg.max_minutes)
        p0 = self.progress_at_start
        return p0 + (1 - p0) * elapsed / budget

    def micro_step(self, items, epoch: int, b: int, *, sync: bool) -> tuple[float, int]:
        """Forward, loss and backward of batch ``b``; DDP all-reduces only when ``sync`` (the last of a group).
        Running out of memory all the same (the estimate of ``check_memory`` is not exact) is an InputError."""
        try:
            return self._micro_step(items, epoch, b, sync=sync)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not memory.is_out_of_memory(exc):
                raise
            tokens, what = self.task.largest_batch()
            raise InputError(None, f"out of memory training on a batch of {len(items)} item(s) ({what}); "
                                   f"{self._memory_fix(tokens)}") from None

    def _micro_step(self, items, epoch: int, b: int, *, sync: bool) -> tuple[float, int]:
        cfg = self.cfg
        torch.manual_seed(cfg.seed * 1_000_003 + self.state["step"] * 131 + b % cfg.grad_accum)
        batch = self.task.collate(items, np.random.default_rng([cfg.seed, epoch, b]),
                                  progress=self.schedule_progress()).to(self.device)
        ids, chosen, extra = batch.ids, None, {}
        if cfg.mlm_weight > 0:
            ids, chosen = mask_tokens(batch.ids, batch.mask, cfg.mlm_prob, k=cfg.k, stride=cfg.stride)
            if self.model.kmer_linear is not None:  # the k-mer term counts the sequence as it is
                extra["profile"] = kmer_profile(batch.ids, self.model.cfg.kmer_logits)
        no_sync = self.net.no_sync() if self.dist.world > 1 and not sync else contextlib.nullcontext()
        amp = cfg.amp and self.device.type == "cuda"
        with no_sync:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                out = self.net(ids, batch.mask, **extra)
            loss = self.task.loss(out, batch)
            if chosen is not None:
                loss = loss + cfg.mlm_weight * masked_token_loss(out.hidden, self.model.embed.weight, batch.ids,
                                                                 chosen)
            del out  # hidden (B, N, d) float32 is not saved for backward: freed before it (~98 MiB per 100 k tokens)
            (loss / cfg.grad_accum).backward()
        return loss.item(), batch.n_tokens

    def sharpness_aware_gradient(self, group: list, epoch: int, first: int) -> None:
        """SAM: replace the gradient of the optimizer step over ``group`` (its micro-batches' items; the first is batch
        ``first`` of the epoch) by the gradient at w + sam_rho g / ||g||, g the gradient now held."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        grads = [p.grad for p in params]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        moved = torch._foreach_add([p.detach() for p in params],
                                   torch._foreach_mul(grads, self.cfg.sam_rho / (norm.item() + 1e-12)))
        self.optimizer.zero_grad(set_to_none=True)
        with holding(params, moved):
            for i, items in enumerate(group):
                self.micro_step(items, epoch, first + i, sync=i == len(group) - 1)

    def optimizer_step(self, lr: float) -> None:
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.update_average(self.state["step"])
        self.state["step"] += 1
        self.model.redraw_favor_features(self.state["step"])

    def _params_and_averages(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        params = [p for group in self.optimizer.param_groups for p in group["params"]
                  if "ema" in self.optimizer.state[p]]
        return params, [self.optimizer.state[p]["ema"] for p in params]

    def update_average(self, step: int) -> None:
        """The weight average after optimizer step ``step`` (see the module docstring); nothing without ema_decay."""
        if not self.cfg.ema_decay:
            return
        for group in self.optimizer.param_groups:
            for p in group["params"]:  # a parameter's average starts at its weights after its first update
                state = self.optimizer.state[p]  # (empty until then: AdamW initialises a parameter's empty state)
                if state and "ema" not in state:
                    state["ema"] = p.detach().clone()
        params, averages = self._params_and_averages()
        decay = min(self.cfg.ema_decay, (1 + step) / (10 + step))
        with torch.no_grad():
            torch._foreach_lerp_(averages, [p.detach() for p in params], 1 - decay)

    @contextlib.contextmanager
    def averaged_weights(self):
        """The model holds the averaged weights inside (the trained ones again after); a no-op without averages."""
        if not self.cfg.ema_decay or self.state["step"] == 0:  # no average before the first step
            yield
            return
        with holding(*self._params_and_averages()):
            yield

    def stop_reason(self, t_start: float) -> str | None:
        cfg = self.cfg
        if cfg.max_steps is not None and self.state["step"] >= cfg.max_steps:
            return f"max_steps {cfg.max_steps}"
        if cfg.max_minutes is not None and time.monotonic() - t_start > cfg.max_minutes * 60:
            return f"max_minutes {cfg.max_minutes}"
        return None

    def schedule_done(self) -> bool:
        return self.cfg.steps is not None and self.state["step"] >= self.cfg.steps

    # -- hooks ---------------------------------------------------------------------------------------------------
    def evaluate(self) -> dict | None:
        """The task's metrics on the validation set (None without one), as ``genolin evaluate`` scores the input as
        given (``--no-rc-average --shift-average 0``; ``threshold_as_predicted`` redoes the best weights' threshold
        over the views that predict uses)."""
        if self.task.val_set is None:
            return None
        self.model.eval()
        try:
            with self.averaged_weights():
                return self.task.evaluate(self.predictor, self.task.val_set, progress=False)[0]
        finally:
            self.model.train()

    def validate_start(self) -> None:
        """Validation of the model as the task set it up (epoch 0): the best weights unless training beats it, by
        more than one standard error of its score where the task gives one ("score_se": a classifier started from
        the k-mer regression keeps it unless training is better beyond the validation set's noise; the
        one-standard-error rule of model selection). On small sets a higher validation MCC at one threshold is
        mostly noise: on a 251-nt A. thaliana set (98 validation sequences) the regression scored 0.470, training
        0.533 with a lower AUROC (0.80 against 0.83), and lost 7-12 test MCC points to it."""
        st = self.state
        metrics = self.evaluate()
        if metrics is None:
            return
        kept = None
        if self.task.start_alternative:  # e.g. the k-mer regression fitted to convergence: kept if it validates
            metrics, kept = self._validate_alternative(metrics)  # at least as well; training starts as set up
        st["best"], st["best_epoch"] = metrics["score"], 0
        st["start_margin"] = float(metrics.get("score_se", 0.0))
        self.checkpoint(best=True, metrics=metrics, best_weights=kept)
        self._log_metrics({"epoch": 0, "step": 0, "val": metrics})
        log.info("before training: validation score %.4f%s", metrics["score"],
                 f" (training must beat it by {st['start_margin']:.4f}, one standard error)"
                 if st["start_margin"] else "")

    def _validate_alternative(self, metrics: dict) -> tuple[dict, dict | None]:
        """The task's ``start_alternative`` (parameter name -> value) validated in place of the start's values:
        (its metrics and the whole state dict with it) when it scores at least the start's ``metrics``, else
        (``metrics``, None). The model holds the start's values again after."""
        params = dict(self.model.named_parameters())
        alternative = self.task.start_alternative
        with holding([params[name] for name in alternative], list(alternative.values())):
            other = self.evaluate()
            kept = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        log.info("before training, the start's alternative: validation score %.4f against %.4f (%s)",
                 other["score"], metrics["score"], "kept" if other["score"] >= metrics["score"] else "not kept")
        return (other, kept) if other["score"] >= metrics["score"] else (metrics, None)

    def _improves(self, metrics: dict | None) -> bool:
        """Whether a validation beats the best so far (the starting model by ``start_margin``)."""
        st = self.state
        if metrics is None:
            return False
        if st["best"] is None:
            return True
        margin = st.get("start_margin", 0.0) if st["best_epoch"] == 0 else 0.0
        return metrics["score"] > st["best"] + margin

    def threshold_as_predicted(self) -> None:
        """A two-class classifier that predict and evaluate score over several views by default (both strands and
        shifts: ``Task.default_views``): its best weights are scored on validation over those views and the
        decision threshold stored with them is chosen there (max MCC), on the probabilities predict computes,
        not on the forward strand's that chose the epoch."""
        rc, shifts = self.task.default_views(self.cfg)
        best = self.out / ckpt.BEST
        if not (self.dist.main and (rc or shifts) and self.task.val_set is not None
                and len(getattr(self.task, "classes", ())) == 2 and best.exists()):
            return
        model = Encoder(self.cfg.model).to(self.device).eval()
        meta = ckpt.load_weights(best, model)
        predictor = Predictor(model, self.task, self.device, batch_size=self.cfg.batch_size,
                              max_tokens=self.cfg.max_tokens, amp=self.cfg.amp, shift_views=shifts)
        metrics = self.task.evaluate(predictor, self.task.val_set, rc_average=rc, progress=False)[0]
        chosen = metrics.get("best_threshold")
        if chosen:
            meta.update({"threshold": repr(chosen["value"]), "threshold_mcc": repr(chosen["mcc"]),
                         "threshold_views": describe_views(rc, shifts)})
            ckpt.save_weights(best, model, meta)
            log.info("decision threshold %.4g (max MCC %.4f) chosen on validation over %s, as predict scores",
                     chosen["value"], chosen["mcc"], meta["threshold_views"])
        # the best weights' validation over the views (no "epoch": not a line of the epochs)
        self._log_metrics({"best_epoch": self.state["best_epoch"], "step": self.state["step"],
                           "views": {"rc_average": rc, "shift_average": shifts}, "val": metrics})

    def end_stopped(self, reason: str) -> None:
        """A stop rule fired inside an epoch: validation at the stop point (a better score becomes the best weights;
        patience is not charged), and a checkpoint from which --resume continues the epoch."""
        st = self.state
        metrics = self.evaluate()
        improved = self._improves(metrics)
        if improved:
            st["best"], st["best_epoch"] = metrics["score"], st["epoch"] + 1
        self.checkpoint(best=improved, metrics=metrics)
        self._log_metrics({"epoch": st["epoch"] + 1, "step": st["step"], "stopped": reason, "val": metrics})
        score = "" if metrics is None else f"; validation score {metrics['score']:.4f}"
        log.info("stopped by %s at step %d (epoch %d, batch %d)%s; continue with --resume", reason, st["step"],
                 st["epoch"] + 1, st["batch"], score)

    def end_epoch(self, record: dict) -> None:
        """Validation, early stopping, checkpoint and the metrics line after a complete epoch."""
        st, cfg = self.state, self.cfg
        metrics = record["val"] = self.evaluate()
        improved = self._improves(metrics)
        if improved:
            st["best"], st["best_epoch"], st["bad_epochs"] = metrics["score"], record["epoch"], 0
        elif metrics is not None:
            st["bad_epochs"] += 1
        st["epoch"], st["batch"] = record["epoch"], 0
        if cfg.patience and st["bad_epochs"] >= cfg.patience:
            st["done"] = True
            log.info("early stop: no improvement for %d epochs (best %.4f at epoch %d)", cfg.patience, st["best"],
                     st["best_epoch"])
        self.checkpoint(best=improved or metrics is None, metrics=metrics)
        self._log_metrics(record)
        score = "" if metrics is None else f", validation score {metrics['score']:.4f}"
        log.info("epoch %d: loss %.4f, %.0f tokens/s, %.3g items/s, peak memory %.2f GiB%s", record["epoch"],
                 record["train_loss"] or float("nan"), record["tokens_per_s"], record["items_per_s"],
                 record["peak_memory_gib"], score)

    # -- the loop ------------------------------------------------------------------------------------------------
    def train_epoch(self, total: int, t_start: float) -> tuple[dict | None, str | None]:
        """Optimizer steps over the rest of the current epoch -> (its record, or None when a stop rule ended it
        early; the stop rule that fired, if any)."""
        from genolin.progress import progress_bar

        cfg, st = self.cfg, self.state
        epoch = st["epoch"]
        batches = self.epoch_batches(epoch)
        losses, tokens, items, t_epoch, stopped = [], 0, 0, time.monotonic(), None
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        with progress_bar(total=len(batches), unit="batch", desc=f"epoch {epoch + 1}/{cfg.epochs}",
                          enabled=self.progress) as bar:
            bar.update(st["batch"])
            for b in range(st["batch"], len(batches)):
                boundary = (b + 1) % cfg.grad_accum == 0 or b + 1 == len(batches)
                loss, n = self.micro_step(batches[b], epoch, b, sync=boundary)
                losses.append(loss)
                tokens += n
                items += len(batches[b])
                bar.update(1)
                if not boundary:
                    continue
                if cfg.sam_rho > 0:
                    self.sharpness_aware_gradient(batches[st["batch"]:b + 1], epoch, st["batch"])
                st["progress"] = max(st["progress"], self.time_progress(total, t_start))
                self.optimizer_step(lr_at(st["step"], total, cfg, st["progress"]))
                st["batch"] = b + 1
                seconds = time.monotonic() - t_epoch
                bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", tok_s=f"{tokens * self.dist.world / seconds:.0f}")
                stopped = self.stop_reason(t_start)
                if stopped or self.schedule_done():
                    break
        if st["batch"] < len(batches) and not self.schedule_done():
            return None, stopped
        seconds = time.monotonic() - t_epoch
        record = {"epoch": epoch + 1, "step": st["step"], "train_loss": float(np.mean(losses)) if losses else None,
                  "lr": lr_at(max(st["step"] - 1, 0), total, cfg, st["progress"]), "seconds": seconds,
                  "tokens_per_s": tokens * self.dist.world / max(seconds, 1e-9),
                  "items_per_s": items * self.dist.world / max(seconds, 1e-9),
                  "peak_memory_gib": memory.peak_bytes(self.device) / memory.GIB}
        return record, stopped

    def fit(self) -> dict:
        st = self.state
        total, epochs = self.plan()
        self.total = total
        t_start = time.monotonic()
        if self.fitted_at_start and st["step"] == 0 and st["best"] is None:
            self.validate_start()
        self.model.train()
        stopped = None
        while st["epoch"] < epochs and not st["done"] and not self.schedule_done():
            record, stopped = self.train_epoch(total, t_start)
            if record is None:  # a stop rule fired inside the epoch
                self.end_stopped(stopped)
                break
            self.end_epoch(record)
            if stopped:
                break
        self.threshold_as_predicted()
        self.dist.barrier(self.device)
        return {"epochs": st["epoch"], "steps": st["step"], "best_score": st["best"], "best_epoch": st["best_epoch"],
                "stopped": stopped, "seconds": time.monotonic() - t_start}


def longest_input_bp(spec: DataSpec) -> int | None:
    """The longest input of ``spec``'s training and validation files, as its task reads them
    (``Task.longest_input_bp``: a sequence task's longest sequence; None for a task whose inputs are not read by
    length, or an unknown task, which ``make_config`` reports)."""
    kind = TASK_TYPES.get(spec.task)
    return kind.longest_input_bp(spec) if kind else None


def configure(preset: str, settings: list[Setting], spec: DataSpec) -> TrainConfig:
    """A new run's settings (``genolin.config.make_config``) for the data of ``spec``: a sequence task's preset
    recipe is chosen by its longest input (long sequences: k-mer tokens, a linear-time mixer, attention pooling)."""
    return make_config(spec.task, preset, settings, longest_bp=longest_input_bp(spec))


def describe_model(cfg: TrainConfig) -> str:
    """The recipe in one line: tokens, encoder, head."""
    m = cfg.model
    blocks = f"{describe_tokens(cfg)}; {m.n_layers} x {m.d_model} {m.mixer} blocks"
    if not m.n_classes:
        return f"{blocks}; per-token track head"
    head = f"{m.pooling} pooling" + (f" with {m.pool_position_bins} position bins" if m.pool_position_bins else "")
    if m.kmer_logits:
        kmer = f"bag-of-k-mers term k = 1..{m.kmer_logits}"
    else:
        kmer = "no bag-of-k-mers term" + (" (it needs single-base tokens, k = 1)" if cfg.k > 1 else "")
    return f"{blocks}{', recomputed in backward' if m.checkpointing else ''}; {head}; {kmer}"


RUN_FILES = (ckpt.CONFIG, "train.log", "metrics.jsonl", ckpt.BEST, ckpt.WEIGHTS, ckpt.LOCK, "checkpoints")


def _remove_unfinished(out: Path, before: set[str], created: bool) -> None:
    """A new run that stopped before its first checkpoint leaves nothing behind: the run files it wrote (not those
    in ``before``, which were there already), and the folder when it made it and nothing else is in it."""
    import shutil

    if not out.is_dir() or (out / ckpt.STATE).exists():
        return
    for name in set(RUN_FILES) - before:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):
            out.rmdir()  # only when empty


def train(cfg: TrainConfig, spec: DataSpec, out_dir: str | os.PathLike, *, device: str = "auto",
          resume: bool = False, progress: bool | None = None) -> dict:
    """Train (or continue) a run; returns a summary. The run directory is described in genolin.checkpoint. A new
    run that fails after taking its folder and before its first checkpoint removes what it wrote there."""
    out = Path(out_dir)
    created = not out.exists()
    before = {name for name in RUN_FILES if (out / name).exists()}
    try:
        trainer = Trainer(cfg, spec, out_dir, device=device, resume=resume, progress=progress)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):  # e.g. made for a lock another run holds: empty
            out.rmdir()
        raise
    try:
        return _train(trainer, spec)
    except BaseException:
        if trainer.dist.main and not resume:  # this process holds the folder's lock (or did until just now)
            _remove_unfinished(out, before, created)
        raise


def _train(trainer: Trainer, spec: DataSpec) -> dict:
    handler = None
    if trainer.dist.main:
        handler = logging.FileHandler(trainer.out / "train.log")
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logging.getLogger("genolin").addHandler(handler)
    try:
        log.info("genolin %s: %s task, %s parameters, device %s, %d process(es)", __version__, spec.task,
                 f"{trainer.model.n_parameters():,}", trainer.device, trainer.dist.world)
        log.info("model: %s", describe_model(trainer.cfg))
        summary = trainer.fit()
    finally:
        if handler is not None:
            logging.getLogger("genolin").removeHandler(handler)
            handler.close()
        trainer.close()
    return summary
