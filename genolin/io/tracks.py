"""The files of a genome track prediction (``genolin predict`` with a track model): OUT.plus and OUT.minus
(per-bin values, bedGraph or bigWig), OUT.peaks.bed (BED6 promoter calls) and OUT.gff3 (the calls as TSS and
promoter features: ``genolin.io.gff``), with genes also OUT.genes.tsv.

    track_paths(prefix, track_format) -> [OUT.plus.<suffix>, OUT.minus.<suffix>]
    track_outputs(lengths, prefix, track_format, rule, stride, strands=, peaks=, folder=, genes=) -> (writers, calls)

Every file is written under a temporary name and renamed when the block succeeds.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

STRANDS = ("plus", "minus")  # the strands' names in OUT.<strand>.<suffix>, + first
STRAND_COLORS = ("200,30,30", "30,30,200")  # bedGraph track colours (r,g,b) of the strands
TRACK_FORMATS = {"bedgraph": "bedGraph", "bigwig": "bw"}  # --format -> file suffix of OUT.plus / OUT.minus


def track_paths(prefix: str, track_format: str) -> list[str]:
    """The per-strand files of ``prefix`` in ``track_format`` (a key of TRACK_FORMATS), + strand first."""
    return [f"{prefix}.{strand}.{TRACK_FORMATS[track_format]}" for strand in STRANDS]


class Calls:
    """The call files of a prediction: ``write`` gives each contig's calls to every one (BED, GFF3)."""

    def __init__(self, *sinks):
        self.sinks = sinks

    @property
    def written(self) -> int:
        return self.sinks[0].written

    def write(self, contig: str, length: int, calls: list[tuple[int, float, str]]) -> None:
        for sink in self.sinks:
            sink.write(contig, length, calls)


class CallsBed:
    """Promoter calls as BED6 lines, numbered on through the file: contig, the called bin's start and end (cut at
    the contig's end), promoter_<n>, score 1000 p (at most 1000), strand. ``written``: the calls written so far."""

    def __init__(self, fh, stride: int):
        self.fh, self.stride, self.written = fh, stride, 0

    def write(self, contig: str, length: int, calls: list[tuple[int, float, str]]) -> None:
        """One contig's calls, [(bin, p, "+" or "-")] sorted."""
        stride = self.stride
        self.fh.write("".join(f"{contig}\t{b * stride}\t{min((b + 1) * stride, length)}\tpromoter_{n}\t"
                              f"{min(1000, int(round(1000 * p)))}\t{strand}\n"
                              for n, (b, p, strand) in enumerate(calls, start=self.written + 1)))
        self.written += len(calls)


@contextlib.contextmanager
def track_outputs(lengths: dict[str, int], prefix: str, track_format: str, rule: str, stride: int, *,
                  strands: tuple[int, ...] = (0, 1), peaks: bool = True, folder: Path | None = None,
                  genes: list | None = None):
    """(a writer per strand of ``strands`` (0: +, 1: -), ``Calls`` of OUT.peaks.bed and OUT.gff3, or None without
    ``peaks``; with ``genes`` (``genolin.io.annotation.Gene``s) the GFF3 links each call to a gene, and OUT.genes.tsv
    is written too),
    each file written under a temporary name and renamed when the block succeeds. ``lengths``: the contigs, in
    order; ``rule``: how the calls were made, for the BED's track line ("threshold 0.2", "500 per Mbp"); ``folder``:
    the strands written there (a torchrun rank's share) instead of beside ``prefix``, the names and the track lines
    still ``prefix``'s. bedGraph lines are formatted by a process pool on machines with cores to spare
    (``format_workers``) for genomes large enough to pay for its start (``POOL_MIN_BINS``), else here."""
    from genolin.io.atomic import atomic_open
    from genolin.io.bedgraph import BedGraphWriter, format_pool
    from genolin.io.bigwig import BackgroundBigWigWriter
    from genolin.io.gff import GffCalls

    name = Path(prefix).name
    paths = track_paths(prefix if folder is None else str(folder / name), track_format)
    with contextlib.ExitStack() as stack:
        calls = None
        if peaks:  # entered first, so it is renamed last: a track writer that fails as it closes takes it down too
            fb = stack.enter_context(atomic_open(prefix + ".peaks.bed"))
            fb.write(f'track name="{name} promoters" description="genolin calls, {rule}" '
                     f'useScore=1\n')
            table = stack.enter_context(atomic_open(prefix + ".genes.tsv")) if genes is not None else None
            gff = GffCalls(stack.enter_context(atomic_open(prefix + ".gff3")), stride, lengths, genes, table)
            calls = Calls(CallsBed(fb, stride), gff)
        if track_format == "bigwig":
            writers = [stack.enter_context(BackgroundBigWigWriter(paths[s], lengths)) for s in strands]
        else:
            bins = sum(-(-n // stride) for n in lengths.values()) * len(strands)
            pool = stack.enter_context(format_pool(bins=bins)) if strands else None
            writers = [stack.enter_context(BedGraphWriter(stack.enter_context(atomic_open(paths[s], "wb")),
                                                          f"{name} {'+-'[s]} strand", STRAND_COLORS[s], pool=pool))
                       for s in strands]
        yield writers, calls
