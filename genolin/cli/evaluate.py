"""``genolin evaluate``: metrics and a report for a trained run on a labelled set or a genome + TSS BED."""

from __future__ import annotations

import click


@click.command(context_settings={"show_default": True})
@click.option("--model", "model_dir", required=True, metavar="RUN_DIR", help="A run directory from genolin train.")
@click.option("--fasta", multiple=True, metavar="FASTA", help="Labelled FASTA (label= or --labels), or genome(s) "
                                                               "with --tss.")
@click.option("--csv", metavar="CSV", help="Labelled CSV/TSV ('sequence' and 'label' columns).")
@click.option("--labels", metavar="TSV", help="id<TAB>label for --fasta.")
@click.option("--tss", metavar="BED", help="TSS BED for genome evaluation of a track model.")
@click.option("--out", metavar="DIR", default=None, help="Report folder [default: RUN_DIR/evaluation].")
@click.option("--rc-average/--no-rc-average", default=False, help="Average forward and reverse-complement "
                                                                  "predictions.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, help="Threshold for MCC and F1 of tracks.")
@click.option("--held-out/--whole-genome", default=False,
              help="Tracks: score only the end of each contig that training held out (the training genome).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", help="Where to run.")
def evaluate(model_dir, fasta, csv, labels, tss, out, rc_average, threshold, held_out, device) -> None:
    """Score a trained model: metrics.json, report.md, roc.png and pr.png."""
    import logging

    from genolin.errors import InputError
    from genolin.evaluate import classification_metrics, track_metrics, write_report
    from genolin.predict import genome_probs_and_targets, load_run

    log = logging.getLogger("genolin")
    run = load_run(model_dir, device)
    out = out or f"{model_dir}/evaluation"
    if run.task == "track":
        if not (fasta and tss):
            raise click.UsageError("a track model is evaluated on --fasta GENOME --tss TSS.bed")
        y, p = genome_probs_and_targets(run, list(fasta), tss, rc_average=rc_average, held_out=held_out)
        metrics = track_metrics(y, p, threshold)
        curves = {"+ strand": (y[:, 0], p[:, 0]), "- strand": (y[:, 1], p[:, 1])}
        title = (f"genolin track evaluation: {', '.join(fasta)} against {tss}"
                 + (" (held-out contig ends)" if held_out else ""))
        summary = ", ".join(f"{s} AUPRC {metrics[s].get('auprc', float('nan')):.4f} (positive rate "
                            f"{metrics[s]['positive_rate']:.4f})" for s in ("plus", "minus", "pooled"))
    else:
        from genolin.data import SequenceData
        from genolin.train import load_sequence_set, predict_sequence_probs

        if bool(csv) == bool(fasta) or tss:
            raise click.UsageError("a sequence classifier is evaluated on --csv or --fasta (with --labels)")
        if len(fasta) > 1:
            raise InputError(None, "give one labelled --fasta")
        dataset = load_sequence_set(fasta[0] if fasta else None, csv, labels, classes=run.classes, min_classes=1)
        data = SequenceData(dataset, k=run.train.k, stride=run.train.stride)
        probs = predict_sequence_probs(run.model, data, run.train, run.device, rc_average=rc_average)
        metrics = classification_metrics(dataset.labels, probs, run.classes)
        curves = {}
        if len(run.classes) == 2:
            curves[f"class {run.classes[1]}"] = (dataset.labels == 1, probs[:, 1])
        title = f"genolin evaluation: {csv or fasta[0]}"
        summary = ", ".join(f"{k} {metrics[k]:.4f}" for k in ("accuracy", "mcc", "f1", "auroc", "auprc")
                            if k in metrics)
    report = write_report(out, metrics, curves, title)
    log.info("%s -> %s", summary, report)
