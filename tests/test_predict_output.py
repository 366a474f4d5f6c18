"""Track outputs of ``genolin predict``: run merging against a per-bin reference, bigWig equal to bedGraph on a
genome of several contigs, and no partial bigWig when prediction fails."""

from __future__ import annotations

import contextlib

import numpy as np
import pyBigWig
import pytest
from click.testing import CliRunner
from conftest import FIXTURES, NEEDS_COMPILER
from hypothesis import given, settings
from hypothesis import strategies as st

from genolin.cli import cli
from genolin.io.bedgraph import Runs
from genolin.io.fasta import read_fasta

V1_TRACK = FIXTURES / "v1_runs" / "track_run"


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def per_base(runs: list, lengths: dict[str, int]) -> dict[str, np.ndarray]:
    out = {c: np.full(n, np.nan) for c, n in lengths.items()}
    for contig, start, end, value in runs:
        assert np.isnan(out[contig][start:end]).all(), "runs overlap"
        out[contig][start:end] = value
    return out


def bedgraph_runs(path) -> list:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("track type=bedGraph")
    return [(c, int(s), int(e), float(v)) for c, s, e, v in (line.split("\t") for line in lines[1:])]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_runs_equal_the_bins_they_merge(data):
    """Pieces of random values (few distinct, so runs cross piece ends) in contig order: the runs cover every base
    once, carry the rounded bin value, and neighbouring runs of a contig differ in value."""
    stride = data.draw(st.integers(1, 5))
    lengths = {f"c{i}": data.draw(st.integers(1, 60)) for i in range(data.draw(st.integers(1, 3)))}
    runs, chunks = Runs(), []
    want = {}
    for contig, length in lengths.items():
        bins = -(-length // stride)
        values = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.123449, 0.12345, 1.0]), min_size=bins,
                                             max_size=bins)))
        want[contig] = np.repeat(np.round(values, 4), stride)[:length]
        cuts = sorted(data.draw(st.sets(st.integers(1, max(bins - 1, 1)), max_size=4))) if bins > 1 else []
        for a, b in zip([0, *cuts], [*cuts, bins], strict=True):
            chunks += runs.add(contig, a, values[a:b], stride, length)
        chunks += runs.flush()
    flat = [(c, s, e, v) for c, ss, ee, vv in chunks for s, e, v in zip(ss, ee, vv, strict=True)]
    got = per_base(flat, lengths)
    for contig in lengths:
        np.testing.assert_array_equal(got[contig], want[contig])
        mine = [r for r in flat if r[0] == contig]
        assert all(a[3] != b[3] and a[2] == b[1] for a, b in zip(mine, mine[1:], strict=False))


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_bedgraph_writer_stretches_join_their_runs(data):
    """The writer's stretches (any size, cut anywhere by pieces and contig ends) give the runs of the bins: every
    base once, the rounded bin value, neighbouring lines of a contig different in value."""
    import io

    from genolin.io.bedgraph import BedGraphWriter

    stride = data.draw(st.integers(1, 5))
    lengths = {f"c{i}": data.draw(st.integers(1, 60)) for i in range(data.draw(st.integers(1, 3)))}
    fh = io.BytesIO()
    want = {}
    with BedGraphWriter(fh, "t", "0,0,0", batch_bins=data.draw(st.integers(1, 20)),
                        in_flight=data.draw(st.integers(0, 3))) as w:
        for contig, length in lengths.items():
            bins = -(-length // stride)
            values = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.123449, 0.12345, 1.0]),
                                                 min_size=bins, max_size=bins)), dtype=np.float32)
            want[contig] = np.repeat(np.round(values.astype(np.float64), 4), stride)[:length]
            cuts = sorted(data.draw(st.sets(st.integers(1, max(bins - 1, 1)), max_size=4))) if bins > 1 else []
            for a, b in zip([0, *cuts], [*cuts, bins], strict=True):
                w.add(contig, a, values[a:b], stride, length)
            w.flush()
    lines = fh.getvalue().decode().splitlines()
    assert lines[0].startswith("track type=bedGraph")
    flat = [(c, int(a), int(b), float(v)) for c, a, b, v in (line.split("\t") for line in lines[1:])]
    got = per_base(flat, lengths)
    for contig in lengths:
        np.testing.assert_array_equal(got[contig], want[contig])
        mine = [r for r in flat if r[0] == contig]
        assert all(a[3] != b[3] and a[2] == b[1] for a, b in zip(mine, mine[1:], strict=False))


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_bedgraph_lines_are_the_lines_formatted_one_by_one(data):
    """The byte-matrix formatting (and its reused buffers, called again with other sizes) gives the text of
    formatting each run alone: runs that meet or not, numbers of any width from 0 up, probabilities at 4
    decimals (the table) or any floats (their own table), contig names of any length."""
    from genolin.io.bedgraph import bedgraph_lines

    for _ in range(2):
        n = data.draw(st.integers(1, 40))
        width = data.draw(st.integers(1, 12))
        top = 10**width
        starts = np.array(sorted(data.draw(st.lists(st.integers(0, top - 1), min_size=n, max_size=n))), np.int64)
        if data.draw(st.booleans()):  # runs that meet, as a stretch's do
            ends = np.append(starts[1:], starts[-1] + data.draw(st.integers(0, 5)))
        else:
            ends = starts + np.array(data.draw(st.lists(st.integers(0, 99), min_size=n, max_size=n)), np.int64)
        if data.draw(st.booleans()):
            vals = np.array(data.draw(st.lists(st.integers(0, 10**4), min_size=n, max_size=n))) / 10**4
        else:
            vals = np.array(data.draw(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=n, max_size=n)))
        contig = data.draw(st.text("ACchr_.0123456789", min_size=1, max_size=20))
        want = "".join(f"{contig}\t{a}\t{b}\t{v:g}\n" for a, b, v in zip(starts, ends, vals, strict=True))
        assert bedgraph_lines(contig, starts, ends, vals).decode() == want


@pytest.fixture(scope="module")
def two_contigs(tmp_path_factory):
    """A genome of two contigs (12 kb, and 7,001 bp with a run of 300 N) cut from the bundled E. coli genome."""
    from conftest import ECOLI_BGZ

    (rec,) = read_fasta(ECOLI_BGZ)
    d = tmp_path_factory.mktemp("two")
    b = rec.seq[50_000:57_001].decode()
    seqs = {"chrA": rec.seq[:12_000].decode(), "chrB": b[:3001] + "N" * 300 + b[3301:]}
    (d / "g.fa").write_text("".join(f">{c}\n{s}\n" for c, s in seqs.items()))
    return d / "g.fa", {c: len(s) for c, s in seqs.items()}


def test_bigwig_holds_the_bedgraph_values(tmp_path, two_contigs):
    fasta, lengths = two_contigs
    r = run("predict", "--model", V1_TRACK, "--fasta", fasta, "--out", tmp_path / "bg", "--rc-average",
            "--threshold", "0.0")
    assert r.exit_code == 0, r.output
    r = run("predict", "--model", V1_TRACK, "--fasta", fasta, "--out", tmp_path / "bw", "--rc-average",
            "--threshold", "0.0", "--format", "bigwig")
    assert r.exit_code == 0, r.output
    peaks = [(tmp_path / f"{o}.peaks.bed").read_text().splitlines() for o in ("bg", "bw")]
    assert peaks[0][1:] == peaks[1][1:] and len(peaks[0]) > 1
    for strand in ("plus", "minus"):
        want = per_base(bedgraph_runs(tmp_path / f"bg.{strand}.bedGraph"), lengths)
        bw = pyBigWig.open(str(tmp_path / f"bw.{strand}.bw"))
        assert bw.chroms() == lengths
        for contig, n in lengths.items():
            assert not np.isnan(want[contig]).any()
            got = np.array(bw.values(contig, 0, n))
            np.testing.assert_allclose(got, want[contig], rtol=0, atol=1e-7)
        bw.close()
    assert not list(tmp_path.glob(".*tmp"))


def test_bedgraph_formatted_by_a_process_pool_is_the_same_file(tmp_path, two_contigs, monkeypatch):
    """predict on a machine with cores to spare formats lines in a process pool: the files equal the in-process
    writer's, byte for byte (batches small enough that several are in flight)."""
    import genolin.io.bedgraph as bedgraph

    fasta, _ = two_contigs
    assert bedgraph.format_workers(2) == 0 and bedgraph.format_workers(6) == 3 and bedgraph.format_workers(64) == 8
    r = run("predict", "--model", V1_TRACK, "--fasta", fasta, "--out", tmp_path / "one")
    assert r.exit_code == 0, r.output
    monkeypatch.setattr(bedgraph, "format_workers", lambda: 2)
    monkeypatch.setattr(bedgraph, "POOL_MIN_BINS", 0)  # a small genome: formatted in process otherwise
    monkeypatch.setattr(bedgraph.BedGraphWriter.__init__, "__defaults__", (64, None, 2))
    r = run("predict", "--model", V1_TRACK, "--fasta", fasta, "--out", tmp_path / "pool")
    assert r.exit_code == 0, r.output
    for suffix in ("plus.bedGraph", "minus.bedGraph", "peaks.bed"):
        one, pool = ((tmp_path / f"{o}.{suffix}").read_text().splitlines() for o in ("one", "pool"))
        assert one[1:] == pool[1:] and (len(one) > 1000 or suffix == "peaks.bed"), suffix


def test_small_genomes_format_their_lines_without_a_process_pool(tmp_path, two_contigs, monkeypatch):
    """A pool costs its start and end (spawned interpreters): below POOL_MIN_BINS, predict formats in process."""
    from concurrent.futures import ProcessPoolExecutor

    import genolin.io.bedgraph as bedgraph

    with bedgraph.format_pool(2, bins=bedgraph.POOL_MIN_BINS - 1) as pool:
        assert pool is None
    with bedgraph.format_pool(2, bins=bedgraph.POOL_MIN_BINS) as pool:
        assert isinstance(pool, ProcessPoolExecutor)
    monkeypatch.setattr(bedgraph, "format_workers", lambda: 2)
    monkeypatch.setattr(ProcessPoolExecutor, "__init__", lambda *a, **k: pytest.fail("a pool was started"))
    fasta, _ = two_contigs
    r = run("predict", "--model", V1_TRACK, "--fasta", fasta, "--out", tmp_path / "one")
    assert r.exit_code == 0, r.output


def test_failed_bigwig_prediction_leaves_nothing(tmp_path):
    bad = tmp_path / "bad.fa"
    bad.write_text(">chrA\n" + "ACGT" * 3000 + "\n>chrB\nACGTXYZ!\n")
    r = run("predict", "--model", V1_TRACK, "--fasta", bad, "--out", tmp_path / "o", "--format", "bigwig")
    assert r.exit_code != 0 and "Traceback" not in r.output and "bad.fa" in r.output, r.output
    assert not list(tmp_path.glob("o*")) and not list(tmp_path.glob(".o*"))




@pytest.mark.parametrize(("compiled", "model_threads", "window_bp"), [
    (False, 1, None), (False, 3, None), (False, 1, 4096), (False, 2, 2052), ("fixed", 1, None), ("fixed", 2, 4096),
    pytest.param(True, 2, None, marks=[pytest.mark.slow, NEEDS_COMPILER])])
def test_batched_pipelined_windows_equal_one_window_at_a_time(two_contigs, compiled, model_threads, window_bp,
                                                              monkeypatch):
    """region_probs (background tokens, forward and RC in one padded batch, batches on ``model_threads`` model
    threads at once, handed back in order; with ``compiled``, torch.compile and batches padded to one shape;
    with ``window_bp``, windows longer than the training's 2,048 bp; "fixed": batches padded to one shape, as
    compiled blocks and CUDA graphs take them, the reverse complements from row batch_size) against a plain loop:
    each window alone through the eager model, its reverse complement alone, averaged; every bin covered once."""
    import torch

    import genolin.inference.genome
    from genolin.inference import load_run
    from genolin.tasks.track import TrackData

    monkeypatch.setattr(genolin.inference.genome, "cpu_model_threads", lambda: (model_threads, 1))
    fasta, lengths = two_contigs
    batch_size = 5 if model_threads == 1 else 1 + 2 * (compiled == "fixed")
    run = load_run(V1_TRACK, "cpu", batch_size=batch_size, compile=compiled is True, window_bp=window_bp)
    if compiled == "fixed":
        run.predictor.compiled = True  # fixed shapes, the eager model
    data = TrackData.load([str(fasta)], [], run.config.train)
    got = {c: np.full((-(-n // data.stride), 2), np.nan, np.float32) for c, n in lengths.items()}
    pieces = list(run.predictor.region_probs(data, data.whole(), rc_average=True, progress=False))
    for contig, first, probs in pieces:
        got[contig][first:first + len(probs)] = probs
    # a batch's windows of one contig come as one piece: one per (batch, contig) the plan's batches touch
    batches = list(run.predictor.windows.plan(data, data.whole()))
    assert len(pieces) == sum(len({w.contig for w, _, _ in batch}) for batch in batches)
    eager = load_run(V1_TRACK, "cpu") if compiled is True else run  # compiling changes the run's blocks in place
    model, task = eager.model, eager.task
    plan = [x for batch in run.predictor.windows.plan(data, data.whole()) for x in batch]
    assert max(w.bins for w, _, _ in plan) == (window_bp or 2048) // data.stride
    for (w, keep_from, keep_to) in plan:
        with torch.no_grad():
            fwd = task.probabilities(model(torch.from_numpy(data.tokens(w)[None].astype(np.int64))))[0].numpy()
            rc = task.probabilities(model(torch.from_numpy(data.tokens(w, rc=True)[None].astype(np.int64))))[0]
        want = 0.5 * (fwd + rc.numpy()[::-1, ::-1])
        want[data.all_n_bins(w, data.bases(w))] = 0.0
        first = w.start // data.stride
        np.testing.assert_allclose(got[w.contig][keep_from:keep_to], want[keep_from - first:keep_to - first],
                                   rtol=1e-5, atol=1e-6)
    assert not any(np.isnan(v).any() for v in got.values())


def test_bf16_weights_predict_the_float32_values(two_contigs):
    """load_run(bf16_weights=True) (the default for track runs on CUDA that trained under autocast): weights and
    residual stream in bfloat16, the norms' float32 epsilon kept; probabilities within 0.01 of float32's. The
    default on a CPU keeps float32 for this run, whose weights are stored in float32 (``inference_bf16``), and
    explain's load keeps it on any device."""
    import torch

    from genolin.inference import load_run
    from genolin.tasks.track import TrackData

    fasta, _ = two_contigs
    out = {}
    for bf16 in (None, True):
        run = load_run(V1_TRACK, "cpu", bf16_weights=bf16)
        assert {p.dtype for p in run.model.parameters()} == {torch.bfloat16 if bf16 else torch.float32}
        if bf16:
            assert all(b.norm1.eps == b.norm2.eps == torch.finfo(torch.float32).eps for b in run.model.blocks)
        data = TrackData.load([str(fasta)], [], run.config.train)
        pieces = run.predictor.region_probs(data, data.whole(), rc_average=True, progress=False)
        out[bf16] = np.concatenate([p for _, _, p in pieces])
    assert out[True].shape == out[None].shape and np.isfinite(out[True]).all()
    assert np.abs(out[True] - out[None]).max() < 0.01


@pytest.mark.parametrize(("model", "window", "message"), [
    (V1_TRACK, "2050", "multiple of the stride"), (V1_TRACK, "1024", "at least the training window"),
    (FIXTURES / "v1_runs" / "seq_run", "4096", "track models")])
def test_window_bp_a_run_cannot_use_is_one_clear_error(tmp_path, two_contigs, model, window, message):
    fasta, _ = two_contigs
    r = run("predict", "--model", model, "--fasta", fasta, "--out", tmp_path / "p", "--window-bp", window)
    assert r.exit_code != 0 and "--window-bp" in r.output and message in r.output, r.output
    assert "Traceback" not in r.output and not list(tmp_path.iterdir())


def test_cpu_model_threads_share_the_cores_and_restore_torch_threads():
    import torch

    from genolin.inference.pipeline import CPU_MODEL_THREADS, cpu_model_threads, intra_op_threads

    assert cpu_model_threads(1) == (1, 1) and cpu_model_threads(2) == (2, 1)
    assert cpu_model_threads(4 * CPU_MODEL_THREADS) == (CPU_MODEL_THREADS, 4)
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), intra_op_threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError
    assert torch.get_num_threads() == before


def test_pieces_computed_ahead_come_in_order_and_stop_with_the_caller():
    """computed_ahead: every item in order; an error of the producing generator comes out of the caller's loop
    (after the items before it); a caller that stops early (an error, a break) closes the generator on its thread."""
    import threading

    import torch

    from genolin.errors import InputError
    from genolin.inference import computed_ahead

    cpu, seen = torch.device("cpu"), {}

    def items(n: int, fail_at: int | None = None):
        seen["thread"] = threading.current_thread().name
        try:
            for i in range(n):
                if i == fail_at:
                    raise InputError("g.fa", "record 'b': bad bases")
                yield i
        finally:
            seen["closed"] = True

    assert list(computed_ahead(items(50), cpu, 3)) == list(range(50))
    assert seen == {"thread": "genolin-pieces", "closed": True}
    got = []
    with pytest.raises(InputError, match="record 'b'"):
        for i in computed_ahead(items(50, fail_at=7), cpu, 2):
            got.append(i)
    assert got == list(range(7))
    for stop in ("break", "error"):
        seen.clear()
        with pytest.raises(ValueError) if stop == "error" else contextlib.nullcontext():
            for i in computed_ahead(items(10**9), cpu, 2):
                if i == 5:
                    if stop == "error":
                        raise ValueError("the writer failed")
                    break
        assert seen["closed"]  # the producer ended (joined), the generator closed on its own thread
    assert not any(t.name == "genolin-pieces" for t in threading.enumerate())


@pytest.fixture(scope="module")
def four_contigs(tmp_path_factory, two_contigs):
    """two_contigs' and two more (8 kb each): 35,001 bp that cut into two runs of contigs within 15 % of even."""
    from conftest import ECOLI_BGZ

    (rec,) = read_fasta(ECOLI_BGZ)
    d = tmp_path_factory.mktemp("four")
    extra = {"chrC": rec.seq[100_000:108_000].decode(), "chrD": rec.seq[200_000:208_000].decode()}
    (d / "g.fa").write_text(two_contigs[0].read_text() + "".join(f">{c}\n{s}\n" for c, s in extra.items()))
    return d / "g.fa", {**two_contigs[1], **{c: len(s) for c, s in extra.items()}}


# about 10 s each (a torchrun of two or three processes): the default run keeps two cases, the slow run the others
@pytest.mark.parametrize("genome, fmt, ranks", [
    ("two_contigs", "bedgraph", 2), ("four_contigs", "bigwig", 2),
    pytest.param("four_contigs", "bedgraph", 2, marks=pytest.mark.slow),
    pytest.param("two_contigs", "bedgraph", 3, marks=pytest.mark.slow)])
def test_torchrun_prediction_writes_what_one_process_writes(tmp_path, genome, fmt, ranks, request):
    """`torchrun --nproc-per-node 2 -m genolin predict` (gloo on CPU), the files equal one process's: the ranks
    share the batches (two contigs of 12 and 7 kb: an odd number of batches, so a rank idles in the last round),
    each gets every bin, rank 0 writes the plus strand and the calls, rank 1 the minus strand, moved into place by
    rank 0 (a third rank only computes); no part is left."""
    import os
    import subprocess
    import sys

    fasta, lengths = request.getfixturevalue(genome)
    args = ["-q", "predict", "--model", str(V1_TRACK), "--fasta", str(fasta), "--device", "cpu", "--rc-average",
            "--batch-size", "2", "--threshold", "0.0", "--format", fmt]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one = subprocess.run([sys.executable, "-m", "genolin", *args, "--out", str(tmp_path / "one")], env=env,
                         capture_output=True, text=True)
    assert one.returncode == 0, one.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                          str(ranks), "-m", "genolin", *args[1:], "--out", str(tmp_path / "two")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    shared = [line for line in two.stderr.splitlines() if f"shared over {ranks} processes" in line]
    assert len(shared) == 1 and "rank 1 the minus strand" in shared[0], two.stderr[-3000:]
    tracks = ("plus.bedGraph", "minus.bedGraph") if fmt == "bedgraph" else ("plus.bw", "minus.bw")
    for suffix in (*tracks, "peaks.bed", "gff3"):
        if suffix.endswith(".bw"):
            a, b = (pyBigWig.open(str(tmp_path / f"{w}.{suffix}")) for w in ("one", "two"))
            assert a.chroms() == b.chroms() == lengths
            for contig, n in lengths.items():
                assert a.values(contig, 0, n) == b.values(contig, 0, n), (suffix, contig)
            continue
        a = (tmp_path / f"one.{suffix}").read_text().splitlines()
        b = (tmp_path / f"two.{suffix}").read_text().splitlines()
        assert a[1:] == b[1:] and len(a) > 2 and b[0] == a[0].replace("one", "two"), suffix  # headers: the names
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{w}.{s}" for w in ("one", "two") for s in (*tracks, "peaks.bed", "gff3"))


def test_torchrun_prediction_of_bad_input_fails_cleanly(tmp_path, four_contigs):
    """A bad base in the last contig: the ranks (each reads every window's bases) name the record, or one of them
    says a peer stopped (not gloo's error); the exit status is non-zero and nothing is left beside the genome (no
    outputs, no parts)."""
    import os
    import subprocess
    import sys

    fasta, _ = four_contigs
    text = fasta.read_text().replace(">chrD\n", ">chrD\nACGTX", 1)
    bad = tmp_path / "bad.fa"
    bad.write_text(text)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "-m", "genolin", "predict", "--model", str(V1_TRACK), "--fasta", str(bad), "--device", "cpu",
                        "--batch-size", "2", "--out", str(tmp_path / "out" / "o")],
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    errors = [line for line in r.stderr.splitlines() if line.startswith("genolin: error:")]
    assert r.returncode != 0 and "internal error" not in r.stderr, r.stderr[-3000:]
    assert any("bad.fa: record 'chrD'" in e for e in errors), r.stderr[-3000:]
    # a rank that did not get there first stops at a collective when its peer is gone, or by torchrun's SIGTERM
    assert all("bad.fa: record 'chrD'" in e or e.endswith("(its error is above)") for e in errors), r.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.name != "bad.fa.fai") in (["bad.fa"], ["bad.fa", "out"])
    assert not list((tmp_path / "out").glob("*")) if (tmp_path / "out").exists() else True


def test_bigwig_that_cannot_be_written_is_one_clear_error(tmp_path, two_contigs):
    """The bigWig writers run in child processes: their failure comes back as the usual one-line error naming
    the output, with a non-zero exit and nothing written."""
    fasta, _ = two_contigs
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    r = run("predict", "--model", V1_TRACK, "--fasta", fasta, "--out", blocker / "o", "--format", "bigwig")
    assert r.exit_code != 0 and "Traceback" not in r.output and "internal error" not in r.output, r.output
    assert str(blocker / "o") in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_bedgraph_batches_and_value_table_change_no_byte(tmp_path):
    """Runs written in batches (any batch size), formatted by a process pool (any number in flight; the workers'
    part files copied into a file, or read into a buffer) and probabilities formatted from the cached table give
    the text of formatting each run alone with {v:g}; no part file is left."""
    import io

    import numpy as np

    from genolin.io.bedgraph import BedGraphWriter, format_pool

    rng = np.random.default_rng(1)
    pieces = [("chrA", 0, rng.choice([0.0, 0.25, 1.0, 0.12345, 0.00004], 700)), ("chrA", 700, rng.random(333)),
              ("chrB", 0, rng.random(51))]
    texts = []
    with format_pool(2) as pool:
        assert pool is not None
        for batch, in_flight, use_pool, to_file in ((1, 8, False, False), (7, 8, False, False),
                                                    (1 << 16, 8, False, False), (7, 1, True, False),
                                                    (5, 3, True, True), (1 << 16, 8, True, True), (7, 2, True, True)):
            path = tmp_path / f"{len(texts)}.bedGraph"
            fh = open(path, "wb") if to_file else io.BytesIO()
            with BedGraphWriter(fh, "t", "0,0,0", batch_bins=batch, pool=pool if use_pool else None,
                                in_flight=in_flight) as w:
                for contig, first, vals in pieces:
                    length = (first + len(vals)) * 4 - 1 if contig == "chrA" and first else (len(vals) * 4 - 2)
                    w.add(contig, first, vals, 4, length)
                    if contig == "chrB" or first:
                        w.flush()
            if to_file:
                fh.close()
            texts.append(path.read_text() if to_file else fh.getvalue().decode())
    assert all(t == texts[0] for t in texts[1:])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["4.bedGraph", "5.bedGraph", "6.bedGraph"]
    for line in texts[0].splitlines()[1:]:
        value = line.split("\t")[3]
        assert value == f"{float(value):g}" and float(value) == round(float(value), 4)


def test_bedgraph_writer_failing_midway_leaves_no_part_files(tmp_path):
    """An error while a process pool formats stretches: the writer waits for the workers it started and removes
    their part files with their folder (the caller's atomic_open removes the output itself)."""
    import numpy as np

    from genolin.io.bedgraph import BedGraphWriter, format_pool

    rng = np.random.default_rng(2)
    with format_pool(2) as pool, open(tmp_path / "t.bedGraph", "wb") as fh:
        with pytest.raises(RuntimeError, match="stop"), BedGraphWriter(fh, "t", "0,0,0", batch_bins=50, pool=pool,
                                                                       in_flight=6) as w:
            for first in range(0, 2000, 100):
                w.add("chrA", first, rng.random(100), 2, 4000)
            raise RuntimeError("stop")
    assert [p.name for p in tmp_path.iterdir()] == ["t.bedGraph"]


@pytest.mark.parametrize("batch_bins", [1, 7, 65536])
def test_background_bigwig_gathers_pieces_into_the_same_file(tmp_path, batch_bins):
    """The background writer gathers pieces that continue one another into stretches (sent when ``batch_bins``
    long, at a gap, at a contig's change, at flush and at the end): its file holds what the in-process writer
    writes from the pieces one by one (a gap, two contigs, a contig whose last bin is short of the stride)."""
    from genolin.io.bigwig import BackgroundBigWigWriter, BigWigWriter

    lengths, stride = {"chrA": 103, "chrB": 50}, 4
    g = np.random.default_rng(batch_bins)
    pieces = [("chrA", 0, g.random(5)), ("chrA", 5, g.random(9)), ("chrA", 16, g.random(10)),  # a gap: bins 14, 15
              ("chrB", 0, g.random(6)), ("chrB", 6, g.random(7))]  # chrA's bin 25 ends at 103, chrB's 12 at 50
    for writer, name in ((BigWigWriter, "one"), (BackgroundBigWigWriter, "gathered")):
        kwargs = {"batch_bins": batch_bins} if name == "gathered" else {}
        with writer(tmp_path / f"{name}.bw", lengths, **kwargs) as w:
            for contig, first, values in pieces:
                w.add(contig, first, values.copy(), stride, lengths[contig])
                if contig == "chrA" and first == 16:
                    w.flush()
    one, gathered = (pyBigWig.open(str(tmp_path / f"{n}.bw")) for n in ("one", "gathered"))
    for contig, n in lengths.items():
        want = np.array(one.values(contig, 0, n))
        assert np.isfinite(want).sum() > 0.8 * n
        np.testing.assert_array_equal(np.array(gathered.values(contig, 0, n)), want)
    assert one.intervals("chrA") == gathered.intervals("chrA")


def test_bedgraph_header_lets_the_browser_scale_to_the_values():
    """Promoter probabilities mostly stay far below 1: a fixed 0-1 view would draw them as a flat line."""
    import io

    from genolin.io.bedgraph import BedGraphWriter

    fh = io.BytesIO()
    with BedGraphWriter(fh, "t", "0,0,0") as w:
        w.add("chrA", 0, np.array([0.01, 0.2, 0.05], np.float32), 4, 12)
        w.flush()
    header = fh.getvalue().decode().splitlines()[0]
    assert "autoScale=on" in header and "viewLimits" not in header


@pytest.mark.parametrize("fails", [False, True])
def test_graphs_are_captured_before_the_pipeline_threads_start(two_contigs, monkeypatch, caplog, fails):
    """CUDA graphs (here a stand-in that records where it captures and replays by calling the forward) are captured,
    with padding and without, on the caller's thread before any batch is read; a capture that fails turns them
    off for the whole run with one warning and every batch keeps the graphs' shape, so the values are the same."""
    import threading

    import genolin.inference.genome
    from genolin.inference import GraphCaptureError, load_run
    from genolin.inference.genome import GenomeWindows
    from genolin.tasks.track import TrackData

    events = []

    class StandIn:
        def __init__(self, forward, device):
            self.forward, self.graphs = forward, {}

        def capture(self, flags, *inputs):
            events.append(("capture", threading.current_thread().name, flags[0]))
            if fails:
                raise GraphCaptureError("operation not permitted when stream is capturing")
            self.graphs[flags] = tuple(t.shape for t in inputs)

        def __call__(self, flags, *inputs):
            assert self.graphs[flags] == tuple(t.shape for t in inputs)  # every batch has the captured shape
            events.append(("replay", threading.current_thread().name, flags[0]))
            return self.forward(*flags, *inputs)

    monkeypatch.setattr(genolin.inference.genome, "GraphedForward", StandIn)
    original_tokens = GenomeWindows.tokens
    monkeypatch.setattr(GenomeWindows, "tokens", lambda self, *a: (events.append(
        ("tokens", threading.current_thread().name, None)), original_tokens(self, *a))[1])
    fasta, _ = two_contigs

    def probs():
        monkeypatch.setattr(GenomeWindows, "graphs_wanted", lambda self: True)
        run = load_run(V1_TRACK, "cpu", batch_size=3)
        data = TrackData.load([str(fasta)], [], run.config.train)
        pieces = run.predictor.region_probs(data, data.whole(), rc_average=True, progress=False)
        return np.concatenate([p for _, _, p in pieces]), run.predictor

    run = load_run(V1_TRACK, "cpu", batch_size=3)
    run.predictor.compiled = True  # the same fixed batch shape, the eager model, no graphs: the values to match
    data = TrackData.load([str(fasta)], [], run.config.train)
    fixed = np.concatenate([p for _, _, p in run.predictor.region_probs(data, data.whole(), rc_average=True,
                                                                        progress=False)])
    events.clear()
    with caplog.at_level("WARNING", logger="genolin.inference"):
        got, pred = probs()
    main = threading.current_thread().name
    captures = [e for e in events if e[0] == "capture"]
    assert captures == ([("capture", main, False)] if fails else [("capture", main, False), ("capture", main, True)])
    assert events[:len(captures) + 1] == [("tokens", main, None), *captures]  # before any reader thread's batch
    assert all(e[1] != main for e in events[len(captures) + 1:] if e[0] == "tokens")
    if fails:
        assert pred.windows.graphs is False and not any(e[0] == "replay" for e in events)
        assert sum("CUDA graphs unavailable" in r.message for r in caplog.records) == 1
    else:
        assert {e[2] for e in events if e[0] == "replay"} == {False, True}
    assert np.array_equal(got, fixed)
    # the same predictor without RC averaging: its own pair of graphs, captured on this thread before its batches
    events.clear()
    data = TrackData.load([str(fasta)], [], pred.task.cfg)
    list(pred.region_probs(data, data.whole(), rc_average=False, progress=False))
    captures = [e for e in events if e[0] == "capture"]
    assert captures == ([] if fails else [("capture", main, False), ("capture", main, True)])
    assert all(e[1] != main for e in events[len(captures) + 1:] if e[0] in ("tokens", "capture"))


@pytest.mark.parametrize("batch_size", [3, 8])
def test_graphs_are_captured_only_for_the_batch_kinds_a_genome_repeats(tmp_path, two_contigs, monkeypatch,
                                                                       batch_size):
    """One 12-kb contig: in batches of 3 windows, two full batches and one padded (the last), so only the full
    batches' graph is captured and the padded batch runs eager; in batches of 8, one padded batch and no capture at
    all. The values are those of the same fixed batch shape without graphs."""
    import genolin.inference.genome
    from genolin.inference import load_run
    from genolin.inference.genome import GenomeWindows, batch_kinds
    from genolin.tasks.track import TrackData

    events = []

    class StandIn:
        def __init__(self, forward, device):
            self.forward, self.graphs = forward, {}

        def capture(self, flags, *inputs):
            events.append(("capture", flags[0]))
            self.graphs[flags] = tuple(t.shape for t in inputs)

        def __call__(self, flags, *inputs):
            assert self.graphs[flags] == tuple(t.shape for t in inputs)
            events.append(("replay", flags[0]))
            return self.forward(*flags, *inputs)

    monkeypatch.setattr(genolin.inference.genome, "GraphedForward", StandIn)
    fasta, _ = two_contigs
    one = tmp_path / "one.fa"
    one.write_text("".join(fasta.read_text().split(">chrB")[0]))
    run = load_run(V1_TRACK, "cpu", batch_size=batch_size)
    run.predictor.compiled = True  # the fixed batch shape, no graphs: the values to match
    data = TrackData.load([str(one)], [], run.config.train)
    fixed = np.concatenate([p for _, _, p in run.predictor.region_probs(data, data.whole(), rc_average=True,
                                                                        progress=False)])
    windows = run.predictor.windows
    kinds = batch_kinds(windows.plan(data, data.whole()), batch_size, windows.window_bins(data)[0])
    assert kinds == ({False: 2, True: 1} if batch_size == 3 else {False: 0, True: 1})
    run = load_run(V1_TRACK, "cpu", batch_size=batch_size)
    monkeypatch.setattr(GenomeWindows, "graphs_wanted", lambda self: True)
    got = np.concatenate([p for _, _, p in run.predictor.region_probs(data, data.whole(), rc_average=True,
                                                                      progress=False)])
    if batch_size == 3:
        assert events == [("capture", False), ("replay", False), ("replay", False)]
    else:
        assert events == [] and run.predictor.windows.graphs is None
    assert run.predictor.windows.eager == {(True, True)}
    assert np.array_equal(got, fixed)


@pytest.fixture(scope="module")
def gappy(tmp_path_factory):
    """A genome 60 % N (20 kb of E. coli, 30 kb of N, 20 kb more, 30 kb of N), a record with no bases, a 10-bp
    contig (shorter than the training window) and a 3-bp one (shorter than k = 6)."""
    from conftest import ECOLI_BGZ

    (rec,) = read_fasta(ECOLI_BGZ)
    d = tmp_path_factory.mktemp("gappy")
    seq = rec.seq[:20_000] + b"N" * 30_000 + rec.seq[20_000:40_000] + b"N" * 30_000
    (d / "g.fa").write_text(f">chrA\n{seq.decode()}\n>empty\n>ten\nACGTACGTAC\n>three\nACG\n>blank\n\n")
    return d / "g.fa"


def test_track_predict_warns_of_what_its_outputs_lack(tmp_path, gappy):
    """Records with no bases, contigs shorter than k or than the training window, a genome 60 % N: a warning line
    each, saying what the outputs lack and how the calls are placed (each contig's quota from its whole length, N
    included, so all on its bases: 2.5 x the density there); the prediction still writes every file."""
    r = run("predict", "--model", V1_TRACK, "--fasta", gappy, "--device", "cpu", "--calls-per-mbp", 200,
            "--out", tmp_path / "p")
    assert r.exit_code == 0, r.output
    warnings = [line for line in r.output.splitlines() if line.startswith("genolin: warning:")]
    assert len(warnings) == 4, r.output
    assert f"{gappy}: 2 record(s) hold no bases (the first 'empty'): they get no track lines and no calls" in r.output
    assert ("1 contig(s) shorter than k = 6 bases (the first 'three', 3 bp): no whole k-mer, so their bins' values "
            "are the model's answer to unknown tokens") in r.output
    assert ("1 contig(s) shorter than the model's training window of 2,048 bp (the first 'ten', 10 bp): their bins "
            "see less context than training gave") in r.output
    assert (f"{gappy}: 60% of the 100,013 bases to predict are N: bins made only of N get probability 0 and no "
            "calls; each contig's calls are counted from its whole length, N included (200 per Mbp), so they fall "
            "on the other 40%: 500 per Mbp of bases (--calls-per-mbp 80 gives 200 per Mbp of bases)") in r.output
    calls = [line.split("\t") for line in (tmp_path / "p.peaks.bed").read_text().splitlines()[1:]]
    assert len(calls) == 20 and all(int(c[1]) < 20_000 or 50_000 <= int(c[1]) < 70_000 for c in calls)
    # a threshold instead of a density: N bins still get 0, with no word of a quota
    r = run("predict", "--model", V1_TRACK, "--fasta", gappy, "--device", "cpu", "--threshold", "0.5",
            "--contig", "chrA", "--out", tmp_path / "q")
    assert r.exit_code == 0 and r.output.count("warning") == 1 and "no calls\n" in r.output, r.output


def test_a_large_genome_s_n_share_is_estimated_from_a_sample(gappy, monkeypatch):
    from genolin.config import TrainConfig
    from genolin.tasks import TrackData, track_predict

    data = TrackData.load([str(gappy)], [], TrainConfig(window_bp=2048, k=6, stride=4))
    regions = data.whole()
    n, exact = track_predict.n_bases(data, regions)
    assert exact and n == 60_000
    monkeypatch.setattr(track_predict, "EXACT_N_BP", 0)
    n, exact = track_predict.n_bases(data, regions)
    assert not exact and abs(n - 60_000) < 0.02 * 100_013


def test_track_predict_checks_its_memory_before_it_reads_or_writes(tmp_path, two_contigs):
    """GENOLIN_MEMORY_GIB below what the batches of windows need: one line with the estimate, the budget and what to
    change, no output files; a budget that is no number: the variable named; a large one: predicted."""
    from click.testing import CliRunner

    from genolin.cli import cli

    fasta, _ = two_contigs

    def predict(budget, out):
        return CliRunner().invoke(cli, ["-q", "predict", "--model", str(V1_TRACK), "--fasta", str(fasta), "--device",
                                        "cpu", "--out", str(tmp_path / out)], env={"GENOLIN_MEMORY_GIB": budget})

    r = predict("0.001", "small")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert ("genolin: error: predicting the genome in batches of 64 windows of 2,048 bp (64 rows of 512 tokens"
            in r.output and "more than the 2 MiB of memory (RAM) available; give a smaller --batch-size" in r.output)
    assert "GENOLIN_MEMORY_GIB sets the budget" in r.output and not list(tmp_path.iterdir())
    r = predict("abc", "abc")
    assert r.exit_code == 1 and "genolin: error: GENOLIN_MEMORY_GIB: expected a number of GiB above 0, got 'abc'" \
        in r.output and not list(tmp_path.iterdir())
    r = predict("8", "big")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "big.plus.bedGraph").exists()


def test_the_memory_estimate_counts_a_plain_gzip_genome_and_the_batch(tmp_path, two_contigs, monkeypatch):
    """The estimate grows with the batch and its reverse strands, and holds a plain gzip genome's bases (read into
    memory whole: about 4 per byte of the file, twice while read), which bgzip would spare; checked against the
    host's memory."""
    import gzip

    from genolin import memory
    from genolin.config import DataSpec
    from genolin.inference import load_run
    from genolin.predict import check_genome_memory
    from genolin.tasks import PredictOptions

    fasta, _ = two_contigs
    plain = tmp_path / "g.fa.gz"
    plain.write_bytes(gzip.compress(fasta.read_bytes()))
    seen = []
    monkeypatch.setattr(memory, "check_fits", lambda needed, device, what, fix: seen.append((needed, device, what,
                                                                                             fix)))

    def need(batch_size, rc, path=fasta):
        predictor = load_run(V1_TRACK, "cpu", batch_size=batch_size).predictor
        check_genome_memory(predictor, DataSpec("track", fasta=[str(path)]), PredictOptions(rc_average=rc))
        return seen[-1]

    assert need(8, False)[0] < need(64, False)[0] < need(64, True)[0]
    held = need(8, False, plain)
    assert held[0] - need(8, False)[0] == 2 * 4 * plain.stat().st_size
    assert "with g.fa.gz in memory (plain gzip)" in held[2] and "bgzip the genome" in held[3]
    assert all(device.type == "cpu" for _, device, _, _ in seen)
