"""Labelled sequence sets in their three forms, class mapping, and bad input."""

from __future__ import annotations

import gzip
import logging

import pytest
from conftest import GUE_TATA

from genolin.errors import InputError
from genolin.io.labelled import load_labelled, read_label_tsv


def write(tmp_path, name, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_gue_csv():
    s = load_labelled(GUE_TATA / "train.csv")
    assert len(s) == 4904 and s.classes == ["0", "1"]
    assert s.class_counts() == {"0": 2455, "1": 2449}
    assert all(len(seq) == 70 for seq in s.seqs)
    first = (GUE_TATA / "train.csv").read_text().splitlines()[1].split(",")
    assert s.seqs[0] == first[0].encode() and s.classes[s.labels[0]] == first[1]
    assert s.ids[0] == "row2"  # no id column: rows are named by line


def test_dev_set_uses_training_classes():
    train = load_labelled(GUE_TATA / "train.csv")
    dev = load_labelled(GUE_TATA / "dev.csv", classes=train.classes)
    assert dev.classes == train.classes and len(dev) == 613


def test_tsv_gzip_with_id_column_and_class_names(tmp_path):
    text = "id\tsequence\tlabel\ns1\tACGTN\tpromoter\ns2\tacgtt\tbackground\ns3\tGGGG\tpromoter\n"
    path = tmp_path / "set.tsv.gz"
    path.write_bytes(gzip.compress(text.encode()))
    s = load_labelled(path)
    assert s.ids == ["s1", "s2", "s3"] and s.classes == ["background", "promoter"]
    assert s.labels.tolist() == [1, 0, 1] and s.seqs[1] == b"ACGTT"


def test_csv_with_byte_order_mark_and_crlf(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbfsequence,label\r\nACGT,1\r\nGGCC,0\r\n")
    s = load_labelled(path)
    assert s.seqs == [b"ACGT", b"GGCC"] and s.labels.tolist() == [1, 0]


def test_integer_labels_sort_numerically(tmp_path):
    path = write(tmp_path, "x.csv", "sequence,label\nACGT,10\nACGA,2\nACGC,2\n")
    s = load_labelled(path)
    assert s.classes == ["2", "10"] and s.labels.tolist() == [1, 0, 0]


def test_fasta_with_label_headers(tmp_path):
    path = write(tmp_path, "x.fa", ">a label=1\nACGT\nAC\n>b desc label=0 more\nGGGG\n>c label=1\nTTTT\n")
    s = load_labelled(path)
    assert s.ids == ["a", "b", "c"] and s.labels.tolist() == [1, 0, 1] and s.seqs[0] == b"ACGTAC"


def test_fasta_plus_labels_tsv(tmp_path, caplog):
    fa = write(tmp_path, "x.fa", ">a\nACGT\n>b\nGGGG\n")
    tsv = write(tmp_path, "labels.tsv", "id\tlabel\n# comment\na\tpos\nb\tneg\nzz\tneg\n")
    with caplog.at_level(logging.WARNING):
        s = load_labelled(fa, labels=tsv)
    assert s.classes == ["neg", "pos"] and s.labels.tolist() == [1, 0]
    assert "1 labelled ids are not in" in caplog.text


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.csv", "sequence,label\nACGT,1\n,0\n", r"a\.csv:3: empty sequence"),
        ("a.csv", "sequence,label\nACGT,1\nACGT,\n", r"a\.csv:3: missing label"),
        ("a.csv", "sequence,label\nACGT,1\nACGA,1\n", r"a\.csv: only one class \('1'\)"),
        ("a.csv", "seq,label\nACGT,1\n", r"a\.csv:1: header has no 'sequence' column \(columns: seq, label\)"),
        ("a.csv", "sequence,label\nACGT,1,extra\n", r"a\.csv:2: 3 columns where the header has 2"),
        ("a.csv", "sequence,label\nACGT,1\nAC-T,0\n", r"a\.csv:3: sequence position 3: invalid character '-'"),
        ("a.csv", "sequence,label\n", r"a\.csv: no data rows"),
        ("a.csv", "", r"a\.csv: empty file"),
        ("a.fa", ">a label=1\nACGT\n>b\nACGT\n", r"a\.fa:3: record 'b' has no 'label=<value>'"),
        ("a.fa", ">a label=1\nACGT\n>b label=0\n>c label=0\nAA\n", r"a\.fa:3: record 'b' has an empty sequence"),
        ("a.fa", ">a label=1\nACGT\n>b label=1\nAC\n", "only one class"),
    ],
)
def test_bad_labelled_sets(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(InputError, match=message):
        load_labelled(path)


def test_unknown_class_in_dev_set(tmp_path):
    path = write(tmp_path, "dev.csv", "sequence,label\nACGT,1\nACGT,7\n")
    with pytest.raises(InputError, match=r"dev\.csv:3: label '7' is not one of the classes \['0', '1'\]"):
        load_labelled(path, classes=["0", "1"])


def test_labels_tsv_errors(tmp_path):
    fa = write(tmp_path, "x.fa", ">a\nACGT\n>b\nGGGG\n")
    with pytest.raises(InputError, match=r"l1\.tsv: no label for FASTA record 'b'"):
        load_labelled(fa, labels=write(tmp_path, "l1.tsv", "a\t1\n"))
    with pytest.raises(InputError, match=r"l2\.tsv:2: duplicate id 'a' \(first at line 1\)"):
        read_label_tsv(write(tmp_path, "l2.tsv", "a\t1\na\t0\n"))
    with pytest.raises(InputError, match=r"l3\.tsv:1: missing label for 'a'"):
        read_label_tsv(write(tmp_path, "l3.tsv", "a\t\n"))
    with pytest.raises(InputError, match=r"l4\.tsv:1: expected 'id<TAB>label'"):
        read_label_tsv(write(tmp_path, "l4.tsv", "a 1\n"))
    with pytest.raises(InputError, match="labels file goes with FASTA"):
        load_labelled(GUE_TATA / "dev.csv", labels=write(tmp_path, "l5.tsv", "a\t1\n"))


def _motif_sets(n_train: int = 300, n_val: int = 100):
    """(train, val) LabelledSets of random 60-nt sequences, the positives (every other one) holding TATAAT."""
    import numpy as np

    from genolin.io.labelled import LabelledSet

    rng = np.random.default_rng(0)

    def sample(n):
        seqs, labels = [], []
        for i in range(n):
            s = bytearray(rng.choice(list(b"ACGT"), 60).astype(np.uint8).tobytes())
            if i % 2:
                at = rng.integers(0, 54)
                s[at:at + 6] = b"TATAAT"
            seqs.append(bytes(s))
            labels.append(i % 2)
        return LabelledSet([f"s{i}" for i in range(n)], seqs, np.array(labels), ["neg", "pos"])

    return sample(n_train), sample(n_val)


def test_kmer_regressions_match_scikit_learn_fits():
    """kmer_regression: C chosen on validation MCC; the converged fit's logit differences equal a fresh
    scikit-learn fit to 1e-10 at its C (relative error 1e-3), the start's (500 iterations, warm-started along the
    grid) correlate with it; both in model.kmer_linear's form (its input: the model's k-mer profile)."""
    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression

    from genolin.model import Encoder, EncoderConfig
    from genolin.tasks.sequence import SequenceData, kmer_matrix, kmer_regression

    sets = _motif_sets()
    train, val = (SequenceData(d, k=1, stride=1) for d in sets)
    start, full = kmer_regression(train, val, 6, seed=0, converged=(False, True))
    model = Encoder(EncoderConfig(vocab_size=9, d_model=16, n_layers=1, n_heads=2, n_classes=2, kmer_logits=6))
    scale = np.concatenate([np.full(4**k, 2.0**k, np.float32) for k in range(1, 7)])
    x = kmer_matrix(val, 6)
    clf = LogisticRegression(C=full["C"], max_iter=20000, tol=1e-10).fit(kmer_matrix(train, 6) / scale,
                                                                         train.dataset.labels)
    want = clf.decision_function(x / scale)
    got = {}
    for name, fit in (("start", start), ("full", full)):
        assert fit["C"] in (0.1, 1.0, 10.0, 100.0) and fit["val_mcc"] > 0.8, (name, fit["C"], fit["val_mcc"])
        with torch.no_grad():
            model.kmer_linear.weight.copy_(fit["weight"])
            model.kmer_linear.bias.copy_(fit["bias"])
            logits = model.kmer_linear(torch.as_tensor(x)).double()
        got[name] = (logits[:, 1] - logits[:, 0]).numpy()
    assert np.abs(got["full"] - want).max() <= 1e-3 * np.abs(want).max(), np.abs(got["full"] - want).max()
    assert np.corrcoef(got["start"], want)[0, 1] > 0.99


@pytest.mark.parametrize("better", ["start", "alternative"])
def test_the_start_or_its_converged_alternative_whichever_validates_better(tmp_path, monkeypatch, better):
    """A classifier's start (the k-mer regression as fitted quickly) and its start_alternative (fitted to
    convergence) are both validated before the first step; best.safetensors holds the one scoring higher (here
    the other is made useless: zero weights), and training starts from the start either way."""
    import torch
    from click.testing import CliRunner
    from safetensors.torch import load_file

    import genolin.tasks.sequence as sequence
    from genolin.cli import cli

    real, made = sequence.kmer_regression, []

    def rigged(*args, **kwargs):
        fits = real(*args, **kwargs)
        useless = {**fits[0], "weight": torch.zeros_like(fits[0]["weight"]), "bias": torch.zeros_like(fits[0]["bias"])}
        made[:] = [useless, fits[1]] if better == "alternative" else [fits[0], useless]
        return made

    monkeypatch.setattr(sequence, "kmer_regression", rigged)
    for name, data in zip(("train", "dev"), _motif_sets(), strict=True):
        (tmp_path / f"{name}.csv").write_text("sequence,label\n" + "".join(
            f"{s.decode()},{y}\n" for s, y in zip(data.seqs, data.labels, strict=True)))
    r = CliRunner().invoke(cli, ["-q", "train", "--csv", str(tmp_path / "train.csv"), "--val-csv",
                                 str(tmp_path / "dev.csv"), "--preset", "tiny", "--device", "cpu", "--max-steps", "1",
                                 "--set", "lr=1e-9", "--out", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    kept = made[0] if better == "start" else made[1]
    best = load_file(str(tmp_path / "run" / "best.safetensors"))
    assert torch.equal(best["kmer_linear.weight"], kept["weight"]) and torch.equal(best["kmer_linear.bias"],
                                                                                    kept["bias"])
    last = load_file(str(tmp_path / "run" / "model.safetensors"))  # one step of lr 1e-9 from the start
    assert torch.allclose(last["kmer_linear.weight"], made[0]["weight"], atol=1e-6)
