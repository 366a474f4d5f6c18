"""Genome windows of the track task: genomes keyed by contig, windows, their tokens and window sampling.

Windows and bins: a window of W bp starting at position a (a multiple of the stride s) has W / s bins; bin t
covers [a + t s, a + (t + 1) s) and its token is the k-mer starting at a + t s (reading up to k - 1 bases past
the window; N beyond the contig). Batches: ids (B, W/s), mask (B, W/s), targets (B, W/s, 2) float (the labels:
``track_labels``; augmentation: ``track_augment``). Training windows start at random offsets every epoch.

Circular contigs (those whose FASTA header says ``topology=circular`` or ``circular=true``, and those named by
``DataSpec.circular``, "all" for every one): a region that is a whole circular contig is read as a circle. Its
training windows start anywhere on it and run on across the origin; its prediction windows start before the origin
and end past the contig's end, so every bin has its real context. A part of a contig (the held-out end and the
training part before it) stays a linear stretch, so no window of one reads the other; the k - 1 bases of k-mer
context beyond a circular contig's end are always its other end's.

Several genomes: one FASTA each (named by file name), TSS BEDs paired with them in order or one BED naming contigs
of all; training windows are drawn across genomes in proportion to their length, or as ``genome_weights`` says
(each genome equally often, or by the square root of its length).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import numpy as np

from genolin.config import TrainConfig
from genolin.errors import InputError
from genolin.io.bed import Interval
from genolin.io.fasta import Genome
from genolin.io.files import FASTA_SUFFIXES, file_stem, unique_names
from genolin.tasks.base import Batch
from genolin.tasks.track_augment import collate_windows
from genolin.tasks.track_distill import SoftTracks, mixed
from genolin.tasks.track_labels import positive_rate, window_targets
from genolin.tokenize import kmer_ids, reverse_complement

Region = tuple[str, int, int]  # (contig, start, end) in bp, 0-based half-open
CIRCULAR_ALL = "all"  # DataSpec.circular: every contig is circular


@dataclass(frozen=True)
class Window:
    contig: str
    start: int  # a multiple of the stride; a circular contig's may be negative, or the window run past its end
    bins: int


class TrackData:
    """Windows of one or more genomes with per-bin, per-strand TSS targets.

    Contigs are keyed by name; when two genomes share a contig name (chr1, X, ...), every contig is keyed
    ``<genome name>:<contig>`` instead (``tss`` intervals then name contigs by those keys). ``circular``: the
    keys of the circular contigs (records with bases): those their FASTA header marks, and those named in
    ``circular`` (by name or key; ``CIRCULAR_ALL``: every contig); names that are no contig here are left to
    ``check_circular``, which knows every genome of a run.
    """

    def __init__(self, genomes: Genome | list[Genome], tss: list[Interval], *, window_bp: int, k: int, stride: int,
                 tolerance_bins: int = 0, tss_source: str = "TSS BED", circular: list[str] | tuple[str, ...] = ()):
        if window_bp % stride:
            raise ValueError(f"window_bp ({window_bp}) must be a multiple of stride ({stride})")
        self.genomes = [genomes] if isinstance(genomes, Genome) else list(genomes)
        self.window_bp, self.k, self.stride, self.tolerance_bins = window_bp, k, stride, tolerance_bins
        self.qualified = bool(shared_contigs(self.genomes))
        self.lengths: dict[str, int] = {}
        self._genome_of: dict[str, Genome] = {}
        self._contig: dict[str, str] = {}  # key -> the contig's name in its FASTA
        self.circular: set[str] = set()
        named = set(circular)
        for genome, gname in zip(self.genomes, self.genome_names, strict=True):
            for contig, length in genome.lengths.items():
                key = f"{gname}:{contig}" if self.qualified else contig
                self.lengths[key], self._genome_of[key], self._contig[key] = length, genome, contig
                if length and ({CIRCULAR_ALL, contig, key} & named or contig in genome.circular):
                    self.circular.add(key)
        where = ", ".join(str(g.path) for g in self.genomes)
        plus: dict[str, list[int]] = {c: [] for c in self.lengths}
        minus: dict[str, list[int]] = {c: [] for c in self.lengths}
        for iv in tss:
            if iv.chrom not in self.lengths:
                raise InputError(tss_source, f"contig {iv.chrom!r} is not in {where}")
            if iv.strand == "+":
                plus[iv.chrom].append(iv.start)
            elif iv.strand == "-":
                minus[iv.chrom].append(iv.end - 1)
            else:
                raise InputError(tss_source, f"TSS {iv.name!r} at {iv.chrom}:{iv.start} has no strand ('+' or '-' "
                                             f"in column 6)")
        # a teacher's probabilities mixed into the targets (``track_distill``; set by ``TrackTask.distil_from``)
        self.soft: SoftTracks | None = None
        self.soft_weight = 0.0
        # contig key -> (+ strand TSS positions, - strand TSS positions), each sorted (n,) int64
        self.tss = {c: (np.sort(np.array(plus[c], dtype=np.int64)), np.sort(np.array(minus[c], dtype=np.int64)))
                    for c in self.lengths}

    def circles_as(self, contigs: list | None) -> list[str]:
        """Also read as circular the contigs that match one of ``contigs`` ([name, length] pairs: those a run read
        as circular in training) by name and length; returns the names of those it added."""
        known = {(name, length) for name, length in contigs or []}
        added = [c for c, n in self.lengths.items() if c not in self.circular and (self.contig_name(c), n) in known]
        self.circular.update(added)
        return [self.contig_name(c) for c in added]

    @classmethod
    def load(cls, fastas: list[str], tss_paths: list[str], cfg: TrainConfig, circular: list[str] | tuple[str, ...] = ()
             ) -> TrackData:
        """Genomes and their TSS BEDs (one per FASTA, in order, or one naming contigs of all; none to predict) with
        the run's window, k, stride and tolerance; ``circular``: contigs to read as circular (``TrackData``)."""
        from genolin.io.bed import read_bed

        genomes = [Genome(p) for p in fastas]
        if len(tss_paths) > 1 and len(tss_paths) != len(genomes):
            raise InputError(None, f"give --tss once for all genomes or once per --fasta, in the same order "
                                   f"({len(fastas)} FASTA, {len(tss_paths)} BED)")
        shared = shared_contigs(genomes)
        if shared and len(tss_paths) == 1:
            raise InputError(tss_paths[0], f"contig {shared[0]!r} is in several genomes, so one BED cannot name it: "
                                           f"give one --tss per --fasta")
        tss: list[Interval] = []
        if len(tss_paths) == len(genomes) > 1:
            for g, gname, path in zip(genomes, unique_genome_names(genomes), tss_paths, strict=True):
                prefix = f"{gname}:" if shared else ""
                tss += [dataclasses.replace(iv, chrom=prefix + iv.chrom) for iv in read_bed(path, g.lengths)]
        elif tss_paths:
            tss = read_bed(tss_paths[0], {c: n for g in genomes for c, n in g.lengths.items()})
        return cls(genomes, tss, window_bp=cfg.window_bp, k=cfg.k, stride=cfg.stride,
                   tolerance_bins=cfg.tolerance_bins, tss_source=tss_paths[0] if len(tss_paths) == 1 else "TSS BED",
                   circular=circular)

    def tokens_of(self, cfg: TrainConfig) -> TrackData:
        """The same genomes, TSSs and circular contigs read with ``cfg``'s window, k, stride and tolerance (an
        ensemble's member of another stride reads them so)."""
        other = copy.copy(self)
        other.window_bp, other.k, other.stride, other.tolerance_bins = (cfg.window_bp, cfg.k, cfg.stride,
                                                                        cfg.tolerance_bins)
        other.circular = set(self.circular)
        other.soft = None  # a teacher's targets are in this data's bins
        return other

    @property
    def genome_names(self) -> list[str]:
        return unique_genome_names(self.genomes)

    def genome_of(self, key: str) -> str:
        return self.genome_names[self.genomes.index(self._genome_of[key])]

    def contig_name(self, key: str) -> str:
        """The contig's name in its FASTA (the key without its genome prefix)."""
        return self._contig[key]

    # -- regions and windows ---------------------------------------------------------------------------------
    def whole(self) -> list[Region]:
        return [(c, 0, n) for c, n in self.lengths.items()]

    def wraps(self, region: Region) -> bool:
        """Whether ``region`` is a whole circular contig, read as a circle: its windows run on across the origin."""
        contig, a, b = region
        return contig in self.circular and a == 0 and b == self.lengths[contig]

    def split(self, val_fraction: float) -> tuple[list[Region], list[Region]]:
        """(train regions, validation regions): the last ``val_fraction`` of each contig is held out (a circular
        contig's two parts are linear stretches: no training window reads held-out bases)."""
        train, val = [], []
        for contig, length in self.lengths.items():
            cut = int(length * (1 - val_fraction)) // self.stride * self.stride
            if cut > 0:
                train.append((contig, 0, cut))
            if cut < length:
                val.append((contig, cut, length))
        return train, val

    def check_fits(self, regions: list[Region], what: str) -> list[Region]:
        """Regions long enough for one window (plus k-mer context; a circle: a window without a base twice);
        InputError when none is."""
        usable = [r for r in regions if r[2] - r[1] >= self.window_bp + (0 if self.wraps(r) else self.k - 1)]
        if not usable:
            longest = max((r[2] - r[1] for r in regions), default=0)
            raise InputError(self.genomes[0].path, f"the window of {self.window_bp:,} bp is longer than every contig's "
                                               f"{what} ({longest:,} bp at most); use a smaller window_bp")
        return usable

    def spans(self, regions: list[Region]) -> np.ndarray:
        """(len(regions),) float64: the window starts each region offers (a circle: one per base)."""
        return np.array([r[2] if self.wraps(r) else r[2] - r[1] - self.window_bp - self.k + 2 for r in regions],
                        dtype=np.float64)

    def genome_shares(self, regions: list[Region], genome_weights: str = "length") -> dict[str, float]:
        """Genome name -> the share of ``random_windows``'s draws its regions get (``TrainConfig.genome_weights``)."""
        p = self.region_probabilities(regions, self.spans(regions), genome_weights)
        shares = dict.fromkeys(self.genome_names, 0.0)
        for (contig, _, _), q in zip(regions, p, strict=True):
            shares[self.genome_of(contig)] += float(q)
        return shares

    def region_probabilities(self, regions: list[Region], spans: np.ndarray, genome_weights: str) -> np.ndarray:
        """(len(regions),) the chance that a drawn window falls in each region: genome g's share is S_g ** a over
        the sum of those of all genomes (S_g its regions' spans summed; a = 1 "length", 1/2 "sqrt", 0 "equal"),
        split among its regions by span."""
        if genome_weights == "length":  # written as before the setting: the same floats, so the same draws
            return spans / spans.sum()
        power = {"sqrt": 0.5, "equal": 0.0}[genome_weights]
        genome = np.array([self.genomes.index(self._genome_of[contig]) for contig, _, _ in regions])
        per_genome = np.bincount(genome, weights=spans)  # (genomes,) 0 for a genome with no region here
        share = np.where(per_genome > 0, per_genome ** power, 0.0)
        return (share / share.sum())[genome] * spans / per_genome[genome]

    def random_windows(self, regions: list[Region], rng: np.random.Generator, count: int | None = None,
                       genome_weights: str = "length") -> list[Window]:
        """Windows at random offsets inside the regions (never crossing their ends, k-mer context included; a
        circle's start anywhere on it, running on across the origin); regions drawn as ``genome_weights`` says
        (``region_probabilities``), offsets uniformly within a region."""
        spans = self.spans(regions)
        count = count or max(1, int(sum(r[2] - r[1] for r in regions) // self.window_bp))
        picks = rng.choice(len(regions), size=count, p=self.region_probabilities(regions, spans, genome_weights))
        out = []
        for r in picks:
            contig, a, _ = regions[r]
            offset = int(rng.integers(0, int(spans[r]))) // self.stride * self.stride
            out.append(Window(contig, a + offset, self.window_bp // self.stride))
        return out

    # -- tokens and targets ------------------------------------------------------------------------------------
    def bases(self, w: Window) -> bytes:
        """The window's bases with k - 1 bases of context on each side: N beyond a linear contig's ends, the bases
        of the other end beyond a circular one's."""
        length = self.lengths[w.contig]
        a, b = w.start - (self.k - 1), w.start + w.bins * self.stride + self.k - 1
        if w.contig in self.circular:
            return self.around(w.contig, a, b)
        core = self._genome_of[w.contig].fetch(self._contig[w.contig], max(a, 0), min(b, length))
        return b"N" * max(0, -a) + core + b"N" * max(0, b - length)

    def around(self, contig: str, a: int, b: int) -> bytes:
        """Bases [a, b) of a circular contig, position p being base p mod length (``a`` may be negative, ``b``
        past the end, the span longer than the contig)."""
        genome, name, length = self._genome_of[contig], self._contig[contig], self.lengths[contig]
        parts, p = [], a
        while p < b:
            q = p % length
            take = min(b - p, length - q)
            parts.append(genome.fetch(name, q, q + take))
            p += take
        return b"".join(parts)

    def tokens(self, w: Window, *, rc: bool = False, bases: bytes | None = None) -> np.ndarray:
        seq = bases if bases is not None else self.bases(w)
        if rc:
            seq = reverse_complement(seq)
        return kmer_ids(seq[self.k - 1:], self.k, self.stride)[: w.bins]

    def all_n_bins(self, w: Window, bases: bytes) -> np.ndarray:
        """(bins,) bool: bins of ``w`` made only of N (``bases`` as from :meth:`bases`)."""
        core = np.frombuffer(bases[self.k - 1: self.k - 1 + w.bins * self.stride], dtype=np.uint8)
        return (core.reshape(w.bins, self.stride) == ord("N")).all(axis=1)

    def targets(self, w: Window, *, rc: bool = False) -> np.ndarray:
        """(bins, 2) float32: + and - strand TSS in each bin (with tolerance); mirrored and swapped when rc
        (``track_labels.window_targets``; on a circular contig a TSS repeats every turn); with a teacher
        (``soft``), mixed with its probabilities (``track_distill.mixed``)."""
        circle = self.lengths[w.contig] if w.contig in self.circular else None
        labels = window_targets(self.tss[w.contig], w.start, w.bins, self.stride, self.tolerance_bins,
                                circle=circle, rc=rc)
        if self.soft is None:
            return labels
        return mixed(labels, self.soft.window(w.contig, w.start, w.bins, self.stride, rc=rc), self.soft_weight)

    def collate(self, windows: list[Window], rng: np.random.Generator | None = None, *,
                rc_prob: float = 0.0, mutate_prob: float = 0.0) -> Batch:
        """Tokens and targets of ``windows``; with ``rng``, each reverse-complemented with probability rc_prob and
        its bases substituted with probability mutate_prob (``track_augment.collate_windows``)."""
        return collate_windows(self, windows, rng, rc_prob=rc_prob, mutate_prob=mutate_prob)

    def positive_rate(self, regions: list[Region]) -> float:
        """Fraction of (bin, strand) targets that are 1 over the regions (``track_labels.positive_rate``)."""
        return positive_rate(self.tss, regions, self.stride, self.tolerance_bins)


def check_circular(names: list[str] | tuple[str, ...], *data: TrackData) -> None:
    """An InputError naming --circular for the first of ``names`` (besides ``CIRCULAR_ALL``) that is the name
    (or key) of no contig of the genomes of ``data``."""
    known = {n for d in data for key in d.lengths for n in (key, d.contig_name(key))}
    for name in names:
        if name != CIRCULAR_ALL and name not in known:
            contigs = [c for d in data for c in d.lengths]
            paths = ", ".join(str(g.path) for d in data for g in d.genomes)
            raise InputError(None, f"--circular: no contig {name!r} in {paths} (its contigs: "
                                   f"{', '.join(contigs[:5])}{', ...' if len(contigs) > 5 else ''})")


def genome_name(path) -> str:
    """``dir/BACILLUS.fasta.gz`` -> ``BACILLUS``."""
    return file_stem(path, FASTA_SUFFIXES)


def shared_contigs(genomes: list[Genome]) -> list[str]:
    """Contig names found in more than one of the genomes, sorted."""
    from collections import Counter

    counts = Counter(c for g in genomes for c in g.lengths)
    return sorted(c for c, n in counts.items() if n > 1)


def unique_genome_names(genomes: list[Genome]) -> list[str]:
    """A short name per genome (``genome_name`` of its file), unique (``unique_names``: a name taken already
    suffixed with the first free _2, _3, ...)."""
    return unique_names([genome_name(g.path) for g in genomes])
