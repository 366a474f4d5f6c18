"""Promoter calls on genomes a model never saw: a decision threshold against a call density.

Reads the runs of a `benchmarks/track_recipes.py` work folder (RECIPE/GENOME_seedS/run, each trained on the other
two shared bacterial genomes) and scores each run's held-out genome (`genolin evaluate` without --tss scoping:
the whole genome, both strands averaged) under several calling rules:
- `threshold`: local maxima at or above the run's threshold (max F1 on its training genomes' validation bins), the
  default of runs from before the density was kept;
- `training TSS density`: each contig's most probable local maxima at the training genomes' TSS density (TSSs more
  than 100 bp apart per Mbp), the default now;
- fixed densities (`--densities`), to see the trade-off.
Per rule and genome: calls per Mbp, precision and recall within 20 and 100 bp, F1 within 100 bp; per rule, the mean
F1 over genomes and seeds with the sd over seeds. No rule sees the held-out genome's TSSs.

    python benchmarks/call_rules.py --work TRACK_RECIPES_WORK --shared ../shared/data --out OUT

Writes PREFIX.json and PREFIX.md.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_metadata, write_result  # noqa: E402
from promoter_tracks import BACTERIA  # noqa: E402


def f1(calls: dict, d: int = 100) -> float:
    p, r = calls.get(f"precision_{d}bp") or 0.0, calls.get(f"recall_{d}bp") or 0.0
    return 2 * p * r / (p + r) if p + r else 0.0


def training_density(run) -> float:
    """The run's kept TSS density, or (runs from before it was kept) the same figure from its training data."""
    if getattr(run.task, "tss_per_mbp", None):
        return run.task.tss_per_mbp
    from genolin.peaks import resolvable_density
    from genolin.tasks.track import CALL_DISTANCE_BP, TrackData

    data = TrackData.load(run.config.data.fasta, run.config.data.tss, run.config.train)
    return resolvable_density([pos for pair in data.tss.values() for pos in pair], sum(data.lengths.values()),
                              CALL_DISTANCE_BP)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="a track_recipes.py work folder")
    ap.add_argument("--shared", default="../shared/data", help="the shared data folder")
    ap.add_argument("--recipe", default="shipped", help="the recipe's runs to score")
    ap.add_argument("--densities", default="100,200,400,800,1600", help="fixed call densities (per Mbp) to score")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", required=True, help="output prefix")
    args = ap.parse_args()

    from genolin.config import DataSpec
    from genolin.inference import load_run

    shared = Path(args.shared)
    runs = sorted((Path(args.work) / args.recipe).glob("*_seed*/run"))
    if not runs:
        sys.exit(f"call_rules: no runs under {args.work}/{args.recipe}/*_seed*/run")
    rows = []
    for run_dir in runs:
        held_out, seed = re.fullmatch(r"(\w+)_seed(\d+)", run_dir.parent.name).groups()
        if held_out not in BACTERIA or not (run_dir / "trainer_state.json").exists():
            continue
        fasta, bed = (str(shared / f) for f in BACTERIA[held_out])
        run = load_run(run_dir, args.device)
        eval_set = run.task.load_evaluation(DataSpec("track", fasta=[fasta], tss=[bed]), held_out=False)
        rules = {"threshold": None, "training TSS density": training_density(run),
                 **{f"{float(d):g} per Mbp": float(d) for d in args.densities.split(",")}}
        for rule, density in rules.items():
            metrics, _ = run.task.evaluate(run.predictor, eval_set, rc_average=True, threshold=run.threshold,
                                           calls_per_mbp=density, progress=False)
            calls = metrics["calls"]
            rows.append({"held_out": held_out, "seed": int(seed), "rule": rule, "density": density,
                         "threshold": run.threshold, **{k: calls[k] for k in (
                             "calls_per_mbp", "precision_20bp", "recall_20bp", "precision_100bp", "recall_100bp")},
                         "f1_100bp": f1(calls), "f1_20bp": f1(calls, 20)})
            r = rows[-1]
            print(f"{held_out:<9} seed {seed} {rule:<22} {r['calls_per_mbp']:7.1f} calls/Mbp  P/R 100 bp "
                  f"{r['precision_100bp'] or 0:.3f}/{r['recall_100bp'] or 0:.3f}  F1 {r['f1_100bp']:.3f}", flush=True)

    rules = list(dict.fromkeys(r["rule"] for r in rows))
    genomes = list(dict.fromkeys(r["held_out"] for r in rows))
    lines = ["| rule | " + " | ".join(f"{g}: calls/Mbp, P / R 100 bp, F1" for g in genomes)
             + " | mean F1 100 bp (sd over seeds) | mean F1 20 bp |", "|---|" + "---:|" * (len(genomes) + 2)]
    summary = {}
    for rule in rules:
        cells = []
        for g in genomes:
            rs = [r for r in rows if r["rule"] == rule and r["held_out"] == g]
            cells.append(f"{statistics.mean(r['calls_per_mbp'] for r in rs):.0f}, "
                         f"{statistics.mean(r['precision_100bp'] or 0 for r in rs):.3f} / "
                         f"{statistics.mean(r['recall_100bp'] or 0 for r in rs):.3f}, "
                         f"{statistics.mean(r['f1_100bp'] for r in rs):.3f}")
        seeds = sorted({r["seed"] for r in rows})
        per_seed = [statistics.mean(r["f1_100bp"] for r in rows if r["rule"] == rule and r["seed"] == s)
                    for s in seeds]
        mean20 = statistics.mean(r["f1_20bp"] for r in rows if r["rule"] == rule)
        sd = statistics.stdev(per_seed) if len(per_seed) > 1 else float("nan")
        summary[rule] = {"mean_f1_100bp": statistics.mean(per_seed), "sd_over_seeds": sd, "mean_f1_20bp": mean20}
        lines.append(f"| {rule} | " + " | ".join(cells) + f" | {statistics.mean(per_seed):.3f} ({sd:.3f}) | "
                     f"{mean20:.3f} |")
    table = "\n".join(lines)
    print(table)
    meta = run_metadata("call_rules", vars(args))
    write_result(args.out, {"meta": meta, "rows": rows, "summary": summary},
                 f"# Calling rules on held-out genomes ({meta['date']})\n\n`{meta.get('command', '')}`\n\n{table}\n")


if __name__ == "__main__":
    main()
