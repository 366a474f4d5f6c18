"""Promoter calls of the track task, matched to annotated TSSs.

Calls are ``genolin.peaks``'s (``StrandedPeaks``): bins whose probability is the highest within +- min_distance bp
on their strand, at or above a threshold, or each contig's most probable ones at a call density (calls per Mbp). A
call sits at its bin's centre. ``call_metrics`` matches calls to TSSs of their strand: precision (calls with a TSS
within d bp) and recall (TSSs with a call within d bp) for d in ``CALL_DISTANCES_BP``, and calls per Mbp; on a
whole circular contig distances run around the origin too.
"""

from __future__ import annotations

import numpy as np

from genolin.tasks.base import PredictOptions

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


def call_positions(calls: list[tuple[int, float, str]], strand: str, stride: int) -> np.ndarray:
    """Sorted bp positions (bin centres) of the calls (bin, probability, strand) of one strand."""
    return np.array(sorted(b * stride + stride // 2 for b, _, s in calls if s == strand), dtype=np.int64)


def call_rule(options: PredictOptions) -> str:
    """How predict calls promoters, for the BED's track line: "threshold T" or "N per Mbp"."""
    if options.calls_per_mbp is None:
        return f"threshold {options.threshold}"
    return f"the {options.calls_per_mbp:.4g} per Mbp most probable local maxima of each contig"
