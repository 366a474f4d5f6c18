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
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genolin import checkpoint as ckpt
from genolin import memory
from genolin.checkpoint import RunConfig
from genolin.config import TrainConfig
from genolin.device import Dist, init_distributed, peers_alive, pick_device
from genolin.errors import InputError
from genolin.model import LENGTH_LIMITED_MIXERS, STREAMING_MIXERS, Encoder
from genolin.progress import progress_bar
from genolin.tasks import TASK_TYPES, SequenceData, Task, TrackData, Window, get_task
from genolin.tokenize import padded_codes, window_ids

log = logging.getLogger(__name__)

Piece = tuple[str, int, np.ndarray]  # (contig, first bin, probs (n, 2))
WINDOW_BATCH_TOKENS = {False: 2**15, True: 2**18}  # tokens per batch of genome windows: CPU, CUDA (RC doubles it)
# genome windows on a CPU: batches run on this many model threads at once (at most), the cores shared out among
# them: a small model's operations are too short to keep several cores busy each. Batches of 2**15 tokens: smaller
# ones lose more to the threads' turns at the GIL, larger ones to cache misses (docs/benchmarks.md, prediction speed)
CPU_MODEL_THREADS = 4
# CUDA: batches in the GPU's queue while the main thread writes an earlier one
CUDA_QUEUE_DEPTH = 2
# CUDA: pieces computed ahead of the writers and peak callers (``region_probs(ahead=True)``), on a thread of their
# own: with the forward replayed from CUDA graphs, peak calling and the writers' dispatch held up the launches when
# they shared one thread
PIECES_AHEAD = 4
# CUDA: threads reading genome windows ahead of the GPU. With the k-mer ids made on the GPU (``window_ids``) the
# host only joins base codes, and one thread keeps up (more only wait on the GIL)
CUDA_TOKEN_THREADS = 1


class Predictor:
    """A model (in whatever train/eval mode the caller set) applied in batches, without gradients.

    On CUDA the model runs under bf16 autocast when the run trained with it (``amp``); genome windows are
    read on a background thread as base codes (their k-mer ids made on the device) while the GPU works, eager
    genome batches replay CUDA graphs (``GraphedForward``), and each batch's probabilities are copied back while
    the next batch runs.
    ``compile``: the blocks go through torch.compile (``Encoder.compile_blocks``: norm, convolution, MLP and the
    elementwise work between kernels fused; genome batches are padded to one shape). Opt-in: eager genome batches
    replay CUDA graphs, which compiled blocks cannot, and run faster (docs/benchmarks.md, prediction speed)."""

    def __init__(self, model: Encoder, task: Task, device: torch.device, *, batch_size: int, max_tokens: int,
                 amp: bool = False, dist: Dist | None = None, compile: bool = False,
                 members: list[tuple[Encoder, Task]] | None = None, shift_views: int = 0,
                 window_bp: int | None = None, cuda_graphs: bool = False, loading: threading.Thread | None = None):
        self.model, self.task, self.device = model, task, device
        self.window_bp = window_bp  # genome windows of this length (None: the training window)
        # sequence classifiers: probabilities also averaged over these many views with leading bases dropped
        self.shift_views = shift_views
        # (model, task) pairs whose probabilities are averaged; the first is (model, task)
        self.members = members or [(model, task)]
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.amp = amp and device.type == "cuda"
        self.dist = dist or Dist()  # under torchrun: genome windows are shared out, rank 0 gets every result
        self.compiled = False
        # CUDA graphs of genome batches (``_graphs_apply``): load_run's predictors (predict, evaluate), not the
        # trainer's validation, whose graphs would keep their memory through training
        self.cuda_graphs = cuda_graphs
        self._graphs: GraphedForward | None | bool = None  # made at the first genome batch; False: unavailable
        self.loading = loading  # load_run's background loading of the kernels' modules (load_kernels)
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

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, padding: bool | None = None) -> torch.Tensor:
        """Probabilities on the device, float32 (an ensemble's: the mean of its members')."""
        if len(self.members) == 1:
            return self.task.probabilities(self.outputs(ids, mask, padding=padding)).float()
        total = None
        for model, task in self.members:
            probs = task.probabilities(self.outputs(ids, mask, model, padding=padding)).float()
            total = probs if total is None else total.add_(probs)
        return total.div_(len(self.members))

    def _graphs_apply(self) -> bool:
        """Whether genome batches replay CUDA graphs: ``cuda_graphs`` and eager on CUDA (compiled blocks launch
        from their own wrappers), unless GENOLIN_CUDA_GRAPHS=0 or a capture failed."""
        return (self.cuda_graphs and self.device.type == "cuda" and not self.compiled and self._graphs is not False
                and os.environ.get("GENOLIN_CUDA_GRAPHS", "1") != "0")

    def _window_probs(self, codes: torch.Tensor, nbins: torch.Tensor, rc_average: bool) -> torch.Tensor:
        """(R, T, 2) probabilities of a batch of windows from ``_tokens``' host tensors (codes, nbins); with
        ``rc_average`` the batch holds the windows and then their reverse complements, averaged here on the device (half
        the copy back). On CUDA (``_graphs_apply``) the tokens, the forward and the averaging replay a CUDA graph: the
        batches then all have the full batch's shape (``_tokens``), so two graphs serve a genome, with padding and
        without. The result may be a graph's output buffer: it holds until the next replay, which the stream orders
        after every operation queued on it meanwhile (the copy back)."""
        k, stride = self.task.cfg.k, self.task.cfg.stride
        padding = bool((nbins < (codes.shape[1] - 2 * k + 2) // stride).any())  # host tensors: no sync
        if self._graphs_apply():
            if self._graphs is None:
                self._graphs = GraphedForward(self._window_forward, self.device)
            try:
                return self._graphs((padding, rc_average), codes, nbins)
            except GraphCaptureError as exc:
                log.warning("CUDA graphs unavailable (%s); launching the model's kernels one by one", exc)
                self._graphs = False
        return self._window_forward(padding, rc_average, codes, nbins)

    def _window_forward(self, padding: bool, rc_average: bool, codes: torch.Tensor,
                        nbins: torch.Tensor) -> torch.Tensor:
        codes = codes.to(self.device, non_blocking=True)
        nbins = nbins.to(self.device, non_blocking=True)
        ids, mask = window_ids(codes, torch.cat([nbins, nbins]) if rc_average else nbins, self.task.cfg.k,
                               self.task.cfg.stride)
        probs = self._forward(ids, mask, padding)
        return rc_averaged(probs, nbins) if rc_average else probs

    def _kernels_loaded(self) -> None:
        """Wait for the background loading of the GPU kernels' modules (``load_run``), once."""
        if self.loading is not None:
            self.loading.join()
            self.loading = None

    def _probs(self, ids: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
        return _finite(self._forward(ids, mask).cpu().numpy())

    # -- labelled or unlabelled sequences --------------------------------------------------------------------
    def _per_batch(self, data: SequenceData, rc_average: bool, score):
        """(indices, [score(ids, mask) of each view]) for each batch of ``data``; the views: the sequences as
        given, then with 1 .. ``shift_views`` leading bases dropped, each of them also reverse-complemented with
        ``rc_average`` (the shifts then drop the reverse complement's leading bases)."""
        views = [(rc, shift) for rc in ((False, True) if rc_average else (False,))
                 for shift in range(self.shift_views + 1)]
        self.check_memory(data)
        for indices in data.batches(self.batch_size, self.max_tokens, None):
            batches = [data.collate(indices, rc=rc, shift=shift) for rc, shift in views]
            try:
                scores = [score(b.ids, b.mask) for b in batches]
            except (torch.OutOfMemoryError, RuntimeError) as exc:  # the estimate of check_memory is not exact
                if not memory.is_out_of_memory(exc):
                    raise
                raise InputError(data.dataset.source, f"out of memory scoring a batch of {len(indices)} "
                                                      f"sequence(s) of up to {int(data.lengths[indices].max()):,} "
                                                      f"tokens; give a smaller --batch-size") from None
            yield indices, scores

    def check_memory(self, data: SequenceData) -> None:
        """An InputError before the first batch when the largest batch of ``data`` would not fit the device's memory
        (``genolin.memory``), naming its longest sequence and what to change."""
        tokens, what = data.largest_batch(self.batch_size, self.max_tokens)
        cfg = self.model.cfg
        longest = int(data.lengths.max()) if len(data) else 0
        stream = cfg.mixer in STREAMING_MIXERS and longest // cfg.stem_pool > cfg.chunk_tokens
        n_params = sum(m.n_parameters() for m, _ in self.members)
        needed = memory.inference_bytes(cfg, tokens, n_params, stream=stream, amp=self.amp)
        memory.check_fits(needed, self.device, f"scoring a batch of {tokens:,} tokens ({what})",
                          "give fewer or shorter sequences, or a smaller --batch-size")

    def sequence_probs(self, data: SequenceData, *, rc_average: bool = False) -> np.ndarray:
        """(n, C) class probabilities, in the order of ``data`` (the mean over the views of ``_per_batch``)."""
        out = np.zeros((len(data), self.model.cfg.n_classes), dtype=np.float64)
        for indices, views in self._per_batch(data, rc_average, self._probs):
            out[indices] = views[0] if len(views) == 1 else np.mean(views, axis=0)
        return out

    def sequence_log_probs(self, data: SequenceData, *, rc_average: bool = False) -> np.ndarray:
        """(n, C) float64 log class probabilities: the logarithms of what ``sequence_probs`` gives, computed from
        the logits (log-softmax), so log-odds near certainty keep their digits."""

        def log_probs(ids, mask):  # an ensemble: the log of its members' mean probability
            lp = torch.stack([torch.log_softmax(self.outputs(ids, mask, model).logits.double(), -1)
                              for model, _ in self.members])
            return _finite((torch.logsumexp(lp, 0) - np.log(len(self.members))).cpu().numpy())

        out = np.zeros((len(data), self.model.cfg.n_classes), dtype=np.float64)
        for indices, views in self._per_batch(data, rc_average, log_probs):  # the log of the views' mean
            out[indices] = views[0] if len(views) == 1 else _logmeanexp(np.stack(views))
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
        (torchrun): the ranks share the batches and every rank yields every piece (``_region_probs_everywhere``)."""
        if ahead and self.device.type == "cuda" and (everywhere or not (self.dist.world > 1 and shared)):
            yield from computed_ahead(self.region_probs(data, regions, rc_average=rc_average, progress=progress,
                                                        shared=shared, everywhere=everywhere),
                                      self.device, PIECES_AHEAD)
            return
        if everywhere and self.dist.world > 1:
            yield from self._region_probs_everywhere(data, regions, rc_average, progress)
            return
        if self.dist.world > 1 and shared:
            yield from self._region_probs_shared(data, regions, rc_average, progress)
            return
        plan = self._plan(data, regions)
        # batches running while the main thread turns earlier ones into pieces: CUDA: two in the GPU's queue (the
        # writers' and peak callers' work on one batch varies, e.g. at a contig's end: the GPU keeps one in hand);
        # CPU: one per model thread
        depth, threads = (CUDA_QUEUE_DEPTH, None) if self.device.type == "cuda" else cpu_model_threads()
        # windows read ahead on a thread (a CPU's cores run the model)
        readers = CUDA_TOKEN_THREADS if self.device.type == "cuda" else 1
        with progress_bar(total=sum(b - a for _, a, b in regions), unit="bp", desc="predict",
                          enabled=progress) as bar, ThreadPoolExecutor(readers) as pool, \
                ThreadPoolExecutor(depth) as model, _intra_op_threads(threads):
            ready = deque(pool.submit(self._tokens, data, p, rc_average)
                          for p in itertools.islice(plan, depth + readers))
            running: deque = deque()
            while ready:
                pending, bases, codes, nbins = ready.popleft().result()
                nxt = next(plan, None)
                if nxt is not None:
                    ready.append(pool.submit(self._tokens, data, nxt, rc_average))
                running.append((pending, bases, self._launch(data, pending, codes, nbins, rc_average, model)))
                if len(running) > depth:  # the oldest is written while the others run
                    yield from self._pieces(data, *running.popleft(), bar)
            while running:
                yield from self._pieces(data, *running.popleft(), bar)

    def _region_probs_everywhere(self, data: TrackData, regions, rc_average: bool, progress) -> Iterator[Piece]:
        """torchrun, every rank yields the pieces of every region in order: batch i of the one-process plan runs on
        rank i % world, and each round (one batch per rank) the kept bins of the round's batches, padded to a
        batch's most, (world, batch_size x window bins, 2) float32, are all-gathered (NCCL on CUDA, gloo on a
        CPU). The batches and so the values are the one process's, bit for bit. The callers write a strand each:
        every rank formats half the lines of the two strands, and no rank appends another's output. On CUDA,
        ``CUDA_QUEUE_DEPTH`` rounds run (forward, gather, copy to pinned memory) while the oldest becomes pieces."""
        import torch.distributed as tdist

        rank, world, cuda = self.dist.rank, self.dist.world, self.device.type == "cuda"
        plan = list(self._plan(data, regions))
        rounds = [plan[i: i + world] for i in range(0, len(plan), world)]
        size = self.batch_size * self._window_bins(data)[0]  # a batch's kept bins, at most
        comm = self.device if cuda else torch.device("cpu")

        def made(batches):  # on a reader thread: this rank's tokens, the bases of every batch (N bins)
            mine = self._tokens(data, batches[rank], rc_average) if rank < len(batches) else None
            return mine, [mine[1] if r == rank else [data.bases(w) for w, _, _ in p] for r, p in enumerate(batches)]

        def launch(mine) -> tuple[list, object]:
            kept = torch.zeros((size, 2), dtype=torch.float32, device=comm)
            if mine is not None:
                pending, _, codes, nbins = mine
                probs = self._window_probs(codes, nbins, rc_average)
                rows = torch.from_numpy(_kept_rows(data, pending, probs.shape[1]))
                rows = rows.pin_memory().to(comm, non_blocking=True) if cuda else rows
                kept[: len(rows)] = probs.reshape(-1, probs.shape[-1]).index_select(0, rows)
            every = [torch.empty_like(kept) for _ in range(world)]
            with peers_alive():
                tdist.all_gather(every, kept)
            if not cuda:
                return [t.numpy() for t in every], _ON_HOST
            host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in every]
            for h, t in zip(host, every, strict=True):
                h.copy_(t, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            return host, done

        depth = CUDA_QUEUE_DEPTH if cuda else 0
        with progress_bar(total=sum(b - a for _, a, b in regions), unit="bp", desc="predict",
                          enabled=progress if rank == 0 else False) as bar, ThreadPoolExecutor(1) as pool:
            ready = deque(pool.submit(made, batches) for batches in rounds[: depth + 1])
            running: deque = deque()
            for i, batches in enumerate(rounds):
                mine, bases = ready.popleft().result()
                if i + depth + 1 < len(rounds):
                    ready.append(pool.submit(made, rounds[i + depth + 1]))
                running.append((batches, bases, launch(mine)))
                if len(running) > depth:
                    yield from self._round_pieces(data, *running.popleft(), bar)
            while running:
                yield from self._round_pieces(data, *running.popleft(), bar)

    def _round_pieces(self, data: TrackData, batches, bases, launched, bar) -> Iterator[Piece]:
        host, done = launched
        for r, pending in enumerate(batches):
            yield from self._pieces(data, pending, bases[r], (host[r], done), bar)

    def _region_probs_shared(self, data: TrackData, regions, rc_average: bool, progress) -> Iterator[Piece]:
        """torchrun: batch i of the plan runs on rank i % world; each round the ranks' probabilities (padded to
        one shape) are gathered on rank 0, which yields the pieces in genome order. Pipelined: the next round's
        tokens are made on a background thread and its forward and gather are launched before rank 0 turns the
        last round into pieces, so the ranks do not wait for rank 0's writing."""
        import torch.distributed as tdist

        rank, world = self.dist.rank, self.dist.world
        plan = list(self._plan(data, regions))
        log.info("%d batches of windows shared over %d processes", len(plan), world)
        shape = (self.batch_size, self._window_bins(data)[0], 2)
        comm = self.device if self.device.type == "cuda" else torch.device("cpu")
        rounds = range(0, len(plan), world)

        def tokens(first: int):
            return self._tokens(data, plan[first + rank], rc_average) if first + rank < len(plan) else None

        def launch(made) -> tuple[torch.Tensor, list | None, object]:
            mine = torch.zeros(shape, dtype=torch.float32, device=comm)
            if made is not None:
                probs = self._window_probs(made[2], made[3], rc_average)
                mine[: probs.shape[0], : probs.shape[1]] = probs
            every = [torch.empty_like(mine) for _ in range(world)] if rank == 0 else None
            with peers_alive():
                return mine, every, tdist.gather(mine, every, dst=0, async_op=True)

        def finish(first: int, launched) -> Iterator[Piece]:
            _, every, work = launched
            with peers_alive():
                work.wait()
            if rank == 0:
                for r, probs in enumerate(every[: len(plan) - first]):
                    pending = plan[first + r]
                    bases = [data.bases(w) for w, _, _ in pending]
                    yield from self._pieces(data, pending, bases, (probs.cpu().numpy(), None), bar)

        with progress_bar(total=sum(b - a for _, a, b in regions), unit="bp", desc="predict",
                          enabled=progress if rank == 0 else False) as bar, ThreadPoolExecutor(1) as pool:
            made = pool.submit(tokens, rounds[0]) if rounds else None
            previous = None
            for i, first in enumerate(rounds):
                ready = made.result()
                if i + 1 < len(rounds):
                    made = pool.submit(tokens, rounds[i + 1])
                launched = launch(ready)
                if previous is not None:
                    yield from finish(*previous)
                previous = (first, launched)
            if previous is not None:
                yield from finish(*previous)

    def _plan(self, data: TrackData, regions) -> Iterator[list[tuple[Window, int, int]]]:
        """Batches of (window, keep_from, keep_to), bins absolute: windows of ``_window_bins`` overlapping by
        2 * margin bins, each keeping its centre (a region's first and last window keep their outer edge)."""
        stride = data.stride
        nb, margin = self._window_bins(data)
        pending: list[tuple[Window, int, int]] = []
        for contig, a, b in regions:
            first, end = a // stride, -(-b // stride)
            b0 = keep_from = first
            while keep_from < end:
                nbins = min(nb, end - b0)
                keep_to = end if b0 + nbins >= end else b0 + nb - margin
                pending.append((Window(contig, b0 * stride, nbins), keep_from, keep_to))
                keep_from, b0 = keep_to, max(keep_to - margin, first)
                if len(pending) == self.batch_size:
                    yield pending
                    pending = []
        if pending:
            yield pending

    def _tokens(self, data: TrackData, pending, rc_average: bool):
        """(pending, bases, codes (R or 2R, L) uint8, nbins (R,) int64): the windows' base codes, then
        (rc_average) their reverse complements' (``padded_codes``); nbins: each row's real bins (0: padding). The
        model's device makes the tokens (``window_ids``): the host's work is a few C passes per batch, not a
        tokenizer's per window (on CUDA with the forward in graphs, host tokenizers could not keep up with the
        GPU)."""
        bases = [data.bases(w) for w, _, _ in pending]
        bins = [w.bins for w, _, _ in pending]
        # compiled or CUDA graphs: one shape for every batch, one compiled or captured graph (the reverse
        # complements then start at row batch_size, the rows between them padding with 0 real bins)
        if self.compiled or self._graphs_apply():
            rows, tokens = self.batch_size, self._window_bins(data)[0]
        else:
            rows, tokens = len(pending), max(bins)
        length = tokens * data.stride + 2 * data.k - 2
        seqs, nbins = bases + [b""] * (rows - len(pending)), bins + [0] * (rows - len(pending))
        codes = padded_codes(seqs, length)
        if rc_average:
            codes = np.concatenate([codes, padded_codes(seqs, length, rc=True)])
        codes, nbins = torch.from_numpy(codes), torch.tensor(nbins, dtype=torch.int64)
        if self.device.type == "cuda":  # a pageable copy would wait
            codes, nbins = codes.pin_memory(), nbins.pin_memory()
        return pending, bases, codes, nbins

    def _window_bins(self, data: TrackData) -> tuple[int, int]:
        """(bins per genome window, margin bins): ``window_bp`` (default: the training window), and an eighth of
        the training window as the margin whatever the window."""
        return (self.window_bp or data.window_bp) // data.stride, data.window_bp // data.stride // 8

    def _launch(self, data: TrackData, pending, codes: torch.Tensor, nbins: torch.Tensor, rc_average: bool,
                pool: ThreadPoolExecutor):
        """Start the batch; returns what ``_pieces`` waits for: on CUDA a pinned host copy of the windows' kept
        bins (gathered on the GPU: the host neither copies margins back nor joins the windows) and its event (the
        GPU runs on while Python goes on), on a CPU a future of the model thread (torch releases the GIL in its
        ops) giving every bin."""
        if self.device.type != "cuda":
            return pool.submit(lambda: self._window_probs(codes, nbins, rc_average).numpy()), None
        probs = self._window_probs(codes, nbins, rc_average)  # (R, T, 2), perhaps a graph's output buffer
        rows = torch.from_numpy(_kept_rows(data, pending, probs.shape[1])).pin_memory()
        kept = probs.reshape(-1, probs.shape[-1]).index_select(0, rows.to(self.device, non_blocking=True))
        host = torch.empty(kept.shape, dtype=kept.dtype, pin_memory=True)
        host.copy_(kept, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return host, done

    def _pieces(self, data: TrackData, pending, bases, running, bar) -> Iterator[Piece]:
        """The batch's kept bins as pieces: the windows joined where they follow on in one contig (a batch's
        windows usually do), one piece per contig run, so the writers and peak callers pay their per-call cost
        once per batch, not once per window. Each piece is a slice of one array holding the batch's kept bins
        alone (no margins, no padding rows)."""
        host, done = running
        if done is _ON_HOST:  # the kept bins, already on the host (_region_probs_everywhere on a CPU)
            kept = host
        elif done is not None:  # CUDA: the kept bins, gathered on the GPU
            done.synchronize()
            kept = host.numpy()
        else:  # every bin, (R, T, 2): the kept ones gathered here
            full = host if isinstance(host, np.ndarray) else host.result()
            kept = full.reshape(-1, full.shape[-1])[_kept_rows(data, pending, full.shape[1])]
        _finite(kept)
        contig, start, end, at, run_at = None, 0, 0, 0, 0
        for (w, keep_from, keep_to), seq in zip(pending, bases, strict=True):
            if contig is not None and (w.contig != contig or keep_from != end):
                yield contig, start, kept[run_at:at]
                contig = None
            if contig is None:
                contig, start, run_at = w.contig, keep_from, at
            if b"N" in seq:  # (a C search; most windows hold none)
                first = w.start // data.stride
                kept[at: at + keep_to - keep_from][data.all_n_bins(w, seq)[keep_from - first: keep_to - first]] = 0.0
            at += keep_to - keep_from
            end = keep_to
            bar.update((keep_to - keep_from) * data.stride)
        if contig is not None:
            yield contig, start, kept[run_at:at]


_ON_HOST = object()  # _pieces' "done" for kept bins already on the host


def _kept_rows(data: TrackData, pending, tokens: int) -> np.ndarray:
    """(kept bins,) int64: the rows of a batch's probabilities flattened to (R * tokens, 2) that its windows keep,
    window after window (window i's bins keep_from .. keep_to are its row's from keep_from - first)."""
    starts = np.array([i * tokens + keep_from - w.start // data.stride
                       for i, (w, keep_from, _) in enumerate(pending)], dtype=np.int64)
    lengths = np.array([keep_to - keep_from for _, keep_from, keep_to in pending], dtype=np.int64)
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum(), dtype=np.int64)


def computed_ahead(items: Iterator, device: torch.device, depth: int) -> Iterator:
    """``items`` drawn on a background thread (CUDA calls there on ``device``), up to ``depth`` ahead of the
    caller: the GPU's batches launched and made into pieces while the caller writes earlier ones and calls their
    peaks (numpy's passes and the waits for the GPU release the GIL). The thread's exception comes out of the
    iteration; when the caller stops early (an exception, a ``break``), the thread closes ``items`` and ends."""
    import queue

    box: queue.Queue = queue.Queue(depth)
    stop = threading.Event()

    def put(kind: str, value) -> bool:
        while not stop.is_set():
            try:
                box.put((kind, value), timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def produce() -> None:
        if device.type == "cuda":
            torch.cuda.set_device(device)  # the current device (events, streams) is per thread
        try:
            for item in items:
                if not put("item", item):
                    break
            else:
                put("end", None)
        except BaseException as exc:  # handed to the caller's thread, raised there
            put("error", exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="genolin-pieces", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = box.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def cpu_model_threads(cores: int | None = None) -> tuple[int, int]:
    """(model threads, torch threads each) for genome windows on a CPU: up to ``CPU_MODEL_THREADS`` threads, each
    running its batches with an even share of torch's intra-op threads (at least one)."""
    cores = cores or torch.get_num_threads()
    workers = max(1, min(CPU_MODEL_THREADS, cores))
    return workers, max(1, cores // workers)


@contextlib.contextmanager
def _intra_op_threads(n: int | None):
    """torch's intra-op threads set to ``n`` inside the block (None: unchanged), then restored."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n is not None:
            torch.set_num_threads(before)


class GraphCaptureError(RuntimeError):
    """A forward that could not be captured as a CUDA graph."""


class GraphedForward:
    """``forward(*flags, *inputs)`` on CUDA, replayed from CUDA graphs captured at the first call of each (input shapes,
    flags): one launch a batch instead of the hundreds an eager forward makes from Python (for the base track model
    more of the host's time than the GPU's work at stride 4).

    Each graph has its own input buffers, copied into from the call's host tensors, its own output and memory pool: a
    replay overwrites the previous replay's output, so a caller uses the output through operations queued on the same
    stream before the next call (the stream runs them in order)."""

    def __init__(self, forward, device: torch.device):
        self.forward, self.device = forward, device
        self.graphs: dict[tuple, tuple[list, torch.cuda.CUDAGraph, torch.Tensor]] = {}

    def __call__(self, flags: tuple, *inputs: torch.Tensor) -> torch.Tensor:
        """``forward(*flags, *inputs)``; ``flags``: hashable arguments that choose the computation (padding, RC)."""
        key = (tuple((tuple(t.shape), t.dtype) for t in inputs), flags)
        if key not in self.graphs:
            self.graphs[key] = self._capture(inputs, flags)
        static, graph, out = self.graphs[key]
        for buffer, t in zip(static, inputs, strict=True):
            buffer.copy_(t, non_blocking=True)
        graph.replay()
        return out

    def _capture(self, inputs: tuple, flags: tuple):
        static = [t.to(self.device, non_blocking=True) for t in inputs]
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        try:
            with torch.cuda.stream(side):  # first launches (Triton's loading, library handles) outside the capture
                self.forward(*flags, *static)
            main.wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = self.forward(*flags, *static)
        except RuntimeError as exc:
            torch.cuda.synchronize(self.device)
            raise GraphCaptureError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
        log.debug("captured a CUDA graph of the forward: inputs %s, flags %s", [tuple(t.shape) for t in inputs], flags)
        return static, graph, out


def load_kernels() -> None:
    """Import the Triton kernels' modules and compute Triton's cache key (it hashes Triton's own files, a few tenths
    of a second of the first launch). ``load_run`` runs it on a background thread while the
    weights load; whatever it leaves undone the first launch does."""
    import importlib

    try:
        for name in ("genolin.ops.norm_conv_triton", "genolin.ops.fused_triton", "genolin.ops.linear_attn_triton"):
            importlib.import_module(name)
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception as exc:  # noqa: BLE001 (a head start only: never fails the run)
        log.debug("loading the kernels ahead: %s", exc)


def rc_averaged(probs: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """probs (>= 2n, T, 2): n windows, then their reverse complements (then padding rows, if any); bins (n,)
    int64: each window's real bins (padding after them) -> (n, T, 2): the mean of a window's bins and its reverse
    complement's bins mirrored (reversed, strands swapped). Bins past a window's real ones hold no meaning."""
    n, t = bins.shape[0], probs.shape[1]
    back = (bins[:, None] - 1 - torch.arange(t, device=probs.device)).clamp_min(0)  # (n, T): bin t of the RC
    mirrored = torch.gather(probs[n:2 * n], 1, back[..., None].expand(-1, -1, probs.shape[2])).flip(-1)
    return 0.5 * (probs[:n] + mirrored)


def _logmeanexp(x: np.ndarray) -> np.ndarray:
    """log(mean(exp(x), axis 0)) without overflow: (V, ...) -> (...)."""
    top = x.max(axis=0)
    return top + np.log(np.mean(np.exp(x - top), axis=0))


def _finite(probs: np.ndarray) -> np.ndarray:
    """``probs``, or an InputError when the model gave NaN/inf (weights with huge values overflow to them)."""
    if not np.isfinite(probs).all():
        raise InputError(None, "the model's outputs are not finite (NaN or infinite): damaged or diverged weights")
    return probs


@dataclass
class Run:
    """A trained run, ready to predict."""

    config: RunConfig
    task: Task
    model: Encoder
    predictor: Predictor
    weights: Path  # the weights file loaded
    threshold: float | None = None  # chosen on validation (tracks: max F1, classifiers: max MCC) with these weights

    def decision_threshold(self, given: float | None) -> float:
        """``given`` (a --threshold), else the stored one, else 0.5; logged with where it came from."""
        if given is not None:
            value, source = given, "given"
        elif self.threshold is not None:
            value, source = self.threshold, f"chosen on validation: max {self.task.threshold_metric}"
        else:
            value, source = 0.5, "default; this run stored none"
        log.info("decision threshold %.4g (%s)", value, source)
        return value

    def rc_average(self, given: bool | None) -> bool:
        """``given`` (--rc-average / --no-rc-average), else on for a sequence classifier that trained with reverse
        complements (rc_prob > 0: the small and base presets), off otherwise (a track model's genome prediction
        would take twice as long)."""
        if given is not None:
            return given
        on = default_views(self.config.task, self.config.train)[0]
        if on:
            log.info("both strands averaged: the run trained with reverse complements (--no-rc-average: forward only)")
        return on


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


def _member(run_dir, config: RunConfig, dev: torch.device) -> tuple[Encoder, Task, Path, dict[str, str]]:
    task = get_task(config.task, config.train, config.task_state)
    model = Encoder(config.train.model)
    weights = ckpt.weights_for_inference(run_dir)
    meta = ckpt.load_weights(weights, model)
    what = "the best validated weights" if weights.name == ckpt.BEST else "the last weights (never validated)"
    if weights.name == ckpt.BEST and meta.get("step") == "0":  # said plainly: the epochs trained are not in them
        what += ", those from before the first training step (training never beat their validation score)"
    log.info("model: %s, %s (step %s) on %s", weights, what, meta.get("step", "?"), dev)
    return model.to(dev).eval(), task, weights, meta


def _check_window(config: RunConfig, window_bp: int | None) -> None:
    """An InputError for a --window-bp the run cannot read its genome in."""
    if window_bp is None:
        return
    cfg = config.train
    why = None
    if not TASK_TYPES[config.task].has_track:
        why = f"sets the genome windows of track models; this run is a {config.task} model"
    elif window_bp % cfg.stride or window_bp < cfg.window_bp:
        why = (f"{window_bp:,} bp: windows are a multiple of the stride ({cfg.stride}) and at least the training "
               f"window ({cfg.window_bp:,} bp)")
    elif cfg.model.mixer in LENGTH_LIMITED_MIXERS and window_bp // cfg.stride > cfg.model.max_len > 0:
        why = f"{window_bp:,} bp: the {cfg.model.mixer} mixer reads at most {cfg.model.max_len:,} tokens"
    if why:
        raise InputError("--window-bp", why)


def _check_ensemble(run_dirs: list, configs: list[RunConfig]) -> None:
    """An InputError naming the first run that cannot join the first one's ensemble, and why: the members must
    see the same batches and score the same classes (``Task.ensemble_shared``)."""
    first = configs[0]
    for run_dir, config in zip(run_dirs[1:], configs[1:], strict=True):
        why = None
        if config.task != first.task:
            why = f"a {config.task} model, {run_dirs[0]} a {first.task} model"
        elif config.task_state.get("classes") != first.task_state.get("classes"):
            why = f"classes {config.task_state.get('classes')}, {run_dirs[0]} {first.task_state.get('classes')}"
        else:
            for key in TASK_TYPES[first.task].ensemble_shared:
                if getattr(config.train, key) != getattr(first.train, key):
                    why = f"{key} {getattr(config.train, key)}, {run_dirs[0]} {getattr(first.train, key)}"
                    break
        if why:
            raise InputError(run_dir, f"cannot join an ensemble with {run_dirs[0]}: {why}")


def load_run(run_dir: str | os.PathLike | list, device: str = "auto", *, batch_size: int | None = None,
             distributed: bool = False, compile: bool = False, shift_views: int | None = 0,
             bf16_weights: bool | None = None, window_bp: int | None = None) -> Run:
    """The model of a run directory (best weights if training validated, else the last), in eval mode; a list of
    run directories: their ensemble (see the module docstring), whose decision threshold is the mean of the ones
    its members chose on validation (when all did).
    ``distributed``: under torchrun, join its process group and share genome windows out over the ranks.
    ``compile``: run the blocks through torch.compile (see ``Predictor``).
    ``shift_views``: a sequence classifier's probabilities also averaged over its inputs with 1..shift_views
    leading bases dropped (``Predictor._per_batch``); None: the training's own shift range (max_shift_bp) for a
    classifier trained with reverse complements (the small and base presets), else 0.
    ``bf16_weights``: the model cast to bfloat16 (``Encoder.to_inference_bf16``: the residual stream too); None:
    for track models on CUDA that trained under bf16 autocast (genome windows, where the speed counts; explain
    passes False: its gradients keep float32 weights).
    ``window_bp``: track models read the genome in windows of this many bp (a multiple of the stride, at least the
    training window; margins stay an eighth of the training window, so longer windows read fewer bases twice:
    1.33x at the training window, 1.07x at four times it); None: the training window."""
    run_dirs = list(run_dir) if isinstance(run_dir, list | tuple) else [run_dir]
    if not run_dirs:
        raise InputError(None, "no run directory given")
    configs = [ckpt.read_run_config(d) for d in run_dirs]
    _check_ensemble(run_dirs, configs)
    config = configs[0]
    kind = TASK_TYPES[config.task]
    _check_window(config, window_bp)
    if shift_views is None:
        shift_views = default_views(kind, config.train)[1]
    elif shift_views and not kind.shift_averaging:
        raise InputError("--shift-average", "averages shifted inputs of sequence classifiers; this run is a "
                                            f"{config.task} model")
    dist = init_distributed(device) if distributed else Dist()
    dev = pick_device(device, dist.local_rank)
    loading = None
    if dev.type == "cuda":  # the kernels' modules load while the weights do
        loading = threading.Thread(target=load_kernels, name="genolin-load-kernels", daemon=True)
        loading.start()
    members = [_member(d, c, dev) for d, c in zip(run_dirs, configs, strict=True)]
    if bf16_weights is None:
        bf16_weights = kind.has_track and dev.type == "cuda" and config.train.amp
    if bf16_weights:
        for member in members:
            member[0].to_inference_bf16()
    model, task, weights, _ = members[0]
    if batch_size is None:
        batch_size = config.train.batch_size
        if kind.has_track:  # genome windows: a batch of about WINDOW_BATCH_TOKENS tokens
            window_tokens = (window_bp or config.train.window_bp) // config.train.stride
            tokens = WINDOW_BATCH_TOKENS[dev.type == "cuda"]
            batch_size = max(1 if window_bp else batch_size, tokens // window_tokens)
    predictor = Predictor(model, task, dev, batch_size=batch_size, max_tokens=config.train.max_tokens,
                          amp=config.train.amp, dist=dist, compile=compile, members=[m[:2] for m in members],
                          shift_views=shift_views, window_bp=window_bp, cuda_graphs=True, loading=loading)
    thresholds = [float(m[3]["threshold"]) for m in members if "threshold" in m[3]]
    threshold = float(np.mean(thresholds)) if len(thresholds) == len(members) else None
    if len(members) > 1:
        log.info("an ensemble of %d runs: probabilities averaged", len(members))
    if shift_views:
        log.info("probabilities averaged over each sequence with 0..%d leading bases dropped (the run trained with "
                 "shifts of up to %d; --shift-average 0: off)", shift_views, config.train.max_shift_bp)
    return Run(config, task, model, predictor, weights, threshold)


__all__ = ["Predictor", "Run", "load_run"]
