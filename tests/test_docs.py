"""The error lines docs/usage.md shows are the ones genolin prints for those inputs, word for word."""

from __future__ import annotations

import gzip
import re
import shutil

from click.testing import CliRunner
from conftest import ECOLI_BGZ, REPO

from genolin.cli import cli


def documented_errors() -> list[str]:
    text = (REPO / "docs" / "usage.md").read_text()
    block = text[text.index("## Errors"):]
    block = block[block.index("```") + 3:]
    return [line for line in block[:block.index("```")].splitlines() if line.startswith("genolin: error:")]


def test_the_documented_error_lines_are_what_genolin_prints(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "proteins.fa").write_text(">p\nMKVLAAGIVGL\n")
    (tmp_path / "reads.fastq.gz").write_bytes(gzip.compress(b"@r1\nACGT\n+\nIIII\n"))
    whole = gzip.compress(b">c\n" + b"ACGT" * 5000 + b"\n")
    (tmp_path / "genome.fa.gz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "g.fa").write_text(">c1\nACGTACGTAC\n")
    (tmp_path / "tss.bed").write_text("chrX\t5\t6\tx\t0\t+\n")
    shutil.copy(ECOLI_BGZ, tmp_path / "genome.fa.bgz")
    commands = {"proteins.fa": ["predict", "--model", "bacteria", "--fasta", "proteins.fa", "--out", "o1"],
                "reads.fastq.gz": ["predict", "--model", "bacteria", "--fasta", "reads.fastq.gz", "--out", "o2"],
                "genome.fa.gz": ["predict", "--model", "bacteria", "--fasta", "genome.fa.gz", "--out", "o3"],
                "tss.bed": ["train", "--fasta", "g.fa", "--tss", "tss.bed", "--out", "o4"],
                "genome.fa.bgz": ["train", "--fasta", "genome.fa.bgz", "--out", "o5"]}
    lines = documented_errors()
    assert len(lines) == len(commands)
    for line in lines:
        name = re.match(r"genolin: error: ([^:]+)", line).group(1)
        r = CliRunner().invoke(cli, ["-q", *commands[name]])
        assert r.exit_code == 1 and line in r.output.splitlines(), (line, r.output)
