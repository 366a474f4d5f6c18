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


def test_top_calls_by_score_then_widened_and_in_genome_order():
    from genolin.io.bed import bed6_lines, top_calls

    calls = [Interval("chr1", 10, 14, "a", 300.0, "+"), Interval("chr2", 490, 494, "b", 900.0, "-"),
             Interval("chr1", 600, 604, "c", 900.0, "+"), Interval("chr1", 800, 804, "d", None, "+"),
             Interval("chr2", 5, 9, "e", 500.0, "-")]
    assert [c.name for c in top_calls(calls, 3)] == ["b", "c", "e"]  # equal scores keep file order
    assert [c.name for c in top_calls(calls, 9)] == ["b", "c", "e", "a", "d"]  # unscored last
    assert top_calls(calls, 0) == []
    wide = top_calls(calls, 4, CONTIGS, flank=100)  # clipped to each contig, in genome order
    assert [(c.chrom, c.start, c.end, c.name, c.strand) for c in wide] == [
        ("chr1", 0, 111, "a", "+"), ("chr1", 500, 701, "c", "+"), ("chr2", 0, 106, "e", "-"),
        ("chr2", 390, 500, "b", "-")]
    assert list(bed6_lines(wide[:1] + [calls[3]])) == ["chr1\t0\t111\ta\t300\t+\n", "chr1\t800\t804\td\t.\t+\n"]
    with pytest.raises(ValueError, match="flank needs"):
        top_calls(calls, 2, flank=10)


def test_the_workflow_top_regions_script(tmp_path):
    """workflows/scripts/top_regions.py on a peaks BED as predict writes it, and on one without calls."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "workflows" / "scripts" / "top_regions.py"
    (tmp_path / "g.sizes").write_text("chr1\t1000\nchr2\t500\n")
    (tmp_path / "p.bed").write_text('track name="g promoters" useScore=1\nchr1\t600\t604\tpromoter_1\t700\t+\n'
                                    "chr2\t20\t24\tpromoter_2\t900\t-\nchr2\t300\t304\tpromoter_3\t100\t+\n")
    (tmp_path / "none.bed").write_text('track name="g promoters" useScore=1\n')
    (tmp_path / "bad.bed").write_text("chr3\t20\t24\tpromoter_1\t900\t-\n")

    def top(peaks):
        return subprocess.run([sys.executable, str(script), str(tmp_path / peaks), str(tmp_path / "g.sizes"), "2",
                               "50", str(tmp_path / "top.bed")], capture_output=True, text=True)

    assert top("p.bed").returncode == 0
    assert (tmp_path / "top.bed").read_text() == "chr1\t550\t651\tpromoter_1\t700\t+\nchr2\t0\t71\tpromoter_2\t900\t-\n"
    assert top("none.bed").returncode == 0 and (tmp_path / "top.bed").read_text() == ""
    r = top("bad.bed")
    assert r.returncode == 1 and "contig 'chr3' is not in the FASTA" in r.stderr and "Traceback" not in r.stderr
