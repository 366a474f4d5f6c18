"""Calibration of a track model's probabilities: what a value means on a genome the model never saw.

    CalibrationData: one genome's evidence, gathered while it is scored (``track_scoring.score_regions``):
        counts of model bins per probability (logit-spaced bins) and how many of them have a TSS near, and the
        genome's most probable local maxima (the calls a threshold or a density would make) with the TSSs near each
    save_data(path, {genome: CalibrationData}) / load_data(path): ``evaluate``'s OUT/calibration.npz
    fit_isotonic(datas) -> Calibration: a monotone map from probability to "a TSS within NEAR_BP", fitted on the
        bin counts (pool-adjacent-violators); Calibration.apply(p)
    reliability(data, calibration) -> rows (mean value, observed rate, bins); ece(data, calibration)
    calls_at(data, calibration, threshold) / calls_top(data, per_mbp): precision and recall of calls

A model bin of ``stride`` bp starting at s is *near* a TSS when a TSS of its strand lies within ``NEAR_BP`` of one of
its bases: s - NEAR_BP <= t < s + stride + NEAR_BP. A calibrated value p at a bin then reads "a mapped TSS of this
strand within 20 bp, with probability p" (on genomes like those it was fitted on: held out from the model). Calls
are matched as ``track_calls`` matches them, a call (its bin's centre) and a TSS of its strand within 20 bp, but
without the wrap around a circular contig's origin and against the TSSs inside the scored region only (a bin or call
within 20 bp of a region's end may miss a TSS just past it: a few of a genome's thousands).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

NEAR_BP = 20
LOGIT_EDGES = np.linspace(-16.0, 16.0, 641)  # 640 bins of 0.05 logits; probabilities clipped into the outer ones
PEAKS_PER_MBP = 2000.0  # local maxima kept per Mbp (both strands): beyond every threshold or density of use


def logit(p) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def sigmoid(z) -> np.ndarray:
    """The logistic function, without overflow."""
    return 0.5 * (1 + np.tanh(np.asarray(z, dtype=np.float64) / 2))


def logit_bin(p: np.ndarray) -> np.ndarray:
    """Bin index in ``LOGIT_EDGES`` of each probability."""
    return np.clip(np.searchsorted(LOGIT_EDGES, logit(p), side="right") - 1, 0, len(LOGIT_EDGES) - 2)


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

    def add_peaks(self, calls: list[tuple[int, float, str]], stride: int, tss: list[np.ndarray]) -> None:
        """A contig's local maxima [(bin, p, strand)] matched to its scored TSSs (sorted, per strand), which are
        numbered on from the genome's TSSs so far (+ strand first) and counted."""
        p, lo, hi = [], [], []
        offset = self.n_tss
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
        self.n_tss = offset


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


# -- fitting ---------------------------------------------------------------------------------------------------
@dataclass
class Calibration:
    """A monotone map of a model's probabilities: ``y`` (non-decreasing) at the knots ``x`` (increasing raw
    probabilities), linear in the logit of the raw value between knots and constant beyond the ends."""

    x: np.ndarray
    y: np.ndarray
    method: str = "isotonic"

    def apply(self, p) -> np.ndarray:
        """Calibrated values of raw probabilities ``p`` (any shape), float32."""
        p = np.asarray(p)
        return np.interp(logit(p), logit(self.x), self.y).astype(np.float32).reshape(p.shape)

    def to_json(self) -> dict:
        return {"method": self.method, "near_bp": NEAR_BP, "x": [float(v) for v in self.x],
                "y": [float(v) for v in self.y]}

    @classmethod
    def from_json(cls, d: dict) -> Calibration:
        x, y = np.asarray(d["x"], dtype=np.float64), np.asarray(d["y"], dtype=np.float64)
        if len(x) < 1 or len(x) != len(y) or np.any(np.diff(x) <= 0) or np.any(np.diff(y) < 0) \
                or not (np.all((0 <= y) & (y <= 1)) and np.all((0 < x) & (x < 1))):
            raise ValueError("a calibration needs increasing knots x in (0, 1) and non-decreasing values y in [0, 1]")
        return cls(x, y, d.get("method", "isotonic"))


def pooled(datas) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(total, near, sum_p) of the logit bins holding model bins, summed over several genomes' ``CalibrationData``;
    a ValueError when none does."""
    datas = list(datas)
    total, near, sum_p = (np.sum([getattr(d, f) for d in datas], axis=0) for f in ("total", "near", "sum_p"))
    used = total > 0
    if not used.any():
        raise ValueError("no model bins to fit a calibration on")
    return total[used], near[used], sum_p[used]


def pav(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pool-adjacent-violators: the non-decreasing fit to ``values`` (in order) by weighted least squares, as
    (block ends: index one past each block, block values)."""
    ends, vals, wts = [], [], []
    for i, (v, w) in enumerate(zip(values, weights, strict=True)):
        ends.append(i + 1)
        vals.append(float(v))
        wts.append(float(w))
        while len(vals) > 1 and vals[-2] > vals[-1]:
            w2 = wts[-2] + wts[-1]
            vals[-2] = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / w2
            wts[-2], ends[-2] = w2, ends[-1]
            del vals[-1], wts[-1], ends[-1]
    return np.array(ends), np.array(vals)


def merged(total: np.ndarray, near: np.ndarray, sum_p: np.ndarray, least: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adjacent bins joined from the highest value down until each group holds at least ``least`` model bins (the
    lowest leftovers join the group above them), so no rate rests on a handful of bins."""
    groups, n = [], 0
    for i in range(len(total) - 1, -1, -1):
        if n == 0:
            groups.append([i, i])
        groups[-1][0] = i
        n += total[i]
        if n >= least:
            n = 0
    if len(groups) > 1 and n:  # the last (lowest) group is short: into its neighbour above
        low = groups.pop()
        groups[-1][0] = low[0]
    groups.reverse()
    out = [np.array([a[lo:hi + 1].sum() for lo, hi in groups]) for a in (total, near, sum_p)]
    return out[0], out[1], out[2]


def fit_isotonic(datas, least: int = 2000) -> Calibration:
    """The isotonic regression of "near a TSS" on the raw probability, over the model bins of ``datas`` (each a
    ``CalibrationData``) in groups of at least ``least`` bins (``merged``): one knot per block of the fit, at its
    bins' mean raw probability."""
    total, near, sum_p = merged(*pooled(datas), least)
    ends, vals = pav(near / total, total)
    starts = np.concatenate([[0], ends[:-1]])
    x = np.array([sum_p[a:b].sum() / total[a:b].sum() for a, b in zip(starts, ends, strict=True)])
    # blocks are runs of disjoint logit bins in order, so their means rise strictly
    return Calibration(np.clip(x, 1e-12, 1 - 1e-12), np.clip(vals, 0.0, 1.0))


def fit_platt(datas, steps: int = 50) -> Calibration:
    """Platt scaling: P(near) = sigmoid(a logit(p) + b), fitted by Newton's method on the bins of ``datas``;
    written as knots at the logit bins' edges so it applies as an isotonic map does."""
    n, k, sum_p = pooled(datas)
    z = logit(sum_p / n)
    n, k = n.astype(np.float64), k.astype(np.float64)
    a, b = 1.0, 0.0
    for _ in range(steps):
        q = sigmoid(a * z + b)
        g = np.array([np.sum((k - n * q) * z), np.sum(k - n * q)])
        w = n * q * (1 - q)
        h = np.array([[np.sum(w * z * z), np.sum(w * z)], [np.sum(w * z), np.sum(w)]]) + 1e-9 * np.eye(2)
        step = np.linalg.solve(h, g)
        a, b = a + step[0], b + step[1]
        if np.abs(step).max() < 1e-10:
            break
    if not a > 0:
        raise ValueError(f"Platt scaling found no rising fit (slope {a:.3g}): the values do not rank these bins")
    return Calibration(sigmoid(LOGIT_EDGES), sigmoid(a * LOGIT_EDGES + b), "platt")


def values(data: CalibrationData, calibration: Calibration | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(model bins, those near a TSS, their mean value: raw, or calibrated) of the logit bins holding model bins."""
    used = data.total > 0
    total, near = data.total[used].astype(np.float64), data.near[used].astype(np.float64)
    value = data.sum_p[used] / total
    return total, near, value if calibration is None else calibration.apply(value).astype(np.float64)


def reliability(data: CalibrationData, calibration: Calibration | None = None, groups: int = 10
                ) -> list[tuple[float, float, int]]:
    """Rows (mean calibrated value, observed rate of bins near a TSS, bins) over ``groups`` groups of about equal
    bins, ordered by value (raw values when ``calibration`` is None)."""
    total, near, value = values(data, calibration)
    cum = np.cumsum(total)
    group = np.minimum((cum - total / 2) * groups // cum[-1], groups - 1).astype(int)
    rows = []
    for g in range(groups):
        m = group == g
        if m.any():
            n = int(total[m].sum())
            rows.append((float((value[m] * total[m]).sum() / n), float(near[m].sum() / n), n))
    return rows


def ece(data: CalibrationData, calibration: Calibration | None = None, groups: int = 15) -> float:
    """Expected calibration error over ``groups`` equal-width groups of the (calibrated) value in [0, 1]: the
    bins' weighted mean |observed rate - mean value|."""
    total, near, value = values(data, calibration)
    group = np.minimum((value * groups).astype(int), groups - 1)
    k = np.bincount(group, weights=near, minlength=groups)
    s = np.bincount(group, weights=value * total, minlength=groups)
    return float(np.abs(k - s).sum() / total.sum())


def _recall(data: CalibrationData, chosen: np.ndarray) -> float:
    """TSSs (of the genome's scored ones) within NEAR_BP of a chosen peak."""
    if not data.n_tss:
        return float("nan")
    cover = np.zeros(data.n_tss + 1, dtype=np.int64)
    np.add.at(cover, data.peak_lo[chosen], 1)
    np.add.at(cover, data.peak_hi[chosen], -1)
    return float((np.cumsum(cover)[:-1] > 0).sum() / data.n_tss)


def call_figures(data: CalibrationData, chosen: np.ndarray) -> dict:
    """Calls (a mask over the kept peaks): their number, per Mbp, precision and recall within NEAR_BP."""
    n = int(chosen.sum())
    hits = data.peak_hi[chosen] > data.peak_lo[chosen]
    return {"calls": n, "per_mbp": n / max(data.bp, 1) * 1e6, "precision": float(hits.mean()) if n else None,
            "recall": _recall(data, chosen)}


def calls_at(data: CalibrationData, calibration: Calibration | None, threshold: float) -> dict:
    """``call_figures`` of the peaks whose (calibrated) value is at least ``threshold``."""
    value = data.peak_p if calibration is None else calibration.apply(data.peak_p)
    return call_figures(data, value >= threshold)


def calls_top(data: CalibrationData, per_mbp: float) -> dict:
    """``call_figures`` of the genome's most probable peaks at ``per_mbp`` calls per Mbp over the whole genome (the
    density rule, which predict applies per contig in proportion to its length: the same on one chromosome)."""
    k = min(len(data.peak_p), int(data.bp * per_mbp / 1e6 + 0.5))
    chosen = np.zeros(len(data.peak_p), dtype=bool)
    chosen[np.argsort(-data.peak_p, kind="stable")[:k]] = True
    return call_figures(data, chosen)
