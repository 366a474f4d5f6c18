"""Test-time adaptation (``genolin.adapt``, ``--adapt-steps``): the masked-token loss of the target genome falls and
the weights move; TSS labels never reach it; a seed repeats itself and 0 steps changes nothing; predict and evaluate
run it from the command line; a sequence classifier, a genome too short and a batch too big are one-line errors.
The model: the tiny v1 track run of tests/data (k 6, stride 4, 2,048 bp windows, d_model 16)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import DATA, ECOLI_BGZ, FIXTURES

from genolin.adapt import AdaptOptions, adapt
from genolin.cli import cli
from genolin.config import DataSpec
from genolin.errors import InputError
from genolin.evaluate import evaluate
from genolin.inference import load_run
from genolin.io.fasta import read_fasta
from genolin.tasks import TrackData, pad_tokens
from genolin.tasks.masking import mask_tokens, masked_token_loss

V1 = FIXTURES / "v1_runs"
TRACK_RUN, SEQ_RUN = V1 / "track_run", V1 / "seq_run"


def run_cli(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    """20 kbp of E. coli from 1 Mbp on (not the 30 kbp the run trained on) as contig chrT, with its gene starts
    as TSSs (tss.bed) and the same starts moved by 1 kbp (moved.bed)."""
    d = tmp_path_factory.mktemp("adapt")
    (rec,) = read_fasta(ECOLI_BGZ)
    lo, n = 1_000_000, 20_000
    (d / "g.fa").write_text(">chrT\n" + rec.seq[lo:lo + n].decode() + "\n")
    starts = [(int(f[1]) - lo, f[5]) for f in (line.split("\t") for line in
              (DATA / "ecoli_k12" / "gene_starts.bed").read_text().splitlines()) if lo <= int(f[1]) < lo + n]
    assert len(starts) > 5
    (d / "tss.bed").write_text("".join(f"chrT\t{p}\t{p + 1}\tg\t0\t{s}\n" for p, s in starts))
    (d / "moved.bed").write_text("".join(f"chrT\t{(p + 1000) % n}\t{(p + 1000) % n + 1}\tg\t0\t{'+-'[s == '+']}\n"
                                         for p, s in starts))
    return d


def held_mlm_loss(run, fasta) -> float:
    """The masked-token loss of the run's model, in eval mode, on fixed batches of the genome (fixed windows,
    forward strand, fixed masking)."""
    cfg = run.task.cfg
    data = TrackData.load([str(fasta)], [], cfg)
    windows = data.random_windows(data.whole(), np.random.default_rng(123), 16)
    ids, mask = pad_tokens([data.tokens(w) for w in windows])
    corrupted, chosen = mask_tokens(ids, mask, cfg.mlm_prob, k=cfg.k, stride=cfg.stride,
                                    generator=torch.Generator().manual_seed(5))
    model = run.model
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = masked_token_loss(model(corrupted, mask).hidden, model.embed.weight, ids, chosen).item()
    model.train(was_training)
    return loss


def weights(run) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in run.model.state_dict().items()}


def test_adaptation_lowers_the_masked_token_loss_and_moves_only_the_encoder(genome):
    run = load_run(TRACK_RUN, "cpu")
    before, start = held_mlm_loss(run, genome / "g.fa"), weights(run)
    rng_state = torch.random.get_rng_state()
    done = adapt(run, [str(genome / "g.fa")], 20, lr=3e-3, batch_size=1, seed=0)
    after, end = held_mlm_loss(run, genome / "g.fa"), weights(run)
    assert after < before - 0.5, (before, after)  # 13.9 -> 12.3 when this was written
    assert len(done.losses) == 1 and len(done.losses[0]) == 20 and done.loss_end() < done.loss_start()
    assert not run.model.training  # eval mode for scoring
    moved = [k for k in start if not torch.equal(start[k], end[k])]
    assert "embed.weight" in moved and any(k.startswith("blocks.") for k in moved)
    assert not any(k.startswith("track_head.") for k in moved)  # the masked-token loss does not read the head
    assert torch.equal(torch.random.get_rng_state(), rng_state)  # the caller's RNG as it was
    assert all(p.dtype == torch.float32 for p in run.model.parameters())  # on a CPU load_run keeps float32


def test_a_seed_repeats_itself(genome):
    got = []
    for seed in (0, 0, 1):
        run = load_run(TRACK_RUN, "cpu")
        adapt(run, [str(genome / "g.fa")], 3, batch_size=1, seed=seed)
        got.append(weights(run))
    assert all(torch.equal(got[0][k], got[1][k]) for k in got[0])
    assert not all(torch.equal(got[0][k], got[2][k]) for k in got[0])


def test_tss_labels_never_reach_adaptation(tmp_path, genome, monkeypatch):
    """evaluate --adapt-steps: the same adapted weights whether the BED holds the gene starts or moved ones, and
    no TSS is read while adapting (TrackData.targets, the per-window labels, raises throughout)."""
    import genolin.adapt

    def no_labels(*args, **kwargs):
        raise AssertionError("a TSS label was read")

    monkeypatch.setattr(TrackData, "targets", no_labels)
    seen = []
    real_load = genolin.adapt.TrackData.load

    def load(fastas, tss_paths, *args, **kwargs):
        seen.append(list(tss_paths))
        return real_load(fastas, tss_paths, *args, **kwargs)

    monkeypatch.setattr(genolin.adapt.TrackData, "load", staticmethod(load))
    adapted, metrics = [], []
    for bed in ("tss.bed", "moved.bed"):
        run = load_run(TRACK_RUN, "cpu")
        inputs = DataSpec("track", fasta=[str(genome / "g.fa")], tss=[str(genome / bed)])
        m, _ = evaluate(run, inputs, tmp_path / bed, adapt_options=AdaptOptions(steps=3, batch_size=2))
        adapted.append(weights(run))
        metrics.append(m)
    assert all(torch.equal(adapted[0][k], adapted[1][k]) for k in adapted[0])
    assert metrics[0]["scoring"]["adapt"] == metrics[1]["scoring"]["adapt"]
    assert metrics[0]["pooled"]["positives"] > 0
    assert metrics[0]["pooled"]["auprc"] != metrics[1]["pooled"]["auprc"]  # the labels did reach the scores
    assert [s for s in seen if s] == [[str(genome / "tss.bed")], [str(genome / "moved.bed")]]  # evaluation's loads
    assert seen.count([]) == 2  # adaptation's: without a BED


def test_predict_from_the_command_line(tmp_path, genome):
    """--adapt-steps 0 writes exactly what no option writes; --adapt-steps 5 adapts (logged) and writes other
    probabilities."""
    outs = {}
    for name, extra in (("plain", []), ("zero", ["--adapt-steps", 0]), ("five", ["--adapt-steps", 5])):
        (tmp_path / name).mkdir()  # the same prefix name in each: the track lines name it
        r = run_cli("predict", "--model", TRACK_RUN, "--fasta", genome / "g.fa", "--out", tmp_path / name / "p",
                    "--device", "cpu", *extra)
        assert r.exit_code == 0, r.output
        outs[name] = {s: (tmp_path / name / f"p.{s}").read_bytes() for s in ("plus.bedGraph", "minus.bedGraph",
                                                                              "peaks.bed")}
        assert ("test-time adaptation" in r.output) == (name == "five")
    assert outs["zero"] == outs["plain"]
    assert outs["five"]["plus.bedGraph"] != outs["plain"]["plus.bedGraph"]
    assert "test-time adaptation on g: 5 steps of the masked-token loss" in r.output and "lr 0.0002" in r.output


def test_evaluate_from_the_command_line(tmp_path, genome):
    r = run_cli("evaluate", "--model", TRACK_RUN, "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", "--out",
                tmp_path / "ev", "--device", "cpu", "--adapt-steps", 5, "--adapt-lr", "1e-3")
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    record = m["scoring"]["adapt"]
    assert record["steps"] == 5 and record["lr"] == [1e-3] and record["genomes"] == ["g"]
    assert "After test-time adaptation on g: 5 steps" in (tmp_path / "ev" / "report.md").read_text()
    assert "test-time adaptation on g: 5 steps" in r.output
    r = run_cli("evaluate", "--model", TRACK_RUN, "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", "--out",
                tmp_path / "ev0", "--device", "cpu")
    assert r.exit_code == 0 and "adapt" not in json.loads((tmp_path / "ev0" / "metrics.json").read_text())["scoring"]


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_a_sequence_classifier_is_one_line(tmp_path, command):
    extra = ["--out", tmp_path / ("p.tsv" if command == "predict" else "ev")]
    if command == "evaluate":
        labels = tmp_path / "labels.tsv"
        ids = [line[1:].split()[0] for line in (V1 / "seqs.fa").read_text().splitlines() if line.startswith(">")]
        labels.write_text("".join(f"{i}\t{n % 2}\n" for n, i in enumerate(ids)))
        extra += ["--labels", labels]
    r = run_cli("-q", command, "--model", SEQ_RUN, "--fasta", V1 / "seqs.fa", "--device", "cpu", "--adapt-steps", 3,
                *extra)
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert lines == ["genolin: error: --adapt-steps: test-time adaptation is for track models (it trains on windows "
                     "of a genome); this run is a sequence model"]
    assert not (tmp_path / "p.tsv").exists() and not (tmp_path / "ev").exists()


def test_refusals(tmp_path, genome, monkeypatch):
    run = load_run(TRACK_RUN, "cpu")
    short = tmp_path / "short.fa"
    short.write_text(">s\n" + "ACGT" * 300 + "\n")
    with pytest.raises(InputError, match=r"windows of the run's training length \(2,048 bp\); the longest contig"):
        adapt(run, [str(short)], 2)
    monkeypatch.setenv("GENOLIN_MEMORY_GIB", "0.001")
    with pytest.raises(InputError, match=r"test-time adaptation on a batch of 2,048 tokens \(4 windows of 2,048 bp\) "
                                         r"needs about \d+ MiB, more than"):
        adapt(run, [str(genome / "g.fa")], 2)
    monkeypatch.delenv("GENOLIN_MEMORY_GIB")
    run.model.to_inference_bf16()
    with pytest.raises(ValueError, match="float32"):
        adapt(run, [str(genome / "g.fa")], 2)


def test_weights_cast_for_inference_afterwards(genome):
    """bf16_weights: adapted in float32, then cast as load_run casts a track model on CUDA."""
    run = load_run(TRACK_RUN, "cpu")
    adapt(run, [str(genome / "g.fa")], 1, batch_size=1, bf16_weights=True)
    assert {p.dtype for p in run.model.parameters()} == {torch.bfloat16}
    assert run.model.norm.eps == torch.finfo(torch.float32).eps


def test_adaptation_reads_circles_as_training_did(genome, monkeypatch):
    """A contig the run read as circular in training (same name and length) is a circle for adaptation too, as
    for predict and evaluate."""
    seen = []
    original = TrackData.circles_as
    monkeypatch.setattr(TrackData, "circles_as", lambda self, contigs: seen.append(original(self, contigs)) or seen[-1])
    run = load_run(TRACK_RUN, "cpu")
    run.task.circular_contigs = [["chrT", 20_000], ["chrT", 19_999]]
    adapt(run, [str(genome / "g.fa")], 1, batch_size=1)
    assert seen == [["chrT"]]


def test_reported_losses_do_not_overlap():
    """The logged start and end losses average disjoint steps, however few."""
    from genolin.adapt import Adaptation

    five = Adaptation(["g"], 5, 1, 2048, [1e-3], [[1.0, 2.0, 3.0, 4.0, 5.0]], 0.1)
    assert (five.loss_start(), five.loss_end()) == (1.5, 4.5)
    one = Adaptation(["g"], 1, 1, 2048, [1e-3], [[7.0]], 0.1)
    assert one.loss_start() == one.loss_end() == 7.0
    many = Adaptation(["g"], 40, 1, 2048, [1e-3], [list(map(float, range(40)))], 0.1)
    assert (many.loss_start(), many.loss_end()) == (4.5, 34.5)


def test_adapt_lr_without_adapt_steps_is_a_usage_error(tmp_path, genome):
    r = run_cli("predict", "--model", TRACK_RUN, "--fasta", genome / "g.fa", "--out", tmp_path / "p", "--device",
                "cpu", "--adapt-lr", "1e-3")
    assert r.exit_code == 2 and "--adapt-lr" in r.output and "--adapt-steps" in r.output
    assert not (tmp_path / "p.plus.bedGraph").exists()


def test_predict_checks_its_inputs_before_adapting(tmp_path, genome, monkeypatch):
    """A mistyped --contig is one error line before any adaptation step runs."""
    import genolin.predict

    called = []
    monkeypatch.setattr(genolin.predict, "adapt", lambda *a, **k: called.append(1))
    r = run_cli("-q", "predict", "--model", TRACK_RUN, "--fasta", genome / "g.fa", "--out", tmp_path / "p",
                "--device", "cpu", "--adapt-steps", 40, "--contig", "nosuch")
    assert r.exit_code == 1 and "no contig 'nosuch' (--contig)" in r.output and not called
    r = run_cli("-q", "predict", "--model", TRACK_RUN, "--fasta", genome / "g.fa", "--out", tmp_path / "p",
                "--device", "cpu", "--adapt-steps", 2, "--contig", "chrT")
    assert r.exit_code == 0 and called == [1], r.output


def test_an_ensemble_adapts_each_member_as_alone(genome):
    """An ensemble (load_run of two run folders; here the same run twice): each member trains in turn with the same
    seed, so each ends with the weights that member gets adapted alone, and the report has one loss curve each."""
    alone = load_run(TRACK_RUN, "cpu")
    adapt(alone, [str(genome / "g.fa")], 4, batch_size=1, seed=3)
    pair = load_run([TRACK_RUN, TRACK_RUN], "cpu")
    done = adapt(pair, [str(genome / "g.fa")], 4, batch_size=1, seed=3)
    assert len(done.losses) == 2 and len(done.lrs) == 2 and done.losses[0] == done.losses[1]
    want = alone.model.state_dict()
    for model, _ in pair.predictor.members:
        assert not model.training
        assert all(torch.equal(model.state_dict()[k], want[k]) for k in want)
    assert "; " in done.describe()  # a loss pair per member
