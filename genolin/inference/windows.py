"""Genome window planning, on the host (numpy only): which windows cover a genome's regions, which of their bins
each keeps, and how a batch's kept bins become the pieces ``Predictor.region_probs`` yields.

    plan_batches(data, regions, window_bins, margin, batch_size, offset) -> batches of (Window, keep_from, keep_to)
    window_offsets(data, window_bp, n) -> n offsets of the windows' tiling; offsets_averaged(passes) -> their mean
    restrided(pieces, regions, coarse, fine) -> pieces of coarse bins as pieces of fine ones (ensembles of strides)
    window_codes(data, batch, rows, tokens, rc_average) -> (bases, codes (rows or 2 rows, L) uint8, nbins)
    kept_rows(data, batch, tokens) -> the rows of the batch's (R * tokens, 2) probabilities its windows keep
    pieces(data, batch, bases, kept, bar) -> (contig, first bin, probs (n, 2)) per contig run of the batch

Windows of ``window_bins`` bins overlap by 2 * margin bins and keep their centre; the first and last window of a
region keep their outer edge, so every bin of a region is kept exactly once. Bins are absolute (bin b covers
[b * stride, (b + 1) * stride) of its contig). A region that is a whole circular contig (``TrackData.wraps``) has
no outer edge: its first window starts margin bins before the origin (at a negative bin, read from the contig's
end) and its last runs margin bins past the end (read from its start), so every bin keeps a window's centre.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from genolin.tasks import TrackData, Window
from genolin.tokenize import padded_codes

Piece = tuple[str, int, np.ndarray]  # (contig, first bin, probs (n, 2))
Batch = list[tuple[Window, int, int]]  # (window, keep_from, keep_to), bins absolute


def window_bins(data: TrackData, window_bp: int | None) -> tuple[int, int]:
    """(bins per genome window, margin bins): ``window_bp`` (None: the training window), and an eighth of the
    training window as the margin whatever the window (the context a bin needs at a window's edge is the
    model's)."""
    return (window_bp or data.window_bp) // data.stride, data.window_bp // data.stride // 8


def plan_batches(data: TrackData, regions, window_bp: int | None, batch_size: int, offset: int = 0
                 ) -> Iterator[Batch]:
    """Batches of at most ``batch_size`` (window, keep_from, keep_to) over the regions (contig, a, b) in order:
    windows of ``window_bins`` overlapping by 2 * margin bins, each keeping its centre (a region's first and last
    window keep their outer edge). ``offset`` bins (below the step, window bins - 2 * margin): every window
    boundary after a region's first moved that much earlier, a tiling of its own (``window_offsets``)."""
    nb, margin = window_bins(data, window_bp)
    pending: Batch = []
    for region in regions:
        for window in (circle_windows if data.wraps(region) else region_windows)(data, region, nb, margin, offset):
            pending.append(window)
            if len(pending) == batch_size:
                yield pending
                pending = []
    if pending:
        yield pending


def region_windows(data: TrackData, region, nb: int, margin: int, offset: int = 0
                   ) -> Iterator[tuple[Window, int, int]]:
    """(window, keep_from, keep_to) over a region (contig, a, b) read as a line: its first and last window keep
    their outer edge; the first keeps ``offset`` bins fewer."""
    contig, a, b = region
    first, end = a // data.stride, -(-b // data.stride)
    b0 = keep_from = first
    while keep_from < end:
        nbins = min(nb, end - b0)
        keep_to = end if b0 + nbins >= end else b0 + nb - margin - (offset if b0 == first else 0)
        yield Window(contig, b0 * data.stride, nbins), keep_from, keep_to
        keep_from, b0 = keep_to, max(keep_to - margin, first)


def circle_windows(data: TrackData, region, nb: int, margin: int, offset: int = 0
                   ) -> Iterator[tuple[Window, int, int]]:
    """(window, keep_from, keep_to) over a whole circular contig (contig, 0, length): windows from margin
    (+ ``offset``) bins before the origin, each keeping its centre, the last running margin bins past the end (a
    contig shorter than a window: one window of it and margin bins either side)."""
    contig, _, b = region
    end = -(-b // data.stride)
    b0, keep_from = -margin - offset, 0
    while keep_from < end:
        keep_to = min(b0 + nb - margin, end)
        yield Window(contig, b0 * data.stride, min(nb, keep_to + margin - b0)), keep_from, keep_to
        keep_from, b0 = keep_to, keep_to - margin


def window_offsets(data: TrackData, window_bp: int | None, n: int) -> list[int]:
    """``n`` window offsets in bins, evenly over a window's step (its bins less both margins): 0 first."""
    nb, margin = window_bins(data, window_bp)
    return [i * (nb - 2 * margin) // n for i in range(n)]


def offsets_averaged(passes: list[Iterator[Piece]], weights: list[float] | None = None) -> Iterator[Piece]:
    """The pieces of several passes over the same regions (each covering every bin once, in the same order, cut
    into pieces at other places) averaged bin by bin (``weights``: a weighted mean): a piece up to the first end
    among the passes' current ones."""
    heads: list[Piece | None] = [None] * len(passes)
    while True:
        for i, stream in enumerate(passes):
            while heads[i] is None or not len(heads[i][2]):
                heads[i] = next(stream, None)
                if heads[i] is None:
                    break
        if all(h is None for h in heads):
            return
        if any(h is None or h[:2] != heads[0][:2] for h in heads):
            raise RuntimeError("window offsets: the passes over the genome fell out of step")
        contig, first = heads[0][:2]
        n = min(len(h[2]) for h in heads)
        total = np.zeros((n, heads[0][2].shape[1]), dtype=np.float32)
        for h, w in zip(heads, weights or [1] * len(heads), strict=True):
            total += h[2][:n] * np.float32(w)  # (by 1: exactly the values)
        yield contig, first, total / np.float32(sum(weights) if weights else len(heads))
        heads = [(c, f + n, p[n:]) for c, f, p in heads]


def restrided(pieces: Iterator[Piece], regions, coarse: int, fine: int) -> Iterator[Piece]:
    """Pieces of bins of ``coarse`` bp over ``regions`` (in order, as ``region_probs`` yields them) as pieces of bins
    of ``fine`` bp (``coarse`` a multiple of it): each value repeated over the fine bins it covers, cut to the fine
    bins a // fine .. ceil(b / fine) of each region (contig, a, b)."""
    r = coarse // fine
    head: Piece | None = None
    for contig, a, b in regions:
        c0, c1 = a // coarse, -(-b // coarse)
        f0, f1 = a // fine, -(-b // fine)
        at = c0
        while at < c1:
            while head is None or not len(head[2]):
                head = next(pieces)
            name, first, probs = head
            if name != contig or first != at:
                raise RuntimeError("an ensemble's members of other strides fell out of step over the genome")
            take = min(c1 - at, len(probs))
            start = at * r
            lo, hi = max(start, f0), min(start + take * r, f1)
            if hi > lo:
                yield contig, lo, np.repeat(probs[:take], r, axis=0)[lo - start:hi - start]
            head, at = (name, first + take, probs[take:]), at + take


def window_codes(data: TrackData, batch: Batch, rows: int, tokens: int, rc_average: bool
                 ) -> tuple[list[bytes], np.ndarray, list[int]]:
    """(bases of each window, codes (rows, L) uint8 or with ``rc_average`` (2 rows, L): the windows' base codes
    then their reverse complements' (``padded_codes``), nbins (rows,): each row's real bins, 0 for padding rows).
    ``rows`` >= len(batch) and ``tokens`` >= the longest window's bins: the padded shape (a fixed one lets
    compiled blocks and CUDA graphs serve every batch; the reverse complements then start at row ``rows``)."""
    bases = [data.bases(w) for w, _, _ in batch]
    bins = [w.bins for w, _, _ in batch]
    length = tokens * data.stride + 2 * data.k - 2
    seqs, nbins = bases + [b""] * (rows - len(batch)), bins + [0] * (rows - len(batch))
    codes = padded_codes(seqs, length)
    if rc_average:
        codes = np.concatenate([codes, padded_codes(seqs, length, rc=True)])
    return bases, codes, nbins


def kept_rows(data: TrackData, batch: Batch, tokens: int) -> np.ndarray:
    """(kept bins,) int64: the rows of a batch's probabilities flattened to (R * tokens, 2) that its windows keep,
    window after window (window i's bins keep_from .. keep_to are its row's from keep_from - first)."""
    starts = np.array([i * tokens + keep_from - w.start // data.stride
                       for i, (w, keep_from, _) in enumerate(batch)], dtype=np.int64)
    lengths = np.array([keep_to - keep_from for _, keep_from, keep_to in batch], dtype=np.int64)
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum(), dtype=np.int64)


def pieces(data: TrackData, batch: Batch, bases: list[bytes], kept: np.ndarray, bar) -> Iterator[Piece]:
    """The batch's kept bins (kept bins, 2), window after window, as pieces: the windows joined where they follow
    on in one contig (a batch's windows usually do), one piece per contig run, so the writers and peak callers
    pay their per-call cost once per batch, not once per window. Bins made only of N are set to 0 in ``kept``;
    each piece is a slice of it. ``bar`` advances by the bases covered."""
    contig, start, end, at, run_at = None, 0, 0, 0, 0
    for (w, keep_from, keep_to), seq in zip(batch, bases, strict=True):
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
