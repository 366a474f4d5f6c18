"""How fast the bedGraph writers take a genome's track: two strands of pieces, as ``genolin predict`` feeds them.

The track is synthetic (no model): per-bin probabilities in runs of random length (geometric, mean
``--run-bins``; a trained model's outputs merge into runs of 1-3 bins at 4 decimals), cut into pieces of
``--piece-bins`` as the windows of a prediction arrive, for contigs of ``--contig-mbp``. Each row is one
number of formatting processes (0: this process formats); figures are the wall clock of feeding and closing
both writers, this process's CPU time (the main process of ``genolin predict``, which also runs the model, so
the less it spends here the better) and the workers' CPU time.

    python benchmarks/bedgraph_write.py --mbp 20 --workers 0 1 --out benchmarks/results/bedgraph_write/epyc_2cores
    python benchmarks/bedgraph_write.py --mbp 100 --workers 0 4 8 12 --out $OUT/bedgraph_write_h200

Writes PREFIX.json and PREFIX.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write_result  # noqa: E402

from genolin import __version__  # noqa: E402
from genolin.bench import cpu_name  # noqa: E402
from genolin.io.bedgraph import BedGraphWriter, format_pool  # noqa: E402


def synthetic_track(n_bins: int, run_bins: float, rng: np.random.Generator) -> np.ndarray:
    """(n_bins, 2) float32 probabilities at 4 decimals, each strand in runs of mean length ``run_bins``."""
    out = np.empty((n_bins, 2), np.float32)
    for s in range(2):
        lengths = rng.geometric(1.0 / run_bins, size=int(n_bins / run_bins * 1.2) + 16)
        values = np.round(rng.random(len(lengths)), 4)
        out[:, s] = np.repeat(values, lengths)[:n_bins]
    return out


def cpu_times() -> tuple[float, float, float]:
    """(this process's user, its system, its finished children's user + system) seconds."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime, me.ru_stime, kids.ru_utime + kids.ru_stime


def feed(writers: list, contigs: list[tuple[str, np.ndarray]], stride: int, piece_bins: int) -> None:
    """Both strands' writers fed the contigs' tracks in pieces of ``piece_bins``, each contig flushed at its end."""
    for contig, track in contigs:
        for first in range(0, len(track), piece_bins):
            piece = track[first: first + piece_bins]
            for s in range(2):
                writers[s].add(contig, first, piece[:, s], stride, len(track) * stride)
        for w in writers:
            w.flush()


def run(contigs: list[tuple[str, np.ndarray]], stride: int, piece_bins: int, workers: int, folder: Path) -> dict:
    paths = [folder / f"w{workers}.{strand}.bedGraph" for strand in ("plus", "minus")]
    with format_pool(workers) as pool:
        if pool is not None:  # start the processes before the clock (predict starts them while the model loads)
            list(pool.map(abs, range(workers)))
        user0, sys0, kids0 = cpu_times()
        t0 = time.perf_counter()
        with open(paths[0], "wb") as f0, open(paths[1], "wb") as f1:
            writers = [BedGraphWriter(f, "synthetic", "0,0,0", pool=pool) for f in (f0, f1)]
            feed(writers, contigs, stride, piece_bins)
            for w in writers:
                w.close()
        wall = time.perf_counter() - t0
        user1, sys1, _ = cpu_times()
    kids1 = cpu_times()[2]  # the workers' time is counted once they have exited
    lines = sum(sum(1 for _ in open(p, "rb")) - 1 for p in paths)
    size = sum(p.stat().st_size for p in paths)
    for p in paths:
        p.unlink()
    main_cpu = user1 - user0 + sys1 - sys0
    return {"workers": workers, "wall_s": round(wall, 3), "main_cpu_s": round(main_cpu, 3),
            "main_system_s": round(sys1 - sys0, 3), "workers_cpu_s": round(kids1 - kids0, 3), "lines": lines,
            "bytes": size, "mlines_per_s": round(lines / wall / 1e6, 2),
            "main_ns_per_line": round(main_cpu / lines * 1e9, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    track_arguments(ap, stride=2, out="benchmarks/results/bedgraph_write/latest")
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 1])
    args = ap.parse_args()

    contigs, mbp = synthetic_genome(args)
    folder = Path(tempfile.mkdtemp(prefix="bedgraph_write.", dir=args.dir))
    try:
        rows = [run(contigs, args.stride, args.piece_bins, w, folder) for w in args.workers]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for r in rows:
        r["mbp_per_s"] = round(mbp / r["wall_s"], 2)
    result = {**machine(), "mbp": mbp, "stride": args.stride, "run_bins": args.run_bins,
              "piece_bins": args.piece_bins, "rows": rows}
    head = ("| workers | wall s | Mbp/s | M lines/s | main CPU s (system) | main ns/line | workers CPU s (with "
            "start-up) | GB |")
    table = [head, "|" + "---:|" * 8]
    table += [f"| {r['workers']} | {r['wall_s']:.2f} | {r['mbp_per_s']:.1f} | {r['mlines_per_s']:.2f} | "
              f"{r['main_cpu_s']:.2f} ({r['main_system_s']:.2f}) | {r['main_ns_per_line']:.0f} | "
              f"{r['workers_cpu_s']:.2f} | "
              f"{r['bytes'] / 1e9:.2f} |" for r in rows]
    report(f"bedGraph writing, {mbp:.1f} Mbp, two strands, stride {args.stride}, runs of {args.run_bins} bins",
           result, table, args.out)


def track_arguments(ap: argparse.ArgumentParser, *, stride: int, out: str) -> None:
    """The synthetic genome's options (size, contigs, stride, runs, pieces) and where files and results go."""
    ap.add_argument("--mbp", type=float, default=20.0, help="genome size (both strands are written)")
    ap.add_argument("--contig-mbp", type=float, default=5.0)
    ap.add_argument("--stride", type=int, default=stride, help="bp per bin")
    ap.add_argument("--run-bins", type=float, default=1.5, help="mean run length in bins")
    ap.add_argument("--piece-bins", type=int, default=14336, help="bins per piece (a window's centre)")
    ap.add_argument("--dir", type=Path, default=None, help="where the files go (default: a temporary folder)")
    ap.add_argument("--out", type=Path, default=Path(out))


def synthetic_genome(args) -> tuple[list[tuple[str, np.ndarray]], float]:
    """([(contig, (bins, 2) track)], Mbp) of ``track_arguments``' options, seed 0."""
    rng = np.random.default_rng(0)
    n_contigs = max(1, round(args.mbp / args.contig_mbp))
    bins = int(args.mbp * 1e6 / args.stride / n_contigs)
    contigs = [(f"NC_{i:06d}.1", synthetic_track(bins, args.run_bins, rng)) for i in range(n_contigs)]
    return contigs, n_contigs * bins * args.stride / 1e6


def machine() -> dict:
    """The version, date, CPU, cores, Python, numpy and command a result was made with."""
    return {"genolin": __version__, "date": dt.date.today().isoformat(), "cpu": cpu_name(),
            "cores": len(os.sched_getaffinity(0)), "python": platform.python_version(), "numpy": np.__version__,
            "command": " ".join(sys.argv)}


def report(title: str, result: dict, table: list[str], out: Path) -> None:
    """The result printed as a markdown table under ``title`` and written to OUT.json and OUT.md."""
    text = (f"# {title}\n\n{result['cpu']} ({result['cores']} cores), genolin {result['genolin']}, "
            f"{result['date']}\n\n`{result['command']}`\n\n" + "\n".join(table) + "\n")
    print(text)
    write_result(out, result, text)


if __name__ == "__main__":
    main()
