"""Tasks: what a model learns and how it is scored (see ``base.py`` for the interface).

- ``sequence``: labelled sequences -> class probabilities (``SequenceTask``, ``SequenceData``)
- ``track``: genomes + TSS BED -> per-bin, per-strand promoter probabilities (``TrackTask``, ``TrackData``)

``get_task(name, cfg, state)`` builds the task of a run; nothing else looks at the name.
"""

from __future__ import annotations

from genolin.config import TrainConfig
from genolin.tasks.base import Batch, PredictOptions, Task, pad_tokens
from genolin.tasks.sequence import SequenceData, SequenceTask
from genolin.tasks.track import GenomeRegions, TrackData, TrackTask, Window

TASK_TYPES: dict[str, type[Task]] = {"sequence": SequenceTask, "track": TrackTask}


def get_task(name: str, cfg: TrainConfig, state: dict | None = None) -> Task:
    """The task ``name`` with a run's settings and saved state (classes, pos_weight)."""
    return TASK_TYPES[name](cfg, state)


__all__ = ["TASK_TYPES", "Batch", "GenomeRegions", "PredictOptions", "SequenceData", "SequenceTask", "Task",
           "TrackData", "TrackTask", "Window", "get_task", "pad_tokens"]
