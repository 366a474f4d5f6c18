"""FASTA reading: real edge-case files, compression, random access, and every kind of bad input."""

from __future__ import annotations

import bz2
import gzip
import shutil

import numpy as np
import pytest
from Bio import bgzf
from conftest import ECOLI_BGZ, FIXTURES, shared_file
from hypothesis import given, settings
from hypothesis import strategies as st

import genolin.io.fasta as fasta_mod
from genolin.errors import InputError
from genolin.io.fasta import Genome, normalise, read_fasta, read_fasta_dict, sniff_compression

IUPAC = "RYSWKMBDHVN"


def reference_parse(text: str) -> dict[str, str]:
    """A line-by-line parser written for clarity, to hold the block parser against."""
    records: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        if line.startswith(">"):
            name = line[1:].split()[0]
            records[name] = []
        elif name is not None:
            records[name].append("".join(line.split()))
    table = str.maketrans({c: "N" for c in IUPAC + IUPAC.lower()} | {"U": "T", "u": "T"})
    return {n: "".join(parts).translate(table).upper() for n, parts in records.items()}


def as_str(records) -> dict[str, str]:
    return {r.name: r.seq.decode() for r in records}


# --- real edge-case files ---------------------------------------------------------------------------------


def test_htslib_faidx_empty_name_is_an_error():
    with pytest.raises(InputError, match=r"faidx\.fa:1: record header has no name"):
        list(read_fasta(FIXTURES / "htslib" / "faidx.fa"))


def test_htslib_faidx_records_match_samtools_index(tmp_path):
    """Trailing blank lines, a CRLF record, leading spaces before the name: lengths as samtools computed."""
    text = (FIXTURES / "htslib" / "faidx.fa").read_bytes()
    without_empty_name = text.split(b"\n", 2)[2]  # drop the record named '' (tested above)
    path = tmp_path / "faidx.fa"
    path.write_bytes(without_empty_name)
    expected = {}
    for line in (FIXTURES / "htslib" / "faidx.fa.expected.fai").read_text().splitlines():
        name, length = line.split("\t")[:2]
        if name:
            expected[name] = int(length)
    records = list(read_fasta(path))
    assert {r.name: len(r) for r in records} == expected
    assert records[2].name == "trailingblank3" and records[2].seq == b"ACGTA"  # CRLF record
    assert records[4].description == "description"
    # Random access gives the same bases (irregular line lengths: read into memory).
    with Genome(path) as genome:
        for r in records:
            assert genome.fetch(r.name) == r.seq


def test_biopython_f002_n_runs_and_control_characters_in_header():
    records = list(read_fasta(FIXTURES / "biopython" / "f002"))
    assert [r.name for r in records] == ["gi|1348912|gb|G26680|G26680", "gi|1348917|gb|G26685|G26685",
                                         "gi|1592936|gb|G29385|G29385"]
    assert [len(r) for r in records] == [633, 413, 471]
    assert all(set(r.seq) <= set(b"ACGTN") for r in records)
    assert b"N" in records[0].seq


def test_soft_masked_and_lower_case_n_blocks_become_upper_case():
    path = FIXTURES / "biopython" / "sequence.fa"
    records = list(read_fasta(path))
    raw = reference_parse(path.read_text())
    assert as_str(records) == raw
    text = path.read_text()
    assert any(c.islower() for c in text) and "n" in text  # the file really is soft-masked
    assert all(r.seq == r.seq.upper() for r in records)


def test_lower_case_file_equals_upper_case_file():
    (lc,) = read_fasta(FIXTURES / "biopython" / "NC_001802lc.fna")
    assert len(lc) == 9181 and lc.seq == lc.seq.upper()
    assert lc.name == "gi|9629357|ref|nc_001802.1|"  # names keep their case


def test_blank_line_between_records_and_unequal_line_widths():
    path = FIXTURES / "pyfaidx" / "issue_83.fasta"
    records = list(read_fasta(path))
    assert [(r.name, len(r)) for r in records] == [("MT", 119), ("GL000207.1", 60)]
    assert as_str(records) == reference_parse(path.read_text())
    with Genome(path) as genome:
        assert genome.lengths == {"MT": 119, "GL000207.1": 60}
        assert genome.fetch("MT", 10, 30) == records[0].seq[10:30]


@pytest.mark.parametrize("block", [7, 1000, 1 << 22])
def test_unwrapped_40kb_soft_masked_line_any_block_size(monkeypatch, block):
    monkeypatch.setattr(fasta_mod, "BLOCK_SIZE", block)
    path = FIXTURES / "pyfaidx" / "chr17.hg19.part.fa"
    (rec,) = read_fasta(path)
    raw = path.read_text().splitlines()[1]
    assert len(rec) == len(raw) == 40000
    assert sum(c.islower() for c in raw) == 17395
    assert rec.seq == raw.upper().encode()


def test_fasta_from_fastq_conversion_and_multiline():
    records = list(read_fasta(FIXTURES / "htslib" / "multiline.fa"))
    assert [(r.name, len(r)) for r in records] == [("seq1", 39), ("seq2", 39)]


# --- the block parser against the reference, on generated files -------------------------------------------

bases = st.text(alphabet="ACGTacgtNnRyU", max_size=300)


@st.composite
def fasta_texts(draw):
    n = draw(st.integers(1, 5))
    seqs = draw(st.lists(bases, min_size=n, max_size=n))
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    out = []
    for i, seq in enumerate(seqs):
        out.append(f">rec{i} some description{eol}")
        width = draw(st.integers(1, 80))
        lines = [seq[j:j + width] for j in range(0, len(seq), width)]
        for line in lines:
            out.append(line + eol)
            if draw(st.integers(0, 9)) == 0:
                out.append(eol)  # a blank line
    if draw(st.booleans()) and out[-1].endswith(eol):
        out[-1] = out[-1][: -len(eol)]  # no final newline
    return "".join(out)


@settings(max_examples=150, deadline=None)
@given(text=fasta_texts(), block=st.sampled_from([1, 2, 3, 5, 17, 64, 1 << 22]), gz=st.booleans())
def test_block_parser_equals_reference(tmp_path_factory, text, block, gz):
    path = tmp_path_factory.mktemp("f") / ("x.fa.gz" if gz else "x.fa")
    (gzip.open if gz else open)(path, "wb").write(text.encode())
    old = fasta_mod.BLOCK_SIZE
    fasta_mod.BLOCK_SIZE = block
    try:
        records = list(read_fasta(path))
    finally:
        fasta_mod.BLOCK_SIZE = old
    assert as_str(records) == reference_parse(text)
    # header line numbers
    lines = text.splitlines()
    for r in records:
        assert lines[r.line - 1].startswith(f">{r.name}")


# --- compression and random access ---------------------------------------------------------------------------


def write_bgzf(path, data: bytes) -> None:
    with bgzf.BgzfWriter(str(path), "wb") as fh:
        fh.write(data)


def test_plain_gzip_and_bgzip_give_the_same_records(tmp_path):
    text = (FIXTURES / "biopython" / "sequence.fa").read_bytes()
    plain, gz, bgz = tmp_path / "a.fa", tmp_path / "a.fa.gz", tmp_path / "a.fa.bgz"
    plain.write_bytes(text)
    gz.write_bytes(gzip.compress(text))
    write_bgzf(bgz, text)
    assert [sniff_compression(p) for p in (plain, gz, bgz)] == ["plain", "gzip", "bgzf"]
    expected = read_fasta_dict(plain)
    assert read_fasta_dict(gz) == expected == read_fasta_dict(bgz)
    for path in (plain, gz, bgz):
        with Genome(path) as genome:
            assert genome.lengths == {k: len(v) for k, v in expected.items()}
            for name, seq in expected.items():
                end = min(101, len(seq))
                assert genome.fetch(name, 3, end) == seq[3:end]
    assert (tmp_path / "a.fa.bgz.fai").exists() and (tmp_path / "a.fa.bgz.gzi").exists()  # built when missing
    assert (tmp_path / "a.fa.fai").exists()


CIRCULAR_HEADERS = {  # header after '>' -> circular
    "chr1 Escherichia coli K-12 [location=chromosome] [topology=circular]": True,
    "pX1 length=5000 depth=1.00x circular=true": True,
    "c3 Topology=Circular": True,
    "c4 circular=TRUE;": True,
    "c5 [topology=linear]": False,
    "c6 circular=false": False,
    "c7 complete genome": False,
    "c8": False,
    "c9 topology=circularish note=circular=true-ish": False,
    "c10 topology=circular circular=false": False,  # the last mark wins
}


def test_header_words_mark_records_circular(tmp_path):
    """``topology=circular`` (bracketed or not) and ``circular=true``, any case, mark a record circular, in the
    streaming reader and in every kind of random access (plain and BGZF through the index, with CRLF lines and
    blank lines before the first record; plain gzip read into memory)."""
    text = "".join(f">{h}\nACGTACGTAC\nGT\n" for h in CIRCULAR_HEADERS)
    want = {h.split()[0] for h, c in CIRCULAR_HEADERS.items() if c}
    assert {r.name for r in read_fasta_from_text(tmp_path, text) if r.circular} == want
    variants = {"a.fa": text.encode(), "b.fa": ("\n\n" + text.replace("\n", "\r\n")).encode()}
    for name, data in variants.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "c.fa.gz").write_bytes(gzip.compress(text.encode()))
    write_bgzf(tmp_path / "d.fa.bgz", text.encode())
    for name in ("a.fa", "b.fa", "c.fa.gz", "d.fa.bgz"):
        genome = Genome(tmp_path / name)
        assert (genome._faidx is None) == (name == "c.fa.gz")
        assert genome.circular == want, name
        genome.close()


@pytest.mark.parametrize("gap", [0, -1, 1])
def test_circular_headers_at_a_bgzf_block_boundary(tmp_path, gap):
    """A BGZF file whose second header starts at byte 65,536, the start of the second block (where pyfaidx's
    header lookup fails), and one byte either side: the records, their lengths and circular marks all read."""
    head = ">chr1 first\n"
    first = head + "A" * (65_536 + gap - len(head) - 1) + "\n"
    text = first + ">chr2 topology=circular\nACGTACGT\n>chr3\nAC\n"
    write_bgzf(tmp_path / "e.fa.bgz", text.encode())
    genome = Genome(tmp_path / "e.fa.bgz")
    assert genome.lengths == {"chr1": len(first) - len(head) - 1, "chr2": 8, "chr3": 2}
    assert genome.circular == {"chr2"}
    genome.close()


def read_fasta_from_text(folder, text: str):
    path = folder / "text.fa"
    path.write_text(text)
    return list(read_fasta(path))


def test_index_goes_to_cache_when_folder_is_read_only(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy(FIXTURES / "htslib" / "xx.fa", folder / "xx.fa")
    folder.chmod(0o555)
    try:
        with Genome(folder / "xx.fa") as genome:
            assert genome.lengths == {"xx": 20, "yy": 20, "zz": 30}
            assert genome.fetch("zz", 0, 5) == read_fasta_dict(folder / "xx.fa")["zz"][:5]
        assert not (folder / "xx.fa.fai").exists()
    finally:
        folder.chmod(0o755)


def _count_records(path, barrier, results) -> None:
    barrier.wait()  # every process opens the genome at once, while the first builds the index
    try:
        with Genome(path) as genome:
            results.put((len(genome.lengths), sum(genome.lengths.values())))
    except Exception as exc:  # noqa: BLE001 - the test compares what each process saw
        results.put(repr(exc))


@pytest.mark.parametrize("compressed", [False, True])
def test_processes_opening_a_new_genome_at_once_all_read_every_record(tmp_path, compressed):
    """torchrun's ranks and parallel workflow jobs open one unindexed FASTA together: each finds either no index
    (and builds its own under a temporary name) or a whole one, never a half-written one (which read as fewer or no
    records, and an empty prediction that exited 0)."""
    import multiprocessing

    n = 20_000
    text = "".join(f">r{i}\n{'ACGT' * (5 + i % 7)}\n" for i in range(n)).encode()
    path = tmp_path / ("g.fa.bgz" if compressed else "g.fa")
    if compressed:
        write_bgzf(path, text)
    else:
        path.write_bytes(text)
    expected = (n, sum(4 * (5 + i % 7) for i in range(n)))
    ctx = multiprocessing.get_context("fork")
    procs = 6
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_count_records, args=(path, barrier, results)) for _ in range(procs)]
    for w in workers:
        w.start()
    got = [results.get(timeout=120) for _ in workers]
    for w in workers:
        w.join()
    assert got == [expected] * procs
    assert sorted(q.name for q in tmp_path.iterdir()) == sorted(
        [path.name, path.name + ".fai"] + ([path.name + ".gzi"] if compressed else []))  # no temporary files


def test_stale_or_empty_index_is_rebuilt(tmp_path):
    import os

    path = tmp_path / "xx.fa"
    shutil.copy(FIXTURES / "htslib" / "xx.fa", path)
    fai = tmp_path / "xx.fa.fai"
    fai.write_text("xx\t5\t4\t20\t21\n")  # an index of another file, older than this one
    os.utime(fai, (path.stat().st_mtime - 10,) * 2)
    with Genome(path) as genome:
        assert genome.lengths == {"xx": 20, "yy": 20, "zz": 30}
    fai.write_text("")  # as left by a write that was cut off, newer than the FASTA
    with Genome(path) as genome:
        assert genome.lengths == {"xx": 20, "yy": 20, "zz": 30}
    assert fai.read_text().startswith("xx\t20\t")


def test_ecoli_genome_bundled():
    """The bundled bgzip E. coli K-12 genome: one record of 4,641,652 bp with the documented composition."""
    (rec,) = read_fasta(ECOLI_BGZ)
    assert rec.name == "NC_000913.3" and len(rec) == 4_641_652
    assert [rec.seq.count(b) for b in b"ACGT"] == [1_142_742, 1_180_091, 1_177_437, 1_141_382]
    with Genome(ECOLI_BGZ) as genome:
        assert genome.lengths == {"NC_000913.3": 4_641_652}
        for start in (0, 1_000_003, 4_641_600):
            assert genome.fetch("NC_000913.3", start, start + 52) == rec.seq[start:start + 52]


def test_ecoli_shared_plain_gzip_equals_bgzip():
    gz = shared_file("ecoli_k12/GCF_000005845.2_ASM584v2_genomic.fna.gz")
    bgz = shared_file("ecoli_k12/NC_000913.3.fa.bgz")
    (a,), (b,) = read_fasta(gz), read_fasta(bgz)
    assert a.seq == b.seq and a.name == b.name == "NC_000913.3"
    assert "Escherichia coli" in a.description
    with Genome(bgz) as genome:  # read-only folder with its own .fai/.gzi
        assert genome.fetch("NC_000913.3", 2_000_000, 2_000_100) == a.seq[2_000_000:2_000_100]


def test_iupac_codes_become_n_and_u_becomes_t():
    assert normalise(b"acgtRYSWKMBDHVNryswkmbdhvnUu") == b"ACGT" + b"N" * 22 + b"TT"


# --- bad input ---------------------------------------------------------------------------------------------


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("content", "message", "where"),
    [
        (b"", "empty file", None),
        (b"\n\n  \n", "only blank lines", None),
        (b"ACGTACGT\n", "no FASTA header", "1"),
        (b"\n\nACGT\n>x\nACGT\n", "no FASTA header", "3"),
        (b">x\nACGT\n>y\nAC7T\n", "invalid character '7'", "4"),
        (b">x\nACGT\nAC-T\n", "invalid character '-'.*gaps", "3"),
        (b">x\nACGT*\n", "invalid character '\\*'", "2"),
        (b">x\nMKVLEQ\n", "invalid character 'L'.*protein", "2"),
        (b">x\r\nAC\r\nGX\r\n", "invalid character 'X'", "3"),
        (b">x\nACGT\n>x\nACGT\n", "duplicate record name 'x' \\(first at line 1\\)", "3"),
        (b">\nACGT\n", "no name", "1"),
        (b"@r1\nACGT\n+\nIIII\n", "looks like FASTQ", "1"),
        (b"\x00\x01\x02binary\xff\xfe", "binary data", None),
        (b"\x89PNG\r\n\x1a\n\xff\xfe\xfa", "binary data", None),
    ],
)
def test_bad_fasta(tmp_path, content, message, where):
    path = write(tmp_path, "bad.fa", content)
    with pytest.raises(InputError, match=message) as info:
        list(read_fasta(path))
    assert info.value.path == str(path)
    assert (str(info.value.where) if info.value.where is not None else None) == where
    assert str(info.value).startswith(f"{path}:" + (f"{where}:" if where else ""))


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        list(read_fasta(tmp_path / "nope.fa"))


@pytest.mark.parametrize("name", ["example.fastq", "example.fastq.gz", "example.fastq.bgz"])
def test_fastq_given_as_fasta(name):
    with pytest.raises(InputError, match="FASTQ"):
        list(read_fasta(FIXTURES / "biopython" / name))


def test_multiline_fastq_given_as_fasta():
    with pytest.raises(InputError, match="FASTQ"):
        Genome(FIXTURES / "htslib" / "multiline.fq")


def test_protein_alignment_fa01():
    with pytest.raises(InputError, match=r"fa01:2: record 'AK1H_ECOLI/1-378': invalid character.*protein"):
        list(read_fasta(FIXTURES / "biopython" / "fa01"))


def test_duplicate_names_dups_fasta():
    with pytest.raises(InputError, match=r"dups\.fasta:\d+: duplicate record name 'alpha'"):
        list(read_fasta(FIXTURES / "biopython" / "dups.fasta"))
    with pytest.raises(InputError, match="duplicate record name 'alpha'"):
        Genome(FIXTURES / "biopython" / "dups.fasta")


def test_truncated_gzip(tmp_path):
    data = gzip.compress((FIXTURES / "pyfaidx" / "chr17.hg19.part.fa").read_bytes())
    path = write(tmp_path, "cut.fa.gz", data[: len(data) // 2])
    with pytest.raises(InputError, match="corrupt or truncated gzip"):
        list(read_fasta(path))


def test_corrupt_gzip(tmp_path):
    data = bytearray(gzip.compress((FIXTURES / "pyfaidx" / "chr17.hg19.part.fa").read_bytes()))
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)
    path = write(tmp_path, "bad.fa.gz", bytes(data))
    with pytest.raises(InputError, match="corrupt or truncated gzip"):
        list(read_fasta(path))


def test_other_compression_is_named(tmp_path):
    path = write(tmp_path, "x.fa.bz2", bz2.compress(b">x\nACGT\n"))
    with pytest.raises(InputError, match="bzip2-compressed"):
        list(read_fasta(path))


def test_genome_fetch_validates_region(tmp_path):
    import pyfaidx

    path = write(tmp_path, "g.fa", b">a\nACGTACGTAC\nACGTEEGTAC\n")
    with pytest.raises(InputError, match="record 'a' position 15: invalid character 'E'"):
        Genome(path)  # checked before genolin indexes it
    assert not (tmp_path / "g.fa.fai").exists()
    pyfaidx.Faidx(str(path)).close()  # an index made elsewhere: the file is read as it is, and checked by region
    with Genome(path) as genome:
        assert genome.fetch("a", 0, 10) == b"ACGTACGTAC"
        with pytest.raises(InputError, match="record 'a' position 15: invalid character 'E'"):
            genome.fetch("a", 5, 20)
        with pytest.raises(ValueError):
            genome.fetch("a", 5, 50)


def test_bgzf_of_full_64_kib_blocks_reads_across_every_block_start(tmp_path):
    """Bio.bgzf writes blocks of 65,536 bytes; pyfaidx 0.9 cannot seek to the first byte of the block after such a
    one ("within_block_offset ... got 65536"). Every region starting at or near a block's first byte reads as in
    the plain file, the record's first base included."""
    from Bio import bgzf

    rng = np.random.default_rng(5)
    seqs = {"a": "".join(rng.choice(list("ACGT"), 200_003)), "b": "".join(rng.choice(list("ACGT"), 70_000))}
    text = "".join(f">{n}\n" + "\n".join(s[i:i + 80] for i in range(0, len(s), 80)) + "\n" for n, s in seqs.items())
    with bgzf.BgzfWriter(str(tmp_path / "g.fa.gz"), "wb") as fh:
        fh.write(text.encode())
    genome = Genome(tmp_path / "g.fa.gz")
    starts = {"a": 3, "b": len(text.split(">b\n")[0]) + 3}  # each record's first base, as a file offset
    for name, seq in seqs.items():
        for block in range(1, len(text) // 65_536 + 1):
            base = block * 65_536 - starts[name]
            base -= base // 81  # the base whose byte is the block's first (80 bases and a newline a line)
            for start in range(max(0, base - 2), min(len(seq), base + 3)):
                assert genome.fetch(name, start, min(len(seq), start + 500)) == seq[start:start + 500].encode()
    with bgzf.BgzfWriter(str(tmp_path / "h.fa.gz"), "wb") as fh:  # record i's first base: a block's first byte
        fh.write((">h\n" + "A" * 65_529 + "\n>i\n" + "C" * 100 + "G" * 100 + "\n").encode())
    genome = Genome(tmp_path / "h.fa.gz")
    assert genome.fetch("i", 0, 150) == b"C" * 100 + b"G" * 50 and genome.fetch("h", 65_520) == b"A" * 9
