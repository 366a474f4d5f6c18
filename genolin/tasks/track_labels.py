"""Labels of the track task: per-bin, per-strand TSS targets of a window, with tolerance and circular wrap.

A window starting at a with n bins of s bp has targets (n, 2) float32: channel 0 is 1 where a + strand TSS lies in
the bin or within ``tolerance_bins`` bins of it, channel 1 the same for - strand TSSs. On a circular contig of L bp
TSS positions repeat every turn, so a TSS at p is also at p + j L for every turn j the window spans (a window that
starts before the origin or runs past the end sees it there). Reverse complement: bins reversed and strands
swapped, exactly the target of the reverse-complemented window.

The loss weights positives by ``auto_pos_weight`` of the training positive rate (``positive_rate``) unless the run
sets ``pos_weight``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from genolin.tasks.track_data import Region

StrandTSS = tuple[np.ndarray, np.ndarray]  # (+ strand, - strand) sorted TSS positions of a contig, (n,) int64


def window_targets(tss: StrandTSS, start: int, bins: int, stride: int, tolerance_bins: int, *,
                   circle: int | None = None, rc: bool = False) -> np.ndarray:
    """(bins, 2) float32: + and - strand TSSs of ``tss`` in each bin of the window starting at ``start`` (with
    ``tolerance_bins``); ``circle``: the contig's length when it is read as a circle (positions repeat every turn);
    mirrored and swapped when ``rc``."""
    out = np.zeros((bins, 2), dtype=np.float32)
    end = start + bins * stride
    for channel, positions in enumerate(tss):
        if circle is not None:
            positions = np.concatenate([positions + j * circle for j in range(start // circle, -(-end // circle))])
        lo, hi = np.searchsorted(positions, [start, end])
        found = (positions[lo:hi] - start) // stride
        for d in range(-tolerance_bins, tolerance_bins + 1):
            b = found + d
            out[b[(b >= 0) & (b < bins)], channel] = 1.0
    if rc:
        out = out[::-1, ::-1].copy()
    return out


def positive_rate(tss: dict[str, StrandTSS], regions: list[Region], stride: int, tolerance_bins: int) -> float:
    """Fraction of (bin, strand) targets that are 1 over the regions (approximate at tolerance overlaps)."""
    bins = sum((b - a) // stride for _, a, b in regions) * 2
    hits = 0
    for contig, a, b in regions:
        for positions in tss[contig]:
            lo, hi = np.searchsorted(positions, [a, b])
            hits += len(np.unique((positions[lo:hi] - a) // stride))
    return hits * (2 * tolerance_bins + 1) / max(bins, 1)


def auto_pos_weight(rate: float, cap: float = 1000.0) -> float:
    """BCE weight for positives that balances a positive rate: (1 - p) / p, between 1 and ``cap``."""
    if rate <= 0:
        return 1.0
    return float(min(max((1 - rate) / rate, 1.0), cap))
