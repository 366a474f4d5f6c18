"""Running a trained model: read a run directory, pick the device, batch the inputs, run the encoder, turn its
outputs into the task's probabilities, average with the reverse complement. Validation during training,
``genolin evaluate`` and ``genolin predict`` all go through ``Predictor``, so they score alike.

    load_run(RUN_DIR, device) -> Run: config (RunConfig), task, model (best weights, eval mode), predictor
    Predictor.sequence_probs(SequenceData, rc_average) -> (n, C) float64 class probabilities, in the data's order
    Predictor.region_probs(TrackData, regions, rc_average) -> pieces (contig, first bin, probs (n, 2) float32)
        covering every bin of every region, in order

Genome regions stream through windows of the training length (``window_bp``) that overlap by 2 * margin bins
(margin = window / 8); each window keeps its central part (the first and last of a region keep their outer
edge), so memory does not grow with the genome. Bins made only of N get probability 0. RC averaging: the
probabilities of the reverse-complemented input (for windows: bins reversed, strands swapped) are averaged in.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genolin import checkpoint as ckpt
from genolin.checkpoint import RunConfig
from genolin.device import pick_device
from genolin.model import Encoder
from genolin.progress import progress_bar
from genolin.tasks import SequenceData, Task, TrackData, Window, get_task, pad_tokens

log = logging.getLogger(__name__)

Piece = tuple[str, int, np.ndarray]  # (contig, first bin, probs (n, 2))


class Predictor:
    """A model (in whatever train/eval mode the caller set) applied in batches, without gradients."""

    def __init__(self, model: Encoder, task: Task, device: torch.device, *, batch_size: int, max_tokens: int):
        self.model, self.task, self.device = model, task, device
        self.batch_size, self.max_tokens = batch_size, max_tokens

    @torch.no_grad()
    def _probs(self, ids: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
        out = self.model(ids.to(self.device), mask.to(self.device))
        return self.task.probabilities(out).cpu().numpy()

    # -- labelled or unlabelled sequences --------------------------------------------------------------------
    def sequence_probs(self, data: SequenceData, *, rc_average: bool = False) -> np.ndarray:
        """(n, C) class probabilities, in the order of ``data``."""
        out = np.zeros((len(data), self.model.cfg.n_classes), dtype=np.float64)
        for indices in data.batches(self.batch_size, self.max_tokens, None):
            batch = data.collate(indices)
            probs = self._probs(batch.ids, batch.mask)
            if rc_average:
                rc = data.collate(indices, rc=True)
                probs = 0.5 * (probs + self._probs(rc.ids, rc.mask))
            out[indices] = probs
        return out

    # -- genome regions --------------------------------------------------------------------------------------
    def region_probs(self, data: TrackData, regions: list[tuple[str, int, int]], *, rc_average: bool = False,
                     progress: bool | None = None) -> Iterator[Piece]:
        """Pieces covering bins a // stride .. ceil(b / stride) of every region (contig, a, b), in order."""
        stride = data.stride
        nb = data.window_bp // stride
        margin = nb // 8
        pending: list[tuple[Window, int, int]] = []  # (window, keep_from, keep_to) in absolute bins
        with progress_bar(total=sum(b - a for _, a, b in regions), unit="bp", desc="predict",
                          enabled=progress) as bar:
            for contig, a, b in regions:
                first, end = a // stride, -(-b // stride)
                b0 = keep_from = first
                while keep_from < end:
                    nbins = min(nb, end - b0)
                    keep_to = end if b0 + nbins >= end else b0 + nb - margin
                    pending.append((Window(contig, b0 * stride, nbins), keep_from, keep_to))
                    keep_from, b0 = keep_to, max(keep_to - margin, first)
                    if len(pending) == self.batch_size:
                        yield from self._windows(data, pending, rc_average, bar)
                        pending = []
            if pending:
                yield from self._windows(data, pending, rc_average, bar)

    def _windows(self, data: TrackData, pending, rc_average: bool, bar) -> Iterator[Piece]:
        bases = [data.bases(w) for w, _, _ in pending]
        probs = self._window_probs(data, pending, bases, rc=False)
        if rc_average:
            rc = self._window_probs(data, pending, bases, rc=True)
            probs = [0.5 * (p + r[::-1, ::-1]) for p, r in zip(probs, rc, strict=True)]
        for (w, keep_from, keep_to), p, seq in zip(pending, probs, bases, strict=True):
            p = p.copy()
            p[data.all_n_bins(w, seq)] = 0.0
            first = w.start // data.stride
            yield w.contig, keep_from, p[keep_from - first: keep_to - first]
            bar.update((keep_to - keep_from) * data.stride)

    def _window_probs(self, data: TrackData, pending, bases, *, rc: bool) -> list[np.ndarray]:
        arrays = [data.tokens(w, rc=rc, bases=b) for (w, _, _), b in zip(pending, bases, strict=True)]
        probs = self._probs(*pad_tokens(arrays))
        return [probs[i, : len(a)] for i, a in enumerate(arrays)]


@dataclass
class Run:
    """A trained run, ready to predict."""

    config: RunConfig
    task: Task
    model: Encoder
    predictor: Predictor
    weights: Path  # the weights file loaded
    threshold: float | None = None  # the decision threshold chosen on validation (max F1) with these weights

    def decision_threshold(self, given: float | None) -> float:
        """``given`` (a --threshold), else the stored one, else 0.5; logged with where it came from."""
        if given is not None:
            value, source = given, "given"
        elif self.threshold is not None:
            value, source = self.threshold, "chosen on validation: max F1"
        else:
            value, source = 0.5, "default; this run stored none"
        log.info("decision threshold %.4g (%s)", value, source)
        return value


def load_run(run_dir: str | os.PathLike, device: str = "auto", *, batch_size: int | None = None) -> Run:
    """The model of a run directory (best weights if training validated, else the last), in eval mode."""
    config = ckpt.read_run_config(run_dir)
    dev = pick_device(device)
    task = get_task(config.task, config.train, config.task_state)
    model = Encoder(config.train.model)
    weights = ckpt.weights_for_inference(run_dir)
    meta = ckpt.load_weights(weights, model)
    model = model.to(dev).eval()
    predictor = Predictor(model, task, dev, batch_size=batch_size or config.train.batch_size,
                          max_tokens=config.train.max_tokens)
    what = "the best validated weights" if weights.name == ckpt.BEST else "the last weights (never validated)"
    log.info("model: %s, %s (step %s) on %s", weights, what, meta.get("step", "?"), dev)
    threshold = float(meta["threshold"]) if "threshold" in meta else None
    return Run(config, task, model, predictor, weights, threshold)


__all__ = ["Predictor", "Run", "load_run"]
