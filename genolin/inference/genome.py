"""Genome windows through the model, for one ``Predictor``: the windows' base codes made on the host, their k-mer
ids, forward and reverse-complement average on the device (replayed from CUDA graphs where they apply), the kept
bins copied back, and one process's pipelined loop over a genome's batches.

    GenomeWindows(predictor).region_probs(data, regions, rc_average, progress) -> pieces, in genome order
    .tokens(data, batch, rc_average) -> (batch, bases, codes, nbins): a batch's host tensors
    .window_probs(codes, nbins, rc_average) -> (R, T, 2) probabilities on the device
    .launch(data, batch, codes, nbins, rc_average, pool), .pieces(data, batch, bases, launched, bar)

On CUDA the GPU makes the tokens (``window_ids``): the host's work is a few C passes per batch, not a tokenizer's
per window (with the forward in graphs, host tokenizers could not keep up with the GPU).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from genolin.inference.graphs import GraphCaptureError, GraphedForward, graphs_allowed
from genolin.inference.pipeline import (
    CUDA_QUEUE_DEPTH,
    CUDA_TOKEN_THREADS,
    cpu_model_threads,
    intra_op_threads,
    pipelined,
)
from genolin.inference.views import finite, rc_averaged
from genolin.inference.windows import Batch, Piece, kept_rows, pieces, plan_batches, window_bins, window_codes
from genolin.progress import progress_bar
from genolin.tasks import TrackData
from genolin.timings import mark
from genolin.tokenize import window_ids

log = logging.getLogger(__name__)

ON_HOST = object()  # a launched batch's "done" for kept bins already on the host


class GenomeWindows:
    """The genome-window side of a ``Predictor`` (its model, task, device, batch size, window and flags, read
    from it at each batch). ``graphs``: the CUDA graphs of genome batches (``GraphedForward``), made at the first
    batch where they apply (``graphs_apply``); None before, False when a capture failed. ``eager``: the graph keys
    (padding, rc_average) that ``capture`` left to eager launches, the genome having one batch of them (a capture
    costs more than the one forward it would replay)."""

    def __init__(self, predictor):
        self.predictor = predictor
        self.graphs: GraphedForward | None | bool = None
        self.captured: set[tuple[bool, bool]] = set()  # the (padding, rc_average) keys ``capture`` made graphs of
        self.eager: set[tuple[bool, bool]] = set()

    def graphs_wanted(self) -> bool:
        """Whether genome batches are meant to replay CUDA graphs: the predictor's ``cuda_graphs`` and eager on CUDA
        (compiled blocks launch from their own wrappers), unless GENOLIN_CUDA_GRAPHS=0. Such batches all have the
        full batch's shape, replayed or (a capture failed) not, so both give the same kernels the same shapes."""
        p = self.predictor
        return p.cuda_graphs and p.device.type == "cuda" and not p.compiled and graphs_allowed()

    def graphs_apply(self) -> bool:
        """Whether genome batches replay CUDA graphs: wanted, and no capture failed."""
        return self.graphs is not False and self.graphs_wanted()

    def capture(self, data: TrackData, regions, rc_average: bool) -> None:
        """Capture the CUDA graphs of this genome's batches (with padding and without) now, on the caller's thread,
        before the pipeline's threads start: a capture while another thread calls CUDA (a pinned copy on the
        reader thread) fails, and batches then ran eager from that point. A failed capture turns graphs off for
        the whole run, with one warning. Each ``rc_average`` value has its own pair of graphs (twice the rows).
        Only the kinds of batch the genome has at least twice are captured (``batch_kinds``): a kind it has once
        (a small genome's last, padded batch; a genome of one batch) runs eager, the same kernels on the same
        shapes, without a capture's warm-up forward and graph (about 0.7 s each for the base model)."""
        if not self.graphs_apply():
            return
        uses = batch_kinds(self.plan(data, regions), self.predictor.batch_size, self.window_bins(data)[0])
        wanted = [padding for padding in (False, True) if uses[padding] > 1 and (padding, rc_average) not in
                  self.captured]
        self.eager |= {(padding, rc_average) for padding in (False, True)
                       if uses[padding] == 1 and (padding, rc_average) not in self.captured}
        self.eager -= {(padding, rc_average) for padding in wanted}
        if not wanted:
            return
        first = next(iter(self.plan(data, regions)))
        _, _, codes, nbins = self.tokens(data, first, rc_average)
        graphs = self.graphs or GraphedForward(self._forward, self.predictor.device)
        try:
            for padding in wanted:
                graphs.capture((padding, rc_average), codes, nbins)
                self.captured.add((padding, rc_average))
        except GraphCaptureError as exc:
            log.warning("CUDA graphs unavailable (%s); launching the model's kernels one by one", exc)
            self.graphs = False
            return
        self.graphs = graphs
        mark("CUDA graphs captured")

    def window_bins(self, data: TrackData) -> tuple[int, int]:
        """(bins per genome window, margin bins) of the predictor's ``window_bp`` (``windows.window_bins``)."""
        return window_bins(data, self.predictor.window_bp)

    def plan(self, data: TrackData, regions, offset: int = 0) -> Iterator[Batch]:
        """The batches of windows covering ``regions``, their tiling moved by ``offset`` bins
        (``windows.plan_batches``)."""
        return plan_batches(data, regions, self.predictor.window_bp, self.predictor.batch_size, offset)

    def tokens(self, data: TrackData, batch: Batch, rc_average: bool):
        """(batch, bases, codes (R or 2R, L) uint8, nbins (R,) int64): the windows' base codes, then (rc_average)
        their reverse complements' (``windows.window_codes``), as torch tensors (pinned on CUDA); nbins: each
        row's real bins (0: padding)."""
        p = self.predictor
        # compiled or CUDA graphs: one shape for every batch, one compiled or captured graph (the reverse
        # complements then start at row batch_size, the rows between them padding with 0 real bins)
        if p.compiled or self.graphs_wanted():
            rows, tokens = p.batch_size, self.window_bins(data)[0]
        else:
            rows, tokens = len(batch), max(w.bins for w, _, _ in batch)
        bases, codes, nbins = window_codes(data, batch, rows, tokens, rc_average)
        codes, nbins = torch.from_numpy(codes), torch.tensor(nbins, dtype=torch.int64)
        if p.device.type == "cuda":  # a pageable copy would wait
            codes, nbins = codes.pin_memory(), nbins.pin_memory()
        return batch, bases, codes, nbins

    def window_probs(self, codes: torch.Tensor, nbins: torch.Tensor, rc_average: bool) -> torch.Tensor:
        """(R, T, 2) probabilities of a batch of windows from ``tokens``' host tensors (codes, nbins); with
        ``rc_average`` the batch holds the windows and then their reverse complements, averaged here on the device
        (half the copy back). On CUDA (``graphs_apply``) the tokens, the forward and the averaging replay a CUDA
        graph: the batches then all have the full batch's shape (``tokens``), so two graphs serve a genome, with
        padding and without. The result may be a graph's output buffer: it holds until the next replay, which the
        stream orders after every operation queued on it meanwhile (the copy back)."""
        cfg = self.predictor.task.cfg
        padding = bool((nbins < (codes.shape[1] - 2 * cfg.k + 2) // cfg.stride).any())  # host tensors: no sync
        if self.graphs_apply() and (padding, rc_average) not in self.eager:
            if self.graphs is None:
                self.graphs = GraphedForward(self._forward, self.predictor.device)
            try:
                return self.graphs((padding, rc_average), codes, nbins)
            except GraphCaptureError as exc:
                log.warning("CUDA graphs unavailable (%s); launching the model's kernels one by one", exc)
                self.graphs = False
        return self._forward(padding, rc_average, codes, nbins)

    def _forward(self, padding: bool, rc_average: bool, codes: torch.Tensor, nbins: torch.Tensor) -> torch.Tensor:
        p = self.predictor
        codes = codes.to(p.device, non_blocking=True)
        nbins = nbins.to(p.device, non_blocking=True)
        ids, mask = window_ids(codes, torch.cat([nbins, nbins]) if rc_average else nbins, p.task.cfg.k,
                               p.task.cfg.stride)
        probs = p.probabilities(ids, mask, padding)
        return rc_averaged(probs, nbins) if rc_average else probs

    def launch(self, data: TrackData, batch: Batch, codes: torch.Tensor, nbins: torch.Tensor, rc_average: bool,
               pool: ThreadPoolExecutor):
        """Start the batch; returns what ``pieces`` waits for: on CUDA a pinned host copy of the windows' kept
        bins (gathered on the GPU: the host neither copies margins back nor joins the windows) and its event (the
        GPU runs on while Python goes on), on a CPU a future of the model thread (torch releases the GIL in its
        ops) giving every bin."""
        device = self.predictor.device
        if device.type != "cuda":
            return pool.submit(lambda: self.window_probs(codes, nbins, rc_average).numpy()), None
        probs = self.window_probs(codes, nbins, rc_average)  # (R, T, 2), perhaps a graph's output buffer
        rows = torch.from_numpy(kept_rows(data, batch, probs.shape[1])).pin_memory()
        kept = probs.reshape(-1, probs.shape[-1]).index_select(0, rows.to(device, non_blocking=True))
        (host,), done = copied_back([kept])
        return host, done

    def pieces(self, data: TrackData, batch: Batch, bases, launched, bar) -> Iterator[Piece]:
        """The launched batch's kept bins, once there, as pieces (``windows.pieces``). ``launched``: (kept bins on
        the host, ``ON_HOST``); (a pinned copy of the kept bins, its CUDA event); or (every bin (R, T, 2) as an
        array or a model thread's future, None): the kept ones gathered here."""
        host, done = launched
        if done is ON_HOST:
            kept = host
        elif done is not None:
            done.synchronize()
            kept = host.numpy()
        else:
            full = host if isinstance(host, np.ndarray) else host.result()
            kept = full.reshape(-1, full.shape[-1])[kept_rows(data, batch, full.shape[1])]
        yield from pieces(data, batch, bases, finite(kept), bar)

    def region_probs(self, data: TrackData, regions, rc_average: bool, progress, offset: int = 0
                     ) -> Iterator[Piece]:
        """One process: pieces covering every bin of ``regions``, in order. Batches running while the caller turns
        earlier ones into pieces: CUDA: two in the GPU's queue (the writers' and peak callers' work on one batch
        varies, e.g. at a contig's end: the GPU keeps one in hand); CPU: one per model thread (``cpu_model_threads``,
        torch's intra-op threads set to their share until the generator finishes). Windows are read ahead on a
        thread (a CPU's cores run the model). ``offset``: the windows' tiling moved by that many bins."""
        cuda = self.predictor.device.type == "cuda"
        depth, threads = (CUDA_QUEUE_DEPTH, None) if cuda else cpu_model_threads()
        readers = CUDA_TOKEN_THREADS if cuda else 1
        with progress_bar(total=sum(b - a for _, a, b in regions), unit="bp", desc="predict",
                          enabled=progress) as bar, ThreadPoolExecutor(readers) as pool, \
                ThreadPoolExecutor(depth) as model, intra_op_threads(threads):

            def launch(made):
                batch, bases, codes, nbins = made
                return batch, bases, self.launch(data, batch, codes, nbins, rc_average, model)

            yield from pipelined(self.plan(data, regions, offset), lambda batch: self.tokens(data, batch, rc_average),
                                 launch, lambda running: self.pieces(data, *running, bar),
                                 pool=pool, ahead=depth + readers, depth=depth)


def batch_kinds(plan: Iterator[Batch], batch_size: int, window_bins: int) -> dict[bool, int]:
    """{padding: batches} of a genome's plan: how many of its batches have padding (fewer windows than
    ``batch_size``, or a window shorter than ``window_bins``: ``window_probs``' padding) and how many have none,
    each counted up to 2 (the count stops there: ``capture`` asks only whether a kind comes once or more)."""
    uses = {False: 0, True: 0}
    for batch in plan:
        padding = len(batch) < batch_size or any(w.bins < window_bins for w, _, _ in batch)
        uses[padding] = min(uses[padding] + 1, 2)
        if uses[False] == uses[True] == 2:
            break
    return uses


def copied_back(tensors: list[torch.Tensor]) -> tuple[list[torch.Tensor], torch.cuda.Event]:
    """(pinned host copies of ``tensors``, a CUDA event recorded after them): the copies queued behind the work
    that makes the tensors, so the host waits (``event.synchronize()``) only when it needs the values."""
    host = [torch.empty(t.shape, dtype=t.dtype, pin_memory=True) for t in tensors]
    for h, t in zip(host, tensors, strict=True):
        h.copy_(t, non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    return host, done
