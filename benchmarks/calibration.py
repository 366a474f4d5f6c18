"""Calibration on the eleven-genome proxy's held-out genomes: what a track value means on a genome nobody trained on.

    python benchmarks/calibration.py --evals WORK --recipe s1+4 --recipe dB --out benchmarks/results/calibration/h100

WORK is a ``bacteria_proxy.py --work`` folder (or its evaluations unpacked: RECIPE/foldF_seedS/eval_GENOME[_product]/
calibration.npz, which ``genolin evaluate`` writes). For each recipe and seed, each held-out genome is calibrated by
a map fitted (isotonic, or Platt scaling) on the held-out genomes of the *other* folds, each scored by its own fold's
model: never on the genome it is scored on, nor on a model that trained on it. Per genome the table gives the
expected calibration error (ECE, 15 equal-width groups of the value) raw and calibrated, and the calls at a
calibrated threshold against the density rule at the same mean recall: precision within 20 bp, recall, calls per Mbp;
and a reliability table of the raw values. The spread is the largest deviation of a genome's precision from the mean
over genomes, over that mean.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import run_metadata, write_result  # noqa: E402

FOLDS = {"A": ("ecoli", "ccrescentus"), "B": ("bacillus", "cjejuni", "selongatus"), "C": ("saureus", "mtuberculosis")}
FAR = {"ecoli", "cjejuni", "selongatus", "mtuberculosis"}  # no relative of their class in their fold's training


def find_evals(work: Path, recipe: str) -> dict[int, dict[str, Path]]:
    """seed -> genome -> calibration.npz of one recipe (an ensemble's product evaluation where there is one)."""
    out: dict[int, dict[str, Path]] = {}
    for fold, genomes in FOLDS.items():
        for folder in sorted((work / recipe).glob(f"fold{fold}_seed*")):
            seed = int(folder.name.rsplit("seed", 1)[1])
            for g in genomes:
                for name in (f"eval_{g}_product", f"eval_{g}"):
                    f = folder / name / "calibration.npz"
                    if f.exists():
                        out.setdefault(seed, {})[g] = f
                        break
    return out


def spread(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    if not values or statistics.mean(values) == 0:
        return None
    m = statistics.mean(values)
    return max(abs(v - m) for v in values) / m


def density_for_recall(datas: dict, target: float) -> float:
    """The calls per Mbp (one for every genome) whose mean recall over ``datas`` first reaches ``target``."""
    from genolin.calibrate import calls_top

    lo, hi = 0.0, 2000.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if statistics.mean(calls_top(d, mid)["recall"] for d in datas.values()) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def one_seed(paths: dict[str, Path], thresholds: list[float], method: str) -> dict:
    """Cross-fitted calibration of one recipe and seed over its held-out genomes."""
    from genolin.calibrate import calls_at, calls_top, ece, fit_isotonic, fit_platt, load_data, reliability

    fit = fit_isotonic if method == "isotonic" else fit_platt
    datas = {g: next(iter(load_data(p).values())) for g, p in paths.items()}
    fold_of = {g: f for f, gs in FOLDS.items() for g in gs}
    maps = {g: fit([d for h, d in datas.items() if fold_of[h] != fold_of[g]]) for g in datas}
    genomes = {}
    for g, d in datas.items():
        raw = d.sum_p[d.total > 0] / d.total[d.total > 0]  # the mean value of each logit bin holding bins
        genomes[g] = {"far": g in FAR, "ece_raw": ece(d), "ece": ece(d, maps[g]),
                      "base_rate": float(d.near.sum() / d.total.sum()),
                      "max_value": float(maps[g].apply(raw).max()), "max_raw": float(raw.max()),
                      "reliability": reliability(d, maps[g]), "reliability_raw": reliability(d),
                      "thresholds": {str(t): calls_at(d, maps[g], t) for t in thresholds}}
    rules = {}
    for t in thresholds:
        at = [genomes[g]["thresholds"][str(t)] for g in datas]
        recall = statistics.mean(x["recall"] for x in at)
        density = density_for_recall(datas, recall) if recall > 0 else 0.0
        top = {g: calls_top(d, density) for g, d in datas.items()}
        for g in datas:
            genomes[g]["thresholds"][str(t)]["density_rule"] = top[g]
        rules[str(t)] = {"recall": recall, "density": density,
                         "precision_spread": spread([x["precision"] for x in at]),
                         "density_precision_spread": spread([x["precision"] for x in top.values()]),
                         "genomes_without_calls": sum(1 for x in at if not x["calls"])}
    return {"genomes": genomes, "rules": rules, "max_ece": max(v["ece"] for v in genomes.values())}


def fmt(v, f=".3f") -> str:
    return "-" if v is None else format(v, f)


def tables(result: dict) -> str:
    a = result["meta"]["args"]
    lines = [f"# Calibration on the proxy's held-out genomes ({result['meta']['date']})", "",
             f"`{result['meta']['command']}`", "",
             f"Method: {a['method']}, fitted per genome on the other folds' held-out genomes (their own fold models). "
             "A bin is near a TSS when one of its strand lies within 20 bp of one of its bases. ECE: 15 equal-width "
             "groups of the value. Calls: the genome's local maxima 100 bp apart at a calibrated threshold; the "
             "density rule's calls per Mbp chosen for the same mean recall.", ""]
    for recipe, seeds in result["recipes"].items():
        lines += [f"## {recipe}", "",
                  "| seed | genome | base rate | ECE raw | ECE calibrated | highest value: raw, calibrated | "
                  + " | ".join(f"t={t}: calls/Mbp, precision, recall | density: precision" for t in a["thresholds"])
                  + " |", "|---|---|" + "---:|" * (4 + 2 * len(a["thresholds"]))]
        for seed, r in seeds.items():
            for g, v in r["genomes"].items():
                cells = []
                for t in a["thresholds"]:
                    x = v["thresholds"][str(t)]
                    cells += [f"{x['per_mbp']:.1f}, {fmt(x['precision'])}, {fmt(x['recall'])}",
                              fmt(x["density_rule"]["precision"])]
                lines.append(f"| {seed} | {g}{' (far)' if v['far'] else ''} | {v['base_rate']:.4f} | "
                             f"{v['ece_raw']:.4f} | {v['ece']:.4f} | {v['max_raw']:.3f}, "
                             f"{v['max_value']:.3f} | " + " | ".join(cells)
                             + " |")
        lines += ["", "| seed | max ECE | " + " | ".join(
            f"t={t}: mean recall, precision spread, density rule's spread (per Mbp), genomes without calls"
            for t in a["thresholds"]) + " |", "|---|---:|" + "---:|" * len(a["thresholds"])]
        for seed, r in seeds.items():
            lines.append(f"| {seed} | {r['max_ece']:.4f} | " + " | ".join(
                f"{x['recall']:.3f}, {fmt(x['precision_spread'])}, {fmt(x['density_precision_spread'])} "
                f"({x['density']:.0f}), {x['genomes_without_calls']}" for x in r["rules"].values()) + " |")
        lines += ["", "Reliability of the raw values (what `genolin predict` writes): ten groups of equal bins by "
                  "value, each as mean value / observed rate of bins near a TSS (fewer groups, the last shown as -: "
                  "one logit bin held more than a tenth of the genome's bins).", "",
                  "| seed | genome | " + " | ".join(f"group {i + 1}" for i in range(10)) + " |",
                  "|---|---|" + "---:|" * 10]
        for seed, r in seeds.items():
            for g, v in r["genomes"].items():
                cells = [f"{m:.3f} / {o:.3f}" for m, o, _ in v["reliability_raw"]]
                lines.append(f"| {seed} | {g} | " + " | ".join(cells + ["-"] * (10 - len(cells))) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--evals", required=True, help="a bacteria_proxy.py --work folder (or its evaluations)")
    p.add_argument("--recipe", action="append", default=[], help="recipes or ensembles to report (repeat)")
    p.add_argument("--thresholds", default="0.2,0.3,0.5", help="calibrated call thresholds, comma-separated")
    p.add_argument("--method", choices=["isotonic", "platt"], default="isotonic")
    p.add_argument("--out", default="calibration")
    args = p.parse_args()
    args.thresholds = [float(t) for t in args.thresholds.split(",")]
    work = Path(args.evals)
    recipes = args.recipe or sorted(d.name for d in work.iterdir() if d.is_dir())
    result = {"meta": run_metadata("calibration", vars(args)), "recipes": {}}
    for recipe in recipes:
        found = find_evals(work, recipe)
        # a seed counts with at least one held-out genome of each fold (a genome is fitted on the other folds')
        complete = {s: paths for s, paths in found.items()
                    if all(any(g in paths for g in genomes) for genomes in FOLDS.values())}
        if not complete:
            print(f"calibration: {recipe}: no seed with a held-out genome of every fold evaluated", file=sys.stderr)
            continue
        for s, paths in complete.items():
            missing = [g for genomes in FOLDS.values() for g in genomes if g not in paths]
            if missing:
                print(f"calibration: {recipe} seed {s}: not evaluated: {', '.join(missing)}", file=sys.stderr)
        result["recipes"][recipe] = {s: one_seed(paths, args.thresholds, args.method) for s, paths in
                                     sorted(complete.items())}
    text = tables(result)
    write_result(Path(args.out), result, text)
    print(text)


if __name__ == "__main__":
    main()
