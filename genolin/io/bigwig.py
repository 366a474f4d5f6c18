"""bigWig output: the per-bin values of the bedGraph writer (rounded to the same 4 decimals), in the binary
indexed format genome browsers stream from a URL (UCSC's bbi format, version 4). Values are stored as float32 (the
bedGraph values to within 1e-7). The file is written under a temporary name and renamed when it is complete.

    with BigWigWriter(path, {contig: length, ...}) as w:   # every contig of the genome, in the order they come
        w.add(contig, first_bin, values (n,), stride, length)
        w.flush()                                          # at each contig's end

The writer is our own, numpy and zlib: libBigWig (pyBigWig) took about 0.4 us per value, most of it building the
zoom levels at close by reading every value back once per level; here each value passes through numpy once, the
finest zoom level is summed as the values come and each coarser one from the one below, and blocks are compressed
on a few threads (zlib releases the GIL). pyBigWig reads the files (the tests hold every value against it).

Why not a library's writer: pybigtools, fed the same pieces, wrote at about a tenth of this writer's speed, so a
whole prediction with it stays far below the 0.9x that would justify dropping this code (docs/benchmarks.md,
"bigWig writing").

File layout (little-endian): header (64 bytes); zoom headers (ZOOM_HEADERS x 24, the unused ones zero); total
summary (40); chromosome B+ tree; full data (block count u64, then zlib blocks of up to ITEMS_PER_BLOCK fixed-step
values, a contig's short last bin as a one-item bedGraph block); its R tree; per zoom level: record count (u32),
zlib blocks of up to ZOOM_RECORDS_PER_BLOCK summaries (chrom id, start, end, bases, min, max, sum, sum of
squares), its R tree; the magic number again.

``BackgroundBigWigWriter`` has the same interface and runs a BigWigWriter in a child process (one process per
strand writes both strands at once, beside the model); pieces that continue one another go to the child as one
stretch of up to 64 k bins (each send costs the parent about 0.3 ms).
"""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from genolin.io.atomic import WRITTEN, atomic_path
from genolin.io.bedgraph import DECIMALS, Stretches, ignore_sigint, sigint_blocked

BIGWIG_MAGIC, BPT_MAGIC, RTREE_MAGIC = 0x888FFC26, 0x78CA8C91, 0x2468ACE0
# values per data block: 16 kB uncompressed (UCSC's 1,024 took 0.45 s for what 4,096 write in 0.35: per-block work)
ITEMS_PER_BLOCK = 4096
ZOOM_RECORDS_PER_BLOCK = 1000  # zoom summaries per block: 32 kB uncompressed
UNCOMPRESSED_MAX = 32_768  # the header's uncompressBufSize: every block is at most this long before compression
RTREE_BLOCK, BPT_BLOCK = 256, 256  # children per R-tree / B+ tree node (UCSC's defaults)
ZOOM_HEADERS = 10  # zoom levels at most (space reserved after the header)
ZOOM_FIRST_BINS, ZOOM_FACTOR = 16, 4  # the finest zoom level sums 16 bins (64 bp at stride 4), each next one 4 x more
COMPRESS_LEVEL = 1  # zlib level: level 6 made blocks 2-3 % smaller and took up to 15 % longer (2 cores)
COMPRESS_THREADS = 4
COMPRESS_BATCH = 64  # blocks compressed together (one map over the threads)
ZOOM_RECORD = np.dtype([("chrom", "<u4"), ("start", "<u4"), ("end", "<u4"), ("bases", "<u4"), ("min", "<f4"),
                        ("max", "<f4"), ("sum", "<f4"), ("sumsq", "<f4")])


class _Zoom:
    """The finest zoom level of one contig, summed as values come: per record of ``size`` bp, the bases covered,
    their min, max, sum and sum of squares (float64 until written)."""

    def __init__(self, length: int, size: int):
        n = -(-length // size)
        self.size = size
        self.bases = np.zeros(n, np.int64)
        self.sum, self.sumsq = np.zeros(n), np.zeros(n)
        self.min, self.max = np.full(n, np.inf), np.full(n, -np.inf)

    def add(self, starts: np.ndarray, spans: np.ndarray, values: np.ndarray) -> None:
        """Bins starting at ``starts`` (sorted, each inside one record), ``spans`` bp long."""
        rec = starts // self.size
        first = np.flatnonzero(np.r_[True, rec[1:] != rec[:-1]])  # where each record's bins begin
        rec = rec[first]
        v = values.astype(np.float64)
        self.bases[rec] += np.add.reduceat(spans, first)
        self.sum[rec] += np.add.reduceat(v * spans, first)
        self.sumsq[rec] += np.add.reduceat(v * v * spans, first)
        self.min[rec] = np.minimum(self.min[rec], np.minimum.reduceat(v, first))
        self.max[rec] = np.maximum(self.max[rec], np.maximum.reduceat(v, first))

    def coarser(self) -> _Zoom:
        """The next level: ZOOM_FACTOR records of this one each."""
        up = _Zoom.__new__(_Zoom)
        up.size = self.size * ZOOM_FACTOR
        pad = -len(self.bases) % ZOOM_FACTOR

        def folded(a, fill, op):
            return op(np.r_[a, np.full(pad, fill, a.dtype)].reshape(-1, ZOOM_FACTOR), axis=1)

        up.bases, up.sum, up.sumsq = (folded(a, 0, np.sum) for a in (self.bases, self.sum, self.sumsq))
        up.min, up.max = folded(self.min, np.inf, np.min), folded(self.max, -np.inf, np.max)
        return up

    def records(self, chrom_id: int, length: int) -> np.ndarray:
        """The records that cover any base, as ZOOM_RECORD rows."""
        idx = np.flatnonzero(self.bases)
        out = np.empty(len(idx), ZOOM_RECORD)
        out["chrom"], out["start"] = chrom_id, idx * self.size
        out["end"] = np.minimum((idx + 1) * self.size, length)
        out["bases"], out["min"], out["max"] = self.bases[idx], self.min[idx], self.max[idx]
        out["sum"], out["sumsq"] = self.sum[idx], self.sumsq[idx]
        return out


def _rtree(items: list[tuple[int, int, int, int, int, int]], offset: int, end_offset: int,
           items_per_slot: int) -> bytes:
    """An R tree (UCSC's cirTree) over blocks sorted by (chrom, start): ``items`` (chrom, start, chrom, end, file
    offset, size); the tree starts at file ``offset``; ``end_offset``: where the indexed data end. Leaves hold up to
    RTREE_BLOCK blocks, each node above up to RTREE_BLOCK nodes; nodes are written root first, level by level."""
    levels = [[items[i:i + RTREE_BLOCK] for i in range(0, len(items), RTREE_BLOCK)] or [[]]]
    while len(levels[-1]) > 1:  # a node above: each child's (first start, last end)
        bounds = [(n[0][0], n[0][1], n[-1][2], n[-1][3]) for n in levels[-1]]
        levels.append([bounds[i:i + RTREE_BLOCK] for i in range(0, len(bounds), RTREE_BLOCK)])
    levels.reverse()  # root first
    first = items[0] if items else (0, 0, 0, 0)
    last = items[-1] if items else (0, 0, 0, 0)
    out = [struct.pack("<IIQIIIIQII", RTREE_MAGIC, RTREE_BLOCK, len(items), first[0], first[1], last[2], last[3],
                       end_offset, items_per_slot, 0)]
    at = offset + 48
    starts = []  # each level's first node offset, and its nodes' sizes
    for depth, nodes in enumerate(levels):
        leaf = depth == len(levels) - 1
        sizes = [4 + (32 if leaf else 24) * len(n) for n in nodes]
        starts.append((at, sizes))
        at += sum(sizes)
    for depth, nodes in enumerate(levels):
        leaf = depth == len(levels) - 1
        if not leaf:  # children: the next level's nodes, in order
            child_at, child_sizes = starts[depth + 1]
            child_offsets = np.concatenate([[child_at], child_at + np.cumsum(child_sizes)[:-1]]).tolist()
        k = 0
        for node in nodes:
            out.append(struct.pack("<BBH", int(leaf), 0, len(node)))
            for item in node:
                if leaf:
                    out.append(struct.pack("<IIIIQQ", *item))
                else:
                    out.append(struct.pack("<IIIIQ", *item, child_offsets[k]))
                    k += 1
    return b"".join(out)


def _bptree(names: list[str], lengths: list[int], offset: int) -> bytes:
    """The chromosome B+ tree (UCSC's bPlusTree) starting at file ``offset``: keys the names sorted bytewise, values
    (id, length), the ids in the order given. Every node has BPT_BLOCK slots (at most), unused ones zero; root
    first, level by level; a node's children by their file offsets."""
    keys = [n.encode() for n in names]
    if not keys:  # no contigs: a tree of one empty leaf
        return struct.pack("<IIIIQQ", BPT_MAGIC, 1, 1, 8, 0, 0) + struct.pack("<BBH", 1, 0, 0) + b"\0" * 9
    key_size = max(len(k) for k in keys)
    block = max(1, min(BPT_BLOCK, len(keys)))
    order = sorted(range(len(keys)), key=lambda i: keys[i])
    slot = key_size + 8
    node_size = 4 + block * slot
    leaves = [order[i:i + block] for i in range(0, len(order), block)]
    levels = [[[(keys[i], struct.pack("<II", i, lengths[i])) for i in leaf] for leaf in leaves]]
    while len(levels[-1]) > 1:
        firsts = [node[0][0] for node in levels[-1]]
        levels.append([list(range(i, min(i + block, len(firsts)))) for i in range(0, len(firsts), block)])
        levels[-1] = [[(firsts[j], j) for j in node] for node in levels[-1]]
    levels.reverse()
    out = [struct.pack("<IIIIQQ", BPT_MAGIC, block, key_size, 8, len(keys), 0)]
    level_start, at = [], offset + 32
    for nodes in levels:
        level_start.append(at)
        at += node_size * len(nodes)
    for depth, nodes in enumerate(levels):
        leaf = depth == len(levels) - 1
        for node in nodes:
            body = [struct.pack("<BBH", int(leaf), 0, len(node))]
            for key, value in node:
                child = value if leaf else struct.pack("<Q", level_start[depth + 1] + node_size * value)
                body.append(key.ljust(key_size, b"\0") + child)
            body.append(b"\0" * (slot * (block - len(node))))
            out.append(b"".join(body))
    return b"".join(out)


class BigWigWriter:
    """One strand's bigWig. Use as a context manager: the file appears only when the block ends cleanly.

    Bins go in as fixed-step values (span = step = stride), in blocks of ITEMS_PER_BLOCK; a contig's last bin, when
    shorter than the stride, as a one-item interval ending at the contig's end. Contigs come in the order of
    ``lengths``, each contig's bins in order."""

    def __init__(self, path: str | os.PathLike, lengths: dict[str, int]):
        self.path = path
        self.names = [c for c, n in lengths.items() if n > 0]
        self.lengths = {c: int(lengths[c]) for c in self.names}
        self.ids = {c: i for i, c in enumerate(self.names)}
        self._stack = contextlib.ExitStack()
        self.file = None
        self.stride: int | None = None
        self.run: tuple[str, int] | None = None  # (contig, next bin) of the values held back
        self.held: list[np.ndarray] = []  # float32 values of the run not yet in a block
        self.pending: list[tuple[int, int, int, int, bytes]] = []  # (chrom, start, chrom, end, uncompressed block)
        self.index: list[tuple[int, int, int, int, int, int]] = []
        # the finest zoom level of the contig being written; each finished contig's records of every level go to a
        # temporary file per level (a human genome's finest level is 1.5 GB: only one contig's is held)
        self.zoom: tuple[str, _Zoom] | None = None
        self.sizes: list[int] = []  # the zoom levels' record sizes, once the stride is known
        self.spills: list = []
        self.bases, self.total = 0, [np.inf, -np.inf, 0.0, 0.0]  # bases covered; min, max, sum, sum of squares
        self.last: tuple[int, int] = (-1, -1)  # (chrom id, end) of the last bin added: they must come in order

    def __enter__(self) -> BigWigWriter:
        try:
            tmp = self._stack.enter_context(atomic_path(self.path))
            self.file = self._stack.enter_context(open(tmp, "wb"))
            self.pool = self._stack.enter_context(ThreadPoolExecutor(COMPRESS_THREADS))
            self.file.write(b"\0" * (64 + 24 * ZOOM_HEADERS))
            self.summary_offset = self.file.tell()  # where kent's writer puts it (readers fetch it with the header)
            self.file.write(b"\0" * 40)
            self.tree_offset = self.file.tell()
            self.file.write(_bptree(self.names, [self.lengths[c] for c in self.names], self.tree_offset))
            self.data_offset = self.file.tell()
            self.file.write(b"\0" * 8)  # the block count
        except BaseException as failed:  # no __exit__ follows a failed __enter__: the temporary file goes here
            self._stack.__exit__(type(failed), failed, failed.__traceback__)
            raise
        return self

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> None:
        """Bins ``first_bin``.. of ``contig`` (``stride`` bp each; the last one ends at ``length``)."""
        if not len(values):
            return
        if self.stride is None:
            self.stride = stride
            size, longest = ZOOM_FIRST_BINS * stride, max(self.lengths.values())
            while len(self.sizes) < ZOOM_HEADERS:
                self.sizes.append(size)
                if size >= longest:  # one record per contig: no coarser level helps
                    break
                size *= ZOOM_FACTOR
            folder = os.path.dirname(os.path.abspath(self.file.name))
            self.spills = [self._stack.enter_context(tempfile.TemporaryFile(dir=folder)) for _ in self.sizes]
        elif stride != self.stride:
            raise ValueError(f"one bigWig holds one stride ({self.stride}), not {stride}")
        values = np.round(np.asarray(values, dtype=np.float64), DECIMALS).astype(np.float32)
        start = first_bin * stride
        chrom = self.ids[contig]
        if (chrom, start) < self.last:
            raise ValueError(f"bigWig bins must come in genome order: {contig}:{start} after an earlier bin")
        full = min(len(values), max(0, (length - start) // stride))  # bins that end inside the contig
        if self.zoom is None or self.zoom[0] != contig:
            self._spill_zoom()
            self.zoom = (contig, _Zoom(length, self.sizes[0]))
        zoom = self.zoom[1]
        if full:
            if self.run != (contig, first_bin):
                self._end_run()
                self.run = (contig, first_bin)
            self.held.append(values[:full])
            self.run = (contig, first_bin + full)
            self._blocks(final=False)
            zoom.add(start + stride * np.arange(full, dtype=np.int64), np.full(full, stride, np.int64), values[:full])
            self.last = (chrom, start + full * stride)
        if full < len(values) and start + full * stride < length:  # the contig's short last bin
            self._end_run()
            a = start + full * stride
            self.pending.append((chrom, a, chrom, length, struct.pack("<IIIIIBBHIIf", chrom, a, length, 0, 0, 1, 0,
                                                                      1, a, length, values[full])))
            zoom.add(np.array([a]), np.array([length - a]), values[full:full + 1])
            self.last = (chrom, length)
        if len(self.pending) >= COMPRESS_BATCH:
            self._write_pending()

    def _blocks(self, final: bool) -> None:
        """Held values of the run into blocks of ITEMS_PER_BLOCK (with ``final``, the rest as a shorter one)."""
        if not self.held:
            return
        held = np.concatenate(self.held)
        contig, end_bin = self.run
        chrom, s = self.ids[contig], self.stride
        first_bin = end_bin - len(held)
        cut = len(held) if final else len(held) - len(held) % ITEMS_PER_BLOCK
        for i in range(0, cut, ITEMS_PER_BLOCK):
            part = held[i:min(i + ITEMS_PER_BLOCK, cut)]
            a = (first_bin + i) * s
            e = a + len(part) * s
            self.pending.append((chrom, a, chrom, e, struct.pack("<IIIIIBBH", chrom, a, e, s, s, 3, 0, len(part))
                                 + part.tobytes()))
        self.held = [held[cut:]] if cut < len(held) else []

    def _end_run(self) -> None:
        if self.run is not None:
            self._blocks(final=True)
        self.run, self.held = None, []

    def _write_pending(self) -> None:
        self._write_blocks(self.pending, self.index)
        self.pending = []

    def _write_blocks(self, blocks: list[tuple[int, int, int, int, bytes]], index: list) -> None:
        """Blocks (first chrom, start, last chrom, end, uncompressed bytes) compressed on the pool and appended to
        the file, each one's R-tree item (chrom, start, chrom, end, offset, size) to ``index``."""
        for (c0, a, c1, e, _), data in zip(blocks, self.pool.map(lambda b: zlib.compress(b[4], COMPRESS_LEVEL),
                                                                 blocks), strict=True):
            index.append((c0, a, c1, e, self.file.tell(), len(data)))
            self.file.write(data)

    def flush(self) -> None:
        """A contig ends: its held values go into blocks."""
        self._end_run()

    def _spill_zoom(self) -> None:
        """The finished contig's zoom records, every level, appended to the levels' temporary files."""
        if self.zoom is None:
            return
        contig, z = self.zoom
        self.zoom = None
        self.bases += int(z.bases.sum())
        t = self.total
        self.total = [min(t[0], z.min.min()), max(t[1], z.max.max()), t[2] + z.sum.sum(), t[3] + z.sumsq.sum()]
        for i, spill in enumerate(self.spills):
            if i:
                z = z.coarser()
            spill.write(z.records(self.ids[contig], self.lengths[contig]).tobytes())

    def _finish(self) -> None:
        f = self.file
        self._end_run()
        self._write_pending()
        self._spill_zoom()
        index_offset = f.tell()
        f.write(_rtree(self.index, index_offset, index_offset, 1))
        levels = [(size, *self._zoom_level(spill)) for size, spill in zip(self.sizes, self.spills, strict=True)]
        bases, total = self.bases, self.total
        f.write(struct.pack("<I", BIGWIG_MAGIC))
        f.seek(0)
        f.write(struct.pack("<IHHQQQHHQQIQ", BIGWIG_MAGIC, 4, len(levels), self.tree_offset, self.data_offset,
                            index_offset, 0, 0, 0, self.summary_offset, UNCOMPRESSED_MAX, 0))
        for size, data_at, index_at in levels:
            f.write(struct.pack("<IIQQ", size, 0, data_at, index_at))
        f.seek(self.summary_offset)
        if bases == 0:
            total = [0.0, 0.0, 0.0, 0.0]
        f.write(struct.pack("<Qdddd", bases, *map(float, total)))
        f.seek(self.data_offset)
        f.write(struct.pack("<Q", len(self.index)))

    def _zoom_level(self, spill) -> tuple[int, int]:
        """One zoom level's records, read back from its temporary file, written (record count, blocks, R tree) at
        the end of the file: (data offset, index offset)."""
        f = self.file
        data_at = f.tell()
        f.write(b"\0" * 4)
        index, records_written = [], 0
        spill.seek(0)
        while True:  # COMPRESS_BATCH blocks at a time
            records = np.frombuffer(spill.read(ZOOM_RECORD.itemsize * ZOOM_RECORDS_PER_BLOCK * COMPRESS_BATCH),
                                    ZOOM_RECORD)
            if not len(records):
                break
            records_written += len(records)
            chunks = [records[i:i + ZOOM_RECORDS_PER_BLOCK] for i in range(0, len(records), ZOOM_RECORDS_PER_BLOCK)]
            self._write_blocks([(int(c["chrom"][0]), int(c["start"][0]), int(c["chrom"][-1]), int(c["end"][-1]),
                                 c.tobytes()) for c in chunks], index)
        index_at = f.tell()
        f.seek(data_at)
        f.write(struct.pack("<I", records_written))  # kent's zoomCount: the level's records
        f.seek(index_at)
        f.write(_rtree(index, index_at, index_at, ZOOM_RECORDS_PER_BLOCK))
        return data_at, index_at

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self._finish()
            except BaseException as failed:  # the temporary file is dropped, not renamed
                self._stack.__exit__(type(failed), failed, failed.__traceback__)
                raise
        self._stack.__exit__(exc_type, exc, tb)


def _serve(path: str, lengths: dict[str, int], conn) -> None:
    """The child process: a BigWigWriter fed from ``conn`` until ("close", commit); then sends one report (kind,
    message) back: kind None when its file was written, "abandoned" when it was dropped (the parent gave up),
    "input" for a file the user named that cannot be written, else "error"."""
    from genolin.errors import InputError

    ignore_sigint()  # the parent's to handle: it closes this writer without committing
    # SIGTERM (multiprocessing's end of a parent that exits without closing the writer): leave no file
    signal.signal(signal.SIGTERM, _abandon)
    try:
        try:
            with BigWigWriter(path, lengths) as w:
                while True:
                    try:
                        msg = conn.recv()
                    except (EOFError, OSError):  # the parent ended without a word: no writer is left, nor its file
                        raise _Abandoned from None
                    if msg[0] == "add":
                        w.add(*msg[1:])
                    elif msg[0] == "close":
                        if not msg[1]:
                            raise _Abandoned
                        break
            report = (None, "")
        except _Abandoned:
            report = _abandoned_report()
        except (InputError, OSError) as exc:
            report = ("input", str(exc.args[-1] if isinstance(exc, InputError) else exc.strerror or exc))
        except BaseException as exc:  # noqa: BLE001 -- reported to the parent, which raises it
            report = ("error", f"{type(exc).__name__}: {exc}")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the file is settled: the report goes whole
    except _Abandoned:  # the SIGTERM came as a report was made (``_abandon`` raises once)
        report = _abandoned_report()
    with contextlib.suppress(OSError):  # a parent that is gone reads no report
        conn.send(report)


def _abandoned_report() -> tuple[str | None, str]:
    """The child's report when the parent gave up: a file already renamed into place (stopped as it was) was
    written all the same."""
    return (None, "") if WRITTEN else ("abandoned", "the writer process was stopped")


class _Abandoned(Exception):
    """The parent gave up: leave no file."""


def _abandon(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: what follows (the report) is not cut short
    raise _Abandoned


class BackgroundBigWigWriter:
    """A BigWigWriter in a child process (spawned: no fork of a process holding CUDA or threads). Stretches wait
    in a bounded queue for a sender thread that pickles them down a pipe, so the model goes on while they are sent
    and memory stays bounded when it outruns the writer. The file appears when the block ends cleanly; on an
    exception the child drops it.

    A plain pipe, not a ``multiprocessing.Queue``: a Queue's locks are named semaphores that the resource tracker
    process tracks, and a Ctrl-C at the terminal could leave it one to clean up after this process's exit, printing
    a warning below the interrupt's line. Nothing here is tracked."""

    def __init__(self, path: str | os.PathLike, lengths: dict[str, int], queue_pieces: int = 16,
                 batch_bins: int = 65536):
        import multiprocessing as mp
        import queue
        import threading

        ctx = mp.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()  # both ways: stretches to the child, its one report back
        self.proc = ctx.Process(target=_serve, args=(str(path), dict(lengths), child_conn), daemon=True)
        self.child_conn = child_conn  # closed here once the child holds it: a child that ends closes the pipe
        self.pending = queue.Queue(queue_pieces)  # ("add", ...) and ("close", commit) items for the sender
        self.sender = threading.Thread(target=self._send_all, name=f"bigwig sender {Path(path).name}",
                                       daemon=True)
        self.path, self.report, self.send_error = path, None, None
        # pieces that continue one another are sent as one stretch of about batch_bins bins: a send costs the
        # parent ~0.3 ms (a window's piece of 1.5 k bins is sent in a tenth of that time per bin)
        self.stretches = Stretches(batch_bins)

    def __enter__(self) -> BackgroundBigWigWriter:
        try:
            with sigint_blocked():  # a Ctrl-C is this process's to handle (the child ignores it: ``_serve``)
                self.sender.start()
                self.proc.start()
        except BaseException:
            if self.proc.pid is not None:  # started: it drops its file and ends
                self._close(commit=False)
            else:
                self._end_sender()
            raise
        finally:
            self.child_conn.close()
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

    def _send_all(self) -> None:
        """The sender thread: pending items down the pipe in order, until ("close", ...), None (``_end_sender``)
        or a child that is gone (``_send`` and ``_finish`` see it and say why)."""
        while (item := self.pending.get()) is not None:
            try:
                self.conn.send(item)
            except (BrokenPipeError, ConnectionResetError):  # the child ended
                return
            except Exception as exc:  # noqa: BLE001 -- a stretch not sent (memory, ENOBUFS): stop the child, say why
                self.send_error = f"{type(exc).__name__}: {exc}"
                self.proc.terminate()
                return
            if item[0] == "close":
                return

    def _send(self, stretch) -> None:
        import queue

        item = ("add", *stretch)
        while True:
            if not self.proc.is_alive() or self.conn.poll():  # the child stopped (a report, or none): say why
                self._finish()
                raise RuntimeError(f"writing {self.path}: the writer process stopped")
            try:
                self.pending.put(item, timeout=0.5)
                return
            except queue.Full:  # the writer is behind: wait, unless it died
                continue

    def _finish(self) -> None:
        from genolin.errors import InputError

        while self.report is None:
            if self.conn.poll(0.5):
                try:
                    self.report = self.conn.recv()
                except (EOFError, OSError):  # the pipe closed without a report
                    self.report = self._ended()
            elif not self.proc.is_alive() and not self.conn.poll(0):  # a report sent as it ended is read first
                self.report = self._ended()
        self.proc.join()
        self._end_sender()
        kind, message = self.report if self.send_error is None else ("error", self.send_error)
        if kind == "input":
            raise InputError(self.path, f"cannot write: {message}")
        if kind:
            raise RuntimeError(f"writing {self.path}: {message}")

    def _ended(self) -> tuple[str, str]:
        self.proc.join()
        return "error", f"the writer process ended (exit code {self.proc.exitcode})"

    def _end_sender(self) -> None:
        """The child has ended (or never started): the sender thread stops (a send fails at once, a wait for items
        takes None), then the pipe closes. Once: a closed pipe means it ran."""
        import queue

        if self.conn.closed:
            return
        with contextlib.suppress(queue.Full):
            self.pending.put_nowait(None)
        if self.sender.ident is not None:
            self.sender.join()
        self.conn.close()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            try:
                self.flush()
            except BaseException:  # the child stopped: it drops its file; the error says why
                self._close(commit=False)
                raise
        self._close(commit=exc_type is None)

    def _close(self, commit: bool) -> None:
        import queue

        try:
            while self.report is None and self.proc.is_alive():  # wait for room only while the child lives
                try:
                    self.pending.put(("close", commit), timeout=0.5)
                    break
                except queue.Full:
                    continue
            if commit:
                self._finish()
                WRITTEN.append(Path(self.path))  # renamed into place by the child
            else:  # already failing: wait for the child to drop its file, keep the first error
                try:
                    self._finish()
                except Exception:  # noqa: BLE001
                    pass
        except KeyboardInterrupt:  # while the child finishes: it is not waited for, nor left to finish
            self._stop()
            raise

    def _stop(self) -> None:
        """The child ended at once (SIGTERM: ``_abandon``), dropping its file unless it had renamed it into place
        (then, as it reports, the file counts as written)."""
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()
        if self.report is None and not self.conn.closed and self.conn.poll(1.0):
            with contextlib.suppress(EOFError, OSError):
                self.report = self.conn.recv()
        self._end_sender()
        if self.report == (None, ""):
            WRITTEN.append(Path(self.path))


__all__ = ["BackgroundBigWigWriter", "BigWigWriter"]
