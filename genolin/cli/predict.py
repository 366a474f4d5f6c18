"""``genolin predict``: apply a trained run to sequences (TSV) or to whole genomes (bedGraph + BED)."""

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
@click.option("--fasta", multiple=True, metavar="FASTA", help="Sequences (sequence model) or genome(s) (track model).")
@click.option("--csv", metavar="CSV", help="Sequences in a CSV/TSV 'sequence' column (sequence model).")
@click.option("--out", metavar="OUT", callback=check_out,
              help="Sequence model: the TSV to write. Track model: a prefix for OUT.plus.bedGraph, "
                   "OUT.minus.bedGraph (or .bw), OUT.peaks.bed and OUT.gff3 (and OUT.genes.tsv with --genes).")
@click.option("--out-dir", metavar="DIR", callback=check_out,
              help="Track model: each --fasta (or each genome of --genomes) is a genome of its own, written to "
                   "DIR/<file name>.* with DIR/summary.tsv; the model loads once, and a bad genome is reported there "
                   "while the others go on.")
@click.option("--genomes", "genome_file", metavar="LIST",
              help="Track model, with --out-dir: a text file of genomes, one per line: a FASTA, then optionally its "
                   "gene annotation (GFF3 or GenBank); or under a header line of column names (name, fasta, "
                   "annotation) whose name column names each genome's files.")
@click.option("--summary", metavar="TSV", default=None, callback=check_out,
              help="With --out-dir: the table of genomes predicted (genome, fasta, contigs, bp, calls, seconds, "
                   "status) [default: DIR/summary.tsv].")
@click.option("--genes", multiple=True, metavar="ANNOTATION",
              help="Track model: a gene annotation (GFF3 from Bakta, Prokka or RefSeq, or GenBank) whose genes the "
                   "calls are linked to: each call's class (primary, secondary, internal, antisense, orphan) in "
                   "OUT.gff3, and OUT.genes.tsv with each gene's best upstream call. With --out-dir, one per --fasta, "
                   "in order.")
@averaging_options
@window_option
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="Decision probability: the last class of a two-class classifier [default: the run's threshold "
                   "chosen on validation (max MCC), else 0.5]; for a track model, call the local maxima at or above "
                   "it instead of a density.")
@calls_option
@click.option("--format", "track_format", type=click.Choice(["bedgraph", "bigwig"]), default="bedgraph",
              help="Track: the per-strand values as OUT.plus/minus.bedGraph (text) or OUT.plus/minus.bw (bigWig).")
@click.option("--contig", "contigs", multiple=True, metavar="NAME",
              help="Track: predict only this contig (repeatable; outputs keep the FASTA's order) [default: all].")
@circular_option
@click.option("--min-distance", type=click.IntRange(min=0), default=100,
              help="Track: called promoters on one strand are at least this many bp apart.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Windows or sequences per batch.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", help="Where to run.")
@precision_option
@click.option("--compile/--no-compile", "compile_model", default=False,
              help="Run the model's blocks through torch.compile (compiling takes seconds on a machine's first run). "
                   "Off by default: eager batches replay CUDA graphs, which compiled blocks cannot, and run faster.")
def predict(model_dirs, fasta, csv, out, out_dir, genome_file, summary, genes, rc_average, shift_average, window_bp,
            window_offsets, threshold, calls_per_mbp, track_format, contigs, circular, min_distance, batch_size, device,
            precision, compile_model) -> None:
    """Predict promoters with a trained model.

    \b
    Sequences:        genolin predict --model RUN --csv seqs.csv --out predictions.tsv
    A genome:         genolin predict --model bacteria --fasta genome.fa.gz --genes genome.gff3 --out genome
    Many genomes:     genolin predict --model bacteria --fasta a.fa.gz --fasta b.fa.gz --out-dir DIR
                      genolin predict --model bacteria --genomes genomes.txt --out-dir DIR
    """
    import logging
    import time

    from genolin.cli import heavy_imports
    from genolin.timings import mark

    mark("command parsed")
    with heavy_imports():
        from genolin.config import DataSpec
        from genolin.inference import load_run
        from genolin.predict import PredictOptions, genome_list, predict_genomes
        from genolin.predict import predict as run_prediction

    mark("imports (torch, genolin)")

    if summary and not out_dir:
        raise click.UsageError("--summary is the table of an --out-dir run: give --out-dir DIR")
    if genome_file and not out_dir:
        raise click.UsageError("--genomes lists genomes for --out-dir: give --out-dir DIR")
    if genome_file and (fasta or csv):
        raise click.UsageError("give the genomes as --genomes LIST or as --fasta, not both")
    if not genome_file and bool(csv) == bool(fasta):
        raise click.UsageError("give the input as --fasta or as --csv")
    if bool(out) == bool(out_dir):
        raise click.UsageError("give --out (one output) or --out-dir (a genome per FASTA), one of them")
    if out_dir and csv:
        raise click.UsageError("--out-dir writes a genome per --fasta; sequences (--csv) go to --out")
    if genes and csv:
        raise click.UsageError("--genes links a genome's promoter calls to its genes: a track model's --fasta")
    if genome_file and genes:
        raise click.UsageError("--genomes LIST names each genome's annotation in its second column; leave --genes out")
    if out_dir and genes and len(genes) != len(fasta):
        raise click.UsageError(f"with --out-dir give --genes once per --fasta, in order ({len(fasta)} FASTA, "
                               f"{len(genes)} annotations), or list them with --genomes")
    if out and len(genes) > 1:
        raise click.UsageError("one --genes for one --out; several genomes, each with its annotation: --out-dir")
    check_calls(threshold, calls_per_mbp)
    # under torchrun the genome's windows are shared out over the processes
    run = load_run(list(model_dirs), device, batch_size=batch_size, distributed=True, compile=compile_model,
                   shift_views=shift_average, window_bp=window_bp, window_offsets=window_offsets,
                   bf16_weights=precision)
    if (genes or out_dir) and not run.task.has_track:
        raise click.UsageError(f"{'--genes' if genes else '--out-dir'} is for track models (genomes); "
                               f"{model_dirs[0]} is a {run.task.name} model")
    inputs = DataSpec(run.task.name, fasta=list(fasta), csv=csv, circular=list(circular))
    density = run.call_density(calls_per_mbp, threshold is not None)
    options = PredictOptions(rc_average=run.rc_average(rc_average),
                             threshold=run.decision_threshold(threshold) if density is None else 0.0,
                             min_distance_bp=min_distance, calls_per_mbp=density, track_format=track_format,
                             contigs=tuple(contigs), genes=genes[0] if out and genes else None)
    t0 = time.perf_counter()
    try:
        log = logging.getLogger("genolin")
        if out_dir:
            genomes = genome_list(genome_file) if genome_file else [(f, g, None) for f, g in
                                                                    zip(fasta, genes or [None] * len(fasta),
                                                                        strict=True)]
            log.info("%s", predict_genomes(run, genomes, out_dir, options, circular, summary))
        else:
            log.info("%s", run_prediction(run, inputs, out, options))
        log.info("%.2f s after the model was loaded", time.perf_counter() - t0)
    finally:
        run.predictor.dist.close()
    mark("predict returned")
