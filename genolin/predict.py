"""Prediction with a trained run: sequences -> TSV; whole genomes -> bedGraph tracks and called promoters (BED).

Sequence model: OUT is a TSV with columns id, length, prob_<class> for every class, pred, has_n.
Track model: OUT is a prefix; writes
    OUT.plus.bedGraph, OUT.minus.bedGraph   per-bin promoter probability (prior-corrected for the training positive
                                            weight, so calibrated to the training positive rate), 0-based
                                            half-open, sorted, covering every contig (equal rounded runs merged)
    OUT.peaks.bed                           BED6 promoter calls: a bin whose probability is >= threshold and the
                                            highest within +- min_distance bp on its strand; score = 1000 p
Genome prediction streams over each contig with overlapping windows of the training length and keeps only the
central part of each window (the first and last windows keep their outer edge), so memory does not grow with the
genome; bins made only of N are given probability 0. With rc_average the reverse-complement prediction (strands
swapped, bins reversed) is averaged in.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from genolin import checkpoint as ckpt
from genolin.errors import InputError

log = logging.getLogger(__name__)


@dataclass
class Run:
    model: torch.nn.Module
    config: dict
    train: object  # TrainConfig
    device: torch.device

    @property
    def task(self) -> str:
        return self.config["task"]

    @property
    def classes(self) -> list[str]:
        return self.config["classes"]


def load_run(run_dir: str | os.PathLike, device: str = "auto") -> Run:
    """The model of a run directory (best weights if present, else the last), in eval mode."""
    from genolin.model import Encoder, config_from_dict
    from genolin.train import TrainConfig

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(run_dir, "no such run directory")
    config = ckpt.read_json(run_dir / ckpt.CONFIG)
    try:
        enc_cfg = config_from_dict(config["model"])
        train_cfg = TrainConfig(**config["train"])
        if config["task"] not in ("sequence", "track"):
            raise ValueError(f"unknown task {config['task']!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(run_dir / ckpt.CONFIG, f"not a genolin run configuration ({exc})") from None
    dev = torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                       "cpu" if device == "auto" else device)
    model = Encoder(enc_cfg)
    weights = run_dir / ckpt.BEST if (run_dir / ckpt.BEST).exists() else run_dir / ckpt.WEIGHTS
    ckpt.load_weights(weights, model)
    return Run(model.to(dev).eval(), config, train_cfg, dev)


# --- sequences ------------------------------------------------------------------------------------------------


def read_unlabelled(path: str | os.PathLike, *, csv: bool = False):
    """Sequences to predict: FASTA records, or a CSV/TSV with a ``sequence`` column (labels not needed)."""
    from genolin.io.labelled import LabelledSet, read_labelled_table

    if csv:
        return read_labelled_table(path, label_column="sequence", min_classes=1)
    from genolin.io.fasta import read_fasta

    ids, seqs = [], []
    for rec in read_fasta(path, allow_empty=False):
        ids.append(rec.name)
        seqs.append(rec.seq)
    return LabelledSet(ids, seqs, np.zeros(len(ids), dtype=np.int64), ["?"], str(path))


def predict_sequences(run: Run, dataset, out_tsv: str | os.PathLike, *, rc_average: bool = False) -> int:
    """Write the TSV for a set of sequences; returns the number of rows."""
    from genolin.data import SequenceData
    from genolin.io.atomic import atomic_open
    from genolin.train import predict_sequence_probs

    if run.task != "sequence":
        raise InputError(None, "this run is a track model: give a genome FASTA and an output prefix")
    cfg = run.train
    data = SequenceData(dataset, k=cfg.k, stride=cfg.stride)
    probs = predict_sequence_probs(run.model, data, cfg, run.device, rc_average=rc_average)
    with atomic_open(out_tsv) as fh:
        fh.write("\t".join(["id", "length"] + [f"prob_{c}" for c in run.classes] + ["pred", "has_n"]) + "\n")
        for i, (name, seq) in enumerate(zip(dataset.ids, dataset.seqs, strict=True)):
            p = probs[i]
            fh.write("\t".join([name, str(len(seq))] + [f"{x:.6f}" for x in p]
                               + [run.classes[int(p.argmax())], "true" if b"N" in seq else "false"]) + "\n")
    return len(dataset)


# --- genomes --------------------------------------------------------------------------------------------------


def genome_bin_probs(run: Run, data, *, rc_average: bool = False, batch_size: int | None = None,
                     margin: int | None = None, progress: bool | None = None
                     ) -> Iterator[tuple[str, int, np.ndarray]]:
    """(contig, first bin, probs (n, 2)) pieces covering every bin of every contig of ``data`` (a TrackData),
    in order. Windows overlap by 2 * margin bins (default window / 8) and each keeps its central part."""
    from genolin.data import Window
    from genolin.progress import progress_bar

    cfg = run.train
    nb = cfg.window // cfg.stride
    margin = nb // 8 if margin is None else margin
    batch_size = batch_size or cfg.batch_size
    pending: list[tuple[Window, int, int]] = []  # (window, keep_from, keep_to) in absolute bins
    total = sum(data.lengths.values())
    with progress_bar(total=total, unit="bp", desc="predict", enabled=progress) as bar:
        for contig, length in data.lengths.items():
            total_bins = -(-length // cfg.stride)
            b0, keep_from = 0, 0
            while keep_from < total_bins:
                nbins = min(nb, total_bins - b0)
                last = b0 + nbins >= total_bins
                keep_to = total_bins if last else b0 + nb - margin
                pending.append((Window(contig, b0 * cfg.stride, nbins), keep_from, keep_to))
                keep_from, b0 = keep_to, max(keep_to - margin, 0)
                if len(pending) == batch_size:
                    yield from _run_windows(run, data, pending, rc_average, bar)
                    pending = []
        if pending:
            yield from _run_windows(run, data, pending, rc_average, bar)


@torch.no_grad()
def _run_windows(run: Run, data, pending, rc_average: bool, bar) -> Iterator[tuple[str, int, np.ndarray]]:
    stride = run.train.stride
    bases = [data.bases(w) for w, _, _ in pending]
    probs = _window_probs(run, data, pending, bases, rc=False)
    if rc_average:
        rc = _window_probs(run, data, pending, bases, rc=True)
        probs = [0.5 * (p + r[::-1, ::-1]) for p, r in zip(probs, rc, strict=True)]
    for (w, keep_from, keep_to), p, seq in zip(pending, probs, bases, strict=True):
        core = np.frombuffer(seq[data.k - 1: data.k - 1 + w.bins * stride], dtype=np.uint8)
        all_n = (core.reshape(w.bins, stride) == ord("N")).all(axis=1)
        p = p.copy()
        p[all_n] = 0.0
        first = w.start // stride
        yield w.contig, keep_from, p[keep_from - first: keep_to - first]
        bar.update((keep_to - keep_from) * stride)


def _window_probs(run: Run, data, pending, bases, *, rc: bool) -> list[np.ndarray]:
    from genolin.data import pad_tokens

    arrays = [data.tokens(w, rc=rc, bases=b) for (w, _, _), b in zip(pending, bases, strict=True)]
    ids, mask = pad_tokens(arrays)
    from genolin.train import track_probabilities

    out = run.model(ids.to(run.device), mask.to(run.device)).track
    probs = track_probabilities(out, run.config.get("pos_weight")).cpu().numpy()
    return [probs[i, : len(a)] for i, a in enumerate(arrays)]


class _BedGraphWriter:
    """One strand's bedGraph: bins arrive in order; runs of equal rounded values become one line."""

    def __init__(self, fh, name: str, color: str):
        self.fh = fh
        fh.write(f'track type=bedGraph name="{name}" color={color} visibility=full autoScale=off '
                 f"viewLimits=0:1\n")
        self.run: list | None = None  # [contig, start, end, value] not yet written

    def add(self, contig: str, first_bin: int, values: np.ndarray, stride: int, length: int) -> None:
        values = np.round(values.astype(np.float64), 4)
        if not len(values):
            return
        # starts of runs of equal values inside this piece
        breaks = np.flatnonzero(np.diff(values)) + 1
        starts = np.concatenate([[0], breaks])
        ends = np.concatenate([breaks, [len(values)]])
        lines = []
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            start, end, v = (first_bin + s) * stride, min((first_bin + e) * stride, length), float(values[s])
            r = self.run
            if r is not None and r[0] == contig and r[2] == start and r[3] == v:
                r[2] = end
                continue
            if r is not None:
                lines.append(f"{r[0]}\t{r[1]}\t{r[2]}\t{r[3]:g}\n")
            self.run = [contig, start, end, v]
        self.fh.write("".join(lines))

    def flush(self) -> None:
        if self.run is not None:
            contig, start, end, value = self.run
            self.fh.write(f"{contig}\t{start}\t{end}\t{value:g}\n")
            self.run = None


class PeakCaller:
    """Streaming local maxima on one strand of one contig: bin i is called if p_i >= threshold, p_i > every p in
    [i - d, i) and p_i >= every p in (i, i + d] (so of equal neighbours the leftmost wins). Bins arrive in order;
    a bin is decided once d bins past it have arrived (or at the contig's end)."""

    def __init__(self, threshold: float, distance_bins: int):
        self.threshold, self.d = threshold, max(0, distance_bins)
        self.reset()

    def reset(self) -> None:
        self.buf = np.zeros(0, dtype=np.float64)  # bins [offset, offset + len(buf))
        self.offset = 0
        self.decided = 0  # bins before this are decided

    def feed(self, first_bin: int, probs: np.ndarray, *, final: bool = False) -> list[tuple[int, float]]:
        if first_bin != self.offset + len(self.buf):
            raise ValueError("bins must arrive in order")
        buf = np.concatenate([self.buf, np.asarray(probs, dtype=np.float64)])
        end = self.offset + len(buf)
        decide_to = end if final else end - self.d
        d = self.d
        padded = np.concatenate([np.full(d, -np.inf), buf, np.full(d, -np.inf)])
        peaks = []
        lo, hi = self.decided - self.offset, decide_to - self.offset
        for i in (np.flatnonzero(buf[lo:hi] >= self.threshold) + lo).tolist() if hi > lo else []:
            j = i + d  # position in padded
            p = padded[j]
            if p > padded[j - d: j].max(initial=-np.inf) and p >= padded[j + 1: j + d + 1].max(initial=-np.inf):
                peaks.append((self.offset + i, float(p)))
        self.decided = max(self.decided, decide_to)
        new_offset = max(self.offset, self.decided - d)  # keep d bins of history before the undecided ones
        self.buf, self.offset = buf[new_offset - self.offset:], new_offset
        return peaks


def predict_genome(run: Run, fastas: list[str], out_prefix: str | os.PathLike, *, threshold: float = 0.5,
                   min_distance: int = 100, rc_average: bool = False, batch_size: int | None = None,
                   progress: bool | None = None) -> dict:
    """Write OUT.plus.bedGraph, OUT.minus.bedGraph and OUT.peaks.bed; returns counts."""
    from genolin.data import TrackData
    from genolin.io.atomic import atomic_open
    from genolin.io.fasta import Genome

    if run.task != "track":
        raise InputError(None, "this run is a sequence classifier: predict writes a TSV for it, not tracks")
    cfg = run.train
    data = TrackData([Genome(p) for p in fastas], [], window=cfg.window, k=cfg.k, stride=cfg.stride)
    prefix = str(out_prefix)
    distance_bins = min_distance // cfg.stride
    n_peaks, n_bins = 0, 0
    with atomic_open(prefix + ".plus.bedGraph") as fp, atomic_open(prefix + ".minus.bedGraph") as fm, \
            atomic_open(prefix + ".peaks.bed") as fb:
        writers = (_BedGraphWriter(fp, f"{Path(prefix).name} + strand", "200,30,30"),
                   _BedGraphWriter(fm, f"{Path(prefix).name} - strand", "30,30,200"))
        fb.write(f'track name="{Path(prefix).name} promoters" description="genolin calls, threshold {threshold}" '
                 f"useScore=1\n")
        callers = (PeakCaller(threshold, distance_bins), PeakCaller(threshold, distance_bins))
        contig_peaks: list[tuple[int, float, str]] = []
        current = None
        pieces = genome_bin_probs(run, data, rc_average=rc_average, batch_size=batch_size, progress=progress)
        for contig, first, probs in _with_contig_ends(pieces, data.lengths, cfg.stride):
            if contig != current:
                current = contig
                for c in callers:
                    c.reset()
                contig_peaks = []
            length = data.lengths[contig]
            total_bins = -(-length // cfg.stride)
            final = first + len(probs) == total_bins
            for strand in range(2):
                writers[strand].add(contig, first, probs[:, strand], cfg.stride, length)
                contig_peaks += [(b, p, "+-"[strand]) for b, p in callers[strand].feed(first, probs[:, strand],
                                                                                      final=final)]
            n_bins += len(probs)
            if final:
                for w in writers:
                    w.flush()
                for n, (b, p, strand) in enumerate(sorted(contig_peaks), start=n_peaks + 1):
                    fb.write(f"{contig}\t{b * cfg.stride}\t{min((b + 1) * cfg.stride, length)}\tpromoter_{n}\t"
                             f"{min(1000, int(round(1000 * p)))}\t{strand}\n")
                n_peaks += len(contig_peaks)
    return {"contigs": len(data.lengths), "bins": n_bins, "peaks": n_peaks}


def _with_contig_ends(pieces, lengths, stride):
    """Pass the pieces through (a hook for checks): each contig's pieces cover its bins in order."""
    expected = {c: 0 for c in lengths}
    for contig, first, probs in pieces:
        if first != expected[contig]:
            raise AssertionError(f"bins of {contig} out of order ({first} != {expected[contig]})")
        expected[contig] = first + len(probs)
        yield contig, first, probs
    for contig, length in lengths.items():
        if expected[contig] != -(-length // stride):
            raise AssertionError(f"{contig}: {expected[contig]} bins predicted of {-(-length // stride)}")


def genome_probs_and_targets(run: Run, fastas: list[str], tss: str, *, rc_average: bool = False,
                             held_out: bool = False, progress: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Targets and probabilities (n_bins, 2) of every bin of the genome, for evaluation; with ``held_out`` only the
    bins of the end of each contig that the run held out for validation (its val_fraction)."""
    from genolin.data import Window
    from genolin.train import load_track

    data = load_track(fastas, tss, run.train)
    first_kept = {c: 0 for c in data.lengths}
    if held_out:
        _, val_regions = data.split(run.train.val_fraction)
        first_kept.update({c: a // run.train.stride for c, a, _ in val_regions})
        first_kept.update({c: -(-n // run.train.stride) for c, n in data.lengths.items()
                           if c not in {r[0] for r in val_regions}})
    ys, ps = [], []
    for contig, first, probs in genome_bin_probs(run, data, rc_average=rc_average, progress=progress):
        skip = max(0, first_kept[contig] - first)
        if skip >= len(probs):
            continue
        ys.append(data.targets(Window(contig, (first + skip) * run.train.stride, len(probs) - skip)))
        ps.append(probs[skip:])
    if not ys:
        raise InputError(None, "nothing to evaluate: no held-out bins")
    return np.concatenate(ys), np.concatenate(ps)
