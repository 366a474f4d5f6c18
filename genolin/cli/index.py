"""``genolin index``: validate a FASTA end to end, build its .fai (and .gzi) index, write contig sizes."""

from __future__ import annotations

import click


@click.command(context_settings={"show_default": True})
@click.option("--fasta", required=True, metavar="FASTA", help="Genome FASTA: plain, gzip or bgzip.")
@click.option("--sizes", required=True, metavar="OUT.sizes",
              help="Contig sizes to write (name<TAB>length, FASTA order; the chrom.sizes of UCSC tools).")
def index(fasta: str, sizes: str) -> None:
    """Check every record of FASTA, index it for random access and write its contig sizes."""
    import logging

    from genolin.io.atomic import atomic_open
    from genolin.io.fasta import Genome, read_fasta

    lengths = {rec.name: len(rec) for rec in read_fasta(fasta)}  # validates the whole file before any index is made
    with Genome(fasta, checked=True) as genome:  # builds .fai / .gzi when missing, stale or not matching the file
        if genome.lengths != lengths:
            raise click.ClickException(f"{fasta}: the index disagrees with the file; delete its .fai/.gzi")
    with atomic_open(sizes) as fh:
        fh.writelines(f"{name}\t{n}\n" for name, n in lengths.items())
    logging.getLogger("genolin").info("%s: %d contig(s), %d bp -> %s", fasta, len(lengths), sum(lengths.values()),
                                      sizes)
