"""Metrics (scikit-learn) the tasks share.

- ``classification_metrics(y (n,), probs (n, C), classes)``: accuracy, AUROC, AUPRC, MCC, F1, confusion matrix
  (binary: the last class is the positive one; multiclass: macro averages, one-vs-rest).
- ``binary_metrics(y (n,), p (n,), threshold)``: AUROC, AUPRC, positive rate (the AUPRC of a random predictor),
  MCC and F1 at a threshold.
- ``max_f1_threshold(y, p)``: the decision threshold a track run stores, chosen on validation (calls: F1).
- ``max_mcc_threshold(y, p)``: the one a two-class sequence classifier stores (its scores are MCC).
"""

from __future__ import annotations

import warnings

import numpy as np


def max_f1_threshold(y: np.ndarray, p: np.ndarray) -> dict | None:
    """The probability threshold with the highest F1 on (y, p), with that F1, precision and recall; None when y
    holds one class only."""
    from sklearn.metrics import precision_recall_curve

    y, p = np.asarray(y).astype(np.int8).ravel(), np.asarray(p, dtype=np.float64).ravel()
    if y.min() == y.max():
        return None
    precision, recall, thresholds = precision_recall_curve(y, p)
    precision, recall = precision[:-1], recall[:-1]  # the last point (recall 0) has no threshold
    f1 = 2 * precision * recall / np.maximum(precision + recall, 1e-300)
    i = int(np.argmax(f1))
    return {"value": float(thresholds[i]), "f1": float(f1[i]), "precision": float(precision[i]),
            "recall": float(recall[i])}


def max_mcc_threshold(y: np.ndarray, p: np.ndarray) -> dict | None:
    """The probability threshold (decision: p >= threshold) with the highest Matthews correlation on (y, p), with
    that MCC, precision and recall; None when y holds one class only. Every distinct p is a candidate; the
    confusion counts of all of them come from one sort."""
    y, p = np.asarray(y).astype(np.int8).ravel(), np.asarray(p, dtype=np.float64).ravel()
    if y.min() == y.max():
        return None
    order = np.argsort(-p, kind="stable")
    ps, ys = p[order], y[order]
    last = np.flatnonzero(np.r_[ps[1:] != ps[:-1], True])  # the last index of each run of equal p
    tp = np.cumsum(ys)[last].astype(np.float64)  # predicted positive: p >= ps[last]
    fp = (last + 1) - tp
    pos, neg = float(ys.sum()), float(len(ys) - ys.sum())
    fn, tn = pos - tp, neg - fp
    denom = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    mcc = np.where(denom > 0, (tp * tn - fp * fn) / np.maximum(denom, 1e-300), 0.0)
    i = int(np.argmax(mcc))
    return {"value": float(ps[last[i]]), "mcc": float(mcc[i]), "precision": float(tp[i] / (tp[i] + fp[i])),
            "recall": float(tp[i] / pos)}


def classification_metrics(y: np.ndarray, probs: np.ndarray, classes: list[str], threshold: float | None = None
                           ) -> dict:
    """Decisions: argmax, or for two classes P(last class) >= ``threshold`` when one is given."""
    from sklearn.metrics import (
        accuracy_score,
        average_precision_score,
        confusion_matrix,
        f1_score,
        matthews_corrcoef,
        roc_auc_score,
    )

    y = np.asarray(y)
    probs = np.asarray(probs, dtype=np.float64)
    pred = probs.argmax(axis=1)
    if threshold is not None and len(classes) == 2:
        pred = (probs[:, 1] >= threshold).astype(np.int64)
    labels = list(range(len(classes)))
    out = {
        "n": int(len(y)),
        "accuracy": float(accuracy_score(y, pred)),
        "mcc": float(matthews_corrcoef(y, pred)),
        "confusion_matrix": confusion_matrix(y, pred, labels=labels).tolist(),
        "classes": list(classes),
        "decision": "argmax" if threshold is None or len(classes) != 2 else threshold,
    }
    present = np.unique(y)
    if len(classes) == 2:
        out["f1"] = float(f1_score(y, pred, pos_label=1, zero_division=0))
        out["positive_class"] = classes[1]
        out["positive_rate"] = float((y == 1).mean())
        if len(present) == 2:
            out["auroc"] = float(roc_auc_score(y, probs[:, 1]))
            out["auprc"] = float(average_precision_score(y, probs[:, 1]))
    else:
        out["f1"] = float(f1_score(y, pred, average="macro", zero_division=0))
        if len(present) == len(classes):
            out["auroc"] = float(roc_auc_score(y, probs, multi_class="ovr", labels=labels))
            onehot = np.eye(len(classes))[y]
            out["auprc"] = float(average_precision_score(onehot, probs, average="macro"))
    return out


def binary_metrics(y: np.ndarray, p: np.ndarray, threshold: float = 0.5) -> dict:
    from sklearn.metrics import average_precision_score, f1_score, matthews_corrcoef, roc_auc_score

    y = np.asarray(y).astype(np.int8)
    p = np.asarray(p, dtype=np.float64)
    pred = (p >= threshold).astype(np.int8)
    with warnings.catch_warnings():  # one class in y and pred (no call at all): MCC is 0, as sklearn returns
        warnings.simplefilter("ignore", UserWarning)
        mcc = float(matthews_corrcoef(y, pred))
    out = {"n": int(len(y)), "positives": int(y.sum()), "positive_rate": float(y.mean()) if len(y) else 0.0,
           "threshold": threshold, "mcc": mcc, "f1": float(f1_score(y, pred, zero_division=0))}
    if 0 < y.sum() < len(y):
        out["auroc"] = float(roc_auc_score(y, p))
        out["auprc"] = float(average_precision_score(y, p))
    return out
