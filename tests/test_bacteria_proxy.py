"""benchmarks/bacteria_proxy.py: ensembles of recipes (the mean of members' 50-bp scores), their tables, and the
--quick run end to end on the shared genomes."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO, shared_file

from genolin.tasks.track_scoring import GenomeScores


@pytest.fixture(scope="module")
def proxy():
    spec = importlib.util.spec_from_file_location("bacteria_proxy", REPO / "benchmarks" / "bacteria_proxy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scores(y, p) -> GenomeScores:
    return GenomeScores(np.array(y, dtype=np.int8), np.array(p, dtype=np.float32), {}, {}, 100)


def test_an_ensemble_scores_each_bin_with_its_members_mean(proxy):
    """Two members that each rank a negative first, one on each strand, whose mean ranks every positive first:
    AUPRC 1 for the mean, below 1 for each; targets of other bins are refused."""
    y = [[1, 0], [0, 0], [0, 1], [0, 0]]
    a = scores(y, [[0.9, 0.1], [0.95, 0.2], [0.1, 0.3], [0.2, 0.0]])
    b = scores(y, [[0.5, 0.2], [0.1, 0.1], [0.2, 0.9], [0.3, 0.95]])
    got = proxy.ensemble_figures([a, b])
    assert got["pooled"]["auprc"] == pytest.approx(1.0) and got["pooled"]["positive_rate"] == pytest.approx(0.25)
    for member in (a, b):
        assert proxy.ensemble_figures([member])["pooled"]["auprc"] < 0.9
    assert got["plus"]["auprc"] == pytest.approx(1.0) and got["minus"]["auprc"] == pytest.approx(1.0)
    with pytest.raises(RuntimeError, match="other bins"):
        proxy.ensemble_figures([a, scores([[0, 0], [1, 0], [0, 1], [0, 0]], a.p)])
    with pytest.raises(RuntimeError, match="other bins"):
        proxy.ensemble_figures([a, scores(y[:3], a.p[:3])])


@pytest.mark.parametrize(("text", "message"), [
    ("e=shipped", "expected NAME=RECIPE+RECIPE"), ("=shipped+s1", "expected NAME=RECIPE+RECIPE"),
    ("e=shipped+shipped", "expected NAME=RECIPE+RECIPE"), ("e:shipped+s1", "expected NAME=RECIPE+RECIPE"),
    ("e=shipped+s2", "no --recipe 's2' (recipes: shipped, s1)"), ("s1=shipped+s1", "'s1' is a recipe's name"),
    ("e=shipped+s2@0", "no --recipe 's2'"), ("e=shipped+s1@x", "'s1@x': RECIPE@SEED takes a seed number"),
    ("e=shipped@0+s1@0", "every member is at a fixed seed"),
])
def test_a_bad_ensemble_is_one_line(proxy, text, message):
    recipes = {"shipped": {}, "s1": {"stride": "1"}}
    assert proxy.parse_ensemble("s1+4=shipped+s1", recipes) == ("s1+4", ["shipped", "s1"])
    assert proxy.parse_ensemble("t=shipped+s1@0", recipes) == ("t", ["shipped", "s1@0"])
    with pytest.raises(SystemExit) as exit_:
        proxy.parse_ensemble(text, recipes)
    assert str(exit_.value).startswith(f"bacteria_proxy: --ensemble {text!r}: ") and message in str(exit_.value)


def test_an_ensemble_member_at_a_seed_joins_every_seed_of_the_ensemble(proxy):
    """"A@S" is A's seed-S run at each place of the ensemble; two members that are one run there leave that place
    out ("A+A@1" at seed 1)."""
    recipes = {"dB": {}, "s1": {}}
    assert proxy.ensemble_places(["dB", "s1@0"], ("C", 2), recipes) == [("dB", ("C", 2)), ("s1", ("C", 0))]
    assert proxy.ensemble_places(["dB", "dB@1"], ("A", 0), recipes) == [("dB", ("A", 0)), ("dB", ("A", 1))]
    assert proxy.ensemble_places(["dB", "dB@1"], ("A", 1), recipes) is None


@pytest.mark.parametrize(("ensembles", "message"), [
    ({"t": ["dB", "s1@1"]}, "'s1@1': s1 trains seeds [0], not 1"),
    ({"t": ["dB", "a@0"]}, "'a@0': a trains folds ['A'], not all of ['A', 'C']"),
    ({"t": ["s1", "s1@0"]}, "t: no fold and seed where its members are 2 runs"),
])
def test_an_ensemble_that_would_never_be_scored_is_refused_before_training(proxy, ensembles, message):
    recipes = {"dB": {"seeds": "1/2"}, "s1": {"seeds": "0"}, "a": {"folds": "A"}}
    proxy.check_ensembles({"t2": ["dB", "s1@0"], "t3": ["dB", "s1@0", "a@0"]}, {**recipes, "a": {}}, ["A", "C"],
                          [0, 1, 2])
    with pytest.raises(SystemExit, match=re.escape(message)):
        proxy.check_ensembles(ensembles, recipes, ["A", "C"], [0, 1, 2])
    with pytest.raises(SystemExit, match="'@' in a recipe's name"):
        proxy.check_ensembles({}, {"x@1": {}}, ["A"], [0])
    with pytest.raises(SystemExit, match="a member twice"):
        proxy.parse_ensemble("t=dB+s1@0+s1@00", recipes)


def test_an_ensemble_is_a_line_of_the_table_like_a_recipe(proxy):
    """Ensemble rows (kind "fold", the ensemble's name as recipe) get per-genome cells, near, far and mean ± sd over
    seeds as a recipe's; the header names the members."""
    def row(recipe, seed, ecoli, ccres, minutes=2.0):
        near = {"ecoli": False, "ccrescentus": True}
        return {"kind": "fold", "recipe": recipe, "settings": {}, "fold": "A", "seed": seed, "steps": 20,
                "train_seconds": minutes * 60, "memorising": False, "by_clock": False,
                "genomes": {g: {"auprc": v, "ratio": v / 0.01, "positive_rate": 0.01, "near": near[g]}
                            for g, v in (("ecoli", ecoli), ("ccrescentus", ccres))}}

    rows = [row("shipped", 0, 0.10, 0.20), row("shipped", 1, 0.12, 0.22), row("s1", 0, 0.14, 0.16),
            row("s1", 1, 0.16, 0.18), row("s1+4", 0, 0.16, 0.22, 4.0), row("s1+4", 1, 0.18, 0.24, 4.0)]
    meta = {"date": "2026-11-28", "cpu": "x86_64", "torch": "2", "genolin": "0.1.0", "command": "c",
            "args": {"preset": "tiny", "seeds": "0,1", "parallel": 2}, "recipes": {"shipped": {}, "s1": {}},
            "ensembles": {"s1+4": ["shipped", "s1"]}}
    text = proxy.tables(rows, meta)
    assert "**s1+4** shipped + s1" in text
    line = next(x for x in text.splitlines() if x.startswith("| s1+4 |"))
    # per genome: mean ± sd over seeds; near: C. crescentus; far: E. coli; mean: per seed over both, then over seeds
    assert line.startswith("| s1+4 | 0.1700 ± 0.0141 (17.0x) | 0.2300 ± 0.0141 (23.0x) | 0.2300 ± 0.0141 | "
                           "0.1700 ± 0.0141 | 0.2000 ± 0.0141 | 17.0x | - | 4.0 ± 0.0 | 0 of 2 |")


@pytest.mark.slow
def test_the_proxy_quick_run_scores_an_ensemble(tmp_path):
    """--quick with --ensemble on CPU: both recipes trained (20 steps) and scored, the ensemble's row has finite
    figures, its members' own AUPRCs are those of their recipes' rows (the same scoring as evaluate), and it is a line
    of the table."""
    from genolin.models.build import GENOMES

    for (fasta, bed), *_ in GENOMES.values():  # fold A trains on nine genomes and scores two
        shared_file(fasta), shared_file(bed)
    out = tmp_path / "bp"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bacteria_proxy.py"), "--quick", "--device",
                           "cpu", "--ensemble", "both=shipped+s1", "--work", str(tmp_path / "w"), "--out", str(out)],
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    by = {r["recipe"]: r for r in rows}
    assert set(by) == {"shipped", "s1", "both"} and by["both"]["members"] == ["shipped", "s1"]
    for g, v in by["both"]["genomes"].items():
        assert math.isfinite(v["auprc"]) and 0 < v["auprc"] <= 1 and v["ratio"] > 0
        own = list(v["members"].values())
        assert own == pytest.approx([by["shipped"]["genomes"][g]["auprc"], by["s1"]["genomes"][g]["auprc"]],
                                    abs=1e-6)
    assert "| both |" in out.with_suffix(".md").read_text()
    # the same runs again (found in --work, not retrained), the ensemble as a user runs it: one evaluate of both
    product = tmp_path / "bp_product"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bacteria_proxy.py"), "--quick", "--device",
                           "cpu", "--ensemble", "both=shipped+s1", "--ensemble-form", "product", "--work",
                           str(tmp_path / "w"), "--out", str(product)], capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-2000:]
    again = {r["recipe"]: r for r in json.loads(product.with_suffix(".json").read_text())["rows"]}
    assert again["shipped"]["genomes"] == by["shipped"]["genomes"]  # the same evaluations, found
    for v in again["both"]["genomes"].values():
        assert math.isfinite(v["auprc"]) and 0 < v["auprc"] <= 1 and v["ratio"] > 0
    assert "`genolin evaluate` with every member" in product.with_suffix(".md").read_text()


def test_teachers_at_a_seed_are_placed_and_checked(proxy):
    """"A@0" is recipe A's seed-0 run for a student of any seed; a model name holding "@" stays a model; a seed the
    teacher recipe does not train is refused in one line."""
    recipes = {"A": {"seeds": "0"}, "S": {"teacher": "A@0"}}
    assert proxy.teacher_place("A@0", ("B", 2), recipes) == ("A", ("B", 0))
    assert proxy.teacher_place("A", ("B", 2), recipes) == ("A", ("B", 2))
    assert proxy.teacher_place("runs/x@y", ("ready", 1), recipes) == ("runs/x@y", ("ready", 1))
    assert proxy.recipe_seeds(recipes["A"], [0, 1, 2]) == [0] and proxy.recipe_seeds({}, [0, 1]) == [0, 1]
    proxy.check_teachers(recipes, False, ["A", "B"], [0, 1, 2])
    with pytest.raises(SystemExit, match="teacher 'A@1': A trains seeds \\[0\\], not '1'"):
        proxy.check_teachers({"A": {"seeds": "0"}, "S": {"teacher": "A@1"}}, False, ["A"], [0, 1])


def test_a_recipe_of_some_folds_is_completed_by_an_earlier_runs_rows(proxy, tmp_path):
    """"folds=B" trains only fold B (its teacher must train it too); --rows-from tables an earlier run's rows of the
    same recipes at the places this run does not train, and refuses a recipe of the same name with other settings."""
    assert proxy.recipe_folds({"folds": "C/A"}, ["A", "B", "C"]) == ["A", "C"]
    assert proxy.recipe_folds({}, ["A", "B"]) == ["A", "B"] and proxy.recipe_seeds({"seeds": 1}, [0, 1]) == [1]
    with pytest.raises(SystemExit, match="teacher 'T' trains the folds \\['A'\\], not all of \\['A', 'B'\\]"):
        proxy.check_teachers({"T": {"folds": "A"}, "S": {"teacher": "T"}}, False, ["A", "B"], [0])
    proxy.check_teachers({"T": {}, "S": {"teacher": "T", "folds": "B"}}, False, ["A", "B"], [0])

    def row(recipe, fold, seed, settings):
        return {"kind": "fold", "recipe": recipe, "fold": fold, "seed": seed, "settings": settings, "genomes": {}}

    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"rows": [
        row("S", "A", 0, {"teacher": "T@0"}), row("S", "B", 0, {"teacher": "T@0", "folds": "A/B"}),
        row("S", "A", 1, {"teacher": "T@0"}), row("other", "A", 0, {}), row("E", "A", 0, {"members": "T+S"})]}))
    recipes = {"S": {"teacher": "T@0", "folds": "B"}, "E": {"members": "T+S"}}
    got = proxy.earlier_rows(earlier, recipes, {("S", "B", 0), ("S", "B", 1)})
    assert [(r["recipe"], r["fold"], r["seed"]) for r in got] == [("S", "A", 0), ("S", "A", 1), ("E", "A", 0)]
    assert all(r["from"] == str(earlier) for r in got)
    assert proxy.earlier_rows(earlier, recipes, {("S", "B", 0), ("S", "A", 0), ("S", "A", 1), ("E", "A", 0)}) == []
    with pytest.raises(SystemExit, match="S was .* there"):
        proxy.earlier_rows(earlier, {"S": {"teacher": "T@1"}}, set())
    earlier.write_text(json.dumps({"meta": {"args": {"preset": "tiny"}, "folds": proxy.FOLDS},
                                   "rows": [row("S", "A", 0, {"teacher": "T@0"})]}))
    assert len(proxy.earlier_rows(earlier, recipes, set(), {"preset": "tiny"})) == 1
    with pytest.raises(SystemExit, match="that run had --preset 'tiny', this one 'base'"):
        proxy.earlier_rows(earlier, recipes, set(), {"preset": "base"})
    with pytest.raises(SystemExit, match="folds=D: D is not one of --folds"):
        proxy.recipe_folds({"folds": "D"}, ["A", "B"])
    assert proxy.recipe_seeds({"seeds": "00/2"}, [0, 1, 2]) == [0, 2]


def test_an_evaluation_that_ran_out_of_memory_is_run_again_and_other_failures_are_not(proxy, tmp_path):
    """``common.run`` runs a command whose last line says it ran out of memory again (runs beside it on the GPU may
    have finished), up to ``oom_retries`` times; any other failure, or the last try's, is the RuntimeError."""
    count = tmp_path / "count"
    script = ("import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = len(p.read_text()) if p.exists() else 0; "
              "p.write_text('x' * (n + 1)); print(sys.argv[2] if n < int(sys.argv[3]) else 'ok'); "
              "sys.exit(1 if n < int(sys.argv[3]) else 0)")
    oom = "genolin: error: the GPU ran out of memory (768.00 MiB asked for, 448.25 MiB of 79.18 GiB free): ..."
    log = tmp_path / "log.txt"
    proxy.run([sys.executable, "-c", script, str(count), oom, "2"], log, oom_retries=2, oom_wait_s=0)
    assert count.read_text() == "xxx" and log.read_text().count("# out of memory: again in 0 s") == 2
    count.unlink()
    with pytest.raises(RuntimeError, match="ran out of memory"):
        proxy.run([sys.executable, "-c", script, str(count), oom, "3"], log, oom_retries=2, oom_wait_s=0)
    assert count.read_text() == "xxx"
    count.unlink()
    with pytest.raises(RuntimeError, match="genolin: error: bad input"):
        proxy.run([sys.executable, "-c", script, str(count), "genolin: error: bad input", "1"], log, oom_retries=2,
                  oom_wait_s=0)
    assert count.read_text() == "x"


def test_a_finished_training_is_reused_only_for_the_arguments_that_trained_it(proxy, tmp_path):
    """``common.train_once`` trains once and records the arguments in the run's command.json; it reuses the run for
    the same ones (whatever interpreter runs them, a path spelled relative or absolute), and fails for other
    arguments (naming the option), for a training cut short after a checkpoint and for a run without the record."""
    run_dir, log, data = tmp_path / "run", tmp_path / "log.txt", tmp_path / "genome.fa"
    data.write_text(">a\nACGT\n")
    train = ("import pathlib, sys; d = pathlib.Path(sys.argv[-1]); d.mkdir(exist_ok=True); "
             "(d / 'trainer_state.json').write_text('{}'); sys.exit(int(sys.argv[-3] == 'crash'))")
    cmd = [sys.executable, "-c", train, "--fasta", str(data), "--seed", "0", "--out", str(run_dir)]
    assert proxy.train_once(cmd, run_dir, log) > 0
    assert json.loads((run_dir / "command.json").read_text())["finished"] is True
    relative = os.path.relpath(data)
    assert proxy.train_once(["/another/python", "-c", train, "--fasta", relative, *cmd[5:]], run_dir, log) is None
    with pytest.raises(RuntimeError, match=r"run: trained with other arguments \('--seed 0', now '--seed 1'\); "
                                           r"use another folder"):
        proxy.train_once([*cmd[:6], "1", *cmd[7:]], run_dir, log)
    cut = tmp_path / "cut"  # a training that wrote a checkpoint and died: not reused, and not trained over
    crash = [sys.executable, "-c", train, "--fasta", str(data), "--seed", "crash", "--out", str(cut)]
    with pytest.raises(RuntimeError, match="failed"):
        proxy.train_once(crash, cut, log)
    with pytest.raises(RuntimeError, match=r"cut: its training was cut short; `genolin train --resume"):
        proxy.train_once(crash, cut, log)
    (run_dir / "command.json").unlink()  # a run whose arguments are unknown
    with pytest.raises(RuntimeError, match=r"run: holds a run with no record of the arguments"):
        proxy.train_once(cmd, run_dir, log)
