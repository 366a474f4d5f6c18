"""Track scoring and budgets: 50-bp evaluation bins and promoter-call matching against brute-force references,
several genomes in one run (paired and shared BEDs, validation per genome), and schedules in optimizer steps."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import DATA, ECOLI_BGZ

from genolin.checkpoint import load_tensors
from genolin.cli import cli
from genolin.config import make_config
from genolin.io.bed import Interval
from genolin.io.fasta import Genome, read_fasta
from genolin.tasks.track import TrackData, call_metrics, score_regions
from genolin.train import lr_at

GENE_STARTS = DATA / "ecoli_k12" / "gene_starts.bed"


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


class RandomPredictor:
    """Stands in for genolin.inference.Predictor: pieces of random probabilities in uneven sizes."""

    def __init__(self, data: TrackData, seed: int):
        rng = np.random.default_rng(seed)
        self.probs = {c: rng.random((-(-n // data.stride), 2)).astype(np.float32) for c, n in data.lengths.items()}
        self.rng = rng

    def region_probs(self, data, regions, *, rc_average=False, progress=None):
        for contig, a, b in regions:
            first, end = a // data.stride, -(-b // data.stride)
            while first < end:
                n = min(int(self.rng.integers(1, 300)), end - first)
                yield contig, first, self.probs[contig][first:first + n]
                first += n


@pytest.mark.parametrize(("stride", "bin_bp"), [(4, 50), (2, 50), (3, 10), (1, 7)])
def test_evaluation_bins_and_calls_equal_brute_force(stride, bin_bp):
    genome = Genome(ECOLI_BGZ)
    rng = np.random.default_rng(stride)
    tss = [Interval("NC_000913.3", int(p), int(p) + 1, "t", None, "+-"[int(s)])
           for p, s in zip(rng.integers(0, 9_000, 60), rng.integers(0, 2, 60), strict=True)]
    data = TrackData(genome, tss, window_bp=400 * stride, k=3, stride=stride)
    data.lengths = {"NC_000913.3": 9_001}  # score a short stretch of the genome
    pred = RandomPredictor(data, seed=stride)
    regions = [("NC_000913.3", 3 * stride * 7, 9_001)]  # starts on a bin edge of the model, not of the evaluation
    scores = score_regions(pred, data, regions, bin_bp=bin_bp, threshold=0.9, min_distance_bp=5 * stride)
    (g,) = scores.values()
    a, b = regions[0][1:]
    probs = pred.probs["NC_000913.3"]
    for strand in range(2):
        per_base = np.repeat(probs[:, strand], stride)[:9_001]  # each base carries its model bin's probability
        want_p = [per_base[max(e * bin_bp, a):min((e + 1) * bin_bp, b)].max() for e in range(a // bin_bp,
                                                                                             -(-b // bin_bp))]
        assert np.array_equal(g.p[:, strand], np.array(want_p, dtype=np.float32))
        positions = data.tss["NC_000913.3"][strand]
        want_y = [int(((positions >= max(e * bin_bp, a)) & (positions < min((e + 1) * bin_bp, b))).any())
                  for e in range(a // bin_bp, -(-b // bin_bp))]
        assert g.y[:, strand].tolist() == want_y
        # calls: local maxima of the model bins of the region (the definition in PeakCaller's docstring)
        p, d = probs[a // stride:, strand].astype(np.float64), 5
        want_calls = [(a // stride + i) * stride + stride // 2 for i, v in enumerate(p) if v >= 0.9
                      and v > p[max(0, i - d):i].max(initial=-1) and v >= p[i + 1:i + d + 1].max(initial=-1)]
        assert g.calls[("NC_000913.3", strand)].tolist() == want_calls
    assert g.bp == b - a


@pytest.mark.parametrize("density", [300.0, 5_000.0, 1e7])
def test_calls_at_a_density_are_each_regions_most_probable_local_maxima(density):
    """calls_per_mbp: of all local maxima of a region (both strands), the round(density x Mbp) most probable, by
    brute force; the pieces arrive in uneven sizes while the caller's threshold rises to the k-th best so far.
    1e7 per Mbp asks for more than there are: every local maximum."""
    genome = Genome(ECOLI_BGZ)
    rng = np.random.default_rng(7)
    tss = [Interval("NC_000913.3", int(p), int(p) + 1, "t", None, "+-"[int(s)])
           for p, s in zip(rng.integers(0, 20_000, 40), rng.integers(0, 2, 40), strict=True)]
    data = TrackData(genome, tss, window_bp=1600, k=3, stride=4)
    data.lengths = {"NC_000913.3": 20_003}
    pred = RandomPredictor(data, seed=3)
    regions = [("NC_000913.3", 0, 20_003)]
    (g,) = score_regions(pred, data, regions, bin_bp=50, threshold=0.99, min_distance_bp=20,
                         calls_per_mbp=density).values()
    probs, d = pred.probs["NC_000913.3"].astype(np.float64), 5
    maxima = [(v, i, s) for s in range(2) for i, v in enumerate(probs[:, s])
              if v > probs[max(0, i - d):i, s].max(initial=-1) and v >= probs[i + 1:i + d + 1, s].max(initial=-1)]
    k = int(density * 20_003 / 1e6 + 0.5)
    cut = sorted(maxima, reverse=True)[k - 1][0] if k <= len(maxima) else 0.0
    for s in range(2):
        want = sorted(i * 4 + 2 for v, i, strand in maxima if strand == s and v >= cut)
        assert g.calls[("NC_000913.3", s)].tolist() == want
    assert g.call_threshold == pytest.approx(cut, rel=1e-6)
    m = call_metrics(g.calls, g.tss, g.bp, g.call_threshold, density=density)
    assert m["calls"] == min(k, len(maxima)) and m["density"] == density


def test_density_cut_keeps_the_k_most_probable_within_bounded_memory():
    from genolin.peaks import DensityCut, density_quotas, resolvable_density

    rng = np.random.default_rng(0)
    cut, everything = DensityCut(50), []
    for _ in range(40):
        calls = [(int(b), float(p), "+-"[int(s)]) for b, p, s in zip(rng.integers(0, 10**6, 30), rng.random(30),
                                                                        rng.integers(0, 2, 30), strict=True)]
        everything += calls
        cut.add(calls)
        assert len(cut.calls) <= 2 * 50 + 30
        assert cut.floor <= sorted(p for _, p, _ in everything)[-min(50, len(everything))]
    assert cut.selected() == sorted(sorted(everything, key=lambda c: c[1])[-50:])
    tied = DensityCut(2)
    tied.add([(9, 0.5, "+"), (3, 0.5, "-"), (5, 0.5, "+"), (1, 0.2, "+")])
    assert tied.selected() == [(3, 0.5, "-"), (5, 0.5, "+")]  # ties at the cut: the first along the contig
    none = DensityCut(0)
    none.add([(1, 0.9, "+")])
    assert none.selected() == [] and none.floor == float("inf")
    # per contig: the running total rounded, so short contigs share and the counts add up
    assert density_quotas([900, 900, 900], 500) == [0, 1, 0]
    assert density_quotas([60_000, 9_000, 1_001], 200) == [12, 2, 0]
    sizes = rng.integers(1, 50_000, 200).tolist()
    assert sum(density_quotas(sizes, 333)) == int(sum(sizes) * 333 / 1e6 + 0.5)
    # TSSs more than 100 bp apart on one strand count once each: 0, 150, 300 of 0, 50, 150, 200, 300
    assert resolvable_density([np.array([0, 50, 150, 200, 300]), np.array([10])], 2_000_000, 100) == 2.0


def test_track_windows_mutated_with_their_targets_kept():
    """mutate_prob on the track task: each base substituted with that probability (a quarter of the draws give the
    same base back), the targets those of the plain window; 0 or no rng: today's batch; a seed repeats itself."""
    genome = Genome(ECOLI_BGZ)
    tss = [Interval("NC_000913.3", p, p + 1, "t", None, "+-"[i % 2]) for i, p in enumerate(range(500, 60_000, 700))]
    data = TrackData(genome, tss, window_bp=4096, k=1, stride=1)
    windows = data.random_windows([("NC_000913.3", 0, 60_000)], np.random.default_rng(0), 6)
    plain = data.collate(windows)
    assert torch.equal(data.collate(windows, np.random.default_rng(1), mutate_prob=0.0).ids, plain.ids)
    for p in (0.1, 1.0):
        mutated = data.collate(windows, np.random.default_rng(2), mutate_prob=p)
        again = data.collate(windows, np.random.default_rng(2), mutate_prob=p)
        assert torch.equal(mutated.ids, again.ids) and torch.equal(mutated.targets, plain.targets)
        changed = (mutated.ids != plain.ids)[plain.mask].float().mean().item()
        assert abs(changed - 0.75 * p) < 0.02
    rc = data.collate(windows, np.random.default_rng(3), rc_prob=1.0, mutate_prob=0.05)
    assert torch.equal(rc.targets, data.collate(windows, np.random.default_rng(3), rc_prob=1.0).targets)


@pytest.fixture(scope="module")
def unequal_genomes(tmp_path_factory):
    """TrackData of a 'genome' of 180 kbp in two contigs (big1 read as circular) and one of 9 kbp, cut from E. coli:
    20 times apart, as the largest and smallest of the eleven-genome proxy nearly are."""
    d = tmp_path_factory.mktemp("unequal")
    (rec,) = read_fasta(ECOLI_BGZ)
    (d / "big.fa").write_text(f">big1\n{rec.seq[:120_000].decode()}\n>big2\n{rec.seq[120_000:180_000].decode()}\n")
    (d / "small.fa").write_text(f">small1\n{rec.seq[200_000:209_000].decode()}\n")
    return TrackData([Genome(d / "big.fa"), Genome(d / "small.fa")], [], window_bp=1024, k=3, stride=4,
                     circular=["big1"])


def test_genome_weights_length_draws_the_windows_as_before(unequal_genomes):
    """genome_weights "length" (the default) makes the same rng calls as the draw before the setting: regions by
    span, then an offset per window; so the same windows from the same seed, a circle's and a split contig's."""
    data = unequal_genomes
    for regions in (data.whole(), data.split(0.1)[0]):
        spans = np.array([r[2] if data.wraps(r) else r[2] - r[1] - data.window_bp - data.k + 2 for r in regions],
                         dtype=np.float64)
        rng = np.random.default_rng(7)
        picks = rng.choice(len(regions), size=500, p=spans / spans.sum())
        want = [(regions[r][0], regions[r][1] + int(rng.integers(0, int(spans[r]))) // 4 * 4) for r in picks]
        for kwargs in ({}, {"genome_weights": "length"}):
            got = data.random_windows(regions, np.random.default_rng(7), 500, **kwargs)
            assert [(w.contig, w.start) for w in got] == want and {w.bins for w in got} == {256}
    assert any(data.wraps(r) for r in data.whole())


@pytest.mark.parametrize(("weights", "small_share"), [("equal", 0.5), ("sqrt", None)])
def test_genome_weights_equal_and_sqrt_share_the_draws_among_genomes(unequal_genomes, weights, small_share):
    """"equal": each genome drawn as often as the other, 20-fold apart in size; "sqrt": shares as the square roots
    of their spans; within the big genome its two contigs by span; windows inside their regions."""
    data = unequal_genomes
    regions = data.split(0.1)[0]
    spans = data.spans(regions)
    big, small = spans[:2].sum(), spans[2]
    if small_share is None:
        small_share = small ** 0.5 / (small ** 0.5 + big ** 0.5)
    assert data.genome_shares(regions, weights) == pytest.approx({"big": 1 - small_share, "small": small_share})
    assert data.genome_shares(regions) == pytest.approx({"big": big / spans.sum(), "small": small / spans.sum()})
    windows = data.random_windows(regions, np.random.default_rng(3), 100_000, genome_weights=weights)
    contigs = [w.contig for w in windows]
    n_small = contigs.count("small1")
    assert n_small / len(windows) == pytest.approx(small_share, abs=0.01)
    assert contigs.count("big1") / (len(windows) - n_small) == pytest.approx(spans[0] / big, abs=0.01)
    ends = {c: (a, b) for c, a, b in regions}
    assert all(ends[w.contig][0] <= w.start and w.start + 1024 + 2 <= ends[w.contig][1] for w in windows)


def test_the_track_task_draws_its_training_windows_by_genome_weights(unequal_genomes):
    """TrackTask's epoch batches follow the run's genome_weights; the default's draws are random_windows' own."""
    from genolin.tasks.track import TrackTask

    data = unequal_genomes
    regions = data.split(0.1)[0]
    counts = {}
    for weights in ("length", "equal"):
        task = TrackTask(make_config("track", "tiny", {"genome_weights": weights, "window_bp": 1024, "k": 3}))
        task.train, task.train_regions = data, regions
        batches = task.epoch_batches(np.random.default_rng(0), 2_000)
        counts[weights] = sum(w.contig == "small1" for b in batches for w in b) / 8_000
    plain = data.random_windows(regions, np.random.default_rng(0), 8_000)
    assert counts["length"] == sum(w.contig == "small1" for w in plain) / 8_000 < 0.1
    assert counts["equal"] == pytest.approx(0.5, abs=0.03)


def test_call_metrics_against_definition():
    calls = {("c", 0): np.array([100, 500, 1000]), ("c", 1): np.array([300])}
    tss = {("c", 0): np.array([110, 480, 2000]), ("c", 1): np.array([320, 900])}
    m = call_metrics(calls, tss, 2_000_000, 0.3)
    assert m["calls"] == 4 and m["tss"] == 5 and m["calls_per_mbp"] == 2.0
    assert m["precision_20bp"] == 3 / 4  # 100 (110), 500 (480), 300 (320); not 1000
    assert m["recall_20bp"] == 3 / 5  # 110, 480, 320; not 2000, 900
    assert m["precision_100bp"] == 3 / 4 and m["recall_100bp"] == 3 / 5
    assert call_metrics({}, tss, 10, 0.5)["precision_20bp"] is None  # no calls: precision undefined
    # a whole circle of 6,145 bp: 2 and 6,142 are 5 bp apart across the origin, 3,000 bp apart along the line
    line = call_metrics({("c", 0): np.array([2])}, {("c", 0): np.array([6142])}, 6145, 0.5)
    circle = call_metrics({("c", 0): np.array([2])}, {("c", 0): np.array([6142])}, 6145, 0.5, {("c", 0): 6145})
    assert line["precision_20bp"] == line["recall_100bp"] == 0
    assert circle["precision_20bp"] == circle["recall_20bp"] == 1


@pytest.fixture(scope="module")
def two_genomes(tmp_path_factory):
    """Two 'genomes' cut from E. coli (contigs gA1, gA2 and gB1), their own BEDs and one merged BED."""
    d = tmp_path_factory.mktemp("two")
    (rec,) = read_fasta(ECOLI_BGZ)
    starts = [(int(f[1]), f[5]) for f in (line.split("\t") for line in GENE_STARTS.read_text().splitlines())]
    parts = {"A": [("gA1", 0, 30_000), ("gA2", 30_000, 45_000)], "B": [("gB1", 100_000, 140_000)]}
    for name, contigs in parts.items():
        with open(d / f"{name}.fa", "w") as fa, open(d / f"{name}.bed", "w") as bed:
            for contig, lo, hi in contigs:
                fa.write(f">{contig}\n{rec.seq[lo:hi].decode()}\n")
                bed.writelines(f"{contig}\t{p - lo}\t{p - lo + 1}\tg\t0\t{s}\n" for p, s in starts if lo <= p < hi)
    (d / "all.bed").write_text((d / "A.bed").read_text() + (d / "B.bed").read_text())
    return d


def test_several_genomes_validate_per_genome(tmp_path, two_genomes):
    d = two_genomes
    common = ["--set", "window_bp=2048", "--set", "batch_size=4", "--set", "d_model=32", "--set", "steps=6",
              "--set", "val_every_steps=3", "--set", "warmup_steps=2"]
    out = tmp_path / "paired"
    r = run("train", "--fasta", d / "A.fa", "--tss", d / "A.bed", "--fasta", d / "B.fa", "--tss", d / "B.bed",
            "--out", out, *common)
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [rec["step"] for rec in records] == [3, 6]  # validation every 3 steps, the schedule ends at 6
    val = records[-1]["val"]
    assert list(val["genomes"]) == ["A", "B"]
    # held out: the last tenth of each contig, per genome, in 50-bp bins
    assert val["genomes"]["A"]["plus"]["n"] == 3_000 // 50 + 1_500 // 50
    assert val["genomes"]["B"]["plus"]["n"] == 4_000 // 50 and val["plus"]["n"] == 60 + 30 + 80
    mean = np.mean([val["genomes"][g]["pooled"]["auprc"] for g in ("A", "B")])
    assert val["score"] == pytest.approx(mean)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["step"] == 6 and state["epoch"] == 2
    # one merged BED for both genomes trains on the same targets: the same weights
    out2 = tmp_path / "merged"
    r = run("train", "--fasta", d / "A.fa", "--fasta", d / "B.fa", "--tss", d / "all.bed", "--out", out2, *common)
    assert r.exit_code == 0, r.output
    wa, wb = load_tensors(out / "model.safetensors")[0], load_tensors(out2 / "model.safetensors")[0]
    assert wa.keys() == wb.keys() and all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)
    # evaluate on both genomes: per genome and over all, as the best validation scored them
    r = run("evaluate", "--model", out, "--fasta", d / "A.fa", "--tss", d / "A.bed", "--fasta", d / "B.fa", "--tss",
            d / "B.bed", "--held-out", "--out", tmp_path / "ev")
    assert r.exit_code == 0, r.output
    ev = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    best = max(records, key=lambda rec: rec["val"]["score"])
    assert ev["score"] == pytest.approx(best["val"]["score"], abs=1e-4)
    assert ev["genomes"]["B"]["pooled"]["auprc"] == pytest.approx(best["val"]["genomes"]["B"]["pooled"]["auprc"],
                                                                  abs=1e-4)
    report = (tmp_path / "ev" / "report.md").read_text()
    assert "| A | pooled |" in report and "| B | pooled |" in report and "| all | pooled |" in report
    # mismatched pairing is one clear line
    r = run("train", "--fasta", d / "A.fa", "--fasta", d / "B.fa", "--tss", d / "A.bed", "--tss", d / "B.bed",
            "--tss", d / "all.bed", "--out", tmp_path / "bad", *common)
    assert r.exit_code == 1 and "give --tss once for all genomes or once per --fasta" in r.output
    r = run("train", "--fasta", d / "A.fa", "--tss", d / "B.bed", "--fasta", d / "B.fa", "--tss", d / "A.bed",
            "--out", tmp_path / "swapped", *common)
    assert r.exit_code == 1 and "B.bed" in r.output and "gB1" in r.output


def test_evaluate_scores_only_what_training_held_out_of_a_training_genome(tmp_path, two_genomes):
    d = two_genomes
    out = tmp_path / "onA"
    r = run("train", "--fasta", d / "A.fa", "--tss", d / "A.bed", "--out", out, "--set", "window_bp=2048",
            "--set", "batch_size=4", "--set", "d_model=32", "--set", "steps=2", "--set", "warmup_steps=1")
    assert r.exit_code == 0, r.output
    both = ["--model", out, "--fasta", d / "A.fa", "--tss", d / "A.bed", "--fasta", d / "B.fa", "--tss", d / "B.bed"]
    r = run("evaluate", *both, "--out", tmp_path / "default")
    assert r.exit_code == 0, r.output
    assert "this run trained on genome A contigs gA1, gA2" in r.output and "held out" in r.output
    ev = json.loads((tmp_path / "default" / "metrics.json").read_text())
    # A: the held-out tenth of each contig (50-bp bins); B, never trained on: every bin
    assert ev["genomes"]["A"]["plus"]["n"] == 3_000 // 50 + 1_500 // 50
    assert ev["genomes"]["B"]["plus"]["n"] == 40_000 // 50
    assert "genome A contigs gA1, gA2" in ev["training_overlap"]
    assert "this run trained on genome A" in (tmp_path / "default" / "report.md").read_text()
    r = run("evaluate", *both, "--whole-genome", "--out", tmp_path / "whole")
    assert r.exit_code == 0, r.output
    assert "this run trained on 40,500 of the scored bp (genome A contigs gA1, gA2)" in r.output
    ev = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    assert ev["genomes"]["A"]["plus"]["n"] == 30_000 // 50 + 15_000 // 50
    r = run("evaluate", "--model", out, "--fasta", d / "B.fa", "--tss", d / "B.bed", "--out", tmp_path / "b")
    assert r.exit_code == 0 and "trained on" not in r.output  # a genome of its own: nothing to say
    assert "training_overlap" not in json.loads((tmp_path / "b" / "metrics.json").read_text())


def test_time_budget_ends_the_schedule():
    cfg = make_config("track", "tiny", {"steps": 1000, "warmup_steps": 10, "lr": 1e-3, "min_lr_ratio": 0.1})
    assert lr_at(5, 1000, cfg) == pytest.approx(6e-4)  # warm-up
    assert lr_at(10, 1000, cfg) == pytest.approx(1e-3)
    assert lr_at(505, 1000, cfg) == pytest.approx(1e-4 + 0.9e-3 * 0.5)  # halfway by steps
    assert lr_at(10, 1000, cfg, min_progress=0.5) == pytest.approx(lr_at(505, 1000, cfg))  # halfway by the clock
    assert lr_at(600, 1000, cfg, min_progress=0.5) == lr_at(600, 1000, cfg)  # the later of the two
    assert lr_at(20, 1000, cfg, min_progress=1.7) == pytest.approx(1e-4)  # time is up: the floor


def test_stop_rule_validates_and_resume_continues(tmp_path, two_genomes):
    d = two_genomes
    common = ["--fasta", d / "A.fa", "--tss", d / "A.bed", "--set", "window_bp=2048", "--set", "batch_size=4",
              "--set", "d_model=32", "--set", "steps=8", "--set", "val_every_steps=4", "--set", "warmup_steps=2"]
    assert run("train", *common, "--out", tmp_path / "a").exit_code == 0
    r = run("train", *common, "--out", tmp_path / "b", "--max-steps", 2)
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["stopped"] == "max_steps 2" and records[0]["val"]["score"] >= 0
    assert (tmp_path / "b" / "best.safetensors").exists()  # evaluate/predict have validated weights
    state = json.loads((tmp_path / "b" / "trainer_state.json").read_text())
    assert (state["epoch"], state["batch"], state["step"]) == (0, 2, 2)


def test_resume_refuses_options_that_would_change_the_run(tmp_path, two_genomes):
    """--resume continues on the run's own data, folder and settings: other data, another --out or a setting is
    one line naming the option; the run's own data given again, or its own folder as --out, are fine."""
    d = two_genomes
    data = ["--fasta", d / "A.fa", "--tss", d / "A.bed"]
    small = ["--set", "window_bp=2048", "--set", "batch_size=4", "--set", "d_model=32", "--set", "steps=8",
             "--set", "val_every_steps=4", "--set", "warmup_steps=2"]
    assert run("train", *data, *small, "--out", tmp_path / "a", "--max-steps", 2).exit_code == 0
    before = (tmp_path / "a" / "trainer_state.json").read_text()
    for extra, option in [(["--fasta", d / "B.fa", "--tss", d / "B.bed"], "--fasta"),
                          (["--fasta", d / "A.fa", "--tss", d / "all.bed"], "--tss"),
                          (["--out", tmp_path / "other"], "--out"), (["--set", "lr=1"], "--set"),
                          (["--preset", "small"], "--preset"), (["--seed", 3], "--seed"), (["--seed", 0], "--seed"),
                          (["--teacher", tmp_path / "a"], "--teacher")]:
        r = run("train", "--resume", tmp_path / "a", *extra)
        assert r.exit_code == 2 and option in r.output and "Traceback" not in r.output, (extra, r.output)
        assert not (tmp_path / "other").exists()
    assert (tmp_path / "a" / "trainer_state.json").read_text() == before  # nothing trained
    r = run("train", "--resume", tmp_path / "a", *data, "--out", tmp_path / "a", "--max-steps", 4)
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "a" / "trainer_state.json").read_text())["step"] == 4


def test_focal_loss_against_its_formula():
    from types import SimpleNamespace

    from genolin.tasks import Batch, TrackTask

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 11, 2, generator=g, dtype=torch.float64).float() * 3
    targets = (torch.rand(3, 11, 2, generator=g) < 0.2).float()
    mask = torch.ones(3, 11, dtype=torch.bool)
    mask[2, 7:] = False
    batch, out = Batch(mask.long(), mask, targets=targets), SimpleNamespace(track=logits)
    for gamma in (0.0, 2.0):
        task = TrackTask(make_config("track", "tiny", {"focal_gamma": gamma}), {"pos_weight": 7.0})
        task._loss_weight = torch.tensor([7.0, 7.0])
        x, y = logits[mask].double(), targets[mask].double()
        p = torch.sigmoid(x)
        want = -(7.0 * y * torch.log(p) + (1 - y) * torch.log(1 - p))
        want = (want * (1 - torch.where(y > 0.5, p, 1 - p)) ** gamma).mean()
        assert task.loss(out, batch).item() == pytest.approx(want.item(), rel=1e-5)


def test_clock_takes_over_the_schedule_only_when_steps_would_overrun(tmp_path, two_genomes, monkeypatch):
    """A time budget leaves a run that fits alone (the same weights as without one); a run that would overrun
    switches to the clock and stops at the budget."""
    import genolin.train as train_mod

    d = two_genomes
    common = ["--fasta", d / "A.fa", "--tss", d / "A.bed", "--set", "window_bp=2048", "--set", "batch_size=2",
              "--set", "d_model=16", "--set", "steps=40", "--set", "val_every_steps=40", "--set", "warmup_steps=2"]

    def fake_clock(seconds_per_call):
        t = [0.0]

        def monotonic():
            t[0] += seconds_per_call
            return t[0]
        return monotonic

    assert run("train", *common, "--out", tmp_path / "free").exit_code == 0
    monkeypatch.setattr(train_mod.time, "monotonic", fake_clock(0.05))  # 40 steps well inside 60 s
    assert run("train", *common, "--max-minutes", 1, "--out", tmp_path / "fits").exit_code == 0
    wa, wb = load_tensors(tmp_path / "free" / "model.safetensors")[0], load_tensors(tmp_path / "fits" /
                                                                                     "model.safetensors")[0]
    assert all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)
    fits = (tmp_path / "fits" / "train.log").read_text()
    assert "follows the clock" not in fits
    assert "training: batches of 2, 40 steps, 1 min at most, lr 0.002; reverse complements (rc_prob 0.5)" in fits
    monkeypatch.setattr(train_mod.time, "monotonic", fake_clock(0.9))  # about 2 s a step: 40 steps overrun 60 s
    assert run("train", *common, "--max-minutes", 1, "--out", tmp_path / "late").exit_code == 0
    log = (tmp_path / "late" / "train.log").read_text()
    assert "at this pace the 40 steps would not end within 1.0 min: the schedule follows the clock" in log
    state = json.loads((tmp_path / "late" / "trainer_state.json").read_text())
    assert 20 <= state["step"] < 40 and state["progress"] > 0.9  # stopped by the clock, at the end of its cosine


def test_slow_first_steps_alone_keep_the_steps_cosine(tmp_path, two_genomes, monkeypatch):
    """Steps slow only before the warm-up ends (a GPU shared at start-up) make the pace check hand the schedule to
    the clock, but the clock never leads the steps' cosine afterwards: the weights equal those of a run without a
    budget and the state's "progress" stays 0 (the benchmarks' "by clock" flag)."""
    import genolin.train as train_mod

    d = two_genomes
    common = ["--fasta", d / "A.fa", "--tss", d / "A.bed", "--set", "window_bp=2048", "--set", "batch_size=2",
              "--set", "d_model=16", "--set", "steps=40", "--set", "val_every_steps=40", "--set", "warmup_steps=30"]
    assert run("train", *common, "--out", tmp_path / "free").exit_code == 0
    calls = [0, 0.0]

    def monotonic():  # 1 s a call for the first 36 calls (a few a step: all before step 20), then 1 ms
        calls[0] += 1
        calls[1] += 1.0 if calls[0] <= 36 else 0.001
        return calls[1]
    monkeypatch.setattr(train_mod.time, "monotonic", monotonic)
    assert run("train", *common, "--max-minutes", 1, "--out", tmp_path / "slow").exit_code == 0
    assert "the schedule follows the clock" in (tmp_path / "slow" / "train.log").read_text()
    state = json.loads((tmp_path / "slow" / "trainer_state.json").read_text())
    assert state["step"] == 40 and state["progress"] == 0
    wa, wb = load_tensors(tmp_path / "free" / "model.safetensors")[0], load_tensors(tmp_path / "slow" /
                                                                                     "model.safetensors")[0]
    assert all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)


def test_time_limit_inside_the_first_epoch_still_validates(tmp_path, two_genomes):
    """--max-minutes shorter than one epoch: the run validates where it stopped, writes best.safetensors and a
    metrics line, and predict uses those weights."""
    d = two_genomes
    out = tmp_path / "short"
    r = run("train", "--fasta", d / "A.fa", "--tss", d / "A.bed", "--set", "window_bp=2048", "--set", "batch_size=2",
            "--set", "d_model=16", "--set", "steps=500", "--set", "val_every_steps=500", "--max-minutes", "0.0001",
            "--out", out)
    assert r.exit_code == 0, r.output
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert record["stopped"] == "max_minutes 0.0001" and record["step"] == 1 and "score" in record["val"]
    assert (out / "best.safetensors").exists()
    r = CliRunner().invoke(cli, ["predict", "--model", str(out), "--fasta", str(d / "A.fa"), "--out",
                                 str(tmp_path / "p")])
    assert r.exit_code == 0 and "best.safetensors, the best validated weights (step 1)" in r.output


def test_genomes_that_share_contig_names(tmp_path):
    (rec,) = read_fasta(ECOLI_BGZ)
    for name, lo in (("one", 0), ("two", 40_000)):
        (tmp_path / f"{name}.fa").write_text(f">chr1\n{rec.seq[lo:lo + 20_000].decode()}\n")
        (tmp_path / f"{name}.bed").write_text("chr1\t500\t501\tp\t0\t+\nchr1\t19000\t19001\tq\t0\t+\n"
                                             "chr1\t19500\t19501\tr\t0\t-\n")  # two in the held-out tenth
    common = ["--set", "window_bp=2048", "--set", "batch_size=2", "--set", "d_model=16", "--set", "steps=2",
              "--set", "val_every_steps=2"]
    r = run("train", "--fasta", tmp_path / "one.fa", "--tss", tmp_path / "one.bed", "--fasta", tmp_path / "two.fa",
            "--tss", tmp_path / "two.bed", "--out", tmp_path / "run", *common)
    assert r.exit_code == 0, r.output
    val = json.loads((tmp_path / "run" / "metrics.jsonl").read_text())["val"]
    assert list(val["genomes"]) == ["one", "two"] and val["genomes"]["two"]["pooled"]["positives"] == 2
    r = run("train", "--fasta", tmp_path / "one.fa", "--fasta", tmp_path / "two.fa", "--tss", tmp_path / "one.bed",
            "--out", tmp_path / "merged", *common)
    assert r.exit_code == 1 and "contig 'chr1' is in several genomes" in r.output
    r = run("predict", "--model", tmp_path / "run", "--fasta", tmp_path / "one.fa", "--fasta", tmp_path / "two.fa",
            "--out", tmp_path / "p")
    assert r.exit_code == 1 and "predict one genome at a time" in r.output


@pytest.mark.slow
def test_the_track_recipes_benchmark_runs_end_to_end(tmp_path):
    """benchmarks/track_recipes.py --quick: two recipes, E. coli held out, trained on the two other shared genomes,
    scored with calls and predict speed; the tables and JSON written."""
    import subprocess
    import sys

    from conftest import REPO, shared_file

    for name in ("ecoli_k12/regulondb_10.9_tss.bed", "bacteria/BACILLUS/BACILLUS.bed",
                 "bacteria/CJEJUNI_2/CJEJUNI_2.bed"):
        shared_file(name)
    out = tmp_path / "tr"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "track_recipes.py"), "--quick", "--device", "cpu",
                           "--predict-speed", "--work", str(tmp_path / "w"), "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.with_suffix(".json").read_text())
    assert [(r["recipe"], r["held_out"]) for r in result["rows"]] == [("shipped", "ecoli"), ("fine", "ecoli")]
    fine = result["rows"][1]
    assert fine["settings"]["stride"] == "1" and fine["steps"] == 20
    assert json.loads((tmp_path / "w" / "fine" / "ecoli_seed0" / "run" / "config.json").read_text())["train"][
        "stride"] == 1
    calls = fine["ecoli"][next(iter(fine["ecoli"]))]
    assert 0 <= calls["recall_100bp"] <= 1 and fine["predict_mbp_per_s"] > 0
    text = out.with_suffix(".md").read_text()
    assert "| shipped |" in text and "| fine |" in text and "P/R 20 bp" in text


def test_the_track_recipes_benchmark_merges_result_files(tmp_path):
    """benchmarks/track_recipes.py --merge: the rows of two result files of one preset as one table, seeds and
    commands joined, failures kept, the runs whose schedule followed the clock counted ("?" where a file did not
    record it); a file scored on the eukaryotic slices merges with one that was not (the slices' table lists the
    recipes scored on them); a run found in both files is kept once when both give the same results (a repeated
    deterministic run) and is an error otherwise, as is a recipe named alike with other settings."""
    import subprocess
    import sys

    from conftest import REPO

    def row(recipe, seed, auprc, by_clock):
        genome = {"auprc": auprc, "auroc": 0.8, "positive_rate": 0.01, "ratio": auprc / 0.01}
        r = {"recipe": recipe, "settings": {}, "held_out": "ecoli", "seed": seed, "steps": 10, "train_seconds": 60.0,
             "memorising": False, "ecoli": {"NC_000913.3": genome}}
        return r if by_clock is None else {**r, "by_clock": by_clock}

    def meta(seeds, command):
        return {"date": "2026-11-27", "cpu": "x86_64", "torch": "2", "genolin": "0.1.0", "command": command,
                "args": {"preset": "base", "seeds": seeds, "parallel": 2}, "recipes": {"a": {}, "b": {"steps": "5"}}}

    one, two = tmp_path / "one.json", tmp_path / "two.json"
    slices = {"A.thaliana": {"auprc": 0.008, "ratio": 1.0}}
    first = meta("0", "first")
    first["args"]["eukaryotes"] = True
    one.write_text(json.dumps({"meta": first, "rows": [{**row("a", 0, 0.05, True), "eukaryotes": slices},
                                                       {**row("b", 0, 0.07, False), "eukaryotes": slices}],
                               "failed": [{"run": ["b", "cjejuni", 0], "error": "failed (1)"}]}))
    two.write_text(json.dumps({"meta": meta("1", "second"), "rows": [row("a", 1, 0.07, None), row("b", 1, 0.09, False)],
                               "failed": []}))
    script = [sys.executable, str(REPO / "benchmarks" / "track_recipes.py")]
    done = subprocess.run([*script, "--merge", str(one), str(two), "--out", str(tmp_path / "m")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "m.json").read_text())
    assert [(r["recipe"], r["seed"]) for r in result["rows"]] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert result["meta"]["args"]["seeds"] == "0,1" and result["meta"]["command"] == "first ; second"
    assert [c["command"] for c in result["meta"]["calls"]] == ["first", "second"]
    assert result["failed"] == [{"run": ["b", "cjejuni", 0], "error": "failed (1)"}] and result["meta"]["rerun"] == 0
    # a failure that a later file reran is dropped, and counted
    rerun = tmp_path / "rerun.json"
    cj = {**row("b", 0, 0.08, False), "held_out": "cjejuni"}
    cj["cjejuni"] = {"C": cj.pop("ecoli")["NC_000913.3"]}
    rerun.write_text(json.dumps({"meta": meta("0", "third"), "rows": [cj], "failed": []}))
    done = subprocess.run([*script, "--merge", str(one), str(two), str(rerun), "--out", str(tmp_path / "m4")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "m4.json").read_text())
    assert result["failed"] == [] and result["meta"]["rerun"] == 1 and len(result["rows"]) == 5
    text = (tmp_path / "m.md").read_text()
    assert "| a | 0.0600 ± 0.0141 (6.0x) | 0.0600 ± 0.0141 |" in text and "| 1 of 2 (1 ?) |" in text
    assert "| b | 0.0800 ± 0.0141 (8.0x) |" in text and "| 0 of 2 |" in text
    assert "| a | 0.0080 (1.0x) |" in text and result["meta"]["args"]["eukaryotes"] is True
    # the same run again, only slower: kept once and counted; with another score: an error, nothing written
    again = tmp_path / "again.json"
    again.write_text(json.dumps({"meta": meta("1", "fourth"), "rows": [{**row("a", 1, 0.07, None),
                                                                        "train_seconds": 90.0}], "failed": []}))
    done = subprocess.run([*script, "--merge", str(one), str(two), str(again), "--out", str(tmp_path / "m5")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "m5.json").read_text())
    assert len(result["rows"]) == 4 and result["meta"]["repeated"] == 1
    assert [r["train_seconds"] for r in result["rows"]] == [60.0] * 4
    # a repeat scored on the slices where the first copy was not: one row, with the slices' scores
    again.write_text(json.dumps({"meta": meta("1", "fourth"), "rows": [{**row("a", 1, 0.07, None),
                                                                        "eukaryotes": slices}], "failed": []}))
    done = subprocess.run([*script, "--merge", str(one), str(two), str(again), "--out", str(tmp_path / "m6")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "m6.json").read_text())["rows"]
    assert len(rows) == 4 and [r.get("eukaryotes") for r in rows if r["seed"] == 1 and r["recipe"] == "a"] == [slices]
    again.write_text(json.dumps({"meta": meta("1", "fourth"), "rows": [row("a", 1, 0.071, None)], "failed": []}))
    done = subprocess.run([*script, "--merge", str(one), str(two), str(again), "--out", str(tmp_path / "m2")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "run a ecoli seed 1 gives other results" in done.stderr
    assert not (tmp_path / "m2.json").exists()
    other = json.loads(two.read_text())
    other["meta"]["recipes"]["b"] = {"steps": "6"}
    two.write_text(json.dumps(other))
    done = subprocess.run([*script, "--merge", str(one), str(two), "--out", str(tmp_path / "m3")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "recipe 'b' has other settings" in done.stderr


def test_a_benchmark_run_that_fails_says_why_without_its_log(tmp_path):
    """benchmarks/common.run (the track benchmarks' commands): a failed command's error names the command, its log
    and the last line it wrote, so a result file's "failed" entry says why after the log is gone."""
    import importlib.util
    import sys

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("common", REPO / "benchmarks" / "common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    log = tmp_path / "log.txt"
    assert common.run([sys.executable, "-c", "print('first')"], log) >= 0
    code = "import sys; print('loading'); print('error: CUDA out of memory', file=sys.stderr); sys.exit(3)"
    with pytest.raises(RuntimeError) as err:
        common.run([sys.executable, "-c", code], log)
    said = str(err.value)
    assert said.startswith("failed (3): ") and said.endswith(f"see {log}: error: CUDA out of memory")
    with pytest.raises(RuntimeError) as err:  # a command that wrote nothing: nothing of the earlier ones is quoted
        common.run([sys.executable, "-c", "raise SystemExit(2)"], log)
    assert str(err.value).endswith(f"see {log}")
    assert log.read_text().count("$ ") == 3 and "first" in log.read_text()


def test_the_track_recipes_benchmark_tables_runs_trained_on_one_genome(tmp_path):
    """benchmarks/track_recipes.py --train-alone results: per training genome the mean AUPRC of the two genomes it
    did not see (mean ± sd over seeds), the mean over a seed's runs, steps per training genome; a file of
    leave-one-out runs does not merge with them."""
    import subprocess
    import sys

    from conftest import REPO

    def figures(auprc):
        return {"g": {"auprc": auprc, "auroc": 0.8, "positive_rate": 0.01, "ratio": auprc / 0.01}}

    def row(trained, seed, steps, a, b, recipe="r"):
        others = [n for n in ("bacillus", "cjejuni", "ecoli") if n != trained]
        return {"recipe": recipe, "settings": {}, "held_out": trained, "trained_on": [trained], "seed": seed,
                "steps": steps, "train_seconds": 120.0, "memorising": seed == 1,
                others[0]: figures(a), others[1]: figures(b)}

    meta = {"date": "2026-11-27", "cpu": "x86_64", "torch": "2", "genolin": "0.1.0", "command": "c",
            "args": {"preset": "tiny", "seeds": "0,1", "parallel": 2, "train_alone": True},
            "recipes": {"r": {}, "q": {"epochs": "14"}}}
    rows = [row("cjejuni", 0, 700, 0.04, 0.06), row("cjejuni", 1, 700, 0.06, 0.08),
            row("ecoli", 0, 2000, 0.08, 0.10), row("ecoli", 1, 2000, 0.10, 0.12),
            row("cjejuni", 0, 650, 0.05, 0.05, recipe="q")]  # q: one run only (the others failed)
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"meta": meta, "rows": rows, "failed": []}))
    script = [sys.executable, str(REPO / "benchmarks" / "track_recipes.py")]
    done = subprocess.run([*script, "--merge", str(one), "--out", str(tmp_path / "m")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    text = (tmp_path / "m.md").read_text()
    assert "| recipe | trained on cjejuni | trained on ecoli | mean AUPRC | steps |" in text
    # cjejuni: seed means 0.05, 0.07; ecoli: 0.09, 0.11; a seed's mean over its runs: 0.07, 0.09
    want = "| r | 0.0600 ± 0.0141 (6.0x) | 0.1000 ± 0.0141 (10.0x) | 0.0800 ± 0.0141 | 700/2000 | 2.0 ± 0.0 | 2 of 4 |"
    assert want in text and "| q | 0.0500 (5.0x) | - | - | 650/- | 2.0 | 0 of 1 |" in text
    loo = {"meta": {**meta, "args": {**meta["args"], "train_alone": False}}, "rows": [], "failed": []}
    (tmp_path / "loo.json").write_text(json.dumps(loo))
    done = subprocess.run([*script, "--merge", str(one), str(tmp_path / "loo.json"), "--out", str(tmp_path / "m2")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "differ in train_alone" in done.stderr


def test_a_resumed_run_handed_to_the_clock_continues_its_cosine_without_a_jump(monkeypatch):
    """A run resumed at step 60 of 100 whose steps then run too slowly for its budget: the clock takes over where
    the steps' cosine stands (the learning rate does not jump), leads from then on, and reaches the end of the cosine
    at the deadline; "progress" is stored only once the clock leads."""
    import genolin.schedule as sched
    from genolin.config import TrainConfig

    cfg = TrainConfig(steps=100, warmup_steps=10, max_minutes=1.0)
    now = [0.0]
    monkeypatch.setattr(sched.time, "monotonic", lambda: now[0])
    state = {"step": 60, "progress": 0.0}
    s = sched.Schedule(cfg, state)
    s.start(batches_per_epoch=100)
    lrs = []
    while state["step"] < 100 and not s.stop_reason():
        lrs.append((state["step"], s.next_lr(), state["progress"]))
        state["step"] += 1
        now[0] += 2.0  # 2 s a step: the 40 steps left would take 80 s of a 60 s budget
    by_steps = [sched.lr_at(step, 100, cfg) for step, _, _ in lrs]
    takeover = next(i for i, (_, _, p) in enumerate(lrs) if p > 0)
    assert s.by_clock and lrs[0][2] == 0 and lrs[takeover - 1][1] == pytest.approx(by_steps[takeover - 1])
    assert all(lr < want for (_, lr, _), want in zip(lrs[takeover:], by_steps[takeover:], strict=True))  # clock leads
    assert lrs[takeover - 1][1] - lrs[takeover][1] < 2 * (by_steps[takeover - 1] - by_steps[takeover])  # no jump
    assert state["step"] < 100 and lrs[-1][2] > 0.9  # stopped by the budget near the cosine's end


def test_start_up_time_does_not_hand_a_run_that_fits_to_the_clock(monkeypatch, caplog):
    """A track run of 4,500 steps on a GPU (base's preset before it took 9,000): steps that fit 15 minutes after a
    start-up (a GPU's context, kernel compilation) leave the steps' cosine alone and the log silent, whether the
    start-up is spread over the first 20 steps (10 s) or falls in the first step (40 s, then 0.19 s a step: 895
    s in all). The pace check judges the steps after the first, from a twentieth of the budget on. The same
    steps at 0.5 s would overrun: the clock takes over soon after that twentieth and ends the cosine at the
    deadline."""
    import logging

    import genolin.schedule as sched
    from genolin.config import TrainConfig

    cfg = TrainConfig(steps=4500, warmup_steps=100, max_minutes=15.0)
    now = [0.0]
    monkeypatch.setattr(sched.time, "monotonic", lambda: now[0])
    caplog.set_level(logging.INFO, logger="genolin.schedule")

    def train(seconds):  # seconds(step) -> how long step (1, 2, ...) takes
        state = {"step": 0, "progress": 0.0}
        now[0] = 0.0
        s = sched.Schedule(cfg, state)
        s.start(batches_per_epoch=1000)
        lrs = []
        while state["step"] < s.total and not s.stop_reason():
            lrs.append(s.next_lr())
            state["step"] += 1
            now[0] += seconds(state["step"])
        return s, state, lrs

    by_steps = [sched.lr_at(step, 4500, cfg) for step in range(4500)]
    for seconds in (lambda i: 0.5 if i <= 20 else 0.04, lambda i: 40.0 if i == 1 else 0.19):
        s, state, lrs = train(seconds)
        assert not s.by_clock and state == {"step": 4500, "progress": 0.0} and "follows the clock" not in caplog.text
        assert lrs == by_steps
    s, state, lrs = train(lambda i: 0.5)
    assert s.by_clock and "4500 steps would not end within 15.0 min" in caplog.text
    assert 1700 < state["step"] < 1820 and state["progress"] > 0.99  # 900 s at 0.5 s a step; the cosine at its end


def test_the_run_log_states_the_schedule_and_what_is_drawn_into_the_inputs():
    """describe_training (the run log's "training:" line): batch, steps or epochs, the time limit, lr, and the
    random reverse complements, base substitutions and masked-token term a run trains with; base's and small's track
    presets redraw bases (mutate_prob 0.1), tiny's does not."""
    from genolin.config import TrainConfig, make_config
    from genolin.train import describe_training

    drawn = TrainConfig(steps=None, epochs=3, batch_size=4, lr=1e-3, rc_prob=0, mutate_prob=0.1, mlm_weight=0.05)
    assert describe_training(drawn) == ("batches of 4, 3 epochs, lr 0.001; bases redrawn at random (mutate_prob 0.1), "
                                        "a masked-token term (mlm_weight 0.05)")
    equal = TrainConfig(steps=None, epochs=3, batch_size=4, lr=1e-3, rc_prob=0, genome_weights="equal")
    assert describe_training(equal) == ("batches of 4, 3 epochs, lr 0.001; training genomes drawn by genome_weights "
                                        "equal")
    plain = TrainConfig(steps=2250, batch_size=8, lr=1e-3, max_minutes=15, rc_prob=0)
    assert describe_training(plain) == ("batches of 8, 2,250 steps, 15 min at most, lr 0.001; no reverse complements "
                                        "or mutations")
    assert make_config("track", "base").mutate_prob == 0.1
    assert make_config("track", "small").mutate_prob == 0.1 and make_config("track", "tiny").mutate_prob == 0
    base = describe_training(make_config("track", "base"))
    assert base == ("batches of 8, 9,000 steps, 15 min at most, lr 0.001; reverse complements (rc_prob 0.5), bases "
                    "redrawn at random (mutate_prob 0.1)")


@pytest.fixture(scope="module")
def strided_runs(tmp_path_factory, two_genomes):
    """Three tiny track runs on genome A: stride 4 (two seeds) and stride 2 (k 4, a window of its own)."""
    d, out = two_genomes, tmp_path_factory.mktemp("strided")
    common = ["--fasta", d / "A.fa", "--tss", d / "A.bed", "--set", "batch_size=2", "--set", "d_model=16",
              "--set", "steps=2", "--set", "val_every_steps=2", "--set", "warmup_steps=1"]
    runs = {}
    for name, extra in (("s4", ["--set", "window_bp=2048", "--seed", 0]),
                        ("s4b", ["--set", "window_bp=2048", "--seed", 1]),
                        ("s2", ["--set", "window_bp=1024", "--set", "stride=2", "--set", "k=4",
                                "--set", "tolerance_bins=3"])):
        r = run("train", *common, *extra, "--out", out / name)
        assert r.exit_code == 0, r.output
        runs[name] = out / name
    return runs


def test_an_ensemble_of_strides_is_its_members_mean_at_the_finest_stride(strided_runs, two_genomes):
    """Members of strides 4, 4 and 2: the ensemble's track at stride 2 equals, bin for bin, the weighted mean of the
    stride-2 member's probabilities and the stride-4 ensemble's, each stride-4 value repeated over the two stride-2
    bins it covers; regions that start and end inside a stride-4 bin are cut to their own bins."""
    import numpy as np

    from genolin.inference import load_run
    from genolin.tasks.track import TrackData

    d = two_genomes
    runs = [strided_runs["s4"], strided_runs["s2"], strided_runs["s4b"]]
    ens = load_run(runs, "cpu")
    assert ens.config.train.stride == 2 and [n for _, n in ens.predictor.others] == [2]
    data = TrackData.load([str(d / "A.fa")], [], ens.config.train)
    regions = [("gA1", 1_003, 20_001), ("gA2", 2, 15_000)]  # starts and ends inside stride-4 bins

    def track(run, data):
        pieces = list(run.predictor.region_probs(data, regions, progress=False))
        return {c: np.concatenate([p for cc, _, p in pieces if cc == c]) for c in ("gA1", "gA2")}, pieces

    got, pieces = track(ens, data)
    fine, _ = track(load_run(strided_runs["s2"], "cpu"), data)
    coarse_run = load_run([strided_runs["s4"], strided_runs["s4b"]], "cpu")
    coarse, _ = track(coarse_run, data.tokens_of(coarse_run.config.train))
    assert [p[1] for p in pieces if p[0] == "gA1"][0] == 1_003 // 2  # the region's first fine bin
    for c, a, b in regions:
        f0, f1, c0 = a // 2, -(-b // 2), a // 4
        up = np.repeat(coarse[c], 2, axis=0)[f0 - 2 * c0: f0 - 2 * c0 + (f1 - f0)]
        assert got[c].shape == fine[c].shape == up.shape == (f1 - f0, 2)
        np.testing.assert_allclose(got[c], (fine[c] + 2 * up) / 3, rtol=1e-6, atol=1e-7)


def test_an_ensemble_of_strides_predicts_and_evaluates(tmp_path, strided_runs, two_genomes):
    """predict and evaluate take members of several strides: the track at the finest stride (stride-2 bins in the
    bedGraph); a stride that is not a multiple of the finest, and --offset-average, stop with one line."""
    d = two_genomes
    models = ["--model", strided_runs["s4"], "--model", strided_runs["s2"]]
    r = run("predict", *models, "--fasta", d / "A.fa", "--out", tmp_path / "p")
    assert r.exit_code == 0, r.output
    first = next(line for line in (tmp_path / "p.plus.bedGraph").read_text().splitlines()
                 if not line.startswith("track"))
    assert int(first.split("\t")[2]) - int(first.split("\t")[1]) in (2, 4)  # runs of equal values: multiples of 2
    lengths = {int(f[2]) - int(f[1]) for f in (line.split("\t") for line in
                                                (tmp_path / "p.plus.bedGraph").read_text().splitlines()[1:])}
    assert any(n % 4 for n in lengths)  # stride-2 resolution somewhere
    r = run("evaluate", *models, "--fasta", d / "A.fa", "--tss", d / "A.bed", "--out", tmp_path / "ev")
    assert r.exit_code == 0, r.output
    r = run("predict", *models, "--fasta", d / "A.fa", "--offset-average", 2, "--out", tmp_path / "q")
    assert r.exit_code != 0 and "several strides" in r.output and "Traceback" not in r.output
