"""Bundled models and fine-tuning: what --model NAME resolves to (a run directory of that name wins), the shipped
``bacteria`` model loading and predicting a small genome on a CPU, ``genolin models``, and ``train --init``
starting from a run's weights with its tokens and encoder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import bedgraph_bases, ecoli_slice

from genolin.checkpoint import load_tensors
from genolin.cli import cli
from genolin.errors import InputError
from genolin.models import HERE, BundledModel, bundled, resolve_model, resolve_models

SHIPPED = [m.name for m in bundled()]


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


@pytest.fixture(scope="module")
def piece(tmp_path_factory):
    """60 kbp of E. coli (contig 'piece') and its gene starts."""
    d = tmp_path_factory.mktemp("piece")
    ecoli_slice(d / "piece.fa", d / "piece.bed", "piece", 0, 60_000)
    return d


@pytest.fixture(scope="module")
def start_run(tmp_path_factory, piece):
    """A tiny track run of a few steps: what fine-tuning starts from."""
    out = tmp_path_factory.mktemp("start") / "run"
    r = run("train", "--fasta", piece / "piece.fa", "--tss", piece / "piece.bed", "--set", "window_bp=2048",
            "--set", "batch_size=4", "--set", "d_model=32", "--set", "steps=6", "--set", "val_every_steps=3",
            "--set", "warmup_steps=2", "--out", out)
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture
def demo_models(tmp_path, monkeypatch):
    """A bundled model 'demo' of two members (big: GPU, small: CPU) in a package folder of its own."""
    import genolin.models

    package = tmp_path / "package"
    for member in ("big", "small"):
        (package / "demo" / member).mkdir(parents=True)
        (package / "demo" / member / "best.safetensors").write_bytes(b"")
    (package / "demo" / "model.json").write_text(json.dumps({"summary": "a demo",
                                                             "members": {"big": "cuda", "small": "cpu"}}))
    monkeypatch.setattr(genolin.models, "HERE", package)
    return package / "demo"


def test_a_bundled_name_resolves_to_its_member_and_a_run_directory_of_the_name_wins(tmp_path, monkeypatch,
                                                                                    demo_models):
    monkeypatch.chdir(tmp_path)
    assert [m.name for m in bundled()] == ["demo"]
    assert resolve_model("demo", "cuda") == demo_models / "big"
    with pytest.raises(InputError, match="members big, small"):
        resolve_models("demo-", "cuda")  # a trailing dash names no member
    assert resolve_model("demo", "cpu") == demo_models / "small"
    assert resolve_model("demo-big", "cpu") == demo_models / "big"
    with pytest.raises(InputError, match="members big, small"):
        resolve_model("demo-huge", "cpu")
    with pytest.raises(InputError, match=r"^other: no such run directory, nor a bundled model; the bundled models "
                                         r"are demo \(genolin models lists them and their members\)$"):
        resolve_model("other")  # no close name
    assert resolve_models("runs/other") == [Path("runs/other")]  # a path: the loader reports it missing
    (tmp_path / "demo").mkdir()
    assert resolve_model("demo", "cpu") == tmp_path / "demo" or resolve_model("demo", "cpu").resolve() == \
        (tmp_path / "demo").resolve()
    r = CliRunner().invoke(cli, ["models"])
    assert r.exit_code == 0 and "demo: a demo" in r.output and "demo-small (CPU)" in r.output


def test_a_member_without_weights_is_not_listed(demo_models):
    (demo_models / "big" / "best.safetensors").unlink()
    (model,) = bundled()
    assert model.members == {"small": "cpu"} and model.members_for("cuda") == ["small"]
    assert BundledModel("x", "", {"only": "cuda"}, demo_models).members_for("cpu") == ["only"]


def test_several_members_for_a_device_are_an_ensemble_and_init_takes_the_first(demo_models):
    (demo_models / "big2").mkdir()
    (demo_models / "big2" / "best.safetensors").write_bytes(b"")
    (demo_models / "model.json").write_text(json.dumps({"summary": "a demo", "members": {
        "big": "cuda", "small": "cpu", "big2": "cuda"}}))
    assert resolve_models("demo", "cuda") == [demo_models / "big", demo_models / "big2"]
    assert resolve_models("demo", "cpu") == [demo_models / "small"]
    assert resolve_models("demo-big2", "cpu") == [demo_models / "big2"]
    assert resolve_model("demo", "cuda") == demo_models / "big"


def test_a_bundled_ensemble_predicts_as_its_members_named_one_by_one(tmp_path, monkeypatch, piece, start_run):
    import shutil

    import genolin.models
    from genolin.checkpoint import save_weights

    package = tmp_path / "package"
    for member, scale in (("a", 1.0), ("b", 0.5)):  # b: a's weights halved, so the ensemble differs from a
        shutil.copytree(start_run, package / "demo" / member)
        tensors, meta = load_tensors(start_run / "best.safetensors")
        save_weights(package / "demo" / member / "best.safetensors",
                     {k: t * scale if t.is_floating_point() else t for k, t in tensors.items()}, meta)
    (package / "demo" / "model.json").write_text(json.dumps({"summary": "", "members": {"a": "cpu", "b": "cpu"}}))
    monkeypatch.setattr(genolin.models, "HERE", package)
    monkeypatch.chdir(tmp_path)

    def track(*models):
        out = tmp_path / "_".join(m.replace("/", "") for m in models)
        r = run("predict", *[a for m in models for a in ("--model", m)], "--fasta", piece / "piece.fa", "--device",
                "cpu", "--out", out)
        assert r.exit_code == 0, r.output
        return [line for line in out.with_suffix(".plus.bedGraph").read_text().splitlines()
                if not line.startswith("track")]  # the header names the models

    both = track("demo")
    assert both == track(str(package / "demo" / "a"), str(package / "demo" / "b")) != track("demo-a")


def test_building_some_members_keeps_the_others_in_the_card(tmp_path):
    from genolin.models.build import MEMBERS, write_card

    write_card(tmp_path, {m: MEMBERS[m] for m in ("base", "cpu")}, {"base": [], "cpu": ["steps=5"]})
    write_card(tmp_path, {"s1": MEMBERS["s1"]}, {"s1": list(MEMBERS["s1"][2])})
    card = json.loads((tmp_path / "model.json").read_text())
    assert list(card["members"].items()) == [("base", "cuda"), ("s1", "cuda"), ("cpu", "cpu")]  # base first
    assert card["settings"] == {"base": [], "s1": list(MEMBERS["s1"][2]), "cpu": ["steps=5"]}
    assert card["teachers"]["cpu"]["s1"] == {"preset": "base", "settings": list(MEMBERS["s1"][2])}
    assert card["presets"]["s1"] == "base" and "ecoli" not in card["training_genomes"]


@pytest.mark.skipif("bacteria" not in SHIPPED, reason="the bacteria model's weights are not in this install")
def test_the_bacteria_model_resolves_loads_and_predicts_a_small_genome_on_a_cpu(tmp_path, piece):
    assert resolve_model("bacteria", "cpu").parent == HERE / "bacteria"
    card = json.loads((HERE / "bacteria" / "model.json").read_text())
    for member in card["members"]:
        weights = HERE / "bacteria" / member / "best.safetensors"
        assert weights.stat().st_size <= 25e6  # a release artifact: at most 25 MB
        tensors, _ = load_tensors(weights)
        assert all(torch.isfinite(t).all() for t in tensors.values() if t.is_floating_point())
        assert {t.dtype for t in tensors.values() if t.is_floating_point()} == {torch.bfloat16}, member  # as built
    assert "ecoli" not in card["training_genomes"]  # RegulonDB's map may not be redistributed
    out = tmp_path / "pred"
    r = run("predict", "--model", "bacteria", "--fasta", piece / "piece.fa", "--rc-average", "--device", "cpu",
            "--out", out)
    assert r.exit_code == 0, r.output
    plus = [line.split("\t") for line in (tmp_path / "pred.plus.bedGraph").read_text().splitlines()
            if not line.startswith("track")]
    values = [float(f[3]) for f in plus]
    assert int(plus[-1][2]) == 60_000 and 0 <= min(values) and max(values) <= 1 and max(values) > min(values)
    ecoli_slice(tmp_path / "small.fa", tmp_path / "small.bed", "small", 0, 20_000)  # the GPU members are slow here
    for member in card["members"]:  # each member by name, and evaluate takes the name too
        e = run("evaluate", "--model", f"bacteria-{member}", "--fasta", tmp_path / "small.fa", "--tss",
                tmp_path / "small.bed", "--device", "cpu", "--out", tmp_path / f"eval_{member}")
        assert e.exit_code == 0, e.output
        assert json.loads((tmp_path / f"eval_{member}" / "metrics.json").read_text())["pooled"]["auprc"] > 0
    r = run("predict", "--model", "bacteria-nonexistent", "--fasta", piece / "piece.fa", "--out", tmp_path / "x")
    assert r.exit_code == 1 and "members" in r.output


@pytest.mark.skipif("bacteria" not in SHIPPED, reason="the bacteria model's weights are not in this install")
def test_each_device_gets_its_bacteria_member_for_predict_init_and_explain(tmp_path, piece):
    """A CPU gets the distilled CPU student (for --model, --init and explain), a GPU the ensemble of its teachers;
    the whole bundle stays a release artifact of at most 25 MB."""
    folder = HERE / "bacteria"
    assert sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) <= 25e6
    card = json.loads((folder / "model.json").read_text())
    gpu = [m for m, d in card["members"].items() if d == "cuda"]
    (cpu,) = [m for m, d in card["members"].items() if d == "cpu"]
    assert resolve_models("bacteria", "cuda") == [folder / m for m in gpu] and len(gpu) == 2
    assert resolve_models("bacteria", "cpu") == [folder / cpu] == [resolve_model("bacteria", "cpu")]
    assert sorted(card["teachers"][cpu]) == sorted(gpu)  # the student of the GPU ensemble
    assert json.loads((folder / cpu / "config.json").read_text())["train"]["model"]["d_model"] < \
        json.loads((folder / gpu[0] / "config.json").read_text())["train"]["model"]["d_model"]
    r = run("train", "--init", "bacteria", "--device", "cpu", "--fasta", piece / "piece.fa", "--tss",
            piece / "piece.bed", "--set", "steps=2", "--set", "val_every_steps=2", "--set", "batch_size=2",
            "--out", tmp_path / "tuned")
    assert r.exit_code == 0, r.output
    tuned = json.loads((tmp_path / "tuned" / "config.json").read_text())["train"]
    assert tuned["init_weights"] == str(folder / cpu / "best.safetensors")
    (tmp_path / "r.bed").write_text("piece\t30000\t30001\t.\t0\t+\n")
    r = CliRunner().invoke(cli, ["explain", "--model", "bacteria", "--device", "cpu", "--fasta",
                                 str(piece / "piece.fa"), "--regions", str(tmp_path / "r.bed"), "--flank", "5",
                                 "--context", "400", "--out", str(tmp_path / "why")])
    assert r.exit_code == 0, r.output
    assert f"explain explains its member {cpu} " in r.output  # the log line of the member it loaded


def test_models_lists_what_ships():
    r = CliRunner().invoke(cli, ["models"])
    assert r.exit_code == 0, r.output
    for name in SHIPPED:
        assert f"{name}:" in r.output and f"{name}-" in r.output
    if not SHIPPED:
        assert "no bundled models" in r.output


def test_fine_tuning_starts_from_the_runs_weights_with_its_tokens_and_encoder(tmp_path, piece, start_run):
    out = tmp_path / "tuned"
    r = CliRunner().invoke(cli, ["train", "--init", str(start_run), "--fasta", str(piece / "piece.fa"), "--tss",
                                 str(piece / "piece.bed"), "--set", "steps=4", "--set", "val_every_steps=2",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    start = json.loads((start_run / "config.json").read_text())["train"]
    tuned = json.loads((out / "config.json").read_text())["train"]
    assert tuned["init_weights"] == str(start_run / "best.safetensors")
    assert tuned["model"] == start["model"] and (tuned["k"], tuned["stride"]) == (start["k"], start["stride"])
    assert tuned["lr"] == pytest.approx(start["lr"] * 0.2) and tuned["steps"] == 4  # --set wins over the defaults
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[0]["epoch"] == 0 and records[0]["step"] == 0  # the starting model validated first
    log = (out / "train.log").read_text()
    assert "starting from the weights of" in log


def test_fine_tuning_keeps_the_encoder_and_refuses_a_preset(tmp_path, piece, start_run):
    common = ["--init", start_run, "--fasta", piece / "piece.fa", "--tss", piece / "piece.bed"]
    r = run("train", *common, "--set", "d_model=64", "--out", tmp_path / "a")
    assert r.exit_code == 1 and "model.d_model" in r.output and "--init keeps" in r.output
    r = run("train", *common, "--preset", "base", "--out", tmp_path / "b")
    assert r.exit_code == 2 and "--init" in r.output
    r = run("train", "--init", tmp_path / "missing", "--fasta", piece / "piece.fa", "--tss", piece / "piece.bed",
            "--out", tmp_path / "c")
    assert r.exit_code == 1 and "missing" in r.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_fine_tuning_takes_epochs_and_settings_that_change_no_weight(tmp_path, piece, start_run):
    r = CliRunner().invoke(cli, ["-q", "train", "--init", str(start_run), "--fasta", str(piece / "piece.fa"), "--tss",
                                 str(piece / "piece.bed"), "--epochs", "2", "--set", "windows_per_epoch=4",
                                 "--set", "model.dropout=0.2", "--out", str(tmp_path / "tuned")])
    assert r.exit_code == 0, r.output
    tuned = json.loads((tmp_path / "tuned" / "config.json").read_text())["train"]
    assert tuned["steps"] is None and tuned["epochs"] == 2 and tuned["model"]["dropout"] == 0.2


def test_an_unknown_model_name_lists_the_bundled_ones_and_the_closest(tmp_path, monkeypatch, demo_models):
    """A --model that is no folder and no bundled model: one line saying so, the closest bundled name (model or
    member) when one is close, the bundled names and ``genolin models``; a path is left to the loader."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"^demos: no such run directory, nor a bundled model; did you mean 'demo'\? "
                                         r"the bundled models are demo \(genolin models"):
        resolve_models("demos")
    with pytest.raises(InputError, match=r"did you mean 'demo-small'\?"):
        resolve_models("dmeo-small")
    assert resolve_models("runs/demos") == [Path("runs/demos")]
    fasta = tmp_path / "g.fa"
    fasta.write_text(">a\nACGT\n")
    for command in ("predict", "evaluate", "explain"):
        r = run(command, "--model", "demos", "--fasta", fasta, "--out", tmp_path / "o")
        assert r.exit_code == 1 and "Traceback" not in r.output, r.output
        assert "genolin: error: demos: no such run directory, nor a bundled model; did you mean 'demo'?" in r.output
        assert "genolin models" in r.output and not (tmp_path / "o").exists()
    r = run("predict", "--model", "runs/demos", "--fasta", fasta, "--out", tmp_path / "o")
    assert r.exit_code == 1 and "runs/demos: no such run directory" in r.output


@pytest.mark.parametrize("command", ["predict", "evaluate", "explain"])
def test_the_model_help_names_the_bundled_models(command):
    from genolin.cli.options import bundled_models

    text = " ".join(CliRunner().invoke(cli, [command, "--help"]).output.split())
    assert "genolin models" in text and bundled_models() in text
    assert f"bundled model's name ({', '.join(SHIPPED)};" in text if SHIPPED else "none in this install" in text


def test_a_distilled_member_learns_from_its_teachers_as_shipped(tmp_path, monkeypatch):
    """build with DISTIL: a TEACHERS run is trained before the student, once; a member teacher teaches from its
    exported folder: built (trained, exported) first when this build builds it too, else the bundle's, and refused
    when the bundle lacks it. The student's `genolin train` has a --teacher per folder; the card records them."""
    import genolin.models.build as build

    monkeypatch.setattr(build, "TEACHERS", {"big": ("base", ("steps=9",))})
    monkeypatch.setattr(build, "MEMBERS", {"other": ("base", "cuda", ()), "student": ("tiny", "cpu", ("x=1",))})
    monkeypatch.setattr(build, "DISTIL", {"student": ("big", "other")})
    ran, exported = [], []

    def fake_run(cmd, check):
        out = Path(cmd[cmd.index("--out") + 1])
        ran.append(cmd)
        out.mkdir(parents=True, exist_ok=True)  # the build's command.json may have made it
        (out / "trainer_state.json").write_text("{}")

    def fake_export(run_dir, out, teachers=None):
        exported.append((run_dir, out))
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(build.subprocess, "run", fake_run)
    monkeypatch.setattr(build, "export", fake_export)
    pairs, work, out = [("g.fa", "g.bed")], tmp_path / "work", tmp_path / "out"
    with pytest.raises(SystemExit, match="student's teacher 'other' is not in .*out: build it too"):
        build.teacher_runs("student", pairs, work, "cuda", out, {"student": ["x=1"]})
    assert [c[c.index("--out") + 1] for c in ran] == [str(work / "teachers" / "big")]  # TEACHERS: trained first

    both = {"other": ["y=2"], "student": ["x=1"]}  # building other too: trained with its settings, exported, taught
    teachers = build.teacher_runs("student", pairs, work, "cuda", out, both)
    assert teachers == [work / "teachers" / "big", out / "other"] and len(ran) == 2
    assert "y=2" in ran[1] and "--teacher" not in ran[1] and exported == [(work / "other", out / "other")]
    assert build.teacher_runs("student", pairs, work, "cuda", out, {"student": ["x=1"]}) == teachers
    assert len(ran) == 2  # the bundle's other teaches as it is; nothing trained again
    built = set()
    build.build_member("student", pairs, work, "cuda", out, {"student": ["x=1"]}, built=built)
    cmd = ran[-1]
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "--teacher"] == [str(t) for t in teachers]
    assert cmd[cmd.index("--preset") + 1] == "tiny" and exported[-1] == (work / "student", out / "student")
    build.build_member("student", pairs, work, "cuda", out, {"student": ["x=1"]}, built=built)
    assert built == {"student"} and len(exported) == 2  # exported once per build

    # before any training: a --set of a member not built now, a member teacher neither built now nor in out
    with pytest.raises(SystemExit, match="--set other:y=3: MEMBER:KEY=VALUE for a member built now"):
        build.check_build(["student"], ["other:y=3"], out)
    with pytest.raises(SystemExit, match="student's teacher 'other' is not in .*elsewhere: build it too"):
        build.check_build(["student"], [], tmp_path / "elsewhere")
    build.check_build(["student"], ["student:x=2"], out)
    build.check_build(["other", "student"], [], tmp_path / "elsewhere")

    (out / "model.json").write_text(json.dumps({"settings": {"other": ["y=2"]}, "presets": {"other": "small"}}))
    build.write_card(out, {"student": build.MEMBERS["student"]}, {"student": ["x=1"]})
    card = json.loads((out / "model.json").read_text())
    assert card["teachers"] == {"student": {"big": {"preset": "base", "settings": ["steps=9"]},
                                            "other": {"preset": "small", "settings": ["y=2"]}}}  # as the bundle has it
    monkeypatch.setattr(build, "DISTIL", {"student": ("nobody",)})
    with pytest.raises(SystemExit, match="teacher 'nobody'"):
        build.teacher_runs("student", pairs, work, "cuda", out)
    monkeypatch.setattr(build, "DISTIL", {"student": ("other",), "other": ("student",)})
    with pytest.raises(SystemExit, match="student -> other -> student: a member cannot be its own teacher"):
        build.teacher_runs("student", pairs, work, "cuda", out, {"student": [], "other": []})


def test_a_cpu_runs_bfloat16_weights_in_bfloat16_only_where_it_multiplies_them_natively(tmp_path, monkeypatch,
                                                                                       start_run):
    """``inference_bf16`` on a CPU: bfloat16 for a track run whose weights are all stored in bfloat16 (the bundled
    student) on a CPU with bfloat16 matrix units, float32 for float32 weights (a run trained here) or without them;
    ``stored_bf16`` reads the file's header."""
    import genolin.inference.loading as loading
    from genolin.checkpoint import read_run_config, save_weights, stored_bf16

    student = resolve_model("bacteria", "cpu")
    trained = next(start_run.glob("*.safetensors"))
    assert stored_bf16(student / "best.safetensors") and not stored_bf16(trained)
    mixed = tmp_path / "mixed.safetensors"
    save_weights(mixed, {"a": torch.zeros(2, dtype=torch.bfloat16), "b": torch.zeros(2)}, {})
    assert not stored_bf16(mixed)
    cpu = torch.device("cpu")
    for native in (True, False):
        monkeypatch.setattr(loading, "cpu_bf16", lambda native=native: native)
        assert loading.inference_bf16(read_run_config(student), cpu, [student / "best.safetensors"]) is native
        assert loading.inference_bf16(read_run_config(start_run), cpu, [trained]) is False
        assert loading.inference_bf16(read_run_config(student), cpu, [student / "best.safetensors", trained]) is False


def test_an_ensemble_of_several_strides_takes_one_precision_and_says_it_once(caplog, monkeypatch, tmp_path, piece):
    """Members of two strides in bfloat16 (the bundled CPU student, stride 4, beside a stride-1 run exported as a
    member is) loaded on a CPU: one choice for both strides' members, one line."""
    import logging

    import genolin.inference.loading as loading
    from genolin.inference import load_run
    from genolin.models.build import export

    r = run("train", "--fasta", piece / "piece.fa", "--tss", piece / "piece.bed", "--set", "stride=1", "--set",
            "window_bp=1024", "--set", "batch_size=2", "--set", "d_model=32", "--set", "steps=2", "--set",
            "val_every_steps=2", "--out", tmp_path / "s1")
    assert r.exit_code == 0, r.output
    export(tmp_path / "s1", tmp_path / "s1_bf16")
    monkeypatch.setattr(logging.getLogger("genolin"), "propagate", True)  # the CLI's console handler turned it off

    for native, dtype in ((True, torch.bfloat16), (False, torch.float32)):
        monkeypatch.setattr(loading, "cpu_bf16", lambda native=native: native)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="genolin"):
            loaded = load_run(["bacteria-cpu", str(tmp_path / "s1_bf16")], "cpu")
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("precision:")]
        assert said == [f"precision: {'bfloat16 (--precision float32 for float32)' if native else 'float32'}"]
        members = [loaded.predictor.model, *(p.model for p, _ in loaded.predictor.others)]
        assert len(members) == 2 and {next(m.parameters()).dtype for m in members} == {dtype}


def test_bfloat16_on_a_cpu_stays_within_0_003_of_float32_and_the_log_says_which(tmp_path, piece):
    """The bundled CPU student over 60 kbp, both strands, in bfloat16 (forced, so that a CPU without bfloat16
    units runs it too) against float32, the reference: every 4-bp value within 0.003 (measured on the whole of E.
    coli: 0.0026; values are written to 4 decimals, so a difference reads up to 0.0001 off)."""
    values = {}
    for precision in ("float32", "bfloat16"):
        r = CliRunner().invoke(cli, ["predict", "--model", "bacteria", "--fasta", str(piece / "piece.fa"),
                                     "--device", "cpu", "--precision", precision, "--out", str(tmp_path / precision)])
        assert r.exit_code == 0 and f"precision: {precision}" in r.output, r.output
        values[precision] = np.concatenate([bedgraph_bases(tmp_path / f"{precision}.{strand}.bedGraph", 60_000)
                                            for strand in ("plus", "minus")])
    ref, fast = values["float32"], values["bfloat16"]
    assert ref.max() > 0.05
    assert np.abs(ref - fast).max() <= 0.003


def test_metrics_json_records_the_precision_of_the_pass():
    """``precision_of``: bfloat16 weights, bf16 autocast on CUDA, else float32 (a CPU ignores the run's autocast)."""
    from types import SimpleNamespace

    from genolin.evaluate import precision_of

    def predictor(dtype, device, amp):
        return SimpleNamespace(model=torch.nn.Linear(2, 2).to(dtype), device=torch.device(device), amp=amp)

    assert precision_of(predictor(torch.bfloat16, "cpu", True)) == "bfloat16"
    assert precision_of(predictor(torch.float32, "cpu", True)) == "float32"
    assert precision_of(predictor(torch.float32, "cuda", True)) == "bfloat16 autocast"
    assert precision_of(predictor(torch.float32, "cuda", False)) == "float32"



def test_export_keeps_file_names_and_names_teachers_as_models(tmp_path):
    """build.export: training paths become file names, the teachers the names a user gives --model, the floating
    weights bfloat16 (integer ones as they were)."""
    import torch

    from genolin.checkpoint import load_tensors, save_weights
    from genolin.models.build import export

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"data": {"fasta": ["/x/y/G.fa.gz"], "tss": ["/x/G.bed"],
                                                          "teacher": ["/tmp/out/base", "/tmp/out/s1"],
                                                          "csv": None}}))
    save_weights(run / "best.safetensors", {"w": torch.randn(3, 2), "n": torch.arange(3)}, {})
    export(run, tmp_path / "out", ["bacteria-base", "bacteria-s1"])
    data = json.loads((tmp_path / "out" / "config.json").read_text())["data"]
    assert data == {"fasta": ["G.fa.gz"], "tss": ["G.bed"], "teacher": ["bacteria-base", "bacteria-s1"], "csv": None}
    tensors, _ = load_tensors(tmp_path / "out" / "best.safetensors")
    assert tensors["w"].dtype == torch.bfloat16 and tensors["n"].dtype == torch.int64


def test_the_bundled_members_are_what_build_py_builds():
    """Each shipped member's card entry and config.json hold the preset settings that ``build.py`` MEMBERS gives it,
    and the CPU student names the teachers DISTIL gives it: the weights are what the one documented command
    rebuilds."""
    from genolin.models.build import DISTIL, MEMBERS

    card = json.loads((HERE / "bacteria" / "model.json").read_text())
    assert list(card["members"]) == list(MEMBERS)
    for name, (preset, device, settings) in MEMBERS.items():
        assert card["members"][name] == device and card["presets"][name] == preset
        assert card["settings"][name] == list(settings), name
        train = json.loads((HERE / "bacteria" / name / "config.json").read_text())["train"]
        for item in settings:
            key, _, value = item.partition("=")
            *path, leaf = key.split(".")
            node = train
            for part in path:
                node = node[part]
            got = node[leaf]
            if isinstance(got, bool) or not isinstance(got, int | float):
                assert str(got).lower() == value.lower(), (name, item, got)
            else:
                assert got == float(value), (name, item, got)
    teachers = json.loads((HERE / "bacteria" / "cpu" / "config.json").read_text())["data"]["teacher"]
    assert teachers == [f"bacteria-{t}" for t in DISTIL["cpu"]] and list(card["teachers"]["cpu"]) == list(DISTIL["cpu"])


def test_a_build_reuses_a_run_only_for_the_arguments_that_trained_it(tmp_path, monkeypatch):
    """build's ``trained``: a run is trained once and reused for the same command; a run of other settings (an
    earlier recipe of the member) ends the build instead of being exported as this one."""
    import genolin.models.build as build

    ran = []

    def fake_run(cmd, check):
        ran.append(cmd)
        (Path(cmd[cmd.index("--out") + 1]) / "trainer_state.json").write_text("{}")

    monkeypatch.setattr(build.subprocess, "run", fake_run)
    run_dir = tmp_path / "work" / "cpu"
    cmd = build.train_command([("g.fa", "g.bed")], "base", ["steps=18000"], "cuda", run_dir)
    assert build.trained(run_dir, cmd) == run_dir and build.trained(run_dir, cmd) == run_dir and len(ran) == 1
    old = build.train_command([("g.fa", "g.bed")], "base", ["steps=9000"], "cuda", run_dir)
    with pytest.raises(SystemExit, match=r"build: .*cpu: trained with other arguments \('--set steps=18000', now "
                                         r"'--set steps=9000'\)"):
        build.trained(run_dir, old)
    assert len(ran) == 1
