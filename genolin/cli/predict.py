"""``genolin predict``: apply a trained run to sequences (TSV) or to whole genomes (bedGraph + BED)."""

from __future__ import annotations

import click


@click.command(context_settings={"show_default": True})
@click.option("--model", "model_dir", required=True, metavar="RUN_DIR", help="A run directory from genolin train.")
@click.option("--fasta", multiple=True, metavar="FASTA", help="Sequences (sequence model) or genome(s) (track model).")
@click.option("--csv", metavar="CSV", help="Sequences in a CSV/TSV 'sequence' column (sequence model).")
@click.option("--out", required=True, metavar="OUT",
              help="Sequence model: the TSV to write. Track model: a prefix for OUT.plus.bedGraph, "
                   "OUT.minus.bedGraph and OUT.peaks.bed.")
@click.option("--rc-average/--no-rc-average", default=False,
              help="Average forward and reverse-complement predictions.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.5, help="Track: probability to call a promoter.")
@click.option("--min-distance", type=click.IntRange(min=0), default=100,
              help="Track: called promoters on one strand are at least this many bp apart.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Windows or sequences per batch.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", help="Where to run.")
def predict(model_dir, fasta, csv, out, rc_average, threshold, min_distance, batch_size, device) -> None:
    """Predict promoters with a trained model."""
    import logging

    from genolin.predict import load_run, predict_genome, predict_sequences, read_unlabelled

    log = logging.getLogger("genolin")
    run = load_run(model_dir, device)
    if bool(csv) == bool(fasta):
        raise click.UsageError("give the input as --fasta or as --csv")
    if batch_size:
        run.train.batch_size = batch_size
    if run.task == "track":
        if csv:
            raise click.UsageError("a track model predicts on genome FASTA files (--fasta)")
        counts = predict_genome(run, list(fasta), out, threshold=threshold, min_distance=min_distance,
                                rc_average=rc_average)
        log.info("%d contig(s), %d bins, %d promoters called -> %s.plus.bedGraph, %s.minus.bedGraph, %s.peaks.bed",
                 counts["contigs"], counts["bins"], counts["peaks"], out, out, out)
    else:
        if len(fasta) > 1:
            raise click.UsageError("a sequence model takes one --fasta")
        dataset = read_unlabelled(csv or fasta[0], csv=bool(csv))
        n = predict_sequences(run, dataset, out, rc_average=rc_average)
        log.info("%d sequences -> %s", n, out)
