"""Augmentation of track training windows, and their batches.

Per window, drawn from the batch's rng in order: reverse complement with probability ``rc_prob`` (the window's
bases reverse-complemented, its targets mirrored and strands swapped: ``track_labels.window_targets``), then each
base substituted with probability ``mutate_prob`` (``genolin.tokenize.substitute``; targets unchanged). Batch: ids
(B, T), mask (B, T), targets (B, T, 2) float32, T the longest window's bins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from genolin.tasks.base import Batch, pad_tokens
from genolin.tokenize import substitute

if TYPE_CHECKING:
    from genolin.tasks.track_data import TrackData, Window


def augmented_window(data: TrackData, w: Window, rng: np.random.Generator | None, *, rc_prob: float = 0.0,
                     mutate_prob: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(tokens (bins,), targets (bins, 2)) of ``w``, reverse-complemented and substituted as drawn from ``rng``
    (None: as it is)."""
    rc = rng is not None and rc_prob > 0 and rng.random() < rc_prob
    bases = None
    if rng is not None and mutate_prob > 0:
        bases = substitute(data.bases(w), rng, mutate_prob)
    return data.tokens(w, rc=rc, bases=bases), data.targets(w, rc=rc)


def collate_windows(data: TrackData, windows: list[Window], rng: np.random.Generator | None = None, *,
                    rc_prob: float = 0.0, mutate_prob: float = 0.0) -> Batch:
    """The batch of ``windows``, each augmented (``augmented_window``) in order."""
    arrays, targets = [], []
    for w in windows:
        tokens, target = augmented_window(data, w, rng, rc_prob=rc_prob, mutate_prob=mutate_prob)
        arrays.append(tokens)
        targets.append(target)
    ids, mask = pad_tokens(arrays)
    t = np.zeros((len(windows), ids.shape[1], 2), dtype=np.float32)
    for i, tg in enumerate(targets):
        t[i, : len(tg)] = tg
    return Batch(ids, mask, targets=torch.from_numpy(t))
