"""Evaluation: metrics (scikit-learn) and a report (JSON, markdown, ROC and PR curves as PNG).

- Sequence classification: y (n,) class indices, probs (n, C) -> accuracy, AUROC, AUPRC, MCC, F1, confusion
  matrix (binary: the last class is the positive one; multiclass: macro averages, one-vs-rest).
- Genome tracks: per bin and strand, y (n, 2) in {0, 1}, probs (n, 2) -> the binary metrics per strand and pooled
  over both strands, each with its positive rate (the AUPRC of a random predictor).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


def classification_metrics(y: np.ndarray, probs: np.ndarray, classes: list[str]) -> dict:
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
    labels = list(range(len(classes)))
    out = {
        "n": int(len(y)),
        "accuracy": float(accuracy_score(y, pred)),
        "mcc": float(matthews_corrcoef(y, pred)),
        "confusion_matrix": confusion_matrix(y, pred, labels=labels).tolist(),
        "classes": list(classes),
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
    """Metrics of one binary prediction (track bins): AUROC, AUPRC, positive rate, MCC and F1 at a threshold."""
    from sklearn.metrics import average_precision_score, f1_score, matthews_corrcoef, roc_auc_score

    y = np.asarray(y).astype(np.int8)
    p = np.asarray(p, dtype=np.float64)
    pred = (p >= threshold).astype(np.int8)
    out = {"n": int(len(y)), "positives": int(y.sum()), "positive_rate": float(y.mean()) if len(y) else 0.0,
           "threshold": threshold, "mcc": float(matthews_corrcoef(y, pred)),
           "f1": float(f1_score(y, pred, zero_division=0))}
    if 0 < y.sum() < len(y):
        out["auroc"] = float(roc_auc_score(y, p))
        out["auprc"] = float(average_precision_score(y, p))
    return out


def track_metrics(y: np.ndarray, probs: np.ndarray, threshold: float = 0.5) -> dict:
    """y, probs (n_bins, 2): metrics for the + strand, the - strand and both pooled."""
    return {
        "plus": binary_metrics(y[:, 0], probs[:, 0], threshold),
        "minus": binary_metrics(y[:, 1], probs[:, 1], threshold),
        "pooled": binary_metrics(y.reshape(-1), probs.reshape(-1), threshold),
    }


def _curves(curves: dict[str, tuple[np.ndarray, np.ndarray]], out_dir: Path) -> list[str]:
    """ROC and PR plots of named (y, score) pairs; returns the PNG file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import auc, precision_recall_curve, roc_curve

    from genolin.io.atomic import atomic_path

    files = []
    for kind in ("roc", "pr"):
        fig, ax = plt.subplots(figsize=(4.8, 4.4))
        for name, (y, score) in curves.items():
            if y.min() == y.max():
                continue
            if kind == "roc":
                fpr, tpr, _ = roc_curve(y, score)
                ax.plot(fpr, tpr, label=f"{name} (AUROC {auc(fpr, tpr):.3f})")
            else:
                precision, recall, _ = precision_recall_curve(y, score)
                ax.plot(recall, precision, label=f"{name} (positive rate {y.mean():.4f})")
        if kind == "roc":
            ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
            ax.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC")
        else:
            ax.set(xlabel="recall", ylabel="precision", title="precision-recall", ylim=(0, 1.02))
        ax.legend(fontsize=8, loc="lower right" if kind == "roc" else "upper right")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        name = f"{kind}.png"
        with atomic_path(out_dir / name) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
        plt.close(fig)
        files.append(name)
    return files


def write_report(out_dir: str | Path, metrics: dict, curves: dict[str, tuple[np.ndarray, np.ndarray]],
                 title: str) -> Path:
    """metrics.json, report.md and roc.png / pr.png in ``out_dir``; returns the report path."""
    from genolin.checkpoint import write_json
    from genolin.io.atomic import atomic_open

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", metrics)
    pngs = _curves(curves, out_dir)
    lines = [f"# {title}", ""]
    if "plus" in metrics:
        lines += ["| strand | bins | positives | positive rate | AUROC | AUPRC | MCC | F1 |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for strand in ("plus", "minus", "pooled"):
            m = metrics[strand]
            lines.append(f"| {strand} | {m['n']:,} | {m['positives']:,} | {m['positive_rate']:.4f} | "
                         f"{m.get('auroc', float('nan')):.4f} | {m.get('auprc', float('nan')):.4f} | "
                         f"{m['mcc']:.4f} | {m['f1']:.4f} |")
    else:
        lines += ["| metric | value |", "|---|---:|"]
        for key in ("n", "accuracy", "auroc", "auprc", "mcc", "f1"):
            if key in metrics:
                value = metrics[key]
                lines.append(f"| {key} | {value:,} |" if isinstance(value, int) else f"| {key} | {value:.4f} |")
        classes = metrics["classes"]
        lines += ["", "Confusion matrix (rows: true class, columns: predicted):", "",
                  "| | " + " | ".join(classes) + " |", "|---|" + "---:|" * len(classes)]
        for name, row in zip(classes, metrics["confusion_matrix"], strict=True):
            lines.append(f"| {name} | " + " | ".join(str(v) for v in row) + " |")
    lines += [""] + [f"![{p[:-4]}]({p})" for p in pngs] + [""]
    with atomic_open(out_dir / "report.md") as fh:
        fh.write("\n".join(lines))
    return out_dir / "report.md"
