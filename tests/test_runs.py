"""Run directories and settings: old runs keep loading and predicting the same, validation scores what evaluate
scores, the nested settings layer (names, aliases, renamed and derived keys), causal models from the CLI, and the
subcommands that had no test of their own (predict --csv, index, a one-file split)."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA, ECOLI_BGZ, FIXTURES, GUE_TATA

from genolin.checkpoint import read_run_config
from genolin.cli import cli
from genolin.config import make_config
from genolin.errors import InputError
from genolin.io.fasta import read_fasta

V1 = FIXTURES / "v1_runs"


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def bedgraph_values(lines: list[str], length: int) -> np.ndarray:
    """Per-base values of one contig's bedGraph lines (the header skipped)."""
    out = np.full(length, np.nan)
    for line in lines[1:]:
        _, start, end, value = line.split("\t")
        out[int(start):int(end)] = float(value)
    return out


@pytest.fixture(scope="module")
def ecoli_30k(tmp_path_factory):
    """The first 30,000 bp of the bundled E. coli genome as contig chrA (the genome of the v1 track run)."""
    d = tmp_path_factory.mktemp("g30k")
    (rec,) = read_fasta(ECOLI_BGZ)
    seq = rec.seq[:30_000].decode()
    (d / "g.fa").write_text(">chrA\n" + "".join(seq[i:i + 70] + "\n" for i in range(0, len(seq), 70)))
    with open(d / "tss.bed", "w") as fh:
        for line in (DATA / "ecoli_k12" / "gene_starts.bed").read_text().splitlines():
            f = line.split("\t")
            if int(f[1]) < 30_000:
                fh.write(f"chrA\t{f[1]}\t{int(f[1]) + 1}\t{f[3]}\t0\t{f[5]}\n")
    return d


def test_format_1_configs_migrate():
    seq = read_run_config(V1 / "seq_run")
    assert seq.task == "sequence" and seq.task_state["classes"] == ["0", "1"]
    assert seq.train.k == 4 and seq.train.max_shift_bp == 3 and seq.train.model.d_model == 16
    assert seq.train.model.chunk_tokens == 4096 and seq.train.model.vocab_size == 5 + 4**4
    track = read_run_config(V1 / "track_run")
    assert track.train.window_bp == 2048 and track.train.tolerance_bins == 1
    assert track.train.model.mixer == "hybrid" and track.train.model.local_window_tokens == 32
    assert track.train.model.track_channels == 2 and track.task_state["pos_weight"] > 1


def test_format_1_runs_predict_as_they_did(tmp_path, ecoli_30k):
    """Predictions of the v1 runs with today's code equal what the code that wrote them predicted (with the
    options that code had: test-time shift views, now a classifier's default, turned off)."""
    r = run("predict", "--model", V1 / "seq_run", "--fasta", V1 / "seqs.fa", "--out", tmp_path / "p.tsv",
            "--rc-average", "--shift-average", "0")
    assert r.exit_code == 0, r.output
    got = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()]
    want = [line.split("\t") for line in (V1 / "seq_pred.tsv").read_text().splitlines()]
    got = [g[:-1] for g in got]  # the 'note' column came later (runs of format 1 flag nothing short: no minimum kept)
    assert got[0] == want[0] and len(got) == len(want) == 3
    for g, w in zip(got[1:], want[1:], strict=True):
        assert g[:2] == w[:2] and g[4:] == w[4:]
        assert np.allclose([float(x) for x in g[2:4]], [float(x) for x in w[2:4]], atol=2e-6)

    r = run("predict", "--model", V1 / "track_run", "--fasta", ecoli_30k / "g.fa", "--out", tmp_path / "track_pred",
            "--rc-average", "--threshold", "0.0")
    assert r.exit_code == 0, r.output
    for strand in ("plus", "minus"):
        got = bedgraph_values((tmp_path / f"track_pred.{strand}.bedGraph").read_text().splitlines(), 30_000)
        with gzip.open(V1 / f"track_pred.{strand}.bedGraph.gz", "rt") as fh:
            want = bedgraph_values(fh.read().splitlines(), 30_000)
        assert not np.isnan(got).any() and np.abs(got - want).max() <= 1.5e-4  # 4-decimal rounding of both


def test_validation_equals_evaluate_on_the_same_data(tmp_path, ecoli_30k):
    """The validation AUPRC that picks the best checkpoint is the AUPRC evaluate reports on the same bins."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("window_bp: 2048\nwindows_per_epoch: 16\nbatch_size: 4\nval_fraction: 0.3\nmodel:\n  d_model: 32\n")
    out = tmp_path / "held"
    r = run("train", "--fasta", ecoli_30k / "g.fa", "--tss", ecoli_30k / "tss.bed", "--out", out, "--epochs", 2,
            "--config", cfg)
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    best = max(records, key=lambda rec: rec["val"]["score"])
    r = run("evaluate", "--model", out, "--fasta", ecoli_30k / "g.fa", "--tss", ecoli_30k / "tss.bed", "--held-out",
            "--out", tmp_path / "ev")
    assert r.exit_code == 0, r.output
    ev = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert ev["pooled"]["n"] == best["val"]["pooled"]["n"] == 2 * (30_000 - 21_000) // 50
    for part in ("plus", "minus", "pooled"):
        assert abs(ev[part]["auprc"] - best["val"][part]["auprc"]) < 1e-4, part

    # validation on another genome (--val-fasta) is evaluate on that whole genome
    val = tmp_path / "val.fa"
    (rec,) = read_fasta(ECOLI_BGZ)
    val.write_text(">chrV\n" + rec.seq[500_000:506_001].decode() + "\n")
    val_tss = tmp_path / "val.bed"
    val_tss.write_text("".join(f"chrV\t{p - 500_000}\t{p - 500_000 + 1}\tg\t0\t{s}\n" for p, s in
                               [(int(f[1]), f[5]) for f in (line.split("\t") for line in
                                (DATA / "ecoli_k12" / "gene_starts.bed").read_text().splitlines())]
                               if 500_000 <= p < 506_001))
    out = tmp_path / "other"
    r = run("train", "--fasta", ecoli_30k / "g.fa", "--tss", ecoli_30k / "tss.bed", "--val-fasta", val,
            "--val-tss", val_tss, "--out", out, "--epochs", 1, "--config", cfg)
    assert r.exit_code == 0, r.output
    record = json.loads((out / "metrics.jsonl").read_text())
    r = run("evaluate", "--model", out, "--fasta", val, "--tss", val_tss, "--out", tmp_path / "ev2")
    assert r.exit_code == 0, r.output
    ev = json.loads((tmp_path / "ev2" / "metrics.json").read_text())
    assert ev["pooled"]["n"] == record["val"]["pooled"]["n"] == 2 * (6_001 + 49) // 50
    assert abs(ev["pooled"]["auprc"] - record["val"]["pooled"]["auprc"]) < 1e-4


def test_settings_names_aliases_and_refusals(caplog):
    nested = make_config("track", "tiny", {"model": {"d_model": 32, "mixer": "hybrid"}, "window_bp": 1024})
    dotted = make_config("track", "tiny", {"model.d_model": 32, "model.mixer": "hybrid", "window_bp": 1024})
    alias = make_config("track", "tiny", {"d_model": 32, "mixer": "hybrid", "window_bp": 1024})
    assert nested == dotted == alias and nested.model.d_model == 32 and nested.model.n_layers == 2  # tiny's
    old = make_config("track", "tiny", {"window": 1024, "local_window": 64, "tolerance": 3})
    assert (old.window_bp, old.model.local_window_tokens, old.tolerance_bins) == (1024, 64, 3)
    assert "setting 'window' is now called 'window_bp'" in caplog.text
    assert make_config("sequence", "base").model.dropout == 0.1 and make_config("sequence", "base").k == 1 \
        and make_config("sequence", "base").model.stem_kernel == 15
    for bad, message in [({"model.vocab_size": 9}, "derives it from k"), ({"n_classes": 3}, "from the task"),
                         ({"model.seed": 1}, "derives it from seed"), ({"colour": 1}, "unknown setting 'colour'"),
                         ({"model.colour": 1}, "unknown setting 'model.colour'"),
                         ({"model": 5}, "expected a mapping"), ({"mixer": "performer"}, "mixer must be one of"),
                         ({"window_bp": 1001, "stride": 4}, "must be a multiple of stride")]:
        with pytest.raises(InputError, match=message):
            make_config("track", "tiny", bad, source="x.yaml")


def test_causal_model_from_the_command_line(tmp_path, ecoli_30k):
    out = tmp_path / "causal"
    r = run("train", "--fasta", ecoli_30k / "g.fa", "--tss", ecoli_30k / "tss.bed", "--out", out, "--epochs", 1,
            "--set", "model.causal=true", "--set", "window_bp=2048", "--set", "windows_per_epoch=8",
            "--set", "d_model=32", "--set", "batch_size=4")
    assert r.exit_code == 0, r.output
    assert json.loads((out / "config.json").read_text())["train"]["model"]["causal"] is True
    r = run("predict", "--model", out, "--fasta", ecoli_30k / "g.fa", "--out", tmp_path / "p")
    assert r.exit_code == 0, r.output
    values = bedgraph_values((tmp_path / "p.plus.bedGraph").read_text().splitlines(), 30_000)
    assert not np.isnan(values).any() and 0 < values.max() <= 1


def test_predict_csv_index_and_one_file_split(tmp_path):
    # a one-file stratified split, then a model, then predict on a CSV (labels not needed, order kept)
    r = run("split", "--input", GUE_TATA / "dev.csv", "--out-dir", tmp_path / "parts", "--dev-fraction", "0.2",
            "--test-fraction", "0.3", "--seed", 5)
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "parts" / "summary.json").read_text())
    total = {c: n for c, n in zip(*np.unique([line.split(",")[1] for line in
                                                (GUE_TATA / "dev.csv").read_text().splitlines()[1:]],
                                               return_counts=True), strict=True)}
    for c, n in total.items():  # every class cut by the fractions, rounded per class
        assert summary["test"]["classes"][c] == round(n * 0.3) and summary["dev"]["classes"][c] == round(n * 0.2)
        assert sum(summary[p]["classes"][c] for p in ("train", "dev", "test")) == n
    train = (tmp_path / "parts" / "train.tsv").read_text().splitlines()
    assert train[0] == "id\tsequence\tlabel" and len(train) - 1 == summary["train"]["n"]
    r = run("train", "--csv", tmp_path / "parts" / "train.tsv", "--val-csv", tmp_path / "parts" / "dev.tsv",
            "--out", tmp_path / "m", "--epochs", 1, "--set", "d_model=32")
    assert r.exit_code == 0, r.output
    rows = (tmp_path / "parts" / "test.tsv").read_text().splitlines()
    unlabelled = tmp_path / "new.csv"
    unlabelled.write_text("name,sequence\n" + "".join(f"q{i},{row.split(chr(9))[1]}\n" for i, row in
                                                       enumerate(rows[1:6])))
    r = run("predict", "--model", tmp_path / "m", "--csv", unlabelled, "--out", tmp_path / "p.tsv")
    assert r.exit_code == 0, r.output
    out = [line.split("\t") for line in (tmp_path / "p.tsv").read_text().splitlines()]
    assert out[0] == ["id", "length", "prob_0", "prob_1", "pred", "has_n", "note"]
    assert [o[0] for o in out[1:]] == [f"q{i}" for i in range(5)]
    from genolin.checkpoint import load_tensors

    stored = float(load_tensors(tmp_path / "m" / "best.safetensors")[1]["threshold"])  # max MCC on dev
    assert all(abs(float(o[2]) + float(o[3]) - 1) < 1e-5 and o[4] == "01"[float(o[3]) >= stored] for o in out[1:])

    # genolin index on a gzip copy: the sizes file, and the .fai / .gzi beside a bgzip input
    genome = tmp_path / "g.fa.bgz"
    shutil.copy(ECOLI_BGZ, genome)
    r = run("index", "--fasta", genome, "--sizes", tmp_path / "g.sizes")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "g.sizes").read_text() == "NC_000913.3\t4641652\n"
    assert (tmp_path / "g.fa.bgz.fai").exists() and (tmp_path / "g.fa.bgz.gzi").exists()
    bad = tmp_path / "bad.fa"
    bad.write_text(">a\nACGT\n>a\nACGT\n")
    r = run("index", "--fasta", bad, "--sizes", tmp_path / "bad.sizes")
    assert r.exit_code == 1 and "duplicate" in r.output and not (tmp_path / "bad.sizes").exists()


def test_max_f1_threshold_against_a_scan():
    from genolin.tasks.metrics import max_f1_threshold

    rng = np.random.default_rng(3)
    y = rng.random(500) < 0.1
    p = np.clip(y * 0.3 + rng.random(500) * 0.7, 0, 1)
    best = max_f1_threshold(y, p)
    f1 = {t: 2 * (y & (p >= t)).sum() / ((p >= t).sum() + y.sum()) for t in np.unique(p)}
    t = max(f1, key=f1.get)
    assert best["value"] == pytest.approx(t) and best["f1"] == pytest.approx(f1[t])
    assert max_f1_threshold(np.zeros(5), np.arange(5) / 5) is None


def test_max_mcc_threshold_against_a_scan():
    """The sequence classifiers' threshold: every distinct probability tried (ties included) by brute force."""
    from sklearn.metrics import matthews_corrcoef

    from genolin.tasks.metrics import max_mcc_threshold

    rng = np.random.default_rng(4)
    y = rng.random(301) < 0.4
    p = np.round(np.clip(y * 0.25 + rng.random(301) * 0.75, 0, 1), 2)  # rounded: many ties
    best = max_mcc_threshold(y, p)
    mcc = {t: matthews_corrcoef(y, p >= t) for t in np.unique(p)}
    t = max(mcc, key=mcc.get)
    assert best["mcc"] == pytest.approx(mcc[t]) and mcc[best["value"]] == pytest.approx(mcc[t])
    assert best["recall"] == pytest.approx((y & (p >= best["value"])).sum() / y.sum())
    assert max_mcc_threshold(np.ones(4), np.arange(4) / 4) is None


def test_runs_store_their_threshold_and_call_density_and_predict_uses_them(tmp_path, ecoli_30k):
    """The best weights carry the max-F1 threshold of their validation, config.json the training genomes' TSS
    density; predict and evaluate call at that density by default, say so, and still take --threshold (which the
    BED's track line names)."""
    from genolin.checkpoint import load_tensors

    out = tmp_path / "run"
    r = run("train", "--fasta", ecoli_30k / "g.fa", "--tss", ecoli_30k / "tss.bed", "--out", out, "--set",
            "window_bp=2048", "--set", "d_model=32", "--set", "steps=4", "--set", "val_every_steps=2", "--set",
            "batch_size=4", "--set", "val_fraction=0.3")
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    best = max(records, key=lambda rec: rec["val"]["score"])
    meta = load_tensors(out / "best.safetensors")[1]
    assert float(meta["threshold"]) == best["val"]["best_threshold"]["value"]
    stored = float(meta["threshold"])
    density = json.loads((out / "config.json").read_text())["tss_per_mbp"]
    result = CliRunner().invoke(cli, ["predict", "--model", str(out), "--fasta", str(ecoli_30k / "g.fa"), "--out",
                                      str(tmp_path / "p")])
    assert result.exit_code == 0 and f"calls: the {density:.4g} per Mbp most probable" in result.output
    assert "best.safetensors, the best validated weights" in result.output
    assert f"the {density:.4g} per Mbp" in (tmp_path / "p.peaks.bed").read_text().splitlines()[0]
    result = CliRunner().invoke(cli, ["predict", "--model", str(out), "--fasta", str(ecoli_30k / "g.fa"), "--out",
                                      str(tmp_path / "t"), "--threshold", str(stored)])
    assert result.exit_code == 0 and f"decision threshold {stored:.4g} (given)" in result.output
    assert f"threshold {stored}" in (tmp_path / "t.peaks.bed").read_text().splitlines()[0]
    r = run("evaluate", "--model", out, "--fasta", ecoli_30k / "g.fa", "--tss", ecoli_30k / "tss.bed",
            "--threshold", "0.25", "--out", tmp_path / "ev")
    assert r.exit_code == 0 and json.loads((tmp_path / "ev" / "metrics.json").read_text())["calls"]["threshold"] == 0.25


@pytest.mark.parametrize("optimizer", [{}, {"param_groups": []}, {"param_groups": [1]},
                                       {"param_groups": [{}], "scalars": []}])
def test_a_trainer_state_with_a_damaged_optimizer_part_is_named(tmp_path, optimizer):
    """--resume on a trainer_state.json whose optimizer part is not save_optimizer's: one line naming the file."""
    from genolin.checkpoint import _check_state
    from genolin.errors import InputError

    state = {"epoch": 1, "batch": 0, "step": 4, "best": 0.5, "best_epoch": 1, "bad_epochs": 0, "done": False,
             "optimizer": {"param_groups": [{"lr": 1e-3}], "scalars": {}}}
    _check_state(tmp_path / "trainer_state.json", state)  # as written
    with pytest.raises(InputError, match="trainer_state.json.*'optimizer'"):
        _check_state(tmp_path / "trainer_state.json", {**state, "optimizer": optimizer})


def test_an_optimizer_file_with_an_entry_of_another_name_is_named(tmp_path):
    import torch
    from safetensors.torch import save_file

    from genolin.checkpoint import load_optimizer
    from genolin.errors import InputError

    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    save_file({"exp_avg": torch.zeros(2)}, str(tmp_path / "optimizer.safetensors"))
    with pytest.raises(InputError, match="optimizer.safetensors.*'exp_avg'"):
        load_optimizer(tmp_path / "optimizer.safetensors", optimizer,
                       {"param_groups": optimizer.state_dict()["param_groups"]})
