"""``genolin explain``: per-base attributions (ISM, saliency, DeepLIFT/SHAP) with logos and bigWig tracks."""

from __future__ import annotations

import click

from genolin.cli.options import ModelOption, check_out, circular_option


@click.command(context_settings={"show_default": True})
@click.option("--model", "model_dir", required=True, metavar="RUN_DIR", cls=ModelOption,
              help="A run directory from genolin train, or {bundled} (of an ensemble, its first member).")
@click.option("--fasta", multiple=True, metavar="FASTA",
              help="Sequences (sequence classifier) or a genome (track model, with --regions).")
@click.option("--csv", metavar="CSV", help="Sequences in a CSV/TSV 'sequence' column (sequence classifier).")
@click.option("--regions", metavar="BED", help="Track model: the genome regions to explain (BED; column 6 the "
                                                "strand whose bin is explained, '.' = +).")
@click.option("--method", type=click.Choice(["ism", "saliency", "deepliftshap"]), default="ism",
              help="ism: exact single-base substitution effects on the log-odds; saliency: gradients (captum); "
                   "deepliftshap: DeepLIFT/SHAP against dinucleotide shuffles (tangermeme).")
@click.option("--target", metavar="CLASS", default=None,
              help="Sequence classifier: the class whose log-odds are explained [default: the second of two].")
@click.option("--rc-average/--no-rc-average", default=False,
              help="Sequence classifier, ism: explain the strand-averaged probability (as predict --rc-average "
                   "--shift-average 0).")
@click.option("--bin", "bin_offset", type=int, default=0,
              help="Track model: the explained bin, in bins from the bin of the region's centre base.")
@click.option("--flank", "flank_bp", type=click.IntRange(min=0), default=100,
              help="Track model: a region narrower than 2 x FLANK + 1 bp (as predict's peaks.bed calls, one bin "
                   "wide) is widened to its centre base +- FLANK bp, clipped to its contig. 0: regions as given.")
@click.option("--context", "context_bp", type=click.IntRange(min=0), default=None,
              help="Track model: the model sees the region with this many bases of its genome either side, left "
                   "unmutated (default: one training window in all, centred on the region, as predict sees it; "
                   "0: the region's bases alone).")
@click.option("--top", type=click.IntRange(min=0), default=5, help="Sequence logos (PNG) of this many sequences "
                                                                    "with the highest log-odds.")
@click.option("--motifs/--no-motifs", default=False,
              help="Run TF-MoDISco on the attributions and match its motifs to known promoter elements "
                   "(motifs.meme, motifs.tsv, motif_logos/; needs a few hundred sequences).")
@click.option("--domain", type=click.Choice(["bacteria", "eukaryotes", "any"]), default="any",
              help="--motifs: match motifs only to the known promoter elements of this domain (bacteria: sigma70 -10, "
                   "-35 and extended -10 boxes; eukaryotes: TATA box, initiator, CCAAT and GC boxes).")
@click.option("--shuffles", type=click.IntRange(min=1), default=20, help="deepliftshap: references per sequence.")
@click.option("--seed", type=int, default=0, help="deepliftshap: seed of the shuffles.")
@click.option("--max-inputs", type=click.IntRange(min=1), default=2_000_000, metavar="N",
              help="Refuse work of more than N model inputs (counted before any is scored: ism 3 per base of "
                   "every sequence or region, saliency 1 per sequence, deepliftshap --shuffles per sequence); a "
                   "log line gives the count and, after the first batch, the time in all.")
@circular_option
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", help="Where to run.")
@click.option("--out", required=True, metavar="DIR", callback=check_out,
              help="Folder for METHOD.npz (one (L, 4) array per sequence, columns A C G T), scores.tsv, logos/ "
                   "and, for regions, METHOD.bw.")
def explain(model_dir, fasta, csv, regions, method, target, rc_average, bin_offset, flank_bp, context_bp, top, motifs,
            domain, shuffles, seed, max_inputs, circular, device, out) -> None:
    """Explain predictions: which bases drive each sequence's score."""
    import logging

    from genolin.config import DataSpec
    from genolin.explain import ExplainOptions
    from genolin.explain import explain as run_explain
    from genolin.inference import load_run
    from genolin.models import resolve_model

    if bool(csv) == bool(fasta):
        raise click.UsageError("give the input as --fasta or as --csv")
    model_dir = resolve_model(model_dir, None if device == "auto" else device, use="explain explains")
    run = load_run(model_dir, device, bf16_weights=False)  # attributions: gradients of float32 weights
    inputs = DataSpec(run.task.name, fasta=list(fasta), csv=csv, circular=list(circular))
    options = ExplainOptions(method=method, target=target, rc_average=rc_average, bin_offset=bin_offset,
                             flank_bp=flank_bp, context_bp=context_bp, top=top, motifs=motifs, domain=domain,
                             shuffles=shuffles, seed=seed, max_inputs=max_inputs)
    logging.getLogger("genolin").info("%s", run_explain(run, inputs, out, options, regions_bed=regions))
