"""Promoter calls as GFF3 (OUT.gff3), and with an annotation the gene table (OUT.genes.tsv).

OUT.gff3: ``##gff-version 3``, a ``##sequence-region`` line per contig, then per call two features, numbered on
through the file as OUT.peaks.bed's ``promoter_<n>`` (IDs unique across contigs):

    TSS (SO:0000315)       the called bin (1-based, inclusive), score its probability, ID tss_<n>
    promoter (SO:0000167)  PROMOTER_UPSTREAM_BP upstream of the bin to PROMOTER_DOWNSTREAM_BP past it (cut at the
                           contig's ends), ID promoter_<n>, tss=tss_<n>

With genes (``predict --genes``) each TSS also carries its class and gene (``genolin.genes.classify``): class=,
gene=, gene_id=, and for primary and secondary calls distance= (bp to the start codon). OUT.genes.tsv has a row per
gene of the contigs predicted (``--contig`` predicts some): its best call within ``genes.UPSTREAM_BP`` upstream (its
primary call), or '-' where there is none.
"""

from __future__ import annotations

import urllib.parse

from genolin.genes import Call, classify, gene_table, primary_calls
from genolin.io.annotation import Gene

# the span of a bacterial core promoter around its TSS: the -35 and -10 elements upstream, the start of the transcript
PROMOTER_UPSTREAM_BP = 60
PROMOTER_DOWNSTREAM_BP = 20
SOURCE = "genolin"
GENE_COLUMNS = ("gene_id", "name", "locus_tag", "contig", "strand", "start_codon", "call", "call_position",
                "distance", "score", "class")


def _escape(value: str) -> str:
    return urllib.parse.quote(str(value), safe=" :/.-_|()[]{}!@#$*+^~`'\"<>?")


class GffCalls:
    """OUT.gff3 written one contig's calls at a time (``write``, as ``CallsBed``); with ``genes``, also the rows of
    OUT.genes.tsv into ``table`` (each contig's as its calls are written)."""

    def __init__(self, fh, stride: int, lengths: dict[str, int], genes: list[Gene] | None = None, table=None):
        self.fh, self.stride, self.written, self.table = fh, stride, 0, table
        self.genes = None
        if genes is not None:
            self.genes = {c: [] for c in lengths}
            for g in genes:
                self.genes[g.contig].append(g)
        if table is not None:
            table.write("\t".join(GENE_COLUMNS) + "\n")
        fh.write("##gff-version 3\n")
        fh.write("".join(f"##sequence-region {c} 1 {n}\n" for c, n in lengths.items() if n))

    def write(self, contig: str, length: int, calls: list[tuple[int, float, str]]) -> None:
        """One contig's calls, [(bin, p, "+" or "-")] sorted."""
        s = self.stride
        mine = [Call(f"tss_{n}", contig, b * s + (min((b + 1) * s, length) - b * s) // 2, strand, p)
                for n, (b, p, strand) in enumerate(calls, start=self.written + 1)]
        links = primary = None
        if self.genes is not None:  # each gene's primary call, for the classes and the gene table both
            primary = primary_calls(mine, self.genes[contig])
            links = classify(mine, self.genes[contig], primary)
        lines = []
        for i, (b, p, strand) in enumerate(calls):
            n = self.written + 1 + i
            a, e = b * s, min((b + 1) * s, length)  # 0-based half-open
            extra = ""
            if links is not None:
                link = links[i]
                extra = f";class={link.cls}"
                if link.gene is not None:
                    extra += f";gene={_escape(link.gene.name)};gene_id={_escape(link.gene.id)}"
                if link.distance is not None:
                    extra += f";distance={link.distance}"
            up, down = (PROMOTER_UPSTREAM_BP, PROMOTER_DOWNSTREAM_BP) if strand == "+" else \
                (PROMOTER_DOWNSTREAM_BP, PROMOTER_UPSTREAM_BP)
            pa, pe = max(0, a - up), min(length, e + down)
            lines.append(f"{contig}\t{SOURCE}\tTSS\t{a + 1}\t{e}\t{p:.4f}\t{strand}\t.\tID=tss_{n};"
                         f"Name=promoter_{n};Ontology_term=SO:0000315{extra}\n")
            lines.append(f"{contig}\t{SOURCE}\tpromoter\t{pa + 1}\t{pe}\t{p:.4f}\t{strand}\t.\tID=promoter_{n};"
                         f"tss=tss_{n};Ontology_term=SO:0000167\n")
        self.fh.write("".join(lines))
        if self.genes is not None and self.table is not None:
            rows = []
            for row in gene_table(mine, self.genes[contig], primary):
                g, c = row.gene, row.call
                cells = [g.id, g.name, g.locus_tag or "-", g.contig, g.strand, g.start_codon + 1]
                cells += ([c.id, c.position + 1, row.distance, f"{c.score:.4f}", "primary"] if c is not None
                          else ["-"] * 5)
                rows.append("\t".join(map(str, cells)) + "\n")
            self.table.write("".join(rows))
        self.written += len(calls)
