"""Distillation of the track task: a teacher's per-bin probabilities as soft training targets.

    teacher_tracks(teachers, data, regions, device) -> SoftTracks: the teacher (a run, a bundled model or an
        ensemble of several) over the training regions, both strands, reverse complements averaged
    SoftTracks.window(contig, start, bins, stride, rc) -> (bins, 2) float32: its probabilities in a student's bins
    mixed(labels, soft, weight) -> (1 - weight) labels + weight soft

A teacher's track has bins of its own stride s_t (an ensemble's: its finest member's); a student's bin of s bp
takes the highest teacher probability of the bases it covers, the maximum the 50-bp scores take too. The loss
stays the positive-weighted cross-entropy: against a soft target y its minimum lies where the prior-corrected
probability (``TrackTask.probabilities``) is y, so the student learns (1 - w) label + w teacher.
Validation, best weights and the decision threshold use the TSS labels alone.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass

import numpy as np
import torch

from genolin.errors import InputError

log = logging.getLogger(__name__)


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


def teacher_tracks(teachers: list[str], data, regions, device: torch.device, progress: bool | None = None
                   ) -> SoftTracks:
    """The teachers' (one run, a bundled model's members for ``device``, or their ensemble) probabilities over
    ``regions`` of ``data`` (a ``TrackData``), reverse complements averaged, as ``SoftTracks``."""
    from genolin.inference import load_run

    run = load_run(list(teachers), device.type)  # (under torchrun every rank reads it whole, on its first GPU)
    if not run.task.has_track:
        raise InputError("--teacher", f"{teachers[0]} is a {run.task.name} model; a teacher of a track model is a "
                                      "track model")
    theirs = data.tokens_of(run.config.train)
    stride = run.config.train.stride
    tracks = {c: np.zeros((-(-n // stride), 2), dtype=np.float16) for c, n in data.lengths.items()}
    for contig, first, probs in run.predictor.region_probs(theirs, regions, rc_average=True, progress=progress):
        tracks[contig][first:first + len(probs)] = probs
    bases = sum(b - a for _, a, b in regions)
    log.info("distillation: teacher %s (stride %d) read %s bp of the training genomes", " + ".join(teachers),
             stride, f"{bases:,}")
    del run
    if device.type == "cuda":  # the teacher's weights and CUDA graphs (their pools: GBs) go before training starts
        gc.collect()
        torch.cuda.set_device(device)
        torch.cuda.empty_cache()
    return SoftTracks(stride, tracks, dict(data.lengths), set(data.circular))
