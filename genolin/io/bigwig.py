"""bigWig output (pyBigWig): the per-bin values of the bedGraph writer (rounded to the same 4 decimals), in the
binary indexed format genome browsers stream from a URL. Values are stored as float32 (the bedGraph values to
within 1e-7). The file is written under a temporary name and renamed when it is complete.

    with BigWigWriter(path, {contig: length, ...}) as w:   # every contig of the genome, in the order they come
        w.add(contig, first_bin, values (n,), stride, length)
        w.flush()                                          # at each contig's end
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from genolin.io.atomic import atomic_path
from genolin.io.bedgraph import DECIMALS


class BigWigWriter:
    """One strand's bigWig. Use as a context manager: the file appears only when the block ends cleanly.

    Bins go in as fixed-step entries (span = step = stride, straight from the numpy array, no per-bin Python
    work); a contig's last bin, when shorter than the stride, as one interval ending at the contig's end."""

    def __init__(self, path: str | os.PathLike, lengths: dict[str, int]):
        self.path, self.lengths = path, lengths
        self._stack = contextlib.ExitStack()
        self.bw = None

    def __enter__(self) -> BigWigWriter:
        import pyBigWig

        tmp = self._stack.enter_context(atomic_path(self.path))
        self.bw = pyBigWig.open(str(tmp), "w")
        self.bw.addHeader([(c, int(n)) for c, n in self.lengths.items() if n > 0], maxZooms=10)
        return self

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> None:
        """Bins ``first_bin``.. of ``contig`` (``stride`` bp each; the last one ends at ``length``)."""
        values = np.round(np.asarray(values, dtype=np.float64), DECIMALS)
        start = first_bin * stride
        full = min(len(values), max(0, (length - start) // stride))  # bins that end inside the contig
        if full:
            self.bw.addEntries(contig, start, values=values[:full], span=stride, step=stride)
        if full < len(values) and start + full * stride < length:
            self.bw.addEntries([contig], [start + full * stride], ends=[length], values=[float(values[full])])

    def flush(self) -> None:
        """Nothing is held back between pieces (kept for the writer interface)."""

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.bw.close()  # writes the index and zoom levels
        finally:
            self._stack.__exit__(exc_type, exc, tb)


__all__ = ["BigWigWriter"]
