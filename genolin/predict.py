"""``genolin predict``: apply a trained run to new sequences or whole new genomes.

    predict(run, inputs, out, options) -> a one-line summary
    predict_genomes(run, genomes, out_dir, options) -> each FASTA its own genome, DIR/summary.tsv; a summary line
    genome_list(path) -> [(FASTA, annotation or None, name or None)] of a text file listing genomes
    check_genome_memory(predictor, inputs, options) -> an InputError when a track prediction would not fit memory

The run's task writes its outputs (``genolin.tasks``), the model runs through ``genolin.inference``:
- sequence classifier: OUT is a TSV with columns id, length, prob_<class> for every class, pred, has_n
  (``SequenceTask.predict``);
- track model: OUT is a prefix for OUT.plus.bedGraph and OUT.minus.bedGraph (per-bin promoter probability,
  calibrated to the training positive rate, covering every contig) and OUT.peaks.bed (BED6 calls: local maxima at
  least min_distance bp apart on a strand, each contig's most probable ones at ``options.calls_per_mbp``, else those
  at or above ``options.threshold``; the CLI's default is the run's training TSS density, ``Run.call_density``)
  (``TrackTask.predict``). Genomes stream
  through overlapping windows, so memory does not grow with the genome; the windows of a circular contig
  (``inputs.circular``, or its FASTA header) run on across its origin.
Every output is written under a temporary name and renamed when complete. A track prediction's memory is estimated
first (``check_genome_memory``), as sequences' batches are (``Predictor.check_memory``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from genolin.config import DataSpec
from genolin.errors import InputError
from genolin.tasks import PredictOptions

# host bytes that do not depend on the model: the bedGraph writers' gathered stretches (2 strands x 9 stretches in
# flight x 65,536 bins x float32), or the bigWig writers' queues (2 x 16 stretches); and per bin of the genome, the
# bigWig writers' finest zoom level (2 strands x 40 bytes per record of 16 bins)
WRITER_BYTES = 2 * 16 * 65536 * 4
ZOOM_BYTES_PER_BIN = 2 * 40 / 16


def predict(run, inputs: DataSpec, out: str | os.PathLike, options: PredictOptions | None = None) -> str:
    """Write the predictions of ``run`` (a genolin.inference.Run) for ``inputs``; returns what was written."""
    if inputs.circular and not run.task.has_track:
        raise InputError(None, "--circular is for the genomes a track model reads, not for sequences")
    options = options or PredictOptions()
    if run.task.has_track and inputs.fasta and not inputs.csv:
        check_genome_memory(run.predictor, inputs, options)
    return run.task.predict(run.predictor, inputs, out, options)


SUMMARY_COLUMNS = ("genome", "fasta", "contigs", "bp", "calls", "seconds", "status")


LIST_COLUMNS = ("name", "fasta", "annotation")  # a --genomes file's header may name these (fasta required)
NAME_CHARS = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def genome_list(path: str | os.PathLike) -> list[tuple[str, str | None, str | None]]:
    """(FASTA, annotation or None, name or None) per genome of a text file, one per line: a FASTA path, then
    optionally its gene annotation (GFF3 or GenBank), separated by a tab or spaces. A first line of column names
    (``LIST_COLUMNS``: ``name fasta annotation`` in any order, fasta required) gives the columns instead; a name is
    the genome's file name in the output folder. Blank lines and lines starting with # are skipped; relative paths
    are from the file's folder."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the list of genomes ({exc})") from None
    out, columns, names = [], None, set()
    for n, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        if columns is None and not out and "fasta" in fields and set(fields) <= set(LIST_COLUMNS):
            if len(set(fields)) < len(fields):
                raise InputError(path, f"line {n}: a column named twice in the header ({' '.join(fields)})")
            columns = fields
            continue
        cols = columns or ["fasta", "annotation"]
        if len(fields) > len(cols) or (columns and len(fields) < cols.index("fasta") + 1):
            wanted = " and ".join(cols) if columns else "a FASTA and at most an annotation"
            raise InputError(path, f"line {n}: expected {wanted}, got {len(fields)} field(s)")
        row = dict(zip(cols, fields, strict=False))
        name = row.get("name")
        if name is not None:
            if not NAME_CHARS.fullmatch(name):
                raise InputError(path, f"line {n}: genome name {name!r} is no file name (letters, digits, '.', '_', "
                                       "'-'; not starting with '.')")
            if name in names:
                raise InputError(path, f"line {n}: genome name {name!r} given twice")
            names.add(name)
        where = {k: v if Path(v).is_absolute() else str(path.parent / v) for k, v in row.items() if k != "name"}
        out.append((where["fasta"], where.get("annotation"), name))
    if not out:
        raise InputError(path, "lists no genome (one FASTA per line, an annotation after it optional)")
    return out


def genome_names(fastas: list[str], given: list[str | None] | None = None) -> list[str]:
    """A file name per genome, unique (``unique_names``): the name given, else its FASTA's stem."""
    from genolin.io.files import FASTA_SUFFIXES, file_stem, unique_names

    return unique_names([file_stem(f, FASTA_SUFFIXES) for f in fastas], given)


def written_counts(prefix: Path) -> tuple[int, int, int]:
    """(contigs with bases, their bp, calls) of a track prediction, from its OUT.gff3 (``##sequence-region`` lines)
    and OUT.peaks.bed."""
    contigs = bp = 0
    with open(f"{prefix}.gff3") as fh:
        for line in fh:
            if line.startswith("##sequence-region"):
                contigs, bp = contigs + 1, bp + int(line.split()[3])
            elif not line.startswith("#"):
                break
    with open(f"{prefix}.peaks.bed") as fh:
        calls = sum(1 for _ in fh) - 1  # the track line
    return contigs, bp, calls


def predict_genomes(run, genomes: list[tuple[str, str | None, str | None]], out_dir: str | os.PathLike,
                    options: PredictOptions, circular: list[str] | tuple[str, ...] = (),
                    summary: str | os.PathLike | None = None) -> str:
    """Each (FASTA, annotation or None, name or None) of ``genomes`` (``genome_list``'s) predicted as a genome of
    its own into DIR/<name>.* (``genome_names``: the name given, else the FASTA's stem; ``predict``'s files, with the
    annotation's gene links), the model loaded once. A genome that fails on bad input is reported (a warning, and
    its row of the summary) and the run goes on, to end with an InputError naming the summary when any failed. The
    summary (``summary``, default DIR/summary.tsv; SUMMARY_COLUMNS) is rewritten after every genome, so an
    interrupted run leaves the finished genomes' files and their rows, and no part of the one it was on."""
    import dataclasses
    import logging
    import time

    from genolin.io.atomic import atomic_open
    from genolin.progress import progress_bar

    if not run.task.has_track:
        raise InputError("--out-dir", "writes the tracks of several genomes: a track model's; this is a "
                                      f"{run.task.name} model")
    log = logging.getLogger("genolin")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[list] = []
    failed = 0
    names = genome_names([f for f, _, _ in genomes], [n for _, _, n in genomes])
    summary = Path(summary) if summary else out_dir / "summary.tsv"
    with progress_bar(total=len(genomes), unit="genome", desc="genomes", enabled=options.progress) as bar:
        for (fasta, genes, _), name in zip(genomes, names, strict=True):
            t0 = time.perf_counter()
            quiet = dataclasses.replace(options, genes=genes, progress=False if len(genomes) > 1 else options.progress)
            try:
                line = predict(run, DataSpec(run.task.name, fasta=[fasta], circular=list(circular)), out_dir / name,
                               quiet)
                status = "ok"
            except InputError as exc:
                failed += 1
                status = f"error: {exc}"
                log.warning("%s; the other genomes go on", exc)
            seconds = time.perf_counter() - t0
            contigs = bp = calls = "-"
            if status == "ok" and run.predictor.writes:
                contigs, bp, calls = written_counts(out_dir / name)
                log.info("%s: %s", name, line)
            rows.append([name, fasta, contigs, bp, calls, f"{seconds:.2f}", " ".join(status.split())])
            if run.predictor.writes:
                with atomic_open(summary) as fh:
                    fh.write("\t".join(SUMMARY_COLUMNS) + "\n")
                    fh.writelines("\t".join(map(str, r)) + "\n" for r in rows)
            bar.update(1)
    if failed:
        raise InputError(summary, f"{failed} of {len(genomes)} genome(s) failed (their rows say why); "
                                  f"the other {len(genomes) - failed} were predicted")
    return f"{len(genomes)} genome(s) predicted -> {out_dir}/<genome>.*, {summary}"


def _batch(predictor, rc_average: bool) -> tuple[int, int]:
    """(rows, tokens per row) of a predictor's batch of genome windows (the reverse strands are rows of it too)."""
    cfg = predictor.task.cfg
    return predictor.batch_size * (2 if rc_average else 1), (predictor.window_bp or cfg.window_bp) // cfg.stride


def check_genome_memory(predictor, inputs: DataSpec, options: PredictOptions) -> None:
    """An InputError before the genome is read or a file is opened when a track prediction would need more host
    memory than there is (``genolin.memory.available_bytes``; GENOLIN_MEMORY_GIB sets it by hand): one line saying
    how much and what to change. Counted: on a CPU, the weights of every member and the activations of the batches
    the model runs at once (one per model thread, per tiling of --offset-average and per stride of an ensemble;
    ``memory.window_bytes``); the batches read ahead (base codes and probabilities), the writers' buffers and, for
    bigWig, their zoom level over the genome; and the bases of a plain gzip FASTA, read into memory whole (about 4
    bases per byte of the file, twice while it is read). Tracks stream, so nothing else grows with the genome. On
    CUDA the model's memory is the GPU's, not estimated here."""
    import torch

    from genolin import memory
    from genolin.inference.pipeline import CUDA_QUEUE_DEPTH, CUDA_TOKEN_THREADS, PIECES_AHEAD, cpu_model_threads
    from genolin.io.files import sniff_compression
    from genolin.io.store import estimated_bases

    cuda = predictor.device.type == "cuda"
    threads = cpu_model_threads()[0]
    running, ahead = (1, CUDA_QUEUE_DEPTH + CUDA_TOKEN_THREADS + PIECES_AHEAD) if cuda else (threads, threads + 2)
    predictors = [predictor] + [other for other, _ in predictor.others]
    batches = [_batch(p, options.rc_average) for p in predictors]
    passes = predictor.window_offsets
    needed = 0
    if not cuda:
        n_params = sum(m.n_parameters() for p in predictors for m, _ in p.members)
        needed += int(memory.HEADROOM * 4 * n_params) + passes * running * sum(
            memory.window_bytes(p.model.cfg, rows * tokens) for p, (rows, tokens) in zip(predictors, batches,
                                                                                         strict=True))
    # each batch read ahead: its base codes (rows x window bp and k-mer context), its probabilities and their copy
    needed += passes * ahead * sum(rows * (tokens * p.task.cfg.stride + 2 * p.task.cfg.k) + 2 * 4 * rows * tokens
                                   for p, (rows, tokens) in zip(predictors, batches, strict=True))
    files = [Path(f) for f in inputs.fasta if Path(f).is_file()]
    gzipped = [f for f in files if sniff_compression(f) == "gzip"]
    needed += WRITER_BYTES + 2 * sum(estimated_bases(f) for f in gzipped)
    if options.track_format == "bigwig":
        needed += int(ZOOM_BYTES_PER_BIN * sum(estimated_bases(f) for f in files) / predictor.task.cfg.stride)
    rows, tokens = batches[0]
    strands = " with the reverse strands" if options.rc_average else ""
    what = (f"predicting the genome in batches of {predictor.batch_size} windows of "
            f"{tokens * predictor.task.cfg.stride:,} bp ({rows} rows of {tokens:,} tokens{strands}"
            f"{f', {running} at once' if running > 1 else ''})"
            + (f" with {gzipped[0].name} in memory (plain gzip)" if gzipped else ""))
    fix = ("give a smaller --batch-size" + (" or --window-bp" if predictor.window_bp else "")
           + ("; bgzip the genome (random access: its bases are not held)" if gzipped else "")
           + "; GENOLIN_MEMORY_GIB sets the budget by hand")
    memory.check_fits(needed, torch.device("cpu"), what, fix)


__all__ = ["PredictOptions", "check_genome_memory", "predict"]
