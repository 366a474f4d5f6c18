"""A teacher's probabilities over a track task's training regions, for distillation (``genolin train --teacher``).

    teacher_tracks(teachers, task, device, progress) -> SoftTracks (``genolin.tasks.track_distill``)
"""

from __future__ import annotations

import gc
import logging

import torch

from genolin.errors import InputError
from genolin.tasks.track_distill import SoftTracks, soft_tracks

log = logging.getLogger(__name__)


def teacher_tracks(teachers: list[str], task, device: torch.device, progress: bool | None = None) -> SoftTracks:
    """The teachers' (one run, a bundled model's members for ``device``, or their ensemble) probabilities over the
    training regions of ``task`` (a track task after ``load_training``), reverse complements averaged."""
    from genolin.inference import load_run

    if not task.has_track:
        raise InputError("--teacher", f"distillation trains track models; this is a {task.name} task")
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        # each rank would read the whole teacher on its first GPU (load_run picks cuda:0 outside torchrun's group)
        raise InputError("--teacher", "distillation runs in one process, not under torchrun")
    run = load_run(list(teachers), device.type)  # (under torchrun every rank reads it whole, on its first GPU)
    if not run.task.has_track:
        raise InputError("--teacher", f"{teachers[0]} is a {run.task.name} model; a teacher of a track model is a "
                                      "track model")
    data, regions = task.train, task.train_regions
    theirs = data.tokens_of(run.config.train)
    soft = soft_tracks(run.predictor.region_probs(theirs, regions, rc_average=True, progress=progress), data,
                       run.config.train.stride)
    log.info("distillation: teacher %s (stride %d) read %s bp of the training genomes", " + ".join(teachers),
             soft.stride, f"{sum(b - a for _, a, b in regions):,}")
    del run
    if device.type == "cuda":  # the teacher's weights and CUDA graphs (their pools: GBs) go before training starts
        gc.collect()
        torch.cuda.set_device(device)
        torch.cuda.empty_cache()
    return soft
