"""``genolin evaluate``: score a trained run on labelled data and write a report (JSON, markdown, ROC and PR curves).

    evaluate(run, inputs, out_dir, rc_average=, threshold=, calls_per_mbp=, held_out=) -> (metrics, report path)

The scores come from the run's task (``genolin.tasks``) through ``Task.evaluate``, the same path that validation
takes during training: on the same data a run's validation metrics and evaluate's agree.
- Sequence classifiers: accuracy, AUROC, AUPRC, MCC, F1, confusion matrix on a labelled set.
- Track models: per bin and strand, the binary metrics per strand and pooled over both strands, each with its
  positive rate (the AUPRC of a random predictor), on whole genomes less what the run trained on (``held_out``
  None; logged and noted in the report when a genome overlaps the training data), on the end of each contig that
  training holds out (True), or on whole genomes (False).

Writes ``out_dir/metrics.json``, ``report.md``, ``roc.png`` and ``pr.png``; for track models also
``calibration.npz``, each genome's evidence for a calibration of the probabilities (``genolin.calibrate``).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from genolin.calibrate import save_data
from genolin.config import DataSpec
from genolin.errors import InputError
from genolin.inference import describe_views

log = logging.getLogger(__name__)


def evaluate(run, inputs: DataSpec, out_dir: str | Path, *, rc_average: bool = False, threshold: float | None = None,
             min_distance_bp: int = 100, calls_per_mbp: float | None = None, held_out: bool | None = None,
             progress: bool | None = None) -> tuple[dict, Path]:
    """Metrics of ``run`` (a genolin.inference.Run) on ``inputs``, and the report written to ``out_dir``. Tracks:
    ``calls_per_mbp`` calls that density of each genome's most probable local maxima instead of those above
    ``threshold``."""
    task = run.task
    if str(out_dir) == "-":
        raise InputError("--out", "'-' is standard output, but evaluate writes a folder of files (metrics.json, "
                                  "report.md, plots): give a folder")
    if inputs.circular and not task.has_track:
        raise InputError(None, "--circular is for the genomes a track model reads, not for sequences")
    eval_set = task.load_evaluation(inputs, held_out=held_out)
    metrics, scored = task.evaluate(run.predictor, eval_set, rc_average=rc_average, threshold=threshold,
                                    min_distance_bp=min_distance_bp, calls_per_mbp=calls_per_mbp,
                                    progress=progress, **({"calibration": True} if task.has_track else {}))
    # how the probabilities were made: the defaults depend on the run (inference.default_views); an ensemble of
    # several strides keeps its other strides' members in predictor.others
    models = len(run.predictor.members) + sum(n for _, n in run.predictor.others)
    metrics["scoring"] = {"rc_average": rc_average, "shift_average": run.predictor.shift_views,
                          "threshold": threshold, "models": models, "precision": precision_of(run.predictor)}
    if task.has_track:  # the calls' rule: a density, or None for the threshold
        metrics["scoring"]["calls_per_mbp"] = calls_per_mbp
    views = (f"Scored over {describe_views(rc_average, run.predictor.shift_views)}"
             + (f", the mean of {models} models" if models > 1 else "")
             + (f"; decision threshold {threshold:.4g}." if threshold is not None else "."))
    report = write_report(out_dir, metrics, task.curves(scored), [views, "", *task.report_lines(metrics)],
                          task.describe(inputs, held_out))
    if task.has_track:  # the evidence a calibration is fitted on (genolin.calibrate)
        save_data(Path(out_dir) / "calibration.npz", {name: g.calibration for name, g in scored.items()})
    log.info("%s -> %s", task.summary(metrics), report)
    return metrics, report


def precision_of(predictor) -> str:
    """The arithmetic of a predictor's model pass, as metrics.json records it: on a CPU it depends on the processor
    (``inference_bf16``), on a GPU on the run's autocast."""
    if str(next(predictor.model.parameters()).dtype) == "torch.bfloat16":
        return "bfloat16"
    return "bfloat16 autocast" if predictor.device.type == "cuda" and predictor.amp else "float32"


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
                line, = ax.plot(recall, precision, label=f"{name} (AUPRC {auc(recall, precision):.3f})")
                ax.axhline(y.mean(), color=line.get_color(), lw=0.8, ls="--",  # chance: the positive rate
                           label=f"chance ({y.mean():.4f}, the positive rate)")
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
                 table: list[str], title: str) -> Path:
    """metrics.json, report.md (``title``, the ``table`` lines, the plots) and roc.png / pr.png in ``out_dir``."""
    from genolin.io.atomic import atomic_open, write_json

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", metrics)
    pngs = _curves(curves, out_dir)
    lines = [f"# {title}", "", *table]
    lines += [""] + [f"![{p[:-4]}]({p})" for p in pngs] + [""]
    with atomic_open(out_dir / "report.md") as fh:
        fh.write("\n".join(lines))
    return out_dir / "report.md"
