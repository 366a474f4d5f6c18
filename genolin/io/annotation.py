"""Genes of a genome annotation (``predict --genes``): GFF3 (Bakta, Prokka, NCBI RefSeq; plain or gzip) or GenBank.

    read_genes(path, contigs) -> [Gene]: the annotation's genes, 0-based half-open, on the contigs of the genome

A gene is a ``gene`` feature (its ``Name``/``gene``, ``locus_tag`` and ``ID``); an annotation without gene features
(some Prokka GFF3s) gives its CDS, tRNA, rRNA, tmRNA and ncRNA features instead. Its start is the first base of its
first codon: ``start`` on the + strand, ``end - 1`` on the - strand. GFF3 contigs are matched to the FASTA's by name
(NCBI's ``NC_000913.3`` as in the FASTA header), GenBank records by their name or ``accession.version``. A GFF3's
``##FASTA`` section is skipped.
"""

from __future__ import annotations

import gzip
import logging
import urllib.parse
import zlib
from dataclasses import dataclass
from pathlib import Path

from genolin.errors import InputError

log = logging.getLogger(__name__)

GENE_TYPES = ("gene",)
# an annotation without gene features: its genes are these
PRODUCT_TYPES = ("CDS", "tRNA", "rRNA", "tmRNA", "ncRNA")
GENBANK_SUFFIXES = (".gb", ".gbk", ".gbff", ".genbank")


@dataclass(frozen=True)
class Gene:
    contig: str
    start: int  # 0-based, half-open
    end: int
    strand: str  # "+" or "-"
    id: str
    name: str
    locus_tag: str
    type: str

    @property
    def start_codon(self) -> int:
        """The first base of its first codon (0-based): its 5' end."""
        return self.start if self.strand == "+" else self.end - 1


def is_genbank(path: str | Path) -> bool:
    name = str(path).lower().removesuffix(".gz")
    return name.endswith(GENBANK_SUFFIXES)


def _open_text(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    return gzip.open(path, "rt") if magic == b"\x1f\x8b" else open(path)


def read_genes(path: str | Path, contigs: dict[str, int]) -> list[Gene]:
    """The genes of ``path`` (GFF3 or GenBank, by content) on ``contigs`` (name -> length), sorted by contig order and
    start; InputError naming the file and line for what cannot be read, for a gene past its contig's end, or for an
    annotation none of whose genes lies on these contigs."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such annotation file (--genes: GFF3 or GenBank)")
    try:
        with _open_text(path) as fh:
            first = next((line for line in fh if line.strip()), "")
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(path, f"cannot read the annotation ({exc})") from None
    try:
        if first.startswith("LOCUS") or is_genbank(path):
            genes = _genbank_genes(path, contigs)
        elif first.startswith("##gff-version") or first.count("\t") >= 8:
            genes = _gff_genes(path)
        else:
            raise InputError(path, "not GFF3 (no '##gff-version 3' line or 9 tab-separated columns) nor GenBank (no "
                                   "LOCUS line): give the annotation as GFF3 or GenBank")
    except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:  # a bad byte or a cut gzip past the start
        raise InputError(path, f"cannot read the annotation ({exc})") from None
    known = [g for g in genes if g.contig in contigs]
    across = [g for g in known if g.end > contigs[g.contig]]
    if across and all(g.end <= 2 * contigs[g.contig] for g in across):  # a circle's origin (RefSeq: end > length)
        log.warning("%s: %d gene(s) cross the origin of a circular contig (first %s); left out of the gene links",
                    path, len(across), across[0].id)
        known = [g for g in known if g not in across]
    if genes and not known:
        names = sorted({g.contig for g in genes})
        raise InputError(path, f"no gene on the genome's contigs: the annotation names {', '.join(names[:3])}"
                               f"{', ...' if len(names) > 3 else ''}; the FASTA has {', '.join(list(contigs)[:3])}"
                               f"{', ...' if len(contigs) > 3 else ''}")
    for g in known:
        if g.end > contigs[g.contig]:
            raise InputError(path, f"gene {g.id} ends at {g.end:,} past the end of contig {g.contig!r} "
                                   f"({contigs[g.contig]:,} bp): an annotation of another assembly?")
    order = {c: i for i, c in enumerate(contigs)}
    return sorted(known, key=lambda g: (order[g.contig], g.start, g.end, g.strand))


def _attributes(text: str) -> dict[str, str]:
    out = {}
    for item in text.strip().strip(";").split(";"):
        key, eq, value = item.strip().partition("=")
        if eq:
            out[key] = urllib.parse.unquote(value)
    return out


def _gff_genes(path: Path) -> list[Gene]:
    genes: dict[str, list[Gene]] = {t: [] for t in GENE_TYPES + PRODUCT_TYPES}
    with _open_text(path) as fh:
        for n, line in enumerate(fh, start=1):
            if line.startswith("##FASTA"):
                break
            if not line.strip() or line.startswith("#"):
                continue
            f = line.rstrip("\n\r").split("\t")
            if len(f) != 9:
                raise InputError(path, f"line {n}: expected 9 tab-separated GFF3 columns, got {len(f)}")
            if f[2] not in genes:
                continue
            try:
                start, end = int(f[3]) - 1, int(f[4])
            except ValueError:
                raise InputError(path, f"line {n}: start {f[3]!r} or end {f[4]!r} is not an integer") from None
            if start < 0 or end <= start:
                raise InputError(path, f"line {n}: start {f[3]} and end {f[4]} are no 1-based interval")
            if f[6] not in ("+", "-"):
                continue  # a feature with no strand has no start codon
            a = _attributes(f[8])
            gid = a.get("ID") or a.get("locus_tag") or f"{f[0]}:{start + 1}-{end}{f[6]}"
            name = a.get("Name") or a.get("gene") or a.get("locus_tag") or gid
            genes[f[2]].append(Gene(f[0], start, end, f[6], gid, name, a.get("locus_tag", ""), f[2]))
    if genes["gene"]:
        return genes["gene"]
    return [g for t in PRODUCT_TYPES for g in genes[t]]


def _genbank_genes(path: Path, contigs: dict[str, int]) -> list[Gene]:
    from Bio import SeqIO

    genes: dict[str, list[Gene]] = {t: [] for t in GENE_TYPES + PRODUCT_TYPES}
    try:
        with _open_text(path) as fh:
            records = list(SeqIO.parse(fh, "genbank"))
    except (ValueError, AssertionError) as exc:
        raise InputError(path, f"cannot read GenBank ({exc})") from None
    if not records:
        raise InputError(path, "no GenBank record (a LOCUS ... // entry)")
    for rec in records:
        contig = next((c for c in (rec.id, rec.name) if c in contigs), rec.id or rec.name)
        for feat in rec.features:
            if feat.type not in genes or feat.location is None or feat.location.strand not in (1, -1):
                continue
            q = {k: v[0] for k, v in feat.qualifiers.items() if v}
            start, end = int(feat.location.start), int(feat.location.end)
            starts = [int(p.start) for p in feat.location.parts]
            if len(starts) > 1 and 0 in starts and max(starts) > 0 and int(feat.location.end) == len(rec.seq):
                # join(L-99..L,1..200): across the origin, written as GFF3 writes it, its end past the contig's
                head = max(feat.location.parts, key=lambda p: int(p.start))
                tail = next(p for p in feat.location.parts if int(p.start) == 0)
                start, end = int(head.start), len(rec.seq) + int(tail.end)
            strand = "+" if feat.location.strand == 1 else "-"
            tag = q.get("locus_tag", "")
            gid = tag or q.get("gene") or f"{contig}:{start + 1}-{end}{strand}"
            genes[feat.type].append(Gene(contig, start, end, strand, gid, q.get("gene") or tag or gid, tag,
                                         feat.type))
    if genes["gene"]:
        return genes["gene"]
    return [g for t in PRODUCT_TYPES for g in genes[t]]
