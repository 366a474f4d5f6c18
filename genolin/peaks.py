"""Promoter calls: local maxima of a per-bin probability track, streamed.

    PeakCaller(threshold, distance_bins, circle=).feed(first_bin, probs, final=) -> [(bin, p)] called on one strand
    StrandedPeaks(threshold, distance_bins, circles, quotas=).feed(contig, first_bin, probs (n, 2), final=) -> a
        contig's calls on both strands, [(bin, p, "+" or "-")] sorted, at its last piece
    DensityCut(k).add(calls); .selected() -> the k most probable calls of a contig
    density_quotas(sizes, per_mbp) -> calls per contig at a density, the running total rounded
    resolvable_density(positions_by_strand, bp, min_distance_bp) -> TSSs per Mbp that calls could tell apart

A bin is called when its probability is at least the threshold and the highest within ``distance_bins`` bins on its
strand (of equal neighbours the leftmost); at a density instead, a contig's most probable such local maxima. On a
circular contig of n bins (``circle``) the bins within ``distance_bins`` of the origin count those across it as
neighbours: bin 0 follows bin n - 1. ``genolin predict`` writes the calls (OUT.peaks.bed); the track task's scoring
matches them to annotated TSSs.
"""

from __future__ import annotations

import numpy as np


def window_max(a: np.ndarray, width: int) -> np.ndarray:
    """(n,) -> (n - width + 1,): out[j] = max(a[j : j + width]), in O(n log width) (maxima of spans doubling to
    the largest power of two <= width, then two overlapping spans per window), however many candidates."""
    out, span = a, 1
    while 2 * span <= width:  # out[j] = max(a[j : j + span]), len(a) - span + 1 values
        out, span = np.maximum(out[:-span], out[span:]), 2 * span
    m = len(a) - width + 1
    return np.maximum(out[:m], out[width - span: width - span + m])


class PeakCaller:
    """Streaming local maxima on one strand of one contig: bin i is called if p_i >= threshold, p_i > every p in
    [i - d, i) and p_i >= every p in (i, i + d] (so of equal neighbours the leftmost wins). Bins arrive in order;
    a bin is decided once d bins past it have arrived (or at the contig's end).

    ``circle``: the stretch is a whole circular contig of this many bins, from bin 0. Its first 2d bins are kept
    and, after its last bin, fed again as bins n .. n + 2d: bins n - d .. n are then decided with the origin's bins
    as their right neighbours, and bins 0 .. d (decided again there as bins n .. n + d, their first decision
    dropped) with the contig's last bins as their left ones. A circle of 2d bins or fewer (every bin within d of
    every other, some on both sides) is gathered whole and decided at its end (``small_circle_calls``)."""

    def __init__(self, threshold: float, distance_bins: int, first_bin: int = 0, *, circle: int | None = None):
        self.threshold, self.d = threshold, max(0, distance_bins)
        self.reset(first_bin, circle)

    def reset(self, first_bin: int = 0, circle: int | None = None) -> None:
        """Start a new stretch of bins at ``first_bin`` (a circle of ``circle`` bins: at 0)."""
        self.buf = np.zeros(0, dtype=np.float32)  # bins [offset, offset + len(buf)), in the dtype fed
        self.offset = first_bin
        self.decided = first_bin  # bins before this are decided
        self.circle = circle if circle is not None and self.d and circle > 2 * self.d else None
        self.head: np.ndarray | None = None  # a circle's first 2d bins
        self.small = circle is not None and self.d and circle <= 2 * self.d  # gathered whole: self.parts
        self.parts: list[np.ndarray] = []

    def feed(self, first_bin: int, probs: np.ndarray, *, final: bool = False) -> list[tuple[int, float]]:
        """The calls decided by these bins (a circle's bins near the origin come at its last piece, last)."""
        if self.small:
            if first_bin != sum(len(x) for x in self.parts):
                raise ValueError("bins must arrive in order")
            self.parts.append(np.asarray(probs))
            return small_circle_calls(np.concatenate(self.parts), self.threshold, self.d) if final else []
        if self.circle is None:
            return self._feed(first_bin, probs, final=final)
        d, n = self.d, self.circle
        if self.head is None or len(self.head) < 2 * d:
            more = np.array(probs[: 2 * d - (0 if self.head is None else len(self.head))])
            self.head = more if self.head is None else np.concatenate([self.head, more])
        peaks = [(b, p) for b, p in self._feed(first_bin, probs) if b >= d]
        if final:
            peaks += [(b - n if b >= n else b, p) for b, p in self._feed(n, self.head, final=True) if b < n + d]
        return peaks

    def _feed(self, first_bin: int, probs: np.ndarray, *, final: bool = False) -> list[tuple[int, float]]:
        if first_bin != self.offset + len(self.buf):
            raise ValueError("bins must arrive in order")
        probs = np.asarray(probs)  # float32 stays float32 (a float64 copy cost a pass; comparisons are the same)
        buf = np.concatenate([self.buf, probs if probs.dtype.kind == "f" else probs.astype(np.float64)])
        end = self.offset + len(buf)
        decide_to = end if final else end - self.d
        d = self.d
        lo, hi = self.decided - self.offset, decide_to - self.offset
        peaks = []
        if hi > lo:
            seg = buf[lo:hi]
            keep = seg >= self.threshold
            if d:  # first the bins above their two neighbours (few on a smooth track), in contiguous passes
                padded = np.concatenate([np.full(d, -np.inf, buf.dtype), buf, np.full(d, -np.inf, buf.dtype)])
                keep &= (seg > padded[lo + d - 1: hi + d - 1]) & (seg >= padded[lo + d + 1: hi + d + 1])
            cand = np.flatnonzero(keep) + lo  # positions in buf; padded[j] = buf[j - d]
            if len(cand) and d > 1:
                if len(cand) * d <= len(buf) // 2:  # few: the spans around them (a gather costs ~10x a pass)
                    near = np.lib.stride_tricks.sliding_window_view(padded, d)  # near[j] = padded[j : j + d]
                    left, right = near[cand].max(axis=1), near[cand + d + 1].max(axis=1)
                else:  # many: maxima of every span of d, in log2(d) passes
                    ahead = window_max(padded, d)  # max of padded[j : j + d]
                    left, right = ahead[cand], ahead[cand + d + 1]
                # left: max of buf[i - d : i], right: of buf[i + 1 : i + d + 1]
                cand = cand[(buf[cand] > left) & (buf[cand] >= right)]
            peaks = [(self.offset + i, float(buf[i])) for i in cand.tolist()]
        self.decided = max(self.decided, decide_to)
        new_offset = max(self.offset, self.decided - d)  # keep d bins of history before the undecided ones
        self.buf, self.offset = buf[new_offset - self.offset:], new_offset
        return peaks


def small_circle_calls(p: np.ndarray, threshold: float, d: int) -> list[tuple[int, float]]:
    """PeakCaller's rule on a whole circle of n bins, by brute force (n x n; for circles of 2d bins or fewer): bin i
    is called if p_i >= threshold, p_i > p_j for every other bin j within d before it and p_i >= p_j for every
    other bin within d after it (around the circle; a bin on both sides must be beaten strictly)."""
    n = len(p)
    after = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n  # after[i, j]: j is this many bins after i
    right = (after >= 1) & (after <= d)
    left = (after > 0) & (n - after <= d)
    pi, pj = p[:, None], p[None, :]
    beaten = np.where(left, pi > pj, True) & np.where(right, pi >= pj, True)
    called = np.flatnonzero((p >= threshold) & beaten.all(axis=1))
    return [(int(i), float(p[i])) for i in called]


class StrandedPeaks:
    """Calls on both strands of pieces (contig, first bin, probs (n, 2)) that come in genome order, each contig's
    from its first bin: one ``PeakCaller`` per strand, started anew at each contig. ``circles``: contig -> bins of
    the circular contigs (their whole circle comes, from bin 0). ``quotas`` (contig -> k, from ``density_quotas``):
    instead of those above the threshold, each contig's k most probable local maxima (``DensityCut``; ``cut``: the
    current contig's). A contig's stretch may start past its bin 0 (scoring a held-out end): its first piece's."""

    def __init__(self, threshold: float, distance_bins: int, circles: dict[str, int] | None = None, *,
                 quotas: dict[str, int] | None = None):
        self.callers = [PeakCaller(threshold, distance_bins) for _ in range(2)]
        self.circles = circles or {}
        self.quota = quotas
        self.contig: str | None = None
        self.calls: list[tuple[int, float, str]] = []
        self.cut: DensityCut | None = None

    def feed(self, contig: str, first_bin: int, probs: np.ndarray, *, final: bool
             ) -> list[tuple[int, float, str]] | None:
        """The contig's calls [(bin, p, "+" or "-")] sorted when this is its last piece (``final``), else None."""
        if contig != self.contig:
            self.contig, self.calls = contig, []
            self.cut = DensityCut(self.quota[contig]) if self.quota is not None else None
            for caller in self.callers:
                caller.reset(first_bin, self.circles.get(contig))
        for strand, caller in enumerate(self.callers):
            if self.cut is not None:  # a bin below the k-th best so far can never be among the k
                caller.threshold = self.cut.floor
            new = [(b, p, "+-"[strand]) for b, p in caller.feed(first_bin, probs[:, strand], final=final)]
            if self.cut is not None:
                self.cut.add(new)
            else:
                self.calls += new
        if not final:
            return None
        return self.cut.selected() if self.cut is not None else sorted(self.calls)


class DensityCut:
    """A call density instead of a threshold, for one contig (or region): of the calls added, the ``k`` most
    probable (k = 0: none). ``floor`` (0 until k calls were added; infinite for
    k = 0) is the k-th highest probability so far; it only rises, so the caller may raise its threshold to it as it
    goes (a bin below it can never be among the k), which bounds the memory by about 2k calls however long the
    contig."""

    def __init__(self, k: int):
        self.k = max(0, int(k))
        self.calls: list[tuple[int, float, str]] = []
        self.floor = 0.0 if self.k else float("inf")

    def add(self, calls: list[tuple[int, float, str]]) -> None:
        """More calls [(bin, p, "+" or "-")], any order."""
        self.calls += [c for c in calls if c[1] >= self.floor]
        if self.k and len(self.calls) >= self.k:
            p = np.fromiter((c[1] for c in self.calls), dtype=np.float64, count=len(self.calls))
            self.floor = float(np.partition(p, len(p) - self.k)[len(p) - self.k])
            if len(self.calls) > 2 * self.k:
                self.calls = [c for c in self.calls if c[1] >= self.floor]

    def selected(self) -> list[tuple[int, float, str]]:
        """The k most probable calls, sorted; of calls tied at the k-th probability (bf16 inference rounds them
        coarsely) the first ones along the contig, so there are never more than k."""
        best = sorted((c for c in self.calls if c[1] >= self.floor), key=lambda c: (-c[1], c[0], c[2]))
        return sorted(best[:self.k])


MAX_CALLS_PER_MBP = 1e6  # a call at every base: a density of calls beyond it means nothing (and overflows counts)


def density_quotas(sizes, per_mbp: float) -> list[int]:
    """Calls for each stretch of ``sizes`` bp, in order, at ``per_mbp`` per Mbp: the running total rounded, so the
    counts add up to the whole's and short contigs share in proportion (at 500 per Mbp a 900-bp contig gets 0 or 1
    call by where it falls, not 0 every time)."""
    out, done, total_bp = [], 0, 0
    for n in sizes:
        total_bp += n
        total = int(total_bp * per_mbp / 1e6 + 0.5)
        out.append(total - done)
        done = total
    return out


def resolvable_density(positions: list[np.ndarray], bp: int, min_distance_bp: int) -> float:
    """TSSs per Mbp that calls ``min_distance_bp`` apart could tell apart: along each strand's sorted positions (one
    array per contig and strand), a TSS counts if it lies more than ``min_distance_bp`` after the last one counted."""
    n = 0
    for pos in positions:
        last = None
        for x in np.sort(np.asarray(pos)).tolist():
            if last is None or x - last > min_distance_bp:
                n, last = n + 1, x
    return n / max(bp, 1) * 1e6


__all__ = ["MAX_CALLS_PER_MBP", "DensityCut", "PeakCaller", "StrandedPeaks", "density_quotas", "resolvable_density",
           "small_circle_calls", "window_max"]
