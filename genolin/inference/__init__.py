"""Running a trained model: read a run directory, pick the device, batch the inputs, run the encoder, turn its
outputs into the task's probabilities, average with the reverse complement. Validation during training,
``genolin evaluate`` and ``genolin predict`` all go through ``Predictor``, so they score alike.

    load_run(RUN_DIR, device) -> Run: config (RunConfig), task, model (best weights, eval mode), predictor
    load_run([RUN_DIR, ...], device) -> Run of an ensemble: every probability the mean of its members'
    Predictor.sequence_probs(SequenceData, rc_average) -> (n, C) float64 class probabilities, in the data's order
    Predictor.sequence_log_probs(SequenceData, rc_average) -> (n, C) their logarithms, from the logits
    Predictor.region_probs(TrackData, regions, rc_average) -> pieces (contig, first bin, probs (n, 2) float32)
        covering every bin of every region, in order

Genome regions stream through windows of the training length (``window_bp``; longer ones with
``load_run(window_bp=)``) that overlap by 2 * margin bins (margin = an eighth of the training window: the context a
bin needs at a window's edge is the model's, whatever the window); each window keeps its central part (the first
and last of a region keep their outer edge), so memory does not grow with the genome. Bins made only of N get
probability 0. RC averaging: the probabilities of the reverse-complemented input (for windows: bins reversed, strands
swapped) are averaged in.
Ensembles: runs of one task with the same classes and tokens (k, stride; tracks: window and bins) see the same
batches; each member's probabilities come from its own task state (a track model's calibration), then are averaged.

The rooms:
    loading.py    load_run, Run: a run directory -> model, task, predictor
    predictor.py  Predictor: the facade (sequences over their views, genome regions dispatched)
    views.py      views (strands, shifts) and ensemble members averaged; the views predict uses by default
    windows.py    genome window planning on the host (numpy): windows, kept bins, pieces
    genome.py     genome windows through the model in one process (tokens on the device, CUDA graphs, copy back)
    pipeline.py   the one pipelined loop, the background threads, a CPU's cores shared out
    graphs.py     CUDA graphs of the genome-window forward
    ranks.py      torchrun: windows shared out over the ranks, output files written in shares
"""

from __future__ import annotations

from genolin.inference.graphs import GraphCaptureError, GraphedForward
from genolin.inference.loading import WINDOW_BATCH_TOKENS, Run, load_kernels, load_run
from genolin.inference.pipeline import (
    CPU_MODEL_THREADS,
    CUDA_QUEUE_DEPTH,
    CUDA_TOKEN_THREADS,
    PIECES_AHEAD,
    computed_ahead,
    cpu_model_threads,
)
from genolin.inference.predictor import Predictor
from genolin.inference.views import default_views, describe_views, rc_averaged
from genolin.inference.windows import Piece

__all__ = ["CPU_MODEL_THREADS", "CUDA_QUEUE_DEPTH", "CUDA_TOKEN_THREADS", "PIECES_AHEAD", "WINDOW_BATCH_TOKENS",
           "GraphCaptureError", "GraphedForward", "Piece", "Predictor", "Run", "computed_ahead", "cpu_model_threads",
           "default_views", "describe_views", "load_kernels", "load_run", "rc_averaged"]
