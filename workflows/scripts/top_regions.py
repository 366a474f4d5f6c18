"""PEAKS.bed SIZES TOP FLANK OUT.bed: the TOP highest-scoring calls of a genolin peaks BED (column 5), each
+-FLANK bp around the call's start (clipped to its contig), name and strand kept, written in genome order
(``genolin.io.bed.top_calls``)."""

import sys
from pathlib import Path

from genolin.errors import InputError
from genolin.io.bed import bed6_lines, read_bed, top_calls

peaks, sizes, top, flank, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
lengths = {c: int(n) for c, n in (line.split("\t")[:2] for line in Path(sizes).read_text().splitlines() if line)}
try:
    calls = read_bed(peaks, lengths, allow_empty=True)
except InputError as exc:
    sys.exit(f"top_regions: {exc}")
rows = top_calls(calls, top, lengths, flank)
tmp = out.with_name(out.name + ".tmp")
tmp.write_text("".join(bed6_lines(rows)))
tmp.replace(out)
print(f"{len(rows)} of {len(calls)} calls -> {out}")
