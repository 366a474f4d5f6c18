"""A labelled promoter set of another species from ../shared (Promotech's C. jejuni NCTC 11168 genome and TSSs; the
data stay there, GPL): 81-nt windows, TSS - 60 .. TSS + 20 on the TSS's strand (label 1), and as many windows at
random positions and strands at least 300 bp from any TSS (label 0), split by genome position (train: the first
80 %, dev: the next 10 %, test: the last 10 %).

    python make_set.py OUT_DIR      # writes OUT_DIR/cjejuni_81/{train,dev,test}.csv
"""

import bisect
import csv
import gzip
import random
import sys
from pathlib import Path

from genolin.tokenize import reverse_complement

SHARED = Path(__file__).resolve().parents[4] / "shared" / "data" / "bacteria" / "CJEJUNI_2"


def main(out: Path) -> None:
    seq = "".join(line.strip() for line in gzip.open(SHARED / "CJEJUNI_2.fasta.gz", "rt")
                  if not line.startswith(">")).upper()
    n = len(seq)
    tss = [(int(f[1]), f[5].strip()) for f in (line.split("\t") for line in open(SHARED / "CJEJUNI_2.bed"))]
    starts = sorted(p for p, _ in tss)

    def window(p: int, strand: str) -> str | None:
        a, b = (p - 60, p + 21) if strand == "+" else (p - 20, p + 61)
        if a < 0 or b > n:
            return None
        s = seq[a:b]
        if strand == "-":
            s = reverse_complement(s)
            s = s.decode() if isinstance(s, bytes) else s
        return s

    bounds = {"train": (0, 0.8), "dev": (0.8, 0.9), "test": (0.9, 1.0)}
    rows = {k: [] for k in bounds}
    for p, strand in tss:
        k = next(k for k, (lo, hi) in bounds.items() if lo * n <= p < hi * n)
        s = window(p, strand)
        if s and len(s) == 81:
            rows[k].append((s, 1))
    rng = random.Random(0)
    for k, (lo, hi) in bounds.items():
        need = len(rows[k])
        while need:
            p = rng.randrange(int(lo * n) + 100, int(hi * n) - 100)
            i = bisect.bisect_left(starts, p)
            if min(abs(starts[j] - p) for j in (i - 1, i) if 0 <= j < len(starts)) < 300:
                continue
            s = window(p, rng.choice("+-"))
            if s and len(s) == 81 and set(s) <= set("ACGT"):
                rows[k].append((s, 0))
                need -= 1
    (out / "cjejuni_81").mkdir(parents=True, exist_ok=True)
    for k, v in rows.items():
        rng.shuffle(v)
        with open(out / "cjejuni_81" / f"{k}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["sequence", "label"])
            w.writerows(v)
        print(k, len(v), "positives", sum(label for _, label in v))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
