"""Derive gene_starts.bed (BED6, one 1-bp interval per RefSeq gene at its 5' end) from the bundled RefSeq GFF3.

Gene starts are a proxy for transcription start sites (a TSS lies at or upstream of the gene start): demo and
test targets for the track task. Real TSS maps (RegulonDB, Promotech) stay in ../shared.

    python data/ecoli_k12/derive_gene_starts.py
"""

import gzip
from pathlib import Path

here = Path(__file__).parent
rows = []
with gzip.open(here / "GCF_000005845.2_ASM584v2_genomic.gff.gz", "rt") as fh:
    for line in fh:
        f = line.rstrip("\n").split("\t")
        if line.startswith("#") or len(f) < 9 or f[2] != "gene" or f[6] not in "+-":
            continue
        start, end = int(f[3]), int(f[4])  # GFF: 1-based, inclusive
        five_prime = start - 1 if f[6] == "+" else end - 1  # 0-based position of the first transcribed base
        name = dict(kv.split("=", 1) for kv in f[8].split(";") if "=" in kv).get("Name", ".")
        rows.append((f[0], five_prime, name, f[6]))
rows.sort(key=lambda r: (r[0], r[1]))
with open(here / "gene_starts.bed", "w") as out:
    for chrom, pos, name, strand in rows:
        out.write(f"{chrom}\t{pos}\t{pos + 1}\t{name}\t0\t{strand}\n")
print(f"{len(rows)} gene starts -> {here / 'gene_starts.bed'}")
