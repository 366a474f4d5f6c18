"""A small long-sequence example from the bundled E. coli genome, for the README's quick start of long-sequence
classification: 10-kbp windows labelled 1 when a gene starts within 50 bp of their centre (on either strand; RefSeq
gene starts, data/ecoli_k12/gene_starts.bed), 0 when none starts within 500 bp of it.

    python data/make_long_example.py --out long    # -> long/train.csv, long/dev.csv, long/new.fa

train.csv (200 windows) and dev.csv (60) come from the first 80 % of the genome and new.fa (20 windows, labels in
their headers) from the rest, so the windows of new.fa overlap no training window. Seeded: the same files each run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="long", help="folder for train.csv, dev.csv and new.fa")
    p.add_argument("--window", type=int, default=10_000, help="bp per window")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    from genolin.io.fasta import Genome

    genome = Genome(HERE / "ecoli_k12" / "NC_000913.3.fa.bgz")
    (name, length), = genome.lengths.items()
    starts = np.array(sorted(int(line.split("\t")[1]) for line in (HERE / "ecoli_k12" / "gene_starts.bed")
                             .read_text().splitlines()))
    rng = np.random.default_rng(args.seed)
    half = args.window // 2

    def distance(centre: int) -> int:
        i = np.searchsorted(starts, centre)
        return int(min(abs(starts[j] - centre) for j in (i - 1, i) if 0 <= j < len(starts)))

    def windows(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
        """n (centre, label) pairs in [lo, hi), half of each label."""
        positives = [int(s) for s in rng.permutation(starts[(starts >= lo + half) & (starts < hi - half)])[:n // 2]]
        negatives = []
        while len(negatives) < n - len(positives):
            c = int(rng.integers(lo + half, hi - half))
            if distance(c) > 500:
                negatives.append(c)
        return [(c, 1) for c in positives] + [(c, 0) for c in negatives]

    cut = int(0.8 * length)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train = windows(0, cut, 260)
    order = rng.permutation(len(train))
    for part, idx in (("train", order[:200]), ("dev", order[200:])):
        with open(out / f"{part}.csv", "w") as fh:
            fh.write("id,sequence,label\n")
            for i in idx:
                c, label = train[i]
                fh.write(f"{name}_{c},{genome.fetch(name, c - half, c + half).decode()},{label}\n")
    with open(out / "new.fa", "w") as fh:
        for c, label in windows(cut, length, 20):
            fh.write(f">{name}_{c} label={label}\n{genome.fetch(name, c - half, c + half).decode()}\n")
    print(f"-> {out}/train.csv (200 windows of {args.window:,} bp), {out}/dev.csv (60), {out}/new.fa (20)")


if __name__ == "__main__":
    main()
