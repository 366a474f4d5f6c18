"""A labelled 251-nt promoter set from a multi-record genome and its GFF in ../shared (the data stay there): TSS
proxies are the mRNA starts (the start on +, the end on -), windows TSS - 200 .. TSS + 50 on the mRNA's strand
(label 1), and as many windows at random positions and strands of the same records at least 300 bp from any TSS
(label 0), windows with any base other than ACGT dropped; split by position within each record (train: its first
80 %, dev: the next 10 %, test: the last 10 %). The sibling of ../promoters_251nt_tiny_cpu_2026-11-25/make_set.py
for genomes of several records.

    python make_set.py OUT_DIR NAME GENOME.fa.gz ANNOTATION.gff.gz   # writes OUT_DIR/NAME/{train,dev,test}.csv
"""

import bisect
import csv
import gzip
import random
import sys
from pathlib import Path

from genolin.tokenize import reverse_complement

UP, DOWN = 200, 50
BOUNDS = {"train": (0, 0.8), "dev": (0.8, 0.9), "test": (0.9, 1.0)}


def records(fasta: Path) -> dict[str, str]:
    out, name, parts = {}, None, []
    with gzip.open(fasta, "rt") as fh:
        for line in fh:
            if line.startswith(">"):
                if name is not None:
                    out[name] = "".join(parts).upper()
                name, parts = line[1:].split()[0], []
            else:
                parts.append(line.strip())
    if name is not None:
        out[name] = "".join(parts).upper()
    return out


def main(out: Path, name: str, fasta: Path, gff: Path) -> None:
    seqs = records(fasta)
    tss: dict[str, set] = {c: set() for c in seqs}
    with gzip.open(gff, "rt") as fh:
        for line in fh:
            f = line.rstrip("\n").split("\t")
            if len(f) >= 9 and f[2] == "mRNA" and f[0] in seqs:
                tss[f[0]].add((int(f[3]) - 1, "+") if f[6] == "+" else (int(f[4]) - 1, "-"))

    def window(seq: str, p: int, strand: str) -> str | None:
        a, b = (p - UP, p + DOWN + 1) if strand == "+" else (p - DOWN, p + UP + 1)
        if a < 0 or b > len(seq):
            return None
        s = seq[a:b]
        if strand == "-":
            s = reverse_complement(s).decode()
        return s if set(s) <= set("ACGT") else None

    rows = {k: [] for k in BOUNDS}
    rng = random.Random(0)
    for contig, seq in seqs.items():
        n, starts = len(seq), sorted(p for p, _ in tss[contig])
        for k, (lo, hi) in BOUNDS.items():
            pos = [s for p, strand in sorted(tss[contig]) if lo * n <= p < hi * n and (s := window(seq, p, strand))]
            rows[k] += [(s, 1) for s in pos]
            need, tries = len(pos), 0
            while need and tries < 100_000:
                tries += 1
                p = rng.randrange(int(lo * n), max(int(lo * n) + 1, int(hi * n)))
                i = bisect.bisect_left(starts, p)
                if any(abs(starts[j] - p) < 300 for j in (i - 1, i) if 0 <= j < len(starts)):
                    continue
                s = window(seq, p, rng.choice("+-"))
                if s:
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
