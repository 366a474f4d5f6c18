"""``genolin train``: labelled sequences -> classifier, or genome(s) + TSS BED -> promoter track model."""

from __future__ import annotations

import dataclasses

import click

from genolin.cli.options import check_out, circular_option

DEVICES = click.Choice(["auto", "cpu", "cuda"])


@click.command(context_settings={"show_default": True})
@click.option("--fasta", multiple=True, metavar="FASTA",
              help="Training FASTA: labelled sequences (label= in headers, or with --labels), or genome(s) with "
                   "--tss (repeat for several genomes).")
@click.option("--csv", metavar="CSV", help="Training CSV/TSV with 'sequence' and 'label' columns.")
@click.option("--labels", metavar="TSV", help="id<TAB>label for the records of --fasta.")
@click.option("--tss", multiple=True, metavar="BED",
              help="TSS BED (strand in column 6): train a genome track model. Once per --fasta (paired in order), or "
                   "once naming contigs of every genome.")
@click.option("--val-fasta", multiple=True, metavar="FASTA", help="Validation FASTA (labelled set or genome).")
@click.option("--val-csv", metavar="CSV", help="Validation CSV/TSV.")
@click.option("--val-labels", metavar="TSV", help="id<TAB>label for --val-fasta.")
@click.option("--val-tss", multiple=True, metavar="BED",
              help="TSS BED(s) of the --val-fasta genomes, as --tss (default for tracks: validation on the held-out "
                   "end of each training contig).")
@circular_option
@click.option("--out", metavar="RUN_DIR", callback=check_out,
              help="Run directory to create (config, weights, metrics, log).")
@click.option("--init", metavar="MODEL",
              help="Fine-tune: start from the weights of this run directory or bundled model (genolin models), with "
                   "its tokens, encoder and settings, a schedule of 1,000 steps and a fifth of its learning rate "
                   "(--set changes them); the starting model is validated first and kept unless training beats it.")
@click.option("--teacher", multiple=True, metavar="MODEL",
              help="Distil: train a track model against this run directory's or bundled model's probabilities too "
                   "(repeat for an ensemble), mixed with the TSS labels as distill_weight says (--set "
                   "distill_weight=0.5).")
@click.option("--preset", type=click.Choice(["tiny", "small", "base"]), default=None,
              help="Model size and budget; tiny trains on 2 CPU cores in minutes. Sequence sets whose longest input "
                   "is over 1,024 bp get the preset's long-sequence recipe (single bases through a convolution stem, "
                   "a linear-time mixer, attention pooling).  [default: tiny]")
@click.option("--config", "config_yaml", metavar="YAML",
              help="Settings overriding the preset (genolin.config.TrainConfig: k, stride, window_bp, lr, ...; the "
                   "encoder under model: d_model, n_layers, mixer, causal, ...).")
@click.option("--set", "set_values", multiple=True, metavar="KEY=VALUE",
              help="One setting (as in --config, YAML-typed value; model.d_model=64 or d_model=64), applied after "
                   "--config; repeatable.")
@click.option("--device", type=DEVICES, default="auto", help="Where to train.")
@click.option("--seed", type=int, default=None, help="Random seed [default: 0].")
@click.option("--epochs", type=click.IntRange(min=1), default=None, help="Epochs [default: from the preset].")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Stop after this many optimizer steps.")
@click.option("--max-minutes", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop after this many minutes (a checkpoint is written; continue with --resume).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Batch size [default: from the preset].")
@click.option("--resume", metavar="RUN_DIR", help="Continue the run in RUN_DIR (its data and settings; --epochs, "
                                                   "--max-steps and --max-minutes may change).")
def train(fasta, csv, labels, tss, val_fasta, val_csv, val_labels, val_tss, circular, out, init, teacher, preset,
          config_yaml, set_values, device, seed, epochs, max_steps, max_minutes, batch_size, resume) -> None:
    """Train a promoter model.

    \b
    Sequence classifier:  genolin train --fasta TRAIN.fa --val-fasta DEV.fa --out RUN
                          genolin train --csv train.csv --val-csv dev.csv --out RUN
    Genome track model:   genolin train --fasta GENOME.fa.bgz --tss TSS.bed --out RUN
    Several genomes:      genolin train --fasta G1.fa.gz --tss G1.bed --fasta G2.fa.gz --tss G2.bed --out RUN
    Fine-tune:            genolin train --init bacteria --fasta GENOME.fa.gz --tss TSS.bed --out RUN
    Distil:               genolin train --teacher bacteria --preset tiny --fasta G.fa.gz --tss G.bed --out RUN
    """
    import logging

    from genolin import checkpoint as ckpt
    from genolin.config import DataSpec, Setting, parse_settings, read_yaml_config
    from genolin.train import configure, configure_init
    from genolin.train import train as run_training

    cli_values = {k: v for k, v in dict(seed=seed, epochs=epochs, max_steps=max_steps, max_minutes=max_minutes,
                                        batch_size=batch_size).items() if v is not None}
    if resume:
        saved = ckpt.read_run_config(resume)
        given = dict(fasta=fasta, csv=csv, labels=labels, tss=tss, val_fasta=val_fasta, val_csv=val_csv,
                     val_labels=val_labels, val_tss=val_tss, circular=circular, teacher=teacher)
        refuse_changes_on_resume(resume, saved.data, given, out=out, init=init, preset=preset,
                                 config_yaml=config_yaml, set_values=set_values, seed=seed, batch_size=batch_size)
        cli_values.pop("seed", None)
        cfg, spec, out = dataclasses.replace(saved.train, **cli_values), saved.data, resume
    else:
        if not out:
            raise click.UsageError("--out RUN_DIR is required (or --resume RUN_DIR)")
        if tss:
            task = "track"
            if not fasta:
                raise click.UsageError("--tss needs the genome(s) as --fasta")
            if csv or labels:
                raise click.UsageError("--csv/--labels are for sequence classifiers, not with --tss")
            if val_fasta and not val_tss:
                raise click.UsageError("--val-fasta of a track model needs --val-tss")
        else:
            task = "sequence"
            if circular:
                raise click.UsageError("--circular is for the genomes of a track model (with --tss)")
            if teacher:
                raise click.UsageError("--teacher is for track models (genomes with --tss)")
            if bool(csv) == bool(fasta):
                raise click.UsageError("give the training sequences as --csv or as --fasta (not both)")
            if len(fasta) > 1 or len(val_fasta) > 1:
                raise click.UsageError("a sequence classifier takes one --fasta and one --val-fasta")
        settings = (read_yaml_config(config_yaml) if config_yaml else []) + parse_settings(set_values)
        settings += [Setting(k, v, f"--{k.replace('_', '-')}") for k, v in cli_values.items()]
        spec = DataSpec(task=task, fasta=list(fasta), csv=csv, labels=labels, tss=list(tss), val_fasta=list(val_fasta),
                        val_csv=val_csv, val_labels=val_labels, val_tss=list(val_tss), circular=list(circular),
                        teacher=list(teacher))
        if init:
            if preset:
                raise click.UsageError("--init takes the starting model's settings; --preset is for new models")
            cfg = configure_init(init, settings, spec, None if device == "auto" else device)
        else:
            cfg = configure(preset or "tiny", settings, spec)
    try:
        summary = run_training(cfg, spec, out, device=device, resume=bool(resume))
    except KeyboardInterrupt:  # the trainer saved a checkpoint if it had taken a step since the last one
        import os

        if os.environ.get("RANK", "0") == "0":  # under torchrun the process that wrote the checkpoint says it
            click.echo(f"genolin: {interrupted(out)}", err=True)
        raise SystemExit(130) from None  # the shell's status for a run stopped by Ctrl-C
    if summary["best_score"] is None:
        best = "no validation: the last weights kept"
    else:
        best = (f"best validation score {summary['best_score']:.4f} (epoch {summary['best_epoch']}"
                + (": the starting model, which training did not beat)" if summary["best_epoch"] == 0 else ")"))
    logging.getLogger("genolin").info("done: %d epoch(s), %d steps, %s in %.1f min -> %s", summary["epochs"],
                                      summary["steps"], best, summary["seconds"] / 60, out)


def refuse_changes_on_resume(resume: str, data, given: dict, **options) -> None:
    """A UsageError naming the first option given with --resume that would change the run: a data option whose
    value differs from the run's (``data``, its DataSpec; paths compared as resolved files), another --out, or any
    setting (--init, --preset, --config, --set, --seed, --batch-size: the run keeps its own)."""
    from pathlib import Path

    def files(value) -> list[str]:  # an option's value(s) as resolved paths (a name that is no file: as given)
        values = [] if value is None else [value] if isinstance(value, str) else list(value)
        return [str(Path(v).resolve()) if Path(v).exists() else str(v) for v in values]

    for name, value in given.items():
        if value and files(value) != files(getattr(data, name)):
            option = f"--{name.replace('_', '-')}"
            raise click.UsageError(f"{option} differs from the data of the run in {resume}, which --resume continues "
                                   f"on its own data; start a new run (--out) to train on other data")
    out = options.pop("out")
    if out and Path(out).resolve() != Path(resume).resolve():
        raise click.UsageError(f"--out {out}: --resume continues the run in {resume} and writes there; leave --out "
                               "out, or start a new run without --resume")
    for name, value in options.items():
        if value is not None and value != ():  # --seed 0 is a setting too
            option = "--config" if name == "config_yaml" else "--set" if name == "set_values" else \
                f"--{name.replace('_', '-')}"
            raise click.UsageError(f"{option}: --resume continues the run in {resume} with its own settings (only "
                                   "--epochs, --max-steps and --max-minutes may change); start a new run to change "
                                   "them")


def interrupted(out: str) -> str:
    """What an interrupted training left in ``out``, in one line: the checkpoint --resume continues from (the one
    Ctrl-C saved, or an earlier one when no step was taken since), or nothing."""
    import json
    from pathlib import Path

    state = Path(out) / "trainer_state.json"
    try:
        saved = json.loads(state.read_text())
    except (OSError, ValueError):
        saved = None
    if not isinstance(saved, dict):
        return f"interrupted before the first checkpoint (no optimizer step was taken): nothing was saved in {out}"
    epoch, batch = saved.get("epoch"), saved.get("batch")
    if not isinstance(epoch, int) or not isinstance(batch, int):
        where = ""
    elif batch:
        where = f" (epoch {epoch + 1}, batch {batch})"
    else:
        where = f" (the end of epoch {epoch})" if epoch else " (before the first step)"
    return (f"interrupted; {out} holds the checkpoint of step {saved.get('step')}{where}: "
            f"genolin train --resume {out} continues from there")
