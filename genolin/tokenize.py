"""k-mer tokenizer: DNA (str or bytes, length L) -> token ids (int32 array of (L - k) // stride + 1).

Vocabulary (``vocab_size(k) = 5 + 4**k``)::

    0 [PAD]  1 [UNK]  2 [CLS]  3 [SEP]  4 [MASK]
    5 + sum_j code(base_j) * 4**(k-1-j)   with A=0, C=1, G=2, T=3   (k-mers in lexicographic order)

Lower-case counts as upper-case; a k-mer holding any other character (N, IUPAC codes, anything) is [UNK].
Tokens start at 0, stride, 2*stride, ... while a whole k-mer fits.

How it is fast (stride 1, no int64 temporaries of L x k): bytes -> 2-bit codes with ``bytes.translate``, then
k-mer codes by *doubling*: the codes of 2-mers are ``c[i] << 2 | c[i+1]``, of 4-mers ``m2[i] << 4 | m2[i+2]``,
and a k-mer joins the power-of-two pieces of k's binary form, so a k-mer costs ~log2(k) vectorised passes in
the narrowest dtype that holds it. The work runs over blocks of ~1 M bases (overlapping by k-1) so that the
temporaries stay in cache and memory stays bounded. Windows that touch a non-ACGT base are found by the same
doubling on a 0/1 "bad" array, only for blocks that contain one.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
N_SPECIAL = len(SPECIAL_TOKENS)
K_MAX = 12
ID_DTYPE = np.int32
BASES = "ACGT"

# byte -> 2-bit code; 4 marks "not ACGT" (N, IUPAC, anything else)
_CODE = bytearray(b"\x04" * 256)
for _i, _b in enumerate(b"ACGT"):
    _CODE[_b] = _CODE[_b + 32] = _i
_TO_CODE = bytes(_CODE)
# byte -> 2-bit code of its complement (A <-> T, C <-> G: 3 - code); 4 stays 4
_TO_RC_CODE = bytes(c if c == 4 else 3 - c for c in _TO_CODE)
del _CODE, _i, _b

_BLOCK = 1 << 20  # bases per block of work


def vocab_size(k: int) -> int:
    """Number of token ids for k-mers of length ``k``: the 5 special tokens plus 4**k k-mers."""
    _check_k(k)
    return N_SPECIAL + 4**k


def base_codes(seq: str | bytes) -> np.ndarray:
    """(L,) uint8 per base: A, C, G, T (either case) -> 0..3, anything else -> 4."""
    return np.frombuffer(_as_bytes(seq).translate(_TO_CODE), dtype=np.uint8)


def n_tokens(length: int, k: int, stride: int = 1) -> int:
    """Number of tokens for a sequence of ``length`` bases: (L - k) // stride + 1, or 0 when L < k."""
    return 0 if length < k else (length - k) // stride + 1


def _check_k(k: int, stride: int = 1) -> None:
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= K_MAX:
        raise ValueError(f"k must be an integer from 1 to {K_MAX}, got {k!r}")
    if not isinstance(stride, (int, np.integer)) or stride < 1:
        raise ValueError(f"stride must be a positive integer, got {stride!r}")


def _as_bytes(seq: str | bytes | bytearray | memoryview) -> bytes:
    if isinstance(seq, str):
        return seq.encode("ascii", errors="replace")  # non-ASCII characters become '?', hence [UNK]
    return bytes(seq)


def _uint_for_bits(bits: int) -> type[np.unsignedinteger]:
    return np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32


def _windows(values: np.ndarray, k: int, bits: int) -> np.ndarray:
    """Join per-position values over windows of ``k`` by doubling; returns length len(values) - k + 1.

    ``bits=2``: values are 2-bit base codes and the result is the k-mer code (first base most significant),
    in the narrowest unsigned dtype that holds 2k bits. ``bits=0``: values are booleans and the result says
    whether any value in the window is set.
    """

    def join(left, left_width, right, right_width):  # right covers the bases just after left's
        if bits == 0:
            return left | right
        out = left.astype(_uint_for_bits(bits * (left_width + right_width)))  # a copy: shifted in place
        out <<= bits * right_width
        out |= right
        return out

    pieces = {1: values}
    w = 1
    while 2 * w <= k:
        half = pieces[w]
        n = len(half) - w
        pieces[2 * w] = join(half[:n], w, half[w : w + n], w)
        w *= 2
    out, width = None, 0
    n_out = len(values) - k + 1
    while w:  # the powers of two in k, largest first
        if k & w:
            piece = pieces[w][width : width + n_out]
            out = piece[:n_out] if out is None else join(out, width, piece, w)
            width += w
        w //= 2
    return out


def kmer_ids(seq: str | bytes, k: int = 6, stride: int = 1) -> np.ndarray:
    """Token ids of the k-mers of ``seq`` starting at 0, stride, 2*stride, ... (int32, length n_tokens)."""
    _check_k(k, stride)
    raw = _as_bytes(seq)
    n = n_tokens(len(raw), k, stride)
    out = np.empty(n, dtype=ID_DTYPE)
    if n == 0:
        return out
    # Block b covers token starts [t0, t1) of the stride-1 grid; its bases are [t0, t1 + k - 1).
    block = max(_BLOCK - _BLOCK % stride, stride)
    last_start = (n - 1) * stride
    for t0 in range(0, last_start + 1, block):
        t1 = min(t0 + block, last_start + 1)
        chunk = raw[t0 : t1 + k - 1].translate(_TO_CODE)
        codes = np.frombuffer(chunk, dtype=np.uint8)
        if stride == 1:
            ids = _windows(codes, k, bits=2)
        else:
            ids = _strided_codes(codes, k, stride, t1 - t0)
        dst = out[t0 // stride : t0 // stride + len(ids)]
        np.add(ids, N_SPECIAL, out=dst, dtype=ID_DTYPE)  # in int32: a uint8 code + 5 could wrap
        if 4 in chunk:  # memchr: only blocks with a non-ACGT base pay for the mask
            bad = codes == 4
            bad_windows = _windows(bad, k, bits=0) if stride == 1 else _strided_bad(bad, k, stride, t1 - t0)
            dst[bad_windows] = UNK
    return out


def padded_codes(seqs: list[bytes], length: int, *, rc: bool = False) -> np.ndarray:
    """(len(seqs), length) uint8 ``base_codes`` of each sequence (``rc``: of its reverse complement), padded at the
    end with 4 (as N): the host's share of tokenizing genome windows, a few C passes per batch (``window_ids``
    does the rest on the model's device)."""
    joined = bytearray().join((s[::-1] if rc else s).ljust(length, b"N") for s in seqs)  # writable, for torch
    codes = np.frombuffer(joined.translate(_TO_RC_CODE if rc else _TO_CODE), dtype=np.uint8)
    return codes.reshape(len(seqs), length)


def window_ids(codes, nbins, k: int, stride: int):
    """Token ids of genome windows from their base codes, on the codes' device (on CUDA inside the forward's
    graph): codes (R, L) uint8 (``padded_codes``: each window's bases with k - 1 bases of context on each side, as
    ``TrackData.bases`` gives them), nbins (R,) int64 each window's tokens (0: a padding row) -> ids (R, T) int64,
    mask (R, T) bool with T = (L - 2k + 2) // stride: row r holds ``kmer_ids(bases[k - 1:], k, stride)[:nbins[r]]``,
    then [PAD]."""
    import torch

    rows, length = codes.shape
    t = (length - 2 * k + 2) // stride
    acc = torch.zeros(rows, t, dtype=torch.int64, device=codes.device)
    bad = torch.zeros(rows, t, dtype=torch.bool, device=codes.device)
    for j in range(k):  # base j of every k-mer: k strided passes of (R, T)
        col = codes[:, k - 1 + j: k - 1 + j + (t - 1) * stride + 1: stride]
        bad |= col == 4
        acc.mul_(4).add_(col)
    mask = torch.arange(t, device=codes.device) < nbins[:, None]
    ids = torch.where(bad, UNK, acc + N_SPECIAL).masked_fill_(~mask, PAD)
    return ids, mask


def _strided_codes(codes: np.ndarray, k: int, stride: int, span: int) -> np.ndarray:
    """k-mer codes at starts 0, stride, ... < span: k passes over L / stride positions (cheap for stride > 1)."""
    m = (span - 1) // stride + 1
    acc = np.zeros(m, dtype=_uint_for_bits(2 * k))
    for j in range(k):
        acc <<= 2
        acc |= codes[j : j + (m - 1) * stride + 1 : stride]
    return acc


def _strided_bad(bad: np.ndarray, k: int, stride: int, span: int) -> np.ndarray:
    m = (span - 1) // stride + 1
    acc = np.zeros(m, dtype=bool)
    for j in range(k):
        acc |= bad[j : j + (m - 1) * stride + 1 : stride]
    return acc


@functools.lru_cache(maxsize=K_MAX)
def _rc_map(k: int) -> np.ndarray:
    kmer = np.arange(4**k, dtype=np.int64)
    rc = np.zeros_like(kmer)
    for j in range(k):
        base = (kmer >> (2 * j)) & 3  # base at position k-1-j
        rc |= (3 - base) << (2 * (k - 1 - j))  # complement (A<->T, C<->G is 3 - code), moved to position j
    full = np.concatenate([np.arange(N_SPECIAL), rc + N_SPECIAL]).astype(ID_DTYPE)
    full.flags.writeable = False
    return full


def reverse_complement_map(k: int) -> np.ndarray:
    """Array of ``vocab_size(k)``: id -> id of the reverse-complement k-mer (special tokens map to themselves).

    For stride 1, ``rc_map[kmer_ids(s)][::-1] == kmer_ids(reverse_complement(s))``, so reverse-complement
    augmentation needs no re-tokenizing. The array is read-only and cached.
    """
    _check_k(k)
    return _rc_map(k)


_COMPLEMENT = bytes.maketrans(b"ACGTNacgtn", b"TGCANtgcan")


def reverse_complement(seq: str | bytes) -> bytes:
    """Reverse complement of a normalised (ACGTN, any case) sequence."""
    return _as_bytes(seq).translate(_COMPLEMENT)[::-1]


_ACGT = np.frombuffer(BASES.encode(), dtype=np.uint8)


def substitute(seq: bytes, rng: np.random.Generator, p: float) -> bytes:
    """``seq`` with each A/C/G/T replaced, with probability ``p``, by one of the four at random (N stays): the
    ``mutate_prob`` augmentation of training inputs."""
    bases = np.frombuffer(seq, dtype=np.uint8).copy()
    hit = np.flatnonzero((rng.random(len(bases)) < p) & np.isin(bases, _ACGT))
    bases[hit] = _ACGT[rng.integers(0, 4, len(hit))]
    return bases.tobytes()


def decode_ids(ids: Iterable[int] | np.ndarray, k: int) -> list[str]:
    """Token ids -> k-mer strings (special tokens as ``[PAD]``, ``[UNK]``, ...)."""
    _check_k(k)
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size(k)):
        raise ValueError(f"token ids must lie in [0, {vocab_size(k)}) for k={k}")
    kmers = ids - N_SPECIAL
    letters = np.frombuffer(BASES.encode(), dtype=np.uint8)
    digits = np.stack([(kmers >> (2 * (k - 1 - j))) & 3 for j in range(k)], axis=-1) if ids.size else None
    out = []
    for i, t in enumerate(ids.tolist()):
        out.append(SPECIAL_TOKENS[t] if t < N_SPECIAL else letters[digits[i]].tobytes().decode())
    return out


def tokenize_fasta(
    fasta: str | os.PathLike,
    out: str | os.PathLike,
    *,
    k: int = 6,
    stride: int = 1,
    compress: bool = False,
    progress: bool | None = None,
) -> dict[str, int]:
    """Tokenize every record of a FASTA file into ``out`` (.npz); returns ``{record: number of tokens}``.

    The archive holds one int32 array per record, keyed by record name, plus the 0-d arrays ``k``, ``stride``
    and ``vocab_size``. Records are written one at a time (memory: one record and its tokens), into a
    temporary file renamed to ``out`` only when everything succeeded.
    """
    from genolin.errors import InputError
    from genolin.io.fasta import read_fasta
    from genolin.io.files import sniff_compression
    from genolin.io.npz import NpzWriter
    from genolin.progress import progress_bar

    _check_k(k, stride)
    fasta = Path(fasta)
    sniff_compression(fasta)  # a missing or empty file fails here, before the output is created
    counts: dict[str, int] = {}
    meta = {"k": k, "stride": stride, "vocab_size": vocab_size(k)}
    with progress_bar(total=fasta.stat().st_size, unit="B", desc="tokenize", enabled=progress) as bar, \
            NpzWriter(out, compress=compress) as npz:
        for rec in read_fasta(fasta, progress=bar.update):
            if rec.name in meta:
                raise InputError(fasta, f"record name {rec.name!r} clashes with the archive's metadata key",
                                 rec.line)
            ids = kmer_ids(rec.seq, k, stride)
            npz.write(rec.name, ids)
            counts[rec.name] = len(ids)
        for key, value in meta.items():
            npz.write(key, np.asarray(value, dtype=np.int64))
    return counts
