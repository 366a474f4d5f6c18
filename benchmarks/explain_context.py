"""How much a track model's ISM of a promoter depends on the context it is explained in: the top calls of a genome
explained (``genolin explain --method ism``) with no context, with +-N bp, and inside a whole training window (the
default), per model.

    python benchmarks/explain_context.py --model bacteria --out benchmarks/results/explain_context/cpu

The regions are the TOP highest-scoring calls of ``genolin predict`` on the genome, +-FLANK bp. For each region and
context the per-base importance (minus the mean substitution effect, ``genolin.explain.importance``) is correlated
(Pearson) with the whole window's; the table gives the median and range over regions (a region whose importances
are constant has no r, and is counted apart). A model whose importances barely move (r near 1) can be explained on
regions alone, about window / region times faster, as TF-MoDISco needs across hundreds of calls; one whose
importances move is explained inside its window. ``--note`` adds a line under the table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import heading, made_on, run_metadata, write_result  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def top_bed(peaks: Path, top: int, out: Path) -> Path:
    """The ``top`` highest-scoring calls of a peaks BED (``genolin.io.bed.top_calls``) into ``out``."""
    from genolin.io.bed import bed6_lines, read_bed, top_calls

    out.write_text("".join(bed6_lines(top_calls(read_bed(peaks), top))))
    return out


def importances(run, fasta: str, bed: Path, flank: int, context: int | None) -> tuple[list[np.ndarray], float]:
    """(each region's (L,) ISM importance, seconds) with ``context`` bp either side (None: a training window)."""
    from genolin.config import DataSpec
    from genolin.explain import ExplainOptions, importance, ism_regions, track_inputs

    options = ExplainOptions(method="ism", flank_bp=flank, context_bp=context)
    regions, _ = track_inputs(run, DataSpec(run.task.name, fasta=[fasta]), options, str(bed))
    start = time.perf_counter()
    attrs, _ = ism_regions(run, regions, 0)
    return [importance(a, r.seq, "ism") for a, r in zip(attrs, regions, strict=True)], time.perf_counter() - start


def one_model(model: str, args, work: Path) -> dict:
    """The context rows of one model: its own top calls, explained at each of ``args.contexts`` and in a window."""
    import torch

    from genolin.inference import load_run
    from genolin.models import resolve_model

    name = Path(model).name
    prefix = work / name
    subprocess.run([sys.executable, "-m", "genolin", "-q", "predict", "--model", model, "--fasta", args.fasta,
                    "--rc-average", "--device", "cpu", "--out", str(prefix)], check=True)
    bed = top_bed(Path(f"{prefix}.peaks.bed"), args.top, work / f"{name}.top.bed")
    torch.set_num_threads(args.threads)
    run = load_run(resolve_model(model, "cpu", use="explain explains"), "cpu", bf16_weights=False)
    run.model.eval()
    with torch.inference_mode(False):
        window, window_s = importances(run, args.fasta, bed, args.flank, None)
        rows = {"window": {"context_bp": None, "seconds": window_s}}
        for c in args.contexts:
            imp, secs = importances(run, args.fasta, bed, args.flank, c)
            r = [float(np.corrcoef(a, b)[0, 1]) if a.std() > 0 and b.std() > 0 else None
                 for a, b in zip(imp, window, strict=True)]
            found = [x for x in r if x is not None]
            rows[str(c)] = {"context_bp": c, "seconds": secs, "r": r, "constant": len(r) - len(found),
                            "median_r": statistics.median(found) if found else None}
    return {"model": model, "mixer": run.config.train.model.mixer, "regions": len(window), "contexts": rows}


def table(result: dict) -> str:
    m = result["meta"]
    lines = [*heading("ISM against its context", m, made_on(m)),
             f"Top {m['args']['top']} calls of each model's own `genolin predict --rc-average` on "
             f"`{Path(m['args']['fasta']).name}`, +-{m['args']['flank']} bp: Pearson r of each region's per-base ISM "
             "importance against the same region's inside a whole training window; median (range) over regions; "
             "seconds of the ISM on the CPU.", "",
             "| model | mixer | context | median r | range | seconds |", "|---|---|---|---:|---|---:|"]
    for row in result["models"]:
        name = Path(row["model"]).name
        for key, c in row["contexts"].items():
            if key == "window":
                lines.append(f"| {name} | {row['mixer']} | a training window | 1 | - | {c['seconds']:.0f} |")
            else:
                found = [x for x in c["r"] if x is not None]
                spread = f"{min(found):.2f} to {max(found):.2f}" if found else "-"
                spread += f" ({c['constant']} constant)" if c["constant"] else ""
                median = "-" if c["median_r"] is None else f"{c['median_r']:.2f}"
                lines.append(f"| {name} | {row['mixer']} | +-{c['context_bp']} bp | {median} | {spread} | "
                             f"{c['seconds']:.0f} |")
    return "\n".join(lines) + "\n" + (f"\n{m['args']['note']}\n" if m["args"].get("note") else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", default=None, help="models (repeat; default: bacteria)")
    p.add_argument("--fasta", default=str(REPO / "data" / "ecoli_k12" / "NC_000913.3.fa.bgz"))
    p.add_argument("--top", type=int, default=20, help="calls explained")
    p.add_argument("--flank", type=int, default=100, help="bp either side of a call's centre")
    p.add_argument("--contexts", default="0,400", help="context bp either side, comma-separated (and a window)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--work", default="/tmp/explain_context")
    p.add_argument("--out", default="benchmarks/results/explain_context/latest", help="output prefix")
    p.add_argument("--note", default="", help="a line to print under the table (what the models are, how they ran)")
    args = p.parse_args()
    args.contexts = [int(c) for c in args.contexts.split(",")]
    if len(set(args.contexts)) != len(args.contexts) or min(args.contexts) < 0:
        p.error("--contexts: distinct numbers of bp, 0 or more")
    models = args.model or ["bacteria"]
    if len({Path(m).name for m in models}) != len(models):
        p.error("--model: models with distinct names (their files share --work)")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    result = {"meta": run_metadata("explain_context", vars(args)),
              "models": [one_model(m, args, work) for m in models]}
    text = table(result)
    write_result(args.out, result, text)
    print(text)


if __name__ == "__main__":
    main()
