"""Promoter-track recipes judged on whole genomes they never saw: several seeds, the noise level beside each mean.

Leave one genome out over the three shared bacterial genomes (E. coli K-12 with RegulonDB 10.9 TSSs, B.
amyloliquefaciens and C. jejuni with Promotech TSSs; ../shared/data, not redistributable). Every (recipe, held-out
genome, seed) trains `genolin train --preset P` on the other two genomes with the recipe's settings, then scores
the whole held-out genome with `genolin evaluate --rc-average` (50-bp bins per strand) and, with --eukaryotes, the
eukaryotic slices of ../shared/data/model_organisms (mRNA starts as TSS proxies) as a further out-of-distribution
check. A recipe is a name and settings (`--recipe NAME:KEY=VALUE,KEY=VALUE`; `shipped` is the preset as it is).

Per recipe the tables give, per held-out genome, AUPRC (mean +- sample sd over seeds) and AUPRC / positive rate;
the mean over genomes (its sd over seeds: the noise level two recipes must differ by); the smallest ratio; calls
as predict makes them by default: precision and recall within 20 and 100 bp; training minutes; the runs whose log
flagged memorisation (validation not improving while the training loss falls, `genolin.selection`); and with
--predict-speed, `genolin predict` Mbp/s on the held-out genome (whole command, bedGraph).

With --train-alone each genome of --held-out is instead the only training genome, and the other two are scored: a
user's case (one annotated genome, new ones to predict). The training genomes' sizes then differ 2.8-fold (1.6 to
4.6 Mbp), so a step budget sized to the data (`epochs`: passes over the genome) and a fixed one give different
schedules, which leave one out (two genomes, 5.6 to 8.6 Mbp) hardly does. The table then gives, per training
genome, the mean AUPRC of the two genomes it did not see; a row's "held_out" names its training genome.

    python benchmarks/track_recipes.py --preset base --seeds 0,1,2 --parallel 12 --gpus 4 --device cuda \\
        --recipe "fine:stride=1,tolerance_bins=1,batch_size=8,steps=4500" --out OUT
    python benchmarks/track_recipes.py --quick --device cpu --out /tmp/track_recipes_quick

Writes PREFIX.json (every run: settings, seconds, metrics) and PREFIX.md. Runs go to --work (default a temporary
folder); a finished training there is reused when the same arguments trained it (a failed run otherwise), and an
evaluation found there is not run again.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    GENOLIN,
    GpuSlots,
    collect,
    fill_defaults,
    heading,
    made_on,
    run,
    run_env,
    run_metadata,
    train_once,
    write_result,
)
from promoter_tracks import BACTERIA, evaluate_all, genome_data, pooled_figures, run_state, train_command, with_sets  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
QUICK = {"preset": "tiny", "seeds": "0", "held_out": "ecoli", "max_minutes": 1.0,
         "recipe": ["shipped:steps=20,val_every_steps=10", "fine:steps=20,val_every_steps=10,stride=1,"
                     "tolerance_bins=1"]}


def parse_recipe(text: str) -> tuple[str, dict[str, str]]:
    """"NAME:KEY=VALUE,KEY=VALUE" (or "NAME") -> (NAME, {KEY: VALUE})."""
    name, _, rest = text.partition(":")
    settings = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            sys.exit(f"track_recipes: --recipe {text!r}: settings are KEY=VALUE, comma-separated")
        settings[key.strip()] = value.strip()
    if not name:
        sys.exit(f"track_recipes: --recipe {text!r} has no name")
    return name, settings


def setup(args, name: str, quick: dict, **defaults) -> dict[str, dict]:
    """What the command line left unset from ``defaults``, the recipe benchmarks' own and (--quick) ``quick``; a
    temporary --work NAME_... if none -> the recipes (--recipe) by name."""
    fill_defaults(args, {"preset": "base", "seeds": "0,1,2", "max_minutes": 60.0, "recipe": ["shipped"],
                         "threads": max(1, len(os.sched_getaffinity(0)) // args.parallel), **defaults,
                         **(quick if args.quick else {})})
    args.work = args.work or tempfile.mkdtemp(prefix=f"{name}_")
    return dict(parse_recipe(r) for r in args.recipe)


def genome_row(gm: dict) -> dict:
    """The figures of one evaluated genome: AUPRC, its ratio to the positive rate, AUROC and the calls."""
    calls = gm.get("calls", {})
    return {**pooled_figures(gm), **{k: calls.get(k) for k in ("precision_20bp", "recall_20bp", "precision_100bp",
                                                                "recall_100bp", "calls_per_mbp")}}


def held_out_figures(row: dict, name: str | None = None) -> dict:
    """The figures of a run's held-out genome, or of scored genome ``name`` (``genome_row``)."""
    scored = row[name or row["held_out"]]
    return scored[next(iter(scored))]


def scored_names(row: dict) -> list[str]:
    """The bacteria a run scored: its held-out genome, or with --train-alone the two it did not train on."""
    return [n for n in BACTERIA if n in row and n not in row.get("trained_on", [])]


def one_run(args, data: dict, recipe: str, settings: dict, held_out: str, seed: int, gpu: int | None = None) -> dict:
    """Train recipe on the two other genomes (seed), evaluate the held-out genome (and the eukaryotic slices);
    with --train-alone train on ``held_out`` alone and evaluate the two others (the row's "held_out" then names the
    training genome, "trained_on" says so). ``gpu``: the only GPU its commands see (CUDA_VISIBLE_DEVICES), None: all
    of this process's."""
    env = run_env(args.threads, gpu)
    work = Path(args.work) / recipe / f"{'alone_' if args.train_alone else ''}{held_out}_seed{seed}"
    work.mkdir(parents=True, exist_ok=True)
    log, run_dir = work / "log.txt", work / "run"
    # leave one genome out: train on the other two, score it; --train-alone: train on it, score the other two
    trained = [held_out] if args.train_alone else [name for name in BACTERIA if name != held_out]
    scored = [name for name in BACTERIA if name not in trained]
    train_s = train_once(train_command(args, [data[name] for name in trained], ["--preset", args.preset],
                                       with_sets(settings, args.set), seed, run_dir), run_dir, log, env)
    evals = {name: (data[name], work / (f"eval_{name}" if args.train_alone else "eval_held_out")) for name in scored}
    if args.eukaryotes:
        evals["eukaryotes"] = (None, work / "eval_eukaryotes")
    evaluated = evaluate_all(run_dir, evals, data, args.device, log, env)
    state, records = run_state(run_dir)
    row = {"recipe": recipe, "settings": settings, "held_out": held_out, "seed": seed, "steps": state["step"],
           **({"trained_on": trained} if args.train_alone else {}),
           "train_seconds": train_s, "best_val_score": state["best"],
           "train_losses": [r["train_loss"] for r in records if r.get("train_loss") is not None],
           "val_scores": [r["val"]["score"] for r in records if r.get("val") and "epoch" in r],
           "memorising": any("memorising" in r for r in records),
           # the schedule followed the clock (train's --max-minutes): the steps' cosine did not hold
           "by_clock": state["progress"] > 0 if "progress" in state else None}
    for name, genomes in evaluated.items():
        row[name] = {g: genome_row(gm) for g, gm in genomes.items()}
    if args.predict_speed:
        from genolin.io.fasta import Genome

        fasta = data[scored[0]][0]
        seconds = run([*GENOLIN, "predict", "--model", str(run_dir), "--fasta", fasta, "--rc-average", "--device",
                       args.device, "--out", str(work / "pred")], log, env)
        row["predict_seconds"] = seconds
        row["predict_mbp_per_s"] = sum(Genome(fasta).lengths.values()) / seconds / 1e6
    figures = ", ".join("{auprc:.4f} ({ratio:.1f}x)".format(**held_out_figures(row, name)) for name in scored)
    print(f"{recipe:12s} {'trained on ' if args.train_alone else ''}{held_out:9s} seed {seed}  steps "
          f"{state['step']:6d}  AUPRC {figures}{'  memorising' if row['memorising'] else ''}", flush=True)
    return row


def spread(values: list[float], spec: str = ".4f") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    if len(values) == 1:
        return format(values[0], spec)
    return f"{statistics.mean(values):{spec}} ± {statistics.stdev(values):{spec}}"


def clock(rows: list[dict]) -> str:
    """How many of ``rows`` had their schedule follow the clock ("?" for those that did not record it)."""
    known = [r["by_clock"] for r in rows if r.get("by_clock") is not None]
    return f"{sum(known)} of {len(rows)}" + ("" if len(known) == len(rows) else f" ({len(rows) - len(known)} ?)")


def merged(paths: list[str]) -> tuple[list[dict], list[dict], dict]:
    """The rows, failures and meta of several result files of one preset (runs split over several calls) as one
    result: the first file's meta with every file's command and arguments (``calls``), the recipes and the seeds.
    A (recipe, genome, seed) found twice is kept once if both give the same results, timings aside (a
    deterministic run repeated as a baseline in a later call; the meta counts those as ``repeated``; the slices'
    scores of a copy that has them are kept), and is an error otherwise. A recipe named alike with other settings,
    or files of other presets or settings for every run (--set) are errors (older files' adapt_steps, of the retired
    test-time adaptation, is not compared). Files with and without --eukaryotes merge: the slices' table lists the
    recipes scored on them. A failure whose run another file holds (a rerun) is dropped; the meta counts those as
    ``rerun``."""
    files = [json.loads(Path(f).read_text()) for f in paths]
    metas = [f["meta"] for f in files]
    def results(row: dict, slices: bool) -> dict:  # what a repeat must give again: all but timings (and slices)
        return {k: v for k, v in row.items() if k not in ("train_seconds", "predict_seconds", "predict_mbp_per_s")
                and (slices or k != "eukaryotes")}

    kept: dict[tuple, dict] = {}
    for r in (r for f in files for r in f["rows"]):
        key = (r["recipe"], r["held_out"], r["seed"])
        first = kept.setdefault(key, r)
        if first is r:
            continue
        slices = "eukaryotes" in first and "eukaryotes" in r
        if results(first, slices) != results(r, slices):
            sys.exit(f"track_recipes: --merge: run {r['recipe']} {r['held_out']} seed {r['seed']} gives other results "
                     f"in two of {', '.join(paths)}")
        if "eukaryotes" in r and "eukaryotes" not in first:
            kept[key] = {**first, "eukaryotes": r["eukaryotes"]}
    rows, keys = list(kept.values()), set(kept)
    failures = [x for f in files for x in f.get("failed", [])]
    failed = [x for x in failures if tuple(x["run"]) not in keys]
    for key in ("preset", "set", "train_alone"):
        # (a file from before --train-alone has no such key: False, the flag's default)
        if len({json.dumps(m["args"].get(key, False if key == "train_alone" else None)) for m in metas}) > 1:
            sys.exit(f"track_recipes: --merge: the files differ in {key}")
    recipes: dict[str, dict] = {}
    for m in metas:
        for name, settings in m["recipes"].items():
            if recipes.setdefault(name, settings) != settings:
                sys.exit(f"track_recipes: --merge: recipe {name!r} has other settings in another file")
    meta = {**metas[0], "command": " ; ".join(m["command"] for m in metas), "merged": [Path(f).name for f in paths],
            "calls": [{"date": m["date"], "command": m["command"], "args": m["args"]} for m in metas],
            "recipes": recipes, "rerun": len(failures) - len(failed),
            "repeated": sum(len(f["rows"]) for f in files) - len(rows)}
    meta["args"] = {**metas[0]["args"], "seeds": ",".join(map(str, sorted({int(r["seed"]) for r in rows}))),
                    "parallel": "/".join(str(m["args"]["parallel"]) for m in metas),
                    "eukaryotes": any(m["args"].get("eukaryotes") for m in metas)}
    return rows, failed, meta


def write_recipes(out: Path, meta: dict, rows: list[dict], failed: list[dict]) -> str:
    """OUT.json and OUT.md of ``rows`` (sorted in place by recipe, genome, seed); returns the markdown."""
    rows.sort(key=lambda r: (list(meta["recipes"]).index(r["recipe"]), r["held_out"], r["seed"]))
    text = (alone_tables if meta["args"].get("train_alone") else tables)(rows, meta) if rows else "no run finished\n"
    write_result(out, {"meta": meta, "rows": rows, "failed": failed}, text)
    return text


def header(meta: dict, title: str, more: str = "") -> list[str]:
    """The lines every table starts with: title and date, machine, versions and settings (``more`` after them), the
    command, the recipes."""
    a = meta["args"]
    return [*heading(title, meta, f"{made_on(meta)}; preset {a['preset']}, seeds {a['seeds']}, {a['parallel']} runs "
                                  f"at once{more}"),
            "Recipes: " + "; ".join(f"**{n}** " + (", ".join(f"{k}={v}" for k, v in s.items()) or "as the preset")
                                   for n, s in meta["recipes"].items()), ""]


def eukaryote_lines(rows: list[dict], recipes: list[str]) -> list[str]:
    """The table of the eukaryotic slices (--eukaryotes), mean over a recipe's runs; none without them."""
    euk = [r for r in rows if "eukaryotes" in r]
    if not euk:
        return []
    names = list(euk[0]["eukaryotes"])
    lines = ["", "Eukaryotic slices (mRNA starts as TSS proxies), mean over a recipe's models: AUPRC (x the "
             "positive rate).", "", "| recipe | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for rec in recipes:
        rs = [r for r in euk if r["recipe"] == rec]
        if rs:
            lines.append(f"| {rec} | " + " | ".join(
                f"{statistics.mean(r['eukaryotes'][n]['auprc'] for r in rs):.4f} "
                f"({statistics.mean(r['eukaryotes'][n]['ratio'] for r in rs):.1f}x)" for n in names) + " |")
    return lines


COST_COLUMNS = "train min | memorising | by clock | predict Mbp/s |"


def cost_cells(mine: list[dict]) -> str:
    """The COST_COLUMNS cells of a recipe's runs: training minutes and predict's speed (mean ± sd), how many runs
    memorised and how many followed the clock."""
    minutes = [r["train_seconds"] / 60 for r in mine if r.get("train_seconds")]
    speed = [r["predict_mbp_per_s"] for r in mine if r.get("predict_mbp_per_s")]
    return (f"{spread(minutes, '.1f')} | {sum(r['memorising'] for r in mine)} of {len(mine)} | {clock(mine)} | "
            f"{spread(speed, '.2f')} |")


def tables(rows: list[dict], meta: dict) -> str:
    recipes = list(dict.fromkeys(r["recipe"] for r in rows))
    held = list(dict.fromkeys(r["held_out"] for r in rows))
    lines = [*header(meta, "Promoter-track recipes on held-out genomes"),
             "Held-out genome: pooled AUPRC over both strands of 50-bp bins (RC-averaged), mean ± sd over seeds (x the "
             "positive rate). Mean: the mean over genomes, ± its sd over seeds (the noise level). Calls: precision / "
             "recall within 20 and 100 bp, mean over genomes and seeds.", "",
             "| recipe | " + " | ".join(held) + " | mean AUPRC | min ratio | P/R 20 bp | P/R 100 bp | " + COST_COLUMNS,
             "|---|" + "---:|" * (len(held) + 8)]
    for rec in recipes:
        mine = [r for r in rows if r["recipe"] == rec]
        cells, ratios = [], []
        for h in held:
            vals = [held_out_figures(r) for r in mine if r["held_out"] == h]
            ratio = statistics.mean(v["ratio"] for v in vals) if vals else None
            ratios += [ratio] if ratio is not None else []
            cells.append(f"{spread([v['auprc'] for v in vals])} ({ratio:.1f}x)" if vals else "-")
        seeds = sorted({r["seed"] for r in mine})
        per_seed = []
        for s in seeds:
            got = [held_out_figures(r)["auprc"] for r in mine if r["seed"] == s]
            if len(got) == len(held):
                per_seed.append(statistics.mean(got))
        firsts = [held_out_figures(r) for r in mine]

        def mean_of(key, firsts=firsts):
            vals = [f[key] for f in firsts if f.get(key) is not None]
            return f"{statistics.mean(vals):.3f}" if vals else "-"

        lines.append(f"| {rec} | " + " | ".join(cells) + f" | {spread(per_seed)} | {min(ratios):.1f}x | "
                     f"{mean_of('precision_20bp')} / {mean_of('recall_20bp')} | {mean_of('precision_100bp')} / "
                     f"{mean_of('recall_100bp')} | " + cost_cells(mine))
    lines += eukaryote_lines(rows, recipes)
    return "\n".join(lines) + "\n"


def alone_tables(rows: list[dict], meta: dict) -> str:
    """--train-alone: per recipe and training genome, the mean AUPRC of the two genomes it did not see (mean ± sd
    over seeds; x the positive rate, mean over the two), the mean over all of a seed's runs (± sd over seeds),
    steps, training minutes, the memorisation and clock flags and predict's speed."""
    recipes = list(dict.fromkeys(r["recipe"] for r in rows))
    trained = list(dict.fromkeys(r["held_out"] for r in rows))
    lines = [*header(meta, "Promoter-track recipes trained on one genome, scored on the others"),
             "Column: the one training genome; cell: the mean AUPRC (pooled over both strands, 50-bp bins, "
             "RC-averaged) of the two genomes it did not see, mean ± sd over seeds (x the positive rate, mean over "
             "the two). Mean: over a seed's runs, ± sd over seeds (the noise level).", "",
             "| recipe | " + " | ".join(f"trained on {t}" for t in trained) + " | mean AUPRC | steps | " + COST_COLUMNS,
             "|---|" + "---:|" * (len(trained) + 6)]

    def unseen(r: dict) -> tuple[float, float]:  # (mean AUPRC, mean ratio) over the genomes r did not train on
        figs = [held_out_figures(r, n) for n in scored_names(r)]
        return statistics.mean(f["auprc"] for f in figs), statistics.mean(f["ratio"] for f in figs)

    for rec in recipes:
        mine = [r for r in rows if r["recipe"] == rec and scored_names(r)]  # a run without scores: not in the table
        cells = []
        for t in trained:
            got = [unseen(r) for r in mine if r["held_out"] == t]
            cells.append(f"{spread([g[0] for g in got])} ({statistics.mean(g[1] for g in got):.1f}x)" if got else "-")
        per_seed = [statistics.mean(unseen(r)[0] for r in mine if r["seed"] == s)
                    for s in sorted({r["seed"] for r in mine})
                    if sum(r["seed"] == s for r in mine) == len(trained)]
        steps = "/".join(str(round(statistics.mean(got))) if (got := [r["steps"] for r in mine if r["held_out"] == t])
                         else "-" for t in trained)
        lines.append(f"| {rec} | " + " | ".join(cells) + f" | {spread(per_seed)} | {steps} | " + cost_cells(mine))
    lines += eukaryote_lines(rows, recipes)
    return "\n".join(lines) + "\n"


def recipe_parser(doc: str, where: str, where_help: str, limits: bool = False) -> argparse.ArgumentParser:
    """The options of a recipe benchmark before its own: the shared data, the recipes, the genomes held out in turn
    (``where``), the seeds, the preset and the settings of every run (and with ``limits``, ``time_limits``')."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shared", default=str(REPO.parent / "shared" / "data"), help="the shared data folder")
    p.add_argument("--recipe", action="append", default=None, metavar="NAME:KEY=VALUE,...",
                   help="a recipe: a name and settings (repeat; default: shipped, the preset as it is)")
    p.add_argument(where, default=None, help=where_help)
    p.add_argument("--seeds", default=None, help="training seeds, comma-separated (default 0,1,2)")
    p.add_argument("--preset", default=None, help="model preset (default base)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a setting for every run")
    if limits:
        time_limits(p)
    return p


def time_limits(p: argparse.ArgumentParser) -> None:
    """A training's time limit and a run's CPU threads."""
    p.add_argument("--max-minutes", type=float, default=None,
                   help="time limit of one training (default 60: runs sharing a GPU are slower than a user's run "
                        "alone, and the preset's own limit would cut their schedules short)")
    p.add_argument("--threads", type=int, default=None,
                   help="CPU threads of each run (OMP_NUM_THREADS; default: the host's cores / --parallel)")


def run_options(p: argparse.ArgumentParser, name: str, quick: str, limits: bool = False) -> None:
    """The options of a recipe benchmark after its own (with ``limits`` first, ``time_limits``'): runs at once and
    GPUs, the device, --quick (``quick``: what it runs), the folders of runs and results."""
    if limits:
        time_limits(p)
    p.add_argument("--parallel", type=int, default=1, help="runs at once (on one GPU they share it)")
    p.add_argument("--gpus", type=int, default=0,
                   help="spread the runs over this many GPUs (each run sees one; --parallel counts runs on all of "
                        "them); 0: every run sees every GPU")
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true", help=f"a smoke run: {quick}")
    p.add_argument("--work", default=None, help="folder for the runs (default: a temporary folder)")
    p.add_argument("--out", default=f"benchmarks/results/{name}/latest", help="output prefix")


def main() -> None:
    p = recipe_parser(__doc__, "--held-out", "genomes to hold out in turn, comma-separated (default all)", limits=True)
    p.add_argument("--eukaryotes", action="store_true", help="also score the eukaryotic slices")
    p.add_argument("--train-alone", action="store_true",
                   help="train on each --held-out genome alone and score the other two (instead of leave one out)")
    p.add_argument("--predict-speed", action="store_true",
                   help="also time genolin predict on the held-out genome (--train-alone: the first not trained on)")
    run_options(p, "track_recipes", "tiny, E. coli held out, seed 0, 20 steps")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                   help="no runs: write the rows of these result files (one preset) as one result to --out")
    args = p.parse_args()
    if args.merge:
        rows, failed, meta = merged(args.merge)
        print(write_recipes(Path(args.out), meta, rows, failed))
        return
    recipes = setup(args, "track_recipes", QUICK, held_out=",".join(BACTERIA))

    data = genome_data(Path(args.shared), Path(args.work), args.eukaryotes, "track_recipes")
    jobs = [(name, s, h, int(seed)) for name, s in recipes.items() for seed in str(args.seeds).split(",")
            for h in args.held_out.split(",")]
    meta = {**run_metadata("track_recipes", {k: v for k, v in vars(args).items() if k != "recipe"}),
            "recipes": recipes}
    rows, failed = [], []
    text = "no run finished\n"
    slots = GpuSlots(args.parallel, args.gpus)
    with cf.ThreadPoolExecutor(args.parallel) as pool:
        futures = {pool.submit(slots.run, one_run, args, data, *job): job for job in jobs}
        for f in cf.as_completed(futures):
            collect(f, futures[f][:1] + futures[f][2:], rows, failed)
            text = write_recipes(Path(args.out), meta, rows, failed)  # after every run: a time limit keeps them
    print(text)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
