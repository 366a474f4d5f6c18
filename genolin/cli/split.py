"""``genolin split``: a labelled set -> train/dev/test TSVs (id, sequence, label) and a summary."""

from __future__ import annotations

import click


@click.command(context_settings={"show_default": True})
@click.option("--input", "inputs", multiple=True, metavar="FILE",
              help="Labelled set(s): one file to split, or three files (train, dev, test) already split.")
@click.option("--labels", metavar="TSV", help="id<TAB>label for FASTA input without label= headers.")
@click.option("--out-dir", required=True, metavar="DIR", help="Writes train.tsv, dev.tsv, test.tsv, summary.json.")
@click.option("--dev-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1,
              help="Share of one input that goes to dev (stratified by class).")
@click.option("--test-fraction", type=click.FloatRange(0, 1, max_open=True), default=0.1,
              help="Share of one input that goes to test (stratified by class).")
@click.option("--seed", type=int, default=0, help="Random seed of the split.")
def split(inputs, labels, out_dir, dev_fraction, test_fraction, seed) -> None:
    """Validate a labelled set and write it as train/dev/test TSVs (the form genolin train --csv reads)."""
    import logging

    from genolin.io.labelled import load_labelled, split_labelled, write_labelled_tsv

    if len(inputs) == 1:
        parts = split_labelled(load_labelled(inputs[0], labels=labels), dev_fraction, test_fraction, seed)
    elif len(inputs) == 3:
        train = load_labelled(inputs[0], labels=labels)
        parts = {"train": train, **{name: load_labelled(path, labels=labels, classes=train.classes, min_classes=1)
                                    for name, path in zip(("dev", "test"), inputs[1:], strict=True)}}
    else:
        raise click.UsageError("give one --input to split, or three (train, dev, test)")
    summary = write_labelled_tsv(parts, out_dir)
    logging.getLogger("genolin").info("%s", ", ".join(f"{k}: {v['n']} {v['classes']}" for k, v in summary.items()))
