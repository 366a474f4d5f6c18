"""``genolin tokenize``: FASTA -> .npz of k-mer token ids per record (see genolin.tokenize)."""

from __future__ import annotations

import click


@click.command(context_settings={"show_default": True})
@click.option("--fasta", "fasta", required=True, metavar="FASTA",
              help="Input FASTA: plain, gzip or bgzip; any number of records.")
@click.option("--k", "k", type=click.IntRange(1, 12), default=6, help="k-mer length (1-12).")
@click.option("--stride", type=click.IntRange(min=1), default=1, help="Step between k-mer starts.")
@click.option("--out", "out", required=True, metavar="OUT.npz",
              help="Output .npz: one int32 array per record, keyed by record name, plus k, stride, vocab_size.")
@click.option("--compress/--no-compress", default=False, help="Deflate the arrays (smaller, slower).")
def tokenize(fasta: str, k: int, stride: int, out: str, compress: bool) -> None:
    """Turn every FASTA record into k-mer token ids.

    Token ids: 0 [PAD], 1 [UNK], 2 [CLS], 3 [SEP], 4 [MASK], then 5 + the k-mer as a base-4 number (A=0, C=1,
    G=2, T=3). A k-mer holding N or another ambiguity code is [UNK]. The output is written under a temporary
    name and appears only when complete.
    """
    import logging
    import time

    from genolin.tokenize import tokenize_fasta

    log = logging.getLogger("genolin")
    t0 = time.perf_counter()
    counts = tokenize_fasta(fasta, out, k=k, stride=stride, compress=compress)
    log.info("%s: %d record(s), %d tokens (k=%d, stride=%d) -> %s in %.1f s", fasta, len(counts),
             sum(counts.values()), k, stride, out, time.perf_counter() - t0)
