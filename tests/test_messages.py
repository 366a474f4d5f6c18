"""Messages that name what the user gave: outputs in unwritable places or on folders, spaces inside table
sequences, sequences far longer than a classifier was trained on, truncated genomes given to train/evaluate/predict."""

from __future__ import annotations

import os

import pytest
import torch
from click.testing import CliRunner
from conftest import ECOLI_BGZ, FIXTURES, GENE_STARTS, GUE_TATA

from genolin.cli import cli
from genolin.io.fasta import read_fasta


def run(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


@pytest.fixture(scope="module")
def seq_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("seqrun")
    lines = (GUE_TATA / "train.csv").read_text().splitlines()
    (d / "train.csv").write_text("\n".join(lines[:201]) + "\n")
    r = run("-q", "train", "--csv", d / "train.csv", "--out", d / "run", "--max-steps", 2, "--set", "d_model=32")
    assert r.exit_code == 0, r.output
    return d


def test_outputs_on_folders_and_read_only_places(tmp_path, seq_run):
    fasta = tmp_path / "s.fa"
    fasta.write_text(">a\nACGTACGTACGTAAAT\n")
    r = run("predict", "--model", seq_run / "run", "--fasta", fasta, "--out", tmp_path)
    assert r.exit_code == 1 and f"genolin: error: {tmp_path}: is a folder; give a file name" in r.output
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    r = run("predict", "--model", seq_run / "run", "--fasta", fasta, "--out", blocker / "p.tsv")
    assert r.exit_code == 1 and f"{blocker / 'p.tsv'}: cannot write here" in r.output and ".tmp" not in r.output
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who may write anywhere (root)")
        r = run("predict", "--model", seq_run / "run", "--fasta", fasta, "--out", locked / "p.tsv")
        assert r.exit_code == 1 and f"{locked / 'p.tsv'}: cannot write here" in r.output and ".tmp" not in r.output
    finally:
        os.chmod(locked, 0o700)


def test_space_inside_a_table_sequence_names_row_and_column(tmp_path, seq_run):
    table = tmp_path / "t.csv"
    table.write_text("sequence,label\nACGTACGTAC,1\nACGTA CGTAC,0\n")
    r = run("predict", "--model", seq_run / "run", "--csv", table, "--out", tmp_path / "p.tsv")
    assert r.exit_code == 1 and "t.csv:3: a space inside the sequence (column 'sequence', character 6)" in r.output
    assert not (tmp_path / "p.tsv").exists()


def test_a_genome_slice_given_to_a_classifier_is_warned(tmp_path, seq_run):
    """A mixer of any length (here linear attention) scores the slice and warns; the presets' synthesizer, sized by
    the longest training sequence, refuses it with one line naming the record and writes nothing."""
    (rec,) = read_fasta(ECOLI_BGZ)
    fasta = tmp_path / "long.fa"
    fasta.write_text(f">short\n{rec.seq[:60].decode()}\n>long\n{rec.seq[:50_000].decode()}\n")
    r = run("-q", "train", "--csv", seq_run / "train.csv", "--out", tmp_path / "linear", "--max-steps", 2, "--set",
            "d_model=32", "--set", "mixer=linear")
    assert r.exit_code == 0, r.output
    r = run("predict", "--model", tmp_path / "linear", "--fasta", fasta, "--out", tmp_path / "p.tsv")
    assert r.exit_code == 0
    assert "1 sequence(s) over 4 times the longest training sequence (70 bp; the longest here 50,000 bp;" in r.output
    assert len((tmp_path / "p.tsv").read_text().splitlines()) == 3  # still predicted
    r = run("predict", "--model", seq_run / "run", "--fasta", fasta, "--out", tmp_path / "s.tsv")
    assert r.exit_code == 1 and "'long' has 50,000 tokens" in r.output and "model.max_len (70)" in r.output
    assert "Traceback" not in r.output and not (tmp_path / "s.tsv").exists()


def test_truncated_bgzip_genome_in_train_evaluate_predict(tmp_path):
    cut = tmp_path / "cut.fa.bgz"
    cut.write_bytes(ECOLI_BGZ.read_bytes()[:200_000])
    bed = tmp_path / "t.bed"
    bed.write_text("NC_000913.3\t100\t101\tx\t0\t+\n")
    r = run("train", "--fasta", cut, "--tss", bed, "--out", tmp_path / "run")
    assert r.exit_code == 1 and f"{cut}: truncated bgzip file" in r.output and "internal error" not in r.output
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_a_genome_without_bases_is_an_error_not_empty_tracks(tmp_path):
    """Records with names and no sequence: no tracks that would read as "no promoters", a non-zero exit."""
    fasta = tmp_path / "empty.fa"
    fasta.write_text(">a\n>b\n\n")
    r = run("predict", "--model", FIXTURES / "v1_runs" / "track_run", "--fasta", fasta, "--device", "cpu",
            "--out", tmp_path / "p")
    assert r.exit_code == 1 and f"genolin: error: {fasta}: no record holds any bases: nothing to predict" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.fa", "empty.fa.fai"]


@pytest.mark.parametrize("command", ["predict", "evaluate", "explain", "train"])
@pytest.mark.parametrize("out", ["", "  "])
def test_an_empty_out_is_refused_naming_the_option(tmp_path, monkeypatch, command, out):
    """--out '' (or blank) is no name: a track prediction would write hidden .plus.bedGraph, .minus.bedGraph and
    .peaks.bed into the working folder. One line naming --out, a usage error's status, nothing written."""
    monkeypatch.chdir(tmp_path)
    fasta = tmp_path / "g.fa"
    fasta.write_text(">chrA\n" + "ACGT" * 1000 + "\n")
    args = {"predict": ["--model", FIXTURES / "v1_runs" / "track_run", "--fasta", fasta],
            "evaluate": ["--model", FIXTURES / "v1_runs" / "track_run", "--fasta", fasta, "--tss", fasta],
            "explain": ["--model", FIXTURES / "v1_runs" / "track_run", "--fasta", fasta, "--regions", fasta],
            "train": ["--fasta", fasta, "--tss", fasta]}[command]
    r = run(command, *args, "--device", "cpu", "--out", out)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert f"genolin: error: Invalid value for '--out': {out!r} is " in r.output and "give a name" in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.fa"]


@pytest.mark.parametrize(("exc", "said"), [
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 768.00 MiB. GPU 0 has a total capacity of 79.18 GiB "
                            "of which 448.25 MiB is free. Process 2457 has 14.13 GiB memory in use."),
     "genolin: error: the GPU ran out of memory (768.00 MiB asked for, 448.25 MiB of 79.18 GiB free): another process "
     "may hold its memory (nvidia-smi lists them), or a batch is too large; free the GPU or give a smaller batch "
     "(predict: --batch-size; train: --set batch_size=N)"),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
                  "to allocate 1125899906842624 bytes. Error code 12 (Cannot allocate memory)"),
     "genolin: error: the host ran out of memory (1048576.0 GiB asked for, ")])
def test_running_out_of_memory_past_the_estimates_is_one_line_not_an_internal_error(tmp_path, monkeypatch, exc,
                                                                                    said):
    """An allocator's error the memory guard did not foresee (another process took the GPU's memory after the check,
    as six trainings beside an evaluation once did): one line saying where memory ran out and what to do."""
    import genolin.evaluate

    def out_of_memory(*args, **kwargs):
        raise exc

    monkeypatch.setattr(genolin.evaluate, "evaluate", out_of_memory)
    r = run("evaluate", "--model", "bacteria", "--fasta", ECOLI_BGZ, "--tss", GENE_STARTS, "--device",
            "cpu", "--out", tmp_path / "e")
    assert r.exit_code == 1 and r.output.strip().splitlines()[-1].startswith(said), r.output
    assert "internal error" not in r.output and not (tmp_path / "e").exists()
