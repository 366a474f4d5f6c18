"""``Predictor``: a model (or an ensemble) applied in batches, without gradients; the one way validation,
``genolin evaluate`` and ``genolin predict`` score, so they score alike (the calls: the package docstring).

Sequences are scored here over their views (``views.py``); genome regions go through ``genome.py`` (windows,
CUDA graphs, the pipeline) in one process, or ``ranks.py`` under torchrun.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import torch

from genolin import memory
from genolin.device import Dist
from genolin.errors import InputError
from genolin.inference.genome import GenomeWindows
from genolin.inference.pipeline import PIECES_AHEAD, computed_ahead
from genolin.inference.ranks import region_probs_everywhere, region_probs_shared, write_shares
from genolin.inference.views import finite, log_mean_over_views, mean_over_views, members_mean, views_of
from genolin.inference.windows import Piece, offsets_averaged, restrided, window_offsets
from genolin.model import Encoder
from genolin.tasks import SequenceData, Task, TrackData


class Predictor:
    """A model (in whatever train/eval mode the caller set) applied in batches, without gradients.

    On CUDA the model runs under bf16 autocast when the run trained with it (``amp``); genome windows are
    read on a background thread as base codes (their k-mer ids made on the device) while the GPU works, eager
    genome batches replay CUDA graphs (``graphs.GraphedForward``), and each batch's probabilities are copied back
    while the next batch runs (``genome.GenomeWindows``, kept as ``windows``).
    ``compile``: the blocks go through torch.compile (``Encoder.compile_blocks``: norm, convolution, MLP and the
    elementwise work between kernels fused; genome batches are padded to one shape). Opt-in: eager genome batches
    replay CUDA graphs, which compiled blocks cannot, and run faster (docs/benchmarks.md, prediction speed)."""

    def __init__(self, model: Encoder, task: Task, device: torch.device, *, batch_size: int, max_tokens: int,
                 amp: bool = False, dist: Dist | None = None, compile: bool = False,
                 members: list[tuple[Encoder, Task]] | None = None, shift_views: int = 0,
                 window_bp: int | None = None, cuda_graphs: bool = False, loading: threading.Thread | None = None,
                 window_offsets: int = 1):
        self.model, self.task, self.device = model, task, device
        self.window_bp = window_bp  # genome windows of this length (None: the training window)
        # track models: probabilities averaged over this many tilings of the genome's windows (one process)
        self.window_offsets = window_offsets
        # sequence classifiers: probabilities also averaged over these many views with leading bases dropped
        self.shift_views = shift_views
        # (model, task) pairs whose probabilities are averaged; the first is (model, task)
        self.members = members or [(model, task)]
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.amp = amp and device.type == "cuda"
        self.dist = dist or Dist()  # under torchrun: genome windows are shared out, rank 0 gets every result
        self.compiled = False
        # CUDA graphs of genome batches (``GenomeWindows.graphs_apply``): load_run's predictors (predict,
        # evaluate), not the trainer's validation, whose graphs would keep their memory through training
        self.cuda_graphs = cuda_graphs
        self.windows = GenomeWindows(self)
        self.loading = loading  # load_run's background loading of the kernels' modules (load_kernels)
        # an ensemble of track models of several strides (load_run): the predictors of the other strides' members
        # with their member counts, and this one's; genome pieces are the members' mean at this (the finest) stride
        self.others: list[tuple[Predictor, int]] = []
        self.own_members = len(self.members)
        if compile:
            self._compile()

    def _compile(self) -> None:
        if not self.compiled:
            for model, _ in self.members:
                model.compile_blocks()
            self.compiled = True

    @property
    def writes(self) -> bool:
        """Whether this process writes outputs (rank 0 of a torchrun launch, or the only process)."""
        return self.dist.main

    @torch.no_grad()
    def outputs(self, ids: torch.Tensor, mask: torch.Tensor, model: Encoder | None = None, *,
                padding: bool | None = None):
        """The EncoderOutput of ``model`` (default: the run's, an ensemble's first member) for a batch, on the
        device (bf16 autocast on CUDA when the run trained so). ``padding``: whether ``mask`` has padding (None:
        looked up in ``mask``, which must then be on the host, so the GPU's queue goes on)."""
        if padding is None:
            padding = not bool(mask.all())
        self._kernels_loaded()
        # no autocast cache: a CUDA graph's capture must not keep casts made outside it (each weight is cast once
        # per forward anyway)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.amp, cache_enabled=False):
            return (model or self.model)(ids.to(self.device, non_blocking=True),
                                         mask.to(self.device, non_blocking=True), padding=padding)

    def probabilities(self, ids: torch.Tensor, mask: torch.Tensor, padding: bool | None = None) -> torch.Tensor:
        """Probabilities of a batch on the device, float32 (an ensemble's: the mean of its members')."""
        return members_mean(self.members, lambda model, task: task.probabilities(
            self.outputs(ids, mask, model, padding=padding)).float())

    def _kernels_loaded(self) -> None:
        """Wait for the background loading of the GPU kernels' modules (``load_run``), once."""
        if self.loading is not None:
            self.loading.join()
            self.loading = None

    # -- labelled or unlabelled sequences --------------------------------------------------------------------
    def _per_batch(self, data: SequenceData, rc_average: bool, score):
        """(indices, [score(ids, mask) of each view] as host arrays) for each batch of ``data``; the views:
        ``views_of``. ``score`` returns a tensor on the device, brought back one batch late: the next batch is
        collated (on the CPU) and queued while the device still works on this one. On CUDA the tokens go from
        pinned memory, so their copy queues too instead of waiting for the device."""
        views = views_of(rc_average, self.shift_views)
        self.check_memory(data)
        pin = self.device.type == "cuda"
        pending = None
        for indices in data.batches(self.batch_size, self.max_tokens, None):
            batches = [data.collate(indices, rc=rc, shift=shift) for rc, shift in views]
            try:
                scores = [score(b.ids.pin_memory() if pin else b.ids, b.mask.pin_memory() if pin else b.mask)
                          for b in batches]
                if pending is not None:
                    yield pending[0], [finite(t.cpu().numpy()) for t in pending[1]]
            except (torch.OutOfMemoryError, RuntimeError) as exc:  # the estimate of check_memory is not exact
                if not memory.is_out_of_memory(exc):
                    raise
                raise InputError(data.dataset.source, f"out of memory scoring a batch of {len(indices)} "
                                                      f"sequence(s) of up to {int(data.lengths[indices].max()):,} "
                                                      f"tokens; give a smaller --batch-size") from None
            pending = indices, scores
        if pending is not None:
            yield pending[0], [finite(t.cpu().numpy()) for t in pending[1]]

    def check_memory(self, data: SequenceData) -> None:
        """An InputError before the first batch when the largest batch of ``data`` would not fit the device's memory
        (``genolin.memory``), naming its longest sequence and what to change."""
        tokens, what = data.largest_batch(self.batch_size, self.max_tokens)
        cfg = self.model.cfg
        longest = int(data.lengths.max()) if len(data) else 0
        block_tokens = -(-longest // cfg.stem_pool)
        stream = self.model.streams(max(tokens // max(longest, 1), 1), block_tokens, self.device)
        n_params = sum(m.n_parameters() for m, _ in self.members)
        needed = memory.inference_bytes(cfg, tokens, n_params, stream=stream, amp=self.amp)
        memory.check_fits(needed, self.device, f"scoring a batch of {tokens:,} tokens ({what})",
                          "give fewer or shorter sequences, or a smaller --batch-size")

    def sequence_probs(self, data: SequenceData, *, rc_average: bool = False) -> np.ndarray:
        """(n, C) class probabilities, in the order of ``data`` (the mean over the views of ``_per_batch``)."""
        out = np.zeros((len(data), self.model.cfg.n_classes), dtype=np.float64)
        for indices, views in self._per_batch(data, rc_average, self.probabilities):
            out[indices] = mean_over_views(views)
        return out

    def sequence_log_probs(self, data: SequenceData, *, rc_average: bool = False) -> np.ndarray:
        """(n, C) float64 log class probabilities: the logarithms of what ``sequence_probs`` gives, computed from
        the logits (log-softmax), so log-odds near certainty keep their digits."""

        def log_probs(ids, mask):  # an ensemble: the log of its members' mean probability
            lp = torch.stack([torch.log_softmax(self.outputs(ids, mask, model).logits.double(), -1)
                              for model, _ in self.members])
            return torch.logsumexp(lp, 0) - np.log(len(self.members))

        out = np.zeros((len(data), self.model.cfg.n_classes), dtype=np.float64)
        for indices, views in self._per_batch(data, rc_average, log_probs):  # the log of the views' mean
            out[indices] = log_mean_over_views(views)
        return out

    # -- genome regions --------------------------------------------------------------------------------------
    def region_probs(self, data: TrackData, regions: list[tuple[str, int, int]], *, rc_average: bool = False,
                     progress: bool | None = None, shared: bool = True, ahead: bool = False,
                     everywhere: bool = False) -> Iterator[Piece]:
        """Pieces covering bins a // stride .. ceil(b / stride) of every region (contig, a, b), in order (under
        torchrun with ``shared``: on rank 0, the other ranks computing their share and yielding nothing; without:
        this process computes and yields every region). On a CPU, batches run on ``cpu_model_threads()`` threads
        and torch's intra-op threads are set to their share until the generator finishes. ``ahead``: on CUDA
        (windows not shared over torchrun ranks), the batches are launched and made into pieces on a thread of
        their own, up to ``PIECES_AHEAD`` pieces ahead of the caller, who writes them meanwhile. ``everywhere``
        (torchrun): the ranks share the batches and every rank yields every piece
        (``ranks.region_probs_everywhere``). With ``window_offsets`` N > 1 (one process), the mean of N passes whose
        windows are tiled from N offsets (``windows.window_offsets``), run in step. With ``others`` (an ensemble of
        strides, one process), every member's pass at this stride (``windows.restrided``), weighted by members."""
        if self.others:  # (one process: load_run refuses strides under torchrun)
            theirs = [data.tokens_of(other.task.cfg) for other, _ in self.others]
            self.windows.capture(data, regions, rc_average)  # every CUDA graph before any pipeline thread starts
            for (other, _), their_data in zip(self.others, theirs, strict=True):
                other.windows.capture(their_data, regions, rc_average)
            passes = [self._region_probs(data, regions, rc_average=rc_average, progress=progress, ahead=ahead)]
            passes += [restrided(other.region_probs(their_data, regions, rc_average=rc_average, progress=False,
                                                    ahead=ahead), regions, their_data.stride, data.stride)
                       for (other, _), their_data in zip(self.others, theirs, strict=True)]
            before = torch.get_num_threads()  # each pass sets and restores torch's threads; their ends interleave
            try:
                yield from offsets_averaged(passes, [self.own_members] + [n for _, n in self.others])
            finally:
                torch.set_num_threads(before)
            return
        yield from self._region_probs(data, regions, rc_average=rc_average, progress=progress, shared=shared,
                                      ahead=ahead, everywhere=everywhere)

    def _region_probs(self, data: TrackData, regions: list[tuple[str, int, int]], *, rc_average: bool = False,
                      progress: bool | None = None, shared: bool = True, ahead: bool = False,
                      everywhere: bool = False) -> Iterator[Piece]:
        """``region_probs`` of this predictor's own members."""
        self.windows.capture(data, regions, rc_average)  # CUDA graphs: here, before any pipeline thread starts
        if ahead and self.device.type == "cuda" and (everywhere or not (self.dist.world > 1 and shared)):
            yield from computed_ahead(self._region_probs(data, regions, rc_average=rc_average, progress=progress,
                                                         shared=shared, everywhere=everywhere),
                                      self.device, PIECES_AHEAD)
        elif self.window_offsets > 1:  # (one process: load_run refuses offsets under torchrun)
            offsets = window_offsets(data, self.window_bp, self.window_offsets)
            before = torch.get_num_threads()  # each pass sets and restores torch's threads; their ends interleave
            try:
                passes = [self.windows.region_probs(data, regions, rc_average, progress if i == 0 else False, offset)
                          for i, offset in enumerate(offsets)]  # one progress bar, the first pass's
                yield from offsets_averaged(passes)
            finally:
                torch.set_num_threads(before)
        elif everywhere and self.dist.world > 1:
            yield from region_probs_everywhere(self.windows, self.dist, data, regions, rc_average, progress)
        elif self.dist.world > 1 and shared:
            yield from region_probs_shared(self.windows, self.dist, data, regions, rc_average, progress)
        else:
            yield from self.windows.region_probs(data, regions, rc_average, progress)

    def write_shares(self, prefix: str, shares: int, write, files) -> str:
        """Under torchrun: the files one process writes for ``prefix``, written in ``shares`` by the ranks
        (``ranks.write_shares``: ``write(share or None, folder or None)`` on each rank, ``files(share, folder)``
        the files of a share rank 0 moves into place)."""
        return write_shares(self.dist, self.device, prefix, shares, write, files)


__all__ = ["Predictor"]
