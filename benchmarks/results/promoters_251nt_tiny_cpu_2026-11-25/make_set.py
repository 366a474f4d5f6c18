"""A labelled promoter set of 251-nt windows from a genome and its TSSs in ../shared (the data stay there):
TSS - 200 .. TSS + 50 on the TSS's strand (label 1), and as many windows at random positions and strands at least
300 bp from any TSS (label 0), split by genome position (train: the first 80 %, dev: the next 10 %, test: the last
10 %). The issue-15 outside check's longest kind of set (81-251 nt, up to 15 k training sequences), at its size.

    python make_set.py OUT_DIR NAME GENOME.fa[.gz|.bgz] TSS.bed   # writes OUT_DIR/NAME/{train,dev,test}.csv
"""

import bisect
import csv
import gzip
import random
import sys
from pathlib import Path

from genolin.tokenize import reverse_complement

UP, DOWN = 200, 50


def main(out: Path, name: str, fasta: Path, bed: Path) -> None:
    opener = gzip.open if fasta.suffix in (".gz", ".bgz") else open
    with opener(fasta, "rt") as fh:
        seq = "".join(line.strip() for line in fh if not line.startswith(">")).upper()
    n = len(seq)
    tss = [(int(f[2]) - 1, f[5].strip()) for f in (line.split("\t") for line in open(bed)) if len(f) >= 6]
    starts = sorted(p for p, _ in tss)

    def window(p: int, strand: str) -> str | None:
        a, b = (p - UP, p + DOWN + 1) if strand == "+" else (p - DOWN, p + UP + 1)
        if a < 0 or b > n:
            return None
        s = seq[a:b]
        if strand == "-":
            s = reverse_complement(s)
            s = s.decode() if isinstance(s, bytes) else s
        return s if set(s) <= set("ACGT") else None

    bounds = {"train": (0, 0.8), "dev": (0.8, 0.9), "test": (0.9, 1.0)}
    rows = {k: [] for k in bounds}
    seen = set()
    for p, strand in tss:
        if (p, strand) in seen:
            continue
        seen.add((p, strand))
        k = next(k for k, (lo, hi) in bounds.items() if lo * n <= p < hi * n)
        s = window(p, strand)
        if s and len(s) == UP + DOWN + 1:
            rows[k].append((s, 1))
    rng = random.Random(0)
    for k, (lo, hi) in bounds.items():
        need = len(rows[k])
        while need:
            p = rng.randrange(int(lo * n) + 300, int(hi * n) - 300)
            i = bisect.bisect_left(starts, p)
            if min(abs(starts[j] - p) for j in (i - 1, i) if 0 <= j < len(starts)) < 300:
                continue
            s = window(p, rng.choice("+-"))
            if s and len(s) == UP + DOWN + 1:
                rows[k].append((s, 0))
                need -= 1
    (out / name).mkdir(parents=True, exist_ok=True)
    for k, v in rows.items():
        rng.shuffle(v)
        with open(out / name / f"{k}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["sequence", "label"])
            w.writerows(v)
        print(name, k, len(v), "positives", sum(label for _, label in v))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
