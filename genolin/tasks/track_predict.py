"""The prediction files of a track model (``genolin predict``).

OUT.plus.bedGraph and OUT.minus.bedGraph (per-bin probability, 0-based half-open, sorted, covering every contig,
equal rounded runs merged; or .bw with track_format "bigwig") and OUT.peaks.bed (BED6 calls: bins whose probability
is the highest within +- min_distance bp on their strand, each contig's most probable ones at a call density, or
those >= a threshold; score = 1000 p): the files are ``genolin.io.tracks``'s, the calls ``genolin.peaks``'s. A whole
circular contig's calls are decided with the bins across the origin as neighbours; outputs stay in the contig's
coordinates, each bin once. Pieces from ``Predictor.region_probs``: (contig, first bin, probs (n, 2)), in order.
Under torchrun the ranks share the batches of windows, every rank gets every bin, and rank 0 writes the plus strand
and the calls, rank 1 the minus strand (``predict_shares``). Before any of it, ``warn_inputs`` says in one line each
what the outputs will lack: records with no bases, contigs shorter than k or than the training window, a genome that
is largely N.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from genolin.io.tracks import CallsBed, track_outputs, track_paths
from genolin.peaks import StrandedPeaks, density_quotas
from genolin.tasks.base import PredictOptions
from genolin.tasks.track_calls import call_rule
from genolin.tasks.track_data import Region, TrackData
from genolin.timings import mark

log = logging.getLogger(__name__)

N_SHARE_WARNED = 0.1  # a genome of which at least this share is N is warned of
EXACT_N_BP = 16_000_000  # up to this many bases the N are counted (0.15 s); above, sampled (0.05-0.5 s)
N_SAMPLES, N_SAMPLE_BP = 4096, 1024  # the sample: this many stretches of this many bp, evenly spread


def write_pieces(pieces, data: TrackData, writers, strands: tuple[int, ...], calls: CallsBed | None,
                 options: PredictOptions, stride: int) -> int:
    """Each piece (contig, first bin, probs (n, 2)) into ``writers`` (one per strand of ``strands``); with
    ``calls``, the promoters of both strands are called and each contig's written at its end (with
    ``options.calls_per_mbp``: the contig's calls_per_mbp x Mbp most probable local maxima). Returns the bins
    predicted."""
    circles = {c: -(-data.lengths[c] // stride) for c in data.circular}  # predict covers whole contigs
    quotas = None  # each contig's share of the density, over every contig of the FASTA (as --contig runs get it)
    if options.calls_per_mbp is not None:
        quotas = dict(zip(data.lengths, density_quotas(data.lengths.values(), options.calls_per_mbp), strict=True))
    peaks = StrandedPeaks(options.threshold, options.min_distance_bp // stride, circles,
                          quotas=quotas) if calls is not None else None
    n_bins = 0
    for contig, first, probs in pieces:
        if not n_bins:
            mark("first piece")
        length = data.lengths[contig]
        final = first + len(probs) == -(-length // stride)
        for writer, s in zip(writers, strands, strict=True):
            writer.add(contig, first, probs[:, s], stride, length)
        found = peaks.feed(contig, first, probs, final=final) if peaks is not None else None
        n_bins += len(probs)
        if final:
            for w in writers:
                w.flush()
            if calls is not None:
                calls.write(contig, length, found)
    return n_bins


def warn_inputs(data: TrackData, regions: list[Region], options: PredictOptions) -> None:
    """A warning line for each of: records with no bases (no track lines, no calls), contigs shorter than k (no
    whole k-mer to read), contigs shorter than the training window (less context than training gave), and a genome of
    which at least N_SHARE_WARNED is N (bins made only of N get 0 and no call; a call density's quota, counted from
    the whole contig lengths, falls on the other bases). ``regions``: whole contigs (contig, 0, length)."""
    def where(key: str) -> str:  # the FASTA of a contig
        return str(data.genomes[data.genome_names.index(data.genome_of(key))].path)

    def first(contigs: list[str]) -> str:
        return f"the first {data.contig_name(contigs[0])!r}, {data.lengths[contigs[0]]:,} bp"

    empty = [c for c, a, b in regions if b == a]
    if empty:
        log.warning("%s: %d record(s) hold no bases (the first %r): they get no track lines and no calls",
                    where(empty[0]), len(empty), data.contig_name(empty[0]))
    no_kmer = [c for c, a, b in regions if 0 < b - a < data.k]
    if no_kmer:
        log.warning("%s: %d contig(s) shorter than k = %d bases (%s): no whole k-mer, so their bins' values are the "
                    "model's answer to unknown tokens, not a reading of their bases", where(no_kmer[0]),
                    len(no_kmer), data.k, first(no_kmer))
    short = [c for c, a, b in regions if data.k <= b - a < data.window_bp]
    if short:
        log.warning("%s: %d contig(s) shorter than the model's training window of %s bp (%s): their bins see less "
                    "context than training gave, so their values are less certain", where(short[0]), len(short),
                    f"{data.window_bp:,}", first(short))
    bases = sum(b - a for _, a, b in regions)
    n, exact = n_bases(data, regions)
    if not bases or n < N_SHARE_WARNED * bases:
        return
    share = n / bases
    said = (f"{'' if exact else 'about '}{share:.0%} of the {bases:,} bases to predict are N"
            + ("" if exact else f" (from {N_SAMPLES:,} stretches of {N_SAMPLE_BP:,} bp)")
            + ": bins made only of N get probability 0 and no calls")
    density = options.calls_per_mbp
    if density is not None and share < 1:
        said += (f"; each contig's calls are counted from its whole length, N included ({density:g} per Mbp), so "
                 f"they fall on the other {1 - share:.0%}: {density / (1 - share):.3g} per Mbp of bases "
                 f"(--calls-per-mbp {density * (1 - share):.3g} gives {density:g} per Mbp of bases)")
    log.warning("%s: %s", ", ".join(sorted({where(c) for c, _, _ in regions})), said)


def n_bases(data: TrackData, regions: list[Region]) -> tuple[float, bool]:
    """(the N among the regions' bases, whether counted): counted when they hold at most EXACT_N_BP bases, else
    estimated from N_SAMPLES stretches of N_SAMPLE_BP bp spread evenly over them (N runs are long: gaps, centromeres,
    so an even sample finds their share to within about a percent)."""
    total = sum(b - a for _, a, b in regions)
    if total <= EXACT_N_BP:
        return sum(data.around(c, s, min(b, s + 2**20)).count(b"N") for c, a, b in regions
                   for s in range(a, b, 2**20)), True
    n, seen, at, starts = 0, 0, 0, iter((i + 0.5) * total / N_SAMPLES for i in range(N_SAMPLES))
    p = next(starts)
    for c, a, b in regions:
        while p is not None and p < at + b - a:
            lo = a + int(p - at)
            part = data.around(c, lo, min(b, lo + N_SAMPLE_BP))
            n, seen, p = n + part.count(b"N"), seen + len(part), next(starts, None)
        at += b - a
    return n / max(seen, 1) * total, False


def predict_files(predictor, data: TrackData, regions: list[Region], out: str, options: PredictOptions,
                  stride: int, genes: list | None = None) -> str:
    """One process: the regions through the model into OUT.plus, OUT.minus, OUT.peaks.bed and OUT.gff3 (with
    ``genes``, OUT.genes.tsv too); what was written, in a line."""
    mark("genome indexed")
    paths = track_paths(out, options.track_format)
    with track_outputs(data.lengths, out, options.track_format, call_rule(options), stride, genes=genes) as \
            (writers, calls):
        pieces = predictor.region_probs(data, regions, rc_average=options.rc_average, progress=options.progress,
                                        ahead=True)
        n_bins = write_pieces(pieces, data, writers, (0, 1), calls, options, stride)
        mark("every piece written")
    mark("files closed")
    return (f"{len(regions)} contig(s), {n_bins} bins, {calls.written} promoters called -> {paths[0]}, "
            f"{paths[1]}, {out}.peaks.bed, {out}.gff3" + (f", {out}.genes.tsv" if genes is not None else ""))


def predict_shares(predictor, data: TrackData, regions: list[Region], prefix: str, options: PredictOptions,
                   stride: int, genes: list | None = None) -> str:
    """torchrun: the files of one process, written in shares (``Predictor.write_shares``), every rank getting
    every piece (``region_probs(everywhere=True)``): rank 0 writes the plus strand and calls the promoters of
    both, as one process does, rank 1 the minus strand, other ranks only compute."""
    shares = [(0,), (1,)]  # the strands each share writes; the first share also the calls
    log.info("batches of windows shared over %d processes; rank 0 writes the plus strand, rank 1 the minus "
             "strand", predictor.dist.world)

    def write(share: int | None, folder: Path | None) -> str:
        strands = () if share is None else shares[share]
        quiet = options if share == 0 else dataclasses.replace(options, progress=False)
        with track_outputs(data.lengths, prefix, options.track_format, call_rule(options), stride,
                           strands=strands, peaks=share == 0, folder=folder, genes=genes) as (writers, calls):
            pieces = predictor.region_probs(data, regions, rc_average=options.rc_average,
                                            progress=quiet.progress, ahead=True, everywhere=True)
            n_bins = write_pieces(pieces, data, writers, strands, calls, quiet, stride)
        if share != 0:
            return (f"rank {predictor.dist.rank}: {n_bins} bins"
                    + (", the minus strand, for rank 0" if share == 1 else ""))
        paths = track_paths(prefix, options.track_format)
        return (f"{len(regions)} contig(s) over {predictor.dist.world} processes, {n_bins} bins, {calls.written} "
                f"promoters called -> {paths[0]}, {paths[1]}, {prefix}.peaks.bed, {prefix}.gff3"
                + (f", {prefix}.genes.tsv" if genes is not None else ""))

    def files(share: int, folder: Path) -> list[Path]:
        paths = track_paths(str(folder / Path(prefix).name), options.track_format)
        return [Path(paths[s]) for s in shares[share]]

    return predictor.write_shares(prefix, len(shares), write, files)
