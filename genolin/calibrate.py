"""Calibration of a track model's probabilities: what a value means on a genome the model never saw.

    CalibrationData: one genome's evidence, gathered while it is scored (``track_scoring.score_regions``):
        counts of model bins per probability (logit-spaced bins) and how many of them have a TSS near, and the
        genome's most probable local maxima (the calls a threshold or a density would make) with the TSSs near each
    save_data(path, {genome: CalibrationData}) / load_data(path): ``evaluate``'s OUT/calibration.npz
    fit_isotonic(datas) -> Calibration: a monotone map from probability to "a TSS within NEAR_BP", fitted on the
        bin counts (pool-adjacent-violators); Calibration.apply(p)
    reliability(data, calibration) -> rows (mean value, observed rate, bins); ece(data, calibration)
    calls_at(data, calibration, threshold) / calls_top(data, n): precision and recall of calls

A model bin of ``stride`` bp starting at s is *near* a TSS when a TSS of its strand lies within ``NEAR_BP`` of one of
its bases: s - NEAR_BP <= t < s + stride + NEAR_BP. A calibrated value p at a bin then reads "a mapped TSS of this
strand within 20 bp, with probability p" (on genomes like those it was fitted on: held out from the model). Calls
are matched as ``track_calls`` matches them: a call (its bin's centre) and a TSS of its strand within 20 bp.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NEAR_BP = 20
LOGIT_EDGES = np.linspace(-16.0, 16.0, 641)  # 640 bins of 0.05 logits; probabilities clipped into the outer ones
PEAKS_PER_MBP = 2000.0  # local maxima kept per Mbp (both strands): beyond every threshold or density of use


def logit_bin(p: np.ndarray) -> np.ndarray:
    """Bin index in ``LOGIT_EDGES`` of each probability."""
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
    z = np.log(p) - np.log1p(-p)
    return np.clip(np.searchsorted(LOGIT_EDGES, z, side="right") - 1, 0, len(LOGIT_EDGES) - 2)


@dataclass
class CalibrationData:
    """One genome's calibration evidence. ``total``/``near``/``sum_p`` (n_bins,): model bins per logit bin, those
    near a TSS, and the sum of their probabilities; ``peak_p`` (m,): the kept local maxima's probabilities, and
    ``peak_lo``/``peak_hi`` (m,): the range [lo, hi) of TSS indices (over the genome's scored TSSs, 0 .. n_tss)
    within ``NEAR_BP`` of each; ``bp``: bases scored."""

    total: np.ndarray = field(default_factory=lambda: np.zeros(len(LOGIT_EDGES) - 1, dtype=np.int64))
    near: np.ndarray = field(default_factory=lambda: np.zeros(len(LOGIT_EDGES) - 1, dtype=np.int64))
    sum_p: np.ndarray = field(default_factory=lambda: np.zeros(len(LOGIT_EDGES) - 1, dtype=np.float64))
    peak_p: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    peak_lo: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    peak_hi: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    n_tss: int = 0
    bp: int = 0

    def add_bins(self, first: int, probs: np.ndarray, stride: int, tss: list[np.ndarray]) -> None:
        """Model bins first .. first + n of one contig: probs (n, 2), ``tss`` the contig's sorted TSS positions per
        strand."""
        starts = (first + np.arange(len(probs), dtype=np.int64)) * stride
        for strand in range(2):
            t = tss[strand]
            near = (np.searchsorted(t, starts + stride + NEAR_BP) - np.searchsorted(t, starts - NEAR_BP)) > 0
            p = probs[:, strand]
            idx = logit_bin(p)
            self.total += np.bincount(idx, minlength=len(self.total))
            self.near += np.bincount(idx[near], minlength=len(self.near))
            self.sum_p += np.bincount(idx, weights=p.astype(np.float64), minlength=len(self.sum_p))

    def add_tss(self, tss: list[np.ndarray]) -> int:
        """Count a contig's scored TSSs (per strand, sorted); the index of its first."""
        first = self.n_tss
        self.n_tss += sum(len(t) for t in tss)
        return first

    def add_peaks(self, calls: list[tuple[int, float, str]], stride: int, tss: list[np.ndarray], first_tss: int
                  ) -> None:
        """A contig's local maxima [(bin, p, strand)], matched to its TSSs (numbered from ``first_tss``, + strand
        first)."""
        p, lo, hi = [], [], []
        offset = first_tss
        for strand, sign in enumerate("+-"):
            mine = [(b, v) for b, v, s in calls if s == sign]
            centre = np.array([b * stride + stride // 2 for b, _ in mine], dtype=np.int64)
            t = tss[strand]
            lo.append(offset + np.searchsorted(t, centre - NEAR_BP))
            hi.append(offset + np.searchsorted(t, centre + NEAR_BP, side="right"))
            p.append(np.array([v for _, v in mine], dtype=np.float32))
            offset += len(t)
        self.peak_p = np.concatenate([self.peak_p, *p])
        self.peak_lo = np.concatenate([self.peak_lo, *lo])
        self.peak_hi = np.concatenate([self.peak_hi, *hi])


FIELDS = ("total", "near", "sum_p", "peak_p", "peak_lo", "peak_hi")


def save_data(path: str | Path, datas: dict[str, CalibrationData]) -> None:
    """Write genome -> CalibrationData as an .npz (keys GENOME/FIELD; written whole or not at all)."""
    from genolin.io.npz import NpzWriter

    with NpzWriter(path, compress=True) as npz:
        npz.write("edges", LOGIT_EDGES)
        for name, d in datas.items():
            for f in FIELDS:
                npz.write(f"{name}/{f}", getattr(d, f))
            npz.write(f"{name}/counts", np.array([d.n_tss, d.bp], dtype=np.int64))


def load_data(path: str | Path) -> dict[str, CalibrationData]:
    """genome -> CalibrationData of a ``save_data`` file."""
    with np.load(path, allow_pickle=False) as z:
        if not np.array_equal(z["edges"], LOGIT_EDGES):
            raise ValueError(f"{path}: calibration bins of another layout")
        names = sorted({k.rsplit("/", 1)[0] for k in z.files if "/" in k})
        out = {}
        for name in names:
            n_tss, bp = (int(v) for v in z[f"{name}/counts"])
            out[name] = CalibrationData(**{f: z[f"{name}/{f}"] for f in FIELDS}, n_tss=n_tss, bp=bp)
    return out
