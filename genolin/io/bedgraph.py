"""bedGraph output: one strand's per-bin values, written as they arrive in genome order.

Lines are ``contig<TAB>start<TAB>end<TAB>value`` (0-based, half-open) under a ``track type=bedGraph`` header that
IGV and the UCSC browser read; values are rounded to 4 decimals and runs of equal values become one line.
"""

from __future__ import annotations

import numpy as np


class BedGraphWriter:
    """Bins arrive in order (contig by contig); runs of equal rounded values become one line."""

    def __init__(self, fh, name: str, color: str):
        self.fh = fh
        fh.write(f'track type=bedGraph name="{name}" color={color} visibility=full autoScale=off '
                 f"viewLimits=0:1\n")
        self.run: list | None = None  # [contig, start, end, value] not yet written

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> None:
        """Bins ``first_bin``.. of ``contig`` (``stride`` bp each; the last one ends at ``length``)."""
        values = np.round(values.astype(np.float64), 4)
        if not len(values):
            return
        breaks = np.flatnonzero(np.diff(values)) + 1  # starts of runs of equal values inside this piece
        starts = np.concatenate([[0], breaks])
        ends = np.concatenate([breaks, [len(values)]])
        lines = []
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            start, end, v = (first_bin + s) * stride, min((first_bin + e) * stride, length), float(values[s])
            r = self.run
            if r is not None and r[0] == contig and r[2] == start and r[3] == v:
                r[2] = end
                continue
            if r is not None:
                lines.append(f"{r[0]}\t{r[1]}\t{r[2]}\t{r[3]:g}\n")
            self.run = [contig, start, end, v]
        self.fh.write("".join(lines))

    def flush(self) -> None:
        if self.run is not None:
            contig, start, end, value = self.run
            self.fh.write(f"{contig}\t{start}\t{end}\t{value:g}\n")
            self.run = None
