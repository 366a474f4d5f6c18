"""How fast the bigWig writers take a genome's track: two strands of pieces, as ``genolin predict`` feeds them,
against libBigWig (pyBigWig, 10 zoom levels: the writer genolin used before its own), pybigtools (the Rust bigtools
library's writer) and the bedGraph writer.

The track is the synthetic one of ``bedgraph_write.py`` (runs of random length at 4 decimals), cut into pieces of
``--piece-bins``. Rows: genolin's writer in this process; the same in two child processes (one per strand, as
predict runs it: ``BackgroundBigWigWriter``); libBigWig in this process; the bedGraph writer in this process.
Figures: wall clock of feeding and closing both files, CPU time of this process and of its children, ns per value
(wall), file size.

    python benchmarks/bigwig_write.py --mbp 20 --out benchmarks/results/bigwig_write/xeon_2cores

Writes PREFIX.json and PREFIX.md.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
# only what the writers need at the top: spawned writer processes import this module again (torch would cost each
# one a second and more of CPU; genolin predict's own children import no torch)
from genolin.io.bedgraph import DECIMALS, BedGraphWriter  # noqa: E402
from genolin.io.bigwig import BackgroundBigWigWriter, BigWigWriter  # noqa: E402


class Writer:
    """What the feeding loop asks of a writer besides ``add``: entering it and flushing (nothing here)."""

    def __enter__(self):
        return self

    def flush(self):
        pass


class LibBigWig(Writer):
    """pyBigWig with 10 zoom levels, the values fed as genolin's writer took them before (fixed-step entries)."""

    def __init__(self, path, lengths):
        import pyBigWig

        self.bw = pyBigWig.open(str(path), "w")
        self.bw.addHeader(list(lengths.items()), maxZooms=10)

    def add(self, contig, first_bin, values, stride, length):
        self.bw.addEntries(contig, first_bin * stride, values=np.round(values.astype(np.float64), DECIMALS),
                           span=stride, step=stride)

    def __exit__(self, *exc):
        self.bw.close()


class BedGraph(Writer):
    def __init__(self, path, lengths):
        self.f = open(path, "wb")
        self.w = BedGraphWriter(self.f, "synthetic", "0,0,0")

    def add(self, *args):
        self.w.add(*args)

    def flush(self):
        self.w.flush()

    def __exit__(self, *exc):
        self.w.close()
        self.f.close()


class PyBigtools(Writer):
    """pybigtools (the Rust bigtools library) fed as genolin's writer would feed it: each piece's values rounded to
    DECIMALS and merged into runs of equal value (as the bedGraph writer does), handed through a queue to
    ``BigWigWriter.write`` running on a thread (it takes an iterator of (contig, start, end, value))."""

    def __init__(self, path, lengths):
        import queue
        import threading

        import pybigtools

        self.queue: queue.Queue = queue.Queue(maxsize=64)
        self.writer = pybigtools.open(str(path), "w")

        def entries():
            while (batch := self.queue.get()) is not None:
                yield from batch

        self.thread = threading.Thread(target=self.writer.write, args=(dict(lengths), entries()))
        self.thread.start()

    def add(self, contig, first_bin, values, stride, length):
        v = np.round(values.astype(np.float64), DECIMALS)
        cuts = np.flatnonzero(np.diff(v)) + 1
        starts = np.concatenate([[0], cuts])
        ends = np.concatenate([cuts, [len(v)]])
        a = (first_bin + starts) * stride
        b = np.minimum((first_bin + ends) * stride, length)
        self.queue.put(list(zip([contig] * len(a), a.tolist(), b.tolist(), v[starts].tolist(), strict=True)))

    def __exit__(self, *exc):
        self.queue.put(None)
        self.thread.join()


WRITERS = {"genolin": BigWigWriter, "genolin, 2 processes": BackgroundBigWigWriter, "libBigWig": LibBigWig,
           "pybigtools": PyBigtools, "bedGraph": BedGraph}


def run(name: str, contigs, stride: int, piece_bins: int, folder: Path) -> dict:
    from bedgraph_write import cpu_times, feed

    lengths = {c: len(t) * stride for c, t in contigs}
    suffix = "bedGraph" if name == "bedGraph" else "bw"
    paths = [folder / f"{name.split(',')[0]}.{s}.{suffix}" for s in ("plus", "minus")]
    user0, sys0, kids0 = cpu_times()
    t0 = time.perf_counter()
    writers = [WRITERS[name](p, lengths) for p in paths]
    for w in writers:
        w.__enter__()
    feed(writers, contigs, stride, piece_bins)
    for w in writers:
        w.__exit__(None, None, None)
    wall = time.perf_counter() - t0
    user1, sys1, kids1 = cpu_times()
    values = 2 * sum(len(t) for _, t in contigs)
    size = sum(p.stat().st_size for p in paths)
    for p in paths:
        p.unlink()
    return {"writer": name, "wall_s": round(wall, 3), "main_cpu_s": round(user1 - user0 + sys1 - sys0, 3),
            "children_cpu_s": round(kids1 - kids0, 3), "values": values,
            "ns_per_value": round(wall / values * 1e9, 1), "bytes": size}


def main() -> None:
    from bedgraph_write import machine, report, synthetic_genome, track_arguments

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    track_arguments(ap, stride=4, out="benchmarks/results/bigwig_write/latest")
    ap.add_argument("--writers", nargs="+", default=list(WRITERS), choices=list(WRITERS))
    args = ap.parse_args()

    contigs, mbp = synthetic_genome(args)
    folder = Path(tempfile.mkdtemp(prefix="bigwig_write.", dir=args.dir))
    try:
        rows = [run(w, contigs, args.stride, args.piece_bins, folder) for w in args.writers]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for r in rows:
        r["mbp_per_s"] = round(mbp / r["wall_s"], 2)
    result = {**machine(), "mbp": mbp, "stride": args.stride, "rows": rows}
    table = ["| writer | wall s | Mbp/s | ns per value | this process CPU s | children CPU s | MB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    table += [f"| {r['writer']} | {r['wall_s']:.2f} | {r['mbp_per_s']:.1f} | {r['ns_per_value']:.0f} | "
              f"{r['main_cpu_s']:.2f} | {r['children_cpu_s']:.2f} | {r['bytes'] / 1e6:.0f} |" for r in rows]
    report(f"bigWig writing, {mbp:.1f} Mbp, two strands, stride {args.stride}", result, table, args.out)


if __name__ == "__main__":
    main()
