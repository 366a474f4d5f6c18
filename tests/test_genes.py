"""Gene annotations (GFF3, GenBank), calls linked to genes against a brute-force reading of the classes, and the
GFF3 of the calls read back with gffutils."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DATA

from genolin.errors import InputError
from genolin.genes import ANTISENSE_BP, UPSTREAM_BP, Call, classify, gene_table
from genolin.io.annotation import Gene, read_genes

REFSEQ_GFF = DATA / "ecoli_k12" / "GCF_000005845.2_ASM584v2_genomic.gff.gz"
ECOLI = {"NC_000913.3": 4_641_652}


def test_refseq_gff3_genes():
    genes = read_genes(REFSEQ_GFF, ECOLI)
    assert len(genes) == 4494 and all(g.type == "gene" for g in genes)
    thr = genes[0]
    assert (thr.name, thr.locus_tag, thr.start, thr.end, thr.strand, thr.start_codon) == ("thrL", "b0001", 189, 255,
                                                                                          "+", 189)
    minus = next(g for g in genes if g.strand == "-")
    assert minus.start_codon == minus.end - 1


def genbank_and_gff3(tmp_path, genes: list[Gene], length: int, contig: str = "c1"):
    from Bio.Seq import Seq
    from Bio.SeqFeature import FeatureLocation, SeqFeature
    from Bio.SeqRecord import SeqRecord

    rec = SeqRecord(Seq("ACGT" * (length // 4)), id=contig, name=contig, description="test",
                    annotations={"molecule_type": "DNA"})
    for g in genes:
        rec.features.append(SeqFeature(FeatureLocation(g.start, g.end, strand=1 if g.strand == "+" else -1),
                                       type="gene", qualifiers={"locus_tag": [g.locus_tag], "gene": [g.name]}))
    from Bio import SeqIO

    SeqIO.write(rec, tmp_path / "a.gbk", "genbank")
    (tmp_path / "a.gff3").write_text("##gff-version 3\n" + "".join(
        f"{contig}\tt\tgene\t{g.start + 1}\t{g.end}\t.\t{g.strand}\t.\tID={g.locus_tag};Name={g.name};"
        f"locus_tag={g.locus_tag}\n" for g in genes))


def test_genbank_and_gff3_give_the_same_genes(tmp_path):
    genes = [Gene("c1", 100, 400, "+", "t1", "aaa", "t1", "gene"), Gene("c1", 500, 900, "-", "t2", "bbb", "t2",
                                                                        "gene")]
    genbank_and_gff3(tmp_path, genes, 2000)
    a, b = read_genes(tmp_path / "a.gbk", {"c1": 2000}), read_genes(tmp_path / "a.gff3", {"c1": 2000})
    key = [(g.contig, g.start, g.end, g.strand, g.name, g.locus_tag) for g in genes]
    assert [(g.contig, g.start, g.end, g.strand, g.name, g.locus_tag) for g in a] == key
    assert [(g.contig, g.start, g.end, g.strand, g.name, g.locus_tag) for g in b] == key


def test_bad_annotations_are_one_line(tmp_path):
    (tmp_path / "x.txt").write_text("hello\n")
    with pytest.raises(InputError, match="not GFF3"):
        read_genes(tmp_path / "x.txt", {"c1": 10})
    (tmp_path / "o.gff3").write_text("##gff-version 3\nchrZ\tt\tgene\t1\t9\t.\t+\t.\tID=g\n")
    with pytest.raises(InputError, match="no gene on the genome's contigs: the annotation names chrZ"):
        read_genes(tmp_path / "o.gff3", {"c1": 10})
    (tmp_path / "p.gff3").write_text("##gff-version 3\nc1\tt\tgene\t1\t90\t.\t+\t.\tID=g\n")
    with pytest.raises(InputError, match="past the end of contig 'c1'"):
        read_genes(tmp_path / "p.gff3", {"c1": 10})
    (tmp_path / "q.gff3").write_text("##gff-version 3\nc1\tt\tgene\tone\t9\t.\t+\t.\tID=g\n")
    with pytest.raises(InputError, match="line 2: start 'one'"):
        read_genes(tmp_path / "q.gff3", {"c1": 10})


def brute_class(call: Call, genes: list[Gene], calls: list[Call]) -> str:
    """The classes as the module docstring words them, one call and gene at a time."""
    def up(c, g):
        if c.strand != g.strand:
            return None
        d = g.start_codon - c.position if g.strand == "+" else c.position - g.start_codon
        return d if 0 <= d <= UPSTREAM_BP else None

    for g in genes:
        d = up(call, g)
        if d is not None:
            best = max((c for c in calls if up(c, g) is not None), key=lambda c: (c.score, -up(c, g)))
            if best is call:
                return "primary"
    if any(up(call, g) is not None for g in genes):
        return "secondary"
    if any(g.strand == call.strand and g.start <= call.position < g.end for g in genes):
        return "internal"
    if any(g.strand != call.strand and g.start - ANTISENSE_BP <= call.position < g.end + ANTISENSE_BP
           for g in genes):
        return "antisense"
    return "orphan"


@pytest.mark.parametrize("seed", range(4))
def test_classes_equal_a_brute_force_reading(seed):
    rng = np.random.default_rng(seed)
    genes = []
    for i in range(40):
        a = int(rng.integers(0, 19_000))
        genes.append(Gene("c", a, a + int(rng.integers(60, 1500)), "+-"[int(rng.integers(2))], f"g{i}", f"n{i}",
                          "", "gene"))
    genes.sort(key=lambda g: g.start)
    calls = [Call(f"t{i}", "c", int(rng.integers(0, 20_000)), "+-"[int(rng.integers(2))], float(rng.random()))
             for i in range(150)]
    links = classify(calls, genes)
    assert [link.cls for link in links] == [brute_class(c, genes, calls) for c in calls]
    for link in links:
        if link.cls in ("primary", "secondary"):
            g = link.gene
            assert link.distance == (g.start_codon - link.call.position if g.strand == "+"
                                     else link.call.position - g.start_codon)
    rows = gene_table(calls, genes)
    for row in rows:
        mine = [c for c in calls if c.strand == row.gene.strand and 0 <= (
            row.gene.start_codon - c.position if c.strand == "+" else c.position - row.gene.start_codon) <= UPSTREAM_BP]
        assert (row.call is None) == (not mine)
        if mine:
            assert row.call.score == max(c.score for c in mine)
            assert next(link for link in links if link.call is row.call).cls == "primary"


def test_the_gff3_of_calls_reads_back_with_gffutils(tmp_path):
    gffutils = pytest.importorskip("gffutils", reason="the dev extra's gffutils reads the GFF3 back")
    from genolin.io.tracks import track_outputs

    lengths = {"c1": 2000, "c2": 1003}
    genes = [Gene("c1", 400, 900, "+", "t1", "aaa", "t1", "gene"), Gene("c2", 100, 600, "-", "t2", "bbb", "t2",
                                                                        "gene")]
    with track_outputs(lengths, str(tmp_path / "o"), "bedgraph", "test", 4, genes=genes) as (writers, calls):
        for w in writers:
            w.add("c1", 0, np.zeros(500, np.float32), 4, 2000)
            w.flush()
            w.add("c2", 0, np.zeros(251, np.float32), 4, 1003)
            w.flush()
        calls.write("c1", 2000, [(70, 0.91, "+"), (200, 0.3, "-")])  # bin 70: 280-284, 116 bp upstream of aaa
        calls.write("c2", 1003, [(250, 0.5, "+"), (160, 0.7, "-")])  # bin 250 is cut at the contig's end
    text = (tmp_path / "o.gff3").read_text()
    assert text.startswith("##gff-version 3\n##sequence-region c1 1 2000\n##sequence-region c2 1 1003\n")
    db = gffutils.create_db(str(tmp_path / "o.gff3"), ":memory:", merge_strategy="error")
    tss = sorted(db.features_of_type("TSS"), key=lambda f: f.id)
    assert [f.id for f in tss] == ["tss_1", "tss_2", "tss_3", "tss_4"]
    t1 = db["tss_1"]
    assert (t1.seqid, t1.start, t1.end, t1.strand, float(t1.score)) == ("c1", 281, 284, "+", 0.91)
    assert t1.attributes["class"] == ["primary"] and t1.attributes["gene"] == ["aaa"]
    assert t1.attributes["distance"] == ["118"]  # start codon 400, bin centre 282
    assert db["tss_3"].end == 1003 and db["tss_3"].attributes["class"] == ["orphan"]
    assert db["tss_2"].attributes["class"] == ["antisense"] and db["tss_4"].attributes["class"] == ["primary"]
    p1 = db["promoter_1"]
    assert (p1.start, p1.end, p1.strand) == (221, 304, "+") and p1.attributes["tss"] == ["tss_1"]
    p2 = db["promoter_2"]  # minus strand: upstream is to the right
    assert (p2.start, p2.end) == (781, 864)
    peaks = (tmp_path / "o.peaks.bed").read_text().splitlines()[1:]
    assert [line.split("\t")[3] for line in peaks] == ["promoter_1", "promoter_2", "promoter_3", "promoter_4"]
    table = (tmp_path / "o.genes.tsv").read_text().splitlines()
    assert table[0].split("\t")[:3] == ["gene_id", "name", "locus_tag"]
    aaa = dict(zip(table[0].split("\t"), table[1].split("\t"), strict=True))
    assert (aaa["call"], aaa["distance"], aaa["class"], aaa["start_codon"]) == ("tss_1", "118", "primary", "401")
    bbb = dict(zip(table[0].split("\t"), table[2].split("\t"), strict=True))
    assert bbb["call"] == "tss_4" and bbb["distance"] == str(642 - 599)


@pytest.fixture(scope="module")
def slices(tmp_path_factory):
    """Two genomes cut from E. coli, each with its RefSeq genes: a (GFF3) and b (GenBank), and a protein FASTA."""
    from Bio import SeqIO
    from Bio.Seq import Seq
    from Bio.SeqFeature import FeatureLocation, SeqFeature
    from Bio.SeqRecord import SeqRecord

    from genolin.io.fasta import read_fasta

    d = tmp_path_factory.mktemp("slices")
    (rec,) = read_fasta(DATA / "ecoli_k12" / "NC_000913.3.fa.bgz")
    genes = read_genes(REFSEQ_GFF, ECOLI)
    for name, (lo, hi) in {"a": (0, 60_000), "b": (200_000, 250_000)}.items():
        seq = rec.seq[lo:hi].decode()
        (d / f"{name}.fa").write_text(f">{name}1\n{seq}\n")
        inside = [g for g in genes if lo <= g.start and g.end <= hi]
        if name == "a":
            (d / "a.gff3").write_text("##gff-version 3\n" + "".join(
                f"a1\tRefSeq\tgene\t{g.start - lo + 1}\t{g.end - lo}\t.\t{g.strand}\t.\tID={g.id};Name={g.name};"
                f"locus_tag={g.locus_tag}\n" for g in inside))
        else:
            r = SeqRecord(Seq(seq), id="b1", name="b1", description="slice", annotations={"molecule_type": "DNA"})
            r.features = [SeqFeature(FeatureLocation(g.start - lo, g.end - lo, strand=1 if g.strand == "+" else -1),
                                     type="gene", qualifiers={"locus_tag": [g.locus_tag], "gene": [g.name]})
                          for g in inside]
            SeqIO.write(r, d / "b.gbk", "genbank")
    (d / "bad.fa").write_text(">p\nMKVLAAGIVGLLLL\n")
    return d


def run_cli(*args):
    from click.testing import CliRunner

    from genolin.cli import cli

    return CliRunner().invoke(cli, ["-q", *map(str, args)])


def test_predict_links_calls_to_the_genes_of_a_gff3_or_a_genbank_annotation(tmp_path, slices):
    gffutils = pytest.importorskip("gffutils", reason="the dev extra's gffutils reads the GFF3 back")
    d = slices
    for name, annotation in (("a", d / "a.gff3"), ("b", d / "b.gbk")):
        r = run_cli("predict", "--model", "bacteria", "--fasta", d / f"{name}.fa", "--genes", annotation,
                    "--rc-average", "--device", "cpu", "--out", tmp_path / name)
        assert r.exit_code == 0, r.output
        rows = [line.split("\t") for line in (tmp_path / f"{name}.genes.tsv").read_text().splitlines()]
        head, rows = rows[0], rows[1:]
        expected = read_genes(annotation, {f"{name}1": 60_000 if name == "a" else 50_000})
        assert [r_[head.index("locus_tag")] for r_ in rows] == [g.locus_tag for g in expected]
        db = gffutils.create_db(str(tmp_path / f"{name}.gff3"), ":memory:", merge_strategy="error")
        tss = {f.id: f for f in db.features_of_type("TSS")}
        calls = (tmp_path / f"{name}.peaks.bed").read_text().splitlines()[1:]
        assert len(tss) == len(calls) > 0 and len(list(db.features_of_type("promoter"))) == len(calls)
        with_call = [r_ for r_ in rows if r_[head.index("call")] != "-"]
        assert with_call
        for r_ in with_call:  # each gene's call is a primary TSS of the GFF3, linked to that gene, upstream of it
            f = tss[r_[head.index("call")]]
            assert f.attributes["class"] == ["primary"] and 0 <= int(r_[head.index("distance")]) <= 300
        classes = {f.attributes["class"][0] for f in tss.values()}
        assert classes <= {"primary", "secondary", "internal", "antisense", "orphan"} and len(classes) >= 3


def test_many_genomes_in_one_run_one_of_them_bad(tmp_path, slices):
    d = slices
    r = run_cli("predict", "--model", "bacteria", "--fasta", d / "a.fa", "--fasta", d / "bad.fa", "--fasta",
                d / "b.fa", "--genes", d / "a.gff3", "--genes", d / "b.gbk", "--genes", d / "b.gbk", "--device",
                "cpu", "--out-dir", tmp_path / "out")
    assert r.exit_code == 1 and "1 of 3 genome(s) failed" in r.output and "Traceback" not in r.output
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == sorted([f"{g}.{s}" for g in "ab" for s in ("plus.bedGraph", "minus.bedGraph", "peaks.bed",
                                                                 "gff3", "genes.tsv")] + ["summary.tsv"])
    rows = [line.split("\t") for line in (tmp_path / "out" / "summary.tsv").read_text().splitlines()]
    assert rows[0] == ["genome", "fasta", "contigs", "bp", "calls", "seconds", "status"]
    assert [r_[0] for r_ in rows[1:]] == ["a", "bad", "b"]
    assert rows[1][2:5] == ["1", "60000", str(len((tmp_path / "out" / "a.peaks.bed").read_text().splitlines()) - 1)]
    assert rows[2][6].startswith("error: ") and "invalid character 'L'" in rows[2][6] and rows[3][6] == "ok"
    # the same from a list of genomes, annotations beside them; one genome alone in one process gives the same files
    (d / "list.txt").write_text("# genome  annotation\na.fa\ta.gff3\n\nb.fa b.gbk\n")
    r = run_cli("predict", "--model", "bacteria", "--genomes", d / "list.txt", "--device", "cpu", "--out-dir",
                tmp_path / "listed")
    assert r.exit_code == 0, r.output
    r = run_cli("predict", "--model", "bacteria", "--fasta", d / "b.fa", "--genes", d / "b.gbk", "--device", "cpu",
                "--out", tmp_path / "alone")
    assert r.exit_code == 0, r.output
    for suffix in ("plus.bedGraph", "peaks.bed", "gff3", "genes.tsv"):
        assert (tmp_path / "listed" / f"b.{suffix}").read_text() == (tmp_path / "out" / f"b.{suffix}").read_text()
        assert (tmp_path / f"alone.{suffix}").read_text().replace("alone", "b") == \
            (tmp_path / "out" / f"b.{suffix}").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--genomes", "LIST", "--out", "o"], "--genomes lists genomes for --out-dir"),
    (["--fasta", "A", "--out", "o", "--out-dir", "d"], "give --out (one output) or --out-dir"),
    (["--fasta", "A", "--fasta", "B", "--genes", "G", "--out-dir", "d"], "give --genes once per --fasta"),
])
def test_many_genome_options_that_do_not_fit_are_one_line(tmp_path, slices, args, message):
    d = slices
    (d / "LIST").write_text("a.fa\n")
    names = {"A": d / "a.fa", "B": d / "b.fa", "G": d / "a.gff3", "LIST": d / "LIST"}
    r = run_cli("predict", "--model", "bacteria", *[names.get(a, a) for a in args])
    assert r.exit_code == 2 and message in r.output


def test_genes_across_the_origin_are_left_out_with_a_warning(tmp_path, caplog):
    (tmp_path / "c.gff3").write_text("##gff-version 3\nc1\tt\tgene\t950\t1050\t.\t+\t.\tID=wrap\n"
                                     "c1\tt\tgene\t100\t400\t.\t-\t.\tID=g\n")
    genes = read_genes(tmp_path / "c.gff3", {"c1": 1000})
    assert [g.id for g in genes] == ["g"] and "cross the origin" in caplog.text
    (tmp_path / "d.gff3").write_text("##gff-version 3\nc1\tt\tgene\t950\t2100\t.\t+\t.\tID=far\n")
    with pytest.raises(InputError, match="past the end of contig 'c1'"):
        read_genes(tmp_path / "d.gff3", {"c1": 1000})


def test_a_bad_byte_or_a_cut_gzip_deep_in_an_annotation_is_one_line(tmp_path):
    import gzip

    lines = "".join(f"c1\tt\tgene\t{i + 1}\t{i + 50}\t.\t+\t.\tID=g{i}\n" for i in range(0, 5000, 60))
    (tmp_path / "a.gff3").write_bytes(b"##gff-version 3\n" + lines.encode() + b"c1\tt\tgene\t1\t9\t.\t+\t.\tID=\xff\n")
    with pytest.raises(InputError, match="cannot read the annotation"):
        read_genes(tmp_path / "a.gff3", {"c1": 10_000})
    whole = gzip.compress(b"##gff-version 3\n" + (lines * 20).encode())
    (tmp_path / "b.gff3.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InputError, match="cannot read the annotation"):
        read_genes(tmp_path / "b.gff3.gz", {"c1": 10_000})


def test_genome_names_are_unique():
    from genolin.predict import genome_names

    assert genome_names(["x/g_3.fa", "a/g.fa", "b/g.fa.gz", "c/g.fasta"]) == ["g_3", "g", "g_2", "g_4"]
    assert genome_names(["a/g.fa", "b/h.fa", "c/g.fa"], [None, "g", None]) == ["g_2", "g", "g_3"]


def test_a_list_with_a_header_names_each_genomes_files(tmp_path, slices):
    """name/fasta/annotation columns in any order: the files take the names, the summary goes where --summary says;
    a bad name or a repeated one is one line naming the list's line."""
    from genolin.predict import genome_list

    d = slices
    (d / "named.tsv").write_text("annotation\tname\tfasta\na.gff3\tstrain_A\ta.fa\n-\n".replace("-\n", "")
                                 + "b.gbk\tstrain.B\tb.fa\n")
    r = run_cli("predict", "--model", "bacteria", "--genomes", d / "named.tsv", "--device", "cpu", "--out-dir",
                tmp_path / "out", "--summary", tmp_path / "group1.tsv")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{g}.{s}" for g in ("strain_A", "strain.B") for s in ("plus.bedGraph", "minus.bedGraph", "peaks.bed", "gff3",
                                                               "genes.tsv"))
    rows = [line.split("\t")[0] for line in (tmp_path / "group1.tsv").read_text().splitlines()]
    assert rows == ["genome", "strain_A", "strain.B"]
    assert genome_list(d / "named.tsv")[1] == (str(d / "b.fa"), str(d / "b.gbk"), "strain.B")
    for text, message in (("name fasta\nx/y a.fa\n", "line 2: genome name 'x/y' is no file name"),
                          ("name fasta\ng a.fa\ng b.fa\n", "line 3: genome name 'g' given twice"),
                          ("fasta name\na.fa g extra\n", "line 2: expected fasta and name, got 3 field(s)")):
        (d / "bad.tsv").write_text(text)
        r = run_cli("predict", "--model", "bacteria", "--genomes", d / "bad.tsv", "--device", "cpu", "--out-dir",
                    tmp_path / "bad")
        assert r.exit_code != 0 and message in r.output and "Traceback" not in r.output, r.output
    r = run_cli("predict", "--model", "bacteria", "--fasta", d / "a.fa", "--out", tmp_path / "o", "--summary", "s")
    assert r.exit_code == 2 and "--summary is the table of an --out-dir run" in r.output


def test_training_genome_names_are_unique_as_predict_names_them():
    """Stems "g_3", "g", "g": the third is g_2 (a suffix by position would give g_3 twice)."""
    from genolin.io.fasta import Genome
    from genolin.tasks.track_data import unique_genome_names

    class Fake(Genome):
        def __init__(self, path):
            self.path = path

    assert unique_genome_names([Fake("x/g_3.fa"), Fake("a/g.fa"), Fake("b/g.fa.gz")]) == ["g_3", "g", "g_2"]
