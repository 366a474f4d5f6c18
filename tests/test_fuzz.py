"""Fuzzing every subcommand with damaged inputs (hypothesis): malformed FASTA (plain and gzip), CSV/TSV, BED, YAML
settings and damaged run directories. Whatever the damage: exit status 0, 1 or 2 (a usage error), never a traceback
or an "internal error", one "genolin: error:" line when refused, no output file then, and exit 0 only when the data
were read whole. The default run tries a few dozen inputs per target; the tests marked slow try many more."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import ECOLI_BGZ, GUE_TATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genolin.cli import cli
from genolin.io.fasta import read_fasta

(RECORD,) = read_fasta(ECOLI_BGZ)
GENOME = b">chrA\n" + RECORD.seq[:3000] + b"\n>chrB\n" + RECORD.seq[5000:6500] + b"\n"
FASTA = b">s1 label=1\nACGTACGTTTGACAATATAAT\n>s2 label=0\nGGGCCCAATTAACCGGT\nACGT\n"
CSV = b"".join(line.encode() + b"\n" for line in (GUE_TATA / "dev.csv").read_text().splitlines()[:41])
BED = b"chrA\t120\t121\tp1\t0\t+\nchrA\t2500\t2501\tp2\t0\t-\nchrB\t700\t701\tp3\t0\t+\n"
YAML = b"window_bp: 1024\nbatch_size: 2\nsteps: 2\nval_every_steps: 2\nmodel:\n  d_model: 16\n  n_layers: 1\n"
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
FUZZ_FEW = settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))  # a model runs each
FUZZ_FEW_LONG = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
FUZZ_LONG = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """``data`` with a few random edits: bytes flipped, deleted or inserted, lines dropped or repeated, cut."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "delete", "insert", "drop_line", "repeat_line", "cut", "text"]))
        i = draw(st.integers(0, max(0, len(out) - 1)))
        if kind == "flip" and out:
            out[i] = draw(st.integers(0, 255))
        elif kind == "delete":
            del out[i:i + draw(st.integers(1, 8))]
        elif kind == "insert":
            out[i:i] = draw(st.binary(min_size=1, max_size=6))
        elif kind == "text":
            out[i:i] = draw(st.sampled_from([b"\t", b",", b" ", b">", b"\n", b"N", b"-1", b"\r\n", b"\x00", b"\xff",
                                             b"label=", b"@", b"#", b":", b"{", b"[", b"'"]))
        elif kind in ("drop_line", "repeat_line"):
            lines = bytes(out).split(b"\n")
            j = draw(st.integers(0, len(lines) - 1))
            lines[j:j + 1] = [] if kind == "drop_line" else [lines[j], lines[j]]
            out = bytearray(b"\n".join(lines))
        elif kind == "cut":
            del out[i:]
    return bytes(out)


def invoke(*args):
    return CliRunner().invoke(cli, [*map(str, args)])


def check(result, outputs=()):
    """The contract of every subcommand on bad input."""
    text = result.output
    assert result.exit_code in (0, 1, 2), text
    assert "Traceback" not in text and "internal error" not in text, text
    if result.exit_code == 1:
        assert text.count("genolin: error:") == 1, text
        for path in outputs:
            assert not path.exists(), f"{path} left behind"
    return result.exit_code


def whole_fasta(data: bytes) -> tuple[int, int] | None:
    """(records, bases) a FASTA holds by a plain reading (headers '>', the rest bases), or None if not text."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError):
            return None
    lines = data.replace(b"\r", b"").split(b"\n")
    records = sum(1 for line in lines if line.startswith(b">"))
    bases = sum(len(line.translate(None, b" \t\v\f")) for line in lines if not line.startswith(b">"))
    return records, bases


def fasta_target(tmp_path, data: bytes):
    src = tmp_path / "in.fa.gz"
    src.write_bytes(data)
    out = tmp_path / "tokens.npz"
    out.unlink(missing_ok=True)
    if check(invoke("-q", "tokenize", "--fasta", src, "--k", 1, "--out", out), [out]) == 0:
        with np.load(out) as tokens:  # exit 0: every record and base of the file was read
            got = (len([k for k in tokens.files if k not in ("k", "stride", "vocab_size")]),
                   sum(len(tokens[k]) for k in tokens.files if k not in ("k", "stride", "vocab_size")))
        assert got == whole_fasta(data)
    sizes = tmp_path / "g.sizes"
    sizes.unlink(missing_ok=True)
    check(invoke("-q", "index", "--fasta", src, "--sizes", sizes), [sizes])


@FUZZ
@given(data=st.one_of(damaged(FASTA), damaged(gzip.compress(FASTA)), damaged(GENOME)))
def test_fuzz_fasta(tmp_path_factory, data):
    fasta_target(tmp_path_factory.mktemp("f"), data)


@pytest.mark.slow
@FUZZ_LONG
@given(data=st.one_of(damaged(FASTA), damaged(gzip.compress(FASTA)), damaged(GENOME)))
def test_fuzz_fasta_long(tmp_path_factory, data):
    fasta_target(tmp_path_factory.mktemp("f"), data)


def table_target(tmp_path, data: bytes):
    src = tmp_path / "in.csv"
    src.write_bytes(data)
    check(invoke("-q", "split", "--input", src, "--out-dir", tmp_path / "parts"), [tmp_path / "parts" / "train.tsv"])


@FUZZ
@given(data=damaged(CSV))
def test_fuzz_tables(tmp_path_factory, data):
    table_target(tmp_path_factory.mktemp("t"), data)


@pytest.mark.slow
@FUZZ_LONG
@given(data=damaged(CSV))
def test_fuzz_tables_long(tmp_path_factory, data):
    table_target(tmp_path_factory.mktemp("t"), data)


@pytest.fixture(scope="module")
def genome(tmp_path_factory):
    d = tmp_path_factory.mktemp("genome")
    (d / "g.fa").write_bytes(GENOME)
    return d / "g.fa"


def bed_yaml_target(tmp_path, genome, bed: bytes, yaml: bytes):
    (tmp_path / "t.bed").write_bytes(bed)
    (tmp_path / "c.yaml").write_bytes(yaml)
    out = tmp_path / "run"
    code = check(invoke("-q", "train", "--fasta", genome, "--tss", tmp_path / "t.bed", "--config", tmp_path / "c.yaml",
                        "--out", out))
    if code:
        assert not (out / "model.safetensors").exists()


@FUZZ_FEW
@given(data=st.data())
def test_fuzz_bed_and_settings(tmp_path_factory, genome, data):
    bed = data.draw(st.one_of(st.just(BED), damaged(BED)))
    yaml = data.draw(damaged(YAML) if bed == BED else st.just(YAML))
    bed_yaml_target(tmp_path_factory.mktemp("b"), genome, bed, yaml)


@pytest.mark.slow
@FUZZ_FEW_LONG
@given(data=st.data())
def test_fuzz_bed_and_settings_long(tmp_path_factory, genome, data):
    test_fuzz_bed_and_settings.hypothesis.inner_test(tmp_path_factory, genome, data)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, genome):
    d = tmp_path_factory.mktemp("trained")
    (d / "t.bed").write_bytes(BED)
    (d / "c.yaml").write_bytes(YAML)
    r = invoke("-q", "train", "--fasta", genome, "--tss", d / "t.bed", "--config", d / "c.yaml", "--out", d / "run")
    assert r.exit_code == 0, r.output
    return d


RUN_FILES = ("config.json", "best.safetensors", "trainer_state.json")


@FUZZ_FEW
@given(name=st.sampled_from(RUN_FILES), data=st.data())
def test_fuzz_damaged_run_directories(tmp_path_factory, trained, genome, name, data):
    tmp = tmp_path_factory.mktemp("r")
    run_dir = tmp / "run"
    shutil.copytree(trained / "run", run_dir)
    original = (run_dir / name).read_bytes()
    if name.endswith(".json") and data.draw(st.booleans()):  # valid JSON, wrong content (also nested settings)
        doc = json.loads(original)
        where = doc["train"] if name == "config.json" and data.draw(st.booleans()) else doc
        if where is not doc and data.draw(st.booleans()):
            where = where["model"]
        key = data.draw(st.sampled_from(sorted(where)))
        where[key] = data.draw(st.sampled_from([None, 0, -1, "x", [], {}, 1e308, True]))
        (run_dir / name).write_text(json.dumps(doc))
    else:
        (run_dir / name).write_bytes(data.draw(damaged(original)))
    prefix = tmp / "pred"
    check(invoke("-q", "predict", "--model", run_dir, "--fasta", genome, "--out", prefix),
          [tmp / "pred.plus.bedGraph", tmp / "pred.peaks.bed"])
    check(invoke("-q", "evaluate", "--model", run_dir, "--fasta", genome, "--tss", trained / "t.bed", "--out",
                 tmp / "ev"), [tmp / "ev" / "metrics.json"])
    if name == "trainer_state.json":
        check(invoke("-q", "train", "--resume", run_dir))


@pytest.mark.slow
@FUZZ_FEW_LONG
@given(name=st.sampled_from(RUN_FILES), data=st.data())
def test_fuzz_damaged_run_directories_long(tmp_path_factory, trained, genome, name, data):
    test_fuzz_damaged_run_directories.hypothesis.inner_test(tmp_path_factory, trained, genome, name, data)
