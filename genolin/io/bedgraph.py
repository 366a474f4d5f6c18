"""Per-bin track values as runs: bedGraph text out (``BedGraphWriter``); ``genolin.io.bigwig`` writes the same runs.

Values arrive in genome order, one piece of bins at a time (``Runs.add``); they are rounded to 4 decimals and
neighbouring bins of equal value become one run ``(start, end, value)`` (0-based, half-open), also across pieces.
bedGraph lines are ``contig<TAB>start<TAB>end<TAB>value`` under a ``track type=bedGraph`` header that IGV and the
UCSC browser read.

Formatting the lines is the costly part (about 0.1-0.3 us per line: 100 M lines for 100 Mbp at stride 2 and two
strands). Given a process pool (``format_pool``), a writer formats stretches of bins there, several at once, and
writes the results in order, so a GPU's output is not held back by one core's formatting.
"""

from __future__ import annotations

import collections
import functools
import os
import queue
import threading
from concurrent.futures import Executor

import numpy as np

DECIMALS = 4

Chunk = tuple[str, np.ndarray, np.ndarray, np.ndarray]  # contig, starts (n,) int64, ends (n,) int64, values (n,)


class Runs:
    """Merges pieces of per-bin values into runs of equal rounded values; a run stays open until it ends."""

    def __init__(self):
        self.open: list | None = None  # [contig, start, end, value] of the run that may continue

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> list[Chunk]:
        """Bins ``first_bin``.. of ``contig`` (``stride`` bp each; the last one ends at ``length``) -> the runs
        that are now complete."""
        values = np.round(np.asarray(values, dtype=np.float64), DECIMALS)
        if not len(values):
            return []
        cut = np.flatnonzero(values[1:] != values[:-1]) + 1  # bins where a new run begins inside this piece
        first = np.concatenate([[0], cut])
        starts = (first_bin + first).astype(np.int64) * stride
        ends = np.minimum((first_bin + np.concatenate([cut, [len(values)]])).astype(np.int64) * stride, length)
        vals = values[first]
        out: list[Chunk] = []
        r = self.open
        if r is not None and r[0] == contig and r[2] == starts[0] and r[3] == vals[0]:
            starts[0] = r[1]  # the open run continues into this piece
        elif r is not None:
            out.append((r[0], np.array([r[1]], np.int64), np.array([r[2]], np.int64), np.array([r[3]])))
        self.open = [contig, int(starts[-1]), int(ends[-1]), float(vals[-1])]
        if len(starts) > 1:
            out.append((contig, starts[:-1], ends[:-1], vals[:-1]))
        return out

    def flush(self) -> list[Chunk]:
        """The open run, closed (at a contig's end)."""
        r, self.open = self.open, None
        return [] if r is None else [(r[0], np.array([r[1]], np.int64), np.array([r[2]], np.int64), np.array([r[3]]))]


Run = tuple[str, int, int, float]  # contig, start, end, value
Stretch = tuple[str, int, np.ndarray, int, int]  # contig, first bin, values (n,) float32, stride, length


class Stretches:
    """Gathers pieces of bins that continue one another (same contig, stride and length, each starting where the
    last ended) into stretches of about ``batch_bins`` bins: the track writers' unit of work (a window's piece
    is too small to pay for a vectorised formatting or a send to another process)."""

    def __init__(self, batch_bins: int):
        self.batch_bins = batch_bins
        self.key: tuple[str, int, int, int] | None = None  # (contig, first bin, stride, length) being gathered
        self.parts: list[np.ndarray] = []
        self.bins = 0

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> list[Stretch]:
        """A piece -> the stretches it completes (the one it does not continue, the one it fills)."""
        if not len(values):
            return []
        done = []
        if self.key is not None and (self.key[0] != contig or self.key[1] + self.bins != first_bin
                                     or self.key[2:] != (stride, length)):
            done.append(self.take())
        if self.key is None:
            self.key = (contig, int(first_bin), stride, length)
        self.parts.append(np.asarray(values, dtype=np.float32))
        self.bins += len(values)
        if self.bins >= self.batch_bins:
            done.append(self.take())
        return done

    def take(self) -> Stretch | None:
        """The stretch gathered so far (None if none), emptied."""
        if self.key is None:
            return None
        (contig, first_bin, stride, length), parts = self.key, self.parts
        self.key, self.parts, self.bins = None, [], 0
        return contig, first_bin, np.concatenate(parts) if len(parts) > 1 else parts[0], stride, length


def format_bins(contig: str, first_bin: int, values: np.ndarray, stride: int, length: int
                ) -> tuple[Run, bytes, Run, int]:
    """A stretch of bins -> (its first run, the lines of the runs between, its last run, number of runs): the
    first and last run may continue into the stretches before and after (``BedGraphWriter`` joins them)."""
    runs = Runs()
    chunks = runs.add(contig, first_bin, values, stride, length) + runs.flush()  # one contig's runs, in order
    starts, ends, vals = (np.concatenate([c[i] for c in chunks]) for i in (1, 2, 3))
    first = (contig, int(starts[0]), int(ends[0]), float(vals[0]))
    last = (contig, int(starts[-1]), int(ends[-1]), float(vals[-1]))
    return first, bedgraph_lines(contig, starts[1:-1], ends[1:-1], vals[1:-1]), last, len(starts)


class BedGraphWriter:
    """One strand's bedGraph, written to a binary file: pieces of bins in genome order (contig by contig). Pieces
    are gathered into stretches of ``batch_bins`` bins (a window's piece holds too few lines for the vectorised
    formatting to pay for its fixed cost); each stretch becomes runs and lines (``format_bins``), in ``pool`` when
    given (at most ``in_flight`` stretches at once), and the runs that meet at a stretch's ends are joined here, in
    order. Use as a context manager: leaving the block cleanly writes everything (on an error it is dropped)."""

    def __init__(self, fh, name: str | None, color: str, batch_bins: int = 1 << 16, pool: Executor | None = None,
                 in_flight: int = 8):
        """``name`` None: no track line (a part that goes after a file that has one)."""
        self.fh, self.pool, self.in_flight = fh, pool, in_flight
        self.stretches = Stretches(batch_bins)
        self.formatting: collections.deque = collections.deque()  # format_bins results (or futures), in order
        self.open: Run | None = None  # the last run written to the queue's end, which may continue
        self._out: queue.Queue = queue.Queue(16)  # bytes for the writing thread (with a pool)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        if name is not None:
            fh.write(f'track type=bedGraph name="{name}" color={color} visibility=full autoScale=off '
                     f"viewLimits=0:1\n".encode())

    def __enter__(self) -> BedGraphWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        for f in self.formatting:
            if hasattr(f, "cancel"):
                f.cancel()
        try:
            self._stop_thread()
        except BaseException:  # noqa: BLE001 -- already failing: keep the first error
            pass

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> None:
        """Bins ``first_bin``.. of ``contig`` (``stride`` bp each; the last one ends at ``length``)."""
        for stretch in self.stretches.add(contig, first_bin, values, stride, length):
            self._dispatch(stretch)

    def flush(self) -> None:
        """A contig ends: its last stretch goes to formatting (written by ``close`` at the latest)."""
        self._dispatch(self.stretches.take())

    def close(self) -> None:
        """Write everything still gathered or being formatted, and the last run."""
        self._dispatch(self.stretches.take())
        self._drain(0)
        self._emit(self.open)
        self.open = None
        self._stop_thread()

    def append(self, path: str | os.PathLike) -> None:
        """After everything added so far, the bytes of ``path``: a part of the same track from later contigs,
        written without a track line (torchrun ranks' parts)."""
        import shutil

        self.close()
        with open(path, "rb") as src:
            shutil.copyfileobj(src, self.fh, 1 << 24)

    def _dispatch(self, stretch: Stretch | None) -> None:
        if stretch is None:
            return
        self.formatting.append(format_bins(*stretch) if self.pool is None else self.pool.submit(format_bins, *stretch))
        self._drain(self.in_flight)

    def _drain(self, keep: int) -> None:
        """Write finished results in order until at most ``keep`` are pending (and none at the front is done)."""
        q = self.formatting
        while q and (len(q) > keep or not hasattr(q[0], "result") or q[0].done()):
            item = q.popleft()
            first, lines, last, n = item.result() if hasattr(item, "result") else item
            o = self.open
            if o is not None and o[0] == first[0] and o[2] == first[1] and o[3] == first[3]:
                first = (o[0], o[1], first[2], o[3])  # the open run continues
            else:
                self._emit(o)
            if n == 1:
                self.open = first
            else:
                self._emit(first)
                self._write(lines)
                self.open = last

    def _emit(self, run: Run | None) -> None:
        if run is not None:  # the text bedgraph_lines gives (values as {v:g})
            self._write(f"{run[0]}\t{run[1]}\t{run[2]}\t{run[3]:g}\n".encode())

    def _write(self, text: bytes) -> None:
        """To the file; with a pool through a thread of its own (a file write releases the GIL, so this process
        goes on joining runs while the bytes go out)."""
        if self.pool is None:
            self.fh.write(text)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._writing, daemon=True)
            self._thread.start()
        while True:
            if self._error is not None:
                raise self._error
            try:
                self._out.put(text, timeout=0.5)
                return
            except queue.Full:
                continue

    def _writing(self) -> None:
        try:
            while (text := self._out.get()) is not None:
                self.fh.write(text)
        except BaseException as exc:  # noqa: BLE001 -- raised in the writer's own thread by the next _write/close
            self._error = exc
            while self._out.get() is not None:  # keep taking, so the other side never blocks
                pass

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._out.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error


def format_workers(cpus: int | None = None) -> int:
    """Processes for formatting lines beside the model: none on small machines (the model takes the cores there),
    else up to 8, leaving 3 cores to the model's process and the writers."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 0 if cpus < 6 else min(8, cpus - 3)


def format_pool(workers: int | None = None):
    """A context manager giving a process pool for ``BedGraphWriter`` (spawned: no fork of a process that holds
    CUDA or threads), or None when ``format_workers`` says none."""
    import contextlib
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    workers = format_workers() if workers is None else workers
    if workers < 1:
        return contextlib.nullcontext(None)
    return ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"))


def _digits(a: np.ndarray, width: int) -> np.ndarray:
    """Non-negative ints (n,) -> (n, width) ASCII digits, right-aligned; leading zeros are 0 bytes (dropped)."""
    rest = a.astype(np.uint32 if width <= 9 else np.uint64)
    out = np.empty((len(a), width), np.uint8)
    for j in range(width - 1, -1, -1):
        out[:, j] = rest % 10
        rest //= 10
    out += ord("0")
    for j in range(width - 1):  # the number has no digit there ("0" keeps its one)
        out[a < 10 ** (width - 1 - j), j] = 0
    return out


def _text_matrix(values: np.ndarray) -> np.ndarray:
    """(n,) floats -> (n, width) ASCII of ``{v:g}``, left-aligned, 0 bytes after."""
    text = [f"{v:g}".encode() for v in values.tolist()]
    out = np.zeros((len(text), max(map(len, text))), np.uint8)
    for i, t in enumerate(text):
        out[i, : len(t)] = np.frombuffer(t, np.uint8)
    return out


@functools.cache
def _probability_text() -> np.ndarray:
    """The text of every value i / 10**DECIMALS in [0, 1], row i (formatted once per process)."""
    return _text_matrix(np.arange(10**DECIMALS + 1) / 10**DECIMALS)


def bedgraph_lines(contig: str, starts: np.ndarray, ends: np.ndarray, vals: np.ndarray) -> bytes:
    """``contig<TAB>start<TAB>end<TAB>value`` lines (values as ``{v:g}``), built as one byte matrix: a run of
    a million lines in about a tenth of the time of formatting them one by one."""
    if not len(starts):
        return b""
    width = len(str(int(max(ends.max(), starts.max(), 0))))
    scaled = np.rint(vals * 10**DECIMALS)
    if scaled.min() >= 0 and scaled.max() <= 10**DECIMALS and np.array_equal(scaled / 10**DECIMALS, vals):
        value_bytes, inverse = _probability_text(), scaled.astype(np.intp)  # probabilities at 4 decimals
    else:
        table, inverse = np.unique(vals, return_inverse=True)
        value_bytes = _text_matrix(table)
    n = len(starts)
    tab = np.full((n, 1), ord("\t"), np.uint8)
    head = np.broadcast_to(np.frombuffer(contig.encode() + b"\t", np.uint8), (n, len(contig.encode()) + 1))
    rows = np.concatenate([head, _digits(np.asarray(starts, np.int64), width), tab,
                           _digits(np.asarray(ends, np.int64), width), tab, value_bytes[inverse.reshape(-1)],
                           np.full((n, 1), ord("\n"), np.uint8)], axis=1).ravel()
    return rows[rows != 0].tobytes()


__all__ = ["DECIMALS", "BedGraphWriter", "Runs", "bedgraph_lines", "format_bins", "format_pool", "format_workers"]
