"""``genolin evaluate``: metrics and a report for a trained run on a labelled set or a genome + TSS BED."""

from __future__ import annotations

import click

from genolin.cli.options import (
    ModelOption,
    averaging_options,
    calls_option,
    check_calls,
    check_out,
    circular_option,
    precision_option,
    window_option,
)


@click.command(context_settings={"show_default": True})
@click.option("--model", "model_dirs", required=True, multiple=True, metavar="RUN_DIR", cls=ModelOption,
              help="A run directory from genolin train, or {bundled}; repeated: an ensemble of runs "
                   "(same task, classes and tokens; track models may differ in k and stride, each a multiple of the "
                   "finest, and are averaged at the finest) whose probabilities are averaged.")
@click.option("--fasta", multiple=True, metavar="FASTA", help="Labelled FASTA (label= or --labels), or genome(s) "
                                                               "with --tss.")
@click.option("--csv", metavar="CSV", help="Labelled CSV/TSV ('sequence' and 'label' columns).")
@click.option("--labels", metavar="TSV", help="id<TAB>label for --fasta.")
@click.option("--tss", multiple=True, metavar="BED",
              help="TSS BED for genome evaluation of a track model: once per --fasta (paired in order) or once for "
                   "all; metrics per genome and over all.")
@circular_option
@click.option("--out", metavar="DIR", default=None, callback=check_out,
              help="Report folder [default: RUN_DIR/evaluation/NAME, NAME the first input's file name without its "
                   "extensions, so each data set keeps its own report; a bundled model: ./evaluation/MODEL_NAME; "
                   "an ensemble needs --out].")
@averaging_options
@window_option
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="Decision probability for MCC and F1 [default: the run's threshold chosen on validation "
                   "(tracks: max F1, classifiers: max MCC), else 0.5; classifiers of more than two classes: "
                   "argmax]; given for a track model, its calls are the local maxima at or above it instead of a "
                   "density.")
@calls_option
@click.option("--min-distance", type=click.IntRange(min=0), default=100,
              help="Tracks: promoter calls on one strand are at least this many bp apart (as in predict).")
@click.option("--held-out/--whole-genome", default=None,
              help="Tracks: what of the genomes is scored. Default: every bin of the contigs this run did not "
                   "train on and, of those it trained on (known by name and length), only the part training held "
                   "out, with a warning naming them. --held-out: the end of every contig that training holds out "
                   "(val_fraction). --whole-genome: every bin, training part included (with a warning).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", help="Where to run.")
@precision_option
def evaluate(model_dirs, fasta, csv, labels, tss, circular, out, rc_average, shift_average, window_bp, window_offsets,
             threshold, calls_per_mbp, min_distance, held_out, device, precision) -> None:
    """Score a trained model: metrics.json, report.md, roc.png and pr.png."""
    from genolin.config import DataSpec
    from genolin.evaluate import evaluate as run_evaluation
    from genolin.inference import load_run

    check_calls(threshold, calls_per_mbp)
    if len(model_dirs) > 1 and out is None:
        raise click.UsageError("an ensemble (--model given more than once) needs --out for its report")
    run = load_run(list(model_dirs), device, shift_views=shift_average, window_bp=window_bp,
                   window_offsets=window_offsets, bf16_weights=precision)
    inputs = DataSpec(run.task.name, fasta=list(fasta), csv=csv, labels=labels, tss=list(tss),
                      circular=list(circular))
    run_evaluation(run, inputs, out or report_dir(model_dirs[0], (csv, *fasta)), rc_average=run.rc_average(rc_average),
                   threshold=run.decision_threshold(threshold),
                   calls_per_mbp=run.call_density(calls_per_mbp, threshold is not None),
                   min_distance_bp=min_distance, held_out=held_out)


def report_dir(model: str, inputs: tuple) -> str:
    """The default report folder: RUN_DIR/evaluation/NAME (NAME: the first input's file name without extensions);
    for a bundled model, whose folder is the package's, ./evaluation/MODEL_NAME (MODEL the name given)."""
    from pathlib import Path

    from genolin.io.files import file_stem

    first = next((i for i in inputs if i), None)
    name = file_stem(first) if first else "report"
    if not Path(model).is_dir() and len(Path(model).parts) == 1:  # a bundled model's name
        return str(Path("evaluation") / f"{model}_{name}")
    return str(Path(model) / "evaluation" / name)
