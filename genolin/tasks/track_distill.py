"""Distillation of the track task: a teacher's per-bin probabilities as soft training targets.

    soft_tracks(pieces, data, stride) -> SoftTracks: a teacher's probabilities over the training regions
        (``genolin.inference.teacher`` runs the teacher: both strands, reverse complements averaged)
    SoftTracks.window(contig, start, bins, stride, rc) -> (bins, 2) float32: its probabilities in a student's bins
    mixed(labels, soft, weight) -> (1 - weight) labels + weight soft

A teacher's track has bins of its own stride s_t (an ensemble's: its finest member's); a student's bin of s bp
takes the highest teacher probability of the bases it covers, the maximum the 50-bp scores take too. The loss
stays the positive-weighted cross-entropy: against a soft target y its minimum lies where the prior-corrected
probability (``TrackTask.probabilities``) is y, so the student learns (1 - w) label + w teacher.
Validation, best weights and the decision threshold use the TSS labels alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SoftTracks:
    """Teacher probabilities per contig key: (ceil(L / stride), 2) float16 arrays (0 outside the regions the
    teacher read); ``circle``: lengths of the contigs read as circles (positions repeat every turn)."""

    stride: int
    tracks: dict[str, np.ndarray]
    lengths: dict[str, int]
    circle: set[str]

    def window(self, contig: str, start: int, bins: int, stride: int, rc: bool = False) -> np.ndarray:
        """(bins, 2) float32: per student bin [start + j stride, start + (j + 1) stride), the highest teacher
        probability of its bases (positions beyond a linear contig's ends: 0); mirrored and strands swapped when
        ``rc``, as ``track_labels.window_targets``."""
        track, length = self.tracks[contig], self.lengths[contig]
        pos = start + np.arange(bins * stride, dtype=np.int64)
        if contig in self.circle:
            pos %= length
            inside = None
        else:
            inside = (pos >= 0) & (pos < length)
            pos = np.clip(pos, 0, length - 1)
        values = track[pos // self.stride].astype(np.float32)  # (bins * stride, 2)
        if inside is not None:
            values[~inside] = 0.0
        out = values.reshape(bins, stride, 2).max(axis=1)
        return out[::-1, ::-1].copy() if rc else out


def mixed(labels: np.ndarray, soft: np.ndarray, weight: float) -> np.ndarray:
    """(bins, 2) targets: (1 - weight) labels + weight soft."""
    return ((1.0 - weight) * labels + weight * soft).astype(np.float32)


def soft_tracks(pieces, data, stride: int) -> SoftTracks:
    """``SoftTracks`` of a teacher's pieces (contig, first bin, probs (n, 2)) in bins of ``stride`` bp over ``data``'s
    contigs (a ``TrackData``; bins no piece covers stay 0)."""
    tracks = {c: np.zeros((-(-n // stride), 2), dtype=np.float16) for c, n in data.lengths.items()}
    for contig, first, probs in pieces:
        tracks[contig][first:first + len(probs)] = probs
    return SoftTracks(stride, tracks, dict(data.lengths), set(data.circular))
