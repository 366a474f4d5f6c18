"""The training schedule: its length in optimizer steps, the learning rate of each step and the stop rules.

Linear warm-up to ``lr`` over ``warmup_steps`` optimizer steps, then cosine decay to ``lr * min_lr_ratio`` at the
last step (epochs x steps per epoch, or ``steps``; ``max_steps`` ends it earlier). Under a time budget
(``max_minutes``) the cosine follows the clock instead once the steps would not end in time.
"""

from __future__ import annotations

import logging
import math
import time

from genolin.config import TrainConfig

log = logging.getLogger(__name__)


def cosine_progress(step: int, total: int, cfg: TrainConfig) -> float:
    """The cosine's progress by steps, 0 to 1: the fraction of the post-warm-up steps done of ``total``."""
    return min(1.0, max(0.0, (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)))


def lr_at(step: int, total: int, cfg: TrainConfig, min_progress: float = 0.0) -> float:
    """Linear warm-up to cfg.lr, then cosine decay to cfg.lr * min_lr_ratio when progress reaches 1: progress is
    ``cosine_progress``, or ``min_progress`` (of a time budget) if larger."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = max(cosine_progress(step, total, cfg), min(1.0, min_progress))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


class Schedule:
    """The schedule of a run that starts (or resumes) at ``state``: the trainer state whose "step" the loop counts
    and whose "progress" (the clock's share of the schedule, kept for --resume) this updates."""

    def __init__(self, cfg: TrainConfig, state: dict):
        self.cfg, self.state = cfg, state
        self.total = 1  # the schedule's length in optimizer steps, set by start
        self.t_start: float | None = None  # time.monotonic() when the loop starts, set by start
        self.step_at_start, self.by_clock = state["step"], False
        self.after_first: tuple[float, int] | None = None  # (time, step) when the run's first step had ended
        self.t_cosine: float | None = None  # time.monotonic() when the clock took over the cosine (after the warm-up)
        self.progress_at_cosine = 0.0  # the cosine's progress then: where the clock's share starts

    def start(self, batches_per_epoch: int) -> int:
        """Sets the schedule's length and starts its clock -> the epochs to run: ``steps`` if set, else epochs x
        steps per epoch (``batches_per_epoch`` micro-batches each, in groups of ``grad_accum``)."""
        cfg = self.cfg
        per_epoch = max(1, -(-batches_per_epoch // cfg.grad_accum))
        total = cfg.steps if cfg.steps is not None else cfg.epochs * per_epoch
        epochs = -(-cfg.steps // per_epoch) if cfg.steps is not None else cfg.epochs
        self.total = min(total, cfg.max_steps) if cfg.max_steps is not None else total
        self.t_start = time.monotonic()
        return epochs

    def progress(self) -> float:
        """How far the schedule is, 0 to 1: by steps, or by the clock under a time budget when that is further."""
        return min(1.0, max(self.state["step"] / max(1, self.total), self.state["progress"]))

    def next_lr(self) -> float:
        """The learning rate of the next optimizer step (the clock's progress brought up to date first)."""
        st = self.state
        clock = self.clock_progress()
        if clock > self.steps_progress():  # kept only when the clock leads: "progress" > 0 says it shortened the cosine
            st["progress"] = max(st["progress"], clock)
        return lr_at(st["step"], self.total, self.cfg, st["progress"])

    def steps_progress(self) -> float:
        """The cosine's progress by steps alone (0 during the warm-up)."""
        return cosine_progress(self.state["step"], self.total, self.cfg)

    def last_lr(self) -> float:
        """The learning rate of the last optimizer step."""
        return lr_at(max(self.state["step"] - 1, 0), self.total, self.cfg, self.state["progress"])

    def clock_progress(self) -> float:
        """The schedule's progress by the clock under a time budget (max_minutes), 0 while the steps are on pace
        to finish in time (then the schedule is by steps alone, deterministic). The pace is that of the steps after
        the run's first, which carries most of start-up (a GPU's context, kernel compilation), judged from 20
        steps and a twentieth of the budget on. Once it says they would not, the clock takes over for the rest of
        the run: progress runs from where the steps' cosine stood when the clock took over (not before the
        warm-up's end) to 1 at the deadline, without a jump. A run whose steps then catch up keeps the steps'
        cosine (next_lr takes the larger)."""
        cfg = self.cfg
        if cfg.max_minutes is None:
            return 0.0
        now = time.monotonic()
        budget, elapsed = cfg.max_minutes * 60, now - self.t_start
        if not self.by_clock:
            step = self.state["step"]
            if self.after_first is None and step > self.step_at_start:
                self.after_first = (now, step)
            if self.after_first is None or step - self.step_at_start < 20 or elapsed < budget / 20:
                return 0.0
            t1, step1 = self.after_first  # the pace of the steps after the first, which carries most of start-up
            if step == step1 or elapsed + (now - t1) / (step - step1) * (self.total - step) <= budget:
                return 0.0
            self.by_clock = True
            log.info("at this pace the %d steps would not end within %s min: the schedule follows the clock "
                     "wherever it is ahead of the steps", self.total, cfg.max_minutes)
        if self.state["step"] < cfg.warmup_steps:
            return 0.0
        if self.t_cosine is None:
            self.t_cosine = now
            self.progress_at_cosine = max(self.state["progress"], self.steps_progress())
        p0, left = self.progress_at_cosine, budget - (self.t_cosine - self.t_start)
        return p0 + (1 - p0) * (now - self.t_cosine) / max(left, 1e-9)

    def stop_reason(self) -> str | None:
        """The stop rule that ends the run here (max_steps, max_minutes), if any."""
        cfg = self.cfg
        if cfg.max_steps is not None and self.state["step"] >= cfg.max_steps:
            return f"max_steps {cfg.max_steps}"
        if cfg.max_minutes is not None and time.monotonic() - self.t_start > cfg.max_minutes * 60:
            return f"max_minutes {cfg.max_minutes}"
        return None

    def done(self) -> bool:
        """Whether the schedule's ``steps`` are all done."""
        return self.cfg.steps is not None and self.state["step"] >= self.cfg.steps
