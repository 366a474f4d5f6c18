"""Circular contigs: training windows and labels across the origin against a linear copy of the circle, prediction
windows that give a rotated contig's track rotated, calls decided across the origin, linear contigs unchanged, and
the errors of --circular."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import ECOLI_BGZ, FIXTURES, bedgraph_bases

from genolin.cli import cli
from genolin.config import DataSpec
from genolin.io.bed import Interval
from genolin.io.fasta import Genome, read_fasta
from genolin.peaks import PeakCaller, StrandedPeaks
from genolin.tasks.track import TrackData, Window

V1_TRACK = FIXTURES / "v1_runs" / "track_run"  # k 6, stride 4, training window 2,048 bp (512 bins, margin 64)
STEP_BP = (512 - 2 * 64) * 4  # the bases each prediction window keeps: windows tile a circle of a multiple of it


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def random_seq(n: int, seed: int) -> str:
    return "".join(np.random.default_rng(seed).choice(list("ACGT"), n))


def write_fasta(path, records: dict[str, str], headers: dict[str, str] | None = None):
    headers = headers or {}
    path.write_text("".join(f">{name}{(' ' + headers[name]) if name in headers else ''}\n{seq}\n"
                            for name, seq in records.items()))
    return path


# --- training windows -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def circle(tmp_path_factory):
    """A circular contig of 1,003 bp (not a multiple of the stride) with TSSs beside the origin on both strands,
    its TrackData (k 3, stride 2, windows of 100 bp, tolerance 1 bin), and the same contig three times over as a
    linear contig with the TSSs of each copy: the reference for windows across the origin (circle position p is
    line position p + length)."""
    d = tmp_path_factory.mktemp("circle")
    n, seq = 1_003, random_seq(1_003, 1)
    tss = [(5, "+"), (1_000, "+"), (2, "-"), (400, "-"), (998, "-")]
    write_fasta(d / "c.fa", {"c": seq}, {"c": "plasmid pX [topology=circular]"})
    write_fasta(d / "line.fa", {"line": seq * 3})
    settings = dict(window_bp=100, k=3, stride=2, tolerance_bins=1)
    data = TrackData(Genome(d / "c.fa"), [Interval("c", p, p + 1, "t", None, s) for p, s in tss], **settings)
    line = TrackData(Genome(d / "line.fa"), [Interval("line", p + j * n, p + j * n + 1, "t", None, s)
                                             for p, s in tss for j in range(3)], **settings)
    return data, line, seq


def as_line(w: Window) -> Window:
    return Window("line", w.start + 1_003, w.bins)


def test_a_window_across_the_origin_holds_the_wrapped_bases_and_labels(circle):
    data, _, seq = circle
    assert data.circular == {"c"} and data.wraps(("c", 0, 1_003)) and not data.wraps(("c", 0, 1_000))
    w = Window("c", 992, 50)  # 11 bases before the end, 89 after the origin
    assert data.bases(w) == (seq[990:] + seq[:91]).encode()  # k - 1 = 2 bases of context either side
    t = data.targets(w)
    # + strand: the TSS at 1,000 in bin (1000 - 992) // 2 = 4, the one at 5 in bin (5 + 1003 - 992) // 2 = 8, each
    # with a bin of tolerance either side; - strand: 998 in bin 3, 2 in bin 6, 400 outside
    assert np.flatnonzero(t[:, 0]).tolist() == [3, 4, 5, 7, 8, 9]
    assert np.flatnonzero(t[:, 1]).tolist() == [2, 3, 4, 5, 6, 7]
    assert np.array_equal(data.targets(w, rc=True), t[::-1, ::-1])
    before = Window("c", -10, 20)  # a window starting before the origin reads the contig's end
    assert data.bases(before) == (seq[-12:] + seq[:32]).encode()
    # + strand: 1,000 is position -3, in bin (-3 + 10) // 2 = 3; 5 in bin (5 + 10) // 2 = 7
    assert np.flatnonzero(data.targets(before)[:, 0]).tolist() == [2, 3, 4, 6, 7, 8]


def test_random_windows_of_a_circle_equal_the_linear_copy(circle):
    """Training windows of the whole circle start anywhere on it (some across the origin); bases, tokens both ways
    and targets both ways equal those of the same window of the three-times linear copy."""
    data, line, _ = circle
    assert data.check_fits([("c", 0, 1_003)], "training part")  # 1,003 bp hold a window of 100
    windows = data.random_windows([("c", 0, 1_003)], np.random.default_rng(0), 300)
    starts = np.array([w.start for w in windows])
    assert (starts >= 0).all() and (starts < 1_003).all() and (starts % 2 == 0).all()
    assert (starts > 1_003 - 100).sum() > 5  # windows across the origin
    for w in windows:
        ref = as_line(w)
        assert data.bases(w) == line.bases(ref)
        for rc in (False, True):
            assert np.array_equal(data.tokens(w, rc=rc), line.tokens(ref, rc=rc))
            assert np.array_equal(data.targets(w, rc=rc), line.targets(ref, rc=rc))
    batch = data.collate(windows[:8])  # a training batch: the windows' tokens and targets
    assert np.array_equal(batch.targets.numpy(), np.stack([data.targets(w) for w in windows[:8]]))
    assert np.array_equal(batch.ids.numpy(), np.stack([data.tokens(w) for w in windows[:8]]))


def test_held_out_split_of_a_circle_stays_linear(circle):
    """With val_fraction, the training part and the held-out end are linear stretches: no training window runs
    into the held-out bases across the origin."""
    data, _, _ = circle
    train, val = data.split(0.2)
    assert train == [("c", 0, 802)] and val == [("c", 802, 1_003)]
    assert not data.wraps(train[0]) and not data.wraps(val[0])
    for w in data.random_windows(train, np.random.default_rng(1), 200):
        assert 0 <= w.start and w.start + w.bins * data.stride + data.k - 1 <= 802


def test_circular_names_and_all_mark_contigs(tmp_path):
    write_fasta(tmp_path / "g.fa", {"a": "ACGT" * 30, "b": "ACGT" * 30, "e": ""}, {"b": "circular=true"})
    genome = Genome(tmp_path / "g.fa")
    kw = dict(window_bp=40, k=3, stride=2)
    assert TrackData(genome, [], **kw).circular == {"b"}
    assert TrackData(genome, [], **kw, circular=["a"]).circular == {"a", "b"}
    assert TrackData(genome, [], **kw, circular=["all"]).circular == {"a", "b"}  # not the empty record


# --- prediction windows ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [1, 7, 255, 512 * 4, STEP_BP * 3, STEP_BP * 3 + 5, 20_001])
def test_prediction_windows_of_a_circle_keep_every_bin_once_with_context(tmp_path, length):
    """Every bin of a circle kept once, in order, each with at least the margin (64 bins) of context either side,
    the windows no longer than the training window; a linear contig's plan is the plan it always was."""
    from genolin.inference.windows import plan_batches

    write_fasta(tmp_path / "g.fa", {"c": "A" * length})
    data = TrackData(Genome(tmp_path / "g.fa"), [], window_bp=2_048, k=6, stride=4, circular=["c"])
    plan = [x for batch in plan_batches(data, [("c", 0, length)], None, 3) for x in batch]
    kept = np.concatenate([np.arange(keep_from, keep_to) for _, keep_from, keep_to in plan])
    assert kept.tolist() == list(range(-(-length // 4)))
    for w, keep_from, keep_to in plan:
        first = w.start // 4
        assert keep_from - first >= 64 and first + w.bins - keep_to >= 64 and w.bins <= 512
        assert len(data.bases(w)) == w.bins * 4 + 10
    if length >= 4:  # a part of a circular contig is planned as a line: no window before 0 or past its end
        part = [x for batch in plan_batches(data, [("c", 0, length - 1)], None, 3) for x in batch]
        assert part[0][0].start == 0 and part[-1][0].start + part[-1][0].bins * 4 <= length + 3


def track_of(run, data) -> np.ndarray:
    """(bins, 2) probabilities of the whole genome's single contig through ``region_probs``, NaN where none came,
    each bin written once."""
    (length,) = data.lengths.values()
    out = np.full((-(-length // data.stride), 2), np.nan)
    for _, first, probs in run.predictor.region_probs(data, data.whole(), rc_average=True, progress=False):
        assert np.isnan(out[first:first + len(probs)]).all(), "a bin came twice"
        out[first:first + len(probs)] = probs
    assert not np.isnan(out).any(), "a bin never came"
    return out


def peak_calls(path) -> list[tuple[int, int, str]]:
    rows = [line.split("\t") for line in path.read_text().splitlines() if not line.startswith("track")]
    return sorted((int(f[1]), int(f[2]), f[5]) for f in rows)


@pytest.fixture(scope="module")
def float64_run():
    """The fixture run's model in float64 (the probabilities come back as float32)."""
    from genolin.inference import load_run

    r = load_run(V1_TRACK, "cpu", batch_size=3)
    r.model.double()
    return r


@pytest.mark.parametrize("turns", [1, 2, 3])
def test_rotated_circle_predicts_the_rotated_track(tmp_path, float64_run, turns):
    """A circular contig of 4 prediction windows' kept bases (6,144 bp cut from E. coli) and the same contig rotated
    by r = turns x 1,536 bp (sequence[r:] + sequence[:r]): the windows of one are the windows of the other, so the
    track (both strands, forward and reverse complement averaged) is the same up to the rotation, within a relative
    error of 1e-6 (the model runs in float64; the probabilities are rounded to float32), and so are the bedGraph
    values and the promoter calls (threshold 0: every local maximum, those near the origin decided across it).
    As linear contigs, the two differ by far more at their ends: the test can tell."""
    from genolin.predict import PredictOptions, predict

    (rec,) = read_fasta(ECOLI_BGZ)
    n, r = 4 * STEP_BP, turns * STEP_BP
    seq = rec.seq[300_000:300_000 + n].decode()
    for name, s in (("a", seq), ("b", seq[r:] + seq[:r])):
        write_fasta(tmp_path / f"{name}.fa", {"c": s}, {"c": "topology=circular"})
        write_fasta(tmp_path / f"line_{name}.fa", {"c": s})
    cfg = float64_run.config.train
    tracks = {name: track_of(float64_run, TrackData.load([str(tmp_path / f"{name}.fa")], [], cfg))
              for name in ("a", "b", "line_a", "line_b")}
    shift = r // cfg.stride  # bin b of the rotated contig is bin b + shift of the first
    rotated = np.roll(tracks["b"], shift, axis=0)
    assert np.abs(rotated - tracks["a"]).max() <= 1e-6 * np.abs(tracks["a"]).max()
    np.testing.assert_allclose(rotated, tracks["a"], rtol=1e-6, atol=0)
    linear = np.abs(np.roll(tracks["line_b"], shift, axis=0) - tracks["line_a"]) / tracks["line_a"]
    assert linear.max() > 1e-2

    options = PredictOptions(rc_average=True, threshold=0.0, min_distance_bp=100, progress=False)
    for name in ("a", "b"):
        predict(float64_run, DataSpec("track", fasta=[str(tmp_path / f"{name}.fa")]), tmp_path / name, options)
    for strand in ("plus", "minus"):
        a, b = (bedgraph_bases(tmp_path / f"{name}.{strand}.bedGraph", n) for name in ("a", "b"))
        assert np.array_equal(np.roll(b, r), a)
    calls_a, calls_b = (peak_calls(tmp_path / f"{name}.peaks.bed") for name in ("a", "b"))
    assert calls_a and sorted(((s + r) % n, (s + r) % n + 4, strand) for s, _, strand in calls_b) == calls_a
    assert min(min(s, n - s) for s, _, _ in calls_a + calls_b) < 100  # a call beside the origin of one of them


def test_linear_contigs_predict_as_before(tmp_path):
    """A linear contig's bedGraph lines and calls are the same bytes whether or not a circular contig (marked in
    its header) comes before it; --circular NAME gives what the header mark gives."""
    (rec,) = read_fasta(ECOLI_BGZ)
    lin, circ = rec.seq[:9_001].decode(), rec.seq[20_000:27_003].decode()
    write_fasta(tmp_path / "one.fa", {"lin": lin})
    write_fasta(tmp_path / "two.fa", {"circ": circ, "lin": lin}, {"circ": "topology=circular"})
    write_fasta(tmp_path / "unmarked.fa", {"circ": circ, "lin": lin})
    common = ["--model", V1_TRACK, "--rc-average", "--threshold", "0.02"]
    for name, extra in (("one", []), ("two", []), ("unmarked", ["--circular", "circ"]), ("plain", [])):
        fasta = tmp_path / f"{'unmarked' if name == 'plain' else name}.fa"
        r = run("predict", *common, "--fasta", fasta, "--out", tmp_path / name, *extra)
        assert r.exit_code == 0, r.output

    def lines(name, suffix, contig):  # calls without their names, which number them through the file
        rows = (x.split("\t") for x in (tmp_path / f"{name}.{suffix}").read_text().splitlines()[
            int(suffix != "peaks.bed"):])
        return [row[:3] + row[4:] if suffix == "peaks.bed" else row for row in rows if row[0] == contig]

    for suffix in ("plus.bedGraph", "minus.bedGraph", "peaks.bed"):
        one = lines("one", suffix, "lin")
        assert one and lines("two", suffix, "lin") == one == lines("plain", suffix, "lin")
        assert lines("unmarked", suffix, "circ") == lines("two", suffix, "circ")
    assert lines("two", "plus.bedGraph", "circ") != lines("plain", "plus.bedGraph", "circ")  # read as a circle


# --- calls across the origin --------------------------------------------------------------------------------


def circle_calls(p: np.ndarray, threshold: float, d: int) -> list[int]:
    """PeakCaller's definition on a circle: p_i >= threshold, > every p in the d bins before, >= every p in the d
    after, neighbours taken modulo the length."""
    n = len(p)
    return [i for i in range(n) if p[i] >= threshold
            and all(p[i] > p[(i - j) % n] for j in range(1, d + 1) if (i - j) % n != i)
            and all(p[i] >= p[(i + j) % n] for j in range(1, d + 1) if (i + j) % n != i)]


@pytest.mark.parametrize("seed", range(10))
def test_calls_on_a_circle_equal_the_definition(seed):
    """Circles of every size against the definition: long ones (streamed in pieces), and (seeds 6-9) ones of 2d bins
    or fewer, where bins are neighbours on both sides (a single bin is called when it passes the threshold)."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(12, 400)), int(rng.integers(1, 6))
    if seed >= 6:
        d = int(rng.integers(2, 8))
        n = [1, 2, d + 1, 2 * d][seed - 6]
    p = np.round(rng.random(n), 1).astype(np.float32)  # ties too
    p[0] = p[-1] = 0.95  # a contest across the origin (a one-bin circle: called)
    caller, got, at = PeakCaller(0.3, d, circle=n), [], 0
    while at < n:
        size = min(int(rng.integers(1, 40)), n - at)
        got += [b for b, _ in caller.feed(at, p[at:at + size], final=at + size == n)]
        at += size
    assert sorted(got) == circle_calls(p, 0.3, d)
    assert len(got) == len(set(got))
    stranded = StrandedPeaks(0.3, d, {"c": n})
    calls = stranded.feed("c", 0, np.stack([p, p[::-1]], axis=1), final=True)
    assert [b for b, _, s in calls if s == "+"] == circle_calls(p, 0.3, d)
    assert [b for b, _, s in calls if s == "-"] == circle_calls(p[::-1], 0.3, d)


def test_score_regions_calls_a_whole_circle_across_the_origin(circle):
    from genolin.tasks.track import score_regions

    data, _, _ = circle
    rng = np.random.default_rng(3)
    probs = rng.random((502, 2)).astype(np.float32)

    class Fixed:
        def region_probs(self, data, regions, *, rc_average=False, progress=None):
            for _, a, b in regions:
                yield "c", a // 2, probs[a // 2: -(-b // 2)]

    (g,) = score_regions(Fixed(), data, [("c", 0, 1_003)], bin_bp=50, threshold=0.5, min_distance_bp=6).values()
    for strand in range(2):
        want = [b * 2 + 1 for b in circle_calls(probs[:, strand], 0.5, 3)]
        assert g.calls[("c", strand)].tolist() == want


# --- options and errors ---------------------------------------------------------------------------------------


def test_unknown_circular_name_is_one_clear_error(tmp_path):
    write_fasta(tmp_path / "g.fa", {"chrA": random_seq(6_000, 2)})
    (tmp_path / "t.bed").write_text("chrA\t100\t101\tg\t0\t+\n")
    for args in (["predict", "--model", V1_TRACK, "--fasta", tmp_path / "g.fa", "--out", tmp_path / "p"],
                 ["evaluate", "--model", V1_TRACK, "--fasta", tmp_path / "g.fa", "--tss", tmp_path / "t.bed",
                  "--out", tmp_path / "e"],
                 ["train", "--fasta", tmp_path / "g.fa", "--tss", tmp_path / "t.bed", "--out", tmp_path / "r",
                  "--set", "window_bp=1024", "--set", "steps=1"]):
        r = run(*args, "--circular", "chrA,chrZ")
        assert r.exit_code != 0 and "Traceback" not in r.output, r.output
        (line,) = [x for x in r.output.splitlines() if "error" in x]
        assert "--circular" in line and "'chrZ'" in line and "chrA" in line, r.output
    assert not (tmp_path / "p.plus.bedGraph").exists()
    r = run("train", "--csv", tmp_path / "x.csv", "--out", tmp_path / "s", "--circular", "all")
    assert r.exit_code != 0 and "--circular" in r.output and "Traceback" not in r.output


def test_train_on_a_circle_saves_the_option(tmp_path):
    """A short training run on a circular genome validated on another: --circular goes into config.json (resume
    reads it back) and the run trains and validates."""
    import json

    from genolin.checkpoint import read_run_config

    (rec,) = read_fasta(ECOLI_BGZ)
    write_fasta(tmp_path / "g.fa", {"g": rec.seq[:12_000].decode()})
    write_fasta(tmp_path / "v.fa", {"v": rec.seq[60_000:66_000].decode()})
    (tmp_path / "g.bed").write_text("g\t3\t4\tt\t0\t+\ng\t11990\t11991\tt\t0\t-\n")
    (tmp_path / "v.bed").write_text("v\t10\t11\tt\t0\t+\n")
    r = run("train", "--fasta", tmp_path / "g.fa", "--tss", tmp_path / "g.bed", "--val-fasta", tmp_path / "v.fa",
            "--val-tss", tmp_path / "v.bed", "--circular", "g", "--circular", "v", "--out", tmp_path / "run",
            "--set", "window_bp=1024", "--set", "batch_size=2", "--set", "d_model=16", "--set", "steps=2",
            "--set", "val_every_steps=2", "--set", "warmup_steps=1")
    assert r.exit_code == 0, r.output
    assert read_run_config(tmp_path / "run").data.circular == ["g", "v"]
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["data"]["circular"] == ["g", "v"] and saved["train_contigs"] == [["g", 12_000, 12_000]]
    assert saved["circular_contigs"] == [["g", 12_000], ["v", 6_000]]
    # predict reads a contig training read as circular (same name and length) as circular without being told;
    # the same sequence under another name is linear unless named
    write_fasta(tmp_path / "w.fa", {"w": rec.seq[60_000:66_000].decode()})
    tracks = {}
    for name, fasta, extra in (("auto", "v.fa", []), ("named", "v.fa", ["--circular", "v"]), ("other", "w.fa", []),
                               ("other_named", "w.fa", ["--circular", "w"])):
        r = run("predict", "--model", tmp_path / "run", "--fasta", tmp_path / fasta, "--out", tmp_path / name, *extra)
        assert r.exit_code == 0, r.output
        tracks[name] = [line.split("\t")[1:] for line in (tmp_path / f"{name}.plus.bedGraph").read_text().splitlines()
                        if not line.startswith("track")]
    assert tracks["auto"] == tracks["named"] == tracks["other_named"] != tracks["other"]
    # a damaged circular_contigs in config.json is one line naming the file (hypothesis found -1 an internal error)
    for bad in (-1, "x", [["v"]], [["v", 0]], [["v", True]], [[1, 6_000]], {"v": 6_000}):
        damaged = tmp_path / f"damaged_{len(str(bad))}"
        shutil.copytree(tmp_path / "run", damaged, dirs_exist_ok=True)
        (damaged / "config.json").write_text(json.dumps({**saved, "circular_contigs": bad}))
        r = run("predict", "--model", damaged, "--fasta", tmp_path / "v.fa", "--out", tmp_path / "bad")
        assert r.exit_code != 0 and "circular_contigs is" in r.output and "internal error" not in r.output, r.output


# --- explain ----------------------------------------------------------------------------------------------------


def test_explain_reads_a_circle_across_its_origin_as_a_rotated_copy(tmp_path):
    """ISM of a region near the origin of a circular contig (its training window of context runs across the origin)
    equals ISM of the same bases in a rotated linear copy, where that context lies inside the contig; without
    --circular the context is clipped at 0 and the attributions differ."""
    n, rot = 5_000, 3_000
    seq = random_seq(n, 11)
    write_fasta(tmp_path / "circle.fa", {"c": seq})
    write_fasta(tmp_path / "rotated.fa", {"c": seq[-rot:] + seq[:-rot]})  # circle position p is p + rot here
    (tmp_path / "circle.bed").write_text("c\t95\t96\tr1\t0\t+\nc\t4980\t4981\tr2\t0\t-\n")
    (tmp_path / "rotated.bed").write_text(f"c\t{95 + rot}\t{96 + rot}\tr1\t0\t+\nc\t{4980 + rot - n}\t{4981 + rot - n}"
                                          f"\tr2\t0\t-\n")
    got = {}
    for name, extra in (("circle", ["--circular", "all"]), ("rotated", []), ("clipped", [])):
        genome = "circle" if name == "clipped" else name
        r = run("explain", "--model", V1_TRACK, "--fasta", tmp_path / f"{genome}.fa", "--regions",
                tmp_path / f"{genome}.bed", "--flank", 10, "--out", tmp_path / name, "--device", "cpu", *extra)
        assert r.exit_code == 0, r.output
        with np.load(tmp_path / name / "ism.npz") as z:
            got[name] = {k: z[k] for k in z.files}
    assert sorted(got["circle"]) == sorted(got["rotated"]) and len(got["circle"]) == 2
    for key in got["circle"]:
        assert got["circle"][key].shape == (21, 4)
        np.testing.assert_allclose(got["circle"][key], got["rotated"][key], rtol=1e-5, atol=1e-6)
    assert not np.allclose(got["clipped"]["r1"], got["circle"]["r1"], atol=1e-4)


# --- window offsets (--offset-average) ----------------------------------------------------------------------


@pytest.mark.parametrize(("length", "circular"), [(20_001, False), (20_001, True), (1_000, False), (7, True)])
@pytest.mark.parametrize("offset", [1, 100, 383])
def test_offset_tilings_keep_every_bin_once_with_context(tmp_path, length, circular, offset):
    """A tiling moved by ``offset`` bins (below the step of 384) keeps every bin once, in order, with the margin's
    context inside a region; its window boundaries differ from the plain tiling's."""
    from genolin.inference.windows import plan_batches

    write_fasta(tmp_path / "g.fa", {"c": random_seq(length, 1)})
    data = TrackData(Genome(tmp_path / "g.fa"), [], window_bp=2_048, k=6, stride=4,
                     circular=["c"] if circular else [])
    plans = [[x for batch in plan_batches(data, [("c", 0, length)], None, 3, o) for x in batch] for o in (0, offset)]
    for plan in plans:
        kept = np.concatenate([np.arange(keep_from, keep_to) for _, keep_from, keep_to in plan])
        assert kept.tolist() == list(range(-(-length // 4)))
        for w, keep_from, keep_to in plan:
            first = w.start // 4
            assert w.bins <= 512 and (not circular or (keep_from - first >= 64 and first + w.bins - keep_to >= 64))
    if length > 4 * 512:
        assert {k for _, k, _ in plans[0]} != {k for _, k, _ in plans[1]}


def test_offsets_averaged_is_the_mean_of_passes_cut_anywhere():
    from genolin.inference.windows import offsets_averaged

    rng = np.random.default_rng(3)
    contigs = {"a": 1_000, "b": 37}
    truth = [{c: rng.random((n, 2)).astype(np.float32) for c, n in contigs.items()} for _ in range(3)]

    def pieces(values):  # the contigs in order, cut at random places
        for c, n in contigs.items():
            at = 0
            while at < n:
                size = int(rng.integers(0, 90))  # empty pieces too
                yield c, at, values[c][at:at + size]
                at += size

    got = {c: np.full((n, 2), np.nan) for c, n in contigs.items()}
    for c, first, probs in offsets_averaged([pieces(v) for v in truth]):
        assert np.isnan(got[c][first:first + len(probs)]).all()
        got[c][first:first + len(probs)] = probs
    for c in contigs:
        want = np.mean([v[c].astype(np.float64) for v in truth], axis=0)
        assert np.abs(got[c] - want).max() <= 1e-6 * np.abs(want).max()
    with pytest.raises(RuntimeError, match="out of step"):
        list(offsets_averaged([pieces(truth[0]), iter([("b", 0, truth[1]["b"])])]))


def test_offset_average_is_the_mean_of_the_offset_passes(tmp_path, float64_run):
    """--offset-average 3 through the predictor: the mean of three single passes at the offsets 0, 128 and 256 bins,
    each a track of its own (windows placed elsewhere give other values inside the contig); on a circle and a
    line."""
    from genolin.inference.windows import window_offsets

    (rec,) = read_fasta(ECOLI_BGZ)
    seq = rec.seq[200_000:230_001].decode()
    cfg = float64_run.config.train
    for name, headers in (("line", {}), ("circle", {"c": "topology=circular"})):
        write_fasta(tmp_path / f"{name}.fa", {"c": seq}, headers)
        data = TrackData.load([str(tmp_path / f"{name}.fa")], [], cfg)
        offsets = window_offsets(data, None, 3)
        assert offsets == [0, 128, 256]
        passes = []
        for o in offsets:
            out = np.full((-(-len(seq) // 4), 2), np.nan)
            for _, first, probs in float64_run.predictor.windows.region_probs(data, data.whole(), True, False, o):
                out[first:first + len(probs)] = probs
            passes.append(out)
        float64_run.predictor.window_offsets = 3
        try:
            averaged = track_of(float64_run, data)
        finally:
            float64_run.predictor.window_offsets = 1
        want = np.mean(passes, axis=0)
        assert np.abs(averaged - want).max() <= 1e-6 * np.abs(want).max()
        assert np.abs(passes[0] - passes[1]).max() > 1e-3 * np.abs(passes[0]).max()  # tilings differ inside
