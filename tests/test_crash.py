"""Crash safety: a training run killed with SIGKILL (inside a checkpoint write, or at random moments) and resumed
with --resume ends with the same weights as an uninterrupted run; a second run on the same folder is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import GUE_TATA

from genolin.checkpoint import load_tensors

pytestmark = pytest.mark.slow  # several training processes

# Runs genolin with one function of genolin.checkpoint replaced by one that SIGKILLs the process on its n-th call.
KILLER = """
import os, signal, sys
import genolin.checkpoint as c
name, nth = os.environ["GENOLIN_TEST_KILL_AT"].split(":")
original, calls = getattr(c, name), [0]
def wrapped(*args, **kwargs):
    calls[0] += 1
    if calls[0] == int(nth):
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(c, name, wrapped)
from genolin.cli import main
sys.argv[0] = "genolin"
main()
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("crash")
    for name, n in (("train", 240), ("dev", 60)):
        lines = (GUE_TATA / f"{name}.csv").read_text().splitlines()
        (d / f"{name}.csv").write_text("\n".join(lines[: n + 1]) + "\n")
    (d / "c.yaml").write_text("batch_size: 20\nd_model: 32\nn_layers: 1\ndropout: 0.2\nepochs: 6\npatience: 0\n")
    return d


def genolin(*args, kill_at=None, **kwargs):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if kill_at:
        env["GENOLIN_TEST_KILL_AT"] = kill_at
    cmd = [sys.executable, "-c", KILLER, *args] if kill_at else [sys.executable, "-m", "genolin", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)


def train_args(d, out, resume=False):
    if resume:
        return ["-q", "train", "--resume", str(out)]
    return ["-q", "train", "--csv", str(d / "train.csv"), "--val-csv", str(d / "dev.csv"), "--config",
            str(d / "c.yaml"), "--out", str(out)]


def same_weights(a, b) -> bool:
    wa, wb = load_tensors(a / "model.safetensors")[0], load_tensors(b / "model.safetensors")[0]
    return wa.keys() == wb.keys() and all(np.array_equal(wa[k].numpy(), wb[k].numpy()) for k in wa)


@pytest.fixture(scope="module")
def reference(data):
    out = data / "reference"
    proc = genolin(*train_args(data, out))
    assert proc.wait(timeout=300) == 0, proc.stdout.read()
    return out


@pytest.mark.parametrize("kill_at", ["write_json:3", "save_optimizer:2", "atomic_path:9"])
def test_killed_inside_a_checkpoint_resumes_to_the_same_weights(data, reference, kill_at):
    """write_json:3 is the state of the second checkpoint (its step files are written, not yet committed);
    save_optimizer:2 falls between its weights and its optimizer; atomic_path:9 inside a later checkpoint."""
    out = data / f"killed_{kill_at.replace(':', '_')}"
    proc = genolin(*train_args(data, out), kill_at=kill_at)
    assert proc.wait(timeout=300) == -signal.SIGKILL
    proc = genolin(*train_args(data, out, resume=True))
    assert proc.wait(timeout=300) == 0, proc.stdout.read()
    assert same_weights(reference, out)
    assert json.loads((out / "trainer_state.json").read_text())["step"] == json.loads(
        (reference / "trainer_state.json").read_text())["step"]


def test_killed_at_random_moments_resumes_to_the_same_weights(data, reference):
    """Each try is killed a random 0-250 ms after its next checkpoint lands (inside training, validation or the
    next checkpoint), then resumed, until one finishes."""
    rng = np.random.default_rng(7)
    out, state_file = data / "random", data / "random" / "trainer_state.json"

    def epoch():
        try:
            return json.loads(state_file.read_text())["epoch"]
        except (OSError, ValueError):
            return 0

    kills = 0
    for _ in range(10):
        start = epoch()
        proc = genolin(*train_args(data, out, resume=state_file.exists()))
        while proc.poll() is None and epoch() <= start:
            time.sleep(0.01)
        time.sleep(float(rng.uniform(0, 0.25)))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        assert proc.returncode == 0, proc.stdout.read()
        break
    assert kills >= 3 and proc.returncode == 0
    assert same_weights(reference, out)


def test_second_run_on_the_same_folder_is_refused(data):
    out = data / "busy"
    (data / "long.yaml").write_text((data / "c.yaml").read_text().replace("epochs: 6", "epochs: 200"))
    first = genolin("-q", "train", "--csv", str(data / "train.csv"), "--config", str(data / "long.yaml"), "--out",
                    str(out))
    try:
        deadline = time.monotonic() + 120
        while not (out / "trainer_state.json").exists():  # training, lock held
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = genolin(*train_args(data, out, resume=True))
        assert second.wait(timeout=120) == 1
        assert f"{out}: is in use by another genolin train (pid {first.pid})" in second.stdout.read()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    state = json.loads((out / "trainer_state.json").read_text())  # nothing corrupted: the run resumes
    assert (out / state["files"]["weights"]).exists() and load_tensors(out / state["files"]["weights"])[0]
