"""Promoter calls linked to the genes they most likely drive, classified as TSS mapping studies do.

    classify(calls, genes) -> [Link]: per call its class and gene
    gene_table(calls, genes) -> [GeneRow]: per gene its best upstream call

The classes of Sharma et al. 2010 (Nature 464:250, the dRNA-seq map of H. pylori), used since by most bacterial
TSS maps (ANNOgesic, TSSAR):

    primary     the best-scored call on a gene's strand within UPSTREAM_BP upstream of its start codon
    secondary   another call within UPSTREAM_BP upstream of the same gene
    internal    inside a gene, on its strand
    antisense   inside a gene, or within ANTISENSE_BP of it, on the opposite strand
    orphan      none of these

A call that fits several takes the first in this order, and the gene of that class (for primary and secondary the
nearest gene it lies upstream of). Positions are a call's bin centre; "upstream" includes the start codon itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from genolin.io.annotation import Gene

UPSTREAM_BP = 300
ANTISENSE_BP = 100
CLASSES = ("primary", "secondary", "internal", "antisense", "orphan")


@dataclass(frozen=True)
class Call:
    id: str
    contig: str
    position: int  # 0-based, the called bin's centre
    strand: str
    score: float


@dataclass(frozen=True)
class Link:
    call: Call
    cls: str
    gene: Gene | None
    distance: int | None  # primary, secondary: bp from the call to the gene's start codon (0: on it); else None


@dataclass(frozen=True)
class GeneRow:
    gene: Gene
    call: Call | None  # its primary call: the best within UPSTREAM_BP upstream, None when there is none
    distance: int | None


def upstream_distance(call: Call, gene: Gene) -> int | None:
    """bp from ``call`` up to ``gene``'s start codon when the call lies on its strand within UPSTREAM_BP upstream of
    it (0: on the start codon); else None."""
    if call.contig != gene.contig or call.strand != gene.strand:
        return None
    d = gene.start_codon - call.position if gene.strand == "+" else call.position - gene.start_codon
    return d if 0 <= d <= UPSTREAM_BP else None


def _by_contig(items: Iterable, key=lambda x: x.contig) -> dict[str, list]:
    out: dict[str, list] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


def primary_calls(calls: list[Call], genes: list[Gene]) -> dict[str, tuple[Call, int]]:
    """Gene id -> (its primary call, distance): the best-scored call within UPSTREAM_BP upstream on its strand (ties:
    the nearer)."""
    out = {}
    calls_of = _by_contig(calls)
    for contig, contig_genes in _by_contig(genes).items():
        mine = sorted(calls_of.get(contig, []), key=lambda c: c.position)
        pos = np.array([c.position for c in mine], dtype=np.int64)
        for g in contig_genes:
            lo, hi = np.searchsorted(pos, [g.start_codon - UPSTREAM_BP, g.start_codon + UPSTREAM_BP + 1])
            near = [(c, upstream_distance(c, g)) for c in mine[lo:hi]]
            near = [(c, d) for c, d in near if d is not None]
            if near:
                out[g.id] = max(near, key=lambda cd: (cd[0].score, -cd[1]))
    return out


def classify(calls: list[Call], genes: list[Gene], primary: dict[str, tuple[Call, int]] | None = None
             ) -> list[Link]:
    """Each call's class and gene (module docstring), in the order of ``calls``; ``primary``: their
    ``primary_calls``, where the caller has them already."""
    primary = primary_calls(calls, genes) if primary is None else primary
    primary_of: dict[str, list[tuple[int, Gene]]] = {}
    genes_by_id = {g.id: g for g in genes}
    for gid, (c, d) in primary.items():
        primary_of.setdefault(c.id, []).append((d, genes_by_id[gid]))
    genes_of = _by_contig(genes)
    starts = {c: np.array([g.start for g in gs], dtype=np.int64) for c, gs in genes_of.items()}
    longest = {c: max(g.end - g.start for g in gs) for c, gs in genes_of.items()}
    out = []
    for call in calls:
        if call.id in primary_of:
            d, g = min(primary_of[call.id], key=lambda dg: dg[0])
            out.append(Link(call, "primary", g, d))
            continue
        mine = genes_of.get(call.contig, [])
        # genes whose start lies where one could hold the call, have it upstream or be antisense to it
        reach = longest.get(call.contig, 0) + UPSTREAM_BP + ANTISENSE_BP
        lo, hi = (np.searchsorted(starts[call.contig], [call.position - reach, call.position + reach + 1])
                  if mine else (0, 0))
        near = mine[lo:hi]
        upstream = [(d, g) for g in near if (d := upstream_distance(call, g)) is not None]
        if upstream:
            d, g = min(upstream, key=lambda dg: dg[0])
            out.append(Link(call, "secondary", g, d))
            continue
        inside = [g for g in near if g.start <= call.position < g.end]
        sense = [g for g in inside if g.strand == call.strand]
        if sense:
            out.append(Link(call, "internal", sense[0], None))
            continue
        anti = [g for g in near if g.strand != call.strand
                and g.start - ANTISENSE_BP <= call.position < g.end + ANTISENSE_BP]
        if anti:
            out.append(Link(call, "antisense", min(anti, key=lambda g: _gap(call.position, g)), None))
            continue
        out.append(Link(call, "orphan", None, None))
    return out


def _gap(position: int, gene: Gene) -> int:
    return 0 if gene.start <= position < gene.end else min(abs(position - gene.start), abs(position - gene.end + 1))


def gene_table(calls: list[Call], genes: list[Gene], primary: dict[str, tuple[Call, int]] | None = None
               ) -> list[GeneRow]:
    """Per gene (in order) its primary call and the distance to its start codon (no call within UPSTREAM_BP upstream:
    None); ``primary``: the calls' ``primary_calls``, where the caller has them already."""
    primary = primary_calls(calls, genes) if primary is None else primary
    return [GeneRow(g, *primary.get(g.id, (None, None))) for g in genes]
