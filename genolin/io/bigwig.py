"""bigWig output (pyBigWig): the per-bin values of the bedGraph writer (rounded to the same 4 decimals), in the
binary indexed format genome browsers stream from a URL. Values are stored as float32 (the bedGraph values to
within 1e-7). The file is written under a temporary name and renamed when it is complete.

    with BigWigWriter(path, {contig: length, ...}) as w:   # every contig of the genome, in the order they come
        w.add(contig, first_bin, values (n,), stride, length)
        w.flush()                                          # at each contig's end

``BackgroundBigWigWriter`` has the same interface and runs a BigWigWriter in a child process (libBigWig takes
about 0.4 us per value with zoom levels: at GPU speeds the writing, not the model, bounds a genome's prediction;
one process per strand writes both strands at once, beside the model); pieces that continue one another go to
the child as one stretch of up to 64 k bins (each send costs the parent about 0.3 ms).
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from genolin.io.atomic import atomic_path
from genolin.io.bedgraph import DECIMALS, Stretches


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


def _serve(path: str, lengths: dict[str, int], inbox, outbox) -> None:
    """The child process: a BigWigWriter fed from ``inbox`` until ("close", commit); reports (kind, message) to
    ``outbox``: kind None when done, "input" for a file the user named that cannot be written, else "error"."""
    from genolin.errors import InputError

    try:
        with BigWigWriter(path, lengths) as w:
            while True:
                msg = inbox.get()
                if msg[0] == "add":
                    w.add(*msg[1:])
                elif msg[0] == "close":
                    if not msg[1]:
                        raise _Abandoned
                    break
        outbox.put((None, ""))
    except _Abandoned:
        outbox.put((None, ""))
    except (InputError, OSError) as exc:
        outbox.put(("input", str(exc.args[-1] if isinstance(exc, InputError) else exc.strerror or exc)))
    except BaseException as exc:  # noqa: BLE001 -- reported to the parent, which raises it
        outbox.put(("error", f"{type(exc).__name__}: {exc}"))


class _Abandoned(Exception):
    """The parent gave up: leave no file."""


class BackgroundBigWigWriter:
    """A BigWigWriter in a child process (spawned: no fork of a process holding CUDA or threads). Pieces go
    through a bounded queue, so memory stays bounded when the model outruns the writer. The file appears when
    the block ends cleanly; on an exception the child drops it."""

    def __init__(self, path: str | os.PathLike, lengths: dict[str, int], queue_pieces: int = 16,
                 batch_bins: int = 65536):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.inbox, self.outbox = ctx.Queue(queue_pieces), ctx.Queue()
        self.proc = ctx.Process(target=_serve, args=(str(path), dict(lengths), self.inbox, self.outbox),
                                daemon=True)
        self.path, self.report = path, None
        # pieces that continue one another are sent as one stretch of about batch_bins bins: a send costs the
        # parent ~0.3 ms (a window's piece of 1.5 k bins is sent in a tenth of that time per bin)
        self.stretches = Stretches(batch_bins)

    def __enter__(self) -> BackgroundBigWigWriter:
        self.proc.start()
        return self

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> None:
        """The same as BigWigWriter.add; pieces that continue the last one are gathered and sent together."""
        for stretch in self.stretches.add(contig, first_bin, values, stride, length):
            self._send(stretch)

    def flush(self) -> None:
        """A contig ends: send its last stretch."""
        stretch = self.stretches.take()
        if stretch is not None:
            self._send(stretch)

    def _send(self, stretch) -> None:
        import queue

        item = ("add", *stretch)
        while True:
            if not self.proc.is_alive() or not self.outbox.empty():  # the child stopped: say why
                self._finish()
                raise RuntimeError(f"writing {self.path}: the writer process stopped")
            try:
                self.inbox.put(item, timeout=0.5)
                return
            except queue.Full:  # the writer is behind: wait, unless it died
                continue

    def _finish(self) -> None:
        import queue

        from genolin.errors import InputError

        while self.report is None:
            try:
                self.report = self.outbox.get(timeout=0.5)
            except queue.Empty:
                if not self.proc.is_alive():
                    self.report = ("error", f"the writer process ended (exit code {self.proc.exitcode})")
        self.proc.join()
        kind, message = self.report
        if kind == "input":
            raise InputError(self.path, f"cannot write: {message}")
        if kind:
            raise RuntimeError(f"writing {self.path}: {message}")

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.flush()
            except BaseException:  # the child stopped: it drops its file; the error says why
                self._close(commit=False)
                raise
        self._close(commit=exc_type is None)

    def _close(self, commit: bool) -> None:
        if self.report is None and self.proc.is_alive():
            self.inbox.put(("close", commit))  # unbounded wait only while the child lives and reads
        if commit:
            self._finish()
        else:  # already failing: wait for the child to drop its file, keep the first error
            try:
                self._finish()
            except Exception:  # noqa: BLE001
                pass


__all__ = ["BackgroundBigWigWriter", "BigWigWriter"]
