"""Tokenizer throughput: genolin.tokenize.kmer_ids against the plain Python tokenizer, same input, same run.

Input: the bundled E. coli K-12 genome tiled to --mbp megabases (real sequence). Pinned to one CPU core.
Prints a table and writes JSON (with CPU, versions and date) to benchmarks/results/tokenize_speed/.

    python benchmarks/tokenize_speed.py            # 64 Mbp, k=6, stride 1 (the issue's setting) + variants
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time, now  # noqa: E402

from genolin import __version__  # noqa: E402
from genolin.bench import cpu_name  # noqa: E402
from genolin.io.fasta import read_fasta  # noqa: E402
from genolin.tokenize import kmer_ids  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GENOME = ROOT / "data" / "ecoli_k12" / "NC_000913.3.fa.bgz"


def plain_python(seq: str, k: int, stride: int, vocab: dict[str, int]) -> list[int]:
    return [vocab[seq[i:i + k]] for i in range(0, len(seq) - k + 1, stride)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mbp", type=float, default=64.0, help="sequence length in Mbp (default 64)")
    ap.add_argument("--repeats", type=int, default=5, help="genolin timings per setting; the median is kept")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "tokenize_speed" / "latest.json")
    args = ap.parse_args()

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    (rec,) = read_fasta(GENOME)
    length = int(args.mbp * 1e6)
    seq = (rec.seq * (length // len(rec.seq) + 1))[:length]
    rows = []

    # The setting, against plain Python on the same sequence.
    k, stride = 6, 1
    t_gen, ids = median_time(lambda: kmer_ids(seq, k, stride), args.repeats)
    tracemalloc.start()
    kmer_ids(seq, k, stride)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    vocab = {"".join(p): 5 + i for i, p in enumerate(itertools.product("ACGT", repeat=k))}
    t_py, py_ids = median_time(lambda: plain_python(seq.decode(), k, stride, vocab), 1)  # decoding is a few ms
    assert np.array_equal(ids, np.asarray(py_ids)), "genolin and plain Python disagree"
    py_ids = None  # free the list (about 2.5 GB of Python ints) before the next settings
    rows.append({"k": k, "stride": stride, "genolin_s": t_gen, "genolin_mbp_s": length / t_gen / 1e6,
                 "python_s": t_py, "python_mbp_s": length / t_py / 1e6, "speedup": t_py / t_gen,
                 "genolin_peak_mib": peak / 2**20, "output_mib": ids.nbytes / 2**20})

    # Other settings (genolin only), with some N to exercise the [UNK] path.
    seq_n = bytearray(seq)
    seq_n[:: 100_003] = b"N" * len(seq_n[:: 100_003])
    for k, stride, s, label in [(3, 1, seq, ""), (12, 1, seq, ""), (6, 6, seq, ""), (6, 1, bytes(seq_n), "with N")]:
        t, _ = median_time(lambda s=s, k=k, stride=stride: kmer_ids(s, k, stride), args.repeats)
        rows.append({"k": k, "stride": stride, "note": label, "genolin_s": t, "genolin_mbp_s": length / t / 1e6})

    print(f"genolin {__version__} k-mer tokenizer, {length / 1e6:.0f} Mbp (E. coli K-12 tiled), one core of "
          f"{cpu_name()}")
    print(f"{'k':>3} {'stride':>6} {'note':<7} {'genolin Mbp/s':>14} {'python Mbp/s':>13} {'speedup':>8} "
          f"{'peak MiB':>9}")
    for r in rows:
        py = f"{r['python_mbp_s']:13.2f}" if "python_mbp_s" in r else f"{'':>13}"
        sp = f"{r['speedup']:7.0f}x" if "speedup" in r else f"{'':>8}"
        pk = f"{r['genolin_peak_mib']:9.0f}" if "genolin_peak_mib" in r else f"{'':>9}"
        print(f"{r['k']:>3} {r['stride']:>6} {r.get('note', ''):<7} {r['genolin_mbp_s']:14.1f} {py} {sp} {pk}")

    result = {
        "benchmark": "tokenize_speed", "date": now(),
        "genolin": __version__, "python": platform.python_version(), "numpy": np.__version__,
        "cpu": cpu_name(), "cores_used": 1, "sequence_bp": length, "input": "E. coli K-12 NC_000913.3 tiled",
        "repeats": args.repeats, "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
