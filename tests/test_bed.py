"""BED3/BED6 intervals and their checks against the genome."""

from __future__ import annotations

import pytest
from conftest import ECOLI_BGZ, FIXTURES, shared_file

from genolin.errors import InputError
from genolin.io.bed import Interval, read_bed
from genolin.io.fasta import Genome

CONTIGS = {"chr1": 1000, "chr2": 500}


def write(tmp_path, text):
    path = tmp_path / "x.bed"
    path.write_text(text)
    return path


def test_bed6_with_track_browser_comment_and_header_lines(tmp_path):
    path = write(tmp_path, "browser position chr1:1-100\ntrack name=tss\n# comment\nchrom\tstart\tend\n\n"
                           "chr1\t10\t11\tp1\t0\t+\nchr2\t499\t500\tp2\t.\t-\n")
    assert read_bed(path, CONTIGS) == [Interval("chr1", 10, 11, "p1", 0.0, "+"),
                                       Interval("chr2", 499, 500, "p2", None, "-")]


@pytest.mark.parametrize("header", ["chrom\tstart\tend", "chrom\tchromStart\tchromEnd\tname\tscore\tstrand",
                                    "seqname start_0based end"])
def test_column_header_line_is_skipped(tmp_path, header):
    assert read_bed(write(tmp_path, f"{header}\nchr1\t10\t11\n"), CONTIGS) == [Interval("chr1", 10, 11)]
    with pytest.raises(InputError, match=r"x\.bed: no intervals"):  # a header alone
        read_bed(write(tmp_path, f"{header}\n"), CONTIGS)


def test_bed3(tmp_path):
    assert read_bed(write(tmp_path, "chr1\t0\t1000\n"), CONTIGS) == [Interval("chr1", 0, 1000)]


def test_pyfaidx_regions_bed():
    intervals = read_bed(FIXTURES / "pyfaidx" / "regions.bed")
    assert [(i.chrom, i.start, i.end) for i in intervals] == [
        ("gi|563317589|dbj|AB821309.1|", 0, 999), ("gi|543583785|ref|NM_000465.3|", 99, 5522)]


def test_pyfaidx_malformed_bed():
    with pytest.raises(InputError, match=r"malformed\.bed:1: BED needs at least 3 columns"):
        read_bed(FIXTURES / "pyfaidx" / "malformed.bed")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("chr1\t1\t5\nchr1\tx\t5\n", r":2: start 'x' is not an integer"),
        ("chr1\t1.5\t5\n", r"x\.bed:1: start '1\.5' is not an integer"),  # a first line of data, not a header
        ("track name=t\nchr1\t1e3\t2000\n", r"x\.bed:2: start '1e3' is not an integer"),
        ("chr1\t1,000\t2,000\nchr1\t1\t5\n", r"x\.bed:1: start '1,000' is not an integer"),
        ("chr1\tNA\tNA\nchr1\t1\t5\n", r"x\.bed:1: start 'NA' is not an integer"),
        ("chr1\t10\tend\n", r"x\.bed:1: end 'end' is not an integer"),
        ("chrom\tstart\tend\nchr1\tstart\tend\n", r":2: start 'start' is not an integer"),  # one header only
        ("chr1\t-1\t5\n", r":1: start -1 is negative"),
        ("chr1\t5\t5\n", r":1: start 5 is not before end 5"),
        ("chr1\t9\t5\n", r":1: start 9 is not before end 5"),
        ("chr1\t900\t1001\n", r":1: end 1001 is beyond the length 1000 of contig 'chr1'"),
        ("chrX\t1\t5\n", r":1: contig 'chrX' is not in the FASTA"),
        ("chr1\t1\t5\tn\t0\t*\n", r":1: strand must be '\+', '-' or '\.', found '\*'"),
        ("chr1\t1\t5\tn\tbig\t+\n", r":1: score 'big' is not a number"),
        ("# nothing\n", r"no intervals"),
    ],
)
def test_bad_bed(tmp_path, text, message):
    with pytest.raises(InputError, match=message):
        read_bed(write(tmp_path, text), CONTIGS)


def test_regulondb_tss_against_ecoli_genome():
    bed = shared_file("ecoli_k12/regulondb_10.9_tss.bed")
    with Genome(ECOLI_BGZ) as genome:
        intervals = read_bed(bed, genome.lengths)
    assert len(intervals) == 8699
    assert {i.strand for i in intervals} == {"+", "-"}
    assert all(i.end - i.start == 1 for i in intervals)


def test_renumber_calls_continues_the_numbering():
    from genolin.io.bed import renumber_calls

    lines = ["chr1\t10\t12\tpromoter_1\t900\t+\n", "chr2\t5\t7\tpromoter_2\t450\t-"]
    assert list(renumber_calls(lines, 7)) == ["chr1\t10\t12\tpromoter_8\t900\t+\n", "chr2\t5\t7\tpromoter_9\t450\t-\n"]
    assert list(renumber_calls([])) == []
