"""PEAKS.bed SIZES TOP FLANK OUT.bed: the TOP highest-scoring calls of a genolin peaks BED (column 5), each
+-FLANK bp around the call's start (clipped to its contig), name and strand kept, written in genome order."""

import sys
from pathlib import Path

peaks, sizes, top, flank, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
lengths = dict((c, int(n)) for c, n in (line.split("\t")[:2] for line in Path(sizes).read_text().splitlines() if line))
order = {c: i for i, c in enumerate(lengths)}
calls = [line.split("\t") for line in Path(peaks).read_text().splitlines()
         if line and not line.startswith(("#", "track", "browser"))]
best = sorted(calls, key=lambda f: -float(f[4]))[:top]
rows = []
for f in best:
    chrom, at = f[0], int(f[1])
    start, end = max(0, at - flank), min(lengths[chrom], at + flank + 1)
    rows.append((order[chrom], start, end, f[3], f[4], f[5].strip(), chrom))
rows.sort()
tmp = out.with_name(out.name + ".tmp")
tmp.write_text("".join(f"{r[6]}\t{r[1]}\t{r[2]}\t{r[3]}\t{r[4]}\t{r[5]}\n" for r in rows))
tmp.replace(out)
print(f"{len(rows)} of {len(calls)} calls -> {out}")
