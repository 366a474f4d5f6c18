"""What a new user meets: a finished run resumed does nothing, a finished run leaves no lock, a validation set of one
class or a lone outlier row stops before training, FASTQ given to a classifier is named, missing validated
weights and a missing validation set are warned about, and Ctrl-C says what was saved."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import DATA

from genolin.cli import cli

TATA = DATA / "gue" / "prom_core_tata"


def run(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


@pytest.fixture(scope="module")
def small_sets(tmp_path_factory):
    """60 training and 20 validation rows of GUE prom_core_tata, and a validation set of one class."""
    d = tmp_path_factory.mktemp("sets")
    train = TATA.joinpath("train.csv").read_text().splitlines()
    dev = TATA.joinpath("dev.csv").read_text().splitlines()
    (d / "train.csv").write_text("\n".join(train[:61]) + "\n")
    (d / "dev.csv").write_text("\n".join(dev[:21]) + "\n")
    header, rows = dev[0], dev[1:]
    one = [r for r in rows if r.endswith(",1")][:10]
    (d / "dev_one_class.csv").write_text("\n".join([header, *one]) + "\n")
    return d


@pytest.fixture(scope="module")
def finished(tmp_path_factory, small_sets):
    out = tmp_path_factory.mktemp("runs") / "run"
    r = run("-q", "train", "--csv", small_sets / "train.csv", "--val-csv", small_sets / "dev.csv", "--max-steps", 3,
            "--set", "epochs=1", "--out", out)
    assert r.exit_code == 0, r.output
    return out


def test_a_finished_run_resumed_trains_nothing_and_leaves_no_lock(finished):
    state = json.loads((finished / "trainer_state.json").read_text())
    assert not (finished / ".lock").exists()
    for _ in range(2):
        r = run("train", "--resume", finished, "--max-steps", 3)
        assert r.exit_code == 0, r.output
        assert "the run is finished" in r.output
        assert json.loads((finished / "trainer_state.json").read_text())["step"] == state["step"]


def test_a_validation_set_of_one_class_stops_before_training(tmp_path, small_sets):
    r = run("-q", "train", "--csv", small_sets / "train.csv", "--val-csv", small_sets / "dev_one_class.csv",
            "--out", tmp_path / "run")
    assert r.exit_code == 1 and "only one class ('1') in the validation set" in r.output
    assert len(r.output.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_no_validation_set_is_warned_about(tmp_path, small_sets):
    r = run("train", "--csv", small_sets / "train.csv", "--max-steps", 1, "--out", tmp_path / "run")
    assert r.exit_code == 0, r.output
    assert "warning: no validation set" in r.output and "nan" not in r.output and "None" not in r.output
    assert "no validation: the last weights kept" in r.output


def test_missing_validated_weights_are_warned_about(tmp_path, finished, small_sets):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(finished, copy)
    (copy / "best.safetensors").unlink()
    r = run("predict", "--model", copy, "--csv", small_sets / "dev.csv", "--out", tmp_path / "p.tsv")
    assert r.exit_code == 0, r.output
    assert "warning:" in r.output and "no best.safetensors" in r.output and "never validated" in r.output


def test_fastq_given_to_a_classifier_is_named(tmp_path, finished):
    fq = tmp_path / "reads.fa"
    fq.write_text("@r0\nACGTACGT\n+\nIIIIIIII\n")
    r = run("-q", "predict", "--model", finished, "--fasta", fq, "--out", tmp_path / "p.tsv")
    assert r.exit_code == 1 and "looks like FASTQ" in r.output and str(fq) in r.output
    assert not (tmp_path / "p.tsv").exists()


def test_a_lone_long_row_stops_and_is_named(tmp_path, small_sets):
    rows = small_sets.joinpath("train.csv").read_text().splitlines()
    rows.insert(5, "A" * 300_000 + ",1")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    r = run("-q", "train", "--csv", tmp_path / "t.csv", "--out", tmp_path / "run")
    assert r.exit_code == 1 and "line 6: 300,000 bp" in r.output and "outlier" in r.output
    assert not (tmp_path / "run").exists()


def test_ctrl_c_says_what_was_saved(tmp_path, small_sets, finished, monkeypatch):
    import genolin.train

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(genolin.train, "train", interrupt)
    r = run("-q", "train", "--csv", small_sets / "train.csv", "--out", tmp_path / "run")
    assert r.exit_code == 130 and "interrupted before the first checkpoint" in r.output and "Aborted" not in r.output
    r = run("-q", "train", "--resume", finished)
    step = json.loads((finished / "trainer_state.json").read_text())["step"]
    assert r.exit_code == 130 and f"checkpoint of step {step}" in r.output and f"--resume {finished}" in r.output


def test_inputs_unlike_training_are_flagged_and_warned(tmp_path, finished):
    fa = tmp_path / "odd.fa"
    fa.write_text(">tiny\nACGTACGTAC\n>nrich\n" + "N" * 42 + "ACGT" * 7 + "\n>plain\n" + "ACGT" * 17 + "AC\n")
    r = run("predict", "--model", finished, "--fasta", fa, "--out", tmp_path / "p.tsv")
    assert r.exit_code == 0, r.output
    rows = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()]
    assert rows[0][-1] == "note" and [row[-1] for row in rows[1:]] == ["short", "n_rich", "-"]
    assert "warning" in r.output and "'tiny'" in r.output and "'nrich'" in r.output


def test_out_dash_is_standard_output_for_a_tsv_and_links_are_written_through(tmp_path, finished, small_sets):
    r = CliRunner().invoke(cli, ["-q", "predict", "--model", str(finished), "--csv", str(small_sets / "dev.csv"),
                                 "--out", "-"])
    assert r.exit_code == 0 and r.output.splitlines()[0].startswith("id\tlength\tprob_0") and len(
        r.output.splitlines()) == 21
    assert not (tmp_path / "-").exists()
    target = tmp_path / "target.tsv"
    target.write_text("old\n")
    (tmp_path / "link.tsv").symlink_to(target)
    r = run("-q", "predict", "--model", finished, "--csv", small_sets / "dev.csv", "--out", tmp_path / "link.tsv")
    assert r.exit_code == 0 and (tmp_path / "link.tsv").is_symlink() and target.read_text().startswith("id\t")


@pytest.mark.parametrize("kind", ["device", "pipe", "link to a device"])
def test_a_device_file_or_pipe_is_never_replaced(tmp_path, finished, small_sets, kind):
    """/dev/null, a named pipe, and a link to /dev/null (as /dev/stdout is a link to a terminal): refused, left as
    they were."""
    import os
    import stat

    out = {"device": "/dev/null", "pipe": tmp_path / "fifo", "link to a device": tmp_path / "null.tsv"}[kind]
    if kind == "pipe":
        os.mkfifo(out)
    if kind == "link to a device":
        out.symlink_to("/dev/null")
    r = run("-q", "predict", "--model", finished, "--csv", small_sets / "dev.csv", "--out", out)
    assert r.exit_code == 1 and "not a regular file" in r.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and (kind != "pipe" or stat.S_ISFIFO(os.stat(out).st_mode))


def test_every_writer_refuses_dash_where_the_output_is_not_one_stream(tmp_path):
    from genolin.errors import InputError
    from genolin.io.atomic import atomic_open, atomic_path, write_json

    for writer in (lambda p: atomic_open(p).__enter__(), lambda p: atomic_path(p).__enter__(),
                   lambda p: write_json(p, {})):
        with pytest.raises(InputError, match="standard output"):
            writer("-")
        with pytest.raises(InputError, match="not a regular file"):
            writer("/dev/null")
    target = tmp_path / "t.json"
    (tmp_path / "l.json").symlink_to(target)
    write_json(tmp_path / "l.json", {"a": 1})
    assert (tmp_path / "l.json").is_symlink() and target.read_text().strip().startswith("{")


def test_each_data_set_keeps_its_own_report(finished, small_sets):
    for name in ("dev", "train"):
        r = run("-q", "evaluate", "--model", finished, "--csv", small_sets / f"{name}.csv")
        assert r.exit_code == 0, r.output
    assert (finished / "evaluation" / "dev" / "metrics.json").exists()
    assert (finished / "evaluation" / "train" / "metrics.json").exists()
