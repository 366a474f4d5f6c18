"""Collect every evaluation's metrics.json into one table (TSV) and a markdown summary with the plots."""

import json
import logging
from pathlib import Path

logging.basicConfig(filename=snakemake.log[0], level=logging.INFO)  # noqa: F821 - snakemake injects it

COLUMNS = ["model", "data", "scope", "n", "positive_rate", "accuracy", "auroc", "auprc", "mcc", "f1", "calls_per_mbp",
           "precision_20bp", "recall_20bp", "precision_100bp", "recall_100bp"]


def rows(path: Path):
    metrics = json.loads(path.read_text())
    model, data = path.parts[-3], path.parts[-2]
    if "pooled" in metrics:  # a track model: per genome a row a strand and one pooled (with the calls)
        genomes = metrics.get("genomes") or {data: metrics}
        for genome, m in genomes.items():
            label = data if len(genomes) == 1 else f"{data}:{genome}"
            for scope in ("plus", "minus", "pooled"):
                calls = m.get("calls", {}) if scope == "pooled" else {}
                yield {"model": model, "data": label, "scope": scope, **m[scope], **calls}
    else:
        yield {"model": model, "data": data, "scope": "sequences", **metrics}


table = [row for path in map(Path, snakemake.input.metrics) for row in rows(path)]  # noqa: F821


def cell(value):
    return f"{value:.4f}" if isinstance(value, float) else ("" if value is None else str(value))


def known(fields: list[str]) -> str:
    """A motif row's best known match, or the closest element marked as no match (column 7, where written)."""
    return f"none (closest: {fields[4]})" if fields[6:7] == ["no"] else fields[4]


with open(snakemake.output.table, "w") as fh:  # noqa: F821
    fh.write("\t".join(COLUMNS) + "\n")
    for row in table:
        fh.write("\t".join(cell(row.get(c)) for c in COLUMNS) + "\n")

summary = Path(snakemake.output.summary)  # noqa: F821
lines = ["# genolin workflow results", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
lines += ["| " + " | ".join(cell(row.get(c)) for c in COLUMNS) + " |" for row in table]
lines += [""]
for path in map(Path, snakemake.input.metrics):  # noqa: F821
    rel = Path("..") / path.parent.relative_to(summary.parent.parent)
    lines += [f"## {path.parts[-3]} on {path.parts[-2]}", "", f"![ROC]({rel}/roc.png) ![PR]({rel}/pr.png)", ""]


for path in map(Path, snakemake.input.motifs):  # noqa: F821 - explain_top_promoters' motif tables
    model, genome = path.parts[-3], path.parts[-2]
    found = [line.split("\t") for line in path.read_text().splitlines()[1:] if line]
    rel = Path("..") / path.parent.relative_to(summary.parent.parent)
    lines += [f"## Motifs of {model}'s top promoters on {genome}", ""]
    if not found:
        lines += ["No motif found (too few or too weak attributions; see the explain log).", ""]
        continue
    lines += ["| motif | sign | seqlets | consensus | best known match | TOMTOM p |", "|---|---|---:|---|---|---:|"]
    lines += [f"| ![{f[0]}]({rel}/motif_logos/{f[0]}.png) {f[0]} | " + " | ".join([*f[1:4], known(f), f[5]]) + " |"
              for f in found]
    lines += ["", "A known element is named a match at TOMTOM p < 0.05 (genolin.motifs.MATCH_P); above it, only the "
                  "closest of the bundled consensuses of the genome's domain (explain.domain) is shown.", ""]
summary.write_text("\n".join(lines))
logging.info("%d metric rows from %d evaluations", len(table), len(snakemake.input.metrics))  # noqa: F821
