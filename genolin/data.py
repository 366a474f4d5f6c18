"""Token batches for the two tasks.

Sequence classification (a LabelledSet):
    ids (B, T) int64 ([PAD] = 0), mask (B, T) bool, labels (B,) int64; T = the longest sequence's tokens.
    Batches group sequences of similar length (length-bucketed) under a batch size and a token budget.
Genome track (FASTA + TSS BED):
    a window of W bp starting at position a (a multiple of the stride s) has W / s bins; bin t covers
    [a + t s, a + (t + 1) s) and its token is the k-mer starting at a + t s (reading up to k - 1 bases past the
    window; N beyond the contig). ids (B, W/s), mask (B, W/s), targets (B, W/s, 2) float: channel 0 is 1 where a
    + strand TSS lies in the bin (or within ``tolerance`` bins), channel 1 the same for - strand TSSs.

Reverse-complement augmentation: for sequences, the token RC map reversed (stride 1) or re-tokenizing the reverse
complement; for windows, the reverse complement of the window's bases with the bins reversed and the strands
swapped, which is exactly the mirrored target. Random shifts: sequences lose up to ``max_shift`` leading bases;
windows start at random offsets every epoch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from genolin.errors import InputError
from genolin.io.bed import Interval
from genolin.io.fasta import Genome
from genolin.io.labelled import LabelledSet
from genolin.tokenize import PAD, kmer_ids, n_tokens, reverse_complement, reverse_complement_map


@dataclass
class Batch:
    ids: torch.Tensor  # (B, T) int64
    mask: torch.Tensor  # (B, T) bool
    labels: torch.Tensor | None = None  # (B,) int64
    targets: torch.Tensor | None = None  # (B, T, 2) float32

    def to(self, device) -> Batch:
        fields = (self.ids, self.mask, self.labels, self.targets)
        return Batch(*(None if t is None else t.to(device, non_blocking=True) for t in fields))

    @property
    def n_tokens(self) -> int:
        return int(self.mask.sum())


def pad_tokens(token_arrays: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token arrays of different lengths: ids (B, T) padded with [PAD], mask (B, T)."""
    width = max(1, max(len(t) for t in token_arrays))
    ids = np.full((len(token_arrays), width), PAD, dtype=np.int64)
    for i, t in enumerate(token_arrays):
        ids[i, : len(t)] = t
    ids_t = torch.from_numpy(ids)
    return ids_t, ids_t != PAD


def length_batches(lengths: np.ndarray, batch_size: int, max_tokens: int, rng: np.random.Generator | None
                   ) -> list[list[int]]:
    """Indices grouped into batches of similar length: at most ``batch_size`` items and ``max_tokens`` padded
    tokens (a longer item gets a batch of its own). Shuffled when ``rng`` is given, in a fixed order otherwise."""
    order = rng.permutation(len(lengths)) if rng is not None else np.arange(len(lengths))
    pool = max(batch_size * 50, 1)
    batches: list[list[int]] = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p:p + pool].tolist(), key=lambda i: -lengths[i])
        current: list[int] = []
        for i in chunk:
            longest = lengths[current[0]] if current else lengths[i]
            if current and (len(current) >= batch_size or (len(current) + 1) * longest > max_tokens):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
    if rng is not None:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


class SequenceData:
    """A labelled set as tokens. ``k``/``stride`` as the tokenizer; sequences shorter than k are an error."""

    def __init__(self, dataset: LabelledSet, *, k: int, stride: int):
        self.dataset, self.k, self.stride = dataset, k, stride
        for i, seq in enumerate(dataset.seqs):
            if len(seq) < k:
                raise InputError(dataset.source, f"sequence {dataset.ids[i]!r} has {len(seq)} bases, fewer than "
                                                 f"k = {k}")
        self.lengths = np.array([n_tokens(len(s), k, stride) for s in dataset.seqs])
        # Stride 1: tokenize once; RC and shifts then work on tokens. Otherwise re-tokenize per batch.
        self.tokens = [kmer_ids(s, k, 1) for s in dataset.seqs] if stride == 1 else None

    def __len__(self) -> int:
        return len(self.dataset)

    def tokens_of(self, i: int, *, rc: bool = False, shift: int = 0) -> np.ndarray:
        if self.tokens is not None:
            ids = self.tokens[i]
            if rc:
                ids = reverse_complement_map(self.k)[ids][::-1]
            return ids[shift:] if shift < len(ids) else ids[-1:]
        seq = self.dataset.seqs[i]
        if rc:
            seq = reverse_complement(seq)
        if len(seq) - shift >= self.k:
            seq = seq[shift:]
        return kmer_ids(seq, self.k, self.stride)

    def batches(self, batch_size: int, max_tokens: int, rng: np.random.Generator | None = None) -> list[list[int]]:
        return length_batches(self.lengths, batch_size, max_tokens, rng)

    def collate(self, indices: list[int], rng: np.random.Generator | None = None, *, rc_prob: float = 0.0,
                max_shift: int = 0) -> Batch:
        arrays = []
        for i in indices:
            rc = rng is not None and rc_prob > 0 and rng.random() < rc_prob
            shift = int(rng.integers(0, max_shift + 1)) if rng is not None and max_shift > 0 else 0
            arrays.append(self.tokens_of(i, rc=rc, shift=shift))
        ids, mask = pad_tokens(arrays)
        return Batch(ids, mask, labels=torch.as_tensor(self.dataset.labels[indices], dtype=torch.int64))


@dataclass(frozen=True)
class Window:
    contig: str
    start: int  # a multiple of the stride
    bins: int


class TrackData:
    """Windows of a genome with per-bin, per-strand TSS targets."""

    def __init__(self, genomes: Genome | list[Genome], tss: list[Interval], *, window: int, k: int, stride: int,
                 tolerance: int = 0, tss_source: str = "TSS BED"):
        if window % stride:
            raise ValueError(f"window ({window}) must be a multiple of stride ({stride})")
        self.genomes = [genomes] if isinstance(genomes, Genome) else list(genomes)
        self.window, self.k, self.stride, self.tolerance = window, k, stride, tolerance
        self.lengths: dict[str, int] = {}
        self._genome_of: dict[str, Genome] = {}
        for genome in self.genomes:
            for contig, length in genome.lengths.items():
                if contig in self.lengths:
                    raise InputError(genome.path, f"contig {contig!r} is also in {self._genome_of[contig].path}")
                self.lengths[contig], self._genome_of[contig] = length, genome
        names = ", ".join(str(g.path) for g in self.genomes)
        plus: dict[str, list[int]] = {c: [] for c in self.lengths}
        minus: dict[str, list[int]] = {c: [] for c in self.lengths}
        for iv in tss:
            if iv.chrom not in self.lengths:
                raise InputError(tss_source, f"contig {iv.chrom!r} is not in {names}")
            if iv.strand == "+":
                plus[iv.chrom].append(iv.start)
            elif iv.strand == "-":
                minus[iv.chrom].append(iv.end - 1)
            else:
                raise InputError(tss_source, f"TSS {iv.name!r} at {iv.chrom}:{iv.start} has no strand ('+' or '-' "
                                             f"in column 6)")
        self.tss = {c: (np.sort(np.array(plus[c], dtype=np.int64)), np.sort(np.array(minus[c], dtype=np.int64)))
                    for c in self.lengths}

    # -- windows --------------------------------------------------------------------------------------------
    def split(self, val_fraction: float) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
        """(train regions, validation regions): the last ``val_fraction`` of each contig is held out."""
        train, val = [], []
        for contig, length in self.lengths.items():
            cut = int(length * (1 - val_fraction)) // self.stride * self.stride
            if cut > 0:
                train.append((contig, 0, cut))
            if cut < length:
                val.append((contig, cut, length))
        return train, val

    def check_fits(self, regions: list[tuple[str, int, int]], what: str) -> list[tuple[str, int, int]]:
        """Regions long enough for one window (plus k-mer context); InputError when none is."""
        usable = [r for r in regions if r[2] - r[1] >= self.window + self.k - 1]
        if not usable:
            longest = max((r[2] - r[1] for r in regions), default=0)
            raise InputError(self.genomes[0].path, f"the window of {self.window:,} bp is longer than every contig's "
                                               f"{what} ({longest:,} bp at most); use a smaller --config window")
        return usable

    def random_windows(self, regions: list[tuple[str, int, int]], rng: np.random.Generator,
                       count: int | None = None) -> list[Window]:
        """Windows at random offsets inside the regions (never crossing their ends, k-mer context included)."""
        spans = np.array([r[2] - r[1] - self.window - self.k + 2 for r in regions], dtype=np.float64)
        count = count or max(1, int(sum(r[2] - r[1] for r in regions) // self.window))
        picks = rng.choice(len(regions), size=count, p=spans / spans.sum())
        out = []
        for r in picks:
            contig, a, _ = regions[r]
            offset = int(rng.integers(0, int(spans[r]))) // self.stride * self.stride
            out.append(Window(contig, a + offset, self.window // self.stride))
        return out

    def tiled_windows(self, regions: list[tuple[str, int, int]]) -> list[Window]:
        """Consecutive windows covering the regions (the last of each may be shorter)."""
        out = []
        for contig, a, b in regions:
            a = -(-a // self.stride) * self.stride
            for s in range(a, b, self.window):
                bins = (min(s + self.window, b) - s) // self.stride
                if bins * self.stride >= self.k:
                    out.append(Window(contig, s, bins))
        return out

    # -- tokens and targets ------------------------------------------------------------------------------------
    def bases(self, w: Window) -> bytes:
        """The window's bases with k - 1 bases of context on each side, N beyond the contig."""
        length = self.lengths[w.contig]
        a, b = w.start - (self.k - 1), w.start + w.bins * self.stride + self.k - 1
        core = self._genome_of[w.contig].fetch(w.contig, max(a, 0), min(b, length))
        return b"N" * max(0, -a) + core + b"N" * max(0, b - length)

    def tokens(self, w: Window, *, rc: bool = False, bases: bytes | None = None) -> np.ndarray:
        seq = bases if bases is not None else self.bases(w)
        if rc:
            seq = reverse_complement(seq)
        return kmer_ids(seq[self.k - 1:], self.k, self.stride)[: w.bins]

    def targets(self, w: Window, *, rc: bool = False) -> np.ndarray:
        """(bins, 2) float32: + and - strand TSS in each bin (with tolerance); mirrored and swapped when rc."""
        out = np.zeros((w.bins, 2), dtype=np.float32)
        end = w.start + w.bins * self.stride
        for channel, positions in enumerate(self.tss[w.contig]):
            lo, hi = np.searchsorted(positions, [w.start, end])
            bins = (positions[lo:hi] - w.start) // self.stride
            for d in range(-self.tolerance, self.tolerance + 1):
                b = bins + d
                out[b[(b >= 0) & (b < w.bins)], channel] = 1.0
        if rc:
            out = out[::-1, ::-1].copy()
        return out

    def collate(self, windows: list[Window], rng: np.random.Generator | None = None, *,
                rc_prob: float = 0.0) -> Batch:
        arrays, targets = [], []
        for w in windows:
            rc = rng is not None and rc_prob > 0 and rng.random() < rc_prob
            arrays.append(self.tokens(w, rc=rc))
            targets.append(self.targets(w, rc=rc))
        ids, mask = pad_tokens(arrays)
        t = np.zeros((len(windows), ids.shape[1], 2), dtype=np.float32)
        for i, tg in enumerate(targets):
            t[i, : len(tg)] = tg
        return Batch(ids, mask, targets=torch.from_numpy(t))

    def positive_rate(self, regions: list[tuple[str, int, int]]) -> float:
        """Fraction of (bin, strand) targets that are 1 over the regions (approximate at tolerance overlaps)."""
        bins = sum((b - a) // self.stride for _, a, b in regions) * 2
        hits = 0
        for contig, a, b in regions:
            for positions in self.tss[contig]:
                lo, hi = np.searchsorted(positions, [a, b])
                hits += len(np.unique((positions[lo:hi] - a) // self.stride))
        return hits * (2 * self.tolerance + 1) / max(bins, 1)


def auto_pos_weight(rate: float, cap: float = 1000.0) -> float:
    """BCE weight for positives that balances a positive rate: (1 - p) / p, between 1 and ``cap``."""
    if rate <= 0:
        return 1.0
    return float(min(max((1 - rate) / rate, 1.0), cap))


def class_weights(labels: np.ndarray, n_classes: int) -> torch.Tensor:
    """Inverse-frequency weights, mean 1 over the classes present."""
    counts = np.bincount(labels, minlength=n_classes).astype(np.float64)
    w = np.where(counts > 0, counts.sum() / np.maximum(counts, 1) / n_classes, 0.0)
    return torch.tensor(w / w[counts > 0].mean(), dtype=torch.float32)


__all__ = ["Batch", "SequenceData", "TrackData", "Window", "auto_pos_weight", "class_weights", "length_batches",
           "pad_tokens"]
