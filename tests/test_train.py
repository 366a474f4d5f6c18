"""train / evaluate / predict end to end on small slices of the bundled data, resume, augmentation, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import DATA, ECOLI_BGZ, FIXTURES, GUE_TATA, fit_watching

from genolin.cli import cli
from genolin.io.bed import Interval
from genolin.io.fasta import Genome, read_fasta
from genolin.io.labelled import load_labelled
from genolin.peaks import PeakCaller, window_max
from genolin.tasks import SequenceData, TrackData, Window
from genolin.tokenize import kmer_ids, reverse_complement

GENE_STARTS = DATA / "ecoli_k12" / "gene_starts.bed"


def run(*args):
    result = CliRunner().invoke(cli, ["-q", *map(str, args)])
    return result


@pytest.fixture(scope="module")
def gue_small(tmp_path_factory):
    """300 training and 100 dev rows of GUE prom_core_tata."""
    d = tmp_path_factory.mktemp("gue")
    for name, n in (("train", 300), ("dev", 100)):
        lines = (GUE_TATA / f"{name}.csv").read_text().splitlines()
        (d / f"{name}.csv").write_text("\n".join(lines[: n + 1]) + "\n")
    return d


@pytest.fixture(scope="module")
def genome_small(tmp_path_factory):
    """Two contigs cut from E. coli (60 kb and 9 kb, one N run) and their gene starts."""
    d = tmp_path_factory.mktemp("genome")
    (rec,) = read_fasta(ECOLI_BGZ)
    a = rec.seq[:60_000]
    b = bytearray(rec.seq[100_000:109_000])
    b[4000:4300] = b"N" * 300
    c = rec.seq[200_000:201_001]  # shorter than a window
    with open(d / "g.fa", "w") as fh:
        for name, seq in (("chrA", a), ("chrB", bytes(b)), ("chrC", c)):
            fh.write(f">{name}\n")
            fh.writelines(seq[i:i + 70].decode() + "\n" for i in range(0, len(seq), 70))
    with open(d / "tss.bed", "w") as fh:
        for line in GENE_STARTS.read_text().splitlines():
            f = line.split("\t")
            pos = int(f[1])
            for name, lo, hi in (("chrA", 0, 60_000), ("chrB", 100_000, 109_000)):
                if lo <= pos < hi:
                    fh.write(f"{name}\t{pos - lo}\t{pos - lo + 1}\t{f[3]}\t0\t{f[5]}\n")
    (d / "tiny.yaml").write_text("window_bp: 2048\nwindows_per_epoch: 24\nbatch_size: 4\nd_model: 32\n")
    return d


def test_sequence_train_evaluate_predict(tmp_path, gue_small):
    out = tmp_path / "run"
    r = run("train", "--csv", gue_small / "train.csv", "--val-csv", gue_small / "dev.csv", "--out", out,
            "--epochs", 2, "--seed", 3)
    assert r.exit_code == 0, r.output
    for name in ("config.json", "model.safetensors", "best.safetensors", "trainer_state.json", "metrics.jsonl",
                 "train.log"):
        assert (out / name).exists(), name
    step = json.loads((out / "trainer_state.json").read_text())["step"]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [f"model-{step:08d}.safetensors",
                                                                       f"optimizer-{step:08d}.safetensors"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # epoch 0: the tiny preset's model before training, its k-mer term the fitted regression, validated first
    assert [r["epoch"] for r in records] == [0, 1, 2] and all("mcc" in r["val"] for r in records)
    start = records[0]["val"]  # its score's standard error: how far training must beat it
    assert start["score_se"] == pytest.approx((1 - start["mcc"] ** 2) / np.sqrt(start["n"] - 1))
    assert "epoch 2: loss" in (out / "train.log").read_text()  # the log keeps INFO lines under -q
    config = json.loads((out / "config.json").read_text())
    assert config["task"] == "sequence" and config["classes"] == ["0", "1"] and config["train"]["seed"] == 3

    r = run("evaluate", "--model", out, "--csv", gue_small / "dev.csv", "--out", tmp_path / "ev")
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert (tmp_path / "ev" / "roc.png").exists() and "Confusion matrix" in (tmp_path / "ev" / "report.md").read_text()
    # the metrics are those of the model's predictions on the same rows (predict --csv ignores the labels)
    r = run("predict", "--model", out, "--csv", gue_small / "dev.csv", "--out", tmp_path / "dev_pred.tsv")
    assert r.exit_code == 0, r.output
    rows = [line.split("\t") for line in (tmp_path / "dev_pred.tsv").read_text().splitlines()[1:]]
    labels = np.array([int(line.split(",")[1]) for line in (gue_small / "dev.csv").read_text().splitlines()[1:]])
    pred, p1 = np.array([int(x[4]) for x in rows]), np.array([float(x[3]) for x in rows])
    from sklearn.metrics import roc_auc_score

    confusion = [[int(((labels == a) & (pred == b)).sum()) for b in (0, 1)] for a in (0, 1)]
    assert metrics["n"] == 100 and metrics["confusion_matrix"] == confusion
    assert metrics["accuracy"] == pytest.approx((pred == labels).mean())
    assert metrics["auroc"] == pytest.approx(roc_auc_score(labels, p1), abs=1e-3)  # TSV probabilities: 6 decimals

    fasta = tmp_path / "new.fa"
    fasta.write_text(">a\nACGTACGTACGTNNACGT\n>b\nTATAAAAGGCGCGCCCATATATATAGG\n")
    r = run("predict", "--model", out, "--fasta", fasta, "--out", tmp_path / "pred.tsv", "--rc-average")
    assert r.exit_code == 0, r.output
    lines = (tmp_path / "pred.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["id", "length", "prob_0", "prob_1", "pred", "has_n", "note"]
    rows = [line.split("\t") for line in lines[1:]]
    assert [(x[0], x[1], x[5]) for x in rows] == [("a", "18", "true"), ("b", "27", "false")]
    for x in rows:
        assert abs(float(x[2]) + float(x[3]) - 1) < 1e-5 and x[4] in ("0", "1")
    r = run("predict", "--model", out, "--fasta", fasta, "--out", tmp_path / "dens.tsv", "--calls-per-mbp", "10")
    assert r.exit_code == 1 and "--calls-per-mbp is for track models" in r.output and "Traceback" not in r.output


def test_track_train_predict_evaluate(tmp_path, genome_small):
    out = tmp_path / "track"
    r = run("train", "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed", "--out", out,
            "--epochs", 1, "--config", genome_small / "tiny.yaml")
    assert r.exit_code == 0, r.output
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert set(record["val"]) >= {"plus", "minus", "pooled"}

    prefix = tmp_path / "pred"
    r = run("predict", "--model", out, "--fasta", genome_small / "g.fa", "--out", prefix, "--threshold", "0.0",
            "--min-distance", "200", "--rc-average")
    assert r.exit_code == 0, r.output
    lengths = {"chrA": 60_000, "chrB": 9_000, "chrC": 1_001}
    for strand in ("plus", "minus"):
        lines = (tmp_path / f"pred.{strand}.bedGraph").read_text().splitlines()
        assert lines[0].startswith("track type=bedGraph")
        covered = {c: 0 for c in lengths}
        order = []
        for line in lines[1:]:
            contig, start, end, value = line.split("\t")
            start, end, value = int(start), int(end), float(value)
            assert start == covered[contig] and start < end <= lengths[contig] and 0 <= value <= 1
            covered[contig] = end
            if not order or order[-1] != contig:
                order.append(contig)
        assert covered == lengths and order == ["chrA", "chrB", "chrC"]  # every base, sorted, FASTA order
    # the N run of chrB (4,000-4,300) has probability 0 in its whole bins
    minus = [line.split("\t") for line in (tmp_path / "pred.minus.bedGraph").read_text().splitlines()[1:]]
    for contig, start, end, value in minus:
        if contig == "chrB" and int(start) >= 4000 and int(end) <= 4300:
            assert float(value) == 0.0
    peaks = [line.split("\t") for line in (tmp_path / "pred.peaks.bed").read_text().splitlines()[1:]]
    assert peaks, "threshold 0 must call peaks"
    by_strand: dict = {}
    for contig, start, end, name, score, strand in peaks:
        start, end = int(start), int(end)
        assert start % 4 == 0 and end - start <= 4 and end <= lengths[contig] and strand in "+-"
        assert 0 <= int(score) <= 1000 and name.startswith("promoter_")
        by_strand.setdefault((contig, strand), []).append(start)
    for starts in by_strand.values():
        assert starts == sorted(starts) and min(np.diff(starts), default=10**9) > 200
    # a call density: the 200 per Mbp most probable of the same local maxima (threshold 0 called them all)
    r = run("predict", "--model", out, "--fasta", genome_small / "g.fa", "--out", tmp_path / "dens",
            "--calls-per-mbp", "200", "--min-distance", "200", "--rc-average")
    assert r.exit_code == 0, r.output
    dense = [line.split("\t") for line in (tmp_path / "dens.peaks.bed").read_text().splitlines()[1:]]
    assert [f[3] for f in dense] == [f"promoter_{i}" for i in range(1, len(dense) + 1)]
    assert [f[0] for f in dense] == sorted((f[0] for f in dense), key=list(lengths).index)
    for contig, quota in zip(lengths, [12, 2, 0], strict=True):  # each contig's share of 200 per Mbp
        key = {(f[1], f[5]): int(f[4]) for f in peaks if f[0] == contig}
        chosen = {(f[1], f[5]) for f in dense if f[0] == contig}
        assert len(chosen) == min(quota, len(key)) and chosen <= set(key)
        if chosen:  # BED scores are 1000 p rounded: the chosen ones' are at least every other one's
            assert min(key[c] for c in chosen) >= max((v for c, v in key.items() if c not in chosen), default=0)
    r = run("predict", "--model", out, "--fasta", genome_small / "g.fa", "--out", tmp_path / "one", "--contig", "chrB",
            "--calls-per-mbp", "200", "--min-distance", "200", "--rc-average")  # a contig alone: its same share
    assert r.exit_code == 0, r.output
    alone = [line.split("\t") for line in (tmp_path / "one.peaks.bed").read_text().splitlines()[1:]]
    assert [f[:3] + f[4:] for f in alone] == [f[:3] + f[4:] for f in dense if f[0] == "chrB"] and len(alone) == 2
    r = run("predict", "--model", out, "--fasta", genome_small / "g.fa", "--out", tmp_path / "both",
            "--calls-per-mbp", "200", "--threshold", "0.5")
    assert r.exit_code == 2 and "not both" in r.output and not list(tmp_path.glob("both*"))

    r = run("evaluate", "--model", out, "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed",
            "--out", tmp_path / "ev", "--whole-genome")  # the training genome: every bin only when asked
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    bins = 60_000 // 50 + 9_000 // 50 + 21  # 50-bp evaluation bins; chrC: 1,001 bp -> 21, the last one partial
    assert metrics["plus"]["n"] == bins and metrics["pooled"]["n"] == 2 * bins and metrics["bin_bp"] == 50
    assert metrics["pooled"]["positives"] > 0 and 0 < metrics["pooled"]["positive_rate"] < 0.2
    assert list(metrics["genomes"]) == ["g"] and metrics["genomes"]["g"]["pooled"] == metrics["pooled"]
    tss = [line.split("\t") for line in (genome_small / "tss.bed").read_text().splitlines()]
    from genolin.checkpoint import load_tensors

    # calls by default: the training genomes' TSS density, TSSs more than 100 bp apart on a strand counted once
    density = json.loads((out / "config.json").read_text())["tss_per_mbp"]
    kept = {}
    for contig, start, _, _, _, strand in sorted(tss, key=lambda f: (f[0], f[5], int(f[1]))):
        last = kept.get((contig, strand))
        if last is None or int(start) - last[-1] > 100:
            kept.setdefault((contig, strand), []).append(int(start))
    assert density == pytest.approx(sum(map(len, kept.values())) / sum(lengths.values()) * 1e6)
    calls = metrics["calls"]
    assert calls["tss"] == len(tss) and calls["density"] == density and calls["threshold"] is None
    k = int(density * sum(lengths.values()) / 1e6 + 0.5)  # the contigs' shares add up to the whole's
    assert 0 < calls["calls"] <= k
    stored = float(load_tensors(out / "best.safetensors")[1]["threshold"])  # chosen on validation
    r = run("evaluate", "--model", out, "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed",
            "--out", tmp_path / "ev_t", "--whole-genome", "--threshold", stored)
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "ev_t" / "metrics.json").read_text())["calls"]["threshold"] == stored
    # a run from before the density was kept calls above its stored threshold
    config = json.loads((out / "config.json").read_text())
    del config["tss_per_mbp"]
    (out / "config.json").write_text(json.dumps(config))
    r = run("evaluate", "--model", out, "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed",
            "--out", tmp_path / "ev_old", "--whole-genome")
    assert r.exit_code == 0, r.output
    old = json.loads((tmp_path / "ev_old" / "metrics.json").read_text())["calls"]
    assert old["threshold"] == stored and old["density"] is None
    # a density beyond one call per base, kept in the run or given, is bad input (it overflowed the call counts)
    r = run("predict", "--model", out, "--fasta", genome_small / "g.fa", "--out", tmp_path / "huge", "--calls-per-mbp",
            "1e308")
    assert r.exit_code == 2 and "--calls-per-mbp" in r.output and not list(tmp_path.glob("huge*")), r.output
    (out / "config.json").write_text(json.dumps({**config, "tss_per_mbp": 1e308}))
    r = run("predict", "--model", out, "--fasta", genome_small / "g.fa", "--out", tmp_path / "huge")
    assert r.exit_code == 1 and "config.json" in r.output and "tss_per_mbp" in r.output, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output and not list(tmp_path.glob("huge*"))
    (out / "config.json").write_text(json.dumps({**config, "tss_per_mbp": 1e6}))
    r = run("evaluate", "--model", out, "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed",
            "--out", tmp_path / "ev_max", "--whole-genome")  # the largest density allowed: every local maximum
    assert r.exit_code == 0, r.output
    (out / "config.json").write_text(json.dumps(config))
    r = run("evaluate", "--model", out, "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed",
            "--out", tmp_path / "ev2", "--held-out")
    assert r.exit_code == 0, r.output
    held = json.loads((tmp_path / "ev2" / "metrics.json").read_text())
    # held out: the last 10 % of each contig (chrA from 54,000, chrB from 8,100, chrC from 900), in 50-bp bins
    assert held["plus"]["n"] == (60_000 - 54_000) // 50 + (9_000 - 8_100) // 50 + 3


@pytest.mark.parametrize("ema, mlm, drop_path", [(0.0, 0.0, 0.0), (0.8, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 0.0, 0.3)])
def test_resume_equals_uninterrupted(tmp_path, gue_small, ema, mlm, drop_path):
    common = ["--csv", gue_small / "train.csv", "--val-csv", gue_small / "dev.csv", "--epochs", 2,
              "--config", tmp_path / "c.yaml"]
    (tmp_path / "c.yaml").write_text(f"batch_size: 50\nd_model: 32\nn_layers: 1\ndropout: 0.2\nema_decay: {ema}\n"
                                     f"mlm_weight: {mlm}\ndrop_path: {drop_path}\n")
    assert run("train", *common, "--out", tmp_path / "a").exit_code == 0
    r = run("train", *common, "--out", tmp_path / "b", "--max-steps", 8)  # stops inside epoch 2
    assert r.exit_code == 0, r.output
    state = json.loads((tmp_path / "b" / "trainer_state.json").read_text())
    assert (state["epoch"], state["batch"], state["step"]) == (1, 2, 8)
    r = run("train", "--resume", tmp_path / "b", "--max-steps", 1000)
    assert r.exit_code == 0, r.output
    from genolin.checkpoint import load_tensors

    ma = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    mb = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert ma[-1]["val"] == mb[-1]["val"]
    # a stopped run validates where it stopped (step 8); when that validation became b's best (it beat b's best
    # so far, the starting model by its standard error), those weights are b's best by design and only the last
    # weights must be equal; that happens only if it scored at least every later validation, which a shares (which
    # side of that line step 8 falls on depends on the machine's rounding: it did on one 2-core VM, not on another)
    (stop,) = [m for m in mb if m.get("stopped")]
    for name in ("model.safetensors", "best.safetensors"):  # best: the averaged weights with ema_decay
        wa, _ = load_tensors(tmp_path / "a" / name)
        wb, meta_b = load_tensors(tmp_path / "b" / name)
        assert wa.keys() == wb.keys()
        if name == "best.safetensors" and meta_b["step"] == "8":
            assert stop["val"]["score"] >= max(m["val"]["score"] for m in ma if m.get("epoch") == 2 and "val" in m)
            continue
        for key in wa:
            assert np.array_equal(wa[key].numpy(), wb[key].numpy()), (name, key)


def test_weight_average_follows_its_definition(tmp_path, gue_small):
    """ema_decay: after each step avg <- avg + (1 - d_t)(w - avg), d_t = min(decay, (1 + t) / (10 + t)); validation
    and best.safetensors see the average, model.safetensors and training the trained weights."""
    import torch

    from genolin.checkpoint import load_tensors
    from genolin.config import DataSpec, TrainConfig
    from genolin.model import EncoderConfig
    from genolin.train import Trainer

    cfg = TrainConfig(batch_size=50, epochs=1, ema_decay=0.5, warmup_steps=2, lr=1e-2,
                      model=EncoderConfig(d_model=16, n_layers=1, n_heads=2, dropout=0.0))
    spec = DataSpec(task="sequence", csv=str(gue_small / "train.csv"), val_csv=str(gue_small / "dev.csv"))
    trainer = Trainer(cfg, spec, tmp_path / "run", device="cpu", progress=False)
    try:
        names = [n for n, _ in trainer.model.named_parameters()]
        expected = None
        for step, items in enumerate(trainer.epoch_batches(0)[:5]):
            trainer.micro_step(items, 0, step, sync=True)
            trainer.optimizer_step(1e-2)
            w = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
            d = min(0.5, (1 + step) / (10 + step))
            expected = w if expected is None else {n: d * expected[n] + (1 - d) * w[n] for n in names}
        trained = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        with trainer.averaged_weights():
            for n, p in trainer.model.named_parameters():
                torch.testing.assert_close(p, expected[n], rtol=1e-6, atol=1e-7)
        for n, p in trainer.model.named_parameters():  # the trained weights are back
            assert torch.equal(p, trained[n]), n
        assert not all(torch.equal(expected[n], trained[n]) for n in names)
        trainer.checkpoint(best=True, metrics={})
    finally:
        trainer.close()
    best, _ = load_tensors(tmp_path / "run" / "best.safetensors")
    last, _ = load_tensors(tmp_path / "run" / "model.safetensors")
    for n in names:
        torch.testing.assert_close(best[n], expected[n], rtol=1e-6, atol=1e-7)
        assert torch.equal(last[n], trained[n]), n


@pytest.mark.parametrize("k, stride", [(1, 1), (3, 1), (6, 2), (4, 4)])
def test_mask_tokens_chooses_spans_of_real_kmers(k, stride):
    """Spans of ceil(k / stride) tokens, only real k-mers (never padding or [UNK]); of the chosen 80 % [MASK],
    10 % random k-mers, 10 % unchanged; the tokens not chosen are untouched."""
    import math

    import torch

    from genolin.tasks.masking import mask_tokens
    from genolin.tokenize import MASK, N_SPECIAL, UNK

    g = torch.Generator().manual_seed(k * 10 + stride)
    ids = torch.randint(N_SPECIAL, N_SPECIAL + 4**k, (64, 301), generator=g)
    ids[:, 250:] = 0  # padding
    ids[::7, 100:110] = UNK
    mask = ids != 0
    corrupted, chosen = mask_tokens(ids, mask, 0.15, k=k, stride=stride, generator=g)
    real = mask & (ids >= N_SPECIAL)
    assert not (chosen & ~real).any()
    assert torch.equal(corrupted[~chosen], ids[~chosen])
    share = chosen.sum().item() / real.sum().item()
    assert 0.11 < share < 0.16, share  # prob 0.15, less the overlap of spans
    span = math.ceil(k / stride)
    if span > 1:  # every run of chosen tokens is at least a span long, except at the end (rows without [UNK])
        c = chosen[torch.arange(64) % 7 != 0, :240]
        runs = torch.diff(torch.nn.functional.pad(c.int(), (1, 1)), dim=1)
        starts, ends = (runs == 1).nonzero(), (runs == -1).nonzero()
        lengths = ends[:, 1] - starts[:, 1]
        interior = (starts[:, 1] > 0) & (ends[:, 1] < 240)
        assert lengths[interior].min().item() >= span
    n = chosen.sum().item()
    masked = (corrupted[chosen] == MASK).sum().item() / n
    kept = (corrupted[chosen] == ids[chosen]).sum().item() / n  # includes random draws of the same k-mer
    assert 0.76 < masked < 0.84 and 0.07 < kept < 0.14, (masked, kept)
    assert (corrupted[chosen] >= N_SPECIAL).sum().item() / n > 0.16  # random k-mers plus unchanged


def test_masked_token_loss_is_cross_entropy_against_the_embedding():
    import torch

    from genolin.tasks.masking import masked_token_loss
    from genolin.tokenize import N_SPECIAL

    g = torch.Generator().manual_seed(3)
    hidden = torch.randn(3, 17, 8, dtype=torch.float64, generator=g, requires_grad=True)
    table = torch.randn(N_SPECIAL + 16, 8, dtype=torch.float64, generator=g, requires_grad=True)
    ids = torch.randint(N_SPECIAL, N_SPECIAL + 16, (3, 17), generator=g)
    chosen = torch.rand(3, 17, generator=g) < 0.3
    loss = masked_token_loss(hidden, table, ids, chosen)
    terms = []
    for b, t in chosen.nonzero().tolist():
        logits = torch.stack([hidden[b, t] @ table[N_SPECIAL + j] for j in range(16)])
        terms.append(torch.logsumexp(logits, 0) - logits[ids[b, t] - N_SPECIAL])
    reference = torch.stack(terms).mean()
    torch.testing.assert_close(loss.double(), reference, rtol=1e-5, atol=1e-6)
    grads = torch.autograd.grad(loss, (hidden, table))
    ref_grads = torch.autograd.grad(reference, (hidden, table))
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-6)
    nothing = masked_token_loss(hidden, table, ids, torch.zeros_like(chosen))
    assert nothing.item() == 0.0 and nothing.requires_grad


def test_reverse_complement_window_mirrors_targets():
    genome = Genome(ECOLI_BGZ)
    tss = [Interval("NC_000913.3", 1_000 + 37, 1_000 + 38, "p", None, "+"),
           Interval("NC_000913.3", 1_000 + 500, 1_000 + 501, "m", None, "-"),
           Interval("NC_000913.3", 1_000 + 1023, 1_000 + 1024, "edge", None, "+")]
    data = TrackData(genome, tss, window_bp=1024, k=6, stride=4, tolerance_bins=1)
    w = Window("NC_000913.3", 1_000, 256)
    fwd, rc = data.targets(w), data.targets(w, rc=True)
    assert fwd[:, 0].sum() == 5 and fwd[:, 1].sum() == 3  # (edge bin: tolerance clipped)
    assert fwd[9, 0] == 1 and fwd[125, 1] == 1 and fwd[255, 0] == 1
    assert np.array_equal(rc, fwd[::-1, ::-1])
    # RC tokens: the k-mers of the reverse-complemented window, bin by bin
    seq = genome.fetch("NC_000913.3", 1_000 - 5, 1_000 + 1024 + 5)
    assert np.array_equal(data.tokens(w, rc=True), kmer_ids(reverse_complement(seq)[5:], 6, 4)[:256])
    assert np.array_equal(data.tokens(w), kmer_ids(seq[5:], 6, 4)[:256])
    # the reverse strand's TSS at 1,500 is at bin (1024 - 1 - 500) // 4 = 130 of the RC window, plus strand
    assert rc[130, 0] == 1


def test_sequence_rc_by_token_map_equals_retokenizing():
    dataset = load_labelled(GUE_TATA / "dev.csv")
    by_map = SequenceData(dataset, k=6, stride=1)
    by_seq = SequenceData(dataset, k=6, stride=1)
    by_seq.tokens = None  # force the re-tokenizing path
    for i in range(0, 600, 37):
        for shift in (0, 2):
            assert np.array_equal(by_map.tokens_of(i, rc=True, shift=shift), by_seq.tokens_of(i, rc=True, shift=shift))


def test_substitution_augmentation():
    """mutate_prob: each A/C/G/T replaced by a random base with that probability (itself a quarter of the time),
    N kept; in training batches the same seed gives the same substitutions, 0 gives the plain tokens."""
    from genolin.tokenize import substitute

    rng = np.random.default_rng(0)
    seq = bytes(rng.choice(list(b"ACGT"), 20_000).astype(np.uint8)) + b"N" * 50
    assert substitute(seq, rng, 0.0) == seq
    for p in (0.2, 1.0):
        out = substitute(seq, rng, p)
        changed = np.frombuffer(out, np.uint8) != np.frombuffer(seq, np.uint8)
        assert len(out) == len(seq) and out.endswith(b"N" * 50) and set(out[:-50]) <= set(b"ACGT")
        assert abs(changed.mean() - 0.75 * p * 20_000 / len(seq)) < 0.02
    data = SequenceData(load_labelled(GUE_TATA / "dev.csv"), k=1, stride=1)
    items = list(range(0, 300, 7))
    plain = data.collate(items, np.random.default_rng(1), max_shift=2)
    assert torch.equal(data.collate(items, np.random.default_rng(1), max_shift=2, mutate_prob=0.0).ids, plain.ids)
    a = data.collate(items, np.random.default_rng(1), max_shift=2, mutate_prob=0.1)
    b = data.collate(items, np.random.default_rng(1), max_shift=2, mutate_prob=0.1)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.mask, b.mask)
    unshifted = data.collate(items)  # no shifts: the substitutions are the only difference
    mutated = data.collate(items, np.random.default_rng(1), mutate_prob=0.1)
    differ = (mutated.ids != unshifted.ids)[unshifted.mask].float().mean().item()
    assert abs(differ - 0.075) < 0.02, differ


def test_peak_caller_matches_definition():
    rng = np.random.default_rng(0)
    for _ in range(100):
        p = np.round(rng.random(int(rng.integers(1, 200))), 1)
        d = int(rng.integers(0, 10))
        expected = [i for i, v in enumerate(p) if v >= 0.6 and (i == 0 or v > p[max(0, i - d):i].max(initial=-1))
                    and v >= p[i + 1:i + d + 1].max(initial=-1)]
        caller, got, pos = PeakCaller(0.6, d), [], 0
        while pos < len(p):
            piece = p[pos:pos + int(rng.integers(1, 30))]
            got += [b for b, _ in caller.feed(pos, piece, final=pos + len(piece) == len(p))]
            pos += len(piece)
        assert got == expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_peak_caller_matches_definition_on_long_tracks(dtype, kind):
    """Tracks of a few thousand bins in pieces of up to 700: sparse bumps (few local maxima: their spans are
    gathered) and dense noise (many: maxima of every span), distances up to 60 bins, ties included."""
    rng = np.random.default_rng(3 if kind == "sparse" else 4)
    for _ in range(6):
        n, d = int(rng.integers(200, 4000)), int(rng.integers(0, 61))
        if kind == "sparse":
            p = np.full(n, 0.05) + np.round(rng.random(n), 2) * 0.01
            for c in rng.integers(0, n, n // 150 + 1):
                p[c:c + 9] += np.hanning(11)[1:1 + len(p[c:c + 9])]
        else:
            p = np.round(rng.random(n), 1)
        p = p.astype(dtype)
        ahead = [p[i + 1:i + d + 1].max(initial=-1) for i in range(n)]
        expected = [i for i, v in enumerate(p) if v >= 0.3 and (i == 0 or v > p[max(0, i - d):i].max(initial=-1))
                    and v >= ahead[i]]
        caller, got, pos = PeakCaller(0.3, d), [], 0
        while pos < n:
            piece = p[pos:pos + int(rng.integers(1, 700))]
            got += [b for b, _ in caller.feed(pos, piece, final=pos + len(piece) == n)]
            pos += len(piece)
        assert got == expected


def test_window_max_equals_slices():
    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 64, 101):
        a = rng.random(n)
        for width in range(1, n + 1):
            assert np.array_equal(window_max(a, width), [a[j:j + width].max() for j in range(n - width + 1)])


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--preset", "huge"], "huge", 2),
        (["--config", "{mixer}"], "mixer must be one of", 1),
        (["--config", "{colour}"], "unknown setting 'colour'", 1),
    ],
)
def test_bad_train_options(tmp_path, gue_small, args, message, code):
    (tmp_path / "mixer.yaml").write_text("mixer: performer\n")
    (tmp_path / "colour.yaml").write_text("colour: red\n")
    args = [a.format(mixer=tmp_path / "mixer.yaml", colour=tmp_path / "colour.yaml") for a in args]
    r = run("train", "--csv", gue_small / "train.csv", "--out", tmp_path / "run", *args)
    assert r.exit_code == code and message in r.output
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_bed_contig_missing_and_window_too_long(tmp_path, genome_small):
    bad_bed = tmp_path / "bad.bed"
    bad_bed.write_text("chrA\t10\t11\tx\t0\t+\nchrZ\t5\t6\ty\t0\t-\n")
    r = run("train", "--fasta", genome_small / "g.fa", "--tss", bad_bed, "--out", tmp_path / "r1")
    assert r.exit_code == 1 and "bad.bed:2: contig 'chrZ' is not in the FASTA" in r.output
    (tmp_path / "big.yaml").write_text("window_bp: 100000\n")
    r = run("train", "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed", "--out", tmp_path / "r2",
            "--config", tmp_path / "big.yaml")
    assert r.exit_code == 1 and "window of 100,000 bp is longer than every contig" in r.output


def test_model_directory_problems(tmp_path, gue_small):
    out = tmp_path / "run"
    assert run("train", "--csv", gue_small / "train.csv", "--out", out, "--max-steps", 2).exit_code == 0
    target = ["--csv", gue_small / "dev.csv", "--out", tmp_path / "p.tsv"]
    r = run("predict", "--model", tmp_path / "nothing", *target)
    assert r.exit_code == 1 and "no such run directory" in r.output
    (out / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    (out / "best.safetensors").unlink(missing_ok=True)
    r = run("predict", "--model", out, *target)
    assert r.exit_code == 1 and "model.safetensors: corrupt or unreadable safetensors file" in r.output
    (out / "model.safetensors").unlink()
    r = run("predict", "--model", out, *target)
    assert r.exit_code == 1 and "model.safetensors: missing" in r.output
    (out / "config.json").write_text("{not json")
    r = run("predict", "--model", out, *target)
    assert r.exit_code == 1 and "config.json: corrupt JSON" in r.output
    assert not (tmp_path / "p.tsv").exists()
    r = run("train", "--csv", gue_small / "train.csv", "--out", tmp_path / "again", "--max-steps", 1)
    assert r.exit_code == 0
    r = run("train", "--csv", gue_small / "train.csv", "--out", tmp_path / "again", "--max-steps", 1)
    assert r.exit_code == 1 and "holds a run already" in r.output


def test_ensembles_average_their_members(tmp_path, gue_small, genome_small):
    """Several --model runs: every probability is the mean of the members' (a track member's own calibration);
    runs that do not share classes and tokens are refused naming the run; an ensemble's report needs --out."""
    from genolin.inference import load_run
    from genolin.tasks import SequenceData

    seq = [tmp_path / f"s{i}" for i in range(3)]
    for i, out in enumerate(seq):
        # member 1 without the k-mer regression's start: 3 steps rarely beat a start by its standard error, so
        # two members started from the same (deterministic) regression would both keep it
        extra = {1: ["--set", "model.kmer_logits=0"], 2: ["--set", "k=3", "--set", "model.kmer_logits=0"]}.get(i, [])
        r = run("train", "--csv", gue_small / "train.csv", "--val-csv", gue_small / "dev.csv", "--out", out,
                "--max-steps", 3, "--seed", i, *extra)
        assert r.exit_code == 0, r.output
    data_runs = [load_run(d, "cpu") for d in seq[:2]]
    ensemble = load_run(seq[:2], "cpu")
    data = ensemble.task.load_evaluation(csv_spec(gue_small / "dev.csv"))
    assert isinstance(data, SequenceData)
    singles = [r.predictor.sequence_probs(data, rc_average=True) for r in data_runs]
    both = ensemble.predictor.sequence_probs(data, rc_average=True)
    np.testing.assert_allclose(both, (singles[0] + singles[1]) / 2, rtol=1e-6, atol=1e-7)
    assert not np.allclose(singles[0], singles[1])
    logs = ensemble.predictor.sequence_log_probs(data, rc_average=True)
    np.testing.assert_allclose(np.exp(logs), both, rtol=1e-5, atol=1e-7)
    assert ensemble.threshold == pytest.approx(np.mean([r.threshold for r in data_runs]))

    r = run("evaluate", "--model", seq[0], "--model", seq[1], "--csv", gue_small / "dev.csv",
            "--out", tmp_path / "ev")
    assert r.exit_code == 0, r.output
    from sklearn.metrics import roc_auc_score

    labels = np.array([int(line.split(",")[1]) for line in (gue_small / "dev.csv").read_text().splitlines()[1:]])
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert metrics["auroc"] == pytest.approx(roc_auc_score(labels, ensemble.predictor.sequence_probs(data)[:, 1]))
    r = run("evaluate", "--model", seq[0], "--model", seq[1], "--csv", gue_small / "dev.csv")
    assert r.exit_code == 2 and "needs --out" in r.output
    r = run("predict", "--model", seq[0], "--model", seq[2], "--csv", gue_small / "dev.csv", "--out", tmp_path / "p")
    assert r.exit_code == 1 and f"{seq[2]}: cannot join an ensemble with {seq[0]}: k 3, {seq[0]} 1" in r.output
    assert not (tmp_path / "p").exists()
    r = run("predict", "--model", seq[0], "--model", tmp_path / "missing", "--csv", gue_small / "dev.csv",
            "--out", tmp_path / "p")
    assert r.exit_code == 1 and "missing" in r.output and not (tmp_path / "p").exists()

    tracks = [tmp_path / f"t{i}" for i in range(2)]
    for i, out in enumerate(tracks):
        r = run("train", "--fasta", genome_small / "g.fa", "--tss", genome_small / "tss.bed", "--out", out,
                "--max-steps", 2, "--seed", i, "--config", genome_small / "tiny.yaml",
                "--set", f"pos_weight={2 + 8 * i}")
        assert r.exit_code == 0, r.output
    singles = [load_run(d, "cpu") for d in tracks]
    ensemble = load_run(tracks, "cpu")
    genome = ensemble.task.load_evaluation(track_spec(genome_small)).data
    regions = [("chrB", 0, 9_000), ("chrC", 0, 1_001)]

    def probs(r):
        return np.concatenate([p for _, _, p in r.predictor.region_probs(genome, regions, rc_average=True)])

    one, two = (probs(r) for r in singles)
    np.testing.assert_allclose(probs(ensemble), (one + two) / 2, rtol=1e-5, atol=1e-7)
    assert not np.allclose(one, two)


def csv_spec(path):
    from genolin.config import DataSpec

    return DataSpec("sequence", csv=str(path))


def track_spec(folder):
    """The small genome and its TSS."""
    from genolin.config import DataSpec

    return DataSpec("track", fasta=[str(folder / "g.fa")], tss=[str(folder / "tss.bed")])


@pytest.mark.slow  # two processes, 10-15 s
def test_distributed_two_processes_on_cpu(tmp_path, gue_small):
    """torchrun --nproc-per-node 2 with gloo and gradient accumulation (no all-reduce on the first micro-batch of
    each pair): both ranks train in step, rank 0 writes the run."""
    out = tmp_path / "ddp"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", "29531",
           "-m", "genolin", "-q", "train", "--csv", str(gue_small / "train.csv"), "--val-csv",
           str(gue_small / "dev.csv"), "--out", str(out), "--epochs", "1", "--device", "cpu", "--batch-size", "32",
           "--set", "grad_accum=2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["epoch"] == 1 and state["step"] == 2  # 10 batches of 32 -> 5 per rank -> 4 used, 2 steps
    assert [json.loads(x)["epoch"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [0, 1]  # 0: before


def test_labelled_fasta_forms_accumulation_and_early_stopping(tmp_path, gue_small):
    """FASTA with label= headers and FASTA + labels TSV through the CLI; grad_accum 2; lr 0 stops early."""
    rows = [line.split(",") for line in (gue_small / "train.csv").read_text().splitlines()[1:]]
    with open(tmp_path / "lab.fa", "w") as fa, open(tmp_path / "plain.fa", "w") as fb, \
            open(tmp_path / "labels.tsv", "w") as tsv:
        tsv.write("id\tlabel\n")
        for i, (seq, label) in enumerate(rows):
            name = "promoter" if label == "1" else "background"
            fa.write(f">s{i} label={name}\n{seq}\n")
            fb.write(f">s{i}\n{seq}\n")
            tsv.write(f"s{i}\t{name}\n")
    (tmp_path / "c.yaml").write_text("grad_accum: 2\nbatch_size: 40\nd_model: 32\n")
    r = run("train", "--fasta", tmp_path / "lab.fa", "--val-fasta", tmp_path / "lab.fa", "--out", tmp_path / "a",
            "--epochs", 1, "--config", tmp_path / "c.yaml")
    assert r.exit_code == 0, r.output
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    assert config["classes"] == ["background", "promoter"]
    assert json.loads((tmp_path / "a" / "trainer_state.json").read_text())["step"] == 4  # 8 batches / 2
    r = run("train", "--fasta", tmp_path / "plain.fa", "--labels", tmp_path / "labels.tsv", "--val-fasta",
            tmp_path / "plain.fa", "--val-labels", tmp_path / "labels.tsv", "--out", tmp_path / "b", "--epochs", 1)
    assert r.exit_code == 0, r.output
    r = run("predict", "--model", tmp_path / "b", "--fasta", tmp_path / "plain.fa", "--out", tmp_path / "p.tsv")
    assert r.exit_code == 0 and "prob_background\tprob_promoter" in (tmp_path / "p.tsv").read_text()
    (tmp_path / "still.yaml").write_text("lr: 1.0e-30\npatience: 2\nd_model: 32\n")  # nothing can improve
    r = run("train", "--csv", gue_small / "train.csv", "--val-csv", gue_small / "dev.csv", "--out", tmp_path / "c",
            "--epochs", 10, "--config", tmp_path / "still.yaml")
    assert r.exit_code == 0, r.output
    state = json.loads((tmp_path / "c" / "trainer_state.json").read_text())
    # the fitted k-mer regression, validated before training (epoch 0), stays the best: patience 2 ends at epoch 2
    assert state["done"] and state["epoch"] == 2 and state["best_epoch"] == 0
    r = CliRunner().invoke(cli, ["predict", "--model", str(tmp_path / "c"), "--csv", str(gue_small / "dev.csv"),
                                 "--out", str(tmp_path / "c.tsv")])
    assert r.exit_code == 0 and "from before the first training step (training never beat" in r.output, r.output


def test_training_must_beat_the_starting_model_by_one_standard_error():
    """The best weights leave the starting model (epoch 0: a classifier's k-mer regression) only for a validation
    score above it by its standard error; after that any gain counts. States without a margin (tracks; a run
    resumed from before the rule) compare plainly."""
    from types import SimpleNamespace

    from genolin.selection import ModelSelection

    def improves(state, score):
        return ModelSelection.improves(SimpleNamespace(state=state), None if score is None else {"score": score})

    start = {"best": 0.47, "best_epoch": 0, "start_margin": 0.079}
    assert not improves(start, 0.533) and not improves(start, 0.545) and improves(start, 0.55)
    assert not improves(start, None)
    trained = {"best": 0.55, "best_epoch": 3, "start_margin": 0.079}
    assert improves(trained, 0.551) and not improves(trained, 0.55)
    assert improves({"best": None, "best_epoch": None, "start_margin": 0.0}, 0.0)
    assert improves({"best": 0.4, "best_epoch": 0}, 0.41)


@pytest.mark.parametrize("mixer", ["gla", "deltanet", "gated_deltanet", "linformer", "fnet", "synthesizer"])
def test_every_mixer_trains_and_predicts_from_the_cli(tmp_path, gue_small, mixer):
    """`genolin train --set mixer=NAME` with the tiny preset, then `genolin predict` (the sequences' probabilities);
    a length-limited mixer keeps the max_len training chose and refuses longer sequences with one line."""
    out = tmp_path / "run"
    r = run("train", "--csv", gue_small / "train.csv", "--val-csv", gue_small / "dev.csv", "--out", out,
            "--epochs", 1, "--set", f"mixer={mixer}", "--set", "d_model=32")
    assert r.exit_code == 0, r.output
    config = json.loads((out / "config.json").read_text())["train"]["model"]
    assert config["mixer"] == mixer
    r = run("predict", "--model", out, "--csv", gue_small / "dev.csv", "--out", tmp_path / "p.tsv")
    assert r.exit_code == 0, r.output
    rows = (tmp_path / "p.tsv").read_text().splitlines()
    assert len(rows) == 101 and all(0 <= float(x.split("\t")[2]) <= 1 for x in rows[1:])
    if mixer in ("linformer", "synthesizer"):
        assert config["max_len"] == 70  # the longest training sequence, in single-base tokens
        (tmp_path / "long.fa").write_text(">long\n" + "ACGT" * 30 + "\n")
        r = run("predict", "--model", out, "--fasta", tmp_path / "long.fa", "--out", tmp_path / "q.tsv")
        assert r.exit_code != 0 and "'long' has 120 tokens" in r.output and "model.max_len (70)" in r.output
        assert not (tmp_path / "q.tsv").exists()


def test_shift_average_is_the_mean_over_each_view(tmp_path, gue_small):
    """--shift-average N: each sequence's probabilities are the mean over itself and its copies with 1..N leading
    bases dropped (and, with --rc-average, the same of its reverse complement), each view scored alone here;
    track models refuse it naming the option."""
    from genolin.inference import load_run

    out = tmp_path / "s"
    r = run("train", "--csv", gue_small / "train.csv", "--out", out, "--max-steps", 3)
    assert r.exit_code == 0, r.output
    plain = load_run(out, "cpu")
    shifted = load_run(out, "cpu", shift_views=2)
    data = plain.task.load_evaluation(csv_spec(gue_small / "dev.csv"))
    n = 23  # an odd number of sequences, in batches of several lengths
    data.dataset.seqs, data.dataset.labels = data.dataset.seqs[:n], data.dataset.labels[:n]
    data.dataset.seqs[3] = data.dataset.seqs[3][:2]  # shorter than the shifts: its last base stays
    data.lengths, data.tokens = data.lengths[:n], None  # the path that tokenizes each view again
    data.lengths[3] = 2

    def alone(i: int, rc: bool, shift: int) -> np.ndarray:
        ids = torch.as_tensor(data.tokens_of(i, rc=rc, shift=shift)[None].astype(np.int64))
        return torch.softmax(plain.predictor.outputs(ids, torch.ones_like(ids, dtype=torch.bool)).logits.double(),
                             -1).numpy()[0]

    for rc_average in (False, True):
        strands = (False, True) if rc_average else (False,)
        expected = np.array([np.mean([alone(i, rc, s) for rc in strands for s in range(3)], axis=0)
                             for i in range(n)])
        got = shifted.predictor.sequence_probs(data, rc_average=rc_average)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.exp(shifted.predictor.sequence_log_probs(data, rc_average=rc_average)), got,
                                   rtol=1e-5, atol=1e-7)
        assert not np.allclose(got, plain.predictor.sequence_probs(data, rc_average=rc_average))
    r = run("evaluate", "--model", out, "--csv", gue_small / "dev.csv", "--shift-average", 3, "--out", tmp_path / "e")
    assert r.exit_code == 0, r.output
    scoring = json.loads((tmp_path / "e" / "metrics.json").read_text())["scoring"]  # the report says how it scored
    assert scoring == {"rc_average": False, "shift_average": 3, "threshold": 0.5, "models": 1, "precision": "float32"}
    assert "Scored over the forward strand and shifts of 0..3 leading bases; decision threshold 0.5." in (
        tmp_path / "e" / "report.md").read_text()
    r = run("predict", "--model", FIXTURES / "v1_runs" / "track_run", "--fasta", ECOLI_BGZ, "--shift-average", 1,
            "--out", tmp_path / "t")
    assert r.exit_code == 1 and "--shift-average: averages shifted inputs of sequence classifiers" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e", "s"]


def test_classifiers_trained_with_reverse_complements_average_strands_by_default(tmp_path, gue_small):
    """predict / evaluate without --rc-average/--no-rc-average or --shift-average: both strands and the training's
    shifts (3) for a sequence run trained with reverse complements (rc_prob > 0), the forward strand as given for
    one trained without."""
    for rc_prob in (0.5, 0.0):
        out = tmp_path / f"rc{rc_prob}"
        # without tiny's k-mer term: fitted on both strands, it alone scores both strands alike
        r = run("train", "--csv", gue_small / "train.csv", "--out", out, "--max-steps", 3,
                "--set", f"rc_prob={rc_prob}", "--set", "model.kmer_logits=0")
        assert r.exit_code == 0, r.output
        tables = {}
        on, off = ("--rc-average", "--shift-average", "3"), ("--no-rc-average", "--shift-average", "0")
        for flag in ((), on, off, ("--rc-average", "--shift-average", "0")):
            target = tmp_path / f"p{rc_prob}{''.join(flag)}.tsv"
            r = run("predict", "--model", out, "--csv", gue_small / "dev.csv", "--out", target, *flag)
            assert r.exit_code == 0, r.output
            tables[flag] = target.read_text()
        assert tables[()] == tables[on if rc_prob else off]
        assert len({tables[on], tables[off], tables["--rc-average", "--shift-average", "0"]}) == 3


def test_threshold_is_chosen_over_the_views_predict_uses(tmp_path, gue_small):
    """A classifier trained with reverse complements: best.safetensors carries the max-MCC threshold of its
    validation scored as predict scores by default (both strands, shifts 0..3), and metrics.jsonl that validation;
    one trained without keeps the threshold of its best epoch's forward-strand validation."""
    from genolin.inference import load_run
    from genolin.tasks.metrics import max_mcc_threshold

    for rc_prob in (0.5, 0.0):
        out = tmp_path / f"rc{rc_prob}"
        r = run("train", "--csv", gue_small / "train.csv", "--val-csv", gue_small / "dev.csv", "--out", out,
                "--max-steps", 6, "--set", f"rc_prob={rc_prob}", "--set", "model.kmer_logits=0")
        assert r.exit_code == 0, r.output
        records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        loaded = load_run(out, "cpu", shift_views=None)
        dev = loaded.task.load_evaluation(csv_spec(gue_small / "dev.csv"))
        if rc_prob:
            assert loaded.predictor.shift_views == 3 and loaded.rc_average(None)
            p = loaded.predictor.sequence_probs(dev, rc_average=True)[:, 1]
            want = max_mcc_threshold(dev.dataset.labels == 1, p)
            assert records[-1]["views"] == {"rc_average": True, "shift_average": 3} and "epoch" not in records[-1]
            assert records[-1]["val"]["best_threshold"]["value"] == pytest.approx(want["value"])
        else:
            assert loaded.predictor.shift_views == 0 and not loaded.rc_average(None)
            assert all("views" not in rec for rec in records)
            best = max((rec for rec in records if "val" in rec), key=lambda rec: rec["val"]["mcc"])
            want = best["val"]["best_threshold"]
        assert loaded.threshold == pytest.approx(want["value"], rel=1e-6)


def test_label_smoothing_is_cross_entropy_against_smoothed_targets():
    """label_smoothing e: the sequence task's loss is the mean over sequences of (1 - e) x -log p(label) + e x the
    mean over classes of -log p(class) (float64, unweighted classes; class weights as torch weighs them)."""
    from types import SimpleNamespace

    from genolin.config import TrainConfig
    from genolin.tasks.base import Batch
    from genolin.tasks.sequence import SequenceTask

    logits = torch.randn(7, 3, dtype=torch.float64)
    labels = torch.tensor([0, 2, 1, 1, 0, 2, 2])
    batch = Batch(torch.zeros(7, 5, dtype=torch.int64), torch.ones(7, 5, dtype=torch.bool), labels=labels)
    out = SimpleNamespace(logits=logits)
    for e in (0.0, 0.1, 0.35):
        task = SequenceTask(TrainConfig(label_smoothing=e))
        logp = torch.log_softmax(logits, -1)
        want = ((1 - e) * -logp[torch.arange(7), labels] + e * -logp.mean(-1)).mean()
        got = task.loss(out, batch)
        assert abs(got.item() - want.item()) <= 1e-6 * abs(want.item()), (e, got, want)



def test_sharpness_aware_gradient_is_the_gradient_at_the_moved_weights(tmp_path, gue_small):
    """sam_rho r: the step's gradient is the one at w + r g / ||g|| (g: the gradient over the step's micro-batches
    at w, same augmentation and dropout masks), and the weights are w again afterwards, exactly (float64)."""
    from genolin.config import DataSpec, TrainConfig
    from genolin.model import EncoderConfig
    from genolin.train import Trainer

    rho = 0.3
    cfg = TrainConfig(batch_size=23, grad_accum=2, sam_rho=rho, max_shift_bp=3, rc_prob=0.5,
                      model=EncoderConfig(d_model=16, n_layers=1, n_heads=2, dropout=0.2))
    spec = DataSpec(task="sequence", csv=str(gue_small / "train.csv"), val_csv=str(gue_small / "dev.csv"))
    trainer = Trainer(cfg, spec, tmp_path / "run", device="cpu", progress=False)
    try:
        model = trainer.model.double()
        group = trainer.epoch_batches(0)[:2]

        def gradient_at(weights):
            with torch.no_grad():
                for p, w in zip(model.parameters(), weights, strict=True):
                    p.copy_(w)
            trainer.optimizer.zero_grad(set_to_none=True)
            for i, items in enumerate(group):
                trainer.micro_step(items, 0, i, sync=i == 1)
            return [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.parameters()]

        w = [p.detach().clone() for p in model.parameters()]
        g = gradient_at(w)
        norm = torch.sqrt(sum((x * x).sum() for x in g))
        want = gradient_at([a + rho * x / norm for a, x in zip(w, g, strict=True)])
        gradient_at(w)  # back at w, holding g: as after the step's micro-batches
        trainer.sharpness_aware_gradient(group, 0, 0)
        got = [torch.zeros_like(p) if p.grad is None else p.grad for p in model.parameters()]
        num = torch.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(got, want, strict=True)))
        den = torch.sqrt(sum((b * b).sum() for b in want))
        assert num <= 1e-10 * den, (num, den)
        moved = sum(((a - b) ** 2).sum() for a, b in zip(got, g, strict=True))
        assert moved > 1e-6 * den ** 2  # not the gradient at w
        for p, a in zip(model.parameters(), w, strict=True):
            assert torch.equal(p, a)
    finally:
        trainer.close()


def test_sharpness_aware_training_runs_from_the_cli(tmp_path, gue_small):
    common = ["--csv", gue_small / "train.csv", "--val-csv", gue_small / "dev.csv", "--epochs", 1,
              "--set", "d_model=16", "--set", "n_layers=1", "--set", "batch_size=40"]
    for name, extra in (("plain", []), ("sam", ["--set", "sam_rho=0.05", "--set", "grad_accum=2"])):
        r = run("train", *common, *extra, "--out", tmp_path / name)
        assert r.exit_code == 0, r.output
    from genolin.checkpoint import load_tensors

    plain, _ = load_tensors(tmp_path / "plain" / "model.safetensors")
    sam, _ = load_tensors(tmp_path / "sam" / "model.safetensors")
    assert json.loads((tmp_path / "sam" / "config.json").read_text())["train"]["sam_rho"] == 0.05
    assert any(not torch.equal(plain[k], sam[k]) for k in plain)


def test_memorisation_is_the_loss_falling_while_validation_stands_still():
    from genolin.selection import MEMORISE_DROP, MEMORISE_VALIDATIONS, memorising

    assert memorising(0.5, 0.2, MEMORISE_VALIDATIONS) == pytest.approx(0.6)
    assert memorising(0.5, 0.2, MEMORISE_VALIDATIONS - 1) is None  # validation may still come back
    assert memorising(0.5, 0.5 * (1 - MEMORISE_DROP) + 0.01, 10) is None  # the loss stands still too: a plateau
    assert memorising(None, 0.2, 10) is None and memorising(0.5, None, 10) is None


@pytest.mark.parametrize("stop", [False, True])
def test_a_memorising_run_says_so_and_stops_when_asked(caplog, stop):
    """ModelSelection.end_epoch on a run whose training loss falls while validation peaked at epoch 2: from the
    third validation without improvement the metrics line and the log say so; stop_memorising ends the run there,
    before patience would."""
    import logging

    from genolin.config import make_config
    from genolin.selection import ModelSelection

    cfg = make_config("sequence", "tiny", {"patience": 10, "stop_memorising": stop})
    scores = iter([0.50, 0.60, 0.59, 0.58, 0.60, 0.55, 0.57])
    losses = [0.60, 0.50, 0.45, 0.40, 0.36, 0.30, 0.25]
    lines = []

    class Run:
        def log_metrics(self, record):
            lines.append(dict(record))

    state = {"epoch": 0, "batch": 0, "step": 0, "best": None, "best_epoch": None, "bad_epochs": 0, "done": False}
    selection = ModelSelection(cfg, None, None, None, None, Run(), state, lambda **kw: None)
    selection.evaluate = lambda: {"score": next(scores)}
    with caplog.at_level(logging.INFO, logger="genolin"):
        for epoch, loss in enumerate(losses, 1):
            selection.end_epoch({"epoch": epoch, "train_loss": loss, "tokens_per_s": 1.0, "items_per_s": 1.0,
                                 "peak_memory_gib": 0.0})
            if state["done"]:
                break
    assert state["best_epoch"] == 2 and state["loss_at_best"] == 0.50
    flagged = [r["epoch"] for r in lines if "memorising" in r]
    assert flagged[0] == 5  # third validation after epoch 2's best, the loss down 28 %
    assert lines[4]["memorising"]["loss_drop"] == pytest.approx(1 - 0.36 / 0.50)
    assert "memorising: the training loss fell 28% (0.5 -> 0.36)" in caplog.text
    assert state["done"] is stop and len(lines) == (5 if stop else 7)


def test_batches_made_ahead_come_in_order_and_stop_with_the_caller():
    """made_ahead: every item in order, made on one worker thread up to two ahead; a consumer that stops early
    (a stop rule ending the epoch) leaves no work running once the generator is closed."""
    import threading
    import time

    from genolin.train import made_ahead

    made, threads = [], set()

    def make(b):
        threads.add(threading.current_thread().name)
        time.sleep(0.01)
        made.append(b)
        return b * 10

    assert list(made_ahead(make, 3, 9)) == [30, 40, 50, 60, 70, 80]
    assert len(threads) == 1 and next(iter(threads)).startswith("genolin-batches")
    made.clear()
    stream = made_ahead(make, 0, 100)
    assert [next(stream) for _ in range(3)] == [0, 10, 20]
    stream.close()
    time.sleep(0.05)
    assert max(made) <= 5  # at most two ahead of the three taken, then nothing more


def test_a_learning_rate_held_as_a_tensor_is_checkpointed_as_its_number(tmp_path):
    """A graphed step keeps AdamW's learning rate as a device tensor (genolin.train_graph); the checkpoint's JSON
    keeps the number, and loading it gives the optimizer a plain float back."""
    import json

    import torch

    from genolin.checkpoint import load_optimizer, save_optimizer

    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([w], lr=1e-3)
    w.grad = torch.ones(3)
    opt.step()
    opt.param_groups[0]["lr"] = torch.tensor(2.5e-4)
    rest = save_optimizer(tmp_path / "opt.safetensors", opt)
    assert json.loads(json.dumps(rest))["param_groups"][0]["lr"] == pytest.approx(2.5e-4)
    fresh = torch.optim.AdamW([torch.nn.Parameter(torch.ones(3))], lr=1e-3)
    load_optimizer(tmp_path / "opt.safetensors", fresh, rest)
    assert fresh.param_groups[0]["lr"] == pytest.approx(2.5e-4) and not torch.is_tensor(fresh.param_groups[0]["lr"])


def test_an_optimizer_resumes_with_its_own_implementation(tmp_path):
    """A checkpoint of a foreach AdamW (a CPU run, or one before fused AdamW) loads into a fused one with the fused
    flag kept and its step counts as fused AdamW keeps them, and steps."""
    import torch

    from genolin.checkpoint import load_optimizer, save_optimizer

    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([w], lr=1e-3, foreach=True)
    w.grad = torch.ones(3)
    opt.step()
    rest = save_optimizer(tmp_path / "opt.safetensors", opt)
    v = torch.nn.Parameter(torch.ones(3))
    fused = torch.optim.AdamW([v], lr=1e-3, fused=True)
    load_optimizer(tmp_path / "opt.safetensors", fused, rest)
    assert fused.param_groups[0]["fused"] is True and fused.param_groups[0]["foreach"] is None
    assert fused.state[v]["step"].dtype == torch.float32 and float(fused.state[v]["step"]) == 1.0
    v.grad = torch.ones(3)
    fused.step()
    assert float(fused.state[v]["step"]) == 2.0


def test_shape_free_kernels_turn_cudnn_off_on_cuda_only_and_restore_it(monkeypatch):
    """cuDNN's convolutions and attention off inside on CUDA, the other attention backends untouched; every flag
    back afterwards, also after an exception; a no-op on a CPU, when not enabled, and with GENOLIN_CUDNN=1."""
    import torch

    from genolin.device import shape_free_kernels

    monkeypatch.delenv("GENOLIN_CUDNN", raising=False)
    cuda = torch.backends.cuda

    def flags():
        return (torch.backends.cudnn.enabled, cuda.cudnn_sdp_enabled(), cuda.flash_sdp_enabled(),
                cuda.mem_efficient_sdp_enabled(), cuda.math_sdp_enabled())

    cuda.enable_math_sdp(False)  # a user's choice the context must keep
    try:
        before = flags()
        assert before[:2] == (True, True)
        with shape_free_kernels(torch.device("cpu")):
            assert flags() == before
        with shape_free_kernels(torch.device("cuda"), enabled=False):
            assert flags() == before
        with pytest.raises(KeyError), shape_free_kernels(torch.device("cuda")):
            assert flags() == (False, False, *before[2:])
            raise KeyError
        assert flags() == before
        monkeypatch.setenv("GENOLIN_CUDNN", "1")
        with shape_free_kernels(torch.device("cuda")):
            assert flags() == before
    finally:
        cuda.enable_math_sdp(True)


@pytest.mark.parametrize("crop_min_bp", [0, 100])
def test_training_on_cropped_sequences_asks_for_shape_free_kernels(tmp_path, gue_small, monkeypatch, crop_min_bp):
    """fit trains inside ``shape_free_kernels``, enabled for cropped sequences (their widths change through the run)."""
    import contextlib

    import genolin.train
    from genolin.config import DataSpec, Setting
    from genolin.train import Trainer, configure

    asked, inside = [], []

    @contextlib.contextmanager
    def spy(device, enabled=True):
        asked.append((device.type, enabled))
        inside.append(True)
        yield
        inside.pop()

    monkeypatch.setattr(genolin.train, "shape_free_kernels", spy)
    spec = DataSpec(task="sequence", csv=str(gue_small / "train.csv"))
    settings = [Setting(k, v, "test") for k, v in (("d_model", 16), ("n_layers", 1), ("max_steps", 1),
                                                   ("crop_min_bp", crop_min_bp))]
    trainer = Trainer(configure("tiny", settings, spec), spec, tmp_path / "run", device="cpu", progress=False)
    epochs = fit_watching(trainer, monkeypatch, lambda: bool(inside))
    assert asked == [("cpu", crop_min_bp > 0)] and epochs == [True]
