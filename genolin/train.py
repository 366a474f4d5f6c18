"""Training: the loop, single process or DDP under torchrun. Settings: ``genolin.config``; what is learned and how it
is scored: ``genolin.tasks``; the learning rate and the stop rules: ``genolin.schedule``; weight averaging
(``ema_decay``): ``genolin.averaging``; validation, the best weights and early stopping: ``genolin.selection``; the
run directory: ``genolin.checkpoint``.

    Trainer.fit: per epoch, the task's batches -> micro_step (forward, loss, backward; gradients all-reduced on
    the last micro-batch of an accumulation only) -> optimizer_step (clip, lr from the schedule, AdamW, the weight
    average) -> ... -> end_epoch (validation as ``genolin evaluate`` scores, early stopping, checkpoint).

Sharpness-aware minimization (``sam_rho`` > 0; Foret et al. 2021): with the gradient g of an optimizer step's
batches (all micro-batches of an accumulation, all-reduced under DDP), the weights move to w + rho g / ||g||, the same
batches run forward and backward again there (same augmentation, same dropout masks), the weights move back and the
optimizer steps with that second gradient. Twice a plain step's compute.

Determinism and resume: the batch order of epoch e comes from (seed, e), augmentation of batch b from
(seed, e, b), and torch's RNG (dropout) is seeded from (seed, optimizer step) before every micro-batch, so a run
resumed from any checkpoint continues exactly as the uninterrupted run. Checkpoints are written at the end of every
epoch, when --max-steps / --max-minutes stop the run and on Ctrl-C (``Interrupts``: once an optimizer step has been
taken since the last one), always at an optimizer-step boundary.

DDP: with RANK set (torchrun), every rank builds the same batch list and takes every world-th batch; gradients are
all-reduced, so all ranks hold the same weights and compute the same validation metric and early-stopping decision.
Rank 0 logs and writes the run directory.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from genolin import __version__, memory
from genolin import checkpoint as ckpt
from genolin.averaging import WeightAverage, holding
from genolin.config import DataSpec, Setting, TrainConfig, describe_tokens, make_config
from genolin.device import init_distributed, pick_device, shape_free_kernels
from genolin.errors import InputError
from genolin.inference import Predictor
from genolin.inference.teacher import teacher_tracks
from genolin.model import Encoder, kmer_profile
from genolin.schedule import Schedule, lr_at
from genolin.selection import ModelSelection
from genolin.tasks import TASK_TYPES, Task, get_task
from genolin.tasks.base import Batch
from genolin.tasks.masking import mask_tokens, masked_token_loss
from genolin.train_graph import GraphedStep

__all__ = ["Trainer", "configure", "configure_init", "describe_model", "longest_input_bp", "lr_at", "make_optimizer",
           "train"]

log = logging.getLogger(__name__)

LOSS_EVERY = 25  # optimizer steps between the progress bar's loss readings (each one waits for the device)


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig, device: torch.device | None = None
                   ) -> torch.optim.Optimizer:
    """AdamW, weight decay on matrices only; on CUDA fused (one kernel for all parameters, graph-safe)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() >= 2 and "embed" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    fused = device is not None and device.type == "cuda"
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.98), fused=fused or None)


def made_ahead(make, first: int, end: int, depth: int = 2):
    """``make(b)`` for b in first..end-1, in order, each made on a worker thread up to ``depth`` batches ahead of
    the one the caller holds (the host's batch making overlaps the device's step)."""
    with ThreadPoolExecutor(1, thread_name_prefix="genolin-batches") as pool:
        pending = collections.deque(pool.submit(make, b) for b in range(first, min(first + depth, end)))
        nxt = first + len(pending)
        try:
            while pending:
                made = pending.popleft().result()
                if nxt < end:
                    pending.append(pool.submit(make, nxt))
                    nxt += 1
                yield made
        finally:
            for f in pending:
                f.cancel()


def check_memory(cfg: TrainConfig, task: Task, model: Encoder, device: torch.device) -> None:
    """An InputError before the first step when the largest training batch (``Task.largest_batch``) would not
    fit the device's memory by ``genolin.memory``'s estimate, naming it and the settings to change."""
    tokens, what = task.largest_batch()
    amp = cfg.amp and device.type == "cuda"
    needed = memory.training_bytes(cfg.model, tokens, model.n_parameters(), amp=amp, ema=cfg.ema_decay > 0)
    memory.check_fits(needed, device, f"training on a batch of {tokens:,} tokens ({what})",
                      memory_fix(cfg, task, tokens))


def memory_fix(cfg: TrainConfig, task: Task, tokens: int) -> str:
    """The settings that make a training batch of ``tokens`` tokens (the largest) smaller, in words."""
    fewer = "" if tokens <= task.longest_tokens() else \
        f"lower max_tokens (now {cfg.max_tokens:,}) or batch_size, or "
    recompute = "" if cfg.model.checkpointing else "model.checkpointing=true, "
    return f"{fewer}set {recompute}a larger stride or a smaller model (--set KEY=VALUE)"


class Interrupts:
    """Ctrl-C during training: SIGINT raises KeyboardInterrupt at once, as Python's own handler does, except inside
    ``held()``, which it waits for: an optimizer step with the state that counts it, a checkpoint, the end of an
    epoch. So the trainer state, weights and optimizer a Ctrl-C leaves agree, and a checkpoint of them continues the
    run exactly. ``let_through()`` (a validation, inside the end of an epoch) takes it at once again. The handler is
    set (``installed``) only in the main thread and where Python's own is set; elsewhere nothing is held."""

    def __init__(self):
        self.holding = 0
        self.pending = False

    def _handler(self, signum, frame) -> None:
        if self.holding:
            self.pending = True
        else:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self):
        own = (threading.current_thread() is threading.main_thread()
               and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
        if own:
            signal.signal(signal.SIGINT, self._handler)
        try:
            yield
        finally:
            if own:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            self.pending = False

    @contextlib.contextmanager
    def held(self):
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
        if self.pending and not self.holding:
            self.pending = False
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def let_through(self):
        holding, self.holding = self.holding, 0
        try:
            if self.pending:
                self.pending = False
                raise KeyboardInterrupt
            yield
        finally:
            self.holding = holding


class InterruptibleSelection(ModelSelection):
    """``ModelSelection`` whose validations a Ctrl-C stops at once, inside the trainer's holds (``interrupts``)
    too."""

    def __init__(self, *args, interrupts: Interrupts, **kwargs):
        super().__init__(*args, **kwargs)
        self.interrupts = interrupts

    def evaluate(self) -> dict | None:
        with self.interrupts.let_through():
            return super().evaluate()


class TrainerSteps:
    """The optimizer-step half of ``Trainer``: forward, backward and the step, eager or replayed from a CUDA graph,
    and SAM's second gradient. It uses the trainer's model, optimizer, config, state and schedule."""

    def graphed_step(self, host: Batch, b: int) -> torch.Tensor | None:
        """Optimizer step ``b`` replayed from the CUDA graph (``train_graph``): its loss, or None where the step is
        to be taken eagerly (no graph, a batch that does not fit it, the first steps, a failed capture)."""
        if self.graphed is None or self.graphed.warming or not self.graphed.fits(host):
            return None
        seed_step(self.cfg, self.state["step"], b)
        with torch.profiler.record_function("genolin.graphed_step"):
            loss = self.graphed(host.to(self.device), self.schedule.next_lr())
        if loss is not None:
            self.after_step()
        return loss

    def micro_step(self, batch, epoch: int, b: int, *, sync: bool) -> torch.Tensor:
        """Forward, loss and backward of batch ``b`` (a host Batch, or its items); DDP all-reduces only when
        ``sync`` (the last of a group) -> the loss, on the device. Running out of memory all the same
        (``check_memory`` estimates, not exactly) is an InputError."""
        if not isinstance(batch, Batch):
            batch = self.make_batch(batch, epoch, b)
        try:
            return self._micro_step(batch, b, sync=sync)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not memory.is_out_of_memory(exc):
                raise
            tokens, what = self.task.largest_batch()
            raise InputError(None, f"out of memory training on a batch of {len(batch.ids)} item(s) ({what}); "
                                   f"{memory_fix(self.cfg, self.task, tokens)}") from None

    def _micro_step(self, batch: Batch, b: int, *, sync: bool) -> torch.Tensor:
        cfg = self.cfg
        seed_step(self.cfg, self.state["step"], b)
        no_sync = self.net.no_sync() if self.dist.world > 1 and not sync else contextlib.nullcontext()
        with no_sync:
            with torch.profiler.record_function("genolin.forward"):
                loss = self.forward_loss(batch.to(self.device))
            with torch.profiler.record_function("genolin.backward"):
                (loss / cfg.grad_accum).backward()
        return loss.detach()

    def forward_loss(self, batch: Batch) -> torch.Tensor:
        """``training_loss`` of a batch on the device, through this run's model."""
        return training_loss(self.net, self.model, self.task, self.cfg, batch, self.device)

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
        with torch.profiler.record_function("genolin.optimizer"):
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
            for group in self.optimizer.param_groups:
                if torch.is_tensor(group["lr"]):  # a graphed step's (train_graph): filled, its kernels read it
                    group["lr"].fill_(lr)
                else:
                    group["lr"] = lr
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        self.after_step()

    def after_step(self) -> None:
        """What follows every optimizer step: the weight average, the step count, FAVOR+'s redraw."""
        self.average.update(self.state["step"])
        self.state["step"] += 1
        self.model.redraw_favor_features(self.state["step"])


class Trainer(TrainerSteps):
    """One training run: the model, its optimizer and the loop (``fit``). Its parts: ``schedule`` (learning rate,
    stop rules), ``average`` (the weight average), ``selection`` (validation, best weights, early stopping) and
    ``run`` (the run folder), all sharing ``state``, the trainer state that checkpoints keep."""

    def __init__(self, cfg: TrainConfig, spec: DataSpec, out_dir: str | os.PathLike, *, device: str = "auto",
                 resume: bool = False, progress: bool | None = None):
        self.spec, self.out = spec, Path(out_dir)
        self.dist = init_distributed(device)
        self.device = pick_device(device, self.dist.local_rank)
        self.progress = progress if self.dist.main else False
        if not resume and self.dist.main:
            ckpt.check_new_run(self.out)  # before the data and a teacher's pass (minutes on a genome) are read
        self.task = get_task(spec.task, cfg)
        self.task.load_training(spec)
        if spec.teacher:
            self.task.distil_from(teacher_tracks(spec.teacher, self.task, self.device, self.progress))
        self.cfg = dataclasses.replace(cfg, model=cfg.encoder_config(self.task.head(), self.task.longest_tokens()))
        self.task.cfg = self.cfg
        torch.manual_seed(self.cfg.seed)
        self.model = Encoder(self.cfg.model)
        # fine-tuning starts from its weights, not from what the task would fit (a classifier's k-mer regression)
        self.fitted_at_start = not resume and not self.cfg.init_weights and self.task.init_model(self.model)
        if not resume and self.cfg.init_weights:  # fine-tuning: validated before the first step, kept unless beaten
            ckpt.load_weights(self.cfg.init_weights, self.model)
            self.fitted_at_start = True
        self.model = self.model.to(self.device)
        self._budget_before = compile_blocks(self.model, self.cfg, self.device)  # restored by close()
        self.optimizer = make_optimizer(self.model, self.cfg, self.device)
        self.average = WeightAverage(self.optimizer, self.cfg.ema_decay)
        self.net = self.model
        if self.dist.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            self.net = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        self.predictor = Predictor(self.model, self.task, self.device, batch_size=self.cfg.batch_size,
                                   max_tokens=self.cfg.max_tokens, amp=self.cfg.amp)
        check_memory(self.cfg, self.task, self.model, self.device)
        # start_margin: how far training must beat the starting model's validation score (``selection``)
        self.state = {"epoch": 0, "batch": 0, "step": 0, "best": None, "best_epoch": None, "bad_epochs": 0,
                      "done": False, "progress": 0.0, "start_margin": 0.0}
        self.run = ckpt.RunDir(self.out, writes=self.dist.main)  # its lock: released by close() or at exit
        try:
            if resume:
                self.state.update(self.run.resume(self.model, self.optimizer))
                log.info("resuming %s at epoch %d, step %d", self.out, self.state["epoch"] + 1, self.state["step"])
            else:
                self.run.start(ckpt.RunConfig(spec.task, self.cfg, spec, self.task.state()))
        except BaseException:
            self.close()
            raise
        self.schedule = Schedule(self.cfg, self.state)
        self.epochs = self.cfg.epochs  # the schedule's, once ``fit`` starts it
        self.interrupts = Interrupts()
        self.saved_step = self.state["step"]  # the step of the last checkpoint (or the start): what Ctrl-C adds to
        self.selection = InterruptibleSelection(self.cfg, self.task, self.model, self.predictor, self.average,
                                                self.run, self.state, self.checkpoint, interrupts=self.interrupts)
        self.graphed = (GraphedStep(self.model, self.optimizer, self.forward_loss, self.device, self.cfg.clip)
                        if GraphedStep.wanted(self.cfg, self.task, self.model, self.device, self.dist.world) else None)

    # -- the loop ------------------------------------------------------------------------------------------------
    def fit(self) -> dict:
        """Train until the schedule ends, a stop rule fires or early stopping -> a summary of the run."""
        st = self.state
        epochs = self.epochs = self.schedule.start(len(self.epoch_batches(0)))
        if st["step"] > 0 and (st["done"] or st["step"] >= self.schedule.total or st["epoch"] >= epochs):
            log.info("the run is finished (step %d of %d, epoch %d of %d): nothing to train; a larger --max-steps "
                     "or --epochs continues it", st["step"], self.schedule.total, st["epoch"], epochs)
            return {"epochs": st["epoch"], "steps": st["step"], "best_score": st["best"],
                    "best_epoch": st["best_epoch"], "stopped": "finished", "seconds": 0.0}
        held = self.interrupts.held  # each validation inside lets a Ctrl-C through (InterruptibleSelection)
        with self.interrupts.installed():
            try:
                with shape_free_kernels(self.device, enabled=self.task.varied_shapes()):
                    if self.fitted_at_start and st["step"] == 0 and st["best"] is None:
                        with held():
                            self.selection.validate_start()
                    self.model.train()
                    stopped = None
                    while st["epoch"] < epochs and not st["done"] and not self.schedule.done():
                        record, stopped = self.train_epoch()
                        if record is None:  # a stop rule fired inside the epoch
                            with held():
                                self.selection.end_stopped(stopped)
                            break
                        with held():
                            self.selection.end_epoch(record)
                        if stopped:
                            break
                    self.selection.threshold_as_predicted()
            except KeyboardInterrupt:
                with held():  # not cut short by a second Ctrl-C (torchrun passes the first on to its processes)
                    self.save_interrupted()
                raise
        self.dist.barrier(self.device)
        return {"epochs": st["epoch"] + (st["batch"] > 0), "steps": st["step"], "best_score": st["best"],
                "best_epoch": st["best_epoch"], "stopped": stopped, "seconds": time.monotonic() - self.schedule.t_start}

    def train_epoch(self) -> tuple[dict | None, str | None]:
        """Optimizer steps over the rest of the current epoch -> (its record, or None when a stop rule ended it
        early; the stop rule that fired, if any). Batches are made ahead on a thread; losses stay on the device
        until the progress bar or the epoch's record reads them (no host sync a step)."""
        from genolin.progress import progress_bar

        cfg, st = self.cfg, self.state
        epoch = st["epoch"]
        batches = self.epoch_batches(epoch)
        losses, tokens, items, t_epoch, stopped = [], 0, 0, time.monotonic(), None
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        if self.task.collate_reads_progress():  # made at its step, with the schedule's progress then
            made = (self.make_batch(batches[b], epoch, b) for b in range(st["batch"], len(batches)))
        else:
            made = made_ahead(lambda b: self.make_batch(batches[b], epoch, b), st["batch"], len(batches))
        with progress_bar(total=len(batches), unit="batch", desc=f"epoch {epoch + 1}/{self.epochs}",
                          enabled=self.progress) as bar, contextlib.closing(made):
            bar.update(st["batch"])
            for b, batch in zip(range(st["batch"], len(batches)), made, strict=True):
                boundary = (b + 1) % cfg.grad_accum == 0 or b + 1 == len(batches)
                # an optimizer step and the state that counts it are taken together: a Ctrl-C waits for both
                # (``Interrupts``); one before them drops the gradients gathered, the weights untouched
                loss = None
                if boundary and cfg.grad_accum == 1 and self.graphed is not None:
                    with self.interrupts.held():  # the graph's replay is forward, backward and step in one
                        loss = self.graphed_step(batch, b)
                        if loss is not None:
                            st["batch"] = b + 1
                if loss is None:
                    with self.graphed.eager() if self.graphed is not None else contextlib.nullcontext():
                        loss = self.micro_step(batch, epoch, b, sync=boundary)
                        if boundary:
                            if cfg.sam_rho > 0:
                                self.sharpness_aware_gradient(batches[st["batch"]:b + 1], epoch, st["batch"])
                            with self.interrupts.held():
                                self.optimizer_step(self.schedule.next_lr())
                                st["batch"] = b + 1
                losses.append(loss)
                tokens += batch.n_tokens
                items += len(batches[b])
                bar.update(1)
                if not boundary:
                    continue
                if not getattr(bar, "disable", True) and (st["step"] % LOSS_EVERY == 0 or b + 1 == len(batches)):
                    seconds = time.monotonic() - t_epoch
                    bar.set_postfix(loss=f"{torch.stack(losses[-20:]).mean().item():.4f}",
                                    tok_s=f"{tokens * self.dist.world / seconds:.0f}")
                stopped = self.schedule.stop_reason()
                if stopped or self.schedule.done():
                    break
        if st["batch"] < len(batches) and not self.schedule.done():
            return None, stopped
        seconds = time.monotonic() - t_epoch
        # the mean over ranks: the memorisation check (genolin.selection) stops every rank alike
        loss = self.dist.mean(torch.stack(losses).tolist() if losses else [], self.device)
        return epoch_record(epoch + 1, st["step"], loss, self.schedule.last_lr(), seconds, tokens, items,
                            self.dist.world, self.device), stopped

    def make_batch(self, items, epoch: int, b: int) -> Batch:
        """Batch ``b`` of the epoch on the host: its items collated and augmented from (seed, epoch, b), counted
        (``Batch.counted``), in pinned memory on CUDA."""
        with torch.profiler.record_function("genolin.make_batch"):
            batch = self.task.collate(items, np.random.default_rng([self.cfg.seed, epoch, b]),
                                      progress=self.schedule.progress()).counted()
            return batch.pinned() if self.device.type == "cuda" else batch

    # -- what the loop uses --------------------------------------------------------------------------------------
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

    def averaged_weights(self):
        """The model holds the averaged weights inside (the trained ones again after); a no-op without averages."""
        return self.average.held(self.state["step"])

    def checkpoint(self, *, best: bool = False, metrics: dict | None = None,
                   best_weights: dict[str, torch.Tensor] | None = None) -> None:
        """A crash-safe checkpoint (``RunDir.checkpoint``); with ``best`` also best.safetensors of ``best_weights``
        where given, else of the averaged weights (``ema_decay``) or the model's, with the decision threshold
        chosen on ``metrics``."""
        with self.interrupts.held():  # a Ctrl-C meanwhile waits for it
            if best and best_weights is None and self.cfg.ema_decay and self.run.writes:
                with self.averaged_weights():
                    best_weights = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
            self.run.checkpoint(self.model, self.optimizer, self.state, best=best, metrics=metrics,
                                best_weights=best_weights)
            self.saved_step = self.state["step"]

    def save_interrupted(self) -> None:
        """After a Ctrl-C: a checkpoint of the optimizer steps taken since the last one (none before the first
        step), at the batch of the epoch reached, from which --resume continues as the run would have; and a
        "stopped" line in metrics.jsonl. Only the process that writes the run directory (rank 0) writes."""
        st = self.state
        if st["step"] == self.saved_step:
            return
        self.checkpoint()
        self.run.log_metrics({"epoch": st["epoch"] + 1, "step": st["step"], "stopped": "interrupted (Ctrl-C)",
                              "val": None})

    def close(self) -> None:
        """Release the run directory's lock, the activation memory budget and the process group."""
        self.run.close()
        if self._budget_before is not None:
            Encoder.set_activation_memory_budget(self._budget_before)
            self._budget_before = None
        self.dist.close()


def seed_step(cfg: TrainConfig, step: int, b: int) -> None:
    """torch's generators seeded from (seed, optimizer step, micro-batch b's place in its accumulation): dropout
    the same whether a step is replayed, resumed or taken eagerly."""
    torch.manual_seed(cfg.seed * 1_000_003 + step * 131 + b % cfg.grad_accum)


def compile_blocks(model: Encoder, cfg: TrainConfig, device: torch.device) -> float | None:
    """The blocks compiled (``compile``, CUDA only) -> the activation memory budget before, where this set it."""
    if cfg.compile and device.type == "cuda":
        before = None
        if cfg.compile_memory_budget is not None:
            before = Encoder.set_activation_memory_budget(cfg.compile_memory_budget)
        model.compile_blocks(**({} if cfg.compile_mode == "default" else {"mode": cfg.compile_mode}))
        return before
    if cfg.compile:  # on a CPU the compiler's start-up (tens of seconds) outweighs what it saves
        log.warning("compile: CUDA only; the blocks run uncompiled on %s", device)
    return None


def training_loss(net: torch.nn.Module, model: Encoder, task: Task, cfg: TrainConfig, batch: Batch,
                  device: torch.device) -> torch.Tensor:
    """The training loss of ``batch`` (on the device) through ``net`` (``model`` or its DDP wrapper): forward under
    bf16 autocast on CUDA (its weight cache off, as a graph capture wants), the task's loss, the masked-token
    term."""
    ids, chosen, extra = batch.ids, None, {}
    if cfg.mlm_weight > 0:
        ids, chosen = mask_tokens(batch.ids, batch.mask, cfg.mlm_prob, k=cfg.k, stride=cfg.stride)
        if model.kmer_linear is not None:  # the k-mer term counts the sequence as it is
            extra["profile"] = kmer_profile(batch.ids, model.cfg.kmer_logits)
    amp = cfg.amp and device.type == "cuda"
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp, cache_enabled=False):
        # padding known from the host's count: the encoder need not look (a host sync, not allowed in a capture)
        out = net(ids, batch.mask, **extra, padding=None if batch.n_tokens is None else not batch.full)
    loss = task.loss(out, batch)
    if chosen is not None:
        loss = loss + cfg.mlm_weight * masked_token_loss(out.hidden, model.embed.weight, batch.ids, chosen)
    del out  # hidden (B, N, d) float32 is not saved for backward: freed before it (~98 MiB per 100 k tokens)
    return loss


def epoch_record(epoch: int, step: int, loss: float, lr: float, seconds: float, tokens: int, items: int,
                 world: int, device: torch.device) -> dict:
    """The epoch's line of metrics.jsonl (before validation adds to it)."""
    return {"epoch": epoch, "step": step, "train_loss": loss, "lr": lr, "seconds": seconds,
            "tokens_per_s": tokens * world / max(seconds, 1e-9), "items_per_s": items * world / max(seconds, 1e-9),
            "peak_memory_gib": memory.peak_bytes(device) / memory.GIB}


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


# fine-tuning (--init) unless set: a short schedule at a fifth of the starting run's learning rate, validated often
FINE_TUNE = {"steps": 1000, "val_every_steps": 250, "warmup_steps": 50}
FINE_TUNE_LR = 0.2
# what a fine-tuned run keeps of its starting run: the tokens and the encoder its weights belong to, but for the
# encoder settings that change no weight (regularisation, recomputation, chunking)
INIT_KEPT = ("k", "stride")
INIT_FREE = {"model.dropout", "model.drop_path", "model.checkpointing", "model.checkpoint_mlp", "model.chunk_tokens"}


def configure_init(init: str, settings: list[Setting], spec: DataSpec, device_type: str | None = None
                   ) -> TrainConfig:
    """A fine-tuning run's settings: those of the run ``init`` names (a run directory or a bundled model,
    ``genolin.models.resolve_model``), then FINE_TUNE's schedule and learning rate, then ``settings``; its tokens
    and encoder stay the starting run's (a setting that changes them is an InputError naming it)."""
    from genolin.config import canonical_name, coerce, flatten
    from genolin.models import resolve_model

    run_dir = resolve_model(init, device_type)
    saved = ckpt.read_run_config(run_dir)
    if saved.task != spec.task:
        raise InputError("--init", f"{init} is a {saved.task} model; this data trains a {spec.task} model")
    start = flatten(saved.train.to_dict(), str(run_dir))
    derived = {f"model.{k}" for k in ("vocab_size", "n_classes", "track_channels", "seed", "pad_id")}
    start = {k: v for k, v in start.items() if k not in derived | {"init_weights", "max_steps"}}
    given = set()
    for item in settings:
        key = canonical_name(item.key, item.source if item.line is None else f"{item.source}:{item.line}")
        given.add(key)
        kept = key in INIT_KEPT or (key.startswith("model.") and key not in INIT_FREE)
        if kept and key in start and coerce(item, key) != start[key]:
            raise item.error(f"{key} is {start[key]} in {init}, whose weights this run starts from (--init keeps "
                             "the starting model's tokens and encoder)")
    tune = {**FINE_TUNE, "lr": saved.train.lr * FINE_TUNE_LR}
    if given & {"epochs", "windows_per_epoch"}:  # a schedule in epochs asked for: no step budget, ours or the start's
        tune = {k: v for k, v in tune.items() if k not in ("steps", "val_every_steps")}
        start = {k: v for k, v in start.items() if k not in ("steps", "val_every_steps")}
    source = f"--init {init}"
    cfg = make_config(spec.task, "tiny", [Setting(k, v, source) for k, v in start.items()]
                      + [Setting(k, v, "fine-tuning") for k, v in tune.items()] + list(settings))
    cfg.init_weights = str(ckpt.weights_for_inference(run_dir))
    return cfg


def describe_model(cfg: TrainConfig) -> str:
    """The recipe in one line: tokens, encoder, head."""
    m = cfg.model
    blocks = f"{describe_tokens(cfg)}; {m.n_layers} x {m.d_model} {m.mixer} blocks"
    if not m.n_classes:
        return f"{blocks}; per-token track head"
    terms = [f"{m.pool_position_bins} position bins"] * bool(m.pool_position_bins) + \
        [f"a distance slope{f' from weights (1 + d)^-{m.pool_distance_power:g}' if m.pool_distance_power else ''}"] * \
        m.pool_distance_slope
    head = f"{m.pooling} pooling" + (" with " + " and ".join(terms) if terms else "")
    if m.kmer_logits:
        kmer = f"bag-of-k-mers term k = 1..{m.kmer_logits}"
    else:
        kmer = "no bag-of-k-mers term" + (" (it needs single-base tokens, k = 1)" if cfg.k > 1 else "")
    crops = f"; training crops from {cfg.crop_min_bp:,} bp around the centre" if cfg.crop_min_bp else ""
    average = f"; weights averaged (ema_decay {cfg.ema_decay:g})" if cfg.ema_decay else ""
    return f"{blocks}{', recomputed in backward' if m.checkpointing else ''}; {head}; {kmer}{crops}{average}"


def describe_training(cfg: TrainConfig) -> str:
    """The schedule and what is drawn at random into the training inputs, in one line."""
    plan = f"{cfg.steps:,} steps" if cfg.steps else f"{cfg.epochs} epochs"
    limit = f", {cfg.max_minutes:g} min at most" if cfg.max_minutes else ""
    drawn = [f"reverse complements (rc_prob {cfg.rc_prob:g})"] * bool(cfg.rc_prob) + \
        [f"bases redrawn at random (mutate_prob {cfg.mutate_prob:g})"] * bool(cfg.mutate_prob) + \
        [f"a masked-token term (mlm_weight {cfg.mlm_weight:g})"] * bool(cfg.mlm_weight) + \
        [f"training genomes drawn by genome_weights {cfg.genome_weights}"] * (cfg.genome_weights != "length")
    return (f"batches of {cfg.batch_size}, {plan}{limit}, lr {cfg.lr:g}; "
            + (", ".join(drawn) if drawn else "no reverse complements or mutations"))


def train(cfg: TrainConfig, spec: DataSpec, out_dir: str | os.PathLike, *, device: str = "auto",
          resume: bool = False, progress: bool | None = None) -> dict:
    """Train (or continue) a run; returns a summary. The run directory is described in genolin.checkpoint. A new
    run that fails after taking its folder and before its first checkpoint removes what it wrote there."""
    out = Path(out_dir)
    created = not out.exists()
    before = {name for name in ckpt.RUN_FILES if (out / name).exists()}
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
            ckpt.remove_unfinished_run(out, before, created)
        raise


def _train(trainer: Trainer, spec: DataSpec) -> dict:
    handler = None
    if trainer.dist.main:
        handler = logging.FileHandler(trainer.out / ckpt.LOG)
        handler.setLevel(logging.INFO)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logging.getLogger("genolin").addHandler(handler)
    try:
        log.info("genolin %s: %s task, %s parameters, device %s, %d process(es)", __version__, spec.task,
                 f"{trainer.model.n_parameters():,}", trainer.device, trainer.dist.world)
        log.info("model: %s", describe_model(trainer.cfg))
        log.info("training: %s", describe_training(trainer.cfg))
        if trainer.cfg.init_weights and trainer.state["step"] == 0:
            log.info("fine-tuning: starting from the weights of %s", trainer.cfg.init_weights)
        summary = trainer.fit()
    finally:
        if handler is not None:
            logging.getLogger("genolin").removeHandler(handler)
            handler.close()
        trainer.close()
    return summary
