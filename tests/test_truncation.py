"""Compressed input cut short: every reader (streaming FASTA, random access, small tables) gives a clean InputError
naming the file, or the whole data, never less; cuts at random offsets and exactly between BGZF blocks."""

from __future__ import annotations

import gzip
import struct

import pytest
from conftest import ECOLI_BGZ
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genolin.errors import InputError
from genolin.io.bed import read_bed
from genolin.io.fasta import Genome, read_fasta

(RECORD,) = read_fasta(ECOLI_BGZ)
SEQS = {"a": RECORD.seq[:150_000], "b": RECORD.seq[2_000_000:2_090_000]}
FASTA = b"".join(b">" + name.encode() + b"\n" + s + b"\n" for name, s in SEQS.items())


def bgzf_bytes(data: bytes) -> bytes:
    """``data`` written by Biopython's BGZF writer (64 KiB blocks, then the end-of-file block)."""
    import tempfile
    from pathlib import Path

    from Bio import bgzf

    with tempfile.TemporaryDirectory() as d:
        with bgzf.BgzfWriter(Path(d) / "x.bgz", "wb") as w:
            w.write(data)
        return (Path(d) / "x.bgz").read_bytes()


GZ = gzip.compress(FASTA)
BGZ = bgzf_bytes(FASTA)


def block_ends(data: bytes) -> list[int]:
    """Offsets where BGZF blocks end (BSIZE in each block's BC subfield)."""
    ends, pos = [], 0
    while pos < len(data):
        bsize = struct.unpack("<H", data[pos + 16:pos + 18])[0]
        pos += bsize + 1
        ends.append(pos)
    return ends


def read_all(path) -> dict[str, bytes] | None:
    """Every reader's view of the file; None when it refuses it with an InputError naming the file."""
    views = []
    for reader in (lambda: {r.name: r.seq for r in read_fasta(path)},
                   lambda: (lambda g: {c: g.fetch(c) for c in g.lengths})(Genome(path))):
        try:
            views.append(reader())
        except InputError as exc:
            assert str(path) in str(exc)
            views.append(None)
    assert views[0] == views[1] or None in views, "the two readers disagree"
    return views[0] if views[1] is not None else None


def check_cut(tmp_path, data: bytes, n: int, suffix: str) -> None:
    path = tmp_path / f"cut{n}{suffix}"
    path.write_bytes(data[:n])
    got = read_all(path)
    assert got is None or got == SEQS, f"cut at {n} of {len(data)} bytes read as shorter data"
    if n < len(data):
        assert got is None, f"cut at {n} of {len(data)} bytes was accepted"


def test_whole_files_read_completely(tmp_path):
    for data, suffix in ((GZ, ".fa.gz"), (BGZ, ".fa.bgz")):
        path = tmp_path / f"whole{suffix}"
        path.write_bytes(data)
        assert read_all(path) == SEQS


def test_bgzf_cut_between_blocks(tmp_path):
    ends = block_ends(BGZ)
    assert len(ends) >= 4 and ends[-1] == len(BGZ)
    for n in ends[:-1] + [len(BGZ) - 1, len(BGZ) - 28]:  # between data blocks, and inside the EOF block
        check_cut(tmp_path, BGZ, n, ".fa.bgz")


def test_gzip_cut_inside_its_trailer(tmp_path):
    for n in range(len(GZ) - 9, len(GZ)):  # the last deflate bytes, CRC32 and ISIZE
        check_cut(tmp_path, GZ, n, ".fa.gz")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(0.0, 1.0, exclude_max=True), bgzf=st.booleans())
def test_cut_anywhere_is_refused(tmp_path, fraction, bgzf):
    data = BGZ if bgzf else GZ
    check_cut(tmp_path, data, max(1, int(fraction * len(data))), ".fa.bgz" if bgzf else ".fa.gz")


def test_real_bgzip_genome_cut_at_a_block_boundary(tmp_path):
    """The bundled genome (bgzip from htslib) cut where its .gzi says a block starts."""
    gzi = ECOLI_BGZ.with_name(ECOLI_BGZ.name + ".gzi").read_bytes()
    (count,) = struct.unpack("<Q", gzi[:8])
    offsets = [struct.unpack("<Q", gzi[8 + 16 * i:16 + 16 * i])[0] for i in range(count)]
    data = ECOLI_BGZ.read_bytes()
    path = tmp_path / "cut.fa.bgz"
    path.write_bytes(data[:offsets[len(offsets) // 2]])
    with pytest.raises(InputError, match="truncated bgzip file"):
        Genome(path)
    with pytest.raises(InputError, match="truncated bgzip file"):
        list(read_fasta(path))


def test_small_tables_cut_short(tmp_path):
    bed = b"".join(f"a\t{i}\t{i + 1}\tt\t0\t+\n".encode() for i in range(0, 100_000, 7))
    data = gzip.compress(bed)
    for n in (len(data) // 3, len(data) - 4):
        path = tmp_path / f"t{n}.bed.gz"
        path.write_bytes(data[:n])
        with pytest.raises(InputError, match="truncated"):
            read_bed(path)
