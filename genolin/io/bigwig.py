"""bigWig output (pyBigWig): the same runs as the bedGraph writer (``genolin.io.bedgraph.Runs``), in the binary
indexed format genome browsers stream from a URL. Values are stored as float32 (the 4-decimal bedGraph values to
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
from genolin.io.bedgraph import Chunk, Runs


class BigWigWriter:
    """One strand's bigWig. Use as a context manager: the file appears only when the block ends cleanly."""

    def __init__(self, path: str | os.PathLike, lengths: dict[str, int]):
        self.path, self.lengths, self.runs = path, lengths, Runs()
        self._stack = contextlib.ExitStack()
        self.bw = None

    def __enter__(self) -> BigWigWriter:
        import pyBigWig

        tmp = self._stack.enter_context(atomic_path(self.path))
        self.bw = pyBigWig.open(str(tmp), "w")
        self.bw.addHeader([(c, int(n)) for c, n in self.lengths.items() if n > 0], maxZooms=10)
        return self

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> None:
        self._write(self.runs.add(contig, first_bin, values, stride, length))

    def flush(self) -> None:
        self._write(self.runs.flush())

    def _write(self, chunks: list[Chunk]) -> None:
        for contig, starts, ends, vals in chunks:
            keep = ends > starts
            n = int(keep.sum())
            if n:
                self.bw.addEntries([contig] * n, starts[keep].tolist(), ends=ends[keep].tolist(),
                                   values=vals[keep].astype(np.float64).tolist())

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self.flush()
            self.bw.close()  # writes the index and zoom levels
        finally:
            self._stack.__exit__(exc_type, exc, tb)


__all__ = ["BigWigWriter"]
