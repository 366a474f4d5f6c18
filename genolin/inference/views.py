"""What a probability averages: views of the input (the reverse complement; shifts: leading bases dropped) and
the members of an ensemble; and the check that the model's outputs are finite.

    views_of(rc_average, shift_views) -> [(rc, shift)]: the views a sequence is scored over
    mean_over_views(views), log_mean_over_views(views) -> the views' mean (of probabilities; of log probabilities)
    members_mean(members, probs_of) -> the mean over an ensemble's (model, task) members
    rc_averaged(probs, bins) -> genome windows averaged with their reverse complements, mirrored
    default_views(task, train), describe_views(rc_average, shift_views): the views predict and evaluate use
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from genolin.config import TrainConfig
from genolin.errors import InputError
from genolin.tasks import TASK_TYPES, Task


def views_of(rc_average: bool, shift_views: int) -> list[tuple[bool, int]]:
    """(rc, shift) of each view: the sequences as given, then with 1 .. ``shift_views`` leading bases dropped, each
    of them also reverse-complemented with ``rc_average`` (the shifts then drop the reverse complement's leading
    bases)."""
    return [(rc, shift) for rc in ((False, True) if rc_average else (False,)) for shift in range(shift_views + 1)]


def mean_over_views(views: list[np.ndarray]) -> np.ndarray:
    """The mean of the views' (n, C) probabilities."""
    return views[0] if len(views) == 1 else np.mean(views, axis=0)


def log_mean_over_views(views: list[np.ndarray]) -> np.ndarray:
    """The log of the mean of the views' probabilities, from their (n, C) logarithms."""
    return views[0] if len(views) == 1 else logmeanexp(np.stack(views))


def logmeanexp(x: np.ndarray) -> np.ndarray:
    """log(mean(exp(x), axis 0)) without overflow: (V, ...) -> (...)."""
    top = x.max(axis=0)
    return top + np.log(np.mean(np.exp(x - top), axis=0))


def members_mean(members: list[tuple], probs_of: Callable[..., torch.Tensor]) -> torch.Tensor:
    """The mean over an ensemble's (model, task) members of ``probs_of(model, task)`` (float32 probabilities on
    the device, summed in place); one member: its own."""
    if len(members) == 1:
        return probs_of(*members[0])
    total = None
    for model, task in members:
        probs = probs_of(model, task)
        total = probs if total is None else total.add_(probs)
    return total.div_(len(members))


def rc_averaged(probs: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """probs (>= 2n, T, 2): n windows, then their reverse complements (then padding rows, if any); bins (n,)
    int64: each window's real bins (padding after them) -> (n, T, 2): the mean of a window's bins and its reverse
    complement's bins mirrored (reversed, strands swapped). Bins past a window's real ones hold no meaning."""
    n, t = bins.shape[0], probs.shape[1]
    back = (bins[:, None] - 1 - torch.arange(t, device=probs.device)).clamp_min(0)  # (n, T): bin t of the RC
    mirrored = torch.gather(probs[n:2 * n], 1, back[..., None].expand(-1, -1, probs.shape[2])).flip(-1)
    return 0.5 * (probs[:n] + mirrored)


def finite(probs: np.ndarray) -> np.ndarray:
    """``probs``, or an InputError when the model gave NaN/inf (weights with huge values overflow to them)."""
    if not np.isfinite(probs).all():
        raise InputError(None, "the model's outputs are not finite (NaN or infinite): damaged or diverged weights")
    return probs


def default_views(task: str | Task | type[Task], train: TrainConfig) -> tuple[bool, int]:
    """(both strands averaged, shift views) that predict and evaluate use unless told otherwise, as the task
    (a task's name, or the task) chooses them for a run's settings (``Task.default_views``)."""
    return (TASK_TYPES[task] if isinstance(task, str) else task).default_views(train)


def describe_views(rc_average: bool, shift_views: int) -> str:
    """The views a probability averages, in words (reports, logs, best.safetensors' metadata)."""
    strands = "both strands" if rc_average else "the forward strand"
    if shift_views:
        return f"{strands} and shifts of 0..{shift_views} leading bases"
    return strands if rc_average else f"{strands} as given"
