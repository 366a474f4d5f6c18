"""Per-bin track values as runs: bedGraph text out (``BedGraphWriter``); ``genolin.io.bigwig`` writes the same runs.

Values arrive in genome order, one piece of bins at a time (``Runs.add``); they are rounded to 4 decimals and
neighbouring bins of equal value become one run ``(start, end, value)`` (0-based, half-open), also across pieces.
bedGraph lines are ``contig<TAB>start<TAB>end<TAB>value`` under a ``track type=bedGraph`` header that IGV and the
UCSC browser read.

Formatting the lines is the costly part (about 40-90 ns per line, ``bedgraph_lines``: 100 M lines for 100 Mbp at
stride 2 and two strands). Given a process pool (``format_pool``), a writer formats stretches of bins there,
several at once; each worker writes its lines to a part file beside the output and the writer copies the parts
in, in order, inside the kernel (``os.copy_file_range``), so neither a GPU's output waits for one core's
formatting nor the text passes through the process that runs the model.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import os
import queue
import shutil
import signal
import tempfile
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
Part = tuple[str, int]  # a file of lines a worker wrote, its size in bytes
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


def _stretch_runs(contig: str, first_bin: int, values: np.ndarray, stride: int, length: int
                  ) -> tuple[Run, tuple[np.ndarray, np.ndarray, np.ndarray], Run, int]:
    """A stretch of bins -> (its first run, (starts, ends, values) of the runs between, its last run, number of
    runs)."""
    runs = Runs()
    chunks = runs.add(contig, first_bin, values, stride, length) + runs.flush()  # one contig's runs, in order
    starts, ends, vals = (np.concatenate([c[i] for c in chunks]) for i in (1, 2, 3))
    first = (contig, int(starts[0]), int(ends[0]), float(vals[0]))
    last = (contig, int(starts[-1]), int(ends[-1]), float(vals[-1]))
    return first, (starts[1:-1], ends[1:-1], vals[1:-1]), last, len(starts)


def format_bins(contig: str, first_bin: int, values: np.ndarray, stride: int, length: int
                ) -> tuple[Run, bytes, Run, int]:
    """A stretch of bins -> (its first run, the lines of the runs between, its last run, number of runs): the
    first and last run may continue into the stretches before and after (``BedGraphWriter`` joins them)."""
    first, inner, last, n = _stretch_runs(contig, first_bin, values, stride, length)
    return first, bedgraph_lines(contig, *inner), last, n


def format_bins_to(path: str, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int
                   ) -> tuple[Run, Part, Run, int]:
    """``format_bins`` with the lines written to ``path`` (in a worker: the text goes to the page cache from
    there, not through a pipe to the writing process)."""
    first, inner, last, n = _stretch_runs(contig, first_bin, values, stride, length)
    lines = _lines(contig, *inner) if len(inner[0]) else np.zeros(0, np.uint8)
    with open(path, "wb") as fh:
        fh.write(lines)
    return first, (path, len(lines)), last, n


class BedGraphWriter:
    """One strand's bedGraph, written to a binary file: pieces of bins in genome order (contig by contig). Pieces
    are gathered into stretches of ``batch_bins`` bins (a window's piece holds too few lines for the vectorised
    formatting to pay for its fixed cost); each stretch becomes runs and lines (``format_bins``), in ``pool`` when
    given (at most ``in_flight`` stretches at once; the workers write the lines to part files in a folder beside
    ``fh``, which a thread here copies into ``fh`` in order), and the runs that meet at a stretch's ends are joined
    here, in order. Use as a context manager: leaving the block cleanly writes everything (on an error it is
    dropped, part files included)."""

    def __init__(self, fh, name: str, color: str, batch_bins: int = 1 << 16, pool: Executor | None = None,
                 in_flight: int = 8):
        self.fh, self.pool, self.in_flight = fh, pool, in_flight
        self.stretches = Stretches(batch_bins)
        self.formatting: collections.deque = collections.deque()  # format_bins results (or futures), in order
        self.open: Run | None = None  # the last run written to the queue's end, which may continue
        self._out: queue.Queue = queue.Queue(16)  # bytes for the writing thread (with a pool)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._parts: str | None = None  # the folder of the workers' part files, made at the first stretch
        self._sent = 0  # stretches sent to the pool (numbers the part files)
        # the header goes out before the values, so browsers scale the view to them (most stay far below 1)
        fh.write(f'track type=bedGraph name="{name}" color={color} visibility=full autoScale=on\n'.encode())

    def __enter__(self) -> BedGraphWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        for f in self.formatting:
            if hasattr(f, "cancel") and not f.cancel():
                f.exception()  # a worker writing a part file: let it finish before its folder goes
        try:
            self._stop_thread()
        except BaseException:  # noqa: BLE001 -- already failing: keep the first error
            pass
        self._remove_parts()

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
        try:
            self._stop_thread()
        finally:
            self._remove_parts()

    def _dispatch(self, stretch: Stretch | None) -> None:
        if stretch is None:
            return
        if self.pool is None:
            self.formatting.append(format_bins(*stretch))
        else:
            if self._parts is None:
                self._make_parts()
            path = os.path.join(self._parts, f"{self._sent}.txt")
            self._sent += 1
            self.formatting.append(self.pool.submit(format_bins_to, path, *stretch))
        self._drain(self.in_flight)

    def _make_parts(self) -> None:
        """The folder of the workers' part files: beside ``fh``, else (a buffer) in the temporary folder."""
        where = getattr(self.fh, "name", None)
        beside = isinstance(where, str) and os.path.isfile(where)
        folder = os.path.dirname(os.path.abspath(where)) if beside else tempfile.gettempdir()
        base = os.path.basename(where) if beside else "bedgraph"
        while self._parts is None:
            # named before it is made: an interrupt (Ctrl-C) from here on finds it to remove (``_remove_parts``)
            self._parts = os.path.join(folder, f".{base}.{os.urandom(6).hex()}.parts.tmp")
            try:
                os.mkdir(self._parts, 0o700)
            except FileExistsError:  # another's folder: not this writer's to remove
                self._parts = None

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

    def _write(self, text: bytes | Part) -> None:
        """Bytes or a part file's lines to the file; with a pool through a thread of its own (a file write or
        copy releases the GIL, so this process goes on joining runs while the bytes go out)."""
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
                if isinstance(text, tuple):
                    self._copy_part(*text)
                else:
                    self.fh.write(text)
        except BaseException as exc:  # noqa: BLE001 -- raised in the writer's own thread by the next _write/close
            self._error = exc
            while self._out.get() is not None:  # keep taking, so the other side never blocks
                pass

    def _copy_part(self, path: str, size: int) -> None:
        """A worker's part file onto the end of ``fh``, copied by the kernel where it can (same file system),
        then removed."""
        with open(path, "rb") as src:
            copy_into(src, self.fh, size)
        os.unlink(path)

    def _remove_parts(self) -> None:
        if self._parts is not None:
            shutil.rmtree(self._parts, ignore_errors=True)
            self._parts = None

    def _stop_thread(self) -> None:
        if self._thread is not None:
            self._out.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error


def copy_into(src, fh, size: int) -> None:
    """The ``size`` bytes of ``src`` (a file opened for reading, at its start) onto the end of ``fh``: by the kernel
    where it can (``os.copy_file_range``: no pass through this process), else through a buffer."""
    try:
        dst = fh.fileno()
    except (AttributeError, io.UnsupportedOperation):  # not a file (a test's BytesIO)
        dst = None
    if dst is not None and hasattr(os, "copy_file_range"):
        fh.flush()  # what is buffered goes first; the copy writes at the descriptor's offset
        try:
            while size > 0 and (n := os.copy_file_range(src.fileno(), dst, size)) > 0:
                size -= n
        except OSError:  # no kernel copy between these files: the rest from where it stopped
            pass
    if size > 0:
        shutil.copyfileobj(src, fh, 1 << 22)


# bins (over the strands written) below which a prediction formats its lines in its own process: a pool's start and
# end (spawned interpreters importing numpy) cost about as much as formatting this many bins here
POOL_MIN_BINS = 1 << 24


def format_workers(cpus: int | None = None) -> int:
    """Processes for formatting lines beside the model: none on small machines (the model takes the cores there),
    else up to 8, leaving 3 cores to the model's process and the writers."""
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return 0 if cpus < 6 else min(8, cpus - 3)


def format_pool(workers: int | None = None, bins: int | None = None):
    """A context manager giving a process pool for ``BedGraphWriter`` (spawned: no fork of a process that holds
    CUDA or threads), or None when ``format_workers`` says none or the writers get fewer than ``POOL_MIN_BINS``
    ``bins`` (None: any number). Its workers leave Ctrl-C to this process (``sigint_blocked``)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    workers = format_workers() if workers is None else workers
    if workers < 1 or (bins is not None and bins < POOL_MIN_BINS):
        return contextlib.nullcontext(None)

    class Pool(ProcessPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):
            with sigint_blocked():  # workers are started here, as they are needed
                return super().submit(fn, *args, **kwargs)

    return Pool(workers, mp_context=mp.get_context("spawn"), initializer=ignore_sigint)


@contextlib.contextmanager
def sigint_blocked():
    """SIGINT blocked in this thread inside: a process started here begins with it blocked, so a Ctrl-C at the
    terminal (which signals every process of the job) cannot stop it before it calls ``ignore_sigint``. A Ctrl-C
    meanwhile is not lost: another thread takes it, or it arrives as the block ends."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def ignore_sigint() -> None:
    """In a child process started under ``sigint_blocked``: Ctrl-C is the parent's to handle (it stops the child
    and removes what the child wrote), so the child ignores it, then unblocks it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


_scratch = threading.local()  # per thread: reusable buffers of bedgraph_lines
SCRATCH_MAX = 1 << 28  # bytes; a larger request gets a fresh array (not kept)


def _buffer(name: str, size: int, dtype=np.uint8) -> np.ndarray:
    """A (size,) array of this thread's, reused from call to call: fresh arrays of megabytes each call cost page
    faults, which took about 40 % of formatting's time."""
    nbytes = size * np.dtype(dtype).itemsize
    if nbytes > SCRATCH_MAX:
        return np.empty(size, dtype)
    buf = getattr(_scratch, name, None)
    if buf is None or len(buf) < nbytes:
        buf = np.empty(max(nbytes, 2 * len(buf) if buf is not None else 0, 1 << 16), np.uint8)
        setattr(_scratch, name, buf)
    return buf[:nbytes].view(dtype)


@functools.cache
def _four_digits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tables of the text of 0..9999 as 4 bytes, as uint64: (left, left_full, right). ``left``: leading zeros as 0
    bytes, 0 as no text, for the left half of an 8-byte word; ``left_full``: "0042"; ``right`` (20,000 rows, shifted
    to the right half): rows 0..9999 with leading zeros, 10,000.. without (0 keeps its one digit)."""
    text = np.array([list(f"{v:04d}".encode()) for v in range(10**4)], np.uint8)
    blank = text.copy()
    for j in range(3):
        blank[np.arange(10**4) < 10 ** (3 - j), j] = 0
    full, blank = (t.view(np.uint32).ravel().astype(np.uint64) for t in (text, blank))
    left = blank.copy()
    left[0] = 0
    return left, full, np.concatenate([full, blank]) << np.uint64(32)


def _eight(v: np.ndarray, full: bool) -> np.ndarray:
    """ints (m,) in [0, 10**8) -> their 8 ASCII digits as uint64 words (byte 0 the leftmost digit), right-aligned,
    leading zeros kept (``full``) or as 0 bytes."""
    left, left_full, right = _four_digits()
    hi, lo = np.divmod(v, 10**4)
    if full:
        return left_full[hi] | right[lo]
    return left[hi] | right[lo + (hi == 0) * 10**4]


def _number_words(x: np.ndarray, k: int) -> np.ndarray:
    """Non-negative ints (m,) with fewer than 8 * k digits -> (m, k) uint64: a tab, then the number right-aligned,
    leading zeros as 0 bytes (dropped), looked up four digits at a time."""
    rest = np.asarray(x, np.int64)
    out = np.zeros((len(rest), k), np.uint64)
    for j in range(k - 1, -1, -1):  # eight digits per word, from the right
        more, low = np.divmod(rest, 10**8) if j else (np.zeros_like(rest), rest)
        word = _eight(low, False)
        wide = np.flatnonzero(more)  # numbers with digits further left: this word's leading zeros are digits
        if len(wide):
            word[wide] = _eight(low[wide], True)
        if j < k - 1:
            word[rest == 0] = 0  # no digits left for this word
        out[:, j] = word
        rest = more
    out[:, 0] |= np.uint64(ord("\t"))  # byte 0: the number has fewer than 8 * k digits
    return out


def _text_matrix(values: np.ndarray) -> np.ndarray:
    """(n,) floats -> (n, width) ASCII of ``{v:g}``, left-aligned, 0 bytes after."""
    text = [f"{v:g}".encode() for v in values.tolist()]
    out = np.zeros((len(text), max(map(len, text))), np.uint8)
    for i, t in enumerate(text):
        out[i, : len(t)] = np.frombuffer(t, np.uint8)
    return out


def _value_words(values: np.ndarray) -> np.ndarray:
    """(n,) floats -> (n, k) uint64: a tab, ``{v:g}`` and a newline, 0 bytes after, in k 8-byte words (a line
    gathers whole words, not bytes)."""
    text = _text_matrix(values)
    k = (text.shape[1] + 2 + 7) // 8
    out = np.zeros((len(values), 8 * k), np.uint8)
    out[:, 0] = ord("\t")
    out[:, 1: 1 + text.shape[1]] = text
    out[np.arange(len(values)), 1 + (text != 0).sum(1)] = ord("\n")
    return out.view(np.uint64)


@functools.cache
def _probability_words() -> np.ndarray:
    """``_value_words`` of every value i / 10**DECIMALS in [0, 1], row i (formatted once per process)."""
    return _value_words(np.arange(10**DECIMALS + 1) / 10**DECIMALS)


def _lines(contig: str, starts: np.ndarray, ends: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """``bedgraph_lines`` (n >= 1 runs) as a uint8 array.

    Each line is a row of 8-byte words: the contig name (0 bytes before it), a tab and the start right-aligned,
    a tab and the end, a tab, the value and a newline; numbers are looked up four digits at a time and values
    from a table, whole words are copied, and then the 0 bytes are dropped. Runs that meet (each start the
    previous end, as a stretch's runs do) have their boundaries formatted once."""
    n = len(starts)
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    k = (len(str(int(max(ends.max(), starts.max(), 0)))) + 1 + 7) // 8  # words of a tab and a number
    scaled = np.rint(vals * 10**DECIMALS)
    if (not np.signbit(scaled).any() and scaled.max() <= 10**DECIMALS  # -0.0 is "-0" in {v:g}
            and np.array_equal(scaled / 10**DECIMALS, vals)):
        values, inverse = _probability_words(), scaled.astype(np.intp)  # probabilities at 4 decimals
    else:
        bits, inverse = np.unique(np.asarray(vals, np.float64).view(np.int64), return_inverse=True)  # 0.0 != -0.0
        values, inverse = _value_words(bits.view(np.float64)), inverse.reshape(-1)
    name = contig.encode()
    head = np.frombuffer(bytes(-len(name) % 8) + name, np.uint64)
    h, v = len(head), values.shape[1]
    rows = _buffer("rows", n * (h + 2 * k + v), np.uint64).reshape(n, h + 2 * k + v)
    for j in range(h):  # a column at a time: a broadcast row copy is five times slower
        rows[:, j] = head[j]
    if n > 1 and np.array_equal(starts[1:], ends[:-1]):
        bounds = _number_words(np.append(starts, ends[-1]), k)
        rows[:, h: h + k], rows[:, h + k: h + 2 * k] = bounds[:-1], bounds[1:]
    else:
        rows[:, h: h + k], rows[:, h + k: h + 2 * k] = _number_words(starts, k), _number_words(ends, k)
    np.take(values, inverse, axis=0, out=rows[:, h + 2 * k:], mode="clip")
    flat = rows.view(np.uint8).reshape(-1)
    return flat[np.not_equal(flat, 0, out=_buffer("keep", len(flat), np.bool_))]


def bedgraph_lines(contig: str, starts: np.ndarray, ends: np.ndarray, vals: np.ndarray) -> bytes:
    """``contig<TAB>start<TAB>end<TAB>value`` lines (values as ``{v:g}``), built as one byte matrix (``_lines``):
    a run of a million lines in about a twentieth of the time of formatting them one by one."""
    return _lines(contig, starts, ends, vals).tobytes() if len(starts) else b""


__all__ = ["DECIMALS", "POOL_MIN_BINS", "BedGraphWriter", "Runs", "bedgraph_lines", "format_bins", "format_bins_to",
           "format_pool", "format_workers"]
