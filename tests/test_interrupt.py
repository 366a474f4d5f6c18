"""Ctrl-C: one line on stderr, exit status 130 and no partial output, from any command; training saves a checkpoint
of the steps it took, from which --resume ends as the uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import ECOLI_BGZ, FIXTURES, ecoli_slice

from genolin.checkpoint import load_tensors
from genolin.cli import cli
from genolin.io.fasta import read_fasta

V1_TRACK = FIXTURES / "v1_runs" / "track_run"
TINY = ["--set", "window_bp=2048", "--set", "batch_size=4", "--set", "d_model=32", "--set", "steps=6", "--set",
        "val_every_steps=3", "--set", "warmup_steps=2"]


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def ctrl_c() -> None:
    """What the terminal does on Ctrl-C, to this process."""
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(autouse=True)
def _python_sigint_handler():
    """Python's own SIGINT handler (KeyboardInterrupt), as a command started from a shell has it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    """60 kb of E. coli and its gene starts."""
    d = tmp_path_factory.mktemp("genome")
    ecoli_slice(d / "g.fa", d / "tss.bed", "chrA", 0, 60_000)
    return d


@pytest.fixture(scope="module")
def reference(genome, tmp_path_factory):
    """The uninterrupted run: 6 steps, validated at steps 3 and 6."""
    out = tmp_path_factory.mktemp("reference") / "run"
    r = run("train", "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", "--out", out, *TINY)
    assert r.exit_code == 0, r.output
    return out


def calls_that(method, nth: int, act):
    """``method`` with ``act()`` run at the start of its ``nth`` call."""
    calls = [0]

    def wrapped(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth:
            act()
        return method(*args, **kwargs)

    return wrapped


def raise_interrupt():
    raise KeyboardInterrupt


@pytest.mark.parametrize("where", ["signal inside the second step", "interrupt before the third"])
def test_ctrl_c_in_training_saves_a_checkpoint_that_resume_finishes(tmp_path, genome, reference, monkeypatch, where):
    """Ctrl-C after two of six steps, before the first validation (step 3): a signal that arrives inside the
    optimizer step waits for it (and the state that counts it); a KeyboardInterrupt before the third step's update
    leaves the second. Either way: exit status 130, one line naming the checkpoint and --resume, a checkpoint of step
    2 at batch 2 of epoch 1, and --resume takes the schedule's last four steps to the weights and validations of
    the uninterrupted run."""
    from genolin.train import Trainer

    if where.startswith("signal"):
        monkeypatch.setattr(Trainer, "optimizer_step", calls_that(Trainer.optimizer_step, 2, ctrl_c))
    else:
        monkeypatch.setattr(Trainer, "micro_step", calls_that(Trainer.micro_step, 3, raise_interrupt))
    out = tmp_path / "run"
    r = run("train", "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", "--out", out, *TINY)
    assert r.exit_code == 130, r.output
    lines = r.output.strip().splitlines()
    assert lines == [f"genolin: interrupted; {out} holds the checkpoint of step 2 (epoch 1, batch 2): genolin train "
                     f"--resume {out} continues from there"], r.output
    state = json.loads((out / "trainer_state.json").read_text())
    assert (state["step"], state["epoch"], state["batch"]) == (2, 0, 2)
    assert (out / state["files"]["weights"]).exists() and (out / state["files"]["optimizer"]).exists()
    assert not list(out.rglob("*.tmp")) and not (out / ".lock").exists()
    monkeypatch.undo()

    r = run("train", "--resume", out)
    assert r.exit_code == 0, r.output
    state = json.loads((out / "trainer_state.json").read_text())
    assert (state["step"], state["epoch"], state["batch"]) == (6, 2, 0)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    want = [json.loads(line) for line in (reference / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m.get("stopped")) for m in records] == [(2, "interrupted (Ctrl-C)"), (3, None), (6, None)]
    assert [m["val"] for m in records[1:]] == [m["val"] for m in want]
    for name in ("model.safetensors", "best.safetensors"):
        got, wanted = load_tensors(out / name)[0], load_tensors(reference / name)[0]
        assert got.keys() == wanted.keys()
        assert all(np.array_equal(got[k].numpy(), wanted[k].numpy()) for k in got), name


def test_ctrl_c_during_a_validation_stops_it_at_once_and_resume_validates_again(tmp_path, genome, reference,
                                                                             monkeypatch):
    """A Ctrl-C inside the first validation (step 3) stops it there, not at its end: the checkpoint is of the
    epoch's three steps, not yet validated (batch 3 of 3), and --resume validates it first, then ends as the
    uninterrupted run."""
    from genolin.selection import ModelSelection

    monkeypatch.setattr(ModelSelection, "evaluate", calls_that(ModelSelection.evaluate, 1, ctrl_c))
    out = tmp_path / "run"
    r = run("train", "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", "--out", out, *TINY)
    assert r.exit_code == 130 and f"the checkpoint of step 3 (epoch 1, batch 3): genolin train --resume {out}" \
        in r.output, r.output
    monkeypatch.undo()
    r = run("train", "--resume", out)
    assert r.exit_code == 0, r.output
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    want = [json.loads(line) for line in (reference / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m.get("stopped")) for m in records] == [(3, "interrupted (Ctrl-C)"), (3, None), (6, None)]
    assert [m["val"] for m in records[1:]] == [m["val"] for m in want]
    got, wanted = load_tensors(out / "best.safetensors")[0], load_tensors(reference / "best.safetensors")[0]
    assert all(np.array_equal(got[k].numpy(), wanted[k].numpy()) for k in wanted)


def test_ctrl_c_inside_an_accumulation_drops_its_gradients_and_resumes_to_the_same_weights(tmp_path, genome):
    """grad_accum 2 (two steps between validations, four in all): a Ctrl-C after the first micro-batch of the second
    step drops that micro-batch's gradient; the checkpoint is of step 1, batch 2, and --resume recomputes it, ending
    with the uninterrupted run's weights."""
    from genolin.train import Trainer

    args = ["train", "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", *TINY, "--set", "grad_accum=2", "--set",
            "steps=4", "--set", "val_every_steps=2", "--out"]
    assert run(*args, tmp_path / "reference").exit_code == 0
    with pytest.MonkeyPatch.context() as m:
        m.setattr(Trainer, "micro_step", calls_that(Trainer.micro_step, 4, raise_interrupt))
        r = run(*args, tmp_path / "run")
    assert r.exit_code == 130 and f"the checkpoint of step 1 (epoch 1, batch 2): genolin train --resume {tmp_path}" \
        in r.output, r.output
    r = run("train", "--resume", tmp_path / "run")
    assert r.exit_code == 0, r.output
    states = [json.loads((tmp_path / run_dir / "trainer_state.json").read_text()) for run_dir in ("run", "reference")]
    assert states[0]["step"] == states[1]["step"] == 4
    got, wanted = (load_tensors(tmp_path / run_dir / "model.safetensors")[0] for run_dir in ("run", "reference"))
    assert all(np.array_equal(got[k].numpy(), wanted[k].numpy()) for k in wanted)


def test_ctrl_c_before_the_first_step_saves_nothing(tmp_path, genome, monkeypatch):
    """A Ctrl-C inside the first batch's forward pass, before any optimizer step: no checkpoint, and the new run's
    folder is gone."""
    from genolin.train import Trainer

    monkeypatch.setattr(Trainer, "micro_step", calls_that(Trainer.micro_step, 1, ctrl_c))
    out = tmp_path / "run"
    r = run("train", "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", "--out", out, *TINY)
    assert r.exit_code == 130, r.output
    assert r.output.strip().splitlines() == [
        f"genolin: interrupted before the first checkpoint (no optimizer step was taken): nothing was saved in {out}"]
    assert not out.exists()


def test_ctrl_c_inside_a_checkpoint_waits_for_it_and_the_epochs_line(tmp_path, genome, monkeypatch):
    """A Ctrl-C while the first validation's checkpoint is written: the checkpoint and the epoch's metrics line are
    completed, no second checkpoint is written (no step since), and the line names step 3."""
    import genolin.checkpoint

    monkeypatch.setattr(genolin.checkpoint, "save_optimizer",
                        calls_that(genolin.checkpoint.save_optimizer, 1, ctrl_c))
    out = tmp_path / "run"
    r = run("train", "--fasta", genome / "g.fa", "--tss", genome / "tss.bed", "--out", out, *TINY)
    assert r.exit_code == 130, r.output
    assert f"holds the checkpoint of step 3 (the end of epoch 1): genolin train --resume {out}" in r.output
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(m["step"], m["epoch"], "val" in m) for m in records] == [(3, 1, True)]
    assert json.loads((out / "trainer_state.json").read_text())["step"] == 3


@pytest.mark.parametrize("fmt", ["bedgraph", "bedgraph-pool", "bigwig"])
def test_ctrl_c_during_predict_leaves_no_files(tmp_path, monkeypatch, fmt):
    """Ctrl-C while the track writers take a genome's pieces (in process, through a process pool's part files, or
    in bigWig writer processes): exit status 130, one line, and nothing in the output folder."""
    import genolin.io.bedgraph as bedgraph
    from genolin.io.bigwig import BackgroundBigWigWriter

    (rec,) = read_fasta(ECOLI_BGZ)
    fasta = tmp_path / "g.fa"
    fasta.write_text(f">chrA\n{rec.seq[:30_000].decode()}\n>chrB\n{rec.seq[40_000:52_000].decode()}\n")
    if fmt == "bedgraph-pool":
        monkeypatch.setattr(bedgraph, "format_workers", lambda: 2)
        monkeypatch.setattr(bedgraph, "POOL_MIN_BINS", 0)
        monkeypatch.setattr(bedgraph.BedGraphWriter.__init__, "__defaults__", (64, None, 4))
    writer = BackgroundBigWigWriter if fmt == "bigwig" else bedgraph.BedGraphWriter
    monkeypatch.setattr(writer, "add", calls_that(writer.add, 6, ctrl_c))  # into chrA, both strands started
    out = tmp_path / "out"
    r = run("predict", "--model", V1_TRACK, "--fasta", fasta, "--out", out / "p", "--batch-size", "2", "--format",
            fmt.split("-")[0])
    assert r.exit_code == 130, r.output
    assert r.output.strip().splitlines() == ["genolin: interrupted (Ctrl-C); no output was written"], r.output
    assert not out.exists() or not list(out.iterdir())


@pytest.mark.parametrize(("finished", "streamed", "said"), [
    (False, False, "; no output was written"),
    (True, False, " after writing {done}; nothing partial was left"),
    (False, True, "; standard output holds what was written to it before, no file was written"),
    (True, True, " after writing {done}; standard output holds what was written to it before, no file was left "
                 "partial")])
def test_the_line_says_what_the_interrupt_left(tmp_path, monkeypatch, finished, streamed, said):
    """Outputs renamed into place before the Ctrl-C are named, and only they; a stream (standard output) cut short
    is said to be: the line stays true whatever the command had written."""
    import genolin.cli.index

    def write_then_interrupt(**kwargs):
        from genolin.io.atomic import atomic_open, output_text, write_json

        if finished:
            write_json(tmp_path / "done.json", {})
        if streamed:
            with output_text("-") as fh:
                fh.write("a line\n")
        with atomic_open(tmp_path / "partial.txt") as fh:
            fh.write("half")
            raise KeyboardInterrupt

    monkeypatch.setattr(genolin.cli.index.index, "callback", write_then_interrupt)
    r = run("index", "--fasta", tmp_path / "any.fa", "--sizes", tmp_path / "any.sizes")
    assert r.exit_code == 130, r.output
    assert r.stderr.strip().splitlines() == [f"genolin: interrupted (Ctrl-C){said.format(done=tmp_path / 'done.json')}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == (["done.json"] if finished else [])


def test_a_bigwig_writer_stopped_while_it_finishes_leaves_its_file_whole_or_none(tmp_path, monkeypatch):
    """A Ctrl-C while the parent waits for the bigWig child to finish: the child is stopped at once; its file is
    either complete and counted as written (it had been renamed into place) or absent; never a temporary file."""
    from genolin.io import atomic
    from genolin.io.bigwig import BackgroundBigWigWriter

    monkeypatch.setattr(BackgroundBigWigWriter, "_finish", calls_that(BackgroundBigWigWriter._finish, 1,
                                                                      raise_interrupt))
    path, before = tmp_path / "t.bw", len(atomic.WRITTEN)
    with pytest.raises(KeyboardInterrupt), BackgroundBigWigWriter(path, {"a": 400_000}) as w:
        for first in range(0, 100_000, 5000):
            w.add("a", first, np.random.default_rng(first).random(5000), 4, 400_000)
    assert [p.name for p in tmp_path.iterdir()] in ([], ["t.bw"])
    assert (path in atomic.WRITTEN[before:]) == path.exists()


def test_format_pool_workers_leave_ctrl_c_to_their_parent(tmp_path):
    """A Ctrl-C at the terminal reaches every process of the job: the pool's workers ignore it (the parent stops
    them), so none prints a traceback or breaks the pool."""
    from genolin.io.bedgraph import format_bins_to, format_pool

    with format_pool(2) as pool:
        assert pool.submit(signal.getsignal, signal.SIGINT).result() == signal.SIG_IGN
        assert signal.SIGINT not in pool.submit(signal.pthread_sigmask, signal.SIG_BLOCK, set()).result()
        args = ("chrA", 0, np.linspace(0, 1, 1000, dtype=np.float32), 4, 4000)
        pool.submit(format_bins_to, str(tmp_path / "a.txt"), *args).result()
        for pid in list(pool._processes):
            os.kill(pid, signal.SIGINT)
        time.sleep(0.5)
        assert pool.submit(format_bins_to, str(tmp_path / "b.txt"), *args).result()[3] > 1
    assert (tmp_path / "a.txt").read_bytes() == (tmp_path / "b.txt").read_bytes()


def test_atomic_outputs_are_removed_on_keyboard_interrupt(tmp_path):
    from genolin.io.atomic import atomic_open, atomic_path

    with pytest.raises(KeyboardInterrupt), atomic_path(tmp_path / "a.bin") as tmp:
        tmp.write_bytes(b"x")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt), atomic_open(tmp_path / "b.txt") as fh:
        fh.write("y")
        raise KeyboardInterrupt
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("writer", ["atomic_path", "bedgraph parts", "bigwig"])
def test_an_interrupt_just_after_a_temporary_file_is_made_removes_it(tmp_path, monkeypatch, writer):
    """A Ctrl-C the moment a temporary file or folder has been made (inside tempfile's own code, as the atomic
    writers used it; inside a writer's setup, before any ``__exit__`` would run): it is removed all the same."""
    from concurrent.futures import ThreadPoolExecutor

    from genolin.io.atomic import atomic_path
    from genolin.io.bedgraph import BedGraphWriter
    from genolin.io.bigwig import BigWigWriter

    def then_interrupt(make):
        def made(*args, **kwargs):
            result = make(*args, **kwargs)
            if str(args[0]).endswith(".tmp"):
                raise KeyboardInterrupt
            return result

        return made

    with pytest.raises(KeyboardInterrupt):
        if writer == "atomic_path":
            monkeypatch.setattr(os, "open", then_interrupt(os.open))
            with atomic_path(tmp_path / "a.txt"):
                pass
        elif writer == "bedgraph parts":
            monkeypatch.setattr(os, "mkdir", then_interrupt(os.mkdir))
            with open(tmp_path / "t.bedGraph", "wb") as fh, ThreadPoolExecutor(1) as pool, BedGraphWriter(
                    fh, "t", "0,0,0", batch_bins=10, pool=pool) as w:
                w.add("chrA", 0, np.linspace(0, 1, 100), 4, 400)
        else:
            import genolin.io.bigwig

            monkeypatch.setattr(genolin.io.bigwig, "_bptree", lambda *a: raise_interrupt())
            kept = BigWigWriter(tmp_path / "t.bw", {"a": 1000})  # alive: not cleaned up by the garbage collector
            with kept:
                pass
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == (["t.bedGraph"] if writer == "bedgraph parts" else [])


def started_writing(folder, proc, size: int) -> bool:
    """Whether a temporary output in ``folder`` holds ``size`` bytes (waits while ``proc`` runs)."""
    while proc.poll() is None:
        if any(p.name.endswith(".tmp") and p.stat().st_size >= size for p in folder.iterdir() if p.is_file()):
            return True
        time.sleep(0.05)
    return False


def predict_process(out, *args, group: bool = False):
    """``python -m genolin predict`` of the bundled model on the bundled E. coli genome, on the CPU, with SIGINT
    handled as in a shell's foreground job (a test run in the background inherits it ignored)."""

    def child():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if group:
            os.setpgrp()

    return subprocess.Popen(
        [sys.executable, "-m", "genolin", "predict", "--model", "bacteria", "--fasta", str(ECOLI_BGZ), "--device",
         "cpu", "--out", str(out / "o"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "2"}, preexec_fn=child)


def interrupted_once_writing(out, size: int, send, *args, group: bool = False) -> str:
    """Start ``predict_process``, ``send(proc)`` once a temporary output holds ``size`` bytes, and check what any
    interrupted predict must leave: exit status 130, the interrupt's line last, nothing in ``out``. Returns stderr."""
    proc = predict_process(out, *args, group=group)
    try:
        assert started_writing(out, proc, size), proc.communicate()[1][-2000:]
        send(proc)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1] == "genolin: interrupted (Ctrl-C); no output was written"
    assert not list(out.iterdir())
    return err


def test_sigint_to_a_predicting_process(tmp_path):
    """SIGINT to ``genolin predict`` once it is writing its tracks: exit status 130, the interrupt's line last and
    no traceback, no output or temporary file left."""
    out = tmp_path / "out"
    out.mkdir()
    err = interrupted_once_writing(out, 1 << 20, lambda proc: proc.send_signal(signal.SIGINT))
    assert "Traceback" not in err and "Aborted" not in err


@pytest.mark.slow
def test_ctrl_c_at_a_terminal_reaches_the_bigwig_writers_too(tmp_path):
    """Ctrl-C at a terminal signals every process of the job, the bigWig writer processes too: they leave it to
    their parent, which drops their files; one line, exit status 130, nothing left."""
    out = tmp_path / "out"
    out.mkdir()
    err = interrupted_once_writing(out, 1 << 16, lambda proc: os.killpg(proc.pid, signal.SIGINT), "--format",
                                   "bigwig", group=True)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
