"""Weight averaging (``ema_decay`` > 0) and swapping values into parameters for a while.

After each optimizer step every parameter's average moves towards it, avg <- avg + (1 - d_t) (w - avg),
d_t = min(ema_decay, (1 + t) / (10 + t)) at step t. The averages live in the optimizer's per-parameter state (key
"ema", beside AdamW's moments), so checkpoints and --resume carry them; validation and best.safetensors use the
averaged weights (the model's buffers, e.g. FAVOR+ projections, as they are), model.safetensors the trained ones
that --resume continues.
"""

from __future__ import annotations

import contextlib

import torch


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


class WeightAverage:
    """The averages of an optimizer's parameters (see the module docstring); with ``decay`` 0 it does nothing."""

    def __init__(self, optimizer: torch.optim.Optimizer, decay: float):
        self.optimizer, self.decay = optimizer, decay

    def _params_and_averages(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        params = [p for group in self.optimizer.param_groups for p in group["params"]
                  if "ema" in self.optimizer.state[p]]
        return params, [self.optimizer.state[p]["ema"] for p in params]

    def update(self, step: int) -> None:
        """The averages after optimizer step ``step``."""
        if not self.decay:
            return
        for group in self.optimizer.param_groups:
            for p in group["params"]:  # a parameter's average starts at its weights after its first update
                state = self.optimizer.state[p]  # (empty until then: AdamW initialises a parameter's empty state)
                if state and "ema" not in state:
                    state["ema"] = p.detach().clone()
        params, averages = self._params_and_averages()
        decay = min(self.decay, (1 + step) / (10 + step))
        with torch.no_grad():
            torch._foreach_lerp_(averages, [p.detach() for p in params], 1 - decay)

    @contextlib.contextmanager
    def held(self, steps_done: int):
        """The parameters hold their averages inside (the trained weights again after); a no-op without averages,
        as before the first step (``steps_done`` 0)."""
        if not self.decay or steps_done == 0:
            yield
            return
        with holding(*self._params_and_averages()):
            yield
