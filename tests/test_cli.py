"""The genolin command through click's CliRunner, and the installed entry point in a subprocess."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import ECOLI_BGZ, FIXTURES

from genolin import __version__
from genolin.cli import cli
from genolin.io.fasta import read_fasta
from genolin.tokenize import kmer_ids, vocab_size


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_help_and_version():
    result = run("--help")
    assert result.exit_code == 0 and "tokenize" in result.output and "--verbose" in result.output
    assert run("--version").output.strip() == f"genolin, version {__version__}"
    help_text = run("tokenize", "--help").output
    for option in ("--fasta", "--k", "--stride", "--out"):
        assert option in help_text
    assert "[default: 6" in help_text and "[default: 1" in help_text


def test_help_imports_neither_torch_nor_triton():
    code = ("import sys\nfrom genolin.cli import cli\n"
            "try:\n    cli(['--help'], prog_name='genolin')\nexcept SystemExit:\n    pass\n"
            "cli_mods = [m for m in ('torch', 'triton') if m in sys.modules]\n"
            "print('HEAVY', cli_mods)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out


def test_tokenize_multi_record(tmp_path):
    src = FIXTURES / "biopython" / "sequence.fa"
    out = tmp_path / "sub" / "tokens.npz"
    result = run("tokenize", "--fasta", str(src), "--k", "4", "--stride", "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    with np.load(out) as npz:
        records = list(read_fasta(src))
        assert set(npz.files) == {r.name for r in records} | {"k", "stride", "vocab_size"}
        assert (int(npz["k"]), int(npz["stride"]), int(npz["vocab_size"])) == (4, 2, vocab_size(4))
        for r in records:
            assert npz[r.name].dtype == np.int32
            assert np.array_equal(npz[r.name], kmer_ids(r.seq, 4, 2))
    assert [p.name for p in out.parent.iterdir()] == ["tokens.npz"]


def test_tokenize_bgzip_genome_compressed_output(tmp_path):
    out = tmp_path / "ecoli.npz"
    result = run("-q", "tokenize", "--fasta", str(ECOLI_BGZ), "--out", str(out), "--compress")
    assert result.exit_code == 0 and result.output == ""
    with np.load(out) as npz:
        assert npz["NC_000913.3"].shape == (4_641_652 - 5,)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b">a\nACGT\n>b\nACGTQ\n", ":4: record 'b': invalid character 'Q'"),
        (b"@r\nACGT\n+\nIIII\n", ":1: this looks like FASTQ"),
        (b">a\nAC\n>a\nGG\n", ":3: duplicate record name 'a'"),
        (b">k\nACGTACGT\n", ":1: record name 'k' clashes with the archive's metadata key"),
        (b"", ": empty file"),
    ],
)
def test_tokenize_bad_input_one_line_no_output(tmp_path, content, message):
    src = tmp_path / "in.fa"
    src.write_bytes(content)
    out = tmp_path / "out.npz"
    result = run("tokenize", "--fasta", str(src), "--out", str(out))
    assert result.exit_code == 1
    assert result.stderr == f"genolin: error: {src}{message}" + result.stderr.split(message, 1)[1]
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == [src]  # no output, no temporary file left behind


def test_verbose_shows_traceback(tmp_path):
    src = tmp_path / "in.fa"
    src.write_bytes(b"ACGT\n")
    result = run("-v", "tokenize", "--fasta", str(src), "--out", str(tmp_path / "o.npz"))
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "genolin: error:" in result.stderr.splitlines()[-1]


def test_missing_input_and_unwritable_output(tmp_path):
    result = run("tokenize", "--fasta", str(tmp_path / "nope.fa"), "--out", str(tmp_path / "o.npz"))
    assert result.exit_code == 1 and result.stderr == f"genolin: error: {tmp_path / 'nope.fa'}: no such file\n"
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run("tokenize", "--fasta", str(FIXTURES / "htslib" / "xx.fa"), "--out", str(blocker / "o.npz"))
    assert result.exit_code == 1 and result.stderr.startswith("genolin: error: ") and "Traceback" not in result.stderr


def test_bad_option_is_a_usage_error(tmp_path):
    result = run("tokenize", "--fasta", "x.fa", "--out", "o.npz", "--k", "13")
    assert result.exit_code == 2 and "13" in result.stderr


def test_entry_point_subprocess(tmp_path):
    """The real process: exit status 1, one line on stderr, no partial file."""
    src = FIXTURES / "biopython" / "fa01"
    out = tmp_path / "o.npz"
    proc = subprocess.run([sys.executable, "-m", "genolin", "tokenize", "--fasta", str(src), "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"genolin: error: {src}:2: record 'AK1H_ECOLI/1-378': invalid character")
    assert proc.stderr.count("\n") == 1 and not out.exists()


def test_a_training_process_exits_without_a_leak_report(tmp_path):
    """The real process exits without a leak report from Triton's nanobind module (training
    loads it through torch's optimizer), which freezing the exit's objects out of the collector would trigger."""
    rows = ["sequence,label"] + [f"{'ACGT'[i % 4] * 40}{'TTGACA' * (i % 2)},{i % 2}" for i in range(16)]
    data = tmp_path / "set.csv"
    data.write_text("\n".join(rows) + "\n")
    proc = subprocess.run([sys.executable, "-m", "genolin", "-q", "train", "--csv", str(data), "--val-csv", str(data),
                           "--max-steps", "1", "--device", "cpu", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "leaked" not in proc.stderr and "Traceback" not in proc.stderr
