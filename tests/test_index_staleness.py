"""FASTA indexes (.fai, .gzi) that no longer describe their FASTA are built again or refused, never trusted; a
command that fails on a FASTA's content leaves no index beside it."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from Bio import bgzf
from click.testing import CliRunner
from conftest import FIXTURES

from genolin.cli import cli
from genolin.errors import InputError
from genolin.io.fasta import Genome, read_fasta

V1_TRACK = FIXTURES / "v1_runs" / "track_run"


def run(*args):
    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def random_seq(n: int, seed: int) -> str:
    return "".join(np.random.default_rng(seed).choice(list("ACGT"), n))


def fasta_text(records: dict[str, str], width: int = 60, newline: str = "\n") -> bytes:
    """Records as FASTA, ``width`` bases a line (the dict's keys are whole header lines)."""
    return "".join(f">{header}{newline}" + "".join(f"{seq[i:i + width]}{newline}" for i in range(0, len(seq), width))
                   for header, seq in records.items()).encode()


def write(path, text: bytes, compressed: bool) -> None:
    if compressed:
        with bgzf.BgzfWriter(str(path), "wb") as fh:
            fh.write(text)
    else:
        path.write_bytes(text)


def indexes(path) -> list:
    return [p for p in (path.parent / (path.name + ".fai"), path.parent / (path.name + ".gzi")) if p.exists()]


def keep_index_newer(path) -> None:
    """The index newer than the FASTA, as after an edit that kept the FASTA's time or an index copied in."""
    stamp = path.stat().st_mtime + 100
    for p in indexes(path):
        os.utime(p, (stamp, stamp))


def assert_reads_as_file(path) -> None:
    want = {rec.name: rec.seq for rec in read_fasta(path)}
    with Genome(path) as genome:
        assert genome.names == list(want)
        for name, seq in want.items():
            assert genome.fetch(name) == seq
            assert genome.fetch(name, min(1, len(seq)), max(len(seq) - 1, 0)) == seq[1:-1]


ONE, TWO, THREE = random_seq(500, 1), random_seq(333, 2), random_seq(250, 3)
EDITS = {
    # the report's cases: a header renamed to one of the same length, to one of another length; and others
    "same length, middle": ({"s1": ONE, "s2 x": TWO, "s3": THREE}, {"s1": ONE, "t2 x": TWO, "s3": THREE}),
    "same length, first": ({"s1": ONE, "s2": TWO}, {"q1": ONE, "s2": TWO}),
    "same length, last": ({"s1": ONE, "s2": TWO, "s3": THREE}, {"s1": ONE, "s2": TWO, "s9": THREE}),
    "longer": ({"s1": ONE, "s2": TWO, "s3": THREE}, {"s1": ONE, "chromosome_2 [topology=circular]": TWO,
                                                      "s3": THREE}),
    "shorter": ({"contig_1": ONE, "contig_2": TWO}, {"c1": ONE, "c2": TWO}),
    "sequence longer": ({"s1": ONE, "s2": TWO}, {"s1": ONE + "ACGT", "s2": TWO}),
    "a record more": ({"s1": ONE, "s2": TWO}, {"s1": ONE, "s2": TWO, "s3": THREE}),
    "a record less": ({"s1": ONE, "s2": TWO, "s3": THREE}, {"s1": ONE, "s2": TWO}),
    "one line each": ({"s1": ONE, "s2": TWO}, {"s1": ONE[:60], "s2": TWO[:60]}),
}


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "bgzf"])
@pytest.mark.parametrize("edit", list(EDITS))
def test_an_index_newer_than_its_edited_fasta_is_built_again(tmp_path, edit, compressed, caplog):
    """The report: a .fai newer than a FASTA whose header was then renamed gave the old name; after a change of
    layout, a bogus "invalid character '>'" or an internal error (a reshape)."""
    before, after = EDITS[edit]
    path = tmp_path / ("g.fa.bgz" if compressed else "g.fa")
    write(path, fasta_text(before), compressed)
    Genome(path).close()
    assert len(indexes(path)) == (2 if compressed else 1)
    write(path, fasta_text(after), compressed)
    keep_index_newer(path)
    assert_reads_as_file(path)
    assert "indexing it again" in caplog.text
    with Genome(path) as genome:
        assert genome.circular == ({"chromosome_2"} if edit == "longer" else set())


def test_an_index_of_another_file_copied_in_is_not_used(tmp_path):
    other, path = tmp_path / "other.fa", tmp_path / "g.fa"
    other.write_bytes(fasta_text({"a": ONE, "b": TWO}))
    path.write_bytes(fasta_text({"a": ONE, "b": TWO}, width=70))  # the same records, wrapped otherwise
    Genome(other).close()
    shutil.copy(tmp_path / "other.fa.fai", tmp_path / "g.fa.fai")
    keep_index_newer(path)
    assert_reads_as_file(path)


def test_a_damaged_gzi_is_built_again(tmp_path):
    path = tmp_path / "g.fa.bgz"
    write(path, fasta_text({"a": random_seq(200_000, 4), "b": TWO}), True)
    Genome(path).close()
    gzi = tmp_path / "g.fa.bgz.gzi"
    raw = bytearray(gzi.read_bytes())
    raw[8:16] = (int.from_bytes(raw[8:16], "little") + 7).to_bytes(8, "little")  # the second block 7 bytes off
    gzi.write_bytes(bytes(raw))
    keep_index_newer(path)
    assert_reads_as_file(path)
    assert gzi.read_bytes() != bytes(raw)


LAYOUTS = {
    "wrapped": fasta_text({"a": ONE, "b desc": TWO}),
    "CRLF": fasta_text({"a": ONE, "b": TWO}, newline="\r\n"),
    "no final newline": fasta_text({"a": ONE, "b": TWO})[:-1],
    "blank lines between and after": fasta_text({"a": ONE}) + b"\n>b\n" + TWO.encode() + b"\n\n",
    "lines filled exactly": fasta_text({"a": ONE[:120], "b": TWO[:60]}),
    "empty records": b">e\n" + fasta_text({"a": ONE, "b": TWO}) + b">f\n>g",
    "unwrapped": fasta_text({"a": ONE, "b": TWO}, width=10_000),
}


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "bgzf"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_an_index_that_matches_is_kept(tmp_path, layout, compressed, caplog):
    """Every layout pyfaidx indexes passes the check: a matching index is read, not built on every run."""
    path = tmp_path / ("g.fa.bgz" if compressed else "g.fa")
    write(path, LAYOUTS[layout], compressed)
    assert_reads_as_file(path)
    stamps = [(p.stat().st_ino, p.stat().st_mtime_ns) for p in indexes(path)]
    assert len(stamps) == (2 if compressed else 1)
    assert_reads_as_file(path)
    assert [(p.stat().st_ino, p.stat().st_mtime_ns) for p in indexes(path)] == stamps
    assert "index" not in caplog.text


def test_blank_lines_pyfaidx_cannot_index_are_read_into_memory(tmp_path, caplog):
    path = tmp_path / "g.fa"
    path.write_bytes(fasta_text({"a": ONE}) + b">b\n" + TWO.encode() + b"\n\n\n")  # pyfaidx 0.9: a RuntimeError
    assert_reads_as_file(path)
    assert "cannot index" in caplog.text and "report" not in caplog.text and not indexes(path)


def test_samtools_indexes_are_kept(tmp_path):
    """Indexes samtools made (the bundled E. coli genome's .fai and .gzi; pyfaidx's test file's .fai)."""
    for source in (FIXTURES.parent.parent / "data" / "ecoli_k12" / "NC_000913.3.fa.bgz",
                   FIXTURES / "pyfaidx" / "issue_83.fasta"):
        for p in [source, *indexes(source)]:
            shutil.copy(p, tmp_path / p.name)
        path = tmp_path / source.name
        keep_index_newer(path)
        before = [p.read_bytes() for p in indexes(path)]
        with Genome(path) as genome:
            assert genome.lengths == {rec.name: len(rec) for rec in read_fasta(path)}
        assert [p.read_bytes() for p in indexes(path)] == before


def test_a_stale_index_in_a_read_only_folder_is_built_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "g.fa"
    path.write_bytes(fasta_text({"s1": ONE, "s2": TWO}))
    Genome(path).close()
    path.write_bytes(fasta_text({"s1": ONE, "t2": TWO}))
    keep_index_newer(path)
    old = (folder / "g.fa.fai").read_bytes()
    folder.chmod(0o555)
    try:
        assert_reads_as_file(path)
        assert (folder / "g.fa.fai").read_bytes() == old  # the user's file is left as it is
        assert list((tmp_path / "cache").rglob("g.fa.fai"))
    finally:
        folder.chmod(0o755)


def test_a_stale_index_that_cannot_be_rebuilt_is_refused(tmp_path, monkeypatch):
    (tmp_path / "not_a_folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not_a_folder"))
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "g.fa"
    path.write_bytes(fasta_text({"s1": ONE, "s2": TWO}))
    Genome(path).close()
    path.write_bytes(fasta_text({"s1": ONE, "chromosome_2": TWO}))
    keep_index_newer(path)
    folder.chmod(0o555)
    try:
        with pytest.raises(InputError, match=r"ro/g\.fa\.fai: out of date or not an index of .*g\.fa; its folder is "
                                             r"read-only .*: delete it"):
            Genome(path)
    finally:
        folder.chmod(0o755)
    (folder / "g.fa.fai").unlink()
    folder.chmod(0o555)
    try:
        with pytest.raises(InputError, match=r"ro/g\.fa: no index beside it; its folder is read-only .*XDG_CACHE_HOME"):
            Genome(path)
    finally:
        folder.chmod(0o755)


def test_predict_reads_the_renamed_contigs(tmp_path):
    """Through the CLI, as the report met it: the predictions carry the FASTA's names, not the index's."""
    path = tmp_path / "g.fa"
    path.write_bytes(fasta_text({"s1": random_seq(3000, 5), "s2": random_seq(2500, 6)}))
    assert run("index", "--fasta", path, "--sizes", tmp_path / "g.sizes").exit_code == 0
    path.write_bytes(fasta_text({"s1": random_seq(3000, 5), "contig_two": random_seq(2500, 6)}))
    keep_index_newer(path)
    r = run("predict", "--model", V1_TRACK, "--fasta", path, "--out", tmp_path / "p")
    assert r.exit_code == 0, r.output
    contigs = {line.split("\t")[0] for line in (tmp_path / "p.plus.bedGraph").read_text().splitlines()[1:]}
    assert contigs == {"s1", "contig_two"}


# --- a failed command leaves no index ---------------------------------------------------------------------------

PROTEIN = b">p1 a protein\nMKVLAAGIVGLLLAGCSSHHHHHH\n>p2\nMSTNPKPQRKTKRNTNRRPQDVKFPGG\n"


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "bgzf"])
def test_predict_on_a_protein_fasta_leaves_no_index(tmp_path, compressed):
    path = tmp_path / ("proteins.fa.bgz" if compressed else "proteins.fa")
    write(path, PROTEIN, compressed)
    r = run("predict", "--model", V1_TRACK, "--fasta", path, "--out", tmp_path / "p")
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.output.splitlines() == [f"genolin: error: {path}: record 'p1' position 4: invalid character 'L': not a "
                                     "nucleotide or IUPAC code (a protein sequence?)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_index_command_on_a_protein_fasta_leaves_no_index(tmp_path):
    path = tmp_path / "proteins.fa"
    path.write_bytes(PROTEIN)
    r = run("index", "--fasta", path, "--sizes", tmp_path / "p.sizes")
    assert r.exit_code == 1 and len(r.output.splitlines()) == 1
    assert f"{path}:2: record 'p1': invalid character 'L'" in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    path.write_bytes(fasta_text({"a": ONE, "b": TWO}))  # for this command, the index is the result
    assert run("index", "--fasta", path, "--sizes", tmp_path / "p.sizes").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.sizes", path.name, path.name + ".fai"]
    assert (tmp_path / "p.sizes").read_text() == "a\t500\nb\t333\n"


def test_an_index_made_before_is_left_when_the_content_fails(tmp_path):
    import pyfaidx

    path = tmp_path / "proteins.fa"
    path.write_bytes(PROTEIN)
    pyfaidx.Faidx(str(path)).close()  # made elsewhere: not genolin's to remove
    before = (tmp_path / "proteins.fa.fai").read_bytes()
    r = run("predict", "--model", V1_TRACK, "--fasta", path, "--out", tmp_path / "p")
    assert r.exit_code == 1 and "invalid character 'L'" in r.output and "Traceback" not in r.output
    assert (tmp_path / "proteins.fa.fai").read_bytes() == before
