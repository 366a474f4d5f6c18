"""Training steps replayed from a CUDA graph: forward, loss, backward, gradient clipping and the fused AdamW step of
one batch, captured once and replayed for every batch of the same shape.

A track model's step is small (8 windows x 2,048 tokens for the base preset): launched op by op from Python, the
host takes longer to launch its kernels than the GPU to run them. One replay launches them all. Applies on CUDA to
tasks whose batches share one shape (``Task.fixed_shapes``), one process, one micro-batch a step, no SAM, no masked
tokens, no compiled blocks and no random features to redraw; GENOLIN_CUDA_GRAPHS=0 or ``cuda_graphs: false`` turns it
off. A capture that fails is logged and training goes on eagerly.

    GraphedStep.wanted(cfg, task, model, device, world) -> whether to try
    step = GraphedStep(model, optimizer, loss_fn, device)
    step.fits(batch)      -> whether ``batch`` (on the device, ``Batch.counted``) can replay the graph
    step(batch, lr)       -> the loss (a 0-d device tensor); the weights, gradients and optimizer state updated

The step is the eager one's ops in the same order, so a replay computes what the eager step computes (without
dropout: tests/test_gpu.py; dropout's random numbers come from the generator seeded before each step, whose seed
and offset a graph reads at each replay). The first
``EAGER_STEPS`` steps of a process run eagerly on a side stream (the optimizer's state, Triton's kernels and the
libraries' handles made outside the capture); the capture happens at the first step after them and is replayed at
once for that step.
"""

from __future__ import annotations

import dataclasses
import logging

import torch

from genolin.inference.graphs import graphs_allowed
from genolin.tasks.base import TENSORS

log = logging.getLogger(__name__)

EAGER_STEPS = 3  # steps run eagerly before the capture


class GraphedStep:
    """One optimizer step as a CUDA graph. ``loss_fn(batch) -> loss`` runs the forward and the loss (autocast
    inside, without its weight cache: a capture must not keep casts made outside it); the step's backward, clipping
    at ``clip`` and ``optimizer.step()`` (fused AdamW, its learning rate a device tensor this fills) follow."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_fn, device: torch.device,
                 clip: float):
        self.model, self.optimizer, self.loss_fn, self.device, self.clip = model, optimizer, loss_fn, device, clip
        self.eager_left = EAGER_STEPS
        self.side = torch.cuda.Stream(device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.failed = False
        self.static = None  # the captured batch: its tensors are the graph's inputs
        self.loss: torch.Tensor | None = None  # the graph's loss output, overwritten by each replay
        self.lr: torch.Tensor | None = None

    @staticmethod
    def wanted(cfg, task, model, device: torch.device, world: int) -> bool:
        """Whether training steps should be graphed (see the module docstring for when)."""
        return (device.type == "cuda" and cfg.cuda_graphs and graphs_allowed() and task.fixed_shapes and world == 1
                and cfg.grad_accum == 1 and not cfg.sam_rho and not cfg.mlm_weight and not cfg.compile
                and not (model.mixer_kind.redraws and model.cfg.favor_redraw_interval > 0))

    def fits(self, batch) -> bool:
        """Whether ``batch`` can take this step: full (no padding; the loss reads every position) and, once
        captured, of the captured shapes."""
        if self.failed or not batch.full:
            return False
        if self.static is None:
            return True
        return all((a is None) == (b is None) and (a is None or (a.shape == b.shape and a.dtype == b.dtype))
                   for a, b in zip(tensors(batch), tensors(self.static), strict=True))

    def __call__(self, batch, lr: float) -> torch.Tensor | None:
        """The step on ``batch`` (``fits``) at learning rate ``lr``: its loss, or None where the caller must take an
        eager step (the first steps, or a capture that failed just now)."""
        if self.warming:
            return None
        if self.graph is None:
            self.capture(batch)
            if self.graph is None:
                return None
        for buffer, t in zip(tensors(self.static), tensors(batch), strict=True):
            if buffer is not None:
                buffer.copy_(t, non_blocking=True)
        self.lr.fill_(lr)
        self.graph.replay()
        return self.loss.detach().clone()  # the next replay overwrites the graph's own

    def fail(self, exc: BaseException) -> None:
        """After a failed capture: the gradients dropped, the random generator's capture state reset (a capture that
        ends in an error leaves it marked as capturing, and the next eager dropout would stop on it), steps eager."""
        torch.cuda.synchronize(self.device)
        self.optimizer.zero_grad(set_to_none=True)
        for group in self.optimizer.param_groups:  # back as the eager optimizer had them
            group["capturable"] = False
            if torch.is_tensor(group["lr"]):
                group["lr"] = float(group["lr"])
        generator = torch.cuda.default_generators[self.device.index or 0]
        if hasattr(generator, "graphsafe_set_state"):
            generator.graphsafe_set_state(generator.clone_state())
        self.failed, self.static = True, None
        log.warning("training steps stay eager: a CUDA graph of the step could not be captured (%s: %s)",
                    type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")

    @property
    def warming(self) -> bool:
        """Whether steps are still to run eagerly before the capture."""
        return self.eager_left > 0

    def eager(self):
        """The context of an eager step: before the capture, on a side stream as the capture's warm-up wants
        (counts the step); after it (a batch that does not fit), from no gradient: the graph's gradient buffers
        hold the last replay's, which an eager backward would add to."""
        self.eager_left -= 1
        if self.graph is not None:
            self.optimizer.zero_grad(set_to_none=True)
        return EagerOnSide(self.side, self.device)

    def capture(self, batch) -> None:
        """Capture the step on a copy of ``batch``; on failure log why and leave training eager."""
        if not all(group.get("fused") for group in self.optimizer.param_groups):
            self.fail(RuntimeError("the optimizer is not fused AdamW"))
            return
        for group in self.optimizer.param_groups:  # read by the captured kernel at each replay
            if not torch.is_tensor(group["lr"]):
                group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=self.device)
            group["capturable"] = True  # fused AdamW keeps its step counts on the device: nothing to move
        self.lr = self.optimizer.param_groups[0]["lr"]
        for group in self.optimizer.param_groups[1:]:
            group["lr"] = self.lr
        self.static = dataclasses.replace(batch, **{f: getattr(batch, f).clone() for f in TENSORS
                                                    if getattr(batch, f) is not None})
        torch.cuda.synchronize(self.device)
        self.optimizer.zero_grad(set_to_none=True)  # gradients allocated inside the graph: its replays write them
        graph, first = torch.cuda.CUDAGraph(), []
        try:
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                try:
                    loss = self.loss_fn(self.static)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
                    self.optimizer.step()
                except Exception as exc:  # the cause: ending the capture then fails with a CUDA error of its own
                    first.append(exc)
                    raise
        except Exception as exc:  # noqa: BLE001 (whatever stops a capture leaves training eager, said once)
            self.fail((first or [exc])[0])
            return
        self.graph, self.loss = graph, loss
        log.debug("training steps replay a CUDA graph: batch %s", [tuple(t.shape) for t in tensors(batch)
                                                                     if t is not None])


class EagerOnSide:
    """A context running its work on ``side`` after what the current stream queued, the current stream waiting
    for it at the end."""

    def __init__(self, side: torch.cuda.Stream, device: torch.device):
        self.side, self.device = side, device
        self.main = torch.cuda.current_stream(device)
        self.ctx = torch.cuda.stream(side)

    def __enter__(self):
        self.side.wait_stream(self.main)
        self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self.ctx.__exit__(*exc)
        self.main.wait_stream(self.side)
        return False


def tensors(batch) -> tuple:
    """A batch's tensor fields, in ``TENSORS`` order (None where absent)."""
    return tuple(getattr(batch, f) for f in TENSORS)


__all__ = ["EAGER_STEPS", "GraphedStep"]
