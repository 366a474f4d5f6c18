"""BED intervals (BED3 or BED6; strand in column 6), e.g. transcription start sites.

``read_bed(path, contigs)`` -> list of :class:`Interval` (0-based, half-open), checked against the genome's
contig lengths when given. ``track``, ``browser``, ``#`` and blank lines are skipped, and so is a column-header
line before the first interval (one whose start and end columns are both names, such as ``chromStart chromEnd``);
a line whose start or end is anything else that is not an integer (``1.5``, ``1e5``, ``1,000``, ``NA``) is an
error naming the line and the value.

``top_calls(calls, top, contigs, flank)``: the highest-scoring calls (e.g. of OUT.peaks.bed, to explain), optionally
widened to +-flank bp of each call and put in genome order; ``bed6_lines`` writes intervals back.

``renumber_calls(lines, after)``: promoter call lines of ``genolin predict``'s OUT.peaks.bed named
promoter_{after + 1}, ... (parts of one genome's calls joined in order).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from genolin.errors import InputError
from genolin.io.files import read_text

STRANDS = ("+", "-", ".")
COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")  # a column header's start/end: "start", "chromStart"
MISSING = {"na", "nan", "none", "null", "inf", "infinity"}  # values, not column names


@dataclass(frozen=True, slots=True)
class Interval:
    chrom: str
    start: int
    end: int
    name: str = "."
    score: float | None = None
    strand: str = "."


def read_bed(path: str | os.PathLike, contigs: Mapping[str, int] | None = None, *,
             allow_empty: bool = False) -> list[Interval]:
    """Parse a BED3/BED6 file; ``contigs`` (name -> length, e.g. ``Genome.lengths``) enables range checks. A file
    without intervals is an error unless ``allow_empty`` (a genome's calls: a model may call none)."""
    out: list[Interval] = []
    seen_data = False
    for n, line in enumerate(read_text(path).splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "track", "browser")):
            continue
        fields = line.rstrip("\r\n").split("\t") if "\t" in line else stripped.split()
        if len(fields) < 3:
            raise InputError(path, f"BED needs at least 3 columns (chrom, start, end), found {len(fields)}", n)
        chrom, start_s, end_s = (f.strip() for f in fields[:3])
        first, seen_data = not seen_data, True
        if first and _column_names(start_s, end_s):  # a column-header line such as "chrom start end"
            continue
        start, end = _position(path, "start", start_s, n), _position(path, "end", end_s, n)
        if start < 0:
            raise InputError(path, f"start {start} is negative", n)
        if start >= end:
            raise InputError(path, f"start {start} is not before end {end}", n)
        if contigs is not None:
            if chrom not in contigs:
                raise InputError(path, f"contig {chrom!r} is not in the FASTA", n)
            if end > contigs[chrom]:
                raise InputError(path, f"end {end} is beyond the length {contigs[chrom]} of contig {chrom!r}", n)
        name = fields[3].strip() if len(fields) > 3 and fields[3].strip() else "."
        score = None
        if len(fields) > 4 and fields[4].strip() not in ("", "."):
            try:
                score = float(fields[4])
            except ValueError:
                raise InputError(path, f"score {fields[4].strip()!r} is not a number", n) from None
        strand = fields[5].strip() if len(fields) > 5 else "."
        if strand not in STRANDS:
            raise InputError(path, f"strand must be '+', '-' or '.', found {strand!r}", n)
        out.append(Interval(chrom, start, end, name, score, strand))
    if not out and not allow_empty:
        raise InputError(path, "no intervals in BED file")
    return out


def _column_names(*cells: str) -> bool:
    """Whether a first line's start and end cells are column names (words, not numbers or missing values)."""
    return all(COLUMN_NAME.fullmatch(c) and c.lower() not in MISSING for c in cells)


def _position(path, column: str, text: str, line: int) -> int:
    """A start or end column as an integer; an InputError naming the line and the value otherwise."""
    try:
        return int(text)
    except ValueError:
        raise InputError(path, f"{column} {text!r} is not an integer (BED positions are whole numbers, 0-based)",
                         line) from None


def top_calls(calls: Iterable[Interval], top: int, contigs: Mapping[str, int] | None = None,
              flank: int | None = None) -> list[Interval]:
    """The ``top`` highest-scoring of ``calls`` (column 5; equal scores keep file order, unscored ones come last).
    With ``contigs`` (name -> length, in genome order) they come in genome order, and with ``flank`` each becomes
    the +-``flank`` bp around its start (the call's base), clipped to its contig; else they stay in score order."""
    best = sorted(calls, key=lambda iv: -iv.score if iv.score is not None else float("inf"))[:max(top, 0)]
    if flank is not None:
        if contigs is None:
            raise ValueError("top_calls: flank needs the contigs' lengths")
        best = [Interval(iv.chrom, max(0, iv.start - flank), min(contigs[iv.chrom], iv.start + flank + 1), iv.name,
                         iv.score, iv.strand) for iv in best]
    if contigs is not None:
        order = {c: i for i, c in enumerate(contigs)}
        best.sort(key=lambda iv: (order[iv.chrom], iv.start, iv.end))
    return best


def bed6_lines(intervals: Iterable[Interval]) -> Iterator[str]:
    """BED6 lines of ``intervals`` (a missing score as ``.``)."""
    for iv in intervals:
        score = "." if iv.score is None else f"{iv.score:g}"
        yield f"{iv.chrom}\t{iv.start}\t{iv.end}\t{iv.name}\t{score}\t{iv.strand}\n"


def renumber_calls(lines: Iterable[str], after: int = 0) -> Iterator[str]:
    """BED6 promoter call lines (no track line) with their names (column 4) made promoter_{after + 1}, ...: the
    numbering one whole-genome ``genolin predict`` gives, when parts of the genome's calls are joined in order."""
    for n, line in enumerate(lines, start=after + 1):
        cols = line.rstrip("\n").split("\t")
        cols[3] = f"promoter_{n}"
        yield "\t".join(cols) + "\n"
