"""Labelled sets held as one byte per base (genolin.io.store): in memory or memory-mapped from a cache file for a
set over a quarter of the free memory, the same sequences either way, and a clean stop, before reading, for a set
that fits neither."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

import genolin.host
import genolin.io.store as store_mod
from genolin.cli import cli
from genolin.errors import InputError
from genolin.io.labelled import load_labelled
from genolin.io.store import StoreBuilder, store_builder


def random_seqs(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.choice(list(b"ACGTN"), int(rng.integers(1, 3_000))).astype(np.uint8).tobytes() for _ in range(n)]


@pytest.mark.parametrize("on_disk", [False, True])
def test_a_store_gives_back_each_sequence(tmp_path, on_disk):
    seqs = random_seqs(57)
    builder = StoreBuilder(tmp_path / "set.bases" if on_disk else None)
    for s in seqs:
        builder.append(s)
    store = builder.finish()
    assert len(store) == 57 and list(store) == seqs and store == seqs and store[-1] == seqs[-1]
    assert store[3:6] == seqs[3:6] and store.lengths.tolist() == [len(s) for s in seqs]
    assert store.buffer.dtype == np.uint8 and store.buffer.nbytes == sum(map(len, seqs))  # a byte per base
    if on_disk:
        assert isinstance(store.buffer, np.memmap) and not (tmp_path / "set.bases").exists()  # unlinked once mapped
        assert store.resident_bytes == store.offsets.nbytes
    with pytest.raises(IndexError):
        store[57]


def test_an_abandoned_build_leaves_no_file(tmp_path):
    builder = StoreBuilder(tmp_path / "x.bases")
    builder.append(b"ACGT")
    builder.abandon()
    assert not (tmp_path / "x.bases").exists()


@pytest.fixture
def big_csv(tmp_path):
    seqs = random_seqs(40, seed=1)
    path = tmp_path / "set.csv"
    path.write_text("sequence,label\n" + "".join(f"{s.decode()},{i % 2}\n" for i, s in enumerate(seqs)))
    return path, seqs


def test_a_set_over_a_quarter_of_free_memory_is_memory_mapped(tmp_path, big_csv, monkeypatch):
    path, seqs = big_csv
    in_memory = load_labelled(path)
    assert in_memory.seqs.path is None
    monkeypatch.setattr(genolin.host, "available_bytes", lambda: 4 * path.stat().st_size - 1)
    monkeypatch.setenv("GENOLIN_CACHE", str(tmp_path / "cache"))
    mapped = load_labelled(path)
    assert mapped.seqs.path is not None and str(mapped.seqs.path).startswith(str(tmp_path / "cache"))
    assert mapped.seqs == in_memory.seqs == seqs and mapped.labels.tolist() == in_memory.labels.tolist()
    assert list((tmp_path / "cache" / "sets").iterdir()) == []  # nothing left behind


def test_a_set_that_fits_neither_memory_nor_disk_stops_before_reading(tmp_path, big_csv, monkeypatch):
    path, _ = big_csv
    monkeypatch.setattr(genolin.host, "available_bytes", lambda: 1000)
    monkeypatch.setenv("GENOLIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(store_mod.shutil, "disk_usage", lambda folder: type("U", (), {"free": 10})())
    with pytest.raises(InputError, match="free in the cache folder"):
        store_builder(path)
    r = CliRunner().invoke(cli, ["-q", "train", "--csv", str(path), "--out", str(tmp_path / "run")])
    assert r.exit_code == 1 and str(path) in r.output and "GENOLIN_CACHE" in r.output
    errors = [line for line in r.output.splitlines() if line.startswith("genolin: error:")]
    assert len(errors) == 1 and r.output.strip().splitlines()[-1] == errors[0] and not (tmp_path / "run").exists()


@pytest.mark.parametrize("k", [1, 3])
def test_tokens_made_per_batch_equal_tokens_made_once(k):
    """SequenceData's tokens from the bases at each batch (rc, shift, crop) are what tokenizing once and working on
    the tokens gave (the layout before the byte-per-base store): reverse-complement map, then slices."""
    from genolin.io.labelled import LabelledSet
    from genolin.tasks.sequence import SequenceData
    from genolin.tokenize import kmer_ids, reverse_complement_map

    seqs = random_seqs(30, seed=4)
    seqs = [s + b"ACGT" for s in seqs]  # at least k bases
    data = SequenceData(LabelledSet([f"s{i}" for i in range(30)], seqs, np.zeros(30, dtype=np.int64), ["a"]), k=k,
                        stride=1)
    rng = np.random.default_rng(0)
    for i, seq in enumerate(seqs):
        once = kmer_ids(seq, k, 1)
        for rc in (False, True):
            shift = int(rng.integers(0, 4))
            start = int(rng.integers(0, len(seq) // 2 + 1))
            length = int(rng.integers(1, len(seq) - start + 1))
            ids = once[start:start + max(1, length - k + 1)]
            if rc:
                ids = reverse_complement_map(k)[ids][::-1]
            want = ids[shift:] if shift < len(ids) else ids[-1:]
            got = data.tokens_of(i, rc=rc, shift=shift, crop=(start, length))
            if len(want) == len(ids) - shift:  # (a crop shorter than k + shift keeps its tokens either way)
                assert got.tolist() == want.tolist()


def test_tables_with_cr_only_line_ends_read_as_others(tmp_path):
    for end in ("\n", "\r\n", "\r"):
        path = tmp_path / "t.csv"
        path.write_bytes(end.join(["sequence,label", "ACGT,1", "GGCC,0", ""]).encode())
        s = load_labelled(path)
        assert s.seqs == [b"ACGT", b"GGCC"] and s.labels.tolist() == [1, 0]
