"""``genolin predict``: apply a trained run to new sequences or whole new genomes.

    predict(run, inputs, out, options) -> a one-line summary

The run's task writes its outputs (``genolin.tasks``), the model runs through ``genolin.inference``:
- sequence classifier: OUT is a TSV with columns id, length, prob_<class> for every class, pred, has_n
  (``SequenceTask.predict``);
- track model: OUT is a prefix for OUT.plus.bedGraph and OUT.minus.bedGraph (per-bin promoter probability,
  calibrated to the training positive rate, covering every contig) and OUT.peaks.bed (BED6 calls: local maxima at
  least min_distance bp apart on a strand, each contig's most probable ones at ``options.calls_per_mbp``, else those
  at or above ``options.threshold``; the CLI's default is the run's training TSS density, ``Run.call_density``)
  (``TrackTask.predict``). Genomes stream
  through overlapping windows, so memory does not grow with the genome; the windows of a circular contig
  (``inputs.circular``, or its FASTA header) run on across its origin.
Every output is written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import os

from genolin.config import DataSpec
from genolin.errors import InputError
from genolin.tasks import PredictOptions


def predict(run, inputs: DataSpec, out: str | os.PathLike, options: PredictOptions | None = None) -> str:
    """Write the predictions of ``run`` (a genolin.inference.Run) for ``inputs``; returns what was written."""
    if inputs.circular and not run.task.has_track:
        raise InputError(None, "--circular is for the genomes a track model reads, not for sequences")
    return run.task.predict(run.predictor, inputs, out, options or PredictOptions())


__all__ = ["PredictOptions", "predict"]
