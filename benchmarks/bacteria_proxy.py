"""Promoter-track recipes on eleven bacterial genomes: genomes held out in groups, near and far ones apart.

The eleven genomes with experimentally mapped TSSs under ../shared/data (not redistributable; SOURCES_tss_maps.md):
every (recipe, fold, seed) trains `genolin train --preset P` on the genomes outside the fold and scores each
held-out genome with `genolin evaluate --rc-average` (pooled AUPRC of 50-bp bins per strand). Every genus occurs
once, so no held-out genome has a relative of its genus in training. The folds keep a relative of the same class
in training for three of the seven scored genomes (B. amyloliquefaciens and S. aureus: Bacilli; C. crescentus:
Alphaproteobacteria): these are the *near* genomes, the other four (E. coli, C. jejuni, S. elongatus, M.
tuberculosis) the *far* ones. Only genomes with complete maps are scored; the four gene-linked subsets (Z.
mobilis, T. maritima, C. trachomatis, S. agalactiae: their unlisted positions are not sure negatives) always train.

    python benchmarks/bacteria_proxy.py --preset base --seeds 0,1,2 --parallel 24 --gpus 4 --device cuda \\
        --recipe shipped --recipe "s1:stride=1,tolerance_bins=1,mutate_prob=0" --out OUT
    python benchmarks/bacteria_proxy.py --quick --device cpu --out /tmp/bacteria_proxy_quick

--ready also trains each recipe on every genome a shipped model may learn from (READY of genolin/models/build.py:
all but E. coli, whose RegulonDB map may not be redistributed) and scores E. coli with it, which is then a far
held-out genome. --finetune GENOMES measures fine-tuning: the first recipe's seed-0 fold model that held genome G
out, trained further (`genolin train --init`) on the first --finetune-fraction of G's chromosome with its TSSs,
against the same part trained from scratch (the preset and recipe) and the fold model as it is, all scored on the
rest of G.

--ensemble NAME=A+B (repeatable): for every fold and seed where recipes A and B (or more, joined by +) all
trained, each held-out genome is also scored by the mean of the members' 50-bp pooled scores. A member "A@S" is
recipe A's seed-S run at every seed of the ensemble (as for teachers): "t=dB+s1@0" joins each seed's dB to s1's
seed 0, "b2=shipped+shipped@1" two seeds of one recipe (at seed 1, where both are one run, it is not scored); at least
one member has no "@S", and the ensemble's seeds are its. Each member scores it
as `genolin evaluate --rc-average` does (per strand, the highest model-bin probability in each 50-bp bin), and a
bin's ensemble score is the mean of its members' scores, so members of other strides can be joined. A product
ensemble averages the members' probabilities per model bin, at the finer stride, before taking the 50-bp maximum:
`--ensemble-form product` scores it so, with `genolin evaluate` and a --model per member (members of several
strides joined at the finest), as a user would run it, with calls. The rows are a recipe's in the tables (the
scores form without calls: they need model bins); train min counts every member's training. Each genome is scored
in a process of its own (`--score-members` or `evaluate`, on the GPU slot of a run):

    python benchmarks/bacteria_proxy.py --preset base --seeds 0,1,2 --parallel 24 --gpus 4 --device cuda \\
        --recipe shipped --recipe "s1:stride=1,tolerance_bins=1,mutate_prob=0" --ensemble "s1+4=shipped+s1" --out OUT

--offset-average N scores every genome with `genolin evaluate --offset-average N` (N tilings of the windows
averaged), in evaluation folders of their own: run again on the same --work, the trained runs are scored again.

Writes PREFIX.json (every run: settings, seconds, metrics) and PREFIX.md. Runs go to --work (default a temporary
folder); a finished training there is reused when the same arguments trained it (a failed run otherwise), and an
evaluation found there is not run again. A run cut short is completed by another: the recipe with "folds=B" (or
"seeds=2") trains only what is missing, and `--rows-from PREFIX.json` tables the first run's rows beside the new ones
(training is deterministic on one card type: the teachers trained again are the same).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENOLIN, GpuSlots, collect, run, run_env, run_metadata, train_once, write_result  # noqa: E402
from promoter_tracks import run_state, train_command, with_sets  # noqa: E402
from track_recipes import COST_COLUMNS, cost_cells, genome_row, header, recipe_parser, run_options, setup, spread  # noqa: E402

from genolin.models.build import GENOMES as REGISTRY  # noqa: E402
from genolin.models.build import READY  # noqa: E402

# name -> ((FASTA, BED), organism, class, phylum, complete map): the registry the bundled model is built from
GENOMES = {name: (pair, cls, phylum, complete) for name, (pair, _, cls, phylum, complete) in REGISTRY.items()}
SCORED = [g for g, (_, _, _, complete) in GENOMES.items() if complete]
# held out together; each scored genome once. Near ones keep a relative of their class in training
FOLDS = {"A": ("ecoli", "ccrescentus"), "B": ("bacillus", "cjejuni", "selongatus"), "C": ("saureus", "mtuberculosis")}
# recipe keys that are no training setting: the recipe's preset (default --preset), its teachers ("A+B": the runs
# of recipes A and B of the same fold and seed, "A@0" recipe A's run of seed 0, or with --ready a bundled model or run
# folder; genolin train --teacher), its seeds ("0/1": these of --seeds only) and its folds ("B" or "A/C": these of
# --folds only; to complete a recipe's table with folds an earlier run left out, training being deterministic)
RECIPE_KEYS = ("preset", "teacher", "seeds", "folds")
OOM_RETRIES = 5  # an evaluation beside --parallel trainings on one GPU can find its memory taken: waits, 60 s each
QUICK = {"preset": "tiny", "seeds": "0", "folds": "A", "max_minutes": 1.0,
         "recipe": ["shipped:steps=20,val_every_steps=10", "s1:steps=20,val_every_steps=10,stride=1,tolerance_bins=1"]}


def is_near(genome: str, trained: list[str]) -> bool:
    """Whether a training genome shares ``genome``'s class."""
    return any(GENOMES[t][1] == GENOMES[genome][1] for t in trained if t != genome)


def data_paths(shared: Path) -> dict[str, tuple[str, str]]:
    """name -> (FASTA, BED) paths; exits naming what is missing."""
    data = {name: (str(shared / fa), str(shared / bed)) for name, ((fa, bed), *_) in GENOMES.items()}
    missing = [f for pair in data.values() for f in pair if not Path(f).exists()]
    if missing:
        sys.exit(f"bacteria_proxy: missing {', '.join(missing)} (the shared data folder: --shared)")
    return data


class Runner:
    """Runs the benchmark's commands: one training or evaluation per call, each run in its own folder."""

    def __init__(self, args, data: dict[str, tuple[str, str]]):
        self.args, self.data = args, data

    def env(self, gpu: int | None) -> dict:
        return run_env(self.args.threads, gpu)

    def train(self, run_dir: Path, genomes: list[tuple[str, str]], settings: dict, seed: int, log: Path,
              gpu: int | None, init: str | None = None, teachers: list[str] = ()) -> float | None:
        """Train into run_dir unless it finished there; its seconds (None: found done). A recipe's ``preset`` key
        replaces --preset; ``teachers``: run directories or models to distil from (``genolin train --teacher``)."""
        preset = settings.get("preset", self.args.preset)
        settings = {k: v for k, v in settings.items() if k not in RECIPE_KEYS}
        start = ["--init", init] if init else ["--preset", preset]
        return train_once(train_command(self.args, genomes, start, with_sets(settings, self.args.set), seed, run_dir,
                                        [a for t in teachers for a in ("--teacher", str(t))]),
                          run_dir, log, self.env(gpu))

    def evaluate(self, run_dir: Path, pair: tuple[str, str], out: Path, log: Path, gpu: int | None) -> dict:
        """``genome_row`` of the run on one genome (evaluated unless found in ``out``)."""
        offsets = self.args.offset_average
        if offsets > 1:  # a folder of its own: an evaluation found is not run again
            out = out.with_name(f"{out.name}_off{offsets}")
        if not (out / "metrics.json").exists():
            run([*GENOLIN, "evaluate", "--model", str(run_dir), "--fasta", pair[0], "--tss", pair[1],
                 "--rc-average", "--offset-average", str(offsets), "--device", self.args.device, "--out", str(out)],
                log, self.env(gpu), oom_retries=OOM_RETRIES)
        m = json.loads((out / "metrics.json").read_text())
        return genome_row(next(iter(m["genomes"].values())))

    def ensemble(self, run_dirs: list[Path], pair: tuple[str, str], out: Path, log: Path, gpu: int | None) -> dict:
        """``genome_row`` of the mean of the runs' 50-bp scores on one genome (``score_members``, in a process of its
        own; scored unless found in ``out`` for the same runs), with "members": each run's own pooled AUPRC."""
        offsets = self.args.offset_average
        if self.args.ensemble_form == "product":  # as a user runs it: one evaluate of every member
            out = out.with_name(f"{out.name}_product")
            members = out / "members.json"  # the runs scored there: an ensemble redefined in --work is scored anew
            if not (out / "metrics.json").exists() or not members.exists() \
                    or json.loads(members.read_text()) != list(map(str, run_dirs)):
                run([*GENOLIN, "evaluate", *[a for d in run_dirs for a in ("--model", str(d))], "--fasta", pair[0],
                     "--tss", pair[1], "--rc-average", "--device", self.args.device, "--out", str(out)], log,
                    self.env(gpu), oom_retries=OOM_RETRIES)
                members.write_text(json.dumps(list(map(str, run_dirs))) + "\n")
            (gm,) = json.loads((out / "metrics.json").read_text())["genomes"].values()
            return {**genome_row(gm), "members": {}}
        if offsets > 1:
            out = out.with_name(f"{out.name}_off{offsets}")
        found = out / "metrics.json"
        if not found.exists() or [list(gm["members"]) for gm in json.loads(found.read_text())["genomes"].values()] \
                != [list(map(str, run_dirs))]:
            run([sys.executable, str(Path(__file__).resolve()), "--score-members", ",".join(map(str, run_dirs)),
                 "--fasta", pair[0], "--tss", pair[1], "--offset-average", str(offsets), "--device", self.args.device,
                 "--out", str(out)], log, self.env(gpu))
        (gm,) = json.loads((out / "metrics.json").read_text())["genomes"].values()
        return {**genome_row(gm), "members": gm["members"]}


def teachers_of(settings: dict) -> list[str]:
    """The recipes or models a recipe distils from (its "teacher" key, members joined by +; "@S" kept)."""
    return [t for t in settings.get("teacher", "").split("+") if t]


def teacher_place(teacher: str, place: tuple, recipes: dict) -> tuple[str, tuple]:
    """(recipe, (fold or "ready", seed)) of a teacher "NAME" or "NAME@S" (NAME a recipe) for a student trained at
    ``place``; a teacher that is no recipe (a model, whatever its name holds) as it is, at ``place``."""
    name, at, seed = teacher.partition("@")
    if not at or name not in recipes:
        return teacher, place
    return name, (place[0], int(seed))


def place_folder(work: str | Path, recipe: str, place: tuple) -> Path:
    """WORK/RECIPE/fold{F}_seed{S} of a fold run at (fold, seed), WORK/RECIPE/ready_seed{S} at ("ready", seed)."""
    where, seed = place
    return Path(work) / recipe / (f"ready_seed{seed}" if where == "ready" else f"fold{where}_seed{seed}")


def teacher_runs(runner: Runner, settings: dict, place: tuple) -> list[str]:
    """The teacher runs of a recipe trained at ``place`` ((fold, seed) or ("ready", seed)): each teacher recipe's
    run of the same fold and seed (of seed S for "NAME@S"); a name that is no recipe (a bundled model, a run
    folder) as it is."""
    out = []
    for t in teachers_of(settings):
        name, at = teacher_place(t, place, runner.args.recipes)
        out.append(str(place_folder(runner.args.work, name, at) / "run") if name in runner.args.recipes else t)
    return out


def recipe_seeds(settings: dict, seeds: list[int]) -> list[int]:
    """The seeds of --seeds a recipe trains ("seeds" key: seeds joined by /; default all)."""
    return only(settings, "seeds", seeds, int)


def recipe_folds(settings: dict, folds: list[str]) -> list[str]:
    """The folds of --folds a recipe trains ("folds" key: folds joined by /; default all)."""
    return only(settings, "folds", folds, str)


def only(settings: dict, key: str, given: list, kind) -> list:
    """``given`` limited to the recipe's ``key`` ("x/y", each read as ``kind``; all of them without the key), in
    ``given``'s order; exits naming a value that is not among ``given``."""
    if key not in settings:
        return given
    try:
        mine = [kind(x) for x in str(settings[key]).split("/") if x != ""]
    except ValueError:
        sys.exit(f"bacteria_proxy: {key}={settings[key]}: expected values joined by /")
    stray = [x for x in mine if x not in given]
    if stray:
        sys.exit(f"bacteria_proxy: {key}={settings[key]}: {stray[0]} is not one of --{key} "
                 f"({','.join(map(str, given))})")
    return [x for x in given if x in mine]


def check_teachers(recipes: dict, ready: bool, folds: list[str], seeds: list[int]) -> None:
    """Exit naming a recipe whose teacher would leak a held-out genome (a model that is no recipe of the same fold,
    in fold runs: a bundled model learnt from every genome but E. coli), is itself a distilled recipe later in
    the order (teachers train first), or is a recipe's run of a seed ("NAME@S") or fold that recipe does not
    train."""
    for name, settings in recipes.items():
        for t in teachers_of(settings):
            recipe, at, seed = t.partition("@")
            if at and recipe in recipes:
                if not seed.isdigit() or int(seed) not in recipe_seeds(recipes[recipe], seeds):
                    sys.exit(f"bacteria_proxy: --recipe {name}: teacher {t!r}: {recipe} trains seeds "
                             f"{recipe_seeds(recipes[recipe], seeds)}, not {seed!r}")
                t = recipe
            if t in recipes and not set(recipe_folds(settings, folds)) <= set(recipe_folds(recipes[t], folds)):
                sys.exit(f"bacteria_proxy: --recipe {name}: teacher {t!r} trains the folds "
                         f"{recipe_folds(recipes[t], folds)}, not all of {recipe_folds(settings, folds)}")
            if t not in recipes and recipe_folds(settings, folds):
                sys.exit(f"bacteria_proxy: --recipe {name}: teacher {t!r} is no recipe; a fold's teacher must be "
                         f"trained without the fold's genomes (give a model only with --ready and --folds none)")
            if t == name or (t in recipes and list(recipes).index(t) > list(recipes).index(name)):
                sys.exit(f"bacteria_proxy: --recipe {name}: teacher {t!r} must be a recipe given before it")
            if t not in recipes and not ready:
                sys.exit(f"bacteria_proxy: --recipe {name}: teacher {t!r} (a model) needs --ready")


# the arguments an earlier run's rows must share with this run's to be tabled beside them (--rows-from)
SHARED_ARGS = ("preset", "set", "offset_average", "ensemble_form")


def earlier_rows(path: Path, recipes: dict, training: set[tuple], args: dict | None = None) -> list[dict]:
    """The fold rows of an earlier run's PREFIX.json whose recipe is in ``recipes`` (an ensemble's settings as
    {"members": "A+B"}) with the same settings but for seeds and folds, at a (recipe, fold, seed) not in
    ``training`` (which gains them: a second file adds no place twice); exits when a recipe of the same name had
    other settings, or the run other SHARED_ARGS or folds than ``args`` (this run's)."""
    def own(settings: dict) -> dict:
        return {k: v for k, v in settings.items() if k not in ("seeds", "folds")}

    data = json.loads(path.read_text())
    theirs = data.get("meta", {}).get("args", {})
    for key in SHARED_ARGS if args is not None else ():
        if key in theirs and theirs[key] != args.get(key):
            sys.exit(f"bacteria_proxy: --rows-from {path}: that run had --{key.replace('_', '-')} {theirs[key]!r}, "
                     f"this one {args.get(key)!r}")
    if data.get("meta", {}).get("folds", FOLDS) not in (FOLDS, json.loads(json.dumps(FOLDS))):
        sys.exit(f"bacteria_proxy: --rows-from {path}: that run held out other folds")
    rows = []
    for r in data["rows"]:
        place = (r["recipe"], r["fold"], r["seed"])
        if r["kind"] != "fold" or r["recipe"] not in recipes or place in training:
            continue
        training.add(place)
        if own(r["settings"]) != own(recipes[r["recipe"]]):
            sys.exit(f"bacteria_proxy: --rows-from {path}: {r['recipe']} was {own(r['settings'])} there, "
                     f"{own(recipes[r['recipe']])} here")
        rows.append({**r, "from": str(path)})
    return rows


def place_of(label: list) -> tuple:
    """(fold, seed) of a fold_run's job label [name, recipe, fold, seed], ("ready", seed) of a ready_run's."""
    return (label[2], label[3]) if label[0] == "fold_run" else ("ready", label[2])


def run_record(run_dir: Path) -> dict:
    """A finished training's steps, validation and memorisation flags."""
    state, records = run_state(run_dir)
    return {"steps": state["step"], "best_val_score": state["best"],
            "memorising": any("memorising" in r for r in records),
            "by_clock": state["progress"] > 0 if "progress" in state else None}


def fold_run(runner: Runner, recipe: str, settings: dict, fold: str, seed: int, gpu: int | None) -> dict:
    """Train on every genome outside ``fold``, score each scored genome of it."""
    work = place_folder(runner.args.work, recipe, (fold, seed))
    work.mkdir(parents=True, exist_ok=True)
    log, run_dir = work / "log.txt", work / "run"
    trained = [g for g in GENOMES if g not in FOLDS[fold]]
    seconds = runner.train(run_dir, [runner.data[g] for g in trained], settings, seed, log, gpu,
                           teachers=teacher_runs(runner, settings, (fold, seed)))
    row = {"kind": "fold", "recipe": recipe, "settings": settings, "fold": fold, "seed": seed, "trained_on": trained,
           "train_seconds": seconds, **run_record(run_dir), "genomes": {}}
    for g in FOLDS[fold]:
        if GENOMES[g][3]:
            row["genomes"][g] = {**runner.evaluate(run_dir, runner.data[g], work / f"eval_{g}", log, gpu),
                                 "near": is_near(g, trained)}
    print(f"{recipe:12s} fold {fold} seed {seed}  steps {row['steps']:6d}  " + ", ".join(
        f"{g} {v['auprc']:.4f} ({v['ratio']:.1f}x)" for g, v in row["genomes"].items())
        + ("  memorising" if row["memorising"] else ""), flush=True)
    return row


def ensemble_figures(members: list) -> dict:
    """track_metrics (plus, minus, pooled) of one genome scored with the mean of its members' 50-bp scores
    (``GenomeScores`` of the same bins: their targets must agree)."""
    import numpy as np

    from genolin.tasks.track_scoring import track_metrics

    y = members[0].y
    for m in members[1:]:
        if m.y.shape != y.shape or not np.array_equal(m.y, y):
            raise RuntimeError(f"ensemble members scored other bins ({m.y.shape} against {y.shape} or other targets)")
    return track_metrics(y, np.mean([m.p for m in members], axis=0))


def score_members(run_dirs: list[str], fasta: str, tss: str, device: str, offsets: int) -> dict:
    """{"genomes": {name: track_metrics of the members' mean + "members": run dir -> its own pooled AUPRC}} of one
    genome, each member scoring it as `genolin evaluate --rc-average` does (``TrackTask.evaluate``)."""
    from genolin.config import DataSpec
    from genolin.inference import load_run

    scores, own, bins = [], {}, set()
    for run_dir in run_dirs:
        member = load_run(run_dir, device, window_offsets=offsets)
        task = member.task
        if not task.has_track:
            raise RuntimeError(f"{run_dir}: a {task.name} model, not a track model")
        metrics, scored = task.evaluate(member.predictor, task.load_evaluation(DataSpec(task.name, fasta=[fasta],
                                                                                         tss=[tss])), rc_average=True)
        (name, genome), = scored.items()
        scores.append(genome)
        own[run_dir] = metrics["genomes"][name]["pooled"].get("auprc")
        bins.add(task.cfg.eval_bin_bp)
        del member  # one model in memory at a time
    if len(bins) > 1:
        raise RuntimeError(f"ensemble members score bins of other sizes ({sorted(bins)} bp: eval_bin_bp)")
    return {"genomes": {name: {**ensemble_figures(scores), "members": own}}}


def ensemble_run(runner: Runner, name: str, members: list[dict], seed: int, spec: list[str],
                 gpu: int | None = None) -> dict:
    """The fold rows ``members`` (runs of one fold; of the ensemble's ``seed``, or a member's own at "A@S") as one
    ensemble at (fold, ``seed``): each scored genome of the fold with the members' mean 50-bp scores
    (``Runner.ensemble``); ``spec``: the members as --ensemble names them."""
    first = members[0]
    fold = first["fold"]
    work = place_folder(runner.args.work, name, (fold, seed))
    work.mkdir(parents=True, exist_ok=True)
    runs = [place_folder(runner.args.work, m["recipe"], (fold, m["seed"])) / "run" for m in members]
    seconds = [m["train_seconds"] for m in members]
    clocks = [m["by_clock"] for m in members]
    row = {"kind": "fold", "recipe": name, "settings": {"members": "+".join(spec)},
           "members": spec, "fold": fold, "seed": seed, "trained_on": first["trained_on"],
           "train_seconds": None if None in seconds else sum(seconds), "member_steps": [m["steps"] for m in members],
           "memorising": any(m["memorising"] for m in members),
           "by_clock": None if None in clocks else any(clocks), "genomes": {}}
    for g, figures in first["genomes"].items():
        got = runner.ensemble(runs, runner.data[g], work / f"eval_{g}", work / "log.txt", gpu)
        row["genomes"][g] = {**got, "near": figures["near"]}
    print(f"{name:12s} fold {fold} seed {seed}  ensemble of {'+'.join(row['members'])}  " + ", ".join(
        f"{g} {v['auprc']:.4f} ({v['ratio']:.1f}x)" for g, v in row["genomes"].items()), flush=True)
    return row


def parse_ensemble(text: str, recipes: dict) -> tuple[str, list[str]]:
    """"NAME=A+B" -> (NAME, [A, B]) ("A@S": recipe A's seed-S run, ``teacher_place``); exits naming what is wrong
    (no name, fewer than two distinct members, a recipe not given with --recipe, a seed that is no number, every
    member at a fixed seed, a name a recipe has)."""
    name, eq, rest = text.partition("=")
    members = [m.strip() for m in rest.split("+")]
    name = name.strip()
    if not eq or not name or len(members) < 2 or len(set(members)) < len(members) or "" in members:
        sys.exit(f"bacteria_proxy: --ensemble {text!r}: expected NAME=RECIPE+RECIPE (two or more members, each once)")
    unknown = [m for m in members if m.partition("@")[0] not in recipes]
    if unknown:
        sys.exit(f"bacteria_proxy: --ensemble {text!r}: no --recipe {unknown[0].partition('@')[0]!r} (recipes: "
                 f"{', '.join(recipes)})")
    pinned = [m for m in members if "@" in m]
    bad = [m for m in pinned if not m.partition("@")[2].isdigit()]
    if bad:
        sys.exit(f"bacteria_proxy: --ensemble {text!r}: {bad[0]!r}: RECIPE@SEED takes a seed number")
    runs = [(m.partition("@")[0], int(m.partition("@")[2]) if "@" in m else None) for m in members]
    if len(set(runs)) < len(runs):
        sys.exit(f"bacteria_proxy: --ensemble {text!r}: a member twice")
    if len(pinned) == len(members):
        sys.exit(f"bacteria_proxy: --ensemble {text!r}: every member is at a fixed seed; one without @SEED gives "
                 f"the ensemble its seeds")
    if name in recipes:
        sys.exit(f"bacteria_proxy: --ensemble {text!r}: {name!r} is a recipe's name")
    return name, members


def ensemble_places(members: list[str], place: tuple, recipes: dict) -> list[tuple[str, tuple]] | None:
    """(recipe, (fold, seed)) of each member of an ensemble scored at ``place`` (fold, seed); None where two members
    are one run there ("A+A@1" at seed 1)."""
    where = [teacher_place(m, place, recipes) for m in members]
    return where if len(set(where)) == len(where) else None


def check_ensembles(ensembles: dict, recipes: dict, folds: list[str], seeds: list[int]) -> None:
    """Exits, before any training, on an ensemble that would never be scored somewhere it is expected: a recipe named
    with '@', a member "A@S" at a seed or without a fold that A does not train, or no fold and seed where the members
    are distinct runs."""
    odd = [r for r in recipes if "@" in r]
    if odd:
        sys.exit(f"bacteria_proxy: --recipe {odd[0]!r}: '@' in a recipe's name reads as a seed (NAME@SEED)")
    for name, members in ensembles.items():  # places where an ensemble would never be scored are refused here
        free = [m for m in members if "@" not in m]
        shared = set.intersection(*(set(recipe_folds(recipes[m], folds)) for m in free))
        for m in members:
            recipe, at, seed = m.partition("@")
            if at and int(seed) not in recipe_seeds(recipes[recipe], seeds):
                sys.exit(f"bacteria_proxy: --ensemble {name}: {m!r}: {recipe} trains seeds "
                         f"{recipe_seeds(recipes[recipe], seeds)}, not {seed}")
            if at and not shared <= set(recipe_folds(recipes[recipe], folds)):
                sys.exit(f"bacteria_proxy: --ensemble {name}: {m!r}: {recipe} trains folds "
                         f"{recipe_folds(recipes[recipe], folds)}, not all of {sorted(shared)}")
        ensemble_seeds = set.intersection(*(set(recipe_seeds(recipes[m], seeds)) for m in free))
        if not any(ensemble_places(members, (f, s), recipes) for f in shared for s in ensemble_seeds):
            sys.exit(f"bacteria_proxy: --ensemble {name}: no fold and seed where its members are {len(members)} "
                     f"runs (its recipes' folds and seeds)")


def ready_run(runner: Runner, recipe: str, settings: dict, seed: int, gpu: int | None) -> dict:
    """Train on every READY genome; score E. coli (held out)."""
    work = place_folder(runner.args.work, recipe, ("ready", seed))
    work.mkdir(parents=True, exist_ok=True)
    log, run_dir = work / "log.txt", work / "run"
    seconds = runner.train(run_dir, [runner.data[g] for g in READY], settings, seed, log, gpu,
                           teachers=teacher_runs(runner, settings, ("ready", seed)))
    row = {"kind": "ready", "recipe": recipe, "settings": settings, "seed": seed, "trained_on": READY,
           "train_seconds": seconds, "run_dir": str(run_dir), **run_record(run_dir),
           "genomes": {"ecoli": runner.evaluate(run_dir, runner.data["ecoli"], work / "eval_ecoli", log, gpu)}}
    print(f"{recipe:12s} ready seed {seed}  E. coli {row['genomes']['ecoli']['auprc']:.4f}", flush=True)
    return row


def split_genome(pair: tuple[str, str], fraction: float, out: Path) -> tuple[tuple[str, str], tuple[str, str]]:
    """((FASTA, BED) of the first ``fraction`` of each contig, (FASTA, BED) of the rest), written under ``out``:
    two genomes of their own (contigs renamed NAME_part and NAME_rest, TSSs shifted to the rest's coordinates)."""
    from genolin.io.fasta import Genome

    out.mkdir(parents=True, exist_ok=True)
    genome = Genome(pair[0])
    cuts = {name: int(length * fraction) for name, length in genome.lengths.items()}
    files = {part: (out / f"{part}.fa", out / f"{part}.bed") for part in ("part", "rest")}
    if not files["rest"][1].exists():
        with open(files["part"][0], "w") as fa_p, open(files["rest"][0], "w") as fa_r:
            for name, cut in cuts.items():
                seq = genome.fetch(name).decode()
                fa_p.write(f">{name}_part\n{seq[:cut]}\n")
                fa_r.write(f">{name}_rest\n{seq[cut:]}\n")
        beds = {"part": [], "rest": []}
        for line in Path(pair[1]).read_text().splitlines():
            f = line.split("\t")
            if len(f) < 6 or f[0] not in cuts:
                continue
            start, cut = int(f[1]), cuts[f[0]]
            part, shift = ("part", 0) if start < cut else ("rest", cut)
            beds[part].append("\t".join([f"{f[0]}_{part}", str(start - shift), str(start - shift + 1), *f[3:6]]))
        files["part"][1].write_text("\n".join(beds["part"]) + "\n")
        files["rest"][1].write_text("\n".join(beds["rest"]) + "\n")
    return tuple(map(str, files["part"])), tuple(map(str, files["rest"]))


def finetune_run(runner: Runner, recipe: str, settings: dict, genome: str, gpu: int | None) -> dict:
    """The seed-0 fold model that held ``genome`` out: as it is, fine-tuned on the first fraction of the genome,
    and that fraction trained from scratch; each scored on the rest."""
    fold = next(f for f, members in FOLDS.items() if genome in members)
    base = Path(runner.args.work) / recipe / f"fold{fold}_seed0" / "run"
    work = Path(runner.args.work) / recipe / f"finetune_{genome}"
    work.mkdir(parents=True, exist_ok=True)
    log = work / "log.txt"
    part, rest = split_genome(runner.data[genome], runner.args.finetune_fraction, work / "split")
    row = {"kind": "finetune", "recipe": recipe, "settings": settings, "genome": genome, "seed": 0,
           "fraction": runner.args.finetune_fraction, "near": is_near(genome, [g for g in GENOMES
                                                                               if g not in FOLDS[fold]]),
           "train_tss": sum(1 for _ in open(part[1])), "arms": {}}
    row["arms"]["as_is"] = runner.evaluate(base, rest, work / "eval_as_is", log, gpu)
    for arm, init in (("scratch", None), ("fine_tuned", str(base))):
        run_dir = work / arm
        seconds = runner.train(run_dir, [part], {} if init else settings, 0, log, gpu, init=init)
        row["arms"][arm] = {**runner.evaluate(run_dir, rest, work / f"eval_{arm}", log, gpu),
                            "train_seconds": seconds, **run_record(run_dir)}
    print(f"{recipe:12s} fine-tune {genome}: " + ", ".join(f"{a} {v['auprc']:.4f}" for a, v in row["arms"].items()),
          flush=True)
    return row


def cell(values: list[dict]) -> str:
    """AUPRC mean ± sd over runs (x the positive rate, mean)."""
    if not values:
        return "-"
    return f"{spread([v['auprc'] for v in values])} ({statistics.mean(v['ratio'] for v in values):.1f}x)"


def seed_means(mine: list[dict], pick) -> list[float]:
    """Per seed, the mean AUPRC over the scored genomes ``pick(genome, figures)`` keeps (seeds with every fold)."""
    folds = {r["fold"] for r in mine}
    out = []
    for s in sorted({r["seed"] for r in mine}):
        rows = [r for r in mine if r["seed"] == s]
        if {r["fold"] for r in rows} == folds:
            vals = [v["auprc"] for r in rows for g, v in r["genomes"].items() if pick(g, v)]
            if vals:
                out.append(statistics.mean(vals))
    return out


def ensembles_how(args: dict) -> str:
    """The tables' line on how ensembles were scored (--ensemble-form)."""
    if args.get("ensemble_form") == "product":
        return ("Ensembles (`genolin evaluate` with every member: probabilities averaged per bin at the finest stride, "
                "then pooled; train min: all members'): ")
    return "Ensembles (the mean of the members' 50-bp scores; no calls; train min: all members'): "


def tables(rows: list[dict], meta: dict) -> str:
    a = meta["args"]
    lines = [*header(meta, "Promoter-track recipes on eleven bacterial genomes",
                     f"; scored with --offset-average {a['offset_average']}" if a.get("offset_average", 1) > 1 else ""),
             *([ensembles_how(a) + "; ".join(f"**{n}** {' + '.join(m)}" for n, m in meta["ensembles"].items()), ""]
               if meta.get("ensembles") else []),
             "Folds (held out together): " + "; ".join(f"{f}: {', '.join(m)}" for f, m in FOLDS.items()) + ". Near: "
             "a genome of the same class in training.", ""]
    earlier = [r for r in rows if "from" in r]
    if earlier:
        places = sorted(f"{r['recipe']} fold {r['fold']} seed {r['seed']}" for r in earlier)
        files = sorted({"`" + r["from"] + "`" for r in earlier})
        lines += [f"Also tabled: the fold runs of {', '.join(files)} at places this run did not train "
                  f"({', '.join(places)})", ""]
    folds = [r for r in rows if r["kind"] == "fold"]
    recipes = list(dict.fromkeys(r["recipe"] for r in rows))
    if folds:
        scored = [g for g in SCORED if any(g in r["genomes"] for r in folds)]
        near = {g: any(r["genomes"][g]["near"] for r in folds if g in r["genomes"]) for g in scored}
        lines += ["Held-out genome: pooled AUPRC over both strands of 50-bp bins (RC-averaged), mean ± sd over seeds "
                  "(x the positive rate). Means: per seed over the genomes, then mean ± sd over seeds (the noise "
                  "level).", "",
                  "| recipe | " + " | ".join(f"{g}{' (near)' if near[g] else ''}" for g in scored)
                  + " | near | far | mean AUPRC | min ratio | P/R 20 bp | " + COST_COLUMNS,
                  "|---|" + "---:|" * (len(scored) + 9)]
        for rec in recipes:
            mine = [r for r in folds if r["recipe"] == rec]
            if not mine:
                continue
            cells = [cell([r["genomes"][g] for r in mine if g in r["genomes"]]) for g in scored]
            ratios = [statistics.mean(r["genomes"][g]["ratio"] for r in mine if g in r["genomes"]) for g in scored
                      if any(g in r["genomes"] for r in mine)]
            calls = [v for r in mine for v in r["genomes"].values() if v.get("precision_20bp") is not None]
            pr = (f"{statistics.mean(v['precision_20bp'] for v in calls):.3f} / "
                  f"{statistics.mean(v['recall_20bp'] for v in calls):.3f}") if calls else "-"
            lines.append(f"| {rec} | " + " | ".join(cells)
                         + f" | {spread(seed_means(mine, lambda g, v: v['near']))}"
                         + f" | {spread(seed_means(mine, lambda g, v: not v['near']))}"
                         + f" | {spread(seed_means(mine, lambda g, v: True))} | {min(ratios):.1f}x | {pr} | "
                         + cost_cells(mine))
    ready = [r for r in rows if r["kind"] == "ready"]
    if ready:
        lines += ["", "Trained on every genome but E. coli (a shipped model's data), E. coli scored:", "",
                  "| recipe | E. coli AUPRC | seeds | train min | memorising |", "|---|---:|---:|---:|---:|"]
        for rec in recipes:
            mine = [r for r in ready if r["recipe"] == rec]
            if mine:
                lines.append(f"| {rec} | {cell([r['genomes']['ecoli'] for r in mine])} | {len(mine)} | "
                             f"{spread([r['train_seconds'] / 60 for r in mine if r['train_seconds']], '.1f')} | "
                             f"{sum(r['memorising'] for r in mine)} of {len(mine)} |")
    tuned = [r for r in rows if r["kind"] == "finetune"]
    if tuned:
        lines += ["", f"Fine-tuning: the fold model (seed 0) that held the genome out; the first "
                      f"{tuned[0]['fraction']:.0%} of its chromosome to train on, scored on the rest (AUPRC, x the "
                      "positive rate).", "",
                  "| recipe | genome | training TSSs | as it is | from scratch | fine-tuned | fine-tune min |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for r in tuned:
            arms = r["arms"]
            minutes = arms["fine_tuned"].get("train_seconds")
            lines.append(f"| {r['recipe']} | {r['genome']}{' (near)' if r['near'] else ''} | {r['train_tss']} | "
                         + " | ".join(f"{arms[a]['auprc']:.4f} ({arms[a]['ratio']:.1f}x)"
                                      for a in ("as_is", "scratch", "fine_tuned"))
                         + (f" | {minutes / 60:.1f} |" if minutes else " | - |"))
    return "\n".join(lines) + "\n"


def main() -> None:
    p = recipe_parser(__doc__, "--folds", f"folds to hold out in turn, comma-separated (default {','.join(FOLDS)})")
    p.add_argument("--ready", action="store_true",
                   help="also train each recipe on every READY genome (each seed), E. coli scored")
    p.add_argument("--finetune", default="", metavar="GENOMES",
                   help="fine-tuning on these held-out genomes (comma-separated), the first recipe's seed-0 models")
    p.add_argument("--finetune-fraction", type=float, default=0.1, help="the part of the genome fine-tuning sees")
    p.add_argument("--ensemble", action="append", default=[], metavar="NAME=RECIPE+RECIPE",
                   help="also score each fold and seed with the mean of these recipes' 50-bp scores (repeat)")
    p.add_argument("--ensemble-form", choices=["scores", "product"], default="scores",
                   help="scores: the mean of the members' 50-bp scores; product: `genolin evaluate` with a --model "
                        "per member (probabilities averaged per bin at the finest stride, then pooled)")
    p.add_argument("--score-members", default=None, metavar="RUN,RUN",
                   help="no runs: score --fasta with --tss by the mean of these runs' 50-bp scores, written to "
                        "--out/metrics.json (what --ensemble runs for each genome)")
    p.add_argument("--fasta", help="with --score-members: the genome")
    p.add_argument("--tss", help="with --score-members: its TSS BED")
    p.add_argument("--offset-average", type=int, default=1, metavar="N",
                   help="evaluate with --offset-average N (tilings of the genome's windows averaged)")
    p.add_argument("--rows-from", action="append", default=[], metavar="JSON",
                   help="also table the fold runs of an earlier run of this script (its PREFIX.json) of recipes "
                        "and ensembles given here, at folds and seeds this run does not train (repeat)")
    run_options(p, "bacteria_proxy", "tiny, fold A, seed 0, 20 steps", limits=True)
    args = p.parse_args()
    if args.score_members:
        if not (args.fasta and args.tss):
            sys.exit("bacteria_proxy: --score-members needs --fasta and --tss")
        result = score_members(args.score_members.split(","), args.fasta, args.tss, args.device, args.offset_average)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "metrics.json").write_text(json.dumps(result, indent=2) + "\n")
        return
    recipes = setup(args, "bacteria_proxy", QUICK, folds=",".join(FOLDS))
    args.recipes = recipes
    fold_names = [] if args.folds == "none" else args.folds.split(",")
    seeds = [int(s) for s in str(args.seeds).split(",")]
    check_teachers(recipes, args.ready, fold_names, seeds)
    ensembles = dict(parse_ensemble(e, recipes) for e in args.ensemble)
    check_ensembles(ensembles, recipes, fold_names, seeds)
    runner = Runner(args, data_paths(Path(args.shared)))
    first = next(iter(recipes))
    tuned = [g for g in args.finetune.split(",") if g]
    unknown = [g for g in tuned if g not in SCORED]
    if unknown:
        sys.exit(f"bacteria_proxy: --finetune {','.join(unknown)}: not a scored genome ({', '.join(SCORED)})")
    jobs = [(fold_run, name, s, fold, seed) for seed in seeds for name, s in recipes.items()
            for fold in recipe_folds(s, fold_names) if seed in recipe_seeds(s, seeds)]
    jobs += [(ready_run, name, s, seed) for seed in seeds for name, s in recipes.items()
             if seed in recipe_seeds(s, seeds)] if args.ready else []
    # a distilled recipe's job waits until its teacher recipes' runs (same fold; same seed, or "@S"'s) have finished
    later = [j for j in jobs if any(teacher_place(t, ("", 0), recipes)[0] in recipes for t in teachers_of(j[2]))]
    jobs = [j for j in jobs if j not in later]
    meta = {**run_metadata("bacteria_proxy", {k: v for k, v in vars(args).items() if k != "recipe"}),
            "recipes": recipes, "ensembles": ensembles, "folds": FOLDS}
    rows, failed = [], []
    training = {(j[1], j[3], j[4]) for j in jobs + later if j[0] is fold_run}  # (recipe, fold, seed)
    training |= {(name, f, seed) for name, members in ensembles.items() for _, f, seed in set(training)
                 if (where := ensemble_places(members, (f, seed), recipes))
                 and all((m, *at) in training for m, at in where)}
    for path in args.rows_from:
        rows += earlier_rows(Path(path), {**recipes, **{n: {"members": "+".join(m)} for n, m in ensembles.items()}},
                             training, vars(args))
    meta["rows_from"] = args.rows_from

    def write() -> str:  # after every run, so a time limit keeps what finished
        order = [*recipes, *ensembles]
        rows.sort(key=lambda r: (r["kind"], order.index(r["recipe"]), r.get("fold", r.get("genome", "")), r["seed"]))
        text = tables(rows, meta) if rows else "no run finished\n"
        write_result(Path(args.out), {"meta": meta, "rows": rows, "failed": failed}, text)
        return text

    slots = GpuSlots(args.parallel, args.gpus)
    text = "no run finished\n"
    with cf.ThreadPoolExecutor(args.parallel) as pool:
        pending = {pool.submit(slots.run, job[0], runner, *job[1:]): [job[0].__name__, *job[1:2], *job[3:]]
                   for job in jobs}
        # (recipe, fold or "ready", seed) of the trainings done (check_teachers made sure every teacher run is a job)
        finished: set[tuple] = set()
        scored: set[tuple] = set()  # (ensemble, fold, seed) submitted

        def submit(fn, *job_args, label):
            pending[pool.submit(slots.run, fn, runner, *job_args)] = label

        while pending:
            done, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for f in done:
                label = pending.pop(f)
                collect(f, label, rows, failed)
                text = write()
                if label[0] not in ("fold_run", "ready_run") or f.exception() is not None:
                    continue
                recipe, place = label[1], place_of(label)
                finished.add((recipe, *place))
                # a distilled recipe once its teacher recipes' runs are trained
                for student in list(later):
                    mine = place_of([student[0].__name__, *student[1:2], *student[3:]])
                    wanted = [teacher_place(t, mine, recipes) for t in teachers_of(student[2])]
                    if all((t, *where) in finished for t, where in wanted if t in recipes):
                        later.remove(student)
                        submit(student[0], *student[1:], label=[student[0].__name__, *student[1:2], *student[3:]])
                if label[0] != "fold_run":
                    continue
                fold, seed = place
                # fine-tuning once its fold model (first recipe, seed 0) is trained, an ensemble once its members are
                if recipe == first and seed == 0:
                    for g in (g for g in tuned if g in FOLDS[fold]):
                        submit(finetune_run, first, recipes[first], g, label=["finetune_run", first, g])
                trained = {(r["recipe"], r["fold"], r["seed"]): r for r in rows  # this run's: an ensemble of
                           if r["kind"] == "fold" and r["fold"] == fold and "from" not in r}  # earlier ones is theirs
                for name, members in ensembles.items():  # every seed of the fold: "A@S" members wait for A's seed S
                    for s in seeds:
                        where = ensemble_places(members, (fold, s), recipes)
                        if (name, fold, s) in scored or not where or (recipe, place) not in where \
                                or not all((m, *at) in trained for m, at in where):
                            continue
                        scored.add((name, fold, s))
                        submit(ensemble_run, name, [trained[(m, *at)] for m, at in where], s, members,
                               label=["ensemble_run", name, fold, s])
    for student in later:  # a teacher failed
        failed.append({"run": [student[0].__name__, student[1], *student[3:]], "error": "its teacher did not train"})
    text = write()
    print(text)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
