"""Gene links of promoter calls on E. coli: how often a gene's primary call (``genolin predict --genes``, its
OUT.genes.tsv) lies within 20 bp of a TSS that RegulonDB maps upstream of that gene, for the bundled model and for
chance (random calls at the same density and strands, the same gene table).

    python benchmarks/gene_links.py --device cpu --out benchmarks/results/gene_links/cpu
    python benchmarks/gene_links.py --device cuda --model bacteria --out benchmarks/results/gene_links/h100

A gene is *evaluable* when RegulonDB 10.9 maps a TSS on its strand within 300 bp upstream of its start codon (the
primary window of ``genolin.genes``). For each model the table gives: genes with a primary call; of the evaluable
ones, the share whose call lies within 20 bp of one of the gene's mapped TSSs (precision), and within 20 bp of the
gene's nearest mapped TSS; and those shares over chance (the mean of --draws random call sets). RegulonDB may not be
redistributed: it is read from ../shared.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_metadata, write_result  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
WITHIN_BP = 20


def mapped_tss(bed: Path, contigs: dict[str, int]):
    from genolin.genes import Call

    out = []
    for n, line in enumerate(bed.read_text().splitlines()):
        f = line.split("\t")
        if len(f) >= 6 and f[0] in contigs and f[5] in "+-":
            pos = int(f[1]) if f[5] == "+" else int(f[2]) - 1
            out.append(Call(f"m{n}", f[0], pos, f[5], 1.0))
    return out


def upstream_map(genes, tss) -> dict[str, list[int]]:
    """gene id -> positions of the mapped TSSs within the primary window upstream of its start codon."""
    from genolin.genes import upstream_distance

    by_strand = {}
    for s in "+-":
        mine = sorted((c for c in tss if c.strand == s), key=lambda c: c.position)
        by_strand[s] = (mine, np.array([c.position for c in mine]))
    out = {}
    for g in genes:
        mine, pos = by_strand[g.strand]
        lo, hi = np.searchsorted(pos, [g.start_codon - 400, g.start_codon + 401])
        near = [c.position for c in mine[lo:hi] if upstream_distance(c, g) is not None]
        if near:
            out[g.id] = near
    return out


def figures(primary: dict[str, int], genes, mapped: dict[str, list[int]]) -> dict:
    """primary: gene id -> the position of its primary call."""
    starts = {g.id: g.start_codon for g in genes}
    hits_any = hits_nearest = evaluable = 0
    for gid, pos in primary.items():
        if gid not in mapped:
            continue
        evaluable += 1
        near = mapped[gid]
        hits_any += min(abs(pos - p) for p in near) <= WITHIN_BP
        nearest = min(near, key=lambda p: abs(starts[gid] - p))
        hits_nearest += abs(pos - nearest) <= WITHIN_BP
    return {"genes_with_call": len(primary), "evaluable": evaluable,
            "precision_any": hits_any / max(evaluable, 1), "precision_nearest": hits_nearest / max(evaluable, 1)}


def chance(calls_per_strand: dict[str, int], genes, mapped, length: int, contig: str, draws: int, seed: int) -> dict:
    from genolin.genes import Call, gene_table

    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(draws):
        calls = [Call(f"r{s}{i}", contig, int(p), s, float(rng.random()))
                 for s, n in calls_per_strand.items() for i, p in enumerate(rng.integers(0, length, n))]
        rows = gene_table(calls, genes)
        runs.append(figures({r.gene.id: r.call.position for r in rows if r.call is not None}, genes, mapped))
    return {k: statistics.mean(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", action="append", default=None, help="models to predict with (default: bacteria)")
    p.add_argument("--fasta", default=str(REPO / "data" / "ecoli_k12" / "NC_000913.3.fa.bgz"))
    p.add_argument("--genes", default=str(REPO / "data" / "ecoli_k12" / "GCF_000005845.2_ASM584v2_genomic.gff.gz"))
    p.add_argument("--tss", default=str(SHARED / "ecoli_k12" / "regulondb_10.9_tss.bed"))
    p.add_argument("--device", default="cpu")
    p.add_argument("--draws", type=int, default=20, help="random call sets for chance")
    p.add_argument("--work", default="/tmp/gene_links")
    p.add_argument("--out", default="benchmarks/results/gene_links/latest", help="output prefix")
    args = p.parse_args()
    if not Path(args.tss).exists():
        sys.exit(f"gene_links: missing {args.tss} (RegulonDB's TSSs, in the shared data folder)")
    from genolin.io.annotation import read_genes
    from genolin.io.fasta import Genome

    contigs = Genome(args.fasta).lengths
    genes = read_genes(args.genes, contigs)
    mapped = upstream_map(genes, mapped_tss(Path(args.tss), contigs))
    (contig, length), = contigs.items()
    rows = []
    for model in args.model or ["bacteria"]:
        out = Path(args.work) / Path(model).name
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "genolin", "-q", "predict", "--model", model, "--fasta", args.fasta,
                        "--genes", args.genes, "--rc-average", "--device", args.device, "--out", str(out)], check=True)
        table = [line.split("\t") for line in Path(f"{out}.genes.tsv").read_text().splitlines()]
        head = table[0]
        primary = {r[head.index("gene_id")]: int(r[head.index("call_position")]) - 1 for r in table[1:]
                   if r[head.index("call")] != "-"}
        strands = {"+": 0, "-": 0}
        for line in Path(f"{out}.peaks.bed").read_text().splitlines()[1:]:
            strands[line.split("\t")[5]] += 1
        got = figures(primary, genes, mapped)
        base = chance(strands, genes, mapped, length, contig, args.draws, seed=0)
        rows.append({"model": model, "calls": sum(strands.values()), **got,
                     "chance": base, "over_chance_any": got["precision_any"] / max(base["precision_any"], 1e-9),
                     "over_chance_nearest": got["precision_nearest"] / max(base["precision_nearest"], 1e-9)})
    meta = run_metadata("gene_links", vars(args))
    lines = [f"# Gene links on E. coli ({meta['date']})", "", f"{meta.get('gpu') or meta['cpu']}, torch "
             f"{meta['torch']}, genolin {meta['genolin']}", "", f"`{meta['command']}`", "",
             f"{len(genes):,} RefSeq genes; {len(mapped):,} with a RegulonDB TSS within 300 bp upstream on their "
             f"strand (evaluable). Precision: evaluable genes whose primary call lies within {WITHIN_BP} bp of one "
             f"of their mapped TSSs (any) or of the nearest to the start codon (nearest); chance: {args.draws} random "
             "call sets of the same size per strand.", "",
             "| model | calls | genes with a primary call | evaluable | precision (any) | chance | x chance | "
             "precision (nearest) | chance | x chance |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        c = r["chance"]
        lines.append(f"| {r['model']} | {r['calls']:,} | {r['genes_with_call']:,} | {r['evaluable']:,} | "
                     f"{r['precision_any']:.3f} | {c['precision_any']:.3f} | {r['over_chance_any']:.1f}x | "
                     f"{r['precision_nearest']:.3f} | {c['precision_nearest']:.3f} | "
                     f"{r['over_chance_nearest']:.1f}x |")
    text = "\n".join(lines) + "\n"
    write_result(args.out, {"meta": meta, "rows": rows}, text)
    print(text)


if __name__ == "__main__":
    main()
