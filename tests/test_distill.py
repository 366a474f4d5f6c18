"""Distillation of track models (genolin.tasks.track_distill): a teacher's track in a student's bins against a
brute-force reference, the teacher's track against what `genolin predict` writes for it, and training with
--teacher: weight 0 trains exactly as without, weight 1 trains on the teacher's probabilities alone."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA, ecoli_slice

from genolin.checkpoint import load_tensors
from genolin.cli import cli
from genolin.tasks.track_distill import SoftTracks, mixed

SMALL = ["--set", "window_bp=2048", "--set", "batch_size=4", "--set", "d_model=32", "--set", "steps=6",
         "--set", "val_every_steps=3", "--set", "warmup_steps=2", "--set", "mutate_prob=0"]


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def brute_window(track, stride_t, length, circular, start, bins, stride, rc):
    out = np.zeros((bins, 2))
    for j in range(bins):
        for p in range(start + j * stride, start + (j + 1) * stride):
            if circular:
                p %= length
            elif not 0 <= p < length:
                continue
            out[j] = np.maximum(out[j], track[p // stride_t])
    return out[::-1, ::-1] if rc else out


@pytest.mark.parametrize(("stride_t", "stride"), [(1, 4), (4, 4), (4, 1), (3, 2), (2, 3)])
@pytest.mark.parametrize("circular", [False, True])
def test_a_teacher_track_in_student_bins_equals_brute_force(stride_t, stride, circular):
    rng = np.random.default_rng(stride_t * 10 + stride)
    length = 1_003
    track = rng.random((-(-length // stride_t), 2)).astype(np.float16)
    soft = SoftTracks(stride_t, {"c": track}, {"c": length}, {"c"} if circular else set())
    for start in (0, 17 * stride, length - 40 * stride, -13 * stride, length - 5 * stride):
        for rc in (False, True):
            got = np.full((57, 2), np.nan, dtype=np.float32)
            got[:] = soft.window("c", start, 57, stride, rc=rc)
            ref = brute_window(track.astype(np.float64), stride_t, length, circular, start, 57, stride, rc)
            assert np.isfinite(got).all()
            assert np.abs(got - ref).max() <= 1e-6 * max(1.0, np.abs(ref).max())


def test_mixed_targets_are_the_convex_combination():
    rng = np.random.default_rng(0)
    labels, soft = (rng.random((31, 2)) > 0.8).astype(np.float32), rng.random((31, 2)).astype(np.float32)
    for w in (0.0, 0.3, 1.0):
        np.testing.assert_allclose(mixed(labels, soft, w), (1 - w) * labels + w * soft, rtol=1e-6)


@pytest.fixture(scope="module")
def genome_and_teacher(tmp_path_factory):
    """A 40 kbp genome cut from E. coli with its gene starts as TSSs, and a tiny teacher trained on it."""
    d = tmp_path_factory.mktemp("distil")
    ecoli_slice(d / "g.fa", d / "g.bed", "g1", 200_000, 240_000)
    r = run("train", "--fasta", d / "g.fa", "--tss", d / "g.bed", "--out", d / "teacher", "--set", "stride=2",
            *SMALL)
    assert r.exit_code == 0, r.output
    return d


def bedgraph_track(path, length, stride):
    out = np.full(-(-length // stride), np.nan)
    for line in path.read_text().splitlines()[1:]:
        _, a, b, v = line.split("\t")
        out[int(a) // stride: -(-int(b) // stride)] = float(v)
    return out


def test_the_teacher_track_is_what_predict_writes_for_the_teacher(genome_and_teacher):
    import torch

    from genolin.config import DataSpec, make_config
    from genolin.inference.teacher import teacher_tracks
    from genolin.tasks.track import TrackTask

    d = genome_and_teacher
    r = run("predict", "--model", d / "teacher", "--fasta", d / "g.fa", "--rc-average", "--out", d / "pred")
    assert r.exit_code == 0, r.output
    cfg = make_config("track", "tiny", [])  # the student's: stride 4, another window than the teacher's
    task = TrackTask(cfg)
    task.load_training(DataSpec("track", fasta=[str(d / "g.fa")], tss=[str(d / "g.bed")]))
    soft = teacher_tracks([str(d / "teacher")], task, torch.device("cpu"))
    assert soft.stride == 2
    (contig, _, cut), = task.train_regions
    for channel, strand in enumerate(("plus", "minus")):
        ref = bedgraph_track(d / f"pred.{strand}.bedGraph", 40_000, 2)[: cut // 2]
        got = soft.tracks[contig][: cut // 2, channel].astype(np.float64)
        np.testing.assert_allclose(got, ref, atol=6e-4, rtol=2e-3)
        assert not soft.tracks[contig][-(-cut // 2):, channel].any()  # the validation end: not read


def test_weight_zero_trains_as_without_a_teacher_and_weight_one_on_the_teacher_alone(tmp_path, genome_and_teacher,
                                                                                     monkeypatch):
    d = genome_and_teacher
    data = ["--fasta", d / "g.fa", "--tss", d / "g.bed", *SMALL]
    assert run("train", *data, "--out", tmp_path / "plain").exit_code == 0
    r = run("train", *data, "--teacher", d / "teacher", "--set", "distill_weight=0", "--out", tmp_path / "w0")
    assert r.exit_code == 0, r.output
    a, b = load_tensors(tmp_path / "plain" / "model.safetensors")[0], load_tensors(tmp_path / "w0" /
                                                                                   "model.safetensors")[0]
    assert a.keys() == b.keys() and all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)
    saved = json.loads((tmp_path / "w0" / "config.json").read_text())
    assert saved["data"]["teacher"] == [str(d / "teacher")] and saved["train"]["distill_weight"] == 0

    # weight 1: every training target is the teacher's probability of the bin (no label left in it)
    from genolin.tasks import track_data

    seen = []
    real = track_data.TrackData.targets

    def spy(self, w, *, rc=False):
        out = real(self, w, rc=rc)
        seen.append((out, self.soft.window(w.contig, w.start, w.bins, self.stride, rc=rc)))
        return out

    monkeypatch.setattr(track_data.TrackData, "targets", spy)
    r = run("train", *data, "--teacher", d / "teacher", "--set", "distill_weight=1", "--out", tmp_path / "w1")
    assert r.exit_code == 0, r.output
    assert seen and all(np.array_equal(t, s) for t, s in seen)
    soft_values = np.concatenate([s for _, s in seen])
    assert 0 < soft_values.max() < 1 and len(np.unique(soft_values)) > 100  # probabilities, not labels
    b = load_tensors(tmp_path / "w1" / "model.safetensors")[0]
    assert any(not np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


def test_distillation_refuses_what_it_cannot_do(tmp_path, genome_and_teacher):
    d = genome_and_teacher
    data = ["--fasta", d / "g.fa", "--tss", d / "g.bed", *SMALL]
    r = run("train", *data, "--teacher", d / "teacher", "--set", "distill_weight=1.5", "--out", tmp_path / "a")
    assert r.exit_code != 0 and "distill_weight" in r.output and "from 0 to 1" in r.output
    r = run("train", *data, "--teacher", tmp_path / "missing", "--out", tmp_path / "b")
    assert r.exit_code != 0 and "missing" in r.output and "Traceback" not in r.output
    r = run("train", "--csv", DATA / "gue" / "prom_core_tata" / "train.csv", "--teacher", d / "teacher",
            "--out", tmp_path / "c")
    assert r.exit_code != 0 and "--teacher is for track models" in r.output


def test_a_folder_holding_a_run_is_refused_before_the_teacher_reads_the_genomes(tmp_path, genome_and_teacher,
                                                                                 monkeypatch):
    import genolin.train

    def no_pass(*args, **kwargs):
        raise AssertionError("the teacher's pass ran")

    monkeypatch.setattr(genolin.train, "teacher_tracks", no_pass)
    d = genome_and_teacher
    r = run("train", "--fasta", d / "g.fa", "--tss", d / "g.bed", *SMALL, "--teacher", d / "teacher", "--out",
            d / "teacher")
    assert r.exit_code == 1 and "holds a run already" in r.output and "teacher's pass" not in r.output
