"""genolin explain: ISM is exactly predict on each mutant, the one-hot model is exactly the token model, and
attributions of a model trained on a planted motif point at the motif; track regions; bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import ECOLI_BGZ

from genolin.cli import cli
from genolin.errors import InputError
from genolin.explain import BasesToScore, mutants, one_hot, sequence_scores, track_scores
from genolin.inference import load_run
from genolin.io.fasta import read_fasta

MOTIF = "TATAAT"


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def _random(rng, n):
    return "".join(rng.choice(list("ACGT"), n))


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Labelled FASTAs (50 bp): positives carry TATAAT at 8..36, negatives never; a tiny model trained on them
    (no k-mer term: the encoder itself must find the motif; linear attention, which sees the motif wherever it is,
    not the preset's synthesizer, whose position-specific weights spread the attributions over the places the
    motif was seen). Returns (folder, run dir, test records)."""
    d = tmp_path_factory.mktemp("planted")
    rng = np.random.default_rng(1)
    tests = []
    for split, n in (("train", 400), ("dev", 100), ("test", 24)):
        with open(d / f"{split}.fa", "w") as fh:
            for i in range(n):
                s = _random(rng, 50)
                while MOTIF in s:
                    s = _random(rng, 50)
                at = None
                if i % 2:
                    at = int(rng.integers(8, 37))
                    s = s[:at] + MOTIF + s[at + 6:]
                fh.write(f">{split}{i} label={'promoter' if i % 2 else 'background'}\n{s}\n")
                if split == "test":
                    tests.append((f"{split}{i}", s, at))
    result = run("train", "--fasta", d / "train.fa", "--val-fasta", d / "dev.fa", "--preset", "tiny", "--device",
                 "cpu", "--set", "model.kmer_logits=0", "--set", "epochs=10", "--set", "patience=0", "--set",
                 "mixer=linear", "--out", d / "run")
    assert result.exit_code == 0, result.output
    return d, d / "run", tests


@pytest.fixture(scope="module")
def token_runs(planted):
    """Barely trained runs for exactness checks: k = 3 at stride 2 and k = 1 with the k-mer logits (linear
    attention, for inputs longer than training's), and the tiny preset as it is (the synthesizer)."""
    d = planted[0]
    out = {}
    for name, sets in (("k3s2", ["k=3", "stride=2", "model.stem_kernel=0", "model.kmer_logits=0", "mixer=linear"]),
                       ("kmer", ["mixer=linear"]), ("preset", [])):
        args = [a for kv in sets for a in ("--set", kv)]
        result = run("train", "--fasta", d / "train.fa", "--val-fasta", d / "dev.fa", "--preset", "tiny",
                     "--device", "cpu", "--set", "max_steps=3", *args, "--out", d / name)
        assert result.exit_code == 0, result.output
        out[name] = d / name
    return out


def _log_odds_from_tsv(path):
    """id -> log p(promoter) - log p(background) from a predict TSV, and its error bound from 6 decimals."""
    out = {}
    lines = path.read_text().splitlines()
    head = lines[0].split("\t")
    i0, i1 = head.index("prob_background"), head.index("prob_promoter")
    for line in lines[1:]:
        f = line.split("\t")
        p0, p1 = float(f[i0]), float(f[i1])
        out[f[0]] = (math.log(p1) - math.log(p0), 6e-7 * (1 / p1 + 1 / p0))
    return out


@pytest.mark.parametrize("rc", [False, True])
def test_ism_equals_predict_on_every_mutant(tmp_path, planted, rc):
    """The outside check: explain --method ism against genolin predict on all single-base mutants."""
    _, model, tests = planted
    records = tests[:3]
    fa = tmp_path / "seqs.fa"
    fa.write_text("".join(f">{name}\n{s}\n" for name, s, _ in records))
    flag = "--rc-average" if rc else "--no-rc-average"
    result = run("explain", "--model", model, "--fasta", fa, "--method", "ism", flag, "--device", "cpu", "--out",
                 tmp_path / "ex")
    assert result.exit_code == 0, result.output
    ism = np.load(tmp_path / "ex" / "ism.npz")
    with open(tmp_path / "mutants.fa", "w") as fh:
        for name, s, _ in records:
            fh.write(f">{name}|ref\n{s}\n")
            for m, (i, b) in zip(*mutants(s.encode()), strict=True):
                fh.write(f">{name}|{i}|{b}\n{m.decode()}\n")
    result = run("predict", "--model", model, "--fasta", tmp_path / "mutants.fa", flag, "--device", "cpu", "--out",
                 tmp_path / "m.tsv")
    assert result.exit_code == 0, result.output
    lo = _log_odds_from_tsv(tmp_path / "m.tsv")
    for name, s, _ in records:
        a = ism[name]
        assert a.shape == (len(s), 4) and a.dtype == np.float32
        ref, ref_err = lo[f"{name}|ref"]
        for i in range(len(s)):
            for b in range(4):
                if "ACGT"[b] == s[i]:
                    assert a[i, b] == 0.0
                    continue
                value, err = lo[f"{name}|{i}|{b}"]
                assert abs(a[i, b] - (value - ref)) <= err + ref_err + 1e-5, (name, i, b)
    scores = (tmp_path / "ex" / "scores.tsv").read_text().splitlines()
    assert scores[0].split("\t") == ["id", "length", "log_odds", "max_importance"] and len(scores) == 4
    assert len(list((tmp_path / "ex" / "logos").glob("*.png"))) == 3


@pytest.mark.parametrize("name", ["k3s2", "kmer", "preset"])
def test_one_hot_model_is_the_token_model(planted, token_runs, name):
    """In float64, BasesToScore at one-hot inputs equals the model on tokens (k-mer embeddings as products of
    base one-hots; N -> [UNK]; the bag-of-k-mers term from the same products), for odd lengths (the synthesizer
    up to its 50 trained positions)."""
    r = load_run(token_runs[name], "cpu")
    r.model.double()
    rng = np.random.default_rng(5)
    seqs = [_random(rng, n).encode() for n in ((23, 50, 61) if name != "preset" else (23, 37, 50))]
    seqs.append(b"ACGTN" + seqs[0][5:])
    wrapper = BasesToScore(r, "class", 1)
    tol = 1e-10 if name == "k3s2" else 1e-6  # the token model counts k-mers in float32 (model.kmer_profile)
    for s in seqs:
        want = sequence_scores(r, [s], 1, False)[0]
        got = wrapper(torch.from_numpy(one_hot(s).T.copy()).double().unsqueeze(0)).item()
        assert abs(got - want) <= tol * max(1.0, abs(want)), (name, len(s))


def _motif_hits(values: dict, tests, slack=2) -> float:
    hits = total = 0
    for name, _, at in tests:
        if at is None:
            continue
        total += 1
        windows = np.convolve(values[name], np.ones(6), mode="valid")  # importance of each 6-bp window
        hits += abs(int(np.argmax(windows)) - at) <= slack
    return hits / total


def test_attributions_peak_on_the_planted_motif(tmp_path, planted):
    """ISM, saliency and DeepLIFT/SHAP: the most important 6-bp window of a positive is its motif (within 2 bp)."""
    from genolin.explain import importance

    d, model, tests = planted
    fa = tmp_path / "t.fa"
    fa.write_text("".join(f">{name}\n{s}\n" for name, s, _ in tests))
    seqs = {name: s.encode() for name, s, _ in tests}
    for method in ("ism", "saliency", "deepliftshap"):
        result = run("explain", "--model", model, "--fasta", fa, "--method", method, "--device", "cpu", "--shuffles",
                     "8", "--top", "1", "--out", tmp_path / method)
        assert result.exit_code == 0, result.output
        a = np.load(tmp_path / method / f"{method}.npz")
        assert all(np.isfinite(a[n]).all() and a[n].shape == (50, 4) for n in seqs)
        values = {n: importance(a[n], seqs[n], method) for n in seqs}
        assert _motif_hits(values, tests) >= 0.8, method


@pytest.fixture(scope="module")
def track_run(tmp_path_factory):
    """A tiny track model on 30 kb of E. coli (a few steps: exactness, not accuracy)."""
    d = tmp_path_factory.mktemp("track")
    (rec,) = read_fasta(ECOLI_BGZ)
    (d / "g.fa").write_text(">chrA\n" + rec.seq[:30_000].decode() + "\n")
    (d / "tss.bed").write_text("".join(f"chrA\t{p}\t{p + 1}\tt{p}\t0\t{'+-'[i % 2]}\n"
                                       for i, p in enumerate(range(500, 30_000, 1500))))
    result = run("train", "--fasta", d / "g.fa", "--tss", d / "tss.bed", "--preset", "tiny", "--device", "cpu",
                 "--set", "window_bp=2048", "--set", "batch_size=2", "--set", "steps=3", "--set",
                 "val_every_steps=3", "--set", "model.d_model=32", "--out", d / "run")
    assert result.exit_code == 0, result.output
    return d


def _context(genome: bytes, lo: int, hi: int, context: str | None, window_bp: int = 2048) -> tuple[bytes, int]:
    """(the bases the model sees, where the region starts in them), by explain's rule: --context C bases either
    side, or by default one training window in all centred on the region; clipped to the contig."""
    side = max(0, (window_bp - (hi - lo) + 1) // 2) if context is None else int(context)
    wlo, whi = max(0, lo - side), min(len(genome), hi + side)
    return genome[wlo:whi], lo - wlo


@pytest.mark.parametrize("context", [None, "0", "50"])
def test_track_regions_ism_bigwig_and_gradients(tmp_path, track_run, context):
    """ISM of a region inside its genome context equals the model's score of each mutated context window (only
    the region's bases mutated), on the bin of the region's centre + 2; bigWig and gradients cover the region."""
    import pyBigWig

    from genolin.explain import importance, region_bin

    d = track_run
    (tmp_path / "r.bed").write_text("chrA\t1000\t1301\tup\t0\t+\nchrA\t5000\t5257\t.\t0\t-\n")
    extra = [] if context is None else ["--context", context]
    result = run("explain", "--model", d / "run", "--fasta", d / "g.fa", "--regions", tmp_path / "r.bed", "--method",
                 "ism", "--bin", "2", "--device", "cpu", "--out", tmp_path / "ex", *extra)
    assert result.exit_code == 0, result.output
    a = np.load(tmp_path / "ex" / "ism.npz")
    assert sorted(a.files) == ["chrA:5000-5257(-)", "up"]
    r = load_run(d / "run", "cpu")
    genome = (d / "g.fa").read_text().split("\n")[1].encode()
    rows = {f[0]: f for f in (line.split("\t") for line in (tmp_path / "ex" / "scores.tsv").read_text().splitlines())}
    for name, lo, hi, channel in (("up", 1000, 1301, 0), ("chrA:5000-5257(-)", 5000, 5257, 1)):
        s = genome[lo:hi]
        window, before = _context(genome, lo, hi, context)
        assert a[name].shape == (len(s), 4)
        b = region_bin(r, len(window), 2, name, before + len(s) // 2)
        ref = track_scores(r, [window], b, channel)[0]
        assert float(rows[name][2]) == pytest.approx(ref, rel=1e-4, abs=1e-5)
        for i, base in ((0, 2), (len(s) // 2, 0), (len(s) - 1, 3)):
            if "ACGT"[base] == chr(s[i]):
                continue
            j = before + i
            m = window[:j] + b"ACGT"[base:base + 1] + window[j + 1:]
            assert abs(a[name][i, base] - (track_scores(r, [m], b, channel)[0] - ref)) < 1e-5
        wrapper = BasesToScore(r, "bin", b, channel)
        got = wrapper(torch.from_numpy(one_hot(window).T.copy()).unsqueeze(0)).item()
        assert abs(got - ref) < 1e-4 * max(1.0, abs(ref))
        bw = pyBigWig.open(str(tmp_path / "ex" / "ism.bw"))
        np.testing.assert_allclose(bw.values("chrA", lo, hi), importance(a[name], s, "ism"), rtol=1e-6, atol=1e-7)
        bw.close()
    result = run("explain", "--model", d / "run", "--fasta", d / "g.fa", "--regions", tmp_path / "r.bed", "--method",
                 "saliency", "--device", "cpu", "--top", "0", "--out", tmp_path / "sal", *extra)
    assert result.exit_code == 0, result.output
    sal = np.load(tmp_path / "sal" / "saliency.npz")
    assert sal["up"].shape == (301, 4) and np.isfinite(sal["up"]).all()


@pytest.mark.slow  # predict then ISM of every call: about 10 s
def test_predicted_peaks_are_explained_around_their_centres(tmp_path, track_run):
    """predict's peaks.bed (one-bin calls) as explain --regions: each call widened to its centre +- 100 bp
    (clipped at the contig's start) and seen inside a training window of context, the explained bin the call's
    own."""
    from genolin.explain import region_bin

    d = track_run
    result = run("predict", "--model", d / "run", "--fasta", d / "g.fa", "--threshold", "0", "--min-distance", "8000",
                 "--device", "cpu", "--out", tmp_path / "p")
    assert result.exit_code == 0, result.output
    peaks = tmp_path / "p.peaks.bed"
    calls = [line.split("\t") for line in peaks.read_text().splitlines() if line.startswith("chrA")]
    assert calls and all(int(f[2]) - int(f[1]) <= 4 for f in calls)
    with open(peaks, "a") as fh:
        fh.write("chrA\t8\t12\tedge\t0\t-\n")  # a call 10 bp from the contig's start
    result = run("explain", "--model", d / "run", "--fasta", d / "g.fa", "--regions", peaks, "--method", "ism",
                 "--top", "1", "--device", "cpu", "--out", tmp_path / "ex")
    assert result.exit_code == 0, result.output
    a = np.load(tmp_path / "ex" / "ism.npz")
    assert sorted(a.files) == sorted([f[3] for f in calls] + ["edge"])
    rows = {f[0]: f for f in (line.split("\t") for line in (tmp_path / "ex" / "scores.tsv").read_text().splitlines())}
    r = load_run(d / "run", "cpu")
    genome = (d / "g.fa").read_text().split("\n")[1].encode()
    for _, start, end, name, _, strand in [*calls[:2], ["chrA", "8", "12", "edge", "0", "-"]]:
        at = int(start) + (int(end) - int(start)) // 2
        lo = max(0, at - 100)
        s = genome[lo:at + 101]
        assert a[name].shape == (len(s), 4) and int(rows[name][1]) == len(s)
        window, before = _context(genome, lo, at + 101, None)
        b = region_bin(r, len(window), 0, name, before + at - lo)
        assert b == (before + at - lo) // 4  # the bin of the call's centre base (stride 4)
        ref = track_scores(r, [window], b, 1 if strand.strip() == "-" else 0)[0]
        assert float(rows[name][2]) == pytest.approx(ref, rel=1e-4, abs=1e-5)
    assert a["edge"].shape == (10 + 101, 4)


@pytest.mark.parametrize("args, message", [
    (["--target", "nonsense"], "--target: class 'nonsense' is not one of the model's classes"),
    (["--regions", "x.bed"], "regions are for track models"),
    (["--method", "saliency", "--rc-average"], "gradient methods explain the forward strand"),
])
def test_bad_explain_input_is_one_line(tmp_path, planted, args, message):
    d, model, _ = planted
    result = run("explain", "--model", model, "--fasta", d / "test.fa", "--device", "cpu", *args, "--out",
                 tmp_path / "ex")
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "ex").exists()


@pytest.mark.slow  # ISM of 240 sequences and TF-MoDISco (its numba compile included): about a minute
def test_modisco_recovers_the_planted_motif(tmp_path, planted):
    """explain --motifs on a model trained on TATAAT-planted sequences: a motif whose consensus is TATAAT (or its
    reverse complement) matched to the bundled sigma70 -10 box, written as MEME and a logo. The tiny preset as it
    is (with its k-mer term: the fixture's encoder-only model is too noisy for modisco's seqlet calls on 240
    sequences, 51 seqlets where this one gives about 200)."""
    d = planted[0]
    model = tmp_path / "run"
    result = run("train", "--fasta", d / "train.fa", "--val-fasta", d / "dev.fa", "--preset", "tiny", "--device",
                 "cpu", "--set", "epochs=3", "--out", model)
    assert result.exit_code == 0, result.output
    rng = np.random.default_rng(7)
    with open(tmp_path / "s.fa", "w") as fh:
        for i in range(240):
            s = _random(rng, 50)
            if i % 4:
                at = int(rng.integers(8, 37))
                s = s[:at] + MOTIF + s[at + 6:]
            fh.write(f">s{i}\n{s}\n")
    result = run("explain", "--model", model, "--fasta", tmp_path / "s.fa", "--method", "ism", "--motifs", "--device",
                 "cpu", "--top", "0", "--out", tmp_path / "ex")
    assert result.exit_code == 0, result.output
    rows = [line.split("\t") for line in (tmp_path / "ex" / "motifs.tsv").read_text().splitlines()[1:]]
    found = [r for r in rows if r[1] == "positive" and ("TATAAT" in r[3] or "ATTATA" in r[3])]
    assert found and found[0][4] == "sigma70 -10 box", rows
    assert "MOTIF positive_0" in (tmp_path / "ex" / "motifs.meme").read_text()
    assert (tmp_path / "ex" / "motif_logos" / "positive_0.png").stat().st_size > 1000


def test_known_motif_matrices():
    from genolin.motifs import KNOWN, consensus_ppm

    ppm = consensus_ppm("TATAWR", smoothing=0.0)
    np.testing.assert_allclose(ppm[4], [0.5, 0, 0, 0.5])
    np.testing.assert_allclose(ppm[5], [0.5, 0, 0.5, 0])
    for consensus in KNOWN.values():
        np.testing.assert_allclose(consensus_ppm(consensus).sum(1), 1.0)


def test_weak_motif_matches_are_marked(tmp_path):
    """The closest known element is always named, but only a TOMTOM p under MATCH_P counts as a match."""
    from genolin.motifs import MATCH_P, Motif, consensus_ppm, write_motifs

    ppm = consensus_ppm("GGGGCGGGG")
    motifs = [Motif("positive_0", "positive", ppm, ppm - 0.25, 40, "GC box (Sp1)", 0.361, "GGGGCGGGG"),
              Motif("positive_1", "positive", ppm, ppm - 0.25, 90, "sigma70 -10 box", 0.001, "TATAAT")]
    assert MATCH_P == 0.05 and not motifs[0].significant and motifs[1].significant
    write_motifs(tmp_path, motifs)
    lines = [line.split("\t") for line in (tmp_path / "motifs.tsv").read_text().splitlines()]
    assert lines[0][-2:] == ["tomtom_p", "significant"]
    assert [(r[4], r[5], r[6]) for r in lines[1:]] == [("GC box (Sp1)", "0.361", "no"),
                                                      ("sigma70 -10 box", "0.001", "yes")]


def test_motifs_are_matched_only_to_the_elements_of_the_genomes_domain():
    """A poly-A motif (what the demo's gene-start model found first) is named TATA box among all seven elements; for
    a bacterial genome only the sigma70 boxes are candidates, and a -10 box stays a -10 box in either."""
    from genolin.motifs import DOMAINS, Motif, consensus_ppm, match

    def motif(consensus):
        ppm = consensus_ppm(consensus, smoothing=0.05)
        return Motif("m", "positive", ppm, ppm, seqlets=50, consensus=consensus)

    for domain in ("bacteria", "eukaryotes", "any"):
        (m,) = match([motif("TATAAAAG")], domain)
        assert m.match in DOMAINS[domain]
    assert match([motif("TATAAAAG")], "any")[0].match == "TATA box"
    assert match([motif("TATAAAAG")], "bacteria")[0].match != "TATA box"
    assert match([motif("GTTATAATG")], "bacteria")[0].match in ("sigma70 -10 box", "extended -10 box")


def test_the_cost_is_counted_in_model_inputs_with_n_and_gradients():
    """ISM: the sequence and 3 substitutions per base, 4 at an N, as many as ``mutants`` makes; gradient methods one
    input per sequence (saliency) or per shuffled reference (deepliftshap)."""
    from genolin.explain import ExplainOptions, Pace

    seqs = [b"ACGTN", b"ACGTACGTAC"]
    pace = Pace(ExplainOptions(), seqs, [(0, 5), (2, 7)])
    assert pace.total == (1 + 3 * 4 + 4) + (1 + 3 * 5) == sum(1 + len(mutants(s, *span)[0])
                                                            for s, span in zip(seqs, [(0, 5), (2, 7)], strict=True))
    assert Pace(ExplainOptions(method="saliency"), seqs, [(0, 5), (0, 10)]).total == 2
    assert Pace(ExplainOptions(method="deepliftshap", shuffles=8), seqs, [(0, 5), (0, 10)]).total == 16
    with pytest.raises(InputError, match=r"--max-inputs: ism: 2 sequences, 10 bases.*33 model inputs.*more than 32"):
        Pace(ExplainOptions(max_inputs=32), seqs, [(0, 5), (2, 7)])


def test_a_whole_contig_is_refused_by_its_count_before_any_work(tmp_path, track_run, monkeypatch):
    """A region of a whole 700-kb contig: 2.1 million ISM inputs, over the default --max-inputs: one line naming the
    option and the count, no output; the CLI's default is the library's."""
    import genolin.explain
    from genolin.cli.explain import explain as command

    (rec,) = read_fasta(ECOLI_BGZ)
    (tmp_path / "g.fa").write_text(">chrA\n" + rec.seq[:700_000].decode() + "\n")
    (tmp_path / "r.bed").write_text("chrA\t0\t700000\twhole\t0\t+\n")
    monkeypatch.setattr(genolin.explain, "ism_regions", lambda *a, **k: pytest.fail("scored past the limit"))
    result = run("explain", "--model", track_run / "run", "--fasta", tmp_path / "g.fa", "--regions", tmp_path / "r.bed",
                 "--device", "cpu", "--out", tmp_path / "ex")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "genolin: error: --max-inputs: ism: 1 sequence, 700,000 bases" in result.output
    assert "2,100,001 model inputs of up to 700,000 bp, more than 2,000,000" in result.output
    assert "raise --max-inputs" in result.output and not (tmp_path / "ex").exists()
    assert next(p.default for p in command.params if p.name == "max_inputs") == genolin.explain.MAX_INPUTS


@pytest.mark.parametrize("method", ["ism", "saliency"])
def test_progress_moves_in_model_inputs_and_the_time_is_estimated(tmp_path, track_run, monkeypatch, method):
    """The progress bar counts model inputs (an ETA can form while a region's mutants are scored), up to its total;
    one log line gives the inputs and, after the first batch, the time in all."""
    import genolin.progress

    bars = []

    class Bar:
        def __init__(self, total=None, unit="it", desc="", enabled=None):
            self.total, self.unit, self.n, self.updates = total, unit, 0, 0
            bars.append(self)

        def update(self, n=1):
            self.n, self.updates = self.n + n, self.updates + 1

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(genolin.progress, "progress_bar", Bar)
    d = track_run
    (tmp_path / "r.bed").write_text("chrA\t1000\t1301\tup\t0\t+\nchrA\t5000\t5101\t.\t0\t-\n")
    result = CliRunner().invoke(cli, ["explain", "--model", str(d / "run"), "--fasta", str(d / "g.fa"), "--regions",
                                      str(tmp_path / "r.bed"), "--method", method, "--top", "0", "--device", "cpu",
                                      "--out", str(tmp_path / "ex")])
    assert result.exit_code == 0, result.output
    (bar,) = bars
    assert bar.unit == "inputs"
    if method == "ism":
        assert bar.total == bar.n == (1 + 3 * 301) + (1 + 3 * 201) and bar.updates > 2  # batches, not regions
    else:
        assert bar.total == bar.n == 2
    line = next(x for x in result.output.splitlines() if "model inputs of up to" in x)
    assert f"{bar.total:,} model inputs of up to" in line and "in all at the pace of the first batch" in line
