"""Genome promoter tracks: genome FASTA(s) + TSS BED -> per-bin, per-strand promoter probabilities.

Windows and bins: a window of W bp starting at position a (a multiple of the stride s) has W / s bins; bin t
covers [a + t s, a + (t + 1) s) and its token is the k-mer starting at a + t s (reading up to k - 1 bases past
the window; N beyond the contig). Batches: ids (B, W/s), mask (B, W/s), targets (B, W/s, 2) float: channel 0 is 1
where a + strand TSS lies in the bin (or within ``tolerance_bins`` bins), channel 1 the same for - strand TSSs.
Training windows start at random offsets every epoch; reverse-complement augmentation takes the reverse
complement of the window's bases with the bins reversed and the strands swapped (exactly the mirrored target).

Head: 2 logits per token; loss: binary cross-entropy on real bins with ``pos_weight`` on positives (default:
balancing the training positive rate); probabilities: sigmoid of the logits minus ln(pos_weight), i.e. calibrated
back to the training positive rate (the ranking, hence AUROC / AUPRC, is unchanged).

Circular contigs (those whose FASTA header says ``topology=circular`` or ``circular=true``, and those named by
``DataSpec.circular``, "all" for every one): a region that is a whole circular contig is read as a circle. Its
training windows start anywhere on it and run on across the origin; its prediction windows start before the origin
and end past the contig's end, so every bin has its real context; TSS positions repeat every turn, so a TSS at 5 is
at 5 + length - start in a window that starts before the end and wraps; calls are decided with the bins across the
origin as neighbours. Outputs stay in the contig's coordinates, each bin once. A part of a contig (the held-out end
and the training part before it) stays a linear stretch, so no window of one reads the other; the k - 1 bases of
k-mer context beyond a circular contig's end are always its other end's.

Several genomes: one FASTA each (named by file name), TSS BEDs paired with them in order or one BED naming contigs
of all; training windows are drawn across genomes in proportion to their length.

Scoring: genome regions (``GenomeRegions``) stream through overlapping windows (``Predictor.region_probs``; bins
made only of N get probability 0) and are scored per genome and over all genomes, in evaluation bins of
``eval_bin_bp`` (default 50 bp) per strand: a bin is positive when a TSS of its strand lies inside it, its score is
the highest model-bin probability inside it (AUROC, AUPRC with the positive rate, MCC/F1 at a threshold). Promoter
calls (the peaks of ``genolin predict``: at a call density or a threshold) are matched to TSSs of their strand:
precision and recall within 20 and 100 bp, calls per Mbp. The validation score is the mean over genomes of their
pooled AUPRC. Validation during training and ``genolin evaluate`` share this one path: the held-out end of each contig
(``val_fraction``; ``evaluate --held-out``) or whole genomes (``--val-fasta``; ``evaluate`` on other genomes).

Predictions (``genolin predict``): OUT.plus.bedGraph and OUT.minus.bedGraph (per-bin probability, 0-based
half-open, sorted, covering every contig, equal rounded runs merged) and OUT.peaks.bed (BED6 calls: bins whose
probability is the highest within +- min_distance bp on their strand, each contig's most probable ones at a call
density, or those >= a threshold; score = 1000 p): the files
are ``genolin.io.tracks``'s, the calls ``genolin.peaks``'s. Under torchrun the ranks share the batches of windows,
every rank gets every bin, and rank 0 writes the plus strand, rank 1 the minus strand (``_predict_shares``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from genolin.config import DataSpec, TrainConfig
from genolin.errors import InputError
from genolin.io.bed import Interval
from genolin.io.fasta import Genome
from genolin.io.tracks import STRANDS, TRACK_FORMATS, CallsBed, track_outputs, track_paths
from genolin.peaks import StrandedPeaks, density_quotas, resolvable_density
from genolin.tasks.base import Batch, PredictOptions, Task, pad_tokens
from genolin.tasks.metrics import binary_metrics, max_f1_threshold
from genolin.tokenize import kmer_ids, reverse_complement, substitute

log = logging.getLogger(__name__)

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

    def random_windows(self, regions: list[Region], rng: np.random.Generator, count: int | None = None
                       ) -> list[Window]:
        """Windows at random offsets inside the regions (never crossing their ends, k-mer context included; a
        circle's start anywhere on it, running on across the origin)."""
        spans = np.array([r[2] if self.wraps(r) else r[2] - r[1] - self.window_bp - self.k + 2 for r in regions],
                         dtype=np.float64)
        count = count or max(1, int(sum(r[2] - r[1] for r in regions) // self.window_bp))
        picks = rng.choice(len(regions), size=count, p=spans / spans.sum())
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
        """(bins, 2) float32: + and - strand TSS in each bin (with tolerance); mirrored and swapped when rc. On a
        circular contig a TSS at p is also at p + j length for every turn j of the circle the window spans."""
        out = np.zeros((w.bins, 2), dtype=np.float32)
        end = w.start + w.bins * self.stride
        length = self.lengths[w.contig]
        for channel, positions in enumerate(self.tss[w.contig]):
            if w.contig in self.circular:
                positions = np.concatenate([positions + j * length for j in range(w.start // length,
                                                                                  -(-end // length))])
            lo, hi = np.searchsorted(positions, [w.start, end])
            bins = (positions[lo:hi] - w.start) // self.stride
            for d in range(-self.tolerance_bins, self.tolerance_bins + 1):
                b = bins + d
                out[b[(b >= 0) & (b < w.bins)], channel] = 1.0
        if rc:
            out = out[::-1, ::-1].copy()
        return out

    def collate(self, windows: list[Window], rng: np.random.Generator | None = None, *,
                rc_prob: float = 0.0, mutate_prob: float = 0.0) -> Batch:
        """Tokens and targets of ``windows``; with ``rng``, each reverse-complemented with probability rc_prob and
        its bases substituted with probability mutate_prob (``substitute``; targets unchanged)."""
        arrays, targets = [], []
        for w in windows:
            rc = rng is not None and rc_prob > 0 and rng.random() < rc_prob
            bases = None
            if rng is not None and mutate_prob > 0:
                bases = substitute(self.bases(w), rng, mutate_prob)
            arrays.append(self.tokens(w, rc=rc, bases=bases))
            targets.append(self.targets(w, rc=rc))
        ids, mask = pad_tokens(arrays)
        t = np.zeros((len(windows), ids.shape[1], 2), dtype=np.float32)
        for i, tg in enumerate(targets):
            t[i, : len(tg)] = tg
        return Batch(ids, mask, targets=torch.from_numpy(t))

    def positive_rate(self, regions: list[Region]) -> float:
        """Fraction of (bin, strand) targets that are 1 over the regions (approximate at tolerance overlaps)."""
        bins = sum((b - a) // self.stride for _, a, b in regions) * 2
        hits = 0
        for contig, a, b in regions:
            for positions in self.tss[contig]:
                lo, hi = np.searchsorted(positions, [a, b])
                hits += len(np.unique((positions[lo:hi] - a) // self.stride))
        return hits * (2 * self.tolerance_bins + 1) / max(bins, 1)


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


def _contig_list(data: TrackData, contigs: dict[str, int], most: int = 3) -> str:
    """"genome A contig(s) x, y; genome B ..." for the contigs with a nonzero value, at most ``most`` named each."""
    by_genome: dict[str, list[str]] = {}
    for c, value in contigs.items():
        if value:
            by_genome.setdefault(data.genome_of(c), []).append(data.contig_name(c))
    parts = []
    for genome, names in by_genome.items():
        more = f" and {len(names) - most} more" if len(names) > most else ""
        parts.append(f"genome {genome} contig{'s' if len(names) > 1 else ''} {', '.join(names[:most])}{more}")
    return "; ".join(parts)


def genome_name(path) -> str:
    """``dir/BACILLUS.fasta.gz`` -> ``BACILLUS``."""
    name = Path(path).name
    for suffix in (".gz", ".bgz", ".bgzf", ".fa", ".fasta", ".fna", ".fas", ".faa"):
        name = name.removesuffix(suffix)
    return name or Path(path).name


def shared_contigs(genomes: list[Genome]) -> list[str]:
    """Contig names found in more than one of the genomes, sorted."""
    from collections import Counter

    counts = Counter(c for g in genomes for c in g.lengths)
    return sorted(c for c, n in counts.items() if n > 1)


def unique_genome_names(genomes: list[Genome]) -> list[str]:
    """A short name per genome (``genome_name`` of its file), the second of equal names suffixed _2, ..."""
    names: list[str] = []
    for g in genomes:
        name = genome_name(g.path)
        names.append(name if name not in names else f"{name}_{len(names) + 1}")
    return names


@dataclass
class GenomeRegions:
    """What a track model is scored on: regions of genomes, every bin of them."""

    data: TrackData
    regions: list[Region]
    note: str = ""  # what was scored, when a genome overlaps the run's training data


@dataclass
class GenomeScores:
    """One genome's scores: evaluation bins (n, 2) of targets and max probabilities, calls and annotated TSSs."""

    y: np.ndarray  # (n, 2) int8: a TSS of that strand in the bin
    p: np.ndarray  # (n, 2) float32: the highest bin probability inside the evaluation bin
    calls: dict  # (contig, strand) -> sorted positions of called promoters (bin centres, bp)
    tss: dict  # (contig, strand) -> sorted TSS positions inside the scored regions
    bp: int  # bases scored
    circles: dict = dataclasses.field(default_factory=dict)  # (contig, strand) -> length, for whole circles
    call_threshold: float | None = 0.5  # the calls' probability threshold: the one given, or a density's lowest cut


def auto_pos_weight(rate: float, cap: float = 1000.0) -> float:
    """BCE weight for positives that balances a positive rate: (1 - p) / p, between 1 and ``cap``."""
    if rate <= 0:
        return 1.0
    return float(min(max((1 - rate) / rate, 1.0), cap))


def track_metrics(y: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> dict:
    """y, probs (n_bins, 2): metrics for the + strand, the - strand and both pooled."""
    return {
        "plus": binary_metrics(y[:, 0], probs[:, 0], threshold),
        "minus": binary_metrics(y[:, 1], probs[:, 1], threshold),
        "pooled": binary_metrics(y.reshape(-1), probs.reshape(-1), threshold),
    }


CALL_DISTANCES_BP = (20, 100)
CALL_DISTANCE_BP = 100  # predict's and evaluate's default --min-distance: the resolution of a call density


def _near(a: np.ndarray, b: np.ndarray, d: int, circle: int | None = None) -> np.ndarray:
    """(len(a),) bool: each sorted position of ``a`` has a position of sorted ``b`` within d (on a circle of
    ``circle`` bp, positions of [0, circle): the distance around the origin counts too)."""
    if not len(b):
        return np.zeros(len(a), dtype=bool)
    if circle:  # b - circle, b, b + circle: still sorted, as every position lies in [0, circle)
        b = np.concatenate([b - circle, b, b + circle])
    i = np.clip(np.searchsorted(b, a), 1, len(b) - 1) if len(b) > 1 else np.zeros(len(a), dtype=np.int64)
    nearest = np.minimum(np.abs(a - b[i]), np.abs(a - b[np.maximum(i - 1, 0)]))
    return nearest <= d


def call_metrics(calls: dict, tss: dict, bp: int, threshold: float | None, circles: dict | None = None,
                 density: float | None = None) -> dict:
    """Promoter calls against annotated TSSs of the same strand: precision (calls with a TSS within d bp) and
    recall (TSSs with a call within d bp) for d in CALL_DISTANCES_BP, and calls per Mbp. ``threshold``: the calls'
    probability cut (None: one per genome); ``density``: the calls per Mbp asked for, when a density chose them.
    ``circles``: key -> length for the keys of whole circular contigs, whose distances run around the origin too."""
    circles = circles or {}
    keys = set(calls) | set(tss)
    empty = np.zeros(0, dtype=np.int64)
    n_calls = sum(len(v) for v in calls.values())
    n_tss = sum(len(v) for v in tss.values())
    out = {"threshold": threshold, "density": density, "calls": n_calls, "tss": n_tss,
           "calls_per_mbp": n_calls / max(bp, 1) * 1e6}
    for d in CALL_DISTANCES_BP:
        hit_calls = sum(int(_near(calls.get(k, empty), tss.get(k, empty), d, circles.get(k)).sum()) for k in keys)
        hit_tss = sum(int(_near(tss.get(k, empty), calls.get(k, empty), d, circles.get(k)).sum()) for k in keys)
        out[f"precision_{d}bp"] = hit_calls / n_calls if n_calls else None
        out[f"recall_{d}bp"] = hit_tss / n_tss if n_tss else None
    return out


def score_regions(predictor, data: TrackData, regions: list[Region], *, bin_bp: int, threshold: float,
                  min_distance_bp: int, rc_average: bool = False, calls_per_mbp: float | None = None,
                  progress: bool | None = None) -> dict[str, GenomeScores]:
    """Every region streamed through the model; per genome (in order): evaluation bins of ``bin_bp`` (target: a TSS
    of the strand inside, score: the highest model-bin probability overlapping it), and promoter calls
    (``StrandedPeaks``: local maxima at ``threshold``, ``min_distance_bp`` apart; with ``calls_per_mbp``, instead
    each region's most probable local maxima, as many as its ``density_quotas`` share over the regions in order, as
    predict calls each contig) with the TSSs they are matched against."""
    stride = data.stride
    parts: dict[str, dict] = {name: {"y": [], "p": [], "calls": {}, "tss": {}, "bp": 0, "circles": {}} for name in
                              dict.fromkeys(data.genome_of(c) for c, _, _ in regions)}
    quotas = density_quotas([b - a for _, a, b in regions], calls_per_mbp) if calls_per_mbp is not None else None
    for i, (contig, a, b) in enumerate(regions):
        part = parts[data.genome_of(contig)]
        e0, e1 = a // bin_bp, -(-b // bin_bp)
        y = np.zeros((e1 - e0, 2), dtype=np.int8)
        p = np.zeros((e1 - e0, 2), dtype=np.float32)
        end_bin = -(-b // stride)
        peaks = StrandedPeaks(threshold, min_distance_bp // stride,
                              {contig: end_bin} if data.wraps((contig, a, b)) else None,
                              quotas={contig: quotas[i]} if quotas is not None else None)
        found: list[tuple[int, float, str]] = []
        for _, first, probs in predictor.region_probs(data, [(contig, a, b)], rc_average=rc_average,
                                                      progress=progress):
            starts = (first + np.arange(len(probs))) * stride
            lo = np.maximum(starts, a) // bin_bp - e0
            hi = (np.minimum(starts + stride, b) - 1) // bin_bp - e0
            for idx in (lo, hi):  # a model bin overlaps one evaluation bin or two
                np.maximum.at(p, idx, probs)
            called = peaks.feed(contig, first, probs, final=first + len(probs) == end_bin)
            found = found if called is None else called  # the region's calls come with its last piece
        if peaks.cut is not None and peaks.cut.k:  # a region with no calls to make has no cut
            part["cuts"] = part.get("cuts", []) + [peaks.cut.floor]
        for strand, positions in enumerate(data.tss[contig]):
            inside = positions[(positions >= a) & (positions < b)]
            y[inside // bin_bp - e0, strand] = 1
            part["tss"][(contig, strand)] = inside
            part["calls"][(contig, strand)] = _positions(found, "+-"[strand], stride)
            if data.wraps((contig, a, b)):
                part["circles"][(contig, strand)] = b
        part["y"].append(y)
        part["p"].append(p)
        part["bp"] += b - a
    # a density's cut differs by region: the lowest (the probability every call reaches; None: no calls to make)
    return {name: GenomeScores(np.concatenate(v["y"]), np.concatenate(v["p"]), v["calls"], v["tss"], v["bp"],
                               v["circles"], threshold if calls_per_mbp is None else min(v.get("cuts", [None])))
            for name, v in parts.items()}


def call_rule(options: PredictOptions) -> str:
    """How predict calls promoters, for the BED's track line: "threshold T" or "N per Mbp"."""
    if options.calls_per_mbp is None:
        return f"threshold {options.threshold}"
    return f"the {options.calls_per_mbp:.4g} per Mbp most probable local maxima of each contig"


def _positions(calls: list[tuple[int, float, str]], strand: str, stride: int) -> np.ndarray:
    """Sorted bp positions (bin centres) of the calls of one strand."""
    return np.array(sorted(b * stride + stride // 2 for b, _, s in calls if s == strand), dtype=np.int64)


def cell(v, fmt: str = ".4f") -> str:
    """A report table's cell: ``v`` formatted, or "n/a"."""
    return "n/a" if v is None else format(v, fmt)


def trained_bp(train_contigs: list | None, data: TrackData) -> dict[str, int]:
    """Contig key -> bases from its start that a run trained on (``train_contigs``: (name, length, end) of its
    config), for the contigs of ``data`` it trained on (known by name and length)."""
    if not train_contigs:
        return {}
    ends = {(name, length): end for name, length, end in train_contigs}
    return {c: ends[(data.contig_name(c), n)] for c, n in data.lengths.items() if (data.contig_name(c), n) in ends}


def scope_note(train_contigs: list | None, data: TrackData, trained: dict[str, int], regions: list[Region],
               held_out: bool | None) -> str:
    """What was scored of the genomes a run trained on, in a sentence, also logged; "" without overlap."""
    if train_contigs is None and held_out is None:
        log.info("this run does not record the contigs it trained on: scoring every bin (--held-out: the end "
                 "of each contig that training holds out)")
    overlap = {c: sum(max(0, min(b, trained[c]) - a) for r, a, b in regions if r == c) for c in trained}
    if held_out is None and trained:
        note = (f"this run trained on {_contig_list(data, trained)}: scored of them only the "
                f"{sum(data.lengths[c] - e for c, e in trained.items()):,} bp that training held out "
                f"(--whole-genome scores every bin, training part included)")
    elif any(overlap.values()):
        note = (f"this run trained on {sum(overlap.values()):,} of the scored bp ({_contig_list(data, overlap)}): "
                f"metrics there are no test (evaluate's default scores only what training held out)")
    else:
        return ""
    log.warning("%s", note)
    return note


class TrackTask(Task):
    name = "track"
    strands = STRANDS
    has_track = True
    threshold_metric = "F1"
    ensemble_shared = ("k", "stride", "window_bp", "eval_bin_bp")

    def __init__(self, cfg: TrainConfig, state: dict | None = None):
        super().__init__(cfg, state)
        self.pos_weight: float | None = (state or {}).get("pos_weight")
        # [contig, length, bp read from its start] per training contig: evaluate tells training genomes by it
        self.train_contigs: list | None = (state or {}).get("train_contigs")
        # [contig, length] per contig training or validation read as circular: evaluate and predict read a contig
        # of the same name and length as circular too
        self.circular_contigs: list | None = (state or {}).get("circular_contigs")
        # TSSs per Mbp of the training genomes that calls 100 bp apart could tell apart: predict's and evaluate's
        # default call density (None: a run from before it was kept, which calls above its threshold)
        self.tss_per_mbp: float | None = (state or {}).get("tss_per_mbp")
        self.train_regions: list[Region] = []

    def state(self) -> dict:
        return {"classes": list(self.strands), "pos_weight": self.pos_weight, "train_contigs": self.train_contigs,
                "circular_contigs": self.circular_contigs, "tss_per_mbp": self.tss_per_mbp}

    def scoring_data(self, fastas: list[str], tss_paths: list[str], circular: list[str] | tuple[str, ...]
                     ) -> TrackData:
        """Genomes to score (evaluate, predict): loaded with their TSS BEDs (none: unlabelled), the --circular names
        checked, and the contigs training read as circular (by name and length) circular too."""
        data = TrackData.load(fastas, tss_paths, self.cfg, circular)
        check_circular(circular, data)
        added = data.circles_as(self.circular_contigs)
        if added:
            log.info("read as circular, as in training: %s", ", ".join(added))
        return data

    def head(self) -> dict:
        return {"n_classes": 0, "track_channels": 2}

    def longest_tokens(self) -> int:
        return self.cfg.window_bp // self.cfg.stride

    def largest_batch(self) -> tuple[int, str]:
        return (self.cfg.batch_size * self.longest_tokens(),
                f"{self.cfg.batch_size} windows of {self.cfg.window_bp:,} bp, {self.longest_tokens():,} tokens each")

    # -- training ----------------------------------------------------------------------------------------------
    def load_training(self, spec: DataSpec) -> None:
        cfg = self.cfg
        self.train = TrackData.load(spec.fasta, spec.tss, cfg, spec.circular)
        if spec.val_fasta:
            val = TrackData.load(spec.val_fasta, spec.val_tss, cfg, spec.circular)
            check_circular(spec.circular, self.train, val)
            self.val_set = GenomeRegions(val, val.whole())
            regions = self.train.whole()
        else:
            check_circular(spec.circular, self.train)
            regions, val_regions = self.train.split(cfg.val_fraction)
            self.val_set = GenomeRegions(self.train, val_regions)
        self.train_regions = self.train.check_fits(regions, "training part")
        self.train_contigs = [[self.train.contig_name(c), self.train.lengths[c], b] for c, _, b in self.train_regions]
        self.circular_contigs = sorted({(d.contig_name(c), d.lengths[c]) for d in (self.train, self.val_set.data)
                                        for c in d.circular})
        rate = self.train.positive_rate(self.train_regions)
        self.pos_weight = cfg.pos_weight if cfg.pos_weight is not None else auto_pos_weight(rate)
        self.tss_per_mbp = resolvable_density([pos for pair in self.train.tss.values() for pos in pair],
                                              sum(self.train.lengths.values()), CALL_DISTANCE_BP)
        self._loss_weight = torch.tensor([self.pos_weight, self.pos_weight])
        val = self.val_set.data
        val_bp = {g: 0 for g in val.genome_names}
        for contig, a, b in self.val_set.regions:
            val_bp[val.genome_of(contig)] += b - a
        log.info("track: %d genome(s) (%s), %d training region(s), positive rate %.5f, pos_weight %.1f, %.0f TSSs "
                 "per Mbp %d bp apart; validation: %s", len(self.train.genomes), ", ".join(self.train.genome_names),
                 len(self.train_regions), rate, self.pos_weight, self.tss_per_mbp, CALL_DISTANCE_BP,
                 ", ".join(f"{g} {n:,} bp" for g, n in val_bp.items()))

    def epoch_batches(self, rng: np.random.Generator, n_batches: int | None = None) -> list[list[Window]]:
        bs = self.cfg.batch_size
        count = n_batches * bs if n_batches else self.cfg.windows_per_epoch
        windows = self.train.random_windows(self.train_regions, rng, count)
        return [windows[i:i + bs] for i in range(0, len(windows), bs)]

    def collate(self, items: list[Window], rng: np.random.Generator | None, progress: float = 1.0) -> Batch:
        return self.train.collate(items, rng, rc_prob=self.cfg.rc_prob, mutate_prob=self.cfg.mutate_prob)

    def loss(self, out, batch: Batch) -> torch.Tensor:
        """Positive-weighted binary cross-entropy over the real bins; with ``focal_gamma`` g > 0 each term is
        scaled by (1 - p_t)^g, p_t the probability given to the true class (focal loss)."""
        logits, targets = out.track.float()[batch.mask], batch.targets[batch.mask]
        weight = self.weight_on(logits.device)
        if not self.cfg.focal_gamma:
            return F.binary_cross_entropy_with_logits(logits, targets, pos_weight=weight)
        terms = F.binary_cross_entropy_with_logits(logits, targets, pos_weight=weight, reduction="none")
        p = torch.sigmoid(logits)
        p_t = torch.where(targets > 0.5, p, 1 - p)
        return ((1 - p_t) ** self.cfg.focal_gamma * terms).mean()

    # -- scoring -----------------------------------------------------------------------------------------------
    def log_odds(self, out) -> torch.Tensor:
        """(B, T, 2) per-bin log-odds, prior-corrected for the positive weight used in training: weighting
        positives by w multiplies the odds the model learns by w, so ln(w) is subtracted from the logits."""
        shift = math.log(self.pos_weight) if self.pos_weight and self.pos_weight > 0 else 0.0
        return out.track.float() - shift

    def probabilities(self, out) -> torch.Tensor:
        """(B, T, 2) per-bin probabilities: the sigmoid of ``log_odds``."""
        return torch.sigmoid(self.log_odds(out))

    def load_evaluation(self, inputs: DataSpec, *, held_out: bool | None = None) -> GenomeRegions:
        """Every bin of the genomes, but of contigs this run trained on only what training left out (None); the
        end of each contig that training holds out (True); or every bin, training part included (False)."""
        if not (inputs.fasta and inputs.tss) or inputs.csv:
            raise InputError(None, "a track model is evaluated on --fasta GENOME --tss TSS.bed")
        data = self.scoring_data(inputs.fasta, inputs.tss, inputs.circular)
        trained = trained_bp(self.train_contigs, data)
        if held_out is None:
            regions = [(c, max(a, trained.get(c, 0)), b) for c, a, b in data.whole() if trained.get(c, 0) < b]
        else:
            regions = data.split(self.cfg.val_fraction)[1] if held_out else data.whole()
        if not regions:
            why = "no held-out bins" if held_out else "this run trained on every base of these genomes"
            raise InputError(None, f"nothing to evaluate: {why} (--whole-genome scores them anyway)")
        return GenomeRegions(data, regions, scope_note(self.train_contigs, data, trained, regions, held_out))

    def evaluate(self, predictor, eval_set: GenomeRegions, *, rc_average: bool = False, threshold: float | None = None,
                 min_distance_bp: int = 100, calls_per_mbp: float | None = None, progress: bool | None = None
                 ) -> tuple[dict, dict]:
        """Metrics per genome and over all genomes (bins of ``eval_bin_bp``; MCC/F1 at ``threshold``, 0.5 if None;
        calls at that threshold, or with ``calls_per_mbp`` the genome's most probable local maxima at that density);
        "score" is the mean over genomes of their pooled AUPRC; "best_threshold" the max-F1 threshold on the pooled
        bins. The second value maps genome -> GenomeScores."""
        threshold = 0.5 if threshold is None else threshold
        scores = score_regions(predictor, eval_set.data, eval_set.regions, bin_bp=self.cfg.eval_bin_bp,
                               threshold=threshold, min_distance_bp=min_distance_bp, rc_average=rc_average,
                               calls_per_mbp=calls_per_mbp, progress=progress)
        genomes = {}
        for name, g in scores.items():
            genomes[name] = {**track_metrics(g.y, g.p, threshold),
                             "calls": call_metrics(g.calls, g.tss, g.bp, g.call_threshold, g.circles,
                                                   calls_per_mbp), "bp": g.bp}
        y = np.concatenate([g.y for g in scores.values()])
        p = np.concatenate([g.p for g in scores.values()])
        calls = {(name, *k): v for name, g in scores.items() for k, v in g.calls.items()}
        tss = {(name, *k): v for name, g in scores.items() for k, v in g.tss.items()}
        circles = {(name, *k): v for name, g in scores.items() for k, v in g.circles.items()}
        metrics = {**track_metrics(y, p, threshold), "calls": call_metrics(
                       calls, tss, sum(g.bp for g in scores.values()), threshold if calls_per_mbp is None else None,
                       circles, calls_per_mbp), "bin_bp": self.cfg.eval_bin_bp, "genomes": genomes}
        metrics["score"] = float(np.mean([m["pooled"].get("auprc", 0.0) for m in genomes.values()]))
        metrics["best_threshold"] = max_f1_threshold(y, p)
        if eval_set.note:
            metrics["training_overlap"] = eval_set.note
        return metrics, scores

    # -- reports -----------------------------------------------------------------------------------------------
    def curves(self, scores: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """One curve per genome, both strands pooled."""
        return {name: (g.y.reshape(-1), g.p.reshape(-1)) for name, g in scores.items()}

    def report_lines(self, metrics: dict) -> list[str]:
        c = metrics["calls"]
        rule = (f"at threshold {c['threshold']}" if c.get("density") is None else
                f"the {c['density']:.4g} per Mbp most probable local maxima of each contig")
        lines = [f"Bins of {metrics['bin_bp']} bp per strand (a bin is positive when a TSS of its strand is in it; "
                 f"its score is the highest probability inside); calls {rule}, matched to TSSs of their strand within "
                 f"20 and 100 bp."
                 + (f" Note: {metrics['training_overlap']}." if metrics.get("training_overlap") else ""), "",
                 "| genome | strand | bins | positive rate | AUROC | AUPRC | AUPRC / rate | MCC | F1 | calls / Mbp | "
                 "precision 20 / 100 bp | recall 20 / 100 bp |",
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        rows = [(name, m) for name, m in metrics["genomes"].items()] + [("all", metrics)]
        for name, m in rows:
            for strand in ("plus", "minus", "pooled"):
                b, c = m[strand], m["calls"]
                ratio = b["auprc"] / b["positive_rate"] if "auprc" in b and b["positive_rate"] else None
                call_cells = ("", "", "") if strand != "pooled" else (
                    cell(c["calls_per_mbp"], ".1f"), f"{cell(c['precision_20bp'], '.3f')} / "
                    f"{cell(c['precision_100bp'], '.3f')}", f"{cell(c['recall_20bp'], '.3f')} / "
                    f"{cell(c['recall_100bp'], '.3f')}")
                lines.append(f"| {name} | {strand} | {b['n']:,} | {b['positive_rate']:.4f} | {cell(b.get('auroc'))} | "
                             f"{cell(b.get('auprc'))} | {cell(ratio, '.1f')} | {b['mcc']:.4f} | {b['f1']:.4f} | "
                             + " | ".join(call_cells) + " |")
        return lines

    def summary(self, metrics: dict) -> str:
        parts = [f"{name} AUPRC {m['pooled'].get('auprc', float('nan')):.4f} (positive rate "
                 f"{m['pooled']['positive_rate']:.4f})" for name, m in metrics["genomes"].items()]
        return ", ".join(parts) + f"; mean AUPRC {metrics['score']:.4f}"

    def describe(self, inputs: DataSpec, held_out: bool = False) -> str:
        return (f"genolin track evaluation: {', '.join(inputs.fasta)} against {', '.join(inputs.tss)}"
                + (" (held-out contig ends)" if held_out else ""))

    # -- outputs -----------------------------------------------------------------------------------------------
    def predict(self, predictor, inputs: DataSpec, out: str | os.PathLike, options: PredictOptions) -> str:
        """OUT.plus / OUT.minus (.bedGraph, or .bw with track_format "bigwig") and OUT.peaks.bed for every contig
        of the genome(s) (``genolin.io.tracks``). Under torchrun the ranks share the batches of windows, every rank
        gets every bin, and rank 0 writes the plus strand and the calls, rank 1 the minus strand
        (``_predict_shares``)."""
        if inputs.csv or not inputs.fasta:
            raise InputError(None, "a track model predicts on genome FASTA files (--fasta)")
        if str(out) == "-":
            raise InputError("--out", "'-' is standard output, but a track model writes three files (OUT.plus, "
                                      "OUT.minus and OUT.peaks.bed): give a prefix")
        if options.track_format not in TRACK_FORMATS:
            raise InputError(None, f"unknown track format {options.track_format!r}; choose from "
                                   f"{', '.join(TRACK_FORMATS)}")
        data = self.scoring_data(inputs.fasta, [], inputs.circular)
        if data.qualified:
            raise InputError(None, "these genomes share contig names, which one bedGraph cannot tell apart: predict "
                                   "one genome at a time")
        regions = data.whole()
        if not any(b > a for _, a, b in regions):  # records with no bases only: empty tracks would look like a result
            raise InputError(inputs.fasta[0], "no record holds any bases: nothing to predict")
        if options.contigs:
            missing = [c for c in options.contigs if c not in data.lengths]
            if missing:
                names = list(data.lengths)
                raise InputError(inputs.fasta[0], f"no contig {missing[0]!r} (--contig); its contigs: "
                                                  f"{', '.join(names[:5])}{', ...' if len(names) > 5 else ''}")
            regions = [r for r in regions if r[0] in set(options.contigs)]
        if predictor.dist.world > 1:
            return self._predict_shares(predictor, data, regions, str(out), options)
        paths = track_paths(str(out), options.track_format)
        with track_outputs(data.lengths, str(out), options.track_format, call_rule(options), self.cfg.stride) as (
                writers, calls):
            pieces = predictor.region_probs(data, regions, rc_average=options.rc_average, progress=options.progress,
                                            ahead=True)
            n_bins = self._write(pieces, data, writers, (0, 1), calls, options)
        return (f"{len(regions)} contig(s), {n_bins} bins, {calls.written} promoters called -> {paths[0]}, "
                f"{paths[1]}, {out}.peaks.bed")

    def _write(self, pieces, data: TrackData, writers, strands: tuple[int, ...], calls: CallsBed | None,
               options: PredictOptions) -> int:
        """Each piece (contig, first bin, probs (n, 2)) into ``writers`` (one per strand of ``strands``); with
        ``calls``, the promoters of both strands are called and each contig's written at its end (with
        ``options.calls_per_mbp``: the contig's calls_per_mbp x Mbp most probable local maxima). Returns the bins
        predicted."""
        stride = self.cfg.stride
        circles = {c: -(-data.lengths[c] // stride) for c in data.circular}  # predict covers whole contigs
        quotas = None  # each contig's share of the density, over every contig of the FASTA (as --contig runs get it)
        if options.calls_per_mbp is not None:
            quotas = dict(zip(data.lengths, density_quotas(data.lengths.values(), options.calls_per_mbp), strict=True))
        peaks = StrandedPeaks(options.threshold, options.min_distance_bp // stride, circles,
                              quotas=quotas) if calls is not None else None
        n_bins = 0
        for contig, first, probs in pieces:
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

    def _predict_shares(self, predictor, data: TrackData, regions: list[Region], prefix: str,
                        options: PredictOptions) -> str:
        """torchrun: the files of one process, written in shares (``Predictor.write_shares``), every rank getting
        every piece (``region_probs(everywhere=True)``): rank 0 writes the plus strand and calls the promoters of
        both, as one process does, rank 1 the minus strand, other ranks only compute."""
        shares = [(0,), (1,)]  # the strands each share writes; the first share also the calls
        log.info("batches of windows shared over %d processes; rank 0 writes the plus strand, rank 1 the minus "
                 "strand", predictor.dist.world)

        def write(share: int | None, folder: Path | None) -> str:
            strands = () if share is None else shares[share]
            quiet = options if share == 0 else dataclasses.replace(options, progress=False)
            with track_outputs(data.lengths, prefix, options.track_format, call_rule(options), self.cfg.stride,
                               strands=strands, peaks=share == 0, folder=folder) as (writers, calls):
                pieces = predictor.region_probs(data, regions, rc_average=options.rc_average,
                                                progress=quiet.progress, ahead=True, everywhere=True)
                n_bins = self._write(pieces, data, writers, strands, calls, quiet)
            if share != 0:
                return (f"rank {predictor.dist.rank}: {n_bins} bins"
                        + (", the minus strand, for rank 0" if share == 1 else ""))
            paths = track_paths(prefix, options.track_format)
            return (f"{len(regions)} contig(s) over {predictor.dist.world} processes, {n_bins} bins, {calls.written} "
                    f"promoters called -> {paths[0]}, {paths[1]}, {prefix}.peaks.bed")

        def files(share: int, folder: Path) -> list[Path]:
            paths = track_paths(str(folder / Path(prefix).name), options.track_format)
            return [Path(paths[s]) for s in shares[share]]

        return predictor.write_shares(prefix, len(shares), write, files)
