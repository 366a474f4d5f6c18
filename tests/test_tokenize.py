"""The k-mer tokenizer against a straightforward reference (hypothesis), its RC map and decoding."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import ECOLI_BGZ
from hypothesis import given, settings
from hypothesis import strategies as st

import genolin.tokenize as tok
from genolin.io.fasta import read_fasta
from genolin.tokenize import (
    PAD,
    SPECIAL_TOKENS,
    UNK,
    decode_ids,
    kmer_ids,
    n_tokens,
    reverse_complement,
    reverse_complement_map,
    vocab_size,
)

CODE = {"A": 0, "C": 1, "G": 2, "T": 3}


def reference_ids(seq: str, k: int, stride: int) -> list[int]:
    """The definition, one k-mer at a time."""
    out = []
    for i in range(0, len(seq) - k + 1, stride):
        kmer = seq[i:i + k].upper()
        if all(c in CODE for c in kmer):
            out.append(5 + sum(CODE[c] * 4 ** (k - 1 - j) for j, c in enumerate(kmer)))
        else:
            out.append(UNK)
    return out


dna = st.text(alphabet="ACGTACGTACGTacgtNnRy.-", max_size=400)


@settings(max_examples=300, deadline=None)
@given(seq=dna, k=st.integers(1, 12), stride=st.integers(1, 9), block=st.sampled_from([1, 2, 5, 16, 1 << 20]))
def test_ids_equal_reference(seq, k, stride, block):
    old = tok._BLOCK
    tok._BLOCK = block  # small blocks exercise the block boundaries
    try:
        ids = kmer_ids(seq, k, stride)
    finally:
        tok._BLOCK = old
    assert ids.dtype == np.int32
    assert len(ids) == n_tokens(len(seq), k, stride) == ((len(seq) - k) // stride + 1 if len(seq) >= k else 0)
    assert ids.tolist() == reference_ids(seq, k, stride)
    assert np.array_equal(kmer_ids(seq.encode(), k, stride), ids)  # bytes and str agree


def test_plain_python_vocabulary_lookup_agrees():
    """The issue's plain tokenizer, `[vocab[seq[i:i+k]] for i in ...]`, on a real genome slice."""
    (rec,) = read_fasta(ECOLI_BGZ)
    seq = rec.seq[:20_000].decode()
    for k in (1, 3, 6):
        vocab = {"".join(p): 5 + i for i, p in enumerate(itertools.product("ACGT", repeat=k))}
        assert kmer_ids(seq, k).tolist() == [vocab[seq[i:i + k]] for i in range(len(seq) - k + 1)]


def test_vocabulary_layout():
    assert SPECIAL_TOKENS == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert vocab_size(6) == 4101 and vocab_size(1) == 9
    assert kmer_ids("AAAAAA").tolist() == [5] and kmer_ids("TTTTTT").tolist() == [5 + 4**6 - 1]
    assert kmer_ids("ACGTNA", 1).tolist() == [5, 6, 7, 8, 1, 5]
    assert kmer_ids("acgtac", 2, 2).tolist() == [5 + 1, 5 + 2 * 4 + 3, 5 + 1]
    assert kmer_ids("ACG", 4).tolist() == []
    assert kmer_ids("ACGTAC", 12).size == 0


@pytest.mark.parametrize(("k", "stride"), [(0, 1), (13, 1), (6, 0), (6, -1), (2.5, 1)])
def test_bad_parameters(k, stride):
    with pytest.raises(ValueError):
        kmer_ids("ACGTACGT", k, stride)


@settings(max_examples=200, deadline=None)
@given(seq=st.text(alphabet="ACGTN", max_size=300), k=st.integers(1, 9), stride=st.integers(1, 5))
def test_reverse_complement_map(seq, k, stride):
    rc = reverse_complement_map(k)
    ids = kmer_ids(seq, k, stride)
    rc_seq = reverse_complement(seq)
    if stride == 1 or (len(seq) >= k and (len(seq) - k) % stride == 0):
        # the k-mers of the reverse complement are the RC k-mers in reverse order
        assert np.array_equal(rc[ids][::-1], kmer_ids(rc_seq, k, stride))
    assert np.array_equal(rc[rc], np.arange(vocab_size(k)))  # an involution


def test_reverse_complement_map_small():
    rc = reverse_complement_map(2)
    assert rc[:5].tolist() == [0, 1, 2, 3, 4]
    pairs = {"AA": "TT", "AC": "GT", "CG": "CG", "GA": "TC"}
    for kmer, expected in pairs.items():
        assert rc[kmer_ids(kmer, 2)[0]] == kmer_ids(expected, 2)[0]
    assert not rc.flags.writeable


@settings(max_examples=150, deadline=None)
@given(seq=st.text(alphabet="ACGT", min_size=1, max_size=200), k=st.integers(1, 12), stride=st.integers(1, 4))
def test_decode_round_trip(seq, k, stride):
    ids = kmer_ids(seq, k, stride)
    assert decode_ids(ids, k) == [seq[i:i + k] for i in range(0, len(seq) - k + 1, stride)]


def test_decode_special_tokens_and_range():
    assert decode_ids([0, 1, 2, 3, 4, 5], 3) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "AAA"]
    assert decode_ids([], 3) == []
    with pytest.raises(ValueError):
        decode_ids([vocab_size(3)], 3)


def test_non_ascii_text_is_unknown():
    assert kmer_ids("ACGé", 1).tolist() == [5, 6, 7, 1]


def test_large_sequence_blocks_and_n_runs():
    """A few blocks of real genome with N runs: equal to tokenizing pieces separately around the Ns."""
    (rec,) = read_fasta(ECOLI_BGZ)
    seq = bytearray(rec.seq[:3_000_000])
    seq[1_048_570:1_048_590] = b"N" * 20  # across the first block boundary
    ids = kmer_ids(bytes(seq), 6)
    assert (ids[1_048_565:1_048_590] == UNK).all()
    assert (ids[1_048_590:] != UNK).all() and (ids[:1_048_565] != UNK).all()
    assert np.array_equal(ids[:1_048_565], kmer_ids(bytes(seq[:1_048_570]), 6))
    assert np.array_equal(ids[1_048_590:], kmer_ids(bytes(seq[1_048_590:]), 6))


@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 9), stride=st.integers(1, 6), tokens=st.integers(1, 30), data=st.data())
def test_window_ids_made_from_base_codes_equal_kmer_ids(k, stride, tokens, data):
    """padded_codes + window_ids (genome windows tokenized on the model's device) against kmer_ids of each
    window's bases (and of their reverse complement), [PAD] past each row's tokens; rows of odd lengths, empty
    rows, lower case, N and other letters."""
    import torch

    from genolin.tokenize import padded_codes, window_ids

    length = tokens * stride + 2 * k - 2
    nbins = data.draw(st.lists(st.integers(0, tokens), min_size=1, max_size=5))
    seqs = [data.draw(st.text("ACGTacgtNnRY", min_size=n * stride + 2 * k - 2, max_size=n * stride + 2 * k - 2))
            .encode() if n else b"" for n in nbins]
    for rc in (False, True):
        ids, mask = window_ids(torch.from_numpy(padded_codes(seqs, length, rc=rc)), torch.tensor(nbins), k, stride)
        assert ids.shape == mask.shape == (len(seqs), tokens) and ids.dtype == torch.int64
        for row, (seq, n) in enumerate(zip(seqs, nbins, strict=True)):
            want = kmer_ids((reverse_complement(seq) if rc else seq)[k - 1:], k, stride)[:n] if n else []
            np.testing.assert_array_equal(ids[row, :n].numpy(), want)
            assert (ids[row, n:] == PAD).all() and mask[row, :n].all() and not mask[row, n:].any()
